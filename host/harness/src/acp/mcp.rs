//! A persona's merged MCP servers in ACP's `session/new` form: env and header maps become
//! `[{name, value}]` lists, `${VAR}` references are filled from the process environment (spec §7),
//! and a bare command is looked up on `PATH` (ACP wants an absolute path).
//!
//! A pack is not trusted with the operator's environment: a `${VAR}` is filled only when the
//! operator allowed that variable for the pack (`allow_env` in the overrides file, see
//! [`crate::resolve::overrides`]); any other is refused, named, with how to allow it. Which stdio
//! servers are handed over at all is decided before this, by the trust store.

use std::path::{Path, PathBuf};

use agent_client_protocol_schema::v1 as acp;

use crate::pack::McpServer;
use crate::pack::mcp::Transport;

/// Why a persona's MCP servers cannot be delivered: the persona must not start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum McpError {
    #[error("MCP server `{server}` needs the environment variable `{var}`, which is not set")]
    Unresolved { server: String, var: String },
    #[error(
        "MCP server `{server}` reads `${{{var}}}` from the operator's environment, which the operator has not allowed pack {pack} to read; to allow it, add `allow_env = [\"{var}\"]` to the `[\"{pack}\"]` table of the overrides file (--overrides, $APIARY_OVERRIDES or ~/.config/apiary/overrides.toml)"
    )]
    NotAllowed {
        server: String,
        var: String,
        pack: String,
    },
}

impl McpError {
    /// A short machine-readable kind, for `--json` output and tests.
    pub fn kind(&self) -> &'static str {
        match self {
            McpError::Unresolved { .. } => "unresolved-env",
            McpError::NotAllowed { .. } => "env-not-allowed",
        }
    }
}

/// Where `${VAR}` values come from: `env`, for the variables in `allowed` only (the pack's
/// `allow_env`). `env` also gives `PATH` for finding a bare command.
pub struct Vars<'a> {
    pub env: &'a (dyn Fn(&str) -> Option<String> + Sync),
    pub allowed: &'a [String],
    /// The pack the servers belong to, for the refusal message.
    pub pack: &'a str,
}

/// Converts the merged servers; `http_supported` is the agent's `mcpCapabilities.http`. HTTP servers
/// an agent cannot take are left out (with the returned warning), never silently.
pub fn to_acp(
    servers: &[McpServer],
    env: &Vars<'_>,
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
                    acp::McpServerStdio::new(&s.name, resolve_command(command, env.env))
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

/// Replaces every `${VAR}` with its value; a variable the pack may not read, or that is unset (or
/// empty), is an error naming it. `${VAR:-default}` (the shell's and Claude Code's spelling) is the
/// value when the pack may read it and it is set, else `default`: never an error.
pub fn interpolate(server: &str, value: &str, vars: &Vars<'_>) -> Result<String, McpError> {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(start) = rest.find("${") {
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else { break };
        let (name, default) = match after[..end].split_once(":-") {
            Some((name, default)) => (name, Some(default)),
            None => (&after[..end], None),
        };
        if !is_var_name(name) {
            out.push_str(&rest[..start + 2]);
            rest = after;
            continue;
        }
        out.push_str(&rest[..start]);
        if let Some(default) = default {
            let allowed = vars.allowed.iter().any(|a| a == name);
            let set = allowed
                .then(|| (vars.env)(name))
                .flatten()
                .filter(|v| !v.is_empty());
            out.push_str(set.as_deref().unwrap_or(default));
            rest = &after[end + 1..];
            continue;
        }
        if !vars.allowed.iter().any(|a| a == name) {
            return Err(McpError::NotAllowed {
                server: server.to_string(),
                var: name.to_string(),
                pack: vars.pack.to_string(),
            });
        }
        // An empty variable fills nothing useful (an empty token): refused like an unset one.
        match (vars.env)(name).filter(|v| !v.is_empty()) {
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
    if let Some(path) = env("PATH").filter(|p| !p.is_empty()) {
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
            "TOKEN" | "HOME" => Some("t0k".into()),
            _ => None,
        }
    }

    fn allowed() -> Vec<String> {
        vec!["TOKEN".into(), "NOPE".into()]
    }

    #[test]
    fn interpolates_and_names_the_missing_variable() {
        let allowed = allowed();
        let vars = Vars {
            env: &lookup,
            allowed: &allowed,
            pack: "p",
        };
        assert_eq!(
            interpolate("gh", "Bearer ${TOKEN}!", &vars).unwrap(),
            "Bearer t0k!"
        );
        assert_eq!(interpolate("gh", "${} $x ${", &vars).unwrap(), "${} $x ${");
        // A default applies when the variable is unset or not allowed, and never errs.
        assert_eq!(
            interpolate("gh", "${TOKEN:-d}|${NOPE:-d2}|${SECRET:-}", &vars).unwrap(),
            "t0k|d2|"
        );
        let err = interpolate("gh", "${NOPE}", &vars).unwrap_err();
        assert!(err.to_string().contains("`NOPE`"), "{err}");
        assert!(err.to_string().contains("`gh`"), "{err}");
    }

    /// A set variable the operator did not allow for the pack is refused, named, with the remedy;
    /// nothing of its value is used.
    #[test]
    fn only_allowed_variables_are_read() {
        let allowed = allowed();
        let vars = Vars {
            env: &lookup,
            allowed: &allowed,
            pack: "com.example.p",
        };
        let err = interpolate("gh", "x ${HOME} y", &vars).unwrap_err();
        assert!(matches!(err, McpError::NotAllowed { .. }), "{err}");
        let msg = err.to_string();
        assert!(msg.contains("`${HOME}`"), "{msg}");
        assert!(msg.contains(r#"allow_env = ["HOME"]"#), "{msg}");
        assert!(msg.contains(r#"["com.example.p"]"#), "{msg}");
        let none = Vars {
            env: &lookup,
            allowed: &[],
            pack: "p",
        };
        assert!(interpolate("gh", "${TOKEN}", &none).is_err());
        assert_eq!(interpolate("gh", "no refs", &none).unwrap(), "no refs");
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
        let allowed = allowed();
        let vars = Vars {
            env: &lookup,
            allowed: &allowed,
            pack: "p",
        };
        let (acp, warnings) = to_acp(&servers, &vars, false).unwrap();
        assert!(warnings.is_empty());
        let json = serde_json::to_value(&acp).unwrap();
        assert_eq!(
            json,
            serde_json::json!([{"name": "github", "command": "/usr/bin/gh-mcp", "args": ["stdio"],
                                 "env": [{"name": "GITHUB_TOKEN", "value": "t0k"}]}])
        );
    }
}
