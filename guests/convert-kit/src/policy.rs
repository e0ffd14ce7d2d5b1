//! Tool policy in foreign agent formats: which tools an agent may use (`tools`,
//! `disallowedTools`, `permissionMode`, `readonly`, `allowed_tools`, …).
//!
//! A persona's tool policy is its `x-tool-policy` (`allow`, `deny`, `read_only`), which `apiary
//! up` enforces through the agent's permission requests. [`to_tool_policy`] maps the keys that
//! fit it (an allow list, a deny list, read-only, Claude's `plan` mode); a restriction that does
//! not fit (Claude's `allowedTools`, which auto-approves, DuDuClaw's `readonly_project`) is lost
//! at run time, and the report says `lost` (the conversion exits 2) while the value is still
//! carried in the converter's extension block for the way back. A key that restricts nothing (an
//! empty deny list, `readonly: false`, `permissionMode: default`) loses nothing.

use serde_json::{Map, Value};

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
    // `tools: "*"` admits every tool.
    if key == "tools" && (value == "*" || *value == Value::Array(vec!["*".into()])) {
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

/// The persona frontmatter key of the policy.
pub const PERSONA_KEY: &str = "x-tool-policy";
/// Tools that write or run, denied on the way out for a read-only persona.
pub const WRITING_TOOLS: &[&str] = &["Write", "Edit", "MultiEdit", "NotebookEdit", "Bash"];

/// What an agent's tool-policy keys become.
#[derive(Debug, Default, PartialEq)]
pub struct Mapped {
    /// The `x-tool-policy` mapping (empty: no restriction to carry).
    pub policy: Map<String, Value>,
    /// Keys carried into it.
    pub carried: Vec<String>,
}

/// The `x-tool-policy` of an agent's frontmatter `fields`: `tools` is the allow list,
/// `disallowedTools` (`disallowed_tools`, `denied_tools`) the deny list, `readonly` /
/// `read_only` / `permissionMode: plan` read-only. A key whose value cannot be carried faithfully
/// (not text, an entry with control characters) is left out, so the caller reports it lost.
pub fn to_tool_policy(fields: &Map<String, Value>) -> Mapped {
    let mut out = Mapped::default();
    let mut allow: Vec<String> = Vec::new();
    let mut deny: Vec<String> = Vec::new();
    let mut read_only = false;
    for (key, value) in fields {
        if !restricts(key, value) {
            continue;
        }
        let carried = match key.as_str() {
            "tools" => names(value).map(|n| allow.extend(n)).is_some(),
            // Denying `*` (every tool) is no policy `pack validate` accepts: lost.
            "disallowedTools" | "disallowed_tools" | "denied_tools" => names(value)
                .filter(|n| !n.iter().any(|x| x.chars().all(|c| c == '*')))
                .map(|n| deny.extend(n))
                .is_some(),
            "readonly" | "read_only" => value.as_bool().map(|b| read_only |= b).is_some(),
            "permissionMode" => {
                let plan = value.as_str().is_some_and(|m| m.trim() == "plan");
                read_only |= plan;
                plan
            }
            _ => false,
        };
        if carried {
            out.carried.push(key.clone());
        }
    }
    // A `*` among other names still admits every tool: no allow list.
    if allow.iter().any(|a| a.chars().all(|c| c == '*')) {
        allow.clear();
        out.carried.retain(|k| k != "tools");
    }
    dedup(&mut allow);
    dedup(&mut deny);
    if !allow.is_empty() {
        out.policy.insert("allow".into(), strings(allow));
    }
    if !deny.is_empty() {
        out.policy.insert("deny".into(), strings(deny));
    }
    if read_only {
        out.policy.insert("read_only".into(), Value::Bool(true));
    }
    out
}

/// A Claude agent's `tools` and `disallowedTools` for a persona's `x-tool-policy`: the allow
/// list, the deny list plus, for a read-only persona, the tools that write or run. Empty when the
/// policy restricts nothing or is not a mapping.
pub fn to_claude_keys(policy: &Value) -> Map<String, Value> {
    let mut out = Map::new();
    let list = |k: &str| -> Vec<String> {
        policy
            .get(k)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    };
    let allow = list("allow");
    let mut deny = list("deny");
    if policy.get("read_only").and_then(Value::as_bool) == Some(true) {
        deny.extend(WRITING_TOOLS.iter().map(|t| t.to_string()));
    }
    dedup(&mut deny);
    if !allow.is_empty() {
        out.insert("tools".into(), allow.join(", ").into());
    }
    if !deny.is_empty() {
        out.insert("disallowedTools".into(), deny.join(", ").into());
    }
    out
}

/// Tool names from a comma-separated string or a list of strings; `None` when any is unusable.
fn names(value: &Value) -> Option<Vec<String>> {
    let raw: Vec<&str> = match value {
        Value::String(s) => s.split(',').collect(),
        Value::Array(items) => items.iter().map(Value::as_str).collect::<Option<_>>()?,
        _ => return None,
    };
    let names: Vec<String> = raw
        .iter()
        .map(|n| n.trim())
        .filter(|n| !n.is_empty())
        .map(str::to_string)
        .collect();
    // What `pack validate` accepts in `x-tool-policy` (a `kind:` entry is apiary's own syntax).
    let bidi = |c: char| matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}');
    let usable = |n: &String| {
        n.chars().count() <= 200
            && !n.chars().any(|c| c.is_control() || bidi(c))
            && !n.starts_with("kind:")
    };
    let fits = !names.is_empty() && names.len() <= 256 && names.iter().all(usable);
    fits.then_some(names)
}

fn dedup(v: &mut Vec<String>) {
    let mut seen = std::collections::BTreeSet::new();
    v.retain(|x| seen.insert(x.clone()));
}

fn strings(v: Vec<String>) -> Value {
    Value::Array(v.into_iter().map(Value::from).collect())
}

/// Reports `field` (at `path`) as carried into the persona's `x-tool-policy`.
pub fn report_carried(report: &mut Report, path: &str, field: &str) {
    report.reinterpreted(
        "tool-policy-carried",
        path,
        field,
        format!(
            "`{field}` is carried into the persona's `{PERSONA_KEY}`, which `apiary up` enforces through the agent's permission requests"
        ),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn claude_keys_map_into_the_persona_policy_and_back() {
        let fm = json!({"tools": "Read, Grep,  Glob", "disallowedTools": ["Bash(rm:*)"],
            "permissionMode": "plan", "allowedTools": ["Write"], "color": "red"});
        let m = to_tool_policy(fm.as_object().unwrap());
        assert_eq!(
            Value::Object(m.policy.clone()),
            json!({"allow": ["Read", "Grep", "Glob"], "deny": ["Bash(rm:*)"], "read_only": true})
        );
        let mut carried = m.carried.clone();
        carried.sort();
        assert_eq!(carried, ["disallowedTools", "permissionMode", "tools"]);
        let back = to_claude_keys(&Value::Object(m.policy));
        assert_eq!(back["tools"], "Read, Grep, Glob");
        assert_eq!(
            back["disallowedTools"],
            "Bash(rm:*), Write, Edit, MultiEdit, NotebookEdit, Bash"
        );
    }

    #[test]
    fn unusable_values_are_not_carried() {
        let fm = json!({"tools": [1, "Read"], "disallowedTools": "Ba\u{1b}sh, kind:edit",
            "permissionMode": "acceptEdits", "tools_x": "y"});
        let m = to_tool_policy(fm.as_object().unwrap());
        assert!(m.policy.is_empty(), "{m:?}");
        assert!(m.carried.is_empty());
        let star = to_tool_policy(json!({"tools": "Read, *"}).as_object().unwrap());
        assert!(star.policy.is_empty());
        assert!(star.carried.is_empty());
        assert!(!restricts("tools", &json!("*")));
    }

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
