//! The frontmatter splitter, the key locator and the whole persona parser on arbitrary text: no
//! input may panic, and a successful split must slice the input at char boundaries it reports.
#![no_main]

use std::path::PathBuf;

use apiary_core::diag::Report;
use apiary_core::pack::{frontmatter, persona};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(split) = frontmatter::split(text) {
        assert_eq!(
            &text[split.yaml_offset..split.yaml_offset + split.yaml.len()],
            split.yaml
        );
        assert_eq!(&text[split.body_offset..], split.body);
        let _ = frontmatter::top_level_keys(split.yaml);
    }
    let mut report = Report::default();
    let _ = persona::parse(
        PathBuf::from("agents/fuzz.persona.md"),
        std::sync::Arc::<str>::from(text),
        &mut report,
    );
    let _ = report.render(false);
});
