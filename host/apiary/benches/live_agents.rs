//! Live-harness overhead with real agent processes: relay event received → `session/prompt` line
//! written to the agent's stdin, at a paced 1,000 messages/s over 100 channels and 50 personas
//! (each persona follows 4 channels; every channel has 2 personas).
//!
//! The harness runs as `apiary up` runs it: `dispatch::run` on a 2-worker runtime, the relay on the
//! embedded relay's thread, the harness's relay connection on apiary's relay I/O thread, the
//! `trigger-default` component, the sandbox hook runner, replies published, and one bundled
//! `apiary-agent` process per persona. Events enter through a websocket connection to
//! the relay, from a sender thread on its own runtime, open-loop: event `i` is scheduled at
//! `t0 + i ms` and sent then, whatever the harness is doing.
//!
//! Timestamps come from the harness's `apiary::probe` trace points: `frame received` (the event's
//! websocket frame reached the harness's relay client, before the relay pool parsed and verified
//! it) or, with the embedded relay, `event tapped` (its door handed the stored event to the
//! harness's tap), `event received` (the relay client handed the event to the dispatch loop), `line written` (a JSON-RPC line is in the agent's
//! stdin) and `turn ended` (a (persona, channel) has no prompt in flight any more). Reported:
//! - harness overhead: written − max(received, end of the previous turn of that (persona, channel)),
//!   i.e. without the wait behind a prompt already in flight (one per (persona, channel));
//! - with queueing: written − received;
//! - incl. intake: like the harness overhead, from the frame or the tap instead (adds the pool's
//!   parse and signature check, or the tap's queue, and the wait until the dispatch loop takes
//!   the event);
//! - end to end: written − scheduled send time (adds the relay and any sender lag; coordinated
//!   omission cannot hide a stall because the schedule does not wait for the harness).
//!
//! The relay is apiary's embedded relay in memory, as `apiary up` starts it, with its client rate
//! limits and storage caps lifted out of the load's reach. The harness publishes its replies
//! through the relay's door (`relay::embedded::Door`), as `apiary up` does. Baseline in the same run (the machine is shared and noisy): the in-process
//! verify + parse + native matcher + prompt + request serialisation path per event.
//!
//! Also: the CPU the load window used (after the warm-up), by thread and by child process, per
//! message; and harness memory per idle persona (RSS with the personas started minus RSS with only the
//! relay; agent processes are separate and not counted).
//!
//! Run: `cargo bench -p apiary --bench live_agents` (`APIARY_BENCH_SECS`, default 10 s of load
//! after 1 s of warm-up; `APIARY_BENCH_RATE`, default 1000 messages/s; `APIARY_BENCH_NATIVE=1`
//! decides wakes with the native matcher, as `apiary up --native-triggers`;
//! `APIARY_BENCH_CONFINE=both` runs each rate with unconfined and then confined agents (as `apiary
//! up` starts them: launcher, Landlock, network namespace, seccomp) and prints start-up and latency
//! ratios; `=1` confined only.
//! `APIARY_BENCH_REMOTE_LINK=1` links the harness to the embedded relay as to a relay of another
//! process: the relay pool checks every event again and replies go over the connection instead of
//! the door; `APIARY_BENCH_SPIN_US`,
//! default 200 (at most a fifth of the interval), how long the sender spins before each send
//! instead of sleeping; `APIARY_BENCH_GQI`
//! sets the harness runtime's `global_queue_interval`, and `APIARY_BENCH_WORKERS` its worker
//! threads (default 2, as `apiary up`), for experiments; `APIARY_BENCH_AGENT_NICE` how much nicer
//! than the harness the agents run (default as `apiary up --agent-nice`, 0: same priority)).
//!
//! The harness overhead is split further by two more trace points, `message queued` (routing put
//! the event in a persona's queue) and `message taken` (that persona's worker took it out).

mod common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant};

use agent_client_protocol_schema::v1 as acp;
use apiary::acp::{AgentCommand, PermissionPolicy};
use apiary::dispatch::sandboxed::{SandboxHooks, SandboxTriggers};
use apiary::dispatch::{self, NativeTriggers, PackRun, TriggerMatcher, TriggerPersona, prompt};
use apiary::relay::{self, Message};
use apiary::resolve::Triggers;
use nostr_relay_builder::prelude::*;
use tracing_subscriber::Layer;
use tracing_subscriber::layer::SubscriberExt;

/// Personas in the run (`APIARY_BENCH_PERSONAS`, default 50).
static PERSONAS: LazyLock<usize> =
    LazyLock::new(|| env_num("APIARY_BENCH_PERSONAS", 50).clamp(2, 1000) as usize);
const CHANNELS: usize = 100;
const PER_PERSONA: usize = 4;
const WARMUP: Duration = Duration::from_secs(1);
const GOAL_P99: Duration = Duration::from_millis(2);
/// What the ceiling allows: end-to-end p99 at most this, and no wake lost.
const CEILING_P99: Duration = Duration::from_millis(10);

/// The relay the run goes through.
#[derive(Clone, Copy, PartialEq)]
enum RelayKind {
    /// apiary's embedded relay (`nostr-relay-builder`, in process), as `apiary up` starts it.
    Embedded,
    /// nostr-rs-relay 0.8.12 in its own process (SQLite), as an operator's own relay.
    NostrRs,
}

/// One paced run's result, for the summary of a sweep.
struct Outcome {
    /// The agents ran confined (see `APIARY_BENCH_CONFINE`).
    confined: bool,
    startup: Duration,
    rate: u64,
    achieved: f64,
    e2e: Stats,
    overhead: Stats,
    expected: usize,
    measured: usize,
}

impl Outcome {
    fn lost(&self) -> usize {
        self.expected.saturating_sub(self.measured)
    }

    fn within_ceiling(&self) -> bool {
        self.lost() == 0 && self.e2e.n > 0 && self.e2e.p99 <= CEILING_P99
    }
}

fn main() {
    let secs: u64 = env_num("APIARY_BENCH_SECS", 10);
    // APIARY_BENCH_RATES=1000,2000,5000: one run per rate (each with a fresh harness and relay),
    // then the ceiling; APIARY_BENCH_RATE: one rate.
    let rates: Vec<u64> = match std::env::var("APIARY_BENCH_RATES") {
        Ok(list) => list
            .split(',')
            .filter_map(|r| r.trim().parse().ok())
            .filter(|r| *r > 0)
            .collect(),
        Err(_) => vec![env_num("APIARY_BENCH_RATE", 1000).max(1)],
    };
    let relay_kind = match std::env::var("APIARY_BENCH_RELAY").as_deref() {
        Ok("nostr-rs-relay") => RelayKind::NostrRs,
        Ok("embedded") | Err(_) => RelayKind::Embedded,
        Ok(other) => {
            eprintln!("APIARY_BENCH_RELAY={other}: expected `embedded` or `nostr-rs-relay`");
            std::process::exit(2);
        }
    };
    let probes = Arc::new(Probes::default());
    // Not `.init()`: that also forwards the `log` crate's records, and the probes' TRACE level
    // would then have every `log::trace!` in the websocket code built and offered to the
    // subscriber (7% of the relay thread), which `apiary up` at its default level never pays.
    let subscriber = tracing_subscriber::registry().with(
        ProbeLayer(Arc::clone(&probes)).with_filter(
            tracing_subscriber::filter::Targets::new()
                .with_target("apiary::probe", tracing::Level::TRACE),
        ),
    );
    tracing::subscriber::set_global_default(subscriber).expect("the probes' subscriber");

    let tmp = tempfile::tempdir().expect("temp dir");
    let personas = write_pack(tmp.path());
    let author = Keys::generate();

    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder
        .worker_threads(env_num("APIARY_BENCH_WORKERS", 2) as usize)
        .enable_all();
    // Experiments only: how often the workers look at tasks woken from other threads.
    if let Some(n) = std::env::var("APIARY_BENCH_GQI")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        builder.global_queue_interval(n);
    }
    // Named, so the CPU accounting can tell the harness's threads from the sender's.
    builder.thread_name("harness");
    let rt = builder.build().expect("runtime");
    // The trigger component is compiled before the memory baseline: it is per process, not per persona.
    let matcher: Arc<dyn TriggerMatcher> = if std::env::var_os("APIARY_BENCH_NATIVE").is_some() {
        Arc::new(NativeTriggers)
    } else {
        match SandboxTriggers::new(&apiary::builtin::Components) {
            Ok(t) => Arc::new(t),
            Err(e) => {
                eprintln!("trigger component unavailable ({e}); using the native matcher");
                Arc::new(NativeTriggers)
            }
        }
    };
    // APIARY_BENCH_CONFINE=1: agents confined as `apiary up` starts them; `both`: each rate
    // unconfined then confined, and their ratios; 0 (default): unconfined.
    let modes: &[bool] = match std::env::var("APIARY_BENCH_CONFINE").as_deref() {
        Ok("1") => &[true],
        Ok("both") => &[false, true],
        _ => &[false],
    };
    let mut outcomes = Vec::new();
    for (run, &rate) in rates.iter().enumerate() {
        for &confined in modes {
            let ctx = RunContext {
                tmp: tmp.path(),
                personas: &personas,
                author: &author,
                rt: &rt,
                matcher: &matcher,
                probes: &probes,
                relay_kind,
                measure_memory: run == 0 && !confined,
                confined,
            };
            outcomes.push(run_at(&ctx, rate, secs));
        }
    }
    if modes.len() == 2 {
        print_confinement_cost(&outcomes);
        outcomes.retain(|o| o.confined);
    }
    if outcomes.len() > 1 {
        println!(
            "\nceiling sweep, {} personas, relay {}: highest paced rate with end-to-end p99 <= {CEILING_P99:?} and no wake lost",
            *PERSONAS,
            relay_name(relay_kind)
        );
        for o in &outcomes {
            println!(
                "  {:>6}/s (achieved {:>6.0}/s): end to end p50 {:>7.0} us p99 {:>8.0} us, harness p99 {:>7.0} us, wakes {}/{}{}  {}",
                o.rate,
                o.achieved,
                o.e2e.p50.as_secs_f64() * 1e6,
                o.e2e.p99.as_secs_f64() * 1e6,
                o.overhead.p99.as_secs_f64() * 1e6,
                o.measured,
                o.expected,
                if o.lost() > 0 {
                    format!(" ({} lost)", o.lost())
                } else {
                    String::new()
                },
                if o.within_ceiling() { "ok" } else { "over" }
            );
        }
        match outcomes
            .iter()
            .filter(|o| o.within_ceiling())
            .map(|o| o.rate)
            .max()
        {
            Some(r) => println!("  CEILING: {r} msg/s (goal >= 5000 msg/s)"),
            None => println!("  CEILING: below every rate tried"),
        }
    }
    rt.shutdown_timeout(Duration::from_secs(2));
}

/// What confinement costs, as ratios of each rate's confined run to its unconfined one.
fn print_confinement_cost(outcomes: &[Outcome]) {
    println!(
        "\nconfinement cost, {} personas (confined / unconfined, same sitting; load {})",
        *PERSONAS,
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
    );
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    for pair in outcomes.chunks(2) {
        let [open, boxed] = pair else { continue };
        let ratio = |a: f64, b: f64| if a > 0.0 { b / a } else { f64::NAN };
        println!(
            "  {:>5}/s  start-up {:>6.0} -> {:>6.0} ms ({:.2}x)  end to end p50 {:>6.0} -> {:>6.0} us ({:.2}x)  p99 {:>6.0} -> {:>6.0} us ({:.2}x)  harness p99 {:.2}x",
            open.rate,
            open.startup.as_secs_f64() * 1e3,
            boxed.startup.as_secs_f64() * 1e3,
            ratio(open.startup.as_secs_f64(), boxed.startup.as_secs_f64()),
            us(open.e2e.p50),
            us(boxed.e2e.p50),
            ratio(us(open.e2e.p50), us(boxed.e2e.p50)),
            us(open.e2e.p99),
            us(boxed.e2e.p99),
            ratio(us(open.e2e.p99), us(boxed.e2e.p99)),
            ratio(us(open.overhead.p99), us(boxed.overhead.p99)),
        );
    }
}

/// Issue 21's start-up goals: 50 personas ready in 0.5 s, 200 in 2 s (in between, in proportion).
fn startup_goal(personas: usize) -> Duration {
    Duration::from_millis(if personas <= 50 {
        500
    } else {
        10 * personas as u64
    })
}

fn relay_name(kind: RelayKind) -> &'static str {
    match kind {
        RelayKind::Embedded => "embedded (in process)",
        RelayKind::NostrRs => "nostr-rs-relay (own process)",
    }
}

/// What every run shares.
struct RunContext<'a> {
    tmp: &'a std::path::Path,
    personas: &'a [TriggerPersona],
    author: &'a Keys,
    rt: &'a tokio::runtime::Runtime,
    matcher: &'a Arc<dyn TriggerMatcher>,
    probes: &'a Arc<Probes>,
    relay_kind: RelayKind,
    measure_memory: bool,
    /// Agents start through the launcher, confined, as `apiary up` starts them.
    confined: bool,
}

/// A relay for one run: the embedded one in this process, or nostr-rs-relay in its own.
enum BenchRelay {
    Embedded(Box<apiary::relay::embedded::Embedded>),
    External(std::process::Child, tempfile::TempDir),
}

impl BenchRelay {
    fn start(kind: RelayKind) -> (BenchRelay, String) {
        match kind {
            RelayKind::Embedded => {
                // apiary's embedded relay on its own runtime, as `apiary up` starts it, with the
                // client rate limits and storage caps out of the load's reach.
                let settings = apiary::relay::embedded::Settings {
                    limits: apiary::relay::limits::Limits {
                        per_key_per_minute: u32::MAX / 2,
                        per_connection_per_minute: u32::MAX / 2,
                        max_stored_events: u64::MAX / 2,
                        max_stored_bytes: u64::MAX / 2,
                        ..Default::default()
                    },
                    ..apiary::relay::embedded::Settings::ephemeral()
                };
                let io = apiary::relay::relay_runtime().expect("embedded relay runtime");
                let relay = io
                    .block_on(apiary::relay::embedded::Embedded::start_with(
                        "127.0.0.1:0".parse().expect("address"),
                        settings,
                    ))
                    .expect("embedded relay");
                let url = relay.url.clone();
                (BenchRelay::Embedded(Box::new(relay)), url)
            }
            RelayKind::NostrRs => {
                let bin = std::env::var_os("NOSTR_RS_RELAY")
                    .map(std::path::PathBuf::from)
                    .unwrap_or_else(|| "nostr-rs-relay".into());
                let dir = tempfile::tempdir().expect("relay dir");
                let port = std::net::TcpListener::bind("127.0.0.1:0")
                    .and_then(|l| l.local_addr())
                    .expect("free port")
                    .port();
                std::fs::create_dir_all(dir.path().join("db")).expect("relay db dir");
                let config = dir.path().join("config.toml");
                // Loopback, no rate limits, every kind; a broadcast buffer for the sweep's bursts.
                std::fs::write(
                    &config,
                    format!(
                        "[info]\nrelay_url = \"ws://127.0.0.1:{port}/\"\n\n[network]\naddress = \"127.0.0.1\"\nport = {port}\n\n[options]\nreject_future_seconds = 1800\n\n[limits]\nbroadcast_buffer = 65536\nevent_persist_buffer = 65536\n"
                    ),
                )
                .expect("relay config");
                let child = std::process::Command::new(&bin)
                    .arg("--db")
                    .arg(dir.path().join("db"))
                    .arg("--config")
                    .arg(&config)
                    .current_dir(dir.path())
                    .stdin(std::process::Stdio::null())
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::null())
                    .spawn()
                    .unwrap_or_else(|e| {
                        eprintln!(
                            "cannot start {} ({e}): install it with `.ci/setup` or name it with NOSTR_RS_RELAY",
                            bin.to_string_lossy()
                        );
                        std::process::exit(2);
                    });
                let deadline = Instant::now() + Duration::from_secs(30);
                while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
                    assert!(Instant::now() < deadline, "nostr-rs-relay did not listen");
                    std::thread::sleep(Duration::from_millis(50));
                }
                (
                    BenchRelay::External(child, dir),
                    format!("ws://127.0.0.1:{port}"),
                )
            }
        }
    }

    fn stop(self) {
        match self {
            BenchRelay::Embedded(relay) => relay.shutdown(),
            BenchRelay::External(mut child, _dir) => {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

/// One run at `rate` messages/s for `secs` (plus the warm-up): a fresh relay and harness.
fn run_at(ctx: &RunContext<'_>, rate: u64, secs: u64) -> Outcome {
    let personas = ctx.personas;
    let probes = ctx.probes;
    let packs = load_pack(ctx.tmp);
    let (relay, url) = BenchRelay::start(ctx.relay_kind);
    std::thread::sleep(Duration::from_millis(300));
    let rss_before = rss_kib();

    // The harness, as `apiary up` runs it.
    let ready = Arc::new(AtomicBool::new(false));
    let replies = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let out: dispatch::Out = {
        let (ready, replies, errors) = (
            Arc::clone(&ready),
            Arc::clone(&replies),
            Arc::clone(&errors),
        );
        Arc::new(move |note: dispatch::Note| match note.event {
            dispatch::event::Event::Ready { .. } => ready.store(true, Ordering::SeqCst),
            dispatch::event::Event::Reply { .. } => {
                replies.fetch_add(1, Ordering::Relaxed);
            }
            dispatch::event::Event::Error { .. }
            | dispatch::event::Event::PersonaRefused { .. }
                if errors.fetch_add(1, Ordering::Relaxed) < 5 =>
            {
                eprintln!("harness: {}", note.text.unwrap_or_default());
            }
            _ => {}
        })
    };
    let agent_nice = env_num(
        "APIARY_BENCH_AGENT_NICE",
        apiary::acp::DEFAULT_AGENT_NICE.into(),
    )
    .min(19) as u8;
    let config = dispatch::Config {
        agent: AgentCommand {
            program: common::agent_bin(),
            args: vec![],
        },
        // As `apiary up`; APIARY_BENCH_AGENT_NICE=0 runs the agents at the harness's priority.
        agent_nice,
        publish: true,
        policy: PermissionPolicy::Deny,
        idle_timeout: Duration::from_secs(60),
        turn_timeout: Duration::from_secs(60),
        drain_timeout: Duration::from_secs(10),
        workspace_root: ctx.tmp.join("ws"),
        keys: apiary::relay::keys::KeyStore::new(ctx.tmp.join("keys")),
        base_prompt: dispatch::prompt::base_from_env(&|_| None).unwrap_or(None),
        // In process, as `apiary up` links to its embedded relay (events checked once, replies
        // through the door); APIARY_BENCH_REMOTE_LINK=1 links to it as to another process's relay.
        // nostr-rs-relay is one.
        relay: match &relay {
            BenchRelay::Embedded(e) if std::env::var_os("APIARY_BENCH_REMOTE_LINK").is_none() => {
                dispatch::RelayLink::InProcess {
                    url: url.clone(),
                    door: Box::new(e.door()),
                }
            }
            _ => dispatch::RelayLink::Remote { url: url.clone() },
        },
        channel_authority: Default::default(),
        // Measures the harness, not the flood limits.
        limits: dispatch::TurnLimits::UNLIMITED,
        cluster: Default::default(),
        sessions_dir: None,
        persona_limits: Default::default(),
        confinement: confinement(ctx.confined),
        private_dirs: Vec::new(),
        desk: None,
        agent_tools: false,
        hop_limit: 0,
    };
    let roots = packs
        .iter()
        .map(|p| (p.resolved.pack.id.clone(), p.pack.root.clone()))
        .collect();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let started = Instant::now();
    let harness = ctx.rt.spawn(dispatch::run(
        config,
        packs,
        Arc::clone(ctx.matcher),
        Arc::new(SandboxHooks::new(
            roots,
            Arc::new(apiary::builtin::Components),
        )),
        out,
        async move {
            let _ = stop_rx.await;
        },
    ));
    while !ready.load(Ordering::SeqCst) {
        if started.elapsed() > Duration::from_secs(300) || harness.is_finished() {
            eprintln!("the harness did not become ready");
            std::process::exit(1);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let startup = started.elapsed();
    std::thread::sleep(Duration::from_millis(500));
    let rss_after = rss_kib();

    // The load: signed before the clock starts (signing is the users' work, not the harness's).
    let total = (rate * secs + rate * WARMUP.as_secs()) as usize;
    let events: Vec<Event> = (0..total)
        .map(|i| make_event(ctx.author, i, personas))
        .collect();
    let channel_of: HashMap<EventId, usize> = events
        .iter()
        .enumerate()
        .map(|(i, e)| (e.id, i % CHANNELS))
        .collect();
    let index_of: HashMap<EventId, usize> =
        events.iter().enumerate().map(|(i, e)| (e.id, i)).collect();

    let base_before = baseline(&events[..events.len().min(5000)], personas);

    // Sender: its own runtime and connection, so pacing does not depend on the harness's threads.
    let sender_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("bench-sender")
        .enable_all()
        .build()
        .expect("sender runtime");
    let sender = sender_rt.block_on(async {
        let client = relay::connect(&url, Duration::from_secs(10))
            .await
            .expect("sender connects");
        let r = client.relay(url.as_str()).await.expect("sender relay");
        (client, r)
    });
    probes.clear();
    let interval = Duration::from_nanos(1_000_000_000 / rate);
    // Spinning takes CPU the harness could use: at most a fifth of the interval, so the sender
    // does not eat into the capacity a high rate measures.
    let spin = Duration::from_micros(env_num("APIARY_BENCH_SPIN_US", 200)).min(interval / 5);
    let t0 = Instant::now() + Duration::from_millis(50);
    let mut sent_at = Vec::with_capacity(events.len());
    let mut cpu_at_warm = None;
    let warm_sent = (rate * WARMUP.as_secs()) as usize;
    for (i, ev) in events.iter().enumerate() {
        let when = t0 + interval * i as u32;
        sleep_until(when, spin);
        if i == warm_sent {
            cpu_at_warm = Some((Instant::now(), cpu_ticks()));
        }
        sent_at.push(Instant::now());
        if let Err(e) = sender.1.send_msg(ClientMessage::event(ev.clone())) {
            eprintln!("send failed: {e}");
        }
    }
    let send_span = sent_at.last().copied().unwrap_or(t0) - t0;
    let cpu = cpu_at_warm.map(|(at, before)| CpuWindow {
        span: at.elapsed(),
        messages: events.len() - warm_sent,
        used: cpu_ticks().since(&before),
    });
    // Let the last prompts be written.
    let mut last = probes.len();
    for _ in 0..100 {
        std::thread::sleep(Duration::from_millis(200));
        let now = probes.len();
        if now == last {
            break;
        }
        last = now;
    }
    let _ = stop_tx.send(());
    let summary = ctx.rt.block_on(harness).ok().and_then(Result::ok);
    sender_rt.block_on(sender.0.shutdown());
    relay.stop();
    let base_after = baseline(&events[..events.len().min(5000)], personas);

    // Analysis.
    let p = probes.take();
    let mut received: HashMap<EventId, Instant> = HashMap::new();
    let mut framed: HashMap<EventId, Instant> = HashMap::new();
    let mut taken: HashMap<(String, EventId), Instant> = HashMap::new();
    let mut queued_at: HashMap<(String, EventId), Instant> = HashMap::new();
    let mut ended: HashMap<(String, String), Vec<Instant>> = HashMap::new();
    let mut written: Vec<(String, Instant, Vec<EventId>)> = Vec::new();
    for r in p {
        match r {
            Probe::Received(t, id) => {
                received.entry(id).or_insert(t);
            }
            Probe::Frame(t, id) => {
                framed.entry(id).or_insert(t);
            }
            Probe::Queued(t, persona, id) => {
                queued_at.entry((persona, id)).or_insert(t);
            }
            Probe::Taken(t, persona, id) => {
                taken.entry((persona, id)).or_insert(t);
            }
            Probe::Ended(t, persona, channel) => {
                ended.entry((persona, channel)).or_default().push(t)
            }
            Probe::Written(t, persona, ids) => written.push((persona, t, ids)),
        }
    }
    for v in ended.values_mut() {
        v.sort();
    }
    let warm_end = t0 + WARMUP;
    let (mut overhead, mut queued, mut e2e, mut transit) = (vec![], vec![], vec![], vec![]);
    let (mut from_frame, mut pool) = (vec![], vec![]);
    let (mut wake_up, mut in_worker, mut routing) = (vec![], vec![], vec![]);
    let mut waited = 0usize;
    let mut batched = 0usize;
    for (persona, t, ids) in &written {
        batched += ids.len().saturating_sub(1);
        for id in ids {
            let (Some(&i), Some(&recv)) = (index_of.get(id), received.get(id)) else {
                continue;
            };
            let scheduled = t0 + interval * i as u32;
            if scheduled < warm_end {
                continue;
            }
            let channel = format!("ch{}", channel_of[id]);
            let prev_end = ended
                .get(&(persona.clone(), channel))
                .and_then(|ends| ends.iter().rev().find(|e| **e < *t).copied());
            let start = match prev_end {
                Some(e) if e > recv => {
                    waited += 1;
                    e
                }
                _ => recv,
            };
            overhead.push(t.saturating_duration_since(start));
            if let Some(&took) = taken.get(&(persona.clone(), *id))
                && took >= start
            {
                in_worker.push(t.saturating_duration_since(took));
                match queued_at.get(&(persona.clone(), *id)) {
                    Some(&q) if q >= start => {
                        routing.push(q.saturating_duration_since(start));
                        wake_up.push(took.saturating_duration_since(q));
                    }
                    _ => {}
                }
            }
            queued.push(t.saturating_duration_since(recv));
            e2e.push(t.saturating_duration_since(scheduled));
            transit.push(recv.saturating_duration_since(scheduled));
            if let Some(&frame) = framed.get(id) {
                let start = match prev_end {
                    Some(e) if e > frame => e,
                    _ => frame,
                };
                from_frame.push(t.saturating_duration_since(start));
                pool.push(recv.saturating_duration_since(frame));
            }
        }
    }
    let lag: Vec<Duration> = sent_at
        .iter()
        .enumerate()
        .map(|(i, s)| s.saturating_duration_since(t0 + interval * i as u32))
        .collect();
    let expected = expected_wakes(&events, personas, warm_end, t0, interval);

    let n = *PERSONAS;
    println!(
        "\nlive harness with real agents: {n} personas ({n} apiary-agent processes, nice +{agent_nice}), {CHANNELS} channels, matcher {}, relay {}",
        ctx.matcher.name(),
        relay_name(ctx.relay_kind)
    );
    println!(
        "  load: {} events in {:.2} s = {:.0} events/s achieved (target {rate}/s, open loop, {} s warm-up excluded)",
        events.len(),
        send_span.as_secs_f64(),
        events.len() as f64 / send_span.as_secs_f64().max(1e-9),
        WARMUP.as_secs()
    );
    println!(
        "  harness: {} events received, {} prompts written ({:.0}/s), {} replies published, {} errors; start-up {:.2} s (goal <= {:.1} s for {} personas)",
        received.len(),
        written.len(),
        written.len() as f64 / send_span.as_secs_f64().max(1e-9),
        replies.load(Ordering::Relaxed),
        errors.load(Ordering::Relaxed),
        startup.as_secs_f64(),
        startup_goal(n).as_secs_f64(),
        n
    );
    println!(
        "  measured wakes: {} (expected {expected} after warm-up); {} of them waited behind a prompt in flight, {} rode in a batch",
        overhead.len(),
        waited,
        batched
    );
    let rows = [
        ("harness overhead (recv -> written)", &mut overhead),
        ("incl. queueing (recv -> written)", &mut queued),
        ("end to end (scheduled -> written)", &mut e2e),
        ("relay transit (scheduled -> recv)", &mut transit),
        ("incl. intake (frame|tap -> written)", &mut from_frame),
        ("intake: pool|tap + queue (-> recv)", &mut pool),
        ("  routing (recv -> queued)", &mut routing),
        ("  worker wake-up (queued -> taken)", &mut wake_up),
        ("  in the worker (taken -> written)", &mut in_worker),
    ];
    let mut overhead_stats = None;
    let mut e2e_stats = Stats::default();
    for (label, v) in rows {
        let s = Stats::of(v);
        print_stats(label, &s);
        if overhead_stats.is_none() {
            overhead_stats = Some(s);
        }
        if label.starts_with("end to end") {
            e2e_stats = s;
        }
    }
    let mut lag = lag;
    print_stats("sender lag (scheduled -> sent)", &Stats::of(&mut lag));
    print_stats("baseline in-process, before", &base_before);
    print_stats("baseline in-process, after", &base_after);
    let o = overhead_stats.unwrap_or_default();
    let base = Stats {
        p50: base_before.p50.min(base_after.p50),
        p99: base_before.p99.min(base_after.p99),
        ..Default::default()
    };
    println!(
        "  ratio overhead / in-process baseline: {:.1}x p50, {:.1}x p99",
        o.p50.as_secs_f64() / base.p50.as_secs_f64().max(1e-9),
        o.p99.as_secs_f64() / base.p99.as_secs_f64().max(1e-9)
    );
    println!(
        "  goal p99 <= {GOAL_P99:?}: {} (harness overhead p99 {:.0} us)",
        if o.n > 0 && o.p99 <= GOAL_P99 {
            "met"
        } else {
            "NOT met"
        },
        o.p99.as_secs_f64() * 1e6
    );
    match (rss_before, rss_after) {
        _ if !ctx.measure_memory => {}
        (Some(b), Some(a)) => {
            let kib = a.saturating_sub(b) as f64 / n as f64;
            println!(
                "  harness memory per idle persona (agents excluded): {kib:.0} KiB (goal <= 2048 KiB: {})",
                if kib <= 2048.0 { "met" } else { "NOT met" }
            );
        }
        _ => println!("  harness memory per idle persona: not measured (/proc unavailable)"),
    }
    if let Some(cpu) = &cpu {
        cpu.print();
    }
    if let Some(s) = summary {
        println!(
            "  harness summary: started {} refused {} events {} replies {}",
            s.started, s.refused, s.events, s.replies
        );
    }
    sender_rt.shutdown_timeout(Duration::from_secs(2));
    Outcome {
        confined: ctx.confined,
        startup,
        rate,
        achieved: events.len() as f64 / send_span.as_secs_f64().max(1e-9),
        e2e: e2e_stats,
        overhead: o,
        expected,
        measured: o.n,
    }
}

/// Agents confined by this profile's `apiary` as the launcher, or not at all.
fn confinement(confined: bool) -> apiary::dispatch::confine::Confinement {
    use apiary::dispatch::confine::Confinement;
    if !confined {
        return Confinement::none("the baseline");
    }
    let launcher = common::apiary_bin();
    let support = apiary_confine::Support::detect(&launcher);
    Confinement::decide(launcher, support, None, None).unwrap_or_else(|why| {
        eprintln!("{why}");
        std::process::exit(2)
    })
}

fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Sleeps coarsely, then spins the last `spin` (thread sleeps overshoot by tens of microseconds;
/// spinning takes CPU time the harness on the same cores could use).
fn sleep_until(when: Instant, spin: Duration) {
    loop {
        let now = Instant::now();
        if now >= when {
            return;
        }
        let left = when - now;
        if left > spin + Duration::from_micros(100) {
            std::thread::sleep(left - spin);
        } else if spin.is_zero() {
            std::thread::sleep(left);
        } else {
            std::hint::spin_loop();
        }
    }
}

/// Channel `c` is followed by the personas `p` with `(4p + k) % 100 == c`, `k < 4`.
fn channels_of(p: usize) -> Vec<usize> {
    (0..PER_PERSONA)
        .map(|k| (p * PER_PERSONA + k) % CHANNELS)
        .collect()
}

fn triggers(i: usize) -> Triggers {
    Triggers {
        mentions: true,
        keywords: vec![format!("topic{i}"), "deploy".into()],
        all_messages: i.is_multiple_of(10),
    }
}

/// Writes the pack directory; the personas as the matcher baseline sees them.
fn write_pack(root: &std::path::Path) -> Vec<TriggerPersona> {
    let pack = root.join("pack");
    let mut names = Vec::new();
    let mut trigger_personas = Vec::new();
    for i in 0..*PERSONAS {
        let rel = format!("agents/p{i}.persona.md");
        let path = pack.join(&rel);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        let subscribe: Vec<String> = channels_of(i)
            .iter()
            .map(|c| format!("\"ch{c}\""))
            .collect();
        let t = triggers(i);
        std::fs::write(
            &path,
            format!(
                "---\nname: p{i}\ndisplay_name: P{i}\ndescription: bench\nruntime: apiary-agent\nsubscribe: [{}]\ntriggers:\n  mentions: true\n  keywords: [\"{}\", \"{}\"]\n  all_messages: {}\n---\nYou are P{i}.\n",
                subscribe.join(", "),
                t.keywords[0],
                t.keywords[1],
                t.all_messages
            ),
        )
        .expect("persona file");
        names.push(format!("\"{rel}\""));
        trigger_personas.push(TriggerPersona {
            name: format!("p{i}"),
            display_name: format!("P{i}"),
            qualified: String::new(),
            pubkey: Keys::generate().public_key(),
            triggers: t,
        });
    }
    std::fs::create_dir_all(pack.join(".plugin")).expect("mkdir");
    std::fs::write(
        pack.join(".plugin/plugin.json"),
        format!(
            "{{\"id\": \"bench.pack\", \"name\": \"Bench\", \"version\": \"1.0.0\", \"personas\": [{}]}}",
            names.join(",")
        ),
    )
    .expect("plugin.json");
    trigger_personas
}

/// The pack `write_pack` wrote, loaded and resolved for one run.
fn load_pack(root: &std::path::Path) -> Vec<PackRun> {
    let loaded = apiary::pack::load(&root.join("pack"));
    let pack = loaded.pack.expect("bench pack loads");
    let resolved = apiary::resolve::resolve(
        &pack,
        &apiary::resolve::Overrides::default(),
        &apiary::resolve::process_env,
    );
    let namespace = pack.manifest.id.clone();
    vec![PackRun {
        pack,
        resolved,
        namespace,
    }]
}

/// Event `i` goes to channel `i % 100`: a mention of one of its personas, a keyword both wake on,
/// or chatter only the `all_messages` personas take.
fn make_event(author: &Keys, i: usize, personas: &[TriggerPersona]) -> Event {
    let c = i % CHANNELS;
    let followers: Vec<&TriggerPersona> = (0..*PERSONAS)
        .filter(|p| channels_of(*p).contains(&c))
        .map(|p| &personas[p])
        .collect();
    let text = match i % 4 {
        0 => format!(
            "hello @{} what do you think #{i}",
            followers[i / 4 % 2].name
        ),
        1 => format!("just chatting #{i}"),
        2 => format!("can we deploy today #{i}"),
        _ => format!("news about topic{} and more #{i}", i % *PERSONAS),
    };
    relay::message(author, &format!("ch{c}"), &text, vec![]).expect("event")
}

/// (persona, event) wakes the native matcher predicts for the measured part of the run.
fn expected_wakes(
    events: &[Event],
    personas: &[TriggerPersona],
    warm_end: Instant,
    t0: Instant,
    interval: Duration,
) -> usize {
    events
        .iter()
        .enumerate()
        .filter(|(i, _)| t0 + interval * *i as u32 >= warm_end)
        .filter_map(|(_, e)| Message::parse(e))
        .map(|m| {
            (0..*PERSONAS)
                .filter(|p| {
                    channels_of(*p)
                        .iter()
                        .any(|c| format!("ch{c}") == m.channel)
                })
                .filter(|p| NativeTriggers.decide(&m, &personas[*p]).is_some())
                .count()
        })
        .sum()
}

/// The in-process path per event: verify, parse, native matcher per follower, prompt, request.
fn baseline(events: &[Event], personas: &[TriggerPersona]) -> Stats {
    let mut routes: HashMap<String, Vec<usize>> = HashMap::new();
    for p in 0..*PERSONAS {
        for c in channels_of(p) {
            routes.entry(format!("ch{c}")).or_default().push(p);
        }
    }
    let mut times = Vec::with_capacity(events.len());
    for ev in events {
        let start = Instant::now();
        let mut out = 0usize;
        if ev.verify().is_ok()
            && let Some(m) = Message::parse(ev)
            && let Some(targets) = routes.get(&m.channel)
        {
            for &i in targets {
                let p = &personas[i];
                let Some(reason) = NativeTriggers.decide(&m, p) else {
                    continue;
                };
                let ctx = prompt::Context {
                    channel_name: &m.channel,
                    persona: &p.name,
                    publish: true,
                };
                let text = prompt::assemble(None, &ctx, &reason.to_string(), &[], &[], &m);
                let req = acp::PromptRequest::new(
                    acp::SessionId::new("sess-1"),
                    vec![acp::ContentBlock::from(text)],
                );
                let line = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "session/prompt", "params": req})
                    .to_string();
                out += line.len();
            }
        }
        std::hint::black_box(out);
        times.push(start.elapsed());
    }
    Stats::of(&mut times)
}

#[derive(Default, Clone, Copy)]
struct Stats {
    n: usize,
    p50: Duration,
    p90: Duration,
    p99: Duration,
    max: Duration,
}

impl Stats {
    fn of(v: &mut [Duration]) -> Stats {
        if v.is_empty() {
            return Stats::default();
        }
        v.sort();
        let pct = |q: f64| v[((v.len() as f64 * q) as usize).min(v.len() - 1)];
        Stats {
            n: v.len(),
            p50: pct(0.50),
            p90: pct(0.90),
            p99: pct(0.99),
            max: v[v.len() - 1],
        }
    }
}

fn print_stats(label: &str, s: &Stats) {
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    println!(
        "  {label:<36} n {:>6}  p50 {:>8.0} us  p90 {:>8.0} us  p99 {:>8.0} us  max {:>8.0} us",
        s.n,
        us(s.p50),
        us(s.p90),
        us(s.p99),
        us(s.max)
    );
}

/// CPU time (clock ticks) by who spent it: this process's threads by name (the embedded relay,
/// the relay I/O thread, the harness's runtime, the sender, the bench's main thread) and child
/// processes by name (the agents; nostr-rs-relay).
#[derive(Default)]
struct CpuTicks(std::collections::BTreeMap<String, u64>);

impl CpuTicks {
    fn since(&self, before: &CpuTicks) -> CpuTicks {
        CpuTicks(
            self.0
                .iter()
                .map(|(who, t)| {
                    let was = before.0.get(who).copied().unwrap_or(0);
                    (who.clone(), t.saturating_sub(was))
                })
                .collect(),
        )
    }
}

/// (name, utime + stime) from a `/proc/.../stat` line, and the parent pid.
fn stat_line(text: &str) -> Option<(String, u64, u32)> {
    let (open, close) = (text.find('(')?, text.rfind(')')?);
    let name = text.get(open + 1..close)?.to_string();
    let rest: Vec<&str> = text.get(close + 2..)?.split(' ').collect();
    // After the name: state(0) ppid(1) ... utime(11) stime(12).
    let ppid = rest.get(1)?.parse().ok()?;
    let ticks = rest.get(11)?.parse::<u64>().ok()? + rest.get(12)?.parse::<u64>().ok()?;
    Some((name, ticks, ppid))
}

fn cpu_ticks() -> CpuTicks {
    let mut by = CpuTicks::default();
    let me = std::process::id();
    let group = |name: &str| -> String {
        if name.starts_with("live_agents") {
            "bench main thread".into()
        } else {
            name.to_string()
        }
    };
    if let Ok(tasks) = std::fs::read_dir("/proc/self/task") {
        for t in tasks.flatten() {
            if let Some((name, ticks, _)) = std::fs::read_to_string(t.path().join("stat"))
                .ok()
                .and_then(|s| stat_line(&s))
            {
                *by.0.entry(group(&name)).or_default() += ticks;
            }
        }
    }
    if let Ok(procs) = std::fs::read_dir("/proc") {
        for p in procs.flatten() {
            let Some(pid) = p.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
                continue;
            };
            if pid == me {
                continue;
            }
            if let Some((name, ticks, ppid)) = std::fs::read_to_string(p.path().join("stat"))
                .ok()
                .and_then(|s| stat_line(&s))
                && ppid == me
            {
                *by.0.entry(format!("{name} (processes)")).or_default() += ticks;
            }
        }
    }
    by
}

/// The CPU the load window used, by who used it.
struct CpuWindow {
    span: Duration,
    messages: usize,
    used: CpuTicks,
}

impl CpuWindow {
    fn print(&self) {
        // Linux's USER_HZ.
        const TICK: f64 = 0.01;
        let secs = self.span.as_secs_f64().max(1e-9);
        let total: u64 = self.used.0.values().sum();
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
        println!(
            "  CPU in the load window ({secs:.1} s, {} messages): {:.0}% of {cores:.0} cores, {:.0} us a message",
            self.messages,
            total as f64 * TICK / secs / cores * 100.0,
            total as f64 * TICK / self.messages.max(1) as f64 * 1e6
        );
        let mut rows: Vec<_> = self.used.0.iter().filter(|(_, t)| **t > 0).collect();
        rows.sort_by(|a, b| b.1.cmp(a.1));
        for (who, ticks) in rows {
            println!(
                "    {who:<28} {:>5.0}% of a core  {:>6.0} us a message",
                *ticks as f64 * TICK / secs * 100.0,
                *ticks as f64 * TICK / self.messages.max(1) as f64 * 1e6
            );
        }
    }
}

fn rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// What the harness's `apiary::probe` trace points reported, with the time they fired.
enum Probe {
    /// The event's websocket frame reached the harness's relay client (before the pool verified it).
    Frame(Instant, EventId),
    Received(Instant, EventId),
    /// The event went into a persona's queue.
    Queued(Instant, String, EventId),
    /// A persona's worker took the event from its queue.
    Taken(Instant, String, EventId),
    /// persona, channel id
    Ended(Instant, String, String),
    /// persona, the event ids a `session/prompt` line carries (the burst's earlier ones and its own)
    Written(Instant, String, Vec<EventId>),
}

#[derive(Default)]
struct Probes(Mutex<Vec<Probe>>);

impl Probes {
    fn push(&self, p: Probe) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).push(p);
    }
    fn len(&self) -> usize {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
    fn clear(&self) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }
    fn take(&self) -> Vec<Probe> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

struct ProbeLayer(Arc<Probes>);

#[derive(Default)]
struct Fields {
    message: String,
    id: String,
    persona: String,
    channel: String,
    line: Option<Vec<EventId>>,
}

impl tracing::field::Visit for Fields {
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        if field.name() == "line" {
            // Only prompts matter; their event ids follow "Event ID: " in the prompt text.
            if value.contains("\"method\":\"session/prompt\"") {
                self.line = Some(
                    value
                        .match_indices("Event ID: ")
                        .filter_map(|(at, m)| value.get(at + m.len()..at + m.len() + 64))
                        .filter_map(|h| EventId::from_hex(h).ok())
                        .collect(),
                );
            }
        }
    }

    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        let s = format!("{value:?}");
        match field.name() {
            "message" => self.message = s,
            "id" => self.id = s,
            "persona" => self.persona = s,
            "channel" => self.channel = s,
            _ => {}
        }
    }
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for ProbeLayer {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        let t = Instant::now();
        let mut f = Fields::default();
        event.record(&mut f);
        let probe = match f.message.as_str() {
            "event received" => match EventId::from_hex(&f.id) {
                Ok(id) => Probe::Received(t, id),
                Err(_) => return,
            },
            "frame received" | "event tapped" => match EventId::from_hex(&f.id) {
                Ok(id) => Probe::Frame(t, id),
                Err(_) => return,
            },
            "message queued" => match EventId::from_hex(&f.id) {
                Ok(id) => Probe::Queued(t, f.persona, id),
                Err(_) => return,
            },
            "message taken" => match EventId::from_hex(&f.id) {
                Ok(id) => Probe::Taken(t, f.persona, id),
                Err(_) => return,
            },
            "turn ended" => Probe::Ended(t, f.persona, f.channel),
            "line written" => match f.line {
                Some(ids) => Probe::Written(t, f.persona, ids),
                None => return,
            },
            _ => return,
        };
        self.0.push(probe);
    }
}
