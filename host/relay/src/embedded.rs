//! The embedded relay: `nostr-relay-builder`'s `LocalRelay` on 127.0.0.1, for `apiary up` without
//! `--relay` and for `apiary relay`, behind [`front`](super::front) (NIP-11, message caps, the
//! NIP-42 allow-list) with [`Admission`] as its write policy (rate limits, storage caps, group
//! metadata from its own key only).
//!
//! Persistence: the 0.44 line's on-disk stores pull in LMDB, so events live in the library's memory
//! store and every stored event is also appended, as one JSON line, to a journal under the data dir
//! (`<data>/relay/events.jsonl`, owner-only). On start the journal is replayed (each event verified
//! again) into memory. Deletion requests (kind 5) are journaled like any event and re-applied on
//! replay. History is never dropped silently: a journal that cannot be replayed whole (a line that
//! is not a valid signed event, more than the storage caps) stops the start with a message saying
//! which line and what to do; only a torn last line (a write cut short by a crash, never
//! acknowledged) is cut off, with a warning.

use std::io::{BufRead, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use nostr_relay_builder::prelude::*;
use tokio::net::TcpListener;

use super::front::{AllowList, Front};
use super::limits::{Admission, Limits, Policy, Usage};
use crate::error::{JournalProblem, RelayError};

/// The library's own per-connection counter is replaced by [`Admission`]'s (its refill rounds
/// elapsed time down to whole seconds): set out of reach.
const LIBRARY_NOTES_PER_MINUTE: u32 = u32::MAX / 2;
/// Connections served at once.
const MAX_CONNECTIONS: usize = 1024;

/// How to run the embedded relay.
#[derive(Debug)]
pub struct Settings {
    /// Where events are journaled (`None`: memory only).
    pub journal: Option<PathBuf>,
    /// The relay's own key (NIP-11 `pubkey`, group metadata).
    pub keys: Keys,
    pub limits: Limits,
    /// `Some`: NIP-42 is required, and only these keys may authenticate.
    pub auth: Option<AllowList>,
}

impl Settings {
    /// Memory only, a new key, default limits, no authentication.
    pub fn ephemeral() -> Settings {
        Settings {
            journal: None,
            keys: Keys::generate(),
            limits: Limits::default(),
            auth: None,
        }
    }
}

pub struct Embedded {
    /// The relay library and its store, as the harness's replies reach them.
    door: Door,
    accept: tokio::task::AbortHandle,
    pub url: String,
    /// The relay's public key (advertised in its NIP-11 document).
    pub pubkey: PublicKey,
    /// Events replayed from the journal at start.
    pub restored: usize,
    pub admission: Arc<Admission>,
}

impl Embedded {
    /// Starts listening on `addr` (port 0 picks a free port); `journal` persists events.
    pub async fn start(addr: SocketAddr, journal: Option<&Path>) -> Result<Embedded, RelayError> {
        let settings = Settings {
            journal: journal.map(Path::to_path_buf),
            ..Settings::ephemeral()
        };
        Embedded::start_with(addr, settings).await
    }

    /// Like [`Embedded::start`] with all settings. With `settings.auth`, a connection must
    /// authenticate (NIP-42) with an allowed key before it may read or publish (the library's
    /// `Both` mode: a `REQ` is closed with `auth-required` and an `AUTH` challenge, an `EVENT`
    /// refused the same way).
    pub async fn start_with(addr: SocketAddr, settings: Settings) -> Result<Embedded, RelayError> {
        let Settings {
            journal,
            keys,
            limits,
            auth,
        } = settings;
        let pubkey = keys.public_key();
        let store = Arc::new(Store::open(journal.as_deref(), limits).await?);
        let restored = store.restored;
        let admission = Arc::new(Admission::new(limits, pubkey, Arc::clone(&store.usage)));
        let mut builder = RelayBuilder::default()
            .addr(addr.ip())
            .max_connections(MAX_CONNECTIONS)
            .rate_limit(RateLimit {
                max_reqs: 500,
                notes_per_minute: LIBRARY_NOTES_PER_MINUTE,
            })
            .write_policy(Policy(Arc::clone(&admission)))
            .database(Arc::clone(&store));
        if auth.is_some() {
            builder = builder.nip42(RelayBuilderNip42 {
                mode: RelayBuilderNip42Mode::Both,
            });
        }
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|error| RelayError::Bind { addr, error })?;
        let local = listener.local_addr()?;
        builder = builder.port(local.port());
        let relay = LocalRelay::new(builder);
        let door = Door {
            relay: relay.clone(),
            store: Arc::clone(&store),
            admission: Arc::clone(&admission),
        };
        let front = Front {
            info: Front::info_document(&pubkey, &limits, auth.is_some()),
            limits,
            // With NIP-42 required, a connection's authentication is the library's to know.
            door: auth.is_none().then(|| door.clone()),
            allow: auth,
            admission: Arc::clone(&admission),
        };
        let accept = super::front::serve(relay, listener, Arc::new(front)).abort_handle();
        Ok(Embedded {
            door,
            accept,
            url: format!("ws://{local}"),
            pubkey,
            restored,
            admission,
        })
    }

    pub fn shutdown(&self) {
        self.accept.abort();
        self.door.relay.shutdown();
    }

    /// The door for this process's own events (see [`Door`]).
    pub fn door(&self) -> Door {
        self.door.clone()
    }
}

/// The embedded relay's door for events signed in this process (the harness's replies): stored,
/// journaled and fanned out to subscribers like a client's, without the websocket round trip, a
/// second parse or a signature check (the harness signed them a moment before). The rate limits
/// are for clients and do not apply (the harness has its own turn limits); the storage caps and
/// the group-metadata rule do. Before, every reply cost the relay a parse and a Schnorr
/// verification, as much as the message it answered: the door took the relay's CPU a message from
/// 412 to 313 µs at 1,000 msg/s (`live_agents`, same sitting).
#[derive(Clone, Debug)]
pub struct Door {
    relay: LocalRelay,
    store: Arc<Store>,
    admission: Arc<Admission>,
}

impl Door {
    /// Stores and fans out `event`, signed in this process; why not, in the words of a relay's
    /// `OK false`. An event the relay already has is accepted again (and not sent out twice).
    pub async fn publish(&self, event: &Event) -> Result<(), String> {
        if let Some(why) = self.admission.check_own(event) {
            return Err(format!("blocked: {why}"));
        }
        self.store_and_fan_out(event).await.map(|_| ())
    }

    /// A client's event on connection `peer`, taken as the relay library would take it: id and
    /// signature checked, then the write policy (rate limits included), then stored and fanned
    /// out. The `OK` message's text: empty, or a duplicate's note; `Err` for `OK false`.
    pub(crate) async fn accept(
        &self,
        event: &Event,
        peer: SocketAddr,
    ) -> Result<&'static str, String> {
        // Checked first: the rate buckets are charged only for a key's genuine events.
        if !event.verify_id() {
            return Err("invalid: event id does not match its content".to_string());
        }
        if !event.verify_signature() {
            return Err("invalid: event signature does not verify".to_string());
        }
        if let Some(why) = self.admission.check(event, peer) {
            return Err(format!("blocked: {why}"));
        }
        self.store_and_fan_out(event).await
    }

    async fn store_and_fan_out(&self, event: &Event) -> Result<&'static str, String> {
        if event.kind.is_ephemeral() {
            self.relay.notify_event(event.clone());
            return Ok("");
        }
        match self.store.save_event(event).await {
            Ok(SaveEventStatus::Success) => {
                self.relay.notify_event(event.clone());
                Ok("")
            }
            Ok(SaveEventStatus::Rejected(RejectedReason::Duplicate)) => {
                Ok("duplicate: already have this event")
            }
            Ok(SaveEventStatus::Rejected(RejectedReason::Deleted)) => {
                Err("blocked: this event is deleted".to_string())
            }
            Ok(SaveEventStatus::Rejected(why)) => Err(format!("error: not stored ({why:?})")),
            Err(e) => {
                tracing::error!("relay: cannot store an event: {e}");
                Err("error: database error".to_string())
            }
        }
    }
}

impl Drop for Embedded {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

/// The memory store plus, when persistent, an append-only journal of what it accepted.
#[derive(Debug)]
pub struct Store {
    inner: MemoryDatabase,
    journal: Option<(Mutex<std::fs::File>, PathBuf)>,
    limits: Limits,
    pub usage: Arc<Usage>,
    pub restored: usize,
}

/// Kept as the journal's name in messages and tests.
pub type Journal = Store;

impl Store {
    /// A store journaled at `path` (replayed first), or in memory only.
    pub async fn open(path: Option<&Path>, limits: Limits) -> Result<Store, RelayError> {
        let inner = MemoryDatabase::with_opts(MemoryDatabaseOptions {
            events: true,
            // The caps are [`Limits`]' (refused, never evicted silently).
            max_events: None,
        });
        let mut store = Store {
            inner,
            journal: None,
            limits,
            usage: Arc::default(),
            restored: 0,
        };
        if let Some(path) = path {
            store.replay(path).await?;
            let file = open_append(path)?;
            store.journal = Some((Mutex::new(file), path.to_path_buf()));
        }
        Ok(store)
    }

    /// Replays the journal at `path` (if any) into memory; an error when it cannot be replayed
    /// whole.
    async fn replay(&mut self, path: &Path) -> Result<(), RelayError> {
        let Some(f) = self.open_journal(path)? else {
            return Ok(());
        };
        let mut reader = std::io::BufReader::new(f);
        let mut line = Vec::new();
        let (mut number, mut offset, mut events) = (0u64, 0u64, 0u64);
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
            offset += n as u64;
            let Some(ev) = journal_event(path, number, &line)? else {
                continue;
            };
            events += 1;
            if events > self.limits.max_stored_events {
                let limit = self.limits.max_stored_events;
                return Err(damaged(path, JournalProblem::TooManyEvents { limit }));
            }
            // Replaced or deleted events are rejected by the memory store, as when they came in.
            if let Ok(status) = self.inner.save_event(&ev).await
                && status.is_success()
            {
                self.restored += 1;
            }
        }
        self.usage.events.store(events, Ordering::Relaxed);
        self.usage.bytes.store(offset, Ordering::Relaxed);
        Ok(())
    }

    /// The journal at `path` opened for replay (its directory created first); `None` when there
    /// is none yet, an error when it is over the storage limit.
    fn open_journal(&self, path: &Path) -> Result<Option<std::fs::File>, RelayError> {
        if let Some(dir) = path.parent() {
            create_private_dir(dir).map_err(|e| RelayError::file("creating", dir, e))?;
        }
        let size = match std::fs::metadata(path) {
            Ok(m) => m.len(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(RelayError::file("reading", path, e)),
        };
        let limit = self.limits.max_stored_bytes;
        if size > limit {
            return Err(damaged(path, JournalProblem::TooLarge { size, limit }));
        }
        std::fs::File::open(path)
            .map(Some)
            .map_err(|e| RelayError::file("opening", path, e))
    }

    /// Appends `line` (an event as JSON, newline-terminated) to the journal; an error (the event
    /// is then not stored at all) when the write fails, so nothing is acknowledged that a restart
    /// would lose.
    fn append(&self, line: &str) -> Result<u64, DatabaseError> {
        if let Some((file, path)) = &self.journal {
            let mut f = file.lock().unwrap_or_else(|e| e.into_inner());
            if let Err(e) = f.write_all(line.as_bytes()) {
                tracing::error!("relay journal {}: {e}", path.display());
                return Err(DatabaseError::backend(e));
            }
        }
        Ok(line.len() as u64)
    }
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

impl NostrDatabase for Store {
    fn backend(&self) -> Backend {
        Backend::Custom("apiary-journal".to_string())
    }

    fn save_event<'a>(
        &'a self,
        event: &'a Event,
    ) -> BoxedFuture<'a, Result<SaveEventStatus, DatabaseError>> {
        Box::pin(async move {
            // The write policy refused what would not fit; this is the backstop (a race between
            // connections), never reached in normal use.
            // One serialisation serves the size check and the journal line.
            let mut line = event.as_json();
            line.push('\n');
            if self
                .usage
                .refusal(&self.limits, line.len() as u64)
                .is_some()
            {
                return Ok(SaveEventStatus::Rejected(RejectedReason::Other));
            }
            if event.kind.is_ephemeral() {
                return self.inner.save_event(event).await;
            }
            // Journal first: what is acknowledged survives a restart.
            if let DatabaseEventStatus::Saved | DatabaseEventStatus::Deleted =
                self.inner.check_id(&event.id).await?
            {
                return self.inner.save_event(event).await;
            }
            let written = self.append(&line)?;
            self.usage.events.fetch_add(1, Ordering::Relaxed);
            self.usage.bytes.fetch_add(written, Ordering::Relaxed);
            self.inner.save_event(event).await
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
    use std::time::Duration;
    use tokio::net::TcpStream;

    /// A relay on a free loopback port without a journal.
    async fn relay() -> Embedded {
        Embedded::start("127.0.0.1:0".parse().unwrap(), None)
            .await
            .unwrap()
    }

    /// A client of `relay` signing with new keys.
    async fn client(relay: &Embedded) -> (nostr_sdk::Client, Keys) {
        let keys = Keys::generate();
        let client = crate::connect_as(&relay.url, Duration::from_secs(5), Some(keys.clone()))
            .await
            .unwrap();
        (client, keys)
    }

    #[tokio::test]
    async fn one_connection_may_publish_faster_than_one_event_a_second() {
        // The harness publishes every persona's replies over one shared connection.
        let relay = relay().await;
        let (client, _) = client(&relay).await;
        let personas: Vec<Keys> = (0..3).map(|_| Keys::generate()).collect();
        for i in 0..150 {
            let keys = &personas[i % personas.len()];
            let ev = crate::message(keys, "general", &format!("reply {i}"), vec![]).unwrap();
            let out = client.send_event(&ev).await.unwrap();
            assert!(
                !out.success.is_empty(),
                "event {i} refused: {:?}",
                out.failed
            );
        }
        relay.shutdown();
    }

    #[tokio::test]
    async fn the_door_stores_and_fans_out_own_events_past_the_client_rate_limits() {
        let tmp = tempfile::tempdir().unwrap();
        let journal = tmp.path().join("relay/events.jsonl");
        let settings = Settings {
            journal: Some(journal.clone()),
            limits: Limits {
                per_connection_per_minute: 1,
                per_key_per_minute: 1,
                max_stored_events: 5,
                ..Limits::default()
            },
            ..Settings::ephemeral()
        };
        let relay = Embedded::start_with("127.0.0.1:0".parse().unwrap(), settings)
            .await
            .unwrap();
        let (reader, _) = client(&relay).await;
        let filter = crate::channel_filter(&["general".into()], Timestamp::from(0));
        let mut seen = reader.notifications();
        reader.subscribe(filter.clone(), None).await.unwrap();
        let door = relay.door();
        let persona = Keys::generate();
        let mut ids = Vec::new();
        for i in 0..5 {
            let ev = crate::message(&persona, "general", &format!("reply {i}"), vec![]).unwrap();
            door.publish(&ev)
                .await
                .expect("accepted past the client limits");
            ids.push(ev.id);
            if i == 0 {
                // The same event again is accepted and not sent out twice.
                door.publish(&ev).await.unwrap();
            }
        }
        // Subscribers get each.
        let mut got = Vec::new();
        while got.len() < 5 {
            let n = tokio::time::timeout(Duration::from_secs(5), seen.recv())
                .await
                .expect("fanned out")
                .unwrap();
            if let nostr_sdk::RelayPoolNotification::Event { event, .. } = n {
                got.push(event.id);
            }
        }
        // (Some may come as stored events, answering the subscription, and in that order.)
        got.sort();
        ids.sort();
        assert_eq!(got, ids);
        // The storage cap still holds.
        let over = crate::message(&persona, "general", "one too many", vec![]).unwrap();
        let why = door.publish(&over).await.unwrap_err();
        assert!(why.contains("storage full"), "{why}");
        // And what went through the door is journaled like any event.
        relay.shutdown();
        let replayed = Store::open(Some(&journal), Limits::default())
            .await
            .unwrap();
        assert_eq!(replayed.restored, 5);
        // Group metadata stays the relay's own, whoever publishes it.
        let metadata = EventBuilder::new(Kind::Custom(39000), "")
            .tags([Tag::identifier("general")])
            .sign_with_keys(&persona)
            .unwrap();
        let why = relay.door().publish(&metadata).await.unwrap_err();
        assert!(why.contains("signed by this relay's key only"), "{why}");
    }

    #[tokio::test]
    async fn forged_events_are_refused_and_never_fanned_out() {
        use futures_util::{SinkExt, StreamExt};
        use tokio_tungstenite::tungstenite::Message as Ws;
        let relay = relay().await;
        let (reader, _) = client(&relay).await;
        let mut seen = reader.notifications();
        let filter = crate::channel_filter(&["general".into()], Timestamp::from(0));
        reader.subscribe(filter, None).await.unwrap();
        let stream = TcpStream::connect(relay.url.trim_start_matches("ws://"))
            .await
            .unwrap();
        let (mut ws, _) = tokio_tungstenite::client_async(relay.url.as_str(), stream)
            .await
            .unwrap();
        let mut send = async |event: serde_json::Value| {
            let msg = serde_json::json!(["EVENT", event]).to_string();
            ws.send(Ws::text(msg)).await.unwrap();
            loop {
                let Some(Ok(Ws::Text(text))) = ws.next().await else {
                    panic!("the relay answers");
                };
                let v: serde_json::Value = serde_json::from_str(text.as_str()).unwrap();
                if v[0] == "OK" {
                    return (v[2].as_bool().unwrap(), v[3].as_str().unwrap().to_string());
                }
            }
        };
        let keys = Keys::generate();
        let genuine = crate::message(&keys, "general", "genuine", vec![]).unwrap();
        let other = crate::message(&keys, "general", "other", vec![]).unwrap();
        let json = |e: &Event| serde_json::from_str::<serde_json::Value>(&e.as_json()).unwrap();

        // Content changed after signing: the id no longer matches.
        let mut changed = json(&genuine);
        changed["content"] = "forged".into();
        let (ok, why) = send(changed).await;
        assert!(!ok && why.starts_with("invalid:"), "{why}");
        // Another event's signature: the id matches, the signature does not.
        let mut resigned = json(&other);
        resigned["sig"] = json(&genuine)["sig"].clone();
        let (ok, why) = send(resigned).await;
        assert!(!ok && why.starts_with("invalid:"), "{why}");
        // A second key's name on the event: neither holds.
        let mut stolen = json(&genuine);
        stolen["pubkey"] = Keys::generate().public_key().to_hex().into();
        let (ok, why) = send(stolen).await;
        assert!(!ok && why.starts_with("invalid:"), "{why}");

        // The genuine one is taken, once; again is a duplicate.
        assert_eq!(send(json(&genuine)).await, (true, String::new()));
        let (ok, why) = send(json(&genuine)).await;
        assert!(ok && why.starts_with("duplicate:"), "{why}");
        // Subscribers saw the genuine event only, and once.
        let first = tokio::time::timeout(Duration::from_secs(5), async {
            loop {
                if let Ok(nostr_sdk::RelayPoolNotification::Event { event, .. }) = seen.recv().await
                {
                    return event.id;
                }
            }
        });
        assert_eq!(first.await.unwrap(), genuine.id);
        let more = tokio::time::timeout(Duration::from_millis(300), seen.recv()).await;
        assert!(
            !matches!(more, Ok(Ok(nostr_sdk::RelayPoolNotification::Event { .. }))),
            "nothing else was fanned out"
        );
        assert!(
            relay
                .door
                .store
                .event_by_id(&other.id)
                .await
                .unwrap()
                .is_none()
        );
        relay.shutdown();
    }

    #[tokio::test]
    async fn clients_that_never_speak_websocket_do_not_stop_the_relay() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let relay = relay().await;
        let addr = relay.url.trim_start_matches("ws://").to_string();
        // One sends garbage instead of an HTTP upgrade and is hung up on; another opens a request
        // and never finishes it, and keeps its connection open meanwhile.
        let mut garbage = TcpStream::connect(&addr).await.unwrap();
        garbage.write_all(&[0xff; 4096]).await.unwrap();
        let mut rest = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(5), garbage.read_to_end(&mut rest));
        assert!(read.await.is_ok(), "a garbage client is disconnected");
        let mut stalled = TcpStream::connect(&addr).await.unwrap();
        stalled
            .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n")
            .await
            .unwrap();
        // Meanwhile a real client publishes and reads back.
        let (client, keys) = client(&relay).await;
        let ev = crate::message(&keys, "general", "still served", vec![]).unwrap();
        let out = client.send_event(&ev).await.unwrap();
        assert!(!out.success.is_empty(), "refused: {:?}", out.failed);
        let got = client
            .fetch_events(Filter::new().id(ev.id), Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!(got.first().map(|e| e.id), Some(ev.id));
        drop(stalled);
        relay.shutdown();
    }

    #[tokio::test]
    async fn journal_survives_a_restart() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("relay/events.jsonl");
        let keys = Keys::generate();
        let ev = crate::message(&keys, "general", "kept", vec![]).unwrap();
        let limits = Limits::default();
        {
            let j = Store::open(Some(&path), limits).await.unwrap();
            assert!(j.save_event(&ev).await.unwrap().is_success());
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
        let j = Store::open(Some(&path), limits).await.unwrap();
        assert_eq!(j.restored, 1);
        assert_eq!(j.event_by_id(&ev.id).await.unwrap(), Some(ev.clone()));
        let second = crate::message(&keys, "general", "also kept", vec![]).unwrap();
        assert!(j.save_event(&second).await.unwrap().is_success());
        drop(j);
        let j = Store::open(Some(&path), limits).await.unwrap();
        assert_eq!(j.restored, 2);
        drop(j);

        // Any other bad line stops the start, naming it.
        append(b"not json\n");
        let err = Store::open(Some(&path), limits)
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("line 3 is not an event"), "{err}");
        assert!(err.contains("move the file away"), "{err}");

        // So does a journal over the storage caps.
        let small = Limits {
            max_stored_events: 1,
            ..limits
        };
        std::fs::write(&path, format!("{}\n{}\n", ev.as_json(), second.as_json())).unwrap();
        let err = Store::open(Some(&path), small)
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("more than 1 events"), "{err}");
    }

    #[tokio::test]
    async fn required_auth_keeps_unauthenticated_clients_out() {
        use std::time::Duration;
        let keys = Keys::generate();
        let settings = Settings {
            auth: Some(AllowList::new(None, [keys.public_key()])),
            ..Settings::ephemeral()
        };
        let relay = Embedded::start_with("127.0.0.1:0".parse().unwrap(), settings)
            .await
            .unwrap();
        let t = Duration::from_secs(5);
        let authed = crate::connect_as(&relay.url, t, Some(keys.clone()))
            .await
            .unwrap();
        let anon = crate::connect(&relay.url, t).await.unwrap();
        let ev = crate::message(&keys, "general", "members only", vec![]).unwrap();

        // Without a key the relay refuses both directions.
        assert!(anon.send_event(&ev).await.unwrap().success.is_empty());
        let filter = crate::channel_filter(&["general".into()], Timestamp::from(0));
        let seen = anon.fetch_events(filter.clone(), t).await;
        assert!(seen.map(|e| e.is_empty()).unwrap_or(true));

        // With one, the client answers the challenge and retries by itself.
        assert!(!authed.send_event(&ev).await.unwrap().success.is_empty());
        let seen = authed.fetch_events(filter.clone(), t).await.unwrap();
        assert_eq!(seen.first().map(|e| e.id), Some(ev.id));
        let seen = anon.fetch_events(filter.clone(), t).await;
        assert!(seen.map(|e| e.is_empty()).unwrap_or(true));

        // A key that authenticates but is not on the allow-list gets nothing either way.
        let stranger = Keys::generate();
        let other = crate::connect_as(&relay.url, t, Some(stranger.clone()))
            .await
            .unwrap();
        let theirs = crate::message(&stranger, "general", "let me in", vec![]).unwrap();
        assert!(other.send_event(&theirs).await.unwrap().success.is_empty());
        let seen = other.fetch_events(filter, t).await;
        assert!(seen.map(|e| e.is_empty()).unwrap_or(true));
        relay.shutdown();
    }
}
