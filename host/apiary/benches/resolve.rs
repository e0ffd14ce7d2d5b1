//! Resolver benchmark: validate and resolve a generated 200-persona pack and every corpus pack,
//! in-process and through the CLI, printing time per persona.
//!
//! Baselines: the process-start floor (spawning `true`) is measured in the same run, so the CLI figure
//! can be read as "work on top of starting a process"; the upstream reference implementation's
//! figures (measured on this machine kind and quoted in the issue) are printed beside ours as ratios.
//!
//! With `APIARY_BENCH_BASELINE_BIN=<an earlier build of apiary>` it also times the same CLI commands
//! with that binary, the two taking turns, and prints this build's time against it (the start-up
//! comparison of a layout or link change).
//!
//! Run: `cargo bench -p apiary --bench resolve`

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use apiary::pack;
use apiary::resolve::{self, Overrides};

const PERSONAS: usize = 200;
/// Upstream `buzz-persona`, in-process, per persona (issue 2).
const UPSTREAM_VALIDATE_US: f64 = 20.0;
const UPSTREAM_RESOLVE_US: f64 = 20.0;
/// Upstream CLI wall time for a 200-persona pack, and for a small pack.
const UPSTREAM_CLI_200_MS: f64 = 10.0;
const UPSTREAM_CLI_SMALL_MS: f64 = 3.3;

fn main() {
    let dir = tempfile::tempdir().expect("temp dir");
    generate_pack(dir.path(), PERSONAS);
    let loaded = pack::load(dir.path());
    assert!(
        !loaded.report.has_errors(),
        "generated pack must be valid:\n{}",
        loaded.report.render(false)
    );
    let big = loaded.pack.expect("pack");

    println!("apiary resolver benchmark ({PERSONAS}-persona generated pack; medians)\n");
    println!(
        "in-process                          per persona    upstream    ratio (upstream / apiary)"
    );
    let validate = median(30, || {
        let l = pack::load(dir.path());
        std::hint::black_box(l.report.diagnostics.len());
    });
    let v_us = per_persona_us(validate, PERSONAS);
    let baseline = median(30, || {
        std::hint::black_box(minimal_load(dir.path()));
    });
    let b_us = per_persona_us(baseline, PERSONAS);
    println!(
        "  validate (load + all checks)      {v_us:>8.2} µs   {UPSTREAM_VALIDATE_US:>6.1} µs    {:>5.1}×",
        UPSTREAM_VALIDATE_US / v_us
    );
    println!(
        "  same-run baseline: read + typed    {b_us:>8.2} µs   (upstream-style minimal loader; baseline / apiary = {:.2}×)",
        b_us / v_us
    );
    let overrides = Overrides::default();
    let env = |_: &str| None;
    let resolving = median(30, || {
        let r = resolve::resolve(&big, &overrides, &env);
        std::hint::black_box(r.personas.len());
    });
    let r_us = per_persona_us(resolving, PERSONAS);
    println!(
        "  resolve (5 levels, skills, MCP)   {r_us:>8.2} µs   {UPSTREAM_RESOLVE_US:>6.1} µs    {:>5.1}×",
        UPSTREAM_RESOLVE_US / r_us
    );

    println!("\ncorpus packs (load + resolve)");
    for pack_dir in corpus_packs() {
        let l = pack::load(&pack_dir);
        let Some(p) = l.pack else {
            println!("  {:<34}  invalid, skipped", name_of(&pack_dir));
            continue;
        };
        let n = p.personas.len().max(1);
        let t = median(50, || {
            let l = pack::load(&pack_dir);
            let p = l.pack.expect("pack stays valid");
            std::hint::black_box(resolve::resolve(&p, &overrides, &env).personas.len());
        });
        println!(
            "  {:<34}{:>8.2} µs per persona ({n} persona{})",
            name_of(&pack_dir),
            per_persona_us(t, n),
            if n == 1 { "" } else { "s" }
        );
    }

    let bin = PathBuf::from(env!("CARGO_BIN_EXE_apiary"));
    println!(
        "\nthrough the CLI                     wall time      floor       work   per persona   upstream   ratio"
    );
    let floor = median(30, || run(Command::new("true")));
    let floor_ms = ms(floor);
    // (label, arguments, personas in the pack, upstream figure)
    let cases: Vec<(&str, Vec<String>, usize, f64)> = vec![
        (
            "validate, 200 personas",
            vec!["pack".into(), "validate".into(), path(dir.path())],
            PERSONAS,
            UPSTREAM_CLI_200_MS,
        ),
        (
            // The upstream CLI's `inspect` prints a text summary per persona: this is its match.
            "inspect (text), 200 personas",
            vec!["pack".into(), "inspect".into(), path(dir.path())],
            PERSONAS,
            UPSTREAM_CLI_200_MS,
        ),
        (
            "inspect --json, 200 personas",
            vec![
                "pack".into(),
                "inspect".into(),
                "--json".into(),
                path(dir.path()),
            ],
            PERSONAS,
            UPSTREAM_CLI_200_MS,
        ),
    ];
    let small = corpus_packs()
        .into_iter()
        .find(|p| p.ends_with("sms-operator"));
    let mut cases = cases;
    if let Some(small) = &small {
        cases.push((
            "validate, 1 persona (sms-operator)",
            vec!["pack".into(), "validate".into(), path(small)],
            1,
            UPSTREAM_CLI_SMALL_MS,
        ));
        cases.push((
            "inspect (text), 1 persona",
            vec!["pack".into(), "inspect".into(), path(small)],
            1,
            UPSTREAM_CLI_SMALL_MS,
        ));
        cases.push((
            "inspect --json, 1 persona",
            vec![
                "pack".into(),
                "inspect".into(),
                "--json".into(),
                path(small),
            ],
            1,
            UPSTREAM_CLI_SMALL_MS,
        ));
    }
    for (label, args, personas, upstream) in cases {
        let t = median(20, || {
            let mut c = Command::new(&bin);
            c.args(&args).env("APIARY_OVERRIDES", "");
            run(c)
        });
        let t_ms = ms(t);
        // The work on top of starting a process, shared out over the pack's personas.
        let work_ms = (t_ms - floor_ms).max(0.0);
        println!(
            "  {label:<34}{t_ms:>7.2} ms   {floor_ms:>6.2} ms  {work_ms:>6.2} ms  {:>7.1} µs   {upstream:>5.1} ms  {:>5.1}×",
            work_ms * 1000.0 / personas as f64,
            upstream / t_ms
        );
    }
    if let Some(earlier) = std::env::var_os("APIARY_BENCH_BASELINE_BIN") {
        compare_builds(&bin, Path::new(&earlier), dir.path(), small.as_deref());
    }
    // The JSON of 200 personas is about a megabyte (their system prompts): what reading it costs a
    // consumer is shown apart, since the upstream figure is for the command alone.
    let t = median(20, || {
        let mut c = Command::new(&bin);
        c.args(["pack", "inspect", "--json", &path(dir.path())])
            .env("APIARY_OVERRIDES", "");
        run_piped(c)
    });
    println!(
        "  {:<34}{:>7.2} ms   (stdout read through a pipe by this bench)",
        "inspect --json, 200, piped",
        ms(t)
    );
    println!(
        "\nCommands run with stdout and stderr to /dev/null, as hyperfine does by default. \
         ratio > 1 means apiary is faster than the upstream reference figure."
    );
}

/// This build against an earlier one on the same commands: the two binaries take turns, 41 rounds,
/// so load changes fall on both; medians.
fn compare_builds(bin: &Path, earlier: &Path, big: &Path, small: Option<&Path>) {
    println!(
        "\nthis build against {} (taking turns; medians)",
        earlier.display()
    );
    println!("                                     this build     earlier    earlier / this");
    let mut cases = vec![("validate, 200 personas", vec!["pack", "validate"], big)];
    if let Some(small) = small {
        cases.push((
            "validate, 1 persona (sms-operator)",
            vec!["pack", "validate"],
            small,
        ));
        cases.push((
            "inspect --json, 1 persona",
            vec!["pack", "inspect", "--json"],
            small,
        ));
    }
    for (label, args, pack) in cases {
        let time = |exe: &Path| {
            let mut c = Command::new(exe);
            c.args(&args).arg(pack).env("APIARY_OVERRIDES", "");
            let t = Instant::now();
            run(c);
            t.elapsed()
        };
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        time(bin);
        time(earlier);
        for _ in 0..41 {
            ours.push(time(bin));
            theirs.push(time(earlier));
        }
        ours.sort();
        theirs.sort();
        let (o, t) = (ms(ours[ours.len() / 2]), ms(theirs[theirs.len() / 2]));
        println!("  {label:<34}{o:>7.2} ms   {t:>7.2} ms    {:>5.2}×", t / o);
    }
}

/// The same-run baseline: what the upstream loader does per persona and nothing more — read the file,
/// split the frontmatter, deserialize it into a typed struct that denies unknown keys. No locations,
/// no diagnostics, no path containment, no skills, MCP or hooks checks.
fn minimal_load(root: &Path) -> usize {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Triggers {
        mentions: Option<bool>,
        keywords: Option<Vec<String>>,
        all_messages: Option<bool>,
    }
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Frontmatter {
        name: String,
        display_name: String,
        description: String,
        avatar: Option<String>,
        version: Option<String>,
        author: Option<String>,
        runtime: Option<String>,
        #[serde(default)]
        skills: Vec<String>,
        #[serde(default)]
        mcp_servers: Vec<serde_yaml_ng::Value>,
        subscribe: Option<Vec<String>>,
        #[serde(alias = "respond_to")]
        triggers: Option<Triggers>,
        model: Option<String>,
        temperature: Option<f64>,
        max_context_tokens: Option<u64>,
        thread_replies: Option<bool>,
        broadcast_replies: Option<bool>,
        hooks: Option<serde_yaml_ng::Value>,
    }
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(root.join(".plugin/plugin.json")).unwrap())
            .unwrap();
    let mut n = 0;
    for p in manifest["personas"].as_array().unwrap() {
        let text = std::fs::read_to_string(root.join(p.as_str().unwrap())).unwrap();
        let split = apiary::pack::frontmatter::split(&text).unwrap();
        let fm: Frontmatter = serde_yaml_ng::from_str(split.yaml).unwrap();
        n += fm.name.len() + split.body.to_string().len();
    }
    n
}

/// Runs `c` to completion with its output to /dev/null, as hyperfine measures commands by default.
fn run(mut c: Command) {
    let status = c
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("spawn");
    std::hint::black_box(status);
}

/// Runs `c` with its standard output read through a pipe, as a script consuming it would.
fn run_piped(mut c: Command) {
    let out = c.stderr(Stdio::null()).output().expect("spawn");
    std::hint::black_box(out.stdout.len());
}

fn median(iters: usize, mut f: impl FnMut()) -> Duration {
    f(); // warm caches and the page cache
    let mut times: Vec<Duration> = (0..iters)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .collect();
    times.sort();
    times[times.len() / 2]
}

fn per_persona_us(d: Duration, n: usize) -> f64 {
    d.as_secs_f64() * 1e6 / n as f64
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn path(p: &Path) -> String {
    p.display().to_string()
}

fn name_of(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn corpus_packs() -> Vec<PathBuf> {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let Some(corpus) = [
        repo.join("../shared/corpus/buzz-packs"),
        PathBuf::from("/work/shared/corpus/buzz-packs"),
    ]
    .into_iter()
    .find(|p| p.is_dir()) else {
        return vec![];
    };
    let mut found = Vec::new();
    let mut stack = vec![corpus];
    while let Some(d) = stack.pop() {
        if d.join(".plugin/plugin.json").is_file() {
            found.push(d);
            continue;
        }
        if let Ok(rd) = std::fs::read_dir(&d) {
            stack.extend(
                rd.filter_map(Result::ok)
                    .map(|e| e.path())
                    .filter(|p| p.is_dir()),
            );
        }
    }
    found.sort();
    found
}

/// A realistic pack: defaults, 20 skills (half claimed), pack and persona MCP servers, instructions,
/// personas with varied behavioural fields and a prompt body of about 2 KB each.
fn generate_pack(root: &Path, n: usize) {
    let write = |rel: &str, text: &str| {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    let personas: Vec<String> = (0..n)
        .map(|i| format!("\"agents/p{i:03}.persona.md\""))
        .collect();
    write(
        ".plugin/plugin.json",
        &format!(
            r##"{{"id":"com.example.bench","name":"Bench","version":"1.0.0","engines":{{"buzz":">=0.9.0"}},
"personas":[{}],"defaults":{{"model":"anthropic:claude-sonnet-4","temperature":0.5,"max_context_tokens":100000,
"triggers":{{"mentions":true,"keywords":["deploy"],"all_messages":false}},"subscribe":["#general"],"thread_replies":true}}}}"##,
            personas.join(",")
        ),
    );
    write(
        "instructions.md",
        &"Keep replies short and cite the message you answer.\n".repeat(20),
    );
    write(
        ".mcp.json",
        r#"{"mcpServers":{"github":{"command":"github-mcp","args":["stdio"],"env":{"TOKEN":"${GITHUB_TOKEN}"}},"fs":{"command":"fs-mcp"}}}"#,
    );
    for s in 0..20 {
        write(
            &format!("skills/skill-{s:02}/SKILL.md"),
            &format!(
                "---\nname: skill-{s:02}\ndescription: Skill number {s}\n---\n\n# Skill {s}\n\nSteps.\n"
            ),
        );
    }
    let body = "You review changes carefully and explain findings with evidence.\n".repeat(32);
    for i in 0..n {
        let mut fm = format!(
            "name: p{i:03}\ndisplay_name: \"Persona {i} 🐝\"\ndescription: Generated persona number {i}\nversion: \"1.0.{i}\"\n"
        );
        if i % 2 == 0 {
            fm.push_str(&format!("skills:\n  - \"./skills/skill-{:02}/\"\n", i % 10));
        }
        match i % 5 {
            0 => fm.push_str("model: \"anthropic:claude-opus-4\"\ntemperature: 0.2\n"),
            1 => fm.push_str("triggers:\n  mentions: true\n  keywords: [\"security\", \"CVE\"]\n"),
            2 => fm.push_str("triggers: {}\nsubscribe: []\n"),
            3 => fm.push_str("temperature: null\nsubscribe:\n  - \"#reviews\"\n  - \"#ops\"\n"),
            _ => fm.push_str("mcp_servers:\n  - name: github\n    command: gh-mcp-persona\n    env:\n      T: \"${GH}\"\n"),
        }
        write(
            &format!("agents/p{i:03}.persona.md"),
            &format!("---\n{fm}---\n\n{body}"),
        );
    }
}
