//! MCP servers between a persona pack's `.mcp.json` and OPS `mcp.json`.
//!
//! Both mappings are pure: they return the entry in the other spelling plus notes for the report,
//! or why the entry has no place there. [`to_pack_list`] and [`to_ops_list`] apply them to whole
//! server lists and keep an entry's original spelling aside (in the extension block) whenever
//! mapping it there and back would not give it back, so round trips are exact.

use convert_kit::{Map, Value};

/// Which report list a note belongs in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum List {
    Synthesised,
    Normalised,
    Reinterpreted,
}

/// A report finding about one server field (the server name is the path's `mcpServers.<name>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    pub list: List,
    pub code: &'static str,
    pub field: String,
    pub message: String,
}

fn note(list: List, code: &'static str, field: &str, message: String) -> Note {
    Note {
        list,
        code,
        field: field.to_string(),
        message,
    }
}

const STDIO_KEYS: &[&str] = &["command", "args", "env", "cwd"];
const REMOTE_KEYS: &[&str] = &["url", "headers"];
/// Keys of a persona pack server entry apiary reads.
const PACK_KEYS: &[&str] = &[
    "name",
    "type",
    "transport",
    "command",
    "args",
    "env",
    "url",
    "headers",
    "cwd",
];

fn string_map(value: Option<&Value>) -> Result<Option<Map<String, Value>>, String> {
    match value {
        None => Ok(None),
        Some(Value::Object(m)) if m.values().all(Value::is_string) => Ok(Some(m.clone())),
        Some(_) => Err("must be an object of strings".into()),
    }
}

fn string_list(value: Option<&Value>) -> Result<Option<Vec<Value>>, String> {
    match value {
        None => Ok(None),
        Some(Value::Array(items)) if items.iter().all(Value::is_string) => Ok(Some(items.clone())),
        Some(_) => Err("must be a list of strings".into()),
    }
}

/// `${NAME}` references other than the two OPS plugin variables.
fn foreign_placeholders(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else { break };
        let name = &after[..end];
        if name != "PLUGIN_ROOT" && name != "PLUGIN_DATA" {
            out.push(name.to_string());
        }
        rest = &after[end + 1..];
    }
    out
}

/// Whether an MCP URL is one OPS allows: absolute http(s), no user info or fragment, https
/// unless the host is loopback.
fn ops_url(url: &str) -> Result<(), String> {
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| format!("`{url}` is not an absolute URL"))?;
    let scheme = scheme.to_ascii_lowercase();
    if scheme != "http" && scheme != "https" {
        return Err(format!("`{url}` is not http(s)"));
    }
    if url.contains('#') {
        return Err(format!("`{url}` has a fragment"));
    }
    let authority = rest.split(['/', '?']).next().unwrap_or_default();
    if authority.contains('@') {
        return Err(format!("`{url}` carries user information"));
    }
    if authority.contains("${") {
        return Err(format!(
            "`{url}` has a placeholder in its host (OPS never expands URLs)"
        ));
    }
    let host = if let Some(v6) = authority.strip_prefix('[') {
        v6.split(']').next().unwrap_or_default()
    } else {
        authority.rsplit_once(':').map_or(authority, |(h, _)| h)
    };
    let loopback = host == "localhost" || host == "::1" || host.starts_with("127.");
    if scheme == "http" && !loopback {
        return Err(format!(
            "`{url}` is plain http to a non-loopback host (OPS needs https)"
        ));
    }
    Ok(())
}

/// Whether `command` is a single OPS executable token: a bare name or a `./` path inside the root.
fn ops_command(command: &str) -> Result<(), String> {
    if command.is_empty() || command.chars().any(char::is_whitespace) {
        return Err(format!(
            "command `{command}` is not a single executable token"
        ));
    }
    if command.contains("${") {
        return Err(format!(
            "command `{command}` has a placeholder (OPS never expands `command`)"
        ));
    }
    if let Some(path) = command.strip_prefix("./") {
        if path.split('/').any(|part| part == "..") {
            return Err(format!("command `{command}` leaves the plugin root"));
        }
    } else if command.contains('/') || command.contains('\\') {
        return Err(format!(
            "command `{command}` is a path that is neither bare nor `./`-relative"
        ));
    }
    Ok(())
}

fn ops_cwd(cwd: &str) -> bool {
    let rooted = |prefix: &str| {
        cwd.strip_prefix(prefix)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
    };
    (cwd.starts_with("./") || rooted("${PLUGIN_ROOT}") || rooted("${PLUGIN_DATA}"))
        && !cwd.split('/').any(|part| part == "..")
}

/// A persona pack server entry in OPS `mcp.json` spelling.
pub fn to_ops(config: &Map<String, Value>) -> Result<(Map<String, Value>, Vec<Note>), String> {
    let mut notes = Vec::new();
    let ops_kind = ops_transport(config, &mut notes)?;
    let mut out = Map::new();
    out.insert("type".into(), ops_kind.into());
    let allowed = if ops_kind == "stdio" {
        STDIO_KEYS
    } else {
        REMOTE_KEYS
    };
    for (key, value) in config {
        if key == "type" || key == "transport" || key == "name" {
            continue;
        }
        if !allowed.contains(&key.as_str()) {
            notes.push(note(
                List::Reinterpreted,
                "mcp-field-extension-only",
                key,
                format!(
                    "`{key}` has no place in an OPS `{ops_kind}` server; kept in the `{}` extension only",
                    crate::model::NAMESPACE
                ),
            ));
            continue;
        }
        out.insert(key.clone(), value.clone());
    }
    if ops_kind == "stdio" {
        check_ops_stdio(config, &mut notes)?;
    } else {
        check_ops_remote(config, &mut notes)?;
    }
    Ok((out, notes))
}

/// The OPS transport (`type`) for a pack entry's `type` or `transport`, or its absence.
fn ops_transport(
    config: &Map<String, Value>,
    notes: &mut Vec<Note>,
) -> Result<&'static str, String> {
    let (kind_key, kind) = match (config.get("type"), config.get("transport")) {
        (Some(v), _) => ("type", v),
        (None, Some(v)) => ("transport", v),
        (None, None) => ("type", &Value::Null),
    };
    let kind = match kind {
        Value::Null => None,
        Value::String(s) => Some(s.to_ascii_lowercase()),
        _ => return Err(format!("`{kind_key}` is not a string")),
    };
    let has_url = config.contains_key("url");
    let has_command = config.contains_key("command");
    let ops_kind = match kind.as_deref() {
        Some("stdio") => "stdio",
        Some("http" | "streamable_http" | "streamable-http") => "streamable-http",
        Some("sse") => "sse",
        Some(other) => return Err(format!("unknown transport `{other}`")),
        None if has_url && !has_command => "streamable-http",
        None => "stdio",
    };
    match kind.as_deref() {
        None => notes.push(note(
            List::Synthesised,
            "mcp-type-synthesised",
            "type",
            format!("no transport given; OPS needs an explicit one: `{ops_kind}`"),
        )),
        Some(k) if k != ops_kind || kind_key != "type" => notes.push(note(
            List::Normalised,
            "mcp-transport-renamed",
            kind_key,
            format!("{kind_key} `{k}` -> type `{ops_kind}`"),
        )),
        _ => {}
    }
    Ok(ops_kind)
}

/// What OPS requires of a stdio server: a plain command, string args and env (not setting its
/// reserved variables), a rooted `cwd`.
fn check_ops_stdio(config: &Map<String, Value>, notes: &mut Vec<Note>) -> Result<(), String> {
    let command = config
        .get("command")
        .and_then(Value::as_str)
        .ok_or("a stdio server needs a string `command`")?;
    ops_command(command)?;
    string_list(config.get("args")).map_err(|e| format!("`args` {e}"))?;
    if let Some(env) = string_map(config.get("env")).map_err(|e| format!("`env` {e}"))? {
        if env.contains_key("PLUGIN_ROOT") || env.contains_key("PLUGIN_DATA") {
            return Err("`env` sets PLUGIN_ROOT or PLUGIN_DATA, which OPS reserves".into());
        }
        for (key, value) in &env {
            for var in foreign_placeholders(value.as_str().unwrap_or_default()) {
                notes.push(note(
                    List::Reinterpreted,
                    "mcp-variable-not-expanded",
                    &format!("env.{key}"),
                    format!("`${{{var}}}` stays literal under OPS (only ${{PLUGIN_ROOT}} and ${{PLUGIN_DATA}} expand): the host must supply this value another way"),
                ));
            }
        }
    }
    if let Some(cwd) = config.get("cwd") {
        let cwd = cwd.as_str().ok_or("`cwd` is not a string")?;
        if !ops_cwd(cwd) {
            return Err(format!(
                "`cwd` `{cwd}` is not `./`, ${{PLUGIN_ROOT}} or ${{PLUGIN_DATA}} rooted"
            ));
        }
    }
    Ok(())
}

/// What OPS requires of a remote server: an https URL, string headers (never expanded).
fn check_ops_remote(config: &Map<String, Value>, notes: &mut Vec<Note>) -> Result<(), String> {
    let url = config
        .get("url")
        .and_then(Value::as_str)
        .ok_or("a remote server needs a string `url`")?;
    ops_url(url)?;
    if let Some(headers) =
        string_map(config.get("headers")).map_err(|e| format!("`headers` {e}"))?
    {
        for (key, value) in &headers {
            if value.as_str().is_some_and(|v| v.contains("${")) {
                notes.push(note(
                    List::Reinterpreted,
                    "mcp-variable-not-expanded",
                    &format!("headers.{key}"),
                    "OPS never expands header values: the placeholder is sent literally".into(),
                ));
            }
        }
    }
    Ok(())
}

/// An OPS `mcp.json` server entry in persona pack `.mcp.json` spelling.
pub fn to_pack(config: &Map<String, Value>) -> Result<(Map<String, Value>, Vec<Note>), String> {
    let mut notes = Vec::new();
    let kind = config
        .get("type")
        .and_then(Value::as_str)
        .ok_or("no `type` (OPS requires one on every server)")?;
    let allowed = match kind {
        "stdio" => STDIO_KEYS,
        "streamable-http" => REMOTE_KEYS,
        "sse" => return Err("the legacy `sse` transport, which apiary's runtimes reject".into()),
        other => return Err(format!("unknown transport `{other}`")),
    };
    if let Some(key) = config
        .keys()
        .find(|k| *k != "type" && !allowed.contains(&k.as_str()))
    {
        return Err(format!("key `{key}`, which a `{kind}` server may not have"));
    }
    let mut out = Map::new();
    if kind == "stdio" {
        pack_stdio(config, &mut out, &mut notes)?;
    } else {
        let url = config
            .get("url")
            .and_then(Value::as_str)
            .filter(|u| !u.is_empty())
            .ok_or("a remote server needs a non-empty string `url`")?;
        out.insert("type".into(), "http".into());
        out.insert("url".into(), url.into());
        if let Some(headers) =
            string_map(config.get("headers")).map_err(|e| format!("`headers` {e}"))?
        {
            out.insert("headers".into(), Value::Object(headers));
        }
        notes.push(note(
            List::Normalised,
            "mcp-transport-renamed",
            "type",
            "type `streamable-http` -> `http`".into(),
        ));
    }
    Ok((out, notes))
}

/// An OPS stdio server's command, args, env and cwd into `out`, with what apiary treats
/// differently noted.
fn pack_stdio(
    config: &Map<String, Value>,
    out: &mut Map<String, Value>,
    notes: &mut Vec<Note>,
) -> Result<(), String> {
    let command = config
        .get("command")
        .and_then(Value::as_str)
        .filter(|c| !c.is_empty())
        .ok_or("a stdio server needs a non-empty string `command`")?;
    out.insert("command".into(), command.into());
    if let Some(args) = string_list(config.get("args")).map_err(|e| format!("`args` {e}"))? {
        out.insert("args".into(), Value::Array(args));
    }
    if let Some(env) = string_map(config.get("env")).map_err(|e| format!("`env` {e}"))? {
        out.insert("env".into(), Value::Object(env));
    }
    if let Some(cwd) = config.get("cwd") {
        let cwd = cwd.as_str().ok_or("`cwd` is not a string")?;
        out.insert("cwd".into(), cwd.into());
        notes.push(note(
            List::Reinterpreted,
            "mcp-cwd-ignored",
            "cwd",
            "apiary starts MCP servers in its own working directory; `cwd` is kept but not applied"
                .into(),
        ));
    }
    let texts = out
        .get("args")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .chain(
            out.get("env")
                .and_then(Value::as_object)
                .into_iter()
                .flat_map(|m| m.values()),
        )
        .chain(out.get("cwd"))
        .filter_map(Value::as_str);
    if texts
        .into_iter()
        .any(|t| t.contains("${PLUGIN_ROOT}") || t.contains("${PLUGIN_DATA}"))
    {
        notes.push(note(
            List::Reinterpreted,
            "plugin-placeholder",
            "",
            "${PLUGIN_ROOT}/${PLUGIN_DATA} are OPS host variables; apiary reads `${...}` from its process environment instead".into(),
        ));
    }
    Ok(())
}

/// One server entry into the other spelling ([`to_ops`], [`to_pack`]), with notes.
type Spelling = fn(&Map<String, Value>) -> Result<(Map<String, Value>, Vec<Note>), String>;

/// One server of a converted list, with the notes to report about it.
pub struct Mapped {
    pub name: String,
    /// The entry in the target spelling; `None` when it has no place there (kept aside only).
    pub config: Option<Map<String, Value>>,
    pub notes: Vec<Note>,
    /// Why it has no place in the target, when `config` is `None`.
    pub refused: Option<String>,
}

/// Maps `servers` (in one spelling) with `forward`, keeping aside in `kept` the original of every
/// entry that `back` would not restore; `previous` holds originals kept aside by an earlier
/// conversion in the other direction, used when the entry is unchanged since.
fn map_list(
    servers: &[(String, Map<String, Value>)],
    previous: &Map<String, Value>,
    forward: Spelling,
    back: Spelling,
    kept: &mut Map<String, Value>,
) -> Vec<Mapped> {
    let mut out = Vec::new();
    for (name, config) in servers {
        // An entry that an earlier conversion produced from a kept original, unchanged since:
        // the original comes back exactly.
        if let Some(Value::Object(original)) = previous.get(name)
            && back(original).ok().map(|(m, _)| m).as_ref() == Some(config)
        {
            out.push(Mapped {
                name: name.clone(),
                config: Some(original.clone()),
                notes: vec![],
                refused: None,
            });
            continue;
        }
        match forward(config) {
            Ok((mapped, notes)) => {
                if back(&mapped).ok().map(|(m, _)| m).as_ref() != Some(config) {
                    kept.insert(name.clone(), Value::Object(config.clone()));
                }
                out.push(Mapped {
                    name: name.clone(),
                    config: Some(mapped),
                    notes,
                    refused: None,
                });
            }
            Err(why) => {
                kept.insert(name.clone(), Value::Object(config.clone()));
                out.push(Mapped {
                    name: name.clone(),
                    config: None,
                    notes: vec![],
                    refused: Some(why),
                });
            }
        }
    }
    // Originals an earlier conversion could not map at all come back as they were.
    for (name, original) in previous {
        if let Value::Object(original) = original
            && back(original).is_err()
            && !servers.iter().any(|(n, _)| n == name)
        {
            out.push(Mapped {
                name: name.clone(),
                config: Some(original.clone()),
                notes: vec![],
                refused: None,
            });
        }
    }
    out
}

/// Persona pack servers -> OPS `mcp.json` servers.
pub fn to_ops_list(
    servers: &[(String, Map<String, Value>)],
    previous: &Map<String, Value>,
    kept: &mut Map<String, Value>,
) -> Vec<Mapped> {
    map_list(servers, previous, to_ops, to_pack, kept)
}

/// OPS `mcp.json` servers -> persona pack servers.
pub fn to_pack_list(
    servers: &[(String, Map<String, Value>)],
    previous: &Map<String, Value>,
    kept: &mut Map<String, Value>,
) -> Vec<Mapped> {
    map_list(servers, previous, to_pack, to_ops, kept)
}

/// Whether a persona pack server entry has keys apiary does not read (reported by the caller).
pub fn unknown_pack_keys(config: &Map<String, Value>) -> Vec<String> {
    config
        .keys()
        .filter(|k| !PACK_KEYS.contains(&k.as_str()))
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use convert_kit::json;

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn stdio_and_http_map_both_ways() {
        let pack = obj(json!({"command": "gh", "args": ["stdio"], "env": {"T": "${TOKEN}"}}));
        let (ops, notes) = to_ops(&pack).unwrap();
        assert_eq!(ops["type"], "stdio");
        assert!(notes.iter().any(|n| n.code == "mcp-type-synthesised"));
        assert!(notes.iter().any(|n| n.code == "mcp-variable-not-expanded"));
        assert_eq!(to_pack(&ops).unwrap().0, pack);

        let http = obj(json!({"type": "http", "url": "https://x.example/mcp"}));
        let (ops, _) = to_ops(&http).unwrap();
        assert_eq!(ops["type"], "streamable-http");
        assert_eq!(to_pack(&ops).unwrap().0, http);
    }

    #[test]
    fn non_portable_entries_are_refused() {
        for bad in [
            json!({"command": "${ROOT}/bin/x"}),
            json!({"command": "../x"}),
            json!({"command": "npx -y thing"}),
            json!({"type": "http", "url": "http://example.com/mcp"}),
            json!({"type": "http", "url": "https://u:p@example.com/"}),
            json!({"command": "x", "env": {"PLUGIN_ROOT": "/"}}),
            json!({"type": "ws", "url": "wss://x"}),
        ] {
            assert!(to_ops(&obj(bad.clone())).is_err(), "{bad}");
        }
        assert!(
            to_ops(&obj(
                json!({"type": "http", "url": "http://localhost:8080/mcp"})
            ))
            .is_ok()
        );
        assert!(to_pack(&obj(json!({"type": "sse", "url": "https://x"}))).is_err());
        assert!(to_pack(&obj(json!({"type": "stdio", "command": "x", "url": "y"}))).is_err());
    }

    #[test]
    fn lists_keep_what_does_not_map_back() {
        let servers = vec![
            (
                "a".to_string(),
                obj(json!({"type": "stdio", "command": "x"})),
            ),
            ("b".to_string(), obj(json!({"command": "${X}/y"}))),
        ];
        let mut kept = Map::new();
        let mapped = to_ops_list(&servers, &Map::new(), &mut kept);
        assert!(mapped[1].config.is_none());
        assert_eq!(kept.len(), 2, "{kept:?}");
        let ops: Vec<_> = mapped
            .iter()
            .filter_map(|m| m.config.clone().map(|c| (m.name.clone(), c)))
            .collect();
        let back = to_pack_list(&ops, &kept, &mut Map::new());
        let back: Vec<_> = back
            .into_iter()
            .map(|m| (m.name, m.config.unwrap()))
            .collect();
        assert_eq!(back, servers);
    }
}
