//! Documentation and licence files (README, LICENSE…): converters keep them at the top of the
//! trees they write, and the host's output check allows them there whatever the format's layout.
//! One list for both, so a converter never keeps a file the host then refuses.

/// Name prefixes (upper case) of documentation and licence files. `LICENSES` (a folder of licence
/// texts) already matches `LICENSE`; it is listed so the list says what it covers.
const PREFIXES: &[&str] = &[
    "README",
    "LICENSE",
    "LICENCE",
    "LICENSES",
    "CHANGELOG",
    "NOTICE",
    "COPYING",
];

/// Whether the top-level entry `name` is documentation or a licence (`README.md`, `LICENSE`,
/// `licenses/`, `CHANGELOG.txt`…), by its name in any case.
pub fn is_documentation(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    PREFIXES.iter().any(|p| upper.starts_with(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documentation_and_licences_in_any_case() {
        for name in [
            "README.md",
            "readme",
            "LICENSE",
            "LICENCE.txt",
            "LICENSES",
            "licenses",
            "CHANGELOG.md",
            "NOTICE",
            "COPYING.LESSER",
        ] {
            assert!(is_documentation(name), "{name}");
        }
        for name in ["agents", "SKILL.md", "docs", "plugin.json", "MY-README.md"] {
            assert!(!is_documentation(name), "{name}");
        }
    }
}
