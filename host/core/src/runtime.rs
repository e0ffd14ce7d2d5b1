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
}

/// goose is the spec's reference runtime and the default.
pub const GOOSE: Runtime = Runtime {
    name: "goose",
    provider_var: Some("GOOSE_PROVIDER"),
    model_var: Some("GOOSE_MODEL"),
    temperature_var: Some("GOOSE_TEMPERATURE"),
    context_var: Some("GOOSE_CONTEXT_LIMIT"),
    command: Some("goose acp"),
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
    },
    // apiary's bundled agent echoes what it receives, so every setting is visible in tests.
    Runtime {
        name: "apiary-agent",
        provider_var: Some("APIARY_AGENT_PROVIDER"),
        model_var: Some("APIARY_AGENT_MODEL"),
        temperature_var: Some("APIARY_AGENT_TEMPERATURE"),
        context_var: Some("APIARY_AGENT_CONTEXT_LIMIT"),
        command: None,
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
    },
    // The Claude Agent SDK adapter takes the model from ANTHROPIC_MODEL and nothing else from env.
    Runtime {
        name: "claude-agent-acp",
        provider_var: None,
        model_var: Some("ANTHROPIC_MODEL"),
        temperature_var: None,
        context_var: None,
        command: Some("claude-agent-acp"),
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
    },
    // Gemini CLI (npm `@google/gemini-cli`) in its ACP mode: the model from GEMINI_MODEL.
    Runtime {
        name: "gemini",
        provider_var: None,
        model_var: Some("GEMINI_MODEL"),
        temperature_var: None,
        context_var: None,
        command: Some("gemini --experimental-acp"),
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
