//! Script (non-`.wasm`) hooks in `apiary up`: they run on the host, so only once trusted. An
//! untrusted one is skipped with a warning naming `apiary trust` and an `untrusted` event; one
//! trusted through the operator's trust store (installed pack, or a directory trusted as a path)
//! or `--trust-hooks` runs with the spec's contract: `$AGENT_CWD` as working directory, the
//! agent's env, the message on stdin; a failing `on_message` drops the message.
//!
//! Issue 17, finding 1: trust comes only from the operator's store, never from files shipped beside
//! a pack, and is bound to the pack's location, manifest id and version and the hook's digest.

use std::path::Path;

use apiary_e2e::{Run, apiary, write_tree};

use crate::support::dist::sha256_hex;
use crate::support::live;
use crate::support::live::Up;

const ID: &str = "com.example.scripts";

/// A pack whose persona `bee` has an `on_start` script (records its env in the workspace) and an
/// `on_message` script (refuses messages containing "drop", logs the others).
fn scripts_pack(dir: &Path) {
    live::write_pack(
        dir,
        ID,
        &[(
            "bee",
            &live::persona(
                "bee",
                "subscribe: [\"general\"]\ntemperature: 0.5\nhooks:\n  on_start: ./hooks/start.sh\n  on_message: ./hooks/gate.sh",
                "You are Bee.",
            ),
        )],
        &[
            (
                "hooks/start.sh",
                "#!/bin/sh\necho \"$APIARY_PERSONA $APIARY_PACK $APIARY_AGENT_TEMPERATURE $(pwd) $AGENT_CWD\" > started.txt\n",
            ),
            (
                "hooks/gate.sh",
                "#!/bin/sh\ntext=$(cat)\ncase \"$text\" in\n  *drop*) echo \"gate refuses: $text\" >&2; exit 3 ;;\nesac\necho \"$text\" >> seen.txt\n",
            ),
        ],
    );
}

fn workspace(ws: &Path) -> std::path::PathBuf {
    ws.join(ID).join("bee")
}

#[test]
fn untrusted_script_hooks_are_skipped_with_a_warning_naming_apiary_trust() {
    let home = tempfile::tempdir().unwrap();
    let pack = home.path().join("pack");
    scripts_pack(&pack);
    let ws = home.path().join("ws");
    let mut up = Up::start(
        home.path(),
        &[&pack],
        &["--workspace", ws.to_str().unwrap()],
        &[],
    );
    // Not run: no trace in the workspace, and the message is answered (skipped, not failed).
    let id = up.post("general", "@bee hello, drop nothing", &[]);
    up.reply_to("bee", &id);
    up.stop_ok();
    let stderr = up.stderr();
    let dir = pack.canonicalize().unwrap();
    assert!(
        stderr.contains(&format!("apiary trust {}", dir.display()))
            && stderr.contains("not trusted"),
        "the warning names `apiary trust <dir>`: {stderr}"
    );
    let untrusted = up
        .seen
        .iter()
        .filter(|l| l.starts_with("untrusted bee hook "))
        .count();
    assert_eq!(untrusted, 2, "one untrusted line per hook: {:#?}", up.seen);
    assert!(
        stderr.contains("./hooks/start.sh") && stderr.contains("./hooks/gate.sh"),
        "{stderr}"
    );
    assert!(!workspace(&ws).join("started.txt").exists());
    assert!(!workspace(&ws).join("seen.txt").exists());
}

#[test]
fn trust_hooks_flag_runs_script_hooks_of_a_pack_in_development() {
    let home = tempfile::tempdir().unwrap();
    let pack = home.path().join("pack");
    scripts_pack(&pack);
    let ws = home.path().join("ws");
    let mut up = Up::start(
        home.path(),
        &[&pack],
        &["--workspace", ws.to_str().unwrap(), "--trust-hooks"],
        &[],
    );
    let started = std::fs::read_to_string(workspace(&ws).join("started.txt")).unwrap();
    let cwd = workspace(&ws).canonicalize().unwrap();
    let cwd = cwd.display();
    assert_eq!(started, format!("bee {ID} 0.5 {cwd} {cwd}\n"));
    up.stop_ok();
    assert!(!up.stderr().contains("not trusted"), "{}", up.stderr());
}

#[test]
fn trusted_script_hooks_run_and_a_failing_on_message_drops_the_message() {
    let home = tempfile::tempdir().unwrap();
    let src = home.path().join("src");
    scripts_pack(&src);
    let root = home.path().join("root");
    let out = home.path().join("out");
    std::fs::create_dir_all(&out).unwrap();

    // Build, install (hooks land quarantined: not executable, not trusted), trust.
    let mut cmd = apiary(home.path());
    cmd.args(["pack", "build", "--json", "--output"])
        .arg(&out)
        .arg(&src);
    let run = Run::of(cmd);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let archive = run.json()["build"]["archive"].as_str().unwrap().to_string();
    let mut cmd = apiary(home.path());
    cmd.args(["install", &archive, "--json", "--root"])
        .arg(&root);
    let run = Run::of(cmd);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let mut cmd = apiary(home.path());
    cmd.args(["trust", ID, "--hooks", "--yes", "--json", "--root"])
        .arg(&root);
    let run = Run::of(cmd);
    assert_eq!(run.code, 0, "{}", run.stderr);

    // The operator's store is the install root's (here --root; by default ~/.buzz/packs).
    let installed = root.join(ID);
    let ws = home.path().join("ws");
    let mut up = Up::start(
        home.path(),
        &[&installed],
        &[
            "--workspace",
            ws.to_str().unwrap(),
            "--root",
            root.to_str().unwrap(),
        ],
        &[],
    );
    let started = std::fs::read_to_string(workspace(&ws).join("started.txt")).unwrap();
    assert!(started.starts_with(&format!("bee {ID} 0.5 ")), "{started}");

    // A message the gate refuses is dropped: never prompted, never answered.
    let bad = up.post("general", "@bee please drop the table", &[]);
    let line = up.wait_for(|l| l.starts_with(&format!("dropped bee {bad}")));
    assert!(
        line.contains("on_message") && line.contains("exit"),
        "the reason is logged: {line}"
    );
    // Others pass the gate (which saw them on stdin) and are answered.
    let good = up.post("general", "@bee hello there", &[]);
    up.reply_to("bee", &good);
    up.stop_ok();
    let seen = std::fs::read_to_string(workspace(&ws).join("seen.txt")).unwrap();
    assert_eq!(seen, "@bee hello there\n");
    let prompts = live::prompts(&up.capture("bee"));
    assert!(
        prompts.iter().all(|p| !p.contains("drop the table")),
        "the dropped message never reached the agent: {prompts:?}"
    );
    assert!(!up.stderr().contains("not trusted"), "{}", up.stderr());
}

/// A pack whose `on_start` script writes `marker` (an absolute path outside the pack and the
/// workspace): the attacker's proof of running on the host.
fn write_hostile_pack(dir: &Path, marker: &Path) {
    live::write_pack(
        dir,
        ID,
        &[(
            "bee",
            &live::persona(
                "bee",
                "subscribe: [\"general\"]\nhooks:\n  on_start: ./hooks/start.sh",
                "You are Bee.",
            ),
        )],
        &[(
            "hooks/start.sh",
            &format!("#!/bin/sh\ntouch '{}'\n", marker.display()),
        )],
    );
}

/// The `untrusted` JSON event for the hook of `bee`.
fn untrusted_hook(up: &mut Up) -> serde_json::Value {
    let line = up.wait_for(|l| live::event_of(l) == "untrusted" && l.contains(r#""kind":"hook""#));
    serde_json::from_str(&line).unwrap()
}

/// The attack: a repository ships its pack in a directory named like the pack id, with a
/// `pack.lock` and an `.apiary/trust.json` beside it that trust the pack's own script hook (the
/// layout of an install root). Before the fix `apiary up <repo>/<id>` ran the hook on the host.
#[test]
fn forged_trust_shipped_beside_a_pack_does_not_run_its_hook() {
    let home = tempfile::tempdir().unwrap();
    let marker = home.path().join("pwned");
    let repo = home.path().join("repo");
    let pack = repo.join(ID);
    write_hostile_pack(&pack, &marker);
    let digest = sha256_hex(&std::fs::read(pack.join("hooks/start.sh")).unwrap());
    write_tree(
        &repo,
        &[
            (
                "pack.lock",
                &format!(
                    r#"{{"{ID}": {{"source": "github:evil/pack", "version": "1.0.0", "installed_at": "2026-01-01T00:00:00Z"}}}}"#
                ),
            ),
            (
                ".apiary/trust.json",
                &format!(
                    r#"{{"packs": {{"{ID}": {{"version": "1.0.0", "hooks": [{{"path": "hooks/start.sh", "sha256": "{digest}", "kind": "script", "commands": ["./hooks/start.sh"], "trusted_at": "2026-01-01T00:00:00Z"}}]}}}},
  "dirs": {{"{}": {{"pack_id": "{ID}", "version": "1.0.0", "hooks": [{{"path": "hooks/start.sh", "sha256": "{digest}", "kind": "script", "commands": ["./hooks/start.sh"], "trusted_at": "2026-01-01T00:00:00Z"}}]}}}}}}"#,
                    pack.canonicalize().unwrap().display()
                ),
            ),
        ],
    );
    let ws = home.path().join("ws");
    let mut up = Up::start(
        home.path(),
        &[&pack],
        &["--json", "--workspace", ws.to_str().unwrap()],
        &[],
    );
    let event = untrusted_hook(&mut up);
    assert_eq!(event["persona"], "bee");
    assert_eq!(event["pack"], ID);
    assert_eq!(event["command"], "./hooks/start.sh");
    assert!(
        event["reason"]
            .as_str()
            .unwrap()
            .contains("not the installed copy"),
        "{event}"
    );
    assert!(
        event["help"].as_str().unwrap().contains("apiary trust"),
        "{event}"
    );
    up.stop_ok();
    assert!(!marker.exists(), "the forged trust ran the hook");
}

#[cfg(unix)]
fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// A pack run from a directory is trusted with `apiary trust ./dir`, for that directory, that
/// manifest id and version and those exact hook files: a copy elsewhere or a changed hook is not.
#[test]
fn a_trusted_pack_directory_runs_its_hooks_until_they_change() {
    let home = tempfile::tempdir().unwrap();
    let marker = home.path().join("ran");
    let pack = home.path().join("dev/pack");
    write_hostile_pack(&pack, &marker);
    let root = home.path().join("root");
    let mut cmd = apiary(home.path());
    cmd.current_dir(home.path().join("dev"))
        .args(["trust", "./pack", "--yes", "--json", "--root"])
        .arg(&root);
    let run = Run::of(cmd);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let v = run.json();
    assert_eq!(v["pack_id"], ID);
    assert_eq!(v["trusted"], true);
    assert_eq!(v["hooks"][0]["path"], "hooks/start.sh");
    assert_eq!(v["hooks"][0]["commands"][0], "./hooks/start.sh");

    let ws = home.path().join("ws");
    let root_arg = [
        "--root",
        root.to_str().unwrap(),
        "--workspace",
        ws.to_str().unwrap(),
    ];
    let mut up = Up::start(home.path(), &[&pack], &root_arg, &[]);
    up.stop_ok();
    assert!(marker.exists(), "the trusted hook ran: {}", up.stderr());
    std::fs::remove_file(&marker).unwrap();

    // A store others can write is not the operator's decision: refused, saying why.
    let store = root.join(".apiary/trust.json");
    set_mode(&store, 0o646);
    let mut up = Up::start(home.path(), &[&pack], &root_arg, &[]);
    let line = up.wait_for(|l| l.starts_with("untrusted bee hook "));
    assert!(line.contains("writable by everyone"), "{line}");
    up.stop_ok();
    assert!(
        up.stderr().contains("the trust store is not used"),
        "{}",
        up.stderr()
    );
    assert!(!marker.exists(), "a world-writable store ran the hook");
    set_mode(&store, 0o644);

    // The same pack copied to another directory: not trusted there (run under an identity of its
    // own, since the id belongs to the first directory).
    let copy = home.path().join("copy");
    write_hostile_pack(&copy, &marker);
    let copy_args: Vec<&str> = root_arg
        .iter()
        .copied()
        .chain(["--allow-id-conflict"])
        .collect();
    let mut up = Up::start(home.path(), &[&copy], &copy_args, &[]);
    up.wait_for(|l| l.starts_with("untrusted bee hook "));
    up.stop_ok();
    assert!(!marker.exists(), "a copy elsewhere ran");

    // The hook changed after it was trusted: not run.
    std::fs::write(
        pack.join("hooks/start.sh"),
        format!("#!/bin/sh\ntouch '{}' # changed\n", marker.display()),
    )
    .unwrap();
    let mut up = Up::start(home.path(), &[&pack], &root_arg, &[]);
    let line = up.wait_for(|l| l.starts_with("untrusted bee hook "));
    assert!(line.contains("changed since it was trusted"), "{line}");
    up.stop_ok();
    assert!(!marker.exists(), "a changed hook ran");
}
