//! The embedded relay's front door: every connection is accepted here and then handed to the relay
//! library through an in-memory pipe, so that what the library cannot be told is enforced first:
//!
//! - a plain HTTP request asking for `application/nostr+json` gets the relay information document
//!   (NIP-11: the relay's `pubkey`, its limits) instead of a websocket;
//! - websocket messages are capped: an EVENT over the event size limit is answered `OK false`
//!   without reaching the relay, a message over [`Limits::max_message_bytes`] ends the connection
//!   (close code 1009) before it is buffered whole;
//! - with NIP-42 required, an `AUTH` from a key outside the [`AllowList`] is answered `OK false`
//!   and not passed on, so the connection stays unauthenticated and the library keeps refusing
//!   its reads and writes;
//! - without NIP-42, a client's `EVENT` is taken here through the relay's [`Door`] (id and
//!   signature checked, the write policy, stored, fanned out, answered) instead of being framed
//!   again for the library, which would parse it a second time; subscriptions stay the library's.
//!
//! Nagle's algorithm is off on every connection: with it on, a relay fanning many small frames out
//! to a subscriber held each one back until the previous one was acknowledged (6 ms at p50 in the
//! `live_agents` bench, 0.35 ms without).

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use futures_util::{SinkExt, StreamExt};
use nostr_relay_builder::prelude::*;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio_tungstenite::tungstenite::Message as Ws;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, Role, WebSocketConfig};

use super::embedded::Door;
use super::keys::KeyStore;
use super::limits::{Admission, Limits};

/// A client that has not finished its websocket handshake by then is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// An HTTP request head larger than this is refused.
const MAX_REQUEST_HEAD: usize = 16 * 1024;
/// Bytes in flight between the front and the relay library, per connection.
const PIPE_BYTES: usize = 256 * 1024;
/// What one read of a websocket takes in. tungstenite zero-fills its whole spare read buffer
/// before every read (128 KiB by default): with events of a few hundred bytes that `memset` was
/// the relay thread's largest single cost (18% of it at 2,500 msg/s). Larger frames still grow
/// the buffer to their length.
const READ_BUFFER: usize = 16 * 1024;

/// Who may authenticate (NIP-42) when the relay requires it: the keys of the operator's key store
/// (the operator's and every persona's; the store is looked at again whenever an unknown key asks,
/// so personas started after the relay are admitted) and keys named by the operator. A key file is
/// read once per modification time, so a stranger repeating `AUTH` costs a directory listing.
#[derive(Debug)]
pub struct AllowList {
    extra: HashSet<PublicKey>,
    store: Option<KeyStore>,
    cache: Mutex<HashMap<PathBuf, KeyFile>>,
}

/// A key file as last read: its modification time and public key.
type KeyFile = (Option<SystemTime>, Option<PublicKey>);

impl AllowList {
    pub fn new(store: Option<KeyStore>, extra: impl IntoIterator<Item = PublicKey>) -> AllowList {
        AllowList {
            extra: extra.into_iter().collect(),
            store,
            cache: Mutex::default(),
        }
    }

    pub fn allows(&self, key: &PublicKey) -> bool {
        if self.extra.contains(key) {
            return true;
        }
        let Some(store) = &self.store else {
            return false;
        };
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        let files = store.key_files();
        cache.retain(|path, _| files.contains(path));
        for path in files {
            let modified = std::fs::metadata(&path).and_then(|m| m.modified()).ok();
            // An unreadable file (e.g. one being written) is read again next time.
            let fresh = cache
                .get(&path)
                .is_some_and(|(m, pk)| *m == modified && m.is_some() && pk.is_some());
            if !fresh {
                let pk = super::keys::public_key_of(&path);
                cache.insert(path, (modified, pk));
            }
        }
        cache.values().any(|(_, pk)| pk.as_ref() == Some(key))
    }
}

/// What the front needs for every connection.
#[derive(Debug)]
pub struct Front {
    pub limits: Limits,
    /// The NIP-11 document, as served.
    pub info: String,
    /// `Some` when NIP-42 is required: who may authenticate.
    pub allow: Option<AllowList>,
    pub admission: Arc<Admission>,
    /// Where the front stores and fans out a client's events itself; `None`
    /// when NIP-42 is required, whose per-connection state only the library knows.
    pub door: Option<Door>,
}

impl Front {
    /// The relay information document (NIP-11) for a relay signing with `pubkey`.
    pub fn info_document(pubkey: &PublicKey, limits: &Limits, auth: bool) -> String {
        serde_json::json!({
            "name": "apiary embedded relay",
            "description": "The relay `apiary up` and `apiary relay` run on loopback.",
            "pubkey": pubkey.to_hex(),
            "software": "apiary",
            "version": env!("CARGO_PKG_VERSION"),
            "supported_nips": [1, 10, 11, 29, 42],
            "limitation": {
                "max_message_length": limits.max_event_bytes,
                "auth_required": auth,
                "restricted_writes": true,
            },
        })
        .to_string()
    }
}

/// Serves `relay` to the connections `listener` accepts, each through [`serve_connection`].
pub fn serve(
    relay: LocalRelay,
    listener: TcpListener,
    front: Arc<Front>,
) -> tokio::task::JoinHandle<()> {
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
            let front = Arc::clone(&front);
            tokio::spawn(async move {
                if let Err(e) = serve_connection(&relay, stream, peer, &front).await {
                    tracing::debug!("relay: connection from {peer} ended: {e}");
                }
                front.admission.forget(peer);
            });
        }
    })
}

/// Why the front stopped serving a connection (logged at debug level, never shown otherwise).
#[derive(Debug, thiserror::Error)]
enum Ended {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("{0}")]
    Ws(#[from] tokio_tungstenite::tungstenite::Error),
    /// A message over the size cap (the client was sent close code 1009).
    #[error("{0}")]
    Capacity(tokio_tungstenite::tungstenite::error::CapacityError),
    #[error("no request within {HANDSHAKE_TIMEOUT:?}")]
    NoRequest,
    #[error("no websocket handshake within {HANDSHAKE_TIMEOUT:?}")]
    NoHandshake,
    #[error("closed before a request")]
    ClosedEarly,
    #[error("not an HTTP GET request")]
    NotGet,
    #[error("request head over {MAX_REQUEST_HEAD} bytes")]
    HeadTooLarge,
}

type ClientSocket = tokio_tungstenite::WebSocketStream<TcpStream>;
type LibrarySocket = tokio_tungstenite::WebSocketStream<tokio::io::DuplexStream>;

async fn serve_connection(
    relay: &LocalRelay,
    stream: TcpStream,
    peer: SocketAddr,
    front: &Front,
) -> Result<(), Ended> {
    let Some(mut client) = handshake(stream, front).await? else {
        return Ok(());
    };
    // The library gets the other end of a pipe, already "upgraded".
    let (ours, theirs) = tokio::io::duplex(PIPE_BYTES);
    let library = relay.clone();
    let served = tokio::spawn(async move {
        if let Err(e) = library.take_connection(theirs, peer).await {
            tracing::debug!("relay: connection from {peer}: {e}");
        }
    });
    let mut inner = tokio_tungstenite::WebSocketStream::from_raw_socket(
        ours,
        Role::Client,
        Some(pipe_config()),
    )
    .await;
    let result = relay_messages(front, peer, &mut client, &mut inner).await;
    // Close the library's side with a handshake (it answers our Close and then ends), so it does
    // not write into a pipe already gone (which it logs as an error).
    let _ = inner.close(None).await;
    let drained = async { while let Some(Ok(_)) = inner.next().await {} };
    let _ = tokio::time::timeout(Duration::from_secs(2), drained).await;
    drop(inner);
    let _ = served.await;
    result
}

/// The front's end of the pipe to the library (what the library sends its clients).
fn pipe_config() -> WebSocketConfig {
    WebSocketConfig::default().read_buffer_size(READ_BUFFER)
}

/// Reads the request head and answers it: the NIP-11 document (then `None`), or the websocket
/// handshake with the message caps set.
async fn handshake(stream: TcpStream, front: &Front) -> Result<Option<ClientSocket>, Ended> {
    stream.set_nodelay(true)?;
    let head = tokio::time::timeout(HANDSHAKE_TIMEOUT, peek_head(&stream))
        .await
        .map_err(|_| Ended::NoRequest)??;
    if wants_info(&head) {
        serve_info(stream, head.len(), &front.info).await?;
        return Ok(None);
    }
    let max = front.limits.max_message_bytes();
    let config = WebSocketConfig::default()
        .read_buffer_size(READ_BUFFER)
        .max_message_size(Some(max))
        .max_frame_size(Some(max));
    let client = tokio::time::timeout(
        HANDSHAKE_TIMEOUT,
        tokio_tungstenite::accept_async_with_config(stream, Some(config)),
    )
    .await
    .map_err(|_| Ended::NoHandshake)??;
    Ok(Some(client))
}

/// Passes messages both ways, screening the client's ([`screen`]), until either side closes.
async fn relay_messages(
    front: &Front,
    peer: SocketAddr,
    client: &mut ClientSocket,
    inner: &mut LibrarySocket,
) -> Result<(), Ended> {
    loop {
        tokio::select! {
            msg = client.next() => match msg {
                Some(Ok(Ws::Text(text))) => match screen(front, text.as_str()) {
                    Screened::Answer(answer) => client.send(Ws::text(answer)).await?,
                    Screened::Pass => inner.send(Ws::Text(text)).await?,
                    Screened::Take(event, door) => {
                        let answer = ok_message(event.id, door.accept(&event, peer).await);
                        client.send(Ws::text(answer)).await?
                    }
                },
                Some(Ok(Ws::Binary(b))) => inner.send(Ws::Binary(b)).await?,
                Some(Ok(Ws::Close(_))) | None => break,
                Some(Ok(_)) => {}
                Some(Err(tokio_tungstenite::tungstenite::Error::Capacity(e))) => {
                    let max = front.limits.max_message_bytes();
                    let frame = CloseFrame {
                        code: CloseCode::Size,
                        reason: format!("message over {max} bytes").into(),
                    };
                    let _ = client.send(Ws::Close(Some(frame))).await;
                    return Err(Ended::Capacity(e));
                }
                Some(Err(e)) => return Err(Ended::Ws(e)),
            },
            msg = inner.next() => match msg {
                Some(Ok(Ws::Text(text))) => client.send(Ws::Text(text)).await?,
                Some(Ok(Ws::Close(_))) | None | Some(Err(_)) => {
                    let _ = client.close(None).await;
                    break;
                }
                Some(Ok(_)) => {}
            },
        }
    }
    Ok(())
}

/// What the front does with a client message.
enum Screened<'f> {
    /// Answers it itself (a refusal), without passing it on.
    Answer(String),
    /// Passes it on to the relay library as it is.
    Pass,
    /// Takes the event through its door: checked, stored and fanned out with one parse and no
    /// round trip through the library's pipe (which would parse it again and answer through it).
    Take(Box<Event>, &'f Door),
}

/// The front's look at a client message: only EVENT and AUTH are looked at; anything else (and
/// anything unparsable, which the library refuses) goes through as is.
fn screen<'f>(front: &'f Front, text: &str) -> Screened<'f> {
    let head = text.trim_start().get(..16).unwrap_or(text);
    let kind = if head.contains("\"EVENT\"") {
        "EVENT"
    } else if head.contains("\"AUTH\"") {
        "AUTH"
    } else {
        return Screened::Pass;
    };
    let Ok(msg) = ClientMessage::from_json(text) else {
        return Screened::Pass;
    };
    let refuse = |id: EventId, why: String| Screened::Answer(ok_message(id, Err(why)));
    match msg {
        ClientMessage::Event(ev)
            if kind == "EVENT" && text.len() > front.limits.max_event_bytes =>
        {
            refuse(
                ev.id,
                format!(
                    "invalid: event message is {} bytes, over this relay's limit of {} bytes",
                    text.len(),
                    front.limits.max_event_bytes
                ),
            )
        }
        // A protected event (NIP-70) needs the connection's authentication, which the library
        // keeps.
        ClientMessage::Event(ev) if kind == "EVENT" && !ev.is_protected() => match &front.door {
            Some(door) => Screened::Take(Box::new(ev.into_owned()), door),
            None => Screened::Pass,
        },
        ClientMessage::Auth(ev) => match &front.allow {
            Some(allow) if !allow.allows(&ev.pubkey) => {
                tracing::warn!(pubkey = %ev.pubkey, "relay: refused authentication from a key outside the allow-list");
                refuse(
                    ev.id,
                    format!(
                        "restricted: {} is not authorised on this relay",
                        ev.pubkey.to_hex()
                    ),
                )
            }
            _ => Screened::Pass,
        },
        _ => Screened::Pass,
    }
}

/// The relay's `OK` for event `id`: accepted (with a note, e.g. a duplicate's) or refused, why.
fn ok_message(id: EventId, outcome: Result<&str, String>) -> String {
    let (status, message) = match outcome {
        Ok(note) => (true, note.to_string()),
        Err(why) => (false, why),
    };
    RelayMessage::Ok {
        event_id: id,
        status,
        message: Cow::Owned(message),
    }
    .as_json()
}

/// Waits until the request head (up to the blank line) has arrived, without consuming it: the
/// websocket handshake reads it again.
async fn peek_head(stream: &TcpStream) -> Result<Vec<u8>, Ended> {
    let mut buf = vec![0u8; MAX_REQUEST_HEAD];
    loop {
        let n = stream.peek(&mut buf).await?;
        if n == 0 {
            return Err(Ended::ClosedEarly);
        }
        // Only GET is served (NIP-11 and the websocket upgrade): anything else is dropped at once.
        let start = &buf[..n.min(4)];
        if !b"GET ".starts_with(start) {
            return Err(Ended::NotGet);
        }
        if let Some(end) = buf[..n].windows(4).position(|w| w == b"\r\n\r\n") {
            buf.truncate(end + 4);
            return Ok(buf);
        }
        if n == buf.len() {
            return Err(Ended::HeadTooLarge);
        }
        // Peeking again returns at once with the same bytes: wait for more to arrive.
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// A NIP-11 request: `Accept: application/nostr+json` and no websocket upgrade.
fn wants_info(head: &[u8]) -> bool {
    let text = String::from_utf8_lossy(head).to_ascii_lowercase();
    let header = |name: &str| {
        text.lines()
            .skip(1)
            .filter_map(|l| l.split_once(':'))
            .filter(|(k, _)| k.trim() == name)
            .map(|(_, v)| v.trim().to_string())
            .collect::<Vec<_>>()
    };
    let upgrade = header("upgrade").iter().any(|v| v.contains("websocket"));
    !upgrade
        && header("accept")
            .iter()
            .any(|v| v.contains("application/nostr+json"))
}

async fn serve_info(mut stream: TcpStream, head_len: usize, info: &str) -> std::io::Result<()> {
    use tokio::io::AsyncReadExt;
    let mut head = vec![0u8; head_len];
    stream.read_exact(&mut head).await?;
    let response = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/nostr+json\r\n\
         Access-Control-Allow-Origin: *\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{info}",
        info.len()
    );
    stream.write_all(response.as_bytes()).await?;
    stream.shutdown().await?;
    Ok(())
}

/// Where the NIP-11 document of a relay at `url` is (`ws` → `http`, `wss` → `https`).
pub fn info_url(url: &str) -> Option<String> {
    if let Some(rest) = url.strip_prefix("ws://") {
        Some(format!("http://{rest}"))
    } else {
        url.strip_prefix("wss://")
            .map(|rest| format!("https://{rest}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_requests_are_told_from_upgrades() {
        let info = b"GET / HTTP/1.1\r\nHost: x\r\nAccept: application/nostr+json\r\n\r\n";
        assert!(wants_info(info));
        let ws = b"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nAccept: application/nostr+json\r\n\r\n";
        assert!(!wants_info(ws));
        assert!(!wants_info(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
        assert_eq!(
            info_url("wss://r.example/x").unwrap(),
            "https://r.example/x"
        );
    }
}
