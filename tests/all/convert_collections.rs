//! End-to-end: whole real collections converted as their users would expect (issue 38). Each test
//! writes an input of its own shaped like one class of collection input the converters got wrong
//! (an odd skill in a big plugin, loose agent folders, foreign tool vocabularies, …), converts it
//! through the binary, validates the output with `apiary pack validate` and checks what a user
//! would notice: exit codes, names, findings, files.

use std::path::Path;

use apiary_e2e::{Operator, Run, write_tree};
use serde_json::Value;

fn tree(env: &Operator, rel: &str, files: &[(&str, &str)]) -> String {
    let dir = env.path(rel);
    std::fs::create_dir_all(&dir).unwrap();
    write_tree(&dir, files);
    dir.display().to_string()
}

/// `apiary convert <args> --json`: the run and its document.
fn convert(env: &Operator, args: &[&str]) -> (Run, Value) {
    let mut all = vec!["convert"];
    all.extend_from_slice(args);
    all.push("--json");
    let r = env.run(&all);
    let v = r.json();
    (r, v)
}

/// The findings of one report list as (code, path, message).
fn findings(v: &Value, list: &str) -> Vec<(String, String, String)> {
    v["report"][list]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let s = |k: &str| f[k].as_str().unwrap_or_default().to_string();
            (s("code"), s("path"), s("message"))
        })
        .collect()
}

fn has_code(v: &Value, list: &str, code: &str) -> bool {
    findings(v, list).iter().any(|(c, _, _)| c == code)
}

/// `apiary pack validate <dir>`, which must pass without errors: its exit code and output.
fn validate(env: &Operator, dir: &str) -> Run {
    let r = env.run(&["pack", "validate", dir]);
    assert_ne!(r.code, 1, "pack validate {dir}: {}{}", r.stdout, r.stderr);
    r
}

fn manifest(dir: &str) -> Value {
    let text = std::fs::read_to_string(Path::new(dir).join(".plugin/plugin.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// The persona names of the pack at `dir`, from the files its manifest lists.
fn persona_names(dir: &str) -> Vec<String> {
    manifest(dir)["personas"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let file = p.as_str().unwrap();
            let name = Path::new(file).file_name().unwrap().to_string_lossy();
            name.trim_end_matches(".persona.md").to_string()
        })
        .collect()
}

fn agent(name: &str, extra: &str) -> String {
    format!(
        "---\nname: {name}\ndescription: The {name} of the team\n{extra}---\nYou are the {name}.\n"
    )
}

fn skill(name: &str) -> String {
    format!("---\nname: {name}\ndescription: Does {name} work\n---\nSteps for {name}.\n")
}

// Class 1: one odd component must not sink the whole plugin.

#[test]
fn a_skill_spelled_unlike_its_folder_is_normalised_and_the_rest_converts() {
    let env = Operator::new();
    let (a1, a2, a3) = (
        agent("archivist", ""),
        agent("scribe", ""),
        agent("critic", ""),
    );
    let (s1, s2) = (skill("outline"), skill("journal:gather-notes"));
    let s3 = skill("Tidy Prose");
    let src = tree(
        &env,
        "journal",
        &[
            (
                ".claude-plugin/plugin.json",
                r#"{"name": "journal", "version": "0.3.0", "description": "Notebook helpers"}"#,
            ),
            ("agents/archivist.md", &a1),
            ("agents/scribe.md", &a2),
            ("agents/critic.md", &a3),
            ("skills/outline/SKILL.md", &s1),
            // Namespaced, and the folder uses `_` where the name uses `-`.
            ("skills/gather_notes/SKILL.md", &s2),
            ("skills/gather_notes/template.md", "# Notes\n"),
            // A display name where a load key belongs.
            ("skills/tidy-prose/SKILL.md", &s3),
        ],
    );
    let out = env.path("journal.pack").display().to_string();
    let (r, v) = convert(&env, &[&src, "--to", "buzz-pack", "--out", &out]);
    // Nothing was lost: renaming a skill to its own load key is a normalisation.
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(v["ok"].as_bool().unwrap());
    assert_eq!(persona_names(&out).len(), 3);
    let out_dir = Path::new(&out);
    let md = std::fs::read_to_string(out_dir.join("skills/gather-notes/SKILL.md")).unwrap();
    assert!(md.contains("name: gather-notes\n"), "{md}");
    assert!(out_dir.join("skills/gather-notes/template.md").is_file());
    assert!(!out_dir.join("skills/gather_notes").exists());
    let md = std::fs::read_to_string(out_dir.join("skills/tidy-prose/SKILL.md")).unwrap();
    assert!(md.contains("name: tidy-prose\n"), "{md}");
    assert!(out_dir.join("skills/outline/SKILL.md").is_file());
    // Each change is reported where the user can find it.
    let normalised = findings(&v, "normalised");
    let gather = normalised
        .iter()
        .find(|(_, p, _)| p == "skills/gather_notes/SKILL.md")
        .unwrap_or_else(|| panic!("{normalised:?}"));
    assert_eq!(gather.0, "skill-name-unnamespaced");
    assert!(gather.2.contains("journal:gather-notes") && gather.2.contains("skills/gather-notes"));
    assert!(
        normalised
            .iter()
            .any(|(c, p, _)| c == "skill-name-normalised" && p == "skills/tidy-prose/SKILL.md"),
        "{normalised:?}"
    );
    let checked = validate(&env, &out);
    assert_eq!(checked.code, 0, "{}{}", checked.stdout, checked.stderr);
}

// Class 2: components that are not there.

/// A marketplace whose plugin lists agents, a skill, a command and an MCP file its publish step
/// copies in from the collection root (two spellings), one agent that is nowhere, and one path
/// that climbs out of the input to a file that does exist beside it.
fn materialised_market(env: &Operator) -> String {
    let (scout, lookout, spy) = (agent("scout", ""), agent("lookout", ""), agent("spy", ""));
    let s = skill("chart");
    tree(env, "outside/secret", &[("spy.md", &spy)]);
    tree(
        env,
        "outside/market",
        &[
            (
                ".claude-plugin/marketplace.json",
                r#"{"name": "market", "owner": {"name": "M"}, "plugins": [
                    {"name": "rangers", "source": "./plugins/rangers"}]}"#,
            ),
            (
                "plugins/rangers/.claude-plugin/plugin.json",
                r#"{"name": "rangers", "version": "1.0.0", "description": "Rangers",
                    "agents": ["../../shared/agents/scout.md", "./shared/agents/lookout.md",
                               "./agents/ghost.md", "../../../secret/spy.md"],
                    "skills": ["./shared/skills/chart"],
                    "commands": ["./shared/commands/patrol.md"],
                    "mcpServers": "../../shared/servers.json"}"#,
            ),
            (
                "shared/servers.json",
                r#"{"mcpServers": {"radio": {"command": "radio-mcp"}}}"#,
            ),
            ("shared/agents/scout.md", &scout),
            ("shared/agents/lookout.md", &lookout),
            ("shared/skills/chart/SKILL.md", &s),
            ("shared/commands/patrol.md", "# Patrol\nWalk the border.\n"),
        ],
    )
}

#[test]
fn components_a_collection_holds_are_found_there_and_the_rest_are_lost_loudly() {
    let env = Operator::new();
    let src = materialised_market(&env);
    let out = env.path("rangers.pack").display().to_string();
    let (r, v) = convert(
        &env,
        &[
            &src,
            "--to",
            "buzz-pack",
            "--option",
            "plugin=rangers",
            "--out",
            &out,
        ],
    );
    // One agent is nowhere and one lies outside the input: lost, so not exit 0.
    assert_eq!(r.code, 2, "{}{}", r.stdout, r.stderr);
    let mut names = persona_names(&out);
    names.sort();
    assert_eq!(names, ["lookout", "scout"], "{v:#}");
    let out_dir = Path::new(&out);
    assert!(out_dir.join("skills/chart/SKILL.md").is_file());
    assert!(
        out_dir
            .join("x-claude/files/shared/commands/patrol.md")
            .is_file()
    );
    let lost = findings(&v, "lost");
    let dangling: Vec<_> = lost
        .iter()
        .filter(|(c, _, _)| c == "dangling-reference")
        .collect();
    assert_eq!(dangling.len(), 2, "{lost:?}");
    for (_, path, _) in &dangling {
        assert_eq!(path, "plugins/rangers/.claude-plugin/plugin.json");
    }
    assert!(
        dangling
            .iter()
            .any(|(_, _, m)| m.contains("./agents/ghost.md"))
    );
    assert!(
        dangling
            .iter()
            .any(|(_, _, m)| m.contains("../../../secret/spy.md") && m.contains("leaves the input")),
        "{lost:?}"
    );
    // Path traversal: what lies beside the input is never read.
    let text = apiary_e2e::snapshot(out_dir, &[]);
    assert!(
        !text
            .values()
            .any(|b| String::from_utf8_lossy(b).contains("You are the spy")),
        "the file outside the input was read"
    );
    let from = findings(&v, "reinterpreted")
        .into_iter()
        .filter(|(c, _, _)| c == "component-from-collection")
        .count();
    assert_eq!(from, 5, "{v:#}");
    assert!(read(&out, ".mcp.json").contains("radio-mcp"));
    let checked = validate(&env, &out);
    assert_eq!(checked.code, 0, "{}{}", checked.stdout, checked.stderr);

    // Back to Claude: a plugin that holds what it names, and Claude's paths point inside it.
    let back = env.path("rangers.claude").display().to_string();
    let (r, _) = convert(&env, &[&out, "--to", "claude", "--out", &back]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let plugin: Value = serde_json::from_str(
        &std::fs::read_to_string(Path::new(&back).join(".claude-plugin/plugin.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        plugin["commands"],
        serde_json::json!(["./shared/commands/patrol.md"])
    );
    assert!(Path::new(&back).join("shared/commands/patrol.md").is_file());
    assert!(plugin.get("agents").is_none(), "{plugin:#}");
    assert!(Path::new(&back).join("agents/scout.md").is_file());
    assert_eq!(plugin["mcpServers"], "./shared/servers.json");
    assert!(read(&back, "shared/servers.json").contains("radio-mcp"));
}

#[test]
fn a_collection_file_that_links_out_of_the_input_is_refused() {
    let env = Operator::new();
    let src = materialised_market(&env);
    // Inside the collection by its path, outside the input by its target.
    std::os::unix::fs::symlink(
        "../../../secret/spy.md",
        Path::new(&src).join("shared/agents/link.md"),
    )
    .unwrap();
    let out = env.path("linked.pack").display().to_string();
    let (r, v) = convert(
        &env,
        &[
            &src,
            "--to",
            "buzz-pack",
            "--option",
            "plugin=rangers",
            "--out",
            &out,
        ],
    );
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    let message = v["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("shared/agents/link.md") && message.contains("outside the input"),
        "{message}"
    );
    assert!(!Path::new(&out).exists());
}

#[test]
fn a_plugin_converted_alone_reports_what_its_collection_would_have_held() {
    let env = Operator::new();
    let src = materialised_market(&env);
    let plugin = format!("{src}/plugins/rangers");
    let (r, v) = convert(&env, &[&plugin, "--to", "buzz-pack"]);
    // Nothing the manifest lists is in the plugin folder: every agent, command and MCP path is a
    // lost component; the `skills` folder path names nothing to convert (reported, not lost).
    assert_eq!(r.code, 2, "{}{}", r.stdout, r.stderr);
    let dangling: Vec<_> = findings(&v, "lost")
        .into_iter()
        .filter(|(c, _, _)| c == "dangling-reference")
        .collect();
    assert_eq!(dangling.len(), 6, "{dangling:?}");
    assert!(
        dangling
            .iter()
            .any(|(_, _, m)| m.contains("../../shared/agents/scout.md")
                && m.contains("leaves the plugin")),
        "{dangling:?}"
    );
    assert!(!has_code(&v, "reinterpreted", "component-from-collection"));
    assert!(has_code(&v, "reinterpreted", "dangling-reference"), "{v:#}");
}

// Class 3: loose agent folders.

#[test]
fn loose_agent_folders_are_named_after_their_folder_and_keep_subfolder_agents() {
    let env = Operator::new();
    let (planner, scout) = (agent("planner", ""), agent("scout", ""));
    let (tester, linter) = (agent("tester", ""), agent("linter", ""));
    let roots = [
        tree(
            &env,
            "collection/engineering",
            &[
                ("planner.md", &planner),
                ("scout.md", &scout),
                // Grouped by topic one level down: agents too.
                ("quality/tester.md", &tester),
                ("quality/deep/linter.md", &linter),
                ("notes/plain.md", "# Not an agent\n"),
            ],
        ),
        tree(&env, "other/ops/agents", &[("planner.md", &planner)]),
    ];
    let mut ids = Vec::new();
    for (src, id) in roots.iter().zip(["engineering", "ops"]) {
        let out = format!("{src}.pack");
        let (r, v) = convert(&env, &[src, "--to", "buzz-pack", "--out", &out]);
        assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
        let m = manifest(&out);
        assert_eq!(m["id"], id, "{m}");
        assert_eq!(m["name"], id, "{m}");
        // The finding cites the folder, not a manifest that is not there.
        let named = findings(&v, "synthesised")
            .into_iter()
            .find(|(c, _, _)| c == "name-synthesised")
            .unwrap();
        assert!(!named.1.contains("plugin.json"), "{named:?}");
        assert!(named.2.contains(id), "{named:?}");
        let checked = validate(&env, &out);
        assert_eq!(checked.code, 0, "{}{}", checked.stdout, checked.stderr);
        ids.push(m["id"].as_str().unwrap().to_string());
    }
    assert_ne!(ids[0], ids[1]);
    let mut names = persona_names(&format!("{}.pack", roots[0]));
    names.sort();
    assert_eq!(names, ["linter", "planner", "scout", "tester"]);
    // The plain note is no agent and is still there, carried.
    let carried = Path::new(&format!("{}.pack", roots[0])).join("x-claude/files/notes/plain.md");
    assert!(carried.is_file());
}

#[test]
fn a_root_of_department_folders_is_refused_with_the_per_folder_command() {
    let env = Operator::new();
    let (a, b) = (agent("designer", ""), agent("writer", ""));
    let src = tree(
        &env,
        "departments",
        &[
            ("design/designer.md", &a),
            ("content/writer.md", &b),
            ("README.md", "# Our agents\n"),
        ],
    );
    let out = env.path("departments.pack").display().to_string();
    let (r, v) = convert(&env, &[&src, "--to", "buzz-pack", "--out", &out]);
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    assert!(!Path::new(&out).exists());
    let message = v["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("content/") && message.contains("design/"),
        "{message}"
    );
    assert!(
        message.contains(&format!("apiary convert {src}/content --to buzz-pack")),
        "{message}"
    );
    // The suggested command works.
    let one = env.path("content.pack").display().to_string();
    let (r, _) = convert(
        &env,
        &[
            &format!("{src}/content"),
            "--to",
            "buzz-pack",
            "--out",
            &one,
        ],
    );
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert_eq!(manifest(&one)["id"], "content");
}

/// The frontmatter lines of a converted persona file, which must exist.
fn persona_text(dir: &str, name: &str) -> String {
    std::fs::read_to_string(Path::new(dir).join(format!("agents/{name}.persona.md"))).unwrap()
}

/// `apiary pack inspect <dir> --persona <name> --json`: the persona as `up` would run it.
fn inspect(env: &Operator, dir: &str, name: &str) -> Value {
    let r = env.run(&["pack", "inspect", dir, "--persona", name, "--json"]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    r.json()["personas"][0].clone()
}

// Class 4: foreign tool vocabularies.

#[test]
fn copilot_tool_names_become_policy_names_and_mcp_servers_the_personas() {
    let env = Operator::new();
    let reviewer = agent(
        "reviewer",
        "tools: ['search', 'edit/editFiles', 'runCommands', 'vscodeAPI', 'tracker/*', 'Read']\nmcp-servers:\n  tracker:\n    type: local\n    command: tracker-mcp\n    args: ['--stdio']\n    tools: ['*']\n",
    );
    let src = tree(&env, "copilot-team", &[("reviewer.agent.md", &reviewer)]);
    let out = env.path("copilot-team.pack").display().to_string();
    let (r, v) = convert(&env, &[&src, "--to", "buzz-pack", "--out", &out]);
    // The editor-only tool is left out of a list that keeps others: nothing the runtimes could
    // run is lost.
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let text = persona_text(&out, "reviewer");
    for entry in [
        "kind:search",
        "kind:edit",
        "kind:execute",
        "mcp__tracker__*",
        "Read",
    ] {
        assert!(text.contains(entry), "{entry} missing:\n{text}");
    }
    assert!(
        !text.contains("- vscodeAPI") && !text.contains("editFiles"),
        "{text}"
    );
    assert!(has_code(&v, "normalised", "tool-names-mapped"), "{v:#}");
    let unmapped = findings(&v, "reinterpreted")
        .into_iter()
        .find(|(c, _, _)| c == "tool-unmapped")
        .unwrap();
    assert!(unmapped.2.contains("vscodeAPI"), "{unmapped:?}");
    // The per-agent server is the persona's own, as `up` starts it.
    let checked = validate(&env, &out);
    assert_eq!(checked.code, 0, "{}{}", checked.stdout, checked.stderr);
    let p = inspect(&env, &out, "reviewer");
    let servers = p["mcp_servers"].as_array().unwrap();
    assert_eq!(servers.len(), 1, "{p:#}");
    assert_eq!(servers[0]["name"], "tracker");
    assert_eq!(servers[0]["command"], "tracker-mcp");
    assert!(has_code(&v, "reinterpreted", "mcp-servers-mapped"), "{v:#}");
    assert!(
        !findings(&v, "reinterpreted")
            .iter()
            .any(|(_, _, m)| m.contains("`mcp-servers`") && m.contains("no such field")),
        "{v:#}"
    );

    // Only names no runtime has: no allow list is left, the persona may use any tool: lost.
    let editor = agent("editor-bot", "tools: ['vscodeAPI', 'extensions']\n");
    let src = tree(&env, "editor-team", &[("editor-bot.agent.md", &editor)]);
    let out = env.path("editor-team.pack").display().to_string();
    let (r, v) = convert(&env, &[&src, "--to", "buzz-pack", "--out", &out]);
    assert_eq!(r.code, 2, "{}{}", r.stdout, r.stderr);
    assert!(has_code(&v, "lost", "tool-unmapped"), "{v:#}");
    assert!(!persona_text(&out, "editor-bot").contains("x-tool-policy"));
    validate(&env, &out);
}

// Class 6 and 7: honest exit codes; converted personas that can wake.

#[test]
fn converted_personas_listen_on_a_default_channel_and_exit_codes_tell() {
    let env = Operator::new();
    let helper = agent("helper", "");
    let src = tree(
        &env,
        "garden",
        &[
            (
                ".claude-plugin/plugin.json",
                r#"{"name": "garden", "version": "1.0.0", "description": "Garden helpers", "skills": ["./more-skills"]}"#,
            ),
            ("agents/helper.md", &helper),
        ],
    );
    let out = env.path("garden.pack").display().to_string();
    let (r, v) = convert(&env, &[&src, "--to", "buzz-pack", "--out", &out]);
    // The `skills` path names nothing: reported, nothing lost.
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(has_code(&v, "reinterpreted", "dangling-reference"), "{v:#}");
    assert!(has_code(&v, "synthesised", "channel-defaulted"), "{v:#}");
    assert_eq!(
        manifest(&out)["defaults"]["subscribe"],
        serde_json::json!(["#garden"])
    );
    let checked = validate(&env, &out);
    assert_eq!(checked.code, 0, "{}{}", checked.stdout, checked.stderr);
    assert_eq!(
        inspect(&env, &out, "helper")["subscribe"],
        serde_json::json!(["garden"])
    );

    // Back to Claude: the channel was apiary's, so no `x-persona` block for it.
    let back = env.path("garden.claude").display().to_string();
    let (r, _) = convert(&env, &[&out, "--to", "claude", "--out", &back]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let plugin =
        std::fs::read_to_string(Path::new(&back).join(".claude-plugin/plugin.json")).unwrap();
    assert!(!plugin.contains("x-persona"), "{plugin}");

    // A server the personas cannot start is dropped from what runs: exit 2.
    let src = tree(
        &env,
        "streams",
        &[
            (
                ".claude-plugin/plugin.json",
                r#"{"name": "streams", "version": "1.0.0"}"#,
            ),
            ("agents/helper.md", &helper),
            (
                ".mcp.json",
                r#"{"mcpServers": {"feed": {"type": "sse", "url": "https://feed.invalid/sse"}}}"#,
            ),
        ],
    );
    let (r, v) = convert(&env, &[&src, "--to", "buzz-pack"]);
    assert_eq!(r.code, 2, "{}{}", r.stdout, r.stderr);
    assert!(has_code(&v, "lost", "mcp-transport-unsupported"), "{v:#}");

    // A plugin without agents: its synthesised persona is not written back, and nothing is lost.
    let s = skill("prune");
    let src = tree(
        &env,
        "skills-only",
        &[
            (
                ".claude-plugin/plugin.json",
                r#"{"name": "skills-only", "version": "1.0.0", "description": "Pruning"}"#,
            ),
            ("skills/prune/SKILL.md", &s),
        ],
    );
    let pack = env.path("skills-only.pack").display().to_string();
    let (r, _) = convert(&env, &[&src, "--to", "buzz-pack", "--out", &pack]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let (r, v) = convert(&env, &[&pack, "--to", "claude"]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(has_code(&v, "reinterpreted", "persona-dropped"), "{v:#}");
}

// Class 5: there and back.

fn read(dir: &str, rel: &str) -> String {
    std::fs::read_to_string(Path::new(dir).join(rel)).unwrap_or_else(|e| panic!("{dir}/{rel}: {e}"))
}

#[test]
fn an_mcp_file_the_manifest_names_comes_back_at_its_path() {
    let env = Operator::new();
    let helper = agent("helper", "");
    // Indented its own way, so only a restored file compares equal.
    let servers = "{\n    \"mcpServers\": {\"ledger\": {\"command\": \"ledger-mcp\"}}\n}\n";
    let src = tree(
        &env,
        "books",
        &[
            (
                ".claude-plugin/plugin.json",
                r#"{"name": "books", "version": "1.0.0", "description": "Books", "mcpServers": "./.claude-plugin/servers.json"}"#,
            ),
            (".claude-plugin/servers.json", servers),
            ("agents/helper.md", &helper),
        ],
    );
    let pack = env.path("books.pack").display().to_string();
    let (r, _) = convert(&env, &[&src, "--to", "buzz-pack", "--out", &pack]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    validate(&env, &pack);
    assert!(read(&pack, ".mcp.json").contains("ledger-mcp"));
    let back = env.path("books.claude").display().to_string();
    let (r, v) = convert(&env, &[&pack, "--to", "claude", "--out", &back]);
    // Refused before: the restored manifest named a file the output did not hold.
    assert_eq!(r.code, 0, "{}{} {v:#}", r.stdout, r.stderr);
    assert_eq!(read(&back, ".claude-plugin/servers.json"), servers);
    assert!(!Path::new(&back).join(".mcp.json").exists());
}

#[test]
fn agent_plugins_names_a_skill_folder_after_its_skill_and_the_way_back_restores_it() {
    let env = Operator::new();
    let src = native_pack(&env, "bakery", "", r#"{"mcpServers": {}}"#);
    // The pack's folder is spelled unlike the skill's load key (pack validate only warns).
    write_tree(
        Path::new(&src),
        &[("skills/proofing/SKILL.md", &skill("proof"))],
    );
    validate(&env, &src);
    let ops = env.path("bakery.ops").display().to_string();
    let (r, v) = convert(&env, &[&src, "--to", "agent-plugins", "--out", &ops]);
    // Refused before: the output validator wants the folder to equal the name.
    assert_eq!(r.code, 0, "{}{} {v:#}", r.stdout, r.stderr);
    assert!(Path::new(&ops).join("skills/proof/SKILL.md").is_file());
    assert!(!Path::new(&ops).join("skills/proofing").exists());
    assert!(has_code(&v, "normalised", "skill-dir-renamed"), "{v:#}");
    let back = env.path("bakery.back").display().to_string();
    let (r, _) = convert(&env, &[&ops, "--to", "buzz-pack", "--out", &back]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert_eq!(
        read(&back, "skills/proofing/SKILL.md"),
        read(&src, "skills/proofing/SKILL.md")
    );
    validate(&env, &back);
}

/// A Copilot CLI plugin: its manifest at the root, `.mcp.json` beside it, `.agent.md` agents.
const COPILOT_PLUGIN: &str = r#"{
  "name": "kiln",
  "description": "Pottery helpers",
  "version": "2.3.0",
  "author": {"name": "Clay Works", "url": "https://clay.example"},
  "license": "MIT",
  "keywords": ["pottery", "glaze"],
  "homepage": "https://clay.example/kiln",
  "mcpServers": ".mcp.json"
}
"#;

#[test]
fn a_copilot_plugin_keeps_its_manifest_and_mcp_json_there_and_back() {
    let env = Operator::new();
    let glazer = agent("glazer", "");
    let mcp = "{\"mcpServers\": {\"oven\": {\"command\": \"oven-mcp\", \"args\": []}}}\n";
    let src = tree(
        &env,
        "kiln",
        &[
            ("plugin.json", COPILOT_PLUGIN),
            (".mcp.json", mcp),
            ("agents/glazer.agent.md", &glazer),
        ],
    );
    let pack = env.path("kiln.pack").display().to_string();
    let (r, v) = convert(&env, &[&src, "--to", "buzz-pack", "--out", &pack]);
    assert_eq!(r.code, 0, "{}{} {v:#}", r.stdout, r.stderr);
    let m = manifest(&pack);
    assert_eq!(m["version"], "2.3.0", "{m:#}");
    assert_eq!(m["license"], "MIT");
    assert!(!Path::new(&pack).join("x-claude/files/plugin.json").exists());
    validate(&env, &pack);
    let back = env.path("kiln.back").display().to_string();
    let (r, _) = convert(&env, &[&pack, "--to", "claude", "--out", &back]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert_eq!(read(&back, ".mcp.json"), mcp);
    assert_eq!(read(&back, "plugin.json"), COPILOT_PLUGIN);
    assert!(
        Path::new(&back)
            .join(".claude-plugin/plugin.json")
            .is_file()
    );
}

#[test]
fn a_copilot_plugin_without_agents_is_detected_by_its_manifest() {
    let env = Operator::new();
    let s = skill("trim");
    for (rel, text) in [
        (
            "plugin.json",
            r#"{"name": "lathe", "version": "0.4.0", "skills": ["skills/"]}"#,
        ),
        (
            ".github/plugin/plugin.json",
            r#"{"name": "lathe", "version": "0.4.0"}"#,
        ),
    ] {
        let src = tree(
            &env,
            &format!("lathe-{}", rel.len()),
            &[(rel, text), ("skills/trim/SKILL.md", &s)],
        );
        let pack = format!("{src}.pack");
        let (r, v) = convert(&env, &[&src, "--to", "buzz-pack", "--out", &pack]);
        // Refused before: no rule knew a Copilot manifest, and no agents/ stood in for one.
        assert_eq!(r.code, 0, "{rel}: {}{} {v:#}", r.stdout, r.stderr);
        assert_eq!(v["detected_by"]["rule"], "copilot-plugin-json", "{v:#}");
        assert_eq!(manifest(&pack)["version"], "0.4.0");
        assert!(Path::new(&pack).join("skills/trim/SKILL.md").is_file());
        validate(&env, &pack);
    }
    // A stray plugin.json with a name only is still no plugin.
    let src = tree(
        &env,
        "stray",
        &[("plugin.json", r#"{"name": "x"}"#), ("notes.txt", "x\n")],
    );
    let (r, _) = convert(&env, &[&src, "--to", "buzz-pack"]);
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
}

#[test]
fn a_copilot_marketplace_reads_each_plugins_own_manifest() {
    let env = Operator::new();
    let glazer = agent("glazer", "");
    let src = tree(
        &env,
        "studio",
        &[
            (
                ".github/plugin/marketplace.json",
                r#"{"name": "studio", "owner": {"name": "S"}, "plugins": [
                    {"name": "kiln", "source": "./plugins/kiln", "description": "Short blurb"},
                    {"name": "wheel", "source": "./plugins/wheel", "description": "Throwing"}]}"#,
            ),
            ("plugins/kiln/.github/plugin/plugin.json", COPILOT_PLUGIN),
            ("plugins/kiln/agents/glazer.agent.md", &glazer),
            (
                "plugins/wheel/agents/thrower.agent.md",
                &agent("thrower", ""),
            ),
        ],
    );
    let out = env.path("studio.pack").display().to_string();
    let (r, v) = convert(&env, &[&src, "--to", "buzz-pack", "--out", &out]);
    assert_eq!(r.code, 0, "{}{} {v:#}", r.stdout, r.stderr);
    let kiln = format!("{out}/kiln");
    let m = manifest(&kiln);
    for (key, want) in [
        ("description", serde_json::json!("Pottery helpers")),
        ("version", serde_json::json!("2.3.0")),
        ("license", serde_json::json!("MIT")),
        ("keywords", serde_json::json!(["pottery", "glaze"])),
        ("homepage", serde_json::json!("https://clay.example/kiln")),
    ] {
        assert_eq!(m[key], want, "{key}: {m:#}");
    }
    assert_eq!(m["author"]["name"], "Clay Works");
    // Only the plugin without a manifest of its own takes the marketplace entry's.
    let synthesised = findings(&v, "synthesised");
    let from_entry: Vec<_> = synthesised
        .iter()
        .filter(|(c, _, _)| c == "manifest-from-marketplace")
        .map(|(_, p, _)| p.as_str())
        .collect();
    assert_eq!(from_entry, ["plugins/wheel"], "{synthesised:?}");
    validate(&env, &kiln);
    validate(&env, &format!("{out}/wheel"));
}

// Class 6: exit codes that tell, both ways, from every writer.

/// A persona pack of two personas; `extra` goes into the first one's frontmatter.
fn native_pack(env: &Operator, rel: &str, extra: &str, mcp: &str) -> String {
    let persona = |name: &str, display: &str, more: &str| {
        format!(
            "---\nname: {name}\ndisplay_name: {display}\ndescription: The {name}\n{more}---\nYou are the {name}.\n"
        )
    };
    let (a, b) = (
        persona("baker", "Baker", extra),
        persona("grocer", "Grocer", ""),
    );
    tree(
        env,
        rel,
        &[
            (
                ".plugin/plugin.json",
                r##"{"id": "market-street", "name": "market-street", "version": "1.0.0", "description": "Shops",
                    "personas": ["agents/baker.persona.md", "agents/grocer.persona.md"],
                    "defaults": {"subscribe": ["#market-street"]}}"##,
            ),
            ("agents/baker.persona.md", &a),
            ("agents/grocer.persona.md", &b),
            (".mcp.json", mcp),
        ],
    )
}

fn claude_manifest(dir: &str) -> Value {
    let text = std::fs::read_to_string(Path::new(dir).join(".claude-plugin/plugin.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

#[test]
fn x_persona_is_written_only_when_it_carries_something() {
    let env = Operator::new();
    let plain = native_pack(&env, "plain", "", r#"{"mcpServers": {}}"#);
    validate(&env, &plain);
    let out = env.path("plain.claude").display().to_string();
    let (r, _) = convert(&env, &[&plain, "--to", "claude", "--out", &out]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    // Display names, id, channel and order are what reading it back derives: no block.
    let m = claude_manifest(&out);
    assert!(m.get("x-persona").is_none(), "{m:#}");
    // And reading it back gives them again.
    let again = env.path("plain.again").display().to_string();
    let (r, _) = convert(&env, &[&out, "--to", "buzz-pack", "--out", &again]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert_eq!(manifest(&again)["id"], "market-street");
    assert_eq!(
        manifest(&again)["defaults"]["subscribe"],
        serde_json::json!(["#market-street"])
    );
    assert!(persona_text(&again, "baker").contains("display_name: Baker\n"));

    // A tool policy the agent's `tools` say as well needs no block either.
    let tools = native_pack(
        &env,
        "tools",
        "x-tool-policy:\n  allow:\n  - Read\n  - Grep\n",
        r#"{"mcpServers": {}}"#,
    );
    validate(&env, &tools);
    let out = env.path("tools.claude").display().to_string();
    let (r, _) = convert(&env, &[&tools, "--to", "claude", "--out", &out]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(
        claude_manifest(&out).get("x-persona").is_none(),
        "{:#}",
        claude_manifest(&out)
    );
    assert!(read(&out, "agents/baker.md").contains("tools:"));
    let again = env.path("tools.again").display().to_string();
    let (r, _) = convert(&env, &[&out, "--to", "buzz-pack", "--out", &again]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let p = inspect(&env, &again, "baker");
    assert!(p.to_string().contains("Grep"), "{p:#}");

    // What Claude has no slot for is carried, and only that.
    let warm = native_pack(&env, "warm", "temperature: 0.2\n", r#"{"mcpServers": {}}"#);
    let out = env.path("warm.claude").display().to_string();
    let (r, _) = convert(&env, &[&warm, "--to", "claude", "--out", &out]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let xp = claude_manifest(&out)["x-persona"].clone();
    assert_eq!(
        xp,
        serde_json::json!({"personas": {"baker": {"fields": {"temperature": 0.2}}}}),
        "{xp:#}"
    );
    let again = env.path("warm.again").display().to_string();
    let (r, _) = convert(&env, &[&out, "--to", "buzz-pack", "--out", &again]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(persona_text(&again, "baker").contains("temperature: 0.2\n"));
}

#[test]
fn a_server_other_hosts_cannot_start_is_lost_and_a_portable_one_is_not() {
    let env = Operator::new();
    let portable = native_pack(
        &env,
        "portable",
        "",
        r#"{"mcpServers": {"stock": {"command": "stock-mcp", "args": ["--stdio"]}}}"#,
    );
    let (r, v) = convert(&env, &[&portable, "--to", "agent-plugins"]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(findings(&v, "lost").is_empty(), "{v:#}");
    // A shell line is no portable OPS command: OPS hosts go without the server.
    let shell = native_pack(
        &env,
        "shell",
        "",
        r#"{"mcpServers": {"stock": {"command": "npx -y stock-mcp"}}}"#,
    );
    let (r, v) = convert(&env, &[&shell, "--to", "agent-plugins"]);
    assert_eq!(r.code, 2, "{}{}", r.stdout, r.stderr);
    assert!(has_code(&v, "lost", "mcp-server-extension-only"), "{v:#}");
}

#[test]
fn a_server_added_to_a_pack_read_from_an_expert_reaches_its_agents() {
    let env = Operator::new();
    let expert = tree(
        &env,
        "kiosk-expert",
        &[
            (
                "expert.toml",
                "[expert]\nname = \"kiosk\"\nversion = \"1.0.0\"\ndescription = \"A kiosk\"\n\n[[expert.agents]]\nname = \"clerk\"\ndisplay_name = \"Clerk\"\nrole = \"main\"\n",
            ),
            ("agents/clerk/soul.md", "You are the clerk.\n"),
        ],
    );
    let pack = env.path("kiosk.pack").display().to_string();
    let (r, _) = convert(&env, &[&expert, "--to", "buzz-pack", "--out", &pack]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    std::fs::write(
        Path::new(&pack).join(".mcp.json"),
        r#"{"mcpServers": {"till": {"command": "till-mcp"}}}"#,
    )
    .unwrap();
    validate(&env, &pack);
    let back = env.path("kiosk.back").display().to_string();
    let (r, v) = convert(&env, &[&pack, "--to", "duduclaw-expert", "--out", &back]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let mcp = std::fs::read_to_string(Path::new(&back).join("agents/clerk/.mcp.json"))
        .unwrap_or_else(|e| panic!("no agents/clerk/.mcp.json ({e}): {v:#}"));
    assert!(mcp.contains("till-mcp"), "{mcp}");
    assert!(has_code(&v, "reinterpreted", "mcp-added"), "{v:#}");
}

/// Found by the survey: a folder that is one Agent Skill converted with exit 0, its skill carried
/// as a plain file no persona could load.
#[test]
fn a_folder_that_is_one_skill_becomes_the_packs_skill_and_goes_back_to_the_root() {
    let env = Operator::new();
    let text = skill("glaze-mixing");
    let src = tree(
        &env,
        "glaze-mixing",
        &[
            ("SKILL.md", &text),
            ("references/recipes.md", "# Recipes\n"),
        ],
    );
    let pack = env.path("glaze.pack").display().to_string();
    let (r, v) = convert(&env, &[&src, "--to", "buzz-pack", "--out", &pack]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(
        has_code(&v, "reinterpreted", "skill-folder-as-skill"),
        "{v:#}"
    );
    assert_eq!(read(&pack, "skills/glaze-mixing/SKILL.md"), text);
    assert!(
        Path::new(&pack)
            .join("skills/glaze-mixing/references/recipes.md")
            .is_file()
    );
    assert!(!Path::new(&pack).join("x-claude/files/SKILL.md").exists());
    validate(&env, &pack);
    // The persona `up` would run can load it.
    let p = inspect(&env, &pack, &persona_names(&pack)[0]);
    assert!(p.to_string().contains("glaze-mixing"), "{p:#}");
    let back = env.path("glaze.back").display().to_string();
    let (r, _) = convert(&env, &[&pack, "--to", "claude", "--out", &back]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert_eq!(read(&back, "SKILL.md"), text);
    assert!(Path::new(&back).join("references/recipes.md").is_file());
    assert!(!Path::new(&back).join("skills").exists());
}

// A marketplace plugin asked for by name says why it cannot be converted.
#[test]
fn a_marketplace_plugin_whose_folder_is_missing_is_refused_saying_so() {
    let env = Operator::new();
    let src = tree(
        &env,
        "gaps",
        &[(
            ".claude-plugin/marketplace.json",
            r#"{"name": "gaps", "owner": {"name": "G"}, "plugins": [{"name": "ghost", "source": "./plugins/ghost"}]}"#,
        )],
    );
    let (r, v) = convert(
        &env,
        &[&src, "--to", "buzz-pack", "--option", "plugin=ghost"],
    );
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    let message = v["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("plugins/ghost") && message.contains("not in the input"),
        "{message}"
    );
}

// The survey: every plugin under a directory, converted in one process.

#[test]
fn a_survey_converts_every_plugin_under_a_directory_and_counts_how_it_went() {
    let env = Operator::new();
    let (a, b) = (agent("ada", ""), agent("bob", ""));
    let root = tree(
        &env,
        "shelf",
        &[
            ("README.md", "# Our plugins\n"),
            (
                "tools/clean/.claude-plugin/plugin.json",
                r#"{"name": "clean", "version": "1.0.0", "description": "Clean"}"#,
            ),
            ("tools/clean/agents/ada.md", &a),
            // Deeper, below a folder the rules do not recognise.
            ("teams/red/deep/loose/bob.md", &b),
            (
                "market/.claude-plugin/marketplace.json",
                r#"{"name": "m", "owner": {"name": "M"}, "plugins": [
                    {"name": "good", "source": "./plugins/good"},
                    {"name": "holey", "source": "./plugins/holey"},
                    {"name": "far", "source": {"source": "github", "repo": "o/far"}}]}"#,
            ),
            ("market/plugins/good/agents/ada.md", &a),
            (
                "market/plugins/holey/.claude-plugin/plugin.json",
                r#"{"name": "holey", "version": "1.0.0", "agents": ["./agents/gone.md"]}"#,
            ),
            ("market/plugins/holey/agents/bob.md", &b),
            ("broken/.claude-plugin/plugin.json", "{ not json"),
            (
                "done/.plugin/plugin.json",
                r#"{"id": "done", "name": "done", "version": "1.0.0", "personas": []}"#,
            ),
        ],
    );
    let before = apiary_e2e::snapshot(Path::new(&root), &[]);
    let r = env.run(&["convert", &root, "--survey", "--json"]);
    // One input is refused: the survey's exit code is the worst of its conversions'.
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    let s = r.json();
    assert_eq!(s["conversions"], 5, "{s:#}");
    assert_eq!(
        s["by_exit"],
        serde_json::json!({"0": 3, "1": 1, "2": 1}),
        "{s:#}"
    );
    assert_eq!(s["already"], 1);
    assert_eq!(s["remote"], 1);
    // The manifest that does not parse: refused by the converter that reads it.
    assert_eq!(s["errors"]["converter"], 1, "{s:#}");
    let dangling = &s["findings"]["lost"]["dangling-reference"];
    assert_eq!(dangling["findings"], 1, "{s:#}");
    assert_eq!(dangling["conversions"], 1);
    let rows = s["rows"].as_array().unwrap();
    let holey = rows
        .iter()
        .find(|r| r["plugin"] == "holey")
        .unwrap_or_else(|| panic!("{s:#}"));
    assert_eq!(holey["input"], "market");
    assert_eq!(holey["exit"], 2);
    assert!(
        rows.iter()
            .any(|r| r["input"] == "teams/red/deep/loose" && r["exit"] == 0)
    );
    // Nothing was written, beside the input or in it.
    assert_eq!(apiary_e2e::snapshot(Path::new(&root), &[]), before);
    assert!(std::fs::read_dir(env.path("")).unwrap().all(|e| {
        !e.unwrap()
            .file_name()
            .to_string_lossy()
            .ends_with(".buzz-pack")
    }));

    // The text form says the same, and a row converted alone gives a pack that validates.
    let r = env.run(&["convert", &root, "--survey"]);
    assert_eq!(r.code, 1);
    assert!(
        r.stdout.contains("5 conversion(s) to buzz-pack"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("dangling-reference"), "{}", r.stdout);
    let out = env.path("good.pack").display().to_string();
    let market = format!("{root}/market");
    let (r, _) = convert(
        &env,
        &[
            &market,
            "--to",
            "buzz-pack",
            "--option",
            "plugin=good",
            "--out",
            &out,
        ],
    );
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let checked = validate(&env, &out);
    assert_eq!(checked.code, 0, "{}{}", checked.stdout, checked.stderr);
    // --help teaches it.
    let help = env.run(&["convert", "--help"]);
    assert!(
        help.stdout.contains("--survey") && help.stdout.contains("worst"),
        "{}",
        help.stdout
    );
}

#[test]
fn a_survey_with_out_keeps_each_conversion_as_a_pack_of_its_own() {
    let env = Operator::new();
    let (a, b) = (agent("ada", ""), agent("bob", ""));
    let root = tree(
        &env,
        "market",
        &[
            (
                ".claude-plugin/marketplace.json",
                r#"{"name": "m", "owner": {"name": "M"}, "plugins": [
                    {"name": "good", "source": "./plugins/good"},
                    {"name": "../../escape", "source": "./plugins/other"},
                    {"name": "missing", "source": "./plugins/missing"}]}"#,
            ),
            ("plugins/good/agents/ada.md", &a),
            ("plugins/other/agents/bob.md", &b),
        ],
    );
    let keep = env.path("packs");
    let keep_s = keep.display().to_string();
    let r = env.run(&["convert", &root, "--survey", "--out", &keep_s, "--json"]);
    // The missing plugin is refused; the others are kept.
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    let s = r.json();
    let kept: Vec<String> = s["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["out"].as_str().map(str::to_string))
        .collect();
    assert_eq!(kept.len(), 2, "{s:#}");
    // A hostile plugin name is a plain directory name inside --out, never a path out of it.
    let mut names: Vec<String> = std::fs::read_dir(&keep)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["..-..-escape", "good"]);
    assert!(!env.path("escape").exists());
    for name in &names {
        let pack = keep.join(name).display().to_string();
        let checked = validate(&env, &pack);
        assert_eq!(
            checked.code, 0,
            "{name}: {}{}",
            checked.stdout, checked.stderr
        );
    }
    // Run again: what is there is not replaced, each such conversion is refused.
    let r = env.run(&["convert", &root, "--survey", "--out", &keep_s, "--json"]);
    assert_eq!(r.code, 1);
    assert_eq!(r.json()["by_exit"]["1"], 3, "{}", r.stdout);
}

// Class 8: models.

/// A resolved persona's model as `provider:model`.
fn model_of(p: &Value) -> String {
    format!(
        "{}:{}",
        p["model"]["provider"].as_str().unwrap_or_default(),
        p["model"]["model"].as_str().unwrap_or_default()
    )
}

#[test]
fn copilot_model_display_names_and_current_aliases_map_to_ids() {
    let env = Operator::new();
    let (a, b, c) = (
        agent("drafter", "model: Claude Sonnet 4.5 (copilot)\n"),
        agent("checker", "model: GPT-4.1 (copilot)\n"),
        agent("thinker", "model: opus\n"),
    );
    let src = tree(
        &env,
        "models-team",
        &[
            ("drafter.agent.md", &a),
            ("checker.agent.md", &b),
            ("thinker.md", &c),
        ],
    );
    let out = env.path("models-team.pack").display().to_string();
    let (r, v) = convert(&env, &[&src, "--to", "buzz-pack", "--out", &out]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(!has_code(&v, "lost", "model-unknown"), "{v:#}");
    validate(&env, &out);
    assert_eq!(
        model_of(&inspect(&env, &out, "drafter")),
        "anthropic:claude-sonnet-4-5"
    );
    assert_eq!(model_of(&inspect(&env, &out, "checker")), "openai:gpt-4.1");
    assert_eq!(
        model_of(&inspect(&env, &out, "thinker")),
        "anthropic:claude-opus-4-7"
    );
    let typo = agent("typo", "model: Clade Sonnet 4.5 (copilot)\n");
    let src = tree(&env, "typo-team", &[("typo.agent.md", &typo)]);
    let (r, v) = convert(&env, &[&src, "--to", "buzz-pack"]);
    assert_eq!(r.code, 2, "{}{}", r.stdout, r.stderr);
    assert!(has_code(&v, "lost", "model-unknown"), "{v:#}");
}

// The known bug: `--option plugin=X` through a chain whose second step is another converter.

#[test]
fn a_marketplace_plugin_option_reaches_agent_plugins_through_the_chain() {
    let env = Operator::new();
    let (ada, bob) = (agent("ada", ""), agent("bob", ""));
    let src = tree(
        &env,
        "market",
        &[
            (
                ".claude-plugin/marketplace.json",
                r#"{"name": "market", "owner": {"name": "M"}, "plugins": [
                    {"name": "alpha", "source": "./plugins/alpha"},
                    {"name": "beta", "source": "./plugins/beta"}]}"#,
            ),
            ("plugins/alpha/agents/ada.md", &ada),
            ("plugins/beta/agents/bob.md", &bob),
        ],
    );
    let out = env.path("beta.ops").display().to_string();
    let (r, v) = convert(
        &env,
        &[
            &src,
            "--to",
            "agent-plugins",
            "--option",
            "plugin=beta",
            "--out",
            &out,
        ],
    );
    assert!(r.code == 0 || r.code == 2, "{}{} {v:#}", r.stdout, r.stderr);
    assert!(v["ok"].as_bool().unwrap(), "{v:#}");
    assert!(Path::new(&out).join("plugin.json").is_file());
    // A misspelt option is still refused, saying which ones there are.
    let (r, v) = convert(
        &env,
        &[
            &src,
            "--to",
            "agent-plugins",
            "--option",
            "plugn=beta",
            "--out",
            &format!("{out}2"),
        ],
    );
    assert_eq!(r.code, 1, "{}{} {v:#}", r.stdout, r.stderr);
    assert!(!Path::new(&format!("{out}2")).exists());
}
