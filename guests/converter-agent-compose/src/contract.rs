//! agent-compose's person contract ("Roster package contract", "Favorite colors", "Agent seats") as
//! checks over roles and personalities, shared by the package reader, the snapshot reader and the
//! package writer. Every violation names the file and field.

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
    /// `model-tier` as declared; `None` when omitted (which supports all three tiers).
    pub tiers: Option<Vec<String>>,
    /// `(seat key or harness, tier)` for every seat naming a tier.
    pub seat_tiers: Vec<(String, String)>,
    /// The role skill, when its definition is part of what is checked (packages, not snapshots).
    pub skill: Option<RoleSkill>,
}

/// A role's `skill` id and its `SKILL.md` (path and text; no text: the package lacks it).
#[derive(Debug, Clone, Default)]
pub struct RoleSkill {
    pub id: String,
    pub path: String,
    pub text: Option<String>,
}

#[derive(Debug, Clone, Default)]
pub struct PersonalityView {
    pub name: String,
    pub path: String,
    pub color: Option<String>,
    /// The skill the personality binds and whether its definition is there; `None` when the
    /// caller checks definitions itself (or has none: a snapshot).
    pub binding: Option<Binding>,
}

/// A personality's catalog binding (`skill="personality-<name>"`) and its `SKILL.md`.
#[derive(Debug, Clone)]
pub struct Binding {
    pub skill: String,
    pub definition: Definition,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Definition {
    Missing,
    Empty,
    Present,
}

/// The canonical model tiers (the person contract, "Roster package contract": omitting
/// `model-tier` supports all three).
pub const TIERS: [&str; 3] = ["frontier", "commodity", "oss"];
/// Most words a role skill body may have after its leading title (the person contract, "Roster
/// package contract").
pub const ROLE_SKILL_MAX_WORDS: usize = 400;
/// Paragraphs a role skill body has at least after its leading title. The person contract
/// ("Roster package contract") says "three paragraphs"; agent-compose's own core roles have five or
/// six, so three is the floor.
pub const ROLE_SKILL_PARAGRAPHS: usize = 3;

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
    check_bindings(personalities, &mut v);
    let mut usage: BTreeMap<&str, usize> = BTreeMap::new();
    let mut derived: Vec<(String, String, &RoleView)> = Vec::new();
    for role in roles {
        check_meld(rules, role, &colors, external, &mut usage, &mut v);
        check_identity(rules, role, &mut v);
        check_tiers(rules, role, &mut v);
        if let Some(skill) = &role.skill {
            check_role_skill(&role.slug, &role.path, skill, &mut v);
        }
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

/// Every personality binds `personality-<name>`, whose definition is there and not empty.
fn check_bindings(personalities: &[PersonalityView], v: &mut impl FnMut(&str, &str, String)) {
    for p in personalities {
        let Some(binding) = &p.binding else { continue };
        let canonical = format!("personality-{}", p.name);
        if binding.skill != canonical {
            v(
                &p.path,
                "skill",
                format!(
                    "personality {} binds skill `{}`; a personality binds its stable id `{canonical}`",
                    p.name, binding.skill
                ),
            );
        }
        match binding.definition {
            Definition::Missing => v(
                &p.path,
                "skill",
                format!(
                    "personality {}: its binding `{}` has no SKILL.md in the package (every binding needs its definition)",
                    p.name, binding.skill
                ),
            ),
            Definition::Empty => v(
                &p.path,
                "skill",
                format!(
                    "personality {}: the SKILL.md of `{}` has an empty body",
                    p.name, binding.skill
                ),
            ),
            Definition::Present => {}
        }
    }
}

/// Model tiers: canonical, not repeated, declared by core roles; every seat's tier is one the
/// role supports.
fn check_tiers(rules: Rules, role: &RoleView, v: &mut impl FnMut(&str, &str, String)) {
    let canonical = TIERS.join(", ");
    match &role.tiers {
        None if rules == Rules::Core => v(
            &role.path,
            "model-tier",
            format!(
                "role {}: a core role declares its model tiers explicitly (`model-tier` with some of {canonical})",
                role.slug
            ),
        ),
        None => {}
        Some(tiers) if tiers.is_empty() => v(
            &role.path,
            "model-tier",
            format!("role {}: `model-tier` lists no tier", role.slug),
        ),
        Some(tiers) => {
            for (i, t) in tiers.iter().enumerate() {
                if !TIERS.contains(&t.as_str()) {
                    v(
                        &role.path,
                        "model-tier",
                        format!(
                            "role {}: model tier `{t}` is not canonical ({canonical})",
                            role.slug
                        ),
                    );
                } else if tiers[..i].contains(t) {
                    v(
                        &role.path,
                        "model-tier",
                        format!("role {}: model tier `{t}` is listed twice", role.slug),
                    );
                }
            }
        }
    }
    let supported: Vec<&str> = match &role.tiers {
        Some(t) => t.iter().map(String::as_str).collect(),
        None => TIERS.to_vec(),
    };
    for (seat, tier) in &role.seat_tiers {
        if !TIERS.contains(&tier.as_str()) {
            v(
                &role.path,
                "tier",
                format!(
                    "role {}: seat {seat} has tier `{tier}`, which is not canonical ({canonical})",
                    role.slug
                ),
            );
        } else if !supported.contains(&tier.as_str()) {
            v(
                &role.path,
                "tier",
                format!(
                    "role {}: seat {seat} has tier `{tier}`, which the role does not support (model-tier {})",
                    role.slug,
                    supported.join(", ")
                ),
            );
        }
    }
}

/// The role skill's shape: frontmatter naming it with a description, then a body of (at least)
/// three paragraphs and at most 400 words after its leading title.
fn check_role_skill(
    slug: &str,
    role_path: &str,
    skill: &RoleSkill,
    v: &mut impl FnMut(&str, &str, String),
) {
    let Some(text) = &skill.text else {
        v(
            role_path,
            "skill",
            format!(
                "role {slug}: role skill `{}` has no SKILL.md in the package",
                skill.id
            ),
        );
        return;
    };
    let fm = convert_kit::frontmatter::parse(text);
    if fm.mode != convert_kit::ParseMode::Strict {
        v(
            &skill.path,
            "",
            format!("role {slug}: SKILL.md needs valid YAML frontmatter (name, description)"),
        );
    } else {
        let field = |k: &str| fm.fields.get(k).and_then(|x| x.as_str()).unwrap_or("");
        if field("name") != skill.id {
            v(
                &skill.path,
                "name",
                format!(
                    "role {slug}: SKILL.md is named `{}`, but the role's skill is `{}`",
                    field("name"),
                    skill.id
                ),
            );
        }
        if field("description").trim().is_empty() {
            v(
                &skill.path,
                "description",
                format!("role {slug}: SKILL.md has no description"),
            );
        }
    }
    let (paragraphs, words) = shape(&fm.body);
    if paragraphs < ROLE_SKILL_PARAGRAPHS {
        v(
            &skill.path,
            "body",
            format!(
                "role {slug}: the role skill has {paragraphs} paragraph(s) after its title; a role skill has at least {ROLE_SKILL_PARAGRAPHS}"
            ),
        );
    }
    if words > ROLE_SKILL_MAX_WORDS {
        v(
            &skill.path,
            "body",
            format!(
                "role {slug}: the role skill has {words} words after its title; at most {ROLE_SKILL_MAX_WORDS}"
            ),
        );
    }
}

/// `(paragraphs, words)` of a Markdown body after its leading `#` title: paragraphs are blocks
/// separated by blank lines.
pub fn shape(body: &str) -> (usize, usize) {
    let mut lines = body.lines().skip_while(|l| l.trim().is_empty()).peekable();
    if lines
        .peek()
        .is_some_and(|l| l.trim_start().starts_with("# "))
    {
        lines.next();
    }
    let (mut paragraphs, mut words, mut in_paragraph) = (0, 0, false);
    for line in lines {
        if line.trim().is_empty() {
            in_paragraph = false;
            continue;
        }
        if !in_paragraph {
            paragraphs += 1;
            in_paragraph = true;
        }
        words += line.split_whitespace().count();
    }
    (paragraphs, words)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn role(tiers: Option<&[&str]>, seats: &[(&str, &str)]) -> RoleView {
        RoleView {
            slug: "desk".into(),
            path: "roles/01-desk.kdl".into(),
            personalities: vec!["calm".into()],
            identity: Some(Identity {
                name: Some("Desk".into()),
                pronouns: Some("they".into()),
            }),
            seats: seats
                .iter()
                .map(|(k, _)| (k.to_string(), Identity::default()))
                .collect(),
            tiers: tiers.map(|t| t.iter().map(|s| s.to_string()).collect()),
            seat_tiers: seats
                .iter()
                .map(|(k, t)| (k.to_string(), t.to_string()))
                .collect(),
            ..RoleView::default()
        }
    }

    fn calm(binding: Option<(&str, Definition)>) -> PersonalityView {
        PersonalityView {
            name: "calm".into(),
            path: "personalities/01-calm.kdl".into(),
            color: Some("#5fa87a".into()),
            binding: binding.map(|(skill, definition)| Binding {
                skill: skill.into(),
                definition,
            }),
        }
    }

    fn messages(rules: Rules, roles: &[RoleView], p: PersonalityView) -> String {
        check(rules, roles, &[p], &[])
            .iter()
            .map(|v| format!("[{} {}] {}", v.path, v.field, v.message))
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn tiers_are_canonical_declared_by_core_roles_and_bound_seats() {
        let ok = messages(
            Rules::External,
            &[role(None, &[("chat", "oss")])],
            calm(None),
        );
        assert!(!ok.contains("tier"), "{ok}");
        let core = messages(
            Rules::Core,
            &[role(None, &[("claude", "frontier")])],
            calm(None),
        );
        assert!(
            core.contains("model-tier] role desk: a core role declares"),
            "{core}"
        );
        let bad = messages(
            Rules::External,
            &[role(
                Some(&["frontier", "premium", "frontier"]),
                &[("chat", "oss"), ("x", "gold")],
            )],
            calm(None),
        );
        for needle in [
            "`premium` is not canonical",
            "`frontier` is listed twice",
            "seat chat has tier `oss`, which the role does not support",
            "seat x has tier `gold`, which is not canonical",
        ] {
            assert!(bad.contains(needle), "{needle} not in {bad}");
        }
    }

    #[test]
    fn a_personality_binding_needs_its_canonical_id_and_definition() {
        let roles = [role(None, &[])];
        let m = |b| messages(Rules::External, &roles, calm(Some(b)));
        assert!(!m(("personality-calm", Definition::Present)).contains("skill]"));
        assert!(m(("calm-skill", Definition::Present)).contains("binds skill `calm-skill`"));
        assert!(m(("personality-calm", Definition::Missing)).contains("has no SKILL.md"));
        assert!(m(("personality-calm", Definition::Empty)).contains("empty body"));
    }

    #[test]
    fn role_skill_shape() {
        let para = "word ".repeat(20);
        let three = format!("# Desk\n\n{para}\n\n{para}\n\n{para}\n");
        assert_eq!(shape(&three), (3, 60));
        assert_eq!(shape("no title\n\nsecond\n"), (2, 3));
        let skill = |name: &str, body: &str| RoleSkill {
            id: "role-desk".into(),
            path: "roles/desk/SKILL.md".into(),
            text: Some(format!("---\nname: {name}\ndescription: d\n---\n{body}")),
        };
        let with = |s: RoleSkill| {
            let mut r = role(None, &[]);
            r.skill = Some(s);
            messages(Rules::External, &[r], calm(None))
        };
        assert_eq!(with(skill("role-desk", &three)), "");
        let long = format!("{para}\n\n{para}\n\n{}\n", "word ".repeat(400));
        let errs = with(skill("other", &format!("{para}\n")));
        assert!(errs.contains("[roles/desk/SKILL.md name]"), "{errs}");
        assert!(errs.contains("1 paragraph(s)"), "{errs}");
        assert!(with(skill("role-desk", &long)).contains("440 words"));
        let missing = with(RoleSkill {
            text: None,
            ..skill("role-desk", "")
        });
        assert!(missing.contains("[roles/01-desk.kdl skill]"), "{missing}");
    }
}
