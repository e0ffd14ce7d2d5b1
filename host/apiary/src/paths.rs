//! Where apiary keeps things on this host. Every command finds its directories here, so that
//! `up`, `hook run`, `post`, `install` and the rest agree on them; the crates below (`apiary-core`,
//! `apiary-sandbox`) compute no default path of their own, they are handed one.
//!
//! ```text
//! data dir       $APIARY_DATA_DIR, else <XDG data>/apiary (~/.local/share/apiary)
//!   keys/        the key store: operator, relay and persona keys, id owner records
//!   workspaces/  persona workspaces, unless --workspace-root / $APIARY_WORKSPACE_ROOT
//!   sessions/    each persona's ACP session ids per channel (<pack>/<persona>.json), for resuming
//!   components/  converter components added with `apiary component add`
//!   relay/       the embedded relay's journal; relay.url: the last embedded relay's address
//!   examples/    the bundled example pack, written on first use
//! compile cache  <XDG cache>/apiary/components (~/.cache/apiary/components)
//! install root   --root, else $BUZZ_PACKS_DIR, else ~/.buzz/packs
//! overrides      --overrides, else $APIARY_OVERRIDES, else <XDG config>/apiary/overrides.toml
//! ```

use std::path::{Path, PathBuf};

use crate::relay::keys::KeyStore;

/// Overrides the data dir.
pub const DATA_DIR_ENV: &str = "APIARY_DATA_DIR";
/// The root of the persona workspaces (`--workspace-root` wins over it), for `up` and `hook run`.
pub const WORKSPACE_ROOT_ENV: &str = "APIARY_WORKSPACE_ROOT";
/// The old name `up` read the workspace root from; still honoured after [`WORKSPACE_ROOT_ENV`].
/// (Agents and hooks are given `AGENT_CWD` as their own workspace, a different thing.)
pub const LEGACY_WORKSPACE_ROOT_ENV: &str = "AGENT_CWD";
/// The install root (`--root` wins over it).
pub const INSTALL_ROOT_ENV: &str = "BUZZ_PACKS_DIR";
/// The operator overrides file (`--overrides` wins over it).
pub const OVERRIDES_ENV: &str = "APIARY_OVERRIDES";

/// An environment variable's value, `None` when unset or empty.
fn var(name: &str) -> Option<PathBuf> {
    std::env::var_os(name)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// A flag's value, `None` when not given or empty (an empty path names no directory).
fn given(flag: Option<&Path>) -> Option<PathBuf> {
    flag.filter(|p| !p.as_os_str().is_empty())
        .map(Path::to_path_buf)
}

/// The operator's data dir: `$APIARY_DATA_DIR`, else `<XDG data>/apiary`.
pub fn data_dir() -> PathBuf {
    var(DATA_DIR_ENV).unwrap_or_else(|| {
        dirs::data_dir()
            .unwrap_or_else(|| std::env::temp_dir().join("apiary-data"))
            .join("apiary")
    })
}

/// The operator's data dir and what lives in it.
#[derive(Debug, Clone)]
pub struct Data {
    dir: PathBuf,
}

impl Data {
    /// The data dir of this process ([`data_dir`]).
    pub fn locate() -> Data {
        Data { dir: data_dir() }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The key store's directory.
    pub fn keys_dir(&self) -> PathBuf {
        self.dir.join("keys")
    }

    /// The key store (operator, relay and persona keys).
    pub fn key_store(&self) -> KeyStore {
        KeyStore::new(self.keys_dir())
    }

    /// Each persona's ACP session ids, per channel, for resuming (`dispatch::sessions`).
    pub fn sessions(&self) -> PathBuf {
        self.dir.join("sessions")
    }

    /// The default root of the persona workspaces.
    pub fn workspaces(&self) -> PathBuf {
        self.dir.join("workspaces")
    }

    /// The operator's converter components (`apiary component add`).
    pub fn components(&self) -> PathBuf {
        self.dir.join("components")
    }

    /// The embedded relay's event journal.
    pub fn relay_journal(&self) -> PathBuf {
        self.dir.join("relay").join("events.jsonl")
    }

    /// Where `up` records its embedded relay's address for `post` and `tail`.
    pub fn relay_url_file(&self) -> PathBuf {
        self.dir.join("relay.url")
    }

    /// Where `up` records the channels it serves, one name a line, for `post` and `tail` run
    /// without `--channel`.
    pub fn channels_file(&self) -> PathBuf {
        self.dir.join("channels")
    }

    /// Where the bundled example pack is written.
    pub fn example_pack(&self) -> PathBuf {
        self.dir.join("examples").join("hello")
    }

    /// The root of the persona workspaces: the flag, else `$APIARY_WORKSPACE_ROOT`, else (the old
    /// name) `$AGENT_CWD`, else `<data dir>/workspaces`. `up` and `hook run` both ask here.
    pub fn workspace_root(&self, flag: Option<&Path>) -> PathBuf {
        given(flag)
            .or_else(|| var(WORKSPACE_ROOT_ENV))
            .or_else(|| var(LEGACY_WORKSPACE_ROOT_ENV))
            .unwrap_or_else(|| self.workspaces())
    }
}

/// The install root: the flag, else `$BUZZ_PACKS_DIR`, else `~/.buzz/packs`.
pub fn install_root(flag: Option<&Path>) -> Result<PathBuf, NoHome> {
    if let Some(p) = flag {
        return Ok(p.to_path_buf());
    }
    if let Some(p) = var(INSTALL_ROOT_ENV) {
        return Ok(p);
    }
    dirs::home_dir()
        .map(|h| h.join(".buzz").join("packs"))
        .ok_or(NoHome)
}

/// There is no home directory to put `~/.buzz/packs` in, and no flag or variable names another.
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("cannot find the home directory for ~/.buzz/packs")]
pub struct NoHome;

impl NoHome {
    /// What to do instead.
    pub fn help(&self) -> String {
        format!("pass --root DIR or set {INSTALL_ROOT_ENV}")
    }
}

/// The operator overrides file to load: the flag, else `$APIARY_OVERRIDES`, else
/// `<XDG config>/apiary/overrides.toml` when it exists.
pub fn overrides_file(flag: Option<&Path>) -> Option<PathBuf> {
    if let Some(p) = flag {
        return Some(p.to_path_buf());
    }
    var(OVERRIDES_ENV).or_else(|| {
        dirs::config_dir()
            .map(|d| d.join("apiary").join("overrides.toml"))
            .filter(|p| p.is_file())
    })
}

/// Where compiled components are cached: `<XDG cache>/apiary/components` (`None`: no cache).
pub fn compile_cache() -> Option<PathBuf> {
    dirs::cache_dir().map(|d| d.join("apiary").join("components"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_flag_is_no_flag() {
        let data = Data {
            dir: PathBuf::from("/data"),
        };
        assert_eq!(
            data.workspace_root(Some(Path::new("/ws"))),
            PathBuf::from("/ws")
        );
        // Without the variables set by the caller's environment this is the data dir's; with them,
        // theirs: either way not the empty path.
        assert_ne!(data.workspace_root(Some(Path::new(""))), PathBuf::new());
    }
}
