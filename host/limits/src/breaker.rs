//! A circuit breaker: `threshold` failures open it — consecutive ones, or with a `window` those
//! within it. An open breaker refuses until its `cooldown` has passed since the last failure; then
//! it lets calls through again (half-open), and one more failure opens it at once, while a
//! success closes it. With no cooldown it stays open until its failures fall out of the window.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BreakerPolicy {
    /// This many failures open the breaker.
    pub threshold: u32,
    /// Count only the failures within this long; `None`: since the last success.
    pub window: Option<Duration>,
    /// An open breaker half-opens this long after the last failure; `None`: it does not.
    pub cooldown: Option<Duration>,
}

impl Default for BreakerPolicy {
    fn default() -> BreakerPolicy {
        BreakerPolicy {
            threshold: 5,
            window: None,
            cooldown: Some(Duration::from_secs(30)),
        }
    }
}

/// An open breaker: the failures that opened it and, when it will half-open, how soon.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Open {
    pub failures: u32,
    pub retry_in: Option<Duration>,
}

#[derive(Debug, Clone)]
pub struct Breaker {
    policy: BreakerPolicy,
    /// Failures since the last success (without a window).
    consecutive: u32,
    /// The last failure's instant.
    last: Option<Instant>,
    /// With a window: the failures within it, oldest first, never more than `threshold`.
    recent: VecDeque<Instant>,
}

impl Breaker {
    pub fn new(policy: BreakerPolicy) -> Breaker {
        Breaker {
            policy,
            consecutive: 0,
            last: None,
            recent: VecDeque::new(),
        }
    }

    pub fn policy(&self) -> &BreakerPolicy {
        &self.policy
    }

    /// Whether a call may go ahead at `now`: `Err` while open.
    pub fn admit(&mut self, now: Instant) -> Result<(), Open> {
        self.forget_old(now);
        let failures = self.counted();
        if failures < self.policy.threshold {
            return Ok(());
        }
        // (A threshold of 0 is open from the start, with nothing to cool down from.)
        let retry_in = match (self.policy.cooldown, self.last) {
            (Some(cooldown), Some(last)) => {
                let since = now.saturating_duration_since(last);
                if since >= cooldown {
                    return Ok(());
                }
                Some(cooldown - since)
            }
            _ => None,
        };
        Err(Open { failures, retry_in })
    }

    /// Counts a call's outcome.
    pub fn record(&mut self, ok: bool, now: Instant) {
        if ok {
            self.consecutive = 0;
            self.recent.clear();
            return;
        }
        self.last = Some(now);
        match self.policy.window {
            None => self.consecutive = self.consecutive.saturating_add(1),
            Some(_) => {
                self.recent.push_back(now);
                if self.recent.len() > self.policy.threshold as usize {
                    self.recent.pop_front();
                }
            }
        }
    }

    /// The failures counted toward opening, as of the last `admit`.
    pub fn counted(&self) -> u32 {
        match self.policy.window {
            None => self.consecutive,
            Some(_) => self.recent.len() as u32,
        }
    }

    fn forget_old(&mut self, now: Instant) {
        let Some(window) = self.policy.window else {
            return;
        };
        while self
            .recent
            .front()
            .is_some_and(|t| now.saturating_duration_since(*t) > window)
        {
            self.recent.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn consecutive_failures_open_it_and_the_cooldown_half_opens_it() {
        let mut b = Breaker::new(BreakerPolicy {
            threshold: 3,
            window: None,
            cooldown: Some(10 * S),
        });
        let t0 = Instant::now();
        for _ in 0..2 {
            b.record(false, t0);
            assert!(b.admit(t0).is_ok());
        }
        b.record(false, t0);
        let open = b.admit(t0).unwrap_err();
        assert_eq!((open.failures, open.retry_in), (3, Some(10 * S)));
        let later = t0 + 11 * S;
        assert!(b.admit(later).is_ok(), "half-open after the cooldown");
        b.record(false, later);
        assert!(b.admit(later).is_err(), "a failed trial re-opens it");
        let much_later = later + 11 * S;
        assert!(b.admit(much_later).is_ok());
        b.record(true, much_later);
        b.record(false, much_later);
        assert!(b.admit(much_later).is_ok(), "a success resets the count");
    }

    #[test]
    fn with_a_window_only_recent_failures_count_and_no_cooldown_keeps_it_open() {
        let mut b = Breaker::new(BreakerPolicy {
            threshold: 2,
            window: Some(60 * S),
            cooldown: None,
        });
        let t0 = Instant::now();
        b.record(false, t0);
        b.record(false, t0 + 30 * S);
        let open = b.admit(t0 + 31 * S).unwrap_err();
        assert_eq!((open.failures, open.retry_in), (2, None));
        assert!(b.admit(t0 + 50 * S).is_err(), "no cooldown: still open");
        assert!(
            b.admit(t0 + 61 * S).is_ok(),
            "the first failure left the window"
        );
        assert_eq!(b.counted(), 1);
    }
}
