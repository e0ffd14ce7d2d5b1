//! The end-to-end tests: the `apiary` binary as a black box, with real peers (relays, agents, HTTP
//! and git sources) started by the tests. One test binary, so it links once; each module is one
//! subject and keeps only what is specific to it, the shared set-ups are in [`support`] and the
//! `apiary_e2e` library.
//!
//! Tests run as threads of this one process: they pass environment to the `apiary` children they
//! start (never `std::env::set_var`, never `set_current_dir`) and take their ports from the OS.

mod support;

mod a2a;
mod agent_failures;
mod cli_hostile;
mod compile_ahead;
mod component_author;
mod components_lang;
mod convert_cli;
mod convert_collections;
mod convert_corpus;
mod convert_schema;
mod convert_truth;
mod deploy_manifests;
mod dist_build;
mod dist_crash;
mod dist_expert;
mod dist_hostile;
mod dist_install;
mod hook_run;
mod keys;
mod live_auth;
mod live_confinement;
mod live_continuity;
mod live_hooks;
mod live_hostile;
mod live_hostile_fs;
mod live_identity;
mod live_limits;
mod live_operator;
mod live_reconnect;
mod live_reload;
mod live_session;
mod live_shards;
mod live_status;
mod live_supervision;
mod live_up;
mod module_graph;
mod pack_corpus;
mod pack_hostile;
mod pack_migrate;
mod pack_new;
mod pack_resolve;
mod pack_validate;
mod paths;
mod real_agents;
mod registry;
mod relay_front;
mod relay_hostile;
mod relay_storage;
mod sandbox_cli;
mod seed_contracts;
mod team;
mod tool_policy;
mod up_capabilities;
mod up_mcp_trust;
mod up_ops;
mod up_script_hooks;
