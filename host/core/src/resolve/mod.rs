//! Resolution: from a loaded pack to each persona's effective configuration, across the five
//! precedence levels of spec §10 (highest wins):
//!
//! 1. process environment (the runtime's own variables, e.g. `GOOSE_MODEL`): never overridden;
//! 2. the operator overrides file ([`overrides`]);
//! 3. persona frontmatter;
//! 4. the manifest's `defaults` (skipped entirely when the manifest has none);
//! 5. built-in defaults.
//!
//! Merging is shallow: the first level that sets a field wins it whole (`triggers` and `subscribe`
//! included); `null` is absent; `[]` and `{}` are present. A `triggers` object that wins has its
//! unset sub-keys filled from the built-ins, never from a lower level.

pub mod grants;
mod json_text;
pub mod limits;
pub mod overrides;
pub mod prompt;
pub mod tool_ceiling;

use std::collections::BTreeMap;

use serde::Serialize;

use crate::pack::{
    Author, BehaviourLayer, HookSet, McpServer, Pack, ToolPolicy, TriggerLayer, mcp,
};
use crate::runtime::Runtime;
pub use overrides::Overrides;

pub const BUILT_IN_TEMPERATURE: f64 = 0.7;
pub const BUILT_IN_THREAD_REPLIES: bool = true;
pub const BUILT_IN_BROADCAST_REPLIES: bool = false;

/// Where a resolved value came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    ProcessEnv,
    Operator,
    Persona,
    PackDefaults,
    BuiltIn,
    /// No level sets it (e.g. no model anywhere: the runtime uses its own default).
    Unset,
}

#[derive(Debug, Clone, Serialize)]
pub struct ResolvedPack {
    pub pack: PackSummary,
    pub personas: Vec<ResolvedPersona>,
}

#[derive(Debug, Clone, Serialize)]
pub struct PackSummary {
    pub id: String,
    pub name: String,
    pub version: String,
    pub description: Option<String>,
    pub author: Option<Author>,
    pub engines_buzz: Option<String>,
    pub root: std::path::PathBuf,
    pub overrides_file: Option<std::path::PathBuf>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Identity {
    pub name: String,
    pub display_name: String,
    pub description: String,
    pub avatar: Option<String>,
    pub author: Option<Author>,
    /// The agent runtime whose variables `env` uses.
    pub runtime: String,
    /// The persona file, relative to the pack root.
    pub file: std::path::PathBuf,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelRef {
    /// The part before the first `:`; `None` for a bare model id.
    pub provider: Option<String>,
    pub model: String,
}

impl ModelRef {
    pub fn parse(spec: &str) -> ModelRef {
        match spec.split_once(':') {
            Some((p, m)) => ModelRef {
                provider: Some(p.to_string()),
                model: m.to_string(),
            },
            None => ModelRef {
                provider: None,
                model: spec.to_string(),
            },
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Triggers {
    pub mentions: bool,
    pub keywords: Vec<String>,
    pub all_messages: bool,
}

impl Triggers {
    pub const BUILT_IN: Triggers = Triggers {
        mentions: true,
        keywords: Vec::new(),
        all_messages: false,
    };

    fn from_layer(t: &TriggerLayer) -> Triggers {
        Triggers {
            mentions: t.mentions.unwrap_or(Self::BUILT_IN.mentions),
            keywords: t.keywords.clone().unwrap_or_default(),
            all_messages: t.all_messages.unwrap_or(Self::BUILT_IN.all_messages),
        }
    }
}

/// One persona's effective configuration. Its JSON form is the `apiary pack inspect --json` contract.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ResolvedPersona {
    pub identity: Identity,
    pub version: String,
    pub model: Option<ModelRef>,
    pub temperature: Option<f64>,
    pub max_context_tokens: Option<u64>,
    /// Channel names as the relay knows them: the display `#` stripped.
    pub subscribe: Vec<String>,
    pub triggers: Triggers,
    pub thread_replies: bool,
    pub broadcast_replies: bool,
    /// Load keys of the skills this persona receives (§6 scoping).
    pub skills: Vec<String>,
    /// Pack `.mcp.json` plus the persona's list; the persona wins whole by name; sorted by name.
    pub mcp_servers: Vec<McpServer>,
    /// `x-tool-policy` inside the operator's `tool_ceiling`: which tools the agent may use;
    /// `apiary up` enforces it (absent: any).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_policy: Option<ToolPolicy>,
    /// Which personas' messages may wake it: the operator's `woken_by`, else the persona's
    /// `x-woken-by` (absent: its own pack's personas; see [`crate::pack::woken_by`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub woken_by: Option<Vec<String>>,
    /// Variables set in the agent process for its runtime, with the operator's own values kept.
    pub env: BTreeMap<String, String>,
    /// Kilobytes per persona: escaped for JSON 32 bytes at a time rather than byte by byte.
    #[serde(serialize_with = "json_text::serialize")]
    pub system_prompt: String,
    /// Which level each behavioural value came from.
    pub sources: BTreeMap<&'static str, Level>,
    /// Pack hooks with the persona's overriding them point by point (not part of the JSON contract).
    #[serde(skip)]
    pub hooks: HookSet,
    /// The operator variables this persona's MCP `${VAR}`s may read: the pack's `allow_env` in the
    /// overrides file (not part of the JSON contract).
    #[serde(skip)]
    pub allow_env: Vec<String>,
    /// What the operator grants this persona's agent (see [`grants`]; not part of the JSON
    /// contract).
    #[serde(skip)]
    pub agent: grants::AgentGrants,
}

/// Resolves every persona of a valid pack. `process_env` is level 1 (a lookup, so tests can supply
/// their own environment).
pub fn resolve(
    pack: &Pack,
    overrides: &Overrides,
    process_env: &dyn Fn(&str) -> Option<String>,
) -> ResolvedPack {
    ResolvedPack {
        pack: summary(pack, overrides),
        personas: resolve_each(pack, overrides, process_env).collect(),
    }
}

/// The pack-level part of [`ResolvedPack`].
pub fn summary(pack: &Pack, overrides: &Overrides) -> PackSummary {
    let m = &pack.manifest;
    PackSummary {
        id: m.id.clone(),
        name: m.name.clone(),
        version: m.version.clone(),
        description: m.description.clone(),
        author: m.author.clone(),
        engines_buzz: m.engines_buzz.clone(),
        root: pack.root.clone(),
        overrides_file: overrides.path.clone(),
    }
}

/// The personas of [`resolve`], in pack order, resolved one at a time as the iterator is advanced.
/// A caller that writes each one out and drops it (`pack inspect --json`) reuses one persona's
/// memory for the next instead of holding every kilobytes-long system prompt at once.
pub fn resolve_each<'a>(
    pack: &'a Pack,
    overrides: &'a Overrides,
    process_env: &'a dyn Fn(&str) -> Option<String>,
) -> impl Iterator<Item = ResolvedPersona> + 'a {
    pack.skills_of_all()
        .into_iter()
        .enumerate()
        .map(move |(i, skills)| resolve_persona(pack, i, &skills, overrides, process_env))
}

/// The real process environment, for level 1. A variable set to the empty string is set: the spec
/// checks `std::env::var`, so the operator's empty value wins over the pack's (callers that need a
/// value, such as a file path, treat empty as unset themselves).
pub fn process_env(key: &str) -> Option<String> {
    std::env::var(key).ok()
}

/// [`process_env`] that looks each variable up once: every persona of a runtime asks for the same
/// few variables, and each lookup scans the whole environment (800 scans for 200 personas).
pub fn cached_process_env() -> impl Fn(&str) -> Option<String> {
    let seen = std::cell::RefCell::new(Vec::<(String, Option<String>)>::new());
    move |key| {
        if let Some((_, value)) = seen.borrow().iter().find(|(k, _)| k == key) {
            return value.clone();
        }
        let value = process_env(key);
        seen.borrow_mut().push((key.to_string(), value.clone()));
        value
    }
}

/// The levels a persona's behavioural fields come from, below the process environment: operator,
/// persona, pack defaults.
struct Layers<'a> {
    operator: Option<&'a BehaviourLayer>,
    persona: &'a BehaviourLayer,
    defaults: Option<&'a BehaviourLayer>,
}

impl Layers<'_> {
    /// The first level that sets a field.
    fn pick<T: Clone>(&self, field: impl Fn(&BehaviourLayer) -> &Option<T>) -> Option<(T, Level)> {
        let levels = [
            (self.operator, Level::Operator),
            (Some(self.persona), Level::Persona),
            (self.defaults, Level::PackDefaults),
        ];
        levels
            .into_iter()
            .find_map(|(layer, level)| layer.and_then(|l| field(l).clone()).map(|v| (v, level)))
    }
}

type Sources = BTreeMap<&'static str, Level>;

fn resolve_persona(
    pack: &Pack,
    index: usize,
    received_skills: &[&crate::pack::Skill],
    overrides: &Overrides,
    env: &dyn Fn(&str) -> Option<String>,
) -> ResolvedPersona {
    let persona = &pack.personas[index];
    let operator = overrides.get(&pack.manifest.id, &persona.name);
    let layers = Layers {
        operator: operator.map(|o| &o.behaviour),
        persona: &persona.behaviour,
        defaults: pack.manifest.defaults.as_ref(),
    };
    let mut sources = Sources::new();

    let runtime_name = operator
        .and_then(|o| o.runtime.clone())
        .or_else(|| persona.runtime.clone());
    let runtime = Runtime::for_name(runtime_name.as_deref());
    let model = resolve_model(&layers, &runtime, env, &mut sources);
    let routing = resolve_routing(&layers, &mut sources);
    let version = resolve_version(pack, persona, &mut sources);
    let runtime_level = match (operator.and_then(|o| o.runtime.as_ref()), &persona.runtime) {
        (Some(_), _) => Level::Operator,
        (None, Some(_)) => Level::Persona,
        (None, None) => Level::BuiltIn,
    };
    sources.insert("runtime", runtime_level);

    let skills: Vec<String> = received_skills.iter().map(|s| s.name.clone()).collect();
    let skill_names: Vec<&str> = skills.iter().map(String::as_str).collect();
    let system_prompt = prompt::system_prompt(
        &persona.body,
        pack.instructions.as_deref(),
        &skill_names,
        prompt::DEFAULT_SKILL_HINT,
    );
    let env_vars = project_env(
        &runtime,
        model.model.as_ref(),
        model.temperature,
        model.context,
        env,
    );

    ResolvedPersona {
        identity: Identity {
            name: persona.name.clone(),
            display_name: persona.display_name.clone(),
            description: persona.description.clone(),
            avatar: persona.avatar.clone(),
            author: persona.author.clone(),
            runtime: runtime.name.to_string(),
            file: persona.file.clone(),
        },
        version,
        model: model.model,
        temperature: model.temperature,
        max_context_tokens: model.context,
        subscribe: routing.subscribe,
        triggers: routing.triggers,
        thread_replies: routing.thread_replies,
        broadcast_replies: routing.broadcast_replies,
        skills,
        mcp_servers: mcp::merge(&pack.mcp_servers, &persona.mcp_servers),
        tool_policy: tool_policy(pack, persona, overrides),
        woken_by: overrides
            .get(&pack.manifest.id, &persona.name)
            .and_then(|o| o.woken_by.clone())
            .or_else(|| persona.woken_by.clone()),
        env: env_vars,
        system_prompt,
        sources,
        hooks: pack.hooks.overlay(&persona.hooks),
        allow_env: overrides.allow_env(&pack.manifest.id).to_vec(),
        agent: overrides.grants(&pack.manifest.id, &persona.name),
    }
}

/// The persona's `x-tool-policy` inside the operator's ceiling for it (absent: neither has a rule).
fn tool_policy(
    pack: &Pack,
    persona: &crate::pack::Persona,
    overrides: &Overrides,
) -> Option<ToolPolicy> {
    let ceiling = overrides.tool_ceiling(&pack.manifest.id, &persona.name);
    let own = persona.tool_policy.clone().unwrap_or_default();
    Some(own.within(ceiling)).filter(|p| !p.is_empty())
}

/// The model and its sampling settings, as the agent will run with them.
struct ModelSettings {
    model: Option<ModelRef>,
    temperature: Option<f64>,
    context: Option<u64>,
}

/// Model, temperature and context size from the layers, then the runtime's variables in the
/// operator's own environment (level 1) over them.
fn resolve_model(
    layers: &Layers<'_>,
    runtime: &Runtime,
    env: &dyn Fn(&str) -> Option<String>,
    sources: &mut Sources,
) -> ModelSettings {
    let model = layers.pick(|l| &l.model);
    let mut model_ref = model.as_ref().map(|(m, _)| ModelRef::parse(m));
    sources.insert("model", model.as_ref().map_or(Level::Unset, |m| m.1));

    let temperature = layers
        .pick(|l| &l.temperature)
        .unwrap_or((BUILT_IN_TEMPERATURE, Level::BuiltIn));
    let mut temperature = (Some(temperature.0), temperature.1);
    let context = layers.pick(|l| &l.max_context_tokens);
    let mut context = (context.map(|c| c.0), context.map_or(Level::Unset, |c| c.1));

    // Level 1: the operator's own environment is what the agent will see; report that.
    let env_model = runtime.model_var.and_then(env);
    let env_provider = runtime.provider_var.and_then(env);
    if env_model.is_some() || env_provider.is_some() {
        let base = model_ref.clone().unwrap_or(ModelRef {
            provider: None,
            model: String::new(),
        });
        model_ref = Some(ModelRef {
            provider: env_provider.or(base.provider),
            model: env_model.unwrap_or(base.model),
        });
        sources.insert("model", Level::ProcessEnv);
    }
    // The operator's value wins even when it is not a number: the agent gets it verbatim (see `env`),
    // so the resolved value is then unknown (`None`), never the pack's value it replaced.
    if let Some(t) = runtime.temperature_var.and_then(env) {
        temperature = (t.trim().parse::<f64>().ok(), Level::ProcessEnv);
    }
    if let Some(c) = runtime.context_var.and_then(env) {
        context = (c.trim().parse::<u64>().ok(), Level::ProcessEnv);
    }
    sources.insert("temperature", temperature.1);
    sources.insert("max_context_tokens", context.1);
    ModelSettings {
        model: model_ref,
        temperature: temperature.0,
        context: context.0,
    }
}

/// Where a persona listens and how it replies.
struct Routing {
    subscribe: Vec<String>,
    triggers: Triggers,
    thread_replies: bool,
    broadcast_replies: bool,
}

fn resolve_routing(layers: &Layers<'_>, sources: &mut Sources) -> Routing {
    let subscribe = layers.pick(|l| &l.subscribe);
    sources.insert(
        "subscribe",
        subscribe.as_ref().map_or(Level::BuiltIn, |s| s.1),
    );
    let subscribe = subscribe
        .map(|s| s.0)
        .unwrap_or_default()
        .into_iter()
        .map(|c| c.strip_prefix('#').unwrap_or(&c).to_string())
        .collect();

    let triggers = layers.pick(|l| &l.triggers);
    sources.insert(
        "triggers",
        triggers.as_ref().map_or(Level::BuiltIn, |t| t.1),
    );
    let triggers = triggers.map_or(Triggers::BUILT_IN, |t| Triggers::from_layer(&t.0));

    let thread_replies = layers
        .pick(|l| &l.thread_replies)
        .unwrap_or((BUILT_IN_THREAD_REPLIES, Level::BuiltIn));
    sources.insert("thread_replies", thread_replies.1);
    let broadcast_replies = layers
        .pick(|l| &l.broadcast_replies)
        .unwrap_or((BUILT_IN_BROADCAST_REPLIES, Level::BuiltIn));
    sources.insert("broadcast_replies", broadcast_replies.1);
    Routing {
        subscribe,
        triggers,
        thread_replies: thread_replies.0,
        broadcast_replies: broadcast_replies.0,
    }
}

/// The persona's own version, else the pack's.
fn resolve_version(pack: &Pack, persona: &crate::pack::Persona, sources: &mut Sources) -> String {
    match &persona.version {
        Some(v) => {
            sources.insert("version", Level::Persona);
            v.clone()
        }
        None => {
            sources.insert("version", Level::PackDefaults);
            pack.manifest.version.clone()
        }
    }
}

/// The runtime's variables: the operator's value when the process already has one (level 1, never
/// overridden), else the resolved value. A variable with no value anywhere is not set at all.
fn project_env(
    runtime: &Runtime,
    model: Option<&ModelRef>,
    temperature: Option<f64>,
    context: Option<u64>,
    env: &dyn Fn(&str) -> Option<String>,
) -> BTreeMap<String, String> {
    let candidates = [
        (runtime.provider_var, model.and_then(|m| m.provider.clone())),
        (
            runtime.model_var,
            model.map(|m| m.model.clone()).filter(|m| !m.is_empty()),
        ),
        (runtime.temperature_var, temperature.map(|t| t.to_string())),
        (runtime.context_var, context.map(|c| c.to_string())),
    ];
    candidates
        .into_iter()
        .filter_map(|(var, resolved)| {
            let var = var?;
            env(var).or(resolved).map(|v| (var.to_string(), v))
        })
        .collect()
}
