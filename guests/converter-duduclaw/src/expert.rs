//! The DuDuClaw expert pack as an in-memory model: `expert.toml` (one `[expert]` table with
//! `[[expert.agents]]`), `agents/<name>/{soul.md, agent.partial.toml, .mcp.json}`, `skills/`, and
//! the opaque `hooks/`, `wiki/` and `evals/` trees. Reading keeps every TOML key in file order (as
//! JSON values, so it can ride in a persona pack manifest); writing lays the pack out again.

use std::path::Path;

use convert_kit::{Map, Report, Skill, Value, tree};

/// The manifest file of an expert pack.
pub const MANIFEST: &str = "expert.toml";
/// Deepest bracket nesting accepted in a TOML file (a guard against stack exhaustion).
const MAX_TOML_DEPTH: usize = 64;
/// Most bytes of carried files (agent extras, hooks, wiki, evals, …) read from one pack.
const MAX_CARRIED_BYTES: usize = 64 * 1024 * 1024;

/// An expert pack.
#[derive(Debug, Clone, Default)]
pub struct Expert {
    /// The `[expert]` table in file order, without `agents`.
    pub table: Map<String, Value>,
    /// Top-level keys of `expert.toml` other than `expert` (ignored by DuDuClaw, carried).
    pub rest: Map<String, Value>,
    pub agents: Vec<Agent>,
    pub skills: Vec<Skill>,
    /// Every other file of the pack (`hooks/…`, `wiki/…`, `evals/…`, `README.md`, …), pack-relative.
    pub files: Vec<(String, Vec<u8>)>,
}

/// One `[[expert.agents]]` entry and its directory.
#[derive(Debug, Clone, Default)]
pub struct Agent {
    /// The agent's table in file order (`name`, `role`, `reports_to`, …).
    pub table: Map<String, Value>,
    /// The soul's file name inside `agents/<name>/` (`soul.md`, or `SOUL.md` in templates).
    pub soul_file: String,
    pub soul: String,
    /// `agent.partial.toml`, when present.
    pub partial: Option<Map<String, Value>>,
    /// `.mcp.json`, when present, as written.
    pub mcp: Option<Value>,
    /// Other files in the agent directory, relative to it.
    pub files: Vec<(String, Vec<u8>)>,
}

impl Agent {
    pub fn name(&self) -> &str {
        str_of(&self.table, "name")
    }

    pub fn reports_to(&self) -> &str {
        str_of(&self.table, "reports_to").trim()
    }
}

/// A string value of a map, empty when missing or not a string.
pub fn str_of<'a>(map: &'a Map<String, Value>, key: &str) -> &'a str {
    map.get(key).and_then(Value::as_str).unwrap_or_default()
}

/// Whether `name` can be used as one directory name: not empty, not `.`/`..`, no separators or
/// control characters. (Looser than a DuDuClaw id: CJK names are usable, `../x` is not.)
pub fn is_safe_segment(name: &str) -> bool {
    !name.is_empty()
        && name != "."
        && name != ".."
        && name.len() <= 255
        && !name
            .chars()
            .any(|c| c == '/' || c == '\\' || c.is_control())
}

/// Reads and parses a TOML file into an ordered JSON map. Values JSON has no place for (dates,
/// non-finite floats) become strings and are reported.
pub fn read_toml(
    root: &Path,
    file: &str,
    report: &mut Report,
) -> Result<Map<String, Value>, String> {
    let text = tree::read(root, file)?;
    parse_toml(&text, file, report)
}

/// Parses TOML text (see [`read_toml`]).
pub fn parse_toml(
    text: &str,
    file: &str,
    report: &mut Report,
) -> Result<Map<String, Value>, String> {
    if nesting(text) > MAX_TOML_DEPTH {
        return Err(format!(
            "{file}: nested deeper than {MAX_TOML_DEPTH} levels; refused"
        ));
    }
    let table: toml::Table = text
        .parse()
        .map_err(|e: toml::de::Error| format!("{file}: invalid TOML: {}", e.message()))?;
    let mut out = Map::new();
    for (key, value) in table {
        let v = to_json(value, file, &key, report);
        out.insert(key, v);
    }
    Ok(out)
}

/// The deepest `[`/`{` nesting outside strings and comments (an upper bound is enough here).
fn nesting(text: &str) -> usize {
    let (mut depth, mut max) = (0usize, 0usize);
    let mut quote: Option<char> = None;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match quote {
            Some(q) => {
                if c == '\\' && q == '"' {
                    chars.next();
                } else if c == q {
                    quote = None;
                }
            }
            None => match c {
                '"' | '\'' => quote = Some(c),
                '#' => {
                    for c in chars.by_ref() {
                        if c == '\n' {
                            break;
                        }
                    }
                }
                '[' | '{' => {
                    depth += 1;
                    max = max.max(depth);
                }
                ']' | '}' => depth = depth.saturating_sub(1),
                '\n' => {}
                _ => {}
            },
        }
        // A multi-line string's quotes pair up the same way, so one flag covers both forms.
    }
    max
}

fn to_json(value: toml::Value, file: &str, field: &str, report: &mut Report) -> Value {
    match value {
        toml::Value::String(s) => Value::String(s),
        toml::Value::Integer(i) => Value::from(i),
        toml::Value::Float(f) => match serde_json::Number::from_f64(f) {
            Some(n) => Value::Number(n),
            None => {
                report.normalised(
                    "toml-float-as-string",
                    file,
                    field,
                    format!("non-finite float {f} carried as the string \"{f}\""),
                );
                Value::String(f.to_string())
            }
        },
        toml::Value::Boolean(b) => Value::Bool(b),
        toml::Value::Datetime(d) => {
            report.normalised(
                "toml-datetime-as-string",
                file,
                field,
                format!("TOML date-time {d} carried as a string"),
            );
            Value::String(d.to_string())
        }
        toml::Value::Array(items) => Value::Array(
            items
                .into_iter()
                .enumerate()
                .map(|(i, v)| to_json(v, file, &format!("{field}.{i}"), report))
                .collect(),
        ),
        toml::Value::Table(table) => Value::Object(
            table
                .into_iter()
                .map(|(k, v)| {
                    let path = format!("{field}.{k}");
                    (k, to_json(v, file, &path, report))
                })
                .collect(),
        ),
    }
}

/// A JSON value as TOML; `null`s have no TOML form and are dropped (listed in `dropped`).
pub fn to_toml(value: &Value, field: &str, dropped: &mut Vec<String>) -> Option<toml::Value> {
    Some(match value {
        Value::Null => {
            dropped.push(field.to_string());
            return None;
        }
        Value::Bool(b) => toml::Value::Boolean(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => toml::Value::Integer(i),
            None => toml::Value::Float(n.as_f64().unwrap_or_default()),
        },
        Value::String(s) => toml::Value::String(s.clone()),
        Value::Array(items) => toml::Value::Array(
            items
                .iter()
                .enumerate()
                .filter_map(|(i, v)| to_toml(v, &format!("{field}.{i}"), dropped))
                .collect(),
        ),
        Value::Object(map) => toml::Value::Table(to_toml_table(map, field, dropped)),
    })
}

/// A JSON map as a TOML table (see [`to_toml`]).
pub fn to_toml_table(
    map: &Map<String, Value>,
    field: &str,
    dropped: &mut Vec<String>,
) -> toml::Table {
    let mut table = toml::Table::new();
    for (k, v) in map {
        let path = if field.is_empty() {
            k.clone()
        } else {
            format!("{field}.{k}")
        };
        if let Some(t) = to_toml(v, &path, dropped) {
            table.insert(k.clone(), t);
        }
    }
    table
}

impl Expert {
    /// Whether `root` holds an expert pack manifest.
    pub fn detect(root: &Path) -> bool {
        tree::is_file(root, MANIFEST)
    }

    /// Reads the expert pack at `root`. A pack that cannot be used at all (no `[expert]` table,
    /// no agents, an agent name that is not a safe directory name, a missing soul) is an error.
    pub fn read(root: &Path, report: &mut Report) -> Result<Expert, String> {
        let mut doc = read_toml(root, MANIFEST, report)?;
        check_format_marker(&doc)?;
        let mut table = match doc.remove("expert") {
            Some(Value::Object(t)) => t,
            Some(_) => return Err(format!("{MANIFEST}: `expert` is not a table")),
            None => return Err(format!("{MANIFEST} has no [expert] table")),
        };
        let entries = match table.remove("agents") {
            Some(Value::Array(items)) => items,
            Some(_) => {
                return Err(format!(
                    "{MANIFEST}: `expert.agents` is not an array of tables"
                ));
            }
            None => Vec::new(),
        };
        if entries.is_empty() {
            return Err(format!("{MANIFEST} declares no [[expert.agents]]"));
        }
        let mut agents: Vec<Agent> = Vec::new();
        for (i, entry) in entries.into_iter().enumerate() {
            let Value::Object(agent_table) = entry else {
                return Err(format!("{MANIFEST}: expert.agents.{i} is not a table"));
            };
            let name = str_of(&agent_table, "name").to_string();
            if !is_safe_segment(&name) {
                return Err(format!(
                    "{MANIFEST}: expert.agents.{i}.name `{}` is not a usable agent name (it must be one directory name under agents/)",
                    name.escape_debug()
                ));
            }
            if agents.iter().any(|a| a.name() == name) {
                return Err(format!("{MANIFEST}: agent `{name}` is declared twice"));
            }
            agents.push(read_agent(root, agent_table, &name, report)?);
        }
        let skills = read_skills(root)?;
        let files = read_other_files(root, &agents, &skills)?;
        Ok(Expert {
            table,
            rest: doc,
            agents,
            skills,
            files,
        })
    }

    /// Writes the pack under `root`. `expert.toml` keeps the key order of the model.
    pub fn write(&self, root: &Path) -> Result<Vec<String>, String> {
        let mut dropped = Vec::new();
        let mut expert = to_toml_table(&self.table, "expert", &mut dropped);
        let agents: Vec<toml::Value> = self
            .agents
            .iter()
            .map(|a| toml::Value::Table(to_toml_table(&a.table, "expert.agents", &mut dropped)))
            .collect();
        expert.insert("agents".into(), toml::Value::Array(agents));
        let mut doc = toml::Table::new();
        doc.insert("expert".into(), toml::Value::Table(expert));
        for (k, v) in &self.rest {
            if let Some(t) = to_toml(v, k, &mut dropped) {
                doc.insert(k.clone(), t);
            }
        }
        let text = toml::to_string(&doc).map_err(|e| format!("cannot write {MANIFEST}: {e}"))?;
        tree::write(root, MANIFEST, text)?;
        for agent in &self.agents {
            let dir = format!("agents/{}", agent.name());
            tree::write(root, &format!("{dir}/{}", agent.soul_file), &agent.soul)?;
            if let Some(partial) = &agent.partial {
                let table = to_toml_table(partial, "agent.partial", &mut dropped);
                let text = toml::to_string(&table)
                    .map_err(|e| format!("cannot write {dir}/agent.partial.toml: {e}"))?;
                tree::write(root, &format!("{dir}/agent.partial.toml"), text)?;
            }
            if let Some(mcp) = &agent.mcp {
                tree::write_json(root, &format!("{dir}/.mcp.json"), mcp)?;
            }
            for (path, bytes) in &agent.files {
                tree::write(root, &format!("{dir}/{path}"), bytes)?;
            }
        }
        for skill in &self.skills {
            skill.write(root, &format!("skills/{}", skill.name))?;
        }
        for (path, bytes) in &self.files {
            tree::write(root, path, bytes)?;
        }
        Ok(dropped)
    }

    /// The pack rules a DuDuClaw `expert pack` check applies: a slug name, a description and a
    /// version, unique slug agent names, known `reports_to` targets without cycles.
    pub fn check(&self) -> Result<(), String> {
        let name = str_of(&self.table, "name");
        if !convert_kit::slug::is_valid(name, convert_kit::slug::Rules::DuDuClaw) {
            return Err(format!("expert name `{name}` is not a DuDuClaw id"));
        }
        for key in ["description", "version"] {
            if str_of(&self.table, key).trim().is_empty() {
                return Err(format!("expert.toml needs `{key}`"));
            }
        }
        for agent in &self.agents {
            if !convert_kit::slug::is_valid(agent.name(), convert_kit::slug::Rules::DuDuClaw) {
                return Err(format!(
                    "agent name `{}` is not a DuDuClaw id",
                    agent.name()
                ));
            }
        }
        crate::topo::order(&self.agents).map(|_| ())
    }
}

impl crate::topo::ReportsTo for Agent {
    fn name(&self) -> &str {
        Agent::name(self)
    }
    fn reports_to(&self) -> &str {
        Agent::reports_to(self)
    }
}

/// The expert pack format major this converter reads (DuDuClaw's "Expert Pack Format v1.0").
pub const FORMAT_MAJOR: u64 = 1;
/// Keys that may carry a format version, at the top of `expert.toml` or in `[expert]`.
const MARKER_KEYS: &[&str] = &[
    "format",
    "format_version",
    "spec_version",
    "schema_version",
    "expert_format",
    "expert_version",
];

/// The Expert Pack Format v1.0, §6 Versioning & stability: a breaking change comes as v2 "with a
/// new top-level marker", and installers refuse majors they do not know (fail closed). A marker is
/// a versioned `[expert…]` table (`[expert-v2]`, `[expert2]`, `[expert_v2]`) or a format key
/// (`format = "expert-pack/2"`, `format_version = 2`, also inside `[expert]`) whose major version
/// is not 1.
pub fn check_format_marker(doc: &Map<String, Value>) -> Result<(), String> {
    let inner = doc.get("expert").and_then(Value::as_object);
    let keyed = MARKER_KEYS.iter().filter_map(|k| {
        let top = doc.get(*k).map(|v| (k.to_string(), v));
        top.or_else(|| inner?.get(*k).map(|v| (format!("expert.{k}"), v)))
    });
    for (field, value) in keyed {
        let text = match value {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        if let Some(major) = major_of(&text)
            && major != FORMAT_MAJOR
        {
            return Err(unknown_major(&format!("`{field} = {value}`"), major));
        }
    }
    for key in doc.keys() {
        let Some(rest) = key.strip_prefix("expert") else {
            continue;
        };
        let version = rest.trim_start_matches(['-', '_', '.']);
        let version = version.strip_prefix(['v', 'V']).unwrap_or(version);
        if !version.is_empty()
            && version.bytes().all(|b| b.is_ascii_digit() || b == b'.')
            && let Some(major) = major_of(version)
            && major != FORMAT_MAJOR
        {
            return Err(unknown_major(&format!("the table `[{key}]`"), major));
        }
    }
    Ok(())
}

/// The first run of digits in a version text (`expert-pack/2.1` -> 2, `v3` -> 3).
fn major_of(text: &str) -> Option<u64> {
    let start = text.find(|c: char| c.is_ascii_digit())?;
    let digits: String = text[start..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

fn unknown_major(marker: &str, major: u64) -> String {
    format!(
        "{MANIFEST}: format marker {marker} names expert pack format v{major}, which this converter does not know (it reads v{FORMAT_MAJOR}); refused rather than guessed (seed 004 §6: installers refuse majors they do not know)"
    )
}

fn read_agent(
    root: &Path,
    table: Map<String, Value>,
    name: &str,
    report: &mut Report,
) -> Result<Agent, String> {
    let dir = format!("agents/{name}");
    let soul_file = ["soul.md", "SOUL.md"]
        .into_iter()
        .find(|f| tree::is_file(root, &format!("{dir}/{f}")))
        .ok_or_else(|| format!("agent `{name}` has no {dir}/soul.md"))?;
    let soul = tree::read(root, &format!("{dir}/{soul_file}"))?;
    let partial_path = format!("{dir}/agent.partial.toml");
    let partial = if tree::is_file(root, &partial_path) {
        Some(read_toml(root, &partial_path, report)?)
    } else {
        None
    };
    let mcp_path = format!("{dir}/.mcp.json");
    let mcp = if tree::is_file(root, &mcp_path) {
        Some(tree::read_json(root, &mcp_path)?)
    } else {
        None
    };
    let mut files = Vec::new();
    if tree::is_dir(root, &dir) {
        for file in tree::walk(root, &dir)? {
            let rel = file[dir.len() + 1..].to_string();
            if rel != soul_file && rel != "agent.partial.toml" && rel != ".mcp.json" {
                files.push((rel, tree::read_bytes(root, &file)?));
            }
        }
    }
    Ok(Agent {
        table,
        soul_file: soul_file.to_string(),
        soul,
        partial,
        mcp,
        files,
    })
}

fn read_skills(root: &Path) -> Result<Vec<Skill>, String> {
    let mut skills = Vec::new();
    for name in tree::list(root, "skills") {
        let dir = format!("skills/{name}");
        if tree::is_dir(root, &dir) {
            skills.push(Skill::read(root, &dir)?);
        }
    }
    Ok(skills)
}

/// Every file that is not the manifest, an agent's directory or a skill: hooks, wiki, evals and
/// anything else, carried opaquely.
fn read_other_files(
    root: &Path,
    agents: &[Agent],
    skills: &[Skill],
) -> Result<Vec<(String, Vec<u8>)>, String> {
    let mut files = Vec::new();
    let mut total = 0usize;
    for file in tree::walk(root, "")? {
        if file == MANIFEST {
            continue;
        }
        let in_agent = agents
            .iter()
            .any(|a| file.starts_with(&format!("agents/{}/", a.name())));
        let in_skill = skills
            .iter()
            .any(|s| file.starts_with(&format!("skills/{}/", s.name)));
        if !in_agent && !in_skill {
            let bytes = tree::read_bytes(root, &file)?;
            total += bytes.len();
            if total > MAX_CARRIED_BYTES {
                return Err(format!(
                    "the pack's other files are larger than {MAX_CARRIED_BYTES} bytes"
                ));
            }
            files.push((file, bytes));
        }
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nesting_ignores_strings_and_comments() {
        assert_eq!(nesting("a = [1, [2]]\n"), 2);
        assert_eq!(nesting("a = \"[[[[\" # [[[[\n[b]\n"), 1);
        assert_eq!(
            nesting(&format!("a = {}{}", "[".repeat(100), "]".repeat(100))),
            100
        );
    }

    #[test]
    fn format_markers() {
        let doc = |text: &str| parse_toml(text, MANIFEST, &mut Report::default()).unwrap();
        let ok = [
            "[expert]\nname = \"a\"\n",
            "format = \"expert-pack/1.0\"\n[expert]\n",
            "[expert]\nformat_version = 1\n",
            "[expert]\n[expert-extras]\n",
        ];
        for text in ok {
            assert!(check_format_marker(&doc(text)).is_ok(), "{text}");
        }
        let refused = [
            ("[expert-v2]\nname = \"a\"\n", "`[expert-v2]`", "v2"),
            ("[expert2]\n", "`[expert2]`", "v2"),
            (
                "format = \"expert-pack/3\"\n[expert]\n",
                "format = \"expert-pack/3\"",
                "v3",
            ),
            (
                "[expert]\nspec_version = \"2.0\"\n",
                "expert.spec_version",
                "v2",
            ),
        ];
        for (text, marker, major) in refused {
            let e = check_format_marker(&doc(text)).unwrap_err();
            assert!(
                e.contains(marker) && e.contains(major) && e.contains(MANIFEST),
                "{e}"
            );
        }
    }

    #[test]
    fn segments() {
        assert!(is_safe_segment("front-desk"));
        assert!(is_safe_segment("前台"));
        assert!(!is_safe_segment("../x"));
        assert!(!is_safe_segment(".."));
        assert!(!is_safe_segment("a\\b"));
        assert!(!is_safe_segment(""));
    }
}
