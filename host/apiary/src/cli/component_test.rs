//! `apiary component test FILE.wasm [--fixtures DIR]`: runs a component against fixtures, without a
//! relay, pack or agent, and shows what differs. The layout (also in `--help`):
//!
//! - converter: one directory per case, `DIR/<case>/` with `case.json` (`source`, `target`,
//!   optional `options` object, optional expected `report`, or `error`: a substring of the expected
//!   failure), `input/` (the tree converted) and `expected/` (the whole expected output tree);
//! - hook: `DIR/<case>.json`, `{"persona": {"pack_id", "name"}, "messages": [{"text", "channel",
//!   "author", "thread", "expect": "keep" | "drop"}]}`;
//! - trigger: `DIR/<case>.json`, `{"persona": {"name", "mentions", "keywords", "all_messages",
//!   "subscribe"}, "messages": [{"text", "channel", "author", "mentions", "expect": "wake" | "skip"}]}`.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::Args;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::exit;
use super::output::{Document, Failed, Human, Outcome};
use crate::sandbox::converter::{ConverterRunner, Report, Request};
use crate::sandbox::hook::{HookMessage, HookPoint, HookRunner};
use crate::sandbox::trigger::{self, TriggerRunner};
use crate::sandbox::{Loaded, Sandbox, World};

pub const AFTER_HELP: &str = "\
Fixtures (default ./fixtures):
  converter  DIR/<case>/case.json   {\"source\": \"a\", \"target\": \"b\", \"options\": {\"k\": \"v\"},
                                     \"report\": {\"lost\": [..], \"synthesised\": [..], \"normalised\": [..],
                                     \"reinterpreted\": [..]}}   (report optional; or \"error\": \"text\")
             DIR/<case>/input/      the tree to convert
             DIR/<case>/expected/   the whole expected output tree (compared file by file)
  hook       DIR/<case>.json        {\"persona\": {\"pack_id\": \"p\", \"name\": \"pip\"},
                                     \"messages\": [{\"text\": \"hi\", \"expect\": \"keep\"}, ..]}
                                     (\"drop\": on_message returns an error; channel, author, thread optional)
  trigger    DIR/<case>.json        {\"persona\": {\"name\": \"pip\", \"mentions\": true, \"keywords\": [..],
                                     \"all_messages\": false, \"subscribe\": [\"ops\"]},
                                     \"messages\": [{\"channel\": \"ops\", \"text\": \"..\", \"expect\": \"wake\"}, ..]}

Exit codes: 0 every case passed, 1 a case failed (each difference is shown) or the component
could not run, 64 bad arguments or unreadable fixtures.

Examples:
  apiary component test target/wasm32-wasip2/release/my_converter.wasm
  apiary component test hook.wasm --fixtures tests/fixtures --json";

#[derive(Debug, Args)]
pub struct TestArgs {
    /// The component (.wasm): a hook, trigger or converter.
    pub component: PathBuf,
    /// The fixtures directory (layout below).
    #[arg(long, value_name = "DIR", default_value = "fixtures")]
    pub fixtures: PathBuf,
    /// Print the results as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// `component test`: each case and what differed.
#[derive(Serialize)]
pub(super) struct Tested {
    ok: bool,
    component: String,
    world: World,
    cases: Vec<Case>,
}

#[derive(Serialize)]
struct Case {
    name: String,
    ok: bool,
    /// One entry per difference, for people.
    differences: Vec<String>,
}

impl Case {
    fn new(name: String, differences: Vec<String>) -> Case {
        Case {
            name,
            ok: differences.is_empty(),
            differences,
        }
    }
}

pub(super) fn test(args: &TestArgs) -> Result<Tested, Failed> {
    let (name, bytes) = super::sandbox::read_component(&args.component)?;
    let sb = crate::shared_sandbox().map_err(Failed::error)?;
    let loaded = sb.load(&name, &bytes).map_err(Failed::error)?;
    let world = loaded.identity.world;
    let run = match world {
        World::Converter => converter_cases,
        World::Hook => hook_cases,
        World::Trigger => trigger_cases,
    };
    let cases = run(sb, loaded, &args.fixtures)?;
    if cases.is_empty() {
        return Err(Failed::usage(format_args!(
            "no {world} fixtures in {} (see `apiary component test --help` for the layout)",
            args.fixtures.display()
        )));
    }
    Ok(Tested {
        ok: cases.iter().all(|c| c.ok),
        component: name,
        world,
        cases,
    })
}

/// The entries of the fixtures directory, sorted, keeping those `keep` accepts.
fn entries(dir: &Path, keep: impl Fn(&Path) -> bool) -> Result<Vec<PathBuf>, Failed> {
    let read = std::fs::read_dir(dir).map_err(|e| {
        Failed::usage(format_args!(
            "cannot read the fixtures directory {}: {e}",
            dir.display()
        ))
    })?;
    let mut paths: Vec<PathBuf> = read
        .flatten()
        .map(|e| e.path())
        .filter(|p| keep(p))
        .collect();
    paths.sort();
    Ok(paths)
}

fn case_name(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<T, Failed> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Failed::usage(format_args!("cannot read {}: {e}", path.display())))?;
    serde_json::from_str(&text).map_err(|e| {
        Failed::usage(format_args!(
            "{} is not a valid fixture: {e}",
            path.display()
        ))
    })
}

fn is_json(path: &Path) -> bool {
    path.extension().is_some_and(|x| x == "json") && path.is_file()
}

fn short(text: &str) -> String {
    let cut: String = text.chars().take(40).collect();
    if cut.len() < text.len() {
        format!("{cut:?}…")
    } else {
        format!("{cut:?}")
    }
}

// ---- hooks

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HookFixture {
    #[serde(default)]
    persona: HookPersona,
    messages: Vec<HookCase>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, default)]
struct HookPersona {
    pack_id: String,
    name: String,
}

impl Default for HookPersona {
    fn default() -> Self {
        HookPersona {
            pack_id: "fixture".into(),
            name: "persona".into(),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HookCase {
    text: String,
    #[serde(default = "general")]
    channel: String,
    #[serde(default = "operator")]
    author: String,
    #[serde(default)]
    thread: Option<String>,
    expect: Keep,
}

#[derive(Deserialize, PartialEq, Eq, Clone, Copy, Debug)]
#[serde(rename_all = "lowercase")]
enum Keep {
    Keep,
    Drop,
}

fn general() -> String {
    "general".into()
}

fn operator() -> String {
    "operator".into()
}

fn hook_cases(sb: &Sandbox, loaded: Arc<Loaded>, dir: &Path) -> Result<Vec<Case>, Failed> {
    let runner = HookRunner::new(loaded).map_err(Failed::error)?;
    let mut cases = Vec::new();
    for path in entries(dir, is_json)? {
        let fixture: HookFixture = read_json(&path)?;
        let workspace = tempfile::tempdir()
            .map_err(|e| Failed::error(format_args!("cannot make a workspace: {e}")))?;
        let mut differences = Vec::new();
        for (i, m) in fixture.messages.iter().enumerate() {
            let message = HookMessage {
                id: format!("fixture-{}", i + 1),
                channel: m.channel.trim_start_matches('#').to_string(),
                thread: m.thread.clone(),
                author: m.author.clone(),
                author_name: None,
                text: m.text.clone(),
            };
            let result = runner.run(
                sb,
                HookPoint::OnMessage,
                &fixture.persona.pack_id,
                &fixture.persona.name,
                Some(&message),
                workspace.path(),
            );
            let (got, why) = match &result {
                Ok(_) => (Keep::Keep, String::new()),
                Err(e) => (Keep::Drop, format!(" ({e})")),
            };
            if got != m.expect {
                differences.push(format!(
                    "message {} {}: expected {:?}, got {got:?}{why}",
                    i + 1,
                    short(&m.text),
                    m.expect
                ));
            }
        }
        cases.push(Case::new(case_name(&path), differences));
    }
    Ok(cases)
}

// ---- triggers

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TriggerFixture {
    persona: TriggerPersona,
    messages: Vec<TriggerCase>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TriggerPersona {
    name: String,
    #[serde(default)]
    mentions: bool,
    #[serde(default)]
    keywords: Vec<String>,
    #[serde(default)]
    all_messages: bool,
    #[serde(default)]
    subscribe: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TriggerCase {
    text: String,
    #[serde(default = "general")]
    channel: String,
    #[serde(default = "operator")]
    author: String,
    #[serde(default)]
    mentions: Vec<String>,
    expect: Wake,
}

#[derive(Deserialize, PartialEq, Eq, Clone, Copy, Debug)]
#[serde(rename_all = "lowercase")]
enum Wake {
    Wake,
    Skip,
}

fn trigger_cases(sb: &Sandbox, loaded: Arc<Loaded>, dir: &Path) -> Result<Vec<Case>, Failed> {
    let runner = TriggerRunner::new(loaded).map_err(Failed::error)?;
    let mut cases = Vec::new();
    for path in entries(dir, is_json)? {
        let fixture: TriggerFixture = read_json(&path)?;
        let p = fixture.persona;
        let persona = trigger::Persona {
            name: p.name,
            mentions: p.mentions,
            keywords: p.keywords,
            all_messages: p.all_messages,
            subscribe: p.subscribe,
        };
        let mut differences = Vec::new();
        let mut messages = Vec::new();
        for (i, m) in fixture.messages.into_iter().enumerate() {
            let message = trigger::Message {
                id: format!("fixture-{}", i + 1),
                channel: m.channel,
                author: m.author,
                text: m.text,
                mentions: m.mentions,
            };
            // The host's failure policy: a matcher failure means "do not wake".
            let (got, why) = match runner.decide(sb, &persona, &message) {
                Ok(d) if d.value.wake => (Wake::Wake, format!(" ({})", d.value.reason)),
                Ok(d) => (Wake::Skip, format!(" ({})", d.value.reason)),
                Err(e) => (Wake::Skip, format!(" (the matcher failed: {e})")),
            };
            if got != m.expect {
                differences.push(format!(
                    "message {} {}: expected {:?}, got {got:?}{why}",
                    i + 1,
                    short(&message.text),
                    m.expect
                ));
            }
            messages.push((message, m.expect));
        }
        // `apiary up` decides whole batches: the batch answer must agree too.
        let (only, expects): (Vec<_>, Vec<_>) = messages.into_iter().unzip();
        match runner.decide_batch(sb, std::slice::from_ref(&persona), &only) {
            Ok(wakes) => {
                for (i, expect) in expects.iter().enumerate() {
                    let woken = wakes.value.iter().any(|w| w.message as usize == i);
                    let got = if woken { Wake::Wake } else { Wake::Skip };
                    if got != *expect {
                        differences.push(format!(
                            "message {} {}: decide-batch (what `apiary up` calls) says {got:?}, expected {expect:?}",
                            i + 1,
                            short(&only[i].text)
                        ));
                    }
                }
            }
            Err(e) => differences.push(format!("decide-batch failed: {e}")),
        }
        cases.push(Case::new(case_name(&path), differences));
    }
    Ok(cases)
}

// ---- converters

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ConverterCase {
    source: String,
    target: String,
    #[serde(default)]
    options: BTreeMap<String, String>,
    #[serde(default)]
    report: Option<Value>,
    #[serde(default)]
    error: Option<String>,
}

fn converter_cases(sb: &Sandbox, loaded: Arc<Loaded>, dir: &Path) -> Result<Vec<Case>, Failed> {
    let runner = ConverterRunner::new(loaded).map_err(Failed::error)?;
    let mut cases = Vec::new();
    for case_dir in entries(dir, |p| p.join("case.json").is_file())? {
        let case: ConverterCase = read_json(&case_dir.join("case.json"))?;
        let output = tempfile::tempdir()
            .map_err(|e| Failed::error(format_args!("cannot make an output directory: {e}")))?;
        let request = Request {
            source: case.source,
            target: case.target,
            options: case.options.into_iter().collect(),
        };
        let result = runner.convert(sb, &request, &case_dir.join("input"), output.path());
        let differences = match (result, &case.error) {
            (Ok(report), None) => {
                let mut d = compare_trees(&case_dir.join("expected"), output.path());
                if let Some(expected) = &case.report {
                    d.extend(compare_reports(expected, &report_json(&report.value)));
                }
                d
            }
            (Ok(_), Some(error)) => vec![format!(
                "expected the conversion to fail with \"{error}\", it succeeded"
            )],
            (Err(e), Some(error)) if e.to_string().contains(error.as_str()) => Vec::new(),
            (Err(e), _) => vec![format!("the conversion failed: {e}")],
        };
        cases.push(Case::new(case_name(&case_dir), differences));
    }
    Ok(cases)
}

fn report_json(report: &Report) -> Value {
    let list = |findings: &[crate::sandbox::converter::Finding]| {
        findings
            .iter()
            .map(
                |f| json!({"code": f.code, "path": f.path, "field": f.field, "message": f.message}),
            )
            .collect::<Vec<_>>()
    };
    json!({
        "lost": list(&report.lost),
        "synthesised": list(&report.synthesised),
        "normalised": list(&report.normalised),
        "reinterpreted": list(&report.reinterpreted),
    })
}

/// Findings expected but not reported, and reported but not expected, list by list.
fn compare_reports(expected: &Value, actual: &Value) -> Vec<String> {
    let mut differences = Vec::new();
    for list in ["lost", "synthesised", "normalised", "reinterpreted"] {
        let items = |v: &Value| {
            v.get(list)
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
        };
        let (want, got) = (items(expected), items(actual));
        for f in want.iter().filter(|f| !got.contains(f)) {
            differences.push(format!("report.{list}: missing {f}"));
        }
        for f in got.iter().filter(|f| !want.contains(f)) {
            differences.push(format!("report.{list}: unexpected {f}"));
        }
    }
    differences
}

/// Regular files under `root`, relative and `/`-separated, sorted; links are not followed.
fn files(root: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(relative) = stack.pop() {
        let Ok(read) = std::fs::read_dir(root.join(&relative)) else {
            continue;
        };
        for entry in read.flatten() {
            let child = relative.join(entry.file_name());
            match entry.file_type() {
                Ok(t) if t.is_dir() => stack.push(child),
                Ok(t) if t.is_file() => found.push(
                    child
                        .iter()
                        .map(|c| c.to_string_lossy())
                        .collect::<Vec<_>>()
                        .join("/"),
                ),
                _ => {}
            }
        }
    }
    found.sort();
    found
}

/// Missing, unexpected and differing files, with the first differing line of each.
fn compare_trees(expected: &Path, actual: &Path) -> Vec<String> {
    let (want, got) = (files(expected), files(actual));
    let mut differences = Vec::new();
    for file in &want {
        if !got.contains(file) {
            differences.push(format!("missing output file {file}"));
            continue;
        }
        let (a, b) = (
            std::fs::read(expected.join(file)).unwrap_or_default(),
            std::fs::read(actual.join(file)).unwrap_or_default(),
        );
        if a != b {
            differences.push(format!("{file} differs:\n{}", first_difference(&a, &b)));
        }
    }
    for file in got.iter().filter(|f| !want.contains(f)) {
        differences.push(format!("unexpected output file {file}"));
    }
    differences
}

fn first_difference(expected: &[u8], actual: &[u8]) -> String {
    let (e, a) = (
        String::from_utf8_lossy(expected),
        String::from_utf8_lossy(actual),
    );
    let (mut el, mut al) = (e.lines(), a.lines());
    for n in 1.. {
        match (el.next(), al.next()) {
            (None, None) => break,
            (x, y) if x == y => continue,
            (x, y) => {
                return format!(
                    "    line {n}\n    - {}\n    + {}",
                    x.unwrap_or("(end of file)"),
                    y.unwrap_or("(end of file)")
                );
            }
        }
    }
    "    (the bytes differ, e.g. a final newline)".to_string()
}

impl Outcome for Tested {
    fn human(&self, to: &mut Human<'_>) -> io::Result<()> {
        for case in &self.cases {
            let mark = if case.ok { "✓" } else { "✗" };
            writeln!(to.out, "{mark} {}", case.name)?;
            for d in &case.differences {
                writeln!(to.out, "    {}", d.replace('\n', "\n    "))?;
            }
        }
        let failed = self.cases.iter().filter(|c| !c.ok).count();
        writeln!(
            to.err,
            "{} ({}): {} passed, {failed} failed",
            self.component,
            self.world,
            self.cases.len() - failed
        )
    }

    fn json(&self) -> Option<&dyn Document> {
        Some(self)
    }

    fn exit_code(&self) -> u8 {
        if self.ok { exit::OK } else { exit::FAILURE }
    }
}
