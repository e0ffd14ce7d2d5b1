//! `apiary up | post | tail`: the live harness and its terminal companions.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use nostr_sdk::prelude::*;

use super::output::{Document, Failed, Human, Outcome, render};
use super::{bounded, exit, stderr_is_terminal};
use crate::acp::{AgentCommand, PermissionPolicy};
use crate::diag::Report;
use crate::dispatch::event;
use crate::dispatch::sandboxed::{SandboxHooks, SandboxTriggers};
use crate::dispatch::shard::Shard;
use crate::dispatch::{self, NativeTriggers, Note, PackRun, TriggerMatcher};
use crate::dist::trust::policy::{NOT_AT_START, StoreTrust};
use crate::dist::trust::{PackRef, TrustView};
use crate::ops::Ops;
use crate::paths::{self, Data};
use crate::relay::{self, keys::KeyStore};
use crate::resolve::{self, Overrides};

mod names;
mod packs;
mod view;
mod watch;

/// The default address of the embedded relay, so `post` and `tail` find it without flags.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:4869";

/// The most turns (or events) a minute a rate flag takes: far above any real rate, far below
/// what a per-minute window can overflow on.
const TURNS_MAX: u64 = 1_000_000;

/// After `up -h`: the first examples and where the rest is.
const UP_SHORT_HELP: &str = "\
Examples:
  apiary up                       # installed packs (none: the bundled example, in #general)
  apiary up ./my-pack --agent claude-code
  apiary post --channel general '@bee hello'   # from a second terminal

`apiary up --help` shows every option (limits, shards, confinement, trust), the output and the
environment; the docs: docs/operators.md.";

const UP_EXAMPLES: &str = "\
Examples:
  apiary up                                   # every installed pack (none: the bundled Hello Hive pack),
                                              # reloading each one installed, upgraded or uninstalled
  apiary up com.example.pack                  # one installed pack, by id (reloaded when it changes)
  apiary up ./my-pack --relay wss://relay.example.com
  apiary up ./my-pack --agent 'goose acp'     # any ACP v1 agent
  apiary up ./my-pack --listen 127.0.0.1:0    # a free port; the first stdout line names it

Output: on a terminal, a live status view (one row per persona: agent state, queue depth, trigger
wakes and skips, hook runs and drops, replies, errors, last event; the latest lines under it),
redrawn in place; the final table stays on screen when `up` stops. With --plain, or when stdout is
not a terminal (a pipe, a file, a service log), one line per thing that happened:
  relay ws://127.0.0.1:4869
  channels are named by the relay's key <16 hex>
  persona bee ready pubkey=<hex> channels=#general system_prompt=session
  ready personas=2 channels=1
  event <id> #general from <author>: woke bee (mention)
  reply bee <reply-id> to <id>

With --json, one JSON object per line instead; `event` names the kind. Every event and its keys:
docs/reference/events.md (generated from the code).

Identity: persona keys (<data dir>/keys/<namespace>/) and workspaces
(<workspace root>/<namespace>/<persona>/) belong to the installed pack or to the directory that owns a
pack id, never to whoever declares it. The namespace is the pack id for the pack installed as
<root>/<pack-id>, and for a directory that is not installed when no other pack owns the id (the
first directory run under it owns it, recorded in <data dir>/keys/<pack-id>/owner.json). Another
directory declaring that id is refused, naming the owner; with --allow-id-conflict it runs as
<pack-id>@<digest of its path>, with keys and workspaces of its own.

Channel names map to group ids only through kind 39000 metadata signed by the relay's own key (the
`pubkey` of its NIP-11 document; the embedded relay's is <data dir>/keys/relay.key) or by a key given
with --channel-authority; anyone else's metadata is ignored. Without any, a name is its own id.

The embedded relay's limits (defaults; the same flags on `apiary relay`): events up to 64 KiB
(--max-event-bytes), 50000 events and 64 MiB stored (--max-stored-events, --max-stored-bytes), 120
events a minute per key (--key-rate) and 600 per connection (--connection-rate). With --relay-auth
only keys of the operator's key store (<data dir>/keys: the operator's and the personas') and
--relay-allow-key keys may authenticate.
Flood limits: each persona gives one author at most --author-turns turns a minute (over all
its channels) and takes at most --channel-turns turns a minute in one channel (token buckets: a
full minute's turns at once, then one at a time as they refill). Messages over a limit wait and
are answered together in the author's next turn, while other authors are served; only an author's
messages beyond 20 waiting (the oldest) are dropped, and on stopping whatever still waits for a
turn. Each is reported as `limited`. Waiting messages of one author, or of one thread, are
answered in one turn. One persona's own rates, in place of the flags, go in the overrides file:
  limits = { author_turns_per_minute = 2, channel_turns_per_minute = 10 }   (0: no limit)
Spending limits per persona, over all its channels, from the overrides file
  [\"com.example.pack\".bee]
  limits = { turns_per_hour = 20, turns_per_day = 200, tokens_per_day = 500000 }
or from the [limits] table of <root>/.apiary/agents/<pack-id>/<persona>/agent.toml (the overrides
file wins key by key): a turn over one is not taken, its messages are dropped and reported as
`limited`. Tokens are those the agent reports (usage.totalTokens of its prompt answers, or the
context in use of its last usage_update in the turn, whichever is larger). The status view's
LIMIT column shows used/allowed of the persona's tightest spending limit (h: turns an hour,
d: turns a day, tok: tokens a day).

Trust: script hooks and stdio MCP servers run on this host, outside the sandbox, so only what the
operator trusted runs: `apiary trust <pack-id>` for an installed pack (<root>/<pack-id>/),
`apiary trust ./dir` for a pack directory, recorded in <root>/.apiary/trust.json for that location,
the manifest's id and version and the exact files and command lines (nothing beside a pack counts).
The store is used only when it, .apiary/ and the root belong to you and nobody else can write them.
An MCP `${VAR}` reads only variables the operator allows for the pack in the overrides file:
  [\"com.example.pack\"]
  allow_env = [\"GITHUB_TOKEN\"]

Environment:
  APIARY_DATA_DIR            data dir: key store, workspaces, example pack (default: ~/.local/share/apiary)
  APIARY_WORKSPACE_ROOT      root of the persona workspaces (default: <data dir>/workspaces), as
                             for `apiary hook run`; --workspace-root wins over it
  BUZZ_PACKS_DIR             install root (default: ~/.buzz/packs); --root wins over it
  APIARY_OVERRIDES           overrides file (default: ~/.config/apiary/overrides.toml)
  BUZZ_ACP_NO_BASE_PROMPT    leave the [Base] prompt layer out
  BUZZ_ACP_BASE_PROMPT_FILE  replace the [Base] layer with this file's text (a regular file, at
                             most 1 MiB: a FIFO or device is refused)";

#[derive(Debug, Args)]
#[command(after_help = UP_SHORT_HELP, after_long_help = UP_EXAMPLES)]
pub struct UpArgs {
    /// Pack directories or ids of installed packs to run (default: every pack installed in the
    /// install root; the bundled example pack when none is).
    pub packs: Vec<PathBuf>,
    /// Use this relay instead of starting the embedded one.
    #[arg(long, value_name = "URL")]
    pub relay: Option<String>,
    /// Where the embedded relay listens (port 0: any free port).
    #[arg(long, value_name = "ADDR", default_value = DEFAULT_LISTEN, conflicts_with = "relay")]
    pub listen: SocketAddr,
    /// The embedded relay keeps events in memory only (default: journaled under <data dir>/relay/).
    #[arg(long, conflicts_with = "relay")]
    pub ephemeral: bool,
    /// The embedded relay requires NIP-42 authentication to read or publish (every persona
    /// authenticates with its own key; `post` and `tail` with the operator key). Only keys of the
    /// operator's key store and --relay-allow-key keys may authenticate.
    #[arg(hide_short_help = true, long, conflicts_with = "relay")]
    pub relay_auth: bool,
    /// With --relay-auth, also let this key (hex or npub) authenticate; repeatable.
    #[arg(
        hide_short_help = true,
        long,
        value_name = "PUBKEY",
        requires = "relay_auth"
    )]
    pub relay_allow_key: Vec<String>,
    /// Also accept kind 39000 channel metadata signed by this key (hex or npub); repeatable. By
    /// default only the relay's own key (NIP-11 `pubkey`) names channels.
    #[arg(hide_short_help = true, long, value_name = "PUBKEY")]
    pub channel_authority: Vec<String>,
    #[command(flatten)]
    pub limits: RelayLimitArgs,
    /// The agent runtime command line (default: the bundled `apiary-agent`), or a runtime's name
    /// for its agent as its package installs it: claude-code (`claude-code-acp`), codex
    /// (`codex-acp`), gemini (`gemini --experimental-acp`), goose (`goose acp`), claude-agent-acp.
    #[arg(long, value_name = "CMD")]
    pub agent: Option<String>,
    /// How much nicer than apiary agents run, 0-19 (Unix). Below apiary's priority, on a busy
    /// machine, routing a message and writing its prompt come before the agents' own work; an idle
    /// machine still gives agents all the CPU they ask for. 0: apiary's priority.
    #[arg(hide_short_help = true, long, value_name = "N", default_value_t = crate::acp::DEFAULT_AGENT_NICE,
          value_parser = clap::value_parser!(u8).range(0..=19))]
    pub agent_nice: u8,
    /// Start agents even where this machine cannot confine them (no Landlock, no user or network
    /// namespaces): each layer that works is still applied, and the status view, the `ready`
    /// lines and `--json` say which are missing. Without it `up` refuses to start agents there
    /// (the bundled `apiary-agent` excepted, with a notice).
    #[arg(hide_short_help = true, long)]
    pub unconfined_agents: bool,
    /// Run agents as this user (apiary running as root): its workspace, home and temporary
    /// directory become that user's. For runtimes that refuse root (Claude Code); the agent keeps
    /// no capability either way.
    #[arg(hide_short_help = true, long, value_name = "USER")]
    pub agent_user: Option<String>,
    /// Do not publish agents' replies (for agents that publish themselves).
    #[arg(hide_short_help = true, long)]
    pub no_publish: bool,
    /// Do not offer agents apiary's own tools (the MCP server `apiary`: read_thread,
    /// read_channel, search_channel, post, list_personas).
    #[arg(hide_short_help = true, long)]
    pub no_agent_tools: bool,
    /// How many persona-to-persona steps a chain of messages may take: a persona's reply or
    /// post made while answering a message of hop n is hop n+1, and wakes no persona at this
    /// limit (0: personas never wake each other). Which personas may wake which is the pack's
    /// `x-woken-by` (default: its own personas) or the overrides file's `woken_by`.
    #[arg(hide_short_help = true, long, value_name = "N", default_value_t = dispatch::team::DEFAULT_HOP_LIMIT,
          value_parser = bounded::count::<u32>(0, 64))]
    pub hop_limit: u32,
    /// How agents' permission requests are answered, for tools the persona's `x-tool-policy`
    /// admits (a tool it refuses is rejected whatever this says).
    #[arg(hide_short_help = true, long, value_enum, default_value_t = Permission::Deny)]
    pub permission: Permission,
    /// Root of the persona workspaces (each persona gets <root>/<pack-id>/<persona>/; default:
    /// <data dir>/workspaces, as for `apiary hook run`). This deliberately differs from the spec's
    /// fallback to the current directory (§6, PF-4): a daemon should not write into whatever
    /// directory it was started from. A workspace that cannot be created or written refuses its
    /// persona, naming the path. Links found in a workspace (in place of it, `.agents` or
    /// `.agents/skills`) are never followed: that persona is refused with a message naming the
    /// link.
    #[arg(hide_short_help = true, long, alias = "workspace", value_name = "DIR", env = paths::WORKSPACE_ROOT_ENV)]
    pub workspace_root: Option<PathBuf>,
    /// Operator overrides file (precedence level 2). Default: $APIARY_OVERRIDES, else
    /// ~/.config/apiary/overrides.toml when it exists.
    #[arg(hide_short_help = true, long, value_name = "FILE")]
    pub overrides: Option<PathBuf>,
    /// Cancel a turn when the agent is silent this long (seconds).
    #[arg(hide_short_help = true, long, value_name = "SECS", default_value_t = 300,
          value_parser = bounded::secs::<u64>(1, 7 * bounded::DAY))]
    pub idle_timeout: u64,
    /// Cancel a turn that runs longer than this (seconds).
    #[arg(hide_short_help = true, long, value_name = "SECS", default_value_t = 1800,
          value_parser = bounded::secs::<u64>(1, 7 * bounded::DAY))]
    pub turn_timeout: u64,
    /// Decide wakes with the native matcher instead of the sandboxed `trigger-default` component.
    #[arg(hide_short_help = true, long)]
    pub native_triggers: bool,
    /// Turns a minute each persona gives one author, over all its channels (0: no limit).
    #[arg(hide_short_help = true, long, value_name = "N", default_value_t = dispatch::flood::DEFAULT_AUTHOR_TURNS,
          value_parser = bounded::count::<u32>(0, TURNS_MAX))]
    pub author_turns: u32,
    /// Turns a minute each persona takes in one channel (0: no limit).
    #[arg(hide_short_help = true, long, value_name = "N", default_value_t = dispatch::flood::DEFAULT_CHANNEL_TURNS,
          value_parser = bounded::count::<u32>(0, TURNS_MAX))]
    pub channel_turns: u32,
    /// On SIGINT/SIGTERM, wait this long for queued messages (seconds).
    #[arg(hide_short_help = true, long, value_name = "SECS", default_value_t = 30,
          value_parser = bounded::secs::<u64>(0, bounded::DAY))]
    pub drain_timeout: u64,
    /// Install root (default: $BUZZ_PACKS_DIR, else ~/.buzz/packs): its packs own their ids (a
    /// directory declaring the id of a pack installed there is refused, unless
    /// --allow-id-conflict), and its trust store decides which script hooks and stdio MCP servers
    /// run.
    #[arg(hide_short_help = true, long, env = paths::INSTALL_ROOT_ENV, value_name = "DIR")]
    pub root: Option<PathBuf>,
    /// Run a directory whose pack id belongs to another pack (installed, or first run from another
    /// directory) under an identity of its own: new persona keys and workspaces, bound to the
    /// directory (`<pack-id>@<digest>`). Without it such a directory is refused.
    #[arg(hide_short_help = true, long)]
    pub allow_id_conflict: bool,
    /// Trust every script (non-.wasm) hook and every stdio MCP server of these packs without
    /// asking the trust store: they run on the host, unsandboxed (for a pack you are writing).
    /// Without it they run only when `apiary trust` recorded trust for them. The grant covers the
    /// packs, versions and file digests present at start: a pack a reload brings in, a new
    /// version or a changed hook file asks the trust store (an `untrusted` event says so). MCP
    /// `${VAR}`s still need the pack's `allow_env`.
    #[arg(hide_short_help = true, long)]
    pub trust_hooks: bool,
    /// Print one JSON object per line (the events: docs/reference/events.md) instead of plain lines.
    #[arg(long)]
    pub json: bool,
    /// Print plain lines even on a terminal, instead of the live status view.
    #[arg(long, conflicts_with = "json")]
    pub plain: bool,
    /// Run as replica I of N (0-based: 0/3, 1/3, 2/3), owning only the personas whose pack id and
    /// name hash to I (rendezvous hashing: going from N to N+1 moves about 1/(N+1) of them).
    /// `auto/N` takes I from the number ending the host name, as a StatefulSet pod's ordinal
    /// (`apiary-2`). Every replica must run the same packs, on one --relay, with the same persona
    /// keys (--keys-dir). Before a turn and before publishing, a replica asks the relay whether
    /// the persona already answered (`answered_elsewhere`); its subscription cursor is kept in
    /// <data dir>/cursor/shard-I, so a restarted replica answers what arrived while it was down.
    #[arg(
        hide_short_help = true,
        long,
        value_name = "I/N",
        env = "APIARY_SHARD",
        requires = "relay"
    )]
    pub shard: Option<String>,
    /// With --shard, how far back (seconds) a replica without a kept cursor reads the channels
    /// (what it answered already is skipped).
    #[arg(hide_short_help = true, long, value_name = "SECS", default_value_t = 300,
          value_parser = bounded::secs::<u64>(0, 30 * bounded::DAY))]
    pub replay: u64,
    /// Read persona keys from DIR (<pack-id>/<persona>.key, e.g. a mounted Kubernetes Secret)
    /// and never generate one there: a missing key refuses its persona. Replicas share keys this
    /// way; a generated key would differ on each.
    #[arg(
        hide_short_help = true,
        long,
        value_name = "DIR",
        env = "APIARY_KEYS_DIR"
    )]
    pub keys_dir: Option<PathBuf>,
    /// Serve the operations endpoints on ADDR (off by default): /healthz, /readyz (relay
    /// connected, personas started), /metrics (Prometheus) and each persona's A2A agent card at
    /// /personas/<pack-id>/<name>/.well-known/agent-card.json.
    #[arg(long, value_name = "ADDR", env = "APIARY_OPS_ADDR")]
    pub ops_addr: Option<SocketAddr>,
    /// The URL clients reach the operations endpoints at (e.g. https://bees.example.com behind
    /// an ingress): the base of each agent card's `url`. Default: http://<--ops-addr>.
    #[arg(hide_short_help = true, long, value_name = "URL", env = "APIARY_PUBLIC_URL", value_parser = public_url, requires = "ops_addr")]
    pub public_url: Option<String>,
    /// Let other agents talk to the personas over A2A 1.0 (JSON-RPC) on ADDR (off by default):
    /// each persona at <URL>/a2a/<pack-id>/<name>, its card at that base's
    /// /.well-known/agent-card.json. Needs --a2a-tokens.
    #[arg(
        long,
        value_name = "ADDR",
        env = "APIARY_A2A_ADDR",
        requires = "a2a_tokens"
    )]
    pub a2a_addr: Option<SocketAddr>,
    /// The bearer tokens A2A clients may use: lines of `<client> sha256:<hex of the token's
    /// SHA-256>` (`printf %s "$TOKEN" | sha256sum`); no token, no turn.
    #[arg(
        long,
        value_name = "FILE",
        env = "APIARY_A2A_TOKENS",
        requires = "a2a_addr"
    )]
    pub a2a_tokens: Option<PathBuf>,
    /// The URL A2A clients reach --a2a-addr at (behind an ingress): the base of the cards' URLs.
    /// Default: http://<--a2a-addr>.
    #[arg(hide_short_help = true, long, value_name = "URL", env = "APIARY_A2A_PUBLIC_URL", value_parser = public_url, requires = "a2a_addr")]
    pub a2a_public_url: Option<String>,
}

/// `--public-url`: an absolute http(s) URL with no query, fragment or credentials.
fn public_url(s: &str) -> Result<String, String> {
    let url = url::Url::parse(s).map_err(|e| format!("not a URL: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err("give an http:// or https:// URL with a host".into());
    }
    if url.query().is_some() || url.fragment().is_some() || !url.username().is_empty() {
        return Err("give the URL without a query, fragment or credentials".into());
    }
    Ok(url.as_str().trim_end_matches('/').to_string())
}

/// `up --permission`: how agents' permission requests are answered (the harness's
/// [`PermissionPolicy`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Permission {
    /// Pick a reject option (or cancel when the agent offers none).
    Deny,
    /// Pick an allow-once option (or reject when the agent offers none).
    AllowOnce,
}

impl From<Permission> for PermissionPolicy {
    fn from(p: Permission) -> PermissionPolicy {
        match p {
            Permission::Deny => PermissionPolicy::Deny,
            Permission::AllowOnce => PermissionPolicy::AllowOnce,
        }
    }
}
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  apiary post 'hello @bee'\n  apiary post --channel general 'hello @bee'\n  apiary post --channel general --reply-to <event-id> 'and honey?'\n\nPrints the new event's id. Signs with the operator key (<data dir>/keys/operator.key)."
)]
pub struct PostArgs {
    /// Relay URL (default: the last `apiary up` embedded relay, else ws://127.0.0.1:4869).
    #[arg(long, value_name = "URL")]
    pub relay: Option<String>,
    /// Channel name (a leading # is ignored); default: the channel the last `apiary up` serves,
    /// when it serves one.
    #[arg(long, value_name = "NAME")]
    pub channel: Option<String>,
    /// Reply in the thread of this event (hex id).
    #[arg(long, value_name = "EVENT")]
    pub reply_to: Option<String>,
    /// Mention this public key (hex or npub) with a `p` tag; repeatable.
    #[arg(long, value_name = "PUBKEY")]
    pub mention: Vec<String>,
    /// Also accept channel metadata (kind 39000) signed by this key; repeatable (as `up`).
    #[arg(long, value_name = "PUBKEY")]
    pub channel_authority: Vec<String>,
    /// The message text.
    pub text: String,
}

#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  apiary tail\n  apiary tail --channel general\n  apiary tail --channel general --json --count 2 --timeout 30\n\nPrints the last --history messages, then new ones as they arrive. Authenticates (NIP-42), when the relay asks, with the operator key. Authors from the operator's key store are named for what they sign for (`bee (pack com.x, <16 hex>)`, `operator (you, ...)`); any other key is shown whole as `unknown key <npub>`, after the name its profile claims. Control characters, bidirectional overrides and other invisible formatting in message text are shown escaped (`\\u{1b}`); --json prints events as received, with a `signer` field added: {\"npub\", \"key_store\": null or {\"role\": \"operator\"|\"relay\"|\"persona\", \"pack\", \"persona\"}}."
)]
pub struct TailArgs {
    /// Relay URL (default: the last `apiary up` embedded relay, else ws://127.0.0.1:4869).
    #[arg(long, value_name = "URL")]
    pub relay: Option<String>,
    /// Channel name (a leading # is ignored); default: the channel the last `apiary up` serves,
    /// when it serves one.
    #[arg(long, value_name = "NAME")]
    pub channel: Option<String>,
    /// One JSON event per line.
    #[arg(long)]
    pub json: bool,
    /// How many stored messages to show first.
    #[arg(long, value_name = "N", default_value_t = 20,
          value_parser = bounded::count::<usize>(0, 100_000))]
    pub history: usize,
    /// Print the stored messages and exit, without waiting for new ones.
    #[arg(long)]
    pub no_follow: bool,
    /// Exit after printing this many messages.
    #[arg(long, value_name = "N", value_parser = bounded::count::<usize>(1, 1_000_000_000))]
    pub count: Option<usize>,
    /// Exit after this many seconds (status 1 if --count was not reached).
    #[arg(long, value_name = "SECS", value_parser = bounded::secs::<u64>(1, 365 * bounded::DAY))]
    pub timeout: Option<u64>,
    /// Also accept channel metadata (kind 39000) signed by this key; repeatable (as `up`).
    #[arg(long, value_name = "PUBKEY")]
    pub channel_authority: Vec<String>,
}

#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  apiary relay\n  apiary relay --listen 127.0.0.1:0\n\nRuns only the embedded relay (events journaled under <data dir>/relay/) until SIGINT/SIGTERM; the first stdout line names its URL, the second its key (NIP-11 `pubkey`, <data dir>/keys/relay.key). With --require-auth, clients must authenticate (NIP-42) with a key of the operator's key store (<data dir>/keys) or an --allow-key key to read or publish. Use it for `apiary up --relay URL` set-ups where the harness restarts independently.\n\nLimits: events over --max-event-bytes are refused (OK false), a message over four times that (at least 1 MiB more) closes the connection; keys outside the key store publish kinds 9, 1063, 10063 (and 39000 signed by the relay's key) only, hold at most 80% of --max-stored-events and --max-stored-bytes together and 5% each, and past that their oldest events are evicted (the rest is headroom for the key store's keys); the relay warns at 80% full; --key-rate and --connection-rate cap events a minute. A journal that cannot be replayed whole (an invalid line, more of the key store's events than the storage limits) stops the start with a message naming it."
)]
pub struct RelayArgs {
    /// Where the relay listens (port 0: any free port).
    #[arg(long, value_name = "ADDR", default_value = DEFAULT_LISTEN)]
    pub listen: SocketAddr,
    /// Keep events in memory only (default: journaled under <data dir>/relay/).
    #[arg(long)]
    pub ephemeral: bool,
    /// Require NIP-42 authentication before a connection may read or publish.
    #[arg(long)]
    pub require_auth: bool,
    /// With --require-auth, also let this key (hex or npub) authenticate; repeatable.
    #[arg(long, value_name = "PUBKEY", requires = "require_auth")]
    pub allow_key: Vec<String>,
    #[command(flatten)]
    pub limits: RelayLimitArgs,
}

/// The embedded relay's caps (see [`relay::limits::Limits`] for the defaults).
#[derive(Debug, Args)]
pub struct RelayLimitArgs {
    /// Embedded relay: largest client message (EVENT, REQ, ...) accepted, in bytes, at least 1024
    /// [default: 65536].
    #[arg(hide_short_help = true, long, value_name = "BYTES", value_parser = bounded::bytes::<usize>(1024, 64 << 20))]
    pub max_event_bytes: Option<usize>,
    /// Embedded relay: events stored; past it the oldest of keys outside the key store are evicted
    /// [default: 50000].
    #[arg(hide_short_help = true, long, value_name = "N", value_parser = bounded::count::<u64>(1, 1_000_000_000))]
    pub max_stored_events: Option<u64>,
    /// Embedded relay: bytes of events stored; past it the oldest of keys outside the key store are
    /// evicted [default: 67108864].
    #[arg(hide_short_help = true, long, value_name = "BYTES", value_parser = bounded::bytes::<u64>(1, 1 << 40))]
    pub max_stored_bytes: Option<u64>,
    /// Embedded relay: events a minute one key may publish [default: 120].
    #[arg(hide_short_help = true, long, value_name = "N", value_parser = bounded::count::<u32>(1, TURNS_MAX))]
    pub key_rate: Option<u32>,
    /// Embedded relay: events a minute one connection may publish [default: 600].
    #[arg(hide_short_help = true, long, value_name = "N", value_parser = bounded::count::<u32>(1, TURNS_MAX))]
    pub connection_rate: Option<u32>,
    /// Embedded relay: also serve a Blossom blob server (pack archives for `apiary publish` and
    /// `install --relay`) on the relay's port, storing blobs in DIR.
    #[arg(long, value_name = "DIR")]
    pub blobs: Option<PathBuf>,
    /// Embedded relay: the largest blob the blob server takes, in bytes [default: 67108864].
    #[arg(hide_short_help = true, long, value_name = "BYTES", requires = "blobs", value_parser = bounded::bytes::<u64>(1, 1 << 40))]
    pub blobs_max_bytes: Option<u64>,
    /// Embedded relay: all blobs together, in bytes [default: 1073741824].
    #[arg(hide_short_help = true, long, value_name = "BYTES", requires = "blobs", value_parser = bounded::bytes::<u64>(1, 1 << 44))]
    pub blobs_total_bytes: Option<u64>,
    /// Embedded relay: the URL the blob server announces blobs at (behind a proxy)
    /// [default: http://<listen address>].
    #[arg(hide_short_help = true, long, value_name = "URL", requires = "blobs")]
    pub blobs_url: Option<String>,
}

impl RelayLimitArgs {
    fn given(&self) -> bool {
        self.max_event_bytes.is_some()
            || self.max_stored_events.is_some()
            || self.max_stored_bytes.is_some()
            || self.key_rate.is_some()
            || self.connection_rate.is_some()
            || self.blobs.is_some()
    }

    /// The blob server's settings, with `--blobs`.
    fn blobs(&self) -> Option<relay::embedded::BlobSettings> {
        let d = relay::blobs::Caps::default();
        Some(relay::embedded::BlobSettings {
            dir: self.blobs.clone()?,
            caps: relay::blobs::Caps {
                max_blob_bytes: self.blobs_max_bytes.unwrap_or(d.max_blob_bytes),
                max_total_bytes: self.blobs_total_bytes.unwrap_or(d.max_total_bytes),
            },
            public_url: self.blobs_url.clone(),
        })
    }

    fn limits(&self) -> relay::limits::Limits {
        let d = relay::limits::Limits::default();
        relay::limits::Limits {
            max_event_bytes: self.max_event_bytes.unwrap_or(d.max_event_bytes).max(1024),
            max_stored_events: self.max_stored_events.unwrap_or(d.max_stored_events),
            max_stored_bytes: self.max_stored_bytes.unwrap_or(d.max_stored_bytes),
            per_key_per_minute: self.key_rate.unwrap_or(d.per_key_per_minute).max(1),
            per_connection_per_minute: self
                .connection_rate
                .unwrap_or(d.per_connection_per_minute)
                .max(1),
            ..d
        }
    }
}

/// Public keys given on the command line (hex or npub); a usage error names the bad one.
fn parse_keys(flag: &str, values: &[String]) -> Result<Vec<PublicKey>, Failed> {
    values
        .iter()
        .map(|v| {
            PublicKey::parse(v).map_err(|_| {
                Failed::usage(format_args!(
                    "{flag} `{v}` is not a public key (hex or npub)"
                ))
            })
        })
        .collect()
}

/// The embedded relay's settings from the command line.
fn embedded_settings(
    data: &Data,
    ephemeral: bool,
    auth: bool,
    allow: Vec<PublicKey>,
    limits: &RelayLimitArgs,
) -> anyhow::Result<relay::embedded::Settings> {
    let store = data.key_store();
    let keys = store
        .relay()
        .map_err(|e| anyhow::anyhow!("key store: {e:#}"))?;
    Ok(relay::embedded::Settings {
        journal: (!ephemeral).then(|| data.relay_journal()),
        keys,
        limits: limits.limits(),
        key_store: Some(store),
        auth: auth.then_some(allow),
        blobs: limits.blobs(),
    })
}

fn runtime() -> Result<tokio::runtime::Runtime, Failed> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| Failed::error(format_args!("cannot start the async runtime: {e}")))
}

fn say(line: String) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// The bundled example pack, written under the data dir on first use.
mod example {
    pub const FILES: &[(&str, &str)] = &[
        (
            ".plugin/plugin.json",
            include_str!("../../packs/hello/.plugin/plugin.json"),
        ),
        (
            "agents/bee.persona.md",
            include_str!("../../packs/hello/agents/bee.persona.md"),
        ),
        (
            "agents/sage.persona.md",
            include_str!("../../packs/hello/agents/sage.persona.md"),
        ),
        (
            "skills/greeting/SKILL.md",
            include_str!("../../packs/hello/skills/greeting/SKILL.md"),
        ),
        (
            "instructions.md",
            include_str!("../../packs/hello/instructions.md"),
        ),
    ];
}

fn write_example(dir: &Path) -> std::io::Result<()> {
    if dir.join(".plugin/plugin.json").is_file() {
        return Ok(());
    }
    let tmp = dir.with_extension(format!("partial-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    for (rel, text) in example::FILES {
        let path = tmp.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(path, text)?;
    }
    if let Some(parent) = dir.parent() {
        std::fs::create_dir_all(parent)?;
    }
    match std::fs::rename(&tmp, dir) {
        Ok(()) => Ok(()),
        Err(_) if dir.join(".plugin/plugin.json").is_file() => {
            let _ = std::fs::remove_dir_all(&tmp);
            Ok(())
        }
        Err(e) => Err(e),
    }
}

/// `example <dir>`: nothing is installed, so `up` runs the bundled example; where it is and how
/// to start a pack of one's own from it.
fn example_note(dir: &Path) -> Note {
    let path = dir.display().to_string();
    let quoted = apiary_core::shell::quote(&path);
    let text = format!(
        "example: nothing installed, running the bundled example pack at {path}; to start your own, \
         `apiary pack new ./my-pack` (or copy this one: cp -r {quoted} ./my-pack, with an id of its \
         own in .plugin/plugin.json), then `apiary pack validate ./my-pack` and `apiary up ./my-pack`"
    );
    Note::new(event::Event::Example { path }, text)
}

/// `confinement <layers>`, with what is missing and why when something is.
fn confinement_note(c: &dispatch::confine::Confinement) -> Note {
    let layers = c.label();
    let text = match &c.missing {
        None => format!(
            "confinement {layers}: agents see their workspace, the system and their runtime; network only through apiary"
        ),
        Some(why) => format!("confinement {layers}: NOT fully confined, {why}"),
    };
    let confinement = event::Event::Confinement {
        layers,
        complete: c.complete(),
        missing: c.missing.clone(),
    };
    Note::new(confinement, text)
}

/// What this machine can enforce on agents, and what `up` does about it (see
/// [`dispatch::confine::Confinement::decide`]).
fn confinement(
    args: &UpArgs,
    agent: &AgentCommand,
) -> Result<dispatch::confine::Confinement, Failed> {
    use dispatch::confine::{AgentUser, Confinement};
    let user = match args.agent_user.as_deref() {
        Some(name) => Some(AgentUser::lookup(name).map_err(Failed::usage)?),
        None => None,
    };
    let launcher = std::env::current_exe().map_err(|e| {
        Failed::error(format_args!(
            "cannot find apiary's own binary to confine agents: {e}"
        ))
    })?;
    let support = apiary_confine::Support::detect(&launcher);
    let bundled = agent
        .program
        .file_stem()
        .is_some_and(|n| n == "apiary-agent");
    let accept_less = if args.unconfined_agents {
        Some("--unconfined-agents")
    } else if bundled {
        Some("the bundled apiary-agent needs no confinement")
    } else {
        None
    };
    Confinement::decide(launcher, support, accept_less, user).map_err(Failed::error)
}

fn default_agent() -> AgentCommand {
    let name = format!("apiary-agent{}", std::env::consts::EXE_SUFFIX);
    let sibling = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(|p| p.join(&name)))
        .filter(|p| p.is_file());
    AgentCommand {
        program: sibling.unwrap_or_else(|| PathBuf::from(name)),
        args: vec![],
    }
}

/// Where persona identities come from (see [`crate::dist::identity`]).
struct Identities<'a> {
    /// The operator's install root, when one is known.
    root: Option<PathBuf>,
    keys: &'a KeyStore,
    allow_conflict: bool,
}

impl Identities<'_> {
    /// The namespace `dir` (declaring `id`) runs under, or the refusal.
    fn namespace(&self, dir: &Path, id: &str) -> Result<String, Failed> {
        use crate::dist::identity::{self, Kind, Request};
        let identity = identity::resolve(&Request {
            root: self.root.as_deref(),
            keys: self.keys,
            dir,
            id,
            allow_conflict: self.allow_conflict,
            // A provisioned key store (a mounted Secret) is read-only: no owner record is written.
            claim: !self.keys.is_provisioned(),
        })
        .map_err(|e| {
            let help = e.help.as_ref().map(|h| format!("  help: {h}\n"));
            Failed::text(
                exit::FAILURE,
                format!("error: {}\n{}", e.message, help.unwrap_or_default()),
            )
        })?;
        match &identity.kind {
            Kind::Installed { source } => {
                if let Some(root) = &self.root {
                    packs::intact(root, id).map_err(|why| {
                        Failed::error(format_args!("the installed pack {id}: {why}"))
                    })?;
                }
                tracing::info!(pack = id, %source, "running the installed pack")
            }
            Kind::Owner => {}
            Kind::Separate { owner } => eprintln!(
                "warning: {} declares the pack id `{id}`, which belongs to {owner}; running it under an identity of its own, {} (--allow-id-conflict)",
                dir.display(),
                identity.namespace
            ),
        }
        Ok(identity.namespace)
    }
}

/// The packs to run, loaded, validated and resolved (warnings shown as they are found).
fn load_packs(
    dirs: &[PathBuf],
    overrides: Option<&Path>,
    identities: &Identities<'_>,
) -> Result<Vec<PackRun>, Failed> {
    let overrides = match paths::overrides_file(overrides) {
        Some(path) => {
            let mut report = Report::default();
            let o = Overrides::load(&path, &mut report);
            if report.has_errors() {
                return Err(Failed::report(&report, ""));
            }
            o
        }
        None => Overrides::default(),
    };
    let mut runs = Vec::new();
    for dir in dirs {
        let loaded = crate::pack::load(dir);
        let Some(pack) = loaded.pack else {
            let line = format!(
                "error: {} is not a valid pack; not starting\n",
                dir.display()
            );
            return Err(Failed::report(&loaded.report, line));
        };
        if loaded.report.warnings() > 0 {
            eprint!("{}", loaded.report.render(stderr_is_terminal()));
        }
        // Hooks, overrides and the status view are keyed by pack id: one pack per id.
        if let Some(other) = runs
            .iter()
            .find(|r: &&PackRun| r.pack.manifest.id == pack.manifest.id)
        {
            return Err(Failed::error(format_args!(
                "{} and {} both declare the pack id `{}`; `up` runs one pack per id",
                other.pack.root.display(),
                dir.display(),
                pack.manifest.id
            )));
        }
        let namespace = identities.namespace(dir, &pack.manifest.id)?;
        let resolved = resolve::resolve(&pack, &overrides, &resolve::process_env);
        runs.push(PackRun {
            pack,
            resolved,
            namespace,
        });
    }
    Ok(runs)
}

/// Each persona's spending limits: the overrides file's `limits`, key by key over the `[limits]`
/// of the `agent.toml` an expert-pack install wrote for it. An unreadable `agent.toml` stops the
/// start: limits the operator set must not be skipped.
fn persona_limits(
    packs: &[PackRun],
    overrides: Option<&Path>,
    root: &Path,
) -> Result<HashMap<(String, String), dispatch::limits::PersonaLimits>, Failed> {
    // load_packs already refused a file with errors.
    let overrides = paths::overrides_file(overrides)
        .map(|path| Overrides::load(&path, &mut Report::default()))
        .unwrap_or_default();
    let mut out = HashMap::new();
    for run in packs {
        let id = &run.resolved.pack.id;
        for persona in &run.resolved.personas {
            let name = &persona.identity.name;
            let installed = crate::dist::agent_config::limits(root, id, name)
                .map_err(|e| Failed::error(format_args!("limits of {id}/{name}: {e}")))?;
            let operator = overrides
                .get(id, name)
                .map(|o| o.limits)
                .unwrap_or_default();
            let limits = operator.or(installed);
            if !limits.is_empty() {
                out.insert((id.clone(), name.clone()), limits);
            }
        }
    }
    Ok(out)
}

/// Takes every stdio MCP server that neither the operator's trust store nor `--trust-hooks`
/// (`at_start`) trusts out of the personas' configuration (the persona runs without it) and
/// returns an `untrusted` note for each.
fn withhold_untrusted_mcp(
    packs: &mut [PackRun],
    refs: &[PackRef],
    trust: &TrustView,
    at_start: Option<&TrustView>,
) -> Vec<Note> {
    let mut notes = Vec::new();
    for (run, pack) in packs.iter_mut().zip(refs) {
        for persona in &mut run.resolved.personas {
            let name = persona.identity.name.clone();
            persona.mcp_servers.retain(|server| {
                if at_start.is_some_and(|s| s.mcp_server(pack, server).is_ok()) {
                    return true;
                }
                let Err(e) = trust.mcp_server(pack, server) else {
                    return true;
                };
                let why = match at_start {
                    Some(_) => format!("{} ({NOT_AT_START})", e.message),
                    None => e.message,
                };
                let line = crate::dist::trust::command_line(server).unwrap_or_default();
                let help = format!(
                    "review it, then `{}` or `apiary up --trust-hooks`",
                    e.help.unwrap_or_else(|| trust.remedy(pack))
                );
                tracing::warn!(persona = %name, "MCP server `{}` (`{line}`) not handed to the agent: {why}; {help}", server.name);
                let text = format!(
                    "untrusted {name} mcp_server {}: not handed to the agent: {why}; command: {line}; {help}",
                    server.name
                );
                let untrusted = event::Event::Untrusted {
                    persona: name.clone(),
                    pack: pack.id.clone(),
                    kind: "mcp_server".into(),
                    name: server.name.clone(),
                    command: line,
                    reason: why,
                    help: Some(help),
                };
                notes.push(Note::new(untrusted, text));
                false
            });
        }
    }
    notes
}

/// Registers SIGINT/SIGTERM handlers now (so a signal during start-up is not lost) and returns a
/// future that completes on the first of them. Must be called inside the runtime.
fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let term = signal(SignalKind::terminate());
        let int = signal(SignalKind::interrupt());
        async move {
            match (term, int) {
                (Ok(mut term), Ok(mut int)) => {
                    tokio::select! {
                        _ = term.recv() => {}
                        _ = int.recv() => {}
                    }
                }
                _ => {
                    let _ = tokio::signal::ctrl_c().await;
                }
            }
        }
    }
    #[cfg(not(unix))]
    async {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// Everything `up` settles before it starts: the packs, what the operator trusts of them, the agent,
/// the relay.
struct Plan {
    data: Data,
    /// Running the installed packs: their root and lock entries, watched for changes.
    watched: Option<Watched>,
    persona_limits: HashMap<(String, String), dispatch::limits::PersonaLimits>,
    keys: KeyStore,
    packs: Vec<PackRun>,
    pack_refs: Vec<PackRef>,
    trust: TrustView,
    /// `--trust-hooks`: trust for what `up` started with.
    at_start: Option<Arc<TrustView>>,
    /// `untrusted` notes for the MCP servers held back, reported once the relay is up.
    trust_notes: Vec<Note>,
    base_prompt: Option<String>,
    agent: AgentCommand,
    authorities: Vec<PublicKey>,
    /// The embedded relay's settings; `None` with `--relay`.
    settings: Option<relay::embedded::Settings>,
    /// This replica's shard (`--shard`).
    shard: Option<Shard>,
    /// How agents are confined here.
    confinement: dispatch::confine::Confinement,
    /// What no agent may read by way of its program's location.
    private_dirs: Vec<PathBuf>,
}

pub fn up(args: UpArgs) -> u8 {
    let plan = match plan(&args) {
        Ok(p) => p,
        Err(f) => return render(&f, false),
    };
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(f) => return render(&f, false),
    };
    let (printer, out) = start_printer(&args, &plan.packs, plan.shard);
    let code = rt.block_on(serve(&args, plan, out));
    // Agents and sockets are closed; do not wait for stray blocking tasks.
    rt.shutdown_timeout(Duration::from_secs(1));
    printer.finish();
    code
}

/// `up` before anything runs: the packs loaded under their identities, untrusted MCP servers held
/// back, and the command line checked.
fn plan(args: &UpArgs) -> Result<Plan, Failed> {
    let data = Data::locate();
    let (pack_dirs, watched) = pack_dirs(args, &data)?;
    let shard = match &args.shard {
        Some(text) => Some(
            Shard::parse(text, hostname().as_deref())
                .map_err(|e| Failed::usage(format_args!("--shard (or APIARY_SHARD): {e}")))?,
        ),
        None => None,
    };
    let keys = match &args.keys_dir {
        Some(dir) => KeyStore::provisioned(dir),
        None => data.key_store(),
    };
    let identities = Identities {
        root: paths::install_root(args.root.as_deref().filter(|r| !r.as_os_str().is_empty())).ok(),
        keys: &keys,
        allow_conflict: args.allow_id_conflict,
    };
    let mut packs = load_packs(&pack_dirs, args.overrides.as_deref(), &identities)?;
    let root = paths::install_root(args.root.as_deref()).map_err(Failed::error)?;
    let persona_limits = persona_limits(&packs, args.overrides.as_deref(), &root)?;
    let trust = TrustView::load(&root);
    if let Some(problem) = trust.problem() {
        eprintln!(
            "warning: {problem}; no script hook or stdio MCP server of a pack is trusted (fix it with chmod go-w, or run with --trust-hooks)"
        );
    }
    let pack_refs: Vec<PackRef> = packs.iter().map(|p| PackRef::of(&p.pack)).collect();
    // `--trust-hooks` is bound to what is here now; what a reload brings asks the store.
    let at_start = args.trust_hooks.then(|| {
        let start: Vec<&crate::pack::Pack> = packs.iter().map(|p| &p.pack).collect();
        Arc::new(TrustView::granted_at_start(&root, &start))
    });
    let mut trust_notes =
        withhold_untrusted_mcp(&mut packs, &pack_refs, &trust, at_start.as_deref());
    let example = data.example_pack();
    if pack_dirs == [example.clone()] {
        trust_notes.insert(0, example_note(&example));
    }
    let base_prompt =
        dispatch::prompt::base_from_env(&resolve::process_env).map_err(Failed::usage)?;
    let agent = match &args.agent {
        Some(line) => {
            // A runtime's name stands for its agent's command line (`--agent codex`).
            let line = crate::runtime::Runtime::preset(line).unwrap_or(line);
            AgentCommand::parse(line).ok_or_else(|| Failed::usage("--agent is empty"))?
        }
        None => default_agent(),
    };
    let confinement = confinement(args, &agent)?;
    let mut private_dirs = vec![data.dir().to_path_buf(), root.clone()];
    private_dirs.extend(dirs::home_dir());
    let (authorities, allow) = match (
        parse_keys("--channel-authority", &args.channel_authority),
        parse_keys("--relay-allow-key", &args.relay_allow_key),
    ) {
        (Ok(authorities), Ok(allow)) => (authorities, allow),
        (Err(a), Err(b)) => return Err(a.and(b)),
        (Err(e), _) | (_, Err(e)) => return Err(e),
    };
    if args.relay.is_some() && args.limits.given() {
        return Err(Failed::usage(
            "the relay limit flags apply to the embedded relay, not to --relay",
        ));
    }
    let settings = match &args.relay {
        Some(_) => None,
        None => Some(
            embedded_settings(&data, args.ephemeral, args.relay_auth, allow, &args.limits)
                .map_err(|e| Failed::error(format_args!("{e:#}")))?,
        ),
    };
    Ok(Plan {
        data,
        watched,
        persona_limits,
        keys,
        packs,
        pack_refs,
        trust,
        at_start,
        trust_notes,
        base_prompt,
        agent,
        authorities,
        settings,
        shard,
        confinement,
        private_dirs,
    })
}

/// The host name: `$HOSTNAME` (set in every Kubernetes container), else the kernel's.
fn hostname() -> Option<String> {
    std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .map(|h| h.trim().to_string())
}

/// What runs installed packs watches for changes: the install root and what `pack.lock` said.
/// What runs installed packs watches for changes: the install root, what `pack.lock` said, and
/// the ids given (`None`: every installed pack).
type Watched = (
    PathBuf,
    std::collections::BTreeMap<String, crate::dist::lock::LockEntry>,
    Option<std::collections::BTreeSet<String>>,
);

/// The packs given (directories or installed pack ids), else every installed pack (then watched
/// for changes), else the bundled example (written under the data dir on first use).
fn pack_dirs(args: &UpArgs, data: &Data) -> Result<(Vec<PathBuf>, Option<Watched>), Failed> {
    let root = paths::install_root(args.root.as_deref().filter(|r| !r.as_os_str().is_empty())).ok();
    if !args.packs.is_empty() {
        let dirs = packs::chosen(&args.packs, root.as_deref())?;
        // Only installed packs given by id are watched (a directory is not an install).
        let ids: std::collections::BTreeSet<String> = args
            .packs
            .iter()
            .filter(|a| !a.exists() && a.components().count() == 1)
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let watched = match &root {
            Some(root) if ids.len() == args.packs.len() => {
                let mut known = packs::present(root, packs::lock(root)?);
                known.retain(|id, _| ids.contains(id));
                Some((root.clone(), known, Some(ids)))
            }
            _ => None,
        };
        return Ok((dirs, watched));
    }
    if let Some(root) = &root {
        let installed = packs::present(root, packs::lock(root)?);
        if !installed.is_empty() {
            let dirs = installed.keys().map(|id| root.join(id)).collect();
            return Ok((dirs, Some((root.clone(), installed, None))));
        }
    }
    let dir = data.example_pack();
    write_example(&dir).map_err(|e| {
        Failed::error(format_args!(
            "cannot write the example pack to {}: {e}",
            dir.display()
        ))
    })?;
    Ok((vec![dir], None))
}

/// Plain or JSON lines, or the status view on a terminal.
fn start_printer(
    args: &UpArgs,
    packs: &[PackRun],
    shard: Option<Shard>,
) -> (Printer, dispatch::Out) {
    if args.json || args.plain || !view::wanted() {
        let (thread, out) = printer(args.json);
        return (Printer::Lines(thread), out);
    }
    let personas = packs
        .iter()
        .flat_map(|p| {
            p.resolved
                .personas
                .iter()
                .filter(move |persona| {
                    shard.is_none_or(|s| s.owns(&p.resolved.pack.id, &persona.identity.name))
                })
                .map(|persona| (p.resolved.pack.id.clone(), persona.identity.name.clone()))
        })
        .collect();
    let (view, out) = view::start(personas);
    (Printer::View(view), out)
}

/// `up` running: the relay started (or reached), the harness dispatching until SIGINT/SIGTERM and
/// then drained. Errors are printed here, while the status view still shows stderr.
async fn serve(args: &UpArgs, plan: Plan, out: dispatch::Out) -> u8 {
    let shutdown = shutdown_signal();
    let connection = Arc::new(std::sync::OnceLock::new());
    let (out, ops_url) = match args.ops_addr {
        None => (out, None),
        Some(addr) => match start_ops(addr, args.public_url.clone(), &plan, &connection).await {
            Ok((ops, bound)) => (ops.observe(out), Some(format!("http://{bound}"))),
            Err(f) => return render(&f, false),
        },
    };
    let desk = match args.a2a_addr {
        None => None,
        Some(addr) => match start_a2a(addr, args, &plan).await {
            Ok((desk, url)) => {
                let text = format!("a2a {url}");
                out(Note::new(event::Event::A2a { url }, text));
                Some(desk)
            }
            Err(f) => return render(&f, false),
        },
    };
    let journal = plan.settings.as_ref().and_then(|s| s.journal.clone());
    let embedded = match plan.settings {
        None => None,
        Some(settings) => match start_embedded(args.listen, settings).await {
            Ok(e) => Some(e),
            Err(f) => return render(&f, false),
        },
    };
    let relay_url = match (&args.relay, &embedded) {
        (Some(url), _) => url.clone(),
        (None, Some(e)) => e.url.clone(),
        (None, None) => unreachable!("an embedded relay was started"),
    };
    let channel_authority = announce(&out, &relay_url, embedded.as_ref(), plan.authorities).await;
    if let Some(url) = ops_url {
        let text = format!("ops {url}");
        out(Note::new(event::Event::Ops { url }, text));
    }
    if let Some(url) = embedded.as_ref().and_then(|e| e.blobs_url.clone()) {
        let text = format!("blobs {url} (Blossom: apiary publish --blobs {url})");
        out(Note::new(event::Event::Blobs { url }, text));
    }
    out(confinement_note(&plan.confinement));
    for note in plan.trust_notes {
        out(note);
    }
    if let Some(e) = &embedded {
        remember_embedded(&plan.data, &relay_url, e.restored, journal.as_deref());
        remember_channels(&plan.data, &plan.packs);
        report_storage(e.storage_alarms(), Arc::clone(&out));
    }
    let cluster = cluster(args, plan.shard, &plan.data, connection);
    let reloads = plan.watched.map(|(root, known, only)| {
        let w = watch::Watch {
            root,
            only,
            overrides: args.overrides.clone(),
            keys: plan.keys.clone(),
            allow_conflict: args.allow_id_conflict,
            at_start: plan.at_start.clone(),
        };
        watch::start(w, known, Arc::clone(&out))
    });
    let config = dispatch::Config {
        relay: relay_link(embedded.as_ref(), relay_url),
        agent: plan.agent,
        agent_nice: args.agent_nice,
        publish: !args.no_publish,
        policy: args.permission.into(),
        idle_timeout: Duration::from_secs(args.idle_timeout.max(1)),
        turn_timeout: Duration::from_secs(args.turn_timeout.max(1)),
        drain_timeout: Duration::from_secs(args.drain_timeout),
        workspace_root: plan.data.workspace_root(args.workspace_root.as_deref()),
        keys: plan.keys,
        base_prompt: plan.base_prompt,
        channel_authority,
        limits: dispatch::TurnLimits {
            per_author: dispatch::Rate::per_minute(args.author_turns),
            per_channel: dispatch::Rate::per_minute(args.channel_turns),
        },
        cluster,
        sessions_dir: Some(plan.data.sessions()),
        persona_limits: plan.persona_limits,
        confinement: plan.confinement,
        private_dirs: plan.private_dirs,
        desk,
        agent_tools: !args.no_agent_tools,
        hop_limit: args.hop_limit,
    };
    let matcher = trigger_matcher(args.native_triggers).await;
    let trust = StoreTrust::new(
        plan.trust,
        &plan.pack_refs,
        paths::install_root(args.root.as_deref()).ok(),
    )
    .trusting_at_start(plan.at_start);
    let hooks = sandbox_hooks(&plan.packs, trust, &out);
    let result = dispatch::run_reloading(
        config,
        plan.packs,
        matcher,
        Arc::new(hooks),
        out,
        reloads,
        shutdown,
    )
    .await;
    if let Some(e) = &embedded {
        e.shutdown();
    }
    match result {
        Ok(_) => exit::OK,
        Err(e) => render(&Failed::error(format_args!("{e:#}")), false),
    }
}

/// The harness's link to the relay. Only our own embedded relay is in process: it checked each
/// event before storing it.
fn relay_link(embedded: Option<&relay::embedded::Embedded>, url: String) -> dispatch::RelayLink {
    match embedded {
        Some(e) => dispatch::RelayLink::InProcess {
            url,
            door: Box::new(e.door()),
        },
        None => dispatch::RelayLink::Remote { url },
    }
}

/// The packs' hooks, run in the binary's sandbox, trusted as `trust` says, reported on `out`.
fn sandbox_hooks(packs: &[PackRun], trust: StoreTrust, out: &dispatch::Out) -> SandboxHooks {
    let roots = packs
        .iter()
        .map(|p| (p.resolved.pack.id.clone(), p.pack.root.clone()))
        .collect();
    SandboxHooks::new(roots, Arc::new(crate::builtin::Components))
        .with_trust(trust)
        .report_to(Arc::clone(out))
}

/// The channels this `up` serves, for `post` and `tail` without `--channel`.
fn remember_channels(data: &Data, packs: &[PackRun]) {
    let channels: std::collections::BTreeSet<&str> = packs
        .iter()
        .flat_map(|p| &p.resolved.personas)
        .flat_map(|p| &p.subscribe)
        .map(String::as_str)
        .collect();
    let text: String = channels.iter().map(|c| format!("{c}\n")).collect();
    let _ = std::fs::write(data.channels_file(), text);
}

/// The channel `post` and `tail` use: `--channel`, else the one channel the last `up` serves.
fn channel_arg(arg: Option<&str>) -> Result<String, Failed> {
    if let Some(c) = arg {
        return Ok(c.trim_start_matches('#').to_string());
    }
    let known = std::fs::read_to_string(Data::locate().channels_file()).unwrap_or_default();
    let known: Vec<&str> = known
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    match known.as_slice() {
        [one] => Ok(one.to_string()),
        [] => Err(Failed::usage(
            "which channel? pass --channel NAME (no `apiary up` has recorded the channels it serves)",
        )),
        many => Err(Failed::usage(format_args!(
            "which channel? the last `apiary up` serves {}; pass --channel NAME",
            many.iter()
                .map(|c| format!("#{c}"))
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// Where `post` and `tail` find the embedded relay, and the log line saying it listens.
fn remember_embedded(data: &Data, relay_url: &str, restored: usize, journal: Option<&Path>) {
    let _ = std::fs::create_dir_all(data.dir());
    let _ = std::fs::write(data.relay_url_file(), format!("{relay_url}\n"));
    match journal {
        Some(j) => {
            tracing::info!(url = %relay_url, journal = %j.display(), restored, "embedded relay listening")
        }
        None => tracing::info!(url = %relay_url, "embedded relay listening (in memory only)"),
    }
}

/// This replica's place among several (`--shard`): which personas it owns, the relay checks
/// before replying and the kept cursor; one replica alone does none of that.
fn cluster(
    args: &UpArgs,
    shard: Option<Shard>,
    data: &Data,
    connection: Arc<std::sync::OnceLock<Client>>,
) -> dispatch::Cluster {
    dispatch::Cluster {
        shard,
        check_replies: shard.is_some(),
        cursor_file: shard.map(|s| data.dir().join("cursor").join(format!("shard-{}", s.index))),
        replay: Duration::from_secs(if shard.is_some() { args.replay } else { 0 }),
        connection: Some(connection),
    }
}

/// The A2A server, listening, serving the personas this replica owns; its URL.
async fn start_a2a(
    addr: SocketAddr,
    args: &UpArgs,
    plan: &Plan,
) -> Result<(Arc<dispatch::remote::Desk>, String), Failed> {
    let path = args.a2a_tokens.as_deref().unwrap_or(Path::new(""));
    let tokens = crate::a2a::tokens::Tokens::load(path)
        .map_err(|e| Failed::usage(format_args!("--a2a-tokens: {e}")))?;
    if tokens.is_empty() {
        return Err(Failed::usage(format_args!(
            "--a2a-tokens {} lists no token: no client could talk to the personas",
            path.display()
        )));
    }
    let listener = crate::a2a::bind(addr)
        .await
        .map_err(|e| Failed::error(format_args!("--a2a-addr {addr}: cannot listen: {e}")))?;
    let bound = listener.local_addr().unwrap_or(addr);
    let public_url = args
        .a2a_public_url
        .clone()
        .unwrap_or_else(|| format!("http://{bound}"));
    let desk = Arc::new(dispatch::remote::Desk::default());
    let mut a2a = crate::a2a::A2a::new(Arc::clone(&desk), tokens);
    for run in &plan.packs {
        for (index, persona) in run.resolved.personas.iter().enumerate() {
            if plan
                .shard
                .is_some_and(|s| !s.owns(&run.resolved.pack.id, &persona.identity.name))
            {
                continue;
            }
            let keys = plan
                .keys
                .persona(&run.namespace, &persona.identity.name)
                .ok();
            a2a.add(run, index, &public_url, keys.as_ref());
        }
    }
    crate::a2a::serve(listener, Arc::new(a2a));
    Ok((desk, public_url))
}

/// The operations endpoints, listening, with the agent cards of the personas this replica owns.
async fn start_ops(
    addr: SocketAddr,
    public_url: Option<String>,
    plan: &Plan,
    connection: &Arc<std::sync::OnceLock<Client>>,
) -> Result<(Arc<Ops>, SocketAddr), Failed> {
    let listener = crate::ops::bind(addr)
        .await
        .map_err(|e| Failed::error(format_args!("--ops-addr {addr}: cannot listen: {e}")))?;
    let bound = listener.local_addr().unwrap_or(addr);
    if public_url.is_none() && bound.ip().is_unspecified() {
        tracing::warn!(
            %bound,
            "agent cards name http://{bound}, which clients cannot reach: set --public-url"
        );
    }
    let public_url = public_url.unwrap_or_else(|| format!("http://{bound}"));
    let mut ops = Ops::new(public_url, Arc::clone(connection));
    for run in &plan.packs {
        for (index, persona) in run.resolved.personas.iter().enumerate() {
            let name = &persona.identity.name;
            if plan
                .shard
                .is_some_and(|s| !s.owns(&run.resolved.pack.id, name))
            {
                continue;
            }
            let pubkey = plan.keys.persona(&run.namespace, name).ok();
            ops.add_card(run, index, pubkey.map(|k| k.public_key().to_hex()));
        }
    }
    let ops = Arc::new(ops);
    crate::ops::serve(listener, Arc::clone(&ops));
    tracing::info!(%bound, "operations endpoints listening");
    Ok((ops, bound))
}

/// Reports the relay, and who names its channels: the relay's own key (known for ours, else its
/// NIP-11 document) and the operator's.
async fn announce(
    out: &dispatch::Out,
    relay_url: &str,
    embedded: Option<&relay::embedded::Embedded>,
    configured: Vec<PublicKey>,
) -> relay::ChannelAuthority {
    let url = relay_url.to_string();
    out(Note::new(
        event::Event::Relay { url },
        format!("relay {relay_url}"),
    ));
    let relay_key = match embedded {
        Some(e) => Some(e.pubkey),
        None => relay::relay_pubkey(relay_url, Duration::from_secs(5)).await,
    };
    let channel_authority = relay::ChannelAuthority {
        relay: relay_key,
        configured,
    };
    let (relay, configured) = channel_authority.to_json();
    let text = channel_authority.describe();
    out(Note::new(
        event::Event::ChannelAuthority { relay, configured },
        text,
    ));
    channel_authority
}

/// Reports the embedded relay's storage each time it passes 80% full (already at start too).
fn report_storage(
    mut alarms: tokio::sync::watch::Receiver<Option<relay::embedded::Fill>>,
    out: dispatch::Out,
) {
    tokio::spawn(async move {
        loop {
            if let Some(f) = *alarms.borrow_and_update() {
                let text = format!(
                    "relay storage {}% full: {} events, {} bytes stored; the oldest events of keys outside the key store are evicted",
                    f.percent, f.events, f.bytes
                );
                let storage = event::Event::RelayStorage {
                    percent: f.percent,
                    events: f.events,
                    bytes: f.bytes,
                };
                out(Note::new(storage, text));
            }
            if alarms.changed().await.is_err() {
                return;
            }
        }
    });
}

/// The embedded relay, on a thread of its own, apart from dispatch and from the harness's relay
/// connection: neither queues behind the relay's work.
async fn start_embedded(
    listen: SocketAddr,
    settings: relay::embedded::Settings,
) -> Result<relay::embedded::Embedded, Failed> {
    let started = relay::on_relay_runtime(async move {
        relay::embedded::Embedded::start_with(listen, settings).await
    })
    .await;
    started
        .and_then(|r| r)
        .map_err(|e| Failed::error(format_args!("{e:#}")))
}

/// Triggers: the sandbox's built-in component (the native matcher implements the same semantics
/// and stays as the fallback and the benchmark baseline).
async fn trigger_matcher(native: bool) -> Arc<dyn TriggerMatcher> {
    let matcher: Arc<dyn TriggerMatcher> = if native {
        Arc::new(NativeTriggers)
    } else {
        // Compiling is blocking work: off the async threads, bounded.
        let builtin = dispatch::hooks::off_async(
            "compiling the trigger component",
            dispatch::hooks::LOAD_DEADLINE,
            || {
                SandboxTriggers::new(&crate::builtin::Components)
                    .map_err(|e| dispatch::HookError::Failed(e.to_string()))
            },
        );
        match builtin.await {
            Ok(t) => Arc::new(t),
            Err(e) => {
                tracing::warn!("trigger component unavailable, using the native matcher: {e}");
                Arc::new(NativeTriggers)
            }
        }
    };
    tracing::info!(matcher = matcher.name(), "trigger matcher");
    matcher
}

/// What writes `up`'s stdout.
enum Printer {
    Lines(std::thread::JoinHandle<()>),
    View(view::View),
}

impl Printer {
    /// Once the runtime is gone: every sender went with its tasks, so the printer ends after the
    /// last line.
    fn finish(self) {
        match self {
            Printer::Lines(thread) => {
                let _ = thread.join();
            }
            Printer::View(view) => view.finish(),
        }
    }
}

/// The harness's stdout: notes as plain lines, or JSON lines with `json`, written by a thread of
/// its own so that a slow reader of stdout never stalls the dispatch loop or a turn.
fn printer(json: bool) -> (std::thread::JoinHandle<()>, dispatch::Out) {
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let thread = std::thread::spawn(move || {
        use std::io::Write;
        while let Ok(line) = rx.recv() {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{line}");
            // Whatever else is waiting goes out with the same flush.
            while let Ok(line) = rx.try_recv() {
                let _ = writeln!(out, "{line}");
            }
            let _ = out.flush();
        }
    });
    let out: dispatch::Out = Arc::new(move |note: Note| {
        let line = if json { Some(note.json()) } else { note.text };
        if let Some(line) = line {
            let _ = tx.send(line);
        }
    });
    (thread, out)
}

pub fn relay(args: RelayArgs) -> u8 {
    let (rt, settings) = match runtime().and_then(|rt| {
        let allow = parse_keys("--allow-key", &args.allow_key)?;
        embedded_settings(
            &Data::locate(),
            args.ephemeral,
            args.require_auth,
            allow,
            &args.limits,
        )
        .map(|settings| (rt, settings))
        .map_err(|e| Failed::error(format_args!("{e:#}")))
    }) {
        Ok(x) => x,
        Err(f) => return render(&f, false),
    };
    let code = rt.block_on(async {
        let shutdown = shutdown_signal();
        let relay = match relay::embedded::Embedded::start_with(args.listen, settings).await {
            Ok(r) => r,
            Err(e) => return render(&Failed::error(format_args!("{e:#}")), false),
        };
        say(format!("relay {}", relay.url));
        say(format!("pubkey {}", relay.pubkey.to_hex()));
        if let Some(url) = &relay.blobs_url {
            say(format!("blobs {url}"));
        }
        shutdown.await;
        relay.shutdown();
        say("stopped".to_string());
        exit::OK
    });
    rt.shutdown_timeout(Duration::from_secs(1));
    code
}

fn relay_url(arg: &Option<String>) -> String {
    if let Some(url) = arg {
        return url.clone();
    }
    if let Ok(text) = std::fs::read_to_string(Data::locate().relay_url_file()) {
        let t = text.trim();
        if !t.is_empty() {
            return t.to_string();
        }
    }
    format!("ws://{DEFAULT_LISTEN}")
}

pub fn post(args: PostArgs) -> u8 {
    render(&post_message(&args), false)
}

/// `post`: the id of the event published.
struct Posted(EventId);

impl Outcome for Posted {
    fn human(&self, to: &mut Human<'_>) -> std::io::Result<()> {
        writeln!(to.out, "{}", self.0.to_hex())
    }

    fn json(&self) -> Option<&dyn Document> {
        None
    }
}

fn post_message(args: &PostArgs) -> Result<Posted, Failed> {
    let authorities = parse_keys("--channel-authority", &args.channel_authority)?;
    let url = relay_url(&args.relay);
    let channel = channel_arg(args.channel.as_deref())?;
    let rt = runtime()?;
    let posted = rt.block_on(async {
        let (keys, client, channel_id) = operator_connection(&url, &channel, &authorities).await?;
        let posted = publish(&client, &keys, &channel_id, args).await;
        close(&client).await;
        posted
    });
    rt.shutdown_timeout(Duration::from_secs(1));
    posted
}

/// The operator's keys, and a client connected with them to `url` (see [`connect_to_channel`]).
async fn operator_connection(
    url: &str,
    channel: &str,
    authorities: &[PublicKey],
) -> Result<(Keys, Client, String), Failed> {
    let keys = Data::locate()
        .key_store()
        .operator()
        .map_err(|e| Failed::error(format_args!("key store: {e:#}")))?;
    let (client, channel_id) = connect_to_channel(url, channel, &keys, authorities)
        .await
        .map_err(|e| Failed::error(format_args!("{e:#}")))?;
    Ok((keys, client, channel_id))
}

/// Signs the message of `args` (its thread and mentions as tags) and publishes it.
async fn publish(
    client: &Client,
    keys: &Keys,
    channel_id: &str,
    args: &PostArgs,
) -> Result<Posted, Failed> {
    let mut tags = vec![relay::channel_tag(channel_id)];
    if let Some(parent) = &args.reply_to {
        let parent = EventId::parse(parent)
            .map_err(|_| Failed::usage(format_args!("--reply-to `{parent}` is not an event id")))?;
        // The thread root is the parent's own root when it is itself a reply.
        let root = client
            .fetch_events(Filter::new().id(parent), Duration::from_secs(3))
            .await
            .ok()
            .and_then(|evs| evs.first().and_then(relay::Message::parse))
            .and_then(|m| m.root);
        tags.extend(relay::thread_tags(parent, root));
    }
    for m in &args.mention {
        let pk = PublicKey::parse(m)
            .map_err(|_| Failed::usage(format_args!("--mention `{m}` is not a public key")))?;
        tags.push(Tag::public_key(pk));
    }
    let event = relay::message(keys, channel_id, &args.text, tags).map_err(Failed::error)?;
    match client.send_event(&event).await {
        Ok(o) if !o.success.is_empty() => Ok(Posted(event.id)),
        Ok(o) => {
            let why: Vec<String> = o.failed.values().cloned().collect();
            Err(Failed::error(format_args!(
                "the relay refused the message: {}",
                why.join("; ")
            )))
        }
        Err(e) => Err(Failed::error(e)),
    }
}

/// Shuts the client down and gives its connection tasks a moment to send their websocket Close
/// frames: the runtime drops them at exit, and a relay logs a connection that just vanishes as an
/// error (the embedded relay did, for every `post` and `tail`).
async fn close(client: &Client) {
    relay::shutdown(client).await;
    tokio::time::sleep(Duration::from_millis(50)).await;
}

/// A client connected to `url` (answering NIP-42 challenges with `keys`), and the relay's id for the
/// channel named `channel` (the name itself when the relay publishes no metadata for it).
async fn connect_to_channel(
    url: &str,
    channel: &str,
    keys: &Keys,
    configured: &[PublicKey],
) -> anyhow::Result<(Client, String)> {
    let client = relay::connect_as(url, Duration::from_secs(10), Some(keys.clone())).await?;
    let name = channel.to_string();
    let authority = relay::ChannelAuthority {
        relay: relay::relay_pubkey(url, Duration::from_secs(3)).await,
        configured: configured.to_vec(),
    };
    let ids = relay::resolve_channels(
        &client,
        std::slice::from_ref(&name),
        &authority,
        Duration::from_secs(3),
    )
    .await;
    let id = ids.get(&name).cloned().unwrap_or(name);
    Ok((client, id))
}

/// A channel's history in reading order: by time, and a reply never before the message it answers
/// (timestamps are whole seconds, so a reply and its parent often share one; ids break the tie at
/// random).
fn parents_first(mut events: Vec<Event>) -> Vec<Event> {
    events.sort_by_key(|e| (e.created_at, e.id));
    let index: std::collections::HashMap<EventId, usize> =
        events.iter().enumerate().map(|(i, e)| (e.id, i)).collect();
    // The message answered: a thread parent (`e`), else a quoted message (`q`: a reply kept in
    // the channel, `thread_replies: false`).
    let parent = |e: &Event| {
        relay::Message::parse(e)
            .and_then(|m| m.parent)
            .or_else(|| {
                e.tags
                    .iter()
                    .find(|t| t.kind() == TagKind::q())
                    .and_then(|t| t.content())
                    .and_then(|id| EventId::from_hex(id).ok())
            })
            .and_then(|p| index.get(&p).copied())
    };
    let mut placed = vec![false; events.len()];
    let mut order = Vec::with_capacity(events.len());
    for start in 0..events.len() {
        // The chain of unplaced ancestors, placed oldest first; `placed` also ends a cycle.
        let mut chain = Vec::new();
        let mut at = Some(start);
        while let Some(i) = at.filter(|&i| !placed[i]) {
            placed[i] = true;
            chain.push(i);
            at = parent(&events[i]);
        }
        order.extend(chain.into_iter().rev());
    }
    let mut slots: Vec<Option<Event>> = events.into_iter().map(Some).collect();
    order.into_iter().filter_map(|i| slots[i].take()).collect()
}

fn print_event(ev: &Event, json: bool, names: &names::Names) {
    if json {
        say(event_json(ev, names));
        return;
    }
    let m = relay::Message::parse(ev);
    let thread = m
        .as_ref()
        .and_then(|m| m.root)
        .map(|r| format!(" ↳{}", relay::short(&r.to_hex())))
        .unwrap_or_default();
    say(format!(
        "{} {}{}: {}",
        relay::short(&ev.id.to_hex()),
        names.label(&ev.pubkey),
        thread,
        terminal_safe(&ev.content).replace('\n', "\n    ")
    ));
}

/// `ev` as received, with a `signer` field: the author's npub and what the operator's key store
/// says it is (`null` for a key outside it).
fn event_json(ev: &Event, names: &names::Names) -> String {
    let mut value: serde_json::Value = match serde_json::from_str(&ev.as_json()) {
        Ok(v) => v,
        Err(_) => return ev.as_json(),
    };
    if let Some(fields) = value.as_object_mut() {
        fields.insert("signer".to_string(), names.signer_json(&ev.pubkey));
    }
    value.to_string()
}

/// `text` safe to print on a terminal: control characters (C0 but newline and tab, DEL, C1) and
/// invisible formatting that can re-order or hide what is shown (bidirectional overrides and
/// isolates, line and paragraph separators, zero-width characters) become visible `\u{..}` escapes;
/// a backslash before `u{` is doubled so an escape cannot be faked.
pub(super) fn terminal_safe(text: &str) -> String {
    use std::fmt::Write;
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        let hidden = matches!(c,
            '\u{061c}' | '\u{200b}'..='\u{200f}' | '\u{2028}'..='\u{202e}'
            | '\u{2060}'..='\u{2069}' | '\u{feff}');
        if (c.is_control() && c != '\n' && c != '\t') || hidden {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        } else if c == '\\' && chars.peek() == Some(&'u') {
            out.push_str("\\\\");
        } else {
            out.push(c);
        }
    }
    out
}

pub fn tail(args: TailArgs) -> u8 {
    let authorities = match parse_keys("--channel-authority", &args.channel_authority) {
        Ok(a) => a,
        Err(f) => return render(&f, false),
    };
    let url = relay_url(&args.relay);
    let channel = match channel_arg(args.channel.as_deref()) {
        Ok(c) => c,
        Err(f) => return render(&f, false),
    };
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(f) => return render(&f, false),
    };
    let code = rt.block_on(async {
        let (_, client, channel_id) = match operator_connection(&url, &channel, &authorities).await
        {
            Ok(c) => c,
            Err(f) => return render(&f, false),
        };
        let mut printed = 0usize;
        let deadline = args
            .timeout
            .map(|s| tokio::time::Instant::now() + Duration::from_secs(s));
        let run = async {
            let work = follow(&client, &channel_id, &args, &mut printed);
            match deadline {
                Some(d) => tokio::time::timeout_at(d, work).await.ok(),
                None => Some(work.await),
            }
        };
        // Ctrl-C is how a person stops following: a normal end, with the connection closed
        // properly (killed, it would show up as an error in the relay's log).
        let finished = tokio::select! {
            finished = run => finished,
            _ = tokio::signal::ctrl_c() => Some(true),
        };
        close(&client).await;
        match (finished, args.count) {
            (Some(true), _) | (None, None) => exit::OK,
            (None, Some(c)) => render(
                &Failed::error(format_args!("timed out after {printed} of {c} messages")),
                false,
            ),
            (Some(false), _) => exit::FAILURE,
        }
    });
    rt.shutdown_timeout(Duration::from_secs(1));
    code
}

/// Prints the channel's last `--history` messages, then new ones as they arrive. True when done
/// (`--count` reached, or `--no-follow`), false when the subscription or the relay went away.
async fn follow(client: &Client, channel_id: &str, args: &TailArgs, printed: &mut usize) -> bool {
    let mut seen = std::collections::HashSet::new();
    let mut notifications = client.notifications();
    let messages = || {
        Filter::new()
            .kind(Kind::Custom(relay::KIND_MESSAGE))
            .custom_tag(SingleLetterTag::lowercase(Alphabet::H), channel_id)
    };
    let sub = match client
        .subscribe(messages().since(Timestamp::now()), None)
        .await
    {
        Ok(o) => o.val,
        Err(e) => {
            eprintln!("error: subscribing: {e}");
            return false;
        }
    };
    let mut names = names::Names::with_store(Data::locate().key_store().roles());
    let mut show = |ev: &Event, names: &names::Names| {
        print_event(ev, args.json, names);
        *printed += 1;
        args.count.is_some_and(|c| *printed >= c)
    };
    if args.history > 0 {
        let stored = messages().limit(args.history);
        if let Ok(events) = client.fetch_events(stored, Duration::from_secs(5)).await {
            if !args.json {
                names.learn(client, events.iter().map(|e| e.pubkey)).await;
            }
            for ev in parents_first(events.into_iter().collect()) {
                if seen.insert(ev.id) && show(&ev, &names) {
                    return true;
                }
            }
        }
    }
    if args.no_follow {
        return true;
    }
    loop {
        match notifications.recv().await {
            Ok(RelayPoolNotification::Event {
                subscription_id,
                event,
                ..
            }) if subscription_id == sub && seen.insert(event.id) && event.verify().is_ok() => {
                if !args.json {
                    names.learn(client, [event.pubkey]).await;
                }
                if show(&event, &names) {
                    return true;
                }
            }
            Ok(RelayPoolNotification::Shutdown)
            | Err(tokio::sync::broadcast::error::RecvError::Closed) => return false,
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{parents_first, terminal_safe};
    use crate::relay;
    use nostr_sdk::prelude::*;

    #[test]
    fn history_puts_a_reply_after_its_parent_in_the_same_second() {
        let keys = Keys::generate();
        let at = Timestamp::from(1_800_000_000);
        let sign = |content: &str, tags: Vec<Tag>| {
            EventBuilder::new(Kind::Custom(relay::KIND_MESSAGE), content)
                .tags(std::iter::once(relay::channel_tag("general")).chain(tags))
                .custom_created_at(at)
                .sign_with_keys(&keys)
                .unwrap()
        };
        let parent = sign("question", vec![]);
        // A reply and a reply to it whose ids sort before their parents'.
        let reply = (0..)
            .map(|n| sign(&format!("answer {n}"), relay::thread_tags(parent.id, None)))
            .find(|r| r.id < parent.id)
            .unwrap();
        let nested = (0..)
            .map(|n| {
                let tags = relay::thread_tags(reply.id, Some(parent.id));
                sign(&format!("follow-up {n}"), tags)
            })
            .find(|r| r.id < reply.id)
            .unwrap();
        let ids: Vec<EventId> = parents_first(vec![nested.clone(), reply.clone(), parent.clone()])
            .iter()
            .map(|e| e.id)
            .collect();
        assert_eq!(ids, vec![parent.id, reply.id, nested.id]);

        // A reply kept in the channel (`thread_replies: false`) quotes its parent instead.
        let quoted = (0..)
            .map(|n| {
                let q = Tag::custom(TagKind::q(), [parent.id.to_hex()]);
                sign(&format!("in the channel {n}"), vec![q])
            })
            .find(|r| r.id < parent.id)
            .unwrap();
        let ids: Vec<EventId> = parents_first(vec![quoted.clone(), parent.clone()])
            .iter()
            .map(|e| e.id)
            .collect();
        assert_eq!(ids, vec![parent.id, quoted.id]);
    }

    #[test]
    fn terminal_output_shows_controls_and_bidi_escaped() {
        let text = "a\u{1b}[2Jb\r\u{7}\u{9b}31m\u{202e}evil\u{2066}\nnext\tcol \\u{1b}";
        let safe = terminal_safe(text);
        assert_eq!(
            safe,
            "a\\u{1b}[2Jb\\u{d}\\u{7}\\u{9b}31m\\u{202e}evil\\u{2066}\nnext\tcol \\\\u{1b}"
        );
        assert!(
            !safe
                .chars()
                .any(|c| c.is_control() && c != '\n' && c != '\t')
        );
    }
}
