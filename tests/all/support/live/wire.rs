//! A raw NIP-01 client for hostile tests: it sends what a stranger would (events signed with keys of
//! its own, oversized or malformed messages, unlisted `AUTH`s) and reports what the relay answered.

use std::net::TcpStream;
use std::time::{Duration, Instant};

use nostr::prelude::*;
use serde_json::{Value, json};
use tungstenite::stream::MaybeTlsStream;

pub struct Wire {
    ws: tungstenite::WebSocket<MaybeTlsStream<TcpStream>>,
    /// Every relay message read so far.
    pub got: Vec<Value>,
    /// The connection was closed by the relay (or broke).
    pub closed: bool,
}

/// What the relay answered to one EVENT.
#[derive(Debug)]
pub struct Ok {
    pub accepted: bool,
    pub message: String,
}

impl Wire {
    pub fn connect(url: &str) -> Wire {
        let (ws, _) = tungstenite::connect(url).expect("websocket to the relay");
        if let MaybeTlsStream::Plain(tcp) = ws.get_ref() {
            tcp.set_read_timeout(Some(Duration::from_millis(500)))
                .unwrap();
        }
        Wire {
            ws,
            got: Vec::new(),
            closed: false,
        }
    }

    /// Sends a text message; `false` when the connection is gone.
    pub fn send_text(&mut self, text: String) -> bool {
        let sent = self.ws.send(tungstenite::Message::text(text)).is_ok();
        if !sent {
            self.closed = true;
        }
        sent
    }

    pub fn send(&mut self, msg: Value) -> bool {
        self.send_text(msg.to_string())
    }

    /// The next relay message matching `pred` within `within`; `None` on timeout or close.
    pub fn wait(&mut self, within: Duration, pred: impl Fn(&Value) -> bool) -> Option<Value> {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline && !self.closed {
            match self.ws.read() {
                Ok(tungstenite::Message::Text(t)) => {
                    let v: Value = serde_json::from_str(t.as_str()).expect("relay sent JSON");
                    self.got.push(v.clone());
                    if pred(&v) {
                        return Some(v);
                    }
                }
                Ok(tungstenite::Message::Close(_)) => self.closed = true,
                Ok(_) => {}
                Err(tungstenite::Error::Io(e))
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                Err(_) => self.closed = true,
            }
        }
        None
    }

    /// Publishes `event` and waits for the relay's OK.
    pub fn publish(&mut self, event: &Event) -> Option<Ok> {
        let id = event.id.to_hex();
        if !self.send(json!(["EVENT", event])) {
            return None;
        }
        let ok = self.wait(Duration::from_secs(20), |m| m[0] == "OK" && m[1] == id)?;
        Some(Ok {
            accepted: ok[2] == true,
            message: ok[3].as_str().unwrap_or_default().to_string(),
        })
    }

    /// Opens a subscription and returns the events stored for it (`None` when it was closed
    /// instead, with the CLOSED message).
    pub fn req(&mut self, filter: Value) -> Result<Vec<Value>, Value> {
        let sub = format!("s{}", self.got.len());
        self.send(json!(["REQ", sub, filter]));
        let end = self
            .wait(Duration::from_secs(20), |m| {
                (m[0] == "EOSE" || m[0] == "CLOSED") && m[1] == sub.as_str()
            })
            .expect("EOSE or CLOSED");
        if end[0] == "CLOSED" {
            return Err(end);
        }
        Ok(self
            .got
            .iter()
            .filter(|m| m[0] == "EVENT" && m[1] == sub.as_str())
            .map(|m| m[2].clone())
            .collect())
    }

    /// Answers the relay's latest AUTH challenge with `keys`; the relay's OK.
    pub fn auth(&mut self, keys: &Keys, url: &str) -> Ok {
        let challenge = match self.got.iter().rev().find(|m| m[0] == "AUTH") {
            Some(m) => m[1].as_str().unwrap().to_string(),
            None => self
                .wait(Duration::from_secs(10), |m| m[0] == "AUTH")
                .expect("an AUTH challenge")[1]
                .as_str()
                .unwrap()
                .to_string(),
        };
        let ev = EventBuilder::auth(challenge, RelayUrl::parse(url).unwrap())
            .sign_with_keys(keys)
            .unwrap();
        let id = ev.id.to_hex();
        self.send(json!(["AUTH", ev]));
        let ok = self
            .wait(Duration::from_secs(10), |m| m[0] == "OK" && m[1] == id)
            .expect("an OK for AUTH");
        Ok {
            accepted: ok[2] == true,
            message: ok[3].as_str().unwrap_or_default().to_string(),
        }
    }
}

/// A kind-9 message signed by `keys` with the given tags (`[name, value...]`).
pub fn message(keys: &Keys, content: &str, tags: &[&[&str]]) -> Event {
    signed(keys, 9, content, tags)
}

/// Kind 39000 group metadata: group `id` is named `name`.
pub fn group_metadata(keys: &Keys, id: &str, name: &str) -> Event {
    signed(keys, 39000, "", &[&["d", id], &["name", name]])
}

pub fn signed(keys: &Keys, kind: u16, content: &str, tags: &[&[&str]]) -> Event {
    let tags: Vec<Tag> = tags
        .iter()
        .map(|t| Tag::parse(t.iter().copied()).unwrap())
        .collect();
    EventBuilder::new(Kind::Custom(kind), content)
        .tags(tags)
        .sign_with_keys(keys)
        .unwrap()
}

/// The keys in a `<data>/keys/...` file.
pub fn keys_of(path: &std::path::Path) -> Keys {
    let text = std::fs::read_to_string(path).expect("key file");
    Keys::new(SecretKey::from_hex(text.trim()).unwrap())
}
