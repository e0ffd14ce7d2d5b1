//! `apiary:plugin@0.1.x`: generated host bindings for the three worlds (from `wit/`).

/// The `hook` world: exports `lifecycle`, imports `host`.
pub mod hook {
    wasmtime::component::bindgen!({ world: "hook", path: "../../wit" });
}

/// The `trigger` world: exports `matcher`.
pub mod trigger {
    wasmtime::component::bindgen!({
        world: "trigger",
        path: "../../wit",
        additional_derives: [PartialEq, Eq],
    });
}

/// The `converter` world: exports `format-converter`, imports `host` (shared with `hook`).
pub mod converter {
    wasmtime::component::bindgen!({
        world: "converter",
        path: "../../wit",
        with: { "apiary:plugin/host": super::hook::apiary::plugin::host },
    });
}

pub use hook::apiary::plugin::host::Level;
