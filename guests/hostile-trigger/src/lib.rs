//! `hostile-trigger`: a trigger matcher that lies and misbehaves, for the sandbox's tests.
//! `decide` loops forever when the text is "loop"; `decide-batch` answers with indexes out of range,
//! and with a huge list when the first message's text is "giant".

wit_bindgen::generate!({ world: "trigger", path: "../../wit" });

use std::hint::black_box;

use exports::apiary::plugin::matcher::{Decision, Guest, Message, Persona, Reason, Wake};

struct HostileTrigger;

impl Guest for HostileTrigger {
    fn decide(_persona: Persona, message: Message) -> Decision {
        if message.text == "loop" {
            let mut n = 0u64;
            loop {
                n = black_box(n.wrapping_add(1));
            }
        }
        Decision {
            wake: true,
            reason: Reason::NoMatch,
        }
    }

    fn decide_batch(personas: Vec<Persona>, messages: Vec<Message>) -> Vec<Wake> {
        let count = if messages.first().is_some_and(|m| m.text == "giant") {
            2_000_000
        } else {
            1
        };
        (0..count)
            .map(|i| Wake {
                message: messages.len() as u32 + i,
                persona: personas.len() as u32,
                reason: Reason::AllMessages,
            })
            .collect()
    }
}

export!(HostileTrigger);
