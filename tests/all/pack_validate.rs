//! `apiary pack validate` end to end: every rule of the issue's validation list, each asserting the
//! code, the file and (where the rule has a place) the line; exit codes 0/1/2; the `--json` shape and
//! the human output.

use crate::support::pack::*;

// ---------------------------------------------------------------------------------------------
// Exit codes, --json shape, human output.

#[test]
fn clean_pack_exits_0_with_the_json_shape() {
    let pack = one_persona_pack("model: \"anthropic:claude-sonnet-4\"\n");
    let v = pack.validate();
    v.assert_clean();
    let obj = v.json.as_object().unwrap();
    let mut keys: Vec<_> = obj.keys().cloned().collect();
    keys.sort();
    assert_eq!(keys, ["diagnostics", "errors", "pack", "valid", "warnings"]);
    assert!(v.json["pack"].as_str().is_some());
    assert_eq!(v.json["diagnostics"], serde_json::json!([]));

    let human = pack.validate_human();
    assert_eq!(human.code, 0);
    assert!(
        human.stderr.contains("valid persona pack"),
        "{}",
        human.stderr
    );
    assert!(human.stdout.is_empty(), "human output goes to stderr");
}

#[test]
fn warnings_only_exit_2_and_errors_exit_1() {
    let warn = ScratchPack::with_manifest(
        &manifest(&["agents/a.persona.md"], r#""colour": "blue""#),
        &[("agents/a.persona.md", &persona("a", "", "A."))],
    );
    let v = warn.validate();
    v.assert_exit(2);
    assert_eq!(v.json["valid"], true, "warnings do not make a pack invalid");
    assert_eq!(v.json["warnings"], 1);
    assert_eq!(v.json["errors"], 0);

    let err = one_persona_pack("temprature: 0.3\n");
    let v = err.validate();
    v.assert_exit(1);
    assert_eq!(v.json["valid"], false);
    assert_eq!(v.json["errors"], 1);
}

#[test]
fn every_diagnostic_has_severity_code_message_and_the_documented_fields() {
    let pack = one_persona_pack("temprature: 0.3\nsubscribe: \"#general\"\n");
    let v = pack.validate();
    for d in v.diagnostics() {
        let o = d.as_object().unwrap();
        for k in o.keys() {
            assert!(
                [
                    "severity", "code", "message", "file", "line", "column", "help"
                ]
                .contains(&k.as_str()),
                "unexpected key {k} in {d:#}"
            );
        }
        assert!(["error", "warning", "note"].contains(&d["severity"].as_str().unwrap()));
        assert!(d["code"].as_str().unwrap().contains('.'));
        assert!(!d["message"].as_str().unwrap().is_empty());
    }
    // Errors come first.
    let severities: Vec<_> = v
        .diagnostics()
        .iter()
        .map(|d| d["severity"].as_str().unwrap())
        .collect();
    let mut sorted = severities.clone();
    sorted.sort_by_key(|s| ["error", "warning", "note"].iter().position(|x| x == s));
    assert_eq!(severities, sorted);
}

#[test]
fn human_output_names_file_line_and_shows_a_snippet() {
    let pack = one_persona_pack("temprature: 0.3\n");
    let run = pack.validate_human();
    assert_eq!(run.code, 1);
    assert!(run.stdout.is_empty());
    let e = &run.stderr;
    assert!(e.contains("persona.unknown-key"), "{e}");
    assert!(e.contains("agents/a.persona.md:5:1"), "{e}");
    assert!(
        e.contains("5 │ temprature: 0.3"),
        "snippet of the line:\n{e}"
    );
    assert!(e.contains("did you mean `temperature`?"), "{e}");
    assert!(e.contains("invalid: 1 error"), "{e}");
}

#[test]
fn missing_pack_directory_is_an_error() {
    let home = tempfile::tempdir().unwrap();
    let v = validate_dir(std::path::Path::new("/nonexistent/pack"), home.path());
    v.assert_exit(1);
    v.one("pack.not-found");

    let empty = tempfile::tempdir().unwrap();
    let v = validate_dir(empty.path(), home.path());
    v.assert_exit(1);
    let d = v.one("pack.no-manifest");
    assert!(
        d["help"].as_str().unwrap().contains(".plugin/plugin.json"),
        "{d:#}"
    );
}

// ---------------------------------------------------------------------------------------------
// Manifest.

#[test]
fn manifest_requires_id_name_and_version() {
    for missing in ["id", "name", "version"] {
        let mut fields = vec![
            r#""id": "com.example.x""#,
            r#""name": "X""#,
            r#""version": "1.0.0""#,
        ];
        fields.retain(|f| !f.starts_with(&format!("\"{missing}\"")));
        let text = format!(
            "{{ {}, \"personas\": [\"agents/a.persona.md\"] }}",
            fields.join(", ")
        );
        let pack =
            ScratchPack::with_manifest(&text, &[("agents/a.persona.md", &persona("a", "", "A."))]);
        let v = pack.validate();
        v.assert_exit(1);
        let d = v.one("manifest.required");
        assert_eq!(d["file"], ".plugin/plugin.json");
        assert!(
            d["message"]
                .as_str()
                .unwrap()
                .contains(&format!("`{missing}`")),
            "{d:#}"
        );
    }
}

#[test]
fn manifest_that_is_not_json_points_at_the_line() {
    let pack = ScratchPack::with_manifest(
        "{\n  \"id\": \"x\",\n  \"name\": \"X\"\n  \"version\": \"1.0.0\"\n}\n",
        &[],
    );
    let v = pack.validate();
    v.assert_exit(1);
    assert_at(v.one("manifest.json"), ".plugin/plugin.json", 4);
}

#[test]
fn engines_buzz_is_checked_against_the_engine_version() {
    let newer = ScratchPack::with_manifest(
        &manifest(
            &["agents/a.persona.md"],
            "\"engines\": {\n    \"buzz\": \">=99.0.0\"\n  }",
        ),
        &[("agents/a.persona.md", &persona("a", "", "A."))],
    );
    let v = newer.validate();
    v.assert_exit(1);
    let d = v.one("manifest.engine");
    let text = newer.read(".plugin/plugin.json");
    assert_at(d, ".plugin/plugin.json", line_of(&text, "\"buzz\""));
    let msg = d["message"].as_str().unwrap();
    assert!(msg.contains(">=99.0.0"), "{msg}");

    let garbage = ScratchPack::with_manifest(
        &manifest(&["agents/a.persona.md"], r#""engines": { "buzz": "soon" }"#),
        &[("agents/a.persona.md", &persona("a", "", "A."))],
    );
    garbage.validate().assert_exit(1).one("manifest.engine");

    let older = ScratchPack::with_manifest(
        &manifest(
            &["agents/a.persona.md"],
            r#""engines": { "buzz": ">=0.9.0" }"#,
        ),
        &[("agents/a.persona.md", &persona("a", "", "A."))],
    );
    older.validate().assert_clean();

    // A bare version is the minimum the pack needs (spec §2), not semver's caret range: a pack made
    // for engine 0.5 still runs on this newer engine; one made for a future engine does not.
    let bare_old = ScratchPack::with_manifest(
        &manifest(
            &["agents/a.persona.md"],
            r#""engines": { "buzz": "0.5.0" }"#,
        ),
        &[("agents/a.persona.md", &persona("a", "", "A."))],
    );
    bare_old.validate().assert_clean();
    let bare_new = ScratchPack::with_manifest(
        &manifest(
            &["agents/a.persona.md"],
            r#""engines": { "buzz": "99.0.0" }"#,
        ),
        &[("agents/a.persona.md", &persona("a", "", "A."))],
    );
    bare_new.validate().assert_exit(1).one("manifest.engine");
}

#[test]
fn apiary_version_states_the_engine_it_provides() {
    let home = tempfile::tempdir().unwrap();
    let mut c = apiary_e2e::apiary(home.path());
    c.arg("--version");
    let run = apiary_e2e::Run::of(c);
    assert_eq!(run.code, 0);
    assert!(run.stdout.contains("buzz engine"), "{}", run.stdout);
}

#[test]
fn unknown_manifest_keys_and_defaults_keys_are_located_warnings() {
    let text = "{\n  \"id\": \"com.example.x\",\n  \"name\": \"X\",\n  \"version\": \"1.0.0\",\n  \
                \"personas\": [\"agents/a.persona.md\"],\n  \"colour\": \"blue\",\n  \"defaults\": {\n    \
                \"model\": \"anthropic:claude\",\n    \"temprature\": 0.5\n  }\n}\n";
    let pack =
        ScratchPack::with_manifest(text, &[("agents/a.persona.md", &persona("a", "", "A."))]);
    let v = pack.validate();
    v.assert_exit(2);
    let top = v.one("manifest.unknown-key");
    assert_eq!(top["severity"], "warning");
    assert_at(top, ".plugin/plugin.json", 6);
    let typo = v.one("manifest.unknown-default");
    assert_eq!(typo["severity"], "warning");
    assert_at(typo, ".plugin/plugin.json", 9);
    assert!(typo["message"].as_str().unwrap().contains("temprature"));
    assert!(typo["help"].as_str().unwrap().contains("temperature"));
    // The typo is ignored: the pack still resolves, without the misspelled value.
    let p = pack.persona("a");
    assert_eq!(p["temperature"], 0.7);
    assert_eq!(p["sources"]["temperature"], "built_in");
}

#[test]
fn wrong_types_in_defaults_are_errors_at_their_line() {
    let text = "{\n  \"id\": \"com.example.x\",\n  \"name\": \"X\",\n  \"version\": \"1.0.0\",\n  \
                \"personas\": [\"agents/a.persona.md\"],\n  \"defaults\": {\n    \
                \"temperature\": \"warm\"\n  }\n}\n";
    let pack =
        ScratchPack::with_manifest(text, &[("agents/a.persona.md", &persona("a", "", "A."))]);
    let v = pack.validate();
    v.assert_exit(1);
    assert_at(v.one("manifest.type"), ".plugin/plugin.json", 7);
}

#[test]
fn missing_persona_file_is_an_error_at_its_manifest_entry() {
    let text = "{\n  \"id\": \"com.example.x\",\n  \"name\": \"X\",\n  \"version\": \"1.0.0\",\n  \
                \"personas\": [\n    \"agents/a.persona.md\",\n    \"agents/ghost.persona.md\"\n  ]\n}\n";
    let pack =
        ScratchPack::with_manifest(text, &[("agents/a.persona.md", &persona("a", "", "A."))]);
    let v = pack.validate();
    v.assert_exit(1);
    let d = v.one("manifest.persona-path");
    assert_at(d, ".plugin/plugin.json", 7);
    assert!(d["message"].as_str().unwrap().contains("ghost"));
}

// ---------------------------------------------------------------------------------------------
// Persona frontmatter.

#[test]
fn persona_requires_name_display_name_and_description() {
    for missing in ["name", "display_name", "description"] {
        let mut lines = vec!["name: a", "display_name: A", "description: d"];
        lines.retain(|l| !l.starts_with(&format!("{missing}:")));
        let pack = ScratchPack::with_manifest(
            &manifest(&["agents/a.persona.md"], ""),
            &[(
                "agents/a.persona.md",
                &format!("---\n{}\n---\nBody\n", lines.join("\n")),
            )],
        );
        let v = pack.validate();
        v.assert_exit(1);
        let d = v.one("persona.required");
        assert_eq!(d["file"], "agents/a.persona.md");
        assert!(
            d["message"]
                .as_str()
                .unwrap()
                .contains(&format!("`{missing}`")),
            "{d:#}"
        );
    }
}

#[test]
fn unknown_frontmatter_key_is_an_error_naming_key_file_and_line() {
    let pack = one_persona_pack("model: \"anthropic:claude\"\ntemprature: 0.3\n");
    let v = pack.validate();
    v.assert_exit(1);
    let d = v.one("persona.unknown-key");
    assert_eq!(d["severity"], "error");
    assert_at(d, "agents/a.persona.md", 6);
    assert_eq!(d["column"], 1);
    assert!(d["message"].as_str().unwrap().contains("`temprature`"));
    assert!(d["help"].as_str().unwrap().contains("`temperature`"));
}

#[test]
fn unknown_trigger_key_is_an_error_in_frontmatter_and_a_warning_in_defaults() {
    let pack = one_persona_pack("triggers:\n  mentions: true\n  keyword: [x]\n");
    let v = pack.validate();
    v.assert_exit(1);
    let d = v.one("behaviour.unknown-trigger-key");
    assert_eq!(d["severity"], "error");
    assert_at(d, "agents/a.persona.md", 7);

    let text = "{\n  \"id\": \"com.example.x\",\n  \"name\": \"X\",\n  \"version\": \"1.0.0\",\n  \
                \"personas\": [\"agents/a.persona.md\"],\n  \"defaults\": {\n    \
                \"triggers\": { \"mention\": true }\n  }\n}\n";
    let pack =
        ScratchPack::with_manifest(text, &[("agents/a.persona.md", &persona("a", "", "A."))]);
    let v = pack.validate();
    v.assert_exit(2);
    let d = v.one("behaviour.unknown-trigger-key");
    assert_eq!(d["severity"], "warning");
    assert_at(d, ".plugin/plugin.json", 7);
}

#[test]
fn flow_style_mistakes_point_at_the_enclosing_key() {
    let pack = one_persona_pack(
        "triggers: {mentoins: true}\nmcp_servers: [{name: s, type: sse, url: \"http://x\"}]\n",
    );
    let v = pack.validate();
    v.assert_exit(1);
    assert_at(
        v.one("behaviour.unknown-trigger-key"),
        "agents/a.persona.md",
        5,
    );
    assert_at(v.one("mcp.sse"), "agents/a.persona.md", 6);
}

#[test]
fn a_key_name_in_the_prompt_body_is_never_the_location() {
    // `keywords` is not on a line of its own in the frontmatter; the body has a line starting with it.
    let pack = ScratchPack::with_manifest(
        &manifest(&["agents/a.persona.md"], ""),
        &[(
            "agents/a.persona.md",
            "---\nname: a\ndisplay_name: A\ndescription: d\ntriggers: {keywords: deploy}\n---\n\nkeywords: are listed below.\n",
        )],
    );
    let v = pack.validate();
    v.assert_exit(1);
    assert_at(v.one("persona.type"), "agents/a.persona.md", 5);
}

#[test]
fn triggers_and_respond_to_together_is_an_error() {
    let v = one_persona_pack("triggers:\n  mentions: true\nrespond_to:\n  mentions: false\n")
        .validate();
    v.assert_exit(1);
    assert_at(v.one("behaviour.triggers-twice"), "agents/a.persona.md", 7);
}

/// Each wrong type is an error of code `persona.type` on the line of the key.
#[test]
fn every_behavioural_field_is_type_checked() {
    let cases: &[(&str, &str)] = &[
        ("model: 42\n", "model"),
        ("temperature: \"0.5\"\n", "temperature"),
        ("temperature: [0.5]\n", "temperature"),
        ("max_context_tokens: -1\n", "max_context_tokens"),
        ("max_context_tokens: 0\n", "max_context_tokens"),
        ("max_context_tokens: 1.5\n", "max_context_tokens"),
        ("max_context_tokens: \"128000\"\n", "max_context_tokens"),
        ("subscribe: \"#general\"\n", "subscribe"),
        ("subscribe: [1, 2]\n", "subscribe"),
        ("triggers: \"mentions\"\n", "triggers"),
        ("triggers:\n  mentions: \"yes\"\n", "mentions"),
        ("triggers:\n  keywords: security\n", "keywords"),
        ("triggers:\n  all_messages: 1\n", "all_messages"),
        ("thread_replies: \"yes\"\n", "thread_replies"),
        ("broadcast_replies: 0\n", "broadcast_replies"),
        ("skills: ./skills/x/\n", "skills"),
        ("mcp_servers: {github: {command: gh}}\n", "mcp_servers"),
        ("display_name: [A]\n", "display_name"),
    ];
    for (yaml, key) in cases {
        // display_name is replaced, not duplicated.
        let text = if key == &"display_name" {
            format!("---\nname: a\ndescription: d\n{yaml}---\nBody\n")
        } else {
            persona("a", yaml, "Body")
        };
        let pack = ScratchPack::with_manifest(
            &manifest(&["agents/a.persona.md"], ""),
            &[("agents/a.persona.md", &text)],
        );
        let v = pack.validate();
        assert_eq!(v.code, 1, "{yaml}: {:#}", v.json);
        let d = v.one("persona.type");
        assert_eq!(d["file"], "agents/a.persona.md", "{yaml}");
        assert_eq!(
            d["line"],
            line_of(&text, &format!("{key}:")),
            "{yaml}: {d:#}"
        );
        assert!(
            d["message"].as_str().unwrap().contains(key),
            "{yaml}: {d:#}"
        );
    }
}

#[test]
fn numbers_that_yaml_allows_but_json_cannot_hold_are_refused() {
    // `.nan` and `.inf` are YAML floats; silently treating them as absent would hide the mistake.
    for yaml in [
        "temperature: .nan\n",
        "temperature: .inf\n",
        "temperature: -.inf\n",
    ] {
        let pack = one_persona_pack(yaml);
        let v = pack.validate();
        assert_eq!(v.code, 1, "{yaml}: {:#}", v.json);
        let d = v.one("persona.type");
        assert_at(d, "agents/a.persona.md", 5);
        assert!(
            d["message"].as_str().unwrap().contains("temperature"),
            "{d:#}"
        );
    }
}

#[test]
fn integer_temperature_and_model_shapes() {
    one_persona_pack("temperature: 1\n")
        .validate()
        .assert_clean();
    let v = one_persona_pack("model: \"anthropic:\"\n").validate();
    v.assert_exit(1);
    assert_at(v.one("behaviour.model"), "agents/a.persona.md", 5);
}

#[test]
fn persona_names_are_agent_ids() {
    let v = one_persona_pack("").validate();
    v.assert_clean();
    let pack = ScratchPack::with_manifest(
        &manifest(&["agents/a.persona.md"], ""),
        &[(
            "agents/a.persona.md",
            "---\nname: Pip\ndisplay_name: P\ndescription: d\n---\nBody\n",
        )],
    );
    let v = pack.validate();
    v.assert_exit(2);
    assert_at(v.one("persona.name-case"), "agents/a.persona.md", 2);

    let pack = ScratchPack::with_manifest(
        &manifest(&["agents/a.persona.md"], ""),
        &[(
            "agents/a.persona.md",
            "---\nname: \"pip the first\"\ndisplay_name: P\ndescription: d\n---\nBody\n",
        )],
    );
    let v = pack.validate();
    v.assert_exit(1);
    assert_at(v.one("persona.name"), "agents/a.persona.md", 2);
}

#[test]
fn duplicate_persona_names_are_an_error() {
    let pack = ScratchPack::with_manifest(
        &manifest(&["agents/a.persona.md", "agents/b.persona.md"], ""),
        &[
            ("agents/a.persona.md", &persona("pip", "", "A.")),
            ("agents/b.persona.md", &persona("pip", "", "B.")),
        ],
    );
    let v = pack.validate();
    v.assert_exit(1);
    let d = v.one("pack.duplicate-persona");
    assert_eq!(d["file"], "agents/b.persona.md");
    let msg = d["message"].as_str().unwrap();
    assert!(
        msg.contains("pip") && msg.contains("agents/a.persona.md"),
        "{msg}"
    );
}

#[test]
fn zero_personas_is_an_error() {
    let pack = ScratchPack::with_manifest(&manifest(&[], ""), &[]);
    let v = pack.validate();
    v.assert_exit(1);
    assert_eq!(v.one("pack.no-personas")["file"], ".plugin/plugin.json");

    let pack = ScratchPack::with_manifest(
        r#"{"id": "com.example.x", "name": "X", "version": "1.0.0"}"#,
        &[],
    );
    pack.validate().assert_exit(1).one("pack.no-personas");
}

#[test]
fn empty_prompt_body_is_a_warning() {
    let pack = ScratchPack::with_manifest(
        &manifest(&["agents/a.persona.md"], ""),
        &[(
            "agents/a.persona.md",
            "---\nname: a\ndisplay_name: A\ndescription: d\n---\n",
        )],
    );
    let v = pack.validate();
    v.assert_exit(2);
    v.one("persona.empty-prompt");
}

#[test]
fn runtime_key_is_accepted_and_selects_the_env_mapping() {
    let pack = one_persona_pack("runtime: claude-agent-acp\nmodel: \"anthropic:claude-opus-4\"\n");
    pack.validate().assert_clean();
    let p = pack.persona("a");
    assert_eq!(p["identity"]["runtime"], "claude-agent-acp");
    assert_eq!(
        p["env"],
        serde_json::json!({"ANTHROPIC_MODEL": "claude-opus-4"})
    );

    let v = one_persona_pack("runtime: gooze\n").validate();
    v.assert_exit(2);
    assert_at(v.one("persona.runtime"), "agents/a.persona.md", 5);
}

// ---------------------------------------------------------------------------------------------
// Skills (PF-5, PF-2).

#[test]
fn skill_without_name_or_description_is_an_error() {
    for (text, missing) in [
        ("---\ndescription: d\n---\nBody\n", "name"),
        ("---\nname: s\n---\nBody\n", "description"),
    ] {
        let pack = ScratchPack::with_manifest(
            &manifest(&["agents/a.persona.md"], ""),
            &[
                ("agents/a.persona.md", &persona("a", "", "A.")),
                ("skills/s/SKILL.md", text),
            ],
        );
        let v = pack.validate();
        v.assert_exit(1);
        let d = v.one("skill.required");
        assert_eq!(d["file"], "skills/s/SKILL.md");
        assert!(
            d["message"]
                .as_str()
                .unwrap()
                .contains(&format!("`{missing}`")),
            "{d:#}"
        );
    }
}

#[test]
fn two_skills_with_one_load_key_are_warned() {
    let pack = ScratchPack::with_manifest(
        &manifest(&["agents/a.persona.md"], ""),
        &[
            ("agents/a.persona.md", &persona("a", "", "A.")),
            ("skills/review/SKILL.md", &skill("review", "x")),
            ("skills/review-v2/SKILL.md", &skill("review", "y")),
        ],
    );
    let v = pack.validate();
    v.assert_exit(2);
    let d = v.one("skill.duplicate-name");
    let msg = d["message"].as_str().unwrap();
    assert!(
        msg.contains("skills/review,") && msg.contains("skills/review-v2"),
        "{msg}"
    );
    assert_eq!(d["file"], "skills/review-v2/SKILL.md");
}

#[test]
fn persona_file_without_the_persona_extension_is_a_located_warning() {
    let text = "{\n  \"id\": \"com.example.x\",\n  \"name\": \"X\",\n  \"version\": \"1.0.0\",\n  \
                \"personas\": [\n    \"agents/a.md\"\n  ]\n}\n";
    let pack = ScratchPack::with_manifest(text, &[("agents/a.md", &persona("a", "", "A."))]);
    let v = pack.validate();
    v.assert_exit(2);
    assert_at(v.one("manifest.persona-ext"), ".plugin/plugin.json", 6);
}

#[test]
fn persona_file_nested_below_agents_is_a_located_warning() {
    // Spec §3: `agents/` is flat.
    let text = "{\n  \"id\": \"com.example.x\",\n  \"name\": \"X\",\n  \"version\": \"1.0.0\",\n  \
                \"personas\": [\n    \"agents/a.persona.md\",\n    \"agents/team/b.persona.md\"\n  ]\n}\n";
    let pack = ScratchPack::with_manifest(
        text,
        &[
            ("agents/a.persona.md", &persona("a", "", "A.")),
            ("agents/team/b.persona.md", &persona("b", "", "B.")),
        ],
    );
    let v = pack.validate();
    v.assert_exit(2);
    let d = v.one("manifest.persona-nested");
    assert!(
        d["message"]
            .as_str()
            .unwrap()
            .contains("agents/team/b.persona.md"),
        "{d}"
    );
    assert_at(d, ".plugin/plugin.json", 7);
}

#[test]
fn skill_without_frontmatter_or_file_is_an_error() {
    let pack = ScratchPack::with_manifest(
        &manifest(&["agents/a.persona.md"], ""),
        &[
            ("agents/a.persona.md", &persona("a", "", "A.")),
            ("skills/plain/SKILL.md", "# Just markdown\n"),
            ("skills/empty/notes.md", "nothing"),
        ],
    );
    let v = pack.validate();
    v.assert_exit(1);
    assert_eq!(v.one("skill.frontmatter")["file"], "skills/plain/SKILL.md");
    v.one("skill.missing");
}

#[test]
fn persona_skill_paths_must_exist() {
    let pack = ScratchPack::with_manifest(
        &manifest(&["agents/a.persona.md"], ""),
        &[
            (
                "agents/a.persona.md",
                &persona(
                    "a",
                    "skills:\n  - ./skills/real/\n  - ./skills/nope/\n",
                    "A.",
                ),
            ),
            ("skills/real/SKILL.md", &skill("real", "x")),
        ],
    );
    let v = pack.validate();
    v.assert_exit(1);
    let d = v.one("persona.skill-path");
    assert_at(d, "agents/a.persona.md", 5);
    assert!(d["message"].as_str().unwrap().contains("nope"));
}

// ---------------------------------------------------------------------------------------------
// Hooks (§9, PF-2).

#[test]
fn hook_paths_must_exist_in_the_pack() {
    let pack = ScratchPack::with_manifest(
        &manifest(&["agents/a.persona.md"], ""),
        &[
            (
                "agents/a.persona.md",
                &persona(
                    "a",
                    "hooks:\n  on_start: \"./hooks/setup.sh\"\n  on_stop: \"./hooks/gone.sh\"\n  on_message: null\n",
                    "A.",
                ),
            ),
            ("hooks/setup.sh", "#!/bin/sh\n"),
            (
                "hooks/hooks.json",
                "{\n  \"on_start\": \"./hooks/setup.sh\",\n  \"on_stop\": \"./hooks/missing.sh\",\n  \"on_message\": null\n}\n",
            ),
        ],
    );
    let v = pack.validate();
    v.assert_exit(1);
    let found = v.with_code("hooks.path");
    assert_eq!(found.len(), 2, "{:#}", v.json);
    let in_persona = found
        .iter()
        .find(|d| d["file"] == "agents/a.persona.md")
        .expect("persona hook");
    assert_eq!(in_persona["line"], 7);
    let in_json = found
        .iter()
        .find(|d| d["file"] == "hooks/hooks.json")
        .expect("pack hook");
    assert_eq!(in_json["line"], 3);
}

#[test]
fn spec_shaped_hooks_json_is_clean_and_unknown_hook_points_are_flagged() {
    let pack = ScratchPack::with_manifest(
        &manifest(&["agents/a.persona.md"], ""),
        &[
            ("agents/a.persona.md", &persona("a", "", "A.")),
            ("hooks/setup.sh", "#!/bin/sh\n"),
            (
                "hooks/hooks.json",
                "{ \"on_start\": \"./hooks/setup.sh\", \"on_stop\": null, \"on_message\": null }\n",
            ),
        ],
    );
    pack.validate().assert_clean();

    pack.write(
        "hooks/hooks.json",
        "{\n  \"on_start\": \"./hooks/setup.sh\",\n  \"on_strat\": \"./hooks/setup.sh\"\n}\n",
    );
    let v = pack.validate();
    v.assert_exit(2);
    assert_at(v.one("hooks.unknown-key"), "hooks/hooks.json", 3);

    let v = one_persona_pack("hooks:\n  before_start: ./x.sh\n").validate();
    v.assert_exit(1);
    let d = v.one("hooks.unknown-key");
    assert_eq!(d["severity"], "error", "in frontmatter it is a hard error");
}

#[test]
fn hooks_json_in_another_shape_is_a_warning_that_no_hook_runs() {
    let pack = ScratchPack::with_manifest(
        &manifest(
            &["agents/a.persona.md"],
            r#""hooks_config": "hooks/hooks.json""#,
        ),
        &[
            ("agents/a.persona.md", &persona("a", "", "A.")),
            (
                "hooks/hooks.json",
                r#"{ "version": 1, "hooks": { "PreToolUse": [] } }"#,
            ),
        ],
    );
    let v = pack.validate();
    v.assert_exit(2);
    let d = v.one("hooks.not-spec-shape");
    assert_eq!(d["file"], "hooks/hooks.json");
    assert!(d["message"].as_str().unwrap().contains("on_start"));

    pack.write("hooks/hooks.json", "[1, 2]");
    pack.validate().assert_exit(1).one("hooks.shape");
}

#[test]
fn explicit_manifest_paths_must_exist() {
    let pack = ScratchPack::with_manifest(
        &manifest(
            &["agents/a.persona.md"],
            r#""pack_instructions": "docs/instructions.md", "mcp_config": "mcp/servers.json""#,
        ),
        &[("agents/a.persona.md", &persona("a", "", "A."))],
    );
    let v = pack.validate();
    v.assert_exit(1);
    let found = v.with_code("manifest.path");
    assert_eq!(found.len(), 2, "{:#}", v.json);
    for d in found {
        assert_eq!(d["file"], ".plugin/plugin.json");
    }
}

// ---------------------------------------------------------------------------------------------
// .mcp.json (§7).

#[test]
fn mcp_json_that_is_not_json_points_at_the_line() {
    let pack = one_persona_pack("");
    pack.write(
        ".mcp.json",
        "{\n  \"mcpServers\": {\n    \"a\": { \"command\": \"x\", }\n  }\n}\n",
    );
    let v = pack.validate();
    v.assert_exit(1);
    assert_at(v.one("mcp.json"), ".mcp.json", 3);
}

#[test]
fn sse_transport_is_an_error_with_the_migration_hint() {
    let pack = one_persona_pack("");
    pack.write(
        ".mcp.json",
        "{\n  \"mcpServers\": {\n    \"events\": {\n      \"type\": \"sse\",\n      \"url\": \"https://example.com/sse\"\n    }\n  }\n}\n",
    );
    let v = pack.validate();
    v.assert_exit(1);
    let d = v.one("mcp.sse");
    assert_at(d, ".mcp.json", 4);
    assert!(d["message"].as_str().unwrap().contains("events"));
    assert!(
        d["help"]
            .as_str()
            .unwrap()
            .contains("SSE is unsupported, migrate to streamable_http"),
        "{d:#}"
    );

    // In persona frontmatter too.
    let v = one_persona_pack(
        "mcp_servers:\n  - name: events\n    transport: sse\n    url: https://example.com/sse\n",
    )
    .validate();
    v.assert_exit(1);
    assert_at(v.one("mcp.sse"), "agents/a.persona.md", 7);
}

#[test]
fn streamable_http_and_stdio_servers_are_accepted() {
    let pack = one_persona_pack(
        "mcp_servers:\n  - name: remote\n    type: http\n    url: https://example.com/mcp\n",
    );
    pack.write(
        ".mcp.json",
        r#"{ "mcpServers": { "local": { "command": "srv", "args": ["--stdio"] } } }"#,
    );
    pack.validate().assert_clean();
    let p = pack.persona("a");
    let servers = p["mcp_servers"].as_array().unwrap();
    assert_eq!(servers[0]["name"], "local");
    assert_eq!(servers[0]["type"], "stdio");
    assert_eq!(servers[1]["name"], "remote");
    assert_eq!(servers[1]["type"], "http");
    assert_eq!(servers[1]["url"], "https://example.com/mcp");
}

#[test]
fn literal_secrets_are_warned_and_var_references_listed() {
    let pack = one_persona_pack("");
    pack.write(
        ".mcp.json",
        "{\n  \"mcpServers\": {\n    \"github\": {\n      \"command\": \"github-mcp-server\",\n      \"env\": {\n        \
         \"GITHUB_PERSONAL_ACCESS_TOKEN\": \"ghp_0123456789abcdefghij\",\n        \"LOG\": \"${LOG_LEVEL}\"\n      }\n    }\n  }\n}\n",
    );
    let v = pack.validate();
    v.assert_exit(2);
    let d = v.one("mcp.literal-secret");
    assert_at(d, ".mcp.json", 6);
    assert!(
        d["message"]
            .as_str()
            .unwrap()
            .contains("GITHUB_PERSONAL_ACCESS_TOKEN")
    );
    assert!(
        d["help"]
            .as_str()
            .unwrap()
            .contains("${GITHUB_PERSONAL_ACCESS_TOKEN}"),
        "suggests a reference: {d:#}"
    );
    let refs = v.one("mcp.env-refs");
    assert_eq!(refs["severity"], "warning");
    assert!(refs["message"].as_str().unwrap().contains("${LOG_LEVEL}"));
    assert!(refs["help"].as_str().unwrap().contains("allow_env"));

    // A `${VAR}` reference is not a secret; it is a warning only because the operator must allow
    // the variable for the pack (issue 17).
    pack.write(
        ".mcp.json",
        r#"{ "mcpServers": { "github": { "command": "g", "env": { "GITHUB_TOKEN": "${GITHUB_TOKEN}" } } } }"#,
    );
    let v = pack.validate();
    v.assert_exit(2);
    assert_eq!(v.codes(), ["mcp.env-refs"], "{:#}", v.json);

    // A `${VAR:-default}` works without the operator's allow-list (its default applies): no
    // warning, exit 0, and a note says how to pass the operator's value instead. A variable also
    // written without a default somewhere still needs the allow-list.
    pack.write(
        ".mcp.json",
        r#"{ "mcpServers": { "docs": { "command": "d", "args": ["--port", "${DOCS_PORT:-8080}"], "env": { "MODE": "${DOCS_MODE:-}" } } } }"#,
    );
    let v = pack.validate();
    v.assert_exit(0);
    assert_eq!(v.codes(), ["mcp.env-optional"], "{:#}", v.json);
    let note = v.one("mcp.env-optional");
    assert_eq!(note["severity"], "note");
    assert!(
        note["message"]
            .as_str()
            .unwrap()
            .contains("${DOCS_PORT:-…}")
    );
    pack.write(
        ".mcp.json",
        r#"{ "mcpServers": { "docs": { "command": "d", "args": ["${DOCS_PORT:-8080}"], "env": { "PORT": "${DOCS_PORT}" } } } }"#,
    );
    let v = pack.validate();
    v.assert_exit(2);
    assert_eq!(v.codes(), ["mcp.env-refs"], "{:#}", v.json);
    assert!(
        v.one("mcp.env-refs")["message"]
            .as_str()
            .unwrap()
            .contains("${DOCS_PORT}")
    );
}

#[test]
fn mcp_server_without_command_or_url_is_an_error() {
    let pack = one_persona_pack("");
    pack.write(
        ".mcp.json",
        r#"{ "mcpServers": { "broken": { "args": ["x"] } } }"#,
    );
    let v = pack.validate();
    v.assert_exit(1);
    assert!(
        v.one("mcp.command")["message"]
            .as_str()
            .unwrap()
            .contains("broken")
    );
}

// ---------------------------------------------------------------------------------------------
// Large packs are parsed on several threads; what comes out must not depend on which thread
// parsed which persona.

#[test]
fn a_large_pack_reports_and_resolves_in_manifest_order_every_time() {
    let names: Vec<String> = (0..200).map(|i| format!("p{i:03}")).collect();
    // Prompts of a realistic size, so that every thread gets batches to parse.
    let prompt = "You help the team review changes with care.\n".repeat(50);
    let paths: Vec<String> = names
        .iter()
        .map(|n| format!("agents/{n}.persona.md"))
        .collect();
    let listed: Vec<&str> = paths.iter().map(String::as_str).collect();
    let pack = ScratchPack::with_manifest(&manifest(&listed, ""), &[]);
    for (i, (name, path)) in names.iter().zip(&paths).enumerate() {
        // Every 7th file is missing: those errors all point at the manifest's one `personas` line,
        // so only the load order can order them. Every 5th has a typo of its own.
        if i % 7 == 3 {
            continue;
        }
        let extra = if i % 5 == 1 { "temprature: 0.3\n" } else { "" };
        pack.write(path, &persona(name, extra, &prompt));
    }
    let missing: Vec<&String> = paths
        .iter()
        .enumerate()
        .filter(|(i, _)| i % 7 == 3)
        .map(|(_, p)| p)
        .collect();

    let first = pack.validate();
    first.assert_exit(1);
    let unfound: Vec<String> = first
        .with_code("manifest.persona-path")
        .iter()
        .map(|d| d["message"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(unfound.len(), missing.len());
    for (message, path) in unfound.iter().zip(&missing) {
        assert!(
            message.contains(path.as_str()),
            "{message} should name {path}"
        );
    }
    let typos = (0..200).filter(|i| i % 5 == 1 && i % 7 != 3).count();
    assert_eq!(first.with_code("persona.unknown-key").len(), typos);
    for _ in 0..4 {
        assert_eq!(
            pack.validate().diagnostics(),
            first.diagnostics(),
            "same pack, same report"
        );
    }

    // Valid once the missing files exist and the typos are gone: personas in manifest order.
    for (name, path) in names.iter().zip(&paths) {
        pack.write(path, &persona(name, "", &prompt));
    }
    pack.validate().assert_clean();
    let inspected = pack.inspect(&[]);
    let order: Vec<&str> = inspected["personas"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["identity"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(order, names);
}
