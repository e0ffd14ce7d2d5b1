//! The `trigger` world: which messages wake which persona.
//!
//! A trigger has no filesystem and no host imports (not even the log); it should be a pure
//! function of its arguments. A trap or a malformed answer counts as "do not wake".

/// A persona's effective trigger configuration and subscriptions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Persona {
    pub name: String,
    /// Wake when mentioned.
    pub mentions: bool,
    /// Wake when the text contains one of these (case-insensitively).
    pub keywords: Vec<String>,
    /// Wake on every message in a subscribed channel.
    pub all_messages: bool,
    /// Channel names; a leading `#` is not significant.
    pub subscribe: Vec<String>,
}

/// A relay message, as a trigger sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Message {
    pub id: String,
    pub channel: String,
    pub author: String,
    pub text: String,
    /// Names of the personas the message mentions explicitly.
    pub mentions: Vec<String>,
}

/// Why a persona wakes, or why not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reason {
    Mentioned,
    /// The keyword as configured.
    Keyword(String),
    AllMessages,
    NotSubscribed,
    NoMatch,
}

/// The decision for one persona and one message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub wake: bool,
    pub reason: Reason,
}

/// `len` consecutive strings of a [`Batch`], from string number `start`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Run {
    pub start: u32,
    pub len: u32,
}

/// A persona in a [`Batch`]: string numbers instead of strings.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BatchPersona {
    pub name: u32,
    pub mentions: bool,
    pub keywords: Run,
    pub all_messages: bool,
    pub subscribe: Run,
}

/// A message in a [`Batch`]: its id, channel, author and text are the four strings from number
/// `strings`, its mentions the `mentions` strings right after them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BatchMessage {
    pub strings: u32,
    pub mentions: u32,
}

/// Personas and messages as one string table (see the WIT `batch`). Read strings through
/// [`Batch::str`] and [`Batch::strs`]: a number out of range or a bad end reads as empty.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Batch {
    pub text: String,
    pub ends: Vec<u32>,
    pub personas: Vec<BatchPersona>,
    pub messages: Vec<BatchMessage>,
}

impl Batch {
    /// String number `number`, or "" when out of range or not on character boundaries.
    pub fn str(&self, number: u32) -> &str {
        let i = number as usize;
        let start = match i.checked_sub(1) {
            Some(before) => self.ends.get(before),
            None => Some(&0),
        };
        match (start, self.ends.get(i)) {
            (Some(&start), Some(&end)) => self.text.get(start as usize..end as usize),
            _ => None,
        }
        .unwrap_or("")
    }

    /// The strings of a run.
    pub fn strs(&self, run: Run) -> impl Iterator<Item = &str> {
        let end = run.start.saturating_add(run.len);
        (run.start..end).map(move |number| self.str(number))
    }

    /// Persona `index` as a [`Persona`] (copied out of the table).
    pub fn persona(&self, index: usize) -> Option<Persona> {
        let p = self.personas.get(index)?;
        let owned = |run| self.strs(run).map(str::to_string).collect();
        Some(Persona {
            name: self.str(p.name).to_string(),
            mentions: p.mentions,
            keywords: owned(p.keywords),
            all_messages: p.all_messages,
            subscribe: owned(p.subscribe),
        })
    }

    /// Message `index` as a [`Message`] (copied out of the table).
    pub fn message(&self, index: usize) -> Option<Message> {
        let m = self.messages.get(index)?;
        let s = |offset: u32| self.str(m.strings.saturating_add(offset)).to_string();
        Some(Message {
            id: s(0),
            channel: s(1),
            author: s(2),
            text: s(3),
            mentions: self
                .strs(Run {
                    start: m.strings.saturating_add(4),
                    len: m.mentions,
                })
                .map(str::to_string)
                .collect(),
        })
    }
}

/// Why a persona wakes, in a batch answer; the keyword by its index in the persona's `keywords`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WakeReason {
    Mentioned,
    Keyword(u32),
    AllMessages,
}

/// One persona woken by one message, in a batch answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wake {
    /// Index into the batch's `messages`.
    pub message: u32,
    /// Index into the batch's `personas`.
    pub persona: u32,
    pub reason: WakeReason,
}

/// A trigger matcher. Only `decide` is required: the default `decide_batch` calls it for every
/// persona x message pair (correct, but it copies every string; override it when speed matters).
pub trait Trigger {
    /// The decision for one persona and one message.
    fn decide(persona: Persona, message: Message) -> Decision;

    /// The pairs of the batch that wake, ordered by message then persona.
    fn decide_batch(batch: Batch) -> Vec<Wake> {
        let personas: Vec<Persona> = (0..batch.personas.len())
            .filter_map(|i| batch.persona(i))
            .collect();
        let mut wakes = Vec::new();
        for m in 0..batch.messages.len() {
            let Some(message) = batch.message(m) else {
                continue;
            };
            for (p, persona) in personas.iter().enumerate() {
                let decision = Self::decide(persona.clone(), message.clone());
                if !decision.wake {
                    continue;
                }
                let reason = match decision.reason {
                    Reason::Mentioned => WakeReason::Mentioned,
                    Reason::AllMessages => WakeReason::AllMessages,
                    Reason::Keyword(k) => match persona.keywords.iter().position(|x| *x == k) {
                        Some(i) => WakeReason::Keyword(i as u32),
                        None => continue,
                    },
                    Reason::NotSubscribed | Reason::NoMatch => continue,
                };
                wakes.push(Wake {
                    message: m as u32,
                    persona: p as u32,
                    reason,
                });
            }
        }
        wakes
    }
}

/// Used by the export macro: a clear error when the type does not implement [`Trigger`].
#[doc(hidden)]
pub fn __assert_trigger<T: Trigger>() {}

#[cfg(test)]
mod tests {
    use super::*;

    /// Wakes whoever is named in the text.
    struct Named;

    impl Trigger for Named {
        fn decide(persona: Persona, message: Message) -> Decision {
            let wake = message.text.contains(&persona.name);
            Decision {
                wake,
                reason: if wake {
                    Reason::Mentioned
                } else {
                    Reason::NoMatch
                },
            }
        }
    }

    /// A batch of strings laid out as the host does.
    fn batch(strings: &[&str], personas: Vec<BatchPersona>, messages: Vec<BatchMessage>) -> Batch {
        let mut text = String::new();
        let mut ends = Vec::new();
        for s in strings {
            text.push_str(s);
            ends.push(text.len() as u32);
        }
        Batch {
            text,
            ends,
            personas,
            messages,
        }
    }

    #[test]
    fn the_default_batch_decides_each_pair_and_bad_numbers_read_empty() {
        let b = batch(
            &[
                "ann",
                "bob",
                "id1",
                "general",
                "me",
                "hi bob",
                "id2",
                "c",
                "me",
                "ann and bob",
            ],
            vec![
                BatchPersona {
                    name: 0,
                    ..Default::default()
                },
                BatchPersona {
                    name: 1,
                    ..Default::default()
                },
                BatchPersona {
                    name: 99,
                    ..Default::default()
                },
            ],
            vec![
                BatchMessage {
                    strings: 2,
                    mentions: 0,
                },
                BatchMessage {
                    strings: 6,
                    mentions: 0,
                },
            ],
        );
        assert_eq!(b.message(1).unwrap().text, "ann and bob");
        assert_eq!(b.str(99), "");
        let woken: Vec<(u32, u32)> = Named::decide_batch(b)
            .iter()
            .map(|w| (w.message, w.persona))
            .collect();
        // Persona 2's name is out of range, so empty, and "" is contained in every text.
        assert_eq!(woken, [(0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]);
    }
}
