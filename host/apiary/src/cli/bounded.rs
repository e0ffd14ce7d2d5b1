//! Numeric flags with a range: every duration and count the command line takes is bounded here,
//! so a value past what the code can add to a clock or allocate (`--timeout 18446744073709551615`)
//! is a usage error naming the range, never a panic further in.

/// Seconds in a minute, an hour, a day.
pub const MINUTE: u64 = 60;
pub const HOUR: u64 = 60 * MINUTE;
pub const DAY: u64 = 24 * HOUR;

/// What a flag counts, for the message.
#[derive(Debug, Clone, Copy)]
pub enum Unit {
    Seconds,
    Count,
    Bytes,
}

/// A whole number between `min` and `max` (inclusive), of `unit`.
#[derive(Debug, Clone, Copy)]
struct Bounded {
    min: u64,
    max: u64,
    unit: Unit,
}

/// What a flag takes, as a clap value parser: `value_parser = bounded::secs(1, DAY)`.
pub trait Parser<T>: Fn(&str) -> Result<T, String> + Clone + Send + Sync + 'static {}
impl<T, F: Fn(&str) -> Result<T, String> + Clone + Send + Sync + 'static> Parser<T> for F {}

fn parser<T: TryFrom<u64>>(b: Bounded) -> impl Parser<T> {
    move |value: &str| {
        let n = b.check(value)?;
        T::try_from(n).map_err(|_| format!("{n} is too large here"))
    }
}

/// Seconds, from `min` to `max`.
pub fn secs<T: TryFrom<u64>>(min: u64, max: u64) -> impl Parser<T> {
    parser(Bounded {
        min,
        max,
        unit: Unit::Seconds,
    })
}

/// A count, from `min` to `max`.
pub fn count<T: TryFrom<u64>>(min: u64, max: u64) -> impl Parser<T> {
    parser(Bounded {
        min,
        max,
        unit: Unit::Count,
    })
}

/// A size in bytes, from `min` to `max`.
pub fn bytes<T: TryFrom<u64>>(min: u64, max: u64) -> impl Parser<T> {
    parser(Bounded {
        min,
        max,
        unit: Unit::Bytes,
    })
}

impl Bounded {
    /// The range in words: `1 to 86400 seconds (1 day)`.
    fn range(&self) -> String {
        let unit = match self.unit {
            Unit::Seconds => " seconds",
            Unit::Count => "",
            Unit::Bytes => " bytes",
        };
        let gloss = match self.unit {
            Unit::Seconds => format!(" ({})", human_secs(self.max)),
            Unit::Bytes if self.max >= 1 << 20 => format!(" ({} MiB)", self.max >> 20),
            _ => String::new(),
        };
        format!("{} to {}{unit}{gloss}", self.min, self.max)
    }

    /// `value` checked against the range; the error text says what the flag takes.
    fn check(&self, value: &str) -> Result<u64, String> {
        let n: u64 = value
            .trim()
            .parse()
            .map_err(|_| format!("`{value}` is not a whole number; expected {}", self.range()))?;
        if n < self.min || n > self.max {
            return Err(format!("{n} is out of range; expected {}", self.range()));
        }
        Ok(n)
    }
}

/// `7 days`, `30 minutes`, `5 s`: the largest whole unit.
fn human_secs(s: u64) -> String {
    let plural = |n: u64, one: &str| format!("{n} {one}{}", if n == 1 { "" } else { "s" });
    if s >= DAY && s.is_multiple_of(DAY) {
        plural(s / DAY, "day")
    } else if s >= HOUR && s.is_multiple_of(HOUR) {
        plural(s / HOUR, "hour")
    } else if s >= MINUTE && s.is_multiple_of(MINUTE) {
        plural(s / MINUTE, "minute")
    } else {
        format!("{s} s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_are_checked_and_said() {
        let b = secs::<u64>(1, 7 * DAY);
        assert_eq!(b("60"), Ok(60));
        let e = b("18446744073709551615").unwrap_err();
        assert!(e.contains("1 to 604800 seconds (7 days)"), "{e}");
        assert!(b("0").is_err());
        assert!(b("-1").unwrap_err().contains("not a whole number"));
        assert_eq!(count::<u32>(0, 10)("0"), Ok(0));
        assert!(
            bytes::<usize>(1024, 64 << 20)("1")
                .unwrap_err()
                .contains("(64 MiB)")
        );
    }
}
