//! Contract views of KDL role and personality nodes, and the small facts both directions read
//! from them (meld, identity, seats, skill ids).

use crate::contract::{Identity, PersonalityView, RoleView};
use crate::node::Node;

/// The role's personality meld, in order.
pub fn meld(role: &Node) -> Vec<String> {
    role.children_named("personality")
        .flat_map(|n| n.str_args())
        .map(str::to_string)
        .collect()
}

fn identity_of(node: &Node) -> Identity {
    Identity {
        name: node.str_prop("name").map(str::to_string),
        pronouns: node.str_prop("pronouns").map(str::to_string),
    }
}

/// The role-level identity, if declared.
pub fn identity(role: &Node) -> Option<Identity> {
    role.first_child("identity").map(identity_of)
}

/// Every seat (`agent "<harness>"` or `seat "<key>"`) with the identity written on it.
pub fn seats(role: &Node) -> Vec<(String, Identity)> {
    role.children
        .iter()
        .filter(|c| c.name == "agent" || c.name == "seat")
        .map(|c| (c.arg0().unwrap_or_default().to_string(), identity_of(c)))
        .collect()
}

/// The name an identity-first reader would show: role identity, else the first seat's.
pub fn identity_name(role: &Node) -> Option<String> {
    identity(role)
        .and_then(|i| i.name)
        .or_else(|| seats(role).into_iter().find_map(|(_, i)| i.name))
}

pub fn role_view(role: &Node, path: &str, favorite: Option<String>) -> RoleView {
    RoleView {
        slug: role.arg0().unwrap_or_default().to_string(),
        path: path.to_string(),
        personalities: meld(role),
        identity: identity(role),
        seats: seats(role),
        favorite,
        tiers: role
            .first_child("model-tier")
            .map(|n| n.str_args().into_iter().map(str::to_string).collect()),
        seat_tiers: role
            .children
            .iter()
            .filter(|c| c.name == "agent" || c.name == "seat")
            .filter_map(|c| {
                let tier = c.str_prop("tier")?;
                Some((c.arg0().unwrap_or_default().to_string(), tier.to_string()))
            })
            .collect(),
        skill: None,
    }
}

pub fn personality_view(node: &Node, path: &str) -> PersonalityView {
    PersonalityView {
        name: node.arg0().unwrap_or_default().to_string(),
        path: path.to_string(),
        color: node.str_prop("color").map(str::to_string),
        binding: None,
    }
}

/// The skill id a personality or boundary node binds (`skill=`), defaulting to `<kind>-<name>`.
pub fn bound_skill(node: &Node) -> String {
    node.str_prop("skill")
        .map(str::to_string)
        .unwrap_or_else(|| format!("{}-{}", node.name, node.arg0().unwrap_or_default()))
}

/// Boundaries a role names (`boundary`, `boundary-scoped`).
pub fn role_boundaries(role: &Node) -> Vec<String> {
    role.children
        .iter()
        .filter(|c| c.name == "boundary" || c.name == "boundary-scoped")
        .filter_map(|c| c.arg0().map(str::to_string))
        .collect()
}

/// Method skill ids a role names.
pub fn methods(role: &Node) -> Vec<String> {
    role.children_named("method")
        .flat_map(|n| n.str_args())
        .map(str::to_string)
        .collect()
}

/// One active personality as the agent is told it.
pub struct Member {
    pub name: String,
    pub skill: String,
    /// `None`: defined in a personality library outside the package.
    pub color: Option<String>,
}

/// What a bundle tells the agent (agent-compose's person contract, "Favorite colors"): every active
/// personality's name, skill and colour, and the melded favourite colour; appended to the persona
/// body by both readers, removed again by the writer. Empty for a role without a meld.
pub fn identity_card(members: &[Member], favorite: Option<&str>) -> String {
    if members.is_empty() {
        return String::new();
    }
    let mut card = String::from("\n## Your personalities\n\n");
    for m in members {
        match &m.color {
            Some(c) => card.push_str(&format!("- {}: skill `{}`, colour {c}\n", m.name, m.skill)),
            None => card.push_str(&format!(
                "- {}: skill `{}` (defined in a personality library)\n",
                m.name, m.skill
            )),
        }
    }
    if let Some(fav) = favorite {
        card.push_str(&format!(
            "\nYour favourite colour is {fav}: the blend of your personalities' colours.\n"
        ));
    }
    card
}

/// Appends `card` to `body` (after a newline when the body lacks one); returns what was added.
pub fn append_card(body: &mut String, card: String) -> String {
    let appended = if body.is_empty() || body.ends_with('\n') {
        card
    } else {
        format!("\n{card}")
    };
    body.push_str(&appended);
    appended
}

/// Formats violations as one refusal message.
pub fn refusal(what: &str, violations: &[crate::contract::Violation]) -> String {
    let items: Vec<String> = violations
        .iter()
        .map(|v| {
            if v.field.is_empty() {
                format!("[{}] {}", v.path, v.message)
            } else {
                format!("[{} {}] {}", v.path, v.field, v.message)
            }
        })
        .collect();
    format!(
        "{what} breaks the person contract ({} violation(s)): {}",
        violations.len(),
        items.join("; ")
    )
}
