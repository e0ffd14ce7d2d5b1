//! NIP-42 authentication: with the embedded relay requiring it (`apiary up --relay-auth`), every
//! persona authenticates with its own key and the harness still receives and replies, `post` and
//! `tail` authenticate with the operator key, and a client that does not authenticate reads nothing.
//! Against nostr-rs-relay with `nip42_auth` on (it challenges every connection but cannot refuse
//! unauthenticated reads), the relay's log shows each persona and the operator authenticated.

use std::time::Duration;

use apiary_e2e::data_dir;
use serde_json::{Value, json};

use crate::support::live::relays::{Kind, Options, TestRelay};
use crate::support::live::wire::{self, Wire};
use crate::support::live::{Up, e_tags, persona, write_pack};

fn pack(root: &std::path::Path) {
    write_pack(
        root,
        "com.example.auth",
        &[
            (
                "pip",
                &persona("pip", "subscribe: [\"general\"]", "You are Pip."),
            ),
            (
                "kee",
                &persona(
                    "kee",
                    "subscribe: [\"general\"]\ntriggers:\n  mentions: false\n  keywords: [\"deploy\"]",
                    "You are Kee.",
                ),
            ),
        ],
        &[],
    );
}

fn pubkey_of(up: &mut Up, persona: &str) -> String {
    up.wait_for(|l| l.starts_with(&format!("persona {persona} ready ")))
        .split_whitespace()
        .find_map(|w| w.strip_prefix("pubkey="))
        .unwrap()
        .to_string()
}

/// What a client that never answers the challenge gets for a REQ: every relay message until the
/// subscription is closed (or 10 s pass).
fn unauthenticated_req(url: &str, channel: &str) -> Vec<Value> {
    let mut w = Wire::connect(url);
    w.send(json!(["REQ", "anon", {"kinds": [9], "#h": [channel]}]));
    w.wait(Duration::from_secs(10), |m| m[0] == "CLOSED");
    w.got
}

#[test]
fn required_auth_harness_replies_and_anonymous_reads_are_refused() {
    let home = tempfile::tempdir().unwrap();
    let p = home.path().join("pack");
    pack(&p);
    let mut up = Up::start(home.path(), &[&p], &["--relay-auth"], &[]);
    pubkey_of(&mut up, "pip");

    // `post` authenticates as the operator; the harness reads, prompts, and each persona publishes
    // on its own authenticated connection.
    let hello = up.post("general", "hello @pip", &[]);
    let reply = up.reply_to("pip", &hello);
    let deploy = up.post("general", "time to deploy", &[]);
    let kee_reply = up.reply_to("kee", &deploy);

    // `tail` authenticates too and sees everything.
    let events = up.history("general");
    assert_eq!(events.len(), 4, "{events:#?}");
    let r = events
        .iter()
        .find(|e| e["id"] == reply)
        .expect("pip's reply");
    assert_eq!(e_tags(r), [(hello.clone(), "root".to_string())]);
    assert!(events.iter().any(|e| e["id"] == kee_reply));

    // Without authenticating: a challenge, the subscription closed as auth-required, no event.
    let got = unauthenticated_req(&up.url, "general");
    assert!(got.iter().any(|m| m[0] == "AUTH"), "{got:#?}");
    let closed = got
        .iter()
        .find(|m| m[0] == "CLOSED")
        .unwrap_or_else(|| panic!("subscription not closed: {got:#?}"));
    assert!(
        closed[2].as_str().unwrap().starts_with("auth-required:"),
        "{closed}"
    );
    assert!(!got.iter().any(|m| m[0] == "EVENT"), "{got:#?}");
    up.stop_ok();
}

#[test]
fn required_auth_admits_only_the_operator_and_persona_keys() {
    let home = tempfile::tempdir().unwrap();
    let p = home.path().join("pack");
    pack(&p);
    let mut up = Up::start(home.path(), &[&p], &["--relay-auth"], &[]);
    pubkey_of(&mut up, "pip");
    let hello = up.post("general", "hello @pip", &[]);
    up.reply_to("pip", &hello);

    // A stranger running apiary with a key of their own: authenticated, but not on the list.
    let stranger_home = tempfile::tempdir().unwrap();
    let apiary_as_stranger = |args: &[&str]| {
        let mut cmd = apiary_e2e::apiary(stranger_home.path());
        cmd.args(args);
        apiary_e2e::Run::of(cmd)
    };
    let post = apiary_as_stranger(&[
        "post",
        "--relay",
        &up.url,
        "--channel",
        "general",
        "@pip obey",
    ]);
    assert_ne!(post.code, 0, "a stranger posted: {}", post.stdout);
    let tail = apiary_as_stranger(&[
        "tail",
        "--relay",
        &up.url,
        "--channel",
        "general",
        "--json",
        "--no-follow",
        "--timeout",
        "30",
    ]);
    assert!(
        tail.stdout.trim().is_empty(),
        "a stranger read: {}",
        tail.stdout
    );

    // On the wire: the relay refuses the stranger's AUTH, then their reads and writes.
    let stranger = nostr::prelude::Keys::generate();
    let mut w = Wire::connect(&up.url);
    let filter = json!({"kinds": [9], "#h": ["general"]});
    assert!(w.req(filter.clone()).is_err());
    let ok = w.auth(&stranger, &up.url);
    assert!(!ok.accepted, "stranger authenticated");
    assert!(ok.message.starts_with("restricted:"), "{}", ok.message);
    let closed = w.req(filter.clone()).unwrap_err();
    assert!(
        closed[2].as_str().unwrap().starts_with("auth-required:"),
        "{closed}"
    );
    let theirs = wire::message(&stranger, "@pip obey", &[&["h", "general"]]);
    assert!(!w.publish(&theirs).unwrap().accepted);

    // The operator's key, from the operator's store, is admitted the same way.
    let operator = wire::keys_of(&data_dir(home.path()).join("keys/operator.key"));
    let mut w = Wire::connect(&up.url);
    assert!(w.req(filter.clone()).is_err());
    let ok = w.auth(&operator, &up.url);
    assert!(ok.accepted, "{}", ok.message);
    assert_eq!(w.req(filter).unwrap().len(), 2);
    up.stop_ok();
}

#[test]
fn interop_nostr_rs_relay_personas_authenticate_with_their_own_keys() {
    let home = tempfile::tempdir().unwrap();
    let Some(relay) = TestRelay::start(
        Kind::NostrRs,
        home.path(),
        Options {
            auth: true,
            ..Options::default()
        },
    ) else {
        return;
    };
    let p = home.path().join("pack");
    pack(&p);
    let mut up = Up::start_on(&relay, home.path(), &[&p], &[], &[]);
    let pip = pubkey_of(&mut up, "pip");
    let kee = pubkey_of(&mut up, "kee");
    let hello = up.post("general", "hello @pip", &[]);
    up.reply_to("pip", &hello);
    let deploy = up.post("general", "time to deploy", &[]);
    up.reply_to("kee", &deploy);
    let events = up.history("general");
    assert_eq!(events.len(), 4, "{events:#?}");
    let operator = events.iter().find(|e| e["id"] == hello).unwrap()["pubkey"]
        .as_str()
        .unwrap()
        .to_string();
    up.stop_ok();

    // nostr-rs-relay logs `client is authenticated: (cid: .., pubkey: "<8 hex>")`.
    let log = relay.external.as_ref().unwrap().log_text();
    for (who, key) in [("pip", &pip), ("kee", &kee), ("operator", &operator)] {
        let line = format!("pubkey: \"{}\"", &key[..8]);
        assert!(
            log.lines()
                .any(|l| l.contains("client is authenticated") && l.contains(&line)),
            "{who} ({key}) never authenticated; relay log:\n{log}"
        );
    }
}
