//! Who wrote a message, for `tail`: the display name from the author's profile (kind 0, which each
//! persona publishes), next to the short key. Anyone can claim any name in a profile, so the key
//! is always shown too.

use std::collections::HashMap;
use std::time::Duration;

use nostr_sdk::prelude::*;

/// Longest name shown; a profile is the author's to fill, a line is the reader's.
const MAX_NAME_CHARS: usize = 40;
const FETCH: Duration = Duration::from_secs(3);

/// The names learnt so far (`None`: that author has no profile with a name).
#[derive(Default)]
pub struct Names {
    known: HashMap<PublicKey, Option<String>>,
}

impl Names {
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

    /// `Name (1a2b3c4d)`, or the short key alone.
    pub fn label(&self, author: &PublicKey) -> String {
        let hex = author.to_hex();
        let short = crate::relay::short(&hex);
        match self.known.get(author) {
            Some(Some(name)) => format!("{name} ({short})"),
            _ => short.to_string(),
        }
    }
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
    use super::name_in;

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
