//! The person contract (seed 001) as checks over roles and personalities, shared by the package
//! reader, the snapshot reader and the package writer. Every violation names the file and field.

use std::collections::BTreeMap;

use crate::color;

/// One broken rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub path: String,
    pub field: String,
    pub message: String,
}

/// An identity (`name`, `pronouns`), either role-level or on one seat.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Identity {
    pub name: Option<String>,
    pub pronouns: Option<String>,
}

impl Identity {
    pub fn is_empty(&self) -> bool {
        self.name.is_none() && self.pronouns.is_none()
    }
}

/// What the contract needs to know of a role.
#[derive(Debug, Clone, Default)]
pub struct RoleView {
    pub slug: String,
    pub path: String,
    pub personalities: Vec<String>,
    pub identity: Option<Identity>,
    /// `(seat key or harness, identity written on that seat)`.
    pub seats: Vec<(String, Identity)>,
    /// A carried `favorite_color`, checked against the gate when present.
    pub favorite: Option<String>,
}

#[derive(Debug, Clone, Default)]
pub struct PersonalityView {
    pub name: String,
    pub path: String,
    pub color: Option<String>,
}

/// Which rule set applies: the core roster's, or an external package's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rules {
    Core,
    External,
}

/// Checks every rule; `external` lists personalities defined outside the package (a library),
/// which a meld may name without a local definition.
pub fn check(
    rules: Rules,
    roles: &[RoleView],
    personalities: &[PersonalityView],
    external: &[String],
) -> Vec<Violation> {
    let mut out = Vec::new();
    let mut v = |path: &str, field: &str, message: String| {
        out.push(Violation {
            path: path.to_string(),
            field: field.to_string(),
            message,
        })
    };
    let colors: BTreeMap<&str, Option<&str>> = personalities
        .iter()
        .map(|p| (p.name.as_str(), p.color.as_deref()))
        .collect();
    check_colors(personalities, &mut v);
    let mut usage: BTreeMap<&str, usize> = BTreeMap::new();
    let mut derived: Vec<(String, String, &RoleView)> = Vec::new();
    for role in roles {
        check_meld(rules, role, &colors, external, &mut usage, &mut v);
        check_identity(rules, role, &mut v);
        if let Some(hex) = &role.favorite
            && let Some(why) = color::illegible(hex)
        {
            v(
                &role.path,
                "favorite_color",
                format!("role {}: favourite colour {why}", role.slug),
            );
        }
        let hexes: Option<Vec<&str>> = role
            .personalities
            .iter()
            .map(|m| colors.get(m.as_str()).copied().flatten())
            .collect();
        if let Some(hexes) = hexes.filter(|h| !h.is_empty()) {
            match color::favorite(&hexes) {
                Some(fav) => derived.push((role.slug.clone(), fav, role)),
                None if hexes.iter().all(|h| color::illegible(h).is_none()) => v(
                    &role.path,
                    "personality",
                    format!("role {}: the derived favourite colour is grey", role.slug),
                ),
                None => {}
            }
        }
    }
    if rules == Rules::Core {
        check_core(personalities, &usage, &derived, &mut v);
    }
    out
}

/// Every personality has a legible colour.
fn check_colors(personalities: &[PersonalityView], v: &mut impl FnMut(&str, &str, String)) {
    for p in personalities {
        match &p.color {
            None => v(
                &p.path,
                "color",
                format!("personality {} has no colour", p.name),
            ),
            Some(hex) => {
                if let Some(why) = color::illegible(hex) {
                    v(
                        &p.path,
                        "color",
                        format!("personality {}: colour {why} (the parse gate)", p.name),
                    );
                }
            }
        }
    }
}

/// A role's meld: its size, no repeats, every member defined; counts each member's use.
fn check_meld<'a>(
    rules: Rules,
    role: &'a RoleView,
    colors: &BTreeMap<&str, Option<&str>>,
    external: &[String],
    usage: &mut BTreeMap<&'a str, usize>,
    v: &mut impl FnMut(&str, &str, String),
) {
    let meld = &role.personalities;
    match rules {
        Rules::Core if meld.len() != 2 => v(
            &role.path,
            "personality",
            format!(
                "role {}: a core role needs exactly two personalities, found {}",
                role.slug,
                meld.len()
            ),
        ),
        Rules::External if meld.is_empty() => v(
            &role.path,
            "personality",
            format!("role {}: the personality meld is empty", role.slug),
        ),
        _ => {}
    }
    for (i, name) in meld.iter().enumerate() {
        if meld[..i].contains(name) {
            v(
                &role.path,
                "personality",
                format!("role {}: personality {name} is listed twice", role.slug),
            );
        }
        if !colors.contains_key(name.as_str()) && !external.contains(name) {
            v(
                &role.path,
                "personality",
                format!("role {}: personality {name} is not defined", role.slug),
            );
        }
        *usage.entry(name.as_str()).or_default() += 1;
    }
}

/// The core roster's rules: each personality in one to three roles, every derived favourite
/// colour legible and distinct.
fn check_core(
    personalities: &[PersonalityView],
    usage: &BTreeMap<&str, usize>,
    derived: &[(String, String, &RoleView)],
    v: &mut impl FnMut(&str, &str, String),
) {
    for p in personalities {
        let n = usage.get(p.name.as_str()).copied().unwrap_or(0);
        if n == 0 {
            v(
                &p.path,
                "",
                format!("personality {} is used by no core role", p.name),
            );
        } else if n > 3 {
            v(
                &p.path,
                "",
                format!(
                    "personality {} is used by {n} core roles, at most 3 allowed",
                    p.name
                ),
            );
        }
    }
    for (i, (slug, fav, role)) in derived.iter().enumerate() {
        if let Some(why) = color::illegible(fav) {
            v(
                &role.path,
                "personality",
                format!("role {slug}: derived favourite colour {why}"),
            );
        }
        if let Some((other, _, _)) = derived[..i].iter().find(|(_, f, _)| f == fav) {
            v(
                &role.path,
                "personality",
                format!(
                    "role {slug}: derived favourite colour {fav} is the same as role {other}'s"
                ),
            );
        }
    }
}

fn check_identity(rules: Rules, role: &RoleView, v: &mut impl FnMut(&str, &str, String)) {
    let seated: Vec<&(String, Identity)> =
        role.seats.iter().filter(|(_, id)| !id.is_empty()).collect();
    match &role.identity {
        Some(identity) => {
            if identity.name.is_none() || identity.pronouns.is_none() {
                v(
                    &role.path,
                    "identity",
                    format!("role {}: identity needs both name and pronouns", role.slug),
                );
            }
            if let Some((key, _)) = seated.first() {
                v(
                    &role.path,
                    "identity",
                    format!(
                        "role {}: role-level identity mixed with a per-seat identity on seat {key}; use one form",
                        role.slug
                    ),
                );
            }
        }
        None if rules == Rules::Core => v(
            &role.path,
            "identity",
            format!(
                "role {}: a core role declares one role-level identity (name and pronouns)",
                role.slug
            ),
        ),
        None => {
            for (key, id) in &role.seats {
                if id.name.is_none() || id.pronouns.is_none() {
                    v(
                        &role.path,
                        "seat",
                        format!(
                            "role {}: seat {key} carries no complete identity (name and pronouns) and the role has none",
                            role.slug
                        ),
                    );
                }
            }
            if let Some((first_key, first)) = role.seats.first()
                && let Some((key, _)) = role.seats.iter().find(|(_, id)| id != first)
            {
                v(
                    &role.path,
                    "seat",
                    format!(
                        "role {}: seats {first_key} and {key} name different identities; the identity must be the same on every seat",
                        role.slug
                    ),
                );
            }
            if role.seats.is_empty() {
                v(
                    &role.path,
                    "identity",
                    format!("role {}: no identity (role-level or on a seat)", role.slug),
                );
            }
        }
    }
    if rules == Rules::Core && role.seats.is_empty() {
        v(
            &role.path,
            "agent",
            format!(
                "role {}: a core role carries at least one harness seat",
                role.slug
            ),
        );
    }
}
