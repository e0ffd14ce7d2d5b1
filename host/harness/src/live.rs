//! A started persona ([`Live`]) and its agent ([`Agent`]): start-up in the order of the module
//! doc, restarts through the [`Supervisor`], and the persona's hooks run off the async threads.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use agent_client_protocol_schema::v1 as acp;
use nostr_sdk::prelude::*;

use super::event::{self, Event};
use super::sessions::SessionStore;
use super::supervise::{Policy, Supervised, Supervisor};
use super::{
    Config, DispatchError, HookError, HookPoint, HookRunner, Note, Out, PackRun, RELAY_TIMEOUT,
    Seen, TriggerPersona, confine, flood, hooks, limits, lock, workspace,
};
use crate::acp::{AcpClient, SpawnSpec, StderrTail};
use crate::relay::{self, Message};
use crate::resolve::ResolvedPersona;

/// A persona that started.
pub(super) struct Live {
    pub pack_id: String,
    pub resolved: ResolvedPersona,
    pub keys: Keys,
    /// This persona's own relay connection, authenticated with `keys`, opened once the relay asks
    /// for authentication (see [`super::persona_relay`]).
    pub own_relay: tokio::sync::OnceCell<Client>,
    pub trigger: TriggerPersona,
    pub cwd: PathBuf,
    /// Subscribed channels: id → name.
    pub channels: BTreeMap<String, String>,
    spec: SpawnSpec,
    base_prompt: Option<String>,
    /// The running agent, replaced when it is restarted (backoff and circuit breaker).
    agent: Supervisor<Agent>,
    /// Triggers this persona already answered: a retried turn never publishes twice.
    pub answered: std::sync::Mutex<Seen>,
    /// Turns given to each author, over all this persona's channels (see [`flood`]).
    pub authors: std::sync::Mutex<flood::Authors>,
    /// The persona's hook runner, for `on_stop`/`on_start` around a restart.
    hooks: Arc<dyn HookRunner>,
    /// The agent run whose session end `on_stop` already marked: once per run, whether it ended by
    /// a crash, the circuit breaker or shutdown.
    stopped: std::sync::Mutex<Option<u64>>,
    /// Where its session ids are saved, for resuming (see [`super::sessions`]).
    sessions: Option<SessionStore>,
    /// Its spending against the operator's limits, over all its channels.
    pub budget: std::sync::Mutex<limits::Budget>,
    /// The confinement layers its agent runs under (`files,network,seccomp`, `none`).
    pub confinement: String,
    /// Its agent's egress socket (kept open across restarts).
    _egress: Option<Arc<apiary_egress::AgentSocket>>,
    /// The turns it gives one author and takes in one channel: `up`'s flags, or its own from
    /// the overrides file (see [`flood`]).
    pub turns: flood::TurnLimits,
    /// The message each channel's turn is answering now (for its tools' `read_thread` and the
    /// hop count of its posts).
    current: std::sync::Mutex<HashMap<String, Message>>,
    /// Posts through its tools, per channel, at its channel turn rate.
    posts: std::sync::Mutex<apiary_limits::Buckets<String>>,
    /// Its sessions' grants of apiary's tools (`None`: the tools are off).
    tools: Option<ToolOffer>,
}

/// One run of a persona's agent process.
pub(super) struct Agent {
    pub client: AcpClient,
    /// channel id → session id
    pub sessions: BTreeMap<String, String>,
    /// `Some((base, system))` when the agent lacks `systemPrompt`: the prefix goes in every prompt.
    pub prefix: Option<(Option<String>, String)>,
    /// The `session/new` its channels' sessions were opened with, for the sessions opened later
    /// (an A2A conversation: see [`super::remote`]).
    pub template: acp::NewSessionRequest,
    generation: u64,
    /// Its sessions' tokens of apiary's tools, revoked with this run.
    _grants: Vec<apiary_mcp::Grant>,
}

impl Supervised for Agent {
    fn generation(&self) -> u64 {
        self.generation
    }

    fn stop(&self) -> impl Future<Output = ()> + Send {
        self.client.shutdown()
    }
}

impl Live {
    /// The last lines the persona's agent wrote to its stderr.
    pub fn stderr(&self) -> &StderrTail {
        &self.spec.stderr
    }

    pub async fn current(&self) -> Arc<Agent> {
        self.agent.current().await
    }

    /// Ends the persona (shutdown, or its pack reloaded): `on_stop` for its session, then its
    /// agent and its own relay connection stop.
    pub async fn stop(&self) {
        let agent = self.current().await;
        self.session_ended(agent.generation()).await;
        agent.client.shutdown().await;
        if let Some(own) = self.own_relay.get() {
            relay::shutdown(own).await;
        }
    }

    /// The restart rules this persona's agent runs under.
    pub fn policy(&self) -> &Policy {
        self.agent.policy()
    }

    /// Replaces the agent of `generation` (if nobody did already) after a backoff; refuses when
    /// the circuit is open (see [`super::supervise`]). The ended session gets its `on_stop` and
    /// the new one its `on_start` first, as at start-up (spec §9).
    pub async fn restart(&self, generation: u64, out: &Out) -> Result<Arc<Agent>, DispatchError> {
        let window = self.policy().window;
        let name = &self.trigger.name;
        let start = |next: u64| async move {
            self.session_ended(next - 1).await;
            if self.resolved.hooks.on_start.is_some() {
                self.hook(HookPoint::OnStart)
                    .await
                    .map_err(DispatchError::OnStart)?;
            }
            let start = AgentStart {
                spec: &self.spec,
                pack_id: &self.pack_id,
                persona: &self.resolved,
                base_prompt: self.base_prompt.clone(),
                channels: &self.channels,
                store: self.sessions.as_ref(),
                tools: self.tools.as_ref(),
            };
            connect_agent(start, next).await
        };
        let announce = |nth: usize| {
            out(Note::new(
                Event::Restarted {
                    persona: name.clone(),
                    restart: u32::try_from(nth).unwrap_or(u32::MAX),
                    window_secs: window.as_secs(),
                },
                format!("restarted {name} agent (restart {nth} within {window:?})"),
            ));
        };
        match self.agent.restart(generation, start, announce).await {
            Ok(restarted) => Ok(restarted.agent()),
            Err(e) => {
                if matches!(e, DispatchError::CircuitOpen { .. }) {
                    self.session_ended(generation).await;
                }
                Err(e)
            }
        }
    }

    /// `on_stop` for the agent run `generation`, whose session ended (spec §9: "normal exit or
    /// error"), at most once per run; a failure is logged only.
    pub async fn session_ended(&self, generation: u64) {
        {
            let mut stopped = self.stopped.lock().unwrap_or_else(|e| e.into_inner());
            if *stopped == Some(generation) {
                return;
            }
            *stopped = Some(generation);
        }
        if self.resolved.hooks.on_stop.is_none() {
            return;
        }
        if let Err(e) = self.hook(HookPoint::OnStop).await {
            tracing::warn!(persona = %self.trigger.name, "on_stop failed: {e}");
        }
    }

    /// `on_start` or `on_stop`, off the async threads within the runner's deadline.
    async fn hook(&self, point: HookPoint) -> Result<(), HookError> {
        let (h, id, p, dir) = (
            Arc::clone(&self.hooks),
            self.pack_id.clone(),
            self.resolved.clone(),
            self.cwd.clone(),
        );
        let deadline = self.hooks.deadline(point, &self.resolved);
        hooks::off_async(point.as_str(), deadline, move || {
            h.run(point, &id, &p, &dir, None)
        })
        .await
    }

    /// Runs the persona's `on_message` hook (read-only, [`hooks::ON_MESSAGE_DEADLINE`]); `Err`
    /// drops the message.
    pub async fn on_message(
        self: &Arc<Self>,
        hooks: &Arc<dyn HookRunner>,
        message: &Message,
    ) -> Result<(), HookError> {
        // Most personas have no `on_message` hook: no blocking-pool round trip for them.
        if self.resolved.hooks.on_message.is_none() {
            return Ok(());
        }
        self.run_hook(hooks, HookPoint::OnMessage, Some(message))
            .await
    }

    /// Runs one of the persona's hooks off the async threads, within the runner's wall-clock
    /// deadline for that point.
    pub async fn run_hook(
        self: &Arc<Self>,
        hooks: &Arc<dyn HookRunner>,
        point: HookPoint,
        message: Option<&Message>,
    ) -> Result<(), HookError> {
        let (h, l, m) = (Arc::clone(hooks), Arc::clone(self), message.cloned());
        let deadline = hooks.deadline(point, &self.resolved);
        hooks::off_async(point.as_str(), deadline, move || {
            h.run(point, &l.pack_id, &l.resolved, &l.cwd, m.as_ref())
        })
        .await
    }
}

/// The persona a session's tools answer for, filled once it runs (its agent starts first).
pub(super) type Binding = Arc<std::sync::OnceLock<std::sync::Weak<Live>>>;

/// A session's tools, made by the harness (see `mcp_tools`) for the persona `Binding` names and
/// a channel id (`None`: a session of no channel, an A2A conversation).
pub(super) type Backends =
    Arc<dyn Fn(Binding, Option<&str>) -> Arc<dyn apiary_mcp::Backend> + Send + Sync>;

/// apiary's tools for a starting persona: the server and how a session's answers are made.
pub(super) struct Tools {
    pub server: Arc<apiary_mcp::Server>,
    pub backend: Backends,
}

/// What a persona's sessions are offered: a token of apiary's MCP server each, and how its agent
/// reaches the server (HTTP, or the stdio bridge for an agent without HTTP).
struct ToolOffer {
    server: Arc<apiary_mcp::Server>,
    backend: Backends,
    live: Binding,
    /// The server's URL as the agent reaches it (inside its network namespace, a port of its own).
    url: String,
    /// apiary's own binary, the bridge.
    bridge: Option<PathBuf>,
}

impl ToolOffer {
    /// A session's grant and its `mcpServers` entry; `channel`: the session's channel id.
    fn grant(
        &self,
        channel: Option<&str>,
        http: bool,
    ) -> Option<(apiary_mcp::Grant, acp::McpServer)> {
        let grant = self
            .server
            .grant((self.backend)(Arc::clone(&self.live), channel));
        let name = apiary_mcp::SERVER_NAME;
        let entry = if http {
            acp::McpServer::Http(acp::McpServerHttp::new(name, &self.url).headers(vec![
                acp::HttpHeader::new("Authorization", format!("Bearer {}", grant.token)),
            ]))
        } else {
            acp::McpServer::Stdio(
                acp::McpServerStdio::new(name, self.bridge.as_ref()?)
                    .args(vec!["mcp-bridge".to_string()])
                    .env(vec![
                        acp::EnvVariable::new(apiary_mcp::bridge::URL_VAR, &self.url),
                        acp::EnvVariable::new(apiary_mcp::bridge::TOKEN_VAR, &grant.token),
                    ]),
            )
        };
        Some((grant, entry))
    }
}

/// Where a starting persona's agent reports: the last lines of its stderr (kept by the caller for
/// a failure report), and the harness's notes for its events.
pub(super) struct Reporting {
    pub stderr: StderrTail,
    pub out: Out,
    /// Learns the persona's key and its agent's granted values, never to publish them.
    pub redactor: Arc<super::redact::Redactor>,
}

/// Starts one persona: MCP check, workspace and skills, key, hooks, agent. `Err` refuses it.
pub(super) async fn start_persona(
    tools: Option<Tools>,
    config: &Config,
    client: &Client,
    run: &PackRun,
    index: usize,
    runner: &Arc<dyn HookRunner>,
    reporting: Reporting,
) -> Result<Live, DispatchError> {
    let persona = &run.resolved.personas[index];
    let pack_id = run.resolved.pack.id.clone();
    let name = persona.identity.name.clone();
    // MCP servers first: a ${VAR} unset or not allowed refuses the persona before anything runs.
    check_mcp(persona, &pack_id)?;
    let cwd = open_workspace(config, run, index, &name)?;
    let keys = config
        .keys
        .persona(&run.namespace, &name)
        .map_err(DispatchError::Keys)?;
    start_hooks(runner, &pack_id, persona, &cwd).await?;
    let tools_addr = tools.as_ref().map(|t| t.server.addr());
    let agent_box = confine_agent(config, run, persona, &cwd, &reporting.out, tools_addr)?;
    reporting.redactor.add_key(keys.secret_key());
    for value in &agent_box.secrets {
        reporting.redactor.add_value(value);
    }
    let tools = tools
        .zip(agent_box.mcp_url.clone())
        .map(|(t, url)| ToolOffer {
            server: t.server,
            backend: t.backend,
            live: Binding::default(),
            url,
            bridge: std::env::current_exe().ok(),
        });
    let mut spec = spawn_spec(config, persona, &cwd, &agent_box, reporting.stderr);
    spec.events = Some(agent_events(&name, &reporting.out));
    let channels = subscribed(config, client, persona).await;
    let sessions = config
        .sessions_dir
        .as_ref()
        .map(|dir| SessionStore::new(dir, &run.namespace, &name));
    let start = AgentStart {
        spec: &spec,
        pack_id: &pack_id,
        persona,
        base_prompt: config.base_prompt.clone(),
        channels: &channels,
        store: sessions.as_ref(),
        tools: tools.as_ref(),
    };
    let agent = connect_agent(start, 0).await?;
    let limits = config
        .persona_limits
        .get(&(pack_id.clone(), name.clone()))
        .copied()
        .unwrap_or_default();
    let turns = turn_limits(config.limits, &limits);
    Ok(Live {
        own_relay: tokio::sync::OnceCell::new(),
        pack_id: pack_id.clone(),
        trigger: TriggerPersona {
            name: name.clone(),
            display_name: persona.identity.display_name.clone(),
            qualified: format!("{pack_id}/{name}"),
            pubkey: keys.public_key(),
            triggers: persona.triggers.clone(),
        },
        resolved: persona.clone(),
        keys,
        cwd,
        channels,
        spec,
        base_prompt: config.base_prompt.clone(),
        agent: Supervisor::new(agent, Policy::DEFAULT),
        answered: Default::default(),
        authors: std::sync::Mutex::new(flood::Authors::new(turns.per_author)),
        hooks: Arc::clone(runner),
        stopped: std::sync::Mutex::new(None),
        sessions,
        budget: std::sync::Mutex::new(limits::Budget::new(limits)),
        turns,
        confinement: agent_box.label,
        _egress: agent_box.socket,
        current: Default::default(),
        posts: std::sync::Mutex::new(apiary_limits::Buckets::new(turns.per_channel, 64)),
        tools,
    })
}

/// The persona's agent, confined as `up` decided (see [`confine`]).
fn confine_agent(
    config: &Config,
    run: &PackRun,
    persona: &ResolvedPersona,
    cwd: &Path,
    out: &Out,
    tools: Option<std::net::SocketAddr>,
) -> Result<confine::AgentBox, DispatchError> {
    let operator_env = confine::env::OperatorEnv::of_process();
    let (name, out) = (persona.identity.name.clone(), Arc::clone(out));
    let report: apiary_egress::Report = Arc::new(move |r: apiary_egress::Refusal| {
        let text = format!("egress_refused {name} {}: {}", r.target, r.why);
        out(Note::new(
            Event::EgressRefused {
                persona: name.clone(),
                route: r.route,
                target: r.target,
                reason: r.why,
            },
            text,
        ));
    });
    let ctx = confine::AgentContext {
        confinement: &config.confinement,
        agent: &config.agent,
        persona,
        pack_id: &run.resolved.pack.id,
        namespace: &run.namespace,
        cwd,
        workspace_root: &config.workspace_root,
        private: &config.private_dirs,
        operator_env: &operator_env,
        report,
        tools,
    };
    Ok(confine::prepare(&ctx)?)
}

/// The persona's flood limits: its own from the overrides file where set, else `up`'s.
fn turn_limits(up: flood::TurnLimits, own: &limits::PersonaLimits) -> flood::TurnLimits {
    let rate =
        |own: Option<u32>, default: flood::Rate| own.map_or(default, flood::Rate::per_minute);
    flood::TurnLimits {
        per_author: rate(own.author_turns_per_minute, up.per_author),
        per_channel: rate(own.channel_turns_per_minute, up.per_channel),
    }
}

/// The persona's MCP servers in the form its agent gets them, or why they cannot be delivered.
fn check_mcp(persona: &ResolvedPersona, pack_id: &str) -> Result<(), DispatchError> {
    let env = crate::resolve::process_env;
    let vars = crate::acp::mcp::Vars {
        env: &env,
        allowed: &persona.allow_env,
        pack: pack_id,
    };
    crate::acp::mcp::to_acp(&persona.mcp_servers, &vars, true)?;
    Ok(())
}

/// Opens the persona's workspace and copies its skills in; the workspace path.
fn open_workspace(
    config: &Config,
    run: &PackRun,
    index: usize,
    name: &str,
) -> Result<PathBuf, DispatchError> {
    let ws = workspace::open(&config.workspace_root, &run.namespace, name)
        .map_err(DispatchError::Workspace)?;
    let skills = run.pack.skills_for(index);
    let copy =
        workspace::copy_skills(&ws, &run.pack.root, &skills).map_err(DispatchError::Skills)?;
    for warning in &copy.skipped {
        tracing::warn!(persona = %name, "{warning}");
    }
    for skill in &copy.updated {
        tracing::info!(persona = %name, "skill \"{skill}\" changed in the pack; updated its copy");
    }
    Ok(ws.path)
}

/// Off the async threads, each bounded: compiling the persona's hooks, then `on_start`.
async fn start_hooks(
    runner: &Arc<dyn HookRunner>,
    pack_id: &str,
    persona: &ResolvedPersona,
    cwd: &Path,
) -> Result<(), DispatchError> {
    if !persona.hooks.is_empty() {
        // A first compilation of a big component gets more time than a load from the cache.
        let (h, id, p) = (Arc::clone(runner), pack_id.to_string(), persona.clone());
        let deadline = hooks::off_async("checking the hooks", hooks::LOAD_DEADLINE, move || {
            Ok(h.load_deadline(&id, &p))
        })
        .await
        .map_err(DispatchError::HookLoad)?;
        let (h, id, p) = (Arc::clone(runner), pack_id.to_string(), persona.clone());
        hooks::off_async(hooks::load_what(deadline), deadline, move || {
            h.prepare(&id, &p)
        })
        .await
        .map_err(DispatchError::HookLoad)?;
    }
    if persona.hooks.on_start.is_some() {
        let (h, id, p, dir) = (
            Arc::clone(runner),
            pack_id.to_string(),
            persona.clone(),
            cwd.to_path_buf(),
        );
        let deadline = runner.deadline(HookPoint::OnStart, persona);
        hooks::off_async("on_start", deadline, move || {
            h.run(HookPoint::OnStart, &id, &p, &dir, None)
        })
        .await
        .map_err(DispatchError::OnStart)?;
    }
    Ok(())
}

/// How the persona's agent is started: the operator's command in the workspace, with the
/// environment and confinement of its box.
fn spawn_spec(
    config: &Config,
    persona: &ResolvedPersona,
    cwd: &Path,
    agent_box: &confine::AgentBox,
    stderr: StderrTail,
) -> SpawnSpec {
    let name = &persona.identity.name;
    SpawnSpec {
        persona: name.clone(),
        command: config.agent.clone(),
        env: agent_box.env.clone(),
        launch: agent_box.launch.clone(),
        cwd: cwd.to_path_buf(),
        policy: config.policy,
        tools: persona.tool_policy.clone().unwrap_or_default(),
        events: None,
        nice: config.agent_nice,
        stderr,
    }
}

/// The persona's agent events, as notes (see [`event_note`]).
fn agent_events(persona: &str, out: &Out) -> crate::acp::AgentEvents {
    let (persona, out) = (persona.to_string(), Arc::clone(out));
    crate::acp::AgentEvents(Arc::new(move |event| out(event_note(&persona, event))))
}

/// An agent event as a note: a permission answer in both forms (a refused tool is worth a line),
/// tool calls, plans and usage in the JSON stream only.
fn event_note(persona: &str, event: crate::acp::AgentEvent) -> Note {
    use crate::acp::AgentEvent as E;
    match event {
        E::Permission {
            session,
            tool,
            kind,
            title,
            allowed,
            decided_by,
            reason,
        } => {
            let shown = tool.clone().or(title.clone());
            let shown = shown.as_deref().unwrap_or("a tool");
            let verdict = if allowed { "allowed" } else { "refused" };
            let why = match &reason {
                Some(r) => format!("by the tool policy: {r}"),
                None => "by --permission".to_string(),
            };
            let line = format!("permission {persona} {shown}: {verdict} {why}");
            let permission = Event::Permission {
                persona: persona.to_string(),
                session,
                tool,
                kind,
                title,
                allowed,
                decided_by: decided_by.into(),
                reason,
            };
            Note::new(permission, line)
        }
        E::ToolCall {
            session,
            id,
            tool,
            kind,
            title,
            status,
        } => Note::only_json(Event::ToolCall {
            persona: persona.to_string(),
            session,
            call: id,
            tool,
            kind,
            title,
            status,
        }),
        E::Plan {
            session,
            entries,
            completed,
        } => Note::only_json(Event::Plan {
            persona: persona.to_string(),
            session,
            entries,
            completed,
        }),
        E::Usage {
            session,
            used,
            size,
            cost,
        } => Note::only_json(Event::Usage {
            persona: persona.to_string(),
            session,
            used,
            size,
            cost: cost.map(|(amount, currency)| event::Cost { amount, currency }),
        }),
    }
}

/// The persona's subscribed channels, id → name (a name the relay does not map is its own id).
async fn subscribed(
    config: &Config,
    client: &Client,
    persona: &ResolvedPersona,
) -> BTreeMap<String, String> {
    let ids = relay::resolve_channels(
        client,
        &persona.subscribe,
        &config.channel_authority,
        RELAY_TIMEOUT,
    )
    .await;
    let channels: BTreeMap<String, String> = persona
        .subscribe
        .iter()
        .map(|n| (ids.get(n).cloned().unwrap_or_else(|| n.clone()), n.clone()))
        .collect();
    if channels.is_empty() {
        tracing::warn!(persona = %persona.identity.name, "subscribes to no channel; it will never wake");
    }
    channels
}

/// What starting a persona's agent takes, at start-up and at each restart.
struct AgentStart<'a> {
    spec: &'a SpawnSpec,
    pack_id: &'a str,
    persona: &'a ResolvedPersona,
    base_prompt: Option<String>,
    channels: &'a BTreeMap<String, String>,
    /// Where its sessions are saved for resuming.
    store: Option<&'a SessionStore>,
    tools: Option<&'a ToolOffer>,
}

/// Starts the agent: spawn (in `spec.cwd`), `initialize`, one `session/new` per channel.
async fn connect_agent(start: AgentStart<'_>, generation: u64) -> Result<Agent, DispatchError> {
    let AgentStart {
        spec,
        pack_id,
        persona,
        base_prompt,
        channels,
        store,
        tools,
    } = start;
    let name = &persona.identity.name;
    let env = crate::resolve::process_env;
    // Hooks and the agent's earlier runs write in the workspace: no runtime configuration in it
    // that the operator did not allow.
    confine::planted_config(&spec.cwd, &persona.agent.config)?;
    let agent = AcpClient::spawn(spec).await?;
    let vars = crate::acp::mcp::Vars {
        env: &env,
        allowed: &persona.allow_env,
        pack: pack_id,
    };
    let (mut servers, warnings) =
        match crate::acp::mcp::to_acp(&persona.mcp_servers, &vars, agent.info.mcp_http) {
            Ok(v) => v,
            Err(e) => {
                agent.shutdown().await;
                return Err(e.into());
            }
        };
    for w in warnings {
        tracing::warn!(persona = %name, "{w}");
    }
    if tools.is_some() {
        // apiary's own server takes the name; a pack's server of that name would shadow it.
        servers.retain(|s| {
            let taken = server_name(s) == apiary_mcp::SERVER_NAME;
            if taken {
                tracing::warn!(persona = %name, "the pack's MCP server `{}` is left out: apiary's own tools use that name", apiary_mcp::SERVER_NAME);
            }
            !taken
        });
    }
    let mut grants = Vec::new();
    let mut offer = |channel: Option<&str>| -> Vec<acp::McpServer> {
        let mut all = servers.clone();
        if let Some((grant, entry)) = tools.and_then(|t| t.grant(channel, agent.info.mcp_http)) {
            grants.push(grant);
            all.push(entry);
        }
        all
    };
    let prefix = if agent.info.system_prompt {
        None
    } else {
        Some((base_prompt.clone(), persona.system_prompt.clone()))
    };
    let system_prompt = agent
        .info
        .system_prompt
        .then(|| system_prompt(base_prompt.as_deref(), &persona.system_prompt));
    let mut sessions = BTreeMap::new();
    let agent_name = agent.info.name.clone();
    let mut template = acp::NewSessionRequest::new(spec.cwd.to_path_buf()).mcp_servers(offer(None));
    // The tool policy, to runtimes that take a deny list of their own (Claude Code), and no
    // project settings.
    let meta = crate::acp::tools::session_meta(&spec.tools);
    template = template.meta(confine::without_project_settings(meta));
    if let Some(sp) = &system_prompt {
        template = template.system_prompt(sp.clone());
    }
    for (id, channel_name) in channels {
        let offered = offer(Some(id));
        if let Some(session) = reopen(&agent, store, id, &spec.cwd, &offered, name).await {
            sessions.insert(id.clone(), session);
            continue;
        }
        let request = template.clone().mcp_servers(offered);
        match open_session(&agent, request, persona).await {
            Ok(session) => {
                if let Some(store) = store {
                    store.put(agent_name.as_deref(), id, &session);
                }
                sessions.insert(id.clone(), session)
            }
            Err(source) => {
                agent.shutdown().await;
                return Err(DispatchError::Session {
                    channel: channel_name.clone(),
                    source,
                });
            }
        };
    }
    Ok(Agent {
        client: agent,
        sessions,
        prefix,
        template,
        generation,
        _grants: grants,
    })
}

fn server_name(s: &acp::McpServer) -> &str {
    match s {
        acp::McpServer::Stdio(s) => &s.name,
        acp::McpServer::Http(s) => &s.name,
        acp::McpServer::Sse(s) => &s.name,
        _ => "",
    }
}

/// The channel's saved session, reopened, when the agent can; `None` starts a new one (a session
/// the agent no longer knows is not an error: the conversation starts blank).
async fn reopen(
    agent: &AcpClient,
    store: Option<&SessionStore>,
    channel: &str,
    cwd: &Path,
    servers: &[acp::McpServer],
    persona: &str,
) -> Option<String> {
    agent.info.reopen?;
    let saved = store?.get(agent.info.name.as_deref(), channel)?;
    match agent.reopen_session(&saved, cwd, servers).await {
        Ok(()) => {
            tracing::info!(persona = %persona, session = %saved, "resumed the channel's session");
            Some(saved)
        }
        Err(e) => {
            tracing::warn!(persona = %persona, session = %saved, "saved session not resumed, starting a new one: {e}");
            None
        }
    }
}

/// The `systemPrompt` of `session/new`: the base layer, then the persona's.
fn system_prompt(base: Option<&str>, persona: &str) -> acp::SystemPrompt {
    let mut content = Vec::new();
    if let Some(base) = base {
        content.push(acp::ContentBlock::from(base.to_string()));
    }
    content.push(acp::ContentBlock::from(persona.to_string()));
    acp::SystemPrompt::new(content).mode(acp::SystemPromptMode::Append)
}

impl Live {
    /// Lets its tools answer for it, once it runs.
    pub fn bind(self: &Arc<Self>) {
        if let Some(tools) = &self.tools {
            let _ = tools.live.set(Arc::downgrade(self));
        }
    }

    /// What the other personas see of it.
    pub fn member(&self) -> super::team::Member {
        super::team::Member::of(&self.pack_id, &self.resolved, self.keys.public_key(), true)
    }

    /// The message the turn of `channel` is answering, if one runs.
    pub fn turn_now(&self, channel: &str) -> Option<Message> {
        lock(&self.current).get(channel).cloned()
    }

    /// Marks the message the turn of `channel` answers (`None`: the turn ended).
    pub fn answering(&self, channel: &str, message: Option<&Message>) {
        let mut current = lock(&self.current);
        match message {
            Some(m) => current.insert(channel.to_string(), m.clone()),
            None => current.remove(channel),
        };
    }

    /// Takes one post from the channel's bucket; `false`: over the rate.
    pub fn take_post(&self, channel: &str, now: std::time::Instant) -> bool {
        lock(&self.posts).try_take(channel.to_string(), now)
    }

    /// A new session on `agent`, opened as its channels' were.
    pub async fn new_session(&self, agent: &Agent) -> Result<String, crate::acp::AcpError> {
        open_session(&agent.client, agent.template.clone(), &self.resolved).await
    }
}

/// `session/new`, then the agent's own model switch when it offers the persona's model.
async fn open_session(
    agent: &AcpClient,
    req: acp::NewSessionRequest,
    persona: &ResolvedPersona,
) -> Result<String, crate::acp::AcpError> {
    let name = &persona.identity.name;
    let (session, answer) = agent.new_session(req).await?;
    // A read-only persona on an agent with a read-only mode of its own (Codex) gets that mode too.
    if persona
        .tool_policy
        .as_ref()
        .is_some_and(|p| p.is_read_only())
        && let Some((config_id, value)) = crate::acp::tools::read_only_mode(&answer)
    {
        match agent.set_config_option(&session, &config_id, &value).await {
            Ok(()) => tracing::info!(persona = %name, mode = %value, "read-only mode selected"),
            Err(e) => tracing::warn!(persona = %name, "selecting the read-only mode: {e}"),
        }
    }
    if let Some(m) = &persona.model
        && let Some((config_id, value)) =
            crate::acp::model_switch(&answer, m.provider.as_deref(), &m.model)
    {
        match agent.set_config_option(&session, &config_id, &value).await {
            Ok(()) => {
                tracing::info!(persona = %name, model = %value, "model selected through session/set_config_option")
            }
            Err(e) => tracing::warn!(persona = %name, "selecting model {value}: {e}"),
        }
    } else if let Some(m) = &persona.model
        && let Some(value) = crate::acp::model_pick(&answer, m.provider.as_deref(), &m.model)
    {
        match agent.set_model(&session, &value).await {
            Ok(()) => {
                tracing::info!(persona = %name, model = %value, "model selected through session/set_model")
            }
            Err(e) => tracing::warn!(persona = %name, "selecting model {value}: {e}"),
        }
    }
    Ok(session)
}
