//! The operator's key store: one secret key per persona (`<dir>/<pack-id>/<persona>.key`) and one for
//! the operator's own posts (`<dir>/operator.key`), generated on first use. Keys live under the
//! operator's data dir, never inside a pack; directories are 0700 and files 0600 on Unix.

use std::io::Write;
use std::path::{Path, PathBuf};

use nostr_sdk::prelude::{Keys, PublicKey, SecretKey};

#[derive(Debug, Clone)]
pub struct KeyStore {
    dir: PathBuf,
}

impl KeyStore {
    pub fn new(dir: impl Into<PathBuf>) -> KeyStore {
        KeyStore { dir: dir.into() }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The key a persona of a pack signs with.
    pub fn persona(&self, pack_id: &str, persona: &str) -> anyhow::Result<Keys> {
        let path = self
            .dir
            .join(safe_component(pack_id))
            .join(format!("{}.key", safe_component(persona)));
        load_or_create(&path)
    }

    /// The key `apiary post` signs with.
    pub fn operator(&self) -> anyhow::Result<Keys> {
        load_or_create(&self.dir.join("operator.key"))
    }

    /// The embedded relay's own key: it advertises it (NIP-11 `pubkey`) and only group metadata
    /// signed with it is authoritative.
    pub fn relay(&self) -> anyhow::Result<Keys> {
        load_or_create(&self.dir.join("relay.key"))
    }

    /// The public keys of every key in the store (the operator's, the relay's, every persona's).
    pub fn public_keys(&self) -> Vec<PublicKey> {
        self.key_files()
            .iter()
            .filter_map(|p| public_key_of(p))
            .collect()
    }

    /// Every `*.key` file of the store (two levels deep, links not followed).
    pub fn key_files(&self) -> Vec<PathBuf> {
        let mut out = Vec::new();
        collect_key_files(&self.dir, 2, &mut out);
        out
    }
}

/// The public key of the secret key in `path`; `None` when unreadable or invalid.
pub fn public_key_of(path: &Path) -> Option<PublicKey> {
    let text = std::fs::read_to_string(path).ok()?;
    let sk = SecretKey::from_hex(text.trim()).ok()?;
    Some(Keys::new(sk).public_key())
}

fn collect_key_files(dir: &Path, depth: u8, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        let path = entry.path();
        if kind.is_dir() && depth > 1 {
            collect_key_files(&path, depth - 1, out);
        } else if kind.is_file() && path.extension().is_some_and(|e| e == "key") {
            out.push(path);
        }
    }
}

/// A name made safe as one path component.
fn safe_component(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() || s.chars().all(|c| c == '.') {
        format!("_{s}")
    } else {
        s
    }
}

fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
    }
    #[cfg(not(unix))]
    std::fs::create_dir_all(dir)
}

fn load_or_create(path: &Path) -> anyhow::Result<Keys> {
    use anyhow::Context;
    if let Some(parent) = path.parent() {
        create_private_dir(parent)
            .with_context(|| format!("creating key directory {}", parent.display()))?;
    }
    if let Ok(text) = std::fs::read_to_string(path) {
        let sk = SecretKey::from_hex(text.trim())
            .with_context(|| format!("{} is not a valid secret key", path.display()))?;
        return Ok(Keys::new(sk));
    }
    let keys = Keys::generate();
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    match opts.open(path) {
        Ok(mut f) => {
            f.write_all(format!("{}\n", keys.secret_key().to_secret_hex()).as_bytes())
                .and_then(|_| f.sync_all())
                .with_context(|| format!("writing {}", path.display()))?;
            Ok(keys)
        }
        // Another process created it first: use theirs.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            let text = std::fs::read_to_string(path)?;
            Ok(Keys::new(SecretKey::from_hex(text.trim())?))
        }
        Err(e) => Err(e).with_context(|| format!("creating {}", path.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_stable_private_and_per_persona() {
        let tmp = tempfile::tempdir().unwrap();
        let store = KeyStore::new(tmp.path().join("keys"));
        let a = store.persona("com.example.pack", "pip").unwrap();
        let again = store.persona("com.example.pack", "pip").unwrap();
        let b = store.persona("com.example.pack", "lep").unwrap();
        assert_eq!(a.public_key(), again.public_key());
        assert_ne!(a.public_key(), b.public_key());
        let path = tmp.path().join("keys/com.example.pack/pip.key");
        assert!(path.is_file());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let listed = store.public_keys();
        assert!(listed.contains(&a.public_key()) && listed.contains(&b.public_key()));
        assert_eq!(listed.len(), 2);
        assert_eq!(safe_component("../x"), ".._x");
        assert_eq!(safe_component(".."), "_..");
    }
}
