//! [`PersonaSet`]: the decisions of [`Matcher::decide`] for many personas and messages, from an
//! index of the personas made once instead of a look at every pair.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use crate::signature::Signature;
use crate::{Matcher, Prepared, Reason, channel_key};

/// FNV-1a: a few instructions a byte where std's SipHash costs ~20 (and more in WebAssembly).
/// Flooding is not a concern here: the tables hold only the set's personas' channels and names,
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

/// Whether two strings are equal, eight bytes a turn. The component's libc compares strings a
/// byte a turn (about 190 instructions for a channel name, ten times the native `memcmp`), and a
/// batch looks up the channel of every message.
fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let ((a8, a1), (b8, b1)) = (a.as_chunks::<8>(), b.as_chunks::<8>());
    a8.iter()
        .zip(b8)
        .all(|(x, y)| u64::from_ne_bytes(*x) == u64::from_ne_bytes(*y))
        && a1.iter().zip(b1).all(|(x, y)| x == y)
}

fn fnv(s: &str) -> u64 {
    let mut h = Fnv::default();
    h.write(s.as_bytes());
    h.finish()
}

/// A map from owned strings, looked up by `&str` with [`same`]: buckets by FNV hash, each holding
/// the (rarely more than one) strings of that hash.
struct StrMap<V> {
    buckets: FnvMap<u64, Vec<(Box<str>, V)>>,
}

impl<V: Default> StrMap<V> {
    fn new() -> StrMap<V> {
        StrMap {
            buckets: FnvMap::default(),
        }
    }

    fn get(&self, key: &str) -> Option<&V> {
        let bucket = self.buckets.get(&fnv(key))?;
        bucket.iter().find(|(k, _)| same(k, key)).map(|(_, v)| v)
    }

    fn entry(&mut self, key: &str) -> &mut V {
        let bucket = self.buckets.entry(fnv(key)).or_default();
        let at = match bucket.iter().position(|(k, _)| same(k, key)) {
            Some(at) => at,
            None => {
                bucket.push((key.into(), V::default()));
                bucket.len() - 1
            }
        };
        &mut bucket[at].1
    }
}

/// The personas of a set indexed by what can wake them.
struct Index {
    /// Channel key → what can wake whom in it.
    by_channel: StrMap<Channel>,
    /// Lower-cased name → the personas of that name that wake on mentions, ascending.
    by_name: StrMap<Vec<u32>>,
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

impl Index {
    fn new(matchers: &[Matcher]) -> Index {
        let mut by_channel: StrMap<Channel> = StrMap::new();
        let mut by_name: StrMap<Vec<u32>> = StrMap::new();
        for (i, m) in matchers.iter().enumerate() {
            let i = i as u32;
            for channel in &m.subscribe {
                let c = by_channel.entry(channel);
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
                for name in m.names() {
                    by_name.entry(name).push(i);
                }
            }
        }
        Index {
            by_channel,
            by_name,
        }
    }
}

/// A set of personas prepared once (their [`Matcher`]s and the index of what can wake whom) for
/// any number of batches of messages: the work of a batch is then only its messages'.
pub struct PersonaSet {
    matchers: Vec<Matcher>,
    index: Index,
    /// Reused from batch to batch.
    message: Prepared,
    mentioned: Vec<u32>,
}

impl PersonaSet {
    pub fn new(matchers: Vec<Matcher>) -> PersonaSet {
        PersonaSet {
            index: Index::new(&matchers),
            matchers,
            message: Prepared::new(),
            mentioned: Vec::new(),
        }
    }

    /// How many personas the set holds.
    pub fn len(&self) -> usize {
        self.matchers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.matchers.is_empty()
    }

    /// Every waking (message index, persona index, reason), ordered by message then persona: the
    /// decisions of [`Matcher::decide`] for every pair. `messages` are (channel, text, explicit
    /// mentions).
    pub fn decide<'a, M, N>(&mut self, messages: M) -> Vec<(u32, u32, Reason)>
    where
        M: IntoIterator<Item = (&'a str, &'a str, N)>,
        N: IntoIterator<Item = &'a str>,
    {
        let mut out = Vec::new();
        for (mi, (channel, text, mentions)) in messages.into_iter().enumerate() {
            self.message.set(text, mentions);
            let personas = Personas {
                matchers: &self.matchers,
                index: &self.index,
            };
            personas.wakes(
                mi as u32,
                channel,
                &self.message,
                &mut self.mentioned,
                &mut out,
            );
        }
        out
    }
}

/// The decisions of [`PersonaSet::decide`] for `matchers`, indexed for this batch only.
pub fn decide_batch<'a, M, N>(matchers: &[Matcher], messages: M) -> Vec<(u32, u32, Reason)>
where
    M: IntoIterator<Item = (&'a str, &'a str, N)>,
    N: IntoIterator<Item = &'a str>,
{
    let index = Index::new(matchers);
    let personas = Personas {
        matchers,
        index: &index,
    };
    let (mut out, mut mentioned, mut message) = (Vec::new(), Vec::new(), Prepared::new());
    for (mi, (channel, text, mentions)) in messages.into_iter().enumerate() {
        message.set(text, mentions);
        personas.wakes(mi as u32, channel, &message, &mut mentioned, &mut out);
    }
    out
}

/// Matchers and their index, as one message is decided against them.
struct Personas<'s> {
    matchers: &'s [Matcher],
    index: &'s Index,
}

impl Personas<'_> {
    /// The wakes of the prepared `message`, number `mi`, posted in `channel`, appended to `out`
    /// (`mentioned` is scratch space).
    fn wakes(
        &self,
        mi: u32,
        channel: &str,
        message: &Prepared,
        mentioned: &mut Vec<u32>,
        out: &mut Vec<(u32, u32, Reason)>,
    ) {
        let start = out.len();
        mentioned.clear();
        for name in message.names() {
            if let Some(list) = self.index.by_name.get(name) {
                mentioned.extend_from_slice(list);
            }
        }
        // A name may be mentioned twice, or two ways (`p` tag and `@name`).
        mentioned.sort_unstable();
        mentioned.dedup();
        out.extend(mentioned.iter().map(|&pi| (mi, pi, Reason::Mentioned)));
        if let Some(c) = self.index.by_channel.get(channel_key(channel)) {
            for &pi in &c.all_messages {
                if !mentioned.contains(&pi) {
                    out.push((mi, pi, Reason::AllMessages));
                }
            }
            wake_by_keywords(self.matchers, &c.probes, message, mentioned, mi, out);
        }
        if out.len() - start > 1 {
            out[start..].sort_unstable_by_key(|&(_, pi, _)| pi);
        }
    }
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
