//! {{name}}: an apiary trigger matcher. apiary asks it which messages wake which persona.
//!
//! This one wakes a persona when the message mentions it (by `@name` or the relay's mention list)
//! and its `mentions` trigger is on, or, in a channel it subscribes to, on every message when
//! `all_messages` is on, else when the text contains one of its keywords (any case). Only `decide` is written: the SDK's default `decide_batch` calls it
//! for every pair. A trigger gets no filesystem and no host log: keep it a pure function.

use apiary_guest_sdk::trigger::{Decision, Message, Persona, Reason, Trigger};

pub struct Component;

impl Trigger for Component {
    fn decide(persona: Persona, message: Message) -> Decision {
        let text = message.text.to_lowercase();
        let name = persona.name.to_lowercase();
        let mentioned = message.mentions.iter().any(|m| m.eq_ignore_ascii_case(&persona.name))
            || text.contains(&format!("@{name}"));
        if persona.mentions && mentioned {
            return Decision {
                wake: true,
                reason: Reason::Mentioned,
            };
        }
        let channel = message.channel.trim_start_matches('#');
        if !persona
            .subscribe
            .iter()
            .any(|c| c.trim_start_matches('#') == channel)
        {
            return Decision {
                wake: false,
                reason: Reason::NotSubscribed,
            };
        }
        if persona.all_messages {
            return Decision {
                wake: true,
                reason: Reason::AllMessages,
            };
        }
        match persona
            .keywords
            .iter()
            .find(|k| !k.is_empty() && text.contains(&k.to_lowercase()))
        {
            Some(keyword) => Decision {
                wake: true,
                reason: Reason::Keyword(keyword.clone()),
            },
            None => Decision {
                wake: false,
                reason: Reason::NoMatch,
            },
        }
    }
}

apiary_guest_sdk::export_trigger!(Component);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keywords_wake_only_in_subscribed_channels() {
        let pip = Persona {
            name: "pip".into(),
            mentions: true,
            keywords: vec!["deploy".into()],
            subscribe: vec!["ops".into()],
            ..Persona::default()
        };
        let said = |channel: &str, text: &str| Message {
            channel: channel.into(),
            text: text.into(),
            ..Message::default()
        };
        assert!(Component::decide(pip.clone(), said("ops", "Deploy now")).wake);
        assert!(!Component::decide(pip.clone(), said("random", "deploy now")).wake);
        assert!(Component::decide(pip, said("random", "@pip hi")).wake);
    }
}
