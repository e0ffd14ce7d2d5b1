//! The operator-side agent config of personas installed from DuDuClaw expert packs, and the
//! non-clobbering merge of their `agent.partial.toml` into it (the DuDuClaw Expert Pack Format
//! v1.0, §4.3 Deep-merge, never clobber).
//!
//! DuDuClaw scaffolds an `agents/<name>/agent.toml` for every agent it creates and deep-merges the
//! pack's `agent.partial.toml` (model, budget, permissions, capabilities) into it. apiary's closest
//! honest equivalent, decided here:
//! - **Where.** One file per installed persona that brought a partial:
//!   `<root>/.apiary/agents/<pack-id>/<persona>/agent.toml`. It sits beside the trust store (the
//!   other operator-side state of an install root), outside the pack directory, so it survives
//!   upgrades and `apiary verify` does not count it as drift. Personas without a partial get no file:
//!   nothing is scaffolded that the pack did not ask for.
//! - **Never clobber.** The merge works on leaf keys (`budget.monthly_limit_cents`; arrays are
//!   values, not merged). A key the file already holds (the operator's, or another tool's) keeps
//!   its value and is reported as kept; a key under something that is not a table is kept too.
//!   Only absent keys are written. A file that is not valid TOML refuses the install rather than
//!   being overwritten.
//! - **Recorded.** What the merge added (key and value), what it kept and whether the pack created
//!   the file are recorded in the pack's `pack.lock` entry under `agent_config` (and so in its
//!   install record too).
//! - **Scoped removal.** Uninstalling, or upgrading to a version without a partial, removes exactly
//!   the recorded keys whose value is still the recorded one; a key the operator changed since is
//!   theirs now and stays, as do keys added later. Tables left empty by the removal go; the file
//!   goes only when the pack created it and nothing is left.
//! - **Crash safety.** The writes are planned before the install commits, stored in the install
//!   journal and applied after the `pack.lock` commit point, so recovery finishes them.
//! - **What reads it.** `apiary up` enforces its `[limits]` table (`turns_per_hour`,
//!   `turns_per_day`, `tokens_per_day`; the overrides file's `limits` win key by key). The rest is
//!   the operator's record of the settings the pack asked for (the persona's `model` is already in
//!   its frontmatter, set by the converter). Rewriting a file that already existed
//!   keeps its keys and values but not its comments or layout (TOML is re-serialised).

use crate::dist::code;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::lock::LockEntry;
use super::{DistError, Result};

/// The `pack.lock` entry key holding the merge record.
pub const LOCK_KEY: &str = "agent_config";
/// Agent config files live under `<root>/<CONFIG_DIR>/<pack-id>/<persona>/agent.toml`.
pub const CONFIG_DIR: &str = ".apiary/agents";
const FILE_NAME: &str = "agent.toml";
/// Agent config files larger than this are refused rather than parsed.
const MAX_CONFIG_BYTES: u64 = 1024 * 1024;

/// A persona's `agent.partial.toml`, as JSON: `(persona name, partial)`.
pub type Partial = (String, Map<String, Value>);

/// One leaf key the merge wrote, and the value it wrote.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Added {
    pub key: Vec<String>,
    pub value: Value,
}

/// What the merge did to one persona's agent config.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Merge {
    pub persona: String,
    /// Root-relative, for people; the path is always recomputed from pack id and persona.
    pub file: String,
    /// The pack created the file (it did not exist before the first install of this pack).
    pub created: bool,
    #[serde(default)]
    pub added: Vec<Added>,
    /// Keys of the partial the file already held: left as they were.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kept: Vec<Vec<String>>,
}

/// One file write: new contents, or `None` to delete the file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Write {
    /// Root-relative, under [`CONFIG_DIR`].
    pub file: String,
    pub content: Option<String>,
}

/// The merge record of a lock entry (empty when there is none or it does not parse).
pub fn recorded(entry: &LockEntry) -> Vec<Merge> {
    entry
        .extra
        .get(LOCK_KEY)
        .and_then(|v| serde_json::from_value(v.clone()).ok())
        .unwrap_or_default()
}

pub fn to_lock(merges: &[Merge]) -> Value {
    serde_json::to_value(merges).unwrap_or(Value::Null)
}

fn safe_segment(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 200
        && !s.starts_with('.')
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
}

/// `<CONFIG_DIR>/<pack-id>/<persona>/agent.toml`, or `None` for a name that is not one safe path
/// component.
pub fn config_file(pack_id: &str, persona: &str) -> Option<String> {
    (safe_segment(pack_id) && safe_segment(persona))
        .then(|| format!("{CONFIG_DIR}/{pack_id}/{persona}/{FILE_NAME}"))
}

/// The `[limits]` table of an installed persona's agent config (`apiary up` enforces it; see
/// `dispatch::limits`): none when there is no file or table; `Err` when the file or the table
/// cannot be read.
pub fn limits(
    root: &Path,
    pack_id: &str,
    persona: &str,
) -> std::result::Result<crate::resolve::limits::PersonaLimits, String> {
    use crate::resolve::limits::{LIMITS, PersonaLimits};
    let Some(rel) = config_file(pack_id, persona) else {
        return Ok(PersonaLimits::default());
    };
    let path = root.join(rel);
    let table = read_table(&path).map_err(|e| e.message)?;
    match table.as_ref().and_then(|t| t.get(LIMITS)).map(as_json) {
        None => Ok(PersonaLimits::default()),
        Some(Value::Object(limits)) => {
            PersonaLimits::from_table(&limits).map_err(|e| format!("{}: {e}", path.display()))
        }
        Some(_) => Err(format!("{}: `{LIMITS}` must be a table", path.display())),
    }
}

/// The TOML table in `path`; `None` when there is no file.
fn read_table(path: &Path) -> Result<Option<toml::Table>> {
    let invalid = |message: String| {
        DistError::new(code::AgentConfig::Invalid, message)
            .help("fix or move the file; apiary never overwrites an agent config it cannot read")
    };
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(invalid(format!("cannot read {}: {e}", path.display()))),
    };
    if !meta.is_file() {
        return Err(invalid(format!("{} is not a regular file", path.display())));
    }
    if meta.len() > MAX_CONFIG_BYTES {
        return Err(invalid(format!(
            "{} is larger than {MAX_CONFIG_BYTES} bytes",
            path.display()
        )));
    }
    let text = std::fs::read_to_string(path)
        .map_err(|e| invalid(format!("cannot read {}: {e}", path.display())))?;
    text.parse::<toml::Table>()
        .map(Some)
        .map_err(|e| invalid(format!("{} is not valid TOML: {e}", path.display())))
}

/// The value at `key`: `Ok(Some)` when present, `Ok(None)` when absent, `Err(())` when a prefix of
/// the key is something other than a table (the key cannot be added without replacing it).
fn lookup<'a>(
    table: &'a toml::Table,
    key: &[String],
) -> std::result::Result<Option<&'a toml::Value>, ()> {
    let Some((last, parents)) = key.split_last() else {
        return Ok(None);
    };
    let mut here = table;
    for k in parents {
        match here.get(k) {
            None => return Ok(None),
            Some(toml::Value::Table(t)) => here = t,
            Some(_) => return Err(()),
        }
    }
    Ok(here.get(last))
}

fn insert(table: &mut toml::Table, key: &[String], value: toml::Value) {
    let Some((last, parents)) = key.split_last() else {
        return;
    };
    let mut here = table;
    for k in parents {
        let entry = here
            .entry(k.clone())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        let toml::Value::Table(t) = entry else {
            return;
        };
        here = t;
    }
    here.insert(last.clone(), value);
}

/// Removes `key`, then every table on its path that the removal left empty.
fn remove(table: &mut toml::Table, key: &[String]) {
    let Some((first, rest)) = key.split_first() else {
        return;
    };
    if rest.is_empty() {
        table.remove(first);
        return;
    }
    if let Some(toml::Value::Table(t)) = table.get_mut(first) {
        remove(t, rest);
        if t.is_empty() {
            table.remove(first);
        }
    }
}

fn as_json(v: &toml::Value) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

/// The leaf keys of a partial, in document order: objects are descended, anything else (arrays
/// included) is a value.
fn leaves(map: &Map<String, Value>, prefix: &mut Vec<String>, out: &mut Vec<(Vec<String>, Value)>) {
    for (k, v) in map {
        prefix.push(k.clone());
        match v {
            Value::Object(inner) => leaves(inner, prefix, out),
            other => out.push((prefix.clone(), other.clone())),
        }
        prefix.pop();
    }
}

/// Plans the agent config after installing `pack_id` whose personas bring `partials` (persona
/// name, partial as JSON; in install order), given the merge record `before` of the version being
/// replaced. Returns the new merge record and the writes that realise it. Refuses (nothing written)
/// when an existing file cannot be read as TOML.
pub fn plan(
    root: &Path,
    pack_id: &str,
    partials: &[Partial],
    before: &[Merge],
) -> Result<(Vec<Merge>, Vec<Write>)> {
    plan_inner(root, pack_id, partials, before, true)
}

/// The writes that take back the merge record `merges` (uninstall). A file that cannot be read is
/// left alone, with a warning: removal never fails on the operator's files.
pub fn unmerge(root: &Path, pack_id: &str, merges: &[Merge]) -> Vec<Write> {
    plan_inner(root, pack_id, &[], merges, false)
        .map(|(_, w)| w)
        .unwrap_or_default()
}

fn plan_inner(
    root: &Path,
    pack_id: &str,
    partials: &[Partial],
    before: &[Merge],
    strict: bool,
) -> Result<(Vec<Merge>, Vec<Write>)> {
    let mut personas: Vec<&str> = partials.iter().map(|(p, _)| p.as_str()).collect();
    for m in before {
        if !personas.contains(&m.persona.as_str()) {
            personas.push(&m.persona);
        }
    }
    let mut merges = Vec::new();
    let mut writes = Vec::new();
    for persona in personas {
        let Some((file, current)) = read_current(root, pack_id, persona, strict)? else {
            continue;
        };
        let prev = before.iter().find(|m| m.persona == persona);
        let mut table = current.clone().unwrap_or_default();
        if let Some(prev) = prev {
            take_back(&mut table, prev);
        }
        let created = current.is_none() || prev.is_some_and(|p| p.created);
        if let Some((_, partial)) = partials.iter().find(|(p, _)| p == persona) {
            let mut merge = Merge {
                persona: persona.to_string(),
                file: file.clone(),
                created,
                added: Vec::new(),
                kept: Vec::new(),
            };
            merge_partial(&mut table, partial, &mut merge);
            merges.push(merge);
        }
        if Some(&table) != current.as_ref() {
            let content = if table.is_empty() && created {
                None
            } else {
                Some(toml::to_string(&table).map_err(|e| {
                    DistError::new(
                        code::AgentConfig::Write,
                        format!("cannot write {file}: {e}"),
                    )
                })?)
            };
            writes.push(Write { file, content });
        }
    }
    Ok((merges, writes))
}

/// The persona's agent config file (root-relative) and its table (`None`: no file yet). `None`
/// when the file cannot be used and `strict` is off (it is left alone); with `strict`, an error.
fn read_current(
    root: &Path,
    pack_id: &str,
    persona: &str,
    strict: bool,
) -> Result<Option<(String, Option<toml::Table>)>> {
    let Some(file) = config_file(pack_id, persona) else {
        if strict {
            return Err(DistError::new(
                code::AgentConfig::Name,
                format!("persona `{persona}` of {pack_id} cannot name an agent config file"),
            ));
        }
        return Ok(None);
    };
    match read_table(&root.join(&file)) {
        Ok(current) => Ok(Some((file, current))),
        Err(mut e) if strict => {
            e.message = format!(
                "cannot merge agent.partial.toml into the agent config: {}",
                e.message
            );
            Err(e)
        }
        Err(e) => {
            tracing::warn!("left the agent config alone: {e}");
            Ok(None)
        }
    }
}

/// Takes back what the earlier install `prev` added, where the operator left it unchanged.
fn take_back(table: &mut toml::Table, prev: &Merge) {
    for a in &prev.added {
        if lookup(table, &a.key).ok().flatten().map(as_json).as_ref() == Some(&a.value) {
            remove(table, &a.key);
        }
    }
}

/// Adds every leaf of `partial` that `table` does not set, recording in `merge` what was added
/// and what was kept as the operator has it.
fn merge_partial(table: &mut toml::Table, partial: &Map<String, Value>, merge: &mut Merge) {
    let mut all = Vec::new();
    leaves(partial, &mut Vec::new(), &mut all);
    for (key, value) in all {
        match lookup(table, &key) {
            Ok(None) => match toml::Value::try_from(&value) {
                Ok(v) => {
                    insert(table, &key, v);
                    merge.added.push(Added { key, value });
                }
                // `null` and the like have no TOML form: nothing to merge.
                Err(_) => merge.kept.push(key),
            },
            Ok(Some(_)) | Err(()) => merge.kept.push(key),
        }
    }
}

/// Performs `writes` (idempotent: recovery may run them again). Each file is replaced atomically;
/// a deleted file's directories go when left empty.
pub fn apply(root: &Path, state: &Path, writes: &[Write]) -> Result<()> {
    for w in writes {
        let rel_ok = w.file.starts_with(&format!("{CONFIG_DIR}/"))
            && super::archive::check_entry_name(&w.file, &Default::default())
                .is_ok_and(|n| n == w.file);
        if !rel_ok || super::through_symlink(root, &w.file) {
            return Err(DistError::new(
                code::AgentConfig::Path,
                format!("refusing to write the agent config file `{}`", w.file),
            ));
        }
        let path = root.join(&w.file);
        match &w.content {
            Some(text) => {
                let parent = path.parent().unwrap_or(root);
                std::fs::create_dir_all(parent)
                    .map_err(|e| DistError::io("cannot create", parent, e))?;
                super::write_atomic(&path, state, text.as_bytes())
                    .map_err(|e| DistError::io("cannot write", &path, e))?;
            }
            None => {
                match std::fs::remove_file(&path) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(DistError::io("cannot remove", &path, e)),
                }
                prune_up(root, &path);
            }
        }
    }
    Ok(())
}

/// Removes the now-empty directories between `file` and `<root>/.apiary`.
fn prune_up(root: &Path, file: &Path) {
    let stop: PathBuf = root.join(super::STATE_DIR);
    let mut dir = file.parent();
    while let Some(d) = dir {
        if d == stop || !d.starts_with(&stop) || std::fs::remove_dir(d).is_err() {
            break;
        }
        dir = d.parent();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn partial(text: &str) -> Map<String, Value> {
        let t: toml::Table = text.parse().unwrap();
        serde_json::to_value(t)
            .unwrap()
            .as_object()
            .unwrap()
            .clone()
    }

    fn run(root: &Path, partials: &[Partial], before: &[Merge]) -> Vec<Merge> {
        let (m, w) = plan(root, "p", partials, before).unwrap();
        let state = root.join(".apiary");
        std::fs::create_dir_all(&state).unwrap();
        apply(root, &state, &w).unwrap();
        m
    }

    #[test]
    fn merge_keeps_existing_keys_and_unmerge_takes_back_only_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let file = root.join(".apiary/agents/p/lead/agent.toml");
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, "[budget]\nmonthly_limit_cents = 5\n").unwrap();
        let p = partial(
            "[budget]\nmonthly_limit_cents = 3000\nhard_stop = true\n[model]\npreferred = \"x\"\n",
        );
        let merges = run(root, &[("lead".into(), p)], &[]);
        let t: toml::Table = std::fs::read_to_string(&file).unwrap().parse().unwrap();
        assert_eq!(t["budget"]["monthly_limit_cents"].as_integer(), Some(5));
        assert_eq!(t["budget"]["hard_stop"].as_bool(), Some(true));
        assert_eq!(t["model"]["preferred"].as_str(), Some("x"));
        assert!(!merges[0].created);
        assert_eq!(
            merges[0].kept,
            vec![vec!["budget".to_string(), "monthly_limit_cents".into()]]
        );

        // The operator changes one added key and adds another: both stay on removal.
        std::fs::write(
            &file,
            "[budget]\nmonthly_limit_cents = 5\nhard_stop = false\n[model]\npreferred = \"x\"\nmine = 1\n",
        )
        .unwrap();
        let state = root.join(".apiary");
        apply(root, &state, &unmerge(root, "p", &merges)).unwrap();
        let t: toml::Table = std::fs::read_to_string(&file).unwrap().parse().unwrap();
        assert_eq!(t["budget"]["hard_stop"].as_bool(), Some(false));
        assert_eq!(t["model"].get("preferred"), None);
        assert_eq!(t["model"]["mine"].as_integer(), Some(1));
    }

    #[test]
    fn created_file_goes_when_emptied_and_upgrades_keep_ownership() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let p1 = partial("[budget]\nmonthly_limit_cents = 1\n");
        let m1 = run(root, &[("w".into(), p1)], &[]);
        assert!(m1[0].created);
        // Upgrade: the new value replaces the old one the pack wrote.
        let p2 = partial("[budget]\nmonthly_limit_cents = 2\n");
        let m2 = run(root, &[("w".into(), p2)], &m1);
        let file = root.join(".apiary/agents/p/w/agent.toml");
        let t: toml::Table = std::fs::read_to_string(&file).unwrap().parse().unwrap();
        assert_eq!(t["budget"]["monthly_limit_cents"].as_integer(), Some(2));
        assert!(m2[0].created);
        let state = root.join(".apiary");
        apply(root, &state, &unmerge(root, "p", &m2)).unwrap();
        assert!(!file.exists());
        assert!(!root.join(".apiary/agents").exists());
    }

    #[test]
    fn unreadable_config_refuses_install_but_not_removal() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let file = root.join(".apiary/agents/p/w/agent.toml");
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, "not = [toml").unwrap();
        let e = plan(root, "p", &[("w".into(), partial("a = 1"))], &[]).unwrap_err();
        assert_eq!(e.code, "agent-config.invalid");
        let m = Merge {
            persona: "w".into(),
            file: ".apiary/agents/p/w/agent.toml".into(),
            created: true,
            added: vec![],
            kept: vec![],
        };
        assert!(unmerge(root, "p", &[m]).is_empty());
        assert!(config_file("p", "../x").is_none());
    }
}
