//! Hook front end: `on_start`, `on_stop`, `on_message` of a `hook` component, with the persona's
//! workspace preopened read-write at `/workspace` and nothing else.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use wasmtime::Store;
use wasmtime::component::{ComponentExportIndex, Instance};

use super::bindings::v0_1::hook::exports::apiary::plugin::lifecycle;
use super::bindings::v0_2::hook::exports::apiary::plugin::lifecycle as lifecycle2;
use super::prepared::Prepared;
use super::warm::WarmPool;
use super::{
    CallOutput, Capabilities, Grants, Limits, Loaded, Release, Sandbox, SandboxError, State, World,
    truncate,
};

/// Where the workspace appears inside the component.
pub const WORKSPACE_GUEST_PATH: &str = "/workspace";

/// The three hook points of spec section 9.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum HookPoint {
    #[serde(rename = "on_start")]
    OnStart,
    #[serde(rename = "on_stop")]
    OnStop,
    #[serde(rename = "on_message")]
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

/// A name that is not a hook point.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown hook point `{0}`: expected on_start, on_stop or on_message")]
pub struct UnknownHookPoint(pub String);

impl std::str::FromStr for HookPoint {
    type Err = UnknownHookPoint;
    fn from_str(s: &str) -> Result<HookPoint, UnknownHookPoint> {
        match s.replace('-', "_").as_str() {
            "on_start" => Ok(HookPoint::OnStart),
            "on_stop" => Ok(HookPoint::OnStop),
            "on_message" => Ok(HookPoint::OnMessage),
            _ => Err(UnknownHookPoint(s.to_string())),
        }
    }
}

/// The message an `on_message` hook is told about.
#[derive(Debug, Clone, Default)]
pub struct HookMessage {
    pub id: String,
    pub channel: String,
    pub thread: Option<String>,
    /// The author's public key, hex.
    pub author: String,
    /// The author's display name, when known (given to `0.2` hooks only).
    pub author_name: Option<String>,
    pub text: String,
}

/// Stores a hook runner keeps between calls (one per persona and workspace it served last).
const WARM_STORES: usize = 8;

/// What a kept store may serve: the same persona with the same workspace directory. The
/// directory's identity (device and inode) is part of it: a workspace replaced at the same path
/// gets a fresh preopen.
#[derive(Debug, PartialEq)]
struct WarmKey {
    workspace: PathBuf,
    directory: (u64, u64),
    pack_id: String,
    persona: String,
}

impl WarmKey {
    /// `None` where the directory cannot be identified (then every call starts fresh).
    fn new(workspace: &Path, pack_id: &str, persona: &str) -> Option<WarmKey> {
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            let meta = std::fs::metadata(workspace).ok()?;
            Some(WarmKey {
                workspace: workspace.to_path_buf(),
                directory: (meta.dev(), meta.ino()),
                pack_id: pack_id.to_string(),
                persona: persona.to_string(),
            })
        }
        #[cfg(not(unix))]
        {
            let _ = (workspace, pack_id, persona);
            None
        }
    }
}

/// A loaded `hook` component, ready to run.
pub struct HookRunner {
    loaded: Arc<Loaded>,
    exports: [ComponentExportIndex; 3],
    limits: Limits,
    /// Stores kept between calls that ended normally; `None` runs every call in a fresh store.
    warm: Option<WarmPool<WarmKey>>,
    /// WASI contexts (with the workspace preopen) for fresh stores, kept between calls.
    prepared: Prepared<WarmKey>,
    /// What the operator granted beyond the world's defaults (declared and granted).
    caps: Capabilities,
}

impl HookRunner {
    pub fn new(loaded: Arc<Loaded>) -> Result<HookRunner, SandboxError> {
        let exports = export_indexes(&loaded, World::Hook, ["on-start", "on-stop", "on-message"])?;
        Ok(HookRunner {
            warm: Some(loaded.warm_pool(WARM_STORES)),
            prepared: Prepared::new(WARM_STORES),
            loaded,
            exports,
            limits: Limits::hook(),
            caps: Capabilities::none(),
        })
    }

    /// The same hook with `caps` added to every call (see [`crate::caps`]).
    pub fn with_capabilities(mut self, caps: Capabilities) -> HookRunner {
        self.caps = caps;
        self.without_kept_state()
    }

    /// Whether a store is kept between calls (the default) or every call gets a fresh one.
    pub fn with_reuse(mut self, reuse: bool) -> HookRunner {
        self.warm = reuse.then(|| self.loaded.warm_pool(WARM_STORES));
        self
    }

    pub fn with_limits(mut self, limits: Limits) -> HookRunner {
        self.limits = limits;
        self.without_kept_state()
    }

    /// Drops the stores and contexts built before the grants or limits changed.
    fn without_kept_state(mut self) -> HookRunner {
        let reuse = self.warm.is_some();
        self.prepared = Prepared::new(WARM_STORES);
        self.with_reuse(reuse)
    }

    pub fn loaded(&self) -> &Loaded {
        &self.loaded
    }

    /// Runs one hook point for `pack_id`/`persona` with `workspace` (which must exist) preopened.
    /// `Ok` means the hook succeeded; every failure (its own error, a trap, the deadline, the
    /// memory cap) is an `Err` saying which.
    pub fn run(
        &self,
        sandbox: &Sandbox,
        point: HookPoint,
        pack_id: &str,
        persona: &str,
        message: Option<&HookMessage>,
        workspace: &Path,
    ) -> Result<CallOutput<()>, SandboxError> {
        let grants = Grants::workspace(workspace.to_path_buf(), WORKSPACE_GUEST_PATH)
            .with_capabilities(&self.caps);
        let persona = lifecycle::Persona {
            pack_id: pack_id.to_string(),
            name: persona.to_string(),
        };
        let name = self.loaded.name.clone();
        let max_string = self.limits.max_string;
        let release = self.loaded.identity.release();
        let call = |store: &mut Store<State>, instance: &Instance| {
            let index = match point {
                HookPoint::OnStart => &self.exports[0],
                HookPoint::OnStop => &self.exports[1],
                HookPoint::OnMessage => &self.exports[2],
            };
            let m = message.cloned().unwrap_or_default();
            let answer = match (release, point) {
                (Release::V0_1, HookPoint::OnStart | HookPoint::OnStop) => {
                    let f = instance
                        .get_typed_func::<(&lifecycle::Persona,), (Result<(), String>,)>(
                            &mut *store,
                            index,
                        )?;
                    f.call(&mut *store, (&persona,))?.0.map_err(refused)
                }
                (Release::V0_1, HookPoint::OnMessage) => {
                    let context = lifecycle::MessageContext {
                        persona: persona.clone(),
                        message: lifecycle::Message {
                            id: m.id,
                            channel: m.channel,
                            thread: m.thread,
                            author: m.author,
                            text: m.text,
                        },
                    };
                    let f = instance
                        .get_typed_func::<(&lifecycle::MessageContext,), (Result<(), String>,)>(
                            &mut *store,
                            index,
                        )?;
                    f.call(&mut *store, (&context,))?.0.map_err(refused)
                }
                (Release::V0_2, HookPoint::OnStart | HookPoint::OnStop) => {
                    let persona = lifecycle2::Persona {
                        pack_id: persona.pack_id.clone(),
                        name: persona.name.clone(),
                    };
                    let f = instance.get_typed_func::<
                        (&lifecycle2::Persona,),
                        (Result<(), lifecycle2::HookError>,),
                    >(&mut *store, index)?;
                    f.call(&mut *store, (&persona,))?.0
                }
                (Release::V0_2, HookPoint::OnMessage) => {
                    let context = lifecycle2::MessageContext {
                        persona: lifecycle2::Persona {
                            pack_id: persona.pack_id.clone(),
                            name: persona.name.clone(),
                        },
                        message: lifecycle2::Message {
                            id: m.id,
                            channel: m.channel,
                            thread: m.thread,
                            author: m.author,
                            author_name: m.author_name,
                            text: m.text,
                        },
                    };
                    let f = instance.get_typed_func::<
                        (&lifecycle2::MessageContext,),
                        (Result<(), lifecycle2::HookError>,),
                    >(&mut *store, index)?;
                    f.call(&mut *store, (&context,))?.0
                }
            };
            Ok(answer.map_err(|e| hook_error(&name, e, max_string)))
        };
        let key = WarmKey::new(workspace, &persona.pack_id, &persona.name);
        match (key, &self.warm) {
            (Some(key), Some(pool)) => {
                sandbox.call_warm(&self.loaded, &self.limits, &grants, pool, key, call)
            }
            (Some(key), None) => sandbox.call_prepared(
                &self.loaded,
                &self.limits,
                &grants,
                &self.prepared,
                key,
                call,
            ),
            (None, _) => sandbox.call(&self.loaded, &self.limits, &grants, call),
        }
    }
}

/// A `0.1` hook's error string: a refusal (the only kind `0.1` has).
fn refused(message: String) -> lifecycle2::HookError {
    lifecycle2::HookError::Refused(message)
}

/// A hook's error: a refusal is the hook's answer, a failure also counts as a fault.
fn hook_error(name: &str, e: lifecycle2::HookError, max: usize) -> SandboxError {
    match e {
        lifecycle2::HookError::Refused(message) => guest_error(name, &message, max),
        lifecycle2::HookError::Failed(message) => match guest_error(name, &message, max) {
            SandboxError::Guest { name, message } => SandboxError::GuestFailed { name, message },
            oversized => oversized,
        },
    }
}

/// The guest's error string, refused when it is over the cap. (It has been copied out of the guest
/// by then: wasmtime runs the guest's post-return, which frees its answer, before `call` returns,
/// so lazily-lifted `WasmStr`/`WasmList` results would dangle. The copy is bounded by the guest's
/// memory cap.)
pub(crate) fn guest_error(name: &str, message: &str, max: usize) -> SandboxError {
    if message.len() > max {
        return SandboxError::Oversized {
            name: name.to_string(),
            what: "an error message",
            size: message.len(),
            limit: max,
        };
    }
    SandboxError::Guest {
        name: name.to_string(),
        message: truncate(message, max).to_string(),
    }
}

/// The export indexes of `functions` in the component's `world` interface.
pub(crate) fn export_indexes<const N: usize>(
    loaded: &Loaded,
    world: World,
    functions: [&str; N],
) -> Result<[ComponentExportIndex; N], SandboxError> {
    if loaded.identity.world != world {
        return Err(SandboxError::WrongWorld {
            name: loaded.name.to_string(),
            found: loaded.identity.world,
            expected: world,
        });
    }
    let prefix = format!("{}/{}@", super::bindings::PACKAGE, world.interface());
    let missing = |what: &str| SandboxError::Link {
        name: loaded.name.to_string(),
        detail: format!("it does not export {what}"),
    };
    let interface_name = loaded
        .identity
        .exports
        .iter()
        .find(|e| e.starts_with(&prefix))
        .ok_or_else(|| missing(&prefix))?;
    let component = loaded.pre.component();
    let interface = component
        .get_export_index(None, interface_name)
        .ok_or_else(|| missing(interface_name))?;
    let mut out = Vec::with_capacity(N);
    for f in functions {
        out.push(
            component
                .get_export_index(Some(&interface), f)
                .ok_or_else(|| missing(&format!("{interface_name}#{f}")))?,
        );
    }
    Ok(out
        .try_into()
        .unwrap_or_else(|_| unreachable!("N indexes pushed")))
}
