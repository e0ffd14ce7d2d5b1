//! Stores kept between calls (`sandbox::warm`): a hook's store serves the next call for the same
//! persona and workspace only after a call that ended normally; a trap, a deadline, the memory cap,
//! leaked handles or a replaced workspace start a fresh one, and the number kept is bounded.
//!
//! `hostile-hook` answers the text "count" with `Err("count N")`, N being the calls this instance
//! has counted, which shows whether a call ran in a kept instance or a fresh one.

use std::path::Path;
use std::time::Duration;

use apiary::builtin::BUILT_GUESTS_DIR;
use apiary::sandbox::hook::{HookMessage, HookPoint, HookRunner};
use apiary::sandbox::trigger::{Message, Persona, Reason};
use apiary::sandbox::{Limits, Sandbox, SandboxConfig, SandboxError};

fn sandbox(pool_instances: u32) -> Sandbox {
    Sandbox::new(SandboxConfig {
        cache_dir: None,
        pool_instances,
        ..SandboxConfig::default()
    })
    .expect("sandbox")
}

fn hook(sb: &Sandbox, name: &str) -> HookRunner {
    let path = Path::new(BUILT_GUESTS_DIR).join(format!("{name}.wasm"));
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    HookRunner::new(sb.load(name, &bytes).expect("load")).expect("hook")
}

fn send(
    sb: &Sandbox,
    hook: &HookRunner,
    persona: &str,
    text: &str,
    workspace: &Path,
) -> Result<(), SandboxError> {
    let msg = HookMessage {
        id: "m".into(),
        channel: "general".into(),
        author: "a".into(),
        author_name: None,
        text: text.into(),
        ..Default::default()
    };
    hook.run(
        sb,
        HookPoint::OnMessage,
        "pack",
        persona,
        Some(&msg),
        workspace,
    )
    .map(|_| ())
}

/// The instance's count after one more "count" call.
fn count(sb: &Sandbox, hook: &HookRunner, persona: &str, workspace: &Path) -> u32 {
    match send(sb, hook, persona, "count", workspace) {
        Err(SandboxError::Guest { message, .. }) => message
            .strip_prefix("count ")
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("unexpected answer {message:?}")),
        other => panic!("unexpected result {other:?}"),
    }
}

#[test]
fn a_kept_store_serves_its_persona_only_and_a_trap_starts_fresh() {
    let sb = sandbox(128);
    let dir = tempfile::tempdir().unwrap();
    let h = hook(&sb, "hostile_hook");
    assert_eq!(count(&sb, &h, "eve", dir.path()), 1);
    assert_eq!(count(&sb, &h, "eve", dir.path()), 2, "kept between calls");
    assert_eq!(
        count(&sb, &h, "bob", dir.path()),
        1,
        "another persona never gets eve's instance"
    );
    let other = tempfile::tempdir().unwrap();
    assert_eq!(
        count(&sb, &h, "eve", other.path()),
        1,
        "another workspace never gets this one's preopen"
    );
    let err = send(&sb, &h, "eve", "panic", dir.path()).unwrap_err();
    assert!(matches!(err, SandboxError::Trap { .. }), "{err:?}");
    assert_eq!(count(&sb, &h, "eve", dir.path()), 1, "fresh after a trap");
    assert_eq!(
        count(&sb, &h, "bob", dir.path()),
        2,
        "bob's store was not touched"
    );
}

#[test]
fn a_deadline_or_the_memory_cap_drops_the_store() {
    let sb = sandbox(128);
    let dir = tempfile::tempdir().unwrap();
    let h = hook(&sb, "hostile_hook").with_limits(Limits {
        // Generous: the calls after the trap start fresh stores, which a loaded CI machine slows.
        deadline: Duration::from_secs(1),
        memory: 32 << 20,
        ..Limits::hook()
    });
    assert_eq!(count(&sb, &h, "eve", dir.path()), 1);
    let err = send(&sb, &h, "eve", "loop", dir.path()).unwrap_err();
    assert!(matches!(err, SandboxError::Deadline { .. }), "{err:?}");
    assert_eq!(
        count(&sb, &h, "eve", dir.path()),
        1,
        "fresh after a deadline"
    );
    assert_eq!(count(&sb, &h, "eve", dir.path()), 2);
    let err = send(&sb, &h, "eve", "alloc", dir.path()).unwrap_err();
    assert!(matches!(err, SandboxError::MemoryCap { .. }), "{err:?}");
    assert_eq!(count(&sb, &h, "eve", dir.path()), 1, "fresh after the cap");
    // An oversized answer is refused and its store dropped too.
    let err = send(&sb, &h, "eve", "giant", dir.path()).unwrap_err();
    assert!(
        matches!(
            err,
            SandboxError::Oversized { .. } | SandboxError::MemoryCap { .. }
        ),
        "{err:?}"
    );
    assert_eq!(count(&sb, &h, "eve", dir.path()), 1);
}

#[test]
fn a_store_leaking_file_handles_is_retired() {
    let sb = sandbox(128);
    let dir = tempfile::tempdir().unwrap();
    let h = hook(&sb, "hostile_hook");
    assert_eq!(count(&sb, &h, "eve", dir.path()), 1);
    for _ in 0..6 {
        send(&sb, &h, "eve", "leak", dir.path()).expect("leak");
    }
    assert_eq!(
        count(&sb, &h, "eve", dir.path()),
        1,
        "retired after leaking more than a few handles"
    );
}

#[test]
fn a_workspace_replaced_at_the_same_path_gets_a_fresh_preopen() {
    let sb = sandbox(128);
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("workspace");
    std::fs::create_dir(&ws).unwrap();
    let audit = hook(&sb, "hook_audit");
    send(&sb, &audit, "eve", "first", &ws).unwrap();
    send(&sb, &audit, "eve", "second", &ws).unwrap();
    std::fs::remove_dir_all(&ws).unwrap();
    std::fs::create_dir(&ws).unwrap();
    send(&sb, &audit, "eve", "third", &ws).unwrap();
    let log = std::fs::read_to_string(ws.join("audit.log")).unwrap();
    assert_eq!(log.lines().count(), 1, "{log}");
    assert!(log.ends_with("\tthird\n"), "{log}");
}

#[test]
fn without_reuse_every_call_starts_fresh() {
    let sb = sandbox(128);
    let dir = tempfile::tempdir().unwrap();
    let h = hook(&sb, "hostile_hook").with_reuse(false);
    assert_eq!(count(&sb, &h, "eve", dir.path()), 1);
    assert_eq!(count(&sb, &h, "eve", dir.path()), 1);
}

/// Fresh stores lend a WASI context prepared by an earlier call (`sandbox::prepared`): the
/// instance is new every call, and the preopen is never another workspace's.
#[test]
fn fresh_stores_share_no_instance_and_no_other_workspace() {
    let sb = sandbox(128);
    let dir = tempfile::tempdir().unwrap();
    let h = hook(&sb, "hostile_hook").with_reuse(false);
    for _ in 0..6 {
        send(&sb, &h, "eve", "leak", dir.path()).expect("leak");
        assert_eq!(count(&sb, &h, "eve", dir.path()), 1, "a fresh instance");
    }
    let audit = hook(&sb, "hook_audit").with_reuse(false);
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    for ws in [&a, &b] {
        std::fs::create_dir(ws).unwrap();
    }
    for (ws, text) in [(&a, "one"), (&b, "two"), (&a, "three")] {
        send(&sb, &audit, "eve", text, ws).unwrap();
    }
    let lines = |ws: &Path| {
        std::fs::read_to_string(ws.join("audit.log"))
            .unwrap()
            .lines()
            .map(|l| l.rsplit('\t').next().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(lines(&a), ["one", "three"]);
    assert_eq!(lines(&b), ["two"]);
    // Replaced at the same path: the new directory, not the old one's open handle.
    std::fs::remove_dir_all(&a).unwrap();
    std::fs::create_dir(&a).unwrap();
    send(&sb, &audit, "eve", "four", &a).unwrap();
    assert_eq!(lines(&a), ["four"]);
}

#[test]
fn parked_stores_are_bounded_by_the_pool() {
    // A pool of 8 instances parks at most 2 stores: the most recent ones.
    let sb = sandbox(8);
    let dir = tempfile::tempdir().unwrap();
    let h = hook(&sb, "hostile_hook");
    for i in 0..10 {
        assert_eq!(count(&sb, &h, &format!("p{i}"), dir.path()), 1);
    }
    assert_eq!(count(&sb, &h, "p9", dir.path()), 2, "the latest is kept");
    assert_eq!(
        count(&sb, &h, "p0", dir.path()),
        1,
        "the oldest was dropped"
    );
    // Calls still instantiate fine: the parked stores never starve the pool.
    let other = hook(&sb, "hook_audit");
    for i in 0..20 {
        send(&sb, &other, &format!("q{i}"), "hello", dir.path()).unwrap();
    }
}

#[test]
fn the_trigger_keeps_its_store_and_answers_the_same() {
    let sb = sandbox(128);
    let t = apiary::builtin::trigger_matcher(&sb).unwrap();
    let persona = Persona {
        name: "eve".into(),
        mentions: true,
        keywords: vec!["deploy".into()],
        all_messages: false,
        subscribe: vec!["#ops".into()],
    };
    let message = |text: &str| Message {
        id: "1".into(),
        channel: "ops".into(),
        author: "a".into(),
        text: text.into(),
        mentions: vec![],
    };
    for i in 0..200 {
        let text = if i % 2 == 0 { "DEPLOY now" } else { "lunch?" };
        let d = t.decide(&sb, &persona, &message(text)).unwrap().value;
        assert_eq!(d.wake, i % 2 == 0);
        if d.wake {
            assert_eq!(d.reason, Reason::Keyword("deploy".into()));
        }
        let batch = t
            .decide_batch(&sb, std::slice::from_ref(&persona), &[message(text)])
            .unwrap()
            .value;
        assert_eq!(batch.len(), usize::from(i % 2 == 0));
    }
}
