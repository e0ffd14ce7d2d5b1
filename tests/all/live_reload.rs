//! Hot reload (issue 22): an `apiary up` running the installed packs picks up an upgrade, a new
//! pack and an uninstall without a restart. The old version answers the turn it has in flight
//! before it stops, the new version answers what comes after, a new version that cannot start
//! leaves the old one running, and an uninstalled pack's persona stops answering.

use std::path::Path;

use serde_json::Value;

use crate::support::dist::{build, run_root};
use crate::support::live::{Up, persona, write_pack};

const ID: &str = "com.example.reload";
const OTHER: &str = "com.example.other";

/// Builds and installs version `version` of pack `id`, with `personas` (name, model, extra
/// frontmatter) and `extra` files.
fn install(
    home: &Path,
    id: &str,
    version: &str,
    personas: &[(&str, &str, &str)],
    extra: &[(&str, &str)],
) {
    let src = home.join(format!("src-{id}-{version}"));
    let files: Vec<(String, String)> = personas
        .iter()
        .map(|(name, model, more)| {
            let front = format!("subscribe: [\"general\"]\nmodel: \"local:{model}\"{more}");
            (
                name.to_string(),
                persona(name, &front, &format!("You are {name}.")),
            )
        })
        .collect();
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    write_pack(&src, id, &refs, extra);
    let manifest = src.join(".plugin/plugin.json");
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(
        &manifest,
        text.replace("\"1.0.0\"", &format!("\"{version}\"")),
    )
    .unwrap();
    let (archive, _) = build(home, &src, &home.join(format!("dist-{id}-{version}")));
    let root = home.join(".buzz/packs");
    let run = run_root(
        home,
        &root,
        &["install", "--replace", archive.to_str().unwrap()],
    );
    assert_eq!(
        run.code, 0,
        "install {version}: {}\n{}",
        run.stdout, run.stderr
    );
}

/// The text of the reply `id` on the channel.
fn content(up: &Up, id: &str) -> String {
    let history = up.history("general");
    let reply: &Value = history
        .iter()
        .find(|e| e["id"] == id)
        .unwrap_or_else(|| panic!("{id} not in {history:#?}"));
    reply["content"].as_str().unwrap_or_default().to_string()
}

/// The position of the first line of `up`'s output starting with `prefix`.
fn line_index(up: &Up, prefix: &str) -> usize {
    up.seen
        .iter()
        .position(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no `{prefix}` in {:#?}", up.seen))
}

#[test]
fn an_upgrade_drains_the_turn_in_flight_then_the_new_version_answers_and_uninstall_stops_it() {
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    install(home, ID, "1.0.0", &[("kit", "echo-v1", "")], &[]);
    let mut up = Up::start(home, &[], &[], &[("APIARY_AGENT_SLOW_MS", "6000")]);
    up.wait_for(|l| l.starts_with("persona kit ready "));

    // A slow turn is in flight on version 1 while version 2 (a changed model, a new persona) is
    // installed; a message posted right after the install arrives while the reload runs.
    let slow = up.post("general", "@kit !slow first", &[]);
    up.wait_for(|l| l.starts_with(&format!("event {slow} ")) && l.contains("woke kit"));
    install(
        home,
        ID,
        "2.0.0",
        &[("kit", "echo-v2", ""), ("wren", "echo-wren", "")],
        &[],
    );
    let during = up.post("general", "@kit during the reload", &[]);
    let reloaded = up.wait_for(|l| l.starts_with(&format!("reloaded {ID} ")));
    assert!(
        reloaded.contains("upgraded 1.0.0 -> 2.0.0") && reloaded.contains("kit, wren"),
        "{reloaded}"
    );

    // The turn in flight was answered by version 1, before its persona stopped.
    let first = up.reply_to("kit", &slow);
    assert!(
        content(&up, &first).contains("model=echo-v1"),
        "{}",
        content(&up, &first)
    );
    assert!(
        line_index(&up, &format!("reply kit {first} ")) < line_index(&up, "persona kit stopped"),
        "{:#?}",
        up.seen
    );
    // The message that arrived meanwhile was not lost (either version may have taken it).
    up.reply_to("kit", &during);

    // From now on version 2 answers, and its new persona runs.
    up.wait_for(|l| l.starts_with("persona wren ready "));
    let after = up.post("general", "@kit after the reload", &[]);
    let reply = up.reply_to("kit", &after);
    assert!(
        content(&up, &reply).contains("model=echo-v2"),
        "{}",
        content(&up, &reply)
    );
    let hi = up.post("general", "@wren hello", &[]);
    up.reply_to("wren", &hi);

    // A pack installed while `up` runs starts.
    install(home, OTHER, "1.0.0", &[("owl", "echo-owl", "")], &[]);
    let installed = up.wait_for(|l| l.starts_with(&format!("reloaded {OTHER} ")));
    assert!(
        installed.contains("installed 1.0.0: running owl"),
        "{installed}"
    );
    let hoot = up.post("general", "@owl hello", &[]);
    up.reply_to("owl", &hoot);

    // Version 3 cannot start kit (its MCP server needs a variable the operator did not allow):
    // kit keeps running version 2, and the reload says why.
    let mcp = r#"{"mcpServers": {"docs": {"type": "http", "url": "http://127.0.0.1:9/${APIARY_RELOAD_TOKEN}"}}}"#;
    install(
        home,
        ID,
        "3.0.0",
        &[("kit", "echo-v3", "")],
        &[(".mcp.json", mcp)],
    );
    let failed = up.wait_for(|l| l.starts_with(&format!("reload_failed {ID}")));
    assert!(
        failed.contains("kit") && failed.contains("2.0.0"),
        "{failed}"
    );
    let refused = up.wait_for(|l| l.starts_with("persona kit refused"));
    assert!(refused.contains("APIARY_RELOAD_TOKEN"), "{refused}");
    let still = up.post("general", "@kit still there?", &[]);
    let reply = up.reply_to("kit", &still);
    assert!(
        content(&up, &reply).contains("model=echo-v2"),
        "{}",
        content(&up, &reply)
    );

    // Hostile: the installed pack is changed by hand into one that does not load, and its lock
    // entry touched. The reload is refused, saying why, and kit runs on.
    let root = home.join(".buzz/packs");
    std::fs::write(
        root.join(ID).join("agents/kit.persona.md"),
        "---\nname: [not, a, name\n---\n",
    )
    .unwrap();
    let lock_file = root.join("pack.lock");
    let mut lock: Value =
        serde_json::from_str(&std::fs::read_to_string(&lock_file).unwrap()).unwrap();
    lock[ID]["installed_at"] = Value::from("2000-01-01T00:00:00Z");
    std::fs::write(&lock_file, serde_json::to_string(&lock).unwrap()).unwrap();
    let broken = up.wait_for(|l| l.starts_with(&format!("reload_failed {ID} 3.0.0: ")));
    assert!(
        broken.contains("kit.persona.md") && broken.contains("what runs of it keeps running"),
        "{broken}"
    );
    let still = up.post("general", "@kit and now?", &[]);
    let reply = up.reply_to("kit", &still);
    assert!(
        content(&up, &reply).contains("model=echo-v2"),
        "{}",
        content(&up, &reply)
    );

    // Uninstalled: kit stops; a mention of both wakes only the other pack's owl.
    let gone = run_root(home, &root, &["uninstall", ID]);
    assert_eq!(gone.code, 0, "{}\n{}", gone.stdout, gone.stderr);
    let line = up.wait_for(|l| l.starts_with(&format!("reloaded {ID} uninstalled")));
    assert!(line.contains("stopped kit"), "{line}");
    let bye = up.post("general", "@kit @owl bye", &[]);
    let event = up.event_line(&bye);
    assert!(
        event.contains("woke owl (mention)") && !event.contains("kit"),
        "{event}"
    );
    up.reply_to("owl", &bye);
    up.stop_ok();
}

#[test]
fn up_given_an_installed_pack_id_reloads_that_pack_only() {
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    const WATCHED: &str = "com.example.b-watched";
    const ASIDE: &str = "com.example.a-aside";
    install(home, WATCHED, "1.0.0", &[("kit", "echo-v1", "")], &[]);
    install(home, ASIDE, "1.0.0", &[("jay", "echo-jay", "")], &[]);
    let mut up = Up::start(home, &[Path::new(WATCHED)], &[], &[]);
    up.wait_for(|l| l.starts_with("persona kit ready "));
    // The other pack changes first, then the one given: the watch sends changes in id order,
    // so a reload of the other would come first.
    install(home, ASIDE, "2.0.0", &[("jay", "echo-jay2", "")], &[]);
    install(home, WATCHED, "2.0.0", &[("kit", "echo-v2", "")], &[]);
    let line = up.wait_for(|l| l.starts_with(&format!("reloaded {WATCHED} ")));
    assert!(line.contains("upgraded 1.0.0 -> 2.0.0"), "{line}");
    assert!(
        !up.seen
            .iter()
            .any(|l| l.contains(ASIDE) || l.starts_with("persona jay")),
        "{:#?}",
        up.seen
    );
    let id = up.post("general", "@kit hello", &[]);
    let reply = up.reply_to("kit", &id);
    assert!(
        content(&up, &reply).contains("model=echo-v2"),
        "{}",
        content(&up, &reply)
    );
    up.stop_ok();
}

/// Issue 32, finding 4: `--trust-hooks` covers the packs `up` started with. A pack installed
/// while `up` runs comes in through hot reload with its script hook and stdio MCP server held
/// back (the store has no trust for them, and the output says `--trust-hooks` does not cover
/// them); its persona still answers, and the pack present at start keeps its hook.
#[test]
fn trust_hooks_covers_only_the_packs_present_at_start_not_one_a_reload_brings_in() {
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    let marker = |name: &str| home.join(format!("ran-{name}"));
    let hook = |name: &str| format!("#!/bin/sh\ntouch '{}'\n", marker(name).display());
    let hooked = "\nhooks:\n  on_start: ./hooks/start.sh";
    let mcp = r#"{"mcpServers":{"tools":{"command":"/bin/sh","args":["-c","exit 0"]}}}"#;
    install(
        home,
        ID,
        "1.0.0",
        &[("kit", "echo-v1", hooked)],
        &[("hooks/start.sh", &hook("kit"))],
    );
    let mut up = Up::start(home, &[], &["--trust-hooks"], &[]);
    up.wait_for(|l| l.starts_with("persona kit ready "));
    assert!(
        marker("kit").exists(),
        "the pack present at start is trusted"
    );

    install(
        home,
        OTHER,
        "1.0.0",
        &[("owl", "echo-owl", hooked)],
        &[("hooks/start.sh", &hook("owl")), (".mcp.json", mcp)],
    );
    up.wait_for(|l| l.starts_with(&format!("reloaded {OTHER} ")));
    up.wait_for(|l| l.starts_with("persona owl ready "));
    let id = up.post("general", "@owl hello", &[]);
    up.reply_to("owl", &id);
    up.stop_ok();
    assert!(
        !marker("owl").exists(),
        "a pack installed later ran its script hook on the host: {:#?}\n{}",
        up.seen,
        up.stderr()
    );
    let stderr = up.stderr();
    assert!(
        stderr.contains("--trust-hooks covers only the packs"),
        "the output says why: {stderr}"
    );
    let untrusted: Vec<&String> = up
        .seen
        .iter()
        .filter(|l| l.starts_with("untrusted owl "))
        .collect();
    assert!(
        untrusted.iter().any(|l| l.contains("hook")) && untrusted.iter().any(|l| l.contains("mcp")),
        "an untrusted line for the hook and the MCP server: {:#?}",
        up.seen
    );
}

/// Issue 32, finding 8: `up` runs only installed files that are what their install recorded. The
/// installed pack's directory is taken away (its persona stops), changed in place, and put back:
/// the reload refuses it, naming the changed file, and the changed prompt never reaches an agent.
#[test]
fn a_pack_changed_in_place_is_not_run_by_a_reload() {
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    install(home, ID, "1.0.0", &[("kit", "echo-v1", "")], &[]);
    install(home, OTHER, "1.0.0", &[("owl", "echo-owl", "")], &[]);
    let mut up = Up::start(home, &[], &[], &[]);
    up.wait_for(|l| l.starts_with("persona kit ready "));
    up.wait_for(|l| l.starts_with("persona owl ready "));

    let dir = home.join(".buzz/packs").join(ID);
    let aside = home.join(".buzz/packs/.aside");
    std::fs::rename(&dir, &aside).unwrap();
    up.wait_for(|l| l.starts_with("persona kit stopped"));
    let prompt = aside.join("agents/kit.persona.md");
    let text = std::fs::read_to_string(&prompt).unwrap();
    std::fs::write(
        &prompt,
        text.replace("You are kit.", "You are kit. TAMPERED"),
    )
    .unwrap();
    std::fs::rename(&aside, &dir).unwrap();

    let line = up.wait_for(|l| l.starts_with(&format!("reload_failed {ID} ")));
    assert!(
        line.contains("agents/kit.persona.md") && line.contains("apiary verify"),
        "{line}"
    );
    // The other pack still answers; kit does not run the changed files.
    let id = up.post("general", "@owl @kit hello", &[]);
    up.reply_to("owl", &id);
    up.stop_ok();
    let started = up
        .seen
        .iter()
        .filter(|l| l.starts_with("persona kit ready "))
        .count();
    assert_eq!(started, 1, "kit started again: {:#?}", up.seen);
    let prompts = crate::support::live::prompts(&up.capture("kit"));
    assert!(
        prompts.iter().all(|p| !p.contains("TAMPERED")),
        "{prompts:?}"
    );

    // Started again, `up` refuses the changed install before anything runs, saying what to do.
    let mut cmd = apiary_e2e::apiary(home);
    cmd.args(["up", "--listen", "127.0.0.1:0"]);
    let run = apiary_e2e::Run::bounded(cmd, 60);
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stderr.contains("agents/kit.persona.md") && run.stderr.contains("apiary verify"),
        "{}",
        run.stderr
    );
}
