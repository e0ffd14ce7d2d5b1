//! Where things live: `up` and `hook run` find the persona workspaces in one place (the data dir's
//! `workspaces/`, `$APIARY_DATA_DIR` included, or `--workspace-root` / `$APIARY_WORKSPACE_ROOT`),
//! and both document the one flag and variable.

use std::path::{Path, PathBuf};

use apiary_e2e::{Run, apiary, guest};

use crate::support::live::{Up, persona, write_pack};

const PACK_ID: &str = "com.example.paths";

/// One persona, `scribe`, whose `on_message` hook (the audit component) appends to `audit.log` in
/// its workspace.
fn pack(home: &Path) -> PathBuf {
    let dir = home.join("pack");
    write_pack(
        &dir,
        PACK_ID,
        &[(
            "scribe",
            &persona(
                "scribe",
                "subscribe: [\"general\"]\nhooks:\n  on_message: ./hooks/audit.wasm",
                "You are Scribe.",
            ),
        )],
        &[],
    );
    std::fs::create_dir_all(dir.join("hooks")).unwrap();
    std::fs::copy(guest("hook_audit"), dir.join("hooks/audit.wasm")).unwrap();
    dir
}

/// `apiary hook run <pack> scribe on_message --json` with `env` and `args`.
fn hook_run(home: &Path, pack: &Path, env: &[(&str, &Path)], args: &[&str]) -> serde_json::Value {
    let mut cmd = apiary(home);
    cmd.args(["hook", "run"])
        .arg(pack)
        .args(["scribe", "on_message", "--message", "note this", "--json"])
        .args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let r = Run::of(cmd);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    r.json()
}

fn workspace_of(v: &serde_json::Value) -> PathBuf {
    PathBuf::from(v["workspace"].as_str().expect("workspace in the JSON"))
}

#[test]
fn hook_run_keeps_workspaces_in_the_data_dir() {
    let home = tempfile::tempdir().unwrap();
    let pack = pack(home.path());
    let data = home.path().join("data");
    let v = hook_run(home.path(), &pack, &[("APIARY_DATA_DIR", &data)], &[]);
    let expected = data.join("workspaces").join(PACK_ID).join("scribe");
    assert_eq!(workspace_of(&v), expected, "{v}");
    assert!(expected.join("audit.log").is_file());
    // Nothing went to the XDG data dir the variable replaces.
    assert!(!home.path().join(".local/share/apiary/workspaces").exists());
}

#[test]
fn up_and_hook_run_open_the_same_workspace() {
    let home = tempfile::tempdir().unwrap();
    let pack = pack(home.path());
    let data = home.path().join("data");
    let roots = home.path().join("roots");
    let data_env = data.to_str().unwrap();
    let roots_env = roots.to_str().unwrap();
    for (env, root) in [
        (vec![("APIARY_DATA_DIR", data_env)], data.join("workspaces")),
        (
            vec![
                ("APIARY_DATA_DIR", data_env),
                ("APIARY_WORKSPACE_ROOT", roots_env),
            ],
            roots.clone(),
        ),
    ] {
        let workspace = root.join(PACK_ID).join("scribe");
        let mut up = Up::start(home.path(), &[&pack], &["--json"], &env);
        up.stop_ok();
        assert!(workspace.is_dir(), "`up` opened {}", workspace.display());
        let env: Vec<(&str, &Path)> = env.iter().map(|(k, v)| (*k, Path::new(v))).collect();
        let v = hook_run(home.path(), &pack, &env, &[]);
        assert_eq!(workspace_of(&v), workspace, "{v}");
    }
}

#[test]
fn the_flag_wins_and_the_old_variable_still_counts() {
    let home = tempfile::tempdir().unwrap();
    let pack = pack(home.path());
    let (flag, new, old) = (
        home.path().join("flag"),
        home.path().join("new"),
        home.path().join("old"),
    );
    let both: [(&str, &Path); 2] = [("APIARY_WORKSPACE_ROOT", &new), ("AGENT_CWD", &old)];
    let v = hook_run(
        home.path(),
        &pack,
        &both,
        &["--workspace-root", flag.to_str().unwrap()],
    );
    assert_eq!(workspace_of(&v), flag.join(PACK_ID).join("scribe"));
    let v = hook_run(home.path(), &pack, &both, &[]);
    assert_eq!(workspace_of(&v), new.join(PACK_ID).join("scribe"));
    let v = hook_run(home.path(), &pack, &both[1..], &[]);
    assert_eq!(workspace_of(&v), old.join(PACK_ID).join("scribe"));
}

#[test]
fn up_and_hook_run_document_one_flag_and_variable() {
    let home = tempfile::tempdir().unwrap();
    for args in [&["up", "--help"][..], &["hook", "run", "--help"]] {
        let mut cmd = apiary(home.path());
        cmd.args(args);
        let r = Run::of(cmd);
        assert_eq!(r.code, 0, "{}", r.stderr);
        for name in ["--workspace-root", "APIARY_WORKSPACE_ROOT"] {
            assert!(r.stdout.contains(name), "{args:?} --help names {name}");
        }
        assert!(
            !r.stdout.contains("--workspace "),
            "{args:?}: the old flag is hidden"
        );
    }
}

#[test]
fn a_listen_port_in_use_says_what_to_do_and_a_free_port_still_runs() {
    let home = tempfile::tempdir().unwrap();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let mut cmd = apiary(home.path());
    cmd.args(["up", "--ephemeral", "--plain", "--listen", &addr]);
    let r = Run::of(cmd);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("Address already in use"), "{}", r.stderr);
    assert!(
        r.stderr.contains("--listen 127.0.0.1:0") && r.stderr.contains("--relay ws://"),
        "the error says what to do next: {}",
        r.stderr
    );
    // The way out it names works: any free port, the bundled example ready on it.
    let up = Up::start(home.path(), &[], &["--ephemeral"], &[]);
    assert!(up.url.starts_with("ws://127.0.0.1:"), "{}", up.url);
}
