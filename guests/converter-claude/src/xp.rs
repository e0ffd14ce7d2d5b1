//! What the writer's `x-persona` block must carry: only what reading the plugin back would not
//! give anyway. Claude Code's validator warns about the unknown key (and fails it under
//! `--strict`), so a value the reader derives by itself (a display name that is the title-cased
//! name, the id the plugin name gives, the default channel, the key or agent order it reads in)
//! is left out.

use apiary_schema::{behaviour, manifest, persona};
use convert_kit::pack::Pack;
use convert_kit::slug::{self, Rules};
use convert_kit::{Map, Value};

use crate::util::title_case;

/// Whether the reader derives `display` for persona `name` itself (it title-cases the name).
pub fn derived_display_name(name: &str, display: &Value) -> bool {
    display.as_str() == Some(title_case(name).as_str())
}

/// Whether the reader gives a persona's keys back in the order of `fields` without being told:
/// name, display name, description, model and tool policy, then what `x-persona` restores
/// (`carried`, in its order).
pub fn reader_order(fields: &Map<String, Value>, carried: &Map<String, Value>) -> bool {
    let mut expected: Vec<&str> = vec![persona::NAME, persona::DISPLAY_NAME, persona::DESCRIPTION];
    for key in [behaviour::MODEL, persona::TOOL_POLICY] {
        if fields.contains_key(key) {
            expected.push(key);
        }
    }
    expected.extend(carried.keys().map(String::as_str).filter(|k| {
        ![
            persona::DISPLAY_NAME,
            behaviour::MODEL,
            persona::TOOL_POLICY,
        ]
        .contains(k)
    }));
    fields.keys().map(String::as_str).eq(expected)
}

/// Whether agent files written in this order are read back in it (the reader walks `agents/`
/// sorted).
pub fn reading_order(files: &[String]) -> bool {
    files.iter().all(|f| f.starts_with("agents/")) && files.is_sorted()
}

/// Whether the reader derives pack manifest key `key` = `value` itself for a plugin named
/// `plugin_name`: the id from the name, and the default channel from the id.
pub fn derived_manifest(key: &str, value: &Value, plugin_name: &str, pack: &Pack) -> bool {
    let id = slug::normalise(plugin_name, Rules::AgentPlugins);
    match key {
        manifest::ID => value.as_str().is_some() && value.as_str() == id.as_deref(),
        manifest::DEFAULTS => {
            let subscribes = pack
                .personas
                .iter()
                .any(|p| p.fields.contains_key(behaviour::SUBSCRIBE));
            let pack_id = pack.manifest.get(manifest::ID).and_then(Value::as_str);
            let channel = pack_id.and_then(|i| slug::normalise(i, Rules::Claude));
            let default =
                channel.map(|c| convert_kit::json!({ behaviour::SUBSCRIBE: [format!("#{c}")] }));
            !subscribes && pack_id == id.as_deref() && default.as_ref() == Some(value)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use convert_kit::json;

    fn map(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn only_what_the_reader_cannot_derive_is_carried() {
        assert!(derived_display_name("tide-watcher", &json!("Tide Watcher")));
        assert!(!derived_display_name("tide-watcher", &json!("The Watcher")));
        let fields =
            map(json!({"name": "a", "display_name": "A", "description": "d", "temperature": 0.2}));
        assert!(reader_order(
            &fields,
            &map(json!({"display_name": "A", "temperature": 0.2}))
        ));
        let odd =
            map(json!({"name": "a", "temperature": 0.2, "display_name": "A", "description": "d"}));
        assert!(!reader_order(&odd, &map(json!({"temperature": 0.2}))));
        assert!(reading_order(&["agents/a.md".into(), "agents/b.md".into()]));
        assert!(!reading_order(&[
            "agents/b.md".into(),
            "agents/a.md".into()
        ]));
    }
}
