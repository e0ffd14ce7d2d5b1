//! A blob server's upload authorisation on arbitrary bytes: the `Authorization` header value as a
//! client sends it (`Nostr <base64 event>`), and the bytes themselves as the event's JSON. Nothing
//! may panic, and whatever passes names only sha256 digests.
#![no_main]

use apiary_relay::blobs::check_upload;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use libfuzzer_sys::fuzz_target;
use nostr_sdk::prelude::Timestamp;

fuzz_target!(|data: &[u8]| {
    let now = Timestamp::from(1_800_000_000);
    let as_header = String::from_utf8_lossy(data);
    let encoded = format!("Nostr {}", STANDARD.encode(data));
    for header in [as_header.as_ref(), encoded.as_str()] {
        if let Ok((_, blobs)) = check_upload(Some(header), now) {
            assert!(!blobs.is_empty());
            assert!(blobs.iter().all(|b| b.len() == 64 && b.bytes().all(|c| c.is_ascii_hexdigit())));
        }
    }
});
