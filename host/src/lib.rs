//! apiary: a plugin-host runtime for AI persona packs.
//!
//! The library is the whole program; `main.rs` only hands over to [`cli::main`]. Modules follow the
//! data flow: [`pack`] loads and validates what is on disk, [`resolve`] turns it into per-persona
//! effective configuration across the five precedence levels, [`migrate`] rewrites old formats.

pub mod acp;
pub mod cli;
pub mod convert;
pub mod diag;
pub mod dispatch;
pub mod dist;
pub mod migrate;
pub mod pack;
pub mod relay;
pub mod resolve;
pub mod safe_fs;
pub mod sandbox;

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
