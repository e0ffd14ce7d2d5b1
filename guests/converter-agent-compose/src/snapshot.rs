//! `person.json` v3 snapshot -> persona pack (input only). Roles in `role_order` become personas
//! (display_name, purpose -> description, briefing -> body); a snapshot has no personality skill
//! bodies, so each bound personality skill is a stub (reported). Every other field, the role's
//! `favorite_color` included, is carried verbatim in `x-agent-compose`.

use std::path::Path;

use convert_kit::slug::{self, Rules};
use convert_kit::{Map, Pack, Persona, Report, Skill, Value, frontmatter, tree};

use crate::contract::{self, Identity, PersonalityView, RoleView, Rules as Contract};
use crate::{EXT, view};

pub const FILE: &str = "person.json";
pub const PREFIX: &str = "agent-compose.person-snapshot.";
pub const V3: &str = "agent-compose.person-snapshot.v3";

/// The snapshot's format marker, when `person.json` is one.
pub fn marker(root: &Path) -> Option<String> {
    let value = tree::read_json(root, FILE).ok()?;
    let format = value.get("format")?.as_str()?;
    format.starts_with(PREFIX).then(|| format.to_string())
}

fn s<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

fn strings(v: &Value, key: &str) -> Vec<String> {
    v.get(key)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

fn identity(v: Option<&Value>) -> Identity {
    Identity {
        name: v.and_then(|v| s(v, "name")).map(str::to_string),
        pronouns: v.and_then(|v| s(v, "pronouns")).map(str::to_string),
    }
}

pub fn convert(input: &Path, output: &Path) -> Result<Report, String> {
    let snap = tree::read_json(input, FILE)?;
    let format = s(&snap, "format").unwrap_or_default();
    if format != V3 || snap.get("schema_version").and_then(Value::as_i64) != Some(3) {
        return Err(format!(
            "{FILE}: format `{format}` (schema_version {}) is not read; only {V3} with schema_version 3 is (v4 drops role_order)",
            snap.get("schema_version")
                .map(Value::to_string)
                .unwrap_or_else(|| "missing".into())
        ));
    }
    let person = s(&snap, "person")
        .filter(|p| !p.is_empty())
        .ok_or_else(|| format!("{FILE}: no `person` name"))?
        .to_string();
    let roles = snap
        .get("roles")
        .and_then(Value::as_object)
        .ok_or_else(|| format!("{FILE}: no `roles` object"))?;
    let order = strings(&snap, "role_order");
    if order.is_empty() {
        return Err(format!("{FILE}: `role_order` is empty or missing"));
    }
    let empty = Map::new();
    let personalities = snap
        .get("personalities")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let rules = if person == "core" {
        Contract::Core
    } else {
        Contract::External
    };
    check(rules, &person, &order, roles, personalities)?;

    let mut report = Report::default();
    let mut pack = Pack::new(&format!("agent-compose.person.{person}"), &person, "0.0.0");
    report.synthesised(
        "default-applied",
        ".plugin/plugin.json",
        "id",
        "a snapshot has no pack id; made from the person name",
    );
    report.synthesised(
        "default-applied",
        ".plugin/plugin.json",
        "version",
        "a snapshot has no version; 0.0.0 written",
    );
    let mut ext_personas = Map::new();
    for slug in &order {
        let (name, rest) = persona(
            &mut pack,
            slug,
            &roles[slug.as_str()],
            personalities,
            &mut report,
        )?;
        ext_personas.insert(name, Value::Object(rest));
    }
    for slug in roles.keys().filter(|k| !order.contains(k)) {
        report.lost(
            "field-unsupported",
            FILE,
            &format!("roles.{slug}"),
            format!("role {slug} is not in role_order; not converted"),
        );
    }
    let ext = extension(
        &snap,
        rules,
        &person,
        ext_personas,
        personalities,
        &mut report,
    );
    pack.manifest.insert(EXT.into(), Value::Object(ext));
    pack.write(output)?;
    Ok(report)
}

/// The contract, on the snapshot as written.
fn check(
    rules: Contract,
    person: &str,
    order: &[String],
    roles: &Map<String, Value>,
    personalities: &Map<String, Value>,
) -> Result<(), String> {
    let mut views = Vec::new();
    for slug in order {
        let role = roles
            .get(slug)
            .filter(|r| r.is_object())
            .ok_or_else(|| format!("{FILE}: role_order names `{slug}`, which `roles` lacks"))?;
        views.push(role_view(slug, role));
    }
    let pviews: Vec<PersonalityView> = personalities
        .iter()
        .map(|(name, p)| PersonalityView {
            name: name.clone(),
            path: format!("{FILE}#personalities.{name}"),
            color: s(p, "color").map(str::to_string),
            binding: None,
        })
        .collect();
    let violations = contract::check(rules, &views, &pviews, &[]);
    if !violations.is_empty() {
        return Err(view::refusal(&format!("snapshot of {person}"), &violations));
    }
    Ok(())
}

fn role_view(slug: &str, role: &Value) -> RoleView {
    let id = role.get("identity").map(|i| identity(Some(i)));
    let seats = role
        .get("seats")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|seat| {
                    let key = s(seat, "key").or(s(seat, "harness")).unwrap_or_default();
                    let sid = identity(Some(seat));
                    // A seat repeating the role identity is the role-stable form, not a mix.
                    let sid = if id.as_ref() == Some(&sid) {
                        Identity::default()
                    } else {
                        sid
                    };
                    (key.to_string(), sid)
                })
                .collect()
        })
        .unwrap_or_default();
    RoleView {
        slug: slug.to_string(),
        path: format!("{FILE}#roles.{slug}"),
        personalities: strings(role, "personalities"),
        identity: id,
        seats,
        favorite: s(role, "favorite_color").map(str::to_string),
        // Tiers are an optional v3 field: absent means all three, whatever the roster.
        tiers: Some(match role.get("supported_model_tiers") {
            Some(_) => strings(role, "supported_model_tiers"),
            None => contract::TIERS.iter().map(|t| t.to_string()).collect(),
        }),
        seat_tiers: role
            .get("seats")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|seat| {
                let key = s(seat, "key").or(s(seat, "harness")).unwrap_or_default();
                Some((key.to_string(), s(seat, "tier")?.to_string()))
            })
            .collect(),
        skill: None,
    }
}

/// One role in `role_order` -> one persona (with stubs for its personality skills). Returns the
/// persona name and the rest of the role, for the extension.
fn persona(
    pack: &mut Pack,
    slug: &String,
    role: &Value,
    personalities: &Map<String, Value>,
    report: &mut Report,
) -> Result<(String, Map<String, Value>), String> {
    let name = slug::normalise(slug, Rules::Persona)
        .ok_or_else(|| format!("{FILE}: role `{slug}` has no usable name"))?;
    if &name != slug {
        report.normalised(
            "name-normalised",
            FILE,
            &format!("roles.{slug}"),
            format!("{slug} -> {name}"),
        );
    }
    if pack.personas.iter().any(|p| p.name() == name) {
        return Err(format!("{FILE}: two roles become persona `{name}`"));
    }
    let file = format!("agents/{name}.persona.md");
    let mut fields = Map::new();
    fields.insert("name".into(), name.clone().into());
    let display = match s(role, "display_name").filter(|d| !d.is_empty()) {
        Some(d) => d.to_string(),
        None => {
            report.synthesised(
                "default-applied",
                &file,
                "display_name",
                format!("role {slug} has no display_name; the slug is used"),
            );
            slug.clone()
        }
    };
    fields.insert("display_name".into(), display.into());
    let purpose = match s(role, "purpose").filter(|d| !d.is_empty()) {
        Some(p) => p.to_string(),
        None => {
            report.synthesised(
                "default-applied",
                &file,
                "description",
                format!("role {slug} has no purpose; description made from the slug"),
            );
            format!("The {slug} role.")
        }
    };
    fields.insert("description".into(), purpose.into());
    let skills = personality_skills(pack, role, personalities, report);
    if !skills.is_empty() {
        fields.insert("skills".into(), Value::Array(skills));
    }
    let mut body = s(role, "briefing").unwrap_or_default().to_string();
    let members: Vec<view::Member> = strings(role, "personalities")
        .into_iter()
        .map(|m| {
            let p = personalities.get(&m);
            view::Member {
                skill: p
                    .and_then(|p| s(p, "skill"))
                    .map_or_else(|| format!("personality-{m}"), str::to_string),
                color: p.and_then(|p| s(p, "color")).map(str::to_string),
                name: m,
            }
        })
        .collect();
    let card = view::identity_card(&members, s(role, "favorite_color"));
    let appended = (!card.is_empty()).then(|| view::append_card(&mut body, card));
    if appended.is_some() {
        report.reinterpreted(
            "personalities-in-body",
            FILE,
            &format!("roles.{slug}"),
            format!("role {slug}: its personalities (name, skill, colour) and favourite colour are appended to the persona body, so the agent is told them; the way back removes them"),
        );
    }
    pack.personas.push(Persona {
        file,
        fields,
        body,
        mode: convert_kit::ParseMode::Strict,
    });
    let mut rest = role.as_object().cloned().unwrap_or_default();
    for key in ["display_name", "purpose", "briefing"] {
        rest.remove(key);
    }
    if let Some(appended) = appended {
        rest.insert("body_suffix".into(), appended.into());
    }
    report.normalised(
        "carried-in-extension",
        FILE,
        &format!("roles.{slug}"),
        format!("identity, seats, meld, favorite_color, tiers, boundaries and the rest of role {slug} kept in {EXT}.personas.{name}"),
    );
    Ok((name, rest))
}

/// The role's personality skills, as the persona's `skills`; each one a stub in the pack, once.
fn personality_skills(
    pack: &mut Pack,
    role: &Value,
    personalities: &Map<String, Value>,
    report: &mut Report,
) -> Vec<Value> {
    let mut skills = Vec::new();
    for member in strings(role, "personalities") {
        let Some(p) = personalities.get(&member) else {
            continue;
        };
        let id = s(p, "skill")
            .map(str::to_string)
            .unwrap_or_else(|| format!("personality-{member}"));
        let Some(dir) = slug::normalise(&id, Rules::Skill) else {
            continue;
        };
        skills.push(Value::from(format!("./skills/{dir}/")));
        if !pack.skills.iter().any(|k| k.name == dir) {
            pack.skills.push(stub_skill(&dir, &member, p));
            report.synthesised(
                "skill-body-missing",
                &format!("skills/{dir}/SKILL.md"),
                "",
                format!("a snapshot carries no personality skill bodies; {dir} is a stub naming its colour and motif"),
            );
        }
    }
    skills
}

/// The `x-agent-compose` block: the roles and personalities as written, the rest of the snapshot.
fn extension(
    snap: &Value,
    rules: Contract,
    person: &str,
    ext_personas: Map<String, Value>,
    personalities: &Map<String, Value>,
    report: &mut Report,
) -> Map<String, Value> {
    let mut ext = Map::new();
    ext.insert("source".into(), "snapshot".into());
    ext.insert(
        "kind".into(),
        if rules == Contract::Core {
            "roster"
        } else {
            "person"
        }
        .into(),
    );
    ext.insert("name".into(), person.into());
    ext.insert("personas".into(), Value::Object(ext_personas));
    ext.insert("personalities".into(), Value::Object(personalities.clone()));
    let mut rest = snap.as_object().cloned().unwrap_or_default();
    for key in ["roles", "personalities", "role_order", "person"] {
        rest.remove(key);
    }
    if !rest.is_empty() {
        report.normalised(
            "carried-in-extension",
            FILE,
            "",
            format!("{} (format, source, boundaries, expressions, inspirations, ...) kept in {EXT}.snapshot", rest.keys().cloned().collect::<Vec<_>>().join(", ")),
        );
        ext.insert("snapshot".into(), Value::Object(rest));
    }
    ext
}

fn stub_skill(dir: &str, member: &str, p: &Value) -> Skill {
    let description = format!(
        "The {member} personality (colour {}, motif {}). Body not carried by the snapshot.",
        s(p, "color").unwrap_or("unknown"),
        s(p, "motif").unwrap_or("unknown")
    );
    let mut fields = Map::new();
    fields.insert("name".into(), dir.into());
    fields.insert("description".into(), description.clone().into());
    let text = frontmatter::render(&fields, "");
    Skill {
        name: dir.to_string(),
        description,
        files: vec![("SKILL.md".into(), text.into_bytes())],
    }
}
