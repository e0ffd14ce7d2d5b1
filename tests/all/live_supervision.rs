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

/// Spec §9: `on_stop` runs "after the agent session ends (normal exit or error)" and `on_start`
/// "before the agent session starts": around each restart after a crash, once when the circuit
/// breaker gives up on the agent, and not a second time at shutdown for a session already ended.
#[test]
fn a_crash_and_the_breaker_end_sessions_with_on_stop_and_a_restart_runs_on_start() {
    let home = tempfile::tempdir().unwrap();
    let pack = home.path().join("pack");
    let ws = home.path().join("ws");
    write_pack(
        &pack,
        "com.example.crashhooks",
        &[(
            "pip",
            &persona(
                "pip",
                "subscribe: [\"general\"]\nhooks:\n  on_start: ./hooks/start.sh\n  on_stop: ./hooks/stop.sh",
                "You are Pip.",
            ),
        )],
        &[
            ("hooks/start.sh", "#!/bin/sh\necho start >> hooks.log\n"),
            ("hooks/stop.sh", "#!/bin/sh\necho stop >> hooks.log\n"),
        ],
    );
    let log = ws.join("com.example.crashhooks/pip/hooks.log");
    let read = || std::fs::read_to_string(&log).unwrap_or_default();
    let args = ["--workspace-root", ws.to_str().unwrap(), "--trust-hooks"];
    let mut up = Up::start(home.path(), &[&pack], &args, &[]);
    assert_eq!(read(), "start\n");

    let id = up.post("general", "@pip please !crash-once now", &[]);
    up.reply_to("pip", &id);
    assert_eq!(read(), "start\nstop\nstart\n", "the crash ended a session");

    // Two turns that always crash: three attempts each, restarts 2 to 5 (each with its hooks),
    // then the breaker refuses a sixth.
    let first = up.post("general", "@pip !crash", &[]);
    up.wait_for(|l| l.starts_with(&format!("error pip {first}:")));
    let second = up.post("general", "@pip !crash again", &[]);
    let open = up.wait_for(|l| l.starts_with(&format!("error pip {second}:")));
    assert!(open.contains("circuit open"), "{open}");
    let expected = format!("start\n{}stop\n", "stop\nstart\n".repeat(5));
    assert_eq!(read(), expected, "the breaker ended the last session");
    up.stop_ok();
    assert_eq!(read(), expected, "no second on_stop at shutdown");
}
