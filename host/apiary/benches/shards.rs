//! Sharded replicas on this machine: throughput and p99 latency (message published → the
//! persona's reply received) for 1, 2 and 4 `apiary up --shard i/N` processes on one
//! `apiary relay`, with 24 personas over 12 channels and one bundled `apiary-agent` per persona.
//! Each run posts `APIARY_BENCH_MESSAGES` messages (default 600), each mentioning one persona, at
//! once, and waits for every reply. Printed as ratios against one replica: on a machine with few
//! cores the replicas share them, so this shows the cost of sharding (the relay checks, one relay
//! connection each) more than its gain, which comes from more machines.
//!
//! Run: `cargo build --release --bins && cargo bench -p apiary --bench shards`.

mod common;

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nostr_sdk::prelude::*;

const PACK_ID: &str = "com.example.bench";
const PERSONAS: usize = 24;
const CHANNELS: usize = 12;

use common::apiary_bin;

fn write_pack(dir: &Path) {
    let personas: Vec<String> = (0..PERSONAS)
        .map(|i| format!("\"agents/p{i}.persona.md\""))
        .collect();
    std::fs::create_dir_all(dir.join(".plugin")).unwrap();
    std::fs::create_dir_all(dir.join("agents")).unwrap();
    std::fs::write(
        dir.join(".plugin/plugin.json"),
        format!(
            "{{\"id\": \"{PACK_ID}\", \"name\": \"Bench\", \"version\": \"1.0.0\", \"personas\": [{}]}}",
            personas.join(", ")
        ),
    )
    .unwrap();
    for i in 0..PERSONAS {
        std::fs::write(
            dir.join(format!("agents/p{i}.persona.md")),
            format!(
                "---\nname: p{i}\ndisplay_name: p{i}\ndescription: bench persona\nruntime: apiary-agent\nsubscribe: [\"c{}\"]\n---\nBe brief.\n",
                i % CHANNELS
            ),
        )
        .unwrap();
    }
}

/// A process and its stdout lines.
struct Proc {
    child: Child,
    lines: std::sync::mpsc::Receiver<String>,
}

impl Proc {
    fn start(mut cmd: Command) -> Proc {
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start apiary");
        let out = child.stdout.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        Proc { child, lines }
    }

    fn wait_for(&self, prefix: &str) -> String {
        loop {
            let l = self
                .lines
                .recv_timeout(Duration::from_secs(120))
                .expect("apiary said nothing for two minutes");
            if l.starts_with(prefix) {
                return l;
            }
        }
    }

    fn stop(mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
    }
}

fn apiary(home: &Path) -> Command {
    let mut cmd = Command::new(apiary_bin());
    cmd.env("APIARY_DATA_DIR", home.join("data"))
        .env("XDG_CACHE_HOME", home.join("cache"))
        .env("HOME", home);
    cmd
}

/// One run with `replicas` replicas: (messages per second, p50, p99 latency).
fn run(replicas: u32, messages: usize, keys_dir: &Path, pack: &Path) -> (f64, Duration, Duration) {
    let tmp = tempfile::tempdir().unwrap();
    let mut relay = apiary(tmp.path());
    relay.args([
        "relay",
        "--listen",
        "127.0.0.1:0",
        "--ephemeral",
        "--key-rate",
        "1000000",
        "--connection-rate",
        "1000000",
        "--max-stored-events",
        "1000000",
    ]);
    let relay = Proc::start(relay);
    let url = relay.wait_for("relay ")["relay ".len()..]
        .trim()
        .to_string();
    let ups: Vec<Proc> = (0..replicas)
        .map(|i| {
            let home = tmp.path().join(format!("r{i}"));
            let mut cmd = apiary(&home);
            cmd.arg("up")
                .arg(pack)
                .args(["--plain", "--relay", &url, "--keys-dir"])
                .arg(keys_dir)
                .args(["--shard", &format!("{i}/{replicas}"), "--native-triggers"])
                .args(["--author-turns", "0", "--channel-turns", "0", "--agent"])
                .arg(common::agent_bin());
            let p = Proc::start(cmd);
            p.wait_for("ready ");
            p
        })
        .collect();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let result = rt.block_on(measure(&url, messages, keys_dir));
    for up in ups {
        up.stop();
    }
    relay.stop();
    result
}

async fn measure(url: &str, messages: usize, keys_dir: &Path) -> (f64, Duration, Duration) {
    let authors: Vec<PublicKey> = (0..PERSONAS)
        .map(|i| {
            let text =
                std::fs::read_to_string(keys_dir.join(format!("{PACK_ID}/p{i}.key"))).unwrap();
            Keys::new(SecretKey::from_hex(text.trim()).unwrap()).public_key()
        })
        .collect();
    let client = Client::new(Keys::generate());
    client.add_relay(url).await.unwrap();
    client.connect().await;
    let mut notes = client.notifications();
    client
        .subscribe(
            Filter::new()
                .kind(Kind::Custom(9))
                .authors(authors)
                .since(Timestamp::now()),
            None,
        )
        .await
        .unwrap();
    let mut sent: HashMap<EventId, Instant> = HashMap::new();
    let start = Instant::now();
    for k in 0..messages {
        let p = k % PERSONAS;
        let event = EventBuilder::new(Kind::Custom(9), format!("@p{p} question {k}"))
            .tag(Tag::custom(
                TagKind::single_letter(Alphabet::H, false),
                [format!("c{}", p % CHANNELS)],
            ))
            .sign_with_keys(&Keys::generate())
            .unwrap();
        sent.insert(event.id, Instant::now());
        client.send_event(&event).await.unwrap();
    }
    let mut latencies = Vec::with_capacity(messages);
    while latencies.len() < messages {
        let n = tokio::time::timeout(Duration::from_secs(120), notes.recv())
            .await
            .expect("replies stopped coming")
            .unwrap();
        if let RelayPoolNotification::Event { event, .. } = n {
            for id in event.tags.event_ids() {
                if let Some(at) = sent.remove(id) {
                    latencies.push(at.elapsed());
                }
            }
        }
    }
    let elapsed = start.elapsed();
    latencies.sort();
    let pick = |q: f64| latencies[((latencies.len() as f64 * q) as usize).min(latencies.len() - 1)];
    (
        messages as f64 / elapsed.as_secs_f64(),
        pick(0.5),
        pick(0.99),
    )
}

fn main() {
    let messages: usize = std::env::var("APIARY_BENCH_MESSAGES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(600);
    let tmp = tempfile::tempdir().unwrap();
    let pack = tmp.path().join("pack");
    write_pack(&pack);
    let keys_dir = tmp.path().join("keys");
    std::fs::create_dir_all(keys_dir.join(PACK_ID)).unwrap();
    for i in 0..PERSONAS {
        let key = Keys::generate().secret_key().to_secret_hex();
        write_private(&keys_dir.join(format!("{PACK_ID}/p{i}.key")), &key);
    }
    write_private(
        &keys_dir.join("operator.key"),
        &Keys::generate().secret_key().to_secret_hex(),
    );
    println!(
        "shards: {messages} messages, {PERSONAS} personas over {CHANNELS} channels, all posted at once"
    );
    let mut base = None;
    for replicas in [1u32, 2, 4] {
        let (rate, p50, p99) = run(replicas, messages, &keys_dir, &pack);
        let (r1, p99_1) = *base.get_or_insert((rate, p99));
        println!(
            "  {replicas} replica(s): {rate:7.1} messages/s ({:.2}x of 1), latency p50 {p50:?}, p99 {p99:?} ({:.2}x of 1)",
            rate / r1,
            p99.as_secs_f64() / p99_1.as_secs_f64()
        );
    }
}

/// A key file as a Secret mount gives it: readable by its owner only (apiary refuses others).
fn write_private(path: &std::path::Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
}
