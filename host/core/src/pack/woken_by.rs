//! `x-woken-by` (an apiary extension of persona frontmatter, and `woken_by` in the operator's
//! overrides): which personas of the harness may wake this one with their messages, so a pack
//! decides who hands work to whom.
//!
//! ```yaml
//! x-woken-by: [writer, com.example.ops/*]
//! ```
//!
//! Each entry is a persona of the same pack (`writer`), one of another pack (`pack.id/name`),
//! every persona of a pack (`pack.id/*`) or every persona at all (`*`); `[]` lets none. Absent,
//! the pack's own personas may wake it and no other pack's may. People's messages are not
//! concerned: they wake personas by their triggers as always.

use serde_json::Value;

use super::source::Fields;
use crate::diag::{Diagnostic, Report};

/// An entry longer than this cannot be a name.
const ENTRY_MAX: usize = 200;

/// Reads the list at `key`; every entry that cannot name personas is an error at its place.
pub fn read(fields: &Fields<'_>, key: &str, report: &mut Report) -> Option<Vec<String>> {
    let value = fields.get(key)?;
    let at = [&fields.prefix[..], &[key]].concat();
    let Value::Array(items) = value else {
        let d = Diagnostic::error("persona.woken-by", format!("`{key}` must be a list"))
            .help("e.g. [writer, com.example.other-pack/*]; [] lets no persona wake it");
        report.push(fields.src.diag(d, &at));
        return None;
    };
    let mut out = Vec::new();
    for item in items {
        match item.as_str().map(str::trim) {
            Some(entry) if is_entry(entry) => out.push(entry.to_string()),
            _ => {
                let d = Diagnostic::error(
                    "persona.woken-by",
                    format!("`{key}` entry {item} names no persona"),
                )
                .help("an entry is `name`, `pack.id/name`, `pack.id/*` or `*`");
                report.push(fields.src.diag(d, &at));
            }
        }
    }
    Some(out)
}

fn is_entry(s: &str) -> bool {
    let word = |w: &str| {
        w.starts_with(|c: char| c.is_ascii_alphanumeric())
            && w.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    };
    if s == "*" {
        return true;
    }
    if s.len() > ENTRY_MAX {
        return false;
    }
    match s.split_once('/') {
        Some((pack, name)) => word(pack) && (name == "*" || word(name)),
        None => word(s),
    }
}

/// Whether a persona's message (`from_pack`/`from_name`) may wake a persona of `own_pack` whose
/// rule is `rule` (`None`: its own pack's personas only).
pub fn admits(rule: Option<&[String]>, own_pack: &str, from_pack: &str, from_name: &str) -> bool {
    let Some(rule) = rule else {
        return from_pack == own_pack;
    };
    rule.iter().any(|entry| match entry.split_once('/') {
        _ if entry == "*" => true,
        Some((pack, name)) => pack == from_pack && (name == "*" || name == from_name),
        None => own_pack == from_pack && entry == from_name,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_is_the_own_pack_and_a_rule_names_exactly_whom_it_lets() {
        assert!(admits(None, "p", "p", "writer"));
        assert!(!admits(None, "p", "q", "writer"));
        let rule: Vec<String> = ["writer", "q/*", "r/ops"].map(String::from).into();
        assert!(admits(Some(&rule), "p", "p", "writer"));
        assert!(!admits(Some(&rule), "p", "p", "editor"));
        assert!(admits(Some(&rule), "p", "q", "anyone"));
        assert!(admits(Some(&rule), "p", "r", "ops"));
        assert!(!admits(Some(&rule), "p", "r", "dev"));
        // `writer` is this pack's writer, not another pack's.
        assert!(!admits(Some(&rule), "p", "s", "writer"));
        assert!(!admits(Some(&[]), "p", "p", "writer"));
        assert!(admits(Some(&["*".to_string()]), "p", "z", "x"));
    }

    #[test]
    fn entries_are_names() {
        for ok in ["writer", "com.example.x/*", "com.example.x/ops-1", "*"] {
            assert!(is_entry(ok), "{ok}");
        }
        for bad in ["", "a/b/c", "../x", "a b", "a/", "/b", "**"] {
            assert!(!is_entry(bad), "{bad}");
        }
    }
}
