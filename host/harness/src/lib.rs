//! apiary's harness: relay events in, agent turns out, replies published back. Its output is one
//! typed stream of [`event::Event`]s (each in a [`Note`] with its plain line), which `apiary up`'s
//! `--json`, its status view and `/metrics` all consume. The operator's trust store and the
//! sandbox come in from the caller ([`sandboxed::ScriptTrust`], [`sandboxed::SandboxSource`]).
//!
//! Start-up, per persona: workspace `$AGENT_CWD` → MCP `${VAR}` check (a variable unset, or not in
//! the pack's `allow_env`, refuses that persona, naming it) → skills copied → `on_start` → agent spawned with the projected env →
//! `initialize` → one `session/new` per subscribed channel (cwd, MCP servers, `systemPrompt` when the
//! agent advertises it). A persona that fails any step is refused; the others run.
//!
//! Each message: one relay subscription for every subscribed channel (with the embedded relay,
//! its events in process instead: see [`intake`]) → parse (hostile input, capped)
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

pub mod acp;
pub mod cluster;
pub mod confine;
mod conflict;
mod error;
pub mod event;
pub mod flood;
pub mod hooks;
mod intake;
pub mod limits;
mod live;
mod mcp_tools;
pub mod profile;
pub mod prompt;
pub mod redact;
pub mod reload;
pub mod remote;
mod route;
pub mod sandboxed;
pub mod script;
pub mod sessions;
pub mod shard;
pub mod skill_record;
mod supervise;
pub mod team;
pub mod trigger;
mod worker;
pub mod workspace;

use std::collections::{HashMap, HashSet, VecDeque};
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use futures_util::{FutureExt, StreamExt};
use nostr_sdk::prelude::*;
use tokio::sync::{broadcast, mpsc};

use acp::{AgentCommand, PermissionPolicy};
use apiary_core::{pack, resolve, safe_fs};
use apiary_relay as relay;
use apiary_sandbox as sandbox;
pub use cluster::Cluster;
pub use error::DispatchError;
pub use event::Note;
pub use flood::{Rate, TurnLimits};
pub use hooks::{HookError, HookPoint, HookRunner, NoHooks};
use live::Live;
use pack::Pack;
use relay::{KIND_MESSAGE, Message, keys::KeyStore};
pub use reload::Reload;
use resolve::{ResolvedPack, ResolvedPersona};
pub use trigger::{NativeTriggers, Reason, TriggerError, TriggerMatcher, TriggerPersona};

/// At most this many queued messages (of one author or one thread) go into one turn.
const MAX_BATCH: usize = flood::MAX_WAITING_PER_AUTHOR;
/// Messages routed to a (persona, channel) worker and not yet taken into its queue beyond this are
/// dropped, oldest kept (the worker takes them even during a turn; see [`flood::Waiting`]).
const QUEUE_CAP: usize = 500;
/// Event ids remembered for de-duplication.
const SEEN_CAP: usize = 65_536;
const RELAY_TIMEOUT: Duration = Duration::from_secs(10);
/// How often the subscription's `since` cursor is moved forward, and how far behind the newest
/// event it stays (relays' clocks and ordering are not exact).
const CURSOR_EVERY: Duration = Duration::from_secs(30);
const CURSOR_SLACK_SECS: u64 = 60;
/// Thread context: at most this many earlier messages, fetched within this time.
const THREAD_CONTEXT: usize = 12;
const THREAD_FETCH: Duration = Duration::from_secs(3);
/// How long a failure report waits for a stopped agent's last stderr lines.
const STDERR_GRACE: Duration = Duration::from_secs(2);
/// Personas starting at once (agent spawn, `initialize`, `session/new`).
const STARTS_AT_ONCE: usize = 16;

/// Operator settings for one `apiary up`.
#[derive(Debug, Clone)]
pub struct Config {
    /// The relay the channels live on, and how it is reached.
    pub relay: RelayLink,
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
    /// Whose kind 39000 metadata maps channel names to group ids.
    pub channel_authority: relay::ChannelAuthority,
    /// Turns each persona gives one author and one channel (see [`flood`]).
    pub limits: TurnLimits,
    /// One replica among several: owned personas, reply checks, the kept cursor.
    pub cluster: Cluster,
    /// Where each persona's session ids are saved for resuming (see [`sessions`]); `None`: never
    /// resumed.
    pub sessions_dir: Option<PathBuf>,
    /// Each persona's spending limits, by (pack id, persona name) (see [`limits`]).
    pub persona_limits: HashMap<(String, String), limits::PersonaLimits>,
    /// How agents are confined (see [`confine`]).
    pub confinement: confine::Confinement,
    /// Directories no agent may read by way of its program's location (the data dir, the install
    /// root, the operator's home).
    pub private_dirs: Vec<PathBuf>,
    /// Where the running personas are registered for turns asked for over A2A (see [`remote`]).
    pub desk: Option<Arc<remote::Desk>>,
    /// Offer every agent session apiary's own tools over MCP (see [`mcp_tools`]).
    pub agent_tools: bool,
    /// How many persona-to-persona steps a chain of messages may take (see [`team`]; 0: a
    /// persona's message never wakes another).
    pub hop_limit: u32,
}

/// The relay link: one of two kinds, so the harness cannot believe a relay is its own while
/// talking to another.
#[derive(Debug, Clone)]
pub enum RelayLink {
    /// A relay of another process, over a websocket: every event it sends is checked (id and
    /// signature) and replies go out over the connection.
    Remote { url: String },
    /// This process's own embedded relay, which checked every event's id and signature before
    /// storing it: the subscription's events are not checked a second time (see `relay::echo`),
    /// and replies are stored and fanned out through its door ([`relay::embedded::Door`]) instead
    /// of being sent over a connection.
    InProcess {
        url: String,
        door: Box<relay::embedded::Door>,
    },
}

impl RelayLink {
    /// The relay's websocket URL (the subscription and the personas' own connections).
    pub fn url(&self) -> &str {
        match self {
            RelayLink::Remote { url } | RelayLink::InProcess { url, .. } => url,
        }
    }

    /// The embedded relay's door, when the relay is this process's own.
    pub fn door(&self) -> Option<&relay::embedded::Door> {
        match self {
            RelayLink::InProcess { door, .. } => Some(door.as_ref()),
            RelayLink::Remote { .. } => None,
        }
    }
}

/// Where the harness reports what it does, one note per event (stdout for `apiary up`).
pub type Out = Arc<dyn Fn(Note) + Send + Sync>;

/// One pack to run.
pub struct PackRun {
    pub pack: Pack,
    pub resolved: ResolvedPack,
    /// The identity namespace its persona keys and workspaces live in: the pack id for the installed
    /// pack or the directory owning the id, never another pack's. The caller decides it (`apiary
    /// up` asks `dist::identity`); the harness only uses it.
    pub namespace: String,
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
) -> Result<Summary, DispatchError> {
    run_reloading(config, packs, matcher, hooks, out, None, shutdown).await
}

/// [`run`], also applying the packs' changes received on `reloads` while it runs (hot reload:
/// see [`reload`]).
pub async fn run_reloading(
    config: Config,
    packs: Vec<PackRun>,
    matcher: Arc<dyn TriggerMatcher>,
    hooks: Arc<dyn HookRunner>,
    out: Out,
    reloads: Option<mpsc::Receiver<Reload>>,
    shutdown: impl Future<Output = ()>,
) -> Result<Summary, DispatchError> {
    let echoes = Arc::new(relay::echo::Echoes::default());
    // Routing, set up once the personas run (see `subscribe`).
    let router: route::Shared = Arc::default();
    let (client, mut notifications) = connect(&config, &echoes).await?;
    if let Some(slot) = &config.cluster.connection {
        let _ = slot.set(client.clone());
    }
    let tools = match config.agent_tools {
        true => Some(Arc::new(
            apiary_mcp::Server::bind((std::net::Ipv4Addr::LOCALHOST, 0).into())
                .await
                .map_err(|e| DispatchError::Tools(e.to_string()))?,
        )),
        false => None,
    };
    let h = Harness {
        config,
        router: Arc::clone(&router),
        tools,
        shared: client,
        auth: Arc::new(AtomicBool::new(false)),
        hooks,
        out,
        replies: Arc::default(),
        echoes,
        redactor: Arc::default(),
    };
    for key in h.config.keys.secret_keys() {
        h.redactor.add_key(&key);
    }
    let mut summary = Summary::default();
    let mut peers = HashMap::new();
    let lives = h
        .start_personas(&packs, &mut notifications, &mut summary, &mut peers)
        .await;
    if lives.is_empty() {
        relay::shutdown(&h.shared).await;
        return Err(DispatchError::NoPersona);
    }
    if let Some(desk) = &h.config.desk {
        desk.register(&h, &lives);
    }
    let (routes, queues, fleet) = h.spawn_workers(packs, &lives);
    let mut sub = h
        .subscribe(&router, &lives, peers, routes, queues, matcher)
        .await?;
    let (resubscribe, mut channels) = mpsc::unbounded_channel();
    let (stop_reloads, stopped_reloads) = tokio::sync::oneshot::channel();
    let reloader = tokio::spawn(reload::reloader(
        h.clone(),
        Arc::clone(&router),
        fleet,
        reloads,
        resubscribe,
        stopped_reloads,
    ));
    h.event_loop(
        &router,
        &mut notifications,
        &mut sub,
        &mut channels,
        shutdown,
    )
    .await;
    if let Some(desk) = &h.config.desk {
        desk.clear();
    }
    // A reload under way finishes first (its personas are then drained with the others).
    let _ = stop_reloads.send(());
    let fleet = match reloader.await {
        Ok(fleet) => fleet,
        Err(e) => {
            tracing::error!("the reloader ended abnormally: {e}");
            reload::Fleet::default()
        }
    };
    // Routing stops (events arriving from now on stay unanswered) and drops the queues.
    let stopped = router.lock().unwrap_or_else(|e| e.into_inner()).take();
    summary.events = stopped.map_or(0, |r| r.routed);
    h.drain(fleet, sub.id.as_ref()).await;
    summary.replies = h.replies.load(Ordering::SeqCst);
    (h.out)(Note::new(
        event::Event::Stopped {
            replies: summary.replies,
        },
        format!("stopped replies={}", summary.replies),
    ));
    Ok(summary)
}

/// The shared relay connection. It authenticates (NIP-42) as the operator; once the relay asks
/// for authentication, each persona publishes and fetches context on a connection of its own,
/// authenticated with its own key (see [`persona_relay`]).
async fn connect(
    config: &Config,
    echoes: &Arc<relay::echo::Echoes>,
) -> Result<(Client, broadcast::Receiver<RelayPoolNotification>), DispatchError> {
    let operator = match config.keys.operator() {
        Ok(k) => Some(k),
        Err(e) => {
            tracing::warn!("no operator key, the subscription cannot authenticate: {e:#}");
            None
        }
    };
    let transport = relay::echo::SkipEchoes::new(Arc::clone(echoes));
    Ok(
        relay::connect_skipping_echoes(config.relay.url(), RELAY_TIMEOUT, operator, transport)
            .await?,
    )
}

/// What the harness's phases and every worker share: the settings and the relay connection.
#[derive(Clone)]
struct Harness {
    config: Config,
    /// The shared relay connection (see [`connect`]).
    shared: Client,
    /// The relay asked for authentication: personas use connections of their own.
    auth: Arc<AtomicBool>,
    hooks: Arc<dyn HookRunner>,
    out: Out,
    /// Replies published.
    replies: Arc<AtomicU64>,
    /// Our own events, which the subscription skips.
    echoes: Arc<relay::echo::Echoes>,
    /// Secrets no reply may carry (see [`redact`]).
    redactor: Arc<redact::Redactor>,
    /// Routing, for the personas' own messages (see [`worker::send`]).
    router: route::Shared,
    /// apiary's MCP server for the agents (see [`mcp_tools`]).
    tools: Option<Arc<apiary_mcp::Server>>,
}

/// The harness's subscription: its id, channels, and where its `since` cursor stands.
struct Subscription {
    /// Its id on the relay; with the embedded relay there is none, the feed is its tap.
    id: Option<SubscriptionId>,
    feed: Option<intake::TapFeed>,
    channels: Vec<String>,
    /// The newest `created_at` routing saw (seconds).
    newest: Arc<AtomicU64>,
    /// The `since` last sent to the relay.
    sent: Timestamp,
}

/// The routes (channel id → indexes of the personas subscribed to it), the workers' queues, and
/// the running packs with their workers.
type Workers = (HashMap<String, Vec<usize>>, route::Queues, reload::Fleet);

impl Harness {
    /// Starts every persona this replica owns; refusals are reported and skipped. The others'
    /// keys go to `peers`: their replies, published by other replicas, wake nobody here.
    async fn start_personas(
        &self,
        packs: &[PackRun],
        notifications: &mut broadcast::Receiver<RelayPoolNotification>,
        summary: &mut Summary,
        peers: &mut HashMap<PublicKey, Arc<team::Member>>,
    ) -> Vec<Arc<Live>> {
        // Which personas start (this replica's), and which share a name with one listed before
        // them (decided on configuration, so it needs no started agent).
        let mut planned: Vec<(&str, &ResolvedPersona)> = Vec::new();
        let mut plan = Vec::new();
        for run in packs {
            for (index, persona) in run.resolved.personas.iter().enumerate() {
                if !self
                    .config
                    .cluster
                    .owns(&run.resolved.pack.id, &persona.identity.name)
                {
                    self.elsewhere(run, persona, peers);
                    continue;
                }
                let shared = conflict::shared_name(&planned, &run.resolved.pack.id, persona);
                planned.push((&run.resolved.pack.id, persona));
                plan.push((run, index, persona, shared));
            }
        }
        note_challenges(notifications, &self.auth);
        // Agents spawn, initialise and open their sessions concurrently (start-up is one agent's
        // start, not the sum of all), a bounded number at a time so a large pack does not fork
        // hundreds of runtimes in the same instant. Each says `ready` as it finishes; the routing
        // table keeps configuration order.
        let starts: Vec<_> = plan
            .into_iter()
            .map(|(run, index, persona, shared)| self.start_one(run, index, persona, shared))
            .collect();
        let results: Vec<Option<Live>> = futures_util::stream::iter(starts)
            .buffered(STARTS_AT_ONCE)
            .collect()
            .await;
        note_challenges(notifications, &self.auth);
        let mut lives: Vec<Arc<Live>> = Vec::new();
        for live in results {
            match live {
                Some(live) => {
                    let live = Arc::new(live);
                    live.bind();
                    lives.push(live);
                    summary.started += 1;
                }
                None => summary.refused += 1,
            }
        }
        lives
    }

    /// A persona another replica owns: reported (JSON only), its key noted as a peer's.
    fn elsewhere(
        &self,
        run: &PackRun,
        persona: &ResolvedPersona,
        peers: &mut HashMap<PublicKey, Arc<team::Member>>,
    ) {
        let name = &persona.identity.name;
        match self.config.keys.persona(&run.namespace, name) {
            Ok(keys) => {
                let pack = &run.resolved.pack.id;
                let member = team::Member::of(pack, persona, keys.public_key(), false);
                peers.insert(keys.public_key(), Arc::new(member));
            }
            Err(e) => {
                tracing::warn!(persona = %name, "the key of a persona of another replica: {e}")
            }
        }
        let shard = self
            .config
            .cluster
            .shard
            .map(|s| shard::owner(&run.resolved.pack.id, name, s.count));
        (self.out)(Note::only_json(event::Event::PersonaElsewhere {
            persona: name.clone(),
            pack: run.resolved.pack.id.clone(),
            shard,
        }));
    }

    /// Starts one persona and reports it ready or refused; a panic refuses it.
    async fn start_one(
        &self,
        run: &PackRun,
        index: usize,
        persona: &ResolvedPersona,
        shared_name: Option<String>,
    ) -> Option<Live> {
        let name = &persona.identity.name;
        let stderr = crate::acp::StderrTail::default();
        if let Some(both) = shared_name {
            tracing::warn!(persona = %name, "{both}");
            let text = format!("name_shared {name}: {both}");
            (self.out)(Note::new(
                event::Event::NameShared {
                    persona: name.clone(),
                    pack: run.resolved.pack.id.clone(),
                    reason: both,
                },
                text,
            ));
        }
        let tools = self.tools.as_ref().map(|server| {
            let h = self.clone();
            let backend: live::Backends = Arc::new(move |live, channel| {
                Arc::new(mcp_tools::SessionTools {
                    h: h.clone(),
                    live,
                    channel: channel.map(str::to_string),
                })
            });
            live::Tools {
                server: Arc::clone(server),
                backend,
            }
        });
        let start = live::start_persona(
            tools,
            &self.config,
            &self.shared,
            run,
            index,
            &self.hooks,
            live::Reporting {
                stderr: stderr.clone(),
                out: Arc::clone(&self.out),
                redactor: Arc::clone(&self.redactor),
            },
        );
        let started = AssertUnwindSafe(start)
            .catch_unwind()
            .await
            .unwrap_or_else(|panic| Err(DispatchError::panicked("while starting", panic)));
        match started {
            Ok(live) => {
                let client = persona_relay(&live, self).await;
                if let Err(why) =
                    profile::publish(&client, &live.keys, &live.resolved, &run.pack.root).await
                {
                    tracing::warn!(persona = %name, "profile (kind 0) not published: {why}");
                }
                (self.out)(ready_note(
                    &live,
                    run,
                    live.current().await.prefix.is_some(),
                ));
                tracing::info!(persona = %name, pack = %live.pack_id, cwd = %live.cwd.display(), "persona started");
                Some(live)
            }
            Err(why) => {
                tracing::error!(persona = %name, "persona refused: {why}");
                // A failed start stopped the agent: its stderr is complete, or soon is.
                let stderr = stderr.lines_after_exit(STDERR_GRACE).await;
                let refused = event::Event::PersonaRefused {
                    persona: name.clone(),
                    reason: why.to_string(),
                    data: why
                        .acp()
                        .and_then(crate::acp::AcpError::data)
                        .map(str::to_string),
                    stderr: stderr.clone(),
                };
                let text = format!("persona {name} refused: {why}");
                (self.out)(error::explained(refused, text, &stderr));
                None
            }
        }
    }

    /// Routes (channel id → personas subscribed to it) and one worker per (persona, channel),
    /// each with its FIFO; the workers and personas kept by pack, for reloads and the drain.
    fn spawn_workers(&self, packs: Vec<PackRun>, lives: &[Arc<Live>]) -> Workers {
        let mut routes: HashMap<String, Vec<usize>> = HashMap::new();
        let mut queues: route::Queues = HashMap::new();
        let mut fleet: reload::Fleet = packs
            .into_iter()
            .map(|run| (run.resolved.pack.id.clone(), reload::Running::new(run)))
            .collect();
        for (i, live) in lives.iter().enumerate() {
            let Some(running) = fleet.get_mut(&live.pack_id) else {
                continue;
            };
            running.lives.push((i, Arc::clone(live)));
            for channel in live.channels.keys() {
                routes.entry(channel.clone()).or_default().push(i);
                let (tx, rx) = mpsc::channel(QUEUE_CAP);
                queues.insert((i, channel.clone()), tx);
                running.workers.spawn(worker::worker(
                    self.clone(),
                    Arc::clone(live),
                    channel.clone(),
                    rx,
                ));
            }
        }
        (routes, queues, fleet)
    }

    /// Hands routing its tables, subscribes to every routed channel, and says `ready`.
    async fn subscribe(
        &self,
        router: &route::Shared,
        lives: &[Arc<Live>],
        peers: HashMap<PublicKey, Arc<team::Member>>,
        routes: HashMap<String, Vec<usize>>,
        queues: route::Queues,
        matcher: Arc<dyn TriggerMatcher>,
    ) -> Result<Subscription, DispatchError> {
        let channels: Vec<String> = routes.keys().cloned().collect();
        let mut own = peers;
        own.extend(
            lives
                .iter()
                .map(|l| (l.keys.public_key(), Arc::new(l.member()))),
        );
        // From the kept cursor when there is one (see `cluster`), else now.
        let since = self.config.cluster.start();
        self.config.cluster.keep(since);
        let newest = Arc::new(AtomicU64::new(since.as_secs()));
        *router.lock().unwrap_or_else(|e| e.into_inner()) = Some(route::Router {
            personas: lives.iter().map(|l| route::Routed::of(l)).collect(),
            routes,
            own,
            hop_limit: self.config.hop_limit,
            woke: team::Woke::default(),
            queues,
            matcher,
            out: Arc::clone(&self.out),
            cursor: Arc::clone(&newest),
            seen: Seen::default(),
            routed: 0,
            fresh: HashMap::new(),
        });
        let filter = relay::channel_filter(&channels, since);
        let (id, feed) = match self.config.relay.door() {
            Some(door) => {
                let feed = intake::TapFeed::open(door, filter.clone());
                feed.replay(router, filter).await;
                (None, Some(feed))
            }
            None => {
                let id = self
                    .shared
                    .subscribe(filter, None)
                    .await
                    .map_err(|e| DispatchError::Subscribe(e.to_string()))?
                    .val;
                self.echoes.watch(&id);
                (Some(id), None)
            }
        };
        (self.out)(Note::new(
            event::Event::Ready {
                personas: lives.len(),
                channels: channels.len(),
            },
            format!("ready personas={} channels={}", lives.len(), channels.len()),
        ));
        Ok(Subscription {
            id,
            feed,
            channels,
            newest,
            sent: since,
        })
    }

    /// Routes the relay's events (the tap's or the relay pool's) until `shutdown` completes or
    /// the relay stops.
    async fn event_loop(
        &self,
        router: &route::Shared,
        notifications: &mut broadcast::Receiver<RelayPoolNotification>,
        sub: &mut Subscription,
        channels: &mut mpsc::UnboundedReceiver<Vec<String>>,
        shutdown: impl Future<Output = ()>,
    ) {
        let mut tick = tokio::time::interval(CURSOR_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut report = tokio::time::interval(intake::REPORT_EVERY);
        report.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut intake = intake::Intake::new(Arc::clone(&self.out));
        let mut feed = sub.feed.take();
        tokio::pin!(shutdown);
        loop {
            let event = tokio::select! {
                _ = &mut shutdown => break,
                _ = tick.tick() => {
                    self.advance_cursor(sub).await;
                    continue;
                }
                _ = report.tick() => {
                    let depth = feed.as_ref().map_or(notifications.len(), |f| f.depth());
                    intake.report(depth, std::time::Instant::now());
                    continue;
                }
                Some(changed) = channels.recv() => {
                    self.resubscribe(sub, feed.as_mut(), changed).await;
                    continue;
                }
                woke = intake::route_next(feed.as_mut(), router, &mut intake) => match woke {
                    Some(true) => {
                        // As below, once for the whole batch.
                        tokio::task::yield_now().await;
                        continue;
                    }
                    Some(false) => continue,
                    None => break,
                },
                n = notifications.recv() => match self.event_of(n, sub.id.as_ref()) {
                    Step::Event(event) => event,
                    Step::Skip => continue,
                    Step::Stop => break,
                },
            };
            // Let the workers just woken write their prompts before the next event: tokio runs
            // the last task woken by this one only when this one yields (and no other thread may
            // take it), which with events queued behind this one would be after the whole burst.
            if route::route(router, &event) {
                tokio::task::yield_now().await;
            }
        }
    }

    /// Moves the subscription's `since` cursor forward, so that when the client reconnects
    /// (nostr-sdk re-sends the stored REQ) the relay replays only a short window, which the
    /// seen-set de-duplicates: nothing is lost, nothing answered twice.
    async fn advance_cursor(&self, sub: &mut Subscription) {
        let newest = Timestamp::from(sub.newest.load(Ordering::Relaxed));
        if newest <= sub.sent {
            return;
        }
        let from = Timestamp::from(newest.as_secs().saturating_sub(CURSOR_SLACK_SECS));
        let Some(id) = &sub.id else {
            // The tap never reconnects; the cursor is only kept (for the next run or replica).
            sub.sent = newest;
            self.config.cluster.keep(from);
            return;
        };
        if let Err(e) = self
            .shared
            .subscribe_with_id(id.clone(), relay::channel_filter(&sub.channels, from), None)
            .await
        {
            tracing::warn!("advancing the subscription cursor: {e}");
        } else {
            sub.sent = newest;
            self.config.cluster.keep(from);
            tracing::debug!(since = from.as_secs(), "subscription cursor advanced");
        }
    }

    /// A reload changed the routed channels: the subscription is sent again for the new set,
    /// from a little before its cursor (routing skips what a new channel had before; see
    /// [`route::Router::fresh`]).
    async fn resubscribe(
        &self,
        sub: &mut Subscription,
        feed: Option<&mut intake::TapFeed>,
        channels: Vec<String>,
    ) {
        if channels.is_empty() {
            // No persona left to route to; a filter without channels would ask for nothing (or,
            // on some relays, everything). The next pack that starts subscribes again.
            return;
        }
        let newest = sub.newest.load(Ordering::Relaxed);
        let from = Timestamp::from(newest.saturating_sub(CURSOR_SLACK_SECS));
        let filter = relay::channel_filter(&channels, from);
        sub.channels = channels;
        if let Some(feed) = feed {
            feed.follow(filter.clone());
            feed.replay(&self.router, filter).await;
            tracing::info!(
                channels = sub.channels.len(),
                "following the reloaded packs' channels"
            );
            return;
        }
        let Some(id) = &sub.id else { return };
        match self
            .shared
            .subscribe_with_id(id.clone(), filter, None)
            .await
        {
            Ok(_) => tracing::info!(
                channels = sub.channels.len(),
                "subscription sent again for the reloaded packs"
            ),
            Err(e) => tracing::warn!("subscribing to the reloaded packs' channels: {e}"),
        }
    }

    /// What the event loop does with one notification of the relay pool.
    fn event_of(
        &self,
        n: Result<RelayPoolNotification, broadcast::error::RecvError>,
        sub: Option<&SubscriptionId>,
    ) -> Step {
        match n {
            Ok(RelayPoolNotification::Event {
                subscription_id,
                event,
                ..
            }) if Some(&subscription_id) == sub => Step::Event(event),
            Ok(RelayPoolNotification::Message {
                message: RelayMessage::Auth { .. },
                ..
            }) => {
                self.auth.store(true, Ordering::SeqCst);
                Step::Skip
            }
            Ok(RelayPoolNotification::Shutdown) => {
                tracing::warn!("relay pool shut down");
                Step::Stop
            }
            Ok(_) => Step::Skip,
            Err(broadcast::error::RecvError::Lagged(n)) => {
                tracing::warn!("{n} relay notifications lagged; missed events are not replayed");
                Step::Skip
            }
            Err(_) => Step::Stop,
        }
    }

    /// Drain (routing stopped and took the queues): no new events; let the queues empty within
    /// the drain timeout, then `on_stop`, stop the agents, disconnect.
    async fn drain(&self, mut fleet: reload::Fleet, sub: Option<&SubscriptionId>) {
        (self.out)(Note::new(
            event::Event::Stopping,
            "stopping: draining queues",
        ));
        if let Some(sub) = sub {
            self.shared.unsubscribe(sub).await;
        }
        let drained = tokio::time::timeout(self.config.drain_timeout, async {
            for running in fleet.values_mut() {
                while running.workers.join_next().await.is_some() {}
            }
        })
        .await;
        if drained.is_err() {
            tracing::warn!("drain timeout reached; abandoning turns in flight");
            for running in fleet.values_mut() {
                running.workers.abort_all();
            }
        }
        for running in fleet.values() {
            for (_, live) in &running.lives {
                live.stop().await;
            }
        }
        relay::shutdown(&self.shared).await;
    }
}

/// One relay pool notification, for the event loop.
enum Step {
    Event(Box<Event>),
    Skip,
    Stop,
}

/// `persona_ready` for a started persona; `with_prefix`: its agent takes the system prompt in
/// every prompt rather than once per session.
fn ready_note(live: &Live, run: &PackRun, with_prefix: bool) -> Note {
    let name = &live.trigger.name;
    let channels: Vec<String> = live.channels.values().map(|n| format!("#{n}")).collect();
    let system_prompt = if with_prefix { "prefix" } else { "session" };
    let pubkey = live.keys.public_key().to_hex();
    let text = format!(
        "persona {name} ready pubkey={pubkey} channels={} system_prompt={system_prompt} confinement={}",
        if channels.is_empty() {
            "-".into()
        } else {
            channels.join(",")
        },
        live.confinement,
    );
    Note::new(
        event::Event::PersonaReady {
            confinement: live.confinement.as_str().to_string(),
            persona: name.clone(),
            pack: live.pack_id.clone(),
            identity: run.namespace.clone(),
            pubkey,
            channels: live.channels.values().cloned().collect(),
            system_prompt: system_prompt.into(),
        },
        text,
    )
}

/// The connection a persona uses: the shared one until the relay has asked for authentication
/// (`auth`), then its own, authenticated with its own key, since NIP-42 binds one key to a
/// connection. Lazily, because a nostr-sdk client costs about 2 MB resident and most relays never
/// ask. A persona whose own connection cannot be opened keeps using the shared one.
async fn persona_relay(live: &Live, h: &Harness) -> Client {
    if !h.auth.load(Ordering::SeqCst) {
        return h.shared.clone();
    }
    let url = h.config.relay.url();
    let own = live
        .own_relay
        .get_or_try_init(|| relay::connect_as(url, RELAY_TIMEOUT, Some(live.keys.clone())))
        .await;
    match own {
        Ok(c) => c.clone(),
        Err(e) => {
            tracing::warn!(persona = %live.trigger.name, "own authenticated connection: {e:#}");
            h.shared.clone()
        }
    }
}

/// Notes an `AUTH` challenge among the notifications received so far.
fn note_challenges(
    notifications: &mut broadcast::Receiver<RelayPoolNotification>,
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
        out.extend(fetch_messages(client, filter, &m.channel, THREAD_FETCH).await);
    }
    out.retain(|x| x.id != m.id);
    // The root first (replies in the same second cannot precede it), then by time.
    out.sort_by_key(|x| (x.id != root, x.created_at, x.id));
    out.dedup_by_key(|x| x.id);
    let skip = out.len().saturating_sub(THREAD_CONTEXT);
    out.drain(..skip);
    out
}

/// A mutex's guard, poisoned or not: every lock in the harness guards plain data that a panic
/// elsewhere leaves consistent.
fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The messages of `channel` a relay query finds within `wait`, each verified (id and signature),
/// oldest first; a relay that does not answer in time gives none.
async fn fetch_messages(
    client: &Client,
    filter: Filter,
    channel: &str,
    wait: Duration,
) -> Vec<Message> {
    let Ok(events) = client.fetch_events(filter, wait).await else {
        return Vec::new();
    };
    let mut out: Vec<Message> = events
        .iter()
        .filter(|e| e.verify().is_ok())
        .filter_map(Message::parse)
        .filter(|x| x.channel == channel)
        .collect();
    out.sort_by_key(|x| (x.created_at, x.id));
    out.dedup_by_key(|x| x.id);
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
