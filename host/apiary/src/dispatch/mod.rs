//! The live harness: relay events in, agent turns out, replies published back.
//!
//! Start-up, per persona: workspace `$AGENT_CWD` → MCP `${VAR}` check (a variable unset, or not in
//! the pack's `allow_env`, refuses that persona, naming it) → skills copied → `on_start` → agent spawned with the projected env →
//! `initialize` → one `session/new` per subscribed channel (cwd, MCP servers, `systemPrompt` when the
//! agent advertises it). A persona that fails any step is refused; the others run.
//!
//! Each message: one relay subscription for every subscribed channel → parse (hostile input, capped)
//! → drop duplicates and the harness's own personas' messages (no loops) → the trigger matcher per
//! persona subscribed to that channel → the (persona, channel) queue, one prompt in flight each,
//! turns limited per author and per channel ([`flood`]) → `on_message` (5 s; failure drops the
//! message) → prompt assembly → `session/prompt` → the final text published as that persona's
//! kind-9 reply (unless publishing is off).
//!
//! Blocking and panics: every hook call and component compilation runs off the async threads
//! ([`hooks::off_async`]; the sandbox itself keeps every component call off them too), each with a
//! wall-clock deadline. A panic in one persona's path (starting it, a turn, publishing a reply,
//! routing an event) is caught where that path starts, reported as that persona's `error` or
//! `persona_refused`, and the rest runs on; after a panic in a turn the persona's agent is
//! restarted under the circuit breaker like after a crash.
//!
//! Shutdown: stop taking events, let queues drain (bounded), `on_stop`, stop agents, disconnect.

pub mod flood;
pub mod hooks;
pub mod note;
pub mod prompt;
mod route;
pub mod sandboxed;
pub mod script;
pub mod trigger;
pub mod workspace;

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use agent_client_protocol_schema::v1 as acp;
use futures_util::FutureExt;
use nostr_sdk::prelude::*;
use tokio::sync::mpsc;

use crate::acp::{AcpClient, AcpError, AgentCommand, PermissionPolicy, SpawnSpec};
use crate::pack::Pack;
use crate::relay::{self, KIND_MESSAGE, Message, ReplyMode, keys::KeyStore};
use crate::resolve::{ResolvedPack, ResolvedPersona};
pub use flood::{Rate, TurnLimits};
pub use hooks::{HookPoint, HookRunner, NoHooks};
pub use note::Note;
pub use trigger::{NativeTriggers, Reason, TriggerMatcher, TriggerPersona};

/// At most this many queued messages (of one author or one thread) go into one turn.
const MAX_BATCH: usize = flood::MAX_WAITING_PER_AUTHOR;
/// Messages routed to a (persona, channel) worker and not yet taken into its queue beyond this are
/// dropped, oldest kept (the worker takes them even during a turn; see [`flood::Waiting`]).
const QUEUE_CAP: usize = 500;
/// Event ids remembered for de-duplication.
const SEEN_CAP: usize = 65_536;
const RELAY_TIMEOUT: Duration = Duration::from_secs(10);
/// Supervision: a turn is tried at most this many times when the agent dies under it; restarts
/// back off from [`RESTART_BACKOFF`], doubling; [`BREAKER_RESTARTS`] restarts within
/// [`BREAKER_WINDOW`] open the circuit (the persona stops taking turns).
const MAX_ATTEMPTS: u32 = 3;
const RESTART_BACKOFF: Duration = Duration::from_millis(250);
const BREAKER_RESTARTS: usize = 5;
const BREAKER_WINDOW: Duration = Duration::from_secs(300);
/// How often the subscription's `since` cursor is moved forward, and how far behind the newest
/// event it stays (relays' clocks and ordering are not exact).
const CURSOR_EVERY: Duration = Duration::from_secs(30);
const CURSOR_SLACK_SECS: u64 = 60;
/// Thread context: at most this many earlier messages, fetched within this time.
const THREAD_CONTEXT: usize = 12;
const THREAD_FETCH: Duration = Duration::from_secs(3);

/// Operator settings for one `apiary up`.
#[derive(Debug, Clone)]
pub struct Config {
    pub relay_url: String,
    pub agent: AgentCommand,
    /// The agents' CPU niceness (see [`SpawnSpec::nice`]).
    pub agent_nice: u8,
    /// Publish the agent's final text as its reply (off for agents that publish themselves).
    pub publish: bool,
    pub policy: PermissionPolicy,
    pub idle_timeout: Duration,
    pub turn_timeout: Duration,
    pub drain_timeout: Duration,
    /// Each persona works in `<workspace_root>/<namespace>/<persona>/` (see [`PackRun::namespace`]).
    pub workspace_root: PathBuf,
    pub keys: KeyStore,
    /// The `[Base]` layer (`None`: off).
    pub base_prompt: Option<String>,
    /// `relay_url` is this process's own embedded relay, which checked every event's id and
    /// signature before storing it: the subscription's events are not checked a second time (see
    /// `relay::echo`). Never set for a relay of another process.
    pub relay_in_process: bool,
    /// Whose kind 39000 metadata maps channel names to group ids.
    pub channel_authority: relay::ChannelAuthority,
    /// Turns each persona gives one author and one channel (see [`flood`]).
    pub limits: TurnLimits,
}

/// Where the harness reports what it does, one note per event (stdout for `apiary up`).
pub type Out = Arc<dyn Fn(Note) + Send + Sync>;

/// One pack to run.
pub struct PackRun {
    pub pack: Pack,
    pub resolved: ResolvedPack,
    /// The identity namespace its persona keys and workspaces live in: the pack id for the installed
    /// pack or the directory owning the id, never another pack's (see [`crate::dist::identity`]).
    pub namespace: String,
}

/// A persona that started.
struct Live {
    pack_id: String,
    resolved: ResolvedPersona,
    keys: Keys,
    /// This persona's own relay connection, authenticated with `keys`, opened once the relay asks
    /// for authentication (see [`persona_relay`]).
    own_relay: tokio::sync::OnceCell<Client>,
    trigger: TriggerPersona,
    cwd: PathBuf,
    /// Subscribed channels: id → name.
    channels: BTreeMap<String, String>,
    spec: SpawnSpec,
    base_prompt: Option<String>,
    /// The running agent; replaced when it is restarted.
    agent: tokio::sync::Mutex<Arc<Agent>>,
    /// Recent restarts, for the backoff and the circuit breaker.
    restarts: std::sync::Mutex<VecDeque<std::time::Instant>>,
    /// Triggers this persona already answered: a retried turn never publishes twice.
    answered: std::sync::Mutex<Seen>,
    /// Turns given to each author, over all this persona's channels (see [`flood`]).
    authors: std::sync::Mutex<flood::Authors>,
}

/// One run of a persona's agent process.
struct Agent {
    client: AcpClient,
    /// channel id → session id
    sessions: BTreeMap<String, String>,
    /// `Some((base, system))` when the agent lacks `systemPrompt`: the prefix goes in every prompt.
    prefix: Option<(Option<String>, String)>,
    generation: u64,
}

impl Live {
    async fn current(&self) -> Arc<Agent> {
        Arc::clone(&*self.agent.lock().await)
    }

    /// Replaces the agent of `generation` (if nobody did already) after a backoff; refuses when
    /// it crashed [`BREAKER_RESTARTS`] times within [`BREAKER_WINDOW`] (circuit open).
    async fn restart(&self, generation: u64, out: &Out) -> Result<Arc<Agent>, String> {
        let mut slot = self.agent.lock().await;
        if slot.generation != generation {
            return Ok(Arc::clone(&*slot));
        }
        let recent = {
            let mut r = self.restarts.lock().unwrap_or_else(|e| e.into_inner());
            let now = std::time::Instant::now();
            while r
                .front()
                .is_some_and(|t| now.duration_since(*t) > BREAKER_WINDOW)
            {
                r.pop_front();
            }
            if r.len() >= BREAKER_RESTARTS {
                return Err(format!(
                    "circuit open: the agent crashed {} times within {:?}",
                    r.len(),
                    BREAKER_WINDOW
                ));
            }
            r.push_back(now);
            r.len()
        };
        slot.client.shutdown().await;
        let backoff = RESTART_BACKOFF * 2u32.pow(recent.saturating_sub(1).min(6) as u32);
        tokio::time::sleep(backoff.min(Duration::from_secs(10))).await;
        let agent = connect_agent(
            &self.spec,
            &self.pack_id,
            &self.resolved,
            self.base_prompt.clone(),
            &self.cwd,
            &self.channels,
            generation + 1,
        )
        .await?;
        out(Note::new(
            "restarted",
            format!(
                "restarted {} agent (restart {recent} within {:?})",
                self.trigger.name, BREAKER_WINDOW
            ),
        )
        .with("persona", self.trigger.name.as_str())
        .with("restart", recent)
        .with("window_secs", BREAKER_WINDOW.as_secs()));
        *slot = Arc::new(agent);
        Ok(Arc::clone(&*slot))
    }
}

/// Counts for the caller.
#[derive(Debug, Default, Clone)]
pub struct Summary {
    pub started: usize,
    pub refused: usize,
    pub events: u64,
    pub replies: u64,
}

/// Runs until `shutdown` completes. Errors only when nothing can run (no relay, no persona).
pub async fn run(
    config: Config,
    packs: Vec<PackRun>,
    matcher: Arc<dyn TriggerMatcher>,
    hooks: Arc<dyn HookRunner>,
    out: Out,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<Summary> {
    // The shared connection authenticates (NIP-42) as the operator. Once the relay asks for
    // authentication, each persona publishes and fetches context on a connection of its own,
    // authenticated with its own key (see `persona_relay`).
    let operator = match config.keys.operator() {
        Ok(k) => Some(k),
        Err(e) => {
            tracing::warn!("no operator key, the subscription cannot authenticate: {e:#}");
            None
        }
    };
    let echoes = Arc::new(relay::echo::Echoes::default());
    // Routing (set up once the personas run): the in-process relay's transport routes the
    // subscription's events as it reads them (`relay_in_process`), the loop below routes the relay
    // pool's.
    let router: route::Shared = Arc::default();
    let transport = if config.relay_in_process {
        let router = Arc::clone(&router);
        let handover: relay::echo::Handover = Arc::new(move |event| {
            route::route(&router, &event);
        });
        relay::echo::SkipEchoes::trusting(Arc::clone(&echoes), handover)
    } else {
        relay::echo::SkipEchoes::new(Arc::clone(&echoes))
    };
    let (client, mut notifications) =
        relay::connect_skipping_echoes(&config.relay_url, RELAY_TIMEOUT, operator, transport)
            .await?;
    let auth = Arc::new(AtomicBool::new(false));
    let mut summary = Summary::default();

    // Start every persona; refusals are reported and skipped.
    let mut lives: Vec<Arc<Live>> = Vec::new();
    for run in &packs {
        for (index, persona) in run.resolved.personas.iter().enumerate() {
            let name = persona.identity.name.clone();
            note_challenges(&mut notifications, &auth);
            let started =
                AssertUnwindSafe(start_persona(&config, &client, run, index, persona, &hooks))
                    .catch_unwind()
                    .await
                    .unwrap_or_else(|panic| {
                        Err(format!(
                            "internal error while starting: {}",
                            crate::sandbox::blocking::panic_text(panic)
                        ))
                    });
            match started {
                Ok(live) => {
                    if auth.load(Ordering::SeqCst) {
                        persona_relay(&live, &client, &auth, &config.relay_url).await;
                    }
                    let channels: Vec<String> =
                        live.channels.values().map(|n| format!("#{n}")).collect();
                    let with_prefix = live.current().await.prefix.is_some();
                    let system_prompt = if with_prefix { "prefix" } else { "session" };
                    let pubkey = live.keys.public_key().to_hex();
                    out(Note::new(
                        "persona_ready",
                        format!(
                            "persona {name} ready pubkey={pubkey} channels={} system_prompt={system_prompt}",
                            if channels.is_empty() {
                                "-".into()
                            } else {
                                channels.join(",")
                            },
                        ),
                    )
                    .with("persona", name.as_str())
                    .with("pack", live.pack_id.as_str())
                    .with("identity", run.namespace.as_str())
                    .with("pubkey", pubkey)
                    .with("channels", live.channels.values().cloned().collect::<Vec<_>>())
                    .with("system_prompt", system_prompt));
                    tracing::info!(persona = %name, pack = %live.pack_id, cwd = %live.cwd.display(), "persona started");
                    lives.push(Arc::new(live));
                    summary.started += 1;
                }
                Err(why) => {
                    tracing::error!(persona = %name, "persona refused: {why}");
                    out(
                        Note::new("persona_refused", format!("persona {name} refused: {why}"))
                            .with("persona", name.as_str())
                            .with("reason", why.as_str()),
                    );
                    summary.refused += 1;
                }
            }
        }
    }
    if lives.is_empty() {
        relay::shutdown(&client).await;
        anyhow::bail!("no persona could start");
    }

    // Routing: channel id → personas subscribed to it.
    let mut routes: HashMap<String, Vec<usize>> = HashMap::new();
    for (i, live) in lives.iter().enumerate() {
        for channel in live.channels.keys() {
            routes.entry(channel.clone()).or_default().push(i);
        }
    }
    let own: HashSet<PublicKey> = lives.iter().map(|l| l.keys.public_key()).collect();

    // Workers: one per (persona, channel), each with its FIFO.
    let mut queues: route::Queues = HashMap::new();
    let mut workers = tokio::task::JoinSet::new();
    let replies = Arc::new(std::sync::atomic::AtomicU64::new(0));
    for (i, live) in lives.iter().enumerate() {
        for channel in live.channels.keys() {
            let (tx, rx) = mpsc::channel(QUEUE_CAP);
            queues.insert((i, channel.clone()), tx);
            workers.spawn(worker(
                Arc::clone(live),
                channel.clone(),
                rx,
                config.clone(),
                client.clone(),
                Arc::clone(&auth),
                Arc::clone(&hooks),
                Arc::clone(&out),
                Arc::clone(&replies),
                Arc::clone(&echoes),
            ));
        }
    }

    let channels: Vec<String> = routes.keys().cloned().collect();
    let since = Timestamp::now();
    let cursor = Arc::new(AtomicU64::new(since.as_secs()));
    *router.lock().unwrap_or_else(|e| e.into_inner()) = Some(route::Router {
        lives: lives.clone(),
        routes,
        own,
        queues,
        matcher,
        out: Arc::clone(&out),
        cursor: Arc::clone(&cursor),
        seen: Seen::default(),
        routed: 0,
    });
    let sub = client
        .subscribe(relay::channel_filter(&channels, since), None)
        .await
        .map_err(|e| anyhow::anyhow!("subscribing to the relay: {e}"))?
        .val;
    echoes.watch(&sub);
    out(Note::new(
        "ready",
        format!("ready personas={} channels={}", lives.len(), channels.len()),
    )
    .with("personas", lives.len())
    .with("channels", channels.len()));

    // The subscription's `since` cursor: advanced periodically so that when the client reconnects
    // (nostr-sdk re-sends the stored REQ) the relay replays only a short window, which the seen-set
    // de-duplicates: nothing is lost, nothing answered twice.
    let mut cursor_sent = since;
    let mut tick = tokio::time::interval(CURSOR_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tokio::pin!(shutdown);
    loop {
        let event = tokio::select! {
            _ = &mut shutdown => break,
            _ = tick.tick() => {
                let newest = Timestamp::from(cursor.load(Ordering::Relaxed));
                if newest > cursor_sent {
                    let from = Timestamp::from(newest.as_secs().saturating_sub(CURSOR_SLACK_SECS));
                    if let Err(e) = client
                        .subscribe_with_id(sub.clone(), relay::channel_filter(&channels, from), None)
                        .await
                    {
                        tracing::warn!("advancing the subscription cursor: {e}");
                    } else {
                        cursor_sent = newest;
                        tracing::debug!(since = from.as_secs(), "subscription cursor advanced");
                    }
                }
                continue;
            }
            n = notifications.recv() => match n {
                Ok(RelayPoolNotification::Event { subscription_id, event, .. }) if subscription_id == sub => event,
                Ok(RelayPoolNotification::Message { message: RelayMessage::Auth { .. }, .. }) => {
                    auth.store(true, Ordering::SeqCst);
                    continue;
                }
                Ok(RelayPoolNotification::Shutdown) => {
                    tracing::warn!("relay pool shut down");
                    break;
                }
                Ok(_) => continue,
                Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                    tracing::warn!("{n} relay notifications lagged; missed events are not replayed");
                    continue;
                }
                Err(_) => break,
            },
        };
        // Let the workers just woken write their prompts before the next event: tokio runs the
        // last task woken by this one only when this one yields (and no other thread may take
        // it), which with events queued behind this one would be after the whole burst.
        if route::route(&router, &event) {
            tokio::task::yield_now().await;
        }
    }

    // Routing stops (events arriving from now on stay unanswered) and drops the queues.
    let stopped = router.lock().unwrap_or_else(|e| e.into_inner()).take();
    summary.events = stopped.map_or(0, |r| r.routed);
    // Drain (the queues went with routing): no new events; let the queues empty within the drain
    // timeout.
    out(Note::new("stopping", "stopping: draining queues"));
    client.unsubscribe(&sub).await;
    let drained = tokio::time::timeout(config.drain_timeout, async {
        while workers.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!("drain timeout reached; abandoning turns in flight");
        workers.abort_all();
    }
    for live in &lives {
        if let Err(e) = run_hook(&hooks, HookPoint::OnStop, live, None).await {
            tracing::warn!(persona = %live.trigger.name, "on_stop failed: {e}");
        }
        live.current().await.client.shutdown().await;
        if let Some(own) = live.own_relay.get() {
            relay::shutdown(own).await;
        }
    }
    relay::shutdown(&client).await;
    summary.replies = replies.load(std::sync::atomic::Ordering::SeqCst);
    out(
        Note::new("stopped", format!("stopped replies={}", summary.replies))
            .with("replies", summary.replies),
    );
    Ok(summary)
}

async fn start_persona(
    config: &Config,
    client: &Client,
    run: &PackRun,
    index: usize,
    persona: &ResolvedPersona,
    runner: &Arc<dyn HookRunner>,
) -> Result<Live, String> {
    let pack_id = run.resolved.pack.id.clone();
    let name = persona.identity.name.clone();
    let env = crate::resolve::process_env;

    // MCP servers first: a ${VAR} unset or not allowed refuses the persona before anything runs.
    let vars = crate::acp::mcp::Vars {
        env: &env,
        allowed: &persona.allow_env,
        pack: &pack_id,
    };
    crate::acp::mcp::to_acp(&persona.mcp_servers, &vars, true).map_err(|e| e.to_string())?;

    let ws = workspace::open(&config.workspace_root, &run.namespace, &name)
        .map_err(|e| format!("cannot open the workspace: {e}"))?;
    let skills = run.pack.skills_for(index);
    let copy = workspace::copy_skills(&ws, &run.pack.root, &skills)
        .map_err(|e| format!("skills not copied: {e}"))?;
    let cwd = ws.path;
    for warning in &copy.skipped {
        tracing::warn!(persona = %name, "{warning}");
    }

    let keys = config
        .keys
        .persona(&run.namespace, &name)
        .map_err(|e| format!("key store: {e:#}"))?;

    // Off the async threads, each bounded: compiling the persona's hooks, then `on_start`.
    if !persona.hooks.is_empty() {
        let (h, id, p) = (Arc::clone(runner), pack_id.clone(), persona.clone());
        hooks::off_async("loading the hooks", hooks::LOAD_DEADLINE, move || {
            h.prepare(&id, &p)
        })
        .await
        .map_err(|e| format!("hook cannot be loaded: {e}"))?;
    }
    if persona.hooks.on_start.is_some() {
        let (h, id, p, dir) = (
            Arc::clone(runner),
            pack_id.clone(),
            persona.clone(),
            cwd.clone(),
        );
        let deadline = runner.deadline(HookPoint::OnStart, persona);
        hooks::off_async("on_start", deadline, move || {
            h.run(HookPoint::OnStart, &id, &p, &dir, None)
        })
        .await
        .map_err(|e| format!("on_start hook failed: {e}"))?;
    }

    let mut child_env: Vec<(String, String)> = persona
        .env
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    child_env.push(("APIARY_PERSONA".into(), name.clone()));
    child_env.push(("APIARY_PACK".into(), pack_id.clone()));
    child_env.push(("AGENT_CWD".into(), cwd.display().to_string()));
    let spec = SpawnSpec {
        persona: name.clone(),
        command: config.agent.clone(),
        env: child_env,
        cwd: cwd.clone(),
        policy: config.policy,
        nice: config.agent_nice,
    };
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
        tracing::warn!(persona = %name, "subscribes to no channel; it will never wake");
    }
    let agent = connect_agent(
        &spec,
        &pack_id,
        persona,
        config.base_prompt.clone(),
        &cwd,
        &channels,
        0,
    )
    .await?;
    Ok(Live {
        own_relay: tokio::sync::OnceCell::new(),
        pack_id,
        trigger: TriggerPersona {
            name: name.clone(),
            display_name: persona.identity.display_name.clone(),
            pubkey: keys.public_key(),
            triggers: persona.triggers.clone(),
        },
        resolved: persona.clone(),
        keys,
        cwd,
        channels,
        spec,
        base_prompt: config.base_prompt.clone(),
        agent: tokio::sync::Mutex::new(Arc::new(agent)),
        restarts: Default::default(),
        answered: Default::default(),
        authors: std::sync::Mutex::new(flood::Authors::new(config.limits.per_author)),
    })
}

/// Starts the agent: spawn, `initialize`, one `session/new` per channel.
async fn connect_agent(
    spec: &SpawnSpec,
    pack_id: &str,
    persona: &ResolvedPersona,
    base_prompt: Option<String>,
    cwd: &std::path::Path,
    channels: &BTreeMap<String, String>,
    generation: u64,
) -> Result<Agent, String> {
    let name = &persona.identity.name;
    let env = crate::resolve::process_env;
    let agent = AcpClient::spawn(spec).await.map_err(|e| e.to_string())?;
    let vars = crate::acp::mcp::Vars {
        env: &env,
        allowed: &persona.allow_env,
        pack: pack_id,
    };
    let (servers, warnings) =
        match crate::acp::mcp::to_acp(&persona.mcp_servers, &vars, agent.info.mcp_http) {
            Ok(v) => v,
            Err(e) => {
                agent.shutdown().await;
                return Err(e.to_string());
            }
        };
    for w in warnings {
        tracing::warn!(persona = %name, "{w}");
    }
    let prefix = if agent.info.system_prompt {
        None
    } else {
        Some((base_prompt.clone(), persona.system_prompt.clone()))
    };
    let system_prompt = agent.info.system_prompt.then(|| {
        let mut content = Vec::new();
        if let Some(base) = &base_prompt {
            content.push(acp::ContentBlock::from(base.clone()));
        }
        content.push(acp::ContentBlock::from(persona.system_prompt.clone()));
        acp::SystemPrompt::new(content).mode(acp::SystemPromptMode::Append)
    });
    let mut sessions = BTreeMap::new();
    for (id, channel_name) in channels {
        let mut req = acp::NewSessionRequest::new(cwd.to_path_buf()).mcp_servers(servers.clone());
        if let Some(sp) = &system_prompt {
            req = req.system_prompt(sp.clone());
        }
        match agent.new_session(req).await {
            Ok((session, answer)) => {
                // The agent's own model switch, when it offers the persona's model.
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
                }
                sessions.insert(id.clone(), session);
            }
            Err(e) => {
                agent.shutdown().await;
                return Err(format!("session/new for #{channel_name}: {e}"));
            }
        }
    }
    Ok(Agent {
        client: agent,
        sessions,
        prefix,
        generation,
    })
}

#[allow(clippy::too_many_arguments)]
async fn worker(
    live: Arc<Live>,
    channel: String,
    mut rx: mpsc::Receiver<(Message, Reason)>,
    config: Config,
    shared: Client,
    auth: Arc<AtomicBool>,
    hooks: Arc<dyn HookRunner>,
    out: Out,
    replies: Arc<std::sync::atomic::AtomicU64>,
    echoes: Arc<relay::echo::Echoes>,
) {
    let Some(channel_name) = live.channels.get(&channel).cloned() else {
        return;
    };
    let (publish_tx, publish_rx) = mpsc::channel(QUEUE_CAP);
    let publisher = tokio::spawn(publisher(
        Arc::clone(&live),
        channel_name.clone(),
        publish_rx,
        config.relay_url.clone(),
        shared.clone(),
        Arc::clone(&auth),
        Arc::clone(&out),
        replies,
        echoes,
    ));
    let limits = config.limits;
    let turns = Turns {
        live,
        channel,
        channel_name,
        config,
        shared,
        auth,
        hooks,
        out,
        publish_tx,
    };
    // Messages taken from the queue and waiting for their turn, and this channel's turn bucket.
    let mut waiting = flood::Waiting::default();
    let mut bucket = flood::Bucket::new(limits.per_channel, Instant::now());
    let mut open = true;
    loop {
        while open {
            match rx.try_recv() {
                Ok((m, r)) => turns.admit(&mut waiting, m, r),
                Err(mpsc::error::TryRecvError::Empty) => break,
                Err(mpsc::error::TryRecvError::Disconnected) => open = false,
            }
        }
        let mut held = Vec::new();
        let next = {
            let mut authors = turns.live.authors.lock().unwrap_or_else(|e| e.into_inner());
            waiting.next(
                Instant::now(),
                &mut bucket,
                limits.per_channel,
                &mut authors,
                MAX_BATCH,
                &mut held,
            )
        };
        for h in held {
            turns.limited(h, "it waits and is answered with their next turn");
        }
        match next {
            flood::Next::Turn(batch) => {
                // The queue is read during the turn too, so a long turn never fills it and the
                // limits see every message; a panic ends this turn only.
                let turn = AssertUnwindSafe(turns.turn(batch)).catch_unwind();
                tokio::pin!(turn);
                let ended = loop {
                    tokio::select! {
                        biased;
                        ended = &mut turn => break ended,
                        got = rx.recv(), if open => match got {
                            Some((m, r)) => turns.admit(&mut waiting, m, r),
                            None => open = false,
                        },
                    }
                };
                if let Err(panic) = ended {
                    turns
                        .panicked(crate::sandbox::blocking::panic_text(panic))
                        .await;
                }
            }
            // Stopping: nothing more arrives, and the harness does not wait for tokens.
            flood::Next::WaitUntil(_) if !open => {
                for m in waiting.drain() {
                    turns.limited(
                        flood::Limited {
                            message: m,
                            limit: "stopping",
                            rate: limits.per_author,
                            action: "dropped",
                        },
                        "dropped: the harness is stopping and the message was waiting for a turn",
                    );
                }
            }
            flood::Next::WaitUntil(at) => {
                tokio::select! {
                    got = rx.recv() => match got {
                        Some((m, r)) => turns.admit(&mut waiting, m, r),
                        None => open = false,
                    },
                    _ = tokio::time::sleep_until(at.into()) => {}
                }
            }
            flood::Next::Idle if !open => break,
            flood::Next::Idle => match rx.recv().await {
                Some((m, r)) => turns.admit(&mut waiting, m, r),
                None => open = false,
            },
        }
    }
    // Draining covers the replies still being published.
    drop(turns);
    let _ = publisher.await;
}

/// What one (persona, channel) worker needs for its turns.
struct Turns {
    live: Arc<Live>,
    channel: String,
    channel_name: String,
    config: Config,
    shared: Client,
    auth: Arc<AtomicBool>,
    hooks: Arc<dyn HookRunner>,
    out: Out,
    publish_tx: mpsc::Sender<Reply>,
}

impl Turns {
    /// A note naming this worker's persona and channel.
    fn note(&self, event: &'static str, text: String) -> Note {
        channel_note(event, text, &self.live.trigger.name, &self.channel_name)
    }

    /// Takes a routed message into the waiting queue, reporting any the queue's bounds drop.
    fn admit(&self, waiting: &mut flood::Waiting, message: Message, reason: Reason) {
        for dropped in waiting.push(message, reason, self.config.limits.per_author) {
            let why = match dropped.limit {
                "queue" => format!("dropped: {} messages already wait", flood::MAX_WAITING),
                _ => format!(
                    "dropped: more than {} messages of author {} wait (the oldest go)",
                    flood::MAX_WAITING_PER_AUTHOR,
                    relay::short(&dropped.message.author.to_hex())
                ),
            };
            self.limited(dropped, &why);
        }
    }

    /// Reports a message held back or dropped by the flood limits (`limited`).
    fn limited(&self, l: flood::Limited, what: &str) {
        let name = &self.live.trigger.name;
        let id = l.message.id.to_hex();
        let author = l.message.author.to_hex();
        // A held message says which rate it is over; a dropped one says why in `what`.
        let over = match (l.action, l.limit) {
            ("coalesced", "author") => format!(
                "author {} is over {name}'s {}",
                relay::short(&author),
                l.rate
            ),
            ("coalesced", "channel") => {
                format!("#{} is over {name}'s {}", self.channel_name, l.rate)
            }
            _ => String::new(),
        };
        let text = if over.is_empty() {
            format!("limited {name} {id}: {what}")
        } else {
            format!("limited {name} {id}: {over}; {what}")
        };
        tracing::info!(persona = %name, event = %id, "{text}");
        let mut note = self
            .note("limited", text)
            .with("id", id.as_str())
            .with("author", author)
            .with("limit", l.limit)
            .with("action", l.action);
        if !over.is_empty() {
            note = note
                .with("turns", l.rate.turns)
                .with("per_secs", l.rate.per.as_secs());
        }
        (self.out)(note);
    }

    /// After a panic in a turn: report it, and restart the agent (its state is unknown), which
    /// the circuit breaker counts like a crash.
    async fn panicked(&self, panic: String) {
        let name = &self.live.trigger.name;
        let why = format!("internal error during the turn: {panic}");
        tracing::error!(persona = %name, channel = %self.channel, "{why}");
        (self.out)(
            self.note("error", format!("error {name}: {why}"))
                .with("reason", why),
        );
        let generation = self.live.current().await.generation;
        if let Err(e) = self.live.restart(generation, &self.out).await {
            (self.out)(
                self.note("error", format!("error {name}: {e}"))
                    .with("reason", e),
            );
        }
    }

    /// One turn: `on_message` for each message of the batch, the prompt (answering the newest,
    /// the others with it), supervision, then the reply handed to the publisher.
    async fn turn(&self, batch: Vec<(Message, Reason)>) {
        let live = &self.live;
        let config = &self.config;
        let out = &self.out;
        let name = &live.trigger.name;
        let note = |event: &'static str, text: String| self.note(event, text);
        // Benchmark probe (`benches/live_agents.rs`): the worker has the message.
        if let Some((first, _)) = batch.first() {
            tracing::trace!(target: "apiary::probe", persona = %name, id = %first.id, "message taken");
        }
        let mut kept = Vec::with_capacity(batch.len());
        for (message, reason) in batch {
            if live
                .answered
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .contains(&message.id)
            {
                continue;
            }
            let verdict = on_message(&self.hooks, live, &message).await;
            // For the status view's hook counts (a drop is also its own `dropped` note).
            if live.resolved.hooks.on_message.is_some() {
                out(note("hook_ran", String::new())
                    .json_only()
                    .with("id", message.id.to_hex())
                    .with("hook", "on_message")
                    .with("kept", verdict.is_ok()));
            }
            match verdict {
                Ok(()) => kept.push((message, reason)),
                Err(e) => {
                    let id = message.id.to_hex();
                    tracing::warn!(persona = %name, event = %id, "message dropped by on_message: {e}");
                    out(
                        note("dropped", format!("dropped {name} {id}: on_message: {e}"))
                            .with("id", id.as_str())
                            .with("hook", "on_message")
                            .with("reason", e),
                    );
                }
            }
        }
        // The turn answers the newest message; the earlier ones of the burst come with it.
        let Some((message, reason)) = kept.pop() else {
            return;
        };
        let earlier: Vec<(Message, String)> =
            kept.into_iter().map(|(m, r)| (m, r.to_string())).collect();
        let id = message.id.to_hex();
        if !earlier.is_empty() {
            let ids: Vec<String> = earlier.iter().map(|(m, _)| m.id.to_hex()).collect();
            out(note(
                "batch",
                format!("batch {name} {id}: with {}", ids.join(",")),
            )
            .with("id", id.as_str())
            .with("with", ids));
        }

        let ctx = prompt::Context {
            channel_name: &self.channel_name,
            persona: name,
            publish: config.publish,
        };
        let client = persona_relay(live, &self.shared, &self.auth, &config.relay_url).await;
        let thread = match message.root {
            Some(root) => thread_context(&client, &message, root).await,
            None => Vec::new(),
        };
        // The turn, retried on a fresh agent when the agent dies under it (supervision).
        let mut attempts = 0;
        let turn = loop {
            let mut agent = live.current().await;
            if !agent.client.is_alive() {
                match live.restart(agent.generation, out).await {
                    Ok(a) => agent = a,
                    Err(e) => break Err(e),
                }
            }
            let Some(session) = agent.sessions.get(&self.channel).cloned() else {
                break Err("no session for this channel".to_string());
            };
            let prefix = agent
                .prefix
                .as_ref()
                .map(|(base, system)| (base.as_deref(), system.as_str()));
            let text = prompt::assemble(
                prefix,
                &ctx,
                &reason.to_string(),
                &thread,
                &earlier,
                &message,
            );
            attempts += 1;
            out(note("prompt", String::new())
                .json_only()
                .with("id", id.as_str())
                .with("session", session.as_str())
                .with("attempt", attempts)
                .with("batch", earlier.len() + 1));
            match agent
                .client
                .prompt(&session, text, config.idle_timeout, config.turn_timeout)
                .await
            {
                Ok(t) => break Ok(t),
                Err(AcpError::Exited) if attempts < MAX_ATTEMPTS => {
                    tracing::warn!(persona = %name, event = %id, "agent exited during the turn; restarting and retrying");
                    out(note(
                        "crashed",
                        format!("crashed {name} {id}: agent exited during the turn; retrying"),
                    )
                    .with("id", id.as_str())
                    .with("attempt", attempts));
                    if let Err(e) = live.restart(agent.generation, out).await {
                        break Err(e);
                    }
                }
                Err(e) => break Err(e.to_string()),
            }
        };
        tracing::trace!(target: "apiary::probe", persona = %name, channel = %self.channel, "turn ended");
        let turn = match turn {
            Ok(t) => t,
            Err(e) => {
                tracing::error!(persona = %name, event = %id, "turn failed: {e}");
                out(note("error", format!("error {name} {id}: {e}"))
                    .with("id", id.as_str())
                    .with("reason", e));
                return;
            }
        };
        // Never two replies to one trigger, whatever happened above.
        {
            let mut answered = live.answered.lock().unwrap_or_else(|e| e.into_inner());
            if !answered.insert(message.id) {
                return;
            }
            for (m, _) in &earlier {
                answered.insert(m.id);
            }
        }
        let reply = turn.text.trim();
        if reply.is_empty() {
            let stop = format!("{:?}", turn.stop_reason);
            out(note("turn", format!("turn {name} {id}: no text ({stop})"))
                .with("id", id.as_str())
                .with("published", false)
                .with("reason", format!("no text ({stop})")));
            return;
        }
        if !config.publish {
            out(note(
                "turn",
                format!(
                    "turn {name} {id}: {} bytes, not published (--no-publish)",
                    reply.len()
                ),
            )
            .with("id", id.as_str())
            .with("published", false)
            .with("bytes", reply.len())
            .with("reason", "--no-publish"));
            return;
        }
        // Signing and the relay's acknowledgement happen on the publisher: the next message of
        // this (persona, channel) does not wait for them.
        if self
            .publish_tx
            .send(Reply {
                trigger: message,
                text: reply.to_string(),
            })
            .await
            .is_err()
        {
            tracing::error!(persona = %name, event = %id, "reply publisher stopped; reply lost");
        }
    }
}

/// A note about one persona in one channel (the worker's and its publisher's).
fn channel_note(event: &'static str, text: String, persona: &str, channel: &str) -> Note {
    Note::new(event, text)
        .with("persona", persona)
        .with("channel", channel)
}

/// A reply to publish: the agent's final text and the message it answers.
struct Reply {
    trigger: Message,
    text: String,
}

/// Signs (on the blocking pool: a signature costs tens of microseconds) and publishes one
/// worker's replies in order, each with its persona's key.
#[allow(clippy::too_many_arguments)]
async fn publisher(
    live: Arc<Live>,
    channel_name: String,
    mut rx: mpsc::Receiver<Reply>,
    relay_url: String,
    shared: Client,
    auth: Arc<AtomicBool>,
    out: Out,
    replies: Arc<std::sync::atomic::AtomicU64>,
    echoes: Arc<relay::echo::Echoes>,
) {
    let name = live.trigger.name.clone();
    let note = |event: &'static str, text: String| channel_note(event, text, &name, &channel_name);
    while let Some(Reply { trigger, text }) = rx.recv().await {
        let id = trigger.id.to_hex();
        // A panic while publishing loses this reply only, and says so.
        let one = async {
            let mode = ReplyMode {
                thread_replies: live.resolved.thread_replies,
                broadcast_replies: live.resolved.broadcast_replies,
            };
            let tags = relay::reply_tags(&trigger, mode);
            let keys = live.keys.clone();
            let channel = trigger.channel.clone();
            let signed = tokio::task::spawn_blocking(move || {
                relay::message(&keys, &channel, &text, tags).map_err(|e| e.to_string())
            })
            .await
            .unwrap_or_else(|e| Err(e.to_string()));
            let event = match signed {
                Ok(e) => e,
                Err(e) => {
                    out(note(
                        "error",
                        format!("error {name} {id}: signing the reply: {e}"),
                    )
                    .with("id", id.as_str())
                    .with("reason", format!("signing the reply: {e}")));
                    return;
                }
            };
            echoes.expect(event.id);
            let client = persona_relay(&live, &shared, &auth, &relay_url).await;
            let mut sent = client.send_event(&event).await;
            // A relay that wants authentication only for writing says so now: retry once on the
            // persona's own authenticated connection.
            if let Ok(o) = &sent
                && o.success.is_empty()
                && o.failed
                    .values()
                    .any(|why| why.starts_with("auth-required:"))
                && !auth.swap(true, Ordering::SeqCst)
            {
                let own = persona_relay(&live, &shared, &auth, &relay_url).await;
                sent = own.send_event(&event).await;
            }
            match sent {
                Ok(o) if !o.success.is_empty() => {
                    replies.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    let reply_id = event.id.to_hex();
                    out(note("reply", format!("reply {name} {reply_id} to {id}"))
                        .with("id", reply_id)
                        .with("to", id.as_str())
                        .with(
                            "thread",
                            Message::parse(&event)
                                .and_then(|m| m.root)
                                .map(|r| r.to_hex()),
                        ));
                }
                Ok(o) => {
                    let why: Vec<String> = o.failed.values().cloned().collect();
                    let why = format!("the relay refused the reply: {}", why.join("; "));
                    out(note("error", format!("error {name} {id}: {why}"))
                        .with("id", id.as_str())
                        .with("reason", why));
                }
                Err(e) => out(note(
                    "error",
                    format!("error {name} {id}: publishing the reply: {e}"),
                )
                .with("id", id.as_str())
                .with("reason", format!("publishing the reply: {e}"))),
            }
        };
        if let Err(panic) = AssertUnwindSafe(one).catch_unwind().await {
            let why = format!(
                "internal error while publishing the reply: {}",
                crate::sandbox::blocking::panic_text(panic)
            );
            tracing::error!(persona = %name, event = %id, "{why}");
            out(note("error", format!("error {name} {id}: {why}"))
                .with("id", id.as_str())
                .with("reason", why));
        }
    }
}

/// The connection a persona uses: the shared one until the relay has asked for authentication
/// (`auth`), then its own, authenticated with its own key, since NIP-42 binds one key to a
/// connection. Lazily, because a nostr-sdk client costs about 2 MB resident and most relays never
/// ask. A persona whose own connection cannot be opened keeps using the shared one.
async fn persona_relay(live: &Live, shared: &Client, auth: &AtomicBool, url: &str) -> Client {
    if !auth.load(Ordering::SeqCst) {
        return shared.clone();
    }
    let own = live
        .own_relay
        .get_or_try_init(|| relay::connect_as(url, RELAY_TIMEOUT, Some(live.keys.clone())))
        .await;
    match own {
        Ok(c) => c.clone(),
        Err(e) => {
            tracing::warn!(persona = %live.trigger.name, "own authenticated connection: {e:#}");
            shared.clone()
        }
    }
}

/// Notes an `AUTH` challenge among the notifications received so far.
fn note_challenges(
    notifications: &mut tokio::sync::broadcast::Receiver<RelayPoolNotification>,
    auth: &AtomicBool,
) {
    while let Ok(n) = notifications.try_recv() {
        if let RelayPoolNotification::Message {
            message: RelayMessage::Auth { .. },
            ..
        } = n
        {
            auth.store(true, Ordering::SeqCst);
        }
    }
}

/// Runs the persona's `on_message` hook (read-only, [`hooks::ON_MESSAGE_DEADLINE`]); `Err` drops
/// the message.
async fn on_message(
    hooks: &Arc<dyn HookRunner>,
    live: &Arc<Live>,
    message: &Message,
) -> Result<(), String> {
    // Most personas have no `on_message` hook: no blocking-pool round trip for them.
    if live.resolved.hooks.on_message.is_none() {
        return Ok(());
    }
    run_hook(hooks, HookPoint::OnMessage, live, Some(message)).await
}

/// Runs one of a started persona's hooks off the async threads, within the runner's wall-clock
/// deadline for that point.
async fn run_hook(
    hooks: &Arc<dyn HookRunner>,
    point: HookPoint,
    live: &Arc<Live>,
    message: Option<&Message>,
) -> Result<(), String> {
    let (h, l, m) = (Arc::clone(hooks), Arc::clone(live), message.cloned());
    let deadline = hooks.deadline(point, &live.resolved);
    hooks::off_async(point.as_str(), deadline, move || {
        h.run(point, &l.pack_id, &l.resolved, &l.cwd, m.as_ref())
    })
    .await
}

/// The thread a message belongs to, oldest first: the root and the latest replies before it (at most
/// [`THREAD_CONTEXT`] messages). A relay that does not answer in time gives no context.
async fn thread_context(client: &Client, m: &Message, root: EventId) -> Vec<Message> {
    let by_id = Filter::new().id(root);
    let replies = Filter::new()
        .kind(Kind::Custom(KIND_MESSAGE))
        .event(root)
        .custom_tag(SingleLetterTag::lowercase(Alphabet::H), m.channel.clone())
        .until(m.created_at)
        .limit(THREAD_CONTEXT);
    let mut out: Vec<Message> = Vec::new();
    for filter in [by_id, replies] {
        if let Ok(events) = client.fetch_events(filter, THREAD_FETCH).await {
            out.extend(
                events
                    .iter()
                    .filter(|e| e.id != m.id && e.verify().is_ok())
                    .filter_map(Message::parse)
                    .filter(|x| x.channel == m.channel),
            );
        }
    }
    // The root first (replies in the same second cannot precede it), then by time.
    out.sort_by_key(|x| (x.id != root, x.created_at, x.id));
    out.dedup_by_key(|x| x.id);
    let skip = out.len().saturating_sub(THREAD_CONTEXT);
    out.drain(..skip);
    out
}

/// A bounded set of recently seen event ids.
#[derive(Default)]
struct Seen {
    set: HashSet<EventId>,
    order: VecDeque<EventId>,
}

impl Seen {
    fn contains(&self, id: &EventId) -> bool {
        self.set.contains(id)
    }

    fn insert(&mut self, id: EventId) -> bool {
        if !self.set.insert(id) {
            return false;
        }
        self.order.push_back(id);
        if self.order.len() > SEEN_CAP
            && let Some(old) = self.order.pop_front()
        {
            self.set.remove(&old);
        }
        true
    }
}
