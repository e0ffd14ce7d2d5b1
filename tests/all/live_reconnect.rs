//! The harness against a relay it does not own (`apiary relay` or nostr-rs-relay, a separate
//! process): when that relay restarts, the harness reconnects by itself, a message posted while it
//! was away is answered exactly once, nothing earlier is answered again, and the relay's storage
//! keeps the history.

use crate::support::live::relays::{Kind, Options, TestRelay};
use crate::support::live::{Up, e_tags, persona, write_pack};

#[test]
fn relay_restart_reconnects_and_answers_the_gap_once() {
    relay_restart_reconnects_and_answers_the_gap_once_on(Kind::ApiaryRelay);
}

#[test]
fn interop_nostr_rs_relay_restart_reconnects_and_answers_the_gap_once() {
    relay_restart_reconnects_and_answers_the_gap_once_on(Kind::NostrRs);
}

fn relay_restart_reconnects_and_answers_the_gap_once_on(kind: Kind) {
    let home = tempfile::tempdir().unwrap();
    let Some(mut relay) = TestRelay::start(kind, home.path(), Options::default()) else {
        return;
    };
    let pack = home.path().join("pack");
    write_pack(
        &pack,
        "com.example.reconnect",
        &[(
            "pip",
            &persona("pip", "subscribe: [\"general\"]", "You are Pip."),
        )],
        &[],
    );
    let url = relay.external.as_ref().unwrap().url.clone();
    let mut up = Up::start_on(&relay, home.path(), &[&pack], &[], &[]);
    assert_eq!(up.url, url);

    let before = up.post("general", "@pip before the restart", &[]);
    up.reply_to("pip", &before);

    relay.external.as_mut().unwrap().restart();
    // Posted while the harness may still be disconnected: it must be picked up on reconnection.
    let gap = up.post("general", "@pip during the gap", &[]);
    let reply = up.reply_to("pip", &gap);

    let events = up.history("general");
    let replies: Vec<_> = events
        .iter()
        .filter(|e| e_tags(e).iter().any(|(t, _)| t == &gap))
        .collect();
    assert_eq!(replies.len(), 1, "{events:#?}");
    assert_eq!(replies[0]["id"], reply);
    // The relay persists to its data dir: what was posted before the restart is still there.
    assert!(events.iter().any(|e| e["id"] == before), "{events:#?}");
    assert_eq!(events.len(), 4, "{events:#?}");
    up.stop_ok();
    let answered_gap = up
        .seen
        .iter()
        .filter(|l| l.starts_with("reply pip ") && l.ends_with(&format!(" to {gap}")))
        .count();
    assert_eq!(answered_gap, 1, "{:#?}", up.seen);
    let answered_before = up
        .seen
        .iter()
        .filter(|l| l.starts_with("reply pip ") && l.ends_with(&format!(" to {before}")))
        .count();
    assert_eq!(answered_before, 1, "{:#?}", up.seen);
    relay.external.as_mut().unwrap().stop();
}
