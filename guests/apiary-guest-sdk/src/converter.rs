//! The `converter` world: turn a tree in one format into another.
//!
//! For `detect` and `convert` the input tree is preopened read-only at [`INPUT`]; for `convert`
//! an empty output directory is preopened read-write at [`OUTPUT`] (`std::fs` and [`crate::tree`]
//! work on both). `info` gets no filesystem. A failed conversion is reported to the operator with
//! your message, and the host discards the partly written output.

pub use crate::report::{Finding, Report};

/// Where the input tree is preopened (read-only).
pub const INPUT: &str = "/input";
/// Where the output directory is preopened (read-write, empty at the start).
pub const OUTPUT: &str = "/output";

/// One conversion a converter can do, between two format ids.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conversion {
    pub source: String,
    pub target: String,
}

/// What a converter is and can do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConverterInfo {
    /// A short name, for logs and `apiary component inspect`.
    pub name: String,
    /// The converter's own version (semver).
    pub version: String,
    pub conversions: Vec<Conversion>,
}

impl ConverterInfo {
    /// A converter with no conversions yet; add them with [`ConverterInfo::converts`].
    pub fn new(name: impl Into<String>, version: impl Into<String>) -> Self {
        ConverterInfo {
            name: name.into(),
            version: version.into(),
            conversions: Vec::new(),
        }
    }

    /// Adds the conversion `source` -> `target`.
    pub fn converts(mut self, source: impl Into<String>, target: impl Into<String>) -> Self {
        self.conversions.push(Conversion {
            source: source.into(),
            target: target.into(),
        });
        self
    }
}

/// How sure a converter is that the input tree is in a format.
#[derive(Debug, Clone, PartialEq)]
pub struct Detection {
    /// A source format id from `info`.
    pub format: String,
    /// 0.0 (certainly not) to 1.0 (certainly).
    pub confidence: f32,
    /// What the guess rests on, for the operator.
    pub evidence: String,
}

impl Detection {
    pub fn new(format: impl Into<String>, confidence: f32, evidence: impl Into<String>) -> Self {
        Detection {
            format: format.into(),
            confidence,
            evidence: evidence.into(),
        }
    }
}

/// A conversion request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Request {
    pub source: String,
    pub target: String,
    /// Converter-specific options (`apiary convert --option key=value`).
    pub options: Vec<(String, String)>,
}

impl Request {
    /// The value of option `key`, if given.
    pub fn option(&self, key: &str) -> Option<&str> {
        self.options
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The error for a conversion this converter does not do.
    pub fn unsupported(&self, converter: &str) -> String {
        format!(
            "{converter} does not convert {} -> {}",
            self.source, self.target
        )
    }
}

/// A format converter. `detect` defaults to ruling nothing in (an empty list).
pub trait Converter {
    /// The formats and directions this converter supports.
    fn info() -> ConverterInfo;

    /// How likely the tree at [`INPUT`] is in each format this converter reads; formats ruled out
    /// may be omitted.
    fn detect() -> Vec<Detection> {
        Vec::new()
    }

    /// Converts [`INPUT`] into [`OUTPUT`]: the report of everything not carried over verbatim, or
    /// a message for the operator.
    fn convert(request: Request) -> Result<Report, String>;
}

/// Used by the export macro: a clear error when the type does not implement [`Converter`].
#[doc(hidden)]
pub fn __assert_converter<T: Converter>() {}
