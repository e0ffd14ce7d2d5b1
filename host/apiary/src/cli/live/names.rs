//! Who wrote a message, for `tail`. A key of the operator's own key store is named for what it
//! signs for (`bee (pack com.x, <16 hex>)`, `operator (...)`): only that key can carry the mark.
//! Any other key is marked unknown and shown whole (its npub), next to the display name from its
//! profile (kind 0), which anyone can claim: a short prefix of a key can be ground in hours.

use std::collections::HashMap;
use std::time::Duration;

use nostr_sdk::prelude::*;

use crate::relay::keys::KeyRole;

/// Longest name shown; a profile is the author's to fill, a line is the reader's.
const MAX_NAME_CHARS: usize = 40;
const FETCH: Duration = Duration::from_secs(3);

/// Hex digits of a key-store key shown (64 bits: not to be ground).
const KNOWN_KEY_HEX: usize = 16;

/// The names learnt so far (`None`: that author has no profile with a name), and the keys of the
/// operator's key store.
#[derive(Default)]
pub struct Names {
    known: HashMap<PublicKey, Option<String>>,
    store: HashMap<PublicKey, KeyRole>,
}

impl Names {
    /// Names that mark the keys of `store`'s roles as the key store's own.
    pub fn with_store(roles: impl IntoIterator<Item = (PublicKey, KeyRole)>) -> Names {
        Names {
            known: HashMap::new(),
            store: roles.into_iter().collect(),
        }
    }

    /// What the key store says `author` is, for `--json`: `{"npub", "key_store"}` where
    /// `key_store` is `null` for a key outside it.
    pub fn signer_json(&self, author: &PublicKey) -> serde_json::Value {
        let role = self.store.get(author).map(|r| match r {
            KeyRole::Operator => serde_json::json!({"role": "operator"}),
            KeyRole::Relay => serde_json::json!({"role": "relay"}),
            KeyRole::Author => serde_json::json!({"role": "author"}),
            KeyRole::Persona { namespace, persona } => {
                serde_json::json!({"role": "persona", "pack": namespace, "persona": persona})
            }
        });
        serde_json::json!({"npub": npub(author), "key_store": role})
    }

    /// Fetches the profiles of the authors not looked up yet (once each).
    pub async fn learn(&mut self, client: &Client, authors: impl IntoIterator<Item = PublicKey>) {
        let mut new: Vec<PublicKey> = authors
            .into_iter()
            .filter(|a| !self.known.contains_key(a))
            .collect();
        new.sort();
        new.dedup();
        if new.is_empty() {
            return;
        }
        let filter = Filter::new().kind(Kind::Metadata).authors(new.clone());
        let mut newest: HashMap<PublicKey, Event> = HashMap::new();
        if let Ok(events) = client.fetch_events(filter, FETCH).await {
            for ev in events.into_iter().filter(|e| e.verify().is_ok()) {
                match newest.get(&ev.pubkey) {
                    Some(seen) if seen.created_at >= ev.created_at => {}
                    _ => {
                        newest.insert(ev.pubkey, ev);
                    }
                }
            }
        }
        for author in new {
            let name = newest.get(&author).and_then(|ev| name_in(&ev.content));
            self.known.insert(author, name);
        }
    }

    /// `bee (pack com.x, <16 hex>)` for a key of the store; else `Name (unknown key <npub>)` or
    /// `unknown key <npub>`.
    pub fn label(&self, author: &PublicKey) -> String {
        if let Some(role) = self.store.get(author) {
            let hex = author.to_hex();
            let short = &hex[..KNOWN_KEY_HEX];
            return match role {
                KeyRole::Operator => format!("operator (you, {short})"),
                KeyRole::Relay => format!("relay (this relay's key, {short})"),
                KeyRole::Author => format!("author (your pack-signing key, {short})"),
                KeyRole::Persona { namespace, persona } => {
                    format!(
                        "{} (pack {}, {short})",
                        super::terminal_safe(persona),
                        super::terminal_safe(namespace)
                    )
                }
            };
        }
        match self.known.get(author) {
            Some(Some(name)) => format!("{name} (unknown key {})", npub(author)),
            _ => format!("unknown key {}", npub(author)),
        }
    }
}

/// The whole key, as people paste it.
fn npub(key: &PublicKey) -> String {
    key.to_bech32().unwrap_or_else(|_| key.to_hex())
}

/// `display_name`, else `name`, of a profile's JSON, made safe for one line of a terminal.
fn name_in(content: &str) -> Option<String> {
    let m = Metadata::from_json(content).ok()?;
    let raw = [m.display_name, m.name]
        .into_iter()
        .flatten()
        .find(|n| !n.trim().is_empty())?;
    let one_line: String = raw
        .chars()
        .map(|c| if c.is_whitespace() { ' ' } else { c })
        .take(MAX_NAME_CHARS)
        .collect();
    Some(super::terminal_safe(one_line.trim()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_store_keys_are_marked_and_others_shown_whole() {
        let bee = Keys::generate().public_key();
        let stranger = Keys::generate().public_key();
        let role = KeyRole::Persona {
            namespace: "com.x".into(),
            persona: "bee".into(),
        };
        let mut names = Names::with_store([(bee, role)]);
        names.known.insert(stranger, Some("bee".into()));
        let hex = bee.to_hex();
        assert_eq!(
            names.label(&bee),
            format!("bee (pack com.x, {})", &hex[..16])
        );
        let npub = stranger.to_bech32().unwrap();
        assert_eq!(names.label(&stranger), format!("bee (unknown key {npub})"));
        assert_eq!(
            names.signer_json(&stranger)["key_store"],
            serde_json::Value::Null
        );
        assert_eq!(names.signer_json(&bee)["key_store"]["persona"], "bee");
    }

    #[test]
    fn a_name_is_one_safe_short_line() {
        assert_eq!(
            name_in(r#"{"name":"bee","display_name":"Bee"}"#).as_deref(),
            Some("Bee")
        );
        assert_eq!(
            name_in(r#"{"name":"bee","display_name":" "}"#).as_deref(),
            Some("bee")
        );
        assert_eq!(
            name_in(r#"{"display_name":"Evil\u001b[2J\nName"}"#).as_deref(),
            Some("Evil\\u{1b}[2J Name")
        );
        let long = format!(r#"{{"name":"{}"}}"#, "x".repeat(500));
        assert_eq!(name_in(&long).unwrap().len(), 40);
        assert_eq!(name_in("not json"), None);
        assert_eq!(name_in("{}"), None);
    }
}
