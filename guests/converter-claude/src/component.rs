//! The `converter` world's exports over [`crate::convert`] and [`crate::detect`].

use std::path::Path;

use apiary_guest_sdk::converter::{Converter, ConverterInfo, Detection, INPUT, Report, Request};
use convert_kit::Job;

use crate::{conversions, detect};

struct Component;

impl Converter for Component {
    fn info() -> ConverterInfo {
        conversions().into_iter().fold(
            ConverterInfo::new("converter-claude", env!("CARGO_PKG_VERSION")),
            |info, (source, target)| info.converts(source, target),
        )
    }

    fn detect() -> Vec<Detection> {
        detect::detect(Path::new(INPUT))
            .into_iter()
            .map(|d| Detection::new(d.format, d.confidence, d.evidence))
            .collect()
    }

    fn convert(request: Request) -> Result<Report, String> {
        crate::convert(&Job::preopened(&request))
    }
}

apiary_guest_sdk::export_converter!(Component);
