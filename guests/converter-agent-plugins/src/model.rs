//! The Agent Plugins 1.0 format as this converter sees it: the fixed identifiers, the closed
//! manifest, its name rule, and apiary's extension namespace.
//!
//! ## apiary's namespace: `dev.apiary.persona-pack`
//!
//! Agent Plugins (OPS) 1.0 carries only skills and MCP servers. Everything else a persona pack
//! has lives under one reverse-DNS client namespace, in both places §8 allows:
//!
//! - `plugin.json` `extensions["dev.apiary.persona-pack"]`: the persona pack manifest minus the
//!   fields OPS holds itself at the top level. Its keys are the persona pack's own (`id`, `name`
//!   when the title differs from the slug, `$schema`, `engines`, `personas`, `defaults`,
//!   `pack_instructions`, `hooks_config`, unknown keys), and paths in it are relative to the
//!   namespace directory. Two more keys keep values OPS can only hold in another spelling:
//!   `author` (the pack's own `author` when it is not the OPS object verbatim) and `mcp_servers`
//!   (a pack MCP server's original entry when the `mcp.json` spelling cannot give it back).
//! - the directory `dev.apiary.persona-pack/`: the persona files, the instructions file, the
//!   lifecycle hooks file and its scripts, and every other pack file OPS has no place for (another
//!   format's carried data such as `x-claude/`, snapshots, a root `plugin.json`), all at their
//!   pack-relative paths. Only `skills/`, root documentation and other clients' reverse-DNS
//!   directories stay at the plugin root ([`stays_at_top`]).
//!
//! The namespace is apiary's (the client that implements it), not Buzz's: apiary defines what
//! the block means and reads it back.
//!
//! A persona pack that came from a plain OPS plugin keeps the OPS-only data in its own manifest
//! key `x-agent-plugins` (persona pack manifests tolerate unknown keys with a warning): the OPS
//! `name` slug, other clients' `extensions`, the OPS author object when the pack holds a string,
//! MCP entries the pack cannot hold, and what was synthesised. It is read back on the way out.

use apiary_schema::manifest;
use convert_kit::slug::{self, Rules};
use convert_kit::{Map, Value};

/// The only `plugin.json` `$schema` Agent Plugins 1.0.0 allows.
pub const PLUGIN_SCHEMA: &str = "https://agent-plugins.org/schemas/1.0.0/plugin.schema.json";
/// The only `mcp.json` `$schema` Agent Plugins 1.0.0 allows.
pub const MCP_SCHEMA: &str = "https://agent-plugins.org/schemas/1.0.0/mcp.schema.json";
/// Earlier identifiers of the same spec (not compatible: they are recognised only to say so).
pub const OLD_SCHEMAS: &[&str] = &["https://open-plugins.com/schemas/1.0.0/plugin.schema.json"];

/// apiary's client extension namespace (manifest key and directory name).
pub const NAMESPACE: &str = "dev.apiary.persona-pack";
/// The persona pack manifest key that holds OPS-only data of a pack made from a plain plugin.
pub const PACK_KEY: &str = "x-agent-plugins";
/// The key in apiary's extension block recording skill folders the writer renamed to their
/// `name` (new folder name -> the pack's), so the way back restores the pack's folders.
pub const RENAMED_SKILLS: &str = "renamed_skills";

/// The only top-level keys of an OPS 1.0 manifest (the schema is closed).
pub const OPS_KEYS: &[&str] = &[
    "$schema",
    "name",
    "version",
    "description",
    "author",
    "homepage",
    "repository",
    "license",
    "keywords",
    "extensions",
];

/// OPS metadata fields that are plain strings in both formats (same name in the persona pack).
pub const STRING_FIELDS: &[&str] = &[
    manifest::VERSION,
    manifest::DESCRIPTION,
    manifest::HOMEPAGE,
    manifest::REPOSITORY,
    manifest::LICENSE,
];

/// OPS metadata fields the persona pack has under the same name and shape, copied as they are.
pub const SAME_FIELDS: &[&str] = &[
    manifest::LICENSE,
    manifest::HOMEPAGE,
    manifest::REPOSITORY,
    manifest::KEYWORDS,
];

/// Keys of the persona pack manifest that describe its files; the writer and reader rewrite them.
pub const PACK_FILE_KEYS: &[&str] = manifest::FILE_KEYS;

/// Whether a carried pack file may stay where it is in an OPS plugin: the OPS components
/// (`skills/`), documentation at the root (README, LICENSE, …) and other clients' reverse-DNS
/// namespace directories. Everything else travels under apiary's namespace directory: OPS hosts
/// must not interpret unknown paths, and apiary's output validator keeps the layout strict.
pub fn stays_at_top(path: &str) -> bool {
    match path.split_once('/') {
        Some((dir, _)) => dir == "skills" || (dir.contains('.') && !dir.starts_with('.')),
        None => {
            let upper = path.to_ascii_uppercase();
            DOCUMENTATION.iter().any(|d| upper.starts_with(d))
        }
    }
}

/// Root file names (upper-cased prefixes) that are documentation, not plugin content.
const DOCUMENTATION: &[&str] = &[
    "README",
    "LICENSE",
    "LICENCE",
    "CHANGELOG",
    "NOTICE",
    "COPYING",
];

/// Whether `name` satisfies OPS §5.5 (1-64 of `[a-z0-9.-]`, alphanumeric ends, no `--`/`..`).
pub fn valid_plugin_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '.' || c == '-')
        && bytes[0].is_ascii_alphanumeric()
        && bytes[bytes.len() - 1].is_ascii_alphanumeric()
        && !name.contains("--")
        && !name.contains("..")
}

/// The OPS slug of a title (`None` when nothing usable is left, e.g. a CJK-only title).
pub fn plugin_slug(title: &str) -> Option<String> {
    // The kit's rules already collapse runs and trim; `--` can still come from `-.-` style input.
    let mut slug = slug::normalise(title, Rules::AgentPlugins)?;
    while slug.contains("--") {
        slug = slug.replace("--", "-");
    }
    while slug.contains("..") {
        slug = slug.replace("..", ".");
    }
    let slug = slug.trim_matches(|c: char| !c.is_ascii_alphanumeric());
    valid_plugin_name(slug).then(|| slug.to_string())
}

/// The OPS author object for a persona pack `author` value (a string or an object), keeping only
/// the string-valued `name`, `email` and `url` (the only keys OPS allows).
pub fn ops_author(author: &Value) -> Option<Map<String, Value>> {
    let mut out = Map::new();
    match author {
        Value::String(name) => {
            out.insert("name".into(), name.clone().into());
        }
        Value::Object(map) => {
            for key in ["name", "email", "url"] {
                if let Some(Value::String(s)) = map.get(key) {
                    out.insert(key.into(), s.clone().into());
                }
            }
        }
        _ => return None,
    }
    (!out.is_empty()).then_some(out)
}

/// The persona pack `author` for an OPS author object: a plain string when it has only a name
/// (what the Buzz loader reads), the object when it has more, `None` without a name.
pub fn pack_author(author: &Map<String, Value>) -> Option<Value> {
    let name = author.get("name").and_then(Value::as_str)?;
    if author.len() == 1 {
        Some(name.into())
    } else {
        Some(Value::Object(author.clone()))
    }
}

/// A string list, when `value` is an array of strings only.
pub fn string_list(value: &Value) -> Option<Vec<String>> {
    value
        .as_array()?
        .iter()
        .map(|v| v.as_str().map(str::to_string))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert!(valid_plugin_name("a"));
        assert!(valid_plugin_name("acme.tools"));
        assert!(!valid_plugin_name("My-Plugin"));
        assert!(!valid_plugin_name("has--double"));
        assert!(!valid_plugin_name("-start"));
        assert_eq!(
            plugin_slug("Meadow Security Team").unwrap(),
            "meadow-security-team"
        );
        assert!(valid_plugin_name(&plugin_slug("a - . - b").unwrap()));
        assert!(plugin_slug("客服").is_none());
    }

    #[test]
    fn what_stays_at_the_plugin_root() {
        for path in [
            "README.md",
            "LICENSE",
            "skills/README.md",
            "org.example/x.json",
        ] {
            assert!(stays_at_top(path), "{path}");
        }
        for path in [
            "x-claude/files/GEMINI.md",
            "snapshots/a.json",
            "plugin.json",
            "notes.txt",
            ".plugin/extra.json",
        ] {
            assert!(!stays_at_top(path), "{path}");
        }
    }
}
