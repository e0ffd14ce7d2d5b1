//! `future-hook`: a hook built against `apiary:plugin@0.3.0` (a copy of the hook world with the next
//! breaking version), so tests can check that the host refuses it with the supported range.

wit_bindgen::generate!({ world: "hook", path: "wit" });

use exports::apiary::plugin::lifecycle::{Guest, MessageContext, Persona};

struct FutureHook;

impl Guest for FutureHook {
    fn on_start(_persona: Persona) -> Result<(), String> {
        Ok(())
    }
    fn on_stop(_persona: Persona) -> Result<(), String> {
        Ok(())
    }
    fn on_message(_context: MessageContext) -> Result<(), String> {
        Ok(())
    }
}

export!(FutureHook);
