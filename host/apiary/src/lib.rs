//! apiary: a plugin-host runtime for AI persona packs. This crate is the command line and its
//! wiring on top of the layers below it: [`dist`] (archives, installs, trust), [`convert`] (format
//! converters), [`paths`] (where things live on this host), [`ops`] (`/metrics`, agent cards) and
//! [`cli`]; `main.rs` only hands over to [`cli::main`].
//!
//! The layers are crates of their own, re-exported under their old names: `apiary-core` (the pack
//! model: [`pack`], [`resolve`], [`diag`], [`migrate`]), `apiary-harness` (the live loop,
//! [`dispatch`], and talking to agent runtimes, [`acp`]), `apiary-sandbox` ([`sandbox`]) and
//! `apiary-relay` ([`relay`]). [`status`] folds the harness's events into the per-persona view that
//! the terminal and `/metrics` both show.

pub mod a2a;
pub mod builtin;
pub mod cli;
pub mod convert;
pub mod dist;
pub mod ops;
pub mod paths;
pub mod status;

pub use apiary_core::{
    ENGINE_VERSION, diag, engine_version, migrate, pack, resolve, runtime, safe_fs,
};
pub use apiary_harness as dispatch;
pub use apiary_harness::acp;
pub use apiary_relay as relay;
pub use apiary_sandbox as sandbox;

/// The process-wide sandbox, compiling into the operator's compile cache
/// ([`paths::compile_cache`]).
pub fn shared_sandbox() -> Result<&'static sandbox::Sandbox, sandbox::SandboxError> {
    sandbox::Sandbox::shared(|| sandbox::SandboxConfig {
        cache_dir: paths::compile_cache(),
        pooling: !ONE_SHOT.load(std::sync::atomic::Ordering::Relaxed),
        ..sandbox::SandboxConfig::default()
    })
}

/// Set by [`one_shot`].
static ONE_SHOT: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// This process runs one command and exits (`convert`, `hook run`, …), not `up`: its sandbox
/// allocates each instance when it is needed instead of reserving the long run's pool, which cost
/// every such command about a thousand `mprotect` calls before its first component ran. Call it
/// before the first [`shared_sandbox`].
pub fn one_shot() {
    ONE_SHOT.store(true, std::sync::atomic::Ordering::Relaxed);
}
