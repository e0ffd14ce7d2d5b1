//! The host's check of what a converter wrote, before anything reaches the destination. A persona
//! pack goes through the pack validator (`apiary pack validate`: errors refuse). Other formats get
//! structural checks: the manifest parses, required fields are there, names match the target's
//! pattern (formats.md §9.3), every path the manifest references exists inside the tree, and no
//! top-level entry falls outside the format's layout. Formats the host does not know (from added
//! converters) get only the generic checks every output gets (regular files, caps).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use convert_kit::{claude, is_documentation};
use serde::Serialize;

use crate::pack::frontmatter;

/// One problem found in the output.
#[derive(Debug, Clone, Serialize)]
pub struct Problem {
    /// The file, relative to the output root (`""` for the tree as a whole).
    pub path: String,
    pub message: String,
}

/// The outcome of validating one output tree.
#[derive(Debug, Clone, Serialize)]
pub struct Validation {
    pub format: String,
    /// Which checks ran: `pack-validator`, `structural` or `generic`.
    pub checks: &'static str,
    pub errors: Vec<Problem>,
    pub warnings: Vec<Problem>,
}

impl Validation {
    pub fn ok(&self) -> bool {
        self.errors.is_empty()
    }

    fn new(format: &str, checks: &'static str) -> Validation {
        Validation {
            format: format.to_string(),
            checks,
            errors: Vec::new(),
            warnings: Vec::new(),
        }
    }

    fn error(&mut self, path: &str, message: impl Into<String>) {
        self.errors.push(Problem {
            path: path.to_string(),
            message: message.into(),
        });
    }

    fn warn(&mut self, path: &str, message: impl Into<String>) {
        self.warnings.push(Problem {
            path: path.to_string(),
            message: message.into(),
        });
    }
}

/// Validates `dir` as `format`.
pub fn validate(format: &str, dir: &Path) -> Validation {
    match format {
        "buzz-pack" => buzz_pack(dir),
        "agent-plugins" => agent_plugins(dir),
        "claude-plugin" => claude_plugin(dir),
        "duduclaw-expert" => duduclaw_expert(dir),
        "agent-compose-package" => agent_compose_package(dir),
        _ => Validation::new(format, "generic"),
    }
}

/// The packs in a buzz-pack output: the root when it has a manifest, else every top-level
/// directory with one (a marketplace converts to one pack per plugin). Sorted; empty when none.
pub fn pack_roots(dir: &Path) -> Vec<String> {
    if dir.join(".plugin/plugin.json").is_file() {
        return vec![String::new()];
    }
    let mut subs: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().join(".plugin/plugin.json").is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    subs.sort();
    subs
}

fn buzz_pack(dir: &Path) -> Validation {
    let mut v = Validation::new("buzz-pack", "pack-validator");
    let roots = pack_roots(dir);
    if roots.len() > 1 || roots.first().is_some_and(|r| !r.is_empty()) {
        // Several packs side by side: each is validated, and nothing else may sit beside them.
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if !roots.contains(&name) && !is_documentation(&name) {
                v.error(
                    &name,
                    "beside the converted packs, but not a pack (no .plugin/plugin.json)",
                );
            }
        }
        for r in &roots {
            pack_into(&mut v, &dir.join(r), &format!("{r}/"));
        }
        return v;
    }
    pack_into(&mut v, dir, "");
    v
}

/// The pack validator's findings for the pack at `dir`, paths prefixed with `prefix`.
fn pack_into(v: &mut Validation, dir: &Path, prefix: &str) {
    let report = crate::pack::validate(dir);
    for d in &report.diagnostics {
        let path = d
            .file
            .as_ref()
            .map(|f| format!("{prefix}{}", f.display()))
            .unwrap_or_else(|| prefix.trim_end_matches('/').to_string());
        let line = d.line.map(|l| format!(" (line {l})")).unwrap_or_default();
        let message = format!("{}: {}{line}", d.code, d.message);
        match d.severity {
            crate::diag::Severity::Error => v.error(&path, message),
            crate::diag::Severity::Warning => v.warn(&path, message),
            crate::diag::Severity::Note => {}
        }
    }
}

/// Flags top-level entries outside `allowed` (and the documentation names) as errors.
fn layout(v: &mut Validation, dir: &Path, allowed: &[&str], namespaces: bool) {
    layout_as(v, dir, allowed, namespaces, Severity::Error);
}

/// How an entry outside a format's layout counts: an error where the format's loader would
/// refuse or misread it, a warning where it ignores it (Claude Code skips top-level entries it
/// does not know, and real plugins ship templates, tests and other hosts' manifests there).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Severity {
    Error,
    Warning,
}

fn layout_as(
    v: &mut Validation,
    dir: &Path,
    allowed: &[&str],
    namespaces: bool,
    severity: Severity,
) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        v.error("", "cannot list the output");
        return;
    };
    let mut names: Vec<String> = entries
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    for name in names {
        let is_dir = dir.join(&name).is_dir();
        // A reverse-DNS namespace directory (Agent Plugins `extensions`), e.g. `org.buzz`.
        let namespace = namespaces && is_dir && name.contains('.') && !name.starts_with('.');
        if !(allowed.contains(&name.as_str()) || is_documentation(&name) || namespace) {
            let message = format!(
                "not part of the {} layout (expected only: {})",
                v.format,
                allowed.join(", ")
            );
            match severity {
                Severity::Error => v.error(&name, message),
                Severity::Warning => v.warn(&name, format!("{message}; the host ignores it")),
            }
        }
    }
}

/// Reads a JSON file of the output; a problem is recorded and `None` returned.
fn json(v: &mut Validation, dir: &Path, rel: &str) -> Option<serde_json::Value> {
    let text = match std::fs::read_to_string(dir.join(rel)) {
        Ok(t) => t,
        Err(e) => {
            v.error(rel, format!("cannot read: {e}"));
            return None;
        }
    };
    match serde_json::from_str(&text) {
        Ok(value) => Some(value),
        Err(e) => {
            v.error(
                rel,
                format!(
                    "not valid JSON (line {}, column {}): {e}",
                    e.line(),
                    e.column()
                ),
            );
            None
        }
    }
}

fn slug_ok(name: &str, extra: &[u8], max: usize) -> bool {
    !name.is_empty()
        && name.len() <= max
        && name
            .bytes()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || extra.contains(&c))
}

/// Whether Claude Code loads an agent `name` as written: one line (no control characters or
/// surrounding spaces), 1 to 64 characters, no `/`, `\` (a path) or `:` (its `plugin:agent`
/// separator).
fn claude_agent_name_loads(name: &str) -> bool {
    (1..=64).contains(&name.chars().count())
        && name.trim() == name
        && !name
            .chars()
            .any(|c| c.is_control() || matches!(c, '/' | '\\' | ':'))
}

/// DuDuClaw's `is_valid_agent_id`: lowercase alphanumerics and `-`, 1..=64, no `-` at either end.
fn agent_id_ok(name: &str) -> bool {
    slug_ok(name, b"-", 64) && !name.starts_with('-') && !name.ends_with('-')
}

/// The scalar value of a top-level frontmatter key as YAML reads it (quotes, escapes and comments
/// resolved); for YAML that does not parse, the line's text unquoted (enough to compare names).
fn frontmatter_value(yaml: &str, key: &str) -> Option<String> {
    if let Some(map) = crate::pack::plain_yaml::parse(yaml) {
        return match map.get(key)? {
            serde_json::Value::String(s) => Some(s.clone()),
            other => Some(other.to_string()),
        };
    }
    let (offset, len) = frontmatter::locate_key(yaml, key)?;
    let line = yaml[offset + len..].lines().next().unwrap_or("");
    let value = line.trim_start_matches(':').trim();
    // A quoted scalar ends at its closing quote (a comment may follow); a plain one at ` #`.
    let value = match value.chars().next() {
        Some(q @ ('"' | '\'')) => value[1..].split(q).next().unwrap_or(""),
        _ => value.split(" #").next().unwrap_or(value),
    };
    Some(value.trim().to_string())
}

/// A markdown file with frontmatter carrying `keys`; returns the `name` value when present.
fn markdown(v: &mut Validation, dir: &Path, rel: &str, keys: &[&str]) -> Option<String> {
    let text = match std::fs::read_to_string(dir.join(rel)) {
        Ok(t) => t,
        Err(e) => {
            v.error(rel, format!("cannot read as UTF-8 text: {e}"));
            return None;
        }
    };
    let split = match frontmatter::split(&text) {
        Ok(s) => s,
        Err(e) => {
            v.error(rel, e.to_string());
            return None;
        }
    };
    for key in keys {
        if frontmatter::locate_key(split.yaml, key).is_none() {
            v.error(rel, format!("the frontmatter has no `{key}`"));
        }
    }
    frontmatter_value(split.yaml, "name")
}

/// Every `skills/<n>/SKILL.md`: present, with `name` (equal to `<n>`) and `description`.
fn skills(v: &mut Validation, dir: &Path, skills_dir: &str) {
    let Ok(entries) = std::fs::read_dir(dir.join(skills_dir)) else {
        return;
    };
    let mut names: Vec<String> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    for n in names {
        let rel = format!("{skills_dir}/{n}/SKILL.md");
        if !dir.join(&rel).is_file() {
            v.error(
                &format!("{skills_dir}/{n}"),
                "a skill directory without SKILL.md",
            );
            continue;
        }
        if let Some(name) = markdown(v, dir, &rel, &["name", "description"])
            && name != n
        {
            v.error(
                &rel,
                format!("the skill is named {name:?} but its directory is {n:?}; they must match"),
            );
        }
    }
}

/// A manifest path value: `./`-relative, inside the tree, existing.
fn referenced_path(v: &mut Validation, dir: &Path, manifest: &str, field: &str, p: &str) {
    let rel = p.strip_prefix("./").unwrap_or(p);
    if !p.starts_with("./") {
        v.error(
            manifest,
            format!("`{field}` path {p:?} must start with `./`"),
        );
    }
    match crate::pack::paths::check_relative(rel) {
        Err(e) => v.error(manifest, format!("`{field}`: {e}")),
        Ok(_) if !dir.join(rel).exists() => v.error(
            manifest,
            format!("`{field}` references {p:?}, which the output does not contain"),
        ),
        Ok(_) => {}
    }
}

fn agent_plugins(dir: &Path) -> Validation {
    let mut v = Validation::new("agent-plugins", "structural");
    layout(&mut v, dir, &["plugin.json", "mcp.json", "skills"], true);
    if let Some(m) = json(&mut v, dir, "plugin.json") {
        match m.get("$schema").and_then(|s| s.as_str()) {
            Some(s) if s.contains("agent-plugins.org/schemas/") => {}
            Some(s) => v.error(
                "plugin.json",
                format!("`$schema` is {s:?}, not an Agent Plugins schema URL"),
            ),
            None => v.error("plugin.json", "`$schema` is required"),
        }
        match m.get("name").and_then(|n| n.as_str()) {
            Some(n) if slug_ok(n, b".-", 64) => {}
            Some(n) => v.error(
                "plugin.json",
                format!("`name` {n:?} does not match [a-z0-9.-]{{1,64}}"),
            ),
            None => v.error("plugin.json", "`name` is required"),
        }
        if let Some(ext) = m.get("extensions")
            && !ext.is_object()
        {
            v.error("plugin.json", "`extensions` must be an object");
        }
    }
    if dir.join("mcp.json").is_file()
        && let Some(m) = json(&mut v, dir, "mcp.json")
    {
        match m.get("mcpServers").and_then(|s| s.as_object()) {
            None => v.error("mcp.json", "`mcpServers` (an object) is required"),
            Some(servers) => {
                for (name, s) in servers {
                    let ty = s.get("type").and_then(|t| t.as_str()).unwrap_or("");
                    let needs = match ty {
                        "stdio" => "command",
                        "streamable-http" | "sse" => "url",
                        _ => {
                            v.error(
                                "mcp.json",
                                format!(
                                    "server {name}: `type` must be stdio, streamable-http or sse"
                                ),
                            );
                            continue;
                        }
                    };
                    if s.get(needs).and_then(|x| x.as_str()).is_none() {
                        v.error(
                            "mcp.json",
                            format!("server {name}: `{needs}` is required for {ty}"),
                        );
                    }
                }
            }
        }
    }
    skills(&mut v, dir, "skills");
    v
}

fn claude_plugin(dir: &Path) -> Validation {
    let mut v = Validation::new("claude-plugin", "structural");
    layout_as(&mut v, dir, claude::TOP_LEVEL, false, Severity::Warning);
    let manifest = claude::MANIFEST;
    if dir.join(manifest).is_file() {
        if let Some(m) = json(&mut v, dir, manifest) {
            claude_manifest(&mut v, dir, manifest, &m);
        }
    } else if !dir.join(claude::AGENTS_DIR).is_dir() && !dir.join(claude::SKILLS_DIR).is_dir() {
        v.error(
            "",
            "neither .claude-plugin/plugin.json nor agents/ or skills/: not a Claude plugin",
        );
    }
    for extra in [
        claude::MARKETPLACE,
        claude::MCP_CONFIG,
        claude::LSP_CONFIG,
        claude::HOOKS_CONFIG,
        claude::SETTINGS,
    ] {
        if dir.join(extra).is_file()
            && let Some(j) = json(&mut v, dir, extra)
            && !j.is_object()
        {
            v.error(extra, "must be a JSON object");
        }
    }
    for rel in markdown_files(dir, claude::AGENTS_DIR) {
        let Some(name) = markdown(&mut v, dir, &rel, &["name", "description"]) else {
            continue;
        };
        if !claude_agent_name_loads(&name) {
            v.error(
                &rel,
                format!("agent `name` {name:?} is not one line of at most 64 characters without `/`, `\\` or `:`"),
            );
        } else if !slug_ok(&name, b"-", 64) {
            // Claude Code's docs recommend [a-z0-9-]; it loads other names (Title Case) as written.
            v.warn(
                &rel,
                format!("agent `name` {name:?} is not [a-z0-9-]{{1,64}} as Claude Code recommends; it loads as written"),
            );
        }
    }
    skills(&mut v, dir, claude::SKILLS_DIR);
    v
}

/// A Claude plugin manifest `m` (at `manifest`): its `name`, and the paths its component fields
/// reference.
fn claude_manifest(v: &mut Validation, dir: &Path, manifest: &str, m: &serde_json::Value) {
    match m.get("name").and_then(|n| n.as_str()) {
        Some(n) if slug_ok(n, b"-", 64) => {
            if !(3..=50).contains(&n.len()) {
                v.warn(
                    manifest,
                    format!(
                        "`name` {n:?} is outside the 3–50 characters Claude's style guide uses"
                    ),
                );
            }
        }
        Some(n) => v.error(
            manifest,
            format!("`name` {n:?} does not match [a-z0-9-]{{1,64}}"),
        ),
        None => v.error(manifest, "`name` is required"),
    }
    for &field in claude::COMPONENT_FIELDS {
        let paths: Vec<&str> = match m.get(field) {
            Some(serde_json::Value::String(s)) => vec![s.as_str()],
            Some(serde_json::Value::Array(a)) => a.iter().filter_map(|x| x.as_str()).collect(),
            _ => Vec::new(),
        };
        for p in paths {
            if field == "mcpServers" && p.contains("://") {
                continue;
            }
            referenced_path(v, dir, manifest, field, p);
        }
    }
}

/// `sub/**/*.md`, relative to `dir`, sorted.
fn markdown_files(dir: &Path, sub: &str) -> Vec<String> {
    fn walk(root: &Path, rel: &str, out: &mut Vec<String>, depth: usize) {
        let Ok(entries) = std::fs::read_dir(root.join(rel)) else {
            return;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let child = format!("{rel}/{name}");
            match e.file_type() {
                Ok(t) if t.is_dir() && depth < 8 => walk(root, &child, out, depth + 1),
                Ok(t) if t.is_file() && name.ends_with(".md") => out.push(child),
                _ => {}
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, sub, &mut out, 0);
    out.sort();
    out
}

#[derive(serde::Deserialize)]
struct ExpertFile {
    expert: Option<toml::Table>,
}

fn duduclaw_expert(dir: &Path) -> Validation {
    let mut v = Validation::new("duduclaw-expert", "structural");
    layout(
        &mut v,
        dir,
        &[
            "expert.toml",
            "agents",
            "hooks",
            "skills",
            "wiki",
            "evals",
            "LICENSING.md",
        ],
        false,
    );
    let Some(expert) = expert_table(&mut v, dir) else {
        return v;
    };
    match expert.get("name").and_then(|n| n.as_str()) {
        Some(n) if agent_id_ok(n) => {}
        Some(n) => v.error("expert.toml", format!("`expert.name` {n:?} is not a valid agent id (lowercase alphanumerics and -, 1–64, no - at either end)")),
        None => v.error("expert.toml", "`expert.name` is required"),
    }
    for key in ["description", "version"] {
        if expert.get(key).and_then(|x| x.as_str()).is_none() {
            v.error(
                "expert.toml",
                format!("`expert.{key}` (a string) is required"),
            );
        }
    }
    let agents = expert
        .get("agents")
        .and_then(|a| a.as_array())
        .cloned()
        .unwrap_or_default();
    if agents.is_empty() {
        v.error(
            "expert.toml",
            "at least one `[[expert.agents]]` is required",
        );
    }
    let (names, reports) = expert_agents(&mut v, dir, &agents);
    check_reports_to(&mut v, &names, &reports);
    skills(&mut v, dir, "skills");
    v
}

/// The `[expert]` table of `expert.toml`; `None` (with the error) when it cannot be read.
fn expert_table(v: &mut Validation, dir: &Path) -> Option<toml::Table> {
    let text = match std::fs::read_to_string(dir.join("expert.toml")) {
        Ok(t) => t,
        Err(e) => {
            v.error("expert.toml", format!("cannot read: {e}"));
            return None;
        }
    };
    let file: ExpertFile = match toml::from_str(&text) {
        Ok(f) => f,
        Err(e) => {
            v.error("expert.toml", format!("not valid TOML: {e}"));
            return None;
        }
    };
    if file.expert.is_none() {
        v.error("expert.toml", "the `[expert]` table is required");
    }
    file.expert
}

/// Checks each `[[expert.agents]]` entry and its files: the valid agent names, and who each
/// agent `reports_to`.
fn expert_agents(
    v: &mut Validation,
    dir: &Path,
    agents: &[toml::Value],
) -> (BTreeSet<String>, BTreeMap<String, String>) {
    let mut names = BTreeSet::new();
    let mut reports: BTreeMap<String, String> = BTreeMap::new();
    for a in agents {
        let Some(name) = a.get("name").and_then(|n| n.as_str()) else {
            v.error("expert.toml", "an `[[expert.agents]]` entry has no `name`");
            continue;
        };
        if !agent_id_ok(name) {
            v.error(
                "expert.toml",
                format!("agent name {name:?} is not a valid agent id"),
            );
            continue;
        }
        if !names.insert(name.to_string()) {
            v.error("expert.toml", format!("agent {name} is listed twice"));
        }
        let soul = format!("agents/{name}/soul.md");
        if !dir.join(&soul).is_file() {
            v.error(&soul, format!("agent {name} has no soul.md"));
        }
        let partial = format!("agents/{name}/agent.partial.toml");
        if let Ok(t) = std::fs::read_to_string(dir.join(&partial))
            && let Err(e) = toml::from_str::<toml::Table>(&t)
        {
            v.error(&partial, format!("not valid TOML: {e}"));
        }
        if let Some(boss) = a.get("reports_to").and_then(|r| r.as_str())
            && !boss.is_empty()
        {
            reports.insert(name.to_string(), boss.to_string());
        }
    }
    (names, reports)
}

/// `reports_to` names an agent of the pack, and never forms a cycle.
fn check_reports_to(
    v: &mut Validation,
    names: &BTreeSet<String>,
    reports: &BTreeMap<String, String>,
) {
    for (agent, boss) in reports {
        if !names.contains(boss) {
            v.error(
                "expert.toml",
                format!("agent {agent} reports_to {boss}, which is not an agent of this pack"),
            );
        }
    }
    // Follow each chain at most |agents| steps.
    for start in reports.keys() {
        let mut at = start;
        for _ in 0..=names.len() {
            match reports.get(at) {
                Some(next) if next == start => {
                    v.error(
                        "expert.toml",
                        format!("reports_to forms a cycle through {start}"),
                    );
                    break;
                }
                Some(next) => at = next,
                None => break,
            }
        }
    }
}

fn agent_compose_package(dir: &Path) -> Validation {
    let mut v = Validation::new("agent-compose-package", "structural");
    let mut kdl = 0;
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.ends_with(".kdl") {
            kdl += 1;
            match std::fs::read_to_string(e.path()) {
                Ok(t) if t.trim().is_empty() => v.error(&name, "empty KDL document"),
                Ok(_) => {}
                Err(err) => v.error(&name, format!("cannot read as UTF-8 text: {err}")),
            }
        }
    }
    if kdl == 0 {
        v.error("", "no top-level .kdl document (person.kdl or a roster)");
    }
    // Every SKILL.md in the package: frontmatter with name and description, the name equal to its
    // directory, except a role skill in the external layout (agent-compose's person contract,
    // "Roster package contract"): `roles/<slug>/SKILL.md` is named `role-<slug>`, the id its role's
    // `skill` node binds.
    for rel in markdown_files(dir, ".")
        .into_iter()
        .filter(|r| r.ends_with("/SKILL.md"))
    {
        let rel = rel.trim_start_matches("./").to_string();
        let parent = Path::new(&rel)
            .parent()
            .and_then(|p| p.file_name())
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let role_skill = rel == format!("roles/{parent}/SKILL.md");
        if let Some(name) = markdown(&mut v, dir, &rel, &["name", "description"])
            && name != parent
            && !(role_skill && name == format!("role-{parent}"))
        {
            v.error(
                &rel,
                format!("the skill is named {name:?} but its directory is {parent:?}"),
            );
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (path, text) in files {
            let p = dir.path().join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        dir
    }

    const SKILL: &str = "---\nname: review\ndescription: Reviews.\n---\nBody\n";

    #[test]
    fn agent_plugins_checks_schema_name_layout_and_skills() {
        let good = tree(&[
            (
                "plugin.json",
                r#"{"$schema": "https://agent-plugins.org/schemas/1.0.0/plugin.schema.json", "name": "hive"}"#,
            ),
            ("skills/review/SKILL.md", SKILL),
            ("org.buzz/persona.json", "{}"),
        ]);
        let v = validate("agent-plugins", good.path());
        assert!(v.ok(), "{:?}", v.errors);
        let bad = tree(&[
            ("plugin.json", r#"{"name": "Hive"}"#),
            ("skills/other/SKILL.md", SKILL),
            ("stray.txt", ""),
        ]);
        let v = validate("agent-plugins", bad.path());
        let all = format!("{:?}", v.errors);
        for needle in ["$schema", "[a-z0-9.-]", "directory is", "stray.txt"] {
            assert!(all.contains(needle), "{needle} not in {all}");
        }
    }

    #[test]
    fn several_packs_side_by_side_are_each_validated() {
        let pack = |id: &str| {
            format!(
                r#"{{"id": "com.example.{id}", "name": "{id}", "version": "1.0.0", "description": "d", "personas": ["agents/p.persona.md"]}}"#
            )
        };
        let persona = "---\nname: p\ndisplay_name: P\ndescription: d\n---\nYou are P.\n";
        let (a, b) = (pack("a"), pack("b"));
        let t = tree(&[
            ("a/.plugin/plugin.json", &a),
            ("a/agents/p.persona.md", persona),
            ("b/.plugin/plugin.json", &b),
            ("README.md", "packs"),
        ]);
        assert_eq!(pack_roots(t.path()), ["a", "b"]);
        let v = validate("buzz-pack", t.path());
        assert_eq!(v.errors.len(), 1, "{:?}", v.errors);
        assert!(v.errors[0].path.starts_with("b/"), "{:?}", v.errors);
    }

    #[test]
    fn claude_paths_must_exist() {
        let t = tree(&[
            (
                ".claude-plugin/plugin.json",
                r#"{"name": "hive", "agents": ["./agents/pip.md", "./agents/gone.md"]}"#,
            ),
            ("agents/pip.md", "---\nname: pip\ndescription: d\n---\nhi\n"),
        ]);
        let v = validate("claude-plugin", t.path());
        assert_eq!(v.errors.len(), 1, "{:?}", v.errors);
        assert!(v.errors[0].message.contains("gone.md"));
    }

    /// Title Case agent names load in Claude Code (a warning: not the recommended spelling); a
    /// name that is a path, has the `plugin:agent` separator or spans lines does not.
    #[test]
    fn claude_agent_names_title_case_warns_path_like_refused() {
        let t = tree(&[
            (
                "agents/a.md",
                "---\nname: Tide Watcher\ndescription: d\n---\nhi\n",
            ),
            (
                "agents/b.md",
                "---\nname: ok-name\ndescription: d\n---\nhi\n",
            ),
        ]);
        let v = validate("claude-plugin", t.path());
        assert!(v.errors.is_empty(), "{:?}", v.errors);
        assert_eq!(v.warnings.len(), 1, "{:?}", v.warnings);
        assert!(v.warnings[0].message.contains("Tide Watcher"));
        for bad in ["x/y", "plug:agent", "\" padded\""] {
            let text = format!("---\nname: {bad}\ndescription: d\n---\nhi\n");
            let t = tree(&[("agents/a.md", text.as_str())]);
            let v = validate("claude-plugin", t.path());
            assert_eq!(v.errors.len(), 1, "{bad}: {:?}", v.errors);
        }
    }

    #[test]
    fn a_person_package_role_skill_is_named_role_slug() {
        let role = |name: &str| format!("---\nname: {name}\ndescription: d\n---\nBody\n");
        let (good, bad) = (role("role-desk"), role("desk-role"));
        let base = [
            ("person.kdl", "person \"p\"\n"),
            ("roles/01-desk.kdl", "role \"desk\"\n"),
        ];
        let t = tree(&[base[0], base[1], ("roles/desk/SKILL.md", &good)]);
        let v = validate("agent-compose-package", t.path());
        assert!(v.ok(), "{:?}", v.errors);
        let t = tree(&[base[0], base[1], ("roles/desk/SKILL.md", &bad)]);
        let v = validate("agent-compose-package", t.path());
        assert_eq!(v.errors.len(), 1, "{:?}", v.errors);
        // Elsewhere the name still equals the directory.
        let t = tree(&[base[0], ("definitions/skills/desk/SKILL.md", &good)]);
        assert!(!validate("agent-compose-package", t.path()).ok());
    }

    #[test]
    fn expert_pack_needs_souls_and_acyclic_reports() {
        let t = tree(&[
            (
                "expert.toml",
                "[expert]\nname = \"ops\"\ndescription = \"d\"\nversion = \"1.0.0\"\n[[expert.agents]]\nname = \"a\"\nreports_to = \"b\"\n[[expert.agents]]\nname = \"b\"\nreports_to = \"a\"\n",
            ),
            ("agents/a/soul.md", "# A"),
        ]);
        let v = validate("duduclaw-expert", t.path());
        let all = format!("{:?}", v.errors);
        assert!(all.contains("agents/b/soul.md"), "{all}");
        assert!(all.contains("cycle"), "{all}");
    }
}
