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

use convert_kit::{Job, Report};

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

/// The conversions offered, (source, target).
pub const CONVERSIONS: &[(&str, &str)] = &[(PACKAGE, BUZZ), (BUZZ, PACKAGE), (SNAPSHOT, BUZZ)];

/// Runs one conversion. Option: `overlay=<JSON>` supplies what a package needs and a persona pack
/// does not have (buzz-pack -> package). Other options are ignored: the host passes a run's
/// options to every converter of its chain.
pub fn convert(job: &Job) -> Result<Report, String> {
    let (input, output) = (job.input, job.output);
    match (job.source, job.target) {
        (PACKAGE, BUZZ) => read::convert(input, output),
        (SNAPSHOT, BUZZ) => snapshot::convert(input, output),
        (BUZZ, PACKAGE) => write::convert(input, output, job.option("overlay")),
        _ => Err(job.unsupported("converter-agent-compose", CONVERSIONS)),
    }
}

/// The `converter` world's exports (the SDK's export macro; bindings only in the wasm32 build).
mod component {
    use apiary_guest_sdk::converter::{
        Converter, ConverterInfo, Detection, INPUT, Report, Request,
    };
    use convert_kit::Job;
    use std::path::Path;

    struct AgentCompose;

    impl Converter for AgentCompose {
        fn info() -> ConverterInfo {
            super::CONVERSIONS.iter().fold(
                ConverterInfo::new("converter-agent-compose", env!("CARGO_PKG_VERSION")),
                |info, (source, target)| info.converts(*source, *target),
            )
        }

        fn detect() -> Vec<Detection> {
            super::detect(Path::new(INPUT))
                .into_iter()
                .map(|(format, confidence, evidence)| Detection::new(format, confidence, evidence))
                .collect()
        }

        fn convert(request: Request) -> Result<Report, String> {
            super::convert(&Job::preopened(&request))
        }
    }

    apiary_guest_sdk::export_converter!(AgentCompose);
}
