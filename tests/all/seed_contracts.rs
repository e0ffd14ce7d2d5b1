//! The contracts of the external formats enforced through the binary (issue 19 item 5), on packs
//! written here in those formats' shapes: DuDuClaw expert packs (the DuDuClaw Expert Pack Format
//! v1.0: §3 expert.toml for the required keys, `[expert.requires]`, the recommended prompts and
//! the `trigger` hint, §2 Layout for the wiki pages, §6 Versioning & stability for the format
//! marker) and agent-compose person packages (agent-compose's person contract, "Roster package
//! contract").

use std::path::Path;

use apiary_e2e::{Operator, Run, write_tree};
use serde_json::Value;

/// `apiary <args> --root <home>/root`.
fn in_root(env: &Operator, args: &[&str]) -> Run {
    let root = env.path("root").display().to_string();
    let mut all = args.to_vec();
    all.extend(["--root", &root]);
    env.run(&all)
}

/// A one-agent expert pack at `<home>/<dir>` with `expert` as its `[expert]` keys (and any further
/// tables after them).
fn expert_pack(env: &Operator, dir: &str, expert: &str, extra: &[(&str, &str)]) -> String {
    let root = env.path(dir);
    let manifest = format!(
        "{expert}\n\n[[expert.agents]]\nname = \"desk\"\nrole = \"main\"\ndisplay_name = \"Desk\"\n"
    );
    let mut files = vec![
        ("expert.toml", manifest.as_str()),
        ("agents/desk/soul.md", "# Desk\n\nYou greet visitors.\n"),
    ];
    files.extend_from_slice(extra);
    write_tree(&root, &files);
    root.display().to_string()
}

/// Nothing was installed: no pack directory, no lock entry.
fn assert_nothing_installed(env: &Operator) {
    let list = in_root(env, &["list", "--json"]);
    assert_eq!(list.code, 0, "{}", list.stderr);
    assert_eq!(
        list.json()["packs"],
        serde_json::json!([]),
        "{}",
        list.stdout
    );
}

#[test]
fn an_expert_pack_without_name_or_description_is_refused_at_install() {
    let env = Operator::new();
    let cases = [
        (
            "no-name",
            "[expert]\ndescription = \"Front desk\"\nversion = \"1.0.0\"",
            "`name`",
        ),
        (
            "no-description",
            "[expert]\nname = \"front-desk\"\nversion = \"1.0.0\"",
            "`description`",
        ),
        (
            "blank-both",
            "[expert]\nname = \"  \"\ndescription = \"\"\nversion = \"1.0.0\"",
            "`name` and `description`",
        ),
        // A name with nothing an install id can use would install under a made-up id.
        (
            "cjk-name",
            "[expert]\nname = \"前台\"\ndescription = \"Front desk\"\nversion = \"1.0.0\"",
            "expert.name",
        ),
    ];
    for (dir, expert, needle) in cases {
        let src = expert_pack(&env, dir, expert, &[]);
        let r = in_root(&env, &["install", &src]);
        assert_eq!(r.code, 1, "{dir}: {}{}", r.stdout, r.stderr);
        assert!(
            r.stderr.contains("expert.toml") && r.stderr.contains(needle),
            "{dir}: {}",
            r.stderr
        );
        assert!(r.stderr.contains("nothing was installed"), "{}", r.stderr);
        assert_nothing_installed(&env);
    }
    // `convert` stays lenient: it synthesises the id and says so.
    let src = env.path("no-name").display().to_string();
    let r = env.run(&["convert", &src, "--to", "buzz-pack", "--json"]);
    let v = r.json();
    let synthesised = v["report"]["synthesised"].to_string();
    assert!(synthesised.contains("name-synthesised"), "{v}");
}

#[test]
fn an_unknown_major_format_marker_is_refused_naming_it() {
    let env = Operator::new();
    let cases = [
        (
            "table-v2",
            "[expert-v2]\nname = \"desk\"\ndescription = \"d\"\nversion = \"2.0.0\"\n[expert]",
            "[expert-v2]",
        ),
        (
            "format-key",
            "format = \"expert-pack/3\"\n[expert]\nname = \"desk\"\ndescription = \"d\"\nversion = \"1.0.0\"",
            "format = \"expert-pack/3\"",
        ),
    ];
    for (dir, expert, marker) in cases {
        let src = expert_pack(&env, dir, expert, &[]);
        let r = in_root(&env, &["install", &src]);
        assert_eq!(r.code, 1, "{dir}: {}{}", r.stdout, r.stderr);
        assert!(
            r.stderr.contains(marker) && r.stderr.contains("expert.toml"),
            "{dir}: {}",
            r.stderr
        );
        assert_nothing_installed(&env);
        let r = env.run(&["convert", &src, "--to", "buzz-pack", "--json"]);
        assert_eq!(r.code, 1, "{dir}: {}{}", r.stdout, r.stderr);
        let message = r.json()["error"]["message"].to_string();
        assert!(message.contains("does not know"), "{message}");
    }
    // A v1 marker is fine.
    let src = expert_pack(
        &env,
        "v1",
        "format = \"expert-pack/1.0\"\n[expert]\nname = \"desk\"\ndescription = \"d\"\nversion = \"1.0.0\"",
        &[],
    );
    let r = in_root(&env, &["install", &src]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
}

const DECLARING: &str = "[expert]
name = \"needs-team\"
description = \"A pack that declares what it needs\"
version = \"1.0.0\"

[expert.prompts]
recommended = [\"Book a visit for Tuesday\", \"What do you charge?\"]

[expert.requires]
env = [\"APIARY_SEED_SET\", \"APIARY_SEED_UNSET\"]
bins = [\"sh\", \"apiary-no-such-binary\"]";

#[test]
fn requires_and_recommended_prompts_are_shown_before_install_and_in_list() {
    let env = Operator::new();
    let src = expert_pack(&env, "needs", DECLARING, &[]);
    let root = env.path("root").display().to_string();
    let mut cmd = env.command();
    cmd.args(["install", &src, "--root", &root])
        .env("APIARY_SEED_SET", "1")
        .env_remove("APIARY_SEED_UNSET");
    let r = Run::of(cmd);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let err = &r.stderr;
    for line in [
        "requires variables: APIARY_SEED_SET, APIARY_SEED_UNSET (not set)",
        "requires binaries: sh, apiary-no-such-binary (not on PATH)",
        "nothing is installed or fetched",
        "try: Book a visit for Tuesday",
        "try: What do you charge?",
    ] {
        assert!(err.contains(line), "{line:?} not in:\n{err}");
    }
    // Shown before the install happens, not after.
    let shown = err.find("requires variables").unwrap();
    assert!(shown < err.find("Installed needs-team").unwrap(), "{err}");

    // `list` shows them under the pack, and `list --json` carries them.
    let list = in_root(&env, &["list"]);
    assert_eq!(list.code, 0, "{}", list.stderr);
    assert!(
        list.stdout.contains("requires binaries: sh"),
        "{}",
        list.stdout
    );
    assert!(
        list.stdout.contains("try: What do you charge?"),
        "{}",
        list.stdout
    );
    let json = in_root(&env, &["list", "--json"]).json();
    let pack = &json["packs"][0];
    let names = |list: &Value| -> Vec<(String, bool)> {
        list.as_array()
            .unwrap()
            .iter()
            .map(|n| {
                (
                    n["name"].as_str().unwrap().to_string(),
                    n["present"].as_bool().unwrap(),
                )
            })
            .collect()
    };
    assert_eq!(
        names(&pack["requires"]["bins"]),
        [("sh".into(), true), ("apiary-no-such-binary".into(), false)],
        "{pack}"
    );
    assert_eq!(pack["requires"]["env"][1]["name"], "APIARY_SEED_UNSET");
    assert_eq!(pack["prompts"][0], "Book a visit for Tuesday");

    // `install --json` reports them in its `expert` block (and prints nothing before).
    let again = in_root(&env, &["install", &src, "--json"]);
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert!(!again.stderr.contains("requires"), "{}", again.stderr);
    let v = again.json();
    assert_eq!(v["expert"]["prompts"][1], "What do you charge?");
    assert_eq!(v["expert"]["requires"]["env"][0]["name"], "APIARY_SEED_SET");
}

#[test]
fn declared_text_cannot_drive_the_terminal() {
    let env = Operator::new();
    let expert = "[expert]\nname = \"loud\"\ndescription = \"d\"\nversion = \"1.0.0\"\n\n[expert.prompts]\nrecommended = [\"hi\\u001b]0;owned\\u0007\\nthere\"]\n\n[expert.requires]\nbins = [\"\\u001b[2Jwipe\"]";
    let src = expert_pack(&env, "loud", expert, &[]);
    for args in [vec!["install", src.as_str()], vec!["list"]] {
        let r = in_root(&env, &args);
        assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
        let all = format!("{}{}", r.stdout, r.stderr);
        assert!(!all.contains('\u{1b}') && !all.contains('\u{7}'), "{all:?}");
        assert!(all.contains("\\u{1b}"), "{all}");
    }
    let r = in_root(&env, &["install", &src]);
    assert!(
        r.stderr.contains("try: hi\\u{1b}]0;owned\\u{7}\\nthere"),
        "{}",
        r.stderr
    );
}

/// Converts the expert pack at `src` to a persona pack; returns its directory.
fn to_pack(env: &Operator, src: &str) -> (String, Value) {
    let r = env.run(&["convert", src, "--to", "buzz-pack", "--json"]);
    assert!(r.code == 0 || r.code == 2, "{}{}", r.stdout, r.stderr);
    (format!("{src}.buzz-pack"), r.json())
}

#[test]
fn wiki_pages_reach_every_persona_as_a_skill_and_come_back() {
    let env = Operator::new();
    let expert = "[expert]\nname = \"wiki-team\"\ndescription = \"d\"\nversion = \"1.0.0\"\n\n[[expert.agents]]\nname = \"helper\"\nreports_to = \"desk\"";
    let pages = [
        (
            "wiki/clinic/hours.md",
            "# Opening hours\n\nWeekdays nine to five.\n",
        ),
        (
            "wiki/clinic/prices.md",
            "# Price ranges\n\nAsk at the desk.\n",
        ),
    ];
    let mut extra = vec![("agents/helper/soul.md", "You help the desk.\n")];
    extra.extend(pages);
    let src = expert_pack(&env, "wiki-team", expert, &extra);
    let (pack, v) = to_pack(&env, &src);
    assert!(
        v["report"]["reinterpreted"]
            .to_string()
            .contains("wiki-as-skill"),
        "{v}"
    );

    // Each persona resolves the wiki skill; its SKILL.md lists the pages, which are beside it.
    let inspect = env.run(&["pack", "inspect", &pack, "--json"]);
    assert_eq!(inspect.code, 0, "{}{}", inspect.stdout, inspect.stderr);
    let personas = inspect.json()["personas"].clone();
    assert_eq!(personas.as_array().unwrap().len(), 2, "{personas}");
    for p in personas.as_array().unwrap() {
        assert_eq!(p["skills"], serde_json::json!(["wiki"]), "{p}");
        assert!(p["system_prompt"].as_str().unwrap().contains("wiki"), "{p}");
    }
    let skill = std::fs::read_to_string(Path::new(&pack).join("skills/wiki/SKILL.md")).unwrap();
    assert!(skill.contains("name: wiki"), "{skill}");
    assert!(
        skill.contains("`clinic/hours.md`: Opening hours"),
        "{skill}"
    );
    for (path, text) in pages {
        let rel = path.trim_start_matches("wiki/");
        let got = std::fs::read_to_string(Path::new(&pack).join("skills/wiki").join(rel));
        assert_eq!(got.unwrap(), text);
    }

    // The way back puts the pages under wiki/ again, and no agent lists the skill.
    let r = env.run(&["convert", &pack, "--to", "duduclaw-expert", "--json"]);
    assert!(r.code == 0 || r.code == 2, "{}{}", r.stdout, r.stderr);
    let back = Path::new(&pack).with_extension("buzz-pack.duduclaw-expert");
    for (path, text) in pages {
        assert_eq!(std::fs::read_to_string(back.join(path)).unwrap(), text);
    }
    assert!(!back.join("skills/wiki").exists());
    let toml = std::fs::read_to_string(back.join("expert.toml")).unwrap();
    assert!(!toml.contains("\"wiki\""), "{toml}");
}

#[test]
fn the_trigger_hint_wakes_the_persona() {
    let env = Operator::new();
    let expert = "[expert]\nname = \"hint-team\"\ndescription = \"d\"\nversion = \"1.0.0\"\n\n[[expert.agents]]\nname = \"nurse\"\ntrigger = \"@ward\"\nreports_to = \"desk\"";
    // `desk` is hinted by its own name; `nurse` by another handle.
    let src = expert_pack(
        &env,
        "hint-team",
        expert,
        &[("agents/nurse/soul.md", "You are the nurse.\n")],
    );
    let manifest = std::fs::read_to_string(Path::new(&src).join("expert.toml")).unwrap();
    let manifest = manifest.replace(
        "display_name = \"Desk\"",
        "display_name = \"Desk\"\ntrigger = \"@Desk\"",
    );
    std::fs::write(Path::new(&src).join("expert.toml"), manifest).unwrap();
    let (pack, v) = to_pack(&env, &src);
    let report = v["report"].to_string();
    assert!(report.contains("trigger-as-mention"), "{report}");
    assert!(
        report.contains("trigger-as-keyword") && report.contains("subscribe"),
        "{report}"
    );

    let wakes = |message: &str| -> Vec<String> {
        let r = env.run(&["trigger", "test", &pack, "--message", message, "--json"]);
        assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
        r.json()["woken"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_str().unwrap().to_string())
            .collect()
    };
    // `@Desk` in the text wakes desk in any channel.
    assert_eq!(
        wakes(r#"{"text": "@Desk a visitor is here", "channel": "lobby"}"#),
        ["desk"]
    );
    // `@ward` is a keyword of nurse's: it wakes nurse once the channel is one nurse subscribes to.
    assert!(wakes(r#"{"text": "@ward bed 4", "channel": "lobby"}"#).is_empty());
    let persona = Path::new(&pack).join("agents/nurse.persona.md");
    let text = std::fs::read_to_string(&persona).unwrap();
    std::fs::write(
        &persona,
        text.replacen("---\n", "---\nsubscribe: [\"lobby\"]\n", 1),
    )
    .unwrap();
    assert_eq!(
        wakes(r#"{"text": "@ward bed 4", "channel": "lobby"}"#),
        ["nurse"]
    );
    assert_eq!(
        wakes(r#"{"text": "@nurse bed 4", "channel": "x"}"#),
        ["nurse"]
    );
}

// ---- agent-compose person packages (the person contract, "Roster package contract") ----

/// Three paragraphs of role briefing, well under the word limit.
const ROLE_BODY: &str = "# Desk\n\nThe desk answers visitors and routes them to the right room.\n\nIt keeps to what visitors ask and says when it does not know.\n\nIt hands anything medical to a person.\n";

fn skill_md(name: &str, body: &str) -> String {
    format!("---\nname: {name}\ndescription: The {name} skill.\n---\n\n{body}")
}

/// A person package in the external layout of agent-compose's person contract ("Roster package
/// contract") at `<home>/<dir>`: one role with a two-member meld, its role skill at
/// `roles/desk/SKILL.md` named `role-desk`, both personality definitions and the invariant. `role`
/// replaces the role node when given.
fn person_package(env: &Operator, dir: &str, role: Option<&str>) -> String {
    let root = env.path(dir);
    let default_role = "role \"desk\" {\n    purpose \"Answer visitors at the front desk.\"\n    model-tier \"frontier\" \"commodity\"\n    skill \"role-desk\"\n    personality \"calm\" \"bright\"\n    identity name=\"Desk\" pronouns=\"they\"\n    agent \"claude\" tier=\"frontier\"\n}\n";
    let role_skill = skill_md("role-desk", ROLE_BODY);
    let calm = skill_md("personality-calm", "# Calm\n\nSteady and unhurried.\n");
    let bright = skill_md("personality-bright", "# Bright\n\nQuick to notice.\n");
    write_tree(
        &root,
        &[
            ("person.kdl", "person \"studio\"\n"),
            ("roles/01-desk.kdl", role.unwrap_or(default_role)),
            ("roles/desk/SKILL.md", &role_skill),
            (
                "personalities/01-calm.kdl",
                "personality \"calm\" skill=\"personality-calm\" color=\"#5fa87a\" motif=\"stone\"\n",
            ),
            (
                "personalities/02-bright.kdl",
                "personality \"bright\" skill=\"personality-bright\" color=\"#d98e48\" motif=\"spark\"\n",
            ),
            ("definitions/skills/personality-calm/SKILL.md", &calm),
            ("definitions/skills/personality-bright/SKILL.md", &bright),
            ("definitions/INVARIANT.md", "Be kind.\n"),
        ],
    );
    root.display().to_string()
}

/// `convert <src> --to <to> [extra] --json`: (exit code, JSON).
fn convert(env: &Operator, src: &str, to: &str, extra: &[&str]) -> (i32, Value) {
    let mut args = vec!["convert", src, "--to", to];
    args.extend(extra);
    args.push("--json");
    let r = env.run(&args);
    (r.code, r.json())
}

#[test]
fn a_person_package_tells_the_agent_its_colours_and_converts_back_in_its_own_layout() {
    let env = Operator::new();
    let src = person_package(&env, "studio", None);
    let (code, v) = convert(&env, &src, "buzz-pack", &[]);
    assert_eq!(code, 0, "{v}");
    let pack = format!("{src}.buzz-pack");
    // The agent is told each personality's name, skill and colour, and the melded favourite.
    let inspect = env.run(&["pack", "inspect", &pack, "--json"]);
    assert_eq!(inspect.code, 0, "{}", inspect.stderr);
    let prompt = inspect.json()["personas"][0]["system_prompt"]
        .as_str()
        .unwrap()
        .to_string();
    for needle in [
        "calm: skill `personality-calm`, colour #5fa87a",
        "bright: skill `personality-bright`, colour #d98e48",
        "Your favourite colour is #",
    ] {
        assert!(prompt.contains(needle), "{needle:?} not in {prompt}");
    }
    let favourite = v.to_string();
    assert!(favourite.contains("personalities-in-body"), "{v}");

    // Back to a package: the output check takes `roles/desk/SKILL.md` named `role-desk`, and
    // the role skill is the original, without what was added for the agent.
    // (Exit 2 only for the pack id and version the package has no place for.)
    let (code, v) = convert(&env, &pack, "agent-compose-package", &[]);
    assert!(code == 0 || code == 2, "{v}");
    assert_eq!(v["validation"]["errors"], serde_json::json!([]), "{v}");
    let back = Path::new(&pack).with_extension("buzz-pack.agent-compose-package");
    let role_skill = std::fs::read_to_string(back.join("roles/desk/SKILL.md")).unwrap();
    assert!(
        role_skill.starts_with("---\nname: role-desk\n"),
        "{role_skill}"
    );
    assert!(role_skill.ends_with(ROLE_BODY), "{role_skill}");
    assert!(!role_skill.contains("favourite"), "{role_skill}");
}

#[test]
fn person_package_contract_breaches_are_refused_naming_file_and_field() {
    let env = Operator::new();
    let role = |tiers: &str, seat: &str| {
        format!(
            "role \"desk\" {{\n    purpose \"p\"\n    {tiers}\n    skill \"role-desk\"\n    personality \"calm\" \"bright\"\n    identity name=\"Desk\" pronouns=\"they\"\n    agent \"claude\" {seat}\n}}\n"
        )
    };
    let refused = |dir: &str, edit: &dyn Fn(&Path), needles: &[&str]| {
        let src = person_package(&env, dir, None);
        edit(Path::new(&src));
        let (code, v) = convert(&env, &src, "buzz-pack", &[]);
        assert_eq!(code, 1, "{dir}: {v}");
        let message = v["error"]["message"].as_str().unwrap().to_string();
        for needle in needles {
            assert!(
                message.contains(needle),
                "{dir}: {needle:?} not in {message}"
            );
        }
    };
    let write = |rel: &'static str, text: String| {
        move |root: &Path| std::fs::write(root.join(rel), &text).unwrap()
    };
    refused(
        "tiers",
        &write(
            "roles/01-desk.kdl",
            role("model-tier \"frontier\" \"premium\"", "tier=\"frontier\""),
        ),
        &[
            "[roles/01-desk.kdl model-tier]",
            "`premium` is not canonical",
        ],
    );
    refused(
        "seat-tier",
        &write(
            "roles/01-desk.kdl",
            role("model-tier \"frontier\"", "tier=\"oss\""),
        ),
        &["[roles/01-desk.kdl tier]", "does not support"],
    );
    // A core roster's roles must declare their tiers.
    let core = |root: &Path| {
        std::fs::write(root.join("person.kdl"), "roster \"core\"\n").unwrap();
        std::fs::write(
            root.join("roles/01-desk.kdl"),
            role("", "tier=\"frontier\""),
        )
        .unwrap();
    };
    refused(
        "core",
        &core,
        &["[roles/01-desk.kdl model-tier]", "core role declares"],
    );
    refused(
        "binding",
        &|root: &Path| {
            std::fs::remove_file(root.join("definitions/skills/personality-calm/SKILL.md")).unwrap()
        },
        &["[personalities/01-calm.kdl skill]", "has no SKILL.md"],
    );
    refused(
        "shape",
        &write(
            "roles/desk/SKILL.md",
            skill_md("role-desk", "# Desk\n\nOne paragraph only.\n"),
        ),
        &["[roles/desk/SKILL.md body]", "1 paragraph(s)"],
    );
    let long = format!("# Desk\n\n{0}\n\n{0}\n\n{0}\n", "word ".repeat(150));
    refused(
        "words",
        &write("roles/desk/SKILL.md", skill_md("role-desk", &long)),
        &["[roles/desk/SKILL.md body]", "450 words", "at most 400"],
    );
}

#[test]
fn an_ordinary_pack_to_a_person_package_names_the_overlay_remedy() {
    let env = Operator::new();
    let src = env.path("plain");
    let body = ROLE_BODY.replace("# Desk", "# Greeter");
    write_tree(
        &src,
        &[
            (
                ".plugin/plugin.json",
                r#"{"id": "com.example.plain", "name": "plain", "version": "1.0.0", "description": "d", "personas": ["agents/greeter.persona.md"]}"#,
            ),
            (
                "agents/greeter.persona.md",
                &format!(
                    "---\nname: greeter\ndisplay_name: Greeter\ndescription: Greets visitors.\n---\n{body}"
                ),
            ),
        ],
    );
    let src = src.display().to_string();
    let (code, v) = convert(&env, &src, "agent-compose-package", &[]);
    assert_eq!(code, 1, "{v}");
    let message = v["error"]["message"].as_str().unwrap();
    assert!(message.contains("--option overlay=@FILE"), "{message}");
    assert!(
        message.contains("not converted from agent-compose"),
        "{message}"
    );

    // With the overlay it names, the package is written and passes the output check.
    let overlay = serde_json::json!({
        "personas": {"greeter": {"personalities": ["calm"], "identity": {"name": "Greeter", "pronouns": "they"}}},
        "personalities": {"calm": {"color": "#5fa87a", "skill_md": skill_md("personality-calm", "# Calm\n\nSteady.\n")}}
    });
    let file = env.path("overlay.json");
    std::fs::write(&file, overlay.to_string()).unwrap();
    let option = format!("overlay=@{}", file.display());
    let (code, v) = convert(&env, &src, "agent-compose-package", &["--option", &option]);
    assert!(code == 0 || code == 2, "{v}");
    let out = env.path("plain.agent-compose-package");
    let role_skill = std::fs::read_to_string(out.join("roles/greeter/SKILL.md")).unwrap();
    assert!(role_skill.contains("name: role-greeter"), "{role_skill}");
    // A missing overlay file is a clear command-line error.
    let r = env.run(&[
        "convert",
        &src,
        "--to",
        "agent-compose-package",
        "--option",
        "overlay=@/nonexistent/o.json",
    ]);
    assert_eq!(r.code, 64, "{}", r.stderr);
    assert!(
        r.stderr.contains("overlay=@") || r.stderr.contains("/nonexistent/o.json"),
        "{}",
        r.stderr
    );
}
