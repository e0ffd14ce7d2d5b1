//! The `apiary` crate's integration tests, one binary: the CLI contract, the built-in converters
//! through the sandbox library, sandbox containment and warm stores, dispatch under panics, and
//! the trigger matchers' parity.

mod cli;
mod common;
mod convert_agent_compose;
mod convert_agent_plugins;
mod convert_claude;
mod convert_duduclaw;
mod dispatch_panics;
mod docs_reference;
mod sandbox_caps;
mod sandbox_hostile;
mod sandbox_warm;
mod sandbox_worlds;
mod trigger_parity;
mod wit_frozen;
