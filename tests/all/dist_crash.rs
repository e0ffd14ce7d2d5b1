//! Crash safety: an upgrade killed (SIGKILL) at many points. After every kill, `pack.lock` is a
//! complete lock naming one of the two versions; after the next command (here `apiary verify`,
//! which settles an interrupted install before checking), the pack directory holds exactly the files
//! of the version the lock names, no scratch is left, and verify passes.
//!
//! `APIARY_TEST_STEP_DELAY_MS` (test-only, see `apiary::dist::install`) stretches each install step
//! so that a sweep of kill delays lands in every step.

use std::process::Stdio;
use std::time::Duration;

use apiary_e2e::{apiary, snapshot};

use crate::support::dist::{assert_root_clean, build, lock, run_root, write_pack};

const ID: &str = "com.example.crash";
const STEP_MS: u64 = 25;
const KILLS: u64 = 24;

#[test]
fn killing_an_upgrade_at_any_point_leaves_one_complete_version() {
    let home = tempfile::tempdir().unwrap();
    let root = home.path().join("root");
    let mut archives = Vec::new();
    let mut expected = Vec::new();
    for version in ["1.0.0", "2.0.0"] {
        let src = home.path().join(format!("src-{version}"));
        write_pack(&src, ID, version);
        if version == "2.0.0" {
            // The versions differ in their file sets too, not only in contents.
            std::fs::write(src.join("README.md"), "only in 2.0.0\n").unwrap();
        }
        let out = home.path().join(format!("out-{version}"));
        std::fs::create_dir(&out).unwrap();
        archives.push(build(home.path(), &src, &out).0);
        expected.push((version, snapshot(&src, &[])));
    }
    let run = run_root(
        home.path(),
        &root,
        &["install", archives[0].to_str().unwrap()],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    // Time one whole slowed-down upgrade (1 -> 2) on this machine, so the kills sweep all of it
    // however loaded the machine is.
    let start = std::time::Instant::now();
    let mut cmd = apiary(home.path());
    cmd.env("APIARY_TEST_STEP_DELAY_MS", STEP_MS.to_string())
        .args(["install", "--json", "--root"])
        .arg(&root)
        .arg(&archives[1]);
    let run = apiary_e2e::Run::of(cmd);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let whole = start.elapsed().as_millis() as u64;

    let mut current = 1usize;
    let (mut rolled_back, mut completed) = (0, 0);
    // A time-seeded jitter so repeated runs probe different instants.
    let mut seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos() as u64
        | 1;
    for i in 0..KILLS {
        let target = 1 - current;
        let mut cmd = apiary(home.path());
        cmd.env("APIARY_TEST_STEP_DELAY_MS", STEP_MS.to_string())
            .args(["install", "--json", "--root"])
            .arg(&root)
            .arg(&archives[target])
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let mut child = cmd.spawn().unwrap();
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        // Sweep from 0 to a little past the end of a whole install, plus up to 15 ms of jitter.
        let delay = i * (whole + whole / 5) / KILLS + seed % 15;
        std::thread::sleep(Duration::from_millis(delay));
        let _ = child.kill();
        let _ = child.wait();

        // Before any recovery: pack.lock is whole and names one of the two versions.
        let before: serde_json::Value =
            serde_json::from_slice(&std::fs::read(root.join("pack.lock")).unwrap())
                .unwrap_or_else(|e| panic!("kill {i} at {delay} ms: pack.lock is torn: {e}"));
        let v = before[ID]["version"].as_str().unwrap().to_string();
        assert!(
            v == expected[current].0 || v == expected[target].0,
            "kill {i}: lock names {v}"
        );

        // The next command settles the install; verify passes.
        let run = run_root(home.path(), &root, &["verify"]);
        assert_eq!(
            run.code, 0,
            "kill {i} at {delay} ms: verify failed:\n{}\n{}",
            run.stdout, run.stderr
        );
        let v = lock(&root)[ID]["version"].as_str().unwrap().to_string();
        let now = if v == expected[target].0 {
            target
        } else {
            current
        };
        assert_eq!(
            snapshot(&root.join(ID), &[".apiary-install.json"]),
            expected[now].1,
            "kill {i} at {delay} ms: files do not match version {v}"
        );
        assert_root_clean(&root, &[".apiary", "pack.lock", ID]);
        if now == target {
            completed += 1;
        } else {
            rolled_back += 1;
        }
        current = now;
    }
    eprintln!(
        "{KILLS} kills over {whole} ms: {rolled_back} left the previous version, {completed} the new one"
    );
    assert!(rolled_back > 0, "no kill landed before the commit");
    assert!(completed > 0, "no kill landed after the commit");
}

#[test]
fn concurrent_installs_are_serialised() {
    let home = tempfile::tempdir().unwrap();
    let root = home.path().join("root");
    let mut archives = Vec::new();
    for version in ["1.0.0", "2.0.0"] {
        let src = home.path().join(format!("src-{version}"));
        write_pack(&src, ID, version);
        let out = home.path().join(format!("out-{version}"));
        std::fs::create_dir(&out).unwrap();
        archives.push(build(home.path(), &src, &out).0);
    }
    let children: Vec<_> = (0..4)
        .map(|i| {
            let mut cmd = apiary(home.path());
            cmd.env("APIARY_TEST_STEP_DELAY_MS", "5")
                .args(["install", "--json", "--root"])
                .arg(&root)
                .arg(&archives[i % 2])
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            cmd.spawn().unwrap()
        })
        .collect();
    for mut c in children {
        assert!(c.wait().unwrap().success());
    }
    let run = run_root(home.path(), &root, &["verify"]);
    assert_eq!(run.code, 0, "{}", run.stdout);
    assert_root_clean(&root, &[".apiary", "pack.lock", ID]);
}
