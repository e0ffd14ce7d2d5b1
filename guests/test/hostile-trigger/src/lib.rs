//! `hostile-trigger`: a trigger matcher that lies and misbehaves, for the sandbox's tests.
//! `decide` loops forever when the text is "loop"; `decide-batch` answers with indexes out of range,
//! with a keyword index out of range when the first message's text is "keyword", and with a huge
//! list when it is "giant".

use std::hint::black_box;

use apiary_guest_sdk::trigger::{
    Batch, Decision, Message, Persona, Reason, Trigger, Wake, WakeReason,
};

struct HostileTrigger;

impl Trigger for HostileTrigger {
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

    fn decide_batch(batch: Batch) -> Vec<Wake> {
        // The first message's text is string `strings + 3`, after its id, channel and author.
        let first_text = batch
            .messages
            .first()
            .and_then(|m| {
                let text = m.strings as usize + 3;
                let start = *batch.ends.get(text - 1)? as usize;
                batch.text.get(start..*batch.ends.get(text)? as usize)
            })
            .unwrap_or("");
        if first_text == "keyword" {
            return vec![Wake {
                message: 0,
                persona: 0,
                reason: WakeReason::Keyword(u32::MAX),
            }];
        }
        let count = if first_text == "giant" { 2_000_000 } else { 1 };
        (0..count)
            .map(|i| Wake {
                message: batch.messages.len() as u32 + i,
                persona: batch.personas.len() as u32,
                reason: WakeReason::AllMessages,
            })
            .collect()
    }
}

apiary_guest_sdk::export_trigger!(HostileTrigger);
