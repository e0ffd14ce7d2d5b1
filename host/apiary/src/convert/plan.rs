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

/// The steps from `source` to `target`, or why there are none.
pub fn plan(reg: &Registry, source: &str, target: &str) -> Result<Vec<Step>, String> {
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
        return Err(format!(
            "no available converter reads {source} (formats converters read: {})",
            known(reg.sources())
        ));
    }
    if !reg.targets().contains(&target) {
        return Err(format!(
            "no available converter writes {target} (formats converters write: {})",
            known(reg.targets())
        ));
    }
    Err(format!(
        "no converter turns {source} into {target}, directly or through {PIVOT}"
    ))
}
