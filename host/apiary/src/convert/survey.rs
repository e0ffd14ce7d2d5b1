//! `apiary convert DIR --survey`: every plugin under a directory converted in one process, and a
//! summary of how it went (exit codes, input formats, finding codes, refusals).
//!
//! What counts as one conversion is what a user would convert: a directory the detection rules
//! recognise (not descended into further), or, for a marketplace, each plugin it lists with a
//! local source (converted through the marketplace with `plugin=NAME`, so what the collection
//! holds for it is found). A directory the rules do not recognise is searched below. Nothing is
//! written unless the caller keeps the outputs ([`survey`]'s `keep`): each goes to a private
//! directory that is removed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use convert_kit::claude;
use serde::Serialize;

use super::registry::Registry;
use super::{Job, Outcome, detect};
use crate::sandbox::Sandbox;

/// How deep below DIR the search for plugins goes.
const MAX_DEPTH: usize = 8;
/// Most conversions one survey runs.
const MAX_UNITS: usize = 5_000;

/// One conversion to run: an input, and the marketplace plugin to pick from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unit {
    pub path: PathBuf,
    pub plugin: Option<String>,
}

/// How one conversion ended, as `apiary convert` would exit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// Converted, nothing lost: exit 0.
    Clean,
    /// Converted, the report lists losses: exit 2.
    Lost,
    /// Refused or failed: exit 1.
    Failed,
    /// Already in the target format: not converted.
    Already,
}

impl Verdict {
    pub fn of(o: &Outcome) -> Verdict {
        match &o.error {
            Some(e) if e.code == "same-format" => Verdict::Already,
            Some(_) => Verdict::Failed,
            None if o.report.lost.is_empty() => Verdict::Clean,
            None => Verdict::Lost,
        }
    }

    /// The exit code `apiary convert` gives it (`None`: not converted).
    pub fn exit_code(self) -> Option<u8> {
        match self {
            Verdict::Clean => Some(0),
            Verdict::Failed => Some(1),
            Verdict::Lost => Some(2),
            Verdict::Already => None,
        }
    }
}

/// One conversion of the survey.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// The input, relative to the surveyed directory (`.` for itself).
    pub input: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plugin: Option<String>,
    pub format: Option<String>,
    pub verdict: Verdict,
    pub exit: Option<u8>,
    pub lost: usize,
    /// The failure's code (detection, converter, validation, …).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Where the output was kept.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub out: Option<PathBuf>,
}

/// Counts over every conversion.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Summary {
    pub root: PathBuf,
    pub target: String,
    /// Conversions run (those already in the target format excluded).
    pub conversions: usize,
    /// Inputs already in the target format, not converted.
    pub already: usize,
    /// Marketplace entries whose source is remote (nothing in the tree to convert).
    pub remote: usize,
    /// Conversions per exit code.
    pub by_exit: BTreeMap<u8, usize>,
    /// Per input format: conversions per exit code.
    pub by_format: BTreeMap<String, BTreeMap<u8, usize>>,
    /// Per report list (lost, synthesised, …) and finding code: findings, and conversions with it.
    pub findings: BTreeMap<String, BTreeMap<String, Count>>,
    /// Failures per error code.
    pub errors: BTreeMap<String, usize>,
    pub rows: Vec<Row>,
}

/// How often a finding code occurred.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Count {
    pub findings: usize,
    pub conversions: usize,
}

/// The conversions under `root` (see the module docs), and how many remote marketplace entries
/// were left out.
pub fn units(root: &Path) -> (Vec<Unit>, usize) {
    let mut found = (Vec::new(), 0);
    search(root, 0, &mut found);
    found.0.truncate(MAX_UNITS);
    found
}

fn search(dir: &Path, depth: usize, found: &mut (Vec<Unit>, usize)) {
    if found.0.len() >= MAX_UNITS {
        return;
    }
    match detect::detect(dir) {
        Ok(d) if d.format == "claude-marketplace" && d.root.as_os_str().is_empty() => {
            let (local, remote) = marketplace_plugins(dir);
            found.1 += remote;
            found.0.extend(local.into_iter().map(|name| Unit {
                path: dir.to_path_buf(),
                plugin: Some(name),
            }));
        }
        Ok(d) => found.0.push(Unit {
            path: dir.join(&d.root),
            plugin: None,
        }),
        // A manifest that does not parse: that input, refused with its reason.
        Err(r) if r.fatal => found.0.push(Unit {
            path: dir.to_path_buf(),
            plugin: None,
        }),
        Err(_) if depth < MAX_DEPTH => {
            for child in subdirs(dir) {
                search(&child, depth + 1, found);
            }
        }
        Err(_) => {}
    }
}

/// Visible subdirectories (no symlinks), sorted.
fn subdirs(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut dirs: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .map(|e| e.path())
        .collect();
    dirs.sort();
    dirs
}

/// The names of a marketplace's plugins with a local source, and the count of remote ones.
fn marketplace_plugins(dir: &Path) -> (Vec<String>, usize) {
    let Some(file) = claude::MARKETPLACES
        .iter()
        .map(|f| dir.join(f))
        .find(|p| p.is_file())
    else {
        return (Vec::new(), 0);
    };
    let market: serde_json::Value = std::fs::read(&file)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default();
    let entries = market["plugins"].as_array().cloned().unwrap_or_default();
    let mut names = Vec::new();
    let mut remote = 0;
    for e in &entries {
        match (e["name"].as_str(), is_local(&e["source"])) {
            (Some(name), true) if !names.iter().any(|n| n == name) => names.push(name.to_string()),
            (Some(_), false) => remote += 1,
            _ => {}
        }
    }
    (names, remote)
}

/// Whether a marketplace `source` is a path in the tree (a string, `local`, or a `./` url), as
/// converter-claude reads it.
fn is_local(source: &serde_json::Value) -> bool {
    match source {
        serde_json::Value::String(_) => true,
        serde_json::Value::Object(o) => match o.get("source").and_then(|s| s.as_str()) {
            Some("local") => true,
            Some("url") => o
                .get("url")
                .and_then(|u| u.as_str())
                .is_some_and(|u| u == "." || u.starts_with("./")),
            _ => false,
        },
        _ => false,
    }
}

/// Runs every unit under `root` to `to` (with `options`), calling `each` after each conversion;
/// the summary. With `keep`, each output stays in a directory of its own under `keep`, named after
/// its plugin (see [`Names`]); without, it is removed.
pub fn survey(
    sandbox: &Sandbox,
    reg: &Registry,
    root: &Path,
    to: &str,
    options: &[(String, String)],
    keep: Option<&Path>,
    mut each: impl FnMut(&Row),
) -> std::io::Result<Summary> {
    let (units, remote) = units(root);
    let scratch = tempfile::Builder::new()
        .prefix("apiary-survey-")
        .tempdir()?;
    let mut names = Names::default();
    let mut s = Summary {
        root: root.to_path_buf(),
        target: to.to_string(),
        remote,
        ..Summary::default()
    };
    for (i, unit) in units.iter().enumerate() {
        let mut options = options.to_vec();
        if let Some(p) = &unit.plugin {
            options.push(("plugin".into(), p.clone()));
        }
        let out = match keep {
            Some(dir) => dir.join(names.next(unit)),
            None => scratch.path().join(format!("out-{i}")),
        };
        let job = Job {
            src: unit.path.clone(),
            to: to.to_string(),
            from: None,
            out,
            force: false,
            options,
        };
        let outcome = super::convert(sandbox, reg, &job);
        let kept = keep.is_some() && outcome.error.is_none();
        if !kept {
            let _ = std::fs::remove_dir_all(&job.out);
        }
        let row = s.add(root, unit, &outcome, kept.then_some(job.out));
        each(&row);
    }
    Ok(s)
}

/// A directory name per kept conversion: the marketplace plugin's name, else the input
/// directory's, with anything but letters, digits, `.`, `_` and `-` as `-` (a name comes from a
/// hostile manifest: never a path), `-2`, `-3`, … when taken.
#[derive(Default)]
struct Names {
    taken: std::collections::HashSet<String>,
}

impl Names {
    fn next(&mut self, unit: &Unit) -> String {
        let raw = match &unit.plugin {
            Some(p) => p.clone(),
            None => unit
                .path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
        };
        let clean: String = raw
            .chars()
            .take(100)
            .map(|c| match c {
                'a'..='z' | 'A'..='Z' | '0'..='9' | '.' | '_' | '-' => c,
                _ => '-',
            })
            .collect();
        let base = match clean.trim_matches('.') {
            "" => "plugin".to_string(),
            _ => clean,
        };
        let mut name = base.clone();
        let mut n = 1;
        while !self.taken.insert(name.to_ascii_lowercase()) {
            n += 1;
            name = format!("{base}-{n}");
        }
        name
    }
}

impl Summary {
    /// Counts one conversion in (its output kept at `out`); its row.
    fn add(&mut self, root: &Path, unit: &Unit, o: &Outcome, out: Option<PathBuf>) -> Row {
        let verdict = Verdict::of(o);
        let input = unit.path.strip_prefix(root).unwrap_or(&unit.path);
        let input = match input.display().to_string() {
            s if s.is_empty() => ".".to_string(),
            s => s,
        };
        let row = Row {
            input,
            plugin: unit.plugin.clone(),
            format: o.source_format.clone(),
            verdict,
            exit: verdict.exit_code(),
            lost: o.report.lost.len(),
            error: o.error.as_ref().map(|e| e.code.to_string()),
            out,
        };
        let Some(code) = row.exit else {
            self.already += 1;
            self.rows.push(row.clone());
            return row;
        };
        self.conversions += 1;
        *self.by_exit.entry(code).or_default() += 1;
        let format = row
            .format
            .clone()
            .unwrap_or_else(|| "(not detected)".into());
        *self
            .by_format
            .entry(format)
            .or_default()
            .entry(code)
            .or_default() += 1;
        if let Some(e) = &row.error {
            *self.errors.entry(e.clone()).or_default() += 1;
        }
        for (list, findings) in o.report.groups() {
            let codes = self.findings.entry(list.to_string()).or_default();
            let mut seen: Vec<&str> = Vec::new();
            for f in findings {
                let c = codes.entry(f.code.clone()).or_default();
                c.findings += 1;
                if !seen.contains(&f.code.as_str()) {
                    seen.push(&f.code);
                    c.conversions += 1;
                }
            }
        }
        self.findings.retain(|_, codes| !codes.is_empty());
        self.rows.push(row.clone());
        row
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(root: &Path, rel: &str, text: &str) {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    #[test]
    fn units_are_plugins_and_each_local_marketplace_entry() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let agent = "---\nname: a\ndescription: d\n---\nbody\n";
        write(
            root,
            "team/alpha/.claude-plugin/plugin.json",
            r#"{"name": "alpha"}"#,
        );
        write(root, "team/alpha/sub/agents/x.md", agent);
        write(root, "loose/helper.md", agent);
        write(
            root,
            "market/.claude-plugin/marketplace.json",
            r#"{"plugins": [{"name": "one", "source": "./p/one"},
                {"name": "far", "source": {"source": "github", "repo": "o/r"}}]}"#,
        );
        write(root, "market/p/one/agents/a.md", agent);
        write(root, "README.md", "# all\n");
        let (units, remote) = units(root);
        let got: Vec<(String, Option<String>)> = units
            .iter()
            .map(|u| {
                let p = u.path.strip_prefix(root).unwrap().display().to_string();
                (p, u.plugin.clone())
            })
            .collect();
        assert_eq!(
            got,
            [
                ("loose".to_string(), None),
                ("market".to_string(), Some("one".to_string())),
                ("team/alpha".to_string(), None),
            ]
        );
        assert_eq!(remote, 1);
    }

    #[test]
    fn kept_outputs_get_a_plain_name_of_their_own_whatever_the_manifest_says() {
        let mut names = Names::default();
        let unit = |path: &str, plugin: Option<&str>| Unit {
            path: PathBuf::from(path),
            plugin: plugin.map(str::to_string),
        };
        let got: Vec<String> = [
            unit("/c/team/alpha", None),
            unit("/c/market", Some("alpha")),
            unit("/c/market", Some("../../etc")),
            unit("/c/market", Some("ALPHA")),
            unit("/c/market", Some("..")),
            unit("/", None),
        ]
        .iter()
        .map(|u| names.next(u))
        .collect();
        assert_eq!(
            got,
            [
                "alpha",
                "alpha-2",
                "..-..-etc",
                "ALPHA-3",
                "plugin",
                "plugin-2"
            ]
        );
        assert!(got.iter().all(|n| !n.contains('/') && n != ".."));
    }
}
