//! The reference chapters of the book are generated, and checked here so they cannot drift:
//! `docs/reference/commands.md` from the CLI's clap definition, `docs/reference/events.md` from the
//! schema of `up --json`'s `Event` type, `docs/reference/errors.md` from the install tooling's
//! error codes. After changing either, regenerate them with
//! `APIARY_BLESS=1 cargo test -p apiary --test all docs_reference`.

use std::path::PathBuf;

use serde_json::Value;

fn reference(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../docs/reference")
        .join(name)
}

/// The checked-in file equals `generated`, or is rewritten under `APIARY_BLESS=1`.
fn check(name: &str, generated: &str) {
    let path = reference(name);
    if std::env::var_os("APIARY_BLESS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, generated).unwrap();
        return;
    }
    let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        on_disk == generated,
        "docs/reference/{name} is out of date with the code; regenerate it with \
         `APIARY_BLESS=1 cargo test -p apiary --test all docs_reference` and commit it"
    );
}

#[test]
fn the_command_reference_is_the_clap_definition() {
    let markdown = clap_markdown::help_markdown_command(&apiary::cli::command());
    assert!(
        markdown.contains("## `apiary up`"),
        "every command is in it"
    );
    check("commands.md", &markdown);
}

#[test]
fn the_error_code_reference_is_the_code_type() {
    let markdown = apiary::dist::code::reference();
    assert!(markdown.contains("| `archive.size-lie` |") && markdown.contains("| `io` |"));
    check("errors.md", &markdown);
}

#[test]
fn the_event_reference_is_the_event_type() {
    let schema =
        serde_json::to_value(schemars::schema_for!(apiary::dispatch::event::Event)).unwrap();
    let markdown = events_markdown(&schema);
    assert!(markdown.contains("## `reply`") && markdown.contains("## `persona_ready`"));
    check("events.md", &markdown);
}

/// One section per event: what it says, then its keys with their types.
fn events_markdown(schema: &Value) -> String {
    let mut out = String::from(
        "# `apiary up --json` events\n\n\
         <!-- Generated from the `Event` type (host/harness/src/event.rs) by \
         host/apiary/tests/all/docs_reference.rs; do not edit. -->\n\n\
         With `--json`, `apiary up` prints one JSON object per line. Its `event` key names the \
         kind; the other keys are below. A key that does not apply to one event is `null` or left \
         out (an `error` outside any persona has no `persona`), so read keys with a default. New \
         keys may be added; existing ones keep their meaning.\n",
    );
    for variant in schema["oneOf"].as_array().into_iter().flatten() {
        let kind = variant["properties"]["event"]["const"]
            .as_str()
            .unwrap_or("?");
        out.push_str(&format!("\n## `{kind}`\n\n"));
        if let Some(about) = variant["description"].as_str() {
            out.push_str(&one_line(about));
            out.push_str("\n\n");
        }
        let keys: Vec<(&String, &Value)> = variant["properties"]
            .as_object()
            .into_iter()
            .flatten()
            .filter(|(k, _)| *k != "event")
            .collect();
        if keys.is_empty() {
            out.push_str("No other keys.\n");
            continue;
        }
        out.push_str("| key | type | meaning |\n|---|---|---|\n");
        for (key, property) in keys {
            let about = property["description"]
                .as_str()
                .map(one_line)
                .unwrap_or_default();
            out.push_str(&format!(
                "| `{key}` | {} | {about} |\n",
                type_of(property, schema)
            ));
        }
    }
    out
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A property's JSON type, as a reader of the stream sees it.
fn type_of(property: &Value, schema: &Value) -> String {
    if let Some(reference) = property["$ref"].as_str() {
        let name = reference.rsplit('/').next().unwrap_or_default();
        let fields = schema["$defs"][name]["properties"]
            .as_object()
            .map(|o| o.keys().cloned().collect::<Vec<_>>().join(", "))
            .unwrap_or_default();
        return format!("object {{{fields}}}");
    }
    if let Some(any) = property["anyOf"].as_array() {
        return any
            .iter()
            .map(|p| type_of(p, schema))
            .collect::<Vec<_>>()
            .join(" or ");
    }
    match &property["type"] {
        Value::String(t) if t == "array" => {
            format!("array of {}", type_of(&property["items"], schema))
        }
        Value::String(t) => t.clone(),
        Value::Array(ts) => ts
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join(" or "),
        _ => "any".into(),
    }
}
