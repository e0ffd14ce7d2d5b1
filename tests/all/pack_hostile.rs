//! Hostile and malformed packs: each is a clear, located error (or, where the spec allows it, accepted
//! and resolved exactly like the clean pack), and never a panic, a hang or a read outside the pack.
//! `checked` (support::pack) fails any run whose exit code is not 0, 1 or 2 or whose stderr panicked.

use apiary_e2e::mkfifo;
use serde_json::Value;

use crate::support::pack::*;

const A: &str = "agents/a.persona.md";

fn personas_of(pack: &ScratchPack) -> Value {
    pack.inspect(&[])["personas"].clone()
}

// ---------------------------------------------------------------------------------------------
// Paths.

#[test]
fn persona_path_traversal_and_absolute_paths_are_refused() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("x.persona.md"), persona("x", "", "X.")).unwrap();
    let abs = outside.path().join("x.persona.md");
    let text = format!(
        "{{\n  \"id\": \"com.example.x\",\n  \"name\": \"X\",\n  \"version\": \"1.0.0\",\n  \"personas\": [\n    \
         \"{A}\",\n    \"../outside/x.persona.md\",\n    \"agents/../../x.persona.md\",\n    \"{}\"\n  ]\n}}\n",
        abs.display()
    );
    let pack = ScratchPack::with_manifest(&text, &[(A, &persona("a", "", "A."))]);
    let v = pack.validate();
    v.assert_exit(1);
    let found = v.with_code("manifest.persona-path");
    assert_eq!(found.len(), 3, "{:#}", v.json);
    assert_at(found[0], ".plugin/plugin.json", 7);
    assert!(found[0]["message"].as_str().unwrap().contains("`..`"));
    assert_at(found[1], ".plugin/plugin.json", 8);
    assert_at(found[2], ".plugin/plugin.json", 9);
    assert!(found[2]["message"].as_str().unwrap().contains("absolute"));
    // Nothing from outside was read: no finding names the outside persona `x`.
    assert!(!v.json.to_string().contains("The x persona"));
}

#[test]
fn persona_symlinked_out_of_the_pack_is_refused() {
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("evil.persona.md");
    std::fs::write(&target, persona("evil", "temprature: 1\n", "Exfiltrated.")).unwrap();
    let pack = ScratchPack::with_manifest(
        &manifest(&[A, "agents/evil.persona.md"], ""),
        &[(A, &persona("a", "", "A."))],
    );
    std::os::unix::fs::symlink(&target, pack.file("agents/evil.persona.md")).unwrap();
    let v = pack.validate();
    v.assert_exit(1);
    let d = v.one("manifest.persona-path");
    assert_eq!(d["file"], ".plugin/plugin.json");
    assert!(d["line"].is_u64(), "{d:#}");
    assert!(
        d["message"].as_str().unwrap().contains("symbolic link"),
        "{d:#}"
    );
    assert!(
        v.with_code("persona.unknown-key").is_empty(),
        "the outside file was parsed: {:#}",
        v.json
    );

    // A whole `agents/` directory symlinked out of the pack is refused the same way.
    let pack2 = ScratchPack::with_manifest(&manifest(&["agents/evil.persona.md"], ""), &[]);
    std::os::unix::fs::symlink(outside.path(), pack2.file("agents")).unwrap();
    pack2.validate().assert_exit(1).one("manifest.persona-path");
}

#[test]
fn skill_file_symlinked_out_of_the_pack_is_never_read() {
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("secret.md");
    std::fs::write(
        &secret,
        "---\nname: leaked\ndescription: \"s3cret-value\"\nbad: [\n---\n",
    )
    .unwrap();
    let pack = ScratchPack::with_manifest(&manifest(&[A], ""), &[(A, &persona("a", "", "A."))]);
    std::fs::create_dir_all(pack.file("skills/x")).unwrap();
    std::os::unix::fs::symlink(&secret, pack.file("skills/x/SKILL.md")).unwrap();
    let v = pack.validate();
    v.assert_exit(1);
    let d = v.one("skill.path");
    assert_eq!(d["file"], "skills/x/SKILL.md");
    let human = pack.validate_human();
    assert!(
        !human.stderr.contains("bad: ["),
        "a snippet of the outside file was shown:\n{}",
        human.stderr
    );
}

#[test]
fn skill_directory_symlinked_out_of_the_pack_is_refused_not_dropped() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("SKILL.md"), skill("outside", "x")).unwrap();
    let pack = ScratchPack::with_manifest(&manifest(&[A], ""), &[(A, &persona("a", "", "A."))]);
    std::fs::create_dir_all(pack.file("skills")).unwrap();
    std::os::unix::fs::symlink(outside.path(), pack.file("skills/ext")).unwrap();
    let v = pack.validate();
    v.assert_exit(1);
    let d = v.one("skill.path");
    assert_eq!(d["file"], "skills/ext");
    assert!(
        d["message"].as_str().unwrap().contains("symbolic link"),
        "{d:#}"
    );
}

#[test]
fn skill_hook_avatar_and_instruction_paths_cannot_leave_the_pack() {
    let pack = ScratchPack::with_manifest(
        &manifest(&[A], r#""pack_instructions": "/etc/hostname""#),
        &[(
            A,
            &persona(
                "a",
                "avatar: ../../avatar.png\nskills:\n  - ../../skills/x/\nhooks:\n  on_start: /bin/sh\n",
                "A.",
            ),
        )],
    );
    let v = pack.validate();
    v.assert_exit(1);
    let text = pack.read(A);
    assert_at(v.one("persona.avatar"), A, line_of(&text, "avatar:"));
    assert_at(v.one("persona.skill-path"), A, line_of(&text, "skills:"));
    assert_at(v.one("hooks.path"), A, line_of(&text, "on_start:"));
    assert_eq!(v.one("manifest.path")["file"], ".plugin/plugin.json");
}

#[test]
fn persona_that_is_a_directory_is_an_error_at_its_entry() {
    let text = "{\n  \"id\": \"com.example.x\",\n  \"name\": \"X\",\n  \"version\": \"1.0.0\",\n  \
                \"personas\": [\n    \"agents/a.persona.md\"\n  ]\n}\n";
    let pack = ScratchPack::with_manifest(text, &[]);
    std::fs::create_dir_all(pack.file(A)).unwrap();
    let v = pack.validate();
    v.assert_exit(1);
    let d = v.one("manifest.persona-path");
    assert_at(d, ".plugin/plugin.json", 6);
    assert!(d["message"].as_str().unwrap().contains("not a file"));
}

#[test]
fn named_pipes_in_place_of_pack_files_are_refused_without_blocking() {
    let pack = ScratchPack::with_manifest(
        &manifest(&[A, "agents/b.persona.md"], ""),
        &[(A, &persona("a", "", "A."))],
    );
    std::fs::create_dir_all(pack.file("skills/s")).unwrap();
    for rel in [
        "agents/b.persona.md",
        "instructions.md",
        ".mcp.json",
        "skills/s/SKILL.md",
    ] {
        let ok = std::process::Command::new("mkfifo")
            .arg(pack.file(rel))
            .status()
            .expect("mkfifo")
            .success();
        assert!(ok, "mkfifo {rel}");
    }
    // Opening a FIFO for reading blocks until a writer appears: the run must not open any.
    let v = pack.validate();
    v.assert_exit(1);
    assert_eq!(v.with_code("manifest.path").len(), 2, "{:#}", v.json);
    assert!(
        v.one("manifest.persona-path")["message"]
            .as_str()
            .unwrap()
            .contains("not a file")
    );
    assert_eq!(v.one("skill.missing")["file"], "skills/s");
}

// ---------------------------------------------------------------------------------------------
// Size and resource limits.

#[test]
fn ten_megabyte_frontmatter_is_refused_before_parsing() {
    let pack = one_persona_pack("");
    let huge = format!(
        "---\nname: a\ndisplay_name: A\ndescription: d\nnotes: \"{}\"\n---\nBody\n",
        "x".repeat(10 * 1024 * 1024)
    );
    pack.write(A, &huge);
    let v = pack.validate();
    v.assert_exit(1);
    let d = v.one("pack.read");
    assert_eq!(d["file"], A);
    assert!(d["message"].as_str().unwrap().contains("limit"), "{d:#}");

    // A frontmatter over its own limit inside a file under the file limit.
    let big = format!(
        "---\nname: a\ndisplay_name: A\ndescription: d\n{}---\nBody\n",
        "k: v\n".repeat(300_000)
    );
    pack.write(A, &big);
    let v = pack.validate();
    v.assert_exit(1);
    let d = v.one("persona.frontmatter");
    assert!(d["message"].as_str().unwrap().contains("limit"), "{d:#}");
}

#[test]
fn oversized_manifest_is_refused() {
    let pack = one_persona_pack("");
    let padding = " ".repeat(2 * 1024 * 1024);
    pack.write(
        ".plugin/plugin.json",
        &manifest(&[A], &format!("\"description\": \"{padding}\"")),
    );
    let v = pack.validate();
    v.assert_exit(1);
    assert_eq!(v.one("pack.read")["file"], ".plugin/plugin.json");
}

#[test]
fn yaml_alias_bomb_is_refused() {
    let mut yaml = String::from(
        "lol0: &a0 [\"lol\", \"lol\", \"lol\", \"lol\", \"lol\", \"lol\", \"lol\", \"lol\", \"lol\"]\n",
    );
    for i in 1..10 {
        let refs = vec![format!("*a{}", i - 1); 9].join(", ");
        yaml.push_str(&format!("lol{i}: &a{i} [{refs}]\n"));
    }
    let pack = one_persona_pack(&yaml);
    let v = pack.validate();
    v.assert_exit(1);
    let d = v.one("persona.yaml");
    assert_eq!(d["file"], A);
    assert!(d["message"].as_str().unwrap().contains("limit"), "{d:#}");
}

#[test]
fn deeply_nested_yaml_and_json_are_refused_without_overflowing_the_stack() {
    let depth = 50_000;
    let nested = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
    let pack = one_persona_pack(&format!("notes: {nested}\n"));
    pack.validate().assert_exit(1).one("persona.yaml");

    let pack = one_persona_pack("");
    pack.write(
        ".plugin/plugin.json",
        &manifest(&[A], &format!("\"keywords\": {nested}")),
    );
    pack.validate().assert_exit(1).one("manifest.json");
}

// ---------------------------------------------------------------------------------------------
// Encoding and line ends.

#[test]
fn invalid_utf8_is_an_error_naming_the_file() {
    let pack = one_persona_pack("");
    pack.write_bytes(
        A,
        b"---\nname: a\ndisplay_name: \"A\xff\xfe\"\ndescription: d\n---\nBody\n",
    );
    let v = pack.validate();
    v.assert_exit(1);
    let d = v.one("pack.utf8");
    assert_eq!(d["file"], A);
    assert!(d["message"].as_str().unwrap().contains("UTF-8"));

    let pack = one_persona_pack("");
    pack.write_bytes(".plugin/plugin.json", b"{\"id\": \"x\xc3\x28\"}");
    let v = pack.validate();
    v.assert_exit(1);
    assert_eq!(v.one("pack.utf8")["file"], ".plugin/plugin.json");
}

/// The files of a pack that exercises every text file the resolver reads.
fn full_pack_files() -> Vec<(&'static str, String)> {
    vec![
        (
            ".plugin/plugin.json",
            manifest(
                &[A, "agents/b.persona.md"],
                "\"defaults\": {\n    \"model\": \"anthropic:claude-sonnet-4\",\n    \"subscribe\": [\"#general\"]\n  }",
            ),
        ),
        (
            A,
            persona(
                "a",
                "skills:\n  - ./skills/s/\ntriggers:\n  keywords:\n    - deploy\n    - ship\n",
                "You are A.\n\n## Rules\n- one\n- two\n\n---\n\nAfter a rule.",
            ),
        ),
        (
            "agents/b.persona.md",
            persona("b", "", "You are B."),
        ),
        ("skills/s/SKILL.md", skill("s", "A skill")),
        ("skills/t/SKILL.md", skill("t", "Another")),
        ("instructions.md", "# Norms\n\nBe brief.\nCite sources.\n".into()),
        (
            ".mcp.json",
            "{\n  \"mcpServers\": {\n    \"fs\": { \"command\": \"fs-mcp\", \"args\": [\"/w\"] }\n  }\n}\n".into(),
        ),
    ]
}

fn write_pack(transform: impl Fn(&str, &str) -> Vec<u8>) -> ScratchPack {
    let pack = ScratchPack::new(&[]);
    for (rel, text) in full_pack_files() {
        pack.write_bytes(rel, &transform(rel, &text));
    }
    pack
}

#[test]
fn crlf_line_ends_resolve_identically_to_lf() {
    let lf = write_pack(|_, t| t.as_bytes().to_vec());
    let crlf = write_pack(|_, t| t.replace('\n', "\r\n").into_bytes());
    lf.validate().assert_clean();
    crlf.validate().assert_clean();
    let (a, b) = (personas_of(&lf), personas_of(&crlf));
    assert_eq!(a, b, "CRLF pack resolves differently");
    assert!(a[0]["system_prompt"].as_str().unwrap().contains(
        "- two\n\n---\n\nAfter a rule.\n\n---\n# Team Instructions\n# Norms\n\nBe brief."
    ));
    assert_eq!(
        a[0]["triggers"]["keywords"],
        serde_json::json!(["deploy", "ship"])
    );
}

#[test]
fn crlf_diagnostics_still_point_at_the_right_line() {
    let pack = one_persona_pack("");
    pack.write(
        A,
        &persona("a", "model: x\ntemprature: 0.3\n", "A.").replace('\n', "\r\n"),
    );
    let v = pack.validate();
    v.assert_exit(1);
    assert_at(v.one("persona.unknown-key"), A, 6);
}

#[test]
fn byte_order_marks_are_accepted_with_a_warning_and_resolve_the_same() {
    let plain = write_pack(|_, t| t.as_bytes().to_vec());
    let bom = write_pack(|rel, t| {
        let mut b = if matches!(
            rel,
            "agents/a.persona.md" | ".plugin/plugin.json" | "instructions.md" | ".mcp.json"
        ) {
            "\u{feff}".as_bytes().to_vec()
        } else {
            vec![]
        };
        b.extend_from_slice(t.as_bytes());
        b
    });
    let v = bom.validate();
    v.assert_exit(2);
    let persona_bom = v.one("persona.bom");
    assert_eq!(persona_bom["severity"], "warning");
    assert_eq!(persona_bom["file"], A);
    let mut files: Vec<_> = v
        .with_code("pack.bom")
        .iter()
        .map(|d| d["file"].as_str().unwrap().to_string())
        .collect();
    files.sort();
    assert_eq!(
        files,
        [".mcp.json", ".plugin/plugin.json", "instructions.md"]
    );
    assert_eq!(
        personas_of(&plain),
        personas_of(&bom),
        "BOM pack resolves differently"
    );
}

#[test]
fn bom_persona_diagnostics_point_at_the_right_line() {
    let pack = one_persona_pack("");
    pack.write(
        A,
        &format!("\u{feff}{}", persona("a", "temprature: 0.3\n", "A.")),
    );
    let v = pack.validate();
    v.assert_exit(1);
    assert_at(v.one("persona.unknown-key"), A, 5);
}

// ---------------------------------------------------------------------------------------------
// Frontmatter delimiters.

#[test]
fn missing_closing_delimiter_is_an_error_with_a_snippet() {
    let pack = one_persona_pack("");
    pack.write(
        A,
        "---\nname: a\ndisplay_name: A\ndescription: d\n\nYou are A.\n",
    );
    let v = pack.validate();
    v.assert_exit(1);
    let d = v.one("persona.frontmatter");
    assert_at(d, A, 1);
    assert!(d["message"].as_str().unwrap().contains("never closed"));
    let human = pack.validate_human();
    assert!(
        human.stderr.contains("1 │ ---"),
        "snippet:\n{}",
        human.stderr
    );

    pack.write(A, "name: a\ndisplay_name: A\ndescription: d\n");
    let v = pack.validate();
    v.assert_exit(1);
    assert!(
        v.one("persona.frontmatter")["message"]
            .as_str()
            .unwrap()
            .contains("does not start with")
    );

    pack.write(A, "");
    pack.validate().assert_exit(1).one("persona.frontmatter");
}

#[test]
fn dashes_followed_by_junk_do_not_close_the_frontmatter() {
    let pack = one_persona_pack("");
    // `---junk` is not a closing delimiter, so this frontmatter is never closed.
    pack.write(
        A,
        "---\nname: a\ndisplay_name: A\ndescription: d\n---junk\nYou are A.\n",
    );
    let v = pack.validate();
    v.assert_exit(1);
    assert!(
        v.one("persona.frontmatter")["message"]
            .as_str()
            .unwrap()
            .contains("never closed")
    );

    // Inside a block scalar it is just text; a `---` in the body is body.
    pack.write(
        A,
        "---\nname: a\ndisplay_name: A\ndescription: |\n  line one\n  ---junk\n---\nYou are A.\n\n---\n\nMore.\n",
    );
    pack.validate().assert_clean();
    let p = pack.persona("a");
    assert_eq!(p["identity"]["description"], "line one\n---junk\n");
    assert_eq!(p["system_prompt"], "You are A.\n\n---\n\nMore.");

    // `--- ` with trailing spaces still closes.
    pack.write(
        A,
        "---\nname: a\ndisplay_name: A\ndescription: d\n---   \nYou are A.\n",
    );
    pack.validate().assert_clean();
}

#[test]
fn frontmatter_that_is_not_a_mapping_is_an_error() {
    let pack = one_persona_pack("");
    pack.write(A, "---\n- name: a\n- display_name: A\n---\nBody\n");
    let v = pack.validate();
    v.assert_exit(1);
    assert_at(v.one("persona.yaml"), A, 2);

    pack.write(A, "---\n---\nBody\n");
    let v = pack.validate();
    v.assert_exit(1);
    assert_eq!(v.with_code("persona.required").len(), 3, "{:#}", v.json);
}

#[test]
fn yaml_syntax_error_is_located_in_the_file() {
    let pack = one_persona_pack("");
    pack.write(
        A,
        "---\nname: a\ndisplay_name: A\ndescription: d\nsubscribe: [\"#a\", \"#b\"\n---\nBody\n",
    );
    let v = pack.validate();
    v.assert_exit(1);
    let d = v.one("persona.yaml");
    assert_eq!(d["file"], A);
    let line = d["line"].as_u64().unwrap();
    assert!((5..=6).contains(&line), "{d:#}");
    assert!(
        !d["message"].as_str().unwrap().contains(" at line "),
        "the parser's frontmatter-relative position contradicts the file line: {d:#}"
    );
}

// ---------------------------------------------------------------------------------------------
// Duplicates and emptiness.

#[test]
fn duplicate_yaml_keys_are_an_error_at_the_repeat() {
    let pack = one_persona_pack("model: a\ntemperature: 0.2\nmodel: b\n");
    let v = pack.validate();
    v.assert_exit(1);
    let d = v.one("persona.yaml");
    assert_at(d, A, 7);
    assert!(d["message"].as_str().unwrap().contains("model"), "{d:#}");

    let pack =
        one_persona_pack("triggers:\n  mentions: true\n  keywords: [x]\n  mentions: false\n");
    let v = pack.validate();
    v.assert_exit(1);
    let d = v.one("persona.yaml");
    assert_at(d, A, 8);
    assert!(d["message"].as_str().unwrap().contains("mentions"), "{d:#}");
}

#[test]
fn duplicate_json_keys_in_the_manifest_do_not_crash() {
    // serde_json keeps the last value; the pack must still load or fail cleanly.
    let pack = one_persona_pack("");
    pack.write(
        ".plugin/plugin.json",
        r#"{"id": "com.example.x", "id": "com.example.y", "name": "X", "version": "1.0.0", "personas": ["agents/a.persona.md"]}"#,
    );
    let v = pack.validate();
    assert!(matches!(v.code, 0 | 1), "{:#}", v.json);
}

#[test]
fn duplicate_persona_names_and_the_same_file_twice_are_errors() {
    let pack = ScratchPack::with_manifest(&manifest(&[A, A], ""), &[(A, &persona("a", "", "A."))]);
    let v = pack.validate();
    v.assert_exit(1);
    v.one("pack.duplicate-persona");
}

#[test]
fn zero_personas_is_an_error() {
    let pack = ScratchPack::with_manifest(&manifest(&[], ""), &[]);
    pack.validate().assert_exit(1).one("pack.no-personas");
    let run = pack.inspect_run(pack.cmd(), &[]);
    assert_eq!(run.code, 1);
}

// ---------------------------------------------------------------------------------------------
// Wrong shapes and types.

#[test]
fn manifest_that_is_a_json_array_is_an_error() {
    let pack = one_persona_pack("");
    pack.write(".plugin/plugin.json", "[\"agents/a.persona.md\"]\n");
    let v = pack.validate();
    v.assert_exit(1);
    let d = v.one("manifest.shape");
    assert_eq!(d["file"], ".plugin/plugin.json");
    assert!(d["message"].as_str().unwrap().contains("object"));
}

#[test]
fn wrong_manifest_types_are_errors() {
    let text = "{\n  \"id\": 7,\n  \"name\": \"X\",\n  \"version\": \"1.0.0\",\n  \"personas\": \"agents/a.persona.md\",\n  \
                \"defaults\": [\"model\"]\n}\n";
    let pack = ScratchPack::with_manifest(text, &[(A, &persona("a", "", "A."))]);
    let v = pack.validate();
    v.assert_exit(1);
    let lines: Vec<u64> = v
        .with_code("manifest.type")
        .iter()
        .map(|d| d["line"].as_u64().unwrap())
        .collect();
    assert!(lines.contains(&2), "id: {:#}", v.json);
    assert!(lines.contains(&5), "personas: {:#}", v.json);
    assert!(lines.contains(&6), "defaults: {:#}", v.json);
}

#[test]
fn wrong_behavioural_types_are_errors() {
    for (yaml, key) in [
        ("temperature: \"0.7\"\n", "temperature"),
        ("subscribe: \"#general\"\n", "subscribe"),
        ("triggers:\n  mentions: \"true\"\n", "mentions"),
        ("max_context_tokens: -128000\n", "max_context_tokens"),
    ] {
        let pack = one_persona_pack(yaml);
        let v = pack.validate();
        assert_eq!(v.code, 1, "{yaml}");
        let d = v.one("persona.type");
        assert_at(d, A, line_of(&pack.read(A), &format!("{key}:")));
    }
}

#[test]
fn engine_newer_than_apiary_is_refused() {
    let pack = ScratchPack::with_manifest(
        &manifest(&[A], r#""engines": { "buzz": ">=1000.0.0" }"#),
        &[(A, &persona("a", "", "A."))],
    );
    pack.validate().assert_exit(1).one("manifest.engine");
    let run = pack.inspect_run(pack.cmd(), &[]);
    assert_eq!(run.code, 1, "inspect refuses a pack for a newer engine");
}

#[test]
fn sse_transport_and_literal_secrets() {
    let pack = one_persona_pack(
        "mcp_servers:\n  - name: api\n    command: api-mcp\n    env:\n      API_KEY: \"sk-live-abcdef\"\n",
    );
    pack.write(
        ".mcp.json",
        r#"{ "mcpServers": { "old": { "type": "SSE", "url": "http://localhost:9000/sse" } } }"#,
    );
    let v = pack.validate();
    v.assert_exit(1);
    assert_eq!(v.one("mcp.sse")["file"], ".mcp.json");
    let secret = v.one("mcp.literal-secret");
    assert_at(secret, A, 9);
    assert!(
        !v.json.to_string().contains("sk-live-abcdef"),
        "the secret itself is echoed in the report"
    );
}

// ---------------------------------------------------------------------------------------------
// Skill names become directory names (issue 17, finding 2).

#[test]
fn unsafe_skill_names_are_located_errors_and_nothing_is_built() {
    let home = tempfile::tempdir().unwrap();
    let outside = home.path().join("escaped");
    let pack = ScratchPack::with_manifest(&manifest(&[A], ""), &[(A, &persona("a", "", "A."))]);
    let names = [
        "../../../../../escaped".to_string(),
        outside.display().to_string(),
        "Review".to_string(),
        "a/b".to_string(),
        "café".to_string(),
        "-rf".to_string(),
        "two--hyphens".to_string(),
        "x".repeat(65),
    ];
    for (i, name) in names.iter().enumerate() {
        pack.write(
            &format!("skills/s{i}/SKILL.md"),
            &format!("---\ndescription: d\nname: \"{name}\"\n---\nbody\n"),
        );
    }
    // The longest valid key, and ordinary ones, are accepted.
    pack.write(
        &format!("skills/{}/SKILL.md", "y".repeat(64)),
        &format!("---\nname: {}\ndescription: d\n---\n", "y".repeat(64)),
    );
    pack.write(
        "skills/code-review-2/SKILL.md",
        "---\nname: code-review-2\ndescription: d\n---\n",
    );
    let v = pack.validate();
    v.assert_exit(1);
    let found = v.with_code("skill.name");
    assert_eq!(found.len(), names.len(), "{:#}", v.json);
    for (i, d) in found.iter().enumerate() {
        // Sorted by file: s0..s7.
        assert_at(d, &format!("skills/s{i}/SKILL.md"), 3);
        assert!(d["help"].as_str().unwrap().contains("lowercase"), "{d:#}");
    }
    // `pack build` validates first: no archive carries such a name to an install.
    let mut build = pack.cmd();
    build
        .args(["pack", "build"])
        .arg(pack.path())
        .arg("--output")
        .arg(home.path().join("x.buzzpack"));
    let run = apiary_e2e::Run::of(build);
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    assert!(!home.path().join("x.buzzpack").exists());
    assert!(!outside.exists());
}

// ---------------------------------------------------------------------------------------------
// Special files the operator names (issue 17, finding 11).

#[test]
fn an_overrides_file_that_is_a_fifo_or_a_directory_is_refused_promptly() {
    let pack = one_persona_pack("");
    let fifo = pack.home.path().join("overrides.fifo");
    mkfifo(&fifo);
    let dir = pack.home.path().join("overrides.d");
    std::fs::create_dir(&dir).unwrap();
    for (path, kind) in [(&fifo, "FIFO"), (&dir, "directory")] {
        // As a flag and through $APIARY_OVERRIDES.
        let mut by_flag = pack.cmd();
        by_flag
            .args(["pack", "inspect"])
            .arg(pack.path())
            .arg("--overrides")
            .arg(path);
        let mut by_env = pack.cmd();
        by_env
            .args(["pack", "inspect"])
            .arg(pack.path())
            .env("APIARY_OVERRIDES", path);
        for cmd in [by_flag, by_env] {
            let run = checked(apiary_e2e::Run::bounded(cmd, 20));
            assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
            assert!(
                run.stderr.contains(kind) && run.stderr.contains("not a regular file"),
                "{}",
                run.stderr
            );
        }
    }
}
