//! Personas as a team, through `apiary up` on the embedded relay with the bundled agent: apiary's
//! own MCP tools called by the agent (over HTTP, and through the stdio bridge inside the agent's
//! confinement), a post signed with the persona's key, a handoff by `@name` answered in the
//! thread, a ping-pong that stops at the hop limit, and a pack whose persona the other pack may
//! not wake.

use serde_json::Value;

use crate::support::live::{Up, persona, tags, write_pack};

/// The `--json` note of `event` matching `pred`.
fn note(up: &mut Up, event: &str, pred: impl Fn(&Value) -> bool) -> Value {
    let line = up.wait_for(|l| {
        let v: Value = serde_json::from_str(l).unwrap_or_default();
        v["event"] == event && pred(&v)
    });
    serde_json::from_str(&line).unwrap()
}

fn pubkey(up: &mut Up, name: &str) -> String {
    note(up, "persona_ready", |v| v["persona"] == name)["pubkey"]
        .as_str()
        .unwrap()
        .to_string()
}

/// The stored event of `id` in `channel`.
fn stored(up: &Up, channel: &str, id: &str) -> Value {
    up.history(channel)
        .into_iter()
        .find(|e| e["id"] == id)
        .unwrap_or_else(|| panic!("event {id} is not on the relay"))
}

/// The results of the agent's `!mcp:` calls in its reply: `mcp:<tool>=<json>` lines.
fn results(reply: &Value) -> Vec<(String, Value)> {
    reply["content"]
        .as_str()
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.strip_prefix("mcp:"))
        .filter_map(|l| l.split_once('='))
        .map(|(tool, json)| {
            (
                tool.to_string(),
                serde_json::from_str(json).expect("a result"),
            )
        })
        .collect()
}

fn hop(event: &Value) -> Option<String> {
    tags(event, "hop").first().map(|t| t[1].clone())
}

#[test]
fn an_agent_reads_searches_posts_and_lists_through_apiary_s_tools() {
    let home = tempfile::tempdir().unwrap();
    let pack = home.path().join("pack");
    let ada = persona("ada", "subscribe: [\"general\"]", "You are Ada.");
    let bob = persona("bob", "subscribe: [\"general\", \"ops\"]", "You are Bob.");
    write_pack(
        &pack,
        "com.example.team",
        &[("ada", &ada), ("bob", &bob)],
        &[],
    );
    let mut up = Up::start(home.path(), &[&pack], &["--json"], &[]);
    let ada = pubkey(&mut up, "ada");
    let first = up.post("general", "first note about pollen", &[]);
    let _ = up.post("general", "second note", &[]);
    let ask = up.post(
        "general",
        concat!(
            "@ada !mcp:read_channel{\"limit\": 5} !mcp:read_thread ",
            "!mcp:search_channel{\"text\": \"\\u0041BOUT pollen\"} !mcp:list_personas ",
            "!mcp:post{\"channel\": \"ops\", \"text\": \"not mine\"} ",
            "!mcp:post{\"text\": \"posted by ada\"} !mcp:read_channel{\"limit\": 100000}"
        ),
        &[],
    );
    let reply = note(&mut up, "reply", |v| {
        v["persona"] == "ada" && v["to"] == ask.as_str()
    });
    let reply = stored(&up, "general", reply["id"].as_str().unwrap());
    let got = results(&reply);
    let tools: Vec<&str> = got.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(
        tools,
        [
            "read_channel",
            "read_thread",
            "search_channel",
            "list_personas",
            "post",
            "post",
            "read_channel"
        ],
        "{reply}"
    );
    let messages = |r: &Value| -> Vec<String> {
        r["structuredContent"]["messages"]
            .as_array()
            .unwrap_or_else(|| panic!("{r}"))
            .iter()
            .map(|m| m["text"].as_str().unwrap().to_string())
            .collect()
    };
    // The channel's recent messages, the one being answered included (messages of one second
    // have no order among them).
    let channel = messages(&got[0].1);
    assert!(
        channel.iter().any(|t| t == "first note about pollen"),
        "{channel:?}"
    );
    assert!(
        channel.iter().any(|t| t.starts_with("@ada !mcp:")),
        "{channel:?}"
    );
    // The thread of the message being answered is that message.
    assert_eq!(
        got[1].1["structuredContent"]["thread"],
        ask.as_str(),
        "{}",
        got[1].1
    );
    // Search: every word, case-insensitive (the asking message spells its words escaped, so it
    // does not match itself); the one match, not marked as a persona's.
    let found = &got[2].1["structuredContent"]["messages"];
    assert_eq!(found.as_array().unwrap().len(), 1, "{found}");
    assert_eq!(found[0]["id"], first.as_str());
    assert_eq!(found[0]["persona"], Value::Null);
    // Bob, of the same pack, can be handed work; Ada is not listed to herself.
    let personas = &got[3].1["structuredContent"]["personas"];
    assert_eq!(personas.as_array().unwrap().len(), 1, "{personas}");
    assert_eq!(personas[0]["mention"], "@bob");
    assert_eq!(
        personas[0]["channels"],
        serde_json::json!(["general", "ops"])
    );
    // A channel Ada does not subscribe to is refused, naming hers; nothing is published there.
    assert_eq!(got[4].1["isError"], true, "{}", got[4].1);
    let why = got[4].1["content"][0]["text"].as_str().unwrap();
    assert!(
        why.contains("do not subscribe to `ops`") && why.contains("#general"),
        "{why}"
    );
    assert!(up.history("ops").is_empty(), "a refused post reached #ops");
    // The post: on the relay, signed with Ada's key, hop 1, reported.
    let posted = got[5].1["structuredContent"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let event = stored(&up, "general", &posted);
    assert_eq!(event["pubkey"], ada.as_str());
    assert_eq!(event["content"], "posted by ada");
    assert_eq!(hop(&event).as_deref(), Some("1"));
    note(&mut up, "posted", |v| v["id"] == posted.as_str());
    // A hostile limit is a tool error, not a crash.
    assert_eq!(got[6].1["isError"], true, "{}", got[6].1);
    let refused = note(&mut up, "apiary_tool", |v| v["ok"] == false);
    assert_eq!(refused["tool"], "post", "{refused}");
    // The agent's session got apiary's server, with a token, and no key of any kind.
    let sessions = up.capture("ada");
    let new = crate::support::live::received(&sessions, "session/new");
    let entry = new[0]["params"]["mcpServers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "apiary")
        .expect("apiary's MCP server in session/new")
        .clone();
    assert!(entry["url"].as_str().unwrap().ends_with("/mcp"), "{entry}");
    assert!(!entry.to_string().contains("nsec"), "{entry}");
    up.stop_ok();
}

/// Ada hands Bob a task by posting `@bob …` through the stdio bridge (her agent takes no HTTP
/// MCP); Bob's answer lands in the thread of her post. Then two personas that wake on each
/// other's replies ping-pong until the hop limit stops them, with an event; a persona of another
/// pack that would wake on the same words is not allowed to, and says so.
#[test]
fn a_handoff_is_answered_in_the_thread_and_a_ping_pong_stops_at_the_hop_limit() {
    let home = tempfile::tempdir().unwrap();
    let (team, other) = (home.path().join("team"), home.path().join("other"));
    let ada = persona(
        "ada",
        "subscribe: [\"general\", \"desk\"]\ntriggers:\n  keywords: [\"echo:\"]",
        "You are Ada.",
    );
    let bob = persona(
        "bob",
        "subscribe: [\"general\"]\ntriggers:\n  keywords: [\"echo:\"]",
        "You are Bob.",
    );
    write_pack(
        &team,
        "com.example.team",
        &[("ada", &ada), ("bob", &bob)],
        &[],
    );
    let carl = persona(
        "carl",
        "subscribe: [\"general\"]\ntriggers:\n  keywords: [\"echo:\"]",
        "You are Carl.",
    );
    write_pack(&other, "com.example.other", &[("carl", &carl)], &[]);
    let mut up = Up::start(
        home.path(),
        &[&team, &other],
        &["--json", "--hop-limit", "4"],
        &[("APIARY_AGENT_MCP_HTTP", "0")],
    );
    let (ada_key, bob_key) = (pubkey(&mut up, "ada"), pubkey(&mut up, "bob"));

    // In #desk only Ada listens; the `@` is escaped in the JSON, so the person mentions no one.
    let ask = up.post(
        "desk",
        r#"@ada !mcp:post{"channel": "general", "text": "\u0040bob check the hive"}"#,
        &[],
    );
    note(&mut up, "reply", |v| {
        v["persona"] == "ada" && v["to"] == ask.as_str()
    });
    let posted = note(&mut up, "posted", |v| v["persona"] == "ada");
    let post_id = posted["id"].as_str().unwrap().to_string();
    assert_eq!(posted["hop"], 1);
    let answer = note(&mut up, "reply", |v| {
        v["persona"] == "bob" && v["to"] == post_id.as_str()
    });
    let answer = stored(&up, "general", answer["id"].as_str().unwrap());
    assert_eq!(answer["pubkey"], bob_key.as_str());
    let roots: Vec<String> = tags(&answer, "e").iter().map(|t| t[1].clone()).collect();
    assert!(
        roots.contains(&post_id),
        "the answer is not in the post's thread: {answer}"
    );
    assert_eq!(hop(&answer).as_deref(), Some("2"));
    let post = stored(&up, "general", &post_id);
    assert_eq!(post["pubkey"], ada_key.as_str());

    // Carl (another pack) would wake on "echo:" but may not be woken by this pack's personas.
    let refused = note(&mut up, "handoff_stopped", |v| v["persona"] == "carl");
    assert_eq!(refused["stop"], "not-allowed", "{refused}");

    // Ping-pong: Ada answers the person (hop 1), each reply wakes the other by "echo:", and the
    // reply of hop 4 wakes nobody.
    let ping = up.post("general", "@ada ping", &[]);
    let mut trigger = ping.clone();
    for (n, who) in [(1, "ada"), (2, "bob"), (3, "ada"), (4, "bob")] {
        let reply = note(&mut up, "reply", |v| {
            v["persona"] == who && v["to"] == trigger.as_str()
        });
        let id = reply["id"].as_str().unwrap().to_string();
        assert_eq!(
            hop(&stored(&up, "general", &id)).as_deref(),
            Some(n.to_string().as_str())
        );
        trigger = id;
    }
    let stop = note(&mut up, "handoff_stopped", |v| {
        v["id"] == trigger.as_str() && v["persona"] == "ada"
    });
    assert_eq!(stop["stop"], "hop-limit", "{stop}");
    assert_eq!(
        (stop["hop"].as_u64(), stop["limit"].as_u64()),
        (Some(4), Some(4))
    );
    up.stop_ok();
    let more = up
        .seen
        .iter()
        .filter(|l| l.contains(r#""event":"reply""#) && l.contains(&format!(r#""to":"{trigger}""#)))
        .count();
    assert_eq!(more, 0, "a persona answered past the hop limit");
}

/// `x-woken-by` entries are checked by `pack validate`: one that names no persona is an error at
/// its file and line; good entries validate clean.
#[test]
fn x_woken_by_is_validated_at_its_line() {
    let home = tempfile::tempdir().unwrap();
    let pack = home.path().join("pack");
    let good = persona(
        "ada",
        "x-woken-by: [bob, com.example.ops/*]",
        "You are Ada.",
    );
    let bad = persona("bob", "x-woken-by: [\"../etc\"]", "You are Bob.");
    write_pack(
        &pack,
        "com.example.team",
        &[("ada", &good), ("bob", &bad)],
        &[],
    );
    let mut cmd = apiary_e2e::apiary(home.path());
    cmd.args(["pack", "validate", "--json"]).arg(&pack);
    let run = apiary_e2e::Run::of(cmd);
    assert_eq!(run.code, 1, "{}", run.stdout);
    let v: Value = serde_json::from_str(&run.stdout).unwrap();
    let found = v.to_string();
    assert!(found.contains("persona.woken-by"), "{found}");
    assert!(found.contains("agents/bob.persona.md"), "{found}");
    assert!(!found.contains("agents/ada.persona.md\""), "{found}");
}
