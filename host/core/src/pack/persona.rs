//! `agents/*.persona.md` (spec §4): YAML frontmatter with identity, skills, MCP servers, behavioural
//! config and hooks, then the persona prompt as markdown. Unknown frontmatter keys are hard errors.

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{Map, Value};

use super::behaviour::BehaviourLayer;
use super::frontmatter;
use super::hooks::{self, HookSet};
use super::manifest::{Author, MIGRATE_HINT};
use super::mcp::{self, McpServer};
use super::source::{Fields, SharedText, SourceFile, Syntax, suggest};
use super::tool_policy::{self, ToolPolicy};
use super::woken_by;
use crate::diag::{Diagnostic, Report, Severity};

pub const MAX_NAME_LEN: usize = 64;

#[derive(Debug, Clone, PartialEq)]
pub struct Persona {
    /// Pack-relative path of the persona file.
    pub file: PathBuf,
    pub name: String,
    pub display_name: String,
    pub description: String,
    pub avatar: Option<String>,
    pub version: Option<String>,
    pub author: Option<Author>,
    /// Agent runtime this persona targets (selects the env-var projection); not in the spec, used by
    /// real packs.
    pub runtime: Option<String>,
    /// `skills:` entries as written.
    pub skills: Vec<String>,
    pub mcp_servers: Vec<McpServer>,
    pub behaviour: BehaviourLayer,
    pub hooks: HookSet,
    /// `x-tool-policy`: which tools its agent may use (`None`: the key is absent).
    pub tool_policy: Option<ToolPolicy>,
    /// `x-woken-by`: which personas' messages may wake it (`None`: the key is absent).
    pub woken_by: Option<Vec<String>>,
    /// The persona prompt: the markdown body, line ends normalised to `\n`, outer blank space trimmed.
    pub body: SharedText,
    /// The file as read, for diagnostics found after parsing (e.g. a `skills:` entry that is missing).
    pub source: SourceFile,
}

/// Parses a persona file's text. `None` when required identity fields are missing or the file cannot
/// be understood; every reason is in `report`.
pub fn parse(rel: PathBuf, text: Arc<str>, report: &mut Report) -> Option<Persona> {
    let split = match frontmatter::split(&text) {
        Ok(s) => s,
        Err(e) => {
            report_split_error(&rel, &text, &e, report);
            return None;
        }
    };
    if split.had_bom {
        report.push(bom_warning(&rel));
    }
    // The YAML and, unless it needs normalising, the body are read from the shared source text
    // below: no copies of their own.
    let yaml_range = split.yaml_offset..split.yaml_offset + split.yaml.len();
    let yaml_offset = split.yaml_offset;
    let body_range = split.body_offset..text.len();
    let src = SourceFile::shared(
        rel.clone(),
        text,
        Syntax::Yaml {
            offset: yaml_offset,
        },
    );
    let body = shared_body(&src.text, &src.text[body_range]);
    src.register(report);
    let map = yaml_mapping(&src, &src.text[yaml_range], report, "persona")?;
    let fields = Fields {
        src: &src,
        map: &map,
        prefix: vec![],
        area: "persona",
    };

    check_keys(&src, &map, report);

    let name = required(&fields, report, "name");
    if let Some(n) = &name {
        check_name(&fields, report, n);
    }
    let display_name = required(&fields, report, "display_name");
    let description = required(&fields, report, "description");
    let hooks = match fields.object(report, "hooks") {
        Some(m) => hooks::read(&fields.nested("hooks", m), report, Severity::Error),
        None => HookSet::default(),
    };
    let persona = Persona {
        avatar: fields.string(report, "avatar"),
        version: fields.string(report, "version"),
        author: super::manifest::read_author(&fields, report),
        runtime: fields.string(report, "runtime"),
        skills: fields.string_list(report, "skills").unwrap_or_default(),
        mcp_servers: mcp::parse_persona_list(&fields, report),
        behaviour: BehaviourLayer::read(&fields, report, Severity::Error),
        hooks,
        tool_policy: tool_policy::read(&fields, report),
        woken_by: woken_by::read(&fields, apiary_schema::persona::WOKEN_BY, report),
        body,
        file: rel,
        name: name?,
        display_name: display_name?,
        description: description?,
        source: src,
    };
    if persona.body.is_empty() {
        report.push(empty_prompt_warning(&persona));
    }
    Some(persona)
}

fn bom_warning(rel: &std::path::Path) -> Diagnostic {
    Diagnostic::warning(
        "persona.bom",
        "the file starts with a UTF-8 byte-order mark; it was ignored",
    )
    .in_file(rel)
    .help("save the file as UTF-8 without BOM")
}

fn empty_prompt_warning(persona: &Persona) -> Diagnostic {
    Diagnostic::warning(
        "persona.empty-prompt",
        format!("persona `{}` has an empty prompt body", persona.name),
    )
    .in_file(&persona.file)
    .help("write the persona's role and rules after the closing `---`")
}

/// A persona file whose frontmatter cannot be split off.
fn report_split_error(
    rel: &std::path::Path,
    text: &Arc<str>,
    e: &frontmatter::SplitError,
    report: &mut Report,
) {
    // Registered so the human report can show the snippet the location points at.
    report.add_shared_source(rel, Arc::clone(text));
    let mut d = Diagnostic::error("persona.frontmatter", e.to_string()).in_file(rel);
    if matches!(e, frontmatter::SplitError::NoClosing) {
        d = d
            .at(text, 0, 3)
            .help("end the frontmatter with a line containing only `---` before the prompt");
    } else if matches!(e, frontmatter::SplitError::NoOpening) {
        d = d.help("a persona file starts with `---`, YAML frontmatter, `---`, then the prompt");
    }
    report.push(d);
}

/// Frontmatter keys: a V6 `buzz:` block and unknown keys are errors.
fn check_keys(src: &SourceFile, map: &Map<String, Value>, report: &mut Report) {
    if map.contains_key(apiary_schema::manifest::V6_BLOCK) {
        let d = Diagnostic::error(
            "persona.v6",
            "the frontmatter has a V6 `buzz:` block, which is no longer supported",
        )
        .help(MIGRATE_HINT);
        report.push(src.diag(d, &[apiary_schema::manifest::V6_BLOCK]));
    }
    let known = apiary_schema::persona::KEYS;
    for key in map
        .keys()
        .filter(|k| !known.contains(&k.as_str()) && k.as_str() != apiary_schema::manifest::V6_BLOCK)
    {
        let d = Diagnostic::error(
            "persona.unknown-key",
            format!("unknown key `{key}` in persona frontmatter"),
        );
        let d = match suggest(key, known) {
            Some(s) => d.help(format!("did you mean `{s}`?")),
            None => d.help("persona frontmatter takes identity fields (name, display_name, description, …) and the behavioural fields of spec §10"),
        };
        report.push(src.diag(d, &[key]));
    }
}

/// Parses YAML frontmatter into a JSON mapping, reporting syntax errors at their line in the file.
pub(crate) fn yaml_mapping(
    src: &SourceFile,
    yaml: &str,
    report: &mut Report,
    area: &'static str,
) -> Option<Map<String, Value>> {
    let code = if area == "skill" {
        "skill.yaml"
    } else {
        "persona.yaml"
    };
    let offset = match src.syntax {
        Syntax::Yaml { offset } => offset,
        Syntax::Json | Syntax::Toml => 0,
    };
    // The common case, read in one pass; anything unusual goes to libyaml below.
    if let Some(map) = super::plain_yaml::parse(yaml) {
        return Some(map);
    }
    if let Some(at) = frontmatter::excessive_nesting(yaml) {
        let d = Diagnostic::error(
            code,
            format!(
                "frontmatter nests `[`/`{{` more than {} levels deep",
                frontmatter::MAX_FLOW_DEPTH
            ),
        )
        .in_file(&src.rel)
        .at(&src.text, offset + at, 1);
        report.push(d);
        return None;
    }
    let parsed: serde_yaml_ng::Value = match serde_yaml_ng::from_str(yaml) {
        Ok(v) => v,
        Err(e) => {
            report.push(yaml_error(src, yaml, offset, code, &e));
            return None;
        }
    };
    if parsed.is_null() {
        return Some(Map::new());
    }
    // JSON has no NaN or infinity: converted, `.nan`/`.inf` would become `null` and silently read as
    // "absent". A value the author wrote must never vanish, so refuse them here.
    if let Some(path) = non_finite_number(&parsed) {
        let shown = path.join(".");
        let d = Diagnostic::error(
            if area == "skill" {
                "skill.yaml"
            } else {
                "persona.type"
            },
            format!("`{shown}` must be a finite number, found .nan or .inf"),
        );
        let keys: Vec<&str> = path.iter().map(String::as_str).collect();
        report.push(src.diag(d, &keys));
        return None;
    }
    json_mapping(src, &parsed, offset, code, report)
}

/// A YAML syntax error, located in the file.
fn yaml_error(
    src: &SourceFile,
    yaml: &str,
    offset: usize,
    code: &'static str,
    e: &serde_yaml_ng::Error,
) -> Diagnostic {
    let full = e.to_string();
    let message = yaml_message(first_line(&full));
    let mut d = Diagnostic::error(code, format!("frontmatter is not valid YAML: {message}"))
        .in_file(&src.rel);
    if let Some(loc) = e.location() {
        // The parser reports a duplicate key at the start of its mapping; point at the repeat.
        let at = message
            .split_once("duplicate entry with key ")
            .map(|(_, k)| k.trim_matches('"'))
            .and_then(|k| duplicate_key_offset(yaml, loc.index(), loc.column(), k))
            .unwrap_or(loc.index());
        d = d.at(&src.text, offset + at, 1);
    }
    d
}

/// The parsed YAML as a JSON mapping; anything else is reported.
fn json_mapping(
    src: &SourceFile,
    parsed: &serde_yaml_ng::Value,
    offset: usize,
    code: &'static str,
    report: &mut Report,
) -> Option<Map<String, Value>> {
    match serde_json::to_value(parsed) {
        Ok(Value::Object(m)) => Some(m),
        Ok(other) => {
            let d = Diagnostic::error(
                code,
                format!(
                    "frontmatter must be a mapping of keys to values, found {}",
                    super::source::type_name(&other)
                ),
            )
            .in_file(&src.rel)
            .at(&src.text, offset, 1);
            report.push(d);
            None
        }
        Err(e) => {
            let d = Diagnostic::error(
                code,
                format!("frontmatter uses YAML that has no JSON equivalent: {e}"),
            )
            .in_file(&src.rel)
            .help("keys must be strings; tags and non-string keys are not allowed");
            report.push(d);
            None
        }
    }
}

/// Key path of the first `.nan`/`.inf` in a YAML document, if any.
fn non_finite_number(v: &serde_yaml_ng::Value) -> Option<Vec<String>> {
    use serde_yaml_ng::Value as Y;
    match v {
        Y::Number(n) if n.is_nan() || n.is_infinite() => Some(vec![]),
        Y::Mapping(m) => m.iter().find_map(|(k, v)| {
            let mut path = non_finite_number(v)?;
            let key = match k {
                Y::String(s) => s.clone(),
                other => serde_yaml_ng::to_string(other)
                    .unwrap_or_default()
                    .trim()
                    .to_string(),
            };
            path.insert(0, key);
            Some(path)
        }),
        Y::Sequence(items) => items.iter().find_map(non_finite_number),
        Y::Tagged(t) => non_finite_number(&t.value),
        _ => None,
    }
}

/// The parser's message without its own "at line L column C": those count from the start of the
/// frontmatter, not of the file, and the diagnostic carries the file's line and column already.
fn yaml_message(message: &str) -> String {
    let digits = |s: &str| s.len() - s.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    let mut out = String::new();
    let mut rest = message;
    while let Some(at) = rest.find(" at line ") {
        let after = &rest[at + " at line ".len()..];
        let line_len = digits(after);
        match after[line_len..].strip_prefix(" column ") {
            Some(col) if line_len > 0 && digits(col) > 0 => {
                out.push_str(&rest[..at]);
                rest = &col[digits(col)..];
            }
            _ => {
                out.push_str(&rest[..at + " at line ".len()]);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// Byte offset of the second `key:` at the indentation of the block mapping that starts at `start`.
fn duplicate_key_offset(yaml: &str, start: usize, column: usize, key: &str) -> Option<usize> {
    let indent = column.saturating_sub(1);
    let mut offset = yaml[..start.min(yaml.len())]
        .rfind('\n')
        .map_or(0, |i| i + 1);
    let mut seen = 0;
    for line in yaml.get(offset..)?.split_inclusive('\n') {
        let trimmed = line.trim_start_matches(' ');
        let this_indent = line.len() - trimmed.len();
        if this_indent == indent {
            let unquoted = trimmed.trim_start_matches(['"', '\'']);
            let is_key = unquoted.starts_with(key)
                && unquoted[key.len()..]
                    .trim_start_matches(['"', '\''])
                    .trim_start()
                    .starts_with(':');
            if is_key {
                seen += 1;
                if seen == 2 {
                    return Some(offset + this_indent);
                }
            }
        } else if this_indent < indent && !trimmed.trim().is_empty() {
            break;
        }
        offset += line.len();
    }
    None
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or(s)
}

fn required(fields: &Fields<'_>, report: &mut Report, key: &str) -> Option<String> {
    match fields.string(report, key) {
        Some(s) if !s.trim().is_empty() => Some(s),
        Some(_) => {
            report.push(fields.src.diag(
                Diagnostic::error("persona.required", format!("`{key}` is empty")),
                &[key],
            ));
            None
        }
        None if fields.get(key).is_none() => {
            let d = Diagnostic::error(
                "persona.required",
                format!("persona frontmatter is missing the required `{key}`"),
            )
            .in_file(&fields.src.rel);
            report.push(d);
            None
        }
        None => None,
    }
}

/// Names are agent ids: `[A-Za-z0-9_-]{1,64}`; the spec asks for lowercase, which we only warn about.
fn check_name(fields: &Fields<'_>, report: &mut Report, name: &str) {
    let charset_ok = name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'));
    if !charset_ok || name.len() > MAX_NAME_LEN {
        let d = Diagnostic::error("persona.name", format!("persona name \"{name}\" is not a valid agent id"))
            .help(format!("use letters, digits, `-` and `_`, at most {MAX_NAME_LEN} characters (lowercase by convention)"));
        report.push(fields.src.diag(d, &["name"]));
    } else if name.chars().any(|c| c.is_ascii_uppercase()) {
        let d = Diagnostic::warning(
            "persona.name-case",
            format!("persona name \"{name}\" has uppercase letters"),
        )
        .help(format!(
            "the spec asks for lowercase names: \"{}\"",
            name.to_ascii_lowercase()
        ));
        report.push(fields.src.diag(d, &["name"]));
    }
}

/// [`normalise_text`] of `body`, a part of `text`, shared with it when normalising only trims.
fn shared_body(text: &Arc<str>, body: &str) -> SharedText {
    let kept = trim_blank_lines(body);
    match kept.contains('\r') {
        false => {
            SharedText::part_of(text, kept).unwrap_or_else(|| SharedText::from(kept.to_string()))
        }
        true => SharedText::from(kept.replace("\r\n", "\n")),
    }
}

/// `\r\n` to `\n` and blank lines before and after trimmed, so a pack saved on Windows resolves
/// identically. The text is otherwise kept as written: the first line's indentation (a code
/// block, a nested list, a tab) is content.
pub fn normalise_text(text: &str) -> String {
    let text = trim_blank_lines(text);
    if text.contains('\r') {
        text.replace("\r\n", "\n")
    } else {
        text.to_string()
    }
}

/// `text` without its leading blank (whitespace-only) lines and its trailing whitespace.
fn trim_blank_lines(text: &str) -> &str {
    let mut start = 0;
    while let Some(end) = text[start..].find('\n') {
        if !text[start..start + end].trim().is_empty() {
            break;
        }
        start += end + 1;
    }
    text[start..].trim_end()
}
