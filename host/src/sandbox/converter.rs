//! Converter front end. Converter components arrive in a later issue; for now the host loads
//! them (refusing other worlds and versions) and can ask one what it converts.

use std::sync::Arc;

use wasmtime::component::ComponentExportIndex;

pub use super::bindings::latest::converter::exports::apiary::plugin::format_converter::{
    Conversion, ConverterInfo, Detection, Finding, Report, Request,
};
use super::hook::export_indexes;
use super::{CallOutput, Grants, Limits, Loaded, Sandbox, SandboxError, World};

/// A loaded `converter` component.
pub struct ConverterRunner {
    loaded: Arc<Loaded>,
    exports: [ComponentExportIndex; 3],
    limits: Limits,
}

impl ConverterRunner {
    pub fn new(loaded: Arc<Loaded>) -> Result<ConverterRunner, SandboxError> {
        let exports = export_indexes(&loaded, World::Converter, ["info", "detect", "convert"])?;
        Ok(ConverterRunner {
            loaded,
            exports,
            limits: Limits::converter(),
        })
    }

    /// What the converter supports (`info` runs with no filesystem).
    pub fn info(&self, sandbox: &Sandbox) -> Result<CallOutput<ConverterInfo>, SandboxError> {
        let name = self.loaded.name.clone();
        let limits = self.limits.clone();
        sandbox.call(&self.loaded, &self.limits, &Grants::none(), |store, pre| {
            let instance = pre.instantiate(&mut *store)?;
            let f =
                instance.get_typed_func::<(), (ConverterInfo,)>(&mut *store, &self.exports[0])?;
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
        })
    }
}
