//! Set-ups shared by the test modules: packs to distribute ([`dist`]), a running `apiary up` and
//! its relays ([`live`]), scratch packs to validate and inspect ([`pack`]), exported keys as a pod mounts them ([`k8s`]), why two trees differ ([`tree_diff`]).

pub mod dist;
pub mod k8s;
pub mod live;
pub mod pack;
pub mod provider;
pub mod toolchains;
pub mod tree_diff;
