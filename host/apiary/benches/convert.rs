//! Conversion benchmark (`cargo bench -p apiary --bench convert`): agents per second converted
//! through the built-in converter components, end to end (stage + detect + convert + validate +
//! place, through `apiary::convert::convert`, the entry point `apiary convert` uses), over the real
//! corpus: every Claude subagent category plugin, the official Claude plugins, the DuDuClaw
//! starters, the agent-compose roster to buzz-pack, and each buzz pack to every other format.
//!
//! The machine is shared and noisy, so the figure that matters is the ratio against a baseline
//! measured in the same run: native validation (`apiary::pack::validate`) of the persona pack on
//! the buzz-pack side of each conversion. The registry is loaded once, as a long-running process
//! would; the per-process figure (one `apiary convert` process per plugin) is printed once too.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use apiary::convert::registry::Registry;
use apiary::convert::{self, Job, validate};
use apiary::sandbox::{Sandbox, SandboxConfig};

/// Timed passes over the whole corpus set (after one warm-up pass).
const PASSES: usize = 3;

/// `CONVERT_BENCH_PROFILE=1`: one timed pass and no CLI figure (for a run under callgrind).
fn profiling() -> bool {
    std::env::var_os("CONVERT_BENCH_PROFILE").is_some()
}

/// One conversion of the set: a corpus directory to a format, and the persona pack whose agents
/// it counts (the output when converting to buzz-pack, else the input).
struct Item {
    src: PathBuf,
    to: &'static str,
    agents: usize,
    /// The persona pack(s) native validation runs on.
    packs: Vec<PathBuf>,
}

fn main() {
    let corpus = corpus_dir();
    println!("apiary convert benchmark (corpus: {})", corpus.display());
    // Each conversion creates every output file (and stages the input) in the temp dir: on a
    // churned disk inode creation dominates; TMPDIR=/dev/shm measures the conversion work itself.
    println!(
        "work and output dirs under {} (set TMPDIR to move them)",
        std::env::temp_dir().display()
    );
    let scratch = tempfile::Builder::new()
        .prefix("apiary-convert-bench-")
        .tempdir()
        .expect("temp dir");
    // Compiled components are cached by digest and engine, so one cache across runs is safe.
    let cache = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/tmp/convert-bench-cache");
    let sb = Sandbox::new(SandboxConfig {
        cache_dir: Some(cache.clone()),
        ..SandboxConfig::default()
    })
    .expect("sandbox");

    let t = Instant::now();
    let reg = Registry::load(&sb, None, None);
    println!(
        "registry: {} converters loaded in {:.2}s (first load: compiled, or read from the compile cache)",
        reg.converters.len(),
        t.elapsed().as_secs_f64()
    );
    for u in &reg.unavailable {
        println!("  unavailable: {} ({})", u.name, u.reason);
    }
    let t = Instant::now();
    let reg = Registry::load(&sb, None, None);
    println!(
        "registry: reloaded in {:.1} ms (already compiled in this process)",
        ms(t.elapsed())
    );

    // Warm-up pass: decides the set (only conversions that succeed are timed) and counts agents.
    let keep = scratch.path().join("keep");
    let items = plan(&sb, &reg, &corpus, &keep);
    let agents: usize = items.iter().map(|i| i.agents).sum();
    let packs: usize = items.iter().map(|i| i.packs.len()).sum();
    println!(
        "set: {} conversions, {agents} agents, {packs} persona packs validated natively",
        items.len()
    );

    let mut e2e = Vec::new();
    let mut native = Vec::new();
    let passes = if profiling() { 1 } else { PASSES };
    for pass in 0..passes {
        let out = scratch.path().join(format!("pass-{pass}"));
        std::fs::create_dir_all(&out).unwrap();
        let t = Instant::now();
        for (n, item) in items.iter().enumerate() {
            let o = run(&sb, &reg, &item.src, item.to, &out.join(n.to_string()));
            assert!(o.ok, "{} -> {}: {:?}", item.src.display(), item.to, o.error);
        }
        e2e.push(t.elapsed());
        let t = Instant::now();
        for item in &items {
            for p in &item.packs {
                std::hint::black_box(apiary::pack::validate(p));
            }
        }
        native.push(t.elapsed());
        std::fs::remove_dir_all(&out).ok();
    }
    let e2e = median(e2e);
    let native = median(native);
    let rate = |d: Duration| agents as f64 / d.as_secs_f64();
    println!(
        "end to end (registry loaded once): {agents} agents in {:.0} ms = {:.0} agents/s ({:.2} ms/conversion)",
        ms(e2e),
        rate(e2e),
        ms(e2e) / items.len() as f64
    );
    println!(
        "native validation of the persona packs: {:.1} ms = {:.0} agents/s",
        ms(native),
        rate(native)
    );
    println!(
        "ratio: converting end to end costs {:.1}x native validation",
        e2e.as_secs_f64() / native.as_secs_f64()
    );
    let verdict = if rate(e2e) >= 200.0 { "meets" } else { "BELOW" };
    println!("expectation >= 200 agents/s end to end: {verdict}");

    if !profiling() {
        cli_figure(&corpus, &cache, scratch.path());
    }
}

/// Converts every candidate once, keeping the ones that succeed (with their agent counts).
fn plan(sb: &Sandbox, reg: &Registry, corpus: &Path, keep: &Path) -> Vec<Item> {
    let mut items = Vec::new();
    let mut refused = Vec::new();
    for (n, (src, to)) in candidates(corpus).into_iter().enumerate() {
        let out = keep.join(n.to_string());
        let o = run(sb, reg, &src, to, &out);
        if !o.ok {
            let e = o.error.as_ref().map(|e| e.code).unwrap_or("?");
            refused.push(format!("{} -> {to} ({e})", rel(corpus, &src)));
            continue;
        }
        let packs = if to == "buzz-pack" {
            validate::pack_roots(&out)
                .into_iter()
                .map(|r| out.join(r))
                .collect()
        } else {
            vec![src.clone()]
        };
        let agents = packs.iter().map(|p| personas(p)).sum();
        items.push(Item {
            src,
            to,
            agents,
            packs,
        });
    }
    if !refused.is_empty() {
        println!(
            "not timed ({} refused by design or failing): {}",
            refused.len(),
            refused.join(", ")
        );
    }
    items
}

/// The conversions: each corpus input a user would point `apiary convert` at, to buzz-pack; and
/// each buzz pack to every other format.
fn candidates(corpus: &Path) -> Vec<(PathBuf, &'static str)> {
    let mut v = Vec::new();
    for dir in [
        "claude-subagents/categories",
        "claude-plugins-official/plugins",
        "claude-plugins-official/external_plugins",
        "duduclaw-packs/distribution/packs",
    ] {
        for sub in subdirs(&corpus.join(dir)) {
            v.push((sub, "buzz-pack"));
        }
    }
    v.push((
        corpus.join("agent-compose-person/internal/person"),
        "buzz-pack",
    ));
    v.push((corpus.join("multi-host-plugin"), "buzz-pack"));
    for pack in [
        "buzz-packs/block-buzz/crates/buzz-persona/packs/sms-operator",
        "buzz-packs/syncreus-hivepack/packs/community-squad",
        "buzz-packs/syncreus-hivepack/packs/ship-squad",
    ] {
        for to in [
            "agent-plugins",
            "claude-plugin",
            "duduclaw-expert",
            "agent-compose-package",
        ] {
            v.push((corpus.join(pack), to));
        }
    }
    v
}

fn run(sb: &Sandbox, reg: &Registry, src: &Path, to: &str, out: &Path) -> convert::Outcome {
    let job = Job {
        src: src.to_path_buf(),
        to: to.to_string(),
        from: None,
        out: out.to_path_buf(),
        force: false,
        options: Vec::new(),
    };
    convert::convert(sb, reg, &job)
}

/// The per-process figure: one `apiary convert` process per Claude subagent category plugin (the
/// compile cache warm), as an operator running the command would see it.
fn cli_figure(corpus: &Path, cache: &Path, scratch: &Path) {
    let bin = Path::new(env!("CARGO_BIN_EXE_apiary"));
    let home = scratch.join("cli-home");
    std::fs::create_dir_all(&home).expect("cli home");
    let cmd = |args: &[&str]| {
        let mut c = Command::new(bin);
        c.env("HOME", &home)
            .env("XDG_CACHE_HOME", cache.join("cli"))
            .env("APIARY_DATA_DIR", home.join("data"))
            .args(args);
        c
    };
    // `apiary convert SRC --to buzz-pack --out OUT`, one process.
    let convert_one = |src: &Path, out: &Path| {
        cmd(&[
            "convert",
            &src.display().to_string(),
            "--to",
            "buzz-pack",
            "--out",
            &out.display().to_string(),
        ])
        .output()
        .expect("run apiary")
    };
    let warm = cmd(&["convert", "--list"]).output().expect("run apiary");
    assert!(warm.status.success(), "apiary convert --list failed");
    let plugins = subdirs(&corpus.join("claude-subagents/categories"));
    let mut agents = 0;
    let t = Instant::now();
    for (n, p) in plugins.iter().enumerate() {
        let out = scratch.join(format!("cli-out-{n}"));
        let st = convert_one(p, &out);
        assert!(st.status.code().is_some_and(|c| c == 0 || c == 2));
        agents += personas(&out);
    }
    let d = t.elapsed();
    println!(
        "per process (`apiary convert`, one process per plugin, cache warm): {} plugins, {agents} agents in {:.0} ms = {:.0} agents/s ({:.0} ms/process)",
        plugins.len(),
        ms(d),
        agents as f64 / d.as_secs_f64(),
        ms(d) / plugins.len() as f64
    );

    // The same plugins in one process: `convert DIR --survey --out KEEP` writes every pack.
    let keep = scratch.join("cli-kept");
    let categories = corpus.join("claude-subagents/categories");
    let t = Instant::now();
    let st = cmd(&[
        "convert",
        &categories.display().to_string(),
        "--survey",
        "--out",
        &keep.display().to_string(),
        "--json",
    ])
    .output()
    .expect("run apiary");
    let d = t.elapsed();
    assert!(st.status.code().is_some_and(|c| c == 0 || c == 2));
    let kept: usize = subdirs(&keep).iter().map(|p| personas(p)).sum();
    println!(
        "one process (`apiary convert DIR --survey --out KEEP`): {} packs, {kept} agents in {:.0} ms = {:.0} agents/s (goal >= 300)",
        subdirs(&keep).len(),
        ms(d),
        kept as f64 / d.as_secs_f64()
    );

    // The fixed cost: one small plugin (one agent), against the process-start floor.
    let small = scratch.join("small-plugin");
    std::fs::create_dir_all(small.join("agents")).expect("small plugin");
    std::fs::write(
        small.join("agents/helper.md"),
        "---\nname: helper\ndescription: Helps\n---\nYou help.\n",
    )
    .expect("small agent");
    let mut times = Vec::new();
    let mut floor = Vec::new();
    for n in 0..21 {
        let out = scratch.join(format!("small-out-{n}"));
        let t = Instant::now();
        let st = convert_one(&small, &out);
        times.push(t.elapsed());
        assert!(st.status.code().is_some_and(|c| c == 0 || c == 2));
        let t = Instant::now();
        let _ = Command::new("true").status();
        floor.push(t.elapsed());
    }
    let (one, floor) = (median(times), median(floor));
    println!(
        "one small plugin (`apiary convert`, 1 agent): {:.2} ms, {:.2} ms above the process-start floor ({:.2} ms) (goal <= 5 ms)",
        ms(one),
        ms(one.saturating_sub(floor)),
        ms(floor)
    );
}

fn personas(pack: &Path) -> usize {
    apiary::pack::load(pack)
        .pack
        .map(|p| p.personas.len())
        .unwrap_or(0)
}

fn subdirs(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|r| {
            r.flatten()
                .map(|e| e.path())
                .filter(|p| p.is_dir())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

fn rel(corpus: &Path, p: &Path) -> String {
    p.strip_prefix(corpus).unwrap_or(p).display().to_string()
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn corpus_dir() -> PathBuf {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("repo root");
    [
        repo.join("../shared/corpus"),
        PathBuf::from("/work/shared/corpus"),
    ]
    .into_iter()
    .find(|p| p.is_dir())
    .expect("the shared corpus (../shared/corpus beside the repository)")
}
