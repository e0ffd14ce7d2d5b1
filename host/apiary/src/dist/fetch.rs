//! Install sources: what `apiary install <source>` accepts, and how each becomes verified input.
//!
//! | source | fetched as | integrity |
//! |---|---|---|
//! | `./x.buzzpack` (any path) | copied into the work dir while hashed | `./x.buzzpack.sha256` must exist and match |
//! | `https://…/x.buzzpack` | downloaded (size-capped) while hashed | `<url>.sha256` must exist and match |
//! | `http://…/x.buzzpack` | the same, only with `--sha256` | the pinned digest must match |
//! | `github:owner/repo[@ref]` | `git clone` of `https://github.com/owner/repo.git` | the resolved commit is recorded |
//! | `git+https://host/path[#ref]` | `git clone` of `https://host/path` | the resolved commit is recorded |
//! | `git+file:///path[#ref]` | `git clone` of a local repository | the resolved commit is recorded |
//!
//! `--sha256 <digest>` pins an archive source: the archive must have that digest, and no `.sha256`
//! file is needed. Plain `http://` needs it: a checksum fetched from the same unauthenticated server
//! as the archive proves nothing, since whoever can swap one can swap both.
//!
//! Git runs as a subprocess in a clean environment (no system or user config, no credential
//! helpers, no terminal prompts), with hooks and fsmonitor disabled, only the one transport the
//! source names allowed and no submodules, in its own process group: the whole group is killed
//! when the clone outlives `APIARY_GIT_TIMEOUT_SECS` (default 300) or the clone directory grows
//! past `APIARY_GIT_MAX_MIB` (default 512), both checked while git runs. Nothing is checked out
//! before the commit's tree is counted: more files than an install takes (10,000) is refused from
//! git's listing, before one is written ([`tree_count`]). `APIARY_GITHUB_URL`
//! replaces `https://github.com` for `github:` sources (mirrors, and tests).
//!
//! Credentials in a source URL (`https://user:token@host/…`, `?token=…`) never reach a message,
//! `pack.lock` or the JSON output: [`redact`] drops them from URLs apiary prints, and
//! [`scrub_error`] removes them from any error text (git's and the HTTP client's included).

use crate::dist::code;
use std::fs::File;
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use super::archive::Limits;
use super::{DistError, Result, hex, is_sha256_hex};

mod tree_count;

pub const GITHUB_ENV: &str = "APIARY_GITHUB_URL";
/// Wall-clock limit for the git commands of one install, in seconds.
pub const GIT_TIMEOUT_ENV: &str = "APIARY_GIT_TIMEOUT_SECS";
/// Size limit of a git clone (objects and checkout), in MiB.
pub const GIT_MAX_ENV: &str = "APIARY_GIT_MAX_MIB";
const GIT_TIMEOUT_DEFAULT: u64 = 300;
const GIT_MAX_MIB_DEFAULT: u64 = 512;
/// A day, and a TiB: beyond any clone worth waiting for.
const GIT_TIMEOUT_MAX: u64 = 86_400;
const GIT_MAX_MIB_MAX: u64 = 1 << 20;
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
    /// `nostr:<pack-id>[@version]`: a pack published on Nostr relays (`install --relay`), found
    /// by its signed event and downloaded from a blob server by sha256 ([`super::registry`]).
    Nostr {
        pack_id: String,
        version: Option<String>,
    },
}

fn bad_source(s: &str, why: &str) -> DistError {
    let s = redact(s);
    DistError::new(code::Source::Invalid, format!("install source `{s}`: {why}")).help(
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
            return parse_github(s, rest);
        }
        if let Some(rest) = s_trim.strip_prefix("git+") {
            return parse_git(s, rest);
        }
        if let Some(rest) = s_trim.strip_prefix(NOSTR_PREFIX) {
            return parse_nostr(s, rest);
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
            Source::Nostr { pack_id, .. } => format!("{NOSTR_PREFIX}{pack_id}"),
        }
    }
}

/// The prefix of a pack found on Nostr relays: `nostr:<pack-id>[@version]`.
pub const NOSTR_PREFIX: &str = "nostr:";

/// `nostr:<pack-id>[@version]` (`rest` follows the prefix).
fn parse_nostr(s: &str, rest: &str) -> Result<Source> {
    let (id, version) = match rest.split_once('@') {
        Some((id, v)) => (id, Some(v)),
        None => (rest, None),
    };
    if !crate::pack::manifest::is_valid_id(id) {
        return Err(bad_source(s, &format!("`{id}` is not a pack id")));
    }
    if let Some(v) = version
        && semver::Version::parse(v).is_err()
    {
        return Err(bad_source(s, &format!("`{v}` is not a version (x.y.z)")));
    }
    Ok(Source::Nostr {
        pack_id: id.to_string(),
        version: version.map(str::to_string),
    })
}

/// `github:owner/repo[@ref]` (`rest` follows the prefix), cloned from `$APIARY_GITHUB_URL`, else
/// https://github.com.
fn parse_github(s: &str, rest: &str) -> Result<Source> {
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
    Ok(Source::Git {
        display: format!("github:{repo}"),
        url: format!("{base}/{repo}.git"),
        reference,
        protocol,
    })
}

/// `git+https://…[#ref]` or `git+file://…[#ref]` (`rest` follows `git+`).
fn parse_git(s: &str, rest: &str) -> Result<Source> {
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
    Ok(Source::Git {
        display: format!("git+{url}"),
        url: url.to_string(),
        reference,
        protocol,
    })
}

/// `scheme://user:secret@host/p?token=x&v=1` -> `scheme://host/p?token=REDACTED&v=1`: without the
/// user info, and without the values of query parameters whose names look like credentials.
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let tail = match tail.split_once('?') {
        None => tail.to_string(),
        Some((path, query)) => {
            let (query, fragment) = match query.find('#') {
                Some(i) => query.split_at(i),
                None => (query, ""),
            };
            let query: Vec<String> = query
                .split('&')
                .map(|kv| match kv.split_once('=') {
                    Some((k, v)) if secret_param(k) && !v.is_empty() => format!("{k}=REDACTED"),
                    _ => kv.to_string(),
                })
                .collect();
            format!("{path}?{}{fragment}", query.join("&"))
        }
    };
    format!("{scheme}://{host}{tail}")
}

/// A query parameter that carries a credential (`token`, `access_token`, `api_key`, `sig`,
/// `X-Amz-Signature`, `X-Amz-Credential`, `password`, ...).
fn secret_param(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    [
        "token", "secret", "pass", "pwd", "key", "sig", "auth", "cred", "session",
    ]
    .iter()
    .any(|w| n.contains(w))
}

/// The credentials in a source URL, as they may appear in other programs' messages: the user
/// info, its password part and the values of credential query parameters, each also
/// percent-decoded. Very short values are left out (scrubbing them would mangle messages).
pub fn secrets_of(source: &str) -> Vec<String> {
    let mut out = Vec::new();
    let Some((_, rest)) = source.split_once("://") else {
        return out;
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    if let Some((info, _)) = rest[..authority_end].rsplit_once('@') {
        out.push(info.to_string());
        if let Some((_, password)) = info.split_once(':') {
            out.push(password.to_string());
        }
    }
    if let Some((_, query)) = rest.split_once('?') {
        let query = query.split('#').next().unwrap_or("");
        for (k, v) in query.split('&').filter_map(|kv| kv.split_once('=')) {
            if secret_param(k) {
                out.push(v.to_string());
            }
        }
    }
    let decoded: Vec<String> = out.iter().map(|s| percent_decode(s)).collect();
    out.extend(decoded);
    out.retain(|s| s.chars().count() >= 4);
    // Longest first, so a password inside the user info does not leave the user name behind.
    out.sort_by_key(|s| std::cmp::Reverse(s.len()));
    out.dedup();
    out
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        if b[i] == b'%'
            && i + 2 < b.len()
            && let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2]))
        {
            out.push((h * 16 + l) as u8);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `text` with every one of `secrets` replaced by `REDACTED`.
pub fn scrub(text: &str, secrets: &[String]) -> String {
    secrets
        .iter()
        .fold(text.to_string(), |t, s| t.replace(s.as_str(), "REDACTED"))
}

/// The error with the credentials of `source` scrubbed from its message and help: the last line
/// of defence for text apiary does not compose itself (git's stderr, the HTTP client's errors).
pub fn scrub_error(mut e: DistError, source: &str) -> DistError {
    let secrets = secrets_of(source);
    if !secrets.is_empty() {
        e.message = scrub(&e.message, &secrets);
        e.help = e.help.map(|h| scrub(&h, &secrets));
    }
    e
}

/// `<url>.sha256`, keeping a query string (e.g. a signed download link) after the new suffix.
pub fn checksum_url(url: &str) -> String {
    match url.find(['?', '#']) {
        Some(i) => format!("{}.sha256{}", &url[..i], &url[i..]),
        None => format!("{url}.sha256"),
    }
}

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
            code::Checksum::Invalid,
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
        code::Checksum::Mismatch,
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

/// What vouches for the bytes of a fetched archive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Vouched {
    /// The published `.sha256` beside it matched.
    Checksum,
    /// The digest the operator pinned with `--sha256` matched.
    Pinned,
    /// Nothing: no checksum was published (allowed only where the caller said so).
    Nothing,
}

/// Checks the digest `actual` of `what` against the operator's pin, else the published checksum.
fn verdict(
    what: &str,
    file_name: &str,
    pin: Option<&str>,
    published: Option<(String, Option<String>)>,
    actual: &str,
) -> Result<Vouched> {
    if let Some(pin) = pin {
        if !pin.eq_ignore_ascii_case(actual) {
            return Err(DistError::new(
                code::Checksum::Mismatch,
                format!("checksum mismatch for {what}: --sha256 pins {pin}, the archive is {actual}; refusing to install"),
            )
            .help("the archive is not the one you pinned: it was tampered with, or the digest belongs to another release"));
        }
        return Ok(Vouched::Pinned);
    }
    match published {
        Some((expected, name)) => {
            if actual != expected {
                return Err(mismatch(what, &expected, actual));
            }
            name_note(name.as_deref(), file_name);
            Ok(Vouched::Checksum)
        }
        None => Ok(Vouched::Nothing),
    }
}

/// Copies `from` to `to` while hashing, stopping at `cap` bytes.
pub(super) fn copy_hashing(
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
        let n = from.read(&mut buf).map_err(|e| {
            DistError::new(code::Fetch::Read, format!("reading {what} failed: {e}"))
        })?;
        if n == 0 {
            break;
        }
        total += n as u64;
        if total > cap {
            return Err(DistError::new(
                code::Archive::TooLarge,
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

/// Fetches `source` into `work` (an empty scratch directory the caller removes). `pin` is the
/// archive digest the operator gave with `--sha256` (archive sources only).
pub fn fetch(
    source: &Source,
    work: &Path,
    limits: &Limits,
    progress: bool,
    pin: Option<&str>,
) -> Result<Fetched> {
    match source {
        Source::File(path) => {
            let (path, sha256, _) = fetch_file_checked(path, work, limits, progress, pin, true)?;
            Ok(Fetched::Archive { path, sha256 })
        }
        Source::Http(url) => {
            let (path, sha256, _) = fetch_http_checked(url, work, limits, progress, pin, true)?;
            Ok(Fetched::Archive { path, sha256 })
        }
        Source::Git {
            url,
            reference,
            protocol,
            display,
        } => {
            if pin.is_some() {
                return Err(DistError::new(
                    code::Source::Sha256Git,
                    format!("--sha256 pins an archive; {} is a git source", redact(display)),
                )
                .help("pin a git source to a commit instead: git+https://host/repo#<commit> or github:owner/repo@<commit>"));
            }
            fetch_git(url, reference.as_deref(), protocol, work, limits)
        }
        Source::Nostr { .. } => Err(DistError::new(
            code::Source::Invalid,
            "a nostr: source is installed from relays: give them with --relay URL",
        )),
    }
}

/// Copies the archive `path` into `work` while hashing it, checked against `pin` when given, else
/// against `<path>.sha256`. Without that file: an error when `required`, else the copy and its
/// digest, vouched for by nothing.
pub fn fetch_file_checked(
    path: &Path,
    work: &Path,
    limits: &Limits,
    progress: bool,
    pin: Option<&str>,
    required: bool,
) -> Result<(PathBuf, String, Vouched)> {
    let meta = std::fs::metadata(path).map_err(|e| {
        DistError::new(
            code::Source::NotFound,
            format!("cannot open {}: {e}", path.display()),
        )
    })?;
    if !meta.is_file() {
        return Err(DistError::new(
            code::Source::NotFile,
            format!(
                "{} is not a .buzzpack file (to install from a directory, build it first with `apiary pack build`)",
                path.display()
            ),
        ));
    }
    let published = if pin.is_some() {
        None
    } else {
        published_beside(path, required)?
    };
    let mut input = crate::safe_fs::open_regular(path, crate::safe_fs::FinalLink::Follow)
        .map_err(|e| DistError::io("cannot open", path, e))?
        .0;
    let copy = work.join("download");
    let bar = super::progress_bar(meta.len(), "copying", progress);
    let what = path.display().to_string();
    let actual = copy_hashing(&mut input, &copy, limits.max_archive_bytes, &what, &bar)?;
    let file_name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let vouched = verdict(&what, file_name, pin, published, &actual)?;
    Ok((copy, actual, vouched))
}

/// The checksum in `<path>.sha256`: `None` when there is no such file and it is not `required`.
fn published_beside(path: &Path, required: bool) -> Result<Option<(String, Option<String>)>> {
    let sum_path = PathBuf::from(format!("{}.sha256", path.display()));
    match std::fs::metadata(&sum_path) {
        // A FIFO reports size 0: read without blocking, regular files only.
        Ok(m) if m.len() <= MAX_CHECKSUM_BYTES => {
            let text = crate::safe_fs::read_regular(
                &sum_path,
                crate::safe_fs::FinalLink::Follow,
                MAX_CHECKSUM_BYTES,
            )
            .and_then(|b| String::from_utf8(b).map_err(std::io::Error::other))
            .map_err(|e| DistError::io("cannot read", &sum_path, e))?;
            parse_checksum(&text, &sum_path.display().to_string()).map(Some)
        }
        Ok(_) => Err(DistError::new(
            code::Checksum::Invalid,
            format!("{} is too large to be a checksum file", sum_path.display()),
        )),
        Err(_) if !required => Ok(None),
        Err(_) => Err(DistError::new(
            code::Checksum::Missing,
            format!(
                "no checksum file {}: a .buzzpack must ship with its .sha256 (spec §11); refusing to install",
                sum_path.display()
            ),
        )
        .help("put the <name>.buzzpack.sha256 from the release beside the archive (`apiary pack build` writes both), or pin the digest with --sha256 <64 hex digits>")),
    }
}

/// Over `https://`, redirects to plain `http://` are refused too.
pub(super) fn agent(https_only: bool) -> ureq::Agent {
    ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(300)))
        .max_redirects(5)
        .https_only(https_only)
        .user_agent(concat!("apiary/", env!("CARGO_PKG_VERSION")))
        .build()
        .new_agent()
}

/// `shown` is the redacted URL.
fn http_error(shown: &str, e: ureq::Error) -> DistError {
    match e {
        ureq::Error::StatusCode(code) => DistError::new(
            code::Fetch::HttpStatus,
            format!("GET {shown} answered HTTP {code}"),
        ),
        other => DistError::new(code::Fetch::Http, format!("GET {shown} failed: {other}")),
    }
}

/// Downloads `url` into `work` while hashing it, checked against `pin` when given, else against
/// `<url>.sha256`. A plain `http://` URL needs `pin`. When the server has no `.sha256` (an HTTP
/// error status): an error when `required`, else the download and its digest, vouched for by
/// nothing.
pub fn fetch_http_checked(
    url: &str,
    work: &Path,
    limits: &Limits,
    progress: bool,
    pin: Option<&str>,
    required: bool,
) -> Result<(PathBuf, String, Vouched)> {
    let shown = redact(url);
    let https = url.starts_with("https://");
    if !https && pin.is_none() {
        return Err(DistError::new(
            code::Fetch::InsecureHttp,
            format!("{shown} is plain http: its .sha256 would come from the same unauthenticated server as the archive, so it cannot vouch for it; refusing to install"),
        )
        .help("use an https:// URL, or pin the digest you got from a trusted place: apiary install --sha256 <64 hex digits> <url>"));
    }
    let agent = agent(https);
    let published = if pin.is_some() {
        None
    } else {
        published_at(&agent, url, required)?
    };
    let (copy, actual) = download(&agent, url, work, limits, progress)?;
    let file_name = url
        .split(['?', '#'])
        .next()
        .and_then(|u| u.rsplit('/').next())
        .unwrap_or("");
    let vouched = verdict(&shown, file_name, pin, published, &actual)?;
    Ok((copy, actual, vouched))
}

/// The checksum published at `<url>.sha256`: `None` when the server has none and it is not
/// `required`.
fn published_at(
    agent: &ureq::Agent,
    url: &str,
    required: bool,
) -> Result<Option<(String, Option<String>)>> {
    let sum_url = checksum_url(url);
    let sum_shown = redact(&sum_url);
    let text = match agent.get(&sum_url).call() {
        Ok(mut resp) => resp
            .body_mut()
            .with_config()
            .limit(MAX_CHECKSUM_BYTES)
            .read_to_string()
            .map_err(|e| {
                DistError::new(
                    code::Checksum::Invalid,
                    format!("cannot read {sum_shown}: {e}"),
                )
            })?,
        Err(ureq::Error::StatusCode(_)) if !required => return Ok(None),
        Err(ureq::Error::StatusCode(code)) => {
            return Err(DistError::new(
                code::Checksum::Missing,
                format!("no checksum at {sum_shown} (HTTP {code}): a .buzzpack must ship with its .sha256 (spec §11); refusing to install"),
            )
            .help("publish <name>.buzzpack.sha256 beside the archive (`apiary pack build` writes it), or pin the digest with --sha256 <64 hex digits>"));
        }
        Err(e) => return Err(http_error(&sum_shown, e)),
    };
    parse_checksum(&text, &sum_shown).map(Some)
}

/// The author's signature published at `<url>.sig.json` (beside the archive, as `pack sign`
/// writes it), checked: `None` when the server has none.
pub fn signature_at(url: &str) -> Result<Option<super::signature::Signed>> {
    let sig_url = match url.find(['?', '#']) {
        Some(i) => format!("{}{}{}", &url[..i], super::signature::SUFFIX, &url[i..]),
        None => format!("{url}{}", super::signature::SUFFIX),
    };
    let shown = redact(&sig_url);
    let text = match agent(url.starts_with("https://")).get(&sig_url).call() {
        Ok(mut resp) => resp
            .body_mut()
            .with_config()
            .limit(super::signature::MAX_EVENT_BYTES)
            .read_to_string()
            .map_err(|e| {
                DistError::new(
                    code::Signature::Malformed,
                    format!("cannot read {shown}: {e}"),
                )
            })?,
        // No signature published (object stores answer 403 for a missing file): unsigned, which
        // the author pin refuses for a pack installed signed.
        Err(ureq::Error::StatusCode(_)) => return Ok(None),
        Err(e) => return Err(http_error(&shown, e)),
    };
    super::signature::parse(&text, &shown).map(Some)
}

/// Downloads `url` to `<work>/download`, within the archive size limit; returns the file and its
/// digest.
fn download(
    agent: &ureq::Agent,
    url: &str,
    work: &Path,
    limits: &Limits,
    progress: bool,
) -> Result<(PathBuf, String)> {
    let shown = redact(url);
    let mut resp = agent.get(url).call().map_err(|e| http_error(&shown, e))?;
    let len = resp.body().content_length();
    if let Some(n) = len
        && n > limits.max_archive_bytes
    {
        return Err(DistError::new(
            code::Archive::TooLarge,
            format!(
                "{shown} is {n} bytes; the limit is {} MiB",
                limits.max_archive_bytes / (1024 * 1024)
            ),
        ));
    }
    let bar = super::progress_bar(len.unwrap_or(0), "downloading", progress);
    let copy = work.join("download");
    let mut reader = resp
        .body_mut()
        .with_config()
        .limit(limits.max_archive_bytes.saturating_add(1))
        .reader();
    let actual = copy_hashing(&mut reader, &copy, limits.max_archive_bytes, &shown, &bar)?;
    Ok((copy, actual))
}

/// Environment variables git may keep: finding programs, temporary files, and the operator's
/// proxy and certificate settings for https. Everything else (`GIT_*` overrides, `HOME` with its
/// config and credential helpers) is left behind.
const GIT_PASS_ENV: &[&str] = &[
    "PATH",
    "TMPDIR",
    "HTTPS_PROXY",
    "https_proxy",
    "HTTP_PROXY",
    "http_proxy",
    "ALL_PROXY",
    "all_proxy",
    "NO_PROXY",
    "no_proxy",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "GIT_SSL_CAINFO",
    "GIT_SSL_CAPATH",
    "CURL_CA_BUNDLE",
];

/// The limits on the git commands of one install.
struct GitBudget {
    deadline: Instant,
    timeout: Duration,
    max_bytes: u64,
    /// Files a checkout may write (the install limit); a clone's own `.git` does not count.
    max_files: usize,
    /// The user URL's credentials, scrubbed from git's messages.
    secrets: Vec<String>,
}

/// A positive whole number from the environment, at most `max` (a deadline past what a clock can
/// hold would panic), else `default`.
fn env_number(name: &str, default: u64, max: u64) -> Result<u64> {
    match std::env::var(name) {
        Err(_) => Ok(default),
        Ok(v) if v.trim().is_empty() => Ok(default),
        Ok(v) => v
            .trim()
            .parse::<u64>()
            .ok()
            .filter(|n| (1..=max).contains(n))
            .ok_or_else(|| {
                DistError::new(
                    code::Source::GitLimit,
                    format!("{name}=`{v}` is not a whole number from 1 to {max}"),
                )
            }),
    }
}

impl GitBudget {
    fn from_env(url: &str, limits: &Limits) -> Result<GitBudget> {
        let timeout = Duration::from_secs(env_number(
            GIT_TIMEOUT_ENV,
            GIT_TIMEOUT_DEFAULT,
            GIT_TIMEOUT_MAX,
        )?);
        let max_bytes =
            env_number(GIT_MAX_ENV, GIT_MAX_MIB_DEFAULT, GIT_MAX_MIB_MAX)?.saturating_mul(1 << 20);
        Ok(GitBudget {
            deadline: Instant::now() + timeout,
            timeout,
            max_bytes,
            max_files: limits.max_entries,
            secrets: secrets_of(url),
        })
    }
}

/// A git command for `protocol` in a clean environment whose `HOME` is the empty `home`.
fn git(protocol: &str, home: &Path) -> Command {
    let mut cmd = Command::new("git");
    cmd.env_clear();
    for name in GIT_PASS_ENV {
        if let Some(v) = std::env::var_os(name) {
            cmd.env(name, v);
        }
    }
    cmd.env("HOME", home)
        .env("XDG_CONFIG_HOME", home)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_ALLOW_PROTOCOL", protocol)
        .env("GIT_PROTOCOL_FROM_USER", "0")
        .env("LC_ALL", "C")
        .args(["-c", "core.hooksPath=/dev/null"])
        .args(["-c", "core.fsmonitor=false"])
        .args(["-c", "core.protectNTFS=true"])
        .args(["-c", "core.protectHFS=true"])
        .args(["-c", "credential.helper="])
        .args(["-c", "protocol.allow=never"])
        .args(["-c", &format!("protocol.{protocol}.allow=always")])
        .args(["-c", "submodule.recurse=false"])
        .args(["-c", "transfer.fsckObjects=true"])
        .args(["-c", "gc.auto=0"])
        .args(["-c", "maintenance.auto=false"])
        .args(["-c", "advice.detachedHead=false"])
        .stdin(std::process::Stdio::null());
    cmd
}

/// Bytes of the regular files under `dir`, and how many of them are outside its top-level `.git`
/// (vanishing files are skipped: git renames as it goes).
fn tree_stats(dir: &Path) -> (u64, usize) {
    let (mut bytes, mut files) = (0, 0);
    let mut stack = vec![(dir.to_path_buf(), false)];
    while let Some((d, in_git)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            match e.file_type() {
                Ok(t) if t.is_dir() => {
                    let git = in_git || (d == dir && e.file_name() == ".git");
                    stack.push((e.path(), git));
                }
                Ok(t) => {
                    if t.is_file() {
                        bytes += e.metadata().map(|m| m.len()).unwrap_or(0);
                    }
                    files += usize::from(!in_git);
                }
                Err(_) => {}
            }
        }
    }
    (bytes, files)
}

/// Kills git and everything it started (transport helpers, index-pack): they share its process
/// group. Called before the leader is reaped, so the group id cannot have been reused.
#[cfg(unix)]
fn kill_group(child: &mut std::process::Child) {
    let pgid = child.id() as libc::pid_t;
    // SAFETY: plain syscalls on a process group this process created and has not yet reaped.
    unsafe {
        libc::kill(-pgid, libc::SIGKILL);
    }
    let _ = child.wait();
    // The helpers die asynchronously; give them a moment so nothing writes after we clean up.
    let until = Instant::now() + Duration::from_secs(1);
    // SAFETY: as above; signal 0 only checks whether any member is left.
    while Instant::now() < until && unsafe { libc::kill(-pgid, 0) } == 0 {
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[cfg(not(unix))]
fn kill_group(child: &mut std::process::Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// Why git could not be started: not on `PATH` (the hint says so), or something else (said as
/// it is; a git that exists is not "missing").
pub(super) fn git_spawn_error(what: &str, e: std::io::Error) -> DistError {
    if e.kind() == std::io::ErrorKind::NotFound {
        DistError::new(
            code::Git::Missing,
            format!("cannot run git for {what}: {e}"),
        )
        .help("git sources need the `git` command on PATH")
    } else {
        DistError::new(
            code::Git::Failed,
            format!("cannot start git for {what}: {e}"),
        )
    }
}

/// The scratch files a git run writes its output to could not be made: the temporary directory
/// is not writable (a read-only root filesystem without a volume at /tmp).
fn scratch_error(e: std::io::Error) -> DistError {
    let dir = std::env::temp_dir();
    DistError::new(
        code::Code::Io,
        format!("cannot make a scratch file in {}: {e}", dir.display()),
    )
    .help(
        "point TMPDIR at a writable directory (on Kubernetes: an emptyDir volume mounted at /tmp)",
    )
}

/// Runs a git command within `budget`, watching the size of `watch` (the clone directory) while
/// it runs. Returns stdout.
fn run_git(mut cmd: Command, what: &str, budget: &GitBudget, watch: &Path) -> Result<String> {
    // Files rather than pipes: nothing to drain while we poll, and a chatty git cannot block.
    let scratch = || tempfile::tempfile().map_err(scratch_error);
    let (mut out, mut err) = (scratch()?, scratch()?);
    cmd.stdout(out.try_clone().map_err(scratch_error)?)
        .stderr(err.try_clone().map_err(scratch_error)?);
    #[cfg(unix)]
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let mut child = cmd.spawn().map_err(|e| git_spawn_error(what, e))?;
    let mut next_size_check = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) => {}
            Err(e) => {
                kill_group(&mut child);
                return Err(DistError::new(
                    code::Git::Failed,
                    format!("{what}: cannot wait for git: {e}"),
                ));
            }
        }
        let now = Instant::now();
        if now >= budget.deadline {
            kill_group(&mut child);
            return Err(DistError::new(
                code::Git::Timeout,
                format!(
                    "{what} did not finish within {} s; stopped it",
                    budget.timeout.as_secs()
                ),
            )
            .help(format!("a slow or stalling server; if the repository is just slow to fetch, raise {GIT_TIMEOUT_ENV}")));
        }
        if now >= next_size_check {
            let (size, files) = tree_stats(watch);
            if size > budget.max_bytes {
                kill_group(&mut child);
                return Err(too_large(what, size, budget));
            }
            if files > budget.max_files {
                kill_group(&mut child);
                return Err(tree_count::too_many_files(budget.max_files));
            }
            next_size_check = now + Duration::from_millis(200);
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let read = |f: &mut File| {
        let mut text = String::new();
        let _ = f.rewind();
        let _ = f.take(64 * 1024).read_to_string(&mut text);
        text
    };
    if !status.success() {
        let text = read(&mut err);
        let text: String = text.trim().chars().take(2000).collect();
        return Err(DistError::new(
            code::Git::Failed,
            format!("{what} failed: {}", scrub(&text, &budget.secrets)),
        ));
    }
    Ok(read(&mut out).trim().to_string())
}

fn too_large(what: &str, size: u64, budget: &GitBudget) -> DistError {
    DistError::new(
        code::Git::TooLarge,
        format!(
            "{what}: the clone grew past the {} MiB limit ({size} bytes so far); stopped it",
            budget.max_bytes >> 20
        ),
    )
    .help(format!(
        "a pack repository should be small; if this one really is larger, raise {GIT_MAX_ENV} (MiB)"
    ))
}

fn fetch_git(
    url: &str,
    reference: Option<&str>,
    protocol: &str,
    work: &Path,
    limits: &Limits,
) -> Result<Fetched> {
    if url.starts_with('-') {
        return Err(bad_source(url, "a repository URL cannot start with `-`"));
    }
    let budget = GitBudget::from_env(url, limits)?;
    let home = work.join("git-home");
    std::fs::create_dir(&home).map_err(|e| DistError::io("cannot create", &home, e))?;
    let dir = work.join("checkout");
    let what = format!("git clone {}", redact(url));
    // Nothing is checked out until the commit's file count is known.
    let target = clone_objects(url, reference, protocol, &home, &dir, &budget, &what)?;
    let in_repo = || {
        let mut cmd = git(protocol, &home);
        cmd.arg("-C").arg(&dir);
        cmd
    };
    let mut cmd = in_repo();
    cmd.args(["rev-parse", "--verify", "--quiet", "--end-of-options"])
        .arg(format!("{target}^{{commit}}"));
    let commit = run_git(cmd, "git rev-parse", &budget, &dir).map_err(|e| match reference {
        Some(r) if e.code == code::Code::from(code::Git::Failed) => DistError::new(
            code::Git::Ref,
            format!("cannot find ref `{r}` in {}", redact(url)),
        ),
        _ => e,
    })?;
    if !(commit.len() == 40 || commit.len() == 64) || !commit.bytes().all(|b| b.is_ascii_hexdigit())
    {
        return Err(DistError::new(
            code::Git::Failed,
            format!("git reported an unexpected commit id `{commit}`"),
        ));
    }
    tree_count::files_within(in_repo(), &commit, budget.max_files, &budget)?;
    let mut cmd = in_repo();
    cmd.args(["checkout", "--quiet", "--detach", &commit, "--"]);
    run_git(cmd, &format!("git checkout {commit}"), &budget, &dir)?;
    // A checkout that finished between two checks is measured once more.
    let (size, files) = tree_stats(&dir);
    if size > budget.max_bytes {
        return Err(too_large(&what, size, &budget));
    }
    if files > budget.max_files {
        return Err(tree_count::too_many_files(budget.max_files));
    }
    Ok(Fetched::Tree { dir, commit })
}

/// Clones the repository's objects into `dir` without checking anything out: shallow at the ref
/// when `--branch` takes it, else in full (a commit id). Returns what to check out.
fn clone_objects(
    url: &str,
    reference: Option<&str>,
    protocol: &str,
    home: &Path,
    dir: &Path,
    budget: &GitBudget,
    what: &str,
) -> Result<String> {
    let mut cmd = git(protocol, home);
    cmd.args([
        "clone",
        "--quiet",
        "--no-tags",
        "--no-checkout",
        "--depth",
        "1",
    ]);
    if let Some(r) = reference {
        cmd.args(["--branch", r]);
    }
    cmd.arg("--").arg(url).arg(dir);
    match run_git(cmd, what, budget, dir) {
        Ok(_) => return Ok("HEAD".into()),
        // Only a ref `--branch` does not take is worth a second, full clone; never a clone that
        // was stopped for its size or time.
        Err(e) if e.code != "git.failed" || reference.is_none() => return Err(e),
        Err(_) => {}
    }
    // `--branch` takes branches and tags; a commit id needs a full clone.
    let _ = std::fs::remove_dir_all(dir);
    let mut cmd = git(protocol, home);
    cmd.args(["clone", "--quiet", "--no-checkout", "--"])
        .arg(url)
        .arg(dir);
    run_git(cmd, what, budget, dir)?;
    Ok(reference.unwrap_or("HEAD").to_string())
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
        assert_eq!(
            redact("https://h/x.zip?X-Amz-Signature=abc&v=2&api_key=&token=t#f"),
            "https://h/x.zip?X-Amz-Signature=REDACTED&v=2&api_key=&token=REDACTED#f"
        );
        assert_eq!(redact("https://tok@h/a?b"), "https://h/a?b");
    }

    #[test]
    fn secrets_are_found_and_scrubbed() {
        let s = secrets_of("git+https://user:p%40ssw0rd@h/r.git?token=abcdef&v=1");
        for want in ["user:p%40ssw0rd", "p%40ssw0rd", "p@ssw0rd", "abcdef"] {
            assert!(s.iter().any(|x| x == want), "{want} missing from {s:?}");
        }
        assert!(!s.iter().any(|x| x == "1"));
        // A token as the user name; a short user name alone is not scrubbed from prose.
        assert_eq!(secrets_of("https://ghp_0123456789@h/r"), ["ghp_0123456789"]);
        assert!(secrets_of("https://git@h/r").is_empty());
        let text = "fatal: unable to access 'https://user:p%40ssw0rd@h/r.git/': p@ssw0rd";
        let clean = scrub(text, &s);
        assert!(!clean.contains("ssw0rd"), "{clean}");
        let e = scrub_error(
            DistError::new(code::Fetch::Http, format!("GET {text}")).help("see abcdef"),
            "https://user:p%40ssw0rd@h/r?token=abcdef",
        );
        assert!(!e.message.contains("ssw0rd") && !e.help.unwrap().contains("abcdef"));
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
