//! Converter front end: `info` with no filesystem; `detect` with the input tree read-only at
//! `/input`; `convert` with the input read-only and an output directory read-write at `/output`.
//! The built-in converters live in `guests/converter-*`; `guests/test/converter-sample` is the smallest.

use std::path::Path;
use std::sync::Arc;

use wasmtime::component::ComponentExportIndex;

/// The host's types (the same in both releases; `convert`'s error differs).
pub use super::bindings::v0_1::converter::exports::apiary::plugin::format_converter::{
    Conversion, ConverterInfo, Detection, Finding, Report, Request,
};
use super::bindings::v0_2::converter::exports::apiary::plugin::format_converter::ConvertError;
use super::hook::{export_indexes, guest_error};
use super::{
    CallOutput, Capabilities, Grants, Limits, Loaded, Preopen, Release, Sandbox, SandboxError,
    World,
};

fn preopen(host: &Path, guest: &str, writable: bool) -> Preopen {
    Preopen {
        host: host.to_path_buf(),
        guest: guest.to_string(),
        writable,
    }
}

/// A loaded `converter` component.
pub struct ConverterRunner {
    loaded: Arc<Loaded>,
    exports: [ComponentExportIndex; 3],
    limits: Limits,
    /// What the operator granted beyond the world's defaults (declared and granted).
    caps: Capabilities,
}

impl ConverterRunner {
    pub fn new(loaded: Arc<Loaded>) -> Result<ConverterRunner, SandboxError> {
        let exports = export_indexes(&loaded, World::Converter, ["info", "detect", "convert"])?;
        Ok(ConverterRunner {
            loaded,
            exports,
            limits: Limits::converter(),
            caps: Capabilities::none(),
        })
    }

    /// The same converter with `caps` added to every call (see [`crate::caps`]).
    pub fn with_capabilities(mut self, caps: Capabilities) -> ConverterRunner {
        self.caps = caps;
        self
    }

    /// The same converter with another per-call deadline (`apiary convert --timeout`).
    pub fn with_deadline(mut self, deadline: std::time::Duration) -> ConverterRunner {
        self.limits.deadline = deadline;
        self
    }

    pub fn loaded(&self) -> &Arc<Loaded> {
        &self.loaded
    }

    /// What the converter supports (`info` runs with no filesystem).
    pub fn info(&self, sandbox: &Sandbox) -> Result<CallOutput<ConverterInfo>, SandboxError> {
        let name = self.loaded.name.clone();
        let limits = self.limits.clone();
        sandbox.call(
            &self.loaded,
            &self.limits,
            &Grants::none().with_capabilities(&self.caps),
            |store, instance| {
                let f = instance
                    .get_typed_func::<(), (ConverterInfo,)>(&mut *store, &self.exports[0])?;
                let (info,) = f.call(&mut *store, ())?;
                if info.conversions.len() > limits.max_list {
                    return Ok(Err(SandboxError::Oversized {
                        name: name.to_string(),
                        what: "a list of conversions",
                        size: info.conversions.len(),
                        limit: limits.max_list,
                    }));
                }
                Ok(Ok(info))
            },
        )
    }

    /// How likely the tree at `input` is in each format the converter reads.
    pub fn detect(
        &self,
        sandbox: &Sandbox,
        input: &Path,
    ) -> Result<CallOutput<Vec<Detection>>, SandboxError> {
        let name = self.loaded.name.clone();
        let limits = self.limits.clone();
        let grants = Grants {
            preopens: vec![preopen(input, "/input", false)],
            ..Grants::default()
        }
        .with_capabilities(&self.caps);
        sandbox.call(&self.loaded, &self.limits, &grants, |store, instance| {
            let f =
                instance.get_typed_func::<(), (Vec<Detection>,)>(&mut *store, &self.exports[1])?;
            let (found,) = f.call(&mut *store, ())?;
            if found.len() > limits.max_list {
                return Ok(Err(SandboxError::Oversized {
                    name: name.to_string(),
                    what: "a list of detections",
                    size: found.len(),
                    limit: limits.max_list,
                }));
            }
            Ok(Ok(found))
        })
    }

    /// Converts `input` (read-only) into `output` (an existing, empty directory).
    pub fn convert(
        &self,
        sandbox: &Sandbox,
        request: &Request,
        input: &Path,
        output: &Path,
    ) -> Result<CallOutput<Report>, SandboxError> {
        let name = self.loaded.name.clone();
        let limits = self.limits.clone();
        let grants = Grants {
            preopens: vec![
                preopen(input, "/input", false),
                preopen(output, "/output", true),
            ],
            ..Grants::default()
        }
        .with_capabilities(&self.caps);
        sandbox.call(&self.loaded, &self.limits, &grants, |store, instance| {
            // Records compare by structure, so the `0.1` types serve `0.2` (`info`, `detect`,
            // the request and the report); only the error differs.
            let answer = match self.loaded.identity.release() {
                Release::V0_1 => {
                    let f = instance.get_typed_func::<(&Request,), (Result<Report, String>,)>(
                        &mut *store,
                        &self.exports[2],
                    )?;
                    f.call(&mut *store, (request,))?
                        .0
                        .map_err(ConvertError::Failed)
                }
                Release::V0_2 => {
                    let f = instance
                        .get_typed_func::<(&Request,), (Result<Report, ConvertError>,)>(
                            &mut *store,
                            &self.exports[2],
                        )?;
                    f.call(&mut *store, (request,))?.0
                }
            };
            Ok(match answer {
                Ok(report) => {
                    let n = report.lost.len()
                        + report.synthesised.len()
                        + report.normalised.len()
                        + report.reinterpreted.len();
                    if n > limits.max_list {
                        Err(SandboxError::Oversized {
                            name: name.to_string(),
                            what: "a report (findings)",
                            size: n,
                            limit: limits.max_list,
                        })
                    } else {
                        Ok(report)
                    }
                }
                Err(e) => Err(convert_error(&name, e, limits.max_string)),
            })
        })
    }
}

/// A converter's error, its kind said in words (the operator reads it; the failure policy is the
/// same for all three).
fn convert_error(name: &str, e: ConvertError, max: usize) -> SandboxError {
    let message = match e {
        ConvertError::Unsupported(m) => format!("unsupported: {m}"),
        ConvertError::InvalidInput(m) => format!("invalid input: {m}"),
        ConvertError::Failed(m) => m,
    };
    guest_error(name, &message, max)
}
