//! The sandboxed built-in matcher (`trigger-default`, one call per pair and the batch form) and the
//! native matcher of `apiary up --native-triggers` wake the same personas for the same reasons,
//! the cases where they used to differ included: a persona with both keywords and `all_messages`
//! (the native matcher named the keyword), and `@name` followed by a non-ASCII letter (the native
//! matcher saw no mention).

use apiary::dispatch::{NativeTriggers, Reason, TriggerMatcher, TriggerPersona};
use apiary::relay::Message;
use apiary::resolve::Triggers;
use apiary::sandbox::trigger::{self as wit, TriggerRunner};
use apiary::sandbox::{Sandbox, SandboxConfig};
use nostr_sdk::prelude::*;

/// Without a compile cache: the operator's cache dir stays untouched.
fn sandbox() -> Sandbox {
    Sandbox::new(SandboxConfig {
        cache_dir: None,
        ..SandboxConfig::default()
    })
    .unwrap()
}

fn persona(name: &str, mentions: bool, keywords: &[&str], all_messages: bool) -> TriggerPersona {
    TriggerPersona {
        name: name.into(),
        display_name: name.to_uppercase(),
        qualified: String::new(),
        pubkey: Keys::generate().public_key(),
        triggers: Triggers {
            mentions,
            keywords: keywords.iter().map(|k| k.to_string()).collect(),
            all_messages,
        },
    }
}

fn message(text: &str, tagged: &[&TriggerPersona]) -> Message {
    let tags = tagged.iter().map(|p| Tag::public_key(p.pubkey)).collect();
    let ev = apiary::relay::message(&Keys::generate(), "general", text, tags).unwrap();
    Message::parse(&ev).unwrap()
}

/// The component's view of a persona and a message, as the dispatcher gives them to it: routing
/// matched the channel already, and a `p` tag becomes the name of the persona it tags.
fn wit_persona(p: &TriggerPersona, m: &Message) -> wit::Persona {
    wit::Persona {
        name: p.name.clone(),
        mentions: p.triggers.mentions,
        keywords: p.triggers.keywords.clone(),
        all_messages: p.triggers.all_messages,
        subscribe: vec![m.channel.clone()],
    }
}

fn wit_message(m: &Message, personas: &[&TriggerPersona]) -> wit::Message {
    wit::Message {
        id: m.id.to_hex(),
        channel: m.channel.clone(),
        author: m.author.to_hex(),
        text: m.content.clone(),
        mentions: personas
            .iter()
            .filter(|p| m.mentions.contains(&p.pubkey))
            .map(|p| p.name.clone())
            .collect(),
    }
}

fn from_wit(r: wit::Reason) -> Option<Reason> {
    match r {
        wit::Reason::Mentioned => Some(Reason::Mention),
        wit::Reason::Keyword(k) => Some(Reason::Keyword(k)),
        wit::Reason::AllMessages => Some(Reason::AllMessages),
        wit::Reason::NotSubscribed | wit::Reason::NoMatch => None,
    }
}

/// The component's decisions for every persona: one call each, and one batch call.
fn sandboxed(
    sb: &Sandbox,
    t: &TriggerRunner,
    m: &Message,
    personas: &[&TriggerPersona],
) -> (Vec<Option<Reason>>, Vec<Option<Reason>>) {
    let single = personas
        .iter()
        .map(|p| {
            let d = t
                .decide(sb, &wit_persona(p, m), &wit_message(m, &[p]))
                .unwrap()
                .value;
            assert_eq!(d.wake, wit::wakes(&d.reason));
            from_wit(d.reason)
        })
        .collect();
    let wpersonas: Vec<wit::Persona> = personas.iter().map(|p| wit_persona(p, m)).collect();
    let mut batch = vec![None; personas.len()];
    for w in t
        .decide_batch(sb, &wpersonas, &[wit_message(m, personas)])
        .unwrap()
        .value
    {
        assert_eq!(w.message, 0);
        batch[w.persona as usize] = from_wit(w.reason.named(&wpersonas[w.persona as usize]));
    }
    (single, batch)
}

fn assert_same(
    sb: &Sandbox,
    t: &TriggerRunner,
    m: &Message,
    personas: &[&TriggerPersona],
) -> Vec<Option<Reason>> {
    let native_each: Vec<Option<Reason>> = personas
        .iter()
        .map(|p| NativeTriggers.decide(m, p))
        .collect();
    let native_all = NativeTriggers.decide_all(m, personas).unwrap();
    let (single, batch) = sandboxed(sb, t, m, personas);
    assert_eq!(native_each, single, "one call each: {:?}", m.content);
    assert_eq!(native_all, batch, "batch: {:?}", m.content);
    native_all
}

#[test]
fn the_cases_that_used_to_differ_decide_alike() {
    let sb = sandbox();
    let t = apiary::builtin::trigger_matcher(&sb).unwrap();
    let both = persona("pip", true, &["deploy"], true);
    let keywords = persona("kee", false, &["", "deploy"], false);
    let personas = [&both, &keywords];
    let deploy = Some(Reason::Keyword("deploy".into()));
    for (text, expected) in [
        // all_messages names the wake, not the keyword.
        (
            "time to deploy",
            [Some(Reason::AllMessages), deploy.clone()],
        ),
        // `é` ends the name: a mention of pip.
        ("@pipé deploy", [Some(Reason::Mention), deploy.clone()]),
        ("@PIP", [Some(Reason::Mention), None]),
        ("@pipe", [Some(Reason::AllMessages), None]),
        ("hello", [Some(Reason::AllMessages), None]),
    ] {
        let m = message(text, &[]);
        assert_eq!(assert_same(&sb, &t, &m, &personas), expected, "{text}");
    }
    // A `p` tag mentions only the persona it tags; kee's mentions are off.
    let m = message("DEPLOY", &[&keywords, &both]);
    assert_eq!(
        assert_same(&sb, &t, &m, &personas),
        [Some(Reason::Mention), deploy]
    );
}

/// Deterministic xorshift, so a failure reproduces.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[(self.next() % items.len() as u64) as usize]
    }
}

/// Random personas and messages: mentions by name, by `@name` (with what may follow a name) and
/// by `p` tag, keywords in either case and in non-ASCII text, empty keywords.
#[test]
fn random_messages_decide_alike() {
    let sb = sandbox();
    let t = apiary::builtin::trigger_matcher(&sb).unwrap();
    let names = ["ann", "bob", "Cy", "dee-2"];
    let keywords = ["deploy", "", "x", "ß", "CVE", "straße", "ops"];
    let words = [
        "deploy", "DEPLOY", "@ann", "@Bob", "@cy!", "@dee-2", "@dee", "@annä", "x", "STRASSE",
        "straße", "cve-1", "hello", "@", "ops", "é",
    ];
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut wakes = [0usize; 3];
    for _ in 0..60 {
        let personas: Vec<TriggerPersona> = names
            .iter()
            .map(|name| {
                let k: Vec<&str> = (0..rng.next() % 4).map(|_| rng.pick(&keywords)).collect();
                persona(
                    name,
                    !rng.next().is_multiple_of(3),
                    &k,
                    rng.next().is_multiple_of(4),
                )
            })
            .collect();
        let refs: Vec<&TriggerPersona> = personas.iter().collect();
        for _ in 0..5 {
            let text: Vec<&str> = (0..rng.next() % 5).map(|_| rng.pick(&words)).collect();
            let tagged: Vec<&TriggerPersona> = refs
                .iter()
                .copied()
                .filter(|_| rng.next().is_multiple_of(6))
                .collect();
            let m = message(&text.join(" "), &tagged);
            for r in assert_same(&sb, &t, &m, &refs).into_iter().flatten() {
                wakes[match r {
                    Reason::Mention => 0,
                    Reason::Keyword(_) => 1,
                    Reason::AllMessages => 2,
                }] += 1;
            }
        }
    }
    // Every kind of wake came up.
    assert!(wakes.iter().all(|&n| n > 0), "{wakes:?}");
}

/// The harness's components without the operator's compile cache.
struct Uncached;

impl apiary::dispatch::sandboxed::SandboxSource for Uncached {
    fn sandbox(&self) -> Result<&'static Sandbox, apiary::sandbox::SandboxError> {
        static SANDBOX: std::sync::OnceLock<Sandbox> = std::sync::OnceLock::new();
        Ok(SANDBOX.get_or_init(sandbox))
    }

    fn trigger_matcher(
        &self,
        sb: &Sandbox,
    ) -> Result<TriggerRunner, apiary::sandbox::SandboxError> {
        apiary::builtin::trigger_matcher(sb)
    }
}

/// The harness's sandboxed matcher (what `apiary up` routes with): its one-instance-per-event path
/// decides exactly as one call per persona and as the native matcher, mentions by key included.
#[test]
fn the_harness_matcher_decides_a_batch_as_one_call_each() {
    let matcher = apiary::dispatch::sandboxed::SandboxTriggers::new(&Uncached).unwrap();
    let personas: Vec<TriggerPersona> = (0..4)
        .map(|i| persona(&format!("p{i}"), true, &[&format!("topic{i}")], i == 3))
        .collect();
    let refs: Vec<&TriggerPersona> = personas.iter().collect();
    for (text, tagged) in [
        ("hello @p0", vec![]),
        ("news about topic2", vec![]),
        ("plain chatter", vec![]),
        // p3 has a keyword and all_messages; `é` ends a name.
        ("topic3 for @p0é", vec![]),
        ("for you", vec![refs[1]]),
    ] {
        let m = message(text, &tagged);
        let batch = matcher.decide_all(&m, &refs).unwrap();
        let single: Vec<Option<Reason>> = refs.iter().map(|p| matcher.decide(&m, p)).collect();
        assert_eq!(batch, single, "{text}");
        assert_eq!(
            batch,
            NativeTriggers.decide_all(&m, &refs).unwrap(),
            "{text}"
        );
        assert!(batch.iter().any(Option::is_some), "{text}: someone wakes");
    }
}
