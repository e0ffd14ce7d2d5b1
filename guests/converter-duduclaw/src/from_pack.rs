//! Persona pack -> expert pack (formats.md §5.1, read left to right).
//!
//! A pack that came from an expert pack (`x-expert` in its manifest) gets its agents, hierarchy,
//! `agent.partial.toml`, `.mcp.json` and carried files back as they were. Any other pack is mapped
//! field by field: the first persona is the `main` agent and the others `worker`s reporting to it,
//! the pack `.mcp.json` is copied into every agent's, `${VAR}` names become `requires.env`,
//! instructions become a wiki page, hooks land in `hooks/` (quarantined by every installer).
//! Persona fields with no expert slot ride in `[expert.x-buzz]`, so the way back is lossless.

use std::path::Path;

use apiary_schema::{behaviour, manifest, persona};
use convert_kit::slug::{self, Rules};
use convert_kit::{Map, Pack, Persona, Report, Value, is_documentation, json, tree};

use crate::expert::{Agent, Expert, MANIFEST, is_safe_segment, str_of};
use crate::{EXT_BUZZ, EXT_EXPERT, EXT_FILES, strip_provider};

/// Persona fields with an expert slot.
const MAPPED_FIELDS: &[&str] = &[
    persona::NAME,
    persona::DISPLAY_NAME,
    behaviour::MODEL,
    persona::SKILLS,
    persona::MCP_SERVERS,
];
/// Manifest keys with an expert slot or rewritten from the files.
const MAPPED_KEYS: &[&str] = &[
    manifest::SCHEMA,
    manifest::ID,
    manifest::NAME,
    manifest::VERSION,
    manifest::DESCRIPTION,
    manifest::AUTHOR,
    manifest::LICENSE,
    manifest::KEYWORDS,
    manifest::PERSONAS,
    manifest::MCP_CONFIG,
    manifest::HOOKS_CONFIG,
    manifest::PACK_INSTRUCTIONS,
];
/// Where pack instructions go: a wiki page (knowledge, not injected into souls).
const INSTRUCTIONS_PAGE: &str = "wiki/pack/instructions.md";

pub fn convert(input: &Path, output: &Path) -> Result<Report, String> {
    let (pack, mut report) = Pack::read(input)?;
    if pack.personas.is_empty() {
        return Err(
            "the persona pack has no personas; an expert pack needs at least one agent".into(),
        );
    }
    let ext = pack
        .manifest
        .get(EXT_EXPERT)
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let mut buzz = Map::new();
    let mut expert = Expert {
        table: table(&pack, &ext, &mut buzz, &mut report),
        rest: ext
            .get("toml")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default(),
        ..Expert::default()
    };
    let defaults_model = pack
        .manifest
        .get("defaults")
        .and_then(|d| d.get("model"))
        .and_then(Value::as_str)
        .map(str::to_string);
    let wiki = crate::wiki::recorded(&ext).map(str::to_string);
    let skill_dirs = skills(&pack, wiki.as_deref(), &mut expert, &mut report);
    let pack_mcp = pack_mcp(&pack, &mut buzz, &mut report);
    let shared = Shared {
        defaults_model: defaults_model.as_deref(),
        pack_mcp: &pack_mcp,
        skill_dirs: &skill_dirs,
        wiki: wiki.as_deref(),
    };
    let personas_ext = agents(&pack, &ext, &shared, &mut expert, &mut report);
    if !personas_ext.is_empty() {
        buzz.insert("personas".into(), Value::Object(personas_ext));
    }
    if !skill_dirs.is_empty() {
        buzz.insert("skill_dirs".into(), Value::Object(skill_dirs));
    }
    instructions_and_hooks(&pack, &mut expert, &mut buzz, &mut report)?;
    carry_files(input, &pack, &ext, &mut expert, &mut buzz, &mut report)?;

    add_required_env(&mut expert, &mut report);
    if !buzz.is_empty() {
        expert.table.insert(EXT_BUZZ.into(), Value::Object(buzz));
    }
    expert.check()?;
    let dropped = expert.write(output)?;
    for field in dropped {
        // A null says "no value": leaving it out loses nothing a persona runs with.
        report.normalised(
            "null-dropped",
            MANIFEST,
            &field,
            "a null value has no TOML form; left out",
        );
    }
    Ok(report)
}

/// What every agent mapped afresh gets from the pack: its default model, its MCP servers, the
/// skill directories renamed.
struct Shared<'a> {
    defaults_model: Option<&'a str>,
    pack_mcp: &'a Map<String, Value>,
    /// New skill directory -> the pack's.
    skill_dirs: &'a Map<String, Value>,
    /// The skill holding the expert pack's wiki pages (no agent lists it: the pages are wiki/).
    wiki: Option<&'a str>,
}

impl Shared<'_> {
    /// The expert skill directory for a persona's skill reference.
    fn skill_name(&self, reference: &str) -> String {
        let last = reference
            .trim_start_matches("./")
            .trim_end_matches('/')
            .rsplit('/')
            .next()
            .unwrap_or_default()
            .to_string();
        self.skill_dirs
            .iter()
            .find(|(_, from)| from.as_str() == Some(&last))
            .map(|(to, _)| to.clone())
            .unwrap_or(last)
    }
}

/// Skills: DuDuClaw requires the directory name to be a slug. Returns the renames. The skill an
/// expert pack's wiki became goes back to `wiki/`.
fn skills(
    pack: &Pack,
    wiki: Option<&str>,
    expert: &mut Expert,
    report: &mut Report,
) -> Map<String, Value> {
    let mut skill_dirs = Map::new();
    for skill in &pack.skills {
        if Some(skill.name.as_str()) == wiki {
            expert.files.extend(crate::wiki::pages_of(skill));
            continue;
        }
        let mut skill = skill.clone();
        if !slug::is_valid(&skill.name, Rules::DuDuClaw) {
            let to = slug::normalise(&skill.name, Rules::DuDuClaw)
                .unwrap_or_else(|| format!("skill-{}", expert.skills.len() + 1));
            report.normalised(
                "name-normalised",
                &format!("skills/{}", skill.name),
                "",
                format!("skill directory {} -> {to}", skill.name),
            );
            skill_dirs.insert(to.clone(), skill.name.clone().into());
            skill.name = to;
        }
        expert.skills.push(skill);
    }
    skill_dirs
}

/// The pack's MCP servers, copied into every new agent; the list is kept for the way back.
fn pack_mcp(pack: &Pack, buzz: &mut Map<String, Value>, report: &mut Report) -> Map<String, Value> {
    let pack_mcp: Map<String, Value> = pack
        .mcp_servers
        .iter()
        .map(|s| (s.name.clone(), Value::Object(s.config.clone())))
        .collect();
    if !pack_mcp.is_empty() {
        report.reinterpreted(
            "mcp-duplicated",
            ".mcp.json",
            "mcpServers",
            format!(
                "pack MCP servers copied into every new agent's .mcp.json ({} agents); the pack-level list is kept in `expert.{EXT_BUZZ}.mcp_servers`",
                pack.personas.len()
            ),
        );
        buzz.insert("mcp_servers".into(), Value::Object(pack_mcp.clone()));
    }
    pack_mcp
}

/// One agent per persona: restored from its record, else mapped afresh. Returns the personas'
/// fields with no expert slot, by agent.
fn agents(
    pack: &Pack,
    ext: &Map<String, Value>,
    shared: &Shared,
    expert: &mut Expert,
    report: &mut Report,
) -> Map<String, Value> {
    let records = ext
        .get("agents")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let mut personas_ext = Map::new();
    let mut agents: Vec<(usize, Agent)> = Vec::new();
    let mut main: Option<String> = None;
    let mut renames: Vec<(String, String)> = Vec::new();
    for (i, persona) in pack.personas.iter().enumerate() {
        let soul = persona
            .body
            .strip_prefix('\n')
            .unwrap_or(&persona.body)
            .to_string();
        let record = records.get(persona.name()).and_then(Value::as_object);
        let taken: Vec<&str> = agents.iter().map(|(_, a)| a.name()).collect();
        let (order, agent) = match record.and_then(|r| restore(r, persona, &soul, &taken)) {
            Some((order, agent)) => {
                let mut agent = restored(agent, persona, i, &taken, &mut renames, report);
                add_servers(&mut agent, persona, shared, report);
                (order, agent)
            }
            None => {
                let agent = new_agent(persona, i, &soul, main.as_deref(), &taken, shared, report);
                (usize::MAX - pack.personas.len() + i, agent)
            }
        };
        if main.is_none() && agent.reports_to().is_empty() {
            main = Some(agent.name().to_string());
        }
        if let Some(extra) = persona_extras(persona, record, report) {
            personas_ext.insert(agent.name().to_string(), Value::Object(extra));
        }
        agents.push((order, agent));
    }
    // Agents recorded from an expert pack keep their original order; new ones follow.
    agents.sort_by_key(|(order, _)| *order);
    for (_, agent) in &mut agents {
        if let Some((_, to)) = renames.iter().find(|(from, _)| from == agent.reports_to()) {
            agent.table.insert("reports_to".into(), to.clone().into());
        }
    }
    expert.agents = agents.into_iter().map(|(_, a)| a).collect();
    personas_ext
}

/// A restored agent made installable: a recorded name DuDuClaw would refuse (CJK, capitals)
/// becomes a slug (recorded in `renames`), the soul file `soul.md`.
fn restored(
    mut agent: Agent,
    persona: &Persona,
    i: usize,
    taken: &[&str],
    renames: &mut Vec<(String, String)>,
    report: &mut Report,
) -> Agent {
    let recorded = agent.name().to_string();
    if !slug::is_valid(&recorded, Rules::DuDuClaw) {
        let base = slug::normalise(&recorded, Rules::DuDuClaw)
            .or_else(|| slug::normalise(persona.name(), Rules::DuDuClaw))
            .unwrap_or_else(|| format!("agent-{}", i + 1));
        let to = unique(&base, taken);
        report.normalised(
            "name-normalised",
            convert_kit::pack::MANIFEST,
            &format!("{EXT_EXPERT}.agents.{}.table.name", persona.name()),
            format!("{recorded} -> {to}"),
        );
        agent.table.insert("name".into(), to.clone().into());
        renames.push((recorded, to));
    }
    if agent.soul_file != "soul.md" {
        report.normalised(
            "soul-file-renamed",
            convert_kit::pack::MANIFEST,
            &format!("{EXT_EXPERT}.agents.{}.soul_file", persona.name()),
            format!("{} -> soul.md", agent.soul_file),
        );
        agent.soul_file = "soul.md".into();
    }
    agent
}

/// Pack instructions as a wiki page, hooks under `hooks/`.
fn instructions_and_hooks(
    pack: &Pack,
    expert: &mut Expert,
    buzz: &mut Map<String, Value>,
    report: &mut Report,
) -> Result<(), String> {
    if let Some(text) = &pack.instructions {
        report.reinterpreted(
            "instructions-as-wiki",
            "instructions.md",
            "",
            format!("pack instructions written as the wiki page {INSTRUCTIONS_PAGE} (knowledge, not injected into each soul)"),
        );
        expert
            .files
            .push((INSTRUCTIONS_PAGE.into(), text.clone().into_bytes()));
        buzz.insert("instructions".into(), INSTRUCTIONS_PAGE.into());
    }
    if let Some(hooks) = &pack.hooks {
        let mut text = serde_json::to_string_pretty(hooks).map_err(|e| e.to_string())?;
        text.push('\n');
        expert
            .files
            .push(("hooks/hooks.json".into(), text.into_bytes()));
        report.reinterpreted(
            "hooks-quarantined",
            "hooks/hooks.json",
            "",
            "lifecycle hooks carried as hooks/hooks.json; DuDuClaw installs hooks disabled until the operator trusts them, and their semantics there are undefined",
        );
        for (path, bytes) in &pack.hook_files {
            let to = if path.starts_with("hooks/") {
                path.clone()
            } else {
                format!("hooks/{path}")
            };
            expert.files.push((to, bytes.clone()));
        }
    }
    Ok(())
}

/// The input's other files: back to their places when an expert pack carried them, else
/// where the expert layout allows them or under `wiki/x-buzz/`.
fn carry_files(
    input: &Path,
    pack: &Pack,
    ext: &Map<String, Value>,
    expert: &mut Expert,
    buzz: &mut Map<String, Value>,
    report: &mut Report,
) -> Result<(), String> {
    let carried = carried_files(input, pack, ext)?;
    let mut buzz_files = Map::new();
    for (path, bytes, from_expert) in carried {
        if expert.files.iter().any(|(p, _)| *p == path) {
            continue;
        }
        if from_expert {
            expert.files.push((path, bytes));
            continue;
        }
        // The expert layout allows only its own top-level entries and documentation.
        let top = path.split('/').next().unwrap_or_default();
        let stored = if ["agents", "wiki", "evals"].contains(&top) || is_documentation(top) {
            path.clone()
        } else {
            format!("wiki/{EXT_BUZZ}/{path}")
        };
        report.reinterpreted(
            "carried-as-file",
            &path,
            "",
            format!("file with no expert slot carried unchanged as {stored}"),
        );
        buzz_files.insert(stored.clone(), Value::from(path));
        expert.files.push((stored, bytes));
    }
    if !buzz_files.is_empty() {
        buzz.insert("files".into(), Value::Object(buzz_files));
    }
    Ok(())
}

/// The `[expert]` table: the recorded one when the pack came from an expert pack (with the mapped
/// manifest fields laid over it), else built from the manifest.
fn table(
    pack: &Pack,
    ext: &Map<String, Value>,
    buzz: &mut Map<String, Value>,
    report: &mut Report,
) -> Map<String, Value> {
    let m = &pack.manifest;
    let recorded = ext.get("expert").and_then(Value::as_object);
    let mut t = recorded.cloned().unwrap_or_default();
    table_name(&mut t, m, recorded.is_some(), report);
    table_fields(&mut t, m, recorded.is_some(), report);
    carry_manifest(m, recorded.is_some(), buzz, report);
    t
}

/// `expert.name`: the recorded one when DuDuClaw accepts it, else a slug of it or of the pack id.
fn table_name(
    t: &mut Map<String, Value>,
    m: &Map<String, Value>,
    recorded: bool,
    report: &mut Report,
) {
    let manifest_file = convert_kit::pack::MANIFEST;
    if !recorded {
        let id = str_of(m, "id");
        let name = slug::normalise(id, Rules::DuDuClaw)
            .or_else(|| slug::normalise(str_of(m, "name"), Rules::DuDuClaw))
            .unwrap_or_else(|| "persona-pack".to_string());
        if name != id {
            report.normalised(
                "name-normalised",
                manifest_file,
                "id",
                format!("{id} -> {name}"),
            );
        }
        t.insert("name".into(), name.into());
    }
    let recorded_name = str_of(t, "name").to_string();
    if recorded && !slug::is_valid(&recorded_name, Rules::DuDuClaw) {
        let to = slug::normalise(&recorded_name, Rules::DuDuClaw)
            .or_else(|| slug::normalise(str_of(m, "id"), Rules::DuDuClaw))
            .unwrap_or_else(|| "persona-pack".to_string());
        report.normalised(
            "name-normalised",
            manifest_file,
            &format!("{EXT_EXPERT}.expert.name"),
            format!("{recorded_name} -> {to}"),
        );
        t.insert("name".into(), to.into());
    }
}

/// The manifest fields with an `[expert]` slot laid over the table.
fn table_fields(
    t: &mut Map<String, Value>,
    m: &Map<String, Value>,
    recorded: bool,
    report: &mut Report,
) {
    for key in ["description", "version", "license"] {
        if let Some(v) = m.get(key).and_then(Value::as_str) {
            t.insert(key.into(), v.into());
        }
    }
    if !t.contains_key("description") {
        let d = format!("{} (converted from a persona pack)", str_of(m, "name"));
        report.synthesised(
            "default-applied",
            MANIFEST,
            "expert.description",
            format!("`{d}`"),
        );
        t.insert("description".into(), d.into());
    }
    match m.get("author") {
        Some(Value::String(a)) => {
            t.insert("author".into(), a.clone().into());
        }
        Some(Value::Object(a)) => {
            if let Some(name) = a.get("name").and_then(Value::as_str) {
                report.normalised(
                    "author-as-string",
                    convert_kit::pack::MANIFEST,
                    "author",
                    format!("author object -> its name `{name}` (the object is kept in `expert.{EXT_BUZZ}.manifest.author`)"),
                );
                t.insert("author".into(), name.into());
            }
        }
        _ => {}
    }
    if let Some(Value::Array(k)) = m.get("keywords") {
        t.insert("tags".into(), Value::Array(k.clone()));
    }
    if !recorded {
        let title = str_of(m, "name");
        if !title.is_empty() {
            t.insert("display_name".into(), json!({ "en": title }));
        }
    }
}

/// Manifest keys with no expert slot, carried in `expert.x-buzz.manifest`; a pack converted from
/// scratch records the whole manifest.
fn carry_manifest(
    m: &Map<String, Value>,
    recorded: bool,
    buzz: &mut Map<String, Value>,
    report: &mut Report,
) {
    let extra: Vec<&String> = m
        .keys()
        .filter(|k| !MAPPED_KEYS.contains(&k.as_str()) && k.as_str() != EXT_EXPERT)
        .collect();
    for key in &extra {
        report.reinterpreted(
            "carried-in-extension",
            convert_kit::pack::MANIFEST,
            key,
            format!("`{key}` has no expert slot; carried in `expert.{EXT_BUZZ}.manifest`"),
        );
    }
    if !recorded || !extra.is_empty() {
        let mut kept = m.clone();
        for key in [
            "personas",
            "mcp_config",
            "hooks_config",
            "pack_instructions",
            EXT_EXPERT,
        ] {
            kept.remove(key);
        }
        crate::put_exact(buzz, "manifest", Value::Object(kept));
    }
}

/// An agent recorded in `x-expert.agents.<persona>`, with the persona's current values laid over
/// it. `None` when the record is unusable (the caller maps the persona afresh).
fn restore(
    record: &Map<String, Value>,
    persona: &Persona,
    soul: &str,
    taken: &[&str],
) -> Option<(usize, Agent)> {
    let mut table = record.get("table")?.as_object()?.clone();
    let name = str_of(&table, "name").to_string();
    if !is_safe_segment(&name) || taken.contains(&name.as_str()) {
        return None;
    }
    let synthesised: Vec<&str> = record
        .get("synthesised")
        .and_then(Value::as_array)
        .map(|s| s.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let display = persona.str_field("display_name");
    if !synthesised.contains(&"display_name")
        && !display.is_empty()
        && str_of(&table, "display_name") != display
    {
        table.insert("display_name".into(), display.into());
    }
    let mut partial = record.get("partial").and_then(Value::as_object).cloned();
    let model = persona.str_field("model");
    if !model.is_empty() {
        let preferred = strip_provider(model);
        let current = partial
            .as_ref()
            .and_then(|p| p.get("model"))
            .and_then(|m| m.get("preferred"))
            .and_then(Value::as_str);
        // The value as the expert wrote it (`haiku`) stays while it still maps to the persona's.
        let same =
            current.is_some_and(|c| c == preferred || convert_kit::models::maps_to(c, model));
        if !same {
            let p = partial.get_or_insert_with(Map::new);
            let section = p.entry("model").or_insert_with(|| json!({}));
            if let Value::Object(section) = section {
                section.insert("preferred".into(), preferred.into());
            }
        }
    }
    let soul_file = record
        .get("soul_file")
        .and_then(Value::as_str)
        .filter(|f| *f == "soul.md" || *f == "SOUL.md")
        .unwrap_or("soul.md")
        .to_string();
    let order = record
        .get("order")
        .and_then(Value::as_u64)
        .unwrap_or(u64::MAX) as usize;
    Some((
        order,
        Agent {
            table,
            soul_file,
            soul: soul.to_string(),
            partial,
            mcp: record.get("mcp").cloned(),
            files: Vec::new(),
        },
    ))
}

/// A persona mapped afresh: the first root is `main`, every later persona a `worker` reporting to
/// it.
fn new_agent(
    persona: &Persona,
    index: usize,
    soul: &str,
    main: Option<&str>,
    taken: &[&str],
    shared: &Shared,
    report: &mut Report,
) -> Agent {
    let file = persona.file.as_str();
    let raw = persona.name();
    let base =
        slug::normalise(raw, Rules::DuDuClaw).unwrap_or_else(|| format!("agent-{}", index + 1));
    let name = unique(&base, taken);
    if name != raw {
        report.normalised("name-normalised", file, "name", format!("{raw} -> {name}"));
    }
    let mut table = Map::new();
    table.insert("name".into(), name.clone().into());
    let display = persona.str_field("display_name");
    if !display.is_empty() {
        table.insert("display_name".into(), display.into());
    }
    match main {
        None => {
            table.insert("role".into(), "main".into());
            table.insert("reports_to".into(), "".into());
            report.synthesised(
                "role-synthesised",
                MANIFEST,
                &format!("expert.agents.{index}.role"),
                format!("`{name}` (the first persona) is the `main` agent"),
            );
        }
        Some(main) => {
            table.insert("role".into(), "worker".into());
            table.insert("reports_to".into(), main.into());
            report.synthesised(
                "role-synthesised",
                MANIFEST,
                &format!("expert.agents.{index}.role"),
                format!("`{name}` is a `worker` reporting to `{main}` (persona packs are flat)"),
            );
        }
    }
    let skills: Vec<Value> = persona
        .fields
        .get("skills")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(|s| shared.skill_name(s))
        .filter(|s| Some(s.as_str()) != shared.wiki)
        .map(Value::from)
        .collect();
    if !skills.is_empty() {
        table.insert("skills".into(), Value::Array(skills));
    }
    Agent {
        table,
        soul_file: "soul.md".into(),
        soul: soul.to_string(),
        partial: new_partial(persona, shared.defaults_model, report),
        mcp: new_mcp(persona, shared.pack_mcp, report),
        files: Vec::new(),
    }
}

/// `agent.partial.toml` of a new agent: its preferred model (the persona's, else the pack
/// default), without the provider.
fn new_partial(
    persona: &Persona,
    defaults_model: Option<&str>,
    report: &mut Report,
) -> Option<Map<String, Value>> {
    let file = persona.file.as_str();
    let model = match persona.str_field("model") {
        "" => defaults_model.inspect(|m| {
            report.synthesised(
                "default-applied",
                file,
                "model",
                format!("no model: the pack default `{m}` is the agent's preferred model"),
            );
        }),
        m => Some(m),
    };
    model.map(|m| {
        let preferred = strip_provider(m);
        if preferred != m {
            report.normalised("model-provider-stripped", file, "model", format!("{m} -> {preferred}"));
        }
        if !preferred.starts_with("claude") {
            report.reinterpreted("model-needs-review", file, "model", format!("`{preferred}` is not a Claude model; DuDuClaw's default runtime may not serve it"));
        }
        let mut p = Map::new();
        p.insert("model".into(), json!({ "preferred": preferred }));
        p
    })
}

/// A restored agent's `.mcp.json` gains the pack's and the persona's servers it does not have
/// (added since the expert pack was read): without them the agent would go without a server the
/// pack runs with, and nothing would say so.
fn add_servers(agent: &mut Agent, persona: &Persona, shared: &Shared, report: &mut Report) {
    let Some(wanted) = new_mcp(persona, shared.pack_mcp, report) else {
        return;
    };
    let mcp = agent.mcp.get_or_insert_with(|| json!({ "mcpServers": {} }));
    let Some(Value::Object(have)) = mcp.get_mut("mcpServers") else {
        return; // a file the record keeps as it was (reported when it was read)
    };
    let mut added = Vec::new();
    for (name, config) in wanted["mcpServers"].as_object().into_iter().flatten() {
        if !have.contains_key(name) {
            have.insert(name.clone(), config.clone());
            added.push(name.clone());
        }
    }
    if !added.is_empty() {
        report.reinterpreted(
            "mcp-added",
            &persona.file,
            "mcp_servers",
            format!(
                "agent `{}` gets the MCP server(s) {} it did not have when the expert pack was read",
                agent.name(),
                added.join(", ")
            ),
        );
    }
}

/// `.mcp.json` of a new agent: the pack's servers and the persona's own.
fn new_mcp(persona: &Persona, pack_mcp: &Map<String, Value>, report: &mut Report) -> Option<Value> {
    let mut servers = pack_mcp.clone();
    for item in persona
        .fields
        .get("mcp_servers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let Some(item) = item.as_object() else {
            continue;
        };
        let Some(server) = item.get("name").and_then(Value::as_str) else {
            report.lost(
                "mcp-server-invalid",
                &persona.file,
                "mcp_servers",
                "an MCP server entry without a name",
            );
            continue;
        };
        let mut config = item.clone();
        config.remove("name");
        servers.insert(server.to_string(), Value::Object(config));
    }
    (!servers.is_empty()).then(|| json!({ "mcpServers": servers }))
}

/// `base`, or `base-2`, `base-3`, … when taken.
fn unique(base: &str, taken: &[&str]) -> String {
    let mut name = base.to_string();
    let mut n = 2;
    while taken.contains(&name.as_str()) {
        name = format!("{base}-{n}");
        n += 1;
    }
    name
}

/// The persona's fields with no expert slot, reported; `Some` with the whole persona record
/// (`file` and every field) when there is any.
fn persona_extras(
    persona: &Persona,
    record: Option<&Map<String, Value>>,
    report: &mut Report,
) -> Option<Map<String, Value>> {
    let synthesised: Vec<&str> = record
        .and_then(|r| r.get("synthesised"))
        .and_then(Value::as_array)
        .map(|s| s.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let extras: Vec<&String> = persona
        .fields
        .keys()
        .filter(|k| !MAPPED_FIELDS.contains(&k.as_str()) && !synthesised.contains(&k.as_str()))
        .collect();
    if extras.is_empty() {
        return None;
    }
    for key in &extras {
        let code = if key.as_str() == "hooks" {
            "hooks-quarantined"
        } else {
            "carried-in-extension"
        };
        report.reinterpreted(
            code,
            &persona.file,
            key,
            format!("`{key}` has no expert slot; carried in `expert.{EXT_BUZZ}.personas`"),
        );
    }
    let mut out = Map::new();
    out.insert("file".into(), persona.file.clone().into());
    crate::put_exact(&mut out, "fields", Value::Object(persona.fields.clone()));
    Some(out)
}

/// Files of the input that the pack model does not hold, as (expert path, bytes, came from an
/// expert pack). Files an expert pack carried under `x-expert/` go back to their original paths.
fn carried_files(
    input: &Path,
    pack: &Pack,
    ext: &Map<String, Value>,
) -> Result<Vec<(String, Vec<u8>, bool)>, String> {
    let mut consumed: Vec<String> = vec![convert_kit::pack::MANIFEST.to_string()];
    consumed.extend(pack.personas.iter().map(|p| p.file.clone()));
    for key in ["mcp_config", "hooks_config", "pack_instructions"] {
        if let Some(path) = pack.manifest.get(key).and_then(Value::as_str) {
            consumed.push(path.trim_start_matches("./").to_string());
        }
    }
    consumed.extend([".mcp.json".to_string(), "hooks/hooks.json".to_string()]);
    consumed.extend(pack.hook_files.iter().map(|(p, _)| p.clone()));
    let recorded: Vec<&str> = ext
        .get("files")
        .and_then(Value::as_array)
        .map(|f| f.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut out = Vec::new();
    let mut total = 0usize;
    for file in tree::walk(input, "")? {
        if consumed.contains(&file) || file.starts_with("skills/") {
            continue;
        }
        let bytes = tree::read_bytes(input, &file)?;
        total += bytes.len();
        if total > 64 * 1024 * 1024 {
            return Err("the pack's other files are larger than 64 MiB".into());
        }
        match file.strip_prefix(&format!("{EXT_FILES}/")) {
            Some(original) if recorded.contains(&original) => {
                out.push((original.to_string(), bytes, true));
            }
            _ => out.push((file, bytes, false)),
        }
    }
    Ok(out)
}

/// Adds every `${VAR}` named in the agents' `.mcp.json` files to `requires.env`.
fn add_required_env(expert: &mut Expert, report: &mut Report) {
    let mut names: Vec<String> = Vec::new();
    for agent in &expert.agents {
        if let Some(mcp) = &agent.mcp {
            collect_vars(mcp, &mut names);
        }
    }
    let requires = expert.table.entry("requires").or_insert_with(|| json!({}));
    let Value::Object(requires) = requires else {
        return;
    };
    let env = requires.entry("env").or_insert_with(|| json!([]));
    let Value::Array(env) = env else { return };
    let mut added = Vec::new();
    for name in names {
        if !env.iter().any(|v| v.as_str() == Some(&name)) {
            env.push(Value::from(name.clone()));
            added.push(name);
        }
    }
    if env.is_empty() {
        requires.remove("env");
    }
    if requires.is_empty() {
        expert.table.remove("requires");
    }
    if !added.is_empty() {
        report.synthesised(
            "requires-env-derived",
            MANIFEST,
            "expert.requires.env",
            format!(
                "environment variables named by the MCP servers: {}",
                added.join(", ")
            ),
        );
    }
}

fn collect_vars(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::String(s) => {
            let mut rest = s.as_str();
            while let Some(at) = rest.find("${") {
                rest = &rest[at + 2..];
                let end = rest.find(['}', ':']).unwrap_or(rest.len());
                let name = &rest[..end];
                let valid = name
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                    && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
                if valid && !out.iter().any(|n| n == name) {
                    out.push(name.to_string());
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| collect_vars(v, out)),
        Value::Object(map) => map.values().for_each(|v| collect_vars(v, out)),
        _ => {}
    }
}
