//! Several packs in one `apiary up` (spec §15, question 5, left open there). The policy:
//!
//! - Each persona signs with its own key, has its own workspace (so its own `.agents/skills/`) and
//!   its own agent session (so its own MCP servers): skills and MCP servers of the same name in two
//!   packs never meet, and need no rule.
//! - Personas of different packs whose triggers overlap on a channel (keywords, `all_messages`)
//!   each answer: every pack was asked to run, and each reply is signed by its own persona.
//! - One name for two personas of different packs that both wake on mentions in a shared channel:
//!   `@bee` there means both (like overlapping keywords, each answers), and `@pack-id/bee` (or a
//!   `p` tag of its key) exactly one. Both run; the operator is told once, naming both packs and
//!   how to address each. Nothing else is ambiguous: two packs with one id never run together.

use crate::resolve::ResolvedPersona;

/// When `persona` of `pack_id` shares its name and a channel with a mention-woken persona of
/// another pack among `beside` (each with its pack id): what to tell the operator.
pub(super) fn shared_name(
    beside: &[(&str, &ResolvedPersona)],
    pack_id: &str,
    persona: &ResolvedPersona,
) -> Option<String> {
    if !persona.triggers.mentions {
        return None;
    }
    let name = &persona.identity.name;
    beside.iter().find_map(|&(their_pack, theirs)| {
        if their_pack == pack_id
            || !theirs.triggers.mentions
            || !theirs.identity.name.eq_ignore_ascii_case(name)
        {
            return None;
        }
        let shared = persona
            .subscribe
            .iter()
            .find(|c| theirs.subscribe.contains(c))?;
        Some(format!(
            "packs {} and {pack_id} both run a persona named `{name}` in #{shared}: `@{name}` there wakes both; `@{}/{}` or `@{pack_id}/{name}` wakes one",
            their_pack, their_pack, theirs.identity.name
        ))
    })
}
