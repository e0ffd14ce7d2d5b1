//! The operator's tool ceiling: per pack and per persona, in the overrides file, a policy of the
//! `x-tool-policy` shape that bounds what the pack's own policy may admit.
//!
//! ```toml
//! ["com.example.meadow-security-team"]
//! tool_ceiling = { deny = ["kind:execute"], read_only = true }
//!
//! ["com.example.meadow-security-team".pip]
//! tool_ceiling = { allow = ["Read", "Grep", "mcp__github__list_*"] }
//! ```
//!
//! The policy enforced is the intersection: a tool must pass the ceiling and the pack's policy
//! (deny lists add up, `read_only` holds if either says so, and each `allow` list must admit the
//! tool), so a pack can only narrow its ceiling. A persona's ceiling sits inside its pack's and
//! narrows it the same way. Entries are checked as `x-tool-policy` entries are.

use std::collections::HashMap;

use serde_json::{Map, Value};

use crate::diag::Report;
use crate::pack::ToolPolicy;
use crate::pack::source::Fields;
use crate::pack::tool_policy::{self, Place};

/// The key, in a pack's table or a persona's.
pub const TOOL_CEILING: &str = "tool_ceiling";

const PLACE: Place = Place {
    key: TOOL_CEILING,
    code: "overrides.tool-ceiling",
    overlap_code: "overrides.tool-ceiling-overlap",
};

/// Every ceiling of one overrides file.
#[derive(Debug, Clone, Default)]
pub struct ToolCeilings {
    /// Pack id → its ceiling.
    packs: HashMap<String, ToolPolicy>,
    /// Pack id, then persona name → the persona's own ceiling.
    personas: HashMap<String, HashMap<String, ToolPolicy>>,
}

impl ToolCeilings {
    /// Reads the `tool_ceiling` of every pack and persona table of the file (`top`, whose map is
    /// `packs`). Tables of the wrong type are reported by the overrides reader, not here.
    pub fn read<'a>(
        top: &Fields<'a>,
        packs: &'a Map<String, Value>,
        report: &mut Report,
    ) -> ToolCeilings {
        let mut out = ToolCeilings::default();
        for (pack_id, tables) in packs {
            let Value::Object(tables) = tables else {
                continue;
            };
            let per_pack = top.nested(pack_id, tables);
            if let Some(ceiling) = read_one(&per_pack, report) {
                out.packs.insert(pack_id.clone(), ceiling);
            }
            for (persona, settings) in tables {
                let Value::Object(settings) = settings else {
                    continue;
                };
                if let Some(ceiling) = read_one(&per_pack.nested(persona, settings), report) {
                    let personas = out.personas.entry(pack_id.clone()).or_default();
                    personas.insert(persona.clone(), ceiling);
                }
            }
        }
        out
    }

    /// The ceiling of persona `persona` of pack `pack_id`: its own inside its pack's.
    pub fn for_persona(&self, pack_id: &str, persona: &str) -> Option<ToolPolicy> {
        let pack = self.packs.get(pack_id).cloned();
        let own = self
            .personas
            .get(pack_id)
            .and_then(|p| p.get(persona))
            .cloned();
        match own {
            Some(own) => Some(own.within(pack)),
            None => pack,
        }
    }
}

/// The `tool_ceiling` of one table, when it has one that can be used.
fn read_one(fields: &Fields<'_>, report: &mut Report) -> Option<ToolPolicy> {
    fields.get(TOOL_CEILING)?;
    tool_policy::read_at(fields, &PLACE, report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pack::source::{SourceFile, Syntax};

    fn ceilings(text: &str) -> (ToolCeilings, Report) {
        let src = SourceFile::new("overrides.toml", text.to_string(), Syntax::Toml);
        let table: toml::Table = toml::from_str(text).unwrap();
        let Value::Object(packs) = serde_json::to_value(&table).unwrap() else {
            unreachable!()
        };
        let top = Fields {
            src: &src,
            map: &packs,
            prefix: vec![],
            area: "overrides",
        };
        let mut report = Report::default();
        (ToolCeilings::read(&top, &packs, &mut report), report)
    }

    #[test]
    fn a_persona_s_ceiling_sits_inside_its_pack_s() {
        let (c, report) = ceilings(
            "[\"com.example.p\"]\ntool_ceiling = { deny = [\"kind:execute\"], read_only = true }\n\n\
             [\"com.example.p\".pip]\ntool_ceiling = { deny = [\"WebFetch\"] }\n",
        );
        assert!(!report.has_errors(), "{report:?}");
        let pip = c.for_persona("com.example.p", "pip").unwrap();
        assert_eq!(pip.all_denied(), ["WebFetch", "kind:execute"]);
        assert!(pip.is_read_only());
        let bee = c.for_persona("com.example.p", "bee").unwrap();
        assert_eq!(bee.all_denied(), ["kind:execute"]);
        assert!(c.for_persona("com.example.q", "pip").is_none());
    }

    #[test]
    fn bad_ceilings_are_errors_at_their_place() {
        for bad in [
            "tool_ceiling = \"read_only\"",
            "tool_ceiling = { deny = \"Bash\" }",
            "tool_ceiling = { allow = [\"*\"] }",
            "tool_ceiling = { deny = [\"kind:nuke\"] }",
            "tool_ceiling = { readonly = true }",
            "tool_ceiling = { read_only = \"yes\" }",
        ] {
            let (_, report) = ceilings(&format!("[\"com.example.p\".pip]\n{bad}\n"));
            assert!(report.has_errors(), "{bad}");
            let d = &report.diagnostics[0];
            assert!(d.code.starts_with("overrides."), "{bad}: {d:?}");
            assert_eq!(d.line, Some(2), "{bad}: {d:?}");
        }
    }
}
