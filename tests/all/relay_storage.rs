//! Strangers trying to fill the embedded relay's storage for good, through `apiary relay`: one key
//! past its share, kinds apiary does not use, many keys filling the foreign part; the operator's
//! posts (raw and through `apiary post`) are still stored, the relay warns at 80%, and a restart
//! does not bring evicted events back.

use std::path::Path;

use apiary_e2e::{data_dir, run};
use nostr::prelude::*;
use serde_json::json;

use crate::support::live::relays::{Kind as RelayKind, Options, TestRelay};
use crate::support::live::wire::{self, Wire};

/// The operator's key, written into the key store the relay reads.
fn operator_key(home: &Path) -> Keys {
    let dir = data_dir(home).join("keys");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("operator.key");
    let keys = Keys::generate();
    std::fs::write(&file, keys.secret_key().to_secret_hex()).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    keys
}

fn stored(url: &str, ids: &[&Event]) -> Vec<String> {
    let ids: Vec<String> = ids.iter().map(|e| e.id.to_hex()).collect();
    Wire::connect(url)
        .req(json!({"ids": ids}))
        .unwrap()
        .iter()
        .map(|e| e["id"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn strangers_cannot_fill_the_relay_and_the_operator_is_never_refused_for_space() {
    let home = tempfile::tempdir().unwrap();
    let operator = operator_key(home.path());
    // 40 events: foreign keys hold 32 together (20% headroom), 2 each (a 5% share).
    let mut relay = TestRelay::start(
        RelayKind::ApiaryRelay,
        home.path(),
        Options {
            args: &[
                "--max-stored-events",
                "40",
                "--key-rate",
                "1000",
                "--connection-rate",
                "1000",
            ],
            ..Options::default()
        },
    )
    .expect("apiary relay");
    let url = relay.external.as_ref().unwrap().url.clone();
    let mut w = Wire::connect(&url);
    let general: &[&[&str]] = &[&["h", "general"]];

    // One stranger: its share, then refused.
    let first = Keys::generate();
    let firsts: Vec<Event> = (0..2)
        .map(|i| wire::message(&first, &format!("mine {i}"), general))
        .collect();
    for ev in &firsts {
        assert!(w.publish(ev).unwrap().accepted);
    }
    let ok = w.publish(&wire::message(&first, "more", general)).unwrap();
    assert!(
        !ok.accepted && ok.message.starts_with("storage share full"),
        "{ok:?}"
    );

    // Kinds apiary does not use are refused from strangers, taken from the operator.
    let note = wire::signed(&first, 1, "a kind 1 note", &[]);
    let ok = w.publish(&note).unwrap();
    assert!(
        !ok.accepted && ok.message.contains("stores kinds 9, 1063, 10063, 39000"),
        "{ok:?}"
    );
    let auth_as_event = wire::signed(&Keys::generate(), 22242, "", &[]);
    assert!(!w.publish(&auth_as_event).unwrap().accepted);
    let operators_note = wire::signed(&operator, 1, "the operator's own kind 1", &[]);
    assert!(w.publish(&operators_note).unwrap().accepted);
    // A pack registry's file metadata is a kind strangers may publish (its own share).
    let registry = Keys::generate();
    let file_metadata = wire::signed(
        &registry,
        1063,
        "com.example.pack 1.0.0",
        &[&["x", &"ab".repeat(32)], &["m", "application/zip"]],
    );
    assert!(w.publish(&file_metadata).unwrap().accepted);

    // Twenty more strangers, two events each: the foreign part stays at 32, oldest out first.
    let mut flood = Vec::new();
    for i in 0..20 {
        let k = Keys::generate();
        for j in 0..2 {
            let ev = wire::message(&k, &format!("flood {i}.{j}"), general);
            let ok = w.publish(&ev).unwrap();
            assert!(ok.accepted, "{ok:?}");
            flood.push(ev);
        }
    }
    let all_nines = Wire::connect(&url)
        .req(json!({"kinds": [9], "limit": 500}))
        .unwrap();
    assert_eq!(
        all_nines.len(),
        32,
        "the foreign part: the 32 newest flood messages"
    );
    assert!(stored(&url, &[&firsts[0], &firsts[1], &file_metadata]).is_empty());

    // The operator is never refused for space: the headroom, then foreign events make way.
    let mut posts = vec![operators_note.clone()];
    for i in 0..12 {
        let post = wire::message(&operator, &format!("operator {i}"), general);
        let ok = w.publish(&post).unwrap();
        assert!(ok.accepted, "operator post {i}: {ok:?}");
        posts.push(post);
    }
    let via_cli = run(
        home.path(),
        &[
            "post",
            "--relay",
            &url,
            "--channel",
            "general",
            "from apiary post",
        ],
    );
    assert_eq!(via_cli.code, 0, "{}", via_cli.stderr);
    let posted_id = via_cli.stdout.trim().to_string();
    let found = Wire::connect(&url)
        .req(json!({"ids": [posted_id]}))
        .unwrap();
    assert_eq!(found.len(), 1, "apiary post's event is stored");

    // The relay warned on the way (80% full).
    let log = relay.external.as_ref().unwrap().log_text();
    assert!(log.contains("relay storage 80% full"), "{log}");

    // After a restart the evicted events stay gone and the operator's stay.
    drop(w);
    relay.external.as_mut().unwrap().restart();
    let refs: Vec<&Event> = posts.iter().collect();
    assert_eq!(stored(&url, &refs).len(), posts.len());
    let early: Vec<&Event> = flood[..8].iter().collect();
    assert!(stored(&url, &early).is_empty(), "evicted events came back");
    let journal = data_dir(home.path()).join("relay/events.jsonl");
    let lines = std::fs::read_to_string(&journal).unwrap().lines().count();
    assert_eq!(
        lines, 40,
        "the journal holds what is stored, compacted on start"
    );
    // The relay still takes a stranger's message (evicting the oldest foreign one).
    let mut w = Wire::connect(&url);
    let late = wire::message(&Keys::generate(), "still served", general);
    assert!(w.publish(&late).unwrap().accepted);
}
