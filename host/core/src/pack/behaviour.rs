//! The behavioural configuration schema of spec §10. The same keys and types apply to the manifest's
//! `defaults`, to persona frontmatter and to the operator overrides file, so all three read through here.
//! Every field is an `Option`: `None` means absent or `null` (falls through to the next level); an
//! empty list or mapping is `Some` and overrides.

use serde::Serialize;
use serde_json::Value;

use super::source::{Fields, suggest};
use crate::diag::{Diagnostic, Report, Severity};

/// The behavioural and `triggers` keys are the schema crate's (shared with the converters).
pub use apiary_schema::{behaviour::KEYS as BEHAVIOUR_KEYS, triggers::KEYS as TRIGGER_KEYS};

/// A `triggers` object as written; unset sub-keys take their built-in default at resolution.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct TriggerLayer {
    pub mentions: Option<bool>,
    pub keywords: Option<Vec<String>>,
    pub all_messages: Option<bool>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct BehaviourLayer {
    pub model: Option<String>,
    pub temperature: Option<f64>,
    pub max_context_tokens: Option<u64>,
    pub subscribe: Option<Vec<String>>,
    pub triggers: Option<TriggerLayer>,
    pub thread_replies: Option<bool>,
    pub broadcast_replies: Option<bool>,
}

impl BehaviourLayer {
    /// Reads the behavioural keys of `fields`; `unknown_trigger_keys` is the severity of a typo inside
    /// `triggers` (an error in frontmatter, a warning in the manifest's `defaults`).
    pub fn read(fields: &Fields<'_>, report: &mut Report, unknown_trigger_keys: Severity) -> Self {
        let model = fields.string(report, "model");
        if model
            .as_deref()
            .is_some_and(|m| m.trim().is_empty() || m.starts_with(':') || m.ends_with(':'))
        {
            let d = Diagnostic::error(
                "behaviour.model",
                "`model` must look like `provider:model-id` (or a bare model id), not an empty part",
            );
            report.push(fields.src.diag(d, &path(fields, "model")));
        }
        BehaviourLayer {
            model,
            temperature: fields.number(report, "temperature"),
            max_context_tokens: fields.positive_int(report, "max_context_tokens"),
            subscribe: fields.string_list(report, "subscribe"),
            triggers: read_triggers(fields, report, unknown_trigger_keys),
            thread_replies: fields.bool(report, "thread_replies"),
            broadcast_replies: fields.bool(report, "broadcast_replies"),
        }
    }

    pub fn is_empty(&self) -> bool {
        *self == BehaviourLayer::default()
    }
}

fn path<'a>(fields: &'a Fields<'_>, key: &'a str) -> Vec<&'a str> {
    let mut p = fields.prefix.clone();
    p.push(key);
    p
}

fn read_triggers(
    fields: &Fields<'_>,
    report: &mut Report,
    unknown: Severity,
) -> Option<TriggerLayer> {
    let key = match (fields.get("triggers"), fields.get("respond_to")) {
        (Some(_), Some(_)) => {
            let d = Diagnostic::error(
                "behaviour.triggers-twice",
                "both `triggers` and its legacy alias `respond_to` are set; keep only `triggers`",
            );
            report.push(fields.src.diag(d, &path(fields, "respond_to")));
            "triggers"
        }
        (Some(_), None) => "triggers",
        (None, Some(_)) => "respond_to",
        (None, None) => return None,
    };
    let map = fields.object(report, key)?;
    let t = fields.nested(key, map);
    for k in map.keys().filter(|k| !TRIGGER_KEYS.contains(&k.as_str())) {
        let mut d = Diagnostic::new(
            unknown,
            "behaviour.unknown-trigger-key",
            format!("unknown key `{k}` in `{key}`"),
        );
        d = match suggest(k, TRIGGER_KEYS) {
            Some(s) => d.help(format!(
                "did you mean `{s}`? `{key}` takes mentions, keywords, all_messages"
            )),
            None => d.help(format!("`{key}` takes mentions, keywords, all_messages")),
        };
        report.push(
            fields
                .src
                .diag(d, &[path(fields, key), vec![k.as_str()]].concat()),
        );
    }
    let keywords = t.string_list(report, "keywords");
    if let Some(Value::Array(items)) = map.get("keywords")
        && items
            .iter()
            .any(|v| v.as_str().is_some_and(|s| s.trim().is_empty()))
    {
        let d = Diagnostic::warning(
            "behaviour.empty-keyword",
            "an empty keyword in `triggers.keywords` matches no message; remove it",
        );
        report.push(
            fields
                .src
                .diag(d, &[path(fields, key), vec!["keywords"]].concat()),
        );
    }
    Some(TriggerLayer {
        mentions: t.bool(report, "mentions"),
        keywords,
        all_messages: t.bool(report, "all_messages"),
    })
}
