//! Why the harness, a persona or one of its turns stopped. The texts are what `apiary up` shows
//! (a note's `reason`, a refusal, the final error), so they stay as they were; [`DispatchError::kind`]
//! is the stable name to match on.

use std::time::Duration;

use crate::acp::AcpError;
use crate::acp::mcp::McpError;

use super::Note;
use super::event::Event;
use super::hooks::HookError;

#[derive(Debug, thiserror::Error)]
pub enum DispatchError {
    /// Connecting to the relay.
    #[error(transparent)]
    Relay(#[from] crate::relay::RelayError),
    #[error("cannot start apiary's MCP server for the agents: {0}")]
    Tools(String),
    #[error("subscribing to the relay: {0}")]
    Subscribe(String),
    #[error("no persona could start")]
    NoPersona,
    /// A persona's MCP servers cannot be delivered (refuses it).
    #[error(transparent)]
    Mcp(#[from] McpError),
    #[error("cannot open the workspace: {0}")]
    Workspace(std::io::Error),
    #[error("skills not copied: {0}")]
    Skills(std::io::Error),
    #[error("key store: {0}")]
    Keys(crate::relay::RelayError),
    #[error("hook cannot be loaded: {0}")]
    HookLoad(HookError),
    #[error("on_start hook failed: {0}")]
    OnStart(HookError),
    /// Starting the agent or a turn of it.
    #[error(transparent)]
    Agent(#[from] AcpError),
    #[error("session/new for #{channel}: {source}")]
    Session { channel: String, source: AcpError },
    #[error("no session for this channel")]
    NoSession,
    #[error("circuit open: the agent crashed {crashes} times within {window:?}")]
    CircuitOpen { crashes: usize, window: Duration },
    #[error("signing the reply: {0}")]
    Sign(String),
    #[error("the relay refused the reply: {}", .0.join("; "))]
    Refused(Vec<String>),
    #[error("publishing the reply: {0}")]
    Publish(String),
    /// The agent cannot be confined as configured (a grant not set, a key not granted, ...).
    #[error("agent not started: {0}")]
    Confine(#[from] super::confine::ConfineError),
    /// Runtime configuration in the workspace that the operator did not allow.
    #[error(
        "the workspace holds {file}, agent runtime configuration the operator did not put there (a hook or an agent wrote it): remove it, or allow it with `agent_config = [\"{name}\"]` for this persona in the overrides file"
    )]
    PlantedConfig { file: String, name: String },
    /// A panic (a bug) caught where a persona's path starts; `during` says which.
    #[error("internal error {during}: {detail}")]
    Panicked {
        during: &'static str,
        detail: String,
    },
}

impl DispatchError {
    /// A stable name for the error, for programs and tests.
    pub fn kind(&self) -> &'static str {
        match self {
            DispatchError::Relay(_) => "relay",
            DispatchError::Subscribe(_) => "subscribe",
            DispatchError::Tools(_) => "tools",
            DispatchError::NoPersona => "no-persona",
            DispatchError::Mcp(_) => "mcp",
            DispatchError::Workspace(_) => "workspace",
            DispatchError::Skills(_) => "skills",
            DispatchError::Keys(_) => "keys",
            DispatchError::HookLoad(_) => "hook-load",
            DispatchError::OnStart(_) => "on-start",
            DispatchError::Agent(_) => "agent",
            DispatchError::Session { .. } => "session",
            DispatchError::NoSession => "no-session",
            DispatchError::CircuitOpen { .. } => "circuit-open",
            DispatchError::Sign(_) => "sign",
            DispatchError::Refused(_) => "refused",
            DispatchError::Publish(_) => "publish",
            DispatchError::Confine(_) => "confine",
            DispatchError::PlantedConfig { .. } => "planted-config",
            DispatchError::Panicked { .. } => "panicked",
        }
    }

    /// The agent's own error under this one, if any.
    pub fn acp(&self) -> Option<&AcpError> {
        match self {
            DispatchError::Agent(e) | DispatchError::Session { source: e, .. } => Some(e),
            _ => None,
        }
    }

    /// A caught panic's payload, as the error of the path it ended.
    pub(super) fn panicked(during: &'static str, panic: Box<dyn std::any::Any + Send>) -> Self {
        DispatchError::Panicked {
            during,
            detail: crate::sandbox::blocking::panic_text(panic),
        }
    }
}

/// The `error` event of `why`: the JSON-RPC error's `data` and the last lines of the agent's
/// stderr (already made printable, see [`crate::acp::stderr`]) with it, and whether the persona's
/// circuit breaker is open, from the error's type.
pub(super) fn event(
    persona: Option<String>,
    channel: Option<String>,
    id: Option<String>,
    why: &DispatchError,
    stderr: &[String],
) -> Event {
    Event::Error {
        persona,
        channel,
        id,
        reason: why.to_string(),
        breaker_open: matches!(why, DispatchError::CircuitOpen { .. }),
        data: why.acp().and_then(AcpError::data).map(str::to_string),
        stderr: stderr.to_vec(),
    }
}

/// A failure's note: its plain line with the agent's last stderr lines indented under it.
pub(super) fn explained(event: Event, mut text: String, stderr: &[String]) -> Note {
    if !stderr.is_empty() {
        text.push_str("\n  the agent's stderr ended with:");
        for line in stderr {
            text.push_str("\n  | ");
            text.push_str(line);
        }
    }
    Note::new(event, text)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The texts users see did not change with the types.
    #[test]
    fn messages_are_the_ones_shown_before() {
        let open = DispatchError::CircuitOpen {
            crashes: 5,
            window: Duration::from_secs(300),
        };
        assert_eq!(
            open.to_string(),
            "circuit open: the agent crashed 5 times within 300s"
        );
        assert_eq!(
            DispatchError::Refused(vec!["a".into(), "b".into()]).to_string(),
            "the relay refused the reply: a; b"
        );
        assert_eq!(
            DispatchError::Session {
                channel: "general".into(),
                source: AcpError::Exited
            }
            .to_string(),
            "session/new for #general: the agent exited"
        );
        assert_eq!(
            DispatchError::Panicked {
                during: "while starting",
                detail: "boom".into()
            }
            .to_string(),
            "internal error while starting: boom"
        );
        let io = || crate::relay::RelayError::Io(std::io::Error::other("disk gone"));
        assert_eq!(
            DispatchError::Keys(io()).to_string(),
            "key store: disk gone"
        );
        assert_eq!(DispatchError::Relay(io()).to_string(), "disk gone");
        assert_eq!(open.kind(), "circuit-open");
    }
}
