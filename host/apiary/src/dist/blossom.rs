//! The client side of a Blossom blob server: `PUT /upload` authorised by a signed kind 24242 event
//! (BUD-01, BUD-02) and `GET /<sha256>`, every download capped and hashed as it arrives.
//!
//! (The `nostr-blossom` crate's client reads a whole blob into memory with no bound and brings a
//! second HTTP stack; a hostile server could send it gigabytes. The auth event is a few tags.)

use std::io::Read;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use nostr_sdk::prelude::{EventBuilder, JsonUtil, Keys, Kind, Tag, TagKind, Timestamp};

use super::code::Blob;
use super::fetch::{self, redact};
use super::{DistError, Result};

/// How long an upload authorisation is valid.
const AUTH_SECONDS: u64 = 300;
/// A server's upload answer (a blob descriptor) is read up to this size.
const MAX_DESCRIPTOR_BYTES: u64 = 16 * 1024;

/// `Authorization: Nostr <base64 event>` for uploading the blob `sha256`.
pub fn upload_authorization(keys: &Keys, sha256: &str) -> Result<String> {
    let expires = Timestamp::from(Timestamp::now().as_secs() + AUTH_SECONDS);
    let event = EventBuilder::new(Kind::BlossomAuth, "Upload a persona pack")
        .tags([
            Tag::hashtag("upload"),
            Tag::custom(TagKind::x(), [sha256]),
            Tag::expiration(expires),
        ])
        .sign_with_keys(keys)
        .map_err(|e| {
            DistError::new(
                Blob::Upload,
                format!("cannot sign the upload authorisation: {e}"),
            )
        })?;
    let b64 = base64::engine::general_purpose::STANDARD.encode(event.as_json());
    Ok(format!("Nostr {b64}"))
}

/// `<server>/<path>` without a doubled slash.
fn at(server: &str, path: &str) -> String {
    format!("{}/{path}", server.trim_end_matches('/'))
}

/// Uploads `bytes` (whose digest is `sha256`) to `server`; the URL it serves them at.
pub fn upload(server: &str, bytes: &[u8], sha256: &str, keys: &Keys) -> Result<String> {
    let url = at(server, "upload");
    let shown = redact(&url);
    let answer = fetch::agent(false)
        .put(&url)
        .header("Authorization", &upload_authorization(keys, sha256)?)
        .header("Content-Type", super::signature::MIME)
        .config()
        .http_status_as_error(false)
        .build()
        .send(bytes)
        .map_err(|e| DistError::new(Blob::Upload, format!("PUT {shown} failed: {e}")))?;
    let status = answer.status().as_u16();
    let reason = answer
        .headers()
        .get("x-reason")
        .and_then(|v| v.to_str().ok())
        .map(|r| format!(": {r}"))
        .unwrap_or_default();
    let mut body = answer.into_body();
    let text = body
        .with_config()
        .limit(MAX_DESCRIPTOR_BYTES)
        .read_to_string()
        .unwrap_or_default();
    if !(200..300).contains(&status) {
        return Err(DistError::new(
            Blob::Upload,
            format!("{shown} refused the upload (HTTP {status}{reason})"),
        ));
    }
    let descriptor: serde_json::Value = serde_json::from_str(&text).map_err(|_| {
        DistError::new(
            Blob::Upload,
            format!("{shown} answered with no blob descriptor"),
        )
    })?;
    if descriptor["sha256"].as_str() != Some(sha256) {
        return Err(DistError::new(
            Blob::Upload,
            format!(
                "{shown} stored another blob than the one sent (its sha256 is {})",
                descriptor["sha256"]
            ),
        ));
    }
    Ok(descriptor["url"]
        .as_str()
        .filter(|u| u.starts_with("http://") || u.starts_with("https://"))
        .map(str::to_string)
        .unwrap_or_else(|| at(server, sha256)))
}

/// The blob `sha256` from the first of `urls` that serves it whole and unaltered, into
/// `<work>/download`: at most `max` bytes are read from each, and every server's failure is kept
/// for the error.
pub fn download(urls: &[String], sha256: &str, max: u64, work: &Path) -> Result<PathBuf> {
    if urls.is_empty() {
        return Err(DistError::new(
            Blob::NoServer,
            format!("no blob server to download {sha256} from"),
        )
        .help("give one with --blobs URL (where the author published it)"));
    }
    let mut failures = Vec::new();
    for url in urls {
        match download_one(url, sha256, max, work) {
            Ok(path) => return Ok(path),
            Err(e) => failures.push(e),
        }
    }
    // One server: its own error. Several: the first kind that is not a plain miss, all listed.
    if failures.len() == 1 {
        return Err(failures.remove(0));
    }
    let code = failures
        .iter()
        .map(|e| e.code)
        .find(|c| *c != super::code::Code::from(Blob::Download))
        .unwrap_or(Blob::Download.into());
    let all: Vec<String> = failures.into_iter().map(|e| e.message).collect();
    Err(DistError::new(
        code,
        format!("no blob server served {sha256}: {}", all.join("; ")),
    ))
}

fn download_one(url: &str, sha256: &str, max: u64, work: &Path) -> Result<PathBuf> {
    let shown = redact(url);
    let mut resp = match fetch::agent(false).get(url).call() {
        Ok(r) => r,
        Err(e) => {
            return Err(DistError::new(Blob::Download, format!("GET {shown}: {e}")));
        }
    };
    if let Some(n) = resp.body().content_length()
        && n > max
    {
        return Err(too_large(&shown, max));
    }
    let copy = work.join("download");
    let mut reader = resp
        .body_mut()
        .with_config()
        .limit(max.saturating_add(1))
        .reader();
    let bar = indicatif::ProgressBar::hidden();
    let actual = fetch::copy_hashing(&mut reader as &mut dyn Read, &copy, max, &shown, &bar)
        .map_err(|e| match e.code {
            c if c == super::code::Code::from(super::code::Archive::TooLarge) => {
                too_large(&shown, max)
            }
            _ => DistError::new(Blob::Download, e.message),
        })?;
    if actual != sha256 {
        let _ = std::fs::remove_file(&copy);
        return Err(DistError::new(
            Blob::DigestMismatch,
            format!("{shown} served bytes whose sha256 is {actual}, not {sha256}; refusing them"),
        ));
    }
    Ok(copy)
}

fn too_large(shown: &str, max: u64) -> DistError {
    DistError::new(
        Blob::TooLarge,
        format!("{shown} is larger than the {max} bytes the pack's signature allows; refusing it"),
    )
}

/// `<server>/<sha256>`, where a Blossom server serves a blob.
pub fn blob_url(server: &str, sha256: &str) -> String {
    at(server, sha256)
}
