//! A persona's workspace (`$AGENT_CWD`) and the skills copied into it (spec §6): pack skills go to
//! `<cwd>/.agents/skills/<load key>/`; a skill there with the same load key is never overwritten
//! (operators pin their own versions), and each such collision is reported (PF-3). apiary's own
//! earlier copy of a skill the pack has since changed is updated.
//!
//! A workspace is written by the persona's hooks and its agent, so nothing found in it is trusted:
//! every operation goes through capability handles ([`cap_std::fs::Dir`]) that cannot resolve a
//! path outside the directory they were opened on, and the directories apiary creates or copies
//! into are opened without following a link at all. A link a hook planted (`.agents/skills ->
//! ../../../victim`) makes the copy fail with an error naming it; nothing is written through it.
//! The pack side is read the same way: through a handle on the pack root, links not followed.

use std::io;
use std::path::{Path, PathBuf};

use cap_fs_ext::{DirExt, FollowSymlinks, OpenOptionsFollowExt};
use cap_std::fs::{Dir, DirBuilder, OpenOptions};

use super::skill_record;
use crate::pack::Skill;

/// Caps for one skill copy: hostile packs must not fill the disk.
const MAX_ENTRIES: usize = 256;
const MAX_BYTES: u64 = 64 * 1024 * 1024;
/// Nesting of one skill's directories; deeper is refused rather than recursed into.
const MAX_DEPTH: usize = 16;

/// `<root>/<namespace>/<persona>/`. The namespace is the pack's identity, decided by the caller
/// (`apiary up` asks `dist::identity`): its id when it owns the id, `<id>@<digest>` otherwise.
pub fn persona_dir(root: &Path, namespace: &str, persona: &str) -> PathBuf {
    root.join(component(namespace)).join(component(persona))
}

/// A namespace or persona name as one directory name: anything but `[A-Za-z0-9._@-]` becomes `_`
/// (`@` separates a pack id from a directory digest; pack ids never contain it), and
/// leading dots go (so never `.`, `..` or hidden). Both are validated before they get here; this
/// keeps the workspace path one level per name whatever reaches it.
fn component(s: &str) -> String {
    let clean: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | '@') {
                c
            } else {
                '_'
            }
        })
        .collect::<String>()
        .trim_start_matches('.')
        .to_string();
    if clean.is_empty() {
        "_".to_string()
    } else {
        clean
    }
}

/// A persona's workspace: its path (for the agent's `cwd` and the hooks' preopen) and a handle
/// confined to it.
pub struct Workspace {
    pub path: PathBuf,
    pub dir: Dir,
}

/// Creates (when missing) and opens `<root>/<namespace>/<persona>/`. The root is the operator's; the
/// two levels below it are created and opened without following links, so a workspace that
/// someone replaced with a link is refused instead of used.
/// Every error names the path it is about, and a workspace the agent could not write in is refused
/// here rather than failing the agent's first turn (spec §6/PF-4 refuses to start without one).
pub fn open(root: &Path, namespace: &str, persona: &str) -> io::Result<Workspace> {
    std::fs::create_dir_all(root).map_err(|e| explain(e, root))?;
    let root = root.canonicalize().map_err(|e| explain(e, root))?;
    let mut dir = Dir::open_ambient_dir(&root, cap_std::ambient_authority())
        .map_err(|e| explain(e, &root))?;
    let mut path = root;
    for name in [component(namespace), component(persona)] {
        path.push(&name);
        dir = ensure_dir(&dir, &name).map_err(|e| explain(e, &path))?;
    }
    check_writable(&dir).map_err(|e| explain(e, &path))?;
    Ok(Workspace { path, dir })
}

/// Creates and removes a probe file: permissions, a read-only mount or a full quota show here.
fn check_writable(dir: &Dir) -> io::Result<()> {
    let probe = format!(".apiary-write-probe-{}", std::process::id());
    let mut options = OpenOptions::new();
    options.write(true).create(true).truncate(true);
    options.follow(FollowSymlinks::No);
    dir.open_with(&probe, &options)
        .map_err(|e| io::Error::new(e.kind(), format!("is not writable ({e})")))?;
    dir.remove_file(&probe)
}

/// Creates `name` in `parent` when missing (mode 0700: workspaces hold the agents' work) and opens
/// it, refusing a symbolic link.
fn ensure_dir(parent: &Dir, name: &str) -> io::Result<Dir> {
    let mut builder = DirBuilder::new();
    #[cfg(unix)]
    cap_std::fs::DirBuilderExt::mode(&mut builder, 0o700);
    match parent.create_dir_with(name, &builder) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    parent.open_dir_nofollow(name).map_err(|e| {
        match parent.symlink_metadata(name) {
            Ok(m) if m.file_type().is_symlink() => io::Error::new(
                io::ErrorKind::PermissionDenied,
                "is a symbolic link; apiary does not follow links inside a workspace (a hook or an agent may have planted it): remove it",
            ),
            Ok(m) if !m.is_dir() => io::Error::new(
                io::ErrorKind::AlreadyExists,
                "exists and is not a directory: remove it",
            ),
            _ => e,
        }
    })
}

/// `<path>: <error>`.
fn explain(e: io::Error, path: &Path) -> io::Error {
    io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

/// What happened to each skill.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct SkillCopy {
    pub copied: Vec<String>,
    /// Skills apiary had copied before and the pack has changed since: replaced by the new version.
    pub updated: Vec<String>,
    /// Collision warnings, in the spec's wording.
    pub skipped: Vec<String>,
}

/// Copies `skills` (from the pack at `pack_root`) into `<workspace>/.agents/skills/`. A skill whose
/// load key is already there (whatever the directory is called) is the operator's and is never
/// overwritten, unless it is apiary's own earlier copy, unchanged since: then a newer pack version
/// replaces it (see [`skill_record`]).
pub fn copy_skills(ws: &Workspace, pack_root: &Path, skills: &[&Skill]) -> io::Result<SkillCopy> {
    let mut out = SkillCopy::default();
    if skills.is_empty() {
        return Ok(out);
    }
    let agents_path = ws.path.join(".agents");
    let agents = ensure_dir(&ws.dir, ".agents").map_err(|e| explain(e, &agents_path))?;
    let dest_path = agents_path.join("skills");
    let dest = ensure_dir(&agents, "skills").map_err(|e| explain(e, &dest_path))?;
    let pack = Dir::open_ambient_dir(pack_root, cap_std::ambient_authority())
        .map_err(|e| explain(e, pack_root))?;
    let mut record = skill_record::Record::load(&agents);
    let before = skill_record::Record(record.0.clone());
    let held = skill_record::load_keys(&dest);
    for skill in skills {
        let fail =
            |e: io::Error| io::Error::new(e.kind(), format!("copying skill `{}`: {e}", skill.name));
        // The pack was validated, but the name becomes a directory name here whatever happened
        // since: only a safe load key is ever joined.
        crate::pack::skill::check_load_key(&skill.name).map_err(|why| {
            fail(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("the name {why}"),
            ))
        })?;
        // The skill directory, opened through the pack root: a path leading out of it fails.
        let from = pack.open_dir(&skill.rel).map_err(|e| {
            fail(io::Error::new(
                e.kind(),
                format!("cannot open {} in the pack: {e}", skill.rel.display()),
            ))
        })?;
        let holder = if dest.symlink_metadata(&skill.name).is_ok() {
            Some(skill.name.clone())
        } else {
            held.get(&skill.name).cloned()
        };
        let Some(holder) = holder else {
            copy_one(&dest, &from, &skill.name, false).map_err(fail)?;
            record_copy(&mut record, &dest, &skill.name);
            out.copied.push(skill.name.clone());
            continue;
        };
        let recorded = record.0.get(&skill.name);
        let ours = holder == skill.name
            && recorded.is_some()
            && dest
                .open_dir_nofollow(&skill.name)
                .and_then(|d| skill_record::tree_digest(&d))
                .ok()
                .as_ref()
                == recorded;
        if !ours {
            out.skipped.push(format!(
                "Skill \"{}\" already exists at .agents/skills/{holder}/; skipping pack version",
                skill.name
            ));
            continue;
        }
        if skill_record::tree_digest(&from).ok().as_ref() != recorded {
            copy_one(&dest, &from, &skill.name, true).map_err(fail)?;
            record_copy(&mut record, &dest, &skill.name);
            out.updated.push(skill.name.clone());
        }
    }
    if record != before {
        record
            .save(&agents)
            .map_err(|e| explain(e, &agents_path.join(skill_record::RECORD)))?;
    }
    Ok(out)
}

/// Notes the digest of the copy just made (not of the pack: the pack may change under us).
fn record_copy(record: &mut skill_record::Record, dest: &Dir, name: &str) {
    match dest
        .open_dir_nofollow(name)
        .and_then(|d| skill_record::tree_digest(&d))
    {
        Ok(digest) => record.0.insert(name.to_string(), digest),
        Err(_) => record.0.remove(name),
    };
}

/// Copies `from` to `dest/<name>` through a temporary sibling, so a failed copy leaves nothing half
/// written; with `replace`, the old directory is moved aside and removed once the new one is in.
fn copy_one(dest: &Dir, from: &Dir, name: &str, replace: bool) -> io::Result<()> {
    let tmp = format!(".{name}.partial-{}", std::process::id());
    let _ = dest.remove_dir_all(&tmp);
    let mut budget = Budget {
        entries: MAX_ENTRIES,
        bytes: MAX_BYTES,
    };
    let result = ensure_dir(dest, &tmp).and_then(|to| copy_tree(from, &to, &mut budget, 0));
    if let Err(e) = result {
        let _ = dest.remove_dir_all(&tmp);
        return Err(e);
    }
    if replace {
        let old = format!(".{name}.old-{}", std::process::id());
        let _ = dest.remove_dir_all(&old);
        if let Err(e) = dest.rename(name, dest, &old) {
            let _ = dest.remove_dir_all(&tmp);
            return Err(e);
        }
        dest.rename(&tmp, dest, name)?;
        let _ = dest.remove_dir_all(&old);
        return Ok(());
    }
    dest.rename(&tmp, dest, name)
}

struct Budget {
    entries: usize,
    bytes: u64,
}

impl Budget {
    fn take(&mut self, bytes: u64) -> io::Result<()> {
        if self.entries == 0 || self.bytes < bytes {
            return Err(io::Error::other(format!(
                "the skill is larger than {MAX_ENTRIES} files and directories or {} MiB",
                MAX_BYTES >> 20
            )));
        }
        self.entries -= 1;
        self.bytes -= bytes;
        Ok(())
    }
}

/// Regular files and directories only; links, FIFOs, devices and sockets in a pack are not copied
/// (nor followed, nor opened).
fn copy_tree(from: &Dir, to: &Dir, budget: &mut Budget, depth: usize) -> io::Result<()> {
    if depth > MAX_DEPTH {
        return Err(io::Error::other(format!(
            "the skill nests deeper than {MAX_DEPTH} directories"
        )));
    }
    for entry in from.entries()? {
        let entry = entry?;
        let name = entry.file_name();
        let kind = entry.file_type()?;
        if kind.is_dir() {
            budget.take(0)?;
            let sub_from = from.open_dir_nofollow(&name)?;
            to.create_dir(&name)?;
            let sub_to = to.open_dir_nofollow(&name)?;
            copy_tree(&sub_from, &sub_to, budget, depth + 1)?;
        } else if kind.is_file() {
            copy_file(from, to, &name, budget)?;
        }
    }
    Ok(())
}

fn copy_file(from: &Dir, to: &Dir, name: &std::ffi::OsStr, budget: &mut Budget) -> io::Result<()> {
    let mut read = OpenOptions::new();
    read.read(true).follow(FollowSymlinks::No);
    // A FIFO swapped in since the listing must not hold the start up.
    #[cfg(unix)]
    cap_std::fs::OpenOptionsExt::custom_flags(&mut read, libc::O_NONBLOCK);
    let src = from.open_with(name, &read)?;
    let meta = src.metadata()?;
    // Swapped for something else since the directory was listed: skipped, like any special file.
    if !meta.is_file() {
        return Ok(());
    }
    budget.take(meta.len())?;
    let mut write = OpenOptions::new();
    write.write(true).create_new(true);
    #[cfg(unix)]
    {
        use cap_std::fs::PermissionsExt;
        // Keeps a script executable; drops set-id bits and write access for others.
        let mode = meta.permissions().mode() & 0o755;
        cap_std::fs::OpenOptionsExt::mode(&mut write, mode | 0o600);
    }
    let mut dst = to.open_with(name, &write)?;
    // A file that grew since its size was taken is cut at that size, within the budget.
    io::copy(&mut io::Read::take(src, meta.len()), &mut dst)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn skill(root: &Path, name: &str) -> Skill {
        let rel = PathBuf::from("skills").join(name);
        Skill {
            name: name.into(),
            description: "d".into(),
            dir: root.join(&rel),
            rel,
        }
    }

    fn pack_with_review(root: &Path) {
        let src = root.join("skills/review");
        std::fs::create_dir_all(src.join("docs")).unwrap();
        std::fs::write(
            src.join("SKILL.md"),
            "---\nname: review\ndescription: d\n---\n",
        )
        .unwrap();
        std::fs::write(src.join("docs/a.md"), "a").unwrap();
    }

    #[test]
    fn copies_once_and_warns_on_collision() {
        let tmp = tempfile::tempdir().unwrap();
        let pack = tmp.path().join("pack");
        pack_with_review(&pack);
        let review = skill(&pack, "review");
        let ws = open(&tmp.path().join("ws"), "com.x", "pip").unwrap();
        let cwd = ws.path.clone();
        assert_eq!(cwd, persona_dir(&tmp.path().join("ws"), "com.x", "pip"));
        let first = copy_skills(&ws, &pack, &[&review]).unwrap();
        assert_eq!(first.copied, ["review"]);
        assert!(cwd.join(".agents/skills/review/docs/a.md").is_file());
        std::fs::write(cwd.join(".agents/skills/review/SKILL.md"), "pinned").unwrap();
        let second = copy_skills(&ws, &pack, &[&review]).unwrap();
        assert!(second.copied.is_empty());
        assert!(second.skipped[0].contains("already exists at .agents/skills/review/"));
        assert_eq!(
            std::fs::read_to_string(cwd.join(".agents/skills/review/SKILL.md")).unwrap(),
            "pinned"
        );
    }

    #[test]
    fn an_unchanged_copy_is_quiet_and_a_changed_pack_skill_is_updated() {
        let tmp = tempfile::tempdir().unwrap();
        let pack = tmp.path().join("pack");
        pack_with_review(&pack);
        let review = skill(&pack, "review");
        let ws = open(&tmp.path().join("ws"), "com.x", "pip").unwrap();
        copy_skills(&ws, &pack, &[&review]).unwrap();
        let again = copy_skills(&ws, &pack, &[&review]).unwrap();
        assert_eq!(
            again,
            SkillCopy::default(),
            "its own copy is not a collision"
        );

        std::fs::write(pack.join("skills/review/docs/a.md"), "a, version 2").unwrap();
        let upgraded = copy_skills(&ws, &pack, &[&review]).unwrap();
        assert_eq!(upgraded.updated, ["review"]);
        assert!(upgraded.skipped.is_empty(), "{:?}", upgraded.skipped);
        let copied = ws.path.join(".agents/skills/review/docs/a.md");
        assert_eq!(std::fs::read_to_string(&copied).unwrap(), "a, version 2");

        // Once the operator edits the copy it is theirs: pinned, and the pack's change is skipped.
        std::fs::write(&copied, "operator's").unwrap();
        std::fs::write(pack.join("skills/review/docs/a.md"), "a, version 3").unwrap();
        let pinned = copy_skills(&ws, &pack, &[&review]).unwrap();
        assert!(pinned.updated.is_empty());
        assert_eq!(pinned.skipped.len(), 1);
        assert_eq!(std::fs::read_to_string(&copied).unwrap(), "operator's");
    }

    #[test]
    fn a_collision_is_by_load_key_not_directory_name() {
        let tmp = tempfile::tempdir().unwrap();
        let pack = tmp.path().join("pack");
        pack_with_review(&pack);
        let review = skill(&pack, "review");
        let ws = open(&tmp.path().join("ws"), "com.x", "pip").unwrap();
        let mine = ws.path.join(".agents/skills/my-review");
        std::fs::create_dir_all(&mine).unwrap();
        std::fs::write(
            mine.join("SKILL.md"),
            "---\nname: \"review\"\ndescription: the operator's\n---\n",
        )
        .unwrap();
        let copy = copy_skills(&ws, &pack, &[&review]).unwrap();
        assert!(copy.copied.is_empty(), "{copy:?}");
        assert_eq!(
            copy.skipped,
            ["Skill \"review\" already exists at .agents/skills/my-review/; skipping pack version"]
        );
        assert!(!ws.path.join(".agents/skills/review").exists());
    }

    #[cfg(unix)]
    #[test]
    fn links_planted_in_the_workspace_or_the_pack_are_not_followed() {
        use std::os::unix::fs::symlink;
        let tmp = tempfile::tempdir().unwrap();
        let victim = tmp.path().join("victim");
        std::fs::create_dir(&victim).unwrap();
        let pack = tmp.path().join("pack");
        pack_with_review(&pack);
        // A link inside the skill leading out of the pack is neither followed nor copied.
        symlink(&victim, pack.join("skills/review/out")).unwrap();
        std::fs::write(victim.join("secret"), "s").unwrap();
        let review = skill(&pack, "review");
        let root = tmp.path().join("ws");

        // `.agents/skills` planted as a relative link out of the workspace.
        let ws = open(&root, "p", "a").unwrap();
        std::fs::create_dir(ws.path.join(".agents")).unwrap();
        symlink("../../../../victim", ws.path.join(".agents/skills")).unwrap();
        let e = copy_skills(&ws, &pack, &[&review]).unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        assert!(e.to_string().contains(".agents/skills"), "{e}");
        // `.agents` itself as a link, and an absolute one.
        let ws = open(&root, "p", "b").unwrap();
        symlink(&victim, ws.path.join(".agents")).unwrap();
        assert!(copy_skills(&ws, &pack, &[&review]).is_err());
        // The persona workspace replaced by a link.
        std::fs::create_dir(root.join("q")).unwrap();
        symlink(&victim, root.join("q/c")).unwrap();
        let e = open(&root, "q", "c").err().expect("refused");
        assert!(e.to_string().contains("symbolic link"), "{e}");
        assert_eq!(
            std::fs::read_dir(&victim).unwrap().count(),
            1,
            "the victim directory is untouched"
        );

        // A clean workspace gets the skill, without the pack's outbound link.
        let ws = open(&root, "p", "d").unwrap();
        copy_skills(&ws, &pack, &[&review]).unwrap();
        let copied = ws.path.join(".agents/skills/review");
        assert!(copied.join("docs/a.md").is_file());
        assert!(std::fs::symlink_metadata(copied.join("out")).is_err());
    }

    #[cfg(unix)]
    #[test]
    fn a_workspace_that_cannot_be_written_is_refused_naming_its_path() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("ws");
        let ws = open(&root, "p", "a").unwrap();
        std::fs::set_permissions(&ws.path, std::fs::Permissions::from_mode(0o500)).unwrap();
        let probe = std::fs::File::create(ws.path.join("x"));
        if probe.is_ok() {
            return; // running as root: permissions do not apply
        }
        let e = open(&root, "p", "a").err().expect("refused");
        let text = e.to_string();
        assert!(text.contains(&ws.path.display().to_string()), "{text}");
        assert!(text.contains("not writable"), "{text}");
        std::fs::set_permissions(&ws.path, std::fs::Permissions::from_mode(0o700)).unwrap();
    }

    #[test]
    fn an_unsafe_name_is_refused_even_if_it_got_this_far() {
        let tmp = tempfile::tempdir().unwrap();
        let pack = tmp.path().join("pack");
        pack_with_review(&pack);
        let ws = open(&tmp.path().join("ws"), "p", "a").unwrap();
        for name in ["../../escape", "/tmp/x", "a/b", "..", "UPPER"] {
            let mut s = skill(&pack, "review");
            s.name = name.into();
            let e = copy_skills(&ws, &pack, &[&s]).unwrap_err();
            assert!(e.to_string().contains("the name"), "{name}: {e}");
        }
        assert!(!tmp.path().join("escape").exists());
    }
}
