//! Persona pack -> agent-compose person package (KDL v2 + SKILL.md tree), formats.md §6.3.
//!
//! A pack that came from agent-compose carries its roles and personalities in the manifest block
//! `x-agent-compose`; the writer starts from those nodes and lays the persona fields over them.
//! Any other pack lacks what a package requires (a personality meld with legible colours and
//! personality skills, pronouns): the writer never invents them. It refuses, listing what is
//! missing, unless the operator supplies it as an overlay (the `overlay` option: JSON of the same
//! shape as the extension block). The package written must pass the person contract (seed 001).

use std::path::Path;

use convert_kit::slug::{self, Rules};
use convert_kit::{Map, Pack, Report, Value, frontmatter, tree};

use crate::contract::{self, Rules as Contract, Violation};
use crate::node::{self, Node};
use crate::package::{self, Kind};
use crate::{EXT, color, view};

/// Persona fields the package has a place for (the rest are reported lost).
const MAPPED: &[&str] = &["name", "display_name", "description", "skills", "runtime"];

/// One file to write.
struct Out {
    path: String,
    bytes: Vec<u8>,
}

pub fn convert(input: &Path, output: &Path, overlay: Option<&str>) -> Result<Report, String> {
    let (pack, mut report) = Pack::read(input)?;
    let mut ext = match pack.manifest.get(EXT) {
        Some(Value::Object(map)) => map.clone(),
        Some(_) => return Err(format!(".plugin/plugin.json: `{EXT}` is not an object")),
        None => Map::new(),
    };
    if let Some(text) = overlay {
        let value: Value =
            serde_json::from_str(text).map_err(|e| format!("option overlay: invalid JSON: {e}"))?;
        let Value::Object(over) = value else {
            return Err("option overlay: not a JSON object".into());
        };
        merge(&mut ext, over);
    }
    let files = build(&pack, &ext, &mut report)?;
    for file in files {
        tree::write(output, &file.path, file.bytes)?;
    }
    Ok(report)
}

/// Deep-merges `over` into `base` (objects merge, anything else replaces).
fn merge(base: &mut Map<String, Value>, over: Map<String, Value>) {
    for (key, value) in over {
        match (base.get_mut(&key), value) {
            (Some(Value::Object(b)), Value::Object(o)) => merge(b, o),
            (_, value) => {
                base.insert(key, value);
            }
        }
    }
}

fn obj(v: Option<&Value>) -> Option<&Map<String, Value>> {
    v.and_then(Value::as_object)
}

fn s<'a>(v: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

fn strings(v: &Map<String, Value>, key: &str) -> Vec<String> {
    v.get(key)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// A node kept in the extension (`{"node": ...}`), or `None`.
fn kept_node(entry: &Map<String, Value>) -> Result<Option<Node>, String> {
    entry.get("node").map(Node::from_json).transpose()
}

/// A usable package-relative `.kdl` path recorded by the reader, else `None`.
fn kept_file(entry: &Map<String, Value>, suffix: &str) -> Option<String> {
    let file = s(entry, "file")?;
    (file.ends_with(suffix) && file != package::ROOT && tree::join(Path::new("/"), file).is_ok())
        .then(|| file.to_string())
}

fn skill_dir_of(entry: &str) -> String {
    entry
        .trim_start_matches("./")
        .trim_end_matches('/')
        .rsplit('/')
        .next()
        .unwrap_or_default()
        .to_string()
}

/// Builds a role node from snapshot-shaped fields (an overlay or a snapshot-born pack).
fn role_from_fields(slug: &str, e: &Map<String, Value>, runtime: Option<&str>) -> Node {
    let mut role = Node::new("role").arg(slug);
    let tiers = strings(e, "supported_model_tiers");
    if !tiers.is_empty() {
        let mut n = Node::new("model-tier");
        n.args = tiers.into_iter().map(Value::from).collect();
        role = role.child(n);
    }
    role = role.child(
        Node::new("skill").arg(s(e, "skill").unwrap_or(&format!("role-{slug}")).to_string()),
    );
    for m in strings(e, "methods") {
        role = role.child(Node::new("method").arg(m));
    }
    for b in strings(e, "boundaries") {
        role = role.child(Node::new("boundary").arg(b));
    }
    for sb in e
        .get("scoped_boundaries")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let (Some(name), Some(scope)) = (
            sb.get("name").and_then(Value::as_str),
            sb.get("scope").and_then(Value::as_str),
        ) {
            role = role.child(Node::new("boundary-scoped").arg(name).prop("scope", scope));
        }
    }
    for a in e
        .get("adjacents")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let Some(r) = a.get("role").and_then(Value::as_str) {
            let mut n = Node::new("adjacent").arg(r);
            if let Some(reason) = a.get("reason").and_then(Value::as_str) {
                n = n.prop("reason", reason);
            }
            role = role.child(n);
        }
    }
    let meld = strings(e, "personalities");
    if !meld.is_empty() {
        let mut n = Node::new("personality");
        n.args = meld.into_iter().map(Value::from).collect();
        role = role.child(n);
    }
    let identity = obj(e.get("identity"));
    if let Some(id) = identity {
        let mut n = Node::new("identity");
        for key in ["name", "pronouns"] {
            if let Some(v) = s(id, key) {
                n = n.prop(key, v);
            }
        }
        role = role.child(n);
    }
    let seats: Vec<&Map<String, Value>> = e
        .get("seats")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object)
        .collect();
    for seat in &seats {
        // With a role identity a seat is a harness selector; without one it is a named seat.
        let n = if identity.is_some() || s(seat, "key").is_none() {
            let mut n = Node::new("agent").arg(s(seat, "harness").unwrap_or("claude"));
            if identity.is_none() {
                for key in ["name", "pronouns"] {
                    if let Some(v) = s(seat, key) {
                        n = n.prop(key, v);
                    }
                }
            }
            n
        } else {
            let mut n = Node::new("seat").arg(s(seat, "key").unwrap_or_default());
            for key in ["name", "pronouns"] {
                if let Some(v) = s(seat, key) {
                    n = n.prop(key, v);
                }
            }
            n
        };
        let mut n = n;
        for key in ["channel", "tier"] {
            if let Some(v) = s(seat, key) {
                n = n.prop(key, v);
            }
        }
        role = role.child(n);
    }
    if seats.is_empty()
        && let Some(rt) = runtime
    {
        role = role.child(Node::new("agent").arg(rt));
    }
    if let Some(cc) = obj(e.get("copy_contract")) {
        let mut n = Node::new("copy-contract");
        if let Some(scope) = s(cc, "scope") {
            n = n.prop("scope", scope);
        }
        for rule in cc
            .get("rules")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(f) = rule.get("forbid").and_then(Value::as_str) {
                let mut r = Node::new("forbid").arg(f);
                if let Some(p) = rule.get("prefer").and_then(Value::as_str) {
                    r = r.prop("prefer", p);
                }
                n = n.child(r);
            }
        }
        role = role.child(n);
    }
    if let Some(ins) = obj(e.get("inspiration"))
        && let Some(id) = s(ins, "id").filter(|i| !i.is_empty())
    {
        let mut n = Node::new("inspiration").arg(id);
        if let Some(fit) = s(ins, "fit") {
            n = n.child(Node::new("fit").arg(fit));
        }
        role = role.child(n);
    }
    role
}

/// Builds a personality node from snapshot-shaped fields.
fn personality_from_fields(name: &str, e: &Map<String, Value>) -> Node {
    let mut n = Node::new("personality").arg(name).prop(
        "skill",
        s(e, "skill")
            .unwrap_or(&format!("personality-{name}"))
            .to_string(),
    );
    for key in ["color", "motif"] {
        if let Some(v) = s(e, key) {
            n = n.prop(key, v);
        }
    }
    for (key, node_name, parts) in [
        ("emblem", "emblem", ["name", "emoji", "glyph"]),
        ("form", "form", ["silhouette", "geometry", "motion"]),
        ("sound_mark", "sound-mark", ["timbre", "contour", "pulse"]),
    ] {
        if let Some(block) = obj(e.get(key)) {
            let mut b = Node::new(node_name);
            for part in parts {
                if let Some(v) = s(block, part) {
                    b = b.child(Node::new(part).arg(v));
                }
            }
            n = n.child(b);
        }
    }
    let verbs = strings(e, "verbs");
    if !verbs.is_empty() {
        let mut v = Node::new("verb");
        v.args = verbs.into_iter().map(Value::from).collect();
        n = n.child(v);
    }
    for alias in strings(e, "aliases") {
        n = n.child(Node::new("alias").arg(alias));
    }
    n
}

fn build(pack: &Pack, ext: &Map<String, Value>, report: &mut Report) -> Result<Vec<Out>, String> {
    const MANIFEST: &str = ".plugin/plugin.json";
    let kind = s(ext, "kind").and_then(Kind::parse).unwrap_or(Kind::Person);
    let title = s(ext, "name")
        .or_else(|| s(&pack.manifest, "name"))
        .unwrap_or_default();
    let name = slug::normalise(title, Rules::AgentCompose).ok_or_else(|| {
        format!("{MANIFEST}: the pack name `{title}` leaves no usable person name")
    })?;
    if name != title {
        report.normalised(
            "name-normalised",
            MANIFEST,
            "name",
            format!("{title} -> {name}"),
        );
    }
    let core_layout = kind == Kind::Roster
        || obj(ext.get("personas")).is_some_and(|p| {
            p.values()
                .filter_map(Value::as_object)
                .any(|e| s(e, "file").is_some_and(|f| f.starts_with("data/")))
        });
    let rules = if kind == Kind::Roster {
        Contract::Core
    } else {
        Contract::External
    };

    for (key, value) in &pack.manifest {
        if !matches!(
            key.as_str(),
            "$schema" | "name" | "personas" | "mcp_config" | "hooks_config" | "pack_instructions"
        ) && key != EXT
        {
            report.lost(
                "field-unsupported",
                MANIFEST,
                key,
                format!(
                    "manifest `{key}` has no place in a person package (value {})",
                    short(value)
                ),
            );
        }
    }
    for server in &pack.mcp_servers {
        report.lost(
            "mcp-unsupported",
            ".mcp.json",
            &format!("mcpServers.{}", server.name),
            "agent-compose packages carry no MCP servers (no endpoint data by design)",
        );
    }
    if pack.hooks.is_some() {
        report.lost(
            "hooks-unsupported",
            "hooks/hooks.json",
            "",
            "agent-compose packages carry no lifecycle hooks",
        );
    }

    let mut out = Vec::new();
    let mut violations: Vec<Violation> = Vec::new();
    let empty = Map::new();
    let ext_personalities = obj(ext.get("personalities")).unwrap_or(&empty);
    let ext_boundaries = obj(ext.get("boundaries")).unwrap_or(&empty);
    let ext_personas = obj(ext.get("personas")).unwrap_or(&empty);
    let external = strings(ext, "external_personalities");

    // Personalities (with their SKILL.md) first: roles refer to them.
    let mut pnodes: Vec<(Node, String)> = Vec::new();
    let mut bound_skill_dirs: Vec<String> = Vec::new();
    for (i, (pname, entry)) in ext_personalities.iter().enumerate() {
        let entry = entry
            .as_object()
            .ok_or_else(|| format!("{EXT}.personalities.{pname} is not an object"))?;
        let node = match kept_node(entry)? {
            Some(n) => n,
            None => personality_from_fields(pname, entry),
        };
        let pslug = node.arg0().unwrap_or_default().to_string();
        if !slug::is_valid(&pslug, Rules::AgentCompose) {
            return Err(format!(
                "{EXT}.personalities: `{pslug}` is not an agent-compose slug"
            ));
        }
        let file = kept_file(entry, ".kdl").unwrap_or_else(|| {
            if core_layout {
                format!("data/personality-{pslug}/personality.kdl")
            } else {
                format!("personalities/{:02}-{pslug}.kdl", i + 1)
            }
        });
        let skill = view::bound_skill(&node);
        let skill_dir = if core_layout {
            format!("data/personality-{pslug}")
        } else {
            format!("definitions/skills/{skill}")
        };
        match skill_files(pack, &skill, entry) {
            Some(files) if !skill_body_empty(&files) => {
                bound_skill_dirs.push(skill_dir_name(&skill));
                for (rel, bytes) in files {
                    out.push(Out { path: format!("{skill_dir}/{rel}"), bytes });
                }
            }
            Some(_) => violations.push(Violation { path: format!("skills/{skill}/SKILL.md"), field: String::new(), message: format!("personality {pslug}: its skill {skill} has an empty body (a snapshot carries none); supply the definition") }),
            None => violations.push(Violation { path: format!("{EXT}.personalities.{pname}"), field: "skill".into(), message: format!("personality {pslug}: no SKILL.md for {skill} (expected skills/{skill}/ in the pack or `skill_md` in the overlay)") }),
        }
        out.push(Out {
            path: file.clone(),
            bytes: node::render(std::slice::from_ref(&node)).into_bytes(),
        });
        pnodes.push((node, file));
    }

    for (bname, entry) in ext_boundaries {
        let entry = entry
            .as_object()
            .ok_or_else(|| format!("{EXT}.boundaries.{bname} is not an object"))?;
        let Some(node) = kept_node(entry)? else {
            continue;
        };
        let bslug = node.arg0().unwrap_or_default().to_string();
        let file = kept_file(entry, ".kdl")
            .unwrap_or_else(|| format!("data/boundary-{bslug}/boundary.kdl"));
        let skill = view::bound_skill(&node);
        if let Some(files) = skill_files(pack, &skill, entry) {
            bound_skill_dirs.push(skill_dir_name(&skill));
            let dir = file
                .rsplit_once('/')
                .map(|(d, _)| d.to_string())
                .filter(|d| core_layout && d.starts_with("data/"))
                .unwrap_or_else(|| format!("definitions/skills/{skill}"));
            for (rel, bytes) in files {
                out.push(Out {
                    path: format!("{dir}/{rel}"),
                    bytes,
                });
            }
        }
        out.push(Out {
            path: file,
            bytes: node::render(std::slice::from_ref(&node)).into_bytes(),
        });
    }

    // Roles.
    let mut views = Vec::new();
    let mut claimed: Vec<String> = bound_skill_dirs.clone();
    for (i, persona) in pack.personas.iter().enumerate() {
        let pname = persona.name();
        let rslug = slug::normalise(pname, Rules::AgentCompose).ok_or_else(|| {
            format!(
                "{}: persona `{pname}` leaves no usable role slug",
                persona.file
            )
        })?;
        if rslug != pname {
            report.normalised(
                "name-normalised",
                &persona.file,
                "name",
                format!("{pname} -> {rslug}"),
            );
        }
        let entry = obj(ext_personas.get(pname)).unwrap_or(&empty);
        let runtime = persona.fields.get("runtime").and_then(Value::as_str);
        let mut role = match kept_node(entry)? {
            Some(n) => n,
            None => {
                if !entry.is_empty() {
                    report.normalised(
                        "carried-in-extension",
                        MANIFEST,
                        &format!("{EXT}.personas.{pname}"),
                        format!("role {rslug} built from the extension/overlay fields"),
                    );
                }
                role_from_fields(&rslug, entry, runtime)
            }
        };
        role.args = vec![Value::from(rslug.clone())];

        // Persona fields laid over the node.
        let display = persona.str_field("display_name");
        let default_display = view::identity_name(&role).unwrap_or_else(|| rslug.clone());
        if role.first_child("display-name").is_some()
            || (!display.is_empty() && display != default_display)
        {
            role.set_child(Node::new("display-name").arg(display), &["order"]);
        }
        let description = persona.str_field("description");
        if !description.is_empty() {
            role.set_child(
                Node::new("purpose").arg(description),
                &["order", "display-name"],
            );
        }
        let body = persona.body.as_str();
        if role.first_child("briefing").is_some() {
            role.set_child(Node::new("briefing").arg(body.trim()), &["purpose"]);
        } else {
            if role.first_child("skill").is_none() {
                role.set_child(
                    Node::new("skill").arg(format!("role-{rslug}")),
                    &["purpose", "model-tier"],
                );
                report.synthesised(
                    "default-applied",
                    &persona.file,
                    "body",
                    format!("role skill role-{rslug} written from the persona body"),
                );
            }
            let id = role.child_arg("skill").unwrap_or_default().to_string();
            let mut fm = obj(entry.get("skill_frontmatter"))
                .cloned()
                .unwrap_or_default();
            if fm.is_empty() {
                fm.insert("name".into(), id.clone().into());
                fm.insert("description".into(), description.into());
            }
            let dir = s(entry, "skill_dir")
                .filter(|d| tree::join(Path::new("/"), d).is_ok())
                .map(str::to_string)
                .unwrap_or_else(|| {
                    if core_layout {
                        format!("data/role-{rslug}")
                    } else {
                        format!("roles/{rslug}")
                    }
                });
            out.push(Out {
                path: format!("{dir}/SKILL.md"),
                bytes: frontmatter::render(&fm, body).into_bytes(),
            });
            if let Some(extra) = obj(entry.get("skill_files")) {
                for (rel, text) in extra {
                    if let Some(t) = text.as_str() {
                        out.push(Out {
                            path: format!("{dir}/{rel}"),
                            bytes: t.as_bytes().to_vec(),
                        });
                    }
                }
            }
        }

        // Skills the persona names beyond its meld and boundaries become methods.
        for item in persona
            .fields
            .get("skills")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let dir = skill_dir_of(item.as_str().unwrap_or_default());
            if dir.is_empty() || bound_skill_dirs.contains(&dir) {
                continue;
            }
            let Some(skill) = pack.skills.iter().find(|k| k.name == dir) else {
                report.lost(
                    "missing-file",
                    &persona.file,
                    "skills",
                    format!("skill {dir} is not in the pack"),
                );
                continue;
            };
            if !view::methods(&role).contains(&dir) {
                role.add_child(
                    Node::new("method").arg(dir.clone()),
                    &["method", "skill", "model-tier", "purpose"],
                );
                report.reinterpreted(
                    "skill-as-method",
                    &persona.file,
                    "skills",
                    format!("skill {dir} becomes role method `{dir}` of {rslug}"),
                );
            }
            if !claimed.contains(&dir) {
                claimed.push(dir.clone());
                let mdir = if core_layout {
                    format!("data/{dir}")
                } else {
                    format!("definitions/skills/{dir}")
                };
                for (rel, bytes) in &skill.files {
                    out.push(Out {
                        path: format!("{mdir}/{rel}"),
                        bytes: bytes.clone(),
                    });
                }
            }
        }

        if let Some(rt) = runtime {
            let harnesses: Vec<String> = view::seats(&role).into_iter().map(|(k, _)| k).collect();
            if !role
                .children
                .iter()
                .any(|c| c.name == "agent" && c.arg0() == Some(rt))
            {
                report.lost("field-unsupported", &persona.file, "runtime", format!("runtime `{rt}` is not one of the role's seats ({}); seats are kept as they were", harnesses.join(", ")));
            } else if entry.get("node").is_none() {
                report.reinterpreted(
                    "runtime-as-seat",
                    &persona.file,
                    "runtime",
                    format!("runtime `{rt}` becomes harness seat `agent \"{rt}\"`"),
                );
            }
        }
        for (key, value) in &persona.fields {
            if !MAPPED.contains(&key.as_str()) {
                report.lost(
                    "field-unsupported",
                    &persona.file,
                    key,
                    format!(
                        "persona `{key}` has no place in an agent-compose role (value {})",
                        short(value)
                    ),
                );
            }
        }

        // The favourite colour: checked, and compared with what agent-compose will derive.
        let fav = s(entry, "favorite_color").map(str::to_string);
        let colors: Option<Vec<&str>> = view::meld(&role)
            .iter()
            .map(|m| {
                pnodes
                    .iter()
                    .find(|(n, _)| n.arg0() == Some(m))
                    .and_then(|(n, _)| n.str_prop("color"))
            })
            .collect();
        let derived = colors.and_then(|c| color::favorite(&c));
        if let Some(f) = &fav
            && derived.as_deref() != Some(f.as_str())
        {
            report.lost(
                "favorite-color-derived",
                MANIFEST,
                &format!("{EXT}.personas.{pname}.favorite_color"),
                format!("favorite_color {f} has no slot in a package: agent-compose derives the favourite from the meld ({})", derived.as_deref().unwrap_or("none")),
            );
        }

        let file = kept_file(entry, ".kdl")
            .filter(|f| f.contains(&rslug))
            .unwrap_or_else(|| {
                if core_layout {
                    format!("data/role-{rslug}/role.kdl")
                } else {
                    format!("roles/{:02}-{rslug}.kdl", i + 1)
                }
            });
        views.push(view::role_view(&role, &file, fav));
        out.push(Out {
            path: file,
            bytes: node::render(std::slice::from_ref(&role)).into_bytes(),
        });
    }

    for skill in &pack.skills {
        if !claimed.contains(&skill.name) {
            report.lost("skill-unclaimed", &format!("skills/{}", skill.name), "", format!("skill {} is bound by no role, personality or boundary; a package has no shared skills", skill.name));
        }
    }

    let pviews: Vec<_> = pnodes
        .iter()
        .map(|(n, f)| view::personality_view(n, f))
        .collect();
    violations.extend(contract::check(rules, &views, &pviews, &external));
    if views.is_empty() {
        violations.push(Violation {
            path: MANIFEST.into(),
            field: "personas".into(),
            message: "no personas: a package needs at least one role".into(),
        });
    }
    if !violations.is_empty() {
        return Err(view::refusal(
            &format!("the package for {title}"),
            &violations,
        ));
    }

    // Root, invariant, inspirations, carried files.
    out.push(Out {
        path: package::ROOT.into(),
        bytes: node::render(&[Node::new(kind.as_str()).arg(name.clone())]).into_bytes(),
    });
    if let Some(text) = &pack.instructions {
        let path = s(ext, "invariant_file")
            .filter(|p| p.ends_with("INVARIANT.md") && tree::join(Path::new("/"), p).is_ok())
            .map(str::to_string)
            .unwrap_or_else(|| {
                if core_layout {
                    "data/invariant/INVARIANT.md".into()
                } else {
                    "definitions/INVARIANT.md".into()
                }
            });
        if s(ext, "invariant_file").is_none() {
            report.reinterpreted(
                "instructions-as-invariant",
                "instructions.md",
                "",
                format!("pack instructions become the personality invariant {path}"),
            );
        }
        out.push(Out {
            path,
            bytes: text.clone().into_bytes(),
        });
    }
    for (i, ins) in ext
        .get("inspirations")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let Some(entry) = ins.as_object() else {
            continue;
        };
        let Some(node) = kept_node(entry)? else {
            continue;
        };
        let file = kept_file(entry, ".kdl").unwrap_or_else(|| {
            format!(
                "inspirations/{:02}-{}.kdl",
                i + 1,
                node.arg0().unwrap_or("inspiration")
            )
        });
        out.push(Out {
            path: file,
            bytes: node::render(&[node]).into_bytes(),
        });
    }
    for (path, text) in obj(ext.get("files")).into_iter().flatten() {
        if let Some(t) = text.as_str()
            && tree::join(Path::new("/"), path).is_ok()
        {
            out.push(Out {
                path: path.clone(),
                bytes: t.as_bytes().to_vec(),
            });
        }
    }
    for key in ext.keys() {
        if !matches!(
            key.as_str(),
            "source"
                | "kind"
                | "name"
                | "personas"
                | "personalities"
                | "boundaries"
                | "inspirations"
                | "external_personalities"
                | "invariant_file"
                | "files"
        ) {
            report.lost(
                "field-unsupported",
                MANIFEST,
                &format!("{EXT}.{key}"),
                format!("{EXT}.{key} has no place in a person package"),
            );
        }
    }
    // Two entries for one path would silently overwrite: refuse instead.
    let mut paths: Vec<&str> = out.iter().map(|o| o.path.as_str()).collect();
    paths.sort_unstable();
    if let Some(w) = paths.windows(2).find(|w| w[0] == w[1]) {
        return Err(format!(
            "two parts of the package would be written to {}",
            w[0]
        ));
    }
    Ok(out)
}

fn skill_dir_name(skill: &str) -> String {
    slug::normalise(skill, Rules::Skill).unwrap_or_default()
}

/// A bound skill's files: the pack's `skills/<dir>/`, else `skill_md` text in the extension entry.
fn skill_files(
    pack: &Pack,
    skill: &str,
    entry: &Map<String, Value>,
) -> Option<Vec<(String, Vec<u8>)>> {
    let dir = skill_dir_name(skill);
    if let Some(k) = pack.skills.iter().find(|k| k.name == dir) {
        return Some(k.files.clone());
    }
    s(entry, "skill_md").map(|t| vec![("SKILL.md".to_string(), t.as_bytes().to_vec())])
}

fn skill_body_empty(files: &[(String, Vec<u8>)]) -> bool {
    files
        .iter()
        .find(|(p, _)| p == "SKILL.md")
        .and_then(|(_, b)| std::str::from_utf8(b).ok())
        .map(|t| frontmatter::parse(t).body.trim().is_empty())
        .unwrap_or(true)
}

fn short(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() > 60 {
        format!("{}…", text.chars().take(60).collect::<String>())
    } else {
        text
    }
}
