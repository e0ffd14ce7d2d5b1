//! The bundled agent as its peers see it: NDJSON JSON-RPC on stdio. (Having integration tests also
//! makes `cargo test --workspace` build the `apiary-agent` binary the harness tests start.)

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use serde_json::{Value, json};

/// Sends `requests` one per line and collects every message the agent writes until the answer to
/// the last request arrives.
fn converse(requests: &[Value], env: &[(&str, &str)]) -> Vec<Value> {
    let dir = tempfile_dir();
    let mut child = Command::new(env!("CARGO_BIN_EXE_apiary-agent"))
        .current_dir(&dir)
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start apiary-agent");
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut seen = Vec::new();
    for request in requests {
        writeln!(stdin, "{request}").unwrap();
        loop {
            let line = lines.next().expect("an answer").expect("readable");
            let message: Value = serde_json::from_str(&line).expect("one JSON object per line");
            let answers = message.get("id") == request.get("id") && message.get("method").is_none();
            seen.push(message);
            if answers {
                break;
            }
        }
    }
    drop(stdin);
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
    seen
}

fn tempfile_dir() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "apiary-agent-test-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn start() -> Vec<Value> {
    vec![
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
               "params": {"protocolVersion": 1, "clientCapabilities": {}}}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "session/new",
               "params": {"cwd": "/tmp", "mcpServers": []}}),
    ]
}

fn session_of(seen: &[Value]) -> String {
    seen.iter()
        .find(|m| m["id"] == 2)
        .and_then(|m| m["result"]["sessionId"].as_str())
        .expect("session/new gives a session id")
        .to_string()
}

/// The reply text of a turn: the text chunks the agent streamed, joined.
fn reply_text(seen: &[Value]) -> String {
    seen.iter()
        .filter(|m| m["method"] == "session/update")
        .filter_map(|m| m["params"]["update"]["content"]["text"].as_str())
        .collect()
}

#[test]
fn a_prompt_is_echoed_with_the_sessions_model_and_ends_the_turn() {
    let first = converse(&start(), &[]);
    assert_eq!(first[0]["result"]["protocolVersion"], 1, "{first:?}");
    let session = session_of(&first);

    let mut requests = start();
    requests.push(
        json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt",
        "params": {"sessionId": session, "prompt": [
            {"type": "text", "text": "some context\nhello bees"}]}}),
    );
    let seen = converse(&requests, &[]);
    assert_eq!(
        session_of(&seen),
        session,
        "a fresh agent numbers its sessions alike"
    );
    // Without a `[Buzz event]` section the prompt's last line is what it answers.
    let text = reply_text(&seen);
    assert_eq!(text, "echo: hello bees [model=default]", "{seen:?}");
    let done = seen.iter().find(|m| m["id"] == 3).expect("an answer");
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");
}

#[test]
fn the_model_comes_from_the_environment() {
    let mut requests = start();
    requests.push(
        json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt",
        "params": {"sessionId": "s-1", "prompt": [{"type": "text", "text": "Content: hi"}]}}),
    );
    let seen = converse(&requests, &[("APIARY_AGENT_MODELS", "tiny,huge")]);
    let options = &seen.iter().find(|m| m["id"] == 2).unwrap()["result"]["configOptions"][0];
    let offered: Vec<&str> = options["options"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|o| o["value"].as_str())
        .collect();
    assert_eq!(offered, ["default", "tiny", "huge"], "{options}");
}
