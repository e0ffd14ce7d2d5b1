//! Distribution: reproducible `.buzzpack` builds, verified installs, `pack.lock`, hook trust.
//!
//! Everything that arrives from outside (archives, checksum files, URLs, git checkouts, an existing
//! `pack.lock`) is hostile until checked. The pieces:
//! - [`archive`]: writing reproducible zips and extracting untrusted ones behind a fence;
//! - [`build`]: collecting a pack directory's shippable files (refusing secrets) into a `.buzzpack`;
//! - [`fetch`]: turning an install source (file, `http(s)://`, `github:`, `git+https://`, `git+file://`)
//!   into verified bytes or a checked-out tree;
//! - [`install`]: staging, validating and atomically swapping a pack into the install root, with a
//!   journal so an interrupted install is rolled back (or completed) by the next command;
//! - [`lock`]: `pack.lock` as spec §11 shows it, and the per-pack install record used by `verify`;
//! - [`identity`]: installs bound to their source, persona keys and workspaces bound to the installed
//!   pack or the directory that owns an id, never to a self-declared id alone;
//! - [`trust`]: the operator's trust decisions for script hooks and hook components;
//! - [`verify`]: re-hashing installed packs against what was recorded at install time;
//! - [`expert`]: installing a DuDuClaw expert pack by converting it (the DuDuClaw Expert Pack
//!   Format v1.0, §4 Install semantics), and
//!   [`agent_config`]: the non-clobbering merge of its `agent.partial.toml` files.
//!
//! Install root layout (default `~/.buzz/packs`, or `--root` / `BUZZ_PACKS_DIR`: see
//! [`crate::paths::install_root`]):
//! ```text
//! <root>/pack.lock                    spec §11 lock: id -> {source, sha256|resolved, version, installed_at}
//! <root>/<pack-id>/                   the installed pack
//! <root>/<pack-id>/.apiary-install.json   per-file digests and hooks, written at install time
//! <root>/.apiary/lock                 advisory lock serialising installs
//! <root>/.apiary/journal.json         present only while an install/uninstall is in flight
//! <root>/.apiary/trust.json           the trust store
//! <root>/.apiary/agents/<pack-id>/<persona>/agent.toml   agent config merged from expert packs
//! <root>/.apiary/{staging,old,trash}/ scratch space, emptied by recovery
//! ```

pub mod agent_config;
pub mod archive;
pub mod blossom;
pub mod build;
pub mod code;
pub mod fetch;
pub mod identity;
pub mod install;
pub mod lock;
pub mod registry;
pub mod root;
pub mod signature;
pub mod trust;
pub mod verify;

/// Expert packs install through the install steps (a conversion in front of them).
pub use install::expert;

use std::fmt;
use std::fs::File;
use std::io::{self, Read, Write};
use std::path::Path;

use sha2::{Digest, Sha256};

use crate::diag::Report;

/// A refusal or failure, with a stable code for scripts and an optional hint for people.
#[derive(Debug)]
pub struct DistError {
    pub code: code::Code,
    pub message: String,
    pub help: Option<String>,
    /// Validation findings when the refusal is "the pack is invalid".
    pub report: Option<Box<Report>>,
}

impl DistError {
    pub fn new(code: impl Into<code::Code>, message: impl Into<String>) -> Self {
        DistError {
            code: code.into(),
            message: message.into(),
            help: None,
            report: None,
        }
    }
    pub fn help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }
    pub fn with_report(mut self, report: Report) -> Self {
        self.report = Some(Box::new(report));
        self
    }
    /// An I/O failure on `path` while doing `what`.
    pub fn io(what: &str, path: &Path, e: io::Error) -> Self {
        DistError::new(code::Code::Io, format!("{what} {}: {e}", path.display()))
    }
}

impl From<crate::paths::NoHome> for DistError {
    fn from(e: crate::paths::NoHome) -> Self {
        DistError::new(code::Root::Home, e.to_string()).help(e.help())
    }
}

impl fmt::Display for DistError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for DistError {}

/// The install root's own directory: its lock, scratch space and journal (see [`root`]).
pub const STATE_DIR: &str = ".apiary";

/// Whether any directory between `base` and `base/rel` is a symbolic link.
pub(crate) fn through_symlink(base: &Path, rel: &str) -> bool {
    let mut here = base.to_path_buf();
    let parts: Vec<&str> = rel.split('/').collect();
    for part in &parts[..parts.len().saturating_sub(1)] {
        here.push(part);
        if std::fs::symlink_metadata(&here).is_ok_and(|m| m.file_type().is_symlink()) {
            return true;
        }
    }
    false
}

pub type Result<T, E = DistError> = std::result::Result<T, E>;

/// Lower-case hex of a byte string (the `hex` crate, as the harness's skill records use).
pub fn hex(bytes: &[u8]) -> String {
    ::hex::encode(bytes)
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// Streams a file through SHA-256.
pub fn sha256_file(path: &Path) -> io::Result<String> {
    let mut f = File::open(path)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(hex(&h.finalize()))
}

/// Whether `s` is a lower- or upper-case 64-digit hex SHA-256.
pub fn is_sha256_hex(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The current time as RFC 3339 UTC with second precision, e.g. `2026-04-10T11:00:00Z`.
pub fn now_rfc3339() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    rfc3339(secs)
}

pub(crate) fn rfc3339(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Civil date from days since 1970-01-01 (proleptic Gregorian).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        (rem / 60) % 60,
        rem % 60
    )
}

/// Flushes a directory's entries to disk (after creating or renaming inside it).
pub(crate) fn fsync_dir(dir: &Path) -> io::Result<()> {
    #[cfg(unix)]
    {
        File::open(dir)?.sync_all()
    }
    #[cfg(not(unix))]
    {
        let _ = dir;
        Ok(())
    }
}

/// Writes `bytes` to `path` atomically: a temporary file in `tmp_dir` (same filesystem), fsync,
/// rename over `path`, fsync the parent.
pub(crate) fn write_atomic(path: &Path, tmp_dir: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut tmp = tempfile::Builder::new()
        .prefix(".tmp-")
        .tempfile_in(tmp_dir)?;
    tmp.write_all(bytes)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        tmp.as_file()
            .set_permissions(std::fs::Permissions::from_mode(0o644))?;
    }
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => fsync_dir(p),
        _ => fsync_dir(Path::new(".")),
    }
}

/// A short random-enough suffix for scratch names (pid, time, counter): unique per process run.
pub(crate) fn nonce() -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!(
        "{}-{:08x}-{}",
        std::process::id(),
        t,
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// A progress bar on stderr when `enabled` (a terminal and not `--json`), hidden otherwise.
pub fn progress_bar(len: u64, message: &str, enabled: bool) -> indicatif::ProgressBar {
    if !enabled {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(len);
    let style = indicatif::ProgressStyle::with_template(
        "{msg:12} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec}",
    )
    .map(|s| s.progress_chars("=> "));
    if let Ok(style) = style {
        bar.set_style(style);
    }
    bar.set_message(message.to_string());
    bar
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_dates() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(1_775_818_800), "2026-04-10T11:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
    }

    #[test]
    fn hex_digest() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
