//! The harness against a relay it does not own (`apiary relay`, a separate process): when that relay
//! restarts, the harness reconnects by itself, a message posted while it was away is answered
//! exactly once, nothing earlier is answered again, and the relay's journal keeps the history.

mod live_common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use apiary_e2e::apiary;
use live_common::{Up, e_tags, persona, write_pack};

struct Relay(Child);

impl Relay {
    fn start(home: &std::path::Path, port: u16) -> (Relay, String) {
        let mut cmd = apiary(home);
        cmd.args(["relay", "--listen", &format!("127.0.0.1:{port}")])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut child = cmd.spawn().expect("apiary relay");
        let mut first = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut first)
            .unwrap();
        let url = first
            .strip_prefix("relay ")
            .unwrap_or_else(|| panic!("apiary relay printed {first:?}"))
            .trim()
            .to_string();
        (Relay(child), url)
    }

    fn stop(mut self) {
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &self.0.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn relay_restart_reconnects_and_answers_the_gap_once() {
    let home = tempfile::tempdir().unwrap();
    let pack = home.path().join("pack");
    write_pack(
        &pack,
        "com.example.reconnect",
        &[(
            "pip",
            &persona("pip", "subscribe: [\"general\"]", "You are Pip."),
        )],
        &[],
    );
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let (relay, url) = Relay::start(home.path(), port);
    let mut up = Up::start(home.path(), &[&pack], &["--relay", &url], &[]);
    assert_eq!(up.url, url);

    let before = up.post("general", "@pip before the restart", &[]);
    up.reply_to("pip", &before);

    relay.stop();
    let (relay, url2) = Relay::start(home.path(), port);
    assert_eq!(url2, url);
    // Posted while the harness may still be disconnected: it must be picked up on reconnection.
    let gap = up.post("general", "@pip during the gap", &[]);
    let reply = up.reply_to("pip", &gap);

    let events = up.history("general");
    let replies: Vec<_> = events
        .iter()
        .filter(|e| e_tags(e).iter().any(|(t, _)| t == &gap))
        .collect();
    assert_eq!(replies.len(), 1, "{events:#?}");
    assert_eq!(replies[0]["id"], reply);
    // The relay journals to its data dir: what was posted before the restart is still there.
    assert!(events.iter().any(|e| e["id"] == before), "{events:#?}");
    assert_eq!(events.len(), 4, "{events:#?}");
    up.stop_ok();
    let answered_gap = up
        .seen
        .iter()
        .filter(|l| l.starts_with("reply pip ") && l.ends_with(&format!(" to {gap}")))
        .count();
    assert_eq!(answered_gap, 1, "{:#?}", up.seen);
    let answered_before = up
        .seen
        .iter()
        .filter(|l| l.starts_with("reply pip ") && l.ends_with(&format!(" to {before}")))
        .count();
    assert_eq!(answered_before, 1, "{:#?}", up.seen);
    relay.stop();
}
