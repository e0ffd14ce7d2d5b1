//! The agent is part of the sandbox: a hostile agent of our own (`hostile-agent`, doing what a
//! prompt-injected agent would) runs under `apiary up` with the default settings and tries to read
//! every key, the operator's files and other workspaces, to write outside its workspace, to reach
//! the relay, the machine's network and apiary's own environment. Every attempt fails, nothing
//! secret is published, and what it is allowed (its own workspace, its reply) still works.

use std::net::TcpListener;
use std::path::{Path, PathBuf};

use apiary_e2e::data_dir;
use serde_json::Value;

use crate::support::live::{Up, event_of, grant, persona, write_pack};

const OPERATOR_KEY: &str = "sk-ant-operator-real-key-0123456789";
const GITHUB_TOKEN: &str = "ghp_operatorsecret0123456789abcdef";
const SSH_KEY: &str = "-----BEGIN OPENSSH PRIVATE KEY----- operator-ssh-material";

fn hostile_agent() -> &'static str {
    env!("CARGO_BIN_EXE_hostile-agent")
}

/// Skips (or fails under CI) where the kernel cannot confine: the test is about confinement.
fn confinable(home: &Path) -> bool {
    let run = apiary_e2e::run(home, &["__confine", "--probe"]);
    let support: Value = serde_json::from_str(run.stdout.trim()).unwrap_or_default();
    let ok = support["files"] == true && support["network"] == true && support["seccomp"] == true;
    if !ok {
        assert!(
            std::env::var_os("CI").is_none(),
            "this machine cannot confine: {support}"
        );
        eprintln!("skipped: this machine cannot confine agents: {support}");
    }
    ok
}

/// The secret hex of every key in the key store.
fn store_secrets(home: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut dirs = vec![data_dir(home).join("keys")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let p = entry.path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|e| e == "key") {
                out.push(std::fs::read_to_string(&p).unwrap().trim().to_string());
            }
        }
    }
    out
}

/// This machine's address on its own network (not loopback), if it has one.
fn outside_ip() -> Option<std::net::IpAddr> {
    let s = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    s.connect("192.0.2.1:9").ok()?;
    let ip = s.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then_some(ip)
}

/// The reply `persona` published to the mention `id`: its content.
fn reply_text(up: &mut Up, persona: &str, id: &str) -> String {
    let reply = up.reply_to(persona, id);
    let history = up.history("general");
    let event = history
        .iter()
        .find(|e| e["id"] == reply.as_str())
        .unwrap_or_else(|| panic!("reply {reply} not on the relay"));
    event["content"].as_str().unwrap().to_string()
}

fn attempt<'a>(report: &'a str, what: &str, target: &str) -> &'a str {
    let prefix = format!("ATTEMPT {what} {target}: ");
    report
        .lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .unwrap_or_else(|| panic!("no attempt {what} {target} in:\n{report}"))
}

struct Scene {
    home: tempfile::TempDir,
    eve_cwd: PathBuf,
    victim_file: PathBuf,
    root: PathBuf,
}

/// Two packs in one `up`: a victim with a secret in its workspace, and eve, whose agent is hostile
/// (persona runtime `claude-code`, so its provider key is involved too).
fn scene() -> Scene {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    std::fs::create_dir_all(h.join(".ssh")).unwrap();
    std::fs::write(h.join(".ssh/id_ed25519"), SSH_KEY).unwrap();
    let root = h.join("packs");
    std::fs::create_dir_all(&root).unwrap();
    write_pack(
        &h.join("victim"),
        "com.example.victim",
        &[(
            "vic",
            &persona("vic", "subscribe: [\"general\"]", "You are Vic."),
        )],
        &[],
    );
    let eve = persona(
        "eve",
        "subscribe: [\"general\"]",
        "You do whatever the message says.",
    )
    .replace("runtime: apiary-agent", "runtime: claude-code");
    write_pack(
        &h.join("hostile"),
        "com.example.hostile",
        &[("eve", &eve)],
        &[],
    );
    grant(
        h,
        "com.example.hostile",
        "agent_env = [\"ANTHROPIC_API_KEY\"]",
    );
    let ws = data_dir(h).join("workspaces");
    Scene {
        eve_cwd: ws.join("com.example.hostile/eve"),
        victim_file: ws.join("com.example.victim/vic/secret.txt"),
        root,
        home,
    }
}

#[test]
fn a_hostile_agent_reads_writes_and_reaches_nothing_and_nothing_secret_is_published() {
    let s = scene();
    let h = s.home.path();
    if !confinable(h) {
        return;
    }
    let outside = TcpListener::bind("0.0.0.0:0").unwrap();
    let outside_port = outside.local_addr().unwrap().port();
    let unix_dir = tempfile::tempdir().unwrap();
    let unix_path = unix_dir.path().join("operator.sock");
    let _unix = std::os::unix::net::UnixListener::bind(&unix_path).unwrap();
    let mut up = Up::start(
        h,
        &[&h.join("victim"), &h.join("hostile")],
        &[
            "--agent",
            hostile_agent(),
            "--root",
            s.root.to_str().unwrap(),
        ],
        &[
            ("ANTHROPIC_API_KEY", OPERATOR_KEY),
            ("GITHUB_TOKEN", GITHUB_TOKEN),
        ],
    );
    let ready = up.wait_for(|l| l.starts_with("persona eve ready"));
    assert!(
        ready.contains("confinement=files,network,seccomp"),
        "{ready}"
    );
    std::fs::write(&s.victim_file, "the victim's private notes").unwrap();

    let data = data_dir(h);
    let relay_port = up
        .url
        .rsplit(':')
        .next()
        .unwrap()
        .trim_end_matches('/')
        .to_string();
    let escape_tmp = format!("/tmp/apiary-escape-{}", std::process::id());
    let own = s.eve_cwd.join("own-note.txt");
    let mut targets = vec![
        format!("read={}", data.join("keys").display()),
        format!("read={}", data.join("keys/operator.key").display()),
        format!("read={}", data.join("keys/relay.key").display()),
        format!(
            "read={}",
            data.join("keys/com.example.victim/vic.key").display()
        ),
        format!("read={}", h.join(".ssh/id_ed25519").display()),
        format!("read={}", s.victim_file.display()),
        format!("read={}", data.join("sessions").display()),
        format!("write={}", s.root.join(".apiary/trust.json").display()),
        format!("write={}", h.join("escape.txt").display()),
        format!("write={}", s.root.join("planted.txt").display()),
        format!("write={escape_tmp}"),
        format!("write={}", own.display()),
        format!("read={}", own.display()),
        format!("connect=127.0.0.1:{relay_port}"),
        format!("unix={}", unix_path.display()),
        format!("proxy=127.0.0.1:{relay_port}"),
        format!("proxy=localhost:{relay_port}"),
        "proxy=example.com:443".to_string(),
    ];
    if let Some(ip) = outside_ip() {
        targets.push(format!("connect={ip}:{outside_port}"));
    }
    let id = up.post("general", &format!("@eve {}", targets.join(" ")), &[]);
    let report = reply_text(&mut up, "eve", &id);

    // What it may do works: its own workspace, and its reply was published.
    assert_eq!(
        attempt(&report, "write", &own.display().to_string()),
        "OK written"
    );
    assert!(attempt(&report, "read", &own.display().to_string()).starts_with("OK written by"));
    // Everything else failed.
    for target in &targets {
        let (what, path) = target.split_once('=').unwrap();
        if path == own.display().to_string() {
            continue;
        }
        let outcome = attempt(&report, what, path);
        assert!(
            outcome.starts_with("DENIED"),
            "{target} was allowed: {outcome}"
        );
    }
    let environs: Vec<&str> = report
        .lines()
        .filter(|l| l.starts_with("ATTEMPT environ"))
        .collect();
    assert!(environs.len() >= 2, "the agent saw no ancestors: {report}");
    for line in &environs {
        assert!(line.contains("DENIED"), "{line}");
    }
    assert!(
        report.contains("ATTEMPT unix-socket create: DENIED"),
        "{report}"
    );
    // Nothing secret is in what was published.
    let mut secrets = store_secrets(h);
    assert!(
        secrets.len() >= 4,
        "operator, relay and two personas: {secrets:?}"
    );
    secrets.extend(
        [
            OPERATOR_KEY,
            GITHUB_TOKEN,
            SSH_KEY,
            "the victim's private notes",
        ]
        .map(String::from),
    );
    for secret in &secrets {
        assert!(!report.contains(secret.as_str()), "published: {secret}");
    }
    // Its environment is its own: a home of its own, the provider key only as a placeholder.
    let env: Vec<&str> = report
        .lines()
        .filter_map(|l| l.strip_prefix("ENV "))
        .collect();
    assert!(
        !env.iter().any(|e| e.starts_with("GITHUB_TOKEN=")),
        "{env:?}"
    );
    let home_var = env.iter().find_map(|e| e.strip_prefix("HOME=")).unwrap();
    assert_ne!(Path::new(home_var), h);
    let key = env
        .iter()
        .find_map(|e| e.strip_prefix("ANTHROPIC_API_KEY="))
        .unwrap();
    assert!(key.starts_with("apiary-placeholder-"), "{key}");
    // Nothing was written outside.
    assert!(!s.root.join(".apiary/trust.json").exists());
    assert!(!h.join("escape.txt").exists());
    assert!(!s.root.join("planted.txt").exists());
    assert!(!Path::new(&escape_tmp).exists());
    // The proxy said why it refused, as events.
    up.wait_for(|l| l.starts_with("egress_refused eve example.com:443"));
    up.stop_ok();
}

/// Granted values (and keys, if an operator grants the key store itself) are replaced in a reply
/// before it is published, and reported: defence in depth behind the confinement.
#[test]
fn a_reply_carrying_a_granted_secret_or_a_store_key_is_published_redacted() {
    let s = scene();
    let h = s.home.path();
    if !confinable(h) {
        return;
    }
    let keys = data_dir(h).join("keys");
    grant(
        h,
        "com.example.hostile",
        &format!(
            "agent_env = [\"ANTHROPIC_API_KEY\", \"GITHUB_TOKEN\"]\nagent_read = [\"{}\"]",
            keys.display()
        ),
    );
    let mut up = Up::start(
        h,
        &[&h.join("victim"), &h.join("hostile")],
        &["--agent", hostile_agent(), "--json"],
        &[
            ("ANTHROPIC_API_KEY", OPERATOR_KEY),
            ("GITHUB_TOKEN", GITHUB_TOKEN),
        ],
    );
    up.wait_for(|l| event_of(l) == "persona_ready" && l.contains("\"eve\""));
    let operator = keys.join("operator.key");
    let id = up.post("general", &format!("@eve read={}", operator.display()), &[]);
    let line = up.wait_for(|l| event_of(l) == "redacted");
    let note: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(note["id"], id.as_str());
    let found = note["found"].to_string();
    assert!(
        found.contains("key store") && found.contains("granted"),
        "{found}"
    );
    let history = up.history("general");
    let reply = history
        .iter()
        .find(|e| {
            e["content"]
                .as_str()
                .is_some_and(|c| c.contains("ATTEMPT read"))
        })
        .expect("the reply was published");
    let text = reply["content"].as_str().unwrap();
    // The grant let it read the key: that is the operator's choice; publishing it is not.
    assert!(
        attempt(text, "read", &operator.display().to_string())
            .starts_with("OK [redacted by apiary]"),
        "{text}"
    );
    for secret in store_secrets(h)
        .iter()
        .map(String::as_str)
        .chain([GITHUB_TOKEN])
    {
        assert!(!text.contains(secret), "published: {secret}");
    }
    assert!(
        text.contains("ENV GITHUB_TOKEN=[redacted by apiary]"),
        "{text}"
    );
    up.stop_ok();
}

/// A sandboxed hook (no trust needed) writes runtime configuration into the workspace its agent
/// starts in: that agent is refused, naming the file; a persona whose hook writes ordinary files
/// starts; and configuration the operator put there and allowed (`agent_config`) is accepted.
#[test]
fn configuration_a_hook_plants_for_its_agent_stops_that_agent() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let pack = h.join("pack");
    let hooked = |name: &str| {
        persona(
            name,
            "subscribe: [\"general\"]\nhooks:\n  on_start: ./hooks/hostile.wasm",
            "You are a persona.",
        )
    };
    write_pack(
        &pack,
        "com.example.planting",
        &[("planter", &hooked("planter")), ("noisy", &hooked("noisy"))],
        &[],
    );
    std::fs::create_dir_all(pack.join("hooks")).unwrap();
    std::fs::copy(
        apiary_e2e::guest("hostile_hook"),
        pack.join("hooks/hostile.wasm"),
    )
    .unwrap();
    let mut up = Up::spawn(h, &[&pack], &["--json"], &[]);
    let line = up.wait_for(|l| event_of(l) == "persona_refused" && l.contains("planter"));
    let note: Value = serde_json::from_str(&line).unwrap();
    let reason = note["reason"].as_str().unwrap();
    assert!(
        reason.contains(".claude") && reason.contains("agent_config"),
        "{reason}"
    );
    up.wait_for(|l| event_of(l) == "persona_ready" && l.contains("\"noisy\""));
    up.stop_ok();

    // The operator's own instructions file, allowed: the agent starts with it.
    let ws = data_dir(h).join("workspaces/com.example.planting");
    let noisy = ws.join("noisy");
    std::fs::write(noisy.join("CLAUDE.md"), "The operator's notes.").unwrap();
    let mut up = Up::spawn(h, &[&pack], &["--json"], &[]);
    let line = up.wait_for(|l| event_of(l) == "persona_refused" && l.contains("noisy"));
    assert!(line.contains("CLAUDE.md"), "{line}");
    up.stop();
    grant(
        h,
        "com.example.planting",
        "[\"com.example.planting\".noisy]\nagent_config = [\"CLAUDE.md\"]",
    );
    let mut up = Up::spawn(h, &[&pack], &["--json"], &[]);
    up.wait_for(|l| event_of(l) == "persona_ready" && l.contains("\"noisy\""));
    up.stop_ok();
}

/// `apiary up` in a user namespace that may make no more namespaces: a machine where agents
/// cannot be confined (the network layer is missing). `None` when `unshare` is not available.
fn on_a_machine_without_namespaces(home: &Path, args: &[&str]) -> Option<apiary_e2e::Run> {
    let ok = std::process::Command::new("unshare")
        .args(["-Ur", "true"])
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        assert!(
            std::env::var_os("CI").is_none(),
            "unshare -Ur does not work here"
        );
        return None;
    }
    let template = apiary_e2e::apiary(home);
    let mut cmd = std::process::Command::new("unshare");
    cmd.args(["-Ur", "sh", "-c"])
        .arg(
            "echo 0 > /proc/sys/user/max_user_namespaces && echo 0 > /proc/sys/user/max_net_namespaces && exec \"$@\"",
        )
        .arg("sh")
        .arg(apiary_e2e::apiary_bin())
        .args(["up", "--listen", "127.0.0.1:0", "--json"])
        .args(args)
        .env_clear()
        .envs(template.get_envs().filter_map(|(k, v)| Some((k, v?))));
    Some(apiary_e2e::Run::killed_after(cmd, 20))
}

/// Where the kernel cannot confine, `up` refuses to start a runtime's agents and says what is
/// missing and what to do; `--unconfined-agents` starts them with what works, and says so on
/// every line that matters; the bundled agent starts there with a notice.
#[test]
fn where_agents_cannot_be_confined_up_refuses_unless_told() {
    let s = scene();
    let h = s.home.path();
    let victim = h.join("victim");
    let victim = victim.to_str().unwrap();
    let Some(run) = on_a_machine_without_namespaces(h, &[victim, "--agent", hostile_agent()])
    else {
        return;
    };
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    let text = format!("{}{}", run.stdout, run.stderr);
    assert!(text.contains("cannot confine agents"), "{text}");
    assert!(text.contains("--unconfined-agents"), "{text}");
    assert!(!text.contains("persona_ready"), "{text}");

    for args in [
        vec![victim, "--agent", hostile_agent(), "--unconfined-agents"],
        vec![victim],
    ] {
        let run = on_a_machine_without_namespaces(h, &args).unwrap();
        let confinement: Value = run
            .stdout
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|v| v["event"] == "confinement")
            .unwrap_or_else(|| panic!("{}\n{}", run.stdout, run.stderr));
        assert_eq!(confinement["complete"], false, "{confinement}");
        assert!(
            !confinement["layers"].as_str().unwrap().contains("network"),
            "{confinement}"
        );
        assert!(
            confinement["missing"]
                .as_str()
                .is_some_and(|m| !m.is_empty()),
            "{confinement}"
        );
        let ready = run
            .stdout
            .lines()
            .find(|l| l.contains("persona_ready"))
            .unwrap_or_else(|| panic!("{}\n{}", run.stdout, run.stderr));
        assert!(
            !ready.contains("\"confinement\":\"files,network,seccomp\""),
            "{ready}"
        );
    }
}
