//! What a Claude plugin keeps inside a persona pack so that it converts back: the files carried
//! verbatim, the persona fields an agent has no slot for, and the pack instructions appended to
//! each agent body. The reader (`read.rs`) writes and strips them, the writer (`write.rs`) puts
//! them back; both take the names from here.

use apiary_schema::{behaviour, persona};

/// Where carried files go inside the persona pack.
pub const FILES_DIR: &str = "x-claude/files";
/// The manifest key a persona pack written by `write.rs` keeps persona-only data under, inside a
/// Claude `plugin.json`.
pub const PERSONA_KEY: &str = "x-persona";

/// Persona keys with a Claude agent slot (the tool policy's are `tools` and `disallowedTools`);
/// every other agent key is carried in the extension.
pub const AGENT_MAPPED: &[&str] = &[
    persona::NAME,
    persona::DESCRIPTION,
    behaviour::MODEL,
    persona::TOOL_POLICY,
];

/// Persona fields a Claude agent has no slot for (kept in `x-persona` by the writer), in the order
/// the writer keeps them: every persona key but [`AGENT_MAPPED`].
pub const PERSONA_ONLY: &[&str] = &[
    persona::DISPLAY_NAME,
    persona::AVATAR,
    persona::VERSION,
    persona::AUTHOR,
    persona::SKILLS,
    persona::MCP_SERVERS,
    behaviour::SUBSCRIBE,
    behaviour::TRIGGERS,
    behaviour::RESPOND_TO,
    persona::RUNTIME,
    behaviour::TEMPERATURE,
    behaviour::MAX_CONTEXT_TOKENS,
    behaviour::THREAD_REPLIES,
    behaviour::BROADCAST_REPLIES,
    persona::HOOKS,
    persona::WOKEN_BY,
];

/// The text appended to every agent body for the pack instructions; the reader strips it.
pub fn instructions_block(instructions: &str) -> String {
    format!(
        "\n\n<!-- persona pack instructions -->\n{}\n",
        instructions.trim_end()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_persona_key_has_a_claude_slot_or_is_carried() {
        let mut handled: Vec<&str> = AGENT_MAPPED.iter().chain(PERSONA_ONLY).copied().collect();
        let mut schema = persona::KEYS.to_vec();
        handled.sort_unstable();
        schema.sort_unstable();
        assert_eq!(handled, schema);
    }
}
