//! End-to-end: the sandbox through the `apiary` binary. `component inspect`, `hook run` (wasm
//! hooks sandboxed in the persona workspace, script hooks only with --trust-hooks, hostile hooks
//! contained with a message saying what happened) and `trigger test`.

use std::path::{Path, PathBuf};

use apiary_e2e::{Run, apiary, guest, run, write_tree};

struct Env {
    home: tempfile::TempDir,
}

impl Env {
    fn new() -> Env {
        Env {
            home: tempfile::tempdir().unwrap(),
        }
    }

    fn home(&self) -> &Path {
        self.home.path()
    }

    fn run(&self, args: &[&str]) -> Run {
        run(self.home(), args)
    }

    fn workspaces(&self) -> PathBuf {
        self.home().join("ws")
    }
}

const MANIFEST: &str = r#"{
  "id": "com.example.hive",
  "name": "Hive",
  "version": "1.0.0",
  "description": "sandbox test pack",
  "personas": ["agents/pip.persona.md", "agents/lep.persona.md", "agents/berry.persona.md"]
}"#;

/// pip: mentions in #general; lep: keywords in #security; berry: all messages in #random, no
/// mentions. Hooks: pack `on_message` is the audit component; pack `on_start` is a script; lep's
/// `on_message` is the hostile component.
fn pack(dir: &Path) {
    write_tree(
        dir,
        &[
            (".plugin/plugin.json", MANIFEST),
            (
                "agents/pip.persona.md",
                "---\nname: pip\ndisplay_name: Pip\ndescription: orchestrator\nsubscribe: [\"#general\"]\n---\nYou are Pip.\n",
            ),
            (
                "agents/lep.persona.md",
                "---\nname: lep\ndisplay_name: Lep\ndescription: security\nsubscribe: [\"#security\"]\ntriggers:\n  keywords: [\"CVE\", \"vulnerability\"]\nhooks:\n  on_message: ./hooks/hostile.wasm\n---\nYou are Lep.\n",
            ),
            (
                "agents/berry.persona.md",
                "---\nname: berry\ndisplay_name: Berry\ndescription: watcher\nsubscribe: [\"random\"]\ntriggers:\n  mentions: false\n  all_messages: true\n---\nYou are Berry.\n",
            ),
            (
                "hooks/hooks.json",
                r#"{ "on_start": "./hooks/setup.sh", "on_message": "./hooks/audit.wasm" }"#,
            ),
            ("hooks/setup.sh", "#!/bin/sh\necho started > started.txt\n"),
        ],
    );
    std::fs::copy(guest("hook_audit"), dir.join("hooks/audit.wasm")).unwrap();
    std::fs::copy(guest("hostile_hook"), dir.join("hooks/hostile.wasm")).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(
            dir.join("hooks/setup.sh"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
    }
}

#[test]
fn component_inspect_shows_world_version_imports_and_caches_owner_only() {
    let env = Env::new();
    let file = guest("hook_audit");
    let r = env.run(&["component", "inspect", file.to_str().unwrap(), "--json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let v = r.json();
    assert_eq!(v["world"], "hook");
    assert_eq!(v["wit_version"], "0.2.0");
    assert_eq!(v["size"], std::fs::metadata(&file).unwrap().len());
    let imports: Vec<&str> = v["imports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i.as_str().unwrap())
        .collect();
    assert!(imports.contains(&"apiary:plugin/host@0.2.0"), "{imports:?}");
    assert!(
        imports
            .iter()
            .any(|i| i.starts_with("wasi:filesystem/preopens@")),
        "{imports:?}"
    );
    assert!(v["compile_ms"].as_f64().unwrap() > 0.0);
    assert!(v["cached_load_ms"].as_f64().unwrap() > 0.0);

    // The cache lives under XDG_CACHE_HOME, owner-only.
    let cache = env.home().join(".cache/apiary/components");
    assert_eq!(v["cache_dir"], cache.to_str().unwrap());
    let entries: Vec<_> = std::fs::read_dir(&cache)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert!(
        entries[0]
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with(v["sha256"].as_str().unwrap())
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&entries[0]), 0o600);
        assert_eq!(mode(&cache), 0o700);
    }

    // Human output names the same facts.
    let r = env.run(&["component", "inspect", file.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout.contains("world        hook (apiary:plugin@0.2.0)"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("cached load"), "{}", r.stdout);

    // A precompiled artifact, even apiary's own, is refused as input.
    let r = env.run(&["component", "inspect", entries[0].to_str().unwrap()]);
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("precompiled native code"), "{}", r.stderr);
}

#[test]
fn wasm_profile_perfmap_names_guest_functions_for_perf() {
    let env = Env::new();
    let file = guest("hook_audit");
    let child = apiary(env.home())
        .args(["component", "inspect", file.to_str().unwrap(), "--json"])
        .env("APIARY_WASM_PROFILE", "perfmap")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let map = PathBuf::from(format!("/tmp/perf-{}.map", child.id()));
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&map).unwrap_or_default();
    let _ = std::fs::remove_file(&map);
    assert!(
        text.lines().any(|l| l.contains("wasm[")),
        "{} has no guest functions: {text:?}",
        map.display()
    );
}

#[test]
fn component_inspect_refuses_another_wit_version_naming_the_range() {
    let env = Env::new();
    let r = env.run(&[
        "component",
        "inspect",
        guest("future_hook").to_str().unwrap(),
    ]);
    assert_eq!(r.code, 1, "{}", r.stdout);
    assert!(
        r.stderr.contains("built against apiary:plugin@0.3.0"),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr
            .contains("supported: apiary:plugin@0.2.x (>=0.2.0, <0.3.0)"),
        "{}",
        r.stderr
    );
    let r = env.run(&[
        "component",
        "inspect",
        guest("future_hook").to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(r.json()["error"]["code"], "unsupported-version");
}

#[test]
fn component_inspect_refuses_core_modules_and_garbage() {
    let env = Env::new();
    let core = env.home().join("core.wasm");
    std::fs::write(&core, [0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00]).unwrap();
    let r = env.run(&["component", "inspect", core.to_str().unwrap()]);
    assert_eq!(r.code, 1);
    assert!(
        r.stderr
            .contains("core WebAssembly module, not a component"),
        "{}",
        r.stderr
    );
    let junk = env.home().join("junk.wasm");
    std::fs::write(&junk, "definitely not wasm").unwrap();
    let r = env.run(&["component", "inspect", junk.to_str().unwrap()]);
    assert_eq!(r.code, 1);
    assert!(
        r.stderr.contains("not a WebAssembly component"),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains("panicked"), "{}", r.stderr);
}

#[test]
fn wasm_hook_appends_to_the_persona_workspace() {
    let env = Env::new();
    let dir = env.home().join("pack");
    pack(&dir);
    let ws_root = env.workspaces();
    for text in ["first message", "second\tmessage"] {
        let r = env.run(&[
            "hook",
            "run",
            dir.to_str().unwrap(),
            "pip",
            "on_message",
            "--message",
            text,
            "--channel",
            "#general",
            "--workspace-root",
            ws_root.to_str().unwrap(),
        ]);
        assert_eq!(r.code, 0, "{}", r.stderr);
        assert!(r.stderr.contains("succeeded"), "{}", r.stderr);
    }
    let log = std::fs::read_to_string(ws_root.join("com.example.hive/pip/audit.log")).unwrap();
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(lines.len(), 2, "{log}");
    assert!(lines[0].starts_with("pip\t"), "{log}");
    assert!(
        lines[0].ends_with("\tgeneral\t-\toperator\tfirst message"),
        "{log}"
    );
    assert!(
        lines[1].ends_with("\tsecond message"),
        "tabs in the text are flattened: {log}"
    );
    // Nothing was written outside the workspace.
    assert!(!dir.join("audit.log").exists());
}

#[test]
fn script_hook_runs_only_with_trust_hooks() {
    let env = Env::new();
    let dir = env.home().join("pack");
    pack(&dir);
    let ws = env.workspaces();
    let args = |trust: bool| {
        let mut a = vec![
            "hook".to_string(),
            "run".into(),
            dir.to_str().unwrap().into(),
            "pip".into(),
            "on_start".into(),
            "--workspace-root".into(),
            ws.to_str().unwrap().into(),
        ];
        if trust {
            a.push("--trust-hooks".into());
        }
        a
    };
    let started = ws.join("com.example.hive/pip/started.txt");
    let untrusted: Vec<String> = args(false);
    let r = env.run(&untrusted.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("pass --trust-hooks"), "{}", r.stderr);
    assert!(!started.exists(), "an untrusted script must not run");

    let trusted = args(true);
    let r = env.run(&trusted.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(std::fs::read_to_string(&started).unwrap(), "started\n");
}

#[test]
fn persona_without_the_hook_has_nothing_to_run() {
    let env = Env::new();
    let dir = env.home().join("pack");
    pack(&dir);
    let r = env.run(&[
        "hook",
        "run",
        dir.to_str().unwrap(),
        "pip",
        "on_stop",
        "--json",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.json()["ran"], false);
    let r = env.run(&["hook", "run", dir.to_str().unwrap(), "nobody", "on_stop"]);
    assert_eq!(r.code, 1);
    assert!(
        r.stderr
            .contains("no persona `nobody` (it has: pip, lep, berry)"),
        "{}",
        r.stderr
    );
    let r = env.run(&["hook", "run", dir.to_str().unwrap(), "pip", "on_lunch"]);
    assert_eq!(r.code, 64, "{}", r.stderr);
}

/// lep's on_message hook is the hostile component; its message text picks the misbehaviour.
fn hostile(env: &Env, dir: &Path, text: &str) -> Run {
    env.run(&[
        "hook",
        "run",
        dir.to_str().unwrap(),
        "lep",
        "on_message",
        "--message",
        text,
        "--workspace-root",
        env.workspaces().to_str().unwrap(),
        "--json",
    ])
}

#[test]
fn hostile_hooks_are_contained_and_the_error_says_what_happened() {
    let env = Env::new();
    let dir = env.home().join("pack");
    pack(&dir);
    let cases = [
        ("loop", "deadline", "exceeded its deadline of 5000 ms"),
        ("alloc", "memory-cap", "exceeded its memory cap of 64 MiB"),
        ("recurse", "stack-overflow", "overflowed its stack"),
        ("panic", "trap", "hostile hook panicked on purpose"),
        ("giant", "oversized", "over the 65536-byte cap"),
        ("escape-absolute", "guest-error", "blocked: /etc/passwd"),
        (
            "escape-dotdot",
            "guest-error",
            "blocked: /workspace/../secret.txt",
        ),
        ("env", "guest-error", "blocked: no environment variables"),
    ];
    for (text, kind, says) in cases {
        let r = hostile(&env, &dir, text);
        assert_eq!(r.code, 1, "{text}: {}", r.stdout);
        let v = r.json();
        assert_eq!(v["ok"], false, "{text}");
        assert_eq!(v["error"]["code"], kind, "{text}: {v}");
        let message = v["error"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{text}: {message}");
        assert!(!message.contains("ESCAPED"), "{text}: {message}");
    }
    // The flood is not a failure: output is truncated, the call completes.
    let r = hostile(&env, &dir, "flood");
    assert_eq!(r.code, 0, "{}", r.stdout);
    assert_eq!(r.json()["stdout"].as_str().unwrap().len(), 64 << 10);
    assert!(r.stderr.contains("bytes were dropped"), "{}", r.stderr);
}

fn trigger(env: &Env, dir: &Path, message: &str) -> serde_json::Value {
    let r = env.run(&[
        "trigger",
        "test",
        dir.to_str().unwrap(),
        "--message",
        message,
        "--json",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    r.json()
}

fn reasons(v: &serde_json::Value) -> Vec<(String, bool, String)> {
    v["personas"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["name"].as_str().unwrap().to_string(),
                p["wake"].as_bool().unwrap(),
                p["why"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn trigger_test_says_who_wakes_and_why() {
    let env = Env::new();
    let dir = env.home().join("pack");
    pack(&dir);
    let v = trigger(
        &env,
        &dir,
        r##"{"text": "Found a cve in the parser", "channel": "#security"}"##,
    );
    assert_eq!(v["matcher"], "trigger-default (built in)");
    assert_eq!(
        reasons(&v),
        [
            ("pip".into(), false, "channel not subscribed".into()),
            ("lep".into(), true, "keyword \"CVE\"".into()),
            ("berry".into(), false, "channel not subscribed".into()),
        ]
    );
    // A mention wakes in any channel; all_messages wakes in a subscribed channel; berry has
    // mentions off, so @berry alone would not wake it elsewhere.
    let v = trigger(
        &env,
        &dir,
        r#"{"text": "hey @PIP and @berry, look", "channel": "random"}"#,
    );
    assert_eq!(v["woken"], serde_json::json!(["pip", "berry"]));
    assert_eq!(reasons(&v)[0].2, "mentioned");
    assert_eq!(reasons(&v)[2].2, "all_messages");
    let v = trigger(
        &env,
        &dir,
        r#"{"text": "@berry ping", "channel": "general"}"#,
    );
    assert_eq!(v["woken"], serde_json::json!([]));
    assert_eq!(reasons(&v)[0].2, "no trigger matched");
    // Explicit mention list (the relay's p tags).
    let v = trigger(
        &env,
        &dir,
        r#"{"text": "ping", "channel": "ops", "mentions": ["lep"]}"#,
    );
    assert_eq!(v["woken"], serde_json::json!(["lep"]));
    // A mention qualified by the pack id (as `up` tells two packs' personas of one name apart).
    let v = trigger(
        &env,
        &dir,
        r#"{"text": "@com.example.hive/lep ping, @com.example.other/pip", "channel": "ops"}"#,
    );
    assert_eq!(v["woken"], serde_json::json!(["lep"]));
    // Human output.
    let r = env.run(&[
        "trigger",
        "test",
        dir.to_str().unwrap(),
        "--message",
        r#"{"text": "a VULNERABILITY", "channel": "security"}"#,
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout
            .contains("✓ lep    wakes: keyword \"vulnerability\""),
        "{}",
        r.stdout
    );
    assert!(
        r.stderr.contains("1 of 3 personas would wake"),
        "{}",
        r.stderr
    );
}

#[test]
fn trigger_test_with_a_custom_matcher_and_bad_input() {
    let env = Env::new();
    let dir = env.home().join("pack");
    pack(&dir);
    let r = env.run(&[
        "trigger",
        "test",
        dir.to_str().unwrap(),
        "--message",
        "not json",
    ]);
    assert_eq!(r.code, 64);
    assert!(
        r.stderr.contains("--message is not a valid message"),
        "{}",
        r.stderr
    );
    // A misbehaving matcher: its answers are refused, nobody wakes, exit 1.
    let r = env.run(&[
        "trigger",
        "test",
        dir.to_str().unwrap(),
        "--message",
        r#"{"text": "hi"}"#,
        "--matcher",
        guest("hostile_trigger").to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    let v = r.json();
    assert_eq!(v["woken"], serde_json::json!([]));
    assert_eq!(v["personas"][0]["error"]["code"], "invalid-answer");
    // A hook component is not a matcher.
    let r = env.run(&[
        "trigger",
        "test",
        dir.to_str().unwrap(),
        "--message",
        r#"{"text": "hi"}"#,
        "--matcher",
        guest("hook_audit").to_str().unwrap(),
    ]);
    assert_eq!(r.code, 1);
    assert!(
        r.stderr
            .contains("is a hook component, but a trigger component is needed"),
        "{}",
        r.stderr
    );
}

/// `hook run` of a directory declaring an installed pack's id (an impostor) runs its hooks in a
/// workspace of its own, never the installed personas' (issue 17, finding 8).
#[test]
fn hook_run_of_an_impostor_never_gets_the_installed_personas_workspace() {
    let env = Env::new();
    let genuine = env.home().join("genuine");
    pack(&genuine);
    let out = env.home().join("out");
    std::fs::create_dir_all(&out).unwrap();
    let r = env.run(&[
        "pack",
        "build",
        "--json",
        "--output",
        out.to_str().unwrap(),
        genuine.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let archive = r.json()["build"]["archive"].as_str().unwrap().to_string();
    let r = env.run(&["install", "--json", &archive]);
    assert_eq!(r.code, 0, "{}", r.stdout);
    let installed = env.home().join(".buzz/packs/com.example.hive");
    let ws = env.workspaces();
    let hook = |dir: &Path, text: &str| {
        env.run(&[
            "hook",
            "run",
            dir.to_str().unwrap(),
            "pip",
            "on_message",
            "--message",
            text,
            "--workspace-root",
            ws.to_str().unwrap(),
        ])
    };
    let r = hook(&installed, "genuine");
    assert_eq!(r.code, 0, "{}", r.stderr);
    let genuine_log = ws.join("com.example.hive/pip/audit.log");
    let before = std::fs::read_to_string(&genuine_log).unwrap();

    let impostor = env.home().join("impostor");
    pack(&impostor);
    let r = hook(&impostor, "impostor");
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains("workspaces of their own"), "{}", r.stderr);
    assert_eq!(std::fs::read_to_string(&genuine_log).unwrap(), before);
    let own: Vec<_> = std::fs::read_dir(&ws)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("com.example.hive@"))
        .collect();
    assert_eq!(own.len(), 1, "{own:?}");
    let log = std::fs::read_to_string(ws.join(&own[0]).join("pip/audit.log")).unwrap();
    assert!(log.contains("impostor"), "{log}");
}
