//! One name normaliser with a rule set per format. Converters report every name it changed as a
//! `name-normalised` finding (`from -> to`).

/// The naming rules of a target format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rules {
    /// Persona pack persona name: `[A-Za-z0-9_-]`, at most 64.
    Persona,
    /// Agent Plugins (OPS 1.0) plugin name: `[a-z0-9.-]`, at most 64, no `--` or `..`, alphanumeric
    /// at both ends.
    AgentPlugins,
    /// Claude Code plugin and agent names: `[a-z0-9-]`, at most 50 by convention.
    Claude,
    /// Agent Skills name: `[a-z0-9-]`, at most 64, no `--`, no leading or trailing `-`.
    Skill,
    /// DuDuClaw agent id: `[a-z0-9-]`, 1 to 64, no leading or trailing `-`.
    DuDuClaw,
    /// agent-compose slug: `^[a-z0-9][a-z0-9-]*$`.
    AgentCompose,
}

impl Rules {
    fn max_len(self) -> usize {
        match self {
            Rules::Claude => 50,
            _ => 64,
        }
    }

    fn allows(self, c: char) -> bool {
        match self {
            Rules::Persona => c.is_ascii_alphanumeric() || c == '_' || c == '-',
            Rules::AgentPlugins => {
                c.is_ascii_lowercase() || c.is_ascii_digit() || c == '.' || c == '-'
            }
            _ => c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-',
        }
    }

    fn lowercase(self) -> bool {
        self != Rules::Persona
    }
}

/// Whether `name` already satisfies `rules`.
pub fn is_valid(name: &str, rules: Rules) -> bool {
    normalise(name, rules).as_deref() == Some(name)
}

/// Normalises `name` under `rules`: lowercases where required, turns every run of other characters
/// into one `-`, trims separators from both ends and cuts to the length limit. `None` when nothing
/// usable is left (the caller synthesises a name and reports it).
pub fn normalise(name: &str, rules: Rules) -> Option<String> {
    let mut out = String::with_capacity(name.len());
    let mut pending_dash = false;
    for c in name.chars() {
        let c = if rules.lowercase() {
            c.to_ascii_lowercase()
        } else {
            c
        };
        if c == '.' && out.ends_with('.') {
            continue;
        }
        if rules.allows(c) && c != '-' {
            if pending_dash && !out.is_empty() {
                out.push('-');
            }
            pending_dash = false;
            out.push(c);
        } else {
            pending_dash = true;
        }
    }
    let trimmed: String = out.chars().take(rules.max_len()).collect();
    let trimmed = trimmed.trim_matches(|c| c == '-' || c == '.' || c == '_');
    (!trimmed.is_empty()).then(|| trimmed.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn titles_become_slugs_per_format() {
        assert_eq!(
            normalise("Meadow Security Team", Rules::AgentPlugins).unwrap(),
            "meadow-security-team"
        );
        assert_eq!(
            normalise("Code_Reviewer", Rules::Persona).unwrap(),
            "Code_Reviewer"
        );
        assert_eq!(
            normalise("Code_Reviewer", Rules::Claude).unwrap(),
            "code-reviewer"
        );
        assert_eq!(normalise("--a--b--", Rules::DuDuClaw).unwrap(), "a-b");
        assert_eq!(
            normalise("com.example..pack", Rules::AgentPlugins).unwrap(),
            "com.example.pack"
        );
        assert_eq!(normalise("客服", Rules::DuDuClaw), None);
        assert_eq!(normalise(&"x".repeat(80), Rules::Claude).unwrap().len(), 50);
        assert!(is_valid("code-review", Rules::Skill));
        assert!(!is_valid("Code Review", Rules::Skill));
    }
}
