//! A persona's spending limits from the operator overrides file and from the `agent.toml` an
//! expert-pack install wrote: a turn over a limit is dropped with a `limited` event naming the
//! limit, never silently.

use apiary_e2e::{Run, apiary};
use serde_json::Value;

use crate::support::live::{Up, persona, write_pack};

fn pack(root: &std::path::Path) {
    write_pack(
        root,
        "com.example.limits",
        &[
            (
                "pip",
                &persona("pip", "subscribe: [\"general\"]", "You are Pip."),
            ),
            (
                "bee",
                &persona("bee", "subscribe: [\"general\"]", "You are Bee."),
            ),
        ],
        &[],
    );
}

/// The `--json` note of `event` for `persona` about message `id`.
fn note(up: &mut Up, event: &str, persona: &str, key: &str, id: &str) -> Value {
    let line = up.wait_for(|l| {
        let v: Value = serde_json::from_str(l).unwrap_or_default();
        v["event"] == event && v["persona"] == persona && v[key] == id
    });
    serde_json::from_str(&line).unwrap()
}

#[test]
fn turns_per_hour_and_tokens_per_day_trip_as_events() {
    let home = tempfile::tempdir().unwrap();
    let root = home.path().join("pack");
    pack(&root);
    let overrides = home.path().join("overrides.toml");
    std::fs::write(
        &overrides,
        "[\"com.example.limits\".pip]\nlimits = { turns_per_hour = 2 }\n\n\
         [\"com.example.limits\".bee]\nlimits = { tokens_per_day = 150 }\n",
    )
    .unwrap();
    // pip: two turns an hour. bee: its agent reports 100 tokens a turn, 150 a day allowed.
    let mut up = Up::start(
        home.path(),
        &[&root],
        &[
            "--json",
            "--overrides",
            overrides.to_str().unwrap(),
            "--author-turns",
            "0",
        ],
        &[("APIARY_AGENT_USAGE", "100")],
    );
    for n in 0..2 {
        let id = up.post("general", &format!("@pip @bee question {n}"), &[]);
        note(&mut up, "reply", "pip", "to", &id);
        note(&mut up, "reply", "bee", "to", &id);
    }
    let third = up.post("general", "@pip @bee question 2", &[]);
    let pip = note(&mut up, "limited", "pip", "id", &third);
    assert_eq!(pip["limit"], "turns_per_hour", "{pip}");
    assert_eq!(
        (pip["allowed"].as_u64(), pip["used"].as_u64()),
        (Some(2), Some(2))
    );
    assert_eq!(pip["action"], "dropped");
    let bee = note(&mut up, "limited", "bee", "id", &third);
    assert_eq!(bee["limit"], "tokens_per_day", "{bee}");
    assert_eq!(
        (bee["allowed"].as_u64(), bee["used"].as_u64()),
        (Some(150), Some(200))
    );
    up.stop_ok();
    let answered = up.seen.iter().any(|l| {
        let v: Value = serde_json::from_str(l).unwrap_or_default();
        v["event"] == "reply" && v["to"] == third.as_str()
    });
    assert!(!answered, "a message over the limits was answered");
}

/// The `[limits]` of the `agent.toml` under the install root count too; one that cannot be read
/// stops the start, naming the file.
#[test]
fn agent_toml_limits_are_enforced() {
    let home = tempfile::tempdir().unwrap();
    let root = home.path().join("pack");
    pack(&root);
    let install = home.path().join("packs");
    let config = install.join(".apiary/agents/com.example.limits/pip");
    std::fs::create_dir_all(&config).unwrap();
    let toml = config.join("agent.toml");
    std::fs::write(
        &toml,
        "[budget]\nmonthly_limit_cents = 500\n\n[limits]\nturns_per_day = 1\n",
    )
    .unwrap();
    let args = ["--json", "--root", install.to_str().unwrap()];
    let mut up = Up::start(home.path(), &[&root], &args, &[]);
    let first = up.post("general", "@pip one", &[]);
    note(&mut up, "reply", "pip", "to", &first);
    let second = up.post("general", "@pip two", &[]);
    let limited = note(&mut up, "limited", "pip", "id", &second);
    assert_eq!(limited["limit"], "turns_per_day", "{limited}");
    up.stop_ok();

    std::fs::write(&toml, "[limits]\nturns_per_week = 1\n").unwrap();
    let mut cmd = apiary(home.path());
    cmd.args(["up", "--listen", "127.0.0.1:0"])
        .arg(&root)
        .args(args);
    let run = Run::of(cmd);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.contains("turns_per_week"), "{}", run.stderr);
    assert!(run.stderr.contains("agent.toml"), "{}", run.stderr);
}

/// Flood limits per persona in the overrides file: pip gives one author one turn a minute (the
/// flag says five), so the author's second message waits for pip, and is answered by bee at once;
/// each turn reports what is used of the tightest spending limit (the status view's LIMIT). A
/// limit that is not a whole number of turns stops the start, naming the key.
#[test]
fn author_and_channel_rates_in_the_overrides_file_replace_the_flags_for_one_persona() {
    let home = tempfile::tempdir().unwrap();
    let root = home.path().join("pack");
    pack(&root);
    let overrides = home.path().join("overrides.toml");
    std::fs::write(
        &overrides,
        "[\"com.example.limits\".pip]\nlimits = { author_turns_per_minute = 1, channel_turns_per_minute = 10 }\n\n\
         [\"com.example.limits\".bee]\nlimits = { turns_per_hour = 5 }\n",
    )
    .unwrap();
    let args = ["--json", "--overrides", overrides.to_str().unwrap()];
    let mut up = Up::start(home.path(), &[&root], &args, &[]);
    let first = up.post("general", "@pip @bee one", &[]);
    note(&mut up, "reply", "pip", "to", &first);
    note(&mut up, "reply", "bee", "to", &first);
    let second = up.post("general", "@pip @bee two", &[]);
    let held = note(&mut up, "limited", "pip", "id", &second);
    assert_eq!(
        (&held["limit"], &held["action"], held["turns"].as_u64()),
        (&Value::from("author"), &Value::from("coalesced"), Some(1)),
        "{held}"
    );
    note(&mut up, "reply", "bee", "to", &second);
    let budget = up.wait_for(|l| {
        let v: Value = serde_json::from_str(l).unwrap_or_default();
        v["event"] == "budget" && v["persona"] == "bee" && v["used"] == 2
    });
    let budget: Value = serde_json::from_str(&budget).unwrap();
    assert_eq!(
        (&budget["limit"], budget["allowed"].as_u64()),
        (&Value::from("turns_per_hour"), Some(5))
    );
    up.stop_ok();
    let bee_held = up.seen.iter().any(|l| {
        let v: Value = serde_json::from_str(l).unwrap_or_default();
        v["event"] == "limited" && v["persona"] == "bee"
    });
    assert!(!bee_held, "bee kept the flag's five turns a minute");

    std::fs::write(
        &overrides,
        "[\"com.example.limits\".pip]\nlimits = { author_turns_per_minute = 99999999999 }\n",
    )
    .unwrap();
    let mut cmd = apiary(home.path());
    cmd.args(["up", "--listen", "127.0.0.1:0"])
        .arg(&root)
        .args(args);
    let run = Run::of(cmd);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains("author_turns_per_minute"),
        "{}",
        run.stderr
    );
}
