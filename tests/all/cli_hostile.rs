//! The command line as an attacker writes it (issue 32, finding 10): every numeric flag of every
//! command, found from the help itself so that a flag added later is covered too, given the
//! largest u64. Each is refused as a usage error (64) naming its range, or the command runs
//! cleanly; nothing panics (101).

use std::path::Path;

use apiary_e2e::{Run, apiary};

/// What a numeric flag's value is called in the help.
const NUMERIC: &[&str] = &["SECS", "N", "BYTES", "MS"];
const HUGE: &str = "18446744073709551615";

/// `apiary <path> --help`.
fn help(home: &Path, path: &[String]) -> String {
    let mut cmd = apiary(home);
    cmd.args(path).arg("--help");
    let run = Run::of(cmd);
    assert_eq!(run.code, 0, "{path:?} --help: {}", run.stderr);
    run.stdout
}

/// The subcommands a help lists (`help` aside).
fn subcommands(text: &str) -> Vec<String> {
    text.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_string)
        .collect()
}

/// The flags of a help whose value is a number.
fn numeric_flags(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter(|l| l.starts_with('-'))
        .flat_map(|l| l.split(", "))
        .filter_map(|opt| {
            let (flag, value) = opt.split_once(" <")?;
            let value = value.split('>').next()?;
            (flag.starts_with("--") && NUMERIC.contains(&value)).then(|| flag.to_string())
        })
        .collect()
}

/// Every command path with its numeric flags.
fn commands(home: &Path) -> Vec<(Vec<String>, Vec<String>)> {
    let mut out = Vec::new();
    let mut todo: Vec<Vec<String>> = vec![vec![]];
    while let Some(path) = todo.pop() {
        let text = help(home, &path);
        let subs = subcommands(&text);
        if subs.is_empty() {
            out.push((path.clone(), numeric_flags(&text)));
        }
        for s in subs {
            let mut p = path.clone();
            p.push(s);
            todo.push(p);
        }
    }
    out
}

/// Arguments that let a command get as far as using its flags (without them most would stop
/// at a missing argument first).
fn base_args(path: &[String]) -> Vec<String> {
    let dead = "ws://127.0.0.1:9".to_string();
    let words: Vec<&str> = path.iter().map(String::as_str).collect();
    match words.as_slice() {
        ["up"] => vec!["--listen".into(), "127.0.0.1:0".into()],
        ["tail"] => vec!["--channel".into(), "general".into(), "--relay".into(), dead],
        ["relay"] => vec![
            "--listen".into(),
            "127.0.0.1:0".into(),
            "--ephemeral".into(),
        ],
        ["convert"] => vec!["--list".into()],
        _ => vec![],
    }
}

#[test]
fn no_numeric_flag_panics_on_the_largest_number() {
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    let found = commands(home);
    let flags: usize = found.iter().map(|(_, f)| f.len()).sum();
    // The durations and counts of up, tail, relay and convert at least.
    assert!(flags >= 15, "{found:#?}");
    for (path, flags) in &found {
        for flag in flags {
            let mut cmd = apiary(home);
            cmd.args(path)
                .args(base_args(path))
                .args([flag.as_str(), HUGE]);
            let run = Run::killed_after(cmd, 10);
            let what = format!("apiary {} {flag} {HUGE}", path.join(" "));
            assert_ne!(run.code, 101, "{what} panicked:\n{}", run.stderr);
            assert!(!run.stderr.contains("panicked"), "{what}:\n{}", run.stderr);
            assert_eq!(run.code, 64, "{what}: {}\n{}", run.stdout, run.stderr);
            // The refusal names the flag and says what it takes.
            assert!(
                run.stderr.contains(flag.as_str()) && run.stderr.contains(" to "),
                "{what}: {}",
                run.stderr
            );
        }
    }
}
