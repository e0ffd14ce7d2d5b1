//! Components in Python and JavaScript, built here from the templates in
//! `host/apiary/templates/` with componentize-py and componentize-js at their defaults (see
//! support/toolchains.rs): the Python converter is added and used by `apiary convert`, the JS
//! hook runs under `apiary up` on messages. Plus the capability manifest at `component add` and
//! `component inspect`, and components that are refused at load: one importing an interface
//! apiary does not offer.

use apiary_e2e::{Operator, Run, apiary, guest, write_tree};

use crate::support::live::relays::{Kind, Options, TestRelay};
use crate::support::live::{Up, persona, prompts, write_pack};
use crate::support::toolchains::{Toolchain, build, template};

fn python_converter() -> Option<std::path::PathBuf> {
    let dir = template("converter-python");
    build(Toolchain::Python, &dir, "app.py", "py-lower", "converter")
}

#[test]
fn a_python_converter_is_added_and_used_by_convert() {
    let Some(wasm) = python_converter() else {
        return;
    };
    let env = Operator::new();
    let file = wasm.display().to_string();
    let r = env.run(&["component", "inspect", &file, "--json"]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let v = r.json();
    assert_eq!(v["world"], "converter");
    assert_eq!(v["capabilities"], serde_json::json!([]));

    let r = env.run(&["component", "add", &file, "--json"]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert_eq!(r.json()["component"]["name"], "py-lower");

    let src = env.path("notes");
    std::fs::create_dir_all(&src).unwrap();
    write_tree(&src, &[("a.txt", "Hello BEES\n"), ("b.md", "# skipped\n")]);
    let out = env.path("out");
    let r = env.run(&[
        "convert",
        &src.display().to_string(),
        "--to",
        "text-lower",
        "--out",
        &out.display().to_string(),
        "--json",
    ]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let v = r.json();
    assert_eq!(v["converters"][0]["name"], "py-lower", "{v:#}");
    assert_eq!(v["converters"][0]["origin"]["kind"], "added");
    assert_eq!(v["report"]["normalised"][0]["code"], "case-folded");
    let text = std::fs::read_to_string(out.join("a.txt")).unwrap();
    assert_eq!(text, "hello bees\n");
}

#[test]
fn a_declared_capability_is_refused_until_granted_and_recorded() {
    let Some(built) = python_converter() else {
        return;
    };
    let env = Operator::new();
    let wasm = env.path("notify.wasm");
    std::fs::copy(&built, &wasm).unwrap();
    let manifest = "http = [\"hooks.example.com\"]\nenv = [\"NOTIFY_TOKEN\"]\n";
    std::fs::write(env.path("notify.caps.toml"), manifest).unwrap();
    let file = wasm.display().to_string();

    let v = env.run(&["component", "inspect", &file, "--json"]).json();
    assert_eq!(
        v["capabilities"],
        serde_json::json!(["http:hooks.example.com", "env:NOTIFY_TOKEN"])
    );
    let r = env.run(&["component", "inspect", &file]);
    assert!(
        r.stdout
            .contains("capabilities http:hooks.example.com, env:NOTIFY_TOKEN"),
        "{}",
        r.stdout
    );

    // Granting part of it is not enough; the refusal names what is missing and how to grant it.
    let r = env.run(&["component", "add", &file, "--grant", "env:NOTIFY_TOKEN"]);
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stderr
            .contains("declares http:hooks.example.com, which is not granted")
            && r.stderr.contains("--grant http:hooks.example.com"),
        "{}",
        r.stderr
    );
    assert!(!env.path("data/components/py-lower.wasm").exists());
    let r = env.run(&["component", "add", &file, "--grant", "net:anything"]);
    assert_eq!(r.code, 1);
    assert!(
        r.stderr.contains("invalid capability `net:anything`"),
        "{}",
        r.stderr
    );

    // Granted in full (plus one it does not declare, which it does not get).
    let r = env.run(&[
        "component",
        "add",
        &file,
        "--grant",
        "http:hooks.example.com",
        "--grant",
        "env:NOTIFY_TOKEN",
        "--grant",
        "env:HOME",
        "--json",
    ]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let grants = serde_json::json!(["http:hooks.example.com", "env:NOTIFY_TOKEN"]);
    assert_eq!(r.json()["component"]["grants"], grants);
    let v = env.run(&["component", "list", "--json"]).json();
    assert_eq!(v["components"][0]["grants"], grants, "{v:#}");
}

#[test]
fn a_component_importing_what_apiary_does_not_offer_is_refused_naming_it() {
    let env = Operator::new();
    let file = guest("alien_hook").display().to_string();
    let r = env.run(&["component", "inspect", &file, "--json"]);
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    let v = r.json();
    assert_eq!(v["error"]["kind"], "link", "{v:#}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("test:alien/vault"),
        "{v:#}"
    );
}

#[test]
fn a_js_hook_built_with_default_features_runs_under_up() {
    let dir = template("hook-js");
    let Some(wasm) = build(Toolchain::Js, &dir, "hook.js", "js-spam", "hook") else {
        return;
    };
    // Offered as a converter, it is refused for the world it really has.
    let env = Operator::new();
    let r = env.run(&["component", "add", &wasm.display().to_string()]);
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("is a hook component"), "{}", r.stderr);

    let home = tempfile::tempdir().unwrap();
    let Some(relay) = TestRelay::start(Kind::Embedded, home.path(), Options::default()) else {
        return;
    };
    let pack = home.path().join("pack");
    write_pack(
        &pack,
        "com.example.jshook",
        &[(
            "guard",
            &persona(
                "guard",
                "subscribe: [\"general\"]\ntriggers:\n  all_messages: true\nhooks:\n  on_message: ./hooks/spam.wasm",
                "You are Guard.",
            ),
        )],
        &[],
    );
    std::fs::create_dir_all(pack.join("hooks")).unwrap();
    std::fs::copy(&wasm, pack.join("hooks/spam.wasm")).unwrap();
    // Compiled once into this operator's cache first (inspect does that), so `up` loads it in
    // milliseconds instead of compiling 12 MB within its load deadline on a busy machine.
    let mut inspect = apiary(home.path());
    inspect
        .args(["component", "inspect"])
        .arg(pack.join("hooks/spam.wasm"));
    let r = Run::of(inspect);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let ws = home.path().join("ws");
    let mut up = Up::start_on(
        &relay,
        home.path(),
        &[&pack],
        &["--workspace", ws.to_str().unwrap()],
        &[],
    );
    let spam = up.post("general", "buy cheap SPAM now", &[]);
    let line = up.wait_for(|l| l.starts_with(&format!("dropped guard {spam}")));
    assert!(line.contains("on_message"), "{line}");
    let good = up.post("general", "the hive is calm", &[]);
    up.reply_to("guard", &good);
    let seen = prompts(&up.capture("guard"));
    assert_eq!(seen.len(), 1, "{seen:#?}");
    assert!(seen[0].contains(&good));
    up.stop_ok();
}

#[test]
fn a_python_hook_template_builds_into_a_hook_apiary_runs() {
    let dir = template("hook-python");
    let Some(wasm) = build(Toolchain::Python, &dir, "app.py", "py-spam", "hook") else {
        return;
    };
    let env = Operator::new();
    let r = env.run(&[
        "component",
        "inspect",
        &wasm.display().to_string(),
        "--json",
    ]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert_eq!(r.json()["world"], "hook");
}
