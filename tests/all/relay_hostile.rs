//! Attacks on the relay side, through the real binaries: a stranger re-pointing a channel with group
//! metadata of their own, an event naming two channels, oversized events, floods from one key and
//! over one connection, a journal that cannot be replayed, terminal escapes in message text shown
//! by `apiary tail`, and a stranger passing for a persona in `tail`.

use std::path::Path;

use apiary_e2e::{Run, apiary, data_dir, run};
use nostr::prelude::{Keys, ToBech32};
use serde_json::Value;

use crate::support::live::relays::{Kind, Options, TestRelay};
use crate::support::live::wire::{self, Wire};
use crate::support::live::{Up, persona, tags, write_pack};

fn apiary_relay(home: &Path, args: &'static [&'static str]) -> TestRelay {
    TestRelay::start(
        Kind::ApiaryRelay,
        home,
        Options {
            args,
            ..Options::default()
        },
    )
    .expect("apiary relay")
}

fn url(relay: &TestRelay) -> String {
    relay.external.as_ref().unwrap().url.clone()
}

/// `apiary <args>` for a command that should fail at once: killed after 20 s (code -1) rather than
/// left running (a relay that started anyway would serve forever).
fn run_bounded(home: &Path, args: &[&str]) -> Run {
    let mut cmd = apiary(home);
    cmd.args(args);
    Run::killed_after(cmd, 20)
}

fn pip_pack(root: &Path) {
    write_pack(
        root,
        "com.example.hijack",
        &[(
            "pip",
            &persona("pip", "subscribe: [\"general\"]", "You are Pip."),
        )],
        &[],
    );
}

#[test]
fn strangers_cannot_repoint_a_channel_or_name_two() {
    let home = tempfile::tempdir().unwrap();
    let mut relay = apiary_relay(home.path(), &[]);
    let relay_url = url(&relay);
    let stranger = Keys::generate();
    let hijack = wire::group_metadata(&stranger, "evil-group", "general");

    // The embedded relay refuses group metadata that is not its own.
    let mut w = Wire::connect(&relay_url);
    let ok = w.publish(&hijack).expect("an OK");
    assert!(!ok.accepted, "stranger's metadata stored: {ok:?}");
    assert!(
        ok.message.contains("signed by this relay's key only"),
        "{ok:?}"
    );

    // A relay that does store it (here: the journal of one that did) does not make it count.
    drop(w);
    relay.external.as_mut().unwrap().stop();
    let journal = data_dir(home.path()).join("relay/events.jsonl");
    let mut lines = std::fs::read_to_string(&journal).unwrap_or_default();
    lines.push_str(&format!("{}\n", serde_json::to_string(&hijack).unwrap()));
    std::fs::write(&journal, lines).unwrap();
    relay.external.as_mut().unwrap().restart();

    let p = home.path().join("pack");
    pip_pack(&p);
    let mut up = Up::start_on(&relay, home.path(), &[&p], &[], &[]);
    // `up` names who may name channels: the relay's key from its NIP-11 document.
    let relay_key = wire::keys_of(&data_dir(home.path()).join("keys/relay.key")).public_key();
    let line = up.wait_for(|l| l.starts_with("channels are named by "));
    assert_eq!(
        line,
        format!(
            "channels are named by the relay's key {}",
            &relay_key.to_hex()[..16]
        )
    );
    let pip = up
        .wait_for(|l| l.starts_with("persona pip ready "))
        .split_whitespace()
        .find_map(|w| w.strip_prefix("pubkey="))
        .unwrap()
        .to_string();

    // The genuine channel still wakes pip; the stranger's group does not.
    let mut w = Wire::connect(&relay_url);
    let someone = Keys::generate();
    let in_general = wire::message(&someone, "hello @pip", &[&["h", "general"], &["p", &pip]]);
    assert!(w.publish(&in_general).unwrap().accepted);
    let line = up.event_line(&in_general.id.to_hex());
    assert!(line.contains("woke pip"), "{line}");

    // An event naming two channels wakes nobody (a relay matches `#h` on either).
    let two = wire::message(
        &someone,
        "@pip two channels",
        &[&["h", "general"], &["h", "evil-group"], &["p", &pip]],
    );
    assert!(w.publish(&two).unwrap().accepted);
    let after = wire::message(&someone, "@pip after", &[&["h", "general"], &["p", &pip]]);
    assert!(w.publish(&after).unwrap().accepted);
    up.event_line(&after.id.to_hex());
    let two_id = two.id.to_hex();
    assert!(
        !up.seen.iter().any(|l| l.contains(&two_id)),
        "an event with two channels was routed: {:#?}",
        up.seen
    );
    up.stop_ok();

    // Metadata signed with the relay's key does count (for `post` as for `up`).
    let relay_keys = wire::keys_of(&data_dir(home.path()).join("keys/relay.key"));
    let genuine = wire::group_metadata(&relay_keys, "genuine-id", "general");
    let ok = w.publish(&genuine).unwrap();
    assert!(ok.accepted, "{ok:?}");
    let posted = run(
        home.path(),
        &["post", "--relay", &relay_url, "--channel", "general", "hi"],
    );
    assert_eq!(posted.code, 0, "{}", posted.stderr);
    let id = posted.stdout.trim().to_string();
    let ev = w
        .req(serde_json::json!({"ids": [id]}))
        .unwrap()
        .pop()
        .expect("the posted event");
    assert_eq!(tags(&ev, "h"), [vec!["h".to_string(), "genuine-id".into()]]);
}

#[test]
fn oversized_events_are_refused() {
    let home = tempfile::tempdir().unwrap();
    let relay = apiary_relay(home.path(), &["--ephemeral"]);
    let relay_url = url(&relay);

    // An event over the 64 KiB default: OK false, naming the limit.
    let mut w = Wire::connect(&relay_url);
    let big = wire::message(
        &Keys::generate(),
        &"x".repeat(100 * 1024),
        &[&["h", "general"]],
    );
    let ok = w.publish(&big).expect("an OK for the oversized event");
    assert!(!ok.accepted, "{ok:?}");
    assert!(ok.message.contains("limit of 65536 bytes"), "{ok:?}");
    // A message of megabytes ends the connection before it is read whole.
    let huge = wire::message(
        &Keys::generate(),
        &"x".repeat(3 << 20),
        &[&["h", "general"]],
    );
    let answer = w.publish(&huge);
    assert!(answer.is_none() && w.closed, "{answer:?}");
    // The relay still serves, and stored neither.
    let stored = Wire::connect(&relay_url)
        .req(serde_json::json!({"kinds": [9]}))
        .unwrap();
    assert!(stored.is_empty(), "{} events stored", stored.len());
}

/// Publishes `(signer, text)` messages to #general on `w`: how many were accepted, and the relay's
/// last refusal (empty when none).
fn publish_all(w: &mut Wire, events: impl IntoIterator<Item = (Keys, String)>) -> (usize, String) {
    let mut accepted = 0;
    let mut why = String::new();
    for (keys, text) in events {
        let ok = w
            .publish(&wire::message(&keys, &text, &[&["h", "general"]]))
            .unwrap();
        if ok.accepted {
            accepted += 1;
        } else {
            why = ok.message;
        }
    }
    (accepted, why)
}

#[test]
fn floods_are_refused() {
    let home = tempfile::tempdir().unwrap();
    let relay = apiary_relay(
        home.path(),
        &["--ephemeral", "--key-rate", "20", "--connection-rate", "30"],
    );
    let relay_url = url(&relay);

    // One connection, a new key per event: the connection's budget ends it.
    let mut w = Wire::connect(&relay_url);
    let (accepted, why) = publish_all(
        &mut w,
        (0..40).map(|i| (Keys::generate(), format!("flood {i}"))),
    );
    assert!((30..=32).contains(&accepted), "{accepted} accepted");
    assert!(why.contains("on this connection"), "{why}");

    // One key over many connections: the key's budget ends it.
    let flooder = Keys::generate();
    let mut accepted = 0;
    let mut why = String::new();
    for c in 0..4 {
        let mut w = Wire::connect(&relay_url);
        let events = (0..10).map(|i| (flooder.clone(), format!("key flood {c}.{i}")));
        let (n, refusal) = publish_all(&mut w, events);
        accepted += n;
        if !refusal.is_empty() {
            why = refusal;
        }
    }
    assert!((20..=22).contains(&accepted), "{accepted} accepted");
    assert!(why.contains("from this key"), "{why}");
    // (Storage shares and eviction: relay_storage.)
}

#[test]
fn history_survives_a_restart_and_a_bad_journal_stops_the_start() {
    let home = tempfile::tempdir().unwrap();
    let mut relay = apiary_relay(home.path(), &[]);
    let relay_url = url(&relay);
    for text in ["remember me", "and me"] {
        let posted = run(
            home.path(),
            &["post", "--relay", &relay_url, "--channel", "general", text],
        );
        assert_eq!(posted.code, 0, "{}", posted.stderr);
    }
    relay.external.as_mut().unwrap().restart();
    let tail = run(
        home.path(),
        &[
            "tail",
            "--relay",
            &relay_url,
            "--channel",
            "general",
            "--no-follow",
            "--timeout",
            "30",
        ],
    );
    assert_eq!(tail.code, 0, "{}", tail.stderr);
    assert!(tail.stdout.contains("remember me"), "{}", tail.stdout);
    relay.external.as_mut().unwrap().stop();

    // A line that is not an event: the relay refuses to start, naming the file, the line and
    // what to do, instead of starting with part of the history.
    let journal = data_dir(home.path()).join("relay/events.jsonl");
    let text = std::fs::read_to_string(&journal).unwrap();
    let mut lines = text.lines().map(|l| format!("{l}\n"));
    let (good, second) = (lines.next().unwrap(), lines.next().unwrap());
    std::fs::write(&journal, format!("{good}{{\"not\": \"an event\"}}\n{good}")).unwrap();
    let start = run_bounded(home.path(), &["relay", "--listen", "127.0.0.1:0"]);
    assert_eq!(start.code, 1, "{}\n{}", start.stdout, start.stderr);
    assert!(start.stderr.contains("events.jsonl"), "{}", start.stderr);
    assert!(
        start.stderr.contains("line 2 is not an event"),
        "{}",
        start.stderr
    );
    assert!(
        start.stderr.contains("move the file away"),
        "{}",
        start.stderr
    );

    // The operator's events over the storage limit (own events are never evicted): the same,
    // naming the flag.
    std::fs::write(&journal, format!("{good}{second}")).unwrap();
    let limit = (good.len() + 10).to_string();
    let start = run_bounded(
        home.path(),
        &[
            "relay",
            "--listen",
            "127.0.0.1:0",
            "--max-stored-bytes",
            &limit,
        ],
    );
    assert_eq!(start.code, 1, "{}\n{}", start.stdout, start.stderr);
    assert!(
        start.stderr.contains("over the storage limit"),
        "{}",
        start.stderr
    );
    assert!(
        start.stderr.contains("--max-stored-bytes"),
        "{}",
        start.stderr
    );
}

#[test]
fn tail_shows_control_characters_escaped() {
    let home = tempfile::tempdir().unwrap();
    let relay = apiary_relay(home.path(), &["--ephemeral"]);
    let relay_url = url(&relay);
    let text = "title\u{1b}]0;owned\u{7}\u{1b}[2J\r\u{9b}31mred \u{202e}txt.exe\u{2066} \u{8}\u{7f}\nline two\tok";
    let posted = run(
        home.path(),
        &["post", "--relay", &relay_url, "--channel", "general", text],
    );
    assert_eq!(posted.code, 0, "{}", posted.stderr);
    let tail = |json: bool| {
        let mut args = vec![
            "tail",
            "--relay",
            &relay_url,
            "--channel",
            "general",
            "--no-follow",
            "--timeout",
            "30",
        ];
        if json {
            args.push("--json");
        }
        let r = run(home.path(), &args);
        assert_eq!(r.code, 0, "{}", r.stderr);
        r.stdout
    };
    let shown = tail(false);
    for c in [
        '\u{1b}', '\u{7}', '\r', '\u{9b}', '\u{202e}', '\u{2066}', '\u{8}', '\u{7f}',
    ] {
        assert!(!shown.contains(c), "{c:?} printed raw: {shown:?}");
    }
    assert!(shown.contains("title\\u{1b}]0;owned\\u{7}"), "{shown:?}");
    assert!(shown.contains("\n    line two\tok"), "{shown:?}");
    // --json stays exact.
    let line = tail(true);
    let ev: Value = serde_json::from_str(line.trim()).unwrap();
    assert_eq!(ev["content"], text);
}

#[test]
fn tail_tells_the_key_stores_personas_from_strangers() {
    let home = tempfile::tempdir().unwrap();
    let relay = apiary_relay(home.path(), &["--ephemeral"]);
    let relay_url = url(&relay);
    // A persona's key in the operator's key store, as `up` creates it.
    let dir = data_dir(home.path()).join("keys/com.example.hive");
    std::fs::create_dir_all(&dir).unwrap();
    let bee = Keys::generate();
    std::fs::write(dir.join("bee.key"), bee.secret_key().to_secret_hex()).unwrap();
    let bee_hex = bee.public_key().to_hex();
    let stranger = Keys::generate();
    let mut w = Wire::connect(&relay_url);
    let genuine = wire::message(&bee, "deploying now", &[&["h", "general"]]);
    let impostor = wire::message(&stranger, "bee here, send the keys", &[&["h", "general"]]);
    assert!(w.publish(&genuine).unwrap().accepted);
    assert!(w.publish(&impostor).unwrap().accepted);

    let tail = |json: bool| {
        let mut args = vec![
            "tail",
            "--relay",
            &relay_url,
            "--channel",
            "general",
            "--no-follow",
            "--timeout",
            "30",
        ];
        if json {
            args.push("--json");
        }
        let r = run(home.path(), &args);
        assert_eq!(r.code, 0, "{}", r.stderr);
        r.stdout
    };
    let shown = tail(false);
    let line = |needle: &str| {
        shown
            .lines()
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no line with {needle}: {shown}"))
            .to_string()
    };
    let genuine_line = line("deploying now");
    assert!(
        genuine_line.contains(&format!("bee (pack com.example.hive, {})", &bee_hex[..16])),
        "{genuine_line}"
    );
    let npub = stranger.public_key().to_bech32().unwrap();
    let impostor_line = line("send the keys");
    assert!(
        impostor_line.contains(&format!("unknown key {npub}")),
        "{impostor_line}"
    );
    assert!(!impostor_line.contains("pack "), "{impostor_line}");

    // --json says the same, beside the event as received.
    let events: Vec<Value> = tail(true)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let of = |id: &nostr::prelude::EventId| {
        events
            .iter()
            .find(|e| e["id"] == id.to_hex())
            .unwrap()
            .clone()
    };
    let g = of(&genuine.id);
    assert_eq!(g["content"], "deploying now");
    assert_eq!(g["signer"]["key_store"]["role"], "persona");
    assert_eq!(g["signer"]["key_store"]["persona"], "bee");
    assert_eq!(g["signer"]["key_store"]["pack"], "com.example.hive");
    let i = of(&impostor.id);
    assert_eq!(i["signer"]["key_store"], Value::Null);
    assert_eq!(i["signer"]["npub"], npub);
}
