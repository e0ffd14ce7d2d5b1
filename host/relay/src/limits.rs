//! What the embedded relay lets one client cost it: event size, stored events and bytes (shared out
//! by [`ledger`](crate::ledger)), events a minute per key and per connection, and which kinds it
//! takes (see [`kinds`](crate::kinds)).
//!
//! The relay listens on loopback for the operator's own agents, but any local process (or anyone a
//! port is forwarded to) can connect: without these, one client could publish megabyte events until
//! memory and the journal fill the disk.
//!
//! [`Admission`] runs after the front checked the event's id and signature, so a rate bucket is
//! only ever charged for its key's genuine events (an attacker cannot spend another key's budget
//! with forged ones). The size cap is enforced before that, on the websocket message (see
//! [`client_message`](crate::client_message)).

use std::net::SocketAddr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use apiary_limits::{Buckets, Rate};
use nostr_relay_builder::prelude::*;

use crate::kinds;
use crate::known_keys::Owner;
use crate::known_keys::Owners;

/// The embedded relay's caps; [`Limits::default`] is what `apiary up` and `apiary relay` use unless
/// told otherwise (the flags of the same names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest EVENT message accepted, in bytes (the websocket message, JSON as sent).
    pub max_event_bytes: usize,
    /// Events stored (memory and journal); past it the oldest foreign events are evicted.
    pub max_stored_events: u64,
    /// Bytes of events stored (journal lines); past it the oldest foreign events are evicted.
    pub max_stored_bytes: u64,
    /// Events a minute one key may publish (a burst of as many, then refilled evenly; 0: no limit).
    pub per_key_per_minute: u32,
    /// Events a minute one connection may publish (same shape).
    pub per_connection_per_minute: u32,
    /// Part of the storage caps, in percent, that foreign keys never use: kept for the key
    /// store's own keys (see [`ledger`](crate::ledger)).
    pub own_headroom_percent: u8,
    /// Part of the storage caps, in percent, one foreign key may hold.
    pub key_share_percent: u8,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_event_bytes: 64 * 1024,
            max_stored_events: 50_000,
            max_stored_bytes: 64 * 1024 * 1024,
            per_key_per_minute: 120,
            per_connection_per_minute: 600,
            own_headroom_percent: 20,
            key_share_percent: 5,
        }
    }
}

impl Limits {
    /// Messages up to this size are read whole, so that an oversized EVENT gets an `OK false`
    /// naming its id; a larger one ends the connection (close code 1009) before it is buffered.
    pub fn max_message_bytes(&self) -> usize {
        self.max_event_bytes
            .saturating_mul(4)
            .max(self.max_event_bytes.saturating_add(1024 * 1024))
    }
}

/// Keys remembered per bucket map; past it, full buckets (quiet keys) are forgotten.
const BUCKETS_CAP: usize = 4096;

/// The embedded relay's write policy for clients' events (after their id and signature were
/// checked): the kinds it stores, group metadata from its own key only, and the rate limits.
/// Storage space is the store's to decide (see [`ledger`](crate::ledger)).
#[derive(Debug)]
pub struct Admission {
    limits: Limits,
    /// The relay's own key (the only author of group metadata) and the key store's.
    owners: Owners,
    keys: Mutex<Buckets<PublicKey>>,
    connections: Mutex<Buckets<SocketAddr>>,
    /// Events refused for a rate limit (for logs and tests).
    pub limited: AtomicU64,
}

impl Admission {
    pub fn new(limits: Limits, owners: Owners) -> Admission {
        Admission {
            limits,
            owners,
            keys: Mutex::new(Buckets::new(
                Rate::per_minute(limits.per_key_per_minute),
                BUCKETS_CAP,
            )),
            connections: Mutex::new(Buckets::new(
                Rate::per_minute(limits.per_connection_per_minute),
                BUCKETS_CAP,
            )),
            limited: AtomicU64::new(0),
        }
    }

    /// Whose `event`'s author is, for storage: the relay's and the key store's keys are own. A
    /// kind only they may publish makes the store be listed again for an unknown key (a persona
    /// whose key was just made publishes its profile).
    pub fn owner_of(&self, event: &Event) -> Owner {
        match self.owners.owner_of(&event.pubkey) {
            Owner::Foreign if !kinds::STORED_KINDS.contains(&event.kind.as_u16()) => {
                self.owners.owner_of_now(&event.pubkey)
            }
            owner => owner,
        }
    }

    /// Why `event` (by an author whose key is `owner`), from the connection `peer`, is refused,
    /// in the words of an `OK false`; `None` to store it.
    pub fn check(&self, event: &Event, owner: Owner, peer: SocketAddr) -> Option<String> {
        if let Some(why) = kinds::refusal(event.kind, &event.pubkey, owner, &self.owners.relay) {
            return Some(why);
        }
        let now = Instant::now();
        // The connection first: a flood of many keys over one connection does not spend the keys'
        // budgets, and a key spread over many connections is still counted once.
        if !lock(&self.connections).try_take(peer, now) {
            self.limited.fetch_add(1, Ordering::Relaxed);
            return Some(format!(
                "rate-limited: more than {} events a minute on this connection (--connection-rate)",
                self.limits.per_connection_per_minute
            ));
        }
        if !lock(&self.keys).try_take(event.pubkey, now) {
            self.limited.fetch_add(1, Ordering::Relaxed);
            return Some(format!(
                "rate-limited: more than {} events a minute from this key (--key-rate)",
                self.limits.per_key_per_minute
            ));
        }
        None
    }

    /// [`check`](Self::check) for an event signed in this process (see
    /// [`Door`](crate::embedded::Door)): the kind rules of an own key, no rate limit.
    pub fn check_own(&self, event: &Event) -> Option<String> {
        kinds::refusal(event.kind, &event.pubkey, Owner::Own, &self.owners.relay)
    }

    /// A connection ended: its bucket goes (the address may be reused by another client).
    pub fn forget(&self, peer: SocketAddr) {
        lock(&self.connections).forget(&peer);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn admission(limits: Limits) -> (Admission, Keys) {
        let relay = Keys::generate();
        let owners = Owners {
            relay: relay.public_key(),
            known: std::sync::Arc::new(crate::known_keys::KnownKeys::new(None)),
        };
        let a = Admission::new(limits, owners);
        (a, relay)
    }

    fn note(keys: &Keys) -> Event {
        crate::message(keys, "general", "hi", vec![]).unwrap()
    }

    #[test]
    fn buckets_limit_each_key_and_each_connection() {
        let limits = Limits {
            per_key_per_minute: 3,
            per_connection_per_minute: 5,
            ..Limits::default()
        };
        let (a, _) = admission(limits);
        let (one, two) = (Keys::generate(), Keys::generate());
        let c1: SocketAddr = "127.0.0.1:1000".parse().unwrap();
        let c2: SocketAddr = "127.0.0.1:1001".parse().unwrap();
        // One key over two connections: three events, then refused.
        for i in 0..3 {
            let c = if i % 2 == 0 { c1 } else { c2 };
            assert_eq!(a.check(&note(&one), Owner::Foreign, c), None);
        }
        let why = a.check(&note(&one), Owner::Foreign, c2).unwrap();
        assert!(why.contains("from this key"), "{why}");
        // New keys on c1, where two of five are spent: three more, then the connection is out.
        for _ in 0..3 {
            assert_eq!(a.check(&note(&Keys::generate()), Owner::Foreign, c1), None);
        }
        let why = a.check(&note(&two), Owner::Foreign, c1).unwrap();
        assert!(why.contains("on this connection"), "{why}");
        a.forget(c1);
        assert_eq!(a.check(&note(&two), Owner::Foreign, c1), None);
    }

    #[test]
    fn only_the_relay_signs_group_metadata() {
        let (a, relay) = admission(Limits::default());
        let peer: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let meta = |k: &Keys| {
            EventBuilder::new(Kind::Custom(39000), "")
                .tags([
                    Tag::identifier("evil"),
                    Tag::custom(TagKind::custom("name"), ["general"]),
                ])
                .sign_with_keys(k)
                .unwrap()
        };
        assert!(
            a.check(&meta(&Keys::generate()), Owner::Foreign, peer)
                .is_some()
        );
        assert_eq!(
            a.check(&meta(&relay), a.owner_of(&meta(&relay)), peer),
            None
        );
    }
}
