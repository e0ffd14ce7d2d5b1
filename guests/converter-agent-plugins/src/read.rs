//! Agent Plugins 1.0 (and the April 2026 `.plugin/plugin.json` draft) -> persona pack.
//!
//! A plugin written by [`crate::write`] carries its pack in apiary's extension namespace: the
//! pack comes back from it exactly. A plain plugin has only skills and MCP servers; a persona pack
//! needs at least one persona, so one is synthesised from the plugin's description and skills and
//! reported as such (option `persona=refuse` refuses instead), and when the plugin has nothing to
//! make a persona from (no description, skills or MCP servers) the conversion is refused.
//! OPS-only data (the slug name, other clients' extensions, an author object the pack cannot
//! hold, MCP entries apiary cannot run) goes into the pack manifest's `x-agent-plugins` key.

use std::path::Path;

use apiary_schema::manifest as keys;
use convert_kit::pack::{self, MANIFEST};
use convert_kit::slug::{self, Rules};
use convert_kit::{Map, ParseMode, Report, Value, frontmatter, tree};

use crate::mcp::{self, List};
use crate::model::{
    self, MCP_SCHEMA, NAMESPACE, OLD_SCHEMAS, OPS_KEYS, PACK_KEY, PLUGIN_SCHEMA, SAME_FIELDS,
    STRING_FIELDS,
};

/// Most personas synthesised from draft agent files.
const MAX_AGENTS: usize = 500;

/// Request options this direction reads.
#[derive(Debug, Default, Clone, Copy)]
pub struct Options {
    /// Refuse a plugin without personas instead of synthesising one.
    pub refuse_synthesis: bool,
}

/// What the output pack is built from, whatever the input layout.
#[derive(Default)]
struct Build {
    manifest: Map<String, Value>,
    /// The `x-agent-plugins` block.
    back: Map<String, Value>,
    /// Skill directory names written under `skills/`.
    skills: Vec<(String, String)>,
    servers: Vec<(String, Map<String, Value>)>,
    /// Input paths already carried (not copied again as plain files).
    consumed: Vec<String>,
    /// Directories copied as they are (skills), input path -> output path.
    copies: Vec<(String, String)>,
}

fn strip(path: &str) -> String {
    path.trim_start_matches("./")
        .trim_end_matches('/')
        .to_string()
}

/// Where the OPS manifest is and how sure we are it is one.
pub fn detect_ops(input: &Path) -> Option<(f32, String)> {
    let manifest = tree::read_json(input, "plugin.json").ok()?;
    let schema = manifest.get("$schema").and_then(Value::as_str);
    Some(match schema {
        Some(PLUGIN_SCHEMA) => (1.0, format!("plugin.json with $schema {PLUGIN_SCHEMA}")),
        Some(s) if OLD_SCHEMAS.contains(&s) => (
            0.4,
            format!("plugin.json with the pre-release $schema {s} (not convertible)"),
        ),
        _ if manifest.is_object() && manifest.get("name").is_some() => (
            0.2,
            "plugin.json without the Agent Plugins $schema".to_string(),
        ),
        _ => return None,
    })
}

/// Whether the input is the April 2026 draft layout (`.plugin/plugin.json` without `personas`).
pub fn detect_draft(input: &Path) -> Option<(f32, String)> {
    let manifest = tree::read_json(input, MANIFEST).ok()?;
    let object = manifest.as_object()?;
    if object.contains_key("personas") {
        return None;
    }
    Some((
        0.9,
        format!("{MANIFEST} without `personas` (Open Plugin Spec April 2026 draft)"),
    ))
}

/// Agent Plugins 1.0 -> persona pack.
pub fn ops_to_pack(input: &Path, output: &Path, options: Options) -> Result<Report, String> {
    let mut report = Report::default();
    let top = match tree::read_json(input, "plugin.json")? {
        Value::Object(map) => map,
        _ => return Err("plugin.json is not a JSON object".into()),
    };
    check_schema(&top)?;
    let author = check_manifest(&top)?;
    for key in top.keys().filter(|k| !OPS_KEYS.contains(&k.as_str())) {
        report.lost(
            "unknown-field",
            "plugin.json",
            key,
            format!(
                "`{key}` is not an Agent Plugins field; OPS hosts ignore it and so does the pack"
            ),
        );
    }
    let mut build = Build::default();
    let ours = extensions(&top, &mut build, &mut report);

    // Skills and MCP first: a synthesised persona lists them.
    read_skills(input, &["skills".to_string()], &mut build, &mut report);
    let mut previous = Map::new();
    let ext = match ours {
        Some(Value::Object(ext)) => Some(ext),
        Some(_) => {
            report.lost(
                "extensions-ignored",
                "plugin.json",
                &format!("extensions.{NAMESPACE}"),
                "apiary's namespace is not an object; ignored",
            );
            None
        }
        None => None,
    };
    if let Some(Value::Object(kept)) = ext.as_ref().and_then(|e| e.get("mcp_servers")) {
        previous = kept.clone();
    }
    read_ops_mcp(input, &previous, &mut build, &mut report);
    read_claude_style_mcp(input, &mut build, &mut report);

    match ext {
        Some(ext) => restore_pack(input, output, &top, author, ext, &mut build, &mut report)?,
        None => {
            if options.refuse_synthesis {
                return Err(format!(
                    "plugin.json has no extensions.{NAMESPACE} block, so it holds no personas (option persona=refuse)"
                ));
            }
            plain_manifest(&top, author, &mut build, &mut report);
            synthesise_persona(output, &top, &mut build, &mut report)?;
        }
    }
    let skip = |p: &str| {
        p == "plugin.json"
            || p == "mcp.json"
            || p.starts_with("skills/")
            || p.starts_with(&format!("{NAMESPACE}/"))
    };
    finish(input, output, build, &skip, &mut report)?;
    Ok(report)
}

/// Only Agent Plugins 1.0.0's `$schema` is read.
fn check_schema(top: &Map<String, Value>) -> Result<(), String> {
    match top.get("$schema").and_then(Value::as_str) {
        Some(PLUGIN_SCHEMA) => Ok(()),
        Some(s) if OLD_SCHEMAS.contains(&s) => Err(format!(
            "plugin.json targets the pre-release identifier {s}; only Agent Plugins 1.0.0 ({PLUGIN_SCHEMA}) is supported"
        )),
        Some(s) => Err(format!(
            "plugin.json: unsupported $schema `{s}` (expected {PLUGIN_SCHEMA})"
        )),
        None => Err("plugin.json has no $schema, which Agent Plugins requires".into()),
    }
}

/// Fatal schema violations make OPS hosts reject the plugin: refuses with the list. Returns the
/// author object.
fn check_manifest(top: &Map<String, Value>) -> Result<Option<Map<String, Value>>, String> {
    let mut fatal = Vec::new();
    let name = top.get("name").and_then(Value::as_str).unwrap_or_default();
    if !model::valid_plugin_name(name) {
        let shown = top
            .get("name")
            .map(|n| crate::clip(&n.to_string(), 80))
            .unwrap_or_default();
        fatal.push(format!(
            "`name` breaks the OPS name rule (1-64 of [a-z0-9.-]): {shown}"
        ));
    }
    for key in STRING_FIELDS {
        if top.get(*key).is_some_and(|v| !v.is_string()) {
            fatal.push(format!("`{key}` is not a string"));
        }
    }
    let author = match top.get("author") {
        None => None,
        Some(Value::Object(a))
            if a.iter()
                .all(|(k, v)| ["name", "email", "url"].contains(&k.as_str()) && v.is_string()) =>
        {
            Some(a.clone())
        }
        Some(_) => {
            fatal.push("`author` is not an object of string name/email/url".into());
            None
        }
    };
    if top
        .get("keywords")
        .is_some_and(|v| model::string_list(v).is_none())
    {
        fatal.push("`keywords` is not a list of strings".into());
    }
    if !fatal.is_empty() {
        return Err(format!(
            "plugin.json breaks Agent Plugins 1.0 (hosts reject it): {}",
            fatal.join("; ")
        ));
    }
    Ok(author)
}

/// `extensions`: other clients' namespaces kept in the pack's block; returns apiary's own.
fn extensions(top: &Map<String, Value>, build: &mut Build, report: &mut Report) -> Option<Value> {
    let mut extensions = match top.get("extensions") {
        None => Map::new(),
        Some(Value::Object(map)) => map.clone(),
        Some(_) => {
            report.lost(
                "extensions-ignored",
                "plugin.json",
                "extensions",
                "`extensions` is not an object; ignored as OPS requires",
            );
            Map::new()
        }
    };
    let ours = extensions.remove(NAMESPACE);
    for (ns, value) in &extensions {
        if !value.is_object() {
            report.lost(
                "extensions-ignored",
                "plugin.json",
                &format!("extensions.{ns}"),
                "an extension namespace whose value is not an object; ignored",
            );
        }
    }
    extensions.retain(|_, v| v.is_object());
    if !extensions.is_empty() {
        for ns in extensions.keys() {
            report.normalised(
                "carried-in-extension",
                "plugin.json",
                &format!("extensions.{ns}"),
                format!("another client's namespace, kept verbatim in {PACK_KEY}.extensions"),
            );
        }
        build
            .back
            .insert("extensions".into(), Value::Object(extensions));
    }
    ours
}

/// The pack manifest from a plugin apiary wrote: the extension block plus the OPS fields.
fn restore_pack(
    input: &Path,
    output: &Path,
    top: &Map<String, Value>,
    author: Option<Map<String, Value>>,
    mut ext: Map<String, Value>,
    build: &mut Build,
    report: &mut Report,
) -> Result<(), String> {
    let mut m = restore_fields(top, author, &mut ext, build, report);
    // Persona files, instructions, hooks: the namespace directory is the pack's own tree.
    let personas = ext
        .get("personas")
        .and_then(model::string_list)
        .filter(|p| !p.is_empty())
        .ok_or_else(|| {
            format!("extensions.{NAMESPACE}.personas is missing or not a list of persona files")
        })?;
    for file in &personas {
        tree::join(input, file).map_err(|e| format!("extensions.{NAMESPACE}.personas: {e}"))?;
        let file = strip(file);
        if !tree::is_file(input, &format!("{NAMESPACE}/{file}")) {
            return Err(format!("persona file {NAMESPACE}/{file} is missing"));
        }
    }
    for key in [keys::PACK_INSTRUCTIONS, keys::HOOKS_CONFIG] {
        if let Some(file) = ext.get(key).and_then(Value::as_str)
            && !tree::is_file(input, &format!("{NAMESPACE}/{}", strip(file)))
        {
            report.lost(
                "missing-file",
                &format!("{NAMESPACE}/{file}"),
                "",
                format!("`{key}` names a file the plugin does not have"),
            );
            ext.remove(key);
        }
    }
    if tree::is_dir(input, NAMESPACE) {
        tree::copy_dir(input, NAMESPACE, output, "")?;
    }
    restore_skill_dirs(&mut ext, build);
    m.extend(ext);
    build.manifest = m;
    Ok(())
}

/// Skill folders the writer renamed to their `name` go back to the pack's folder names.
fn restore_skill_dirs(ext: &mut Map<String, Value>, build: &mut Build) {
    let Some(Value::Object(renamed)) = ext.remove(model::RENAMED_SKILLS) else {
        return;
    };
    for (_, target) in build.copies.iter_mut() {
        let name = target.strip_prefix("skills/").unwrap_or_default();
        // One folder name, nothing that climbs or nests.
        if let Some(old) = renamed.get(name).and_then(Value::as_str)
            && !old.is_empty()
            && !old.contains(['/', '\\'])
            && old != ".."
            && old != "."
        {
            *target = format!("skills/{old}");
        }
    }
}

/// The manifest fields the pack had, from the extension block, with the OPS fields (which the
/// plugin's owner may have changed since) laid over them; taken out of `ext`.
fn restore_fields(
    top: &Map<String, Value>,
    author: Option<Map<String, Value>>,
    ext: &mut Map<String, Value>,
    build: &mut Build,
    report: &mut Report,
) -> Map<String, Value> {
    let slug = top.get("name").and_then(Value::as_str).unwrap_or_default();
    let mut m = Map::new();
    m.insert(
        "$schema".into(),
        ext.remove("$schema").unwrap_or_else(|| pack::SCHEMA.into()),
    );
    match ext.remove("id") {
        Some(id) => {
            m.insert("id".into(), id);
        }
        None => {
            m.insert("id".into(), synthesised_id(top).into());
            report.synthesised(
                "id-synthesised",
                MANIFEST,
                "id",
                "the extension block has no pack id; derived one",
            );
        }
    }
    let title = ext.remove("name").unwrap_or_else(|| slug.into());
    if title.as_str().and_then(model::plugin_slug).as_deref() != Some(slug) {
        // The plugin was renamed after it was written: keep the new slug for the way back.
        build.back.insert("name".into(), slug.into());
    }
    m.insert("name".into(), title);
    for key in [keys::VERSION, keys::DESCRIPTION] {
        if let Some(v) = top.get(key).or_else(|| ext.get(key)) {
            m.insert(key.into(), v.clone());
        }
        ext.remove(key);
    }
    let kept_author = ext.remove("author");
    match (&author, kept_author) {
        (Some(a), Some(kept)) if model::ops_author(&kept).as_ref() == Some(a) => {
            m.insert("author".into(), kept);
        }
        (None, Some(kept)) if model::ops_author(&kept).is_none() => {
            m.insert("author".into(), kept);
        }
        (Some(a), _) => put_author(a, &mut m, build, report),
        (None, _) => {}
    }
    for &key in SAME_FIELDS {
        if let Some(v) = top.get(key).or_else(|| ext.get(key)) {
            m.insert(key.into(), v.clone());
        }
        ext.remove(key);
    }
    ext.remove("mcp_servers");
    m
}

fn put_author(
    a: &Map<String, Value>,
    m: &mut Map<String, Value>,
    build: &mut Build,
    report: &mut Report,
) {
    match model::pack_author(a) {
        Some(v) => {
            if v.is_string() {
                report.normalised(
                    "author-to-string",
                    "plugin.json",
                    "author",
                    format!("author {{name}} -> {v}"),
                );
            }
            m.insert("author".into(), v);
        }
        None => {
            build.back.insert("author".into(), Value::Object(a.clone()));
            report.normalised(
                "carried-in-extension",
                "plugin.json",
                "author",
                format!(
                    "an author without a name has no persona pack form; kept in {PACK_KEY}.author"
                ),
            );
        }
    }
}

/// A pack id from the plugin's homepage or repository host and path, else a local one.
fn synthesised_id(top: &Map<String, Value>) -> String {
    let name = top.get("name").and_then(Value::as_str).unwrap_or("plugin");
    let name = slug::normalise(name, Rules::AgentPlugins).unwrap_or_else(|| "plugin".into());
    for key in ["repository", "homepage"] {
        let Some(url) = top.get(key).and_then(Value::as_str) else {
            continue;
        };
        let Some((_, rest)) = url.split_once("://") else {
            continue;
        };
        let mut parts = rest.split(['/', '?', '#']).filter(|p| !p.is_empty());
        let Some(host) = parts.next() else { continue };
        let host = host
            .rsplit('@')
            .next()
            .unwrap_or(host)
            .split(':')
            .next()
            .unwrap_or(host);
        let mut id: Vec<String> = host
            .split('.')
            .rev()
            .filter_map(|p| slug::normalise(p, Rules::Skill))
            .collect();
        id.extend(
            parts
                .take(2)
                .filter_map(|p| slug::normalise(p.trim_end_matches(".git"), Rules::Skill)),
        );
        if id.len() >= 2 {
            // `github.com/acme/review-tools` already names `acme.review-tools`.
            let last = name.rsplit('.').next().unwrap_or(&name);
            if id.last().map(String::as_str) != Some(last) {
                id.push(name.replace('.', "-"));
            }
            let id = id.join(".");
            if id.len() <= 128 {
                return id;
            }
        }
    }
    format!("local.agent-plugins.{name}")
}

/// The pack manifest of a plain plugin (no apiary namespace).
fn plain_manifest(
    top: &Map<String, Value>,
    author: Option<Map<String, Value>>,
    build: &mut Build,
    report: &mut Report,
) {
    let name = top.get("name").and_then(Value::as_str).unwrap_or_default();
    let mut m = Map::new();
    m.insert("$schema".into(), pack::SCHEMA.into());
    let id = synthesised_id(top);
    report.synthesised(
        "id-synthesised",
        MANIFEST,
        "id",
        format!("OPS has no pack id: `{id}`"),
    );
    m.insert("id".into(), id.into());
    m.insert("name".into(), name.into());
    build.back.insert("name".into(), name.into());
    let mut synthesised = vec![Value::from("id")];
    match top.get("version") {
        Some(v) => {
            m.insert("version".into(), v.clone());
        }
        None => {
            m.insert("version".into(), "0.0.0".into());
            synthesised.push("version".into());
            report.synthesised(
                "default-applied",
                MANIFEST,
                "version",
                "no version; a persona pack needs one: 0.0.0",
            );
        }
    }
    if let Some(v) = top.get("description") {
        m.insert("description".into(), v.clone());
    }
    if let Some(a) = &author {
        put_author(a, &mut m, build, report);
    }
    for &key in SAME_FIELDS {
        if let Some(v) = top.get(key) {
            m.insert(key.into(), v.clone());
        }
    }
    build
        .back
        .insert("synthesised".into(), Value::Array(synthesised));
    build.manifest = m;
}

/// One persona made from the plugin's description, skills and MCP servers.
fn synthesise_persona(
    output: &Path,
    top: &Map<String, Value>,
    build: &mut Build,
    report: &mut Report,
) -> Result<(), String> {
    let plugin = top.get("name").and_then(Value::as_str).unwrap_or_default();
    let description = top
        .get("description")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|d| !d.is_empty());
    if description.is_none() && build.skills.is_empty() && build.servers.is_empty() {
        return Err(format!(
            "`{plugin}` has no personas, no description, no skills and no MCP servers: nothing to make a persona from"
        ));
    }
    let name = slug::normalise(plugin, Rules::Persona).unwrap_or_else(|| "assistant".into());
    let display: String = name
        .split(['-', '_', '.'])
        .filter(|w| !w.is_empty())
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_uppercase().chain(c).collect::<String>())
                .unwrap_or_default()
        })
        .collect::<Vec<_>>()
        .join(" ");
    let skill_list: Vec<String> = build
        .skills
        .iter()
        .map(|(n, d)| format!("- {n}: {d}"))
        .collect();
    let description = description.map(str::to_string).unwrap_or_else(|| {
        format!(
            "Works with the {} skill(s) of the {plugin} plugin",
            build.skills.len()
        )
    });
    let mut fields = Map::new();
    fields.insert("name".into(), name.clone().into());
    fields.insert("display_name".into(), display.clone().into());
    fields.insert("description".into(), description.clone().into());
    if !build.skills.is_empty() {
        let refs: Vec<Value> = build
            .skills
            .iter()
            .map(|(n, _)| format!("./skills/{n}/").into())
            .collect();
        fields.insert("skills".into(), Value::Array(refs));
    }
    let mut body = format!("You are {display}. {description}\n");
    if !skill_list.is_empty() {
        body.push_str(&format!(
            "\nLoad the skill that fits the task:\n{}\n",
            skill_list.join("\n")
        ));
    }
    if !build.servers.is_empty() {
        let names: Vec<&str> = build.servers.iter().map(|(n, _)| n.as_str()).collect();
        body.push_str(&format!("\nMCP servers available: {}.\n", names.join(", ")));
    }
    let file = format!("agents/{name}.persona.md");
    tree::write(output, &file, frontmatter::render(&fields, &body))?;
    report.synthesised(
        "persona-synthesised",
        &file,
        "",
        format!("the plugin has no personas; `{name}` was made from its description, skills and MCP servers"),
    );
    if let Some(Value::Array(list)) = build.back.get_mut("synthesised") {
        list.push(file.clone().into());
    }
    build
        .manifest
        .insert("personas".into(), Value::Array(vec![file.into()]));
    Ok(())
}

/// Reads a skill's `SKILL.md`: a usable one joins `build.skills` (name, short description);
/// otherwise, why it is not usable.
fn read_skill_md(input: &Path, md: &str, name: &str, build: &mut Build) -> Option<String> {
    let text = match tree::read(input, md) {
        Err(e) => return Some(e),
        Ok(text) => text,
    };
    let fm = frontmatter::parse(&text);
    let has = |k: &str| {
        fm.fields
            .get(k)
            .and_then(Value::as_str)
            .is_some_and(|s| !s.trim().is_empty())
    };
    if fm.mode != ParseMode::Strict {
        Some("SKILL.md frontmatter is missing or not YAML".to_string())
    } else if !has("name") || !has("description") {
        Some("SKILL.md lacks `name` or `description`".to_string())
    } else {
        let description = fm.fields["description"].as_str().unwrap_or_default();
        let short: String = description.chars().take(200).collect();
        build
            .skills
            .push((name.to_string(), short.replace('\n', " ")));
        None
    }
}

/// Copies the valid skills under each of `roots` (a skills folder, or a skill folder itself) to
/// `skills/<name>/`; a skill the persona pack cannot load is reported and left out.
fn read_skills(input: &Path, roots: &[String], build: &mut Build, report: &mut Report) {
    for root in roots {
        let root = strip(root);
        if tree::join(input, &root).is_err() {
            report.lost(
                "path-outside",
                &root,
                "",
                "a skills path that leaves the plugin; ignored",
            );
            continue;
        }
        let dirs: Vec<String> = if tree::is_file(input, &format!("{root}/SKILL.md")) {
            vec![root.clone()]
        } else {
            tree::list(input, &root)
                .into_iter()
                .map(|n| format!("{root}/{n}"))
                .filter(|d| tree::is_dir(input, d))
                .collect()
        };
        for dir in dirs {
            let name = dir.rsplit('/').next().unwrap_or(&dir).to_string();
            let md = format!("{dir}/SKILL.md");
            if !tree::is_file(input, &md) {
                report.lost(
                    "skill-invalid",
                    &dir,
                    "",
                    "a skills/ folder without SKILL.md; not a skill, not carried",
                );
                continue;
            }
            if let Some(why) = read_skill_md(input, &md, &name, build) {
                report.lost(
                    "skill-invalid",
                    &md,
                    "",
                    format!(
                        "{why}: OPS hosts skip it and a persona pack cannot load it; not carried"
                    ),
                );
                continue;
            }
            if build.skills.iter().filter(|(n, _)| *n == name).count() > 1 {
                build.skills.pop();
                report.lost(
                    "skill-duplicate",
                    &dir,
                    "",
                    format!("a second skill named `{name}`; not carried"),
                );
                continue;
            }
            let target = format!("skills/{name}");
            if dir != target {
                report.normalised("skill-moved", &dir, "", format!("{dir} -> {target}"));
            }
            build.copies.push((dir, target));
        }
    }
}

/// Reads OPS `mcp.json` into pack servers.
fn read_ops_mcp(
    input: &Path,
    previous: &Map<String, Value>,
    build: &mut Build,
    report: &mut Report,
) {
    let file = "mcp.json";
    if !tree::is_file(input, file) {
        // Servers kept aside that never reached mcp.json still come back.
        if !previous.is_empty() {
            add_servers(
                file,
                mcp::to_pack_list(&[], previous, &mut Map::new()),
                build,
                report,
            );
        }
        return;
    }
    let value = match tree::read_json(input, file) {
        Ok(v) => v,
        Err(e) => {
            report.lost(
                "mcp-config-invalid",
                file,
                "",
                format!("{e}; MCP is disabled for the plugin as OPS requires"),
            );
            return;
        }
    };
    let schema = value.get("$schema").and_then(Value::as_str);
    let servers = value.get("mcpServers").and_then(Value::as_object);
    let extra = value
        .as_object()
        .map(|o| o.keys().any(|k| k != "$schema" && k != "mcpServers"))
        .unwrap_or(true);
    if schema != Some(MCP_SCHEMA) || servers.is_none() || extra {
        report.lost(
            "mcp-config-invalid",
            file,
            "",
            format!("mcp.json needs exactly $schema {MCP_SCHEMA} and an mcpServers object; MCP is disabled for the plugin as OPS requires"),
        );
        return;
    }
    let mut list = Vec::new();
    for (name, config) in servers.into_iter().flatten() {
        match config {
            Value::Object(c) => list.push((name.clone(), c.clone())),
            _ => report.lost(
                "mcp-server-invalid",
                file,
                &format!("mcpServers.{name}"),
                "a server entry that is not an object; skipped",
            ),
        }
    }
    let mut kept = Map::new();
    let mapped = mcp::to_pack_list(&list, previous, &mut kept);
    add_servers(file, mapped, build, report);
    if !kept.is_empty() {
        build.back.insert("mcp_servers".into(), Value::Object(kept));
    }
}

/// A `.mcp.json` in Claude's spelling (`mcpServers` or a flat map) that many Agent Plugins
/// packages ship next to `mcp.json` for Claude Code: its servers are carried into the pack too,
/// after `mcp.json`'s (a name defined in both keeps `mcp.json`'s).
fn read_claude_style_mcp(input: &Path, build: &mut Build, report: &mut Report) {
    let file = ".mcp.json";
    if !tree::is_file(input, file) {
        return;
    }
    let servers = match tree::read_json(input, file) {
        Ok(Value::Object(mut map)) => match map.remove("mcpServers") {
            Some(Value::Object(inner)) => inner,
            Some(_) => Map::new(),
            None => map,
        },
        Ok(_) => Map::new(),
        Err(e) => {
            report.lost("mcp-config-invalid", file, "", e);
            build.consumed.push(file.into());
            return;
        }
    };
    build.consumed.push(file.into());
    for (name, config) in servers {
        let field = format!("mcpServers.{name}");
        let Value::Object(mut config) = config else {
            report.lost("mcp-server-invalid", file, &field, "not an object; skipped");
            continue;
        };
        if build.servers.iter().any(|(n, _)| *n == name) {
            report.normalised(
                "mcp-duplicate",
                file,
                &field,
                format!("server `{name}` is also in mcp.json, whose definition is kept"),
            );
            continue;
        }
        let kind = config
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_ascii_lowercase();
        if matches!(kind.as_str(), "sse" | "ws") {
            report.lost(
                "mcp-transport-unsupported",
                file,
                &field,
                format!("the `{kind}` transport, which apiary's runtimes reject; not carried"),
            );
            continue;
        }
        let vars = convert_kit::vars::host_only(&Value::Object(config.clone()).to_string());
        if !vars.is_empty() {
            report.lost(
                "mcp-variable-unsupported",
                file,
                &field,
                format!(
                    "server `{name}` uses {}, which the plugin host sets but apiary does not: kept as written, the server will not start until it is edited",
                    vars.join(", ")
                ),
            );
        }
        for key in mcp::unknown_pack_keys(&config) {
            config.remove(&key);
            report.lost(
                "field-unsupported",
                file,
                &format!("{field}.{key}"),
                format!("persona pack MCP servers have no `{key}`; not carried"),
            );
        }
        report.normalised(
            "mcp-carried",
            file,
            &field,
            format!("server `{name}` from Claude's .mcp.json is a pack server; on the way back it is written to mcp.json"),
        );
        build.servers.push((name, config));
    }
}

fn add_servers(file: &str, mapped: Vec<mcp::Mapped>, build: &mut Build, report: &mut Report) {
    for m in mapped {
        for n in &m.notes {
            let field = format!("mcpServers.{}.{}", m.name, n.field);
            let field = field.trim_end_matches('.');
            match n.list {
                List::Synthesised => report.synthesised(n.code, file, field, n.message.clone()),
                List::Normalised => report.normalised(n.code, file, field, n.message.clone()),
                List::Reinterpreted => report.reinterpreted(n.code, file, field, n.message.clone()),
            }
        }
        match m.config {
            Some(c) => build.servers.push((m.name, c)),
            // The personas go without the server: lost, though the way back restores it.
            None => report.lost(
                "mcp-server-extension-only",
                file,
                &format!("mcpServers.{}", m.name),
                format!(
                    "server `{}` cannot run under apiary ({}); kept in {PACK_KEY}.mcp_servers only",
                    m.name,
                    m.refused.unwrap_or_default()
                ),
            ),
        }
    }
}

/// Writes skills, `.mcp.json`, plain files and the manifest, then reads the result back as a
/// persona pack (refusing what does not load) and rewrites lenient persona frontmatter strictly.
fn finish(
    input: &Path,
    output: &Path,
    mut build: Build,
    skip: &dyn Fn(&str) -> bool,
    report: &mut Report,
) -> Result<(), String> {
    let mut consumed = build.consumed.clone();
    for (from, to) in &build.copies {
        tree::copy_dir(input, from, output, to)?;
        consumed.push(from.clone());
    }
    if !build.servers.is_empty() {
        let servers: Map<String, Value> = build
            .servers
            .iter()
            .map(|(n, c)| (n.clone(), Value::Object(c.clone())))
            .collect();
        tree::write_json(
            output,
            ".mcp.json",
            &convert_kit::json!({ "mcpServers": servers }),
        )?;
        build
            .manifest
            .insert("mcp_config".into(), ".mcp.json".into());
    }
    // Plain files (README, LICENSE, other clients' directories) come along where they were.
    for path in tree::walk(input, "")? {
        if skip(&path)
            || consumed
                .iter()
                .any(|c| path == *c || path.starts_with(&format!("{c}/")))
        {
            continue;
        }
        if path.starts_with(".plugin/") || path == ".mcp.json" || tree::is_file(output, &path) {
            report.lost(
                "file-collides",
                &path,
                "",
                "the path is taken by the persona pack layout; not carried",
            );
            continue;
        }
        tree::write(output, &path, tree::read_bytes(input, &path)?)?;
    }
    if !build.back.is_empty() {
        build
            .manifest
            .insert(PACK_KEY.into(), Value::Object(build.back));
        report.normalised(
            "carried-in-extension",
            MANIFEST,
            PACK_KEY,
            format!("OPS data with no persona pack field is kept in the manifest's `{PACK_KEY}` key (a warning for pack validators) and restored on the way back"),
        );
    }
    tree::write_json(output, MANIFEST, &Value::Object(build.manifest))?;

    let (pack, read_report) =
        pack::Pack::read(output).map_err(|e| format!("the converted pack does not load: {e}"))?;
    if pack.personas.is_empty() {
        return Err("the converted pack has no personas".into());
    }
    for persona in &pack.personas {
        if persona.mode == ParseMode::Lenient {
            tree::write(
                output,
                &persona.file,
                frontmatter::render(&persona.fields, &persona.body),
            )?;
        }
    }
    report.extend(read_report);
    Ok(())
}

/// The April 2026 draft (`.plugin/plugin.json` without `personas`) -> persona pack.
pub fn draft_to_pack(input: &Path, output: &Path, options: Options) -> Result<Report, String> {
    let mut report = Report::default();
    let top = match tree::read_json(input, MANIFEST)? {
        Value::Object(map) => map,
        _ => return Err(format!("{MANIFEST} is not a JSON object")),
    };
    if top.contains_key("personas") {
        return Err(format!(
            "{MANIFEST} lists personas: this is a persona pack, not the draft"
        ));
    }
    let name = top
        .get("name")
        .and_then(Value::as_str)
        .filter(|n| !n.trim().is_empty())
        .ok_or_else(|| format!("{MANIFEST} has no `name`, the draft's one required field"))?;
    let mut build = Build::default();
    build.manifest = draft_manifest(&top, name, &mut build, &mut report);
    report_unknown_draft_keys(&top, &mut report);

    read_skills(
        input,
        &component_paths(&top, "skills", "skills", &mut report),
        &mut build,
        &mut report,
    );
    read_draft_mcp(input, &top, &mut build, &mut report);
    let agents = read_draft_agents(input, output, &top, &mut build, &mut report)?;
    if agents.is_empty() {
        if options.refuse_synthesis {
            return Err(
                "the draft plugin has no agents to make personas from (option persona=refuse)"
                    .into(),
            );
        }
        let mut plain = top.clone();
        plain.insert("name".into(), name.into());
        synthesise_persona(output, &plain, &mut build, &mut report)?;
    } else {
        build.manifest.insert(
            "personas".into(),
            Value::Array(agents.into_iter().map(Value::from).collect()),
        );
    }
    let skip = |p: &str| p == MANIFEST || p.starts_with("skills/");
    finish(input, output, build, &skip, &mut report)?;
    Ok(report)
}

/// The pack manifest from the draft's: an id made up, a version defaulted, fields of the wrong
/// type dropped.
fn draft_manifest(
    top: &Map<String, Value>,
    name: &str,
    build: &mut Build,
    report: &mut Report,
) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("$schema".into(), pack::SCHEMA.into());
    let id = synthesised_id(top);
    report.synthesised(
        "id-synthesised",
        MANIFEST,
        "id",
        format!("the draft has no pack id: `{id}`"),
    );
    m.insert("id".into(), id.into());
    m.insert("name".into(), name.into());
    match top.get("version").and_then(Value::as_str) {
        Some(v) => {
            m.insert("version".into(), v.into());
        }
        None => {
            m.insert("version".into(), "0.0.0".into());
            report.synthesised(
                "default-applied",
                MANIFEST,
                "version",
                "no version; a persona pack needs one: 0.0.0",
            );
        }
    }
    for key in ["description", "license", "homepage", "repository"] {
        match top.get(key) {
            Some(Value::String(s)) => {
                m.insert(key.into(), s.clone().into());
            }
            Some(_) => report.lost(
                "field-type-invalid",
                MANIFEST,
                key,
                format!("`{key}` is not a string; dropped"),
            ),
            None => {}
        }
    }
    match top.get("author") {
        Some(Value::String(s)) => {
            m.insert("author".into(), s.clone().into());
        }
        Some(Value::Object(a)) => match model::ops_author(&Value::Object(a.clone())) {
            Some(a) => put_author(&a, &mut m, build, report),
            None => report.lost(
                "field-type-invalid",
                MANIFEST,
                "author",
                "an author without string name/email/url; dropped",
            ),
        },
        Some(_) => report.lost(
            "field-type-invalid",
            MANIFEST,
            "author",
            "`author` is neither a string nor an object; dropped",
        ),
        None => {}
    }
    match top.get("keywords") {
        Some(v) if model::string_list(v).is_some() => {
            m.insert("keywords".into(), v.clone());
        }
        Some(_) => report.lost(
            "field-type-invalid",
            MANIFEST,
            "keywords",
            "`keywords` is not a list of strings; dropped",
        ),
        None => {}
    }
    m
}

/// Draft keys with no persona pack meaning (components apiary has none of, or unknown).
fn report_unknown_draft_keys(top: &Map<String, Value>, report: &mut Report) {
    let known = [
        "$schema",
        "name",
        "version",
        "description",
        "author",
        "license",
        "homepage",
        "repository",
        "keywords",
        "skills",
        "mcpServers",
        "agents",
    ];
    for (key, _) in top.iter().filter(|(k, _)| !known.contains(&k.as_str())) {
        let code = if [
            "commands",
            "rules",
            "hooks",
            "lspServers",
            "outputStyles",
            "userConfig",
        ]
        .contains(&key.as_str())
        {
            "component-unsupported"
        } else {
            "unknown-field"
        };
        report.lost(
            code,
            MANIFEST,
            key,
            format!(
                "`{key}` has no persona pack meaning; its files (if any) are copied as plain files"
            ),
        );
    }
}

/// A draft component path field (string, list of strings or `{paths: [...]}`) or its default.
fn component_paths(
    top: &Map<String, Value>,
    key: &str,
    default: &str,
    report: &mut Report,
) -> Vec<String> {
    let paths = match top.get(key) {
        None => return vec![default.to_string()],
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect(),
        Some(Value::Object(o)) => o
            .get("paths")
            .and_then(model::string_list)
            .unwrap_or_default(),
        Some(_) => {
            report.lost(
                "field-type-invalid",
                MANIFEST,
                key,
                format!("`{key}` is not a path, a list of paths or {{paths}}; ignored"),
            );
            return vec![];
        }
    };
    paths
        .into_iter()
        .filter(|p| {
            let ok = tree::join(Path::new("/"), &strip(p)).is_ok();
            if !ok {
                report.lost(
                    "path-outside",
                    MANIFEST,
                    key,
                    format!("`{p}` leaves the plugin; ignored"),
                );
            }
            ok
        })
        .collect()
}

/// The draft's MCP servers and the file they are in: inline in the manifest, else the first
/// `mcpServers` path (default `.mcp.json`) that exists.
fn draft_mcp_servers(
    input: &Path,
    top: &Map<String, Value>,
    report: &mut Report,
) -> Option<(String, Map<String, Value>)> {
    if let Some(Value::Object(inline)) = top.get("mcpServers")
        && !inline.contains_key("paths")
    {
        return Some((MANIFEST.to_string(), inline.clone()));
    }
    let files = component_paths(top, "mcpServers", ".mcp.json", report);
    let file = files
        .into_iter()
        .map(|f| strip(&f))
        .find(|f| tree::is_file(input, f))?;
    match tree::read_json(input, &file) {
        Ok(v) => match v.get("mcpServers").and_then(Value::as_object) {
            Some(s) => Some((file, s.clone())),
            None => {
                report.lost(
                    "mcp-config-invalid",
                    &file,
                    "",
                    "no `mcpServers` object; no MCP servers carried",
                );
                None
            }
        },
        Err(e) => {
            report.lost("mcp-config-invalid", &file, "", e);
            None
        }
    }
}

/// Draft MCP: a `.mcp.json`-style file (default `.mcp.json`) or an inline server map.
fn read_draft_mcp(input: &Path, top: &Map<String, Value>, build: &mut Build, report: &mut Report) {
    let Some((file, servers)) = draft_mcp_servers(input, top, report) else {
        return;
    };
    build.consumed.push(file.clone());
    for (name, config) in servers {
        let Value::Object(mut config) = config else {
            report.lost(
                "mcp-server-invalid",
                &file,
                &format!("mcpServers.{name}"),
                "not an object; skipped",
            );
            continue;
        };
        let kind = config
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_ascii_lowercase();
        if kind == "sse" {
            report.lost(
                "mcp-sse-unsupported",
                &file,
                &format!("mcpServers.{name}"),
                "the SSE transport, which apiary's runtimes reject; not carried",
            );
            continue;
        }
        let text = Value::Object(config.clone()).to_string();
        if text.contains("${PLUGIN_ROOT}") || text.contains("${CLAUDE_PLUGIN_ROOT}") {
            report.reinterpreted(
                "plugin-placeholder",
                &file,
                &format!("mcpServers.{name}"),
                "the draft's ${PLUGIN_ROOT} is a host variable; apiary reads `${...}` from its process environment instead",
            );
        }
        for key in mcp::unknown_pack_keys(&config) {
            config.remove(&key);
            report.lost(
                "field-unsupported",
                &file,
                &format!("mcpServers.{name}.{key}"),
                format!("persona pack MCP servers have no `{key}` (spec §7); not carried"),
            );
        }
        build.servers.push((name, config));
    }
}

/// Draft `agents/*.md` (name, description, body) -> persona files; returns their paths.
fn read_draft_agents(
    input: &Path,
    output: &Path,
    top: &Map<String, Value>,
    build: &mut Build,
    report: &mut Report,
) -> Result<Vec<String>, String> {
    let files = draft_agent_files(input, top, report);
    let mut personas = Vec::new();
    let mut extras = Map::new();
    for file in files.into_iter().take(MAX_AGENTS) {
        let text = match tree::read(input, &file) {
            Ok(t) => t,
            Err(e) => {
                report.lost("agent-unreadable", &file, "", e);
                continue;
            }
        };
        build.consumed.push(file.clone());
        let fm = frontmatter::parse(&text);
        if fm.mode == ParseMode::Lenient {
            report.reinterpreted(
                "lenient-frontmatter",
                &file,
                "",
                format!(
                    "frontmatter is not strict YAML ({}); read with the lenient key-line scanner",
                    fm.strict_error.as_deref().unwrap_or("parse error")
                ),
            );
        }
        let Some((original, name)) = draft_agent_name(&file, &fm, &personas, report) else {
            continue;
        };
        let fields = draft_agent_fields(&file, &fm, &original, &name, top, build, report);
        // A `model` the table mapped is the persona's; one it could not is carried.
        let mapped = fields.contains_key("model");
        let rest: Map<String, Value> = fm
            .fields
            .into_iter()
            .filter(|(k, _)| !["name", "description"].contains(&k.as_str()))
            .filter(|(k, _)| k != "model" || !mapped)
            .collect();
        for key in rest.keys() {
            report.normalised(
                "carried-in-extension",
                &file,
                key,
                format!(
                    "persona frontmatter allows no `{key}`; kept in {PACK_KEY}.agents.{name}.{key}"
                ),
            );
        }
        if !rest.is_empty() {
            extras.insert(name.clone(), Value::Object(rest));
        }
        let out = format!("agents/{name}.persona.md");
        tree::write(output, &out, frontmatter::render(&fields, &fm.body))?;
        personas.push(out);
    }
    if !extras.is_empty() {
        build.back.insert("agents".into(), Value::Object(extras));
    }
    Ok(personas)
}

/// The draft's agent files: the `agents` paths (files, or the `.md` files of directories).
fn draft_agent_files(input: &Path, top: &Map<String, Value>, report: &mut Report) -> Vec<String> {
    let mut files = Vec::new();
    for path in component_paths(top, "agents", "agents", report) {
        let path = strip(&path);
        if tree::is_file(input, &path) {
            files.push(path);
        } else if tree::is_dir(input, &path) {
            files.extend(
                tree::list(input, &path)
                    .into_iter()
                    .map(|n| format!("{path}/{n}"))
                    .filter(|f| f.ends_with(".md") && tree::is_file(input, f)),
            );
        }
    }
    files
}

/// The agent's name as written (else its file's stem) and the persona name made from it,
/// unique among `personas` (their files); `None` when nothing usable is left.
fn draft_agent_name(
    file: &str,
    fm: &frontmatter::Frontmatter,
    personas: &[String],
    report: &mut Report,
) -> Option<(String, String)> {
    let stem = file
        .rsplit('/')
        .next()
        .unwrap_or(file)
        .trim_end_matches(".md")
        .to_string();
    let original = fm
        .fields
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or(&stem)
        .to_string();
    let Some(mut name) = slug::normalise(&original, Rules::Persona) else {
        report.lost(
            "agent-unnamed",
            file,
            "name",
            format!("`{original}` gives no persona name; agent not carried"),
        );
        return None;
    };
    while personas
        .iter()
        .any(|p: &String| p == &format!("agents/{name}.persona.md"))
    {
        name.push('_');
    }
    if name != original {
        report.normalised(
            "name-normalised",
            file,
            "name",
            format!("{original} -> {name}"),
        );
    }
    Some((original, name))
}

/// The persona fields of a draft agent: name, display name (its name as written), description,
/// model, and every skill of the plugin.
fn draft_agent_fields(
    file: &str,
    fm: &frontmatter::Frontmatter,
    original: &str,
    name: &str,
    top: &Map<String, Value>,
    build: &Build,
    report: &mut Report,
) -> Map<String, Value> {
    let mut fields = Map::new();
    fields.insert("name".into(), name.into());
    fields.insert("display_name".into(), original.into());
    report.synthesised(
        "display-name-synthesised",
        file,
        "display_name",
        format!("the agent's name `{original}`"),
    );
    let description = match fm
        .fields
        .get("description")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|d| !d.is_empty())
    {
        Some(d) => d.to_string(),
        None => {
            report.synthesised(
                "description-synthesised",
                file,
                "description",
                "the agent has no description",
            );
            format!(
                "{original} (from the {} plugin)",
                top.get("name").and_then(Value::as_str).unwrap_or_default()
            )
        }
    };
    fields.insert("description".into(), description.into());
    if let Some(model) = fm.fields.get("model").and_then(Value::as_str) {
        // Through the shared model table; a value it cannot map stays in the extension.
        let kept = format!("{PACK_KEY}.agents.{name}.model");
        if let Some(id) = convert_kit::models::to_persona(model, report, file, &kept) {
            fields.insert("model".into(), id.into());
        }
    }
    if !build.skills.is_empty() {
        let refs: Vec<Value> = build
            .skills
            .iter()
            .map(|(n, _)| format!("./skills/{n}/").into())
            .collect();
        fields.insert("skills".into(), Value::Array(refs));
    }
    fields
}
