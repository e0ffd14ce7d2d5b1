//! `apiary mcp-bridge`: apiary's MCP server for agents that take stdio servers only. It reads one
//! JSON-RPC message a line from stdin, POSTs it to the server with the session's token, and writes
//! each JSON-RPC message of the answer to stdout, one a line. Nothing else: the server checks
//! everything.

use std::io::{BufRead, Read, Write};

/// The variables the agent is given in the bridge's `env`.
pub const URL_VAR: &str = "APIARY_MCP_URL";
pub const TOKEN_VAR: &str = "APIARY_MCP_TOKEN";
/// A line (one request) longer than this is refused.
const LINE_MAX: usize = 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum BridgeError {
    #[error("{0} is not set: the bridge is started by an agent, with the session's URL and token")]
    Unset(&'static str),
    #[error("reading stdin: {0}")]
    Stdin(std::io::Error),
    #[error("writing stdout: {0}")]
    Stdout(std::io::Error),
}

/// Relays until stdin ends.
pub fn run() -> Result<(), BridgeError> {
    let url = std::env::var(URL_VAR).map_err(|_| BridgeError::Unset(URL_VAR))?;
    let token = std::env::var(TOKEN_VAR).map_err(|_| BridgeError::Unset(TOKEN_VAR))?;
    let agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(std::time::Duration::from_secs(120)))
        .build()
        .new_agent();
    let stdin = std::io::stdin();
    let mut stdout = std::io::stdout();
    let mut line = String::new();
    loop {
        line.clear();
        let n = stdin
            .lock()
            .take(LINE_MAX as u64 + 1)
            .read_line(&mut line)
            .map_err(BridgeError::Stdin)?;
        if n == 0 {
            return Ok(());
        }
        let request = line.trim();
        if request.is_empty() {
            continue;
        }
        for answer in relay(&agent, &url, &token, request) {
            writeln!(stdout, "{answer}").map_err(BridgeError::Stdout)?;
        }
        stdout.flush().map_err(BridgeError::Stdout)?;
    }
}

/// One message to the server; the JSON-RPC messages to write back (none for a notification).
fn relay(agent: &ureq::Agent, url: &str, token: &str, request: &str) -> Vec<String> {
    let id = serde_json::from_str::<serde_json::Value>(request)
        .ok()
        .and_then(|v| v.get("id").cloned());
    let sent = agent
        .post(url)
        .header("Authorization", &format!("Bearer {token}"))
        .header("Accept", "application/json, text/event-stream")
        .header("Content-Type", "application/json")
        .send(request);
    let failed = |why: String| match &id {
        Some(id) => vec![
            serde_json::json!({"jsonrpc": "2.0", "id": id,
                               "error": {"code": -32603, "message": why}})
            .to_string(),
        ],
        None => Vec::new(),
    };
    let mut res = match sent {
        Ok(res) => res,
        Err(e) => return failed(format!("apiary's MCP server cannot be reached: {e}")),
    };
    let status = res.status().as_u16();
    let sse = res
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    let body = match res
        .body_mut()
        .with_config()
        .limit(8 * 1024 * 1024)
        .read_to_string()
    {
        Ok(b) => b,
        Err(e) => return failed(format!("reading apiary's MCP answer: {e}")),
    };
    if status == 202 || (200..300).contains(&status) && body.trim().is_empty() {
        return Vec::new();
    }
    if !(200..300).contains(&status) {
        return failed(format!(
            "apiary's MCP server answered {status}: {}",
            body.trim()
        ));
    }
    if !sse {
        return vec![body.trim().to_string()];
    }
    // Server-sent events: each `data:` field is one message.
    body.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(|d| d.trim().to_string())
        .filter(|d| !d.is_empty())
        .collect()
}
