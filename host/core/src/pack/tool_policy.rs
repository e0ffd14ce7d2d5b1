//! `x-tool-policy` (an apiary extension of persona frontmatter): which of its agent's tools a
//! persona may use.
//!
//! ```yaml
//! x-tool-policy:
//!   allow: [Read, Grep, "mcp__github__*", "kind:search"]   # only these (absent: any tool)
//!   deny: [Bash, "kind:execute"]                            # never these, whatever else says
//!   read_only: true                                         # nothing that edits, moves, deletes or runs
//! ```
//!
//! An entry is a tool name as the agent names it (`Write`, `mcp__server__tool`), with `*` matching
//! any run of characters, or `kind:<kind>` for an ACP tool kind (`read`, `edit`, `delete`, `move`,
//! `search`, `execute`, `think`, `fetch`, `switch_mode`, `other`). A name with an argument
//! specifier in parentheses (`Bash(git diff:*)`, Claude Code's spelling) is matched by its name:
//! in `deny` the whole tool is refused, in `allow` it admits nothing apiary can check, so it never
//! matches (fail closed). The policy is decided before the operator's `--permission`: a tool the
//! policy refuses is rejected whatever that says; one it admits is then up to `--permission`.

use serde::Serialize;
use serde_json::{Map, Value};

use super::source::{Fields, suggest};
use crate::diag::{Diagnostic, Report};

/// The frontmatter key.
pub const KEY: &str = apiary_schema::persona::TOOL_POLICY;
/// Keys of the policy mapping.
pub const KEYS: &[&str] = &["allow", "deny", "read_only"];
/// ACP tool kinds (`ToolKind` of the protocol).
pub const KINDS: &[&str] = &[
    "read",
    "edit",
    "delete",
    "move",
    "search",
    "execute",
    "think",
    "fetch",
    "switch_mode",
    "other",
];
/// Kinds a read-only persona may not use.
const WRITING_KINDS: &[&str] = &["edit", "delete", "move", "execute"];
/// Tool names that write or run whatever kind an agent reports them as (Claude Code's own).
pub const WRITING_TOOLS: &[&str] = &[
    "Write",
    "Edit",
    "MultiEdit",
    "NotebookEdit",
    "Bash",
    "BashOutput",
    "KillShell",
];
/// At most this many entries in each list, and characters per entry.
pub const MAX_ENTRIES: usize = 256;
pub const MAX_ENTRY_LEN: usize = 200;

/// A persona's tool policy. The empty policy admits every tool (the operator's `--permission`
/// still decides).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ToolPolicy {
    /// When non-empty, only tools matching an entry are admitted.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allow: Vec<String>,
    /// Tools matching an entry are refused.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub deny: Vec<String>,
    /// Tools that edit, delete, move or run something are refused.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub read_only: bool,
}

/// What the agent says about a tool it wants to use.
#[derive(Debug, Clone, Copy, Default)]
pub struct ToolUse<'a> {
    /// The tool's name, when the agent gives it.
    pub name: Option<&'a str>,
    /// Its ACP kind, when the agent gives it.
    pub kind: Option<&'a str>,
}

impl ToolPolicy {
    pub fn is_empty(&self) -> bool {
        self.allow.is_empty() && self.deny.is_empty() && !self.read_only
    }

    /// `Err(why)` when the policy refuses `tool`. A tool the agent does not name cannot be shown
    /// to be allowed or read-only, so an allow list or `read_only` refuses it.
    pub fn decide(&self, tool: ToolUse<'_>) -> Result<(), String> {
        let shown = tool.name.unwrap_or("an unnamed tool");
        if let Some(entry) = self.deny.iter().find(|e| matches(e, tool, true)) {
            return Err(format!("{shown} is denied by `{entry}`"));
        }
        if self.read_only {
            let writes = tool.name.is_some_and(|n| WRITING_TOOLS.contains(&n))
                || tool.kind.is_some_and(|k| WRITING_KINDS.contains(&k));
            if writes {
                return Err(format!(
                    "{shown} changes things and the persona is read-only"
                ));
            }
            if tool.name.is_none() && tool.kind.is_none_or(|k| k == "other") {
                return Err(format!(
                    "{shown} of unknown kind cannot be shown to be read-only"
                ));
            }
        }
        if !self.allow.is_empty() && !self.allow.iter().any(|e| matches(e, tool, false)) {
            return Err(format!("{shown} is not in the allow list"));
        }
        Ok(())
    }

    /// Plain tool names of `deny` (no kinds, no wildcards) plus, when read-only, the tools that
    /// write: what a runtime that takes a deny list of its own tool names is given.
    pub fn denied_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .deny
            .iter()
            .filter(|e| !e.starts_with("kind:") && !e.contains('*'))
            .cloned()
            .collect();
        if self.read_only {
            names.extend(WRITING_TOOLS.iter().map(|s| s.to_string()));
        }
        names.sort();
        names.dedup();
        names
    }
}

/// Whether policy entry `entry` covers `tool`. `in_deny`: an entry with an argument specifier
/// covers the whole tool; in an allow list it covers nothing.
fn matches(entry: &str, tool: ToolUse<'_>, in_deny: bool) -> bool {
    if let Some(kind) = entry.strip_prefix("kind:") {
        return tool.kind == Some(kind);
    }
    let Some(name) = tool.name else {
        return false;
    };
    match entry.split_once('(') {
        Some((base, _)) => in_deny && glob(base.trim(), name),
        None => glob(entry, name),
    }
}

/// `pattern` with `*` for any run of characters, against the whole of `text`.
fn glob(pattern: &str, text: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or("");
    let Some(mut rest) = text.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

/// Reads `x-tool-policy` from persona frontmatter; every problem is an error at its place in the
/// file. `None` when the key is absent or the value cannot be used at all.
pub fn read(fields: &Fields<'_>, report: &mut Report) -> Option<ToolPolicy> {
    let map = fields.object(report, KEY)?;
    let nested = fields.nested(KEY, map);
    for key in map.keys().filter(|k| !KEYS.contains(&k.as_str())) {
        let d = Diagnostic::error(
            "persona.tool-policy",
            format!("unknown key `{key}` in `{KEY}`"),
        );
        let d = match suggest(key, KEYS) {
            Some(s) => d.help(format!("did you mean `{s}`?")),
            None => d.help(
                "`x-tool-policy` takes `allow`, `deny` (lists of tool names) and `read_only`",
            ),
        };
        report.push(fields.src.diag(d, &[KEY, key]));
    }
    let policy = ToolPolicy {
        allow: entries(&nested, map, "allow", report),
        deny: entries(&nested, map, "deny", report),
        read_only: nested.bool(report, "read_only").unwrap_or(false),
    };
    for both in policy.allow.iter().filter(|a| policy.deny.contains(a)) {
        let d = Diagnostic::warning(
            "persona.tool-policy-overlap",
            format!("`{both}` is both allowed and denied; denied wins"),
        );
        report.push(fields.src.diag(d, &[KEY, "deny"]));
    }
    Some(policy)
}

/// One list of entries, each checked; bad entries are reported and left out.
fn entries(
    fields: &Fields<'_>,
    map: &Map<String, Value>,
    key: &str,
    report: &mut Report,
) -> Vec<String> {
    let Some(value) = map.get(key).filter(|v| !v.is_null()) else {
        return Vec::new();
    };
    let Value::Array(items) = value else {
        fields.type_error(report, key, "a list of tool names", value);
        return Vec::new();
    };
    let error = |report: &mut Report, message: String| {
        let d = Diagnostic::error("persona.tool-policy", message)
            .help("an entry is a tool name (`Write`, `mcp__server__*`) or `kind:<kind>`");
        report.push(fields.src.diag(d, &[KEY, key]));
    };
    if items.len() > MAX_ENTRIES {
        error(
            report,
            format!(
                "`{KEY}.{key}` has {} entries, more than {MAX_ENTRIES}",
                items.len()
            ),
        );
        return Vec::new();
    }
    let mut out = Vec::new();
    for item in items {
        let Some(entry) = item.as_str() else {
            error(
                report,
                format!(
                    "`{KEY}.{key}` entries must be strings, found {}",
                    super::source::type_name(item)
                ),
            );
            continue;
        };
        match check_entry(entry) {
            Ok(()) => out.push(entry.to_string()),
            Err(why) => error(report, format!("`{KEY}.{key}` entry {why}")),
        }
    }
    out
}

/// Bidirectional formatting characters, which can make an entry read differently than it matches.
fn is_bidi(c: char) -> bool {
    matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// Why `entry` is not a usable policy entry.
fn check_entry(entry: &str) -> Result<(), String> {
    let shown: String = entry
        .chars()
        .take(40)
        .flat_map(char::escape_debug)
        .collect();
    if entry.trim().is_empty() {
        return Err("is empty".into());
    }
    if entry.chars().count() > MAX_ENTRY_LEN {
        return Err(format!(
            "\"{shown}…\" is longer than {MAX_ENTRY_LEN} characters"
        ));
    }
    if entry.chars().any(|c| c.is_control() || is_bidi(c)) {
        return Err(format!(
            "\"{shown}\" has control or bidirectional characters"
        ));
    }
    if entry != entry.trim() {
        return Err(format!("\"{shown}\" has blank space around it"));
    }
    if let Some(kind) = entry.strip_prefix("kind:")
        && !KINDS.contains(&kind)
    {
        return Err(format!(
            "\"{shown}\" names no ACP tool kind (one of {})",
            KINDS.join(", ")
        ));
    }
    if entry.chars().all(|c| c == '*') {
        return Err(format!(
            "\"{shown}\" matches every tool: leave `allow` out, or deny nothing"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool<'a>(name: Option<&'a str>, kind: Option<&'a str>) -> ToolUse<'a> {
        ToolUse { name, kind }
    }

    #[test]
    fn deny_wins_then_read_only_then_allow() {
        let p = ToolPolicy {
            allow: vec!["Read".into(), "mcp__gh__*".into(), "kind:search".into()],
            deny: vec!["mcp__gh__delete*".into()],
            read_only: false,
        };
        assert!(p.decide(tool(Some("Read"), None)).is_ok());
        assert!(p.decide(tool(Some("mcp__gh__issue"), None)).is_ok());
        assert!(p.decide(tool(Some("Grep"), Some("search"))).is_ok());
        let e = p
            .decide(tool(Some("mcp__gh__delete_repo"), None))
            .unwrap_err();
        assert!(e.contains("denied by `mcp__gh__delete*`"), "{e}");
        let e = p.decide(tool(Some("Write"), Some("edit"))).unwrap_err();
        assert!(e.contains("not in the allow list"), "{e}");
        assert!(
            p.decide(tool(None, None)).is_err(),
            "unnamed, with an allow list"
        );
    }

    #[test]
    fn read_only_refuses_writers_and_the_unknown() {
        let p = ToolPolicy {
            read_only: true,
            ..ToolPolicy::default()
        };
        assert!(p.decide(tool(Some("Read"), Some("read"))).is_ok());
        assert!(p.decide(tool(Some("Bash"), None)).is_err());
        assert!(p.decide(tool(Some("custom"), Some("execute"))).is_err());
        assert!(p.decide(tool(None, Some("other"))).is_err());
        assert!(p.decide(tool(None, Some("fetch"))).is_ok());
        assert!(p.denied_names().contains(&"Write".to_string()));
    }

    #[test]
    fn specifiers_deny_the_whole_tool_and_allow_nothing() {
        let p = ToolPolicy {
            deny: vec!["Bash(rm:*)".into()],
            ..ToolPolicy::default()
        };
        assert!(p.decide(tool(Some("Bash"), None)).is_err());
        let p = ToolPolicy {
            allow: vec!["Bash(git:*)".into()],
            ..ToolPolicy::default()
        };
        assert!(p.decide(tool(Some("Bash"), None)).is_err());
    }

    #[test]
    fn globs() {
        assert!(glob("a*c", "abc"));
        assert!(glob("a*c", "ac"));
        assert!(!glob("a*c", "acb"));
        assert!(glob("*x*", "axb"));
        assert!(!glob("ab", "abc"));
        assert!(glob("a**", "a"));
        assert!(!glob("aa*aa", "aaa"));
    }

    #[test]
    fn hostile_entries_are_refused() {
        assert!(check_entry("").is_err());
        assert!(check_entry("  ").is_err());
        assert!(check_entry(" Bash").is_err());
        assert!(check_entry("Ba\u{1b}[2Jsh").is_err());
        assert!(check_entry("Bash\u{202e}").is_err());
        assert!(check_entry(&"x".repeat(MAX_ENTRY_LEN + 1)).is_err());
        assert!(check_entry("kind:nuke").is_err());
        assert!(check_entry("**").is_err());
        assert!(check_entry("kind:execute").is_ok());
        assert!(check_entry("Bash(git diff:*)").is_ok());
    }
}
