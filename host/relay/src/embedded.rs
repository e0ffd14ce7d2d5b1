//! The embedded relay: `nostr-relay-builder`'s `LocalRelay` on 127.0.0.1, for `apiary up` without
//! `--relay` and for `apiary relay`, behind [`front`](super::front) (NIP-11, parsing and size caps,
//! NIP-42) with [`Admission`] (kinds, rate limits) and a [`Store`] whose ledger shares storage out
//! (see [`ledger`](crate::ledger)). Clients' events and the harness's own reach the store through
//! the relay's [`Door`]; the library serves subscriptions.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use nostr_relay_builder::prelude::*;
use tokio::net::TcpListener;

use super::front::{AllowList, Front};
use super::limits::{Admission, Limits};
pub use crate::door::Door;
use crate::error::RelayError;
use crate::keys::KeyStore;
use crate::known_keys::{KnownKeys, Owners};
use crate::nip42::RelayIdentity;
pub use crate::store::{Fill, NotStored, Put, Store};

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
    /// The operator's key store: its keys' events are the operator's own (any kind, storage
    /// headroom), and with `auth` they may authenticate.
    pub key_store: Option<KeyStore>,
    /// `Some`: NIP-42 is required; the keys besides the key store's that may authenticate.
    pub auth: Option<Vec<PublicKey>>,
    /// `Some`: the relay's port also serves a Blossom blob server (pack archives).
    pub blobs: Option<BlobSettings>,
}

/// The blob server on the relay's port.
#[derive(Debug, Clone)]
pub struct BlobSettings {
    pub dir: PathBuf,
    pub caps: apiary_blobs::Caps,
    /// The URL blobs are announced at (`<url>/<sha256>`); default `http://<listen address>`.
    pub public_url: Option<String>,
}

impl Settings {
    /// Memory only, a new key, default limits, no key store, no authentication.
    pub fn ephemeral() -> Settings {
        Settings {
            journal: None,
            keys: Keys::generate(),
            limits: Limits::default(),
            key_store: None,
            auth: None,
            blobs: None,
        }
    }
}

pub struct Embedded {
    /// The relay library and its store, as the harness's replies reach them.
    door: Door,
    accept: tokio::task::AbortHandle,
    pub url: String,
    /// Where the blob server on the relay's port announces blobs, when it runs one.
    pub blobs_url: Option<String>,
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
    /// authenticate (NIP-42) with an allowed key before it may read or publish (the front
    /// answers a `REQ` or `COUNT` with `CLOSED` and an `EVENT` with `OK false`, both
    /// `auth-required`, and challenges the client again).
    pub async fn start_with(addr: SocketAddr, settings: Settings) -> Result<Embedded, RelayError> {
        let Settings {
            journal,
            keys,
            limits,
            key_store,
            auth,
            blobs,
        } = settings;
        let pubkey = keys.public_key();
        let known = Arc::new(KnownKeys::new(key_store));
        let owners = Owners {
            relay: pubkey,
            known: Arc::clone(&known),
        };
        let store = Arc::new(Store::open(journal.as_deref(), limits, owners.clone()).await?);
        let restored = store.restored;
        let admission = Arc::new(Admission::new(limits, owners));
        let builder = RelayBuilder::default()
            .addr(addr.ip())
            .max_connections(MAX_CONNECTIONS)
            .rate_limit(RateLimit {
                max_reqs: 500,
                notes_per_minute: LIBRARY_NOTES_PER_MINUTE,
            })
            .database(Arc::clone(&store));
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|error| RelayError::Bind { addr, error })?;
        let local = listener.local_addr()?;
        let relay = LocalRelay::new(builder.port(local.port()));
        let door = Door {
            relay: relay.clone(),
            store,
            admission: Arc::clone(&admission),
            taps: Default::default(),
        };
        let blobs = match blobs {
            Some(b) => {
                let store = apiary_blobs::BlobStore::open(&b.dir, b.caps)
                    .map_err(|e| RelayError::file("opening the blob store", &b.dir, e))?;
                let public_url = b.public_url.unwrap_or_else(|| format!("http://{local}"));
                Some(Arc::new(apiary_blobs::BlobServer { store, public_url }))
            }
            None => None,
        };
        let blobs_url = blobs.as_ref().map(|b| b.public_url.clone());
        let front = Front {
            blobs,
            info: Front::info_document(&pubkey, &limits, auth.is_some()),
            limits,
            allow: auth.map(|extra| AllowList::new(known, extra)),
            identity: RelayIdentity::new(local),
            door: door.clone(),
        };
        let accept = super::front::serve(relay, listener, Arc::new(front)).abort_handle();
        Ok(Embedded {
            door,
            accept,
            url: format!("ws://{local}"),
            blobs_url,
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

    /// The store's fill each time it passes 80% (see [`Store::alarms`]).
    pub fn storage_alarms(&self) -> tokio::sync::watch::Receiver<Option<Fill>> {
        self.door.store.alarms()
    }
}

impl Drop for Embedded {
    fn drop(&mut self) {
        self.accept.abort();
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
        // The storage cap still holds (own events are never evicted).
        let over = crate::message(&persona, "general", "one too many", vec![]).unwrap();
        let why = door.publish(&over).await.unwrap_err();
        assert!(why.contains("storage full"), "{why}");
        // And what went through the door is journaled like any event.
        relay.shutdown();
        let owners = Owners {
            relay: relay.pubkey,
            known: Arc::new(KnownKeys::new(None)),
        };
        let replayed = Store::open(Some(&journal), Limits::default(), owners)
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
    async fn required_auth_keeps_unauthenticated_clients_out() {
        use std::time::Duration;
        let keys = Keys::generate();
        let settings = Settings {
            auth: Some(vec![keys.public_key()]),
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
