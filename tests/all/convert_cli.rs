//! End-to-end: `apiary convert` and `apiary component add | list | remove` through the binary.
//! Detection order and refusals (fixtures written here), wrapper descent, `--list`, a third-party
//! converter (guests/test/converter-sample, `text -> text-upper`) added and used, chaining through
//! buzz-pack, output validation, and a hostile converter (guests/test/hostile-converter) contained:
//! every misbehaviour is a clear error, nothing is written to --out, the host exits normally.

use std::time::{Duration, Instant};

use apiary_e2e::{Operator, Run, guest, write_tree};
use serde_json::Value;

/// `files` written under `rel` in the operator's home; the directory as an argument.
fn tree(env: &Operator, rel: &str, files: &[(&str, &str)]) -> String {
    let dir = env.path(rel);
    std::fs::create_dir_all(&dir).unwrap();
    write_tree(&dir, files);
    dir.display().to_string()
}

/// `apiary component add <guest>`, which must succeed.
fn add(env: &Operator, wasm: &str) -> Run {
    let r = env.run(&["component", "add", &guest(wasm).display().to_string()]);
    assert_eq!(r.code, 0, "add {wasm}: {}{}", r.stdout, r.stderr);
    r
}

/// A target no converter writes: detection still runs and reports the format.
const NOWHERE: &str = "nowhere-format";

fn detected(env: &Operator, files: &[(&str, &str)]) -> Value {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let src = tree(env, &format!("d{n}"), files);
    let r = env.run(&["convert", &src, "--to", NOWHERE, "--json"]);
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    r.json()
}

#[test]
fn detection_follows_the_documented_order() {
    let env = Operator::new();
    let cases: &[(&[(&str, &str)], &str)] = &[
        (
            &[
                ("expert.toml", "[expert]\nname = \"x\"\n"),
                (".claude-plugin/plugin.json", "{}"),
                (".plugin/plugin.json", r#"{"personas": []}"#),
            ],
            "duduclaw-expert",
        ),
        (
            &[
                (".plugin/plugin.json", r#"{"name": "p", "personas": []}"#),
                (".claude-plugin/plugin.json", "{}"),
            ],
            "buzz-pack",
        ),
        (
            &[(".plugin/plugin.json", r#"{"name": "p"}"#)],
            "agent-plugins-draft",
        ),
        (
            &[
                (
                    "plugin.json",
                    r#"{"$schema": "https://agent-plugins.org/schemas/1.0.0/plugin.schema.json", "name": "p"}"#,
                ),
                (".claude-plugin/plugin.json", "{}"),
            ],
            "agent-plugins",
        ),
        (
            &[
                ("plugin.json", r#"{"name": "no schema"}"#),
                (".claude-plugin/plugin.json", r#"{"name": "c"}"#),
            ],
            "claude-plugin",
        ),
        (
            &[(".claude-plugin/marketplace.json", "{}")],
            "claude-marketplace",
        ),
        (
            &[
                (".codex-plugin/plugin.json", "{}"),
                ("gemini-extension.json", "{}"),
            ],
            "codex-plugin",
        ),
        (&[("gemini-extension.json", "{}")], "gemini-extension"),
        (
            &[("person.kdl", "person \"ada\"\n")],
            "agent-compose-package",
        ),
        (
            &[("core.kdl", "// the core roster\nroster \"core\" {\n}\n")],
            "agent-compose-package",
        ),
        (
            &[(
                "person.json",
                r#"{"format": "agent-compose.person-snapshot.v3", "schema_version": 3}"#,
            )],
            "agent-compose-snapshot",
        ),
        (
            &[("SKILL.md", "---\nname: s\ndescription: d\n---\nbody\n")],
            "claude-plugin",
        ),
        (
            &[("agents/reviewer.md", "---\nname: reviewer\n---\nbody\n")],
            "claude-plugin",
        ),
    ];
    for (files, want) in cases {
        let v = detected(&env, files);
        assert_eq!(v["source_format"], *want, "{files:?}: {v:#}");
        assert_eq!(v["detected_by"]["by"], "host-rule", "{v:#}");
        assert!(
            v["detected_by"]["evidence"]
                .as_str()
                .unwrap()
                .contains("found"),
            "{v:#}"
        );
        assert_eq!(v["ok"], false);
        assert!(!env.path(&format!("d.{NOWHERE}")).exists());
    }
}

#[test]
fn named_formats_are_converted_by_a_converter_that_reads_them_else_refused() {
    let env = Operator::new();
    let list = env.run(&["convert", "--list", "--json"]).json();
    let reads = |format: &str| {
        list["converters"].as_array().unwrap().iter().any(|c| {
            c["conversions"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p["source"] == format)
        })
    };
    for (format, file, what) in [
        (
            "codex-plugin",
            ".codex-plugin/plugin.json",
            "a Codex plugin",
        ),
        (
            "cursor-plugin",
            ".cursor-plugin/plugin.json",
            "a Cursor plugin",
        ),
        (
            "gemini-extension",
            "gemini-extension.json",
            "a Gemini CLI extension",
        ),
    ] {
        let src = tree(
            &env,
            format,
            &[(file, r#"{"name": "named-one", "version": "1.0.0"}"#)],
        );
        // A target nobody writes: detection names the format either way.
        let v = env
            .run(&["convert", &src, "--to", NOWHERE, "--json"])
            .json();
        assert_eq!(v["source_format"], format, "{v:#}");
        // Built-in converters may read these (converter-claude does); then that is the path.
        if reads(format) {
            continue;
        }
        let r = env.run(&["convert", &src, "--to", "buzz-pack"]);
        assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
        assert!(
            r.stderr.contains(what) && r.stderr.contains("cannot convert"),
            "{}",
            r.stderr
        );
        assert!(r.stderr.contains("nothing was written"), "{}", r.stderr);
    }
}

#[test]
fn unknown_input_is_refused_listing_what_was_found() {
    let env = Operator::new();
    let src = tree(
        &env,
        "mystery",
        &[
            ("notes.yaml", "a: 1\n"),
            ("docs/index.md", "# hi\n"),
            ("plugin.json", r#"{"name": "x"}"#),
            ("person.json", r#"{"format": "something-else"}"#),
        ],
    );
    let r = env.run(&["convert", &src, "--to", "buzz-pack", "--json"]);
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    let v = r.json();
    assert_eq!(v["error"]["code"], "detection", "{v:#}");
    let found: Vec<&str> = v["error"]["found"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap())
        .collect();
    for want in ["docs/", "notes.yaml", "plugin.json"] {
        assert!(found.contains(&want), "{want} not in {found:?}");
    }
    assert!(
        found.iter().any(|f| f.contains("no $schema")),
        "the near miss is named: {found:?}"
    );
    assert!(
        found.iter().any(|f| f.contains("person.json has no")),
        "{found:?}"
    );

    // People get the same list.
    let r = env.run(&["convert", &src, "--to", "buzz-pack"]);
    assert!(
        r.stderr.contains("cannot tell the input format"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("found:\n  docs/"), "{}", r.stderr);
    assert!(r.stderr.contains("--from"), "{}", r.stderr);
}

#[test]
fn broken_manifest_refuses_fail_closed() {
    let env = Operator::new();
    add(&env, "hostile_converter");
    // A hostile converter would claim this (mode file), but the host rule matched a broken
    // manifest first: no guessing.
    let src = tree(
        &env,
        "broken",
        &[
            (".plugin/plugin.json", "{ \"personas\": [ "),
            ("mode", "calm\n"),
        ],
    );
    let r = env.run(&["convert", &src, "--to", "hostile-out", "--json"]);
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    let v = r.json();
    assert_eq!(v["error"]["code"], "detection", "{v:#}");
    let msg = v["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains(".plugin/plugin.json is not valid JSON (line 1"),
        "{msg}"
    );
}

#[test]
fn a_single_wrapper_directory_is_descended_once() {
    let env = Operator::new();
    let src = tree(
        &env,
        "wrapped",
        &[
            ("plugin-main/.claude-plugin/plugin.json", r#"{"name": "c"}"#),
            (".DS_Store", ""),
        ],
    );
    let v = env
        .run(&["convert", &src, "--to", NOWHERE, "--json"])
        .json();
    assert_eq!(v["source_format"], "claude-plugin", "{v:#}");
    assert_eq!(v["detected_by"]["root"], "plugin-main", "{v:#}");

    // Only once: two levels of wrapping are refused, listing both levels.
    let src = tree(
        &env,
        "twice",
        &[("outer/inner/.claude-plugin/plugin.json", r#"{"name": "c"}"#)],
    );
    let v = env
        .run(&["convert", &src, "--to", NOWHERE, "--json"])
        .json();
    assert_eq!(v["error"]["code"], "detection", "{v:#}");
    let found = v["error"]["found"].to_string();
    assert!(
        found.contains("outer/") && found.contains("outer/inner/"),
        "{found}"
    );

    // Two directories are not a wrapper.
    let src = tree(
        &env,
        "two",
        &[
            ("a/.claude-plugin/plugin.json", r#"{"name": "c"}"#),
            ("b/x.txt", ""),
        ],
    );
    let v = env
        .run(&["convert", &src, "--to", NOWHERE, "--json"])
        .json();
    assert_eq!(v["error"]["code"], "detection", "{v:#}");
}

#[test]
fn list_shows_formats_and_added_converters() {
    let env = Operator::new();
    let r = env.run(&["convert", "--list", "--json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let v = r.json();
    let ids: Vec<&str> = v["formats"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["id"].as_str().unwrap())
        .collect();
    for id in [
        "buzz-pack",
        "agent-plugins",
        "agent-plugins-draft",
        "claude-plugin",
        "claude-marketplace",
        "duduclaw-expert",
        "agent-compose-package",
        "agent-compose-snapshot",
    ] {
        assert!(ids.contains(&id), "{id} missing from {ids:?}");
    }
    // The sample converter is a test component, never built in.
    let names = v["converters"].to_string();
    assert!(!names.contains("converter-sample"), "{names}");

    add(&env, "converter_sample");
    let v = env.run(&["convert", "--list", "--json"]).json();
    let sample = v["converters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "converter-sample")
        .unwrap_or_else(|| panic!("{v:#}"))
        .clone();
    assert_eq!(sample["origin"]["kind"], "added");
    assert_eq!(sample["conversions"][0]["source"], "text");
    assert_eq!(sample["conversions"][0]["target"], "text-upper");

    let r = env.run(&["convert", "--list"]);
    assert!(
        r.stdout.contains("converter-sample 0.1.0 (added from"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("text -> text-upper"), "{}", r.stdout);
    assert!(r.stdout.contains("Formats apiary detects:"), "{}", r.stdout);
}

#[test]
fn an_added_converter_is_used_end_to_end_then_removed() {
    let env = Operator::new();
    let r = env.run(&[
        "component",
        "add",
        &guest("converter_sample").display().to_string(),
        "--json",
    ]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let added = r.json();
    assert_eq!(added["component"]["name"], "converter-sample");
    assert_eq!(added["component"]["world"], "converter");
    assert_eq!(added["component"]["digest"].as_str().unwrap().len(), 64);
    assert!(env.path("data/components/converter-sample.wasm").is_file());
    assert!(env.path("data/components/registry.json").is_file());

    let v = env.run(&["component", "list", "--json"]).json();
    assert_eq!(v["components"][0]["name"], "converter-sample", "{v:#}");
    assert_eq!(v["components"][0]["ok"], true);

    let src = tree(
        &env,
        "notes",
        &[("a.txt", "hello bees\n"), ("b.txt", "quiet\n")],
    );
    let out = env.path("out-upper");
    let r = env.run(&[
        "convert",
        &src,
        "--from",
        "text",
        "--to",
        "text-upper",
        "--out",
        &out.display().to_string(),
        "--json",
    ]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let v = r.json();
    assert_eq!(v["ok"], true);
    assert_eq!(v["source_format"], "text");
    assert_eq!(v["detected_by"]["by"], "flag");
    assert_eq!(v["converters"][0]["name"], "converter-sample");
    assert_eq!(v["converters"][0]["origin"]["kind"], "added");
    assert_eq!(v["steps"][0]["source"], "text");
    assert_eq!(v["validation"]["checks"], "generic");
    let normalised = v["report"]["normalised"].as_array().unwrap();
    assert_eq!(normalised.len(), 2);
    assert_eq!(normalised[0]["code"], "case-folded");
    assert_eq!(normalised[0]["step"], 1);
    assert_eq!(
        std::fs::read_to_string(out.join("a.txt")).unwrap(),
        "HELLO BEES\n"
    );
    assert_eq!(
        std::fs::read_to_string(out.join("b.txt")).unwrap(),
        "QUIET\n"
    );

    // Without --from, the added converter's `detect` claims the input; default --out.
    let r = env.run(&["convert", &src, "--to", "text-upper"]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stdout.contains("claimed by converter-sample"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout
            .contains("normalised (2):\n  [case-folded] a.txt: text upper-cased"),
        "{}",
        r.stdout
    );
    assert!(env.path("notes.text-upper/a.txt").is_file());

    // A non-empty --out is refused, then replaced with --force.
    let r = env.run(&["convert", &src, "--to", "text-upper"]);
    assert_eq!(r.code, 1);
    assert!(
        r.stderr.contains("exists and is not empty; pass --force"),
        "{}",
        r.stderr
    );
    std::fs::write(env.path("notes.text-upper/stale"), "x").unwrap();
    let r = env.run(&["convert", &src, "--to", "text-upper", "--force"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(!env.path("notes.text-upper/stale").exists());

    let r = env.run(&["component", "remove", "converter-sample"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(!env.path("data/components/converter-sample.wasm").exists());
    let v = env.run(&["component", "list", "--json"]).json();
    assert_eq!(v["components"].as_array().unwrap().len(), 0);
    let r = env.run(&[
        "convert",
        &src,
        "--from",
        "text",
        "--to",
        "text-upper",
        "--force",
    ]);
    assert_eq!(r.code, 1);
    assert!(
        r.stderr.contains("no available converter reads text"),
        "{}",
        r.stderr
    );
    let r = env.run(&["component", "remove", "converter-sample"]);
    assert_eq!(r.code, 1);
    assert!(
        r.stderr.contains("no component named converter-sample"),
        "{}",
        r.stderr
    );
}

#[test]
fn component_add_refuses_what_is_not_a_converter() {
    let env = Operator::new();
    let r = env.run(&[
        "component",
        "add",
        &guest("hostile_hook").display().to_string(),
    ]);
    assert_eq!(r.code, 1);
    assert!(
        r.stderr
            .contains("is a hook component; only converter components"),
        "{}",
        r.stderr
    );

    let junk = env.path("junk.wasm");
    std::fs::write(&junk, b"not wasm at all").unwrap();
    let r = env.run(&["component", "add", &junk.display().to_string()]);
    assert_eq!(r.code, 1);
    assert!(
        r.stderr.contains("not a WebAssembly component"),
        "{}",
        r.stderr
    );

    // A component built against another WIT version is refused naming the supported range.
    let r = env.run(&[
        "component",
        "add",
        &guest("future_hook").display().to_string(),
    ]);
    assert_eq!(r.code, 1);
    assert!(
        r.stderr.contains("supported: apiary:plugin@0.2.x"),
        "{}",
        r.stderr
    );

    add(&env, "converter_sample");
    let r = env.run(&[
        "component",
        "add",
        &guest("converter_sample").display().to_string(),
    ]);
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("already added"), "{}", r.stderr);
    let r = env.run(&[
        "component",
        "add",
        &guest("converter_sample").display().to_string(),
        "--name",
        "Bad Name",
    ]);
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("not a usable name"), "{}", r.stderr);
    let v = env.run(&["component", "list", "--json"]).json();
    assert_eq!(v["components"].as_array().unwrap().len(), 1, "{v:#}");
}

#[test]
fn a_tampered_component_is_refused_on_load() {
    let env = Operator::new();
    add(&env, "converter_sample");
    // Swap the stored bytes for another (valid!) converter: the digest no longer matches.
    std::fs::copy(
        guest("hostile_converter"),
        env.path("data/components/converter-sample.wasm"),
    )
    .unwrap();
    let src = tree(&env, "notes", &[("a.txt", "hello\n")]);
    let r = env.run(&["convert", &src, "--from", "text", "--to", "text-upper"]);
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stderr.contains("does not match the digest recorded"),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr.contains("no available converter reads text"),
        "{}",
        r.stderr
    );
    assert!(!env.path("notes.text-upper").exists());

    let v = env.run(&["convert", "--list", "--json"]).json();
    assert!(
        v["unavailable"].to_string().contains("converter-sample"),
        "{v:#}"
    );
    let v = env.run(&["component", "list", "--json"]).json();
    assert_eq!(v["components"][0]["ok"], false, "{v:#}");
}

/// Runs the hostile converter in `mode` and checks it was contained: exit 1 (not a signal, not a
/// hang), the error kind, nothing at --out, nothing escaped.
fn contained(env: &Operator, mode: &str, target: &str, extra: &[&str]) -> Value {
    let src = tree(
        env,
        &format!("in-{mode}"),
        &[("mode", &format!("{mode}\n"))],
    );
    let out = env.path(&format!("out-{mode}"));
    let mut args = vec!["convert", &src, "--to", target, "--json"];
    let out_s = out.display().to_string();
    args.extend(["--out", &out_s]);
    args.extend(extra);
    let start = Instant::now();
    let r = env.run(&args);
    assert!(
        start.elapsed() < Duration::from_secs(90),
        "{mode} took {:?}",
        start.elapsed()
    );
    assert_eq!(r.code, 1, "{mode}: {}{}", r.stdout, r.stderr);
    let v = r.json();
    assert_eq!(v["ok"], false);
    assert_eq!(
        v["error"]["converter"], "hostile-converter",
        "{mode}: {v:#}"
    );
    assert!(!out.exists(), "{mode}: {} was written", out.display());
    assert!(!r.stdout.contains("ESCAPED"), "{mode}: {}", r.stdout);
    v
}

#[test]
fn a_hostile_converter_is_contained_and_reported() {
    let env = Operator::new();
    add(&env, "hostile_converter");
    std::fs::write(env.path("secret"), "top secret").unwrap();

    let v = contained(&env, "read-outside", "hostile-out", &[]);
    let msg = v["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("blocked:") && msg.contains("/input/../secret"),
        "{msg}"
    );

    let v = contained(&env, "write-outside", "hostile-out", &[]);
    assert!(
        v["error"]["message"].as_str().unwrap().contains("blocked:"),
        "{v:#}"
    );
    assert!(!env.path("x").exists());
    assert!(!env.path("in-write-outside/planted").exists());

    let v = contained(&env, "symlink-out", "hostile-out", &[]);
    assert_eq!(v["error"]["code"], "output", "{v:#}");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("symlink"),
        "{v:#}"
    );

    let v = contained(&env, "loop", "hostile-out", &["--timeout", "1"]);
    assert_eq!(v["error"]["sandbox_code"], "deadline", "{v:#}");

    let v = contained(&env, "flood-stdout", "hostile-out", &[]);
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("bytes dropped"),
        "{v:#}"
    );

    let v = contained(&env, "giant-report", "hostile-out", &[]);
    assert_eq!(v["error"]["sandbox_code"], "oversized", "{v:#}");

    let v = contained(&env, "giant-error", "hostile-out", &[]);
    assert_eq!(v["error"]["sandbox_code"], "oversized", "{v:#}");
    assert!(v["error"]["message"].as_str().unwrap().len() < 4200);

    // The host is still fine: the same converter, well-behaved, converts; terminal escapes in its
    // report are neutralised.
    let src = tree(&env, "in-calm", &[("mode", "calm\n")]);
    let r = env.run(&["convert", &src, "--to", "hostile-out"]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(!r.stdout.contains('\u{1b}'), "{:?}", r.stdout);
    assert!(env.path("in-calm.hostile-out/ok.txt").is_file());
}

#[test]
fn invalid_output_is_refused_by_validation() {
    let env = Operator::new();
    add(&env, "hostile_converter");
    let v = contained(&env, "invalid-pack", "buzz-pack", &[]);
    assert_eq!(v["error"]["code"], "validation", "{v:#}");
    let msg = v["error"]["message"].as_str().unwrap();
    assert!(
        msg.starts_with("hostile-converter wrote an invalid buzz-pack"),
        "{msg}"
    );
    assert_eq!(v["validation"]["checks"], "pack-validator");
    assert!(!v["validation"]["errors"].as_array().unwrap().is_empty());
}

#[test]
fn an_input_symlink_leaving_the_tree_is_refused_before_any_converter_runs() {
    let env = Operator::new();
    add(&env, "hostile_converter");
    std::fs::write(env.path("secret"), "top secret").unwrap();
    let src = tree(&env, "linked", &[("mode", "calm\n")]);
    std::os::unix::fs::symlink(env.path("secret"), env.path("linked/leak")).unwrap();
    let r = env.run(&["convert", &src, "--to", "hostile-out", "--json"]);
    assert_eq!(r.code, 1);
    let v = r.json();
    assert_eq!(v["error"]["code"], "input", "{v:#}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("pointing outside the input")
    );
    assert!(v["converters"].as_array().unwrap().is_empty());
}

#[test]
fn chains_through_buzz_pack_and_exits_2_on_losses() {
    let env = Operator::new();
    add(&env, "hostile_converter");
    // hostile -> buzz-pack (a valid pack) -> pack-listing: no converter does it directly.
    let src = tree(&env, "chain", &[("mode", "valid-pack\n")]);
    let r = env.run(&["convert", &src, "--to", "pack-listing", "--json"]);
    assert_eq!(r.code, 2, "{}{}", r.stdout, r.stderr);
    let v = r.json();
    assert_eq!(v["ok"], true);
    let steps = v["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 2, "{v:#}");
    assert_eq!(steps[0]["target"], "buzz-pack");
    assert_eq!(steps[1]["source"], "buzz-pack");
    assert_eq!(v["report"]["synthesised"][0]["step"], 1);
    assert_eq!(v["report"]["lost"][0]["step"], 2);
    let listing = std::fs::read_to_string(env.path("chain.pack-listing/listing.txt")).unwrap();
    assert!(listing.contains("agents/pip.persona.md"), "{listing}");

    // The same for people: each finding names its step.
    let r = env.run(&["convert", &src, "--to", "pack-listing", "--force"]);
    assert_eq!(r.code, 2);
    assert!(
        r.stdout
            .contains("step 1: hostile -> buzz-pack by hostile-converter"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains("lost (1):\n  step 2 [contents-dropped]"),
        "{}",
        r.stdout
    );

    // A direct, lossless conversion exits 0; a lossy one 2.
    let src = tree(&env, "lossy", &[("mode", "lossy\n")]);
    let r = env.run(&["convert", &src, "--to", "hostile-out"]);
    assert_eq!(r.code, 2, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stdout
            .contains("lost (1):\n  [no-slot] mode colour: the target has no place for a colour"),
        "{}",
        r.stdout
    );
}

#[test]
fn a_marketplace_gives_one_validated_pack_per_plugin_and_a_chain_needs_one() {
    let env = Operator::new();
    let list = env.run(&["convert", "--list", "--json"]).json();
    let reads_marketplace = list["converters"].as_array().unwrap().iter().any(|c| {
        c["conversions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["source"] == "claude-marketplace")
    });
    if !reads_marketplace {
        eprintln!("no built-in converter reads claude-marketplace yet; skipped");
        return;
    }
    let src = tree(
        &env,
        "market",
        &[
            (
                ".claude-plugin/marketplace.json",
                r#"{"name": "m", "owner": {"name": "o"}, "plugins": [
                    {"name": "alpha", "source": "./plugins/alpha", "description": "first"},
                    {"name": "beta", "source": "./plugins/beta", "description": "second"}]}"#,
            ),
            (
                "plugins/alpha/agents/ada.md",
                "---\nname: ada\ndescription: reviews code\n---\nYou review code.\n",
            ),
            (
                "plugins/beta/agents/bob.md",
                "---\nname: bob\ndescription: writes docs\n---\nYou write docs.\n",
            ),
        ],
    );
    let r = env.run(&["convert", &src, "--to", "buzz-pack", "--json"]);
    assert!(r.code == 0 || r.code == 2, "{}{}", r.stdout, r.stderr);
    assert!(
        env.path("market.buzz-pack/alpha/.plugin/plugin.json")
            .is_file()
    );
    assert!(
        env.path("market.buzz-pack/beta/.plugin/plugin.json")
            .is_file()
    );

    // A chain carries one pack on: the operator picks the plugin.
    let r = env.run(&["convert", &src, "--to", "hostile-out", "--json"]);
    assert_eq!(r.code, 1);
    let r = env.run(&["convert", &src, "--to", "pack-listing", "--json"]);
    assert_eq!(r.code, 1, "{}", r.stdout);
    add(&env, "hostile_converter");
    let v = env
        .run(&["convert", &src, "--to", "pack-listing", "--json"])
        .json();
    assert_eq!(v["error"]["code"], "output", "{v:#}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--option plugin=NAME"),
        "{v:#}"
    );
    let r = env.run(&[
        "convert",
        &src,
        "--to",
        "pack-listing",
        "--option",
        "plugin=beta",
    ]);
    assert_eq!(r.code, 2, "{}{}", r.stdout, r.stderr);
    let listing = std::fs::read_to_string(env.path("market.pack-listing/listing.txt")).unwrap();
    assert!(listing.contains("bob"), "{listing}");
    assert!(!listing.contains("ada"), "{listing}");
}

/// `apiary convert` asks each converter for its `info` once per component digest: the answer is
/// kept beside the compile cache (`converter-info-<digest>.json`) and read back by the next
/// process instead of instantiating every converter again. A file that does not read back as a
/// valid answer is ignored, the converter asked again and the file rewritten.
#[test]
fn converter_info_is_cached_by_digest() {
    let env = Operator::new();
    // A cache of our own, seeded with the compiled built-ins (keyed by digest, so reusable).
    let cache = tempfile::tempdir().unwrap();
    let components = cache.path().join("apiary/components");
    std::fs::create_dir_all(&components).unwrap();
    let shared = apiary_e2e::repo_root().join("target/tmp/component-cache/apiary/components");
    for e in std::fs::read_dir(&shared).unwrap().flatten() {
        if e.path().extension().is_some_and(|x| x == "cwasm") {
            std::fs::copy(e.path(), components.join(e.file_name())).unwrap();
        }
    }
    let list = || {
        let mut cmd = env.command();
        cmd.env("XDG_CACHE_HOME", cache.path())
            .args(["convert", "--list", "--json"]);
        let r = Run::of(cmd);
        assert_eq!(r.code, 0, "{}", r.stderr);
        r.json()
    };
    let infos = || -> Vec<std::path::PathBuf> {
        let mut v: Vec<_> = std::fs::read_dir(&components)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with("converter-info-")
            })
            .collect();
        v.sort();
        v
    };
    let first = list();
    let converters = first["converters"].as_array().unwrap().len();
    assert_eq!(infos().len(), converters, "one answer per converter digest");

    // The next process takes the answers from the files: an edited one shows.
    let claude = first["converters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "converter-claude")
        .unwrap();
    let digest = claude["digest"].as_str().unwrap();
    let file = components.join(format!("converter-info-{digest}.json"));
    let mut known: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    known[1]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!(["buzz-pack", "zz-from-the-cache"]));
    std::fs::write(&file, known.to_string()).unwrap();
    let edited = list();
    assert!(
        edited.to_string().contains("zz-from-the-cache"),
        "{edited:#}"
    );

    // Unreadable or invalid answers are ignored: the converters are asked again.
    for (n, f) in infos().iter().enumerate() {
        let bad = if n % 2 == 0 {
            "{".to_string()
        } else {
            r#"["1", [["Not A Format", "buzz-pack"]]]"#.to_string()
        };
        std::fs::write(f, bad).unwrap();
    }
    let again = list();
    assert_eq!(again["converters"], first["converters"]);
    for f in infos() {
        let text = std::fs::read_to_string(&f).unwrap();
        assert!(serde_json::from_str::<Value>(&text).is_ok(), "{text}");
    }
}
