//! `apiary verify`: re-hash installed packs against what was recorded at install time.
//!
//! For each `pack.lock` entry: the pack directory and its install record must exist, the record must
//! belong to this lock entry (same source, digest or commit, version and time), every recorded file
//! must have its recorded SHA-256, no file may have appeared, and nothing may have become executable
//! (installs are mode 0644; an executable hook means someone bypassed the quarantine).

use crate::dist::code;
use std::path::Path;

use serde::Serialize;

use super::install::foreign_files;
use super::lock::{InstallRecord, Lock};
use super::root::RootGuard;
use super::{DistError, Result};

#[derive(Debug, Clone, Serialize)]
pub struct PackCheck {
    pub pack_id: String,
    pub version: String,
    pub ok: bool,
    pub files: usize,
    /// Hook files the pack brought, and how many of them the operator trusted; the others are
    /// quarantined (never run).
    pub hooks: usize,
    pub trusted_hooks: usize,
    /// The author whose signature was verified at install (`npub1…`), pinned for the id.
    pub author: Option<String>,
    pub problems: Vec<Problem>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Problem {
    /// `missing-dir`, `missing-record`, `record-mismatch`, `modified`, `missing`, `extra`, `executable`
    pub kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    pub message: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct VerifyReport {
    pub root: std::path::PathBuf,
    pub ok: bool,
    pub packs: Vec<PackCheck>,
    /// Directories in the root that `pack.lock` does not list (not an error).
    pub untracked: Vec<String>,
}

pub fn verify(root: &Path, only: Option<&str>) -> Result<VerifyReport> {
    // Holding the root lock also runs recovery, so an interrupted install is settled first.
    let guard = RootGuard::acquire(root, false)?;
    let lock = if guard.is_some() {
        Lock::load(root)?
    } else {
        Lock::default()
    };
    if let Some(id) = only
        && !lock.packs.contains_key(id)
    {
        return Err(DistError::new(
            code::Pack::NotInstalled,
            format!("{id} is not installed in {}", root.display()),
        ));
    }
    let mut packs = Vec::new();
    for (id, entry) in &lock.packs {
        if only.is_some_and(|o| o != id) {
            continue;
        }
        packs.push(check_pack(root, id, entry));
    }
    let mut untracked = Vec::new();
    if only.is_none()
        && let Ok(entries) = std::fs::read_dir(root)
    {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if !name.starts_with('.')
                && e.file_type().is_ok_and(|t| t.is_dir())
                && !lock.packs.contains_key(&name)
            {
                untracked.push(name);
            }
        }
    }
    untracked.sort();
    drop(guard);
    Ok(VerifyReport {
        root: root.to_path_buf(),
        ok: packs.iter().all(|p| p.ok),
        packs,
        untracked,
    })
}

fn problem(kind: &'static str, path: Option<&str>, message: String) -> Problem {
    Problem {
        kind,
        path: path.map(str::to_string),
        message,
    }
}

fn check_pack(root: &Path, id: &str, entry: &super::lock::LockEntry) -> PackCheck {
    let mut problems = Vec::new();
    let dir = root.join(id);
    let mut files = 0;
    if !dir.is_dir() {
        problems.push(problem(
            "missing-dir",
            None,
            format!("{} is missing", dir.display()),
        ));
    } else {
        match InstallRecord::load(&dir) {
            Ok(None) => problems.push(problem(
                "missing-record",
                None,
                "the install record .apiary-install.json is missing".into(),
            )),
            Err(e) => problems.push(problem("missing-record", None, e.message)),
            Ok(Some(record)) => {
                files = record.files.len();
                check_record(id, entry, &record, &mut problems);
                for (rel, want) in &record.files {
                    check_file(&dir, rel, want, &mut problems);
                }
                check_foreign(&dir, &record, &mut problems);
            }
        }
    }
    let (hooks, trusted_hooks) = match super::trust::status(root, id) {
        Ok((_, hs)) => (hs.len(), hs.iter().filter(|h| h.trusted).count()),
        Err(_) => (0, 0),
    };
    PackCheck {
        pack_id: id.to_string(),
        version: entry.version.clone(),
        ok: problems.is_empty(),
        files,
        hooks,
        trusted_hooks,
        author: entry
            .extra
            .get(super::install::AUTHOR_KEY)
            .and_then(|v| v.as_str())
            .map(str::to_string),
        problems,
    }
}

/// The install record must belong to this lock entry (its own keys aside).
fn check_record(
    id: &str,
    entry: &super::lock::LockEntry,
    record: &InstallRecord,
    problems: &mut Vec<Problem>,
) {
    let mut lock_view = record.lock.clone();
    lock_view.extra = entry.extra.clone();
    if record.pack_id != id || &lock_view != entry {
        problems.push(problem(
            "record-mismatch",
            None,
            format!(
                "the installed files belong to {} {} ({}), but pack.lock says version {} from {}",
                record.pack_id,
                record.lock.version,
                record.lock.installed_at,
                entry.version,
                entry.source
            ),
        ));
    }
}

/// One recorded file: still a regular file reached without a link, not executable, with its
/// recorded digest.
fn check_file(dir: &Path, rel: &str, want: &str, problems: &mut Vec<Problem>) {
    let mut found = |kind, message| problems.push(problem(kind, Some(rel), message));
    if super::through_symlink(dir, rel) {
        return found(
            "modified",
            format!("{rel} is now reached through a symbolic link"),
        );
    }
    let p = dir.join(rel);
    let meta = match std::fs::symlink_metadata(&p) {
        Ok(m) if m.is_file() => m,
        Ok(_) => return found("modified", format!("{rel} is no longer a regular file")),
        Err(_) => return found("missing", format!("{rel} is missing")),
    };
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if meta.permissions().mode() & 0o111 != 0 {
            found(
                "executable",
                format!(
                    "{rel} has become executable (installed files are quarantined at mode 0644)"
                ),
            );
        }
    }
    #[cfg(not(unix))]
    let _ = meta;
    match super::sha256_file(&p) {
        Ok(got) if got == want => {}
        Ok(got) => found(
            "modified",
            format!("{rel} changed: sha256 {got}, installed {want}"),
        ),
        Err(e) => found("modified", format!("{rel} cannot be read: {e}")),
    }
}

/// Files in the pack directory that the install did not bring.
fn check_foreign(dir: &Path, record: &InstallRecord, problems: &mut Vec<Problem>) {
    match foreign_files(dir, record) {
        Ok(extra) => {
            for rel in extra {
                problems.push(problem(
                    "extra",
                    Some(&rel),
                    format!("{rel} was not installed with the pack"),
                ));
            }
        }
        Err(e) => problems.push(problem("extra", None, e.message)),
    }
}
