//! The embedded relay's storage budget: who holds how much of it, and what goes when it is full.
//!
//! - The key store's own keys (operator, personas, the relay; see [`Owner`]) have the whole store,
//!   and foreign keys together at most [`Limits::own_headroom_percent`] less: that headroom is
//!   always left for replies and operator posts.
//! - Each foreign key holds at most [`Limits::key_share_percent`] of the store; past it, its new
//!   events are refused (one stranger cannot fill the foreign part alone).
//! - When an event does not fit, the oldest foreign events are evicted until it does; an own event
//!   is refused only when own events alone fill the store.
//!
//! The ledger only counts and decides; the store applies its decisions to memory and the journal.
//! Decisions depend only on the order events came in, so replaying the journal through a ledger
//! evicts the same events again.

use std::collections::{HashMap, VecDeque};

use nostr_sdk::prelude::{EventId, PublicKey};

pub use crate::known_keys::Owner;
use crate::limits::Limits;

/// Events and bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    pub events: u64,
    pub bytes: u64,
}

impl Tally {
    fn one(bytes: u64) -> Tally {
        Tally { events: 1, bytes }
    }

    fn plus(self, o: Tally) -> Tally {
        Tally {
            events: self.events.saturating_add(o.events),
            bytes: self.bytes.saturating_add(o.bytes),
        }
    }

    fn minus(self, o: Tally) -> Tally {
        Tally {
            events: self.events.saturating_sub(o.events),
            bytes: self.bytes.saturating_sub(o.bytes),
        }
    }

    fn within(self, cap: Tally) -> bool {
        self.events <= cap.events && self.bytes <= cap.bytes
    }

    /// `part` of `cap`, in percent (the larger of events and bytes).
    fn percent_of(self, cap: Tally) -> u64 {
        let pct = |n: u64, of: u64| n.saturating_mul(100).checked_div(of).unwrap_or(100);
        pct(self.events, cap.events).max(pct(self.bytes, cap.bytes))
    }
}

/// One stored event: where its journal line is, and how long.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub id: EventId,
    pub author: PublicKey,
    pub offset: u64,
    pub bytes: u64,
}

/// The budget's three caps, from [`Limits`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caps {
    pub total: Tally,
    pub foreign: Tally,
    pub per_key: Tally,
}

impl Caps {
    pub fn of(limits: &Limits) -> Caps {
        let total = Tally {
            events: limits.max_stored_events,
            bytes: limits.max_stored_bytes,
        };
        let share = |t: Tally, pct: u8| Tally {
            events: t.events.saturating_mul(u64::from(pct.min(100))) / 100,
            bytes: t.bytes.saturating_mul(u64::from(pct.min(100))) / 100,
        };
        let foreign = share(total, 100 - limits.own_headroom_percent.min(100));
        let per_key = share(total, limits.key_share_percent);
        // A key's share holds at least one event of the largest size.
        let per_key = Tally {
            events: per_key.events.max(1),
            bytes: per_key.bytes.max(limits.max_event_bytes as u64 + 1),
        };
        Caps {
            total,
            foreign,
            per_key,
        }
    }
}

/// Why an event is not stored.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error(
        "storage share full: this key holds {} events ({} bytes) here, a foreign key's share is {} events or {} bytes",
        held.events, held.bytes, share.events, share.bytes
    )]
    KeyShare { held: Tally, share: Tally },
    #[error(
        "storage full: {} events ({} bytes) of the key store's own stored, the limit is {} events (--max-stored-events) and {} bytes (--max-stored-bytes)",
        own.events, own.bytes, cap.events, cap.bytes
    )]
    Full { own: Tally, cap: Tally },
}

/// What storing an event takes: this many of the oldest foreign events evicted first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    pub evict: usize,
}

#[derive(Debug)]
pub struct Ledger {
    caps: Caps,
    own: VecDeque<Entry>,
    foreign: VecDeque<Entry>,
    per_key: HashMap<PublicKey, Tally>,
    own_total: Tally,
    foreign_total: Tally,
    /// Journal bytes of evicted events, until the journal is compacted.
    garbage: u64,
}

impl Ledger {
    pub fn new(limits: &Limits) -> Ledger {
        Ledger {
            caps: Caps::of(limits),
            own: VecDeque::new(),
            foreign: VecDeque::new(),
            per_key: HashMap::new(),
            own_total: Tally::default(),
            foreign_total: Tally::default(),
            garbage: 0,
        }
    }

    pub fn caps(&self) -> Caps {
        self.caps
    }

    /// What is stored, own and foreign together.
    pub fn stored(&self) -> Tally {
        self.own_total.plus(self.foreign_total)
    }

    pub fn foreign(&self) -> Tally {
        self.foreign_total
    }

    pub fn garbage(&self) -> u64 {
        self.garbage
    }

    /// How full the store is, in percent of its caps.
    pub fn fill_percent(&self) -> u64 {
        self.stored().percent_of(self.caps.total)
    }

    /// What it takes to store an event of `bytes` by `author`, or why it cannot be stored.
    pub fn plan(&self, author: &PublicKey, owner: Owner, bytes: u64) -> Result<Plan, Refusal> {
        let new = Tally::one(bytes);
        if owner == Owner::Foreign {
            let held = self.per_key.get(author).copied().unwrap_or_default();
            if !held.plus(new).within(self.caps.per_key) {
                return Err(Refusal::KeyShare {
                    held,
                    share: self.caps.per_key,
                });
            }
        }
        let fits = |freed: Tally| {
            let total = self.stored().minus(freed).plus(new).within(self.caps.total);
            let foreign = owner == Owner::Own
                || self
                    .foreign_total
                    .minus(freed)
                    .plus(new)
                    .within(self.caps.foreign);
            total && foreign
        };
        let mut freed = Tally::default();
        for (evict, old) in self.foreign.iter().enumerate() {
            if fits(freed) {
                return Ok(Plan { evict });
            }
            freed = freed.plus(Tally::one(old.bytes));
        }
        if fits(freed) {
            return Ok(Plan {
                evict: self.foreign.len(),
            });
        }
        Err(Refusal::Full {
            own: self.own_total,
            cap: self.caps.total,
        })
    }

    /// Takes the `n` oldest foreign events off the books (their journal lines become garbage).
    pub fn evict_oldest(&mut self, n: usize) -> Vec<Entry> {
        let gone: Vec<Entry> = self.foreign.drain(..n.min(self.foreign.len())).collect();
        for e in &gone {
            let t = Tally::one(e.bytes);
            self.foreign_total = self.foreign_total.minus(t);
            self.garbage = self.garbage.saturating_add(e.bytes);
            if let Some(held) = self.per_key.get_mut(&e.author) {
                *held = held.minus(t);
                if held.events == 0 {
                    self.per_key.remove(&e.author);
                }
            }
        }
        gone
    }

    /// Books a stored event.
    pub fn record(&mut self, entry: Entry, owner: Owner) {
        let t = Tally::one(entry.bytes);
        match owner {
            Owner::Own => {
                self.own_total = self.own_total.plus(t);
                self.own.push_back(entry);
            }
            Owner::Foreign => {
                self.foreign_total = self.foreign_total.plus(t);
                let held = self.per_key.entry(entry.author).or_default();
                *held = held.plus(t);
                self.foreign.push_back(entry);
            }
        }
    }

    /// Bytes of a journal line that holds no stored event (a duplicate, a blank line).
    pub fn add_garbage(&mut self, bytes: u64) {
        self.garbage = self.garbage.saturating_add(bytes);
    }

    /// Every stored entry in journal order, for compaction.
    pub fn entries_in_journal_order(&self) -> Vec<&Entry> {
        let mut all: Vec<&Entry> = self.own.iter().chain(self.foreign.iter()).collect();
        all.sort_by_key(|e| e.offset);
        all
    }

    /// After compaction: each entry's new offset (the same order as
    /// [`entries_in_journal_order`](Self::entries_in_journal_order)), no garbage left.
    pub fn compacted(&mut self, moved: &HashMap<u64, u64>) {
        for e in self.own.iter_mut().chain(self.foreign.iter_mut()) {
            if let Some(to) = moved.get(&e.offset) {
                e.offset = *to;
            }
        }
        self.garbage = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nostr_sdk::prelude::Keys;

    fn limits(events: u64) -> Limits {
        Limits {
            max_stored_events: events,
            max_stored_bytes: 1 << 30,
            own_headroom_percent: 20,
            key_share_percent: 10,
            ..Limits::default()
        }
    }

    fn store(l: &mut Ledger, author: &PublicKey, owner: Owner) -> Result<Vec<Entry>, Refusal> {
        let plan = l.plan(author, owner, 100)?;
        let gone = l.evict_oldest(plan.evict);
        let offset = l.stored().bytes + l.garbage();
        let id = EventId::from_byte_array(rand_bytes(offset));
        l.record(
            Entry {
                id,
                author: *author,
                offset,
                bytes: 100,
            },
            owner,
        );
        Ok(gone)
    }

    fn rand_bytes(seed: u64) -> [u8; 32] {
        let mut b = [0u8; 32];
        b[..8].copy_from_slice(&seed.to_le_bytes());
        b
    }

    #[test]
    fn one_foreign_key_gets_its_share_and_no_more() {
        let mut l = Ledger::new(&limits(100));
        let stranger = Keys::generate().public_key();
        for _ in 0..10 {
            store(&mut l, &stranger, Owner::Foreign).unwrap();
        }
        let refused = store(&mut l, &stranger, Owner::Foreign).unwrap_err();
        assert!(
            refused.to_string().starts_with("storage share full"),
            "{refused}"
        );
    }

    #[test]
    fn foreign_keys_evict_the_oldest_foreign_and_never_own_events() {
        let mut l = Ledger::new(&limits(100));
        let operator = Keys::generate().public_key();
        for _ in 0..5 {
            store(&mut l, &operator, Owner::Own).unwrap();
        }
        // Ten strangers of ten events each: the foreign part holds 80.
        let strangers: Vec<PublicKey> = (0..10).map(|_| Keys::generate().public_key()).collect();
        let mut evicted = Vec::new();
        for s in &strangers {
            for _ in 0..10 {
                evicted.extend(store(&mut l, s, Owner::Foreign).unwrap());
            }
        }
        assert_eq!(l.foreign().events, 80);
        assert_eq!(evicted.len(), 20);
        assert!(
            evicted
                .iter()
                .all(|e| e.author == strangers[0] || e.author == strangers[1])
        );
        // The operator still has the headroom, then evicts foreign events to go on.
        for _ in 0..15 {
            assert!(store(&mut l, &operator, Owner::Own).unwrap().is_empty());
        }
        assert_eq!(l.stored().events, 100);
        let gone = store(&mut l, &operator, Owner::Own).unwrap();
        assert_eq!(gone.len(), 1);
        assert_eq!(l.fill_percent(), 100);
    }

    #[test]
    fn own_events_alone_can_fill_the_store() {
        let mut l = Ledger::new(&limits(3));
        let operator = Keys::generate().public_key();
        for _ in 0..3 {
            store(&mut l, &operator, Owner::Own).unwrap();
        }
        let refused = store(&mut l, &operator, Owner::Own).unwrap_err();
        assert!(matches!(refused, Refusal::Full { .. }), "{refused}");
        assert!(
            refused.to_string().contains("--max-stored-events"),
            "{refused}"
        );
    }
}
