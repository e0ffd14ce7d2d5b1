//! Who made a pack: an author's signature over an archive, as a Nostr event.
//!
//! The signature is a NIP-94 file metadata event (kind 1063) signed by the author's key, so relays
//! and Nostr clients already understand it; `apiary pack sign` writes it beside the archive as
//! `<archive>.sig.json`, and `apiary publish` sends it to relays (with the blob servers' URLs).
//! It names the archive by its digest and the pack by id and version:
//!
//! | tag | value |
//! |---|---|
//! | `x`, `ox` | the archive's SHA-256 (NIP-94: the file's and the original file's) |
//! | `m`, `size` | [`MIME`], the archive's length in bytes |
//! | `L` / `l` | the label namespace [`LABEL`] and the pack id (NIP-32: relays index `#l`) |
//! | `t` | [`LABEL`], so a relay can list every pack (`#t`) |
//! | `version`, `alt`, `summary` | the pack's version; a line for clients that do not know packs; its description |
//! | `url`, `fallback` | where `publish` put the blob (absent in a signature made before publishing) |
//!
//! Checking one ([`check`]) verifies the event's id and Schnorr signature and reads these tags; the
//! archive's digest, id and version are then compared with what is installed
//! ([`Signed::vouches_for_digest`], [`Signed::vouches_for_pack`]).

use std::path::{Path, PathBuf};

use nostr_sdk::prelude::{
    Event, EventBuilder, JsonUtil, Keys, Kind, PublicKey, Tag, TagKind, Timestamp, ToBech32,
};

use super::code::Signature as Code;
use super::{DistError, Result, is_sha256_hex};

/// The media type an archive is published as.
pub const MIME: &str = "application/vnd.buzz.pack+zip";
/// The label (and hashtag) every pack event carries.
pub const LABEL: &str = "buzzpack";
/// The signature's file name is the archive's plus this.
pub const SUFFIX: &str = ".sig.json";
/// A signature file (or a relay's event) larger than this is refused unread.
pub const MAX_EVENT_BYTES: u64 = 64 * 1024;
/// At most this many blob URLs are read from one event.
const MAX_URLS: usize = 8;
/// A description is carried up to this many characters.
const DESCRIPTION_MAX: usize = 2048;

/// What an author's signature says about an archive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    pub pack_id: String,
    pub version: String,
    pub sha256: String,
    pub size: u64,
    pub description: String,
    /// Where the archive can be downloaded (`url` then `fallback` tags).
    pub urls: Vec<String>,
}

/// A signature that verified: its event, author and claim.
#[derive(Debug, Clone)]
pub struct Signed {
    pub event: Event,
    pub claim: Claim,
}

impl Signed {
    pub fn author(&self) -> PublicKey {
        self.event.pubkey
    }

    /// The author's key as `npub1…`.
    pub fn npub(&self) -> String {
        npub(&self.author())
    }

    pub fn signed_at(&self) -> Timestamp {
        self.event.created_at
    }

    /// Refuses an archive other than the one signed (changed after signing, or another file).
    pub fn vouches_for_digest(&self, sha256: &str, shown: &str) -> Result<()> {
        if self.claim.sha256 == sha256 {
            return Ok(());
        }
        Err(DistError::new(
            Code::DigestMismatch,
            format!(
                "{shown} is not the archive {} signed: the signature names sha256 {}, the archive is {sha256}; refusing to install",
                self.npub(),
                self.claim.sha256
            ),
        )
        .help("the archive changed after it was signed (or the signature belongs to another archive): get both files again from the author"))
    }

    /// Refuses a signature naming another pack or version than the archive holds.
    pub fn vouches_for_pack(&self, pack_id: &str, version: &str) -> Result<()> {
        if self.claim.pack_id == pack_id && self.claim.version == version {
            return Ok(());
        }
        Err(DistError::new(
            Code::PackMismatch,
            format!(
                "the signature is for {} {}, but the archive holds {pack_id} {version}; refusing to install",
                self.claim.pack_id, self.claim.version
            ),
        ))
    }
}

/// `npub1…` for `key`.
pub fn npub(key: &PublicKey) -> String {
    key.to_bech32().unwrap_or_else(|_| key.to_hex())
}

/// The signature file of `archive`.
pub fn beside(archive: &Path) -> PathBuf {
    let mut name = archive.as_os_str().to_owned();
    name.push(SUFFIX);
    PathBuf::from(name)
}

/// The event `keys` signs for `claim`.
pub fn sign(keys: &Keys, claim: &Claim) -> Result<Event> {
    let description = bounded(&claim.description, DESCRIPTION_MAX);
    let mut tags = vec![
        tag(&["x", &claim.sha256]),
        tag(&["ox", &claim.sha256]),
        tag(&["m", MIME]),
        tag(&["size", &claim.size.to_string()]),
        tag(&["L", LABEL]),
        tag(&["l", &claim.pack_id, LABEL]),
        tag(&["t", LABEL]),
        tag(&["version", &claim.version]),
        tag(&[
            "alt",
            &format!("Persona pack {} {}", claim.pack_id, claim.version),
        ]),
    ];
    if !description.is_empty() {
        tags.push(tag(&["summary", &description]));
    }
    for (i, url) in claim.urls.iter().take(MAX_URLS).enumerate() {
        tags.push(tag(&[if i == 0 { "url" } else { "fallback" }, url]));
    }
    EventBuilder::new(Kind::FileMetadata, description)
        .tags(tags)
        .sign_with_keys(keys)
        .map_err(|e| DistError::new(Code::Sign, format!("cannot sign: {e}")))
}

/// A tag from its name and values, as written.
fn tag(parts: &[&str]) -> Tag {
    Tag::custom(TagKind::from(parts[0]), parts[1..].iter().copied())
}

fn bounded(text: &str, max: usize) -> String {
    text.chars().take(max).collect()
}

/// Parses and checks a signature's JSON (from a file or a relay); `shown` names it in errors.
pub fn parse(json: &str, shown: &str) -> Result<Signed> {
    if json.len() as u64 > MAX_EVENT_BYTES {
        return Err(malformed(
            shown,
            format_args!("it is over {MAX_EVENT_BYTES} bytes"),
        ));
    }
    let event = Event::from_json(json)
        .map_err(|e| malformed(shown, format_args!("not a Nostr event: {e}")))?;
    check(event, shown)
}

/// Verifies `event` (id, signature, kind) and reads its claim.
pub fn check(event: Event, shown: &str) -> Result<Signed> {
    if event.verify().is_err() {
        return Err(DistError::new(
            Code::Invalid,
            format!(
                "the signature in {shown} does not verify (its id or Schnorr signature is not the author's): it was forged or altered; refusing to install"
            ),
        ));
    }
    if event.kind != Kind::FileMetadata {
        return Err(DistError::new(
            Code::Kind,
            format!(
                "{shown} is a kind {} event, not a pack signature (NIP-94 kind 1063)",
                event.kind.as_u16()
            ),
        ));
    }
    let claim = read_claim(&event).map_err(|why| malformed(shown, why))?;
    Ok(Signed { event, claim })
}

fn malformed(shown: &str, why: impl std::fmt::Display) -> DistError {
    DistError::new(
        Code::Malformed,
        format!("{shown} is not a pack signature: {why}"),
    )
}

/// The first value of tag `name`.
fn value<'a>(event: &'a Event, name: &'a str) -> Option<&'a str> {
    values(event, name).next().map(|v| v[1].as_str())
}

/// Every tag `name` with at least one value, as its whole list.
fn values<'a>(event: &'a Event, name: &'a str) -> impl Iterator<Item = &'a [String]> + 'a {
    event
        .tags
        .iter()
        .map(Tag::as_slice)
        .filter(move |t| t.len() >= 2 && t[0] == name)
}

fn read_claim(event: &Event) -> std::result::Result<Claim, String> {
    let sha256 = value(event, "x").ok_or("no `x` tag (the archive's sha256)")?;
    if !is_sha256_hex(sha256) {
        return Err(format!("its `x` tag {sha256:?} is not a sha256 digest"));
    }
    let pack_id = values(event, "l")
        .find(|t| t.get(2).map(String::as_str) == Some(LABEL))
        .map(|t| t[1].clone())
        .ok_or(format!("no `l` tag labelled {LABEL} (the pack id)"))?;
    let version = value(event, "version").ok_or("no `version` tag")?;
    let size = match value(event, "size") {
        Some(s) => s
            .parse()
            .map_err(|_| format!("its `size` tag {s:?} is not a number"))?,
        None => 0,
    };
    let urls = values(event, "url")
        .chain(values(event, "fallback"))
        .map(|t| t[1].clone())
        .filter(|u| u.starts_with("https://") || u.starts_with("http://"))
        .take(MAX_URLS)
        .collect();
    Ok(Claim {
        pack_id,
        version: version.to_string(),
        sha256: sha256.to_ascii_lowercase(),
        size,
        description: bounded(
            value(event, "summary").unwrap_or(&event.content),
            DESCRIPTION_MAX,
        ),
        urls,
    })
}

/// The signature beside `archive`, checked: `None` when there is none.
pub fn read_beside(archive: &Path, shown: &str) -> Result<Option<Signed>> {
    let path = beside(archive);
    let bytes = match crate::safe_fs::read_regular(
        &path,
        crate::safe_fs::FinalLink::Follow,
        MAX_EVENT_BYTES + 1,
    ) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(DistError::io("cannot read", &path, e)),
    };
    let text = String::from_utf8_lossy(&bytes);
    parse(&text, &format!("{shown}{SUFFIX}")).map(Some)
}

/// Writes `event` as the signature of `archive` (replacing an older one).
pub fn write_beside(archive: &Path, event: &Event) -> Result<PathBuf> {
    let path = beside(archive);
    let mut json = event.as_json();
    json.push('\n');
    std::fs::write(&path, json).map_err(|e| DistError::io("cannot write", &path, e))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim() -> Claim {
        Claim {
            pack_id: "com.example.team".into(),
            version: "1.2.0".into(),
            sha256: "ab".repeat(32),
            size: 1234,
            description: "A team".into(),
            urls: vec!["https://blobs.example/abab".into()],
        }
    }

    #[test]
    fn a_signature_reads_back_and_names_its_author() {
        let keys = Keys::generate();
        let event = sign(&keys, &claim()).unwrap();
        let signed = parse(&event.as_json(), "x").unwrap();
        assert_eq!(signed.claim, claim());
        assert_eq!(signed.author(), keys.public_key());
        assert!(signed.npub().starts_with("npub1"));
        signed.vouches_for_digest(&"ab".repeat(32), "x").unwrap();
        signed
            .vouches_for_pack("com.example.team", "1.2.0")
            .unwrap();
        let e = signed
            .vouches_for_digest(&"cd".repeat(32), "x")
            .unwrap_err();
        assert_eq!(e.code.to_string(), "signature.digest-mismatch");
        let e = signed
            .vouches_for_pack("com.example.team", "1.3.0")
            .unwrap_err();
        assert_eq!(e.code.to_string(), "signature.pack-mismatch");
    }

    #[test]
    fn an_altered_signature_is_refused() {
        let event = sign(&Keys::generate(), &claim()).unwrap();
        let json = event.as_json().replace("1.2.0", "9.9.9");
        assert_eq!(
            parse(&json, "x").unwrap_err().code.to_string(),
            "signature.invalid"
        );
        let other = EventBuilder::text_note("hi")
            .sign_with_keys(&Keys::generate())
            .unwrap();
        assert_eq!(
            parse(&other.as_json(), "x").unwrap_err().code.to_string(),
            "signature.kind"
        );
        assert_eq!(
            parse("{", "x").unwrap_err().code.to_string(),
            "signature.malformed"
        );
        let big = "x".repeat(MAX_EVENT_BYTES as usize + 1);
        assert_eq!(
            parse(&big, "x").unwrap_err().code.to_string(),
            "signature.malformed"
        );
    }
}
