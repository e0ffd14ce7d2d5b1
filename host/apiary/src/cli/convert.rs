//! `apiary convert`: turn a pack in one format into another through sandboxed converter
//! components, with the host detecting the input, validating the output and writing it atomically.

use std::io::{self, Write};
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use serde::Serialize;

use super::exit;
use super::output::{Document, Failed, Human, Outcome, render};
use crate::convert::registry::{Origin, Registry, Unavailable};
use crate::convert::store::Store;
use crate::convert::{self, FORMATS, Job, Outcome as Conversion};
use crate::sandbox::Sandbox;

const AFTER_HELP: &str = "\
Detection (without --from), in order, first match wins; a manifest these rules rely on that does
not parse refuses the input:
  1. expert.toml                                   -> duduclaw-expert
  2. .plugin/plugin.json with `personas`           -> buzz-pack (without: agent-plugins-draft)
  3. plugin.json with an Agent Plugins $schema     -> agent-plugins
  4. .claude-plugin/plugin.json                    -> claude-plugin
  5. .claude-plugin/, .github/plugin/ or .agents/plugins/marketplace.json
                                                   -> claude-marketplace
  6. .codex-plugin/, .cursor-plugin/plugin.json, gemini-extension.json
                                                   -> codex-plugin, cursor-plugin, gemini-extension
  7. .github/plugin/plugin.json, or plugin.json naming components (no Agent Plugins $schema)
                                                   -> claude-plugin (a GitHub Copilot CLI plugin)
  8. person.kdl or a .kdl whose first node is `roster`  -> agent-compose-package
  9. person.json with format agent-compose.person-snapshot.*  -> agent-compose-snapshot
 10. a bare SKILL.md, or agents/*.md only          -> claude-plugin (manifest-less)
 11. top-level .md files with name/description frontmatter (or one such file as the input)
                                                   -> agents-dir
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

Survey (--survey): every plugin under the input directory is converted in one process, as you
would convert it yourself, and nothing is written unless --out names a directory to keep them in
(each conversion that succeeds in DIR/<plugin-name>, `-2`, `-3`, ... when a name repeats; an
existing one is not replaced). One conversion is a directory the rules above
recognise (not searched further), or, for a marketplace, each plugin it lists with a local source
(converted with --option plugin=NAME, so what the marketplace holds for it is found); any other
directory is searched below (hidden ones skipped). The summary counts conversions per exit code
(as above), per input format, per finding code (how many findings, in how many conversions) and
failures per error code; inputs already in the target format and remote marketplace entries are
counted apart. --json prints the summary with one row per conversion. Its exit code is the worst
of the conversions': 0 all converted with nothing lost, 2 some lost something, 1 some were refused
or failed (or nothing was found to convert).

Examples:
  apiary convert --list
  apiary convert ./my-claude-plugin --to buzz-pack
  apiary convert ./pack --to duduclaw-expert --out ./expert --force --json
  apiary convert ./collections --survey
  apiary convert ./collections --survey --to agent-plugins --json
  apiary convert ./marketplace --survey --out ./packs     # every plugin, kept as a pack";

#[derive(Debug, Args)]
#[command(after_help = AFTER_HELP)]
pub struct ConvertArgs {
    /// The input directory (or one agent .md file).
    #[arg(required_unless_present = "list")]
    pub src: Option<PathBuf>,
    /// The format to write (see --list; `claude` stands for claude-plugin; with --survey,
    /// buzz-pack unless given).
    #[arg(long, value_name = "FORMAT", required_unless_present_any = ["list", "survey"])]
    pub to: Option<String>,
    /// Where to write the result (default: ./<input-name>.<format>); with --survey, the
    /// directory each conversion is kept in, one subdirectory per plugin.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// The input format, skipping detection.
    #[arg(long, value_name = "FORMAT")]
    pub from: Option<String>,
    /// Replace a non-empty --out.
    #[arg(long)]
    pub force: bool,
    /// A converter-specific option, passed to every converter of the run (repeatable); a value
    /// `@FILE` is read from FILE (e.g. `--option overlay=@overlay.json` for agent-compose).
    #[arg(long = "option", value_name = "KEY=VALUE")]
    pub options: Vec<String>,
    /// Deadline per converter call, in seconds (default 30).
    #[arg(long, value_name = "SECS", value_parser = super::bounded::secs::<u64>(1, 3600))]
    pub timeout: Option<u64>,
    /// List the available converters and the formats apiary knows.
    #[arg(long, conflicts_with_all = ["src", "to", "out", "from", "force"])]
    pub list: bool,
    /// Convert every plugin under the input directory, in one process, writing nothing (or,
    /// with --out, keeping each), and print counts per exit code, input format and finding code
    /// (see below).
    #[arg(long, conflicts_with_all = ["from", "force", "list"])]
    pub survey: bool,
    /// Print the result as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

pub(super) fn registry(timeout: Option<u64>) -> Result<(&'static Sandbox, Registry), Failed> {
    let sb = crate::shared_sandbox().map_err(Failed::error)?;
    let store = Store::new(&crate::paths::Data::locate().components());
    let deadline = timeout.map(|s| Duration::from_secs(s.clamp(1, 3600)));
    Ok((sb, Registry::load(sb, Some(&store), deadline)))
}

pub fn run(args: ConvertArgs) -> u8 {
    if args.list {
        return render(&list(&args), args.json);
    }
    render(&convert(&args), args.json)
}

/// `--option KEY=VALUE`s, a value `@FILE` read from FILE.
pub(super) fn options(args: &ConvertArgs) -> Result<Vec<(String, String)>, Failed> {
    let mut options = Vec::new();
    for o in &args.options {
        match o.split_once('=') {
            Some((k, v)) if !k.is_empty() => options.push((k.to_string(), option_value(v)?)),
            _ => {
                return Err(Failed::usage(format_args!(
                    "--option {o:?} is not KEY=VALUE"
                )));
            }
        }
    }
    Ok(options)
}

/// `convert`: the conversion's outcome, whether it succeeded or not.
pub(super) struct Converted {
    outcome: Conversion,
    /// Per step: the converter's version and origin (`1.0.0 built in`).
    origins: Vec<String>,
}

fn convert(args: &ConvertArgs) -> Result<Converted, Failed> {
    let (Some(src), Some(to)) = (args.src.clone(), args.to.clone()) else {
        return Err(Failed::usage(
            "give an input directory and --to FORMAT (or --list)",
        ));
    };
    let options = options(args)?;
    let to = convert::canonical_format(&to).to_string();
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| convert::stage::default_out(&src, &to));
    let (sb, reg) = registry(args.timeout)?;
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
        from: args
            .from
            .as_deref()
            .map(|f| convert::canonical_format(f).to_string()),
        out,
        force: args.force,
        options,
    };
    let outcome = convert::convert(sb, &reg, &job);
    let origins = outcome
        .steps
        .iter()
        .map(|s| {
            reg.get(&s.converter)
                .map(|c| format!("{} {}", c.version, c.origin))
                .unwrap_or_default()
        })
        .collect();
    Ok(Converted { outcome, origins })
}

impl Serialize for Converted {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.outcome.serialize(serializer)
    }
}

impl Outcome for Converted {
    fn human(&self, to: &mut Human<'_>) -> io::Result<()> {
        let o = &self.outcome;
        write_input(to.out, o)?;
        let chained = o.steps.len() > 1;
        for (i, (s, origin)) in o.steps.iter().zip(&self.origins).enumerate() {
            let n = if chained {
                format!("step {}: ", i + 1)
            } else {
                String::new()
            };
            writeln!(
                to.out,
                "{n}{} -> {} by {} ({origin})",
                s.source, s.target, s.converter
            )?;
        }
        for note in &o.notes {
            writeln!(to.err, "note: {note}")?;
        }
        write_findings(to.out, o, chained)?;
        match &o.error {
            None => write_converted(to.out, o),
            Some(e) => write_failure(to.err, o, e),
        }
    }

    fn json(&self) -> Option<&dyn Document> {
        Some(self)
    }

    fn exit_code(&self) -> u8 {
        match (&self.outcome.error, self.outcome.report.lost.is_empty()) {
            (Some(_), _) => exit::FAILURE,
            (None, true) => exit::OK,
            (None, false) => exit::WARNINGS,
        }
    }
}

/// The input format and how it was told.
fn write_input(out: &mut dyn Write, o: &Conversion) -> io::Result<()> {
    use crate::convert::DetectedBy;
    let (Some(format), Some(by)) = (&o.source_format, &o.detected_by) else {
        return Ok(());
    };
    match by {
        DetectedBy::Flag => writeln!(out, "input: {format} (given by --from)"),
        DetectedBy::HostRule { evidence, .. } => writeln!(out, "input: {format} ({evidence})"),
        DetectedBy::Converter {
            converter,
            confidence,
            evidence,
        } => writeln!(
            out,
            "input: {format} (claimed by {converter} with confidence {confidence:.2}: {evidence})"
        ),
    }
}

/// The report's findings by group, then the output's validation warnings.
fn write_findings(out: &mut dyn Write, o: &Conversion, chained: bool) -> io::Result<()> {
    for (group, findings) in o.report.groups() {
        if findings.is_empty() {
            continue;
        }
        writeln!(out, "{group} ({}):", findings.len())?;
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
            writeln!(out, "  {step}[{}]{place}: {}", f.code, f.message)?;
        }
    }
    if let Some(v) = &o.validation {
        for w in &v.warnings {
            writeln!(out, "  validation warning: {} {}", w.path, w.message)?;
        }
    }
    Ok(())
}

fn write_converted(out: &mut dyn Write, o: &Conversion) -> io::Result<()> {
    let counts: Vec<String> = o
        .report
        .groups()
        .iter()
        .map(|(g, l)| format!("{} {g}", l.len()))
        .collect();
    writeln!(
        out,
        "✓ converted {} ({}) to {} in {}; {}",
        o.source.display(),
        o.source_format.as_deref().unwrap_or("?"),
        o.target,
        o.output.display(),
        counts.join(", ")
    )
}

fn write_failure(err: &mut dyn Write, o: &Conversion, e: &convert::Failure) -> io::Result<()> {
    writeln!(err, "error: {}", e.message)?;
    if let Some(v) = o.validation.as_ref().filter(|v| !v.ok()) {
        for p in &v.errors {
            writeln!(err, "  invalid output: {} {}", p.path, p.message)?;
        }
    }
    if !e.found.is_empty() {
        writeln!(err, "found:")?;
        for f in &e.found {
            writeln!(err, "  {f}")?;
        }
    }
    writeln!(err, "nothing was written to {}", o.output.display())
}

/// `convert --list`: the converters, those that could not be loaded, and the formats apiary knows.
#[derive(Serialize)]
pub(super) struct Converters {
    converters: Vec<ConverterRow>,
    unavailable: Vec<Unavailable>,
    #[serde(serialize_with = "formats_json")]
    formats: &'static [(&'static str, &'static str)],
}

#[derive(Serialize)]
struct ConverterRow {
    name: String,
    version: String,
    origin: Origin,
    digest: String,
    #[serde(serialize_with = "super::components::conversions_json")]
    conversions: Vec<(String, String)>,
}

fn formats_json<S: serde::Serializer>(
    formats: &[(&'static str, &'static str)],
    s: S,
) -> Result<S::Ok, S::Error> {
    #[derive(Serialize)]
    struct Format<'a> {
        id: &'a str,
        about: &'a str,
    }
    s.collect_seq(formats.iter().map(|&(id, about)| Format { id, about }))
}

fn list(args: &ConvertArgs) -> Result<Converters, Failed> {
    let (_, reg) = registry(args.timeout)?;
    let converters = reg
        .converters
        .iter()
        .map(|c| ConverterRow {
            name: c.name.clone(),
            version: c.version.clone(),
            origin: c.origin.clone(),
            digest: c.digest.clone(),
            conversions: c.conversions.clone(),
        })
        .collect();
    Ok(Converters {
        converters,
        unavailable: reg.unavailable,
        formats: FORMATS,
    })
}

impl Outcome for Converters {
    fn human(&self, to: &mut Human<'_>) -> io::Result<()> {
        let out = &mut *to.out;
        if self.converters.is_empty() {
            writeln!(out, "no converters available")?;
        } else {
            writeln!(out, "Converters:")?;
        }
        for c in &self.converters {
            let from = match &c.origin {
                Origin::BuiltIn => "built in".to_string(),
                Origin::Added { source } => format!("added from {}", source.display()),
            };
            writeln!(out, "  {} {} ({from})", c.name, c.version)?;
            let pairs: Vec<String> = c
                .conversions
                .iter()
                .map(|(s, t)| format!("{s} -> {t}"))
                .collect();
            writeln!(out, "    {}", pairs.join(", "))?;
        }
        if !self.unavailable.is_empty() {
            writeln!(out, "Unavailable:")?;
            for u in &self.unavailable {
                writeln!(out, "  {} ({}): {}", u.name, u.origin, u.reason)?;
            }
        }
        writeln!(out, "Formats apiary detects:")?;
        let width = self
            .formats
            .iter()
            .map(|(id, _)| id.len())
            .max()
            .unwrap_or(0);
        for (id, about) in self.formats {
            writeln!(out, "  {id:width$}  {about}")?;
        }
        Ok(())
    }

    fn json(&self) -> Option<&dyn Document> {
        Some(self)
    }
}

/// Most bytes of an option value read from a file (`KEY=@FILE`).
const MAX_OPTION_FILE: u64 = 1 << 20;

/// An option's value: as given, or the text of FILE for `@FILE`.
fn option_value(value: &str) -> Result<String, Failed> {
    let Some(path) = value.strip_prefix('@') else {
        return Ok(value.to_string());
    };
    let bytes = crate::safe_fs::read_regular(
        std::path::Path::new(path),
        crate::safe_fs::FinalLink::Follow,
        MAX_OPTION_FILE,
    )
    .map_err(|e| Failed::usage(format_args!("--option @{path}: cannot read it: {e}")))?;
    String::from_utf8(bytes)
        .map_err(|_| Failed::usage(format_args!("--option @{path}: not UTF-8 text")))
}
