//! `apiary convert DIR --survey`: the survey's summary as text or `--json`, and its exit code (the
//! worst of its conversions').

use std::io::{self, Write};

use serde::Serialize;

use super::convert::{ConvertArgs, options, registry};
use super::exit;
use super::output::{Document, Failed, Human, Outcome};
use crate::convert::survey::{self, Summary};
use crate::convert::{self as conv};

/// What `--survey` found.
pub(super) struct Surveyed(Summary);

pub(super) fn run(args: &ConvertArgs) -> Result<Surveyed, Failed> {
    let Some(root) = &args.src else {
        return Err(Failed::usage("give the directory to survey"));
    };
    if !root.is_dir() {
        return Err(Failed::error(format_args!(
            "{} is not a directory",
            root.display()
        )));
    }
    let to = conv::canonical_format(args.to.as_deref().unwrap_or("buzz-pack")).to_string();
    let options = options(args)?;
    let (sb, reg) = registry(args.timeout)?;
    let quiet = args.json;
    let keep = args.out.as_deref();
    if let Some(dir) = keep {
        std::fs::create_dir_all(dir)
            .map_err(|e| Failed::error(format_args!("cannot create {}: {e}", dir.display())))?;
    }
    let summary = survey::survey(sb, &reg, root, &to, &options, keep, |row| {
        if !quiet {
            // Progress for the person watching a long survey; the summary follows on stdout.
            let exit = row.exit.map_or("-".to_string(), |c| c.to_string());
            let plugin = row
                .plugin
                .as_deref()
                .map_or(String::new(), |p| format!(" plugin={p}"));
            let out = row
                .out
                .as_ref()
                .map_or(String::new(), |o| format!(" -> {}", o.display()));
            eprintln!("  [{exit}] {}{plugin}{out}", row.input);
        }
    })
    .map_err(|e| Failed::error(format_args!("cannot create a work directory: {e}")))?;
    if summary.conversions == 0 && summary.already == 0 {
        return Err(Failed::error(format_args!(
            "found nothing to convert under {} (no directory the detection rules recognise; see --help)",
            root.display()
        )));
    }
    Ok(Surveyed(summary))
}

impl Serialize for Surveyed {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

impl Outcome for Surveyed {
    fn human(&self, to: &mut Human<'_>) -> io::Result<()> {
        let s = &self.0;
        let out = &mut *to.out;
        writeln!(
            out,
            "surveyed {}: {} conversion(s) to {}",
            s.root.display(),
            s.conversions,
            s.target
        )?;
        if s.already > 0 || s.remote > 0 {
            writeln!(
                out,
                "  not converted: {} already {}, {} remote marketplace entr{}",
                s.already,
                s.target,
                s.remote,
                if s.remote == 1 { "y" } else { "ies" }
            )?;
        }
        write_exits(out, s)?;
        write_formats(out, s)?;
        write_findings(out, s)?;
        if !s.errors.is_empty() {
            writeln!(out, "refused or failed, by error code:")?;
            for (code, n) in &s.errors {
                writeln!(out, "  {code:<16} {n}")?;
            }
        }
        Ok(())
    }

    fn json(&self) -> Option<&dyn Document> {
        Some(self)
    }

    fn exit_code(&self) -> u8 {
        let has = |code: u8| self.0.by_exit.get(&code).is_some_and(|n| *n > 0);
        if has(1) {
            exit::FAILURE
        } else if has(2) {
            exit::WARNINGS
        } else {
            exit::OK
        }
    }
}

fn write_exits(out: &mut dyn Write, s: &Summary) -> io::Result<()> {
    writeln!(out, "by exit code:")?;
    for (code, what) in [
        (0, "converted, nothing lost"),
        (2, "converted, something lost"),
        (1, "refused or failed"),
    ] {
        let n = s.by_exit.get(&code).copied().unwrap_or(0);
        writeln!(out, "  {code}  {n:>5}  {what}")?;
    }
    Ok(())
}

fn write_formats(out: &mut dyn Write, s: &Summary) -> io::Result<()> {
    writeln!(out, "by input format (exit 0 / 2 / 1):")?;
    let width = s.by_format.keys().map(String::len).max().unwrap_or(0);
    for (format, exits) in &s.by_format {
        let n = |c: u8| exits.get(&c).copied().unwrap_or(0);
        writeln!(out, "  {format:<width$}  {} / {} / {}", n(0), n(2), n(1))?;
    }
    Ok(())
}

/// Finding codes per report list, most frequent first.
fn write_findings(out: &mut dyn Write, s: &Summary) -> io::Result<()> {
    for (list, codes) in &s.findings {
        writeln!(out, "{list} findings (findings, in conversions):")?;
        let mut codes: Vec<_> = codes.iter().collect();
        codes.sort_by(|a, b| b.1.findings.cmp(&a.1.findings).then(a.0.cmp(b.0)));
        let width = codes.iter().map(|(c, _)| c.len()).max().unwrap_or(0);
        for (code, c) in codes {
            writeln!(
                out,
                "  {code:<width$}  {:>5}  in {}",
                c.findings, c.conversions
            )?;
        }
    }
    Ok(())
}
