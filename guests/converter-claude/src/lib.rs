//! `converter-claude`: Claude Code plugins <-> persona packs, plus Claude marketplaces and the
//! Codex, Cursor and Gemini plugin manifests as inputs (formats.md §3).
//!
//! - `read`: a plugin tree -> a persona pack (agents -> personas, foreign data carried in
//!   `x-claude`), `marketplace`: every local plugin of a marketplace -> one pack each;
//! - `write`: a persona pack -> a Claude plugin (persona-only data carried in `x-persona`, `xp`
//!   deciding what the way back needs);
//! - `detect`: which of those formats `/input` is; `locate`: where a manifest's component path
//!   leads (the plugin, or the collection around it); `model`, `mcp`, `util`: the pieces between.

pub mod carry;
pub mod detect;
pub mod locate;
pub mod marketplace;
pub mod mcp;
pub mod model;
pub mod read;
pub mod util;
pub mod write;
pub mod xp;

use convert_kit::{Job, Report};

/// Input formats read into a persona pack (`agents-dir`: loose agent files, no manifest).
pub const PLUGIN_FORMATS: &[&str] = &[
    "claude-plugin",
    "agents-dir",
    "codex-plugin",
    "cursor-plugin",
    "gemini-extension",
];

/// The conversions offered, (source, target): every plugin format and a marketplace into a
/// persona pack, a persona pack into a Claude plugin.
pub fn conversions() -> Vec<(&'static str, &'static str)> {
    PLUGIN_FORMATS
        .iter()
        .map(|source| (*source, "buzz-pack"))
        .chain([
            ("claude-marketplace", "buzz-pack"),
            ("buzz-pack", "claude-plugin"),
        ])
        .collect()
}

/// Runs one conversion. Options: `name=<name>` names a plugin that has no name of its own (plugin
/// formats), `plugin=<name>` converts only that plugin of a marketplace. Other options are
/// ignored: the host passes a run's options to every converter of its chain.
pub fn convert(job: &Job) -> Result<Report, String> {
    let (input, output) = (job.input, job.output);
    match (job.source, job.target) {
        (s, "buzz-pack") if PLUGIN_FORMATS.contains(&s) => {
            let mut host = read::Host::from_format(s).ok_or("unknown host")?;
            if s == "claude-plugin"
                && let Some(copilot) = read::Host::copilot(input)
            {
                host = copilot;
            }
            let ctx = read::Context {
                fallback_name: job.option("name").map(str::to_string),
                loose_agents: s == "agents-dir",
                source_name: job.option("source-name").map(str::to_string),
                ..read::Context::default()
            };
            let converted = read::read(input, host, &ctx)?;
            converted.write(output)?;
            Ok(converted.report)
        }
        ("claude-marketplace", "buzz-pack") => {
            marketplace::convert(input, output, job.option("plugin"))
        }
        ("buzz-pack", "claude-plugin") => write::convert(input, output),
        _ => Err(job.unsupported("converter-claude", &conversions())),
    }
}

/// The `converter` world's exports (the SDK's export macro; bindings only in the wasm32 build).
mod component;
