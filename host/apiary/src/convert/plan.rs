//! Which converter(s) turn one format into another: one whose `info` lists the pair directly, else
//! a chain through the persona pack, the pivot format (`A -> buzz-pack -> B`). Built-ins are
//! preferred over added converters, in registry order.

use serde::Serialize;

use super::registry::Registry;

/// The pivot every converter reads or writes.
pub const PIVOT: &str = "buzz-pack";

/// One conversion by one converter.
#[derive(Debug, Clone, Serialize)]
pub struct Step {
    pub converter: String,
    pub source: String,
    pub target: String,
}

/// Why no converter or chain turns one format into another.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// `read` lists the formats converters read (`none` when there are none).
    #[error("no available converter reads {format} (formats converters read: {read})")]
    NoReader { format: String, read: String },
    #[error("no available converter writes {format} (formats converters write: {written})")]
    NoWriter { format: String, written: String },
    #[error("no converter turns {from} into {to}, directly or through {PIVOT}")]
    NoRoute { from: String, to: String },
}

impl PlanError {
    /// A short machine-readable kind, for `--json` output and tests.
    pub fn kind(&self) -> &'static str {
        match self {
            PlanError::NoReader { .. } => "no-reader",
            PlanError::NoWriter { .. } => "no-writer",
            PlanError::NoRoute { .. } => "no-route",
        }
    }
}

/// The steps from `source` to `target`, or why there are none.
pub fn plan(reg: &Registry, source: &str, target: &str) -> Result<Vec<Step>, PlanError> {
    let step = |name: &str, s: &str, t: &str| Step {
        converter: name.to_string(),
        source: s.to_string(),
        target: t.to_string(),
    };
    if let Some(c) = reg.converters.iter().find(|c| c.converts(source, target)) {
        return Ok(vec![step(&c.name, source, target)]);
    }
    let first = reg.converters.iter().find(|c| c.converts(source, PIVOT));
    let second = reg.converters.iter().find(|c| c.converts(PIVOT, target));
    if source != PIVOT
        && target != PIVOT
        && let (Some(a), Some(b)) = (first, second)
    {
        return Ok(vec![
            step(&a.name, source, PIVOT),
            step(&b.name, PIVOT, target),
        ]);
    }
    let known = |v: Vec<&str>| {
        if v.is_empty() {
            "none".to_string()
        } else {
            v.join(", ")
        }
    };
    if !reg.converters.iter().any(|c| c.reads(source)) {
        return Err(PlanError::NoReader {
            format: source.to_string(),
            read: known(reg.sources()),
        });
    }
    if !reg.targets().contains(&target) {
        return Err(PlanError::NoWriter {
            format: target.to_string(),
            written: known(reg.targets()),
        });
    }
    Err(PlanError::NoRoute {
        from: source.to_string(),
        to: target.to_string(),
    })
}
