//! `x-tool-policy` (an apiary extension of persona frontmatter): which of its agent's tools a
//! persona may use.
//!
//! ```yaml
//! x-tool-policy:
//!   allow: [Read, Grep, "mcp__github__*", "kind:search"]   # only these (absent: any tool)
//!   deny: [Bash, "kind:execute"]                            # never these, whatever else says
//!   read_only: true                                         # only tools known to only read
//! ```
//!
//! An entry is a tool name, with `*` matching any run of characters, or `kind:<kind>` for an ACP
//! tool kind (`read`, `edit`, `delete`, `move`, `search`, `execute`, `think`, `fetch`,
//! `switch_mode`, `other`). Names match case-insensitively and under every runtime's name for
//! the same tool ([`super::tool_names`]): `deny: [Bash]` also refuses Gemini's
//! `run_shell_command`, goose's `developer__shell` and Codex's `exec_command`. A name with an
//! argument specifier in parentheses (`Bash(git diff:*)`, Claude Code's spelling) is matched by
//! its name: in `deny` the whole tool is refused, in `allow` it admits nothing apiary can check,
//! so it never matches.
//!
//! The policy fails closed. When it has any rule, a request that names no tool is refused (a kind
//! alone is the agent's own label). `read_only` admits only tools the table knows to only read,
//! and only when their kind, if given, is not one that changes things; an MCP or otherwise
//! unknown tool is admitted under `read_only` only when an `allow` entry names it (by name or
//! pattern, not by kind). The operator's ceiling (`tool_ceiling` in the overrides file) is a
//! policy of the same shape around this one: a tool must pass both.
//!
//! The policy is decided before the operator's `--permission`: a tool the policy refuses is
//! rejected whatever that says; one it admits is then up to `--permission`.

use serde::{Serialize, Serializer};
use serde_json::Value;

use super::source::{Fields, suggest};
use super::tool_names;
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
/// Kinds that change something, which no read-only persona uses whatever the tool's name.
const CHANGING_KINDS: &[&str] = &["edit", "delete", "move", "execute", "switch_mode"];
/// At most this many entries in each list, and characters per entry.
pub const MAX_ENTRIES: usize = 256;
pub const MAX_ENTRY_LEN: usize = 200;
/// Said of a refusal that came from the operator's ceiling.
const BY_CEILING: &str = " (the operator's tool ceiling)";

/// A persona's tool policy. The empty policy admits every tool (the operator's `--permission`
/// still decides).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolPolicy {
    /// When non-empty, only tools matching an entry are admitted.
    pub allow: Vec<String>,
    /// Tools matching an entry are refused.
    pub deny: Vec<String>,
    /// Only tools known to only read are admitted.
    pub read_only: bool,
    /// The operator's ceiling this policy sits inside: a tool must pass it too.
    pub ceiling: Option<Box<ToolPolicy>>,
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
    /// No rule here or in the ceiling.
    pub fn is_empty(&self) -> bool {
        self.has_no_rule_of_its_own() && self.ceiling.as_deref().is_none_or(ToolPolicy::is_empty)
    }

    fn has_no_rule_of_its_own(&self) -> bool {
        self.allow.is_empty() && self.deny.is_empty() && !self.read_only
    }

    /// Read-only here or in the ceiling.
    pub fn is_read_only(&self) -> bool {
        self.read_only
            || self
                .ceiling
                .as_deref()
                .is_some_and(ToolPolicy::is_read_only)
    }

    /// This policy inside `ceiling`: a tool must pass both, so the ceiling can only narrow it.
    pub fn within(mut self, ceiling: Option<ToolPolicy>) -> ToolPolicy {
        let Some(ceiling) = ceiling.filter(|c| !c.is_empty()) else {
            return self;
        };
        self.ceiling = Some(Box::new(match self.ceiling.take() {
            Some(inner) => (*inner).within(Some(ceiling)),
            None => ceiling,
        }));
        self
    }

    /// Every `deny` entry, this policy's and the ceiling's.
    pub fn all_denied(&self) -> Vec<&String> {
        let mut all: Vec<&String> = self.deny.iter().collect();
        if let Some(ceiling) = &self.ceiling {
            for entry in ceiling.all_denied() {
                if !all.contains(&entry) {
                    all.push(entry);
                }
            }
        }
        all
    }

    /// `Err(why)` when the policy (or its ceiling) refuses `tool`.
    pub fn decide(&self, tool: ToolUse<'_>) -> Result<(), String> {
        if let Some(why) = self.ceiling.as_deref().and_then(|c| c.decide(tool).err()) {
            let why = if why.ends_with(BY_CEILING) {
                why
            } else {
                format!("{why}{BY_CEILING}")
            };
            return Err(why);
        }
        self.decide_its_own(tool)
    }

    fn decide_its_own(&self, tool: ToolUse<'_>) -> Result<(), String> {
        if self.has_no_rule_of_its_own() {
            return Ok(());
        }
        let name = tool.name.map(str::trim).filter(|n| !n.is_empty());
        let shown = name.unwrap_or("an unnamed tool");
        if let Some(entry) = self.deny.iter().find(|e| matches(e, tool, true)) {
            return Err(format!("{shown} is denied by `{entry}`"));
        }
        // A kind is the agent's own label: without a name nothing can be checked.
        let Some(name) = name else {
            let kind = tool
                .kind
                .map_or(String::new(), |k| format!(" (kind `{k}`)"));
            return Err(format!(
                "the agent named no tool{kind}, and a tool policy admits only tools it can name"
            ));
        };
        if self.read_only {
            self.check_read_only(name, tool.kind)?;
        }
        if !self.allow.is_empty() && !self.allow.iter().any(|e| matches(e, tool, false)) {
            return Err(format!("{name} is not in the allow list"));
        }
        Ok(())
    }

    /// `read_only`: an allowlist of tools known to only read, plus what `allow` names.
    fn check_read_only(&self, name: &str, kind: Option<&str>) -> Result<(), String> {
        if let Some(kind) =
            kind.filter(|k| CHANGING_KINDS.iter().any(|c| c.eq_ignore_ascii_case(k)))
        {
            return Err(format!(
                "{name} is of kind `{kind}`, which changes things, and the persona is read-only"
            ));
        }
        match tool_names::only_reads(name) {
            Some(true) => Ok(()),
            Some(false) => Err(format!(
                "{name} changes things and the persona is read-only"
            )),
            None if self.names_in_allow(name) => Ok(()),
            None => Err(format!(
                "{name} is not known to only read (an MCP or unknown tool) and the persona is \
                 read-only; an `allow` entry naming it would admit it"
            )),
        }
    }

    /// Whether an `allow` entry names `name` (by name or pattern; a kind names no tool).
    fn names_in_allow(&self, name: &str) -> bool {
        let tool = ToolUse {
            name: Some(name),
            kind: None,
        };
        self.allow
            .iter()
            .any(|e| !e.starts_with("kind:") && matches(e, tool, false))
    }

    /// What Claude Code's `disallowedTools` is given: its own names for every tool a plain
    /// `deny` entry (no kind, no wildcard) names, under any runtime's spelling, plus, when
    /// read-only, its tools that change things. The rest is refused when it asks.
    pub fn denied_claude_code_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .all_denied()
            .into_iter()
            .filter_map(|e| plain_name(e))
            .flat_map(tool_names::claude_code_names)
            .map(str::to_string)
            .collect();
        if self.is_read_only() {
            names.extend(tool_names::claude_code_changing().map(str::to_string));
        }
        names.sort();
        names.dedup();
        names
    }
}

/// The tool name of a `deny` entry that names one tool: none for a kind or a pattern.
fn plain_name(entry: &str) -> Option<&str> {
    let name = entry.split_once('(').map_or(entry, |(base, _)| base).trim();
    (!entry.starts_with("kind:") && !name.contains('*') && !name.is_empty()).then_some(name)
}

/// `inspect`'s view: `deny` and `read_only` as enforced (with the ceiling's), `allow` this
/// policy's own, and the ceiling as the operator wrote it, so its part can be told apart.
impl Serialize for ToolPolicy {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Shown<'a> {
            #[serde(skip_serializing_if = "Vec::is_empty")]
            allow: &'a Vec<String>,
            #[serde(skip_serializing_if = "Vec::is_empty")]
            deny: Vec<&'a String>,
            #[serde(skip_serializing_if = "std::ops::Not::not")]
            read_only: bool,
            #[serde(skip_serializing_if = "Option::is_none")]
            ceiling: Option<&'a ToolPolicy>,
        }
        Shown {
            allow: &self.allow,
            deny: self.all_denied(),
            read_only: self.is_read_only(),
            ceiling: self.ceiling.as_deref(),
        }
        .serialize(serializer)
    }
}

/// Whether policy entry `entry` covers `tool`. `in_deny`: an entry with an argument specifier
/// covers the whole tool; in an allow list it covers nothing.
fn matches(entry: &str, tool: ToolUse<'_>, in_deny: bool) -> bool {
    if let Some(kind) = entry.strip_prefix("kind:") {
        return tool
            .kind
            .is_some_and(|k| k.trim().eq_ignore_ascii_case(kind));
    }
    let Some(name) = tool.name.map(str::trim).filter(|n| !n.is_empty()) else {
        return false;
    };
    match entry.split_once('(') {
        Some((base, _)) => in_deny && names_match(base.trim(), name),
        None => names_match(entry, name),
    }
}

/// Whether `pattern` covers `name` under any of its runtimes' spellings, case aside.
fn names_match(pattern: &str, name: &str) -> bool {
    let pattern = pattern.to_lowercase();
    tool_names::spellings(name)
        .iter()
        .any(|s| glob(&pattern, &s.to_lowercase()))
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

/// Where a policy is written: its key, and the codes of the diagnostics about it.
pub struct Place {
    pub key: &'static str,
    pub code: &'static str,
    pub overlap_code: &'static str,
}

/// A persona's own `x-tool-policy`.
pub const FRONTMATTER: Place = Place {
    key: KEY,
    code: "persona.tool-policy",
    overlap_code: "persona.tool-policy-overlap",
};

/// Reads `x-tool-policy` from persona frontmatter; every problem is an error at its place in the
/// file. `None` when the key is absent or the value cannot be used at all.
pub fn read(fields: &Fields<'_>, report: &mut Report) -> Option<ToolPolicy> {
    read_at(fields, &FRONTMATTER, report)
}

/// Reads a policy mapping at `place.key` of `fields` (the frontmatter, or a table of the
/// overrides file), each problem an error at its place.
pub fn read_at(fields: &Fields<'_>, place: &Place, report: &mut Report) -> Option<ToolPolicy> {
    let key = place.key;
    let map = fields.object(report, key)?;
    let nested = fields.nested(key, map);
    for unknown in map.keys().filter(|k| !KEYS.contains(&k.as_str())) {
        let d = Diagnostic::error(place.code, format!("unknown key `{unknown}` in `{key}`"));
        let d = match suggest(unknown, KEYS) {
            Some(s) => d.help(format!("did you mean `{s}`?")),
            None => d.help(format!(
                "`{key}` takes `allow`, `deny` (lists of tool names) and `read_only`"
            )),
        };
        report.push(fields.src.diag(d, &at(&nested, unknown)));
    }
    let policy = ToolPolicy {
        allow: entries(&nested, place, "allow", report),
        deny: entries(&nested, place, "deny", report),
        read_only: nested.bool(report, "read_only").unwrap_or(false),
        ceiling: None,
    };
    for both in policy.allow.iter().filter(|a| policy.deny.contains(a)) {
        let d = Diagnostic::warning(
            place.overlap_code,
            format!("`{both}` is both allowed and denied; denied wins"),
        );
        report.push(fields.src.diag(d, &at(&nested, "deny")));
    }
    Some(policy)
}

/// The path of `key` in `fields`, to place a diagnostic.
fn at<'a>(fields: &Fields<'a>, key: &'a str) -> Vec<&'a str> {
    let mut path = fields.prefix.clone();
    path.push(key);
    path
}

/// One list of entries of the policy mapping `fields`, each checked; bad entries are reported
/// and left out.
fn entries<'a>(
    fields: &Fields<'a>,
    place: &Place,
    key: &'a str,
    report: &mut Report,
) -> Vec<String> {
    let Some(value) = fields.get(key) else {
        return Vec::new();
    };
    let Value::Array(items) = value else {
        fields.type_error(report, key, "a list of tool names", value);
        return Vec::new();
    };
    let shown_key = format!("{}.{key}", place.key);
    let error = |report: &mut Report, message: String| {
        let d = Diagnostic::error(place.code, message)
            .help("an entry is a tool name (`Write`, `mcp__server__*`) or `kind:<kind>`");
        report.push(fields.src.diag(d, &at(fields, key)));
    };
    if items.len() > MAX_ENTRIES {
        error(
            report,
            format!(
                "`{shown_key}` has {} entries, more than {MAX_ENTRIES}",
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
                    "`{shown_key}` entries must be strings, found {}",
                    super::source::type_name(item)
                ),
            );
            continue;
        };
        match check_entry(entry) {
            Ok(()) => out.push(entry.to_string()),
            Err(why) => error(report, format!("`{shown_key}` entry {why}")),
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

    fn policy(allow: &[&str], deny: &[&str], read_only: bool) -> ToolPolicy {
        let list = |l: &[&str]| l.iter().map(|s| s.to_string()).collect();
        ToolPolicy {
            allow: list(allow),
            deny: list(deny),
            read_only,
            ceiling: None,
        }
    }

    fn refuses(p: &ToolPolicy, name: Option<&str>, kind: Option<&str>) -> String {
        p.decide(tool(name, kind))
            .expect_err(&format!("{name:?} ({kind:?}) was admitted"))
    }

    #[test]
    fn deny_wins_then_read_only_then_allow() {
        let p = policy(
            &["Read", "mcp__gh__*", "kind:search"],
            &["mcp__gh__delete*"],
            false,
        );
        assert!(p.decide(tool(Some("Read"), None)).is_ok());
        assert!(p.decide(tool(Some("mcp__gh__issue"), None)).is_ok());
        assert!(p.decide(tool(Some("Grep"), Some("search"))).is_ok());
        let e = refuses(&p, Some("mcp__gh__delete_repo"), None);
        assert!(e.contains("denied by `mcp__gh__delete*`"), "{e}");
        let e = refuses(&p, Some("Write"), Some("edit"));
        assert!(e.contains("not in the allow list"), "{e}");
        refuses(&p, None, None);
    }

    /// Issue 31, finding 3: what Claude Code reports for MCP tools (kind `other`), `Task`
    /// (`think`) and `KillBash`/`KillShell` passed `read_only`.
    #[test]
    fn read_only_admits_only_tools_known_to_read() {
        let p = policy(&[], &[], true);
        for (name, kind) in [
            ("mcp__fs__write_file", Some("other")),
            ("mcp__github__delete_repo", Some("other")),
            ("Task", Some("think")),
            ("KillBash", Some("other")),
            ("KillShell", Some("execute")),
            ("TaskStop", None),
            ("ExitPlanMode", Some("switch_mode")),
            ("Bash", None),
            ("run_shell_command", Some("execute")),
            ("developer__text_editor", None),
            ("frobnicate", Some("read")),
            ("Write", Some("edit")),
        ] {
            let e = refuses(&p, Some(name), kind);
            assert!(e.contains("read-only"), "{name}: {e}");
        }
        for (name, kind) in [
            ("Read", Some("read")),
            ("Grep", Some("search")),
            ("Glob", Some("search")),
            ("LS", Some("search")),
            ("WebFetch", Some("fetch")),
            ("TodoWrite", Some("think")),
            ("read_file", Some("read")),
            ("developer__tree", None),
            ("LSP", Some("other")),
        ] {
            assert!(p.decide(tool(Some(name), kind)).is_ok(), "{name}");
        }
        // A reader's name with a kind that changes things is not taken on trust.
        let e = refuses(&p, Some("Read"), Some("execute"));
        assert!(e.contains("kind `execute`"), "{e}");
    }

    #[test]
    fn read_only_admits_an_mcp_tool_only_when_named() {
        let named = policy(&["Read", "mcp__gh__list_*"], &[], true);
        assert!(
            named
                .decide(tool(Some("mcp__gh__list_issues"), Some("other")))
                .is_ok()
        );
        let e = refuses(&named, Some("mcp__gh__delete_repo"), Some("other"));
        assert!(e.contains("an `allow` entry naming it"), "{e}");
        // Naming a tool that changes things does not make it read-only; a kind names no tool.
        refuses(&policy(&["Bash"], &[], true), Some("Bash"), None);
        refuses(
            &policy(&["kind:other"], &[], true),
            Some("mcp__gh__list_issues"),
            Some("other"),
        );
    }

    /// Issue 31, finding 3: `deny: [Bash]` matched only `Bash`, case-sensitively.
    #[test]
    fn deny_covers_every_runtime_s_name_case_aside() {
        let p = policy(&[], &["Bash"], false);
        for name in [
            "Bash",
            "bash",
            "BASH",
            "run_shell_command",
            "developer__shell",
            "shell",
            "exec_command",
            "mcp__acp__Bash",
        ] {
            let e = refuses(&p, Some(name), None);
            assert!(e.contains("denied by `Bash`"), "{name}: {e}");
        }
        assert!(p.decide(tool(Some("Read"), None)).is_ok());
        let p = policy(&[], &["kind:execute", "MCP__GITHUB__*"], false);
        refuses(&p, Some("anything"), Some("EXECUTE"));
        refuses(&p, Some("mcp__github__delete_repo"), None);
        refuses(&p, Some("github__delete_repo"), None);
        // An allow entry is matched the same way.
        let p = policy(&["read"], &[], false);
        assert!(p.decide(tool(Some("read_file"), None)).is_ok());
    }

    /// Issue 31, finding 3: a request naming no tool passed every deny list.
    #[test]
    fn an_unnamed_tool_is_refused_by_any_rule() {
        for p in [
            policy(&[], &["Bash"], false),
            policy(&["Read"], &[], false),
            policy(&[], &[], true),
        ] {
            for kind in [None, Some("edit"), Some("read"), Some("other")] {
                let e = refuses(&p, None, kind);
                assert!(e.contains("named no tool"), "{p:?} {kind:?}: {e}");
            }
            refuses(&p, Some("  "), Some("read"));
        }
        assert!(ToolPolicy::default().decide(tool(None, None)).is_ok());
    }

    #[test]
    fn the_ceiling_only_narrows() {
        let ceiling = policy(&["Read", "Grep", "mcp__gh__*"], &["kind:execute"], false);
        // The pack allows Bash and Write; the ceiling admits neither.
        let p = policy(&["Read", "Write", "Bash"], &[], false).within(Some(ceiling.clone()));
        assert!(p.decide(tool(Some("Read"), Some("read"))).is_ok());
        let e = refuses(&p, Some("Bash"), Some("execute"));
        assert!(e.contains("the operator's tool ceiling"), "{e}");
        let e = refuses(&p, Some("Write"), Some("edit"));
        assert!(e.contains("not in the allow list (the operator's"), "{e}");
        // Grep passes the ceiling but not the pack's own allow list.
        let e = refuses(&p, Some("Grep"), Some("search"));
        assert!(!e.contains("ceiling"), "{e}");
        // A read-only ceiling: naming an MCP tool in the pack's allow list does not widen it.
        let ro = policy(&[], &[], true);
        let p = policy(&["mcp__fs__*"], &[], false).within(Some(ro.clone()));
        assert!(p.is_read_only());
        let e = refuses(&p, Some("mcp__fs__write_file"), Some("other"));
        assert!(e.contains("ceiling"), "{e}");
        // A ceiling that names the MCP tool admits it under its own read_only.
        let named = policy(&["Read", "mcp__fs__read_file"], &[], true);
        let p = ToolPolicy::default().within(Some(named));
        assert!(
            p.decide(tool(Some("mcp__fs__read_file"), Some("other")))
                .is_ok()
        );
        // Ceilings nest (a persona's inside its pack's), each narrowing.
        let p = policy(&[], &["Write"], false)
            .within(Some(policy(&[], &["Edit"], false)))
            .within(Some(ceiling));
        for name in ["Write", "Edit", "Bash"] {
            refuses(&p, Some(name), Some("execute"));
        }
        assert_eq!(p.all_denied(), ["Write", "Edit", "kind:execute"]);
        // An empty ceiling leaves the policy as it was.
        assert_eq!(ro.clone().within(Some(ToolPolicy::default())), ro);
    }

    #[test]
    fn claude_code_is_told_every_spelling_it_has() {
        let p = policy(
            &[],
            &["run_shell_command", "Bash(rm:*)", "kind:fetch", "mcp__*"],
            false,
        )
        .within(Some(policy(
            &[],
            &["mcp__gh__delete_repo", "write_file"],
            false,
        )));
        assert_eq!(
            p.denied_claude_code_names(),
            [
                "Bash",
                "Write",
                "mcp__acp__Bash",
                "mcp__acp__Write",
                "mcp__gh__delete_repo"
            ]
        );
        let ro = policy(&[], &[], false).within(Some(policy(&[], &[], true)));
        let names = ro.denied_claude_code_names();
        for name in [
            "Bash",
            "Write",
            "Edit",
            "Task",
            "KillShell",
            "TaskStop",
            "ExitPlanMode",
        ] {
            assert!(names.iter().any(|n| n == name), "{name}: {names:?}");
        }
        assert!(!names.iter().any(|n| n == "Read"), "{names:?}");
    }

    #[test]
    fn inspect_shows_the_ceiling_s_part() {
        let p =
            policy(&["Read"], &["Bash"], false).within(Some(policy(&[], &["kind:execute"], true)));
        assert_eq!(
            serde_json::to_value(&p).unwrap(),
            serde_json::json!({"allow": ["Read"], "deny": ["Bash", "kind:execute"], "read_only": true,
                "ceiling": {"deny": ["kind:execute"], "read_only": true}})
        );
        assert_eq!(
            serde_json::to_value(policy(&[], &["Bash"], false)).unwrap(),
            serde_json::json!({"deny": ["Bash"]})
        );
    }

    #[test]
    fn specifiers_deny_the_whole_tool_and_allow_nothing() {
        let p = policy(&[], &["Bash(rm:*)"], false);
        assert!(p.decide(tool(Some("Bash"), None)).is_err());
        assert!(p.decide(tool(Some("run_shell_command"), None)).is_err());
        let p = policy(&["Bash(git:*)"], &[], false);
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
