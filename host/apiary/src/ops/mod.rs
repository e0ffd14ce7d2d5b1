//! The operations endpoints of `apiary up --ops-addr ADDR` (off by default):
//!
//! - `/healthz`: 200 while the process serves.
//! - `/readyz`: 200 once the harness runs (every owned persona started or refused, the
//!   subscription open) and the relay connection is up; 503 otherwise, with why, as JSON.
//! - `/metrics`: Prometheus metrics ([`metrics`]): OpenMetrics, or the classic text format (0.0.4)
//!   when `Accept` asks for `text/plain` and not for OpenMetrics.
//! - `/personas/<pack-id>/<name>/.well-known/agent-card.json`: each owned persona's A2A agent card
//!   ([`card`]).
//!
//! A small HTTP/1.1 responder of its own ([`http`]): four read-only GET routes need no web
//! framework.

pub mod card;
mod http;
pub mod metrics;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};

use nostr_sdk::prelude::*;
use serde_json::{Value, json};
use tokio::net::TcpListener;

use crate::dispatch::{self, Note};
use http::{Request, Response};
pub use metrics::Metrics;

/// Connections still sending their request head, at most; a new one past this closes the oldest
/// of them, so idle or slow clients cannot keep a probe from being answered.
const PENDING_MAX: usize = 64;
/// Connections open at once (heads read, answers being written), at most; past this a new
/// connection is closed at once.
const CONNECTIONS_MAX: usize = 1024;

/// What the endpoints serve.
pub struct Ops {
    pub metrics: Metrics,
    /// Card path → card, its `url` complete.
    cards: BTreeMap<String, Value>,
    /// The harness's relay connection, once open.
    connection: Arc<OnceLock<Client>>,
    /// Where clients reach these endpoints (`--public-url`, else `http://<bound address>`): the
    /// cards' `url`. Never taken from a request's `Host`, which the client chooses.
    public_url: String,
}

impl Ops {
    pub fn new(public_url: String, connection: Arc<OnceLock<Client>>) -> Ops {
        Ops {
            metrics: Metrics::new(),
            cards: BTreeMap::new(),
            connection,
            public_url: public_url.trim_end_matches('/').to_string(),
        }
    }

    /// Adds the card of a persona this replica runs.
    pub fn add_card(&mut self, run: &dispatch::PackRun, index: usize, pubkey: Option<String>) {
        let name = &run.resolved.personas[index].identity.name;
        self.cards.insert(
            card::path(&run.resolved.pack.id, name),
            card::card(run, index, &self.public_url, pubkey),
        );
    }

    /// `out`, with every note counted first.
    pub fn observe(self: &Arc<Self>, out: dispatch::Out) -> dispatch::Out {
        let ops = Arc::clone(self);
        Arc::new(move |note: Note| {
            ops.metrics.observe(&note);
            out(note)
        })
    }

    async fn relay_connected(&self) -> bool {
        let Some(client) = self.connection.get() else {
            return false;
        };
        client
            .relays()
            .await
            .values()
            .any(|r| r.status() == RelayStatus::Connected)
    }

    async fn respond(&self, req: &Request) -> Response {
        match req.path.as_str() {
            "/healthz" => Response::text(200, "ok"),
            "/readyz" => self.readiness().await,
            "/metrics" => {
                let text = self.metrics.encode(self.relay_connected().await);
                match metrics::wants_classic(req.accept.as_deref()) {
                    true => Response::new(
                        200,
                        "text/plain; version=0.0.4; charset=utf-8",
                        metrics::classic(&text),
                    ),
                    false => Response::new(
                        200,
                        "application/openmetrics-text; version=1.0.0; charset=utf-8",
                        text,
                    ),
                }
            }
            path => match self.cards.get(path) {
                Some(card) => Response::new(200, "application/json", card.to_string()),
                None => Response::text(404, "not found"),
            },
        }
    }

    async fn readiness(&self) -> Response {
        let relay = self.relay_connected().await;
        let (running, personas) = self.metrics.running();
        let ready = relay && running && personas > 0;
        let body = json!({
            "ready": ready,
            "relay_connected": relay,
            "harness_running": running,
            "personas_ready": personas,
        });
        Response::new(
            if ready { 200 } else { 503 },
            "application/json",
            body.to_string(),
        )
    }
}

/// Binds the endpoints' address (before anything else starts, so a taken port stops `up` at once).
pub async fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(addr).await
}

/// Serves the endpoints until the runtime stops. Accepting never waits: a connection past
/// [`CONNECTIONS_MAX`] is closed, and one past [`PENDING_MAX`] closes the oldest that has not
/// sent its request yet (see [`Pending`]).
pub fn serve(listener: TcpListener, ops: Arc<Ops>) {
    let slots = Arc::new(tokio::sync::Semaphore::new(CONNECTIONS_MAX));
    let pending = Arc::new(Pending::default());
    tokio::spawn(async move {
        let mut next_id = 0u64;
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let Ok(permit) = Arc::clone(&slots).try_acquire_owned() else {
                drop(stream);
                continue;
            };
            next_id += 1;
            let (id, ops, waiting) = (next_id, Arc::clone(&ops), Arc::clone(&pending));
            let task = tokio::spawn(async move {
                let _permit = permit;
                http::serve_one(stream, ops, || waiting.done(id)).await;
            });
            pending.add(id, task.abort_handle());
        }
    });
}

/// The connections still sending their request head, oldest first.
#[derive(Default)]
struct Pending(std::sync::Mutex<std::collections::VecDeque<(u64, tokio::task::AbortHandle)>>);

impl Pending {
    fn add(&self, id: u64, task: tokio::task::AbortHandle) {
        let mut q = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if task.is_finished() {
            return;
        }
        q.push_back((id, task));
        while q.len() > PENDING_MAX {
            if let Some((_, oldest)) = q.pop_front() {
                oldest.abort();
            }
        }
    }

    /// Connection `id` has sent its head: it is answered, not evicted.
    fn done(&self, id: u64) {
        let mut q = self.0.lock().unwrap_or_else(|e| e.into_inner());
        q.retain(|(i, _)| *i != id);
    }
}
