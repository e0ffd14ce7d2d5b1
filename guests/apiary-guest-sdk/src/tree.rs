//! Filesystem helpers over a converter's preopens (`/input` read-only, `/output` writable).
//!
//! The host already confines a component to its preopens; these helpers add the limits a converter
//! should apply to data it does not trust: a size cap on every file read, relative `/`-separated
//! paths only, and no following of symbolic links while walking.

use std::fs;
use std::io::Read;
use std::path::{Component, Path, PathBuf};

/// Largest single file a converter reads (a manifest, persona or skill file).
pub const MAX_FILE: u64 = 4 * 1024 * 1024;
/// Most entries a walk visits before giving up.
pub const MAX_ENTRIES: usize = 20_000;

/// Joins a relative, `/`-separated path under `root`, refusing absolute paths and `..`.
pub fn join(root: &Path, relative: &str) -> Result<PathBuf, String> {
    let relative = relative.strip_prefix("./").unwrap_or(relative);
    let path = Path::new(relative);
    for component in path.components() {
        match component {
            Component::Normal(_) | Component::CurDir => {}
            _ => return Err(format!("path `{relative}` leaves its tree")),
        }
    }
    Ok(root.join(path))
}

/// Whether `relative` names a regular file under `root`.
pub fn is_file(root: &Path, relative: &str) -> bool {
    join(root, relative)
        .ok()
        .and_then(|p| fs::symlink_metadata(p).ok())
        .is_some_and(|m| m.is_file())
}

/// Whether `relative` names a directory under `root`.
pub fn is_dir(root: &Path, relative: &str) -> bool {
    join(root, relative)
        .ok()
        .and_then(|p| fs::symlink_metadata(p).ok())
        .is_some_and(|m| m.is_dir())
}

/// An I/O error in words, without the platform's error number (WASI's differ from the host's, so
/// "os error 44" would mean nothing to the operator).
pub fn why(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "it does not exist".into(),
        std::io::ErrorKind::PermissionDenied => "permission denied".into(),
        std::io::ErrorKind::IsADirectory => "it is a directory".into(),
        kind => kind.to_string(),
    }
}

/// Reads a UTF-8 file of at most [`MAX_FILE`] bytes.
pub fn read(root: &Path, relative: &str) -> Result<String, String> {
    let bytes = read_bytes(root, relative)?;
    String::from_utf8(bytes).map_err(|_| format!("{relative} is not UTF-8"))
}

/// Reads a file's raw bytes (at most [`MAX_FILE`]).
pub fn read_bytes(root: &Path, relative: &str) -> Result<Vec<u8>, String> {
    let path = join(root, relative)?;
    let file = fs::File::open(&path).map_err(|e| format!("cannot read {relative}: {}", why(&e)))?;
    let mut bytes = Vec::new();
    file.take(MAX_FILE + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read {relative}: {}", why(&e)))?;
    if bytes.len() as u64 > MAX_FILE {
        return Err(format!("{relative} is larger than {MAX_FILE} bytes"));
    }
    Ok(bytes)
}

/// Reads and parses a JSON file.
pub fn read_json(root: &Path, relative: &str) -> Result<serde_json::Value, String> {
    let text = read(root, relative)?;
    serde_json::from_str(&text).map_err(|e| format!("{relative}: invalid JSON: {e}"))
}

/// Writes a file under `root`, creating its parent directories.
pub fn write(root: &Path, relative: &str, contents: impl AsRef<[u8]>) -> Result<(), String> {
    let path = join(root, relative)?;
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent)
            .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
    }
    fs::write(&path, contents).map_err(|e| format!("cannot write {relative}: {e}"))
}

/// Writes pretty JSON with a trailing newline.
pub fn write_json(root: &Path, relative: &str, value: &serde_json::Value) -> Result<(), String> {
    let mut text = serde_json::to_string_pretty(value).map_err(|e| e.to_string())?;
    text.push('\n');
    write(root, relative, text)
}

/// Sorted names of the entries of a directory (empty when it does not exist).
pub fn list(root: &Path, relative: &str) -> Vec<String> {
    let Ok(path) = join(root, relative) else {
        return Vec::new();
    };
    let mut names: Vec<String> = fs::read_dir(path)
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|e| e.file_name().to_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// Every regular file under `relative` (itself a directory), as paths relative to `root`, sorted.
/// Symbolic links are skipped, not followed.
pub fn walk(root: &Path, relative: &str) -> Result<Vec<String>, String> {
    let mut files = Vec::new();
    let mut stack = vec![relative.trim_end_matches('/').to_string()];
    let mut seen = 0usize;
    while let Some(dir) = stack.pop() {
        for name in list(root, &dir) {
            seen += 1;
            if seen > MAX_ENTRIES {
                return Err(format!("{relative} has more than {MAX_ENTRIES} entries"));
            }
            let child = if dir.is_empty() {
                name
            } else {
                format!("{dir}/{name}")
            };
            let meta = fs::symlink_metadata(join(root, &child)?).map_err(|e| e.to_string())?;
            if meta.is_dir() {
                stack.push(child);
            } else if meta.is_file() {
                files.push(child);
            }
        }
    }
    files.sort();
    Ok(files)
}

/// Copies the regular files under `from` (relative to `src`) to `to` (relative to `dst`), keeping
/// their layout. Returns the destination paths written.
pub fn copy_dir(src: &Path, from: &str, dst: &Path, to: &str) -> Result<Vec<String>, String> {
    let from = from.trim_end_matches('/');
    let mut written = Vec::new();
    for file in walk(src, from)? {
        let rest = file[from.len()..].trim_start_matches('/');
        let target = if to.is_empty() {
            rest.to_string()
        } else {
            format!("{to}/{rest}")
        };
        write(dst, &target, read_bytes(src, &file)?)?;
        written.push(target);
    }
    Ok(written)
}
