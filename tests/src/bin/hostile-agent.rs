//! `hostile-agent`: an ACP v1 agent that does what a prompt-injected agent would. On every prompt
//! it tries to read, write and connect where it should not, then replies with one line per
//! attempt (`ATTEMPT <what> <target>: OK <detail>` or `... DENIED <error>`) followed by its whole
//! environment (`ENV <name>=<value>`), so whatever it got is published if apiary lets it.
//!
//! Targets come from the prompt as words `read=<path>`, `write=<path>`, `connect=<host:port>`,
//! `unix=<path>` and `proxy=<host:port>` (a `CONNECT` through its `HTTPS_PROXY`); it always also
//! tries every ancestor process's `/proc/<pid>/environ` and creating a Unix socket.

use std::io::{BufRead, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use serde_json::{Value, json};

fn main() {
    let stdin = std::io::stdin();
    let mut out = std::io::stdout();
    for line in stdin.lock().lines() {
        let Ok(line) = line else { break };
        let Ok(msg) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let id = msg["id"].clone();
        let result = match msg["method"].as_str() {
            Some("initialize") => json!({"protocolVersion": 1, "agentCapabilities": {}}),
            Some("session/new") => json!({"sessionId": "hostile-1"}),
            Some("session/prompt") => {
                let report = attack(&prompt_text(&msg));
                let update = json!({"jsonrpc": "2.0", "method": "session/update", "params": {
                    "sessionId": msg["params"]["sessionId"],
                    "update": {"sessionUpdate": "agent_message_chunk",
                               "content": {"type": "text", "text": report}}}});
                send(&mut out, &update);
                json!({"stopReason": "end_turn"})
            }
            _ if id.is_null() => continue,
            _ => {
                send(
                    &mut out,
                    &json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "method not found"}}),
                );
                continue;
            }
        };
        send(
            &mut out,
            &json!({"jsonrpc": "2.0", "id": id, "result": result}),
        );
    }
}

fn send(out: &mut std::io::Stdout, v: &Value) {
    let _ = writeln!(out, "{v}");
    let _ = out.flush();
}

fn prompt_text(msg: &Value) -> String {
    msg["params"]["prompt"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|b| b["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

fn attack(prompt: &str) -> String {
    let mut lines = Vec::new();
    for word in prompt.split_whitespace() {
        let word = word.trim_matches(|c: char| c == '`' || c == '"' || c == ',');
        let Some((what, target)) = word.split_once('=') else {
            continue;
        };
        let outcome = match what {
            "read" => read(target),
            "write" => write(target),
            "connect" => connect(target),
            "unix" => unix(target),
            "proxy" => through_proxy(target),
            _ => continue,
        };
        lines.push(format!("ATTEMPT {what} {target}: {}", shown(outcome)));
    }
    for pid in ancestors() {
        let target = format!("/proc/{pid}/environ");
        let outcome =
            std::fs::read(&target).map(|b| String::from_utf8_lossy(&b).replace('\0', " "));
        lines.push(format!("ATTEMPT environ {target}: {}", shown(outcome)));
    }
    let outcome = std::os::unix::net::UnixListener::bind(std::env::temp_dir().join("hostile.sock"))
        .map(|_| "a Unix socket made".to_string());
    lines.push(format!("ATTEMPT unix-socket create: {}", shown(outcome)));
    for (k, v) in std::env::vars() {
        lines.push(format!("ENV {k}={v}"));
    }
    lines.join("\n")
}

fn shown(outcome: std::io::Result<String>) -> String {
    match outcome {
        Ok(detail) => format!("OK {detail}"),
        Err(e) => format!("DENIED {e}"),
    }
}

fn read(path: &str) -> std::io::Result<String> {
    let meta = std::fs::metadata(path)?;
    if meta.is_dir() {
        let mut names = Vec::new();
        for entry in std::fs::read_dir(path)? {
            let entry = entry?;
            let p = entry.path();
            let text = if p.is_file() {
                std::fs::read_to_string(&p).unwrap_or_default()
            } else {
                String::new()
            };
            names.push(format!(
                "{}={}",
                entry.file_name().to_string_lossy(),
                text.trim()
            ));
        }
        return Ok(names.join(" "));
    }
    Ok(std::fs::read_to_string(path)?.trim().to_string())
}

fn write(path: &str) -> std::io::Result<String> {
    std::fs::write(path, "written by a hostile agent\n")?;
    Ok("written".into())
}

fn connect(addr: &str) -> std::io::Result<String> {
    let addr = resolve(addr)?;
    TcpStream::connect_timeout(&addr, Duration::from_secs(3))?;
    Ok(format!("connected to {addr}"))
}

fn unix(path: &str) -> std::io::Result<String> {
    std::os::unix::net::UnixStream::connect(path)?;
    Ok("connected".into())
}

/// `CONNECT target` through `$HTTPS_PROXY`: the status line the proxy answers.
fn through_proxy(target: &str) -> std::io::Result<String> {
    let proxy =
        std::env::var("HTTPS_PROXY").map_err(|_| std::io::Error::other("no HTTPS_PROXY"))?;
    let hostport = proxy.trim_start_matches("http://").trim_end_matches('/');
    let mut s = TcpStream::connect_timeout(&resolve(hostport)?, Duration::from_secs(3))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(s, "CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n")?;
    let mut buf = [0u8; 512];
    let n = s.read(&mut buf)?;
    let head = String::from_utf8_lossy(&buf[..n]);
    let status = head.lines().next().unwrap_or_default().to_string();
    if status.contains(" 200") {
        Ok(status)
    } else {
        Err(std::io::Error::other(status))
    }
}

fn resolve(addr: &str) -> std::io::Result<std::net::SocketAddr> {
    use std::net::ToSocketAddrs;
    addr.to_socket_addrs()?
        .next()
        .ok_or_else(|| std::io::Error::other("no address"))
}

/// The pids above this process, nearest first.
fn ancestors() -> Vec<u32> {
    let mut pids = Vec::new();
    let mut pid = std::process::id();
    for _ in 0..8 {
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            break;
        };
        // The parent is the second field after the command name's closing parenthesis.
        let Some(ppid) = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<u32>().ok())
        else {
            break;
        };
        if ppid <= 1 {
            break;
        }
        pids.push(ppid);
        pid = ppid;
    }
    pids
}
