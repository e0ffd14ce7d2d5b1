//! Set-ups shared by the test modules: packs to distribute ([`dist`]), a running `apiary up` and
//! its relays ([`live`]), scratch packs to validate and inspect ([`pack`]).

pub mod dist;
pub mod live;
pub mod pack;
pub mod provider;
pub mod toolchains;
