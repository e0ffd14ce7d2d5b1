//! Moving trees in and out of a conversion. The input is staged into a private directory first, so
//! a converter's `/input` holds exactly the files the host checked (no `.git`, no symlinks, within
//! caps) and the host's detection reads the same files the converter will; the output a converter
//! wrote is checked before the host validates it and moves it into place.
//!
//! A plain tree (regular files and directories only, within caps, see [`is_plain`]) is read in
//! place, with nothing staged. Otherwise staging hard-links each file when it can (no new inode,
//! no bytes copied) and copies it otherwise. A link shares the operator's file, which is safe because converters get `/input`
//! read-only and WASI refuses to link out of a read-only directory.
//!
//! Only regular files and directories cross: a symlink that leaves the input, a directory
//! symlink, a device or a socket refuses the input; any symlink in an output refuses it.

use std::path::{Path, PathBuf};

/// Caps on one tree (input or output).
#[derive(Debug, Clone, Copy)]
pub struct Caps {
    pub max_entries: usize,
    pub max_bytes: u64,
    pub max_depth: usize,
}

impl Caps {
    /// Persona and plugin trees are a few MB at most; DuDuClaw caps an unpacked pack at 50 MB.
    pub const TREE: Caps = Caps {
        max_entries: 20_000,
        max_bytes: 64 << 20,
        max_depth: 32,
    };
}

/// What a copy or a scan saw.
#[derive(Debug, Default, Clone, Copy)]
pub struct Counts {
    pub files: usize,
    pub dirs: usize,
    pub bytes: u64,
}

/// Directories never copied in: version-control metadata, not content.
const SKIPPED: &[&str] = &[".git", ".hg", ".svn"];

/// Why a tree could not be staged in, a converter's output was refused, or the output could not be
/// placed. Paths in the input and the output are relative to their root.
#[derive(Debug, thiserror::Error)]
pub enum StageError {
    /// `cannot {action} {what}: {error}`.
    #[error("cannot {action} {what}: {error}")]
    Io {
        action: &'static str,
        what: String,
        error: std::io::Error,
    },
    #[error("{} is not a directory; apiary convert reads a directory tree (or one agent .md file)", .0.display())]
    NotADirectory(PathBuf),
    #[error("{} is nested deeper than {max} directories", at.display())]
    TooDeep { at: PathBuf, max: usize },
    #[error("{} has a name that is not UTF-8", .0.display())]
    NotUtf8Name(PathBuf),
    #[error("{} is a symlink that cannot be resolved: {error}", at.display())]
    UnresolvedLink { at: PathBuf, error: std::io::Error },
    #[error("{} is a symlink pointing outside the input (to {}); refused", at.display(), to.display())]
    EscapingLink { at: PathBuf, to: PathBuf },
    #[error("{} is a symlink to a directory; directory symlinks are not followed", .0.display())]
    DirectoryLink(PathBuf),
    #[error("{} is not a regular file or directory (a device, socket or pipe); refused", .0.display())]
    Special(PathBuf),
    #[error("more than {max} files and directories (at {}); refused", at.display())]
    TooManyEntries { at: PathBuf, max: usize },
    #[error("the tree is over {} MiB (at {}); refused", max >> 20, at.display())]
    TooLarge { at: PathBuf, max: u64 },
    #[error("{} changed into a link or a special file while it was copied; refused", .0.display())]
    Changed(PathBuf),
    #[error("the output nests deeper than {max} directories")]
    OutputTooDeep { max: usize },
    #[error("the output has a file name that is not UTF-8 ({})", .0.display())]
    OutputNotUtf8Name(PathBuf),
    #[error(
        "the output contains a symlink, {} -> {to}; converters must write regular files only",
        at.display()
    )]
    OutputLink { at: PathBuf, to: String },
    #[error("the output contains {}, which is not a regular file or directory", .0.display())]
    OutputSpecial(PathBuf),
    #[error("the output is over {} MiB", max >> 20)]
    OutputTooLarge { max: u64 },
    #[error("{} exists and is not a directory; choose another --out", .0.display())]
    DestinationNotADirectory(PathBuf),
    #[error(
        "{} exists and is not empty; pass --force to replace it, or choose another --out",
        .0.display()
    )]
    DestinationNotEmpty(PathBuf),
    #[error("cannot move the existing {} aside: {error}", out.display())]
    MoveAside { out: PathBuf, error: std::io::Error },
}

impl StageError {
    /// A short machine-readable kind, for `--json` output and tests.
    pub fn kind(&self) -> &'static str {
        match self {
            StageError::Io { .. } | StageError::MoveAside { .. } => "io",
            StageError::NotADirectory(_) => "not-a-directory",
            StageError::TooDeep { .. } | StageError::OutputTooDeep { .. } => "too-deep",
            StageError::NotUtf8Name(_) | StageError::OutputNotUtf8Name(_) => "not-utf8-name",
            StageError::UnresolvedLink { .. }
            | StageError::EscapingLink { .. }
            | StageError::DirectoryLink(_)
            | StageError::OutputLink { .. } => "symlink",
            StageError::Special(_) | StageError::OutputSpecial(_) => "special-file",
            StageError::TooManyEntries { .. } => "too-many-entries",
            StageError::TooLarge { .. } | StageError::OutputTooLarge { .. } => "too-large",
            StageError::Changed(_) => "changed",
            StageError::DestinationNotADirectory(_) | StageError::DestinationNotEmpty(_) => {
                "destination-exists"
            }
        }
    }
}

/// `cannot {action} {path}: {error}`.
fn io_error(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> StageError {
    move |error| StageError::Io {
        action,
        what: path.display().to_string(),
        error,
    }
}

/// Whether the directory `src` can be given to converters as it is, with nothing staged: every
/// entry a regular file or a directory with a UTF-8 name, no version-control directory at the top,
/// within `caps`. Staging costs an entry per file to create and again to remove, about a third of
/// a conversion. Anything else (a symlink, a special file, a cap reached) is `false`, and
/// [`copy_in`] stages the tree and says what is wrong. Reading the operator's tree in place is as
/// safe as the hard links staging makes: converters get `/input` read-only, and the sandbox's
/// preopen never follows a link out of it (a link planted after this check stays inside).
pub fn is_plain(src: &Path, caps: Caps) -> bool {
    fn walk(dir: &Path, depth: usize, caps: Caps, counts: &mut Counts) -> bool {
        if depth > caps.max_depth {
            return false;
        }
        let Ok(entries) = std::fs::read_dir(dir) else {
            return false;
        };
        for entry in entries {
            let Ok(entry) = entry else { return false };
            let name = entry.file_name();
            if name.to_str().is_none() || (depth == 0 && SKIPPED.iter().any(|s| name == *s)) {
                return false;
            }
            counts.files += 1;
            if counts.files > caps.max_entries {
                return false;
            }
            match entry.file_type() {
                Ok(t) if t.is_dir() => {
                    if !walk(&entry.path(), depth + 1, caps, counts) {
                        return false;
                    }
                }
                Ok(t) if t.is_file() => {
                    counts.bytes += entry.metadata().map_or(u64::MAX, |m| m.len());
                    if counts.bytes > caps.max_bytes {
                        return false;
                    }
                }
                _ => return false,
            }
        }
        true
    }
    std::fs::symlink_metadata(src).is_ok_and(|m| m.is_dir())
        && walk(src, 0, caps, &mut Counts::default())
}

/// Copies `src` (a directory) into `dest` (created), refusing anything but regular files,
/// directories and in-tree file symlinks (copied as the file they name). One markdown file (a
/// lone agent file) is staged as a directory holding just it.
pub fn copy_in(src: &Path, dest: &Path, caps: Caps) -> Result<Counts, StageError> {
    let meta = std::fs::metadata(src).map_err(io_error("read", src))?;
    if meta.is_file() && is_markdown(src) {
        let name = src.file_name().unwrap_or_default();
        std::fs::create_dir_all(dest).map_err(io_error("create", dest))?;
        let mut counts = Counts::default();
        let rel = Path::new(name);
        counts_entry(&counts, caps, rel)?;
        copy_file(src, &dest.join(name), rel, caps, &mut counts)?;
        return Ok(counts);
    }
    if !meta.is_dir() {
        return Err(StageError::NotADirectory(src.to_path_buf()));
    }
    let root = src.canonicalize().map_err(io_error("resolve", src))?;
    std::fs::create_dir_all(dest).map_err(io_error("create", dest))?;
    let mut counts = Counts::default();
    copy_dir(&root, &root, dest, Path::new(""), 0, caps, &mut counts)?;
    Ok(counts)
}

fn copy_dir(
    root: &Path,
    dir: &Path,
    dest: &Path,
    rel: &Path,
    depth: usize,
    caps: Caps,
    counts: &mut Counts,
) -> Result<(), StageError> {
    if depth > caps.max_depth {
        return Err(StageError::TooDeep {
            at: rel.to_path_buf(),
            max: caps.max_depth,
        });
    }
    let listing = |error| StageError::Io {
        action: "list",
        what: rel_or_root(rel),
        error,
    };
    for entry in std::fs::read_dir(dir).map_err(listing)? {
        let entry = entry.map_err(listing)?;
        let name = entry.file_name();
        let rel_child = rel.join(&name);
        if name.to_str().is_none() {
            return Err(StageError::NotUtf8Name(rel_child));
        }
        if depth == 0 && SKIPPED.iter().any(|s| name == *s) {
            continue;
        }
        counts_entry(counts, caps, &rel_child)?;
        let ty = entry.file_type().map_err(io_error("read", &rel_child))?;
        let (path, target) = (entry.path(), dest.join(&name));
        if ty.is_dir() {
            std::fs::create_dir(&target).map_err(io_error("create", &target))?;
            counts.dirs += 1;
            copy_dir(root, &path, &target, &rel_child, depth + 1, caps, counts)?;
        } else if ty.is_file() {
            copy_file(&path, &target, &rel_child, caps, counts)?;
        } else if ty.is_symlink() {
            let resolved = in_tree_file(root, &path, &rel_child)?;
            copy_file(&resolved, &target, &rel_child, caps, counts)?;
        } else {
            return Err(StageError::Special(rel_child));
        }
    }
    Ok(())
}

/// The file the symlink at `path` names, refused unless it is a regular file inside `root`.
fn in_tree_file(root: &Path, path: &Path, rel: &Path) -> Result<PathBuf, StageError> {
    let resolved = path
        .canonicalize()
        .map_err(|error| StageError::UnresolvedLink {
            at: rel.to_path_buf(),
            error,
        })?;
    if !resolved.starts_with(root) {
        return Err(StageError::EscapingLink {
            at: rel.to_path_buf(),
            to: resolved,
        });
    }
    if !resolved.is_file() {
        return Err(StageError::DirectoryLink(rel.to_path_buf()));
    }
    Ok(resolved)
}

fn rel_or_root(rel: &Path) -> String {
    if rel.as_os_str().is_empty() {
        "the input root".to_string()
    } else {
        rel.display().to_string()
    }
}

fn counts_entry(counts: &Counts, caps: Caps, rel: &Path) -> Result<(), StageError> {
    if counts.files + counts.dirs >= caps.max_entries {
        return Err(StageError::TooManyEntries {
            at: rel.to_path_buf(),
            max: caps.max_entries,
        });
    }
    Ok(())
}

fn copy_file(
    from: &Path,
    to: &Path,
    rel: &Path,
    caps: Caps,
    counts: &mut Counts,
) -> Result<(), StageError> {
    let len = std::fs::metadata(from)
        .map_err(io_error("read", rel))?
        .len();
    if counts.bytes + len > caps.max_bytes {
        return Err(StageError::TooLarge {
            at: rel.to_path_buf(),
            max: caps.max_bytes,
        });
    }
    // Creating files dominates a conversion's cost (an inode each); a link needs none. The entry
    // was a regular file when listed; a hard link takes whatever is there now (`linkat` does not
    // follow a link), so only a regular file may stay, and the copy reads only a regular file.
    if std::fs::hard_link(from, to).is_ok() {
        if !std::fs::symlink_metadata(to).is_ok_and(|m| m.is_file()) {
            let _ = std::fs::remove_file(to);
            return Err(StageError::Changed(rel.to_path_buf()));
        }
    } else {
        copy_regular(from, to).map_err(io_error("copy", rel))?;
    }
    counts.bytes += len;
    counts.files += 1;
    Ok(())
}

/// Copies the regular file `from` (a final link refused) into the new file `to`.
fn copy_regular(from: &Path, to: &Path) -> std::io::Result<()> {
    use crate::safe_fs::{FinalLink, open_regular};
    let (mut src, _) = open_regular(from, FinalLink::Refuse)?;
    let mut dst = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(to)?;
    std::io::copy(&mut src, &mut dst).map(drop)
}

/// Checks a tree a converter wrote: regular files and directories only, UTF-8 names, within caps.
/// Returns the relative paths of its files, sorted.
pub fn scan_output(dir: &Path, caps: Caps) -> Result<(Vec<PathBuf>, Counts), StageError> {
    let mut files = Vec::new();
    let mut counts = Counts::default();
    scan(dir, Path::new(""), 0, caps, &mut counts, &mut files)?;
    files.sort();
    Ok((files, counts))
}

fn scan(
    dir: &Path,
    rel: &Path,
    depth: usize,
    caps: Caps,
    counts: &mut Counts,
    files: &mut Vec<PathBuf>,
) -> Result<(), StageError> {
    if depth > caps.max_depth {
        return Err(StageError::OutputTooDeep {
            max: caps.max_depth,
        });
    }
    let listing = |error| StageError::Io {
        action: "list",
        what: "the output".to_string(),
        error,
    };
    for entry in std::fs::read_dir(dir).map_err(listing)? {
        let entry = entry.map_err(listing)?;
        let rel_child = rel.join(entry.file_name());
        if entry.file_name().to_str().is_none() {
            return Err(StageError::OutputNotUtf8Name(rel_child));
        }
        counts_entry(counts, caps, &rel_child)?;
        let meta = std::fs::symlink_metadata(entry.path()).map_err(io_error("read", &rel_child))?;
        let ty = meta.file_type();
        if ty.is_symlink() {
            let to = std::fs::read_link(entry.path())
                .map(|t| t.display().to_string())
                .unwrap_or_default();
            return Err(StageError::OutputLink { at: rel_child, to });
        } else if ty.is_dir() {
            counts.dirs += 1;
            scan(&entry.path(), &rel_child, depth + 1, caps, counts, files)?;
        } else if ty.is_file() {
            counts.files += 1;
            counts.bytes += meta.len();
            if counts.bytes > caps.max_bytes {
                return Err(StageError::OutputTooLarge {
                    max: caps.max_bytes,
                });
            }
            files.push(rel_child);
        } else {
            return Err(StageError::OutputSpecial(rel_child));
        }
    }
    Ok(())
}

fn is_markdown(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("md"))
}

/// The default destination: `<cwd>/<src-name>.<format>` (a markdown file's name without `.md`).
pub fn default_out(src: &Path, format: &str) -> PathBuf {
    let name = src
        .canonicalize()
        .ok()
        .and_then(|p| {
            let name = if p.is_file() && is_markdown(&p) {
                p.file_stem()
            } else {
                p.file_name()
            };
            name.map(|n| n.to_string_lossy().into_owned())
        })
        .unwrap_or_else(|| "converted".to_string());
    PathBuf::from(format!("{name}.{format}"))
}

/// Whether `out` may be written: absent, an empty directory, or anything with `force`.
pub fn check_destination(out: &Path, force: bool) -> Result<(), StageError> {
    let Ok(meta) = std::fs::symlink_metadata(out) else {
        return Ok(());
    };
    if !meta.is_dir() {
        return Err(StageError::DestinationNotADirectory(out.to_path_buf()));
    }
    let empty = std::fs::read_dir(out)
        .map(|mut d| d.next().is_none())
        .unwrap_or(false);
    if !empty && !force {
        return Err(StageError::DestinationNotEmpty(out.to_path_buf()));
    }
    Ok(())
}

/// Moves a validated tree to `out`: moved (or, across file systems, copied) beside it first, then
/// renamed into place, so `out` is either the old tree or the complete new one. An existing `out`
/// (checked by [`check_destination`]) is replaced. `tree` is gone afterwards when it could be moved.
pub fn place(tree: &Path, out: &Path) -> Result<(), StageError> {
    let parent = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&parent).map_err(io_error("create", &parent))?;
    let staging = tempfile::Builder::new()
        .prefix(".apiary-convert-")
        .tempdir_in(&parent)
        .map_err(io_error("create a temporary directory in", &parent))?;
    let new = staging.path().join("new");
    // One rename on the same file system; a failed rename moves nothing, so copying still works.
    if std::fs::rename(tree, &new).is_err() {
        copy_tree(tree, &new).map_err(io_error("copy the output beside", out))?;
    }
    if std::fs::symlink_metadata(out).is_ok() {
        let old = staging.path().join("old");
        std::fs::rename(out, &old).map_err(|error| StageError::MoveAside {
            out: out.to_path_buf(),
            error,
        })?;
    }
    std::fs::rename(&new, out).map_err(io_error("move the output to", out))?;
    // `staging` (with the old tree, if any) is removed on drop.
    Ok(())
}

/// Copies a tree already checked by [`scan_output`] (regular files and directories only).
fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let ty = entry.file_type()?;
        let target = to.join(entry.file_name());
        if ty.is_dir() {
            copy_tree(&entry.path(), &target)?;
        } else if ty.is_file() {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_symlink_is_refused_and_in_tree_file_symlink_copied() {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "s").unwrap();
        let src = tempfile::tempdir().unwrap();
        std::fs::write(src.path().join("a.txt"), "a").unwrap();
        std::os::unix::fs::symlink("a.txt", src.path().join("b.txt")).unwrap();
        let dest = tempfile::tempdir().unwrap();
        let c = copy_in(src.path(), &dest.path().join("in"), Caps::TREE).unwrap();
        assert_eq!(c.files, 2);
        assert!(!dest.path().join("in/b.txt").is_symlink());

        std::os::unix::fs::symlink(outside.path().join("secret"), src.path().join("leak")).unwrap();
        let e = copy_in(src.path(), &dest.path().join("in2"), Caps::TREE).unwrap_err();
        assert!(e.to_string().contains("outside the input"), "{e}");
        assert_eq!(e.kind(), "symlink");
    }

    #[test]
    fn staged_files_match_and_place_moves_or_copies() {
        let src = tempfile::tempdir().unwrap();
        std::fs::create_dir(src.path().join("d")).unwrap();
        std::fs::write(src.path().join("d/a.txt"), "a").unwrap();
        let work = tempfile::tempdir().unwrap();
        let staged = work.path().join("in");
        copy_in(src.path(), &staged, Caps::TREE).unwrap();
        assert_eq!(std::fs::read(staged.join("d/a.txt")).unwrap(), b"a");

        let dest = tempfile::tempdir().unwrap();
        let out = dest.path().join("out");
        place(&staged, &out).unwrap();
        assert_eq!(std::fs::read(out.join("d/a.txt")).unwrap(), b"a");
        // Replacing a non-empty destination keeps the new tree only.
        let again = work.path().join("again");
        std::fs::create_dir_all(again.join("e")).unwrap();
        std::fs::write(again.join("e/b.txt"), "b").unwrap();
        place(&again, &out).unwrap();
        assert!(out.join("e/b.txt").is_file() && !out.join("d").exists());
    }

    #[test]
    fn caps_hold() {
        let src = tempfile::tempdir().unwrap();
        for i in 0..5 {
            std::fs::write(src.path().join(format!("{i}")), "0123456789").unwrap();
        }
        let dest = tempfile::tempdir().unwrap();
        let small = Caps {
            max_entries: 3,
            max_bytes: 1 << 20,
            max_depth: 4,
        };
        assert!(copy_in(src.path(), &dest.path().join("a"), small).is_err());
        let tiny = Caps {
            max_entries: 100,
            max_bytes: 25,
            max_depth: 4,
        };
        assert!(copy_in(src.path(), &dest.path().join("b"), tiny).is_err());
    }

    /// A tree of plain files and directories is read in place; a symlink (even an in-tree one), a
    /// `.git` at the top or a cap reached sends it through staging, which checks and flattens.
    #[test]
    fn only_plain_trees_are_read_in_place() {
        let src = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(src.path().join("agents/deep")).unwrap();
        std::fs::write(src.path().join("agents/a.md"), "a").unwrap();
        std::fs::write(src.path().join("agents/deep/b.md"), "b").unwrap();
        assert!(is_plain(src.path(), Caps::TREE));
        assert!(!is_plain(&src.path().join("agents/a.md"), Caps::TREE));
        let few = Caps {
            max_entries: 2,
            ..Caps::TREE
        };
        assert!(!is_plain(src.path(), few));
        std::os::unix::fs::symlink("a.md", src.path().join("agents/c.md")).unwrap();
        assert!(!is_plain(src.path(), Caps::TREE));
        std::fs::remove_file(src.path().join("agents/c.md")).unwrap();
        std::fs::create_dir(src.path().join(".git")).unwrap();
        assert!(!is_plain(src.path(), Caps::TREE));
        // Below the top, a `.git` is content like any other directory.
        std::fs::rename(src.path().join(".git"), src.path().join("agents/.git")).unwrap();
        assert!(is_plain(src.path(), Caps::TREE));
    }

    #[test]
    fn output_symlink_is_refused() {
        let out = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink("/etc/passwd", out.path().join("x")).unwrap();
        let e = scan_output(out.path(), Caps::TREE).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("the output contains a symlink, x -> /etc/passwd;"),
            "{e}"
        );
    }
}
