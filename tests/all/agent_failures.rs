//! When an agent fails a request, `apiary up` shows what the agent said: the JSON-RPC error's
//! `data` and the last lines of its stderr, made printable (agent output is hostile), in the plain
//! lines and in `--json`.

use serde_json::Value;

use crate::support::live::{Up, event_of, grant, persona, write_pack};

/// A shell agent that fails `session/new` (or, with `FAIL_AT=prompt`, the prompt) the way
/// claude-code-acp does as root: an internal error whose `data` says more, after explaining itself
/// on stderr (an escape sequence included).
const FAILING_AGENT: &str = r#"#!/bin/sh
while IFS= read -r line; do
  id=$(printf '%s' "$line" | sed -n 's/.*"id":\([0-9]*\).*/\1/p')
  case "$line" in
    *'"method":"initialize"'*) printf '{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":1,"agentCapabilities":{}}}\n' "$id" ;;
    *'"method":"session/new"'*)
      if [ "$FAIL_AT" = prompt ]; then
        printf '{"jsonrpc":"2.0","id":%s,"result":{"sessionId":"s1"}}\n' "$id"
      else
        printf 'starting query\n' >&2
        printf '\033[31m--dangerously-skip-permissions cannot be used with root/sudo privileges\n' >&2
        printf '{"jsonrpc":"2.0","id":%s,"error":{"code":-32603,"message":"Internal error","data":"Query closed before response received"}}\n' "$id"
      fi ;;
    *'"method":"session/prompt"'*)
      printf 'model endpoint said 529 overloaded\n' >&2
      printf '{"jsonrpc":"2.0","id":%s,"error":{"code":-32603,"message":"Internal error","data":{"status":529,"body":"overloaded"}}}\n' "$id" ;;
  esac
done
"#;

fn setup(home: &std::path::Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let pack = home.join("pack");
    write_pack(
        &pack,
        "com.example.failing",
        &[(
            "pip",
            &persona("pip", "subscribe: [\"general\"]", "You are Pip."),
        )],
        &[],
    );
    // In a directory of its own: an agent program's directory is readable to the agent.
    std::fs::create_dir_all(home.join("bin")).unwrap();
    let script = home.join("bin/agent.sh");
    std::fs::write(&script, FAILING_AGENT).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    (pack, script)
}

#[test]
fn a_refused_persona_shows_the_errors_data_and_the_agents_stderr() {
    let home = tempfile::tempdir().unwrap();
    let (pack, script) = setup(home.path());
    let agent = script.to_str().unwrap();

    let mut up = Up::spawn(home.path(), &[&pack], &["--agent", agent, "--json"], &[]);
    let line = up.wait_for(|l| event_of(l) == "persona_refused");
    let note: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(
        note["data"], "Query closed before response received",
        "{note}"
    );
    let reason = note["reason"].as_str().unwrap();
    assert!(
        reason.contains("-32603: Internal error (Query closed before response received)"),
        "{reason}"
    );
    let stderr: Vec<&str> = note["stderr"]
        .as_array()
        .expect("stderr lines")
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect();
    assert_eq!(stderr.len(), 2, "{stderr:?}");
    assert_eq!(stderr[0], "starting query");
    assert!(stderr[1].ends_with("cannot be used with root/sudo privileges"));
    // The escape sequence is shown neutralised, never passed to the operator's terminal.
    assert!(!line.contains("\\u001b"), "{line}");
    assert!(stderr[1].starts_with('\u{FFFD}'), "{stderr:?}");
    drop(up);

    // The plain form: the reason, then the stderr lines indented under it.
    let home = tempfile::tempdir().unwrap();
    let (pack, script) = setup(home.path());
    let mut up = Up::spawn(
        home.path(),
        &[&pack],
        &["--agent", script.to_str().unwrap(), "--plain"],
        &[],
    );
    let refused = up.wait_for(|l| l.starts_with("persona pip refused:"));
    assert!(
        refused.contains("(Query closed before response received)"),
        "{refused}"
    );
    up.wait_for(|l| l == "  the agent's stderr ended with:");
    up.wait_for(|l| l.starts_with("  | ") && l.ends_with("root/sudo privileges"));
}

#[test]
fn a_failed_turn_shows_the_errors_data_and_the_agents_stderr() {
    let home = tempfile::tempdir().unwrap();
    let (pack, script) = setup(home.path());
    // Agents get no variable of the operator's the operator did not grant.
    grant(
        home.path(),
        "com.example.failing",
        "agent_env = [\"FAIL_AT\"]",
    );
    let mut up = Up::start(
        home.path(),
        &[&pack],
        &["--agent", script.to_str().unwrap(), "--json"],
        &[("FAIL_AT", "prompt")],
    );
    let id = up.post("general", "@pip hello", &[]);
    let line = up.wait_for(|l| event_of(l) == "error" && l.contains(&id));
    let note: Value = serde_json::from_str(&line).unwrap();
    // A `data` that is not a string is shown as compact JSON. (The stderr line written just before
    // the answer travels on another pipe: it may or may not be read yet, so it is not asserted.)
    assert_eq!(
        note["data"], r#"{"status":529,"body":"overloaded"}"#,
        "{note}"
    );
    assert!(note["reason"].as_str().unwrap().contains("529"), "{note}");
}
