//! Compile cache: components compiled by this host, stored under the operator's cache directory
//! (`$XDG_CACHE_HOME/apiary/components`, else the platform cache dir).
//!
//! Key: sha256 of the component bytes, plus a hash of the engine's compatibility hash (wasmtime
//! version and every setting that affects code generation). Files are written atomically (a temp
//! file in the same directory, then a rename), owner-only (0600 in a 0700 directory), and only
//! ever read back from this directory: a precompiled artifact that arrives from anywhere else (a
//! pack, the command line) is refused, never deserialized.

use std::hash::{Hash, Hasher};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

/// Where a loaded component came from.
#[derive(Debug, Clone, Copy, serde::Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Provenance {
    /// Compiled now (and stored, when the cache is writable).
    Compiled {
        #[serde(serialize_with = "micros")]
        time: Duration,
    },
    /// Loaded from the cache.
    Cached {
        #[serde(serialize_with = "micros")]
        time: Duration,
    },
}

fn micros<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(d.as_micros() as u64)
}

/// Hex sha256.
pub fn sha256_hex(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut out = String::with_capacity(64);
    for b in digest.iter() {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

#[derive(Debug, Clone)]
pub struct CompileCache {
    dir: Option<PathBuf>,
    engine_key: String,
}

impl CompileCache {
    /// The cache for `engine` in the operator's cache dir; `None` dir disables caching.
    pub fn new(engine: &Engine, dir: Option<PathBuf>) -> CompileCache {
        let mut h = std::hash::DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut h);
        CompileCache {
            dir,
            engine_key: format!("{:016x}", h.finish()),
        }
    }

    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    fn path_for(&self, digest: &str) -> Option<PathBuf> {
        self.dir
            .as_ref()
            .map(|d| d.join(format!("{digest}-{}.cwasm", self.engine_key)))
    }

    /// Whether a usable entry for the component with sha256 `digest` is in the cache, so loading
    /// it takes milliseconds rather than a compilation (a big component's takes seconds to
    /// minutes: `apiary up` gives a first compilation more time, and says so).
    pub fn contains(&self, digest: &str) -> bool {
        self.path_for(digest).is_some_and(|p| trusted_entry(&p))
    }

    /// The compiled component for `bytes` (whose sha256 is `digest`): from the cache when a valid
    /// entry exists, else compiled and stored. Cache problems are logged and never fatal.
    pub fn load(
        &self,
        engine: &Engine,
        digest: &str,
        bytes: &[u8],
    ) -> wasmtime::Result<(Component, Provenance)> {
        if let Some(path) = self.path_for(digest) {
            if trusted_entry(&path) {
                let start = Instant::now();
                // SAFETY: the file is in apiary's own cache directory, owned by this user, not
                // writable by anyone else, and was written by `store` below from code this engine
                // compiled; its name carries the engine's compatibility hash. Bytes from packs or
                // the command line never reach this call.
                match unsafe { Component::deserialize_file(engine, &path) } {
                    Ok(c) => {
                        return Ok((
                            c,
                            Provenance::Cached {
                                time: start.elapsed(),
                            },
                        ));
                    }
                    Err(e) => {
                        tracing::warn!("ignoring unusable cache entry {}: {e:#}", path.display())
                    }
                }
            }
            let start = Instant::now();
            let code = engine.precompile_component(bytes)?;
            let time = start.elapsed();
            if let Err(e) = store(&path, &code) {
                tracing::warn!(
                    "cannot write the compile cache entry {}: {e}",
                    path.display()
                );
            }
            // SAFETY: `code` was produced just now by this engine from `bytes`.
            let c = unsafe { Component::deserialize(engine, &code)? };
            return Ok((c, Provenance::Compiled { time }));
        }
        let start = Instant::now();
        let c = Component::new(engine, bytes)?;
        Ok((
            c,
            Provenance::Compiled {
                time: start.elapsed(),
            },
        ))
    }

    /// Compiles `bytes` without looking at the cache, stores the result, and returns the compile
    /// time and the time to load it back from the cache (for `apiary component inspect`).
    pub fn measure(
        &self,
        engine: &Engine,
        digest: &str,
        bytes: &[u8],
    ) -> wasmtime::Result<(Duration, Option<Duration>)> {
        let start = Instant::now();
        let code = engine.precompile_component(bytes)?;
        let compile = start.elapsed();
        let Some(path) = self.path_for(digest) else {
            return Ok((compile, None));
        };
        if let Err(e) = store(&path, &code) {
            tracing::warn!(
                "cannot write the compile cache entry {}: {e}",
                path.display()
            );
            return Ok((compile, None));
        }
        if !trusted_entry(&path) {
            return Ok((compile, None));
        }
        let start = Instant::now();
        // SAFETY: as in `load`: our own directory, our own file, written just now.
        let c = unsafe { Component::deserialize_file(engine, &path)? };
        let load = start.elapsed();
        drop(c);
        Ok((compile, Some(load)))
    }
}

/// A regular file (not a symlink), owned by us, not group/world accessible, in a directory
/// likewise.
fn trusted_entry(path: &Path) -> bool {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return false;
    };
    if !meta.file_type().is_file() {
        return false;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let uid = unsafe_free_uid();
        let dir_ok = path
            .parent()
            .and_then(|d| std::fs::symlink_metadata(d).ok())
            .is_some_and(|d| d.is_dir() && d.uid() == uid && d.mode() & 0o022 == 0);
        if meta.uid() != uid || meta.mode() & 0o077 != 0 || !dir_ok {
            tracing::warn!(
                "ignoring cache entry {} (wrong owner or permissions)",
                path.display()
            );
            return false;
        }
    }
    true
}

/// The current user's id, read from a file we just created (avoids `libc` for one call).
#[cfg(unix)]
fn unsafe_free_uid() -> u32 {
    use std::os::unix::fs::MetadataExt;
    static UID: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *UID.get_or_init(|| {
        std::fs::metadata("/proc/self")
            .map(|m| m.uid())
            .or_else(|_| {
                tempfile::tempfile()
                    .and_then(|f| f.metadata())
                    .map(|m| m.uid())
            })
            .unwrap_or(u32::MAX)
    })
}

fn store(path: &Path, code: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().expect("cache entries live in a directory");
    create_private_dir(dir)?;
    let mut tmp = tempfile::Builder::new()
        .prefix(".tmp-")
        .suffix(".cwasm")
        .tempfile_in(dir)?;
    tmp.write_all(code)?;
    tmp.as_file().sync_all()?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        tmp.as_file()
            .set_permissions(std::fs::Permissions::from_mode(0o600))?;
    }
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
        if !dir.is_dir() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)?;
        }
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    #[cfg(not(unix))]
    std::fs::create_dir_all(dir)?;
    Ok(())
}
