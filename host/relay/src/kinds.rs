//! Which event kinds the embedded relay takes: the ones apiary uses. Every other kind is refused
//! from foreign keys (only the key store's own keys publish what they like, e.g. personas'
//! profiles), so a stranger cannot use the relay as general storage.

use nostr_sdk::prelude::{Kind, PublicKey};

use crate::known_keys::Owner;

/// NIP-94 file metadata: a pack registry's signed archive descriptions (id, version, sha256).
pub const KIND_FILE_METADATA: u16 = 1063;
/// BUD-03 / NIP-B7 (Blossom) user server list: where an author's blobs (pack archives) are served.
pub const KIND_BLOB_SERVERS: u16 = 10063;
/// NIP-42 client authentication: an `AUTH` message's event, never stored or fanned out.
pub const KIND_AUTH: u16 = 22242;

/// The kinds foreign keys may publish: kind 9 chat messages, kind 39000 group metadata (from the
/// relay's key only, see [`metadata_refusal`]), and a Nostr pack registry's events (NIP-94 kind
/// 1063, Blossom's kind 10063; Blossom's kind 24242 upload authorisations go to the blob server,
/// not to relays).
pub const STORED_KINDS: [u16; 4] = [
    crate::KIND_MESSAGE,
    KIND_FILE_METADATA,
    KIND_BLOB_SERVERS,
    crate::KIND_GROUP_METADATA,
];

/// Group metadata kinds (NIP-29 39000-39003): the relay itself signs them.
pub fn is_group_metadata(kind: Kind) -> bool {
    (39000..=39003).contains(&kind.as_u16())
}

/// Why an event of `kind` by `author` (whose key is `owner`) is refused; `None` to take it.
pub fn refusal(kind: Kind, author: &PublicKey, owner: Owner, relay: &PublicKey) -> Option<String> {
    let k = kind.as_u16();
    if k == KIND_AUTH {
        return Some("invalid: kind 22242 is sent as AUTH, never published".to_string());
    }
    if is_group_metadata(kind) && author != relay {
        return Some(format!(
            "blocked: group metadata (kind {k}) is signed by this relay's key only ({})",
            relay.to_hex()
        ));
    }
    if owner == Owner::Foreign && !STORED_KINDS.contains(&k) {
        return Some(format!(
            "blocked: this relay stores kinds {} only (kind {k} is not one)",
            STORED_KINDS.map(|k| k.to_string()).join(", ")
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use nostr_sdk::prelude::Keys;

    #[test]
    fn foreigners_publish_the_kinds_apiary_uses_only() {
        let relay = Keys::generate().public_key();
        let someone = Keys::generate().public_key();
        let take = |k: u16, who: &PublicKey, o: Owner| refusal(Kind::from(k), who, o, &relay);
        for k in [9, 1063, 10063] {
            assert_eq!(take(k, &someone, Owner::Foreign), None, "kind {k}");
        }
        for k in [0, 1, 5, 30023, 24242, 20001] {
            let why = take(k, &someone, Owner::Foreign).unwrap();
            assert!(
                why.contains("stores kinds 9, 1063, 10063, 39000 only"),
                "{why}"
            );
            assert_eq!(take(k, &someone, Owner::Own), None, "own kind {k}");
        }
        assert!(
            take(39000, &someone, Owner::Own)
                .unwrap()
                .contains("relay's key only")
        );
        assert_eq!(take(39000, &relay, Owner::Own), None);
        assert!(take(22242, &someone, Owner::Own).is_some());
    }
}
