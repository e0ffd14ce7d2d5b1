//! `apiary pack build`: a validated pack directory into a reproducible `.buzzpack` plus its
//! `sha256sum`-format checksum file.
//!
//! What ships is decided by [`collect`], which `install` also uses for git checkouts, so a pack
//! installed from git holds exactly what a build of the same tree would:
//! - skipped: VCS metadata (`.git` folders and `.git` files, `.hg`, `.svn`, ..., in any case), agent working state (`.agents`, `.goose`,
//!   `.claude`, `.codex`, `.cursor`), editor and OS litter, build artefacts (`target`,
//!   `node_modules`, `__pycache__`, `.venv`, earlier `*.buzzpack` files), `pack.lock` at the root
//!   (it describes one machine's installs) and apiary's own install record;
//! - refused with an error naming every match: files that look like secrets (`.env` and
//!   `.env.*` other than `.example`/`.sample`/`.template`, private keys and certificates stores,
//!   `.netrc`, `.npmrc`, `.pypirc`, credentials files, any file containing a PEM private key);
//! - refused: symbolic links and special files (an archive cannot carry them safely), and a
//!   directory laid out as a git repository under another name (`HEAD` with `objects/` and
//!   `refs/`): git would read its config when a shell prompt looks at it.
//!
//! The archive is named `<pack-name>-<version>.buzzpack`, where `<pack-name>` is the last
//! dot-separated segment of the manifest `id` (`com.hivepack.ship-squad` -> `ship-squad`), lower-cased
//! with anything outside `[a-z0-9._-]` turned into `-`. The manifest `name` is a human title and is
//! not used for file names.

use crate::dist::code;
use std::fs;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::archive::{self, Limits, RECORD_NAME};
use super::{DistError, Result};
use crate::pack;

/// Skipped besides version-control metadata ([`archive::is_vcs_name`]: `.git` as a directory or a
/// file, `.hg`, `.svn`, ... in any case), which `install` refuses in an archive.
const SKIP_DIRS: &[&str] = &[
    // agent working state
    ".agents",
    ".goose",
    ".claude",
    ".codex",
    ".cursor",
    ".aider",
    // apiary's own state
    ".apiary",
    // build artefacts, caches, environments
    "target",
    "node_modules",
    "__pycache__",
    ".venv",
    ".mypy_cache",
    ".pytest_cache",
    ".ruff_cache",
    ".cache",
    // editor state
    ".idea",
    ".vscode",
];

const SKIP_FILES: &[&str] = &[".DS_Store", "Thumbs.db", "desktop.ini", RECORD_NAME];
const SKIP_SUFFIXES: &[&str] = &[
    ".buzzpack",
    ".buzzpack.sha256",
    ".pyc",
    ".swp",
    ".swo",
    "~",
    ".tmp",
];

const SECRET_NAMES: &[&str] = &[
    ".env",
    ".netrc",
    ".npmrc",
    ".pypirc",
    ".git-credentials",
    ".htpasswd",
    ".pgpass",
    "credentials.json",
    "credentials",
    "secrets.json",
    "secrets.yaml",
    "secrets.yml",
    "secrets.toml",
    "id_rsa",
    "id_dsa",
    "id_ecdsa",
    "id_ed25519",
];
const SECRET_SUFFIXES: &[&str] = &[
    ".pem",
    ".key",
    ".p12",
    ".pfx",
    ".jks",
    ".keystore",
    ".ppk",
    ".gpg",
];
const ENV_TEMPLATES: &[&str] = &[".example", ".sample", ".template", ".dist", ".defaults"];

/// Why a file was refused as a likely secret.
fn secret_reason(name: &str) -> Option<&'static str> {
    let lower = name.to_ascii_lowercase();
    if SECRET_NAMES.contains(&lower.as_str()) {
        return Some("a credentials file");
    }
    if let Some(rest) = lower.strip_prefix(".env.")
        && !ENV_TEMPLATES.iter().any(|t| rest.ends_with(&t[1..]))
    {
        return Some("an environment file");
    }
    if lower.ends_with(".env") && lower != ".env" {
        return Some("an environment file");
    }
    if SECRET_SUFFIXES.iter().any(|s| lower.ends_with(s)) {
        return Some("a key or certificate store");
    }
    None
}

fn skipped_file(name: &str, rel: &str) -> bool {
    SKIP_FILES.contains(&name)
        || SKIP_SUFFIXES.iter().any(|s| name.ends_with(s))
        || rel == "pack.lock"
}

/// A private key pasted into any shipped file.
fn contains_private_key(bytes: &[u8]) -> bool {
    let needle = b"PRIVATE KEY-----";
    bytes.windows(needle.len()).any(|w| w == needle)
        && bytes.windows(11).any(|w| w == b"-----BEGIN ")
}

/// The files of the pack at `root` that ship, as sorted `/`-separated relative paths. Refuses
/// secrets, symlinks, special files and anything over the archive limits.
pub fn collect(root: &Path, limits: &Limits) -> Result<Vec<String>> {
    let mut walk = Walk {
        root,
        limits,
        files: Vec::new(),
        secrets: Vec::new(),
        total: 0,
    };
    walk.dir("")?;
    let Walk {
        mut files, secrets, ..
    } = walk;
    if !secrets.is_empty() {
        let list = secrets
            .iter()
            .map(|(p, why)| format!("  {p} ({why})"))
            .collect::<Vec<_>>()
            .join("\n");
        return Err(DistError::new(
            code::Build::Secret,
            format!(
                "refusing to package {} file{} that look{} like secrets:\n{list}",
                secrets.len(),
                if secrets.len() == 1 { "" } else { "s" },
                if secrets.len() == 1 { "s" } else { "" },
            ),
        )
        .help("remove them from the pack directory; reference secrets as ${VAR_NAME} in env blocks (spec §13). A template such as .env.example is fine"));
    }
    files.sort();
    let dirs: std::collections::BTreeSet<String> = files
        .iter()
        .flat_map(|f| {
            f.match_indices('/')
                .map(|(i, _)| f[..i].to_string())
                .collect::<Vec<_>>()
        })
        .collect();
    if let Some(repo) = archive::embedded_git_dir(&files, &dirs) {
        return Err(DistError::new(
            code::Build::Vcs,
            format!("`{repo}` in {} is laid out as a git repository (HEAD with objects/ and refs/, or commondir); a pack may not carry one: git would read its config when a shell looks at that directory", root.display()),
        )
        .help("remove that directory from the pack (keep test repositories outside it)"));
    }
    Ok(files)
}

/// A walk of a pack directory for [`collect`].
struct Walk<'a> {
    root: &'a Path,
    limits: &'a Limits,
    files: Vec<String>,
    /// Files refused as likely secrets, and why (all of them are named at the end).
    secrets: Vec<(String, &'static str)>,
    /// Bytes of the files kept so far.
    total: u64,
}

impl Walk<'_> {
    /// The directory `rel` (`""`: the root), its entries in name order.
    fn dir(&mut self, rel: &str) -> Result<()> {
        let dir = if rel.is_empty() {
            self.root.to_path_buf()
        } else {
            self.root.join(rel)
        };
        for name in sorted_names(&dir)? {
            let child_rel = if rel.is_empty() {
                name.clone()
            } else {
                format!("{rel}/{name}")
            };
            let path = self.root.join(&child_rel);
            let meta =
                fs::symlink_metadata(&path).map_err(|e| DistError::io("cannot stat", &path, e))?;
            // `.git` may also be a file pointing at a repository elsewhere (worktrees, submodules).
            if archive::is_vcs_name(&name) {
                continue;
            }
            if meta.is_dir() {
                if !SKIP_DIRS.contains(&name.as_str()) {
                    self.dir(&child_rel)?;
                }
                continue;
            }
            self.file(child_rel, &name, &path, &meta)?;
        }
        Ok(())
    }

    /// One entry that is not a directory: skipped, refused, set aside as a secret, or kept.
    fn file(&mut self, rel: String, name: &str, path: &Path, meta: &fs::Metadata) -> Result<()> {
        if skipped_file(name, &rel) {
            return Ok(());
        }
        if let Some(why) = secret_reason(name) {
            self.secrets.push((rel, why));
            return Ok(());
        }
        let ft = meta.file_type();
        if ft.is_symlink() {
            return Err(DistError::new(
                code::Build::Symlink,
                format!("{rel} is a symbolic link; a pack may only contain regular files"),
            )
            .help("replace the link with a copy of the file it points to"));
        }
        if !ft.is_file() {
            return Err(DistError::new(
                code::Build::Special,
                format!("{rel} is not a regular file"),
            ));
        }
        archive::check_entry_name(&rel, self.limits).map_err(|e| {
            DistError::new(
                code::Build::Name,
                format!("{rel}: cannot be packaged: {}", e.message),
            )
        })?;
        let size = meta.len();
        self.count(&rel, size)?;
        if size <= 4 * 1024 * 1024 {
            let bytes = fs::read(path).map_err(|e| DistError::io("cannot read", path, e))?;
            if contains_private_key(&bytes) {
                self.secrets.push((rel, "contains a private key"));
                return Ok(());
            }
        }
        self.files.push(rel);
        Ok(())
    }

    /// Counts a file of `size` bytes against the limits an installer applies.
    fn count(&mut self, rel: &str, size: u64) -> Result<()> {
        let limits = self.limits;
        if size > limits.max_file_bytes {
            return Err(DistError::new(
                code::Build::FileSize,
                format!(
                    "{rel} is {size} bytes; installers refuse files over {} bytes",
                    limits.max_file_bytes
                ),
            ));
        }
        self.total += size;
        if self.total > limits.max_total_bytes || self.files.len() >= limits.max_entries {
            return Err(DistError::new(
                code::Build::TooLarge,
                format!(
                    "the pack is over the install limits ({} files, {} bytes)",
                    limits.max_entries, limits.max_total_bytes
                ),
            ));
        }
        Ok(())
    }
}

/// The names in `dir`, sorted; a name that is not UTF-8 is refused.
fn sorted_names(dir: &Path) -> Result<Vec<String>> {
    let entries = fs::read_dir(dir).map_err(|e| DistError::io("cannot read", dir, e))?;
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| DistError::io("cannot read", dir, e))?;
        names.push(entry.file_name());
    }
    names.sort();
    names
        .into_iter()
        .map(|name| {
            name.to_str().map(str::to_string).ok_or_else(|| {
                DistError::new(
                    code::Build::Name,
                    format!("{}: a file name is not UTF-8", dir.join(&name).display()),
                )
            })
        })
        .collect()
}

/// A file-name-safe form of `s`.
pub fn slug(s: &str) -> String {
    let mut out: String = s
        .chars()
        .map(|c| {
            let c = c.to_ascii_lowercase();
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '-'
            }
        })
        .collect();
    while out.starts_with(['.', '-']) {
        out.remove(0);
    }
    if out.is_empty() {
        out.push_str("pack");
    }
    out
}

/// `<pack-name>` for an id: its last dot-separated segment, slugged.
pub fn pack_name(id: &str) -> String {
    slug(id.rsplit('.').find(|s| !s.is_empty()).unwrap_or(id))
}

/// `<pack-name>-<version>.buzzpack`.
pub fn archive_name(id: &str, version: &str) -> String {
    format!("{}-{}.buzzpack", pack_name(id), slug(version))
}

/// What a build produced.
#[derive(Debug, Clone, Serialize)]
pub struct Built {
    pub pack_id: String,
    pub version: String,
    pub archive: PathBuf,
    pub checksum_file: PathBuf,
    pub sha256: String,
    pub files: usize,
    pub bytes: u64,
}

/// The validation report is returned with the error when the pack is invalid.
pub fn build(dir: &Path, output: Option<&Path>) -> Result<(Built, crate::diag::Report)> {
    let loaded = pack::load(dir);
    let report = loaded.report;
    let Some(pack) = loaded.pack else {
        return Err(DistError::new(
            code::Pack::Invalid,
            format!(
                "{} is not a valid pack; fix the errors above and build again",
                dir.display()
            ),
        )
        .with_report(report));
    };
    let limits = Limits::default();
    let files = collect(&pack.root, &limits)?;
    let name = archive_name(&pack.manifest.id, &pack.manifest.version);
    let out = Output::at(output, &name)?;
    let (sha256, bytes, checksum_file) = write_archive(&pack.root, &files, &out)?;
    Ok((
        Built {
            pack_id: pack.manifest.id.clone(),
            version: pack.manifest.version.clone(),
            archive: out.path,
            checksum_file,
            sha256,
            files: files.len(),
            bytes,
        },
        report,
    ))
}

/// Where a build writes its archive.
struct Output {
    path: PathBuf,
    /// Its file name, as the checksum file names it.
    file_name: String,
    dir: PathBuf,
}

impl Output {
    /// `output` (a directory gets `name` in it), else `name` in the working directory.
    fn at(output: Option<&Path>, name: &str) -> Result<Output> {
        let path = match output {
            Some(p) if p.is_dir() => p.join(name),
            Some(p) => p.to_path_buf(),
            None => PathBuf::from(name),
        };
        let file_name = path
            .file_name()
            .and_then(|n| n.to_str())
            .filter(|n| !n.contains(char::is_whitespace))
            .ok_or_else(|| {
                DistError::new(
                    code::Build::Output,
                    format!(
                        "{}: the output needs a file name without spaces",
                        path.display()
                    ),
                )
            })?
            .to_string();
        let dir = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        if !dir.is_dir() {
            return Err(DistError::new(
                code::Build::Output,
                format!("output directory {} does not exist", dir.display()),
            ));
        }
        let checksum = PathBuf::from(format!("{}.sha256", path.display()));
        for existing in [&path, &checksum] {
            refuse_special(existing)?;
        }
        Ok(Output {
            path,
            file_name,
            dir,
        })
    }
}

/// An output path that exists must be a regular file to be replaced: a FIFO, a device, a socket
/// or a link there is something else the operator keeps, not an old archive.
fn refuse_special(path: &Path) -> Result<()> {
    let Ok(meta) = fs::symlink_metadata(path) else {
        return Ok(());
    };
    if meta.is_file() {
        return Ok(());
    }
    let what = crate::safe_fs::kind_name(&meta.file_type());
    Err(DistError::new(
        code::Build::Output,
        format!(
            "{} exists and is {what}, not an archive: remove it or choose another --output",
            path.display()
        ),
    ))
}

/// Writes the archive of `files` beside `out` and renames it into place (so a failed build never
/// leaves half an archive), then its checksum file. Returns the digest, the size and the checksum
/// file.
fn write_archive(root: &Path, files: &[String], out: &Output) -> Result<(String, u64, PathBuf)> {
    let tmp = tempfile::Builder::new()
        .prefix(".buzzpack-")
        .tempfile_in(&out.dir)
        .map_err(|e| DistError::io("cannot create a temporary file in", &out.dir, e))?;
    archive::write(tmp.path(), root, files)?;
    let sha256 =
        super::sha256_file(tmp.path()).map_err(|e| DistError::io("cannot read", tmp.path(), e))?;
    let bytes = fs::metadata(tmp.path()).map(|m| m.len()).unwrap_or(0);
    archive::set_mode(tmp.path(), 0o644)?;
    tmp.persist(&out.path)
        .map_err(|e| DistError::io("cannot write", &out.path, e.error))?;
    let checksum_file = PathBuf::from(format!("{}.sha256", out.path.display()));
    super::write_atomic(
        &checksum_file,
        &out.dir,
        format!("{sha256}  {}\n", out.file_name).as_bytes(),
    )
    .map_err(|e| DistError::io("cannot write", &checksum_file, e))?;
    Ok((sha256, bytes, checksum_file))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(
            archive_name("com.hivepack.ship-squad", "0.1.0"),
            "ship-squad-0.1.0.buzzpack"
        );
        assert_eq!(
            archive_name("My Pack", "1.0.0+b/1"),
            "my-pack-1.0.0-b-1.buzzpack"
        );
        assert_eq!(pack_name("..."), "pack");
    }

    #[test]
    fn secrets() {
        for s in [
            ".env",
            ".env.local",
            "prod.env",
            "id_rsa",
            "server.pem",
            "x.key",
            ".npmrc",
        ] {
            assert!(secret_reason(s).is_some(), "{s}");
        }
        for s in [
            ".env.example",
            "README.md",
            "keys.md",
            "hooks.json",
            ".envrc.md",
        ] {
            assert!(secret_reason(s).is_none(), "{s}");
        }
        assert!(contains_private_key(
            b"x\n-----BEGIN OPENSSH PRIVATE KEY-----\nabc"
        ));
    }
}
