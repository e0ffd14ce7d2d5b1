//! The last check before a reply leaves: a reply that contains a key of the key store (as hex or
//! `nsec`) or the value of a variable granted to an agent is published with each occurrence
//! replaced, and the harness reports it. Defence in depth: confinement keeps agents from reading
//! those secrets in the first place; a secret transformed (split, encoded) passes this check.

use std::sync::RwLock;

use aho_corasick::{AhoCorasick, MatchKind};
use nostr_sdk::prelude::{SecretKey, ToBech32};

/// Values shorter than this are not looked for: they would match ordinary text.
const SHORTEST: usize = 8;
/// What an occurrence becomes.
pub const MARK: &str = "[redacted by apiary]";
const KEY: &str = "a key of the key store";
const VALUE: &str = "the value of a granted variable";

/// The secrets one harness never publishes.
#[derive(Debug, Default)]
pub struct Redactor {
    state: RwLock<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Keys as hex and `nsec`, matched whatever their case.
    keys: Vec<String>,
    /// Granted values, matched exactly.
    values: Vec<String>,
    /// Both lists as automata, rebuilt when a list grows (one pass over a reply, however many
    /// personas).
    matchers: Option<(AhoCorasick, AhoCorasick)>,
}

impl Redactor {
    /// Adds a key of the key store, in the forms a reply could carry it.
    pub fn add_key(&self, key: &SecretKey) {
        let Ok(nsec) = key.to_bech32();
        let forms = [key.to_secret_hex(), nsec];
        self.update(|s| {
            for form in forms {
                push_new(&mut s.keys, form.to_ascii_lowercase());
            }
        });
    }

    /// Adds the value of a variable granted to an agent.
    pub fn add_value(&self, value: &str) {
        if value.len() >= SHORTEST {
            self.update(|s| push_new(&mut s.values, value.to_string()));
        }
    }

    fn update(&self, change: impl FnOnce(&mut State)) {
        let mut state = self.state.write().unwrap_or_else(|e| e.into_inner());
        change(&mut state);
        state.matchers = None;
    }

    /// `text` with every secret replaced, and what was found (empty: `text` is clean).
    pub fn redact(&self, text: &str) -> (String, Vec<&'static str>) {
        {
            let state = self.state.read().unwrap_or_else(|e| e.into_inner());
            if let Some(m) = &state.matchers {
                return apply(m, text);
            }
        }
        let mut state = self.state.write().unwrap_or_else(|e| e.into_inner());
        let built = (
            automaton(&state.keys, true),
            automaton(&state.values, false),
        );
        let out = apply(&built, text);
        state.matchers = Some(built);
        out
    }
}

fn push_new(list: &mut Vec<String>, item: String) {
    if !list.contains(&item) {
        list.push(item);
    }
}

fn automaton(needles: &[String], fold: bool) -> AhoCorasick {
    AhoCorasick::builder()
        .ascii_case_insensitive(fold)
        .match_kind(MatchKind::LeftmostLongest)
        .build(needles)
        .expect("plain strings always build")
}

fn apply((keys, values): &(AhoCorasick, AhoCorasick), text: &str) -> (String, Vec<&'static str>) {
    let mut found = Vec::new();
    let mut out = text.to_string();
    for (matcher, what) in [(keys, KEY), (values, VALUE)] {
        if matcher.patterns_len() > 0 && matcher.is_match(&out) {
            found.push(what);
            let marks = vec![MARK; matcher.patterns_len()];
            out = matcher.replace_all(&out, &marks);
        }
    }
    (out, found)
}

#[cfg(test)]
mod tests {
    use super::*;
    use nostr_sdk::prelude::Keys;

    #[test]
    fn keys_in_any_case_and_form_and_granted_values_are_replaced() {
        let keys = Keys::generate();
        let r = Redactor::default();
        r.add_key(keys.secret_key());
        r.add_value("ghp_0123456789abcdef");
        r.add_value("short");
        let hex = keys.secret_key().to_secret_hex();
        let nsec = keys.secret_key().to_bech32().unwrap();
        let text = format!(
            "here: {} and {nsec}, token ghp_0123456789abcdef, short stays",
            hex.to_uppercase()
        );
        let (out, found) = r.redact(&text);
        assert!(!out.to_ascii_lowercase().contains(&hex), "{out}");
        assert!(!out.contains(&nsec), "{out}");
        assert!(!out.contains("ghp_0123456789abcdef"), "{out}");
        assert!(out.contains("short stays"), "{out}");
        assert_eq!(out.matches(MARK).count(), 3, "{out}");
        assert_eq!(found.len(), 2);

        let (clean, found) = r.redact("an ordinary reply about pollen");
        assert_eq!(clean, "an ordinary reply about pollen");
        assert!(found.is_empty());
    }
}
