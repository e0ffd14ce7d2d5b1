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
        let text = text.to_lowercase();
        let mut mentioned: Vec<String> =
            mentions.iter().map(|m| m.as_ref().to_lowercase()).collect();
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

/// Channel names compare without their display `#`.
fn channel_key(channel: &str) -> &str {
    channel.strip_prefix('#').unwrap_or(channel)
}

/// Every waking (message index, persona index, reason), ordered by message then persona.
pub fn decide_batch<'a, M>(matchers: &[Matcher], messages: M) -> Vec<(u32, u32, Reason)>
where
    M: IntoIterator<Item = Prepared<'a>>,
{
    let mut out = Vec::new();
    for (mi, message) in messages.into_iter().enumerate() {
        for (pi, matcher) in matchers.iter().enumerate() {
            let reason = matcher.decide(&message);
            if reason.wakes() {
                out.push((mi as u32, pi as u32, reason));
            }
        }
    }
    out
}
