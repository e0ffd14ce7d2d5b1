//! `converter-sample`: the smallest `converter` world component, for the host's tests. It claims a
//! `text` -> `text-upper` conversion: every `*.txt` file under `/input` is written upper-cased to
//! `/output`, and each one is reported as `normalised` (code `case-folded`).

use apiary_guest_sdk::converter::{
    Conversion, Converter, ConverterInfo, Detection, Finding, Report, Request,
};

struct Sample;

fn txt_files() -> std::io::Result<Vec<String>> {
    let mut names = Vec::new();
    for entry in std::fs::read_dir("/input")? {
        let name = entry?.file_name().to_string_lossy().into_owned();
        if name.ends_with(".txt") {
            names.push(name);
        }
    }
    names.sort();
    Ok(names)
}

impl Converter for Sample {
    fn info() -> ConverterInfo {
        ConverterInfo {
            name: "converter-sample".into(),
            version: "0.1.0".into(),
            conversions: vec![Conversion {
                source: "text".into(),
                target: "text-upper".into(),
            }],
        }
    }

    fn detect() -> Vec<Detection> {
        let n = txt_files().map(|f| f.len()).unwrap_or(0);
        vec![Detection {
            format: "text".into(),
            confidence: if n > 0 { 1.0 } else { 0.0 },
            evidence: format!("{n} .txt file(s) in the input"),
        }]
    }

    fn convert(request: Request) -> Result<Report, String> {
        if request.source != "text" || request.target != "text-upper" {
            return Err(format!(
                "unsupported conversion {} -> {}",
                request.source, request.target
            ));
        }
        let mut normalised = Vec::new();
        for name in txt_files().map_err(|e| format!("cannot list /input: {e}"))? {
            let text = std::fs::read_to_string(format!("/input/{name}"))
                .map_err(|e| format!("cannot read {name}: {e}"))?;
            std::fs::write(format!("/output/{name}"), text.to_uppercase())
                .map_err(|e| format!("cannot write {name}: {e}"))?;
            normalised.push(Finding {
                code: "case-folded".into(),
                path: name,
                field: String::new(),
                message: "text upper-cased".into(),
            });
        }
        Ok(Report {
            lost: vec![],
            synthesised: vec![],
            normalised,
            reinterpreted: vec![],
        })
    }
}

apiary_guest_sdk::export_converter!(Sample);
