//! Small JSON helpers for reading foreign manifests leniently (a field of the wrong type reads as
//! missing, never as a panic) and building output objects.

pub use serde_json::{Map, Value, json};

/// A non-empty (after trimming) string field of an object.
pub fn text<'a>(map: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    map.get(key)
        .and_then(Value::as_str)
        .filter(|s| !s.trim().is_empty())
}

/// A field that is a string or a list of strings, as a list; anything else reads as empty.
/// Non-string list items are skipped.
pub fn strings(value: Option<&Value>) -> Vec<String> {
    match value {
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect(),
        _ => Vec::new(),
    }
}

/// An object field of `map`, created when missing (and replacing a value that is not an object).
pub fn object<'a>(map: &'a mut Map<String, Value>, key: &str) -> &'a mut Map<String, Value> {
    let slot = map
        .entry(key.to_string())
        .or_insert_with(|| Value::Object(Map::new()));
    if !slot.is_object() {
        *slot = Value::Object(Map::new());
    }
    match slot {
        Value::Object(m) => m,
        _ => unreachable!("made an object just above"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lenient_reads_and_object_slots() {
        let v = json!({"name": " ", "tools": ["a", 1, "b"], "one": "x", "meta": 3});
        let map = v.as_object().unwrap();
        assert_eq!(text(map, "name"), None);
        assert_eq!(text(map, "one"), Some("x"));
        assert_eq!(strings(map.get("tools")), ["a", "b"]);
        assert_eq!(strings(map.get("one")), ["x"]);
        assert!(strings(map.get("meta")).is_empty());
        let mut out = map.clone();
        object(&mut out, "meta").insert("k".into(), json!(1));
        object(&mut out, "new").insert("k".into(), json!(2));
        assert_eq!(out["meta"], json!({"k": 1}));
        assert_eq!(out["new"], json!({"k": 2}));
    }
}
