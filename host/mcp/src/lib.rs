//! apiary's own MCP server, offered to every persona's agent in `session/new`.
//!
//! One listener on the host's loopback serves every session; each session is handed a bearer token
//! of its own ([`Server::grant`]), and a request is served only with a token that is granted, by
//! the [`Backend`] it was granted for: the harness, answering for that persona and that session's
//! channel. A confined agent reaches the listener only through its own egress route (its network
//! namespace has no other way out), so the token decides whose tools a request gets, and nothing
//! without one gets any.
//!
//! The transport is MCP's streamable HTTP (the official SDK, `rmcp`), stateless, answering with
//! JSON. Agents that take stdio servers only get [`bridge`]: apiary's own binary relaying each
//! line of its stdin to the listener and each answer back.
//!
//! Tool inputs are hostile ([`tools`]): every field is typed, bounded and checked before the
//! backend sees it, and a refusal is a tool error the model can read, never a protocol failure.

pub mod bridge;
mod http;
pub mod tools;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, Weak};

use futures_util::future::BoxFuture;
use sha2::{Digest, Sha256};

pub use tools::{ToolCall, ToolError};

/// The name agents know the server by (`mcp__apiary__read_thread` in Claude Code).
pub const SERVER_NAME: &str = "apiary";
/// The path the server answers on.
pub const PATH: &str = "/mcp";

/// What answers one session's tool calls (the harness, for one persona and channel).
pub trait Backend: Send + Sync + 'static {
    /// Runs a checked call; the value is the tool's structured result.
    fn call(&self, call: ToolCall) -> BoxFuture<'_, Result<serde_json::Value, ToolError>>;
}

/// Granted tokens, by their SHA-256 (the token itself is not kept).
type Sessions = Mutex<HashMap<[u8; 32], Arc<dyn Backend>>>;

/// The running server.
pub struct Server {
    addr: SocketAddr,
    sessions: Arc<Sessions>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A granted token; the session's tools end when it is dropped.
pub struct Grant {
    pub token: String,
    key: [u8; 32],
    sessions: Weak<Sessions>,
}

impl std::fmt::Debug for Grant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Grant(..)")
    }
}

impl Drop for Grant {
    fn drop(&mut self) {
        if let Some(sessions) = self.sessions.upgrade() {
            lock(&sessions).remove(&self.key);
        }
    }
}

impl Server {
    /// Listens on `addr` (a loopback address; port 0 picks one). Must be called within a tokio
    /// runtime.
    pub async fn bind(addr: SocketAddr) -> std::io::Result<Server> {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let sessions: Arc<Sessions> = Arc::default();
        let task = tokio::spawn(http::serve(listener, Arc::clone(&sessions)));
        Ok(Server {
            addr,
            sessions,
            task,
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// A new random token whose requests `backend` answers.
    pub fn grant(&self, backend: Arc<dyn Backend>) -> Grant {
        let mut raw = [0u8; 32];
        getrandom::fill(&mut raw).expect("the system's random source");
        let token = hex::encode(raw);
        let key = digest(&token);
        lock(&self.sessions).insert(key, backend);
        Grant {
            token,
            key,
            sessions: Arc::downgrade(&self.sessions),
        }
    }

    /// Sessions granted and not yet dropped.
    pub fn granted(&self) -> usize {
        lock(&self.sessions).len()
    }
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    //! The server over real HTTP: the handshake, the tool list, a call answered by its session's
    //! backend, and requests without a granted token refused.

    use super::*;
    use serde_json::{Value, json};

    struct Echo(&'static str);

    impl Backend for Echo {
        fn call(&self, call: ToolCall) -> BoxFuture<'_, Result<Value, ToolError>> {
            Box::pin(async move {
                match call {
                    ToolCall::Post { text, .. } => Ok(json!({"session": self.0, "posted": text})),
                    _ => Err(ToolError::new("only post here")),
                }
            })
        }
    }

    fn post(url: &str, token: Option<&str>, body: Value) -> (u16, Value) {
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build()
            .new_agent();
        let mut req = agent
            .post(url)
            .header("Accept", "application/json, text/event-stream")
            .header("MCP-Protocol-Version", "2025-06-18");
        if let Some(t) = token {
            req = req.header("Authorization", &format!("Bearer {t}"));
        }
        let mut res = req
            .header("Content-Type", "application/json")
            .send(body.to_string())
            .unwrap();
        let status = res.status().as_u16();
        let text = res.body_mut().read_to_string().unwrap();
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn each_token_reaches_its_own_backend_and_no_token_reaches_any() {
        let server = Server::bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
        let url = format!("http://{}{PATH}", server.addr());
        let a = server.grant(Arc::new(Echo("a")));
        let b = server.grant(Arc::new(Echo("b")));
        let (ta, tb) = (a.token.clone(), b.token.clone());
        let u = url.clone();
        let (init, list, call_a, call_b, refused, bad) = tokio::task::spawn_blocking(move || {
            let init = post(
                &u,
                Some(&ta),
                json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                           "clientInfo": {"name": "t", "version": "1"}}}),
            );
            let list = post(
                &u,
                Some(&ta),
                json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
            );
            let call = |t: &str| {
                post(
                    &u,
                    Some(t),
                    json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                "params": {"name": "post", "arguments": {"text": "hello"}}}),
                )
            };
            let refused = post(
                &u,
                Some(&"0".repeat(64)),
                json!({"jsonrpc": "2.0", "id": 4, "method": "tools/list"}),
            );
            let bad = post(
                &u,
                Some(&ta),
                json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
                "params": {"name": "post", "arguments": {"text": "hi", "channel": "a\u{7}"}}}),
            );
            (init, list, call(&ta), call(&tb), refused, bad)
        })
        .await
        .unwrap();
        assert_eq!(init.0, 200, "{init:?}");
        assert_eq!(init.1["result"]["serverInfo"]["name"], "apiary", "{init:?}");
        let names: Vec<&str> = list.1["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            [
                "read_thread",
                "read_channel",
                "search_channel",
                "post",
                "list_personas"
            ]
        );
        assert_eq!(
            call_a.1["result"]["structuredContent"]["session"], "a",
            "{call_a:?}"
        );
        assert_eq!(
            call_b.1["result"]["structuredContent"]["session"], "b",
            "{call_b:?}"
        );
        assert_eq!(refused.0, 401, "{refused:?}");
        assert_eq!(bad.1["result"]["isError"], true, "{bad:?}");
        // A dropped grant's token stops working; the other session's goes on.
        let (ta, tb) = (a.token.clone(), b.token.clone());
        drop(a);
        assert_eq!(server.granted(), 1);
        let (gone, kept) = tokio::task::spawn_blocking(move || {
            let list = json!({"jsonrpc": "2.0", "id": 6, "method": "tools/list"});
            (
                post(&url, Some(&ta), list.clone()),
                post(&url, Some(&tb), list),
            )
        })
        .await
        .unwrap();
        assert_eq!((gone.0, kept.0), (401, 200));
    }
}
