//! `apiary up --ops-addr`: health and readiness probes, Prometheus metrics that a real
//! text-format parser (the Prometheus project's Python client, from PyPI) reads, and each
//! persona's A2A agent card; hostile requests get an HTTP error, never a crash or a file.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use apiary_e2e::ci_python;
use serde_json::Value;

use crate::support::live::{Up, WAIT, event_of, persona, write_pack};

/// One request on its own connection: (status, body).
fn http(addr: &str, request: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    let text = String::from_utf8_lossy(&raw).to_string();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

/// The `host:port` the endpoints listen on, from `up`'s `ops` event.
fn ops_addr(up: &mut Up) -> String {
    let line = up.wait_for(|l| event_of(l) == "ops");
    let url: Value = serde_json::from_str(&line).unwrap();
    let url = url["url"].as_str().unwrap();
    url.trim_start_matches("http://").to_string()
}

fn get(addr: &str, path: &str) -> (u16, String) {
    http(
        addr,
        &format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n"),
    )
}

/// `cmd`'s output with `text` on its stdin.
fn piped(cmd: &mut Command, text: &str) -> std::process::Output {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

/// `promtool check metrics` (the Prometheus project's linter, unpacked by `.ci/setup`) finds
/// nothing to say about `text`.
fn promtool_accepts(text: &str) {
    let bin = apiary_e2e::repo_root().join("target/toolchains/promtool/usr/bin/promtool");
    assert!(
        bin.is_file(),
        "{} is missing: run ./.ci/setup",
        bin.display()
    );
    let out = piped(Command::new(&bin).args(["check", "metrics"]), text);
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && said.trim().is_empty(),
        "promtool: {said}\n{text}"
    );
}

/// The metric families the Python parsers read from `text`: name → [(labels, value)], as JSON.
fn parse_metrics(text: &str, parser: &str) -> Value {
    let script = format!(
        r#"
import sys, json
from {parser} import text_string_to_metric_families
out = {{}}
for family in text_string_to_metric_families(sys.stdin.read()):
    out[family.name] = [[s.name, s.labels, s.value] for s in family.samples]
print(json.dumps(out))
"#
    );
    let out = piped(Command::new(ci_python()).arg("-c").arg(script), text);
    assert!(
        out.status.success(),
        "{parser} refused the exposition: {}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The value of the samples called `name` with `persona` (any labels when `None`), summed over
/// every family (the classic text parser files a counter's `_total` samples under a family of
/// their own; the OpenMetrics parser under the counter).
fn sample(families: &Value, name: &str, persona: Option<&str>) -> f64 {
    let found: Vec<f64> = families
        .as_object()
        .unwrap()
        .values()
        .flat_map(|f| f.as_array().unwrap())
        .filter(|s| s[0] == name && persona.is_none_or(|p| s[1]["persona"] == p))
        .map(|s| s[2].as_f64().unwrap())
        .collect();
    assert!(
        !found.is_empty(),
        "no sample {name} ({persona:?}) in {families}"
    );
    found.iter().sum()
}

#[test]
fn up_serves_probes_metrics_and_agent_cards() {
    let home = tempfile::tempdir().unwrap();
    let pack = home.path().join("pack");
    write_pack(
        &pack,
        "com.example.ops",
        &[
            (
                "bee",
                &persona("bee", "subscribe: [\"general\"]", "Be brief."),
            ),
            (
                "sage",
                &persona("sage", "subscribe: [\"general\", \"ops\"]", "Be wise."),
            ),
        ],
        &[(
            "skills/greeting/SKILL.md",
            "---\nname: greeting\ndescription: Greets people warmly\n---\nSay hello.\n",
        )],
    );
    let mut up = Up::start(
        home.path(),
        &[&pack],
        &["--json", "--ops-addr", "127.0.0.1:0"],
        &[],
    );
    let addr = ops_addr(&mut up);

    assert_eq!(get(&addr, "/healthz"), (200, "ok\n".to_string()));
    // Ready: the harness said `ready` and the relay connection is up.
    let deadline = Instant::now() + WAIT;
    let ready = loop {
        let (status, body) = get(&addr, "/readyz");
        if status == 200 {
            break body;
        }
        assert!(Instant::now() < deadline, "never ready: {status} {body}");
        std::thread::sleep(Duration::from_millis(100));
    };
    let ready: Value = serde_json::from_str(&ready).unwrap();
    assert_eq!(ready["personas_ready"], 2, "{ready}");

    // One turn, then the metrics count it.
    let id = up.post("general", "hello @bee", &[]);
    up.wait_for(|l| event_of(l) == "reply" && l.contains(&format!("\"to\":\"{id}\"")));
    let (status, text) = get(&addr, "/metrics");
    assert_eq!(status, 200);
    for parser in [
        "prometheus_client.parser",
        "prometheus_client.openmetrics.parser",
    ] {
        let m = parse_metrics(&text, parser);
        assert_eq!(sample(&m, "apiary_events_received_total", None), 1.0);
        assert_eq!(sample(&m, "apiary_wakes_total", Some("bee")), 1.0);
        assert_eq!(sample(&m, "apiary_skips_total", Some("sage")), 1.0);
        assert_eq!(sample(&m, "apiary_replies_total", Some("bee")), 1.0);
        assert_eq!(
            sample(&m, "apiary_prompt_latency_seconds_count", Some("bee")),
            1.0
        );
        assert_eq!(sample(&m, "apiary_queue_depth", Some("bee")), 0.0);
        assert_eq!(sample(&m, "apiary_personas_ready", None), 2.0);
        assert_eq!(sample(&m, "apiary_relay_connected", None), 1.0);
    }
    // Every family has its help text, in OpenMetrics and in the classic format a scraper gets
    // when it asks for `text/plain`, which the classic parser reads with the same values.
    let classic_text = http(
        &addr,
        &format!(
            "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nAccept: text/plain;version=0.0.4\r\n\r\n"
        ),
    )
    .1;
    assert!(
        !classic_text.contains("# EOF") && text.contains("# EOF"),
        "{classic_text}"
    );
    for exposition in [&text, &classic_text] {
        for line in exposition.lines().filter(|l| l.starts_with("# TYPE ")) {
            let name = line.split_whitespace().nth(2).unwrap();
            let help = format!("# HELP {name} ");
            assert!(
                exposition
                    .lines()
                    .any(|l| l.starts_with(&help) && l.len() > help.len()),
                "{name} has no help text:\n{exposition}"
            );
        }
    }
    promtool_accepts(&classic_text);
    let m = parse_metrics(&classic_text, "prometheus_client.parser");
    assert_eq!(sample(&m, "apiary_replies_total", Some("bee")), 1.0);
    assert_eq!(sample(&m, "apiary_personas_ready", None), 2.0);
    assert!(
        classic_text.contains("# TYPE apiary_replies_total counter"),
        "{classic_text}"
    );

    // Labelled by pack and persona: two packs' `bee`s are two series.
    assert!(
        text.contains(r#"apiary_replies_total{pack="com.example.ops",persona="bee"} 1"#),
        "{text}"
    );

    // The agent card of each persona, from the pack.
    let (status, card) = get(
        &addr,
        "/personas/com.example.ops/sage/.well-known/agent-card.json",
    );
    assert_eq!(status, 200, "{card}");
    let card: Value = serde_json::from_str(&card).unwrap();
    assert_eq!(card["name"], "sage");
    assert_eq!(card["description"], "test persona sage");
    assert_eq!(card["version"], "1.0.0");
    assert_eq!(
        card["url"],
        format!("http://{addr}/personas/com.example.ops/sage")
    );
    assert_eq!(card["skills"][0]["id"], "greeting");
    assert_eq!(card["skills"][0]["description"], "Greets people warmly");
    assert_eq!(
        card["x-apiary"]["channels"],
        serde_json::json!(["general", "ops"])
    );
    assert_eq!(card["x-apiary"]["pack"], "com.example.ops");

    // Hostile requests: unknown paths, traversal, other methods, an oversized head, garbage.
    assert_eq!(
        get(
            &addr,
            "/personas/com.example.ops/nobody/.well-known/agent-card.json"
        )
        .0,
        404
    );
    assert_eq!(get(&addr, "/personas/../../../../etc/passwd").0, 404);
    assert_eq!(
        http(&addr, "POST /metrics HTTP/1.1\r\nHost: x\r\n\r\n").0,
        405
    );
    let huge = format!(
        "GET /healthz HTTP/1.1\r\nX-Pad: {}\r\n\r\n",
        "a".repeat(20_000)
    );
    assert_eq!(http(&addr, &huge).0, 431);
    assert_eq!(http(&addr, "\u{0}\u{1}garbage\r\n\r\n").0, 400);
    let (status, card) = http(
        &addr,
        "GET /personas/com.example.ops/bee/.well-known/agent-card.json HTTP/1.1\r\nHost: evil\"/><x\r\n\r\n",
    );
    assert_eq!(status, 200);
    assert!(!card.contains("evil"), "{card}");
    // Still serving.
    assert_eq!(get(&addr, "/healthz").0, 200);
    up.stop_ok();
}

#[test]
fn a_taken_ops_address_stops_up_with_a_clear_error() {
    let home = tempfile::tempdir().unwrap();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let mut cmd = apiary_e2e::apiary(home.path());
    cmd.args(["up", "--listen", "127.0.0.1:0", "--ops-addr", &addr]);
    let run = apiary_e2e::Run::bounded(cmd, 60);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr
            .contains(&format!("--ops-addr {addr}: cannot listen")),
        "{}",
        run.stderr
    );
}

/// Issue 32, finding 7: idle connections cannot starve the probes; the card's `url` comes from
/// `--public-url`, never from the request's `Host`; a pack's long words are cut in its card.
#[test]
fn idle_clients_do_not_starve_probes_and_cards_take_their_url_from_configuration() {
    let home = tempfile::tempdir().unwrap();
    let pack = home.path().join("pack");
    let long = "honey ".repeat(3000);
    let bee = format!(
        "---\nname: bee\ndisplay_name: bee\ndescription: {long}\nruntime: apiary-agent\nsubscribe: [\"general\"]\n---\nBe brief.\n"
    );
    write_pack(&pack, "com.example.ops", &[("bee", &bee)], &[]);
    let mut up = Up::start(
        home.path(),
        &[&pack],
        &[
            "--json",
            "--ops-addr",
            "127.0.0.1:0",
            "--public-url",
            "https://bees.example.com/",
        ],
        &[],
    );
    let addr = ops_addr(&mut up);

    // Many clients connect and send nothing (more than the endpoints would ever serve at once).
    let idle: Vec<TcpStream> = (0..200)
        .map(|_| TcpStream::connect(&addr).unwrap())
        .collect();
    // A probe is still answered at once (a Kubernetes probe gives up after a second).
    let asked = Instant::now();
    assert_eq!(get(&addr, "/healthz"), (200, "ok\n".to_string()));
    assert!(
        asked.elapsed() < Duration::from_millis(1500),
        "the probe waited {:?} behind idle connections",
        asked.elapsed()
    );
    drop(idle);

    let (status, card) = http(
        &addr,
        "GET /personas/com.example.ops/bee/.well-known/agent-card.json HTTP/1.1\r\nHost: attacker.example\r\n\r\n",
    );
    assert_eq!(status, 200, "{card}");
    let card: Value = serde_json::from_str(&card).unwrap();
    assert_eq!(
        card["url"], "https://bees.example.com/personas/com.example.ops/bee",
        "the card's url is the configured one"
    );
    let description = card["description"].as_str().unwrap();
    assert!(
        description.starts_with("honey honey") && description.chars().count() <= 2049,
        "the description is cut: {} characters",
        description.chars().count()
    );
    assert_eq!(get(&addr, "/healthz").0, 200);
    up.stop_ok();

    // A public URL that is not one is a usage error naming the flag.
    let mut cmd = apiary_e2e::apiary(home.path());
    cmd.args([
        "up",
        "--ops-addr",
        "127.0.0.1:0",
        "--public-url",
        "https://x.example/?a=1",
    ]);
    let run = apiary_e2e::Run::bounded(cmd, 60);
    assert_eq!(run.code, 64, "a usage error: {}", run.stderr);
    assert!(run.stderr.contains("--public-url"), "{}", run.stderr);
}
