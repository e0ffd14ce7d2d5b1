//! Running as one of several replicas: which personas this one owns ([`shard`]), one reply per
//! wake across replicas, and a subscription cursor kept across restarts.
//!
//! One reply per wake: every replica holds the same persona keys, so before a turn and again
//! before publishing, a replica asks the relay for a reply by that persona to that event and skips
//! the turn when there is one. A duplicate remains possible only when two replicas both pass the
//! check before either's reply reached the relay: during a rolling update or re-sharding, when
//! two replicas briefly own one persona and both take the same message within one prompt's
//! duration, and when the relay does not answer the check in time (the reply is then published).
//! A reply names every message it answers (the earlier ones of a batch in `e` tags marked
//! `mention`), so the check finds each of them.
//!
//! The cursor: the newest `created_at` routed is written to a file as the subscription's `since`
//! moves; a restarted replica subscribes from there (minus the usual slack) and the relay check
//! skips what was answered, so a message posted while it was down is answered after it comes back.
//! Without a cursor (a new replica), it reads back `replay`.
//!
//! [`shard`]: super::shard

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use nostr_sdk::prelude::*;

use super::shard::Shard;
use crate::relay::{KIND_MESSAGE, Message};

/// How long the relay has to answer the reply check.
const CHECK_TIMEOUT: Duration = Duration::from_secs(3);

/// Settings for one replica among several (the default: a single `apiary up`).
#[derive(Debug, Clone, Default)]
pub struct Cluster {
    /// The personas this replica owns; `None`: all of them.
    pub shard: Option<Shard>,
    /// Ask the relay whether the persona already answered, before a turn and before publishing.
    pub check_replies: bool,
    /// Where the subscription's cursor is kept across restarts.
    pub cursor_file: Option<PathBuf>,
    /// Without a cursor, how far back the subscription starts.
    pub replay: Duration,
    /// Filled with the shared relay connection once it is open (for readiness checks).
    pub connection: Option<Arc<OnceLock<Client>>>,
}

impl Cluster {
    pub fn owns(&self, pack_id: &str, name: &str) -> bool {
        self.shard.is_none_or(|s| s.owns(pack_id, name))
    }

    /// Where the subscription starts: the kept cursor, else `replay` back from now.
    pub fn start(&self) -> Timestamp {
        let now = Timestamp::now();
        let kept = self.cursor_file.as_deref().and_then(read_cursor);
        match kept {
            Some(secs) if secs <= now.as_secs() => Timestamp::from(secs),
            _ => Timestamp::from(now.as_secs().saturating_sub(self.replay.as_secs())),
        }
    }

    /// Keeps `since` as the cursor (written whole: a temporary file, then renamed).
    pub fn keep(&self, since: Timestamp) {
        let Some(path) = &self.cursor_file else {
            return;
        };
        let tmp = path.with_extension("tmp");
        let written = path
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|_| std::fs::write(&tmp, format!("{}\n", since.as_secs())))
            .and_then(|_| std::fs::rename(&tmp, path));
        if let Err(e) = written {
            tracing::warn!("keeping the cursor in {}: {e}", path.display());
        }
    }
}

fn read_cursor(path: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(path).ok()?;
    text.trim().parse().ok()
}

/// A reply by `author` to `trigger` on the relay, if there is one: the reply tags name the trigger
/// in an `e` tag, or in a `q` tag for a thread message answered outside the thread (see
/// `relay::reply_tags`). `None` too when the relay does not answer in time.
pub async fn reply_on_relay(
    client: &Client,
    author: PublicKey,
    trigger: &Message,
) -> Option<EventId> {
    let base = Filter::new()
        .kind(Kind::Custom(KIND_MESSAGE))
        .author(author)
        .limit(1);
    let mut filters = vec![base.clone().event(trigger.id)];
    // Only a message inside a thread can have been answered with a `q` tag.
    if trigger.root.is_some() {
        let q = SingleLetterTag::lowercase(Alphabet::Q);
        filters.push(base.custom_tag(q, trigger.id.to_hex()));
    }
    for filter in filters {
        match client.fetch_events(filter, CHECK_TIMEOUT).await {
            Ok(events) => {
                if let Some(e) = events.first() {
                    return Some(e.id);
                }
            }
            Err(e) => tracing::warn!(event = %trigger.id, "checking the relay for a reply: {e}"),
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cursor_survives_a_restart_and_a_missing_one_replays() {
        let tmp = tempfile::tempdir().unwrap();
        let cluster = Cluster {
            cursor_file: Some(tmp.path().join("state/cursor")),
            replay: Duration::from_secs(600),
            ..Cluster::default()
        };
        let now = Timestamp::now().as_secs();
        let fresh = cluster.start().as_secs();
        assert!(fresh <= now - 600 && fresh >= now - 610, "{fresh} vs {now}");
        cluster.keep(Timestamp::from(now - 42));
        assert_eq!(cluster.start().as_secs(), now - 42);
        // A cursor in the future (a clock gone wrong) is not trusted.
        cluster.keep(Timestamp::from(now + 3600));
        assert!(cluster.start().as_secs() <= now - 600);
        std::fs::write(tmp.path().join("state/cursor"), "garbage").unwrap();
        assert!(cluster.start().as_secs() <= now - 600);
    }

    #[test]
    fn without_a_shard_every_persona_is_owned() {
        assert!(Cluster::default().owns("any", "one"));
        let c = Cluster {
            shard: Some(Shard { index: 0, count: 2 }),
            ..Cluster::default()
        };
        let owned = (0..20).filter(|i| c.owns("p", &format!("n{i}"))).count();
        assert!(owned > 0 && owned < 20);
    }
}
