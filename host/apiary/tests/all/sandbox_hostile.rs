//! The hostile-guest suite, against the sandbox library: every misbehaving guest is contained,
//! the host stays alive, the error says what happened, and other components keep working.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use apiary::builtin::BUILT_GUESTS_DIR;
use apiary::sandbox::hook::{HookMessage, HookPoint, HookRunner};
use apiary::sandbox::trigger::{Message, Persona, Reason, TriggerRunner};
use apiary::sandbox::{BreakerPolicy, Loaded, Sandbox, SandboxConfig, SandboxError, World};

fn guest(name: &str) -> Vec<u8> {
    let path = Path::new(BUILT_GUESTS_DIR).join(format!("{name}.wasm"));
    std::fs::read(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (built by host/build.rs)", path.display()))
}

/// One sandbox for the suite, with the circuit breaker out of the way (it has its own test):
/// the hostile guest fails on purpose in every test.
fn sandbox() -> &'static Sandbox {
    static SB: std::sync::OnceLock<Sandbox> = std::sync::OnceLock::new();
    SB.get_or_init(|| {
        Sandbox::new(SandboxConfig {
            breaker: BreakerPolicy {
                threshold: u32::MAX,
                ..BreakerPolicy::default()
            },
            // Leave the operator's compile cache alone (the e2e tests cover the cache).
            cache_dir: None,
            ..SandboxConfig::default()
        })
        .expect("sandbox")
    })
}

fn load(sb: &Sandbox, name: &str) -> Arc<Loaded> {
    sb.load(name, &guest(name))
        .unwrap_or_else(|e| panic!("load {name}: {e}"))
}

struct Scratch {
    _dir: tempfile::TempDir,
    workspace: PathBuf,
    outside: PathBuf,
}

/// A workspace with a secret file beside it and symlinks pointing out of it.
fn scratch() -> Scratch {
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().join("workspace");
    std::fs::create_dir(&workspace).unwrap();
    let outside = dir.path().join("secret.txt");
    std::fs::write(&outside, "TOP SECRET").unwrap();
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(&outside, workspace.join("link-to-secret")).unwrap();
        std::os::unix::fs::symlink("/etc", workspace.join("link-to-etc")).unwrap();
        std::os::unix::fs::symlink(dir.path(), workspace.join("link-to-dir")).unwrap();
    }
    Scratch {
        _dir: dir,
        workspace,
        outside,
    }
}

fn run_hostile(text: &str, s: &Scratch) -> Result<(), SandboxError> {
    let sb = sandbox();
    let hook = HookRunner::new(load(sb, "hostile_hook")).unwrap();
    let msg = HookMessage {
        id: "m1".into(),
        channel: "general".into(),
        author: "mallory".into(),
        author_name: None,
        text: text.into(),
        ..Default::default()
    };
    hook.run(
        sb,
        HookPoint::OnMessage,
        "pack",
        "eve",
        Some(&msg),
        &s.workspace,
    )
    .map(|_| ())
}

/// After every hostile call: an unrelated hook and the default trigger still work.
fn others_still_work(s: &Scratch) {
    let sb = sandbox();
    let audit = HookRunner::new(load(sb, "hook_audit")).unwrap();
    let msg = HookMessage {
        id: "after".into(),
        channel: "general".into(),
        author: "alice".into(),
        author_name: None,
        text: "still here".into(),
        ..Default::default()
    };
    audit
        .run(
            sb,
            HookPoint::OnMessage,
            "pack",
            "eve",
            Some(&msg),
            &s.workspace,
        )
        .expect("hook-audit after a hostile call");
    let log = std::fs::read_to_string(s.workspace.join("audit.log")).unwrap();
    assert!(
        log.contains("after\tgeneral\t-\talice\tstill here"),
        "{log}"
    );
    let trigger = apiary::builtin::trigger_matcher(sb).unwrap();
    let d = trigger
        .decide(
            sb,
            &persona("eve", &["deploy"]),
            &message("general", "please DEPLOY now"),
        )
        .expect("trigger after a hostile call")
        .value;
    assert!(d.wake);
    assert_eq!(d.reason, Reason::Keyword("deploy".into()));
}

fn persona(name: &str, keywords: &[&str]) -> Persona {
    Persona {
        name: name.into(),
        mentions: true,
        keywords: keywords.iter().map(|k| k.to_string()).collect(),
        all_messages: false,
        subscribe: vec!["#general".into()],
    }
}

fn message(channel: &str, text: &str) -> Message {
    Message {
        id: "1".into(),
        channel: channel.into(),
        author: "bob".into(),
        text: text.into(),
        mentions: vec![],
    }
}

#[test]
fn infinite_loop_hits_the_deadline() {
    let s = scratch();
    let err = run_hostile("loop", &s).unwrap_err();
    assert!(matches!(err, SandboxError::Deadline { .. }), "{err:?}");
    assert!(
        err.to_string().contains("exceeded its deadline of 5000 ms"),
        "{err}"
    );
    others_still_work(&s);
}

#[test]
fn memory_bomb_hits_the_memory_cap() {
    let s = scratch();
    let err = run_hostile("alloc", &s).unwrap_err();
    assert!(matches!(err, SandboxError::MemoryCap { .. }), "{err:?}");
    assert!(err.to_string().contains("memory cap of 64 MiB"), "{err}");
    others_still_work(&s);
}

#[test]
fn deep_recursion_overflows_the_stack_cleanly() {
    let s = scratch();
    let err = run_hostile("recurse", &s).unwrap_err();
    assert!(matches!(err, SandboxError::StackOverflow { .. }), "{err:?}");
    others_still_work(&s);
}

#[test]
fn panic_is_a_trap_with_the_panic_message() {
    let s = scratch();
    let err = run_hostile("panic", &s).unwrap_err();
    assert!(matches!(err, SandboxError::Trap { .. }), "{err:?}");
    assert!(
        err.to_string().contains("hostile hook panicked on purpose"),
        "{err}"
    );
    others_still_work(&s);
}

#[test]
fn stdout_flood_is_truncated_and_the_guest_finishes() {
    let s = scratch();
    let sb = sandbox();
    let hook = HookRunner::new(load(sb, "hostile_hook")).unwrap();
    let msg = HookMessage {
        author_name: None,
        text: "flood".into(),
        ..Default::default()
    };
    let out = hook
        .run(
            sb,
            HookPoint::OnMessage,
            "pack",
            "eve",
            Some(&msg),
            &s.workspace,
        )
        .expect("a flood is not a failure: the output is truncated");
    assert_eq!(out.stdout.text.len(), 64 << 10);
    assert!(out.stdout.dropped > 1_000_000, "{}", out.stdout.dropped);
    assert!(out.stderr.dropped > 1_000_000, "{}", out.stderr.dropped);
    others_still_work(&s);
}

#[test]
fn dotdot_absolute_and_symlink_escapes_are_refused() {
    let s = scratch();
    for probe in [
        "escape-dotdot",
        "escape-absolute",
        "escape-symlink",
        "escape-write",
    ] {
        let err = run_hostile(probe, &s).unwrap_err();
        let SandboxError::Guest { message, .. } = &err else {
            panic!("{probe}: {err:?}");
        };
        assert!(message.starts_with("blocked: "), "{probe}: {message}");
        assert!(!message.contains("TOP SECRET"), "{probe}: {message}");
    }
    assert_eq!(std::fs::read_to_string(&s.outside).unwrap(), "TOP SECRET");
    assert!(!s.workspace.parent().unwrap().join("pwned.txt").exists());
    others_still_work(&s);
}

#[test]
fn environment_and_arguments_are_empty() {
    // SAFETY: set before any thread of this test reads the environment; the variable only
    // needs to exist in the host process for the guest to (not) see it.
    unsafe { std::env::set_var("APIARY_TEST_SECRET", "hunter2") };
    let s = scratch();
    let err = run_hostile("env", &s).unwrap_err();
    assert!(
        err.to_string()
            .contains("blocked: no environment variables, no arguments"),
        "{err}"
    );
}

#[test]
fn giant_return_value_is_refused_by_size() {
    let s = scratch();
    let err = run_hostile("giant", &s).unwrap_err();
    assert!(matches!(err, SandboxError::Oversized { .. }), "{err:?}");
    assert!(
        err.to_string()
            .contains("33554432 bytes, over the 65536-byte cap"),
        "{err}"
    );
    others_still_work(&s);
}

#[test]
fn hostile_trigger_answers_are_refused() {
    let sb = sandbox();
    let t = TriggerRunner::new(load(sb, "hostile_trigger")).unwrap();
    let personas = [persona("eve", &[])];
    let err = t
        .decide_batch(sb, &personas, &[message("general", "hi")])
        .unwrap_err();
    assert!(matches!(err, SandboxError::Invalid { .. }), "{err:?}");
    assert!(err.to_string().contains("out of range"), "{err}");
    let err = t
        .decide_batch(sb, &personas, &[message("general", "keyword")])
        .unwrap_err();
    assert!(matches!(err, SandboxError::Invalid { .. }), "{err:?}");
    assert!(
        err.to_string()
            .contains("keyword 4294967295 of persona 0 is out of range"),
        "{err}"
    );
    let err = t
        .decide_batch(sb, &personas, &[message("general", "giant")])
        .unwrap_err();
    assert!(matches!(err, SandboxError::Oversized { .. }), "{err:?}");
    // One decision is a batch of one: the same refusal.
    let err = t
        .decide(sb, &personas[0], &message("general", "hi"))
        .unwrap_err();
    assert!(err.to_string().contains("out of range"), "{err}");
}

/// A matcher that loops, traps or grows without end is stopped each time; the next call gets a
/// fresh instance (its persona set made again) and is answered.
#[test]
fn a_hostile_trigger_is_stopped_and_the_next_call_starts_fresh() {
    let sb = sandbox();
    let t = TriggerRunner::new(load(sb, "hostile_trigger")).unwrap();
    let personas = [persona("eve", &[])];
    let decide = |text: &str| t.decide_batch(sb, &personas, &[message("general", text)]);
    let err = decide("loop").unwrap_err();
    assert!(matches!(err, SandboxError::Deadline { .. }), "{err:?}");
    let err = decide("trap").unwrap_err();
    assert!(err.to_string().contains("was told to trap"), "{err}");
    let err = decide("grow").unwrap_err();
    assert!(matches!(err, SandboxError::MemoryCap { .. }), "{err:?}");
    let err = decide("hi").unwrap_err();
    assert!(err.to_string().contains("out of range"), "{err}");
}

#[test]
fn component_for_another_wit_version_is_refused_naming_the_range() {
    let err = sandbox()
        .load("future_hook", &guest("future_hook"))
        .unwrap_err();
    assert!(
        matches!(err, SandboxError::UnsupportedVersion { .. }),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(text.contains("apiary:plugin@0.3.0"), "{text}");
    assert!(
        text.contains("apiary:plugin@0.2.x (>=0.2.0, <0.3.0)"),
        "{text}"
    );
}

#[test]
fn wrong_world_core_module_and_precompiled_code_are_refused() {
    let sb = sandbox();
    let err = HookRunner::new(load(sb, "trigger_default")).err().unwrap();
    assert!(
        matches!(
            err,
            SandboxError::WrongWorld {
                found: World::Trigger,
                expected: World::Hook,
                ..
            }
        ),
        "{err:?}"
    );
    let core_module = [0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00];
    let err = sb.load("core.wasm", &core_module).unwrap_err();
    assert!(
        err.to_string()
            .contains("core WebAssembly module, not a component"),
        "{err}"
    );
    let precompiled = sb
        .engine()
        .precompile_component(&guest("hook_audit"))
        .unwrap();
    let err = sb.load("evil.cwasm", &precompiled).unwrap_err();
    assert!(matches!(err, SandboxError::Precompiled { .. }), "{err:?}");
}

#[test]
fn circuit_breaker_opens_for_the_failing_component_only() {
    let sb = Sandbox::new(SandboxConfig {
        cache_dir: None,
        breaker: BreakerPolicy {
            threshold: 3,
            window: None,
            cooldown: Some(std::time::Duration::from_secs(3600)),
        },
        pool_instances: 8,
        ..SandboxConfig::default()
    })
    .unwrap();
    let s = scratch();
    let hostile =
        HookRunner::new(sb.load("hostile_hook", &guest("hostile_hook")).unwrap()).unwrap();
    let audit = HookRunner::new(sb.load("hook_audit", &guest("hook_audit")).unwrap()).unwrap();
    // A component's own error results are answers, not failures: they never open the breaker.
    let refuse = HookMessage {
        author_name: None,
        text: "escape-absolute".into(),
        ..Default::default()
    };
    for _ in 0..5 {
        let err = hostile
            .run(
                &sb,
                HookPoint::OnMessage,
                "p",
                "eve",
                Some(&refuse),
                &s.workspace,
            )
            .unwrap_err();
        assert!(matches!(err, SandboxError::Guest { .. }), "{err:?}");
    }
    let panic = HookMessage {
        author_name: None,
        text: "panic".into(),
        ..Default::default()
    };
    for _ in 0..3 {
        let err = hostile
            .run(
                &sb,
                HookPoint::OnMessage,
                "p",
                "eve",
                Some(&panic),
                &s.workspace,
            )
            .unwrap_err();
        assert!(matches!(err, SandboxError::Trap { .. }), "{err:?}");
    }
    let fine = HookMessage {
        author_name: None,
        text: "harmless".into(),
        ..Default::default()
    };
    let err = hostile
        .run(
            &sb,
            HookPoint::OnMessage,
            "p",
            "eve",
            Some(&fine),
            &s.workspace,
        )
        .unwrap_err();
    assert!(
        matches!(err, SandboxError::CircuitOpen { failures: 3, .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("circuit breaker"), "{err}");
    audit
        .run(
            &sb,
            HookPoint::OnMessage,
            "p",
            "eve",
            Some(&fine),
            &s.workspace,
        )
        .expect("another component is unaffected");
}

/// Issue 17, finding 12: a component whose core module declares a table far larger than any real
/// component's (2^24 elements, 128 MiB of host memory; `guests/test/hostile-table`) is refused by the
/// table cap without the pooling allocator (the on-demand fallback, where only the store's limiter
/// caps tables) as with it; and what apiary ships still runs on the fallback path.
#[test]
fn an_oversized_table_is_refused_with_or_without_the_pool() {
    let s = scratch();
    let on_demand = Sandbox::new(SandboxConfig {
        cache_dir: None,
        pooling: false,
        breaker: BreakerPolicy {
            threshold: u32::MAX,
            ..BreakerPolicy::default()
        },
        ..SandboxConfig::default()
    })
    .expect("on-demand sandbox");
    // Without the pool, only the store's limiter stands between the component and the table.
    let hook = HookRunner::new(load(&on_demand, "hostile_table")).unwrap();
    let err = hook
        .run(
            &on_demand,
            HookPoint::OnStart,
            "pack",
            "eve",
            None,
            &s.workspace,
        )
        .unwrap_err();
    assert!(
        matches!(err, SandboxError::TableCap { limit: 20_000, attempted, .. } if attempted >= 1 << 24),
        "{err:?}"
    );
    assert!(
        err.to_string().contains("table cap of 20000 elements"),
        "{err}"
    );
    // The pool's table slots have the same size: it refuses the component when loading it.
    let err = sandbox()
        .load("hostile_table", &guest("hostile_table"))
        .unwrap_err();
    assert!(
        err.to_string().contains("exceeds the limit of 20000"),
        "{err}"
    );
    // The shipped hook and trigger run within the per-store limits on the fallback path.
    let audit = HookRunner::new(load(&on_demand, "hook_audit")).unwrap();
    let msg = HookMessage {
        id: "m".into(),
        author_name: None,
        text: "fits".into(),
        ..Default::default()
    };
    audit
        .run(
            &on_demand,
            HookPoint::OnMessage,
            "pack",
            "eve",
            Some(&msg),
            &s.workspace,
        )
        .expect("hook-audit without the pool");
    let trigger = apiary::builtin::trigger_matcher(&on_demand).unwrap();
    let d = trigger
        .decide(
            &on_demand,
            &persona("eve", &[]),
            &message("general", "hi @eve"),
        )
        .expect("trigger-default without the pool")
        .value;
    assert!(d.wake);
    others_still_work(&s);
}
