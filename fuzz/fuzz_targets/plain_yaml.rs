//! Differential: whenever the fast frontmatter reader accepts a text, its value must equal what
//! libyaml (serde_yaml_ng) makes of the same text, converted to JSON as the persona parser does.
#![no_main]

use apiary_core::pack::plain_yaml;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Some(fast) = plain_yaml::parse(text) else {
        return;
    };
    let full: serde_yaml_ng::Value = serde_yaml_ng::from_str(text)
        .unwrap_or_else(|e| panic!("fast path accepted what libyaml refuses ({e}):\n{text}"));
    let full = match serde_json::to_value(&full).expect("JSON-compatible") {
        Value::Null => serde_json::Map::new(),
        Value::Object(m) => m,
        other => panic!("fast path made a mapping of a {other:?}:\n{text}"),
    };
    assert_eq!(fast, full, "fast path disagrees with libyaml on:\n{text}");
});
