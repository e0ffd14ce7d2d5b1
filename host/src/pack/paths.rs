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
    let path = check_relative(rel)?;
    // Common case, one `lstat` per component: when no component is a symbolic link, the root
    // plus the components is already the canonical path (no `..` can appear, see above).
    // Only a path through a link pays for full canonicalisation.
    let mut plain = root.to_path_buf();
    for component in path.components() {
        let Component::Normal(part) = component else {
            continue;
        };
        plain.push(part);
        match std::fs::symlink_metadata(&plain) {
            Ok(meta) if meta.file_type().is_symlink() => return canonical_inside(root, rel, path),
            Ok(_) => {}
            Err(_) => return Err(PathError::NotFound(rel.to_string())),
        }
    }
    Ok(plain)
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

    #[test]
    fn symlink_out_of_the_pack_is_an_escape() {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "x").unwrap();
        let pack = tempfile::tempdir().unwrap();
        let root = pack.path().canonicalize().unwrap();
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
}
