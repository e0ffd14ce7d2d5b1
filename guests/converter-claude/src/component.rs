//! The `converter` world's exports over [`crate::run`] and [`crate::detect`].

use std::path::Path;

wit_bindgen::generate!({ world: "converter", path: "../../wit" });

use exports::apiary::plugin::format_converter as wit;

use crate::{PLUGIN_FORMATS, detect, run};

struct Component;

fn finding(f: convert_kit::Finding) -> wit::Finding {
    wit::Finding {
        code: f.code,
        path: f.path,
        field: f.field,
        message: f.message,
    }
}

impl wit::Guest for Component {
    fn info() -> wit::ConverterInfo {
        let pair = |s: &str, t: &str| wit::Conversion {
            source: s.into(),
            target: t.into(),
        };
        let mut conversions: Vec<wit::Conversion> = PLUGIN_FORMATS
            .iter()
            .map(|s| pair(s, "buzz-pack"))
            .collect();
        conversions.push(pair("claude-marketplace", "buzz-pack"));
        conversions.push(pair("buzz-pack", "claude-plugin"));
        wit::ConverterInfo {
            name: "converter-claude".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            conversions,
        }
    }

    fn detect() -> Vec<wit::Detection> {
        detect::detect(Path::new("/input"))
            .into_iter()
            .map(|d| wit::Detection {
                format: d.format.into(),
                confidence: d.confidence,
                evidence: d.evidence,
            })
            .collect()
    }

    fn convert(request: wit::Request) -> Result<wit::Report, String> {
        let report = run(
            &request.source,
            &request.target,
            &request.options,
            Path::new("/input"),
            Path::new("/output"),
        )?;
        Ok(wit::Report {
            lost: report.lost.into_iter().map(finding).collect(),
            synthesised: report.synthesised.into_iter().map(finding).collect(),
            normalised: report.normalised.into_iter().map(finding).collect(),
            reinterpreted: report.reinterpreted.into_iter().map(finding).collect(),
        })
    }
}

export!(Component);
