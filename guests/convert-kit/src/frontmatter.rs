//! Markdown frontmatter: split, parse (strict YAML first, a lenient key-line scanner second), render.
//!
//! Real agent files are often not YAML: multi-line `description:` values carrying `<example>`
//! blocks, `Context:` lines or unescaped colons make a strict parser fail, though the tools that
//! wrote them load them. The lenient scanner keeps what can be kept and the caller reports that it
//! was used (`ParseMode::Lenient`).

use serde_json::{Map, Value};

/// How the frontmatter was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParseMode {
    /// Strict YAML.
    Strict,
    /// Not YAML: read by the key-line scanner.
    Lenient,
    /// The file had no frontmatter at all.
    Absent,
}

/// A markdown file split into its frontmatter fields (in file order) and its body.
#[derive(Debug, Clone, PartialEq)]
pub struct Frontmatter {
    pub fields: Map<String, Value>,
    pub body: String,
    pub mode: ParseMode,
    /// Why strict parsing failed, when `mode` is `Lenient`.
    pub strict_error: Option<String>,
}

/// Splits `text` into (frontmatter source, body). The opening `---` must be the first line (after
/// an optional BOM) and the closing `---` must be alone on its line; CRLF is accepted.
pub fn split(text: &str) -> Option<(&str, &str)> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let rest = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))?;
    let mut offset = 0;
    for line in rest.split_inclusive('\n') {
        if line.trim_end_matches(['\r', '\n']) == "---" {
            let body = &rest[offset + line.len()..];
            return Some((&rest[..offset], body));
        }
        offset += line.len();
    }
    // An opening delimiter with no closing one: the whole remainder is frontmatter.
    None
}

/// Parses a markdown file with optional frontmatter. Never fails: what cannot be read strictly is
/// read leniently, and a file without frontmatter has empty fields.
pub fn parse(text: &str) -> Frontmatter {
    let Some((source, body)) = split(text) else {
        return Frontmatter {
            fields: Map::new(),
            body: text.strip_prefix('\u{feff}').unwrap_or(text).to_string(),
            mode: ParseMode::Absent,
            strict_error: None,
        };
    };
    let source = source.replace("\r\n", "\n");
    let body = body.replace("\r\n", "\n");
    match strict(&source) {
        Ok(fields) => Frontmatter {
            fields,
            body,
            mode: ParseMode::Strict,
            strict_error: None,
        },
        Err(error) => Frontmatter {
            fields: lenient(&source),
            body,
            mode: ParseMode::Lenient,
            strict_error: Some(error),
        },
    }
}

/// Strict YAML into an ordered JSON map. Empty frontmatter is an empty map; anything but a
/// mapping is an error.
pub fn strict(source: &str) -> Result<Map<String, Value>, String> {
    if source.trim().is_empty() {
        return Ok(Map::new());
    }
    match serde_yaml_ng::from_str::<Value>(source) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(Value::Null) => Ok(Map::new()),
        Ok(_) => Err("frontmatter is not a mapping".to_string()),
        Err(e) => Err(e.to_string()),
    }
}

fn key_of(line: &str) -> Option<(&str, &str)> {
    let (key, rest) = line.split_once(':')?;
    let valid = !key.is_empty()
        && key
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    (valid && (rest.is_empty() || rest.starts_with([' ', '\t']))).then_some((key, rest.trim()))
}

/// The key-line scanner: a line starting at column 0 with `key:` opens a field; every other line
/// continues the previous one. Each field is tried as YAML on its own; one that still fails keeps
/// its raw text as a string.
pub fn lenient(source: &str) -> Map<String, Value> {
    let mut groups: Vec<(String, Vec<&str>)> = Vec::new();
    // Lines inside an unclosed `<example>` block (`user: ...`, `assistant: ...`) belong to the
    // field that opened it, even when they look like keys.
    let mut open_examples = 0i32;
    for line in source.lines() {
        match key_of(line) {
            Some((key, _)) if !line.starts_with([' ', '\t']) && open_examples <= 0 => {
                groups.push((key.to_string(), vec![line]));
                open_examples = 0;
            }
            _ => {
                if let Some((_, lines)) = groups.last_mut() {
                    lines.push(line);
                }
            }
        }
        open_examples += line.matches("<example>").count() as i32;
        open_examples -= line.matches("</example>").count() as i32;
    }
    let mut fields = Map::new();
    for (key, lines) in groups {
        let text = lines.join("\n");
        let value = match strict(&text) {
            Ok(mut map) if map.len() == 1 => map.remove(&key).unwrap_or(Value::Null),
            _ => Value::String(raw_value(&lines)),
        };
        fields.insert(key, value);
    }
    fields
}

/// A field's text as written: the rest of the key line and its continuation lines, with one
/// level of surrounding quotes removed.
fn raw_value(lines: &[&str]) -> String {
    let first = key_of(lines[0]).map(|(_, rest)| rest).unwrap_or_default();
    let mut parts = vec![first.to_string()];
    parts.extend(lines[1..].iter().map(|l| l.trim().to_string()));
    let joined = parts.join("\n").trim().to_string();
    for quote in ['"', '\''] {
        if joined.len() >= 2 && joined.starts_with(quote) && joined.ends_with(quote) {
            return joined[1..joined.len() - 1].to_string();
        }
    }
    joined
}

/// Renders fields and body as a markdown file with YAML frontmatter.
pub fn render(fields: &Map<String, Value>, body: &str) -> String {
    let mut out = String::from("---\n");
    if !fields.is_empty() {
        // Serialising a JSON map as YAML cannot fail: keys are strings, values are plain data.
        out.push_str(&serde_yaml_ng::to_string(fields).unwrap_or_default());
    }
    out.push_str("---\n");
    if !body.is_empty() {
        // The body as it was: a blank line after the closing `---` only when it had one.
        out.push_str(body);
        if !body.ends_with('\n') {
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strict_frontmatter_keeps_key_order_and_body() {
        let fm = parse("---\nname: a\ndescription: b\nz: [1, 2]\n---\n\nHello\n");
        assert_eq!(fm.mode, ParseMode::Strict);
        let keys: Vec<_> = fm.fields.keys().cloned().collect();
        assert_eq!(keys, ["name", "description", "z"]);
        assert_eq!(fm.body, "\nHello\n");
    }

    #[test]
    fn example_blocks_fall_back_to_the_lenient_scanner() {
        let text = "---\nname: reviewer\ndescription: Use this agent when: reviewing. Examples: <example>Context: x\nuser: \"do it\"\n</example>\nmodel: sonnet\ntools: [Read, Grep]\n---\nBody";
        let fm = parse(text);
        assert_eq!(fm.mode, ParseMode::Lenient);
        assert!(fm.strict_error.is_some());
        assert_eq!(fm.fields["name"], "reviewer");
        assert_eq!(fm.fields["model"], "sonnet");
        assert_eq!(fm.fields["tools"], serde_json::json!(["Read", "Grep"]));
        let description = fm.fields["description"].as_str().unwrap();
        assert!(description.starts_with("Use this agent when: reviewing."));
        assert!(description.contains("</example>"));
        assert_eq!(fm.body, "Body");
    }

    #[test]
    fn crlf_bom_and_missing_frontmatter() {
        let fm = parse("\u{feff}---\r\nname: a\r\n---\r\nBody\r\n");
        assert_eq!(fm.fields["name"], "a");
        assert_eq!(fm.body, "Body\n");
        let none = parse("# Just markdown\n");
        assert_eq!(none.mode, ParseMode::Absent);
        assert!(none.fields.is_empty());
        assert!(parse("---junk\nname: a\n---\n").fields.is_empty());
    }

    #[test]
    fn render_round_trips() {
        let fm = parse("---\nname: a\ndescription: 'x: y'\nlist:\n  - 1\n---\n\nBody\n");
        let again = parse(&render(&fm.fields, &fm.body));
        assert_eq!(again.fields, fm.fields);
        assert_eq!(again.body, fm.body);
    }
}
