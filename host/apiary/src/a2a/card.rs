//! A persona's A2A 1.0 agent card: its name and description, the pack's version, its skills, the
//! one JSON-RPC interface at its base URL (from configuration, never from a request), and the
//! bearer scheme its endpoint requires. Every text is the pack author's, so each is bounded.

use serde_json::{Value, json};

use crate::dispatch::PackRun;

/// The protocol version served.
pub const PROTOCOL_VERSION: &str = "1.0";
// The same bounds as the ops endpoints' cards: a pack's words are the author's.
use crate::ops::card::{DESCRIPTION_MAX, NAME_MAX, SKILLS_MAX, bounded};

/// Where persona `persona` of pack `pack` answers, under the server's public URL.
pub fn base_path(pack: &str, persona: &str) -> String {
    format!("/a2a/{pack}/{persona}")
}

/// The card of persona `index` of `run`, answering at `base_url`.
pub fn card(run: &PackRun, index: usize, base_url: &str) -> Value {
    let persona = &run.resolved.personas[index];
    let pack = &run.pack.manifest;
    let skills: Vec<Value> = run
        .pack
        .skills_for(index)
        .iter()
        .take(SKILLS_MAX)
        .map(|s| {
            json!({
                "id": bounded(&s.name, NAME_MAX),
                "name": bounded(&s.name, NAME_MAX),
                "description": bounded(&s.description, DESCRIPTION_MAX),
                "tags": [bounded(&pack.id, NAME_MAX)],
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
        "name": bounded(&persona.identity.display_name, NAME_MAX),
        "description": bounded(&description, DESCRIPTION_MAX),
        "supportedInterfaces": [{
            "url": base_url,
            "protocolBinding": "JSONRPC",
            "protocolVersion": PROTOCOL_VERSION,
        }],
        "version": pack.version,
        "capabilities": {"streaming": true},
        "securitySchemes": {
            "bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer", "description": "A token the operator issued (apiary up --a2a-tokens)."}},
        },
        "securityRequirements": [{"schemes": {"bearer": {"list": []}}}],
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": skills,
    })
}
