//! Why two trees are not byte-equal, in a few coarse classes: for the corpus run's round-trip
//! breakdown (what a conversion there and back changes), so the causes can be counted and fixed.

use std::collections::BTreeMap;

use serde_json::Value;

/// One difference between the original tree and the one that came back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Difference {
    /// The class: `missing`, `added`, `moved`, `line endings`, `whitespace`, `JSON key order or
    /// formatting`, `JSON values (keys…)`, `frontmatter key order or quoting`, `frontmatter
    /// values (keys…)`, `body text`, `content`.
    pub class: String,
    /// The file (in the original tree; the new path for `added`).
    pub file: String,
}

/// Every difference between `before` and `after` (relative path -> bytes), sorted by file.
pub fn differences(
    before: &BTreeMap<String, Vec<u8>>,
    after: &BTreeMap<String, Vec<u8>>,
) -> Vec<Difference> {
    let mut out = Vec::new();
    let mut added: Vec<&String> = after.keys().filter(|k| !before.contains_key(*k)).collect();
    for (file, bytes) in before {
        let class = match after.get(file) {
            Some(b) if b == bytes => continue,
            Some(b) => changed(bytes, b),
            None => match added.iter().position(|a| after[*a] == *bytes) {
                Some(i) => {
                    let to = added.remove(i);
                    format!("moved (to {})", top_dir(to))
                }
                None => "missing".to_string(),
            },
        };
        out.push(Difference {
            class,
            file: file.clone(),
        });
    }
    out.extend(added.into_iter().map(|f| Difference {
        class: "added".to_string(),
        file: f.clone(),
    }));
    out
}

/// The first path component, or the file at the root.
fn top_dir(path: &str) -> String {
    match path.split_once('/') {
        Some((dir, _)) => format!("{dir}/"),
        None => path.to_string(),
    }
}

/// What changed in a file present in both trees.
fn changed(a: &[u8], b: &[u8]) -> String {
    let (Ok(a), Ok(b)) = (std::str::from_utf8(a), std::str::from_utf8(b)) else {
        return "content".to_string();
    };
    if a.replace("\r\n", "\n") == b.replace("\r\n", "\n") {
        return "line endings".to_string();
    }
    let words = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    if words(a) == words(b) {
        return "whitespace".to_string();
    }
    if let (Ok(ja), Ok(jb)) = (
        serde_json::from_str::<Value>(a),
        serde_json::from_str::<Value>(b),
    ) {
        // Objects compare as maps, whatever their key order.
        if ja == jb {
            return "JSON key order or formatting".to_string();
        }
        return format!("JSON values ({})", differing_keys(&ja, &jb).join(", "));
    }
    if let (Some((fa, ba)), Some((fb, bb))) = (frontmatter(a), frontmatter(b)) {
        if words(ba) != words(bb) {
            return "body text".to_string();
        }
        let (ka, kb) = (key_lines(fa), key_lines(fb));
        let keys_a: Vec<&str> = ka.keys().copied().collect();
        let keys_b: Vec<&str> = kb.keys().copied().collect();
        let values = |m: &BTreeMap<&str, String>| -> Vec<String> {
            m.values()
                .map(|v| v.trim_matches(['"', '\'']).to_string())
                .collect()
        };
        if keys_a == keys_b && values(&ka) == values(&kb) {
            return "frontmatter key order or quoting".to_string();
        }
        let mut keys: Vec<&str> = keys_a
            .iter()
            .chain(&keys_b)
            .copied()
            .filter(|k| ka.get(k) != kb.get(k))
            .collect();
        keys.sort_unstable();
        keys.dedup();
        return format!("frontmatter values ({})", keys.join(", "));
    }
    "content".to_string()
}

/// The top-level keys whose values differ (or that only one side has).
fn differing_keys(a: &Value, b: &Value) -> Vec<String> {
    let (Some(a), Some(b)) = (a.as_object(), b.as_object()) else {
        return vec!["(top level)".to_string()];
    };
    let mut keys: Vec<String> = a
        .keys()
        .chain(b.keys())
        .filter(|k| a.get(*k) != b.get(*k))
        .cloned()
        .collect();
    keys.sort();
    keys.dedup();
    keys
}

/// A markdown file's frontmatter block and body, when it has `---` frontmatter.
fn frontmatter(text: &str) -> Option<(&str, &str)> {
    let rest = text.strip_prefix("---\n")?;
    let end = rest.find("\n---")?;
    let body = rest[end + 4..].trim_start_matches('-');
    Some((&rest[..end], body))
}

/// Top-level `key: value` lines of a frontmatter block (a value continued on indented lines
/// included), keyed by key.
fn key_lines(block: &str) -> BTreeMap<&str, String> {
    let mut out: BTreeMap<&str, String> = BTreeMap::new();
    let mut last: Option<&str> = None;
    for line in block.lines() {
        let top = !line.starts_with([' ', '\t', '-']);
        match line.split_once(':') {
            Some((k, v)) if top && !k.trim().is_empty() => {
                out.insert(k.trim(), v.trim().to_string());
                last = Some(k.trim());
            }
            _ => {
                if let Some(k) = last
                    && let Some(v) = out.get_mut(k)
                {
                    v.push(' ');
                    v.push_str(line.trim());
                }
            }
        }
    }
    out
}

/// Counts classes over many round trips: class -> (round trips it affects, an example file).
#[derive(Debug, Default)]
pub struct Tally {
    pub by_class: BTreeMap<String, (usize, String)>,
}

impl Tally {
    /// Adds one round trip's differences (each class counted once per round trip).
    pub fn add(&mut self, item: &str, diffs: &[Difference]) {
        let mut seen: Vec<&str> = Vec::new();
        for d in diffs {
            if seen.contains(&d.class.as_str()) {
                continue;
            }
            seen.push(&d.class);
            let e = self
                .by_class
                .entry(d.class.clone())
                .or_insert_with(|| (0, format!("{item}: {}", d.file)));
            e.0 += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(files: &[(&str, &str)]) -> BTreeMap<String, Vec<u8>> {
        files
            .iter()
            .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
            .collect()
    }

    fn classes(a: &[(&str, &str)], b: &[(&str, &str)]) -> Vec<(String, String)> {
        differences(&tree(a), &tree(b))
            .into_iter()
            .map(|d| (d.file, d.class))
            .collect()
    }

    #[test]
    fn each_class_is_told_apart() {
        let agent = "---\nname: Tide Watcher\ndescription: \"Watches\"\n---\nBody.\n";
        let got = classes(
            &[
                ("crew/tide.md", "---\nname: a\n---\nx\n"),
                (
                    ".claude-plugin/plugin.json",
                    "{\"name\": \"k\", \"a\": [1]}",
                ),
                ("m.json", "{\"a\": 1, \"b\": 2}"),
                ("crlf.md", "one\r\ntwo\r\n"),
                ("ws.md", "one  two\n"),
                ("agents/a.md", agent),
                ("agents/b.md", agent),
                ("agents/c.md", agent),
                ("gone.txt", "bye"),
            ],
            &[
                ("agents/tide.md", "---\nname: a\n---\nx\n"),
                (
                    ".claude-plugin/plugin.json",
                    "{\"name\": \"k\", \"x-persona\": {}}",
                ),
                ("m.json", "{\n  \"b\": 2,\n  \"a\": 1\n}\n"),
                ("crlf.md", "one\ntwo\n"),
                ("ws.md", "one two\n"),
                (
                    "agents/a.md",
                    "---\ndescription: Watches\nname: Tide Watcher\n---\nBody.\n",
                ),
                (
                    "agents/b.md",
                    "---\nname: tide-watcher\ndescription: \"Watches\"\n---\nBody.\n",
                ),
                (
                    "agents/c.md",
                    "---\nname: Tide Watcher\ndescription: \"Watches\"\n---\nOther.\n",
                ),
                ("new.txt", "hi"),
            ],
        );
        let want = [
            (".claude-plugin/plugin.json", "JSON values (a, x-persona)"),
            ("agents/a.md", "frontmatter key order or quoting"),
            ("agents/b.md", "frontmatter values (name)"),
            ("agents/c.md", "body text"),
            ("crew/tide.md", "moved (to agents/)"),
            ("crlf.md", "line endings"),
            ("gone.txt", "missing"),
            ("m.json", "JSON key order or formatting"),
            ("ws.md", "whitespace"),
            ("new.txt", "added"),
        ];
        let want: Vec<(String, String)> = want
            .iter()
            .map(|(f, c)| (f.to_string(), c.to_string()))
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn the_tally_counts_a_class_once_per_round_trip() {
        let mut t = Tally::default();
        let d = |c: &str, f: &str| Difference {
            class: c.into(),
            file: f.into(),
        };
        t.add("p1", &[d("missing", "a"), d("missing", "b")]);
        t.add("p2", &[d("missing", "c"), d("added", "d")]);
        assert_eq!(t.by_class["missing"], (2, "p1: a".to_string()));
        assert_eq!(t.by_class["added"].0, 1);
    }
}
