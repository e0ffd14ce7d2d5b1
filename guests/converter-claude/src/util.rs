//! Small helpers shared by the reader and the writer.

/// A manifest path as written (`./agents/x.md`) made tree-relative (`agents/x.md`), or why not:
/// absolute paths and `..` components are refused, whatever the manifest says.
pub fn clean_path(path: &str) -> Result<String, String> {
    let p = path.trim();
    if p.starts_with('/') || p.starts_with('\\') || p.contains(':') {
        return Err(format!("`{path}` is not a relative path"));
    }
    let mut parts = Vec::new();
    for part in p.split(['/', '\\']) {
        match part {
            "" | "." => {}
            ".." => return Err(format!("`{path}` leaves the plugin")),
            other => parts.push(other),
        }
    }
    Ok(parts.join("/"))
}

/// Whether Claude Code loads `name` as an agent's name as written: one line of text (no control
/// characters, no surrounding spaces), at most 64 characters, and none of `/ \ :` (a path, or
/// the `plugin:agent` separator). Its docs recommend lowercase and hyphens; Title Case loads.
pub fn loadable_agent_name(name: &str) -> bool {
    let n = name.chars().count();
    (1..=64).contains(&n)
        && name.trim() == name
        && !name
            .chars()
            .any(|c| c.is_control() || matches!(c, '/' | '\\' | ':'))
}

// Lenient field readers: a field of the wrong type reads as missing.
pub use apiary_guest_sdk::json::{object, strings, text};

/// `code-reviewer` -> `Code Reviewer`, `ui-designer` -> `UI Designer`.
pub fn title_case(name: &str) -> String {
    convert_kit::slug::display_name(name)
}

/// `base`, or `base-2`, `base-3`… whichever is not taken yet; the result is marked taken.
pub fn unique(base: &str, taken: &mut Vec<String>) -> String {
    let mut name = base.to_string();
    let mut n = 2;
    while taken.iter().any(|t| t.eq_ignore_ascii_case(&name)) {
        name = format!("{base}-{n}");
        n += 1;
    }
    taken.push(name.clone());
    name
}

/// The first non-empty, non-heading line of a prompt, cut to `max` characters: a description of
/// last resort.
pub fn first_line(body: &str, max: usize) -> Option<String> {
    body.lines()
        .map(|l| l.trim().trim_start_matches('#').trim())
        .find(|l| !l.is_empty())
        .map(|l| l.chars().take(max).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_names_and_lines() {
        assert_eq!(clean_path("./agents/a.md").unwrap(), "agents/a.md");
        assert_eq!(clean_path("./").unwrap(), "");
        assert!(clean_path("../x").is_err());
        assert!(clean_path("/etc/passwd").is_err());
        assert!(clean_path("a/../../b").is_err());
        assert!(clean_path("C:\\x").is_err());
        assert_eq!(title_case("code-reviewer"), "Code Reviewer");
        let mut taken = vec!["a".to_string()];
        assert_eq!(unique("a", &mut taken), "a-2");
        assert_eq!(first_line("\n# Title\nrest", 3), Some("Tit".into()));
    }
}
