//! `converter-claude`: Claude Code plugins <-> persona packs, plus Claude marketplaces and the
//! Codex, Cursor and Gemini plugin manifests as inputs (formats.md §3).
//!
//! - `read`: a plugin tree -> a persona pack (agents -> personas, foreign data carried in
//!   `x-claude`), `marketplace`: every local plugin of a marketplace -> one pack each;
//! - `write`: a persona pack -> a Claude plugin (persona-only data carried in `x-persona`);
//! - `detect`: which of those formats `/input` is; `model`, `mcp`, `util`: the pieces between.

pub mod detect;
pub mod marketplace;
pub mod mcp;
pub mod model;
pub mod read;
pub mod util;
pub mod write;

use std::path::Path;

use convert_kit::Report;

/// Input formats read into a persona pack (`agents-dir`: loose agent files, no manifest).
pub const PLUGIN_FORMATS: &[&str] = &[
    "claude-plugin",
    "agents-dir",
    "codex-plugin",
    "cursor-plugin",
    "gemini-extension",
];

/// Runs one conversion between two trees (the guest passes `/input` and `/output`; tests pass
/// temp dirs).
pub fn run(
    source: &str,
    target: &str,
    options: &[(String, String)],
    input: &Path,
    output: &Path,
) -> Result<Report, String> {
    let option = |k: &str| {
        options
            .iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.as_str())
    };
    match (source, target) {
        (s, "buzz-pack") if PLUGIN_FORMATS.contains(&s) => {
            let host = read::Host::from_format(s).ok_or("unknown host")?;
            let ctx = read::Context {
                fallback_name: option("name").map(str::to_string),
                loose_agents: s == "agents-dir",
                ..read::Context::default()
            };
            let converted = read::read(input, host, &ctx)?;
            converted.write(output)?;
            Ok(converted.report)
        }
        ("claude-marketplace", "buzz-pack") => {
            marketplace::convert(input, output, option("plugin"))
        }
        ("buzz-pack", "claude-plugin") => write::convert(input, output),
        _ => Err(format!(
            "converter-claude does not convert {source} -> {target}"
        )),
    }
}

/// The `converter` world's exports (the SDK's export macro; bindings only in the wasm32 build).
mod component;
