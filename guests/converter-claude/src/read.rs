//! A Claude Code plugin (or a Codex, Cursor or Gemini plugin, its close cousins) -> a persona pack.
//!
//! What the pack has a slot for is mapped (agents -> personas, skills, MCP servers, metadata);
//! everything else is carried: per-agent Claude keys and the original `plugin.json` in the manifest
//! block `x-claude` (`x-codex`, … for the cousins), other files (commands, hooks, LSP, settings…)
//! verbatim under `x-claude/files/`. Claude hooks are an event map, not persona lifecycle hooks:
//! they are carried there, disabled. The writer (`write.rs`) reads all of it back.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use apiary_schema::manifest;
use convert_kit::frontmatter::{self, ParseMode};
use convert_kit::pack::{self, McpServer, Pack, Persona, Skill};
use convert_kit::slug::{self, Rules};
use convert_kit::{Map, Report, Value, claude, is_documentation, policy, tree};

use crate::carry::{AGENT_MAPPED, FILES_DIR, PERSONA_KEY};
use crate::locate::Missing;
use crate::mcp;

mod collection;
use crate::model::{self, ToPersona};
use crate::util::{clean_path, first_line, object, strings, text, title_case, unique};
use collection::{Src, published_at};

/// The plugin dialect being read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Host {
    Claude,
    Codex,
    Cursor,
    Gemini,
    /// A GitHub Copilot CLI plugin: Claude's dialect, its manifest at one of
    /// [`COPILOT_MANIFESTS`].
    Copilot(&'static str),
}

/// Where Copilot CLI looks for a plugin's manifest, in its order (after none of these it reads
/// `.claude-plugin/plugin.json`).
pub const COPILOT_MANIFESTS: &[&str] = &["plugin.json", ".github/plugin/plugin.json"];

impl Host {
    pub fn from_format(format: &str) -> Option<Host> {
        match format {
            "claude-plugin" | "agents-dir" => Some(Host::Claude),
            "codex-plugin" => Some(Host::Codex),
            "cursor-plugin" => Some(Host::Cursor),
            "gemini-extension" => Some(Host::Gemini),
            _ => None,
        }
    }

    pub fn manifest(self) -> &'static str {
        match self {
            Host::Claude => claude::MANIFEST,
            Host::Codex => claude::CODEX_MANIFEST,
            Host::Cursor => claude::CURSOR_MANIFEST,
            Host::Gemini => claude::GEMINI_MANIFEST,
            Host::Copilot(file) => file,
        }
    }

    /// The Copilot manifest of the plugin at `root`, when it has one and no Claude manifest.
    pub fn copilot(root: &Path) -> Option<Host> {
        if tree::is_file(root, claude::MANIFEST) {
            return None;
        }
        COPILOT_MANIFESTS
            .iter()
            .find(|f| tree::is_file(root, f))
            .map(|f| Host::Copilot(f))
    }

    /// The manifest block of the persona pack holding what has no pack slot.
    pub fn ext_key(self) -> &'static str {
        match self {
            Host::Claude => "x-claude",
            Host::Codex => "x-codex",
            Host::Cursor => "x-cursor",
            Host::Gemini => "x-gemini",
            // Claude's own dialect: the Claude writer restores it.
            Host::Copilot(_) => "x-claude",
        }
    }

    fn label(self) -> &'static str {
        match self {
            Host::Claude => "Claude Code",
            Host::Codex => "Codex",
            Host::Cursor => "Cursor",
            Host::Gemini => "Gemini CLI",
            Host::Copilot(_) => "GitHub Copilot CLI",
        }
    }
}

/// What the caller knows about the plugin beyond its tree.
#[derive(Debug, Default, Clone)]
pub struct Context {
    /// Prefix for report paths (the plugin's directory inside the input), `""` at the root.
    pub prefix: String,
    /// The marketplace entry listing this plugin, when read through a marketplace.
    pub entry: Option<Map<String, Value>>,
    /// The marketplace's name.
    pub marketplace: Option<String>,
    /// A name to use when neither a manifest nor a marketplace entry gives one.
    pub fallback_name: Option<String>,
    /// The `agents-dir` layout: agent files lie loose at the root (a folder of `.md` agents, or
    /// one agent file), not under `agents/`.
    pub loose_agents: bool,
    /// The last parts of the input's path as the host saw it (`source-name`), which names a
    /// plugin without a manifest after its folder.
    pub source_name: Option<String>,
    /// The collection root (a marketplace given as input) holding the plugin at `prefix`: where
    /// manifest paths naming nothing in the plugin are looked for ([`locate`]).
    pub collection: Option<PathBuf>,
}

/// Copilot's per-agent MCP servers key (`.agent.md` frontmatter).
const COPILOT_MCP: &str = "mcp-servers";

/// Files as (plugin-relative path, bytes).
type Files = Vec<(String, Vec<u8>)>;

/// A converted plugin, ready to be written.
pub struct Converted {
    pub pack: Pack,
    /// Files kept verbatim at the pack root (README, LICENSE…).
    pub docs: Vec<(String, Vec<u8>)>,
    /// Files carried under [`FILES_DIR`], by their path in the plugin.
    pub carried: Vec<(String, Vec<u8>)>,
    pub report: Report,
}

impl Converted {
    pub fn write(&self, out: &Path) -> Result<(), String> {
        self.pack.write(out)?;
        for (rel, bytes) in &self.docs {
            tree::write(out, rel, bytes)?;
        }
        for (rel, bytes) in &self.carried {
            tree::write(out, &format!("{FILES_DIR}/{rel}"), bytes)?;
        }
        Ok(())
    }
}

/// Claude manifest fields the persona pack has a slot of the same name for (`name` and `version`
/// first: they are read on their own).
const MAPPED_KEYS: &[&str] = &[
    manifest::NAME,
    manifest::VERSION,
    manifest::DESCRIPTION,
    manifest::AUTHOR,
    manifest::LICENSE,
    manifest::HOMEPAGE,
    manifest::REPOSITORY,
    manifest::KEYWORDS,
];

struct Reader<'a> {
    root: &'a Path,
    host: Host,
    ctx: &'a Context,
    report: Report,
    /// Plugin-relative files mapped into the pack (not carried again).
    consumed: BTreeSet<String>,
    ext: Map<String, Value>,
    /// `x-persona` of a plugin the writer produced.
    xp: Map<String, Value>,
    pack: Pack,
    /// Files the collection holds for the plugin, by their plugin-relative path once published.
    collected: Files,
}

/// Reads the plugin at `root` into a persona pack.
pub fn read(root: &Path, host: Host, ctx: &Context) -> Result<Converted, String> {
    let mut r = Reader {
        root,
        host,
        ctx,
        report: Report::default(),
        consumed: BTreeSet::new(),
        ext: Map::new(),
        xp: Map::new(),
        pack: Pack::default(),
        collected: Vec::new(),
    };
    let plugin = r.manifest()?;
    r.metadata(&plugin);
    r.component_paths(&plugin);
    r.skills(&plugin)?;
    r.agents(&plugin)?;
    r.mcp(&plugin)?;
    r.hooks(&plugin);
    r.instructions(&plugin);
    r.require_content(&plugin)?;
    r.persona_fallback(&plugin);
    let (docs, carried) = r.rest()?;
    let had_defaults = r.pack.manifest.contains_key(manifest::DEFAULTS);
    if r.pack.default_channel(&mut r.report).is_some() && !had_defaults {
        // Not the plugin's: the way back leaves it out, as it does the synthesised id.
        match r.ext.get_mut("synthesised") {
            Some(Value::Array(list)) => list.push(manifest::DEFAULTS.into()),
            _ => {
                r.ext.insert(
                    "synthesised".into(),
                    Value::Array(vec![manifest::DEFAULTS.into()]),
                );
            }
        }
    }
    let key = host.ext_key();
    if !r.ext.is_empty() {
        r.pack.manifest.insert(key.into(), Value::Object(r.ext));
    }
    Ok(Converted {
        pack: r.pack,
        docs,
        carried,
        report: r.report,
    })
}

impl Reader<'_> {
    fn at(&self, rel: &str) -> String {
        match (self.ctx.prefix.is_empty(), rel.is_empty()) {
            (true, _) => rel.to_string(),
            (false, true) => self.ctx.prefix.clone(),
            (false, false) => format!("{}/{rel}", self.ctx.prefix),
        }
    }

    /// A manifest path that points outside the plugin or at nothing: its content cannot come
    /// along, one `dangling-reference` each (lost, so the conversion exits 2).
    fn dangling(&mut self, field: &str, path: &str, why: &str) {
        let at = self.at(self.host.manifest());
        let why = why.strip_prefix(&format!("`{path}` ")).unwrap_or(why);
        self.report.lost(
            "dangling-reference",
            &at,
            field,
            format!("`{field}` path `{path}` {why}; what it names is not converted"),
        );
    }

    /// Keeps a JSON file's text as written (`<ext>.texts.<file>`) when the writer's own
    /// formatting would not give it back (other indentation, inline arrays, `\u` escapes), so
    /// the way back writes it byte for byte while its value is unchanged.
    fn keep_text(&mut self, file: &str, text: &str, value: &Value) {
        let ours = serde_json::to_string_pretty(value).unwrap_or_default() + "\n";
        if ours != text {
            let texts = self
                .ext
                .entry("texts")
                .or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(texts) = texts {
                texts.insert(file.to_string(), text.into());
            }
        }
    }

    /// The plugin manifest: the host's manifest file, else the marketplace entry, else nothing.
    fn manifest(&mut self) -> Result<Map<String, Value>, String> {
        let file = self.host.manifest();
        let mut plugin = if tree::is_file(self.root, file) {
            self.consumed.insert(file.to_string());
            let text = tree::read(self.root, file)?;
            let value: Value =
                serde_json::from_str(&text).map_err(|e| format!("{file}: invalid JSON: {e}"))?;
            self.keep_text(file, &text, &value);
            match value {
                Value::Object(map) => {
                    self.ext.insert("manifest".into(), "file".into());
                    if let Host::Copilot(file) = self.host {
                        // The way back writes it where Copilot looks first, too.
                        self.ext.insert("manifest_file".into(), file.into());
                    }
                    map
                }
                _ => return Err(format!("{} is not a JSON object", self.at(file))),
            }
        } else if let Some(entry) = &self.ctx.entry {
            self.ext
                .insert("manifest".into(), "marketplace-entry".into());
            self.report.synthesised(
                "manifest-from-marketplace",
                &self.at(""),
                "",
                format!(
                    "no {file}: the plugin's metadata comes from its marketplace entry, as {} does",
                    self.host.label()
                ),
            );
            entry
                .iter()
                .filter(|(k, _)| !matches!(k.as_str(), "source" | "strict" | "category" | "tags"))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        } else {
            self.ext.insert("manifest".into(), "none".into());
            Map::new()
        };
        if let Some(entry) = &self.ctx.entry {
            let mut m = Map::new();
            if let Some(name) = &self.ctx.marketplace {
                m.insert("name".into(), name.clone().into());
            }
            m.insert("entry".into(), Value::Object(entry.clone()));
            self.ext.insert("marketplace".into(), Value::Object(m));
            self.report.reinterpreted(
                "carried-in-extension",
                &self.at(""),
                "",
                format!(
                    "the marketplace entry (source, category, tags…) is kept in `{}.marketplace`",
                    self.host.ext_key()
                ),
            );
        }
        if let Some(Value::Object(xp)) = plugin.remove(PERSONA_KEY) {
            self.xp = xp;
        }
        Ok(plugin)
    }

    fn metadata(&mut self, plugin: &Map<String, Value>) {
        // Findings about manifest fields cite the manifest, or the folder when there is none.
        let file = if tree::is_file(self.root, self.host.manifest()) {
            self.at(self.host.manifest())
        } else {
            self.at("")
        };
        let xp_manifest = self
            .xp
            .get("manifest")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let name = self.plugin_name(plugin, &file);
        let mut synthesised = Vec::new();
        let m = &mut self.pack.manifest;
        m.insert("$schema".into(), pack::SCHEMA.into());
        let id = match xp_manifest.get("id").and_then(Value::as_str) {
            Some(id) => id.to_string(),
            None => {
                let id = slug::normalise(&name, Rules::AgentPlugins)
                    .unwrap_or_else(|| "claude-plugin".to_string());
                synthesised.push("id");
                self.report.synthesised(
                    "id-derived",
                    &file,
                    "id",
                    format!("persona packs need an `id`: derived `{id}` from the plugin name"),
                );
                id
            }
        };
        m.insert("id".into(), id.into());
        let title = xp_manifest
            .get("name")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or(name.clone());
        m.insert("name".into(), title.into());
        match text(plugin, "version") {
            Some(v) => {
                m.insert("version".into(), v.into());
            }
            None => {
                m.insert("version".into(), "0.1.0".into());
                synthesised.push("version");
                self.report.synthesised(
                    "default-applied",
                    &file,
                    "version",
                    "persona packs need a `version`; the plugin has none, so 0.1.0",
                );
            }
        }
        self.mapped_keys(plugin, &file);
        // Persona-pack-only manifest keys a Claude plugin written by this converter carried.
        for (k, v) in &xp_manifest {
            if !matches!(k.as_str(), "id" | "name") {
                self.pack.manifest.insert(k.clone(), v.clone());
            }
        }
        self.report_unmapped_keys(plugin, &file);
        if !plugin.is_empty() {
            self.ext
                .insert("plugin".into(), Value::Object(plugin.clone()));
        }
        if !synthesised.is_empty() {
            self.ext.insert(
                "synthesised".into(),
                Value::Array(synthesised.into_iter().map(Value::from).collect()),
            );
        }
    }

    /// The plugin's name, else the caller's fallback, else its folder's, else `claude-plugin`.
    fn plugin_name(&mut self, plugin: &Map<String, Value>, file: &str) -> String {
        if let Some(n) = text(plugin, "name") {
            return n.to_string();
        }
        let (n, why) = match (&self.ctx.fallback_name, &self.ctx.source_name) {
            (Some(n), _) => (n.clone(), "from `--option name`".to_string()),
            (None, Some(src)) => match name_from_folder(src) {
                Some(n) => (n, format!("after its folder `{src}`")),
                None => (
                    "claude-plugin".to_string(),
                    format!("its folder `{src}` gives no usable name; pass --option name=NAME"),
                ),
            },
            (None, None) => (
                "claude-plugin".to_string(),
                "pass --option name=NAME to choose one".to_string(),
            ),
        };
        self.report.synthesised(
            "name-synthesised",
            file,
            "name",
            format!("the plugin has no name; named it `{n}` {why}"),
        );
        n
    }

    /// The manifest fields after name and version the pack has a slot for, when their shape
    /// fits it.
    fn mapped_keys(&mut self, plugin: &Map<String, Value>, file: &str) {
        for key in &MAPPED_KEYS[2..] {
            let Some(value) = plugin.get(*key) else {
                continue;
            };
            let fits = match *key {
                "author" => {
                    value.is_string()
                        || value
                            .as_object()
                            .is_some_and(|a| a.get("name").is_some_and(Value::is_string))
                }
                "keywords" => value
                    .as_array()
                    .is_some_and(|a| a.iter().all(Value::is_string)),
                _ => value.is_string(),
            };
            if fits {
                self.pack.manifest.insert(key.to_string(), value.clone());
            } else {
                self.report.reinterpreted(
                    "carried-in-extension",
                    file,
                    key,
                    format!(
                        "`{key}` has a shape persona packs do not accept; kept in `{}.plugin`",
                        self.host.ext_key()
                    ),
                );
            }
        }
    }

    /// Manifest keys with no pack slot: the whole manifest is kept for the way back.
    fn report_unmapped_keys(&mut self, plugin: &Map<String, Value>, file: &str) {
        for key in plugin.keys().filter(|k| !MAPPED_KEYS.contains(&k.as_str())) {
            let why = match key.as_str() {
                k if claude::COMPONENT_FIELDS.contains(&k) => {
                    "a component path or inline definition; read where the pack has a slot"
                }
                "$schema" => "the persona pack writes its own `$schema`",
                _ => "persona packs have no such field",
            };
            self.report.reinterpreted(
                "carried-in-extension",
                file,
                key,
                format!(
                    "`{key}`: {why}; the value is kept in `{}.plugin` for the way back",
                    self.host.ext_key()
                ),
            );
        }
    }

    /// Skill directories: every child of `skills/` plus the manifest's `skills` paths (each a
    /// skill folder or a folder of them, in the plugin or the collection around it).
    fn skill_dirs(&mut self, plugin: &Map<String, Value>) -> Vec<Src> {
        let mut roots = vec![Src::plugin(claude::SKILLS_DIR)];
        if self.bare_skill() {
            roots.insert(0, Src::plugin(""));
        }
        for p in strings(plugin.get("skills")) {
            let inside = clean_path(&p).is_ok_and(|rel| !tree::is_file(self.root, &rel));
            let found = self.place().locate(&p, tree::is_dir);
            match found {
                Err(Missing::Absent) if inside => self.report.reinterpreted(
                    "dangling-reference",
                    &self.at(self.host.manifest()),
                    "skills",
                    format!("`skills` path `{p}` names nothing in the plugin; skipped (nothing to convert)"),
                ),
                _ => roots.extend(self.locate("skills", &p, tree::is_dir)),
            }
        }
        let mut dirs = Vec::new();
        for root in roots {
            let base = self.base(&root).to_path_buf();
            if has_skill_md(&base, &root.rel) {
                dirs.push(root);
            } else if tree::is_dir(&base, &root.rel) {
                for child in tree::list(&base, &root.rel) {
                    let dir = match root.rel.as_str() {
                        "" => child,
                        r => format!("{r}/{child}"),
                    };
                    if has_skill_md(&base, &dir) {
                        dirs.push(Src {
                            rel: dir,
                            ..root.clone()
                        });
                    }
                }
            }
        }
        let mut seen = BTreeSet::new();
        dirs.retain(|d| seen.insert((d.rel.clone(), d.in_collection)));
        dirs
    }

    fn skills(&mut self, plugin: &Map<String, Value>) -> Result<(), String> {
        let dirs = self.skill_dirs(plugin);
        let mut taken: Vec<String> = Vec::new();
        for src in dirs {
            let (dir, shown) = (src.rel.clone(), self.shown(&src));
            if dir.is_empty() && !self.bare_skill() {
                self.report.lost(
                    "path-refused",
                    &self.at(self.host.manifest()),
                    "skills",
                    "a skill at the plugin root would take the whole plugin with it; skipped",
                );
                continue;
            }
            let mut skill = match Skill::read(self.base(&src), &dir) {
                Ok(s) => s,
                Err(e) => {
                    self.report.lost("skill-unreadable", &shown, "", e);
                    continue;
                }
            };
            if !src.in_collection {
                for (file, _) in &skill.files {
                    let rel = if dir.is_empty() {
                        file.clone()
                    } else {
                        format!("{dir}/{file}")
                    };
                    self.consumed.insert(rel);
                }
            }
            if dir.is_empty() {
                // The folder is the skill: named after the plugin (its folder) until its own
                // `name:` says otherwise, just below.
                skill.name = self
                    .pack
                    .manifest
                    .get("name")
                    .and_then(Value::as_str)
                    .and_then(|n| slug::normalise(n, Rules::Skill))
                    .unwrap_or_else(|| "skill".into());
            }
            self.fix_skill_md(&shown, &mut skill);
            if let Some(change) = skill.normalise_name() {
                // Claude addresses a plugin's skills as `plugin:skill` itself and loads a folder
                // whatever its spelling; a persona pack (and every target) wants one plain load
                // key equal to the folder. One odd skill must not sink the whole plugin.
                let namespaced = change.declared.contains(':');
                let message = if change.dir == change.name {
                    format!("`{}` -> `{}`", change.declared, change.name)
                } else {
                    format!(
                        "`name: {}` in folder `{}` -> skills/{} with `name: {}` (a skill's name is its load key and must equal its folder)",
                        change.declared, change.dir, change.name, change.name
                    )
                };
                let code = if namespaced {
                    "skill-name-unnamespaced"
                } else {
                    "skill-name-normalised"
                };
                self.report
                    .normalised(code, &format!("{shown}/SKILL.md"), "name", message);
            }
            let name = unique(&skill.name, &mut taken);
            if name != skill.name {
                self.report.normalised(
                    "name-normalised",
                    &shown,
                    "",
                    format!(
                        "skill directory {} -> skills/{name} (name taken)",
                        skill.name
                    ),
                );
                skill.rename(&name);
            }
            if dir.is_empty() {
                // The way back writes it at the root again.
                self.ext
                    .insert("bare_skill".into(), skill.name.clone().into());
                self.report.reinterpreted(
                    "skill-folder-as-skill",
                    &self.at("SKILL.md"),
                    "",
                    format!("the folder is one Agent Skill: it becomes the pack's skill `skills/{}` (the way back puts it at the root again)", skill.name),
                );
            }
            self.pack.skills.push(skill);
        }
        Ok(())
    }

    /// A folder that is one Agent Skill (a `SKILL.md` at its root, no manifest, no agents).
    fn bare_skill(&self) -> bool {
        !self.ctx.loose_agents
            && self.ext.get("manifest").and_then(Value::as_str) == Some("none")
            && has_skill_md(self.root, "")
            && !tree::is_dir(self.root, claude::AGENTS_DIR)
    }

    /// A SKILL.md the persona pack validator would refuse (not strict YAML, no name or
    /// description) gets its frontmatter rewritten, and the report says so.
    fn fix_skill_md(&mut self, shown_dir: &str, skill: &mut Skill) {
        let Some(index) = skill
            .files
            .iter()
            .position(|(p, _)| p.eq_ignore_ascii_case("SKILL.md"))
        else {
            return;
        };
        let path = format!("{shown_dir}/{}", skill.files[index].0);
        let Ok(text) = std::str::from_utf8(&skill.files[index].1) else {
            self.report.lost(
                "skill-unreadable",
                &path,
                "",
                "SKILL.md is not UTF-8; the skill is dropped",
            );
            skill.files.clear();
            return;
        };
        let fm = frontmatter::parse(text);
        let has = |k: &str| text_field(&fm.fields, k);
        if fm.mode == ParseMode::Strict && has("name") && has("description") {
            if skill.files[index].0 != "SKILL.md" {
                skill.files[index].0 = "SKILL.md".into();
            }
            return;
        }
        let mut fields = fm.fields.clone();
        let mut changes = Vec::new();
        if fm.mode == ParseMode::Lenient {
            changes.push("re-serialised as strict YAML (it was not)".to_string());
        }
        if !has("name") {
            fields.insert("name".into(), skill.name.clone().into());
            changes.push(format!("`name` set to `{}`", skill.name));
        }
        if !has("description") {
            let d = first_line(&fm.body, 200).unwrap_or_else(|| format!("Skill {}", skill.name));
            fields.insert("description".into(), d.into());
            changes.push("`description` taken from the body".to_string());
        }
        // Keep `name` and `description` first, as skill files usually do.
        let mut ordered = Map::new();
        for k in ["name", "description"] {
            if let Some(v) = fields.remove(k) {
                ordered.insert(k.into(), v);
            }
        }
        ordered.extend(fields);
        skill.files[index] = (
            "SKILL.md".into(),
            frontmatter::render(&ordered, &fm.body).into_bytes(),
        );
        skill.description = ordered
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        self.report.reinterpreted(
            "skill-frontmatter-rewritten",
            &path,
            "",
            format!(
                "SKILL.md frontmatter rewritten so persona runtimes load it: {}",
                changes.join("; ")
            ),
        );
    }

    /// Agent files: `agents/**/*.md` plus the manifest's `agents` paths (added to the default,
    /// as in Claude Code; in the plugin, or in the collection around it).
    fn agent_files(&mut self, plugin: &Map<String, Value>) -> Result<Vec<Src>, String> {
        let mut files: Vec<Src> = Vec::new();
        if self.ctx.loose_agents {
            files.extend(loose_agent_files(self.root).into_iter().map(Src::plugin));
        }
        if tree::is_dir(self.root, claude::AGENTS_DIR) {
            files.extend(md_files(self.root, claude::AGENTS_DIR)?.map(Src::plugin));
        }
        for p in strings(plugin.get("agents")) {
            let any = |root: &Path, rel: &str| tree::is_file(root, rel) || tree::is_dir(root, rel);
            let Some(src) = self.locate("agents", &p, any) else {
                continue;
            };
            let base = self.base(&src);
            if tree::is_file(base, &src.rel) {
                files.push(src);
            } else {
                let found = md_files(base, &src.rel)?;
                files.extend(found.map(|rel| Src { rel, ..src.clone() }));
            }
        }
        let mut seen = BTreeSet::new();
        files.retain(|f| seen.insert((f.rel.clone(), f.in_collection)));
        Ok(files)
    }

    fn agents(&mut self, plugin: &Map<String, Value>) -> Result<(), String> {
        let mut taken: Vec<String> = Vec::new();
        let xp_personas = self
            .xp
            .get("personas")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        for src in self.agent_files(plugin)? {
            let (file, path) = (src.rel.clone(), self.shown(&src));
            let text = match tree::read(self.base(&src), &file) {
                Ok(t) => t,
                Err(e) => {
                    self.report.lost("agent-unreadable", &path, "", e);
                    continue;
                }
            };
            let fm = frontmatter::parse(&text);
            if fm.mode == ParseMode::Absent {
                // Not an agent (a README, a prompt fragment): carried with the other files.
                let kept = if src.in_collection {
                    "not carried (it lies outside the plugin folder)".to_string()
                } else {
                    format!("kept as a file under {FILES_DIR}/")
                };
                self.report.reinterpreted(
                    "not-an-agent",
                    &path,
                    "",
                    format!("no frontmatter, so not an agent; {kept}"),
                );
                continue;
            }
            if !src.in_collection {
                self.consumed.insert(file.clone());
            }
            if fm.mode == ParseMode::Lenient {
                self.report.reinterpreted(
                    "lenient-frontmatter",
                    &path,
                    "",
                    format!(
                        "frontmatter is not strict YAML ({}); read with the lenient key-line scanner, as Claude Code reads it",
                        fm.strict_error.as_deref().unwrap_or("parse error").lines().next().unwrap_or_default()
                    ),
                );
            }
            let xp = text_field(&fm.fields, "name")
                .then(|| fm.fields.get("name").and_then(Value::as_str))
                .flatten()
                .and_then(|n| xp_personas.get(n))
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default();
            let kept = agent_text_kept(&fm, &text);
            // One from the collection goes back to `agents/` (Claude's default), not to a path
            // outside the plugin.
            let file = match file.rsplit_once('/') {
                Some((_, base)) if src.in_collection => format!("{}/{base}", claude::AGENTS_DIR),
                _ => file,
            };
            let persona = self.agent(&file, &path, fm, &xp, &mut taken);
            self.keep_agent_text(&persona, kept);
            self.pack.personas.push(persona);
        }
        // A pack that went through Claude gets its persona order back.
        let order = strings(self.xp.get("order"));
        if !order.is_empty() {
            let agents = self
                .ext
                .get("agents")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default();
            let rank = |p: &Persona| {
                let claude = agents
                    .get(p.name())
                    .and_then(|a| a.get("name"))
                    .and_then(Value::as_str)
                    .unwrap_or(p.name());
                order.iter().position(|o| o == claude).unwrap_or(usize::MAX)
            };
            self.pack.personas.sort_by_key(rank);
        }
        Ok(())
    }

    /// One agent file -> one persona, and its `x-claude.agents.<persona>` entry.
    fn agent(
        &mut self,
        file: &str,
        path: &str,
        fm: frontmatter::Frontmatter,
        xp: &Map<String, Value>,
        taken: &mut Vec<String>,
    ) -> Persona {
        let (original, name) = self.agent_name(file, path, &fm, xp, taken);
        let mut fields = Map::new();
        let mut agent = Map::new();
        let mut synthesised: Vec<Value> = Vec::new();
        agent.insert("file".into(), file.into());
        if let Some(o) = &original {
            agent.insert("name".into(), o.clone().into());
        }
        agent.insert(
            "keys".into(),
            Value::Array(fm.fields.keys().map(|k| Value::from(k.clone())).collect()),
        );
        fields.insert("name".into(), name.clone().into());
        let display = self.display_name(path, original.as_deref(), &name, xp, &mut synthesised);
        fields.insert("display_name".into(), display);
        let description = self.description(path, &fm, &name, &mut synthesised);
        fields.insert("description".into(), description.into());

        let mut carried = Map::new();
        match fm.fields.get("model") {
            None => {}
            Some(Value::String(m)) if !m.contains(',') => {
                agent.insert("model".into(), m.clone().into());
                if let Some(id) = self.persona_model(path, &name, m) {
                    fields.insert("model".into(), id.into());
                }
            }
            Some(other) => {
                carried.insert("model".into(), other.clone());
                if let Some((first, rest)) = convert_kit::models::first_of_list(other)
                    && let Some(id) = self.persona_model(path, &name, &first)
                {
                    fields.insert("model".into(), id.into());
                    if !rest.is_empty() {
                        self.report.lost(
                            "model-list",
                            path,
                            "model",
                            format!("a list of models: the persona runs `{first}`; the fall-backs {} have no persona slot (kept in `{}.agents.{name}`)", rest.join(", "), self.host.ext_key()),
                        );
                    }
                }
            }
        }
        if let Some(m) = xp.get("fields").and_then(|f| f.get("model"))
            && !fields.contains_key("model")
        {
            fields.insert("model".into(), m.clone());
        }
        if xp.get("model").and_then(Value::as_str) == Some("defaults") {
            // The writer materialised the pack default into the agent: the persona had none.
            fields.remove("model");
        }
        self.carry_agent_keys(path, &name, &fm, &mut carried);
        self.agent_mcp_servers(path, &fm, &mut fields);
        let tools = policy::to_tool_policy(&fm.fields).policy;
        if !tools.is_empty() {
            fields.insert(policy::PERSONA_KEY.into(), Value::Object(tools));
        }
        if !carried.is_empty() {
            agent.insert("fields".into(), Value::Object(carried));
        }
        if !synthesised.is_empty() {
            agent.insert("synthesised".into(), Value::Array(synthesised));
        }
        if fm.mode == ParseMode::Lenient {
            agent.insert("lenient".into(), true.into());
        }
        restore_persona_fields(&mut fields, xp);

        let mut body = fm.body;
        if let Some(block) = self.xp.get("instructions").and_then(Value::as_str) {
            let block = crate::carry::instructions_block(block);
            if let Some(stripped) = body.strip_suffix(&block) {
                body = stripped.to_string();
            }
        }
        object(&mut self.ext, "agents").insert(name.clone(), Value::Object(agent));
        let file = xp
            .get("file")
            .and_then(Value::as_str)
            .and_then(|f| clean_path(f).ok())
            .filter(|f| f.starts_with("agents/") && f.ends_with(".md"))
            .unwrap_or_else(|| format!("agents/{name}.persona.md"));
        Persona {
            file,
            fields,
            body,
            mode: fm.mode,
        }
    }

    /// Adds what [`agent_text_kept`] found to the agent's `<ext>.agents.<persona>` entry.
    fn keep_agent_text(&mut self, persona: &Persona, keep: Map<String, Value>) {
        if keep.is_empty() {
            return;
        }
        let Some(Value::Object(agents)) = self.ext.get_mut("agents") else {
            return;
        };
        if let Some(Value::Object(entry)) = agents.get_mut(persona.name()) {
            entry.extend(keep);
        }
    }

    /// The agent's `name` as written, and the persona name: the one a pack -> Claude conversion
    /// kept, else a slug of the agent's name (or its file's), unique among the personas.
    fn agent_name(
        &mut self,
        file: &str,
        path: &str,
        fm: &frontmatter::Frontmatter,
        xp: &Map<String, Value>,
        taken: &mut Vec<String>,
    ) -> (Option<String>, String) {
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
            .map(str::to_string);
        let base = original
            .clone()
            .filter(|n| !n.trim().is_empty())
            .unwrap_or_else(|| stem.clone());
        let wanted = xp
            .get("name")
            .and_then(Value::as_str)
            .map(str::to_string)
            .or_else(|| {
                // A name that is already a persona name is kept; one the converter makes up is
                // lowercase (the original comes back on the way out from `x-claude`).
                if slug::is_valid(&base, Rules::Persona) {
                    Some(base.clone())
                } else {
                    slug::normalise(&base.to_lowercase(), Rules::Persona)
                }
            })
            .unwrap_or_else(|| "agent".to_string());
        let name = unique(&wanted, taken);
        match &original {
            None => self.report.synthesised(
                "name-synthesised",
                path,
                "name",
                format!("the agent has no `name`; named it `{name}` after its file"),
            ),
            Some(o) if *o != name => {
                self.report
                    .normalised("name-normalised", path, "name", format!("{o} -> {name}"))
            }
            _ => {}
        }
        (original, name)
    }

    /// `display_name`: the one a pack -> Claude conversion kept, else the agent's name when it
    /// is not a slug, else the persona name title-cased.
    fn display_name(
        &mut self,
        path: &str,
        original: Option<&str>,
        name: &str,
        xp: &Map<String, Value>,
        synthesised: &mut Vec<Value>,
    ) -> Value {
        match xp.get("fields").and_then(|f| f.get("display_name")) {
            Some(d) => d.clone(),
            None => {
                let d = match original {
                    Some(o) if !slug::is_valid(o, Rules::Persona) => o.trim().to_string(),
                    _ => title_case(name),
                };
                synthesised.push("display_name".into());
                self.report.synthesised(
                    "display-name-derived",
                    path,
                    "display_name",
                    format!("personas need a `display_name`: `{d}`"),
                );
                d.into()
            }
        }
    }

    /// `description`: the agent's, else the body's first line.
    fn description(
        &mut self,
        path: &str,
        fm: &frontmatter::Frontmatter,
        name: &str,
        synthesised: &mut Vec<Value>,
    ) -> String {
        match fm.fields.get("description") {
            Some(Value::String(d)) if !d.trim().is_empty() => d.clone(),
            other => {
                let d = first_line(&fm.body, 200).unwrap_or_else(|| format!("Claude agent {name}"));
                synthesised.push("description".into());
                let what = if other.is_some() {
                    "an empty or non-text"
                } else {
                    "no"
                };
                self.report.synthesised(
                    "description-synthesised",
                    path,
                    "description",
                    format!(
                        "the agent has {what} `description`; used `{}`",
                        d.chars().take(60).collect::<String>()
                    ),
                );
                d
            }
        }
    }

    /// The persona `model` for the agent's model `m`, if it has one.
    fn persona_model(&mut self, path: &str, name: &str, m: &str) -> Option<String> {
        let key = self.host.ext_key();
        match model::to_persona(m) {
            ToPersona::Model { id, alias } => {
                if alias {
                    self.report.reinterpreted(
                        "model-alias-pinned",
                        path,
                        "model",
                        format!("`{m}` -> `{id}`: Claude's alias moves with releases, the persona pins today's model"),
                    );
                } else {
                    self.report.normalised(
                        "model-id-prefixed",
                        path,
                        "model",
                        format!("{m} -> {id}"),
                    );
                }
                Some(id)
            }
            ToPersona::Inherit => {
                self.report.reinterpreted(
                    "model-inherit",
                    path,
                    "model",
                    "`inherit`: the persona has no `model`, so the pack default or the runtime's model applies",
                );
                None
            }
            ToPersona::Unknown => {
                // Never a silent fall-back to the runtime's model: the operator hears of it.
                self.report.lost(
                    "model-unknown",
                    path,
                    "model",
                    format!("`{m}` is not a model this converter knows (a typo?); the persona gets no `model`, so the runtime's applies; the value is kept in `{key}.agents.{name}`"),
                );
                None
            }
        }
    }

    /// What became of the names of an agent's `tools`: rewritten into the policy's vocabulary
    /// (Copilot's `search` is `kind:search`), or left out because no runtime has them. Left out
    /// of an allow list that keeps other names, an unmapped name costs nothing (no runtime could
    /// run it); when none is left the agent runs without the restriction, which is lost.
    fn report_tool_names(&mut self, path: &str, name: &str, tools: &policy::Mapped) {
        let key = self.host.ext_key();
        if !tools.mapped.is_empty() {
            let pairs: Vec<String> = tools
                .mapped
                .iter()
                .map(|(from, to)| format!("`{from}` -> `{to}`"))
                .collect();
            self.report.normalised(
                "tool-names-mapped",
                path,
                "tools",
                format!(
                    "tool names of another vocabulary, as the policy names them: {}",
                    pairs.join(", ")
                ),
            );
        }
        if tools.unmapped.is_empty() {
            return;
        }
        let list = tools
            .unmapped
            .iter()
            .map(|n| format!("`{n}`"))
            .collect::<Vec<_>>()
            .join(", ");
        if tools.policy.contains_key("allow") {
            self.report.reinterpreted(
                "tool-unmapped",
                path,
                "tools",
                format!("{list}: no agent runtime apiary runs has such a tool, so it is left out of the allow list (kept in `{key}.agents.{name}`)"),
            );
        } else {
            self.report.lost(
                "tool-unmapped",
                path,
                "tools",
                format!("{list}: no agent runtime apiary runs has such a tool, so no allow list is left to enforce and the persona may use any tool; add `x-tool-policy` `allow` entries by hand (kept in `{key}.agents.{name}`)"),
            );
        }
    }

    /// Copilot's per-agent `mcp-servers` -> the persona's `mcp_servers` (`{name, …server}`), each
    /// server as the pack's `.mcp.json` servers are: `local` is stdio, a transport persona
    /// runtimes lack is lost, keys the pack has no slot for (Copilot's `tools` filter) are
    /// carried with the agent's other keys.
    fn agent_mcp_servers(
        &mut self,
        path: &str,
        fm: &frontmatter::Frontmatter,
        fields: &mut Map<String, Value>,
    ) {
        let Some(value) = fm.fields.get(COPILOT_MCP) else {
            return;
        };
        let key = self.host.ext_key();
        let Some(servers) = value.as_object() else {
            self.report.lost(
                "mcp-invalid",
                path,
                COPILOT_MCP,
                format!("`{COPILOT_MCP}` is not a map of servers; not converted (kept in `{key}.agents`)"),
            );
            return;
        };
        let mut list = Vec::new();
        for (server, config) in servers {
            let Some(config) = config.as_object() else {
                self.report.lost(
                    "mcp-invalid",
                    path,
                    &format!("{COPILOT_MCP}.{server}"),
                    format!("MCP server `{server}` is not an object; dropped"),
                );
                continue;
            };
            let mut config = config.clone();
            if config.get("type").and_then(Value::as_str) == Some("local") {
                config.insert("type".into(), "stdio".into());
            }
            if let Err(why) = mcp::usable_in_pack(&config) {
                self.report.lost(
                    "mcp-transport-unsupported",
                    path,
                    &format!("{COPILOT_MCP}.{server}"),
                    format!("MCP server `{server}` has {why}; the persona goes without it (kept in `{key}.agents`)"),
                );
                continue;
            }
            let (config, other) = mcp::split_claude_only(config);
            for k in other.keys() {
                let what = if k == "tools" {
                    "Copilot's filter of the server's tools: the persona gets all of them (use `x-tool-policy` to narrow)"
                } else {
                    "no slot in a persona's server entry"
                };
                self.report.reinterpreted(
                    "mcp-field-ignored",
                    path,
                    &format!("{COPILOT_MCP}.{server}.{k}"),
                    format!("MCP server `{server}`: `{k}` is {what}; kept in `{key}.agents`"),
                );
            }
            let mut entry = Map::new();
            entry.insert("name".into(), server.clone().into());
            entry.extend(config);
            list.push(Value::Object(entry));
        }
        if !list.is_empty() {
            self.report.reinterpreted(
                "mcp-servers-mapped",
                path,
                COPILOT_MCP,
                format!(
                    "`{COPILOT_MCP}` became the persona's `mcp_servers` ({} server(s)), started for this persona only",
                    list.len()
                ),
            );
            fields.insert(
                apiary_schema::persona::MCP_SERVERS.into(),
                Value::Array(list),
            );
        }
    }

    /// Agent keys with no persona slot (and a name or description that is not text) go to
    /// `carried`.
    fn carry_agent_keys(
        &mut self,
        path: &str,
        name: &str,
        fm: &frontmatter::Frontmatter,
        carried: &mut Map<String, Value>,
    ) {
        let key = self.host.ext_key();
        let tools = policy::to_tool_policy(&fm.fields);
        self.report_tool_names(path, name, &tools);
        for (k, v) in fm
            .fields
            .iter()
            .filter(|(k, _)| !AGENT_MAPPED.contains(&k.as_str()))
        {
            carried.insert(k.clone(), v.clone());
            if tools.carried.contains(k) {
                policy::report_carried(&mut self.report, path, k);
                continue;
            }
            if k == "tools" && !tools.unmapped.is_empty() {
                // Reported by `report_tool_names`.
                continue;
            }
            if k == COPILOT_MCP {
                // Becomes the persona's `mcp_servers` (`agent_mcp_servers`).
                continue;
            }
            if policy::restricts(k, v) {
                let kept_in = format!("{key}.agents.{name}");
                policy::report_lost(&mut self.report, path, k, &kept_in);
                continue;
            }
            let why = match k.as_str() {
                k if policy::is_policy_key(k) => "it grants no restriction",
                "skills" => {
                    "Claude preloads these skills; persona packs load skills on demand and give every persona the pack's unclaimed skills"
                }
                "color" => "persona packs have no colour",
                "hooks" | "mcpServers" => {
                    "Claude ignores it in plugin agents and personas have no Claude equivalent"
                }
                _ => "persona frontmatter has no such field",
            };
            self.report.reinterpreted(
                "carried-in-extension",
                path,
                k,
                format!("`{k}`: {why}; kept in `{key}.agents.{name}`"),
            );
        }
        if matches!(fm.fields.get("name"), Some(v) if !v.is_string()) {
            carried.insert("name".into(), fm.fields["name"].clone());
        }
        if matches!(fm.fields.get("description"), Some(v) if !v.is_string()) {
            carried.insert("description".into(), fm.fields["description"].clone());
        }
    }

    fn mcp(&mut self, plugin: &Map<String, Value>) -> Result<(), String> {
        let mut info = Map::new();
        let default_file = match self.host {
            Host::Cursor => "mcp.json",
            _ => claude::MCP_CONFIG,
        };
        let (sources, inline_names) = self.mcp_sources(plugin, default_file);
        let mut inactive = Map::new();
        let mut fields = Map::new();
        for (rel, value, inline) in sources {
            let path = self.at(&rel);
            let Some((servers, wrapped)) = mcp::servers_of(&value) else {
                self.report.lost(
                    "mcp-invalid",
                    &path,
                    "",
                    "not an MCP server map (`mcpServers` or a flat map of server objects); dropped",
                );
                continue;
            };
            if !inline && rel != default_file {
                // A file the manifest names: the way back writes its servers to it again.
                let names: Vec<Value> = servers.keys().cloned().map(Value::from).collect();
                object(&mut info, "files").insert(
                    rel.clone(),
                    convert_kit::json!({ "wrapped": wrapped, "servers": names }),
                );
            }
            if !inline && rel == default_file {
                info.insert("file".into(), rel.clone().into());
                info.insert("wrapped".into(), wrapped.into());
                if !wrapped {
                    self.report.normalised(
                        "mcp-wrapped",
                        &path,
                        "",
                        "a flat server map, written under `mcpServers` as persona packs expect",
                    );
                }
            }
            self.mcp_servers(servers, &path, &mut inactive, &mut fields);
        }
        if !inline_names.is_empty() {
            info.insert(
                "inline".into(),
                Value::Array(inline_names.into_iter().map(Value::from).collect()),
            );
        }
        if !inactive.is_empty() {
            info.insert("inactive".into(), Value::Object(inactive));
        }
        if !fields.is_empty() {
            info.insert("fields".into(), Value::Object(fields));
        }
        if !info.is_empty() {
            self.ext.insert("mcp".into(), Value::Object(info));
        }
        Ok(())
    }

    /// The MCP server maps to read, as (file, value, inline in the manifest): the manifest's
    /// inline ones, then the default file and the files the manifest names. Also the names of
    /// the inline servers.
    fn mcp_sources(
        &mut self,
        plugin: &Map<String, Value>,
        default_file: &str,
    ) -> (Vec<(String, Value, bool)>, Vec<String>) {
        let mut sources: Vec<(String, Value, bool)> = Vec::new();
        // (the plugin path it is read as, where it is read from)
        let mut files = vec![(default_file.to_string(), Src::plugin(default_file))];
        let mut inline_names = Vec::new();
        let declared = match plugin.get("mcpServers") {
            Some(Value::Array(items)) => items.clone(),
            Some(v) => vec![v.clone()],
            None => Vec::new(),
        };
        for item in declared {
            match item {
                Value::String(p) if p.contains("://") || p.ends_with(".mcpb") => {
                    self.report.lost(
                        "mcp-bundle-unsupported",
                        &self.at(self.host.manifest()),
                        "mcpServers",
                        format!("`{p}` is an MCP bundle or URL; persona packs cannot install it"),
                    );
                }
                // The default file, read anyway (its absence loses nothing).
                Value::String(p) if clean_path(&p).is_ok_and(|r| r == default_file) => {}
                Value::String(p) => {
                    let Some(src) = self.locate("mcpServers", &p, tree::is_file) else {
                        continue;
                    };
                    let at = published_at(&p, &src);
                    if src.in_collection {
                        self.repoint_kept("mcpServers", &p, &at);
                    }
                    if !files.iter().any(|(f, _)| *f == at) {
                        files.push((at, src));
                    }
                }
                Value::Object(map) => {
                    let value = Value::Object(map);
                    if let Some((servers, _)) = mcp::servers_of(&value) {
                        inline_names.extend(servers.keys().cloned());
                    }
                    sources.push((self.host.manifest().to_string(), value, true));
                }
                _ => {}
            }
        }
        for (rel, src) in &files {
            let base = self.base(src).to_path_buf();
            if !tree::is_file(&base, &src.rel) {
                continue; // the default file, absent; a listed one was reported by `locate`
            }
            let read = tree::read(&base, &src.rel).and_then(|t| {
                let v = serde_json::from_str::<Value>(&t)
                    .map_err(|e| format!("{rel}: invalid JSON: {e}"))?;
                Ok((t, v))
            });
            match read {
                Ok((text, v)) => {
                    if !src.in_collection {
                        self.consumed.insert(rel.clone());
                    }
                    self.keep_text(rel, &text, &v);
                    sources.push((rel.clone(), v, false));
                }
                Err(e) => self.report.lost("mcp-invalid", &self.shown(src), "", e),
            }
        }
        (sources, inline_names)
    }

    /// One map's servers into the pack: the first definition of a name wins; a server the pack
    /// cannot run is kept aside in `inactive`, the keys a pack server has no place for in
    /// `fields`.
    fn mcp_servers(
        &mut self,
        servers: Map<String, Value>,
        path: &str,
        inactive: &mut Map<String, Value>,
        fields: &mut Map<String, Value>,
    ) {
        let key = self.host.ext_key();
        for (name, config) in servers {
            let Value::Object(config) = config else {
                continue;
            };
            if self.pack.mcp_servers.iter().any(|s| s.name == name) || inactive.contains_key(&name)
            {
                self.report.lost(
                    "mcp-duplicate",
                    path,
                    &format!("mcpServers.{name}"),
                    format!("MCP server `{name}` is defined twice; the first definition is kept"),
                );
                continue;
            }
            if let Err(why) = mcp::usable_in_pack(&config) {
                // The personas go without the server: lost at run time, even though the way
                // back restores it.
                self.report.lost(
                    "mcp-transport-unsupported",
                    path,
                    &format!("mcpServers.{name}"),
                    format!("MCP server `{name}` has {why}: the personas go without it (kept inactive in `{key}.mcp.inactive` for the way back; rewrite it as stdio or streamable HTTP to use it)"),
                );
                inactive.insert(name, Value::Object(config));
                continue;
            }
            let kept_in = format!("{key}.mcp.fields.{name}");
            mcp::report_claude_only(&config, &name, path, &kept_in, &mut self.report);
            let (config, claude_only) = mcp::split_claude_only(config);
            if !claude_only.is_empty() {
                fields.insert(name.clone(), Value::Object(claude_only));
            }
            self.pack.mcp_servers.push(McpServer { name, config });
        }
    }

    /// Claude hooks are an event map, not persona lifecycle hooks: their files are carried
    /// (disabled) with the rest; here the report says what they were. Lifecycle hooks a previous
    /// pack -> Claude conversion lifted come back from `x-persona`.
    fn hooks(&mut self, plugin: &Map<String, Value>) {
        if let Some(hooks) = self.xp.get("hooks").cloned() {
            for command in pack::hook_commands(&hooks) {
                let rel = command.trim_start_matches("./").to_string();
                if let Ok(bytes) = tree::read_bytes(self.root, &rel) {
                    self.consumed.insert(rel.clone());
                    self.pack.hook_files.push((rel, bytes));
                }
            }
            self.pack.hooks = Some(hooks);
            if self.xp.get("hooks_json").and_then(Value::as_str) == Some("generated") {
                self.consumed.insert(claude::HOOKS_CONFIG.into());
            }
        }
        if let Some(v) = plugin.get("hooks").filter(|v| v.is_object()) {
            let events = events_phrase(&hook_events(v));
            self.report.reinterpreted(
                "hooks-quarantined",
                &self.at(self.host.manifest()),
                "hooks",
                format!(
                    "inline {} hooks{events} are an event map, not persona lifecycle hooks: kept disabled in `{}.plugin.hooks`",
                    self.host.label(),
                    self.host.ext_key()
                ),
            );
        }
    }

    /// Pack instructions: from `x-persona` (a pack that went through Claude), or Gemini's
    /// context file.
    fn instructions(&mut self, plugin: &Map<String, Value>) {
        if let Some(text) = self.xp.get("instructions").and_then(Value::as_str) {
            self.pack.instructions = Some(text.to_string());
            return;
        }
        if self.host != Host::Gemini {
            return;
        }
        let names = match plugin.get("contextFileName") {
            None => vec!["GEMINI.md".to_string()],
            v => strings(v),
        };
        let mut parts = Vec::new();
        for name in names {
            let Ok(rel) = clean_path(&name) else { continue };
            if let Ok(text) = tree::read(self.root, &rel) {
                self.consumed.insert(rel.clone());
                self.report.reinterpreted(
                    "context-file-as-instructions",
                    &self.at(&rel),
                    "",
                    "Gemini's context file becomes the pack instructions (given to every persona)",
                );
                parts.push(text);
            }
        }
        if !parts.is_empty() {
            self.pack.instructions = Some(parts.join("\n\n"));
        }
    }

    /// A tree that is no plugin at all (no manifest, agents, skills or MCP servers) is refused,
    /// saying which layout was expected, rather than converted to a pack of one made-up persona.
    fn require_content(&self, plugin: &Map<String, Value>) -> Result<(), String> {
        let has_manifest = self.ext.get("manifest").and_then(Value::as_str) != Some("none");
        let empty = self.pack.personas.is_empty()
            && self.pack.skills.is_empty()
            && self.pack.mcp_servers.is_empty();
        // A bare SKILL.md (an Agent Skills folder) keeps its old path: carried, with a persona
        // synthesised around it.
        let bare_skill = has_skill_md(self.root, "");
        if !empty || (has_manifest && !plugin.is_empty()) || bare_skill {
            return Ok(());
        }
        if self.ctx.loose_agents {
            return Err("no agent files here: expected `.md` files with `name` and `description` frontmatter in the folder or its subfolders (or one such file)".into());
        }
        let loose = loose_agent_files(self.root).len();
        let hint = if loose > 0 {
            format!(
                "; the {loose} loose agent file(s) are the `agents-dir` layout (--from agents-dir)"
            )
        } else {
            String::new()
        };
        Err(format!(
            "no {} plugin here: expected {}, agents/*.md or skills/<name>/SKILL.md, and found none{hint}",
            self.host.label(),
            self.host.manifest()
        ))
    }

    /// A plugin without agents (skills, commands or MCP only) still needs one persona: one is
    /// synthesised from the plugin's description and marked so the way back leaves it out.
    fn persona_fallback(&mut self, plugin: &Map<String, Value>) {
        if !self.pack.personas.is_empty() {
            return;
        }
        let plugin_name = self
            .pack
            .manifest
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("plugin")
            .to_string();
        let name =
            slug::normalise(&plugin_name, Rules::Persona).unwrap_or_else(|| "assistant".into());
        let description = text(plugin, "description")
            .map(str::to_string)
            .unwrap_or_else(|| format!("Assistant for the {plugin_name} plugin"));
        let mut body = format!(
            "You are the assistant of the `{plugin_name}` {} plugin.\n\n{description}\n",
            self.host.label()
        );
        if !self.pack.skills.is_empty() {
            body.push_str("\nSkills you can load:\n");
            for s in &self.pack.skills {
                body.push_str(&format!("- `{}`: {}\n", s.name, s.description));
            }
        }
        let mut fields = Map::new();
        fields.insert("name".into(), name.clone().into());
        fields.insert("display_name".into(), title_case(&plugin_name).into());
        fields.insert("description".into(), description.into());
        self.report.synthesised(
            "persona-synthesised",
            &self.at(""),
            "",
            format!("the plugin has no agents; persona `{name}` was synthesised from its description so the pack loads"),
        );
        self.ext
            .insert("synthesised_persona".into(), name.clone().into());
        self.pack.personas.push(Persona {
            file: format!("agents/{name}.persona.md"),
            fields,
            body,
            mode: ParseMode::Strict,
        });
    }

    /// Every file not mapped: documentation at the root stays there (the first list), the rest
    /// is carried (the second).
    fn rest(&mut self) -> Result<(Files, Files), String> {
        let mut docs = Vec::new();
        let mut carried = Vec::new();
        let mut groups: Vec<(String, usize)> = Vec::new();
        for rel in tree::walk(self.root, "")? {
            if self.consumed.contains(&rel) {
                continue;
            }
            let bytes = match tree::read_bytes(self.root, &rel) {
                Ok(b) => b,
                Err(e) => {
                    self.report.lost("file-unreadable", &self.at(&rel), "", e);
                    continue;
                }
            };
            if !rel.contains('/') && is_documentation(&rel) {
                docs.push((rel, bytes));
                continue;
            }
            let top = rel.split('/').next().unwrap_or(&rel).to_string();
            match groups.iter_mut().find(|(t, _)| *t == top) {
                Some((_, n)) => *n += 1,
                None => groups.push((top, 1)),
            }
            carried.push((rel, bytes));
        }
        for (top, n) in groups {
            let hooks_note;
            let (code, what) = match top.as_str() {
                claude::COMMANDS_DIR => (
                    "commands-carried",
                    "slash commands: persona packs have none",
                ),
                claude::HOOKS_DIR => {
                    let events = tree::read_json(self.root, claude::HOOKS_CONFIG)
                        .map(|v| events_phrase(&hook_events(&v)))
                        .unwrap_or_default();
                    hooks_note = format!(
                        "{} hooks{events} are an event map, not persona lifecycle hooks: carried disabled, enable by hand after review",
                        self.host.label()
                    );
                    ("hooks-quarantined", hooks_note.as_str())
                }
                claude::LSP_CONFIG => ("lsp-carried", "LSP servers: persona packs have none"),
                claude::OUTPUT_STYLES_DIR
                | claude::THEMES_DIR
                | claude::MONITORS_DIR
                | claude::SETTINGS
                | claude::BIN_DIR => (
                    "component-carried",
                    "a Claude component persona packs have no slot for",
                ),
                _ if n == 1 && looks_like_agent(self.root, &top) => (
                    "agent-unlisted",
                    "has agent frontmatter but is neither under agents/ nor listed in the manifest, so Claude does not load it as an agent either",
                ),
                _ => ("file-carried", "no persona pack slot"),
            };
            self.report.reinterpreted(
                code,
                &self.at(&top),
                "",
                format!(
                    "{top} ({n} file{}): {what}; kept verbatim under {FILES_DIR}/ for the way back",
                    if n == 1 { "" } else { "s" }
                ),
            );
        }
        carried.append(&mut self.collected);
        if !carried.is_empty() {
            self.ext.insert("files".into(), FILES_DIR.into());
        }
        Ok((docs, carried))
    }
}

/// What the writer's YAML would not give back of an agent file: the frontmatter text as written
/// (quoted scalars, inline lists, comments, lenient lines) and `final_newline: false` for a file
/// that does not end in one. The way back uses them while the agent's fields are unchanged.
fn agent_text_kept(fm: &frontmatter::Frontmatter, text: &str) -> Map<String, Value> {
    let mut keep = Map::new();
    let Some((source, _)) = frontmatter::split(text) else {
        return keep;
    };
    if frontmatter::render(&fm.fields, "") != format!("---\n{source}---\n") {
        keep.insert("frontmatter".into(), source.into());
    }
    if !fm.body.is_empty() && !text.ends_with('\n') {
        keep.insert("final_newline".into(), false.into());
    }
    keep
}

/// Persona-only fields a previous pack -> Claude conversion kept, in their original order.
fn restore_persona_fields(fields: &mut Map<String, Value>, xp: &Map<String, Value>) {
    if let Some(Value::Object(extra)) = xp.get("fields") {
        for (k, v) in extra {
            if k != "display_name" && k != "model" {
                fields.insert(k.clone(), v.clone());
            }
        }
    }
    if let Some(Value::Array(order)) = xp.get("keys") {
        let mut ordered = Map::new();
        for k in order.iter().filter_map(Value::as_str) {
            if let Some(v) = fields.remove(k) {
                ordered.insert(k.to_string(), v);
            }
        }
        ordered.extend(std::mem::take(fields));
        *fields = ordered;
    }
}

/// The `.md` files under `dir` of `root`.
fn md_files(root: &Path, dir: &str) -> Result<impl Iterator<Item = String>, String> {
    Ok(tree::walk(root, dir)?
        .into_iter()
        .filter(|f| f.ends_with(".md")))
}

/// ` (A, B)` for the events named, nothing when none are (a hooks folder of scripts only).
fn events_phrase(events: &[String]) -> String {
    if events.is_empty() {
        String::new()
    } else {
        format!(" ({})", events.join(", "))
    }
}

/// Event names of a Claude hooks value (`{hooks: {Event: …}}` or the bare event map).
fn hook_events(v: &Value) -> Vec<String> {
    let map = v.get("hooks").and_then(Value::as_object).or(v.as_object());
    let mut events: Vec<String> = map
        .map(|m| m.keys().filter(|k| *k != "description").cloned().collect())
        .unwrap_or_default();
    events.sort();
    events
}

/// `.md` files with `name` and `description` frontmatter, documentation excluded: the agents of
/// an `agents-dir` folder, at its top and in its subfolders (a team folder grouped by topic), but
/// not inside a skill (a folder with a SKILL.md), `agents/` (read as such anyway), `skills/` or a
/// hidden folder.
pub fn loose_agent_files(root: &Path) -> Vec<String> {
    let mut files: Vec<String> = tree::walk(root, "")
        .unwrap_or_default()
        .into_iter()
        .filter(|f| {
            let mut parts: Vec<&str> = f.split('/').collect();
            let name = parts.pop().unwrap_or_default();
            let top = parts.first().copied();
            let excluded = (parts.is_empty() && is_documentation(name))
                || name.eq_ignore_ascii_case("SKILL.md")
                || matches!(top, Some(claude::AGENTS_DIR | claude::SKILLS_DIR))
                || parts.iter().any(|p| p.starts_with('.'))
                || (1..=parts.len()).any(|n| has_skill_md(root, &parts[..n].join("/")));
            !excluded
        })
        .filter(|f| looks_like_agent(root, f))
        .collect();
    files.sort();
    files
}

/// Folder names that say nothing about what is in them (`agents`, `.claude`, `src`…): a plugin
/// named after its folder skips them for the nearest parent that does.
const GENERIC_FOLDERS: &[&str] = &[
    "agents",
    "subagents",
    "agent",
    ".claude",
    "claude",
    ".github",
    "src",
    "plugin",
    "plugins",
    "input",
    "main",
    "master",
    "dist",
    "chatmodes",
    "prompts",
];

/// The plugin name a folder without a manifest gets from its path (`source-name`, the last
/// parts of the input's path): its own name, or a parent's when its own is generic (`team/agents`
/// is `team`); `None` when no part gives a usable name.
pub fn name_from_folder(source: &str) -> Option<String> {
    let parts: Vec<&str> = source.split('/').filter(|p| !p.is_empty()).collect();
    let generic = |p: &str| GENERIC_FOLDERS.iter().any(|g| g.eq_ignore_ascii_case(p));
    let pick = parts.iter().rev().find(|p| !generic(p)).or(parts.last())?;
    slug::normalise(pick, Rules::AgentPlugins)
}

/// A markdown file with `name` and `description` frontmatter.
fn looks_like_agent(root: &Path, rel: &str) -> bool {
    rel.ends_with(".md")
        && tree::read(root, rel).is_ok_and(|t| {
            let fm = frontmatter::parse(&t);
            text_field(&fm.fields, "name") && text_field(&fm.fields, "description")
        })
}

fn has_skill_md(root: &Path, dir: &str) -> bool {
    let join = |f: &str| {
        if dir.is_empty() {
            f.to_string()
        } else {
            format!("{dir}/{f}")
        }
    };
    tree::is_file(root, &join("SKILL.md")) || tree::is_file(root, &join("skill.md"))
}

fn text_field(fields: &Map<String, Value>, key: &str) -> bool {
    fields
        .get(key)
        .and_then(Value::as_str)
        .is_some_and(|s| !s.trim().is_empty())
}
