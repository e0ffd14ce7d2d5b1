//! Which packs `apiary up` runs: each argument is a pack directory, or the id of a pack installed in
//! the install root; with no arguments, every installed pack, and the bundled example only when
//! nothing is installed (so the README's `apiary up` works on a fresh machine).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::super::output::Failed;
use crate::dist::lock::{Lock, LockEntry};
use crate::dist::root::RootGuard;

/// The pack ids installed in `root` (from its `pack.lock`), each with its directory; none when the
/// root does not exist.
pub fn installed(root: &Path) -> Result<Vec<(String, PathBuf)>, Failed> {
    Ok(present(root, lock(root)?)
        .into_keys()
        .map(|id| {
            let dir = root.join(&id);
            (id, dir)
        })
        .collect())
}

/// `root`'s `pack.lock` (empty when the root does not exist).
pub fn lock(root: &Path) -> Result<Lock, Failed> {
    // Shared: an install running now finishes its swap before the lock is read.
    let Some(guard) = RootGuard::acquire(root, false)? else {
        return Ok(Lock::default());
    };
    let lock = Lock::load(root)?;
    drop(guard);
    Ok(lock)
}

/// The lock's entries whose pack directory exists, by pack id.
pub fn present(root: &Path, lock: Lock) -> BTreeMap<String, LockEntry> {
    lock.packs
        .into_iter()
        .filter(|(id, _)| root.join(id).is_dir())
        .collect()
}

/// Refuses a pack whose files are not what its install recorded (`apiary verify`'s check): a
/// file changed, added or made executable in place since is not run, at start or by a reload
/// (both load installed packs through `Identities`).
pub fn intact(root: &Path, id: &str) -> Result<(), String> {
    let report = crate::dist::verify::verify(root, Some(id)).map_err(|e| e.message)?;
    let problems: Vec<String> = report
        .packs
        .iter()
        .flat_map(|p| &p.problems)
        .map(|p| match &p.path {
            Some(path) => format!("{path} ({})", p.kind),
            None => p.kind.to_string(),
        })
        .collect();
    if problems.is_empty() {
        return Ok(());
    }
    Err(format!(
        "its files differ from what was installed: {}; see `apiary verify {id}`, then reinstall it",
        problems.join(", ")
    ))
}

/// The directories to run for the command line's `packs`: a path that exists is a pack directory;
/// anything else must name an installed pack (`up com.example.pack`).
pub fn chosen(packs: &[PathBuf], root: Option<&Path>) -> Result<Vec<PathBuf>, Failed> {
    let mut installed_cache: Option<Vec<(String, PathBuf)>> = None;
    let mut dirs = Vec::with_capacity(packs.len());
    for arg in packs {
        if arg.exists() || arg.components().count() != 1 {
            dirs.push(arg.clone());
            continue;
        }
        let Some(root) = root else {
            dirs.push(arg.clone());
            continue;
        };
        let list = match &installed_cache {
            Some(list) => list,
            None => installed_cache.insert(installed(root)?),
        };
        let id = arg.to_string_lossy();
        match list.iter().find(|(i, _)| *i == id) {
            Some((_, dir)) => dirs.push(dir.clone()),
            None => {
                let have: Vec<&str> = list.iter().map(|(i, _)| i.as_str()).collect();
                return Err(Failed::error(format_args!(
                    "`{id}` is neither a pack directory nor a pack installed in {} (installed: {})",
                    root.display(),
                    if have.is_empty() {
                        "none".to_string()
                    } else {
                        have.join(", ")
                    }
                )));
            }
        }
    }
    Ok(dirs)
}
