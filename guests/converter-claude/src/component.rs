//! The `converter` world's exports over [`crate::run`] and [`crate::detect`].

use std::path::Path;

use apiary_guest_sdk::converter::{
    Converter, ConverterInfo, Detection, INPUT, OUTPUT, Report, Request,
};

use crate::{PLUGIN_FORMATS, detect, run};

struct Component;

impl Converter for Component {
    fn info() -> ConverterInfo {
        PLUGIN_FORMATS
            .iter()
            .fold(
                ConverterInfo::new("converter-claude", env!("CARGO_PKG_VERSION")),
                |info, source| info.converts(*source, "buzz-pack"),
            )
            .converts("claude-marketplace", "buzz-pack")
            .converts("buzz-pack", "claude-plugin")
    }

    fn detect() -> Vec<Detection> {
        detect::detect(Path::new(INPUT))
            .into_iter()
            .map(|d| Detection::new(d.format, d.confidence, d.evidence))
            .collect()
    }

    fn convert(request: Request) -> Result<Report, String> {
        run(
            &request.source,
            &request.target,
            &request.options,
            Path::new(INPUT),
            Path::new(OUTPUT),
        )
    }
}

apiary_guest_sdk::export_converter!(Component);
