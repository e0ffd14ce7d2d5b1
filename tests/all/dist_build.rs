//! `apiary pack build`: reproducible archives, sha256sum files, exclusions, secret refusal.

use std::io::Read;

use apiary_e2e::{Run, apiary, corpus, write_tree};

use crate::support::dist::{build, run_root, sha256_hex, write_pack};

fn names_in(archive: &std::path::Path) -> Vec<String> {
    let f = std::fs::File::open(archive).unwrap();
    let mut z = zip::ZipArchive::new(f).unwrap();
    (0..z.len())
        .map(|i| z.by_index(i).unwrap().name().unwrap().to_string())
        .collect()
}

#[test]
fn build_writes_archive_and_sha256sum_file() {
    let home = tempfile::tempdir().unwrap();
    let pack = home.path().join("src");
    write_pack(&pack, "com.example.dist-test", "1.2.0");
    let out = home.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let (archive, sha) = build(home.path(), &pack, &out);
    assert_eq!(
        archive.file_name().unwrap(),
        "dist-test-1.2.0.buzzpack",
        "<pack-name> is the last segment of the id"
    );
    let bytes = std::fs::read(&archive).unwrap();
    assert_eq!(sha256_hex(&bytes), sha);
    let sum = std::fs::read_to_string(out.join("dist-test-1.2.0.buzzpack.sha256")).unwrap();
    assert_eq!(sum, format!("{sha}  dist-test-1.2.0.buzzpack\n"));
    // `sha256sum -c` agrees, when the tool exists.
    if let Ok(o) = std::process::Command::new("sha256sum")
        .current_dir(&out)
        .args(["-c", "dist-test-1.2.0.buzzpack.sha256"])
        .output()
    {
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stdout));
    }
    // Sorted entries, fixed time, fixed permissions.
    let names = names_in(&archive);
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted);
    let mut z = zip::ZipArchive::new(std::fs::File::open(&archive).unwrap()).unwrap();
    for i in 0..z.len() {
        let e = z.by_index(i).unwrap();
        assert_eq!(
            e.unix_mode().map(|m| m & 0o777),
            Some(0o644),
            "{:?}",
            e.name()
        );
        let t = e.last_modified().unwrap();
        assert_eq!((t.year(), t.month(), t.day()), (1980, 1, 1));
    }
    // The default output is the current directory.
    let mut cmd = apiary(home.path());
    cmd.current_dir(&out).args(["pack", "build"]).arg(&pack);
    let run = Run::of(cmd);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stderr.contains(&sha), "{}", run.stderr);
}

#[test]
fn builds_are_reproducible_and_ignore_mtimes_and_modes() {
    let home = tempfile::tempdir().unwrap();
    let pack = home.path().join("src");
    write_pack(&pack, "com.example.repro", "0.3.0");
    let a = home.path().join("a.buzzpack");
    let b = home.path().join("b.buzzpack");
    let (_, sha_a) = build(home.path(), &pack, &a);
    // Touch every file and change a mode: the archive must not change.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    for f in ["instructions.md", "agents/pip.persona.md", "hooks/setup.sh"] {
        let p = pack.join(f);
        let text = std::fs::read(&p).unwrap();
        std::fs::write(&p, text).unwrap();
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(
            pack.join("hooks/setup.sh"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
    }
    let (_, sha_b) = build(home.path(), &pack, &b);
    assert_eq!(sha_a, sha_b);
    assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
}

#[test]
fn build_install_build_again_is_byte_identical() {
    let home = tempfile::tempdir().unwrap();
    let root = home.path().join("root");
    for (i, src) in [
        corpus().join("buzz-packs/syncreus-hivepack/packs/ship-squad"),
        corpus().join("buzz-packs/block-buzz/crates/buzz-persona/packs/sms-operator"),
    ]
    .iter()
    .enumerate()
    {
        let first = home.path().join(format!("first-{i}"));
        std::fs::create_dir(&first).unwrap();
        let (archive1, sha1) = build(home.path(), src, &first);
        let run = run_root(home.path(), &root, &["install", archive1.to_str().unwrap()]);
        assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
        let id = run.json()["pack_id"].as_str().unwrap().to_string();
        assert_eq!(run.json()["lock"]["sha256"], sha1.as_str());

        // Again from the same source...
        let second = home.path().join(format!("second-{i}"));
        std::fs::create_dir(&second).unwrap();
        let (archive2, sha2) = build(home.path(), src, &second);
        assert_eq!(sha1, sha2);
        assert_eq!(
            std::fs::read(&archive1).unwrap(),
            std::fs::read(&archive2).unwrap()
        );
        // ...and from the installed copy (its install record is not part of the pack).
        let third = home.path().join(format!("third-{i}"));
        std::fs::create_dir(&third).unwrap();
        let (archive3, sha3) = build(home.path(), &root.join(&id), &third);
        assert_eq!(sha1, sha3);
        assert_eq!(
            std::fs::read(&archive1).unwrap(),
            std::fs::read(&archive3).unwrap()
        );
    }
}

#[test]
fn vcs_agent_state_and_artefacts_are_left_out() {
    let home = tempfile::tempdir().unwrap();
    let pack = home.path().join("src");
    write_pack(&pack, "com.example.clean", "1.0.0");
    write_tree(
        &pack,
        &[
            (".git/config", "[core]\n"),
            (".agents/skills/notes/SKILL.md", "copied at deploy time"),
            (".goose/session.json", "{}"),
            ("node_modules/x/index.js", "x"),
            ("target/debug/out", "x"),
            ("old-1.0.0.buzzpack", "PK"),
            ("old-1.0.0.buzzpack.sha256", "x"),
            (".DS_Store", "x"),
            ("pack.lock", "{}"),
            (".env.example", "API_KEY=\n"),
            ("README.md", "# readme\n"),
        ],
    );
    let (archive, _) = build(home.path(), &pack, &home.path().join("x.buzzpack"));
    let names = names_in(&archive);
    assert_eq!(
        names,
        vec![
            ".env.example",
            ".plugin/plugin.json",
            "README.md",
            "agents/pip.persona.md",
            "hooks/hooks.json",
            "hooks/setup.sh",
            "instructions.md",
            "skills/notes/SKILL.md",
        ]
    );
    // Sanity: the archive really holds the bytes of the files.
    let mut z = zip::ZipArchive::new(std::fs::File::open(&archive).unwrap()).unwrap();
    let mut s = String::new();
    z.by_name("README.md")
        .unwrap()
        .read_to_string(&mut s)
        .unwrap();
    assert_eq!(s, "# readme\n");
}

#[test]
fn secrets_are_refused_by_name_and_content() {
    let home = tempfile::tempdir().unwrap();
    let pack = home.path().join("src");
    write_pack(&pack, "com.example.leaky", "1.0.0");
    write_tree(
        &pack,
        &[
            (".env", "OPENAI_API_KEY=sk-live\n"),
            ("keys/deploy.pem", "x"),
            (
                "skills/notes/key.txt",
                "-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----\n",
            ),
        ],
    );
    let out = home.path().join("x.buzzpack");
    let mut cmd = apiary(home.path());
    cmd.args(["pack", "build", "--output"]).arg(&out).arg(&pack);
    let run = Run::of(cmd);
    assert_eq!(run.code, 1);
    for name in [".env", "keys/deploy.pem", "skills/notes/key.txt"] {
        assert!(
            run.stderr.contains(name),
            "{name} not named:\n{}",
            run.stderr
        );
    }
    assert!(run.stderr.contains("secret"), "{}", run.stderr);
    assert!(!out.exists(), "no archive is written");

    let mut cmd = apiary(home.path());
    cmd.args(["pack", "build", "--json", "--output"])
        .arg(&out)
        .arg(&pack);
    let run = Run::of(cmd);
    assert_eq!(run.json()["error"]["code"], "build.secret");
}

#[test]
fn an_invalid_pack_is_not_built() {
    let home = tempfile::tempdir().unwrap();
    let pack = home.path().join("src");
    write_pack(&pack, "com.example.broken", "1.0.0");
    std::fs::remove_file(pack.join("agents/pip.persona.md")).unwrap();
    let out = home.path().join("x.buzzpack");
    let mut cmd = apiary(home.path());
    cmd.args(["pack", "build", "--output"]).arg(&out).arg(&pack);
    let run = Run::of(cmd);
    assert_eq!(run.code, 1);
    assert!(run.stderr.contains("pip.persona.md"), "{}", run.stderr);
    assert!(!out.exists());
    let mut cmd = apiary(home.path());
    cmd.args(["pack", "build", "--json", "--output"])
        .arg(&out)
        .arg(&pack);
    let v = Run::of(cmd).json();
    assert_eq!(v["error"]["code"], "pack.invalid");
    assert!(!v["error"]["diagnostics"].as_array().unwrap().is_empty());
}

/// Issue 32, finding 8: `--output` naming a FIFO (or a link) is refused, and the FIFO is left as it
/// was; the same build into a plain file path is written.
#[cfg(unix)]
#[test]
fn build_output_never_replaces_a_fifo_or_a_link() {
    let home = tempfile::tempdir().unwrap();
    let pack = home.path().join("src");
    write_pack(&pack, "com.example.dist-test", "1.2.0");
    let fifo = home.path().join("pipe.buzzpack");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let link = home.path().join("link.buzzpack");
    std::os::unix::fs::symlink(home.path().join("somewhere"), &link).unwrap();
    for (target, kind) in [(&fifo, "FIFO"), (&link, "link")] {
        let mut cmd = apiary(home.path());
        cmd.args(["pack", "build", "--output"])
            .arg(target)
            .arg(&pack);
        let run = Run::bounded(cmd, 60);
        assert_eq!(run.code, 1, "{}", run.stderr);
        assert!(
            run.stderr.contains(kind) && run.stderr.contains("choose another --output"),
            "{}",
            run.stderr
        );
    }
    use std::os::unix::fs::FileTypeExt;
    assert!(
        std::fs::symlink_metadata(&fifo)
            .unwrap()
            .file_type()
            .is_fifo()
    );
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    let plain = home.path().join("plain.buzzpack");
    let mut cmd = apiary(home.path());
    cmd.args(["pack", "build", "--output"])
        .arg(&plain)
        .arg(&pack);
    let run = Run::bounded(cmd, 60);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(plain.is_file());
}
