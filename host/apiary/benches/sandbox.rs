//! Sandbox benchmark (`cargo bench --bench sandbox`). Prints, in one run, three ratios against
//! baselines measured in the same run:
//! 1. trigger decisions/s through the `trigger-default` component (batch form) vs the same logic
//!    compiled natively into this binary: 100 personas x 10,000 messages of corpus text;
//! 2. `on_message` hook latency p50/p99 of `hook-audit`, with the store kept between messages (as
//!    the host runs hooks) and with a fresh store per message, vs the same hook as a shell script
//!    run the way the spec runs script hooks (the three take turns, in 20 rounds);
//! 3. loading a component from the compile cache vs compiling it;
//! 4. components per language: size, compile, cached load and per-call cost of the Python and
//!    JS hooks and converters the tests build (`target/lang-components/`, see
//!    tests/all/support/toolchains.rs) next to the Rust ones (`hook-audit`, `converter-sample`):
//!    hooks with a kept store and with a fresh instance per call, converters (always a fresh
//!    instance) with a trivial call (`info`) and with a conversion, so the fixed cost of a fresh
//!    instance and the guest's own work show apart. `APIARY_BENCH_RESIDENT=1` adds the Python
//!    converter in a pool keeping 64 MiB of each memory resident.
//!
//! Arguments (after `--`): any of `trigger`, `hook`, `cache`, `lang` runs only those sections; `once`
//! runs each measured pass a single time, for instruction counts under
//! `valgrind --tool=callgrind` (see docs/benchmarks.md), which the machine's load does not disturb.
//! `APIARY_BENCH_CACHE=<dir>` keeps the compile cache there between runs (section 4 then shows a
//! cached load as "compile"). `APIARY_BENCH_FRESH_ONLY=N` makes the hook section run N fresh-store calls and nothing else:
//! two runs with different N under callgrind or `strace -c` give one fresh call's instructions
//! and system calls by difference. `APIARY_BENCH_HOOK=<file.wasm>` measures another hook build,
//! `APIARY_BENCH_TRIGGER=<file.wasm>` another trigger.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use apiary::builtin::BUILT_GUESTS_DIR;
use apiary::sandbox::cache::{CompileCache, Provenance, sha256_hex};
use apiary::sandbox::hook::{HookMessage, HookPoint, HookRunner};
use apiary::sandbox::trigger::{Message, Persona, TriggerRunner};
use apiary::sandbox::{Sandbox, SandboxConfig};

/// The crate the `trigger-default` component is built from, compiled natively.
use apiary_triggers as logic;

const PERSONAS: usize = 100;
const MESSAGES: usize = 10_000;
const BATCH: usize = 1_000;

/// What to run, from the command line.
struct Args {
    sections: Vec<String>,
    once: bool,
}

impl Args {
    fn parse() -> Args {
        // `cargo bench` passes `--bench`; flags are not ours.
        let words: Vec<String> = std::env::args()
            .skip(1)
            .filter(|a| !a.starts_with("--"))
            .collect();
        Args {
            once: words.iter().any(|w| w == "once"),
            sections: words.into_iter().filter(|w| w != "once").collect(),
        }
    }

    fn runs(&self, section: &str) -> bool {
        self.sections.is_empty() || self.sections.iter().any(|s| s == section)
    }

    /// Repetitions of a measured pass.
    fn reps(&self, normal: usize) -> usize {
        if self.once { 1 } else { normal }
    }
}

fn main() {
    let args = Args::parse();
    let corpus = corpus_dir();
    println!("apiary sandbox benchmark (corpus: {})", corpus.display());
    let texts = corpus_lines(&corpus);
    let personas = personas(&texts);
    let messages = messages(&texts);
    let cache_dir = tempfile::tempdir().expect("temp dir");
    // A cache kept between runs spares profiling runs the minutes the big components compile in.
    let cache_path = std::env::var_os("APIARY_BENCH_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| cache_dir.path().to_path_buf());
    let sb = Sandbox::new(SandboxConfig {
        cache_dir: Some(cache_path),
        ..SandboxConfig::default()
    })
    .expect("sandbox");

    if args.runs("trigger") {
        trigger_bench(&sb, &args, &personas, &messages);
    }
    if args.runs("hook") {
        hook_bench(&sb, &args);
    }
    if args.runs("cache") {
        cache_bench(&sb, &args);
    }
    if args.runs("lang") {
        lang_bench(&sb, &args);
    }
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

/// Non-empty lines of every Markdown file in the corpus, in a stable order.
fn corpus_lines(dir: &Path) -> Vec<String> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "md") {
                files.push(p);
            }
        }
    }
    files.sort();
    let mut lines = Vec::new();
    for f in files {
        if let Ok(text) = std::fs::read_to_string(&f) {
            lines.extend(
                text.lines()
                    .map(str::trim)
                    .filter(|l| l.len() >= 20)
                    .map(|l| l.chars().take(400).collect::<String>()),
            );
        }
    }
    assert!(
        lines.len() >= 1000,
        "corpus too small: {} lines",
        lines.len()
    );
    lines
}

const CHANNELS: [&str; 10] = [
    "general",
    "security",
    "code-reviews",
    "random",
    "ops",
    "design",
    "support",
    "releases",
    "research",
    "ml",
];

/// 100 personas with keywords from corpus vocabulary, three channels each, a few all_messages.
fn personas(texts: &[String]) -> Vec<Persona> {
    let mut words: Vec<String> = texts
        .iter()
        .flat_map(|t| t.split(|c: char| !c.is_alphanumeric()))
        .filter(|w| w.len() >= 6)
        .map(str::to_lowercase)
        .collect();
    words.sort();
    words.dedup();
    (0..PERSONAS)
        .map(|i| Persona {
            name: format!("persona-{i}"),
            mentions: true,
            keywords: (0..3)
                .map(|k| words[(i * 7919 + k * 104_729) % words.len()].clone())
                .collect(),
            all_messages: i % 20 == 0,
            subscribe: (0..3)
                .map(|k| format!("#{}", CHANNELS[(i + k * 3) % CHANNELS.len()]))
                .collect(),
        })
        .collect()
}

fn messages(texts: &[String]) -> Vec<Message> {
    (0..MESSAGES)
        .map(|i| {
            let mut text = texts[(i * 31) % texts.len()].clone();
            if i % 37 == 0 {
                text = format!("@persona-{} {text}", i % PERSONAS);
            }
            Message {
                id: format!("{i:08x}"),
                channel: CHANNELS[i % CHANNELS.len()].to_string(),
                author: format!("user-{}", i % 50),
                text,
                mentions: vec![],
            }
        })
        .collect()
}

/// The personas as the native logic's set, made once: the component too is given the set once
/// (its first batch makes it) and keeps it for every later batch.
fn native_set(personas: &[Persona]) -> logic::PersonaSet {
    let matchers = personas
        .iter()
        .map(|p| {
            logic::Matcher::new(
                &p.name,
                p.mentions,
                p.keywords.iter().map(String::as_str),
                p.all_messages,
                p.subscribe.iter().map(String::as_str),
            )
        })
        .collect();
    logic::PersonaSet::new(matchers)
}

/// One pass of every message through the native logic, in batches.
#[inline(never)]
fn native_pass(set: &mut logic::PersonaSet, messages: &[Message]) -> usize {
    let mut woken = 0;
    for chunk in messages.chunks(BATCH) {
        let batch = chunk.iter().map(|m| {
            (
                m.channel.as_str(),
                m.text.as_str(),
                m.mentions.iter().map(String::as_str),
            )
        });
        woken += set.decide(batch).len();
    }
    woken
}

/// One pass of every message through the component, in batches.
#[inline(never)]
fn wasm_pass(
    sb: &Sandbox,
    runner: &TriggerRunner,
    personas: &[Persona],
    messages: &[Message],
) -> usize {
    messages
        .chunks(BATCH)
        .map(|chunk| {
            runner
                .decide_batch(sb, personas, chunk)
                .expect("batch")
                .value
                .len()
        })
        .sum()
}

fn trigger_bench(sb: &Sandbox, args: &Args, personas: &[Persona], messages: &[Message]) {
    println!(
        "\n(1) trigger decisions: {PERSONAS} personas x {MESSAGES} messages, batches of {BATCH} messages"
    );
    let decisions = (PERSONAS * MESSAGES) as f64;
    // The built file (the one embedded as the built-in matcher), so a guest rebuild is measured
    // without rebuilding the host.
    // APIARY_BENCH_TRIGGER measures another build (e.g. trigger_v0_1.wasm, the 0.1 form).
    let file = std::env::var_os("APIARY_BENCH_TRIGGER")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(BUILT_GUESTS_DIR).join("trigger_default.wasm"));
    let bytes = std::fs::read(&file).expect("trigger component");
    let runner = TriggerRunner::new(sb.load("trigger_default", &bytes).expect("load"))
        .expect("trigger-default");
    // Both sides prepare the persona set before the timed passes (the component in its first
    // batch, which it then keeps), as `apiary up` keeps one per channel.
    let mut set = native_set(personas);
    runner
        .decide_batch(sb, personas, &messages[..1])
        .expect("the set");
    // Passes alternate, so a change in the machine's load falls on both; best of each.
    let (mut native_best, mut wasm_best) = (Duration::MAX, Duration::MAX);
    let (mut native_woken, mut wasm_woken) = (0, 0);
    for _ in 0..args.reps(9) {
        let start = Instant::now();
        native_woken = std::hint::black_box(native_pass(&mut set, messages));
        native_best = native_best.min(start.elapsed());
        let start = Instant::now();
        wasm_woken = std::hint::black_box(wasm_pass(sb, &runner, personas, messages));
        wasm_best = wasm_best.min(start.elapsed());
    }
    assert_eq!(
        native_woken, wasm_woken,
        "the component and the native logic disagree"
    );
    // One call per decision, to show why the batch form exists (a sample of 2,000 pairs).
    let sample = args.reps(2_000);
    let start = Instant::now();
    for i in 0..sample {
        let _ = runner
            .decide(sb, &personas[i % PERSONAS], &messages[i % MESSAGES])
            .expect("decide");
    }
    let single = start.elapsed();
    let native_rate = decisions / native_best.as_secs_f64();
    let wasm_rate = decisions / wasm_best.as_secs_f64();
    println!(
        "    native (apiary-triggers)   {:>12.0} decisions/s  ({native_woken} wakes)",
        native_rate
    );
    println!(
        "    wasm trigger-default batch {:>12.0} decisions/s  ({wasm_woken} wakes; {})",
        wasm_rate,
        runner.loaded().identity.version
    );
    println!(
        "    wasm one call per decision {:>12.0} decisions/s  (store kept between calls)",
        sample as f64 / single.as_secs_f64()
    );
    println!(
        "    RATIO wasm/native = {:.2}x   (goal >= 0.9x)",
        wasm_rate / native_rate
    );
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn hook_bench(sb: &Sandbox, args: &Args) {
    let n_wasm = args.reps(2_000);
    let n_script = args.reps(300);
    println!("\n(2) on_message hook latency: append one line per message to the workspace");
    let dir = tempfile::tempdir().expect("temp dir");
    let ws = dir.path().join("workspace");
    std::fs::create_dir(&ws).expect("workspace");
    // APIARY_BENCH_HOOK measures another build of the hook (e.g. to compare link settings).
    let hook_file = std::env::var_os("APIARY_BENCH_HOOK")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| Path::new(BUILT_GUESTS_DIR).join("hook_audit.wasm"));
    println!("    component: {}", hook_file.display());
    let bytes = std::fs::read(&hook_file).expect("hook component");
    let loaded = sb.load("hook_audit", &bytes).expect("load");
    let kept = HookRunner::new(loaded.clone()).expect("hook");
    let fresh = HookRunner::new(loaded).expect("hook").with_reuse(false);

    // The same hook as a script, run as the spec runs script hooks: a subprocess with the
    // workspace as cwd and the message on stdin.
    let script = dir.path().join("audit.sh");
    std::fs::write(
        &script,
        "#!/bin/sh\nIFS= read -r text\nprintf 'pip\\t-\\tgeneral\\t-\\tbench\\t%s\\n' \"$text\" >> audit-script.log\n",
    )
    .expect("script");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }

    let run_delay = RunDelay::open();
    let mut sent = 0;
    let mut wasm_call = |runner: &HookRunner, i: usize| {
        let msg = HookMessage {
            id: format!("{sent}"),
            channel: "general".into(),
            thread: None,
            author: "bench".into(),
            author_name: None,
            text: format!("message number {i}"),
        };
        sent += 1;
        let waited = run_delay.now();
        let start = Instant::now();
        runner
            .run(sb, HookPoint::OnMessage, "bench", "pip", Some(&msg), &ws)
            .expect("hook");
        let t = start.elapsed();
        (t, run_delay.now() != waited)
    };
    let script_call = |i: usize| {
        let start = Instant::now();
        let mut child = Command::new(&script)
            .current_dir(&ws)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn script");
        let mut stdin = child.stdin.take().expect("stdin");
        let _ = writeln!(stdin, "message number {i}");
        drop(stdin);
        assert!(child.wait().expect("wait").success());
        start.elapsed()
    };
    // Profiling mode: fresh-store calls only (see the module docs).
    if let Some(n) = std::env::var("APIARY_BENCH_FRESH_ONLY")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
    {
        let mut t: Vec<Duration> = (0..n).map(|i| wasm_call(&fresh, i).0).collect();
        t.sort();
        println!(
            "    {n} fresh-store calls only: p50 {:.1} us",
            us(percentile(&t, 0.5))
        );
        return;
    }
    // Warm-up, then rounds that take a slice of each way in turn, so that a change in the
    // machine's load (it is shared) falls on all three alike.
    for i in 0..50 {
        wasm_call(&kept, i);
        wasm_call(&fresh, i);
    }
    for i in 0..5 {
        script_call(i);
    }
    let rounds = n_script.min(20);
    let (mut kept_times, mut fresh_times, mut shell) = (Vec::new(), Vec::new(), Vec::new());
    // A round's first call of each way runs on caches the other ways (a process spawn above
    // all) left cold: kept apart, to show what of the tail they are.
    let (mut kept_first, mut fresh_first) = (Vec::new(), Vec::new());
    // Calls during which the thread waited for a CPU (another process ran): kept apart too.
    let (mut kept_delayed, mut fresh_delayed) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        let share = |n: usize| n * (round + 1) / rounds - n * round / rounds;
        for i in 0..share(n_wasm) {
            let (t, delayed) = wasm_call(&kept, i);
            kept_times.push(t);
            if i == 0 {
                kept_first.push(kept_times.len() - 1);
            }
            if delayed {
                kept_delayed.push(kept_times.len() - 1);
            }
        }
        for i in 0..share(n_wasm) {
            let (t, delayed) = wasm_call(&fresh, i);
            fresh_times.push(t);
            if i == 0 {
                fresh_first.push(fresh_times.len() - 1);
            }
            if delayed {
                fresh_delayed.push(fresh_times.len() - 1);
            }
        }
        for i in 0..share(n_script) {
            shell.push(script_call(i));
        }
    }
    let without_firsts = |times: &[Duration], firsts: &[usize]| {
        let mut v: Vec<Duration> = times
            .iter()
            .enumerate()
            .filter(|(i, _)| !firsts.contains(i))
            .map(|(_, t)| *t)
            .collect();
        v.sort();
        v
    };
    let kept_warm = without_firsts(&kept_times, &kept_first);
    let fresh_warm = without_firsts(&fresh_times, &fresh_first);
    let undisturbed = |firsts: &[usize], delayed: &[usize]| {
        let mut v = firsts.to_vec();
        v.extend_from_slice(delayed);
        v
    };
    let kept_quiet = without_firsts(&kept_times, &undisturbed(&kept_first, &kept_delayed));
    let fresh_quiet = without_firsts(&fresh_times, &undisturbed(&fresh_first, &fresh_delayed));
    kept_times.sort();
    fresh_times.sort();
    shell.sort();
    let (kept, fresh) = (kept_times, fresh_times);
    let lines = std::fs::read_to_string(ws.join("audit.log"))
        .expect("audit.log")
        .lines()
        .count();
    assert_eq!(lines, sent);
    let (s50, s99) = (percentile(&shell, 0.5), percentile(&shell, 0.99));
    for (label, times) in [
        ("store kept between messages", &kept),
        ("fresh store per message    ", &fresh),
    ] {
        println!(
            "    wasm hook-audit, {label}  p50 {:>9.1} us  p99 {:>9.1} us  (n={n_wasm})",
            us(percentile(times, 0.5)),
            us(percentile(times, 0.99))
        );
    }
    for (label, times) in [
        ("store kept, round starts out", &kept_warm),
        ("fresh store, round starts out", &fresh_warm),
    ] {
        println!(
            "    wasm hook-audit, {label} p50 {:>9.1} us  p99 {:>9.1} us  (goals: kept p99 <= 25 us, fresh p50 <= 10 us)",
            us(percentile(times, 0.5)),
            us(percentile(times, 0.99))
        );
    }
    if run_delay.0.is_some() {
        for (label, times, delayed) in [
            ("store kept, neither", &kept_quiet, kept_delayed.len()),
            ("fresh store, neither", &fresh_quiet, fresh_delayed.len()),
        ] {
            println!(
                "    wasm hook-audit, {label} (the scheduler delayed {delayed} calls) p50 {:>9.1} us  p99 {:>9.1} us",
                us(percentile(times, 0.5)),
                us(percentile(times, 0.99))
            );
        }
    }
    println!(
        "    shell script subprocess                       p50 {:>9.1} us  p99 {:>9.1} us  (n={n_script})",
        us(s50),
        us(s99)
    );
    for (label, times) in [("kept store", &kept), ("fresh store", &fresh)] {
        let (w50, w99) = (percentile(times, 0.5), percentile(times, 0.99));
        println!(
            "    RATIO script/wasm ({label}) p50 = {:.1}x, p99 = {:.1}x   (goals: wasm p50 <= 50 us, >= 20x faster)",
            s50.as_secs_f64() / w50.as_secs_f64(),
            s99.as_secs_f64() / w99.as_secs_f64()
        );
    }
}

/// This thread's time spent runnable but waiting for a CPU (`/proc/thread-self/schedstat`, Linux),
/// to tell a call the scheduler delayed from a slow one. Read outside the timed part of a call.
struct RunDelay(Option<std::fs::File>);

impl RunDelay {
    fn open() -> RunDelay {
        RunDelay(std::fs::File::open("/proc/thread-self/schedstat").ok())
    }

    /// Nanoseconds waited so far, or 0 where unknown.
    fn now(&self) -> u64 {
        use std::os::unix::fs::FileExt;
        let Some(file) = &self.0 else { return 0 };
        let mut buf = [0u8; 96];
        let n = file.read_at(&mut buf, 0).unwrap_or(0);
        std::str::from_utf8(&buf[..n])
            .ok()
            .and_then(|s| s.split_whitespace().nth(1)?.parse().ok())
            .unwrap_or(0)
    }
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn cache_bench(sb: &Sandbox, args: &Args) {
    println!(
        "\n(3) compile cache: load a compiled component from the cache vs compile it with Cranelift"
    );
    let dir = tempfile::tempdir().expect("temp dir");
    let cache = CompileCache::new(sb.engine(), Some(dir.path().to_path_buf()));
    for name in ["trigger_default", "hook_audit"] {
        let bytes =
            std::fs::read(Path::new(BUILT_GUESTS_DIR).join(format!("{name}.wasm"))).expect("guest");
        let digest = sha256_hex(&bytes);
        let compiles: Vec<Duration> = (0..args.reps(5))
            .map(|_| {
                let start = Instant::now();
                std::hint::black_box(sb.engine().precompile_component(&bytes).expect("compile"));
                start.elapsed()
            })
            .collect();
        let (_, first) = cache
            .load(sb.engine(), &digest, &bytes)
            .expect("first load");
        assert!(matches!(first, Provenance::Compiled { .. }));
        let loads: Vec<Duration> = (0..args.reps(50))
            .map(|_| {
                match cache
                    .load(sb.engine(), &digest, &bytes)
                    .expect("cached load")
                {
                    (_, Provenance::Cached { time }) => time,
                    (_, Provenance::Compiled { .. }) => panic!("expected a cache hit"),
                }
            })
            .collect();
        let (c, l) = (median(compiles), median(loads));
        println!(
            "    {name:<16} {:>7} bytes  compile {:>8.2} ms  cached load {:>7.3} ms  RATIO {:.0}x   (goal >= 100x)",
            bytes.len(),
            c.as_secs_f64() * 1e3,
            l.as_secs_f64() * 1e3,
            c.as_secs_f64() / l.as_secs_f64()
        );
    }
}

/// The newest `<prefix>-*.wasm` the tests built into `target/lang-components/`.
fn lang_component(prefix: &str) -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/lang-components");
    let mut found: Vec<(std::time::SystemTime, PathBuf)> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| {
            let name = p.file_name().unwrap_or_default().to_string_lossy();
            name.starts_with(&format!("{prefix}-")) && name.ends_with(".wasm")
        })
        .filter_map(|p| Some((p.metadata().ok()?.modified().ok()?, p)))
        .collect();
    found.sort();
    found.pop().map(|(_, p)| p)
}

/// One way of calling a loaded component, returning each call's time.
type Calls = dyn Fn(&Sandbox, std::sync::Arc<apiary::sandbox::Loaded>) -> Vec<Duration>;

/// Size, compile and cached load of one component, then the median of each way of calling it in
/// `ways` (label, calls); `None` when the file is missing.
fn lang_row(
    sb: &Sandbox,
    args: &Args,
    label: &str,
    file: &Path,
    ways: &[(&str, &Calls)],
) -> Option<(Duration, Duration, Vec<Duration>)> {
    let bytes = std::fs::read(file).ok()?;
    let digest = sha256_hex(&bytes);
    // Compiled once, into the sandbox's own cache, which `sb.load` below then reads.
    let cache = sb.cache();
    let compile = match cache
        .load(sb.engine(), &digest, &bytes)
        .expect("first load")
    {
        (_, Provenance::Compiled { time } | Provenance::Cached { time }) => time,
    };
    let loads: Vec<Duration> = (0..args.reps(20))
        .map(
            |_| match cache.load(sb.engine(), &digest, &bytes).expect("load") {
                (_, Provenance::Cached { time }) => time,
                (_, Provenance::Compiled { .. }) => panic!("expected a cache hit"),
            },
        )
        .collect();
    let load = median(loads);
    println!(
        "    {label:<28} {:>5.1} MB  compile {:>8.1} ms  cached load {:>6.2} ms",
        bytes.len() as f64 / 1e6,
        compile.as_secs_f64() * 1e3,
        load.as_secs_f64() * 1e3,
    );
    let loaded = sb.load(label, &bytes).expect("load");
    let mut per_call = Vec::new();
    for (way, calls) in ways {
        let mut t = calls(sb, loaded.clone());
        t.sort();
        println!(
            "      {way:<40} p50 {:>9.1} us  p99 {:>9.1} us  (n={})",
            us(percentile(&t, 0.5)),
            us(percentile(&t, 0.99)),
            t.len()
        );
        per_call.push(percentile(&t, 0.5));
    }
    Some((compile, load, per_call))
}

fn lang_bench(sb: &Sandbox, args: &Args) {
    use apiary::sandbox::converter::{ConverterRunner, Request};
    println!(
        "\n(4) components per language: size, compile (first load), cached load; per call p50/p99 \
         of each way of calling it. \"fresh instance\" rows instantiate per call (goal: <= 1 ms p50 \
         for the big ones); a trivial call there (`info`, a hook keeping the message) is the fixed \
         cost, the rest of `convert` is the guest's own work."
    );
    let load_avg = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("    load average at start: {}", load_avg.trim());
    let n = args.reps(200);
    let dir = tempfile::tempdir().expect("temp dir");
    let ws = dir.path().join("ws");
    let input = dir.path().join("in");
    std::fs::create_dir_all(&ws).expect("ws");
    std::fs::create_dir_all(&input).expect("in");
    std::fs::write(input.join("a.txt"), "Hello Bees\n").expect("input");
    // The JS converter's input: a persona of a pack.
    let pack = dir.path().join("pack");
    std::fs::create_dir_all(pack.join("agents")).expect("pack");
    std::fs::write(
        pack.join("agents/bee.persona.md"),
        "---\nname: bee\ndescription: Answers\nsubscribe: [\"general\"]\n---\n\nYou are Bee.\n",
    )
    .expect("persona");
    let hook_calls = |reuse: bool| {
        let ws = ws.clone();
        move |sb: &Sandbox, loaded: std::sync::Arc<apiary::sandbox::Loaded>| {
            let runner = HookRunner::new(loaded).expect("hook").with_reuse(reuse);
            let msg = HookMessage {
                author_name: None,
                text: "a calm message".into(),
                ..HookMessage::default()
            };
            (0..if reuse { n } else { n.min(100) })
                .map(|_| {
                    let start = Instant::now();
                    runner
                        .run(sb, HookPoint::OnMessage, "bench", "pip", Some(&msg), &ws)
                        .expect("hook");
                    start.elapsed()
                })
                .collect::<Vec<Duration>>()
        }
    };
    let info_calls = move |sb: &Sandbox, loaded: std::sync::Arc<apiary::sandbox::Loaded>| {
        let runner = ConverterRunner::new(loaded).expect("converter");
        (0..n.min(100))
            .map(|_| {
                let start = Instant::now();
                runner.info(sb).expect("info");
                start.elapsed()
            })
            .collect()
    };
    let converter_calls = |source: &'static str, target: &'static str, input: &Path| {
        let input = input.to_path_buf();
        let out_root = dir.path().to_path_buf();
        move |sb: &Sandbox, loaded: std::sync::Arc<apiary::sandbox::Loaded>| {
            let runner = ConverterRunner::new(loaded).expect("converter");
            let request = Request {
                source: source.into(),
                target: target.into(),
                options: vec![],
            };
            (0..n.min(50))
                .map(|i| {
                    let out = tempfile::Builder::new()
                        .prefix(&format!("out-{target}-{i}-"))
                        .tempdir_in(&out_root)
                        .expect("out")
                        .keep();
                    let start = Instant::now();
                    runner.convert(sb, &request, &input, &out).expect("convert");
                    start.elapsed()
                })
                .collect()
        }
    };
    let (kept_hook, fresh_hook) = (hook_calls(true), hook_calls(false));
    let hook_ways: [(&str, &Calls); 2] = [
        ("on_message, store kept", &kept_hook),
        ("on_message, fresh instance", &fresh_hook),
    ];
    let guest = |name: &str| Path::new(BUILT_GUESTS_DIR).join(format!("{name}.wasm"));
    let missing =
        "not built yet: run `cargo test -p apiary-e2e --test all -- components_lang` first";
    let hook_rows = [
        ("hook, Rust (hook-audit)", Some(guest("hook_audit"))),
        ("hook, JS (componentize-js)", lang_component("js-spam")),
        ("hook, Python (c-py)", lang_component("py-spam")),
    ];
    let mut hooks = Vec::new();
    for (label, file) in hook_rows {
        match file.and_then(|f| lang_row(sb, args, label, &f, &hook_ways)) {
            Some(row) => hooks.push((label, row)),
            None => println!("    {label}: {missing}"),
        }
    }
    let (rust_conv, py_conv, js_conv) = (
        converter_calls("text", "text-upper", &input),
        converter_calls("text", "text-lower", &input),
        converter_calls("buzz-pack", "persona-cards", &pack),
    );
    let converter_rows: [(&str, Option<PathBuf>, &Calls); 3] = [
        (
            "converter, Rust (sample)",
            Some(guest("converter_sample")),
            &rust_conv,
        ),
        (
            "converter, Python (c-py)",
            lang_component("py-lower"),
            &py_conv,
        ),
        ("converter, JS (c-js)", lang_component("js-cards"), &js_conv),
    ];
    let mut converters = Vec::new();
    for (label, file, convert) in converter_rows {
        let ways: [(&str, &Calls); 2] = [
            ("info(), fresh instance", &info_calls),
            ("convert (one file), fresh instance", convert),
        ];
        match file.and_then(|f| lang_row(sb, args, label, &f, &ways)) {
            Some(row) => converters.push((label, row)),
            None => println!("    {label}: {missing}"),
        }
    }
    for rows in [&hooks, &converters] {
        let Some((_, rust)) = rows.first().filter(|(l, _)| l.contains("Rust")) else {
            continue;
        };
        for (label, other) in &rows[1..] {
            let ratios: Vec<String> = other
                .2
                .iter()
                .zip(&rust.2)
                .map(|(o, r)| format!("{:.1}x", o.as_secs_f64() / r.as_secs_f64()))
                .collect();
            println!(
                "    RATIO {label}/Rust: cached load {:.0}x, per call (each way above) {}",
                other.1.as_secs_f64() / rust.1.as_secs_f64(),
                ratios.join(", ")
            );
        }
    }
    for (label, (_, _, per_call)) in hooks.iter().chain(&converters).skip(1) {
        if label.contains("Rust") {
            continue;
        }
        let fixed = if label.starts_with("hook") {
            per_call[1]
        } else {
            per_call[0]
        };
        println!(
            "    {label:<28} fresh instance + trivial call p50 {:>7.3} ms   (goal <= 1 ms)",
            fixed.as_secs_f64() * 1e3
        );
    }
    if std::env::var_os("APIARY_BENCH_RESIDENT").is_some() {
        resident_compare(
            sb,
            &[("converter, Python", lang_component("py-lower"), &py_conv)],
        );
    }
}

/// The same calls in a sandbox whose pool keeps 64 MiB of each memory resident, so a big
/// component's next instance finds its whole memory image mapped instead of faulting it in
/// (`APIARY_BENCH_RESIDENT=1`; last measured no faster).
fn resident_compare(sb: &Sandbox, rows: &[(&str, Option<PathBuf>, &Calls)]) {
    let large = Sandbox::new(SandboxConfig {
        keep_resident: 64 << 20,
        ..SandboxConfig::default()
    })
    .expect("sandbox");
    println!(
        "    fresh instances, keep_resident {} MiB (default) vs 64 MiB (same run):",
        apiary::sandbox::KEEP_RESIDENT >> 20
    );
    for (label, file, call) in rows {
        let Some(bytes) = file.as_ref().and_then(|f| std::fs::read(f).ok()) else {
            continue;
        };
        let (a, b) = (
            median(call(sb, sb.load(label, &bytes).expect("load"))),
            median(call(&large, large.load(label, &bytes).expect("load"))),
        );
        println!(
            "    {label:<24} per call {:>9.1} us vs {:>9.1} us   RATIO 64 MiB/default {:.2}x",
            us(a),
            us(b),
            b.as_secs_f64() / a.as_secs_f64()
        );
    }
}
