//! `trigger-default`: apiary's built-in trigger matcher, the spec's semantics as a component.
//! The decision itself is the `apiary-triggers` crate (host/triggers), which the host's native
//! matcher uses too; this file only maps the WIT types to and from it. A persona set is prepared
//! once (its matchers and their index) and kept for every batch the host decides against it.

use apiary_triggers as logic;

use apiary_guest_sdk::trigger::{Batch, Persona, Trigger, Wake, WakeReason};

struct TriggerDefault(logic::PersonaSet);

impl Trigger for TriggerDefault {
    fn new(personas: Vec<Persona>) -> Self {
        let matchers = personas
            .iter()
            .map(|p| {
                logic::Matcher::new(
                    &p.name,
                    p.mentions,
                    p.keywords.iter().map(String::as_str),
                    p.all_messages,
                    p.subscribe.iter().map(String::as_str),
                )
            })
            .collect();
        TriggerDefault(logic::PersonaSet::new(matchers))
    }

    fn decide(&mut self, batch: &Batch) -> Vec<Wake> {
        let messages = (0..batch.messages.len()).filter_map(|i| batch.fields(i));
        self.0
            .decide(messages)
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
