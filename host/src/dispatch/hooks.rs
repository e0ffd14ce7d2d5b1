//! Lifecycle hooks as the dispatcher sees them: a trait, so `.wasm` hooks can run in the sandbox
//! (issue 3) and script hooks only after operator trust, without the dispatcher knowing which.

use std::path::Path;

use crate::relay::Message;
use crate::resolve::ResolvedPersona;

/// The three hook points of spec §9.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookPoint {
    OnStart,
    OnStop,
    OnMessage,
}

impl HookPoint {
    pub fn as_str(self) -> &'static str {
        match self {
            HookPoint::OnStart => "on_start",
            HookPoint::OnStop => "on_stop",
            HookPoint::OnMessage => "on_message",
        }
    }
}

/// Runs a persona's hook for one point. `Ok` when there is none or it succeeded; `Err(why)` makes
/// `on_start` refuse the persona and `on_message` drop the message (`on_stop`: logged). Called from a
/// blocking thread; the dispatcher enforces the `on_message` deadline.
pub trait HookRunner: Send + Sync {
    fn run(
        &self,
        point: HookPoint,
        pack_id: &str,
        persona: &ResolvedPersona,
        workspace: &Path,
        message: Option<&Message>,
    ) -> Result<(), String>;
}

/// Runs nothing. A persona with hooks configured is told so once, at `on_start`.
/// TODO(issue 3/5): route `.wasm` hooks through `sandbox::hook::HookRunner` and trusted script hooks
/// through the subprocess contract once those APIs are committed.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoHooks;

impl HookRunner for NoHooks {
    fn run(
        &self,
        point: HookPoint,
        _pack_id: &str,
        persona: &ResolvedPersona,
        _workspace: &Path,
        _message: Option<&Message>,
    ) -> Result<(), String> {
        if point == HookPoint::OnStart && !persona.hooks.is_empty() {
            tracing::warn!(
                persona = %persona.identity.name,
                "persona has hooks configured; this build does not run them yet"
            );
        }
        Ok(())
    }
}
