//! The agent runtimes' own names for the same tools, and which of those tools only read.
//!
//! A pack writes its `x-tool-policy` with one runtime's names (`deny: [Bash]`), but the persona
//! may run on another, whose shell is `run_shell_command`, `developer__shell` or `exec_command`.
//! This table groups every spelling of one tool, so an entry covers the tool on every runtime,
//! and it marks the tools that only read, which is all `read_only` admits.
//!
//! "Only reads" means the tool changes nothing: no file, process, mode, setting or other agent.
//! Fetching or searching the web reads; where it may connect is the network layer's business.
//! Planning tools (`TodoWrite`, `update_plan`, `write_todos`) change only the agent's own plan.
//!
//! Sources, read from the packages `.ci/acp-agents` pins and from goose's repository:
//! - Claude Code: the tool names in `@anthropic-ai/claude-agent-sdk` 0.2.44 (`cli.js`, its tool
//!   definitions and their aliases), the names `@zed-industries/claude-code-acp` 0.16.2 maps
//!   (`dist/tools.js`), including its own `mcp__acp__*` tools, and earlier releases' names it
//!   still maps (`BashOutput`, `KillShell`, `KillBash`, `LS`, `MultiEdit`, `NotebookRead`).
//! - Codex: the model-facing tool names in the `codex-acp` 0.16.0 binary (`shell`,
//!   `shell_command`, `exec_command`, `write_stdin`, `apply_patch`, `read_file`, `view_image`,
//!   `web_search`, `update_plan`, the `*_agent` tools, ...), plus `list_dir` and `grep_files`,
//!   experimental tools of earlier releases. codex-acp's permission requests carry only a kind,
//!   never these names.
//! - Gemini CLI 0.61.0: its `*_TOOL_NAME` constants and legacy aliases (`search_file_content`),
//!   plus `save_memory` of earlier releases. Its permission requests carry no name either.
//! - goose: the developer extension's tools, which goose names `<extension>__<tool>`:
//!   `shell`, `text_editor`, `list_windows`, `screen_capture`, `image_processor`, `analyze`, and
//!   the newer `file_write`, `file_edit` and `tree`.

/// One tool under each runtime's names. A name may sit in two groups when one tool does both
/// (`apply_patch` writes and edits): an entry naming either covers it.
#[derive(Debug)]
pub struct Tool {
    /// apiary's name for the tool, for messages and tests.
    pub id: &'static str,
    /// It changes nothing (see the module doc).
    pub only_reads: bool,
    pub claude_code: &'static [&'static str],
    pub codex: &'static [&'static str],
    pub gemini: &'static [&'static str],
    pub goose: &'static [&'static str],
}

const fn tool(id: &'static str, only_reads: bool) -> Tool {
    Tool {
        id,
        only_reads,
        claude_code: &[],
        codex: &[],
        gemini: &[],
        goose: &[],
    }
}

/// Every tool apiary knows by name.
pub const TOOLS: &[Tool] = &[
    Tool {
        claude_code: &["Bash", "mcp__acp__Bash"],
        codex: &["shell", "shell_command", "exec_command", "write_stdin"],
        gemini: &["run_shell_command"],
        goose: &["developer__shell"],
        ..tool("shell", false)
    },
    Tool {
        claude_code: &[
            "BashOutput",
            "mcp__acp__BashOutput",
            "TaskOutput",
            "BashOutputTool",
            "AgentOutputTool",
        ],
        ..tool("shell_output", false)
    },
    Tool {
        claude_code: &["KillShell", "KillBash", "mcp__acp__KillShell", "TaskStop"],
        ..tool("kill_shell", false)
    },
    Tool {
        claude_code: &["Read", "mcp__acp__Read", "NotebookRead"],
        codex: &["read_file"],
        gemini: &["read_file", "read_many_files"],
        ..tool("read_file", true)
    },
    Tool {
        claude_code: &["Write", "mcp__acp__Write"],
        codex: &["apply_patch"],
        gemini: &["write_file"],
        goose: &["developer__file_write", "developer__text_editor"],
        ..tool("write_file", false)
    },
    Tool {
        claude_code: &["Edit", "MultiEdit", "mcp__acp__Edit"],
        codex: &["apply_patch"],
        gemini: &["replace"],
        goose: &["developer__file_edit", "developer__text_editor"],
        ..tool("edit", false)
    },
    Tool {
        claude_code: &["NotebookEdit"],
        ..tool("notebook_edit", false)
    },
    Tool {
        claude_code: &["LS"],
        codex: &["list_dir"],
        gemini: &["list_directory"],
        goose: &["developer__tree"],
        ..tool("list", true)
    },
    Tool {
        claude_code: &["Glob"],
        gemini: &["glob"],
        ..tool("glob", true)
    },
    Tool {
        claude_code: &["Grep"],
        codex: &["grep_files"],
        gemini: &["grep_search", "search_file_content"],
        ..tool("grep", true)
    },
    Tool {
        claude_code: &["LSP"],
        goose: &["developer__analyze"],
        ..tool("code_analysis", true)
    },
    Tool {
        codex: &["view_image"],
        goose: &["developer__image_processor"],
        ..tool("view_image", true)
    },
    Tool {
        claude_code: &["WebFetch"],
        gemini: &["web_fetch"],
        ..tool("web_fetch", true)
    },
    Tool {
        claude_code: &["WebSearch"],
        codex: &["web_search"],
        gemini: &["google_web_search"],
        ..tool("web_search", true)
    },
    Tool {
        claude_code: &["ToolSearch"],
        ..tool("tool_search", true)
    },
    Tool {
        claude_code: &[
            "TodoWrite",
            "TaskCreate",
            "TaskUpdate",
            "TaskList",
            "TaskGet",
        ],
        codex: &["update_plan"],
        gemini: &[
            "write_todos",
            "tracker_create_task",
            "tracker_update_task",
            "tracker_get_task",
            "tracker_list_tasks",
            "tracker_add_dependency",
            "tracker_visualize",
        ],
        ..tool("todo", true)
    },
    // Another agent acts with tools of its own: never "only reads".
    Tool {
        claude_code: &["Task", "Agent", "TeamCreate", "TeamDelete", "SendMessage"],
        codex: &[
            "spawn_agent",
            "send_input",
            "resume_agent",
            "wait_agent",
            "close_agent",
        ],
        gemini: &["invoke_agent", "complete_task"],
        ..tool("subagent", false)
    },
    // Leaving plan mode is how Claude Code starts editing.
    Tool {
        claude_code: &["ExitPlanMode", "exit_plan_mode", "EnterPlanMode"],
        gemini: &["exit_plan_mode", "enter_plan_mode"],
        ..tool("plan_mode", false)
    },
    // A skill can pre-approve tools of its own (`allowed-tools`).
    Tool {
        claude_code: &["Skill"],
        gemini: &["activate_skill"],
        ..tool("skill", false)
    },
    Tool {
        claude_code: &["Config"],
        ..tool("settings", false)
    },
    Tool {
        claude_code: &["EnterWorktree"],
        ..tool("worktree", false)
    },
    Tool {
        gemini: &["save_memory"],
        ..tool("memory", false)
    },
    // Resources come from MCP servers, which `read_only` admits only when named.
    Tool {
        claude_code: &["ListMcpResourcesTool", "ReadMcpResourceTool"],
        codex: &["list_mcp_resources", "read_mcp_resource"],
        gemini: &["list_mcp_resources", "read_mcp_resource"],
        ..tool("mcp_resources", false)
    },
    Tool {
        claude_code: &["AskUserQuestion"],
        codex: &["request_user_input"],
        gemini: &["ask_user"],
        ..tool("ask_user", false)
    },
    // The operator's screen is outside any workspace.
    Tool {
        goose: &["developer__list_windows", "developer__screen_capture"],
        ..tool("screen", false)
    },
];

impl Tool {
    /// Every runtime's names for this tool.
    pub fn names(&self) -> impl Iterator<Item = &'static str> + use<> {
        let all: [&'static [&'static str]; 4] =
            [self.claude_code, self.codex, self.gemini, self.goose];
        all.into_iter().flatten().copied()
    }

    fn is_named(&self, name: &str) -> bool {
        self.names().any(|n| n.eq_ignore_ascii_case(name))
    }
}

/// The tools `name` is a spelling of (case-insensitive); none for a name the table lacks.
pub fn tools_named(name: &str) -> impl Iterator<Item = &'static Tool> + '_ {
    TOOLS.iter().filter(move |t| t.is_named(name))
}

/// `Some(true)` when `name` is a known tool that only reads, `Some(false)` when it is a known
/// tool that changes something, `None` when the table does not know it.
pub fn only_reads(name: &str) -> Option<bool> {
    let mut found = tools_named(name).peekable();
    found.peek()?;
    Some(found.all(|t| t.only_reads))
}

/// The names `name` goes by: itself, the other spellings of its tools, and for an MCP tool the
/// form of the other naming scheme (Claude Code's `mcp__server__tool`, goose's `server__tool`).
pub fn spellings(name: &str) -> Vec<String> {
    // The table's spelling first, so it is the one kept of two that differ only in case.
    let mut out: Vec<String> = tools_named(name)
        .flat_map(Tool::names)
        .map(str::to_string)
        .collect();
    out.push(name.to_string());
    if let Some(other) = mcp_counterpart(name) {
        out.push(other);
    }
    out.sort_by_key(|s| s.to_ascii_lowercase());
    out.dedup_by(|a, b| a.eq_ignore_ascii_case(b));
    out
}

/// `mcp__server__tool` ⇄ `server__tool`, for a name of that shape the table does not know.
fn mcp_counterpart(name: &str) -> Option<String> {
    if tools_named(name).next().is_some() {
        return None;
    }
    let lower = name.to_ascii_lowercase();
    match lower.strip_prefix("mcp__") {
        Some(rest) => rest
            .contains("__")
            .then(|| name["mcp__".len()..].to_string()),
        None => {
            let (server, tool) = name.split_once("__")?;
            (!server.is_empty() && !tool.is_empty()).then(|| format!("mcp__{name}"))
        }
    }
}

/// Claude Code's names for the tools `name` is a spelling of, or `name` itself when it is not in
/// the table (an MCP tool, a tool of a newer release): what its `disallowedTools` takes.
pub fn claude_code_names(name: &str) -> Vec<&str> {
    let known: Vec<&str> = tools_named(name)
        .flat_map(|t| t.claude_code.iter().copied())
        .collect();
    if known.is_empty() && tools_named(name).next().is_none() {
        return vec![name];
    }
    known
}

/// Claude Code's names of the tools that change something.
pub fn claude_code_changing() -> impl Iterator<Item = &'static str> {
    TOOLS
        .iter()
        .filter(|t| !t.only_reads)
        .flat_map(|t| t.claude_code.iter().copied())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn has(list: &[String], name: &str) -> bool {
        list.iter().any(|s| s == name)
    }

    #[test]
    fn one_shell_under_every_runtime_s_names() {
        for name in [
            "Bash",
            "bash",
            "run_shell_command",
            "developer__shell",
            "shell",
            "exec_command",
        ] {
            let all = spellings(name);
            for other in [
                "Bash",
                "run_shell_command",
                "developer__shell",
                "shell",
                "exec_command",
            ] {
                assert!(has(&all, other), "{name}: {all:?}");
            }
            assert_eq!(only_reads(name), Some(false), "{name}");
        }
    }

    #[test]
    fn what_only_reads() {
        for name in [
            "Read",
            "Grep",
            "Glob",
            "LS",
            "read_file",
            "grep_search",
            "list_directory",
            "developer__tree",
            "WebFetch",
            "google_web_search",
            "TodoWrite",
        ] {
            assert_eq!(only_reads(name), Some(true), "{name}");
        }
        for name in [
            "Task",
            "KillBash",
            "KillShell",
            "TaskStop",
            "BashOutput",
            "ExitPlanMode",
            "Write",
            "apply_patch",
            "developer__text_editor",
            "save_memory",
            "Skill",
            "ReadMcpResourceTool",
            "developer__screen_capture",
        ] {
            assert_eq!(only_reads(name), Some(false), "{name}");
        }
        for name in [
            "mcp__fs__write_file",
            "mcp__github__delete_repo",
            "frobnicate",
            "",
        ] {
            assert_eq!(only_reads(name), None, "{name}");
        }
    }

    #[test]
    fn mcp_names_cross_between_claude_code_and_goose() {
        assert!(has(
            &spellings("mcp__github__delete_repo"),
            "github__delete_repo"
        ));
        assert!(has(
            &spellings("github__delete_repo"),
            "mcp__github__delete_repo"
        ));
        // A known goose tool is not taken for an MCP one; a bare `mcp__x` is no tool of a server.
        assert!(!has(
            &spellings("developer__shell"),
            "mcp__developer__shell"
        ));
        assert_eq!(spellings("mcp__x"), ["mcp__x"]);
    }

    #[test]
    fn claude_code_is_told_its_own_names() {
        assert_eq!(
            claude_code_names("run_shell_command"),
            ["Bash", "mcp__acp__Bash"]
        );
        assert_eq!(claude_code_names("mcp__gh__delete"), ["mcp__gh__delete"]);
        // A tool Claude Code does not have: nothing to tell it.
        assert!(claude_code_names("developer__screen_capture").is_empty());
        let changing: Vec<&str> = claude_code_changing().collect();
        for name in [
            "Bash",
            "Write",
            "Edit",
            "Task",
            "KillShell",
            "TaskStop",
            "ExitPlanMode",
        ] {
            assert!(changing.contains(&name), "{name}");
        }
        assert!(!changing.contains(&"Read"));
    }

    #[test]
    fn every_name_is_plain() {
        for t in TOOLS {
            assert!(t.names().next().is_some(), "{} has no names", t.id);
            for n in t.names() {
                assert!(
                    !n.is_empty() && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
                    "{n}"
                );
            }
        }
    }
}
