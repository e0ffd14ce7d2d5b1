//! What apiary itself copied into a workspace's `.agents/skills/`, so that a pack skill that changed
//! since can be updated while a skill the operator put there (or edited) stays pinned (spec §6).
//!
//! The record, `.agents/.apiary-skills.json`, maps each load key apiary copied to the digest of the
//! tree as copied. A skill directory is apiary's to replace only when its content still has that
//! digest: anything else (a skill apiary never copied, one the operator edited) is the operator's.
//! The workspace is hostile (its agent writes there), so everything is read through capability
//! handles without following links, with size caps, and a record that does not parse is empty.

use std::collections::BTreeMap;
use std::io::{self, Read, Write};

use cap_fs_ext::{DirExt, FollowSymlinks, OpenOptionsFollowExt};
use cap_std::fs::{Dir, OpenOptions};
use sha2::{Digest, Sha256};

/// The record's file name, in `.agents/` (beside `skills/`, so no runtime takes it for a skill).
pub const RECORD: &str = ".apiary-skills.json";
const MAX_RECORD: u64 = 256 * 1024;
/// A SKILL.md bigger than this declares no load key (the pack side allows 1 MiB).
const MAX_SKILL_MD: u64 = 1024 * 1024;
/// Directories of `.agents/skills/` looked into for their load key.
const MAX_SCANNED: usize = 1024;
/// Caps for digesting one tree (as for copying one).
const MAX_ENTRIES: usize = 256;
const MAX_BYTES: u64 = 64 * 1024 * 1024;
const MAX_DEPTH: usize = 16;

/// Load key → digest of the tree apiary copied.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Record(pub BTreeMap<String, String>);

impl Record {
    /// The record in `agents` (the workspace's `.agents/`); empty when absent or unreadable.
    pub fn load(agents: &Dir) -> Record {
        let Ok(text) = read_capped(agents, RECORD.as_ref(), MAX_RECORD) else {
            return Record::default();
        };
        Record(serde_json::from_slice(&text).unwrap_or_default())
    }

    /// Writes the record atomically (a temporary file, then a rename).
    pub fn save(&self, agents: &Dir) -> io::Result<()> {
        let tmp = format!("{RECORD}.partial-{}", std::process::id());
        let _ = agents.remove_file(&tmp);
        let mut options = OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        cap_std::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let mut file = agents.open_with(&tmp, &options)?;
        let json = serde_json::to_vec_pretty(&self.0).map_err(io::Error::other)?;
        file.write_all(&json)?;
        drop(file);
        agents.rename(&tmp, agents, RECORD)
    }
}

/// Load key → directory name, for the directories of `skills` whose SKILL.md declares a load key
/// (the spec's collision rule is by load key, not by directory name).
pub fn load_keys(skills: &Dir) -> BTreeMap<String, String> {
    let mut keys = BTreeMap::new();
    let Ok(entries) = skills.entries() else {
        return keys;
    };
    for entry in entries.flatten().take(MAX_SCANNED) {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if name.starts_with('.') || !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let Ok(dir) = skills.open_dir_nofollow(name) else {
            continue;
        };
        let Ok(text) = read_capped(&dir, "SKILL.md".as_ref(), MAX_SKILL_MD) else {
            continue;
        };
        let text = String::from_utf8_lossy(&text);
        if let Some(key) = crate::pack::skill::declared_load_key(&text) {
            keys.entry(key).or_insert_with(|| name.to_string());
        }
    }
    keys
}

/// A digest of a directory tree: every directory and regular file (names, sizes, contents), in
/// name order. Links and special files are left out, as the copy leaves them out, so a pack skill
/// and a faithful copy of it have the same digest.
pub fn tree_digest(dir: &Dir) -> io::Result<String> {
    let mut hash = Sha256::new();
    let mut budget = (MAX_ENTRIES, MAX_BYTES);
    digest_into(dir, &mut hash, &mut budget, 0)?;
    Ok(hex::encode(hash.finalize()))
}

fn digest_into(
    dir: &Dir,
    hash: &mut Sha256,
    budget: &mut (usize, u64),
    depth: usize,
) -> io::Result<()> {
    if depth > MAX_DEPTH {
        return Err(io::Error::other("nested too deep"));
    }
    let mut entries = Vec::new();
    for entry in dir.entries()? {
        let entry = entry?;
        entries.push((entry.file_name(), entry.file_type()?));
        budget.0 = budget
            .0
            .checked_sub(1)
            .ok_or_else(|| io::Error::other("too many entries"))?;
    }
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    for (name, kind) in entries {
        let label = name.to_string_lossy();
        if kind.is_dir() {
            hash.update(format!("d {label}\n"));
            let sub = dir.open_dir_nofollow(&name)?;
            digest_into(&sub, hash, budget, depth + 1)?;
            hash.update("d end\n");
        } else if kind.is_file() {
            let bytes = read_capped(dir, &name, budget.1)?;
            budget.1 -= bytes.len() as u64;
            hash.update(format!("f {label} {}\n", bytes.len()));
            hash.update(&bytes);
        }
    }
    Ok(())
}

/// A regular file in `dir`, not through a link, at most `cap` bytes (larger is an error).
fn read_capped(dir: &Dir, name: &std::ffi::OsStr, cap: u64) -> io::Result<Vec<u8>> {
    let mut options = OpenOptions::new();
    options.read(true).follow(FollowSymlinks::No);
    #[cfg(unix)]
    cap_std::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_NONBLOCK);
    let file = dir.open_with(name, &options)?;
    if !file.metadata()?.is_file() {
        return Err(io::Error::other("not a regular file"));
    }
    let mut bytes = Vec::new();
    file.take(cap + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > cap {
        return Err(io::Error::other("too large"));
    }
    Ok(bytes)
}
