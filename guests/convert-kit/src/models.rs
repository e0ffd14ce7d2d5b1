//! Model names as foreign formats write them -> persona model ids (`provider:model-id`).
//!
//! The table is data (`data/models.json`, built in), so following a release is an edit there,
//! not code: moving aliases (`sonnet`), the id prefixes naming a provider (`claude-`, `gpt-`),
//! and the values meaning "the caller's model". Before lookup a value is normalised: trimmed,
//! lowercased, spaces to `-`, a `provider/` or `provider:` prefix read, and for families whose ids
//! use dashes, dots in versions become dashes (`Claude Sonnet 4.5`, `claude-3.5-sonnet`).

use std::sync::OnceLock;

use serde_json::Value;

use crate::report::Report;

const TABLE: &str = include_str!("../data/models.json");

/// What a foreign `model` value becomes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Model {
    /// A persona model id. `pinned`: a moving alias fixed to today's model; `respelled`: the value
    /// was written another way (a human-readable name, dotted version, other case).
    Id {
        id: String,
        pinned: bool,
        respelled: bool,
    },
    /// The caller's model (`inherit`): the persona has no `model`.
    Inherit,
    /// Not a model the table knows (a typo, a private deployment): no persona `model`.
    Unknown,
}

struct Table {
    inherit: Vec<String>,
    aliases: Vec<(String, String)>,
    /// (prefix, provider, dots become dashes)
    families: Vec<(String, String, bool)>,
    providers: Vec<String>,
}

fn table() -> &'static Table {
    static T: OnceLock<Table> = OnceLock::new();
    T.get_or_init(|| {
        // The file ships with the converter and is checked by a unit test: it parses.
        let v: Value = serde_json::from_str(TABLE).unwrap_or(Value::Null);
        let strings = |key: &str| -> Vec<String> {
            v[key]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        };
        Table {
            inherit: strings("inherit"),
            aliases: v["aliases"]
                .as_object()
                .into_iter()
                .flatten()
                .filter_map(|(k, id)| Some((k.clone(), id.as_str()?.to_string())))
                .collect(),
            families: v["families"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|f| {
                    Some((
                        f["prefix"].as_str()?.to_string(),
                        f["provider"].as_str()?.to_string(),
                        f["dots"].as_str() == Some("dash"),
                    ))
                })
                .collect(),
            providers: strings("providers"),
        }
    })
}

/// Maps one model value (not a list: see [`first_of_list`]).
pub fn resolve(value: &str) -> Model {
    let t = table();
    let raw = value.trim();
    // Display names carry the host that offers the model: `Claude Sonnet 4.5 (copilot)`,
    // `GPT-5 mini (Preview)`. The model is what comes before the tag.
    if let Some(open) = raw.rfind(" (")
        && raw.ends_with(')')
        && open > 0
    {
        return match resolve(&raw[..open]) {
            Model::Id { id, pinned, .. } => Model::Id {
                id,
                pinned,
                respelled: true,
            },
            other => other,
        };
    }
    let lower = raw.to_ascii_lowercase();
    if t.inherit.contains(&lower) {
        return Model::Inherit;
    }
    let spaced = lower.split_whitespace().collect::<Vec<_>>().join("-");
    if let Some((_, id)) = t.aliases.iter().find(|(a, _)| *a == spaced) {
        return Model::Id {
            id: id.clone(),
            pinned: true,
            respelled: false,
        };
    }
    // `anthropic:claude-…`, `openai/gpt-4.1`: the provider as given, when it is one.
    let (provider, rest) = match spaced.split_once([':', '/']) {
        Some((p, rest)) if t.providers.iter().any(|k| *k == p) => (Some(p.to_string()), rest),
        _ => (None, spaced.as_str()),
    };
    for (prefix, family_provider, dash) in &t.families {
        if !rest.starts_with(prefix.as_str()) {
            continue;
        }
        let plausible = rest
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '@' | '_'));
        if !plausible {
            return Model::Unknown;
        }
        let id = if *dash {
            rest.replace('.', "-")
        } else {
            rest.to_string()
        };
        let provider = provider.unwrap_or_else(|| family_provider.clone());
        let respelled = id != raw && format!("{provider}:{id}") != raw;
        return Model::Id {
            id: format!("{provider}:{id}"),
            pinned: false,
            respelled,
        };
    }
    match provider {
        // An explicit, known provider with an id the table has no family for: taken as given.
        Some(p) if !rest.is_empty() => Model::Id {
            id: format!("{p}:{}", &raw[raw.len() - rest.len()..]),
            pinned: false,
            respelled: false,
        },
        _ => Model::Unknown,
    }
}

/// Maps a foreign format's `model` value to a persona `model`, and reports at `path` what that
/// meant: a respelled id is `normalised`, a moving alias pinned and `inherit` are
/// `reinterpreted`, a value the table does not know is `lost` (never a silent fall-back to the
/// runtime's model; `kept` says where the original stays). `None`: the persona gets no `model`.
pub fn to_persona(value: &str, report: &mut Report, path: &str, kept: &str) -> Option<String> {
    match resolve(value) {
        Model::Id {
            id,
            pinned,
            respelled,
        } => {
            if pinned {
                report.reinterpreted(
                    "model-alias-pinned",
                    path,
                    "model",
                    format!("`{value}` -> `{id}`: the alias moves with releases, the persona pins today's model"),
                );
            } else if respelled || id != value {
                report.normalised(
                    "model-id-prefixed",
                    path,
                    "model",
                    format!("{value} -> {id}"),
                );
            }
            Some(id)
        }
        Model::Inherit => {
            report.reinterpreted(
                "model-inherit",
                path,
                "model",
                format!("`{value}`: the persona has no `model`, so the pack default or the runtime's model applies"),
            );
            None
        }
        Model::Unknown => {
            report.lost(
                "model-unknown",
                path,
                "model",
                format!("`{value}` is not a model the converter's table knows (a typo?); the persona gets no `model`, so the runtime's applies; the value is kept in {kept}"),
            );
            None
        }
    }
}

/// Whether the foreign value `original` maps to the persona model `id`, so a writer may give the
/// original back as it was written.
pub fn maps_to(original: &str, id: &str) -> bool {
    matches!(resolve(original), Model::Id { id: m, .. } if m == id.trim())
}

/// A value that lists several models (`sonnet, opus` or a YAML list): the first, and the rest.
pub fn first_of_list(value: &Value) -> Option<(String, Vec<String>)> {
    let items: Vec<String> = match value {
        Value::Array(a) => a
            .iter()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect(),
        Value::String(s) if s.contains(',') => s.split(',').map(|p| p.trim().to_string()).collect(),
        _ => return None,
    };
    let mut items = items.into_iter().filter(|s| !s.is_empty());
    let first = items.next()?;
    Some((first, items.collect()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(v: &str) -> String {
        match resolve(v) {
            Model::Id { id, .. } => id,
            other => panic!("{v}: {other:?}"),
        }
    }

    #[test]
    fn the_table_parses_and_covers_the_families() {
        let t = table();
        assert!(t.aliases.len() >= 3 && t.families.len() >= 3 && !t.inherit.is_empty());
    }

    #[test]
    fn copilot_display_names_carry_a_host_tag() {
        let id = |v: &str| match resolve(v) {
            Model::Id { id, respelled, .. } => {
                assert!(respelled, "{v}");
                id
            }
            other => panic!("{v}: {other:?}"),
        };
        assert_eq!(
            id("Claude Sonnet 4.5 (copilot)"),
            "anthropic:claude-sonnet-4-5"
        );
        assert_eq!(id("GPT-4.1 (copilot)"), "openai:gpt-4.1");
        assert_eq!(id("Gemini 2.5 Pro (copilot)"), "google:gemini-2.5-pro");
        assert_eq!(id("GPT-5 mini (Preview)"), "openai:gpt-5-mini");
        assert_eq!(resolve("Frobnicator 9 (copilot)"), Model::Unknown);
        assert_eq!(resolve("(copilot)"), Model::Unknown);
    }

    #[test]
    fn aliases_human_names_dotted_spellings_and_providers() {
        assert_eq!(
            resolve("sonnet"),
            Model::Id {
                id: "anthropic:claude-sonnet-4-6".into(),
                pinned: true,
                respelled: false
            }
        );
        assert_eq!(id("Claude Sonnet 4.5"), "anthropic:claude-sonnet-4-5");
        assert_eq!(id("claude-3.5-sonnet"), "anthropic:claude-3-5-sonnet");
        assert_eq!(id("claude-opus-4.7"), "anthropic:claude-opus-4-7");
        assert_eq!(id("GPT-4.1"), "openai:gpt-4.1");
        assert_eq!(id("openai/gpt-4o"), "openai:gpt-4o");
        assert_eq!(id("gemini-2.5-pro"), "google:gemini-2.5-pro");
        assert_eq!(
            resolve("claude-sonnet-4-20250514"),
            Model::Id {
                id: "anthropic:claude-sonnet-4-20250514".into(),
                pinned: false,
                respelled: false
            }
        );
        assert_eq!(resolve("inherit"), Model::Inherit);
        assert_eq!(resolve("sonet"), Model::Unknown);
        assert_eq!(resolve("claude-opus 4 <b>"), Model::Unknown);
        assert_eq!(resolve(""), Model::Unknown);
    }

    #[test]
    fn to_persona_reports_what_each_value_meant() {
        let mut r = Report::default();
        assert_eq!(
            to_persona("claude-sonnet-4-6", &mut r, "a.md", "x").as_deref(),
            Some("anthropic:claude-sonnet-4-6")
        );
        assert_eq!(r.normalised[0].code, "model-id-prefixed");
        assert_eq!(
            to_persona("anthropic:claude-opus-4-6", &mut r, "a.md", "x").as_deref(),
            Some("anthropic:claude-opus-4-6")
        );
        assert_eq!(r.len(), 1, "an id already a persona id is not a finding");
        assert!(to_persona("haiku", &mut r, "a.md", "x").is_some());
        assert_eq!(r.reinterpreted[0].code, "model-alias-pinned");
        assert_eq!(to_persona("inherit", &mut r, "a.md", "x"), None);
        assert_eq!(to_persona("clade-sonet", &mut r, "a.md", "`x.model`"), None);
        assert_eq!(r.lost[0].code, "model-unknown");
        assert!(r.lost[0].message.contains("`x.model`"));
        assert!(maps_to("haiku", "anthropic:claude-haiku-4-5"));
        assert!(maps_to("Claude Sonnet 4.5", "anthropic:claude-sonnet-4-5"));
        assert!(!maps_to("haiku", "anthropic:claude-opus-4-6"));
        assert!(!maps_to("sonet", "anthropic:claude-sonnet-4-6"));
    }

    #[test]
    fn lists_give_their_first_model() {
        let (first, rest) = first_of_list(&serde_json::json!(["opus", "sonnet"])).unwrap();
        assert_eq!((first.as_str(), rest), ("opus", vec!["sonnet".to_string()]));
        let (first, _) = first_of_list(&Value::from("sonnet, haiku")).unwrap();
        assert_eq!(first, "sonnet");
        assert!(first_of_list(&Value::from("sonnet")).is_none());
    }
}
