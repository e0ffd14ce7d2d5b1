//! End-to-end: `apiary convert` tells the truth (issue 19). Each test writes inputs shaped like
//! the class of real plugin it stands for: files kept for the way back come back; a tool policy
//! is carried into the persona's `x-tool-policy` (one with no place there is `lost` with exit 2,
//! and a policy that restricts nothing is not);
//! dangling manifest references are one `dangling-reference` each; an Agent Plugins `.mcp.json`
//! is carried; loose agent files, one agent file, Copilot and Agent Plugins marketplaces have a
//! path; `namespace:name` skills and quoted skill names convert out again; `--to claude` works.

use apiary_e2e::{Operator, Run, write_tree};
use serde_json::Value;

fn tree(env: &Operator, rel: &str, files: &[(&str, &str)]) -> String {
    let dir = env.path(rel);
    std::fs::create_dir_all(&dir).unwrap();
    write_tree(&dir, files);
    dir.display().to_string()
}

fn convert(env: &Operator, args: &[&str]) -> (Run, Value) {
    let mut all = vec!["convert"];
    all.extend_from_slice(args);
    all.push("--json");
    let r = env.run(&all);
    let v = r.json();
    (r, v)
}

/// Codes of one report list.
fn codes(v: &Value, list: &str) -> Vec<String> {
    v["report"][list]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["code"].as_str().unwrap().to_string())
        .collect()
}

fn count(v: &Value, list: &str, code: &str) -> usize {
    codes(v, list).iter().filter(|c| *c == code).count()
}

const AGENT: &str = "---\nname: helper\ndescription: Helps with things\n---\nYou help.\n";

fn plugin_json(extra: &str) -> String {
    format!(
        r#"{{"name": "kit", "version": "1.0.0", "description": "A kit", "author": {{"name": "A"}}{extra}}}"#
    )
}

#[test]
fn files_kept_for_the_way_back_come_back() {
    let env = Operator::new();
    let manifest = plugin_json("");
    let extras = [
        (".codex-plugin/plugin.json", r#"{"name": "kit"}"#),
        ("templates/report.md", "# {{title}}\n"),
        ("test/run.sh", "#!/bin/sh\necho ok\n"),
        ("commands/go.md", "Use templates/report.md\n"),
    ];
    let mut files = vec![
        (".claude-plugin/plugin.json", manifest.as_str()),
        ("agents/helper.md", AGENT),
    ];
    files.extend(extras);
    let src = tree(&env, "kit", &files);
    let (r, v) = convert(&env, &[&src, "--to", "buzz-pack"]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let pack = env.path("kit.buzz-pack").display().to_string();
    // The `x-claude` block is an extension, not an unknown key: the pack validates clean.
    let check = env.run(&["pack", "validate", &pack]);
    assert_eq!(check.code, 0, "{}{}", check.stdout, check.stderr);
    let (r, v2) = convert(&env, &[&pack, "--to", "claude"]);
    assert_eq!(r.code, 0, "{}{} {v}", r.stdout, r.stderr);
    assert_eq!(v2["target"], "claude-plugin");
    let back = env.path("kit.buzz-pack.claude-plugin");
    for (rel, text) in extras {
        assert_eq!(
            std::fs::read_to_string(back.join(rel)).unwrap_or_default(),
            text,
            "{rel} did not come back"
        );
    }
    assert_eq!(
        std::fs::read_to_string(back.join("agents/helper.md")).unwrap(),
        AGENT
    );
}

#[test]
fn a_tool_policy_is_carried_into_x_tool_policy_and_back() {
    let env = Operator::new();
    let manifest = plugin_json("");
    let cases = [
        (
            "tools: Read, Grep\n",
            "tools",
            r#"{"allow":["Read","Grep"]}"#,
        ),
        (
            "disallowedTools:\n  - Bash\n",
            "disallowedTools",
            r#"{"deny":["Bash"]}"#,
        ),
        ("readonly: true\n", "readonly", r#"{"read_only":true}"#),
        (
            "permissionMode: plan\n",
            "permissionMode",
            r#"{"read_only":true}"#,
        ),
    ];
    for (i, (line, field, policy)) in cases.iter().enumerate() {
        let agent = format!("---\nname: guard\ndescription: Guards\n{line}---\nGuard.\n");
        let src = tree(
            &env,
            &format!("policy{i}"),
            &[
                (".claude-plugin/plugin.json", manifest.as_str()),
                ("agents/guard.md", agent.as_str()),
            ],
        );
        let (r, v) = convert(&env, &[&src, "--to", "buzz-pack"]);
        assert_eq!(r.code, 0, "{field}: {}{} {v:#}", r.stdout, r.stderr);
        assert_eq!(
            count(&v, "reinterpreted", "tool-policy-carried"),
            1,
            "{v:#}"
        );
        let pack = env.path(&format!("policy{i}.buzz-pack"));
        // The persona carries the policy apiary up enforces, and the pack validates clean.
        let inspected = env.run(&["pack", "inspect", pack.to_str().unwrap(), "--json"]);
        let inspected = inspected.json();
        let wanted: Value = serde_json::from_str(policy).unwrap();
        assert_eq!(
            inspected["personas"][0]["tool_policy"], wanted,
            "{field}: {inspected:#}"
        );
        let validated = env.run(&["pack", "validate", pack.to_str().unwrap()]);
        assert_eq!(validated.code, 0, "{}", validated.stderr);
        // The way back gives the Claude agent its own keys again, as written.
        let pack = pack.display().to_string();
        let (r, _) = convert(&env, &[&pack, "--to", "claude-plugin"]);
        assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
        let back = std::fs::read_to_string(env.path(&format!(
            "policy{i}.buzz-pack.claude-plugin/agents/guard.md"
        )))
        .unwrap();
        // Byte for byte: the original frontmatter text comes back while its values are unchanged.
        assert_eq!(back, agent, "{field}");
    }
    // A restriction with no place in the policy (`allowedTools` auto-approves in Claude Code) is
    // still lost, and the exit code says so.
    let agent = "---\nname: auto\ndescription: Auto\nallowedTools: [Write]\n---\nAuto.\n";
    let src = tree(
        &env,
        "auto",
        &[
            (".claude-plugin/plugin.json", manifest.as_str()),
            ("agents/auto.md", agent),
        ],
    );
    let (r, v) = convert(&env, &[&src, "--to", "buzz-pack"]);
    assert_eq!(r.code, 2, "{}{}", r.stdout, r.stderr);
    assert_eq!(count(&v, "lost", "tool-policy-lost"), 1, "{v:#}");
    // A policy edited in the pack wins on the way out.
    let pack = env.path("policy0.buzz-pack");
    let file = pack.join("agents/guard.persona.md");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains("x-tool-policy"), "{text}");
    let edited = text.replace("Grep", "Glob");
    assert_ne!(edited, text, "{text}");
    std::fs::write(&file, edited).unwrap();
    let (r, _) = convert(
        &env,
        &[
            pack.to_str().unwrap(),
            "--to",
            "claude-plugin",
            "--out",
            env.path("edited").to_str().unwrap(),
        ],
    );
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let back = std::fs::read_to_string(env.path("edited/agents/guard.md")).unwrap();
    assert!(back.contains("tools: Read, Glob"), "{back}");
    // A policy that restricts nothing loses nothing.
    let agent = "---\nname: open\ndescription: Open\npermissionMode: default\nreadonly: false\n---\nOpen.\n";
    let src = tree(
        &env,
        "open",
        &[
            (".claude-plugin/plugin.json", manifest.as_str()),
            ("agents/open.md", agent),
        ],
    );
    let (r, v) = convert(&env, &[&src, "--to", "buzz-pack"]);
    assert_eq!(r.code, 0, "{}{} {v:#}", r.stdout, r.stderr);
}

#[test]
fn dangling_references_are_one_finding_each_and_exit_2() {
    let env = Operator::new();
    let manifest = plugin_json(
        r#", "agents": ["./agents/helper.md", "../agents/outside.md", "./agents/gone.md"], "skills": ["./missing-skills"], "commands": ["./commands/none.md"]"#,
    );
    let src = tree(
        &env,
        "dangling",
        &[
            (".claude-plugin/plugin.json", manifest.as_str()),
            ("agents/helper.md", AGENT),
        ],
    );
    let (r, v) = convert(&env, &[&src, "--to", "buzz-pack"]);
    assert_eq!(r.code, 2, "{}{}", r.stdout, r.stderr);
    assert_eq!(count(&v, "lost", "dangling-reference"), 3, "{v:#}");
    // A `skills` path inside the plugin that names nothing loses nothing: reported, not lost
    // (issue 38).
    assert_eq!(count(&v, "reinterpreted", "dangling-reference"), 1, "{v:#}");
    let fields: Vec<&str> = v["report"]["lost"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["code"] == "dangling-reference")
        .map(|f| f["field"].as_str().unwrap())
        .collect();
    assert_eq!(fields, ["commands", "agents", "agents"]);

    // Every agent dangling: still exit 2 (never 0 with a made-up persona alone).
    let manifest = plugin_json(r#", "agents": ["../elsewhere/a.md"]"#);
    let src = tree(
        &env,
        "all-dangling",
        &[(".claude-plugin/plugin.json", manifest.as_str())],
    );
    let (r, v) = convert(&env, &[&src, "--to", "buzz-pack"]);
    assert_eq!(r.code, 2, "{}{}", r.stdout, r.stderr);
    assert_eq!(count(&v, "lost", "dangling-reference"), 1, "{v:#}");
}

#[test]
fn agent_plugins_dot_mcp_json_servers_are_carried() {
    let env = Operator::new();
    let src = tree(
        &env,
        "ops",
        &[
            (
                "plugin.json",
                r#"{"$schema": "https://agent-plugins.org/schemas/1.0.0/plugin.schema.json", "name": "ops-kit", "version": "1.0.0", "description": "Tools"}"#,
            ),
            (
                ".mcp.json",
                r#"{"mcpServers": {"files": {"command": "files-mcp", "args": ["--root", "${DATA_DIR:-/tmp}"]}, "local": {"command": "${CLAUDE_PLUGIN_ROOT}/bin/local"}}}"#,
            ),
        ],
    );
    let (r, v) = convert(&env, &[&src, "--to", "buzz-pack"]);
    // The plugin-root variable has no value under apiary: lost, exit 2.
    assert_eq!(r.code, 2, "{}{}", r.stdout, r.stderr);
    assert_eq!(count(&v, "lost", "mcp-variable-unsupported"), 1, "{v:#}");
    assert_eq!(count(&v, "lost", "file-collides"), 0, "{v:#}");
    let mcp: Value = serde_json::from_str(
        &std::fs::read_to_string(env.path("ops.buzz-pack/.mcp.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(mcp["mcpServers"]["files"]["args"][1], "${DATA_DIR:-/tmp}");
    assert!(mcp["mcpServers"]["local"].is_object(), "{mcp:#}");
    let r = env.run(&[
        "pack",
        "validate",
        &env.path("ops.buzz-pack").display().to_string(),
    ]);
    // Valid: its variables are a warning (the operator's allow-list), not an error.
    assert_ne!(r.code, 1, "{}{}", r.stdout, r.stderr);
}

#[test]
fn loose_agent_files_and_one_agent_file_are_the_agents_dir_format() {
    let env = Operator::new();
    let second = "---\nname: Second Opinion\ndescription: Reviews again\n---\nReview.\n";
    let src = tree(
        &env,
        "loose",
        &[
            ("helper.md", AGENT),
            ("second.md", second),
            (
                "ui-designer.md",
                "---\nname: ui-designer\ndescription: Designs UIs\n---\nDesign.\n",
            ),
            ("README.md", "# My agents\n"),
            ("notes.md", "just notes\n"),
        ],
    );
    let (r, v) = convert(&env, &[&src, "--to", "buzz-pack"]);
    assert_eq!(r.code, 0, "{}{} {v:#}", r.stdout, r.stderr);
    assert_eq!(v["source_format"], "agents-dir");
    let manifest: Value = serde_json::from_str(
        &std::fs::read_to_string(env.path("loose.buzz-pack/.plugin/plugin.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        manifest["personas"].as_array().unwrap().len(),
        3,
        "{manifest:#}"
    );
    // A made-up persona name is lowercase; a display name keeps the acronym.
    let pack = env.path("loose.buzz-pack/agents");
    let second = std::fs::read_to_string(pack.join("second-opinion.persona.md")).unwrap();
    assert!(second.contains("display_name: Second Opinion"), "{second}");
    let ui = std::fs::read_to_string(pack.join("ui-designer.persona.md")).unwrap();
    assert!(ui.contains("display_name: UI Designer"), "{ui}");

    // One agent file as the input.
    let one = env.path("loose/helper.md").display().to_string();
    let out = env.path("one").display().to_string();
    let (r, v) = convert(&env, &[&one, "--to", "buzz-pack", "--out", &out]);
    assert_eq!(r.code, 0, "{}{} {v:#}", r.stdout, r.stderr);
    assert_eq!(v["source_format"], "agents-dir");

    // Told it is a Claude plugin, the folder is refused with the layout expected.
    let (r, v) = convert(
        &env,
        &[
            &src,
            "--from",
            "claude-plugin",
            "--to",
            "buzz-pack",
            "--force",
        ],
    );
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    let message = v["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("agents/*.md") && message.contains("agents-dir"),
        "{message}"
    );
}

#[test]
fn copilot_and_agent_plugins_marketplaces_convert() {
    let env = Operator::new();
    let manifest = plugin_json("");
    let src = tree(
        &env,
        "copilot",
        &[
            (
                ".github/plugin/marketplace.json",
                r#"{"name": "team", "owner": {"name": "T"}, "metadata": {"description": "Our plugins"}, "plugins": [{"name": "kit", "source": "./plugins/kit"}]}"#,
            ),
            ("plugins/kit/.claude-plugin/plugin.json", manifest.as_str()),
            ("plugins/kit/agents/helper.md", AGENT),
        ],
    );
    let (r, v) = convert(&env, &[&src, "--to", "buzz-pack"]);
    // Catalogue metadata has no place in a pack, but nobody loses anything at run time.
    assert_eq!(r.code, 0, "{}{} {v:#}", r.stdout, r.stderr);
    assert_eq!(v["source_format"], "claude-marketplace");
    assert!(
        env.path("copilot.buzz-pack/kit/.plugin/plugin.json")
            .is_file()
    );

    // An Agent Plugins marketplace listing itself as a local `url` source.
    let src = tree(
        &env,
        "selfmarket",
        &[
            (
                ".agents/plugins/marketplace.json",
                r#"{"name": "self", "plugins": [{"name": "kit", "source": {"source": "url", "url": "./"}}]}"#,
            ),
            (".codex-plugin/plugin.json", manifest.as_str()),
            ("agents/helper.md", AGENT),
        ],
    );
    let (r, v) = convert(
        &env,
        &[&src, "--from", "claude-marketplace", "--to", "buzz-pack"],
    );
    assert_eq!(r.code, 0, "{}{} {v:#}", r.stdout, r.stderr);

    // No marketplace where one was promised: a sentence, not a platform error number.
    let src = tree(&env, "nomarket", &[("README.md", "nothing\n")]);
    let (r, v) = convert(
        &env,
        &[&src, "--from", "claude-marketplace", "--to", "buzz-pack"],
    );
    assert_eq!(r.code, 1);
    let message = v["error"]["message"].as_str().unwrap();
    assert!(message.contains("expected one of"), "{message}");
    assert!(!message.contains("os error"), "{message}");
}

#[test]
fn namespaced_and_quoted_skill_names_convert_out_again() {
    let env = Operator::new();
    let manifest = plugin_json("");
    let src = tree(
        &env,
        "skills",
        &[
            (".claude-plugin/plugin.json", manifest.as_str()),
            ("agents/helper.md", AGENT),
            (
                "skills/review/SKILL.md",
                "---\nname: kit:review\ndescription: Reviews code\n---\nReview it.\n",
            ),
            (
                "skills/quoted/SKILL.md",
                "---\nname: \"quoted\" # the load key\ndescription: 'Quoted name'\n---\nQuote.\n",
            ),
        ],
    );
    let (r, v) = convert(&env, &[&src, "--to", "buzz-pack"]);
    assert_eq!(r.code, 0, "{}{} {v:#}", r.stdout, r.stderr);
    assert_eq!(
        count(&v, "normalised", "skill-name-unnamespaced"),
        1,
        "{v:#}"
    );
    let pack = env.path("skills.buzz-pack").display().to_string();
    for target in ["claude-plugin", "agent-plugins"] {
        let out = env.path(&format!("skills-{target}")).display().to_string();
        let (r, v) = convert(&env, &[&pack, "--to", target, "--out", &out]);
        assert_ne!(r.code, 1, "{target}: {}{} {v:#}", r.stdout, r.stderr);
        let skill =
            std::fs::read_to_string(env.path(&format!("skills-{target}/skills/review/SKILL.md")))
                .unwrap();
        assert!(skill.contains("name: review"), "{skill}");
    }
}

/// The shape of agent collections that name agents in Title Case and keep them in a folder the
/// manifest lists (not `agents/`): the pack gets lowercase persona names (reported), and the way
/// back gives the plugin back byte for byte: the names as written, the files where they were, the
/// manifest's `agents` paths kept. Claude Code loads such names, so the output check only warns.
#[test]
fn title_case_agents_in_a_listed_folder_round_trip_byte_for_byte() {
    let env = Operator::new();
    let manifest = "{\n  \"name\": \"harbor-kit\",\n  \"version\": \"0.3.0\",\n  \"description\": \"Harbor crew\",\n  \"agents\": [\n    \"./crew/tide-watcher.md\",\n    \"./crew/harbor-master.md\"\n  ]\n}\n";
    let files = [
        (".claude-plugin/plugin.json", manifest),
        (
            "crew/tide-watcher.md",
            "---\nname: Tide Watcher\ndescription: Reads the tide tables before a sailing\n---\nYou read tide tables.\n",
        ),
        (
            "crew/harbor-master.md",
            "---\nname: Harbor Master\ndescription: Assigns berths\nmodel: sonnet\n---\nYou assign berths.\n",
        ),
    ];
    let src = tree(&env, "harbor", &files);
    let (r, v) = convert(&env, &[&src, "--to", "buzz-pack"]);
    assert_ne!(r.code, 1, "{}{} {v:#}", r.stdout, r.stderr);
    let pack = env.path("harbor.buzz-pack");
    for persona in ["tide-watcher", "harbor-master"] {
        assert!(
            pack.join(format!("agents/{persona}.persona.md")).is_file(),
            "{persona}: {v:#}"
        );
    }
    assert_eq!(count(&v, "normalised", "name-normalised"), 2, "{v:#}");

    let back = env.path("harbor-back");
    let (r, v) = convert(
        &env,
        &[
            &pack.display().to_string(),
            "--to",
            "claude",
            "--out",
            &back.display().to_string(),
        ],
    );
    assert_eq!(r.code, 0, "{}{} {v:#}", r.stdout, r.stderr);
    // Title Case is a warning of the output check, not an error.
    let warnings = v["validation"]["warnings"].as_array().unwrap();
    assert!(
        warnings
            .iter()
            .all(|w| !w["message"].as_str().unwrap().contains("Tide Watcher")),
        "agents outside agents/ are not name-checked as agents/ files: {v:#}"
    );
    let before = apiary_e2e::snapshot(std::path::Path::new(&src), &[]);
    let after = apiary_e2e::snapshot(&back, &[]);
    let diffs = crate::support::tree_diff::differences(&before, &after);
    assert!(diffs.is_empty(), "{diffs:#?}");

    // The same agents in agents/: the names come back as written there too.
    let files = [
        (
            ".claude-plugin/plugin.json",
            "{\n  \"name\": \"harbor-kit\"\n}\n",
        ),
        (
            "agents/tide-watcher.md",
            "---\nname: Tide Watcher\ndescription: Reads the tide tables\n---\nYou read tide tables.\n",
        ),
    ];
    let src = tree(&env, "harbor2", &files);
    let (r, v) = convert(&env, &[&src, "--to", "buzz-pack"]);
    assert_ne!(r.code, 1, "{}{} {v:#}", r.stdout, r.stderr);
    let pack = env.path("harbor2.buzz-pack").display().to_string();
    let back = env.path("harbor2-back");
    let (r, v) = convert(
        &env,
        &[
            &pack,
            "--to",
            "claude",
            "--out",
            &back.display().to_string(),
        ],
    );
    assert_eq!(r.code, 0, "{}{} {v:#}", r.stdout, r.stderr);
    let warned = v["validation"]["warnings"].as_array().unwrap();
    assert!(
        warned
            .iter()
            .any(|w| w["message"].as_str().unwrap().contains("\"Tide Watcher\"")),
        "{v:#}"
    );
    assert_eq!(
        std::fs::read_to_string(back.join("agents/tide-watcher.md")).unwrap(),
        files[1].1
    );
}
