//! NIP-42 authentication as the embedded relay's front checks it, per connection: the challenge
//! is sent as soon as the websocket opens (nostr-tools and others answer the first challenge and
//! do not retry after a refusal), and an `AUTH` event is accepted only when it is kind 22242,
//! signed, names this connection's current challenge and this relay's URL, and was made within
//! [`MAX_AGE_SECS`] of now. The allow-list (who may authenticate) is the front's.

use std::net::SocketAddr;

use nostr_relay_builder::prelude::*;
use nostr_sdk::nostr::types::url::{Host, Url};

/// How far an `AUTH` event's `created_at` may be from now (either way), in seconds.
pub const MAX_AGE_SECS: u64 = 600;

/// The URL clients name in their `relay` tag to authenticate here: the `ws://` URL of the address
/// the relay listens on, compared after normalisation (scheme and host case, default port, a
/// trailing slash). On a loopback address `localhost` names it too; on an unspecified address
/// (`0.0.0.0`, `::`) the relay cannot know which of its names a client used, so only the scheme
/// and port are compared.
#[derive(Debug, Clone)]
pub struct RelayIdentity {
    addr: SocketAddr,
}

impl RelayIdentity {
    pub fn new(addr: SocketAddr) -> RelayIdentity {
        RelayIdentity { addr }
    }

    /// Whether `url` (a `relay` tag's value) names this relay.
    pub fn is_named_by(&self, url: &str) -> bool {
        let Ok(parsed) = Url::parse(url) else {
            return false;
        };
        parsed.scheme() == "ws"
            && matches!(parsed.path(), "" | "/")
            && parsed.query().is_none()
            && parsed.port_or_known_default() == Some(self.addr.port())
            && self.host_matches(parsed.host())
    }

    fn host_matches(&self, host: Option<Host<&str>>) -> bool {
        let ip = self.addr.ip();
        match host {
            _ if ip.is_unspecified() => true,
            Some(Host::Ipv4(v4)) => ip == std::net::IpAddr::V4(v4),
            Some(Host::Ipv6(v6)) => ip == std::net::IpAddr::V6(v6),
            Some(Host::Domain(name)) => ip.is_loopback() && name == "localhost",
            None => false,
        }
    }
}

/// One connection's authentication: its challenge, and the key it authenticated with.
#[derive(Debug)]
pub struct Session {
    challenge: String,
    authenticated: Option<PublicKey>,
}

impl Default for Session {
    fn default() -> Session {
        Session::new()
    }
}

impl Session {
    /// A session with a fresh random challenge.
    pub fn new() -> Session {
        Session {
            challenge: SubscriptionId::generate().to_string(),
            authenticated: None,
        }
    }

    /// The `AUTH` message that challenges the client (the same for the whole connection).
    pub fn challenge_message(&self) -> String {
        RelayMessage::Auth {
            challenge: std::borrow::Cow::Borrowed(&self.challenge),
        }
        .as_json()
    }

    pub fn authenticated(&self) -> Option<PublicKey> {
        self.authenticated
    }

    /// Checks `event` (the client's `AUTH`) against this session; `allowed` says whether its key
    /// may authenticate at all. On success the connection is authenticated as its author.
    pub fn authenticate(
        &mut self,
        event: &Event,
        relay: &RelayIdentity,
        allowed: impl FnOnce(&PublicKey) -> bool,
        now: Timestamp,
    ) -> Result<PublicKey, AuthRefused> {
        check(event, &self.challenge, relay, now)?;
        if !allowed(&event.pubkey) {
            return Err(AuthRefused::NotAllowed(event.pubkey));
        }
        self.authenticated = Some(event.pubkey);
        Ok(event.pubkey)
    }
}

/// Why an `AUTH` event is refused (the text of the relay's `OK false`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthRefused {
    #[error("invalid: an AUTH event is kind 22242, not {0}")]
    Kind(u16),
    #[error("invalid: event id does not match its content")]
    Id,
    #[error("invalid: event signature does not verify")]
    Signature,
    #[error("auth-required: the AUTH event needs exactly one `challenge` tag")]
    NoChallenge,
    #[error("auth-required: not this connection's challenge")]
    Challenge,
    #[error("auth-required: the AUTH event needs exactly one `relay` tag")]
    NoRelay,
    #[error("auth-required: the `relay` tag names another relay ({0})")]
    Relay(String),
    #[error("auth-required: created_at is more than {MAX_AGE_SECS} s from now")]
    Stale,
    #[error("restricted: {} is not authorised on this relay", .0.to_hex())]
    NotAllowed(PublicKey),
}

/// The checks that do not depend on who the author is.
fn check(
    event: &Event,
    challenge: &str,
    relay: &RelayIdentity,
    now: Timestamp,
) -> Result<(), AuthRefused> {
    if event.kind != Kind::Authentication {
        return Err(AuthRefused::Kind(event.kind.as_u16()));
    }
    if !event.verify_id() {
        return Err(AuthRefused::Id);
    }
    if !event.verify_signature() {
        return Err(AuthRefused::Signature);
    }
    if only_tag(event, "challenge").ok_or(AuthRefused::NoChallenge)? != challenge {
        return Err(AuthRefused::Challenge);
    }
    let url = only_tag(event, "relay").ok_or(AuthRefused::NoRelay)?;
    if !relay.is_named_by(url) {
        return Err(AuthRefused::Relay(url.chars().take(100).collect()));
    }
    if now.as_secs().abs_diff(event.created_at.as_secs()) > MAX_AGE_SECS {
        return Err(AuthRefused::Stale);
    }
    Ok(())
}

/// The value of the one tag named `name`; `None` when there is none or more than one (which of
/// them would count is a matter of who reads it).
fn only_tag<'e>(event: &'e Event, name: &str) -> Option<&'e str> {
    let mut values = event
        .tags
        .iter()
        .map(Tag::as_slice)
        .filter(|t| t.first().is_some_and(|k| k == name))
        .map(|t| t.get(1).map(String::as_str));
    match (values.next(), values.next()) {
        (Some(Some(value)), None) => Some(value),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ADDR: &str = "127.0.0.1:4869";

    fn auth(keys: &Keys, kind: u16, tags: &[(&str, &str)], at: Timestamp) -> Event {
        EventBuilder::new(Kind::Custom(kind), "")
            .tags(tags.iter().map(|(k, v)| Tag::parse([*k, *v]).unwrap()))
            .custom_created_at(at)
            .sign_with_keys(keys)
            .unwrap()
    }

    #[test]
    fn relay_urls_are_compared_normalised() {
        let here = RelayIdentity::new(ADDR.parse().unwrap());
        for ok in [
            "ws://127.0.0.1:4869",
            "ws://127.0.0.1:4869/",
            "WS://127.0.0.1:4869",
            "ws://localhost:4869",
            "ws://LOCALHOST:4869/",
        ] {
            assert!(here.is_named_by(ok), "{ok}");
        }
        for bad in [
            "ws://127.0.0.1:4870",
            "wss://127.0.0.1:4869",
            "ws://127.0.0.2:4869",
            "ws://relay.example:4869",
            "ws://127.0.0.1:4869/other",
            "ws://127.0.0.1:4869/?x=1",
            "http://127.0.0.1:4869",
            "not a url",
            "",
        ] {
            assert!(!here.is_named_by(bad), "{bad}");
        }
        let any = RelayIdentity::new("0.0.0.0:4869".parse().unwrap());
        assert!(any.is_named_by("ws://10.1.2.3:4869"));
        assert!(!any.is_named_by("ws://10.1.2.3:4870"));
    }

    #[test]
    fn only_a_fresh_kind_22242_for_this_challenge_and_relay_authenticates() {
        let here = RelayIdentity::new(ADDR.parse().unwrap());
        let keys = Keys::generate();
        let now = Timestamp::now();
        let mut s = Session::new();
        let c = s.challenge.clone();
        let url = "ws://127.0.0.1:4869";
        let cases = [
            (
                auth(&keys, 1, &[("challenge", &c), ("relay", url)], now),
                "kind",
            ),
            (
                auth(&keys, 22242, &[("challenge", "other"), ("relay", url)], now),
                "challenge",
            ),
            (auth(&keys, 22242, &[("relay", url)], now), "challenge"),
            (
                auth(
                    &keys,
                    22242,
                    &[("challenge", &c), ("challenge", "x"), ("relay", url)],
                    now,
                ),
                "challenge",
            ),
            (
                auth(
                    &keys,
                    22242,
                    &[("challenge", &c), ("relay", "ws://evil:1")],
                    now,
                ),
                "another relay",
            ),
            (auth(&keys, 22242, &[("challenge", &c)], now), "relay"),
            (
                auth(
                    &keys,
                    22242,
                    &[("challenge", &c), ("relay", url)],
                    now - 601,
                ),
                "created_at",
            ),
            (
                auth(
                    &keys,
                    22242,
                    &[("challenge", &c), ("relay", url)],
                    now + 601,
                ),
                "created_at",
            ),
        ];
        for (ev, why) in cases {
            let refused = s.authenticate(&ev, &here, |_| true, now).unwrap_err();
            assert!(refused.to_string().contains(why), "{refused} for {why}");
            assert_eq!(s.authenticated(), None);
        }
        let good = auth(
            &keys,
            22242,
            &[("challenge", &c), ("relay", url)],
            now - 500,
        );
        let refused = s.authenticate(&good, &here, |_| false, now).unwrap_err();
        assert!(refused.to_string().starts_with("restricted:"), "{refused}");
        assert_eq!(
            s.authenticate(&good, &here, |_| true, now),
            Ok(keys.public_key())
        );
        assert_eq!(s.authenticated(), Some(keys.public_key()));
        // Another connection's challenge does not carry over.
        let mut other = Session::new();
        let refused = other.authenticate(&good, &here, |_| true, now).unwrap_err();
        assert_eq!(refused, AuthRefused::Challenge);
    }
}
