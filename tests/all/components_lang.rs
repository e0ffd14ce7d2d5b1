//! Components in Python and JavaScript, built here from the templates in
//! `host/apiary/templates/` with componentize-py and componentize-js at their defaults (see
//! support/toolchains.rs): the Python converter and the JS converter (a project from `apiary
//! component new converter --lang js`) are added and used by `apiary convert`, the JS hook runs
//! under `apiary up` on messages after `apiary trust --hooks` compiled it ahead. Plus the
//! capability manifest at `component add` and `component inspect`, a JS converter that tries to
//! leave its directories, and components that are refused at load: one importing an interface
//! apiary does not offer.

use apiary_e2e::{Operator, Run, apiary, guest, write_tree};

use crate::support::live::relays::{Kind, Options, TestRelay};
use crate::support::live::{Up, persona, prompts, write_pack};
use crate::support::toolchains::{Toolchain, build, build_project, template};

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

/// `apiary component new converter --lang js` into `<env>/<name>`: the project's directory.
fn js_converter_project(env: &Operator, name: &str) -> std::path::PathBuf {
    let dir = env.path(name);
    let r = env.run(&[
        "component",
        "new",
        "converter",
        "--lang",
        "js",
        &dir.display().to_string(),
        "--json",
    ]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let v = r.json();
    assert_eq!(v["build"], "npm install && npm run build");
    let files: Vec<&str> = v["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap())
        .collect();
    for f in [
        "converter.js",
        "apiary-fs.js",
        "package.json",
        "wit/world.wit",
        "wit/deps/apiary-plugin@0.1.0/converter.wit",
        "wit/deps/wasi-filesystem@0.2.12/types.wit",
        "fixtures/two-personas/case.json",
    ] {
        assert!(files.contains(&f), "{f} missing from {files:?}");
    }
    dir
}

#[test]
fn a_js_converter_from_component_new_is_added_and_converts_a_pack() {
    let env = Operator::new();
    let dir = js_converter_project(&env, "js-cards");
    let Some(wasm) = build_project(Toolchain::Js, &dir, "converter.js", "js-cards", "converter")
    else {
        return;
    };
    let file = wasm.display().to_string();
    // Added the way the guide says, compiled into the cache with progress shown.
    let r = env.run(&["component", "add", &file]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stdout
            .contains("added js-cards 0.1.0 (buzz-pack -> persona-cards"),
        "{}",
        r.stdout
    );
    // Its own fixtures pass (what `npm run build` then `component test` shows an author).
    let fixtures = dir.join("fixtures").display().to_string();
    let r = env.run(&["component", "test", &file, "--fixtures", &fixtures]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);

    // On a real pack: a card per persona, an index, and what a card has no place for reported.
    let pack = apiary_e2e::repo_root().join("examples/meadow");
    let out = env.path("cards");
    let r = env.run(&[
        "convert",
        &pack.display().to_string(),
        "--to",
        "persona-cards",
        "--out",
        &out.display().to_string(),
        "--json",
    ]);
    assert_eq!(r.code, 2, "converted with losses: {}{}", r.stdout, r.stderr);
    let v = r.json();
    assert_eq!(v["converters"][0]["name"], "js-cards", "{v:#}");
    assert_eq!(v["converters"][0]["origin"]["kind"], "added");
    let lost = v["report"]["lost"].as_array().unwrap();
    assert!(
        lost.iter().any(|f| f["path"] == "agents/pip.persona.md"
            && f["field"] == "subscribe"
            && f["code"] == "not-on-a-card"),
        "{v:#}"
    );
    let index = std::fs::read_to_string(out.join("index.md")).unwrap();
    for name in ["berry", "lep", "pip", "thistle"] {
        assert!(index.contains(&format!("(cards/{name}.md)")), "{index}");
    }
    let pip = std::fs::read_to_string(out.join("cards/pip.md")).unwrap();
    assert!(pip.starts_with("# Pip 🌱\n\nOrchestrates reviews"), "{pip}");
    assert!(
        pip.contains("## Prompt\n\nYou are Pip, the coordinator"),
        "{pip}"
    );
}

/// A JS converter that tries, through the same WASI filesystem imports, to write its input, read
/// past its directories, and find other preopens: every attempt is reported in its report.
const PROWLER_JS: &str = r#"
import { getDirectories } from "wasi:filesystem/preopens@0.2.12";
import { dir, readText, writeText } from "./apiary-fs.js";

function attempt(what, f) {
  try {
    f();
    return { code: "escaped", path: what, field: "", message: "it worked" };
  } catch (e) {
    return { code: "refused", path: what, field: "", message: String(e) };
  }
}

export const formatConverter = {
  info() {
    return { name: "js-prowler", version: "0.1.0", conversions: [{ source: "buzz-pack", target: "prowl" }] };
  },
  detect() {
    return [];
  },
  convert(request) {
    const input = dir("/input");
    const output = dir("/output");
    const tries = [
      attempt("write-input", () => writeText(input, "planted.txt", "x")),
      attempt("read-above-output", () => readText(output, "../../../../etc/hostname")),
      attempt("read-absolute", () => readText(input, "/etc/hostname")),
      attempt("write-above-output", () => writeText(output, "../escaped.txt", "x")),
      attempt("root-preopen", () => dir("/")),
    ];
    writeText(output, "preopens.txt", getDirectories().map(([, at]) => at).sort().join(","));
    return { lost: tries, synthesised: [], normalised: [], reinterpreted: [] };
  },
};
"#;

#[test]
fn a_js_converter_cannot_write_its_input_or_leave_its_directories() {
    let env = Operator::new();
    let dir = js_converter_project(&env, "js-prowler");
    std::fs::write(dir.join("converter.js"), PROWLER_JS).unwrap();
    let Some(wasm) = build_project(
        Toolchain::Js,
        &dir,
        "converter.js",
        "js-prowler",
        "converter",
    ) else {
        return;
    };
    let r = env.run(&["component", "add", &wasm.display().to_string()]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let pack = env.path("pack");
    write_pack(
        &pack,
        "com.example.prowled",
        &[("bee", &persona("bee", "", "You are Bee."))],
        &[],
    );
    let before = apiary_e2e::snapshot(&pack, &[]);
    let out = env.path("out/prowl");
    let r = env.run(&[
        "convert",
        &pack.display().to_string(),
        "--from",
        "buzz-pack",
        "--to",
        "prowl",
        "--out",
        &out.display().to_string(),
        "--json",
    ]);
    assert_eq!(r.code, 2, "{}{}", r.stdout, r.stderr);
    let v = r.json();
    let tries = v["report"]["lost"].as_array().unwrap();
    assert_eq!(tries.len(), 5, "{v:#}");
    for t in tries {
        assert_eq!(t["code"], "refused", "{t:#}");
    }
    let preopens = std::fs::read_to_string(out.join("preopens.txt")).unwrap();
    assert_eq!(preopens, "/input,/output");
    assert_eq!(
        apiary_e2e::snapshot(&pack, &[]),
        before,
        "the input changed"
    );
    assert!(!env.path("out/escaped.txt").exists());
    assert!(!out.join("planted.txt").exists());
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
    assert_eq!(v["error"]["code"], "link", "{v:#}");
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
    // The project `component new hook --lang js` writes, built as its package.json says.
    let env = Operator::new();
    let dir = env.path("js-spam");
    let r = env.run(&[
        "component",
        "new",
        "hook",
        "--lang",
        "js",
        &dir.display().to_string(),
        "--json",
    ]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert_eq!(r.json()["build"], "npm install && npm run build");
    let Some(wasm) = build_project(Toolchain::Js, &dir, "hook.js", "js-spam", "hook") else {
        return;
    };
    // Offered as a converter, it is refused for the world it really has.
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
    // `trust --hooks` compiles it into this operator's cache, so `up` loads it in milliseconds
    // instead of compiling 12 MB before the persona starts.
    let mut trust = apiary(home.path());
    trust
        .current_dir(home.path())
        .args(["trust", "./pack", "--hooks", "--yes", "--json", "--root"])
        .arg(home.path().join("root"));
    let r = Run::of(trust);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let v = r.json();
    assert_eq!(v["compiled"][0]["path"], "hooks/spam.wasm", "{v:#}");
    assert_eq!(v["compiled"][0]["outcome"], "compiled", "{v:#}");
    assert!(
        v["compiled"][0]["bytes"].as_u64().unwrap() > 10_000_000,
        "{v:#}"
    );
    let ws = home.path().join("ws");
    let mut up = Up::start_on(
        &relay,
        home.path(),
        &[&pack],
        &["--workspace", ws.to_str().unwrap()],
        &[],
    );
    assert!(
        !up.seen.iter().any(|l| l.starts_with("compiling")),
        "compiled again at start: {:#?}",
        up.seen
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
