//! A persona's spending limits ([`PersonaLimits`]: turns per hour and per day, tokens per day),
//! counted over sliding windows across all its channels. A turn over a limit is not taken: its
//! message is dropped with a `limited` note (never silently), which the status view shows.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

pub use crate::resolve::limits::PersonaLimits;

const HOUR: Duration = Duration::from_secs(3600);
const DAY: Duration = Duration::from_secs(24 * 3600);

/// Which limit a turn is over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tripped {
    /// `turns_per_hour`, `turns_per_day` or `tokens_per_day`.
    pub limit: &'static str,
    pub allowed: u64,
    pub used: u64,
}

impl std::fmt::Display for Tripped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (what, per) = match self.limit {
            "turns_per_hour" => ("turns", "hour"),
            "turns_per_day" => ("turns", "24 hours"),
            _ => ("tokens", "24 hours"),
        };
        write!(
            f,
            "{} {what} in the last {per}, its limit is {}",
            self.used, self.allowed
        )
    }
}

/// One persona's spending so far.
#[derive(Debug)]
pub struct Budget {
    limits: PersonaLimits,
    /// When each turn of the last 24 hours started.
    turns: VecDeque<Instant>,
    /// Tokens reported in the last 24 hours, by when.
    tokens: VecDeque<(Instant, u64)>,
}

impl Budget {
    pub fn new(limits: PersonaLimits) -> Budget {
        Budget {
            limits,
            turns: VecDeque::new(),
            tokens: VecDeque::new(),
        }
    }

    /// Takes a turn at `now`, or says which limit it is over (the turn is then not counted).
    pub fn take(&mut self, now: Instant) -> Result<(), Tripped> {
        if self.limits.is_empty() {
            return Ok(());
        }
        self.forget(now);
        let since = |window: Duration| {
            self.turns
                .iter()
                .filter(|t| now.duration_since(**t) < window)
                .count() as u64
        };
        let checks = [
            ("turns_per_hour", self.limits.turns_per_hour, since(HOUR)),
            ("turns_per_day", self.limits.turns_per_day, since(DAY)),
            (
                "tokens_per_day",
                self.limits.tokens_per_day,
                self.tokens.iter().map(|(_, n)| n).sum(),
            ),
        ];
        for (limit, allowed, used) in checks {
            if let Some(allowed) = allowed
                && used >= allowed
            {
                return Err(Tripped {
                    limit,
                    allowed,
                    used,
                });
            }
        }
        self.turns.push_back(now);
        Ok(())
    }

    /// Tokens the agent reported for a turn.
    pub fn spent(&mut self, now: Instant, tokens: u64) {
        if self.limits.tokens_per_day.is_some() && tokens > 0 {
            self.tokens.push_back((now, tokens));
        }
    }

    fn forget(&mut self, now: Instant) {
        while self
            .turns
            .front()
            .is_some_and(|t| now.duration_since(*t) >= DAY)
        {
            self.turns.pop_front();
        }
        while self
            .tokens
            .front()
            .is_some_and(|(t, _)| now.duration_since(*t) >= DAY)
        {
            self.tokens.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn turns_per_hour_and_day_slide() {
        let t0 = Instant::now();
        let mut b = Budget::new(PersonaLimits {
            turns_per_hour: Some(2),
            turns_per_day: Some(3),
            tokens_per_day: None,
        });
        assert!(b.take(t0).is_ok());
        assert!(b.take(t0).is_ok());
        let over = b.take(t0).unwrap_err();
        assert_eq!(
            (over.limit, over.allowed, over.used),
            ("turns_per_hour", 2, 2)
        );
        assert!(b.take(t0 + HOUR).is_ok(), "an hour later");
        assert_eq!(b.take(t0 + HOUR).unwrap_err().limit, "turns_per_day");
        assert!(
            b.take(t0 + DAY).is_ok(),
            "a day later the first two are forgotten"
        );
    }

    #[test]
    fn tokens_count_what_the_agent_reported() {
        let t0 = Instant::now();
        let mut b = Budget::new(PersonaLimits {
            tokens_per_day: Some(150),
            ..PersonaLimits::default()
        });
        assert!(b.take(t0).is_ok());
        b.spent(t0, 100);
        assert!(b.take(t0).is_ok());
        b.spent(t0, 100);
        let over = b.take(t0).unwrap_err();
        assert_eq!((over.limit, over.used), ("tokens_per_day", 200));
        assert!(Budget::new(PersonaLimits::default()).take(t0).is_ok());
    }
}
