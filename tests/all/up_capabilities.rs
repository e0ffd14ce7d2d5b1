//! A component hook that notifies a webhook under `apiary up` (guests/test/http-hook, with a
//! `.caps.toml` declaring the webhook's host, and a webhook server of the test's own on
//! 127.0.0.1): refused at load until the operator grants it with `apiary trust --hooks`, then
//! posting to that host only; a changed component loses its grant. `apiary hook run` gives a hook
//! the same recorded grants (or `--grant`), and a granted host that trickles its answer forever
//! holds the hook only until its deadline.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::Path;
use std::sync::{Arc, Mutex};

use apiary_e2e::{Run, apiary, guest};

use crate::support::live::{Up, persona, prompts, write_pack};

/// A webhook on 127.0.0.1 that answers 200 and records each request's body.
fn webhook() -> (u16, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let bodies = Arc::new(Mutex::new(Vec::new()));
    let seen = bodies.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            let mut reader = BufReader::new(conn.try_clone().unwrap());
            let (mut length, mut chunked) = (0, false);
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some((k, v)) = line.split_once(':')
                    && k.eq_ignore_ascii_case("content-length")
                {
                    length = v.trim().parse().unwrap_or(0);
                }
                chunked |= line
                    .to_ascii_lowercase()
                    .starts_with("transfer-encoding: chunked");
            }
            let body = read_body(&mut reader, length, chunked);
            seen.lock()
                .unwrap()
                .push(String::from_utf8_lossy(&body).into_owned());
            let _ = conn
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
        }
    });
    (port, bodies)
}

fn trust(home: &Path, root: &Path) -> Run {
    let mut cmd = apiary(home);
    cmd.current_dir(home.join("dev"))
        .args(["trust", "./pack", "--hooks", "--yes", "--json", "--root"])
        .arg(root);
    Run::of(cmd)
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
fn a_webhook_hook_runs_under_up_once_its_capability_is_granted() {
    let home = tempfile::tempdir().unwrap();
    let (port, bodies) = webhook();
    let pack = home.path().join("dev/pack");
    write_pack(
        &pack,
        "com.example.webhook",
        &[(
            "bee",
            &persona(
                "bee",
                "subscribe: [\"general\"]\ntriggers:\n  all_messages: true\nhooks:\n  on_message: ./hooks/notify.wasm",
                "You are Bee.",
            ),
        )],
        &[],
    );
    std::fs::create_dir_all(pack.join("hooks")).unwrap();
    std::fs::copy(guest("http_hook"), pack.join("hooks/notify.wasm")).unwrap();
    let cap = format!("http:127.0.0.1:{port}");
    std::fs::write(
        pack.join("hooks/notify.caps.toml"),
        format!("http = [\"127.0.0.1:{port}\"]\n"),
    )
    .unwrap();
    let root = home.path().join("root");
    let ws = home.path().join("ws");
    let args = [
        "--root",
        root.to_str().unwrap(),
        "--workspace",
        ws.to_str().unwrap(),
    ];

    // Not granted: refused at load, naming the capability and the command that grants it.
    let mut up = Up::spawn(home.path(), &[&pack], &args, &[]);
    let line = up.wait_for(|l| l.starts_with("persona bee refused"));
    assert!(line.contains(&format!("declares {cap}")), "{line}");
    assert!(line.contains("apiary trust"), "{line}");
    up.stop();

    let r = trust(home.path(), &root);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let store: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(root.join(".apiary/trust.json")).unwrap())
            .unwrap();
    let dirs = store["dirs"].as_object().unwrap();
    let hooks = &dirs.values().next().unwrap()["hooks"];
    assert_eq!(hooks[0]["grants"], serde_json::json!([cap]), "{store:#}");

    let mut up = Up::start(home.path(), &[&pack], &args, &[]);
    let text = format!("post http://127.0.0.1:{port}/notify a bee said hello");
    let id = up.post("general", &text, &[]);
    up.reply_to("bee", &id);
    assert_eq!(*bodies.lock().unwrap(), ["a bee said hello"]);
    // Any other host fails the hook, so the message is dropped, and the line names the capability.
    let other = up.post("general", "post http://localhost:9/x leak", &[]);
    let line = up.wait_for(|l| l.starts_with(&format!("dropped bee {other}")));
    assert!(
        line.contains("capability http:localhost:9 is not granted"),
        "{line}"
    );
    assert_eq!(prompts(&up.capture("bee")).len(), 1);
    up.stop_ok();

    // A changed component has no grant: refused again until trusted again.
    let mut bytes = std::fs::read(pack.join("hooks/notify.wasm")).unwrap();
    // A custom section appended: same behaviour, other digest.
    bytes.extend_from_slice(&[0, 4, 1, b'x', 0, 0]);
    std::fs::write(pack.join("hooks/notify.wasm"), bytes).unwrap();
    let mut up = Up::spawn(home.path(), &[&pack], &args, &[]);
    let line = up.wait_for(|l| l.starts_with("persona bee refused"));
    assert!(line.contains(&format!("declares {cap}")), "{line}");
    up.stop();
}

/// A server on 127.0.0.1 that answers with a large body one byte every 200 ms, each byte well
/// within the HTTP between-bytes timeout; the channel says when the client went away.
fn trickle() -> (u16, std::sync::mpsc::Receiver<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (gone, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            let gone = gone.clone();
            std::thread::spawn(move || {
                let mut reader = BufReader::new(conn.try_clone().unwrap());
                let mut line = String::new();
                while reader.read_line(&mut line).unwrap_or(0) > 0 && line != "\r\n" {
                    line.clear();
                }
                let head = b"HTTP/1.1 200 OK\r\ncontent-length: 1000000\r\n\r\n";
                let mut ok = conn.write_all(head).is_ok();
                while ok {
                    std::thread::sleep(std::time::Duration::from_millis(200));
                    ok = conn.write_all(b".").and_then(|()| conn.flush()).is_ok();
                }
                let _ = gone.send(());
            });
        }
    });
    (port, rx)
}

fn hook_run(home: &Path, message: &str, extra: &[&str]) -> Run {
    let mut cmd = apiary(home);
    cmd.current_dir(home.join("dev"))
        .args(["hook", "run", "./pack", "bee", "on_message", "--json"])
        .args(["--message", message, "--root"])
        .arg(home.join("root"))
        .args(extra);
    Run::of(cmd)
}

#[test]
fn hook_run_gives_a_hook_its_recorded_grants_and_ends_http_waits_at_its_deadline() {
    let home = tempfile::tempdir().unwrap();
    let (port, bodies) = webhook();
    let (slow, gone) = trickle();
    let pack = home.path().join("dev/pack");
    write_pack(
        &pack,
        "com.example.hookrun-grants",
        &[(
            "bee",
            &persona(
                "bee",
                "hooks:\n  on_message: ./hooks/notify.wasm",
                "You are Bee.",
            ),
        )],
        &[],
    );
    std::fs::create_dir_all(pack.join("hooks")).unwrap();
    std::fs::copy(guest("http_hook"), pack.join("hooks/notify.wasm")).unwrap();
    std::fs::write(
        pack.join("hooks/notify.caps.toml"),
        format!("http = [\"127.0.0.1:{port}\", \"127.0.0.1:{slow}\"]\n"),
    )
    .unwrap();
    let post = format!("post http://127.0.0.1:{port}/notify hello");

    // Nothing granted: refused at load, naming what is missing.
    let r = hook_run(home.path(), &post, &[]);
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    let v = r.json();
    let message = v["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("http:127.0.0.1:{port}")) && message.contains("not granted"),
        "{v:#}"
    );
    assert!(bodies.lock().unwrap().is_empty());

    // Granted for this run on the command line.
    let grants = [
        "--grant",
        &format!("http:127.0.0.1:{port}"),
        "--grant",
        &format!("http:127.0.0.1:{slow}"),
    ];
    let r = hook_run(home.path(), &post, &grants);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert_eq!(*bodies.lock().unwrap(), ["hello"]);

    // Recorded by `apiary trust --hooks`, as `up` uses them.
    let r = trust(home.path(), &home.path().join("root"));
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let again = format!("post http://127.0.0.1:{port}/notify again");
    let r = hook_run(home.path(), &again, &[]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert_eq!(*bodies.lock().unwrap(), ["hello", "again"]);

    // Hostile: a granted host trickles its answer forever. The wait ends at the hook's 5 s
    // deadline (not abandoned by the command's backstop), and the connection is closed.
    let r = hook_run(home.path(), &format!("get http://127.0.0.1:{slow}/"), &[]);
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    let v = r.json();
    assert_eq!(v["error"]["code"], "deadline", "{v:#}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("exceeded its deadline of 5000 ms and was stopped"),
        "{v:#}"
    );
    gone.recv_timeout(std::time::Duration::from_secs(60))
        .expect("the trickling connection was closed");
}

/// A pack at `<home>/dev/pack` whose bee runs the http hook, declaring `declared` hosts.
fn http_pack(home: &Path, declared: &[String]) {
    let pack = home.join("dev/pack");
    write_pack(
        &pack,
        "com.example.http-addresses",
        &[(
            "bee",
            &persona(
                "bee",
                "hooks:\n  on_message: ./hooks/notify.wasm",
                "You are Bee.",
            ),
        )],
        &[],
    );
    std::fs::create_dir_all(pack.join("hooks")).unwrap();
    std::fs::copy(guest("http_hook"), pack.join("hooks/notify.wasm")).unwrap();
    let list: Vec<String> = declared.iter().map(|d| format!("\"{d}\"")).collect();
    std::fs::write(
        pack.join("hooks/notify.caps.toml"),
        format!("http = [{}]\n", list.join(", ")),
    )
    .unwrap();
}

/// `hook run` of the http hook posting `text` to `url` with `--grant http:<g>` for each of
/// `grants` (declared by the pack as well).
fn post_with(home: &Path, grants: &[String], url: &str, text: &str) -> Run {
    http_pack(home, grants);
    let flags: Vec<String> = grants
        .iter()
        .flat_map(|g| ["--grant".to_string(), format!("http:{g}")])
        .collect();
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    hook_run(home, &format!("post {url} {text}"), &flags)
}

/// Round 3, finding 6: a grant matches what a host is, not how it is spelt. A granted name that
/// resolves to loopback is refused, naming the address and the grant that would allow it;
/// numeric spellings of 127.0.0.1 are that address (not granted by a name); a grant cannot be
/// written as a disguised address. The address granted plainly is reached however the request
/// spells it, and a name is reached once its address is granted too.
#[test]
fn http_grants_match_addresses_not_spellings() {
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    let (port, bodies) = webhook();
    let by_name = vec![format!("localhost:{port}")];

    let r = post_with(home, &by_name, &format!("http://localhost:{port}/n"), "a");
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    let message = r.json()["error"]["message"].as_str().unwrap().to_string();
    assert!(
        message.contains("loopback") && message.contains(&format!("http:127.0.0.1:{port}")),
        "{message}"
    );
    for disguised in [
        "2130706433",
        "0x7f.1",
        "127.1",
        "0177.0.0.1",
        "[::ffff:127.0.0.1]",
        "LOCALHOST.",
    ] {
        let r = post_with(home, &by_name, &format!("http://{disguised}:{port}/n"), "b");
        assert_eq!(r.code, 1, "{disguised}: {}{}", r.stdout, r.stderr);
    }
    // A grant written as a disguised address is refused before anything runs.
    for disguised in ["2130706433", "0x7f.1", "127.1"] {
        let grant = vec![format!("{disguised}:{port}")];
        let r = post_with(home, &grant, &format!("http://{disguised}:{port}/n"), "c");
        assert_ne!(r.code, 0, "{disguised}: {}{}", r.stdout, r.stderr);
        assert!(
            format!("{}{}", r.stdout, r.stderr).contains("plainly"),
            "{disguised}: {}{}",
            r.stdout,
            r.stderr
        );
    }
    assert!(bodies.lock().unwrap().is_empty(), "{:?}", bodies.lock());

    // Granted plainly: the same address however the request writes it; the name once its
    // address is granted as well.
    let plain = vec![format!("127.0.0.1:{port}")];
    let r = post_with(home, &plain, &format!("http://127.1:{port}/n"), "plain");
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let both = vec![format!("localhost:{port}"), format!("127.0.0.1:{port}")];
    let r = post_with(home, &both, &format!("http://localhost:{port}/n"), "named");
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert_eq!(*bodies.lock().unwrap(), ["plain", "named"]);
}
