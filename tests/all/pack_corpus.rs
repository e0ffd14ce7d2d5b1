//! Real packs written by others (`../shared/corpus/buzz-packs`, used read-only as inputs by path):
//! every one is validated and inspected; where a pack drifts from the spec, the test asserts why.

use std::path::{Path, PathBuf};

use apiary_e2e::corpus;
use serde_json::{Value, json};

use crate::support::pack::*;

const SMS_OPERATOR: &str = "buzz-packs/block-buzz/crates/buzz-persona/packs/sms-operator";
const COMMUNITY_SQUAD: &str = "buzz-packs/syncreus-hivepack/packs/community-squad";
const SHIP_SQUAD: &str = "buzz-packs/syncreus-hivepack/packs/ship-squad";

fn pack(rel: &str) -> PathBuf {
    let p = corpus().join(rel);
    assert!(
        p.join(".plugin/plugin.json").is_file(),
        "{} missing",
        p.display()
    );
    p
}

fn validate(dir: &Path) -> Validation {
    let home = tempfile::tempdir().unwrap();
    validate_dir(dir, home.path())
}

fn inspect(dir: &Path) -> Value {
    let home = tempfile::tempdir().unwrap();
    inspect_dir(dir, home.path(), &[])
}

fn skills(p: &Value) -> Vec<&str> {
    p["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect()
}

/// Every pack in the corpus is one this suite knows about (a new one needs its expectations).
#[test]
fn every_corpus_pack_is_covered() {
    let root = corpus().join("buzz-packs");
    let mut found = Vec::new();
    let mut stack = vec![root.clone()];
    while let Some(dir) = stack.pop() {
        if dir.join(".plugin/plugin.json").is_file() {
            found.push(
                dir.strip_prefix(corpus())
                    .unwrap()
                    .to_string_lossy()
                    .into_owned(),
            );
            continue;
        }
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            }
        }
    }
    found.sort();
    let mut known = vec![SMS_OPERATOR, COMMUNITY_SQUAD, SHIP_SQUAD];
    known.sort();
    assert_eq!(found, known);
    for rel in &found {
        let v = validate(&corpus().join(rel));
        assert!(matches!(v.code, 0 | 2), "{rel}: {:#}", v.json);
    }
}

#[test]
fn sms_operator_is_clean() {
    let dir = pack(SMS_OPERATOR);
    validate(&dir).assert_clean();
    let all = inspect(&dir);
    assert_eq!(all["pack"]["id"], "com.buzz.sms-operator");
    assert_eq!(all["pack"]["engines_buzz"], ">=0.1.0");
    let personas = all["personas"].as_array().unwrap();
    assert_eq!(personas.len(), 1);
    let p = &personas[0];
    assert_eq!(p["identity"]["name"], "sms-operator");
    assert_eq!(p["identity"]["display_name"], "SMS Operator");
    assert_eq!(p["version"], "0.1.0");
    assert_eq!(p["subscribe"], json!(["sms-inbox"]));
    assert_eq!(
        p["triggers"],
        json!({"mentions": false, "keywords": [], "all_messages": true}),
        "keywords is not written: it takes its built-in"
    );
    assert_eq!(p["sources"]["triggers"], "persona");
    assert_eq!(p["thread_replies"], true);
    assert_eq!(p["broadcast_replies"], false);
    // No model and no defaults: the runtime keeps its own model; temperature is the built-in.
    assert_eq!(p["model"], Value::Null);
    assert_eq!(p["env"], json!({"GOOSE_TEMPERATURE": "0.7"}));
    assert_eq!(p["skills"], json!([]));
    assert_eq!(p["mcp_servers"], json!([]));
    let prompt = p["system_prompt"].as_str().unwrap();
    assert!(prompt.starts_with("You are the SMS Operator."), "{prompt}");
    assert!(
        !prompt.contains("# Team Instructions"),
        "the pack has no instructions.md"
    );
    assert!(!prompt.contains("Available skills"));
}

#[test]
fn community_squad_is_clean() {
    let dir = pack(COMMUNITY_SQUAD);
    validate(&dir).assert_clean();
    let all = inspect(&dir);
    let greeter = persona_in(&all, "greeter");
    let rules = persona_in(&all, "rules");
    assert_eq!(greeter["identity"]["display_name"], "Greeter 👋");
    // `skills: []` claims nothing, and the pack has no skills/ directory.
    assert_eq!(greeter["skills"], json!([]));
    assert_eq!(
        greeter["thread_replies"], false,
        "persona beats the pack default"
    );
    assert_eq!(greeter["sources"]["thread_replies"], "persona");
    assert_eq!(rules["thread_replies"], true);
    assert_eq!(
        rules["triggers"]["keywords"],
        json!(["rules", "allowed", "policy", "house rules"])
    );
    // `subscribe: []` in defaults counts as present.
    assert_eq!(rules["subscribe"], json!([]));
    assert_eq!(rules["sources"]["subscribe"], "pack_defaults");
    for p in [&greeter, &rules] {
        let prompt = p["system_prompt"].as_str().unwrap();
        assert!(
            prompt.contains("\n\n---\n# Team Instructions\n# HivePack Community Squad"),
            "instructions.md is appended: {prompt}"
        );
    }
}

#[test]
fn ship_squad_warns_that_its_hooks_json_is_not_the_spec_shape() {
    let dir = pack(SHIP_SQUAD);
    let v = validate(&dir);
    v.assert_exit(2);
    assert_eq!(v.json["valid"], true);
    assert_eq!(v.json["errors"], 0);
    assert_eq!(v.json["warnings"], 1, "{:#}", v.json);
    let d = v.one("hooks.not-spec-shape");
    assert_eq!(d["severity"], "warning");
    assert_eq!(d["file"], "hooks/hooks.json");
    let msg = d["message"].as_str().unwrap();
    assert!(
        msg.contains("on_start") && msg.contains("no pack hook will run"),
        "{msg}"
    );
}

#[test]
fn ship_squad_resolves_with_section_6_skill_scoping() {
    let all = inspect(&pack(SHIP_SQUAD));
    let names: Vec<_> = all["personas"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["identity"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["lead", "implementer", "reviewer", "mem"]);
    // Every skill is claimed by someone, so each persona gets only what it lists
    // (path-style references with a trailing slash).
    assert_eq!(skills(&persona_in(&all, "lead")), ["ship-protocol"]);
    assert_eq!(skills(&persona_in(&all, "implementer")), ["ship-protocol"]);
    assert_eq!(
        skills(&persona_in(&all, "reviewer")),
        ["review-checklist", "ship-protocol"]
    );
    assert_eq!(skills(&persona_in(&all, "mem")), ["memory-ops"]);
    let reviewer = persona_in(&all, "reviewer");
    let prompt = reviewer["system_prompt"].as_str().unwrap();
    assert!(
        prompt.ends_with(
            "\n\n---\nAvailable skills: review-checklist, ship-protocol\nLoad a skill with: load(source: \"skill-name\")"
        ),
        "{prompt}"
    );
    assert!(prompt.contains("# Team Instructions"));
    assert_eq!(
        reviewer["triggers"]["keywords"],
        json!(["review", "lgtm", "approve", "risk", "nits"])
    );
    assert_eq!(reviewer["sources"]["subscribe"], "pack_defaults");
    assert_eq!(reviewer["model"], Value::Null);
}

#[test]
fn the_repository_example_pack_is_valid_and_resolves_the_spec_example() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/meadow");
    if !dir.join(".plugin/plugin.json").is_file() {
        panic!("examples/meadow is missing");
    }
    // Valid; its one warning: the GitHub server's `${GITHUB_TOKEN}` needs the operator's
    // allow-list (issue 17).
    let v = validate(&dir);
    v.assert_exit(2);
    assert_eq!(v.codes(), ["mcp.env-refs"], "{:#}", v.json);
    let all = inspect(&dir);
    assert_eq!(
        persona_in(&all, "pip")["model"]["model"],
        "claude-4-opus-20250514"
    );
    for name in ["lep", "thistle", "berry"] {
        assert_eq!(
            persona_in(&all, name)["model"]["model"],
            "claude-sonnet-4-20250514",
            "{name}"
        );
    }
}
