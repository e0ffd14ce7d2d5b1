//! The manifest parser on arbitrary text: no input may panic, and every diagnostic must render.
#![no_main]

use apiary_core::diag::Report;
use apiary_core::pack::manifest;
use apiary_core::pack::source::{SourceFile, Syntax};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let src = SourceFile::new(manifest::MANIFEST_PATH, text.to_string(), Syntax::Json);
    let mut report = Report::default();
    src.register(&mut report);
    let _ = manifest::parse(&src, &mut report);
    let _ = report.render(false);
});
