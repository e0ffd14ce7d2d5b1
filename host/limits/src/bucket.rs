//! A token bucket: full at `rate.tokens`, refilled continuously at `rate.tokens` per `rate.per`.

use std::collections::HashMap;
use std::hash::Hash;
use std::time::{Duration, Instant};

/// A rate: at most `tokens` at once, and `tokens` more every `per`. `tokens == 0`: no limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate {
    pub tokens: u32,
    pub per: Duration,
}

impl Rate {
    pub const fn per_minute(tokens: u32) -> Rate {
        Rate {
            tokens,
            per: Duration::from_secs(60),
        }
    }

    pub const UNLIMITED: Rate = Rate::per_minute(0);

    pub fn is_limited(&self) -> bool {
        self.tokens > 0
    }
}

/// One bucket.
#[derive(Debug, Clone)]
pub struct Bucket {
    rate: Rate,
    tokens: f64,
    at: Instant,
}

impl Bucket {
    /// A full bucket.
    pub fn new(rate: Rate, now: Instant) -> Bucket {
        Bucket {
            rate,
            tokens: f64::from(rate.tokens),
            at: now,
        }
    }

    pub fn rate(&self) -> Rate {
        self.rate
    }

    fn refill(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        let per_sec = f64::from(self.rate.tokens) / self.rate.per.as_secs_f64().max(1e-3);
        self.tokens = (self.tokens + elapsed * per_sec).min(f64::from(self.rate.tokens));
        self.at = now;
    }

    /// When a token will be there: `now` or later.
    pub fn ready_at(&mut self, now: Instant) -> Instant {
        if !self.rate.is_limited() {
            return now;
        }
        self.refill(now);
        // (Tolerance: refilled at exactly the instant computed below, the sum may round under 1.)
        if self.tokens >= 1.0 - 1e-6 {
            return now;
        }
        let per_token = self.rate.per.as_secs_f64() / f64::from(self.rate.tokens);
        now + Duration::from_secs_f64((1.0 - self.tokens) * per_token)
    }

    pub fn ready(&mut self, now: Instant) -> bool {
        self.ready_at(now) <= now
    }

    /// Takes a token whether or not one is there (the bucket may go below one and refills from
    /// there): for a turn that answers several authors at once.
    pub fn take(&mut self, now: Instant) {
        if self.rate.is_limited() {
            self.refill(now);
            self.tokens -= 1.0;
        }
    }

    /// Takes a token if one is there.
    pub fn try_take(&mut self, now: Instant) -> bool {
        let ready = self.ready(now);
        if ready {
            self.take(now);
        }
        ready
    }

    /// Full again: the same as a new bucket, so a map of buckets may forget it.
    pub fn is_full(&mut self, now: Instant) -> bool {
        self.refill(now);
        self.tokens >= f64::from(self.rate.tokens)
    }
}

/// Buckets by key, one rate for all. Past `cap` keys the full buckets are forgotten (a full bucket
/// is the same as none), so the map stays as small as the set of keys active within one `per`.
#[derive(Debug)]
pub struct Buckets<K> {
    rate: Rate,
    cap: usize,
    map: HashMap<K, Bucket>,
}

impl<K: Hash + Eq> Buckets<K> {
    pub fn new(rate: Rate, cap: usize) -> Buckets<K> {
        Buckets {
            rate,
            cap,
            map: HashMap::new(),
        }
    }

    pub fn rate(&self) -> Rate {
        self.rate
    }

    /// `key`'s bucket, made full when it has none.
    pub fn get(&mut self, key: K, now: Instant) -> &mut Bucket {
        // Only a newcomer makes room: a known key's lookup stays O(1) however many keys there are.
        if self.map.len() >= self.cap && !self.map.contains_key(&key) {
            self.map.retain(|_, b| !b.is_full(now));
        }
        let rate = self.rate;
        self.map
            .entry(key)
            .or_insert_with(|| Bucket::new(rate, now))
    }

    /// When `key`'s bucket has a token: `now` for a key with no bucket.
    pub fn ready_at(&mut self, key: &K, now: Instant) -> Instant {
        self.map.get_mut(key).map_or(now, |b| b.ready_at(now))
    }

    /// Takes a token from `key`'s bucket if one is there.
    pub fn try_take(&mut self, key: K, now: Instant) -> bool {
        self.get(key, now).try_take(now)
    }

    /// Drops `key`'s bucket (the key is gone, or now names someone else).
    pub fn forget(&mut self, key: &K) {
        self.map.remove(key);
    }

    /// Keys with a bucket (full ones may be among them until the map grows).
    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_empties_and_refills_at_its_rate() {
        let t0 = Instant::now();
        let mut b = Bucket::new(Rate::per_minute(2), t0);
        assert!(b.try_take(t0) && b.try_take(t0));
        assert!(!b.try_take(t0), "empty");
        assert_eq!(b.ready_at(t0), t0 + Duration::from_secs(30));
        assert!(b.try_take(t0 + Duration::from_secs(30)));
        assert!(b.is_full(t0 + Duration::from_secs(120)));
    }

    #[test]
    fn take_may_go_below_zero_and_waits_longer() {
        let t0 = Instant::now();
        let mut b = Bucket::new(Rate::per_minute(1), t0);
        b.take(t0);
        b.take(t0);
        assert_eq!(b.ready_at(t0), t0 + Duration::from_secs(120));
    }

    #[test]
    fn unlimited_is_always_ready() {
        let t0 = Instant::now();
        let mut b = Bucket::new(Rate::UNLIMITED, t0);
        for _ in 0..1000 {
            assert!(b.try_take(t0));
        }
    }

    #[test]
    fn buckets_forget_full_ones_past_the_cap() {
        let t0 = Instant::now();
        let mut m = Buckets::new(Rate::per_minute(1), 3);
        for k in 0..3 {
            assert!(m.try_take(k, t0));
        }
        assert!(!m.try_take(0, t0), "each key has its own bucket");
        let later = t0 + Duration::from_secs(61);
        assert!(m.try_take(9, later));
        assert_eq!(m.len(), 1, "the refilled buckets were forgotten");
    }
}
