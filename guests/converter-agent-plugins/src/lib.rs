//! `converter-agent-plugins`: persona pack (`buzz-pack`) <-> Agent Plugins 1.0, the current Open
//! Plugin Spec (`agent-plugins`: root `plugin.json`, `mcp.json`, `skills/`), plus the April 2026
//! `.plugin/plugin.json` draft as input (`agent-plugins-draft`).
//!
//! Modules: `model` (identifiers, name rule, apiary's extension namespace and its layout),
//! `mcp` (server mapping both ways), `write` (pack -> plugin), `read` (plugin or draft -> pack).
//! Options: `persona=refuse` refuses a plugin without personas instead of synthesising one.

#[cfg(target_arch = "wasm32")]
wit_bindgen::generate!({ world: "converter", path: "../../wit" });

pub mod mcp;
pub mod model;
pub mod read;
pub mod write;

use std::path::Path;

use convert_kit::{Pack, Report};

pub const PACK: &str = "buzz-pack";
pub const OPS: &str = "agent-plugins";
pub const DRAFT: &str = "agent-plugins-draft";

/// The conversions offered, (source, target).
pub const CONVERSIONS: &[(&str, &str)] = &[(PACK, OPS), (OPS, PACK), (DRAFT, PACK)];

/// Detections for the tree at `input`: (format, confidence, evidence).
pub fn detect(input: &Path) -> Vec<(String, f32, String)> {
    let mut out = Vec::new();
    if Pack::detect(input) {
        out.push((PACK.into(), 1.0, format!("{} lists personas", convert_kit::pack::MANIFEST)));
    } else if let Some((c, e)) = read::detect_draft(input) {
        out.push((DRAFT.into(), c, e));
    }
    if let Some((c, e)) = read::detect_ops(input) {
        out.push((OPS.into(), c, e));
    }
    out
}

/// Runs one conversion from `input` into `output`.
pub fn convert(
    input: &Path,
    output: &Path,
    source: &str,
    target: &str,
    options: &[(String, String)],
) -> Result<Report, String> {
    let mut opts = read::Options::default();
    for (key, value) in options {
        match (key.as_str(), value.as_str()) {
            ("persona", "refuse") => opts.refuse_synthesis = true,
            ("persona", "synthesise" | "synthesize") => opts.refuse_synthesis = false,
            _ => return Err(format!("unknown option {key}={value} (known: persona=refuse|synthesise)")),
        }
    }
    match (source, target) {
        (PACK, OPS) => write::pack_to_ops(input, output),
        (OPS, PACK) => read::ops_to_pack(input, output, opts),
        (DRAFT, PACK) => read::draft_to_pack(input, output, opts),
        _ => Err(format!(
            "converter-agent-plugins does not convert {source} -> {target} (it does buzz-pack -> agent-plugins, agent-plugins -> buzz-pack, agent-plugins-draft -> buzz-pack)"
        )),
    }
}

#[cfg(target_arch = "wasm32")]
mod component {
    use super::*;
    use crate::exports::apiary::plugin::format_converter::{
        Conversion, ConverterInfo, Detection, Finding, Guest, Report as WitReport, Request,
    };

    pub struct AgentPlugins;

    fn findings(list: Vec<convert_kit::Finding>) -> Vec<Finding> {
        list.into_iter()
            .map(|f| Finding {
                code: f.code,
                path: f.path,
                field: f.field,
                message: f.message,
            })
            .collect()
    }

    impl Guest for AgentPlugins {
        fn info() -> ConverterInfo {
            ConverterInfo {
                name: "converter-agent-plugins".into(),
                version: env!("CARGO_PKG_VERSION").into(),
                conversions: CONVERSIONS
                    .iter()
                    .map(|(s, t)| Conversion {
                        source: (*s).into(),
                        target: (*t).into(),
                    })
                    .collect(),
            }
        }

        fn detect() -> Vec<Detection> {
            super::detect(Path::new("/input"))
                .into_iter()
                .map(|(format, confidence, evidence)| Detection {
                    format,
                    confidence,
                    evidence,
                })
                .collect()
        }

        fn convert(request: Request) -> Result<WitReport, String> {
            let report = super::convert(
                Path::new("/input"),
                Path::new("/output"),
                &request.source,
                &request.target,
                &request.options,
            )?;
            Ok(WitReport {
                lost: findings(report.lost),
                synthesised: findings(report.synthesised),
                normalised: findings(report.normalised),
                reinterpreted: findings(report.reinterpreted),
            })
        }
    }
}

// The generated export macro resolves paths from the crate root.
#[cfg(target_arch = "wasm32")]
use component::AgentPlugins;
#[cfg(target_arch = "wasm32")]
export!(AgentPlugins);
