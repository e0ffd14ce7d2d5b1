//! The operator's day (issue 22): `up` runs what is installed (by id, or everything), each persona
//! publishes a Nostr profile that `tail` shows by name, `thread_replies: false` keeps replies in the
//! channel, `tail --no-follow` ends its output with a newline and never shows a reply before the
//! message it answers, and a persona whose workspace cannot be created is refused, naming the path.

use std::path::Path;

use apiary_e2e::{Run, apiary, write_tree};
use serde_json::{Value, json};

use crate::support::dist::{build, run_root};
use crate::support::live::wire::Wire;
use crate::support::live::{Up, e_tags, event_of, persona, tags, write_pack};

const PIP: &str = "---\nname: pip\ndisplay_name: Pip the Tester\ndescription: Tests things, politely.\navatar: ./avatars/pip.png\nruntime: apiary-agent\nsubscribe: [\"general\"]\nthread_replies: false\n---\nYou are Pip.\n";

fn pip_pack(dir: &Path) {
    write_pack(
        dir,
        "com.example.operator",
        &[("pip", PIP)],
        &[("avatars/pip.png", "PNGDATA")],
    );
}

/// `persona <name> ready pubkey=<hex> ...` → the hex key.
fn pubkey_of(up: &mut Up, name: &str) -> String {
    up.wait_for(|l| l.starts_with(&format!("persona {name} ready ")))
        .split_whitespace()
        .find_map(|w| w.strip_prefix("pubkey="))
        .unwrap()
        .to_string()
}

fn tail_plain(up: &Up) -> Run {
    let mut cmd = apiary(&up.home);
    cmd.args(["tail", "--relay", &up.url, "--channel", "general"])
        .args(["--no-follow", "--timeout", "30"]);
    Run::of(cmd)
}

#[test]
fn a_persona_publishes_its_profile_and_replies_in_the_channel_without_thread_replies() {
    let home = tempfile::tempdir().unwrap();
    let pack = home.path().join("pack");
    pip_pack(&pack);
    let mut up = Up::start(home.path(), &[&pack], &[], &[]);
    let pip = pubkey_of(&mut up, "pip");

    // Kind 0, signed by the persona's key: what any Nostr client shows.
    let mut wire = Wire::connect(&up.url);
    let profiles = wire
        .req(json!({"kinds": [0], "authors": [pip]}))
        .expect("profiles");
    assert_eq!(profiles.len(), 1, "{profiles:#?}");
    let profile: Value = serde_json::from_str(profiles[0]["content"].as_str().unwrap()).unwrap();
    assert_eq!(profile["name"], "pip");
    assert_eq!(profile["display_name"], "Pip the Tester");
    assert_eq!(profile["about"], "Tests things, politely.");
    assert_eq!(profile["picture"], "data:image/png;base64,UE5HREFUQQ==");

    // Spec §10: with `thread_replies: false` a reply to a top-level message stays in the channel
    // (quoting it), instead of opening a thread under it.
    let hello = up.post("general", "@pip hello there", &[]);
    let reply = up.reply_to("pip", &hello);
    let history = up.history("general");
    let r = history.iter().find(|e| e["id"] == reply).expect("reply");
    assert!(e_tags(r).is_empty(), "no thread: {r}");
    assert_eq!(tags(r, "q"), [vec!["q".to_string(), hello.clone()]]);

    // `tail` shows the persona as the key store's (persona and pack, not the name its profile
    // claims), the message before its answer, and ends its output with a newline.
    let shown = tail_plain(&up);
    assert_eq!(shown.code, 0, "{}", shown.stderr);
    let out = &shown.stdout;
    assert!(out.ends_with('\n'), "{out:?}");
    let line_of = |id: &str| {
        out.lines()
            .position(|l| l.starts_with(&id[..8]))
            .unwrap_or_else(|| panic!("{id} not in {out}"))
    };
    assert!(line_of(&hello) < line_of(&reply), "{out}");
    let reply_line = out.lines().nth(line_of(&reply)).unwrap();
    assert!(
        reply_line.contains(&format!("pip (pack com.example.operator, {})", &pip[..16])),
        "{reply_line}"
    );
    up.stop_ok();
}

#[test]
fn up_runs_installed_packs_by_default_and_by_id_and_the_example_only_when_none_is() {
    let home = tempfile::tempdir().unwrap();
    let root = home.path().join(".buzz/packs");

    // Nothing installed: the bundled example, as the README's main command promises, and a line
    // saying where it is and how to start a pack from it (the copy it names is a pack).
    let mut up = Up::start(home.path(), &[], &[], &[]);
    up.wait_for(|l| l.starts_with("persona bee ready "));
    up.stop_ok();
    let example = up
        .seen
        .iter()
        .find(|l| l.starts_with("example: nothing installed"))
        .unwrap_or_else(|| panic!("{:#?}", up.seen));
    let dir = example
        .split(" at ")
        .nth(1)
        .unwrap()
        .split(';')
        .next()
        .unwrap();
    assert!(
        Path::new(dir).join(".plugin/plugin.json").is_file(),
        "{example}"
    );
    assert!(
        example.contains("apiary pack new ./my-pack") && example.contains("apiary pack validate"),
        "{example}"
    );

    let pack = home.path().join("src");
    write_pack(
        &pack,
        "com.example.installed",
        &[(
            "kit",
            &persona("kit", "subscribe: [\"general\"]", "You are Kit."),
        )],
        &[],
    );
    let (archive, _) = build(home.path(), &pack, &home.path().join("dist"));
    let install = run_root(home.path(), &root, &["install", archive.to_str().unwrap()]);
    assert_eq!(install.code, 0, "{}\n{}", install.stdout, install.stderr);

    // No arguments: what is installed, and not the example.
    let mut up = Up::start(home.path(), &[], &[], &[]);
    up.wait_for(|l| l.starts_with("persona kit ready "));
    let ready = up.wait_for(|l| event_of(l) == "ready");
    assert!(ready.contains("personas=1"), "{ready}");
    up.stop_ok();
    assert!(
        !up.seen
            .iter()
            .any(|l| l.starts_with("persona bee") || l.starts_with("example:")),
        "{:#?}",
        up.seen
    );

    // By id.
    let mut up = Up::start(home.path(), &[Path::new("com.example.installed")], &[], &[]);
    let id = up.post("general", "@kit are you the installed one?", &[]);
    up.reply_to("kit", &id);
    up.stop_ok();

    // An id nobody installed: refused, naming what is installed.
    let mut cmd = apiary(home.path());
    cmd.args(["up", "--listen", "127.0.0.1:0", "com.example.missing"]);
    let missing = Run::bounded(cmd, 60);
    assert_eq!(missing.code, 1, "{}\n{}", missing.stdout, missing.stderr);
    assert!(
        missing.stderr.contains("com.example.missing")
            && missing.stderr.contains("installed: com.example.installed"),
        "{}",
        missing.stderr
    );
}

#[test]
fn a_workspace_that_cannot_be_created_refuses_its_persona_naming_the_path() {
    let home = tempfile::tempdir().unwrap();
    let pack = home.path().join("pack");
    pip_pack(&pack);
    // A regular file where a directory of the workspace root would have to be.
    write_tree(home.path(), &[("blocker", "not a directory")]);
    let ws = home.path().join("blocker/ws");
    let mut up = Up::spawn(
        home.path(),
        &[&pack],
        &["--workspace-root", ws.to_str().unwrap()],
        &[],
    );
    let refused = up.wait_for(|l| l.starts_with("persona pip refused"));
    assert!(refused.contains("workspace"), "{refused}");
    assert!(refused.contains(&ws.display().to_string()), "{refused}");
    assert_eq!(up.stop(), 1, "no persona left to run");
}

#[test]
fn two_packs_with_one_persona_name_on_one_channel_both_run_and_pack_id_mentions_tell_them_apart() {
    // The multi-pack policy (docs/operators.md, "Several packs at once"): two packs' personas of
    // one name in a shared channel both run (the operator is told, naming both packs); `@bee`
    // wakes both, `@pack-id/bee` and a `p` tag of one's key exactly that one. Overlapping
    // keywords wake each.
    let home = tempfile::tempdir().unwrap();
    let bee = |channel: &str| {
        persona(
            "bee",
            &format!("subscribe: [\"{channel}\"]\ntriggers:\n  keywords: [\"honey\"]"),
            "You are Bee.",
        )
    };
    let (first, second, third) = (
        home.path().join("first"),
        home.path().join("second"),
        home.path().join("third"),
    );
    write_pack(
        &first,
        "com.example.first",
        &[("bee", &bee("general"))],
        &[],
    );
    write_pack(
        &second,
        "com.example.second",
        &[
            ("bee", &bee("general")),
            (
                "wasp",
                &persona(
                    "wasp",
                    "subscribe: [\"general\"]\ntriggers:\n  keywords: [\"honey\"]",
                    "You are Wasp.",
                ),
            ),
        ],
        &[],
    );
    write_pack(&third, "com.example.third", &[("bee", &bee("garden"))], &[]);
    let mut up = Up::start(home.path(), &[&first, &second, &third], &["--json"], &[]);
    let shared = up.wait_for(|l| event_of(l) == "name_shared");
    assert!(
        shared.contains("com.example.first") && shared.contains("com.example.second"),
        "{shared}"
    );
    assert!(shared.contains("@com.example.first/bee"), "{shared}");
    let ready = up.wait_for(|l| event_of(l) == "ready");
    assert!(
        ready.contains("\"personas\":4"),
        "every bee and wasp: {ready}"
    );
    let key_of = |up: &mut Up, pack: &str| -> String {
        let line = up.wait_for(|l| {
            let v: Value = serde_json::from_str(l).unwrap_or_default();
            v["event"] == "persona_ready" && v["persona"] == "bee" && v["pack"] == pack
        });
        let v: Value = serde_json::from_str(&line).unwrap();
        v["pubkey"].as_str().unwrap().to_string()
    };
    let (first_bee, second_bee) = (
        key_of(&mut up, "com.example.first"),
        key_of(&mut up, "com.example.second"),
    );
    // Who answered `id` (sorted keys), once `woken` replies to it were published.
    let answered_by = |up: &mut Up, id: &str, woken: usize| -> Vec<String> {
        let mut replies: Vec<String> = Vec::new();
        while replies.len() < woken {
            let line = up.wait_for(|l| {
                let r = reply_to(l, id);
                !r.is_empty() && !replies.contains(&r)
            });
            replies.push(reply_to(&line, id));
        }
        let mut keys: Vec<String> = up
            .history("general")
            .iter()
            .filter(|e| replies.iter().any(|r| e["id"] == r.as_str()))
            .map(|e| e["pubkey"].as_str().unwrap().to_string())
            .collect();
        keys.sort();
        keys
    };
    let sorted = |mut v: Vec<String>| {
        v.sort();
        v
    };
    let qualified = up.post("general", "@com.example.first/bee hello", &[]);
    assert_eq!(
        answered_by(&mut up, &qualified, 1),
        std::slice::from_ref(&first_bee)
    );
    let tagged = up.post("general", "hello you", &["--mention", &second_bee]);
    assert_eq!(
        answered_by(&mut up, &tagged, 1),
        std::slice::from_ref(&second_bee)
    );
    let plain = up.post("general", "@bee hello", &[]);
    assert_eq!(
        answered_by(&mut up, &plain, 2),
        sorted(vec![first_bee, second_bee])
    );
    // Overlapping keywords: every pack's persona subscribed there answers (third's bee is in
    // #garden).
    let honey = up.post("general", "who has honey?", &[]);
    assert_eq!(answered_by(&mut up, &honey, 3).len(), 3);
    up.stop_ok();
    // Each woke exactly the personas it names: nobody answered twice or in their place.
    let woken = |id: &str| {
        up.seen
            .iter()
            .filter(|l| {
                let v: Value = serde_json::from_str(l).unwrap_or_default();
                v["event"] == "woken" && v["id"] == id
            })
            .count()
    };
    assert_eq!(
        (
            woken(&qualified),
            woken(&tagged),
            woken(&plain),
            woken(&honey)
        ),
        (1, 1, 2, 3)
    );
}

/// The reply id of a `reply` JSON line answering `id` (empty when it is not one).
fn reply_to(line: &str, id: &str) -> String {
    let v: Value = serde_json::from_str(line).unwrap_or_default();
    if v["event"] == "reply" && v["to"] == id {
        v["id"].as_str().unwrap_or_default().to_string()
    } else {
        String::new()
    }
}
