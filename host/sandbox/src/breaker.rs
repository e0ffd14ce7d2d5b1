//! Circuit breaker: a component that fails `threshold` calls in a row is switched off for
//! `cooldown`; then one trial call is let through, and a success closes the breaker again.

use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy)]
pub struct BreakerPolicy {
    pub threshold: u32,
    pub cooldown: Duration,
}

impl Default for BreakerPolicy {
    fn default() -> BreakerPolicy {
        BreakerPolicy {
            threshold: 5,
            cooldown: Duration::from_secs(30),
        }
    }
}

/// An open breaker: the cooldown left and the failures that opened it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Open {
    pub retry_in: Duration,
    pub failures: u32,
}

#[derive(Debug, Default)]
pub(crate) struct Breaker {
    consecutive_failures: u32,
    open_until: Option<Instant>,
}

impl Breaker {
    /// `Err` while open.
    pub(crate) fn admit(&mut self, now: Instant) -> Result<(), Open> {
        match self.open_until {
            Some(until) if now < until => Err(Open {
                retry_in: until - now,
                failures: self.consecutive_failures,
            }),
            Some(_) => {
                // Half-open: let one trial through; a failure re-opens at once.
                self.open_until = None;
                Ok(())
            }
            None => Ok(()),
        }
    }

    pub(crate) fn record(&mut self, ok: bool, policy: &BreakerPolicy, now: Instant) {
        if ok {
            self.consecutive_failures = 0;
            self.open_until = None;
        } else {
            self.consecutive_failures = self.consecutive_failures.saturating_add(1);
            if self.consecutive_failures >= policy.threshold {
                self.open_until = Some(now + policy.cooldown);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opens_after_threshold_and_half_opens_after_cooldown() {
        let policy = BreakerPolicy {
            threshold: 3,
            cooldown: Duration::from_secs(10),
        };
        let t0 = Instant::now();
        let mut b = Breaker::default();
        for _ in 0..2 {
            b.record(false, &policy, t0);
            assert!(b.admit(t0).is_ok());
        }
        b.record(false, &policy, t0);
        assert_eq!(b.admit(t0).unwrap_err().failures, 3);
        let later = t0 + Duration::from_secs(11);
        assert!(b.admit(later).is_ok(), "half-open after the cooldown");
        b.record(false, &policy, later);
        assert!(b.admit(later).is_err(), "a failed trial re-opens");
        let much_later = later + Duration::from_secs(11);
        assert!(b.admit(much_later).is_ok());
        b.record(true, &policy, much_later);
        b.record(false, &policy, much_later);
        assert!(b.admit(much_later).is_ok(), "a success resets the count");
    }
}
