//! An agent-compose person package on disk: which layout it uses, its KDL nodes, and its
//! SKILL.md tree. Two layouts exist:
//! - core (`roster "core"`): `data/<kind>-<slug>/{role,personality,boundary}.kdl` + `SKILL.md`,
//!   `data/invariant/INVARIANT.md`;
//! - external (`person "<name>"`): `roles/NN-<slug>.kdl` + `roles/<slug>/SKILL.md`,
//!   `personalities/NN-<name>.kdl`, `inspirations/NN-<id>.kdl`, `definitions/INVARIANT.md`,
//!   `definitions/skills/<skill>/SKILL.md`.
//!
//! Reading is layout-agnostic where it can be: every `.kdl` file is parsed and its top node sorted
//! by kind, every `SKILL.md` is indexed by its frontmatter `name`.

use std::path::Path;

use convert_kit::{frontmatter, tree};

use crate::node::{self, Node};

/// The root file of a package.
pub const ROOT: &str = "person.kdl";
/// The root file of a personality library (not convertible on its own: it has no roles).
pub const LIBRARY_ROOT: &str = "library.kdl";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `roster "core"` (or another roster): the core contract applies.
    Roster,
    /// `person "<name>"`: an external package.
    Person,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Roster => "roster",
            Kind::Person => "person",
        }
    }

    pub fn parse(s: &str) -> Option<Kind> {
        match s {
            "roster" => Some(Kind::Roster),
            "person" => Some(Kind::Person),
            _ => None,
        }
    }
}

/// One top-level node and the file it lives in.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub file: String,
    pub node: Node,
}

impl Entry {
    pub fn slug(&self) -> &str {
        self.node.arg0().unwrap_or_default()
    }
}

/// A `SKILL.md` and the directory holding it, indexed by the frontmatter `name`.
#[derive(Debug, Clone, PartialEq)]
pub struct SkillFile {
    pub id: String,
    /// The directory, package-relative.
    pub dir: String,
    /// Every file of the directory (`SKILL.md` first) with its bytes.
    pub files: Vec<(String, Vec<u8>)>,
}

impl SkillFile {
    pub fn text(&self) -> &str {
        self.files
            .iter()
            .find(|(p, _)| p == "SKILL.md")
            .and_then(|(_, b)| std::str::from_utf8(b).ok())
            .unwrap_or_default()
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Package {
    pub kind: Kind,
    pub name: String,
    pub roles: Vec<Entry>,
    pub personalities: Vec<Entry>,
    pub boundaries: Vec<Entry>,
    pub inspirations: Vec<Entry>,
    /// `(path, text)` of the personality invariant.
    pub invariant: Option<(String, String)>,
    pub skills: Vec<SkillFile>,
    /// Files that are none of the above (README, compose requests), carried as text.
    pub extra_files: Vec<(String, String)>,
}

impl Package {
    pub fn skill(&self, id: &str) -> Option<&SkillFile> {
        self.skills.iter().find(|s| s.id == id)
    }

    pub fn personality(&self, name: &str) -> Option<&Entry> {
        self.personalities.iter().find(|p| p.slug() == name)
    }

    pub fn is_core_layout(&self) -> bool {
        self.roles.iter().any(|r| r.file.starts_with("data/"))
    }
}

/// What the root file says: `roster "core"`, `person "x"`, or why it is not a package.
pub fn root_kind(root: &Path) -> Result<(Kind, String), String> {
    if !tree::is_file(root, ROOT) {
        if tree::is_file(root, LIBRARY_ROOT) {
            return Err(format!(
                "{LIBRARY_ROOT}: a personality library has personalities but no roles; a persona pack needs at least one persona (convert the person package that uses it)"
            ));
        }
        return Err(format!("no {ROOT}: not an agent-compose person package"));
    }
    let nodes = node::parse(&tree::read(root, ROOT)?, ROOT)?;
    let [top] = nodes.as_slice() else {
        return Err(format!(
            "{ROOT}: must hold exactly one `roster` or `person` node, found {}",
            nodes.len()
        ));
    };
    let kind = Kind::parse(&top.name).ok_or_else(|| {
        format!(
            "{ROOT}: top node `{}` is neither `roster` nor `person`",
            top.name
        )
    })?;
    let name = top
        .arg0()
        .filter(|n| !n.is_empty())
        .ok_or_else(|| format!("{ROOT}: `{}` has no name", top.name))?;
    if !top.children.is_empty() || !top.props.is_empty() || top.args.len() != 1 {
        return Err(format!("{ROOT}: `{}` takes only a name", top.name));
    }
    Ok((kind, name.to_string()))
}

/// Reads the package at `root`.
pub fn read(root: &Path) -> Result<Package, String> {
    let (kind, name) = root_kind(root)?;
    let mut package = Package {
        kind,
        name,
        roles: Vec::new(),
        personalities: Vec::new(),
        boundaries: Vec::new(),
        inspirations: Vec::new(),
        invariant: None,
        skills: Vec::new(),
        extra_files: Vec::new(),
    };
    let files = tree::walk(root, "")?;
    if let Some(link) = first_symlink(root, "") {
        return Err(format!(
            "{link}: symbolic links are invalid anywhere in a person package"
        ));
    }
    // Skill directories first: every file under a directory holding a SKILL.md belongs to it.
    let skill_dirs = read_skills(root, &files, &mut package)?;
    for file in &files {
        if file == ROOT || (!is_model_file(file) && skill_dirs.iter().any(|d| in_dir(file, d))) {
            continue;
        }
        if file.ends_with(".kdl") {
            let text = tree::read(root, file)?;
            let nodes = node::parse(&text, file)?;
            if !classify(&mut package, file, nodes)? {
                package.extra_files.push((file.clone(), text));
            }
        } else if file.ends_with("INVARIANT.md") {
            package.invariant = Some((file.clone(), tree::read(root, file)?));
        } else {
            let text = tree::read(root, file)?;
            package.extra_files.push((file.clone(), text));
        }
    }
    // File order is the numbered order in the external layout; `order` decides in the core one.
    for list in [
        &mut package.roles,
        &mut package.personalities,
        &mut package.boundaries,
    ] {
        list.sort_by_key(|e| {
            e.node
                .first_child("order")
                .and_then(|o| o.args.first())
                .and_then(|v| v.as_i64())
                .or_else(|| e.node.props.get("order").and_then(|v| v.as_i64()))
                .unwrap_or(i64::MAX)
        });
    }
    Ok(package)
}

/// The skill directories (each holding a SKILL.md) into `package.skills`, each with its files;
/// returns the directories.
fn read_skills(
    root: &Path,
    files: &[String],
    package: &mut Package,
) -> Result<Vec<String>, String> {
    let skill_dirs: Vec<String> = files
        .iter()
        .filter(|f| f.ends_with("/SKILL.md"))
        .map(|f| f.trim_end_matches("/SKILL.md").to_string())
        .collect();
    for dir in &skill_dirs {
        let text = tree::read(root, &format!("{dir}/SKILL.md"))?;
        let fm = frontmatter::parse(&text);
        let id = fm
            .fields
            .get("name")
            .and_then(|v| v.as_str())
            .map(str::to_string)
            .unwrap_or_else(|| dir.rsplit('/').next().unwrap_or(dir).to_string());
        if package.skills.iter().any(|s| s.id == id) {
            return Err(format!("{dir}/SKILL.md: skill `{id}` is defined twice"));
        }
        let mut skill_files = Vec::new();
        for file in files.iter().filter(|f| in_dir(f, dir) && !is_model_file(f)) {
            // A nested skill directory's files belong to it, not to this one.
            let owner = skill_dirs
                .iter()
                .filter(|d| in_dir(file, d))
                .max_by_key(|d| d.len());
            if owner == Some(dir) {
                let rel = file[dir.len() + 1..].to_string();
                skill_files.push((rel, tree::read_bytes(root, file)?));
            }
        }
        skill_files.sort_by_key(|(p, _)| p != "SKILL.md");
        package.skills.push(SkillFile {
            id,
            dir: dir.clone(),
            files: skill_files,
        });
    }
    Ok(skill_dirs)
}

/// `.kdl` files are the model wherever they are (the core layout keeps `role.kdl` beside the
/// role's `SKILL.md`), never skill files.
fn is_model_file(file: &str) -> bool {
    file.ends_with(".kdl")
}

fn in_dir(file: &str, dir: &str) -> bool {
    file.len() > dir.len() + 1 && file.starts_with(dir) && file.as_bytes()[dir.len()] == b'/'
}

/// Sorts a file's top nodes into the package. A `.kdl` file that is not a package part (e.g. a
/// `compose` request) is left to the caller (`false`).
fn classify(package: &mut Package, file: &str, nodes: Vec<Node>) -> Result<bool, String> {
    let is_part = |n: &Node| {
        matches!(
            n.name.as_str(),
            "role" | "personality" | "boundary" | "inspiration"
        )
    };
    if nodes.is_empty() || !nodes.iter().all(is_part) {
        return Ok(false);
    }
    for node in nodes {
        let slug = node
            .arg0()
            .filter(|s| !s.is_empty())
            .ok_or_else(|| format!("{file}: `{}` has no name", node.name))?
            .to_string();
        let list = match node.name.as_str() {
            "role" => &mut package.roles,
            "personality" => &mut package.personalities,
            "boundary" => &mut package.boundaries,
            _ => &mut package.inspirations,
        };
        if list.iter().any(|e| e.slug() == slug) {
            return Err(format!("{file}: {} `{slug}` is defined twice", node.name));
        }
        list.push(Entry {
            file: file.to_string(),
            node,
        });
    }
    Ok(true)
}

fn first_symlink(root: &Path, dir: &str) -> Option<String> {
    let mut stack = vec![dir.to_string()];
    let mut seen = 0;
    while let Some(dir) = stack.pop() {
        for name in tree::list(root, &dir) {
            seen += 1;
            if seen > tree::MAX_ENTRIES {
                return None;
            }
            let child = if dir.is_empty() {
                name
            } else {
                format!("{dir}/{name}")
            };
            let meta = tree::join(root, &child)
                .ok()
                .and_then(|p| std::fs::symlink_metadata(p).ok())?;
            if meta.file_type().is_symlink() {
                return Some(child);
            }
            if meta.is_dir() {
                stack.push(child);
            }
        }
    }
    None
}
