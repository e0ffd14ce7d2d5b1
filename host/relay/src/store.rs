//! The embedded relay's events: the relay library's memory store plus, when persistent, an
//! append-only journal of what it accepted, with the [`Ledger`] deciding what fits.
//!
//! Persistence: the 0.44 line's on-disk stores pull in LMDB, so events live in the library's memory
//! store and every stored event is also appended, as one JSON line, to a journal under the data dir
//! (`<data>/relay/events.jsonl`, owner-only). On start the journal is replayed (each event verified
//! again) into memory through a fresh ledger, which evicts the same foreign events it evicted
//! before; so an eviction is durable as soon as it is decided, and the journal is compacted
//! (rewritten without evicted lines, then renamed over) on start and whenever evicted lines add up
//! to a quarter of the byte cap. Deletion requests (kind 5) are journaled like any event and
//! re-applied on replay. History is never dropped silently: a journal that cannot be replayed
//! whole (a line that is not a valid signed event, more own events than the caps) stops the start
//! with a message saying which line and what to do; only a torn last line (a write cut short by a
//! crash, never acknowledged) is cut off, with a warning.

use std::collections::HashMap;
use std::io::{BufRead, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use nostr_relay_builder::prelude::*;

use crate::error::{JournalProblem, RelayError};
use crate::known_keys::Owners;
use crate::ledger::{Entry, Ledger, Owner, Refusal};
use crate::limits::Limits;

/// Storage this full (percent of either cap) is warned about, once until it is below
/// [`CALM_PERCENT`] again.
pub const WARN_PERCENT: u64 = 80;
const CALM_PERCENT: u64 = 70;

/// What became of an event given to [`Store::put`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Put {
    Stored,
    /// Already stored: nothing changed.
    Duplicate,
    /// Ephemeral: fanned out, never stored.
    Ephemeral,
}

/// Why [`Store::put`] did not store an event (the text of an `OK false`).
#[derive(Debug, thiserror::Error)]
pub enum NotStored {
    #[error("{0}")]
    Space(#[from] Refusal),
    #[error("blocked: this event is deleted")]
    Deleted,
    #[error("error: not stored ({0})")]
    Rejected(String),
    #[error("error: database error")]
    Database(#[from] DatabaseError),
}

/// How full the store is, as last warned about (see [`Store::alarms`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Fill {
    pub percent: u64,
    pub events: u64,
    pub bytes: u64,
}

#[derive(Debug)]
pub struct Store {
    inner: MemoryDatabase,
    state: Mutex<State>,
    owners: Owners,
    alarm: tokio::sync::watch::Sender<Option<Fill>>,
    /// Events replayed from the journal at start.
    pub restored: usize,
}

#[derive(Debug)]
struct State {
    ledger: Ledger,
    journal: Option<Journal>,
    limits: Limits,
    warned: bool,
}

#[derive(Debug)]
struct Journal {
    file: std::fs::File,
    path: PathBuf,
    len: u64,
}

impl Store {
    /// A store journaled at `path` (replayed first), or in memory only; `owners` tells the key
    /// store's events from foreign ones.
    pub async fn open(
        path: Option<&Path>,
        limits: Limits,
        owners: Owners,
    ) -> Result<Store, RelayError> {
        let inner = MemoryDatabase::with_opts(MemoryDatabaseOptions {
            events: true,
            // The caps are the ledger's (it evicts foreign events, never own ones, silently).
            max_events: None,
        });
        let mut store = Store {
            inner,
            state: Mutex::new(State {
                ledger: Ledger::new(&limits),
                journal: None,
                limits,
                warned: false,
            }),
            owners,
            alarm: tokio::sync::watch::Sender::new(None),
            restored: 0,
        };
        if let Some(path) = path {
            let len = store.replay(path).await?;
            let file = open_append(path)?;
            let mut state = store.lock();
            state.journal = Some(Journal {
                file,
                path: path.to_path_buf(),
                len,
            });
            if state.ledger.garbage() > 0 {
                state
                    .compact()
                    .map_err(|e| RelayError::file("compacting", path, e))?;
            }
            drop(state);
        }
        store.warn_when_full();
        Ok(store)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The store's fill, each time it passes [`WARN_PERCENT`] (`None` until then).
    pub fn alarms(&self) -> tokio::sync::watch::Receiver<Option<Fill>> {
        self.alarm.subscribe()
    }

    /// Stores `event`, whose author's key is `owner`'s, evicting the oldest foreign events when
    /// it would not fit otherwise.
    pub async fn put(&self, event: &Event, owner: Owner) -> Result<Put, NotStored> {
        if event.kind.is_ephemeral() {
            return Ok(Put::Ephemeral);
        }
        match self.inner.check_id(&event.id).await? {
            DatabaseEventStatus::Saved => return Ok(Put::Duplicate),
            DatabaseEventStatus::Deleted => return Err(NotStored::Deleted),
            DatabaseEventStatus::NotExistent => {}
        }
        // One serialisation serves the size check and the journal line.
        let mut line = event.as_json();
        line.push('\n');
        let evicted = self.book(event, owner, &line)?;
        self.forget(evicted).await;
        self.warn_when_full();
        match self.inner.save_event(event).await? {
            SaveEventStatus::Success => Ok(Put::Stored),
            SaveEventStatus::Rejected(RejectedReason::Duplicate) => Ok(Put::Duplicate),
            SaveEventStatus::Rejected(RejectedReason::Deleted) => Err(NotStored::Deleted),
            SaveEventStatus::Rejected(why) => Err(NotStored::Rejected(format!("{why:?}"))),
        }
    }

    /// Decides, journals (first: what is acknowledged survives a restart) and books `event`; the
    /// ids of the events evicted for it.
    fn book(&self, event: &Event, owner: Owner, line: &str) -> Result<Vec<EventId>, NotStored> {
        let mut state = self.lock();
        let bytes = line.len() as u64;
        let plan = state.ledger.plan(&event.pubkey, owner, bytes)?;
        let offset = state.append(line)?;
        let evicted = state.ledger.evict_oldest(plan.evict);
        let entry = Entry {
            id: event.id,
            author: event.pubkey,
            offset,
            bytes,
        };
        state.ledger.record(entry, owner);
        state.compact_when_due();
        Ok(evicted.into_iter().map(|e| e.id).collect())
    }

    /// Takes evicted events out of memory.
    async fn forget(&self, ids: Vec<EventId>) {
        if ids.is_empty() {
            // An empty filter would match every event.
            return;
        }
        tracing::debug!(
            count = ids.len(),
            "relay: evicted the oldest foreign events"
        );
        if let Err(e) = self.inner.delete(Filter::new().ids(ids)).await {
            tracing::error!("relay: cannot evict events from memory: {e}");
        }
    }

    /// Warns (log and [`alarms`](Self::alarms)) when the store passes [`WARN_PERCENT`].
    fn warn_when_full(&self) {
        let mut state = self.lock();
        let percent = state.ledger.fill_percent();
        if percent < CALM_PERCENT {
            state.warned = false;
        }
        if percent < WARN_PERCENT || state.warned {
            return;
        }
        state.warned = true;
        let stored = state.ledger.stored();
        let caps = state.ledger.caps();
        tracing::warn!(
            "relay storage {percent}% full: {} of {} events, {} of {} bytes; the oldest events of \
             keys outside the key store are evicted from {}% on",
            stored.events,
            caps.total.events,
            stored.bytes,
            caps.total.bytes,
            100 - u64::from(state.limits.own_headroom_percent.min(100)),
        );
        self.alarm.send_replace(Some(Fill {
            percent,
            events: stored.events,
            bytes: stored.bytes,
        }));
    }

    /// Replays the journal at `path` (if any) into memory; its length, or an error when it cannot
    /// be replayed whole.
    async fn replay(&mut self, path: &Path) -> Result<u64, RelayError> {
        let limits = self.lock().limits;
        let Some(f) = open_journal(path, &limits)? else {
            return Ok(0);
        };
        let mut reader = std::io::BufReader::new(f);
        let mut line = Vec::new();
        let (mut number, mut offset) = (0u64, 0u64);
        loop {
            line.clear();
            let n = reader
                .read_until(b'\n', &mut line)
                .map_err(|e| RelayError::file("reading", path, e))?;
            if n == 0 {
                break;
            }
            number += 1;
            if line.last() != Some(&b'\n') {
                cut_torn_line(path, number, n, offset)?;
                break;
            }
            let at = offset;
            offset += n as u64;
            match journal_event(path, number, &line)? {
                Some(ev) => self.replay_event(path, &ev, at, n as u64).await?,
                None => self.lock().ledger.add_garbage(n as u64),
            }
        }
        Ok(offset)
    }

    /// Books and stores one replayed event, as when it came in.
    async fn replay_event(
        &mut self,
        path: &Path,
        ev: &Event,
        offset: u64,
        bytes: u64,
    ) -> Result<(), RelayError> {
        let status = self.inner.check_id(&ev.id).await;
        if !matches!(status, Ok(DatabaseEventStatus::NotExistent)) {
            // A line written twice (two connections racing): the second holds nothing.
            self.lock().ledger.add_garbage(bytes);
            return Ok(());
        }
        let owner = self.owners.owner_of(&ev.pubkey);
        let evicted = {
            let mut state = self.lock();
            let plan = match state.ledger.plan(&ev.pubkey, owner, bytes) {
                Ok(plan) => plan,
                Err(Refusal::KeyShare { .. }) => {
                    // Shares shrank since (other limits): the key's newest events beyond it go.
                    state.ledger.add_garbage(bytes);
                    return Ok(());
                }
                Err(Refusal::Full { own, cap }) => return Err(over_caps(path, own, cap, bytes)),
            };
            let evicted = state.ledger.evict_oldest(plan.evict);
            let entry = Entry {
                id: ev.id,
                author: ev.pubkey,
                offset,
                bytes,
            };
            state.ledger.record(entry, owner);
            evicted.into_iter().map(|e| e.id).collect::<Vec<_>>()
        };
        self.restored = self.restored.saturating_sub(evicted.len());
        self.forget(evicted).await;
        // Replaced or deleted events are rejected by the memory store, as when they came in.
        if let Ok(status) = self.inner.save_event(ev).await
            && status.is_success()
        {
            self.restored += 1;
        }
        Ok(())
    }
}

impl State {
    /// Appends `line` (an event as JSON, newline-terminated) to the journal, at the offset
    /// returned; an error (the event is then not stored at all) when the write fails, so nothing
    /// is acknowledged that a restart would lose.
    fn append(&mut self, line: &str) -> Result<u64, DatabaseError> {
        let Some(j) = &mut self.journal else {
            // Memory only: offsets just need to be distinct.
            return Ok(self.ledger.stored().bytes + self.ledger.garbage());
        };
        if let Err(e) = j.file.write_all(line.as_bytes()) {
            tracing::error!("relay journal {}: {e}", j.path.display());
            return Err(DatabaseError::backend(e));
        }
        let at = j.len;
        j.len += line.len() as u64;
        Ok(at)
    }

    /// Compacts the journal once evicted lines make up a quarter of the byte cap.
    fn compact_when_due(&mut self) {
        let garbage = self.ledger.garbage();
        if garbage == 0 || garbage.saturating_mul(4) < self.limits.max_stored_bytes {
            return;
        }
        if let Err(e) = self.compact() {
            // The journal is as it was; compaction is tried again after the next eviction.
            tracing::error!("relay journal: cannot compact it: {e}");
        }
    }

    /// Rewrites the journal with the lines of stored events only, then renames it over the old
    /// one (a crash in between leaves the old journal, whose replay evicts the same events).
    fn compact(&mut self) -> std::io::Result<()> {
        let Some(j) = &mut self.journal else {
            self.ledger.compacted(&HashMap::new());
            return Ok(());
        };
        let dir = j.path.parent().unwrap_or(Path::new("."));
        let mut out = tempfile::Builder::new()
            .prefix(".events-")
            .tempfile_in(dir)?;
        let mut src = std::fs::File::open(&j.path)?;
        let mut moved = HashMap::new();
        let mut written = 0u64;
        let mut buf = Vec::new();
        for e in self.ledger.entries_in_journal_order() {
            src.seek(SeekFrom::Start(e.offset))?;
            buf.resize(e.bytes as usize, 0);
            src.read_exact(&mut buf)?;
            out.write_all(&buf)?;
            moved.insert(e.offset, written);
            written += e.bytes;
        }
        out.as_file().sync_all()?;
        out.persist(&j.path).map_err(|e| e.error)?;
        j.file = open_append(&j.path).map_err(std::io::Error::other)?;
        j.len = written;
        self.ledger.compacted(&moved);
        Ok(())
    }
}

/// The journal error for own events over the caps at replay.
fn over_caps(
    path: &Path,
    own: crate::ledger::Tally,
    cap: crate::ledger::Tally,
    bytes: u64,
) -> RelayError {
    let problem = if own.events >= cap.events {
        JournalProblem::TooManyEvents { limit: cap.events }
    } else {
        JournalProblem::TooLarge {
            size: own.bytes + bytes,
            limit: cap.bytes,
        }
    };
    damaged(path, problem)
}

/// The journal at `path` opened for replay (its directory created first); `None` when there is
/// none yet, an error when it is too large to hold what the caps allow (twice the byte cap:
/// evicted lines wait for compaction).
fn open_journal(path: &Path, limits: &Limits) -> Result<Option<std::fs::File>, RelayError> {
    if let Some(dir) = path.parent() {
        create_private_dir(dir).map_err(|e| RelayError::file("creating", dir, e))?;
    }
    let size = match std::fs::metadata(path) {
        Ok(m) => m.len(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(RelayError::file("reading", path, e)),
    };
    let limit = limits.max_stored_bytes;
    if size > limit.saturating_mul(2) {
        return Err(damaged(path, JournalProblem::TooLarge { size, limit }));
    }
    std::fs::File::open(path)
        .map(Some)
        .map_err(|e| RelayError::file("opening", path, e))
}

/// The event on journal line `number` of `path` (`None` for a blank line); an error when the line
/// is not a valid signed event.
fn journal_event(path: &Path, number: u64, line: &[u8]) -> Result<Option<Event>, RelayError> {
    let text = std::str::from_utf8(line)
        .map_err(|_| damaged(path, JournalProblem::NotUtf8 { line: number }))?;
    if text.trim().is_empty() {
        return Ok(None);
    }
    let ev = Event::from_json(text.trim()).map_err(|e| {
        let detail = e.to_string();
        damaged(
            path,
            JournalProblem::NotAnEvent {
                line: number,
                detail,
            },
        )
    })?;
    ev.verify().map_err(|e| {
        let (id, detail) = (ev.id, e.to_string());
        damaged(
            path,
            JournalProblem::Unverified {
                line: number,
                id,
                detail,
            },
        )
    })?;
    Ok(Some(ev))
}

/// Cuts off line `number` of the journal, `n` bytes without a newline at `offset`: a write cut
/// short (the relay stopped mid-line; the event was never acknowledged). The next append then
/// starts a fresh line.
fn cut_torn_line(path: &Path, number: u64, n: usize, offset: u64) -> Result<(), RelayError> {
    tracing::warn!(
        "relay journal {}: line {number} is incomplete ({n} bytes without a newline); cut off",
        path.display()
    );
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(|e| RelayError::file("opening", path, e))?;
    f.set_len(offset)
        .map_err(|e| RelayError::file("truncating", path, e))
}

fn damaged(path: &Path, problem: JournalProblem) -> RelayError {
    RelayError::Journal {
        path: path.to_path_buf(),
        problem,
    }
}

fn open_append(path: &Path) -> Result<std::fs::File, RelayError> {
    let mut opts = std::fs::OpenOptions::new();
    opts.create(true).append(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    opts.open(path)
        .map_err(|e| RelayError::file("opening", path, e))
}

fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
    }
    #[cfg(not(unix))]
    std::fs::create_dir_all(dir)
}

/// The relay library's view of the store. It reads through it; events reach the store through
/// the front's door ([`Store::put`]), so `save_event` is only a fallback, with the key classified
/// here.
impl NostrDatabase for Store {
    fn backend(&self) -> Backend {
        Backend::Custom("apiary-journal".to_string())
    }

    fn save_event<'a>(
        &'a self,
        event: &'a Event,
    ) -> BoxedFuture<'a, Result<SaveEventStatus, DatabaseError>> {
        Box::pin(async move {
            let owner = self.owners.owner_of(&event.pubkey);
            Ok(match self.put(event, owner).await {
                Ok(Put::Stored | Put::Ephemeral) => SaveEventStatus::Success,
                Ok(Put::Duplicate) => SaveEventStatus::Rejected(RejectedReason::Duplicate),
                Err(NotStored::Deleted) => SaveEventStatus::Rejected(RejectedReason::Deleted),
                Err(NotStored::Database(e)) => return Err(e),
                Err(_) => SaveEventStatus::Rejected(RejectedReason::Other),
            })
        })
    }

    fn check_id<'a>(
        &'a self,
        event_id: &'a EventId,
    ) -> BoxedFuture<'a, Result<DatabaseEventStatus, DatabaseError>> {
        self.inner.check_id(event_id)
    }

    fn event_by_id<'a>(
        &'a self,
        event_id: &'a EventId,
    ) -> BoxedFuture<'a, Result<Option<Event>, DatabaseError>> {
        self.inner.event_by_id(event_id)
    }

    fn count(&self, filter: Filter) -> BoxedFuture<'_, Result<usize, DatabaseError>> {
        self.inner.count(filter)
    }

    fn query(&self, filter: Filter) -> BoxedFuture<'_, Result<Events, DatabaseError>> {
        self.inner.query(filter)
    }

    fn delete(&self, filter: Filter) -> BoxedFuture<'_, Result<(), DatabaseError>> {
        self.inner.delete(filter)
    }

    fn wipe(&self) -> BoxedFuture<'_, Result<(), DatabaseError>> {
        self.inner.wipe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::known_keys::KnownKeys;
    use std::sync::Arc;

    /// Owners where `own` (and the relay's key) are the key store's.
    fn owners(own: &[&Keys]) -> Owners {
        let tmp = tempfile::tempdir().unwrap().keep();
        for (i, keys) in own.iter().enumerate() {
            let file = tmp.join(format!("k{i}.key"));
            std::fs::write(file, keys.secret_key().to_secret_hex()).unwrap();
        }
        Owners {
            relay: Keys::generate().public_key(),
            known: Arc::new(KnownKeys::new(Some(crate::keys::KeyStore::new(tmp)))),
        }
    }

    fn msg(keys: &Keys, text: &str) -> Event {
        crate::message(keys, "general", text, vec![]).unwrap()
    }

    #[tokio::test]
    async fn journal_survives_a_restart() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("relay/events.jsonl");
        let keys = Keys::generate();
        let own = owners(&[&keys]);
        let ev = msg(&keys, "kept");
        let limits = Limits::default();
        {
            let j = Store::open(Some(&path), limits, own.clone()).await.unwrap();
            assert_eq!(j.put(&ev, Owner::Own).await.unwrap(), Put::Stored);
            assert_eq!(j.put(&ev, Owner::Own).await.unwrap(), Put::Duplicate);
        }
        // A torn last line (a crash mid-write) is cut off; the rest is replayed.
        let append = |bytes: &[u8]| {
            std::fs::OpenOptions::new()
                .append(true)
                .open(&path)
                .unwrap()
                .write_all(bytes)
                .unwrap()
        };
        append(b"{\"id\":\"ab");
        let j = Store::open(Some(&path), limits, own.clone()).await.unwrap();
        assert_eq!(j.restored, 1);
        assert_eq!(j.event_by_id(&ev.id).await.unwrap(), Some(ev.clone()));
        let second = msg(&keys, "also kept");
        assert_eq!(j.put(&second, Owner::Own).await.unwrap(), Put::Stored);
        drop(j);
        let j = Store::open(Some(&path), limits, own.clone()).await.unwrap();
        assert_eq!(j.restored, 2);
        drop(j);

        // Any other bad line stops the start, naming it.
        append(b"not json\n");
        let err = Store::open(Some(&path), limits, own.clone())
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("line 3 is not an event"), "{err}");
        assert!(err.contains("move the file away"), "{err}");

        // So do more own events than the caps hold (they are never evicted).
        let small = Limits {
            max_stored_events: 1,
            ..limits
        };
        std::fs::write(&path, format!("{}\n{}\n", ev.as_json(), second.as_json())).unwrap();
        let err = Store::open(Some(&path), small, own)
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("more than 1 events"), "{err}");
    }

    #[tokio::test]
    async fn evicted_events_stay_evicted_after_a_restart_and_compaction() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("relay/events.jsonl");
        let operator = Keys::generate();
        let own = owners(&[&operator]);
        let limits = Limits {
            max_stored_events: 10,
            ..Limits::default()
        };
        let strangers: Vec<Keys> = (0..12).map(|_| Keys::generate()).collect();
        let mut sent = Vec::new();
        {
            let s = Store::open(Some(&path), limits, own.clone()).await.unwrap();
            let mut alarms = s.alarms();
            for k in &strangers {
                let ev = msg(k, "filler");
                assert_eq!(s.put(&ev, Owner::Foreign).await.unwrap(), Put::Stored);
                sent.push(ev);
            }
            // 8 foreign events at most (20% headroom); the first four were evicted.
            for ev in &sent[..4] {
                assert_eq!(s.event_by_id(&ev.id).await.unwrap(), None);
            }
            assert!(alarms.has_changed().unwrap());
            assert_eq!(alarms.borrow_and_update().unwrap().percent, 80);
            // The operator's posts still fit, then push foreign events out.
            for i in 0..4 {
                let post = msg(&operator, &format!("post {i}"));
                assert_eq!(s.put(&post, Owner::Own).await.unwrap(), Put::Stored);
            }
            assert_eq!(s.event_by_id(&sent[4].id).await.unwrap(), None);
            assert!(s.event_by_id(&sent[6].id).await.unwrap().is_some());
        }
        let before = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            before.lines().count(),
            16,
            "evicted lines wait for compaction"
        );
        let s = Store::open(Some(&path), limits, own).await.unwrap();
        assert_eq!(s.restored, 10);
        for ev in &sent[..6] {
            assert_eq!(s.event_by_id(&ev.id).await.unwrap(), None, "came back");
        }
        let after = std::fs::read_to_string(&path).unwrap();
        assert_eq!(after.lines().count(), 10, "compacted on start");
        assert!(!after.contains(&sent[0].id.to_hex()));
    }
}
