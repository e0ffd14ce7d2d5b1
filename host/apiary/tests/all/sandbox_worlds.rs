//! The three worlds through the sandbox library: the built-in trigger's spec semantics (single and
//! batch form agree), the audit hook's start/stop, and the converter contract with its preopens.

use std::path::Path;

use apiary::builtin::BUILT_GUESTS_DIR;
use apiary::sandbox::converter::{ConverterRunner, Request};
use apiary::sandbox::hook::{HookPoint, HookRunner};
use apiary::sandbox::trigger::{Message, Persona, Reason};
use apiary::sandbox::{Sandbox, SandboxConfig, SandboxError, World};

fn guest(name: &str) -> Vec<u8> {
    std::fs::read(Path::new(BUILT_GUESTS_DIR).join(format!("{name}.wasm"))).unwrap()
}

/// One sandbox for these tests, without a compile cache (the operator's cache dir stays
/// untouched; the e2e tests cover the cache).
fn sb() -> &'static Sandbox {
    static SB: std::sync::OnceLock<Sandbox> = std::sync::OnceLock::new();
    SB.get_or_init(|| {
        Sandbox::new(SandboxConfig {
            cache_dir: None,
            ..SandboxConfig::default()
        })
        .unwrap()
    })
}

fn persona(
    name: &str,
    mentions: bool,
    keywords: &[&str],
    all: bool,
    subscribe: &[&str],
) -> Persona {
    Persona {
        name: name.into(),
        mentions,
        keywords: keywords.iter().map(|s| s.to_string()).collect(),
        all_messages: all,
        subscribe: subscribe.iter().map(|s| s.to_string()).collect(),
    }
}

fn message(channel: &str, text: &str, mentions: &[&str]) -> Message {
    Message {
        id: "id".into(),
        channel: channel.into(),
        author: "someone".into(),
        text: text.into(),
        mentions: mentions.iter().map(|s| s.to_string()).collect(),
    }
}

#[test]
fn builtin_trigger_follows_the_spec() {
    let t = apiary::builtin::trigger_matcher(sb()).unwrap();
    let decide = |p: &Persona, m: &Message| t.decide(sb(), p, m).unwrap().value;
    // Built-in defaults (mentions on, no keywords, all_messages off): only a mention wakes.
    let pip = persona("pip", true, &[], false, &["#general"]);
    let d = decide(&pip, &message("general", "hello team", &[]));
    assert!(!d.wake);
    assert_eq!(d.reason, Reason::NoMatch);
    assert_eq!(
        decide(&pip, &message("general", "hi @Pip!", &[])).reason,
        Reason::Mentioned
    );
    assert_eq!(
        decide(&pip, &message("elsewhere", "x", &["PIP"])).reason,
        Reason::Mentioned
    );
    // `@pipe` and `pip@example.com` are not mentions of pip.
    assert_eq!(
        decide(&pip, &message("general", "@pipe and pip@example.com", &[])).reason,
        Reason::NoMatch
    );
    // mentions off: a mention alone does nothing.
    let quiet = persona("quiet", false, &[], false, &["general"]);
    assert_eq!(
        decide(&quiet, &message("general", "@quiet", &["quiet"])).reason,
        Reason::NoMatch
    );
    // Keywords: case-insensitive substring, in subscribed channels only, first configured wins;
    // an empty keyword never matches.
    let lep = persona(
        "lep",
        true,
        &["", "Vulnerability", "cve"],
        false,
        &["security"],
    );
    let d = decide(
        &lep,
        &message("#security", "a new CVE and a VULNERABILITY", &[]),
    );
    assert!(d.wake);
    assert_eq!(d.reason, Reason::Keyword("Vulnerability".into()));
    assert_eq!(
        decide(&lep, &message("general", "CVE", &[])).reason,
        Reason::NotSubscribed
    );
    assert_eq!(
        decide(&lep, &message("security", "nothing here", &[])).reason,
        Reason::NoMatch
    );
    // Unicode case folding.
    let uni = persona("uni", true, &["ÉCOLE"], false, &["fr"]);
    assert!(decide(&uni, &message("fr", "à l'école", &[])).wake);
    // all_messages: every message of a subscribed channel, none elsewhere.
    let berry = persona("berry", false, &[], true, &["random"]);
    assert_eq!(
        decide(&berry, &message("#random", "anything", &[])).reason,
        Reason::AllMessages
    );
    assert_eq!(
        decide(&berry, &message("general", "anything", &[])).reason,
        Reason::NotSubscribed
    );
    // Nothing subscribed (`subscribe: []`): only mentions can wake.
    let none = persona("none", true, &["x"], true, &[]);
    assert_eq!(
        decide(&none, &message("general", "x", &[])).reason,
        Reason::NotSubscribed
    );
}

#[test]
fn batch_form_agrees_with_single_decisions() {
    let t = apiary::builtin::trigger_matcher(sb()).unwrap();
    let personas = vec![
        persona("pip", true, &[], false, &["general"]),
        // The batch answer names a keyword by index: the empty one shifts the indexes.
        persona("lep", true, &["", "deploy", "CVE"], false, &["security"]),
        persona("berry", false, &[], true, &["random", "general"]),
    ];
    let messages = vec![
        message("general", "hello", &[]),
        message("security", "cve-2026-1", &[]),
        message("random", "@lep look", &[]),
        message("ops", "nothing", &["pip"]),
        message("security", "deploy the CVE fix", &[]),
    ];
    let batch = t.decide_batch(sb(), &personas, &messages).unwrap().value;
    let mut expected = Vec::new();
    for (mi, m) in messages.iter().enumerate() {
        for (pi, p) in personas.iter().enumerate() {
            let d = t.decide(sb(), p, m).unwrap().value;
            if d.wake {
                expected.push((mi as u32, pi as u32, d.reason));
            }
        }
    }
    let got: Vec<_> = batch
        .into_iter()
        .map(|w| {
            (
                w.message,
                w.persona,
                w.reason.named(&personas[w.persona as usize]),
            )
        })
        .collect();
    assert_eq!(got, expected);
    assert_eq!(got.len(), 6, "{got:?}");
    assert_eq!(got[1].2, Reason::Keyword("CVE".into()));
    assert_eq!(got[5].2, Reason::Keyword("deploy".into()));
}

#[test]
fn audit_hook_start_and_stop_succeed_without_writing() {
    let dir = tempfile::tempdir().unwrap();
    let hook = HookRunner::new(sb().load("hook_audit", &guest("hook_audit")).unwrap()).unwrap();
    for point in [HookPoint::OnStart, HookPoint::OnStop] {
        hook.run(sb(), point, "pack", "pip", None, dir.path())
            .unwrap();
    }
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn converter_reads_input_read_only_and_writes_output() {
    let loaded = sb()
        .load("converter_sample", &guest("converter_sample"))
        .unwrap();
    assert_eq!(loaded.identity.world, World::Converter);
    assert!(matches!(
        HookRunner::new(loaded.clone()).err().unwrap(),
        SandboxError::WrongWorld {
            expected: World::Hook,
            found: World::Converter,
            ..
        }
    ));
    let c = ConverterRunner::new(loaded).unwrap();
    let info = c.info(sb()).unwrap().value;
    assert_eq!(info.name, "converter-sample");
    assert_eq!(info.conversions[0].target, "text-upper");

    let input = tempfile::tempdir().unwrap();
    let output = tempfile::tempdir().unwrap();
    std::fs::write(input.path().join("a.txt"), "hello").unwrap();
    std::fs::write(input.path().join("b.md"), "skip").unwrap();
    let found = c.detect(sb(), input.path()).unwrap().value;
    assert_eq!(found[0].format, "text");
    assert_eq!(found[0].confidence, 1.0);
    let request = Request {
        source: "text".into(),
        target: "text-upper".into(),
        options: vec![],
    };
    let report = c
        .convert(sb(), &request, input.path(), output.path())
        .unwrap()
        .value;
    assert_eq!(
        std::fs::read_to_string(output.path().join("a.txt")).unwrap(),
        "HELLO"
    );
    assert!(!output.path().join("b.md").exists());
    assert_eq!(report.normalised.len(), 1);
    assert_eq!(report.normalised[0].code, "case-folded");
    assert!(
        report.lost.is_empty() && report.synthesised.is_empty() && report.reinterpreted.is_empty()
    );
    // The converter's own error comes back as a converter failure with its message.
    let bad = Request {
        source: "text".into(),
        target: "pdf".into(),
        options: vec![],
    };
    let err = c
        .convert(sb(), &bad, input.path(), output.path())
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("unsupported conversion text -> pdf"),
        "{err}"
    );
}

/// A trigger built against the deprecated `0.1` keeps working beside the `0.2` built-in: the same
/// wakes, reasons and keywords, in one decision and in a batch.
#[test]
fn a_0_1_trigger_decides_as_the_0_2_built_in() {
    use apiary::sandbox::Release;
    use apiary::sandbox::trigger::TriggerRunner;
    let old =
        TriggerRunner::new(sb().load("trigger_v0_1", &guest("trigger_v0_1")).unwrap()).unwrap();
    let new = apiary::builtin::trigger_matcher(sb()).unwrap();
    assert_eq!(old.loaded().identity.release(), Release::V0_1);
    assert_eq!(new.loaded().identity.release(), Release::V0_2);
    let personas = vec![
        persona("pip", true, &[], false, &["general"]),
        persona("lep", true, &["", "deploy", "CVE"], false, &["security"]),
        persona("berry", false, &[], true, &["random", "general"]),
    ];
    let messages = vec![
        message("general", "hello", &[]),
        message("security", "cve-2026-1", &[]),
        message("random", "@lep look", &[]),
        message("ops", "nothing", &["pip"]),
        message("security", "deploy the CVE fix", &[]),
    ];
    let answer = |t: &TriggerRunner| {
        let batch = t.decide_batch(sb(), &personas, &messages).unwrap().value;
        let single: Vec<_> = messages
            .iter()
            .flat_map(|m| personas.iter().map(|p| t.decide(sb(), p, m).unwrap().value))
            .map(|d| (d.wake, d.reason))
            .collect();
        (batch, single)
    };
    let (old_batch, old_single) = answer(&old);
    let (new_batch, new_single) = answer(&new);
    assert_eq!(old_batch.len(), 6, "{old_batch:?}");
    assert_eq!(old_batch, new_batch);
    assert_eq!(old_single, new_single);
}
