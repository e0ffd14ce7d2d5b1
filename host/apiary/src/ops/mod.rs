//! The operations endpoints of `apiary up --ops-addr ADDR` (off by default):
//!
//! - `/healthz`: 200 while the process serves.
//! - `/readyz`: 200 once the harness runs (every owned persona started or refused, the
//!   subscription open) and the relay connection is up; 503 otherwise, with why, as JSON.
//! - `/metrics`: Prometheus metrics ([`metrics`]).
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

/// Connections served at once; more wait to be accepted.
const CONNECTIONS_MAX: usize = 32;

/// What the endpoints serve.
pub struct Ops {
    pub metrics: Metrics,
    /// Card path → card (its `url` relative; the request's host completes it).
    cards: BTreeMap<String, Value>,
    /// The harness's relay connection, once open.
    connection: Arc<OnceLock<Client>>,
    addr: SocketAddr,
}

impl Ops {
    pub fn new(addr: SocketAddr, connection: Arc<OnceLock<Client>>) -> Ops {
        Ops {
            metrics: Metrics::new(),
            cards: BTreeMap::new(),
            connection,
            addr,
        }
    }

    /// Adds the card of a persona this replica runs.
    pub fn add_card(&mut self, run: &dispatch::PackRun, index: usize, pubkey: Option<String>) {
        let name = &run.resolved.personas[index].identity.name;
        self.cards.insert(
            card::path(&run.resolved.pack.id, name),
            card::card(run, index, "", pubkey),
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
            "/metrics" => Response::new(
                200,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
                self.metrics.encode(self.relay_connected().await),
            ),
            path => match self.cards.get(path) {
                Some(card) => {
                    let mut card = card.clone();
                    let host = req.host.clone().unwrap_or_else(|| self.addr.to_string());
                    let url = format!("http://{host}{}", card["url"].as_str().unwrap_or_default());
                    card["url"] = Value::from(url);
                    Response::new(200, "application/json", card.to_string())
                }
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

/// Serves the endpoints until the runtime stops.
pub fn serve(listener: TcpListener, ops: Arc<Ops>) {
    let slots = Arc::new(tokio::sync::Semaphore::new(CONNECTIONS_MAX));
    tokio::spawn(async move {
        loop {
            let Ok(permit) = Arc::clone(&slots).acquire_owned().await else {
                return;
            };
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let ops = Arc::clone(&ops);
            tokio::spawn(async move {
                let _permit = permit;
                http::serve_one(stream, ops).await;
            });
        }
    });
}
