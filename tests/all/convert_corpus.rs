//! End-to-end bulk run: every item of the shared corpus a user could point `apiary convert` at
//! (each plugin, pack, expert, roster, person package and skill case, each top-level folder and
//! the corpus root) through `apiary convert <item> --to buzz-pack --json`, and each buzz pack to
//! every other format. The process never panics or traps; every result is either converted with
//! a clean validation record, or refused with a structured kind and a reason, and then nothing is
//! written. The items run in a few threads, one `apiary` process each.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use apiary_e2e::{Operator, Run, corpus, snapshot};
use serde_json::Value;

use crate::support::tree_diff::{self, Difference, Tally};

/// `error.kind` values `apiary convert --json` documents.
const KINDS: &[&str] = &[
    "input",
    "destination",
    "detection",
    "no-converter",
    "same-format",
    "converter",
    "output",
    "validation",
    "write",
];

/// Formats a buzz pack is converted to.
const TARGETS: &[&str] = &[
    "agent-plugins",
    "claude-plugin",
    "duduclaw-expert",
    "agent-compose-package",
];

const BUZZ_PACKS: &[&str] = &[
    "buzz-packs/block-buzz/crates/buzz-persona/packs/sms-operator",
    "buzz-packs/syncreus-hivepack/packs/community-squad",
    "buzz-packs/syncreus-hivepack/packs/ship-squad",
];

fn subdirs(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    v.sort();
    v
}

/// `(input, target)` for every conversion of the run.
fn items(root: &Path) -> Vec<(PathBuf, &'static str)> {
    let mut inputs = vec![root.to_path_buf()];
    inputs.extend(subdirs(root));
    for dir in [
        "claude-subagents/categories",
        "claude-plugins-official/plugins",
        "claude-plugins-official/external_plugins",
        "duduclaw-packs/distribution/packs",
        "duduclaw-packs/templates",
        "duduclaw-packs/templates/presets",
        "agent-compose-person/examples",
        "agent-skills-spec/skills-ref-cases",
        "ops-spec",
    ] {
        inputs.extend(subdirs(&root.join(dir)));
    }
    for dir in [
        "agent-compose-person/internal/person",
        "agent-compose-person/testdata/contracts",
        "agent-compose-person/testdata/contracts/person-independent",
        "duduclaw-packs/distribution/packs",
        "claude-subagents/categories",
        "buzz-packs/syncreus-hivepack/packs",
    ] {
        inputs.push(root.join(dir));
    }
    inputs.extend(BUZZ_PACKS.iter().map(|p| root.join(p)));
    inputs.sort();
    inputs.dedup();
    let mut items: Vec<(PathBuf, &'static str)> =
        inputs.into_iter().map(|p| (p, "buzz-pack")).collect();
    for pack in BUZZ_PACKS {
        for to in TARGETS {
            items.push((root.join(pack), to));
        }
    }
    items
}

/// What one conversion gave, checked.
struct Outcome {
    item: String,
    to: &'static str,
    ok: bool,
    /// `error.kind`, or the lost count when converted.
    detail: String,
    /// The input format (`?` when detection refused).
    format: String,
    /// Findings listed as lost.
    lost: usize,
    /// For a conversion into a pack: whether converting the pack back to the input's format gives
    /// the input's files byte for byte (`None` when there is no way back to try).
    round_trip: Option<bool>,
    /// When it does not: what differs.
    trip_diffs: Vec<Difference>,
}

/// Formats a pack converts back to, for the round-trip check.
const ROUND_TRIP: &[&str] = &[
    "claude-plugin",
    "agent-plugins",
    "duduclaw-expert",
    "agent-compose-package",
];

/// Whether `pack` converted back to `format` holds exactly the files of `src`, and what differs
/// when it does not.
fn round_trip(
    op: &Operator,
    n: usize,
    src: &Path,
    pack: &Path,
    format: &str,
) -> Option<(bool, Vec<Difference>)> {
    if !ROUND_TRIP.contains(&format) {
        return None;
    }
    let back = op.path(&format!("back-{n}"));
    let r = op.run(&[
        "convert",
        &pack.display().to_string(),
        "--to",
        format,
        "--json",
        "--out",
        &back.display().to_string(),
    ]);
    let diffs = if r.code == 1 {
        let why = r.json()["error"]["code"]
            .as_str()
            .unwrap_or("?")
            .to_string();
        vec![Difference {
            class: format!("way back refused ({why})"),
            file: String::new(),
        }]
    } else {
        tree_diff::differences(&snapshot(src, &[".git"]), &snapshot(&back, &[]))
    };
    let same = r.code != 1 && diffs.is_empty();
    std::fs::remove_dir_all(&back).ok();
    Some((same, diffs))
}

/// Runs one item and checks the contract; returns a description of any breach.
fn check(op: &Operator, n: usize, src: &Path, to: &'static str) -> Result<Outcome, String> {
    let out = op.path(&format!("out-{n}"));
    let mut cmd = op.command();
    cmd.args([
        "convert",
        &src.display().to_string(),
        "--to",
        to,
        "--json",
        "--out",
    ])
    .arg(&out);
    let r = Run::of(cmd);
    let item = src
        .strip_prefix(corpus())
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    let item = if item.is_empty() {
        "(corpus root)".to_string()
    } else {
        item
    };
    let what = format!("{item} -> {to}");
    if r.code == 101 || r.stderr.contains("panicked") {
        return Err(format!("{what}: panicked (exit {}):\n{}", r.code, r.stderr));
    }
    if !matches!(r.code, 0..=2) {
        return Err(format!(
            "{what}: exit {} (killed or crashed):\n{}",
            r.code, r.stderr
        ));
    }
    let v: Value = serde_json::from_str(&r.stdout).map_err(|e| {
        format!(
            "{what}: stdout is not JSON ({e}):\n{}\n{}",
            r.stdout, r.stderr
        )
    })?;
    let ok = v["ok"]
        .as_bool()
        .ok_or_else(|| format!("{what}: no `ok` in {v}"))?;
    if ok {
        let lost = v["report"]["lost"].as_array().map_or(0, Vec::len);
        let expected = if lost == 0 { 0 } else { 2 };
        let validation = &v["validation"];
        let clean = validation["format"] == to
            && validation["errors"].as_array().is_some_and(Vec::is_empty)
            && validation["checks"].is_string();
        // Converters write only schema keys into a pack (foreign data goes under `x-…`).
        let unknown = crate::convert_schema::unknown_keys(validation);
        if to == "buzz-pack" && !unknown.is_empty() {
            return Err(format!("{what}: keys outside the pack schema: {unknown:?}"));
        }
        if r.code != expected || !clean || !v["error"].is_null() || !out.is_dir() {
            return Err(format!(
                "{what}: converted but exit {} (expected {expected}), validation {validation}, output written: {}",
                r.code,
                out.is_dir()
            ));
        }
        let format = v["source_format"].as_str().unwrap_or("?").to_string();
        let trip = if to == "buzz-pack" {
            // Compared from the directory detection converted (a wrapper folder is not part of it).
            let root = v["detected_by"]["root"].as_str().unwrap_or_default();
            round_trip(op, n, &src.join(root), &out, &format)
        } else {
            None
        };
        let (round_trip, trip_diffs) = match trip {
            Some((same, diffs)) => (Some(same), diffs),
            None => (None, Vec::new()),
        };
        std::fs::remove_dir_all(&out).ok();
        return Ok(Outcome {
            item,
            to,
            ok,
            detail: format!("{lost} lost"),
            format,
            lost,
            round_trip,
            trip_diffs,
        });
    }
    let e = &v["error"];
    let kind = e["code"].as_str().unwrap_or_default();
    let message = e["message"].as_str().unwrap_or_default();
    if r.code != 1 || !KINDS.contains(&kind) || message.trim().is_empty() {
        return Err(format!(
            "{what}: refusal without a structured kind and reason (exit {}): {e}",
            r.code
        ));
    }
    // A built-in converter may refuse an input (its own error result), never be contained.
    if let Some(sk) = e["sandbox_code"].as_str()
        && sk != "guest-error"
    {
        return Err(format!(
            "{what}: the sandbox contained a built-in converter ({sk}): {message}"
        ));
    }
    // Built-in converters must write what the host accepts.
    if matches!(kind, "output" | "validation") && !message.contains("--option plugin=") {
        return Err(format!(
            "{what}: a built-in converter wrote a refused output: {message}"
        ));
    }
    if out.exists() {
        return Err(format!(
            "{what}: refused, yet {} was written",
            out.display()
        ));
    }
    Ok(Outcome {
        item,
        to,
        ok,
        detail: format!("{kind}: {}", message.chars().take(120).collect::<String>()),
        format: v["source_format"].as_str().unwrap_or("?").to_string(),
        lost: 0,
        round_trip: None,
        trip_diffs: Vec::new(),
    })
}

#[test]
fn every_corpus_item_converts_or_is_refused_with_a_reason() {
    let root = corpus();
    let items = items(&root);
    assert!(items.len() >= 100, "{} items", items.len());
    // Warms the compile cache before the threads race to.
    let op = Operator::new();

    let started = Instant::now();
    let next = AtomicUsize::new(0);
    let results = Mutex::new(Vec::new());
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get().clamp(2, 4));
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                loop {
                    let n = next.fetch_add(1, Ordering::Relaxed);
                    let Some((src, to)) = items.get(n) else { break };
                    let r = check(&op, n, src, to);
                    results.lock().unwrap().push(r);
                }
            });
        }
    });
    let secs = started.elapsed().as_secs_f64();
    let results = results.into_inner().unwrap();
    let (mut good, mut breaches): (Vec<Outcome>, Vec<String>) = (Vec::new(), Vec::new());
    for r in results {
        match r {
            Ok(o) => good.push(o),
            Err(e) => breaches.push(e),
        }
    }
    good.sort_by(|a, b| (&a.item, a.to).cmp(&(&b.item, b.to)));
    for o in &good {
        let mark = if o.ok { "converted" } else { "refused" };
        println!("{mark:9} {} -> {}: {}", o.item, o.to, o.detail);
    }
    let converted = good.iter().filter(|o| o.ok).count();
    print_by_format(&good);
    println!(
        "{} items in {secs:.1}s with {threads} threads: {converted} converted, {} refused with a reason, {} breaches",
        items.len(),
        good.len() - converted,
        breaches.len()
    );
    assert!(breaches.is_empty(), "{}", breaches.join("\n\n"));
    // The corpus is mostly convertible: every Claude plugin, expert, roster and buzz pack.
    assert!(converted >= 70, "only {converted} converted");
    // The case the Agent Plugins layout conflict broke: carried x-claude/ now travels in the
    // converter's namespace directory.
    assert!(
        good.iter()
            .any(|o| o.ok && o.item == "multi-host-plugin" && o.to == "buzz-pack"),
        "multi-host-plugin -> buzz-pack"
    );
}

/// Per input format, for conversions into a pack: converted clean, converted with losses,
/// refused, and how many came back byte for byte when converted back (the table in
/// docs/pack-authors.md).
fn print_by_format(outcomes: &[Outcome]) {
    let mut formats: Vec<&str> = outcomes
        .iter()
        .filter(|o| o.to == "buzz-pack")
        .map(|o| o.format.as_str())
        .collect();
    formats.sort_unstable();
    formats.dedup();
    println!("| input format | clean | with losses | refused | round trip equal |");
    println!("|---|---|---|---|---|");
    for f in formats {
        let of: Vec<&Outcome> = outcomes
            .iter()
            .filter(|o| o.to == "buzz-pack" && o.format == f)
            .collect();
        let clean = of.iter().filter(|o| o.ok && o.lost == 0).count();
        let lossy = of.iter().filter(|o| o.ok && o.lost > 0).count();
        let refused = of.iter().filter(|o| !o.ok).count();
        let tried = of.iter().filter(|o| o.round_trip.is_some()).count();
        let equal = of.iter().filter(|o| o.round_trip == Some(true)).count();
        let trip = if tried == 0 {
            "-".to_string()
        } else {
            format!("{equal}/{tried}")
        };
        println!("| {f} | {clean} | {lossy} | {refused} | {trip} |");
    }
    for o in outcomes.iter().filter(|o| !o.ok) {
        println!("refused {} ({}): {}", o.item, o.format, o.detail);
    }
    print_round_trip_breakdown(outcomes);
}

/// Why round trips are not byte-equal: each class of difference, how many round trips it
/// affects, and one example; then every unequal round trip's differences.
fn print_round_trip_breakdown(outcomes: &[Outcome]) {
    let mut tally = Tally::default();
    let unequal: Vec<&Outcome> = outcomes
        .iter()
        .filter(|o| o.round_trip == Some(false))
        .collect();
    for o in &unequal {
        tally.add(&o.item, &o.trip_diffs);
    }
    let mut rows: Vec<_> = tally.by_class.iter().collect();
    rows.sort_by(|a, b| b.1.0.cmp(&a.1.0).then(a.0.cmp(b.0)));
    println!(
        "why {} round trips are not byte-equal (round trips affected per class):",
        unequal.len()
    );
    println!("| difference | round trips | example |");
    println!("|---|---|---|");
    for (class, (n, example)) in rows {
        println!("| {class} | {n} | {example} |");
    }
    for o in unequal {
        let diffs: Vec<String> = o
            .trip_diffs
            .iter()
            .map(|d| format!("{} ({})", d.file, d.class))
            .collect();
        println!("round trip {}: {}", o.item, diffs.join("; "));
    }
}

/// The multi-host plugin to Agent Plugins and back to Claude: its `x-claude/` survives both steps.
#[test]
fn multi_host_plugin_round_trips_through_agent_plugins() {
    let op = Operator::new();
    let src = corpus().join("multi-host-plugin");
    let ops = op.path("ops");
    let r = op.run(&[
        "convert",
        &src.display().to_string(),
        "--to",
        "agent-plugins",
        "--out",
        &ops.display().to_string(),
        "--json",
    ]);
    let v = r.json();
    assert_eq!(v["ok"], true, "{v:#}\n{}", r.stderr);
    assert_eq!(v["validation"]["errors"], serde_json::json!([]));
    let ns = ops.join("dev.apiary.persona-pack");
    assert!(
        ns.join("x-claude").is_dir(),
        "x-claude/ under the namespace"
    );
    assert!(!ops.join("x-claude").exists());

    let back = op.path("claude");
    let r = op.run(&[
        "convert",
        &ops.display().to_string(),
        "--to",
        "claude-plugin",
        "--out",
        &back.display().to_string(),
        "--json",
    ]);
    let v = r.json();
    assert_eq!(v["ok"], true, "{v:#}\n{}", r.stderr);
    assert!(back.join(".claude-plugin/plugin.json").is_file());
    assert!(!back.join("dev.apiary.persona-pack").exists());
    // Every skill of the original plugin is back under skills/.
    for skill in subdirs(&src.join("skills")) {
        let name = skill.file_name().unwrap();
        assert!(
            back.join("skills").join(name).join("SKILL.md").is_file(),
            "{}",
            name.to_string_lossy()
        );
    }
}
