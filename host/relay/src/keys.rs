//! The operator's key store: one secret key per persona (`<dir>/<namespace>/<persona>.key`) and one
//! for the operator's own posts (`<dir>/operator.key`), generated on first use. Keys live under the
//! operator's data dir, never inside a pack; directories are 0700 and files 0600 on Unix.
//!
//! A namespace is a pack's identity, not its self-declared id: `<pack-id>` for the installed pack
//! (and for a directory that owns that id), `<pack-id>@<digest>` for another directory with the same
//! id (see [`crate::dist::identity`]). `<dir>/<namespace>/owner.json` records who owns a namespace.

use std::io::Write;
use std::path::{Path, PathBuf};

use nostr_sdk::prelude::{Keys, PublicKey, SecretKey};

use crate::RelayError;

#[derive(Debug, Clone)]
pub struct KeyStore {
    dir: PathBuf,
    /// Keys were provisioned into `dir` (a mounted Secret): a missing one is an error, never
    /// generated, and nothing is written there.
    provisioned: bool,
}

impl KeyStore {
    pub fn new(dir: impl Into<PathBuf>) -> KeyStore {
        KeyStore {
            dir: dir.into(),
            provisioned: false,
        }
    }

    /// A store whose keys were provisioned (several replicas share one persona key, so none may
    /// generate its own): keys are only read, a missing one is [`RelayError::MissingKey`].
    pub fn provisioned(dir: impl Into<PathBuf>) -> KeyStore {
        KeyStore {
            dir: dir.into(),
            provisioned: true,
        }
    }

    pub fn is_provisioned(&self) -> bool {
        self.provisioned
    }

    /// Reads or, unless provisioned, creates the key at `path`.
    fn key(&self, path: &Path) -> Result<Keys, RelayError> {
        if self.provisioned {
            return load_existing(path, &self.dir);
        }
        load_or_create(path, &self.dir)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The key `apiary post` signs with.
    pub fn operator(&self) -> Result<Keys, RelayError> {
        self.key(&self.dir.join("operator.key"))
    }

    /// The key a persona signs with, in the identity namespace of its pack.
    pub fn persona(&self, namespace: &str, persona: &str) -> Result<Keys, RelayError> {
        let path = self
            .namespace_dir(namespace)
            .join(format!("{}.key", safe_component(persona)));
        self.key(&path)
    }

    /// `<dir>/<namespace>/`, where a namespace's keys and its owner record live.
    pub fn namespace_dir(&self, namespace: &str) -> PathBuf {
        self.dir.join(safe_component(namespace))
    }

    /// The owner record of `namespace` (`owner.json`), `None` when there is none yet.
    pub fn owner(&self, namespace: &str) -> Result<Option<Owner>, RelayError> {
        let path = self.namespace_dir(namespace).join(OWNER_FILE);
        match std::fs::read(&path) {
            Ok(bytes) if bytes.len() > 64 * 1024 => Err(RelayError::OwnerTooLarge { path }),
            Ok(bytes) => match serde_json::from_slice(&bytes) {
                Ok(owner) => Ok(Some(owner)),
                Err(error) => Err(RelayError::BadOwner { path, error }),
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(RelayError::file("reading", &path, e)),
        }
    }

    /// Records `owner` for `namespace` unless it has one already; returns the owner in force (ours,
    /// or the one another process wrote first).
    pub fn claim(&self, namespace: &str, owner: &Owner) -> Result<Owner, RelayError> {
        let dir = self.namespace_dir(namespace);
        create_private_dir(&dir).map_err(|e| RelayError::file("creating", &dir, e))?;
        let path = dir.join(OWNER_FILE);
        let mut opts = std::fs::OpenOptions::new();
        opts.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            opts.mode(0o600);
        }
        match opts.open(&path) {
            Ok(mut f) => {
                f.write_all(&owner_json(owner))
                    .and_then(|_| f.sync_all())
                    .map_err(|e| RelayError::file("writing", &path, e))?;
                Ok(owner.clone())
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => self
                .owner(namespace)?
                .ok_or(RelayError::OwnerVanished { path }),
            Err(e) => Err(RelayError::file("creating", &path, e)),
        }
    }

    /// Records `owner` for `namespace`, replacing any earlier owner (temporary file and rename).
    pub fn set_owner(&self, namespace: &str, owner: &Owner) -> Result<(), RelayError> {
        let dir = self.namespace_dir(namespace);
        create_private_dir(&dir).map_err(|e| RelayError::file("creating", &dir, e))?;
        let path = dir.join(OWNER_FILE);
        let writing = |e| RelayError::file("writing", &path, e);
        let mut tmp = tempfile::Builder::new()
            .prefix(".owner-")
            .tempfile_in(&dir)
            .map_err(writing)?;
        tmp.write_all(&owner_json(owner))
            .and_then(|_| tmp.as_file().sync_all())
            .map_err(writing)?;
        tmp.persist(&path).map_err(|e| writing(e.error))?;
        Ok(())
    }

    /// The pack author's key (`apiary keys new --author`): it signs pack archives
    /// (`apiary pack sign`, `publish`), never relay messages.
    pub fn author(&self) -> Result<Keys, RelayError> {
        self.key(&self.author_path())
    }

    /// Where [`Self::author`] lives: `<dir>/author.key`.
    pub fn author_path(&self) -> PathBuf {
        self.dir.join("author.key")
    }

    /// The embedded relay's own key: it advertises it (NIP-11 `pubkey`) and only group metadata
    /// signed with it is authoritative.
    pub fn relay(&self) -> Result<Keys, RelayError> {
        self.key(&self.dir.join("relay.key"))
    }

    /// The public keys of every key in the store (the operator's, the relay's, every persona's).
    pub fn public_keys(&self) -> Vec<PublicKey> {
        self.key_files()
            .iter()
            .filter_map(|p| public_key_of(p))
            .collect()
    }

    /// The secret keys of every key in the store, to make sure none is ever published.
    pub fn secret_keys(&self) -> Vec<SecretKey> {
        self.key_files()
            .iter()
            .filter_map(|p| load_existing(p, &self.dir).ok())
            .map(|k| k.secret_key().clone())
            .collect()
    }

    /// Every key of the store with what it signs for (a `*.key` file elsewhere is left out).
    pub fn roles(&self) -> Vec<(PublicKey, KeyRole)> {
        self.key_files()
            .iter()
            .filter_map(|path| Some((public_key_of(path)?, self.role_of(path)?)))
            .collect()
    }

    fn role_of(&self, path: &Path) -> Option<KeyRole> {
        let rel = path.strip_prefix(&self.dir).ok()?;
        let parts: Vec<&str> = rel.iter().filter_map(|p| p.to_str()).collect();
        match parts.as_slice() {
            ["operator.key"] => Some(KeyRole::Operator),
            ["relay.key"] => Some(KeyRole::Relay),
            ["author.key"] => Some(KeyRole::Author),
            [namespace, file] => Some(KeyRole::Persona {
                namespace: namespace.to_string(),
                persona: file.strip_suffix(".key")?.to_string(),
            }),
            _ => None,
        }
    }

    /// Every `*.key` file of the store (two levels deep, links not followed).
    pub fn key_files(&self) -> Vec<PathBuf> {
        let mut out = Vec::new();
        collect_key_files(&self.dir, 2, &mut out);
        out
    }
}

/// What a key of the store signs for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyRole {
    /// `apiary post` and `tail`.
    Operator,
    /// The embedded relay (group metadata).
    Relay,
    /// A pack author's (signs archives).
    Author,
    /// A persona of the pack whose identity namespace this is (`<pack-id>`, or
    /// `<pack-id>@<digest>` for another directory with the same id).
    Persona { namespace: String, persona: String },
}

/// The owner record's file name inside a namespace directory.
pub const OWNER_FILE: &str = "owner.json";

/// Who a key namespace belongs to.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Owner {
    /// The pack installed as `<root>/<pack-id>` from `source` (its `pack.lock` entry).
    Installed { root: PathBuf, source: String },
    /// A pack directory that is not installed, by its canonical path.
    Directory { path: PathBuf },
}

fn owner_json(owner: &Owner) -> Vec<u8> {
    let mut text = serde_json::to_vec_pretty(owner).unwrap_or_default();
    text.push(b'\n');
    text
}

/// The key in the file `path` given on a command line (`--sign-with`), with the checks the store's
/// keys get (a regular file, this user's, not readable by others); hex or `nsec1…`.
pub fn load_key_file(path: &Path) -> Result<Keys, RelayError> {
    load_existing(path, path.parent().unwrap_or(Path::new(".")))
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
            // `@` separates a pack id from a directory digest; pack ids never contain it.
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | '@') {
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

/// The text of the key file `path` of the store `dir`, checked first: a link is followed only
/// when it ends inside `dir` (a mounted Kubernetes Secret's files are links into `..data/`),
/// and the file must be a regular one owned by this user or root that other users can neither
/// read nor write.
fn read_key_file(path: &Path, dir: &Path) -> std::io::Result<String> {
    use std::io::Read;
    let meta = std::fs::symlink_metadata(path)?;
    let real = path.canonicalize()?;
    if meta.file_type().is_symlink() {
        let dir = dir.canonicalize()?;
        if !real.starts_with(&dir) {
            return Err(std::io::Error::other(format!(
                "is a link to {}, outside the key directory",
                real.display()
            )));
        }
    }
    let file = std::fs::File::open(&real)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::other("is not a regular file"));
    }
    check_private_key(&meta)?;
    let mut text = String::new();
    file.take(4096).read_to_string(&mut text)?;
    Ok(text)
}

#[cfg(unix)]
fn check_private_key(meta: &std::fs::Metadata) -> std::io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    if meta.uid() != me && meta.uid() != 0 {
        return Err(std::io::Error::other(format!(
            "belongs to user {}, not to this one ({me}) or root",
            meta.uid()
        )));
    }
    let mode = meta.mode() & 0o777;
    if mode & 0o026 != 0 {
        return Err(std::io::Error::other(format!(
            "is readable or writable by other users (mode {mode:04o}): make it 0600 \
             (a Kubernetes Secret: defaultMode: 0400)"
        )));
    }
    Ok(())
}

#[cfg(not(unix))]
fn check_private_key(_: &std::fs::Metadata) -> std::io::Result<()> {
    Ok(())
}

/// The key in `path` (hex, or `nsec1…` as other Nostr tools write it), which must exist (see
/// [`read_key_file`]).
fn load_existing(path: &Path, dir: &Path) -> Result<Keys, RelayError> {
    let text = match read_key_file(path, dir) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(RelayError::MissingKey {
                path: path.to_path_buf(),
            });
        }
        Err(e) => return Err(RelayError::file("reading", path, e)),
    };
    let sk = SecretKey::parse(text.trim()).map_err(|error| RelayError::BadKey {
        path: path.to_path_buf(),
        error,
    })?;
    Ok(Keys::new(sk))
}

fn load_or_create(path: &Path, dir: &Path) -> Result<Keys, RelayError> {
    if let Some(parent) = path.parent() {
        create_private_dir(parent)
            .map_err(|e| RelayError::file("creating key directory", parent, e))?;
    }
    if std::fs::symlink_metadata(path).is_ok() {
        return load_existing(path, dir);
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
                .map_err(|e| RelayError::file("writing", path, e))?;
            Ok(keys)
        }
        // Another process created it first: use theirs.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            let text =
                read_key_file(path, dir).map_err(|e| RelayError::file("reading", path, e))?;
            Ok(Keys::new(
                SecretKey::from_hex(text.trim()).map_err(RelayError::Key)?,
            ))
        }
        Err(e) => Err(RelayError::file("creating", path, e)),
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
        let roles = store.roles();
        assert!(roles.contains(&(
            a.public_key(),
            KeyRole::Persona {
                namespace: "com.example.pack".into(),
                persona: "pip".into()
            }
        )));
        let operator = store.operator().unwrap().public_key();
        assert!(store.roles().contains(&(operator, KeyRole::Operator)));
        assert_eq!(safe_component("../x"), ".._x");
        assert_eq!(safe_component(".."), "_..");
    }

    #[test]
    fn a_provisioned_store_reads_keys_and_never_generates_one() {
        let tmp = tempfile::tempdir().unwrap();
        let made = KeyStore::new(tmp.path()).persona("p", "bee").unwrap();
        let store = KeyStore::provisioned(tmp.path());
        assert_eq!(
            store.persona("p", "bee").unwrap().public_key(),
            made.public_key()
        );
        let missing = store.persona("p", "sage").unwrap_err();
        assert_eq!(missing.kind(), "missing-key");
        assert!(missing.to_string().contains("never generated"), "{missing}");
        assert!(!tmp.path().join("p/sage.key").exists());
        assert!(store.operator().is_err() && !tmp.path().join("operator.key").exists());
    }

    /// Issue 32, finding 8: a key others can read, or a link out of the key directory, is
    /// refused with what to do; a Secret-style link inside the directory is read.
    #[cfg(unix)]
    #[test]
    fn keys_others_can_read_or_linked_from_elsewhere_are_refused() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("keys");
        let made = KeyStore::new(&dir).persona("p", "bee").unwrap();
        let store = KeyStore::provisioned(&dir);
        let bee = dir.join("p/bee.key");

        // Kubernetes' layout: p/bee.key -> ../..data/p/bee.key
        std::fs::create_dir_all(dir.join("..data/p")).unwrap();
        std::fs::rename(&bee, dir.join("..data/p/bee.key")).unwrap();
        std::os::unix::fs::symlink("../..data/p/bee.key", &bee).unwrap();
        assert_eq!(
            store.persona("p", "bee").unwrap().public_key(),
            made.public_key()
        );

        std::fs::set_permissions(
            dir.join("..data/p/bee.key"),
            std::fs::Permissions::from_mode(0o644),
        )
        .unwrap();
        let e = store.persona("p", "bee").unwrap_err().to_string();
        assert!(e.contains("mode 0644") && e.contains("0600"), "{e}");

        let elsewhere = tmp.path().join("stolen.key");
        std::fs::write(
            &elsewhere,
            format!("{}\n", Keys::generate().secret_key().to_secret_hex()),
        )
        .unwrap();
        std::fs::set_permissions(&elsewhere, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::fs::remove_file(&bee).unwrap();
        std::os::unix::fs::symlink(&elsewhere, &bee).unwrap();
        let e = store.persona("p", "bee").unwrap_err().to_string();
        assert!(e.contains("outside the key directory"), "{e}");
        // The generating store refuses it too, and does not replace it.
        let e = KeyStore::new(&dir)
            .persona("p", "bee")
            .unwrap_err()
            .to_string();
        assert!(e.contains("outside the key directory"), "{e}");
    }
}
