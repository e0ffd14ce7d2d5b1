//! `apiary:plugin@0.2.x`: generated host bindings for the three worlds (from the frozen `wit/apiary-plugin@0.2.0/`).

/// The `hook` world: exports `lifecycle`, imports `host`.
pub mod hook {
    wasmtime::component::bindgen!({ world: "hook", path: "../../wit/apiary-plugin@0.2.0" });
}

/// The `trigger` world: exports `matcher` (the `persona-set` resource).
pub mod trigger {
    wasmtime::component::bindgen!({
        world: "trigger",
        path: "../../wit/apiary-plugin@0.2.0",
        additional_derives: [PartialEq, Eq],
    });
}

/// The `converter` world: exports `format-converter`, imports `host` (shared with `hook`).
pub mod converter {
    wasmtime::component::bindgen!({
        world: "converter",
        path: "../../wit/apiary-plugin@0.2.0",
        with: { "apiary:plugin/host": super::hook::apiary::plugin::host },
    });
}

pub use hook::apiary::plugin::host::Level;
