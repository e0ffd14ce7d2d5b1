//! Conversation continuity: an agent that advertises `loadSession` gets each (persona, channel)
//! session back after it crashed mid-thread and after `apiary up` restarted, instead of a blank one.

use crate::support::live::{Up, persona, received, write_pack};

fn session_of(m: &serde_json::Value) -> String {
    m["params"]["sessionId"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn a_crashed_agent_and_a_restarted_up_resume_the_channels_session() {
    let home = tempfile::tempdir().unwrap();
    let pack = home.path().join("pack");
    write_pack(
        &pack,
        "com.example.continuity",
        &[(
            "pip",
            &persona("pip", "subscribe: [\"general\"]", "You are Pip."),
        )],
        &[],
    );
    let env = [("APIARY_AGENT_LOAD_SESSION", "1")];
    let mut up = Up::start(home.path(), &[&pack], &[], &env);
    let first = up.post("general", "@pip hello", &[]);
    up.reply_to("pip", &first);
    let prompts = received(&up.capture("pip"), "session/prompt")
        .into_iter()
        .map(session_of)
        .collect::<Vec<_>>();
    assert_eq!(prompts.len(), 1);
    let session = prompts[0].clone();
    assert!(!session.is_empty());

    // Mid-thread the agent dies; its replacement reopens the same session and answers in it.
    let second = up.post(
        "general",
        "@pip !crash-once and then?",
        &["--reply-to", &first],
    );
    up.reply_to("pip", &second);
    let capture = up.capture("pip");
    let loads: Vec<String> = received(&capture, "session/load")
        .into_iter()
        .map(session_of)
        .collect();
    assert_eq!(loads.len(), 1, "the restarted agent reopened a session");
    assert_eq!(
        loads[0], session,
        "the restarted agent reopened the session"
    );
    let prompts: Vec<String> = received(&capture, "session/prompt")
        .into_iter()
        .map(session_of)
        .collect();
    assert!(prompts.iter().all(|s| s == &session), "{prompts:?}");
    assert_eq!(
        received(&capture, "session/new").len(),
        1,
        "no blank session"
    );
    up.stop_ok();

    // A new `apiary up` on the same data dir resumes it too.
    let mut up = Up::start(home.path(), &[&pack], &[], &env);
    let third = up.post("general", "@pip still there?", &["--reply-to", &first]);
    up.reply_to("pip", &third);
    let capture = up.capture("pip");
    assert_eq!(received(&capture, "session/load").len(), 2);
    let last = received(&capture, "session/prompt")
        .last()
        .map(|m| session_of(m));
    assert_eq!(last.as_deref(), Some(session.as_str()));
    assert_eq!(received(&capture, "session/new").len(), 1);
    up.stop_ok();
}

/// A saved session the agent no longer knows (its state was wiped) is not an error: the persona
/// starts a new session and answers.
#[test]
fn a_session_the_agent_forgot_starts_a_new_one() {
    let home = tempfile::tempdir().unwrap();
    let pack = home.path().join("pack");
    write_pack(
        &pack,
        "com.example.continuity",
        &[(
            "pip",
            &persona("pip", "subscribe: [\"general\"]", "You are Pip."),
        )],
        &[],
    );
    let ws = home.path().join("ws");
    let args = ["--workspace-root", ws.to_str().unwrap()];
    let env = [("APIARY_AGENT_LOAD_SESSION", "1")];
    let mut up = Up::start(home.path(), &[&pack], &args, &env);
    let first = up.post("general", "@pip hello", &[]);
    up.reply_to("pip", &first);
    up.stop_ok();
    std::fs::remove_file(ws.join("com.example.continuity/pip/.apiary-agent-sessions")).unwrap();
    let mut up = Up::start(home.path(), &[&pack], &args, &env);
    let second = up.post("general", "@pip again", &[]);
    up.reply_to("pip", &second);
    let capture = up.capture("pip");
    assert_eq!(received(&capture, "session/load").len(), 1);
    assert_eq!(received(&capture, "session/new").len(), 2);
    up.stop_ok();
}
