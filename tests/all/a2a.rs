//! Personas answering other agents over A2A 1.0 (`up --a2a-addr`), driven by the official client,
//! PyPI `a2a-sdk` 1.x (`a2a_client.py`): the card resolves and parses strictly, a message gets the
//! persona's reply as a completed task (through its real agent process), a stream gives the task's
//! events in order, a task is got and a running one canceled (the agent's turn ends), and a missing
//! or wrong token, or an A2A 0.3 client, is refused. The card is signed with the persona's Nostr
//! key (ES256K) and verified by the SDK's own verifier.

use std::path::Path;
use std::process::Command;

use apiary_e2e::ci_python;
use serde_json::Value;

use crate::support::live::Up;
use crate::support::pack::pack_new;

/// `<client> sha256:<digest>` for `token`.
fn token_line(client: &str, token: &str) -> String {
    use sha2::Digest;
    let d = sha2::Sha256::digest(token.as_bytes());
    let hex: String = d.iter().map(|b| format!("{b:02x}")).collect();
    format!("{client} sha256:{hex}\n")
}

fn start(home: &Path, tokens: &str) -> (Up, String, String) {
    let pack = home.join("crew");
    pack_new(home, &pack, "com.example.crew", &["scout"]);
    let file = home.join("a2a-tokens");
    std::fs::write(&file, tokens).unwrap();
    let mut up = Up::start(
        home,
        &[&pack],
        &[
            "--a2a-addr",
            "127.0.0.1:0",
            "--a2a-tokens",
            file.to_str().unwrap(),
        ],
        &[("APIARY_AGENT_SLOW_MS", "30000")],
    );
    let line = up.wait_for(|l| l.starts_with("a2a http://"));
    let url = line.split_whitespace().nth(1).unwrap().to_string();
    let ready = up.wait_for(|l| l.starts_with("persona scout ready "));
    let pubkey = ready
        .split_whitespace()
        .find_map(|w| w.strip_prefix("pubkey="))
        .unwrap()
        .to_string();
    (up, format!("{url}/a2a/com.example.crew/scout"), pubkey)
}

#[test]
fn a_persona_answers_the_official_a2a_client_and_refuses_strangers() {
    let home = tempfile::tempdir().unwrap();
    let (mut up, base, pubkey) = start(home.path(), &token_line("tester", "t0ken-of-tester"));
    let out = Command::new(ci_python())
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("all/a2a_client.py"))
        .args([&base, "t0ken-of-tester", &pubkey])
        .output()
        .expect("run the a2a-sdk client");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let seen: Value = serde_json::from_slice(&out.stdout).unwrap();

    assert_eq!(
        seen["card"]["url"],
        base.as_str(),
        "the card names its own base URL"
    );
    assert_eq!(seen["card"]["schemes"], serde_json::json!(["bearer"]));
    // Signed with the persona's own key (ES256K), verified by the SDK's verifier with the key
    // taken from the persona's Nostr public key; a rewritten card fails it.
    assert_eq!(seen["signature"], true, "{seen}");
    assert!(seen["kid"].as_str().unwrap().starts_with("npub1"), "{seen}");
    assert!(
        seen["forged_signature"]
            .as_str()
            .unwrap()
            .contains("Signature"),
        "{seen}"
    );
    assert_eq!(seen["send"]["state"], "TASK_STATE_COMPLETED");
    let reply = seen["send"]["reply"].as_str().unwrap();
    assert!(
        reply.contains("hello over a2a"),
        "the bundled agent echoes: {reply}"
    );
    assert_eq!(seen["get"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(seen["get"]["id"], true);
    assert!(
        seen["get_unknown"]
            .as_str()
            .unwrap()
            .to_lowercase()
            .contains("not found"),
        "{seen}"
    );
    assert_eq!(
        seen["stream"],
        serde_json::json!([
            "task",
            "status_update:TASK_STATE_WORKING",
            "artifact_update",
            "status_update:TASK_STATE_COMPLETED"
        ])
    );
    assert!(seen["stream_reply"].as_str().unwrap().contains("stream me"));
    assert_eq!(seen["cancel"], "TASK_STATE_CANCELED");
    assert_eq!(seen["cancel_final"], "TASK_STATE_CANCELED");
    assert!(
        seen["cancel_again"]
            .as_str()
            .unwrap()
            .to_lowercase()
            .contains("cancel"),
        "{seen}"
    );
    for refused in ["no_token", "wrong_token"] {
        let e = seen[refused]
            .as_str()
            .unwrap_or_else(|| panic!("{refused} was answered: {seen}"));
        assert!(
            e.contains("401") || e.to_lowercase().contains("auth"),
            "{refused}: {e}"
        );
    }
    assert_eq!(seen["v03"]["code"], -32009, "{seen}");

    // Each turn is an event of `up`; the refused ones never reached the agent.
    up.wait_for(|l| l.starts_with("a2a scout ") && l.contains("canceled"));
    let turns: Vec<&String> = up
        .seen
        .iter()
        .filter(|l| l.starts_with("a2a scout "))
        .collect();
    assert_eq!(
        turns.len(),
        3,
        "the message, the stream, the canceled one: {turns:?}"
    );
    assert_eq!(
        turns
            .iter()
            .filter(|l| l.contains("answered (end_turn)"))
            .count(),
        2,
        "{turns:?}"
    );
    up.stop_ok();
}

#[test]
fn up_refuses_an_a2a_listener_without_tokens() {
    let home = tempfile::tempdir().unwrap();
    let pack = home.path().join("crew");
    pack_new(home.path(), &pack, "com.example.crew", &["scout"]);
    let file = home.path().join("a2a-tokens");
    let up_with_tokens = |text: &str| {
        std::fs::write(&file, text).unwrap();
        let (pack, file) = (pack.to_str().unwrap(), file.to_str().unwrap());
        let args = [
            "up",
            pack,
            "--listen",
            "127.0.0.1:0",
            "--a2a-addr",
            "127.0.0.1:0",
            "--a2a-tokens",
            file,
        ];
        apiary_e2e::run(home.path(), &args)
    };
    let r = up_with_tokens("# nobody yet\n");
    assert_eq!(r.code, 64, "{}", r.stderr);
    assert!(r.stderr.contains("lists no token"), "{}", r.stderr);
    let r = up_with_tokens("tester sha256:1234\n");
    assert_eq!(r.code, 64, "{}", r.stderr);
    assert!(
        r.stderr.contains("a2a-tokens:1"),
        "the bad line is named: {}",
        r.stderr
    );
}

/// A JSON-RPC `SendMessage` to `base` with `token`, over a plain socket: the JSON answer.
fn send_message(base: &str, token: &str, text: &str) -> Value {
    use std::io::{Read, Write};
    let rest = base.strip_prefix("http://").unwrap();
    let (addr, path) = rest.split_once('/').unwrap();
    let body = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
        "params": {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": text}]}}})
    .to_string();
    let request = format!(
        "POST /{path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nA2A-Version: 1.0\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    serde_json::from_str(raw.split("\r\n\r\n").nth(1).unwrap()).unwrap()
}

/// A pack uninstalled while `up` runs (hot reload) stops answering over A2A, and its personas
/// are not started again by a request for them.
#[test]
fn an_uninstalled_pack_no_longer_answers_over_a2a_and_is_not_restarted_by_it() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let src = h.join("crew");
    pack_new(h, &src, "com.example.crew", &["scout"]);
    let built = apiary_e2e::run(
        h,
        &[
            "pack",
            "build",
            src.to_str().unwrap(),
            "-o",
            h.to_str().unwrap(),
            "--json",
        ],
    );
    let archive = built.json()["build"]["archive"]
        .as_str()
        .unwrap()
        .to_string();
    let installed = apiary_e2e::run(h, &["install", &archive]);
    assert_eq!(installed.code, 0, "{}", installed.stderr);
    let tokens = h.join("a2a-tokens");
    std::fs::write(&tokens, token_line("tester", "tok")).unwrap();
    let mut up = Up::start(
        h,
        &[],
        &[
            "--a2a-addr",
            "127.0.0.1:0",
            "--a2a-tokens",
            tokens.to_str().unwrap(),
        ],
        &[],
    );
    let line = up.wait_for(|l| l.starts_with("a2a http://"));
    let base = format!(
        "{}/a2a/com.example.crew/scout",
        line.split_whitespace().nth(1).unwrap()
    );

    let answered = send_message(&base, "tok", "before");
    assert_eq!(
        answered["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{answered}"
    );
    let removed = apiary_e2e::run(h, &["uninstall", "com.example.crew"]);
    assert_eq!(removed.code, 0, "{}", removed.stderr);
    up.wait_for(|l| l.starts_with("reloaded com.example.crew uninstalled"));
    let after = send_message(&base, "tok", "after");
    let status = &after["result"]["task"]["status"];
    assert_eq!(status["state"], "TASK_STATE_FAILED", "{after}");
    assert!(
        status["message"]["parts"][0]["text"]
            .as_str()
            .unwrap()
            .contains("no persona scout"),
        "{after}"
    );
    up.stop_ok();
    let started = up
        .seen
        .iter()
        .filter(|l| l.starts_with("persona scout ready"))
        .count();
    assert_eq!(
        started, 1,
        "scout was started once, at start-up: {:#?}",
        up.seen
    );
}
