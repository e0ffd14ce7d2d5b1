//! Third-party converter components added by the operator (`apiary component add`): the `.wasm`
//! copied under `<data dir>/components/`, and `registry.json` beside it recording each one's name,
//! sha256 and where it came from. On load the file's digest must still match the record; a
//! component whose bytes changed is refused, not run.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::sandbox::converter::ConverterRunner;
use crate::sandbox::{Sandbox, World, cache};

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
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct RegistryFile {
    components: Vec<Entry>,
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
    pub fn list(&self) -> Result<Vec<Entry>, String> {
        let path = self.dir.join(REGISTRY);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
        };
        let file: RegistryFile = serde_json::from_str(&text).map_err(|e| {
            format!(
                "{} is damaged (line {}, column {}): {e}; remove it to start over",
                path.display(),
                e.line(),
                e.column()
            )
        })?;
        Ok(file.components)
    }

    fn save(&self, components: Vec<Entry>) -> Result<(), String> {
        let text = serde_json::to_string_pretty(&RegistryFile { components })
            .map_err(|e| format!("cannot serialise the component registry: {e}"))?;
        write_atomic(&self.dir, REGISTRY, text.as_bytes())
    }

    fn wasm_path(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.wasm"))
    }

    /// Checks `file` is a converter component of a supported WIT version, compiles it into the
    /// cache, copies it into the store and records it. `name` defaults to the name its `info`
    /// gives; an existing entry of that name is replaced only with `replace`.
    pub fn add(
        &self,
        sandbox: &Sandbox,
        file: &Path,
        name: Option<&str>,
        replace: bool,
    ) -> Result<Entry, String> {
        let size = std::fs::metadata(file)
            .map_err(|e| format!("cannot read {}: {e}", file.display()))?
            .len();
        if size > MAX_COMPONENT {
            return Err(format!(
                "{} is {size} bytes, over the {} MiB cap for a component",
                file.display(),
                MAX_COMPONENT >> 20
            ));
        }
        let bytes =
            crate::safe_fs::read_regular(file, crate::safe_fs::FinalLink::Follow, MAX_COMPONENT)
                .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
        let label = file
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| file.display().to_string());
        // Identity check (world and WIT version), compile into the cache, link.
        let loaded = sandbox.load(&label, &bytes).map_err(|e| e.to_string())?;
        if loaded.identity.world != World::Converter {
            return Err(format!(
                "{label} is a {} component; only converter components can be added (apiary:plugin/format-converter)",
                loaded.identity.world
            ));
        }
        let wit_version = loaded.identity.version.to_string();
        let runner = ConverterRunner::new(loaded).map_err(|e| e.to_string())?;
        let info = runner.info(sandbox).map_err(|e| e.to_string())?.value;
        let name = name.map(str::to_string).unwrap_or(info.name.clone());
        if !valid_name(&name) {
            return Err(format!(
                "{label} calls itself {:?}, which is not a usable name ([a-z0-9][a-z0-9._-]*, at most 64); pass --name",
                crate::sandbox::truncate(&name, 80)
            ));
        }
        let conversions =
            super::registry::checked_conversions(&info).map_err(|e| format!("{label}: {e}"))?;
        let mut components = self.list()?;
        if let Some(i) = components.iter().position(|c| c.name == name) {
            if !replace {
                return Err(format!(
                    "a component named {name} is already added (from {}); pass --force to replace it",
                    components[i].source.display()
                ));
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
        };
        write_atomic(&self.dir, &format!("{name}.wasm"), &bytes)?;
        components.push(entry.clone());
        components.sort_by(|a, b| a.name.cmp(&b.name));
        self.save(components)?;
        Ok(entry)
    }

    /// Forgets a component and deletes its copy.
    pub fn remove(&self, name: &str) -> Result<Entry, String> {
        let mut components = self.list()?;
        let Some(i) = components.iter().position(|c| c.name == name) else {
            let known: Vec<&str> = components.iter().map(|c| c.name.as_str()).collect();
            return Err(format!(
                "no component named {name} is added{}",
                if known.is_empty() {
                    String::new()
                } else {
                    format!(" (added: {})", known.join(", "))
                }
            ));
        };
        let entry = components.remove(i);
        self.save(components)?;
        if valid_name(&entry.name) {
            match std::fs::remove_file(self.wasm_path(&entry.name)) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    return Err(format!(
                        "removed from the registry, but cannot delete its file: {e}"
                    ));
                }
            }
        }
        Ok(entry)
    }

    /// The stored bytes of `entry`, refused when they no longer match the recorded digest.
    pub fn bytes(&self, entry: &Entry) -> Result<Vec<u8>, String> {
        if !valid_name(&entry.name) {
            return Err(format!(
                "the registry names a component {:?}, which is not a valid name",
                entry.name
            ));
        }
        let path = self.wasm_path(&entry.name);
        let bytes =
            crate::safe_fs::read_regular(&path, crate::safe_fs::FinalLink::Follow, MAX_COMPONENT)
                .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let digest = cache::sha256_hex(&bytes);
        if digest != entry.digest {
            return Err(format!(
                "{} does not match the digest recorded when it was added (recorded sha256 {}, now {digest}); refused. Add it again with `apiary component add --force` if the change is yours",
                path.display(),
                entry.digest
            ));
        }
        Ok(bytes)
    }
}

/// Writes `dir/name` through a temp file and a rename; the directory is owner-only.
fn write_atomic(dir: &Path, name: &str, bytes: &[u8]) -> Result<(), String> {
    use std::io::Write;
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
    }
    let mut tmp = tempfile::NamedTempFile::new_in(dir)
        .map_err(|e| format!("cannot write in {}: {e}", dir.display()))?;
    tmp.write_all(bytes)
        .and_then(|()| tmp.as_file().sync_all())
        .map_err(|e| format!("cannot write in {}: {e}", dir.display()))?;
    tmp.persist(dir.join(name))
        .map_err(|e| format!("cannot write {}: {e}", dir.join(name).display()))?;
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
