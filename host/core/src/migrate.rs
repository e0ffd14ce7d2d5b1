//! `apiary pack migrate`: rewrites older pack formats to the current one (spec §14).
//!
//! - V6: a `buzz:` block in persona frontmatter or in `plugin.json` moves to the top level
//!   (`buzz.respond_to` becomes `triggers`).
//! - Pre-V6: JSON personas (`personas/<n>.json`) become `agents/<n>.persona.md`, with `system_prompt` as
//!   the body and `channels` as `subscribe`; the old files are left in place for the author to delete.
//!
//! Every rewrite is written to a temporary file and renamed over the original, so an interrupted
//! migration never leaves a half-written file.

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{Map, Value};
use serde_yaml_ng::{Mapping, Value as Yaml};

use crate::pack::{frontmatter, manifest::MANIFEST_PATH, paths};

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Change {
    /// Pack-relative file the change is in.
    pub file: PathBuf,
    pub description: String,
}

#[derive(Debug, thiserror::Error)]
pub enum MigrateError {
    #[error("cannot read {0}: {1}")]
    Read(PathBuf, String),
    #[error("{0} is not valid JSON: {1}")]
    Json(PathBuf, serde_json::Error),
    #[error("{0}: the frontmatter is not valid YAML: {1}")]
    Yaml(PathBuf, serde_yaml_ng::Error),
    #[error("{0}: {1}")]
    Shape(PathBuf, String),
    #[error("cannot write {0}: {1}")]
    Write(PathBuf, std::io::Error),
}

impl MigrateError {
    /// A short machine-readable kind, for `--json` output and tests.
    pub fn kind(&self) -> &'static str {
        match self {
            MigrateError::Read(..) => "read",
            MigrateError::Json(..) => "json",
            MigrateError::Yaml(..) => "yaml",
            MigrateError::Shape(..) => "shape",
            MigrateError::Write(..) => "write",
        }
    }
}

/// Fields that moved out of the V6 `buzz:` block, with their new names.
fn v6_key(key: &str) -> &str {
    if key == "respond_to" { "triggers" } else { key }
}

pub fn migrate(dir: &Path, dry_run: bool) -> Result<Vec<Change>, MigrateError> {
    let root = dir
        .canonicalize()
        .map_err(|e| MigrateError::Read(dir.to_path_buf(), e.to_string()))?;
    let manifest_path = root.join(MANIFEST_PATH);
    // Pre-V6 packs predate the manifest (§14 step 1 creates it): start one with placeholders.
    let create_manifest = !manifest_path.exists() && !pre_v6_files(&root).is_empty();
    let manifest_text = if create_manifest {
        placeholder_manifest(&root)
    } else {
        read(&manifest_path)?
    };
    // A byte-order mark is accepted by validate (with a warning); the rewrite drops it.
    let manifest_text = manifest_text.trim_start_matches('\u{feff}');
    let mut manifest: Value = serde_json::from_str(manifest_text)
        .map_err(|e| MigrateError::Json(MANIFEST_PATH.into(), e))?;
    let Value::Object(top) = &mut manifest else {
        return Err(MigrateError::Shape(
            MANIFEST_PATH.into(),
            "must contain a JSON object".into(),
        ));
    };
    let mut changes = Vec::new();
    if create_manifest {
        note(
            &mut changes,
            MANIFEST_PATH.as_ref(),
            "created the manifest with a placeholder `id`, `name` and `version` (0.1.0): edit them"
                .into(),
        );
    }
    let lifted = lift_buzz(top, &mut changes)?;
    let listed = migrate_personas(&root, top, dry_run, &mut changes)?;
    if (create_manifest || lifted || listed) && !dry_run {
        let mut text = serde_json::to_string_pretty(&manifest).expect("a JSON value serialises");
        text.push('\n');
        if create_manifest {
            write_new(&root, MANIFEST_PATH.as_ref(), &text)?;
        } else {
            write_atomic(&manifest_path, &text)?;
        }
    }
    Ok(changes)
}

fn note(changes: &mut Vec<Change>, file: &Path, description: String) {
    changes.push(Change {
        file: file.to_path_buf(),
        description,
    })
}

/// plugin.json: lifts the V6 `buzz` block to the top level (what is already there wins). `true`
/// when there was one.
fn lift_buzz(
    top: &mut Map<String, Value>,
    changes: &mut Vec<Change>,
) -> Result<bool, MigrateError> {
    let Some(buzz) = top.remove("buzz") else {
        return Ok(false);
    };
    let Value::Object(buzz) = buzz else {
        return Err(MigrateError::Shape(
            MANIFEST_PATH.into(),
            "`buzz` must be an object".into(),
        ));
    };
    for (key, mut value) in buzz {
        if key == "defaults"
            && let Some(d) = value.as_object_mut()
            && let Some(t) = d.remove("respond_to")
        {
            d.entry("triggers").or_insert(t);
        }
        if top.contains_key(&key) {
            note(
                changes,
                MANIFEST_PATH.as_ref(),
                format!(
                    "kept the top-level `{key}`; dropped `buzz.{key}`, which it already overrides"
                ),
            );
        } else {
            note(
                changes,
                MANIFEST_PATH.as_ref(),
                format!("moved `buzz.{key}` to the top-level `{key}`"),
            );
            top.insert(key, value);
        }
    }
    Ok(true)
}

/// The personas the manifest lists (or, when it lists none, the pre-V6 JSON files): V6 persona
/// files are rewritten in place, JSON personas converted to new `.persona.md` files, and
/// `personas` updated to list them. `true` when the manifest changed.
fn migrate_personas(
    root: &Path,
    top: &mut Map<String, Value>,
    dry_run: bool,
    changes: &mut Vec<Change>,
) -> Result<bool, MigrateError> {
    let mut changed = false;
    let mut entries: Vec<String> = match top.get("personas") {
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect(),
        _ => vec![],
    };
    if entries.is_empty() {
        entries = pre_v6_files(root);
    }
    let mut new_entries = Vec::new();
    for entry in &entries {
        let path = paths::resolve_inside(root, entry)
            .map_err(|e| MigrateError::Shape(entry.into(), e.to_string()))?;
        if entry.ends_with(".json") {
            let (rel, text, name) = convert_json_persona(root, &path, entry)?;
            note(
                changes,
                &rel,
                format!(
                    "created from pre-V6 JSON persona `{entry}` ({name}); the JSON file is left in place"
                ),
            );
            if !dry_run {
                write_new(root, &rel, &text)?;
            }
            new_entries.push(rel.to_string_lossy().replace('\\', "/"));
            changed = true;
        } else {
            let rel = PathBuf::from(entry);
            if let Some(text) = migrate_v6_persona(&rel, &read(&path)?, changes)?
                && !dry_run
            {
                write_atomic(&path, &text)?;
            }
            new_entries.push(entry.clone());
        }
    }
    if new_entries != entries || (top.get("personas").is_none() && !new_entries.is_empty()) {
        top.insert("personas".into(), Value::from(new_entries));
        changed = true;
        note(
            changes,
            MANIFEST_PATH.as_ref(),
            "updated `personas` to list the .persona.md files".into(),
        );
    }
    Ok(changed)
}

fn read(path: &Path) -> Result<String, MigrateError> {
    let bytes = crate::pack::source::read_limited(path, crate::pack::MAX_PERSONA_FILE)
        .map_err(|e| MigrateError::Read(path.to_path_buf(), e.to_string()))?;
    String::from_utf8(bytes)
        .map_err(|_| MigrateError::Read(path.to_path_buf(), "not valid UTF-8".into()))
}

/// `{id, name, version}` for a pack that has no manifest yet, named after its directory.
fn placeholder_manifest(root: &Path) -> String {
    let dir = root
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let id: String = dir
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '-'
            }
        })
        .collect();
    let id = id.trim_start_matches('.');
    let id = if id.is_empty() { "migrated-pack" } else { id };
    serde_json::json!({ "id": id, "name": dir, "version": "0.1.0" }).to_string()
}

fn pre_v6_files(root: &Path) -> Vec<String> {
    let Ok(rd) = std::fs::read_dir(root.join("personas")) else {
        return vec![];
    };
    let mut files: Vec<String> = rd
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".json"))
        .map(|n| format!("personas/{n}"))
        .collect();
    files.sort();
    files
}

/// Rewrites a V6 persona's frontmatter; `None` when it is already current.
fn migrate_v6_persona(
    rel: &Path,
    text: &str,
    changes: &mut Vec<Change>,
) -> Result<Option<String>, MigrateError> {
    let split = frontmatter::split(text)
        .map_err(|e| MigrateError::Shape(rel.to_path_buf(), e.to_string()))?;
    if frontmatter::excessive_nesting(split.yaml).is_some() {
        return Err(MigrateError::Shape(
            rel.to_path_buf(),
            format!(
                "the frontmatter nests `[`/`{{` more than {} levels deep",
                frontmatter::MAX_FLOW_DEPTH
            ),
        ));
    }
    let parsed: Yaml = serde_yaml_ng::from_str(split.yaml)
        .map_err(|e| MigrateError::Yaml(rel.to_path_buf(), e))?;
    let Yaml::Mapping(map) = parsed else {
        return Ok(None);
    };
    let has_buzz = map.contains_key("buzz");
    let has_alias = map.contains_key("respond_to") && !map.contains_key("triggers");
    if !has_buzz && !has_alias {
        return Ok(None);
    }
    let mut out = Mapping::new();
    for (k, v) in &map {
        match (k.as_str(), v) {
            (Some("buzz"), Yaml::Mapping(inner)) => {
                for (ik, iv) in inner {
                    let Some(name) = ik.as_str() else { continue };
                    let target = v6_key(name);
                    if map.contains_key(target) {
                        changes.push(Change {
                            file: rel.into(),
                            description: format!(
                                "kept the top-level `{target}`; dropped `buzz.{name}`"
                            ),
                        });
                    } else {
                        changes.push(Change {
                            file: rel.into(),
                            description: format!("moved `buzz.{name}` to the top-level `{target}`"),
                        });
                        out.insert(Yaml::from(target), iv.clone());
                    }
                }
            }
            (Some("buzz"), _) => {
                return Err(MigrateError::Shape(
                    rel.into(),
                    "`buzz` must be a mapping".into(),
                ));
            }
            (Some("respond_to"), _) if has_alias => {
                changes.push(Change {
                    file: rel.into(),
                    description: "renamed the legacy `respond_to` to `triggers`".into(),
                });
                out.insert(Yaml::from("triggers"), v.clone());
            }
            _ => {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    if split.yaml.lines().any(|l| l.trim_start().starts_with('#')) {
        changes.push(Change {
            file: rel.into(),
            description: "comments in the frontmatter were not kept".into(),
        });
    }
    Ok(Some(render_persona(&out, split.body)))
}

fn render_persona(frontmatter: &Mapping, body: &str) -> String {
    let yaml = serde_yaml_ng::to_string(frontmatter).expect("a YAML mapping serialises");
    format!(
        "---\n{yaml}---\n\n{}",
        body.trim_start_matches(['\r', '\n'])
    )
}

/// A pre-V6 JSON persona as a `.persona.md`: returns its pack-relative path, text and name.
fn convert_json_persona(
    root: &Path,
    path: &Path,
    entry: &str,
) -> Result<(PathBuf, String, String), MigrateError> {
    let value: Value =
        serde_json::from_str(&read(path)?).map_err(|e| MigrateError::Json(entry.into(), e))?;
    let Value::Object(obj) = value else {
        return Err(MigrateError::Shape(
            entry.into(),
            "a JSON persona must be an object".into(),
        ));
    };
    let stem = Path::new(entry)
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let name = obj
        .get("name")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .unwrap_or(stem);
    let mut fm = Mapping::new();
    let mut body = String::new();
    fm.insert("name".into(), Yaml::from(name.clone()));
    for (k, v) in &obj {
        let yaml: Yaml = serde_yaml_ng::to_value(v).expect("JSON converts to YAML");
        match k.as_str() {
            "name" => {}
            "system_prompt" => body = v.as_str().unwrap_or_default().to_string(),
            "channels" => {
                fm.insert("subscribe".into(), yaml);
            }
            "respond_to" => {
                fm.insert("triggers".into(), yaml);
            }
            other => {
                fm.insert(Yaml::from(other), yaml);
            }
        }
    }
    // The name becomes a file name: it must be an agent id, never a path.
    let valid = !name.is_empty()
        && name.len() <= crate::pack::persona::MAX_NAME_LEN
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'));
    if !valid {
        return Err(MigrateError::Shape(
            entry.into(),
            format!(
                "persona name \"{name}\" is not a valid agent id (letters, digits, `-`, `_`); fix it before migrating"
            ),
        ));
    }
    if !fm.contains_key("display_name") {
        fm.insert("display_name".into(), Yaml::from(name.clone()));
    }
    let rel = PathBuf::from(format!("agents/{name}.persona.md"));
    if root.join(&rel).exists() {
        return Err(MigrateError::Shape(
            rel,
            "already exists; move it away or delete it before migrating".into(),
        ));
    }
    Ok((
        rel,
        render_persona(&fm, &format!("{}\n", body.trim())),
        name,
    ))
}

/// Writes a new pack file at `rel`, refusing when its directory resolves outside the pack (e.g. an
/// `agents/` symlinked elsewhere).
fn write_new(root: &Path, rel: &Path, text: &str) -> Result<(), MigrateError> {
    let path = root.join(rel);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| MigrateError::Write(parent.to_path_buf(), e))?;
        let real = parent
            .canonicalize()
            .map_err(|e| MigrateError::Write(parent.to_path_buf(), e))?;
        if !real.starts_with(root) {
            return Err(MigrateError::Shape(
                rel.to_path_buf(),
                format!(
                    "its directory leaves the pack (it resolves to {})",
                    real.display()
                ),
            ));
        }
    }
    write_atomic(&path, text)
}

fn write_atomic(path: &Path, text: &str) -> Result<(), MigrateError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir)
        .map_err(|e| MigrateError::Write(path.to_path_buf(), e))?;
    std::io::Write::write_all(&mut tmp, text.as_bytes())
        .map_err(|e| MigrateError::Write(path.to_path_buf(), e))?;
    tmp.persist(path)
        .map_err(|e| MigrateError::Write(path.to_path_buf(), e.error))?;
    Ok(())
}
