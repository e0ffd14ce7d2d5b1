//! Model names between Claude agent frontmatter (`sonnet`, `opus`, `haiku`, `inherit` or a full
//! `claude-…` id) and persona packs (`provider:model-id`).

use convert_kit::models;

/// What a Claude `model` value becomes in a persona.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToPersona {
    /// A concrete `provider:model-id`; `alias` says whether a date-dependent alias was pinned.
    Model { id: String, alias: bool },
    /// `inherit`: no persona `model`, so the pack default (or the runtime's) applies.
    Inherit,
    /// Not a Claude model name the converter knows: no persona slot.
    Unknown,
}

/// Maps a Claude agent `model` value to a persona model, through convert-kit's model table
/// (aliases pinned, human-readable and dotted spellings respelled as ids).
pub fn to_persona(model: &str) -> ToPersona {
    match models::resolve(model) {
        models::Model::Id { id, pinned, .. } => ToPersona::Model { id, alias: pinned },
        models::Model::Inherit => ToPersona::Inherit,
        models::Model::Unknown => ToPersona::Unknown,
    }
}

/// What a persona model becomes in a Claude agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToClaude {
    /// A full Claude model id.
    Id(String),
    /// Another provider's model: Claude can only run its own, so `inherit`.
    Inherit,
}

/// Maps a persona `model` (`provider:model-id` or a bare id) to a Claude agent `model`.
pub fn to_claude(model: &str) -> ToClaude {
    match model.trim().split_once(':') {
        Some((provider, id)) if provider.eq_ignore_ascii_case("anthropic") => {
            ToClaude::Id(id.to_string())
        }
        Some(_) => ToClaude::Inherit,
        None if model.trim().to_ascii_lowercase().starts_with("claude") => {
            ToClaude::Id(model.trim().to_string())
        }
        None => ToClaude::Inherit,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aliases_ids_and_others() {
        assert_eq!(
            to_persona("sonnet"),
            ToPersona::Model {
                id: "anthropic:claude-sonnet-4-6".into(),
                alias: true
            }
        );
        assert_eq!(to_persona("inherit"), ToPersona::Inherit);
        assert_eq!(
            to_persona("claude-sonnet-4-20250514"),
            ToPersona::Model {
                id: "anthropic:claude-sonnet-4-20250514".into(),
                alias: false
            }
        );
        assert_eq!(to_persona("fable"), ToPersona::Unknown);
        assert_eq!(
            to_claude("anthropic:claude-opus-4-6"),
            ToClaude::Id("claude-opus-4-6".into())
        );
        assert_eq!(to_claude("openai:gpt-5"), ToClaude::Inherit);
        assert_eq!(to_claude("claude-x"), ToClaude::Id("claude-x".into()));
    }
}
