//! Skills (spec §6): `skills/<dir>/SKILL.md` with required `name` and `description`, and the scoping
//! rule deciding which persona receives which skill.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::frontmatter;
use super::paths;
use super::source::{self, Fields, SourceFile, Syntax};
use crate::diag::{Diagnostic, Report};

pub const SKILLS_DIR: &str = "skills";
const MAX_SKILL_FILE: u64 = 1024 * 1024;

#[derive(Debug, Clone, PartialEq)]
pub struct Skill {
    /// The load key: `name:` from SKILL.md.
    pub name: String,
    pub description: String,
    /// Canonical path of the skill directory.
    pub dir: PathBuf,
    /// Pack-relative path of the directory, for messages.
    pub rel: PathBuf,
}

/// Reads `<dir>/SKILL.md`. A missing or malformed file, or one without `name` or `description`, is an
/// error: the agent runtime would silently skip it (PF-5).
pub fn load(root: &Path, dir: &Path, report: &mut Report) -> Option<Skill> {
    let rel_dir = paths::relative_to(root, dir);
    let rel = rel_dir.join("SKILL.md");
    let text = read_skill_md(root, &rel_dir, &rel, report)?;
    let split = match frontmatter::split(&text) {
        Ok(s) => s,
        Err(e) => {
            let d = Diagnostic::error(
                "skill.frontmatter",
                format!("{e}; the agent runtime would skip this skill"),
            )
            .in_file(&rel)
            .help("start SKILL.md with ---, then `name:` and `description:`, then ---");
            report.push(d);
            return None;
        }
    };
    let (yaml, yaml_offset) = (split.yaml.to_string(), split.yaml_offset);
    let src = SourceFile::new(
        &rel,
        text,
        Syntax::Yaml {
            offset: yaml_offset,
        },
    );
    src.register(report);
    let map = super::persona::yaml_mapping(&src, &yaml, report, "skill")?;
    let fields = Fields {
        src: &src,
        map: &map,
        prefix: vec![],
        area: "skill",
    };
    let mut required = |key: &str| -> Option<String> {
        match fields.get(key) {
            Some(Value::String(s)) if !s.trim().is_empty() => Some(s.clone()),
            _ => {
                let d = Diagnostic::error(
                    "skill.required",
                    format!("SKILL.md has no `{key}`; the agent runtime would skip this skill"),
                )
                .in_file(&rel)
                .help("both `name:` and `description:` are required in SKILL.md frontmatter");
                report.push(d);
                None
            }
        }
    };
    let name = required("name");
    let description = required("description");
    let (name, description) = (name?, description?);
    if !check_name(&name, dir, &src, report) {
        return None;
    }
    Some(Skill {
        name,
        description,
        dir: dir.to_path_buf(),
        rel: rel_dir,
    })
}

/// The text of `rel` (`<rel_dir>/SKILL.md`), resolved like every pack path: a SKILL.md symlinked
/// out of the pack is never read. `None` when it is missing or unreadable (reported).
fn read_skill_md(root: &Path, rel_dir: &Path, rel: &Path, report: &mut Report) -> Option<String> {
    let file = match paths::resolve(root, &rel.to_string_lossy(), &mut Default::default()) {
        Ok(f) if f.is_file => f,
        Err(e @ paths::PathError::Escape(..)) => {
            report.push(Diagnostic::error("skill.path", e.to_string()).in_file(rel));
            return None;
        }
        _ => {
            let d = Diagnostic::error(
                "skill.missing",
                format!("skill directory `{}` has no SKILL.md", rel_dir.display()),
            )
            .in_file(rel_dir);
            report.push(d);
            return None;
        }
    };
    match source::read_limited_sized(&file.path, MAX_SKILL_FILE, Some(file.len))
        .and_then(|b| Ok(source::decode(b)?))
    {
        Ok(t) => Some(t),
        Err(e) => {
            report.push(Diagnostic::error("skill.read", e.to_string()).in_file(rel));
            None
        }
    }
}

/// The skill's `name` as its load key: `false` (reported) when it is not a safe one; a name that
/// differs from the directory's is a warning.
fn check_name(name: &str, dir: &Path, src: &SourceFile, report: &mut Report) -> bool {
    // The load key becomes a directory name in every persona's workspace: an unsafe one is refused
    // here, and the copy refuses it again (dispatch::workspace).
    if let Err(why) = check_load_key(name) {
        let d = Diagnostic::error(
            "skill.name",
            format!("skill name \"{}\" {why}", name.escape_debug()),
        )
        .help("a skill name is 1-64 lowercase letters, digits and single hyphens, not starting or ending with a hyphen (Agent Skills); use the directory name, e.g. `name: code-review`");
        report.push(src.diag(d, &["name"]));
        return false;
    }
    let dir_name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if name != dir_name {
        let d = Diagnostic::warning(
            "skill.name-mismatch",
            format!("skill name \"{name}\" differs from its directory name \"{dir_name}\""),
        )
        .help(format!(
            "the load key is the `name:` field: agents load it as load(source: \"{name}\")"
        ));
        report.push(src.diag(d, &["name"]));
    }
    true
}

/// The load key a SKILL.md declares (`name:` in its frontmatter), when it declares one. For
/// skills found outside a pack (an operator's own, in a workspace), so nothing is reported: a file
/// that does not parse simply declares no key.
pub fn declared_load_key(text: &str) -> Option<String> {
    let split = frontmatter::split(text).ok()?;
    if frontmatter::excessive_nesting(split.yaml).is_some() {
        return None;
    }
    let map = match super::plain_yaml::parse(split.yaml) {
        Some(map) => map,
        None => match serde_yaml_ng::from_str::<Value>(split.yaml).ok()? {
            Value::Object(map) => map,
            _ => return None,
        },
    };
    match map.get("name") {
        Some(Value::String(s)) => Some(s.trim().to_string()),
        _ => None,
    }
}

/// Longest load key (Agent Skills: 1-64 characters).
pub const MAX_LOAD_KEY: usize = 64;

/// Checks a load key against the Agent Skills `name` rule: 1-64 characters, lowercase ASCII
/// letters, digits and hyphens, no hyphen first or last, no two in a row. The charset is what keeps
/// it one safe path component (no `/`, `\`, `.`, `..`, NUL, no case or Unicode look-alikes that a
/// file system could fold together); the hyphen rules are the specification's too, and also keep a
/// name from reading as an option to the tools an agent runs on its workspace (`-rf`). The
/// specification's reference validator also accepts non-ASCII lowercase letters; apiary does not,
/// because Unicode normalisation differs between file systems.
pub fn check_load_key(name: &str) -> Result<(), LoadKeyError> {
    if name.is_empty() {
        return Err(LoadKeyError::Empty);
    }
    if name.len() > MAX_LOAD_KEY {
        return Err(LoadKeyError::TooLong(name.len()));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-'))
    {
        return Err(LoadKeyError::Char(c));
    }
    if name.starts_with('-') || name.ends_with('-') {
        return Err(LoadKeyError::EdgeHyphen);
    }
    if name.contains("--") {
        return Err(LoadKeyError::DoubleHyphen);
    }
    Ok(())
}

/// Why a skill name is not a load key ([`check_load_key`]); the text completes "skill name …".
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum LoadKeyError {
    #[error("is empty")]
    Empty,
    #[error("is {0} bytes long; the limit is {MAX_LOAD_KEY}")]
    TooLong(usize),
    #[error(
        "contains `{}`; only lowercase letters a-z, digits and `-` are allowed (it names a directory in each workspace)",
        .0.escape_debug()
    )]
    Char(char),
    #[error("starts or ends with `-`")]
    EdgeHyphen,
    #[error("contains `--`")]
    DoubleHyphen,
}

impl LoadKeyError {
    /// A short machine-readable kind, for `--json` output and tests.
    pub fn kind(&self) -> &'static str {
        match self {
            LoadKeyError::Empty => "empty",
            LoadKeyError::TooLong(_) => "too-long",
            LoadKeyError::Char(_) => "bad-character",
            LoadKeyError::EdgeHyphen => "edge-hyphen",
            LoadKeyError::DoubleHyphen => "double-hyphen",
        }
    }
}

/// Entries of `skills/` that are symbolic links leading out of the pack: refused, never read (they are
/// left out of [`pack_skill_dirs`], which would otherwise drop the skill without a word).
pub fn check_dir_links(root: &Path, report: &mut Report) {
    let Ok(entries) = std::fs::read_dir(root.join(SKILLS_DIR)) else {
        return;
    };
    let mut escaping: Vec<String> = entries
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_symlink()))
        .map(|e| format!("{SKILLS_DIR}/{}", e.file_name().to_string_lossy()))
        .filter(|rel| {
            matches!(
                paths::resolve_inside(root, rel),
                Err(paths::PathError::Escape(..))
            )
        })
        .collect();
    escaping.sort();
    for rel in escaping {
        if let Err(e) = paths::resolve_inside(root, &rel) {
            report.push(Diagnostic::error("skill.path", e.to_string()).in_file(&rel));
        }
    }
}

/// Two skill directories with the same `name:` share one load key: an agent can only ever have one
/// of them (the copy into `.agents/skills/<name>/` keeps whichever lands first).
pub fn check_duplicate_names(
    skills: &std::collections::BTreeMap<PathBuf, Skill>,
    report: &mut Report,
) {
    let mut by_name: std::collections::BTreeMap<&str, Vec<&Skill>> = Default::default();
    for s in skills.values() {
        by_name.entry(&s.name).or_default().push(s);
    }
    for (name, same) in by_name.into_iter().filter(|(_, v)| v.len() > 1) {
        let dirs: Vec<String> = same.iter().map(|s| s.rel.display().to_string()).collect();
        let d = Diagnostic::warning(
            "skill.duplicate-name",
            format!(
                "skills {} all have the name \"{name}\"; an agent can load only one of them",
                dirs.join(", ")
            ),
        )
        .in_file(same[1].rel.join("SKILL.md"))
        .help("give each skill its own `name:` (the directory name is the usual choice)");
        report.push(d);
    }
}

/// Directories under the pack's `skills/`, sorted; dot-directories are skipped.
pub fn pack_skill_dirs(root: &Path) -> Vec<PathBuf> {
    // `skills/` itself may be a link; once it is known to be inside the pack, an entry that is a real
    // directory (the entry type does not follow links) is inside too, with no per-entry lookup.
    let Ok(skills) = paths::resolve_inside(root, SKILLS_DIR) else {
        return vec![];
    };
    let Ok(entries) = std::fs::read_dir(&skills) else {
        return vec![];
    };
    let mut dirs: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| skills.join(e.file_name()))
        .collect();
    dirs.sort();
    dirs
}

/// Resolves a persona `skills:` entry: a pack-relative path (`./skills/x/`), or a bare name looked up
/// under `skills/`.
pub fn resolve_reference(
    root: &Path,
    entry: &str,
    checked: &mut paths::CheckedDirs,
) -> Result<paths::Resolved, paths::PathError> {
    let trimmed = entry.trim_end_matches('/');
    match paths::resolve(root, trimmed, checked) {
        Err(paths::PathError::NotFound(_)) if !trimmed.contains('/') => {
            paths::resolve(root, &format!("{SKILLS_DIR}/{trimmed}"), checked)
                .map_err(|_| paths::PathError::NotFound(entry.to_string()))
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::check_load_key;

    #[test]
    fn load_keys_follow_the_agent_skills_rule() {
        for ok in ["a", "code-review", "pdf2txt", "a-b-c", &"x".repeat(64)] {
            assert_eq!(check_load_key(ok), Ok(()), "{ok}");
        }
        for bad in [
            "",
            ".",
            "..",
            "../x",
            "/etc",
            "a/b",
            "a\\b",
            "a\0b",
            "Review",
            "café",
            "my_skill",
            "a.b",
            "-rf",
            "x-",
            "a--b",
            " a",
            &"x".repeat(65),
        ] {
            assert!(check_load_key(bad).is_err(), "{bad:?} accepted");
        }
    }
}
