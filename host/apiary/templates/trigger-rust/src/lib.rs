//! {{name}}: an apiary trigger matcher. apiary asks it which messages wake which persona.
//!
//! This one wakes a persona when the message mentions it (by `@name` or the relay's mention list)
//! and its `mentions` trigger is on, or, in a channel it subscribes to, on every message when
//! `all_messages` is on, else when the text contains one of its keywords (any case). It is a
//! `Rule`, asked about one persona and one message at a time; exported as `Each<Component>`, the
//! SDK asks it about every pair of a batch. (For speed, implement `Trigger` instead: `new`
//! prepares the personas once, `decide` answers whole batches.) A trigger gets no filesystem and
//! no host log: keep it a pure function.

use apiary_guest_sdk::trigger::{Each, Message, Persona, Rule, WakeReason};

pub struct Component;

impl Rule for Component {
    fn wakes(persona: &Persona, message: &Message) -> Option<WakeReason> {
        let text = message.text.to_lowercase();
        let name = persona.name.to_lowercase();
        let mentioned = message.mentions.iter().any(|m| m.eq_ignore_ascii_case(&persona.name))
            || text.contains(&format!("@{name}"));
        if persona.mentions && mentioned {
            return Some(WakeReason::Mentioned);
        }
        let channel = message.channel.trim_start_matches('#');
        if !persona
            .subscribe
            .iter()
            .any(|c| c.trim_start_matches('#') == channel)
        {
            return None;
        }
        if persona.all_messages {
            return Some(WakeReason::AllMessages);
        }
        persona
            .keywords
            .iter()
            .position(|k| !k.is_empty() && text.contains(&k.to_lowercase()))
            .map(|i| WakeReason::Keyword(i as u32))
    }
}

apiary_guest_sdk::export_trigger!(Each<Component>);

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
        assert_eq!(
            Component::wakes(&pip, &said("ops", "Deploy now")),
            Some(WakeReason::Keyword(0))
        );
        assert_eq!(Component::wakes(&pip, &said("random", "deploy now")), None);
        assert_eq!(
            Component::wakes(&pip, &said("random", "@pip hi")),
            Some(WakeReason::Mentioned)
        );
    }
}
