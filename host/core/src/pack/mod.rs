//! Loading a persona pack from disk and checking it against the specification.
//!
//! [`load`] never panics and never stops at the first problem: it reads everything it safely can and
//! returns the pack (when the essentials are there) together with a [`Report`] of every finding.
//! Nothing in a pack is trusted: paths are kept inside the root, file sizes are capped before
//! reading, and text must be UTF-8.

pub mod behaviour;
pub mod frontmatter;
pub mod hooks;
pub mod manifest;
pub mod mcp;
pub mod paths;
pub mod persona;
pub mod plain_yaml;
pub mod skill;
pub mod source;
pub mod tool_names;
pub mod tool_policy;
pub mod woken_by;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use behaviour::{BehaviourLayer, TriggerLayer};
pub use hooks::HookSet;
pub use manifest::{Author, Manifest};
pub use mcp::McpServer;
pub use persona::Persona;
pub use skill::Skill;
pub use tool_policy::ToolPolicy;

use crate::diag::{Diagnostic, Report};
use source::{SourceFile, Syntax};

const MAX_MANIFEST: u64 = 1024 * 1024;
/// A persona is a prompt plus frontmatter; 2 MiB is far beyond any real one.
pub const MAX_PERSONA_FILE: u64 = 2 * 1024 * 1024;
const MAX_TEXT_FILE: u64 = 1024 * 1024;

/// A loaded pack: everything resolution needs, already checked.
#[derive(Debug, Clone)]
pub struct Pack {
    /// Canonical path of the pack directory.
    pub root: PathBuf,
    pub manifest: Manifest,
    pub personas: Vec<Persona>,
    /// `instructions.md` (or `pack_instructions`), normalised; `None` when absent or blank.
    pub instructions: Option<String>,
    /// Pack-level MCP servers from `.mcp.json`.
    pub mcp_servers: Vec<McpServer>,
    /// Pack-level hooks from `hooks/hooks.json`.
    pub hooks: HookSet,
    /// Every skill that parsed, by canonical directory.
    pub skills: BTreeMap<PathBuf, Skill>,
    /// Directories under `skills/`, in order.
    pub pack_skill_dirs: Vec<PathBuf>,
    /// For each persona (same order as `personas`), the skill directories its `skills:` claims.
    pub claimed_skill_dirs: Vec<Vec<PathBuf>>,
    /// Directories under `skills/` that no persona claims: every persona receives them.
    pub shared_skill_dirs: Vec<PathBuf>,
}

impl Pack {
    pub fn persona(&self, name: &str) -> Option<&Persona> {
        self.personas.iter().find(|p| p.name == name)
    }

    /// Load keys of the skills `persona_index` receives under §6 scoping: the skills it claims, plus
    /// every skill under `skills/` that no persona claims. Sorted, without duplicates.
    pub fn skills_for(&self, persona_index: usize) -> Vec<&Skill> {
        self.received_skills(&self.shared_skills(), persona_index)
    }

    /// [`Pack::skills_for`] of every persona, in persona order; the shared skills are looked up once.
    pub fn skills_of_all(&self) -> Vec<Vec<&Skill>> {
        let shared = self.shared_skills();
        (0..self.personas.len())
            .map(|i| self.received_skills(&shared, i))
            .collect()
    }

    /// The unclaimed skills, sorted by name.
    fn shared_skills(&self) -> Vec<&Skill> {
        let mut shared: Vec<&Skill> = self
            .shared_skill_dirs
            .iter()
            .filter_map(|d| self.skills.get(d))
            .collect();
        shared.sort_by(|a, b| a.name.cmp(&b.name));
        shared
    }

    fn received_skills<'a>(&'a self, shared: &[&'a Skill], persona_index: usize) -> Vec<&'a Skill> {
        let own = self.claimed_skill_dirs.get(persona_index);
        let mut out: Vec<&Skill> = own
            .into_iter()
            .flatten()
            .filter_map(|d| self.skills.get(d))
            .collect();
        // The persona's own skills first, so the stable sort keeps them ahead of a shared skill of
        // the same name, and the dedup keeps the persona's.
        let claims_any = !out.is_empty();
        out.extend_from_slice(shared);
        if claims_any {
            out.sort_by(|a, b| a.name.cmp(&b.name));
        }
        out.dedup_by(|a, b| a.name == b.name);
        out
    }
}

/// The outcome of loading: the pack when its essentials could be read, and every finding.
#[derive(Debug)]
pub struct Loaded {
    pub pack: Option<Pack>,
    pub report: Report,
}

/// Validates the pack at `dir`: every finding, sorted errors first.
pub fn validate(dir: &Path) -> Report {
    load(dir).report
}

pub fn load(dir: &Path) -> Loaded {
    let mut report = Report::default();
    let pack = load_into(dir, &mut report);
    report.sort();
    // A pack with errors is never handed on: resolution and installation need a valid pack.
    let pack = if report.has_errors() { None } else { pack };
    Loaded { pack, report }
}

fn load_into(dir: &Path, report: &mut Report) -> Option<Pack> {
    let root = pack_root(dir, report)?;
    let manifest = load_manifest(&root, report);
    check_pre_v6_layout(&root, manifest.as_ref(), report);
    let manifest = manifest?;
    skill::check_dir_links(&root, report);

    let entries: Vec<&str> = manifest
        .personas
        .iter()
        .map(String::as_str)
        .filter(|p| !p.ends_with(".json"))
        .collect();
    let personas = load_personas(&root, &entries, report);
    check_persona_set(&manifest, &personas, report);
    let files = load_pack_files(&root, &manifest, report);

    let pack_skill_dirs = skill::pack_skill_dirs(&root);
    let mut skills = BTreeMap::new();
    for d in &pack_skill_dirs {
        if let Some(s) = skill::load(&root, d, report) {
            skills.insert(d.clone(), s);
        }
    }
    let claimed_skill_dirs = check_personas(&root, &personas, &mut skills, report);
    note_env_refs(&manifest.id, &files.mcp_servers, &personas, report);
    skill::check_duplicate_names(&skills, report);

    let claimed: std::collections::HashSet<&PathBuf> =
        claimed_skill_dirs.iter().flatten().collect();
    let shared_skill_dirs = pack_skill_dirs
        .iter()
        .filter(|d| !claimed.contains(d))
        .cloned()
        .collect();
    Some(Pack {
        shared_skill_dirs,
        root,
        manifest,
        personas,
        instructions: files.instructions,
        mcp_servers: files.mcp_servers,
        hooks: files.hooks,
        skills,
        pack_skill_dirs,
        claimed_skill_dirs,
    })
}

/// The canonical pack directory; `None` (reported) when `dir` is not one.
fn pack_root(dir: &Path, report: &mut Report) -> Option<PathBuf> {
    match dir.canonicalize() {
        Ok(r) if r.is_dir() => Some(r),
        Ok(_) => {
            report.push(Diagnostic::error(
                "pack.not-dir",
                format!("{} is not a directory", dir.display()),
            ));
            None
        }
        Err(e) => {
            report.push(Diagnostic::error(
                "pack.not-found",
                format!("cannot open pack directory {}: {e}", dir.display()),
            ));
            None
        }
    }
}

/// The pack-level files besides the manifest.
struct PackFiles {
    instructions: Option<String>,
    mcp_servers: Vec<McpServer>,
    hooks: HookSet,
}

/// Reads `instructions.md`, `.mcp.json` and `hooks/hooks.json` (or the files the manifest names
/// instead); an absent one is empty.
fn load_pack_files(root: &Path, manifest: &Manifest, report: &mut Report) -> PackFiles {
    let instructions = load_optional_text(
        root,
        manifest.pack_instructions.as_deref(),
        "instructions.md",
        "pack_instructions",
        report,
    )
    .map(|(_, t)| persona::normalise_text(&t))
    .filter(|t| !t.is_empty());
    let mcp_servers = load_optional_text(
        root,
        manifest.mcp_config.as_deref(),
        ".mcp.json",
        "mcp_config",
        report,
    )
    .map(|(rel, text)| {
        let src = SourceFile::new(rel, text, Syntax::Json);
        src.register(report);
        mcp::parse_mcp_json(&src, report)
    })
    .unwrap_or_default();
    let hooks = load_optional_text(
        root,
        manifest.hooks_config.as_deref(),
        "hooks/hooks.json",
        "hooks_config",
        report,
    )
    .map(|(rel, text)| {
        let src = SourceFile::new(rel, text, Syntax::Json);
        src.register(report);
        let hooks = hooks::parse_hooks_json(&src, report);
        hooks::check_paths(root, &hooks, &src, &[], report);
        hooks
    })
    .unwrap_or_default();
    PackFiles {
        instructions,
        mcp_servers,
        hooks,
    }
}

/// What each persona's files refer to: its `skills:` (loaded into `skills` when not yet there),
/// its hooks' paths, its other extras. Returns, per persona, the skill directories it claims.
fn check_personas(
    root: &Path,
    personas: &[Persona],
    skills: &mut BTreeMap<PathBuf, Skill>,
    report: &mut Report,
) -> Vec<Vec<PathBuf>> {
    let mut claimed_skill_dirs = Vec::with_capacity(personas.len());
    // Personas of one pack tend to name the same few skills: resolve each entry once.
    let mut references: HashMap<&str, Result<paths::Resolved, paths::PathError>> = HashMap::new();
    let mut checked = paths::CheckedDirs::default();
    for p in personas {
        let src = &p.source;
        let mut dirs = Vec::new();
        for entry in &p.skills {
            let resolved = references
                .entry(entry.as_str())
                .or_insert_with(|| skill::resolve_reference(root, entry, &mut checked))
                .clone();
            match resolved.map(|r| (r.is_dir, r.path)) {
                Ok((true, d)) => {
                    if !skills.contains_key(&d)
                        && let Some(s) = skill::load(root, &d, report)
                    {
                        skills.insert(d.clone(), s);
                    }
                    dirs.push(d);
                }
                Ok(_) => report.push(src.diag(
                    Diagnostic::error(
                        "persona.skill-path",
                        format!("skill `{entry}` is not a directory"),
                    ),
                    &["skills"],
                )),
                Err(e) => {
                    let d = Diagnostic::error("persona.skill-path", format!("skill `{entry}`: {e}"))
                        .help("list skill directories relative to the pack root, e.g. ./skills/code-review/");
                    report.push(src.diag(d, &["skills"]));
                }
            }
        }
        hooks::check_paths(root, &p.hooks, src, &["hooks"], report);
        check_persona_extras(root, p, src, report);
        claimed_skill_dirs.push(dirs);
    }
    claimed_skill_dirs
}

fn load_manifest(root: &Path, report: &mut Report) -> Option<Manifest> {
    let path = match paths::resolve_inside(root, manifest::MANIFEST_PATH) {
        Ok(p) => p,
        Err(paths::PathError::NotFound(_)) => {
            let mut d = Diagnostic::error(
                "pack.no-manifest",
                format!("no {} in {}", manifest::MANIFEST_PATH, root.display()),
            );
            d = if root.join(".claude-plugin/plugin.json").is_file()
                || root.join("plugin.json").is_file()
                || root.join("expert.toml").is_file()
            {
                d.help("this looks like another plugin format: try `apiary convert <dir> --to buzz-pack`")
            } else {
                d.help("a persona pack has its manifest at .plugin/plugin.json")
            };
            report.push(d);
            return None;
        }
        Err(e) => {
            report.push(
                Diagnostic::error("pack.manifest-path", e.to_string())
                    .in_file(manifest::MANIFEST_PATH),
            );
            return None;
        }
    };
    let text = read_text(
        &path,
        manifest::MANIFEST_PATH.as_ref(),
        MAX_MANIFEST,
        report,
    )?;
    let text = strip_bom(manifest::MANIFEST_PATH.as_ref(), text, report);
    let src = SourceFile::new(manifest::MANIFEST_PATH, text, Syntax::Json);
    src.register(report);
    manifest::parse(&src, report)
}

/// Reads a capped UTF-8 file; problems become diagnostics on `rel`.
fn read_text(path: &Path, rel: &Path, limit: u64, report: &mut Report) -> Option<String> {
    read_text_sized(path, rel, limit, None, report)
}

fn read_text_sized(
    path: &Path,
    rel: &Path,
    limit: u64,
    known_len: Option<u64>,
    report: &mut Report,
) -> Option<String> {
    let bytes = match source::read_limited_sized(path, limit, known_len) {
        Ok(b) => b,
        Err(e) => {
            report.push(Diagnostic::error("pack.read", e.to_string()).in_file(rel));
            return None;
        }
    };
    source::decode(bytes)
        .map_err(|e| report.push(not_utf8(e, rel)))
        .ok()
}

/// The bytes read, as shared text of exact size; invalid UTF-8 is reported.
fn shared_text(buf: &[u8], rel: &Path, report: &mut Report) -> Option<Arc<str>> {
    source::decode_str(buf)
        .map(Arc::from)
        .map_err(|e| report.push(not_utf8(e, rel)))
        .ok()
}

fn not_utf8(e: source::NotUtf8, rel: &Path) -> Diagnostic {
    Diagnostic::error("pack.utf8", e.to_string())
        .in_file(rel)
        .help("save the file as UTF-8")
}

/// Persona files are independent, so a large pack parses them on every core; results are merged in
/// manifest order, so the output does not depend on scheduling.
fn load_personas(root: &Path, entries: &[&str], report: &mut Report) -> Vec<Persona> {
    /// Personas per batch: small enough that a late-starting or slower thread holds up no one,
    /// large enough that taking a batch costs nothing next to parsing it.
    const BATCH: usize = 8;
    const MIN_PER_THREAD: usize = 16;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let threads = cores.min(entries.len() / MIN_PER_THREAD).max(1);
    let lookup: &Report = report;
    let batches: Vec<&[&str]> = entries.chunks(BATCH).collect();
    let next = std::sync::atomic::AtomicUsize::new(0);
    // Every thread takes the next unparsed batch until none is left; each batch has its own
    // report, and merging them in batch order keeps the findings in manifest order whichever
    // thread parsed what.
    let parse_batches = || -> Vec<(usize, Vec<Option<Persona>>, Report)> {
        let mut checked = paths::CheckedDirs::default();
        let mut buf = Vec::new();
        let mut done = Vec::new();
        loop {
            let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let Some(batch) = batches.get(i) else {
                return done;
            };
            let mut out = Report::default();
            let personas = batch
                .iter()
                .map(|entry| load_persona(root, entry, lookup, &mut checked, &mut buf, &mut out))
                .collect();
            done.push((i, personas, out));
        }
    };
    let mut results = if threads == 1 {
        parse_batches()
    } else {
        std::thread::scope(|s| {
            let workers: Vec<_> = (1..threads).map(|_| s.spawn(parse_batches)).collect();
            // This thread parses too: its allocations come from the main heap, and it carries on
            // alone if the others start late.
            let mut all = parse_batches();
            for w in workers {
                all.extend(
                    w.join()
                        .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
                );
            }
            all
        })
    };
    results.sort_unstable_by_key(|(i, ..)| *i);
    let mut personas = Vec::with_capacity(entries.len());
    for (_, parsed, found) in results {
        report.extend(found);
        personas.extend(parsed.into_iter().flatten());
    }
    personas
}

/// Reads and parses one persona; `lookup` holds the manifest text for locating the entry, `buf` is
/// the read buffer.
fn load_persona(
    root: &Path,
    entry: &str,
    lookup: &Report,
    checked: &mut paths::CheckedDirs,
    buf: &mut Vec<u8>,
    report: &mut Report,
) -> Option<Persona> {
    let (path, file, len) = match paths::open(root, entry, checked) {
        Ok(paths::Opened::File { path, file, len }) => (path, file, len),
        Ok(paths::Opened::NotAFile) => {
            let d = Diagnostic::error(
                "manifest.persona-path",
                format!("persona `{entry}` is not a file"),
            )
            .in_file(manifest::MANIFEST_PATH);
            report.push(locate_in_manifest(lookup, d, entry));
            return None;
        }
        Err(e) => {
            let d = Diagnostic::error("manifest.persona-path", format!("persona `{entry}`: {e}"))
                .in_file(manifest::MANIFEST_PATH);
            report.push(locate_in_manifest(lookup, d, entry));
            return None;
        }
    };
    let rel = paths::relative_to(root, &path);
    // Spec §3: `agents/` is flat; a runtime that scans it finds no persona further down.
    let mut parts = rel.components();
    if parts.next().is_some_and(|c| c.as_os_str() == "agents") && parts.count() > 1 {
        let d = Diagnostic::warning(
            "manifest.persona-nested",
            format!("persona `{entry}` is nested below agents/; the spec keeps agents/ flat"),
        )
        .in_file(manifest::MANIFEST_PATH)
        .help("move the file directly into agents/ and update `personas`");
        report.push(locate_in_manifest(lookup, d, entry));
    }
    if !entry.ends_with(".persona.md") {
        let d = Diagnostic::warning(
            "manifest.persona-ext",
            format!("persona `{entry}` does not end in .persona.md"),
        )
        .in_file(manifest::MANIFEST_PATH);
        report.push(locate_in_manifest(lookup, d, entry));
    }
    if let Err(e) = source::read_limited_from(file, MAX_PERSONA_FILE, Some(len), buf) {
        report.push(Diagnostic::error("pack.read", e.to_string()).in_file(&rel));
        return None;
    }
    let text = shared_text(buf, &rel, report)?;
    persona::parse(rel, text, report)
}

/// Points a manifest diagnostic at the place the entry is written.
fn locate_in_manifest(report: &Report, d: Diagnostic, needle: &str) -> Diagnostic {
    match report_source(report, Path::new(manifest::MANIFEST_PATH)) {
        Some(text) => match text.find(&format!("\"{needle}\"")) {
            Some(off) => d.at(&text, off, needle.len() + 2),
            None => d,
        },
        None => d,
    }
}

fn report_source(report: &Report, file: &Path) -> Option<String> {
    report.source(file).map(|s| s.to_string())
}

fn check_persona_set(manifest: &Manifest, personas: &[Persona], report: &mut Report) {
    if manifest.personas.is_empty() {
        report.push(
            Diagnostic::error("pack.no-personas", "the pack contains zero personas")
                .in_file(manifest::MANIFEST_PATH)
                .help("list persona files in `personas`, e.g. [\"agents/pip.persona.md\"]"),
        );
    }
    let mut seen: HashMap<&str, &Path> = HashMap::new();
    for p in personas {
        if let Some(first) = seen.insert(&p.name, &p.file) {
            let d = Diagnostic::error(
                "pack.duplicate-persona",
                format!(
                    "persona name \"{}\" is used twice (also in {})",
                    p.name,
                    first.display()
                ),
            )
            .in_file(&p.file)
            .help("persona names are agent ids and must be unique within a pack");
            report.push(d);
        }
    }
}

/// Optional pack file: an explicit manifest path must exist; otherwise the conventional file is used
/// when present.
fn load_optional_text(
    root: &Path,
    explicit: Option<&str>,
    default: &str,
    key: &str,
    report: &mut Report,
) -> Option<(PathBuf, String)> {
    let rel = explicit.unwrap_or(default);
    let path = match paths::resolve_inside(root, rel) {
        Ok(p) if p.is_file() => p,
        Ok(_) => {
            report.push(
                Diagnostic::error("manifest.path", format!("`{key}`: `{rel}` is not a file"))
                    .in_file(manifest::MANIFEST_PATH),
            );
            return None;
        }
        Err(paths::PathError::NotFound(_)) if explicit.is_none() => return None,
        Err(e) => {
            let d = Diagnostic::error("manifest.path", format!("`{key}`: {e}"))
                .in_file(manifest::MANIFEST_PATH);
            report.push(locate_in_manifest(report, d, rel));
            return None;
        }
    };
    let rel = paths::relative_to(root, &path);
    let text = read_text(&path, &rel, MAX_TEXT_FILE, report)?;
    let text = strip_bom(&rel, text, report);
    Some((rel, text))
}

/// A UTF-8 byte-order mark (Windows editors write one) is accepted with a warning: JSON parsers and
/// the prompt would otherwise choke on or carry the invisible character.
fn strip_bom(rel: &Path, text: String, report: &mut Report) -> String {
    match text.strip_prefix('\u{feff}') {
        Some(rest) => {
            report.push(
                Diagnostic::warning(
                    "pack.bom",
                    "the file starts with a UTF-8 byte-order mark; it was ignored",
                )
                .in_file(rel)
                .help("save the file as UTF-8 without BOM"),
            );
            rest.to_string()
        }
        None => text,
    }
}

fn check_persona_extras(root: &Path, p: &Persona, src: &SourceFile, report: &mut Report) {
    if let Some(avatar) = &p.avatar {
        match paths::resolve_inside(root, avatar) {
            Ok(_) => {}
            Err(paths::PathError::NotFound(_)) => report.push(src.diag(
                Diagnostic::warning(
                    "persona.avatar",
                    format!("avatar `{avatar}` does not exist in the pack"),
                ),
                &["avatar"],
            )),
            Err(e) => report.push(src.diag(
                Diagnostic::error("persona.avatar", format!("avatar: {e}")),
                &["avatar"],
            )),
        }
    }
    if let Some(v) = &p.version
        && semver::Version::parse(v).is_err()
    {
        report.push(src.diag(
            Diagnostic::warning(
                "persona.version",
                format!("`version` \"{v}\" is not a semantic version"),
            ),
            &["version"],
        ));
    }
    if let Some(rt) = &p.runtime
        && crate::runtime::Runtime::find(rt).is_none()
    {
        let known = crate::runtime::Runtime::names().join(", ");
        let d = Diagnostic::warning(
            "persona.runtime",
            format!("unknown runtime `{rt}`; its model settings will use goose's variables"),
        )
        .help(format!("known runtimes: {known}"));
        report.push(src.diag(d, &["runtime"]));
    }
}

/// Pre-V6 packs keep JSON personas under `personas/`; point them at the migration.
fn check_pre_v6_layout(root: &Path, manifest: Option<&Manifest>, report: &mut Report) {
    let listed = manifest.is_some_and(|m| !m.personas.is_empty());
    if listed {
        return;
    }
    let Ok(entries) = std::fs::read_dir(root.join("personas")) else {
        return;
    };
    let json: Vec<String> = entries
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".json"))
        .collect();
    if !json.is_empty() {
        let d = Diagnostic::error(
            "pack.pre-v6",
            format!(
                "found pre-V6 JSON personas in personas/: {}",
                json.join(", ")
            ),
        )
        .help(manifest::MIGRATE_HINT);
        report.push(d);
    }
}

/// Which `${VAR}`s the pack's MCP servers read from the operator's environment: each one a server
/// cannot do without needs the operator's allow-list, so the pack author should say so. One only
/// ever written `${VAR:-default}` is optional (its default applies unless allowed and set): a note.
fn note_env_refs(pack_id: &str, pack: &[McpServer], personas: &[Persona], report: &mut Report) {
    let servers: Vec<&McpServer> = pack
        .iter()
        .chain(personas.iter().flat_map(|p| &p.mcp_servers))
        .collect();
    let mut vars: Vec<String> = servers.iter().flat_map(|s| s.required_env_refs()).collect();
    vars.sort_unstable();
    vars.dedup();
    let mut optional: Vec<&str> = servers
        .iter()
        .flat_map(|s| s.env_refs.iter().map(String::as_str))
        .filter(|v| !vars.iter().any(|r| r == v))
        .collect();
    optional.sort_unstable();
    optional.dedup();
    if !optional.is_empty() {
        let list = optional
            .iter()
            .map(|v| format!("${{{v}:-…}}"))
            .collect::<Vec<_>>()
            .join(", ");
        report.push(
            Diagnostic::note("mcp.env-optional", format!("MCP servers read these variables only when the operator allows them, else use their defaults: {list}"))
                .help(format!("to pass the operator's value instead of the default, allow it in the overrides file: [\"{pack_id}\"] allow_env = [...]")),
        );
    }
    if !vars.is_empty() {
        let list = vars
            .iter()
            .map(|v| format!("${{{v}}}"))
            .collect::<Vec<_>>()
            .join(", ");
        let quoted = vars
            .iter()
            .map(|v| format!("\"{v}\""))
            .collect::<Vec<_>>()
            .join(", ");
        report.push(
            Diagnostic::warning("mcp.env-refs", format!("MCP servers read these variables from the operator's environment: {list}; each needs the operator's allow-list"))
                .help(format!("apiary fills a ${{VAR}} only from variables the operator allows for this pack, in the overrides file: [\"{pack_id}\"] allow_env = [{quoted}]; a persona whose variable is not allowed, or unset, is refused")),
        );
    }
}

/// An environment variable's name as a shell takes it: `[A-Za-z_][A-Za-z0-9_]*`.
pub fn is_var_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(root: &Path, rel: &str, text: &str) {
        let path = root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    fn persona(name: &str, skills: &str) -> String {
        format!("---\nname: {name}\ndisplay_name: {name}\ndescription: d\n{skills}---\nprompt\n")
    }

    #[test]
    fn a_claimed_skill_wins_over_a_shared_one_of_the_same_name() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(
            root,
            ".plugin/plugin.json",
            r#"{"id":"t","name":"t","version":"1.0.0","personas":["agents/a.persona.md","agents/b.persona.md"]}"#,
        );
        write(
            root,
            "agents/a.persona.md",
            &persona("a", "skills: [./skills/own/]\n"),
        );
        write(root, "agents/b.persona.md", &persona("b", ""));
        for d in ["own", "shared"] {
            write(
                root,
                &format!("skills/{d}/SKILL.md"),
                "---\nname: review\ndescription: d\n---\nbody\n",
            );
        }
        let pack = load(root).pack.expect("valid pack");
        let a = pack.skills_for(0);
        assert_eq!(a.len(), 1);
        assert!(a[0].dir.ends_with("skills/own"), "{:?}", a[0].dir);
        let b = pack.skills_for(1);
        assert!(b.len() == 1 && b[0].dir.ends_with("skills/shared"));
        let all = pack.skills_of_all();
        assert_eq!(all[0][0].dir, a[0].dir);
        assert_eq!(all[1][0].dir, b[0].dir);
    }
}
