//! How likely `/input` is each format this converter reads, and why.

use std::path::Path;

use convert_kit::frontmatter::{self, ParseMode};
use convert_kit::pack::Pack;
use convert_kit::{Value, claude, tree};

use crate::marketplace;
use crate::read::Host;

pub struct Detection {
    pub format: &'static str,
    pub confidence: f32,
    pub evidence: String,
}

fn manifest_name(root: &Path, file: &str) -> Option<Option<String>> {
    if !tree::is_file(root, file) {
        return None;
    }
    Some(
        tree::read_json(root, file)
            .ok()
            .and_then(|v| v.get("name").and_then(Value::as_str).map(str::to_string)),
    )
}

/// Agent files with frontmatter under `agents/` (a manifest-less Claude plugin).
fn agent_count(root: &Path) -> usize {
    tree::walk(root, claude::AGENTS_DIR)
        .unwrap_or_default()
        .iter()
        .filter(|f| f.ends_with(".md"))
        .take(200)
        .filter(|f| {
            tree::read(root, f)
                .map(|t| frontmatter::parse(&t).mode != ParseMode::Absent)
                .unwrap_or(false)
        })
        .count()
}

fn skill_count(root: &Path) -> usize {
    tree::list(root, claude::SKILLS_DIR)
        .iter()
        .filter(|d| tree::is_file(root, &format!("{}/{d}/SKILL.md", claude::SKILLS_DIR)))
        .count()
}

pub fn detect(root: &Path) -> Vec<Detection> {
    let mut out = Vec::new();
    let claude = manifest_name(root, Host::Claude.manifest());
    match &claude {
        Some(Some(name)) => out.push(Detection {
            format: "claude-plugin",
            confidence: 0.95,
            evidence: format!("found {} (plugin `{name}`)", claude::MANIFEST),
        }),
        Some(None) => out.push(Detection {
            format: "claude-plugin",
            confidence: 0.6,
            evidence: format!("{} without a readable `name`", claude::MANIFEST),
        }),
        None => {
            let (agents, skills) = (agent_count(root), skill_count(root));
            let pack = Pack::detect(root);
            if (agents > 0 || skills > 0) && !pack {
                out.push(Detection {
                    format: "claude-plugin",
                    confidence: if agents > 0 { 0.5 } else { 0.3 },
                    evidence: format!(
                        "no manifest, but {agents} agent file(s) under agents/ and {skills} skill(s) under skills/ (a manifest-less Claude plugin)"
                    ),
                });
            }
        }
    }
    if let Some((local, remote)) = marketplace::count(root) {
        // A repository that is itself a plugin and lists itself is better read as the plugin.
        let confidence = match (local, claude.is_some()) {
            (0, _) => 0.2,
            (_, true) => 0.7,
            (_, false) => 0.9,
        };
        out.push(Detection {
            format: "claude-marketplace",
            confidence,
            evidence: format!(
                "found {} ({local} local, {remote} remote plugin(s))",
                marketplace::file(root).unwrap_or_default()
            ),
        });
    }
    for (host, format) in [
        (Host::Codex, "codex-plugin"),
        (Host::Cursor, "cursor-plugin"),
        (Host::Gemini, "gemini-extension"),
    ] {
        if let Some(name) = manifest_name(root, host.manifest()) {
            // The Claude manifest wins when a repository ships several.
            let base = if name.is_some() { 0.9 } else { 0.5 };
            let confidence = if claude.is_some() { base - 0.2 } else { base };
            out.push(Detection {
                format,
                confidence,
                evidence: format!("found {}", host.manifest()),
            });
        }
    }
    if Pack::detect(root) {
        out.push(Detection {
            format: "buzz-pack",
            confidence: 0.9,
            evidence: "found .plugin/plugin.json with `personas`".into(),
        });
    }
    out
}
