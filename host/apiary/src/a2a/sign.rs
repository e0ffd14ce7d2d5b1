//! A persona signs its own agent card: a JWS (RFC 7515, detached payload as A2A puts it in the
//! card's `signatures`) over the card's canonical JSON (RFC 8785), with `ES256K` (ECDSA on
//! secp256k1, RFC 8812) and the persona's Nostr key, so a client can tie the card to the
//! persona's npub (`kid`). The payload is canonicalised as A2A verifiers do: `signatures` left
//! out and empty strings, lists and objects dropped first.
//!
//! A Nostr public key is x-only (BIP-340: the point with even y); the secret is negated when its
//! point has odd y, so the ECDSA public key is the one the npub names.

use base64::Engine as _;
use nostr_sdk::nostr::secp256k1::{self, Message, Parity, Secp256k1};
use nostr_sdk::prelude::{Keys, ToBech32};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

fn b64url(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// `value` without empty strings, lists and objects (recursively); `None` when nothing is left.
pub fn without_empty(value: &Value) -> Option<Value> {
    match value {
        Value::String(s) if s.is_empty() => None,
        Value::Array(items) => {
            let kept: Vec<Value> = items.iter().filter_map(without_empty).collect();
            (!kept.is_empty()).then_some(Value::Array(kept))
        }
        Value::Object(map) => {
            let kept: serde_json::Map<String, Value> = map
                .iter()
                .filter_map(|(k, v)| Some((k.clone(), without_empty(v)?)))
                .collect();
            (!kept.is_empty()).then_some(Value::Object(kept))
        }
        other => Some(other.clone()),
    }
}

/// The bytes a card's signature covers.
pub fn canonical(card: &Value) -> Result<String, String> {
    let mut unsigned = card.clone();
    if let Some(map) = unsigned.as_object_mut() {
        map.remove("signatures");
    }
    let cleaned = without_empty(&unsigned).unwrap_or(Value::Null);
    serde_jcs::to_string(&cleaned).map_err(|e| e.to_string())
}

/// `card` with a `signatures` entry made with `keys`.
pub fn sign(card: &Value, keys: &Keys) -> Result<Value, String> {
    let secp = Secp256k1::new();
    let mut secret: secp256k1::SecretKey = **keys.secret_key();
    let (_, parity) = secret.x_only_public_key(&secp);
    if parity == Parity::Odd {
        secret = secret.negate();
    }
    let npub = keys.public_key().to_bech32().map_err(|e| e.to_string())?;
    let point = secret.public_key(&secp).serialize_uncompressed();
    let protected = json!({
        "alg": "ES256K",
        "kid": npub,
        "jwk": {"kty": "EC", "crv": "secp256k1", "x": b64url(&point[1..33]), "y": b64url(&point[33..65])},
    });
    let protected = b64url(protected.to_string().as_bytes());
    let payload = b64url(canonical(card)?.as_bytes());
    let digest: [u8; 32] = Sha256::digest(format!("{protected}.{payload}").as_bytes()).into();
    let signature = secp.sign_ecdsa(&Message::from_digest(digest), &secret);
    let mut signed = card.clone();
    signed["signatures"] = json!([{
        "protected": protected,
        "signature": b64url(&signature.serialize_compact()),
    }]);
    Ok(signed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signature_verifies_with_the_npubs_even_y_key_over_the_cleaned_canonical_card() {
        let card = json!({"name": "b", "a": "", "skills": [], "securityRequirements": [{"schemes": {"bearer": {"list": []}}}], "z": true});
        assert_eq!(canonical(&card).unwrap(), r#"{"name":"b","z":true}"#);
        for _ in 0..8 {
            let keys = Keys::generate();
            let signed = sign(&card, &keys).unwrap();
            let sig = &signed["signatures"][0];
            let (p, s) = (
                sig["protected"].as_str().unwrap(),
                sig["signature"].as_str().unwrap(),
            );
            let input = format!("{p}.{}", b64url(canonical(&signed).unwrap().as_bytes()));
            let digest: [u8; 32] = Sha256::digest(input.as_bytes()).into();
            let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(s)
                .unwrap();
            let signature = secp256k1::ecdsa::Signature::from_compact(&raw).unwrap();
            // The verifying key is the npub's x with even y, nothing the card says.
            let xonly = keys.public_key().xonly().unwrap();
            let public = secp256k1::PublicKey::from_x_only_public_key(xonly, Parity::Even);
            let secp = Secp256k1::verification_only();
            secp.verify_ecdsa(&Message::from_digest(digest), &signature, &public)
                .unwrap();
        }
    }
}
