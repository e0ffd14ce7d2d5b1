//! Start-up of the small commands: `apiary --version` and `apiary pack validate` of a two-persona
//! pack, against a minimal Rust binary built by this bench (`rustc -O`, the same toolchain) that
//! does the least the same command can: print a version, or read every file of the pack and check
//! that each persona file has frontmatter. The two take turns, so load changes fall on both.
//!
//! Printed per command: the median wall time of each and their ratio (goal: within 1.5×), and per
//! run the page faults (minor + major, from the children's `getrusage`) and the dynamic loader's
//! relocations (`LD_DEBUG=statistics`).
//!
//! Run: `cargo build --release --bins && cargo bench -p apiary --bench startup`
//! (`APIARY_BENCH_ROUNDS`, default 41).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const GOAL: f64 = 1.5;

/// The baseline: what the command would do if it were nothing but the command.
const MINIMAL: &str = r#"
use std::path::Path;

fn read_all(dir: &Path, files: &mut usize, personas: &mut usize) {
    let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let path = e.path();
        if path.is_dir() {
            read_all(&path, files, personas);
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        *files += 1;
        if path.parent().and_then(|p| p.file_name()).is_some_and(|n| n == "personas") {
            assert!(text.starts_with("---"), "{} has no frontmatter", path.display());
            *personas += 1;
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--version") {
        println!("minimal 0.1.0");
        return;
    }
    let (mut files, mut personas) = (0, 0);
    read_all(Path::new(&args[2]), &mut files, &mut personas);
    println!("{}: {personas} personas, {files} files, 0 errors", args[2]);
}
"#;

fn main() {
    let rounds = std::env::var("APIARY_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(41);
    let apiary = PathBuf::from(env!("CARGO_BIN_EXE_apiary"));
    let tmp = tempfile::tempdir().expect("temp dir");
    let minimal = build_minimal(tmp.path());
    let pack = tmp.path().join("pack");
    let made = Command::new(&apiary)
        .args(["pack", "new"])
        .arg(&pack)
        .args([
            "--id",
            "com.example.bench",
            "--persona",
            "scout",
            "--persona",
            "scribe",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("apiary pack new");
    assert!(made.success(), "apiary pack new failed");
    let pack = pack.to_string_lossy().into_owned();

    println!(
        "start-up of small commands ({rounds} rounds, taking turns; medians; {} bytes of apiary)",
        std::fs::metadata(&apiary).map(|m| m.len()).unwrap_or(0)
    );
    println!(
        "  {:<34}{:>10}{:>10}{:>8}{:>9}{:>9}{:>10}{:>10}",
        "command", "apiary", "minimal", "ratio", "faults", "minimal", "relocs", "minimal"
    );
    let cases: [(&str, Vec<&str>); 2] = [
        ("--version", vec!["--version"]),
        (
            "pack validate, 2 personas",
            vec!["pack", "validate", pack.as_str()],
        ),
    ];
    for (label, args) in cases {
        let (ours, base) = taking_turns(rounds, &apiary, &minimal, &args);
        let ratio = ours.wall.as_secs_f64() / base.wall.as_secs_f64().max(1e-9);
        println!(
            "  {label:<34}{:>8.2}ms{:>8.2}ms{:>7.2}x{:>9}{:>9}{:>10}{:>10}   goal <= {GOAL}x: {}",
            ms(ours.wall),
            ms(base.wall),
            ratio,
            ours.faults,
            base.faults,
            relocations(&apiary, &args).map_or("-".into(), |n| n.to_string()),
            relocations(&minimal, &args).map_or("-".into(), |n| n.to_string()),
            if ratio <= GOAL { "met" } else { "NOT met" }
        );
    }
    println!(
        "\nfaults: minor + major page faults a run; relocs: what the dynamic loader processed \
         (LD_DEBUG=statistics). Load average: {}",
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
    );
}

/// Compiles [`MINIMAL`] with the toolchain that builds this bench.
fn build_minimal(dir: &Path) -> PathBuf {
    let src = dir.join("minimal.rs");
    std::fs::write(&src, MINIMAL).expect("write the minimal source");
    let out = dir.join("minimal");
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let status = Command::new(rustc)
        .args(["--edition", "2024", "-C", "opt-level=3", "-o"])
        .arg(&out)
        .arg(&src)
        .status()
        .expect("rustc runs");
    assert!(status.success(), "the minimal baseline did not compile");
    out
}

/// One program's median wall time and its page faults a run.
struct Measured {
    wall: Duration,
    faults: u64,
}

/// Runs `a` and `b` with `args` in turns, `rounds` times each.
fn taking_turns(rounds: usize, a: &Path, b: &Path, args: &[&str]) -> (Measured, Measured) {
    let (mut ta, mut tb) = (Vec::new(), Vec::new());
    let (mut fa, mut fb) = (0, 0);
    // One run each first: the page cache holds both binaries before anything is timed.
    run(a, args);
    run(b, args);
    for _ in 0..rounds {
        let (t, f) = run(a, args);
        ta.push(t);
        fa += f;
        let (t, f) = run(b, args);
        tb.push(t);
        fb += f;
    }
    let per = |f: u64| f / rounds as u64;
    (
        Measured {
            wall: median(ta),
            faults: per(fa),
        },
        Measured {
            wall: median(tb),
            faults: per(fb),
        },
    )
}

/// One run, output to /dev/null: its wall time and page faults.
fn run(program: &Path, args: &[&str]) -> (Duration, u64) {
    let before = child_faults();
    let start = Instant::now();
    let status = Command::new(program)
        .args(args)
        .env("APIARY_OVERRIDES", "")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("the command runs");
    let took = start.elapsed();
    assert!(status.success(), "{} {args:?} failed", program.display());
    (took, child_faults() - before)
}

/// Page faults of every child waited for so far.
fn child_faults() -> u64 {
    // SAFETY: getrusage writes one plain struct we own.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) };
    (usage.ru_minflt + usage.ru_majflt) as u64
}

/// The relocations the dynamic loader processed for one run (`LD_DEBUG=statistics`).
fn relocations(program: &Path, args: &[&str]) -> Option<u64> {
    let out = Command::new(program)
        .args(args)
        .env("APIARY_OVERRIDES", "")
        .env("LD_DEBUG", "statistics")
        .stdout(Stdio::null())
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stderr);
    // The first block is the program's start; the line is "number of relocations: N".
    text.lines()
        .find_map(|l| l.split("number of relocations:").nth(1))
        .and_then(|n| n.trim().parse().ok())
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
