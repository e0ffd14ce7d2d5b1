//! `hook-audit`: an example hook. Appends one line per message to `/workspace/audit.log`
//! (the persona's workspace) and logs start and stop through the host.
//!
//! The append goes through WASI 0.2 directly rather than `std::fs`: std's `write` is a stream
//! `write` plus `blocking-flush`, which wasmtime's WASI runs on a helper thread, while
//! `blocking-write-and-flush` writes on the calling thread. That hop was most of a message's cost.

use apiary_guest_sdk::hook::{Hook, MessageContext, Persona};
use apiary_guest_sdk::log;
use wasip2::filesystem::preopens::get_directories;
use wasip2::filesystem::types::{DescriptorFlags, OpenFlags, PathFlags};
use wasip2::io::streams::StreamError;

struct HookAudit;

/// Tabs and line breaks inside a field would break the one-line-per-message format.
fn field(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            '\t' | '\n' | '\r' => ' ',
            c => c,
        })
        .collect()
}

impl Hook for HookAudit {
    fn on_start(persona: Persona) -> Result<(), String> {
        log::info(&format!(
            "audit hook started for {}/{}",
            persona.pack_id, persona.name
        ));
        Ok(())
    }

    fn on_stop(persona: Persona) -> Result<(), String> {
        log::info(&format!(
            "audit hook stopped for {}/{}",
            persona.pack_id, persona.name
        ));
        Ok(())
    }

    fn on_message(context: MessageContext) -> Result<(), String> {
        let m = &context.message;
        let line = format!(
            "{}\t{}\t{}\t{}\t{}\t{}\n",
            field(&context.persona.name),
            field(&m.id),
            field(&m.channel),
            field(m.thread.as_deref().unwrap_or("-")),
            field(&m.author),
            field(&m.text),
        );
        append("audit.log", line.as_bytes())
            .map_err(|e| format!("cannot append to /workspace/audit.log: {e}"))
    }
}

/// Appends `bytes` to `file` in the `/workspace` preopen, creating it if needed.
fn append(file: &str, bytes: &[u8]) -> Result<(), String> {
    let (workspace, _) = get_directories()
        .into_iter()
        .find(|(_, path)| path == "/workspace")
        .ok_or("no /workspace preopen")?;
    let file = workspace
        .open_at(
            PathFlags::empty(),
            file,
            OpenFlags::CREATE,
            DescriptorFlags::WRITE,
        )
        .map_err(|e| e.to_string())?;
    let stream = file.append_via_stream().map_err(|e| e.to_string())?;
    // One call writes at most 4096 bytes.
    for chunk in bytes.chunks(4096) {
        stream
            .blocking_write_and_flush(chunk)
            .map_err(|e| match e {
                StreamError::LastOperationFailed(e) => e.to_debug_string(),
                StreamError::Closed => "the file stream closed".to_string(),
            })?;
    }
    Ok(())
}

apiary_guest_sdk::export_hook!(HookAudit);
