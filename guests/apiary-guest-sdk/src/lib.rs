//! Write apiary plugin components in Rust.
//!
//! apiary runs three kinds of plugin as WebAssembly components, one WIT world each (the frozen
//! contract `apiary:plugin@0.2.0`, shipped in this crate's `wit/`):
//! - a **hook** ([`Hook`], [`export_hook!`]) runs at a persona's start, stop and before each
//!   message, and can drop the message;
//! - a **trigger** ([`Trigger`], or one pair at a time [`trigger::Rule`]; [`export_trigger!`])
//!   decides which messages wake which persona;
//! - a **converter** ([`Converter`], [`export_converter!`]) turns a tree in one format into another
//!   and reports what it did not carry over ([`Report`]).
//!
//! Implement the trait on a unit struct and export it; the macro generates the WIT bindings in
//! your crate and maps them to this crate's plain types, so your logic is ordinary Rust that unit
//! tests can call natively:
//!
//! ```
//! use apiary_guest_sdk::hook::{Hook, MessageContext};
//!
//! struct NoShouting;
//!
//! impl Hook for NoShouting {
//!     fn on_message(context: MessageContext) -> Result<(), String> {
//!         let text = &context.message.text;
//!         if text.len() > 3 && *text == text.to_uppercase() {
//!             return Err("no shouting".into()); // the message is dropped
//!         }
//!         Ok(())
//!     }
//! }
//!
//! apiary_guest_sdk::export_hook!(NoShouting);
//! # fn main() {}
//! ```
//!
//! Build with `cargo build --release --target wasm32-wasip2` and a `cdylib` crate type. The
//! macros expand to nothing on other targets. They name this crate `apiary_guest_sdk`: depend on
//! it under that name.

pub mod converter;
pub mod hook;
pub mod json;
pub mod log;
pub mod report;
pub mod tree;
pub mod trigger;

mod export;

pub use converter::Converter;
pub use hook::Hook;
pub use report::{Finding, Report};
pub use trigger::Trigger;

/// The WIT package and version the bindings are generated from.
pub const WIT_PACKAGE: &str = "apiary:plugin@0.2.0";

/// What the export macros use; not part of the API.
#[doc(hidden)]
pub mod __private {
    #[cfg(target_arch = "wasm32")]
    pub use wit_bindgen;
}

include!(concat!(env!("OUT_DIR"), "/generate_world.rs"));
