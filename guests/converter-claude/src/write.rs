//! A persona pack -> a Claude Code plugin.
//!
//! Personas become `agents/<name>.md`; persona fields Claude has no slot for (display name,
//! triggers, subscriptions, temperature…) and pack-only manifest data go into `plugin.json`
//! `x-persona`, so a return trip restores them. Per-persona MCP servers and lifecycle hooks are
//! lifted to plugin level (Claude ignores both in plugin agents), which loses their per-persona
//! scope: reported. What an earlier Claude -> pack conversion carried in `x-claude` (agent keys,
//! the original `plugin.json`, commands, hooks and other files) is put back.

use std::collections::BTreeSet;
use std::path::Path;

use apiary_schema::{hooks, manifest};
use convert_kit::frontmatter;
use convert_kit::pack::{self, Pack, Persona};
use convert_kit::slug::{self, Rules};
use convert_kit::{Map, Report, Value, claude, is_documentation, json, policy, tree};

use crate::carry::{FILES_DIR, PERSONA_KEY, PERSONA_ONLY, instructions_block};
use crate::mcp;
use crate::model::{self, ToClaude, ToPersona};
use crate::util::{clean_path, loadable_agent_name, object, strings, unique};
use crate::xp;

/// Pack manifest keys mapped onto `plugin.json` keys of the same name.
const SAME_KEYS: &[&str] = &[
    manifest::VERSION,
    manifest::DESCRIPTION,
    manifest::AUTHOR,
    manifest::LICENSE,
    manifest::HOMEPAGE,
    manifest::REPOSITORY,
    manifest::KEYWORDS,
];

/// Pack manifest keys the writer derives from the files, never carried.
const FILE_KEYS: &[&str] = manifest::FILE_KEYS;

/// Lifecycle hook point -> Claude event.
const HOOK_EVENTS: &[(&str, &str)] = &[
    (hooks::ON_START, "SessionStart"),
    (hooks::ON_STOP, "SessionEnd"),
    (hooks::ON_MESSAGE, "UserPromptSubmit"),
];

pub fn convert(input: &Path, out: &Path) -> Result<Report, String> {
    let (pack, mut report) = Pack::read(input)?;
    let mut w = Writer {
        input,
        out,
        pack: &pack,
        ext: pack
            .manifest
            .get("x-claude")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default(),
        xp: Map::new(),
        servers: Map::new(),
        report: Report::default(),
        written: BTreeSet::new(),
        agents_moved: false,
        agents_in_place: 0,
        agent_paths: Vec::new(),
    };
    let name = w.plugin_name();
    w.carried_files()?;
    w.skills()?;
    w.pack_mcp();
    w.agents(&name)?;
    w.hooks()?;
    w.mcp_file()?;
    w.plugin_json(&name)?;
    w.leftovers();
    report.extend(w.report);
    Ok(report)
}

struct Writer<'a> {
    input: &'a Path,
    out: &'a Path,
    pack: &'a Pack,
    /// `x-claude` of a pack read from a Claude plugin.
    ext: Map<String, Value>,
    /// `x-persona`, written into `plugin.json`.
    xp: Map<String, Value>,
    /// The `.mcp.json` servers to write.
    servers: Map<String, Value>,
    report: Report,
    /// Output paths written, so carried files never overwrite mapped ones.
    written: BTreeSet<String>,
    /// Some agent could not go back to the file it was read from.
    agents_moved: bool,
    /// How many agents went back to the file they were read from.
    agents_in_place: usize,
    /// The agent files written, in persona order.
    agent_paths: Vec<String>,
}

impl Writer<'_> {
    fn ext_list(&self, key: &str) -> Vec<String> {
        strings(self.ext.get(key))
    }

    fn original_plugin(&self) -> Map<String, Value> {
        self.ext
            .get("plugin")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default()
    }

    fn plugin_name(&mut self) -> String {
        let m = &self.pack.manifest;
        if let Some(n) = self.original_plugin().get("name").and_then(Value::as_str)
            && slug::is_valid(n, Rules::Claude)
            && m.get("name").and_then(Value::as_str) == Some(n)
        {
            return n.to_string();
        }
        let title = m.get("name").and_then(Value::as_str).unwrap_or_default();
        let id = m.get("id").and_then(Value::as_str).unwrap_or_default();
        let name = slug::normalise(title, Rules::Claude)
            .or_else(|| slug::normalise(id.rsplit('.').next().unwrap_or(id), Rules::Claude))
            .unwrap_or_else(|| "persona-pack".to_string());
        if name != title {
            self.report.normalised(
                "name-normalised",
                pack::MANIFEST,
                "name",
                format!("{title} -> {name} (Claude plugin names are lowercase-hyphen); the title is kept in `x-persona`"),
            );
        }
        name
    }

    /// A JSON file's text: as the Claude plugin had it (kept by the reader in `texts`) while it
    /// still holds `value`, else pretty-printed.
    fn json_text(&self, file: &str, value: &Value) -> Result<String, String> {
        let kept = self
            .ext
            .get("texts")
            .and_then(|t| t.get(file))
            .and_then(Value::as_str)
            .filter(|t| serde_json::from_str::<Value>(t).is_ok_and(|v| v == *value));
        match kept {
            Some(text) => Ok(text.to_string()),
            None => Ok(serde_json::to_string_pretty(value).map_err(|e| e.to_string())? + "\n"),
        }
    }

    /// Whether a manifest path list (`"./x/"` or `["./x/a.md", …]`) names only files or
    /// directories this conversion wrote.
    fn all_written(&self, paths: &Value) -> bool {
        let list: Vec<&str> = match paths {
            Value::String(p) => vec![p.as_str()],
            Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
            _ => return false,
        };
        let found = |p: &str| match clean_path(p) {
            Ok(c) if c.is_empty() => false,
            Ok(c) => {
                let dir = format!("{c}/");
                self.written.iter().any(|w| *w == c || w.starts_with(&dir))
            }
            Err(_) => false,
        };
        !list.is_empty()
            && list.len() == paths.as_array().map_or(1, Vec::len)
            && list.into_iter().all(found)
    }

    fn write(&mut self, rel: &str, bytes: impl AsRef<[u8]>) -> Result<(), String> {
        tree::write(self.out, rel, bytes)?;
        self.written.insert(rel.to_string());
        Ok(())
    }

    /// Files an earlier Claude -> pack conversion carried go back to their place, all of them:
    /// the reader kept them "for the way back" (a `.codex-plugin/`, a `templates/` folder its
    /// commands read, tests), and Claude Code ignores top-level entries it does not know.
    fn carried_files(&mut self) -> Result<(), String> {
        if !tree::is_dir(self.input, FILES_DIR) {
            return Ok(());
        }
        for file in tree::walk(self.input, FILES_DIR)? {
            let rel = file[FILES_DIR.len()..].trim_start_matches('/').to_string();
            let bytes = tree::read_bytes(self.input, &file)?;
            self.write(&rel, bytes)?;
        }
        Ok(())
    }

    fn skills(&mut self) -> Result<(), String> {
        let mut taken = Vec::new();
        let bare = self
            .ext
            .get("bare_skill")
            .and_then(Value::as_str)
            .map(str::to_string);
        for skill in &self.pack.skills {
            if bare.as_deref() == Some(skill.name.as_str()) {
                // The plugin was one skill folder: its files go back to the root.
                for (path, bytes) in &skill.files {
                    self.write(path, bytes)?;
                }
                continue;
            }
            let mut skill = skill.clone();
            if let Some(old) = skill.strip_namespace() {
                self.report.normalised(
                    "skill-name-unnamespaced",
                    &format!("skills/{}/SKILL.md", skill.name),
                    "name",
                    format!("`{old}` -> `{}`: Claude adds the plugin's namespace itself and wants the plain name", skill.name),
                );
            }
            // Claude (Agent Skills) wants the directory named after the skill's `name:`, its load key.
            let declared = skill
                .skill_md()
                .map(frontmatter::parse)
                .and_then(|fm| {
                    fm.fields
                        .get("name")
                        .and_then(Value::as_str)
                        .map(str::to_string)
                })
                .filter(|n| slug::is_valid(n, Rules::Skill));
            let wanted = declared.unwrap_or_else(|| skill.name.clone());
            let name = unique(&wanted, &mut taken);
            if name != skill.name {
                self.report.normalised(
                    "skill-dir-renamed",
                    &format!("skills/{}", skill.name),
                    "",
                    format!("skills/{} -> skills/{name} (Claude skills live in a directory named after their `name`)", skill.name),
                );
            }
            let dir = format!("{}/{name}", claude::SKILLS_DIR);
            for (path, bytes) in &skill.files {
                self.write(&format!("{dir}/{path}"), bytes)?;
            }
        }
        Ok(())
    }

    /// Pack-level servers (with their Claude-only keys), plus the inactive ones an earlier
    /// conversion kept aside.
    fn pack_mcp(&mut self) {
        let info = self
            .ext
            .get("mcp")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let inline = strings(info.get("inline"));
        for server in &self.pack.mcp_servers {
            if inline.contains(&server.name) {
                continue; // still defined inline in the restored plugin.json
            }
            let (mut config, renamed) = mcp::to_claude(&server.config);
            // Claude-only keys an earlier conversion kept aside come back.
            if let Some(Value::Object(kept)) = info.get("fields").and_then(|f| f.get(&server.name))
            {
                for (k, v) in kept {
                    config.entry(k.clone()).or_insert_with(|| v.clone());
                }
            }
            if renamed {
                self.report.normalised(
                    "mcp-transport-renamed",
                    claude::MCP_CONFIG,
                    &format!("mcpServers.{}", server.name),
                    "streamable HTTP is `type: http` in Claude",
                );
            }
            self.servers
                .insert(server.name.clone(), Value::Object(config));
        }
        if let Some(Value::Object(inactive)) = info.get("inactive") {
            for (name, config) in inactive {
                self.servers.entry(name.clone()).or_insert(config.clone());
            }
        }
    }

    fn agents(&mut self, plugin_name: &str) -> Result<(), String> {
        let agents = self
            .ext
            .get("agents")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let synthesised = self
            .ext
            .get("synthesised_persona")
            .and_then(Value::as_str)
            .map(str::to_string);
        let defaults = self
            .pack
            .manifest
            .get("defaults")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let mut taken = Vec::new();
        let mut xp_personas = Map::new();
        let instructions = self
            .pack
            .instructions
            .clone()
            .filter(|t| !t.trim().is_empty());
        let pack = self.pack;
        for persona in &pack.personas {
            let pname = persona.name().to_string();
            if synthesised.as_deref() == Some(pname.as_str()) {
                // apiary wrote it, from the plugin's own description: dropping it loses nothing,
                // unless someone has since given it a prompt of their own.
                let untouched = persona.body.starts_with("You are the assistant of the `");
                let message = format!(
                    "persona `{pname}` was synthesised when the Claude plugin was read (it had no agents); not written back"
                );
                if untouched {
                    self.report
                        .reinterpreted("persona-dropped", &persona.file, "", message);
                } else {
                    self.report.lost(
                        "persona-dropped",
                        &persona.file,
                        "",
                        format!("{message}, and its prompt, edited since, goes with it"),
                    );
                }
                continue;
            }
            let ext = agents
                .get(&pname)
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default();
            let (name, entry) = self.agent(
                persona,
                &ext,
                &defaults,
                instructions.as_deref(),
                &mut taken,
            )?;
            if !entry.is_empty() {
                xp_personas.insert(name, Value::Object(entry));
            }
        }
        if let Some(text) = &instructions {
            self.xp.insert("instructions".into(), text.clone().into());
            self.report.reinterpreted(
                "instructions-appended",
                "instructions.md",
                "",
                "Claude plugins have no pack instructions: appended to every agent's prompt (and kept in `x-persona` for the way back)",
            );
        }
        if !xp_personas.is_empty() {
            self.xp
                .insert("personas".into(), Value::Object(xp_personas));
        }
        // Agents back in the files they were read from are read back in their original order.
        if taken.len() > 1
            && self.agents_in_place < taken.len()
            && !xp::reading_order(&self.agent_paths)
        {
            self.xp.insert(
                "order".into(),
                Value::Array(taken.into_iter().map(Value::from).collect()),
            );
        }
        let _ = plugin_name;
        Ok(())
    }

    /// One persona -> `agents/<name>.md`. `ext` is what an earlier conversion kept of the
    /// Claude agent. Returns the agent's name and its `x-persona.personas` entry.
    fn agent(
        &mut self,
        persona: &Persona,
        ext: &Map<String, Value>,
        defaults: &Map<String, Value>,
        instructions: Option<&str>,
        taken: &mut Vec<String>,
    ) -> Result<(String, Map<String, Value>), String> {
        let pname = persona.name().to_string();
        let path = persona.file.clone();
        let name = self.agent_name(&pname, &path, ext, taken);
        let mut fm = Map::new();
        fm.insert("name".into(), name.clone().into());
        let description = persona.str_field("description");
        fm.insert("description".into(), description.into());
        let mut xp_fields = Map::new();
        let from_defaults = self.agent_model(&mut fm, &mut xp_fields, persona, ext, defaults);
        carried_keys(&mut fm, ext);
        self.tool_policy(&mut fm, persona);
        self.preload_skills(&mut fm, persona);
        self.persona_only(&mut xp_fields, persona, ext, &name);
        self.policy_beyond_tools(&mut xp_fields, persona, &fm);
        self.lift_persona_mcp(&name, persona.fields.get("mcp_servers"), &path);

        let mut body = persona.body.clone();
        if let Some(text) = instructions {
            body.push_str(&instructions_block(text));
        }
        let file = self.agent_file(ext, &name);
        self.write(&file, agent_text(&fm, &body, ext))?;

        let mut entry = Map::new();
        if from_defaults && fm.contains_key("model") {
            entry.insert("model".into(), "defaults".into());
        }
        // The reader names the persona after the agent (lowercased when it is no persona name);
        // only another name needs recording.
        let read_back = if slug::is_valid(&name, Rules::Persona) {
            Some(name.clone())
        } else {
            slug::normalise(&name.to_lowercase(), Rules::Persona)
        };
        if read_back.as_deref() != Some(pname.as_str()) {
            entry.insert("name".into(), pname.clone().into());
        }
        if persona.file != format!("agents/{pname}.persona.md") {
            entry.insert("file".into(), persona.file.clone().into());
        }
        let keys: Vec<Value> = persona
            .fields
            .keys()
            .map(|k| Value::from(k.clone()))
            .collect();
        let in_order = xp::reader_order(&persona.fields, &xp_fields);
        // Read back under its own name, the persona gets the same display name derived.
        if !entry.contains_key("name")
            && xp_fields
                .get("display_name")
                .is_some_and(|d| xp::derived_display_name(&pname, d))
        {
            xp_fields.remove("display_name");
        }
        if !xp_fields.is_empty() {
            entry.insert("fields".into(), Value::Object(xp_fields));
        }
        if ext.is_empty() && !in_order {
            entry.insert("keys".into(), Value::Array(keys));
        }
        self.agent_paths.push(file);
        Ok((name, entry))
    }

    /// The persona's `x-tool-policy` as the agent's `tools` / `disallowedTools`, unless the Claude
    /// keys an earlier conversion kept still say the same (then they come back as written).
    fn tool_policy(&mut self, fm: &mut Map<String, Value>, persona: &Persona) {
        let Some(wanted) = persona.fields.get(policy::PERSONA_KEY) else {
            return;
        };
        let kept = policy::to_tool_policy(fm);
        if Value::Object(kept.policy.clone()) == *wanted {
            return;
        }
        for k in &kept.carried {
            fm.remove(k);
        }
        fm.extend(policy::to_claude_keys(wanted));
        if wanted.get("read_only") == Some(&Value::Bool(true)) {
            self.report.reinterpreted(
                "tool-policy-read-only",
                &persona.file,
                "x-tool-policy.read_only",
                "read-only is written as `disallowedTools` naming the tools that write or run",
            );
        }
    }

    /// The agent's name: the Claude original when it still maps to this persona, else a slug;
    /// unique among the agents so far.
    fn agent_name(
        &mut self,
        pname: &str,
        path: &str,
        ext: &Map<String, Value>,
        taken: &mut Vec<String>,
    ) -> String {
        // The original comes back as written, Title Case included: Claude Code loads any name
        // that is one line of text (its docs only recommend lowercase and hyphens).
        let wanted = match ext.get("name").and_then(Value::as_str) {
            Some(o) if slug::is_valid(o, Rules::Claude) || loadable_agent_name(o) => o.to_string(),
            _ => slug::normalise(pname, Rules::Claude).unwrap_or_else(|| "agent".into()),
        };
        let name = unique(&wanted, taken);
        let original = ext.get("name").and_then(Value::as_str);
        if original != Some(name.as_str()) && name != pname {
            self.report.normalised(
                "name-normalised",
                path,
                "name",
                format!("{pname} -> {name}"),
            );
        }
        name
    }

    /// Where the agent goes: back to the file it was read from (a relative `.md` path nothing
    /// else took), else `agents/<name>.md`, with a slug of the name when it is not one. An agent
    /// that cannot go back to its file means the manifest's `agents` paths cannot be kept.
    fn agent_file(&mut self, ext: &Map<String, Value>, name: &str) -> String {
        let original = ext
            .get("file")
            .and_then(Value::as_str)
            .and_then(|f| clean_path(f).ok());
        match original {
            Some(f) if f.ends_with(".md") && !self.written.contains(&f) => {
                self.agents_in_place += 1;
                return f;
            }
            Some(_) => self.agents_moved = true,
            None => {}
        }
        let stem = slug::normalise(name, Rules::Claude).unwrap_or_else(|| "agent".into());
        let mut file = format!("{}/{stem}.md", claude::AGENTS_DIR);
        let mut n = 2;
        while self.written.contains(&file) {
            file = format!("{}/{stem}-{n}.md", claude::AGENTS_DIR);
            n += 1;
        }
        file
    }

    /// The agent's model: the Claude original when the persona still has what it mapped to,
    /// else the persona's (or the pack default's) mapped. Returns whether it came from the pack
    /// defaults.
    fn agent_model(
        &mut self,
        fm: &mut Map<String, Value>,
        xp_fields: &mut Map<String, Value>,
        persona: &Persona,
        ext: &Map<String, Value>,
        defaults: &Map<String, Value>,
    ) -> bool {
        let path = persona.file.as_str();
        let persona_model = persona
            .fields
            .get("model")
            .and_then(Value::as_str)
            .map(str::to_string);
        let from_defaults =
            persona_model.is_none() && defaults.get("model").and_then(Value::as_str).is_some();
        let effective = persona_model.clone().or_else(|| {
            defaults
                .get("model")
                .and_then(Value::as_str)
                .map(str::to_string)
        });
        let ext_model = ext.get("model").and_then(Value::as_str);
        match (ext_model, &effective) {
            (Some(o), m) if !from_defaults && maps_back(o, m.as_deref()) => {
                fm.insert("model".into(), o.into());
            }
            (_, Some(m)) => {
                match model::to_claude(m) {
                    ToClaude::Id(id) => {
                        fm.insert("model".into(), id.clone().into());
                        if from_defaults {
                            self.report.synthesised(
                            "default-applied",
                            path,
                            "model",
                            format!("the pack default model `{m}` is written into the agent as `{id}`"),
                        );
                        } else {
                            self.report.normalised(
                                "model-id-mapped",
                                path,
                                "model",
                                format!("{m} -> {id}"),
                            );
                        }
                    }
                    ToClaude::Inherit => {
                        fm.insert("model".into(), "inherit".into());
                        if !from_defaults {
                            xp_fields.insert("model".into(), m.clone().into());
                        }
                        self.report.lost(
                        "model-provider-unsupported",
                        path,
                        "model",
                        format!("`{m}` is not a Claude model: the agent inherits the session's model (the value is kept in `x-persona`)"),
                    );
                    }
                }
            }
            (Some(o), None) => {
                fm.insert("model".into(), o.into());
            }
            (None, None) => {}
        }
        from_defaults
    }

    /// Persona skills (claims) become preloaded agent skills.
    fn preload_skills(&mut self, fm: &mut Map<String, Value>, persona: &Persona) {
        if let Some(Value::Array(skills)) = persona.fields.get("skills")
            && !fm.contains_key("skills")
        {
            let names: Vec<Value> = skills
                .iter()
                .filter_map(Value::as_str)
                .filter_map(|s| {
                    s.trim_end_matches('/')
                        .rsplit('/')
                        .next()
                        .map(str::to_string)
                })
                .filter(|s| !s.is_empty())
                .map(Value::from)
                .collect();
            if !names.is_empty() {
                fm.insert("skills".into(), Value::Array(names));
                self.report.reinterpreted(
                    "skills-preloaded",
                    &persona.file,
                    "skills",
                    "the persona's skills become Claude agent `skills` (preloaded into context, not loaded on demand), and other agents can use them too",
                );
            }
        }
    }

    /// Persona-only and unknown persona fields go to `x-persona`.
    fn persona_only(
        &mut self,
        xp_fields: &mut Map<String, Value>,
        persona: &Persona,
        ext: &Map<String, Value>,
        name: &str,
    ) {
        let path = persona.file.as_str();
        let ext_synth = strings(ext.get("synthesised"));
        for key in PERSONA_ONLY {
            let Some(v) = persona.fields.get(*key) else {
                continue;
            };
            if *key == "display_name" && ext_synth.iter().any(|s| s == "display_name") {
                continue;
            }
            xp_fields.insert(key.to_string(), v.clone());
            if matches!(*key, "mcp_servers" | "hooks" | "skills") {
                continue; // reported where they are mapped or lifted
            }
            self.report.reinterpreted(
                "carried-in-extension",
                path,
                key,
                format!("`{key}`: Claude agents have no such field; kept in plugin.json `x-persona.personas.{name}`"),
            );
        }
        for (k, _) in persona.fields.iter() {
            // The tool policy is mapped to the agent's tools (see `policy_beyond_tools`).
            let known = matches!(k.as_str(), "name" | "description" | "model")
                || k == policy::PERSONA_KEY
                || PERSONA_ONLY.contains(&k.as_str());
            if !known {
                xp_fields.insert(k.clone(), persona.fields[k].clone());
                self.report.reinterpreted(
                    "carried-in-extension",
                    path,
                    k,
                    format!("unknown persona field `{k}` kept in plugin.json `x-persona.personas.{name}`"),
                );
            }
        }
    }

    /// The persona's tool policy goes to `x-persona` only when the agent's `tools` and
    /// `disallowedTools` do not give it back as it is (kinds, `read_only` written as denials…).
    fn policy_beyond_tools(
        &mut self,
        xp_fields: &mut Map<String, Value>,
        persona: &Persona,
        fm: &Map<String, Value>,
    ) {
        let Some(wanted) = persona.fields.get(policy::PERSONA_KEY) else {
            return;
        };
        if Value::Object(policy::to_tool_policy(fm).policy) == *wanted {
            return;
        }
        xp_fields.insert(policy::PERSONA_KEY.into(), wanted.clone());
        self.report.reinterpreted(
            "carried-in-extension",
            &persona.file,
            policy::PERSONA_KEY,
            "the tool policy says more than the agent's `tools`/`disallowedTools` can: kept whole in plugin.json `x-persona` for the way back",
        );
    }

    /// Per-persona MCP servers: Claude ignores `mcpServers` in plugin agents, so they join the
    /// plugin's `.mcp.json` (prefixed on a name clash) and every agent can reach them.
    fn lift_persona_mcp(&mut self, agent: &str, servers: Option<&Value>, path: &str) {
        let Some(Value::Array(items)) = servers else {
            return;
        };
        for item in items {
            let Some(obj) = item.as_object() else {
                continue;
            };
            let Some(sname) = obj.get("name").and_then(Value::as_str) else {
                continue;
            };
            let mut config = obj.clone();
            config.remove("name");
            let (config, _) = mcp::to_claude(&config);
            let mut key = sname.to_string();
            if self.servers.contains_key(&key) {
                key = format!("{agent}-{sname}");
            }
            self.report.reinterpreted(
                "mcp-scope-lifted",
                path,
                &format!("mcp_servers.{sname}"),
                format!("persona MCP server `{sname}` is now plugin-wide `.mcp.json` server `{key}` (Claude ignores per-agent servers), so every agent can use it"),
            );
            self.servers.insert(key, Value::Object(config));
        }
    }

    /// Pack and per-persona lifecycle hooks -> Claude event hooks (approximate), lifted to
    /// plugin level.
    fn hooks(&mut self) -> Result<(), String> {
        let entries = self.hook_entries();
        if self.pack.hooks.is_some() {
            self.xp.insert(
                "hooks".into(),
                self.pack.hooks.clone().unwrap_or(Value::Null),
            );
        }
        if entries.is_empty() {
            return Ok(());
        }
        for (rel, bytes) in &self.pack.hook_files {
            if let Ok(rel) = clean_path(rel) {
                let top = rel.split('/').next().unwrap_or_default();
                if claude::TOP_LEVEL.contains(&top) && !rel.ends_with(".wasm") {
                    self.write(&rel, bytes)?;
                }
            }
        }
        let existing = if self.written.contains(claude::HOOKS_CONFIG) {
            tree::read_json(self.out, claude::HOOKS_CONFIG).ok()
        } else {
            None
        };
        let generated = existing.is_none();
        let mut file = match existing {
            Some(Value::Object(m)) => m,
            _ => Map::new(),
        };
        for (event, command, from) in entries {
            self.hook(&mut file, event, &command, &from);
        }
        if !file.is_empty() {
            self.write(claude::HOOKS_CONFIG, format!("{}\n", Value::Object(file)))?;
            if generated {
                self.xp.insert("hooks_json".into(), "generated".into());
            }
        }
        Ok(())
    }

    /// The pack's and the personas' hook commands: (Claude event, command, where from).
    fn hook_entries(&self) -> Vec<(String, String, String)> {
        let mut entries = Vec::new();
        if let Some(Value::Object(h)) = &self.pack.hooks {
            for (point, event) in HOOK_EVENTS {
                if let Some(cmd) = h.get(*point).and_then(Value::as_str) {
                    entries.push((
                        event.to_string(),
                        cmd.to_string(),
                        format!("hooks/hooks.json {point}"),
                    ));
                }
            }
        }
        for persona in &self.pack.personas {
            if let Some(Value::Object(h)) = persona.fields.get("hooks") {
                for (point, event) in HOOK_EVENTS {
                    if let Some(cmd) = h.get(*point).and_then(Value::as_str) {
                        entries.push((
                            event.to_string(),
                            cmd.to_string(),
                            format!("{} hooks.{point}", persona.file),
                        ));
                    }
                }
            }
        }
        entries
    }

    /// One hook command as a Claude command hook in `file` (a `hooks.json`), unless it is a
    /// component.
    fn hook(&mut self, file: &mut Map<String, Value>, event: String, command: &str, from: &str) {
        let program = command
            .split_whitespace()
            .next()
            .unwrap_or_default()
            .to_string();
        if program.ends_with(".wasm") {
            self.report.lost(
                "hook-wasm-unsupported",
                from,
                "",
                format!("`{program}` is a sandboxed component; Claude hooks run commands, so it is not mapped"),
            );
            return;
        }
        let rest = command[program.len()..].to_string();
        let program = match clean_path(&program) {
            Ok(rel) => format!("${{CLAUDE_PLUGIN_ROOT}}/{rel}"),
            Err(_) => program,
        };
        let hooks = object(file, "hooks");
        let list = hooks
            .entry(event.clone())
            .or_insert_with(|| Value::Array(Vec::new()));
        if let Value::Array(list) = list {
            list.push(
                json!({"hooks": [{"type": "command", "command": format!("{program}{rest}")}]}),
            );
        }
        let drift = match event.as_str() {
            "SessionStart" => {
                "a failing on_start aborts a persona, a SessionStart hook cannot stop the session"
            }
            "SessionEnd" => {
                "on_stop runs when the persona stops, SessionEnd when the Claude session ends"
            }
            _ => {
                "on_message gets the message text on stdin, UserPromptSubmit gets JSON and blocks on exit 2"
            }
        };
        self.report.reinterpreted(
            "hook-event-mapped",
            from,
            "",
            format!("lifted to a plugin-wide `{event}` command hook for every agent; {drift}"),
        );
    }

    fn mcp_file(&mut self) -> Result<(), String> {
        let info = self
            .ext
            .get("mcp")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        self.named_mcp_files(&info)?;
        if self.servers.is_empty() {
            return Ok(());
        }
        let wrapped = info.get("wrapped").and_then(Value::as_bool).unwrap_or(true);
        let servers = Value::Object(std::mem::take(&mut self.servers));
        let value = if wrapped {
            json!({ "mcpServers": servers })
        } else {
            servers
        };
        let text = self.json_text(claude::MCP_CONFIG, &value)?;
        self.write(claude::MCP_CONFIG, text)
    }

    /// Servers a Claude plugin kept in files its manifest names (`mcpServers:
    /// "./.claude-plugin/mcp.json"`) go back to those files, each written even when its servers
    /// are gone since, so the restored manifest names what is there.
    fn named_mcp_files(&mut self, info: &Map<String, Value>) -> Result<(), String> {
        let Some(Value::Object(files)) = info.get("files") else {
            return Ok(());
        };
        for (file, record) in files {
            let Ok(rel) = clean_path(file) else { continue };
            let mut servers = Map::new();
            for name in strings(record.get("servers")) {
                if let Some(config) = self.servers.remove(&name) {
                    servers.insert(name, config);
                }
            }
            let value = if record.get("wrapped") == Some(&Value::Bool(false)) {
                Value::Object(servers)
            } else {
                json!({ "mcpServers": servers })
            };
            let text = self.json_text(&rel, &value)?;
            self.write(&rel, text)?;
        }
        Ok(())
    }

    fn plugin_json(&mut self, name: &str) -> Result<(), String> {
        let m = &self.pack.manifest;
        let synthesised = self.ext_list("synthesised");
        let mut plugin = self.original_plugin();
        plugin.insert("name".into(), name.into());
        for key in SAME_KEYS {
            match m.get(*key) {
                Some(v) if !synthesised.iter().any(|s| s == key) => {
                    let v = match (*key, v) {
                        ("author", Value::String(s)) => json!({ "name": s }),
                        _ => v.clone(),
                    };
                    if *key == "author" && v != m[*key] {
                        self.report.normalised(
                            "author-object",
                            pack::MANIFEST,
                            "author",
                            "a string author becomes Claude's `author.name`",
                        );
                    }
                    plugin.insert(key.to_string(), v);
                }
                _ => {
                    plugin.remove(*key);
                }
            }
        }
        // The manifest's `agents` paths that still name what was written stay; the others (an
        // agent that could not go back to its file, a path that named nothing or lay outside
        // the plugin) go, and their agents are in `agents/`, which Claude reads by default.
        if let Some(paths) = plugin.get("agents").cloned()
            && (self.agents_moved || !self.all_written(&paths))
        {
            let kept: Vec<Value> = match &paths {
                Value::Array(a) => a.iter().filter(|p| self.all_written(p)).cloned().collect(),
                _ => Vec::new(),
            };
            if kept.is_empty() {
                plugin.remove("agents");
            } else {
                plugin.insert("agents".into(), Value::Array(kept));
            }
            self.report.normalised(
                "agents-relocated",
                claude::MANIFEST,
                "agents",
                "manifest `agents` paths naming nothing written are dropped (those agents are in agents/, read by default)",
            );
        }
        // `skills` paths that name nothing written (one that named nothing in the plugin it
        // came from) would make the plugin invalid: dropped, as Claude reads skills/ anyway.
        if let Some(paths) = plugin.get("skills").cloned()
            && !self.all_written(&paths)
        {
            let kept: Vec<Value> = match &paths {
                Value::Array(a) => a.iter().filter(|p| self.all_written(p)).cloned().collect(),
                _ => Vec::new(),
            };
            if kept.is_empty() {
                plugin.remove("skills");
            } else {
                plugin.insert("skills".into(), Value::Array(kept));
            }
            self.report.normalised(
                "skills-path-dropped",
                claude::MANIFEST,
                "skills",
                "manifest `skills` paths naming nothing in the output are dropped (skills are in skills/, read by default)",
            );
        }
        // Pack-only manifest data, for the way back.
        let mut manifest = Map::new();
        let original_title = self.original_plugin().get("name").cloned();
        for (k, v) in m {
            let skip = SAME_KEYS.contains(&k.as_str())
                || FILE_KEYS.contains(&k.as_str())
                || k == "x-claude"
                || (k == "$schema" && v == pack::SCHEMA)
                || synthesised.iter().any(|s| s == k);
            if skip || (k == "name" && (v == name || Some(v) == original_title.as_ref())) {
                continue;
            }
            if xp::derived_manifest(k, v, name, self.pack) {
                continue; // the way back derives it again
            }
            manifest.insert(k.clone(), v.clone());
            if k != "name" {
                self.report.reinterpreted(
                    "carried-in-extension",
                    pack::MANIFEST,
                    k,
                    format!(
                        "`{k}` has no Claude plugin field; kept in plugin.json `x-persona.manifest`"
                    ),
                );
            }
        }
        if !manifest.is_empty() {
            self.xp.insert("manifest".into(), Value::Object(manifest));
        }
        // Only a block that carries something: Claude's validator warns about the key (and
        // fails it under --strict), so empty entries are not worth that.
        if let Some(Value::Object(personas)) = self.xp.get_mut("personas") {
            personas.retain(|_, v| !matches!(v, Value::Object(m) if m.is_empty()) && !v.is_null());
        }
        self.xp
            .retain(|_, v| !v.is_null() && !matches!(v, Value::Object(m) if m.is_empty()));
        if !self.xp.is_empty() {
            plugin.insert(
                PERSONA_KEY.into(),
                Value::Object(std::mem::take(&mut self.xp)),
            );
        }
        let plugin = Value::Object(plugin);
        // A Copilot plugin's manifest goes back where Copilot looks first, as well.
        if let Some(file) = self.ext.get("manifest_file").and_then(Value::as_str)
            && let Some(file) = crate::read::COPILOT_MANIFESTS.iter().find(|f| **f == file)
        {
            let text = self.json_text(file, &plugin)?;
            self.write(file, text)?;
        }
        let text = self.json_text(claude::MANIFEST, &dot_slashed(plugin))?;
        self.write(claude::MANIFEST, text)
    }

    /// Pack files nothing above wrote: documentation is copied, the rest is reported lost.
    fn leftovers(&mut self) {
        let mut known: BTreeSet<String> = [
            pack::MANIFEST,
            ".mcp.json",
            "hooks/hooks.json",
            "instructions.md",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        for p in &self.pack.personas {
            known.insert(p.file.clone());
        }
        for (rel, _) in &self.pack.hook_files {
            known.insert(rel.trim_start_matches("./").to_string());
        }
        for key in ["pack_instructions", "mcp_config", "hooks_config"] {
            if let Some(v) = self.pack.manifest.get(key).and_then(Value::as_str) {
                known.insert(v.trim_start_matches("./").to_string());
            }
        }
        let Ok(files) = tree::walk(self.input, "") else {
            return;
        };
        let mut dropped: Vec<String> = Vec::new();
        for rel in files {
            if known.contains(&rel) || rel.starts_with("skills/") || rel.starts_with("x-claude/") {
                continue;
            }
            if !rel.contains('/') && is_documentation(&rel) {
                if let Ok(bytes) = tree::read_bytes(self.input, &rel)
                    && !self.written.contains(&rel)
                {
                    let _ = self.write(&rel, bytes);
                }
                continue;
            }
            let top = rel.split('/').next().unwrap_or(&rel).to_string();
            if !dropped.contains(&top) {
                dropped.push(top);
            }
        }
        for top in dropped {
            self.report.lost(
                "file-dropped",
                &top,
                "",
                format!("`{top}` has no place in a Claude plugin; not written"),
            );
        }
    }
}

/// An agent file: the frontmatter as the Claude plugin had it (kept by the reader) while it still
/// holds exactly these fields, else rendered; no final newline when the original had none.
fn agent_text(fm: &Map<String, Value>, body: &str, ext: &Map<String, Value>) -> String {
    let mut text = frontmatter::render(fm, body);
    if let Some(source) = ext.get("frontmatter").and_then(Value::as_str) {
        let original = format!("---\n{source}---\n");
        if frontmatter::parse(&original).fields == *fm {
            let head = frontmatter::render(fm, "").len();
            text = format!("{original}{}", &text[head..]);
        }
    }
    if ext.get("final_newline") == Some(&Value::Bool(false)) && text.ends_with('\n') {
        text.pop();
    }
    text
}

/// `plugin` with its component paths as Claude Code wants them, starting with `./` (Copilot's
/// manifests write `.mcp.json`, `agents/`).
fn dot_slashed(mut plugin: Value) -> Value {
    let fix = |v: &mut Value| {
        if let Value::String(p) = v
            && !p.starts_with("./")
            && !p.contains("://")
            && let Ok(rel) = clean_path(p)
            && !rel.is_empty()
        {
            *p = format!("./{}{}", rel, if p.ends_with('/') { "/" } else { "" });
        }
    };
    for field in claude::COMPONENT_FIELDS {
        match plugin.get_mut(*field) {
            Some(Value::Array(items)) => items.iter_mut().for_each(fix),
            Some(v) => fix(v),
            None => {}
        }
    }
    plugin
}

/// Claude keys an earlier conversion carried, then the original key order.
fn carried_keys(fm: &mut Map<String, Value>, ext: &Map<String, Value>) {
    let ext_fields = ext
        .get("fields")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    for (k, v) in &ext_fields {
        if !fm.contains_key(k) {
            fm.insert(k.clone(), v.clone());
        }
    }
    if let Some(Value::Array(order)) = ext.get("keys") {
        let mut ordered = Map::new();
        for k in order.iter().filter_map(Value::as_str) {
            if let Some(v) = fm.remove(k) {
                ordered.insert(k.to_string(), v);
            }
        }
        ordered.extend(std::mem::take(fm));
        *fm = ordered;
    }
}

/// Whether the Claude model `original` still corresponds to the persona's `model`.
fn maps_back(original: &str, persona: Option<&str>) -> bool {
    match (model::to_persona(original), persona) {
        (ToPersona::Model { id, .. }, Some(p)) => id == p,
        (ToPersona::Inherit | ToPersona::Unknown, None) => true,
        _ => false,
    }
}
