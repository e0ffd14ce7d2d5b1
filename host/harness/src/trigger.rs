//! Which messages wake which persona (spec §10 `triggers`), behind a small trait so the decision can
//! come from the sandbox's `trigger` component or from the native matcher here.
//!
//! Both decide with the `apiary-triggers` crate (the native matcher calls it directly, the built-in
//! `trigger-default` component is built from it), so they give the same wake and the same reason:
//! a mention first (the persona's public key in a `p` tag, or `@name` in the text), then
//! `all_messages`, then the first matching keyword in configured order.

use std::cell::RefCell;

use nostr_sdk::prelude::PublicKey;

use crate::relay::Message;
use crate::resolve::Triggers;

/// The persona side of a trigger decision.
#[derive(Debug, Clone)]
pub struct TriggerPersona {
    pub name: String,
    pub display_name: String,
    /// `pack-id/name`, its name qualified by its pack's id for mentions (`@pack-id/name`); empty:
    /// the name alone.
    pub qualified: String,
    pub pubkey: PublicKey,
    pub triggers: Triggers,
}

impl TriggerPersona {
    /// The name a matcher is given: `pack-id/name`, which answers to `@name` and, telling two
    /// personas of one name apart, `@pack-id/name` (see `apiary_triggers`); a `p` tag of its key
    /// mentions it by this name, so exactly it.
    pub fn qualified(&self) -> &str {
        if self.qualified.is_empty() {
            &self.name
        } else {
            &self.qualified
        }
    }
}

/// Why a persona woke.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reason {
    Mention,
    Keyword(String),
    AllMessages,
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Reason::Mention => f.write_str("mention"),
            Reason::Keyword(k) => write!(f, "keyword \"{k}\""),
            Reason::AllMessages => f.write_str("all_messages"),
        }
    }
}

/// Why a trigger matcher could not decide (nobody wakes; the harness reports it). [`kind`]
/// is the stable name.
///
/// [`kind`]: TriggerError::kind
#[derive(Debug, thiserror::Error)]
pub enum TriggerError {
    /// The trigger component failed.
    #[error(transparent)]
    Sandbox(#[from] crate::sandbox::SandboxError),
    /// The matcher's own reason (a matcher outside this crate says why in words), or the sandbox
    /// could not be set up.
    #[error("{0}")]
    Failed(String),
}

impl TriggerError {
    /// A stable name for the error, for programs and tests.
    pub fn kind(&self) -> &'static str {
        match self {
            TriggerError::Sandbox(_) => "sandbox",
            TriggerError::Failed(_) => "failed",
        }
    }
}

/// Decides whether `message` (already known to be in a channel the persona subscribes to) wakes it.
pub trait TriggerMatcher: Send + Sync {
    fn decide(&self, message: &Message, persona: &TriggerPersona) -> Option<Reason>;
    /// The decision for each of `personas` (all subscribed to the message's channel), in order;
    /// `Err` when the matcher failed (nobody wakes, and the harness reports why). Matchers with a
    /// per-call cost (a sandbox instance) decide them all at once.
    fn decide_all(
        &self,
        message: &Message,
        personas: &[&TriggerPersona],
    ) -> Result<Vec<Option<Reason>>, TriggerError> {
        Ok(personas.iter().map(|p| self.decide(message, p)).collect())
    }
    /// A name for logs.
    fn name(&self) -> &str;
}

/// The spec's semantics in plain Rust (also the baseline for measuring the component's cost).
#[derive(Debug, Default, Clone, Copy)]
pub struct NativeTriggers;

thread_local! {
    /// One message's prepared form, reused: its buffers (a 4 KiB keyword prefilter among them)
    /// outlive the message.
    static PREPARED: RefCell<apiary_triggers::Prepared> = RefCell::default();
}

impl TriggerMatcher for NativeTriggers {
    fn decide(&self, m: &Message, p: &TriggerPersona) -> Option<Reason> {
        decide_native(m, &[p]).pop().flatten()
    }

    fn decide_all(
        &self,
        message: &Message,
        personas: &[&TriggerPersona],
    ) -> Result<Vec<Option<Reason>>, TriggerError> {
        Ok(decide_native(message, personas))
    }

    fn name(&self) -> &str {
        "native"
    }
}

/// The decision for each of `personas`, with the message prepared once. The inputs are the ones
/// [`super::sandboxed::SandboxTriggers`] gives the component: the message's channel as the
/// persona's one subscription (routing matched it already), and as explicit mentions the names of
/// the personas whose key the message tags.
fn decide_native(m: &Message, personas: &[&TriggerPersona]) -> Vec<Option<Reason>> {
    let tagged = personas
        .iter()
        .filter(|p| m.mentions.contains(&p.pubkey))
        .map(|p| p.qualified());
    PREPARED.with_borrow_mut(|message| {
        message.set(&m.content, tagged);
        personas
            .iter()
            .map(|p| {
                let t = &p.triggers;
                let matcher = apiary_triggers::Matcher::new(
                    p.qualified(),
                    t.mentions,
                    t.keywords.iter().map(String::as_str),
                    t.all_messages,
                    [m.channel.as_str()],
                );
                reason(matcher.decide(&m.channel, message), &t.keywords)
            })
            .collect()
    })
}

/// The dispatcher's reason for a decision; `None` when the persona stays asleep.
fn reason(r: apiary_triggers::Reason, keywords: &[String]) -> Option<Reason> {
    use apiary_triggers::Reason as R;
    match r {
        R::Mentioned => Some(Reason::Mention),
        R::Keyword(i) => keywords.get(i).map(|k| Reason::Keyword(k.clone())),
        R::AllMessages => Some(Reason::AllMessages),
        R::NotSubscribed | R::NoMatch => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::relay;
    use nostr_sdk::prelude::*;

    fn persona(triggers: Triggers) -> TriggerPersona {
        TriggerPersona {
            name: "pip".into(),
            display_name: "Pip".into(),
            qualified: String::new(),
            pubkey: Keys::generate().public_key(),
            triggers,
        }
    }

    fn msg(text: &str, tags: Vec<Tag>) -> Message {
        let ev = relay::message(&Keys::generate(), "general", text, tags).unwrap();
        Message::parse(&ev).unwrap()
    }

    #[test]
    fn mention_by_name_or_key() {
        let p = persona(Triggers::BUILT_IN);
        let m = NativeTriggers;
        assert_eq!(
            m.decide(&msg("hey @Pip, look", vec![]), &p),
            Some(Reason::Mention)
        );
        assert_eq!(m.decide(&msg("hey @pipe", vec![]), &p), None);
        assert_eq!(
            m.decide(&msg("hi", vec![Tag::public_key(p.pubkey)]), &p),
            Some(Reason::Mention)
        );
        let quiet = persona(Triggers {
            mentions: false,
            keywords: vec![],
            all_messages: false,
        });
        assert_eq!(m.decide(&msg("hey @pip", vec![]), &quiet), None);
    }

    #[test]
    fn a_pack_id_in_a_mention_or_a_key_in_a_p_tag_wakes_only_that_pack_s_persona() {
        let of = |pack: &str| TriggerPersona {
            qualified: format!("{pack}/pip"),
            ..persona(Triggers::BUILT_IN)
        };
        let (a, b) = (of("com.example.a"), of("com.example.b"));
        let woke = |m: &Message| {
            NativeTriggers
                .decide_all(m, &[&a, &b])
                .unwrap()
                .iter()
                .map(Option::is_some)
                .collect::<Vec<_>>()
        };
        assert_eq!(woke(&msg("@pip hi", vec![])), [true, true]);
        assert_eq!(woke(&msg("@com.example.b/pip hi", vec![])), [false, true]);
        assert_eq!(
            woke(&msg("hi", vec![Tag::public_key(a.pubkey)])),
            [true, false]
        );
    }

    #[test]
    fn keywords_and_all_messages() {
        let p = persona(Triggers {
            mentions: true,
            keywords: vec!["CVE".into()],
            all_messages: false,
        });
        assert_eq!(
            NativeTriggers.decide(&msg("new cve-2026-1", vec![]), &p),
            Some(Reason::Keyword("CVE".into()))
        );
        assert_eq!(NativeTriggers.decide(&msg("nothing", vec![]), &p), None);
        let all = persona(Triggers {
            mentions: false,
            keywords: vec![],
            all_messages: true,
        });
        assert_eq!(
            NativeTriggers.decide(&msg("nothing", vec![]), &all),
            Some(Reason::AllMessages)
        );
    }

    /// With both on, all_messages names the wake (the native matcher used to name the keyword,
    /// where the component named all_messages).
    #[test]
    fn all_messages_comes_before_keywords() {
        let p = persona(Triggers {
            mentions: true,
            keywords: vec!["".into(), "deploy".into()],
            all_messages: true,
        });
        assert_eq!(
            NativeTriggers.decide(&msg("deploy now", vec![]), &p),
            Some(Reason::AllMessages)
        );
        assert_eq!(
            NativeTriggers.decide(&msg("@pip deploy", vec![]), &p),
            Some(Reason::Mention)
        );
        let keywords = persona(Triggers {
            all_messages: false,
            ..p.triggers.clone()
        });
        // The keyword as configured, counted past the empty one.
        assert_eq!(
            NativeTriggers.decide(&msg("DEPLOY now", vec![]), &keywords),
            Some(Reason::Keyword("deploy".into()))
        );
    }

    /// One decision per persona equals the decisions for all of them with the message prepared
    /// once; a `p` tag mentions only the persona it names.
    #[test]
    fn decide_all_equals_one_decision_each() {
        let personas: Vec<TriggerPersona> = (0..3)
            .map(|i| TriggerPersona {
                name: format!("p{i}"),
                ..persona(Triggers {
                    mentions: i != 2,
                    keywords: vec![format!("topic{i}")],
                    all_messages: i == 1,
                })
            })
            .collect();
        let refs: Vec<&TriggerPersona> = personas.iter().collect();
        for m in [
            msg("@p0 and topic2", vec![]),
            msg("for you", vec![Tag::public_key(personas[0].pubkey)]),
            msg("topic0 topic1", vec![Tag::public_key(personas[2].pubkey)]),
        ] {
            let all = NativeTriggers.decide_all(&m, &refs).unwrap();
            let each: Vec<Option<Reason>> =
                refs.iter().map(|p| NativeTriggers.decide(&m, p)).collect();
            assert_eq!(all, each, "{}", m.content);
        }
    }
}
