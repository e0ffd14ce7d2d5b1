//! The persona pack schema (Persona Pack Specification) as constants, declared once: what keys the
//! manifest, persona frontmatter, lifecycle hooks and MCP server entries may have. apiary-core's
//! validator checks packs against these lists and every converter writes packs with them, so a
//! key one side accepts and the other does not cannot appear by a typo or an edit made on one side.
//!
//! Each key is a constant (use it instead of the string literal) and each object has a `KEYS`
//! list. Section numbers refer to the specification.

/// `a` then `b` as one array (`N` must be their total length); keeps the combined lists in step.
const fn concat<const N: usize>(a: &[&'static str], b: &[&'static str]) -> [&'static str; N] {
    assert!(a.len() + b.len() == N, "concat: wrong length");
    let mut out = [""; N];
    let mut i = 0;
    while i < a.len() {
        out[i] = a[i];
        i += 1;
    }
    let mut j = 0;
    while j < b.len() {
        out[i + j] = b[j];
        j += 1;
    }
    out
}

/// Where the pack's files are (§3): the manifest, and the files its `*_config` and
/// `pack_instructions` keys name when it leaves them out.
pub mod layout {
    /// The manifest.
    pub const MANIFEST: &str = ".plugin/plugin.json";
    /// The persona files' directory (flat).
    pub const AGENTS_DIR: &str = "agents";
    /// The skills' directory, one subdirectory per skill.
    pub const SKILLS_DIR: &str = "skills";
    /// The pack instructions.
    pub const INSTRUCTIONS: &str = "instructions.md";
    /// The pack-level MCP config.
    pub const MCP_CONFIG: &str = ".mcp.json";
    /// The lifecycle hooks file.
    pub const HOOKS_CONFIG: &str = "hooks/hooks.json";
}

/// `.plugin/plugin.json`, the pack manifest (§2): the Open Plugin Spec fields plus Buzz's own at
/// the top level. Unknown keys are validation warnings.
pub mod manifest {
    /// Where the manifest lives, relative to the pack root (§3).
    pub const PATH: &str = crate::layout::MANIFEST;

    /// OPS: URL of the manifest's JSON schema.
    pub const SCHEMA: &str = "$schema";
    /// OPS: reverse-DNS pack identifier; required.
    pub const ID: &str = "id";
    /// OPS: human-readable pack name; required.
    pub const NAME: &str = "name";
    /// OPS: semantic version of the pack; required.
    pub const VERSION: &str = "version";
    /// OPS: one-line description.
    pub const DESCRIPTION: &str = "description";
    /// OPS: author, a string (or a person object).
    pub const AUTHOR: &str = "author";
    /// OPS: licence identifier.
    pub const LICENSE: &str = "license";
    /// OPS: homepage URL.
    pub const HOMEPAGE: &str = "homepage";
    /// OPS: source repository URL.
    pub const REPOSITORY: &str = "repository";
    /// OPS: list of keyword strings.
    pub const KEYWORDS: &str = "keywords";
    /// OPS: engine requirements; `engines.buzz` is the minimum Buzz version.
    pub const ENGINES: &str = "engines";
    /// Buzz: the persona files, pack-relative; authoritative.
    pub const PERSONAS: &str = "personas";
    /// Buzz: pack-wide behavioural defaults, keys of [`crate::behaviour::KEYS`] (§10).
    pub const DEFAULTS: &str = "defaults";
    /// Buzz: pack-relative path of the pack instructions file (§8).
    pub const PACK_INSTRUCTIONS: &str = "pack_instructions";
    /// Buzz: pack-relative path of the pack-level MCP config, `.mcp.json` (§7).
    pub const MCP_CONFIG: &str = "mcp_config";
    /// Buzz: pack-relative path of the lifecycle hooks file, `hooks/hooks.json` (§9).
    pub const HOOKS_CONFIG: &str = "hooks_config";

    /// Every key the manifest may have.
    pub const KEYS: &[&str] = &[
        SCHEMA,
        ID,
        NAME,
        VERSION,
        DESCRIPTION,
        AUTHOR,
        LICENSE,
        HOMEPAGE,
        REPOSITORY,
        KEYWORDS,
        ENGINES,
        PERSONAS,
        DEFAULTS,
        PACK_INSTRUCTIONS,
        MCP_CONFIG,
        HOOKS_CONFIG,
    ];

    /// The keys that name pack files (their values follow the pack's layout).
    pub const FILE_KEYS: &[&str] = &[PERSONAS, PACK_INSTRUCTIONS, MCP_CONFIG, HOOKS_CONFIG];

    /// The V6 format's namespaced block (§14): no longer accepted, `pack migrate` rewrites it.
    pub const V6_BLOCK: &str = "buzz";
}

/// Persona frontmatter (§4): identity keys plus the behavioural keys at the top level. Unknown
/// keys are errors.
pub mod persona {
    /// Machine name, unique within the pack; required.
    pub const NAME: &str = "name";
    /// Name shown in the UI; required.
    pub const DISPLAY_NAME: &str = "display_name";
    /// Pack-relative path of an avatar image.
    pub const AVATAR: &str = "avatar";
    /// One-line description; required.
    pub const DESCRIPTION: &str = "description";
    /// Semantic version; the pack's when absent.
    pub const VERSION: &str = "version";
    /// OPS author field.
    pub const AUTHOR: &str = "author";
    /// Agent runtime the persona targets. Not in the specification; apiary accepts it because
    /// real packs use it.
    pub const RUNTIME: &str = "runtime";
    /// Pack-relative paths of the skill directories for this persona only (§6).
    pub const SKILLS: &str = "skills";
    /// Per-persona MCP servers, entries of [`crate::mcp::KEYS`] with a `name` (§7).
    pub const MCP_SERVERS: &str = "mcp_servers";
    /// Per-persona lifecycle hooks, keys of [`crate::hooks::POINTS`] (§9).
    pub const HOOKS: &str = "hooks";
    /// apiary's extension: which tools the persona's agent may use (`allow`, `deny`, `read_only`).
    pub const TOOL_POLICY: &str = "x-tool-policy";
    /// apiary's extension: which personas' messages may wake this one (persona handoff).
    pub const WOKEN_BY: &str = "x-woken-by";

    /// The identity keys (everything but the behavioural ones).
    pub const IDENTITY_KEYS: &[&str] = &[
        NAME,
        DISPLAY_NAME,
        AVATAR,
        DESCRIPTION,
        VERSION,
        AUTHOR,
        RUNTIME,
        SKILLS,
        MCP_SERVERS,
        HOOKS,
        TOOL_POLICY,
        WOKEN_BY,
    ];

    const ALL: [&str; IDENTITY_KEYS.len() + crate::behaviour::KEYS.len()] =
        crate::concat(IDENTITY_KEYS, crate::behaviour::KEYS);
    /// Every key persona frontmatter may have: identity, then behaviour.
    pub const KEYS: &[&str] = &ALL;
}

/// Behavioural configuration (§10): the same keys in the manifest's `defaults`, at the top level
/// of persona frontmatter and in the operator overrides file.
pub mod behaviour {
    /// `provider:model-id`; split on the first `:`.
    pub const MODEL: &str = "model";
    /// Sampling temperature, a number (type-checked only).
    pub const TEMPERATURE: &str = "temperature";
    /// Context window limit, a positive integer.
    pub const MAX_CONTEXT_TOKENS: &str = "max_context_tokens";
    /// Channels to monitor; a leading `#` is not significant.
    pub const SUBSCRIBE: &str = "subscribe";
    /// Which messages wake the persona, keys of [`crate::triggers::KEYS`]; replaced as a whole.
    pub const TRIGGERS: &str = "triggers";
    /// Legacy alias of [`TRIGGERS`].
    pub const RESPOND_TO: &str = "respond_to";
    /// Reply in the thread when the triggering message is in one.
    pub const THREAD_REPLIES: &str = "thread_replies";
    /// Also surface thread replies in the main channel.
    pub const BROADCAST_REPLIES: &str = "broadcast_replies";

    /// Every behavioural key.
    pub const KEYS: &[&str] = &[
        MODEL,
        TEMPERATURE,
        MAX_CONTEXT_TOKENS,
        SUBSCRIBE,
        TRIGGERS,
        RESPOND_TO,
        THREAD_REPLIES,
        BROADCAST_REPLIES,
    ];
}

/// The `triggers` object (§10).
pub mod triggers {
    /// Wake when mentioned; default on.
    pub const MENTIONS: &str = "mentions";
    /// Wake when a message contains one of these strings (case-insensitive).
    pub const KEYWORDS: &str = "keywords";
    /// Wake on every message in a subscribed channel; default off.
    pub const ALL_MESSAGES: &str = "all_messages";

    /// Every key of a `triggers` object.
    pub const KEYS: &[&str] = &[MENTIONS, KEYWORDS, ALL_MESSAGES];
}

/// Lifecycle hooks (§9): the keys of `hooks/hooks.json` and of a persona's `hooks`.
pub mod hooks {
    /// Before the agent session starts.
    pub const ON_START: &str = "on_start";
    /// After the agent session ends.
    pub const ON_STOP: &str = "on_stop";
    /// Before each message is dispatched to the agent.
    pub const ON_MESSAGE: &str = "on_message";

    /// Every hook point.
    pub const POINTS: &[&str] = &[ON_START, ON_STOP, ON_MESSAGE];
}

/// An MCP server entry (§7): under its name in `.mcp.json`'s `mcpServers`, or an item of a
/// persona's `mcp_servers` with a `name` key. Transports are stdio and streamable HTTP only; the
/// stdio keys are the specification's (`command`, `args`, `env`: no working directory), which are
/// also all an ACP `session/new` stdio server carries.
pub mod mcp {
    /// The server map's key in `.mcp.json`.
    pub const SERVERS: &str = "mcpServers";

    /// The server's name (in `mcp_servers` entries; in `.mcp.json` it is the map key).
    pub const NAME: &str = "name";
    /// Transport: `stdio`, or `http` (also spelled `streamable_http`, `streamable-http`); SSE is
    /// rejected. Absent: stdio, unless there is a `url` and no `command`.
    pub const TYPE: &str = "type";
    /// Synonym of [`TYPE`].
    pub const TRANSPORT: &str = "transport";
    /// stdio: the program to start.
    pub const COMMAND: &str = "command";
    /// stdio: its arguments.
    pub const ARGS: &str = "args";
    /// stdio: its environment; values may hold `${VAR}` references.
    pub const ENV: &str = "env";
    /// streamable HTTP: the endpoint.
    pub const URL: &str = "url";
    /// streamable HTTP: request headers; values may hold `${VAR}` references.
    pub const HEADERS: &str = "headers";

    /// Keys of every entry, whatever the transport.
    pub const COMMON_KEYS: &[&str] = &[NAME, TYPE, TRANSPORT];
    /// Keys of a stdio server besides [`COMMON_KEYS`].
    pub const STDIO_KEYS: &[&str] = &[COMMAND, ARGS, ENV];
    /// Keys of a streamable HTTP server besides [`COMMON_KEYS`].
    pub const HTTP_KEYS: &[&str] = &[URL, HEADERS];

    const TRANSPORT_KEYS: [&str; STDIO_KEYS.len() + HTTP_KEYS.len()] =
        crate::concat(STDIO_KEYS, HTTP_KEYS);
    const ALL: [&str; COMMON_KEYS.len() + TRANSPORT_KEYS.len()] =
        crate::concat(COMMON_KEYS, &TRANSPORT_KEYS);
    /// Every key an MCP server entry may have.
    pub const KEYS: &[&str] = &ALL;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unique(keys: &[&str]) -> bool {
        keys.iter()
            .enumerate()
            .all(|(i, k)| !keys[..i].contains(k) && !k.is_empty())
    }

    #[test]
    fn lists_have_no_duplicates_or_blanks() {
        for keys in [
            manifest::KEYS,
            persona::KEYS,
            behaviour::KEYS,
            triggers::KEYS,
            hooks::POINTS,
            mcp::KEYS,
        ] {
            assert!(unique(keys), "{keys:?}");
        }
    }

    #[test]
    fn combined_lists_are_their_parts() {
        assert_eq!(
            persona::KEYS,
            [persona::IDENTITY_KEYS, behaviour::KEYS].concat()
        );
        assert_eq!(
            mcp::KEYS,
            [mcp::COMMON_KEYS, mcp::STDIO_KEYS, mcp::HTTP_KEYS].concat()
        );
        assert!(
            manifest::FILE_KEYS
                .iter()
                .all(|k| manifest::KEYS.contains(k))
        );
    }
}
