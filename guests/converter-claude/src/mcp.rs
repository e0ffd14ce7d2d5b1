//! MCP servers between Claude's `.mcp.json` (wrapped in `mcpServers` or a flat map, stdio, http,
//! sse or ws, `${…}` expanded by Claude) and the persona pack's `.mcp.json` (stdio or http only,
//! variables passed through literally).

use apiary_schema::mcp;
use convert_kit::{Map, Report, Value};

/// Whether the persona pack reads `key` in a `.mcp.json` server entry: the schema's keys but
/// `name` (there the map key is the name).
fn pack_key(key: &str) -> bool {
    key != mcp::NAME && mcp::KEYS.contains(&key)
}

/// The server map of an MCP config value and whether it was wrapped in `mcpServers`; `None` when
/// the value is neither shape.
pub fn servers_of(value: &Value) -> Option<(Map<String, Value>, bool)> {
    let map = value.as_object()?;
    if let Some(inner) = map.get("mcpServers") {
        return inner.as_object().map(|m| (m.clone(), true));
    }
    // A flat map: every value is a server object.
    map.values()
        .all(Value::is_object)
        .then(|| (map.clone(), false))
}

/// Whether the persona pack can start this server (stdio with a command, or http with a url).
pub fn usable_in_pack(config: &Map<String, Value>) -> Result<(), String> {
    let kind = config
        .get("type")
        .or_else(|| config.get("transport"))
        .and_then(Value::as_str)
        .map(str::to_ascii_lowercase);
    let has = |k: &str| {
        config
            .get(k)
            .and_then(Value::as_str)
            .is_some_and(|s| !s.trim().is_empty())
    };
    match kind.as_deref() {
        None if has("command") || has("url") => Ok(()),
        Some("stdio") if has("command") => Ok(()),
        Some("http" | "streamable-http" | "streamable_http") if has("url") => Ok(()),
        Some(k @ ("sse" | "ws")) => Err(format!(
            "the `{k}` transport, which persona runtimes do not support"
        )),
        Some(k) if !matches!(k, "stdio" | "http" | "streamable-http" | "streamable_http") => {
            Err(format!("the unknown transport `{k}`"))
        }
        _ => Err("neither a `command` nor a `url`".to_string()),
    }
}

/// A server's keys split into those a persona pack server may have and the Claude-only rest (kept
/// in the extension block, so the pack holds only schema keys).
pub fn split_claude_only(config: Map<String, Value>) -> (Map<String, Value>, Map<String, Value>) {
    config.into_iter().partition(|(k, _)| pack_key(k))
}

/// Reports what in a server the pack carries but will not act on: keys its loader ignores and
/// variable syntax only Claude expands.
pub fn report_claude_only(
    config: &Map<String, Value>,
    name: &str,
    path: &str,
    kept_in: &str,
    report: &mut Report,
) {
    for key in config.keys().filter(|k| !pack_key(k)) {
        report.reinterpreted(
            "mcp-field-ignored",
            path,
            &format!("mcpServers.{name}.{key}"),
            format!("MCP server `{name}`: persona pack servers have no `{key}`; kept in `{kept_in}`, persona runtimes do not apply it"),
        );
    }
    let text = Value::Object(config.clone()).to_string();
    let vars = convert_kit::vars::host_only(&text);
    if !vars.is_empty() {
        // apiary fills `${VAR}` (and `${VAR:-default}`) from the operator's environment only:
        // a variable the plugin host defines has no value at run time, so the server fails.
        report.lost(
            "mcp-variable-unsupported",
            path,
            &format!("mcpServers.{name}"),
            format!(
                "MCP server `{name}` uses {}, which Claude sets for the plugin but apiary does not: kept as written, the server will not start until it is edited",
                vars.join(", ")
            ),
        );
    }
}

/// A pack server as Claude writes it: the same keys, with the pack's `streamable_http`
/// spellings as Claude's `http`.
pub fn to_claude(config: &Map<String, Value>) -> (Map<String, Value>, bool) {
    let mut out = config.clone();
    let mut renamed = false;
    for key in ["type", "transport"] {
        if let Some(Value::String(kind)) = out.get(key)
            && matches!(
                kind.to_ascii_lowercase().as_str(),
                "streamable_http" | "streamable-http"
            )
        {
            out.insert(key.to_string(), "http".into());
            renamed = true;
        }
    }
    if let Some(Value::String(kind)) = out.remove("transport") {
        out.insert("type".into(), kind.into());
        renamed = true;
    }
    (out, renamed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use convert_kit::json;

    #[test]
    fn shapes_and_transports() {
        let flat = json!({"a": {"type": "http", "url": "https://x"}});
        assert!(!servers_of(&flat).unwrap().1);
        let wrapped = json!({"mcpServers": {"b": {"command": "bun"}}});
        assert!(servers_of(&wrapped).unwrap().1);
        assert!(servers_of(&json!({"a": 1})).is_none());
        let sse = json!({"type": "sse", "url": "https://x"});
        assert!(usable_in_pack(sse.as_object().unwrap()).is_err());
        let stdio = json!({"command": "bun", "args": ["${CLAUDE_PLUGIN_ROOT}/x"]});
        assert!(usable_in_pack(stdio.as_object().unwrap()).is_ok());
        let mut r = Report::default();
        report_claude_only(stdio.as_object().unwrap(), "s", ".mcp.json", "x", &mut r);
        assert_eq!(r.lost[0].code, "mcp-variable-unsupported");
        let (c, renamed) = to_claude(
            json!({"type": "streamable_http", "url": "u"})
                .as_object()
                .unwrap(),
        );
        assert!(renamed);
        assert_eq!(c["type"], "http");
    }
}
