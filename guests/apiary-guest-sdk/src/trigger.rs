//! The `trigger` world: which messages wake which persona.
//!
//! The host gives a matcher its personas once ([`Trigger::new`]: prepare them there, it is where
//! an index or an automaton pays off) and then batches of messages ([`Trigger::decide`]). A
//! matcher that decides one pair at a time implements [`Rule`] instead and is exported as
//! [`Each<YourRule>`](Each).
//!
//! A trigger has no filesystem and no host imports (not even the log). A trap or a malformed
//! answer counts as "do not wake" for the whole batch; the host then makes the sets again in a
//! fresh instance.

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
    /// The author's public key, hex.
    pub author: String,
    /// The author's display name, when the host knows one.
    pub author_name: Option<String>,
    pub text: String,
    /// Names of the personas the message mentions explicitly.
    pub mentions: Vec<String>,
}

/// A message in a [`Batch`]: its id, channel, author, author name and text are the five strings
/// from number `strings`, its mentions the `mentions` strings right after them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BatchMessage {
    pub strings: u32,
    pub mentions: u32,
}

/// Messages as one string table (see the WIT `batch`). Read them through [`Batch::message`],
/// [`Batch::str`] and [`Batch::strs`]: a number out of range or a bad end reads as empty.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Batch {
    pub text: String,
    pub ends: Vec<u32>,
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

    /// `len` strings from number `start`.
    pub fn strs(&self, start: u32, len: u32) -> impl Iterator<Item = &str> {
        (start..start.saturating_add(len)).map(move |number| self.str(number))
    }

    /// Message `index`'s channel, text and explicit mentions, without copying them.
    pub fn fields(&self, index: usize) -> Option<(&str, &str, impl Iterator<Item = &str>)> {
        let m = self.messages.get(index)?;
        let s = |offset: u32| self.str(m.strings.saturating_add(offset));
        Some((
            s(1),
            s(4),
            self.strs(m.strings.saturating_add(5), m.mentions),
        ))
    }

    /// Message `index` as a [`Message`] (copied out of the table).
    pub fn message(&self, index: usize) -> Option<Message> {
        let m = self.messages.get(index)?;
        let s = |offset: u32| self.str(m.strings.saturating_add(offset)).to_string();
        let author_name = s(3);
        Some(Message {
            id: s(0),
            channel: s(1),
            author: s(2),
            author_name: (!author_name.is_empty()).then_some(author_name),
            text: s(4),
            mentions: self
                .strs(m.strings.saturating_add(5), m.mentions)
                .map(str::to_string)
                .collect(),
        })
    }
}

/// Why a persona wakes; the keyword by its index in the persona's `keywords`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WakeReason {
    Mentioned,
    Keyword(u32),
    AllMessages,
}

/// One persona woken by one message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wake {
    /// Index into the batch's `messages`.
    pub message: u32,
    /// Index into the set's personas, in the order given to [`Trigger::new`].
    pub persona: u32,
    pub reason: WakeReason,
}

/// A trigger matcher over one set of personas.
pub trait Trigger {
    /// Prepares `personas`; called once per set, which the host keeps while they do not change.
    fn new(personas: Vec<Persona>) -> Self;

    /// The pairs of this set's personas x the batch's messages that wake, ordered by message
    /// then persona, at most one a pair.
    fn decide(&mut self, batch: &Batch) -> Vec<Wake>;
}

/// A matcher that decides one persona and one message at a time; export it as `Each<YourRule>`.
pub trait Rule {
    /// Why `message` wakes `persona`, or `None`.
    fn wakes(persona: &Persona, message: &Message) -> Option<WakeReason>;
}

/// The [`Trigger`] of a [`Rule`]: asks the rule about every pair (each message copied out of the
/// table once).
pub struct Each<R> {
    personas: Vec<Persona>,
    rule: std::marker::PhantomData<R>,
}

impl<R: Rule> Trigger for Each<R> {
    fn new(personas: Vec<Persona>) -> Self {
        Each {
            personas,
            rule: std::marker::PhantomData,
        }
    }

    fn decide(&mut self, batch: &Batch) -> Vec<Wake> {
        let mut wakes = Vec::new();
        for m in 0..batch.messages.len() {
            let Some(message) = batch.message(m) else {
                continue;
            };
            for (p, persona) in self.personas.iter().enumerate() {
                if let Some(reason) = R::wakes(persona, &message) {
                    wakes.push(Wake {
                        message: m as u32,
                        persona: p as u32,
                        reason,
                    });
                }
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

    impl Rule for Named {
        fn wakes(persona: &Persona, message: &Message) -> Option<WakeReason> {
            message
                .text
                .contains(&persona.name)
                .then_some(WakeReason::Mentioned)
        }
    }

    /// A batch of strings laid out as the host does.
    fn batch(strings: &[&str], messages: Vec<BatchMessage>) -> Batch {
        let mut text = String::new();
        let mut ends = Vec::new();
        for s in strings {
            text.push_str(s);
            ends.push(text.len() as u32);
        }
        Batch {
            text,
            ends,
            messages,
        }
    }

    #[test]
    fn each_asks_the_rule_about_every_pair_and_bad_numbers_read_empty() {
        let b = batch(
            &[
                "id1",
                "general",
                "key1",
                "",
                "hi bob",
                "id2",
                "c",
                "key2",
                "Ann",
                "ann and bob",
                "bob",
            ],
            vec![
                BatchMessage {
                    strings: 0,
                    mentions: 0,
                },
                BatchMessage {
                    strings: 5,
                    mentions: 1,
                },
                BatchMessage {
                    strings: 99,
                    mentions: 0,
                },
            ],
        );
        let second = b.message(1).unwrap();
        assert_eq!(second.text, "ann and bob");
        assert_eq!(second.author_name.as_deref(), Some("Ann"));
        assert_eq!(second.mentions, ["bob"]);
        assert_eq!(b.message(0).unwrap().author_name, None);
        assert_eq!(b.str(99), "");
        let personas = ["ann", "bob", ""].map(|name| Persona {
            name: name.into(),
            ..Default::default()
        });
        let mut set = Each::<Named>::new(personas.to_vec());
        let woken: Vec<(u32, u32)> = set
            .decide(&b)
            .iter()
            .map(|w| (w.message, w.persona))
            .collect();
        // "" is contained in every text, and message 2's strings are out of range (empty).
        assert_eq!(woken, [(0, 1), (0, 2), (1, 0), (1, 1), (1, 2), (2, 2)]);
    }
}
