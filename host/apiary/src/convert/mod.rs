//! Format conversion between persona packs and neighbouring agent-pack formats, through sandboxed
//! converter components (`apiary convert`).
//!
//! The host owns everything around the component: [`stage`] checks the input (read in place when
//! it is a plain tree, else copied into a private directory), [`detect`] decides the input format
//! (ordered, fail-closed rules; then added converters' `detect`), [`plan`] picks a converter or a
//! chain through the persona pack, [`registry`] holds the built-in and added ([`store`])
//! converters, the component writes into an empty private output directory, and [`validate`]
//! checks that output before [`stage::place`] moves it to the destination. Nothing reaches the
//! destination unless every step succeeded. [`survey`] runs [`convert`] over every plugin under a
//! directory and counts how it went.

pub mod detect;
pub mod info;
pub mod plan;
pub mod registry;
pub mod report;
pub mod stage;
pub mod store;
pub mod survey;
pub mod validate;

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::sandbox::Sandbox;
use crate::sandbox::converter::Request;
use plan::Step;
use registry::{Origin, Registry};
use report::Report;
use stage::Caps;
use validate::Validation;

/// Every format id the host knows, with a description (`apiary convert --list`, `--help`).
pub const FORMATS: &[(&str, &str)] = &[
    (
        "buzz-pack",
        "persona pack: .plugin/plugin.json with `personas` (the pivot format)",
    ),
    (
        "agent-plugins",
        "Agent Plugins 1.0 (Open Plugin Spec): root plugin.json with $schema",
    ),
    (
        "agent-plugins-draft",
        "April 2026 Open Plugin draft: .plugin/plugin.json without personas (input only)",
    ),
    (
        "claude-plugin",
        "Claude Code plugin: .claude-plugin/plugin.json, agents/*.md, skills/",
    ),
    (
        "agents-dir",
        "a folder of loose agent .md files with name/description frontmatter, or one such file (input only)",
    ),
    (
        "claude-marketplace",
        "plugin marketplace: .claude-plugin/, .github/plugin/ or .agents/plugins/marketplace.json (input only)",
    ),
    (
        "duduclaw-expert",
        "DuDuClaw expert pack: expert.toml, agents/<n>/soul.md",
    ),
    (
        "agent-compose-package",
        "agent-compose person package: person.kdl or a roster .kdl, SKILL.md tree",
    ),
    (
        "agent-compose-snapshot",
        "agent-compose person.json snapshot (input only)",
    ),
    (
        "codex-plugin",
        "Codex plugin: .codex-plugin/plugin.json (input only)",
    ),
    (
        "cursor-plugin",
        "Cursor plugin: .cursor-plugin/plugin.json (input only)",
    ),
    (
        "gemini-extension",
        "Gemini CLI extension: gemini-extension.json (input only)",
    ),
];

/// Other spellings of format ids, accepted by `--to` and `--from`.
pub const ALIASES: &[(&str, &str)] = &[("claude", "claude-plugin"), ("pack", "buzz-pack")];

/// The format id `name` stands for (itself when it is no alias).
pub fn canonical_format(name: &str) -> &str {
    ALIASES
        .iter()
        .find(|(alias, _)| *alias == name)
        .map_or(name, |(_, id)| id)
}

/// Lowest confidence at which an added converter's `detect` may claim an input.
pub const MIN_CONFIDENCE: f32 = 0.5;

/// One `apiary convert` request.
#[derive(Debug, Clone)]
pub struct Job {
    pub src: PathBuf,
    pub to: String,
    pub from: Option<String>,
    pub out: PathBuf,
    pub force: bool,
    pub options: Vec<(String, String)>,
}

/// How the input format was decided.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "by", rename_all = "kebab-case")]
pub enum DetectedBy {
    /// `--from`.
    Flag,
    /// A host rule (formats.md §9.1).
    HostRule {
        rule: &'static str,
        evidence: String,
        /// The wrapper directory descended into, or `""`.
        root: PathBuf,
    },
    /// An added converter's `detect`.
    Converter {
        converter: String,
        confidence: f32,
        evidence: String,
    },
}

/// One converter used, for the record.
#[derive(Debug, Clone, Serialize)]
pub struct Used {
    pub name: String,
    pub version: String,
    pub origin: Origin,
    pub digest: String,
}

/// Why a conversion stopped.
#[derive(Debug, Clone, Serialize)]
pub struct Failure {
    /// Stable: input, destination, detection, no-converter, same-format, converter, output,
    /// validation, write.
    pub code: &'static str,
    pub message: String,
    /// The converter at fault, when one is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub converter: Option<String>,
    /// For the sandbox's verdict on a converter (deadline, trap, memory-cap, oversized, …).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sandbox_code: Option<&'static str>,
    /// What detection found, when it refused.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub found: Vec<String>,
}

/// Everything about one conversion, successful or not (the `--json` shape).
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    pub ok: bool,
    pub source: PathBuf,
    /// The input format, once known.
    pub source_format: Option<String>,
    pub target: String,
    pub detected_by: Option<DetectedBy>,
    pub converters: Vec<Used>,
    pub steps: Vec<Step>,
    pub report: Report,
    /// The destination; written only when `ok`.
    pub output: PathBuf,
    pub validation: Option<Validation>,
    /// Notes for the operator (an added converter's `detect` failed, a converter flooded stdout, …).
    pub notes: Vec<String>,
    pub error: Option<Failure>,
}

fn fail(code: &'static str, message: impl Into<String>) -> Failure {
    Failure {
        code,
        message: message.into(),
        converter: None,
        sandbox_code: None,
        found: Vec::new(),
    }
}

/// Runs a conversion. Never panics on bad input; the destination is written only on success.
pub fn convert(sandbox: &Sandbox, reg: &Registry, job: &Job) -> Outcome {
    let mut outcome = Outcome {
        ok: false,
        source: job.src.clone(),
        source_format: None,
        target: job.to.clone(),
        detected_by: None,
        converters: Vec::new(),
        steps: Vec::new(),
        report: Report::default(),
        output: job.out.clone(),
        validation: None,
        notes: Vec::new(),
        error: None,
    };
    if let Err(e) = run(sandbox, reg, job, &mut outcome) {
        outcome.error = Some(e);
    } else {
        outcome.ok = true;
    }
    outcome
}

fn run(sandbox: &Sandbox, reg: &Registry, job: &Job, o: &mut Outcome) -> Result<(), Failure> {
    let (work, input) = stage_input(job)?;
    let (source, root) = decide_format(sandbox, reg, job, &input, o)?;
    o.source_format = Some(source.clone());
    let steps = plan_steps(reg, job, &source)?;
    o.steps = steps.clone();
    let run = Run {
        sandbox,
        reg,
        job,
        work: work.path(),
    };
    let mut step_input = input.join(&root);
    let source_name = source_name(&job.src, &root);
    for (i, step) in steps.iter().enumerate() {
        let last = i + 1 == steps.len();
        // The first converter reads the input; it alone is told the input's folder name (its
        // /input has none), from which a plugin without a manifest takes its id and name.
        let named = (i == 0).then_some(source_name.as_deref()).flatten();
        step_input = run.step(o, i, step, last, &step_input, named)?;
    }
    stage::check_destination(&job.out, job.force)
        .map_err(|e| fail("destination", e.to_string()))?;
    stage::place(&step_input, &job.out).map_err(|e| fail("write", e.to_string()))?;
    Ok(())
}

/// The option a first step receives with the input's own path (`source-name=<a>/<b>/<c>`: the last
/// three components of the input as given, the wrapper descended into included, a file's `.md`
/// dropped), so a converter can name what has no name of its own after its folder and parents.
pub const SOURCE_NAME_OPTION: &str = "source-name";

fn source_name(src: &Path, root: &Path) -> Option<String> {
    let full = src
        .canonicalize()
        .unwrap_or_else(|_| src.to_path_buf())
        .join(root);
    let mut parts: Vec<String> = full
        .components()
        .filter_map(|c| match c {
            std::path::Component::Normal(s) => Some(s.to_string_lossy().into_owned()),
            _ => None,
        })
        .collect();
    if let Some(last) = parts.last_mut()
        && full.is_file()
        && let Some(stem) = last.strip_suffix(".md")
    {
        *last = stem.to_string();
    }
    let keep = parts.len().saturating_sub(3);
    let name = parts[keep..].join("/");
    (!name.is_empty()).then_some(name)
}

/// Checks the request and the destination, creates a private work directory (removed on drop)
/// and returns it with the input converters read: the source itself when it is a plain tree
/// ([`stage::is_plain`]), else a staged copy in the work directory.
fn stage_input(job: &Job) -> Result<(tempfile::TempDir, PathBuf), Failure> {
    if !info::valid_format(&job.to) {
        return Err(fail(
            "no-converter",
            format!("{:?} is not a format id", job.to),
        ));
    }
    stage::check_destination(&job.out, job.force)
        .map_err(|e| fail("destination", e.to_string()))?;
    let work = tempfile::Builder::new()
        .prefix("apiary-convert-")
        .tempdir()
        .map_err(|e| {
            fail(
                "input",
                format!("cannot create a private work directory: {e}"),
            )
        })?;
    if stage::is_plain(&job.src, Caps::TREE)
        && let Ok(src) = job.src.canonicalize()
    {
        return Ok((work, src));
    }
    let input = work.path().join("input");
    stage::copy_in(&job.src, &input, Caps::TREE).map_err(|e| fail("input", e.to_string()))?;
    Ok((work, input))
}

/// The converters from `source` to the job's target.
fn plan_steps(reg: &Registry, job: &Job, source: &str) -> Result<Vec<Step>, Failure> {
    if source == job.to {
        return Err(fail(
            "same-format",
            format!("the input is already {source}; nothing to convert"),
        ));
    }
    plan::plan(reg, source, &job.to).map_err(|m| {
        let named = detect::NAMED_ONLY.iter().find(|(id, _)| *id == source);
        match named {
            Some((_, what)) => fail(
                "no-converter",
                format!("the input is {what}, which apiary detects but cannot convert: {m}"),
            ),
            None => fail("no-converter", m.to_string()),
        }
    })
}

/// What every step of one conversion shares.
struct Run<'a> {
    sandbox: &'a Sandbox,
    reg: &'a Registry,
    job: &'a Job,
    /// The private work directory.
    work: &'a Path,
}

impl Run<'_> {
    /// Step `i` of the plan: runs its converter on `input` into `<work>/step-<i+1>`, checks and
    /// validates what it wrote. Returns the next step's input (the one pack the output holds,
    /// unless this is the `last` step).
    fn step(
        &self,
        o: &mut Outcome,
        i: usize,
        step: &Step,
        last: bool,
        input: &Path,
        source_name: Option<&str>,
    ) -> Result<PathBuf, Failure> {
        let Some(conv) = self.reg.get(&step.converter) else {
            return Err(fail("no-converter", format!("{} vanished", step.converter)));
        };
        o.converters.push(Used {
            name: conv.name.clone(),
            version: conv.version.clone(),
            origin: conv.origin.clone(),
            digest: conv.digest.clone(),
        });
        let out = self.work.join(format!("step-{}", i + 1));
        std::fs::create_dir(&out)
            .map_err(|e| fail("output", format!("cannot create {}: {e}", out.display())))?;
        let report = self.call(conv, step, input, &out, source_name)?;
        o.report.add(i + 1, &conv.name, report);
        stage::scan_output(&out, Caps::TREE)
            .map_err(|m| blame(conv, "output", format!("{}: {m}", conv.name)))?;
        let v = validate::validate(&step.target, &out);
        let verdict = invalid_output(&conv.name, &step.target, &v);
        o.validation = Some(v);
        if let Some(message) = verdict {
            return Err(blame(conv, "validation", message));
        }
        let packs = validate::pack_roots(&out);
        if !last && packs.len() > 1 {
            // A marketplace gives one pack per plugin; a chain carries one pack on.
            return Err(blame(
                conv,
                "output",
                format!(
                    "{} wrote {} packs ({}); the next step converts one: pick it with --option plugin=NAME",
                    conv.name,
                    packs.len(),
                    list_some(&packs, 8)
                ),
            ));
        }
        Ok(match packs.as_slice() {
            [one] if !last => out.join(one),
            _ => out,
        })
    }

    /// Runs `conv` for `step` from `input` into `out`: its report, or the failure when the sandbox
    /// stopped it or it flooded stdout or stderr.
    fn call(
        &self,
        conv: &registry::Converter,
        step: &Step,
        input: &Path,
        out: &Path,
        source_name: Option<&str>,
    ) -> Result<crate::sandbox::converter::Report, Failure> {
        let mut options = self.job.options.clone();
        if let Some(name) = source_name
            && !options.iter().any(|(k, _)| k == SOURCE_NAME_OPTION)
        {
            options.push((SOURCE_NAME_OPTION.to_string(), name.to_string()));
        }
        let request = Request {
            source: step.source.clone(),
            target: step.target.clone(),
            options,
        };
        let call = conv
            .runner(self.sandbox)
            .and_then(|r| r.convert(self.sandbox, &request, input, out))
            .map_err(|e| Failure {
                sandbox_code: Some(e.kind()),
                ..blame(conv, "converter", report::clean(&e.to_string(), 4096))
            })?;
        for (stream, c) in [("stdout", &call.stdout), ("stderr", &call.stderr)] {
            if c.dropped > 0 {
                // A converter talks through its report and the log import; a flood is misbehaviour.
                return Err(blame(
                    conv,
                    "converter",
                    format!(
                        "{} wrote more than {} bytes to {stream} ({} bytes dropped); its output is not trusted",
                        conv.name,
                        c.text.len(),
                        c.dropped
                    ),
                ));
            }
        }
        Ok(call.value)
    }
}

/// A failure `conv` is at fault for.
fn blame(conv: &registry::Converter, kind: &'static str, message: String) -> Failure {
    Failure {
        converter: Some(conv.name.clone()),
        ..fail(kind, message)
    }
}

/// What is wrong with a converter's output as `target`, from its validation; `None` when valid.
fn invalid_output(converter: &str, target: &str, v: &Validation) -> Option<String> {
    if v.ok() {
        return None;
    }
    let first = &v.errors[0];
    let where_ = if first.path.is_empty() {
        String::new()
    } else {
        format!("{}: ", first.path)
    };
    Some(format!(
        "{converter} wrote an invalid {target} ({} error{}; first: {where_}{})",
        v.errors.len(),
        if v.errors.len() == 1 { "" } else { "s" },
        first.message
    ))
}

/// The input format and the directory (relative to the input root) it was found in.
fn decide_format(
    sandbox: &Sandbox,
    reg: &Registry,
    job: &Job,
    input: &Path,
    o: &mut Outcome,
) -> Result<(String, PathBuf), Failure> {
    if let Some(from) = &job.from {
        if !info::valid_format(from) {
            return Err(fail("detection", format!("{from:?} is not a format id")));
        }
        o.detected_by = Some(DetectedBy::Flag);
        return Ok((from.clone(), PathBuf::new()));
    }
    let refusal = match detect::detect(input) {
        Ok(d) => {
            o.detected_by = Some(DetectedBy::HostRule {
                rule: d.rule,
                evidence: d.evidence,
                root: d.root.clone(),
            });
            return Ok((d.format, d.root));
        }
        Err(r) => r,
    };
    let refuse = |r: detect::Refusal| {
        let src = job.src.display().to_string();
        let src = src.trim_end_matches('/');
        let message = if r.reason.contains(detect::INPUT) {
            // A collection of packs: the reason already says what to run instead.
            format!(
                "cannot convert the input as one pack: {}",
                r.reason.replace(detect::INPUT, src)
            )
        } else {
            format!(
                "cannot tell the input format: {}; pass --from FORMAT if you know it",
                r.reason
            )
        };
        Failure {
            found: r.found,
            ..fail("detection", message)
        }
    };
    if refusal.fatal {
        return Err(refuse(refusal));
    }
    // Added converters may claim what the host rules do not recognise.
    match best_claim(sandbox, reg, input, o) {
        Some((claim, true)) => Err(fail(
            "detection",
            format!(
                "added converters disagree about the input format ({} and another, with equal confidence); pass --from FORMAT",
                claim.format
            ),
        )),
        Some((claim, false)) => {
            o.detected_by = Some(DetectedBy::Converter {
                converter: claim.converter,
                confidence: claim.confidence,
                evidence: claim.evidence,
            });
            Ok((claim.format, PathBuf::new()))
        }
        None => Err(refuse(refusal)),
    }
}

/// An added converter's claim on the input.
struct Claim {
    confidence: f32,
    converter: String,
    format: String,
    evidence: String,
}

/// The most confident plausible claim the added converters' `detect` makes on `input`, and whether
/// another claim for a different format ties with it. A `detect` that fails is noted and skipped.
fn best_claim(
    sandbox: &Sandbox,
    reg: &Registry,
    input: &Path,
    o: &mut Outcome,
) -> Option<(Claim, bool)> {
    let mut best: Option<Claim> = None;
    let mut tie = false;
    for conv in reg
        .converters
        .iter()
        .filter(|c| matches!(c.origin, Origin::Added { .. }))
    {
        let found = match conv.runner(sandbox).and_then(|r| r.detect(sandbox, input)) {
            Ok(out) => out.value,
            Err(e) => {
                o.notes.push(format!(
                    "{}: detect failed: {}",
                    conv.name,
                    report::clean(&e.to_string(), 512)
                ));
                continue;
            }
        };
        for d in found {
            let c = d.confidence;
            let plausible = c.is_finite() && (MIN_CONFIDENCE..=1.0).contains(&c);
            if !plausible || !conv.reads(&d.format) {
                continue;
            }
            match &best {
                Some(b) if c < b.confidence || (c == b.confidence && b.format == d.format) => {}
                Some(b) if c == b.confidence => tie = true,
                _ => {
                    tie = false;
                    best = Some(Claim {
                        confidence: c,
                        converter: conv.name.clone(),
                        format: d.format,
                        evidence: report::clean(&d.evidence, 300),
                    });
                }
            }
        }
    }
    best.map(|b| (b, tie))
}

/// `a, b, c, … and N more`.
fn list_some(items: &[String], max: usize) -> String {
    let mut s = items[..items.len().min(max)].join(", ");
    if items.len() > max {
        s.push_str(&format!(", … and {} more", items.len() - max));
    }
    s
}
