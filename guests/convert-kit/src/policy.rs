//! Tool policy in foreign agent formats: which tools an agent may use (`tools`,
//! `disallowedTools`, `permissionMode`, `readonly`, `allowed_tools`, …).
//!
//! A persona pack has no tool policy apiary enforces, so a persona converted from an agent with
//! a restriction runs without it: that meaning is lost at run time, and the report says `lost`
//! (the conversion exits 2) while the value is still carried in the converter's extension block
//! for the way back. A key that restricts nothing (an empty deny list, `readonly: false`,
//! `permissionMode: default`) loses nothing.

use serde_json::Value;

use crate::Report;

/// Keys that hold a tool policy in the formats the converters read.
const KEYS: &[&str] = &[
    "tools",
    "allowedTools",
    "disallowedTools",
    "allowed_tools",
    "disallowed_tools",
    "denied_tools",
    "permissionMode",
    "readonly",
    "read_only",
    "readonly_project",
];

/// Whether `key` names a tool policy.
pub fn is_policy_key(key: &str) -> bool {
    KEYS.contains(&key)
}

/// Whether `key: value` restricts what the agent may do (so losing it widens the agent's powers).
pub fn restricts(key: &str, value: &Value) -> bool {
    if !is_policy_key(key) {
        return false;
    }
    match value {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::String(s) => {
            let s = s.trim();
            !(s.is_empty() || (key == "permissionMode" && s.eq_ignore_ascii_case("default")))
        }
        Value::Array(items) => !items.is_empty(),
        Value::Object(map) => !map.is_empty(),
        Value::Number(_) => true,
    }
}

/// Reports `field` (at `path`) as a tool policy lost at run time, its value kept in `kept_in`.
pub fn report_lost(report: &mut Report, path: &str, field: &str, kept_in: &str) {
    report.lost(
        "tool-policy-lost",
        path,
        field,
        format!(
            "`{field}` restricts the agent's tools, but persona packs have no tool policy apiary enforces: the persona runs without it (kept in `{kept_in}` for the way back)"
        ),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_a_real_restriction_counts() {
        assert!(restricts("tools", &json!("Read, Grep")));
        assert!(restricts("tools", &json!(["Read"])));
        assert!(restricts("disallowedTools", &json!(["Bash"])));
        assert!(restricts("readonly", &json!(true)));
        assert!(restricts("permissionMode", &json!("plan")));
        assert!(!restricts("permissionMode", &json!("default")));
        assert!(!restricts("readonly", &json!(false)));
        assert!(!restricts("denied_tools", &json!([])));
        assert!(!restricts("tools", &json!("  ")));
        assert!(!restricts("color", &json!("red")));
    }
}
