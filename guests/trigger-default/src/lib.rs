//! `trigger-default`: apiary's built-in trigger matcher, the spec's semantics as a component.
//! The decision itself lives in `logic.rs` (shared, verbatim, with the host's native benchmark).

mod logic;

wit_bindgen::generate!({ world: "trigger", path: "../../wit" });

use exports::apiary::plugin::matcher::{
    Batch, Decision, Guest, Message, Persona, Reason, Run, Span, Wake, WakeReason,
};

struct TriggerDefault;

/// The strings of a `batch`: spans and runs read through here, so one out of range reads as
/// empty instead of trapping.
#[derive(Clone, Copy)]
struct Table<'b> {
    text: &'b str,
    spans: &'b [Span],
}

impl<'b> Table<'b> {
    fn str(self, span: Span) -> &'b str {
        let start = span.start as usize;
        self.text
            .get(start..start.saturating_add(span.len as usize))
            .unwrap_or("")
    }

    fn strs(self, run: Run) -> impl Iterator<Item = &'b str> {
        let start = run.start as usize;
        self.spans
            .get(start..start.saturating_add(run.len as usize))
            .unwrap_or(&[])
            .iter()
            .map(move |&span| self.str(span))
    }
}

impl Guest for TriggerDefault {
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
        let table = Table {
            text: &batch.text,
            spans: &batch.spans,
        };
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
        let messages = batch.messages.iter().map(|m| {
            (
                table.str(m.channel),
                table.str(m.text),
                table.strs(m.mentions),
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

export!(TriggerDefault);
