//! Supervision: an agent that dies mid-turn is restarted and the message retried, so the trigger
//! gets exactly one reply (never the dead turn's partial text); a persona whose agent keeps dying
//! stops after the circuit breaker opens, and the harness keeps serving the others.

use crate::support::live::relays::{Kind, Options, TestRelay};
use crate::support::live::{Up, e_tags, persona, write_pack};

#[test]
fn crash_mid_turn_restarts_and_answers_once() {
    crash_mid_turn_restarts_and_answers_once_on(Kind::Embedded);
}

#[test]
fn interop_nostr_rs_relay_crash_mid_turn_restarts_and_answers_once() {
    crash_mid_turn_restarts_and_answers_once_on(Kind::NostrRs);
}

fn crash_mid_turn_restarts_and_answers_once_on(kind: Kind) {
    let home = tempfile::tempdir().unwrap();
    let Some(relay) = TestRelay::start(kind, home.path(), Options::default()) else {
        return;
    };
    let pack = home.path().join("pack");
    write_pack(
        &pack,
        "com.example.crash",
        &[(
            "pip",
            &persona("pip", "subscribe: [\"general\"]", "You are Pip."),
        )],
        &[],
    );
    let mut up = Up::start_on(&relay, home.path(), &[&pack], &[], &[]);
    let id = up.post("general", "@pip please !crash-once now", &[]);
    let crashed = up.wait_for(|l| l.starts_with(&format!("crashed pip {id}")));
    assert!(crashed.contains("retrying"), "{crashed}");
    up.wait_for(|l| l.starts_with("restarted pip agent"));
    let reply = up.reply_to("pip", &id);

    // The agent was started twice, each time with initialize and session/new.
    let entries = up.capture("pip");
    let starts = entries.iter().filter(|e| e.get("env").is_some()).count();
    assert_eq!(starts, 2, "{entries:#?}");

    // A later message goes to the new agent as usual.
    let next = up.post("general", "@pip still there?", &[]);
    up.reply_to("pip", &next);

    let events = up.history("general");
    let replies_to_first: Vec<_> = events
        .iter()
        .filter(|e| e["id"] != id && e_tags(e).iter().any(|(t, _)| t == &id))
        .collect();
    assert_eq!(replies_to_first.len(), 1, "{events:#?}");
    assert_eq!(replies_to_first[0]["id"], reply);
    assert!(
        !events
            .iter()
            .any(|e| e["content"].as_str().unwrap().contains("partial text")),
        "the dead turn's text was published: {events:#?}"
    );
    up.stop_ok();
}
