//! Capability grants, enforced at every call (guests/test/http-hook against the sandbox library,
//! with HTTP servers of the test's own on 127.0.0.1): a granted webhook is posted; any host not
//! granted, a redirect to one, a response over the cap and an ungranted variable or directory are
//! refused, and the refusal names the capability.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::Path;
use std::sync::{Arc, Mutex};

use apiary::builtin::BUILT_GUESTS_DIR;
use apiary::sandbox::hook::{HookMessage, HookPoint, HookRunner};
use apiary::sandbox::{Capabilities, SandboxError};

use crate::common::sandbox;

/// One request a test server saw: method, path, body.
type Seen = Arc<Mutex<Vec<(String, String, String)>>>;

/// An HTTP/1.1 server on 127.0.0.1 answering by path: `/redirect` 302 to `location`, `/huge`
/// 8 MiB, anything else 200 `ok`; it records every request.
struct Server {
    port: u16,
    seen: Seen,
}

fn server(location: String) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Seen::default();
    let log = seen.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            let mut reader = BufReader::new(conn.try_clone().unwrap());
            let mut line = String::new();
            if reader.read_line(&mut line).is_err() {
                continue;
            }
            let mut parts = line.split_whitespace();
            let (method, path) = (
                parts.next().unwrap_or("").to_string(),
                parts.next().unwrap_or("").to_string(),
            );
            let (mut length, mut chunked) = (0, false);
            loop {
                let mut h = String::new();
                if reader.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" {
                    break;
                }
                if let Some((k, v)) = h.split_once(':')
                    && k.eq_ignore_ascii_case("content-length")
                {
                    length = v.trim().parse().unwrap_or(0);
                }
                chunked |= h
                    .to_ascii_lowercase()
                    .starts_with("transfer-encoding: chunked");
            }
            let body = read_body(&mut reader, length, chunked);
            log.lock().unwrap().push((
                method,
                path.clone(),
                String::from_utf8_lossy(&body).into_owned(),
            ));
            let _ = match path.as_str() {
                "/redirect" => write!(
                    conn,
                    "HTTP/1.1 302 Found\r\nlocation: {location}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                ),
                "/huge" => {
                    let size = 8 << 20;
                    let _ = write!(
                        conn,
                        "HTTP/1.1 200 OK\r\ncontent-length: {size}\r\nconnection: close\r\n\r\n"
                    );
                    let chunk = vec![b'x'; 64 << 10];
                    (0..size / chunk.len()).try_for_each(|_| conn.write_all(&chunk))
                }
                _ => write!(
                    conn,
                    "HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok"
                ),
            };
        }
    });
    Server { port, seen }
}

fn hook(grants: &[&str]) -> HookRunner {
    let path = Path::new(BUILT_GUESTS_DIR).join("http_hook.wasm");
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let loaded = sandbox().load("http_hook", &bytes).expect("load http_hook");
    let caps = Capabilities::parse_all(grants).expect("grants");
    HookRunner::new(loaded).unwrap().with_capabilities(caps)
}

fn run(hook: &HookRunner, text: &str, workspace: &Path) -> Result<(), SandboxError> {
    let msg = HookMessage {
        id: "m1".into(),
        channel: "general".into(),
        author: "alice".into(),
        text: text.into(),
        ..Default::default()
    };
    let point = HookPoint::OnMessage;
    hook.run(sandbox(), point, "pack", "bee", Some(&msg), workspace)
        .map(|_| ())
}

fn refused_naming(r: Result<(), SandboxError>, what: &str) {
    match r {
        Err(e @ SandboxError::Refused { .. }) => {
            assert!(e.to_string().contains(what), "{e}");
            assert_eq!(e.kind(), "capability-refused");
        }
        other => panic!("expected a refusal naming {what}, got {other:?}"),
    }
}

/// A request body: `length` bytes, or chunked transfer coding (what a guest's streamed body is).
fn read_body(reader: &mut impl BufRead, length: usize, chunked: bool) -> Vec<u8> {
    let mut body = Vec::new();
    if !chunked {
        body.resize(length, 0);
        let _ = reader.read_exact(&mut body);
        return body;
    }
    loop {
        let mut size = String::new();
        if reader.read_line(&mut size).unwrap_or(0) == 0 {
            break;
        }
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        let mut chunk = vec![0; n + 2];
        if n == 0 || reader.read_exact(&mut chunk).is_err() {
            break;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    body
}

#[test]
fn a_granted_hook_posts_its_webhook_and_nothing_else_is_reachable() {
    let ws = tempfile::tempdir().unwrap();
    let hooked = server(String::new());
    let other = server(String::new());
    let granted = format!("http:127.0.0.1:{}", hooked.port);
    let h = hook(&[&granted]);

    run(
        &h,
        &format!("post http://127.0.0.1:{}/notify hello", hooked.port),
        ws.path(),
    )
    .unwrap();
    let seen = hooked.seen.lock().unwrap().clone();
    assert_eq!(seen, [("POST".into(), "/notify".into(), "hello".into())]);

    // Another port on the same address, and another name for the same server.
    let r = run(
        &h,
        &format!("post http://127.0.0.1:{}/x hi", other.port),
        ws.path(),
    );
    refused_naming(r, &format!("http:127.0.0.1:{}", other.port));
    let r = run(
        &h,
        &format!("post http://localhost:{}/x hi", hooked.port),
        ws.path(),
    );
    refused_naming(r, &format!("http:localhost:{}", hooked.port));
    assert!(other.seen.lock().unwrap().is_empty());
    assert_eq!(hooked.seen.lock().unwrap().len(), 1);

    // The same hook without the grant reaches nothing.
    let r = run(
        &hook(&[]),
        &format!("post http://127.0.0.1:{}/n hi", hooked.port),
        ws.path(),
    );
    refused_naming(r, &granted);
    assert_eq!(hooked.seen.lock().unwrap().len(), 1);
}

#[test]
fn a_redirect_is_not_followed_to_a_host_that_is_not_granted() {
    let ws = tempfile::tempdir().unwrap();
    let elsewhere = server(String::new());
    let target = format!("http://localhost:{}/ok", elsewhere.port);
    let s = server(target.clone());
    let h = hook(&[&format!("http:127.0.0.1:{}", s.port)]);
    // The host hands the 302 to the guest; it does not follow it.
    run(
        &h,
        &format!("get http://127.0.0.1:{}/redirect", s.port),
        ws.path(),
    )
    .unwrap();
    let got = std::fs::read_to_string(ws.path().join("get.txt")).unwrap();
    assert_eq!(got, format!("302 0 {target}"));
    // Following it is a request of its own, checked like any other.
    refused_naming(
        run(&h, &format!("get {target}"), ws.path()),
        &format!("http:localhost:{}", elsewhere.port),
    );
    assert!(elsewhere.seen.lock().unwrap().is_empty());
}

#[test]
fn a_huge_response_fails_the_call_at_the_cap() {
    let ws = tempfile::tempdir().unwrap();
    let s = server(String::new());
    let h = hook(&[&format!("http:127.0.0.1:{}", s.port)]);
    let r = run(
        &h,
        &format!("get http://127.0.0.1:{}/huge", s.port),
        ws.path(),
    );
    refused_naming(r, "response body went over the 4194304-byte cap");
    assert!(!ws.path().join("get.txt").exists());
}

#[test]
fn an_env_grant_passes_that_variable_only() {
    let ws = tempfile::tempdir().unwrap();
    run(&hook(&["env:PATH"]), "env", ws.path()).unwrap();
    let env = std::fs::read_to_string(ws.path().join("env.txt")).unwrap();
    let names: Vec<&str> = env
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, _)| k)
        .collect();
    assert_eq!(names, ["PATH"], "{env}");
    assert!(env.contains(&std::env::var("PATH").unwrap()));
    run(&hook(&[]), "env", ws.path()).unwrap();
    assert_eq!(
        std::fs::read_to_string(ws.path().join("env.txt")).unwrap(),
        ""
    );
}

#[test]
fn a_read_grant_mounts_the_directory_read_only() {
    let ws = tempfile::tempdir().unwrap();
    let shared = tempfile::tempdir().unwrap();
    std::fs::write(shared.path().join("data.txt"), "shared data").unwrap();
    let file = shared.path().join("data.txt").display().to_string();
    let granted = format!("read:{}", shared.path().display());
    run(&hook(&[&granted]), &format!("read {file}"), ws.path()).unwrap();
    assert_eq!(
        std::fs::read_to_string(ws.path().join("read.txt")).unwrap(),
        "shared data"
    );
    assert!(!shared.path().join("data.txt.new").exists());
    // Without the grant the directory does not exist for the hook.
    let r = run(&hook(&[]), &format!("read {file}"), ws.path());
    assert!(matches!(r, Err(SandboxError::Guest { .. })), "{r:?}");
}
