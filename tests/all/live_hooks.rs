//! Hooks and triggers through the sandbox in the live harness: an `on_message` component that fails
//! drops the message (no prompt, no reply); one that succeeds sees the message in the persona's
//! workspace; the trigger component decides wakes.

use apiary_e2e::guest;

use crate::support::live::relays::{Kind, Options, TestRelay};
use crate::support::live::{Up, persona, prompts, write_pack};

#[test]
fn on_message_hook_failure_drops_the_message() {
    on_message_hook_failure_drops_the_message_on(Kind::Embedded);
}

#[test]
fn interop_nostr_rs_relay_on_message_hook_failure_drops_the_message() {
    on_message_hook_failure_drops_the_message_on(Kind::NostrRs);
}

fn on_message_hook_failure_drops_the_message_on(kind: Kind) {
    let home = tempfile::tempdir().unwrap();
    let Some(relay) = TestRelay::start(kind, home.path(), Options::default()) else {
        return;
    };
    let pack = home.path().join("pack");
    let workspaces = home.path().join("ws");
    write_pack(
        &pack,
        "com.example.hooks",
        &[
            (
                "guard",
                &persona(
                    "guard",
                    "subscribe: [\"general\"]\ntriggers:\n  all_messages: true\nhooks:\n  on_message: ./hooks/hostile.wasm",
                    "You are Guard.",
                ),
            ),
            (
                "scribe",
                &persona(
                    "scribe",
                    "subscribe: [\"general\"]\nhooks:\n  on_start: ./hooks/audit.wasm\n  on_message: ./hooks/audit.wasm",
                    "You are Scribe.",
                ),
            ),
        ],
        &[],
    );
    std::fs::create_dir_all(pack.join("hooks")).unwrap();
    std::fs::copy(guest("hostile_hook"), pack.join("hooks/hostile.wasm")).unwrap();
    std::fs::copy(guest("hook_audit"), pack.join("hooks/audit.wasm")).unwrap();

    let mut up = Up::start_on(
        &relay,
        home.path(),
        &[&pack],
        &["--workspace", workspaces.to_str().unwrap()],
        &[],
    );
    // The hostile hook traps on "panic": the message is dropped, never prompted.
    let bad = up.post("general", "panic", &[]);
    let line = up.wait_for(|l| l.starts_with(&format!("dropped guard {bad}")));
    assert!(line.contains("on_message"), "{line}");
    // Anything else passes the hook and is answered.
    let good = up.post("general", "all quiet", &[]);
    up.reply_to("guard", &good);
    let guard_prompts = prompts(&up.capture("guard"));
    assert_eq!(guard_prompts.len(), 1, "{guard_prompts:#?}");
    assert!(guard_prompts[0].contains(&good));

    // The audit hook ran in scribe's workspace for the message that woke scribe.
    let mention = up.post("general", "@scribe note this", &[]);
    up.reply_to("scribe", &mention);
    let log = std::fs::read_to_string(workspaces.join("com.example.hooks/scribe/audit.log"))
        .expect("audit.log written by the hook");
    assert!(log.contains(&mention), "{log}");
    assert!(log.contains("@scribe note this"), "{log}");
    assert!(
        !log.contains(&good),
        "scribe was not woken by {good}: {log}"
    );
    up.stop_ok();
}
