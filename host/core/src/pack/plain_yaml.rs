//! A fast reader for the plain subset of YAML that frontmatter is written in: block mappings of
//! identifier keys, block sequences, quoted and simple plain scalars, one-line flow lists, `{}`.
//!
//! Why: parsing YAML through libyaml (serde_yaml_ng) and converting its value tree to JSON was most
//! of the cost of validating a pack. This reader does the common case in one pass straight into
//! `serde_json` values. It is not a second YAML implementation: the moment it meets anything outside
//! the subset (anchors, tags, block scalars, multi-line or ambiguous plain scalars, duplicate keys,
//! numbers other than plain decimals, tabs, comments after a value) it returns `None` and the caller
//! uses libyaml, which stays the authority on meaning and on every error message. Whenever it does
//! return a value, that value equals libyaml's (checked by a differential test over the corpus and
//! by the `plain_yaml` fuzz target).

use serde_json::{Map, Number, Value};

/// Parses `yaml` when it lies inside the subset; `None` means "use the full parser".
pub fn parse(yaml: &str) -> Option<Map<String, Value>> {
    let mut lines = Vec::new();
    for raw in memchr::memchr_iter(b'\n', yaml.as_bytes())
        .chain([yaml.len()])
        .scan(0, |start, end| {
            let line = &yaml[*start..end];
            *start = end + 1;
            Some(line)
        })
    {
        let raw = raw.strip_suffix('\r').unwrap_or(raw);
        // Tabs, stray carriage returns and characters YAML does not allow in a stream (controls,
        // C1 controls, non-characters, an inner BOM) are libyaml's to judge.
        let unusual = |c: char| {
            c < ' '
                || ('\u{7f}'..='\u{9f}').contains(&c)
                || matches!(c, '\u{feff}' | '\u{fffe}' | '\u{ffff}')
        };
        // Most lines are plain printable ASCII: tested a byte at a time, without decoding.
        let printable_ascii = raw.bytes().all(|b| (b' '..0x7f).contains(&b));
        if !printable_ascii && raw.chars().any(unusual) {
            return None;
        }
        let text = raw.trim_start_matches(' ');
        if text.is_empty() || text.starts_with('#') {
            continue;
        }
        let text = text.trim_end_matches(' ');
        lines.push(Line {
            indent: raw.len() - raw.trim_start_matches(' ').len(),
            text,
        });
    }
    let Some(first) = lines.first() else {
        return Some(Map::new());
    };
    if first.indent != 0 || first.text.starts_with("---") || first.text.starts_with('%') {
        return None;
    }
    let mut reader = Reader { lines, pos: 0 };
    let map = reader.mapping(0)?;
    (reader.pos == reader.lines.len()).then_some(map)
}

#[derive(Clone, Copy)]
struct Line<'a> {
    indent: usize,
    text: &'a str,
}

struct Reader<'a> {
    lines: Vec<Line<'a>>,
    pos: usize,
}

impl<'a> Reader<'a> {
    fn peek(&self) -> Option<Line<'a>> {
        self.lines.get(self.pos).copied()
    }

    /// A value on its own line must not be followed by deeper lines: that would be a multi-line
    /// plain scalar or a syntax error, both libyaml's business.
    fn no_continuation(&self, indent: usize) -> Option<()> {
        match self.peek() {
            Some(next) if next.indent > indent => None,
            _ => Some(()),
        }
    }

    fn mapping(&mut self, indent: usize) -> Option<Map<String, Value>> {
        let mut map = Map::new();
        while let Some(line) = self.peek() {
            if line.indent < indent {
                break;
            }
            if line.indent > indent {
                return None;
            }
            let (key, rest) = split_key(line.text)?;
            if is_special_word(key) {
                return None;
            }
            // One hash per key: the vacant slot is filled once the value is read.
            let serde_json::map::Entry::Vacant(slot) = map.entry(key) else {
                return None;
            };
            self.pos += 1;
            let value = if rest.is_empty() {
                self.nested(indent)?
            } else {
                let value = inline_value(rest)?;
                self.no_continuation(indent)?;
                value
            };
            slot.insert(value);
        }
        Some(map)
    }

    /// The value of `key:` with nothing after the colon: a deeper block, or null.
    fn nested(&mut self, parent: usize) -> Option<Value> {
        match self.peek() {
            Some(next) if next.indent > parent => {
                if is_item(next.text) {
                    self.sequence(next.indent)
                } else {
                    self.mapping(next.indent).map(Value::Object)
                }
            }
            // A sequence at the key's own indentation is valid YAML, but rare: leave it to libyaml.
            Some(next) if next.indent == parent && is_item(next.text) => None,
            _ => Some(Value::Null),
        }
    }

    fn sequence(&mut self, indent: usize) -> Option<Value> {
        let mut items = Vec::new();
        while let Some(line) = self.peek() {
            if line.indent < indent {
                break;
            }
            if line.indent > indent {
                return None;
            }
            let rest = line.text.strip_prefix("- ")?.trim_start_matches(' ');
            if rest.is_empty() {
                return None;
            }
            let item_indent = indent + (line.text.len() - rest.len());
            if split_key(rest).is_some() {
                // `- key: value`: a mapping whose first key sits after the dash.
                self.lines[self.pos] = Line {
                    indent: item_indent,
                    text: rest,
                };
                items.push(Value::Object(self.mapping(item_indent)?));
            } else {
                self.pos += 1;
                items.push(inline_value(rest)?);
                self.no_continuation(indent)?;
            }
        }
        Some(Value::Array(items))
    }
}

fn is_item(text: &str) -> bool {
    text == "-" || text.starts_with("- ")
}

/// Keys a YAML parser may read as a boolean or null rather than a string (libyaml makes `FALSE:`
/// the key `false`; found by the `plain_yaml` fuzz target): left to libyaml, as such values are.
fn is_special_word(word: &str) -> bool {
    SPECIAL_WORDS.iter().any(|w| w.eq_ignore_ascii_case(word))
}

const SPECIAL_WORDS: [&str; 9] = ["y", "n", "yes", "no", "on", "off", "null", "true", "false"];

/// `key: rest` with an identifier key; `rest` is empty for `key:`.
fn split_key(text: &str) -> Option<(&str, &str)> {
    let colon = memchr::memchr(b':', text.as_bytes())?;
    let (key, after) = (&text[..colon], &text[colon + 1..]);
    let mut chars = key.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    if !first_ok || !chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
        return None;
    }
    if after.is_empty() {
        return Some((key, ""));
    }
    after
        .strip_prefix(' ')
        .map(|rest| (key, rest.trim_start_matches(' ')))
}

/// A value written on the key's (or dash's) line.
fn inline_value(text: &str) -> Option<Value> {
    match text.as_bytes()[0] {
        b'"' => {
            let (s, rest) = double_quoted(text)?;
            rest.is_empty().then_some(Value::String(s))
        }
        b'\'' => {
            let (s, rest) = single_quoted(text)?;
            rest.is_empty().then_some(Value::String(s))
        }
        b'[' => flow_list(text),
        b'{' => {
            (text.len() >= 2 && text.ends_with('}') && text[1..text.len() - 1].trim().is_empty())
                .then(|| Value::Object(Map::new()))
        }
        _ => plain(text, false),
    }
}

/// `"..."` with the common escapes; returns the string and what follows the closing quote.
fn double_quoted(text: &str) -> Option<(String, &str)> {
    // Most quoted values have no escapes: the text up to the closing quote, copied whole.
    let body = &text[1..];
    if let Some(end) = memchr::memchr2(b'"', b'\\', body.as_bytes())
        && body.as_bytes()[end] == b'"'
    {
        return Some((body[..end].to_string(), &body[end + 1..]));
    }
    let mut out = String::new();
    let mut chars = text[1..].char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Some((out, &text[1 + i + 1..])),
            '\\' => {
                let (_, e) = chars.next()?;
                out.push(match e {
                    '"' => '"',
                    '\\' => '\\',
                    'n' => '\n',
                    't' => '\t',
                    'r' => '\r',
                    'u' => {
                        let mut code = 0u32;
                        for _ in 0..4 {
                            code = code * 16 + chars.next()?.1.to_digit(16)?;
                        }
                        char::from_u32(code)?
                    }
                    _ => return None,
                });
            }
            _ => out.push(c),
        }
    }
    None
}

/// `'...'` with `''` for a quote; returns the string and what follows the closing quote.
fn single_quoted(text: &str) -> Option<(String, &str)> {
    let mut out = String::new();
    let body = &text[1..];
    let mut i = 0;
    while let Some(j) = body[i..].find('\'') {
        out.push_str(&body[i..i + j]);
        if body[i + j + 1..].starts_with('\'') {
            out.push('\'');
            i += j + 2;
        } else {
            return Some((out, &body[i + j + 1..]));
        }
    }
    None
}

/// `[a, "b", 'c']` on one line, scalars only.
fn flow_list(text: &str) -> Option<Value> {
    let inner = text.strip_prefix('[')?.strip_suffix(']')?.trim_matches(' ');
    let mut items = Vec::new();
    let mut rest = inner;
    while !rest.is_empty() {
        let (item, after) = match rest.as_bytes()[0] {
            b'"' => double_quoted(rest).map(|(s, r)| (Value::String(s), r))?,
            b'\'' => single_quoted(rest).map(|(s, r)| (Value::String(s), r))?,
            _ => {
                let end = rest.find(',').unwrap_or(rest.len());
                (
                    plain(rest[..end].trim_end_matches(' '), true)?,
                    &rest[end..],
                )
            }
        };
        items.push(item);
        let after = after.trim_start_matches(' ');
        rest = match after.strip_prefix(',') {
            // `[a, ]` and `[a,,b]` are libyaml's to judge.
            Some(next) => {
                let next = next.trim_start_matches(' ');
                if next.is_empty() || next.starts_with(',') {
                    return None;
                }
                next
            }
            None if after.is_empty() => after,
            None => return None,
        };
    }
    Some(Value::Array(items))
}

/// A plain (unquoted) scalar, resolved as YAML's core schema does for the forms accepted here.
fn plain(text: &str, in_flow: bool) -> Option<Value> {
    let first = *text.as_bytes().first()?;
    if b"-?:,[]{}#&*!|>'\"%@`+".contains(&first) && !(first == b'-' && text.len() > 1) {
        return None;
    }
    // `.inf`, `.NaN`, `.5` are numbers to YAML; `./path` is a string.
    if first == b'.' && text[1..].bytes().all(|b| b.is_ascii_alphanumeric()) {
        return None;
    }
    // `: ` and ` #` in one pass: a mapping or a comment inside the scalar.
    let pair = |w: &[u8]| matches!(w, b": " | b" #");
    if text.as_bytes().windows(2).any(pair) || text.ends_with(':') {
        return None;
    }
    if in_flow && text.contains(['[', ']', '{', '}', ',', ':', '#', '"', '\'']) {
        return None;
    }
    match text {
        "~" | "null" | "Null" | "NULL" => return Some(Value::Null),
        "true" | "True" | "TRUE" => return Some(Value::Bool(true)),
        "false" | "False" | "FALSE" => return Some(Value::Bool(false)),
        _ => {}
    }
    if first == b'-' || first.is_ascii_digit() {
        return number(text);
    }
    // YAML 1.1 booleans and other spellings some parsers resolve: never guess.
    if is_special_word(text) {
        return None;
    }
    Some(Value::String(text.to_string()))
}

/// `-?[0-9]+` (no leading zeros) or `-?[0-9]+.[0-9]+`; anything else that starts like a number is
/// left to libyaml (`1.0.3`, `1e5`, `0x1f`, `007`).
fn number(text: &str) -> Option<Value> {
    let digits = text.strip_prefix('-').unwrap_or(text);
    let (int, frac) = match digits.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (digits, None),
    };
    let all_digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !all_digits(int) || (int.len() > 1 && int.starts_with('0')) || int.len() > 18 {
        return None;
    }
    match frac {
        None if text.starts_with('-') => {
            let n: i64 = text.parse().ok()?;
            (n != 0).then(|| Value::Number(n.into()))
        }
        None => Some(Value::Number(text.parse::<u64>().ok()?.into())),
        Some(f) if all_digits(f) && f.len() <= 17 => {
            Number::from_f64(text.parse().ok()?).map(Value::Number)
        }
        Some(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What libyaml makes of `yaml`, converted the way the persona parser converts it.
    fn full(yaml: &str) -> Option<Map<String, Value>> {
        let v: serde_yaml_ng::Value = serde_yaml_ng::from_str(yaml).ok()?;
        match serde_json::to_value(&v).ok()? {
            Value::Object(m) => Some(m),
            Value::Null => Some(Map::new()),
            _ => None,
        }
    }

    fn agrees(yaml: &str) -> bool {
        match parse(yaml) {
            Some(fast) => {
                assert_eq!(Some(&fast), full(yaml).as_ref(), "differs on:\n{yaml}");
                true
            }
            None => false,
        }
    }

    #[test]
    fn typical_frontmatter_is_read_fast_and_identically() {
        let yaml = "name: pip\ndisplay_name: \"Pip 🌱\"\ndescription: Orchestrates reviews\nmodel: \"anthropic:claude-4-opus\"\ntemperature: 0.2\nmax_context_tokens: 128000\nsubscribe:\n  - \"#security-reviews\"\n  - general\ntriggers:\n  mentions: true\n  keywords: [\"triage\", review request, 'it''s']\ntriggers2: {}\nlist: []\nnothing:\nneg: -3\nmcp_servers:\n  - name: github\n    command: gh\n    args: [stdio]\n    env:\n      T: \"${GH}\"\n  - name: other\n    url: http://x/y\n# a comment\nhooks:\n  on_start: ./hooks/start.wasm\n";
        assert!(agrees(yaml));
        assert!(agrees(""));
        assert!(agrees("# only a comment\n"));
        assert!(agrees("a: 1\r\nb: x\r\n"));
        // Quoted values with and without escapes, in a mapping and in a flow list.
        assert!(agrees(
            "a: \"say \\\"hi\\\" \\u00e9 \\\\ end\"\nb: \"plain ok\"\nc: [\"x\\ty\", \"z\"]\n"
        ));
    }

    #[test]
    fn big_mappings_are_read_and_their_repeated_keys_found() {
        let many: String = (0..2_000).map(|i| format!("k{i}: {i}\n")).collect();
        let map = parse(&many).expect("a big plain mapping stays on the fast path");
        assert_eq!(map.len(), 2_000);
        assert_eq!(map["k1999"], 1999);
        assert_eq!(
            map.keys().next().map(String::as_str),
            Some("k0"),
            "order kept"
        );
        // A repeat after few and after many keys.
        for n in [10, 31, 32, 2_000] {
            let before: String = (0..n).map(|i| format!("k{i}: {i}\n")).collect();
            let repeated = format!("{before}k{}: again\n", n / 2);
            assert!(
                parse(&repeated).is_none(),
                "a repeat after {n} keys must defer"
            );
        }
    }

    #[test]
    fn anything_outside_the_subset_goes_to_libyaml() {
        for yaml in [
            "a: &x 1\nb: *x\n",
            "a: !tag x\n",
            "a: |\n  block\n",
            "a: >\n  folded\n",
            "a: plain\n  continued\n",
            "a: 1\na: 2\n",
            "a:\n  b: 1\n  c: 2\n  b: 3\n",
            "a: yes\n",
            "a: .nan\n",
            "a: 1e5\n",
            "a: 0x1f\n",
            "a: 007\n",
            "a: 1.0.3\n",
            "a: x # comment\n",
            "a:\n- indentless\n",
            "\"quoted key\": 1\n",
            "a: {b: 1}\n",
            "a: [[1]]\n",
            "a: [1,]\n",
            "a:\tb\n",
            "a: x\u{1}y\n",
            "a: x\u{7f}y\n",
            "a: \"x\u{85}\"\n",
            "a: \u{feff}x\n",
            "- top level list\n",
            "---\na: 1\n",
            "a: \"unterminated\n",
            "a: \"closed\" then more\n",
            "a: \"bad \\q escape\"\n",
            "a: b: c\n",
            "  a: indented\n",
            "FALSE:\n",
            "a:\n  Null: 1\n",
            "a:\n  - yes: 1\n",
        ] {
            assert!(parse(yaml).is_none(), "should defer: {yaml:?}");
        }
    }

    #[test]
    fn agrees_with_libyaml_on_every_corpus_frontmatter_it_accepts() {
        let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        // Where the e2e suite looks too: beside the checkout, else the machine's shared copy.
        let corpus = [
            repo.join("../shared/corpus"),
            std::path::PathBuf::from("/work/shared/corpus"),
        ]
        .into_iter()
        .find(|p| p.is_dir())
        .expect("the shared corpus (../shared/corpus beside the repository)");
        let mut stack = vec![corpus, repo.join("examples")];
        let (mut fast, mut total) = (0, 0);
        while let Some(dir) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let path = entry.path();
                if path.is_dir() {
                    stack.push(path);
                } else if path.extension().is_some_and(|e| e == "md")
                    && let Ok(text) = std::fs::read_to_string(&path)
                    && let Ok(split) = super::super::frontmatter::split(&text)
                {
                    total += 1;
                    if agrees(split.yaml) {
                        fast += 1;
                    }
                }
            }
        }
        eprintln!("{fast} of {total} corpus frontmatters read by the fast path");
        // Most real frontmatter is inside the subset (the rest is still parsed, by libyaml).
        assert!(total > 100 && fast * 2 > total, "{fast} of {total}");
    }
}
