//! `trigger-v0-1`: the default matcher built against the deprecated `apiary:plugin@0.1.0` (raw
//! bindings; the SDK binds 0.2), so tests can check that 0.1 components keep working.

wit_bindgen::generate!({ world: "trigger", path: "../../../wit/apiary-plugin@0.1.0" });

use apiary_triggers as logic;
use exports::apiary::plugin::matcher::{
    Batch, Decision, Guest, Message, Persona, Reason, Wake, WakeReason,
};

struct TriggerV01;

/// String `i` of the batch's table, or "" out of range.
fn string(batch: &Batch, i: u32) -> &str {
    let i = i as usize;
    let start = if i == 0 {
        Some(0)
    } else {
        batch.ends.get(i - 1).copied()
    };
    match (start, batch.ends.get(i)) {
        (Some(s), Some(&e)) => batch.text.get(s as usize..e as usize).unwrap_or(""),
        _ => "",
    }
}

fn strings(batch: &Batch, start: u32, len: u32) -> impl Iterator<Item = &str> {
    (start..start.saturating_add(len)).map(move |i| string(batch, i))
}

impl Guest for TriggerV01 {
    fn decide(persona: Persona, message: Message) -> Decision {
        let matcher = logic::Matcher::new(
            &persona.name,
            persona.mentions,
            persona.keywords.iter().map(String::as_str),
            persona.all_messages,
            persona.subscribe.iter().map(String::as_str),
        );
        let mut prepared = logic::Prepared::new();
        prepared.set(&message.text, message.mentions.iter().map(String::as_str));
        let r = matcher.decide(&message.channel, &prepared);
        Decision {
            wake: r.wakes(),
            reason: match r {
                logic::Reason::Mentioned => Reason::Mentioned,
                logic::Reason::Keyword(i) => Reason::Keyword(persona.keywords[i].clone()),
                logic::Reason::AllMessages => Reason::AllMessages,
                logic::Reason::NotSubscribed => Reason::NotSubscribed,
                logic::Reason::NoMatch => Reason::NoMatch,
            },
        }
    }

    fn decide_batch(batch: Batch) -> Vec<Wake> {
        let matchers: Vec<logic::Matcher> = batch
            .personas
            .iter()
            .map(|p| {
                logic::Matcher::new(
                    string(&batch, p.name),
                    p.mentions,
                    strings(&batch, p.keywords.start, p.keywords.len),
                    p.all_messages,
                    strings(&batch, p.subscribe.start, p.subscribe.len),
                )
            })
            .collect();
        // A message's strings: id, channel, author, text, then its mentions.
        let messages = batch.messages.iter().map(|m| {
            (
                string(&batch, m.strings.saturating_add(1)),
                string(&batch, m.strings.saturating_add(3)),
                strings(&batch, m.strings.saturating_add(4), m.mentions),
            )
        });
        logic::decide_batch(&matchers, messages)
            .into_iter()
            .filter_map(|(message, persona, r)| {
                let reason = match r {
                    logic::Reason::Mentioned => WakeReason::Mentioned,
                    logic::Reason::Keyword(i) => WakeReason::Keyword(i as u32),
                    logic::Reason::AllMessages => WakeReason::AllMessages,
                    logic::Reason::NotSubscribed | logic::Reason::NoMatch => return None,
                };
                Some(Wake {
                    message,
                    persona,
                    reason,
                })
            })
            .collect()
    }
}

export!(TriggerV01);
