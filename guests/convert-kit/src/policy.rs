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

/// Every tool name the agent runtimes apiary runs use (Claude Code, Codex, Gemini CLI, goose):
/// the names of the host's tool table (`apiary_core::pack::tool_names`, which a host test keeps
/// this list equal to). The policy matches them case-insensitively and under every runtime's
/// spelling, so an entry naming one is carried as written.
pub const RUNTIME_TOOLS: &[&str] = &[
    "Agent",
    "AgentOutputTool",
    "AskUserQuestion",
    "Bash",
    "BashOutput",
    "BashOutputTool",
    "Config",
    "Edit",
    "EnterPlanMode",
    "EnterWorktree",
    "ExitPlanMode",
    "Glob",
    "Grep",
    "KillBash",
    "KillShell",
    "LS",
    "LSP",
    "ListMcpResourcesTool",
    "MultiEdit",
    "NotebookEdit",
    "NotebookRead",
    "Read",
    "ReadMcpResourceTool",
    "SendMessage",
    "Skill",
    "Task",
    "TaskCreate",
    "TaskGet",
    "TaskList",
    "TaskOutput",
    "TaskStop",
    "TaskUpdate",
    "TeamCreate",
    "TeamDelete",
    "TodoWrite",
    "ToolSearch",
    "WebFetch",
    "WebSearch",
    "Write",
    "activate_skill",
    "apply_patch",
    "ask_user",
    "close_agent",
    "complete_task",
    "developer__analyze",
    "developer__file_edit",
    "developer__file_write",
    "developer__image_processor",
    "developer__list_windows",
    "developer__screen_capture",
    "developer__shell",
    "developer__text_editor",
    "developer__tree",
    "enter_plan_mode",
    "exec_command",
    "exit_plan_mode",
    "glob",
    "google_web_search",
    "grep_files",
    "grep_search",
    "invoke_agent",
    "list_dir",
    "list_directory",
    "list_mcp_resources",
    "mcp__acp__Bash",
    "mcp__acp__BashOutput",
    "mcp__acp__Edit",
    "mcp__acp__KillShell",
    "mcp__acp__Read",
    "mcp__acp__Write",
    "read_file",
    "read_many_files",
    "read_mcp_resource",
    "replace",
    "request_user_input",
    "resume_agent",
    "run_shell_command",
    "save_memory",
    "search_file_content",
    "send_input",
    "shell",
    "shell_command",
    "spawn_agent",
    "tracker_add_dependency",
    "tracker_create_task",
    "tracker_get_task",
    "tracker_list_tasks",
    "tracker_update_task",
    "tracker_visualize",
    "update_plan",
    "view_image",
    "wait_agent",
    "web_fetch",
    "web_search",
    "write_file",
    "write_stdin",
    "write_todos",
];

/// GitHub Copilot's tool names (VS Code custom agents' and `.agent.md` `tools:`; the tool sets
/// `read`, `edit`, `search`, `execute`, `web`, … and the older single tools) -> the policy entry
/// each becomes: an ACP kind for a whole class of tools, a runtime tool name for one tool.
/// Sources: VS Code's chat tool reference and the tool-set names of its custom-agent docs.
pub const COPILOT_TOOLS: &[(&str, &str)] = &[
    ("read", "kind:read"),
    ("readFile", "kind:read"),
    ("problems", "kind:read"),
    ("changes", "kind:read"),
    ("testFailure", "kind:read"),
    ("terminalLastCommand", "kind:read"),
    ("terminalSelection", "kind:read"),
    ("getTerminalOutput", "kind:read"),
    ("selection", "kind:read"),
    ("edit", "kind:edit"),
    ("editFiles", "kind:edit"),
    ("createFile", "kind:edit"),
    ("createDirectory", "kind:edit"),
    ("editNotebook", "kind:edit"),
    ("new", "kind:edit"),
    ("newWorkspace", "kind:edit"),
    ("search", "kind:search"),
    ("codebase", "kind:search"),
    ("usages", "kind:search"),
    ("fileSearch", "kind:search"),
    ("textSearch", "kind:search"),
    ("listDirectory", "kind:search"),
    ("findTestFiles", "kind:search"),
    ("searchResults", "kind:search"),
    ("execute", "kind:execute"),
    ("runCommands", "kind:execute"),
    ("runInTerminal", "kind:execute"),
    ("runTasks", "kind:execute"),
    ("runTests", "kind:execute"),
    ("runNotebooks", "kind:execute"),
    ("terminal", "kind:execute"),
    ("web", "kind:fetch"),
    ("fetch", "kind:fetch"),
    ("githubRepo", "kind:fetch"),
    ("openSimpleBrowser", "kind:fetch"),
    ("think", "kind:think"),
    ("todos", "TodoWrite"),
    ("todo", "TodoWrite"),
    ("agent", "Task"),
    ("runSubagent", "Task"),
];

/// Copilot tool-set prefixes of `set/tool` names (`edit/editFiles`, `search/codebase`): the
/// set's entry stands for the tool when the tool itself is not in [`COPILOT_TOOLS`].
const COPILOT_SETS: &[&str] = &["read", "edit", "search", "execute", "web", "agent", "todo"];

/// Copilot names that stand for tools of the editor itself (VS Code's API, extensions,
/// notebooks' kernels…): no agent runtime apiary runs has them.
const EDITOR_ONLY: &[&str] = &[
    "vscode",
    "vscodeAPI",
    "extensions",
    "installExtension",
    "runVscodeCommand",
    "getProjectSetupInfo",
];

/// What one foreign tool name is in the policy's vocabulary: the entry, or `None` when nothing
/// the runtimes have stands for it (the caller reports it, never enforces it).
pub fn map_tool(name: &str) -> Option<String> {
    let name = name.trim();
    // `*` and other patterns are the author's own: kept as written.
    if name.contains('*') && !name.contains('/') {
        return Some(name.to_string());
    }
    if let Some((_, entry)) = COPILOT_TOOLS.iter().find(|(n, _)| *n == name) {
        return Some((*entry).to_string());
    }
    if EDITOR_ONLY.contains(&name) {
        return None;
    }
    // Claude Code's argument specifiers (`Bash(git diff:*)`) keep the tool's name first.
    let base = name.split('(').next().unwrap_or(name).trim();
    if RUNTIME_TOOLS.iter().any(|t| t.eq_ignore_ascii_case(base)) {
        return Some(name.to_string());
    }
    // MCP tools: Claude's `mcp__server__tool`, goose's `server__tool` and patterns of them.
    if base.starts_with("mcp__") || (base.contains("__") && !base.starts_with("__")) {
        return Some(name.to_string());
    }
    // Copilot's `set/tool` and `server/tool` (an MCP server's tool, `server/*` all of them).
    if let Some((set, tool)) = name.split_once('/') {
        if let Some((_, entry)) = COPILOT_TOOLS.iter().find(|(n, _)| *n == tool) {
            return Some((*entry).to_string());
        }
        if let Some(set) = COPILOT_SETS.iter().find(|s| **s == set) {
            return map_tool(set);
        }
        if set == "vscode" || tool.contains('/') || set.is_empty() || tool.is_empty() {
            return None;
        }
        let server = set.replace(['-', '.', ' '], "_");
        return Some(format!("mcp__{server}__{tool}"));
    }
    None
}

/// What an agent's tool-policy keys become.
#[derive(Debug, Default, PartialEq)]
pub struct Mapped {
    /// The `x-tool-policy` mapping (empty: no restriction to carry).
    pub policy: Map<String, Value>,
    /// Keys carried into it.
    pub carried: Vec<String>,
    /// Allow-list names with no equivalent in the runtimes' vocabulary ([`map_tool`]): left out
    /// of the policy, for the caller to report.
    pub unmapped: Vec<String>,
    /// Names rewritten into the policy's vocabulary, as (from, to).
    pub mapped: Vec<(String, String)>,
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
            "tools" => names(value)
                .map(|n| {
                    for name in n {
                        match map_tool(&name) {
                            Some(entry) if entry == name => allow.push(entry),
                            Some(entry) => {
                                out.mapped.push((name, entry.clone()));
                                allow.push(entry);
                            }
                            None => out.unmapped.push(name),
                        }
                    }
                })
                .is_some(),
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
    if allow.is_empty() {
        // Every name unmapped: no allow list can be enforced (the caller reports it lost).
        out.carried.retain(|k| k != "tools");
    }
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
    fn foreign_vocabularies_map_to_the_policy_names_and_kinds() {
        for (from, to) in [
            ("search", Some("kind:search")),
            ("edit/editFiles", Some("kind:edit")),
            ("runCommands", Some("kind:execute")),
            ("read/problems", Some("kind:read")),
            ("web/fetch", Some("kind:fetch")),
            ("github/*", Some("mcp__github__*")),
            (
                "my-server/create_issue",
                Some("mcp__my_server__create_issue"),
            ),
            ("Read", Some("Read")),
            ("Bash(git diff:*)", Some("Bash(git diff:*)")),
            ("run_shell_command", Some("run_shell_command")),
            ("exec_command", Some("exec_command")),
            ("developer__shell", Some("developer__shell")),
            ("mcp__gh__list", Some("mcp__gh__list")),
            ("*", Some("*")),
            ("vscodeAPI", None),
            ("vscode/runCommand", None),
            ("frobnicate", None),
        ] {
            assert_eq!(map_tool(from).as_deref(), to, "{from}");
        }
        let m = to_tool_policy(
            json!({"tools": ["search", "Read", "vscodeAPI"]})
                .as_object()
                .unwrap(),
        );
        assert_eq!(m.policy["allow"], json!(["kind:search", "Read"]));
        assert_eq!(m.unmapped, ["vscodeAPI"]);
        assert_eq!(
            m.mapped,
            [("search".to_string(), "kind:search".to_string())]
        );
        assert_eq!(m.carried, ["tools"]);
        // Nothing mapped: no allow list, and `tools` is not carried (the caller reports it lost).
        let none = to_tool_policy(
            json!({"tools": "vscodeAPI, extensions"})
                .as_object()
                .unwrap(),
        );
        assert!(none.policy.is_empty());
        assert!(none.carried.is_empty());
        assert_eq!(none.unmapped.len(), 2);
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
