//! `apiary install <expert pack>`: installing a DuDuClaw expert pack (a directory, a `.zip` or an
//! `https://…zip` URL) by converting it into a persona pack through the built-in, sandboxed
//! `converter-duduclaw` component and installing the result, honouring the install semantics of
//! the DuDuClaw Expert Pack Format v1.0, §4 Install semantics, as far as they apply to apiary:
//!
//! 1. **Fence the archive.** The zip goes through [`crate::dist::archive::extract`] with the format's cap
//!    (§2 Layout: 50 MiB unpacked; zip-slip, symlinks, devices, ratios and entry counts refused as
//!    for any `.buzzpack`); a directory is copied with the same cap, refusing symlinks that leave
//!    it. A `<source>.sha256` beside the zip (or at `<url>.sha256`) is verified when present, or
//!    the operator pins the digest with `--sha256`. A zip nothing vouches for is installed only
//!    when the operator confirms it (`--yes`, or a prompt at a terminal; refused otherwise, before
//!    it is unpacked); its digest is then recorded as found and `--locked` pins it. Plain `http://`
//!    needs `--sha256` as for any archive.
//! 2. **Topological order.** The converter writes the personas parents-first by `reports_to` and
//!    refuses a cycle (`reports-to-cycle:`); the install then fails with nothing written, because
//!    the conversion happens before the install root is touched. Personas, and their agent config,
//!    are installed in that order.
//! 3. **Deep-merge, never clobber.** `agent.partial.toml` goes into the operator-side agent config
//!    ([`crate::dist::agent_config`]), adding only keys not already set. An existing pack of the same id
//!    that was *not* installed from an expert pack is a conflict: refused, not replaced (§4.3
//!    Deep-merge, never clobber: "existing same-name assets are a conflict"); remove it first. An
//!    earlier install of the same expert pack is upgraded in place.
//! 4. **Hooks quarantined.** The converter carries `hooks/` under `x-expert/hooks/` and never wires
//!    them; every such file is recorded as a quarantined script hook (mode 0644, untrusted until
//!    `apiary trust`, shown by `trust`, `list` and `verify`). apiary has no DuDuClaw hook lifecycle,
//!    so even trusted they are not run: the pack works without them, as the format's §4.4 (Hooks
//!    are quarantined) requires.
//! 5. **Scan foreign content.** apiary has no content scanner; the converted pack passes the pack
//!    validator before anything is installed (the converter's output is validated twice: by the
//!    conversion and by the install).
//! 6. **Scoped removal.** `apiary uninstall` removes the files the install record lists and the
//!    agent config keys the lock records, nothing else.
//!
//! The lock entry records where the pack came from: `converted_from` holds the source format, the
//! converter's name, version and component digest, the digest of the expert pack's file tree and
//! whether a checksum was verified. Only built-in converters take part in installs, so what
//! converted an installed pack is part of the apiary binary the lock names by digest.

use crate::dist::code;
use std::fs;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{Value, json};

use super::{self as install, Installed, Options, Provenance};
use crate::convert::{self, Job, detect, registry::Registry};
use crate::dist::agent_config::{Merge, Partial};
use crate::dist::archive::{self, FileDigest, Limits};
use crate::dist::fetch::{self, Source, Vouched};
use crate::dist::lock::{HookKind, HookRecord, Lock, LockEntry};
use crate::dist::root::{RootGuard, Scratch};
use crate::dist::{DistError, Result, nonce};
use crate::pack::Pack;

/// The format id of an expert pack.
pub const FORMAT: &str = "duduclaw-expert";
/// The DuDuClaw Expert Pack Format v1.0, §2 Layout: an expert pack is at most 50 MB unpacked.
pub const MAX_UNPACKED: u64 = 50 * 1024 * 1024;
/// Where the converter carries the pack's hook files in the persona pack.
pub const HOOKS_DIR: &str = "x-expert/hooks/";

/// The archive caps for expert packs: the `.buzzpack` fence with the Expert Pack Format's size cap
/// (§2 Layout).
pub fn limits() -> Limits {
    Limits {
        max_archive_bytes: MAX_UNPACKED + (1 << 20),
        max_total_bytes: MAX_UNPACKED,
        ..Limits::default()
    }
}

/// Whether `source` is an expert pack rather than a `.buzzpack`: a directory (an expert pack is
/// the only directory `install` takes), a `*.zip`, another file (not `*.buzzpack`) that is a zip
/// with an `expert.toml` at its root or in its single top folder, or an http(s) URL ending in
/// `.zip`.
pub fn is_expert_source(source: &Source) -> Result<bool> {
    match source {
        Source::File(p) if p.is_dir() => Ok(true),
        Source::File(p) => {
            let ext = |x: &str| p.extension().is_some_and(|e| e.eq_ignore_ascii_case(x));
            // A `.zip` goes to the expert fence even when too big to peek into, to be refused there.
            Ok(!ext("buzzpack") && p.is_file() && (ext("zip") || zip_has_expert_toml(p)))
        }
        Source::Http(url) => {
            let path = url.split(['?', '#']).next().unwrap_or("");
            Ok(path.to_ascii_lowercase().ends_with(".zip"))
        }
        Source::Git { .. } | Source::Nostr { .. } => Ok(false),
    }
}

/// Reads only the central directory (after the size and entry-count checks the fence makes first).
fn zip_has_expert_toml(path: &Path) -> bool {
    let Ok((mut file, _)) = crate::safe_fs::open_regular(path, crate::safe_fs::FinalLink::Follow)
    else {
        return false;
    };
    let len = file.metadata().map(|m| m.len()).unwrap_or(u64::MAX);
    let lim = limits();
    if len > lim.max_archive_bytes
        || archive::declared_entries(&mut file, len).is_some_and(|n| n > lim.max_entries as u64)
    {
        // Too big for an expert pack: let the `.buzzpack` path refuse it with its own message.
        return false;
    }
    let Ok(zip) = zip::ZipArchive::new(std::io::BufReader::new(file)) else {
        return false;
    };
    zip.file_names().filter_map(|n| n.ok()).any(|n| {
        let n = n.trim_start_matches("./");
        n == "expert.toml"
            || n.split_once('/')
                .is_some_and(|(_, rest)| rest == "expert.toml")
    })
}

/// What to do with an expert `.zip` that no checksum vouches for (no `.sha256` published, no
/// `--sha256` given).
#[derive(Debug, Clone, Copy, Default)]
pub enum Unverified {
    /// Refuse it, naming `--sha256` and `--yes` (no one to ask).
    #[default]
    Refuse,
    /// Install it (`--yes`).
    Accept,
    /// Ask this function (the question, then `true` to go on): a prompt at a terminal.
    Ask(fn(&str) -> bool),
}

/// Lets an unvouched zip through only when the operator says so.
fn confirm_unverified(label: &str, sha256: &str, how: Unverified) -> Result<()> {
    let question = format!(
        "{label} publishes no checksum: nothing vouches for its contents (sha256 {sha256}). Install it anyway?"
    );
    let accepted = match how {
        Unverified::Accept => true,
        Unverified::Refuse => false,
        Unverified::Ask(ask) => ask(&question),
    };
    if accepted {
        return Ok(());
    }
    Err(DistError::new(
        code::Expert::Unverified,
        format!("{label} publishes no checksum (no .sha256 beside it), so nothing vouches for its contents (sha256 {sha256}); refusing to install it unconfirmed"),
    )
    .help("pass --sha256 <digest> with the digest its publisher gives you, or --yes to accept it as it is"))
}

/// One installed agent, in install (parents-first) order.
#[derive(Debug, Clone, Serialize)]
pub struct Agent {
    pub persona: String,
    /// The expert pack's agent name.
    pub agent: String,
    pub role: String,
    pub reports_to: String,
    pub department: String,
}

/// What an expert pack declares for its operator (the DuDuClaw Expert Pack Format v1.0, §3
/// expert.toml): the variables and binaries it needs (`[expert.requires] env, bins`: declared,
/// never fetched or installed) and the prompts to try first (`[expert.prompts] recommended`). Read
/// from the converted manifest's `x-expert.expert` block (the `[expert]` table as written), so
/// `install` and `list` show the same thing.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Declared {
    /// `[expert] name`, when it is a non-empty string.
    #[serde(skip)]
    pub name: Option<String>,
    #[serde(skip)]
    pub description: Option<String>,
    pub requires: Requires,
    pub prompts: Vec<String>,
}

/// `[expert.requires]`, each entry with whether this machine has it now.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Requires {
    pub env: Vec<Need>,
    pub bins: Vec<Need>,
}

/// One required variable or binary, and whether it is set (found on `PATH`) here.
#[derive(Debug, Clone, Serialize)]
pub struct Need {
    pub name: String,
    pub present: bool,
}

impl Declared {
    /// From a persona pack manifest converted from an expert pack (empty for any other).
    pub fn of(manifest: &Value) -> Declared {
        let table = manifest.get("x-expert").and_then(|x| x.get("expert"));
        let text = |key: &str| {
            table
                .and_then(|t| t.get(key))
                .and_then(Value::as_str)
                .filter(|s| !s.trim().is_empty())
                .map(str::to_string)
        };
        let list = |value: Option<&Value>| -> Vec<String> {
            value
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect()
        };
        let requires = table.and_then(|t| t.get("requires"));
        Declared {
            name: text("name"),
            description: text("description"),
            requires: Requires {
                env: list(requires.and_then(|r| r.get("env")))
                    .into_iter()
                    .map(|name| Need {
                        present: std::env::var_os(&name).is_some_and(|v| !v.is_empty()),
                        name,
                    })
                    .collect(),
                bins: list(requires.and_then(|r| r.get("bins")))
                    .into_iter()
                    .map(|name| Need {
                        present: on_path(&name),
                        name,
                    })
                    .collect(),
            },
            prompts: list(
                table
                    .and_then(|t| t.get("prompts"))
                    .and_then(|p| p.get("recommended")),
            ),
        }
    }

    /// Refuses an expert pack without `name` or `description`.
    fn check_required(&self, label: &str) -> Result<()> {
        let missing: Vec<&str> = [("name", &self.name), ("description", &self.description)]
            .into_iter()
            .filter(|(_, v)| v.is_none())
            .map(|(k, _)| k)
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        let fields = missing
            .iter()
            .map(|k| format!("`{k}`"))
            .collect::<Vec<_>>()
            .join(" and ");
        Err(DistError::new(
            code::Expert::Required,
            format!(
                "cannot install {label}: expert.toml [expert] has no {fields}; nothing was installed"
            ),
        )
        .help("an expert pack needs `name` (a slug such as `clinic-team`: its install id) and `description` (a one-line summary) in its [expert] table (seed 004 §3); add them, or convert it with `apiary convert`, which synthesises them and reports it"))
    }

    /// Whether there is anything to show.
    pub fn is_empty(&self) -> bool {
        self.requires.env.is_empty() && self.requires.bins.is_empty() && self.prompts.is_empty()
    }

    /// What the operator reads before the install (and in `list`): one line each, with the
    /// pack's text made safe for a terminal.
    pub fn lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        let needs = |label: &str, needs: &[Need], missing: &str| {
            let items: Vec<String> = needs
                .iter()
                .map(|n| {
                    if n.present {
                        shown(&n.name)
                    } else {
                        format!("{} ({missing})", shown(&n.name))
                    }
                })
                .collect();
            format!("requires {label}: {}", items.join(", "))
        };
        if !self.requires.env.is_empty() {
            out.push(needs("variables", &self.requires.env, "not set"));
        }
        if !self.requires.bins.is_empty() {
            out.push(needs("binaries", &self.requires.bins, "not on PATH"));
        }
        if !self.requires.env.is_empty() || !self.requires.bins.is_empty() {
            out.push("(declared by the pack; nothing is installed or fetched for it)".into());
        }
        for p in &self.prompts {
            out.push(format!("try: {}", shown(p)));
        }
        out
    }
}

/// Most characters of one declared item shown on a line.
const MAX_SHOWN: usize = 200;

/// Text from the pack as one terminal-safe line: control characters (escape sequences, newlines)
/// escaped, long text cut.
fn shown(text: &str) -> String {
    let mut out: String = text
        .chars()
        .take(MAX_SHOWN)
        .flat_map(|c| {
            let escaped: Vec<char> = if c.is_control() {
                c.escape_default().collect()
            } else {
                vec![c]
            };
            escaped
        })
        .collect();
    if text.chars().count() > MAX_SHOWN {
        out.push('…');
    }
    out
}

/// Whether an executable file `name` is in a `PATH` directory (a name with a `/` is looked up
/// as given).
fn on_path(name: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let runnable = |p: &Path| {
        fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if name.contains('/') {
        return runnable(Path::new(name));
    }
    std::env::var_os("PATH")
        .map(|paths| std::env::split_paths(&paths).any(|dir| runnable(&dir.join(name))))
        .unwrap_or(false)
}

/// What the conversion produced, carried into the install.
#[derive(Debug, Clone)]
pub struct Converted {
    /// What the pack declares for its operator (requires, recommended prompts).
    pub declared: Declared,
    pub expert_name: String,
    pub converter: String,
    pub converter_version: String,
    pub converter_digest: String,
    /// SHA-256 over the expert pack's files (sorted `path\0sha256\n` lines).
    pub tree_sha256: String,
    /// `verified` (a `.sha256` matched), `pinned` (the `--sha256` digest matched), `absent` (no
    /// `.sha256` published; accepted by the operator or pinned by `--locked`) or `directory`.
    pub checksum: &'static str,
    pub agents: Vec<Agent>,
    /// `(persona, agent.partial.toml as JSON)`, parents first.
    pub partials: Vec<Partial>,
    /// Counts of the converter's report: lost, synthesised, normalised, reinterpreted.
    pub report: [usize; 4],
}

/// The `expert` part of `apiary install --json`.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub format: &'static str,
    pub expert_name: String,
    pub converter: String,
    pub converter_version: String,
    pub converter_digest: String,
    pub checksum: &'static str,
    pub agents: Vec<Agent>,
    pub agent_config: Vec<Merge>,
    /// `[expert.requires]` (each with `present`) and `[expert.prompts] recommended`.
    pub requires: Requires,
    pub prompts: Vec<String>,
    pub report: Value,
}

impl Converted {
    /// The `converted_from` value of the lock entry.
    pub fn lock_value(&self) -> Value {
        json!({
            "format": FORMAT,
            "expert_name": self.expert_name,
            "converter": self.converter,
            "converter_version": self.converter_version,
            "converter_digest": self.converter_digest,
            "tree_sha256": self.tree_sha256,
            "checksum": self.checksum,
        })
    }

    pub fn summary(self, _pack: &Pack, merges: Vec<Merge>) -> Summary {
        let [lost, synthesised, normalised, reinterpreted] = self.report;
        Summary {
            format: FORMAT,
            expert_name: self.expert_name,
            converter: self.converter,
            converter_version: self.converter_version,
            converter_digest: self.converter_digest,
            checksum: self.checksum,
            agents: self.agents,
            agent_config: merges,
            requires: self.declared.requires,
            prompts: self.declared.prompts,
            report: json!({
                "lost": lost,
                "synthesised": synthesised,
                "normalised": normalised,
                "reinterpreted": reinterpreted,
            }),
        }
    }
}

/// Installs the expert pack at `source`. The expert pack is fetched, fenced and converted in a
/// private temporary directory first; the install root is touched only once a valid persona pack
/// exists.
pub fn install(root: &Path, source: &Source, opts: &Options) -> Result<Installed> {
    let tmp = tempfile::Builder::new()
        .prefix("apiary-expert-")
        .tempdir()
        .map_err(|e| {
            DistError::new(
                code::Code::Io,
                format!("cannot create a temporary directory: {e}"),
            )
        })?;
    let tree = tmp.path().join("expert");
    let label = source.lock_source();
    let (sha256, checksum) = stage_expert(root, source, opts, tmp.path(), &tree)?;
    if opts.locked {
        check_pin(root, &label, sha256.as_deref(), &tree)?;
    }
    let tree_sha256 = tree_digest(&tree)?;
    let expert_root = detect_expert(&tree, &label)?;
    let expert_name = expert_name(&expert_root);
    let out = tmp.path().join("converted");
    let (pack, used, report, manifest) = convert_expert(expert_root, &out, &label)?;
    let declared = Declared::of(&manifest);
    if let Some(announce) = opts.announce {
        announce(&declared.lines());
    }
    let (agents, partials) = agents_and_partials(&manifest, &pack);
    let converted = Converted {
        declared,
        expert_name,
        converter: used.name,
        converter_version: used.version,
        converter_digest: used.digest,
        tree_sha256,
        checksum,
        agents,
        partials,
        report,
    };
    let provenance = Provenance {
        source: label,
        sha256,
        resolved: None,
        expert: Some(converted),
        signature: None,
    };
    install_converted(root, &out, provenance, opts)
}

/// Fence step: the expert pack's files, copied (a directory) or unpacked (a zip, fetched and
/// checked first) into `tree`. Returns the zip's digest and how it was vouched for.
fn stage_expert(
    root: &Path,
    source: &Source,
    opts: &Options,
    tmp: &Path,
    tree: &Path,
) -> Result<(Option<String>, &'static str)> {
    let limits = limits();
    let label = source.lock_source();
    match source {
        Source::File(dir) if dir.is_dir() => {
            if opts.sha256.is_some() {
                return Err(DistError::new(
                    code::Expert::Sha256Directory,
                    format!("--sha256 pins an archive; {label} is a directory"),
                ));
            }
            let caps = convert::stage::Caps {
                max_entries: limits.max_entries,
                max_bytes: MAX_UNPACKED,
                max_depth: limits.max_depth,
            };
            convert::stage::copy_in(dir, tree, caps).map_err(|m| {
                DistError::new(
                    code::Expert::Input,
                    format!("cannot read the expert pack: {m}"),
                )
            })?;
            Ok((None, "directory"))
        }
        Source::File(_) | Source::Http(_) => {
            let work = tmp.join("work");
            fs::create_dir(&work).map_err(|e| DistError::io("cannot create", &work, e))?;
            let (zip, sha, checksum) = fetch_expert_zip(root, source, opts, &work, tree)?;
            fs::create_dir(tree).map_err(|e| DistError::io("cannot create", tree, e))?;
            let bar = crate::dist::progress_bar(0, "unpacking", opts.progress);
            archive::extract(&zip, &label, tree, &limits, &bar).map_err(expert_fence_help)?;
            Ok((Some(sha), checksum))
        }
        Source::Git { .. } | Source::Nostr { .. } => Err(DistError::new(
            code::Expert::Source,
            "expert packs install from a directory, a .zip or an https://…zip URL",
        )),
    }
}

/// The expert zip fetched into `work`, checked against its `.sha256`, `--sha256`, the lock
/// (`--locked`) or the operator's confirmation. Returns its path, digest and how it was vouched for.
fn fetch_expert_zip(
    root: &Path,
    source: &Source,
    opts: &Options,
    work: &Path,
    tree: &Path,
) -> Result<(PathBuf, String, &'static str)> {
    let limits = limits();
    let label = source.lock_source();
    let pin = opts.sha256.as_deref();
    let (zip, sha, vouched) = match source {
        Source::File(p) => fetch::fetch_file_checked(p, work, &limits, opts.progress, pin, false)?,
        Source::Http(u) => fetch::fetch_http_checked(u, work, &limits, opts.progress, pin, false)?,
        Source::Git { .. } | Source::Nostr { .. } => {
            unreachable!("git and nostr sources are refused before")
        }
    };
    let checksum = match vouched {
        Vouched::Checksum => "verified",
        Vouched::Pinned => "pinned",
        // The digest pack.lock recorded pins it (checked here, before unpacking).
        Vouched::Nothing if opts.locked => {
            check_pin(root, &label, Some(&sha), tree)?;
            "absent"
        }
        Vouched::Nothing => {
            confirm_unverified(&label, &sha, opts.unverified)?;
            "absent"
        }
    };
    Ok((zip, sha, checksum))
}

/// The fence's refusal of an expert zip, with the help that applies to expert packs.
fn expert_fence_help(mut e: DistError) -> DistError {
    e.help = Some(if e.code == code::Code::from(code::Archive::Vcs) {
        "an expert pack zip may not carry version-control metadata (.git/ and the like); zip the pack without it".into()
    } else {
        format!(
            "an expert pack zip may only hold relative paths inside the pack, at most {} MiB unpacked (seed 004 §4.1)",
            MAX_UNPACKED >> 20
        )
    });
    e
}

/// Fails closed unless the host's detection rules say "expert pack"; returns its root in `tree`.
fn detect_expert(tree: &Path, label: &str) -> Result<PathBuf> {
    let found = detect::detect(tree).map_err(|r| not_expert(label, &r.reason))?;
    if found.format != FORMAT {
        return Err(not_expert(
            label,
            &format!("it holds {} ({})", found.format, found.evidence),
        ));
    }
    Ok(tree.join(&found.root))
}

/// Converts the expert pack at `expert_root` into a persona pack in `out` with the built-in
/// converter, and validates it. Returns the pack, the converter that ran, the conversion's counts
/// (lost, synthesised, normalised, reinterpreted) and the converted manifest. The DuDuClaw Expert
/// Pack Format v1.0, §3 expert.toml: an expert pack without `name` (the install id) or
/// `description` is refused, as is a name the id would have to be made up for.
fn convert_expert(
    expert_root: PathBuf,
    out: &Path,
    label: &str,
) -> Result<(Pack, convert::Used, [usize; 4], Value)> {
    let sandbox = crate::shared_sandbox().map_err(|e| {
        DistError::new(
            code::Expert::Sandbox,
            format!("cannot start the sandbox: {e}"),
        )
    })?;
    let registry = Registry::load(sandbox, None, None);
    let job = Job {
        src: expert_root,
        to: convert::plan::PIVOT.to_string(),
        from: Some(FORMAT.to_string()),
        out: out.to_path_buf(),
        force: false,
        options: Vec::new(),
    };
    let outcome = convert::convert(sandbox, &registry, &job);
    if let Some(f) = &outcome.error {
        return Err(conversion_failed(label, f));
    }
    let Some(used) = outcome.converters.first() else {
        return Err(DistError::new(code::Expert::Convert, "no converter ran"));
    };
    let report = &outcome.report;
    let manifest = converted_manifest(out)?;
    Declared::of(&manifest).check_required(label)?;
    // A name with nothing usable in an id (all CJK, say) would install under a made-up one.
    if let Some(f) = report
        .synthesised
        .iter()
        .find(|f| f.code == "name-synthesised" && f.field == "expert.name")
    {
        return Err(DistError::new(
            code::Expert::Required,
            format!(
                "cannot install {label}: {} `{}`: {}; nothing was installed",
                f.path, f.field, f.message
            ),
        )
        .help("`name` in [expert] is the pack's install id: give it as a slug of a-z, 0-9 and `-` (seed 004 §3)"));
    }
    let counts = [
        report.lost.len(),
        report.synthesised.len(),
        report.normalised.len(),
        report.reinterpreted.len(),
    ];
    let loaded = crate::pack::load(out);
    let Some(pack) = loaded.pack else {
        return Err(DistError::new(
            code::Pack::Invalid,
            format!("the persona pack converted from {label} is invalid; refusing to install it"),
        )
        .with_report(loaded.report));
    };
    Ok((pack, used.clone(), counts, manifest))
}

/// The root is touched only now: the converted pack in `out` is staged and committed as any pack.
fn install_converted(
    root: &Path,
    out: &Path,
    provenance: Provenance,
    opts: &Options,
) -> Result<Installed> {
    let guard = RootGuard::acquire(root, true)?
        .ok_or_else(|| DistError::new(code::Root::Missing, "install root vanished"))?;
    let id = nonce();
    let stage = Scratch(guard.sub("staging").join(format!("pack-{id}")));
    fs::create_dir(&stage.0).map_err(|e| DistError::io("cannot create", &stage.0, e))?;
    let files = install::copy_tree(out, &stage.0, &limits())?;
    install::commit(&guard, &id, stage, files, provenance, opts)
}

fn not_expert(label: &str, why: &str) -> DistError {
    DistError::new(
        code::Expert::NotExpert,
        format!("{label} is not a DuDuClaw expert pack: {why}"),
    )
    .help("an expert pack has expert.toml at its root (or in a single top folder); a persona pack directory is installed by building it first with `apiary pack build`")
}

fn conversion_failed(label: &str, f: &convert::Failure) -> DistError {
    if let Some(at) = f.message.find("reports-to-cycle:") {
        let detail = f.message[at + "reports-to-cycle:".len()..].trim();
        return DistError::new(
            code::Expert::ReportsToCycle,
            format!("cannot install {label}: reports-to-cycle: {detail}; nothing was installed"),
        )
        .help("fix `reports_to` in expert.toml so the agents form a tree (seed 004 §4.2: agents are created parents first)");
    }
    DistError::new(
        code::Expert::Convert,
        format!(
            "cannot convert {label} into a persona pack ({}): {}; nothing was installed",
            f.code, f.message
        ),
    )
}

/// `[expert] name` from `expert.toml`, for the record (empty when unreadable; the converter
/// already accepted the file).
fn expert_name(root: &Path) -> String {
    fs::read_to_string(root.join("expert.toml"))
        .ok()
        .and_then(|t| t.parse::<toml::Table>().ok())
        .and_then(|t| {
            t.get("expert")
                .and_then(|e| e.get("name"))
                .and_then(|n| n.as_str())
                .map(str::to_string)
        })
        .unwrap_or_default()
}

/// The converted pack's manifest as JSON.
fn converted_manifest(out: &Path) -> Result<Value> {
    fs::read(out.join(".plugin/plugin.json"))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .ok_or_else(|| {
            DistError::new(
                code::Expert::Convert,
                "the converted pack has no readable manifest",
            )
        })
}

/// The personas in install order with their expert fields, and their partials, from the
/// converted manifest's `x-expert.agents` block.
fn agents_and_partials(manifest: &Value, pack: &Pack) -> (Vec<Agent>, Vec<Partial>) {
    let ext = manifest
        .get("x-expert")
        .and_then(|x| x.get("agents"))
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let mut agents = Vec::new();
    let mut partials = Vec::new();
    for p in &pack.personas {
        let rec = ext.get(&p.name);
        let table = rec.and_then(|r| r.get("table"));
        let field = |k: &str| {
            table
                .and_then(|t| t.get(k))
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        agents.push(Agent {
            persona: p.name.clone(),
            agent: field("name"),
            role: field("role"),
            reports_to: field("reports_to"),
            department: field("department"),
        });
        if let Some(Value::Object(partial)) = rec.and_then(|r| r.get("partial")) {
            partials.push((p.name.clone(), partial.clone()));
        }
    }
    (agents, partials)
}

/// The DuDuClaw Expert Pack Format v1.0, §4.3 Deep-merge, never clobber: an existing pack of the
/// same id that did not come from an expert pack is a conflict, not something to replace.
pub fn check_conflict(pack_id: &str, previous: Option<&LockEntry>) -> Result<()> {
    match previous {
        Some(e) if !e.extra.contains_key("converted_from") => Err(DistError::new(
            code::Install::Conflict,
            format!(
                "{pack_id} is already installed from {} (not from an expert pack); the expert pack would replace it",
                e.source
            ),
        )
        .help(format!(
            "an existing pack of the same name is a conflict (seed 004 §4.3); `apiary uninstall {pack_id}` first if you mean to replace it"
        ))),
        _ => Ok(()),
    }
}

/// The expert pack's hook files (carried under `x-expert/hooks/`, never wired), as quarantined
/// hooks, except those already recorded because the pack wires them.
pub fn quarantined_hooks(files: &[FileDigest], wired: &[HookRecord]) -> Vec<HookRecord> {
    files
        .iter()
        .filter(|f| f.path.starts_with(HOOKS_DIR) && !wired.iter().any(|h| h.path == f.path))
        .map(|f| HookRecord {
            path: f.path.clone(),
            sha256: f.sha256.clone(),
            kind: if f.path.ends_with(".wasm") {
                HookKind::Component
            } else {
                HookKind::Script
            },
            used_by: vec!["expert pack hooks/ (carried, not wired)".to_string()],
            commands: Vec::new(),
        })
        .collect()
}

/// SHA-256 over the sorted `path\0sha256\n` lines of every file under `dir`.
fn tree_digest(dir: &Path) -> Result<String> {
    let mut lines = Vec::new();
    install::walk_files(dir, "", &mut |rel| lines.push(rel.to_string()))?;
    lines.sort();
    let mut text = String::new();
    for rel in lines {
        let p = dir.join(&rel);
        let sha = crate::dist::sha256_file(&p).map_err(|e| DistError::io("cannot read", &p, e))?;
        text.push_str(&format!("{rel}\0{sha}\n"));
    }
    Ok(crate::dist::sha256_hex(text.as_bytes()))
}

/// `--locked`: the pack.lock entry with this source must pin what was fetched (the archive's
/// sha256, or for a directory the digest of its files).
fn check_pin(root: &Path, label: &str, sha256: Option<&str>, tree: &Path) -> Result<()> {
    let lock = Lock::load(root)?;
    let entry = lock
        .packs
        .values()
        .find(|e| e.source == label)
        .ok_or_else(|| {
            DistError::new(
                code::Lock::NoEntry,
                format!("--locked: pack.lock has no entry with source {label}"),
            )
            .help("install it once without --locked to record it")
        })?;
    let (want, got) = match sha256 {
        Some(s) => (entry.sha256.clone(), s.to_string()),
        None => (
            entry
                .extra
                .get("converted_from")
                .and_then(|c| c.get("tree_sha256"))
                .and_then(Value::as_str)
                .map(str::to_string),
            tree_digest(tree)?,
        ),
    };
    let want = want.ok_or_else(|| {
        DistError::new(
            code::Lock::NoPin,
            format!("--locked: the pack.lock entry for {label} pins no digest"),
        )
    })?;
    if want != got {
        return Err(DistError::new(
            code::Lock::Mismatch,
            format!("pack.lock pins {want} for {label}, but the source is now {got}; refusing (--locked)"),
        )
        .help("install without --locked to accept the new version"));
    }
    Ok(())
}
