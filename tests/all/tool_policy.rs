//! A persona's `x-tool-policy`: `pack validate` checks it (hostile values are errors at their
//! line), `pack inspect` shows it, and `apiary up` enforces it by answering the agent's
//! permission requests: a tool the policy refuses is rejected even under `--permission
//! allow-once`, it does not run, and the refusal is a `permission` event. The agent's other
//! reports are events too: plans, and the context usage that feeds the token budget.

use serde_json::Value;

use crate::support::live::{Up, persona, write_pack};
use crate::support::pack::one_persona_pack;

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
