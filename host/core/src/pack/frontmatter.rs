//! Splitting a markdown file into YAML frontmatter and body, and locating top-level keys in the YAML.
//!
//! Rules: the file opens with a line that is exactly `---`; the frontmatter ends at the next line that
//! is exactly `---` (trailing spaces and `\r` allowed), so `---junk` lines inside block scalars do not
//! close it. A UTF-8 byte-order mark is skipped (the caller warns about it). Offsets are byte offsets
//! into the original text, so diagnostics can point at the right line.

/// Largest frontmatter accepted, in bytes: personas are small; anything bigger is hostile or a mistake.
pub const MAX_FRONTMATTER: usize = 1024 * 1024;

const BOM: &str = "\u{feff}";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Split<'a> {
    pub yaml: &'a str,
    /// Byte offset of `yaml` in the original text.
    pub yaml_offset: usize,
    pub body: &'a str,
    pub body_offset: usize,
    pub had_bom: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SplitError {
    #[error("the file does not start with a `---` line, so it has no YAML frontmatter")]
    NoOpening,
    #[error("the frontmatter opened on line 1 is never closed by a line containing only `---`")]
    NoClosing,
    #[error("the frontmatter is {size} bytes; the limit is {MAX_FRONTMATTER} bytes")]
    TooLarge { size: usize },
}

impl SplitError {
    /// A short machine-readable kind, for `--json` output and tests.
    pub fn kind(&self) -> &'static str {
        match self {
            SplitError::NoOpening => "no-opening",
            SplitError::NoClosing => "no-closing",
            SplitError::TooLarge { .. } => "too-large",
        }
    }
}

pub fn split(text: &str) -> Result<Split<'_>, SplitError> {
    let had_bom = text.starts_with(BOM);
    let start = if had_bom { BOM.len() } else { 0 };
    let rest = &text[start..];
    let first_end = next_newline(rest, 0).map_or(rest.len(), |i| i + 1);
    if !is_delimiter(&rest[..first_end]) {
        return Err(SplitError::NoOpening);
    }
    let yaml_offset = start + first_end;
    let mut pos = yaml_offset;
    while pos < text.len() {
        let line_end = next_newline(text, pos).map_or(text.len(), |i| i + 1);
        if is_delimiter(&text[pos..line_end]) {
            if pos - yaml_offset > MAX_FRONTMATTER {
                return Err(SplitError::TooLarge {
                    size: pos - yaml_offset,
                });
            }
            let mut body_offset = line_end;
            // Blank lines between the closing delimiter and the prompt are layout, not content.
            while let Some(next) = next_newline(text, body_offset) {
                if text[body_offset..next].trim().is_empty() {
                    body_offset = next + 1;
                } else {
                    break;
                }
            }
            return Ok(Split {
                yaml: &text[yaml_offset..pos],
                yaml_offset,
                body: &text[body_offset..],
                body_offset,
                had_bom,
            });
        }
        if pos - yaml_offset > MAX_FRONTMATTER {
            return Err(SplitError::TooLarge {
                size: text.len() - yaml_offset,
            });
        }
        pos = line_end;
    }
    Err(SplitError::NoClosing)
}

/// Byte offset of the first `\n` at or after `from` (memchr: frontmatter lines are short, and the
/// generic `str::find` costs more per call than the search itself).
pub fn next_newline(text: &str, from: usize) -> Option<usize> {
    memchr::memchr(b'\n', &text.as_bytes()[from..]).map(|i| from + i)
}

fn is_delimiter(line: &str) -> bool {
    line.trim_end_matches(['\n', '\r', ' ', '\t']) == "---"
}

/// Deepest `[`/`{` nesting accepted before the YAML parser sees the text. The parser's cost grows with
/// the square of the flow nesting depth (a 200 KB line of `[` takes minutes), and deserialising stops
/// at 128 levels anyway, so nothing a real persona or skill writes comes near this.
pub const MAX_FLOW_DEPTH: usize = 256;

/// The byte offset at which flow-collection nesting passes [`MAX_FLOW_DEPTH`], if it does. Brackets
/// inside quoted or block text count too: erring on that side keeps the check impossible to dodge.
pub fn excessive_nesting(yaml: &str) -> Option<usize> {
    let mut depth = 0usize;
    for (i, b) in yaml.bytes().enumerate() {
        match b {
            b'[' | b'{' => {
                depth += 1;
                if depth > MAX_FLOW_DEPTH {
                    return Some(i);
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    None
}

/// A top-level key of a block mapping and the byte offset of the key in the YAML text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyLocation {
    pub key: String,
    pub offset: usize,
}

/// Finds the top-level keys of a YAML block mapping by scanning unindented lines. This only serves to
/// point diagnostics at a line; the YAML parser remains the authority on what the document means.
pub fn top_level_keys(yaml: &str) -> Vec<KeyLocation> {
    let mut keys = Vec::new();
    let mut offset = 0;
    for line in yaml.split_inclusive('\n') {
        let first = line.chars().next();
        let starts_key = matches!(first, Some(c) if !c.is_whitespace() && !matches!(c, '#' | '-' | '{' | '[' | '}' | ']'));
        if starts_key && let Some(key) = key_of_line(line) {
            keys.push(KeyLocation { key, offset });
        }
        offset += line.len();
    }
    keys
}

fn key_of_line(line: &str) -> Option<String> {
    let line = line.trim_end();
    for quote in ['"', '\''] {
        if let Some(rest) = line.strip_prefix(quote) {
            let end = rest.find(quote)?;
            return rest[end + 1..]
                .trim_start()
                .starts_with(':')
                .then(|| rest[..end].to_string());
        }
    }
    let colon = line
        .find(": ")
        .or_else(|| line.ends_with(':').then(|| line.len() - 1))?;
    Some(line[..colon].trim_end().to_string())
}

/// Where `key` appears as a top-level key: byte offset in the YAML and the key's length.
pub fn locate_key(yaml: &str, key: &str) -> Option<(usize, usize)> {
    top_level_keys(yaml)
        .into_iter()
        .find(|k| k.key == key)
        .map(|k| (k.offset, key.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_frontmatter_and_body() {
        let s = split("---\nname: a\n---\n\nHello\n").unwrap();
        assert_eq!(s.yaml, "name: a\n");
        assert_eq!(s.body, "Hello\n");
        assert_eq!(s.yaml_offset, 4);
    }

    #[test]
    fn junk_after_dashes_does_not_close() {
        let s = split("---\nx: |\n  ---junk\n---\nbody").unwrap();
        assert_eq!(s.yaml, "x: |\n  ---junk\n");
        assert_eq!(s.body, "body");
        assert_eq!(split("---\na: 1\n---junk\n"), Err(SplitError::NoClosing));
    }

    #[test]
    fn crlf_and_bom_are_understood() {
        let s = split("\u{feff}---\r\nname: a\r\n---\r\n\r\nBody\r\n").unwrap();
        assert!(s.had_bom);
        assert_eq!(s.yaml, "name: a\r\n");
        assert_eq!(s.body, "Body\r\n");
    }

    #[test]
    fn missing_delimiters_are_errors() {
        assert_eq!(split("name: a\n"), Err(SplitError::NoOpening));
        assert_eq!(split("---junk\nname: a\n---\n"), Err(SplitError::NoOpening));
        assert_eq!(split("---\nname: a\n"), Err(SplitError::NoClosing));
        assert_eq!(split(""), Err(SplitError::NoOpening));
    }

    #[test]
    fn empty_body_and_empty_frontmatter() {
        let s = split("---\n---\n").unwrap();
        assert_eq!((s.yaml, s.body), ("", ""));
    }

    #[test]
    fn oversized_frontmatter_is_refused_without_scanning_on() {
        let big = format!("---\n{}", "a: b\n".repeat(MAX_FRONTMATTER / 4));
        assert!(matches!(split(&big), Err(SplitError::TooLarge { .. })));
    }

    #[test]
    fn deep_flow_nesting_is_caught_before_parsing() {
        let ok = format!(
            "{}{}",
            "[".repeat(MAX_FLOW_DEPTH),
            "]".repeat(MAX_FLOW_DEPTH)
        );
        assert_eq!(excessive_nesting(&ok), None);
        assert_eq!(excessive_nesting(&ok.repeat(3)), None);
        let deep = "{a: ".repeat(MAX_FLOW_DEPTH + 1);
        assert_eq!(excessive_nesting(&deep), Some(MAX_FLOW_DEPTH * 4));
    }

    #[test]
    fn finds_top_level_keys_only() {
        let yaml = "name: a\n\"quoted\": 1\ntriggers:\n  mentions: true\n# comment: x\n- item\nurl: http://x\n";
        let keys: Vec<_> = top_level_keys(yaml).into_iter().map(|k| k.key).collect();
        assert_eq!(keys, ["name", "quoted", "triggers", "url"]);
        assert_eq!(locate_key(yaml, "triggers"), Some((20, 8)));
    }
}
