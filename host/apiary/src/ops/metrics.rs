//! `/metrics`: the harness's notes counted into Prometheus metrics (`prometheus-client`, encoded
//! in the OpenMetrics text format Prometheus scrapes). The harness itself knows nothing of them:
//! every note `apiary up` prints passes through [`Metrics::observe`] on its way out.
//!
//! Labels are bounded: `pack` and `persona` (the replica's own personas; the pack is learnt from
//! the notes that name both, such as `persona_ready`), and a `reason` reduced to a short
//! word (a wake's trigger kind, a skip's cause), never free text, ids or authors.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::AtomicU64;
use std::time::Instant;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};

use crate::dispatch::Note;
use crate::dispatch::event::Event;
use crate::status::Status;

/// Prompts in flight remembered for the latency histogram; past this the oldest are forgotten.
const IN_FLIGHT_MAX: usize = 10_000;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PersonaLabel {
    pack: String,
    persona: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    pack: String,
    persona: String,
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HookLabels {
    pack: String,
    persona: String,
    hook: String,
    kept: String,
}

type Latency = Family<PersonaLabel, Histogram, fn() -> Histogram>;

fn latency_buckets() -> Histogram {
    // 5 ms to about 80 s.
    Histogram::new(exponential_buckets(0.005, 2.0, 15))
}

/// The metrics, and what folding the notes needs.
pub struct Metrics {
    registry: Registry,
    events: Counter,
    wakes: Family<ReasonLabels, Counter>,
    skips: Family<ReasonLabels, Counter>,
    replies: Family<PersonaLabel, Counter>,
    errors: Family<PersonaLabel, Counter>,
    restarts: Family<PersonaLabel, Counter>,
    hook_runs: Family<HookLabels, Counter>,
    latency: Latency,
    queue_depth: Family<PersonaLabel, Gauge>,
    breaker_open: Family<PersonaLabel, Gauge>,
    personas_ready: Gauge,
    relay_connected: Gauge,
    intake_depth: Gauge,
    intake_lag: Gauge<f64, AtomicU64>,
    behind: Gauge,
    state: Mutex<State>,
}

/// The notes folded so far: the status view's model (queue depth, phase) and the prompts in
/// flight.
struct State {
    status: Status,
    prompts: HashMap<(String, String), Instant>,
    /// Each persona's pack, from the notes that name both.
    packs: HashMap<String, String>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("apiary");
        let m = Metrics {
            registry: Registry::default(),
            events: Counter::default(),
            wakes: Family::default(),
            skips: Family::default(),
            replies: Family::default(),
            errors: Family::default(),
            restarts: Family::default(),
            hook_runs: Family::default(),
            latency: Family::new_with_constructor(latency_buckets as fn() -> Histogram),
            queue_depth: Family::default(),
            breaker_open: Family::default(),
            personas_ready: Gauge::default(),
            relay_connected: Gauge::default(),
            intake_depth: Gauge::default(),
            intake_lag: Gauge::default(),
            behind: Gauge::default(),
            state: Mutex::new(State {
                status: Status::new(Instant::now()),
                prompts: HashMap::new(),
                packs: HashMap::new(),
            }),
        };
        registry.register(
            "events_received",
            "Channel messages received from the relay",
            m.events.clone(),
        );
        registry.register(
            "wakes",
            "Messages that woke a persona, by trigger",
            m.wakes.clone(),
        );
        registry.register(
            "skips",
            "Messages a persona did not answer, by reason (answered_elsewhere: another replica did)",
            m.skips.clone(),
        );
        registry.register("replies", "Replies published", m.replies.clone());
        registry.register(
            "errors",
            "Failed turns, triggers, hooks and publishes",
            m.errors.clone(),
        );
        registry.register(
            "agent_restarts",
            "Agent processes restarted by supervision",
            m.restarts.clone(),
        );
        registry.register(
            "hook_runs",
            "on_message hook runs (kept: whether the message was kept)",
            m.hook_runs.clone(),
        );
        registry.register(
            "prompt_latency_seconds",
            "From session/prompt sent to the turn's end (reply published, or no reply)",
            m.latency.clone(),
        );
        registry.register(
            "queue_depth",
            "Messages waiting or in flight",
            m.queue_depth.clone(),
        );
        registry.register(
            "breaker_open",
            "1 while the persona's circuit breaker is open (its agent crashed too often)",
            m.breaker_open.clone(),
        );
        registry.register(
            "personas_ready",
            "Personas of this replica running",
            m.personas_ready.clone(),
        );
        registry.register(
            "relay_connected",
            "1 while the relay connection is up",
            m.relay_connected.clone(),
        );
        registry.register(
            "intake_depth",
            "Relay events routing has not taken yet",
            m.intake_depth.clone(),
        );
        registry.register_with_unit(
            "intake_lag",
            "The longest an event of the last second waited for routing",
            Unit::Seconds,
            m.intake_lag.clone(),
        );
        registry.register(
            "behind",
            "1 while routing is behind the relay (more messages arrive than this replica answers)",
            m.behind.clone(),
        );
        Metrics { registry, ..m }
    }

    /// Folds one note in.
    pub fn observe(&self, note: &Note) {
        let now = Instant::now();
        let event = &note.event;
        let persona = event.persona().unwrap_or_default();
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.status.apply(note, now);
        let pack = state.pack_of(persona, event.pack().unwrap_or_default());
        let p = || PersonaLabel {
            pack: pack.clone(),
            persona: persona.to_string(),
        };
        let reason = |reason: &str| ReasonLabels {
            pack: pack.clone(),
            persona: persona.to_string(),
            reason: short(reason),
        };
        match event {
            Event::Message { .. } => {
                self.events.inc();
            }
            Event::Woken { reason: why, .. } => {
                self.wakes.get_or_create(&reason(why)).inc();
            }
            Event::Skipped { reason: why, .. } => {
                self.skips.get_or_create(&reason(why)).inc();
            }
            Event::AnsweredElsewhere { id, .. } => {
                self.skips
                    .get_or_create(&reason("answered_elsewhere"))
                    .inc();
                state.finished(persona, id, now, &self.latency);
            }
            Event::Limited { action, limit, .. } if action == "dropped" => {
                let why = format!("limited_{}", short(limit));
                self.skips.get_or_create(&reason(&why)).inc();
            }
            Event::Dropped { .. } => {
                self.skips.get_or_create(&reason("on_message")).inc();
            }
            Event::HookRan { hook, kept, .. } => {
                let l = HookLabels {
                    pack: pack.clone(),
                    persona: persona.to_string(),
                    hook: short(hook),
                    kept: kept.to_string(),
                };
                self.hook_runs.get_or_create(&l).inc();
            }
            Event::Prompt { id, attempt: 1, .. } => state.started(persona, id, now),
            Event::Reply { to, .. } => {
                self.replies.get_or_create(&p()).inc();
                state.finished(persona, to, now, &self.latency);
            }
            Event::Turn { id, .. } => state.finished(persona, id, now, &self.latency),
            Event::Error {
                id, breaker_open, ..
            } => {
                self.errors.get_or_create(&p()).inc();
                if *breaker_open {
                    self.breaker_open.get_or_create(&p()).set(1);
                }
                let id = id.as_deref().unwrap_or_default();
                state.finished(persona, id, now, &self.latency);
            }
            Event::Restarted { .. } => {
                self.restarts.get_or_create(&p()).inc();
                self.breaker_open.get_or_create(&p()).set(0);
            }
            _ => {}
        }
    }

    /// Whether the harness is running (it said `ready` and is not stopping), and how many
    /// personas are ready.
    pub fn running(&self) -> (bool, usize) {
        let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let ready = state
            .status
            .rows()
            .iter()
            .filter(|r| !matches!(r.state(), "starting" | "failed" | "stopped"))
            .count();
        (state.status.is_running(), ready)
    }

    /// The text exposition, with the gauges read now.
    pub fn encode(&self, relay_connected: bool) -> String {
        {
            let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
            let mut ready = 0;
            for row in state.status.rows() {
                let l = PersonaLabel {
                    pack: state.packs.get(&row.name).cloned().unwrap_or_default(),
                    persona: row.name.clone(),
                };
                self.queue_depth.get_or_create(&l).set(row.queue() as i64);
                if !matches!(row.state(), "starting" | "failed" | "stopped") {
                    ready += 1;
                }
            }
            self.personas_ready.set(ready);
            let intake = state.status.intake();
            self.intake_depth.set(intake.depth as i64);
            self.intake_lag.set(intake.lag_ms as f64 / 1000.0);
            self.behind.set(i64::from(intake.behind));
        }
        self.relay_connected.set(i64::from(relay_connected));
        let mut text = String::new();
        if prometheus_client::encoding::text::encode(&mut text, &self.registry).is_err() {
            text.clear();
        }
        text
    }
}

impl State {
    fn started(&mut self, persona: &str, id: &str, now: Instant) {
        if self.prompts.len() >= IN_FLIGHT_MAX {
            self.prompts.clear();
        }
        self.prompts
            .insert((persona.to_string(), id.to_string()), now);
    }

    /// The pack of `persona`, remembering `named` (the note's own `pack`) when it has one.
    fn pack_of(&mut self, persona: &str, named: &str) -> String {
        if persona.is_empty() {
            return String::new();
        }
        if !named.is_empty() {
            self.packs.insert(persona.to_string(), named.to_string());
            return named.to_string();
        }
        self.packs.get(persona).cloned().unwrap_or_default()
    }

    fn finished(&mut self, persona: &str, id: &str, now: Instant, latency: &Latency) {
        if let Some(at) = self.prompts.remove(&(persona.to_string(), id.to_string())) {
            let l = PersonaLabel {
                pack: self.packs.get(persona).cloned().unwrap_or_default(),
                persona: persona.to_string(),
            };
            latency
                .get_or_create(&l)
                .observe(now.duration_since(at).as_secs_f64());
        }
    }
}

/// A reason as a bounded label: its first words before any detail (`trigger failed: ...` →
/// `trigger_failed`), lower case, letters, digits and `_` only, at most 32 characters.
fn short(reason: &str) -> String {
    let head = reason
        .split([':', '(', ','])
        .next()
        .unwrap_or_default()
        .trim();
    let mut out: String = head
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .take(32)
        .collect();
    if out.is_empty() {
        out.push_str("none");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// An event from its JSON line, as a script reading `up --json` would see it.
    fn note(line: serde_json::Value) -> Note {
        Note::only_json(serde_json::from_value(line).unwrap())
    }

    #[test]
    fn notes_become_counters_gauges_and_a_latency_histogram() {
        let m = Metrics::new();
        let at =
            |persona: &str, id: &str| json!({"persona": persona, "channel": "general", "id": id});
        let with = |mut base: serde_json::Value, more: serde_json::Value| {
            base.as_object_mut()
                .unwrap()
                .extend(more.as_object().unwrap().clone());
            note(base)
        };
        m.observe(&note(
            json!({"event": "message", "id": "a", "channel": "general",
            "channel_id": "g", "author": "00", "thread": null}),
        ));
        m.observe(&note(json!({"event": "persona_ready", "persona": "bee",
            "pack": "com.example.p", "confinement": "files", "identity": "com.example.p",
            "pubkey": "00", "channels": ["general"], "system_prompt": "session"})));
        m.observe(&with(
            at("bee", "a"),
            json!({"event": "woken", "reason": "mention"}),
        ));
        m.observe(&with(
            at("bee", "b"),
            json!({"event": "woken", "reason": "keyword: honey"}),
        ));
        m.observe(&with(
            at("sage", "a"),
            json!({"event": "skipped", "reason": "no trigger matched"}),
        ));
        m.observe(&with(
            at("bee", "a"),
            json!({"event": "prompt", "session": "s", "attempt": 1, "batch": 1}),
        ));
        m.observe(&with(
            at("bee", "r"),
            json!({"event": "reply", "to": "a", "thread": null}),
        ));
        // The breaker gauge follows the event's type, not its text.
        m.observe(&with(at("bee", "x"), json!({"event": "error", "reason": "circuit open: the agent crashed 5 times", "breaker_open": true})));
        m.observe(&with(
            at("sage", "y"),
            json!({"event": "error", "reason": "circuit open (said the agent)"}),
        ));
        m.observe(&Note::only_json(Event::Behind {
            depth: 2500,
            lag_ms: 640,
        }));
        let text = m.encode(true);
        for line in [
            "apiary_intake_depth 2500",
            "apiary_intake_lag_seconds 0.64",
            "apiary_behind 1",
            "apiary_events_received_total 1",
            "apiary_wakes_total{pack=\"com.example.p\",persona=\"bee\",reason=\"mention\"} 1",
            "apiary_wakes_total{pack=\"com.example.p\",persona=\"bee\",reason=\"keyword\"} 1",
            "apiary_skips_total{pack=\"\",persona=\"sage\",reason=\"no_trigger_matched\"} 1",
            "apiary_replies_total{pack=\"com.example.p\",persona=\"bee\"} 1",
            "apiary_prompt_latency_seconds_count{pack=\"com.example.p\",persona=\"bee\"} 1",
            "apiary_queue_depth{pack=\"com.example.p\",persona=\"bee\"} 1",
            "apiary_breaker_open{pack=\"com.example.p\",persona=\"bee\"} 1",
            "apiary_relay_connected 1",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "{line} missing in:\n{text}"
            );
        }
        assert!(
            !text.contains("apiary_breaker_open{pack=\"\",persona=\"sage\"} 1"),
            "{text}"
        );
    }

    #[test]
    fn hostile_reasons_stay_short_labels() {
        assert_eq!(short("trigger failed: \"}\n{evil"), "trigger_failed");
        assert_eq!(short(""), "none");
        assert_eq!(short(&"x".repeat(500)).len(), 32);
    }
}

/// Whether a scraper's `Accept` asks for the classic text format rather than OpenMetrics (which
/// is what Prometheus prefers and what is served without an `Accept`).
pub fn wants_classic(accept: Option<&str>) -> bool {
    accept.is_some_and(|a| {
        let a = a.to_ascii_lowercase();
        a.contains("text/plain") && !a.contains("application/openmetrics-text")
    })
}

/// The OpenMetrics exposition `text` in the classic text format (0.0.4): a counter's `# HELP` and
/// `# TYPE` name its `_total` samples, `# UNIT`, `_created` samples and `# EOF` go, `unknown`
/// is `untyped` and `info` a gauge.
pub fn classic(text: &str) -> String {
    let mut counters = std::collections::HashSet::new();
    for line in text.lines() {
        if let Some(name) = line
            .strip_prefix("# TYPE ")
            .and_then(|r| r.strip_suffix(" counter"))
        {
            counters.insert(name.to_string());
        }
    }
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let meta = ["# HELP ", "# TYPE "]
            .into_iter()
            .find(|p| line.starts_with(p));
        if let Some(prefix) = meta {
            let rest = &line[prefix.len()..];
            let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
            let name = match counters.contains(name) {
                true => format!("{name}_total"),
                false => name.to_string(),
            };
            let tail = match (prefix, tail) {
                ("# TYPE ", "unknown") => "untyped",
                ("# TYPE ", "info") => "gauge",
                (_, t) => t,
            };
            out.push_str(&format!("{prefix}{name} {tail}\n"));
            continue;
        }
        let sample = line.split(['{', ' ']).next().unwrap_or("");
        if sample.ends_with("_created") && counters.contains(sample.trim_end_matches("_created")) {
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod format_tests {
    use super::*;

    #[test]
    fn the_classic_format_names_counters_by_their_samples_and_has_no_openmetrics_lines() {
        let om = "# HELP apiary_replies Replies published.\n# TYPE apiary_replies counter\napiary_replies_total{persona=\"bee\"} 1\napiary_replies_created{persona=\"bee\"} 1.7e9\n# HELP apiary_queue_depth Messages waiting.\n# TYPE apiary_queue_depth gauge\n# UNIT apiary_queue_depth messages\napiary_queue_depth 0\n# EOF\n";
        let c = classic(om);
        assert_eq!(
            c,
            "# HELP apiary_replies_total Replies published.\n# TYPE apiary_replies_total counter\napiary_replies_total{persona=\"bee\"} 1\n# HELP apiary_queue_depth Messages waiting.\n# TYPE apiary_queue_depth gauge\napiary_queue_depth 0\n"
        );
        assert!(wants_classic(Some("text/plain;version=0.0.4;q=0.9")));
        assert!(!wants_classic(Some(
            "application/openmetrics-text;version=1.0.0,text/plain;q=0.5"
        )));
        assert!(!wants_classic(None));
    }
}
