//! Third-party converter components added by the operator (`apiary component add`): the `.wasm`
//! copied under `<data dir>/components/`, and `registry.json` beside it recording each one's name,
//! sha256 and where it came from. On load the file's digest must still match the record; a
//! component whose bytes changed is refused, not run.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::info::ConversionsError;
use crate::sandbox::caps::BadManifest;
use crate::sandbox::converter::ConverterRunner;
use crate::sandbox::{Capabilities, Sandbox, SandboxError, World, cache};

/// A component file bigger than this is not a converter.
const MAX_COMPONENT: u64 = 64 << 20;
const REGISTRY: &str = "registry.json";

/// One added component, as recorded.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Entry {
    pub name: String,
    /// sha256 of the component bytes, hex.
    pub digest: String,
    /// The file it was added from.
    pub source: PathBuf,
    /// Always `converter` today; recorded so a later kind of addable component is distinguishable.
    pub world: String,
    pub wit_version: String,
    /// The converter's own version and conversions, from `info` when it was added.
    pub version: String,
    pub conversions: Vec<(String, String)>,
    pub size: u64,
    /// What the component declared (its `<name>.caps.toml`) and the operator granted with
    /// `--grant`, recorded with `digest`: a changed component is refused, grants and all.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub grants: Vec<String>,
}

impl Entry {
    /// The recorded grants (a record edited into something unparsable is refused).
    pub fn capabilities(&self) -> Result<Capabilities, StoreError> {
        Capabilities::parse_all(&self.grants).map_err(|e| StoreError::BadGrant(e.to_string()))
    }
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct RegistryFile {
    components: Vec<Entry>,
}

/// Why the component store could not list, add, remove or hand over a component.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// `cannot {action} {path}: {error}`.
    #[error("cannot {action} {}: {error}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        error: std::io::Error,
    },
    #[error(
        "{} is damaged (line {}, column {}): {error}; remove it to start over",
        path.display(),
        error.line(),
        error.column()
    )]
    Damaged {
        path: PathBuf,
        error: serde_json::Error,
    },
    /// The registry or a component's copy could not be renamed into place.
    #[error(
        "cannot write {}: failed to persist temporary file: {error}",
        path.display()
    )]
    Persist {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("cannot serialise the component registry: {0}")]
    Serialise(serde_json::Error),
    #[error("{} is {size} bytes, over the {} MiB cap for a component", file.display(), MAX_COMPONENT >> 20)]
    TooLarge { file: PathBuf, size: u64 },
    /// The sandbox refused the component (not a component, unsupported version, failed `info`).
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
    #[error(
        "{label} is a {world} component; only converter components can be added (apiary:plugin/format-converter)"
    )]
    NotAConverter { label: String, world: World },
    #[error(
        "{label} calls itself {name:?}, which is not a usable name ([a-z0-9][a-z0-9._-]*, at most 64); pass --name"
    )]
    BadName { label: String, name: String },
    #[error("{label}: {error}")]
    Conversions {
        label: String,
        error: ConversionsError,
    },
    #[error(
        "a component named {name} is already added (from {}); pass --force to replace it",
        from.display()
    )]
    Exists { name: String, from: PathBuf },
    #[error("no component named {name} is added{}", added(known))]
    Unknown { name: String, known: Vec<String> },
    #[error("removed from the registry, but cannot delete its file: {0}")]
    Delete(std::io::Error),
    #[error("the registry names a component {0:?}, which is not a valid name")]
    BadRecord(String),
    #[error("the registry records a grant that does not parse: {0}")]
    BadGrant(String),
    #[error("{0}")]
    Manifest(#[from] BadManifest),
    #[error(
        "{label} declares {missing}, which is not granted; review its {manifest} and add it with {flags} to grant it, or refuse it"
    )]
    NotGranted {
        label: String,
        missing: Capabilities,
        manifest: String,
        flags: String,
    },
    #[error(
        "{} does not match the digest recorded when it was added (recorded sha256 {recorded}, now {now}); refused. Add it again with `apiary component add --force` if the change is yours",
        path.display()
    )]
    Tampered {
        path: PathBuf,
        recorded: String,
        now: String,
    },
}

impl StoreError {
    /// A short machine-readable kind, for `--json` output and tests.
    pub fn kind(&self) -> &'static str {
        match self {
            StoreError::Io { .. } | StoreError::Persist { .. } | StoreError::Delete(_) => "io",
            StoreError::Damaged { .. } | StoreError::BadRecord(_) | StoreError::BadGrant(_) => {
                "damaged-registry"
            }
            StoreError::Manifest(_) => "bad-manifest",
            StoreError::NotGranted { .. } => "not-granted",
            StoreError::Serialise(_) => "serialise",
            StoreError::TooLarge { .. } => "too-large",
            StoreError::Sandbox(e) => e.kind(),
            StoreError::NotAConverter { .. } => "not-a-converter",
            StoreError::BadName { .. } => "bad-name",
            StoreError::Conversions { .. } => "bad-conversions",
            StoreError::Exists { .. } => "exists",
            StoreError::Unknown { .. } => "unknown",
            StoreError::Tampered { .. } => "digest-mismatch",
        }
    }
}

/// ` (added: a, b)`, or nothing when no component is added.
fn added(known: &[String]) -> String {
    if known.is_empty() {
        String::new()
    } else {
        format!(" (added: {})", known.join(", "))
    }
}

fn io_error(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> StoreError {
    move |error| StoreError::Io {
        action,
        path: path.to_path_buf(),
        error,
    }
}

/// The component store in a data directory.
#[derive(Debug, Clone)]
pub struct Store {
    dir: PathBuf,
}

/// A name an operator can type and a file system can hold: `[a-z0-9][a-z0-9._-]*`, at most 64.
pub fn valid_name(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && b.len() <= 64
        && (b[0].is_ascii_lowercase() || b[0].is_ascii_digit())
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || b"._-".contains(c))
}

impl Store {
    /// The store in `dir` (the operator's is [`crate::paths::Data::components`]).
    pub fn new(dir: &Path) -> Store {
        Store {
            dir: dir.to_path_buf(),
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Every recorded component (an absent registry is an empty one).
    pub fn list(&self) -> Result<Vec<Entry>, StoreError> {
        let path = self.dir.join(REGISTRY);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io_error("read", &path)(e)),
        };
        match serde_json::from_str::<RegistryFile>(&text) {
            Ok(file) => Ok(file.components),
            Err(error) => Err(StoreError::Damaged { path, error }),
        }
    }

    fn save(&self, components: Vec<Entry>) -> Result<(), StoreError> {
        let text = serde_json::to_string_pretty(&RegistryFile { components })
            .map_err(StoreError::Serialise)?;
        write_atomic(&self.dir, REGISTRY, text.as_bytes())
    }

    fn wasm_path(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.wasm"))
    }

    /// Checks `file` is a converter component of a supported WIT version, compiles it into the
    /// cache, copies it into the store and records it. `name` defaults to the name its `info`
    /// gives; an existing entry of that name is replaced only with `replace`. Every capability
    /// its manifest declares must be in `granted`; what both hold is recorded.
    pub fn add(
        &self,
        sandbox: &Sandbox,
        file: &Path,
        (name, replace): (Option<&str>, bool),
        granted: &Capabilities,
    ) -> Result<Entry, StoreError> {
        let size = std::fs::metadata(file)
            .map_err(io_error("read", file))?
            .len();
        if size > MAX_COMPONENT {
            return Err(StoreError::TooLarge {
                file: file.to_path_buf(),
                size,
            });
        }
        let bytes =
            crate::safe_fs::read_regular(file, crate::safe_fs::FinalLink::Follow, MAX_COMPONENT)
                .map_err(io_error("read", file))?;
        let label = file
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| file.display().to_string());
        let declared = Capabilities::declared_by(file)?;
        let missing = declared.minus(granted);
        if !missing.is_empty() {
            let manifest = Capabilities::manifest_path(file).display().to_string();
            let flags = missing
                .iter()
                .map(|c| format!("--grant {c}"))
                .collect::<Vec<_>>()
                .join(" ");
            return Err(StoreError::NotGranted {
                label,
                missing,
                manifest,
                flags,
            });
        }
        // Identity check (world and WIT version), compile into the cache, link.
        let loaded = sandbox.load(&label, &bytes)?;
        if loaded.identity.world != World::Converter {
            let world = loaded.identity.world;
            return Err(StoreError::NotAConverter { label, world });
        }
        let wit_version = loaded.identity.version.to_string();
        let runner = ConverterRunner::new(loaded)?;
        let info = runner.info(sandbox)?.value;
        let name = name.map(str::to_string).unwrap_or(info.name.clone());
        if !valid_name(&name) {
            let name = crate::sandbox::truncate(&name, 80).to_string();
            return Err(StoreError::BadName { label, name });
        }
        let conversions = match super::info::checked_conversions(&info) {
            Ok(c) => c,
            Err(error) => return Err(StoreError::Conversions { label, error }),
        };
        let mut components = self.list()?;
        if let Some(i) = components.iter().position(|c| c.name == name) {
            if !replace {
                let from = components.swap_remove(i).source;
                return Err(StoreError::Exists { name, from });
            }
            components.remove(i);
        }
        let entry = Entry {
            name: name.clone(),
            digest: cache::sha256_hex(&bytes),
            source: file.canonicalize().unwrap_or_else(|_| file.to_path_buf()),
            world: World::Converter.to_string(),
            wit_version,
            version: crate::sandbox::truncate(&info.version, 64).to_string(),
            conversions,
            size,
            grants: declared.intersect(granted).strings(),
        };
        write_atomic(&self.dir, &format!("{name}.wasm"), &bytes)?;
        components.push(entry.clone());
        components.sort_by(|a, b| a.name.cmp(&b.name));
        self.save(components)?;
        Ok(entry)
    }

    /// Forgets a component and deletes its copy.
    pub fn remove(&self, name: &str) -> Result<Entry, StoreError> {
        let mut components = self.list()?;
        let Some(i) = components.iter().position(|c| c.name == name) else {
            let known = components.into_iter().map(|c| c.name).collect();
            let name = name.to_string();
            return Err(StoreError::Unknown { name, known });
        };
        let entry = components.remove(i);
        self.save(components)?;
        if valid_name(&entry.name) {
            match std::fs::remove_file(self.wasm_path(&entry.name)) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(StoreError::Delete(e)),
            }
        }
        Ok(entry)
    }

    /// The stored bytes of `entry`, refused when they no longer match the recorded digest.
    pub fn bytes(&self, entry: &Entry) -> Result<Vec<u8>, StoreError> {
        if !valid_name(&entry.name) {
            return Err(StoreError::BadRecord(entry.name.clone()));
        }
        let path = self.wasm_path(&entry.name);
        let bytes =
            crate::safe_fs::read_regular(&path, crate::safe_fs::FinalLink::Follow, MAX_COMPONENT)
                .map_err(io_error("read", &path))?;
        let digest = cache::sha256_hex(&bytes);
        if digest != entry.digest {
            return Err(StoreError::Tampered {
                path,
                recorded: entry.digest.clone(),
                now: digest,
            });
        }
        Ok(bytes)
    }
}

/// Writes `dir/name` through a temp file and a rename; the directory is owner-only.
fn write_atomic(dir: &Path, name: &str, bytes: &[u8]) -> Result<(), StoreError> {
    use std::io::Write;
    std::fs::create_dir_all(dir).map_err(io_error("create", dir))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
    }
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(io_error("write in", dir))?;
    tmp.write_all(bytes)
        .and_then(|()| tmp.as_file().sync_all())
        .map_err(io_error("write in", dir))?;
    let path = dir.join(name);
    tmp.persist(&path).map_err(|e| StoreError::Persist {
        path: path.clone(),
        error: e.error,
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::valid_name;

    #[test]
    fn names() {
        assert!(valid_name("converter-sample"));
        assert!(valid_name("x.y_z-1"));
        for bad in ["", "-x", "X", "../x", "a/b", ".hidden", &"a".repeat(65)] {
            assert!(!valid_name(bad), "{bad}");
        }
    }
}
