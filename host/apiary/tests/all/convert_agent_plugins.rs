//! The Agent Plugins 1.0 (Open Plugin Spec) converter component, end to end through the sandbox:
//! persona pack -> plugin (checked by hand against the OPS 1.0 schemas), plugin -> persona pack
//! (checked with `apiary pack validate`), round trips compared through `apiary pack inspect
//! --json`, the April 2026 draft as input, the corpus, and hostile inputs.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use apiary::builtin::BUILT_GUESTS_DIR;
use apiary::sandbox::Sandbox;
use apiary::sandbox::converter::{ConverterRunner, Report, Request};
use serde_json::{Value, json};

const NS: &str = "dev.apiary.persona-pack";
const PLUGIN_SCHEMA: &str = "https://agent-plugins.org/schemas/1.0.0/plugin.schema.json";
const MCP_SCHEMA: &str = "https://agent-plugins.org/schemas/1.0.0/mcp.schema.json";

/// The shared test sandbox: refusals are answers, so they do not trip its circuit breaker.
fn sandbox() -> &'static Sandbox {
    common::sandbox()
}

fn runner() -> &'static ConverterRunner {
    static R: OnceLock<ConverterRunner> = OnceLock::new();
    R.get_or_init(|| {
        let name = "converter_agent_plugins";
        let path = Path::new(BUILT_GUESTS_DIR).join(format!("{name}.wasm"));
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        ConverterRunner::new(sandbox().load(name, &bytes).expect("load")).expect("converter world")
    })
}

fn convert(
    source: &str,
    target: &str,
    input: &Path,
) -> Result<(Report, tempfile::TempDir), String> {
    convert_in(source, target, input, &[])
}

fn convert_in(
    source: &str,
    target: &str,
    input: &Path,
    options: &[(&str, &str)],
) -> Result<(Report, tempfile::TempDir), String> {
    let output = tempfile::tempdir().unwrap();
    let request = Request {
        source: source.into(),
        target: target.into(),
        options: options
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    };
    runner()
        .convert(sandbox(), &request, input, output.path())
        .map(|o| (o.value, output))
        .map_err(|e| e.to_string())
}

fn convert_with(
    source: &str,
    target: &str,
    input: &Path,
    options: &[(&str, &str)],
) -> Result<Report, String> {
    convert_in(source, target, input, options).map(|(r, _)| r)
}

fn meadow() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/meadow")
}

fn corpus_packs() -> Vec<PathBuf> {
    [
        "buzz-packs/block-buzz/crates/buzz-persona/packs/sms-operator",
        "buzz-packs/syncreus-hivepack/packs/community-squad",
        "buzz-packs/syncreus-hivepack/packs/ship-squad",
    ]
    .iter()
    .map(|p| common::corpus(p))
    .collect()
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn apiary(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_apiary"))
        .args(args)
        .output()
        .expect("run apiary")
}

/// `apiary pack validate --json`: the pack must have no errors (warnings allowed).
fn assert_valid_pack(dir: &Path) {
    let out = apiary(&["pack", "validate", dir.to_str().unwrap(), "--json"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "validate output: {e}: {}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    assert_eq!(v["valid"], true, "{}: {v:#}", dir.display());
}

/// `apiary pack inspect --json` without the pack's location on disk.
fn inspect(dir: &Path) -> Value {
    let out = apiary(&["pack", "inspect", dir.to_str().unwrap(), "--json"]);
    assert!(
        out.status.success(),
        "inspect {}: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let mut v: Value = serde_json::from_slice(&out.stdout).unwrap();
    v["pack"].as_object_mut().unwrap().remove("root");
    v
}

/// OPS §5.5: 1-64 of [a-z0-9.-], alphanumeric at both ends, no `--` or `..`.
fn ops_name_ok(name: &str) -> bool {
    let b = name.as_bytes();
    (1..=64).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '.' || c == '-')
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && !name.contains("--")
        && !name.contains("..")
}

/// The rules of `schemas/1.0.0/plugin.schema.json` and `mcp.schema.json`, by hand.
fn assert_ops_plugin(dir: &Path) {
    // The host's own output check (`apiary convert` refuses what fails it).
    let v = apiary::convert::validate::validate("agent-plugins", dir);
    assert!(v.ok(), "{}: {:?}", dir.display(), v.errors);
    let m = read_json(&dir.join("plugin.json"));
    let m = m.as_object().expect("plugin.json is an object");
    let allowed = [
        "$schema",
        "name",
        "version",
        "description",
        "author",
        "homepage",
        "repository",
        "license",
        "keywords",
        "extensions",
    ];
    for key in m.keys() {
        assert!(
            allowed.contains(&key.as_str()),
            "additionalProperties: `{key}`"
        );
    }
    assert_eq!(m["$schema"], PLUGIN_SCHEMA, "required const $schema");
    assert!(
        ops_name_ok(m["name"].as_str().expect("required name")),
        "{}",
        m["name"]
    );
    for key in [
        "version",
        "description",
        "homepage",
        "repository",
        "license",
    ] {
        assert!(m.get(key).is_none_or(Value::is_string), "{key} is a string");
    }
    if let Some(author) = m.get("author") {
        let author = author.as_object().expect("author is an object");
        for (k, v) in author {
            assert!(
                ["name", "email", "url"].contains(&k.as_str()) && v.is_string(),
                "author.{k}"
            );
        }
    }
    if let Some(k) = m.get("keywords") {
        assert!(k.as_array().unwrap().iter().all(Value::is_string));
    }
    if let Some(e) = m.get("extensions") {
        assert!(e.as_object().unwrap().values().all(Value::is_object));
    }
    let mcp = dir.join("mcp.json");
    if mcp.exists() {
        let c = read_json(&mcp);
        let c = c.as_object().unwrap();
        assert_eq!(c.len(), 2, "mcp.json has only $schema and mcpServers");
        assert_eq!(c["$schema"], MCP_SCHEMA);
        for (name, s) in c["mcpServers"].as_object().unwrap() {
            let s = s.as_object().unwrap();
            let (keys, required): (&[&str], &str) = match s["type"].as_str().unwrap() {
                "stdio" => (&["type", "command", "args", "env", "cwd"], "command"),
                "streamable-http" | "sse" => (&["type", "url", "headers"], "url"),
                other => panic!("server {name}: type {other}"),
            };
            assert!(
                s.keys().all(|k| keys.contains(&k.as_str())),
                "server {name}: {s:?}"
            );
            assert!(
                s[required].as_str().is_some_and(|v| !v.is_empty()),
                "server {name}"
            );
            if let Some(command) = s.get("command").and_then(Value::as_str) {
                assert!(
                    !command.contains("${") && !command.contains(' '),
                    "{command}"
                );
            }
        }
    }
    // Skills are immediate children of skills/ whose name is their directory.
    for entry in std::fs::read_dir(dir.join("skills"))
        .into_iter()
        .flatten()
        .flatten()
    {
        let md = entry.path().join("SKILL.md");
        let text = std::fs::read_to_string(&md).unwrap();
        let dir_name = entry.file_name().to_string_lossy().into_owned();
        assert!(
            text.contains(&format!("name: {dir_name}")),
            "{}",
            md.display()
        );
    }
}

fn lost_fields(report: &Report) -> Vec<String> {
    report
        .lost
        .iter()
        .map(|f| format!("{}:{} ({})", f.path, f.field, f.code))
        .collect()
}

#[test]
fn info_and_detection() {
    let info = runner().info(sandbox()).unwrap().value;
    assert_eq!(info.name, "converter-agent-plugins");
    let pairs: Vec<_> = info
        .conversions
        .iter()
        .map(|c| (c.source.as_str(), c.target.as_str()))
        .collect();
    assert!(pairs.contains(&("buzz-pack", "agent-plugins")));
    assert!(pairs.contains(&("agent-plugins", "buzz-pack")));
    assert!(pairs.contains(&("agent-plugins-draft", "buzz-pack")));

    let (_, ops) = convert("buzz-pack", "agent-plugins", &meadow()).unwrap();
    let found = runner().detect(sandbox(), ops.path()).unwrap().value;
    assert!(
        found
            .iter()
            .any(|d| d.format == "agent-plugins" && d.confidence == 1.0),
        "{found:?}"
    );
    let found = runner().detect(sandbox(), &meadow()).unwrap().value;
    assert!(
        found
            .iter()
            .any(|d| d.format == "buzz-pack" && d.confidence == 1.0),
        "{found:?}"
    );
    assert!(
        !found.iter().any(|d| d.format.starts_with("agent-plugins")),
        "{found:?}"
    );
}

#[test]
fn meadow_becomes_a_conformant_plugin() {
    let (report, out) = convert("buzz-pack", "agent-plugins", &meadow()).unwrap();
    let dir = out.path();
    assert_ops_plugin(dir);
    assert!(report.lost.is_empty(), "{:?}", lost_fields(&report));
    let m = read_json(&dir.join("plugin.json"));
    assert_eq!(m["name"], "meadow-security-team");
    assert_eq!(
        m["author"],
        json!({"name": "apiary examples", "url": "https://example.invalid/apiary"})
    );
    let ext = &m["extensions"][NS];
    assert_eq!(ext["id"], "com.example.meadow-security-team");
    assert_eq!(ext["name"], "Meadow Security Team");
    assert_eq!(ext["defaults"]["temperature"], 0.7);
    assert_eq!(ext["personas"].as_array().unwrap().len(), 4);
    for file in [
        "agents/pip.persona.md",
        "agents/berry.persona.md",
        "instructions.md",
    ] {
        let carried = std::fs::read(dir.join(NS).join(file)).unwrap();
        assert_eq!(
            carried,
            std::fs::read(meadow().join(file)).unwrap(),
            "{file} byte for byte"
        );
    }
    assert!(!dir.join(".plugin").exists() && !dir.join(".mcp.json").exists());
    let mcp = read_json(&dir.join("mcp.json"));
    assert_eq!(mcp["mcpServers"]["github"]["type"], "stdio");
    assert_eq!(
        mcp["mcpServers"]["github"]["env"]["GITHUB_PERSONAL_ACCESS_TOKEN"],
        "${GITHUB_TOKEN}"
    );
    for skill in ["code-review", "security-review", "shared"] {
        assert!(dir.join("skills").join(skill).join("SKILL.md").is_file());
    }
    let name = report
        .normalised
        .iter()
        .find(|f| f.code == "name-normalised")
        .unwrap();
    assert!(
        name.message
            .contains("Meadow Security Team -> meadow-security-team"),
        "{}",
        name.message
    );
    let codes = common::codes(&report);
    for code in [
        "normalised:schema-rewritten",
        "normalised:carried-in-extension",
        "normalised:mcp-config-renamed",
        "synthesised:mcp-type-synthesised",
        "reinterpreted:mcp-variable-not-expanded",
    ] {
        assert!(codes.contains(&code.to_string()), "{code} in {codes:?}");
    }
}

/// buzz-pack -> agent-plugins -> buzz-pack gives back the same resolved pack, and a second trip
/// out writes the same plugin.
#[test]
fn pack_round_trips_resolve_the_same() {
    let mut packs = vec![meadow()];
    packs.extend(corpus_packs());
    for pack in packs {
        let before = inspect(&pack);
        let (out_report, ops) = convert("buzz-pack", "agent-plugins", &pack).unwrap();
        assert_ops_plugin(ops.path());
        let (back_report, back) = convert("agent-plugins", "buzz-pack", ops.path()).unwrap();
        assert!(
            out_report.lost.is_empty() && back_report.lost.is_empty(),
            "{}: lost {:?} {:?}",
            pack.display(),
            lost_fields(&out_report),
            lost_fields(&back_report)
        );
        assert_valid_pack(back.path());
        assert_eq!(inspect(back.path()), before, "{}", pack.display());
        // Same files besides the manifest and MCP config (README, canvas, snapshots, skills).
        for file in [
            "README.md",
            "canvas/handbook-template.md",
            "snapshots/lead.agent.json",
        ] {
            if pack.join(file).exists() {
                assert_eq!(
                    std::fs::read(back.path().join(file)).unwrap(),
                    std::fs::read(pack.join(file)).unwrap()
                );
            }
        }
        let (_, again) = convert("buzz-pack", "agent-plugins", back.path()).unwrap();
        assert_eq!(
            read_json(&again.path().join("plugin.json")),
            read_json(&ops.path().join("plugin.json"))
        );
    }
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap().flatten() {
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// Files the OPS layout has no place for (another format's `x-claude/` from a Claude plugin,
/// snapshots, a stray root `plugin.json`) travel under the namespace directory, so the plugin
/// passes the host's strict layout check, and come back byte for byte; documentation and other
/// clients' reverse-DNS directories stay at the root.
#[test]
fn foreign_top_level_files_travel_in_the_namespace() {
    let pack = tempfile::tempdir().unwrap();
    copy_tree(&meadow(), pack.path());
    let extra = [
        ("x-claude/hooks/hooks.json", r#"{"hooks": {}}"#),
        ("x-claude/GEMINI.md", "# notes for another host\n"),
        ("snapshots/lead.agent.json", r#"{"name": "lead"}"#),
        ("plugin.json", r#"{"name": "not-ours"}"#),
        ("notes.txt", "plain file\n"),
        ("org.example/data.json", "{}"),
        ("LICENSE", "MIT\n"),
    ];
    for (rel, text) in extra {
        write(pack.path(), rel, text);
    }
    let (report, ops) = convert("buzz-pack", "agent-plugins", pack.path()).unwrap();
    assert!(report.lost.is_empty(), "{:?}", lost_fields(&report));
    assert_ops_plugin(ops.path());
    for rel in [
        "x-claude/hooks/hooks.json",
        "x-claude/GEMINI.md",
        "snapshots/lead.agent.json",
        "notes.txt",
    ] {
        assert!(ops.path().join(NS).join(rel).is_file(), "{rel}");
        assert!(!ops.path().join(rel).exists(), "{rel}");
    }
    assert!(ops.path().join("org.example/data.json").is_file());
    assert!(ops.path().join("LICENSE").is_file());
    assert!(ops.path().join(NS).join("plugin.json").is_file());
    assert_eq!(
        read_json(&ops.path().join("plugin.json"))["$schema"],
        PLUGIN_SCHEMA
    );
    let moved: Vec<&str> = report
        .normalised
        .iter()
        .filter(|f| f.code == "carried-in-namespace")
        .map(|f| f.path.as_str())
        .collect();
    assert_eq!(
        moved.len(),
        4,
        "one finding per top-level entry moved: {moved:?}"
    );
    for top in ["x-claude/", "snapshots/", "plugin.json", "notes.txt"] {
        assert!(moved.contains(&top), "{top}: {moved:?}");
    }

    let (back_report, back) = convert("agent-plugins", "buzz-pack", ops.path()).unwrap();
    assert!(
        back_report.lost.is_empty(),
        "{:?}",
        lost_fields(&back_report)
    );
    assert_valid_pack(back.path());
    assert_eq!(inspect(back.path()), inspect(pack.path()));
    for (rel, text) in extra {
        assert_eq!(
            std::fs::read_to_string(back.path().join(rel)).unwrap(),
            text,
            "{rel}"
        );
    }
}

/// A plain OPS plugin with another client's extension, three transports and plain files.
fn sample_plugin(root: &Path) {
    write(
        root,
        "plugin.json",
        &json!({
            "$schema": PLUGIN_SCHEMA,
            "name": "acme.review-tools",
            "version": "2.1.0",
            "description": "Reviews pull requests with a checklist and the Acme API.",
            "author": {"name": "Acme", "email": "dev@acme.example", "url": "https://acme.example"},
            "homepage": "https://docs.acme.example/review",
            "repository": "https://github.com/acme/review-tools",
            "license": "MIT",
            "keywords": ["review", "acme"],
            "extensions": {"com.example.client": {"setting": true, "nested": {"a": [1, 2]}}},
            "x-unknown": 1
        })
        .to_string(),
    );
    write(root, "mcp.json", &json!({
        "$schema": MCP_SCHEMA,
        "mcpServers": {
            "validator": {"type": "stdio", "command": "./bin/validator",
                "args": ["--data", "${PLUGIN_DATA}/v"], "env": {"CONFIG": "${PLUGIN_ROOT}/c.json"}, "cwd": "${PLUGIN_ROOT}"},
            "api": {"type": "streamable-http", "url": "https://api.acme.example/mcp", "headers": {"X-Tenant": "public"}},
            "legacy": {"type": "sse", "url": "https://legacy.acme.example/sse"}
        }
    }).to_string());
    write(
        root,
        "skills/summarize/SKILL.md",
        "---\nname: summarize\ndescription: Summarises a diff\n---\n\nRead the diff.\n",
    );
    write(
        root,
        "skills/summarize/references/checklist.md",
        "- tests\n",
    );
    write(root, "skills/broken/SKILL.md", "no frontmatter here\n");
    write(root, "LICENSE", "MIT\n");
    write(root, "CHANGELOG.md", "# 2.1.0\n");
    write(
        root,
        "com.example.client/hooks/hooks.json",
        "{\"PreToolUse\": []}\n",
    );
}

#[test]
fn plain_plugin_round_trips_and_synthesises_one_persona() {
    let input = tempfile::tempdir().unwrap();
    sample_plugin(input.path());
    let (report, pack) = convert("agent-plugins", "buzz-pack", input.path()).unwrap();
    assert_valid_pack(pack.path());
    let codes = common::codes(&report);
    for code in [
        "synthesised:persona-synthesised",
        "synthesised:id-synthesised",
        "lost:unknown-field",
        "lost:skill-invalid",
        "lost:mcp-server-extension-only",
        "normalised:mcp-transport-renamed",
        "reinterpreted:plugin-placeholder",
        "normalised:carried-in-extension",
    ] {
        assert!(codes.contains(&code.to_string()), "{code} in {codes:?}");
    }
    let manifest = read_json(&pack.path().join(".plugin/plugin.json"));
    assert_eq!(manifest["id"], "com.github.acme.review-tools");
    assert_eq!(
        manifest["x-agent-plugins"]["extensions"]["com.example.client"]["setting"],
        true
    );
    let resolved = inspect(pack.path());
    let persona = &resolved["personas"][0];
    assert_eq!(persona["identity"]["name"], "acme-review-tools");
    assert_eq!(
        persona["identity"]["description"],
        "Reviews pull requests with a checklist and the Acme API."
    );
    assert!(
        persona["skills"]
            .as_array()
            .unwrap()
            .contains(&json!("summarize"))
    );
    let mut servers: Vec<_> = persona["mcp_servers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].clone())
        .collect();
    servers.sort_by_key(|s| s.to_string());
    assert_eq!(
        servers,
        [json!("api"), json!("validator")],
        "sse is not runnable under apiary"
    );

    // And back: every field but the one reported lost, the apiary namespace added.
    let (back_report, ops) = convert("buzz-pack", "agent-plugins", pack.path()).unwrap();
    assert!(
        back_report.lost.is_empty(),
        "{:?}",
        lost_fields(&back_report)
    );
    assert_ops_plugin(ops.path());
    let mut original = read_json(&input.path().join("plugin.json"));
    original.as_object_mut().unwrap().remove("x-unknown");
    let mut again = read_json(&ops.path().join("plugin.json"));
    assert!(again["extensions"][NS]["personas"].is_array());
    again["extensions"].as_object_mut().unwrap().remove(NS);
    assert_eq!(again, original);
    assert_eq!(
        read_json(&ops.path().join("mcp.json")),
        read_json(&input.path().join("mcp.json"))
    );
    for file in [
        "skills/summarize/SKILL.md",
        "skills/summarize/references/checklist.md",
        "LICENSE",
        "CHANGELOG.md",
        "com.example.client/hooks/hooks.json",
    ] {
        assert_eq!(
            std::fs::read(ops.path().join(file)).unwrap(),
            std::fs::read(input.path().join(file)).unwrap(),
            "{file}"
        );
    }
}

#[test]
fn refuses_plugins_with_nothing_to_make_a_persona_from() {
    let input = tempfile::tempdir().unwrap();
    write(
        input.path(),
        "plugin.json",
        &json!({"$schema": PLUGIN_SCHEMA, "name": "minimal-plugin"}).to_string(),
    );
    let err = convert("agent-plugins", "buzz-pack", input.path()).unwrap_err();
    assert!(err.contains("nothing to make a persona from"), "{err}");

    let full = tempfile::tempdir().unwrap();
    sample_plugin(full.path());
    let err = convert_with(
        "agent-plugins",
        "buzz-pack",
        full.path(),
        &[("persona", "refuse")],
    )
    .unwrap_err();
    assert!(err.contains("persona=refuse"), "{err}");
    let err = convert_with(
        "agent-plugins",
        "buzz-pack",
        full.path(),
        &[("colour", "blue")],
    )
    .unwrap_err();
    assert!(err.contains("unknown option"), "{err}");
}

/// Every JSON example of the OPS 1.0 spec text that is a manifest becomes a plugin: converted and
/// valid, or refused with a reason. The spec's valid mcp.json example rides with the full one.
#[test]
fn spec_examples_convert_or_are_refused() {
    let spec = std::fs::read_to_string(common::corpus("ops-spec/spec/1.0.0.md")).unwrap();
    let blocks: Vec<Value> = spec
        .split("```json")
        .skip(1)
        .filter_map(|b| b.split("```").next())
        .filter_map(|b| serde_json::from_str(b).ok())
        .collect();
    let mcp = blocks
        .iter()
        .find(|b| b["mcpServers"].get("deployment-api").is_some())
        .unwrap()
        .clone();
    let manifests: Vec<&Value> = blocks
        .iter()
        .filter(|b| b["$schema"] == PLUGIN_SCHEMA)
        .collect();
    assert!(manifests.len() >= 3, "{}", manifests.len());
    let (mut converted, mut refused) = (0, 0);
    for manifest in manifests {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "plugin.json", &manifest.to_string());
        if manifest.get("description").is_some() {
            write(dir.path(), "mcp.json", &mcp.to_string());
        }
        match convert("agent-plugins", "buzz-pack", dir.path()) {
            Ok((_, out)) => {
                assert_valid_pack(out.path());
                converted += 1;
            }
            Err(e) => {
                assert!(e.contains("nothing to make a persona from"), "{e}");
                refused += 1;
            }
        }
    }
    assert!(
        converted >= 1 && refused >= 1,
        "{converted} converted, {refused} refused"
    );
}

/// Every corpus folder: detection never traps and never claims a foreign format as Agent Plugins;
/// every persona pack converts to a conformant plugin.
#[test]
fn corpus_bulk() {
    let root = common::corpus("");
    let mut dirs = vec![];
    for entry in walkdirs(&root, 6) {
        let has_manifest = [
            "plugin.json",
            ".plugin/plugin.json",
            ".claude-plugin/plugin.json",
            "expert.toml",
            "person.kdl",
            "SKILL.md",
        ]
        .iter()
        .any(|m| entry.join(m).is_file());
        if has_manifest {
            dirs.push(entry);
        }
    }
    assert!(dirs.len() >= 10, "{}", dirs.len());
    let mut packs = 0;
    for dir in &dirs {
        let found = runner().detect(sandbox(), dir).unwrap().value;
        if found
            .iter()
            .any(|d| d.format == "buzz-pack" && d.confidence == 1.0)
        {
            let (_, out) = convert("buzz-pack", "agent-plugins", dir).unwrap();
            assert_ops_plugin(out.path());
            packs += 1;
        } else {
            assert!(
                !found
                    .iter()
                    .any(|d| d.format.starts_with("agent-plugins") && d.confidence >= 0.5),
                "{}: {found:?}",
                dir.display()
            );
        }
    }
    assert_eq!(packs, 3);
}

fn walkdirs(root: &Path, depth: usize) -> Vec<PathBuf> {
    let mut out = vec![root.to_path_buf()];
    if depth == 0 {
        return out;
    }
    for entry in std::fs::read_dir(root).into_iter().flatten().flatten() {
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            out.extend(walkdirs(&entry.path(), depth - 1));
        }
    }
    out
}

#[test]
fn april_draft_is_read_as_input() {
    let input = tempfile::tempdir().unwrap();
    let root = input.path();
    write(
        root,
        ".plugin/plugin.json",
        &json!({
            "name": "Draft Reviewer",
            "version": "0.3.0",
            "description": "A draft-era plugin",
            "author": {"name": "Acme"},
            "skills": "./skills/",
            "agents": ["./agents/"],
            "commands": "./commands/",
            "mcpServers": "./.mcp.json"
        })
        .to_string(),
    );
    write(
        root,
        "agents/code-reviewer.md",
        "---\nname: code-reviewer\ndescription: Use this agent when: reviewing. Examples: <example>Context: x\nuser: \"review it\"\n</example>\nmodel: sonnet\ntools: [Read, Grep]\n---\nYou review code.\n",
    );
    write(
        root,
        "agents/Second Agent.md",
        "---\ndescription: Writes tests\n---\nYou write tests.\n",
    );
    write(
        root,
        "skills/lint/SKILL.md",
        "---\nname: lint\ndescription: Lints\n---\nRun the linter.\n",
    );
    write(root, "commands/go.md", "Do it.\n");
    write(
        root,
        ".mcp.json",
        &json!({"mcpServers": {
            "tool": {"command": "${PLUGIN_ROOT}/bin/tool", "args": []},
            "old": {"type": "sse", "url": "https://x.example/sse"}
        }})
        .to_string(),
    );
    let found = runner().detect(sandbox(), root).unwrap().value;
    assert!(
        found
            .iter()
            .any(|d| d.format == "agent-plugins-draft" && d.confidence >= 0.9),
        "{found:?}"
    );
    let (report, pack) = convert("agent-plugins-draft", "buzz-pack", root).unwrap();
    assert_valid_pack(pack.path());
    let codes = common::codes(&report);
    for code in [
        "reinterpreted:lenient-frontmatter",
        "lost:component-unsupported",
        "lost:mcp-sse-unsupported",
        "reinterpreted:plugin-placeholder",
        "reinterpreted:model-alias-pinned",
        "normalised:name-normalised",
    ] {
        assert!(codes.contains(&code.to_string()), "{code} in {codes:?}");
    }
    let resolved = inspect(pack.path());
    let names: Vec<_> = resolved["personas"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["identity"]["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, ["Second-Agent", "code-reviewer"].map(String::from));
    assert_eq!(
        read_json(&pack.path().join(".plugin/plugin.json"))["x-agent-plugins"]["agents"]["code-reviewer"]
            ["tools"],
        json!(["Read", "Grep"])
    );
    assert!(
        pack.path().join("commands/go.md").is_file(),
        "plain files come along"
    );
    // Input only: nothing converts to the draft.
    let err = convert("buzz-pack", "agent-plugins-draft", &meadow()).unwrap_err();
    assert!(err.contains("does not convert"), "{err}");
}

#[test]
fn hostile_inputs_are_refused_or_reported() {
    let ext = |personas: Value| {
        json!({"$schema": PLUGIN_SCHEMA, "name": "h", "extensions": {NS: {"id": "a.b", "personas": personas}}}).to_string()
    };
    // (label, plugin.json, what the refusal says)
    let cases: Vec<(&str, String, &str)> = vec![
        ("not json", "{".into(), "invalid JSON"),
        ("array", "[]".into(), "not a JSON object"),
        ("no schema", json!({"name": "x"}).to_string(), "no $schema"),
        ("old schema", json!({"$schema": "https://open-plugins.com/schemas/1.0.0/plugin.schema.json", "name": "x"}).to_string(), "pre-release"),
        ("name type", json!({"$schema": PLUGIN_SCHEMA, "name": 5}).to_string(), "name rule"),
        ("huge name", json!({"$schema": PLUGIN_SCHEMA, "name": "A".repeat(100_000)}).to_string(), "name rule"),
        ("author extra", json!({"$schema": PLUGIN_SCHEMA, "name": "x", "author": {"name": "a", "x": 1}}).to_string(), "author"),
        ("escaping persona", ext(json!(["../../etc/passwd"])), "leaves its tree"),
        ("absolute persona", ext(json!(["/etc/passwd"])), "leaves its tree"),
        ("no personas", ext(json!([])), "personas"),
        ("persona type", ext(json!({"a": 1})), "personas"),
        ("missing persona", ext(json!(["agents/a.persona.md"])), "missing"),
        ("deep json", format!("{}{}", "[".repeat(100_000), "]".repeat(100_000)), "invalid JSON"),
        ("huge file", format!("{{\"$schema\": \"{PLUGIN_SCHEMA}\", \"name\": \"x\", \"description\": \"{}\"}}", "x".repeat(5 << 20)), "larger than"),
    ];
    for (label, manifest, expect) in cases {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "plugin.json", &manifest);
        let err = convert("agent-plugins", "buzz-pack", dir.path())
            .map(|_| ())
            .unwrap_err();
        assert!(err.contains(expect), "{label}: {err}");
        assert!(err.len() < 4096, "{label}: error of {} bytes", err.len());
    }

    // Garbage around a valid plugin: reported, the rest converted.
    let dir = tempfile::tempdir().unwrap();
    sample_plugin(dir.path());
    let mut m = read_json(&dir.path().join("plugin.json"));
    m["extensions"]["com.bad"] = json!("not an object");
    write(dir.path(), "plugin.json", &m.to_string());
    write(dir.path(), "mcp.json", "{\"mcpServers\": 7}");
    write(
        dir.path(),
        ".plugin/plugin.json",
        "{\"personas\": [\"../../x\"]}",
    );
    std::os::unix::fs::symlink("/etc/passwd", dir.path().join("passwd-link")).unwrap();
    let (report, pack) = convert("agent-plugins", "buzz-pack", dir.path()).unwrap();
    assert_valid_pack(pack.path());
    let codes = common::codes(&report);
    for code in [
        "lost:extensions-ignored",
        "lost:mcp-config-invalid",
        "lost:file-collides",
    ] {
        assert!(codes.contains(&code.to_string()), "{code} in {codes:?}");
    }
    assert!(
        !pack.path().join("passwd-link").exists(),
        "symlinks are not followed"
    );

    // A persona pack whose manifest points outside itself.
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        ".plugin/plugin.json",
        &json!({"id": "a.b", "name": "x", "version": "1", "personas": ["../outside.md"]})
            .to_string(),
    );
    let err = convert("buzz-pack", "agent-plugins", dir.path()).unwrap_err();
    assert!(err.contains("leaves its tree"), "{err}");
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        ".plugin/plugin.json",
        &json!({"id": "a.b", "name": 7, "version": [], "personas": []}).to_string(),
    );
    let (report, out) = convert("buzz-pack", "agent-plugins", dir.path()).unwrap();
    assert_ops_plugin(out.path());
    assert!(!report.normalised.is_empty());
}
