//! A persona's merged MCP servers in ACP's `session/new` form: env and header maps become
//! `[{name, value}]` lists, `${VAR}` references are filled from the process environment (spec §7),
//! and a bare command is looked up on `PATH` (ACP wants an absolute path).

use std::path::{Path, PathBuf};

use agent_client_protocol_schema::v1 as acp;

use crate::pack::McpServer;
use crate::pack::mcp::Transport;

/// Why a persona's MCP servers cannot be delivered: the persona must not start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum McpError {
    #[error("MCP server `{server}` needs the environment variable `{var}`, which is not set")]
    Unresolved { server: String, var: String },
}

/// Converts the merged servers; `http_supported` is the agent's `mcpCapabilities.http`. HTTP servers
/// an agent cannot take are left out (with the returned warning), never silently.
pub fn to_acp(
    servers: &[McpServer],
    env: &dyn Fn(&str) -> Option<String>,
    http_supported: bool,
) -> Result<(Vec<acp::McpServer>, Vec<String>), McpError> {
    let mut out = Vec::new();
    let mut warnings = Vec::new();
    for s in servers {
        match &s.transport {
            Transport::Stdio {
                command,
                args,
                env: vars,
            } => {
                let vars = vars
                    .iter()
                    .map(|(k, v)| Ok(acp::EnvVariable::new(k, interpolate(&s.name, v, env)?)))
                    .collect::<Result<Vec<_>, McpError>>()?;
                let args = args
                    .iter()
                    .map(|a| interpolate(&s.name, a, env))
                    .collect::<Result<Vec<_>, _>>()?;
                out.push(acp::McpServer::Stdio(
                    acp::McpServerStdio::new(&s.name, resolve_command(command, env))
                        .args(args)
                        .env(vars),
                ));
            }
            Transport::Http { url, headers } => {
                let url = interpolate(&s.name, url, env)?;
                let headers = headers
                    .iter()
                    .map(|(k, v)| Ok(acp::HttpHeader::new(k, interpolate(&s.name, v, env)?)))
                    .collect::<Result<Vec<_>, McpError>>()?;
                if http_supported {
                    out.push(acp::McpServer::Http(
                        acp::McpServerHttp::new(&s.name, url).headers(headers),
                    ));
                } else {
                    warnings.push(format!(
                        "MCP server `{}` uses HTTP, which the agent does not support; left out",
                        s.name
                    ));
                }
            }
        }
    }
    Ok((out, warnings))
}

/// Replaces every `${VAR}` with its value; a variable that is unset (or empty) is an error naming it.
pub fn interpolate(
    server: &str,
    value: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<String, McpError> {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(start) = rest.find("${") {
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else { break };
        let name = &after[..end];
        if !is_var_name(name) {
            out.push_str(&rest[..start + 2]);
            rest = after;
            continue;
        }
        out.push_str(&rest[..start]);
        match env(name) {
            Some(v) => out.push_str(&v),
            None => {
                return Err(McpError::Unresolved {
                    server: server.to_string(),
                    var: name.to_string(),
                });
            }
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

fn is_var_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// An absolute path for a bare command found on `PATH`; anything else is passed on as written.
fn resolve_command(command: &str, env: &dyn Fn(&str) -> Option<String>) -> PathBuf {
    let p = Path::new(command);
    if p.is_absolute() || command.contains('/') {
        return p.to_path_buf();
    }
    if let Some(path) = env("PATH") {
        for dir in std::env::split_paths(&path) {
            let candidate = dir.join(command);
            if candidate.is_file() {
                return candidate;
            }
        }
    }
    p.to_path_buf()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn lookup(k: &str) -> Option<String> {
        match k {
            "TOKEN" => Some("t0k".into()),
            _ => None,
        }
    }

    #[test]
    fn interpolates_and_names_the_missing_variable() {
        assert_eq!(
            interpolate("gh", "Bearer ${TOKEN}!", &lookup).unwrap(),
            "Bearer t0k!"
        );
        assert_eq!(
            interpolate("gh", "${} $x ${", &lookup).unwrap(),
            "${} $x ${"
        );
        let err = interpolate("gh", "${NOPE}", &lookup).unwrap_err();
        assert!(err.to_string().contains("`NOPE`"), "{err}");
        assert!(err.to_string().contains("`gh`"), "{err}");
    }

    #[test]
    fn env_map_becomes_a_list() {
        let servers = vec![McpServer {
            name: "github".into(),
            transport: Transport::Stdio {
                command: "/usr/bin/gh-mcp".into(),
                args: vec!["stdio".into()],
                env: BTreeMap::from([("GITHUB_TOKEN".into(), "${TOKEN}".into())]),
            },
            env_refs: vec!["TOKEN".into()],
        }];
        let (acp, warnings) = to_acp(&servers, &lookup, false).unwrap();
        assert!(warnings.is_empty());
        let json = serde_json::to_value(&acp).unwrap();
        assert_eq!(
            json,
            serde_json::json!([{"name": "github", "command": "/usr/bin/gh-mcp", "args": ["stdio"],
                                 "env": [{"name": "GITHUB_TOKEN", "value": "t0k"}]}])
        );
    }
}
