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

    /// Where the subscription starts: the kept cursor, else `replay` back from now. A cursor in
    /// the future, or further back than [`CURSOR_HORIZON`] (or `replay`, if longer), is not used
    /// as it is: a rewritten cursor must not make a replica answer very old messages.
    pub fn start(&self) -> Timestamp {
        let now = Timestamp::now().as_secs();
        let fresh = now.saturating_sub(self.replay.as_secs());
        let oldest = now.saturating_sub(CURSOR_HORIZON.max(self.replay).as_secs());
        let kept = self.cursor_file.as_deref().and_then(|p| {
            read_cursor(p)
                .map_err(|e| tracing::warn!("the cursor {} is not used: {e}", p.display()))
                .ok()
                .flatten()
        });
        Timestamp::from(match kept {
            Some(secs) if secs > now => fresh,
            Some(secs) if secs < oldest => {
                tracing::warn!(
                    secs,
                    "the kept cursor is older than the horizon; starting there"
                );
                oldest
            }
            Some(secs) => secs,
            None => fresh,
        })
    }

    /// Keeps `since` as the cursor: written whole to a new private file (never through a link
    /// planted at its name), then renamed over the old one.
    pub fn keep(&self, since: Timestamp) {
        let Some(path) = &self.cursor_file else {
            return;
        };
        if let Err(e) = write_cursor(path, since.as_secs()) {
            tracing::warn!("keeping the cursor in {}: {e}", path.display());
        }
    }
}

/// How far back a kept cursor may take the subscription (unless `--replay` asks for more).
const CURSOR_HORIZON: Duration = Duration::from_secs(7 * 24 * 3600);
/// A cursor file is a number and a newline.
const CURSOR_MAX: u64 = 32;

/// The kept cursor, when the file is a regular file of ours (not a link, not writable by
/// others) holding a number.
fn read_cursor(path: &Path) -> std::io::Result<Option<u64>> {
    use std::io::Read;
    let (file, len) = match crate::safe_fs::open_regular(path, crate::safe_fs::FinalLink::Refuse) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    check_ours(path)?;
    if len > CURSOR_MAX {
        return Err(std::io::Error::other("larger than a cursor"));
    }
    let mut text = String::new();
    file.take(CURSOR_MAX).read_to_string(&mut text)?;
    text.trim()
        .parse()
        .map(Some)
        .map_err(|_| std::io::Error::other("not a number"))
}

/// Refuses a file or directory someone else owns or may write (the trust store's rule).
fn check_ours(path: &Path) -> std::io::Result<()> {
    crate::safe_fs::check_private(path, false)
}

fn write_cursor(path: &Path, secs: u64) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    // Not a link, ours, not writable by others.
    check_ours(dir)?;
    let tmp = path.with_extension("tmp");
    // A leftover (or a planted link) is removed, not written through.
    match std::fs::remove_file(&tmp) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&tmp)?;
    writeln!(file, "{secs}")?;
    drop(file);
    std::fs::rename(&tmp, path)
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

    /// Issue 32, finding 8: the cursor is not written through a planted link, a cursor someone
    /// else could write is not used, and a rewritten one cannot take a replica back a year.
    #[cfg(unix)]
    #[test]
    fn a_planted_link_or_a_rewritten_cursor_does_not_steer_the_subscription() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("state");
        std::fs::create_dir(&dir).unwrap();
        let cursor = dir.join("cursor");
        let cluster = Cluster {
            cursor_file: Some(cursor.clone()),
            replay: Duration::from_secs(600),
            ..Cluster::default()
        };
        let now = Timestamp::now().as_secs();
        // Links planted at the cursor and its temporary file: the target stays as it was.
        let victim = tmp.path().join("victim");
        std::fs::write(&victim, "precious").unwrap();
        std::os::unix::fs::symlink(&victim, dir.join("cursor.tmp")).unwrap();
        std::os::unix::fs::symlink(&victim, &cursor).unwrap();
        assert!(cluster.start().as_secs() <= now - 600, "a link is not read");
        cluster.keep(Timestamp::from(now - 42));
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        assert_eq!(
            cluster.start().as_secs(),
            now - 42,
            "kept in a file of its own"
        );
        // A year back: the subscription starts at the horizon instead.
        cluster.keep(Timestamp::from(now - 365 * 24 * 3600));
        let start = cluster.start().as_secs();
        assert!(start >= now - CURSOR_HORIZON.as_secs() - 5, "{start}");
        // A cursor others may write is not used.
        cluster.keep(Timestamp::from(now - 42));
        std::fs::set_permissions(&cursor, std::fs::Permissions::from_mode(0o666)).unwrap();
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
