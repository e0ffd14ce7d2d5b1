//! `apiary pack validate | inspect | migrate`.

use std::fmt::Write as _;
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use serde::Serialize;

use super::exit;
use super::output::{Document, Failed, Human, Outcome, render};
use crate::diag::Report;
use crate::pack;
use crate::resolve::{self, Level, Overrides, ResolvedPersona};

#[derive(Debug, Subcommand)]
pub enum PackCommand {
    /// Start a pack of your own: a manifest, personas, a skill and instructions that validate
    /// clean and run with `apiary up` at once.
    New(super::pack_new::NewArgs),

    /// Check a pack against the Persona Pack Specification.
    ///
    /// Reports every problem with its file, line and a source snippet. Exit code: 0 clean, 1 errors,
    /// 2 warnings only.
    #[command(
        after_help = "Examples:\n  apiary pack validate ./my-pack\n  apiary pack validate ./my-pack --json | jq '.diagnostics[] | select(.severity==\"error\")'"
    )]
    Validate(ValidateArgs),

    /// Show each persona's fully resolved configuration.
    ///
    /// Applies the five precedence levels (process env > operator overrides > persona frontmatter >
    /// pack defaults > built-ins) and shows where every value came from, the skills each persona
    /// receives, its merged MCP servers, the env its runtime gets and its system prompt.
    #[command(
        after_help = "The --json output has top-level `pack` and `personas`; each persona has identity, version, model, \
temperature, max_context_tokens, subscribe, triggers, thread_replies, broadcast_replies, skills, mcp_servers, env, \
system_prompt and sources; docs/pack-authors.md explains each.\n\nExamples:\n  apiary pack inspect ./my-pack\n  apiary pack inspect ./my-pack --persona pip --json"
    )]
    Inspect(InspectArgs),

    /// Rewrite V6 (`buzz:` block) and pre-V6 JSON personas to the current format.
    #[command(
        after_help = "Examples:\n  apiary pack migrate ./old-pack --dry-run\n  apiary pack migrate ./old-pack"
    )]
    Migrate(MigrateArgs),

    /// Build a reproducible `.buzzpack` archive and its `.sha256` from a valid pack (and sign it
    /// with --sign-with).
    Build(super::dist::BuildArgs),

    /// Sign a `.buzzpack` as its author: writes `<archive>.sig.json`, which `install` checks.
    Sign(super::registry::SignArgs),
}

#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// The pack directory (the one containing .plugin/plugin.json).
    pub dir: PathBuf,
    /// Print the findings as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct InspectArgs {
    /// The pack directory.
    pub dir: PathBuf,
    /// Show only this persona.
    #[arg(long, value_name = "NAME")]
    pub persona: Option<String>,
    /// Operator overrides file (TOML, precedence level 2). Default: $APIARY_OVERRIDES, else
    /// ~/.config/apiary/overrides.toml when it exists.
    #[arg(long, value_name = "FILE")]
    pub overrides: Option<PathBuf>,
    /// Print the resolved configuration as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct MigrateArgs {
    /// The pack directory to rewrite in place.
    pub dir: PathBuf,
    /// Report what would change without writing anything.
    #[arg(long)]
    pub dry_run: bool,
    /// Print the changes as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

pub fn run(cmd: PackCommand) -> u8 {
    match cmd {
        PackCommand::New(a) => render(&super::pack_new::new(&a), a.json),
        PackCommand::Validate(a) => render_at_exit(validate(&a), a.json),
        PackCommand::Inspect(a) => render_at_exit(inspect(&a), a.json),
        PackCommand::Migrate(a) => render(&migrate(&a), a.json),
        PackCommand::Build(a) => render(&super::dist::build(&a), a.json),
        PackCommand::Sign(a) => render(&super::registry::sign(&a), a.json),
    }
}

/// [`render`], leaving the outcome (a loaded pack, its report) to the process exit.
fn render_at_exit(outcome: impl Outcome, json: bool) -> u8 {
    let code = render(&outcome, json);
    super::free_at_exit(outcome);
    code
}

/// `pack validate`: the pack's findings.
pub(super) struct Validated {
    dir: PathBuf,
    report: Report,
}

pub(super) fn validate(args: &ValidateArgs) -> Validated {
    let loaded = pack::load(&args.dir);
    super::free_at_exit(loaded.pack);
    Validated {
        dir: args.dir.clone(),
        report: loaded.report,
    }
}

impl Serialize for Validated {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Json<'a> {
            pack: &'a Path,
            valid: bool,
            errors: usize,
            warnings: usize,
            diagnostics: &'a [crate::diag::Diagnostic],
        }
        let report = &self.report;
        Json {
            pack: &self.dir,
            valid: !report.has_errors(),
            errors: report.errors(),
            warnings: report.warnings(),
            diagnostics: &report.diagnostics,
        }
        .serialize(serializer)
    }
}

impl Outcome for Validated {
    fn human(&self, to: &mut Human<'_>) -> io::Result<()> {
        to.report(&self.report)?;
        writeln!(to.err, "{}", summary_line(&self.report, &self.dir))
    }

    fn json(&self) -> Option<&dyn Document> {
        Some(self)
    }

    fn exit_code(&self) -> u8 {
        self.report.exit_code() as u8
    }
}

fn summary_line(report: &Report, dir: &Path) -> String {
    let (e, w) = (report.errors(), report.warnings());
    match (e, w) {
        (0, 0) => format!("✓ {} is a valid persona pack", dir.display()),
        (0, _) => format!(
            "✓ {} is valid, with {w} warning{}",
            dir.display(),
            plural(w)
        ),
        _ => format!(
            "✗ {} is invalid: {e} error{}, {w} warning{}",
            dir.display(),
            plural(e),
            plural(w)
        ),
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// The process environment as the resolver reads it (level 1).
type ProcessEnv = Box<dyn Fn(&str) -> Option<String>>;

/// `pack inspect`: the pack and its personas, resolved as they are written (see [`InspectJson`]).
pub(super) struct Inspected {
    pack: pack::Pack,
    overrides: Overrides,
    env: ProcessEnv,
    /// `--persona`: only the personas of this name.
    only: Option<String>,
    /// Warnings of the pack and the overrides file (shown to people, above the personas).
    report: Report,
}

pub(super) fn inspect(args: &InspectArgs) -> Result<Inspected, Failed> {
    let loaded = pack::load(&args.dir);
    let mut report = loaded.report;
    let Some(pack) = loaded.pack else {
        let summary = summary_line(&report, &args.dir);
        // A script asking for JSON gets the reason as JSON too, the findings as `validate` lists them.
        return Err(Failed::report(&report, format!("{summary}\n")).with_code("pack.invalid"));
    };
    let overrides = match crate::paths::overrides_file(args.overrides.as_deref()) {
        Some(path) => {
            let (overrides, o_report) = load_overrides(&path, &pack);
            if o_report.has_errors() {
                return Err(Failed::report(&o_report, ""));
            }
            report.extend(o_report);
            overrides
        }
        None => Overrides::default(),
    };
    finish_inspect(args, pack, overrides, report)
}

/// The operator overrides file, with a warning for each persona it names that the pack lacks.
fn load_overrides(path: &Path, pack: &pack::Pack) -> (Overrides, Report) {
    let mut report = Report::default();
    let overrides = Overrides::load(path, &mut report);
    for name in overrides
        .personas_for(&pack.manifest.id)
        .filter(|n| pack.persona(n).is_none())
    {
        report.push(
            crate::diag::Diagnostic::warning(
                "overrides.unknown-persona",
                format!(
                    "overrides for persona `{name}`, which pack {} does not have",
                    pack.manifest.id
                ),
            )
            .in_file(path),
        );
    }
    (overrides, report)
}

fn finish_inspect(
    args: &InspectArgs,
    pack: pack::Pack,
    overrides: Overrides,
    report: Report,
) -> Result<Inspected, Failed> {
    if let Some(name) = args.persona.as_deref()
        && pack.persona(name).is_none()
    {
        let names: Vec<_> = pack.personas.iter().map(|p| p.name.as_str()).collect();
        let error = format!(
            "error: pack {} has no persona `{name}` (it has: {})\n",
            pack.manifest.id,
            names.join(", ")
        );
        // A person sees the warnings found so far too, as when inspection goes on.
        return Err(if report.warnings() > 0 && !args.json {
            Failed::report(&report, error)
        } else {
            Failed::text(exit::FAILURE, error)
        });
    }
    Ok(Inspected {
        pack,
        overrides,
        env: Box::new(resolve::cached_process_env()),
        only: args.persona.clone(),
        report,
    })
}

impl Inspected {
    fn streamed(&self) -> InspectJson<'_> {
        InspectJson {
            pack: &self.pack,
            overrides: &self.overrides,
            env: &*self.env,
            only: self.only.as_deref(),
        }
    }
}

impl Serialize for Inspected {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.streamed().serialize(serializer)
    }
}

impl Outcome for Inspected {
    fn human(&self, to: &mut Human<'_>) -> io::Result<()> {
        // Warnings do not stop inspection, but a person should still see them.
        if self.report.warnings() > 0 {
            to.report(&self.report)?;
        }
        write_inspect(to.out, &self.streamed())
    }

    fn json(&self) -> Option<&dyn Document> {
        Some(self)
    }
}

/// `inspect` for a person: the pack's header, then each persona resolved, written and dropped in
/// turn (as `--json` does), through one buffer.
fn write_inspect(out: &mut dyn io::Write, what: &InspectJson<'_>) -> io::Result<()> {
    let InspectJson {
        pack,
        overrides,
        env,
        only,
    } = *what;
    let shown = |name: &str| only.is_none_or(|only| name == only);
    let count = pack.personas.iter().filter(|p| shown(&p.name)).count();
    let mut text = String::new();
    render_pack_header(&mut text, &resolve::summary(pack, overrides), count);
    let mut out = io::BufWriter::with_capacity(64 * 1024, out);
    out.write_all(text.as_bytes())?;
    for p in resolve::resolve_each(pack, overrides, env).filter(|p| shown(&p.identity.name)) {
        text.clear();
        render_persona(&mut text, &p);
        out.write_all(text.as_bytes())?;
    }
    out.flush()
}

/// `inspect --json`: the JSON of [`resolve::ResolvedPack`], written as each persona is resolved. A
/// persona is dropped once written, so the next one reuses its memory: holding all 200 resolved
/// personas of a large pack (a megabyte of prompts) cost ~500 first-touch page faults.
struct InspectJson<'a> {
    pack: &'a pack::Pack,
    overrides: &'a Overrides,
    env: &'a dyn Fn(&str) -> Option<String>,
    /// `--persona`: only the personas of this name.
    only: Option<&'a str>,
}

impl serde::Serialize for InspectJson<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        // The same struct and field names as `ResolvedPack`'s derived form: the output is identical.
        let mut out = serializer.serialize_struct("ResolvedPack", 2)?;
        out.serialize_field("pack", &resolve::summary(self.pack, self.overrides))?;
        out.serialize_field("personas", &Personas(self))?;
        out.end()
    }
}

struct Personas<'a>(&'a InspectJson<'a>);

impl serde::Serialize for Personas<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let InspectJson {
            pack,
            overrides,
            env,
            only,
        } = *self.0;
        serializer.collect_seq(
            resolve::resolve_each(pack, overrides, env)
                .filter(|p| only.is_none_or(|name| p.identity.name == name)),
        )
    }
}

fn level(l: Level) -> &'static str {
    match l {
        Level::ProcessEnv => "process env",
        Level::Operator => "operator overrides",
        Level::Persona => "persona",
        Level::PackDefaults => "pack defaults",
        Level::BuiltIn => "built-in",
        Level::Unset => "unset",
    }
}

/// The pack's lines above its personas; `personas` is how many follow.
fn render_pack_header(out: &mut String, pack: &resolve::PackSummary, personas: usize) {
    let _ = writeln!(out, "Pack {} ({}) {}", pack.name, pack.id, pack.version);
    if let Some(req) = &pack.engines_buzz {
        let _ = writeln!(
            out,
            "  engines.buzz  {req} (apiary provides {})",
            crate::ENGINE_VERSION
        );
    }
    if let Some(o) = &pack.overrides_file {
        let _ = writeln!(out, "  overrides     {}", o.display());
    }
    let _ = writeln!(out, "  personas      {personas}");
}

/// One persona's block. Written with plain pushes rather than `format!`: a 200-persona pack is
/// 3,000 rows, and formatting machinery was most of the command's time after loading.
fn render_persona(out: &mut String, p: &ResolvedPersona) {
    let src = |k: &str| p.sources.get(k).map_or("", |l| level(*l));
    let id = &p.identity;
    for part in ["\n", &id.name, " — ", &id.display_name, "  ("] {
        out.push_str(part);
    }
    out.push_str(&id.file.to_string_lossy());
    out.push_str(")\n");
    row(out, "description", &id.description, "");
    let version_from = if src("version") == "persona" {
        "persona"
    } else {
        "pack"
    };
    row(out, "version", &p.version, version_from);
    row(out, "runtime", &id.runtime, src("runtime"));
    row_model(out, p, src("model"));
    row_or(
        out,
        "temperature",
        p.temperature,
        "runtime default",
        src("temperature"),
    );
    row_or(
        out,
        "max_context_tokens",
        p.max_context_tokens,
        "provider default",
        src("max_context_tokens"),
    );
    row_start(out, "subscribe");
    push_list(out, p.subscribe.iter().map(String::as_str), ", ");
    row_end(out, src("subscribe"));
    row_triggers(out, p, src("triggers"));
    row(
        out,
        "thread_replies",
        bool_word(p.thread_replies),
        src("thread_replies"),
    );
    row(
        out,
        "broadcast_replies",
        bool_word(p.broadcast_replies),
        src("broadcast_replies"),
    );
    row_start(out, "skills");
    push_list(out, p.skills.iter().map(String::as_str), ", ");
    row_end(out, "");
    row_start(out, "mcp_servers");
    push_list(out, p.mcp_servers.iter().map(|s| s.name.as_str()), ", ");
    row_end(out, "");
    row_tool_policy(out, p);
    row_env(out, p);
    for (point, cmd) in p.hooks.entries() {
        row(out, &format!("hook {point}"), cmd, "");
    }
    row_prompt(out, p);
}

fn row_model(out: &mut String, p: &ResolvedPersona, from: &str) {
    row_start(out, "model");
    match &p.model {
        Some(m) => {
            out.push_str(&m.model);
            if let Some(provider) = &m.provider {
                for part in [" (provider ", provider, ")"] {
                    out.push_str(part);
                }
            }
        }
        None => out.push_str("runtime default"),
    }
    row_end(out, from);
}

fn row_triggers(out: &mut String, p: &ResolvedPersona, from: &str) {
    let t = &p.triggers;
    row_start(out, "triggers");
    out.push_str(if t.mentions {
        "mentions true, keywords ["
    } else {
        "mentions false, keywords ["
    });
    push_joined(out, t.keywords.iter().map(String::as_str), ", ");
    out.push_str(if t.all_messages {
        "], all_messages true"
    } else {
        "], all_messages false"
    });
    row_end(out, from);
}

/// The tool policy as enforced, then the operator ceiling's part of it on a row of its own.
fn row_tool_policy(out: &mut String, p: &ResolvedPersona) {
    let Some(policy) = &p.tool_policy else {
        return;
    };
    row_start(out, "tool_policy");
    push_policy(
        out,
        &policy.allow,
        policy.all_denied(),
        policy.is_read_only(),
    );
    row_end(out, "");
    if let Some(ceiling) = &policy.ceiling {
        row_start(out, "  from the ceiling");
        push_policy(
            out,
            &ceiling.allow,
            ceiling.all_denied(),
            ceiling.is_read_only(),
        );
        row_end(out, "operator");
    }
}

fn push_policy(out: &mut String, allow: &[String], deny: Vec<&String>, read_only: bool) {
    let mut parts = Vec::new();
    if !allow.is_empty() {
        parts.push(format!("allow [{}]", allow.join(", ")));
    }
    if !deny.is_empty() {
        let deny: Vec<&str> = deny.into_iter().map(String::as_str).collect();
        parts.push(format!("deny [{}]", deny.join(", ")));
    }
    if read_only {
        parts.push("read_only".to_string());
    }
    out.push_str(&parts.join(", "));
}

fn row_env(out: &mut String, p: &ResolvedPersona) {
    row_start(out, "env");
    if p.env.is_empty() {
        out.push_str("(none)");
    }
    for (i, (k, v)) in p.env.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        for part in [k.as_str(), "=", v] {
            out.push_str(part);
        }
    }
    row_end(out, "");
}

/// The prompt's length and the start of its first non-blank line.
fn row_prompt(out: &mut String, p: &ResolvedPersona) {
    let first = p
        .system_prompt
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    row_start(out, "system_prompt");
    let _ = write!(out, "{} chars: ", p.system_prompt.chars().count());
    out.extend(first.chars().take(60));
    if first.chars().nth(60).is_some() {
        out.push('…');
    }
    row_end(out, "");
}

/// `  label` padded to a 20-column field; the value follows.
fn row_start(out: &mut String, label: &str) {
    out.push_str("  ");
    out.push_str(label);
    let width = label.chars().count();
    out.extend(std::iter::repeat_n(' ', 20usize.saturating_sub(width)));
}

/// Ends a row, naming the level its value came from when there is one.
fn row_end(out: &mut String, from: &str) {
    if !from.is_empty() {
        for part in ["  [", from, "]"] {
            out.push_str(part);
        }
    }
    out.push('\n');
}

fn row(out: &mut String, label: &str, value: &str, from: &str) {
    row_start(out, label);
    out.push_str(value);
    row_end(out, from);
}

/// A value, or what the agent falls back to when no level sets one.
fn row_or(
    out: &mut String,
    label: &str,
    value: Option<impl std::fmt::Display>,
    fallback: &str,
    from: &str,
) {
    row_start(out, label);
    match value {
        Some(v) => {
            let _ = write!(out, "{v}");
        }
        None => out.push_str(fallback),
    }
    row_end(out, from);
}

/// The items joined by `sep`, or `(none)`.
fn push_list<'a>(out: &mut String, items: impl ExactSizeIterator<Item = &'a str>, sep: &str) {
    if items.len() == 0 {
        out.push_str("(none)");
    }
    push_joined(out, items, sep);
}

fn push_joined<'a>(out: &mut String, items: impl Iterator<Item = &'a str>, sep: &str) {
    for (i, item) in items.enumerate() {
        if i > 0 {
            out.push_str(sep);
        }
        out.push_str(item);
    }
}

fn bool_word(b: bool) -> &'static str {
    if b { "true" } else { "false" }
}

/// `pack migrate`: what changed (or would, with `--dry-run`).
#[derive(Serialize)]
pub(super) struct Migrated {
    pack: PathBuf,
    dry_run: bool,
    changes: Vec<crate::migrate::Change>,
}

pub(super) fn migrate(args: &MigrateArgs) -> Result<Migrated, Failed> {
    let changes = crate::migrate::migrate(&args.dir, args.dry_run).map_err(Failed::error)?;
    Ok(Migrated {
        pack: args.dir.clone(),
        dry_run: args.dry_run,
        changes,
    })
}

impl Outcome for Migrated {
    fn human(&self, to: &mut Human<'_>) -> io::Result<()> {
        let dir = self.pack.display();
        if self.changes.is_empty() {
            return writeln!(
                to.err,
                "Nothing to migrate: {dir} is already in the current format."
            );
        }
        for c in &self.changes {
            writeln!(to.err, "{}: {}", c.file.display(), c.description)?;
        }
        let verb = if self.dry_run {
            "would change"
        } else {
            "changed"
        };
        let n = self.changes.len();
        writeln!(
            to.err,
            "{verb} {n} item{}; run `apiary pack validate {dir}` next.",
            plural(n)
        )
    }

    fn json(&self) -> Option<&dyn Document> {
        Some(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pack whose JSON has every shape the contract writes: nulls, objects, lists, maps, escapes
    /// in long and short strings, skills, MCP servers and env.
    fn scratch_pack(root: &Path) {
        let write = |rel: &str, text: &str| {
            let p = root.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        };
        write(
            ".plugin/plugin.json",
            r##"{"id":"com.example.stream","name":"Stream \"test\"","version":"1.0.0",
"personas":["agents/a.persona.md","agents/b.persona.md","agents/c.persona.md"],
"defaults":{"model":"anthropic:claude-sonnet-4","subscribe":["#general"]}}"##,
        );
        write("instructions.md", "Quote \"exactly\"\tand\\escape.\n");
        write(
            ".mcp.json",
            r#"{"mcpServers":{"fs":{"command":"fs-mcp","env":{"K":"${V}"}}}}"#,
        );
        write(
            "skills/s/SKILL.md",
            "---\nname: s\ndescription: A skill\n---\n\nSteps.\n",
        );
        let body = "Line with \"quotes\", a tab\t, a backslash \\ and émoji 🐝.\n".repeat(20);
        for (name, extra) in [
            ("a", "model: \"openai:gpt-5\"\ntemperature: 0.25\n"),
            (
                "b",
                "triggers: {}\nsubscribe: []\nskills:\n  - \"./skills/s/\"\n",
            ),
            ("c", "temperature: null\n"),
        ] {
            write(
                &format!("agents/{name}.persona.md"),
                &format!(
                    "---\nname: {name}\ndisplay_name: \"P {name}\"\ndescription: d\n{extra}---\n\n{body}"
                ),
            );
        }
    }

    #[test]
    fn validate_outcome_reports_findings_to_people_and_the_documented_json() {
        let dir = tempfile::tempdir().unwrap();
        scratch_pack(dir.path());
        let args = ValidateArgs {
            dir: dir.path().to_path_buf(),
            json: false,
        };
        let (out, err, json, code) = super::super::output::capture(&validate(&args));
        assert_eq!(out, "");
        assert!(
            err.ends_with(&format!(
                "✓ {} is valid, with 1 warning\n",
                dir.path().display()
            )),
            "{err}"
        );
        assert_eq!(code, exit::WARNINGS);
        let v: serde_json::Value = serde_json::from_str(&json.unwrap()).unwrap();
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(keys, ["pack", "valid", "errors", "warnings", "diagnostics"]);
        assert_eq!(v["valid"], true);
    }

    #[test]
    fn inspect_of_a_directory_that_is_no_pack_fails_with_its_findings_as_json() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("README.md"), "not a pack\n").unwrap();
        let args = InspectArgs {
            dir: dir.path().to_path_buf(),
            persona: None,
            overrides: None,
            json: true,
        };
        let (_, err, json, code) = super::super::output::capture(&inspect(&args));
        assert!(
            err.contains("pack.no-manifest"),
            "a person sees the finding: {err}"
        );
        let v: serde_json::Value = serde_json::from_str(&json.expect("JSON on stdout")).unwrap();
        assert_eq!(v["ok"], false);
        assert_eq!(v["error"]["diagnostics"][0]["code"], "pack.no-manifest");
        assert!(
            v["error"]["message"]
                .as_str()
                .unwrap()
                .contains("is invalid")
        );
        assert_eq!(code, exit::FAILURE);
    }

    #[test]
    fn inspect_of_a_missing_persona_is_a_failure_in_the_one_error_shape() {
        let dir = tempfile::tempdir().unwrap();
        scratch_pack(dir.path());
        let overrides = dir.path().join("overrides.toml");
        std::fs::write(&overrides, "").unwrap();
        let args = InspectArgs {
            dir: dir.path().to_path_buf(),
            persona: Some("nobody".into()),
            overrides: Some(overrides),
            json: true,
        };
        let (out, err, json, code) = super::super::output::capture(&inspect(&args));
        assert_eq!(out, "");
        assert_eq!(
            err,
            "error: pack com.example.stream has no persona `nobody` (it has: a, b, c)\n"
        );
        let v: serde_json::Value = serde_json::from_str(&json.unwrap()).unwrap();
        assert_eq!(v["ok"], false);
        assert_eq!(v["error"]["code"], "error");
        assert_eq!(
            v["error"]["message"],
            "pack com.example.stream has no persona `nobody` (it has: a, b, c)"
        );
        assert_eq!(code, exit::FAILURE);
    }

    #[test]
    fn streamed_inspect_json_is_the_resolved_packs_json() {
        let dir = tempfile::tempdir().unwrap();
        scratch_pack(dir.path());
        let loaded = pack::load(dir.path());
        let pack = loaded.pack.expect("valid pack");
        let overrides = Overrides::default();
        let env = |key: &str| (key == "GOOSE_TEMPERATURE").then(|| "0.9".to_string());
        let whole = resolve::resolve(&pack, &overrides, &env);
        for only in [None, Some("b")] {
            let streamed = serde_json::to_string_pretty(&InspectJson {
                pack: &pack,
                overrides: &overrides,
                env: &env,
                only,
            })
            .unwrap();
            let mut expected = whole.clone();
            expected
                .personas
                .retain(|p| only.is_none_or(|n| p.identity.name == n));
            assert_eq!(streamed, serde_json::to_string_pretty(&expected).unwrap());
        }
    }
}
