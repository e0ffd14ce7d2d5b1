//! `apiary up --a2a-addr ADDR`: every persona this replica runs answers other agents over A2A 1.0
//! (JSON-RPC binding), on a listener of its own:
//!
//! - `GET <base>/.well-known/agent-card.json`: its card ([`card`]), `<base>` being
//!   `<public URL>/a2a/<pack-id>/<persona>`;
//! - `POST <base>`: `SendMessage` (one turn of the persona, in a session per A2A context, answered
//!   as a completed task with the reply as its artifact), `SendStreamingMessage` (the same as
//!   server-sent events: submitted, working, the artifact, completed), `GetTask`, `CancelTask`
//!   (cancels the agent's turn).
//!
//! No token, no turn: every request needs `Authorization: Bearer <token>` with a token the
//! operator listed ([`tokens`]); each client has its own rate ([`RATE_PER_MINUTE`]) and sees only
//! its own tasks. A request without `A2A-Version: 1.0` (an A2A 0.3 client) is refused with the
//! protocol's `VersionNotSupported` error.

pub mod card;
mod http;
pub mod sign;
pub mod tokens;

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use apiary_limits::{Buckets, Rate};
use nostr_sdk::prelude::Keys;
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};

use crate::dispatch::PackRun;
use crate::dispatch::remote::{AskError, Desk};
use tokens::Tokens;

/// JSON-RPC requests one client may make a minute (a burst of as many).
pub const RATE_PER_MINUTE: u32 = 60;
/// A message's text is taken up to this many bytes.
const TEXT_MAX: usize = 64 * 1024;
/// Tasks kept for `GetTask`; past it the oldest finished ones go.
const TASKS_MAX: usize = 4096;
/// Clients whose rates are kept.
const CLIENTS_MAX: usize = 4096;
/// Connections served at once.
const CONNECTIONS_MAX: usize = 256;

/// JSON-RPC and A2A error codes.
mod code {
    pub const PARSE: i64 = -32700;
    pub const INVALID_REQUEST: i64 = -32600;
    pub const METHOD_NOT_FOUND: i64 = -32601;
    pub const INVALID_PARAMS: i64 = -32602;
    pub const TASK_NOT_FOUND: i64 = -32001;
    pub const TASK_NOT_CANCELABLE: i64 = -32002;
    pub const UNSUPPORTED_OPERATION: i64 = -32004;
    pub const VERSION_NOT_SUPPORTED: i64 = -32009;
}

/// A persona served here.
struct Served {
    pack: String,
    persona: String,
    card: Value,
}

/// One task: whose it is, where it stands, and how to cancel its turn.
struct TaskEntry {
    client: String,
    task: Value,
    cancel: Option<tokio::sync::oneshot::Sender<()>>,
    at: Instant,
}

pub struct A2a {
    desk: Arc<Desk>,
    tokens: Tokens,
    /// Base path → persona.
    personas: BTreeMap<String, Served>,
    tasks: Mutex<HashMap<String, TaskEntry>>,
    rates: Mutex<Buckets<String>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl A2a {
    pub fn new(desk: Arc<Desk>, tokens: Tokens) -> A2a {
        A2a {
            desk,
            tokens,
            personas: BTreeMap::new(),
            tasks: Mutex::default(),
            rates: Mutex::new(Buckets::new(Rate::per_minute(RATE_PER_MINUTE), CLIENTS_MAX)),
        }
    }

    /// Serves persona `index` of `run` at `<public_url>/a2a/<pack-id>/<persona>`, its card signed
    /// with its key when known.
    pub fn add(&mut self, run: &PackRun, index: usize, public_url: &str, keys: Option<&Keys>) {
        let pack = run.resolved.pack.id.clone();
        let persona = run.resolved.personas[index].identity.name.clone();
        let path = card::base_path(&pack, &persona);
        let base = format!("{}{path}", public_url.trim_end_matches('/'));
        let mut card = card::card(run, index, &base);
        if let Some(k) = keys {
            match sign::sign(&card, k) {
                Ok(signed) => card = signed,
                Err(e) => tracing::warn!(persona = %persona, "the agent card is not signed: {e}"),
            }
        }
        self.personas.insert(
            path,
            Served {
                pack,
                persona,
                card,
            },
        );
    }
}

/// Listens on `addr`.
pub async fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(addr).await
}

/// Serves `a2a` on `listener` until the process ends.
pub fn serve(listener: TcpListener, a2a: Arc<A2a>) {
    let open = Arc::new(tokio::sync::Semaphore::new(CONNECTIONS_MAX));
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            };
            let Ok(permit) = Arc::clone(&open).try_acquire_owned() else {
                continue; // dropped: too many at once
            };
            let a2a = Arc::clone(&a2a);
            tokio::spawn(async move {
                let _permit = permit;
                serve_one(stream, &a2a).await;
            });
        }
    });
}

fn rpc_error(id: &Value, code: i64, message: &str, reason: Option<&str>) -> Value {
    let mut error = json!({"code": code, "message": message});
    if let Some(r) = reason {
        error["data"] = json!([{
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": r,
            "domain": "a2a-protocol.org",
            "metadata": {},
        }]);
    }
    json!({"jsonrpc": "2.0", "id": id, "error": error})
}

fn rpc_result(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

async fn send_json(stream: &mut TcpStream, status: u16, value: &Value) {
    http::respond(
        stream,
        status,
        "application/json",
        value.to_string().as_bytes(),
    )
    .await;
}

async fn serve_one(mut stream: TcpStream, a2a: &A2a) {
    let request = match http::read(&mut stream).await {
        Ok(r) => r,
        Err((status, text)) => {
            return http::respond(&mut stream, status, "text/plain", text.as_bytes()).await;
        }
    };
    let card_suffix = "/.well-known/agent-card.json";
    if request.method == "GET" {
        let served = request
            .path
            .strip_suffix(card_suffix)
            .and_then(|base| a2a.personas.get(base));
        return match served {
            Some(s) => send_json(&mut stream, 200, &s.card).await,
            None => http::respond(&mut stream, 404, "text/plain", b"no such agent card").await,
        };
    }
    if request.method != "POST" {
        return http::respond(&mut stream, 405, "text/plain", b"GET a card, POST JSON-RPC").await;
    }
    let Some(served) = a2a.personas.get(request.path.trim_end_matches('/')) else {
        return http::respond(&mut stream, 404, "text/plain", b"no such agent").await;
    };
    let Ok(body) = serde_json::from_slice::<Value>(&request.body) else {
        return send_json(
            &mut stream,
            200,
            &rpc_error(&Value::Null, code::PARSE, "Parse error", None),
        )
        .await;
    };
    let id = body.get("id").cloned().unwrap_or(Value::Null);
    let Some(client) = a2a
        .tokens
        .client(request.authorization.as_deref())
        .map(str::to_string)
    else {
        let e = rpc_error(
            &id,
            code::INVALID_REQUEST,
            "authentication required: send Authorization: Bearer <token>",
            Some("UNAUTHENTICATED"),
        );
        return send_json(&mut stream, 401, &e).await;
    };
    if !lock(&a2a.rates).try_take(client.clone(), Instant::now()) {
        let e = rpc_error(
            &id,
            code::INVALID_REQUEST,
            "rate limit exceeded: try again in a minute",
            Some("RESOURCE_EXHAUSTED"),
        );
        return send_json(&mut stream, 429, &e).await;
    }
    let version = request.version.as_deref().unwrap_or("0.3");
    if !(version == "1.0" || version.starts_with("1.0.")) {
        let e = rpc_error(
            &id,
            code::VERSION_NOT_SUPPORTED,
            &format!(
                "A2A version '{version}' is not supported; this agent speaks '1.0' (send A2A-Version: 1.0)"
            ),
            Some("VERSION_NOT_SUPPORTED"),
        );
        return send_json(&mut stream, 200, &e).await;
    }
    let method = body.get("method").and_then(Value::as_str).unwrap_or("");
    let params = body.get("params").cloned().unwrap_or(Value::Null);
    match method {
        "SendMessage" => {
            let answer = match a2a.start(served, &client, &params) {
                Ok(started) => rpc_result(&id, json!({"task": a2a.finish(started).await})),
                Err((c, m)) => rpc_error(&id, c, &m, None),
            };
            send_json(&mut stream, 200, &answer).await
        }
        "SendStreamingMessage" => a2a.stream(&mut stream, served, &client, &id, &params).await,
        "GetTask" => {
            let answer = match a2a.task_of(&client, &params) {
                Some(task) => rpc_result(&id, task),
                None => rpc_error(
                    &id,
                    code::TASK_NOT_FOUND,
                    "Task not found",
                    Some("TASK_NOT_FOUND"),
                ),
            };
            send_json(&mut stream, 200, &answer).await
        }
        "CancelTask" => send_json(&mut stream, 200, &a2a.cancel(&client, &id, &params)).await,
        "" => {
            send_json(
                &mut stream,
                200,
                &rpc_error(&id, code::INVALID_REQUEST, "Invalid Request", None),
            )
            .await
        }
        "ListTasks"
        | "SubscribeToTask"
        | "CreateTaskPushNotificationConfig"
        | "GetTaskPushNotificationConfig"
        | "ListTaskPushNotificationConfigs"
        | "DeleteTaskPushNotificationConfig"
        | "GetExtendedAgentCard" => {
            let e = rpc_error(
                &id,
                code::UNSUPPORTED_OPERATION,
                &format!("{method} is not supported by this agent"),
                Some("UNSUPPORTED_OPERATION"),
            );
            send_json(&mut stream, 200, &e).await
        }
        _ => {
            send_json(
                &mut stream,
                200,
                &rpc_error(&id, code::METHOD_NOT_FOUND, "Method not found", None),
            )
            .await
        }
    }
}

/// A task started: its ids, text, and where its turn's cancel goes.
struct Started {
    pack: String,
    persona: String,
    task_id: String,
    context: String,
    text: String,
    cancel: tokio::sync::oneshot::Receiver<()>,
}

fn now_rfc3339() -> String {
    crate::dist::now_rfc3339()
}

fn status(state: &str) -> Value {
    json!({"state": state, "timestamp": now_rfc3339()})
}

fn agent_text(text: &str) -> Value {
    json!({
        "messageId": uuid::Uuid::new_v4().to_string(),
        "role": "ROLE_AGENT",
        "parts": [{"text": text}],
    })
}

impl A2a {
    /// Checks `params` (`{message: {messageId, role, parts, contextId?}}`) and records the task.
    fn start(
        &self,
        served: &Served,
        client: &str,
        params: &Value,
    ) -> Result<Started, (i64, String)> {
        let message = params.get("message").filter(|m| m.is_object()).ok_or((
            code::INVALID_PARAMS,
            "params.message is required".to_string(),
        ))?;
        let mut text = String::new();
        for part in message
            .get("parts")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(t) = part.get("text").and_then(Value::as_str) {
                if !text.is_empty() {
                    text.push('\n');
                }
                text.push_str(t);
            }
        }
        if text.trim().is_empty() {
            return Err((
                code::INVALID_PARAMS,
                "the message has no text part".to_string(),
            ));
        }
        if text.len() > TEXT_MAX {
            return Err((
                code::INVALID_PARAMS,
                format!("the message's text is over {TEXT_MAX} bytes"),
            ));
        }
        let context = message
            .get("contextId")
            .and_then(Value::as_str)
            .filter(|c| !c.is_empty() && c.len() <= 128)
            .map(str::to_string)
            .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        let task_id = uuid::Uuid::new_v4().to_string();
        let (tx, rx) = tokio::sync::oneshot::channel();
        let task = json!({
            "id": task_id,
            "contextId": context,
            "status": status("TASK_STATE_WORKING"),
            "history": [message],
        });
        let mut tasks = lock(&self.tasks);
        if tasks.len() >= TASKS_MAX {
            let oldest = tasks
                .iter()
                .filter(|(_, t)| t.cancel.is_none())
                .min_by_key(|(_, t)| t.at)
                .map(|(k, _)| k.clone());
            if let Some(k) = oldest {
                tasks.remove(&k);
            }
        }
        tasks.insert(
            task_id.clone(),
            TaskEntry {
                client: client.to_string(),
                task,
                cancel: Some(tx),
                at: Instant::now(),
            },
        );
        Ok(Started {
            pack: served.pack.clone(),
            persona: served.persona.clone(),
            task_id,
            context,
            text,
            cancel: rx,
        })
    }

    /// Runs the turn and records how the task ended; the task.
    async fn finish(&self, s: Started) -> Value {
        let answer = self
            .desk
            .ask(&s.pack, &s.persona, &s.context, s.text, s.cancel)
            .await;
        let mut tasks = lock(&self.tasks);
        let Some(entry) = tasks.get_mut(&s.task_id) else {
            return Value::Null;
        };
        entry.cancel = None;
        let task = &mut entry.task;
        match answer {
            Ok(a) => {
                task["status"] = status("TASK_STATE_COMPLETED");
                task["artifacts"] = json!([{
                    "artifactId": uuid::Uuid::new_v4().to_string(),
                    "name": "reply",
                    "parts": [{"text": a.text}],
                }]);
                if let Some(h) = task["history"].as_array_mut() {
                    h.push(agent_text(&a.text));
                }
            }
            Err(AskError::Canceled) => task["status"] = status("TASK_STATE_CANCELED"),
            Err(e) => {
                let mut st = status(if matches!(e, AskError::Limited { .. }) {
                    "TASK_STATE_REJECTED"
                } else {
                    "TASK_STATE_FAILED"
                });
                st["message"] = agent_text(&e.to_string());
                task["status"] = st;
            }
        }
        task.clone()
    }

    /// `SendStreamingMessage`: the task, working, then the artifact and the final status.
    async fn stream(
        &self,
        stream: &mut TcpStream,
        served: &Served,
        client: &str,
        id: &Value,
        params: &Value,
    ) {
        let started = match self.start(served, client, params) {
            Ok(s) => s,
            Err((c, m)) => return send_json(stream, 200, &rpc_error(id, c, &m, None)).await,
        };
        let (task_id, context) = (started.task_id.clone(), started.context.clone());
        if http::start_events(stream).await.is_err() {
            return;
        }
        let submitted = json!({"id": task_id, "contextId": context, "status": {"state": "TASK_STATE_SUBMITTED"}});
        let working = json!({"statusUpdate": {"taskId": task_id, "contextId": context, "status": status("TASK_STATE_WORKING")}});
        for event in [json!({"task": submitted}), working] {
            if http::event(stream, &rpc_result(id, event).to_string())
                .await
                .is_err()
            {
                self.cancel_task(&task_id);
                return;
            }
        }
        let task = self.finish(started).await;
        if let Some(artifact) = task["artifacts"].get(0) {
            let update = json!({"artifactUpdate": {"taskId": task_id, "contextId": context, "artifact": artifact, "lastChunk": true}});
            let _ = http::event(stream, &rpc_result(id, update).to_string()).await;
        }
        let last = json!({"statusUpdate": {"taskId": task_id, "contextId": context, "status": task["status"]}});
        let _ = http::event(stream, &rpc_result(id, last).to_string()).await;
        let _ = tokio::io::AsyncWriteExt::shutdown(stream).await;
    }

    /// The task `params.id`, when it is this client's.
    fn task_of(&self, client: &str, params: &Value) -> Option<Value> {
        let id = params.get("id")?.as_str()?;
        let tasks = lock(&self.tasks);
        let entry = tasks.get(id).filter(|t| t.client == client)?;
        Some(entry.task.clone())
    }

    /// Sends the cancel of task `id`'s turn; whether it was still running.
    fn cancel_task(&self, id: &str) -> bool {
        let mut tasks = lock(&self.tasks);
        match tasks.get_mut(id).and_then(|t| t.cancel.take()) {
            Some(tx) => tx.send(()).is_ok(),
            None => false,
        }
    }

    /// `CancelTask`: cancels a running task of this client and answers with it once canceled.
    fn cancel(&self, client: &str, id: &Value, params: &Value) -> Value {
        let Some(task) = self.task_of(client, params) else {
            return rpc_error(
                id,
                code::TASK_NOT_FOUND,
                "Task not found",
                Some("TASK_NOT_FOUND"),
            );
        };
        let task_id = task["id"].as_str().unwrap_or("").to_string();
        if !self.cancel_task(&task_id) {
            return rpc_error(
                id,
                code::TASK_NOT_CANCELABLE,
                "Task cannot be canceled",
                Some("TASK_NOT_CANCELABLE"),
            );
        }
        let mut task = task;
        task["status"] = status("TASK_STATE_CANCELED");
        if let Some(entry) = lock(&self.tasks).get_mut(&task_id) {
            entry.task["status"] = task["status"].clone();
        }
        rpc_result(id, task)
    }
}
