//! Precedence level 2: the operator's per-persona overrides (the spec's "desktop UI per-agent"
//! settings). A TOML file keyed by pack id, then persona name:
//!
//! ```toml
//! ["com.example.meadow-security-team".pip]
//! model = "anthropic:claude-opus-4"
//! temperature = 0.2
//! runtime = "goose"
//! ```
//!
//! It takes the behavioural keys of spec §10 plus `runtime` and `limits` (see [`super::limits`]). It is the operator's own file, so an
//! unknown key is an error, not a warning.
//!
//! One key sits at the pack level: `allow_env`, the operator variables the pack's MCP servers may
//! read through `${VAR}` (a pack gets none of the operator's environment otherwise):
//!
//! ```toml
//! ["com.example.meadow-security-team"]
//! allow_env = ["GITHUB_TOKEN"]
//! ```
//!
//! The pack level (and each persona's table) also takes the agent grants `agent_env`,
//! `agent_net`, `agent_read`, `agent_write` and `agent_config` (see [`super::grants`]).
//!
//! `tool_ceiling`, in a pack's table or a persona's, bounds what the pack's own `x-tool-policy`
//! may admit (see [`super::tool_ceiling`]):
//!
//! ```toml
//! ["com.example.meadow-security-team"]
//! tool_ceiling = { deny = ["kind:execute"], read_only = true }
//! ```
//!
//! `woken_by`, in a persona's table, chooses which personas' messages may wake it, over the
//! pack's own `x-woken-by` (see [`crate::pack::woken_by`]).
//!
//! One key sits at the top, outside every pack's table: `require_signed = true` makes
//! `apiary install` refuse a pack no author signed (as `--require-signed` does).
//!
//! (So a persona named `allow_env`, `tool_ceiling` or like a grant key cannot be given
//! overrides.) Where the file is comes from the caller (`apiary`'s paths module).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::grants::{self, AgentGrants};
use super::limits::{LIMITS, PersonaLimits};
use super::tool_ceiling::{TOOL_CEILING, ToolCeilings};
use crate::diag::{Diagnostic, Report, Severity};
use crate::pack::ToolPolicy;
use crate::pack::behaviour::{BEHAVIOUR_KEYS, BehaviourLayer};
use crate::pack::is_var_name;
use crate::pack::source::{self, Fields, SourceFile, Syntax, suggest};

/// The top-level key that makes installs refuse unsigned packs.
pub const REQUIRE_SIGNED: &str = "require_signed";

/// The persona-level key choosing which personas may wake it (see [`crate::pack::woken_by`]).
pub const WOKEN_BY: &str = "woken_by";

/// The pack-level key listing the variables the pack's MCP `${VAR}`s may read.
pub const ALLOW_ENV: &str = "allow_env";

#[derive(Debug, Clone, Default, PartialEq)]
pub struct PersonaOverride {
    pub behaviour: BehaviourLayer,
    pub runtime: Option<String>,
    /// `limits = { turns_per_hour = .., turns_per_day = .., tokens_per_day = .. }`.
    pub limits: PersonaLimits,
    /// `agent_env`, `agent_net`, `agent_read`, `agent_write` (see [`super::grants`]).
    pub grants: AgentGrants,
    /// `woken_by`: which personas may wake it, over its own `x-woken-by`.
    pub woken_by: Option<Vec<String>>,
}

#[derive(Debug, Clone, Default)]
pub struct Overrides {
    pub path: Option<PathBuf>,
    /// Pack id, then persona name: looked up by borrowed names, once per persona resolved.
    entries: HashMap<String, HashMap<String, PersonaOverride>>,
    /// Pack id → the variables its MCP `${VAR}`s may read.
    allow_env: HashMap<String, Vec<String>>,
    /// Pack id → what all its personas' agents are granted.
    pack_grants: HashMap<String, AgentGrants>,
    /// The operator's `tool_ceiling`s, by pack and persona.
    tool_ceilings: ToolCeilings,
    /// `require_signed = true`: installs refuse a pack no author signed.
    pub require_signed: bool,
}

impl Overrides {
    /// The operator variables pack `pack_id`'s MCP servers may read (`allow_env`).
    pub fn allow_env(&self, pack_id: &str) -> &[String] {
        self.allow_env.get(pack_id).map_or(&[], Vec::as_slice)
    }

    /// What the operator grants persona `persona`'s agent: its pack's grants and its own.
    pub fn grants(&self, pack_id: &str, persona: &str) -> AgentGrants {
        let pack = self.pack_grants.get(pack_id).cloned().unwrap_or_default();
        match self.get(pack_id, persona) {
            Some(own) => pack.with(&own.grants),
            None => pack,
        }
    }

    /// The operator's ceiling on the tool policy of persona `persona` of pack `pack_id`.
    pub fn tool_ceiling(&self, pack_id: &str, persona: &str) -> Option<ToolPolicy> {
        self.tool_ceilings.for_persona(pack_id, persona)
    }

    pub fn get(&self, pack_id: &str, persona: &str) -> Option<&PersonaOverride> {
        self.entries.get(pack_id)?.get(persona)
    }

    /// Persona names the file mentions for `pack_id`, to warn about ones the pack does not have.
    pub fn personas_for<'a>(&'a self, pack_id: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.entries
            .get(pack_id)
            .into_iter()
            .flat_map(|personas| personas.keys().map(String::as_str))
    }

    /// Loads the file; any error is in the report and the overrides are then empty.
    pub fn load(path: &Path, report: &mut Report) -> Overrides {
        let text = match source::read_limited(path, 1024 * 1024)
            .and_then(|b| Ok(source::decode(b)?))
        {
            Ok(t) => t,
            Err(e) => {
                report.push(
                    Diagnostic::error("overrides.read", format!("cannot read overrides file: {e}"))
                        .in_file(path),
                );
                return Overrides::default();
            }
        };
        let src = SourceFile::new(path, text, Syntax::Toml);
        src.register(report);
        let table: toml::Table = match toml::from_str(&src.text) {
            Ok(t) => t,
            Err(e) => {
                let mut d = Diagnostic::error(
                    "overrides.toml",
                    format!("overrides file is not valid TOML: {}", e.message()),
                )
                .in_file(path);
                if let Some(span) = e.span() {
                    d = d.at(&src.text, span.start, span.len().max(1));
                }
                report.push(d);
                return Overrides::default();
            }
        };
        let Ok(Value::Object(packs)) = serde_json::to_value(&table) else {
            return Overrides::default();
        };
        let mut entries: HashMap<String, HashMap<String, PersonaOverride>> = HashMap::new();
        let mut allow_env: HashMap<String, Vec<String>> = HashMap::new();
        let mut pack_grants: HashMap<String, AgentGrants> = HashMap::new();
        let top = Fields {
            src: &src,
            map: &packs,
            prefix: vec![],
            area: "overrides",
        };
        let mut require_signed = false;
        for (pack_id, personas) in &packs {
            if pack_id == REQUIRE_SIGNED {
                match personas {
                    Value::Bool(b) => require_signed = *b,
                    other => top.type_error(report, pack_id, "true or false", other),
                }
                continue;
            }
            let Value::Object(personas) = personas else {
                top.type_error(report, pack_id, "a table of persona names", personas);
                continue;
            };
            let per_pack = top.nested(pack_id, personas);
            for (persona, settings) in personas {
                if persona == ALLOW_ENV {
                    if let Some(vars) = read_allow_env(&per_pack, report) {
                        allow_env.insert(pack_id.clone(), vars);
                    }
                    continue;
                }
                if grants::KEYS.contains(&persona.as_str()) {
                    pack_grants
                        .entry(pack_id.clone())
                        .or_default()
                        .read_key(&per_pack, persona, report);
                    continue;
                }
                if persona == TOOL_CEILING {
                    continue; // read by `ToolCeilings::read`
                }
                let Value::Object(settings) = settings else {
                    per_pack.type_error(report, persona, "a table of settings", settings);
                    continue;
                };
                let f = per_pack.nested(persona, settings);
                check_keys(&f, report);
                let entry = PersonaOverride {
                    behaviour: BehaviourLayer::read(&f, report, Severity::Error),
                    runtime: f.string(report, "runtime"),
                    limits: read_limits(&f, report),
                    grants: read_grants(&f, report),
                    woken_by: crate::pack::woken_by::read(&f, WOKEN_BY, report),
                };
                entries
                    .entry(pack_id.clone())
                    .or_default()
                    .insert(persona.clone(), entry);
            }
        }
        let tool_ceilings = ToolCeilings::read(&top, &packs, report);
        Overrides {
            path: Some(path.to_path_buf()),
            entries,
            allow_env,
            pack_grants,
            tool_ceilings,
            require_signed,
        }
    }
}

/// A persona table's grant keys.
fn read_grants(f: &Fields<'_>, report: &mut Report) -> AgentGrants {
    let mut grants = AgentGrants::default();
    for key in grants::KEYS {
        if f.get(key).is_some() {
            grants.read_key(f, key, report);
        }
    }
    grants
}

/// A pack's `allow_env`: a list of variable names (never a pattern: each is named on purpose).
fn read_allow_env(f: &Fields<'_>, report: &mut Report) -> Option<Vec<String>> {
    let at = [&f.prefix[..], &[ALLOW_ENV]].concat();
    let Some(Value::Array(items)) = f.get(ALLOW_ENV) else {
        let d = Diagnostic::error(
            "overrides.allow-env",
            "`allow_env` must be a list of environment variable names",
        )
        .help(r#"e.g. allow_env = ["GITHUB_TOKEN"]"#);
        report.push(f.src.diag(d, &at));
        return None;
    };
    let mut vars = Vec::new();
    for item in items {
        match item.as_str() {
            Some(name) if is_var_name(name) => vars.push(name.to_string()),
            _ => {
                let d = Diagnostic::error(
                    "overrides.allow-env",
                    format!("`allow_env` entry {item} is not an environment variable name"),
                )
                .help("names are letters, digits and `_`, not starting with a digit; there is no wildcard");
                report.push(f.src.diag(d, &at));
            }
        }
    }
    Some(vars)
}

/// A persona's `limits` table; an error in it is reported and leaves it without limits.
fn read_limits(f: &Fields<'_>, report: &mut Report) -> PersonaLimits {
    let Some(value) = f.get(LIMITS) else {
        return PersonaLimits::default();
    };
    let Value::Object(table) = value else {
        f.type_error(report, LIMITS, "a table of limits", value);
        return PersonaLimits::default();
    };
    PersonaLimits::from_table(table).unwrap_or_else(|e| {
        let d = Diagnostic::error("overrides.limits", e).help(
            "e.g. limits = { turns_per_hour = 20, turns_per_day = 200, tokens_per_day = 500000 }",
        );
        report.push(f.src.diag(d, &[&f.prefix[..], &[LIMITS]].concat()));
        PersonaLimits::default()
    })
}

fn check_keys(f: &Fields<'_>, report: &mut Report) {
    let known: Vec<&str> = BEHAVIOUR_KEYS
        .iter()
        .copied()
        .chain([
            apiary_schema::persona::RUNTIME,
            LIMITS,
            TOOL_CEILING,
            WOKEN_BY,
        ])
        .chain(grants::KEYS.iter().copied())
        .collect();
    for key in f.map.keys().filter(|k| !known.contains(&k.as_str())) {
        let d = Diagnostic::error(
            "overrides.unknown-key",
            format!("unknown key `{key}` in the overrides file"),
        );
        let d = match suggest(key, &known) {
            Some(s) => d.help(format!("did you mean `{s}`?")),
            None => d.help(format!("overrides take {}", known.join(", "))),
        };
        report.push(f.src.diag(d, &[&f.prefix[..], &[key.as_str()]].concat()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> (Overrides, Report) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("overrides.toml");
        std::fs::write(&path, text).unwrap();
        let mut report = Report::default();
        let o = Overrides::load(&path, &mut report);
        (o, report)
    }

    /// The operator's `woken_by` is read per persona; an entry naming no persona is an error at
    /// its line and the persona keeps no rule from it.
    #[test]
    fn woken_by_is_a_persona_list_of_names() {
        let (o, report) =
            load("[\"com.example.p\".forager]\nwoken_by = [\"scout\", \"com.example.ops/*\"]\n");
        assert!(!report.has_errors(), "{report:?}");
        let rule = o.get("com.example.p", "forager").unwrap().woken_by.clone();
        assert_eq!(
            rule,
            Some(vec!["scout".to_string(), "com.example.ops/*".to_string()])
        );
        let (_, report) = load("[\"com.example.p\".forager]\nwoken_by = [\"../x\"]\n");
        assert!(report.has_errors(), "{report:?}");
        let (_, report) = load("[\"com.example.p\".forager]\nwoken_by = \"scout\"\n");
        assert!(report.has_errors(), "{report:?}");
    }

    #[test]
    fn allow_env_is_a_per_pack_list_of_names() {
        let (o, report) = load(
            "[\"com.example.p\"]\nallow_env = [\"GITHUB_TOKEN\", \"_X1\"]\n\n[\"com.example.p\".pip]\nmodel = \"a:b\"\n",
        );
        assert!(!report.has_errors(), "{report:?}");
        assert_eq!(o.allow_env("com.example.p"), ["GITHUB_TOKEN", "_X1"]);
        assert!(o.allow_env("com.example.q").is_empty());
        assert!(o.get("com.example.p", "pip").is_some());
        assert!(o.get("com.example.p", ALLOW_ENV).is_none());
        // No wildcard, no patterns, no other shape.
        for bad in [
            "allow_env = \"GITHUB_TOKEN\"",
            "allow_env = [\"*\"]",
            "allow_env = [\"A B\"]",
            "allow_env = [1]",
        ] {
            let (o, report) = load(&format!("[\"com.example.p\"]\n{bad}\n"));
            assert!(report.has_errors(), "{bad}");
            assert!(o.allow_env("com.example.p").is_empty(), "{bad}");
        }
    }
}
