//! Which message wakes which persona: the trigger semantics of the Persona Pack Specification
//! (section 10, `subscribe` and `triggers`), as plain Rust with no dependencies. One copy serves
//! both matchers apiary has: the built-in `trigger-default` component (guests/trigger-default,
//! built for wasm32-wasip2) and the native matcher of `apiary up --native-triggers`, so the two
//! cannot disagree on a wake or on its reason.
//!
//! The types: a [`Matcher`] is one persona's triggers, a [`Prepared`] one message, a [`Reason`] the
//! decision; a [`PersonaSet`] decides many pairs at once.
//!
//! Order of the decision, for one persona and one message:
//! 1. `mentions` is on and the persona is mentioned (its name in the message's mention list, or
//!    `@name` in the text, both case-insensitive; a name is the ASCII letters, digits, `_` and `-`
//!    after the `@`) → wake, in any channel. A persona named `pack-id/name` (as apiary names
//!    them) answers to `@name` and to `@pack-id/name`: the pack id (letters, digits, `.`, `-`,
//!    `_`) tells two personas of one name apart, and a mention so qualified is only that one;
//! 2. the channel is not in `subscribe` (a leading `#` is not significant on either side) → asleep;
//! 3. `all_messages` is on → wake;
//! 4. the text contains one of `keywords`, compared case-insensitively (empty keywords never match)
//!    → wake, naming the first such keyword in configuration order;
//! 5. otherwise → asleep.
//!
//! The spec says when each trigger wakes a persona, not which one names the wake when several
//! apply; this order is the one documented for the `trigger` world (wit/apiary-plugin@0.1.0/trigger.wit). With
//! `all_messages` on every message of a subscribed channel wakes the persona, so a keyword is never
//! why it woke.
//!
//! A [`PersonaSet`] reaches the same decisions without looking at every pair: it indexes the
//! personas once, when the set is made, by subscribed channel and by name (and keeps that for
//! every batch of messages decided against it), so a message is checked only against
//! the personas subscribed to its channel and the ones it mentions. A message is prepared once
//! (lower-cased, its mentions found, its signature taken) in buffers reused for the next one,
//! so a batch allocates only when a message is longer than any before it.

mod batch;
mod signature;
#[cfg(test)]
mod tests;

pub use batch::{PersonaSet, decide_batch};
use signature::{Signature, pair_bit};

/// Why a persona wakes or not. `Keyword` holds the index of the keyword in the persona's list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    Mentioned,
    Keyword(usize),
    AllMessages,
    NotSubscribed,
    NoMatch,
}

impl Reason {
    pub fn wakes(self) -> bool {
        matches!(
            self,
            Reason::Mentioned | Reason::Keyword(_) | Reason::AllMessages
        )
    }
}

/// A persona's trigger configuration, prepared once (lower-cased) for many messages.
pub struct Matcher {
    /// Lower-cased; `pack-id/name` or `name`.
    name: String,
    /// Where the bare name starts in `name` (after the `/`; 0 when unqualified).
    bare: usize,
    mentions: bool,
    /// Empty keywords are left out.
    keywords: Vec<Keyword>,
    all_messages: bool,
    subscribe: Vec<String>,
}

struct Keyword {
    /// Index in the configured list.
    index: usize,
    lowered: String,
    /// The [`Signature`] bits the keyword needs (never empty).
    bits: Vec<u16>,
}

impl Matcher {
    pub fn new<'s>(
        name: &str,
        mentions: bool,
        keywords: impl IntoIterator<Item = &'s str>,
        all_messages: bool,
        subscribe: impl IntoIterator<Item = &'s str>,
    ) -> Matcher {
        let name = {
            let mut lowered = String::new();
            push_lowercase(&mut lowered, name);
            lowered
        };
        Matcher {
            bare: name.rfind('/').map_or(0, |slash| slash + 1),
            name,
            mentions,
            keywords: keywords
                .into_iter()
                .enumerate()
                .filter(|(_, k)| !k.is_empty())
                .map(|(index, k)| {
                    let mut lowered = String::new();
                    push_lowercase(&mut lowered, k);
                    Keyword {
                        index,
                        bits: Signature::needs(&lowered),
                        lowered,
                    }
                })
                .collect(),
            all_messages,
            subscribe: subscribe
                .into_iter()
                .map(|c| channel_key(c).to_string())
                .collect(),
        }
    }

    /// The decision for a message posted in `channel`.
    pub fn decide(&self, channel: &str, message: &Prepared) -> Reason {
        if self.mentions && self.names().any(|n| message.mentions(n)) {
            return Reason::Mentioned;
        }
        let channel = channel_key(channel);
        if !self.subscribe.iter().any(|c| c == channel) {
            return Reason::NotSubscribed;
        }
        self.decide_subscribed(message)
    }

    /// The names a mention of this persona may use: `pack-id/name` and `name`, or `name`.
    fn names(&self) -> impl Iterator<Item = &str> {
        let bare = (self.bare > 0).then(|| &self.name[self.bare..]);
        std::iter::once(self.name.as_str()).chain(bare)
    }

    /// Steps 3 to 5, for a message in a subscribed channel that does not mention the persona.
    fn decide_subscribed(&self, message: &Prepared) -> Reason {
        if self.all_messages {
            return Reason::AllMessages;
        }
        match self.keywords.iter().find(|k| message.contains(k)) {
            Some(k) => Reason::Keyword(k.index),
            None => Reason::NoMatch,
        }
    }
}

/// A message prepared once for many personas: lower-cased text, mentioned names, signature.
/// [`Prepared::set`] refills it for the next message without giving its buffers back.
#[derive(Default)]
pub struct Prepared {
    /// The text, UTF-8 kept as bytes (every use of it is byte-wise): lower-cased except for ASCII
    /// capitals, which every use folds as it reads.
    text: Vec<u8>,
    /// Lower-cased mentioned names (the explicit list, then every `@name` token of the text), one
    /// after another; `name_ends` holds where each ends.
    names: String,
    name_ends: Vec<usize>,
    signature: Signature,
}

impl Prepared {
    pub fn new() -> Prepared {
        Prepared::default()
    }

    /// Prepares `text` and its explicit `mentions` (names), replacing the previous message.
    pub fn set<'s>(&mut self, text: &str, mentions: impl IntoIterator<Item = &'s str>) {
        self.text.clear();
        self.text.extend_from_slice(text.as_bytes());
        let has_at = match self.sign_ascii() {
            Some(has_at) => has_at,
            None => {
                self.text.clear();
                self.text.extend_from_slice(text.to_lowercase().as_bytes());
                self.signature.take(&self.text);
                self.text.contains(&b'@')
            }
        };
        self.names.clear();
        self.name_ends.clear();
        for m in mentions {
            push_lowercase(&mut self.names, m);
            self.name_ends.push(self.names.len());
        }
        if !has_at {
            return;
        }
        // `@name` tokens: ASCII letters, digits, `_` and `-` after an `@`; `@pack-id/name` when a
        // pack id (those and `.`) and a `/` come first, the qualified name as one token.
        let is_name = |b: &u8| b.is_ascii_alphanumeric() || *b == b'_' || *b == b'-';
        let mut rest = self.text.as_slice();
        while let Some(at) = rest.iter().position(|&b| b == b'@') {
            rest = &rest[at + 1..];
            let id = rest
                .iter()
                .position(|b| !(is_name(b) || *b == b'.'))
                .unwrap_or(rest.len());
            let qualified = match rest.get(id) {
                Some(b'/') if id > 0 => {
                    let name = &rest[id + 1..];
                    let len = name.iter().position(|b| !is_name(b)).unwrap_or(name.len());
                    (len > 0).then_some(id + 1 + len)
                }
                _ => None,
            };
            let end = qualified
                .unwrap_or_else(|| rest.iter().position(|b| !is_name(b)).unwrap_or(rest.len()));
            // ASCII, so always UTF-8.
            if let Ok(name) = std::str::from_utf8(&rest[..end])
                && !name.is_empty()
            {
                push_lowercase(&mut self.names, name);
                self.name_ends.push(self.names.len());
            }
            rest = &rest[end..];
        }
    }

    /// For ASCII text: takes its signature, leaving the text as it is ([`pair_bit`] ignores ASCII
    /// case, and the rare search folds case as it compares, instead of every message paying a
    /// store per byte), and tells whether the text has an `@` (in the same pass: a second one is
    /// nearly free natively, but not in the component). None, with nothing done, for other text.
    fn sign_ascii(&mut self) -> Option<bool> {
        if !self.text.is_ascii() {
            return None;
        }
        self.signature.clear();
        // A pair (NUL, first byte) is one more bit than the text has: harmless, as a signature
        // only rules keywords out.
        let mut prev = 0;
        let mut has_at = false;
        // Four bytes a turn: in the component every turn of a loop also checks the deadline.
        let mut quads = self.text.chunks_exact(4);
        for quad in &mut quads {
            let [a, b, c, d] = [0, 1, 2, 3].map(|i| quad[i]);
            for (x, y) in [(prev, a), (a, b), (b, c), (c, d)] {
                self.signature.set(pair_bit(x, y));
            }
            has_at |= (a == b'@') | (b == b'@') | (c == b'@') | (d == b'@');
            prev = d;
        }
        for &b in quads.remainder() {
            self.signature.set(pair_bit(prev, b));
            has_at |= b == b'@';
            prev = b;
        }
        Some(has_at)
    }

    /// Whether the text contains the keyword. Most keywords miss most messages: the signature
    /// rules them out without a search.
    fn contains(&self, keyword: &Keyword) -> bool {
        self.signature.has_all(&keyword.bits) && contains(&self.text, keyword.lowered.as_bytes())
    }

    fn mentions(&self, name_lower: &str) -> bool {
        self.names().any(|n| n == name_lower)
    }

    fn names(&self) -> impl Iterator<Item = &str> {
        let mut start = 0;
        self.name_ends.iter().map(move |&end| {
            let name = &self.names[start..end];
            start = end;
            name
        })
    }
}

/// Appends `s` lower-cased: `str::to_lowercase`, without its allocation for ASCII text (most chat
/// messages).
fn push_lowercase(out: &mut String, s: &str) {
    if s.is_ascii() {
        let from = out.len();
        out.push_str(s);
        out[from..].make_ascii_lowercase();
    } else {
        out.push_str(&s.to_lowercase());
    }
}

/// Whether `needle` (lower-case, non-empty) occurs in `haystack`, whose ASCII capitals count as
/// their small letters. Byte-wise is exact for UTF-8: a match of a whole character sequence cannot
/// start inside a character, and ASCII folding never touches the bytes of other characters.
/// Plain scanning for the first byte, then a comparison: it runs only for keywords the signature
/// admits, on chat-length texts, where setting up std's Two-Way searcher costs more than it saves
/// (in WebAssembly, whose std has no SIMD path for it, ~2,000 instructions a search).
fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    let Some((&first, rest)) = needle.split_first() else {
        return true;
    };
    let Some(last_start) = haystack.len().checked_sub(needle.len()) else {
        return false;
    };
    let first = Folded::new(first);
    let mut from = 0;
    while let Some(at) = haystack[from..=last_start]
        .iter()
        .position(|&h| first.matches(h))
    {
        let start = from + at + 1;
        if rest
            .iter()
            .zip(&haystack[start..])
            .all(|(&n, &h)| Folded::new(n).matches(h))
        {
            return true;
        }
        from = start;
        if from > last_start {
            break;
        }
    }
    false
}

/// A lower-case needle byte, compared with haystack bytes whose ASCII capitals count as small:
/// a letter matches either case by setting the case bit (0x20) of the haystack byte, which is
/// one `or` where folding the haystack byte costs a range check.
#[derive(Clone, Copy)]
struct Folded {
    byte: u8,
    case_bit: u8,
}

impl Folded {
    fn new(byte: u8) -> Folded {
        Folded {
            byte,
            case_bit: if byte.is_ascii_lowercase() { 0x20 } else { 0 },
        }
    }

    fn matches(self, h: u8) -> bool {
        h | self.case_bit == self.byte
    }
}

/// Channel names compare without their display `#`.
fn channel_key(channel: &str) -> &str {
    channel.strip_prefix('#').unwrap_or(channel)
}
