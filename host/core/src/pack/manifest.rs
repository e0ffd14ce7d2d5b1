//! `.plugin/plugin.json`: the OPS-superset manifest (spec §2).

use serde::Serialize;
use serde_json::{Map, Value};

use super::behaviour::{BEHAVIOUR_KEYS, BehaviourLayer};
use super::source::{Fields, SourceFile, suggest};
use crate::diag::{Diagnostic, Report, Severity};

/// The manifest's path and keys are the schema crate's (shared with the converters).
pub use apiary_schema::manifest::{KEYS as KNOWN_KEYS, PATH as MANIFEST_PATH};

pub const MIGRATE_HINT: &str =
    "run `apiary pack migrate <dir>` to rewrite it to the current format";

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Author {
    Name(String),
    Person {
        name: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        email: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        url: Option<String>,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct Manifest {
    pub id: String,
    pub name: String,
    pub version: String,
    pub description: Option<String>,
    pub author: Option<Author>,
    pub license: Option<String>,
    pub homepage: Option<String>,
    pub keywords: Vec<String>,
    /// The `engines.buzz` requirement as written.
    pub engines_buzz: Option<String>,
    pub personas: Vec<String>,
    pub pack_instructions: Option<String>,
    pub mcp_config: Option<String>,
    pub hooks_config: Option<String>,
    /// `None` when the manifest has no `defaults` key: precedence level 4 is skipped.
    pub defaults: Option<BehaviourLayer>,
}

/// Parses and checks the manifest; `None` when the fields needed to go on are missing.
pub fn parse(src: &SourceFile, report: &mut Report) -> Option<Manifest> {
    let value: Value = match serde_json::from_str(&src.text) {
        Ok(v) => v,
        Err(e) => {
            let d = Diagnostic::error(
                "manifest.json",
                format!("plugin.json is not valid JSON: {e}"),
            )
            .in_file(&src.rel)
            .at_line_col(&src.text, e.line(), e.column());
            report.push(d);
            return None;
        }
    };
    let Value::Object(map) = &value else {
        report.push(
            Diagnostic::error("manifest.shape", "plugin.json must contain a JSON object")
                .in_file(&src.rel),
        );
        return None;
    };
    let fields = Fields {
        src,
        map,
        prefix: vec![],
        area: "manifest",
    };

    check_keys(src, map, report);

    let id = required(&fields, report, "id");
    if let Some(id) = &id {
        check_id(&fields, report, id);
    }
    let name = required(&fields, report, "name");
    let version = required(&fields, report, "version");
    if let Some(v) = &version
        && semver::Version::parse(v).is_err()
    {
        let d = Diagnostic::warning(
            "manifest.version",
            format!("`version` \"{v}\" is not a semantic version"),
        )
        .help("use MAJOR.MINOR.PATCH, e.g. 1.2.0");
        report.push(src.diag(d, &["version"]));
    }

    let engines_buzz = read_engines(&fields, report);
    let personas = fields.string_list(report, "personas").unwrap_or_default();
    for p in personas.iter().filter(|p| p.ends_with(".json")) {
        let d = Diagnostic::error(
            "manifest.pre-v6-persona",
            format!("persona `{p}` is a pre-V6 JSON persona"),
        )
        .help(MIGRATE_HINT);
        report.push(src.diag(d, &["personas"]));
    }
    let defaults = read_defaults(&fields, report);

    let manifest = Manifest {
        id: id?,
        name: name?,
        version: version?,
        description: fields.string(report, "description"),
        author: read_author(&fields, report),
        license: fields.string(report, "license"),
        homepage: fields.string(report, "homepage"),
        keywords: fields.string_list(report, "keywords").unwrap_or_default(),
        engines_buzz,
        personas,
        pack_instructions: fields.string(report, "pack_instructions"),
        mcp_config: fields.string(report, "mcp_config"),
        hooks_config: fields.string(report, "hooks_config"),
        defaults,
    };
    Some(manifest)
}

/// Top-level keys: a V6 `buzz` block is an error, unknown keys are warnings. An `x-` key is an
/// extension block (what a converter kept for the way back, a tool's own data): recognised, not
/// unknown, and ignored by the runtime.
fn check_keys(src: &SourceFile, map: &Map<String, Value>, report: &mut Report) {
    if map.contains_key(apiary_schema::manifest::V6_BLOCK) {
        let d = Diagnostic::error(
            "manifest.v6",
            "plugin.json has a V6 `buzz` block, which is no longer supported",
        )
        .help(MIGRATE_HINT);
        report.push(src.diag(d, &[apiary_schema::manifest::V6_BLOCK]));
    }
    for key in map.keys().filter(|k| {
        !KNOWN_KEYS.contains(&k.as_str())
            && k.as_str() != apiary_schema::manifest::V6_BLOCK
            && !k.starts_with("x-")
    }) {
        let d = Diagnostic::warning(
            "manifest.unknown-key",
            format!("unknown key `{key}` in plugin.json; ignored"),
        );
        let d = match suggest(key, KNOWN_KEYS) {
            Some(s) => d.help(format!("did you mean `{s}`?")),
            None => d,
        };
        report.push(src.diag(d, &[key]));
    }
}

/// `defaults` (precedence level 4), `None` when absent; unknown keys in it are warnings.
fn read_defaults(fields: &Fields<'_>, report: &mut Report) -> Option<BehaviourLayer> {
    let d = fields.object(report, "defaults")?;
    let f = fields.nested("defaults", d);
    for key in d.keys().filter(|k| !BEHAVIOUR_KEYS.contains(&k.as_str())) {
        let diag = Diagnostic::warning(
            "manifest.unknown-default",
            format!("unknown key `{key}` in `defaults` (plugin.json); ignored"),
        );
        let diag = match suggest(key, BEHAVIOUR_KEYS) {
            Some(s) => diag.help(format!("did you mean `{s}`?")),
            None => diag.help(format!("`defaults` takes {}", BEHAVIOUR_KEYS.join(", "))),
        };
        report.push(fields.src.diag(diag, &["defaults", key]));
    }
    Some(BehaviourLayer::read(&f, report, Severity::Warning))
}

fn required(fields: &Fields<'_>, report: &mut Report, key: &str) -> Option<String> {
    match fields.string(report, key) {
        Some(s) if !s.trim().is_empty() => Some(s),
        Some(_) => {
            let d = Diagnostic::error("manifest.required", format!("`{key}` is empty"));
            report.push(fields.src.diag(d, &[key]));
            None
        }
        None if fields.get(key).is_none() => {
            let d = Diagnostic::error(
                "manifest.required",
                format!("plugin.json is missing the required `{key}`"),
            )
            .in_file(&fields.src.rel);
            report.push(d);
            None
        }
        None => None,
    }
}

/// Whether `id` can be a pack id: it names the install directory, so it must be a safe single
/// path component (letters, digits, `.`, `-`, `_`; at most 128; not starting with `.`).
pub fn is_valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && !id.starts_with('.')
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
}

fn check_id(fields: &Fields<'_>, report: &mut Report, id: &str) {
    if !is_valid_id(id) {
        let d = Diagnostic::error("manifest.id", format!("`id` \"{id}\" is not a valid pack id"))
            .help("use letters, digits, `.`, `-` and `_` (reverse-DNS style, e.g. com.example.my-pack), at most 128 characters, not starting with `.`");
        report.push(fields.src.diag(d, &["id"]));
    }
}

fn read_engines(fields: &Fields<'_>, report: &mut Report) -> Option<String> {
    let engines = fields.object(report, "engines")?;
    let f = fields.nested("engines", engines);
    let req_text = f.string(report, "buzz")?;
    match semver::VersionReq::parse(&minimum_for_bare_version(&req_text)) {
        Ok(req) => {
            let ours =
                semver::Version::parse(crate::ENGINE_VERSION).expect("engine version is semver");
            if !req.matches(&ours) {
                let d = Diagnostic::error(
                    "manifest.engine",
                    format!("the pack requires buzz engine `{req_text}`, but apiary provides engine {ours}"),
                )
                .help("upgrade apiary, or install a version of the pack made for this engine");
                report.push(fields.src.diag(d, &["engines", "buzz"]));
            }
        }
        Err(e) => {
            let d = Diagnostic::error(
                "manifest.engine",
                format!("`engines.buzz` \"{req_text}\" is not a version requirement: {e}"),
            )
            .help("write a semver requirement such as \">=0.9.0\"");
            report.push(fields.src.diag(d, &["engines", "buzz"]));
        }
    }
    Some(req_text)
}

/// `engines.buzz` is the *minimum* engine a pack needs (spec §2). A bare version such as `0.9.0` means
/// exactly that, not semver's default caret (`^0.9.0`, which would refuse every later engine).
fn minimum_for_bare_version(req: &str) -> String {
    let t = req.trim();
    let bare = t.starts_with(|c: char| c.is_ascii_digit())
        && t.chars().all(|c| c.is_ascii_digit() || c == '.');
    if bare {
        format!(">={t}")
    } else {
        t.to_string()
    }
}

pub(super) fn read_author(fields: &Fields<'_>, report: &mut Report) -> Option<Author> {
    match fields.get("author")? {
        Value::String(s) => Some(Author::Name(s.clone())),
        Value::Object(m) => {
            let f = fields.nested("author", m);
            let Some(name) = f.string(report, "name") else {
                let d = Diagnostic::error("manifest.author", "`author` object needs a `name`");
                report.push(fields.src.diag(d, &["author"]));
                return None;
            };
            Some(Author::Person {
                name,
                email: f.string(report, "email"),
                url: f.string(report, "url"),
            })
        }
        other => {
            fields.type_error(
                report,
                "author",
                "a string or an object with name, email, url",
                other,
            );
            None
        }
    }
}
