//! Persona pack -> Agent Plugins 1.0: root `plugin.json` (closed schema, slug name, author object),
//! `mcp.json` (explicit transports), `skills/` as they are, and everything OPS has no component
//! for (personas, defaults, instructions, hooks, pack id) under apiary's namespace, in the
//! manifest's `extensions` block and the namespace directory. See `model.rs` for the layout.

use std::path::Path;

use convert_kit::pack::MANIFEST;
use convert_kit::slug::{self, Rules};
use convert_kit::{Map, Pack, Report, Value, frontmatter, tree};

use crate::mcp::{self, List};
use crate::model::{
    self, MCP_SCHEMA, NAMESPACE, OPS_KEYS, PACK_FILE_KEYS, PACK_KEY, PLUGIN_SCHEMA, RENAMED_SKILLS,
    STRING_FIELDS,
};
use apiary_guest_sdk::json::object;

fn strip(path: &str) -> String {
    path.trim_start_matches("./")
        .trim_end_matches('/')
        .to_string()
}

/// The plugin under construction.
struct Ops<'a> {
    input: &'a Path,
    output: &'a Path,
    pack: &'a Pack,
    /// The pack manifest without the OPS data kept for the way back.
    manifest: Map<String, Value>,
    /// OPS-only data a pack made from a plain plugin kept for the way back.
    back: Map<String, Value>,
    /// `plugin.json`.
    ops: Map<String, Value>,
    /// apiary's block under `extensions`.
    ext: Map<String, Value>,
    /// Pack files kept under the namespace directory.
    carried: Vec<String>,
    /// Skill directories written.
    skill_dirs: Vec<String>,
    report: Report,
}

/// Converts the persona pack at `input` into an Agent Plugins 1.0 plugin at `output`.
pub fn pack_to_ops(input: &Path, output: &Path) -> Result<Report, String> {
    let (pack, report) = Pack::read(input)?;
    let mut manifest = pack.manifest.clone();
    let back = match manifest.remove(PACK_KEY) {
        Some(Value::Object(map)) => map,
        _ => Map::new(),
    };
    let mut w = Ops {
        input,
        output,
        pack: &pack,
        manifest,
        back,
        ops: Map::new(),
        ext: Map::new(),
        carried: Vec::new(),
        skill_dirs: Vec::new(),
        report,
    };
    w.ops.insert("$schema".into(), PLUGIN_SCHEMA.into());
    w.name();
    w.typed_fields();
    w.author();
    w.other_fields();
    w.carry_personas()?;
    w.carry_instructions_and_hooks()?;
    w.skills()?;
    let mcp_file = w.mcp()?;
    w.write_manifest()?;
    w.other_files(&mcp_file)?;
    Ok(w.report)
}

/// The OPS name: the one a plain plugin had, else a slug of the title or the pack id.
fn plugin_name(
    title: Option<&str>,
    id: &str,
    back: &Map<String, Value>,
    report: &mut Report,
) -> String {
    let kept_slug = back
        .get("name")
        .and_then(Value::as_str)
        .filter(|n| model::valid_plugin_name(n));
    if let Some(s) = kept_slug {
        return s.to_string();
    }
    let derived = title
        .and_then(model::plugin_slug)
        .or_else(|| model::plugin_slug(id.rsplit('.').next().unwrap_or_default()))
        .or_else(|| model::plugin_slug(id));
    match derived {
        Some(s) => {
            if title != Some(s.as_str()) {
                report.normalised(
                    "name-normalised",
                    MANIFEST,
                    "name",
                    format!(
                        "{} -> {s} (OPS names are lowercase [a-z0-9.-]; the title is kept in extensions.{NAMESPACE}.name)",
                        title.unwrap_or(id)
                    ),
                );
            }
            s
        }
        None => {
            report.synthesised(
                "name-synthesised",
                MANIFEST,
                "name",
                "neither the name nor the id gives an OPS name: `persona-pack`",
            );
            "persona-pack".to_string()
        }
    }
}

impl Ops<'_> {
    /// name: the OPS slug; the title stays in the extension.
    fn name(&mut self) {
        let title = self
            .manifest
            .get("name")
            .and_then(Value::as_str)
            .filter(|t| !t.trim().is_empty())
            .map(str::to_string);
        let id = self
            .manifest
            .get("id")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let slug = plugin_name(title.as_deref(), id, &self.back, &mut self.report);
        self.ops.insert("name".into(), slug.clone().into());
        if let Some(t) = &title
            && *t != slug
        {
            self.ext.insert("name".into(), t.clone().into());
        }
        if let Some(name) = self.manifest.get("name")
            && title.is_none()
        {
            self.ext.insert("name".into(), name.clone());
        }
    }

    /// The string fields and keyword list OPS has, when they have OPS's type.
    fn typed_fields(&mut self) {
        let (manifest, ops, ext, report) = (
            &self.manifest,
            &mut self.ops,
            &mut self.ext,
            &mut self.report,
        );
        for key in STRING_FIELDS {
            match manifest.get(*key) {
                Some(Value::String(s)) => {
                    ops.insert((*key).into(), s.clone().into());
                }
                Some(other) => {
                    ext.insert((*key).into(), other.clone());
                    report.normalised(
                        "carried-in-extension",
                        MANIFEST,
                        key,
                        format!("`{key}` is not a string, which OPS requires; kept in extensions.{NAMESPACE}"),
                    );
                }
                None => {}
            }
        }
    }

    /// author: OPS allows only an object with string name/email/url.
    fn author(&mut self) {
        let (manifest, ops, ext, report) = (
            &self.manifest,
            &mut self.ops,
            &mut self.ext,
            &mut self.report,
        );
        if let Some(author) = manifest.get("author") {
            let previous = self.back.get("author").and_then(Value::as_object);
            let restored = previous.filter(|p| model::pack_author(p).as_ref() == Some(author));
            if let Some(object) = restored {
                ops.insert("author".into(), Value::Object(object.clone()));
            } else {
                let object = model::ops_author(author);
                if object.as_ref().and_then(model::pack_author).as_ref() != Some(author) {
                    ext.insert("author".into(), author.clone());
                }
                match &object {
                    Some(o) if author.is_string() => report.normalised(
                        "author-to-object",
                        MANIFEST,
                        "author",
                        format!("author string -> {}", Value::Object(o.clone())),
                    ),
                    Some(_) if ext.contains_key("author") => report.normalised(
                        "carried-in-extension",
                        MANIFEST,
                        "author",
                        format!(
                            "author keys OPS does not allow are kept in extensions.{NAMESPACE}.author"
                        ),
                    ),
                    Some(_) => {}
                    None => report.normalised(
                        "carried-in-extension",
                        MANIFEST,
                        "author",
                        format!("author has no OPS form; kept in extensions.{NAMESPACE}.author"),
                    ),
                }
                if let Some(o) = object {
                    ops.insert("author".into(), Value::Object(o));
                }
            }
        }
    }

    /// keywords, then everything else of the manifest into the extension, as written.
    fn other_fields(&mut self) {
        let (manifest, ops, ext, report) = (
            &self.manifest,
            &mut self.ops,
            &mut self.ext,
            &mut self.report,
        );
        for key in ["keywords"] {
            if let Some(value) = manifest.get(key) {
                if model::string_list(value).is_some() {
                    ops.insert(key.into(), value.clone());
                } else {
                    ext.insert(key.into(), value.clone());
                    report.normalised(
                        "carried-in-extension",
                        MANIFEST,
                        key,
                        format!("`{key}` is not a list of strings; kept in extensions.{NAMESPACE}"),
                    );
                }
            }
        }
        for (key, value) in manifest {
            let handled =
                OPS_KEYS.contains(&key.as_str()) && key != "$schema" && key != "extensions";
            if handled || PACK_FILE_KEYS.contains(&key.as_str()) {
                continue;
            }
            if key == "$schema" {
                report.normalised(
                    "schema-rewritten",
                    MANIFEST,
                    "$schema",
                    format!(
                        "{value} -> {PLUGIN_SCHEMA} (the pack's own is kept in extensions.{NAMESPACE})"
                    ),
                );
            } else {
                report.normalised(
                    "carried-in-extension",
                    MANIFEST,
                    key,
                    format!("`{key}` has no OPS field; kept in extensions.{NAMESPACE}.{key}"),
                );
            }
            ext.insert(key.clone(), value.clone());
        }
    }

    /// A pack file OPS has no component for, under the namespace directory, byte for byte.
    fn carry(&mut self, file: &str) -> Result<(), String> {
        tree::write(
            self.output,
            &format!("{NAMESPACE}/{file}"),
            tree::read_bytes(self.input, file)?,
        )
    }

    fn carry_personas(&mut self) -> Result<(), String> {
        let pack = self.pack;
        let mut persona_files = Vec::new();
        for persona in &pack.personas {
            let file = strip(&persona.file);
            self.carry(&file)?;
            self.report.normalised(
                "carried-in-extension",
                &file,
                "",
                format!(
                    "persona `{}` kept as {NAMESPACE}/{file}: OPS has no personas, only apiary runs it",
                    persona.name()
                ),
            );
            if persona.fields.contains_key("mcp_servers") {
                self.report.reinterpreted(
                    "per-persona-mcp-extension-only",
                    &file,
                    "mcp_servers",
                    "OPS has no per-agent MCP scope: these servers stay in the persona file, invisible to other OPS hosts",
                );
            }
            persona_files.push(Value::from(file.clone()));
            self.carried.push(file);
        }
        self.ext
            .insert("personas".into(), Value::Array(persona_files));
        Ok(())
    }

    fn carry_instructions_and_hooks(&mut self) -> Result<(), String> {
        if let Some(file) = self
            .manifest
            .get("pack_instructions")
            .and_then(Value::as_str)
            && self.pack.instructions.is_some()
        {
            let file = strip(file);
            self.carry(&file)?;
            self.ext
                .insert("pack_instructions".into(), file.clone().into());
            self.report.normalised(
                "carried-in-extension",
                &file,
                "",
                format!("pack instructions kept as {NAMESPACE}/{file}"),
            );
            self.carried.push(file);
        }
        if self.pack.hooks.is_some() {
            let file = strip(
                self.manifest
                    .get("hooks_config")
                    .and_then(Value::as_str)
                    .unwrap_or("hooks/hooks.json"),
            );
            self.carry(&file)?;
            self.ext.insert("hooks_config".into(), file.clone().into());
            self.report.normalised(
                "carried-in-extension",
                &file,
                "",
                format!("lifecycle hooks kept as {NAMESPACE}/{file}: OPS has no hooks, only apiary runs them"),
            );
            self.carried.push(file);
            for (path, bytes) in &self.pack.hook_files {
                tree::write(self.output, &format!("{NAMESPACE}/{path}"), bytes)?;
                self.carried.push(path.clone());
            }
        }
        Ok(())
    }

    /// Skills: `skills/<name>/` as they are; a skill a persona lists from elsewhere stays at its
    /// path under the namespace (moving it would break the persona's reference).
    fn skills(&mut self) -> Result<(), String> {
        let (input, output, pack) = (self.input, self.output, self.pack);
        for skill in &pack.skills {
            let standard = format!("skills/{}", skill.name);
            let dir = if tree::is_dir(input, &standard) {
                standard
            } else {
                let listed = pack
                    .personas
                    .iter()
                    .flat_map(|p| {
                        p.fields
                            .get("skills")
                            .and_then(Value::as_array)
                            .cloned()
                            .unwrap_or_default()
                    })
                    .filter_map(|v| v.as_str().map(strip))
                    .find(|d| d.rsplit('/').next() == Some(skill.name.as_str()))
                    .unwrap_or(standard);
                // Other OPS hosts go without it: lost for them, though apiary reads it back.
                self.report.lost(
                    "skill-extension-only",
                    &listed,
                    "",
                    format!("skill `{}` lives outside skills/; kept as {NAMESPACE}/{listed}, invisible to other OPS hosts", skill.name),
                );
                skill.write(output, &format!("{NAMESPACE}/{listed}"))?;
                self.skill_dirs.push(listed);
                continue;
            };
            let mut skill = skill.clone();
            if let Some(old) = skill.strip_namespace() {
                self.report.normalised(
                    "skill-name-unnamespaced",
                    &format!("{dir}/SKILL.md"),
                    "name",
                    format!(
                        "`{old}` -> `{}`: Agent Skills names are plain and equal the directory",
                        skill.name
                    ),
                );
            }
            let dir = self.skill_dir(&mut skill, dir);
            skill.write(output, &dir)?;
            if let Some(why) = skill_problem(&skill) {
                self.report.lost(
                    "skill-not-conformant",
                    &format!("{dir}/SKILL.md"),
                    "",
                    format!("OPS hosts skip skills that break the Agent Skills spec: {why}"),
                );
            }
            self.skill_dirs.push(dir);
        }
        Ok(())
    }

    /// Where a skill goes: `skills/<its name:>` (Agent Skills wants the folder named after the
    /// load key, as the Claude writer does), the folder it came from recorded for the way back.
    fn skill_dir(&mut self, skill: &mut convert_kit::Skill, dir: String) -> String {
        let declared = skill
            .skill_md()
            .map(frontmatter::parse)
            .and_then(|fm| {
                fm.fields
                    .get("name")
                    .and_then(Value::as_str)
                    .map(str::to_string)
            })
            .filter(|n| slug::is_valid(n, Rules::Skill) && *n != skill.name);
        let Some(name) = declared else {
            return dir;
        };
        let to = format!("skills/{name}");
        if self.skill_dirs.contains(&to) || tree::is_dir(self.input, &to) {
            return dir; // taken: left as it is, and reported as not conformant
        }
        self.report.normalised(
            "skill-dir-renamed",
            &dir,
            "",
            format!("{dir} -> {to} (Agent Skills wants the folder named after the skill's `name`); the way back restores {dir}"),
        );
        object(&mut self.ext, RENAMED_SKILLS).insert(name.clone(), skill.name.clone().into());
        // The pack's folder is written (under its new name): not a file to carry as well.
        self.skill_dirs.push(dir);
        skill.name = name;
        to
    }

    /// MCP servers: `.mcp.json` -> `mcp.json` with explicit transports. Returns the pack's MCP
    /// file.
    fn mcp(&mut self) -> Result<String, String> {
        let mcp_file = strip(
            self.manifest
                .get("mcp_config")
                .and_then(Value::as_str)
                .unwrap_or(".mcp.json"),
        );
        let previous = self
            .back
            .get("mcp_servers")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let servers: Vec<(String, Map<String, Value>)> = self
            .pack
            .mcp_servers
            .iter()
            .map(|s| (s.name.clone(), s.config.clone()))
            .collect();
        let mut kept = Map::new();
        let mut ops_servers = Map::new();
        for mapped in mcp::to_ops_list(&servers, &previous, &mut kept) {
            report_notes(&mut self.report, &mcp_file, &mapped);
            match mapped.config {
                Some(config) => {
                    ops_servers.insert(mapped.name, Value::Object(config));
                }
                // OPS hosts go without the server: lost, though the way back restores it.
                None => self.report.lost(
                    "mcp-server-extension-only",
                    &mcp_file,
                    &format!("mcpServers.{}", mapped.name),
                    format!(
                        "server `{}` is not a portable OPS server ({}); kept in extensions.{NAMESPACE}.mcp_servers only, OPS hosts will not start it",
                        mapped.name,
                        mapped.refused.unwrap_or_default()
                    ),
                ),
            }
        }
        let had_mcp = tree::is_file(self.input, &mcp_file);
        if had_mcp || !ops_servers.is_empty() {
            tree::write_json(
                self.output,
                "mcp.json",
                &convert_kit::json!({ "$schema": MCP_SCHEMA, "mcpServers": ops_servers }),
            )?;
            self.report.normalised(
                "mcp-config-renamed",
                &mcp_file,
                "",
                format!("{mcp_file} -> mcp.json (with $schema and an explicit type per server)"),
            );
        }
        if !kept.is_empty() {
            self.ext.insert("mcp_servers".into(), Value::Object(kept));
        }
        Ok(mcp_file)
    }

    /// `plugin.json`, checked against OPS 1.0: extensions are other clients' blocks a pack made
    /// from a plain plugin kept, then ours.
    fn write_manifest(&mut self) -> Result<(), String> {
        let mut extensions = match self.back.get("extensions") {
            Some(Value::Object(map)) => map.clone(),
            _ => Map::new(),
        };
        extensions.remove(NAMESPACE);
        // The pack's identity first, then the rest as the manifest had it.
        let mut ordered = Map::new();
        for key in ["id", "name", "$schema"] {
            if let Some(v) = self.ext.remove(key) {
                ordered.insert(key.into(), v);
            }
        }
        ordered.extend(std::mem::take(&mut self.ext));
        extensions.insert(NAMESPACE.into(), Value::Object(ordered));
        let mut ops = std::mem::take(&mut self.ops);
        ops.insert("extensions".into(), Value::Object(extensions));
        let ops = order(ops);
        if let Err(problems) = check_manifest(&ops) {
            return Err(format!(
                "internal error: the plugin.json written breaks OPS 1.0: {problems}"
            ));
        }
        tree::write_json(self.output, "plugin.json", &Value::Object(ops))
    }

    /// Every other file of the pack comes along: documentation, other clients' namespace
    /// directories and plain files under skills/ where they were; anything else (another
    /// format's carried data such as `x-claude/`, snapshots, a root `plugin.json`) under the
    /// namespace directory, which the way back copies to the pack root as it is.
    fn other_files(&mut self, mcp_file: &str) -> Result<(), String> {
        let (input, output) = (self.input, self.output);
        let skip = |path: &str| {
            path == MANIFEST
                || path == mcp_file
                || self.carried.iter().any(|c| c == path)
                || self
                    .skill_dirs
                    .iter()
                    .any(|d| path.starts_with(&format!("{d}/")))
        };
        let mut moved: Vec<String> = Vec::new();
        for path in tree::walk(input, "")? {
            if skip(&path) {
                continue;
            }
            let reserved = path.starts_with(&format!("{NAMESPACE}/"))
                || path.starts_with("skills/") && path.matches('/').count() > 1;
            if reserved {
                self.report.lost(
                    "file-collides",
                    &path,
                    "",
                    "the path is reserved in an OPS plugin; the file is not carried",
                );
                continue;
            }
            if model::stays_at_top(&path) {
                tree::write(output, &path, tree::read_bytes(input, &path)?)?;
                continue;
            }
            tree::write(
                output,
                &format!("{NAMESPACE}/{path}"),
                tree::read_bytes(input, &path)?,
            )?;
            let top = match path.split_once('/') {
                Some((dir, _)) => format!("{dir}/"),
                None => path.clone(),
            };
            if !moved.contains(&top) {
                self.report.normalised(
                    "carried-in-namespace",
                    &top,
                    "",
                    format!("{top} has no place in an OPS plugin's layout; kept as {NAMESPACE}/{top} and restored on the way back"),
                );
                moved.push(top);
            }
        }
        Ok(())
    }
}

/// The notes of one server's mapping, each in its report list.
fn report_notes(report: &mut Report, mcp_file: &str, mapped: &mcp::Mapped) {
    for n in &mapped.notes {
        let field = format!("mcpServers.{}.{}", mapped.name, n.field);
        let field = field.trim_end_matches('.');
        match n.list {
            List::Synthesised => report.synthesised(n.code, mcp_file, field, n.message.clone()),
            List::Normalised => report.normalised(n.code, mcp_file, field, n.message.clone()),
            List::Reinterpreted => report.reinterpreted(n.code, mcp_file, field, n.message.clone()),
        }
    }
}

/// Why a skill breaks the Agent Skills rules OPS hosts apply, if it does.
pub fn skill_problem(skill: &convert_kit::Skill) -> Option<String> {
    let Some(text) = skill.skill_md() else {
        return Some("SKILL.md is missing or not UTF-8".into());
    };
    let fm = frontmatter::parse(text);
    if fm.mode != convert_kit::ParseMode::Strict {
        return Some("its frontmatter is missing or not YAML".into());
    }
    let name = fm
        .fields
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if name != skill.name {
        return Some(format!(
            "name `{name}` differs from its directory `{}`",
            skill.name
        ));
    }
    if !slug::is_valid(name, Rules::Skill) || name.contains("--") {
        return Some(format!("name `{name}` is not [a-z0-9-], at most 64"));
    }
    let description = fm
        .fields
        .get("description")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if description.trim().is_empty() || description.chars().count() > 1024 {
        return Some("description is empty or longer than 1024 characters".into());
    }
    None
}

/// The manifest keys in the order the spec lists them.
fn order(mut map: Map<String, Value>) -> Map<String, Value> {
    let mut out = Map::new();
    for key in OPS_KEYS {
        if let Some(v) = map.remove(*key) {
            out.insert((*key).into(), v);
        }
    }
    out.extend(map);
    out
}

/// The OPS 1.0 manifest schema, checked by hand: closed top level, `$schema` const, name rule,
/// field types, the author object, extensions of objects.
pub fn check_manifest(m: &Map<String, Value>) -> Result<(), String> {
    let mut problems = Vec::new();
    for key in m.keys().filter(|k| !OPS_KEYS.contains(&k.as_str())) {
        problems.push(format!("unknown top-level field `{key}`"));
    }
    if m.get("$schema").and_then(Value::as_str) != Some(PLUGIN_SCHEMA) {
        problems.push("`$schema` is not the Agent Plugins 1.0.0 identifier".into());
    }
    match m.get("name").and_then(Value::as_str) {
        Some(n) if model::valid_plugin_name(n) => {}
        _ => problems.push("`name` is missing or breaks the OPS name rule".into()),
    }
    for key in STRING_FIELDS {
        if m.get(*key).is_some_and(|v| !v.is_string()) {
            problems.push(format!("`{key}` is not a string"));
        }
    }
    if let Some(author) = m.get("author") {
        let ok = author.as_object().is_some_and(|a| {
            a.iter()
                .all(|(k, v)| ["name", "email", "url"].contains(&k.as_str()) && v.is_string())
        });
        if !ok {
            problems.push("`author` is not an object of string name/email/url".into());
        }
    }
    if m.get("keywords")
        .is_some_and(|v| model::string_list(v).is_none())
    {
        problems.push("`keywords` is not a list of strings".into());
    }
    if let Some(ext) = m.get("extensions")
        && !ext
            .as_object()
            .is_some_and(|e| e.values().all(Value::is_object))
    {
        problems.push("`extensions` is not an object of objects".into());
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("; "))
    }
}
