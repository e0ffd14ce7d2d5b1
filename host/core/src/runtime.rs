//! Agent runtimes and how resolved settings reach them: the environment variables each runtime reads
//! for provider, model, temperature and context limit (spec §10 "Env Var Mapping"), and the command
//! line that starts its ACP agent (`apiary up --agent <runtime>`).

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Runtime {
    pub name: &'static str,
    pub provider_var: Option<&'static str>,
    pub model_var: Option<&'static str>,
    pub temperature_var: Option<&'static str>,
    pub context_var: Option<&'static str>,
    /// The command line of the runtime's ACP agent as its package installs it, for
    /// `apiary up --agent <name>`; `None` when there is no such preset.
    pub command: Option<&'static str>,
    /// How the runtime reaches its model provider, when apiary can stand in between (its gateway
    /// holds the key; see `apiary-egress`).
    pub provider: Option<Provider>,
    /// A prefix of variables the runtime reads that carry no secret and pass from the operator's
    /// environment as they are (the bundled agent's `APIARY_AGENT_*` settings).
    pub own_prefix: Option<&'static str>,
}

/// A runtime's model provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Provider {
    /// The variables that hold its key, any one of which will do.
    pub key_vars: &'static [&'static str],
    /// The variable the runtime takes its API base URL from.
    pub base_url_var: &'static str,
    /// The API's base URL when the operator sets none.
    pub default_base: &'static str,
}

const ANTHROPIC: Provider = Provider {
    key_vars: &["ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"],
    base_url_var: "ANTHROPIC_BASE_URL",
    default_base: "https://api.anthropic.com",
};

/// Files and directories in a working directory that some agent runtime loads as its own
/// configuration (settings that approve tools or run commands, MCP servers, instructions). An
/// agent's workspace is written by hooks and by the agent itself, so one found there that the
/// operator did not allow stops the agent's start.
pub const PROJECT_CONFIG: &[&str] = &[
    ".claude",
    ".mcp.json",
    "CLAUDE.md",
    "CLAUDE.local.md",
    ".gemini",
    "GEMINI.md",
    ".codex",
    "AGENTS.md",
    "AGENTS.override.md",
    ".goosehints",
    ".goose",
    ".cursor",
    ".vscode",
];

/// goose is the spec's reference runtime and the default.
pub const GOOSE: Runtime = Runtime {
    name: "goose",
    provider_var: Some("GOOSE_PROVIDER"),
    model_var: Some("GOOSE_MODEL"),
    temperature_var: Some("GOOSE_TEMPERATURE"),
    context_var: Some("GOOSE_CONTEXT_LIMIT"),
    command: Some("goose acp"),
    // goose's provider is whichever GOOSE_PROVIDER names: no single gateway.
    provider: None,
    own_prefix: None,
};

const RUNTIMES: &[Runtime] = &[
    GOOSE,
    // Block's own ACP agent reads its model settings under its own prefix, and goose's for the rest.
    Runtime {
        name: "buzz-agent",
        provider_var: Some("BUZZ_AGENT_PROVIDER"),
        model_var: Some("BUZZ_AGENT_MODEL"),
        temperature_var: Some("GOOSE_TEMPERATURE"),
        context_var: Some("GOOSE_CONTEXT_LIMIT"),
        command: None,
        provider: None,
        own_prefix: None,
    },
    // apiary's bundled agent echoes what it receives, so every setting is visible in tests.
    Runtime {
        name: "apiary-agent",
        provider_var: Some("APIARY_AGENT_PROVIDER"),
        model_var: Some("APIARY_AGENT_MODEL"),
        temperature_var: Some("APIARY_AGENT_TEMPERATURE"),
        context_var: Some("APIARY_AGENT_CONTEXT_LIMIT"),
        command: None,
        provider: None,
        own_prefix: Some("APIARY_AGENT_"),
    },
    // Claude Code over ACP (npm `@zed-industries/claude-code-acp`): the model from ANTHROPIC_MODEL
    // (an alias such as `haiku` or a full model id); it has no temperature or context setting.
    Runtime {
        name: "claude-code",
        provider_var: None,
        model_var: Some("ANTHROPIC_MODEL"),
        temperature_var: None,
        context_var: None,
        command: Some("claude-code-acp"),
        provider: Some(ANTHROPIC),
        own_prefix: None,
    },
    // The Claude Agent SDK adapter takes the model from ANTHROPIC_MODEL and nothing else from env.
    Runtime {
        name: "claude-agent-acp",
        provider_var: None,
        model_var: Some("ANTHROPIC_MODEL"),
        temperature_var: None,
        context_var: None,
        command: Some("claude-agent-acp"),
        provider: Some(ANTHROPIC),
        own_prefix: None,
    },
    // Codex over ACP (npm `@zed-industries/codex-acp`) reads no model variable: its `session/new`
    // answer offers the model as a config option, which apiary selects with
    // `session/set_config_option` when the persona's model is among the offered ones. The provider
    // and endpoint come from codex's own config (`$CODEX_HOME/config.toml`).
    Runtime {
        name: "codex",
        provider_var: None,
        model_var: None,
        temperature_var: None,
        context_var: None,
        command: Some("codex-acp"),
        provider: Some(Provider {
            key_vars: &["OPENAI_API_KEY", "CODEX_API_KEY"],
            base_url_var: "OPENAI_BASE_URL",
            default_base: "https://api.openai.com/v1",
        }),
        own_prefix: None,
    },
    // Gemini CLI (npm `@google/gemini-cli`) in its ACP mode: the model from GEMINI_MODEL.
    Runtime {
        name: "gemini",
        provider_var: None,
        model_var: Some("GEMINI_MODEL"),
        temperature_var: None,
        context_var: None,
        command: Some("gemini --experimental-acp"),
        provider: Some(Provider {
            key_vars: &["GEMINI_API_KEY", "GOOGLE_API_KEY"],
            base_url_var: "GOOGLE_GEMINI_BASE_URL",
            default_base: "https://generativelanguage.googleapis.com",
        }),
        own_prefix: None,
    },
];

impl Runtime {
    pub fn find(name: &str) -> Option<Runtime> {
        RUNTIMES
            .iter()
            .find(|r| r.name.eq_ignore_ascii_case(name))
            .copied()
    }

    /// The runtime for a persona's `runtime:` value; unknown or absent means goose.
    pub fn for_name(name: Option<&str>) -> Runtime {
        name.and_then(Runtime::find).unwrap_or(GOOSE)
    }

    pub fn names() -> Vec<&'static str> {
        RUNTIMES.iter().map(|r| r.name).collect()
    }

    /// The agent command line `apiary up --agent <name>` stands for, when `name` is a runtime
    /// with a preset.
    pub fn preset(name: &str) -> Option<&'static str> {
        Runtime::find(name.trim())?.command
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_name_each_runtimes_agent() {
        assert_eq!(Runtime::preset("codex"), Some("codex-acp"));
        assert_eq!(Runtime::preset("claude-code"), Some("claude-code-acp"));
        assert_eq!(Runtime::preset("gemini"), Some("gemini --experimental-acp"));
        assert_eq!(Runtime::preset("goose"), Some("goose acp"));
        assert_eq!(Runtime::preset("apiary-agent"), None);
        assert_eq!(Runtime::preset("/usr/bin/codex-acp"), None);
    }
}
