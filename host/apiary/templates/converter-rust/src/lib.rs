//! {{name}}: an apiary format converter. apiary gives it an input tree at /input (read-only) and an
//! empty /output, and shows the operator the report of everything not carried over verbatim.
//!
//! This one converts `plain-text` (a tree of `.txt` notes) to `markdown`: each `notes/x.txt`
//! becomes `notes/x.md` with a `# x` heading; other files are dropped and reported as lost.

use std::path::Path;

use apiary_guest_sdk::converter::{
    Converter, ConverterInfo, Detection, INPUT, OUTPUT, Report, Request,
};
use apiary_guest_sdk::tree;

pub const SOURCE: &str = "plain-text";
pub const TARGET: &str = "markdown";

pub struct Component;

impl Converter for Component {
    fn info() -> ConverterInfo {
        ConverterInfo::new("{{name}}", env!("CARGO_PKG_VERSION")).converts(SOURCE, TARGET)
    }

    fn detect() -> Vec<Detection> {
        let notes = tree::walk(Path::new(INPUT), "")
            .unwrap_or_default()
            .into_iter()
            .filter(|f| f.ends_with(".txt"))
            .count();
        let confidence = if notes > 0 { 0.6 } else { 0.0 };
        vec![Detection::new(SOURCE, confidence, format!("{notes} .txt file(s)"))]
    }

    fn convert(request: Request) -> Result<Report, String> {
        if (request.source.as_str(), request.target.as_str()) != (SOURCE, TARGET) {
            return Err(request.unsupported("{{name}}"));
        }
        convert(Path::new(INPUT), Path::new(OUTPUT))
    }
}

/// The conversion itself, over any two directories (unit tests pass temporary ones).
pub fn convert(input: &Path, output: &Path) -> Result<Report, String> {
    let mut report = Report::default();
    for file in tree::walk(input, "")? {
        let Some(stem) = file.strip_suffix(".txt") else {
            report.lost("not-a-note", &file, "", "only .txt files are converted");
            continue;
        };
        let title = stem.rsplit('/').next().unwrap_or(stem);
        let text = tree::read(input, &file)?;
        tree::write(output, &format!("{stem}.md"), format!("# {title}\n\n{text}"))?;
        report.synthesised("heading-added", &format!("{stem}.md"), "", "a heading from the file name");
    }
    Ok(report)
}

apiary_guest_sdk::export_converter!(Component);
