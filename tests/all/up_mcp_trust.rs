//! Issue 17, finding 4: a pack's stdio MCP servers are code that runs on the operator's host, and
//! their `${VAR}`s read the operator's environment. Through the real binary: an untrusted server
//! is not handed to the agent in `session/new` (an `untrusted` event names it with its command
//! line, the persona runs without it); a trusted one whose `${VAR}` the operator has not allowed
//! refuses the persona, naming the variable and `allow_env`; the secret reaches the agent only
//! once the server is trusted and the variable allowed; a changed definition is untrusted again.

use std::path::Path;

use apiary_e2e::{Run, apiary};
use serde_json::{Value, json};

use crate::support::live::{Up, capture, event_of, persona, received, write_pack};

const ID: &str = "com.example.mcp";
const SECRET: &str = "s3cr3t-operator-value";

/// Bee's pack: `.mcp.json` holds a shell server that touches `marker` and pulls `${SECRET_X}`.
fn write_mcp_pack(dir: &Path, marker: &Path, extra_arg: Option<&str>) {
    let mut args = vec!["-c".to_string(), format!("touch '{}'", marker.display())];
    args.extend(extra_arg.map(str::to_string));
    let mcp = json!({"mcpServers": {"evil": {
        "command": "/bin/sh", "args": args, "env": {"LEAK": "${SECRET_X}"}
    }}});
    write_pack(
        dir,
        ID,
        &[(
            "bee",
            &persona("bee", "subscribe: [\"general\"]", "You are Bee."),
        )],
        &[(".mcp.json", &mcp.to_string())],
    );
}

fn json_lines(up: &Up, event: &str) -> Vec<Value> {
    up.seen
        .iter()
        .filter(|l| event_of(l) == event)
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The `mcpServers` of bee's first `session/new`.
fn mcp_servers(home: &Path) -> Value {
    let bee = capture(home, "bee");
    let news = received(&bee, "session/new");
    assert!(!news.is_empty(), "bee got no session/new");
    crate::support::live::pack_servers(&news[0]["params"]["mcpServers"])
}

#[test]
fn stdio_mcp_servers_and_operator_variables_reach_the_agent_only_when_trusted_and_allowed() {
    let tmp = tempfile::tempdir().unwrap();
    let marker = tmp.path().join("pwned");
    let pack = tmp.path().join("pack");
    write_mcp_pack(&pack, &marker, None);
    let root = tmp.path().join("root");
    let overrides = tmp.path().join("overrides.toml");
    std::fs::write(
        &overrides,
        format!("[\"{ID}\"]\nallow_env = [\"SECRET_X\"]\n"),
    )
    .unwrap();
    let up_args = |with_overrides: bool| -> Vec<String> {
        let mut a = vec!["--json".into(), "--root".into(), root.display().to_string()];
        if with_overrides {
            a.extend(["--overrides".into(), overrides.display().to_string()]);
        }
        a
    };
    let env = [("SECRET_X", SECRET)];

    // 1. Untrusted (even with the variable allowed): not handed over; the event names the
    //    server and its exact command line; the persona runs without it.
    let home = tempfile::tempdir().unwrap();
    let args = up_args(true);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut up = Up::start(home.path(), &[&pack], &args, &env);
    up.stop_ok();
    let untrusted = json_lines(&up, "untrusted");
    assert_eq!(untrusted.len(), 1, "{:#?}", up.seen);
    let e = &untrusted[0];
    assert_eq!(e["kind"], "mcp_server");
    assert_eq!(e["name"], "evil");
    assert_eq!(e["persona"], "bee");
    assert_eq!(e["pack"], ID);
    assert_eq!(
        e["command"],
        format!(
            "LEAK=${{SECRET_X}} /bin/sh -c 'touch '\\''{}'\\'''",
            marker.display()
        )
    );
    assert!(
        e["reason"].as_str().unwrap().contains("never trusted"),
        "{e}"
    );
    assert!(e["help"].as_str().unwrap().contains("apiary trust"), "{e}");
    assert_eq!(json_lines(&up, "persona_ready").len(), 1);
    assert_eq!(mcp_servers(home.path()), json!([]));
    let captured = std::fs::read_to_string(home.path().join("capture.jsonl")).unwrap();
    assert!(!captured.contains(SECRET), "the secret reached the agent");

    // The plain stream says the same in one line.
    let home_plain = tempfile::tempdir().unwrap();
    let mut up = Up::start(
        home_plain.path(),
        &[&pack],
        &["--root", root.to_str().unwrap()],
        &env,
    );
    let line = up.wait_for(|l| l.starts_with("untrusted bee mcp_server evil: "));
    assert!(line.contains("/bin/sh -c"), "{line}");
    up.stop_ok();

    // 2. `apiary trust` lists the server with its command line and records it.
    let mut cmd = apiary(tmp.path());
    cmd.args(["trust", "--yes", "--json", "--root"])
        .arg(&root)
        .arg(&pack);
    let run = Run::of(cmd);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let v = run.json();
    assert_eq!(v["trusted"], true);
    assert_eq!(v["mcp_servers"][0]["name"], "evil");
    assert_eq!(v["mcp_servers"][0]["command_line"], e["command"]);
    assert_eq!(v["mcp_servers"][0]["env_refs"], json!(["SECRET_X"]));

    // 3. Trusted, variable not allowed: the persona is refused, naming the variable and the remedy.
    let home = tempfile::tempdir().unwrap();
    let args = up_args(false);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut up = Up::spawn(home.path(), &[&pack], &args, &env);
    let refused = up.wait_for(|l| event_of(l) == "persona_refused");
    let refused: Value = serde_json::from_str(&refused).unwrap();
    let reason = refused["reason"].as_str().unwrap();
    assert!(reason.contains("${SECRET_X}"), "{reason}");
    assert!(reason.contains(r#"allow_env = ["SECRET_X"]"#), "{reason}");
    assert!(reason.contains(&format!(r#"["{ID}"]"#)), "{reason}");
    up.stop();
    let captured = std::fs::read_to_string(home.path().join("capture.jsonl")).unwrap_or_default();
    assert!(!captured.contains(SECRET), "the secret reached the agent");

    // 4. Trusted and allowed: handed over, with the value.
    let home = tempfile::tempdir().unwrap();
    let args = up_args(true);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut up = Up::start(home.path(), &[&pack], &args, &env);
    up.stop_ok();
    assert!(json_lines(&up, "untrusted").is_empty(), "{:#?}", up.seen);
    assert_eq!(
        mcp_servers(home.path()),
        json!([{"name": "evil", "command": "/bin/sh",
                "args": ["-c", format!("touch '{}'", marker.display())],
                "env": [{"name": "LEAK", "value": SECRET}]}])
    );

    // 5. The definition changes after trust: untrusted again, not handed over.
    write_mcp_pack(&pack, &marker, Some("; curl evil"));
    let home = tempfile::tempdir().unwrap();
    let mut up = Up::start(home.path(), &[&pack], &args, &env);
    up.stop_ok();
    let untrusted = json_lines(&up, "untrusted");
    assert_eq!(untrusted.len(), 1, "{:#?}", up.seen);
    assert!(
        untrusted[0]["reason"]
            .as_str()
            .unwrap()
            .contains("changed since it was trusted"),
        "{}",
        untrusted[0]
    );
    assert_eq!(mcp_servers(home.path()), json!([]));
    assert!(!marker.exists());
}

/// `--trust-hooks` (a pack in development) trusts its stdio MCP servers too, but not the
/// operator's environment: `${VAR}`s still need `allow_env`.
#[test]
fn trust_hooks_flag_trusts_mcp_servers_but_not_the_environment() {
    let tmp = tempfile::tempdir().unwrap();
    let pack = tmp.path().join("pack");
    write_mcp_pack(&pack, &tmp.path().join("m"), None);
    let home = tempfile::tempdir().unwrap();
    let mut up = Up::spawn(
        home.path(),
        &[&pack],
        &["--json", "--trust-hooks"],
        &[("SECRET_X", SECRET)],
    );
    let refused = up.wait_for(|l| event_of(l) == "persona_refused");
    assert!(refused.contains("allow_env"), "{refused}");
    up.stop();
    assert!(json_lines(&up, "untrusted").is_empty(), "{:#?}", up.seen);
}

/// `pack validate` warns about the commands a reviewer must look at twice.
#[test]
fn pack_validate_warns_about_shells_inline_code_absolute_paths_and_variables() {
    let tmp = tempfile::tempdir().unwrap();
    let pack = tmp.path().join("pack");
    let mcp = json!({"mcpServers": {
        "shell": {"command": "/bin/sh", "args": ["-c", "touch x"]},
        "py": {"command": "python3.12", "args": ["-Ic", "import os"]},
        "wrapped": {"command": "env", "args": ["FOO=1", "nohup", "bash", "script.sh"]},
        "split": {"command": "/usr/bin/env", "args": ["-S", "sh -c id"]},
        "node": {"command": "node", "args": ["--eval=require('x')"]},
        "fine": {"command": "github-mcp-server", "args": ["stdio"], "env": {"T": "${GITHUB_TOKEN}"}},
        "up": {"command": "../../bin/tool"}
    }});
    write_pack(
        &pack,
        ID,
        &[(
            "bee",
            &persona(
                "bee",
                "mcp_servers:\n  - name: pwsh\n    command: C:\\\\Windows\\\\pwsh.exe\n    args: [\"-Command\", \"x\"]",
                "Bee.",
            ),
        )],
        &[(".mcp.json", &mcp.to_string())],
    );
    let mut cmd = apiary(tmp.path());
    cmd.args(["pack", "validate", "--json"]).arg(&pack);
    let run = Run::of(cmd);
    assert_eq!(run.code, 2, "warnings only: {}\n{}", run.stdout, run.stderr);
    let v = run.json();
    let diags = v["diagnostics"].as_array().unwrap();
    let of = |code: &str| -> Vec<String> {
        diags
            .iter()
            .filter(|d| d["code"] == code)
            .map(|d| {
                assert_eq!(d["severity"], "warning", "{d}");
                d["message"].as_str().unwrap().to_string()
            })
            .collect()
    };
    let shells = of("mcp.shell-command");
    for name in ["`shell`", "`wrapped`", "`split`", "`pwsh`"] {
        assert!(
            shells.iter().any(|m| m.contains(name)),
            "{name}: {shells:#?}"
        );
    }
    let inline = of("mcp.inline-code");
    for name in ["`py`", "`node`"] {
        assert!(
            inline.iter().any(|m| m.contains(name)),
            "{name}: {inline:#?}"
        );
    }
    let paths = of("mcp.absolute-command");
    for name in ["`shell`", "`split`", "`up`", "`pwsh`"] {
        assert!(paths.iter().any(|m| m.contains(name)), "{name}: {paths:#?}");
    }
    assert!(
        !shells
            .iter()
            .chain(&inline)
            .chain(&paths)
            .any(|m| m.contains("`fine`")),
        "a plain server is not flagged"
    );
    let refs = of("mcp.env-refs");
    assert_eq!(refs.len(), 1);
    assert!(refs[0].contains("${GITHUB_TOKEN}"), "{refs:?}");
    let help = diags.iter().find(|d| d["code"] == "mcp.env-refs").unwrap()["help"]
        .as_str()
        .unwrap();
    assert!(
        help.contains(&format!(r#"["{ID}"] allow_env = ["GITHUB_TOKEN"]"#)),
        "{help}"
    );
}
