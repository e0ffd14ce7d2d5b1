//! An operator's limits on one persona's spending, from the overrides file (`limits = {...}` in
//! the persona's table) or from the `[limits]` table of the `agent.toml` an expert-pack install
//! wrote. `apiary up` enforces them (its `dispatch::limits`).

use serde_json::{Map, Value};

/// The key, in an overrides persona table and in `agent.toml`.
pub const LIMITS: &str = "limits";
pub const TURNS_PER_HOUR: &str = "turns_per_hour";
pub const TURNS_PER_DAY: &str = "turns_per_day";
pub const TOKENS_PER_DAY: &str = "tokens_per_day";
pub const LIMIT_KEYS: [&str; 3] = [TURNS_PER_HOUR, TURNS_PER_DAY, TOKENS_PER_DAY];

/// `None`: no limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PersonaLimits {
    pub turns_per_hour: Option<u64>,
    pub turns_per_day: Option<u64>,
    /// Tokens the agent reported using (`usage.totalTokens` of its prompt answers) in 24 hours.
    pub tokens_per_day: Option<u64>,
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
            match key.as_str() {
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
            tokens_per_day: None,
        };
        assert_eq!(l.or(lower).turns_per_day, Some(9));
        assert_eq!(l.or(lower).turns_per_hour, Some(5));
        let bad = json!({"turns_per_week": 5});
        let e = PersonaLimits::from_table(bad.as_object().unwrap()).unwrap_err();
        assert!(e.contains("turns_per_week"), "{e}");
        let neg = json!({"turns_per_day": -1});
        assert!(PersonaLimits::from_table(neg.as_object().unwrap()).is_err());
    }
}
