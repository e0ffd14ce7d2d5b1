//! The Claude Code plugin converter component (`guests/converter-claude`), end to end through the
//! sandbox: every plugin of the corpus (official plugins, external plugins, the subagent
//! categories, the multi-host plugin) and both marketplaces -> persona packs checked with the pack
//! validator; Claude -> pack -> Claude round trips keeping every agent field the report does not
//! list as lost; meadow -> Claude (checked with the host's Claude plugin validator) -> pack; the
//! Codex, Cursor and Gemini manifests as inputs; and hostile inputs.

use crate::common;

use std::collections::BTreeMap;
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

/// `agents/*.md` of a Claude plugin by agent name.
fn agents_by_name(dir: &Path) -> BTreeMap<String, PathBuf> {
    let mut out = BTreeMap::new();
    let agents = dir.join("agents");
    for e in std::fs::read_dir(&agents).into_iter().flatten().flatten() {
        if let (Some(fm), _) = frontmatter(&e.path())
            && let Some(name) = fm.get("name").and_then(Value::as_str)
        {
            out.insert(name.to_string(), e.path());
        }
    }
    out
}

#[test]
fn info_and_detection() {
    let info = runner().info(common::sandbox()).unwrap().value;
    assert_eq!(info.name, "converter-claude");
    let pairs: Vec<(String, String)> = info
        .conversions
        .iter()
        .map(|c| (c.source.clone(), c.target.clone()))
        .collect();
    for (s, t) in [
        ("claude-plugin", "buzz-pack"),
        ("buzz-pack", "claude-plugin"),
        ("claude-marketplace", "buzz-pack"),
        ("codex-plugin", "buzz-pack"),
        ("cursor-plugin", "buzz-pack"),
        ("gemini-extension", "buzz-pack"),
    ] {
        assert!(pairs.contains(&(s.into(), t.into())), "{s} -> {t}");
    }
    let detect = |p: &Path| -> Vec<(String, f32)> {
        let mut d: Vec<(String, f32)> = runner()
            .detect(common::sandbox(), p)
            .unwrap()
            .value
            .into_iter()
            .map(|d| (d.format, d.confidence))
            .collect();
        d.sort_by(|a, b| b.1.total_cmp(&a.1));
        d
    };
    let top = |p: &Path| detect(p).first().map(|d| d.0.clone()).unwrap_or_default();
    assert_eq!(
        top(&common::corpus(
            "claude-plugins-official/plugins/pr-review-toolkit"
        )),
        "claude-plugin"
    );
    // Manifest-less: skills only.
    assert_eq!(
        top(&common::corpus(
            "claude-plugins-official/plugins/session-report"
        )),
        "claude-plugin"
    );
    assert_eq!(
        top(&common::corpus("claude-plugins-official")),
        "claude-marketplace"
    );
    assert_eq!(
        top(&common::corpus("claude-subagents")),
        "claude-marketplace"
    );
    // A repository that is a plugin and lists itself reads best as the plugin.
    let multi = detect(&common::corpus("multi-host-plugin"));
    assert_eq!(multi[0].0, "claude-plugin");
    for f in [
        "codex-plugin",
        "cursor-plugin",
        "gemini-extension",
        "claude-marketplace",
    ] {
        assert!(multi.iter().any(|d| d.0 == f), "{f} in {multi:?}");
    }
    assert_eq!(top(&meadow()), "buzz-pack");
    assert!(detect(&common::corpus("duduclaw-packs")).is_empty());
}

#[test]
fn every_corpus_plugin_converts_to_a_valid_pack() {
    runner(); // compiled once, outside the timing
    let started = std::time::Instant::now();
    let mut converting = std::time::Duration::ZERO;
    let (mut plugins, mut agents, mut refused) = (0, 0, 0);
    for dir in corpus_plugins() {
        let name = dir.file_name().unwrap().to_string_lossy().to_string();
        let t = std::time::Instant::now();
        let (report, out) =
            match convert_with("claude-plugin", "buzz-pack", &dir, &[("name", &name)]) {
                Ok(v) => v,
                // A folder of documentation only (its plugin lives in the marketplace entry).
                Err(e) if is_no_plugin(&e) => {
                    refused += 1;
                    continue;
                }
                Err(e) => panic!("{}: {e}", dir.display()),
            };
        converting += t.elapsed();
        assert_valid_pack(out.path());
        let manifest = read_json(&out.path().join(".plugin/plugin.json"));
        let personas = manifest["personas"].as_array().unwrap().len();
        assert!(personas >= 1, "{name}");
        agents += personas;
        plugins += 1;
        // A persona synthesised for an agent-less plugin is always said so.
        let x = &manifest["x-claude"];
        assert_eq!(
            x.get("synthesised_persona").is_some(),
            !findings(&report, "persona-synthesised").is_empty(),
            "{name}"
        );
        // Claude hooks never become persona lifecycle hooks.
        assert!(!out.path().join("hooks/hooks.json").exists(), "{name}");
        if dir.join("hooks/hooks.json").exists() {
            assert!(out.path().join("x-claude/files/hooks/hooks.json").is_file());
            assert_eq!(findings(&report, "hooks-quarantined").len(), 1, "{name}");
        }
        if dir.join("commands").is_dir() {
            assert!(!findings(&report, "commands-carried").is_empty(), "{name}");
        }
    }
    // The refused ones hold only a README and a licence (their LSP servers are defined in the
    // marketplace entry, which converts them).
    assert_eq!((plugins, refused), (41, 12));
    let secs = started.elapsed().as_secs_f64();
    eprintln!(
        "converted {plugins} plugins ({agents} personas) in {secs:.2}s ({:.2}s in the component): {:.0} personas/s end to end, {:.0} personas/s converting",
        converting.as_secs_f64(),
        agents as f64 / secs,
        agents as f64 / converting.as_secs_f64()
    );
}

#[test]
fn lenient_frontmatter_is_read_and_reported() {
    let official = common::corpus("claude-plugins-official/plugins/pr-review-toolkit");
    let (report, out) = convert("claude-plugin", "buzz-pack", &official).unwrap();
    let lenient = findings(&report, "lenient-frontmatter");
    assert_eq!(lenient.len(), 1);
    assert_eq!(lenient[0].path, "agents/silent-failure-hunter.md");
    let (fm, body) = frontmatter(&out.path().join("agents/silent-failure-hunter.persona.md"));
    let fm = fm.expect("the persona frontmatter is strict YAML now");
    assert!(fm["description"].as_str().unwrap().contains("<example>"));
    assert_eq!(fm["display_name"], "Silent Failure Hunter");
    assert!(body.contains("silent failures") || !body.is_empty());

    // The 8 VoltAgent files that fail strict YAML, across their category plugins.
    let mut total = 0;
    for dir in dirs("claude-subagents/categories") {
        let (report, out) = convert("claude-plugin", "buzz-pack", &dir).unwrap();
        for f in findings(&report, "lenient-frontmatter") {
            total += 1;
            let stem = f.path.trim_end_matches(".md");
            let (fm, _) = frontmatter(&out.path().join(format!("agents/{stem}.persona.md")));
            let fm = fm.unwrap();
            assert!(
                fm["description"].as_str().unwrap().contains("Triggers on"),
                "{}",
                f.path
            );
        }
    }
    assert_eq!(total, 8);
}

#[test]
fn agent_fields_map_as_formats_md_says() {
    let dir = common::corpus("claude-plugins-official/plugins/pr-review-toolkit");
    let (report, out) = convert("claude-plugin", "buzz-pack", &dir).unwrap();
    let (fm, body) = frontmatter(&out.path().join("agents/code-reviewer.persona.md"));
    let fm = fm.unwrap();
    // Only persona keys in the frontmatter; the alias pinned to a provider:model id.
    assert_eq!(fm["name"], "code-reviewer");
    assert_eq!(fm["model"], "anthropic:claude-opus-4-6");
    assert!(fm.get("color").is_none());
    let (_, original_body) = frontmatter(&dir.join("agents/code-reviewer.md"));
    assert_eq!(body.trim(), original_body.trim());
    let manifest = read_json(&out.path().join(".plugin/plugin.json"));
    let x = &manifest["x-claude"]["agents"]["code-reviewer"];
    assert_eq!(x["model"], "opus");
    assert_eq!(x["fields"]["color"], "green");
    assert_eq!(manifest["author"]["name"], "Anthropic");
    assert!(
        findings(&report, "model-alias-pinned")
            .iter()
            .any(|f| f.path == "agents/code-reviewer.md")
    );
    assert!(
        findings(&report, "model-inherit")
            .iter()
            .any(|f| f.path == "agents/comment-analyzer.md")
    );
    assert!(
        findings(&report, "carried-in-extension")
            .iter()
            .any(|f| f.path == "agents/code-reviewer.md" && f.field == "color")
    );
    // `inherit` leaves the persona without a model.
    let (fm, _) = frontmatter(&out.path().join("agents/comment-analyzer.persona.md"));
    assert!(fm.unwrap().get("model").is_none());
    assert!(
        out.path()
            .join("x-claude/files/commands/review-pr.md")
            .is_file()
    );

    // Agents listed in plugin.json from the plugin root (VoltAgent): the unlisted one is not an
    // agent, and the report says why.
    let dir = common::corpus("claude-subagents/categories/06-developer-experience");
    let (report, out) = convert("claude-plugin", "buzz-pack", &dir).unwrap();
    let manifest = read_json(&out.path().join(".plugin/plugin.json"));
    assert_eq!(manifest["personas"].as_array().unwrap().len(), 15);
    let unlisted = findings(&report, "agent-unlisted");
    assert_eq!(unlisted[0].path, "docs-drift-editor.md");
    let (fm, _) = frontmatter(&out.path().join("agents/cli-developer.persona.md"));
    assert!(fm.unwrap().get("tools").is_none());
    assert!(manifest["x-claude"]["agents"]["cli-developer"]["fields"]["tools"].is_string());

    // MCP: a flat map is wrapped; `${CLAUDE_PLUGIN_ROOT}` is kept and reported.
    let (report, out) = convert(
        "claude-plugin",
        "buzz-pack",
        &common::corpus("claude-plugins-official/plugins/example-plugin"),
    )
    .unwrap();
    let mcp = read_json(&out.path().join(".mcp.json"));
    assert_eq!(mcp["mcpServers"]["example-server"]["type"], "http");
    assert_eq!(findings(&report, "mcp-wrapped").len(), 1);
    let (report, out) = convert(
        "claude-plugin",
        "buzz-pack",
        &common::corpus("claude-plugins-official/external_plugins/discord"),
    )
    .unwrap();
    let mcp = read_json(&out.path().join(".mcp.json"));
    assert!(
        mcp["mcpServers"]["discord"]["args"]
            .to_string()
            .contains("${CLAUDE_PLUGIN_ROOT}")
    );
    assert_eq!(findings(&report, "mcp-variable-unsupported").len(), 1);
}

/// Claude -> pack -> Claude keeps every agent's frontmatter and body, except what a report lists
/// as lost; for files that were not strict YAML, the names, keys and bodies.
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
        let out_agents = agents_by_name(back.path());
        for (_, entry) in agents {
            let file = entry["file"].as_str().unwrap();
            let name = entry["name"].as_str().unwrap();
            let (orig, orig_body) = frontmatter(&dir.join(file));
            // Names outside Claude's [a-z0-9-] come back slugged, and the report says so.
            let claude_ok = name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
            let expected = if claude_ok {
                name.to_string()
            } else {
                name.to_ascii_lowercase().replace(['.', '_', ' '], "-")
            };
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
            let out = out_agents
                .get(&expected)
                .unwrap_or_else(|| panic!("{}: agent {name} missing", dir.display()));
            let (back_fm, back_body) = frontmatter(out);
            let back_fm = back_fm.unwrap();
            assert_eq!(
                back_body.trim(),
                orig_body.trim(),
                "{}: {file}",
                dir.display()
            );
            match orig {
                Some(orig) => {
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
                    // Lenient originals: same keys, same name; values now strict YAML.
                    assert_eq!(back_fm["name"], name);
                    assert!(back_fm["description"].as_str().unwrap().len() > 20);
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
                if k == "agents" {
                    continue; // agents are always written to agents/ (reported)
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
        "reinterpreted:mcp-transport-unsupported",
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
