//! Lifecycle hooks as the dispatcher sees them: a trait, so `.wasm` hooks can run in the sandbox
//! (issue 3) and script hooks only after operator trust, without the dispatcher knowing which.

use std::path::Path;
use std::time::Duration;

use crate::relay::Message;
use crate::resolve::ResolvedPersona;
use crate::sandbox::SandboxError;
use crate::sandbox::blocking::panic_text;

use super::script::ScriptError;

/// The `on_message` deadline (spec §9), wall clock, whatever the hook.
pub const ON_MESSAGE_DEADLINE: Duration = Duration::from_secs(5);
/// The default wall-clock bound on `on_start` and `on_stop` (a runner says its own through
/// [`HookRunner::deadline`]).
pub const LIFECYCLE_DEADLINE: Duration = Duration::from_secs(330);
/// Loading a persona's hooks at start-up, wall clock, when their components are compiled already
/// (in the compile cache: milliseconds). A compilation cannot be interrupted: one still running
/// past its deadline finishes on its own thread.
pub const LOAD_DEADLINE: Duration = Duration::from_secs(30);
/// What a first compilation adds to [`LOAD_DEADLINE`] per started MiB of component: Cranelift
/// takes about 0.7 s a MiB on an idle core and ten times that on a loaded machine (a 12 MB
/// componentize-js component: 8 s idle, 51-146 s under load), so slow work is not taken for a hang.
pub const COMPILE_PER_MIB: Duration = Duration::from_secs(15);

/// The deadline for loading components of `uncompiled` bytes in all that are not in the compile
/// cache yet: [`LOAD_DEADLINE`] plus [`COMPILE_PER_MIB`] for each started MiB.
pub fn load_deadline(uncompiled: u64) -> Duration {
    // Hook files are capped at 64 MiB each; the cap here only keeps the product in range.
    let mib = uncompiled.div_ceil(1 << 20).min(4096) as u32;
    LOAD_DEADLINE + COMPILE_PER_MIB * mib
}

/// The three hook points of spec §9: the sandbox's own, so the harness, the sandbox and
/// `apiary hook run` name them alike.
pub use crate::sandbox::hook::HookPoint;

/// Why a hook (or blocking work run like one, see [`off_async`]) failed. The texts are what
/// `apiary up` reports; [`HookError::kind`] is the stable name (`apiary hook run --json` prints it).
#[derive(Debug, thiserror::Error)]
pub enum HookError {
    /// The runner's own reason (a hook runner outside this crate says why in words).
    #[error("{0}")]
    Failed(String),
    /// A script hook the operator has not trusted: not run. `remedy` records trust for it.
    #[error("script hook `{hook}` is not trusted ({why})")]
    Untrusted {
        hook: String,
        why: String,
        remedy: String,
    },
    #[error("pack {0} is not known to the hook runner")]
    UnknownPack(String),
    /// The hook's file does not resolve inside the pack.
    #[error("{0}")]
    Path(String),
    /// The sandbox (or the runtime around it) cannot start.
    #[error("{0}")]
    Setup(String),
    /// The component file cannot be read.
    #[error("{0}")]
    Read(String),
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
    #[error("script hook `{hook}`: {source}")]
    Script { hook: String, source: ScriptError },
    #[error("{what} panicked in the host: {detail}")]
    Panicked { what: String, detail: String },
    #[error("{what} did not finish: {detail}")]
    Unfinished { what: String, detail: String },
    #[error("{what} exceeded its {} deadline and was abandoned", human(.deadline))]
    Deadline { what: String, deadline: Duration },
}

impl HookError {
    /// A stable name for the error, for programs and tests: a sandbox's or a script's own kind
    /// where one failed.
    pub fn kind(&self) -> &'static str {
        match self {
            HookError::Failed(_) => "failed",
            HookError::Untrusted { .. } => "untrusted-script",
            HookError::UnknownPack(_) | HookError::Setup(_) => "setup",
            HookError::Path(_) => "path",
            HookError::Read(_) => "io",
            HookError::Sandbox(e) => e.kind(),
            HookError::Script { source, .. } => source.kind(),
            HookError::Panicked { .. } => "panicked",
            HookError::Unfinished { .. } => "unfinished",
            HookError::Deadline { .. } => "deadline",
        }
    }
}

impl From<String> for HookError {
    fn from(why: String) -> HookError {
        HookError::Failed(why)
    }
}

impl From<&str> for HookError {
    fn from(why: &str) -> HookError {
        HookError::Failed(why.to_string())
    }
}

/// Runs a persona's hook for one point. `Ok` when there is none or it succeeded; `Err(why)` makes
/// `on_start` refuse the persona and `on_message` drop the message (`on_stop`: logged). Called on
/// a blocking thread (see [`off_async`]), never on the harness's async threads: components block
/// there (WASI), and so do script hooks.
pub trait HookRunner: Send + Sync {
    fn run(
        &self,
        point: HookPoint,
        pack_id: &str,
        persona: &ResolvedPersona,
        workspace: &Path,
        message: Option<&Message>,
    ) -> Result<(), HookError>;

    /// Loads (compiles) the persona's hooks before its first hook runs, so that no call's deadline
    /// has to cover a compilation. Called on a blocking thread within
    /// [`HookRunner::load_deadline`]; `Err` refuses the persona.
    fn prepare(&self, _pack_id: &str, _persona: &ResolvedPersona) -> Result<(), HookError> {
        Ok(())
    }

    /// The wall-clock bound on [`HookRunner::prepare`]: [`LOAD_DEADLINE`], scaled by
    /// [`load_deadline`] for components that must be compiled first. Called on a blocking thread.
    fn load_deadline(&self, _pack_id: &str, _persona: &ResolvedPersona) -> Duration {
        LOAD_DEADLINE
    }

    /// The wall-clock bound the dispatcher puts around one call of `point`: a backstop beyond
    /// the runner's own deadlines for a call stuck in the host (a sandboxed hook reading a FIFO
    /// it made in its workspace blocks in a WASI host call, which no epoch deadline interrupts).
    fn deadline(&self, point: HookPoint, _persona: &ResolvedPersona) -> Duration {
        match point {
            HookPoint::OnMessage => ON_MESSAGE_DEADLINE,
            HookPoint::OnStart | HookPoint::OnStop => LIFECYCLE_DEADLINE,
        }
    }

    /// A pack was installed or upgraded (`Some`: the version now on disk) or uninstalled
    /// (`None`) while the harness runs (hot reload): hooks are found, compiled and trusted
    /// afresh for it.
    fn pack_changed(&self, _pack_id: &str, _pack: Option<&crate::pack::Pack>) {}
}

/// Runs `f` on tokio's blocking pool within `deadline` of wall-clock time, for work that blocks
/// (hook calls, compiling components). A panic in `f` is an `Err` naming it, not the end of the
/// harness; past the deadline `f` is abandoned (its thread finishes on its own) and the answer
/// is an `Err` saying so.
pub async fn off_async<T: Send + 'static>(
    what: &str,
    deadline: Duration,
    f: impl FnOnce() -> Result<T, HookError> + Send + 'static,
) -> Result<T, HookError> {
    let what = what.to_string();
    match tokio::time::timeout(deadline, tokio::task::spawn_blocking(f)).await {
        Ok(Ok(answer)) => answer,
        Ok(Err(e)) if e.is_panic() => Err(HookError::Panicked {
            what,
            detail: panic_text(e.into_panic()),
        }),
        Ok(Err(e)) => Err(HookError::Unfinished {
            what,
            detail: e.to_string(),
        }),
        Err(_) => Err(HookError::Deadline { what, deadline }),
    }
}

fn human(d: &Duration) -> String {
    if d.as_millis().is_multiple_of(1000) {
        format!("{} s", d.as_secs())
    } else {
        format!("{} ms", d.as_millis())
    }
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
    ) -> Result<(), HookError> {
        if point == HookPoint::OnStart && !persona.hooks.is_empty() {
            tracing::warn!(
                persona = %persona.identity.name,
                "persona has hooks configured; this build does not run them yet"
            );
        }
        Ok(())
    }
}

/// What a load within `deadline` is called in an error when it runs out: a first compilation
/// says so, and how to do it ahead.
pub fn load_what(deadline: Duration) -> &'static str {
    if deadline > LOAD_DEADLINE {
        "compiling the hooks (not in the compile cache yet; `apiary trust <pack> --hooks` compiles them ahead)"
    } else {
        "loading the hooks"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_first_compilation_gets_time_by_size_and_a_cached_load_the_base_deadline() {
        assert_eq!(load_deadline(0), LOAD_DEADLINE);
        assert_eq!(load_deadline(1), LOAD_DEADLINE + COMPILE_PER_MIB);
        // The 12 MB componentize-js hook took up to 146 s to compile on a loaded machine.
        assert!(load_deadline(12_036_870) >= Duration::from_secs(180));
        // Monotonic, and bounded even for absurd sizes.
        assert!(load_deadline(18 << 20) > load_deadline(12 << 20));
        assert_eq!(load_deadline(u64::MAX), load_deadline(8 << 30));
    }
}
