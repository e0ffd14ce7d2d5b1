//! A bare DuDuClaw agent directory (no `expert.toml`): an agent template (`SOUL.md`, `agent.toml`
//! with an `[agent]` table, `CONTRACT.toml`) or a preset (`SOUL.md`, `preset.toml`). It is read as
//! a one-agent expert pack, so it converts like one; what that takes is reported.

use std::path::Path;

use convert_kit::{Map, Report, Value, tree};

use crate::expert::{Agent, Expert, is_safe_segment, read_toml, str_of};

/// The soul file and config file of an agent directory, when `root` is one.
pub fn detect(root: &Path) -> Option<(&'static str, &'static str)> {
    let soul = ["SOUL.md", "soul.md"]
        .into_iter()
        .find(|f| tree::is_file(root, f))?;
    let config = ["agent.toml", "preset.toml"]
        .into_iter()
        .find(|f| tree::is_file(root, f))?;
    Some((soul, config))
}

pub fn read(root: &Path, report: &mut Report) -> Result<Expert, String> {
    let (soul_file, config_file) =
        detect(root).ok_or("no expert.toml, and not a DuDuClaw agent directory (SOUL.md with agent.toml or preset.toml)")?;
    let mut config = read_toml(root, config_file, report)?;
    let soul = tree::read(root, soul_file)?;
    let (mut table, meta) = if config_file == "agent.toml" {
        let table = match config.remove("agent") {
            Some(Value::Object(t)) => t,
            _ => Map::new(),
        };
        (table, Map::new())
    } else {
        let meta = match config.remove("preset") {
            Some(Value::Object(t)) => t,
            _ => Map::new(),
        };
        (Map::new(), meta)
    };
    let name = agent_name(&table, &meta, config_file, report);
    table.insert("name".into(), name.clone().into());
    if let Some(label) = meta.get("label").and_then(Value::as_str) {
        table.entry("display_name").or_insert_with(|| label.into());
    }
    report.reinterpreted(
        "agent-template",
        config_file,
        "",
        format!(
            "a DuDuClaw agent directory ({soul_file} + {config_file}, no expert.toml) read as a one-agent expert pack; the rest of {config_file} is carried as the agent's partial config"
        ),
    );

    let mut expert_table = Map::new();
    expert_table.insert("name".into(), name.clone().into());
    for key in ["description", "version"] {
        if let Some(v) = meta.get(key) {
            expert_table.insert(key.into(), v.clone());
        }
    }
    if !meta.is_empty() {
        expert_table.insert("preset".into(), Value::Object(meta));
    }
    let mut files = Vec::new();
    for file in tree::walk(root, "")? {
        if file != soul_file && file != config_file {
            files.push((file.clone(), tree::read_bytes(root, &file)?));
        }
    }
    Ok(Expert {
        table: expert_table,
        rest: Map::new(),
        agents: vec![Agent {
            table,
            soul_file: soul_file.to_string(),
            soul,
            partial: (!config.is_empty()).then_some(config),
            mcp: None,
            files,
        }],
        skills: Vec::new(),
        files: Vec::new(),
    })
}

/// The agent's name: its own when usable, else its preset label as a slug, else `preset` or
/// `agent`.
fn agent_name(
    table: &Map<String, Value>,
    meta: &Map<String, Value>,
    config_file: &str,
    report: &mut Report,
) -> String {
    let raw = str_of(table, "name").to_string();
    if is_safe_segment(&raw) {
        return raw;
    }
    let name =
        convert_kit::slug::normalise(str_of(meta, "label"), convert_kit::slug::Rules::DuDuClaw)
            .unwrap_or_else(|| {
                if config_file == "preset.toml" {
                    "preset"
                } else {
                    "agent"
                }
                .to_string()
            });
    report.synthesised(
        "name-synthesised",
        config_file,
        "agent.name",
        format!("the agent directory names no agent: `{name}`"),
    );
    name
}
