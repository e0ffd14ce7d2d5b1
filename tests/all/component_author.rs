//! The author's path: `apiary component new` writes a project from a template, the project builds
//! with its one command, and the component passes `component inspect`, its own fixtures under
//! `component test`, and runs the way an operator runs it (`convert`, `hook run`, `trigger test`).
//! Also `component test` on a fixture that does not hold, and `new`'s refusals.

use std::path::{Path, PathBuf};
use std::process::Command;

use apiary_e2e::{Run, apiary, repo_root, run, write_tree};

/// Environment of the outer cargo that must not reach the project's own build.
const CLEARED_ENV: &[&str] = &[
    "CARGO_TARGET_DIR",
    "CARGO_BUILD_TARGET",
    "CARGO_ENCODED_RUSTFLAGS",
    "RUSTFLAGS",
    "RUSTC_WRAPPER",
    "RUSTC_WORKSPACE_WRAPPER",
    "CARGO_MANIFEST_DIR",
    "CARGO_PRIMARY_PACKAGE",
];

/// `component new <kind> <dir>` with the default (Rust) template.
fn new_project(home: &Path, kind: &str, name: &str) -> PathBuf {
    let dir = home.join(name);
    let r = run(
        home,
        &["component", "new", kind, dir.to_str().unwrap(), "--json"],
    );
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let v = r.json();
    assert_eq!(v["kind"], kind);
    assert_eq!(v["lang"], "rust");
    assert_eq!(v["build"], "cargo build --release --target wasm32-wasip2");
    dir
}

/// Builds a generated project with the command `new` printed; returns its component. The lock
/// file of the repository's guests pins the same dependency versions (nothing to resolve), and
/// one target dir under the repository's `target/` serves every run.
fn build(project: &Path, name: &str) -> PathBuf {
    std::fs::copy(
        repo_root().join("guests/Cargo.lock"),
        project.join("Cargo.lock"),
    )
    .unwrap();
    let target = repo_root().join("target/component-templates");
    let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    for var in CLEARED_ENV {
        cmd.env_remove(var);
    }
    let out = cmd
        .current_dir(project)
        .args(["build", "--release", "--target", "wasm32-wasip2"])
        .env("CARGO_TARGET_DIR", &target)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "the generated project did not build:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let wasm = target
        .join("wasm32-wasip2/release")
        .join(format!("{}.wasm", name.replace('-', "_")));
    assert!(wasm.is_file(), "{} is missing", wasm.display());
    wasm
}

fn inspect_world(home: &Path, wasm: &Path) -> String {
    let r = run(
        home,
        &["component", "inspect", wasm.to_str().unwrap(), "--json"],
    );
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    r.json()["world"].as_str().unwrap().to_string()
}

fn component_test(home: &Path, wasm: &Path, fixtures: &Path) -> Run {
    run(
        home,
        &[
            "component",
            "test",
            wasm.to_str().unwrap(),
            "--fixtures",
            fixtures.to_str().unwrap(),
        ],
    )
}

#[test]
fn a_new_rust_converter_builds_passes_its_fixtures_and_converts_once_added() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let project = new_project(h, "converter", "notes-to-md");
    let wasm = build(&project, "notes-to-md");
    assert_eq!(inspect_world(h, &wasm), "converter");

    let fixtures = project.join("fixtures");
    let r = component_test(h, &wasm, &fixtures);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("✓ two-notes"), "{}", r.stdout);

    // Added, it converts like a built-in: the fixture's input gives the fixture's expected tree.
    let r = run(h, &["component", "add", wasm.to_str().unwrap(), "--json"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(r.json()["component"]["name"], "notes-to-md");
    let out = h.join("converted");
    let input = fixtures.join("two-notes/input");
    let r = run(
        h,
        &[
            "convert",
            input.to_str().unwrap(),
            "--from",
            "plain-text",
            "--to",
            "markdown",
            "--out",
            out.to_str().unwrap(),
        ],
    );
    // Exit 2: converted, with a loss (photo.jpg), which the report names.
    assert_eq!(r.code, 2, "{}\n{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("[not-a-note] photo.jpg"), "{}", r.stdout);
    assert_eq!(
        std::fs::read_to_string(out.join("notes/shopping.md")).unwrap(),
        "# shopping\n\nBuy milk.\n"
    );

    // A fixture that no longer holds: the differences are shown and the exit code is 1.
    let expected = fixtures.join("two-notes/expected");
    std::fs::write(expected.join("todo.md"), "# todo\n\nCall Bob.\n").unwrap();
    std::fs::write(expected.join("extra.md"), "x\n").unwrap();
    let case = fixtures.join("two-notes/case.json");
    let text = std::fs::read_to_string(&case).unwrap();
    std::fs::write(&case, text.replace("photo.jpg", "photo.png")).unwrap();
    let r = component_test(h, &wasm, &fixtures);
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    for shown in [
        "✗ two-notes",
        "todo.md differs",
        "- Call Bob.",
        "+ Call Ann.",
        "missing output file extra.md",
        "report.lost: missing",
        "photo.png",
        "report.lost: unexpected",
    ] {
        assert!(r.stdout.contains(shown), "{shown:?} not in:\n{}", r.stdout);
    }
    assert!(r.stderr.contains("0 passed, 1 failed"), "{}", r.stderr);
}

#[test]
fn a_new_rust_hook_builds_keeps_and_drops_as_its_fixtures_say_and_runs_in_a_pack() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let project = new_project(h, "hook", "no-spam");
    let wasm = build(&project, "no-spam");
    assert_eq!(inspect_world(h, &wasm), "hook");
    let r = component_test(h, &wasm, &project.join("fixtures"));
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("✓ spam"), "{}", r.stdout);

    // A fixture expecting the opposite fails, naming the message and the hook's reason.
    let wrong = h.join("wrong");
    write_tree(
        &wrong,
        &[(
            "flip.json",
            r#"{"messages": [{"text": "spam spam", "expect": "keep"}]}"#,
        )],
    );
    let r = component_test(h, &wasm, &wrong);
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    assert!(
        r.stdout.contains("expected Keep, got Drop") && r.stdout.contains("looks like spam"),
        "{}",
        r.stdout
    );

    // In a pack, `hook run` runs it as the harness does: spam is dropped, the rest kept.
    let pack = h.join("pack");
    write_tree(
        &pack,
        &[
            (
                ".plugin/plugin.json",
                r#"{"id": "com.example.nospam", "name": "No spam", "version": "1.0.0", "personas": ["agents/pip.persona.md"]}"#,
            ),
            (
                "agents/pip.persona.md",
                "---\nname: pip\ndisplay_name: Pip\ndescription: tester\nhooks:\n  on_message: ./hooks/no-spam.wasm\n---\nYou are Pip.\n",
            ),
        ],
    );
    std::fs::create_dir_all(pack.join("hooks")).unwrap();
    std::fs::copy(&wasm, pack.join("hooks/no-spam.wasm")).unwrap();
    let hook_run = |text: &str| {
        let mut cmd = apiary(h);
        cmd.args(["hook", "run"]).arg(&pack).args([
            "pip",
            "on_message",
            "--message",
            text,
            "--json",
        ]);
        Run::of(cmd)
    };
    let r = hook_run("hello pip");
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let r = hook_run("SPAM offer");
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("looks like spam"), "{}", r.stdout);
}

#[test]
fn a_new_rust_trigger_builds_and_wakes_as_its_fixtures_say() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let project = new_project(h, "trigger", "keyword-waker");
    let wasm = build(&project, "keyword-waker");
    assert_eq!(inspect_world(h, &wasm), "trigger");
    let r = component_test(h, &wasm, &project.join("fixtures"));
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("✓ keywords"), "{}", r.stdout);
}

#[test]
fn component_new_refuses_unknown_languages_bad_names_and_occupied_directories() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let dir = h.join("x");
    let r = run(
        h,
        &[
            "component",
            "new",
            "hook",
            dir.to_str().unwrap(),
            "--lang",
            "cobol",
        ],
    );
    assert_eq!(r.code, 64, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("no cobol template for a hook; available:")
            && r.stderr.contains("rust"),
        "{}",
        r.stderr
    );
    for name in ["Bad", "../escape", "{{name}}"] {
        let r = run(
            h,
            &[
                "component",
                "new",
                "hook",
                dir.to_str().unwrap(),
                "--name",
                name,
            ],
        );
        assert_eq!(r.code, 64, "{name}: {}", r.stderr);
        assert!(r.stderr.contains("cannot name a component"), "{}", r.stderr);
    }
    write_tree(&dir, &[("keep.txt", "mine\n")]);
    let r = run(h, &["component", "new", "hook", dir.to_str().unwrap()]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("is not empty"), "{}", r.stderr);
    assert_eq!(
        std::fs::read_to_string(dir.join("keep.txt")).unwrap(),
        "mine\n"
    );
    assert!(!dir.join("Cargo.toml").exists());
}
