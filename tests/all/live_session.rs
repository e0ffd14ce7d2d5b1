//! What a persona's agent is started with: the `session/new` it receives (cwd, MCP servers, once
//! trusted, with their allowed `${VAR}`s filled in, systemPrompt), its process environment (projected, operator wins), the skills in
//! its workspace; and the refusal of a persona whose MCP config names an unset variable.

use apiary_e2e::data_dir;
use serde_json::json;

use crate::support::live::relays::{Kind, Options, TestRelay};
use crate::support::live::{Up, capture, grant, persona, received, write_pack};

#[test]
fn session_env_skills_and_refusals() {
    session_env_skills_and_refusals_on(Kind::Embedded);
}

#[test]
fn interop_nostr_rs_relay_session_env_skills_and_refusals() {
    session_env_skills_and_refusals_on(Kind::NostrRs);
}

fn session_env_skills_and_refusals_on(kind: Kind) {
    let home = tempfile::tempdir().unwrap();
    let Some(relay) = TestRelay::start(kind, home.path(), Options::default()) else {
        return;
    };
    let pack = home.path().join("pack");
    let workspaces = home.path().join("ws");
    write_pack(
        &pack,
        "com.example.session",
        &[
            (
                "pip",
                &persona(
                    "pip",
                    "model: \"acme:pip-large\"\ntemperature: 0.3\nmax_context_tokens: 64000\nsubscribe: [\"#general\", \"#ops\"]\nskills: [\"./skills/review\"]\nmcp_servers:\n  - name: notes\n    command: notes-mcp\n    args: [\"--dir\", \"${NOTES_DIR}\"]",
                    "You are Pip, the reviewer.",
                ),
            ),
            (
                "lep",
                &persona(
                    "lep",
                    "subscribe: [\"#general\"]\nmcp_servers:\n  - name: scanner\n    command: scanner-mcp\n    env:\n      SCANNER_TOKEN: \"${E2E_UNSET_SCANNER_TOKEN}\"",
                    "You are Lep.",
                ),
            ),
            (
                "bo",
                &persona("bo", "subscribe: [\"#general\"]", "You are Bo."),
            ),
        ],
        &[
            (
                ".mcp.json",
                r#"{"mcpServers": {"github": {"command": "/usr/local/bin/github-mcp-server", "args": ["stdio"], "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "${E2E_GH_TOKEN}", "MODE": "ro"}}}}"#,
            ),
            ("instructions.md", "Team rule: be kind."),
            (
                "skills/review/SKILL.md",
                "---\nname: review\ndescription: Review code.\n---\n# Review\n",
            ),
            ("skills/review/checklist.md", "- tests\n"),
            (
                "skills/shared/SKILL.md",
                "---\nname: shared\ndescription: For everyone.\n---\n# Shared\n",
            ),
        ],
    );
    // An operator-pinned skill in bo's workspace must survive.
    let bo_ws = workspaces.join("com.example.session/bo");
    apiary_e2e::write_tree(
        &bo_ws,
        &[(".agents/skills/shared/SKILL.md", "pinned by the operator")],
    );

    // The operator trusts the pack's stdio MCP servers and lets them read these variables.
    let root = home.path().join("root");
    let mut cmd = apiary_e2e::apiary(home.path());
    cmd.args(["trust", "--mcp", "--yes", "--json", "--root"])
        .arg(&root)
        .arg(&pack);
    let run = apiary_e2e::Run::of(cmd);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let overrides = home.path().join("overrides.toml");
    std::fs::write(
        &overrides,
        "[\"com.example.session\"]\nallow_env = [\"E2E_GH_TOKEN\", \"NOTES_DIR\", \"E2E_UNSET_SCANNER_TOKEN\"]\n",
    )
    .unwrap();

    let mut up = Up::start_on(
        &relay,
        home.path(),
        &[&pack],
        &[
            "--workspace",
            workspaces.to_str().unwrap(),
            "--root",
            root.to_str().unwrap(),
            "--overrides",
            overrides.to_str().unwrap(),
        ],
        &[
            ("E2E_GH_TOKEN", "gh-secret-123"),
            ("NOTES_DIR", "/srv/notes"),
            // Operator env wins over the persona's temperature (precedence level 1).
            ("APIARY_AGENT_TEMPERATURE", "0.9"),
        ],
    );

    // lep names a variable that is not set: refused, named, the others run.
    let refused = up.wait_for(|l| l.starts_with("persona lep "));
    assert!(refused.starts_with("persona lep refused:"), "{refused}");
    assert!(refused.contains("E2E_UNSET_SCANNER_TOKEN"), "{refused}");
    assert!(refused.contains("scanner"), "{refused}");
    assert!(
        capture(home.path(), "lep").is_empty(),
        "lep's agent must not start"
    );
    let ready = up.wait_for(|l| l.starts_with("ready "));
    assert!(ready.contains("personas=2"), "{ready}");

    let pip = up.capture("pip");
    let pip_ws = std::fs::canonicalize(workspaces.join("com.example.session/pip")).unwrap();

    // initialize: protocol v1.
    let init = received(&pip, "initialize");
    assert_eq!(init.len(), 1);
    assert_eq!(init[0]["params"]["protocolVersion"], 1);

    // session/new: one per subscribed channel, each with cwd, MCP servers and the system prompt.
    let news = received(&pip, "session/new");
    assert_eq!(news.len(), 2, "{news:#?}");
    let p = &news[0]["params"];
    assert_eq!(p["cwd"], pip_ws.to_str().unwrap());
    assert_eq!(
        crate::support::live::pack_servers(&p["mcpServers"]),
        json!([
            {"name": "github", "command": "/usr/local/bin/github-mcp-server", "args": ["stdio"],
             "env": [{"name": "GITHUB_PERSONAL_ACCESS_TOKEN", "value": "gh-secret-123"},
                     {"name": "MODE", "value": "ro"}]},
            {"name": "notes", "command": "notes-mcp", "args": ["--dir", "/srv/notes"], "env": []}
        ]),
        "{p:#}"
    );
    assert_eq!(p["systemPrompt"]["mode"], "append");
    let system: Vec<&str> = p["systemPrompt"]["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["text"].as_str().unwrap())
        .collect();
    assert_eq!(
        system.len(),
        2,
        "[Base] then the persona prompt: {system:#?}"
    );
    assert!(system[0].contains("apiary"), "{}", system[0]);
    assert!(
        system[1].starts_with("You are Pip, the reviewer."),
        "{}",
        system[1]
    );
    assert!(system[1].contains("# Team Instructions\nTeam rule: be kind."));
    assert!(
        system[1].contains("Available skills: review, shared"),
        "{}",
        system[1]
    );

    // The agent process environment: projected for its runtime, the operator's value kept.
    let env = pip
        .iter()
        .find_map(|e| e.get("env"))
        .expect("the agent recorded its env");
    assert_eq!(env["APIARY_AGENT_PROVIDER"], "acme");
    assert_eq!(env["APIARY_AGENT_MODEL"], "pip-large");
    assert_eq!(env["APIARY_AGENT_TEMPERATURE"], "0.9");
    assert_eq!(env["APIARY_AGENT_CONTEXT_LIMIT"], "64000");
    assert_eq!(env["APIARY_PERSONA"], "pip");
    assert_eq!(env["AGENT_CWD"], pip_ws.to_str().unwrap());

    // Agents run 10 nicer than apiary (`--agent-nice`'s default), so that on a busy machine the
    // harness's routing and prompt writing come before the agents' own work.
    #[cfg(target_os = "linux")]
    {
        let agent = pip
            .iter()
            .find_map(|e| e["pid"].as_u64())
            .expect("the agent recorded its pid");
        let up_nice = nice_of(up.child.id().into());
        assert_eq!(nice_of(agent), (up_nice + 10).min(19));
    }

    // Skills: pip claims review and gets the unclaimed shared one; bo only gets shared, and keeps
    // the operator's pinned copy, with the PF-3 warning.
    assert!(pip_ws.join(".agents/skills/review/SKILL.md").is_file());
    assert!(pip_ws.join(".agents/skills/review/checklist.md").is_file());
    assert!(pip_ws.join(".agents/skills/shared/SKILL.md").is_file());
    assert!(!bo_ws.join(".agents/skills/review").exists());
    assert_eq!(
        std::fs::read_to_string(bo_ws.join(".agents/skills/shared/SKILL.md")).unwrap(),
        "pinned by the operator"
    );
    assert!(
        up.stderr().contains(
            "Skill \"shared\" already exists at .agents/skills/shared/; skipping pack version"
        ),
        "{}",
        up.stderr()
    );
    // No .mcp.json is written into a workspace (spec §7).
    assert!(!pip_ws.join(".mcp.json").exists());
    up.stop_ok();
}

#[test]
fn agent_without_system_prompt_support_gets_the_prefix() {
    let home = tempfile::tempdir().unwrap();
    let pack = home.path().join("pack");
    write_pack(
        &pack,
        "com.example.prefix",
        &[(
            "pip",
            &persona("pip", "subscribe: [\"general\"]", "You are Pip."),
        )],
        &[],
    );
    // A shell agent that advertises nothing: a wrapper script around the bundled agent would be
    // simpler, but a plain NDJSON script keeps this independent of apiary-agent.
    std::fs::create_dir_all(home.path().join("bin")).unwrap();
    let script = home.path().join("bin/agent.sh");
    std::fs::write(
        &script,
        r#"#!/bin/sh
while IFS= read -r line; do
  printf '%s\n' "$line" >> "$CAPTURE_FILE"
  id=$(printf '%s' "$line" | sed -n 's/.*"id":\([0-9]*\).*/\1/p')
  case "$line" in
    *'"method":"initialize"'*) printf '{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":1,"agentCapabilities":{}}}\n' "$id" ;;
    *'"method":"session/new"'*) printf '{"jsonrpc":"2.0","id":%s,"result":{"sessionId":"s1"}}\n' "$id" ;;
    *'"method":"session/prompt"'*)
      printf '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"plain reply"}}}}\n'
      printf '{"jsonrpc":"2.0","id":%s,"result":{"stopReason":"end_turn"}}\n' "$id" ;;
  esac
done
"#,
    )
    .unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let capture_file = capture_grant(home.path());
    let mut up = Up::start(
        home.path(),
        &[&pack],
        &["--agent", script.to_str().unwrap()],
        &[("CAPTURE_FILE", capture_file.to_str().unwrap())],
    );
    let ready = up.wait_for(|l| l.starts_with("persona pip ready"));
    assert!(ready.contains("system_prompt=prefix"), "{ready}");
    let id = up.post("general", "@pip hello", &[]);
    up.reply_to("pip", &id);
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&capture_file)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let new = lines.iter().find(|m| m["method"] == "session/new").unwrap();
    assert!(new["params"].get("systemPrompt").is_none(), "{new}");
    let prompt = lines
        .iter()
        .find(|m| m["method"] == "session/prompt")
        .unwrap();
    let text = prompt["params"]["prompt"][0]["text"].as_str().unwrap();
    let base = text.find("[Base]\n").expect("[Base]");
    let system = text.find("[System]\nYou are Pip.").expect("[System]");
    let context = text.find("[Context]\n").expect("[Context]");
    let event = text.find("[Buzz event: mention]").expect("[Buzz event]");
    assert!(
        base < system && system < context && context < event,
        "{text}"
    );
    drop(up);

    // BUZZ_ACP_NO_BASE_PROMPT drops [Base] and keeps [System].
    let home2 = tempfile::tempdir().unwrap();
    let capture2 = capture_grant(home2.path());
    let mut up = Up::start(
        home2.path(),
        &[&pack],
        &["--agent", script.to_str().unwrap()],
        &[
            ("CAPTURE_FILE", capture2.to_str().unwrap()),
            ("BUZZ_ACP_NO_BASE_PROMPT", "1"),
        ],
    );
    let id = up.post("general", "@pip hello", &[]);
    up.reply_to("pip", &id);
    let text = std::fs::read_to_string(&capture2).unwrap();
    assert!(!text.contains("[Base]"), "{text}");
    assert!(text.contains("[System]"), "{text}");
}

#[test]
fn bundled_example_runs_with_no_arguments() {
    let home = tempfile::tempdir().unwrap();
    let mut up = Up::start(home.path(), &[], &[], &[]);
    up.wait_for(|l| l.starts_with("persona bee ready"));
    up.wait_for(|l| l.starts_with("persona sage ready"));
    let id = up.post("general", "hi @bee, got any honey?", &[]);
    let line = up.event_line(&id);
    assert!(line.contains("woke bee (mention)"), "{line}");
    let reply = up.reply_to("bee", &id);
    let events = up.history("general");
    let r = events.iter().find(|e| e["id"] == reply).unwrap();
    assert!(
        r["content"].as_str().unwrap().contains("model=echo-bee"),
        "{r}"
    );
    let example = data_dir(home.path()).join("examples/hello/.plugin/plugin.json");
    assert!(
        example.is_file(),
        "the example pack is written to the data dir"
    );
}

#[test]
fn the_agents_model_switch_is_used_when_it_offers_the_personas_model() {
    let home = tempfile::tempdir().unwrap();
    let pack = home.path().join("pack");
    write_pack(
        &pack,
        "com.example.model",
        &[(
            "pip",
            &persona(
                "pip",
                "model: \"acme:echo-large\"\nsubscribe: [\"general\"]",
                "You are Pip.",
            ),
        )],
        &[],
    );
    // The agent offers the model under its full `provider:model` name.
    let mut up = Up::start(
        home.path(),
        &[&pack],
        &[],
        &[("APIARY_AGENT_MODELS", "acme:echo-large,other")],
    );
    let id = up.post("general", "@pip which model?", &[]);
    let reply = up.reply_to("pip", &id);
    let sets = received(&up.capture("pip"), "session/set_config_option")
        .into_iter()
        .cloned()
        .collect::<Vec<_>>();
    assert_eq!(sets.len(), 1, "{sets:#?}");
    assert_eq!(sets[0]["params"]["configId"], "model");
    assert_eq!(sets[0]["params"]["value"], "acme:echo-large");
    let events = up.history("general");
    let r = events.iter().find(|e| e["id"] == reply).unwrap();
    assert!(
        r["content"]
            .as_str()
            .unwrap()
            .contains("model=acme:echo-large"),
        "{r}"
    );
    up.stop_ok();
}

/// A process's niceness, from `/proc/<pid>/stat` (the 19th field; the 2nd, the command name in
/// parentheses, may hold spaces).
#[cfg(target_os = "linux")]
fn nice_of(pid: u64) -> i64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after_name = &stat[stat.rfind(')').unwrap() + 1..];
    after_name
        .split_whitespace()
        .nth(16)
        .unwrap()
        .parse()
        .unwrap()
}

/// A capture file the script agent may write, and the variable naming it, granted (agents get
/// neither the operator's files nor its environment otherwise).
fn capture_grant(home: &std::path::Path) -> std::path::PathBuf {
    let dir = home.join("capture");
    std::fs::create_dir_all(&dir).unwrap();
    grant(
        home,
        "com.example.prefix",
        &format!(
            "agent_env = [\"CAPTURE_FILE\"]\nagent_write = [\"{}\"]",
            dir.display()
        ),
    );
    dir.join("script.jsonl")
}
