//! Each persona's Nostr profile (kind 0, NIP-01 metadata with NIP-24's `display_name`), published
//! when it starts, so any Nostr client (and `apiary tail`) shows it by name: `name`,
//! `display_name`, `about` from the description and `picture` from the avatar.
//!
//! A pack's avatar is a file inside the pack, not a URL, so the picture travels inside the profile
//! as a `data:` URL; one too large for an event (or of a type clients may not render safely, such
//! as SVG) is left out.

use std::path::Path;

use nostr_sdk::prelude::*;

use crate::resolve::ResolvedPersona;

/// The largest avatar carried in a profile: its base64 text stays well inside a relay's event
/// size limit (the embedded relay's is 64 KiB).
pub const MAX_AVATAR_BYTES: u64 = 32 * 1024;

/// The persona's profile; `pack_root` is where its avatar path points into.
pub fn metadata(persona: &ResolvedPersona, pack_root: &Path) -> Metadata {
    let id = &persona.identity;
    let mut m = Metadata::new()
        .name(&id.name)
        .display_name(&id.display_name)
        .about(&id.description);
    if let Some(url) = id.avatar.as_deref().and_then(|a| picture(pack_root, a)) {
        m = m.picture(url);
    }
    m
}

/// Signs and publishes the persona's profile.
pub async fn publish(
    client: &Client,
    keys: &Keys,
    persona: &ResolvedPersona,
    pack_root: &Path,
) -> Result<(), String> {
    let event = EventBuilder::metadata(&metadata(persona, pack_root))
        .sign_with_keys(keys)
        .map_err(|e| e.to_string())?;
    let sent = client.send_event(&event).await.map_err(|e| e.to_string())?;
    match sent.failed.values().next() {
        Some(why) if sent.success.is_empty() => Err(why.clone()),
        _ => Ok(()),
    }
}

/// The avatar as a `data:` URL, when it is a small raster image inside the pack.
fn picture(pack_root: &Path, avatar: &str) -> Option<Url> {
    let ext = Path::new(avatar)
        .extension()?
        .to_str()?
        .to_ascii_lowercase();
    let mime = match ext.as_str() {
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        _ => return None,
    };
    let path = crate::pack::paths::resolve_inside(pack_root, avatar).ok()?;
    let bytes =
        crate::safe_fs::read_regular(&path, crate::safe_fs::FinalLink::Refuse, MAX_AVATAR_BYTES)
            .ok()?;
    Url::parse(&format!("data:{mime};base64,{}", base64(&bytes))).ok()
}

/// Standard base64 with padding (RFC 4648 §4).
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i)) as usize & 63] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::base64;

    #[test]
    fn base64_matches_rfc_4648_test_vectors() {
        let cases = [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ];
        for (plain, encoded) in cases {
            assert_eq!(base64(plain.as_bytes()), encoded);
        }
    }
}
