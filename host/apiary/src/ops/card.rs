//! A2A agent cards for the personas a replica runs, generated from the pack when `up` starts
//! (never shipped inside packs): the persona's name and description, the pack's version, the
//! persona's skills as A2A skills, and an `x-apiary` extension saying where it answers.

use serde_json::{Value, json};

use crate::dispatch::PackRun;

/// The A2A protocol version the cards follow.
const PROTOCOL_VERSION: &str = "0.3.0";

/// A card's text fields are cut to these many characters, and it lists at most this many
/// skills: a pack's words are the author's, the card is served to anyone who asks.
pub(crate) const NAME_MAX: usize = 128;
pub(crate) const DESCRIPTION_MAX: usize = 2048;
pub(crate) const SKILLS_MAX: usize = 64;

/// `text`, cut to `max` characters (an ellipsis says it was).
pub(crate) fn bounded(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => text.to_string(),
        Some((at, _)) => format!("{}…", &text[..at]),
    }
}

/// Where a persona's card is served.
pub fn path(pack_id: &str, persona: &str) -> String {
    format!("/personas/{pack_id}/{persona}/.well-known/agent-card.json")
}

/// The card of persona `index` of `run`; `base` is the server's `http://host:port`, `pubkey` the
/// persona's key (hex) when known.
pub fn card(run: &PackRun, index: usize, base: &str, pubkey: Option<String>) -> Value {
    let persona = &run.resolved.personas[index];
    let pack = &run.pack.manifest;
    let name = &persona.identity.name;
    let skills: Vec<Value> = run
        .pack
        .skills_for(index)
        .iter()
        .take(SKILLS_MAX)
        .map(|s| {
            json!({
                "id": s.name,
                "name": bounded(&s.name, NAME_MAX),
                "description": bounded(&s.description, DESCRIPTION_MAX),
                "tags": [pack.id.as_str()],
            })
        })
        .collect();
    let description = if persona.identity.description.is_empty() {
        format!(
            "{} of the {} pack",
            persona.identity.display_name, pack.name
        )
    } else {
        persona.identity.description.clone()
    };
    json!({
        "protocolVersion": PROTOCOL_VERSION,
        "name": bounded(&persona.identity.display_name, NAME_MAX),
        "description": bounded(&description, DESCRIPTION_MAX),
        "url": format!("{base}/personas/{}/{name}", pack.id),
        "version": pack.version,
        "capabilities": {"streaming": false, "pushNotifications": false},
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": skills,
        "x-apiary": {
            "pack": pack.id,
            "persona": name,
            "channels": persona.subscribe,
            "pubkey": pubkey,
            "transport": "nostr (NIP-29 kind 9 messages on the relay)",
        },
    })
}
