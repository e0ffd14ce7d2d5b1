//! A pack registry with no central server: authors publish their signed pack events (see
//! [`super::signature`]) to Nostr relays and the archives to Blossom blob servers; installers find
//! the event by pack id (`#l`), check its signature and the author pinned for the id, and download
//! the archive by its sha256 from any server the event (or the operator, `--blobs`) lists.
//!
//! A relay is not trusted for anything but availability: events that do not verify, that name
//! another pack, version or author, are set aside (and said so when nothing else is left); bytes
//! that do not hash to the signed sha256 are refused.

use std::path::Path;
use std::time::Duration;

use nostr_sdk::prelude::{Alphabet, Event, Filter, Keys, Kind, SingleLetterTag};
use serde::Serialize;

use super::archive::Limits;
use super::code::{Registry, Signature};
use super::fetch::{Fetched, redact};
use super::signature::{self, Claim, LABEL, Signed};
use super::{DistError, Result, blossom};
use crate::relay;

/// How long a relay gets to connect and to answer a query.
const RELAY_TIMEOUT: Duration = Duration::from_secs(10);
/// Events asked of a relay per query.
const QUERY_LIMIT: usize = 500;

/// Where packs are looked up: relays for the events, blob servers for the archives (besides the
/// ones each event lists).
#[derive(Debug, Clone, Default)]
pub struct Where {
    pub relays: Vec<String>,
    pub blobs: Vec<String>,
}

/// A pack found on the relays and downloaded.
pub struct Found {
    pub fetched: Fetched,
    pub signed: Signed,
}

/// Finds `pack_id` (at `version`, else the newest) on the relays of `place`, by `pinned` when an
/// author is pinned for it, and downloads its archive into `work`.
pub fn fetch(
    pack_id: &str,
    version: Option<&str>,
    place: Option<&Where>,
    pinned: Option<&str>,
    work: &Path,
    limits: &Limits,
) -> Result<Found> {
    let place = place.filter(|p| !p.relays.is_empty()).ok_or_else(|| {
        DistError::new(
            super::code::Source::Invalid,
            format!("nostr:{pack_id} is looked up on relays: give at least one with --relay URL"),
        )
    })?;
    let filter = Filter::new()
        .kind(Kind::FileMetadata)
        .custom_tag(SingleLetterTag::lowercase(Alphabet::L), pack_id);
    let events = query(&place.relays, filter)?;
    let signed = choose(pack_id, version, pinned, events)?;
    let claim = &signed.claim;
    let mut urls = claim.urls.clone();
    urls.extend(
        place
            .blobs
            .iter()
            .map(|b| blossom::blob_url(b, &claim.sha256)),
    );
    urls.dedup();
    let max = match claim.size {
        0 => limits.max_archive_bytes,
        n => n.min(limits.max_archive_bytes),
    };
    let path = blossom::download(&urls, &claim.sha256, max, work)?;
    Ok(Found {
        fetched: Fetched::Archive {
            path,
            sha256: claim.sha256.clone(),
        },
        signed,
    })
}

/// The event to install among what the relays sent: verified, for `pack_id` (and `version`), by
/// the `pinned` author when there is one; the newest version, then the newest event.
fn choose(
    pack_id: &str,
    version: Option<&str>,
    pinned: Option<&str>,
    events: Vec<Event>,
) -> Result<Signed> {
    let mut forged = 0;
    let mut others = Vec::new();
    let mut ok: Vec<Signed> = Vec::new();
    for event in events {
        let Ok(s) = signature::check(event, "a relay's event") else {
            forged += 1;
            continue;
        };
        if s.claim.pack_id != pack_id || version.is_some_and(|v| v != s.claim.version) {
            continue;
        }
        if pinned.is_some_and(|p| p != s.npub()) {
            others.push(s.npub());
            continue;
        }
        ok.push(s);
    }
    let newest = ok.into_iter().max_by(|a, b| {
        let v = |s: &Signed| semver::Version::parse(&s.claim.version).ok();
        v(a).cmp(&v(b)).then(a.signed_at().cmp(&b.signed_at()))
    });
    if let Some(s) = newest {
        return Ok(s);
    }
    let wanted = match version {
        Some(v) => format!("{pack_id} {v}"),
        None => pack_id.to_string(),
    };
    if let (Some(p), false) = (pinned, others.is_empty()) {
        others.sort();
        others.dedup();
        return Err(DistError::new(
            Signature::AuthorChanged,
            format!(
                "{wanted} is pinned to the author {p}, but the relays only have it signed by {}; refusing to install it",
                others.join(", ")
            ),
        )
        .help("if the author really changed keys (ask them through a channel you trust), install again with --replace-author"));
    }
    if forged > 0 {
        return Err(DistError::new(
            Signature::Invalid,
            format!(
                "the relays sent {forged} event(s) for {wanted} whose signature does not verify, and no valid one; refusing to install"
            ),
        ));
    }
    Err(DistError::new(
        Registry::NotFound,
        format!("no signed pack event for {wanted} on the relays"),
    )
    .help("`apiary search WORDS --relay URL` lists the packs a relay has"))
}

/// The events of `filter` from every relay (each asked on its own; one that cannot be reached
/// fails the query only when none answers).
fn query(relays: &[String], filter: Filter) -> Result<Vec<Event>> {
    let rt = runtime()?;
    let result = rt.block_on(async {
        let mut events = Vec::new();
        let mut failures = Vec::new();
        for url in relays {
            let client = match relay::connect(url, RELAY_TIMEOUT).await {
                Ok(c) => c,
                Err(e) => {
                    failures.push(format!("{}: {e:#}", redact(url)));
                    continue;
                }
            };
            match client
                .fetch_events(filter.clone().limit(QUERY_LIMIT), RELAY_TIMEOUT)
                .await
            {
                Ok(found) => events.extend(found),
                Err(e) => failures.push(format!("{}: {e}", redact(url))),
            }
            relay::shutdown(&client).await;
        }
        if events.is_empty() && failures.len() == relays.len() {
            return Err(DistError::new(
                Registry::Relay,
                format!("no relay answered: {}", failures.join("; ")),
            ));
        }
        Ok(events)
    });
    rt.shutdown_timeout(Duration::from_secs(1));
    result
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| {
            DistError::new(
                Registry::Relay,
                format!("cannot start the async runtime: {e}"),
            )
        })
}

/// What `pack sign` and `publish` sign: the archive's digest and size, and its manifest's id,
/// version and description (read by unpacking it into a scratch directory, fenced).
pub fn describe(archive: &Path) -> Result<Claim> {
    let limits = Limits::default();
    let sha256 =
        super::sha256_file(archive).map_err(|e| DistError::io("cannot read", archive, e))?;
    let size = std::fs::metadata(archive)
        .map_err(|e| DistError::io("cannot read", archive, e))?
        .len();
    let scratch = tempfile::tempdir().map_err(|e| {
        DistError::io(
            "cannot create a scratch directory in",
            &std::env::temp_dir(),
            e,
        )
    })?;
    let bar = indicatif::ProgressBar::hidden();
    let shown = archive.display().to_string();
    super::archive::extract(archive, &shown, scratch.path(), &limits, &bar)?;
    let loaded = crate::pack::load(scratch.path());
    let Some(pack) = loaded.pack else {
        return Err(DistError::new(
            super::code::Pack::Invalid,
            format!("{shown} does not hold a valid pack; refusing to sign it"),
        )
        .with_report(loaded.report));
    };
    Ok(Claim {
        pack_id: pack.manifest.id.clone(),
        version: pack.manifest.version.clone(),
        sha256,
        size,
        description: pack.manifest.description.clone().unwrap_or_default(),
        urls: Vec::new(),
    })
}

/// Signs `archive` with `keys` (naming `urls`) and writes the signature beside it. A signature
/// already there by another author is not replaced.
pub fn sign_beside(archive: &Path, keys: &Keys, urls: Vec<String>) -> Result<Signed> {
    if let Ok(Some(old)) = signature::read_beside(archive, &archive.display().to_string())
        && old.author() != keys.public_key()
    {
        return Err(DistError::new(
            Signature::OtherAuthor,
            format!(
                "{} is signed by {}, not by this key ({}); refusing to replace another author's signature",
                signature::beside(archive).display(),
                old.npub(),
                signature::npub(&keys.public_key())
            ),
        )
        .help("sign with that author's key, or remove the old signature if you are taking the pack over"));
    }
    let mut claim = describe(archive)?;
    claim.urls = urls;
    let event = signature::sign(keys, &claim)?;
    signature::write_beside(archive, &event)?;
    signature::check(event, "the new signature")
}

/// What `publish` did.
#[derive(Debug, Serialize)]
pub struct Published {
    pub pack_id: String,
    pub version: String,
    pub sha256: String,
    pub author: String,
    pub event_id: String,
    /// Where the archive is served.
    pub urls: Vec<String>,
    /// The relays that took the event.
    pub relays: Vec<String>,
    pub signature_file: std::path::PathBuf,
}

/// Uploads `archive` to every blob server, signs its event naming where they serve it, writes it
/// beside the archive and publishes it to every relay. Any server or relay refusing fails it.
pub fn publish(archive: &Path, keys: &Keys, place: &Where) -> Result<Published> {
    let max = Limits::default().max_archive_bytes;
    // Within the size installs accept: a larger archive could be published but never installed.
    let bytes = crate::safe_fs::read_regular(archive, crate::safe_fs::FinalLink::Follow, max)
        .map_err(|e| DistError::io("cannot read", archive, e))?;
    let sha256 = super::sha256_hex(&bytes);
    let mut urls = Vec::new();
    for server in &place.blobs {
        urls.push(blossom::upload(server, &bytes, &sha256, keys)?);
    }
    let signed = sign_beside(archive, keys, urls.clone())?;
    let rt = runtime()?;
    let sent = rt.block_on(send(&place.relays, keys, &signed.event));
    rt.shutdown_timeout(Duration::from_secs(1));
    Ok(Published {
        pack_id: signed.claim.pack_id.clone(),
        version: signed.claim.version.clone(),
        sha256,
        author: signed.npub(),
        event_id: signed.event.id.to_hex(),
        urls,
        relays: sent?,
        signature_file: signature::beside(archive),
    })
}

/// Sends `event` to each relay (authenticating with `keys` where asked); the relays that took it.
async fn send(relays: &[String], keys: &Keys, event: &Event) -> Result<Vec<String>> {
    let mut took = Vec::new();
    for url in relays {
        let shown = redact(url);
        let client = relay::connect_as(url, RELAY_TIMEOUT, Some(keys.clone()))
            .await
            .map_err(|e| DistError::new(Registry::Relay, format!("{shown}: {e:#}")))?;
        let sent = client.send_event(event).await;
        relay::shutdown(&client).await;
        match sent {
            Ok(o) if !o.success.is_empty() => took.push(shown),
            Ok(o) => {
                let why: Vec<String> = o.failed.values().cloned().collect();
                return Err(DistError::new(
                    Registry::Refused,
                    format!("{shown} refused the pack event: {}", why.join("; ")),
                ));
            }
            Err(e) => {
                return Err(DistError::new(Registry::Relay, format!("{shown}: {e}")));
            }
        }
    }
    Ok(took)
}

/// One pack a relay lists.
#[derive(Debug, Clone, Serialize)]
pub struct Listing {
    pub pack_id: String,
    pub version: String,
    pub author: String,
    pub description: String,
    /// When the author signed it (RFC 3339 UTC).
    pub published_at: String,
    pub sha256: String,
}

/// The packs on `relays` whose id or description holds every one of `words` (case-insensitive),
/// newest version of each (pack, author) first; events that do not verify are left out.
pub fn search(words: &[String], relays: &[String]) -> Result<Vec<Listing>> {
    let filter = Filter::new().kind(Kind::FileMetadata).hashtag(LABEL);
    let mut found: Vec<Signed> = query(relays, filter)?
        .into_iter()
        .filter_map(|e| signature::check(e, "a relay's event").ok())
        .filter(|s| {
            let text = format!("{} {}", s.claim.pack_id, s.claim.description).to_lowercase();
            words.iter().all(|w| text.contains(&w.to_lowercase()))
        })
        .collect();
    let version = |s: &Signed| semver::Version::parse(&s.claim.version).ok();
    found.sort_by(|a, b| {
        (a.claim.pack_id.as_str(), a.npub())
            .cmp(&(b.claim.pack_id.as_str(), b.npub()))
            .then(version(b).cmp(&version(a)))
            .then(b.signed_at().cmp(&a.signed_at()))
    });
    found.dedup_by(|b, a| a.claim.pack_id == b.claim.pack_id && a.author() == b.author());
    Ok(found
        .into_iter()
        .map(|s| Listing {
            published_at: super::rfc3339(s.signed_at().as_secs()),
            author: s.npub(),
            pack_id: s.claim.pack_id,
            version: s.claim.version,
            description: s.claim.description,
            sha256: s.claim.sha256,
        })
        .collect())
}
