//! Which format an input tree is in, decided by the host with ordered, fail-closed rules
//! (formats.md §9.1). The first rule that matches decides; a manifest the rules rely on that does
//! not parse refuses the input rather than guessing. When nothing matches at the root and the root
//! holds a single directory, the rules run once more inside it (a wrapper such as `my-plugin-main/`
//! from an archive). When still nothing matches, the caller may ask third-party converters'
//! `detect`; failing that, the input is refused with a list of what was found.

use std::path::{Path, PathBuf};

use convert_kit::claude;
use serde::Serialize;

/// Manifests read by the rules are small; anything bigger is not one.
const MAX_MANIFEST: u64 = 1 << 20;
/// How many root entries a refusal lists.
const MAX_LISTED: usize = 40;

/// A format the host rules decided on.
#[derive(Debug, Clone, Serialize)]
pub struct Detected {
    pub format: String,
    /// The rule that matched (stable id, for `--json`).
    pub rule: &'static str,
    /// What the decision rests on, for people.
    pub evidence: String,
    /// The directory the format was found in, relative to the input root (`""` for the root,
    /// else the wrapper directory's name).
    pub root: PathBuf,
}

/// Why the rules did not decide.
#[derive(Debug, Clone, Serialize)]
pub struct Refusal {
    /// One sentence.
    pub reason: String,
    /// What was looked at: root entries and notes such as "plugin.json without an Agent Plugins
    /// $schema".
    pub found: Vec<String>,
    /// True when a rule matched but its manifest is broken (fail closed: no third-party guessing).
    pub fatal: bool,
}

/// Formats the host recognises but no built-in converter reads; named so the refusal can say so.
pub const NAMED_ONLY: &[(&str, &str)] = &[
    ("codex-plugin", "a Codex plugin (.codex-plugin/plugin.json)"),
    (
        "cursor-plugin",
        "a Cursor plugin (.cursor-plugin/plugin.json)",
    ),
    (
        "gemini-extension",
        "a Gemini CLI extension (gemini-extension.json)",
    ),
];

/// Runs the rules at `root`, then once inside a single wrapper directory.
pub fn detect(root: &Path) -> Result<Detected, Refusal> {
    let mut notes = Vec::new();
    match rules(root, &mut notes) {
        Ok(Some(d)) => return Ok(d),
        Ok(None) => {}
        Err(r) => return Err(r),
    }
    if let Some(wrapper) = single_wrapper(root) {
        let mut inner_notes = Vec::new();
        match rules(&root.join(&wrapper), &mut inner_notes) {
            Ok(Some(mut d)) => {
                d.root = PathBuf::from(&wrapper);
                d.evidence = format!("{} (inside the wrapper directory {wrapper}/)", d.evidence);
                return Ok(d);
            }
            Ok(None) => {
                notes.extend(inner_notes.into_iter().map(|n| format!("{wrapper}/{n}")));
                let mut found = listing(root, "");
                found.extend(listing(&root.join(&wrapper), &format!("{wrapper}/")));
                found.extend(notes);
                if let Some(reason) = agent_folders(&root.join(&wrapper)) {
                    return Err(Refusal {
                        reason: format!(
                            "in {wrapper}/: {}",
                            reason.replace(INPUT, &format!("{INPUT}/{wrapper}"))
                        ),
                        found,
                        fatal: false,
                    });
                }
                return Err(Refusal {
                    reason: format!(
                        "no known format at the root or inside the wrapper directory {wrapper}/"
                    ),
                    found,
                    fatal: false,
                });
            }
            Err(mut r) => {
                r.reason = format!("in {wrapper}/: {}", r.reason);
                return Err(r);
            }
        }
    }
    let mut found = listing(root, "");
    found.extend(notes);
    if let Some(reason) = agent_folders(root) {
        return Err(Refusal {
            reason,
            found,
            fatal: false,
        });
    }
    Err(Refusal {
        reason: "no known format: none of expert.toml, .plugin/plugin.json, plugin.json with an Agent Plugins $schema, .claude-plugin/, a marketplace.json, .codex-plugin/, .cursor-plugin/, gemini-extension.json, person.kdl or a roster .kdl, an agent-compose person.json, SKILL.md, agents/*.md or loose agent .md files".to_string(),
        found,
        fatal: false,
    })
}

fn found(format: &str, rule: &'static str, evidence: impl Into<String>) -> Option<Detected> {
    Some(Detected {
        format: format.to_string(),
        rule,
        evidence: evidence.into(),
        root: PathBuf::new(),
    })
}

/// The rules, in order. `notes` collects near misses for a refusal.
fn rules(dir: &Path, notes: &mut Vec<String>) -> Result<Option<Detected>, Refusal> {
    if dir.join("expert.toml").is_file() {
        return Ok(found("duduclaw-expert", "expert-toml", "found expert.toml"));
    }
    if dir.join(".plugin/plugin.json").is_file() {
        let manifest = read_json(dir, ".plugin/plugin.json")?;
        return Ok(if manifest.get("personas").is_some() {
            found(
                "buzz-pack",
                "plugin-dir-personas",
                "found .plugin/plugin.json with a `personas` list",
            )
        } else {
            found(
                "agent-plugins-draft",
                "plugin-dir",
                "found .plugin/plugin.json without `personas` (the April 2026 Open Plugin draft)",
            )
        });
    }
    if dir.join("plugin.json").is_file()
        && let Some(d) = root_plugin_json(dir, notes)
    {
        return Ok(Some(d));
    }
    if dir.join(claude::MANIFEST).is_file() {
        return Ok(found(
            "claude-plugin",
            "claude-plugin-json",
            format!("found {}", claude::MANIFEST),
        ));
    }
    // Plugin marketplaces (Claude, Copilot, Agent Plugins): one shape, read by one converter.
    for file in claude::MARKETPLACES {
        if dir.join(file).is_file() {
            return Ok(found(
                "claude-marketplace",
                "marketplace-json",
                format!("found {file}"),
            ));
        }
    }
    for (file, format) in [
        (claude::CODEX_MANIFEST, "codex-plugin"),
        (claude::CURSOR_MANIFEST, "cursor-plugin"),
        (claude::GEMINI_MANIFEST, "gemini-extension"),
    ] {
        if dir.join(file).is_file() {
            return Ok(found(format, "named-manifest", format!("found {file}")));
        }
    }
    if let Some(d) = copilot_manifest(dir) {
        return Ok(Some(d));
    }
    Ok(layout_rules(dir, notes))
}

/// Where GitHub Copilot CLI keeps a plugin manifest besides Claude's (its dialect is Claude's).
const COPILOT_MANIFEST: &str = ".github/plugin/plugin.json";

/// A GitHub Copilot CLI plugin: `.github/plugin/plugin.json`, or a root `plugin.json` (no Agent
/// Plugins `$schema`, see [`root_plugin_json`]) that names components, so a stray `plugin.json`
/// with only a name is still no plugin.
fn copilot_manifest(dir: &Path) -> Option<Detected> {
    if dir.join(COPILOT_MANIFEST).is_file() {
        return found(
            "claude-plugin",
            "copilot-plugin-json",
            format!(
                "found {COPILOT_MANIFEST} (a GitHub Copilot CLI plugin, read in Claude's dialect)"
            ),
        );
    }
    let root = read_json(dir, "plugin.json").ok()?;
    let names_components = claude::COMPONENT_FIELDS
        .iter()
        .any(|f| root.get(*f).is_some());
    (root.get("name").is_some_and(|n| n.is_string()) && names_components).then(|| Detected {
        format: "claude-plugin".into(),
        rule: "copilot-plugin-json",
        evidence: "found plugin.json naming components, without an Agent Plugins $schema (a GitHub Copilot CLI plugin, read in Claude's dialect)".into(),
        root: PathBuf::new(),
    })
}

/// The rules for packs told by their layout rather than a plugin manifest (agent-compose files, a
/// bare skill, agent files), in order.
fn layout_rules(dir: &Path, notes: &mut Vec<String>) -> Option<Detected> {
    if dir.join("person.kdl").is_file() {
        return found("agent-compose-package", "person-kdl", "found person.kdl");
    }
    if let Some(kdl) = roster_kdl(dir) {
        return found(
            "agent-compose-package",
            "roster-kdl",
            format!("found {kdl} with a `roster` node"),
        );
    }
    if dir.join("person.json").is_file()
        && let Some(d) = person_json(dir, notes)
    {
        return Some(d);
    }
    if dir.join("SKILL.md").is_file() {
        return found(
            "claude-plugin",
            "bare-skill",
            "found a bare SKILL.md (manifest-less Claude plugin)",
        );
    }
    let agents = agent_markdown(dir);
    if agents > 0 {
        return found(
            "claude-plugin",
            "agents-only",
            format!(
                "found {agents} agents/*.md file(s) and no manifest (manifest-less Claude plugin)"
            ),
        );
    }
    let loose = loose_agents(dir);
    if loose > 0 {
        return found(
            "agents-dir",
            "loose-agents",
            format!("found {loose} top-level .md file(s) with agent frontmatter and no manifest"),
        );
    }
    None
}

/// Stands for the input path in a refusal's reason (the rules may see a private copy of it).
pub const INPUT: &str = "<input>";

/// A root that is no pack itself but whose subfolders are (a repository of department or
/// category folders, each a folder of agents or a plugin): the sentence that says so and how to
/// convert them, one folder at a time. `None` when no subfolder is one.
fn agent_folders(root: &Path) -> Option<String> {
    let mut entries: Vec<(String, PathBuf)> = std::fs::read_dir(root)
        .ok()?
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path()))
        .filter(|(n, _)| !n.starts_with('.'))
        .collect();
    entries.sort();
    let folders: Vec<String> = entries
        .iter()
        .filter_map(|(name, path)| {
            let agents = loose_agents(path) + agent_markdown(path);
            if agents > 0 {
                Some(format!("{name}/ ({agents} agent file(s))"))
            } else if rules(path, &mut Vec::new()).is_ok_and(|d| d.is_some()) {
                Some(format!("{name}/"))
            } else {
                None
            }
        })
        .collect();
    let first = folders
        .first()?
        .split('/')
        .next()
        .unwrap_or_default()
        .to_string();
    let shown = folders.len().min(6);
    let more = if folders.len() > shown {
        format!(", … and {} more", folders.len() - shown)
    } else {
        String::new()
    };
    Some(format!(
        "nothing at the top, but {} subfolder(s) hold agents or plugins: {}{more}. A persona pack is one team; convert each folder on its own, e.g. `apiary convert {INPUT}/{first} --to buzz-pack` (the pack is named after the folder)",
        folders.len(),
        folders[..shown].join(", "),
    ))
}

/// How many top-level `.md` files of `dir` open with frontmatter naming `name:` and
/// `description:` (loose agent files; documentation such as a README does not count).
fn loose_agents(dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .filter(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.to_ascii_lowercase().ends_with(".md")
                && !name.to_ascii_uppercase().starts_with("README")
                && read_capped(&e.path()).is_ok_and(|t| has_agent_frontmatter(&t))
        })
        .count()
}

/// Frontmatter (`---` first line, BOM allowed) with `name:` and `description:` keys.
fn has_agent_frontmatter(text: &str) -> bool {
    let mut lines = text.trim_start_matches('\u{feff}').lines();
    if lines.next().map(str::trim_end) != Some("---") {
        return false;
    }
    let (mut name, mut description) = (false, false);
    for line in lines {
        if line.trim_end() == "---" {
            break;
        }
        name |= line.starts_with("name:");
        description |= line.starts_with("description:");
    }
    name && description
}

/// A root `plugin.json` with an Agent Plugins `$schema`; anything else is noted.
fn root_plugin_json(dir: &Path, notes: &mut Vec<String>) -> Option<Detected> {
    match read_json(dir, "plugin.json") {
        Ok(v) => match v.get("$schema").and_then(|s| s.as_str()) {
            Some(s) if is_agent_plugins_schema(s) => {
                return found(
                    "agent-plugins",
                    "root-plugin-json",
                    format!("found plugin.json with $schema {s}"),
                );
            }
            Some(s) => notes.push(format!(
                "plugin.json has $schema {s}, which is not an Agent Plugins schema"
            )),
            None => notes.push("plugin.json has no $schema (not Agent Plugins 1.0)".into()),
        },
        Err(r) => notes.push(r.reason),
    }
    None
}

/// A `person.json` agent-compose snapshot; anything else is noted.
fn person_json(dir: &Path, notes: &mut Vec<String>) -> Option<Detected> {
    match read_json(dir, "person.json") {
        Ok(v) => match v.get("format").and_then(|f| f.as_str()) {
            Some(f) if f.starts_with("agent-compose.person-snapshot.") => {
                return found(
                    "agent-compose-snapshot",
                    "person-json",
                    format!("found person.json with format {f}"),
                );
            }
            _ => notes.push(
                "person.json has no `format` starting with agent-compose.person-snapshot.".into(),
            ),
        },
        Err(r) => notes.push(r.reason),
    }
    None
}

/// An Agent Plugins (or its earlier name, Open Plugin) schema URL.
fn is_agent_plugins_schema(s: &str) -> bool {
    let s = s.to_ascii_lowercase();
    s.contains("agent-plugins") || s.contains("open-plugin")
}

/// Reads a small JSON manifest; a broken one refuses the input (fail closed).
fn read_json(dir: &Path, rel: &str) -> Result<serde_json::Value, Refusal> {
    let fatal = |reason: String| Refusal {
        reason,
        found: listing(dir, ""),
        fatal: true,
    };
    let path = dir.join(rel);
    let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    if size > MAX_MANIFEST {
        return Err(fatal(format!(
            "{rel} is {size} bytes, over the {MAX_MANIFEST}-byte cap for a manifest"
        )));
    }
    let text =
        std::fs::read_to_string(&path).map_err(|e| fatal(format!("cannot read {rel}: {e}")))?;
    serde_json::from_str(text.trim_start_matches('\u{feff}')).map_err(|e| {
        fatal(format!(
            "{rel} is not valid JSON (line {}, column {}): {e}",
            e.line(),
            e.column()
        ))
    })
}

/// A top-level `.kdl` file whose first node is `roster`.
fn roster_kdl(dir: &Path) -> Option<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".kdl"))
        .collect();
    names.sort();
    names.into_iter().find(|n| {
        let Ok(text) = read_capped(&dir.join(n)) else {
            return false;
        };
        text.lines()
            .map(str::trim)
            .find(|l| !l.is_empty() && !l.starts_with("//"))
            .is_some_and(|l| l.starts_with("roster ") || l.starts_with("roster\t"))
    })
}

fn read_capped(path: &Path) -> std::io::Result<String> {
    use std::io::Read;
    let mut s = String::new();
    std::fs::File::open(path)?
        .take(MAX_MANIFEST)
        .read_to_string(&mut s)?;
    Ok(s)
}

/// How many `agents/*.md` files `dir` has (one level; Claude also allows subdirectories).
fn agent_markdown(dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir.join(claude::AGENTS_DIR)) else {
        return 0;
    };
    entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .filter(|e| e.file_name().to_string_lossy().ends_with(".md"))
        .count()
}

/// The name of the only non-hidden entry of `root`, when it is a directory.
fn single_wrapper(root: &Path) -> Option<String> {
    let mut visible = std::fs::read_dir(root)
        .ok()?
        .flatten()
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'));
    let only = visible.next()?;
    if visible.next().is_some() || !only.file_type().ok()?.is_dir() {
        return None;
    }
    Some(only.file_name().to_string_lossy().into_owned())
}

/// `prefix` + each entry of `dir`, directories with a trailing `/`, sorted, capped.
fn listing(dir: &Path, prefix: &str) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .flatten()
        .map(|e| {
            let mut n = format!("{prefix}{}", e.file_name().to_string_lossy());
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                n.push('/');
            }
            n
        })
        .collect();
    names.sort();
    if names.is_empty() {
        names.push(format!("{prefix}(empty directory)"));
    }
    if names.len() > MAX_LISTED {
        let more = names.len() - MAX_LISTED;
        names.truncate(MAX_LISTED);
        names.push(format!("… and {more} more"));
    }
    names
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

    fn format_of(files: &[(&str, &str)]) -> Result<String, Refusal> {
        let t = tree(files);
        detect(t.path()).map(|d| d.format)
    }

    #[test]
    fn order_decides_when_several_manifests_are_present() {
        let all = [
            ("expert.toml", "[expert]"),
            (".plugin/plugin.json", r#"{"personas": []}"#),
            (".claude-plugin/plugin.json", "{}"),
        ];
        assert_eq!(format_of(&all).unwrap(), "duduclaw-expert");
        assert_eq!(format_of(&all[1..]).unwrap(), "buzz-pack");
        assert_eq!(
            format_of(&[(".plugin/plugin.json", r#"{"name": "x"}"#)]).unwrap(),
            "agent-plugins-draft"
        );
        assert_eq!(
            format_of(&[
                ("gemini-extension.json", "{}"),
                (".claude-plugin/plugin.json", "{}")
            ])
            .unwrap(),
            "claude-plugin"
        );
    }

    #[test]
    fn broken_manifest_refuses_fail_closed() {
        let r = format_of(&[(".plugin/plugin.json", "{ nope")]).unwrap_err();
        assert!(r.fatal);
        assert!(r.reason.contains("not valid JSON"), "{}", r.reason);
    }

    #[test]
    fn roster_kdl_and_snapshot() {
        assert_eq!(
            format_of(&[("core.kdl", "// c\nroster \"core\" {\n}\n")]).unwrap(),
            "agent-compose-package"
        );
        assert_eq!(
            format_of(&[(
                "person.json",
                r#"{"format": "agent-compose.person-snapshot.v3"}"#
            )])
            .unwrap(),
            "agent-compose-snapshot"
        );
        let r = format_of(&[("person.json", r#"{"format": "other"}"#)]).unwrap_err();
        assert!(r.found.iter().any(|f| f.contains("person.json")));
    }

    #[test]
    fn the_converters_runtime_tool_names_are_the_policys() {
        // convert-kit keeps its own copy (the guests cannot link apiary-core): the same names.
        let mut host: Vec<&str> = apiary_core::pack::tool_names::TOOLS
            .iter()
            .flat_map(|t| t.names())
            .collect();
        host.sort_unstable();
        host.dedup();
        let mut kit = convert_kit::policy::RUNTIME_TOOLS.to_vec();
        kit.sort_unstable();
        assert_eq!(kit, host);
    }

    #[test]
    fn a_root_of_agent_folders_is_refused_with_a_hint() {
        let agent = "---\nname: a\ndescription: d\n---\nx\n";
        let r = format_of(&[
            ("team-a/a.md", agent),
            ("team-b/agents/b.md", agent),
            ("notes/x.txt", "x"),
        ])
        .unwrap_err();
        assert!(
            r.reason
                .contains("team-a/ (1 agent file(s)), team-b/ (1 agent file(s))"),
            "{}",
            r.reason
        );
        assert!(
            r.reason.contains(&format!("{INPUT}/team-a")),
            "{}",
            r.reason
        );
        assert!(!r.reason.contains("notes"), "{}", r.reason);
    }
}
