//! Script (non-`.wasm`) hooks in `apiary up`: they run on the host, so only once trusted. An
//! untrusted one is skipped with a warning naming `apiary trust`; one trusted through the trust
//! store (installed pack) or `--trust-hooks` runs with the spec's contract: `$AGENT_CWD` as working
//! directory, the agent's env, the message on stdin; a failing `on_message` drops the message.

mod live_common;

use std::path::Path;

use apiary_e2e::{Run, apiary, write_tree};
use live_common::Up;

const ID: &str = "com.example.scripts";

/// A pack whose persona `bee` has an `on_start` script (records its env in the workspace) and an
/// `on_message` script (refuses messages containing "drop", logs the others).
fn write_pack(dir: &Path) {
    let manifest = format!(
        r#"{{"id": "{ID}", "name": "Scripts", "version": "1.0.0", "description": "script hooks",
  "personas": ["agents/bee.persona.md"]}}"#
    );
    write_tree(
        dir,
        &[
            (".plugin/plugin.json", &manifest),
            (
                "agents/bee.persona.md",
                "---\nname: bee\ndisplay_name: Bee\ndescription: test persona\nruntime: apiary-agent\nsubscribe: [\"general\"]\ntemperature: 0.5\nhooks:\n  on_start: ./hooks/start.sh\n  on_message: ./hooks/gate.sh\n---\nYou are Bee.\n",
            ),
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
    write_pack(&pack);
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
    assert!(
        stderr.contains(&format!("apiary trust {ID}")) && stderr.contains("not trusted"),
        "the warning names `apiary trust`: {stderr}"
    );
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
    write_pack(&pack);
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
    write_pack(&src);
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

    let installed = root.join(ID);
    let ws = home.path().join("ws");
    let mut up = Up::start(
        home.path(),
        &[&installed],
        &["--workspace", ws.to_str().unwrap()],
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
    let prompts = live_common::prompts(&up.capture("bee"));
    assert!(
        prompts.iter().all(|p| !p.contains("drop the table")),
        "the dropped message never reached the agent: {prompts:?}"
    );
    assert!(!up.stderr().contains("not trusted"), "{}", up.stderr());
}
