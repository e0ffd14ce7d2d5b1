//! `converter-agent-plugins`: persona pack (`buzz-pack`) <-> Agent Plugins 1.0, the current Open
//! Plugin Spec (`agent-plugins`: root `plugin.json`, `mcp.json`, `skills/`), plus the April 2026
//! `.plugin/plugin.json` draft as input (`agent-plugins-draft`).
//!
//! Modules: `model` (identifiers, name rule, apiary's extension namespace and its layout),
//! `mcp` (server mapping both ways), `write` (pack -> plugin), `read` (plugin or draft -> pack).
//! Options: `persona=refuse` refuses a plugin without personas instead of synthesising one.

pub mod mcp;
pub mod model;
pub mod read;
pub mod write;

use std::path::Path;

use convert_kit::{Job, Pack, Report};

pub const PACK: &str = "buzz-pack";
pub const OPS: &str = "agent-plugins";
pub const DRAFT: &str = "agent-plugins-draft";

/// The conversions offered, (source, target).
pub const CONVERSIONS: &[(&str, &str)] = &[(PACK, OPS), (OPS, PACK), (DRAFT, PACK)];

/// Detections for the tree at `input`: (format, confidence, evidence).
pub fn detect(input: &Path) -> Vec<(String, f32, String)> {
    let mut out = Vec::new();
    if Pack::detect(input) {
        out.push((
            PACK.into(),
            1.0,
            format!("{} lists personas", convert_kit::pack::MANIFEST),
        ));
    } else if let Some((c, e)) = read::detect_draft(input) {
        out.push((DRAFT.into(), c, e));
    }
    if let Some((c, e)) = read::detect_ops(input) {
        out.push((OPS.into(), c, e));
    }
    out
}

/// Runs one conversion. Option: `persona=refuse|synthesise`. Any other option is refused, with
/// the known ones named.
/// Options the other built-in converters (and the host) define: `plugin` and `name`
/// (converter-claude), `overlay` (converter-agent-compose), `source-name` (the host).
const OTHER_CONVERTERS_OPTIONS: &[&str] = &["plugin", "name", "overlay", "source-name"];

pub fn convert(job: &Job) -> Result<Report, String> {
    let mut opts = read::Options::default();
    for (key, value) in job.options {
        match (key.as_str(), value.as_str()) {
            ("persona", "refuse") => opts.refuse_synthesis = true,
            ("persona", "synthesise" | "synthesize") => opts.refuse_synthesis = false,
            // The host passes a run's options to every converter of its chain (a marketplace's
            // `plugin=` is for the step that reads it) and tells the first step the input's
            // folder: options of the other built-in converters are not this one's to refuse.
            (k, _) if OTHER_CONVERTERS_OPTIONS.contains(&k) => {}
            _ => {
                return Err(format!(
                    "unknown option {key}={value} (known: persona=refuse|synthesise)"
                ));
            }
        }
    }
    let (input, output) = (job.input, job.output);
    let result = match (job.source, job.target) {
        (PACK, OPS) => write::pack_to_ops(input, output),
        (OPS, PACK) => read::ops_to_pack(input, output, opts),
        (DRAFT, PACK) => read::draft_to_pack(input, output, opts),
        _ => Err(job.unsupported("converter-agent-plugins", CONVERSIONS)),
    };
    // Messages quote input values (names, paths): keep them within what a host accepts.
    match result {
        Ok(mut report) => {
            for list in [
                &mut report.lost,
                &mut report.synthesised,
                &mut report.normalised,
                &mut report.reinterpreted,
            ] {
                for f in list.iter_mut() {
                    f.path = clip(&f.path, 512);
                    f.field = clip(&f.field, 512);
                    f.message = clip(&f.message, 1024);
                }
            }
            Ok(report)
        }
        Err(message) => Err(clip(&message, 2048)),
    }
}

/// `text` cut to at most `max` bytes on a character boundary, marked when cut.
pub fn clip(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max.saturating_sub(3);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &text[..end])
}

/// The `converter` world's exports (the SDK's export macro; bindings only in the wasm32 build).
mod component {
    use super::*;
    use apiary_guest_sdk::converter::{Converter, ConverterInfo, Detection, INPUT, Request};

    pub struct AgentPlugins;

    impl Converter for AgentPlugins {
        fn info() -> ConverterInfo {
            CONVERSIONS.iter().fold(
                ConverterInfo::new("converter-agent-plugins", env!("CARGO_PKG_VERSION")),
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

    apiary_guest_sdk::export_converter!(AgentPlugins);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job<'a>(source: &'a str, target: &'a str, input: &'a Path, output: &'a Path) -> Job<'a> {
        Job {
            source,
            target,
            options: &[],
            input,
            output,
        }
    }

    fn tmp(tag: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("agentplugins-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    // Native smoke test of both directions on the example pack (the host tests run the component).
    #[test]
    fn meadow_round_trip_natively() {
        let meadow = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/meadow");
        let (ops, there) = (tmp("ops"), tmp("back"));
        let report = convert(&job(PACK, OPS, &meadow, &ops)).unwrap();
        if std::env::var_os("AGENTPLUGINS_KEEP").is_some() {
            for f in report
                .lost
                .iter()
                .chain(&report.synthesised)
                .chain(&report.normalised)
                .chain(&report.reinterpreted)
            {
                eprintln!("{} {} {} | {}", f.code, f.path, f.field, f.message);
            }
        }
        assert!(report.lost.is_empty(), "{report:#?}");
        let (report, back) = (convert(&job(OPS, PACK, &ops, &there)).unwrap(), there);
        assert!(report.lost.is_empty(), "{report:#?}");
        let (a, _) = Pack::read(&meadow).unwrap();
        let (b, _) = Pack::read(&back).unwrap();
        assert_eq!(a.personas, b.personas);
        assert_eq!(a.skills, b.skills);
        assert_eq!(a.mcp_servers, b.mcp_servers);
        assert_eq!(a.instructions, b.instructions);
        let mut am = a.manifest.clone();
        let mut bm = b.manifest.clone();
        am.remove("personas");
        bm.remove("personas");
        assert_eq!(am, bm);
        if std::env::var_os("AGENTPLUGINS_KEEP").is_none() {
            for d in [ops, back] {
                let _ = std::fs::remove_dir_all(d);
            }
        }
    }
}
