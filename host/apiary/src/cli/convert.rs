//! `apiary convert`: turn a pack in one format into another through sandboxed converter
//! components, with the host detecting the input, validating the output and writing it atomically.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use serde_json::json;

use super::{exit, print_json};
use crate::convert::registry::{Origin, Registry};
use crate::convert::store::Store;
use crate::convert::{self, FORMATS, Job, Outcome};
use crate::sandbox::Sandbox;

const AFTER_HELP: &str = "\
Detection (without --from), in order, first match wins; a manifest these rules rely on that does
not parse refuses the input:
  1. expert.toml                                   -> duduclaw-expert
  2. .plugin/plugin.json with `personas`           -> buzz-pack (without: agent-plugins-draft)
  3. plugin.json with an Agent Plugins $schema     -> agent-plugins
  4. .claude-plugin/plugin.json                    -> claude-plugin
  5. .claude-plugin/marketplace.json               -> claude-marketplace
  6. .codex-plugin/, .cursor-plugin/plugin.json, gemini-extension.json
                                                   -> named; converted only if a converter reads it
  7. person.kdl or a .kdl whose first node is `roster`  -> agent-compose-package
  8. person.json with format agent-compose.person-snapshot.*  -> agent-compose-snapshot
  9. a bare SKILL.md, or agents/*.md only          -> claude-plugin (manifest-less)
When nothing matches and the input holds a single directory, the rules run once inside it. Then
added converters' `detect` may claim the input (confidence >= 0.5). Otherwise the input is refused
with a list of what was found.

A converter whose info lists the pair is used directly; otherwise two chain through buzz-pack
(A -> buzz-pack -> B), and the report tags each finding with its step. The input is copied into a
private directory (regular files only; a symlink leaving the input is refused); each converter sees
it read-only at /input and writes an empty /output. The output is validated (buzz-pack: the pack
validator; other known formats: manifest, names, referenced paths, layout) before it is moved to
--out (default: ./<input-name>.<format>). Nothing is written when any step fails.

Exit codes:
  0   converted; the report lists nothing as lost
  1   refused or failed (detection, converter error or misbehaviour, invalid output, destination)
  2   converted, but the report lists fields the target format could not hold (lost)
  64  the command line was wrong

Examples:
  apiary convert --list
  apiary convert ./my-claude-plugin --to buzz-pack
  apiary convert ./pack --to duduclaw-expert --out ./expert --force --json";

#[derive(Debug, Args)]
#[command(after_help = AFTER_HELP)]
pub struct ConvertArgs {
    /// The input directory.
    #[arg(required_unless_present = "list")]
    pub src: Option<PathBuf>,
    /// The format to write (see --list).
    #[arg(long, value_name = "FORMAT", required_unless_present = "list")]
    pub to: Option<String>,
    /// Where to write the result (default: ./<input-name>.<format>).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// The input format, skipping detection.
    #[arg(long, value_name = "FORMAT")]
    pub from: Option<String>,
    /// Replace a non-empty --out.
    #[arg(long)]
    pub force: bool,
    /// A converter-specific option, passed to every converter of the run (repeatable).
    #[arg(long = "option", value_name = "KEY=VALUE")]
    pub options: Vec<String>,
    /// Deadline per converter call, in seconds (default 30).
    #[arg(long, value_name = "SECS")]
    pub timeout: Option<u64>,
    /// List the available converters and the formats apiary knows.
    #[arg(long, conflicts_with_all = ["src", "to", "out", "from", "force"])]
    pub list: bool,
    /// Print the result as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

fn registry(timeout: Option<u64>) -> Result<(&'static Sandbox, Registry), u8> {
    let sb = crate::shared_sandbox().map_err(|e| {
        eprintln!("error: {e}");
        exit::FAILURE
    })?;
    let store = Store::new(&crate::paths::Data::locate().components());
    let deadline = timeout.map(|s| Duration::from_secs(s.clamp(1, 3600)));
    Ok((sb, Registry::load(sb, Some(&store), deadline)))
}

pub fn run(args: ConvertArgs) -> u8 {
    if args.list {
        return list(&args);
    }
    let (Some(src), Some(to)) = (args.src.clone(), args.to.clone()) else {
        eprintln!("error: give an input directory and --to FORMAT (or --list)");
        return exit::USAGE;
    };
    let mut options = Vec::new();
    for o in &args.options {
        match o.split_once('=') {
            Some((k, v)) if !k.is_empty() => options.push((k.to_string(), v.to_string())),
            _ => {
                eprintln!("error: --option {o:?} is not KEY=VALUE");
                return exit::USAGE;
            }
        }
    }
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| convert::stage::default_out(&src, &to));
    let (sb, reg) = match registry(args.timeout) {
        Ok(x) => x,
        Err(code) => return code,
    };
    for u in &reg.unavailable {
        tracing::warn!(
            "converter {} ({}) is unavailable: {}",
            u.name,
            u.origin,
            u.reason
        );
    }
    let job = Job {
        src,
        to,
        from: args.from.clone(),
        out,
        force: args.force,
        options,
    };
    let outcome = convert::convert(sb, &reg, &job);
    if args.json {
        print_json(&outcome);
    } else {
        print_human(&outcome, &reg);
    }
    match (&outcome.error, outcome.report.lost.is_empty()) {
        (Some(_), _) => exit::FAILURE,
        (None, true) => exit::OK,
        (None, false) => exit::WARNINGS,
    }
}

fn print_human(o: &Outcome, reg: &Registry) {
    use crate::convert::DetectedBy;
    if let (Some(format), Some(by)) = (&o.source_format, &o.detected_by) {
        match by {
            DetectedBy::Flag => println!("input: {format} (given by --from)"),
            DetectedBy::HostRule { evidence, .. } => println!("input: {format} ({evidence})"),
            DetectedBy::Converter {
                converter,
                confidence,
                evidence,
            } => println!(
                "input: {format} (claimed by {converter} with confidence {confidence:.2}: {evidence})"
            ),
        }
    }
    let chained = o.steps.len() > 1;
    for (i, s) in o.steps.iter().enumerate() {
        let origin = reg
            .get(&s.converter)
            .map(|c| format!("{} {}", c.version, c.origin))
            .unwrap_or_default();
        let n = if chained {
            format!("step {}: ", i + 1)
        } else {
            String::new()
        };
        println!(
            "{n}{} -> {} by {} ({origin})",
            s.source, s.target, s.converter
        );
    }
    for note in &o.notes {
        eprintln!("note: {note}");
    }
    for (group, findings) in o.report.groups() {
        if findings.is_empty() {
            continue;
        }
        println!("{group} ({}):", findings.len());
        for f in findings {
            let step = if chained {
                format!("step {} ", f.step)
            } else {
                String::new()
            };
            let place = match (f.path.is_empty(), f.field.is_empty()) {
                (true, true) => String::new(),
                (false, true) => format!(" {}", f.path),
                (true, false) => format!(" {}", f.field),
                (false, false) => format!(" {} {}", f.path, f.field),
            };
            println!("  {step}[{}]{place}: {}", f.code, f.message);
        }
    }
    if let Some(v) = &o.validation {
        for w in &v.warnings {
            println!("  validation warning: {} {}", w.path, w.message);
        }
    }
    match &o.error {
        None => {
            let counts: Vec<String> = o
                .report
                .groups()
                .iter()
                .map(|(g, l)| format!("{} {g}", l.len()))
                .collect();
            println!(
                "✓ converted {} ({}) to {} in {}; {}",
                o.source.display(),
                o.source_format.as_deref().unwrap_or("?"),
                o.target,
                o.output.display(),
                counts.join(", ")
            );
        }
        Some(e) => {
            eprintln!("error: {}", e.message);
            if let Some(v) = o.validation.as_ref().filter(|v| !v.ok()) {
                for p in &v.errors {
                    eprintln!("  invalid output: {} {}", p.path, p.message);
                }
            }
            if !e.found.is_empty() {
                eprintln!("found:");
                for f in &e.found {
                    eprintln!("  {f}");
                }
            }
            eprintln!("nothing was written to {}", o.output.display());
        }
    }
}

fn list(args: &ConvertArgs) -> u8 {
    let (_, reg) = match registry(args.timeout) {
        Ok(x) => x,
        Err(code) => return code,
    };
    if args.json {
        let converters: Vec<_> = reg
            .converters
            .iter()
            .map(|c| {
                json!({
                    "name": c.name,
                    "version": c.version,
                    "origin": c.origin,
                    "digest": c.digest,
                    "conversions": c.conversions.iter().map(|(s, t)| json!({"source": s, "target": t})).collect::<Vec<_>>(),
                })
            })
            .collect();
        let formats: Vec<_> = FORMATS
            .iter()
            .map(|(id, about)| json!({"id": id, "about": about}))
            .collect();
        print_json(&json!({
            "converters": converters,
            "unavailable": reg.unavailable,
            "formats": formats,
        }));
        return exit::OK;
    }
    if reg.converters.is_empty() {
        println!("no converters available");
    } else {
        println!("Converters:");
    }
    for c in &reg.converters {
        let from = match &c.origin {
            Origin::BuiltIn => "built in".to_string(),
            Origin::Added { source } => format!("added from {}", source.display()),
        };
        println!("  {} {} ({from})", c.name, c.version);
        let pairs: Vec<String> = c
            .conversions
            .iter()
            .map(|(s, t)| format!("{s} -> {t}"))
            .collect();
        println!("    {}", pairs.join(", "));
    }
    if !reg.unavailable.is_empty() {
        println!("Unavailable:");
        for u in &reg.unavailable {
            println!("  {} ({}): {}", u.name, u.origin, u.reason);
        }
    }
    println!("Formats apiary detects:");
    let width = FORMATS.iter().map(|(id, _)| id.len()).max().unwrap_or(0);
    for (id, about) in FORMATS {
        println!("  {id:width$}  {about}");
    }
    exit::OK
}
