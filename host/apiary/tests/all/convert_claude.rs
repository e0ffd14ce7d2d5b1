//! The Claude Code plugin converter component (`guests/converter-claude`), end to end through the
//! sandbox: every plugin of the corpus (official plugins, external plugins, the subagent
//! categories, the multi-host plugin) and both marketplaces -> persona packs checked with the pack
//! validator; Claude -> pack -> Claude round trips keeping every agent field the report does not
//! list as lost; meadow -> Claude (checked with the host's Claude plugin validator) -> pack; the
//! Codex, Cursor and Gemini manifests as inputs; and hostile inputs.

use crate::common;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use apiary::sandbox::converter::{ConverterRunner, Report, Request};
use serde_json::{Value, json};

fn runner() -> &'static ConverterRunner {
    static R: OnceLock<ConverterRunner> = OnceLock::new();
    R.get_or_init(|| common::converter("converter_claude"))
}

fn convert(
    source: &str,
    target: &str,
    input: &Path,
) -> Result<(Report, tempfile::TempDir), String> {
    common::convert(runner(), source, target, input)
}

fn convert_with(
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
        .convert(common::sandbox(), &request, input, output.path())
        .map(|o| (o.value, output))
        .map_err(|e| e.to_string())
}

fn meadow() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/meadow")
}

fn dirs(rel: &str) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(common::corpus(rel))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    out.sort();
    out
}

/// Every Claude plugin directory of the corpus.
fn corpus_plugins() -> Vec<PathBuf> {
    let mut all = dirs("claude-plugins-official/plugins");
    all.extend(dirs("claude-plugins-official/external_plugins"));
    all.extend(dirs("claude-subagents/categories"));
    all.push(common::corpus("multi-host-plugin"));
    all
}

fn assert_valid_pack(dir: &Path) {
    let report = apiary::pack::validate(dir);
    let errors: Vec<String> = report
        .diagnostics
        .iter()
        .filter(|d| d.severity == apiary::diag::Severity::Error)
        .map(|d| format!("{}: {} ({:?})", d.code, d.message, d.file))
        .collect();
    assert!(errors.is_empty(), "{}: {errors:#?}", dir.display());
}

fn assert_valid_claude(dir: &Path) {
    let v = apiary::convert::validate::validate("claude-plugin", dir);
    assert!(v.ok(), "{}: {:#?}", dir.display(), v.errors);
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Frontmatter (strict YAML, `None` when it is not) and body of a markdown file.
fn frontmatter(path: &Path) -> (Option<serde_json::Map<String, Value>>, String) {
    let text = std::fs::read_to_string(path).unwrap().replace("\r\n", "\n");
    let Some(rest) = text.strip_prefix("---\n") else {
        return (None, text);
    };
    let end = rest.find("\n---\n").map(|i| i + 1).unwrap_or(rest.len());
    let yaml = &rest[..end];
    let body = rest.get(end + 4..).unwrap_or_default().to_string();
    let map = serde_yaml_ng::from_str::<Value>(yaml)
        .ok()
        .and_then(|v| v.as_object().cloned());
    (map, body)
}

/// The refusal of a tree that is no Claude plugin at all.
fn is_no_plugin(error: &str) -> bool {
    error.contains("no Claude Code plugin here: expected")
}

fn findings<'a>(report: &'a Report, code: &str) -> Vec<&'a apiary::sandbox::converter::Finding> {
    [
        &report.lost,
        &report.synthesised,
        &report.normalised,
        &report.reinterpreted,
    ]
    .into_iter()
    .flatten()
    .filter(|f| f.code == code)
    .collect()
}

/// Whether Claude Code loads an agent name as written (one line, at most 64 characters, no `/`,
/// `\\` or `:`); Title Case does.
fn claude_loads(name: &str) -> bool {
    name.chars().count() <= 64
        && name.trim() == name
        && !name
            .chars()
            .any(|c| c.is_control() || matches!(c, '/' | '\\' | ':'))
}

#[test]
fn claude_round_trips_keep_agent_fields() {
    let mut compared = 0;
    for dir in corpus_plugins() {
        let (r1, pack) = match convert("claude-plugin", "buzz-pack", &dir) {
            Ok(v) => v,
            Err(e) if is_no_plugin(&e) => continue,
            Err(e) => panic!("{}: {e}", dir.display()),
        };
        let (r2, back) = convert("buzz-pack", "claude-plugin", pack.path()).unwrap();
        assert_valid_claude_or_dropped(back.path(), &r2);
        let lost: Vec<String> = r1
            .lost
            .iter()
            .chain(&r2.lost)
            .map(|f| format!("{}#{}", f.path, f.field))
            .collect();
        let manifest = read_json(&pack.path().join(".plugin/plugin.json"));
        let agents = manifest["x-claude"]["agents"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        for (_, entry) in agents {
            let file = entry["file"].as_str().unwrap();
            let name = entry["name"].as_str().unwrap();
            let (orig, orig_body) = frontmatter(&dir.join(file));
            // Names come back as written (Title Case included); only one Claude Code cannot load
            // is slugged, and the report says so.
            let claude_ok = claude_loads(name);
            let expected = name.to_ascii_lowercase().replace(['.', '_', ' '], "-");
            if !claude_ok {
                assert!(
                    r1.normalised
                        .iter()
                        .chain(&r2.normalised)
                        .any(|f| f.code == "name-normalised" && f.message.ends_with(&expected)),
                    "{name}: {:?}",
                    r2.normalised
                );
            }
            // Each agent comes back to the file it was read from.
            let out = back.path().join(file);
            assert!(
                out.is_file(),
                "{}: agent {name} not back at {file}",
                dir.display()
            );
            let (back_fm, back_body) = frontmatter(&out);
            assert_eq!(
                back_body.trim(),
                orig_body.trim(),
                "{}: {file}",
                dir.display()
            );
            match orig {
                Some(orig) => {
                    let back_fm = back_fm.unwrap();
                    for (k, v) in &orig {
                        if lost.contains(&format!("{file}#{k}")) || (k == "name" && !claude_ok) {
                            continue;
                        }
                        assert_eq!(back_fm.get(k), Some(v), "{}: {file} `{k}`", dir.display());
                    }
                    let keys: Vec<&String> = orig.keys().collect();
                    let back_keys: Vec<&String> = back_fm.keys().collect();
                    assert_eq!(keys, back_keys, "{}: {file} key order", dir.display());
                }
                None => {
                    // Lenient originals (not YAML) come back as written: Claude Code reads them
                    // leniently, as it did before.
                    let head = |p: &Path| {
                        let t = std::fs::read_to_string(p).unwrap().replace("\r\n", "\n");
                        let end = t[4..].find("\n---\n").map_or(t.len(), |i| i + 4);
                        t[..end].to_string()
                    };
                    assert_eq!(
                        head(&out),
                        head(&dir.join(file)),
                        "{}: {file}",
                        dir.display()
                    );
                }
            }
            compared += 1;
        }
        // The plugin manifest comes back, keys and values.
        let orig_manifest = dir.join(".claude-plugin/plugin.json");
        if orig_manifest.is_file() {
            let orig = read_json(&orig_manifest);
            let back = read_json(&back.path().join(".claude-plugin/plugin.json"));
            for (k, v) in orig.as_object().unwrap() {
                // `agents` paths stay when every agent went back to its file (else reported).
                if k == "agents" && r2.normalised.iter().any(|f| f.code == "agents-relocated") {
                    continue;
                }
                assert_eq!(back.get(k), Some(v), "{}: plugin.json `{k}`", dir.display());
            }
        }
        // Carried components come back byte for byte.
        for sub in ["commands", "hooks"] {
            let from = dir.join(sub);
            for e in std::fs::read_dir(&from).into_iter().flatten().flatten() {
                if e.path().is_file() {
                    let back_file = back.path().join(sub).join(e.file_name());
                    assert_eq!(
                        std::fs::read(e.path()).unwrap(),
                        std::fs::read(&back_file).unwrap_or_default(),
                        "{}",
                        back_file.display()
                    );
                }
            }
        }
    }
    assert!(compared >= 170, "{compared} agents compared");
}

fn assert_valid_claude_or_dropped(dir: &Path, report: &Report) {
    let v = apiary::convert::validate::validate("claude-plugin", dir);
    assert!(
        v.ok(),
        "{}: {:#?} (report {:?})",
        dir.display(),
        v.errors,
        common::codes(report)
    );
}

#[test]
fn meadow_round_trips_through_claude() {
    let (r1, plugin) = convert("buzz-pack", "claude-plugin", &meadow()).unwrap();
    assert_valid_claude(plugin.path());
    let p = plugin.path();
    let manifest = read_json(&p.join(".claude-plugin/plugin.json"));
    assert_eq!(manifest["name"], "meadow-security-team");
    assert_eq!(
        manifest["x-persona"]["manifest"]["id"],
        "com.example.meadow-security-team"
    );
    let (fm, body) = frontmatter(&p.join("agents/pip.md"));
    let fm = fm.unwrap();
    assert_eq!(fm["model"], "claude-4-opus-20250514");
    assert!(fm.get("display_name").is_none() && fm.get("triggers").is_none());
    assert!(body.contains("persona pack instructions"));
    // Lep's persona skills claim becomes a preloaded agent skill; the default model is written in.
    let (fm, _) = frontmatter(&p.join("agents/lep.md"));
    let fm = fm.unwrap();
    assert_eq!(fm["skills"], json!(["security-review"]));
    assert_eq!(fm["model"], "claude-sonnet-4-20250514");
    assert!(p.join("skills/security-review/SKILL.md").is_file());
    assert!(read_json(&p.join(".mcp.json"))["mcpServers"]["github"].is_object());
    let codes = common::codes(&r1);
    for c in [
        "normalised:name-normalised",
        "reinterpreted:skills-preloaded",
        "reinterpreted:instructions-appended",
        "reinterpreted:carried-in-extension",
        "synthesised:default-applied",
    ] {
        assert!(codes.contains(&c.to_string()), "{c} in {codes:?}");
    }

    // And back: every persona field, body, the manifest and the instructions.
    let (_, pack) = convert("claude-plugin", "buzz-pack", p).unwrap();
    assert_valid_pack(pack.path());
    let orig = read_json(&meadow().join(".plugin/plugin.json"));
    let back = read_json(&pack.path().join(".plugin/plugin.json"));
    for (k, v) in orig.as_object().unwrap() {
        assert_eq!(back.get(k), Some(v), "manifest `{k}`");
    }
    for persona in orig["personas"].as_array().unwrap() {
        let rel = persona.as_str().unwrap();
        let (a, ab) = frontmatter(&meadow().join(rel));
        let (b, bb) = frontmatter(&pack.path().join(rel));
        assert_eq!(a, b, "{rel}");
        assert_eq!(ab.trim(), bb.trim(), "{rel}");
    }
    assert_eq!(
        std::fs::read_to_string(meadow().join("instructions.md")).unwrap(),
        std::fs::read_to_string(pack.path().join("instructions.md")).unwrap()
    );
}

#[test]
fn per_persona_mcp_and_hooks_are_lifted_and_reported() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir_all(d.join(".plugin")).unwrap();
    std::fs::create_dir_all(d.join("agents")).unwrap();
    std::fs::create_dir_all(d.join("hooks")).unwrap();
    std::fs::write(
        d.join(".plugin/plugin.json"),
        json!({"id": "t.hooks", "name": "Hook Pack", "version": "1.0.0",
               "personas": ["agents/Ada_Bot.persona.md"], "hooks_config": "hooks/hooks.json"})
        .to_string(),
    )
    .unwrap();
    std::fs::write(
        d.join("hooks/hooks.json"),
        r#"{"on_start": "./hooks/start.sh"}"#,
    )
    .unwrap();
    std::fs::write(d.join("hooks/start.sh"), "#!/bin/sh\necho hi\n").unwrap();
    std::fs::write(
        d.join("agents/Ada_Bot.persona.md"),
        "---\nname: Ada_Bot\ndisplay_name: Ada\ndescription: d\nmodel: openai:gpt-5\nmcp_servers:\n  - name: search\n    type: http\n    url: https://example.invalid/mcp\n---\nBe Ada.\n",
    )
    .unwrap();
    let (report, out) = convert("buzz-pack", "claude-plugin", d).unwrap();
    assert_valid_claude(out.path());
    let (fm, _) = frontmatter(&out.path().join("agents/ada-bot.md"));
    let fm = fm.unwrap();
    assert_eq!(fm["name"], "ada-bot");
    assert_eq!(fm["model"], "inherit");
    let mcp = read_json(&out.path().join(".mcp.json"));
    assert_eq!(
        mcp["mcpServers"]["search"]["url"],
        "https://example.invalid/mcp"
    );
    let hooks = read_json(&out.path().join("hooks/hooks.json"));
    assert!(
        hooks["hooks"]["SessionStart"][0]["hooks"][0]["command"]
            .as_str()
            .unwrap()
            .starts_with("${CLAUDE_PLUGIN_ROOT}/hooks/start.sh")
    );
    assert!(out.path().join("hooks/start.sh").is_file());
    let codes = common::codes(&report);
    for c in [
        "reinterpreted:mcp-scope-lifted",
        "reinterpreted:hook-event-mapped",
        "lost:model-provider-unsupported",
        "normalised:name-normalised",
    ] {
        assert!(codes.contains(&c.to_string()), "{c} in {codes:?}");
    }
    // Back to a pack: name, model, MCP scope and lifecycle hooks restored from `x-persona`.
    let (_, pack) = convert("claude-plugin", "buzz-pack", out.path()).unwrap();
    assert_valid_pack(pack.path());
    let (fm, _) = frontmatter(&pack.path().join("agents/Ada_Bot.persona.md"));
    let fm = fm.unwrap();
    assert_eq!(fm["name"], "Ada_Bot");
    assert_eq!(fm["model"], "openai:gpt-5");
    assert_eq!(fm["mcp_servers"][0]["name"], "search");
    let hooks = read_json(&pack.path().join("hooks/hooks.json"));
    assert_eq!(hooks["on_start"], "./hooks/start.sh");
}

#[test]
fn marketplaces_convert_every_local_plugin() {
    let (report, out) = convert(
        "claude-marketplace",
        "buzz-pack",
        &common::corpus("claude-plugins-official"),
    )
    .unwrap();
    let mut packs = 0;
    for e in std::fs::read_dir(out.path()).unwrap().flatten() {
        assert_valid_pack(&e.path());
        packs += 1;
    }
    // 53 local sources, 12 of them left out of the corpus on purpose; the rest are remote.
    assert_eq!(packs, 41);
    assert_eq!(findings(&report, "plugin-missing").len(), 12);
    assert_eq!(findings(&report, "remote-plugin-skipped").len(), 233);
    // An LSP plugin without a manifest gets its metadata from the marketplace entry.
    let m = read_json(&out.path().join("clangd-lsp/.plugin/plugin.json"));
    assert!(m["x-claude"]["marketplace"]["entry"]["lspServers"].is_object());
    assert_eq!(m["x-claude"]["manifest"], "marketplace-entry");

    let (_, out) = convert(
        "claude-marketplace",
        "buzz-pack",
        &common::corpus("claude-subagents"),
    )
    .unwrap();
    let subs: Vec<_> = std::fs::read_dir(out.path()).unwrap().flatten().collect();
    assert_eq!(subs.len(), 10);

    // One plugin by name, into the output root: a single valid pack.
    let (_, out) = convert_with(
        "claude-marketplace",
        "buzz-pack",
        &common::corpus("claude-plugins-official"),
        &[("plugin", "feature-dev")],
    )
    .unwrap();
    assert_valid_pack(out.path());
    let err = convert_with(
        "claude-marketplace",
        "buzz-pack",
        &common::corpus("claude-plugins-official"),
        &[("plugin", "asana")],
    )
    .unwrap_err();
    assert!(err.contains("asana"), "{err}");
}

#[test]
fn codex_cursor_and_gemini_manifests_are_inputs() {
    let dir = common::corpus("multi-host-plugin");
    for (format, key) in [
        ("codex-plugin", "x-codex"),
        ("cursor-plugin", "x-cursor"),
        ("gemini-extension", "x-gemini"),
    ] {
        let (report, out) = convert(format, "buzz-pack", &dir).unwrap();
        assert_valid_pack(out.path());
        let m = read_json(&out.path().join(".plugin/plugin.json"));
        assert_eq!(m["name"], "superpowers", "{format}");
        assert!(m[key]["plugin"].is_object(), "{format}");
        let skills = std::fs::read_dir(out.path().join("skills"))
            .unwrap()
            .count();
        assert_eq!(skills, 14, "{format}");
        if format == "gemini-extension" {
            assert!(out.path().join("instructions.md").is_file());
            assert!(!findings(&report, "context-file-as-instructions").is_empty());
        }
        if format == "codex-plugin" {
            assert_eq!(m[key]["plugin"]["interface"]["brandColor"], "#F59E0B");
        }
    }
}

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// Hostile or broken inputs: never a trap, either a valid pack with a report or a clear error.
#[test]
fn hostile_inputs_are_refused_or_reported() {
    let case =
        |setup: &dyn Fn(&Path), format: &str| -> Result<(Report, tempfile::TempDir), String> {
            let dir = tempfile::tempdir().unwrap();
            setup(dir.path());
            let result = convert(format, "buzz-pack", dir.path());
            if let Ok((_, out)) = &result
                && format == "claude-plugin"
            {
                assert_valid_pack(out.path());
            }
            result
        };
    // Manifest of the wrong shape.
    let e = case(
        &|d| write(d, ".claude-plugin/plugin.json", "[1,2]"),
        "claude-plugin",
    )
    .unwrap_err();
    assert!(e.contains("not a JSON object"), "{e}");
    let e = case(
        &|d| write(d, ".claude-plugin/plugin.json", "{nope"),
        "claude-plugin",
    )
    .unwrap_err();
    assert!(e.contains("invalid JSON"), "{e}");
    // Paths leaving the plugin, wrong types everywhere, a huge odd name.
    let (report, out) = case(
        &|d| {
            write(
                d,
                ".claude-plugin/plugin.json",
                &json!({
                    "name": format!("{}../é\u{0}", "Z".repeat(5000)),
                    "agents": ["../../etc/passwd", "/etc/shadow", 7],
                    "skills": "../outside",
                    "mcpServers": ["../x.json", "https://example.invalid/x.mcpb", {"s": {"type": "ws", "url": "wss://x"}}],
                    "author": 3, "keywords": "no", "version": 1
                })
                .to_string(),
            );
            write(d, "agents/x.md", "---\nname: \"Ünïcode Name With Spaces!!\"\ndescription: [1, 2]\nmodel: {a: 1}\n---\n");
            write(d, "agents/bin.md", "---\nname: a\n---\n\u{fffd}\u{fffd}");
            write(d, "agents/open.md", "---\nname: open\ndescription: never closed\n");
            write(d, "skills/bad/SKILL.md", "---\ndescription: x: y: z\n---\nbody");
            write(d, "skills/empty/notes.txt", "no SKILL.md here");
            write(d, ".mcp.json", "{\"mcpServers\": 5}");
        },
        "claude-plugin",
    )
    .unwrap();
    let codes = common::codes(&report);
    for c in [
        "lost:dangling-reference",
        "lost:mcp-transport-unsupported",
        "lost:mcp-bundle-unsupported",
        "reinterpreted:skill-frontmatter-rewritten",
        "synthesised:description-synthesised",
        "lost:mcp-invalid",
    ] {
        assert!(codes.contains(&c.to_string()), "{c} in {codes:?}");
    }
    assert!(!out.path().join("etc").exists());
    // Nothing at all: a manifest-less, agent-less, skill-less tree still gives a clear result.
    // Nothing at all: refused, saying which layout was expected.
    let e = case(&|_| {}, "claude-plugin").unwrap_err();
    assert!(is_no_plugin(&e), "{e}");
    // Marketplace with escaping, missing and malformed entries.
    let e = case(
        &|d| {
            write(
                d,
                ".claude-plugin/marketplace.json",
                &json!({"name": "m", "plugins": [
                    {"name": "up", "source": "../../"},
                    {"name": "abs", "source": "/etc"},
                    {"source": "./x"},
                    "string",
                    {"name": "gh", "source": {"source": "github", "repo": "a/b"}}
                ]})
                .to_string(),
            )
        },
        "claude-marketplace",
    )
    .unwrap_err();
    assert!(e.contains("no plugin"), "{e}");
    let e = case(
        &|d| write(d, ".claude-plugin/marketplace.json", "{\"plugins\": {}}"),
        "claude-marketplace",
    )
    .unwrap_err();
    assert!(e.contains("plugins"), "{e}");
    // A pack that is not one.
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        ".plugin/plugin.json",
        "{\"personas\": [\"../../x.md\"]}",
    );
    assert!(convert("buzz-pack", "claude-plugin", dir.path()).is_err());
    // Unsupported pairs are refused by name.
    let e = convert("claude-plugin", "duduclaw-expert", dir.path()).unwrap_err();
    assert!(e.contains("does not convert"), "{e}");
}

#[test]
fn claude_only_mcp_keys_are_carried_not_written_into_the_pack() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join(".claude-plugin")).unwrap();
    std::fs::write(
        root.join(".claude-plugin/plugin.json"),
        json!({"name": "tools", "description": "A tool server."}).to_string(),
    )
    .unwrap();
    let mcp =
        json!({"mcpServers": {"tool": {"command": "tool", "args": ["serve"], "timeout": 5000}}});
    std::fs::write(root.join(".mcp.json"), mcp.to_string()).unwrap();

    let (report, pack) = convert("claude-plugin", "buzz-pack", root).unwrap();
    assert_eq!(
        findings(&report, "mcp-field-ignored")[0].field,
        "mcpServers.tool.timeout"
    );
    assert_eq!(
        read_json(&pack.path().join(".mcp.json"))["mcpServers"]["tool"],
        json!({"command": "tool", "args": ["serve"]})
    );
    let unknown: Vec<_> = apiary::pack::validate(pack.path())
        .diagnostics
        .into_iter()
        .filter(|d| d.code == "mcp.unknown-key")
        .map(|d| d.message)
        .collect();
    assert!(unknown.is_empty(), "{unknown:?}");

    let (_, back) = convert("buzz-pack", "claude-plugin", pack.path()).unwrap();
    assert_eq!(read_json(&back.path().join(".mcp.json")), mcp);
}
