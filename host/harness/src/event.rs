//! What the harness reports: one typed [`Event`] per thing that happened, carried in a [`Note`]
//! with its plain line. `apiary up` prints the line (the default) or, with `--json`, the event as
//! one JSON object per line whose `event` key names the kind (as cargo's machine messages carry a
//! `reason` and a `rendered` text). The status view and `/metrics` match on the variants; nothing
//! reads an event's text. `docs/reference/events.md` is generated from this type.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One thing the harness did or saw. Keys absent from a line are absent because they do not
/// apply (an `error` outside any persona has no `persona`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, strum::IntoStaticStr)]
#[serde(tag = "event", rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum Event {
    /// The relay `up` uses (its own embedded one unless `--relay` names another).
    Relay { url: String },
    /// Nothing is installed: `up` runs the bundled example pack, kept at `path`.
    Example { path: String },
    /// Whose channel metadata (kind 39000) maps channel names to group ids: the relay's key,
    /// and the keys `--channel-authority` adds.
    ChannelAuthority {
        relay: Option<String>,
        configured: Vec<String>,
    },
    /// The ops endpoints (`/healthz`, `/readyz`, `/metrics`, agent cards) listen here.
    Ops { url: String },
    /// The A2A server listens: each persona at `<url>/a2a/<pack-id>/<name>`.
    A2a { url: String },
    /// A turn asked for over A2A (`up --a2a-addr`) ended: `outcome` is the agent's stop reason
    /// (`end_turn`, …) or `failed`.
    A2aTurn {
        persona: String,
        pack: String,
        context: String,
        outcome: String,
    },
    /// The embedded relay's port also serves a Blossom blob server (`--blobs`) at this URL.
    Blobs { url: String },
    /// What confines the agents on this machine; `missing` says what is not enforced and why.
    Confinement {
        layers: String,
        complete: bool,
        missing: Option<String>,
    },
    /// Something of a pack the operator has not trusted was not run or not handed to the agent
    /// (`kind`: `hook` or `mcp_server`).
    Untrusted {
        persona: String,
        pack: String,
        kind: String,
        name: String,
        command: String,
        reason: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        help: Option<String>,
    },
    /// A hook component is being compiled (it was not in the compile cache).
    Compiling {
        pack: String,
        hook: String,
        bytes: u64,
        deadline_secs: u64,
    },
    /// The embedded relay's storage passed 80% full.
    RelayStorage {
        percent: u64,
        events: u64,
        bytes: u64,
    },
    /// A persona of another replica (`--shard`): its messages are not answered here.
    PersonaElsewhere {
        persona: String,
        pack: String,
        shard: Option<u32>,
    },
    /// Two packs run personas of one name.
    NameShared {
        persona: String,
        pack: String,
        reason: String,
    },
    /// A persona started: its key, channels, and how it gets its system prompt (`session` or
    /// `prefix`).
    PersonaReady {
        confinement: String,
        persona: String,
        pack: String,
        identity: String,
        pubkey: String,
        channels: Vec<String>,
        system_prompt: String,
    },
    /// A persona did not start; the others run. `data` and `stderr` are what its agent said.
    PersonaRefused {
        persona: String,
        reason: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        data: Option<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        stderr: Vec<String>,
    },
    /// Every persona that could start did; the harness takes messages.
    Ready { personas: usize, channels: usize },
    /// Events the relay has and routing has not taken yet (`depth`), and the longest one of the
    /// last second waited for routing (`lag_ms`; measured with the embedded relay, 0 with
    /// another). Sent every second while anything waits (or waited 10 ms or more), and once more
    /// when nothing does.
    Intake { depth: u64, lag_ms: u64 },
    /// Routing fell behind the relay (an event waited 500 ms or more, or 2,000 events wait):
    /// more messages arrive than this machine answers. Repeated every 10 s while it lasts.
    Behind { depth: u64, lag_ms: u64 },
    /// Routing keeps up with the relay again after `behind`.
    CaughtUp { lag_ms: u64 },
    /// A chat message arrived; `woke` lists the personas it woke, each with why.
    Message {
        id: String,
        channel: String,
        channel_id: String,
        author: String,
        thread: Option<String>,
        #[serde(default)]
        woke: Vec<String>,
    },
    /// A persona's trigger matched the message and it was queued (`reason`: the trigger).
    Woken {
        persona: String,
        channel: String,
        id: String,
        reason: String,
    },
    /// A persona did not take the message, and why.
    Skipped {
        persona: String,
        channel: String,
        id: String,
        reason: String,
    },
    /// A persona's message that the triggers chose `persona` for, which the handoff rules keep
    /// asleep (see the harness's `team` module): `stop` is `self`, `not-allowed` or `hop-limit`.
    HandoffStopped {
        persona: String,
        /// The author, `pack/name`.
        from: String,
        channel: String,
        id: String,
        hop: u32,
        limit: u32,
        stop: String,
        reason: String,
    },
    /// A call of one of apiary's own tools by a persona's agent (over MCP), and how it ended.
    ApiaryTool {
        persona: String,
        tool: String,
        ok: bool,
        /// Why it was refused.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// A message a persona's agent posted through apiary's `post` tool.
    Posted {
        persona: String,
        channel: String,
        id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        thread: Option<String>,
        hop: u32,
    },
    /// Messages taken into one turn with the newest (`with`: the others' ids).
    Batch {
        persona: String,
        channel: String,
        id: String,
        with: Vec<String>,
    },
    /// A flood or spending limit held back (`coalesced`) or dropped a message.
    Limited {
        persona: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        channel: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        channel_id: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        author: Option<String>,
        /// `author`, `channel`, `queue`, `reload`, or a spending limit (`turns_per_hour`, …).
        limit: String,
        /// `coalesced` or `dropped`.
        action: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        allowed: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        used: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        turns: Option<u32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        per_secs: Option<u64>,
        /// Messages dropped at once (a reload).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        count: Option<usize>,
    },
    /// The persona's spending limit closest to tripping.
    Budget {
        persona: String,
        channel: String,
        limit: String,
        used: u64,
        allowed: u64,
    },
    /// A hook ran on a message; `kept: false` drops it.
    HookRan {
        persona: String,
        channel: String,
        id: String,
        hook: String,
        kept: bool,
    },
    /// A hook dropped the message.
    Dropped {
        persona: String,
        channel: String,
        id: String,
        hook: String,
        reason: String,
    },
    /// A prompt went to the agent (`attempt` 2 after a crash; `batch`: messages in it).
    Prompt {
        persona: String,
        channel: String,
        id: String,
        session: String,
        attempt: u32,
        batch: usize,
    },
    /// The agent exited during a turn; it is restarted and the prompt retried.
    Crashed {
        persona: String,
        channel: String,
        id: String,
        attempt: u32,
    },
    /// A persona's agent was restarted (`restart`: how many within `window_secs`).
    Restarted {
        persona: String,
        restart: u32,
        window_secs: u64,
    },
    /// A turn ended without a published reply, and why.
    Turn {
        persona: String,
        channel: String,
        id: String,
        published: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        bytes: Option<usize>,
        reason: String,
    },
    /// The reply contained a secret (`found`: which kinds); it was published with them replaced.
    Redacted {
        persona: String,
        channel: String,
        id: String,
        found: Vec<String>,
    },
    /// Another replica already answered the message (`stage`: checked before the `turn` or
    /// before `publish`).
    AnsweredElsewhere {
        persona: String,
        channel: String,
        id: String,
        reply: String,
        stage: String,
    },
    /// A reply was published: its `id`, the message it answers (`to`), its thread root.
    Reply {
        persona: String,
        channel: String,
        id: String,
        to: String,
        thread: Option<String>,
    },
    /// Something failed: a turn, a publish, routing one message. `breaker_open`: the persona's
    /// agent crashed too often and is not restarted for now.
    Error {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        persona: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        channel: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        reason: String,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        breaker_open: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        data: Option<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        stderr: Vec<String>,
    },
    /// The agent asked to use a tool and was answered (`decided_by`: `tool-policy`,
    /// `apiary-tools` or `permission`).
    Permission {
        persona: String,
        session: String,
        tool: Option<String>,
        kind: Option<String>,
        title: Option<String>,
        allowed: bool,
        decided_by: String,
        reason: Option<String>,
    },
    /// A tool call started or changed status.
    ToolCall {
        persona: String,
        session: String,
        call: String,
        tool: Option<String>,
        kind: Option<String>,
        title: Option<String>,
        status: Option<String>,
    },
    /// The agent's plan: how many entries, how many completed.
    Plan {
        persona: String,
        session: String,
        entries: usize,
        completed: usize,
    },
    /// Context usage the agent reports: tokens in use, the window, the cost.
    Usage {
        persona: String,
        session: String,
        used: u64,
        size: u64,
        cost: Option<Cost>,
    },
    /// A confined agent's connection was refused (`route`: how it tried).
    EgressRefused {
        persona: String,
        route: String,
        target: String,
        reason: String,
    },
    /// An installed pack changed and was reloaded (`action`: `installed`, `upgraded` or
    /// `uninstalled`).
    Reloaded {
        pack: String,
        action: String,
        from: Option<String>,
        to: Option<String>,
        personas: Vec<String>,
        stopped: Vec<String>,
    },
    /// A new version of a pack did not load (or only partly); what of it runs is kept.
    ReloadFailed {
        pack: String,
        version: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        refused: Option<Vec<String>>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        kept: Option<Vec<String>>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        running: Option<bool>,
        reason: String,
    },
    /// A persona stopped (its pack was upgraded or uninstalled).
    PersonaStopped { persona: String, pack: String },
    /// Shutting down: queues drain.
    Stopping,
    /// The harness stopped; how many replies it published.
    Stopped { replies: u64 },
}

/// What a turn cost, as the agent reports it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Cost {
    pub amount: f64,
    pub currency: String,
}

impl Event {
    /// The `event` key.
    pub fn kind(&self) -> &'static str {
        self.into()
    }

    /// The persona the event is about, if one.
    pub fn persona(&self) -> Option<&str> {
        use Event as E;
        match self {
            E::Untrusted { persona, .. }
            | E::PersonaElsewhere { persona, .. }
            | E::NameShared { persona, .. }
            | E::PersonaReady { persona, .. }
            | E::PersonaRefused { persona, .. }
            | E::Woken { persona, .. }
            | E::Skipped { persona, .. }
            | E::HandoffStopped { persona, .. }
            | E::ApiaryTool { persona, .. }
            | E::Posted { persona, .. }
            | E::Batch { persona, .. }
            | E::Limited { persona, .. }
            | E::Budget { persona, .. }
            | E::HookRan { persona, .. }
            | E::Dropped { persona, .. }
            | E::Prompt { persona, .. }
            | E::Crashed { persona, .. }
            | E::Restarted { persona, .. }
            | E::Turn { persona, .. }
            | E::Redacted { persona, .. }
            | E::AnsweredElsewhere { persona, .. }
            | E::Reply { persona, .. }
            | E::Permission { persona, .. }
            | E::ToolCall { persona, .. }
            | E::Plan { persona, .. }
            | E::Usage { persona, .. }
            | E::EgressRefused { persona, .. }
            | E::PersonaStopped { persona, .. } => Some(persona),
            E::Error { persona, .. } => persona.as_deref(),
            _ => None,
        }
    }

    /// The pack the event names, if it names one.
    pub fn pack(&self) -> Option<&str> {
        use Event as E;
        match self {
            E::Untrusted { pack, .. }
            | E::Compiling { pack, .. }
            | E::PersonaElsewhere { pack, .. }
            | E::NameShared { pack, .. }
            | E::PersonaReady { pack, .. }
            | E::Reloaded { pack, .. }
            | E::ReloadFailed { pack, .. }
            | E::PersonaStopped { pack, .. } => Some(pack),
            _ => None,
        }
    }
}

/// One event and its plain line; `text: None` for events only the JSON stream carries (per-persona
/// wake decisions, prompts sent), which would repeat what the plain lines already say.
#[derive(Debug, Clone, PartialEq)]
pub struct Note {
    pub event: Event,
    pub text: Option<String>,
}

impl Note {
    /// An event printed in both forms.
    pub fn new(event: Event, text: impl Into<String>) -> Note {
        Note {
            event,
            text: Some(text.into()),
        }
    }

    /// An event only the JSON stream carries.
    pub fn only_json(event: Event) -> Note {
        Note { event, text: None }
    }

    /// The JSON line (without the newline).
    pub fn json(&self) -> String {
        serde_json::to_string(&self.event).unwrap_or_default()
    }
}

impl From<Event> for Note {
    fn from(event: Event) -> Note {
        Note::only_json(event)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    #[test]
    fn json_has_the_event_key_and_escapes_hostile_text() {
        let n = Note::new(
            Event::Reply {
                persona: "bee\"\n}".into(),
                channel: "general".into(),
                id: "x".into(),
                to: "y".into(),
                thread: None,
            },
            "reply bee x to y",
        );
        let v: Value = serde_json::from_str(&n.json()).unwrap();
        assert_eq!(v["event"], "reply");
        assert_eq!(v["persona"], "bee\"\n}");
        assert_eq!(v["thread"], Value::Null);
        assert!(!n.json().contains('\n'));
        assert_eq!(serde_json::from_value::<Event>(v).unwrap(), n.event);
    }

    #[test]
    fn keys_that_do_not_apply_are_absent() {
        let e = Event::Error {
            persona: None,
            channel: None,
            id: Some("a".into()),
            reason: "bad".into(),
            breaker_open: false,
            data: None,
            stderr: vec![],
        };
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"event": "error", "id": "a", "reason": "bad"})
        );
        assert_eq!(e.kind(), "error");
        assert_eq!(
            serde_json::to_value(Event::Stopping).unwrap(),
            serde_json::json!({"event": "stopping"})
        );
    }
}
