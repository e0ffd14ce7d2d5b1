//! The persona pack (the pivot format) as an ordered, in-memory model: read from a tree, write to
//! one. Reading keeps every field as written (unknown keys included) so a converter decides what
//! to carry and what to report; writing lays the pack out as spec §3 does.

use std::path::Path;

use serde_json::{Map, Value};

use apiary_schema::{layout, manifest as keys, mcp, persona};

use crate::frontmatter::{self, ParseMode};
use crate::report::Report;
use crate::slug::{self, Rules};
use crate::tree;

/// Where the manifest lives in a persona pack.
pub const MANIFEST: &str = layout::MANIFEST;
/// The `$schema` apiary writes into persona pack manifests.
pub const SCHEMA: &str = "https://open-plugin-spec.org/schema/v1/plugin.json";
/// Most bytes of skill files a pack model holds in memory.
pub const MAX_SKILL_BYTES: usize = 32 * 1024 * 1024;

/// A persona pack.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Pack {
    /// `.plugin/plugin.json`, every key in file order. `personas`, `mcp_config`,
    /// `pack_instructions` and `hooks_config` are rewritten by [`Pack::write`] to match the files.
    pub manifest: Map<String, Value>,
    pub personas: Vec<Persona>,
    pub skills: Vec<Skill>,
    /// Pack-level MCP servers (`mcpServers` of `.mcp.json`), in file order.
    pub mcp_servers: Vec<McpServer>,
    /// `hooks/hooks.json` (`{on_start, on_stop, on_message}`), when the pack has hooks.
    pub hooks: Option<Value>,
    /// Files a hook entry points at (scripts, `.wasm`), pack-relative, carried as opaque bytes.
    pub hook_files: Vec<(String, Vec<u8>)>,
    /// The text of the pack instructions file.
    pub instructions: Option<String>,
}

/// One persona: its file, frontmatter fields in file order, and body (the system prompt).
#[derive(Debug, Clone, PartialEq)]
pub struct Persona {
    /// Pack-relative path, e.g. `agents/pip.persona.md`.
    pub file: String,
    pub fields: Map<String, Value>,
    pub body: String,
    pub mode: ParseMode,
}

/// One skill directory with all its files.
#[derive(Debug, Clone, PartialEq)]
pub struct Skill {
    /// The directory name (the skill's load key), e.g. `code-review`.
    pub name: String,
    /// `description` from its `SKILL.md` frontmatter (empty when missing).
    pub description: String,
    /// Files relative to the skill directory (`SKILL.md` first), with their bytes.
    pub files: Vec<(String, Vec<u8>)>,
}

/// What [`Skill::normalise_name`] changed: the `name:` declared, the directory it had, the name
/// (and directory) it has now.
#[derive(Debug, Clone, PartialEq)]
pub struct NameChange {
    pub declared: String,
    pub dir: String,
    pub name: String,
}

/// One MCP server as written in `.mcp.json` (`name` is its key there).
#[derive(Debug, Clone, PartialEq)]
pub struct McpServer {
    pub name: String,
    pub config: Map<String, Value>,
}

/// The code of the finding [`Pack::default_channel`] reports.
pub const CHANNEL_DEFAULTED: &str = "channel-defaulted";

impl Pack {
    /// No source format has channels, so a converted pack's personas would subscribe to nothing
    /// and never wake. When no persona subscribes and the manifest's `defaults` name no channel,
    /// the pack gets `defaults.subscribe: ["#<id>"]` (the pack's id as a channel name, so two
    /// converted packs do not share one by accident) and the report says so. Returns the
    /// channel, when it set one.
    pub fn default_channel(&mut self, report: &mut Report) -> Option<String> {
        let sub = apiary_schema::behaviour::SUBSCRIBE;
        if self.personas.iter().any(|p| p.fields.contains_key(sub)) {
            return None;
        }
        let defaults = self.manifest.get(keys::DEFAULTS);
        if defaults.is_some_and(|d| !d.is_object() || d.get(sub).is_some()) {
            return None;
        }
        let id = self
            .manifest
            .get(keys::ID)
            .and_then(Value::as_str)
            .unwrap_or_default();
        let name = slug::normalise(id, Rules::Claude).unwrap_or_else(|| "general".to_string());
        let channel = format!("#{name}");
        let defaults = self
            .manifest
            .entry(keys::DEFAULTS)
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(d) = defaults {
            d.insert(sub.into(), Value::Array(vec![channel.clone().into()]));
        }
        report.synthesised(
            CHANNEL_DEFAULTED,
            MANIFEST,
            "defaults.subscribe",
            format!(
                "the source format has no channels, so every persona listens on `{channel}` (the pack's `defaults.subscribe`); without one they could never wake. Change it to the channels they should answer in"
            ),
        );
        Some(channel)
    }
}

impl Persona {
    /// The persona's `name` field (empty when missing).
    pub fn name(&self) -> &str {
        self.str_field(persona::NAME)
    }

    /// A string field, empty when missing or not a string.
    pub fn str_field(&self, key: &str) -> &str {
        self.fields
            .get(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
    }
}

impl Skill {
    /// Reads a skill directory (`dir` relative to `root`).
    pub fn read(root: &Path, dir: &str) -> Result<Skill, String> {
        let dir = dir.trim_end_matches('/');
        let name = dir.rsplit('/').next().unwrap_or(dir).to_string();
        let mut files = Vec::new();
        let mut total = 0usize;
        for file in tree::walk(root, dir)? {
            let bytes = tree::read_bytes(root, &file)?;
            total += bytes.len();
            if total > MAX_SKILL_BYTES {
                return Err(format!(
                    "skill {dir} is larger than {MAX_SKILL_BYTES} bytes"
                ));
            }
            files.push((file[dir.len()..].trim_start_matches('/').to_string(), bytes));
        }
        files.sort_by_key(|(path, _)| path != "SKILL.md");
        let description = files
            .iter()
            .find(|(path, _)| path == "SKILL.md")
            .and_then(|(_, bytes)| std::str::from_utf8(bytes).ok())
            .map(frontmatter::parse)
            .and_then(|fm| {
                fm.fields
                    .get("description")
                    .and_then(Value::as_str)
                    .map(str::to_string)
            })
            .unwrap_or_default();
        Ok(Skill {
            name,
            description,
            files,
        })
    }

    /// The text of its `SKILL.md`, when it has one.
    pub fn skill_md(&self) -> Option<&str> {
        self.files
            .iter()
            .find(|(path, _)| path == "SKILL.md")
            .and_then(|(_, bytes)| std::str::from_utf8(bytes).ok())
    }

    /// A `namespace:name` in SKILL.md (how a plugin's skills are addressed once installed) whose
    /// last part is the directory's name: rewritten to the plain name, which targets that want
    /// `name` to equal the directory accept. Returns the name it had.
    pub fn strip_namespace(&mut self) -> Option<String> {
        let fm = crate::frontmatter::parse(self.skill_md()?);
        let declared = fm.fields.get("name")?.as_str()?.to_string();
        let (_, plain) = declared.rsplit_once(':')?;
        if plain.trim() != self.name || fm.mode != crate::ParseMode::Strict {
            return None;
        }
        let mut fields = fm.fields.clone();
        fields.insert("name".into(), Value::from(self.name.clone()));
        let text = crate::frontmatter::render(&fields, &fm.body);
        let index = self.files.iter().position(|(p, _)| p == "SKILL.md")?;
        self.files[index].1 = text.into_bytes();
        Some(declared)
    }

    /// Makes the skill loadable under one plain load key equal to its directory, as Agent Skills
    /// and the pack validator want: a namespaced `name:` (`ns:extract-learnings`) loses its
    /// namespace, and a name or directory spelled another way (`extract_learnings`, capitals,
    /// spaces) becomes the skill slug of the declared name. Both the directory ([`Skill::name`])
    /// and `name:` change. `None` when nothing had to (or a SKILL.md that is not strict YAML
    /// or has no `name`, which the caller rewrites first).
    pub fn normalise_name(&mut self) -> Option<NameChange> {
        let fm = crate::frontmatter::parse(self.skill_md()?);
        if fm.mode != crate::ParseMode::Strict {
            return None;
        }
        let declared = fm.fields.get("name")?.as_str()?.to_string();
        if declared == self.name && slug::is_valid(&declared, Rules::Skill) {
            return None;
        }
        let plain = declared
            .rsplit_once(':')
            .map_or(declared.as_str(), |(_, p)| p)
            .trim();
        let name = slug::normalise(plain, Rules::Skill)
            .or_else(|| slug::normalise(&self.name, Rules::Skill))
            .unwrap_or_else(|| "skill".to_string());
        let dir = self.name.clone();
        self.rename(&name);
        Some(NameChange {
            declared,
            dir,
            name,
        })
    }

    /// Moves the skill to directory `name` and sets its SKILL.md `name:` to match (when the
    /// frontmatter is strict YAML; other frontmatter is left as written).
    pub fn rename(&mut self, name: &str) {
        self.name = name.to_string();
        let Some(text) = self.skill_md() else {
            return;
        };
        let fm = crate::frontmatter::parse(text);
        if fm.mode != crate::ParseMode::Strict
            || fm.fields.get("name").and_then(Value::as_str) == Some(name)
        {
            return;
        }
        let mut fields = Map::new();
        fields.insert("name".into(), Value::from(name));
        for (k, v) in fm.fields {
            if k != "name" {
                fields.insert(k, v);
            }
        }
        let text = crate::frontmatter::render(&fields, &fm.body);
        if let Some(index) = self.files.iter().position(|(p, _)| p == "SKILL.md") {
            self.files[index].1 = text.into_bytes();
        }
    }

    /// Writes the skill under `dir` (relative to `root`).
    pub fn write(&self, root: &Path, dir: &str) -> Result<(), String> {
        for (path, bytes) in &self.files {
            tree::write(root, &format!("{dir}/{path}"), bytes)?;
        }
        Ok(())
    }
}

/// Reads the `mcpServers` map of an MCP config file into a list, in file order.
pub fn read_mcp(root: &Path, file: &str) -> Result<Vec<McpServer>, String> {
    let value = tree::read_json(root, file)?;
    let servers = value
        .get(mcp::SERVERS)
        .and_then(Value::as_object)
        .ok_or_else(|| format!("{file}: no `mcpServers` object"))?;
    Ok(servers
        .iter()
        .filter_map(|(name, config)| {
            config.as_object().map(|config| McpServer {
                name: name.clone(),
                config: config.clone(),
            })
        })
        .collect())
}

fn manifest_path(manifest: &Map<String, Value>, key: &str, default: &str) -> String {
    manifest
        .get(key)
        .and_then(Value::as_str)
        .unwrap_or(default)
        .to_string()
}

impl Pack {
    /// A new, empty pack with the three required manifest fields.
    pub fn new(id: &str, name: &str, version: &str) -> Pack {
        let mut manifest = Map::new();
        manifest.insert(keys::SCHEMA.into(), SCHEMA.into());
        manifest.insert(keys::ID.into(), id.into());
        manifest.insert(keys::NAME.into(), name.into());
        manifest.insert(keys::VERSION.into(), version.into());
        Pack {
            manifest,
            ..Pack::default()
        }
    }

    /// Whether `root` looks like a persona pack (a manifest with `personas`).
    pub fn detect(root: &Path) -> bool {
        tree::read_json(root, MANIFEST)
            .ok()
            .is_some_and(|m| m.get(keys::PERSONAS).is_some())
    }

    /// Reads the pack at `root`. Problems that leave a usable pack become findings; a pack that
    /// cannot be read at all is an error.
    pub fn read(root: &Path) -> Result<(Pack, Report), String> {
        let mut report = Report::default();
        let manifest = match tree::read_json(root, MANIFEST)? {
            Value::Object(map) => map,
            _ => return Err(format!("{MANIFEST} is not a JSON object")),
        };
        let mut pack = Pack {
            manifest,
            ..Pack::default()
        };
        pack.read_personas(root, &mut report)?;
        pack.read_skills(root)?;
        let mcp = manifest_path(&pack.manifest, keys::MCP_CONFIG, layout::MCP_CONFIG);
        if tree::is_file(root, &mcp) {
            pack.mcp_servers = read_mcp(root, &mcp)?;
        }
        pack.read_hooks(root)?;
        if let Some(file) = pack
            .manifest
            .get(keys::PACK_INSTRUCTIONS)
            .and_then(Value::as_str)
        {
            match tree::read(root, file) {
                Ok(text) => pack.instructions = Some(text),
                Err(e) => report.lost("missing-file", file, "", e),
            }
        }
        Ok((pack, report))
    }

    /// The persona files the manifest lists.
    fn read_personas(&mut self, root: &Path, report: &mut Report) -> Result<(), String> {
        let files: Vec<String> = match self.manifest.get(keys::PERSONAS) {
            Some(Value::Array(items)) => items
                .iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect(),
            _ => return Err(format!("{MANIFEST} has no `personas` list")),
        };
        for file in files {
            let text = tree::read(root, &file)?;
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
            self.personas.push(Persona {
                file: file.trim_start_matches("./").to_string(),
                fields: fm.fields,
                body: fm.body,
                mode: fm.mode,
            });
        }
        Ok(())
    }

    /// Every directory under `skills/`, then the skills a persona lists outside it (once).
    fn read_skills(&mut self, root: &Path) -> Result<(), String> {
        for name in tree::list(root, layout::SKILLS_DIR) {
            let dir = format!("{}/{name}", layout::SKILLS_DIR);
            if tree::is_dir(root, &dir) {
                self.skills.push(Skill::read(root, &dir)?);
            }
        }
        let listed: Vec<String> = self
            .personas
            .iter()
            .flat_map(|p| {
                p.fields
                    .get(persona::SKILLS)
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default()
            })
            .filter_map(|v| {
                v.as_str()
                    .map(|s| s.trim_start_matches("./").trim_end_matches('/').to_string())
            })
            .collect();
        for dir in listed {
            let name = dir.rsplit('/').next().unwrap_or(&dir).to_string();
            if !self.skills.iter().any(|s| s.name == name) && tree::is_dir(root, &dir) {
                self.skills.push(Skill::read(root, &dir)?);
            }
        }
        Ok(())
    }

    /// The hooks file and the files its commands name.
    fn read_hooks(&mut self, root: &Path) -> Result<(), String> {
        let hooks = manifest_path(&self.manifest, keys::HOOKS_CONFIG, layout::HOOKS_CONFIG);
        if tree::is_file(root, &hooks) {
            let value = tree::read_json(root, &hooks)?;
            for command in hook_commands(&value) {
                let path = command.trim_start_matches("./");
                if tree::is_file(root, path) {
                    self.hook_files
                        .push((path.to_string(), tree::read_bytes(root, path)?));
                }
            }
            self.hooks = Some(value);
        }
        Ok(())
    }

    /// Writes the pack under `root` in the spec §3 layout: `.plugin/plugin.json`,
    /// `agents/<file>`, `skills/<name>/`, `.mcp.json`, `hooks/hooks.json` and `instructions.md`.
    pub fn write(&self, root: &Path) -> Result<(), String> {
        let mut manifest = self.manifest.clone();
        let files: Vec<Value> = self
            .personas
            .iter()
            .map(|p| Value::from(p.file.clone()))
            .collect();
        manifest.insert(keys::PERSONAS.into(), Value::Array(files));
        for persona in &self.personas {
            tree::write(
                root,
                &persona.file,
                frontmatter::render(&persona.fields, &persona.body),
            )?;
        }
        for skill in &self.skills {
            skill.write(root, &format!("{}/{}", layout::SKILLS_DIR, skill.name))?;
        }
        if self.mcp_servers.is_empty() {
            manifest.remove(keys::MCP_CONFIG);
        } else {
            let servers: Map<String, Value> = self
                .mcp_servers
                .iter()
                .map(|s| (s.name.clone(), Value::Object(s.config.clone())))
                .collect();
            let mut file = Map::new();
            file.insert(mcp::SERVERS.into(), Value::Object(servers));
            tree::write_json(root, layout::MCP_CONFIG, &Value::Object(file))?;
            manifest.insert(keys::MCP_CONFIG.into(), layout::MCP_CONFIG.into());
        }
        match &self.hooks {
            Some(hooks) => {
                tree::write_json(root, layout::HOOKS_CONFIG, hooks)?;
                manifest.insert(keys::HOOKS_CONFIG.into(), layout::HOOKS_CONFIG.into());
                for (path, bytes) in &self.hook_files {
                    tree::write(root, path, bytes)?;
                }
            }
            None => {
                manifest.remove(keys::HOOKS_CONFIG);
            }
        }
        match &self.instructions {
            Some(text) => {
                tree::write(root, layout::INSTRUCTIONS, text)?;
                manifest.insert(keys::PACK_INSTRUCTIONS.into(), layout::INSTRUCTIONS.into());
            }
            None => {
                manifest.remove(keys::PACK_INSTRUCTIONS);
            }
        }
        tree::write_json(root, MANIFEST, &Value::Object(manifest))
    }
}

/// The command strings of a lifecycle hooks file, whatever its exact shape (a string or an object
/// with `command` per event, or a list of those).
pub fn hook_commands(hooks: &Value) -> Vec<String> {
    fn collect(value: &Value, out: &mut Vec<String>) {
        match value {
            Value::String(s) => out.push(s.clone()),
            Value::Array(items) => items.iter().for_each(|v| collect(v, out)),
            Value::Object(map) => {
                if let Some(Value::String(command)) = map.get("command") {
                    out.push(command.clone());
                } else {
                    map.values().for_each(|v| collect(v, out));
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    collect(hooks, &mut out);
    // Only the program part of a command line names a file.
    out.into_iter()
        .filter_map(|c| c.split_whitespace().next().map(str::to_string))
        .collect()
}

#[cfg(test)]
mod tests {

    fn skill(dir: &str, md: &str) -> Skill {
        Skill {
            name: dir.into(),
            description: String::new(),
            files: vec![("SKILL.md".into(), md.as_bytes().to_vec())],
        }
    }

    #[test]
    fn a_skill_name_becomes_one_load_key_equal_to_its_folder() {
        let mut s = skill(
            "extract_learnings",
            "---\nname: notes:extract-learnings\ndescription: d\n---\nbody\n",
        );
        let c = s.normalise_name().unwrap();
        assert_eq!(
            (c.declared.as_str(), c.dir.as_str()),
            ("notes:extract-learnings", "extract_learnings")
        );
        assert_eq!(s.name, "extract-learnings");
        assert!(
            s.skill_md()
                .unwrap()
                .starts_with("---\nname: extract-learnings\n")
        );
        let mut s = skill("review", "---\nname: Code Review\ndescription: d\n---\n");
        assert_eq!(s.normalise_name().unwrap().name, "code-review");
        let mut fine = skill("review", "---\nname: review\ndescription: d\n---\n");
        assert!(fine.normalise_name().is_none());
        let mut odd = skill("outils", "---\nname: \"文档\"\ndescription: d\n---\n");
        assert_eq!(odd.normalise_name().unwrap().name, "outils");
    }
    use super::*;

    fn meadow() -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/meadow")
    }

    #[test]
    fn reads_and_rewrites_the_example_pack() {
        let (pack, report) = Pack::read(&meadow()).unwrap();
        assert!(report.is_empty(), "{report:?}");
        assert_eq!(pack.personas.len(), 4);
        assert_eq!(pack.personas[0].name(), "pip");
        assert_eq!(pack.skills.len(), 3);
        assert_eq!(pack.mcp_servers[0].name, "github");
        assert!(pack.instructions.is_some());

        let out = std::env::temp_dir().join(format!("convert-kit-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&out);
        pack.write(&out).unwrap();
        let (again, _) = Pack::read(&out).unwrap();
        assert_eq!(again, pack);
        std::fs::remove_dir_all(&out).unwrap();
    }

    #[test]
    fn refuses_paths_that_leave_the_tree() {
        assert!(tree::join(Path::new("/input"), "../etc/passwd").is_err());
        assert!(tree::join(Path::new("/input"), "/etc/passwd").is_err());
        assert!(tree::join(Path::new("/input"), "./agents/a.md").is_ok());
    }
}
