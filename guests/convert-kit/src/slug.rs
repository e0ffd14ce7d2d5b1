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

/// Words a display name spells their own way rather than capitalised (`ui` is `UI`, `csharp`
/// is `C#`): acronyms and product names common in agent names.
const SPELLINGS: &[(&str, &str)] = &[
    ("ai", "AI"),
    ("api", "API"),
    ("apis", "APIs"),
    ("aws", "AWS"),
    ("ci", "CI"),
    ("cd", "CD"),
    ("cli", "CLI"),
    ("cpp", "C++"),
    ("csharp", "C#"),
    ("css", "CSS"),
    ("db", "DB"),
    ("devops", "DevOps"),
    ("dotnet", ".NET"),
    ("gcp", "GCP"),
    ("graphql", "GraphQL"),
    ("html", "HTML"),
    ("http", "HTTP"),
    ("ios", "iOS"),
    ("javascript", "JavaScript"),
    ("js", "JS"),
    ("json", "JSON"),
    ("k8s", "K8s"),
    ("llm", "LLM"),
    ("mcp", "MCP"),
    ("ml", "ML"),
    ("mlops", "MLOps"),
    ("nlp", "NLP"),
    ("php", "PHP"),
    ("posix", "POSIX"),
    ("qa", "QA"),
    ("rest", "REST"),
    ("sdk", "SDK"),
    ("seo", "SEO"),
    ("sql", "SQL"),
    ("sre", "SRE"),
    ("ts", "TS"),
    ("typescript", "TypeScript"),
    ("ui", "UI"),
    ("ux", "UX"),
];

/// A display name for a slug: words split on `-`, `_` and spaces, each capitalised, except the
/// acronyms and product names of [`SPELLINGS`] (`ui-designer` -> `UI Designer`).
pub fn display_name(name: &str) -> String {
    name.split(['-', '_', ' '])
        .filter(|w| !w.is_empty())
        .map(|w| {
            let lower = w.to_ascii_lowercase();
            if let Some((_, spelled)) = SPELLINGS.iter().find(|(k, _)| *k == lower) {
                return (*spelled).to_string();
            }
            let mut c = w.chars();
            match c.next() {
                Some(first) => first.to_uppercase().chain(c).collect(),
                None => String::new(),
            }
        })
        .collect::<Vec<String>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_keep_acronyms() {
        assert_eq!(display_name("ui-designer"), "UI Designer");
        assert_eq!(display_name("seo_specialist"), "SEO Specialist");
        assert_eq!(display_name("posix-shell-pro"), "POSIX Shell Pro");
        assert_eq!(display_name("csharp-developer"), "C# Developer");
        assert_eq!(display_name("code-reviewer"), "Code Reviewer");
    }

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
