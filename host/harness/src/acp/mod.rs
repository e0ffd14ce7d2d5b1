//! ACP v1 client: one agent process per persona, JSON-RPC 2.0 as one JSON object per line on its
//! stdio. Message shapes come from `agent-client-protocol-schema` (v1 module); the transport is a
//! small loop of our own so every limit (line size, timeouts, refused methods) is explicit.
//!
//! What the agent may ask of us: `session/request_permission` is answered by the persona's tool
//! policy, then the operator's [`PermissionPolicy`] ([`tools`]); everything else (`fs/*`,
//! `terminal/*`, ...) is refused with "method not found", and we advertise no client
//! capabilities. Agent output is untrusted: lines are capped, malformed ones are dropped, the
//! collected reply text is capped.

pub mod auth;
pub mod mcp;
pub mod stderr;
pub mod tools;

pub use stderr::StderrTail;
pub use tools::{AgentEvent, AgentEvents};

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use agent_client_protocol_schema::ProtocolVersion;
use agent_client_protocol_schema::v1 as acp;
use serde_json::{Value, json};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command};
use tokio::sync::{Mutex, mpsc, oneshot};

/// A line from the agent longer than this is dropped.
pub const MAX_LINE: usize = 8 * 1024 * 1024;
/// Reply text beyond this is cut (relay events are small; agents can be chatty).
pub const MAX_REPLY: usize = 64 * 1024;
/// Non-prompt requests (initialize, session/new) must answer within this.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// How permission requests from the agent are answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PermissionPolicy {
    /// Pick a reject option (or cancel when the agent offers none).
    #[default]
    Deny,
    /// Pick an allow-once option (or reject when the agent offers none).
    AllowOnce,
}

/// The command line of an agent runtime.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentCommand {
    pub program: PathBuf,
    pub args: Vec<String>,
}

impl AgentCommand {
    /// Splits a command line on whitespace; single or double quotes group words.
    pub fn parse(line: &str) -> Option<AgentCommand> {
        let mut words = Vec::new();
        let mut cur = String::new();
        let mut quote = None;
        let mut any = false;
        for c in line.chars() {
            match (quote, c) {
                (Some(q), c) if c == q => quote = None,
                (Some(_), c) => cur.push(c),
                (None, '\'' | '"') => {
                    quote = Some(c);
                    any = true;
                }
                (None, c) if c.is_whitespace() => {
                    if any || !cur.is_empty() {
                        words.push(std::mem::take(&mut cur));
                        any = false;
                    }
                }
                (None, c) => cur.push(c),
            }
        }
        if any || !cur.is_empty() {
            words.push(cur);
        }
        let mut it = words.into_iter();
        let program = PathBuf::from(it.next()?);
        Some(AgentCommand {
            program,
            args: it.collect(),
        })
    }
}

/// Everything needed to start one persona's agent.
#[derive(Debug, Clone)]
pub struct SpawnSpec {
    /// Label for logs.
    pub persona: String,
    pub command: AgentCommand,
    /// The agent's whole environment: nothing of apiary's own is inherited.
    pub env: Vec<(String, String)>,
    /// Start the agent confined, through this launcher (see `dispatch::confine`); `None`: directly.
    pub launch: Option<Launch>,
    /// The child's working directory.
    pub cwd: PathBuf,
    pub policy: PermissionPolicy,
    /// The persona's `x-tool-policy`, decided before `policy`.
    pub tools: apiary_core::pack::ToolPolicy,
    /// Where tool calls, permission answers, plans and usage go (`None`: logged only).
    pub events: Option<AgentEvents>,
    /// How much nicer than apiary the agent runs (0-19, Unix; its own children inherit it). Agents
    /// doing their own work must not delay the harness's routing and prompt writing: on a
    /// loaded machine a runnable agent woken at the same moment as the harness otherwise takes
    /// the CPU first (`benches/live_agents.rs` measures the difference).
    pub nice: u8,
    /// The last lines of the agent's stderr, over this persona's runs.
    pub stderr: StderrTail,
}

/// A confined start: apiary's own binary as the launcher, told what to start by its plan (which
/// holds the command line, environment, files and network of the agent).
#[derive(Debug, Clone)]
pub struct Launch {
    pub launcher: PathBuf,
    /// [`apiary_confine::Plan`] as JSON.
    pub plan: String,
}

/// `apiary up`'s default for [`SpawnSpec::nice`].
pub const DEFAULT_AGENT_NICE: u8 = 10;

#[derive(Debug, thiserror::Error)]
pub enum AcpError {
    #[error("cannot start agent `{program}`: {source}")]
    Spawn {
        program: String,
        source: std::io::Error,
    },
    #[error("the agent exited")]
    Exited,
    #[error("the agent did not answer `{0}` in time")]
    Timeout(&'static str),
    #[error("the agent went quiet for {0:?} during a prompt; cancelled")]
    Idle(Duration),
    #[error("the prompt ran longer than {0:?}; cancelled")]
    Hard(Duration),
    #[error("the agent answered `{method}` with error {code}: {message}{}", data_suffix(.data))]
    Rpc {
        method: &'static str,
        code: i64,
        message: String,
        /// The error's `data`, made printable and cut (see [`rpc_data`]).
        data: Option<String>,
    },
    #[error("the agent's answer to `{method}` is not valid: {detail}")]
    Invalid {
        method: &'static str,
        detail: String,
    },
    #[error("the agent speaks ACP version {0}; apiary speaks version 1")]
    Version(u16),
    /// The agent wants authentication apiary cannot give it (see [`auth::refusal`]).
    #[error("{0}")]
    AuthRequired(String),
}

/// The text a JSON-RPC error's `data` adds to the error's message.
fn data_suffix(data: &Option<String>) -> String {
    data.as_ref().map(|d| format!(" ({d})")).unwrap_or_default()
}

/// A JSON-RPC error's `data` as one printable line of at most 500 characters: a string as it is, any
/// other value as compact JSON; `None` when absent or null.
fn rpc_data(data: Option<&Value>) -> Option<String> {
    let text = match data? {
        Value::Null => return None,
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let text = stderr::visible(text.trim(), 500);
    (!text.is_empty()).then_some(text)
}

impl AcpError {
    /// The `data` of the agent's JSON-RPC error answer, when it gave one.
    pub fn data(&self) -> Option<&str> {
        match self {
            AcpError::Rpc { data, .. } => data.as_deref(),
            _ => None,
        }
    }

    /// A short machine-readable kind, for `--json` output and tests.
    pub fn kind(&self) -> &'static str {
        match self {
            AcpError::Spawn { .. } => "spawn",
            AcpError::Exited => "exited",
            AcpError::Timeout(_) => "timeout",
            AcpError::Idle(_) => "idle",
            AcpError::Hard(_) => "hard-timeout",
            AcpError::Rpc { .. } => "rpc",
            AcpError::Invalid { .. } => "invalid-answer",
            AcpError::Version(_) => "version",
            AcpError::AuthRequired(_) => "auth-required",
        }
    }
}

/// Why a request has no result.
#[derive(Debug)]
enum Unanswered {
    /// The agent exited before answering.
    Exited,
    /// A JSON-RPC error answer (its message cut to 500 characters, its data see [`rpc_data`]).
    Rpc {
        code: i64,
        message: String,
        data: Option<String>,
    },
}

impl Unanswered {
    fn into_error(self, method: &'static str) -> AcpError {
        match self {
            // An error answer with code -1 has always been taken as the agent's exit.
            Unanswered::Exited | Unanswered::Rpc { code: -1, .. } => AcpError::Exited,
            Unanswered::Rpc {
                code,
                message,
                data,
            } => AcpError::Rpc {
                method,
                code,
                message,
                data,
            },
        }
    }
}

/// An answer: the result, or why there is none.
type Answer = Result<Value, Unanswered>;
type Pending = HashMap<u64, oneshot::Sender<Answer>>;

/// What happened during a prompt, as the reader saw it.
#[derive(Debug)]
enum Activity {
    Text(String),
    /// A `usage_update`: the tokens of context in use.
    Used(u64),
    Other,
}

struct Shared {
    persona: String,
    policy: PermissionPolicy,
    tools: apiary_core::pack::ToolPolicy,
    events: Option<AgentEvents>,
    /// Recent tool calls, to name the tool of a permission request.
    calls: std::sync::Mutex<tools::ToolCalls>,
    /// The agent's stdin. Callers write their line themselves (no writer task): a prompt goes
    /// from the dispatch worker straight into the pipe, without another task hand-off.
    stdin: Mutex<Option<ChildStdin>>,
    pending: std::sync::Mutex<Pending>,
    /// Activity sinks of the prompts in flight, by session id.
    sinks: std::sync::Mutex<HashMap<String, mpsc::UnboundedSender<Activity>>>,
    next_id: AtomicU64,
    alive: AtomicBool,
    exited: tokio::sync::Notify,
}

impl Shared {
    /// Writes one line (ending in a newline) to the agent's stdin; `false` when the agent's stdin
    /// is closed. Lines never interleave: the lock is held for the whole line.
    async fn write_line(&self, line: &str) -> bool {
        let mut stdin = self.stdin.lock().await;
        let Some(pipe) = stdin.as_mut() else {
            return false;
        };
        if pipe.write_all(line.as_bytes()).await.is_err() || pipe.flush().await.is_err() {
            *stdin = None;
            return false;
        }
        // Benchmark probe (`benches/live_agents.rs`): the line is in the agent's stdin.
        tracing::trace!(target: "apiary::probe", persona = %self.persona, line = line, "line written");
        true
    }

    fn emit(&self, event: AgentEvent) {
        tracing::debug!(persona = %self.persona, ?event, "agent event");
        if let Some(events) = &self.events {
            (events.0)(event);
        }
    }

    fn fail_all(&self) {
        self.alive.store(false, Ordering::SeqCst);
        let pending: Pending = std::mem::take(&mut *lock(&self.pending));
        for (_, tx) in pending {
            let _ = tx.send(Err(Unanswered::Exited));
        }
        lock(&self.sinks).clear();
        self.exited.notify_waiters();
    }
}

/// The agent's process (or its launcher's): piped stdio, its own process group, `spec.nice` lower
/// priority, an environment of nothing but its own.
fn agent_command(spec: &SpawnSpec) -> Command {
    let mut cmd = match &spec.launch {
        Some(launch) => {
            let mut cmd = Command::new(&launch.launcher);
            cmd.arg(apiary_confine::LAUNCH_ARG)
                .env_clear()
                .env(apiary_confine::PLAN_VAR, &launch.plan);
            cmd
        }
        None => {
            let mut cmd = Command::new(&spec.command.program);
            cmd.args(&spec.command.args)
                .env_clear()
                .envs(spec.env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
            cmd
        }
    };
    cmd.current_dir(&spec.cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    // Own process group: a Ctrl-C at the terminal reaches apiary, which then drains and stops
    // the agents itself.
    #[cfg(unix)]
    cmd.process_group(0);
    #[cfg(unix)]
    if spec.nice > 0 {
        let nice = libc::c_int::from(spec.nice.min(19));
        // SAFETY: runs in the forked child before exec and only makes the get/setpriority
        // system calls, which are async-signal-safe. Raising one's own niceness needs no
        // privilege; should it fail anyway (a seccomp filter), the agent runs at apiary's
        // priority.
        unsafe {
            cmd.pre_exec(move || {
                libc::nice(nice);
                Ok(())
            });
        }
    }
    cmd
}

/// The reader of the agent's stdout: routes answers, updates and the agent's own requests until
/// the agent closes it, then fails what is still pending.
async fn read_agent(shared: Arc<Shared>, stdout: ChildStdout) {
    let mut reader = BufReader::new(stdout);
    let mut buf = Vec::new();
    loop {
        match read_line_capped(&mut reader, &mut buf, MAX_LINE).await {
            Ok(Some(true)) => handle_line(&shared, &buf).await,
            Ok(Some(false)) => {
                tracing::warn!(persona = %shared.persona, "agent line over {MAX_LINE} bytes dropped");
            }
            Ok(None) | Err(_) => break,
        }
    }
    shared.fail_all();
}

/// Logs the agent's stderr, line by line, at debug level, and keeps its last lines in `tail`.
async fn log_stderr(persona: String, stderr: ChildStderr, tail: StderrTail) {
    let mut reader = BufReader::new(stderr);
    let mut buf = Vec::new();
    while let Ok(Some(_)) = read_line_capped(&mut reader, &mut buf, 16 * 1024).await {
        let line = String::from_utf8_lossy(&buf);
        tracing::debug!(persona = %persona, "agent stderr: {}", line.trim_end());
        tail.push(&buf);
    }
    tail.close();
}

fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The result of `initialize`.
#[derive(Debug, Clone)]
pub struct AgentInfo {
    pub name: Option<String>,
    pub system_prompt: bool,
    pub mcp_http: bool,
    pub auth_methods: Vec<auth::AuthMethod>,
    /// How the agent reopens an earlier session: `session/resume` (without a replay) or
    /// `session/load`; `None` when it cannot.
    pub reopen: Option<&'static str>,
}

/// The result of one prompt turn.
#[derive(Debug, Clone, PartialEq)]
pub struct Turn {
    pub text: String,
    pub stop_reason: acp::StopReason,
    /// The tokens the agent says the turn used (`usage.totalTokens` of its answer, else the
    /// context in use of its last `usage_update` during the turn), if it says.
    pub tokens: Option<u64>,
}

/// A running agent.
pub struct AcpClient {
    shared: Arc<Shared>,
    child: Mutex<Option<Child>>,
    pub info: AgentInfo,
}

impl AcpClient {
    /// Starts the agent and runs `initialize` (advertising v1, no client capabilities).
    pub async fn spawn(spec: &SpawnSpec) -> Result<AcpClient, AcpError> {
        let mut child = agent_command(spec)
            .spawn()
            .map_err(|source| AcpError::Spawn {
                program: spec.command.program.display().to_string(),
                source,
            })?;
        let stdin = child.stdin.take().ok_or(AcpError::Exited)?;
        let stdout = child.stdout.take().ok_or(AcpError::Exited)?;
        let stderr = child.stderr.take();

        let shared = Arc::new(Shared {
            persona: spec.persona.clone(),
            policy: spec.policy,
            tools: spec.tools.clone(),
            events: spec.events.clone(),
            calls: Default::default(),
            stdin: Mutex::new(Some(stdin)),
            pending: Default::default(),
            sinks: Default::default(),
            next_id: AtomicU64::new(0),
            alive: AtomicBool::new(true),
            exited: tokio::sync::Notify::new(),
        });
        tokio::spawn(read_agent(Arc::clone(&shared), stdout));
        if let Some(stderr) = stderr {
            spec.stderr.opened();
            tokio::spawn(log_stderr(
                spec.persona.clone(),
                stderr,
                spec.stderr.clone(),
            ));
        }

        let mut client = AcpClient {
            shared,
            child: Mutex::new(Some(child)),
            info: AgentInfo {
                name: None,
                system_prompt: false,
                mcp_http: false,
                auth_methods: Vec::new(),
                reopen: None,
            },
        };
        let started = match client.initialize().await {
            Ok(info) => {
                client.info = info;
                client.authenticate(spec).await
            }
            Err(e) => Err(e),
        };
        match started {
            Ok(()) => {}
            Err(e) => {
                // Stopped, so its stderr ends and the failure report has its last words.
                client.shutdown().await;
                return Err(e);
            }
        }
        Ok(client)
    }

    /// `authenticate` with the first method the agent lists that apiary can use unattended (its
    /// variables all set for the agent); nothing when there is none: the agent may not need it, and
    /// `session/new` says when it does.
    async fn authenticate(&self, spec: &SpawnSpec) -> Result<(), AcpError> {
        let is_set = |var: &str| match spec.env.iter().rev().find(|(k, _)| k == var) {
            Some((_, v)) => !v.is_empty(),
            None => std::env::var_os(var).is_some_and(|v| !v.is_empty()),
        };
        let Some(method) = auth::headless(&self.info.auth_methods, &is_set) else {
            return Ok(());
        };
        tracing::info!(persona = %spec.persona, method = %method.id, "authenticating the agent");
        let params = json!({"methodId": method.id});
        self.request("authenticate", params, REQUEST_TIMEOUT)
            .await
            .map(|_| ())
    }

    /// `initialize`: what the agent says about itself. An agent that speaks another ACP version
    /// is shut down.
    async fn initialize(&self) -> Result<AgentInfo, AcpError> {
        let req = acp::InitializeRequest::new(ProtocolVersion::V1)
            .client_capabilities(acp::ClientCapabilities::default())
            .client_info(acp::Implementation::new(
                "apiary",
                env!("CARGO_PKG_VERSION"),
            ));
        let value = self
            .request("initialize", to_value(&req), REQUEST_TIMEOUT)
            .await?;
        let auth_methods = auth::methods(&value);
        let caps = value.get("agentCapabilities");
        let reopen = match caps {
            Some(c)
                if c.pointer("/sessionCapabilities/resume")
                    .is_some_and(Value::is_object) =>
            {
                Some("session/resume")
            }
            Some(c) if c.get("loadSession") == Some(&Value::Bool(true)) => Some("session/load"),
            _ => None,
        };
        let resp: acp::InitializeResponse =
            serde_json::from_value(value).map_err(|e| AcpError::Invalid {
                method: "initialize",
                detail: e.to_string(),
            })?;
        if resp.protocol_version != ProtocolVersion::V1 {
            let v: u16 = serde_json::to_value(resp.protocol_version)
                .ok()
                .and_then(|v| v.as_u64())
                .and_then(|v| u16::try_from(v).ok())
                .unwrap_or(0);
            self.shutdown().await;
            return Err(AcpError::Version(v));
        }
        Ok(AgentInfo {
            name: resp.agent_info.map(|i| i.name),
            system_prompt: resp
                .agent_capabilities
                .session_capabilities
                .system_prompt
                .is_some(),
            mcp_http: resp.agent_capabilities.mcp_capabilities.http,
            auth_methods,
            reopen,
        })
    }

    pub fn is_alive(&self) -> bool {
        self.shared.alive.load(Ordering::SeqCst)
    }

    /// `session/new`; returns the session id and the raw answer (for its `configOptions`).
    pub async fn new_session(
        &self,
        req: acp::NewSessionRequest,
    ) -> Result<(String, Value), AcpError> {
        let value = match self
            .request("session/new", to_value(&req), REQUEST_TIMEOUT)
            .await
        {
            // ACP's "authentication required".
            Err(AcpError::Rpc { code: -32000, .. }) => {
                return Err(AcpError::AuthRequired(auth::refusal(
                    &self.info.auth_methods,
                )));
            }
            other => other?,
        };
        let resp: acp::NewSessionResponse =
            serde_json::from_value(value.clone()).map_err(|e| AcpError::Invalid {
                method: "session/new",
                detail: e.to_string(),
            })?;
        Ok((resp.session_id.0.to_string(), value))
    }

    /// Reopens an earlier session with the agent's [`AgentInfo::reopen`] method. A `session/load`
    /// replays the conversation as updates, which no prompt is waiting for: they are dropped.
    pub async fn reopen_session(
        &self,
        session: &str,
        cwd: &std::path::Path,
        mcp_servers: &[acp::McpServer],
    ) -> Result<(), AcpError> {
        let Some(method) = self.info.reopen else {
            return Err(AcpError::Invalid {
                method: "session/load",
                detail: "the agent cannot reopen sessions".into(),
            });
        };
        let params =
            json!({"sessionId": session, "cwd": cwd, "mcpServers": to_value(&mcp_servers)});
        self.request(method, params, REQUEST_TIMEOUT)
            .await
            .map(|_| ())
    }

    /// `session/set_model` (agents that list `models` rather than a model config option).
    pub async fn set_model(&self, session: &str, model: &str) -> Result<(), AcpError> {
        let params = json!({"sessionId": session, "modelId": model});
        self.request("session/set_model", params, REQUEST_TIMEOUT)
            .await
            .map(|_| ())
    }

    /// `session/set_config_option` with a value id (e.g. the model).
    pub async fn set_config_option(
        &self,
        session: &str,
        config_id: &str,
        value: &str,
    ) -> Result<(), AcpError> {
        let req = acp::SetSessionConfigOptionRequest::new(
            acp::SessionId::new(session.to_string()),
            acp::SessionConfigId::new(config_id.to_string()),
            value,
        );
        self.request("session/set_config_option", to_value(&req), REQUEST_TIMEOUT)
            .await
            .map(|_| ())
    }

    /// `session/prompt` with one text block; streamed message chunks become the turn's text. `idle`
    /// bounds the silence between two messages from the agent, `hard` the whole turn; either one
    /// cancels the turn (`session/cancel`) and fails it.
    pub async fn prompt(
        &self,
        session: &str,
        text: String,
        idle: Duration,
        hard: Duration,
    ) -> Result<Turn, AcpError> {
        let (tx, mut activity) = mpsc::unbounded_channel();
        lock(&self.shared.sinks).insert(session.to_string(), tx);
        let req = acp::PromptRequest::new(
            acp::SessionId::new(session.to_string()),
            vec![acp::ContentBlock::from(text)],
        );
        let result = async {
            // A pipe that stays full this long means the agent does not read: close its stdin.
            let sent = tokio::time::timeout(idle, self.send_request("session/prompt", to_value(&req)));
            let mut answer = match sent.await {
                Ok(answer) => answer?,
                Err(_) => {
                    *self.shared.stdin.lock().await = None;
                    return Err(AcpError::Idle(idle));
                }
            };
            let mut out = String::new();
            let mut used = None;
            let hard_deadline = tokio::time::Instant::now() + hard;
            loop {
                let idle_deadline = tokio::time::Instant::now() + idle;
                tokio::select! {
                    r = &mut answer => {
                        // Chunks sent before the answer are already queued: take them.
                        while let Ok(a) = activity.try_recv() {
                            match a {
                                Activity::Text(t) => push_capped(&mut out, &t),
                                Activity::Used(n) => used = Some(n),
                                Activity::Other => {}
                            }
                        }
                        let value = match r {
                            Ok(Ok(v)) => v,
                            Ok(Err(why)) => return Err(why.into_error("session/prompt")),
                            Err(_) => return Err(AcpError::Exited),
                        };
                        // The answer's own count or the context in use the agent last reported
                        // (Codex: the tokens of the turn's last model call), the larger.
                        let tokens = value.pointer("/usage/totalTokens").and_then(Value::as_u64).max(used);
                        let resp: acp::PromptResponse = serde_json::from_value(value).map_err(|e| AcpError::Invalid { method: "session/prompt", detail: e.to_string() })?;
                        return Ok(Turn { text: out, stop_reason: resp.stop_reason, tokens });
                    }
                    a = activity.recv() => match a {
                        Some(Activity::Text(t)) => push_capped(&mut out, &t),
                        Some(Activity::Used(n)) => used = Some(n),
                        Some(Activity::Other) => {}
                        None => return Err(AcpError::Exited),
                    },
                    _ = tokio::time::sleep_until(idle_deadline) => {
                        self.cancel(session).await;
                        return Err(AcpError::Idle(idle));
                    }
                    _ = tokio::time::sleep_until(hard_deadline) => {
                        self.cancel(session).await;
                        return Err(AcpError::Hard(hard));
                    }
                }
            }
        }
        .await;
        lock(&self.shared.sinks).remove(session);
        result
    }

    /// `session/cancel` (a notification).
    pub async fn cancel(&self, session: &str) {
        let n = acp::CancelNotification::new(acp::SessionId::new(session.to_string()));
        let line = json!({"jsonrpc": "2.0", "method": "session/cancel", "params": to_value(&n)});
        self.shared.write_line(&format!("{line}\n")).await;
    }

    /// Closes the agent's stdin, waits up to `grace` for it to exit, then kills it.
    pub async fn shutdown(&self) {
        let Some(mut child) = self.child.lock().await.take() else {
            return;
        };
        // A write stuck on a full pipe holds the lock; the signal below ends that agent anyway.
        if let Ok(mut stdin) = self.shared.stdin.try_lock() {
            *stdin = None;
        }
        // The agent's whole process group (it has its own): launchers such as npm's bin scripts or
        // `runuser` do not always pass a signal on to the agent they started.
        let group = child.id().map(|pid| format!("-{pid}"));
        let signal = |sig: &str| {
            #[cfg(unix)]
            if let Some(group) = &group {
                let _ = std::process::Command::new("kill")
                    .args([sig, "--", group])
                    .status();
            }
        };
        // SIGTERM first: well-behaved agents clean up.
        signal("-TERM");
        if tokio::time::timeout(Duration::from_secs(3), child.wait())
            .await
            .is_err()
        {
            signal("-KILL");
            let _ = child.kill().await;
        }
        self.shared.fail_all();
    }

    /// Waits until the agent process has exited (its stdout closed).
    pub async fn exited(&self) {
        let notified = self.shared.exited.notified();
        if !self.is_alive() {
            return;
        }
        notified.await;
    }

    async fn send_request(
        &self,
        method: &'static str,
        params: Value,
    ) -> Result<oneshot::Receiver<Answer>, AcpError> {
        if !self.is_alive() {
            return Err(AcpError::Exited);
        }
        let id = self.shared.next_id.fetch_add(1, Ordering::SeqCst);
        let (tx, rx) = oneshot::channel();
        lock(&self.shared.pending).insert(id, tx);
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        if !self.shared.write_line(&format!("{line}\n")).await {
            lock(&self.shared.pending).remove(&id);
            return Err(AcpError::Exited);
        }
        Ok(rx)
    }

    async fn request(
        &self,
        method: &'static str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, AcpError> {
        let rx = self.send_request(method, params).await?;
        match tokio::time::timeout(timeout, rx).await {
            Err(_) => Err(AcpError::Timeout(method)),
            Ok(Err(_)) => Err(AcpError::Exited),
            Ok(Ok(Err(why))) => Err(why.into_error(method)),
            Ok(Ok(Ok(v))) => Ok(v),
        }
    }
}

/// The model an agent offers in the `models` of a `session/new` answer (selected with
/// `session/set_model`): the `modelId` matching `provider:model` or `model`, when it is not already
/// the current one.
pub fn model_pick(new_session: &Value, provider: Option<&str>, model: &str) -> Option<String> {
    let models = new_session.get("models")?;
    let ids: Vec<&str> = models
        .get("availableModels")?
        .as_array()?
        .iter()
        .take(1000)
        .filter_map(|m| m.get("modelId")?.as_str())
        .collect();
    let wanted = provider
        .map(|p| format!("{p}:{model}"))
        .into_iter()
        .chain([model.to_string()]);
    let pick = wanted.into_iter().find(|w| ids.contains(&w.as_str()))?;
    (models.get("currentModelId").and_then(Value::as_str) != Some(pick.as_str())).then_some(pick)
}

/// The model switch an agent offers in a `session/new` answer: its `configOptions` entry of category
/// `model` (or id `model`), and the option value matching `provider:model` or `model` when it is not
/// already the current one. `None` when the agent offers no such switch or not this model.
pub fn model_switch(
    new_session: &Value,
    provider: Option<&str>,
    model: &str,
) -> Option<(String, String)> {
    let wanted: Vec<String> = provider
        .map(|p| format!("{p}:{model}"))
        .into_iter()
        .chain([model.to_string()])
        .collect();
    let options = new_session.get("configOptions")?.as_array()?;
    let opt = options.iter().find(|o| {
        o.get("category").and_then(Value::as_str) == Some("model")
            || o.get("id").and_then(Value::as_str) == Some("model")
    })?;
    let id = opt.get("id")?.as_str()?;
    let mut values = Vec::new();
    for v in opt.get("options")?.as_array()?.iter().take(1000) {
        match v.get("options").and_then(Value::as_array) {
            Some(group) => values.extend(group.iter().filter_map(|g| g.get("value")?.as_str())),
            None => values.extend(v.get("value").and_then(Value::as_str)),
        }
    }
    let pick = wanted.iter().find(|w| values.contains(&w.as_str()))?;
    if opt.get("currentValue").and_then(Value::as_str) == Some(pick.as_str()) {
        return None;
    }
    Some((id.to_string(), pick.clone()))
}

fn to_value(v: &impl serde::Serialize) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

fn push_capped(out: &mut String, text: &str) {
    let room = MAX_REPLY.saturating_sub(out.len());
    if room == 0 {
        return;
    }
    let mut end = text.len().min(room);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    out.push_str(&text[..end]);
}

/// Reads one line into `buf` (without the newline). `Some(true)`: a line; `Some(false)`: a line over
/// `cap` bytes, skipped; `None`: end of input.
async fn read_line_capped<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    buf: &mut Vec<u8>,
    cap: usize,
) -> std::io::Result<Option<bool>> {
    buf.clear();
    let mut over = false;
    loop {
        let chunk = reader.fill_buf().await?;
        if chunk.is_empty() {
            return Ok(if buf.is_empty() && !over {
                None
            } else {
                Some(!over)
            });
        }
        let (take, done) = match chunk.iter().position(|b| *b == b'\n') {
            Some(i) => (i + 1, true),
            None => (chunk.len(), false),
        };
        if !over {
            let part = &chunk[..if done { take - 1 } else { take }];
            if buf.len() + part.len() > cap {
                over = true;
                buf.clear();
            } else {
                buf.extend_from_slice(part);
            }
        }
        reader.consume(take);
        if done {
            return Ok(Some(!over));
        }
    }
}

async fn handle_line(shared: &Arc<Shared>, line: &[u8]) {
    let Ok(msg) = serde_json::from_slice::<Value>(line) else {
        tracing::debug!(persona = %shared.persona, "agent sent a line that is not JSON; ignored");
        return;
    };
    let method = msg.get("method").and_then(Value::as_str);
    let id = msg.get("id").cloned().filter(|v| !v.is_null());
    match (method, id) {
        (None, Some(id)) => answered(shared, &msg, &id),
        (Some("session/update"), None) => session_update(shared, &msg),
        (Some("session/request_permission"), Some(id)) => {
            let outcome = permission(shared, &msg);
            let resp = acp::RequestPermissionResponse::new(outcome);
            let line = json!({"jsonrpc": "2.0", "id": id, "result": to_value(&resp)});
            shared.write_line(&format!("{line}\n")).await;
        }
        (Some(m), Some(id)) => {
            tracing::debug!(persona = %shared.persona, method = %m.chars().take(64).collect::<String>(), "refused agent request");
            let line = json!({"jsonrpc": "2.0", "id": id,
                "error": {"code": -32601, "message": "Method not found: apiary does not offer this to agents"}});
            shared.write_line(&format!("{line}\n")).await;
        }
        _ => {}
    }
}

/// An answer to request `id`: handed to whoever waits for it.
fn answered(shared: &Shared, msg: &Value, id: &Value) {
    let Some(n) = id.as_u64() else { return };
    let Some(tx) = lock(&shared.pending).remove(&n) else {
        return;
    };
    let result = if let Some(err) = msg.get("error") {
        Err(Unanswered::Rpc {
            code: err.get("code").and_then(Value::as_i64).unwrap_or(0),
            message: err
                .get("message")
                .and_then(Value::as_str)
                .map(|m| stderr::visible(m, 500))
                .unwrap_or_default(),
            data: rpc_data(err.get("data")),
        })
    } else {
        Ok(msg.get("result").cloned().unwrap_or(Value::Null))
    };
    let _ = tx.send(result);
}

/// A `session/update` notification: text and other activity for the prompt in flight; tool
/// calls, plans and usage are also surfaced as [`AgentEvent`]s.
fn session_update(shared: &Shared, msg: &Value) {
    if let Some(update) = msg.pointer("/params/update")
        && let Some(sid) = msg.pointer("/params/sessionId").and_then(Value::as_str)
    {
        // Agent text: made printable and cut before it reaches a note.
        let sid = stderr::visible(sid, 200);
        let sid = sid.as_str();
        let event = match update.get("sessionUpdate").and_then(Value::as_str) {
            Some("tool_call" | "tool_call_update") => lock(&shared.calls).update(sid, update),
            Some("plan") => tools::plan_event(sid, update),
            Some("usage_update") => tools::usage_event(sid, update),
            _ => None,
        };
        if let Some(event) = event {
            shared.emit(event);
        }
    }
    let params = msg.get("params").cloned().unwrap_or(Value::Null);
    let Ok(n) = serde_json::from_value::<acp::SessionNotification>(params) else {
        // Unknown update kinds still count as activity for the idle timer.
        if let Some(sid) = msg.pointer("/params/sessionId").and_then(Value::as_str)
            && let Some(tx) = lock(&shared.sinks).get(sid)
        {
            let _ = tx.send(Activity::Other);
        }
        return;
    };
    let activity = match n.update {
        acp::SessionUpdate::AgentMessageChunk(chunk) => match chunk.content {
            acp::ContentBlock::Text(t) => Activity::Text(t.text),
            _ => Activity::Other,
        },
        acp::SessionUpdate::UsageUpdate(u) => Activity::Used(u.used),
        _ => Activity::Other,
    };
    if let Some(tx) = lock(&shared.sinks).get(n.session_id.0.as_ref()) {
        let _ = tx.send(activity);
    }
}

/// The answer to a `session/request_permission` request: the persona's tool policy, then the
/// operator's (counted as activity for the prompt in flight).
fn permission(shared: &Shared, msg: &Value) -> acp::RequestPermissionOutcome {
    let params = msg.get("params").cloned().unwrap_or(Value::Null);
    if let Some(sid) = params.get("sessionId").and_then(Value::as_str)
        && let Some(tx) = lock(&shared.sinks).get(sid)
    {
        let _ = tx.send(Activity::Other);
    }
    let (outcome, event) = {
        let calls = lock(&shared.calls);
        tools::decide_permission(&params, &shared.tools, shared.policy, &calls)
    };
    tracing::info!(persona = %shared.persona, policy = ?shared.policy, outcome = ?outcome, "agent asked for permission");
    shared.emit(event);
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_switch_finds_the_offered_model() {
        let resp = json!({"sessionId": "s", "configOptions": [
            {"id": "mdl", "name": "Model", "category": "model", "type": "select", "currentValue": "a",
             "options": [{"value": "a", "name": "A"}, {"group": "g", "name": "G",
                          "options": [{"value": "acme:big", "name": "Big"}]}]}]});
        assert_eq!(
            model_switch(&resp, Some("acme"), "big"),
            Some(("mdl".into(), "acme:big".into()))
        );
        assert_eq!(model_switch(&resp, None, "a"), None, "already current");
        assert_eq!(model_switch(&resp, None, "zzz"), None, "not offered");
        assert_eq!(model_switch(&json!({"sessionId": "s"}), None, "a"), None);
    }

    #[test]
    fn command_lines_split_with_quotes() {
        let c = AgentCommand::parse("goose acp --name 'my agent' \"\"").unwrap();
        assert_eq!(c.program, PathBuf::from("goose"));
        assert_eq!(c.args, ["acp", "--name", "my agent", ""]);
        assert!(AgentCommand::parse("   ").is_none());
    }

    #[test]
    fn permission_policy_picks_by_kind() {
        let opts: Vec<acp::PermissionOption> = serde_json::from_value(json!([
            {"optionId": "a", "name": "Allow", "kind": "allow_once"},
            {"optionId": "r", "name": "Reject", "kind": "reject_once"}
        ]))
        .unwrap();
        let deny = to_value(&tools::choose(PermissionPolicy::Deny, &opts));
        assert_eq!(deny, json!({"outcome": "selected", "optionId": "r"}));
        let allow = to_value(&tools::choose(PermissionPolicy::AllowOnce, &opts));
        assert_eq!(allow, json!({"outcome": "selected", "optionId": "a"}));
        let none = to_value(&tools::choose(PermissionPolicy::Deny, &opts[..1]));
        assert_eq!(none, json!({"outcome": "cancelled"}));
    }

    #[tokio::test]
    async fn capped_lines() {
        let data: &[u8] = b"short\nxxxxxxxxxxxxxxxxxxxx\nok";
        let mut r = BufReader::new(data);
        let mut buf = Vec::new();
        assert_eq!(
            read_line_capped(&mut r, &mut buf, 10).await.unwrap(),
            Some(true)
        );
        assert_eq!(buf, b"short");
        assert_eq!(
            read_line_capped(&mut r, &mut buf, 10).await.unwrap(),
            Some(false)
        );
        assert_eq!(
            read_line_capped(&mut r, &mut buf, 10).await.unwrap(),
            Some(true)
        );
        assert_eq!(buf, b"ok");
        assert_eq!(read_line_capped(&mut r, &mut buf, 10).await.unwrap(), None);
    }
}
