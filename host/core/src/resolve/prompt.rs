//! The persona's system prompt (spec §5, §12): persona body, then `# Team Instructions`, then the list
//! of skills the agent can load. The per-message `[Base]`/`[Context]` framing is the dispatcher's.

/// The skill-loading hint line; newer goose calls the tool `load_skill`, so it can be replaced.
pub const DEFAULT_SKILL_HINT: &str = "Load a skill with: load(source: \"skill-name\")";

pub fn system_prompt(
    body: &str,
    instructions: Option<&str>,
    skills: &[&str],
    skill_hint: &str,
) -> String {
    let instructions = instructions.filter(|i| !i.trim().is_empty());
    // Sized once: growing a kilobytes-long prompt would copy it (200 personas in `pack inspect`).
    let skill_names: usize = skills.iter().map(|s| s.len() + 2).sum();
    let mut out = String::with_capacity(
        body.len() + instructions.map_or(0, |i| i.len() + 24) + skill_names + skill_hint.len() + 24,
    );
    out.push_str(body);
    if let Some(instructions) = instructions {
        out.push_str("\n\n---\n# Team Instructions\n");
        out.push_str(instructions);
    }
    if !skills.is_empty() {
        out.push_str("\n\n---\nAvailable skills: ");
        out.push_str(&skills.join(", "));
        out.push('\n');
        out.push_str(skill_hint);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layers_in_spec_order() {
        let p = system_prompt(
            "You are Lep.",
            Some("Be kind."),
            &["code-review", "shared"],
            DEFAULT_SKILL_HINT,
        );
        assert_eq!(
            p,
            "You are Lep.\n\n---\n# Team Instructions\nBe kind.\n\n---\nAvailable skills: code-review, shared\nLoad a skill with: load(source: \"skill-name\")"
        );
    }

    #[test]
    fn omits_empty_sections() {
        assert_eq!(
            system_prompt("Body", Some("  "), &[], DEFAULT_SKILL_HINT),
            "Body"
        );
    }
}
