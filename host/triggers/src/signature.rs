//! The keyword prefilter: which byte pairs a text has, so that most keywords are ruled out without
//! a substring search.

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
pub(crate) struct Signature {
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
    pub(crate) fn clear(&mut self) {
        self.current = self.current.wrapping_add(1);
        if self.current == 0 {
            self.stamps.fill(0);
            self.current = 1;
        }
        self.set(ALWAYS_BIT);
    }

    /// Replaces the signature with the one of `text`.
    pub(crate) fn take(&mut self, text: &[u8]) {
        self.clear();
        for w in text.windows(2) {
            self.set(pair_bit(w[0], w[1]));
        }
    }

    /// The bits a text's signature must have to contain `keyword` (non-empty): its pairs, or its
    /// byte; the pairs of the two rarest letter pairs first, as they rule most texts out soonest
    /// (what a batch probes). A repeated pair is checked twice, which is cheaper than finding it.
    pub(crate) fn needs(keyword: &str) -> Vec<u16> {
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
    pub(crate) fn set(&mut self, bit: usize) {
        self.stamps[bit % PAIR_BITS] = self.current;
    }

    pub(crate) fn has(&self, bit: u16) -> bool {
        // Compared as u32: the component's compiler otherwise masks `current` to 8 bits at every
        // comparison.
        u32::from(self.stamps[usize::from(bit) % PAIR_BITS]) == u32::from(self.current)
    }

    pub(crate) fn has_all(&self, bits: &[u16]) -> bool {
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
pub(crate) fn pair_bit(a: u8, b: u8) -> usize {
    let pair = (u32::from(a) << 8 | u32::from(b)) | 0x2020;
    (pair.wrapping_mul(0x9E37_79B1) >> (32 - PAIR_BITS.trailing_zeros())) as usize
}
