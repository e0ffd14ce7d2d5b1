//! Helpers for the live-harness tests: an `apiary up` on the embedded relay (free port) or on a relay
//! the test started ([`relays`]), its stdout lines, `apiary post`/`tail` against it, and the bundled
//! agent's capture file.
//!
//! Every wait is bounded; nothing sleeps to assert.

pub mod relays;
pub mod wire;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use apiary_e2e::{Run, apiary, wait_exit};
use serde_json::Value;

/// Generous: the machine is small and shared.
pub const WAIT: Duration = Duration::from_secs(90);

pub struct Up {
    pub child: Child,
    pub url: String,
    pub home: PathBuf,
    lines: mpsc::Receiver<String>,
    pub seen: Vec<String>,
    stderr: PathBuf,
}

impl Up {
    /// Starts `apiary up --listen 127.0.0.1:0 <packs> <args>` with `home` as HOME and the agent
    /// capturing to `<home>/capture.jsonl`, and waits for its `ready` line.
    pub fn start(home: &Path, packs: &[&Path], args: &[&str], env: &[(&str, &str)]) -> Up {
        let mut up = Up::spawn(home, packs, args, env);
        up.wait_for(|l| event_of(l) == "ready");
        up
    }

    /// Like [`Up::start`], on `relay` (`--relay URL` for a relay the test started).
    pub fn start_on(
        relay: &relays::TestRelay,
        home: &Path,
        packs: &[&Path],
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Up {
        let relay_args = relay.up_args();
        let mut all: Vec<&str> = relay_args.iter().map(String::as_str).collect();
        all.extend_from_slice(args);
        Up::start(home, packs, &all, env)
    }

    /// Like [`Up::start`] without waiting for readiness (for start-up failures).
    pub fn spawn(home: &Path, packs: &[&Path], args: &[&str], env: &[(&str, &str)]) -> Up {
        let stderr = home.join("up.stderr");
        let mut cmd = apiary(home);
        cmd.arg("up").args(["--drain-timeout", "10"]);
        if !args.contains(&"--relay") {
            cmd.args(["--listen", "127.0.0.1:0"]);
        }
        cmd.args(packs)
            .args(args)
            .env("APIARY_AGENT_CAPTURE", home.join("capture.jsonl"))
            .env("RUST_LOG", "warn,apiary=info")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr).expect("stderr file"));
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("spawn apiary up");
        let out = child.stdout.take().expect("stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut up = Up {
            child,
            url: String::new(),
            home: home.to_path_buf(),
            lines,
            seen: Vec::new(),
            stderr,
        };
        let first = up.wait_for(|l| event_of(l) == "relay");
        up.url = match serde_json::from_str::<Value>(&first) {
            Ok(v) => v["url"].as_str().unwrap_or_default().to_string(),
            Err(_) => first["relay ".len()..].trim().to_string(),
        };
        up
    }

    /// The next stdout line matching `pred` (lines before it are kept in `seen`).
    pub fn wait_for(&mut self, pred: impl Fn(&str) -> bool) -> String {
        if let Some(l) = self.seen.iter().find(|l| pred(l)) {
            return l.clone();
        }
        let deadline = Instant::now() + WAIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if pred(&line) {
                        return line;
                    }
                }
                Err(_) => panic!(
                    "timed out waiting for a line from `apiary up`; stdout so far:\n{}\nstderr:\n{}",
                    self.seen.join("\n"),
                    self.stderr()
                ),
            }
        }
    }

    /// Moves every line printed so far into `seen`, without waiting.
    pub fn drain(&mut self) {
        while let Ok(line) = self.lines.try_recv() {
            self.seen.push(line);
        }
    }

    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// `apiary post` to this relay; returns the event id.
    pub fn post(&self, channel: &str, text: &str, extra: &[&str]) -> String {
        post(&self.home, &self.url, channel, text, extra)
    }

    /// The stored messages of a channel, as JSON events.
    pub fn history(&self, channel: &str) -> Vec<Value> {
        let mut cmd = apiary(&self.home);
        cmd.args([
            "tail",
            "--relay",
            &self.url,
            "--channel",
            channel,
            "--json",
            "--history",
            "500",
            "--no-follow",
            "--timeout",
            "30",
        ]);
        let run = Run::of(cmd);
        assert_eq!(run.code, 0, "tail failed: {}", run.stderr);
        run.stdout
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).expect("tail --json line"))
            .collect()
    }

    /// Waits for `reply <persona> <id> to <trigger>` and returns the reply id.
    pub fn reply_to(&mut self, persona: &str, trigger: &str) -> String {
        let prefix = format!("reply {persona} ");
        let suffix = format!(" to {trigger}");
        let line = self.wait_for(|l| l.starts_with(&prefix) && l.ends_with(&suffix));
        line[prefix.len()..line.len() - suffix.len()].to_string()
    }

    /// The `event <id> ...` line for a posted message.
    pub fn event_line(&mut self, id: &str) -> String {
        let prefix = format!("event {id} ");
        self.wait_for(|l| l.starts_with(&prefix))
    }

    /// The agent capture entries of one persona.
    pub fn capture(&self, persona: &str) -> Vec<Value> {
        capture(&self.home, persona)
    }

    /// SIGTERM and assert a clean exit (status 0), with the output on failure.
    pub fn stop_ok(&mut self) {
        let code = self.stop();
        assert_eq!(
            code,
            0,
            "apiary up exited with {code}\nstdout: {:#?}\nstderr: {}",
            self.seen,
            self.stderr()
        );
    }

    /// SIGTERM, then wait (bounded) for a clean exit; returns the exit code.
    pub fn stop(&mut self) -> i32 {
        let pid = self.child.id().to_string();
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status();
        let Some(status) = wait_exit(&mut self.child, WAIT) else {
            let _ = self.child.kill();
            panic!("apiary up did not stop after SIGTERM");
        };
        // Collect the rest of stdout.
        while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(2)) {
            self.seen.push(line);
        }
        status.code().unwrap_or(-1)
    }
}

/// `apiary post` to the relay at `url` as the operator of `home`; returns the event id.
pub fn post(home: &Path, url: &str, channel: &str, text: &str, extra: &[&str]) -> String {
    let mut cmd = apiary(home);
    cmd.args(["post", "--relay", url, "--channel", channel])
        .args(extra)
        .arg(text);
    let run = Run::of(cmd);
    assert_eq!(run.code, 0, "post failed: {}", run.stderr);
    let id = run.stdout.trim().to_string();
    assert_eq!(id.len(), 64, "post printed {id:?}");
    id
}

/// The kind of an `apiary up` stdout line: a plain line's first word, a `--json` line's `event`.
pub fn event_of(line: &str) -> String {
    match serde_json::from_str::<Value>(line) {
        Ok(v) => v["event"].as_str().unwrap_or_default().to_string(),
        Err(_) => line
            .split_whitespace()
            .next()
            .unwrap_or_default()
            .to_string(),
    }
}

impl Drop for Up {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

pub fn capture(home: &Path, persona: &str) -> Vec<Value> {
    std::fs::read_to_string(home.join("capture.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["persona"] == persona)
        .collect()
}

/// The messages a persona's agent received with `method`.
pub fn received<'a>(entries: &'a [Value], method: &str) -> Vec<&'a Value> {
    entries
        .iter()
        .filter_map(|e| e.get("recv"))
        .filter(|m| m["method"] == method)
        .collect()
}

/// The prompt text of each `session/prompt` a persona received.
pub fn prompts(entries: &[Value]) -> Vec<String> {
    received(entries, "session/prompt")
        .into_iter()
        .map(|m| {
            m["params"]["prompt"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|b| b["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .collect()
}

/// The `e` tags of an event as `(id, marker)`.
pub fn e_tags(event: &Value) -> Vec<(String, String)> {
    tags(event, "e")
        .into_iter()
        .map(|t| (t[1].clone(), t.get(3).cloned().unwrap_or_default()))
        .collect()
}

pub fn tags(event: &Value, name: &str) -> Vec<Vec<String>> {
    event["tags"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| {
            let t: Vec<String> = t
                .as_array()?
                .iter()
                .map(|v| v.as_str().unwrap_or_default().to_string())
                .collect();
            (t.first().map(String::as_str) == Some(name)).then_some(t)
        })
        .collect()
}

/// Writes a pack: `.plugin/plugin.json` with `id` and the given personas, plus extra files.
pub fn write_pack(root: &Path, id: &str, personas: &[(&str, &str)], extra: &[(&str, &str)]) {
    let list: Vec<String> = personas
        .iter()
        .map(|(n, _)| format!("\"agents/{n}.persona.md\""))
        .collect();
    let manifest = format!(
        "{{\"id\": \"{id}\", \"name\": \"Test pack\", \"version\": \"1.0.0\", \"personas\": [{}]}}",
        list.join(", ")
    );
    let mut files: Vec<(String, String)> = vec![(".plugin/plugin.json".into(), manifest)];
    for (name, text) in personas {
        files.push((format!("agents/{name}.persona.md"), text.to_string()));
    }
    for (rel, text) in extra {
        files.push((rel.to_string(), text.to_string()));
    }
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    apiary_e2e::write_tree(root, &refs);
}

/// Writes the operator's overrides file (its default place under `home`) with one pack's table:
/// `lines` are TOML keys such as `agent_env = ["X"]`.
pub fn grant(home: &Path, pack_id: &str, lines: &str) {
    let dir = home.join(".config/apiary");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("overrides.toml"),
        format!("[\"{pack_id}\"]\n{lines}\n"),
    )
    .unwrap();
}

/// A persona file: frontmatter lines (YAML) and a body.
pub fn persona(name: &str, frontmatter: &str, body: &str) -> String {
    format!(
        "---\nname: {name}\ndisplay_name: {name}\ndescription: test persona {name}\nruntime: apiary-agent\n{frontmatter}\n---\n{body}\n"
    )
}

/// The pack's own servers of a `session/new`'s `mcpServers`, in order: without apiary's own
/// (`apiary`, which every session gets; asserted once here: HTTP with a bearer token).
pub fn pack_servers(servers: &Value) -> Value {
    let all = servers.as_array().expect("mcpServers is a list");
    let apiary: Vec<&Value> = all.iter().filter(|s| s["name"] == "apiary").collect();
    assert_eq!(apiary.len(), 1, "apiary's own server, once: {servers}");
    let auth = apiary[0]["headers"][0]["value"]
        .as_str()
        .unwrap_or_default();
    assert!(
        auth.starts_with("Bearer ") && auth.len() == 7 + 64,
        "{servers}"
    );
    Value::Array(
        all.iter()
            .filter(|s| s["name"] != "apiary")
            .cloned()
            .collect(),
    )
}
