//! Expert pack -> persona pack (formats.md §5.1, read right to left).
//!
//! Agents become personas in parents-first `reports_to` order, each soul the persona body. What a
//! persona pack has no slot for (role, hierarchy, department, rank, trigger, the whole
//! `agent.partial.toml`, the raw `.mcp.json`, pack keys such as `category` or the locale map) rides
//! in the manifest's `x-expert` block, keyed by persona name, so the way back is lossless. Hooks,
//! wiki pages, evals and any other file are carried under `x-expert/` with their original paths:
//! hooks there are quarantined (never wired to `hooks_config`). A pack that was itself written from
//! a persona pack (`[expert.x-buzz]`) gets its persona fields back from that block.

use std::path::Path;

use convert_kit::pack::{MANIFEST as PACK_MANIFEST, SCHEMA};
use convert_kit::slug::{self, Rules};
use convert_kit::{Map, McpServer, Pack, ParseMode, Persona, Report, Value, json};

use crate::expert::{Agent, Expert, MANIFEST, str_of};
use crate::{EXT_BUZZ, EXT_EXPERT, EXT_FILES, topo};

/// Files as `(pack-relative path, bytes)`.
type Files = Vec<(String, Vec<u8>)>;

/// Expert keys with a direct persona pack manifest slot.
const MAPPED_KEYS: &[&str] = &[
    "name",
    "description",
    "version",
    "author",
    "license",
    "tags",
];

pub fn convert(input: &Path, output: &Path) -> Result<Report, String> {
    let mut report = Report::default();
    let expert = Expert::read(input, &mut report)?;
    write(&expert, report, output)
}

/// Writes `expert` as a persona pack under `output`, adding to `report`.
pub fn write(expert: &Expert, mut report: Report, output: &Path) -> Result<Report, String> {
    let order = topo::order(&expert.agents)?;
    let buzz = expert
        .table
        .get(EXT_BUZZ)
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();

    let mut pack = Pack {
        manifest: manifest(expert, &buzz, &mut report),
        ..Pack::default()
    };
    let title = str_of(&pack.manifest, "name").to_string();
    // Files carried under `x-expert/`, by their expert path.
    let mut carried: Vec<(String, Vec<u8>)> = Vec::new();
    // Skills first, so personas only reference skills the pack really carries.
    skills(expert, &buzz, &mut pack, &mut carried, &mut report);

    let mut agents_ext = Map::new();
    let mut names: Vec<String> = Vec::new();
    for &i in &order {
        let agent = &expert.agents[i];
        let record = buzz
            .get("personas")
            .and_then(|p| p.get(agent.name()))
            .and_then(Value::as_object);
        let name = persona_name(agent, i, record, &names, &mut report);
        names.push(name.clone());
        let (persona, ext) = persona(expert, agent, i, &name, &title, record, &mut report);
        pack.personas.push(persona);
        agents_ext.insert(name.clone(), Value::Object(ext));
        for (path, bytes) in &agent.files {
            carried.push((format!("agents/{}/{path}", agent.name()), bytes.clone()));
        }
        if !agent.reports_to().is_empty()
            && !expert.agents.iter().any(|a| a.name() == agent.reports_to())
        {
            report.reinterpreted(
                "reports-to-unknown",
                MANIFEST,
                &format!("expert.agents.{i}.reports_to"),
                format!(
                    "agent `{}` reports to `{}`, which is not in the pack; placed as a root",
                    agent.name(),
                    agent.reports_to()
                ),
            );
        }
    }

    // Pack-level MCP servers and instructions exist only for packs written from a persona pack.
    if let Some(Value::Object(servers)) = buzz.get("mcp_servers") {
        pack.mcp_servers = servers
            .iter()
            .filter_map(|(name, config)| {
                config.as_object().map(|config| McpServer {
                    name: name.clone(),
                    config: config.clone(),
                })
            })
            .collect();
    }
    let (restored, pages) = pack_files(expert, &buzz, &mut pack, &mut carried);
    let wiki_skill = share_wiki(&pages, &title, &mut pack, &mut report);
    let files = report_carried(&carried, &mut report);
    let mut ext = extension(expert, agents_ext, files, &mut report);
    if let Some(name) = wiki_skill {
        ext.insert("wiki_skill".into(), name.into());
    }
    pack.manifest.insert(EXT_EXPERT.into(), Value::Object(ext));

    pack.write(output)?;
    for (path, bytes) in &restored {
        if !convert_kit::tree::is_file(output, path) {
            convert_kit::tree::write(output, path, bytes)?;
        }
    }
    for (path, bytes) in &carried {
        convert_kit::tree::write(output, &format!("{EXT_FILES}/{path}"), bytes)?;
    }
    Ok(report)
}

/// The expert pack's skills: usable ones (under the name a persona pack gave them) into the
/// pack, the others carried as files.
fn skills(
    expert: &Expert,
    buzz: &Map<String, Value>,
    pack: &mut Pack,
    carried: &mut Vec<(String, Vec<u8>)>,
    report: &mut Report,
) {
    let renamed = buzz.get("skill_dirs").and_then(Value::as_object);
    for skill in &expert.skills {
        let mut skill = skill.clone();
        if usable_skill(&skill) {
            if let Some(Value::String(original)) = renamed.and_then(|m| m.get(&skill.name))
                && crate::expert::is_safe_segment(original)
            {
                skill.name = original.clone();
            }
            pack.skills.push(skill);
        } else {
            report.reinterpreted(
                "carried-as-file",
                &format!("skills/{}/SKILL.md", skill.name),
                "",
                format!(
                    "skill `{}` has no SKILL.md with name and description; its files are carried under {EXT_FILES}/skills/{}/ and no persona uses it",
                    skill.name, skill.name
                ),
            );
            for (path, bytes) in &skill.files {
                carried.push((format!("skills/{}/{path}", skill.name), bytes.clone()));
            }
        }
    }
}

/// The wiki pages as one skill every persona gets (the DuDuClaw Expert Pack Format v1.0, §2
/// Layout: wiki pages are the team's shared knowledge, so they must reach the agents). Returns the
/// skill's name.
fn share_wiki(
    pages: &[(String, Vec<u8>)],
    title: &str,
    pack: &mut Pack,
    report: &mut Report,
) -> Option<String> {
    if pages.is_empty() {
        return None;
    }
    let taken: Vec<&str> = pack.skills.iter().map(|s| s.name.as_str()).collect();
    let skill = crate::wiki::skill(pages, title, &taken, report);
    let entry = Value::from(format!("./skills/{}/", skill.name));
    for persona in &mut pack.personas {
        let skills = persona
            .fields
            .entry("skills")
            .or_insert_with(|| Value::Array(Vec::new()));
        if let Value::Array(list) = skills {
            list.push(entry.clone());
        }
    }
    let name = skill.name.clone();
    pack.skills.push(skill);
    Some(name)
}

/// The expert pack's other files: the pack instructions, files a persona pack carried (returned
/// first, to go back to their place), wiki pages (returned second) and the rest into `carried`.
fn pack_files(
    expert: &Expert,
    buzz: &Map<String, Value>,
    pack: &mut Pack,
    carried: &mut Vec<(String, Vec<u8>)>,
) -> (Files, Files) {
    let instructions = buzz.get("instructions").and_then(Value::as_str);
    // Stored path -> the persona pack path it came from.
    let buzz_files: Map<String, Value> = buzz
        .get("files")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let mut restored: Vec<(String, Vec<u8>)> = Vec::new();
    let mut pages: Vec<(String, Vec<u8>)> = Vec::new();
    for (path, bytes) in &expert.files {
        if Some(path.as_str()) == instructions
            && let Ok(text) = std::str::from_utf8(bytes)
        {
            pack.instructions = Some(text.to_string());
            continue;
        }
        // Files a persona pack carried go back to their place; hooks never do.
        if let Some(original) = buzz_files.get(path).and_then(Value::as_str)
            && !path.starts_with("hooks/")
            && convert_kit::tree::join(Path::new("/"), original).is_ok()
        {
            restored.push((original.to_string(), bytes.clone()));
            continue;
        }
        if crate::wiki::is_page(path) {
            pages.push((path.clone(), bytes.clone()));
            continue;
        }
        carried.push((path.clone(), bytes.clone()));
    }
    (restored, pages)
}

/// Reports each carried file (hooks as quarantined) and lists them for `x-expert.files`.
fn report_carried(carried: &[(String, Vec<u8>)], report: &mut Report) -> Vec<Value> {
    let mut files = Vec::new();
    for (path, _) in carried {
        let (code, message) = if path.starts_with("hooks/") {
            (
                "hooks-quarantined",
                format!(
                    "hook file carried disabled under {EXT_FILES}/{path}; it is not wired to the persona pack's hooks and needs an explicit trust step"
                ),
            )
        } else {
            (
                "carried-as-file",
                format!("carried unchanged under {EXT_FILES}/{path} (no persona pack slot)"),
            )
        };
        if !path.starts_with("skills/") {
            report.reinterpreted(code, path, "", message);
        }
        files.push(Value::from(path.clone()));
    }
    files
}

/// The `x-expert` block: the `[expert]` table, other top-level TOML, agent records, file list.
fn extension(
    expert: &Expert,
    agents_ext: Map<String, Value>,
    files: Vec<Value>,
    report: &mut Report,
) -> Map<String, Value> {
    let mut ext = Map::new();
    let mut expert_table = expert.table.clone();
    expert_table.remove(EXT_BUZZ);
    ext.insert("expert".into(), Value::Object(expert_table));
    if !expert.rest.is_empty() {
        ext.insert("toml".into(), Value::Object(expert.rest.clone()));
        for key in expert.rest.keys() {
            report.reinterpreted(
                "carried-in-extension",
                MANIFEST,
                key,
                format!("top-level key `{key}` outside [expert] carried in `{EXT_EXPERT}.toml`"),
            );
        }
    }
    ext.insert("agents".into(), Value::Object(agents_ext));
    if !files.is_empty() {
        ext.insert("files".into(), Value::Array(files));
    }
    ext
}

/// A skill the persona pack validator accepts: a SKILL.md with `name` and `description`.
fn usable_skill(skill: &convert_kit::Skill) -> bool {
    skill.skill_md().is_some_and(|text| {
        let fm = convert_kit::frontmatter::parse(text);
        fm.mode == ParseMode::Strict
            && ["name", "description"].iter().all(|k| {
                fm.fields
                    .get(*k)
                    .and_then(Value::as_str)
                    .is_some_and(|v| !v.trim().is_empty())
            })
    })
}

/// The persona pack manifest: `x-buzz.manifest` when the pack came from a persona pack, else
/// built from the `[expert]` table. Expert-native keys are reported once here.
fn manifest(expert: &Expert, buzz: &Map<String, Value>, report: &mut Report) -> Map<String, Value> {
    let t = &expert.table;
    let mut m = match crate::get_exact(buzz, "manifest") {
        Some(Value::Object(recorded)) => {
            report.reinterpreted(
                "carried-in-extension",
                MANIFEST,
                &format!("expert.{EXT_BUZZ}"),
                format!("persona pack fields restored from `expert.{EXT_BUZZ}` (this pack was written from a persona pack)"),
            );
            recorded
        }
        _ => Map::new(),
    };
    let restoring = !m.is_empty();
    if !restoring {
        m.insert("$schema".into(), SCHEMA.into());
        pack_identity(t, &mut m, report);
    }
    mapped_fields(t, &mut m, report);
    if !restoring {
        report_unmapped_table(t, report);
    }
    m
}

/// `id` (the expert name as a slug) and `name` (the title from the locale map).
fn pack_identity(t: &Map<String, Value>, m: &mut Map<String, Value>, report: &mut Report) {
    let raw = str_of(t, "name");
    let id = match slug::normalise(raw, Rules::DuDuClaw) {
        Some(id) => {
            if id != raw {
                report.normalised(
                    "name-normalised",
                    MANIFEST,
                    "expert.name",
                    format!("{raw} -> {id}"),
                );
            }
            id
        }
        None => {
            report.synthesised(
                "name-synthesised",
                MANIFEST,
                "expert.name",
                format!("expert name `{raw}` has no usable characters; pack id `expert-pack`"),
            );
            "expert-pack".to_string()
        }
    };
    m.insert("id".into(), id.clone().into());
    let title = title(t).unwrap_or_else(|| {
        report.synthesised(
            "default-applied",
            PACK_MANIFEST,
            "name",
            format!("no display_name: the pack title is its id `{id}`"),
        );
        id.clone()
    });
    m.insert("name".into(), title.into());
}

/// The `[expert]` keys with a manifest slot (version and description defaulted when missing).
fn mapped_fields(t: &Map<String, Value>, m: &mut Map<String, Value>, report: &mut Report) {
    for (key, target) in [("version", "version"), ("description", "description")] {
        match t
            .get(key)
            .and_then(Value::as_str)
            .filter(|v| !v.trim().is_empty())
        {
            Some(v) => {
                m.insert(target.into(), v.into());
            }
            None if !m.contains_key(target) => {
                let fallback = if key == "version" {
                    "0.0.0".to_string()
                } else {
                    format!(
                        "{} (converted from a DuDuClaw expert pack)",
                        str_of(m, "name")
                    )
                };
                report.synthesised(
                    "default-applied",
                    PACK_MANIFEST,
                    target,
                    format!("expert.toml has no `{key}`: `{fallback}`"),
                );
                m.insert(target.into(), fallback.into());
            }
            None => {}
        }
    }
    if let Some(author) = t.get("author").and_then(Value::as_str) {
        // A persona pack author recorded as an object keeps its form when its name is unchanged.
        let same_object = m
            .get("author")
            .and_then(|a| a.get("name"))
            .and_then(Value::as_str)
            == Some(author);
        if !same_object {
            m.insert("author".into(), author.into());
        }
    }
    if let Some(license) = t.get("license").and_then(Value::as_str) {
        m.insert("license".into(), license.into());
    }
    if let Some(Value::Array(tags)) = t.get("tags") {
        m.insert("keywords".into(), Value::Array(tags.clone()));
    }
}

/// `[expert]` keys with no manifest slot, or of a shape it does not take (carried in the block).
fn report_unmapped_table(t: &Map<String, Value>, report: &mut Report) {
    for key in t.keys() {
        if MAPPED_KEYS.contains(&key.as_str()) || key == EXT_BUZZ {
            continue;
        }
        report.reinterpreted(
            "carried-in-extension",
            MANIFEST,
            &format!("expert.{key}"),
            format!("`{key}` has no persona pack slot; carried in `{EXT_EXPERT}.expert.{key}`"),
        );
    }
    for key in ["author", "license"] {
        if t.get(key).is_some_and(|v| !v.is_string()) {
            report.reinterpreted(
                "carried-in-extension",
                MANIFEST,
                &format!("expert.{key}"),
                format!("`{key}` is not a string; carried in `{EXT_EXPERT}.expert.{key}` only"),
            );
        }
    }
}

/// The pack title from the locale map: `en`, then `zh-TW`, then the first entry.
fn title(t: &Map<String, Value>) -> Option<String> {
    let names = t.get("display_name")?;
    if let Some(s) = names.as_str() {
        return Some(s.to_string());
    }
    let names = names.as_object()?;
    ["en", "zh-TW"]
        .iter()
        .find_map(|k| names.get(*k).and_then(Value::as_str))
        .or_else(|| names.values().find_map(Value::as_str))
        .filter(|s| !s.trim().is_empty())
        .map(str::to_string)
}

/// The persona name for an agent: recorded, or its name under persona rules, or `agent-<n>` when
/// nothing usable is left (CJK names); unique in the pack.
fn persona_name(
    agent: &Agent,
    index: usize,
    record: Option<&Map<String, Value>>,
    taken: &[String],
    report: &mut Report,
) -> String {
    let raw = agent.name();
    let fields = record.and_then(|r| crate::get_exact(r, "fields"));
    let recorded = fields
        .as_ref()
        .and_then(|f| f.get("name"))
        .and_then(Value::as_str)
        .filter(|n| slug::is_valid(n, Rules::Persona));
    let base = recorded
        .map(str::to_string)
        .or_else(|| slug::normalise(raw, Rules::Persona))
        .unwrap_or_else(|| format!("agent-{}", index + 1));
    let mut name = base.clone();
    let mut n = 2;
    while taken.contains(&name) {
        name = format!("{base}-{n}");
        n += 1;
    }
    if name != raw && recorded != Some(name.as_str()) {
        report.normalised(
            "name-normalised",
            MANIFEST,
            &format!("expert.agents.{index}.name"),
            format!("{raw} -> {name}"),
        );
    }
    name
}

/// One agent as a persona, and its `x-expert.agents.<name>` record.
fn persona(
    expert: &Expert,
    agent: &Agent,
    index: usize,
    name: &str,
    title: &str,
    record: Option<&Map<String, Value>>,
    report: &mut Report,
) -> (Persona, Map<String, Value>) {
    let file_default = format!("agents/{name}.persona.md");
    let display = str_of(&agent.table, "display_name").trim().to_string();
    let preferred = agent
        .partial
        .as_ref()
        .and_then(|p| p.get("model"))
        .and_then(|m| m.get("preferred"))
        .and_then(Value::as_str)
        .filter(|m| !m.trim().is_empty() && !m.starts_with(':') && !m.ends_with(':'));

    let mut ext = agent_record(agent, index);

    // A pack written from a persona pack: its persona comes back as it was.
    if let Some(record) = record {
        let mut fields = match crate::get_exact(record, "fields") {
            Some(Value::Object(fields)) => fields,
            _ => Map::new(),
        };
        restore_fields(&mut fields, agent, name, &display, preferred, report);
        let file = record
            .get("file")
            .and_then(Value::as_str)
            .filter(|f| f.ends_with(".md") && convert_kit::tree::join(Path::new("/"), f).is_ok())
            .unwrap_or(&file_default)
            .to_string();
        return (persona_of(file, fields, &agent.soul), ext);
    }

    let mut synthesised = Vec::new();
    let mut fields = identity_fields(
        agent,
        name,
        title,
        &display,
        &file_default,
        &mut synthesised,
        report,
    );
    if let Some(model) = preferred {
        // Through the shared model table (`claude-sonnet-4-6` -> `anthropic:claude-sonnet-4-6`);
        // the value as written stays in the partial record.
        let path = format!("agents/{}/agent.partial.toml", agent.name());
        let kept = format!("`{EXT_EXPERT}.agents.{name}.partial.model`");
        if let Some(id) = convert_kit::models::to_persona(model, report, &path, &kept) {
            fields.insert("model".into(), id.into());
        }
    }
    let skills = agent_skills(expert, agent, index, report);
    if !skills.is_empty() {
        fields.insert("skills".into(), Value::Array(skills));
    }
    if let Some(mcp) = &agent.mcp {
        let servers = mcp_servers(mcp, &format!("agents/{}/.mcp.json", agent.name()), report);
        if !servers.is_empty() {
            fields.insert("mcp_servers".into(), Value::Array(servers));
        }
    }
    let trigger = str_of(&agent.table, "trigger").trim();
    if !trigger.is_empty() {
        fields.insert("triggers".into(), triggers(trigger, name, index, report));
        synthesised.push("triggers");
    }
    report_unmapped_agent(agent, index, name, preferred, report);
    ext.insert(
        "synthesised".into(),
        Value::Array(synthesised.into_iter().map(Value::from).collect()),
    );
    (persona_of(file_default, fields, &agent.soul), ext)
}

/// The `trigger` mention hint (the Expert Pack Format v1.0, §3 expert.toml: `trigger = "@front"`)
/// as persona triggers. `@<persona name>` is the persona's own @-mention, which wakes it in any
/// channel (`mentions`). Any other hint (another handle, a CJK display name the @-mention syntax
/// cannot spell) becomes a keyword, which wakes the persona only in the channels it subscribes to:
/// reported, with the remedy.
fn triggers(trigger: &str, name: &str, index: usize, report: &mut Report) -> Value {
    let field = agent_field(index, "trigger");
    if trigger
        .strip_prefix('@')
        .is_some_and(|handle| handle.eq_ignore_ascii_case(name))
    {
        report.normalised(
            "trigger-as-mention",
            MANIFEST,
            &field,
            format!("mention hint `{trigger}` is the persona's own @-mention: `triggers.mentions` on, which wakes it in any channel"),
        );
        return json!({ "mentions": true });
    }
    report.reinterpreted(
        "trigger-as-keyword",
        MANIFEST,
        &field,
        format!(
            "mention hint `{trigger}` is not persona `{name}`'s @-mention: it became the keyword `{trigger}`, which wakes the persona in the channels it subscribes to (set `subscribe` in the pack defaults or the operator's overrides); `@{name}` wakes it in any channel"
        ),
    );
    json!({ "mentions": true, "keywords": [trigger] })
}

/// The agent as an expert pack has it, for `x-expert.agents.<name>`.
fn agent_record(agent: &Agent, index: usize) -> Map<String, Value> {
    let mut ext = Map::new();
    ext.insert("order".into(), index.into());
    ext.insert("table".into(), Value::Object(agent.table.clone()));
    ext.insert("soul_file".into(), agent.soul_file.clone().into());
    if let Some(partial) = &agent.partial {
        ext.insert("partial".into(), Value::Object(partial.clone()));
    }
    if let Some(mcp) = &agent.mcp {
        ext.insert("mcp".into(), mcp.clone());
    }
    ext
}

/// `expert.agents.<index>.<key>`, a report field.
fn agent_field(index: usize, key: &str) -> String {
    format!("expert.agents.{index}.{key}")
}

/// A recorded persona's fields with the agent's current values laid over them; its hooks are not
/// restored.
fn restore_fields(
    fields: &mut Map<String, Value>,
    agent: &Agent,
    name: &str,
    display: &str,
    preferred: Option<&str>,
    report: &mut Report,
) {
    fields.insert("name".into(), name.into());
    if fields.remove("hooks").is_some() {
        report.reinterpreted(
            "hooks-quarantined",
            MANIFEST,
            &format!("expert.{EXT_BUZZ}.personas.{}.fields.hooks", agent.name()),
            format!("persona `{name}` hooks from the extension block are not restored (hooks from an expert pack stay quarantined)"),
        );
    }
    if !display.is_empty() && str_of(fields, "display_name") != display {
        fields.insert("display_name".into(), display.into());
    }
    if let Some(p) = preferred {
        let recorded = fields
            .get("model")
            .and_then(Value::as_str)
            .map(crate::strip_provider);
        if recorded.is_some_and(|r| r != p) {
            fields.insert("model".into(), p.into());
        }
    }
}

/// A new persona's name, display name and description (synthesised: expert agents have none).
fn identity_fields(
    agent: &Agent,
    name: &str,
    title: &str,
    display: &str,
    file: &str,
    synthesised: &mut Vec<&str>,
    report: &mut Report,
) -> Map<String, Value> {
    let mut fields = Map::new();
    fields.insert("name".into(), name.into());
    if display.is_empty() {
        report.synthesised(
            "default-applied",
            file,
            "display_name",
            format!("agent `{}` has no display_name: `{name}`", agent.name()),
        );
        fields.insert("display_name".into(), name.into());
        synthesised.push("display_name");
    } else {
        fields.insert("display_name".into(), display.into());
    }
    let role = str_of(&agent.table, "role");
    let description = format!(
        "{} ({} agent of {title})",
        if display.is_empty() { name } else { display },
        if role.trim().is_empty() { "an" } else { role }
    );
    report.synthesised(
        "description-synthesised",
        file,
        "description",
        format!("expert agents have no description: `{description}`"),
    );
    fields.insert("description".into(), description.into());
    synthesised.push("description");
    fields
}

/// The agent's skills the pack bundles, as persona `skills`; the others stay in the record.
fn agent_skills(expert: &Expert, agent: &Agent, index: usize, report: &mut Report) -> Vec<Value> {
    agent
        .table
        .get("skills")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter_map(|s| {
            if expert.skills.iter().any(|k| k.name == s) && usable_skill_named(expert, s) {
                Some(Value::from(format!("./skills/{s}/")))
            } else {
                report.reinterpreted(
                    "carried-in-extension",
                    MANIFEST,
                    &agent_field(index, "skills"),
                    format!("skill `{s}` is not bundled in the pack (external to it); kept in the agent record only"),
                );
                None
            }
        })
        .collect()
}

/// Agent keys and `agent.partial.toml` sections with no persona slot (carried in the record).
fn report_unmapped_agent(
    agent: &Agent,
    index: usize,
    name: &str,
    preferred: Option<&str>,
    report: &mut Report,
) {
    for key in agent.table.keys() {
        if !matches!(key.as_str(), "name" | "display_name" | "skills" | "trigger") {
            report.reinterpreted(
                "carried-in-extension",
                MANIFEST,
                &agent_field(index, key),
                format!(
                    "`{key}` has no persona slot; carried in `{EXT_EXPERT}.agents.{name}.table`"
                ),
            );
        }
    }
    if let Some(partial) = &agent.partial {
        let path = format!("agents/{}/agent.partial.toml", agent.name());
        for (section, value) in partial {
            let only_model = section == "model"
                && value
                    .as_object()
                    .is_some_and(|m| m.len() == 1 && m.contains_key("preferred"))
                && preferred.is_some();
            if !only_model {
                report.reinterpreted(
                    "carried-in-extension",
                    &path,
                    section,
                    format!("`[{section}]` has no persona slot; carried in `{EXT_EXPERT}.agents.{name}.partial`"),
                );
            }
            // Tool restrictions (`[capabilities]` allowed/denied tools, a read-only project) are
            // not enforced for a persona: lost at run time.
            for (key, v) in value.as_object().into_iter().flatten() {
                if convert_kit::policy::restricts(key, v) {
                    let kept_in = format!("{EXT_EXPERT}.agents.{name}.partial");
                    convert_kit::policy::report_lost(
                        report,
                        &path,
                        &format!("{section}.{key}"),
                        &kept_in,
                    );
                }
            }
        }
    }
}

fn usable_skill_named(expert: &Expert, name: &str) -> bool {
    expert
        .skills
        .iter()
        .find(|s| s.name == name)
        .is_some_and(usable_skill)
}

fn persona_of(file: String, fields: Map<String, Value>, soul: &str) -> Persona {
    // One leading newline separates frontmatter and body; the way back strips exactly one.
    Persona {
        file,
        fields,
        body: format!("\n{soul}"),
        mode: ParseMode::Strict,
    }
}

/// A `.mcp.json` as persona `mcp_servers` items. Servers a persona cannot hold (SSE, unknown
/// transports, no command or url) stay in the agent record only, reported.
fn mcp_servers(mcp: &Value, path: &str, report: &mut Report) -> Vec<Value> {
    let Some(servers) = mcp.get("mcpServers").and_then(Value::as_object) else {
        report.reinterpreted(
            "carried-in-extension",
            path,
            "",
            "no `mcpServers` object; the file is kept in the agent record only",
        );
        return Vec::new();
    };
    let mut out = Vec::new();
    for (name, config) in servers {
        let Some(config) = config.as_object() else {
            report.lost(
                "mcp-server-invalid",
                path,
                &format!("mcpServers.{name}"),
                "not an object",
            );
            continue;
        };
        let kind = config
            .get("type")
            .or_else(|| config.get("transport"))
            .and_then(Value::as_str)
            .map(str::to_ascii_lowercase);
        let has = |k: &str| {
            config
                .get(k)
                .and_then(Value::as_str)
                .is_some_and(|v| !v.trim().is_empty())
        };
        let ok = match kind.as_deref() {
            None => has("command") || has("url"),
            Some("stdio") => has("command"),
            Some("http" | "streamable_http" | "streamable-http") => has("url"),
            Some(_) => false,
        };
        if !ok || name.trim().is_empty() {
            report.reinterpreted(
                "mcp-server-unsupported",
                path,
                &format!("mcpServers.{name}"),
                format!(
                    "MCP server `{name}` ({}) cannot be a persona MCP server; kept in the agent record only",
                    kind.as_deref().unwrap_or("no command or url")
                ),
            );
            continue;
        }
        let mut item = Map::new();
        item.insert("name".into(), name.clone().into());
        for (k, v) in config {
            item.insert(k.clone(), v.clone());
        }
        out.push(Value::Object(item));
    }
    out
}
