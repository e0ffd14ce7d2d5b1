//! What a converter says it does (its `info` answer), checked before the converter is listed:
//! format ids that can be printed and used as directory names, no conversion to itself. Both the
//! registry (built-ins) and the store (added converters) check with it.

use crate::sandbox::converter::ConverterInfo;

/// A format id: `[a-z0-9][a-z0-9.-]*`, at most 64 (it is printed and used in directory names).
pub fn valid_format(id: &str) -> bool {
    let b = id.as_bytes();
    !b.is_empty()
        && b.len() <= 64
        && (b[0].is_ascii_lowercase() || b[0].is_ascii_digit())
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || b".-".contains(c))
}

/// Why a converter's `info` answer is refused; the text completes "<converter>: …".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConversionsError {
    /// The id as listed, cut to 80 bytes.
    #[error(
        "its info lists the format id {0:?}, which is not a valid format id ([a-z0-9][a-z0-9.-]*, at most 64)"
    )]
    BadFormat(String),
    #[error("its info lists a conversion from {0} to itself")]
    ToItself(String),
}

impl ConversionsError {
    /// A short machine-readable kind, for `--json` output and tests.
    pub fn kind(&self) -> &'static str {
        match self {
            ConversionsError::BadFormat(_) => "bad-format",
            ConversionsError::ToItself(_) => "to-itself",
        }
    }
}

/// The conversions an `info` answer lists, refused when a format id is not one.
pub fn checked_conversions(
    info: &ConverterInfo,
) -> Result<Vec<(String, String)>, ConversionsError> {
    let mut out = Vec::new();
    for c in &info.conversions {
        for id in [&c.source, &c.target] {
            if !valid_format(id) {
                let id = crate::sandbox::truncate(id, 80).to_string();
                return Err(ConversionsError::BadFormat(id));
            }
        }
        if c.source == c.target {
            return Err(ConversionsError::ToItself(c.source.clone()));
        }
        let pair = (c.source.clone(), c.target.clone());
        if !out.contains(&pair) {
            out.push(pair);
        }
    }
    Ok(out)
}
