//! `trigger-default`: apiary's built-in trigger matcher, the spec's semantics as a component.
//! The decision itself lives in `logic.rs` (shared, verbatim, with the host's native benchmark).

mod logic;

wit_bindgen::generate!({ world: "trigger", path: "../../wit" });

use exports::apiary::plugin::matcher::{Decision, Guest, Message, Persona, Reason, Wake};

struct TriggerDefault;

fn matcher(p: &Persona) -> logic::Matcher {
    logic::Matcher::new(
        &p.name,
        p.mentions,
        &p.keywords,
        p.all_messages,
        &p.subscribe,
    )
}

fn prepared(m: &Message) -> logic::Prepared<'_> {
    logic::Prepared::new(&m.channel, &m.text, &m.mentions)
}

fn reason(persona: &Persona, r: logic::Reason) -> Reason {
    match r {
        logic::Reason::Mentioned => Reason::Mentioned,
        logic::Reason::Keyword(i) => Reason::Keyword(persona.keywords[i].clone()),
        logic::Reason::AllMessages => Reason::AllMessages,
        logic::Reason::NotSubscribed => Reason::NotSubscribed,
        logic::Reason::NoMatch => Reason::NoMatch,
    }
}

impl Guest for TriggerDefault {
    fn decide(persona: Persona, message: Message) -> Decision {
        let r = matcher(&persona).decide(&prepared(&message));
        Decision {
            wake: r.wakes(),
            reason: reason(&persona, r),
        }
    }

    fn decide_batch(personas: Vec<Persona>, messages: Vec<Message>) -> Vec<Wake> {
        let matchers: Vec<logic::Matcher> = personas.iter().map(matcher).collect();
        logic::decide_batch(&matchers, messages.iter().map(prepared))
            .into_iter()
            .map(|(m, p, r)| Wake {
                message: m,
                persona: p,
                reason: reason(&personas[p as usize], r),
            })
            .collect()
    }
}

export!(TriggerDefault);
