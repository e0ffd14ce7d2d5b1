//! A persona's `x-tool-policy`: `pack validate` checks it (hostile values are errors at their
//! line), `pack inspect` shows it, and `apiary up` enforces it by answering the agent's
//! permission requests: a tool the policy refuses is rejected even under `--permission
//! allow-once`, it does not run, and the refusal is a `permission` event. The agent's other
//! reports are events too: plans, and the context usage that feeds the token budget.

use serde_json::Value;

use crate::support::live::{Up, persona, write_pack};
use crate::support::pack::{inspect_dir, one_persona_pack, persona_in};

#[test]
fn the_policy_validates_and_resolves() {
    let p = one_persona_pack(
        "x-tool-policy:\n  allow: [Read, \"mcp__gh__*\", \"kind:search\"]\n  deny: [Bash]\n  read_only: true\n",
    );
    p.validate().assert_clean();
    let inspected = p.persona("a");
    assert_eq!(
        inspected["tool_policy"],
        serde_json::json!({"allow": ["Read", "mcp__gh__*", "kind:search"], "deny": ["Bash"], "read_only": true}),
        "{inspected}"
    );
    // No policy, no key: the inspect contract is unchanged for every other pack.
    let plain = one_persona_pack("");
    assert!(plain.persona("a").get("tool_policy").is_none());
}

#[test]
fn hostile_policies_are_errors_at_their_line() {
    for (yaml, wanted) in [
        ("x-tool-policy: yes\n", "must be a mapping"),
        ("x-tool-policy:\n  allow: Bash\n", "a list of tool names"),
        ("x-tool-policy:\n  deny: [1, {a: b}]\n", "must be strings"),
        ("x-tool-policy:\n  deny: [\"\"]\n", "is empty"),
        (
            "x-tool-policy:\n  deny: [\"Bash\\u202e\"]\n",
            "bidirectional",
        ),
        (
            "x-tool-policy:\n  deny: [\"kind:nuke\"]\n",
            "names no ACP tool kind",
        ),
        ("x-tool-policy:\n  allow: [\"*\"]\n", "matches every tool"),
        ("x-tool-policy:\n  read_only: \"no\"\n", "true or false"),
        (
            "x-tool-policy:\n  readonly: true\n",
            "did you mean `read_only`",
        ),
    ] {
        let p = one_persona_pack(yaml);
        let v = p.validate();
        v.assert_exit(1);
        let hit = v
            .diagnostics()
            .iter()
            .find(|d| {
                let text = format!("{} {}", d["message"], d["help"]);
                text.contains(wanted)
            })
            .unwrap_or_else(|| panic!("{yaml}: no diagnostic saying {wanted:?}: {:?}", v.json));
        assert_eq!(hit["file"], "agents/a.persona.md", "{hit}");
        assert!(
            hit["line"].as_u64().is_some_and(|l| l >= 2),
            "{yaml}: {hit}"
        );
    }
    let huge: Vec<String> = (0..300).map(|i| format!("\"t{i}\"")).collect();
    let p = one_persona_pack(&format!("x-tool-policy:\n  deny: [{}]\n", huge.join(", ")));
    let v = p.validate();
    v.assert_exit(1);
    assert!(
        format!("{:?}", v.json).contains("more than 256"),
        "{:?}",
        v.json
    );
    // A misspelt key is not taken for an extension.
    let p = one_persona_pack("x-tool-polcy:\n  deny: [Bash]\n");
    p.validate().assert_exit(1);
}

/// The `--json` note of `event` for `persona` whose `to` is `id`.
fn note_about(up: &mut Up, event: &str, persona: &str, id: &str) -> Value {
    let line = up.wait_for(|l| {
        let v: Value = serde_json::from_str(l).unwrap_or_default();
        v["event"] == event && v["persona"] == persona && v["to"] == id
    });
    serde_json::from_str(&line).unwrap()
}

/// The first `--json` note of `event` for `persona`.
fn note(up: &mut Up, event: &str, persona: &str) -> Value {
    let line = up.wait_for(|l| {
        let v: Value = serde_json::from_str(l).unwrap_or_default();
        v["event"] == event && v["persona"] == persona
    });
    serde_json::from_str(&line).unwrap()
}

#[test]
fn up_refuses_a_denied_tool_whatever_permission_says() {
    let home = tempfile::tempdir().unwrap();
    let root = home.path().join("pack");
    write_pack(
        &root,
        "com.example.tools",
        &[
            (
                "pip",
                &persona(
                    "pip",
                    "subscribe: [\"general\"]\nx-tool-policy:\n  deny: [Write]",
                    "You are Pip.",
                ),
            ),
            (
                "ro",
                &persona(
                    "ro",
                    "subscribe: [\"general\"]\nx-tool-policy:\n  read_only: true",
                    "You only look.",
                ),
            ),
            (
                "bee",
                &persona("bee", "subscribe: [\"general\"]", "You are Bee."),
            ),
        ],
        &[],
    );
    let ws = home.path().join("ws");
    let mut up = Up::start(
        home.path(),
        &[&root],
        &[
            "--json",
            "--permission",
            "allow-once",
            "--workspace-root",
            ws.to_str().unwrap(),
        ],
        &[("APIARY_AGENT_TOOL", "Write:edit")],
    );
    let id = up.post("general", "@pip @ro @bee please !permission", &[]);
    let mut seen = std::collections::BTreeMap::new();
    for name in ["pip", "ro", "bee"] {
        note_about(&mut up, "reply", name, &id);
        seen.insert(name, note(&mut up, "permission", name));
        let ran = ws
            .join("com.example.tools")
            .join(name)
            .join("tool-Write.txt");
        assert_eq!(ran.exists(), name == "bee", "{name}: did the tool run?");
    }
    // What the agent was told: reject for the two with a policy, allow for bee.
    let replies: Vec<String> = up
        .history("general")
        .iter()
        .filter_map(|e| e["content"].as_str().map(str::to_string))
        .filter(|c| c.contains("permission="))
        .collect();
    assert_eq!(
        replies
            .iter()
            .filter(|c| c.contains("permission=reject"))
            .count(),
        2,
        "{replies:?}"
    );
    assert_eq!(
        replies
            .iter()
            .filter(|c| c.contains("permission=allow"))
            .count(),
        1,
        "{replies:?}"
    );
    let pip = &seen["pip"];
    assert_eq!(pip["tool"], "Write", "{pip}");
    assert_eq!(pip["allowed"], false);
    assert_eq!(pip["decided_by"], "tool-policy");
    assert!(
        pip["reason"]
            .as_str()
            .unwrap()
            .contains("denied by `Write`"),
        "{pip}"
    );
    let ro = &seen["ro"];
    assert_eq!(ro["decided_by"], "tool-policy", "{ro}");
    assert!(ro["reason"].as_str().unwrap().contains("read-only"), "{ro}");
    let bee = &seen["bee"];
    assert_eq!(bee["allowed"], true, "{bee}");
    assert_eq!(bee["decided_by"], "permission");
    // The tool call itself is surfaced too, with its status.
    let all = up.seen.join("\n");
    assert!(
        all.contains("\"event\":\"tool_call\"") && all.contains("\"status\":\"completed\""),
        "{all}"
    );
    up.stop_ok();
}

#[test]
fn plans_and_context_usage_are_events_and_usage_feeds_the_token_budget() {
    let home = tempfile::tempdir().unwrap();
    let root = home.path().join("pack");
    write_pack(
        &root,
        "com.example.reports",
        &[(
            "pip",
            &persona("pip", "subscribe: [\"general\"]", "You are Pip."),
        )],
        &[],
    );
    let overrides = home.path().join("overrides.toml");
    std::fs::write(
        &overrides,
        "[\"com.example.reports\".pip]\nlimits = { tokens_per_day = 100 }\n",
    )
    .unwrap();
    let mut up = Up::start(
        home.path(),
        &[&root],
        &["--json", "--overrides", overrides.to_str().unwrap()],
        &[("APIARY_AGENT_CONTEXT_USED", "120")],
    );
    let id = up.post("general", "@pip !plan", &[]);
    note_about(&mut up, "reply", "pip", &id);
    let plan = note(&mut up, "plan", "pip");
    assert_eq!(
        (plan["entries"].as_u64(), plan["completed"].as_u64()),
        (Some(2), Some(1)),
        "{plan}"
    );
    let usage = note(&mut up, "usage", "pip");
    assert_eq!(
        (usage["used"].as_u64(), usage["size"].as_u64()),
        (Some(120), Some(100_000)),
        "{usage}"
    );
    // The agent's answers carry no usage: the context in use it reported is what the turn cost.
    let second = up.post("general", "@pip again", &[]);
    let line = up.wait_for(|l| {
        let v: Value = serde_json::from_str(l).unwrap_or_default();
        v["event"] == "limited" && v["id"] == second.as_str()
    });
    let limited: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(limited["limit"], "tokens_per_day", "{limited}");
    assert_eq!(
        (limited["allowed"].as_u64(), limited["used"].as_u64()),
        (Some(100), Some(120))
    );
    up.stop_ok();
}

/// Asks `persona` for permission to use `tool` (`<name>[:<kind>]`, `:<kind>` naming none) and
/// returns the `permission` note of that request once the turn is answered.
fn ask(up: &mut Up, persona: &str, tool: &str) -> Value {
    let id = up.post("general", &format!("@{persona} !permission={tool}"), &[]);
    note_about(up, "reply", persona, &id);
    let name = tool.split(':').next().unwrap_or_default();
    let line = up.wait_for(|l| {
        let v: Value = serde_json::from_str(l).unwrap_or_default();
        let named = match name {
            "" => v["tool"].is_null(),
            n => v["tool"] == n,
        };
        v["event"] == "permission" && v["persona"] == persona && named
    });
    serde_json::from_str(&line).unwrap()
}

/// A refusal by the tool policy, whose reason says `why`; the tool did not run.
fn assert_refused(asked: &Value, why: &str, ws: &std::path::Path) {
    assert_eq!(asked["allowed"], false, "{asked}");
    assert_eq!(asked["decided_by"], "tool-policy", "{asked}");
    let reason = asked["reason"].as_str().unwrap_or_default();
    assert!(reason.contains(why), "wanted {why:?}: {asked}");
    if let Some(name) = asked["tool"].as_str() {
        assert!(!ws.join(format!("tool-{name}.txt")).exists(), "{name} ran");
    }
}

/// Admitted by the tool policy, then allowed by `--permission allow-once`: the tool ran.
fn assert_admitted(asked: &Value, ws: &std::path::Path) {
    assert_eq!(asked["allowed"], true, "{asked}");
    assert_eq!(asked["decided_by"], "permission", "{asked}");
    let name = asked["tool"].as_str().unwrap();
    assert!(
        ws.join(format!("tool-{name}.txt")).exists(),
        "{name} did not run"
    );
}

/// Issue 31, finding 3: the tool policy failed open. `read_only` admitted MCP tools (kind
/// `other`, as Claude Code reports them), `Task` and `KillBash`; `deny: [Bash]` let `bash` and
/// the other runtimes' shells through; a request naming no tool passed every deny list. Each is
/// refused now under `--permission allow-once`, and what the policy means to admit still runs.
#[test]
fn up_refuses_the_tool_policy_bypasses_and_admits_what_the_policy_allows() {
    let home = tempfile::tempdir().unwrap();
    let root = home.path().join("pack");
    let personas = [
        ("ro", "x-tool-policy:\n  read_only: true"),
        ("nobash", "x-tool-policy:\n  deny: [Bash]"),
        (
            "gh",
            "x-tool-policy:\n  read_only: true\n  allow: [Read, \"mcp__gh__list_*\"]",
        ),
    ];
    let files: Vec<(&str, String)> = personas
        .iter()
        .map(|(name, policy)| {
            let extra = format!("subscribe: [\"general\"]\n{policy}");
            (*name, persona(name, &extra, "You do as you are told."))
        })
        .collect();
    let refs: Vec<(&str, &str)> = files.iter().map(|(n, t)| (*n, t.as_str())).collect();
    write_pack(&root, "com.example.bypass", &refs, &[]);
    let ws = home.path().join("ws");
    let mut up = Up::start(
        home.path(),
        &[&root],
        &[
            "--json",
            "--permission",
            "allow-once",
            "--workspace-root",
            ws.to_str().unwrap(),
            // One turn a request: no flood limit merges them.
            "--author-turns",
            "0",
            "--channel-turns",
            "0",
        ],
        &[],
    );
    let cwd = |name: &str| ws.join("com.example.bypass").join(name);

    for tool in [
        "mcp__fs__write_file:other",
        "mcp__github__delete_repo:other",
        "Task:think",
        "KillBash:other",
        "ExitPlanMode:switch_mode",
    ] {
        let asked = ask(&mut up, "ro", tool);
        assert_refused(&asked, "read-only", &cwd("ro"));
    }
    assert_admitted(&ask(&mut up, "ro", "Read:read"), &cwd("ro"));
    assert_admitted(&ask(&mut up, "ro", "Grep:search"), &cwd("ro"));

    for tool in [
        "bash:execute",
        "BASH:execute",
        "run_shell_command:execute",
        "developer__shell:execute",
        "shell:execute",
        "exec_command:execute",
    ] {
        let asked = ask(&mut up, "nobash", tool);
        assert_refused(&asked, "denied by `Bash`", &cwd("nobash"));
    }
    let unnamed = ask(&mut up, "nobash", ":edit");
    assert_refused(&unnamed, "named no tool", &cwd("nobash"));
    assert_eq!(unnamed["kind"], "edit", "{unnamed}");
    assert_admitted(&ask(&mut up, "nobash", "Write:edit"), &cwd("nobash"));

    // An MCP tool the policy names is admitted under read_only; one it does not name is not.
    assert_admitted(
        &ask(&mut up, "gh", "mcp__gh__list_issues:other"),
        &cwd("gh"),
    );
    let asked = ask(&mut up, "gh", "mcp__gh__delete_repo:other");
    assert_refused(&asked, "an `allow` entry naming it", &cwd("gh"));
    up.stop_ok();
}

/// The operator's `tool_ceiling` (overrides file, per pack and per persona) bounds a pack's own
/// `x-tool-policy`: `pack inspect` shows the policy enforced and the ceiling's part of it, and
/// `up` refuses what the ceiling refuses although the pack's policy allows it.
#[test]
fn the_operator_s_tool_ceiling_narrows_a_pack_s_policy_which_cannot_widen_it() {
    let home = tempfile::tempdir().unwrap();
    let root = home.path().join("pack");
    let wide = persona(
        "wide",
        "subscribe: [\"general\"]\nx-tool-policy:\n  allow: [Bash, Read, \"mcp__fs__*\"]",
        "You use every tool you are allowed.",
    );
    let plain = persona("plain", "subscribe: [\"general\"]", "You have no policy.");
    write_pack(
        &root,
        "com.example.ceiling",
        &[("wide", &wide), ("plain", &plain)],
        &[],
    );
    let overrides = home.path().join("overrides.toml");
    std::fs::write(
        &overrides,
        "[\"com.example.ceiling\"]\ntool_ceiling = { deny = [\"kind:execute\"], read_only = true }\n\n\
         [\"com.example.ceiling\".plain]\ntool_ceiling = { allow = [\"Read\", \"Grep\"] }\n",
    )
    .unwrap();
    let ov = overrides.to_str().unwrap();

    let inspected = inspect_dir(&root, home.path(), &["--overrides", ov]);
    let policy = |name: &str| persona_in(&inspected, name)["tool_policy"].clone();
    let pack_ceiling = serde_json::json!({"deny": ["kind:execute"], "read_only": true});
    assert_eq!(
        policy("wide"),
        serde_json::json!({"allow": ["Bash", "Read", "mcp__fs__*"], "deny": ["kind:execute"],
            "read_only": true, "ceiling": pack_ceiling}),
    );
    assert_eq!(
        policy("plain"),
        serde_json::json!({"deny": ["kind:execute"], "read_only": true, "ceiling": {
            "allow": ["Read", "Grep"], "deny": ["kind:execute"], "read_only": true,
            "ceiling": pack_ceiling}}),
    );
    let mut human = apiary_e2e::apiary(home.path());
    human
        .args(["pack", "inspect"])
        .arg(&root)
        .args(["--overrides", ov]);
    let human = apiary_e2e::Run::of(human);
    assert!(
        human.stdout.contains("from the ceiling")
            && human
                .stdout
                .contains("deny [kind:execute], read_only  [operator]"),
        "{}",
        human.stdout
    );

    let ws = home.path().join("ws");
    let mut up = Up::start(
        home.path(),
        &[&root],
        &[
            "--json",
            "--permission",
            "allow-once",
            "--workspace-root",
            ws.to_str().unwrap(),
            "--overrides",
            ov,
            "--author-turns",
            "0",
        ],
        &[],
    );
    let cwd = |name: &str| ws.join("com.example.ceiling").join(name);
    // The pack allows Bash and its MCP tools; the ceiling makes it read-only without execute.
    let asked = ask(&mut up, "wide", "Bash:execute");
    assert_refused(&asked, "(the operator's tool ceiling)", &cwd("wide"));
    let asked = ask(&mut up, "wide", "mcp__fs__write_file:other");
    assert_refused(&asked, "(the operator's tool ceiling)", &cwd("wide"));
    assert_admitted(&ask(&mut up, "wide", "Read:read"), &cwd("wide"));
    // The persona's own ceiling narrows its pack's: Grep yes, Glob (a reader too) no.
    assert_admitted(&ask(&mut up, "plain", "Grep:search"), &cwd("plain"));
    let asked = ask(&mut up, "plain", "Glob:search");
    assert_refused(
        &asked,
        "not in the allow list (the operator's",
        &cwd("plain"),
    );
    up.stop_ok();
}

/// A `tool_ceiling` the operator got wrong is an error at its line, and nothing starts with it.
#[test]
fn a_bad_tool_ceiling_is_an_error_at_its_line() {
    let p = one_persona_pack("");
    let dir = tempfile::tempdir().unwrap();
    let overrides = dir.path().join("overrides.toml");
    std::fs::write(
        &overrides,
        "[\"com.example.scratch\".a]\nmodel = \"a:b\"\ntool_ceiling = { deny = [\"kind:nuke\"] }\n",
    )
    .unwrap();
    let mut c = p.cmd();
    c.args(["pack", "inspect"]).arg(p.path()).args([
        "--json",
        "--overrides",
        overrides.to_str().unwrap(),
    ]);
    let run = apiary_e2e::Run::of(c);
    assert_ne!(run.code, 0, "{}", run.stdout);
    let all = format!("{}{}", run.stdout, run.stderr);
    assert!(all.contains("names no ACP tool kind"), "{all}");
    assert!(all.contains("overrides.tool-ceiling"), "{all}");
}
