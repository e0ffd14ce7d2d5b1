//! `hook-audit`: an example hook. Appends one line per message to `/workspace/audit.log`
//! (the persona's workspace) and logs start and stop through the host.

wit_bindgen::generate!({ world: "hook", path: "../../wit" });

use std::io::Write;

use apiary::plugin::host::{Level, log};
use exports::apiary::plugin::lifecycle::{Guest, MessageContext, Persona};

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

impl Guest for HookAudit {
    fn on_start(persona: Persona) -> Result<(), String> {
        log(
            Level::Info,
            &format!(
                "audit hook started for {}/{}",
                persona.pack_id, persona.name
            ),
        );
        Ok(())
    }

    fn on_stop(persona: Persona) -> Result<(), String> {
        log(
            Level::Info,
            &format!(
                "audit hook stopped for {}/{}",
                persona.pack_id, persona.name
            ),
        );
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
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open("/workspace/audit.log")
            .and_then(|mut f| f.write_all(line.as_bytes()))
            .map_err(|e| format!("cannot append to /workspace/audit.log: {e}"))
    }
}

export!(HookAudit);
