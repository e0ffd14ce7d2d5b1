//! Issue 17, finding 5: a panic in one persona's path never ends the harness. A hook runner that
//! panics where the dispatcher calls it (on the async side and on the blocking side, at start-up
//! and during a turn) stands in for any host bug on that path: the persona concerned is refused
//! or its message reported, the other personas and later messages are served, and the harness
//! stops cleanly.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use apiary::acp::{AgentCommand, PermissionPolicy};
use apiary::dispatch::{self, HookPoint, HookRunner, NativeTriggers, Note, PackRun};
use apiary::relay::Message;
use apiary::resolve::ResolvedPersona;
use nostr_sdk::prelude::*;

/// Panics on purpose: `fragile`'s `on_start` while the dispatcher asks for its deadline (async
/// side), `brittle`'s `on_start` while running it (blocking side), every second `on_message`
/// deadline asked for (inside a turn), and any `on_message` of a text saying `boom`.
#[derive(Default)]
struct Panicky {
    message_deadlines: AtomicUsize,
}

impl HookRunner for Panicky {
    fn run(
        &self,
        point: HookPoint,
        _pack_id: &str,
        persona: &ResolvedPersona,
        _workspace: &Path,
        message: Option<&Message>,
    ) -> Result<(), dispatch::HookError> {
        if point == HookPoint::OnStart && persona.identity.name == "brittle" {
            panic!("brittle on_start");
        }
        if message.is_some_and(|m| m.content.contains("boom")) {
            panic!("on_message boom");
        }
        Ok(())
    }

    fn deadline(&self, point: HookPoint, persona: &ResolvedPersona) -> Duration {
        if point == HookPoint::OnStart && persona.identity.name == "fragile" {
            panic!("fragile deadline");
        }
        if point == HookPoint::OnMessage
            && self.message_deadlines.fetch_add(1, Ordering::SeqCst) == 1
        {
            panic!("second on_message deadline");
        }
        Duration::from_secs(5)
    }
}

fn write_pack(root: &Path) {
    let mut personas = Vec::new();
    for (name, hook) in [
        ("bee", "on_message"),
        ("fragile", "on_start"),
        ("brittle", "on_start"),
    ] {
        let rel = format!("agents/{name}.persona.md");
        let path = root.join(&rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(
            &path,
            format!(
                "---\nname: {name}\ndisplay_name: {name}\ndescription: test\nruntime: apiary-agent\nsubscribe: [\"general\"]\nhooks:\n  {hook}: ./hooks/h.sh\n---\nYou are {name}.\n"
            ),
        )
        .unwrap();
        personas.push(format!("\"{rel}\""));
    }
    std::fs::create_dir_all(root.join("hooks")).unwrap();
    std::fs::write(root.join("hooks/h.sh"), "#!/bin/sh\n").unwrap();
    std::fs::create_dir_all(root.join(".plugin")).unwrap();
    std::fs::write(
        root.join(".plugin/plugin.json"),
        format!(
            "{{\"id\": \"test.panics\", \"name\": \"Panics\", \"version\": \"1.0.0\", \"personas\": [{}]}}",
            personas.join(",")
        ),
    )
    .unwrap();
}

/// The harness's notes as they come, with bounded waits.
struct Notes(std::sync::mpsc::Receiver<Note>, Vec<Note>);

impl Notes {
    fn wait(&mut self, what: &str, pred: impl Fn(&Note) -> bool) -> Note {
        if let Some(n) = self.1.iter().find(|n| pred(n)) {
            return n.clone();
        }
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.0.recv_timeout(left) {
                Ok(n) => {
                    self.1.push(n.clone());
                    if pred(&n) {
                        return n;
                    }
                }
                Err(_) => panic!(
                    "no {what}; notes so far:\n{}",
                    self.1.iter().map(Note::json).collect::<Vec<_>>().join("\n")
                ),
            }
        }
    }
}

fn is(n: &Note, event: &str, key: &str, value: &str) -> bool {
    n.event.kind() == event && field(n, key).as_deref() == Some(value)
}

#[test]
fn a_panic_in_one_personas_path_is_reported_and_the_rest_runs_on() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("pack");
    write_pack(&root);
    let loaded = apiary::pack::load(&root);
    let pack = loaded.pack.expect("the test pack loads");
    let resolved =
        apiary::resolve::resolve(&pack, &apiary::resolve::Overrides::default(), &|_: &str| {
            None
        });
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let relay = rt
        .block_on(apiary::relay::embedded::Embedded::start(
            "127.0.0.1:0".parse().unwrap(),
            None,
        ))
        .unwrap();
    let config = dispatch::Config {
        relay: dispatch::RelayLink::InProcess {
            url: relay.url.clone(),
            door: Box::new(relay.door()),
        },
        agent: AgentCommand {
            program: agent_bin(),
            args: vec![],
        },
        agent_nice: 0,
        publish: true,
        policy: PermissionPolicy::Deny,
        idle_timeout: Duration::from_secs(60),
        turn_timeout: Duration::from_secs(60),
        drain_timeout: Duration::from_secs(5),
        workspace_root: tmp.path().join("ws"),
        keys: apiary::relay::keys::KeyStore::new(tmp.path().join("keys")),
        base_prompt: None,
        channel_authority: Default::default(),
        limits: dispatch::TurnLimits::default(),
        cluster: Default::default(),
        sessions_dir: None,
        persona_limits: Default::default(),
        confinement: apiary::dispatch::confine::Confinement::none("not confined in this test"),
        private_dirs: Vec::new(),
        desk: None,
        agent_tools: false,
        hop_limit: 0,
    };
    let (tx, rx) = std::sync::mpsc::channel::<Note>();
    let out: dispatch::Out = Arc::new(move |n: Note| {
        let _ = tx.send(n);
    });
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let harness = rt.spawn(dispatch::run(
        config,
        vec![PackRun {
            namespace: pack.manifest.id.clone(),
            pack,
            resolved,
        }],
        Arc::new(NativeTriggers),
        Arc::new(Panicky::default()),
        out,
        async move {
            let _ = stop_rx.await;
        },
    ));
    let mut notes = Notes(rx, Vec::new());
    for (name, panic) in [
        ("fragile", "fragile deadline"),
        ("brittle", "brittle on_start"),
    ] {
        let refused = notes.wait("refusal", |n| is(n, "persona_refused", "persona", name));
        let reason = field(&refused, "reason").unwrap();
        assert!(reason.contains(panic), "{reason}");
    }
    notes.wait("ready", |n| n.event.kind() == "ready");

    let author = Keys::generate();
    let client = rt
        .block_on(apiary::relay::connect_as(
            &relay.url,
            Duration::from_secs(10),
            Some(author.clone()),
        ))
        .unwrap();
    let post = |text: &str| {
        let ev = apiary::relay::message(&author, "general", text, vec![]).unwrap();
        rt.block_on(client.send_event(&ev)).unwrap();
        ev.id.to_hex()
    };
    let one = post("@bee one");
    notes.wait("reply to one", |n| is(n, "reply", "to", &one));
    // The second on_message deadline panics inside the turn: an error for bee, agent restarted.
    let two = post("@bee two");
    let error = notes.wait("error for two", |n| {
        is(n, "error", "persona", "bee")
            && field(n, "reason").is_some_and(|r| r.contains("second on_message deadline"))
    });
    assert!(error.text.unwrap().starts_with("error bee"));
    notes.wait("restart", |n| is(n, "restarted", "persona", "bee"));
    // A panic in the hook itself (blocking side) drops that message, saying why.
    let three = post("@bee boom");
    let dropped = notes.wait("drop of three", |n| is(n, "dropped", "id", &three));
    let reason = field(&dropped, "reason").unwrap();
    assert!(reason.contains("on_message boom"), "{reason}");
    // And bee still answers.
    let four = post("@bee four");
    notes.wait("reply to four", |n| is(n, "reply", "to", &four));
    assert!(!notes.1.iter().any(|n| is(n, "reply", "to", &two)));

    let _ = stop_tx.send(());
    let summary = rt.block_on(harness).unwrap().unwrap();
    assert_eq!(summary.started, 1);
    assert_eq!(summary.refused, 2);
    rt.block_on(apiary::relay::shutdown(&client));
    relay.shutdown();
    rt.shutdown_timeout(Duration::from_secs(2));
}

/// The `apiary-agent` binary of this build (a workspace member of its own, so cargo does not hand its
/// path to this crate's tests): target/<profile>/deps/<test> -> target/<profile>/apiary-agent.
fn agent_bin() -> std::path::PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    let bin = exe
        .parent()
        .and_then(std::path::Path::parent)
        .expect("target profile dir")
        .join(format!("apiary-agent{}", std::env::consts::EXE_SUFFIX));
    assert!(
        bin.is_file(),
        "{} is missing: run the tests with `cargo test --workspace`",
        bin.display()
    );
    bin
}

/// A string key of the note's event, as its JSON line has it.
fn field(n: &Note, key: &str) -> Option<String> {
    let line = serde_json::to_value(&n.event).ok()?;
    line.get(key)?.as_str().map(str::to_string)
}
