//! The install root: its lock (held for a whole install, uninstall or trust change), its state
//! directory `.apiary/` with the scratch space and the install journal, and recovery of whatever
//! an interrupted install left behind (see [`super::install`] for the steps and the journal's
//! role). Installing, trusting and writing agent configs all work inside a [`RootGuard`].

use std::fs::{self, File};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::lock::{InstallRecord, Lock, LockEntry};
use super::{DistError, Result, STATE_DIR, agent_config, code, fsync_dir, nonce};

pub const STEP_DELAY_ENV: &str = "APIARY_TEST_STEP_DELAY_MS";
pub(crate) const JOURNAL: &str = "journal.json";

/// Marks the end of an install step (and sleeps there under the crash-safety test).
pub(crate) fn step(name: &str) {
    tracing::debug!(step = name, "install step");
    if let Some(ms) = std::env::var(STEP_DELAY_ENV)
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    {
        std::thread::sleep(std::time::Duration::from_millis(ms));
    }
}

/// Exclusive use of an install root for the life of the value.
pub struct RootGuard {
    pub root: PathBuf,
    pub state: PathBuf,
    _lock: File,
}

impl RootGuard {
    /// Takes the root's lock, creating the root when `create`; `Ok(None)` when the root does not
    /// exist and `create` is false. Runs recovery before returning.
    pub fn acquire(root: &Path, create: bool) -> Result<Option<RootGuard>> {
        if !root.exists() {
            if !create {
                return Ok(None);
            }
            owner_only_dirs(true)
                .create(root)
                .map_err(|e| DistError::io("cannot create install root", root, e))?;
        }
        if !root.is_dir() {
            return Err(DistError::new(
                code::Root::NotDir,
                format!("install root {} is not a directory", root.display()),
            ));
        }
        let state = root.join(STATE_DIR);
        for d in ["", "staging", "old", "trash"] {
            let p = state.join(d);
            match owner_only_dirs(false).create(&p) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && p.is_dir() => {}
                Err(e) => return Err(DistError::io("cannot create", &p, e)),
            }
        }
        let lock_path = state.join("lock");
        let lock = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|e| DistError::io("cannot open", &lock_path, e))?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(fs::TryLockError::WouldBlock) => {
                eprintln!(
                    "waiting for another apiary process using {} ...",
                    root.display()
                );
                lock.lock()
                    .map_err(|e| DistError::io("cannot lock", &lock_path, e))?;
            }
            Err(fs::TryLockError::Error(e)) => {
                return Err(DistError::io("cannot lock", &lock_path, e));
            }
        }
        let guard = RootGuard {
            root: root.to_path_buf(),
            state,
            _lock: lock,
        };
        guard.recover()?;
        Ok(Some(guard))
    }

    pub(crate) fn sub(&self, d: &str) -> PathBuf {
        self.state.join(d)
    }

    /// Finishes or rolls back an interrupted install and empties the scratch directories.
    fn recover(&self) -> Result<()> {
        let jpath = self.sub(JOURNAL);
        if jpath.exists() {
            self.settle(&jpath)?;
        }
        self.empty_scratch();
        Ok(())
    }

    /// The install the journal at `jpath` describes: finished when `pack.lock` shows it committed,
    /// else rolled back; then the journal goes.
    fn settle(&self, jpath: &Path) -> Result<()> {
        let bytes = fs::read(jpath).map_err(|e| DistError::io("cannot read", jpath, e))?;
        let journal: Journal = serde_json::from_slice(&bytes).map_err(|e| {
            DistError::new(
                code::Journal::Invalid,
                format!("{} is not a valid install journal: {e}", jpath.display()),
            )
            .help("apiary writes it atomically, so it was edited by hand; inspect the install root and remove the file")
        })?;
        pack_dir_name(&journal.pack_id)?;
        let lock = Lock::load(&self.root)?;
        let committed = lock.packs.get(&journal.pack_id) == Some(&journal.entry);
        if committed {
            tracing::info!("recovery: install of {} had committed", journal.pack_id);
            agent_config::apply(&self.root, &self.state, &journal.config)?;
        } else {
            self.roll_back(&journal)?;
        }
        fs::remove_file(jpath).map_err(|e| DistError::io("cannot remove", jpath, e))?;
        fsync_dir(&self.state).map_err(|e| DistError::io("cannot sync", &self.state, e))
    }

    /// Undoes an install that had not committed: its new directory (recognised by its install id)
    /// goes to the trash, the old one is renamed back.
    fn roll_back(&self, journal: &Journal) -> Result<()> {
        tracing::warn!(
            "recovery: rolling back an interrupted install of {}",
            journal.pack_id
        );
        let target = self.root.join(&journal.pack_id);
        let is_new = InstallRecord::load(&target)
            .ok()
            .flatten()
            .is_some_and(|r| r.install_id.as_deref() == Some(&journal.install_id));
        if is_new {
            let trash = self
                .sub("trash")
                .join(format!("{}-{}", journal.pack_id, nonce()));
            fs::rename(&target, &trash)
                .map_err(|e| DistError::io("cannot move aside", &target, e))?;
        }
        if let Some(old) = &journal.old {
            pack_dir_name(old)?;
            let old = self.sub("old").join(old);
            if old.exists() && !target.exists() {
                fs::rename(&old, &target)
                    .map_err(|e| DistError::io("cannot restore", &target, e))?;
            }
        }
        fsync_dir(&self.root).map_err(|e| DistError::io("cannot sync", &self.root, e))
    }

    /// Removes the temporary files of interrupted atomic writes (journal, lock, trust store) and
    /// whatever the scratch directories hold.
    fn empty_scratch(&self) {
        if let Ok(entries) = fs::read_dir(&self.state) {
            for e in entries.flatten() {
                if e.file_name().to_string_lossy().starts_with(".tmp-") {
                    let _ = fs::remove_file(e.path());
                }
            }
        }
        for d in ["staging", "old", "trash"] {
            let dir = self.sub(d);
            if let Ok(entries) = fs::read_dir(&dir) {
                for e in entries.flatten() {
                    let p = e.path();
                    let r = if p.is_dir() && !p.is_symlink() {
                        fs::remove_dir_all(&p)
                    } else {
                        fs::remove_file(&p)
                    };
                    if let Err(err) = r {
                        tracing::warn!("cannot remove leftover {}: {err}", p.display());
                    }
                }
            }
        }
    }
}

/// Directories apiary creates in the root are writable by their owner only, whatever the umask:
/// the trust store under `.apiary/` is believed only when nobody else can change it.
fn owner_only_dirs(recursive: bool) -> fs::DirBuilder {
    let mut b = fs::DirBuilder::new();
    b.recursive(recursive);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut b, 0o755);
    b
}

/// The in-flight install, written before the first rename.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Journal {
    pub(crate) pack_id: String,
    pub(crate) install_id: String,
    /// Name under `.apiary/old/` the previous version is moved to.
    pub(crate) old: Option<String>,
    /// The lock entry being committed.
    pub(crate) entry: LockEntry,
    /// Agent config files to write once committed (see [`agent_config`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) config: Vec<agent_config::Write>,
}

/// A pack id is used as a directory name in the root: it must be one safe path component and not
/// collide with the root's own files.
pub fn pack_dir_name(id: &str) -> Result<&str> {
    let ok = !id.is_empty()
        && id.len() <= 200
        && !id.starts_with('.')
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
        && !id.eq_ignore_ascii_case(super::lock::LOCK_NAME);
    if ok {
        Ok(id)
    } else {
        Err(DistError::new(
            code::Pack::Id,
            format!("`{id}` cannot be used as an install directory name"),
        ))
    }
}

/// Removes a scratch directory when dropped (error paths).
pub(crate) struct Scratch(pub(crate) PathBuf);
impl Drop for Scratch {
    fn drop(&mut self) {
        if self.0.exists() {
            let _ = fs::remove_dir_all(&self.0);
        }
    }
}
