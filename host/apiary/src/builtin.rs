//! The components built into the binary (built from `guests/` by build.rs): the default trigger
//! matcher and the built-in converters.

/// The `trigger-default` component: the spec's trigger semantics.
pub const TRIGGER_DEFAULT_WASM: &[u8] = include_bytes!(env!("APIARY_TRIGGER_DEFAULT_WASM"));

/// The built-in converter components: crate name, bytes, SHA-256 (hex, computed by build.rs).
pub const CONVERTERS: &[(&str, &[u8], &str)] =
    include!(concat!(env!("OUT_DIR"), "/builtin_converters.rs"));

/// The built guest components directory, test-only guests included (for tests and benchmarks).
#[doc(hidden)]
pub const BUILT_GUESTS_DIR: &str = env!("APIARY_GUESTS_DIR");

/// The built-in trigger matcher, loaded into `sandbox`.
pub fn trigger_matcher(
    sandbox: &crate::sandbox::Sandbox,
) -> Result<crate::sandbox::trigger::TriggerRunner, crate::sandbox::SandboxError> {
    use crate::sandbox::trigger::{DEFAULT_NAME, TriggerRunner};
    TriggerRunner::new(sandbox.load(DEFAULT_NAME, TRIGGER_DEFAULT_WASM)?)
}

/// The harness's components for this binary: the shared sandbox ([`crate::shared_sandbox`]) and
/// the built-in trigger matcher.
pub struct Components;

impl crate::dispatch::sandboxed::SandboxSource for Components {
    fn sandbox(&self) -> Result<&'static crate::sandbox::Sandbox, crate::sandbox::SandboxError> {
        crate::shared_sandbox()
    }

    fn trigger_matcher(
        &self,
        sandbox: &crate::sandbox::Sandbox,
    ) -> Result<crate::sandbox::trigger::TriggerRunner, crate::sandbox::SandboxError> {
        trigger_matcher(sandbox)
    }
}
