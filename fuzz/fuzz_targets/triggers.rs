//! The trigger semantics on hostile keywords and texts (a pack's keywords are untrusted, and the
//! batch builds an automaton from them): the batch must wake exactly the pairs one decision per
//! pair wakes, and a keyword wake must be the first configured keyword the lower-cased text holds.
//! Input: persona lines (keywords split by tabs), a NUL, then message lines.
#![no_main]

use apiary_triggers::{Matcher, Prepared, Reason, decide_batch};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (personas, messages) = text.split_once('\0').unwrap_or((text, ""));
    let personas: Vec<Vec<&str>> = personas
        .split('\n')
        .take(16)
        .map(|line| line.split('\t').take(16).collect())
        .collect();
    let messages: Vec<&str> = messages.split('\n').take(16).collect();
    let matchers: Vec<Matcher> = personas
        .iter()
        .enumerate()
        .map(|(i, keywords)| {
            // Every third persona wakes on mentions too, every fifth on all messages.
            let name = format!("p{i}");
            Matcher::new(
                &name,
                i % 3 == 0,
                keywords.iter().copied(),
                i % 5 == 4,
                ["ops"],
            )
        })
        .collect();
    let batch = decide_batch(
        &matchers,
        messages.iter().map(|t| ("#ops", *t, std::iter::empty())),
    );
    let mut pairs = Vec::new();
    let mut prepared = Prepared::new();
    for (mi, text) in messages.iter().enumerate() {
        prepared.set(text, std::iter::empty());
        let lowered = text.to_lowercase();
        for (pi, m) in matchers.iter().enumerate() {
            let reason = m.decide("ops", &prepared);
            if let Reason::Keyword(k) = reason {
                let first = personas[pi]
                    .iter()
                    .position(|k| !k.is_empty() && lowered.contains(&k.to_lowercase()));
                assert_eq!(first, Some(k), "keyword wake for {text:?}");
            }
            if reason.wakes() {
                pairs.push((mi as u32, pi as u32, reason));
            }
        }
    }
    assert_eq!(batch, pairs);
});
