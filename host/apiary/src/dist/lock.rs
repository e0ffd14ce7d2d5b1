//! `pack.lock` (spec §11) and the per-pack install record.
//!
//! `<root>/pack.lock` is a JSON object keyed by pack id with exactly the fields §11 shows:
//! `source`, then `sha256` (archive installs) or `resolved` (`<source>#<commit>`, git installs),
//! `version` and `installed_at` (RFC 3339 UTC). Fields apiary does not know (another tool sharing the
//! root may add some) are kept as they are. The lock is rewritten only through a temporary file and a
//! rename, so it is always either the old or the new text.
//!
//! `<root>/<pack-id>/.apiary-install.json` is apiary's own record of one install: the lock entry it
//! belongs to, the digest of every file, and every hook with its digest. It lives inside the pack
//! directory so that it is swapped together with the files it describes.

use crate::dist::code;
use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::archive::{FileDigest, RECORD_NAME};
use super::{DistError, Result};
use crate::pack::{Pack, paths};

pub const LOCK_NAME: &str = "pack.lock";
/// Lock and record files larger than this are refused rather than parsed.
const MAX_LOCK_BYTES: u64 = 16 * 1024 * 1024;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LockEntry {
    pub source: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolved: Option<String>,
    pub version: String,
    pub installed_at: String,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

/// The whole `pack.lock`, sorted by pack id.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Lock {
    pub packs: BTreeMap<String, LockEntry>,
}

fn read_capped(path: &Path) -> Result<Option<Vec<u8>>> {
    match std::fs::metadata(path) {
        Ok(m) if m.len() > MAX_LOCK_BYTES => Err(DistError::new(
            code::Lock::TooLarge,
            format!("{} is larger than {MAX_LOCK_BYTES} bytes", path.display()),
        )),
        // Not blocking on a FIFO put in its place, not reading more than the cap.
        Ok(_) => {
            crate::safe_fs::read_regular(path, crate::safe_fs::FinalLink::Follow, MAX_LOCK_BYTES)
                .map(Some)
                .map_err(|e| DistError::io("cannot read", path, e))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(DistError::io("cannot read", path, e)),
    }
}

impl Lock {
    /// Reads `<root>/pack.lock`; a missing file is an empty lock, a malformed one an error (it is
    /// never overwritten blindly).
    pub fn load(root: &Path) -> Result<Lock> {
        let path = root.join(LOCK_NAME);
        let Some(bytes) = read_capped(&path)? else {
            return Ok(Lock::default());
        };
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(Lock::default());
        }
        serde_json::from_slice(&bytes).map_err(|e| {
            DistError::new(
                code::Lock::Invalid,
                format!("{} is not a valid pack.lock: {e}", path.display()),
            )
            .help("fix or move the file aside; apiary will not overwrite a lock it cannot read")
        })
    }

    /// Writes `<root>/pack.lock` atomically (temporary file in `tmp_dir`, rename, fsync).
    pub fn save(&self, root: &Path, tmp_dir: &Path) -> Result<()> {
        let path = root.join(LOCK_NAME);
        let mut text = serde_json::to_string_pretty(self)
            .map_err(|e| DistError::new(code::Lock::Write, e.to_string()))?;
        text.push('\n');
        super::write_atomic(&path, tmp_dir, text.as_bytes())
            .map_err(|e| DistError::io("cannot write", &path, e))
    }
}

/// How a hook is run: a WebAssembly component (sandboxed) or a script (a host process, only once
/// trusted).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HookKind {
    Component,
    Script,
}

/// One hook file of an installed pack.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HookRecord {
    /// Pack-relative path of the file the command runs.
    pub path: String,
    pub sha256: String,
    pub kind: HookKind,
    /// Where it is used: `pack:on_start`, `persona lead:on_message`, ...
    pub used_by: Vec<String>,
    /// The command lines as written (path plus arguments).
    pub commands: Vec<String>,
}

/// `.apiary-install.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InstallRecord {
    pub format: u32,
    pub pack_id: String,
    /// Unique per install run; recovery uses it to recognise a half-committed install.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install_id: Option<String>,
    pub lock: LockEntry,
    /// Pack-relative path -> SHA-256 of every installed file (the record itself excluded).
    pub files: BTreeMap<String, String>,
    pub hooks: Vec<HookRecord>,
}

impl InstallRecord {
    pub fn path(pack_dir: &Path) -> std::path::PathBuf {
        pack_dir.join(RECORD_NAME)
    }

    pub fn load(pack_dir: &Path) -> Result<Option<InstallRecord>> {
        let path = Self::path(pack_dir);
        let Some(bytes) = read_capped(&path)? else {
            return Ok(None);
        };
        serde_json::from_slice(&bytes).map(Some).map_err(|e| {
            DistError::new(
                code::Record::Invalid,
                format!("{} is not a valid install record: {e}", path.display()),
            )
        })
    }

    /// Written once into the staged pack, before it is renamed into place.
    pub fn write_new(&self, pack_dir: &Path) -> Result<()> {
        use std::io::Write;
        let path = Self::path(pack_dir);
        let text = serde_json::to_string_pretty(self)
            .map_err(|e| DistError::new(code::Record::Write, e.to_string()))?;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| DistError::io("cannot create", &path, e))?;
        f.write_all(text.as_bytes())
            .and_then(|()| f.write_all(b"\n"))
            .and_then(|()| f.sync_all())
            .map_err(|e| DistError::io("cannot write", &path, e))
    }
}

/// Every hook of the pack (pack-level and per persona), one record per file.
pub fn hook_records(pack: &Pack, files: &[FileDigest]) -> Vec<HookRecord> {
    let mut by_path: BTreeMap<String, HookRecord> = BTreeMap::new();
    let mut add = |who: String, point: &str, command: &str| {
        let token = command.split_whitespace().next().unwrap_or(command);
        let Ok(abs) = paths::resolve_inside(&pack.root, token) else {
            return;
        };
        let rel = paths::relative_to(&pack.root, &abs);
        let rel = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join("/");
        let sha = files
            .iter()
            .find(|f| f.path == rel)
            .map(|f| f.sha256.clone())
            .unwrap_or_default();
        let kind = if rel.ends_with(".wasm") {
            HookKind::Component
        } else {
            HookKind::Script
        };
        let rec = by_path.entry(rel.clone()).or_insert_with(|| HookRecord {
            path: rel,
            sha256: sha,
            kind,
            used_by: Vec::new(),
            commands: Vec::new(),
        });
        rec.used_by.push(format!("{who}:{point}"));
        if !rec.commands.iter().any(|c| c == command) {
            rec.commands.push(command.to_string());
        }
    };
    for (point, cmd) in pack.hooks.entries() {
        add("pack".into(), point, cmd);
    }
    for p in &pack.personas {
        for (point, cmd) in p.hooks.entries() {
            add(format!("persona {}", p.name), point, cmd);
        }
    }
    by_path.into_values().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_shape_matches_the_spec() {
        let text = r#"{
  "com.example.meadow-security-team": {
    "source": "https://example.com/releases/my-pack-1.2.0.buzzpack",
    "sha256": "a3f1c2d4e5b6",
    "version": "1.2.0",
    "installed_at": "2026-04-10T11:00:00Z"
  },
  "com.example.git": {
    "source": "github:example/meadow-security-team",
    "resolved": "github:example/meadow-security-team#abc1234",
    "version": "1.2.0",
    "installed_at": "2026-04-10T11:00:00Z",
    "note": "kept"
  }
}"#;
        let lock: Lock = serde_json::from_str(text).unwrap();
        assert_eq!(lock.packs.len(), 2);
        let back = serde_json::to_value(&lock).unwrap();
        let orig: Value = serde_json::from_str(text).unwrap();
        assert_eq!(back, orig);
    }
}
