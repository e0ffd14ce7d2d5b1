//! Command-line interface: argument parsing, logging set-up and exit codes. One file per subcommand
//! group. A one-shot command returns an [`output::Outcome`], which [`output::render`] prints (human,
//! or JSON with `--json`) and turns into the exit code; `up`, `tail` and `relay` stream what happens
//! as it happens.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use output::render;

mod bounded;
mod component_new;
mod component_test;
mod components;
mod convert;
mod dist;
mod keys;
mod live;
mod output;
mod pack;
mod pack_new;
mod precompile;
mod pretty_json;
mod registry;
mod sandbox;
mod survey;

/// Exit codes shared by every subcommand.
pub mod exit {
    /// Success; for `pack validate`, a clean pack.
    pub const OK: u8 = 0;
    /// The input has errors (validation failed, refused to act) or the command failed.
    pub const FAILURE: u8 = 1;
    /// `pack validate`: warnings only.
    pub const WARNINGS: u8 = 2;
    /// The command line itself was wrong.
    pub const USAGE: u8 = 64;
}

const AFTER_HELP: &str = "\
Exit codes:
  0   success (for `pack validate`: no findings)
  1   errors: the pack is invalid, or the command failed
  2   `pack validate` found warnings only; `convert` converted with losses
  64  the command line was wrong

Logs go to stderr; raise detail with -v (debug) or -vv (trace), or set RUST_LOG.";

#[derive(Debug, Parser)]
#[command(
    name = "apiary",
    version = version_line(),
    about = "Run, validate and convert AI persona packs (Persona Pack Specification, Buzz harness)",
    long_about = "apiary loads persona packs (a `.plugin/plugin.json` manifest, `agents/*.persona.md`, skills, \
MCP servers, hooks), checks them against the Persona Pack Specification, resolves each persona's \
effective configuration across the five precedence levels, and runs the personas as live agents.",
    after_help = AFTER_HELP,
    propagate_version = true
)]
pub struct Cli {
    /// More log detail on stderr (-v debug, -vv trace).
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Work with a persona pack directory: validate, inspect, migrate, build.
    #[command(subcommand)]
    Pack(pack::PackCommand),

    /// WebAssembly plugin components: inspect; add, list and remove converters; new and test (authors).
    #[command(subcommand)]
    Component(components::ComponentCommand),

    /// Convert a pack between formats (persona pack, Agent Plugins, Claude, DuDuClaw, agent-compose).
    Convert(convert::ConvertArgs),

    /// Run a persona's lifecycle hook once (components sandboxed; scripts only with --trust-hooks).
    #[command(subcommand)]
    Hook(sandbox::HookCommand),

    /// Show which personas a message would wake, and why.
    #[command(subcommand)]
    Trigger(sandbox::TriggerCommand),

    /// Install a pack from a .buzzpack file, an http(s) URL, a git repository or by id from Nostr
    /// relays (verified, fenced, atomic, its author pinned), or a DuDuClaw expert pack (directory,
    /// .zip or https zip), converted to a persona pack first.
    Install(dist::InstallArgs),

    /// Review what a pack runs on this host (script hooks, stdio MCP servers) and record trust for
    /// this pack's location, id, version and exact digests (an installed pack id, or ./dir).
    Trust(dist::TrustArgs),

    /// List the installed packs (from pack.lock).
    List(dist::ListArgs),

    /// Remove an installed pack: its files, its pack.lock entry, its trust records.
    Uninstall(dist::UninstallArgs),

    /// Re-hash installed packs against what was installed and report drift.
    Verify(dist::VerifyArgs),

    /// Publish a signed pack: the archive to Blossom blob servers, its signed event to Nostr relays.
    Publish(registry::PublishArgs),

    /// List the signed packs Nostr relays have (id, version, author, description, published at).
    Search(registry::SearchArgs),

    /// Run packs' personas as live agents on a relay (default: the bundled example, embedded relay).
    Up(Box<live::UpArgs>),

    /// Post a message to a relay channel (as the operator), for talking to running personas.
    Post(live::PostArgs),

    /// Print a relay channel's messages as they arrive.
    Tail(live::TailArgs),

    /// Run only the embedded Nostr relay (for `apiary up --relay URL` set-ups).
    Relay(live::RelayArgs),

    /// The key store: make a pack's keys ahead of time, list them, export them as a Kubernetes Secret.
    #[command(subcommand)]
    Keys(keys::KeysCommand),

    /// apiary's tools as a stdio MCP server, for agents without HTTP MCP: started by the agent
    /// itself, from the `session/new` entry `up` gives it (APIARY_MCP_URL, APIARY_MCP_TOKEN).
    #[command(hide = true)]
    McpBridge,
}

fn version_line() -> &'static str {
    concat!(
        env!("CARGO_PKG_VERSION"),
        " (buzz engine ",
        crate::engine_version!(),
        ")"
    )
}

/// Rust ignores SIGPIPE, so a write to a closed pipe (`apiary pack inspect --json | head`) fails
/// and `println!` panics. A one-shot command should end quietly instead, as other Unix tools do.
/// `up` keeps the Rust default: it must drain its queues and stop its agents whatever happens to
/// its stdout.
fn quiet_on_closed_pipe() {
    #[cfg(unix)]
    // SAFETY: called once at start-up, before any thread is spawned; resets one signal's action.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// The `apiary` binary: parses the command line (help, version and usage errors included), sets up
/// logging and runs the command.
/// The whole command line, as clap defines it (the command reference in docs/ is generated from
/// it).
pub fn command() -> clap::Command {
    <Cli as clap::CommandFactory>::command()
}

pub fn main() -> ExitCode {
    let cli = match parse() {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    // The live harness logs its lifecycle at info by default, and keeps Rust's SIGPIPE handling: it
    // must drain its queues and stop its agents whatever happens to its stdout.
    let live = matches!(cli.command, Command::Up(_));
    // The pack checks log nothing: no subscriber for them unless logs were asked for.
    use pack::PackCommand::{Build, Inspect, Migrate, Validate};
    let pack_check = matches!(
        cli.command,
        Command::Pack(Validate(_) | Inspect(_) | Migrate(_))
    );
    if !pack_check || cli.verbose > 0 || std::env::var_os("RUST_LOG").is_some() {
        init_logging(cli.verbose, live);
    }
    if !live {
        quiet_on_closed_pipe();
        crate::one_shot();
    }
    let code = match cli.command {
        Command::Pack(cmd) => {
            if !matches!(cmd, Build(_)) {
                grow_heaps_in_large_steps();
            }
            pack::run(cmd)
        }
        Command::Component(cmd) => components::run(cmd),
        // `--survey` converts many plugins with the same arguments (see `survey`).
        Command::Convert(a) if a.survey && !a.list => render(&survey::run(&a), a.json),
        Command::Convert(a) => convert::run(a),
        Command::Hook(cmd) => sandbox::run_hook(cmd),
        Command::Trigger(cmd) => sandbox::run_trigger(cmd),
        Command::Install(a) => render(&dist::install(&a), a.json),
        Command::Trust(a) => render(&dist::trust(&a), a.json),
        Command::List(a) => render(&dist::list(&a), a.json),
        Command::Uninstall(a) => render(&dist::uninstall(&a), a.json),
        Command::Verify(a) => render(&dist::verify(&a), a.json),
        Command::Publish(a) => render(&registry::publish(&a), a.json),
        Command::Search(a) => render(&registry::search(&a), a.json),
        Command::Up(a) => live::up(*a),
        Command::Post(a) => live::post(a),
        Command::Tail(a) => live::tail(a),
        Command::McpBridge => match apiary_mcp::bridge::run() {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("apiary mcp-bridge: {e}");
                1
            }
        },
        Command::Relay(a) => live::relay(a),
        Command::Keys(cmd) => keys::run(cmd),
    };
    ExitCode::from(code)
}

/// Parses the command line; on help, version or a usage error, prints it and gives the exit code.
fn parse() -> Result<Cli, ExitCode> {
    Cli::try_parse().map_err(|e| {
        let _ = e.print();
        ExitCode::from(if e.use_stderr() {
            exit::USAGE
        } else {
            exit::OK
        })
    })
}

/// The pack checks allocate megabytes in small pieces, partly on a worker thread (`pack::load`).
/// glibc gives a thread's new heap M_TOP_PAD bytes (128 KiB) and then grows it by what each request
/// needs, one `mprotect` call at a time: ~130 calls for a 200-persona pack. With 1 MiB it is ~10, and
/// the main heap's `brk` calls halve. Address space reserved this way costs no memory until touched.
/// (Setting it also pins glibc's mmap threshold at its 128 KiB default; these commands make few
/// allocations that large.)
fn grow_heaps_in_large_steps() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: sets one glibc allocator tuning parameter; takes no pointers, and runs before any
    // thread is started.
    unsafe {
        libc::mallopt(libc::M_TOP_PAD, 1 << 20);
    }
}

fn init_logging(verbose: u8, live: bool) {
    use tracing_subscriber::EnvFilter;
    // The HTTP client logs request URLs at debug and raw bytes at trace: credentials in a source
    // URL (`?token=`) would reach the log. It stays at info unless RUST_LOG names it.
    let default = match verbose {
        0 if live => "warn,apiary=info",
        0 => "warn",
        1 => "debug,ureq=info,ureq_proto=info",
        _ => "trace,ureq=info,ureq_proto=info",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colour codes only for a person at a terminal, never into log files or pipes.
        .with_ansi(stderr_is_terminal() && std::env::var_os("NO_COLOR").is_none())
        .with_target(false)
        .try_init();
}

/// Leaves a one-shot command's large results for the process exit to reclaim: dropping a resolved
/// 200-persona pack allocation by allocation is a tenth of `pack inspect`'s time, for nothing.
pub(crate) fn free_at_exit<T>(value: T) {
    std::mem::forget(value);
}

/// Whether stderr is a terminal (colour and progress only then).
pub(crate) fn stderr_is_terminal() -> bool {
    use std::io::IsTerminal;
    std::io::stderr().is_terminal()
}
