//! The persona pack core: everything apiary knows about a pack on disk, with no async runtime, no
//! sandbox and no network, so the fuzzers and the pack checks build against it alone.
//!
//! Modules follow the data flow: [`pack`] loads and validates what is on disk (with [`diag`] for
//! located diagnostics), [`resolve`] turns it into per-persona effective configuration across the
//! five precedence levels, [`migrate`] rewrites old formats. [`runtime`] is the table of agent
//! runtimes both the validator and the resolver consult; [`safe_fs`] opens files a pack names
//! without following it anywhere it should not go; [`shell`] shows a command line as a shell
//! reads it.

pub mod diag;
pub mod migrate;
pub mod pack;
pub mod resolve;
pub mod runtime;
pub mod safe_fs;
pub mod shell;

/// The Buzz engine version apiary implements, as a literal so `--version` can include it.
#[macro_export]
#[doc(hidden)]
macro_rules! engine_version {
    () => {
        "1.0.0"
    };
}

/// The Buzz engine version apiary implements; packs declare what they need in `engines.buzz`.
pub const ENGINE_VERSION: &str = engine_version!();
