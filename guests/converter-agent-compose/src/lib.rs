//! `converter-agent-compose`: agent-compose person packages (`person.kdl` + KDL v2 roles,
//! personalities, boundaries + SKILL.md tree) and `person.json` v3 snapshots to persona packs,
//! and persona packs back to person packages, under agent-compose's person contract.
//!
//! Modules: [`node`] (generic KDL nodes), [`package`] (package layouts on disk), [`contract`]
//! (the person contract's rules), [`color`] (OKLab), [`view`] (facts read from nodes), [`read`]
//! (package -> pack), [`snapshot`] (snapshot -> pack), [`write`] (pack -> package).

pub mod color;
pub mod contract;
pub mod node;
pub mod package;
pub mod read;
pub mod snapshot;
pub mod view;
pub mod write;

use std::path::Path;

/// The persona pack manifest key holding everything a persona pack has no slot for.
pub const EXT: &str = "x-agent-compose";

pub const PACKAGE: &str = "agent-compose-package";
pub const SNAPSHOT: &str = "agent-compose-snapshot";
pub const BUZZ: &str = "buzz-pack";

/// `(format, confidence, evidence)` for the tree at `root`.
pub fn detect(root: &Path) -> Vec<(String, f32, String)> {
    let mut out = Vec::new();
    match package::root_kind(root) {
        Ok((kind, name)) => out.push((
            PACKAGE.to_string(),
            1.0,
            format!("{} declares {} \"{name}\"", package::ROOT, kind.as_str()),
        )),
        Err(why) if convert_kit::tree::is_file(root, package::ROOT) => {
            out.push((PACKAGE.to_string(), 0.3, why))
        }
        Err(_) => {}
    }
    if let Some(format) = snapshot::marker(root) {
        let confidence = if format == snapshot::V3 { 1.0 } else { 0.5 };
        out.push((
            SNAPSHOT.to_string(),
            confidence,
            format!("{} has format {format}", snapshot::FILE),
        ));
    }
    if convert_kit::Pack::detect(root) {
        out.push((
            BUZZ.to_string(),
            0.9,
            format!("{} lists personas", convert_kit::pack::MANIFEST),
        ));
    }
    out
}

/// Runs one conversion from `input` to `output`.
pub fn convert(
    source: &str,
    target: &str,
    options: &[(String, String)],
    input: &Path,
    output: &Path,
) -> Result<convert_kit::Report, String> {
    let overlay = options
        .iter()
        .find(|(k, _)| k == "overlay")
        .map(|(_, v)| v.as_str());
    match (source, target) {
        (PACKAGE, BUZZ) => read::convert(input, output),
        (SNAPSHOT, BUZZ) => snapshot::convert(input, output),
        (BUZZ, PACKAGE) => write::convert(input, output, overlay),
        _ => Err(format!(
            "converter-agent-compose does not convert {source} -> {target} (it does {PACKAGE} -> {BUZZ}, {SNAPSHOT} -> {BUZZ}, {BUZZ} -> {PACKAGE})"
        )),
    }
}

/// The `converter` world's exports (the SDK's export macro; bindings only in the wasm32 build).
mod component {
    use apiary_guest_sdk::converter::{
        Converter, ConverterInfo, Detection, INPUT, OUTPUT, Report, Request,
    };
    use std::path::Path;

    struct AgentCompose;

    impl Converter for AgentCompose {
        fn info() -> ConverterInfo {
            ConverterInfo::new("converter-agent-compose", env!("CARGO_PKG_VERSION"))
                .converts(super::PACKAGE, super::BUZZ)
                .converts(super::BUZZ, super::PACKAGE)
                .converts(super::SNAPSHOT, super::BUZZ)
        }

        fn detect() -> Vec<Detection> {
            super::detect(Path::new(INPUT))
                .into_iter()
                .map(|(format, confidence, evidence)| Detection::new(format, confidence, evidence))
                .collect()
        }

        fn convert(request: Request) -> Result<Report, String> {
            super::convert(
                &request.source,
                &request.target,
                &request.options,
                Path::new(INPUT),
                Path::new(OUTPUT),
            )
        }
    }

    apiary_guest_sdk::export_converter!(AgentCompose);
}
