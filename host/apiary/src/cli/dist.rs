//! `apiary pack build`, `install`, `trust`, `list`, `uninstall`, `verify`.

use crate::dist::code;
use std::io::{self, BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};

use clap::Args;
use serde::Serialize;

use super::output::{Document, ErrorJson, Failed, Human, Outcome};
use super::{exit, stderr_is_terminal};
use crate::diag::Report;
use crate::dist::{self, DistError, install, trust, verify};

const ROOT_HELP: &str = "Install root. Default: $BUZZ_PACKS_DIR, else ~/.buzz/packs";

#[derive(Debug, Args)]
#[command(
    after_help = "The archive is `<pack-name>-<version>.buzzpack`, where <pack-name> is the last \
dot-separated segment of the manifest id (com.example.meadow-team -> meadow-team); beside it goes \
`<archive>.sha256` in sha256sum format. Builds are reproducible: the same files give the same bytes.\n\n\
Skipped: VCS metadata (.git folders and files, .hg, .svn, ...), agent state (.agents/, .goose/, ...), \
build artefacts, pack.lock.\n\
Refused: files that look like secrets (.env, private keys, credentials), symlinks, a folder laid out \
as a git repository.\n\n\
Examples:\n  apiary pack build ./my-pack\n  apiary pack build ./my-pack --output dist/\n  sha256sum -c my-pack-1.2.0.buzzpack.sha256"
)]
pub struct BuildArgs {
    /// The pack directory.
    pub dir: PathBuf,
    /// Archive path, or an existing directory to put `<pack-name>-<version>.buzzpack` in.
    /// Default: the current directory.
    #[arg(long, short, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Also sign the archive with this author key file (see `apiary pack sign`).
    #[arg(long, value_name = "KEY_FILE")]
    pub sign_with: Option<PathBuf>,
    /// Print the result as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
#[command(
    after_help = "Sources:\n  ./my-pack-1.2.0.buzzpack            needs ./my-pack-1.2.0.buzzpack.sha256 beside it (or --sha256)\n  \
./expert-pack/, ./expert-pack.zip   a DuDuClaw expert pack (expert.toml), converted to a persona pack\n  \
https://host/expert-pack.zip        the same over https (<url>.sha256 verified when published)\n  \
https://host/my-pack-1.2.0.buzzpack  fetches <url>.sha256 from the same place (or --sha256)\n  \
http://host/my-pack-1.2.0.buzzpack   only with --sha256: a .sha256 over http proves nothing\n  \
github:owner/repo[@ref]             a branch, tag or commit\n  \
git+https://host/repo.git[#ref]\n  git+file:///path/to/repo[#ref]\n\n\
The checksum is verified before anything is unpacked; the archive is fenced (no paths outside the \
pack, no symlinks or devices, no VCS metadata such as .git/, capped entry count, sizes and \
compression ratio); the pack is validated. An expert pack .zip without a published checksum needs \
--sha256 or your confirmation (--yes, or a prompt at a terminal). Git clones run without your git \
config, hooks or credential helpers, and are stopped after $APIARY_GIT_TIMEOUT_SECS seconds (default \
300) or past $APIARY_GIT_MAX_MIB MiB (default 512); their .git/ is never installed. Credentials in a \
source URL are kept out of messages and pack.lock. \
The install is atomic: an interrupted install leaves the previous version and pack.lock intact. \
Script hooks arrive quarantined: review and enable them with `apiary trust <pack-id>`. Hook \
components (.wasm) are compiled into the compile cache after the install (progress on stderr; \
`--json` lists them under `compiled`), so `apiary up` loads them in milliseconds.\n\n\
A pack id is bound to the source it was installed from (pack.lock's `source`). Installing an id \
that is installed from another source is refused unless --replace is given. The same source is: \
the same file path (symlinks and `..` resolved; a .buzzpack re-built at the same path), the same \
URL, the same git repository whatever the ref (by the URL cloned: github:o/r is \
git+https://github.com/o/r.git), or the recorded source with its version replaced by the new one \
(…/v1.2.0/team-1.2.0.buzzpack -> …/v1.3.0/team-1.3.0.buzzpack).\n\n\
An expert pack (DuDuClaw Expert Pack Format v1.0, §4 Install semantics) is converted by the built-in sandboxed converter first (a reports_to \
cycle refuses it, nothing written); its agents install parents first; each agent.partial.toml is \
merged into <root>/.apiary/agents/<pack-id>/<persona>/agent.toml without replacing keys already set; \
its hooks/ are carried quarantined and never run; uninstall takes back exactly what it added. \
One without `name` or `description`, or with a format marker of another major version \
(`[expert-v2]`), is refused; what it declares in [expert.requires] (variables, binaries) and \
[expert.prompts] recommended is printed before the install and shown by `apiary list`.\n\n\
Authors' signatures: an archive may ship with <archive>.sig.json (`apiary pack sign`), a Nostr \
event signed by its author's key naming the pack id, version and sha256. It is checked before \
anything is unpacked; the first signed install pins the author (npub) for the pack id in pack.lock \
(`--author NPUB` pins it from the start); later installs must be signed by the same key \
(`--replace-author` to accept another, or an unsigned pack). Unsigned packs install with a warning, \
or are refused under --require-signed (or `require_signed = true` at the top of the overrides file).\n\n\
By id from Nostr relays (`--relay URL`, repeatable): SOURCE is `<pack-id>[@version]`; the newest \
version signed by the pinned author (any author on a first install, unless --author) is found, its \
archive downloaded by sha256 from the blob servers its event lists (and --blobs), verified and \
installed; pack.lock records `nostr:<pack-id>`. Events that do not verify, name another pack or \
version, and bytes that do not hash to the signed sha256 are refused.\n\n\
Examples:\n  apiary install ./meadow-team-1.2.0.buzzpack\n  apiary install com.example.meadow-team --relay wss://relay.example --author npub1…\n  apiary install github:example/meadow-team@v1.2.0 --json\n  \
apiary install --sha256 <64 hex digits> http://mirror.internal/meadow-team-1.2.0.buzzpack\n  apiary install --locked github:example/meadow-team   (the commit pack.lock pins)\n  \
apiary install --replace github:mirror/meadow-team   (the same id from another source)\n  \
BUZZ_PACKS_DIR=/srv/packs apiary install https://example.com/meadow-team-1.2.0.buzzpack"
)]
pub struct InstallArgs {
    /// What to install (see below).
    pub source: String,
    /// Install exactly what pack.lock pins for this source (the recorded commit of a git source;
    /// for an archive, refuse unless its digest is the recorded sha256).
    #[arg(long)]
    pub locked: bool,
    /// Replace an installed pack of the same id that came from another source. The new pack takes
    /// over its place, persona keys and workspaces; the old one's hook trust is dropped.
    #[arg(long)]
    pub replace: bool,
    /// The archive's SHA-256 (64 hex digits) from a place you trust: the archive must have it, and
    /// no .sha256 file is needed. Required for plain http:// URLs.
    #[arg(long, value_name = "DIGEST", value_parser = parse_sha256)]
    pub sha256: Option<String>,
    /// Install an expert pack .zip that publishes no checksum without asking.
    #[arg(long, short)]
    pub yes: bool,
    /// Refuse a pack its author did not sign (also `require_signed = true` in the overrides file).
    #[arg(long)]
    pub require_signed: bool,
    /// Accept a pack signed by another author than the one pinned for its id (or unsigned where
    /// the installed one was signed); the new author is pinned.
    #[arg(long)]
    pub replace_author: bool,
    /// Require the pack to be signed by this author (npub or hex), even on its first install
    /// (otherwise the first install's signer is pinned).
    #[arg(long, value_name = "NPUB", value_parser = parse_author)]
    pub author: Option<String>,
    /// Look SOURCE up as a pack id (`<pack-id>[@version]`) on this Nostr relay (repeatable).
    #[arg(long = "relay", value_name = "URL")]
    pub relays: Vec<String>,
    /// Also download from this Blossom blob server (repeatable), besides those the pack's event lists.
    #[arg(long = "blobs", value_name = "URL", requires = "relays")]
    pub blobs: Vec<String>,
    /// Operator overrides file (its top-level `require_signed`). Default: $APIARY_OVERRIDES, else
    /// ~/.config/apiary/overrides.toml when it exists.
    #[arg(long, value_name = "FILE")]
    pub overrides: Option<PathBuf>,
    #[arg(long, env = crate::paths::INSTALL_ROOT_ENV, value_name = "DIR", help = ROOT_HELP)]
    pub root: Option<PathBuf>,
    /// Print the result as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// An author's public key as `npub1…`.
fn parse_author(s: &str) -> Result<String, String> {
    use nostr_sdk::prelude::{PublicKey, ToBech32};
    PublicKey::parse(s.trim())
        .ok()
        .and_then(|k| k.to_bech32().ok())
        .ok_or_else(|| "expected a public key (npub1… or 64 hex digits)".into())
}

fn parse_sha256(s: &str) -> Result<String, String> {
    let s = s.trim();
    if s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(s.to_ascii_lowercase())
    } else {
        Err("expected 64 hex digits (the output of sha256sum)".into())
    }
}

#[derive(Debug, Args)]
#[command(
    after_help = "What needs trust is what runs on this host outside the sandbox: script hooks \
(any hook that is not a .wasm component) and stdio MCP servers (a command line the agent starts). \
`trust` lists each with its exact command line and digest and, once confirmed, records trust in the \
operator's store <root>/.apiary/trust.json for this pack's location, the id and version its manifest \
declares, and these exact hook files, command lines and server definitions: an upgrade, a change to \
any of them, or the same pack in another directory is untrusted again. Nothing shipped beside a \
pack (a pack.lock, a .apiary/trust.json) is ever read as trust.\n\n\
Hook components (.wasm) run sandboxed without trust, except for the capabilities their .caps.toml \
declares, which trust grants. Once confirmed, `trust --hooks` also compiles them into the compile \
cache (progress on stderr; `--json` lists them under `compiled`), so `apiary up` loads them in \
milliseconds; one that cannot be loaded is refused, naming it, and nothing is trusted.\n\n\
PACK is an installed pack's id (its copy in <root>/<pack-id>/), or a pack directory given as a path \
(anything with a `/` or starting with `.`: ./my-pack, /src/my-pack), for packs run with \
`apiary up <dir>`. The store is written only when it, <root>/.apiary/ and <root> belong to you and \
nobody else can write them.\n\n\
MCP `${VAR}`s are separate: a pack reads only the operator variables listed for it in the overrides \
file (`allow_env = [\"GITHUB_TOKEN\"]` in the `[\"<pack-id>\"]` table).\n\n\
Examples:\n  apiary trust com.example.meadow-team\n  apiary trust com.example.meadow-team --hooks --yes\n  \
apiary trust ./my-pack --mcp\n  apiary trust com.example.meadow-team --revoke"
)]
pub struct TrustArgs {
    /// The installed pack's id, or a pack directory as a path (./my-pack).
    #[arg(value_name = "PACK")]
    pub pack_id: String,
    /// Trust the pack's hooks (script hooks and hook components). Without --hooks or --mcp, both.
    #[arg(long)]
    pub hooks: bool,
    /// Trust the pack's stdio MCP servers (the command lines its agents start). Without --hooks or
    /// --mcp, both.
    #[arg(long)]
    pub mcp: bool,
    /// Do not ask for confirmation.
    #[arg(long, short)]
    pub yes: bool,
    /// Withdraw trust instead.
    #[arg(long, conflicts_with = "yes")]
    pub revoke: bool,
    #[arg(long, env = crate::paths::INSTALL_ROOT_ENV, value_name = "DIR", help = ROOT_HELP)]
    pub root: Option<PathBuf>,
    /// Print the result as JSON on stdout (requires --yes or --revoke to change anything).
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  apiary list\n  apiary list --json | jq '.packs[].pack_id'")]
pub struct ListArgs {
    #[arg(long, env = crate::paths::INSTALL_ROOT_ENV, value_name = "DIR", help = ROOT_HELP)]
    pub root: Option<PathBuf>,
    /// Print the installed packs as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
#[command(
    after_help = "Removes the pack's pack.lock entry, the files it installed and its trust \
records. Files in the pack directory that the pack did not bring are kept.\n\n\
Examples:\n  apiary uninstall com.example.meadow-team"
)]
pub struct UninstallArgs {
    /// The installed pack's id.
    pub pack_id: String,
    #[arg(long, env = crate::paths::INSTALL_ROOT_ENV, value_name = "DIR", help = ROOT_HELP)]
    pub root: Option<PathBuf>,
    /// Print the result as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
#[command(
    after_help = "Exit code 0 when every installed pack matches what was installed, 1 when \
anything drifted (a file changed, went missing, appeared or became executable).\n\n\
Examples:\n  apiary verify\n  apiary verify com.example.meadow-team --json"
)]
pub struct VerifyArgs {
    /// Check only this pack.
    pub pack_id: Option<String>,
    #[arg(long, env = crate::paths::INSTALL_ROOT_ENV, value_name = "DIR", help = ROOT_HELP)]
    pub root: Option<PathBuf>,
    /// Print the findings as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// A refusal of the install tooling: with `--json`, `{"ok": false, "error": {code, message, help?,
/// diagnostics?}}` on stdout; else the validation report, the message and its help on stderr.
impl From<DistError> for Failed {
    fn from(e: DistError) -> Failed {
        let mut text = e
            .report
            .as_ref()
            .map(|r| r.render(stderr_is_terminal()))
            .unwrap_or_default();
        text.push_str(&format!("error: {}\n", e.message));
        if let Some(h) = &e.help {
            text.push_str(&format!("  help: {h}\n"));
        }
        let mut json = ErrorJson::new(e.code, e.message);
        json.help = e.help;
        json.diagnostics = e.report.map(|r| r.diagnostics);
        Failed::text(exit::FAILURE, text).with_json(json)
    }
}

impl From<crate::paths::NoHome> for Failed {
    fn from(e: crate::paths::NoHome) -> Failed {
        DistError::from(e).into()
    }
}

/// `pack build`: the archive written.
pub(super) struct Built {
    built: dist::build::Built,
    report: Report,
    signed: Option<super::registry::SignedArchive>,
}

pub(super) fn build(args: &BuildArgs) -> Result<Built, Failed> {
    let (built, report) = dist::build::build(&args.dir, args.output.as_deref())?;
    let signed = match &args.sign_with {
        Some(key) => Some(super::registry::sign_archive(&built.archive, key)?),
        None => None,
    };
    Ok(Built {
        built,
        report,
        signed,
    })
}

impl Serialize for Built {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Json<'a> {
            ok: bool,
            build: &'a dist::build::Built,
            #[serde(skip_serializing_if = "Option::is_none")]
            signature: Option<&'a super::registry::SignedArchive>,
            warnings: usize,
        }
        Json {
            ok: true,
            build: &self.built,
            signature: self.signed.as_ref(),
            warnings: self.report.warnings(),
        }
        .serialize(serializer)
    }
}

impl Outcome for Built {
    fn human(&self, to: &mut Human<'_>) -> io::Result<()> {
        if self.report.warnings() > 0 {
            to.report(&self.report)?;
        }
        let b = &self.built;
        writeln!(
            to.err,
            "Built {} {} ({} files, {} bytes)\n  {}\n  {}  sha256 {}",
            b.pack_id,
            b.version,
            b.files,
            b.bytes,
            b.archive.display(),
            b.checksum_file.display(),
            b.sha256
        )?;
        match &self.signed {
            Some(s) => writeln!(to.err, "{}", s.line()),
            None => Ok(()),
        }
    }

    fn json(&self) -> Option<&dyn Document> {
        Some(self)
    }
}

/// `install`: what was installed.
pub(super) struct Installed(install::Installed, Vec<super::precompile::Precompiled>);

pub(super) fn install(args: &InstallArgs) -> Result<Installed, Failed> {
    let root = crate::paths::install_root(args.root.as_deref())?;
    let unverified = if args.yes {
        dist::expert::Unverified::Accept
    } else if !args.json && std::io::stdin().is_terminal() {
        dist::expert::Unverified::Ask(ask_yes_no)
    } else {
        dist::expert::Unverified::Refuse
    };
    let registry = (!args.relays.is_empty()).then(|| dist::registry::Where {
        relays: args.relays.clone(),
        blobs: args.blobs.clone(),
    });
    let source = match &registry {
        Some(_) if !args.source.starts_with(dist::fetch::NOSTR_PREFIX) => {
            format!("{}{}", dist::fetch::NOSTR_PREFIX, args.source)
        }
        _ => args.source.clone(),
    };
    let opts = install::Options {
        progress: !args.json && stderr_is_terminal(),
        locked: args.locked,
        replace: args.replace,
        sha256: args.sha256.clone(),
        unverified,
        announce: (!args.json).then_some(announce as fn(&[String])),
        require_signed: args.require_signed
            || require_signed_by_overrides(args.overrides.as_deref())?,
        replace_author: args.replace_author,
        author: args.author.clone(),
        registry,
        ..Default::default()
    };
    let done = install::install(&root, &source, &opts)?;
    // Sandboxed hooks run without trust: compiled now, so `up` loads them from the cache.
    let components = done
        .hooks
        .iter()
        .filter(|h| h.kind == dist::lock::HookKind::Component && !h.commands.is_empty())
        .map(|h| h.path.as_str());
    let compiled = super::precompile::hooks(&done.dir, components, !args.json);
    Ok(Installed(done, compiled))
}

/// Shows what an expert pack declares (requires, recommended prompts) before it is installed.
fn announce(lines: &[String]) {
    if lines.is_empty() {
        return;
    }
    eprintln!("The expert pack declares:");
    for line in lines {
        eprintln!("  {line}");
    }
}

impl Serialize for Installed {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Json<'a> {
            ok: bool,
            pack_id: &'a str,
            name: &'a str,
            version: &'a str,
            previous_version: &'a Option<String>,
            replaced_source: &'a Option<String>,
            dir: &'a Path,
            lock: &'a dist::lock::LockEntry,
            files: usize,
            hooks: &'a [dist::lock::HookRecord],
            expert: &'a Option<dist::expert::Summary>,
            /// The author who signed the pack (`npub1…`), pinned for its id; null when unsigned.
            author: &'a Option<String>,
            warnings: usize,
            #[serde(skip_serializing_if = "<[_]>::is_empty")]
            compiled: &'a [super::precompile::Precompiled],
        }
        let done = &self.0;
        Json {
            ok: true,
            pack_id: &done.pack_id,
            name: &done.name,
            version: &done.version,
            previous_version: &done.previous_version,
            replaced_source: &done.replaced_source,
            dir: &done.dir,
            lock: &done.lock_entry,
            files: done.files,
            hooks: &done.hooks,
            expert: &done.expert,
            author: &done.author,
            warnings: done.report.warnings(),
            compiled: &self.1,
        }
        .serialize(serializer)
    }
}

impl Outcome for Installed {
    fn human(&self, to: &mut Human<'_>) -> io::Result<()> {
        let done = &self.0;
        if done.report.warnings() > 0 {
            to.report(&done.report)?;
        }
        let how = match &done.previous_version {
            Some(v) if v == &done.version => format!(" (reinstalled over {v})"),
            Some(v) => format!(" (was {v})"),
            None => String::new(),
        };
        let err = &mut *to.err;
        writeln!(
            err,
            "Installed {} {}{how} into {}",
            done.pack_id,
            done.version,
            done.dir.display()
        )?;
        if let Some(old) = &done.replaced_source {
            writeln!(err, "  replaced the pack installed from {old}")?;
        }
        if let Some(s) = &done.lock_entry.sha256 {
            writeln!(err, "  sha256   {s}")?;
        }
        if let Some(r) = &done.lock_entry.resolved {
            writeln!(err, "  resolved {r}")?;
        }
        if let Some(a) = &done.author {
            writeln!(
                err,
                "  author   {a} (signature verified; pinned for this pack id)"
            )?;
        }
        for w in &done.warnings {
            writeln!(err, "  warning: {w}")?;
        }
        if let Some(x) = &done.expert {
            write_expert(err, x)?;
        }
        for c in self.1.iter().filter(|c| c.outcome == "failed") {
            writeln!(
                err,
                "  warning: hook component {} cannot be loaded: {}; `apiary up` will refuse the personas that use it",
                c.path,
                c.error.as_deref().unwrap_or("unknown error")
            )?;
        }
        let quarantined = done.hooks.len();
        if quarantined > 0 {
            writeln!(
                err,
                "  {quarantined} hook file{} quarantined (not executable, untrusted): review with `apiary trust {}`",
                plural(quarantined),
                done.pack_id
            )?;
        }
        Ok(())
    }

    fn json(&self) -> Option<&dyn Document> {
        Some(self)
    }
}

/// The overrides file's top-level `require_signed` (an unreadable file is an error: the operator
/// asked for it).
fn require_signed_by_overrides(flag: Option<&Path>) -> Result<bool, Failed> {
    let Some(path) = crate::paths::overrides_file(flag) else {
        return Ok(false);
    };
    let mut report = Report::default();
    let overrides = crate::resolve::overrides::Overrides::load(&path, &mut report);
    if report.has_errors() {
        return Err(Failed::report(
            &report,
            format!("error: the overrides file {} has errors\n", path.display()),
        )
        .with_code("overrides.invalid"));
    }
    Ok(overrides.require_signed)
}

/// Asks `question` on the terminal; only `y`/`yes` is a yes.
fn ask_yes_no(question: &str) -> bool {
    eprint!("{question} [y/N] ");
    let _ = std::io::stderr().flush();
    let mut line = String::new();
    let _ = std::io::stdin().lock().read_line(&mut line);
    matches!(line.trim(), "y" | "Y" | "yes" | "YES" | "Yes")
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// What installing an expert pack did, for people.
fn write_expert(err: &mut dyn Write, x: &dist::expert::Summary) -> io::Result<()> {
    let short = |d: &str| d.chars().take(12).collect::<String>();
    writeln!(
        err,
        "  converted from the DuDuClaw expert pack {} by {} {} (sha256 {}…); checksum: {}",
        x.expert_name,
        x.converter,
        x.converter_version,
        short(&x.converter_digest),
        x.checksum
    )?;
    let order: Vec<String> = x
        .agents
        .iter()
        .map(|a| {
            if a.reports_to.is_empty() {
                a.persona.clone()
            } else {
                format!("{} (reports to {})", a.persona, a.reports_to)
            }
        })
        .collect();
    writeln!(err, "  agents, parents first: {}", order.join(", "))?;
    for m in &x.agent_config {
        writeln!(
            err,
            "  agent config {}: {} key{} merged, {} already set and kept",
            m.file,
            m.added.len(),
            plural(m.added.len()),
            m.kept.len()
        )?;
    }
    Ok(())
}

/// An installed pack's id, or a pack directory given as a path (a `/`, or a leading `.`: a pack id
/// can have neither).
fn trust_target(arg: &str) -> Result<trust::Target, DistError> {
    if !(arg.contains(['/', '\\']) || arg.starts_with('.')) {
        dist::root::pack_dir_name(arg)?;
        return Ok(trust::Target::Installed(arg.to_string()));
    }
    let dir = std::path::Path::new(arg)
        .canonicalize()
        .map_err(|e| DistError::new(code::Trust::Dir, format!("cannot use {arg}: {e}")))?;
    let loaded = crate::pack::load(&dir);
    let pack = loaded.pack.ok_or_else(|| {
        DistError::new(
            code::Pack::Invalid,
            format!("{} is not a valid pack; nothing to trust", dir.display()),
        )
        .with_report(loaded.report)
    })?;
    Ok(trust::Target::Dir {
        dir,
        pack_id: pack.manifest.id,
    })
}

/// `trust`: trust withdrawn, or what was reviewed and (once confirmed) trusted.
#[derive(Serialize)]
#[serde(untagged)]
pub(super) enum Trust {
    Revoked(Revoked),
    Reviewed(Reviewed),
}

impl Outcome for Trust {
    fn human(&self, to: &mut Human<'_>) -> io::Result<()> {
        match self {
            Trust::Revoked(r) => r.human(to),
            Trust::Reviewed(r) => r.human(to),
        }
    }

    fn json(&self) -> Option<&dyn Document> {
        Some(self)
    }
}

/// `trust --revoke`.
#[derive(Serialize)]
pub(super) struct Revoked {
    ok: bool,
    pack_id: String,
    revoked: bool,
    /// The pack as given on the command line (an id or a path).
    #[serde(skip)]
    arg: String,
}

impl Revoked {
    fn human(&self, to: &mut Human<'_>) -> io::Result<()> {
        if self.revoked {
            writeln!(to.err, "Revoked trust for {}.", self.arg)
        } else {
            writeln!(to.err, "{} had nothing trusted.", self.arg)
        }
    }
}

/// What `trust` reviewed: the hooks and servers asked for, and whether they are now trusted (not
/// when there was nothing to trust).
#[derive(Serialize)]
pub(super) struct Reviewed {
    ok: bool,
    pack_id: String,
    version: String,
    dir: PathBuf,
    trusted: bool,
    #[serde(serialize_with = "hooks_json")]
    hooks: Vec<trust::HookStatus>,
    #[serde(rename = "mcp_servers", serialize_with = "servers_json")]
    servers: Vec<trust::McpStatus>,
    /// `--hooks`, `--mcp` (both when neither was given).
    #[serde(skip)]
    wanted: (bool, bool),
    /// The pack was given as a directory.
    #[serde(skip)]
    is_dir: bool,
    /// The component hooks compiled into the cache (so `up` loads them in milliseconds).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    compiled: Vec<super::precompile::Precompiled>,
}

fn hooks_json<S: serde::Serializer>(hooks: &[trust::HookStatus], s: S) -> Result<S::Ok, S::Error> {
    #[derive(Serialize)]
    struct Hook<'a> {
        path: &'a str,
        sha256: &'a str,
        kind: dist::lock::HookKind,
        commands: &'a [String],
        #[serde(skip_serializing_if = "<[String]>::is_empty")]
        grants: &'a [String],
    }
    s.collect_seq(hooks.iter().map(|h| Hook {
        path: &h.path,
        sha256: &h.sha256,
        kind: h.kind,
        commands: &h.commands,
        grants: &h.capabilities,
    }))
}

fn servers_json<S: serde::Serializer>(
    servers: &[trust::McpStatus],
    s: S,
) -> Result<S::Ok, S::Error> {
    #[derive(Serialize)]
    struct Server<'a> {
        name: &'a str,
        sha256: &'a str,
        command_line: &'a str,
        command: &'a str,
        args: &'a [String],
        env: &'a std::collections::BTreeMap<String, String>,
        env_refs: &'a [String],
        used_by: &'a [String],
    }
    s.collect_seq(servers.iter().map(|m| Server {
        name: &m.name,
        sha256: &m.sha256,
        command_line: &m.command_line,
        command: &m.command,
        args: &m.args,
        env: &m.env,
        env_refs: &m.env_refs,
        used_by: &m.used_by,
    }))
}

impl Reviewed {
    fn human(&self, to: &mut Human<'_>) -> io::Result<()> {
        let (pack_id, version) = (&self.pack_id, &self.version);
        if !self.trusted {
            let what = match self.wanted {
                (true, true) => "hooks and no stdio MCP servers",
                (true, false) => "hooks",
                _ => "stdio MCP servers",
            };
            return writeln!(
                to.err,
                "{pack_id} {version} has no {what}: nothing to trust."
            );
        }
        let (hooks, servers) = (self.hooks.len(), self.servers.len());
        writeln!(
            to.err,
            "Trusted {hooks} hook file{} and {servers} MCP server{} of {pack_id} {version}{}.",
            plural(hooks),
            plural(servers),
            if self.is_dir {
                format!(" in {}", self.dir.display())
            } else {
                String::new()
            }
        )?;
        let refs: std::collections::BTreeSet<&str> = self
            .servers
            .iter()
            .flat_map(|m| m.env_refs.iter().map(String::as_str))
            .collect();
        if refs.is_empty() {
            return Ok(());
        }
        let list: Vec<String> = refs.iter().map(|v| format!("\"{v}\"")).collect();
        writeln!(
            to.err,
            "  The MCP servers read {} from your environment: each must be allowed in the overrides file:\n    [\"{pack_id}\"]\n    allow_env = [{}]",
            env_vars(refs.iter().copied()),
            list.join(", ")
        )
    }
}

/// `${A}, ${B}`.
fn env_vars<'a>(names: impl Iterator<Item = &'a str>) -> String {
    names
        .map(|v| format!("${{{v}}}"))
        .collect::<Vec<_>>()
        .join(", ")
}

pub(super) fn trust(args: &TrustArgs) -> Result<Trust, Failed> {
    let root = crate::paths::install_root(args.root.as_deref())?;
    let target = trust_target(&args.pack_id)?;
    let pack_id = target.pack_id().to_string();
    let is_dir = matches!(target, trust::Target::Dir { .. });
    let guard = dist::root::RootGuard::acquire(&root, is_dir)?.ok_or_else(|| {
        DistError::new(
            code::Pack::NotInstalled,
            format!("{pack_id} is not installed in {}", root.display()),
        )
        .help("a pack directory is trusted as a path: `apiary trust ./my-pack`")
    })?;
    if args.revoke {
        let had = trust::forget_target(&guard, &target)?;
        return Ok(Trust::Revoked(Revoked {
            ok: true,
            pack_id,
            revoked: had,
            arg: args.pack_id.clone(),
        }));
    }
    let review = trust::review(&root, &target)?;
    let wanted = if args.hooks || args.mcp {
        (args.hooks, args.mcp)
    } else {
        (true, true)
    };
    let mut reviewed = Reviewed {
        ok: true,
        pack_id,
        version: review.version.clone(),
        dir: review.dir.clone(),
        trusted: false,
        hooks: if wanted.0 {
            review.hooks.clone()
        } else {
            vec![]
        },
        servers: if wanted.1 {
            review.mcp_servers.clone()
        } else {
            vec![]
        },
        wanted,
        is_dir,
        compiled: Vec::new(),
    };
    if reviewed.hooks.is_empty() && reviewed.servers.is_empty() {
        return Ok(Trust::Reviewed(reviewed));
    }
    if !args.json {
        let _ = write_review(&mut std::io::stderr().lock(), &reviewed);
    }
    confirm(args, &reviewed)?;
    reviewed.compiled = compile_components(&review.dir, &reviewed.hooks, !args.json);
    if let Some(bad) = reviewed.compiled.iter().find(|c| c.outcome == "failed") {
        let e = DistError::new(
            code::Trust::Component,
            format!(
                "hook component {} cannot be loaded: {}; nothing was trusted",
                bad.path,
                bad.error.as_deref().unwrap_or("unknown error")
            ),
        )
        .help("`apiary component inspect FILE` shows what apiary refuses in it");
        return Err(e.into());
    }
    trust::record(&guard, &target, &review, wanted.0, wanted.1)?;
    reviewed.trusted = true;
    Ok(Trust::Reviewed(reviewed))
}

/// Compiles the wired component hooks among `hooks` into the compile cache, showing progress
/// when `show`.
fn compile_components(
    dir: &Path,
    hooks: &[trust::HookStatus],
    show: bool,
) -> Vec<super::precompile::Precompiled> {
    let components = hooks
        .iter()
        .filter(|h| h.kind == dist::lock::HookKind::Component && !h.commands.is_empty())
        .map(|h| h.path.as_str());
    super::precompile::hooks(dir, components, show)
}

/// The operator's yes: `--yes`, else an answer on the terminal.
fn confirm(args: &TrustArgs, r: &Reviewed) -> Result<(), Failed> {
    if args.yes {
        return Ok(());
    }
    let stdin = std::io::stdin();
    if args.json || !stdin.is_terminal() {
        let e = DistError::new(
            code::Trust::Confirm,
            "trusting hooks and MCP servers needs confirmation and there is no terminal to ask on",
        )
        .help("review the list above, then rerun with --yes");
        return Err(e.into());
    }
    eprint!(
        "Trust these for {} {}? Script hooks and MCP servers will run on this host with your privileges. [y/N] ",
        r.pack_id, r.version
    );
    let _ = std::io::stderr().flush();
    let mut line = String::new();
    let _ = stdin.lock().read_line(&mut line);
    if matches!(line.trim(), "y" | "Y" | "yes" | "YES" | "Yes") {
        Ok(())
    } else {
        Err(Failed::text(exit::FAILURE, "Not trusted.\n"))
    }
}

/// What `trust` is about to record, for people.
fn write_review(err: &mut dyn Write, r: &Reviewed) -> io::Result<()> {
    writeln!(err, "{} {} in {}:", r.pack_id, r.version, r.dir.display())?;
    if !r.hooks.is_empty() {
        writeln!(
            err,
            "\n{} hook file{}:",
            r.hooks.len(),
            plural(r.hooks.len())
        )?;
    }
    for h in &r.hooks {
        write_hook_review(err, h)?;
    }
    if !r.servers.is_empty() {
        writeln!(
            err,
            "\n{} stdio MCP server{} (the agent starts each on this host):",
            r.servers.len(),
            plural(r.servers.len())
        )?;
    }
    for m in &r.servers {
        write_server_review(err, m)?;
    }
    writeln!(err)
}

fn write_hook_review(err: &mut dyn Write, h: &trust::HookStatus) -> io::Result<()> {
    let kind = match h.kind {
        _ if h.commands.is_empty() => "carried file, not wired: apiary never runs it",
        dist::lock::HookKind::Component => "component (sandboxed)",
        dist::lock::HookKind::Script => "script (runs as a host process)",
    };
    writeln!(err, "\n  {}  [{kind}]", trust::quote(&h.path))?;
    writeln!(err, "    sha256  {}", h.sha256)?;
    writeln!(err, "    used by {}", h.used_by.join(", "))?;
    for c in &h.commands {
        writeln!(err, "    command {}", trust::quote(c))?;
    }
    if !h.capabilities.is_empty() {
        writeln!(
            err,
            "    grants  {} (declared beside it)",
            h.capabilities.join(", ")
        )?;
    }
    if !h.intact {
        writeln!(
            err,
            "    ✗ the file changed since install (or cannot be read)"
        )?;
    } else if h.trusted {
        writeln!(err, "    ✓ already trusted")?;
    }
    Ok(())
}

fn write_server_review(err: &mut dyn Write, m: &trust::McpStatus) -> io::Result<()> {
    writeln!(err, "\n  {}", trust::quote(&m.name))?;
    writeln!(err, "    command {}", m.command_line)?;
    writeln!(err, "    sha256  {}", m.sha256)?;
    writeln!(err, "    used by {}", m.used_by.join(", "))?;
    if !m.env_refs.is_empty() {
        writeln!(
            err,
            "    reads   {} from your environment (only if allowed: allow_env)",
            env_vars(m.env_refs.iter().map(String::as_str))
        )?;
    }
    if m.trusted {
        writeln!(err, "    ✓ already trusted")?;
    }
    Ok(())
}

/// `list`: the installed packs.
#[derive(Serialize)]
pub(super) struct Listed {
    root: PathBuf,
    packs: Vec<ListedPack>,
}

#[derive(Serialize)]
struct ListedPack {
    pack_id: String,
    version: String,
    source: String,
    sha256: Option<String>,
    resolved: Option<String>,
    installed_at: String,
    dir: PathBuf,
    hooks: usize,
    trusted_hooks: usize,
    /// Who signed it (`npub1…`), pinned for the id; null when unsigned.
    author: Option<String>,
    converted_from: Option<serde_json::Value>,
    /// An expert pack's `[expert.requires]` and recommended prompts (converted packs only).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    declared: Option<dist::expert::Declared>,
}

pub(super) fn list(args: &ListArgs) -> Result<Listed, Failed> {
    let root = crate::paths::install_root(args.root.as_deref())?;
    let guard = dist::root::RootGuard::acquire(&root, false)?;
    let lock = guard
        .as_ref()
        .map(|_| dist::lock::Lock::load(&root))
        .transpose()?
        .unwrap_or_default();
    drop(guard);
    let packs = lock
        .packs
        .into_iter()
        .map(|(id, entry)| {
            let (hooks, trusted_hooks) = match trust::status(&root, &id) {
                Ok((_, hs)) => (hs.len(), hs.iter().filter(|h| h.trusted).count()),
                Err(_) => (0, 0),
            };
            let converted_from = entry.extra.get("converted_from").cloned();
            let author = entry
                .extra
                .get(install::AUTHOR_KEY)
                .and_then(|v| v.as_str())
                .map(str::to_string);
            let declared = converted_from
                .as_ref()
                .map(|_| installed_declared(&root, &id));
            ListedPack {
                dir: root.join(&id),
                pack_id: id,
                version: entry.version,
                source: entry.source,
                sha256: entry.sha256,
                resolved: entry.resolved,
                installed_at: entry.installed_at,
                hooks,
                trusted_hooks,
                author,
                converted_from,
                declared,
            }
        })
        .collect();
    Ok(Listed { root, packs })
}

/// What the installed copy of a converted pack declares (empty when its manifest is unreadable).
fn installed_declared(root: &Path, id: &str) -> dist::expert::Declared {
    let manifest = std::fs::read(root.join(id).join(".plugin/plugin.json"))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default();
    dist::expert::Declared::of(&manifest)
}

impl Outcome for Listed {
    fn human(&self, to: &mut Human<'_>) -> io::Result<()> {
        if self.packs.is_empty() {
            return writeln!(to.err, "No packs installed in {}.", self.root.display());
        }
        writeln!(
            to.out,
            "{:<40} {:<12} {:<20} {:<7} SOURCE",
            "PACK", "VERSION", "INSTALLED", "HOOKS"
        )?;
        for p in &self.packs {
            let hooks = format!("{}/{}", p.trusted_hooks, p.hooks);
            writeln!(
                to.out,
                "{:<40} {:<12} {:<20} {:<7} {}",
                p.pack_id, p.version, p.installed_at, hooks, p.source,
            )?;
            let signed = match &p.author {
                Some(a) => format!("signed by {a}"),
                None => "unsigned".to_string(),
            };
            writeln!(to.out, "{:<40} {signed}", "")?;
            let format = p.converted_from.as_ref().and_then(|c| c.get("format"));
            if let Some(f) = format.and_then(serde_json::Value::as_str) {
                writeln!(to.out, "{:<40} (converted from {f})", "")?;
            }
            for line in p.declared.iter().flat_map(|d| d.lines()) {
                writeln!(to.out, "{:<40} {line}", "")?;
            }
        }
        writeln!(to.err, "(HOOKS: trusted/total)")
    }

    fn json(&self) -> Option<&dyn Document> {
        Some(self)
    }
}

/// `uninstall`: what was removed and what was kept.
pub(super) struct Uninstalled {
    removed: install::Removed,
    root: PathBuf,
}

pub(super) fn uninstall(args: &UninstallArgs) -> Result<Uninstalled, Failed> {
    let root = crate::paths::install_root(args.root.as_deref())?;
    let removed = install::uninstall(&root, &args.pack_id)?;
    Ok(Uninstalled { removed, root })
}

impl Serialize for Uninstalled {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Json<'a> {
            ok: bool,
            uninstalled: &'a install::Removed,
        }
        Json {
            ok: true,
            uninstalled: &self.removed,
        }
        .serialize(serializer)
    }
}

impl Outcome for Uninstalled {
    fn human(&self, to: &mut Human<'_>) -> io::Result<()> {
        let r = &self.removed;
        let version = r.version.as_deref().map(|v| format!(" {v}"));
        writeln!(
            to.err,
            "Uninstalled {}{} ({} file{} removed).",
            r.pack_id,
            version.unwrap_or_default(),
            r.removed_files,
            plural(r.removed_files)
        )?;
        for f in &r.agent_config {
            writeln!(to.err, "  took the pack's keys back out of {f}")?;
        }
        if r.kept.is_empty() {
            return Ok(());
        }
        writeln!(
            to.err,
            "  kept {} file{} the pack did not install, in {}:",
            r.kept.len(),
            plural(r.kept.len()),
            self.root.join(&r.pack_id).display()
        )?;
        for k in r.kept.iter().take(20) {
            writeln!(to.err, "    {k}")?;
        }
        Ok(())
    }

    fn json(&self) -> Option<&dyn Document> {
        Some(self)
    }
}

/// `verify`: each installed pack checked against its install record.
#[derive(Serialize)]
#[serde(transparent)]
pub(super) struct Verified {
    report: verify::VerifyReport,
}

pub(super) fn verify(args: &VerifyArgs) -> Result<Verified, Failed> {
    let root = crate::paths::install_root(args.root.as_deref())?;
    let report = verify::verify(&root, args.pack_id.as_deref())?;
    Ok(Verified { report })
}

impl Outcome for Verified {
    fn human(&self, to: &mut Human<'_>) -> io::Result<()> {
        let report = &self.report;
        for p in &report.packs {
            write_pack_check(to.err, p)?;
        }
        for u in &report.untracked {
            writeln!(
                to.err,
                "? {u}: a directory pack.lock does not list (left alone)"
            )?;
        }
        if report.packs.is_empty() {
            writeln!(to.err, "No packs installed in {}.", report.root.display())?;
        }
        Ok(())
    }

    fn json(&self) -> Option<&dyn Document> {
        Some(self)
    }

    fn exit_code(&self) -> u8 {
        if self.report.ok {
            exit::OK
        } else {
            exit::FAILURE
        }
    }
}

fn write_pack_check(err: &mut dyn Write, p: &verify::PackCheck) -> io::Result<()> {
    let quarantined = p.hooks - p.trusted_hooks.min(p.hooks);
    let hooks = if quarantined > 0 {
        format!(
            ", {quarantined} hook file{} quarantined",
            plural(quarantined)
        )
    } else {
        String::new()
    };
    let author = match &p.author {
        Some(a) => format!(", signed by {a}"),
        None => ", unsigned".to_string(),
    };
    if p.ok {
        return writeln!(
            err,
            "✓ {} {} ({} files{hooks}{author})",
            p.pack_id, p.version, p.files
        );
    }
    writeln!(
        err,
        "✗ {} {}: {} problem{}",
        p.pack_id,
        p.version,
        p.problems.len(),
        plural(p.problems.len())
    )?;
    for pr in &p.problems {
        writeln!(err, "    {}: {}", pr.kind, pr.message)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::output::capture;

    #[test]
    fn a_refusal_is_an_error_document_or_the_message_and_its_help() {
        let e = DistError::new(code::Pack::NotInstalled, "x is not installed in /r").help("try y");
        let (out, err, json, code) = capture(&Failed::from(e));
        assert_eq!(out, "");
        assert_eq!(err, "error: x is not installed in /r\n  help: try y\n");
        assert_eq!(
            json.unwrap(),
            "{\n  \"ok\": false,\n  \"error\": {\n    \"code\": \"pack.not-installed\",\n    \"message\": \"x is not installed in /r\",\n    \"help\": \"try y\"\n  }\n}"
        );
        assert_eq!(code, exit::FAILURE);
    }

    #[test]
    fn an_empty_root_lists_nothing() {
        let root = tempfile::tempdir().unwrap();
        let args = ListArgs {
            root: Some(root.path().to_path_buf()),
            json: true,
        };
        let (out, err, json, code) = capture(&list(&args));
        assert_eq!(out, "");
        assert_eq!(
            err,
            format!("No packs installed in {}.\n", root.path().display())
        );
        let v: serde_json::Value = serde_json::from_str(&json.unwrap()).unwrap();
        assert_eq!(v["packs"], serde_json::json!([]));
        assert_eq!(v["root"], root.path().to_str().unwrap());
        assert_eq!(code, exit::OK);
    }

    #[test]
    fn nothing_to_trust_says_what_was_looked_for() {
        let reviewed = |wanted| Reviewed {
            ok: true,
            pack_id: "p".into(),
            version: "1.0.0".into(),
            dir: "/d".into(),
            trusted: false,
            hooks: vec![],
            servers: vec![],
            wanted,
            is_dir: false,
            compiled: vec![],
        };
        let (_, err, json, _) = capture(&Trust::Reviewed(reviewed((true, false))));
        assert_eq!(err, "p 1.0.0 has no hooks: nothing to trust.\n");
        assert_eq!(
            json.unwrap(),
            "{\n  \"ok\": true,\n  \"pack_id\": \"p\",\n  \"version\": \"1.0.0\",\n  \"dir\": \"/d\",\n  \"trusted\": false,\n  \"hooks\": [],\n  \"mcp_servers\": []\n}"
        );
        let (_, err, _, _) = capture(&Trust::Reviewed(reviewed((true, true))));
        assert_eq!(
            err,
            "p 1.0.0 has no hooks and no stdio MCP servers: nothing to trust.\n"
        );
    }
}
