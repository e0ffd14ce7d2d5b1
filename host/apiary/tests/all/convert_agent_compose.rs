//! The agent-compose converter component (guests/converter-agent-compose) end to end through the
//! sandbox: the core roster, the example packages and the contract fixtures of the corpus, round
//! trips both ways, agent-compose's person contract ("Roster package contract") on input and
//! output, a v3 snapshot ("Complete person snapshot"), and hostile KDL.

use crate::common;

use std::path::{Path, PathBuf};

use apiary::builtin::BUILT_GUESTS_DIR;
use apiary::sandbox::Sandbox;
use apiary::sandbox::converter::{ConverterRunner, Report, Request};
use serde_json::{Value, json};

const PACKAGE: &str = "agent-compose-package";
const SNAPSHOT: &str = "agent-compose-snapshot";
const BUZZ: &str = "buzz-pack";
const EXT: &str = "x-agent-compose";

/// The shared test sandbox: refusals are answers, so they do not trip its circuit breaker.
fn sandbox() -> &'static Sandbox {
    common::sandbox()
}

fn runner() -> &'static ConverterRunner {
    static R: std::sync::OnceLock<ConverterRunner> = std::sync::OnceLock::new();
    R.get_or_init(|| {
        let path = Path::new(BUILT_GUESTS_DIR).join("converter_agent_compose.wasm");
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let loaded = sandbox()
            .load("converter_agent_compose", &bytes)
            .expect("load");
        ConverterRunner::new(loaded).expect("converter world")
    })
}

fn person(rel: &str) -> PathBuf {
    common::corpus(&format!("agent-compose-person/{rel}"))
}

/// Like `common::convert`, with converter options.
fn convert_with(
    source: &str,
    target: &str,
    input: &Path,
    options: Vec<(String, String)>,
) -> Result<(Report, tempfile::TempDir), String> {
    let output = tempfile::tempdir().expect("tempdir");
    let request = Request {
        source: source.into(),
        target: target.into(),
        options,
    };
    runner()
        .convert(sandbox(), &request, input, output.path())
        .map(|out| (out.value, output))
        .map_err(|e| e.to_string())
}

fn convert(
    source: &str,
    target: &str,
    input: &Path,
) -> Result<(Report, tempfile::TempDir), String> {
    convert_with(source, target, input, vec![])
}

/// The persona pack validator finds no error.
fn assert_valid_pack(dir: &Path) {
    let report = apiary::pack::validate(dir);
    assert!(!report.has_errors(), "{}", report.render(false));
}

fn manifest(dir: &Path) -> Value {
    let text = std::fs::read_to_string(dir.join(".plugin/plugin.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// `(frontmatter, body)` of a persona file.
fn persona(dir: &Path, name: &str) -> (serde_json::Map<String, Value>, String) {
    let text = std::fs::read_to_string(dir.join(format!("agents/{name}.persona.md"))).unwrap();
    let rest = text.strip_prefix("---\n").unwrap();
    let (fm, body) = rest.split_once("\n---\n").unwrap();
    let fields: Value = serde_yaml_ng::from_str(fm).unwrap();
    (fields.as_object().unwrap().clone(), body.to_string())
}

fn files(dir: &Path) -> Vec<String> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(root, &path, out);
            } else {
                out.push(
                    path.strip_prefix(root)
                        .unwrap()
                        .to_string_lossy()
                        .into_owned(),
                );
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

fn copy_dir(from: &Path, to: &Path) {
    for rel in files(from) {
        let target = to.join(&rel);
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        std::fs::copy(from.join(&rel), target).unwrap();
    }
}

/// The lost findings as `path#field`.
fn lost(report: &Report) -> Vec<String> {
    report
        .lost
        .iter()
        .map(|f| format!("{}#{}", f.path, f.field))
        .collect()
}

#[test]
fn core_roster_becomes_a_valid_pack_with_everything_carried() {
    let (report, out) = convert(PACKAGE, BUZZ, &person("internal/person")).unwrap();
    assert_valid_pack(out.path());
    let m = manifest(out.path());
    let names: Vec<&str> = m["personas"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 7);
    assert_eq!(names[0], "agents/platform.persona.md", "role order kept");
    assert_eq!(names[6], "agents/devrel.persona.md");
    assert_eq!(m["name"], "core");

    let (fields, body) = persona(out.path(), "platform");
    assert_eq!(fields["display_name"], "Developer Platform Engineer");
    assert_eq!(
        fields["description"],
        "Build and land the foundational software the rest of the estate is built on."
    );
    assert!(
        body.contains("# Developer Platform Engineer"),
        "role skill body is the persona body"
    );
    let skills: Vec<&str> = fields["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(
        &skills[..2],
        [
            "./skills/personality-tenacious/",
            "./skills/personality-grounded/"
        ]
    );
    assert!(skills.contains(&"./skills/boundary-modify-live-backend/"));
    assert!(
        out.path()
            .join("skills/personality-tenacious/SKILL.md")
            .is_file()
    );
    assert!(
        !out.path().join("skills/role-platform").exists(),
        "role skills are persona bodies"
    );

    // Identity, colours, seats: in the extension, keyed by persona.
    let ext = &m[EXT];
    assert_eq!(ext["kind"], "roster");
    let platform = &ext["personas"]["platform"];
    let fav = platform["favorite_color"].as_str().unwrap();
    assert!(fav.starts_with('#') && fav.len() == 7, "{fav}");
    assert!(platform["node"].to_string().contains("Angie"));
    assert_eq!(
        ext["personalities"]["tenacious"]["node"]["props"]["color"],
        "#8f8c47"
    );
    assert_eq!(ext["personalities"].as_object().unwrap().len(), 10);
    assert_eq!(ext["boundaries"].as_object().unwrap().len(), 4);

    let codes = common::codes(&report);
    for code in [
        "normalised:carried-in-extension",
        "synthesised:favorite-color-derived",
        "reinterpreted:invariant-as-instructions",
        "synthesised:default-applied",
    ] {
        assert!(
            codes.iter().any(|c| c == code),
            "{code} missing from {codes:?}"
        );
    }
    assert!(
        report.lost.is_empty(),
        "nothing lost reading the roster: {:?}",
        report.lost
    );
}

#[test]
fn every_corpus_item_is_converted_and_valid_or_refused_with_a_reason() {
    let converted = [
        "internal/person",
        "examples/person-profile",
        "testdata/contracts/person-independent",
    ];
    for rel in converted {
        let (report, out) =
            convert(PACKAGE, BUZZ, &person(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"));
        assert_valid_pack(out.path());
        assert!(!report.normalised.is_empty(), "{rel}");
    }
    let refused = [
        ("examples/shared-personality-library", "no roles"),
        ("testdata/contracts", "no person.kdl"),
    ];
    for (rel, why) in refused {
        let err = convert(PACKAGE, BUZZ, &person(rel)).unwrap_err();
        assert!(err.contains(why), "{rel}: {err}");
    }
    // Every fixture file alone as a package root: refused (they are compose requests and source
    // declarations, not packages), never a trap.
    let dir = person("testdata/contracts");
    for entry in std::fs::read_dir(&dir).unwrap().flatten() {
        let path = entry.path();
        if path.extension().is_some_and(|e| e == "kdl") {
            let tmp = tempfile::tempdir().unwrap();
            std::fs::copy(&path, tmp.path().join("person.kdl")).unwrap();
            let err = convert(PACKAGE, BUZZ, tmp.path()).unwrap_err();
            assert!(err.contains("person.kdl"), "{}: {err}", path.display());
        }
    }
    // The example's single-personality role and its library personality are external-package
    // facts, kept and reported, not refused.
    let (report, out) = convert(PACKAGE, BUZZ, &person("examples/person-profile")).unwrap();
    let codes = common::codes(&report);
    assert!(
        codes.contains(&"reinterpreted:personality-external".to_string()),
        "{codes:?}"
    );
    let ext = &manifest(out.path())[EXT];
    assert_eq!(ext["external_personalities"], json!(["shared-care"]));
    assert!(
        ext["files"]["request.kdl"]
            .as_str()
            .unwrap()
            .contains("compose")
    );
    let (fields, _) = persona(out.path(), "caption-review");
    assert_eq!(
        fields["display_name"], "example content guide",
        "seat identity is the display name"
    );
    // The independent package's `briefing` node is the persona body.
    let (_, out) = convert(
        PACKAGE,
        BUZZ,
        &person("testdata/contracts/person-independent"),
    )
    .unwrap();
    let (_, body) = persona(out.path(), "builder");
    assert!(body.contains("You are a builder."));
}

/// package -> pack -> package: same files; every file the same text except the role skills
/// (rendered again from their frontmatter and the persona body), which must read back the same;
/// and the second pack equal to the first.
#[test]
fn packages_round_trip_through_a_persona_pack() {
    for rel in [
        "internal/person",
        "examples/person-profile",
        "testdata/contracts/person-independent",
    ] {
        let input = person(rel);
        let (_, pack1) = convert(PACKAGE, BUZZ, &input).unwrap();
        let (report, back) =
            convert(BUZZ, PACKAGE, pack1.path()).unwrap_or_else(|e| panic!("{rel}: {e}"));
        // Only what the first step synthesised (pack id and version) is lost on the way back.
        for item in lost(&report) {
            assert!(
                item == ".plugin/plugin.json#id" || item == ".plugin/plugin.json#version",
                "{rel}: lost {item}"
            );
        }
        let (a, b) = (files(&input), files(back.path()));
        let a: Vec<&String> = a
            .iter()
            .filter(|f| !f.ends_with("SOURCE.md") && !f.ends_with("LICENSE"))
            .collect();
        assert_eq!(a, b.iter().collect::<Vec<_>>(), "{rel}: file sets differ");
        for file in &b {
            let original = std::fs::read_to_string(input.join(file)).unwrap();
            let again = std::fs::read_to_string(back.path().join(file)).unwrap();
            let role_skill = file.ends_with("SKILL.md")
                && (file.contains("role-") || file.starts_with("roles/"));
            if file.ends_with(".kdl") || role_skill {
                continue; // compared through the second pack below
            }
            assert_eq!(original, again, "{rel}: {file} changed");
        }
        let (_, pack2) = convert(PACKAGE, BUZZ, back.path()).unwrap();
        let (m1, m2) = (manifest(pack1.path()), manifest(pack2.path()));
        assert_eq!(m1, m2, "{rel}: manifests differ");
        for name in m1["personas"].as_array().unwrap() {
            let name = name.as_str().unwrap();
            let one = std::fs::read_to_string(pack1.path().join(name)).unwrap();
            let two = std::fs::read_to_string(pack2.path().join(name)).unwrap();
            assert_eq!(one, two, "{rel}: {name} differs");
        }
    }
}

/// What meadow lacks for a package, supplied by the operator.
fn meadow_overlay() -> String {
    let skill = |name: &str, text: &str| {
        format!(
            "---\nname: personality-{name}\ndescription: The {name} personality.\n---\n\n# {name}\n\n{text}\n"
        )
    };
    json!({
        "name": "meadow",
        "personas": {
            "pip": {"personalities": ["warm", "decisive"], "identity": {"name": "Pip", "pronouns": "they"}},
            "lep": {"personalities": ["decisive"], "identity": {"name": "Lep", "pronouns": "she"}},
            "thistle": {"personalities": ["warm"], "identity": {"name": "Thistle", "pronouns": "he"}},
            "berry": {"personalities": ["warm", "decisive"], "identity": {"name": "Berry", "pronouns": "they"}}
        },
        "personalities": {
            "warm": {"color": "#ff9c79", "motif": "wool", "skill_md": skill("warm", "Welcoming and patient.")},
            "decisive": {"color": "#da6c74", "motif": "cut-paper", "skill_md": skill("decisive", "Short, clear calls.")}
        }
    })
    .to_string()
}

#[test]
fn meadow_round_trips_through_a_package_with_an_overlay() {
    let meadow = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/meadow");
    // Without the overlay there is no meld, colour or pronoun to write: refused, not invented.
    let err = convert(BUZZ, PACKAGE, &meadow).unwrap_err();
    assert!(
        err.contains("breaks the person contract") && err.contains("personality meld is empty"),
        "{err}"
    );
    assert!(err.contains("role pip"), "{err}");
    assert!(err.contains("--option overlay=@FILE"), "{err}");

    // A role skill has at least three paragraphs (the person contract, "Roster package contract"):
    // the bodies are given two more.
    let copy = tempfile::tempdir().unwrap();
    copy_dir(&meadow, copy.path());
    let meadow = copy.path().to_path_buf();
    for name in ["pip", "lep", "thistle", "berry"] {
        let file = meadow.join(format!("agents/{name}.persona.md"));
        let text = std::fs::read_to_string(&file).unwrap();
        let text = format!(
            "{}

It works in the meadow.

It asks when unsure.
",
            text.trim_end()
        );
        std::fs::write(&file, text).unwrap();
    }
    let err = convert(BUZZ, PACKAGE, &meadow).unwrap_err();
    assert!(err.contains("personality meld is empty"), "{err}");

    let (report1, package) = convert_with(
        BUZZ,
        PACKAGE,
        &meadow,
        vec![("overlay".into(), meadow_overlay())],
    )
    .unwrap();
    let pkg = package.path();
    // The kdl crate writes plain strings as bare identifiers (valid KDL v2).
    let root = std::fs::read_to_string(pkg.join("person.kdl")).unwrap();
    assert!(
        root.trim() == "person meadow" || root.trim() == "person \"meadow\"",
        "{root}"
    );
    let lep = std::fs::read_to_string(pkg.join("roles/02-lep.kdl")).unwrap();
    assert!(
        lep.contains("method security-review") || lep.contains("method \"security-review\""),
        "{lep}"
    );
    assert!(
        lep.contains("identity name=Lep pronouns=she") || lep.contains("identity name=\"Lep\""),
        "{lep}"
    );
    assert!(
        pkg.join("definitions/skills/security-review/SKILL.md")
            .is_file()
    );
    assert!(
        pkg.join("definitions/skills/personality-warm/SKILL.md")
            .is_file()
    );
    assert!(pkg.join("definitions/INVARIANT.md").is_file());
    let lost1 = lost(&report1);
    for expected in [
        "agents/pip.persona.md#model",
        "agents/lep.persona.md#triggers",
        ".mcp.json#mcpServers.github",
        ".plugin/plugin.json#defaults",
        "skills/shared#",
    ] {
        assert!(
            lost1.iter().any(|l| l == expected),
            "{expected} not reported lost: {lost1:?}"
        );
    }

    let (_, back) = convert(PACKAGE, BUZZ, pkg).unwrap();
    assert_valid_pack(back.path());
    // Every persona field is back unchanged, or was reported lost.
    for name in ["pip", "lep", "thistle", "berry"] {
        let (before, body_before) = persona(&meadow, name);
        let (after, body_after) = persona(back.path(), name);
        // What the reader adds for the agent (personalities, favourite colour) follows the body.
        assert!(
            body_after.trim().starts_with(body_before.trim()),
            "{name}: body"
        );
        assert!(body_after.contains("Your favourite colour is #"), "{name}");
        for (key, value) in &before {
            let file = format!("agents/{name}.persona.md#{key}");
            if lost1.contains(&file) {
                continue;
            }
            if key == "skills" {
                // The overlay's personality skills join the list; every original entry stays.
                let after = after[key].as_array().unwrap();
                for item in value.as_array().unwrap() {
                    assert!(after.contains(item), "{name}: skill {item} lost");
                }
                continue;
            }
            assert_eq!(
                after.get(key),
                Some(value),
                "{name}.{key} neither kept nor reported lost"
            );
        }
    }
    let (after, _) = persona(back.path(), "lep");
    assert!(
        after["skills"]
            .as_array()
            .unwrap()
            .contains(&json!("./skills/security-review/"))
    );
    let m = manifest(back.path());
    assert_eq!(m["name"], "meadow");
    assert!(
        report1
            .normalised
            .iter()
            .any(|f| f.code == "name-normalised"
                && f.message.contains("Meadow Security Team -> meadow"))
            || m["name"] == "meadow"
    );
}

#[test]
fn contract_violations_are_refused_with_a_reason() {
    let roster = tempfile::tempdir().unwrap();
    copy_dir(&person("internal/person"), roster.path());
    let edit = |rel: &str, from: &str, to: &str| {
        let path = roster.path().join(rel);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains(from), "{rel} lacks {from}");
        std::fs::write(&path, text.replace(from, to)).unwrap();
    };

    // Input: one personality for a core role.
    edit(
        "data/role-platform/role.kdl",
        "personality \"tenacious\" \"grounded\"",
        "personality \"tenacious\"",
    );
    let err = convert(PACKAGE, BUZZ, roster.path()).unwrap_err();
    assert!(
        err.contains("role platform: a core role needs exactly two personalities, found 1"),
        "{err}"
    );
    edit(
        "data/role-platform/role.kdl",
        "personality \"tenacious\"",
        "personality \"tenacious\" \"grounded\"",
    );

    // Input: a colour outside the OKLab band.
    edit(
        "data/personality-tenacious/personality.kdl",
        "#8f8c47",
        "#fafafa",
    );
    let err = convert(PACKAGE, BUZZ, roster.path()).unwrap_err();
    assert!(
        err.contains("personality tenacious: colour #fafafa has OKLab lightness"),
        "{err}"
    );
    edit(
        "data/personality-tenacious/personality.kdl",
        "#fafafa",
        "#8f8c47",
    );

    // Input: role-level identity mixed with a per-seat one.
    edit(
        "data/role-sysadmin/role.kdl",
        "agent \"claude\"",
        "agent \"claude\" name=\"Olaf\" pronouns=\"he\"",
    );
    let err = convert(PACKAGE, BUZZ, roster.path()).unwrap_err();
    assert!(
        err.contains("role-level identity mixed with a per-seat identity"),
        "{err}"
    );
    edit(
        "data/role-sysadmin/role.kdl",
        "agent \"claude\" name=\"Olaf\" pronouns=\"he\"",
        "agent \"claude\"",
    );
    convert(PACKAGE, BUZZ, roster.path()).expect("restored roster converts");

    // Output: a pack whose extension breaks the contract is not written as a package.
    let (_, pack) = convert(PACKAGE, BUZZ, roster.path()).unwrap();
    let path = pack.path().join(".plugin/plugin.json");
    let mut m = manifest(pack.path());
    let args = m[EXT]["personas"]["eval"]["node"]["children"]
        .as_array_mut()
        .unwrap();
    let meld = args
        .iter_mut()
        .find(|c| c["name"] == "personality")
        .unwrap();
    meld["args"] = json!(["empirical"]);
    m[EXT]["personalities"]["warm"]["node"]["props"]["color"] = json!("#101010");
    std::fs::write(&path, serde_json::to_string_pretty(&m).unwrap()).unwrap();
    let err = convert(BUZZ, PACKAGE, pack.path()).unwrap_err();
    assert!(
        err.contains("role eval: a core role needs exactly two personalities, found 1"),
        "{err}"
    );
    assert!(
        err.contains("personality warm: colour #101010 has OKLab lightness"),
        "{err}"
    );
}

fn snapshot_json(favorite: &str) -> Value {
    json!({
        "format": "agent-compose.person-snapshot.v3",
        "schema_version": 3,
        "source": "person:workbench",
        "person": "workbench",
        "role_order": ["builder", "reviewer"],
        "roles": {
            "reviewer": {
                "display_name": "Reviewer", "purpose": "Review one artifact.", "skill": "role-reviewer",
                "skill_source": "workbench:role:reviewer", "skill_digest": "sha256:00",
                "briefing": "You review.", "personalities": ["steady"], "favorite_color": "#5fa87a",
                "seats": [{"key": "chat", "harness": "claude", "name": "rev", "pronouns": "she"}],
                "inspiration": {"id": "", "fit": ""}
            },
            "builder": {
                "display_name": "Builder", "purpose": "Build the thing.", "skill": "role-builder",
                "skill_source": "workbench:role:builder", "skill_digest": "sha256:11",
                "briefing": "You build.\n\nCarefully.", "personalities": ["bright", "steady"],
                "favorite_color": favorite, "identity": {"name": "workbench builder", "pronouns": "they"},
                "seats": [{"harness": "codex", "name": "workbench builder", "pronouns": "they"}],
                "inspiration": {"id": "fixture-builder", "fit": "Evidence-backed delivery."},
                "supported_model_tiers": ["frontier"]
            }
        },
        "personalities": {
            "bright": {"skill": "personality-bright", "color": "#d98e48", "motif": "sunbeam",
                "emblem": {"name": "lantern", "emoji": "🏮", "glyph": "✦"},
                "form": {"silhouette": "beacon", "geometry": "open-rays", "motion": "glowing"},
                "sound_mark": {"timbre": "bell", "contour": "rising", "pulse": "triplet"}, "inspiration": "fixture-builder"},
            "steady": {"skill": "personality-steady", "color": "#5fa87a", "motif": "stone",
                "emblem": {"name": "anchor", "emoji": "⚓", "glyph": "◆"},
                "form": {"silhouette": "cairn", "geometry": "stacked-rounds", "motion": "settling"},
                "sound_mark": {"timbre": "wood-block", "contour": "returning", "pulse": "steady-pair"}, "inspiration": "fixture-builder"}
        },
        "expressions": ["available", "listening", "thinking", "acting", "waiting-for-human", "blocked", "completed", "failed", "offline"],
        "inspiration_order": [],
        "inspirations": {}
    })
}

#[test]
fn a_v3_snapshot_becomes_a_pack_carrying_the_favourite_colour() {
    let dir = tempfile::tempdir().unwrap();
    let write = |v: &Value| {
        std::fs::write(
            dir.path().join("person.json"),
            serde_json::to_string_pretty(v).unwrap() + "\n",
        )
        .unwrap()
    };
    write(&snapshot_json("#b59a5f"));
    let (report, out) = convert(SNAPSHOT, BUZZ, dir.path()).unwrap();
    assert_valid_pack(out.path());
    let m = manifest(out.path());
    assert_eq!(
        m["personas"][0], "agents/builder.persona.md",
        "role_order, not map order"
    );
    assert_eq!(
        m[EXT]["personas"]["builder"]["favorite_color"], "#b59a5f",
        "carried, not recomputed"
    );
    assert_eq!(
        m[EXT]["personas"]["builder"]["identity"]["pronouns"],
        "they"
    );
    assert_eq!(
        m[EXT]["snapshot"]["expressions"].as_array().unwrap().len(),
        9
    );
    let (fields, body) = persona(out.path(), "builder");
    assert_eq!(fields["description"], "Build the thing.");
    // The briefing, then what the agent is told: each personality's skill and colour, the favourite.
    let (briefing, card) = body.split_once("\n## Your personalities\n").unwrap();
    assert_eq!(briefing.trim(), "You build.\n\nCarefully.");
    assert!(
        card.contains("- bright: skill `personality-bright`, colour #d98e48"),
        "{card}"
    );
    assert!(card.contains("Your favourite colour is "), "{card}");
    assert!(common::codes(&report).contains(&"synthesised:skill-body-missing".to_string()));

    // The pack it made cannot become a package: the snapshot has no personality bodies.
    let err = convert(BUZZ, PACKAGE, out.path()).unwrap_err();
    assert!(err.contains("empty body"), "{err}");

    // An illegible carried favourite and a v4 marker are refused.
    write(&snapshot_json("#222222"));
    let err = convert(SNAPSHOT, BUZZ, dir.path()).unwrap_err();
    assert!(
        err.contains("role builder: favourite colour #222222 has OKLab lightness"),
        "{err}"
    );
    let mut v4 = snapshot_json("#b59a5f");
    v4["format"] = json!("agent-compose.person-snapshot.v4");
    write(&v4);
    assert!(
        convert(SNAPSHOT, BUZZ, dir.path())
            .unwrap_err()
            .contains("only agent-compose.person-snapshot.v3")
    );
    write(
        &json!({"format": "agent-compose.person-snapshot.v3", "schema_version": 3, "person": 7, "roles": []}),
    );
    assert!(convert(SNAPSHOT, BUZZ, dir.path()).is_err());
}

#[test]
fn hostile_kdl_is_refused_without_a_trap() {
    let package = |role: &[u8]| {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("person.kdl"), "person \"x\"\n").unwrap();
        std::fs::create_dir_all(dir.path().join("roles")).unwrap();
        std::fs::write(dir.path().join("roles/01-x.kdl"), role).unwrap();
        dir
    };
    // Deep nesting, plain and hidden behind strings and comments the depth scan must see through.
    for text in [
        "role \"x\" ".to_string() + &"a {".repeat(5000) + &"}".repeat(5000),
        "role \"x\" { purpose #\"\"}\"# ".to_string() + &"a { ".repeat(3000) + &"} ".repeat(3001),
        "/* { */ role \"x\" ".to_string() + &"a /* } */ {".repeat(3000) + &"}".repeat(3000),
    ] {
        let dir = package(text.as_bytes());
        let err = convert(PACKAGE, BUZZ, dir.path()).unwrap_err();
        assert!(err.contains("nesting deeper than"), "{err}");
    }
    // Huge strings: over the cap refused; under it, converted or refused, never a trap.
    let huge = format!("role \"x\" {{ purpose \"{}\" }}", "y".repeat(5 << 20));
    assert!(
        convert(PACKAGE, BUZZ, package(huge.as_bytes()).path())
            .unwrap_err()
            .contains("larger than")
    );
    let big = format!(
        "role \"x\" {{ purpose \"{}\"\n personality \"p\"\n }}",
        "y".repeat(900 << 10)
    );
    let _ = convert(PACKAGE, BUZZ, package(big.as_bytes()).path());
    // Bad UTF-8, unterminated strings, KDL v1 booleans, type annotations, odd names.
    for bytes in [
        &b"role \"x\" { purpose \"\xff\xfe\" }"[..],
        b"role \"x\" { purpose \"open",
        b"role \"x\" { flag true }",
        b"(evil)role \"x\" {}",
        b"role \"../../etc\" { personality \"p\" }",
        b"role \"\" {}",
        b"role { }",
    ] {
        let dir = package(bytes);
        assert!(
            convert(PACKAGE, BUZZ, dir.path()).is_err(),
            "{}",
            String::from_utf8_lossy(bytes)
        );
    }
    // A symbolic link anywhere in a package is invalid.
    let dir = package(b"role \"x\" {}");
    std::os::unix::fs::symlink("/etc/passwd", dir.path().join("roles/link.md")).unwrap();
    assert!(
        convert(PACKAGE, BUZZ, dir.path())
            .unwrap_err()
            .contains("symbolic links")
    );

    // Pack -> package: extension paths that leave the tree are not written.
    let (_, pack) = convert(
        PACKAGE,
        BUZZ,
        &person("testdata/contracts/person-independent"),
    )
    .unwrap();
    let mut m = manifest(pack.path());
    m[EXT]["files"] = json!({"../escape.txt": "x", "/abs.txt": "y"});
    m[EXT]["personas"]["builder"]["file"] = json!("../../evil.kdl");
    m[EXT]["personas"]["builder"]["node"] = json!({"name": "role", "args": [{"deep": 1}]});
    std::fs::write(pack.path().join(".plugin/plugin.json"), m.to_string()).unwrap();
    let err = convert(BUZZ, PACKAGE, pack.path()).unwrap_err();
    assert!(err.contains("scalar"), "{err}");
    m[EXT]["personas"]["builder"]["node"] = json!(null);
    m[EXT]["personas"]["builder"]
        .as_object_mut()
        .unwrap()
        .remove("node");
    m[EXT]["personas"]["builder"]["personalities"] = json!(["bright"]);
    m[EXT]["personas"]["builder"]["identity"] = json!({"name": "b", "pronouns": "they"});
    std::fs::write(pack.path().join(".plugin/plugin.json"), m.to_string()).unwrap();
    let (_, out) = convert(BUZZ, PACKAGE, pack.path()).unwrap();
    let written = files(out.path());
    assert!(
        written
            .iter()
            .all(|f| !f.contains("escape") && !f.contains("abs") && !f.contains("evil")),
        "{written:?}"
    );
}

#[test]
fn info_and_detect() {
    let info = runner().info(sandbox()).unwrap().value;
    assert_eq!(info.name, "converter-agent-compose");
    let pairs: Vec<(String, String)> = info
        .conversions
        .iter()
        .map(|c| (c.source.clone(), c.target.clone()))
        .collect();
    for pair in [(PACKAGE, BUZZ), (BUZZ, PACKAGE), (SNAPSHOT, BUZZ)] {
        assert!(
            pairs.contains(&(pair.0.to_string(), pair.1.to_string())),
            "{pair:?}"
        );
    }
    let found = runner()
        .detect(sandbox(), &person("internal/person"))
        .unwrap()
        .value;
    assert!(
        found
            .iter()
            .any(|d| d.format == PACKAGE && d.confidence == 1.0 && d.evidence.contains("roster")),
        "{found:?}"
    );
}
