//! `converter-duduclaw`: DuDuClaw expert packs (`duduclaw-expert`) to persona packs (`buzz-pack`)
//! and back, as formats.md §5.1 maps them.
//!
//! - [`expert`]: the expert pack model (TOML in file order, agents, carried files);
//! - [`topo`]: parents-first `reports_to` order, cycles refused;
//! - [`to_pack`]: expert pack -> persona pack; [`template`]: a bare agent directory as input;
//! - [`from_pack`]: persona pack -> expert pack;
//! - [`wiki`]: the wiki pages as one skill every persona gets, and back.
//!
//! Extension blocks make both round trips lossless: `x-expert` in the persona pack manifest (and
//! files under `x-expert/`), `[expert.x-buzz]` in `expert.toml`.

pub mod expert;
pub mod from_pack;
pub mod template;
pub mod to_pack;
pub mod topo;
pub mod wiki;

use std::path::Path;

use convert_kit::Job;

/// The expert pack format id.
pub const EXPERT: &str = "duduclaw-expert";
/// The persona pack format id.
pub const BUZZ: &str = "buzz-pack";
/// The persona pack manifest key holding what an expert pack has and a persona pack does not.
pub const EXT_EXPERT: &str = "x-expert";
/// The persona pack directory holding an expert pack's files with no persona pack slot.
pub const EXT_FILES: &str = "x-expert";
/// The `[expert]` key holding what a persona pack has and an expert pack does not.
pub const EXT_BUZZ: &str = "x-buzz";

/// Inserts `value` under `key`, or as JSON text under `<key>_json` when it holds a `null` (TOML has
/// no null, and the extension block must carry every value exactly).
pub fn put_exact(
    map: &mut convert_kit::Map<String, convert_kit::Value>,
    key: &str,
    value: convert_kit::Value,
) {
    fn has_null(v: &convert_kit::Value) -> bool {
        match v {
            convert_kit::Value::Null => true,
            convert_kit::Value::Array(items) => items.iter().any(has_null),
            convert_kit::Value::Object(map) => map.values().any(has_null),
            _ => false,
        }
    }
    if has_null(&value) {
        map.insert(format!("{key}_json"), value.to_string().into());
    } else {
        map.insert(key.to_string(), value);
    }
}

/// Reads what [`put_exact`] wrote.
pub fn get_exact(
    map: &convert_kit::Map<String, convert_kit::Value>,
    key: &str,
) -> Option<convert_kit::Value> {
    map.get(key).cloned().or_else(|| {
        map.get(&format!("{key}_json"))
            .and_then(convert_kit::Value::as_str)
            .and_then(|text| serde_json::from_str(text).ok())
    })
}

/// A model id without its `provider:` prefix (`anthropic:claude-x` -> `claude-x`).
pub fn strip_provider(model: &str) -> &str {
    model.split_once(':').map(|(_, id)| id).unwrap_or(model)
}

/// The directory holding the expert pack: `root`, or its single subdirectory when that is the
/// only entry and holds `expert.toml` (a zip's wrapper folder).
fn expert_root(root: &Path) -> Option<std::path::PathBuf> {
    if expert::Expert::detect(root) {
        return Some(root.to_path_buf());
    }
    let entries = convert_kit::tree::list(root, "");
    match entries.as_slice() {
        [only] if convert_kit::tree::is_dir(root, only) => {
            let inner = root.join(only);
            expert::Expert::detect(&inner).then_some(inner)
        }
        _ => None,
    }
}

/// `(format, confidence, evidence)` for the tree at `root`.
pub fn detect(root: &Path) -> Vec<(String, f32, String)> {
    let mut out = Vec::new();
    if let Some(dir) = expert_root(root) {
        let mut report = convert_kit::Report::default();
        let parsed = expert::read_toml(&dir, expert::MANIFEST, &mut report)
            .ok()
            .is_some_and(|doc| doc.get("expert").is_some_and(|e| e.is_object()));
        let wrapped = if dir == root {
            ""
        } else {
            " in a wrapper folder"
        };
        out.push(if parsed {
            (
                EXPERT.into(),
                1.0,
                format!("found expert.toml with an [expert] table{wrapped}"),
            )
        } else {
            (
                EXPERT.into(),
                0.6,
                format!("found expert.toml{wrapped}, but no readable [expert] table"),
            )
        });
    } else if let Some((soul, config)) = template::detect(root) {
        out.push((
            EXPERT.into(),
            0.5,
            format!("found {soul} and {config}: a DuDuClaw agent directory"),
        ));
    }
    if convert_kit::Pack::detect(root) {
        out.push((
            BUZZ.into(),
            1.0,
            "found .plugin/plugin.json with a personas list".into(),
        ));
    }
    out
}

/// The conversions offered, (source, target).
pub const CONVERSIONS: &[(&str, &str)] = &[(EXPERT, BUZZ), (BUZZ, EXPERT)];

/// Runs one conversion. It takes no options and ignores any given: the host passes a run's
/// options to every converter of its chain (`--option plugin=NAME` is for the marketplace step).
pub fn convert(job: &Job) -> Result<convert_kit::Report, String> {
    let (input, output) = (job.input, job.output);
    match (job.source, job.target) {
        (EXPERT, BUZZ) => match expert_root(input) {
            Some(dir) => to_pack::convert(&dir, output),
            None => {
                let mut report = convert_kit::Report::default();
                let expert = template::read(input, &mut report)?;
                to_pack::write(&expert, report, output)
            }
        },
        (BUZZ, EXPERT) => from_pack::convert(input, output),
        _ => Err(job.unsupported("converter-duduclaw", CONVERSIONS)),
    }
}

/// The `converter` world's exports (the SDK's export macro; bindings only in the wasm32 build).
mod component {
    use apiary_guest_sdk::converter::{
        Converter, ConverterInfo, Detection, INPUT, Report, Request,
    };
    use convert_kit::Job;
    use std::path::Path;

    struct DuDuClaw;

    impl Converter for DuDuClaw {
        fn info() -> ConverterInfo {
            super::CONVERSIONS.iter().fold(
                ConverterInfo::new("converter-duduclaw", env!("CARGO_PKG_VERSION")),
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

    apiary_guest_sdk::export_converter!(DuDuClaw);
}
