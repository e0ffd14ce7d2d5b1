//! `apiary pack inspect` end to end: the worked examples of spec §10 (precedence, `null`/`[]`/`{}`,
//! shallow replacement, env projection, operator precedence), §6 skill scoping and the system prompt,
//! and the MCP merge of §7, each through the binary and its `--json` contract.

use serde_json::{Value, json};

use crate::support::pack::*;

/// The spec's §2/§10 manifest: four personas, Sonnet for everyone by default.
const MEADOW_MANIFEST: &str = r##"{
  "$schema": "https://open-plugin-spec.org/schema/v1/plugin.json",
  "id": "com.example.meadow-security-team",
  "name": "Meadow Security Team",
  "version": "1.2.0",
  "description": "A four-agent security review team.",
  "author": "Meadow Engineering",
  "license": "MIT",
  "engines": { "buzz": ">=0.9.0" },
  "personas": [
    "agents/pip.persona.md",
    "agents/lep.persona.md",
    "agents/thistle.persona.md",
    "agents/berry.persona.md"
  ],
  "pack_instructions": "instructions.md",
  "defaults": {
    "model": "anthropic:claude-sonnet-4-20250514",
    "temperature": 0.7,
    "max_context_tokens": 128000,
    "triggers": { "mentions": true, "keywords": [], "all_messages": false },
    "subscribe": [],
    "thread_replies": true,
    "broadcast_replies": false
  }
}
"##;

fn meadow() -> ScratchPack {
    ScratchPack::with_manifest(
        MEADOW_MANIFEST,
        &[
            (
                "agents/pip.persona.md",
                &persona(
                    "pip",
                    "model: \"anthropic:claude-4-opus-20250514\"\nsubscribe:\n  - \"#security-reviews\"\n",
                    "You are Pip, the orchestrator.",
                ),
            ),
            (
                "agents/lep.persona.md",
                &persona(
                    "lep",
                    "skills:\n  - \"./skills/security-review/\"\n  - \"./skills/code-review/\"\n",
                    "You are Lep, a security reviewer.",
                ),
            ),
            (
                "agents/thistle.persona.md",
                &persona("thistle", "skills:\n  - code-review\n", "You are Thistle."),
            ),
            (
                "agents/berry.persona.md",
                &persona("berry", "", "You are Berry."),
            ),
            (
                "skills/security-review/SKILL.md",
                &skill("security-review", "OWASP review"),
            ),
            (
                "skills/code-review/SKILL.md",
                &skill("code-review", "Reviews diffs"),
            ),
            ("skills/shared/SKILL.md", &skill("shared", "For everyone")),
            ("instructions.md", "Escalate to @pip.\n"),
        ],
    )
}

fn names(v: &Value) -> Vec<String> {
    v.as_array()
        .expect("array")
        .iter()
        .map(|s| s.as_str().expect("string").to_string())
        .collect()
}

// ---------------------------------------------------------------------------------------------
// §10 worked example: pip gets Opus, the others Sonnet.

#[test]
fn meadow_pip_gets_opus_and_the_others_sonnet_from_pack_defaults() {
    let pack = meadow();
    pack.validate().assert_clean();
    let all = pack.inspect(&[]);
    assert_eq!(all["pack"]["id"], "com.example.meadow-security-team");
    assert_eq!(all["pack"]["version"], "1.2.0");
    let order: Vec<_> = all["personas"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["identity"]["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(order, ["pip", "lep", "thistle", "berry"], "manifest order");

    let pip = persona_in(&all, "pip");
    assert_eq!(
        pip["model"],
        json!({"provider": "anthropic", "model": "claude-4-opus-20250514"})
    );
    assert_eq!(pip["sources"]["model"], "persona");
    assert_eq!(
        pip["subscribe"],
        json!(["security-reviews"]),
        "# is stripped"
    );
    assert_eq!(pip["sources"]["subscribe"], "persona");

    for name in ["pip", "lep", "thistle", "berry"] {
        let p = persona_in(&all, name);
        if name != "pip" {
            assert_eq!(
                p["model"],
                json!({"provider": "anthropic", "model": "claude-sonnet-4-20250514"}),
                "{name}"
            );
            assert_eq!(p["sources"]["model"], "pack_defaults", "{name}");
            assert_eq!(p["subscribe"], json!([]), "{name}");
            assert_eq!(p["sources"]["subscribe"], "pack_defaults", "{name}");
        }
        assert_eq!(p["temperature"], 0.7, "{name}");
        assert_eq!(p["sources"]["temperature"], "pack_defaults", "{name}");
        assert_eq!(p["max_context_tokens"], 128000, "{name}");
        assert_eq!(
            p["sources"]["max_context_tokens"], "pack_defaults",
            "{name}"
        );
        assert_eq!(
            p["triggers"],
            json!({"mentions": true, "keywords": [], "all_messages": false})
        );
        assert_eq!(p["thread_replies"], true);
        assert_eq!(p["broadcast_replies"], false);
        assert_eq!(
            p["version"], "1.2.0",
            "persona version defaults to the pack's"
        );
    }
}

#[test]
fn inspect_json_has_exactly_the_contract_keys() {
    let pip = meadow().persona("pip");
    let mut keys: Vec<_> = pip.as_object().unwrap().keys().cloned().collect();
    keys.sort();
    let mut want = vec![
        "identity",
        "version",
        "model",
        "temperature",
        "max_context_tokens",
        "subscribe",
        "triggers",
        "thread_replies",
        "broadcast_replies",
        "skills",
        "mcp_servers",
        "env",
        "system_prompt",
        "sources",
    ];
    want.sort();
    assert_eq!(keys, want);
    assert_eq!(pip["identity"]["name"], "pip");
    assert_eq!(pip["identity"]["display_name"], "Pip");
    assert_eq!(pip["identity"]["description"], "The pip persona");
    assert_eq!(pip["identity"]["file"], "agents/pip.persona.md");
    for field in [
        "model",
        "temperature",
        "max_context_tokens",
        "subscribe",
        "triggers",
        "thread_replies",
        "broadcast_replies",
    ] {
        let s = pip["sources"][field].as_str().unwrap_or_else(|| {
            panic!("sources.{field} missing: {:#}", pip["sources"]);
        });
        assert!(
            [
                "process_env",
                "operator",
                "persona",
                "pack_defaults",
                "built_in",
                "unset"
            ]
            .contains(&s),
            "sources.{field} = {s}"
        );
    }
}

#[test]
fn human_inspect_shows_values_and_where_they_came_from() {
    let pack = meadow();
    let mut c = pack.cmd();
    c.args(["pack", "inspect"])
        .arg(pack.path())
        .args(["--persona", "pip"]);
    let run = checked(apiary_e2e::Run::of(c));
    assert_eq!(run.code, 0, "{}", run.stderr);
    let model_line = run
        .stdout
        .lines()
        .find(|l| l.trim_start().starts_with("model"))
        .unwrap_or_else(|| panic!("no model line:\n{}", run.stdout));
    assert!(
        model_line.contains("claude-4-opus-20250514"),
        "{model_line}"
    );
    assert!(model_line.contains("[persona]"), "{model_line}");
    let temp_line = run
        .stdout
        .lines()
        .find(|l| l.trim_start().starts_with("temperature"))
        .unwrap();
    assert!(temp_line.contains("[pack defaults]"), "{temp_line}");
    assert!(
        !run.stdout.contains("lep"),
        "--persona filters:\n{}",
        run.stdout
    );
}

#[test]
fn json_persona_filter_keeps_the_pack_and_one_persona() {
    let pack = meadow();
    let all = pack.inspect(&[]);
    let one = pack.inspect(&["--persona", "lep"]);
    assert_eq!(one["pack"], all["pack"]);
    let lep = persona_in(&all, "lep");
    assert_eq!(one["personas"], json!([lep]));
}

#[test]
fn json_persona_filter_with_an_unknown_name_fails_listing_the_names() {
    let pack = meadow();
    let run = pack.inspect_run(pack.cmd(), &["--persona", "nobody"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    // Scripts get the one error shape on stdout; people the same words on stderr.
    let v = run.json();
    assert_eq!(
        (v["ok"].clone(), v["error"]["code"].clone()),
        (json!(false), json!("error"))
    );
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no persona `nobody`"),
        "{v}"
    );
    assert!(
        run.stderr.contains("no persona `nobody`")
            && run.stderr.contains("pip, lep, thistle, berry"),
        "{}",
        run.stderr
    );
}

// ---------------------------------------------------------------------------------------------
// §10 empty and null semantics, shallow replacement.

/// A pack whose defaults set every field to something a built-in would not give.
fn pack_with_defaults(personas: &[(&str, &str)]) -> ScratchPack {
    let paths: Vec<String> = personas
        .iter()
        .map(|(n, _)| format!("agents/{n}.persona.md"))
        .collect();
    let path_refs: Vec<&str> = paths.iter().map(String::as_str).collect();
    let defaults = r##""defaults": {
    "model": "anthropic:claude-sonnet-4-20250514",
    "temperature": 0.4,
    "max_context_tokens": 64000,
    "triggers": { "mentions": false, "keywords": ["security"], "all_messages": true },
    "subscribe": ["#general"],
    "thread_replies": false,
    "broadcast_replies": true
  }"##;
    let p = ScratchPack::with_manifest(&manifest(&path_refs, defaults), &[]);
    for (name, extra) in personas {
        p.write(
            &format!("agents/{name}.persona.md"),
            &persona(name, extra, "Body."),
        );
    }
    p
}

#[test]
fn no_behavioural_fields_means_every_pack_default_applies() {
    let p = pack_with_defaults(&[("plain", "")]).persona("plain");
    assert_eq!(p["model"]["model"], "claude-sonnet-4-20250514");
    assert_eq!(p["temperature"], 0.4);
    assert_eq!(p["max_context_tokens"], 64000);
    assert_eq!(
        p["triggers"],
        json!({"mentions": false, "keywords": ["security"], "all_messages": true})
    );
    assert_eq!(p["subscribe"], json!(["general"]));
    assert_eq!(p["thread_replies"], false);
    assert_eq!(p["broadcast_replies"], true);
    for field in [
        "model",
        "temperature",
        "max_context_tokens",
        "triggers",
        "subscribe",
        "thread_replies",
        "broadcast_replies",
    ] {
        assert_eq!(p["sources"][field], "pack_defaults", "{field}");
    }
}

#[test]
fn empty_triggers_object_falls_to_built_ins_not_to_pack_defaults() {
    let p = pack_with_defaults(&[("t", "triggers: {}\n")]).persona("t");
    assert_eq!(
        p["triggers"],
        json!({"mentions": true, "keywords": [], "all_messages": false}),
        "`triggers: {{}}` overrides the pack default; each sub-field takes its built-in"
    );
    assert_eq!(p["sources"]["triggers"], "persona");
}

#[test]
fn spec_empty_object_example() {
    // §10 "Example — empty object override", verbatim values.
    let p = ScratchPack::with_manifest(
        &manifest(
            &["agents/e.persona.md"],
            r#""defaults": { "triggers": { "mentions": true, "keywords": ["security"], "all_messages": false } }"#,
        ),
        &[(
            "agents/e.persona.md",
            &persona("e", "triggers: {}\n", "Body."),
        )],
    );
    assert_eq!(
        p.persona("e")["triggers"],
        json!({"mentions": true, "keywords": [], "all_messages": false})
    );
}

#[test]
fn empty_subscribe_list_overrides_the_pack_default() {
    let pack = pack_with_defaults(&[("quiet", "subscribe: []\n"), ("plain", "")]);
    let all = pack.inspect(&[]);
    let quiet = persona_in(&all, "quiet");
    assert_eq!(quiet["subscribe"], json!([]));
    assert_eq!(quiet["sources"]["subscribe"], "persona");
    assert_eq!(persona_in(&all, "plain")["subscribe"], json!(["general"]));
}

#[test]
fn null_falls_through_to_pack_default_then_built_in() {
    let pack = pack_with_defaults(&[(
        "n",
        "temperature: null\nmodel: null\nsubscribe: null\ntriggers: null\nthread_replies: null\n",
    )]);
    let p = pack.persona("n");
    assert_eq!(p["temperature"], 0.4);
    assert_eq!(p["sources"]["temperature"], "pack_defaults");
    assert_eq!(p["model"]["model"], "claude-sonnet-4-20250514");
    assert_eq!(p["subscribe"], json!(["general"]));
    assert_eq!(p["triggers"]["keywords"], json!(["security"]));
    assert_eq!(p["thread_replies"], false);

    // Without pack defaults, `null` falls to the built-ins.
    let bare = one_persona_pack("temperature: null\nthread_replies: null\n");
    let p = bare.persona("a");
    assert_eq!(p["temperature"], 0.7);
    assert_eq!(p["sources"]["temperature"], "built_in");
    assert_eq!(p["thread_replies"], true);
    assert_eq!(p["sources"]["thread_replies"], "built_in");
}

#[test]
fn object_replacement_drops_pack_default_sub_keys() {
    // §10 "Example — object replacement": keywords is gone.
    let pack = ScratchPack::with_manifest(
        &manifest(
            &["agents/o.persona.md"],
            r#""defaults": { "triggers": { "mentions": true, "keywords": ["security"], "all_messages": false } }"#,
        ),
        &[(
            "agents/o.persona.md",
            &persona(
                "o",
                "triggers:\n  mentions: true\n  all_messages: true\n",
                "Body.",
            ),
        )],
    );
    let p = pack.persona("o");
    assert_eq!(p["triggers"]["all_messages"], true);
    assert_eq!(p["triggers"]["mentions"], true);
    assert_eq!(
        p["triggers"]["keywords"],
        json!([]),
        "keywords is not inherited from the pack default"
    );

    // Sub-keys the persona leaves out come from the built-ins even when the pack default differs.
    let p = pack_with_defaults(&[("k", "triggers:\n  keywords: [\"cve\"]\n")]).persona("k");
    assert_eq!(
        p["triggers"],
        json!({"mentions": true, "keywords": ["cve"], "all_messages": false})
    );
}

#[test]
fn array_replacement_has_no_union() {
    // §10 "Example — array replacement".
    let p = pack_with_defaults(&[(
        "r",
        "subscribe:\n  - \"#security-reviews\"\n  - \"#code-reviews\"\n",
    )])
    .persona("r");
    assert_eq!(p["subscribe"], json!(["security-reviews", "code-reviews"]));
}

#[test]
fn respond_to_is_an_alias_for_triggers() {
    let pack = pack_with_defaults(&[(
        "legacy",
        "respond_to:\n  keywords: [\"deploy\"]\n  all_messages: false\n",
    )]);
    pack.validate().assert_clean();
    let p = pack.persona("legacy");
    assert_eq!(
        p["triggers"],
        json!({"mentions": true, "keywords": ["deploy"], "all_messages": false})
    );
    assert_eq!(p["sources"]["triggers"], "persona");

    // In plugin.json defaults too.
    let pack = ScratchPack::with_manifest(
        &manifest(
            &["agents/a.persona.md"],
            r#""defaults": { "respond_to": { "mentions": false, "keywords": ["ops"] } }"#,
        ),
        &[("agents/a.persona.md", &persona("a", "", "Body."))],
    );
    pack.validate().assert_clean();
    let p = pack.persona("a");
    assert_eq!(
        p["triggers"],
        json!({"mentions": false, "keywords": ["ops"], "all_messages": false})
    );
    assert_eq!(p["sources"]["triggers"], "pack_defaults");
}

#[test]
fn without_defaults_every_field_takes_its_built_in() {
    let p = one_persona_pack("").persona("a");
    assert_eq!(p["model"], Value::Null);
    assert_eq!(p["sources"]["model"], "unset");
    assert_eq!(p["temperature"], 0.7);
    assert_eq!(p["sources"]["temperature"], "built_in");
    assert_eq!(p["max_context_tokens"], Value::Null);
    assert_eq!(p["sources"]["max_context_tokens"], "unset");
    assert_eq!(p["subscribe"], json!([]));
    assert_eq!(
        p["triggers"],
        json!({"mentions": true, "keywords": [], "all_messages": false})
    );
    assert_eq!(p["sources"]["triggers"], "built_in");
    assert_eq!(p["thread_replies"], true);
    assert_eq!(p["broadcast_replies"], false);
    assert_eq!(p["version"], "1.0.0");
}

#[test]
fn persona_version_wins_over_pack_version() {
    let p = one_persona_pack("version: \"2.3.4\"\n").persona("a");
    assert_eq!(p["version"], "2.3.4");
}

// ---------------------------------------------------------------------------------------------
// §10 env var mapping.

#[test]
fn env_projection_splits_model_on_the_first_colon() {
    let pack = meadow();
    let all = pack.inspect(&[]);
    assert_eq!(
        persona_in(&all, "pip")["env"],
        json!({
            "GOOSE_PROVIDER": "anthropic",
            "GOOSE_MODEL": "claude-4-opus-20250514",
            "GOOSE_TEMPERATURE": "0.7",
            "GOOSE_CONTEXT_LIMIT": "128000"
        })
    );
    assert_eq!(
        persona_in(&all, "berry")["env"]["GOOSE_MODEL"],
        "claude-sonnet-4-20250514"
    );

    let p = one_persona_pack(
        "model: \"openrouter:anthropic/claude-3.5:beta\"\ntemperature: 0.3\nmax_context_tokens: 200000\n",
    )
    .persona("a");
    assert_eq!(
        p["model"],
        json!({"provider": "openrouter", "model": "anthropic/claude-3.5:beta"})
    );
    assert_eq!(
        p["env"],
        json!({
            "GOOSE_PROVIDER": "openrouter",
            "GOOSE_MODEL": "anthropic/claude-3.5:beta",
            "GOOSE_TEMPERATURE": "0.3",
            "GOOSE_CONTEXT_LIMIT": "200000"
        })
    );
}

#[test]
fn no_model_anywhere_sets_no_model_or_provider_but_built_in_temperature() {
    let p = one_persona_pack("").persona("a");
    assert_eq!(
        p["env"],
        json!({"GOOSE_TEMPERATURE": "0.7"}),
        "no GOOSE_MODEL/GOOSE_PROVIDER without a model; no context limit without one"
    );
}

#[test]
fn bare_model_id_sets_model_without_provider() {
    let p = one_persona_pack("model: gpt-4o\n").persona("a");
    assert_eq!(p["model"], json!({"provider": null, "model": "gpt-4o"}));
    assert_eq!(p["env"]["GOOSE_MODEL"], "gpt-4o");
    assert!(p["env"].get("GOOSE_PROVIDER").is_none(), "{:#}", p["env"]);
}

#[test]
fn pack_default_temperature_beats_built_in_in_env() {
    let p = pack_with_defaults(&[("d", "")]).persona("d");
    assert_eq!(p["env"]["GOOSE_TEMPERATURE"], "0.4");
    assert_eq!(p["env"]["GOOSE_CONTEXT_LIMIT"], "64000");
}

// ---------------------------------------------------------------------------------------------
// Level 1 (process env) and level 2 (operator overrides file).

#[test]
fn operator_env_is_never_overridden() {
    let pack = meadow();
    let mut cmd = pack.cmd();
    cmd.env("GOOSE_PROVIDER", "openai")
        .env("GOOSE_MODEL", "gpt-5")
        .env("GOOSE_TEMPERATURE", "0.1")
        .env("GOOSE_CONTEXT_LIMIT", "4096");
    let run = pack.inspect_run(cmd, &["--persona", "pip"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let pip = persona_in(&run.json(), "pip");
    assert_eq!(
        pip["env"],
        json!({
            "GOOSE_PROVIDER": "openai",
            "GOOSE_MODEL": "gpt-5",
            "GOOSE_TEMPERATURE": "0.1",
            "GOOSE_CONTEXT_LIMIT": "4096"
        })
    );
    assert_eq!(
        pip["model"],
        json!({"provider": "openai", "model": "gpt-5"})
    );
    assert_eq!(pip["temperature"], 0.1);
    assert_eq!(pip["max_context_tokens"], 4096);
    for f in ["model", "temperature", "max_context_tokens"] {
        assert_eq!(pip["sources"][f], "process_env", "{f}");
    }
}

#[test]
fn operator_env_is_checked_variable_by_variable() {
    // Only GOOSE_MODEL set by the operator: the provider still comes from the pack.
    let pack = meadow();
    let mut cmd = pack.cmd();
    cmd.env("GOOSE_MODEL", "claude-haiku");
    let run = pack.inspect_run(cmd, &["--persona", "lep"]);
    let lep = persona_in(&run.json(), "lep");
    assert_eq!(lep["env"]["GOOSE_MODEL"], "claude-haiku");
    assert_eq!(lep["env"]["GOOSE_PROVIDER"], "anthropic");
    assert_eq!(lep["env"]["GOOSE_TEMPERATURE"], "0.7");
    assert_eq!(lep["sources"]["model"], "process_env");
    assert_eq!(lep["sources"]["temperature"], "pack_defaults");
}

#[test]
fn operator_env_set_to_the_empty_string_is_set_and_not_overwritten() {
    // Spec §10 level 1 checks `std::env::var`: an empty value is set, so the pack's is not injected.
    let pack = meadow();
    let mut cmd = pack.cmd();
    cmd.env("GOOSE_MODEL", "").env("GOOSE_TEMPERATURE", "");
    let run = pack.inspect_run(cmd, &["--persona", "lep"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let lep = persona_in(&run.json(), "lep");
    assert_eq!(
        lep["env"]["GOOSE_MODEL"], "",
        "the operator's empty model stays"
    );
    assert_eq!(lep["env"]["GOOSE_TEMPERATURE"], "");
    assert_eq!(
        lep["env"]["GOOSE_PROVIDER"], "anthropic",
        "unset ones still come from the pack"
    );
    assert_eq!(lep["sources"]["model"], "process_env");
    assert_eq!(lep["sources"]["temperature"], "process_env");
}

#[test]
fn operator_env_that_is_not_a_number_still_wins_and_is_reported_as_such() {
    let pack = meadow();
    let mut cmd = pack.cmd();
    cmd.env("GOOSE_TEMPERATURE", "warm")
        .env("GOOSE_CONTEXT_LIMIT", "lots");
    let run = pack.inspect_run(cmd, &["--persona", "lep"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let lep = persona_in(&run.json(), "lep");
    assert_eq!(lep["env"]["GOOSE_TEMPERATURE"], "warm", "never overridden");
    assert_eq!(lep["env"]["GOOSE_CONTEXT_LIMIT"], "lots");
    // The agent gets the operator's value, so the pack default is not what it runs with.
    assert_eq!(lep["sources"]["temperature"], "process_env");
    assert_eq!(lep["temperature"], Value::Null);
    assert_eq!(lep["sources"]["max_context_tokens"], "process_env");
    assert_eq!(lep["max_context_tokens"], Value::Null);
}

const OVERRIDES: &str = r##"["com.example.meadow-security-team".pip]
model = "openai:gpt-5"
temperature = 0.2
subscribe = ["#ops"]
triggers = { all_messages = true }

["com.example.meadow-security-team".lep]
max_context_tokens = 32000

["com.example.other-pack".berry]
model = "openai:not-for-this-pack"
"##;

#[test]
fn overrides_file_beats_frontmatter_and_pack_defaults() {
    let pack = meadow();
    pack.write("ops/overrides.toml", OVERRIDES);
    let file = pack.file("ops/overrides.toml");
    let all = pack.inspect(&["--overrides", file.to_str().unwrap()]);
    let pip = persona_in(&all, "pip");
    assert_eq!(
        pip["model"],
        json!({"provider": "openai", "model": "gpt-5"})
    );
    assert_eq!(pip["sources"]["model"], "operator");
    assert_eq!(pip["temperature"], 0.2);
    assert_eq!(pip["sources"]["temperature"], "operator");
    assert_eq!(pip["subscribe"], json!(["ops"]));
    assert_eq!(pip["sources"]["subscribe"], "operator");
    assert_eq!(
        pip["triggers"],
        json!({"mentions": true, "keywords": [], "all_messages": true})
    );
    assert_eq!(pip["env"]["GOOSE_MODEL"], "gpt-5");
    assert_eq!(pip["env"]["GOOSE_PROVIDER"], "openai");
    assert_eq!(pip["env"]["GOOSE_TEMPERATURE"], "0.2");
    // Untouched fields still resolve from lower levels.
    assert_eq!(pip["max_context_tokens"], 128000);
    assert_eq!(pip["sources"]["max_context_tokens"], "pack_defaults");

    let lep = persona_in(&all, "lep");
    assert_eq!(lep["max_context_tokens"], 32000);
    assert_eq!(lep["env"]["GOOSE_CONTEXT_LIMIT"], "32000");
    assert_eq!(lep["sources"]["model"], "pack_defaults");

    // Another pack's table does not apply.
    let berry = persona_in(&all, "berry");
    assert_eq!(berry["model"]["model"], "claude-sonnet-4-20250514");
    assert_eq!(berry["sources"]["model"], "pack_defaults");
}

#[test]
fn process_env_beats_the_overrides_file() {
    let pack = meadow();
    pack.write("ops/overrides.toml", OVERRIDES);
    let mut cmd = pack.cmd();
    cmd.env("GOOSE_TEMPERATURE", "0.9");
    let file = pack.file("ops/overrides.toml");
    let run = pack.inspect_run(cmd, &["--overrides", file.to_str().unwrap()]);
    let pip = persona_in(&run.json(), "pip");
    assert_eq!(pip["temperature"], 0.9);
    assert_eq!(pip["sources"]["temperature"], "process_env");
    assert_eq!(pip["env"]["GOOSE_TEMPERATURE"], "0.9");
    assert_eq!(
        pip["sources"]["model"], "operator",
        "model is not in the env"
    );
}

#[test]
fn overrides_file_is_found_through_env_var_and_config_dir() {
    let pack = meadow();
    pack.write("ops/overrides.toml", OVERRIDES);

    let mut cmd = pack.cmd();
    cmd.env("APIARY_OVERRIDES", pack.file("ops/overrides.toml"));
    let run = pack.inspect_run(cmd, &["--persona", "pip"]);
    assert_eq!(
        persona_in(&run.json(), "pip")["sources"]["model"],
        "operator"
    );

    // The operator's config dir: $XDG_CONFIG_HOME/apiary/overrides.toml (HOME/.config here).
    let cfg = pack.home.path().join(".config/apiary/overrides.toml");
    std::fs::create_dir_all(cfg.parent().unwrap()).unwrap();
    std::fs::write(&cfg, OVERRIDES).unwrap();
    let all = pack.inspect(&["--persona", "pip"]);
    assert_eq!(persona_in(&all, "pip")["model"]["model"], "gpt-5");
}

#[test]
fn overrides_runtime_selects_the_env_mapping_and_unknown_personas_are_warned() {
    let pack = meadow();
    pack.write(
        "ops/overrides.toml",
        "[\"com.example.meadow-security-team\".pip]\nruntime = \"claude-agent-acp\"\n\n\
         [\"com.example.meadow-security-team\".bramble]\nmodel = \"x:y\"\n",
    );
    let file = pack.file("ops/overrides.toml");
    let all = pack.inspect(&["--overrides", file.to_str().unwrap()]);
    let pip = persona_in(&all, "pip");
    assert_eq!(pip["identity"]["runtime"], "claude-agent-acp");
    assert_eq!(pip["sources"]["runtime"], "operator");
    assert_eq!(
        pip["env"],
        json!({"ANTHROPIC_MODEL": "claude-4-opus-20250514"})
    );
    assert_eq!(persona_in(&all, "lep")["identity"]["runtime"], "goose");

    let mut c = pack.cmd();
    c.args(["pack", "inspect"])
        .arg(pack.path())
        .arg("--overrides")
        .arg(&file);
    let human = checked(apiary_e2e::Run::of(c));
    assert_eq!(human.code, 0);
    assert!(
        human.stderr.contains("bramble"),
        "overrides for a persona the pack lacks are pointed out:\n{}",
        human.stderr
    );
}

#[test]
fn bad_overrides_file_is_an_error_naming_file_and_key() {
    let pack = meadow();
    pack.write(
        "ops/overrides.toml",
        "[\"com.example.meadow-security-team\".pip]\nmodel = \"openai:gpt-5\"\ntemprature = 0.2\n",
    );
    let file = pack.file("ops/overrides.toml");
    let run = pack.inspect_run(pack.cmd(), &["--overrides", file.to_str().unwrap()]);
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert!(run.stderr.contains("temprature"), "{}", run.stderr);
    assert!(run.stderr.contains("overrides.toml"), "{}", run.stderr);

    let run = pack.inspect_run(pack.cmd(), &["--overrides", "/nonexistent/overrides.toml"]);
    assert_eq!(run.code, 1);
    assert!(run.stderr.contains("overrides"), "{}", run.stderr);
}

// ---------------------------------------------------------------------------------------------
// §6 skill scoping and the system prompt (§5, §8, §12).

#[test]
fn claimed_skills_go_only_to_their_claimers_and_unclaimed_to_everyone() {
    let all = meadow().inspect(&[]);
    // lep claims security-review and code-review; thistle claims code-review by bare name.
    assert_eq!(
        names(&persona_in(&all, "lep")["skills"]),
        ["code-review", "security-review", "shared"]
    );
    assert_eq!(
        names(&persona_in(&all, "thistle")["skills"]),
        ["code-review", "shared"]
    );
    // pip and berry claim nothing: they get only the unclaimed skill.
    assert_eq!(names(&persona_in(&all, "pip")["skills"]), ["shared"]);
    assert_eq!(names(&persona_in(&all, "berry")["skills"]), ["shared"]);
}

#[test]
fn a_skill_claimed_by_one_persona_is_no_longer_shared() {
    let pack = ScratchPack::with_manifest(
        &manifest(&["agents/a.persona.md", "agents/b.persona.md"], ""),
        &[
            ("agents/a.persona.md", &persona("a", "", "A.")),
            ("agents/b.persona.md", &persona("b", "", "B.")),
            ("skills/alpha/SKILL.md", &skill("alpha", "x")),
            ("skills/beta/SKILL.md", &skill("beta", "y")),
        ],
    );
    let all = pack.inspect(&[]);
    assert_eq!(names(&persona_in(&all, "a")["skills"]), ["alpha", "beta"]);
    assert_eq!(names(&persona_in(&all, "b")["skills"]), ["alpha", "beta"]);

    // Now `a` claims beta: b loses it.
    pack.write(
        "agents/a.persona.md",
        &persona("a", "skills:\n  - ./skills/beta/\n", "A."),
    );
    let all = pack.inspect(&[]);
    assert_eq!(names(&persona_in(&all, "a")["skills"]), ["alpha", "beta"]);
    assert_eq!(names(&persona_in(&all, "b")["skills"]), ["alpha"]);
}

#[test]
fn the_load_key_is_the_skill_name_not_the_directory() {
    let pack = ScratchPack::with_manifest(
        &manifest(&["agents/a.persona.md"], ""),
        &[
            ("agents/a.persona.md", &persona("a", "", "A.")),
            ("skills/sec/SKILL.md", &skill("security-review", "x")),
        ],
    );
    let v = pack.validate();
    v.assert_exit(2);
    let w = v.one("skill.name-mismatch");
    assert_eq!(w["severity"], "warning");
    assert_at(w, "skills/sec/SKILL.md", 2);
    let a = pack.persona("a");
    assert_eq!(names(&a["skills"]), ["security-review"]);
    assert!(
        a["system_prompt"]
            .as_str()
            .unwrap()
            .contains("Available skills: security-review\n")
    );
}

#[test]
fn system_prompt_is_body_team_instructions_then_available_skills() {
    let all = meadow().inspect(&[]);
    assert_eq!(
        persona_in(&all, "lep")["system_prompt"],
        "You are Lep, a security reviewer.\n\n---\n# Team Instructions\nEscalate to @pip.\n\n---\n\
         Available skills: code-review, security-review, shared\n\
         Load a skill with: load(source: \"skill-name\")"
    );
    assert_eq!(
        persona_in(&all, "pip")["system_prompt"],
        "You are Pip, the orchestrator.\n\n---\n# Team Instructions\nEscalate to @pip.\n\n---\n\
         Available skills: shared\nLoad a skill with: load(source: \"skill-name\")"
    );
}

#[test]
fn system_prompt_without_instructions_or_skills_is_the_body() {
    let p = one_persona_pack("").persona("a");
    assert_eq!(p["system_prompt"], "You are A.");
    assert_eq!(p["skills"], json!([]));

    // instructions.md at the conventional place is used without `pack_instructions`.
    let pack = one_persona_pack("");
    pack.write("instructions.md", "# Norms\nBe brief.\n");
    assert_eq!(
        pack.persona("a")["system_prompt"],
        "You are A.\n\n---\n# Team Instructions\n# Norms\nBe brief."
    );
}

#[test]
fn body_and_instructions_keep_their_first_lines_indentation() {
    // An indented code block, a tab and a nested list at the very start are the author's text:
    // only the blank lines around it (the frontmatter's own line breaks) are layout.
    let body = "    let x = 1;  // indented code\n\tand a tab\n  - nested item";
    let pack = ScratchPack::with_manifest(
        &manifest(&["agents/a.persona.md"], ""),
        &[(
            "agents/a.persona.md",
            &format!("---\nname: a\ndisplay_name: A\ndescription: d\n---\n\n  \n{body}\n\n\n"),
        )],
    );
    assert_eq!(pack.persona("a")["system_prompt"], body);

    pack.write("instructions.md", "\n\t- keep the tab\n  - and this\r\n\n");
    assert_eq!(
        pack.persona("a")["system_prompt"],
        format!("{body}\n\n---\n# Team Instructions\n\t- keep the tab\n  - and this")
    );
}

// ---------------------------------------------------------------------------------------------
// §7 MCP merge.

const MCP_JSON: &str = r#"{
  "mcpServers": {
    "github": {
      "command": "github-mcp-server",
      "args": ["stdio"],
      "env": { "GITHUB_PERSONAL_ACCESS_TOKEN": "${GITHUB_TOKEN}" }
    },
    "filesystem": {
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-filesystem", "/workspace"]
    }
  }
}
"#;

#[test]
fn mcp_servers_merge_pack_and_persona_persona_wins_whole_sorted_by_name() {
    let pack = ScratchPack::with_manifest(
        &manifest(&["agents/lep.persona.md", "agents/pip.persona.md"], ""),
        &[
            (".mcp.json", MCP_JSON),
            (
                "agents/lep.persona.md",
                &persona(
                    "lep",
                    "mcp_servers:\n  - name: \"semgrep\"\n    command: \"semgrep-mcp\"\n    args: [\"--stdio\"]\n    env:\n      SEMGREP_TOKEN: \"${SEMGREP_TOKEN}\"\n  - name: github\n    command: my-github\n",
                    "Lep.",
                ),
            ),
            ("agents/pip.persona.md", &persona("pip", "", "Pip.")),
        ],
    );
    let v = pack.validate();
    v.assert_exit(2);
    let refs = v.one("mcp.env-refs");
    assert_eq!(refs["severity"], "warning");
    assert_eq!(v.codes(), ["mcp.env-refs"], "{:#}", v.json);
    let msg = refs["message"].as_str().unwrap();
    assert!(
        msg.contains("${GITHUB_TOKEN}") && msg.contains("${SEMGREP_TOKEN}"),
        "{msg}"
    );

    let all = pack.inspect(&[]);
    let lep = persona_in(&all, "lep");
    let servers = lep["mcp_servers"].as_array().unwrap();
    let server_names: Vec<_> = servers
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(server_names, ["filesystem", "github", "semgrep"]);
    let github = &servers[1];
    assert_eq!(github["command"], "my-github");
    assert_eq!(
        github["args"],
        json!([]),
        "the persona entry replaces the pack's whole: no args inherited"
    );
    assert_eq!(github["env"], json!({}), "no env inherited");
    assert_eq!(servers[2]["env"]["SEMGREP_TOKEN"], "${SEMGREP_TOKEN}");

    let pip = persona_in(&all, "pip");
    let servers = pip["mcp_servers"].as_array().unwrap();
    let server_names: Vec<_> = servers
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(server_names, ["filesystem", "github"]);
    assert_eq!(servers[1]["command"], "github-mcp-server");
    assert_eq!(servers[1]["args"], json!(["stdio"]));
}

// ---------------------------------------------------------------------------------------------
// --persona

#[test]
fn persona_filter_keeps_one_and_unknown_persona_is_an_error() {
    let pack = meadow();
    let one = pack.inspect(&["--persona", "thistle"]);
    let list = one["personas"].as_array().unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0]["identity"]["name"], "thistle");

    let run = pack.inspect_run(pack.cmd(), &["--persona", "bramble"]);
    assert_eq!(run.code, 1);
    assert_eq!(run.json()["ok"], false, "the one error shape on failure");
    assert!(run.stderr.contains("bramble"), "{}", run.stderr);
    assert!(
        run.stderr.contains("pip") && run.stderr.contains("berry"),
        "lists the personas it has: {}",
        run.stderr
    );
}

#[test]
fn inspect_refuses_an_invalid_pack() {
    let pack = one_persona_pack("temprature: 0.3\n");
    let run = pack.inspect_run(pack.cmd(), &[]);
    assert_eq!(run.code, 1);
    // With --json a script gets the refusal and its findings on stdout, as `validate` lists them.
    let v: serde_json::Value = serde_json::from_str(&run.stdout).expect("JSON on stdout");
    assert_eq!(v["ok"], false, "{v}");
    let diagnostics = v["error"]["diagnostics"].as_array().expect("diagnostics");
    assert!(
        diagnostics
            .iter()
            .any(|d| d["message"].as_str().unwrap_or("").contains("temprature")),
        "{v}"
    );
}

#[test]
fn inspect_into_a_closed_pipe_ends_quietly() {
    // Enough output to overflow a pipe buffer, so writes after the reader leaves really fail.
    let names: Vec<String> = (0..40).map(|i| format!("p{i:02}")).collect();
    let manifest = format!(
        r#"{{"id":"com.example.pipe","name":"Pipe","version":"1.0.0","personas":[{}]}}"#,
        names
            .iter()
            .map(|n| format!("\"agents/{n}.persona.md\""))
            .collect::<Vec<_>>()
            .join(",")
    );
    let pack = ScratchPack::with_manifest(&manifest, &[]);
    let body = "Review the change and explain every finding with evidence.\n".repeat(80);
    for n in &names {
        pack.write(
            &format!("agents/{n}.persona.md"),
            &format!("---\nname: {n}\ndisplay_name: {n}\ndescription: d\n---\n\n{body}"),
        );
    }
    let mut child = pack
        .cmd()
        .args(["pack", "inspect", "--json"])
        .arg(pack.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = [0u8; 16];
    std::io::Read::read_exact(child.stdout.as_mut().unwrap(), &mut first).unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_ne!(out.status.code(), Some(101), "{stderr}");
}
