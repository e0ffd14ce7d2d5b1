//! `apiary-agent`: a small, deterministic ACP v1 agent speaking NDJSON JSON-RPC on stdio.
//!
//! It is the default runtime of `apiary up` (so the quickstart works offline) and the peer of the
//! end-to-end tests. It never calls a model: its reply to a prompt is `echo: <text>` where `<text>` is
//! the `Content:` line of the prompt's `[Buzz event]` section (or the prompt's last line), followed by
//! the model it was configured with through its environment.
//!
//! Words in the prompt script its behaviour:
//! - `!tool`: sends a `tool_call` and a `tool_call_update` before replying;
//! - `!permission`: asks the client for permission and reports the outcome in its reply; with
//!   `APIARY_AGENT_TOOL=<name>[:<kind>]` the request is for that tool (announced first in a
//!   `tool_call` update whose `_meta.toolName` names it, as Claude Code does), and when allowed
//!   the tool "runs": it writes `tool-<name>.txt` in its working directory; a word
//!   `!permission=<name>[:<kind>]` of the message names the tool instead (`!permission=:<kind>`:
//!   a request that names no tool, only a kind);
//! - `!slow`: waits `APIARY_AGENT_SLOW_MS` (default 3000) milliseconds before replying, honouring
//!   `session/cancel`;
//! - `!crash`: exits with status 101 without answering;
//! - `!crash-once`: the same, mid-turn, but only the first time (a marker file in its working
//!   directory remembers), so a restarted agent answers;
//! - `!silent`: ends the turn without any message text.
//!
//! With `APIARY_AGENT_LOAD_SESSION=1` it advertises `loadSession`: session ids are unique across
//! its runs and listed in `.apiary-agent-sessions` in the session's working directory, and
//! `session/load` reopens a listed one (a restarted agent resumes it) and refuses any other.
//!
//! `APIARY_AGENT_USAGE=<n>` reports `n` tokens used (`usage.totalTokens`) in each prompt answer;
//! `APIARY_AGENT_CONTEXT_USED=<n>` instead sends a `usage_update` of `n` tokens of context in use
//! during each turn (as Codex does). `!plan` sends a `plan` update of two entries, one completed.
//!
//! `!mcp:<tool>{json arguments}` (the arguments optional) calls that tool of the session's MCP
//! server named `apiary` (apiary's own tools), over HTTP or, with `APIARY_AGENT_MCP_HTTP=0`
//! (advertising no HTTP MCP), through the stdio command it was given; each result follows the
//! reply on a line of its own, `mcp:<tool>=<result as JSON>`.
//!
//! Its sessions offer a `model` config option (`default` plus `APIARY_AGENT_MODELS`, comma-separated,
//! default `echo-large,echo-small`); the reply names the session's model.
//!
//! `APIARY_AGENT_CAPTURE=<file>` appends, one JSON object per line, `{"persona", "env"}` at start and
//! `{"persona", "recv": <message>}` for every JSON-RPC message received, so tests can assert what the
//! client sent and which environment the process got.

use std::collections::{BTreeMap, HashSet};
use std::io::{BufRead, Write};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// A line longer than this is dropped (the client is trusted, but bounded all the same).
const MAX_LINE: usize = 16 * 1024 * 1024;

struct Agent {
    out: Mutex<std::io::Stdout>,
    capture: Option<Mutex<std::fs::File>>,
    persona: String,
    next_id: Mutex<u64>,
    /// Replies to requests this agent sent (permission requests), by id.
    answers: Mutex<BTreeMap<u64, Value>>,
    answered: std::sync::Condvar,
    cancelled: Mutex<HashSet<String>>,
    sessions: Mutex<BTreeMap<String, String>>,
    /// Models chosen with `session/set_config_option`, by session.
    models: Mutex<BTreeMap<String, String>>,
    /// The `apiary` MCP server entry each session was given.
    mcp: Mutex<BTreeMap<String, Value>>,
}

/// The models the agent offers (`APIARY_AGENT_MODELS`, comma-separated), always with `default`.
fn offered_models() -> Vec<String> {
    let mut out = vec!["default".to_string()];
    let list =
        std::env::var("APIARY_AGENT_MODELS").unwrap_or_else(|_| "echo-large,echo-small".into());
    out.extend(
        list.split(',')
            .map(|m| m.trim().to_string())
            .filter(|m| !m.is_empty() && m != "default"),
    );
    out
}

fn model_option(current: &str) -> Value {
    let options: Vec<Value> = offered_models()
        .into_iter()
        .map(|m| json!({"value": m, "name": m}))
        .collect();
    json!({"id": "model", "name": "Model", "category": "model", "type": "select",
           "currentValue": current, "options": options})
}

/// The session's model: chosen through the config option, else the environment, else `default`.
fn current_model(agent: &Agent, session: &str) -> String {
    if let Some(m) = agent
        .models
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(session)
    {
        return m.clone();
    }
    std::env::var("APIARY_AGENT_MODEL")
        .or_else(|_| std::env::var("GOOSE_MODEL"))
        .unwrap_or_else(|_| "default".to_string())
}

impl Agent {
    fn send(&self, msg: &Value) {
        let mut line = msg.to_string();
        line.push('\n');
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        let _ = out.write_all(line.as_bytes());
        let _ = out.flush();
    }

    fn capture(&self, entry: Value) {
        if let Some(file) = &self.capture {
            let mut line = entry.to_string();
            line.push('\n');
            let mut f = file.lock().unwrap_or_else(|e| e.into_inner());
            let _ = f.write_all(line.as_bytes());
        }
    }

    fn respond(&self, id: &Value, result: Value) {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "result": result}));
    }

    fn error(&self, id: &Value, code: i64, message: &str) {
        self.send(
            &json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}),
        );
    }

    fn update(&self, session: &str, update: Value) {
        self.send(&json!({
            "jsonrpc": "2.0",
            "method": "session/update",
            "params": {"sessionId": session, "update": update}
        }));
    }

    fn text_chunk(&self, session: &str, text: &str) {
        self.update(
            session,
            json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}),
        );
    }

    /// Sends a request to the client and waits (bounded) for its answer.
    fn request(&self, method: &str, params: Value, wait: Duration) -> Option<Value> {
        let id = {
            let mut n = self.next_id.lock().unwrap_or_else(|e| e.into_inner());
            *n += 1;
            *n
        };
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let deadline = Instant::now() + wait;
        let mut answers = self.answers.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(v) = answers.remove(&id) {
                return Some(v);
            }
            let left = deadline.checked_duration_since(Instant::now())?;
            answers = self
                .answered
                .wait_timeout(answers, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    fn is_cancelled(&self, session: &str) -> bool {
        self.cancelled
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(session)
    }
}

fn main() {
    let persona = std::env::var("APIARY_PERSONA").unwrap_or_default();
    let capture = std::env::var_os("APIARY_AGENT_CAPTURE").and_then(|p| {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(p)
            .ok()
            .map(Mutex::new)
    });
    let agent = Arc::new(Agent {
        out: Mutex::new(std::io::stdout()),
        capture,
        persona: persona.clone(),
        next_id: Mutex::new(1000),
        answers: Mutex::new(BTreeMap::new()),
        answered: std::sync::Condvar::new(),
        cancelled: Mutex::new(HashSet::new()),
        sessions: Mutex::new(BTreeMap::new()),
        models: Mutex::new(BTreeMap::new()),
        mcp: Mutex::new(BTreeMap::new()),
    });
    agent.capture(json!({"persona": persona, "pid": std::process::id(), "env": interesting_env()}));

    let stdin = std::io::stdin();
    let mut reader = stdin.lock();
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match reader.read_until(b'\n', &mut buf) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        if buf.len() > MAX_LINE {
            continue;
        }
        let Ok(msg) = serde_json::from_slice::<Value>(&buf) else {
            continue;
        };
        agent.capture(json!({"persona": agent.persona, "recv": msg}));
        handle(&agent, msg);
    }
}

/// The variables a test may want to see: the runtime mappings, the workspace and the test's own.
fn interesting_env() -> BTreeMap<String, String> {
    let extra: Vec<String> = std::env::var("APIARY_AGENT_CAPTURE_ENV")
        .unwrap_or_default()
        .split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect();
    std::env::vars()
        .filter(|(k, _)| {
            k.starts_with("APIARY_")
                || k.starts_with("GOOSE_")
                || k.starts_with("BUZZ_AGENT_")
                || k == "AGENT_CWD"
                || k == "ANTHROPIC_MODEL"
                || extra.contains(k)
        })
        .collect()
}

fn handle(agent: &Arc<Agent>, msg: Value) {
    let id = msg.get("id").cloned();
    let method = msg.get("method").and_then(Value::as_str).map(str::to_owned);
    let params = msg.get("params").cloned().unwrap_or(Value::Null);
    match (method.as_deref(), id) {
        // An answer to one of our own requests.
        (None, Some(id)) => {
            if let Some(n) = id.as_u64() {
                let value = msg
                    .get("result")
                    .cloned()
                    .unwrap_or_else(|| json!({"error": msg.get("error")}));
                agent
                    .answers
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(n, value);
                agent.answered.notify_all();
            }
        }
        (Some("initialize"), Some(id)) => agent.respond(
            &id,
            json!({
                "protocolVersion": 1,
                "agentCapabilities": {
                    "loadSession": load_session(),
                    "promptCapabilities": {"image": false, "audio": false, "embeddedContext": false},
                    "mcpCapabilities": {"http": mcp_http(), "sse": false},
                    "sessionCapabilities": {"systemPrompt": {}}
                },
                "agentInfo": {"name": "apiary-agent", "version": env!("CARGO_PKG_VERSION")},
                "authMethods": []
            }),
        ),
        (Some("session/new"), Some(id)) => {
            let mut sessions = agent.sessions.lock().unwrap_or_else(|e| e.into_inner());
            let cwd = params
                .get("cwd")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            let sid = if load_session() {
                let sid = format!("sess-{}-{}", std::process::id(), sessions.len() + 1);
                remember_session(&cwd, &sid);
                sid
            } else {
                format!("sess-{}", sessions.len() + 1)
            };
            sessions.insert(sid.clone(), cwd);
            drop(sessions);
            remember_mcp(agent, &sid, &params);
            agent.respond(
                &id,
                json!({"sessionId": sid, "configOptions": [model_option(&current_model(agent, &sid))]}),
            );
        }
        (Some("session/load"), Some(id)) if load_session() => {
            let sid = params.get("sessionId").and_then(Value::as_str).unwrap_or("");
            let cwd = params.get("cwd").and_then(Value::as_str).unwrap_or("");
            if remembered_sessions(cwd).iter().any(|s| s == sid) {
                agent
                    .sessions
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(sid.to_string(), cwd.to_string());
                remember_mcp(agent, sid, &params);
                agent.respond(&id, json!({}));
            } else {
                agent.error(&id, -32002, "Resource not found: unknown session");
            }
        }
        (Some("session/set_config_option"), Some(id)) => {
            let sid = params.get("sessionId").and_then(Value::as_str).unwrap_or("");
            let value = params.get("value").and_then(Value::as_str).unwrap_or("");
            if params.get("configId").and_then(Value::as_str) == Some("model")
                && offered_models().iter().any(|m| m == value)
            {
                agent
                    .models
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(sid.to_string(), value.to_string());
                agent.respond(&id, json!({"configOptions": [model_option(value)]}));
            } else {
                agent.error(&id, -32602, "unknown config option or value");
            }
        }
        (Some("session/prompt"), Some(id)) => {
            let agent = Arc::clone(agent);
            std::thread::spawn(move || prompt(&agent, id, &params));
        }
        (Some("session/cancel"), None) => {
            if let Some(s) = params.get("sessionId").and_then(Value::as_str) {
                agent
                    .cancelled
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(s.to_string());
            }
        }
        (Some(_), Some(id)) => agent.error(&id, -32601, "Method not found"),
        _ => {}
    }
}

fn load_session() -> bool {
    std::env::var("APIARY_AGENT_LOAD_SESSION").is_ok_and(|v| v == "1")
}

const SESSIONS_FILE: &str = ".apiary-agent-sessions";

fn remember_session(cwd: &str, sid: &str) {
    let path = std::path::Path::new(cwd).join(SESSIONS_FILE);
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
    {
        let _ = writeln!(f, "{sid}");
    }
}

fn remembered_sessions(cwd: &str) -> Vec<String> {
    std::fs::read_to_string(std::path::Path::new(cwd).join(SESSIONS_FILE))
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

fn prompt(agent: &Agent, id: Value, params: &Value) {
    let session = params
        .get("sessionId")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    agent
        .cancelled
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(&session);
    let text: String = params
        .get("prompt")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|b| b.get("text").and_then(Value::as_str))
        .collect::<Vec<_>>()
        .join("\n");
    let content = event_content(&text);

    if content.contains("!crash-once") {
        // Dies mid-turn (after a first chunk) the first time only: a marker in the working
        // directory remembers it, so the harness's retry on a restarted agent succeeds.
        let marker = std::path::Path::new(".apiary-agent-crashed");
        if !marker.exists() {
            let _ = std::fs::write(marker, b"crashed once\n");
            agent.text_chunk(&session, "partial text that must never be published");
            std::process::exit(101);
        }
    } else if content.contains("!crash") {
        std::process::exit(101);
    }
    let mut notes = Vec::new();
    if content.contains("!plan") {
        agent.update(
            &session,
            json!({"sessionUpdate": "plan", "entries": [
                {"content": "Read the message", "priority": "high", "status": "completed"},
                {"content": "Answer it", "priority": "medium", "status": "in_progress"}]}),
        );
    }
    if let Some(used) = std::env::var("APIARY_AGENT_CONTEXT_USED")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    {
        agent.update(
            &session,
            json!({"sessionUpdate": "usage_update", "used": used, "size": 100_000}),
        );
    }
    if content.contains("!tool") {
        agent.update(
            &session,
            json!({"sessionUpdate": "tool_call", "toolCallId": "call-1", "title": "Looking around",
                   "kind": "read", "status": "pending"}),
        );
        agent.update(
            &session,
            json!({"sessionUpdate": "tool_call_update", "toolCallId": "call-1", "status": "completed"}),
        );
        notes.push("tool=completed".to_string());
    }
    if content.contains("!permission") {
        let tool = content
            .split_whitespace()
            .find_map(|w| w.strip_prefix("!permission="))
            .map(str::to_string)
            .or_else(|| std::env::var("APIARY_AGENT_TOOL").ok());
        notes.push(format!(
            "permission={}",
            ask_permission(agent, &session, tool)
        ));
    }
    if content.contains("!slow") {
        let ms = std::env::var("APIARY_AGENT_SLOW_MS")
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(3000);
        let until = Instant::now() + Duration::from_millis(ms);
        while Instant::now() < until {
            if agent.is_cancelled(&session) {
                agent.respond(&id, json!({"stopReason": "cancelled"}));
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    let mcp_results = mcp_calls(agent, &session, &content);
    if !content.contains("!silent") {
        let model = current_model(agent, &session);
        let mut reply = format!("echo: {content}");
        // Streamed in two chunks, as real agents do.
        let split = reply.len() / 2;
        let split = (0..=split)
            .rev()
            .find(|i| reply.is_char_boundary(*i))
            .unwrap_or(0);
        let tail = reply.split_off(split);
        agent.text_chunk(&session, &reply);
        let mut tail = tail;
        tail.push_str(&format!(" [model={model}"));
        for n in &notes {
            tail.push_str(&format!(" {n}"));
        }
        tail.push(']');
        for r in &mcp_results {
            tail.push('\n');
            tail.push_str(r);
        }
        agent.text_chunk(&session, &tail);
    }
    let mut answer = json!({"stopReason": "end_turn"});
    if let Some(tokens) = std::env::var("APIARY_AGENT_USAGE")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    {
        answer["usage"] = json!({"totalTokens": tokens, "inputTokens": tokens, "outputTokens": 0});
    }
    agent.respond(&id, answer);
}

/// Asks the client's permission for `tool` (`<name>[:<kind>]`, else an unnamed "Write a
/// file"); runs the named tool when allowed. Returns the outcome: the option id picked,
/// `cancelled` or `no-answer`.
fn ask_permission(agent: &Agent, session: &str, tool: Option<String>) -> String {
    let (name, kind) = match &tool {
        Some(t) => match t.split_once(':') {
            Some((n, k)) => (Some(n.to_string()), k.to_string()),
            None => (Some(t.clone()), "edit".to_string()),
        },
        None => (None, "edit".to_string()),
    };
    let name = name.filter(|n| !n.is_empty());
    // A call id of its own, so no earlier call's name is taken for this one.
    static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(2);
    let call_id = format!(
        "call-{}",
        CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    );
    let title = name.clone().unwrap_or_else(|| "Write a file".into());
    if let Some(n) = &name {
        agent.update(
            session,
            json!({"sessionUpdate": "tool_call", "toolCallId": call_id, "title": title,
                   "kind": kind, "status": "pending", "_meta": {"toolName": n}}),
        );
    }
    let answer = agent.request(
        "session/request_permission",
        json!({
            "sessionId": session,
            "toolCall": {"toolCallId": call_id, "title": title, "kind": kind},
            "options": [
                {"optionId": "allow", "name": "Allow once", "kind": "allow_once"},
                {"optionId": "reject", "name": "Reject", "kind": "reject_once"}
            ]
        }),
        Duration::from_secs(30),
    );
    let outcome = answer
        .as_ref()
        .and_then(|a| a.get("outcome"))
        .map(|o| match o.get("outcome").and_then(Value::as_str) {
            Some("selected") => o
                .get("optionId")
                .and_then(Value::as_str)
                .unwrap_or("?")
                .to_string(),
            Some(other) => other.to_string(),
            None => "?".to_string(),
        })
        .unwrap_or_else(|| "no-answer".to_string());
    if let Some(n) = &name {
        let ran = outcome == "allow"
            && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && std::fs::write(format!("tool-{n}.txt"), b"ran\n").is_ok();
        let status = if ran { "completed" } else { "failed" };
        agent.update(
            session,
            json!({"sessionUpdate": "tool_call_update", "toolCallId": call_id, "status": status}),
        );
    }
    outcome
}

/// The triggering message: the quoted lines after `Content:` in the last `[Buzz event]` section
/// (a section starts a line; message text inside the prompt is quoted with `> `).
fn event_content(prompt: &str) -> String {
    let lines: Vec<&str> = prompt.lines().collect();
    let event = lines
        .iter()
        .rposition(|l| l.starts_with("[Buzz event"))
        .unwrap_or(0);
    if let Some(at) = lines[event..].iter().position(|l| *l == "Content:") {
        let quoted: Vec<&str> = lines[event + at + 1..]
            .iter()
            .map_while(|l| l.strip_prefix("> "))
            .collect();
        return quoted.join("\n");
    }
    prompt
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .to_string()
}

/// Whether the agent advertises HTTP MCP servers (`APIARY_AGENT_MCP_HTTP=0`: stdio only).
fn mcp_http() -> bool {
    std::env::var("APIARY_AGENT_MCP_HTTP").map_or(true, |v| v != "0")
}

fn remember_mcp(agent: &Agent, session: &str, params: &Value) {
    let entry = params
        .get("mcpServers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|s| s.get("name").and_then(Value::as_str) == Some("apiary"));
    if let Some(entry) = entry {
        agent
            .mcp
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(session.to_string(), entry.clone());
    }
}

/// Runs each `!mcp:<tool>{args}` of the message, in order; one `mcp:<tool>=<result>` line each.
fn mcp_calls(agent: &Agent, session: &str, content: &str) -> Vec<String> {
    let mut calls = Vec::new();
    let mut rest = content;
    while let Some(at) = rest.find("!mcp:") {
        rest = &rest[at + 5..];
        let end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        let tool = rest[..end].to_string();
        rest = &rest[end..];
        let mut args = json!({});
        if rest.starts_with('{') {
            let mut values = serde_json::Deserializer::from_str(rest).into_iter::<Value>();
            if let Some(Ok(v)) = values.next() {
                args = v;
                rest = &rest[values.byte_offset()..];
            }
        }
        calls.push((tool, args));
    }
    if calls.is_empty() {
        return Vec::new();
    }
    let entry = agent
        .mcp
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(session)
        .cloned();
    let Some(entry) = entry else {
        return vec!["mcp:error=no apiary MCP server in this session".to_string()];
    };
    let mut client = match McpClient::open(&entry) {
        Ok(c) => c,
        Err(e) => return vec![format!("mcp:error={e}")],
    };
    calls
        .into_iter()
        .map(|(tool, args)| {
            let result = client
                .request("tools/call", json!({"name": tool, "arguments": args}))
                .map(|r| r.get("result").cloned().unwrap_or(r))
                .unwrap_or_else(|e| json!({"clientError": e}));
            format!("mcp:{tool}={result}")
        })
        .collect()
}

/// A minimal MCP client: HTTP (a POST a message) or a stdio child (a line a message).
enum McpClient {
    Http {
        url: String,
        headers: Vec<(String, String)>,
        next: u64,
    },
    Stdio {
        child: std::process::Child,
        out: std::io::BufReader<std::process::ChildStdout>,
        next: u64,
    },
}

impl McpClient {
    fn open(entry: &Value) -> Result<McpClient, String> {
        let pairs = |key: &str| -> Vec<(String, String)> {
            entry
                .get(key)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|h| {
                    Some((
                        h.get("name")?.as_str()?.to_string(),
                        h.get("value")?.as_str()?.to_string(),
                    ))
                })
                .collect()
        };
        let mut client = if let Some(url) = entry.get("url").and_then(Value::as_str) {
            McpClient::Http {
                url: url.to_string(),
                headers: pairs("headers"),
                next: 1,
            }
        } else {
            let command = entry
                .get("command")
                .and_then(Value::as_str)
                .ok_or("the apiary entry has neither url nor command")?;
            let args: Vec<String> = entry
                .get("args")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|a| a.as_str().map(str::to_string))
                .collect();
            let mut child = std::process::Command::new(command)
                .args(args)
                .envs(pairs("env"))
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .spawn()
                .map_err(|e| format!("starting {command}: {e}"))?;
            let out = std::io::BufReader::new(child.stdout.take().expect("piped"));
            McpClient::Stdio {
                child,
                out,
                next: 1,
            }
        };
        client.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "apiary-agent", "version": env!("CARGO_PKG_VERSION")}}),
        )?;
        client.notify("notifications/initialized")?;
        Ok(client)
    }

    fn request(&mut self, method: &str, params: Value) -> Result<Value, String> {
        let id = match self {
            McpClient::Http { next, .. } | McpClient::Stdio { next, .. } => {
                *next += 1;
                *next
            }
        };
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send(&body, true)?
            .ok_or_else(|| format!("no answer to {method}"))
    }

    fn notify(&mut self, method: &str) -> Result<(), String> {
        self.send(&json!({"jsonrpc": "2.0", "method": method}), false)
            .map(|_| ())
    }

    fn send(&mut self, body: &Value, answer: bool) -> Result<Option<Value>, String> {
        match self {
            McpClient::Http { url, headers, .. } => {
                let agent = ureq::Agent::config_builder()
                    .http_status_as_error(false)
                    .build()
                    .new_agent();
                let mut req = agent
                    .post(url.as_str())
                    .header("Accept", "application/json, text/event-stream")
                    .header("Content-Type", "application/json")
                    .header("MCP-Protocol-Version", "2025-06-18");
                for (k, v) in headers.iter() {
                    req = req.header(k.as_str(), v.as_str());
                }
                let mut res = req.send(body.to_string()).map_err(|e| e.to_string())?;
                let status = res.status().as_u16();
                let text = res.body_mut().read_to_string().map_err(|e| e.to_string())?;
                if !answer {
                    return Ok(None);
                }
                if status != 200 {
                    return Err(format!("HTTP {status}: {}", text.trim()));
                }
                serde_json::from_str(&text)
                    .map(Some)
                    .map_err(|e| format!("{e}: {text}"))
            }
            McpClient::Stdio { child, out, .. } => {
                let stdin = child.stdin.as_mut().ok_or("the bridge's stdin is closed")?;
                writeln!(stdin, "{body}").map_err(|e| e.to_string())?;
                stdin.flush().map_err(|e| e.to_string())?;
                if !answer {
                    return Ok(None);
                }
                let mut line = String::new();
                out.read_line(&mut line).map_err(|e| e.to_string())?;
                serde_json::from_str(line.trim())
                    .map(Some)
                    .map_err(|e| format!("{e}: {line}"))
            }
        }
    }
}

impl Drop for McpClient {
    fn drop(&mut self) {
        if let McpClient::Stdio { child, .. } = self {
            drop(child.stdin.take());
            let _ = child.wait();
        }
    }
}
