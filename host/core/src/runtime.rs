//! Agent runtimes and how resolved settings reach them: the environment variables each runtime reads
//! for provider, model, temperature and context limit (spec §10 "Env Var Mapping").

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Runtime {
    pub name: &'static str,
    pub provider_var: Option<&'static str>,
    pub model_var: Option<&'static str>,
    pub temperature_var: Option<&'static str>,
    pub context_var: Option<&'static str>,
}

/// goose is the spec's reference runtime and the default.
pub const GOOSE: Runtime = Runtime {
    name: "goose",
    provider_var: Some("GOOSE_PROVIDER"),
    model_var: Some("GOOSE_MODEL"),
    temperature_var: Some("GOOSE_TEMPERATURE"),
    context_var: Some("GOOSE_CONTEXT_LIMIT"),
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
    },
    // apiary's bundled agent echoes what it receives, so every setting is visible in tests.
    Runtime {
        name: "apiary-agent",
        provider_var: Some("APIARY_AGENT_PROVIDER"),
        model_var: Some("APIARY_AGENT_MODEL"),
        temperature_var: Some("APIARY_AGENT_TEMPERATURE"),
        context_var: Some("APIARY_AGENT_CONTEXT_LIMIT"),
    },
    // The Claude Agent SDK adapter takes the model from ANTHROPIC_MODEL and nothing else from env.
    Runtime {
        name: "claude-agent-acp",
        provider_var: None,
        model_var: Some("ANTHROPIC_MODEL"),
        temperature_var: None,
        context_var: None,
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
}
