//! A plugin marketplace -> one persona pack per local plugin. Claude's
//! `.claude-plugin/marketplace.json`, Copilot's `.github/plugin/marketplace.json` and the Agent
//! Plugins / Codex `.agents/plugins/marketplace.json` share one shape (`name`, `plugins` with a
//! `source` each); the first present is read. A plugin is read with the manifest it has (Claude,
//! then Codex, Cursor); a local `url` source (`./`) counts as a path.
//!
//! Output layout: `<plugin-name>/` in the output holds that plugin's pack (the name slugged per
//! Claude rules, made unique). With the option `plugin=<name>` only that plugin is converted, into
//! the output root, so the output is a single pack. Remote sources (github, url, git-subdir, npm)
//! cannot be read from a sandbox with only the input tree: each is reported and skipped, as is a
//! local source whose directory is missing or that cannot be read.

use std::path::{Path, PathBuf};

use convert_kit::slug::{self, Rules};
use convert_kit::{Report, Value, claude, tree};

use crate::read::{self, Context, Host};
use crate::util::{clean_path, unique};

/// The marketplace file of the tree at `input`, if it has one.
pub fn file(input: &Path) -> Option<&'static str> {
    claude::MARKETPLACES
        .iter()
        .copied()
        .find(|f| tree::is_file(input, f))
}

pub fn convert(input: &Path, out: &Path, only: Option<&str>) -> Result<Report, String> {
    let Some(file) = file(input) else {
        return Err(format!(
            "no marketplace here: expected one of {}",
            claude::MARKETPLACES.join(", ")
        ));
    };
    let market = match tree::read_json(input, file)? {
        Value::Object(m) => m,
        _ => return Err(format!("{file} is not a JSON object")),
    };
    let Some(Value::Array(entries)) = market.get("plugins") else {
        return Err(format!("{file} has no `plugins` list"));
    };
    let mut m = Market {
        file,
        input,
        out,
        only,
        name: market
            .get("name")
            .and_then(Value::as_str)
            .map(str::to_string),
        plugin_root: market
            .get("metadata")
            .and_then(|m| m.get("pluginRoot"))
            .and_then(Value::as_str)
            .map(str::to_string),
        taken: Vec::new(),
        report: Report::default(),
    };
    let others: Vec<&str> = market
        .keys()
        .map(String::as_str)
        .filter(|k| !matches!(*k, "plugins" | "name"))
        .collect();
    if !others.is_empty() {
        // Nothing a persona runs with: the catalogue's own description, owner and version.
        m.report.normalised(
            "marketplace-metadata-dropped",
            file,
            "",
            format!(
                "marketplace fields {} describe the catalogue, not a plugin; each pack keeps its own plugin's metadata",
                others.join(", ")
            ),
        );
    }
    let mut converted = 0usize;
    for (i, entry) in entries.iter().enumerate() {
        if m.entry(i, entry)? {
            converted += 1;
        }
    }
    // Why the one plugin asked for was skipped, when the marketplace lists it.
    let skipped = |o: &str| {
        let field = format!("plugins.{o}");
        m.report
            .lost
            .iter()
            .find(|f| f.field == field)
            .map(|f| f.message.clone())
    };
    match (only, converted) {
        (Some(o), 0) => Err(match skipped(o) {
            Some(why) => format!("{file} lists `{o}`, but it cannot be converted: {why}"),
            None => {
                format!("the marketplace lists no local plugin named `{o}` that can be converted")
            }
        }),
        (None, 0) => Err(format!(
            "no plugin of {file} could be converted (remote or missing sources only)"
        )),
        _ => Ok(m.report),
    }
}

/// A marketplace being converted.
struct Market<'a> {
    /// The marketplace file read.
    file: &'static str,
    input: &'a Path,
    out: &'a Path,
    /// The one plugin to convert (into the output root), if asked.
    only: Option<&'a str>,
    name: Option<String>,
    /// `metadata.pluginRoot`: where relative plugin sources start.
    plugin_root: Option<String>,
    /// Output directories used so far.
    taken: Vec<String>,
    report: Report,
}

impl Market<'_> {
    /// One plugin entry: converted (`true`), or reported and skipped.
    fn entry(&mut self, i: usize, entry: &Value) -> Result<bool, String> {
        let field = format!("plugins[{i}]");
        let Some(entry) = entry.as_object() else {
            self.report.lost(
                "entry-invalid",
                self.file,
                &field,
                "a plugin entry that is not an object; skipped",
            );
            return Ok(false);
        };
        let Some(name) = entry
            .get("name")
            .and_then(Value::as_str)
            .filter(|n| !n.trim().is_empty())
        else {
            self.report.lost(
                "entry-invalid",
                self.file,
                &field,
                "a plugin entry without a `name`; skipped",
            );
            return Ok(false);
        };
        if self.only.is_some_and(|o| o != name) {
            return Ok(false);
        }
        let field = format!("plugins.{name}");
        let Some(dir) = self.plugin_dir(entry.get("source"), name, &field) else {
            return Ok(false);
        };
        let root = if dir.is_empty() {
            self.input.to_path_buf()
        } else {
            tree::join(self.input, &dir)?
        };
        let ctx = Context {
            prefix: dir.clone(),
            entry: Some(entry.clone()),
            marketplace: self.name.clone(),
            fallback_name: Some(name.to_string()),
            loose_agents: false,
            source_name: None,
            // The marketplace root: what its plugins list outside their folder is looked for
            // there (collections that materialise components when they publish).
            collection: Some(self.input.to_path_buf()),
        };
        // A plugin's own manifest, whichever host it was written for; only without one does
        // the marketplace entry stand in for it.
        let host = [Host::Claude, Host::Codex, Host::Cursor]
            .into_iter()
            .find(|h| tree::is_file(&root, h.manifest()))
            .or_else(|| Host::copilot(&root))
            .unwrap_or(Host::Claude);
        let converted_plugin = match read::read(&root, host, &ctx) {
            Ok(c) => c,
            Err(e) => {
                self.report.lost(
                    "plugin-refused",
                    self.file,
                    &field,
                    format!("plugin `{name}` cannot be read: {e}; skipped"),
                );
                return Ok(false);
            }
        };
        let target = self.target(name, &field)?;
        converted_plugin.write(&target)?;
        self.report.extend(converted_plugin.report);
        Ok(true)
    }

    /// The plugin's directory in the input, when its source is local and present.
    fn plugin_dir(&mut self, source: Option<&Value>, name: &str, field: &str) -> Option<String> {
        let dir = match local_dir(source, self.plugin_root.as_deref()) {
            Ok(dir) => dir,
            Err(why) => {
                self.report.lost(
                    "remote-plugin-skipped",
                    self.file,
                    field,
                    format!("plugin `{name}`: {why}; skipped"),
                );
                return None;
            }
        };
        if !tree::is_dir(self.input, &dir) && !dir.is_empty() {
            self.report.lost(
                "plugin-missing",
                self.file,
                field,
                format!("plugin `{name}`: its directory `{dir}` is not in the input; skipped"),
            );
            return None;
        }
        Some(dir)
    }

    /// Where the plugin's pack goes: the output root for `plugin=<name>`, else a directory named
    /// after it.
    fn target(&mut self, name: &str, field: &str) -> Result<PathBuf, String> {
        if self.only.is_some() {
            return Ok(self.out.to_path_buf());
        }
        let base = slug::normalise(name, Rules::Claude).unwrap_or_else(|| "plugin".into());
        let sub = unique(&base, &mut self.taken);
        if sub != name {
            self.report.normalised(
                "name-normalised",
                self.file,
                field,
                format!("{name} -> {sub}/ (output directory)"),
            );
        }
        tree::join(self.out, &sub)
    }
}

/// The plugin directory of a local source, or why the source is not local.
fn local_dir(source: Option<&Value>, plugin_root: Option<&str>) -> Result<String, String> {
    let path = match source {
        Some(Value::String(s)) => {
            let s = s.trim();
            match plugin_root {
                Some(root) if !s.starts_with("./") && !s.starts_with("../") => {
                    format!("{root}/{s}")
                }
                _ => s.to_string(),
            }
        }
        Some(Value::Object(o)) => match o.get("source").and_then(Value::as_str) {
            // A `url` that is a relative path is local (Agent Plugins marketplaces list
            // themselves as `{"source": "url", "url": "./"}`).
            Some("url")
                if o.get("url")
                    .and_then(Value::as_str)
                    .is_some_and(|u| u.starts_with("./") || u == ".") =>
            {
                o.get("url")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string()
            }
            Some("local") => o
                .get("path")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            Some(kind) => {
                let at = ["repo", "url", "package"]
                    .iter()
                    .find_map(|k| o.get(*k).and_then(Value::as_str))
                    .unwrap_or_default();
                return Err(format!("a remote `{kind}` source {at}"));
            }
            None => return Err("a source object without `source`".into()),
        },
        _ => return Err("no usable `source`".into()),
    };
    clean_path(&path)
}

/// Detection helper: how many local and remote plugins the marketplace lists.
pub fn count(input: &Path) -> Option<(usize, usize)> {
    let market = tree::read_json(input, file(input)?).ok()?;
    let entries = market.get("plugins")?.as_array()?;
    let root = market
        .get("metadata")
        .and_then(|m| m.get("pluginRoot"))
        .and_then(Value::as_str);
    let local = entries
        .iter()
        .filter(|e| local_dir(e.get("source"), root).is_ok())
        .count();
    Some((local, entries.len() - local))
}
