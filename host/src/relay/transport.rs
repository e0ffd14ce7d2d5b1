//! The websocket transport of apiary's relay connections: nostr-sdk's default, with Nagle's
//! algorithm off.
//!
//! nostr-sdk's default transport connects without `TCP_NODELAY`, so when a client sends frames in
//! quick succession (the harness publishing replies, a burst of posts), each small frame waits for
//! the previous one to be acknowledged, and the relay acknowledges late (delayed ACK): up to 40 ms
//! a frame. The embedded relay turns it off on its side ([`super::embedded::serve`]); this turns it
//! off on ours, for any relay.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use async_wsocket::{Message, WebSocket};
use futures_util::stream::SplitSink;
use futures_util::{Sink, SinkExt, StreamExt, TryStreamExt};
use nostr_sdk::nostr::util::BoxedFuture;
use nostr_sdk::pool::ConnectionMode;
use nostr_sdk::pool::transport::error::TransportError;
use nostr_sdk::pool::transport::websocket::{
    DefaultWebsocketTransport, WebSocketSink, WebSocketStream, WebSocketTransport,
};
use nostr_sdk::prelude::Url;
use tokio::net::TcpStream;

#[derive(Debug, Clone, Copy, Default)]
pub struct NoDelay;

impl WebSocketTransport for NoDelay {
    fn support_ping(&self) -> bool {
        DefaultWebsocketTransport.support_ping()
    }

    fn connect<'a>(
        &'a self,
        url: &'a Url,
        mode: &'a ConnectionMode,
        timeout: Duration,
    ) -> BoxedFuture<'a, Result<(WebSocketSink, WebSocketStream), TransportError>> {
        if !matches!(mode, ConnectionMode::Direct) {
            // Through a proxy the proxy's connection is the one that matters: the default's.
            return DefaultWebsocketTransport.connect(url, mode, timeout);
        }
        Box::pin(async move {
            let socket = tokio::time::timeout(timeout, connect_direct(url))
                .await
                .map_err(|_| TransportError::backend(TimedOut(timeout)))??;
            let (tx, rx) = socket.split();
            let sink: WebSocketSink = Box::new(Sender(tx));
            let stream: WebSocketStream = Box::pin(rx.map_err(TransportError::backend));
            Ok((sink, stream))
        })
    }
}

async fn connect_direct(url: &Url) -> Result<WebSocket, TransportError> {
    let host = url
        .host_str()
        .ok_or_else(|| TransportError::backend(BadUrl("no host")))?;
    let port = url
        .port_or_known_default()
        .ok_or_else(|| TransportError::backend(BadUrl("no port")))?;
    // Tokio tries each resolved address in turn; an IPv6 literal comes bracketed in a URL.
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let tcp = TcpStream::connect((host, port))
        .await
        .map_err(TransportError::backend)?;
    tcp.set_nodelay(true).map_err(TransportError::backend)?;
    let (ws, _) = tokio_tungstenite::client_async_tls(url.as_str(), tcp)
        .await
        .map_err(TransportError::backend)?;
    Ok(WebSocket::Tokio(ws))
}

#[derive(Debug, thiserror::Error)]
#[error("connecting timed out after {0:?}")]
struct TimedOut(Duration);

#[derive(Debug, thiserror::Error)]
#[error("bad relay URL: {0}")]
struct BadUrl(&'static str);

/// The sink half with the transport's error type (mapping each call, as the default does).
struct Sender(SplitSink<WebSocket, Message>);

impl Sink<Message> for Sender {
    type Error = TransportError;

    fn poll_ready(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.0.poll_ready_unpin(cx).map_err(TransportError::backend)
    }

    fn start_send(mut self: Pin<&mut Self>, item: Message) -> Result<(), Self::Error> {
        self.0
            .start_send_unpin(item)
            .map_err(TransportError::backend)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.0.poll_flush_unpin(cx).map_err(TransportError::backend)
    }

    fn poll_close(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.0.poll_close_unpin(cx).map_err(TransportError::backend)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn connect(url: &str, timeout: Duration) -> Result<(), TransportError> {
        let url = Url::parse(url).unwrap();
        NoDelay
            .connect(&url, &ConnectionMode::Direct, timeout)
            .await
            .map(drop)
    }

    #[tokio::test]
    async fn refused_and_silent_relays_are_errors_not_hangs() {
        // A port nobody listens on: refused.
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = closed.local_addr().unwrap().port();
        drop(closed);
        assert!(
            connect(&format!("ws://127.0.0.1:{port}"), Duration::from_secs(5))
                .await
                .is_err()
        );
        // A listener that accepts and never answers the handshake: given up at the timeout.
        let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("ws://{}", silent.local_addr().unwrap());
        let held = tokio::spawn(async move { silent.accept().await });
        let err = connect(&url, Duration::from_millis(300)).await.unwrap_err();
        assert!(err.to_string().contains("timed out"), "{err}");
        held.abort();
    }

    #[tokio::test]
    async fn talks_to_the_embedded_relay() {
        let relay = crate::relay::embedded::Embedded::start("127.0.0.1:0".parse().unwrap(), None)
            .await
            .unwrap();
        let url = Url::parse(&relay.url).unwrap();
        let (mut sink, mut stream) = NoDelay
            .connect(&url, &ConnectionMode::Direct, Duration::from_secs(5))
            .await
            .unwrap();
        sink.send(Message::Text(r#"["REQ","s",{"limit":0}]"#.into()))
            .await
            .unwrap();
        let reply = stream.next().await.unwrap().unwrap();
        assert_eq!(reply, Message::Text(r#"["EOSE","s"]"#.into()));
        relay.shutdown();
    }
}
