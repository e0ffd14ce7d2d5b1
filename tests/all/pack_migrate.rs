//! `apiary pack migrate` end to end (spec §14): V6 `buzz:` blocks and pre-V6 JSON personas are refused
//! by validate with a pointer to migrate; `--dry-run` writes nothing; after migrating, the pack
//! validates and resolves to the values the old format meant.

use apiary_e2e::{Run, snapshot};
use serde_json::{Value, json};

use crate::support::pack::*;

fn migrate(pack: &ScratchPack, extra: &[&str]) -> Run {
    let mut c = pack.cmd();
    c.args(["pack", "migrate"]).arg(pack.path()).args(extra);
    checked(Run::of(c))
}

fn change_files(run: &Run) -> Vec<String> {
    run.json()["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["file"].as_str().unwrap().to_string())
        .collect()
}

const V6_MANIFEST: &str = r##"{
  "id": "com.example.v6-team",
  "name": "V6 Team",
  "version": "1.0.0",
  "buzz": {
    "personas": ["agents/pip.persona.md", "agents/lep.persona.md"],
    "pack_instructions": "instructions.md",
    "defaults": {
      "model": "anthropic:claude-sonnet-4-20250514",
      "respond_to": { "mentions": true, "keywords": ["security"] }
    }
  }
}
"##;

const V6_PIP: &str = r##"---
name: pip
display_name: "Pip"
description: "Orchestrator"
buzz:
  model: "anthropic:claude-4-opus-20250514"
  temperature: 0.3
  subscribe:
    - "#security-reviews"
  respond_to:
    all_messages: true
---

You are Pip.

---

Escalation rules follow.
"##;

fn v6_pack() -> ScratchPack {
    ScratchPack::with_manifest(
        V6_MANIFEST,
        &[
            ("agents/pip.persona.md", V6_PIP),
            ("agents/lep.persona.md", &persona("lep", "", "You are Lep.")),
            ("instructions.md", "Be precise.\n"),
        ],
    )
}

#[test]
fn v6_manifest_is_refused_with_a_pointer_to_migrate() {
    let pack = v6_pack();
    let v = pack.validate();
    v.assert_exit(1);
    let d = v.one("manifest.v6");
    assert_at(d, ".plugin/plugin.json", 5);
    assert!(
        d["help"].as_str().unwrap().contains("apiary pack migrate"),
        "{d:#}"
    );
    let human = pack.validate_human();
    assert!(
        human.stderr.contains("apiary pack migrate"),
        "{}",
        human.stderr
    );
}

#[test]
fn v6_persona_block_is_refused_with_a_pointer_to_migrate() {
    let pack = ScratchPack::with_manifest(
        &manifest(&["agents/pip.persona.md"], ""),
        &[("agents/pip.persona.md", V6_PIP)],
    );
    let v = pack.validate();
    v.assert_exit(1);
    let d = v.one("persona.v6");
    assert_at(d, "agents/pip.persona.md", 5);
    assert!(d["help"].as_str().unwrap().contains("apiary pack migrate"));
    assert!(
        v.with_code("persona.unknown-key").is_empty(),
        "`buzz` gets its own message, not unknown-key: {:#}",
        v.json
    );
}

#[test]
fn v6_dry_run_reports_changes_and_writes_nothing() {
    let pack = v6_pack();
    let before = snapshot(pack.path(), &[]);
    let run = migrate(&pack, &["--dry-run", "--json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let out = run.json();
    assert_eq!(out["dry_run"], true);
    let files = change_files(&run);
    assert!(
        files.contains(&".plugin/plugin.json".to_string()),
        "{files:?}"
    );
    assert!(
        files.contains(&"agents/pip.persona.md".to_string()),
        "{files:?}"
    );
    assert!(
        !files.contains(&"agents/lep.persona.md".to_string()),
        "lep is already current: {files:?}"
    );
    for c in out["changes"].as_array().unwrap() {
        assert!(!c["description"].as_str().unwrap().is_empty());
    }
    assert_eq!(
        snapshot(pack.path(), &[]),
        before,
        "--dry-run wrote to the pack"
    );

    // The human form says what it would do, and still writes nothing.
    let run = migrate(&pack, &["--dry-run"]);
    assert_eq!(run.code, 0);
    assert!(run.stderr.contains("would change"), "{}", run.stderr);
    assert!(run.stderr.contains("buzz.model"), "{}", run.stderr);
    assert_eq!(snapshot(pack.path(), &[]), before);
}

#[test]
fn v6_pack_after_migrate_validates_and_resolves_the_same_meaning() {
    let pack = v6_pack();
    let run = migrate(&pack, &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stderr.contains("apiary pack validate"),
        "{}",
        run.stderr
    );

    pack.validate().assert_clean();
    let manifest: Value = serde_json::from_str(&pack.read(".plugin/plugin.json")).unwrap();
    assert!(manifest.get("buzz").is_none());
    assert_eq!(
        manifest["personas"],
        json!(["agents/pip.persona.md", "agents/lep.persona.md"])
    );
    assert_eq!(
        manifest["defaults"]["triggers"]["keywords"],
        json!(["security"])
    );
    assert!(!pack.read("agents/pip.persona.md").contains("buzz:"));

    let all = pack.inspect(&[]);
    let pip = persona_in(&all, "pip");
    assert_eq!(pip["model"]["model"], "claude-4-opus-20250514");
    assert_eq!(pip["sources"]["model"], "persona");
    assert_eq!(pip["temperature"], 0.3);
    assert_eq!(pip["subscribe"], json!(["security-reviews"]));
    assert_eq!(
        pip["triggers"],
        json!({"mentions": true, "keywords": [], "all_messages": true}),
        "buzz.respond_to became the persona's triggers, replacing the default whole"
    );
    assert_eq!(
        pip["system_prompt"],
        "You are Pip.\n\n---\n\nEscalation rules follow.\n\n---\n# Team Instructions\nBe precise."
    );
    let lep = persona_in(&all, "lep");
    assert_eq!(lep["model"]["model"], "claude-sonnet-4-20250514");
    assert_eq!(lep["sources"]["model"], "pack_defaults");
    assert_eq!(
        lep["triggers"],
        json!({"mentions": true, "keywords": ["security"], "all_messages": false})
    );

    // Migrating again finds nothing to do and leaves every byte alone.
    let before = snapshot(pack.path(), &[]);
    let run = migrate(&pack, &["--json"]);
    assert_eq!(run.code, 0);
    assert_eq!(run.json()["changes"], json!([]));
    assert_eq!(snapshot(pack.path(), &[]), before);
}

#[test]
fn v6_files_saved_with_a_bom_and_crlf_migrate_too() {
    let pack = ScratchPack::new(&[]);
    pack.write(
        ".plugin/plugin.json",
        &format!("\u{feff}{}", V6_MANIFEST.replace('\n', "\r\n")),
    );
    pack.write(
        "agents/pip.persona.md",
        &format!("\u{feff}{}", V6_PIP.replace('\n', "\r\n")),
    );
    pack.write("agents/lep.persona.md", &persona("lep", "", "You are Lep."));
    pack.write("instructions.md", "Be precise.\n");
    pack.validate().assert_exit(1).one("manifest.v6");
    let run = migrate(&pack, &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    pack.validate().assert_clean();
    let pip = pack.persona("pip");
    assert_eq!(pip["model"]["model"], "claude-4-opus-20250514");
    assert_eq!(
        pip["system_prompt"],
        "You are Pip.\n\n---\n\nEscalation rules follow.\n\n---\n# Team Instructions\nBe precise."
    );
}

#[test]
fn persona_respond_to_alias_is_renamed_by_migrate() {
    let pack = one_persona_pack("respond_to:\n  keywords: [deploy]\n");
    pack.validate().assert_clean();
    let before = pack.persona("a");
    let run = migrate(&pack, &["--json"]);
    assert_eq!(change_files(&run), ["agents/a.persona.md"]);
    let text = pack.read("agents/a.persona.md");
    assert!(
        text.contains("triggers:") && !text.contains("respond_to"),
        "{text}"
    );
    pack.validate().assert_clean();
    assert_eq!(pack.persona("a")["triggers"], before["triggers"]);
}

// ---------------------------------------------------------------------------------------------
// Pre-V6 JSON personas.

const LEP_JSON: &str = r##"{
  "name": "lep",
  "display_name": "Lep",
  "description": "Security reviewer",
  "model": "anthropic:claude-sonnet-4-20250514",
  "temperature": 0.2,
  "channels": ["#security-reviews", "#code-reviews"],
  "respond_to": { "mentions": true, "keywords": ["CVE"] },
  "system_prompt": "You are Lep.\nReview every diff for security issues."
}
"##;

const PIP_JSON: &str = r##"{
  "name": "pip",
  "description": "Orchestrator",
  "channels": [],
  "system_prompt": "You are Pip."
}
"##;

#[test]
fn pre_v6_pack_without_a_manifest_is_refused_then_migrated() {
    let pack = ScratchPack::new(&[
        ("personas/lep.json", LEP_JSON),
        ("personas/pip.json", PIP_JSON),
    ]);
    let v = pack.validate();
    v.assert_exit(1);
    let d = v.one("pack.pre-v6");
    assert!(d["message"].as_str().unwrap().contains("lep.json"));
    assert!(d["help"].as_str().unwrap().contains("apiary pack migrate"));

    let before = snapshot(pack.path(), &[]);
    let dry = migrate(&pack, &["--dry-run", "--json"]);
    assert_eq!(dry.code, 0, "{}", dry.stderr);
    assert_eq!(
        snapshot(pack.path(), &[]),
        before,
        "--dry-run wrote to the pack"
    );
    assert!(!pack.file(".plugin").exists());
    assert!(!pack.file("agents").exists());

    let run = migrate(&pack, &["--json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let files = change_files(&run);
    for f in [
        ".plugin/plugin.json",
        "agents/lep.persona.md",
        "agents/pip.persona.md",
    ] {
        assert!(files.contains(&f.to_string()), "{f} not in {files:?}");
    }
    pack.validate().assert_clean();
    assert!(
        pack.file("personas/lep.json").is_file(),
        "old files are left for the author"
    );

    let all = pack.inspect(&[]);
    let lep = persona_in(&all, "lep");
    assert_eq!(
        lep["subscribe"],
        json!(["security-reviews", "code-reviews"])
    );
    assert_eq!(lep["temperature"], 0.2);
    assert_eq!(lep["model"]["model"], "claude-sonnet-4-20250514");
    assert_eq!(
        lep["triggers"],
        json!({"mentions": true, "keywords": ["CVE"], "all_messages": false})
    );
    assert_eq!(
        lep["system_prompt"],
        "You are Lep.\nReview every diff for security issues."
    );
    let pip = persona_in(&all, "pip");
    assert_eq!(
        pip["identity"]["display_name"], "pip",
        "display_name defaults to the name"
    );
    assert_eq!(pip["subscribe"], json!([]));
    assert_eq!(pip["sources"]["subscribe"], "persona");
}

#[test]
fn pre_v6_personas_listed_in_the_manifest_are_refused_then_migrated() {
    let text = "{\n  \"id\": \"com.example.old\",\n  \"name\": \"Old\",\n  \"version\": \"2.0.0\",\n  \
                \"personas\": [\"personas/lep.json\"]\n}\n";
    let pack = ScratchPack::with_manifest(text, &[("personas/lep.json", LEP_JSON)]);
    let v = pack.validate();
    v.assert_exit(1);
    let d = v.one("manifest.pre-v6-persona");
    assert_at(d, ".plugin/plugin.json", 5);
    assert!(d["help"].as_str().unwrap().contains("apiary pack migrate"));

    let run = migrate(&pack, &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    pack.validate().assert_clean();
    let manifest: Value = serde_json::from_str(&pack.read(".plugin/plugin.json")).unwrap();
    assert_eq!(manifest["personas"], json!(["agents/lep.persona.md"]));
    assert_eq!(
        manifest["id"], "com.example.old",
        "the rest of the manifest is kept"
    );
    assert_eq!(pack.persona("lep")["version"], "2.0.0");
}

#[test]
fn migrate_never_writes_outside_the_pack() {
    let text = r#"{"id": "com.example.old", "name": "Old", "version": "1.0.0"}"#;
    let pack = ScratchPack::with_manifest(
        text,
        &[(
            "personas/evil.json",
            r#"{"name": "../../escaped", "description": "d", "system_prompt": "x"}"#,
        )],
    );
    let before = snapshot(pack.path(), &[]);
    let run = migrate(&pack, &[]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.contains("../../escaped"), "{}", run.stderr);
    assert_eq!(snapshot(pack.path(), &[]), before, "nothing half written");
    let parent = pack.path().parent().unwrap();
    assert!(!parent.join("escaped.persona.md").exists());

    // An `agents/` directory symlinked out of the pack is refused too.
    let outside = tempfile::tempdir().unwrap();
    let pack = ScratchPack::with_manifest(text, &[("personas/lep.json", LEP_JSON)]);
    std::os::unix::fs::symlink(outside.path(), pack.file("agents")).unwrap();
    let run = migrate(&pack, &[]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        std::fs::read_dir(outside.path()).unwrap().next().is_none(),
        "migrate wrote into the symlinked directory"
    );
}

#[test]
fn migrate_of_a_broken_pack_is_a_clear_error() {
    let pack = ScratchPack::with_manifest("[1, 2]", &[]);
    let run = migrate(&pack, &[]);
    assert_eq!(run.code, 1);
    assert!(run.stderr.contains("plugin.json"), "{}", run.stderr);

    let empty = ScratchPack::new(&[]);
    let run = migrate(&empty, &[]);
    assert_eq!(run.code, 1);
    assert!(run.stderr.contains("plugin.json"), "{}", run.stderr);
}
