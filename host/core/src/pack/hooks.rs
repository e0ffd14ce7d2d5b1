//! Lifecycle hook configuration (spec §9): `hooks/hooks.json` for the pack and `hooks:` in a persona.

use std::path::Path;

use serde::Serialize;
use serde_json::Value;

use super::paths::{self, PathError};
use super::source::{Fields, SourceFile, suggest};
use crate::diag::{Diagnostic, Report, Severity};

pub use apiary_schema::hooks::POINTS as HOOK_POINTS;

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct HookSet {
    pub on_start: Option<String>,
    pub on_stop: Option<String>,
    pub on_message: Option<String>,
    /// The points this set gives as `null`: in a persona, that switches the pack's hook off (the
    /// spec's own example, `on_message: null`); an absent point inherits it.
    #[serde(skip)]
    pub off: Vec<&'static str>,
}

impl HookSet {
    pub fn is_empty(&self) -> bool {
        self.on_start.is_none() && self.on_stop.is_none() && self.on_message.is_none()
    }

    pub fn entries(&self) -> impl Iterator<Item = (&'static str, &str)> {
        [
            ("on_start", &self.on_start),
            ("on_stop", &self.on_stop),
            ("on_message", &self.on_message),
        ]
        .into_iter()
        .filter_map(|(k, v)| v.as_deref().map(|v| (k, v)))
    }

    /// Per-persona hooks override pack hooks point by point; a persona's `null` switches one off.
    pub fn overlay(&self, persona: &HookSet) -> HookSet {
        let pick = |point: &str, mine: &Option<String>, pack: &Option<String>| {
            if persona.off.contains(&point) {
                None
            } else {
                mine.clone().or_else(|| pack.clone())
            }
        };
        HookSet {
            on_start: pick("on_start", &persona.on_start, &self.on_start),
            on_stop: pick("on_stop", &persona.on_stop, &self.on_stop),
            on_message: pick("on_message", &persona.on_message, &self.on_message),
            off: Vec::new(),
        }
    }
}

/// Reads a hooks mapping; `unknown` is how a key other than the three hook points is reported.
pub fn read(fields: &Fields<'_>, report: &mut Report, unknown: Severity) -> HookSet {
    for key in fields
        .map
        .keys()
        .filter(|k| !HOOK_POINTS.contains(&k.as_str()))
    {
        let d = Diagnostic::new(
            unknown,
            "hooks.unknown-key",
            format!("unknown hook `{key}`"),
        );
        let d = match suggest(key, HOOK_POINTS) {
            Some(s) => d.help(format!(
                "did you mean `{s}`? hooks are on_start, on_stop, on_message"
            )),
            None => d.help("hooks are on_start, on_stop, on_message"),
        };
        report.push(
            fields
                .src
                .diag(d, &[&fields.prefix[..], &[key.as_str()]].concat()),
        );
    }
    HookSet {
        on_start: fields.string(report, "on_start"),
        on_stop: fields.string(report, "on_stop"),
        on_message: fields.string(report, "on_message"),
        off: HOOK_POINTS
            .iter()
            .copied()
            .filter(|p| fields.map.get(*p).is_some_and(Value::is_null))
            .collect(),
    }
}

/// Parses `hooks/hooks.json`. Keys other than the hook points are warnings: the pack still loads,
/// but nothing they describe will run.
pub fn parse_hooks_json(src: &SourceFile, report: &mut Report) -> HookSet {
    let value: Value = match serde_json::from_str(&src.text) {
        Ok(v) => v,
        Err(e) => {
            let d = Diagnostic::error("hooks.json", format!("not valid JSON: {e}"))
                .in_file(&src.rel)
                .at_line_col(&src.text, e.line(), e.column());
            report.push(d);
            return HookSet::default();
        }
    };
    let Value::Object(map) = &value else {
        report.push(
            Diagnostic::error(
                "hooks.shape",
                "must be a JSON object with on_start, on_stop, on_message",
            )
            .in_file(&src.rel),
        );
        return HookSet::default();
    };
    let fields = Fields {
        src,
        map,
        prefix: vec![],
        area: "hooks",
    };
    if !map.is_empty() && !map.keys().any(|k| HOOK_POINTS.contains(&k.as_str())) {
        let d = Diagnostic::warning(
            "hooks.not-spec-shape",
            "hooks.json does not follow the spec: it has none of on_start, on_stop, on_message, so no pack hook will run",
        )
        .in_file(&src.rel)
        .help("the spec's shape is {\"on_start\": \"./hooks/setup.sh\", \"on_stop\": …, \"on_message\": null}");
        report.push(d);
        return HookSet::default();
    }
    read(&fields, report, Severity::Warning)
}

/// Each hook must be a file inside the pack (a `.wasm` component or a script).
pub fn check_paths(
    root: &Path,
    hooks: &HookSet,
    src: &SourceFile,
    prefix: &[&str],
    report: &mut Report,
) {
    for (point, value) in hooks.entries() {
        let at = [prefix, &[point]].concat();
        let target = value.split_whitespace().next().unwrap_or(value);
        match paths::resolve_inside(root, target) {
            Ok(p) if p.is_file() => {}
            Ok(_) => report.push(src.diag(
                Diagnostic::error(
                    "hooks.not-file",
                    format!("hook `{point}`: `{target}` is not a file"),
                ),
                &at,
            )),
            Err(PathError::NotFound(_)) if !target.contains('/') => {
                let d = Diagnostic::error("hooks.missing", format!("hook `{point}`: `{target}` is not a file in the pack"))
                    .help("hooks are pack files: a `.wasm` component (sandboxed) or a script such as `./hooks/setup.sh`");
                report.push(src.diag(d, &at));
            }
            Err(e) => report.push(src.diag(
                Diagnostic::error("hooks.path", format!("hook `{point}`: {e}")),
                &at,
            )),
        }
    }
}
