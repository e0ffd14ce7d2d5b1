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
    /// The spending part of `limits` (the flood rates are the workers').
    pub fn new(limits: PersonaLimits) -> Budget {
        Budget {
            limits: limits.spending(),
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
        if let Some(over) = self.usage(now).find(|u| u.used >= u.allowed) {
            return Err(over);
        }
        self.turns.push_back(now);
        Ok(())
    }

    /// Each limit set, with what is used of it at `now`.
    fn usage(&self, now: Instant) -> impl Iterator<Item = Tripped> {
        let since = |window: Duration| {
            self.turns
                .iter()
                .filter(|t| now.duration_since(**t) < window)
                .count() as u64
        };
        let tokens = self
            .tokens
            .iter()
            .filter(|(t, _)| now.duration_since(*t) < DAY)
            .map(|(_, n)| n)
            .sum();
        [
            ("turns_per_hour", self.limits.turns_per_hour, since(HOUR)),
            ("turns_per_day", self.limits.turns_per_day, since(DAY)),
            ("tokens_per_day", self.limits.tokens_per_day, tokens),
        ]
        .into_iter()
        .filter_map(|(limit, allowed, used)| {
            allowed.map(|allowed| Tripped {
                limit,
                allowed,
                used,
            })
        })
    }

    /// The limit closest to tripping at `now` (the most used of what it allows), for the status
    /// view; `None` without spending limits.
    pub fn tightest(&self, now: Instant) -> Option<Tripped> {
        if self.limits.is_empty() {
            return None;
        }
        // used/allowed compared without division: a/b > c/d ⇔ a·d > c·b (0 allowed is full).
        self.usage(now).max_by(|a, b| {
            (u128::from(a.used) * u128::from(b.allowed))
                .cmp(&(u128::from(b.used) * u128::from(a.allowed)))
                .then((a.allowed == 0).cmp(&(b.allowed == 0)))
        })
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
            ..PersonaLimits::default()
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

    #[test]
    fn the_tightest_limit_is_the_most_used_share() {
        let t0 = Instant::now();
        let mut b = Budget::new(PersonaLimits {
            turns_per_hour: Some(10),
            turns_per_day: Some(12),
            tokens_per_day: Some(1000),
            ..PersonaLimits::default()
        });
        assert_eq!(b.tightest(t0).map(|t| t.used), Some(0));
        for _ in 0..3 {
            b.take(t0).unwrap();
        }
        // 3/10 an hour, 3/12 a day, 0/1000 tokens.
        let t = b.tightest(t0).unwrap();
        assert_eq!((t.limit, t.used, t.allowed), ("turns_per_hour", 3, 10));
        b.spent(t0, 900);
        assert_eq!(b.tightest(t0).unwrap().limit, "tokens_per_day");
        // An hour later the hourly count is back to 0: the daily one is the tightest turn limit.
        let later = t0 + HOUR;
        let mut only_turns = Budget::new(PersonaLimits {
            turns_per_hour: Some(10),
            turns_per_day: Some(12),
            ..PersonaLimits::default()
        });
        for _ in 0..3 {
            only_turns.take(t0).unwrap();
        }
        let t = only_turns.tightest(later).unwrap();
        assert_eq!((t.limit, t.used, t.allowed), ("turns_per_day", 3, 12));
        // Flood rates alone are not spending limits.
        let flood = Budget::new(PersonaLimits {
            author_turns_per_minute: Some(1),
            ..PersonaLimits::default()
        });
        assert!(flood.tightest(t0).is_none());
    }
}
