//! `apiary hook run` runs a hook through the live harness's own hook runner: a script gets the
//! harness's deadlines (5 s for `on_message`, 300 s for `on_start` and `on_stop`) and environment.

use std::path::Path;

use apiary_e2e::{Run, apiary, write_tree};

const MANIFEST: &str = r#"{
  "id": "com.example.hookrun",
  "name": "Hook run",
  "version": "1.0.0",
  "personas": ["agents/pip.persona.md"]
}"#;

fn pack(dir: &Path) {
    write_tree(
        dir,
        &[
            (".plugin/plugin.json", MANIFEST),
            (
                "agents/pip.persona.md",
                "---\nname: pip\ndisplay_name: Pip\ndescription: tester\nhooks:\n  on_start: ./hooks/slow.sh\n  on_message: ./hooks/slower.sh\n---\nYou are Pip.\n",
            ),
            (
                "hooks/slow.sh",
                "#!/bin/sh\nsleep 6\necho \"$APIARY_PERSONA $APIARY_PACK $AGENT_CWD\"\n",
            ),
            ("hooks/slower.sh", "#!/bin/sh\nsleep 8\n"),
        ],
    );
}

fn hook_run(home: &Path, dir: &Path, point: &str) -> Run {
    let mut cmd = apiary(home);
    cmd.args(["hook", "run"])
        .arg(dir)
        .args(["pip", point, "--trust-hooks", "--json"]);
    Run::of(cmd)
}

#[test]
fn script_hooks_get_the_harness_deadlines_and_environment() {
    let home = tempfile::tempdir().unwrap();
    let dir = home.path().join("pack");
    pack(&dir);
    // 6 s is past the on_message deadline, well inside on_start's.
    let r = hook_run(home.path(), &dir, "on_start");
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let v = r.json();
    let workspace = v["workspace"].as_str().unwrap();
    assert_eq!(
        v["stdout"].as_str().unwrap().trim_end(),
        format!("pip com.example.hookrun {workspace}")
    );
    let r = hook_run(home.path(), &dir, "on_message");
    assert_eq!(r.code, 1, "{}", r.stdout);
    let v = r.json();
    assert_eq!(v["error"]["code"], "deadline", "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("deadline of 5000 ms"),
        "{v}"
    );
}

#[test]
fn a_persona_switches_a_pack_hook_off_with_null() {
    // Spec §9's own example: per-persona `on_message: null` turns the pack's on_message hook off
    // for that persona; the points it leaves out still inherit the pack's hooks.
    let home = tempfile::tempdir().unwrap();
    let dir = home.path().join("pack");
    write_tree(
        &dir,
        &[
            (".plugin/plugin.json", MANIFEST),
            (
                "hooks/hooks.json",
                r#"{"on_start": "./hooks/hi.sh", "on_message": "./hooks/hi.sh"}"#,
            ),
            ("hooks/hi.sh", "#!/bin/sh\necho hi from $APIARY_PERSONA\n"),
            (
                "agents/pip.persona.md",
                "---\nname: pip\ndisplay_name: Pip\ndescription: tester\nhooks:\n  on_message: null\n---\nYou are Pip.\n",
            ),
        ],
    );
    let r = hook_run(home.path(), &dir, "on_message");
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let v = r.json();
    assert_eq!(v["ran"], false, "{v}");
    assert!(
        v["message"]
            .as_str()
            .unwrap()
            .contains("has no on_message hook"),
        "{v}"
    );
    let r = hook_run(home.path(), &dir, "on_start");
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(
        r.json()["stdout"].as_str().unwrap().trim_end(),
        "hi from pip"
    );
}
