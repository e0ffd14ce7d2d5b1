//! BUD-01 authorisation: `Authorization: Nostr <base64 of a signed event>`, kind 24242, with a
//! `t` tag saying what it allows (`upload`), `x` tags naming the blobs, and an `expiration` in
//! the future.

use base64::Engine as _;
use nostr_sdk::prelude::{Event, JsonUtil, Kind, PublicKey, Timestamp};

/// The authorisation header's event is read up to this size.
const MAX_AUTH_BYTES: usize = 8 * 1024;
/// An event dated further ahead than this is refused (clocks drift, not by minutes).
const FUTURE_SLACK_SECS: u64 = 60;

/// Why an upload was not authorised (sent as `X-Reason` with a 401).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum Refusal {
    #[error("no `Authorization: Nostr <base64 event>` header")]
    Missing,
    #[error("the authorisation is not a base64 Nostr event")]
    Malformed,
    #[error("the authorisation event's signature does not verify")]
    Forged,
    #[error("the authorisation event is kind {0}, not 24242")]
    Kind(u16),
    #[error("the authorisation does not allow `upload` (its `t` tag)")]
    Verb,
    #[error("the authorisation has expired (or names no expiration)")]
    Expired,
    #[error("the authorisation is dated in the future")]
    Future,
    #[error("the authorisation names no blob (`x` tag)")]
    NoBlob,
}

/// Checks an upload's `Authorization` header value at `now`: who signed it and the blobs (sha256)
/// it allows.
pub fn check_upload(
    header: Option<&str>,
    now: Timestamp,
) -> Result<(PublicKey, Vec<String>), Refusal> {
    let value = header.ok_or(Refusal::Missing)?;
    let b64 = value
        .strip_prefix("Nostr ")
        .ok_or(Refusal::Malformed)?
        .trim();
    if b64.len() > MAX_AUTH_BYTES * 4 / 3 + 4 {
        return Err(Refusal::Malformed);
    }
    let json = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .map_err(|_| Refusal::Malformed)?;
    let event = Event::from_json(&json).map_err(|_| Refusal::Malformed)?;
    if event.verify().is_err() {
        return Err(Refusal::Forged);
    }
    if event.kind != Kind::BlossomAuth {
        return Err(Refusal::Kind(event.kind.as_u16()));
    }
    if event.created_at.as_secs() > now.as_secs() + FUTURE_SLACK_SECS {
        return Err(Refusal::Future);
    }
    let value_of = |name: &'static str| values(&event, name);
    if !value_of("t").any(|v| v == "upload") {
        return Err(Refusal::Verb);
    }
    let expires = value_of("expiration")
        .next()
        .and_then(|v| v.parse::<u64>().ok())
        .ok_or(Refusal::Expired)?;
    if expires <= now.as_secs() {
        return Err(Refusal::Expired);
    }
    let blobs: Vec<String> = value_of("x")
        .filter(|x| crate::store::is_sha256(x))
        .map(str::to_string)
        .collect();
    if blobs.is_empty() {
        return Err(Refusal::NoBlob);
    }
    Ok((event.pubkey, blobs))
}

/// The first value of every tag `name` of `event`.
fn values<'a>(event: &'a Event, name: &'static str) -> impl Iterator<Item = &'a str> + 'a {
    event
        .tags
        .iter()
        .map(|t| t.as_slice())
        .filter(move |t| t.len() >= 2 && t[0] == name)
        .map(|t| t[1].as_str())
}

#[cfg(test)]
mod tests {
    use super::*;
    use nostr_sdk::prelude::{EventBuilder, Keys, Tag, TagKind};

    fn header(kind: u16, t: &str, expires: u64, x: &str) -> String {
        let event = EventBuilder::new(Kind::from(kind), "upload")
            .tags([
                Tag::hashtag(t),
                Tag::custom(TagKind::x(), [x]),
                Tag::expiration(Timestamp::from(expires)),
            ])
            .sign_with_keys(&Keys::generate())
            .unwrap();
        let b64 = base64::engine::general_purpose::STANDARD.encode(event.as_json());
        format!("Nostr {b64}")
    }

    #[test]
    fn only_a_signed_current_upload_authorisation_naming_a_blob_passes() {
        let now = Timestamp::now();
        let later = now.as_secs() + 300;
        let x = "ab".repeat(32);
        let (_, blobs) = check_upload(Some(&header(24242, "upload", later, &x)), now).unwrap();
        assert_eq!(blobs, vec![x.clone()]);
        let refused = |h: &str| check_upload(Some(h), now).unwrap_err();
        assert_eq!(refused(&header(1, "upload", later, &x)), Refusal::Kind(1));
        assert_eq!(refused(&header(24242, "delete", later, &x)), Refusal::Verb);
        assert_eq!(
            refused(&header(24242, "upload", now.as_secs() - 1, &x)),
            Refusal::Expired
        );
        assert_eq!(
            refused(&header(24242, "upload", later, "nothex")),
            Refusal::NoBlob
        );
        assert_eq!(refused("Nostr !!!"), Refusal::Malformed);
        assert_eq!(check_upload(None, now).unwrap_err(), Refusal::Missing);
        // A signed event altered afterwards.
        let good = header(24242, "upload", later, &x);
        let json = base64::engine::general_purpose::STANDARD
            .decode(good.strip_prefix("Nostr ").unwrap())
            .unwrap();
        let altered = String::from_utf8(json)
            .unwrap()
            .replace(&x, &"cd".repeat(32));
        let b64 = base64::engine::general_purpose::STANDARD.encode(altered);
        assert_eq!(refused(&format!("Nostr {b64}")), Refusal::Forged);
    }
}
