//! The status view of `apiary up` on a terminal: the harness's notes folded into one row per persona
//! (agent state, queue depth, last event, trigger and hook counts, replies), and that table rendered
//! as fixed-width text lines that fit the terminal. Pure: the caller passes the clock and the size.

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::{Duration, Instant};

use unicode_width::UnicodeWidthChar;

use crate::dispatch::Note;
use crate::dispatch::event::Event;

/// Plain log lines kept for the area under the table.
const LOG_KEEP: usize = 64;
/// Per persona, ids of finished messages remembered so that a note arriving late (the notes of the
/// dispatch loop and of a worker race each other) does not count a message twice.
const DONE_KEEP: usize = 1024;
/// The persona column never gets wider than this.
const NAME_MAX: usize = 24;

/// The harness as a whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Starting,
    Running,
    Stopping,
    Stopped,
}

impl Phase {
    fn label(self) -> &'static str {
        match self {
            Phase::Starting => "starting",
            Phase::Running => "running",
            Phase::Stopping => "stopping (draining)",
            Phase::Stopped => "stopped",
        }
    }
}

/// A persona's agent process, as far as the notes tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Agent {
    Starting,
    Ready,
    Restarting,
    Stopped,
    Failed,
}

/// One persona's row.
#[derive(Debug)]
pub struct Row {
    pub name: String,
    agent: Agent,
    /// Messages woken and not finished: id → a prompt for it is in flight.
    pending: HashMap<String, bool>,
    /// A turn answering `id` also answers these earlier messages (a batch).
    batches: HashMap<String, Vec<String>>,
    done: HashSet<String>,
    done_order: VecDeque<String>,
    pub wakes: u64,
    pub skips: u64,
    pub hook_runs: u64,
    pub hook_drops: u64,
    pub replies: u64,
    pub errors: u64,
    /// Its spending limit closest to tripping: (limit, used, allowed), as last reported.
    limit: Option<(String, u64, u64)>,
    last: Option<(&'static str, Instant)>,
}

impl Row {
    fn new(name: &str) -> Row {
        Row {
            name: name.to_string(),
            agent: Agent::Starting,
            pending: HashMap::new(),
            batches: HashMap::new(),
            done: HashSet::new(),
            done_order: VecDeque::new(),
            wakes: 0,
            skips: 0,
            hook_runs: 0,
            hook_drops: 0,
            replies: 0,
            errors: 0,
            limit: None,
            last: None,
        }
    }

    /// What the LIMIT column says: `used/allowed` of the tightest spending limit with its unit
    /// (`h` turns an hour, `d` turns a day, `tok` tokens a day), `-` without limits.
    pub fn limit(&self) -> String {
        let Some((limit, used, allowed)) = &self.limit else {
            return "-".into();
        };
        let unit = match limit.as_str() {
            "turns_per_hour" => "h",
            "turns_per_day" => "d",
            _ => "tok",
        };
        format!("{}/{}{unit}", short(*used), short(*allowed))
    }

    /// What the STATE column says: the agent's state, `busy` while a prompt is in flight.
    pub fn state(&self) -> &'static str {
        match self.agent {
            Agent::Starting => "starting",
            Agent::Ready if self.pending.values().any(|&in_flight| in_flight) => "busy",
            Agent::Ready => "ready",
            Agent::Restarting => "restarting",
            Agent::Stopped => "stopped",
            Agent::Failed => "failed",
        }
    }

    /// Messages waiting or in flight.
    pub fn queue(&self) -> usize {
        self.pending.len()
    }

    fn woken(&mut self, id: &str) {
        if !self.done.contains(id) {
            self.pending.entry(id.to_string()).or_insert(false);
        }
    }

    fn in_flight(&mut self, id: &str, flying: bool) {
        if !self.done.contains(id) {
            self.pending.insert(id.to_string(), flying);
        }
    }

    /// The message `id` (and the batch answered with it) left the queue.
    fn finish(&mut self, id: &str) {
        let mut ids = self.batches.remove(id).unwrap_or_default();
        ids.push(id.to_string());
        for id in ids {
            self.pending.remove(&id);
            if self.done.insert(id.clone()) {
                self.done_order.push_back(id);
            }
        }
        while self.done_order.len() > DONE_KEEP {
            if let Some(old) = self.done_order.pop_front() {
                self.done.remove(&old);
            }
        }
    }
}

/// The harness's intake as its last `intake`, `behind` and `caught_up` events said.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Intake {
    /// Events the relay has that routing has not taken.
    pub depth: u64,
    /// The longest an event of the last second waited for routing.
    pub lag_ms: u64,
    /// Routing fell behind and has not caught up since.
    pub behind: bool,
}

/// Everything the view shows.
#[derive(Debug)]
pub struct Status {
    started: Instant,
    relay: Option<String>,
    /// The agents' confinement layers (`files,network,seccomp`), `!` after them when incomplete.
    confinement: Option<String>,
    packs: Vec<String>,
    phase: Phase,
    rows: Vec<Row>,
    messages: u64,
    last_message: Option<Instant>,
    /// Events routing has not taken yet, and how far behind it is (the harness's `intake`).
    intake: Intake,
    /// The events' plain lines, newest last.
    events: VecDeque<String>,
    /// What the process wrote to stderr meanwhile (tracing logs, errors), newest last.
    stderr: VecDeque<String>,
}

impl Status {
    pub fn new(now: Instant) -> Status {
        Status {
            started: now,
            relay: None,
            confinement: None,
            packs: Vec::new(),
            phase: Phase::Starting,
            rows: Vec::new(),
            messages: 0,
            last_message: None,
            intake: Intake::default(),
            events: VecDeque::new(),
            stderr: VecDeque::new(),
        }
    }

    /// Events routing has not taken yet, and how far behind it is.
    pub fn intake(&self) -> Intake {
        self.intake
    }

    /// A persona about to start (its row shows `starting` until it is ready or refused).
    pub fn seed(&mut self, pack: &str, persona: &str) {
        if !self.packs.iter().any(|p| p == pack) {
            self.packs.push(pack.to_string());
        }
        self.row_mut(persona);
    }

    #[cfg(test)]
    pub fn row(&self, persona: &str) -> Option<&Row> {
        self.rows.iter().find(|r| r.name == persona)
    }

    #[cfg(test)]
    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// One row per persona seen.
    pub fn rows(&self) -> &[Row] {
        &self.rows
    }

    /// The harness said `ready` and is not stopping.
    pub fn is_running(&self) -> bool {
        self.phase == Phase::Running
    }

    fn row_mut(&mut self, persona: &str) -> &mut Row {
        let at = match self.rows.iter().position(|r| r.name == persona) {
            Some(i) => i,
            None => {
                self.rows.push(Row::new(persona));
                self.rows.len() - 1
            }
        };
        &mut self.rows[at]
    }

    /// A line the process wrote to stderr (a log line, an error), for the view's own area.
    pub fn stderr_line(&mut self, line: &str) {
        keep(&mut self.stderr, line);
    }

    /// Folds one note in.
    pub fn apply(&mut self, note: &Note, now: Instant) {
        if let Some(text) = &note.text {
            keep(&mut self.events, text);
        }
        match &note.event {
            Event::Relay { url } => self.relay = Some(url.clone()),
            Event::Confinement {
                layers, complete, ..
            } => {
                self.confinement = Some(if *complete {
                    layers.clone()
                } else {
                    format!("{layers} (INCOMPLETE)")
                });
            }
            Event::Ready { .. } => self.phase = Phase::Running,
            Event::Intake { depth, lag_ms } => {
                (self.intake.depth, self.intake.lag_ms) = (*depth, *lag_ms);
            }
            Event::Behind { depth, lag_ms } => {
                self.intake = Intake {
                    depth: *depth,
                    lag_ms: *lag_ms,
                    behind: true,
                };
            }
            Event::CaughtUp { .. } => self.intake.behind = false,
            Event::Stopping => self.phase = Phase::Stopping,
            Event::Stopped { .. } => {
                self.phase = Phase::Stopped;
                for row in &mut self.rows {
                    if row.agent != Agent::Failed {
                        row.agent = Agent::Stopped;
                    }
                }
            }
            Event::Message { .. } => {
                self.messages += 1;
                self.last_message = Some(now);
            }
            Event::PersonaReady { pack, .. } if !self.packs.contains(pack) => {
                self.packs.push(pack.clone());
            }
            _ => {}
        }
        let Some(persona) = note.event.persona().filter(|p| !p.is_empty()) else {
            return;
        };
        self.row_mut(persona).apply(&note.event, now);
    }
}

/// A count in at most 5 columns: `999`, `12k`, `3M`.
fn short(n: u64) -> String {
    match n {
        0..=9_999 => n.to_string(),
        10_000..=9_999_999 => format!("{}k", n / 1000),
        _ => format!("{}M", n / 1_000_000),
    }
}

impl Row {
    /// Folds in an event about this row's persona.
    fn apply(&mut self, event: &Event, now: Instant) {
        self.last = Some((event.kind(), now));
        match event {
            Event::PersonaReady { .. } => self.agent = Agent::Ready,
            Event::PersonaRefused { .. } => self.agent = Agent::Failed,
            // Its pack was uninstalled or upgraded (a new version says `persona_ready` again).
            Event::PersonaStopped { .. } => self.agent = Agent::Stopped,
            Event::Woken { id, .. } => {
                self.wakes += 1;
                self.woken(id);
            }
            Event::Skipped { .. } => self.skips += 1,
            Event::Batch { id, with, .. } => {
                for w in with {
                    self.woken(w);
                }
                self.batches.insert(id.clone(), with.clone());
            }
            Event::Prompt { id, .. } => self.in_flight(id, true),
            Event::HookRan { .. } => self.hook_runs += 1,
            Event::Dropped { id, .. } => {
                self.hook_drops += 1;
                self.finish(id);
            }
            Event::Crashed { id, .. } => {
                // The turn goes back to waiting; it is retried once the agent is back.
                self.agent = Agent::Restarting;
                self.in_flight(id, false);
            }
            Event::Restarted { .. } => self.agent = Agent::Ready,
            // Over a flood limit: a dropped message leaves the queue; a coalesced one stays
            // until the turn that answers it.
            Event::Limited {
                id,
                action,
                limit,
                allowed,
                used,
                ..
            } if action == "dropped" => {
                // Over a spending limit: the column shows it full.
                if let (Some(used), Some(allowed)) = (used, allowed) {
                    self.limit = Some((limit.clone(), *used, *allowed));
                }
                self.finish(id.as_deref().unwrap_or_default())
            }
            Event::Turn { id, .. } => self.finish(id),
            Event::Budget {
                limit,
                used,
                allowed,
                ..
            } => self.limit = Some((limit.clone(), *used, *allowed)),
            // Another replica answered it: it leaves the queue unanswered here.
            Event::AnsweredElsewhere { id, .. } => {
                self.skips += 1;
                self.finish(id);
            }
            Event::Reply { to, .. } => {
                self.replies += 1;
                self.finish(to);
            }
            Event::Error { id, .. } => {
                self.errors += 1;
                // A restart that failed (circuit open, or the agent would not come back).
                if self.agent == Agent::Restarting {
                    self.agent = Agent::Failed;
                }
                self.finish(id.as_deref().unwrap_or_default());
            }
            _ => {}
        }
    }
}

/// Lines of the view, each at most `width` columns, at most `height` lines, the table first and as
/// many of the latest log lines as fit (at most `log_max`) under it.
pub fn render(
    status: &Status,
    now: Instant,
    width: usize,
    height: usize,
    log_max: usize,
) -> Vec<String> {
    let mut lines = summary(status, now).to_vec();
    lines.push(String::new());
    table(&mut lines, status, now, height);
    let mut lines: Vec<String> = lines.iter().map(|l| fit(l, width)).collect();
    // The events first; stderr (logs) gets a third of the room when it has something to say.
    let room = height.saturating_sub(lines.len()).min(log_max + 4);
    let stderr_room = match status.stderr.is_empty() {
        true => 0,
        false => (room / 3).max(3).min(room),
    };
    area(
        &mut lines,
        "events:",
        &status.events,
        room - stderr_room,
        width,
    );
    area(
        &mut lines,
        "log (stderr):",
        &status.stderr,
        stderr_room,
        width,
    );
    lines.truncate(height);
    lines
}

/// Keeps `line` (each of its lines) at the end of `log`, forgetting the oldest past [`LOG_KEEP`].
fn keep(log: &mut VecDeque<String>, line: &str) {
    for l in line.lines() {
        log.push_back(l.to_string());
    }
    while log.len() > LOG_KEEP {
        log.pop_front();
    }
}

/// A blank line, `title`, then as many of the newest `log` lines as fit in `room` lines in all,
/// each wrapped to `width` (never cut: a long path or error is read whole).
fn area(lines: &mut Vec<String>, title: &str, log: &VecDeque<String>, room: usize, width: usize) {
    if room < 3 || log.is_empty() {
        return;
    }
    // Newest first until the room is used, then put back in reading order.
    let mut newest_first: Vec<Vec<String>> = Vec::new();
    let mut used = 0;
    for entry in log.iter().rev() {
        let wrapped = wrap(entry, width, 2, 4);
        used += wrapped.len();
        if used > room - 2 {
            break;
        }
        newest_first.push(wrapped);
    }
    if newest_first.is_empty() {
        return;
    }
    lines.push(String::new());
    lines.push(fit(title, width));
    lines.extend(newest_first.into_iter().rev().flatten());
}

/// `text` made safe (as [`fit`]) and broken into lines of at most `width` columns: the first
/// indented by `first`, the rest by `rest`.
pub fn wrap(text: &str, width: usize, first: usize, rest: usize) -> Vec<String> {
    let clean = sanitize(text);
    let mut out = Vec::new();
    let mut line = " ".repeat(first);
    let mut used = first;
    for c in clean.chars() {
        let w = c.width().unwrap_or(0);
        if used + w > width && used > rest {
            out.push(std::mem::replace(&mut line, " ".repeat(rest)));
            used = rest;
        }
        line.push(c);
        used += w;
    }
    out.push(line);
    out.into_iter().map(|l| fit(&l, width)).collect()
}

/// The harness's two lines: phase, relay, packs and uptime; then personas and message counts.
fn summary(status: &Status, now: Instant) -> [String; 2] {
    let packs = if status.packs.is_empty() {
        "-".to_string()
    } else {
        status.packs.join(", ")
    };
    let ready = status
        .rows
        .iter()
        .filter(|r| matches!(r.agent, Agent::Ready))
        .count();
    let sum = |f: fn(&Row) -> u64| status.rows.iter().map(f).sum::<u64>();
    [
        format!(
            "apiary up  {}  relay {}  pack {}  agents confined {}  up {}",
            status.phase.label(),
            status.relay.as_deref().unwrap_or("-"),
            packs,
            status.confinement.as_deref().unwrap_or("-"),
            duration(now.saturating_duration_since(status.started)),
        ),
        format!(
            "personas {ready}/{} ready  messages {}{}  queued {}{}  replies {}  errors {}",
            status.rows.len(),
            status.messages,
            status
                .last_message
                .map(|t| format!(" (last {} ago)", duration(now.saturating_duration_since(t))))
                .unwrap_or_default(),
            status.rows.iter().map(Row::queue).sum::<usize>(),
            intake_label(status.intake),
            sum(|r| r.replies),
            sum(|r| r.errors),
        ),
    ]
}

/// What waits for routing, when anything does: `  intake 12 (lag 40 ms)`, `BEHIND` while the
/// harness is behind the relay.
fn intake_label(intake: Intake) -> String {
    let behind = if intake.behind { " BEHIND" } else { "" };
    if intake.depth == 0 && intake.lag_ms == 0 && !intake.behind {
        return String::new();
    }
    format!(
        "  intake {} (lag {} ms){behind}",
        intake.depth, intake.lag_ms
    )
}

/// The persona table under `lines`: a header, then the rows that fit in `height` lines in all (the
/// rest as a count).
/// The LIMIT column's width: `9999/9999tok`.
const LIMIT_W: usize = 12;

fn table(lines: &mut Vec<String>, status: &Status, now: Instant, height: usize) {
    let name_w = status
        .rows
        .iter()
        .map(|r| text_width(&r.name))
        .max()
        .unwrap_or(0)
        .clamp("PERSONA".len(), NAME_MAX);
    let numbers = ["QUEUE", "WAKE", "SKIP", "HOOK", "DROP", "REPLY", "ERR"];
    let mut header = format!("{:<name_w$}  {:<10}", "PERSONA", "STATE");
    for n in numbers {
        header.push_str(&format!("  {n:>5}"));
    }
    header.push_str(&format!("  {:>LIMIT_W$}  LAST", "LIMIT"));
    lines.push(header);
    // Rows that do not fit the height give way to a count of the rest.
    let room = height.saturating_sub(lines.len());
    let shown = if status.rows.len() > room {
        room.saturating_sub(1)
    } else {
        status.rows.len()
    };
    for row in &status.rows[..shown] {
        lines.push(table_row(row, name_w, now));
    }
    if shown < status.rows.len() {
        lines.push(format!("… {} more personas", status.rows.len() - shown));
    }
}

fn table_row(row: &Row, name_w: usize, now: Instant) -> String {
    let name = fit(&row.name, name_w);
    let pad = name_w.saturating_sub(text_width(&name));
    let mut line = format!("{name}{}  {:<10}", " ".repeat(pad), row.state());
    let values = [
        row.queue() as u64,
        row.wakes,
        row.skips,
        row.hook_runs,
        row.hook_drops,
        row.replies,
        row.errors,
    ];
    for v in values {
        line.push_str(&format!("  {v:>5}"));
    }
    line.push_str(&format!("  {:>LIMIT_W$}", row.limit()));
    match row.last {
        Some((kind, at)) => line.push_str(&format!(
            "  {kind} {} ago",
            duration(now.saturating_duration_since(at))
        )),
        None => line.push_str("  -"),
    }
    line
}

/// `text` made safe for the terminal (escape sequences and control characters removed: persona
/// names, channel names and error texts come from packs, relays and agents) and cut to `width`
/// columns, with `…` marking the cut. Never wraps.
pub fn fit(text: &str, width: usize) -> String {
    let clean = sanitize(text);
    if text_width(&clean) <= width {
        return clean;
    }
    let mut out = String::new();
    let mut used = 0;
    let budget = width.saturating_sub(1);
    for c in clean.chars() {
        let w = c.width().unwrap_or(0);
        if used + w > budget {
            break;
        }
        used += w;
        out.push(c);
    }
    if width > 0 {
        out.push('…');
    }
    out
}

/// Display columns of `text` (wide characters count two).
pub fn text_width(text: &str) -> usize {
    text.chars().map(|c| c.width().unwrap_or(0)).sum()
}

/// Drops ANSI escape sequences (CSI and two-character ones) and every other control character;
/// a tab becomes a space.
fn sanitize(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\t' => out.push(' '),
            '\u{1b}' => match chars.next() {
                // CSI: parameters and intermediates up to a final byte in @..~.
                Some('[') => {
                    for c in chars.by_ref() {
                        if ('@'..='~').contains(&c) {
                            break;
                        }
                    }
                }
                // OSC and other strings up to BEL or ST.
                Some(']' | 'P' | '_' | '^') => {
                    while let Some(c) = chars.next() {
                        if c == '\u{7}' || (c == '\u{1b}' && chars.next_if_eq(&'\\').is_some()) {
                            break;
                        }
                    }
                }
                _ => {}
            },
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

/// `12s`, `4m05s`, `2h13m`, `3d04h`.
fn duration(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        3600..86400 => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
        _ => format!("{}d{:02}h", s / 86400, s % 86400 / 3600),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn st(text: &str) -> String {
        text.to_string()
    }

    fn q(event: Event) -> Note {
        Note::only_json(event)
    }

    fn woken(persona: &str, id: &str) -> Note {
        q(Event::Woken {
            persona: st(persona),
            channel: st("general"),
            id: st(id),
            reason: st("mention"),
        })
    }

    fn skipped(persona: &str, id: &str) -> Note {
        q(Event::Skipped {
            persona: st(persona),
            channel: st("general"),
            id: st(id),
            reason: st("no trigger matched"),
        })
    }

    fn prompt(persona: &str, id: &str) -> Note {
        q(Event::Prompt {
            persona: st(persona),
            channel: st("general"),
            id: st(id),
            session: st("s1"),
            attempt: 1,
            batch: 1,
        })
    }

    fn reply(persona: &str, id: &str, to: &str) -> Note {
        q(Event::Reply {
            persona: st(persona),
            channel: st("general"),
            id: st(id),
            to: st(to),
            thread: None,
        })
    }

    fn turn(persona: &str, id: &str) -> Note {
        q(Event::Turn {
            persona: st(persona),
            channel: st("general"),
            id: st(id),
            published: false,
            bytes: None,
            reason: st("no text (end_turn)"),
        })
    }

    fn crashed(persona: &str, id: &str) -> Note {
        q(Event::Crashed {
            persona: st(persona),
            channel: st("general"),
            id: st(id),
            attempt: 1,
        })
    }

    fn hook_ran(persona: &str, id: &str, kept: bool) -> Note {
        q(Event::HookRan {
            persona: st(persona),
            channel: st("general"),
            id: st(id),
            hook: st("on_message"),
            kept,
        })
    }

    fn limited(id: &str, action: &str, limit: &str, spent: Option<(u64, u64)>) -> Note {
        q(Event::Limited {
            persona: st("bee"),
            channel: Some(st("general")),
            channel_id: None,
            id: Some(st(id)),
            author: None,
            limit: st(limit),
            action: st(action),
            used: spent.map(|(used, _)| used),
            allowed: spent.map(|(_, allowed)| allowed),
            turns: None,
            per_secs: None,
            count: None,
        })
    }

    fn error(persona: &str, id: &str, breaker_open: bool) -> Note {
        q(Event::Error {
            persona: Some(st(persona)),
            channel: Some(st("general")),
            id: Some(st(id)),
            reason: st("circuit open: ..."),
            breaker_open,
            data: None,
            stderr: vec![],
        })
    }

    fn ready(persona: &str) -> Note {
        Note::new(
            Event::PersonaReady {
                confinement: st("files"),
                persona: st(persona),
                pack: st("com.example.hello"),
                identity: st("com.example.hello"),
                pubkey: st("00"),
                channels: vec![st("general")],
                system_prompt: st("session"),
            },
            format!("persona {persona} ready"),
        )
    }

    fn running(now: Instant) -> Status {
        let mut s = Status::new(now);
        s.seed("com.example.hello", "bee");
        s.seed("com.example.hello", "sage");
        let url = "ws://127.0.0.1:4869".to_string();
        s.apply(
            &Note::new(Event::Relay { url }, "relay ws://127.0.0.1:4869"),
            now,
        );
        for p in ["bee", "sage"] {
            s.apply(&ready(p), now);
        }
        let ready = Event::Ready {
            personas: 2,
            channels: 1,
        };
        s.apply(&Note::new(ready, "ready personas=2 channels=1"), now);
        s
    }

    #[test]
    fn seeded_personas_start_then_become_ready() {
        let now = Instant::now();
        let mut s = Status::new(now);
        s.seed("p", "bee");
        assert_eq!(s.row("bee").unwrap().state(), "starting");
        assert_eq!(s.phase(), Phase::Starting);
        let s = running(now);
        assert_eq!(s.row("bee").unwrap().state(), "ready");
        assert_eq!(s.phase(), Phase::Running);
        assert_eq!(s.packs, vec!["com.example.hello".to_string()]);
        assert_eq!(s.relay.as_deref(), Some("ws://127.0.0.1:4869"));
    }

    #[test]
    fn queue_depth_rises_and_falls_through_a_turn() {
        let now = Instant::now();
        let mut s = running(now);
        s.apply(&woken("bee", "a"), now);
        s.apply(&woken("bee", "b"), now);
        s.apply(&skipped("sage", "a"), now);
        let bee = s.row("bee").unwrap();
        assert_eq!((bee.queue(), bee.wakes, bee.state()), (2, 2, "ready"));
        assert_eq!(s.row("sage").unwrap().skips, 1);

        s.apply(&prompt("bee", "a"), now);
        assert_eq!(s.row("bee").unwrap().state(), "busy");
        s.apply(&reply("bee", "r1", "a"), now);
        let bee = s.row("bee").unwrap();
        assert_eq!((bee.queue(), bee.replies, bee.state()), (1, 1, "ready"));

        // The worker's notes can overtake the dispatch loop's `woken`: counted once.
        s.apply(&prompt("bee", "c"), now);
        s.apply(&turn("bee", "c"), now);
        s.apply(&woken("bee", "c"), now);
        assert_eq!(s.row("bee").unwrap().queue(), 1);

        // A batch: one turn answers b and d.
        s.apply(&woken("bee", "d"), now);
        s.apply(
            &q(Event::Batch {
                persona: st("bee"),
                channel: st("general"),
                id: st("d"),
                with: vec![st("b")],
            }),
            now,
        );
        s.apply(&prompt("bee", "d"), now);
        assert_eq!(s.row("bee").unwrap().queue(), 2);
        s.apply(&reply("bee", "r2", "d"), now);
        let bee = s.row("bee").unwrap();
        assert_eq!((bee.queue(), bee.replies, bee.state()), (0, 2, "ready"));
    }

    #[test]
    fn a_crash_shows_restarting_then_ready_then_busy_again() {
        let now = Instant::now();
        let mut s = running(now);
        s.apply(&woken("bee", "a"), now);
        s.apply(&prompt("bee", "a"), now);
        s.apply(&crashed("bee", "a"), now);
        assert_eq!(s.row("bee").unwrap().state(), "restarting");
        assert_eq!(s.row("bee").unwrap().queue(), 1);
        let restarted = Event::Restarted {
            persona: st("bee"),
            restart: 1,
            window_secs: 300,
        };
        s.apply(&Note::new(restarted, "restarted bee agent"), now);
        assert_eq!(s.row("bee").unwrap().state(), "ready");
        s.apply(&prompt("bee", "a"), now);
        assert_eq!(s.row("bee").unwrap().state(), "busy");
        s.apply(&reply("bee", "r", "a"), now);
        let bee = s.row("bee").unwrap();
        assert_eq!((bee.state(), bee.queue(), bee.replies), ("ready", 0, 1));
    }

    #[test]
    fn a_failed_restart_and_a_refusal_show_failed() {
        let now = Instant::now();
        let mut s = running(now);
        s.apply(&prompt("bee", "a"), now);
        s.apply(&crashed("bee", "a"), now);
        s.apply(&error("bee", "a", true), now);
        let bee = s.row("bee").unwrap();
        assert_eq!((bee.state(), bee.errors, bee.queue()), ("failed", 1, 0));
        let refused = Event::PersonaRefused {
            persona: st("wasp"),
            reason: st("x"),
            data: None,
            stderr: vec![],
        };
        s.apply(&Note::new(refused, "persona wasp refused: x"), now);
        assert_eq!(s.row("wasp").unwrap().state(), "failed");
        s.apply(
            &Note::new(Event::Stopped { replies: 0 }, "stopped replies=0"),
            now,
        );
        assert_eq!(s.row("sage").unwrap().state(), "stopped");
        assert_eq!(s.row("wasp").unwrap().state(), "failed");
        assert_eq!(s.phase(), Phase::Stopped);
    }

    #[test]
    fn hook_runs_and_drops_are_counted() {
        let now = Instant::now();
        let mut s = running(now);
        s.apply(&woken("bee", "a"), now);
        s.apply(&woken("bee", "b"), now);
        s.apply(&hook_ran("bee", "a", false), now);
        let dropped = Event::Dropped {
            persona: st("bee"),
            channel: st("general"),
            id: st("a"),
            hook: st("on_message"),
            reason: st("no"),
        };
        s.apply(&Note::new(dropped, "dropped bee a: on_message: no"), now);
        s.apply(&hook_ran("bee", "b", true), now);
        let bee = s.row("bee").unwrap();
        assert_eq!((bee.hook_runs, bee.hook_drops, bee.queue()), (2, 1, 1));
        assert_eq!(s.events.back().unwrap(), "dropped bee a: on_message: no");
    }

    #[test]
    fn a_message_over_a_flood_limit_leaves_the_queue_only_when_dropped() {
        let now = Instant::now();
        let mut s = running(now);
        s.apply(&woken("bee", "a"), now);
        s.apply(&woken("bee", "b"), now);
        s.apply(&limited("a", "coalesced", "author", None), now);
        assert_eq!(s.row("bee").unwrap().queue(), 2);
        s.apply(&limited("b", "dropped", "author", None), now);
        assert_eq!(s.row("bee").unwrap().queue(), 1);
    }

    #[test]
    fn the_limits_column_shows_the_tightest_spending_limit_used_of_allowed() {
        let now = Instant::now();
        let mut s = running(now);
        assert_eq!(s.row("bee").unwrap().limit(), "-");
        let budget = |limit: &str, used: u64, allowed: u64| {
            q(Event::Budget {
                persona: st("bee"),
                channel: st("general"),
                limit: st(limit),
                used,
                allowed,
            })
        };
        s.apply(&budget("turns_per_hour", 3, 20), now);
        assert_eq!(s.row("bee").unwrap().limit(), "3/20h");
        s.apply(&budget("tokens_per_day", 420_000, 500_000), now);
        assert_eq!(s.row("bee").unwrap().limit(), "420k/500ktok");
        // Tripped: the `limited` note carries what was used of what is allowed.
        let tripped = limited("c", "dropped", "turns_per_day", Some((200, 200)));
        s.apply(&tripped, now);
        assert_eq!(s.row("bee").unwrap().limit(), "200/200d");
        // A flood limit's note names no spending limit: the column keeps what it had.
        s.apply(&limited("d", "dropped", "author", None), now);
        assert_eq!(s.row("bee").unwrap().limit(), "200/200d");
        let table = render(&s, now, 200, 40, 0).join("\n");
        assert!(
            table.contains("LIMIT") && table.contains("200/200d"),
            "{table}"
        );
    }

    #[test]
    fn render_shows_the_rows_and_the_log() {
        let start = Instant::now();
        let mut s = running(start);
        s.apply(&woken("bee", "a"), start);
        s.apply(&prompt("bee", "a"), start);
        let mut answered = reply("bee", "r", "a");
        answered.text = Some("reply bee r to a".into());
        s.apply(&answered, start);
        let lines = render(&s, start + Duration::from_secs(75), 200, 40, 5);
        let text = lines.join("\n");
        assert!(lines[0].contains("relay ws://127.0.0.1:4869"), "{text}");
        assert!(lines[0].contains("up 1m15s"), "{text}");
        let header: Vec<&str> = lines[3].split_whitespace().collect();
        let bee: Vec<&str> = lines[4].split_whitespace().collect();
        let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
        assert_eq!(bee[0], "bee");
        assert_eq!(bee[col("STATE")], "ready");
        assert_eq!(bee[col("REPLY")], "1");
        assert_eq!(bee[col("WAKE")], "1");
        assert_eq!(bee[col("LIMIT")], "-", "no spending limits");
        assert!(lines[4].ends_with("reply 1m15s ago"), "{text}");
        assert!(text.contains("  reply bee r to a"), "{text}");
    }

    #[test]
    fn the_header_says_what_waits_for_routing_and_when_the_harness_is_behind() {
        let now = Instant::now();
        let mut s = running(now);
        assert!(!summary(&s, now)[1].contains("intake"), "nothing waits");
        let behind = Event::Behind {
            depth: 4100,
            lag_ms: 730,
        };
        s.apply(&Note::new(behind, "behind: …"), now);
        assert!(
            summary(&s, now)[1].contains("intake 4100 (lag 730 ms) BEHIND"),
            "{:?}",
            summary(&s, now)
        );
        s.apply(
            &Note::only_json(Event::Intake {
                depth: 0,
                lag_ms: 3,
            }),
            now,
        );
        s.apply(&Note::new(Event::CaughtUp { lag_ms: 3 }, "caught up"), now);
        assert_eq!(
            s.intake(),
            Intake {
                depth: 0,
                lag_ms: 3,
                behind: false
            }
        );
        assert!(summary(&s, now)[1].contains("intake 0 (lag 3 ms)"));
        assert!(!summary(&s, now)[1].contains("BEHIND"));
    }

    #[test]
    fn render_never_exceeds_the_width_or_the_height() {
        let now = Instant::now();
        let mut s = running(now);
        s.seed(
            "p",
            "蜂蜂蜂蜂蜂蜂蜂蜂蜂蜂蜂蜂蜂蜂蜂蜂-a-very-long-wide-name",
        );
        for i in 0..30 {
            s.seed("p", &format!("worker-{i}"));
            s.stderr_line(&format!(
                "log {i} from somebody with a long line of text 蜂蜜"
            ));
        }
        for width in [0, 1, 2, 10, 40, 79, 80, 132] {
            for height in [0, 1, 3, 6, 24, 60] {
                let lines = render(&s, now, width, height, 8);
                assert!(lines.len() <= height, "{width}x{height}: {lines:#?}");
                for l in &lines {
                    assert!(text_width(l) <= width, "{width}x{height}: {l:?}");
                }
            }
        }
        // A short screen keeps the header and says how many personas it left out.
        let lines = render(&s, now, 80, 10, 8);
        assert!(
            lines.last().unwrap().contains("more personas"),
            "{lines:#?}"
        );
    }

    #[test]
    fn long_lines_wrap_whole_and_logs_stay_apart_from_events() {
        let now = Instant::now();
        let mut s = running(now);
        let path = format!("/very/long/{}/path/to/the/file.md", "x".repeat(90));
        let mut note = reply("bee", "r", "a");
        note.text = Some(format!("reply bee wrote {path}"));
        s.apply(&note, now);
        s.stderr_line("2026-12-07T14:00:00Z  INFO apiary: embedded relay listening");
        let lines = render(&s, now, 60, 40, 8);
        let text = lines.join("\n");
        assert!(lines.iter().all(|l| text_width(l) <= 60), "{text}");
        let events = lines
            .iter()
            .position(|l| l == "events:")
            .expect("an events area");
        let logs = lines
            .iter()
            .position(|l| l == "log (stderr):")
            .expect("a log area");
        assert!(events < logs, "{text}");
        let joined: String = lines[events + 1..logs]
            .iter()
            .map(|l| l.trim_start())
            .collect();
        assert!(
            joined.contains(&path),
            "the path is shown whole, over lines: {text}"
        );
        assert!(
            !lines[events + 1..logs].iter().any(|l| l.contains("INFO")),
            "{text}"
        );
        assert!(lines[logs + 1].contains("INFO apiary"), "{text}");
    }

    #[test]
    fn hostile_text_cannot_drive_the_terminal() {
        let now = Instant::now();
        let mut s = running(now);
        let evil = "b\u{1b}[2J\u{1b}]0;title\u{7}ee\r\n\u{9b}x\u{7}";
        s.apply(&woken(evil, "a"), now);
        s.stderr_line("\u{1b}[31mred\u{1b}[0m warning\tafter a tab");
        let lines = render(&s, now, 120, 40, 5);
        for l in &lines {
            assert!(!l.chars().any(char::is_control), "{l:?}");
        }
        let text = lines.join("\n");
        assert!(text.contains("beex"), "{text}");
        assert!(text.contains("red warning after a tab"), "{text}");
        assert_eq!(fit("abcdef", 4), "abc…");
        assert_eq!(fit("蜂蜂蜂", 4), "蜂…");
        assert_eq!(fit("abc", 0), "");
    }
}
