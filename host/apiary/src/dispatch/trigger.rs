//! Which messages wake which persona (spec §10 `triggers`), behind a small trait so the decision can
//! come from the sandbox's `trigger` component or from the native matcher here.
//!
//! Native semantics (the same as the sandbox's `trigger-default`): a *mention* is the persona's
//! public key in a `p` tag, or `@name` in the text, case-insensitively, ending at a word boundary; a *keyword* is a
//! case-insensitive substring; `all_messages` wakes on everything in a subscribed channel.

use nostr_sdk::prelude::PublicKey;

use crate::relay::Message;
use crate::resolve::Triggers;

/// The persona side of a trigger decision.
#[derive(Debug, Clone)]
pub struct TriggerPersona {
    pub name: String,
    pub display_name: String,
    pub pubkey: PublicKey,
    pub triggers: Triggers,
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

impl TriggerMatcher for NativeTriggers {
    fn decide(&self, m: &Message, p: &TriggerPersona) -> Option<Reason> {
        let t = &p.triggers;
        if t.mentions && (m.mentions.contains(&p.pubkey) || mentions_name(&m.content, &p.name)) {
            return Some(Reason::Mention);
        }
        if !t.keywords.is_empty() {
            let lower = m.content.to_lowercase();
            if let Some(k) = t
                .keywords
                .iter()
                .find(|k| !k.is_empty() && lower.contains(&k.to_lowercase()))
            {
                return Some(Reason::Keyword(k.clone()));
            }
        }
        if t.all_messages {
            return Some(Reason::AllMessages);
        }
        None
    }

    fn name(&self) -> &str {
        "native"
    }
}

/// `@name` in `text`, case-insensitive, not followed by a name character.
pub fn mentions_name(text: &str, name: &str) -> bool {
    if name.is_empty() {
        return false;
    }
    let text = text.to_lowercase();
    let needle = format!("@{}", name.to_lowercase());
    let mut from = 0;
    while let Some(i) = text[from..].find(&needle) {
        let end = from + i + needle.len();
        let next = text[end..].chars().next();
        if !next.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '-') {
            return true;
        }
        from = end;
    }
    false
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
}
