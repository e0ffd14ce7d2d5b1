//! Agent confinement: the process that acts on a stranger's words (a persona's agent runtime and
//! everything it starts) gets no more than it needs.
//!
//! apiary does not confine an agent from inside its own (multi-threaded) process. It starts a
//! *launcher*, its own binary again with [`LAUNCH_ARG`], which reads a [`Plan`] from its
//! environment and, while it is still single-threaded:
//! 1. moves into a network namespace of its own ([`netns`]): only a loopback device, on which it
//!    listens for the few ports the plan names and forwards each connection to apiary's egress
//!    proxy over a Unix socket (a filesystem object, so it crosses the namespace boundary);
//! 2. restricts itself with Landlock ([`fs_rules`]): read-write only the plan's writable trees,
//!    read-only the system and the runtime's installation, nothing else; no signals to, and no
//!    abstract sockets of, processes outside the sandbox;
//! 3. starts the agent with exactly the plan's environment, as the plan's user or without
//!    capabilities, and a seccomp filter that refuses new Unix sockets ([`seccomp`]), so the proxy's
//!    socket (or any other on the machine) is not a way around the namespace;
//! 4. forwards ports until the agent exits, then exits with its status.
//!
//! The agent's stdio is the launcher's: apiary's pipes reach the agent unchanged.
//!
//! [`probe`] tells what this machine can enforce, by running the same steps in a launcher that
//! starts nothing.

pub mod plan;
pub mod probe;
pub mod system;

#[cfg(target_os = "linux")]
mod fs_rules;
#[cfg(target_os = "linux")]
pub mod launch;
#[cfg(target_os = "linux")]
mod netns;
#[cfg(target_os = "linux")]
mod privileges;
#[cfg(target_os = "linux")]
mod ptys;
#[cfg(target_os = "linux")]
mod seccomp;

pub use plan::{Listener, NetPlan, Plan};
pub use probe::Support;

/// The first argument that makes apiary's binary a launcher (not a command: hidden from help).
pub const LAUNCH_ARG: &str = "__confine";
/// The second argument of a probing launcher.
pub const PROBE_ARG: &str = "--probe";
/// The launcher's environment variable holding the [`Plan`] as JSON.
pub const PLAN_VAR: &str = "APIARY_CONFINE_PLAN";
/// The launcher's exit status when it could not confine or start the agent (as `env`'s 125).
pub const LAUNCH_FAILED: i32 = 125;

#[derive(Debug, thiserror::Error)]
pub enum ConfineError {
    #[error("the confinement plan is not valid: {0}")]
    Plan(String),
    #[error("cannot isolate the network ({step}): {source}")]
    Network {
        step: &'static str,
        source: std::io::Error,
    },
    #[error("cannot confine files with Landlock: {0}")]
    Landlock(String),
    #[error("cannot install the seccomp filter: {0}")]
    Seccomp(String),
    #[error("cannot drop privileges ({step}): {source}")]
    Privileges {
        step: &'static str,
        source: std::io::Error,
    },
    #[error("cannot start agent `{program}`: {source}")]
    Spawn {
        program: String,
        source: std::io::Error,
    },
    #[error("agent confinement needs Linux")]
    Unsupported,
}

/// Runs the launcher when `args` (the process's arguments after the program) ask for it, and never
/// returns then; otherwise returns at once. Call it first thing in `main`, before any thread starts.
pub fn launcher_if_asked(args: &[std::ffi::OsString]) {
    if args.first().is_none_or(|a| a != LAUNCH_ARG) {
        return;
    }
    #[cfg(target_os = "linux")]
    {
        if args.get(1).is_some_and(|a| a == PROBE_ARG) {
            probe::print_own();
            std::process::exit(0);
        }
        launch::main()
    }
    #[cfg(not(target_os = "linux"))]
    {
        eprintln!("apiary: {}", ConfineError::Unsupported);
        std::process::exit(LAUNCH_FAILED)
    }
}
