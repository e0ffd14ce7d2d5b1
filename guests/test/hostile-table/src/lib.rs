//! `hostile-table`: a hook whose function table is far larger than any real component's (see
//! build.rs). Instantiating it asks the host for a table of 2^24 elements; the sandbox's table cap
//! refuses that on the pooling allocator and on the on-demand fallback alike. Its functions do
//! nothing.

use std::hint::black_box;

use apiary_guest_sdk::hook::{Hook, MessageContext, Persona};

struct HostileTable;

fn answer() -> Result<(), String> {
    Ok(())
}

/// An indirect call, so the module has a function table for the linker to place.
fn through_table() -> Result<(), String> {
    let f: fn() -> Result<(), String> = black_box(answer);
    f()
}

impl Hook for HostileTable {
    fn on_start(_persona: Persona) -> Result<(), String> {
        through_table()
    }

    fn on_stop(_persona: Persona) -> Result<(), String> {
        through_table()
    }

    fn on_message(_context: MessageContext) -> Result<(), String> {
        through_table()
    }
}

apiary_guest_sdk::export_hook!(HostileTable);
