//! Live-harness dispatch benchmark: the harness's own work per relay event, from a received event to
//! the `session/prompt` request bytes, for 50 personas over 100 channels (each persona follows 4
//! channels, so every channel has 2 personas): verify + parse the event, de-duplicate, route by
//! channel, decide each subscribed persona's trigger, assemble the prompt and serialise the ACP
//! request for each persona woken. Relay and agent I/O are excluded (they are the network and the
//! agent, not the harness).
//!
//! Baseline in the same run: the native matcher; the default path uses the sandbox's
//! `trigger-default` component. Printed: p50/p99 per event for both, and the ratio.
//!
//! Run: `cargo bench -p apiary --bench live`

mod common;

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use agent_client_protocol_schema::v1 as acp;
use apiary::dispatch::prompt;
use apiary::dispatch::sandboxed::SandboxTriggers;
use apiary::dispatch::{NativeTriggers, TriggerMatcher, TriggerPersona};
use apiary::relay::{self, Message};
use apiary::resolve::Triggers;
use nostr_sdk::prelude::*;

const PERSONAS: usize = 50;
const CHANNELS: usize = 100;
const PER_PERSONA: usize = 4;
const EVENTS: usize = 5_000;

fn main() {
    let personas: Vec<TriggerPersona> = (0..PERSONAS)
        .map(|i| TriggerPersona {
            name: format!("p{i}"),
            display_name: format!("P{i}"),
            qualified: String::new(),
            pubkey: Keys::generate().public_key(),
            triggers: Triggers {
                mentions: true,
                keywords: vec![format!("topic{i}"), "deploy".into()],
                all_messages: i % 10 == 0,
            },
        })
        .collect();
    let mut routes: HashMap<String, Vec<usize>> = HashMap::new();
    for p in 0..PERSONAS {
        for k in 0..PER_PERSONA {
            let c = (p * PER_PERSONA + k) % CHANNELS;
            routes.entry(format!("ch{c}")).or_default().push(p);
        }
    }
    let author = Keys::generate();
    let texts = [
        "hello @p3 what do you think",
        "just chatting",
        "can we deploy today",
        "news about topic7 and more",
    ];
    let events: Vec<Event> = (0..EVENTS)
        .map(|i| {
            relay::message(
                &author,
                &format!("ch{}", i % CHANNELS),
                &format!("{} #{i}", texts[i % texts.len()]),
                vec![],
            )
            .unwrap()
        })
        .collect();
    let system = "You are a persona.\n".repeat(40);

    let native = run(&NativeTriggers, &events, &routes, &personas, &system);
    let sandbox = match SandboxTriggers::new(&apiary::builtin::Components) {
        Ok(t) => Some(run(&t, &events, &routes, &personas, &system)),
        Err(e) => {
            eprintln!("sandbox unavailable: {e}");
            None
        }
    };
    println!(
        "dispatch per event ({EVENTS} events, {PERSONAS} personas, {CHANNELS} channels, {} wakes/event avg)",
        native.wakes as f64 / EVENTS as f64
    );
    print_row("native matcher (baseline)", &native, None);
    if let Some(s) = &sandbox {
        print_row("trigger-default component", s, Some(&native));
    }
    match memory_per_persona() {
        Some(kib) => println!(
            "harness memory per idle persona (agents excluded): {:.0} KiB (goal <= 2048 KiB: {})",
            kib,
            if kib <= 2048.0 { "met" } else { "NOT met" }
        ),
        None => println!("harness memory per idle persona: not measured (set-up failed)"),
    }
    let budget = Duration::from_millis(2);
    let p99 = sandbox.as_ref().unwrap_or(&native).p99;
    println!(
        "goal p99 <= {budget:?}: {} (p99 {p99:?}); at 1,000 events/s this is {:.1}% of one core",
        if p99 <= budget { "met" } else { "NOT met" },
        sandbox.as_ref().unwrap_or(&native).mean.as_secs_f64() * 1000.0 * 100.0
    );
}

/// Harness memory per idle persona: RSS of this process with the embedded relay up, then with 50
/// personas started (their agents are separate processes and not counted), divided by 50.
fn memory_per_persona() -> Option<f64> {
    use apiary::acp::{AgentCommand, PermissionPolicy};
    use apiary::dispatch::{self, NativeTriggers, NoHooks, PackRun};
    use std::sync::{Arc, mpsc};

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .ok()?;
    let tmp = tempfile::tempdir().ok()?;
    let pack = tmp.path().join("pack");
    let mut personas = Vec::new();
    for i in 0..PERSONAS {
        let rel = format!("agents/p{i}.persona.md");
        let path = pack.join(&rel);
        std::fs::create_dir_all(path.parent()?).ok()?;
        std::fs::write(
            &path,
            format!(
                "---\nname: p{i}\ndisplay_name: P{i}\ndescription: bench\nruntime: apiary-agent\nsubscribe: [\"ch{}\", \"ch{}\"]\n---\nYou are P{i}.\n",
                (2 * i) % CHANNELS,
                (2 * i + 1) % CHANNELS
            ),
        )
        .ok()?;
        personas.push(format!("\"{rel}\""));
    }
    std::fs::create_dir_all(pack.join(".plugin")).ok()?;
    std::fs::write(
        pack.join(".plugin/plugin.json"),
        format!(
            "{{\"id\": \"bench.pack\", \"name\": \"Bench\", \"version\": \"1.0.0\", \"personas\": [{}]}}",
            personas.join(",")
        ),
    )
    .ok()?;
    let loaded = apiary::pack::load(&pack);
    let pack = loaded.pack?;
    let resolved = apiary::resolve::resolve(
        &pack,
        &apiary::resolve::Overrides::default(),
        &apiary::resolve::process_env,
    );
    let (tx, rx) = mpsc::channel::<String>();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let result = rt.block_on(async move {
        let relay = apiary::relay::embedded::Embedded::start("127.0.0.1:0".parse().ok()?, None)
            .await
            .ok()?;
        tokio::time::sleep(Duration::from_millis(200)).await;
        let before = rss_kib()?;
        let config = dispatch::Config {
            relay: dispatch::RelayLink::InProcess {
                url: relay.url.clone(),
                door: Box::new(relay.door()),
            },
            agent: AgentCommand {
                program: common::agent_bin(),
                args: vec![],
            },
            agent_nice: apiary::acp::DEFAULT_AGENT_NICE,
            publish: true,
            policy: PermissionPolicy::Deny,
            idle_timeout: Duration::from_secs(60),
            turn_timeout: Duration::from_secs(60),
            drain_timeout: Duration::from_secs(5),
            workspace_root: tmp.path().join("ws"),
            keys: apiary::relay::keys::KeyStore::new(tmp.path().join("keys")),
            base_prompt: None,
            channel_authority: Default::default(),
            // Measures the harness, not the flood limits.
            limits: dispatch::TurnLimits::UNLIMITED,
            cluster: Default::default(),
            sessions_dir: None,
            persona_limits: Default::default(),
            confinement: apiary::dispatch::confine::Confinement::none("not confined in this test"),
            private_dirs: Vec::new(),
            desk: None,
            agent_tools: false,
            hop_limit: 0,
        };
        let out: dispatch::Out = Arc::new(move |n: dispatch::Note| {
            if let Some(l) = n.text {
                let _ = tx.send(l);
            }
        });
        let harness = tokio::spawn(dispatch::run(
            config,
            vec![PackRun {
                namespace: pack.manifest.id.clone(),
                pack,
                resolved,
            }],
            Arc::new(NativeTriggers),
            Arc::new(NoHooks),
            out,
            async move {
                let _ = stop_rx.await;
            },
        ));
        let ready = tokio::task::spawn_blocking(move || {
            let deadline = Instant::now() + Duration::from_secs(120);
            while let Ok(l) = rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                if l.starts_with("ready ") {
                    return true;
                }
            }
            false
        })
        .await
        .ok()?;
        tokio::time::sleep(Duration::from_millis(500)).await;
        let after = rss_kib()?;
        let _ = stop_tx.send(());
        let _ = harness.await;
        relay.shutdown();
        ready.then(|| (after.saturating_sub(before)) as f64 / PERSONAS as f64)
    });
    rt.shutdown_timeout(Duration::from_secs(2));
    result
}

fn rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

struct Stats {
    p50: Duration,
    p99: Duration,
    mean: Duration,
    wakes: usize,
}

fn print_row(label: &str, s: &Stats, base: Option<&Stats>) {
    let ratio = base
        .map(|b| {
            format!(
                "  ({:.1}x p50, {:.1}x p99 vs native)",
                s.p50.as_secs_f64() / b.p50.as_secs_f64().max(1e-9),
                s.p99.as_secs_f64() / b.p99.as_secs_f64().max(1e-9)
            )
        })
        .unwrap_or_default();
    println!(
        "  {label:<28} p50 {:>9.1} us  p99 {:>9.1} us  mean {:>9.1} us{ratio}",
        s.p50.as_secs_f64() * 1e6,
        s.p99.as_secs_f64() * 1e6,
        s.mean.as_secs_f64() * 1e6
    );
}

fn run(
    matcher: &dyn TriggerMatcher,
    events: &[Event],
    routes: &HashMap<String, Vec<usize>>,
    personas: &[TriggerPersona],
    system: &str,
) -> Stats {
    let mut seen = HashSet::new();
    let mut times = Vec::with_capacity(events.len());
    let mut wakes = 0;
    for ev in events {
        let start = Instant::now();
        let mut out = 0usize;
        if ev.verify().is_ok()
            && seen.insert(ev.id)
            && let Some(m) = Message::parse(ev)
            && let Some(targets) = routes.get(&m.channel)
        {
            for &i in targets {
                let p = &personas[i];
                let Some(reason) = matcher.decide(&m, p) else {
                    continue;
                };
                wakes += 1;
                let ctx = prompt::Context {
                    channel_name: &m.channel,
                    persona: &p.name,
                    publish: true,
                };
                let text = prompt::assemble(
                    Some((None, system)),
                    &ctx,
                    &reason.to_string(),
                    &[],
                    &[],
                    &m,
                );
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
    times.sort();
    let pct = |q: f64| times[((times.len() as f64 * q) as usize).min(times.len() - 1)];
    let mean = times.iter().sum::<Duration>() / times.len() as u32;
    Stats {
        p50: pct(0.50),
        p99: pct(0.99),
        mean,
        wakes,
    }
}
