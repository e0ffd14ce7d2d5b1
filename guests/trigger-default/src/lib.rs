//! `trigger-default`: apiary's built-in trigger matcher, the spec's semantics as a component.
//! The decision itself is the `apiary-triggers` crate (host/triggers), which the host's native
//! matcher uses too; this file only maps the WIT types to and from it.

use apiary_triggers as logic;

use apiary_guest_sdk::trigger::{
    Batch, Decision, Message, Persona, Reason, Run, Trigger, Wake, WakeReason,
};

struct TriggerDefault;

impl Trigger for TriggerDefault {
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
        let table = &batch;
        let matchers: Vec<logic::Matcher> = batch
            .personas
            .iter()
            .map(|p| {
                logic::Matcher::new(
                    table.str(p.name),
                    p.mentions,
                    table.strs(p.keywords),
                    p.all_messages,
                    table.strs(p.subscribe),
                )
            })
            .collect();
        // A message's strings: id, channel, author, text, then its mentions.
        let messages = batch.messages.iter().map(|m| {
            (
                table.str(m.strings.saturating_add(1)),
                table.str(m.strings.saturating_add(3)),
                table.strs(Run {
                    start: m.strings.saturating_add(4),
                    len: m.mentions,
                }),
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

apiary_guest_sdk::export_trigger!(TriggerDefault);
