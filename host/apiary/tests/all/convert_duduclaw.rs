//! The DuDuClaw expert pack converter component (`guests/converter-duduclaw`), end to end through
//! the sandbox: the 6 starter packs, the 5 agent templates and the preset of the corpus -> persona
//! packs checked with the pack validator; expert -> pack -> expert and meadow -> expert -> pack
//! round trips; a multi-agent pack (reports_to order, skills, MCP, hooks, wiki, evals); a
//! reports_to cycle refused; hostile inputs.

use crate::common;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use apiary::sandbox::converter::{ConverterRunner, Report};
use serde_json::{Map, Value};

const EXPERT: &str = "duduclaw-expert";
const BUZZ: &str = "buzz-pack";

fn runner() -> &'static ConverterRunner {
    static R: OnceLock<ConverterRunner> = OnceLock::new();
    R.get_or_init(|| common::converter("converter_duduclaw"))
}

fn convert(
    source: &str,
    target: &str,
    input: &Path,
) -> Result<(Report, tempfile::TempDir), String> {
    common::convert(runner(), source, target, input)
}

fn meadow() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/meadow")
}

fn starter_packs() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> =
        std::fs::read_dir(common::corpus("duduclaw-packs/distribution/packs"))
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.is_dir())
            .collect();
    out.sort();
    out
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

fn assert_valid_expert(dir: &Path) {
    let v = apiary::convert::validate::validate(EXPERT, dir);
    assert!(v.ok(), "{}: {:#?}", dir.display(), v.errors);
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn read_toml(path: &Path) -> toml::Table {
    std::fs::read_to_string(path).unwrap().parse().unwrap()
}

/// Frontmatter fields and body of a persona file.
fn persona(path: &Path) -> (Map<String, Value>, String) {
    let text = std::fs::read_to_string(path).unwrap();
    let rest = text.strip_prefix("---\n").unwrap();
    let end = rest.find("\n---\n").unwrap();
    let fields: Value = serde_yaml_ng::from_str(&rest[..end]).unwrap();
    let Value::Object(fields) = fields else {
        panic!("frontmatter is not a map")
    };
    (fields, rest[end + 5..].to_string())
}

fn persona_names(pack: &Path) -> Vec<String> {
    read_json(&pack.join(".plugin/plugin.json"))["personas"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            persona(&pack.join(p.as_str().unwrap())).0["name"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect()
}

fn has(report: &Report, code: &str) -> bool {
    common::codes(report)
        .iter()
        .any(|c| c.ends_with(&format!(":{code}")))
}

fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// Every file under `dir`, relative, with its bytes.
fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, Vec<u8>)>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(root, &p, out);
            } else {
                let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
                out.push((rel, std::fs::read(&p).unwrap()));
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

/// A three-agent team whose file order is not parents-first, with a bundled skill, an external
/// one, per-agent MCP, hooks, a wiki page and evals.
fn team_pack(root: &Path) {
    write(
        root,
        "expert.toml",
        r#"[expert]
name = "clinic-team"
description = "診所前台團隊"
version = "1.2.0"
author = "someone"
license = "MIT"
tags = ["clinic"]
category = "health"
future_key = { nested = true }

[expert.display_name]
"zh-TW" = "診所前台團隊"
en = "Clinic team"

[expert.prompts]
recommended = ["預約明天下午"]

[expert.requires]
env = ["CLINIC_API_KEY"]
bins = ["ffmpeg"]

[[expert.agents]]
name = "nurse"
role = "worker"
display_name = "護理師"
reports_to = "front"
department = "care"
rank = "staff"
trigger = "@nurse"
skills = ["triage", "external-skill"]

[[expert.agents]]
name = "front"
role = "main"
display_name = "前台"
reports_to = ""
rank = "manager"

[[expert.agents]]
name = "night"
role = "worker"
reports_to = "nurse"
"#,
    );
    write(root, "agents/nurse/soul.md", "# 護理師\n\n你負責分診。\n");
    write(root, "agents/front/soul.md", "# 前台\n\n你是前台。\n");
    write(root, "agents/night/soul.md", "# Night\n");
    write(
        root,
        "agents/front/agent.partial.toml",
        "[model]\npreferred = \"claude-sonnet-4-6\"\nfallbacks = [\"claude-haiku-4-5\"]\n\n[budget]\nmonthly_limit_cents = 500\n\n[permissions]\nallowed_channels = [\"line\"]\n",
    );
    write(
        root,
        "agents/nurse/.mcp.json",
        r#"{"mcpServers": {"records": {"command": "records-mcp", "args": ["--stdio"], "env": {"TOKEN": "${RECORDS_TOKEN}"}}, "legacy": {"type": "sse", "url": "https://example.invalid/sse"}}}"#,
    );
    write(
        root,
        "skills/triage/SKILL.md",
        "---\nname: triage\ndescription: Sort patients by urgency\n---\n\nSteps.\n",
    );
    write(root, "hooks/on_install.sh", "#!/bin/sh\necho hi\n");
    write(root, "wiki/clinic/faq.md", "# FAQ\n");
    write(root, "evals/basic.jsonl", "{\"q\": \"hi\"}\n");
}

#[test]
fn info_and_detection() {
    let info = runner().info(common::sandbox()).unwrap().value;
    assert_eq!(info.name, "converter-duduclaw");
    let pairs: Vec<(String, String)> = info
        .conversions
        .iter()
        .map(|c| (c.source.clone(), c.target.clone()))
        .collect();
    assert!(pairs.contains(&(EXPERT.into(), BUZZ.into())));
    assert!(pairs.contains(&(BUZZ.into(), EXPERT.into())));

    let found = runner()
        .detect(common::sandbox(), &starter_packs()[0])
        .unwrap()
        .value;
    assert_eq!(found[0].format, EXPERT);
    assert_eq!(found[0].confidence, 1.0);
    let found = runner().detect(common::sandbox(), &meadow()).unwrap().value;
    assert!(
        found
            .iter()
            .any(|d| d.format == BUZZ && d.confidence == 1.0)
    );
    assert!(!found.iter().any(|d| d.format == EXPERT));
    let template = common::corpus("duduclaw-packs/templates/evaluator");
    let found = runner().detect(common::sandbox(), &template).unwrap().value;
    assert!(
        found[0].format == EXPERT && found[0].confidence < 1.0,
        "{found:?}"
    );
}

/// Bulk: every starter pack, agent template and the preset of the corpus converts to a persona
/// pack that validates; CJK text survives as written.
#[test]
fn every_corpus_item_converts_to_a_valid_pack() {
    let mut items = starter_packs();
    for t in [
        "evaluator",
        "manufacturing",
        "orchestrator",
        "restaurant",
        "trading",
        "presets/system-operator",
    ] {
        items.push(common::corpus(&format!("duduclaw-packs/templates/{t}")));
    }
    assert_eq!(items.len(), 12);
    for item in &items {
        let (report, out) =
            convert(EXPERT, BUZZ, item).unwrap_or_else(|e| panic!("{}: {e}", item.display()));
        assert_valid_pack(out.path());
        let names = persona_names(out.path());
        assert_eq!(names.len(), 1, "{}", item.display());
        let manifest = read_json(&out.path().join(".plugin/plugin.json"));
        assert!(manifest["x-expert"].is_object());
        if item.join("expert.toml").is_file() {
            // The soul is the body, byte for byte; the zh-TW title is the pack name.
            let agent = item.join("agents").join(&names[0]);
            let soul = std::fs::read_to_string(agent.join("soul.md")).unwrap();
            let (fields, body) =
                persona(&out.path().join(format!("agents/{}.persona.md", names[0])));
            assert_eq!(body.trim_start_matches('\n'), soul);
            assert!(
                fields["display_name"]
                    .as_str()
                    .unwrap()
                    .chars()
                    .any(|c| c > '\u{2e80}')
            );
            assert!(
                fields["triggers"]["keywords"][0]
                    .as_str()
                    .unwrap()
                    .starts_with('@')
            );
            let expert = read_toml(&item.join("expert.toml"));
            assert_eq!(
                manifest["name"],
                expert["expert"]["display_name"]["zh-TW"].as_str().unwrap()
            );
            assert_eq!(manifest["id"], expert["expert"]["name"].as_str().unwrap());
            assert!(has(&report, "description-synthesised"));
            assert!(has(&report, "carried-in-extension"));
        } else {
            assert!(has(&report, "agent-template"), "{report:?}");
            assert!(fields_model(out.path()).is_some() || item.ends_with("system-operator"));
        }
    }
}

fn fields_model(pack: &Path) -> Option<String> {
    let name = &persona_names(pack)[0];
    persona(&pack.join(format!("agents/{name}.persona.md"))).0["model"]
        .as_str()
        .map(str::to_string)
}

/// expert -> pack -> expert keeps expert.toml, every soul and every partial exactly.
#[test]
fn starter_packs_round_trip_losslessly() {
    for item in starter_packs() {
        let (_, pack) = convert(EXPERT, BUZZ, &item).unwrap();
        let (report, back) = convert(BUZZ, EXPERT, pack.path()).unwrap();
        assert!(report.lost.is_empty(), "{report:?}");
        assert_valid_expert(back.path());
        assert_eq!(
            read_toml(&back.path().join("expert.toml")),
            read_toml(&item.join("expert.toml"))
        );
        for (rel, bytes) in files(&item) {
            if rel.ends_with(".toml") {
                assert_eq!(
                    read_toml(&back.path().join(&rel)),
                    read_toml(&item.join(&rel)),
                    "{rel}"
                );
            } else {
                assert_eq!(
                    std::fs::read(back.path().join(&rel)).unwrap(),
                    bytes,
                    "{rel}"
                );
            }
        }
    }
}

/// An expert agent's preferred model goes through the shared model table: an alias is pinned, a
/// typo is lost (no model, never a silent fall-back), and both come back as written.
#[test]
fn expert_models_map_through_the_model_table() {
    let input = tempfile::tempdir().unwrap();
    write(
        input.path(),
        "expert.toml",
        "[expert]\nname = \"desk\"\ndescription = \"d\"\nversion = \"0.1.0\"\n\n\
         [[expert.agents]]\nname = \"quick\"\nrole = \"main\"\n\n\
         [[expert.agents]]\nname = \"typo\"\nrole = \"worker\"\nreports_to = \"quick\"\n",
    );
    for (agent, model) in [("quick", "haiku"), ("typo", "sonet-4")] {
        write(input.path(), &format!("agents/{agent}/soul.md"), "# Soul\n");
        write(
            input.path(),
            &format!("agents/{agent}/agent.partial.toml"),
            &format!("[model]\npreferred = \"{model}\"\n"),
        );
    }
    let (report, pack) = convert(EXPERT, BUZZ, input.path()).unwrap();
    assert_valid_pack(pack.path());
    let (quick, _) = persona(&pack.path().join("agents/quick.persona.md"));
    assert_eq!(quick["model"], "anthropic:claude-haiku-4-5");
    assert!(has(&report, "model-alias-pinned"), "{report:?}");
    let (typo, _) = persona(&pack.path().join("agents/typo.persona.md"));
    assert!(typo.get("model").is_none(), "{typo:?}");
    let lost: Vec<_> = report.lost.iter().map(|f| f.code.as_str()).collect();
    assert_eq!(lost, ["model-unknown"], "{report:?}");
    let (_, back) = convert(BUZZ, EXPERT, pack.path()).unwrap();
    for agent in ["quick", "typo"] {
        let rel = format!("agents/{agent}/agent.partial.toml");
        assert_eq!(
            read_toml(&back.path().join(&rel)),
            read_toml(&input.path().join(&rel)),
            "{rel}"
        );
    }
}

#[test]
fn team_pack_maps_as_formats_md_says_and_round_trips() {
    let input = tempfile::tempdir().unwrap();
    team_pack(input.path());
    let (report, pack) = convert(EXPERT, BUZZ, input.path()).unwrap();
    assert_valid_pack(pack.path());
    // Parents first, siblings in file order.
    assert_eq!(persona_names(pack.path()), ["front", "nurse", "night"]);
    let (front, body) = persona(&pack.path().join("agents/front.persona.md"));
    // Through the shared model table, reported; the value as written comes back on the way out.
    assert_eq!(front["model"], "anthropic:claude-sonnet-4-6");
    assert!(has(&report, "model-id-prefixed"), "{report:?}");
    assert_eq!(body, "\n# 前台\n\n你是前台。\n");
    let (nurse, _) = persona(&pack.path().join("agents/nurse.persona.md"));
    // Its own skill, then the wiki every persona gets (Expert Pack Format v1.0, §2 Layout: the
    // shared-knowledge pages reach the agents).
    assert_eq!(
        nurse["skills"],
        serde_json::json!(["./skills/triage/", "./skills/wiki/"])
    );
    assert!(pack.path().join("skills/wiki/clinic/faq.md").is_file());
    assert!(has(&report, "wiki-as-skill"));
    assert_eq!(nurse["mcp_servers"][0]["name"], "records");
    assert_eq!(nurse["mcp_servers"].as_array().unwrap().len(), 1);
    assert!(has(&report, "mcp-server-unsupported"));
    // Hierarchy and partial config ride in the extension block.
    let manifest = read_json(&pack.path().join(".plugin/plugin.json"));
    let ext = &manifest["x-expert"];
    assert_eq!(ext["agents"]["nurse"]["table"]["reports_to"], "front");
    assert_eq!(ext["agents"]["nurse"]["table"]["department"], "care");
    assert_eq!(
        ext["agents"]["front"]["partial"]["budget"]["monthly_limit_cents"],
        500
    );
    assert_eq!(manifest["name"], "Clinic team");
    assert_eq!(manifest["keywords"], serde_json::json!(["clinic"]));
    // Hooks are quarantined: carried, never wired.
    assert!(manifest.get("hooks_config").is_none());
    assert!(!pack.path().join("hooks").exists());
    assert!(pack.path().join("x-expert/hooks/on_install.sh").is_file());
    let quarantined: Vec<_> = report
        .reinterpreted
        .iter()
        .filter(|f| f.code == "hooks-quarantined")
        .collect();
    assert_eq!(quarantined.len(), 1);
    assert_eq!(quarantined[0].path, "hooks/on_install.sh");
    let carried = "evals/basic.jsonl";
    assert!(pack.path().join("x-expert").join(carried).is_file());
    assert!(
        report
            .reinterpreted
            .iter()
            .any(|f| f.code == "carried-as-file" && f.path == carried)
    );

    // Back: every file and every TOML value as it was (file order of agents included).
    let (_, back) = convert(BUZZ, EXPERT, pack.path()).unwrap();
    assert_valid_expert(back.path());
    let mut want = read_toml(&input.path().join("expert.toml"));
    // The only addition: the MCP server's ${RECORDS_TOKEN} is declared in requires.env.
    want["expert"]["requires"]["env"]
        .as_array_mut()
        .unwrap()
        .push("RECORDS_TOKEN".into());
    assert_eq!(read_toml(&back.path().join("expert.toml")), want);
    for (rel, bytes) in files(input.path()) {
        if rel == "expert.toml" {
            continue;
        }
        let got = std::fs::read(back.path().join(&rel)).unwrap_or_else(|e| panic!("{rel}: {e}"));
        if rel.ends_with(".toml") {
            assert_eq!(
                read_toml(&back.path().join(&rel)),
                read_toml(&input.path().join(&rel))
            );
        } else if rel.ends_with(".json") {
            assert_eq!(
                read_json(&back.path().join(&rel)),
                read_json(&input.path().join(&rel))
            );
        } else {
            assert_eq!(got, bytes, "{rel}");
        }
    }
}

/// meadow -> expert -> pack: the expert pack has the §5.1 shape, and the pack comes back with
/// every manifest key, persona field, body, skill, MCP server and the instructions.
#[test]
fn meadow_round_trips_through_an_expert_pack() {
    let (report, expert) = convert(BUZZ, EXPERT, &meadow()).unwrap();
    assert_valid_expert(expert.path());
    let t = read_toml(&expert.path().join("expert.toml"));
    let agents = t["expert"]["agents"].as_array().unwrap();
    assert_eq!(agents[0]["name"].as_str(), Some("pip"));
    assert_eq!(agents[0]["role"].as_str(), Some("main"));
    assert!(
        agents[1..].iter().all(
            |a| a["role"].as_str() == Some("worker") && a["reports_to"].as_str() == Some("pip")
        )
    );
    assert_eq!(
        t["expert"]["name"].as_str(),
        Some("com-example-meadow-security-team")
    );
    assert_eq!(
        t["expert"]["display_name"]["en"].as_str(),
        Some("Meadow Security Team")
    );
    assert_eq!(
        t["expert"]["requires"]["env"][0].as_str(),
        Some("GITHUB_TOKEN")
    );
    let partial = read_toml(&expert.path().join("agents/pip/agent.partial.toml"));
    assert_eq!(
        partial["model"]["preferred"].as_str(),
        Some("claude-4-opus-20250514")
    );
    for a in ["pip", "lep", "thistle", "berry"] {
        let mcp = read_json(&expert.path().join(format!("agents/{a}/.mcp.json")));
        assert!(mcp["mcpServers"]["github"].is_object(), "{a}");
    }
    assert!(expert.path().join("wiki/pack/instructions.md").is_file());
    for code in [
        "role-synthesised",
        "mcp-duplicated",
        "requires-env-derived",
        "model-provider-stripped",
        "instructions-as-wiki",
        "carried-in-extension",
    ] {
        assert!(has(&report, code), "{code}: {report:?}");
    }
    assert!(report.lost.is_empty(), "{report:?}");

    let (_, back) = convert(EXPERT, BUZZ, expert.path()).unwrap();
    assert_valid_pack(back.path());
    let mut want = read_json(&meadow().join(".plugin/plugin.json"));
    let mut got = read_json(&back.path().join(".plugin/plugin.json"));
    got.as_object_mut().unwrap().remove("x-expert");
    want.as_object_mut().unwrap().remove("x-expert");
    assert_eq!(got, want);
    for p in want["personas"].as_array().unwrap() {
        let p = p.as_str().unwrap();
        assert_eq!(
            persona(&back.path().join(p)),
            persona(&meadow().join(p)),
            "{p}"
        );
    }
    assert_eq!(
        read_json(&back.path().join(".mcp.json")),
        read_json(&meadow().join(".mcp.json"))
    );
    for rel in [
        "instructions.md",
        "skills/code-review/SKILL.md",
        "skills/security-review/SKILL.md",
        "skills/shared/SKILL.md",
        "README.md",
    ] {
        assert_eq!(
            std::fs::read(back.path().join(rel)).unwrap(),
            std::fs::read(meadow().join(rel)).unwrap(),
            "{rel}"
        );
    }
}

#[test]
fn reports_to_cycles_are_refused_with_a_structured_reason() {
    let input = tempfile::tempdir().unwrap();
    write(
        input.path(),
        "expert.toml",
        "[expert]\nname = \"loop\"\ndescription = \"d\"\nversion = \"1.0.0\"\n\n[[expert.agents]]\nname = \"a\"\nreports_to = \"b\"\n\n[[expert.agents]]\nname = \"b\"\nreports_to = \"c\"\n\n[[expert.agents]]\nname = \"c\"\nreports_to = \"a\"\n\n[[expert.agents]]\nname = \"d\"\n",
    );
    for n in ["a", "b", "c", "d"] {
        write(input.path(), &format!("agents/{n}/soul.md"), "# x\n");
    }
    let err = convert(EXPERT, BUZZ, input.path()).unwrap_err();
    assert!(err.contains("reports-to-cycle"), "{err}");
    assert!(err.contains("a -> b -> c -> a"), "{err}");
    // A self-report is a cycle too.
    write(
        input.path(),
        "expert.toml",
        "[expert]\nname = \"loop\"\ndescription = \"d\"\nversion = \"1.0.0\"\n\n[[expert.agents]]\nname = \"a\"\nreports_to = \"a\"\n",
    );
    assert!(
        convert(EXPERT, BUZZ, input.path())
            .unwrap_err()
            .contains("reports-to-cycle")
    );
}

/// CJK agent names have no slug characters: they get a synthesised persona name, and the way back
/// gives a valid DuDuClaw id (the original is kept in the extension block).
#[test]
fn cjk_agent_names_slug_safely() {
    let input = tempfile::tempdir().unwrap();
    write(
        input.path(),
        "expert.toml",
        "[expert]\nname = \"診所\"\ndescription = \"d\"\nversion = \"1.0.0\"\n\n[[expert.agents]]\nname = \"前台\"\n\n[[expert.agents]]\nname = \"護理師\"\nreports_to = \"前台\"\n",
    );
    write(input.path(), "agents/前台/soul.md", "# 前台\n");
    write(input.path(), "agents/護理師/soul.md", "# 護理師\n");
    let (report, pack) = convert(EXPERT, BUZZ, input.path()).unwrap();
    assert_valid_pack(pack.path());
    assert_eq!(persona_names(pack.path()), ["agent-1", "agent-2"]);
    assert!(
        report
            .normalised
            .iter()
            .any(|f| f.message == "前台 -> agent-1")
    );
    let manifest = read_json(&pack.path().join(".plugin/plugin.json"));
    assert_eq!(manifest["id"], "expert-pack");
    assert_eq!(
        manifest["x-expert"]["agents"]["agent-1"]["table"]["name"],
        "前台"
    );
    let (report, back) = convert(BUZZ, EXPERT, pack.path()).unwrap();
    assert_valid_expert(back.path());
    let t = read_toml(&back.path().join("expert.toml"));
    assert_eq!(
        t["expert"]["agents"][1]["reports_to"].as_str(),
        Some("agent-1")
    );
    assert!(has(&report, "name-normalised"));
}

#[test]
fn hostile_inputs_are_refused_or_reported() {
    let head = "[expert]\nname = \"x\"\ndescription = \"d\"\nversion = \"1.0.0\"\n";
    // (what, files to write, a word of the expected refusal)
    type Case<'a> = (&'a str, Vec<(&'a str, String)>, &'a str);
    let cases: Vec<Case> = vec![
        (
            "path traversal in an agent name",
            vec![
                (
                    "expert.toml",
                    format!("{head}[[expert.agents]]\nname = \"../x\"\n"),
                ),
                ("x/soul.md", "evil".into()),
            ],
            "not a usable agent name",
        ),
        (
            "missing soul.md",
            vec![(
                "expert.toml",
                format!("{head}[[expert.agents]]\nname = \"a\"\n"),
            )],
            "no agents/a/soul.md",
        ),
        (
            "huge TOML",
            vec![(
                "expert.toml",
                format!("{head}pad = \"{}\"\n", "x".repeat(5 * 1024 * 1024)),
            )],
            "larger than",
        ),
        (
            "deep nesting",
            vec![(
                "expert.toml",
                format!("{head}a = {}{}\n", "[".repeat(5000), "]".repeat(5000)),
            )],
            "nested deeper",
        ),
        (
            "not TOML",
            vec![("expert.toml", "[expert\nname=".into())],
            "invalid TOML",
        ),
        (
            "no [expert]",
            vec![("expert.toml", "name = 1\n".into())],
            "no [expert] table",
        ),
        (
            "agents of the wrong type",
            vec![("expert.toml", format!("{head}agents = \"x\"\n"))],
            "not an array",
        ),
        (
            "no agents",
            vec![("expert.toml", head.to_string())],
            "no [[expert.agents]]",
        ),
        (
            "duplicate agents",
            vec![
                (
                    "expert.toml",
                    format!(
                        "{head}[[expert.agents]]\nname = \"a\"\n[[expert.agents]]\nname = \"a\"\n"
                    ),
                ),
                ("agents/a/soul.md", "s".into()),
            ],
            "declared twice",
        ),
        (
            "invalid UTF-8",
            vec![(
                "expert.toml",
                String::from_utf8_lossy(&[0xff, 0xfe]).into_owned(),
            )],
            "",
        ),
    ];
    for (what, files, needle) in cases {
        let input = tempfile::tempdir().unwrap();
        for (rel, text) in files {
            write(input.path(), rel, &text);
        }
        match convert(EXPERT, BUZZ, input.path()) {
            Err(e) => assert!(e.contains(needle), "{what}: {e}"),
            Ok((report, out)) => {
                assert!(needle.is_empty(), "{what}: converted: {report:?}");
                assert_valid_pack(out.path());
            }
        }
    }

    // Wrong value types inside a readable pack are carried or reported, never a crash.
    let input = tempfile::tempdir().unwrap();
    write(
        input.path(),
        "expert.toml",
        "[expert]\nname = 7\nauthor = [1]\ntags = \"t\"\n\n[[expert.agents]]\nname = \"a\"\ndisplay_name = 3\nreports_to = \"ghost\"\nskills = \"nope\"\n",
    );
    write(input.path(), "agents/a/soul.md", "s");
    write(
        input.path(),
        "agents/a/agent.partial.toml",
        "model = \"flat\"\n",
    );
    write(input.path(), "agents/a/.mcp.json", "[1, 2]");
    let (report, out) = convert(EXPERT, BUZZ, input.path()).unwrap();
    assert_valid_pack(out.path());
    assert!(has(&report, "reports-to-unknown"));
    assert!(has(&report, "default-applied"));

    // A persona pack whose extension block was tampered with: hooks are not revived.
    let input = tempfile::tempdir().unwrap();
    write(
        input.path(),
        "expert.toml",
        "[expert]\nname = \"x\"\ndescription = \"d\"\nversion = \"1.0.0\"\n\n[expert.x-buzz.manifest]\nid = \"x\"\nname = \"X\"\nversion = \"1.0.0\"\nhooks_config = \"hooks/hooks.json\"\n\n[expert.x-buzz.personas.a]\nfile = \"../../escape.md\"\n\n[expert.x-buzz.personas.a.fields]\nname = \"a\"\ndisplay_name = \"A\"\ndescription = \"d\"\nhooks = { on_start = \"hooks/evil.sh\" }\n\n[[expert.agents]]\nname = \"a\"\n",
    );
    write(input.path(), "agents/a/soul.md", "s");
    write(input.path(), "hooks/evil.sh", "rm -rf /");
    let (report, out) = convert(EXPERT, BUZZ, input.path()).unwrap();
    assert_valid_pack(out.path());
    let manifest = read_json(&out.path().join(".plugin/plugin.json"));
    assert!(manifest.get("hooks_config").is_none());
    assert_eq!(manifest["personas"][0], "agents/a.persona.md");
    assert!(
        persona(&out.path().join("agents/a.persona.md"))
            .0
            .get("hooks")
            .is_none()
    );
    assert!(has(&report, "hooks-quarantined"));

    // Unsupported directions and an empty persona pack are refused.
    let empty = tempfile::tempdir().unwrap();
    assert!(
        convert(EXPERT, "claude-plugin", empty.path())
            .unwrap_err()
            .contains("not")
    );
    assert!(convert(BUZZ, EXPERT, empty.path()).is_err());
}
