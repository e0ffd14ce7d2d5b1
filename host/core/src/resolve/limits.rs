//! An operator's limits on one persona's spending and on the turns it gives one author and takes
//! in one channel, from the overrides file (`limits = {...}` in
//! the persona's table) or from the `[limits]` table of the `agent.toml` an expert-pack install
//! wrote. `apiary up` enforces them (its `dispatch::limits`).

use serde_json::{Map, Value};

/// The key, in an overrides persona table and in `agent.toml`.
pub const LIMITS: &str = "limits";
pub const TURNS_PER_HOUR: &str = "turns_per_hour";
pub const TURNS_PER_DAY: &str = "turns_per_day";
pub const TOKENS_PER_DAY: &str = "tokens_per_day";
/// Turns a minute the persona gives one author over all its channels (`up --author-turns` for
/// this persona; 0: no limit).
pub const AUTHOR_TURNS_PER_MINUTE: &str = "author_turns_per_minute";
/// Turns a minute the persona takes in one channel (`up --channel-turns` for this persona; 0:
/// no limit).
pub const CHANNEL_TURNS_PER_MINUTE: &str = "channel_turns_per_minute";
pub const LIMIT_KEYS: [&str; 5] = [
    TURNS_PER_HOUR,
    TURNS_PER_DAY,
    TOKENS_PER_DAY,
    AUTHOR_TURNS_PER_MINUTE,
    CHANNEL_TURNS_PER_MINUTE,
];

/// `None`: no limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PersonaLimits {
    pub turns_per_hour: Option<u64>,
    pub turns_per_day: Option<u64>,
    /// Tokens the agent reported using (`usage.totalTokens` of its prompt answers) in 24 hours.
    pub tokens_per_day: Option<u64>,
    /// Flood limits of this persona, in place of `up`'s `--author-turns` and `--channel-turns`.
    pub author_turns_per_minute: Option<u32>,
    pub channel_turns_per_minute: Option<u32>,
}

impl PersonaLimits {
    /// Reads a `limits` table; `Err` names the first key that is unknown or not a whole number.
    pub fn from_table(table: &Map<String, Value>) -> Result<PersonaLimits, String> {
        let mut limits = PersonaLimits::default();
        for (key, value) in table {
            let Some(n) = value.as_u64() else {
                return Err(format!(
                    "`{LIMITS}.{key}` must be a whole number, not {value}"
                ));
            };
            let per_minute = || {
                u32::try_from(n)
                    .map(Some)
                    .map_err(|_| format!("`{LIMITS}.{key}` is too large: {n}"))
            };
            match key.as_str() {
                AUTHOR_TURNS_PER_MINUTE => limits.author_turns_per_minute = per_minute()?,
                CHANNEL_TURNS_PER_MINUTE => limits.channel_turns_per_minute = per_minute()?,
                TURNS_PER_HOUR => limits.turns_per_hour = Some(n),
                TURNS_PER_DAY => limits.turns_per_day = Some(n),
                TOKENS_PER_DAY => limits.tokens_per_day = Some(n),
                _ => {
                    return Err(format!(
                        "unknown limit `{key}`: limits are {}",
                        LIMIT_KEYS.join(", ")
                    ));
                }
            }
        }
        Ok(limits)
    }

    /// These limits, with `lower`'s where these have none.
    pub fn or(self, lower: PersonaLimits) -> PersonaLimits {
        PersonaLimits {
            turns_per_hour: self.turns_per_hour.or(lower.turns_per_hour),
            turns_per_day: self.turns_per_day.or(lower.turns_per_day),
            tokens_per_day: self.tokens_per_day.or(lower.tokens_per_day),
            author_turns_per_minute: self
                .author_turns_per_minute
                .or(lower.author_turns_per_minute),
            channel_turns_per_minute: self
                .channel_turns_per_minute
                .or(lower.channel_turns_per_minute),
        }
    }

    /// Only the spending limits (turns per hour and day, tokens per day).
    pub fn spending(self) -> PersonaLimits {
        PersonaLimits {
            author_turns_per_minute: None,
            channel_turns_per_minute: None,
            ..self
        }
    }

    pub fn is_empty(&self) -> bool {
        *self == PersonaLimits::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_known_whole_numbers_and_names_the_bad_key() {
        let t = json!({"turns_per_hour": 5, "tokens_per_day": 1000});
        let l = PersonaLimits::from_table(t.as_object().unwrap()).unwrap();
        assert_eq!(l.turns_per_hour, Some(5));
        assert_eq!(l.turns_per_day, None);
        let lower = PersonaLimits {
            turns_per_day: Some(9),
            turns_per_hour: Some(1),
            ..PersonaLimits::default()
        };
        assert_eq!(l.or(lower).turns_per_day, Some(9));
        assert_eq!(l.or(lower).turns_per_hour, Some(5));
        let bad = json!({"turns_per_week": 5});
        let e = PersonaLimits::from_table(bad.as_object().unwrap()).unwrap_err();
        assert!(e.contains("turns_per_week"), "{e}");
        let neg = json!({"turns_per_day": -1});
        assert!(PersonaLimits::from_table(neg.as_object().unwrap()).is_err());
        let flood = json!({"author_turns_per_minute": 2, "channel_turns_per_minute": 0});
        let l = PersonaLimits::from_table(flood.as_object().unwrap()).unwrap();
        assert_eq!(
            (l.author_turns_per_minute, l.channel_turns_per_minute),
            (Some(2), Some(0))
        );
        assert!(l.spending().is_empty());
        let huge = json!({"author_turns_per_minute": 1u64 << 40});
        let e = PersonaLimits::from_table(huge.as_object().unwrap()).unwrap_err();
        assert!(e.contains("too large"), "{e}");
    }
}
