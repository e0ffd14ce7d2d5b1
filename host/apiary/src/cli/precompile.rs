//! Compiling components into the compile cache before their first use, with progress on stderr.
//! `component add`, `apiary trust --hooks` and `apiary install` do it, so `apiary up` loads a big
//! component (a componentize-js or componentize-py one is 12-18 MB and compiles for seconds on an
//! idle machine, a minute or two on a busy one) from the cache in milliseconds instead of
//! compiling it within its load deadline.

use std::io::Write;
use std::path::Path;
use std::time::Instant;

use serde::Serialize;

use crate::sandbox::{Provenance, Sandbox};

/// A component file is refused before it is read whole past this size (as `up` and `add` do).
pub(super) const MAX_COMPONENT: u64 = 64 * 1024 * 1024;

/// One component compiled (or found compiled) ahead of use.
#[derive(Debug, Serialize)]
pub(super) struct Precompiled {
    /// The file, relative to its pack.
    pub path: String,
    pub bytes: usize,
    /// `compiled` now, `cached` already, or `failed` (then `error` says why).
    pub outcome: &'static str,
    pub ms: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Says on stderr that `label` is being compiled when it is not compiled yet (`show`), and
/// returns when that started: `Some` only then.
pub(super) fn announce(sb: &Sandbox, label: &str, bytes: &[u8], show: bool) -> Option<Instant> {
    if sb.is_compiled(bytes) {
        return None;
    }
    if show {
        let mut err = std::io::stderr().lock();
        let _ = write!(
            err,
            "compiling {label} ({:.1} MB) into the compile cache… ",
            bytes.len() as f64 / 1e6
        );
        let _ = err.flush();
    }
    Some(Instant::now())
}

/// Ends the progress line [`announce`] started.
pub(super) fn finish(started: Option<Instant>, ok: bool, show: bool) {
    if let (Some(start), true) = (started, show) {
        let verdict = if ok { "done" } else { "failed" };
        eprintln!("{verdict} in {:.1} s", start.elapsed().as_secs_f64());
    }
}

/// Compiles each component hook `paths` (relative to `pack_dir`, resolved inside it) into the
/// cache. A file that cannot be read, compiled or linked is `failed`, with the reason; the rest
/// are still compiled.
pub(super) fn hooks<'a>(
    pack_dir: &Path,
    paths: impl IntoIterator<Item = &'a str>,
    show: bool,
) -> Vec<Precompiled> {
    let sb = match crate::shared_sandbox() {
        Ok(sb) => sb,
        Err(e) => {
            return paths
                .into_iter()
                .map(|p| failed(p, 0, e.to_string()))
                .collect();
        }
    };
    paths
        .into_iter()
        .map(|path| one(sb, pack_dir, path, show))
        .collect()
}

fn one(sb: &Sandbox, pack_dir: &Path, path: &str, show: bool) -> Precompiled {
    let read = crate::pack::paths::resolve_inside(pack_dir, path)
        .map_err(|e| e.to_string())
        .and_then(|file| {
            crate::pack::source::read_limited(&file, MAX_COMPONENT).map_err(|e| e.to_string())
        });
    let bytes = match read {
        Ok(b) => b,
        Err(e) => return failed(path, 0, e),
    };
    let started = announce(sb, path, &bytes, show);
    let loaded = sb.load(path, &bytes);
    finish(started, loaded.is_ok(), show);
    match loaded {
        Ok(l) => {
            let (outcome, time) = match l.provenance {
                Provenance::Compiled { time } => ("compiled", time),
                Provenance::Cached { time } => ("cached", time),
            };
            Precompiled {
                path: path.to_string(),
                bytes: bytes.len(),
                outcome,
                ms: time.as_secs_f64() * 1000.0,
                error: None,
            }
        }
        Err(e) => failed(path, bytes.len(), e.to_string()),
    }
}

fn failed(path: &str, bytes: usize, error: String) -> Precompiled {
    Precompiled {
        path: path.to_string(),
        bytes,
        outcome: "failed",
        ms: 0.0,
        error: Some(error),
    }
}
