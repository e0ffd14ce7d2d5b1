//! `hostile-trigger`: a trigger matcher that lies and misbehaves, for the sandbox's tests. By the
//! first message's text: "loop" loops forever, "trap" panics, "grow" allocates without end,
//! "keyword" answers a keyword index out of range, "giant" a huge list; any other text is answered
//! with indexes out of range.

use std::hint::black_box;

use apiary_guest_sdk::trigger::{Batch, Persona, Trigger, Wake, WakeReason};

struct HostileTrigger {
    personas: usize,
}

impl Trigger for HostileTrigger {
    fn new(personas: Vec<Persona>) -> Self {
        HostileTrigger {
            personas: personas.len(),
        }
    }

    fn decide(&mut self, batch: &Batch) -> Vec<Wake> {
        let first_text = batch.fields(0).map_or("", |(_, text, _)| text);
        match first_text {
            "loop" => {
                let mut n = 0u64;
                loop {
                    n = black_box(n.wrapping_add(1));
                }
            }
            "trap" => panic!("hostile-trigger was told to trap"),
            "grow" => {
                let mut hoard: Vec<Vec<u8>> = Vec::new();
                loop {
                    hoard.push(vec![1; 1 << 20]);
                    black_box(&hoard);
                }
            }
            "keyword" => {
                return vec![Wake {
                    message: 0,
                    persona: 0,
                    reason: WakeReason::Keyword(u32::MAX),
                }];
            }
            _ => {}
        }
        let count = if first_text == "giant" { 2_000_000 } else { 1 };
        (0..count)
            .map(|i| Wake {
                message: batch.messages.len() as u32 + i,
                persona: self.personas as u32,
                reason: WakeReason::AllMessages,
            })
            .collect()
    }
}

apiary_guest_sdk::export_trigger!(HostileTrigger);
