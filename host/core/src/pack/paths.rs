//! Pack-relative paths from untrusted manifests and frontmatter, resolved so they cannot leave the pack:
//! absolute paths, drive letters, `..` components and symlinks pointing outside are refused.

use std::path::{Component, Path, PathBuf};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    #[error("path is empty")]
    Empty,
    #[error("path `{0}` is absolute; pack paths must be relative to the pack root")]
    Absolute(String),
    #[error("path `{0}` contains `..`; pack paths must stay inside the pack")]
    Parent(String),
    #[error("path `{0}` leaves the pack through a symbolic link (it resolves to {1})")]
    Escape(String, PathBuf),
    #[error("`{0}` does not exist in the pack")]
    NotFound(String),
}

impl PathError {
    /// A short machine-readable kind, for `--json` output and tests.
    pub fn kind(&self) -> &'static str {
        match self {
            PathError::Empty => "empty",
            PathError::Absolute(_) => "absolute",
            PathError::Parent(_) => "parent",
            PathError::Escape(..) => "escape",
            PathError::NotFound(_) => "not-found",
        }
    }
}

/// Why a stored path (an archive entry, a file of a pack being packaged) was refused; the text
/// completes "entry `x` …".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EntryNameError {
    #[error("has an empty name")]
    Empty,
    #[error("has a path longer than {0} bytes")]
    TooLong(usize),
    #[error("contains NUL or control characters")]
    Control,
    #[error("contains a backslash (Windows separators could leave the pack)")]
    Backslash,
    #[error("is an absolute path")]
    Absolute,
    #[error("starts with a drive letter")]
    Drive,
    #[error("contains `:` (drive letters and alternate streams are refused)")]
    Colon,
    #[error("contains `..` (zip-slip: it would leave the pack)")]
    Parent,
    #[error("has a path component over 255 bytes")]
    LongComponent,
    #[error("names no file")]
    NoFile,
    #[error("is nested deeper than {0} directories")]
    TooDeep(usize),
}

impl EntryNameError {
    /// A short machine-readable kind, for `--json` output and tests.
    pub fn kind(&self) -> &'static str {
        match self {
            EntryNameError::Empty => "empty",
            EntryNameError::TooLong(_) => "too-long",
            EntryNameError::Control => "control",
            EntryNameError::Backslash => "backslash",
            EntryNameError::Absolute => "absolute",
            EntryNameError::Drive => "drive",
            EntryNameError::Colon => "colon",
            EntryNameError::Parent => "parent",
            EntryNameError::LongComponent => "long-component",
            EntryNameError::NoFile => "no-file",
            EntryNameError::TooDeep(_) => "too-deep",
        }
    }
}

/// Checks a stored path (as written in an archive, or found in a pack) and returns its normal form:
/// components joined by `/`, without `.` or empty components. Stricter than [`check_relative`]:
/// what it accepts is a safe relative path on every platform apiary writes to.
pub fn normal_entry_name(
    name: &str,
    max_len: usize,
    max_depth: usize,
) -> Result<String, EntryNameError> {
    use EntryNameError as E;
    if name.is_empty() {
        return Err(E::Empty);
    }
    if name.len() > max_len {
        return Err(E::TooLong(max_len));
    }
    if name.chars().any(|c| c == '\0' || c.is_control()) {
        return Err(E::Control);
    }
    if name.contains('\\') {
        return Err(E::Backslash);
    }
    if name.starts_with('/') {
        return Err(E::Absolute);
    }
    let b = name.as_bytes();
    if b.len() >= 2 && b[0].is_ascii_alphabetic() && b[1] == b':' {
        return Err(E::Drive);
    }
    if name.contains(':') {
        return Err(E::Colon);
    }
    let mut parts = Vec::new();
    for part in name.split('/') {
        match part {
            "" | "." => {}
            ".." => return Err(E::Parent),
            p if p.len() > 255 => return Err(E::LongComponent),
            p => parts.push(p),
        }
    }
    if parts.is_empty() {
        return Err(E::NoFile);
    }
    if parts.len() > max_depth {
        return Err(E::TooDeep(max_depth));
    }
    Ok(parts.join("/"))
}

/// Checks the shape of a pack-relative path without touching the filesystem.
pub fn check_relative(rel: &str) -> Result<&Path, PathError> {
    if rel.trim().is_empty() {
        return Err(PathError::Empty);
    }
    let bytes = rel.as_bytes();
    let drive = bytes.len() >= 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':';
    if rel.starts_with(['/', '\\']) || drive || rel.contains('\0') {
        return Err(PathError::Absolute(rel.to_string()));
    }
    let path = Path::new(rel);
    for c in path.components() {
        match c {
            Component::ParentDir => return Err(PathError::Parent(rel.to_string())),
            Component::RootDir | Component::Prefix(_) => {
                return Err(PathError::Absolute(rel.to_string()));
            }
            _ => {}
        }
    }
    if rel.split(['/', '\\']).any(|part| part == "..") {
        return Err(PathError::Parent(rel.to_string()));
    }
    Ok(path)
}

/// Resolves `rel` under the canonical pack `root`; the result exists and is inside the root.
pub fn resolve_inside(root: &Path, rel: &str) -> Result<PathBuf, PathError> {
    resolve(root, rel, &mut CheckedDirs::default()).map(|r| r.path)
}

/// A path resolved inside the pack, with what the resolution already learnt about it, so callers
/// need no second `stat`.
#[derive(Debug, Clone)]
pub struct Resolved {
    pub path: PathBuf,
    pub is_file: bool,
    pub is_dir: bool,
    /// Size in bytes (a capacity hint only: the file may change before it is read).
    pub len: u64,
}

/// Directories already found to be real directories (not links) during one load, so a pack with
/// hundreds of `agents/*.persona.md` checks `agents/` once. Scope one to a single load: the
/// filesystem may change between loads.
#[derive(Debug, Default)]
pub struct CheckedDirs(std::collections::HashSet<PathBuf>);

/// [`resolve_inside`], remembering checked directories in `checked`.
pub fn resolve(root: &Path, rel: &str, checked: &mut CheckedDirs) -> Result<Resolved, PathError> {
    let path = check_relative(rel)?;
    let parts = normal_parts(path);
    let plain = match parts.split_last() {
        // `check_relative` refused empty paths, but `.` alone names the root itself.
        None => Some(root.to_path_buf()),
        Some((last, dirs)) => walk_dirs(root, dirs, checked, rel)?.map(|mut plain| {
            plain.push(last);
            plain
        }),
    };
    let plain = match plain {
        Some(p) => p,
        None => return resolve_canonical(root, rel, path),
    };
    match std::fs::symlink_metadata(&plain) {
        Ok(meta) if meta.file_type().is_symlink() => resolve_canonical(root, rel, path),
        Ok(meta) => Ok(Resolved::of(plain, &meta)),
        Err(_) => Err(PathError::NotFound(rel.to_string())),
    }
}

/// The slow path, for a path through a link: canonicalised, checked to stay inside, then stat'ed.
fn resolve_canonical(root: &Path, rel: &str, path: &Path) -> Result<Resolved, PathError> {
    let canonical = canonical_inside(root, rel, path)?;
    let meta = std::fs::metadata(&canonical).map_err(|_| PathError::NotFound(rel.to_string()))?;
    Ok(Resolved::of(canonical, &meta))
}

impl Resolved {
    fn of(path: PathBuf, meta: &std::fs::Metadata) -> Resolved {
        Resolved {
            path,
            is_file: meta.is_file(),
            is_dir: meta.is_dir(),
            len: meta.len(),
        }
    }
}

/// The components of a checked relative path that name something (`.` dropped).
fn normal_parts(path: &Path) -> Vec<&std::ffi::OsStr> {
    path.components()
        .filter_map(|c| match c {
            Component::Normal(part) => Some(part),
            _ => None,
        })
        .collect()
}

/// Walks the directories `dirs` under `root`, one `lstat` each unless `checked` already knows it.
/// When none is a link, the root plus the components is already the canonical path (no `..` can
/// appear), returned for the caller to extend; `None` when one is a link, so the caller pays for
/// full canonicalisation only then.
fn walk_dirs(
    root: &Path,
    dirs: &[&std::ffi::OsStr],
    checked: &mut CheckedDirs,
    rel: &str,
) -> Result<Option<PathBuf>, PathError> {
    let mut plain = root.to_path_buf();
    for part in dirs {
        plain.push(part);
        if checked.0.contains(&plain) {
            continue;
        }
        match std::fs::symlink_metadata(&plain) {
            Ok(meta) if meta.is_dir() => {
                checked.0.insert(plain.clone());
            }
            Ok(meta) if meta.file_type().is_symlink() => return Ok(None),
            _ => return Err(PathError::NotFound(rel.to_string())),
        }
    }
    Ok(Some(plain))
}

/// What [`open`] found at a pack path.
#[derive(Debug)]
pub enum Opened {
    /// A regular file, open for reading; `len` is its size when opened (a capacity hint only).
    File {
        path: PathBuf,
        file: std::fs::File,
        len: u64,
    },
    /// Something other than a regular file (a directory, a FIFO, …); never read.
    NotAFile,
}

/// [`resolve`] and open in one, for files about to be read. The last component is opened without
/// following a link and without blocking (a FIFO), then checked through the open handle: the file
/// read is the file checked, and a link swapped in after the check is refused rather than followed.
/// A link as the last component takes the canonicalising path, like [`resolve`].
pub fn open(root: &Path, rel: &str, checked: &mut CheckedDirs) -> Result<Opened, PathError> {
    let path = check_relative(rel)?;
    let parts = normal_parts(path);
    // `.` alone names the root: a directory.
    let Some((last, dirs)) = parts.split_last() else {
        return Ok(Opened::NotAFile);
    };
    let Some(mut plain) = walk_dirs(root, dirs, checked, rel)? else {
        return open_checked(canonical_inside(root, rel, path)?, rel);
    };
    plain.push(last);
    match open_unless_link(&plain) {
        Ok(Some(file)) => opened(plain, file, rel),
        Ok(None) => open_checked(canonical_inside(root, rel, path)?, rel),
        Err(_) => Err(PathError::NotFound(rel.to_string())),
    }
}

/// Opens a canonical path found inside the root; a link put in its place since is refused.
fn open_checked(path: PathBuf, rel: &str) -> Result<Opened, PathError> {
    match open_unless_link(&path) {
        Ok(Some(file)) => opened(path, file, rel),
        Ok(None) | Err(_) => Err(PathError::NotFound(rel.to_string())),
    }
}

fn opened(path: PathBuf, file: std::fs::File, rel: &str) -> Result<Opened, PathError> {
    let meta = file
        .metadata()
        .map_err(|_| PathError::NotFound(rel.to_string()))?;
    Ok(if meta.is_file() {
        Opened::File {
            path,
            file,
            len: meta.len(),
        }
    } else {
        Opened::NotAFile
    })
}

/// Opens `path` for reading, or `None` when its last component is a symbolic link. Never blocks
/// on a FIFO.
fn open_unless_link(path: &Path) -> std::io::Result<Option<std::fs::File>> {
    use crate::safe_fs::{FinalLink, open_nonblocking};
    match open_nonblocking(path, FinalLink::Refuse) {
        Ok(file) => Ok(Some(file)),
        // `O_NOFOLLOW` on a link.
        #[cfg(unix)]
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => Ok(None),
        #[cfg(not(unix))]
        Err(_) if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) => {
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

fn canonical_inside(root: &Path, rel: &str, path: &Path) -> Result<PathBuf, PathError> {
    let joined = root.join(path);
    let canonical = match joined.canonicalize() {
        Ok(c) => c,
        // A dangling symlink is missing too: nothing can be read through it.
        Err(_) => return Err(PathError::NotFound(rel.to_string())),
    };
    if !canonical.starts_with(root) {
        return Err(PathError::Escape(rel.to_string(), canonical));
    }
    Ok(canonical)
}

/// `root`-relative display form of a path inside the pack.
pub fn relative_to(root: &Path, path: &Path) -> PathBuf {
    path.strip_prefix(root)
        .map(Path::to_path_buf)
        .unwrap_or_else(|_| path.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tempfile::TempDir;

    #[test]
    fn refuses_absolute_and_parent_paths() {
        assert!(matches!(
            check_relative("/etc/passwd"),
            Err(PathError::Absolute(_))
        ));
        assert!(matches!(
            check_relative("C:\\x"),
            Err(PathError::Absolute(_))
        ));
        assert!(matches!(
            check_relative("\\\\server\\x"),
            Err(PathError::Absolute(_))
        ));
        assert!(matches!(
            check_relative("agents/../../x"),
            Err(PathError::Parent(_))
        ));
        assert!(matches!(
            check_relative("agents\\..\\x"),
            Err(PathError::Parent(_))
        ));
        assert!(matches!(check_relative(""), Err(PathError::Empty)));
        assert!(check_relative("./agents/a.persona.md").is_ok());
    }

    /// A directory outside the pack holding `secret_name`, and an empty pack (its canonical root).
    fn outside_and_pack(secret_name: &str) -> (TempDir, TempDir, PathBuf) {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join(secret_name), "x").unwrap();
        let pack = tempfile::tempdir().unwrap();
        let root = pack.path().canonicalize().unwrap();
        (outside, pack, root)
    }

    #[test]
    fn symlink_out_of_the_pack_is_an_escape() {
        let (outside, _pack, root) = outside_and_pack("secret");
        std::os::unix::fs::symlink(outside.path().join("secret"), root.join("link")).unwrap();
        assert!(matches!(
            resolve_inside(&root, "link"),
            Err(PathError::Escape(..))
        ));
        assert!(matches!(
            resolve_inside(&root, "missing"),
            Err(PathError::NotFound(_))
        ));
    }

    #[test]
    fn remembered_directories_do_not_hide_a_link_further_down() {
        let (outside, _pack, root) = outside_and_pack("secret.persona.md");
        std::fs::create_dir(root.join("agents")).unwrap();
        std::fs::write(root.join("agents/a.persona.md"), "a").unwrap();
        std::os::unix::fs::symlink(outside.path(), root.join("agents/out")).unwrap();
        let mut checked = CheckedDirs::default();
        let a = resolve(&root, "agents/a.persona.md", &mut checked).unwrap();
        assert!(a.is_file && !a.is_dir && a.len == 1);
        assert!(matches!(
            resolve(&root, "agents/out/secret.persona.md", &mut checked),
            Err(PathError::Escape(..))
        ));
        assert!(resolve(&root, "agents", &mut checked).unwrap().is_dir);
    }

    #[test]
    fn open_reads_only_regular_files_inside_the_pack() {
        let (outside, _pack, root) = outside_and_pack("secret.md");
        std::fs::create_dir(root.join("agents")).unwrap();
        std::fs::write(root.join("agents/a.persona.md"), "abc").unwrap();
        std::os::unix::fs::symlink("a.persona.md", root.join("agents/alias.md")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret.md"), root.join("agents/out.md"))
            .unwrap();
        std::os::unix::fs::symlink(outside.path(), root.join("elsewhere")).unwrap();
        let fifo = std::ffi::CString::new(
            root.join("agents/pipe.md")
                .into_os_string()
                .into_encoded_bytes(),
        )
        .unwrap();
        // SAFETY: a valid NUL-terminated path; mkfifo only creates a node.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        let mut checked = CheckedDirs::default();
        let mut open = |rel: &str| open(&root, rel, &mut checked);

        match open("agents/a.persona.md").unwrap() {
            Opened::File { path, len, .. } => {
                assert_eq!(path, root.join("agents/a.persona.md"));
                assert_eq!(len, 3);
            }
            other => panic!("{other:?}"),
        }
        // A link inside the pack is followed to its canonical target.
        match open("agents/alias.md").unwrap() {
            Opened::File { path, .. } => assert_eq!(path, root.join("agents/a.persona.md")),
            other => panic!("{other:?}"),
        }
        assert!(matches!(open("agents/out.md"), Err(PathError::Escape(..))));
        assert!(matches!(
            open("elsewhere/secret.md"),
            Err(PathError::Escape(..))
        ));
        // Neither is read, and opening the FIFO does not wait for a writer.
        assert!(matches!(open("agents"), Ok(Opened::NotAFile)));
        assert!(matches!(open("agents/pipe.md"), Ok(Opened::NotAFile)));
        assert!(matches!(
            open("agents/none.md"),
            Err(PathError::NotFound(_))
        ));
        assert!(matches!(
            open("agents/a.persona.md/x"),
            Err(PathError::NotFound(_))
        ));
        assert!(matches!(open("../x"), Err(PathError::Parent(_))));
    }
}
