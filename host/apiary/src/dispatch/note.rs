//! What the harness reports: one [`Note`] per thing that happened. `apiary up` prints each as its
//! plain line (the default) or, with `--json`, as one JSON object per line whose `event` key names
//! the kind and whose other keys are stable (`persona`, `channel`, `id`, ...; listed in `up --help`).

use serde_json::{Map, Value};

/// One thing the harness did or saw.
#[derive(Debug, Clone)]
pub struct Note {
    /// The kind: the JSON `event` key.
    pub event: &'static str,
    /// The plain line; `None` for notes only the JSON stream carries (per-persona wake decisions,
    /// prompts sent), which would repeat what the plain lines already say.
    pub text: Option<String>,
    fields: Map<String, Value>,
}

impl Note {
    /// A note printed in both forms.
    pub fn new(event: &'static str, text: impl Into<String>) -> Note {
        Note {
            event,
            text: Some(text.into()),
            fields: Map::new(),
        }
    }

    /// A note only the JSON stream carries.
    pub fn only_json(event: &'static str) -> Note {
        Note {
            event,
            text: None,
            fields: Map::new(),
        }
    }

    /// Leaves the note out of the plain stream.
    pub fn json_only(mut self) -> Note {
        self.text = None;
        self
    }

    /// Adds a key (`event` itself is reserved).
    pub fn with(mut self, key: &str, value: impl Into<Value>) -> Note {
        if key != "event" {
            self.fields.insert(key.to_string(), value.into());
        }
        self
    }

    pub fn get(&self, key: &str) -> Option<&Value> {
        self.fields.get(key)
    }

    /// The JSON line (without the newline).
    pub fn json(&self) -> String {
        let mut object = Map::with_capacity(self.fields.len() + 1);
        object.insert("event".into(), Value::from(self.event));
        object.extend(self.fields.iter().map(|(k, v)| (k.clone(), v.clone())));
        Value::Object(object).to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_has_the_event_key_and_escapes_hostile_text() {
        let n = Note::new("reply", "reply bee x to y")
            .with("persona", "bee\"\n}")
            .with("event", "forged");
        let v: Value = serde_json::from_str(&n.json()).unwrap();
        assert_eq!(v["event"], "reply");
        assert_eq!(v["persona"], "bee\"\n}");
        assert!(!n.json().contains('\n'));
        assert_eq!(n.text.as_deref(), Some("reply bee x to y"));
        assert!(Note::only_json("woken").text.is_none());
    }
}
