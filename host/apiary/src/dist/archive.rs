//! `.buzzpack` archives: reproducible writing, and fenced extraction of untrusted ones.
//!
//! Writing: entries in byte order of their paths, files only (directories are implied), deflate at a
//! fixed level, timestamp 1980-01-01 00:00:00, Unix mode 0644, no extra fields: the same files give
//! the same bytes.
//!
//! Reading is a fence. Before a single byte is decompressed, the central directory is checked as a
//! whole: entry count, declared total size, per-entry size and compression ratio, names (no `..`,
//! absolute paths, drive letters, backslashes, NUL or control characters), version-control metadata
//! (`.git` as a directory or a file, `.hg`, `.svn`, ... in any case, or a directory laid out as a
//! git repository: git runs commands a repository's config names), entry types (no symlinks,
//! devices, FIFOs, sockets, encryption), duplicates (also after normalisation and case folding) and
//! file/directory clashes. Extraction then counts real bytes, so an entry that lies about its size
//! is stopped at the declared size, and every file is created fresh (`create_new`) under the
//! staging directory with mode 0644: nothing lands executable, nothing is followed.

use crate::dist::code;
use std::collections::{BTreeSet, HashSet};
use std::fs::{self, File, OpenOptions};
use std::io::{BufReader, Read, Seek, SeekFrom, Write};
use std::path::Path;

use sha2::{Digest, Sha256};
use zip::write::SimpleFileOptions;
use zip::{CompressionMethod, DateTime, ZipArchive, ZipWriter};

use super::{DistError, Result, hex};
use crate::pack::paths::normal_entry_name;

/// The name of the install record inside an installed pack; archives may not contain it.
pub const RECORD_NAME: &str = ".apiary-install.json";

/// Caps applied to every archive (and to every build, so anything built can be installed).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Size of the `.buzzpack` file itself (also the download cap).
    pub max_archive_bytes: u64,
    pub max_entries: usize,
    pub max_total_bytes: u64,
    pub max_file_bytes: u64,
    /// Uncompressed/compressed, checked for entries of at least `ratio_floor_bytes`.
    pub max_ratio: u64,
    pub ratio_floor_bytes: u64,
    pub max_path_len: usize,
    pub max_depth: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_archive_bytes: 128 * 1024 * 1024,
            max_entries: 10_000,
            max_total_bytes: 256 * 1024 * 1024,
            max_file_bytes: 64 * 1024 * 1024,
            max_ratio: 100,
            ratio_floor_bytes: 1024 * 1024,
            max_path_len: 1024,
            max_depth: 32,
        }
    }
}

fn mib(n: u64) -> String {
    format!("{} MiB", n / (1024 * 1024))
}

/// One extracted (or packaged) file: its pack-relative path with `/` separators, size and digest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileDigest {
    pub path: String,
    pub size: u64,
    pub sha256: String,
}

/// Checks a path as written in an archive (or found in a pack) and returns its normal form:
/// components joined by `/`, without `.` or empty components.
pub fn check_entry_name(name: &str, limits: &Limits) -> Result<String> {
    let refuse = |why: &str| {
        DistError::new(
            code::Archive::Path,
            format!("archive entry `{}` {why}", name.escape_debug()),
        )
        .help("a .buzzpack may only contain relative paths inside the pack; rebuild it with `apiary pack build`")
    };
    let normal = normal_entry_name(name, limits.max_path_len, limits.max_depth)
        .map_err(|why| refuse(&why.to_string()))?;
    if normal == RECORD_NAME {
        return Err(refuse("uses a name apiary reserves for its install record"));
    }
    Ok(normal)
}

/// Version-control metadata, as names fold on a case-insensitive filesystem (see [`fold_name`]).
/// Git (and Mercurial, Jujutsu, darcs, Fossil) run commands that a repository's own config names,
/// and shells run git whenever a prompt shows the branch: a pack must never bring one along.
/// `git~1` is the Windows short name of `.git`.
const VCS_NAMES: &[&str] = &[
    ".git",
    "git~1",
    ".hg",
    ".svn",
    ".bzr",
    ".jj",
    "_darcs",
    ".pijul",
    ".fslckout",
    "_fossil_",
];

/// How a case-insensitive filesystem may see `name`: without the code points HFS+ ignores,
/// without the trailing dots and spaces Windows drops, lower-cased (`.GIT`, `.git.`, `.g\u{200c}it`
/// all open `.git` somewhere).
fn fold_name(name: &str) -> String {
    let kept: String = name
        .chars()
        .filter(|c| {
            !matches!(c,
                '\u{200c}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{206a}'..='\u{206f}' | '\u{feff}')
        })
        .collect();
    kept.trim_end_matches(['.', ' ']).to_lowercase()
}

/// Whether a file or directory called `name` is version-control metadata (`.git` as a directory,
/// or as a file pointing at one elsewhere, `.hg`, `.svn`, ... in any case).
pub fn is_vcs_name(name: &str) -> bool {
    VCS_NAMES.contains(&fold_name(name).as_str())
}

/// The first component of the `/`-separated `rel` that is version-control metadata.
pub fn vcs_component(rel: &str) -> Option<&str> {
    rel.split('/').find(|p| is_vcs_name(p))
}

/// A directory among `files` and `dirs` (pack-relative, `/`-separated) laid out as a git
/// repository under another name: `HEAD` beside `objects/` and `refs/`, or beside `commondir`.
/// Git treats such a directory as a bare repository when a shell prompt runs in it, and then
/// reads its `config`. Returns the directory (`.` for the pack root).
pub fn embedded_git_dir<'a>(
    files: impl IntoIterator<Item = &'a String>,
    dirs: impl IntoIterator<Item = &'a String>,
) -> Option<String> {
    let split = |p: &str| match p.rsplit_once('/') {
        Some((parent, name)) => (parent.to_string(), fold_name(name)),
        None => (String::new(), fold_name(p)),
    };
    let files: HashSet<(String, String)> = files.into_iter().map(|f| split(f)).collect();
    let dirs: HashSet<(String, String)> = dirs.into_iter().map(|d| split(d)).collect();
    let mut found: Vec<&String> = files
        .iter()
        .filter(|(parent, name)| {
            let has_dir = |d: &str| dirs.contains(&(parent.clone(), d.to_string()));
            name == "head"
                && ((has_dir("objects") && has_dir("refs"))
                    || files.contains(&(parent.clone(), "commondir".to_string())))
        })
        .map(|(parent, _)| parent)
        .collect();
    found.sort();
    found.first().map(|p| {
        if p.is_empty() {
            ".".to_string()
        } else {
            p.to_string()
        }
    })
}

/// Writes a reproducible archive of `files` (pack-relative, `/`-separated) read from `root`.
pub fn write(out: &Path, root: &Path, files: &[String]) -> Result<()> {
    let mut sorted: Vec<&String> = files.iter().collect();
    sorted.sort();
    sorted.dedup();
    let file = File::create(out).map_err(|e| DistError::io("cannot create", out, e))?;
    let mut zip = ZipWriter::new(file);
    let options = SimpleFileOptions::default()
        .compression_method(CompressionMethod::Deflated)
        .compression_level(Some(6))
        .last_modified_time(DateTime::default())
        .unix_permissions(0o644)
        .system(zip::System::Unix)
        .large_file(false);
    let zerr = |e: zip::result::ZipError| {
        DistError::new(
            code::Build::Write,
            format!("cannot write {}: {e}", out.display()),
        )
    };
    for rel in sorted {
        let path = root.join(rel);
        // Listed as a regular file: a link or FIFO swapped in since is refused, not followed.
        let bytes =
            crate::safe_fs::read_regular(&path, crate::safe_fs::FinalLink::Refuse, u64::MAX)
                .map_err(|e| DistError::io("cannot read", &path, e))?;
        zip.start_file(rel.as_str(), options).map_err(zerr)?;
        zip.write_all(&bytes)
            .map_err(|e| DistError::io("cannot write", out, e))?;
    }
    let file = zip.finish().map_err(zerr)?;
    file.sync_all()
        .map_err(|e| DistError::io("cannot sync", out, e))?;
    Ok(())
}

const S_IFMT: u32 = 0o170_000;
const S_IFREG: u32 = 0o100_000;
const S_IFDIR: u32 = 0o040_000;
const S_IFLNK: u32 = 0o120_000;

fn kind_refusal(name: &str, mode: u32) -> Option<&'static str> {
    match mode & S_IFMT {
        0 | S_IFREG | S_IFDIR => None,
        S_IFLNK => Some("is a symbolic link; symlink entries are refused"),
        0o020_000 => Some("is a character device; device entries are refused"),
        0o060_000 => Some("is a block device; device entries are refused"),
        0o010_000 => Some("is a FIFO; special files are refused"),
        0o140_000 => Some("is a socket; special files are refused"),
        _ => {
            let _ = name;
            Some("has an unknown file type; only regular files and directories are accepted")
        }
    }
}

fn damaged(label: &str, e: impl std::fmt::Display) -> DistError {
    DistError::new(
        code::Archive::Damaged,
        format!("{label} is not a readable .buzzpack (damaged or truncated zip): {e}"),
    )
}

/// Extracts `archive` into the empty directory `dest` behind the fence described in the module
/// docs. Returns every file with its digest, sorted by path. On error, `dest` may hold a partial
/// tree: the caller owns it and removes it.
pub fn extract(
    archive: &Path,
    label: &str,
    dest: &Path,
    limits: &Limits,
    progress: &indicatif::ProgressBar,
) -> Result<Vec<FileDigest>> {
    let (mut zip, len) = open_fenced(archive, label, limits)?;
    // Pass 1: the central directory as a whole, before decompressing anything.
    let plan = plan_entries(&mut zip, label, limits)?;
    plan.check_whole(label, len, limits)?;
    // Pass 2: extract, counting real bytes.
    write_entries(&mut zip, plan, label, dest, limits, progress)
}

type Zip = ZipArchive<BufReader<File>>;

/// Opens the archive after the checks that need no index of its entries (its size, the entry
/// count its end record declares), then the ones the index answers (duplicates, entry count).
/// Returns the reader and the archive's size.
fn open_fenced(archive: &Path, label: &str, limits: &Limits) -> Result<(Zip, u64)> {
    let too_many = |n: u64| {
        DistError::new(
            code::Archive::Entries,
            format!(
                "{label} has {n} entries; the limit is {}",
                limits.max_entries
            ),
        )
    };
    let mut file = File::open(archive).map_err(|e| DistError::io("cannot open", archive, e))?;
    let len = file
        .metadata()
        .map_err(|e| DistError::io("cannot stat", archive, e))?
        .len();
    if len > limits.max_archive_bytes {
        return Err(DistError::new(
            code::Archive::TooLarge,
            format!(
                "{label} is {len} bytes; the limit is {}",
                mib(limits.max_archive_bytes)
            ),
        ));
    }
    // Refuse a huge entry count from the end-of-central-directory record alone, before the zip
    // reader builds its index of every entry.
    if let Some(n) = declared_entries(&mut file, len)
        && n > limits.max_entries as u64
    {
        return Err(too_many(n));
    }
    file.seek(SeekFrom::Start(0))
        .map_err(|e| DistError::io("cannot read", archive, e))?;
    let zip = ZipArchive::new(BufReader::new(file)).map_err(|e| damaged(label, e))?;
    if zip.has_duplicate_names() {
        return Err(DistError::new(
            code::Archive::Duplicate,
            format!(
                "{label} has duplicate entry names; refusing an archive whose contents depend on which copy wins"
            ),
        ));
    }
    if zip.len() > limits.max_entries {
        return Err(too_many(zip.len() as u64));
    }
    Ok((zip, len))
}

/// One entry pass 1 accepted.
struct Planned {
    index: usize,
    normal: String,
    is_dir: bool,
    /// The uncompressed size its header declares.
    size: u64,
}

/// What pass 1 learnt from the central directory.
#[derive(Default)]
struct Plan {
    entries: Vec<Planned>,
    files: BTreeSet<String>,
    /// Directory entries and every parent of an entry.
    dirs: BTreeSet<String>,
    /// The declared uncompressed size of all files.
    total: u64,
}

/// Pass 1: every entry's name, type, method and size from the central directory, without
/// decompressing anything.
fn plan_entries(zip: &mut Zip, label: &str, limits: &Limits) -> Result<Plan> {
    let mut plan = Plan {
        entries: Vec::with_capacity(zip.len()),
        ..Plan::default()
    };
    let mut seen = HashSet::new();
    let mut seen_folded = HashSet::new();
    for index in 0..zip.len() {
        let entry = zip.by_index_raw(index).map_err(|e| damaged(label, e))?;
        let raw = entry.name().map_err(|e| damaged(label, e))?.into_owned();
        let normal = check_entry_name(&raw, limits)?;
        let refuse = |code: code::Archive, why: String| {
            DistError::new(
                code,
                format!("archive entry `{}` {why}", raw.escape_debug()),
            )
        };
        check_entry_kind(&entry, &raw, &normal, refuse)?;
        if !seen.insert(normal.clone()) || !seen_folded.insert(normal.to_lowercase()) {
            return Err(refuse(
                code::Archive::Duplicate,
                "appears twice (after normalising the path and ignoring case)".into(),
            ));
        }
        let is_dir = entry.is_dir();
        let size = entry.size();
        if is_dir {
            plan.dirs.insert(normal.clone());
        } else {
            check_entry_size(size, entry.compressed_size(), limits, refuse)?;
            plan.total = plan.total.saturating_add(size);
            if plan.total > limits.max_total_bytes {
                return Err(DistError::new(
                    code::Archive::TotalSize,
                    format!(
                        "{label} unpacks to more than {} (zip bomb?); refusing",
                        mib(limits.max_total_bytes)
                    ),
                ));
            }
            plan.files.insert(normal.clone());
        }
        // Every parent of this entry is a directory.
        let mut parent = normal.as_str();
        while let Some((p, _)) = parent.rsplit_once('/') {
            plan.dirs.insert(p.to_string());
            parent = p;
        }
        plan.entries.push(Planned {
            index,
            normal,
            is_dir,
            size,
        });
    }
    Ok(plan)
}

/// An entry's type and method: no encryption, links, devices or other special files, only
/// stored and deflate, no version-control metadata.
fn check_entry_kind(
    entry: &zip::read::ZipFile<'_, BufReader<File>>,
    raw: &str,
    normal: &str,
    refuse: impl Fn(code::Archive, String) -> DistError,
) -> Result<()> {
    if entry.encrypted() {
        return Err(refuse(
            code::Archive::Encrypted,
            "is encrypted; encrypted entries are refused".into(),
        ));
    }
    if let Some(mode) = entry.unix_mode()
        && let Some(why) = kind_refusal(raw, mode)
    {
        return Err(refuse(
            if mode & S_IFMT == S_IFLNK {
                code::Archive::Symlink
            } else {
                code::Archive::Special
            },
            why.into(),
        ));
    }
    if entry.is_symlink() {
        return Err(refuse(
            code::Archive::Symlink,
            "is a symbolic link; symlink entries are refused".into(),
        ));
    }
    if !matches!(
        entry.compression(),
        CompressionMethod::Stored | CompressionMethod::Deflated
    ) {
        return Err(refuse(
            code::Archive::Method,
            format!(
                "uses compression method {:?}; only stored and deflate are accepted",
                entry.compression()
            ),
        ));
    }
    if let Some(vcs) = vcs_component(normal) {
        return Err(refuse(
            code::Archive::Vcs,
            format!("is version-control metadata (`{}`); git and other tools run commands its config names when they look at the pack directory", vcs.escape_debug()),
        )
        .help("a .buzzpack never carries VCS metadata; rebuild it with `apiary pack build`, which leaves it out"));
    }
    Ok(())
}

/// A file entry's declared size and compression ratio.
fn check_entry_size(
    size: u64,
    compressed: u64,
    limits: &Limits,
    refuse: impl Fn(code::Archive, String) -> DistError,
) -> Result<()> {
    if size > limits.max_file_bytes {
        return Err(refuse(
            code::Archive::FileSize,
            format!(
                "unpacks to {size} bytes; the per-file limit is {}",
                mib(limits.max_file_bytes)
            ),
        ));
    }
    let compressed = compressed.max(1);
    if size >= limits.ratio_floor_bytes && size / compressed > limits.max_ratio {
        return Err(refuse(
            code::Archive::Ratio,
            format!(
                "expands {}:1 ({compressed} -> {size} bytes); the limit is {}:1 (zip bomb?)",
                size / compressed,
                limits.max_ratio
            ),
        ));
    }
    Ok(())
}

impl Plan {
    /// What no single entry shows: the archive's overall ratio, a git repository laid out in
    /// plain directories, a path that is both a file and a directory.
    fn check_whole(&self, label: &str, len: u64, limits: &Limits) -> Result<()> {
        let total = self.total;
        // Many small entries can add up to a bomb that no single entry shows.
        if total >= limits.ratio_floor_bytes && total / len.max(1) > limits.max_ratio {
            return Err(DistError::new(
                code::Archive::Ratio,
                format!(
                    "{label} expands {}:1 ({len} -> {total} bytes); the limit is {}:1 (zip bomb?)",
                    total / len.max(1),
                    limits.max_ratio
                ),
            ));
        }
        if let Some(repo) = embedded_git_dir(&self.files, &self.dirs) {
            return Err(DistError::new(
                code::Archive::Vcs,
                format!("{label}: `{repo}` is laid out as a git repository (HEAD with objects/ and refs/, or commondir); git would read its config when a shell looks at that directory"),
            )
            .help("a .buzzpack never carries VCS metadata; rebuild it with `apiary pack build`"));
        }
        if let Some(clash) = self.files.intersection(&self.dirs).next() {
            return Err(DistError::new(
                code::Archive::Clash,
                format!("archive entry `{clash}` is both a file and a directory"),
            ));
        }
        Ok(())
    }
}

/// Pass 2: creates the directories, then writes every file fresh, counting real bytes.
fn write_entries(
    zip: &mut Zip,
    plan: Plan,
    label: &str,
    dest: &Path,
    limits: &Limits,
    progress: &indicatif::ProgressBar,
) -> Result<Vec<FileDigest>> {
    progress.set_length(plan.total);
    let mut out = Vec::with_capacity(plan.files.len());
    let mut written: u64 = 0;
    for dir in &plan.dirs {
        create_dir(&dest.join(dir))?;
    }
    for planned in plan.entries.into_iter().filter(|p| !p.is_dir) {
        let entry = zip.by_index(planned.index).map_err(|e| damaged(label, e))?;
        let file = write_entry(entry, &planned, label, dest, limits, &mut written, progress)?;
        out.push(file);
    }
    progress.finish_and_clear();
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

/// Writes one file entry to `dest`, created fresh with mode 0644, stopping at its declared size
/// (and at the archive's total, counted in `written`); returns its digest.
fn write_entry(
    entry: impl Read,
    planned: &Planned,
    label: &str,
    dest: &Path,
    limits: &Limits,
    written: &mut u64,
    progress: &indicatif::ProgressBar,
) -> Result<FileDigest> {
    let (normal, declared) = (&planned.normal, planned.size);
    let target = dest.join(normal);
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&target)
        .map_err(|e| DistError::io("cannot create", &target, e))?;
    set_mode(&target, 0o644)?;
    let mut h = Sha256::new();
    let mut limited = entry.take(declared.saturating_add(1));
    let mut buf = vec![0u8; 64 * 1024];
    let mut got: u64 = 0;
    loop {
        let k = limited.read(&mut buf).map_err(|e| damaged(label, e))?;
        if k == 0 {
            break;
        }
        got += k as u64;
        *written += k as u64;
        if got > declared || *written > limits.max_total_bytes {
            return Err(DistError::new(
                code::Archive::SizeLie,
                format!(
                    "archive entry `{normal}` holds more data than its header declares ({declared} bytes); refusing"
                ),
            ));
        }
        h.update(&buf[..k]);
        f.write_all(&buf[..k])
            .map_err(|e| DistError::io("cannot write", &target, e))?;
        progress.inc(k as u64);
    }
    if got != declared {
        return Err(damaged(
            label,
            format!("entry `{normal}` has {got} bytes, its header says {declared}"),
        ));
    }
    f.sync_all()
        .map_err(|e| DistError::io("cannot sync", &target, e))?;
    Ok(FileDigest {
        path: normal.clone(),
        size: got,
        sha256: hex(&h.finalize()),
    })
}

/// The entry count the end-of-central-directory record declares (the Zip64 one when the classic
/// record says 0xFFFF); `None` when it cannot be found (the zip reader then reports the damage).
pub(crate) fn declared_entries(file: &mut File, len: u64) -> Option<u64> {
    const EOCD: [u8; 4] = [0x50, 0x4b, 0x05, 0x06];
    const LOCATOR: [u8; 4] = [0x50, 0x4b, 0x06, 0x07];
    const EOCD64: [u8; 4] = [0x50, 0x4b, 0x06, 0x06];
    let tail_len = len.min(22 + 65_535);
    let start = len - tail_len;
    file.seek(SeekFrom::Start(start)).ok()?;
    let mut tail = vec![0u8; tail_len as usize];
    file.read_exact(&mut tail).ok()?;
    let pos = (0..tail.len().saturating_sub(21))
        .rev()
        .find(|&i| tail[i..i + 4] == EOCD)?;
    let count = u64::from(u16::from_le_bytes([tail[pos + 10], tail[pos + 11]]));
    if count != 0xFFFF {
        return Some(count);
    }
    // Zip64: a locator sits just before the classic record and points at the Zip64 record.
    let loc = (start + pos as u64).checked_sub(20)?;
    let mut buf = [0u8; 20];
    file.seek(SeekFrom::Start(loc)).ok()?;
    file.read_exact(&mut buf).ok()?;
    if buf[..4] != LOCATOR {
        return Some(count);
    }
    let at = u64::from_le_bytes(buf[8..16].try_into().ok()?);
    let mut rec = [0u8; 40];
    file.seek(SeekFrom::Start(at)).ok()?;
    file.read_exact(&mut rec).ok()?;
    if rec[..4] != EOCD64 {
        return None;
    }
    Some(u64::from_le_bytes(rec[32..40].try_into().ok()?))
}

fn create_dir(path: &Path) -> Result<()> {
    match fs::create_dir(path) {
        Ok(()) => set_mode(path, 0o755),
        // An existing directory only, never a link to one: nothing is written through a link.
        Err(e)
            if e.kind() == std::io::ErrorKind::AlreadyExists
                && fs::symlink_metadata(path).is_ok_and(|m| m.is_dir()) =>
        {
            Ok(())
        }
        Err(e) => Err(DistError::io("cannot create directory", path, e)),
    }
}

pub(crate) fn set_mode(path: &Path, mode: u32) -> Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(path, fs::Permissions::from_mode(mode))
            .map_err(|e| DistError::io("cannot set permissions on", path, e))
    }
    #[cfg(not(unix))]
    {
        let _ = (path, mode);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_count_comes_from_the_end_record() {
        let dir = tempfile::tempdir().unwrap();
        // (the Zip64 path is covered by the 100,000-entry end-to-end test)
        for n in [0usize, 3] {
            let path = dir.path().join(format!("{n}.zip"));
            let mut z = ZipWriter::new(File::create(&path).unwrap());
            for i in 0..n {
                z.start_file(format!("f{i}"), SimpleFileOptions::default())
                    .unwrap();
            }
            z.finish().unwrap();
            let mut f = File::open(&path).unwrap();
            let len = f.metadata().unwrap().len();
            assert_eq!(declared_entries(&mut f, len), Some(n as u64));
        }
    }

    #[test]
    fn vcs_metadata_in_any_disguise() {
        for bad in [
            ".git/config",
            "a/.git",
            ".GIT/config",
            "x/.Git/HEAD",
            ".git./config",
            ".git /config",
            ".g\u{200c}it/config",
            "\u{feff}.git",
            "GIT~1/config",
            ".hg/hgrc",
            "s/.HG/hgrc",
            ".svn/entries",
            ".bzr/branch",
            ".jj/repo",
            "_darcs/prefs",
            "_DARCS/prefs",
            ".pijul/config",
            ".fslckout",
            "_FOSSIL_",
        ] {
            assert!(vcs_component(bad).is_some(), "{bad:?} not caught");
        }
        for ok in [
            ".gitignore",
            ".gitattributes",
            "git/x",
            "docs/.github/x",
            "hg",
            "cvs/x",
        ] {
            assert!(vcs_component(ok).is_none(), "{ok:?} caught");
        }
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let files = s(&["x/HEAD", "x/config", "README.md"]);
        assert_eq!(
            embedded_git_dir(&files, &s(&["x", "x/objects", "x/refs"])).as_deref(),
            Some("x")
        );
        assert_eq!(embedded_git_dir(&files, &s(&["x", "x/objects"])), None);
        let files = s(&["head", "commondir"]);
        assert_eq!(embedded_git_dir(&files, &s(&[])).as_deref(), Some("."));
        let files = s(&["a/Head", "a/Objects/x", "a/REFS/heads/main"]);
        assert_eq!(
            embedded_git_dir(&files, &s(&["a", "a/Objects", "a/REFS", "a/REFS/heads"])).as_deref(),
            Some("a")
        );
    }

    #[test]
    fn names_are_fenced() {
        let l = Limits::default();
        for bad in [
            "../x",
            "a/../../x",
            "/etc/passwd",
            "C:/x",
            "c:x",
            "a\\..\\x",
            "a/\0b",
            "",
            "./",
            RECORD_NAME,
        ] {
            assert!(check_entry_name(bad, &l).is_err(), "{bad:?} accepted");
        }
        assert_eq!(
            check_entry_name("./agents//a.persona.md", &l).unwrap(),
            "agents/a.persona.md"
        );
        assert_eq!(check_entry_name("skills/x/", &l).unwrap(), "skills/x");
    }
}
