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
//! the personas subscribed to its channel and the ones it mentions. A message is prepared once
//! (lower-cased, its mentions found, its [`Signature`] taken) in buffers reused for the next one,
//! so a batch allocates only when a message is longer than any before it.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

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
        Matcher {
            name: {
                let mut lowered = String::new();
                push_lowercase(&mut lowered, name);
                lowered
            },
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
        if self.mentions && message.mentions(&self.name) {
            return Reason::Mentioned;
        }
        let channel = channel_key(channel);
        if !self.subscribe.iter().any(|c| c == channel) {
            return Reason::NotSubscribed;
        }
        self.decide_subscribed(message)
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
        // `@name` tokens: ASCII letters, digits, `_` and `-` after an `@`.
        let is_name = |b: &u8| b.is_ascii_alphanumeric() || *b == b'_' || *b == b'-';
        let mut rest = self.text.as_slice();
        while let Some(at) = rest.iter().position(|&b| b == b'@') {
            rest = &rest[at + 1..];
            let end = rest.iter().position(|b| !is_name(b)).unwrap_or(rest.len());
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

/// Bits of a [`Signature`] for byte pairs; [`ALWAYS_BIT`], one of them, is in every signature.
const PAIR_BITS: usize = 4096;
const ALWAYS_BIT: usize = 0;

/// Which adjacent byte pairs (hashed into 4,096 bits) occur in a text. A keyword can occur in a
/// text only if all its pairs do, so one missing bit rules the keyword out with no false negatives
/// and no substring search; a one-byte keyword, which has no pair, needs only [`ALWAYS_BIT`] and is
/// always searched for. A 400-byte line sets under a tenth of the pair bits, so most keywords fail
/// at their first bit, and the substring search runs only for the few that pass.
///
/// A bit is a byte, set when it holds the current stamp: setting one is a store, testing one a
/// load and a compare, and the next message clears them all by moving to the next stamp (the bytes
/// are zeroed only when the stamps wrap, once every 255 messages).
#[derive(Clone)]
pub struct Signature {
    stamps: Box<[u8; PAIR_BITS]>,
    /// The stamp of the bits set for the current text; never 0 once a text is signed.
    current: u8,
}

impl Default for Signature {
    fn default() -> Signature {
        Signature {
            stamps: Box::new([0; PAIR_BITS]),
            current: 0,
        }
    }
}

impl Signature {
    fn clear(&mut self) {
        self.current = self.current.wrapping_add(1);
        if self.current == 0 {
            self.stamps.fill(0);
            self.current = 1;
        }
        self.set(ALWAYS_BIT);
    }

    /// Replaces the signature with the one of `text`.
    fn take(&mut self, text: &[u8]) {
        self.clear();
        for w in text.windows(2) {
            self.set(pair_bit(w[0], w[1]));
        }
    }

    /// The bits a text's signature must have to contain `keyword` (non-empty): its pairs, or its
    /// byte; the pairs of the two rarest letter pairs first, as they rule most texts out soonest
    /// (what a batch probes). A repeated pair is checked twice, which is cheaper than finding it.
    fn needs(keyword: &str) -> Vec<u16> {
        let mut bits: Vec<(u8, u16)> = match keyword.as_bytes() {
            [_] => vec![(0, ALWAYS_BIT as u16)],
            bytes => bytes
                .windows(2)
                .map(|w| (rarity(w[0]) + rarity(w[1]), pair_bit(w[0], w[1]) as u16))
                .collect(),
        };
        for first in 0..bits.len().min(2) {
            if let Some(rarest) = (first..bits.len()).max_by_key(|&i| bits[i].0) {
                bits.swap(first, rarest);
            }
        }
        bits.into_iter().map(|(_, bit)| bit).collect()
    }

    // Bits are taken modulo PAIR_BITS, which they all are below anyway: the compilers then know
    // every index is in range and check none.
    fn set(&mut self, bit: usize) {
        self.stamps[bit % PAIR_BITS] = self.current;
    }

    fn has(&self, bit: u16) -> bool {
        // Compared as u32: the component's compiler otherwise masks `current` to 8 bits at every
        // comparison.
        u32::from(self.stamps[usize::from(bit) % PAIR_BITS]) == u32::from(self.current)
    }

    fn has_all(&self, bits: &[u16]) -> bool {
        bits.iter().all(|&bit| self.has(bit))
    }
}

/// How rare a byte is in text: English letters by frequency (`e` commonest), anything else rarer
/// than any letter. Only an order for checking bits; any value would be correct.
fn rarity(b: u8) -> u8 {
    const COMMON_FIRST: &[u8; 26] = b"etaoinshrdlcumwfgypbvkjxqz";
    const RARITY: [u8; 256] = {
        let mut table = [30; 256];
        let mut i = 0;
        while i < COMMON_FIRST.len() {
            table[COMMON_FIRST[i] as usize] = i as u8;
            i += 1;
        }
        table
    };
    RARITY[usize::from(b)]
}

/// A pair's bit: a multiplicative hash of the two bytes, top 12 bits. ASCII case does not count:
/// both bytes get the case bit (0x20) first, so a capital and its small letter share bits (as do
/// a few punctuation marks with others: harmless, as a signature only rules keywords out).
fn pair_bit(a: u8, b: u8) -> usize {
    let pair = (u32::from(a) << 8 | u32::from(b)) | 0x2020;
    (pair.wrapping_mul(0x9E37_79B1) >> (32 - PAIR_BITS.trailing_zeros())) as usize
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
/// FNV-1a: a few instructions a byte where std's SipHash costs ~20 (and more in WebAssembly).
/// Flooding is not a concern here: the tables hold only the batch's personas' channels and names,
/// so a message crafted to collide costs at most a comparison with each of them.
#[derive(Default)]
struct Fnv(u64);

impl Hasher for Fnv {
    fn write(&mut self, bytes: &[u8]) {
        let mut h = if self.0 == 0 {
            0xcbf2_9ce4_8422_2325
        } else {
            self.0
        };
        for &b in bytes {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
        self.0 = h;
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

type FnvMap<K, V> = HashMap<K, V, BuildHasherDefault<Fnv>>;

/// A table key that compares eight bytes a turn. The component's libc compares strings a byte a
/// turn (about 190 instructions for a channel name, ten times the native `memcmp`), and a batch
/// looks up the channel of every message.
#[derive(Clone, Copy, Hash, Eq)]
struct Key<'a>(&'a str);

impl PartialEq for Key<'_> {
    fn eq(&self, other: &Key<'_>) -> bool {
        let (a, b) = (self.0.as_bytes(), other.0.as_bytes());
        if a.len() != b.len() {
            return false;
        }
        let ((a8, a1), (b8, b1)) = (a.as_chunks::<8>(), b.as_chunks::<8>());
        a8.iter()
            .zip(b8)
            .all(|(x, y)| u64::from_ne_bytes(*x) == u64::from_ne_bytes(*y))
            && a1.iter().zip(b1).all(|(x, y)| x == y)
    }
}

/// The personas of a batch indexed by what can wake them.
struct Index<'m> {
    /// Channel key → what can wake whom in it.
    by_channel: FnvMap<Key<'m>, Channel>,
    /// Lower-cased name → the personas of that name that wake on mentions, ascending.
    by_name: FnvMap<Key<'m>, Vec<u32>>,
}

/// The subscribers of one channel.
#[derive(Default)]
struct Channel {
    /// The ones with `all_messages`, ascending.
    all_messages: Vec<u32>,
    /// Every keyword of the others, by persona (ascending), then in configured order: one
    /// contiguous array that a message scans once, ruling out most keywords at their first bit.
    probes: Vec<Probe>,
    /// The last persona added (`#ops` and `ops` are one channel).
    last: Option<u32>,
}

#[derive(Clone, Copy)]
struct Probe {
    /// The keyword's first two [`Signature`] bits (its rarest pairs; the one bit twice when it has
    /// one): two rule out ~98% of chat lines where one rules out ~93%.
    bits: [u16; 2],
    persona: u32,
    /// Index into the persona's [`Matcher::keywords`].
    keyword: u32,
}

impl<'m> Index<'m> {
    fn new(matchers: &'m [Matcher]) -> Index<'m> {
        let mut by_channel: FnvMap<Key, Channel> = FnvMap::default();
        let mut by_name: FnvMap<Key, Vec<u32>> = FnvMap::default();
        for (i, m) in matchers.iter().enumerate() {
            let i = i as u32;
            for channel in &m.subscribe {
                let c = by_channel.entry(Key(channel)).or_default();
                if c.last == Some(i) {
                    continue;
                }
                c.last = Some(i);
                if m.all_messages {
                    c.all_messages.push(i);
                } else {
                    c.probes
                        .extend(m.keywords.iter().enumerate().map(|(k, keyword)| Probe {
                            bits: [
                                keyword.bits[0],
                                *keyword.bits.get(1).unwrap_or(&keyword.bits[0]),
                            ],
                            persona: i,
                            keyword: k as u32,
                        }));
                }
            }
            if m.mentions {
                by_name.entry(Key(&m.name)).or_default().push(i);
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
/// `messages` are (channel, text, explicit mentions).
pub fn decide_batch<'a, M, N>(matchers: &[Matcher], messages: M) -> Vec<(u32, u32, Reason)>
where
    M: IntoIterator<Item = (&'a str, &'a str, N)>,
    N: IntoIterator<Item = &'a str>,
{
    let index = Index::new(matchers);
    let mut out = Vec::new();
    let mut mentioned: Vec<u32> = Vec::new();
    let mut message = Prepared::new();
    for (mi, (channel, text, mentions)) in messages.into_iter().enumerate() {
        let mi = mi as u32;
        message.set(text, mentions);
        let start = out.len();
        mentioned.clear();
        for name in message.names() {
            if let Some(list) = index.by_name.get(&Key(name)) {
                mentioned.extend_from_slice(list);
            }
        }
        // A name may be mentioned twice, or two ways (`p` tag and `@name`).
        mentioned.sort_unstable();
        mentioned.dedup();
        out.extend(mentioned.iter().map(|&pi| (mi, pi, Reason::Mentioned)));
        if let Some(c) = index.by_channel.get(&Key(channel_key(channel))) {
            for &pi in &c.all_messages {
                if !mentioned.contains(&pi) {
                    out.push((mi, pi, Reason::AllMessages));
                }
            }
            wake_by_keywords(matchers, &c.probes, &message, &mentioned, mi, &mut out);
        }
        if out.len() - start > 1 {
            out[start..].sort_unstable_by_key(|&(_, pi, _)| pi);
        }
    }
    out
}

/// Step 4 for one message against its channel's probes. The loop that rules keywords out is kept
/// apart from the rare work on a probe that passes, so the component's compiler keeps its few
/// values in registers (with the rest inlined, they spill to the stack on every turn).
#[inline(never)]
fn wake_by_keywords(
    matchers: &[Matcher],
    probes: &[Probe],
    message: &Prepared,
    mentioned: &[u32],
    mi: u32,
    out: &mut Vec<(u32, u32, Reason)>,
) {
    // The persona woken by the last keyword found: its later keywords need no look.
    let mut woken = None;
    let mut from = 0;
    while let Some(at) = first_passing(&message.signature, &probes[from..]) {
        let probe = &probes[from + at];
        from += at + 1;
        woken = probe_passed(matchers, probe, message, mentioned, mi, woken, out);
    }
}

/// Where the first probe whose two bits `signature` has is. A loop with no call in it, four
/// probes a turn: in the component every turn also checks the deadline and reloads what did not
/// fit in registers.
#[inline(never)]
fn first_passing(signature: &Signature, probes: &[Probe]) -> Option<usize> {
    let passes = |p: &Probe| signature.has(p.bits[0]) && signature.has(p.bits[1]);
    let mut blocks = probes.chunks_exact(4);
    let mut start = 0;
    for block in &mut blocks {
        let [a, b, c, d] = [0, 1, 2, 3].map(|i| &block[i]);
        if passes(a) {
            return Some(start);
        }
        if passes(b) {
            return Some(start + 1);
        }
        if passes(c) {
            return Some(start + 2);
        }
        if passes(d) {
            return Some(start + 3);
        }
        start += 4;
    }
    blocks
        .remainder()
        .iter()
        .position(passes)
        .map(|i| start + i)
}

/// A probe whose two bits the message has: the full check, and the wake if the keyword is there.
/// Returns the persona woken last.
#[cold]
#[inline(never)]
fn probe_passed(
    matchers: &[Matcher],
    probe: &Probe,
    message: &Prepared,
    mentioned: &[u32],
    mi: u32,
    woken: Option<u32>,
    out: &mut Vec<(u32, u32, Reason)>,
) -> Option<u32> {
    if woken == Some(probe.persona) {
        return woken;
    }
    let keyword = &matchers[probe.persona as usize].keywords[probe.keyword as usize];
    if message.contains(keyword) && !mentioned.contains(&probe.persona) {
        out.push((mi, probe.persona, Reason::Keyword(keyword.index)));
        return Some(probe.persona);
    }
    woken
}
