//! Install sources: what `apiary install <source>` accepts, and how each becomes verified input.
//!
//! | source | fetched as | integrity |
//! |---|---|---|
//! | `./x.buzzpack` (any path) | copied into the work dir while hashed | `./x.buzzpack.sha256` must exist and match |
//! | `https://…/x.buzzpack`, `http://…` | downloaded (size-capped) while hashed | `<url>.sha256` must exist and match |
//! | `github:owner/repo[@ref]` | `git clone` of `https://github.com/owner/repo.git` | the resolved commit is recorded |
//! | `git+https://host/path[#ref]` | `git clone` of `https://host/path` | the resolved commit is recorded |
//! | `git+file:///path[#ref]` | `git clone` of a local repository | the resolved commit is recorded |
//!
//! Git runs as a subprocess with hooks disabled, only the one transport the source names allowed,
//! no terminal prompts and no submodules. `APIARY_GITHUB_URL` replaces `https://github.com` for
//! `github:` sources (mirrors, and tests).

use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use sha2::{Digest, Sha256};

use super::archive::Limits;
use super::{DistError, Result, hex, is_sha256_hex};

pub const GITHUB_ENV: &str = "APIARY_GITHUB_URL";
const MAX_CHECKSUM_BYTES: u64 = 4096;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    File(PathBuf),
    Http(String),
    Git {
        /// What the lock's `source` records (the source as given, without the ref).
        display: String,
        /// What `git clone` gets.
        url: String,
        reference: Option<String>,
        /// `file` or `https` (or `http` for a mirror given as such): the only transport allowed.
        protocol: &'static str,
    },
}

fn bad_source(s: &str, why: &str) -> DistError {
    DistError::new("source.invalid", format!("install source `{s}`: {why}")).help(
        "use a .buzzpack path, an http(s):// URL, github:owner/repo[@ref], git+https://host/repo[#ref] or git+file:///path[#ref]",
    )
}

fn check_ref(source: &str, r: &str) -> Result<()> {
    let ok = !r.is_empty()
        && r.len() <= 200
        && !r.starts_with(['-', '/', '.'])
        && !r.contains("..")
        && r.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '/'));
    if ok {
        Ok(())
    } else {
        Err(bad_source(
            source,
            &format!("`{r}` is not a usable git ref"),
        ))
    }
}

impl Source {
    pub fn parse(s: &str) -> Result<Source> {
        let s_trim = s.trim();
        if s_trim.is_empty() {
            return Err(bad_source(s, "empty"));
        }
        if s_trim.chars().any(|c| c.is_control()) {
            return Err(bad_source(s, "contains control characters"));
        }
        if let Some(rest) = s_trim.strip_prefix("github:") {
            let (repo, reference) = match rest.split_once('@') {
                Some((r, x)) => (r, Some(x.to_string())),
                None => (rest, None),
            };
            let parts: Vec<&str> = repo.split('/').collect();
            let part_ok = |p: &str| {
                !p.is_empty()
                    && !p.starts_with(['-', '.'])
                    && p.chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
            };
            if parts.len() != 2 || !parts.iter().all(|p| part_ok(p)) {
                return Err(bad_source(s, "expected github:owner/repo[@ref]"));
            }
            if let Some(r) = &reference {
                check_ref(s, r)?;
            }
            let base = std::env::var(GITHUB_ENV)
                .ok()
                .filter(|b| !b.is_empty())
                .unwrap_or_else(|| "https://github.com".into());
            let base = base.trim_end_matches('/');
            let protocol = if base.starts_with("file://") {
                "file"
            } else if base.starts_with("https://") {
                "https"
            } else {
                return Err(bad_source(
                    s,
                    &format!("{GITHUB_ENV} must be an https:// or file:// URL"),
                ));
            };
            return Ok(Source::Git {
                display: format!("github:{repo}"),
                url: format!("{base}/{repo}.git"),
                reference,
                protocol,
            });
        }
        if let Some(rest) = s_trim.strip_prefix("git+") {
            let (url, reference) = match rest.split_once('#') {
                Some((u, r)) => (u, Some(r.to_string())),
                None => (rest, None),
            };
            let protocol = if url.starts_with("https://") {
                "https"
            } else if url.starts_with("file://") {
                "file"
            } else {
                return Err(bad_source(
                    s,
                    "only git+https:// and git+file:// are supported",
                ));
            };
            if url.len() <= "file://".len() + 1 || url.contains(char::is_whitespace) {
                return Err(bad_source(s, "the repository URL is incomplete"));
            }
            if let Some(r) = &reference {
                check_ref(s, r)?;
            }
            return Ok(Source::Git {
                display: format!("git+{url}"),
                url: url.to_string(),
                reference,
                protocol,
            });
        }
        if s_trim.starts_with("https://") || s_trim.starts_with("http://") {
            if s_trim.contains(char::is_whitespace) {
                return Err(bad_source(s, "URLs cannot contain spaces"));
            }
            return Ok(Source::Http(s_trim.to_string()));
        }
        if s_trim.contains("://") {
            return Err(bad_source(s, "unsupported URL scheme"));
        }
        Ok(Source::File(PathBuf::from(s)))
    }

    /// The `source` recorded in `pack.lock` (credentials in a URL are left out).
    pub fn lock_source(&self) -> String {
        match self {
            Source::File(p) => std::path::absolute(p)
                .unwrap_or_else(|_| p.clone())
                .display()
                .to_string(),
            Source::Http(u) => redact(u),
            Source::Git { display, .. } => redact(display),
        }
    }
}

/// `scheme://user:secret@host/...` -> `scheme://host/...`.
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{scheme}://{}", &rest[at + 1..]),
        None => url.to_string(),
    }
}

/// `<url>.sha256`, keeping a query string (e.g. a signed download link) after the new suffix.
pub fn checksum_url(url: &str) -> String {
    match url.find(['?', '#']) {
        Some(i) => format!("{}.sha256{}", &url[..i], &url[i..]),
        None => format!("{url}.sha256"),
    }
}

impl Source {}

/// What a source turned into, inside the caller's work directory.
#[derive(Debug)]
pub enum Fetched {
    /// A verified archive copy and its SHA-256.
    Archive { path: PathBuf, sha256: String },
    /// A checked-out tree and the commit it is at.
    Tree { dir: PathBuf, commit: String },
}

/// Parses `sha256sum` output: `<64 hex>  <file name>` (or ` *<file name>`), first line.
pub fn parse_checksum(text: &str, origin: &str) -> Result<(String, Option<String>)> {
    let line = text.lines().map(str::trim).find(|l| !l.is_empty());
    let bad = || {
        DistError::new(
            "checksum.invalid",
            format!("{origin} is not sha256sum output (`<64 hex digits>  <file name>`)"),
        )
    };
    let line = line.ok_or_else(bad)?;
    let mut parts = line.splitn(2, char::is_whitespace);
    let digest = parts.next().unwrap_or_default();
    if !is_sha256_hex(digest) {
        return Err(bad());
    }
    let name = parts
        .next()
        .map(|n| n.trim_start().trim_start_matches('*').to_string())
        .filter(|n| !n.is_empty());
    Ok((digest.to_ascii_lowercase(), name))
}

fn mismatch(what: &str, expected: &str, actual: &str) -> DistError {
    DistError::new(
        "checksum.mismatch",
        format!("checksum mismatch for {what}: the .sha256 file says {expected}, the archive is {actual}; refusing to install"),
    )
    .help("the archive was corrupted or tampered with in transit, or the checksum file belongs to another build")
}

fn name_note(expected_name: Option<&str>, actual: &str) {
    if let Some(n) = expected_name
        && n != actual
    {
        tracing::warn!("the checksum file names `{n}`, the archive is `{actual}` (digest matched)");
    }
}

/// Copies `from` to `to` while hashing, stopping at `cap` bytes.
fn copy_hashing(
    from: &mut dyn Read,
    to: &Path,
    cap: u64,
    what: &str,
    bar: &indicatif::ProgressBar,
) -> Result<String> {
    let mut out = File::create(to).map_err(|e| DistError::io("cannot create", to, e))?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut total: u64 = 0;
    loop {
        let n = from
            .read(&mut buf)
            .map_err(|e| DistError::new("fetch.read", format!("reading {what} failed: {e}")))?;
        if n == 0 {
            break;
        }
        total += n as u64;
        if total > cap {
            return Err(DistError::new(
                "archive.too-large",
                format!(
                    "{what} is larger than the {} MiB limit",
                    cap / (1024 * 1024)
                ),
            ));
        }
        h.update(&buf[..n]);
        out.write_all(&buf[..n])
            .map_err(|e| DistError::io("cannot write", to, e))?;
        bar.inc(n as u64);
    }
    bar.finish_and_clear();
    out.sync_all()
        .map_err(|e| DistError::io("cannot sync", to, e))?;
    Ok(hex(&h.finalize()))
}

/// Fetches `source` into `work` (an empty scratch directory the caller removes).
pub fn fetch(source: &Source, work: &Path, limits: &Limits, progress: bool) -> Result<Fetched> {
    match source {
        Source::File(path) => fetch_file(path, work, limits, progress),
        Source::Http(url) => fetch_http(url, work, limits, progress),
        Source::Git {
            url,
            reference,
            protocol,
            ..
        } => fetch_git(url, reference.as_deref(), protocol, work),
    }
}

fn fetch_file(path: &Path, work: &Path, limits: &Limits, progress: bool) -> Result<Fetched> {
    let (path, sha256, _) = fetch_file_checked(path, work, limits, progress, true)?;
    Ok(Fetched::Archive { path, sha256 })
}

/// Copies the archive `path` into `work` while hashing it, checked against `<path>.sha256`. Without
/// that file: an error when `required`, else the copy and its digest, unverified (`false`).
pub fn fetch_file_checked(
    path: &Path,
    work: &Path,
    limits: &Limits,
    progress: bool,
    required: bool,
) -> Result<(PathBuf, String, bool)> {
    let meta = std::fs::metadata(path).map_err(|e| {
        DistError::new(
            "source.not-found",
            format!("cannot open {}: {e}", path.display()),
        )
    })?;
    if !meta.is_file() {
        return Err(DistError::new(
            "source.not-file",
            format!(
                "{} is not a .buzzpack file (to install from a directory, build it first with `apiary pack build`)",
                path.display()
            ),
        ));
    }
    let sum_path = PathBuf::from(format!("{}.sha256", path.display()));
    let sum_text = match std::fs::metadata(&sum_path) {
        // A FIFO reports size 0: read without blocking, regular files only.
        Ok(m) if m.len() <= MAX_CHECKSUM_BYTES => crate::safe_fs::read_regular(
            &sum_path,
            crate::safe_fs::FinalLink::Follow,
            MAX_CHECKSUM_BYTES,
        )
        .and_then(|b| String::from_utf8(b).map_err(std::io::Error::other))
        .map_err(|e| DistError::io("cannot read", &sum_path, e))?,
        Ok(_) => {
            return Err(DistError::new(
                "checksum.invalid",
                format!("{} is too large to be a checksum file", sum_path.display()),
            ));
        }
        Err(_) if !required => {
            let mut input = crate::safe_fs::open_regular(path, crate::safe_fs::FinalLink::Follow)
                .map_err(|e| DistError::io("cannot open", path, e))?
                .0;
            let copy = work.join("download.zip");
            let bar = super::progress_bar(meta.len(), "copying", progress);
            let what = path.display().to_string();
            let actual = copy_hashing(&mut input, &copy, limits.max_archive_bytes, &what, &bar)?;
            return Ok((copy, actual, false));
        }
        Err(_) => {
            return Err(DistError::new(
                "checksum.missing",
                format!(
                    "no checksum file {}: a .buzzpack must ship with its .sha256 (spec §11); refusing to install",
                    sum_path.display()
                ),
            )
            .help("put the <name>.buzzpack.sha256 from the release beside the archive (`apiary pack build` writes both)"));
        }
    };
    let (expected, name) = parse_checksum(&sum_text, &sum_path.display().to_string())?;
    let mut input = crate::safe_fs::open_regular(path, crate::safe_fs::FinalLink::Follow)
        .map_err(|e| DistError::io("cannot open", path, e))?
        .0;
    let copy = work.join("download.buzzpack");
    let bar = super::progress_bar(meta.len(), "copying", progress);
    let actual = copy_hashing(
        &mut input,
        &copy,
        limits.max_archive_bytes,
        &path.display().to_string(),
        &bar,
    )?;
    if actual != expected {
        return Err(mismatch(&path.display().to_string(), &expected, &actual));
    }
    let file_name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    name_note(name.as_deref(), file_name);
    Ok((copy, actual, true))
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(300)))
        .max_redirects(5)
        .user_agent(concat!("apiary/", env!("CARGO_PKG_VERSION")))
        .build()
        .new_agent()
}

fn http_error(url: &str, e: ureq::Error) -> DistError {
    match e {
        ureq::Error::StatusCode(code) => DistError::new(
            "fetch.http-status",
            format!("GET {} answered HTTP {code}", redact(url)),
        ),
        other => DistError::new("fetch.http", format!("GET {} failed: {other}", redact(url))),
    }
}

fn fetch_http(url: &str, work: &Path, limits: &Limits, progress: bool) -> Result<Fetched> {
    let (path, sha256, _) = fetch_http_checked(url, work, limits, progress, true)?;
    Ok(Fetched::Archive { path, sha256 })
}

/// Downloads `url` into `work` while hashing it, checked against `<url>.sha256`. When the server
/// has no such file (an HTTP error status): an error when `required`, else the download and its
/// digest, unverified (`false`).
pub fn fetch_http_checked(
    url: &str,
    work: &Path,
    limits: &Limits,
    progress: bool,
    required: bool,
) -> Result<(PathBuf, String, bool)> {
    let agent = agent();
    let sum_url = checksum_url(url);
    let sum_text = match agent.get(&sum_url).call() {
        Ok(mut resp) => resp
            .body_mut()
            .with_config()
            .limit(MAX_CHECKSUM_BYTES)
            .read_to_string()
            .map(Some)
            .map_err(|e| {
                DistError::new("checksum.invalid", format!("cannot read {sum_url}: {e}"))
            })?,
        Err(ureq::Error::StatusCode(_)) if !required => None,
        Err(ureq::Error::StatusCode(code)) => {
            return Err(DistError::new(
                "checksum.missing",
                format!("no checksum at {sum_url} (HTTP {code}): a .buzzpack must ship with its .sha256 (spec §11); refusing to install"),
            )
            .help("publish <name>.buzzpack.sha256 beside the archive (`apiary pack build` writes it)"));
        }
        Err(e) => return Err(http_error(&sum_url, e)),
    };
    let expected = sum_text.map(|t| parse_checksum(&t, &sum_url)).transpose()?;
    let mut resp = agent.get(url).call().map_err(|e| http_error(url, e))?;
    let len = resp.body().content_length();
    if let Some(n) = len
        && n > limits.max_archive_bytes
    {
        return Err(DistError::new(
            "archive.too-large",
            format!(
                "{url} is {n} bytes; the limit is {} MiB",
                limits.max_archive_bytes / (1024 * 1024)
            ),
        ));
    }
    let bar = super::progress_bar(len.unwrap_or(0), "downloading", progress);
    let copy = work.join("download.buzzpack");
    let mut reader = resp
        .body_mut()
        .with_config()
        .limit(limits.max_archive_bytes.saturating_add(1))
        .reader();
    let actual = copy_hashing(&mut reader, &copy, limits.max_archive_bytes, url, &bar)?;
    let Some((expected, name)) = expected else {
        return Ok((copy, actual, false));
    };
    if actual != expected {
        return Err(mismatch(url, &expected, &actual));
    }
    let file_name = url
        .split(['?', '#'])
        .next()
        .and_then(|u| u.rsplit('/').next())
        .unwrap_or("");
    name_note(name.as_deref(), file_name);
    Ok((copy, actual, true))
}

fn git(protocol: &str) -> Command {
    let mut cmd = Command::new("git");
    cmd.env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_ALLOW_PROTOCOL", protocol)
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .args(["-c", "core.hooksPath=/dev/null"])
        .args(["-c", "protocol.allow=never"])
        .args(["-c", &format!("protocol.{protocol}.allow=always")])
        .args(["-c", "transfer.fsckObjects=true"])
        .args(["-c", "advice.detachedHead=false"])
        .stdin(std::process::Stdio::null());
    cmd
}

fn run_git(mut cmd: Command, what: &str) -> Result<String> {
    let out = cmd.output().map_err(|e| {
        DistError::new("git.missing", format!("cannot run git for {what}: {e}"))
            .help("git sources need the `git` command on PATH")
    })?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let err: String = err.trim().chars().take(2000).collect();
        return Err(DistError::new(
            "git.failed",
            format!("{what} failed: {err}"),
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn fetch_git(url: &str, reference: Option<&str>, protocol: &str, work: &Path) -> Result<Fetched> {
    if url.starts_with('-') {
        return Err(bad_source(url, "a repository URL cannot start with `-`"));
    }
    let dir = work.join("checkout");
    let what = format!("git clone {}", redact(url));
    let shallow = {
        let mut cmd = git(protocol);
        cmd.args(["clone", "--quiet", "--no-tags", "--depth", "1"]);
        if let Some(r) = reference {
            cmd.args(["--branch", r]);
        }
        cmd.arg("--").arg(url).arg(&dir);
        run_git(cmd, &what)
    };
    if let Err(e) = shallow {
        let Some(r) = reference else { return Err(e) };
        // `--branch` takes branches and tags; a commit id needs a full clone and a checkout.
        let _ = std::fs::remove_dir_all(&dir);
        let mut cmd = git(protocol);
        cmd.args(["clone", "--quiet", "--no-checkout", "--"])
            .arg(url)
            .arg(&dir);
        run_git(cmd, &what)?;
        let mut cmd = git(protocol);
        cmd.arg("-C")
            .arg(&dir)
            .args(["checkout", "--quiet", "--detach", r, "--"]);
        run_git(cmd, &format!("git checkout {r}")).map_err(|e2| {
            DistError::new(
                "git.ref",
                format!("cannot find ref `{r}` in {}: {}", redact(url), e2.message),
            )
        })?;
    }
    let mut cmd = git(protocol);
    cmd.arg("-C").arg(&dir).args(["rev-parse", "HEAD"]);
    let commit = run_git(cmd, "git rev-parse HEAD")?;
    if !(commit.len() == 40 || commit.len() == 64) || !commit.bytes().all(|b| b.is_ascii_hexdigit())
    {
        return Err(DistError::new(
            "git.failed",
            format!("git reported an unexpected commit id `{commit}`"),
        ));
    }
    Ok(Fetched::Tree { dir, commit })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_sources() {
        assert_eq!(
            Source::parse("./x.buzzpack").unwrap(),
            Source::File("./x.buzzpack".into())
        );
        assert!(matches!(
            Source::parse("https://e.com/x.buzzpack").unwrap(),
            Source::Http(_)
        ));
        match Source::parse("github:example/meadow@v1.2.0").unwrap() {
            Source::Git {
                display,
                url,
                reference,
                ..
            } => {
                assert_eq!(display, "github:example/meadow");
                assert!(url.ends_with("/example/meadow.git"));
                assert_eq!(reference.as_deref(), Some("v1.2.0"));
            }
            other => panic!("{other:?}"),
        }
        assert!(Source::parse("git+file:///tmp/repo#main").is_ok());
        for bad in [
            "github:x",
            "github:-x/y",
            "github:a/b@--upload-pack=x",
            "git+ssh://h/r",
            "ftp://x",
            "git+ext::sh",
            "github:a/b@x..y",
        ] {
            assert!(Source::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn urls() {
        assert_eq!(
            redact("https://user:tok@host.example/a.git"),
            "https://host.example/a.git"
        );
        assert_eq!(redact("git+https://h/a@b"), "git+https://h/a@b");
        assert_eq!(
            checksum_url("https://h/x.buzzpack"),
            "https://h/x.buzzpack.sha256"
        );
        assert_eq!(
            checksum_url("https://h/x.buzzpack?sig=1"),
            "https://h/x.buzzpack.sha256?sig=1"
        );
        let s = Source::parse("git+https://me:secret@h.example/r.git").unwrap();
        assert_eq!(s.lock_source(), "git+https://h.example/r.git");
    }

    #[test]
    fn checksum_files() {
        let d = "a".repeat(64);
        assert_eq!(
            parse_checksum(&format!("{d}  x.buzzpack\n"), "t").unwrap(),
            (d.clone(), Some("x.buzzpack".into()))
        );
        assert_eq!(parse_checksum(&d.to_uppercase(), "t").unwrap().0, d);
        assert!(parse_checksum("nothex  x", "t").is_err());
        assert!(parse_checksum("", "t").is_err());
    }
}
