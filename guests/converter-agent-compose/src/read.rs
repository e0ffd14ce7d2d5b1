//! agent-compose person package -> persona pack (formats.md §6.3). Each role becomes a persona
//! (slug -> name, display name, purpose -> description, role skill body -> persona body,
//! personality and boundary SKILL.md trees -> pack skills named by the persona); everything with
//! no persona slot (identity, seats, tiers, colours, emblems, adjacents, ...) is carried whole in
//! the manifest block `x-agent-compose`, keyed by persona, and read back by the writer.

use std::path::Path;

use convert_kit::slug::{self, Rules};
use convert_kit::{Map, Pack, Persona, Report, Skill, Value, frontmatter, json};

use crate::contract::{self, Rules as Contract};
use crate::node::Node;
use crate::package::{self, Entry, Kind, Package};
use crate::{EXT, color, view};

pub fn convert(input: &Path, output: &Path) -> Result<Report, String> {
    let package = package::read(input)?;
    let (pack, report) = to_pack(&package)?;
    pack.write(output)?;
    Ok(report)
}

/// Checks the contract on the package as read; a broken package is refused, not converted.
fn check(package: &Package) -> Result<Vec<String>, String> {
    let rules = match package.kind {
        Kind::Roster => Contract::Core,
        Kind::Person => Contract::External,
    };
    // An external package may name personalities of an admitted library it does not contain.
    let external: Vec<String> = if rules == Contract::External {
        package
            .roles
            .iter()
            .flat_map(|r| view::meld(&r.node))
            .filter(|m| package.personality(m).is_none())
            .collect()
    } else {
        Vec::new()
    };
    let roles: Vec<_> = package
        .roles
        .iter()
        .map(|r| {
            let mut v = view::role_view(&r.node, &r.file, None);
            v.skill = r.node.child_arg("skill").map(|id| {
                let found = package.skill(id);
                contract::RoleSkill {
                    id: id.to_string(),
                    path: found.map_or_else(String::new, |s| format!("{}/SKILL.md", s.dir)),
                    text: found.map(|s| s.text().to_string()),
                }
            });
            v
        })
        .collect();
    let personalities: Vec<_> = package
        .personalities
        .iter()
        .map(|p| {
            let mut v = view::personality_view(&p.node, &p.file);
            let skill = view::bound_skill(&p.node);
            let definition = match package.skill(&skill) {
                None => contract::Definition::Missing,
                Some(s) if frontmatter::parse(s.text()).body.trim().is_empty() => {
                    contract::Definition::Empty
                }
                Some(_) => contract::Definition::Present,
            };
            v.binding = Some(contract::Binding { skill, definition });
            v
        })
        .collect();
    let mut violations = contract::check(rules, &roles, &personalities, &external);
    // An extra definition: a personality SKILL.md no personality binds.
    for skill in &package.skills {
        let bound = package
            .personalities
            .iter()
            .any(|p| view::bound_skill(&p.node) == skill.id);
        let library = external
            .iter()
            .any(|e| skill.id == format!("personality-{e}"));
        if skill.id.starts_with("personality-") && !bound && !library {
            violations.push(contract::Violation {
                path: format!("{}/SKILL.md", skill.dir),
                field: "name".into(),
                message: format!(
                    "definition `{}` is bound by no personality of the package (an extra definition)",
                    skill.id
                ),
            });
        }
    }
    if !violations.is_empty() {
        return Err(view::refusal(
            &format!("{} {}", package.kind.as_str(), package.name),
            &violations,
        ));
    }
    let mut external = external;
    external.dedup();
    Ok(external)
}

fn entry_json(entry: &Entry) -> Value {
    json!({ "file": entry.file, "node": entry.node.to_json() })
}

pub fn to_pack(package: &Package) -> Result<(Pack, Report), String> {
    if package.roles.is_empty() {
        return Err(format!(
            "{} {} has no roles; a persona pack needs at least one persona",
            package.kind.as_str(),
            package.name
        ));
    }
    let external = check(package)?;
    let mut report = Report::default();
    let id = format!("agent-compose.{}.{}", package.kind.as_str(), package.name);
    let mut pack = Pack::new(&id, &package.name, "0.0.0");
    report.synthesised(
        "default-applied",
        ".plugin/plugin.json",
        "id",
        format!("a package has no pack id; `{id}` made from its kind and name"),
    );
    report.synthesised(
        "default-applied",
        ".plugin/plugin.json",
        "version",
        "a package has no version; 0.0.0 written",
    );

    let mut role_skill_ids = Vec::new();
    let mut ext_personas = Map::new();
    for role in &package.roles {
        let slug = role.slug().to_string();
        let name = match slug::normalise(&slug, Rules::Persona) {
            Some(n) => n,
            None => return Err(format!("{}: role `{slug}` has no usable name", role.file)),
        };
        if name != slug {
            report.normalised(
                "name-normalised",
                &role.file,
                "role",
                format!("{slug} -> {name}"),
            );
        }
        if pack.personas.iter().any(|p| p.name() == name) {
            return Err(format!("{}: two roles become persona `{name}`", role.file));
        }
        let (persona, extra) =
            role_persona(package, role, &name, &mut report, &mut role_skill_ids)?;
        pack.personas.push(persona);
        ext_personas.insert(name, extra);
    }
    pack_skills(package, &role_skill_ids, &mut pack, &mut report)?;

    let mut ext = Map::new();
    ext.insert("source".into(), "package".into());
    ext.insert("kind".into(), package.kind.as_str().into());
    ext.insert("name".into(), package.name.clone().into());
    ext.insert("personas".into(), Value::Object(ext_personas));
    carry_entries(package, &mut ext, &mut report);
    carry_rest(package, &external, &mut pack, &mut ext, &mut report);
    pack.manifest.insert(EXT.into(), Value::Object(ext));
    Ok((pack, report))
}

/// Personality, boundary and method SKILL.md trees become pack skills; role skills do not
/// (their body is the persona body).
fn pack_skills(
    package: &Package,
    role_skill_ids: &[String],
    pack: &mut Pack,
    report: &mut Report,
) -> Result<(), String> {
    for skill in &package.skills {
        if role_skill_ids.contains(&skill.id) {
            continue;
        }
        let dir = slug::normalise(&skill.id, Rules::Skill)
            .ok_or_else(|| format!("{}: skill `{}` has no usable name", skill.dir, skill.id))?;
        if dir != skill.id {
            report.normalised(
                "name-normalised",
                &format!("{}/SKILL.md", skill.dir),
                "name",
                format!("skill directory {} -> {dir}", skill.id),
            );
        }
        let claimed = pack.personas.iter().any(|p| {
            p.fields
                .get("skills")
                .and_then(Value::as_array)
                .is_some_and(|s| {
                    s.iter()
                        .any(|v| v.as_str() == Some(&format!("./skills/{dir}/")))
                })
        });
        if !claimed {
            report.reinterpreted(
                "skill-shared",
                &format!("{}/SKILL.md", skill.dir),
                "",
                format!(
                    "skill {} is bound by no role; in a persona pack an unclaimed skill reaches every persona",
                    skill.id
                ),
            );
        }
        pack.skills.push(Skill {
            name: dir,
            description: String::new(),
            files: skill.files.clone(),
        });
    }
    Ok(())
}

/// Personalities, boundaries and inspirations: no persona pack slot, kept as nodes.
fn carry_entries(package: &Package, ext: &mut Map<String, Value>, report: &mut Report) {
    for (key, list) in [
        ("personalities", &package.personalities),
        ("boundaries", &package.boundaries),
    ] {
        let map: Map<String, Value> = list
            .iter()
            .map(|e| (e.slug().to_string(), entry_json(e)))
            .collect();
        for e in list.iter() {
            report.normalised(
                "carried-in-extension",
                &e.file,
                "",
                format!(
                    "{} {} (colour, motif, emblem, form, sound mark, ... ) has no persona pack slot; kept in {EXT}.{key}",
                    e.node.name,
                    e.slug()
                ),
            );
        }
        ext.insert(key.into(), Value::Object(map));
    }
    ext.insert(
        "inspirations".into(),
        Value::Array(package.inspirations.iter().map(entry_json).collect()),
    );
    for e in &package.inspirations {
        report.normalised(
            "carried-in-extension",
            &e.file,
            "",
            format!("inspiration {} kept in {EXT}.inspirations", e.slug()),
        );
    }
}

/// External personalities, the invariant (as the pack instructions) and other files.
fn carry_rest(
    package: &Package,
    external: &[String],
    pack: &mut Pack,
    ext: &mut Map<String, Value>,
    report: &mut Report,
) {
    if !external.is_empty() {
        for name in external {
            report.reinterpreted(
                "personality-external",
                "",
                "personality",
                format!(
                    "personality {name} is defined in a personality library outside this package; kept as a reference without a skill"
                ),
            );
        }
        ext.insert("external_personalities".into(), json!(external));
    }
    if let Some((path, text)) = &package.invariant {
        pack.instructions = Some(text.clone());
        ext.insert("invariant_file".into(), path.clone().into());
        report.reinterpreted(
            "invariant-as-instructions",
            path,
            "",
            "the personality invariant becomes the pack instructions (given to every persona)",
        );
    }
    if !package.extra_files.is_empty() {
        let files: Map<String, Value> = package
            .extra_files
            .iter()
            .map(|(p, t)| (p.clone(), t.clone().into()))
            .collect();
        for (path, _) in &package.extra_files {
            report.normalised(
                "carried-in-extension",
                path,
                "",
                format!("{path} is not part of the person model; kept verbatim in {EXT}.files"),
            );
        }
        ext.insert("files".into(), Value::Object(files));
    }
}

/// One role as a persona, plus its extension entry.
fn role_persona(
    package: &Package,
    role: &Entry,
    name: &str,
    report: &mut Report,
    role_skill_ids: &mut Vec<String>,
) -> Result<(Persona, Value), String> {
    let node = &role.node;
    let file = format!("agents/{name}.persona.md");
    let mut fields = Map::new();
    let mut extra = Map::new();
    fields.insert("name".into(), name.into());
    let display = display_name(role, &file, report);
    fields.insert("display_name".into(), display.into());
    let purpose = match node.child_arg("purpose") {
        Some(p) => p.to_string(),
        None => {
            report.synthesised(
                "default-applied",
                &file,
                "description",
                format!(
                    "role {} has no purpose; description made from its slug",
                    role.slug()
                ),
            );
            format!("The {} role.", role.slug())
        }
    };
    fields.insert("description".into(), purpose.into());
    let mut body = briefing(package, role, &file, &mut extra, report, role_skill_ids);
    let skills = persona_skills(package, node);
    if !skills.is_empty() {
        fields.insert("skills".into(), Value::Array(skills));
    }

    let colors: Option<Vec<&str>> = view::meld(node)
        .iter()
        .map(|m| {
            package
                .personality(m)
                .and_then(|p| p.node.str_prop("color"))
        })
        .collect();
    if let Some(fav) = colors.and_then(|c| color::favorite(&c)) {
        report.synthesised(
            "favorite-color-derived",
            &role.file,
            "favorite_color",
            format!(
                "a package stores no favourite colour; {fav} derived from the meld (OKLab centroid, chroma restored, lightness clamped) and kept in {EXT}.personas.{name}.favorite_color"
            ),
        );
        extra.insert("favorite_color".into(), fav.into());
    }
    let card = identity_card(package, node, s_of(&extra, "favorite_color"));
    if !card.is_empty() {
        let appended = view::append_card(&mut body, card);
        report.reinterpreted(
            "personalities-in-body",
            &role.file,
            "personality",
            format!(
                "role {}: its personalities (name, skill, colour) and favourite colour are appended to the persona body, so the agent is told them; the way back removes them",
                role.slug()
            ),
        );
        extra.insert("body_suffix".into(), appended.into());
    }
    extra.insert("file".into(), role.file.clone().into());
    extra.insert("node".into(), node.to_json());
    report.normalised(
        "carried-in-extension",
        &role.file,
        "",
        format!(
            "role {}: identity, seats, model tiers, meld, boundaries, adjacents and the rest of the node have no persona slot; kept in {EXT}.personas.{name}",
            role.slug()
        ),
    );

    let persona = Persona {
        file,
        fields,
        body,
        mode: convert_kit::ParseMode::Strict,
    };
    Ok((persona, Value::Object(extra)))
}

fn s_of<'a>(map: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    map.get(key).and_then(Value::as_str)
}

/// Each meld member's (name, skill, colour) from the package; a library personality's colour is
/// not in it.
fn identity_card(package: &Package, role: &Node, favorite: Option<&str>) -> String {
    let members: Vec<view::Member> = view::meld(role)
        .into_iter()
        .map(|name| match package.personality(&name) {
            Some(p) => view::Member {
                skill: view::bound_skill(&p.node),
                color: p.node.str_prop("color").map(str::to_string),
                name,
            },
            None => view::Member {
                skill: format!("personality-{name}"),
                color: None,
                name,
            },
        })
        .collect();
    view::identity_card(&members, favorite)
}

/// The role's display name: its `display-name`, else its identity's name, else its slug.
fn display_name(role: &Entry, file: &str, report: &mut Report) -> String {
    let node = &role.node;
    node.child_arg("display-name")
        .map(str::to_string)
        .or_else(|| {
            let n = view::identity_name(node)?;
            report.reinterpreted(
                "identity-as-display-name",
                &role.file,
                "identity.name",
                format!(
                    "role {} has no display-name; its identity name `{n}` is the display name",
                    role.slug()
                ),
            );
            Some(n)
        })
        .unwrap_or_else(|| {
            report.synthesised(
                "default-applied",
                file,
                "display_name",
                format!(
                    "role {} has no display-name or identity; its slug is the display name",
                    role.slug()
                ),
            );
            role.slug().to_string()
        })
}

/// The persona body is the role briefing: the role SKILL.md body (its frontmatter and other
/// files kept in `extra`), or a `briefing` node.
fn briefing(
    package: &Package,
    role: &Entry,
    file: &str,
    extra: &mut Map<String, Value>,
    report: &mut Report,
    role_skill_ids: &mut Vec<String>,
) -> String {
    let node = &role.node;
    if let Some(text) = node.child_arg("briefing") {
        return text.to_string();
    }
    let Some(id) = node.child_arg("skill") else {
        report.synthesised(
            "default-applied",
            file,
            "body",
            format!(
                "role {} has no role skill or briefing; the persona body is empty",
                role.slug()
            ),
        );
        return String::new();
    };
    let Some(skill) = package.skill(id) else {
        report.lost(
            "missing-file",
            &role.file,
            "skill",
            format!("role skill {id} has no SKILL.md in the package; the persona body is empty"),
        );
        return String::new();
    };
    role_skill_ids.push(id.to_string());
    let fm = frontmatter::parse(skill.text());
    extra.insert("skill_dir".into(), skill.dir.clone().into());
    extra.insert("skill_frontmatter".into(), Value::Object(fm.fields));
    if skill.files.len() > 1 {
        let files: Map<String, Value> = skill
            .files
            .iter()
            .filter(|(p, _)| p != "SKILL.md")
            .map(|(p, b)| (p.clone(), String::from_utf8_lossy(b).into_owned().into()))
            .collect();
        extra.insert("skill_files".into(), Value::Object(files));
    }
    fm.body
}

/// Skills the persona names: its meld's personality skills, its boundaries', its methods.
fn persona_skills(package: &Package, node: &Node) -> Vec<Value> {
    let mut skills = Vec::new();
    let mut add = |id: String| {
        if let Some(dir) = slug::normalise(&id, Rules::Skill)
            && package.skill(&id).is_some()
        {
            let entry = Value::from(format!("./skills/{dir}/"));
            if !skills.contains(&entry) {
                skills.push(entry);
            }
        }
    };
    for member in view::meld(node) {
        if let Some(p) = package.personality(&member) {
            add(view::bound_skill(&p.node));
        }
    }
    for b in view::role_boundaries(node) {
        if let Some(entry) = package.boundaries.iter().find(|e| e.slug() == b) {
            add(view::bound_skill(&entry.node));
        }
    }
    for m in view::methods(node) {
        add(m);
    }
    skills
}
