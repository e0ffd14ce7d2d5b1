//! Installing and uninstalling packs in an install root, atomically and recoverably.
//!
//! An install holds `<root>/.apiary/lock` (an OS advisory lock, released if the process dies) from
//! start to end, and goes through these steps:
//! 1. **recover** whatever an earlier interrupted run left behind (below);
//! 2. **fetch** the source into `.apiary/staging/work-*` (checksum verified before anything is
//!    unpacked), then **stage** the pack into `.apiary/staging/pack-*` (fenced extraction, or a copy
//!    of a git checkout's shippable files), every file mode 0644 so no script lands executable;
//! 3. **validate** the staged pack (errors, including an engine that is too new, refuse), refuse an
//!    id installed from another source unless `--replace` ([`super::identity::same_source`]), and
//!    write the install record (`.apiary-install.json`: file digests, hooks); fsync files and
//!    directories;
//! 4. write the **journal** (`.apiary/journal.json`: pack id, where the old version goes, the lock
//!    entry about to be committed);
//! 5. rename the installed version (if any) to `.apiary/old/`, rename the staged pack to
//!    `<root>/<pack-id>`;
//! 6. rewrite `pack.lock` through a temporary file and a rename: **this is the commit point**;
//! 7. remove the journal, then the old version.
//!
//! Recovery with a journal present: if `pack.lock` already holds the journal's entry the install
//! committed, and only the old version is removed; otherwise it is rolled back (the new directory,
//! recognised by its install id, goes to the trash, the old one is renamed back). Scratch
//! directories are then emptied. So after a crash at any point, the next command sees either the
//! complete previous install or the complete new one, files and lock agreeing.
//!
//! For the crash-safety test, `APIARY_TEST_STEP_DELAY_MS=<n>` sleeps `n` ms after each step
//! (test-only; never set it in production).

pub mod expert;

use crate::dist::code;
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::agent_config;
use super::archive::{self, FileDigest, Limits, RECORD_NAME};
use super::fetch::{self, Fetched, Source};
use super::lock::{HookRecord, InstallRecord, Lock, LockEntry, hook_records};
use super::root::{JOURNAL, Journal, RootGuard, Scratch, pack_dir_name, step};
use super::{DistError, Result, fsync_dir, nonce, through_symlink};
use crate::diag::Report;
use crate::pack::{self, Pack};

const RECORD_FORMAT: u32 = 1;

/// Refuses an id that differs from an installed one only in case: on a case-insensitive filesystem
/// both would be the same directory, so one would silently take the other's place.
fn check_case_twin(lock: &Lock, pack_id: &str) -> Result<()> {
    match lock
        .packs
        .keys()
        .find(|k| k.as_str() != pack_id && k.eq_ignore_ascii_case(pack_id))
    {
        Some(twin) => Err(DistError::new(
            code::Install::IdCase,
            format!("{pack_id} differs only in case from the installed pack {twin}; refusing to install it beside it"),
        )
        .help(format!("`apiary uninstall {twin}` first if this pack should take its place"))),
        None => Ok(()),
    }
}

#[derive(Debug, Clone, Default)]
pub struct Options {
    pub progress: bool,
    pub limits: Limits,
    /// Install exactly what `pack.lock` pins for this source: the recorded commit of a git source,
    /// or an archive whose digest equals the recorded `sha256`.
    pub locked: bool,
    /// Replace an installed pack of the same id that came from another source (without it, that is
    /// refused: see [`super::identity::same_source`]).
    pub replace: bool,
    /// `--sha256`: the digest the archive must have (archive sources; stands in for its `.sha256`).
    pub sha256: Option<String>,
    /// What to do with an expert `.zip` that no checksum vouches for.
    pub unverified: expert::Unverified,
    /// Refuse a pack no author signed (`--require-signed`, the overrides file's `require_signed`).
    pub require_signed: bool,
    /// Accept a pack signed by another author than the one pinned for its id, or unsigned where
    /// the installed one was signed (`--replace-author`); the new author is pinned.
    pub replace_author: bool,
    /// `--author`: the pack must be signed by this key (`npub1…`), from the first install on.
    pub author: Option<String>,
    /// Where a `nostr:<pack-id>` source is looked up (`--relay`, `--blobs`).
    pub registry: Option<super::registry::Where>,
    /// Shows an expert pack's declared needs and recommended prompts (the DuDuClaw Expert Pack
    /// Format v1.0, §3 expert.toml: "installers surface it before install") once it is converted
    /// and before anything is installed.
    pub announce: Option<fn(&[String])>,
}

/// What `install` did.
#[derive(Debug, Serialize)]
pub struct Installed {
    pub pack_id: String,
    pub name: String,
    pub version: String,
    pub previous_version: Option<String>,
    /// The source of the installed pack this install replaced (`--replace`), when it was another.
    pub replaced_source: Option<String>,
    pub dir: PathBuf,
    pub lock_entry: LockEntry,
    pub files: usize,
    pub hooks: Vec<HookRecord>,
    #[serde(skip)]
    pub report: Report,
    /// Set when the pack was converted from a DuDuClaw expert pack.
    pub expert: Option<expert::Summary>,
    /// The author who signed it (`npub1…`), pinned for its id; `None` when unsigned.
    pub author: Option<String>,
    /// What the operator should know (an unsigned pack).
    pub warnings: Vec<String>,
}

/// Credentials in `source` are scrubbed from any error, whoever wrote its text.
pub fn install(root: &Path, source: &str, opts: &Options) -> Result<Installed> {
    install_from(root, source, opts).map_err(|e| fetch::scrub_error(e, source))
}

fn install_from(root: &Path, source: &str, opts: &Options) -> Result<Installed> {
    let source = Source::parse(source)?;
    if expert::is_expert_source(&source)? {
        return expert::install(root, &source, opts);
    }
    let guard = RootGuard::acquire(root, true)?
        .ok_or_else(|| DistError::new(code::Root::Missing, "install root vanished"))?;
    let id = nonce();
    let work = Scratch(guard.sub("staging").join(format!("work-{id}")));
    let stage = Scratch(guard.sub("staging").join(format!("pack-{id}")));
    for d in [&work.0, &stage.0] {
        fs::create_dir(d).map_err(|e| DistError::io("cannot create", d, e))?;
    }
    let limits = opts.limits;

    let mut source = source;
    let pinned = if opts.locked {
        Some(pin_from_lock(&guard.root, &mut source)?)
    } else {
        None
    };
    let (fetched, signature) = match &source {
        Source::Nostr { pack_id, version } => {
            let pinned = match &opts.author {
                Some(named) => Some(named.clone()),
                None => pinned_author(&Lock::load(&guard.root)?, pack_id)
                    .filter(|_| !opts.replace_author),
            };
            let found = super::registry::fetch(
                pack_id,
                version.as_deref(),
                opts.registry.as_ref(),
                pinned.as_deref(),
                &work.0,
                &limits,
            )?;
            (found.fetched, Some(found.signed))
        }
        _ => {
            let fetched = fetch::fetch(
                &source,
                &work.0,
                &limits,
                opts.progress,
                opts.sha256.as_deref(),
            )?;
            (fetched, signature_beside(&source)?)
        }
    };
    if let (Some(signed), Fetched::Archive { sha256, .. }) = (&signature, &fetched) {
        signed.vouches_for_digest(sha256, &source.lock_source())?;
    }
    if let (Some(Pin::Sha256(want)), Fetched::Archive { sha256, .. }) = (&pinned, &fetched)
        && want != sha256
    {
        return Err(DistError::new(
            code::Lock::Mismatch,
            format!(
                "pack.lock pins sha256 {want} for {}, but the source now serves {sha256}; refusing (--locked)",
                source.lock_source()
            ),
        )
        .help("install without --locked to accept the new archive"));
    }
    step("fetched");
    let (files, sha256, resolved) = match fetched {
        Fetched::Archive { path, sha256 } => {
            let bar = super::progress_bar(0, "unpacking", opts.progress);
            let label = source.lock_source();
            let files = archive::extract(&path, &label, &stage.0, &limits, &bar)?;
            (files, Some(sha256), None)
        }
        Fetched::Tree { dir, commit } => {
            let files = copy_tree(&dir, &stage.0, &limits)?;
            let resolved = format!("{}#{commit}", source.lock_source());
            (files, None, Some(resolved))
        }
    };
    let _ = fs::remove_dir_all(&work.0);
    step("unpacked");
    let provenance = Provenance {
        source: source.lock_source(),
        sha256,
        resolved,
        expert: None,
        signature,
    };
    commit(&guard, &id, stage, files, provenance, opts)
}

/// The author's signature shipped beside an archive source (`<archive>.sig.json`), checked.
fn signature_beside(source: &Source) -> Result<Option<super::signature::Signed>> {
    match source {
        Source::File(path) => super::signature::read_beside(path, &source.lock_source()),
        Source::Http(url) => fetch::signature_at(url),
        Source::Git { .. } | Source::Nostr { .. } => Ok(None),
    }
}

/// The key pinned as `pack_id`'s author in `lock` (`npub1…`).
fn pinned_author(lock: &Lock, pack_id: &str) -> Option<String> {
    lock.packs
        .get(pack_id)?
        .extra
        .get(AUTHOR_KEY)?
        .as_str()
        .map(str::to_string)
}

/// The lock entry's field pinning the pack's author.
pub const AUTHOR_KEY: &str = "author";

/// The author to pin for `pack_id`, and a warning: a signature must be by the pinned author (or
/// `--replace-author`), an unsigned pack replaces a signed one only with `--replace-author`, and
/// is refused outright under `--require-signed`.
fn check_author(
    pack_id: &str,
    pinned: Option<&str>,
    signed: Option<&super::signature::Signed>,
    opts: &Options,
) -> Result<(Option<String>, Vec<String>)> {
    use super::code::Signature;
    if let Some(named) = &opts.author {
        return match signed {
            Some(s) if &s.npub() == named => Ok((Some(s.npub()), Vec::new())),
            Some(s) => Err(DistError::new(
                Signature::AuthorChanged,
                format!(
                    "{pack_id} is signed by {}, not by {named} (--author); refusing to install it",
                    s.npub()
                ),
            )),
            None => Err(DistError::new(
                Signature::Missing,
                format!(
                    "{pack_id} is not signed, and --author {named} asks for its signature; refusing to install it"
                ),
            )),
        };
    }
    match (signed, pinned) {
        (Some(s), Some(p)) if s.npub() != p && !opts.replace_author => Err(DistError::new(
            Signature::AuthorChanged,
            format!(
                "{pack_id} was signed by {p} when it was installed; this one is signed by {}, another author; refusing to install it",
                s.npub()
            ),
        )
        .help("if the author really changed keys (ask them through a channel you trust), install again with --replace-author: the new key is pinned")),
        (Some(s), _) => Ok((Some(s.npub()), Vec::new())),
        (None, _) if opts.require_signed => Err(DistError::new(
            Signature::Missing,
            format!("{pack_id} is not signed by its author and signatures are required; refusing to install it"),
        )
        .help("ask the author for the archive's .sig.json (`apiary pack sign`), or install without --require-signed (and without require_signed in the overrides file)")),
        (None, Some(p)) if !opts.replace_author => Err(DistError::new(
            Signature::Unsigned,
            format!("{pack_id} was signed by {p} when it was installed; this one is not signed; refusing to install it"),
        )
        .help("get the signature (<archive>.sig.json) with the archive, or install again with --replace-author to accept an unsigned pack")),
        (None, _) => Ok((
            None,
            vec![format!("{pack_id} is not signed: nothing says who made it (an author signs with `apiary pack sign`)")],
        )),
    }
}

/// Where a staged pack came from, for its lock entry.
pub(crate) struct Provenance {
    /// The lock's `source`.
    pub source: String,
    pub sha256: Option<String>,
    pub resolved: Option<String>,
    /// Set when the pack was converted from a DuDuClaw expert pack.
    pub expert: Option<expert::Converted>,
    /// The author's signature, verified against the archive's digest.
    pub signature: Option<super::signature::Signed>,
}

/// Validates the pack staged in `stage` (whose files are `files`), writes its install record and
/// swaps it into place (steps 3 to 7 of the module docs). The root lock is held by `guard`.
pub(crate) fn commit(
    guard: &RootGuard,
    id: &str,
    stage: Scratch,
    files: Vec<FileDigest>,
    provenance: Provenance,
    opts: &Options,
) -> Result<Installed> {
    let (pack, report) = load_staged(&stage.0, &provenance)?;
    let mut plan = plan_commit(guard, &pack, &files, &provenance, opts)?;
    write_record(&stage.0, id, &plan, &files)?;
    step("staged");
    let target = guard.root.join(&plan.pack_id);
    let previous = previous_install(&target, &plan.pack_id, id)?;
    if plan.replaced_source.is_some() {
        // Trust was given to the pack from the other source: this one's hooks are reviewed anew.
        // Before the swap, so a failed install leaves less trust behind, never more.
        super::trust::forget(guard, &plan.pack_id)?;
    }
    let old_name = previous.as_ref().map(|p| p.old_name.clone());
    swap_in(guard, id, stage, &target, old_name, &mut plan)?;
    let CommitPlan {
        pack_id,
        hooks,
        replaced_source,
        merges,
        entry,
        warnings,
        ..
    } = plan;
    let author = entry
        .extra
        .get(AUTHOR_KEY)
        .and_then(|v| v.as_str())
        .map(str::to_string);
    Ok(Installed {
        pack_id,
        name: pack.manifest.name.clone(),
        version: entry.version.clone(),
        previous_version: previous.map(|p| p.version),
        replaced_source,
        dir: target,
        lock_entry: entry,
        files: files.len(),
        hooks,
        report,
        expert: provenance.expert.map(|e| e.summary(&pack, merges)),
        author,
        warnings,
    })
}

/// Step 3, validation: the staged pack, refused when invalid.
fn load_staged(stage: &Path, provenance: &Provenance) -> Result<(Pack, Report)> {
    let loaded = pack::load(stage);
    let report = loaded.report;
    match loaded.pack {
        Some(pack) => Ok((pack, report)),
        None => Err(DistError::new(
            code::Pack::Invalid,
            format!(
                "the pack from {} is invalid; refusing to install it",
                provenance.source
            ),
        )
        .with_report(report)),
    }
}

/// What a commit writes: the lock entry and install record, and the agent config changes.
struct CommitPlan {
    pack_id: String,
    hooks: Vec<HookRecord>,
    /// `pack.lock` as loaded under the root lock.
    lock: Lock,
    /// The source of the installed pack this one replaces, when it was another.
    replaced_source: Option<String>,
    merges: Vec<agent_config::Merge>,
    config_writes: Vec<agent_config::Write>,
    entry: LockEntry,
    warnings: Vec<String>,
}

/// Step 3, the checks against what is installed (an id differing only in case, an expert pack's
/// conflict, another source without `--replace`), and the lock entry and agent config to write.
fn plan_commit(
    guard: &RootGuard,
    pack: &Pack,
    files: &[FileDigest],
    provenance: &Provenance,
    opts: &Options,
) -> Result<CommitPlan> {
    let pack_id = pack_dir_name(&pack.manifest.id)?.to_string();
    let mut hooks = hook_records(pack, files);
    let lock = Lock::load(&guard.root)?;
    check_case_twin(&lock, &pack_id)?;
    let previous = lock.packs.get(&pack_id).cloned();
    let mut extra = BTreeMap::new();
    let mut partials = Vec::new();
    if let Some(expert) = &provenance.expert {
        expert::check_conflict(&pack_id, previous.as_ref())?;
        hooks.extend(expert::quarantined_hooks(files, &hooks));
        partials = expert.partials.clone();
        extra.insert("converted_from".to_string(), expert.lock_value());
    }
    let replaced_source = check_replace(&pack_id, pack, previous.as_ref(), provenance, opts)?;
    if let Some(signed) = &provenance.signature {
        signed.vouches_for_pack(&pack.manifest.id, &pack.manifest.version)?;
    }
    let (author, warnings) = check_author(
        &pack_id,
        pinned_author(&lock, &pack_id).as_deref(),
        provenance.signature.as_ref(),
        opts,
    )?;
    if let Some(author) = author {
        extra.insert(AUTHOR_KEY.to_string(), author.into());
    }
    // The operator-side agent config: the previous install's additions are taken back (where the
    // operator left them unchanged) and this pack's `agent.partial.toml` keys merged in.
    let before = previous
        .as_ref()
        .map(agent_config::recorded)
        .unwrap_or_default();
    let (merges, config_writes) = agent_config::plan(&guard.root, &pack_id, &partials, &before)?;
    if !merges.is_empty() {
        extra.insert(
            agent_config::LOCK_KEY.to_string(),
            agent_config::to_lock(&merges),
        );
    }
    let entry = LockEntry {
        source: provenance.source.clone(),
        sha256: provenance.sha256.clone(),
        resolved: provenance.resolved.clone(),
        version: pack.manifest.version.clone(),
        installed_at: super::now_rfc3339(),
        extra,
    };
    Ok(CommitPlan {
        pack_id,
        hooks,
        lock,
        replaced_source,
        merges,
        config_writes,
        entry,
        warnings,
    })
}

/// The id is self-declared: an install from another source is another pack claiming it, refused
/// unless `--replace`. Returns the replaced pack's source.
fn check_replace(
    pack_id: &str,
    pack: &Pack,
    previous: Option<&LockEntry>,
    provenance: &Provenance,
    opts: &Options,
) -> Result<Option<String>> {
    let Some(prev) = previous else {
        return Ok(None);
    };
    if super::identity::same_source(prev, &provenance.source, &pack.manifest.version) {
        return Ok(None);
    }
    if !opts.replace {
        return Err(DistError::new(
            code::Install::SourceConflict,
            format!(
                "{pack_id} {} is installed from {}; refusing to replace it with {pack_id} {} from {}, another source",
                prev.version, prev.source, pack.manifest.version, provenance.source
            ),
        )
        .help(format!(
            "check where this source comes from; if you want its pack in place of the installed one (a mirror, a fork you chose), install again with --replace: it takes over {pack_id}'s place, persona keys and workspaces, and its hooks must be trusted anew"
        )));
    }
    Ok(Some(prev.source.clone()))
}

/// Step 3, the install record in the staged pack, everything synced to disk.
fn write_record(stage: &Path, id: &str, plan: &CommitPlan, files: &[FileDigest]) -> Result<()> {
    let record = InstallRecord {
        format: RECORD_FORMAT,
        pack_id: plan.pack_id.clone(),
        install_id: Some(id.to_string()),
        lock: plan.entry.clone(),
        files: files
            .iter()
            .map(|f| (f.path.clone(), f.sha256.clone()))
            .collect(),
        hooks: plan.hooks.clone(),
    };
    record.write_new(stage)?;
    sync_tree(stage)
}

/// The installed version an install replaces.
struct Previous {
    /// What it is renamed to under `.apiary/old/`.
    old_name: String,
    version: String,
}

/// The version installed at `target`, if any, that the install will move aside. Refuses a
/// directory apiary did not install, or one holding files the pack did not bring.
fn previous_install(target: &Path, pack_id: &str, id: &str) -> Result<Option<Previous>> {
    if fs::symlink_metadata(target).is_err() {
        return Ok(None);
    }
    let prev = InstallRecord::load(target)?.ok_or_else(|| {
        DistError::new(
            code::Install::ForeignDir,
            format!(
                "{} exists but was not installed by apiary (no {RECORD_NAME}); refusing to replace it",
                target.display()
            ),
        )
        .help("remove or move that directory yourself, then install again")
    })?;
    let foreign = foreign_files(target, &prev)?;
    if !foreign.is_empty() {
        let shown: Vec<_> = foreign.iter().take(10).map(String::as_str).collect();
        return Err(DistError::new(
            code::Install::ForeignFiles,
            format!(
                "{} holds {} file{} the installed pack did not bring (e.g. {}); an upgrade would discard them",
                target.display(),
                foreign.len(),
                if foreign.len() == 1 { "" } else { "s" },
                shown.join(", ")
            ),
        )
        .help(format!("move them out of the pack directory, or `apiary uninstall {pack_id}` first (it keeps files the pack does not own)")));
    }
    Ok(Some(Previous {
        old_name: format!("{pack_id}-{id}"),
        version: prev.lock.version,
    }))
}

/// Steps 4 to 7: the journal, the renames, `pack.lock` (the commit point), the agent config, then
/// the journal and the old version go.
fn swap_in(
    guard: &RootGuard,
    id: &str,
    stage: Scratch,
    target: &Path,
    old_name: Option<String>,
    plan: &mut CommitPlan,
) -> Result<()> {
    let root = guard.root.as_path();
    let journal = Journal {
        pack_id: plan.pack_id.clone(),
        install_id: id.to_string(),
        old: old_name.clone(),
        entry: plan.entry.clone(),
        config: plan.config_writes.clone(),
    };
    let jtext = serde_json::to_vec_pretty(&journal)
        .map_err(|e| DistError::new(code::Journal::Write, e.to_string()))?;
    let jpath = guard.sub(JOURNAL);
    super::write_atomic(&jpath, &guard.state, &jtext)
        .map_err(|e| DistError::io("cannot write", &jpath, e))?;
    step("journal");

    let sync_root = || fsync_dir(&guard.root).map_err(|e| DistError::io("cannot sync", root, e));
    if let Some(name) = &old_name {
        let old = guard.sub("old").join(name);
        fs::rename(target, &old).map_err(|e| DistError::io("cannot move aside", target, e))?;
        sync_root()?;
        step("moved-old");
    }
    fs::rename(&stage.0, target).map_err(|e| DistError::io("cannot move into place", target, e))?;
    sync_root()?;
    step("moved-new");

    let lock = &mut plan.lock;
    lock.packs.insert(plan.pack_id.clone(), plan.entry.clone());
    lock.save(&guard.root, &guard.state)?;
    step("committed");
    // After the commit point and before the journal goes, so recovery can finish these writes.
    agent_config::apply(&guard.root, &guard.state, &plan.config_writes)?;
    step("agent-config");

    fs::remove_file(&jpath).map_err(|e| DistError::io("cannot remove", &jpath, e))?;
    let _ = fsync_dir(&guard.state);
    step("journal-removed");
    if let Some(name) = &old_name {
        let _ = fs::remove_dir_all(guard.sub("old").join(name));
    }
    Ok(())
}

enum Pin {
    Sha256(String),
    Commit,
}

/// For `--locked`: the lock entry whose `source` is this source, and what it pins. A git source is
/// rewritten to check out the pinned commit.
fn pin_from_lock(root: &Path, source: &mut Source) -> Result<Pin> {
    let lock = Lock::load(root)?;
    let wanted = source.lock_source();
    let entry = lock
        .packs
        .values()
        .find(|e| e.source == wanted)
        .ok_or_else(|| {
            DistError::new(
                code::Lock::NoEntry,
                format!("--locked: pack.lock has no entry with source {wanted}"),
            )
            .help("install it once without --locked to record it")
        })?;
    match source {
        Source::Git { reference, .. } => {
            let commit = entry
                .resolved
                .as_deref()
                .and_then(|r| r.rsplit_once('#'))
                .map(|(_, c)| c.to_string())
                .filter(|c| c.len() >= 7 && c.bytes().all(|b| b.is_ascii_hexdigit()))
                .ok_or_else(|| {
                    DistError::new(
                        code::Lock::NoPin,
                        format!("--locked: the pack.lock entry for {wanted} records no commit"),
                    )
                })?;
            *reference = Some(commit);
            Ok(Pin::Commit)
        }
        _ => entry.sha256.clone().map(Pin::Sha256).ok_or_else(|| {
            DistError::new(
                code::Lock::NoPin,
                format!("--locked: the pack.lock entry for {wanted} records no sha256"),
            )
        }),
    }
}

/// Copies the shippable files of a git checkout into the stage (what a build would package).
pub(crate) fn copy_tree(src: &Path, dest: &Path, limits: &Limits) -> Result<Vec<FileDigest>> {
    let rels = super::build::collect(src, limits)?;
    let mut out = Vec::with_capacity(rels.len());
    for rel in rels {
        let from = src.join(&rel);
        let to = dest.join(&rel);
        if let Some(parent) = to.parent() {
            fs::create_dir_all(parent).map_err(|e| DistError::io("cannot create", parent, e))?;
        }
        // Listed as a regular file: a link or FIFO swapped in since is refused, not followed.
        let bytes = crate::safe_fs::read_regular(
            &from,
            crate::safe_fs::FinalLink::Refuse,
            limits.max_file_bytes,
        )
        .map_err(|e| DistError::io("cannot read", &from, e))?;
        {
            use std::io::Write;
            let mut f = fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&to)
                .map_err(|e| DistError::io("cannot create", &to, e))?;
            f.write_all(&bytes)
                .and_then(|()| f.sync_all())
                .map_err(|e| DistError::io("cannot write", &to, e))?;
        }
        archive::set_mode(&to, 0o644)?;
        out.push(FileDigest {
            path: rel,
            size: bytes.len() as u64,
            sha256: super::sha256_hex(&bytes),
        });
    }
    Ok(out)
}

fn sync_tree(dir: &Path) -> Result<()> {
    for entry in fs::read_dir(dir).map_err(|e| DistError::io("cannot read", dir, e))? {
        let entry = entry.map_err(|e| DistError::io("cannot read", dir, e))?;
        let ft = entry
            .file_type()
            .map_err(|e| DistError::io("cannot stat", &entry.path(), e))?;
        if ft.is_dir() {
            sync_tree(&entry.path())?;
        }
    }
    fsync_dir(dir).map_err(|e| DistError::io("cannot sync", dir, e))
}

/// Files under an installed pack directory that its record does not list.
pub fn foreign_files(dir: &Path, record: &InstallRecord) -> Result<Vec<String>> {
    let mut out = Vec::new();
    walk_files(dir, "", &mut |rel| {
        if rel != RECORD_NAME && !record.files.contains_key(rel) {
            out.push(rel.to_string());
        }
    })?;
    Ok(out)
}

/// Calls `f` with the `/`-separated relative path of every non-directory under `dir`.
pub(crate) fn walk_files(dir: &Path, rel: &str, f: &mut dyn FnMut(&str)) -> Result<()> {
    let here = if rel.is_empty() {
        dir.to_path_buf()
    } else {
        dir.join(rel)
    };
    let mut names: Vec<_> = fs::read_dir(&here)
        .map_err(|e| DistError::io("cannot read", &here, e))?
        .filter_map(|e| e.ok())
        .collect();
    names.sort_by_key(|e| e.file_name());
    for e in names {
        let name = e.file_name().to_string_lossy().into_owned();
        let child = if rel.is_empty() {
            name
        } else {
            format!("{rel}/{name}")
        };
        let is_dir = e.file_type().map(|t| t.is_dir()).unwrap_or(false);
        if is_dir {
            walk_files(dir, &child, f)?;
        } else {
            f(&child);
        }
    }
    Ok(())
}

/// What `uninstall` removed.
#[derive(Debug, Clone, Serialize)]
pub struct Removed {
    pub pack_id: String,
    pub version: Option<String>,
    pub removed_files: usize,
    /// Files in the pack directory the pack did not bring: left in place.
    pub kept: Vec<String>,
    pub lock_entry_removed: bool,
    /// Agent config files (root-relative) the pack's merged keys were taken out of.
    pub agent_config: Vec<String>,
}

/// Removes the pack's lock entry (the commit point), then exactly the files its install record
/// lists, then directories left empty. Files the pack did not bring stay where they are. Safe to
/// run again after an interruption.
pub fn uninstall(root: &Path, pack_id: &str) -> Result<Removed> {
    pack_dir_name(pack_id)?;
    let Some(guard) = RootGuard::acquire(root, false)? else {
        return Err(not_installed(root, pack_id));
    };
    let mut lock = Lock::load(&guard.root)?;
    let target = guard.root.join(pack_id);
    let record = if target.is_dir() {
        InstallRecord::load(&target)?
    } else {
        None
    };
    let entry = lock.packs.get(pack_id).cloned();
    if entry.is_none() && record.is_none() {
        return Err(not_installed(root, pack_id));
    }
    if target.exists() && record.is_none() {
        return Err(DistError::new(
            code::Uninstall::NoRecord,
            format!(
                "{} has no {RECORD_NAME}, so apiary cannot tell which files the pack owns; refusing to delete anything",
                target.display()
            ),
        )
        .help("remove the directory yourself if you are sure"));
    }
    let lock_entry_removed = entry.is_some();
    if lock_entry_removed {
        lock.packs.remove(pack_id);
        lock.save(&guard.root, &guard.state)?;
        step("committed");
    }
    // Take back exactly the agent config keys this pack added and the operator left unchanged.
    let merges = entry
        .as_ref()
        .or(record.as_ref().map(|r| &r.lock))
        .map(agent_config::recorded)
        .unwrap_or_default();
    let config_writes = agent_config::unmerge(&guard.root, pack_id, &merges);
    agent_config::apply(&guard.root, &guard.state, &config_writes)?;
    let (removed_files, kept) = match &record {
        Some(record) => remove_recorded(&guard, &target, record)?,
        None => (0, Vec::new()),
    };
    let _ = super::trust::forget(&guard, pack_id);
    Ok(Removed {
        pack_id: pack_id.to_string(),
        version: entry
            .map(|e| e.version)
            .or_else(|| record.map(|r| r.lock.version)),
        removed_files,
        kept,
        lock_entry_removed,
        agent_config: config_writes.into_iter().map(|w| w.file).collect(),
    })
}

/// Removes the files `record` lists from the installed pack `target` (never through a directory
/// replaced by a link), the record itself, then directories left empty. Returns how many files
/// went and the files left in place (sorted).
fn remove_recorded(
    guard: &RootGuard,
    target: &Path,
    record: &InstallRecord,
) -> Result<(usize, Vec<String>)> {
    let mut removed_files = 0;
    let mut kept = Vec::new();
    for rel in record.files.keys() {
        if archive::check_entry_name(rel, &Limits::default()).is_err() {
            continue;
        }
        let p = target.join(rel);
        // Never delete through a directory someone replaced with a symlink.
        if through_symlink(target, rel) {
            kept.push(rel.clone());
            continue;
        }
        if fs::symlink_metadata(&p).is_ok_and(|m| !m.is_dir()) {
            fs::remove_file(&p).map_err(|e| DistError::io("cannot remove", &p, e))?;
            removed_files += 1;
        }
    }
    kept.extend(foreign_files(target, record)?);
    kept.sort();
    kept.dedup();
    let rec = InstallRecord::path(target);
    fs::remove_file(&rec).map_err(|e| DistError::io("cannot remove", &rec, e))?;
    prune_empty_dirs(target);
    let _ = fs::remove_dir(target);
    let _ = fsync_dir(&guard.root);
    Ok((removed_files, kept))
}

fn not_installed(root: &Path, pack_id: &str) -> DistError {
    DistError::new(
        code::Pack::NotInstalled,
        format!("{pack_id} is not installed in {}", root.display()),
    )
    .help("`apiary list` shows the installed packs")
}

fn prune_empty_dirs(dir: &Path) {
    if let Ok(entries) = fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                prune_empty_dirs(&e.path());
                let _ = fs::remove_dir(e.path());
            }
        }
    }
}
