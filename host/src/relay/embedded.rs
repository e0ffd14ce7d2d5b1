//! The embedded relay: `nostr-relay-builder`'s `LocalRelay` on 127.0.0.1, for `apiary up` without
//! `--relay` and for `apiary relay`.
//!
//! Persistence: the 0.44 line's on-disk stores pull in LMDB, so events live in the library's memory
//! store and every stored event is also appended, as one JSON line, to a journal under the data dir
//! (`<data>/relay/events.jsonl`, owner-only). On start the journal is replayed (each event verified
//! again) into memory. Deletion requests (kind 5) are journaled like any event and re-applied on
//! replay.

use std::io::{BufRead, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use nostr_relay_builder::prelude::*;
use tokio::net::{TcpListener, TcpStream};

/// Events kept in memory (oldest evicted first).
const MAX_EVENTS: usize = 200_000;
/// A journal larger than this is not replayed (the relay starts empty, with a warning).
const MAX_JOURNAL: u64 = 512 * 1024 * 1024;
/// Journal lines longer than this are skipped.
const MAX_LINE: usize = 1024 * 1024;
/// Events one connection may publish per minute (the harness publishes every reply over one).
const NOTES_PER_MINUTE: u32 = 60_000;

/// A client that has not finished its websocket handshake by then is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

pub struct Embedded {
    relay: LocalRelay,
    accept: tokio::task::AbortHandle,
    pub url: String,
    /// Events replayed from the journal at start.
    pub restored: usize,
}

impl Embedded {
    /// Starts listening on `addr` (port 0 picks a free port); `journal` persists events.
    pub async fn start(addr: SocketAddr, journal: Option<&Path>) -> anyhow::Result<Embedded> {
        Embedded::start_with(addr, journal, false).await
    }

    /// Like [`Embedded::start`]; with `require_auth`, a connection must authenticate (NIP-42)
    /// before it may read or publish (the library's `Both` mode: a `REQ` is closed with
    /// `auth-required` and an `AUTH` challenge, an `EVENT` refused the same way).
    pub async fn start_with(
        addr: SocketAddr,
        journal: Option<&Path>,
        require_auth: bool,
    ) -> anyhow::Result<Embedded> {
        // The library's default (60 events a minute per connection) would throttle the harness,
        // whose personas publish their replies over one shared connection. This relay listens on
        // loopback for the operator's own agents: the cap only guards against a runaway client.
        let mut builder = RelayBuilder::default()
            .addr(addr.ip())
            .rate_limit(RateLimit {
                max_reqs: 500,
                notes_per_minute: NOTES_PER_MINUTE,
            });
        if require_auth {
            builder = builder.nip42(RelayBuilderNip42 {
                mode: RelayBuilderNip42Mode::Both,
            });
        }
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|e| anyhow::anyhow!("cannot start the embedded relay on {addr}: {e}"))?;
        let local = listener.local_addr()?;
        builder = builder.port(local.port());
        let mut restored = 0;
        if let Some(path) = journal {
            let db = Journal::open(path).await?;
            restored = db.restored;
            builder = builder.database(db);
        }
        let relay = LocalRelay::new(builder);
        let accept = serve(relay.clone(), listener).abort_handle();
        Ok(Embedded {
            relay,
            accept,
            url: format!("ws://{local}"),
            restored,
        })
    }

    pub fn shutdown(&self) {
        self.accept.abort();
        self.relay.shutdown();
    }
}

impl Drop for Embedded {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

/// Serves `relay` to the connections `listener` accepts, with Nagle's algorithm off on each.
///
/// `LocalRelay::run` accepts with Nagle on, so a relay fanning events out to a subscriber holds
/// each small frame back until the previous one is acknowledged, and the subscriber acknowledges
/// late (delayed ACK). In the `live_agents` bench that kept an event 6 ms (p50) and up to 40 ms
/// between its publication and the harness; with Nagle off, 0.35 ms (p50).
pub fn serve(relay: LocalRelay, listener: TcpListener) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            let (stream, peer) = match listener.accept().await {
                Ok(accepted) => accepted,
                Err(e) => {
                    // E.g. out of file descriptors: wait rather than spin on the error.
                    tracing::warn!("relay: cannot accept a connection: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let relay = relay.clone();
            tokio::spawn(async move {
                if let Err(e) = serve_connection(&relay, stream, peer).await {
                    tracing::debug!("relay: connection from {peer} ended: {e}");
                }
            });
        }
    })
}

async fn serve_connection(
    relay: &LocalRelay,
    mut stream: TcpStream,
    peer: SocketAddr,
) -> anyhow::Result<()> {
    stream.set_nodelay(true)?;
    // The handshake is done here and the upgraded stream handed over. A client sends no frame
    // before the server's 101 response (RFC 6455 §4.1), so the handshake reads nothing past the
    // request; one that does anyway has those bytes dropped, and its connection fails.
    let upgraded = tokio::time::timeout(
        HANDSHAKE_TIMEOUT,
        tokio_tungstenite::accept_async(&mut stream),
    )
    .await
    .map_err(|_| anyhow::anyhow!("no websocket handshake within {HANDSHAKE_TIMEOUT:?}"))??;
    drop(upgraded);
    relay
        .take_connection(stream, peer)
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))
}

/// The memory store plus an append-only journal of what it accepted.
#[derive(Debug)]
pub struct Journal {
    inner: MemoryDatabase,
    file: Mutex<std::fs::File>,
    path: PathBuf,
    restored: usize,
}

impl Journal {
    pub async fn open(path: &Path) -> anyhow::Result<Journal> {
        use anyhow::Context;
        if let Some(dir) = path.parent() {
            create_private_dir(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        let inner = MemoryDatabase::with_opts(MemoryDatabaseOptions {
            events: true,
            max_events: Some(MAX_EVENTS),
        });
        let mut restored = 0;
        match std::fs::metadata(path) {
            Ok(m) if m.len() > MAX_JOURNAL => tracing::warn!(
                "relay journal {} is over {MAX_JOURNAL} bytes; not replayed",
                path.display()
            ),
            Ok(_) => {
                let f = std::fs::File::open(path)
                    .with_context(|| format!("opening {}", path.display()))?;
                let mut reader = std::io::BufReader::new(f);
                let mut line = Vec::new();
                loop {
                    line.clear();
                    match reader.read_until(b'\n', &mut line) {
                        Ok(0) | Err(_) => break,
                        Ok(_) => {}
                    }
                    if line.len() > MAX_LINE {
                        continue;
                    }
                    let Ok(text) = std::str::from_utf8(&line) else {
                        continue;
                    };
                    let Ok(ev) = Event::from_json(text.trim()) else {
                        continue;
                    };
                    if ev.verify().is_err() {
                        continue;
                    }
                    if let Ok(status) = inner.save_event(&ev).await
                        && status.is_success()
                    {
                        restored += 1;
                    }
                }
            }
            Err(_) => {}
        }
        let mut opts = std::fs::OpenOptions::new();
        opts.create(true).append(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            opts.mode(0o600);
        }
        let file = opts
            .open(path)
            .with_context(|| format!("opening {}", path.display()))?;
        Ok(Journal {
            inner,
            file: Mutex::new(file),
            path: path.to_path_buf(),
            restored,
        })
    }

    fn append(&self, event: &Event) {
        let mut line = event.as_json();
        line.push('\n');
        let mut f = self.file.lock().unwrap_or_else(|e| e.into_inner());
        if let Err(e) = f.write_all(line.as_bytes()) {
            tracing::warn!("relay journal {}: {e}", self.path.display());
        }
    }
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

impl NostrDatabase for Journal {
    fn backend(&self) -> Backend {
        Backend::Custom("apiary-journal".to_string())
    }

    fn save_event<'a>(
        &'a self,
        event: &'a Event,
    ) -> BoxedFuture<'a, Result<SaveEventStatus, DatabaseError>> {
        Box::pin(async move {
            let status = self.inner.save_event(event).await?;
            if status.is_success() && !event.kind.is_ephemeral() {
                self.append(event);
            }
            Ok(status)
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

    /// A relay on a free loopback port without a journal.
    async fn relay() -> Embedded {
        Embedded::start("127.0.0.1:0".parse().unwrap(), None)
            .await
            .unwrap()
    }

    /// A client of `relay` signing with new keys.
    async fn client(relay: &Embedded) -> (nostr_sdk::Client, Keys) {
        let keys = Keys::generate();
        let client =
            crate::relay::connect_as(&relay.url, Duration::from_secs(5), Some(keys.clone()))
                .await
                .unwrap();
        (client, keys)
    }

    async fn relay_and_client() -> (Embedded, nostr_sdk::Client, Keys) {
        let relay = relay().await;
        let (client, keys) = client(&relay).await;
        (relay, client, keys)
    }

    #[tokio::test]
    async fn one_connection_may_publish_faster_than_one_event_a_second() {
        let (relay, client, keys) = relay_and_client().await;
        for i in 0..150 {
            let ev =
                crate::relay::message(&keys, "general", &format!("reply {i}"), vec![]).unwrap();
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
        let ev = crate::relay::message(&keys, "general", "still served", vec![]).unwrap();
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
        let ev = crate::relay::message(&keys, "general", "kept", vec![]).unwrap();
        {
            let j = Journal::open(&path).await.unwrap();
            assert!(j.save_event(&ev).await.unwrap().is_success());
        }
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(b"not json\n")
            .unwrap();
        let j = Journal::open(&path).await.unwrap();
        assert_eq!(j.restored, 1);
        assert_eq!(j.event_by_id(&ev.id).await.unwrap(), Some(ev));
    }

    #[tokio::test]
    async fn required_auth_keeps_unauthenticated_clients_out() {
        use std::time::Duration;
        let relay = Embedded::start_with("127.0.0.1:0".parse().unwrap(), None, true)
            .await
            .unwrap();
        let t = Duration::from_secs(5);
        let keys = Keys::generate();
        let authed = crate::relay::connect_as(&relay.url, t, Some(keys.clone()))
            .await
            .unwrap();
        let anon = crate::relay::connect(&relay.url, t).await.unwrap();
        let ev = crate::relay::message(&keys, "general", "members only", vec![]).unwrap();

        // Without a key the relay refuses both directions.
        assert!(anon.send_event(&ev).await.unwrap().success.is_empty());
        let filter = crate::relay::channel_filter(&["general".into()], Timestamp::from(0));
        let seen = anon.fetch_events(filter.clone(), t).await;
        assert!(seen.map(|e| e.is_empty()).unwrap_or(true));

        // With one, the client answers the challenge and retries by itself.
        assert!(!authed.send_event(&ev).await.unwrap().success.is_empty());
        let seen = authed.fetch_events(filter.clone(), t).await.unwrap();
        assert_eq!(seen.first().map(|e| e.id), Some(ev.id));
        let seen = anon.fetch_events(filter, t).await;
        assert!(seen.map(|e| e.is_empty()).unwrap_or(true));
        relay.shutdown();
    }
}
