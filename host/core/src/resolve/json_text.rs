//! Fast JSON string escaping for long texts (system prompts) in `apiary pack inspect --json`.
//!
//! serde_json escapes a string by looking up every byte in a table, which was 30 % of the
//! instructions of inspecting a 200-persona pack (each prompt is kilobytes of text). Here the clean
//! runs between bytes that need escaping are found 32 bytes at a time and copied whole. The
//! escapes are serde_json's own (`\"`, `\\`, `\b`, `\f`, `\n`, `\r`, `\t`, other controls as
//! `\u00xx`, everything else verbatim), so the output is byte-for-byte what serde_json writes; the
//! tests compare the two.

use serde::Serializer;
use serde::ser::Serialize as _;
use serde_json::value::RawValue;

/// Shorter strings gain little from the chunked scan and go through serde_json as usual.
const LONG: usize = 256;

/// `serialize_with` for long text fields. A JSON serializer writes the pre-escaped string verbatim
/// (`RawValue`); `serde_json::to_value` parses it back. Only for types serialized as JSON: other
/// formats would see serde_json's raw-value marker struct.
pub fn serialize<S: Serializer>(text: &str, serializer: S) -> Result<S::Ok, S::Error> {
    if text.len() < LONG {
        return serializer.serialize_str(text);
    }
    // SAFETY: `quoted` returns one JSON string and nothing around it: a quote, the text's own
    // characters with every byte JSON forbids in a string (controls, `"`, `\`) replaced by an
    // escape, and a closing quote (tests compare it with serde_json byte for byte). Debug builds,
    // and so every test through the binary, re-parse it in `from_string_unchecked`; checking in
    // release too would cost as much as escaping did.
    let raw = unsafe { RawValue::from_string_unchecked(quoted(text)) };
    raw.serialize(serializer)
}

/// `text` as a quoted, escaped JSON string.
pub fn quoted(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len() + text.len() / 16 + 2);
    out.push('"');
    let mut start = 0;
    loop {
        let at = next_escape(bytes, start);
        // `at` is the index of an ASCII byte (or the end), so both slices fall on char boundaries.
        out.push_str(&text[start..at]);
        let Some(&byte) = bytes.get(at) else { break };
        push_escape(&mut out, byte);
        start = at + 1;
    }
    out.push('"');
    out
}

fn needs_escape(byte: u8) -> bool {
    // `|` rather than `||`: no branches, so a chunk's test vectorises.
    (byte < 0x20) | (byte == b'"') | (byte == b'\\')
}

/// The index of the first byte at or after `from` that needs escaping, or `bytes.len()`.
fn next_escape(bytes: &[u8], mut from: usize) -> usize {
    // A whole chunk is tested without branching per byte, which the compiler turns into a few
    // vector compares; the chunk holding an escape is then searched eight bytes at a time. Prompt
    // lines are ~50-70 bytes, so finding the line end inside its chunk costs as much as the scan.
    const CHUNK: usize = 16;
    while let Some(chunk) = bytes.get(from..from + CHUNK) {
        if chunk.iter().fold(false, |any, &b| any | needs_escape(b)) {
            let (low, high) = chunk.split_at(8);
            let low = escapes_in(low);
            return match low {
                0 => from + 8 + escapes_in(high).trailing_zeros() as usize / 8,
                _ => from + low.trailing_zeros() as usize / 8,
            };
        }
        from += CHUNK;
    }
    bytes[from..]
        .iter()
        .position(|&b| needs_escape(b))
        .map_or(bytes.len(), |i| from + i)
}

/// Eight bytes read as one little-endian word: the high bit of each byte lane is set in the result
/// where the byte needs escaping, or in a lane above one that does (a borrow of the subtraction can
/// carry upwards), so the lowest set lane is exact. Zero when no byte needs escaping.
fn escapes_in(eight: &[u8]) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let mut word = [0u8; 8];
    word.copy_from_slice(eight);
    let x = u64::from_le_bytes(word);
    // Lanes below `n`, for `n` <= 0x80: the classic "has less than" test; a lane equal to `c` is
    // a lane of `x ^ c` below 1.
    let below = |v: u64, n: u64| v.wrapping_sub(ONES * n) & !v & HIGH;
    below(x, 0x20) | below(x ^ (ONES * 0x22), 1) | below(x ^ (ONES * 0x5c), 1)
}

fn push_escape(out: &mut String, byte: u8) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    match byte {
        b'"' => out.push_str("\\\""),
        b'\\' => out.push_str("\\\\"),
        b'\n' => out.push_str("\\n"),
        b'\r' => out.push_str("\\r"),
        b'\t' => out.push_str("\\t"),
        0x08 => out.push_str("\\b"),
        0x0c => out.push_str("\\f"),
        _ => {
            out.push_str("\\u00");
            out.push(char::from(HEX[usize::from(byte >> 4)]));
            out.push(char::from(HEX[usize::from(byte & 0xf)]));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Serialize)]
    struct Fast<'a> {
        #[serde(serialize_with = "serialize")]
        text: &'a str,
    }

    #[derive(serde::Serialize)]
    struct Plain<'a> {
        text: &'a str,
    }

    fn assert_same(text: &str) {
        assert_eq!(
            quoted(text),
            serde_json::to_string(text).unwrap(),
            "escaping {text:?}"
        );
        // Through the field attribute, compact and pretty, for short and long texts alike.
        let (fast, plain) = (Fast { text }, Plain { text });
        assert_eq!(
            serde_json::to_string(&fast).unwrap(),
            serde_json::to_string(&plain).unwrap()
        );
        assert_eq!(
            serde_json::to_string_pretty(&fast).unwrap(),
            serde_json::to_string_pretty(&plain).unwrap()
        );
        assert_eq!(
            serde_json::to_value(&fast).unwrap(),
            serde_json::to_value(&plain).unwrap()
        );
    }

    #[test]
    fn hostile_strings_match_serde_json() {
        let every_ascii: String = (0u8..=0x7f).map(char::from).collect();
        let cases = [
            "",
            "plain",
            "\"",
            "\\",
            "\"\\\"\\",
            "ends with a quote\"",
            "\u{0}\u{1}\u{1f}\u{7f}",
            "\u{8}\u{c}\n\r\t\u{b}",
            "line\u{2028}sep\u{2029}para",
            "</script><!-- -->",
            "émoji 🐝 and ∑ and \u{feff} BOM",
            "\u{10ffff}\u{fffd}",
            &every_ascii,
        ];
        for case in cases {
            assert_same(case);
            // Each case at every offset around the 32-byte chunks, inside long text.
            for pad in 0..65 {
                let long = format!("{}{case}{}", "a".repeat(LONG + pad), "é".repeat(pad));
                assert_same(&long);
            }
        }
    }

    #[test]
    fn every_byte_value_at_every_chunk_lane() {
        for c in (0u32..0x80).chain([0xe9, 0x2028, 0x1f41d]) {
            let c = char::from_u32(c).unwrap();
            for lane in 0..32 {
                let mut text = "x".repeat(LONG + lane);
                text.push(c);
                text.push_str(&"y".repeat(33));
                assert_same(&text);
            }
        }
    }

    #[test]
    fn pseudo_random_texts_match_serde_json() {
        // A fixed xorshift sequence: reproducible, and dense in the bytes that need escaping.
        let alphabet: Vec<char> = "ab \"\\\n\t\r\u{0}\u{1f}\u{7f}é🐝\u{2028}"
            .chars()
            .collect();
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        for len in [0, 1, 31, 32, 33, 255, 256, 257, 300, 1000] {
            for _ in 0..50 {
                let text: String = (0..len)
                    .map(|_| {
                        state ^= state << 13;
                        state ^= state >> 7;
                        state ^= state << 17;
                        // Mostly plain letters, so clean runs span whole chunks.
                        if state.is_multiple_of(4) {
                            alphabet[(state >> 8) as usize % alphabet.len()]
                        } else {
                            'q'
                        }
                    })
                    .collect();
                assert_same(&text);
            }
        }
    }
}
