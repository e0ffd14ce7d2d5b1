//! Persona pack -> agent-compose person package (KDL v2 + SKILL.md tree), formats.md §6.3.
//!
//! A pack that came from agent-compose carries its roles and personalities in the manifest block
//! `x-agent-compose`; the writer starts from those nodes and lays the persona fields over them.
//! Any other pack lacks what a package requires (a personality meld with legible colours and
//! personality skills, pronouns): the writer never invents them. It refuses, listing what is
//! missing, unless the operator supplies it as an overlay (the `overlay` option: JSON of the same
//! shape as the extension block). The package written must pass agent-compose's person contract
//! ("Roster package contract").

use std::path::Path;

use apiary_schema::persona;
use convert_kit::pack::Persona;
use convert_kit::slug::{self, Rules};
use convert_kit::{Map, Pack, Report, Value, frontmatter, tree};

use crate::contract::{self, RoleView, Rules as Contract, Violation};
use crate::node::{self, Node};
use crate::package::{self, Kind};
use crate::{EXT, color, view};

/// Persona fields the package has a place for (the rest are reported lost).
const MAPPED: &[&str] = &[
    persona::NAME,
    persona::DISPLAY_NAME,
    persona::DESCRIPTION,
    persona::SKILLS,
    persona::RUNTIME,
];

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
    let files = build(&pack, &ext, &mut report).map_err(|e| {
        if ext.is_empty() {
            format!("{}; {e}", remedy(&pack))
        } else {
            e
        }
    })?;
    for file in files {
        tree::write(output, &file.path, file.bytes)?;
    }
    Ok(report)
}

/// Why an ordinary persona pack (not converted from agent-compose, no overlay) cannot become a
/// person package as it is, and what to supply.
fn remedy(pack: &Pack) -> String {
    let persona = pack.personas.first().map_or("<persona>", |p| p.name());
    format!(
        "this pack was not converted from agent-compose, so its personas have no personality meld, personality colours and skills, or identity (name and pronouns), and the converter does not invent them: supply them with `--option overlay=@FILE`, FILE holding JSON shaped like the `{EXT}` block, e.g. {{\"personas\": {{\"{persona}\": {{\"personalities\": [\"steady\"], \"identity\": {{\"name\": \"…\", \"pronouns\": \"they\"}}}}}}, \"personalities\": {{\"steady\": {{\"color\": \"#5fa87a\", \"skill_md\": \"<SKILL.md text>\"}}}}}}; each persona body becomes its role skill (at least three paragraphs, at most {} words)",
        contract::ROLE_SKILL_MAX_WORDS
    )
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
    role.children.extend(duty_nodes(slug, e));
    let meld = strings(e, "personalities");
    if !meld.is_empty() {
        let mut n = Node::new("personality");
        n.args = meld.into_iter().map(Value::from).collect();
        role = role.child(n);
    }
    role.children.extend(seat_nodes(e, runtime));
    if let Some(cc) = obj(e.get("copy_contract")) {
        role = role.child(copy_contract_node(cc));
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

/// What the role does: model tiers, its skill, methods, boundaries, adjacent roles.
fn duty_nodes(slug: &str, e: &Map<String, Value>) -> Vec<Node> {
    let mut nodes = Vec::new();
    let tiers = strings(e, "supported_model_tiers");
    if !tiers.is_empty() {
        let mut n = Node::new("model-tier");
        n.args = tiers.into_iter().map(Value::from).collect();
        nodes.push(n);
    }
    nodes
        .push(Node::new("skill").arg(s(e, "skill").unwrap_or(&format!("role-{slug}")).to_string()));
    for m in strings(e, "methods") {
        nodes.push(Node::new("method").arg(m));
    }
    for b in strings(e, "boundaries") {
        nodes.push(Node::new("boundary").arg(b));
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
            nodes.push(Node::new("boundary-scoped").arg(name).prop("scope", scope));
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
            nodes.push(n);
        }
    }
    nodes
}

/// Who the role is: its identity and its seats (or the persona's runtime as the one seat).
fn seat_nodes(e: &Map<String, Value>, runtime: Option<&str>) -> Vec<Node> {
    let mut nodes = Vec::new();
    let identity = obj(e.get("identity"));
    if let Some(id) = identity {
        let mut n = Node::new("identity");
        for key in ["name", "pronouns"] {
            if let Some(v) = s(id, key) {
                n = n.prop(key, v);
            }
        }
        nodes.push(n);
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
        nodes.push(n);
    }
    if seats.is_empty()
        && let Some(rt) = runtime
    {
        nodes.push(Node::new("agent").arg(rt));
    }
    nodes
}

fn copy_contract_node(cc: &Map<String, Value>) -> Node {
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
    n
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

const MANIFEST: &str = ".plugin/plugin.json";

/// The package's root: its kind, the pack's title and the person name made from it, the layout.
struct Target<'a> {
    kind: Kind,
    title: &'a str,
    name: String,
    /// agent-compose core's `data/` layout (a roster, or a pack read from one), else a person
    /// package's.
    core_layout: bool,
}

/// The package under construction: the files so far, and what the contract will refuse.
struct Build<'a> {
    pack: &'a Pack,
    ext: &'a Map<String, Value>,
    core_layout: bool,
    out: Vec<Out>,
    violations: Vec<Violation>,
    /// Skill directories bound by personalities and boundaries.
    bound_skill_dirs: Vec<String>,
    /// Skill directories written into the package so far (bound ones and role methods).
    claimed: Vec<String>,
}

fn build(pack: &Pack, ext: &Map<String, Value>, report: &mut Report) -> Result<Vec<Out>, String> {
    let target = target(pack, ext, report)?;
    report_unmapped_pack(pack, report);
    let mut b = Build {
        pack,
        ext,
        core_layout: target.core_layout,
        out: Vec::new(),
        violations: Vec::new(),
        bound_skill_dirs: Vec::new(),
        claimed: Vec::new(),
    };
    // Personalities (with their SKILL.md) first: roles refer to them.
    let pnodes = b.personalities()?;
    b.boundaries()?;
    b.claimed = b.bound_skill_dirs.clone();
    let views = b.roles(&pnodes, report)?;
    for skill in &pack.skills {
        if !b.claimed.contains(&skill.name) {
            report.lost("skill-unclaimed", &format!("skills/{}", skill.name), "", format!("skill {} is bound by no role, personality or boundary; a package has no shared skills", skill.name));
        }
    }
    b.check(&target, &views, &pnodes)?;
    b.root(&target, report)?;
    report_unknown_ext(ext, report);
    // Two entries for one path would silently overwrite: refuse instead.
    let mut paths: Vec<&str> = b.out.iter().map(|o| o.path.as_str()).collect();
    paths.sort_unstable();
    if let Some(w) = paths.windows(2).find(|w| w[0] == w[1]) {
        return Err(format!(
            "two parts of the package would be written to {}",
            w[0]
        ));
    }
    Ok(b.out)
}

fn target<'a>(
    pack: &'a Pack,
    ext: &'a Map<String, Value>,
    report: &mut Report,
) -> Result<Target<'a>, String> {
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
    Ok(Target {
        kind,
        title,
        name,
        core_layout,
    })
}

/// Manifest fields, MCP servers and hooks: a package has no place for them.
fn report_unmapped_pack(pack: &Pack, report: &mut Report) {
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
}

/// Extension keys the writer does not read.
fn report_unknown_ext(ext: &Map<String, Value>, report: &mut Report) {
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
}

impl Build<'_> {
    /// The extension's personalities, each with its file and bound skill: (node, file) in order.
    fn personalities(&mut self) -> Result<Vec<(Node, String)>, String> {
        let mut pnodes = Vec::new();
        for (i, (pname, entry)) in obj(self.ext.get("personalities"))
            .into_iter()
            .flatten()
            .enumerate()
        {
            let entry = entry
                .as_object()
                .ok_or_else(|| format!("{EXT}.personalities.{pname} is not an object"))?;
            pnodes.push(self.personality(i, pname, entry)?);
        }
        Ok(pnodes)
    }

    fn personality(
        &mut self,
        i: usize,
        pname: &str,
        entry: &Map<String, Value>,
    ) -> Result<(Node, String), String> {
        let core_layout = self.core_layout;
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
        match skill_files(self.pack, &skill, entry) {
            Some(files) if !skill_body_empty(&files) => {
                self.bound_skill_dirs.push(skill_dir_name(&skill));
                for (rel, bytes) in files {
                    self.out.push(Out { path: format!("{skill_dir}/{rel}"), bytes });
                }
            }
            Some(_) => self.violations.push(Violation { path: format!("skills/{skill}/SKILL.md"), field: String::new(), message: format!("personality {pslug}: its skill {skill} has an empty body (a snapshot carries none); supply the definition") }),
            None => self.violations.push(Violation { path: format!("{EXT}.personalities.{pname}"), field: "skill".into(), message: format!("personality {pslug}: no SKILL.md for {skill} (expected skills/{skill}/ in the pack or `skill_md` in the overlay)") }),
        }
        self.out.push(Out {
            path: file.clone(),
            bytes: node::render(std::slice::from_ref(&node)).into_bytes(),
        });
        Ok((node, file))
    }

    /// The extension's boundaries kept as nodes, each with its bound skill's files.
    fn boundaries(&mut self) -> Result<(), String> {
        for (bname, entry) in obj(self.ext.get("boundaries")).into_iter().flatten() {
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
            if let Some(files) = skill_files(self.pack, &skill, entry) {
                self.bound_skill_dirs.push(skill_dir_name(&skill));
                let dir = file
                    .rsplit_once('/')
                    .map(|(d, _)| d.to_string())
                    .filter(|d| self.core_layout && d.starts_with("data/"))
                    .unwrap_or_else(|| format!("definitions/skills/{skill}"));
                for (rel, bytes) in files {
                    self.out.push(Out {
                        path: format!("{dir}/{rel}"),
                        bytes,
                    });
                }
            }
            self.out.push(Out {
                path: file,
                bytes: node::render(std::slice::from_ref(&node)).into_bytes(),
            });
        }
        Ok(())
    }

    /// One role per persona; their views for the contract check.
    fn roles(
        &mut self,
        pnodes: &[(Node, String)],
        report: &mut Report,
    ) -> Result<Vec<RoleView>, String> {
        let empty = Map::new();
        let mut views = Vec::new();
        let pack = self.pack;
        for (i, persona) in pack.personas.iter().enumerate() {
            let entry = obj(obj(self.ext.get("personas")).and_then(|p| p.get(persona.name())))
                .unwrap_or(&empty);
            views.push(self.role(i, persona, entry, pnodes, report)?);
        }
        Ok(views)
    }

    fn role(
        &mut self,
        i: usize,
        persona: &Persona,
        entry: &Map<String, Value>,
        pnodes: &[(Node, String)],
        report: &mut Report,
    ) -> Result<RoleView, String> {
        let (rslug, mut role) = role_node(persona, entry, report)?;
        let skill = self.lay_persona(&mut role, &rslug, persona, entry, report);
        // Skills the persona names beyond its meld and boundaries become methods.
        self.methods(&mut role, &rslug, persona, report);
        report_runtime(&role, persona, entry, report);
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
        let fav = favorite_color(&role, persona.name(), entry, pnodes, report);
        let file = kept_file(entry, ".kdl")
            .filter(|f| f.contains(&rslug))
            .unwrap_or_else(|| {
                if self.core_layout {
                    format!("data/role-{rslug}/role.kdl")
                } else {
                    format!("roles/{:02}-{rslug}.kdl", i + 1)
                }
            });
        let mut role_view = view::role_view(&role, &file, fav);
        role_view.skill = skill;
        self.out.push(Out {
            path: file,
            bytes: node::render(std::slice::from_ref(&role)).into_bytes(),
        });
        Ok(role_view)
    }

    /// The persona's fields laid over the role node: display name, purpose, and the briefing or
    /// the role skill written from the persona body (returned, for the contract's shape check).
    fn lay_persona(
        &mut self,
        role: &mut Node,
        rslug: &str,
        persona: &Persona,
        entry: &Map<String, Value>,
        report: &mut Report,
    ) -> Option<contract::RoleSkill> {
        let display = persona.str_field("display_name");
        let default_display = view::identity_name(role).unwrap_or_else(|| rslug.to_string());
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
        // The identity card the reader appended (personalities, favourite colour) goes.
        let body = s(entry, "body_suffix")
            .filter(|sfx| !sfx.is_empty())
            .and_then(|sfx| persona.body.strip_suffix(sfx))
            .unwrap_or(&persona.body);
        if role.first_child("briefing").is_some() {
            role.set_child(Node::new("briefing").arg(body.trim()), &["purpose"]);
            None
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
            let (path, text) = self.role_skill(&id, rslug, description, body, entry);
            Some(contract::RoleSkill {
                id,
                path,
                text: Some(text),
            })
        }
    }

    /// The role skill's `SKILL.md` (the persona body) and the files the extension kept with it.
    /// Returns the `SKILL.md` path and text.
    fn role_skill(
        &mut self,
        id: &str,
        rslug: &str,
        description: &str,
        body: &str,
        entry: &Map<String, Value>,
    ) -> (String, String) {
        let mut fm = obj(entry.get("skill_frontmatter"))
            .cloned()
            .unwrap_or_default();
        if fm.is_empty() {
            fm.insert("name".into(), id.into());
            fm.insert("description".into(), description.into());
        }
        let dir = s(entry, "skill_dir")
            .filter(|d| tree::join(Path::new("/"), d).is_ok())
            .map(str::to_string)
            .unwrap_or_else(|| {
                if self.core_layout {
                    format!("data/role-{rslug}")
                } else {
                    format!("roles/{rslug}")
                }
            });
        let text = frontmatter::render(&fm, body);
        let path = format!("{dir}/SKILL.md");
        self.out.push(Out {
            path: path.clone(),
            bytes: text.clone().into_bytes(),
        });
        if let Some(extra) = obj(entry.get("skill_files")) {
            for (rel, text) in extra {
                if let Some(t) = text.as_str() {
                    self.out.push(Out {
                        path: format!("{dir}/{rel}"),
                        bytes: t.as_bytes().to_vec(),
                    });
                }
            }
        }
        (path, text)
    }

    /// The persona's other skills as role methods, each skill's files written once.
    fn methods(&mut self, role: &mut Node, rslug: &str, persona: &Persona, report: &mut Report) {
        let pack = self.pack;
        for item in persona
            .fields
            .get("skills")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let dir = skill_dir_of(item.as_str().unwrap_or_default());
            if dir.is_empty() || self.bound_skill_dirs.contains(&dir) {
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
            if !view::methods(role).contains(&dir) {
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
            if !self.claimed.contains(&dir) {
                self.claimed.push(dir.clone());
                let mdir = if self.core_layout {
                    format!("data/{dir}")
                } else {
                    format!("definitions/skills/{dir}")
                };
                for (rel, bytes) in &skill.files {
                    self.out.push(Out {
                        path: format!("{mdir}/{rel}"),
                        bytes: bytes.clone(),
                    });
                }
            }
        }
    }

    /// The person contract over the roles and personalities, plus "at least one role": any
    /// violation refuses the whole package.
    fn check(
        &mut self,
        target: &Target,
        views: &[RoleView],
        pnodes: &[(Node, String)],
    ) -> Result<(), String> {
        let rules = if target.kind == Kind::Roster {
            Contract::Core
        } else {
            Contract::External
        };
        // Definitions were checked as they were written (`personality`); the binding's id here.
        let pviews: Vec<_> = pnodes
            .iter()
            .map(|(n, f)| {
                let mut v = view::personality_view(n, f);
                v.binding = Some(contract::Binding {
                    skill: view::bound_skill(n),
                    definition: contract::Definition::Present,
                });
                v
            })
            .collect();
        let external = strings(self.ext, "external_personalities");
        self.violations
            .extend(contract::check(rules, views, &pviews, &external));
        if views.is_empty() {
            self.violations.push(Violation {
                path: MANIFEST.into(),
                field: "personas".into(),
                message: "no personas: a package needs at least one role".into(),
            });
        }
        if !self.violations.is_empty() {
            return Err(view::refusal(
                &format!("the package for {}", target.title),
                &self.violations,
            ));
        }
        Ok(())
    }

    /// Root, invariant, inspirations, carried files.
    fn root(&mut self, target: &Target, report: &mut Report) -> Result<(), String> {
        let ext = self.ext;
        self.out.push(Out {
            path: package::ROOT.into(),
            bytes: node::render(&[Node::new(target.kind.as_str()).arg(target.name.clone())])
                .into_bytes(),
        });
        if let Some(text) = &self.pack.instructions {
            let path = s(ext, "invariant_file")
                .filter(|p| p.ends_with("INVARIANT.md") && tree::join(Path::new("/"), p).is_ok())
                .map(str::to_string)
                .unwrap_or_else(|| {
                    if self.core_layout {
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
            self.out.push(Out {
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
            self.out.push(Out {
                path: file,
                bytes: node::render(&[node]).into_bytes(),
            });
        }
        for (path, text) in obj(ext.get("files")).into_iter().flatten() {
            if let Some(t) = text.as_str()
                && tree::join(Path::new("/"), path).is_ok()
            {
                self.out.push(Out {
                    path: path.clone(),
                    bytes: t.as_bytes().to_vec(),
                });
            }
        }
        Ok(())
    }
}

/// The role node for a persona: kept in the extension, else built from the overlay's fields;
/// its slug is the persona name normalised.
fn role_node(
    persona: &Persona,
    entry: &Map<String, Value>,
    report: &mut Report,
) -> Result<(String, Node), String> {
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
    Ok((rslug, role))
}

/// The persona's runtime: one of the role's harness seats, or lost.
fn report_runtime(role: &Node, persona: &Persona, entry: &Map<String, Value>, report: &mut Report) {
    let Some(rt) = persona.fields.get("runtime").and_then(Value::as_str) else {
        return;
    };
    let harnesses: Vec<String> = view::seats(role).into_iter().map(|(k, _)| k).collect();
    if !role
        .children
        .iter()
        .any(|c| c.name == "agent" && c.arg0() == Some(rt))
    {
        report.lost(
            "field-unsupported",
            &persona.file,
            "runtime",
            format!(
                "runtime `{rt}` is not one of the role's seats ({}); seats are kept as they were",
                harnesses.join(", ")
            ),
        );
    } else if entry.get("node").is_none() {
        report.reinterpreted(
            "runtime-as-seat",
            &persona.file,
            "runtime",
            format!("runtime `{rt}` becomes harness seat `agent \"{rt}\"`"),
        );
    }
}

/// The favourite colour kept in the extension: checked, and compared with what agent-compose
/// will derive from the role's meld.
fn favorite_color(
    role: &Node,
    pname: &str,
    entry: &Map<String, Value>,
    pnodes: &[(Node, String)],
    report: &mut Report,
) -> Option<String> {
    let fav = s(entry, "favorite_color").map(str::to_string);
    let colors: Option<Vec<&str>> = view::meld(role)
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
    fav
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
