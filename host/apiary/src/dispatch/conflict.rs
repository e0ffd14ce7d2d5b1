//! Several packs in one `apiary up` (spec §15, question 5, left open there). The policy:
//!
//! - Each persona signs with its own key, has its own workspace (so its own `.agents/skills/`) and
//!   its own agent session (so its own MCP servers): skills and MCP servers of the same name in two
//!   packs never meet, and need no rule.
//! - Personas of different packs whose triggers overlap on a channel (keywords, `all_messages`)
//!   each answer: every pack was asked to run, and each reply is signed by its own persona.
//! - Truly ambiguous is one name for two personas of different packs that both wake on mentions
//!   in a shared channel: `@bee` there could mean either, and a mention by key wakes personas by
//!   name too. The persona listed second (packs in the order given) is refused, naming both
//!   packs; the first runs.

use crate::resolve::ResolvedPersona;

/// Why `persona` of `pack_id` cannot run beside the personas `accepted` before it (each with its
/// pack id), if it cannot.
pub(super) fn ambiguous(
    accepted: &[(&str, &ResolvedPersona)],
    pack_id: &str,
    persona: &ResolvedPersona,
) -> Option<String> {
    if !persona.triggers.mentions {
        return None;
    }
    let name = &persona.identity.name;
    accepted.iter().find_map(|&(their_pack, theirs)| {
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
            "pack {} already runs a persona named `{}` in #{shared}, so a mention of `@{name}` there could mean either; rename one of them in its pack, or subscribe them to different channels (packs {} and {pack_id})",
            their_pack, theirs.identity.name, their_pack
        ))
    })
}
