//! The spec's trigger semantics (Persona Pack Specification section 10), as plain Rust with no
//! dependency on the WIT bindings, so the host's benchmark can compile exactly this file natively
//! and compare it with the component.
//!
//! Order of the decision, for one persona and one message:
//! 1. `mentions` is on and the persona is mentioned (its name in the message's mention list, or
//!    `@name` in the text, both case-insensitive) → wake, in any channel;
//! 2. the channel is not in `subscribe` (a leading `#` is not significant on either side) → asleep;
//! 3. `all_messages` is on → wake;
//! 4. the text contains one of `keywords`, compared case-insensitively (empty keywords never match)
//!    → wake, naming the first such keyword in configuration order;
//! 5. otherwise → asleep.
//!
//! [`decide_batch`] reaches the same decisions without looking at every pair: it indexes the
//! personas once per batch by subscribed channel and by name, so a message is checked only against
//! the personas subscribed to its channel and the ones it mentions.

use std::collections::HashMap;

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
    name: String,
    mentions: bool,
    /// (index in the configured list, lower-cased keyword, its byte-pair signature); empty keywords
    /// are left out.
    keywords: Vec<(usize, String, Signature)>,
    all_messages: bool,
    subscribe: Vec<String>,
}

impl Matcher {
    pub fn new<S: AsRef<str>>(
        name: &str,
        mentions: bool,
        keywords: &[S],
        all_messages: bool,
        subscribe: &[S],
    ) -> Matcher {
        Matcher {
            name: name.to_lowercase(),
            mentions,
            keywords: keywords
                .iter()
                .enumerate()
                .filter(|(_, k)| !k.as_ref().is_empty())
                .map(|(i, k)| {
                    let k = k.as_ref().to_lowercase();
                    let signature = Signature::of_keyword(&k);
                    (i, k, signature)
                })
                .collect(),
            all_messages,
            subscribe: subscribe
                .iter()
                .map(|c| channel_key(c.as_ref()).to_string())
                .collect(),
        }
    }

    pub fn decide(&self, message: &Prepared<'_>) -> Reason {
        if self.mentions && message.mentions(&self.name) {
            return Reason::Mentioned;
        }
        if !self.subscribe.iter().any(|c| c == message.channel) {
            return Reason::NotSubscribed;
        }
        self.decide_subscribed(message)
    }

    /// Steps 3 to 5, for a message in a subscribed channel that does not mention the persona.
    fn decide_subscribed(&self, message: &Prepared<'_>) -> Reason {
        if self.all_messages {
            return Reason::AllMessages;
        }
        for (index, keyword, signature) in &self.keywords {
            // Most keywords miss most messages: the signature rules them out without a search.
            if message.signature.covers(signature) && message.text.contains(keyword.as_str()) {
                return Reason::Keyword(*index);
            }
        }
        Reason::NoMatch
    }
}

/// A message prepared once for many personas: channel key, lower-cased text, mentioned names.
pub struct Prepared<'a> {
    channel: &'a str,
    text: String,
    /// Lower-cased names: the explicit mention list plus every `@name` token of the text.
    mentioned: Vec<String>,
    signature: Signature,
}

impl<'a> Prepared<'a> {
    pub fn new<S: AsRef<str>>(channel: &'a str, text: &str, mentions: &[S]) -> Prepared<'a> {
        let text = lowercase(text);
        let mut mentioned: Vec<String> = mentions.iter().map(|m| lowercase(m.as_ref())).collect();
        let mut rest = text.as_str();
        while let Some(at) = rest.find('@') {
            rest = &rest[at + 1..];
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
                .unwrap_or(rest.len());
            if end > 0 {
                mentioned.push(rest[..end].to_string());
            }
            rest = &rest[end..];
        }
        Prepared {
            channel: channel_key(channel),
            signature: Signature::of_text(&text),
            text,
            mentioned,
        }
    }

    fn mentions(&self, name_lower: &str) -> bool {
        self.mentioned.iter().any(|m| m == name_lower)
    }
}

/// Adjacent byte pairs and single bytes of a text, hashed into 256 bits. A keyword's signature is
/// its byte pairs (its byte, for a one-byte keyword); a text can contain a keyword only if the text's
/// signature covers the keyword's, so a failed `covers` skips the substring search with no false
/// negatives. Substring search is SIMD-accelerated natively but not in WebAssembly, which is why the
/// component gains most from this.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Signature([u64; 4]);

impl Signature {
    pub fn of_text(text: &str) -> Signature {
        let mut s = Signature([0; 4]);
        let bytes = text.as_bytes();
        bytes.iter().for_each(|&b| s.set(b));
        bytes.windows(2).for_each(|w| s.set(pair_hash(w[0], w[1])));
        s
    }

    pub fn of_keyword(keyword: &str) -> Signature {
        let mut s = Signature([0; 4]);
        match keyword.as_bytes() {
            [only] => s.set(*only),
            bytes => bytes.windows(2).for_each(|w| s.set(pair_hash(w[0], w[1]))),
        }
        s
    }

    fn set(&mut self, bit: u8) {
        self.0[usize::from(bit >> 6)] |= 1 << (bit & 63);
    }

    /// Whether every bit of `needle` is also set here.
    pub fn covers(&self, needle: &Signature) -> bool {
        self.0
            .iter()
            .zip(needle.0)
            .all(|(have, need)| have & need == need)
    }
}

fn pair_hash(a: u8, b: u8) -> u8 {
    a.wrapping_mul(31).wrapping_add(b)
}

/// `str::to_lowercase`, with a cheaper path for ASCII text (most chat messages).
fn lowercase(s: &str) -> String {
    if s.is_ascii() {
        s.to_ascii_lowercase()
    } else {
        s.to_lowercase()
    }
}

/// Channel names compare without their display `#`.
fn channel_key(channel: &str) -> &str {
    channel.strip_prefix('#').unwrap_or(channel)
}

/// The personas of a batch indexed by what can wake them: each list holds persona indexes in
/// ascending order, without repeats.
struct Index<'m> {
    /// Channel key → the personas subscribed to it.
    by_channel: HashMap<&'m str, Vec<u32>>,
    /// Lower-cased name → the personas of that name that wake on mentions.
    by_name: HashMap<&'m str, Vec<u32>>,
}

impl<'m> Index<'m> {
    fn new(matchers: &'m [Matcher]) -> Index<'m> {
        let mut by_channel: HashMap<&str, Vec<u32>> = HashMap::new();
        let mut by_name: HashMap<&str, Vec<u32>> = HashMap::new();
        for (i, m) in matchers.iter().enumerate() {
            let i = i as u32;
            for channel in &m.subscribe {
                let list = by_channel.entry(channel.as_str()).or_default();
                // `#ops` and `ops` are one channel.
                if list.last() != Some(&i) {
                    list.push(i);
                }
            }
            if m.mentions {
                by_name.entry(m.name.as_str()).or_default().push(i);
            }
        }
        Index {
            by_channel,
            by_name,
        }
    }
}

/// Every waking (message index, persona index, reason), ordered by message then persona: the
/// decisions of [`Matcher::decide`] for every pair.
pub fn decide_batch<'a, M>(matchers: &[Matcher], messages: M) -> Vec<(u32, u32, Reason)>
where
    M: IntoIterator<Item = Prepared<'a>>,
{
    let index = Index::new(matchers);
    let mut out = Vec::new();
    let mut mentioned: Vec<u32> = Vec::new();
    for (mi, message) in messages.into_iter().enumerate() {
        let mi = mi as u32;
        let start = out.len();
        mentioned.clear();
        for name in &message.mentioned {
            if let Some(list) = index.by_name.get(name.as_str()) {
                mentioned.extend_from_slice(list);
            }
        }
        // A name may be mentioned twice, or two ways (`p` tag and `@name`).
        mentioned.sort_unstable();
        mentioned.dedup();
        out.extend(mentioned.iter().map(|&pi| (mi, pi, Reason::Mentioned)));
        if let Some(list) = index.by_channel.get(message.channel) {
            for &pi in list {
                if mentioned.contains(&pi) {
                    continue;
                }
                let reason = matchers[pi as usize].decide_subscribed(&message);
                if reason.wakes() {
                    out.push((mi, pi, reason));
                }
            }
        }
        if !mentioned.is_empty() {
            // Mentions came first: order the message's wakes by persona.
            out[start..].sort_unstable_by_key(|&(_, pi, _)| pi);
        }
    }
    out
}
