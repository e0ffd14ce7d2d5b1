//! The embedded relay's front door: every connection is accepted here and then handed to the relay
//! library through an in-memory pipe, so that what the library cannot be told is enforced first:
//!
//! - a plain HTTP request asking for `application/nostr+json` gets the relay information document
//!   (NIP-11: the relay's `pubkey`, its limits) instead of a websocket;
//! - a websocket message over [`Limits::max_message_bytes`] ends the connection (close code 1009)
//!   before it is buffered whole; every other message is parsed once and screened
//!   ([`screen`](crate::screen)): refused, answered (`AUTH`, `EVENT` through the relay's
//!   [`Door`]) or passed to the library as parsed (`REQ`, `COUNT`, `CLOSE`), never as sent;
//! - the library runs without NIP-42 of its own: the front keeps each connection's
//!   authentication, challenges on connect, and only lets an authenticated connection's
//!   requests through when authentication is required.
//!
//! Nagle's algorithm is off on every connection: with it on, a relay fanning many small frames out
//! to a subscriber held each one back until the previous one was acknowledged (6 ms at p50 in the
//! `live_agents` bench, 0.35 ms without).

mod screen;

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use nostr_relay_builder::prelude::*;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio_tungstenite::tungstenite::Message as Ws;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, Role, WebSocketConfig};

use super::limits::Limits;
use crate::door::Door;
use crate::known_keys::KnownKeys;
use crate::nip42::RelayIdentity;
use screen::{Screen, Step};

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
/// (the operator's and every persona's, looked up again for a key not known yet, so personas
/// started after the relay are admitted; see [`KnownKeys`]) and keys named by the operator.
#[derive(Debug)]
pub struct AllowList {
    extra: HashSet<PublicKey>,
    store: Arc<KnownKeys>,
}

impl AllowList {
    pub fn new(store: Arc<KnownKeys>, extra: impl IntoIterator<Item = PublicKey>) -> AllowList {
        AllowList {
            extra: extra.into_iter().collect(),
            store,
        }
    }

    pub fn allows(&self, key: &PublicKey) -> bool {
        self.extra.contains(key) || self.store.contains(key)
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
    /// The URL clients name when they authenticate.
    pub identity: RelayIdentity,
    /// Where the front stores and fans out a client's events itself.
    pub door: Door,
    /// The Blossom blob server plain HTTP requests go to, when the relay runs one.
    pub blobs: Option<Arc<apiary_blobs::BlobServer>>,
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
                "max_subid_length": crate::client_message::MAX_SUBSCRIPTION_ID_CHARS,
                "max_filters": crate::client_message::MAX_FILTERS,
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
                front.door.forget(peer);
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
    let result = relay_messages(Screen::new(front, peer), &mut client, &mut inner).await;
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
    let blobs = front.blobs.as_deref();
    let head = tokio::time::timeout(HANDSHAKE_TIMEOUT, peek_head(&stream, blobs.is_some()))
        .await
        .map_err(|_| Ended::NoRequest)??;
    if wants_info(&head) {
        serve_info(stream, head.len(), &front.info).await?;
        return Ok(None);
    }
    if let Some(blobs) = blobs
        && !is_upgrade(&head)
    {
        apiary_blobs::serve_connection(stream, blobs).await?;
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

/// Passes messages both ways, the client's through `screen`, until either side closes.
async fn relay_messages(
    mut screen: Screen<'_>,
    client: &mut ClientSocket,
    inner: &mut LibrarySocket,
) -> Result<(), Ended> {
    if let Some(challenge) = screen.greeting() {
        client.send(Ws::text(challenge)).await?;
    }
    loop {
        tokio::select! {
            msg = client.next() => match msg {
                Some(Ok(Ws::Text(text))) => match screen.on_text(text.as_str()).await {
                    Step::Reply(answers) => {
                        for answer in answers {
                            client.feed(Ws::text(answer)).await?;
                        }
                        client.flush().await?;
                    }
                    Step::Pass(json) => inner.send(Ws::text(json)).await?,
                },
                Some(Ok(Ws::Binary(_))) => client.send(Ws::text(BINARY_REFUSED)).await?,
                Some(Ok(Ws::Close(_))) | None => break,
                Some(Ok(_)) => {}
                Some(Err(tokio_tungstenite::tungstenite::Error::Capacity(e))) => {
                    let max = screen.max_message_bytes();
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

/// The answer to a binary websocket message (NIP-01 is text only).
const BINARY_REFUSED: &str = r#"["NOTICE","invalid: this relay reads text messages only"]"#;

/// Waits until the request head (up to the blank line) has arrived, without consuming it: the
/// websocket handshake reads it again.
async fn peek_head(stream: &TcpStream, blobs: bool) -> Result<Vec<u8>, Ended> {
    let mut buf = vec![0u8; MAX_REQUEST_HEAD];
    loop {
        let n = stream.peek(&mut buf).await?;
        if n == 0 {
            return Err(Ended::ClosedEarly);
        }
        // Only GET is served (NIP-11 and the websocket upgrade), and the blob server's methods
        // when it runs: anything else is dropped at once.
        let start = &buf[..n.min(4)];
        let blob_method = [b"PUT ", b"HEAD", b"OPTI"]
            .iter()
            .any(|m| m.starts_with(start));
        let served = b"GET ".starts_with(start) || (blobs && blob_method);
        if !served {
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

/// The values of header `name` in a request head (lower-cased).
fn header_values(head: &[u8], name: &str) -> Vec<String> {
    let text = String::from_utf8_lossy(head).to_ascii_lowercase();
    text.lines()
        .skip(1)
        .filter_map(|l| l.split_once(':'))
        .filter(|(k, _)| k.trim() == name)
        .map(|(_, v)| v.trim().to_string())
        .collect()
}

/// A websocket upgrade request.
fn is_upgrade(head: &[u8]) -> bool {
    header_values(head, "upgrade")
        .iter()
        .any(|v| v.contains("websocket"))
}

/// A NIP-11 request: `Accept: application/nostr+json` and no websocket upgrade.
fn wants_info(head: &[u8]) -> bool {
    !is_upgrade(head)
        && header_values(head, "accept")
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
