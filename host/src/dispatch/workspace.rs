//! A persona's workspace (`$AGENT_CWD`) and the skills copied into it (spec §6): pack skills go to
//! `<cwd>/.agents/skills/<load key>/`; an existing directory there is never overwritten (operators
//! pin their own versions), and each such collision is reported (PF-3).

use std::path::{Path, PathBuf};

use crate::pack::Skill;

/// Caps for one skill copy: hostile packs must not fill the disk.
const MAX_FILES: usize = 256;
const MAX_BYTES: u64 = 64 * 1024 * 1024;

/// `<root>/<namespace>/<persona>/`. The namespace is the pack's identity (see
/// [`crate::dist::identity`]): its id when it owns the id, `<id>@<digest>` otherwise.
pub fn persona_dir(root: &Path, namespace: &str, persona: &str) -> PathBuf {
    let clean = |s: &str| -> String {
        s.chars()
            .map(|c| {
                // `@` separates a pack id from a directory digest; pack ids never contain it.
                if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | '@') {
                    c
                } else {
                    '_'
                }
            })
            .collect::<String>()
            .trim_start_matches('.')
            .to_string()
    };
    root.join(clean(namespace)).join(clean(persona))
}

/// What happened to each skill.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct SkillCopy {
    pub copied: Vec<String>,
    /// Collision warnings, in the spec's wording.
    pub skipped: Vec<String>,
}

/// Copies `skills` into `<cwd>/.agents/skills/`, never overwriting.
pub fn copy_skills(cwd: &Path, skills: &[&Skill]) -> std::io::Result<SkillCopy> {
    let dest_root = cwd.join(".agents").join("skills");
    std::fs::create_dir_all(&dest_root)?;
    let mut out = SkillCopy::default();
    for skill in skills {
        let dest = dest_root.join(&skill.name);
        if dest.symlink_metadata().is_ok() {
            out.skipped.push(format!(
                "Skill \"{}\" already exists at .agents/skills/{}/; skipping pack version",
                skill.name, skill.name
            ));
            continue;
        }
        // Copy into a temporary sibling, then rename: a failed copy leaves nothing half written.
        let tmp = dest_root.join(format!(".{}.partial-{}", skill.name, std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        let mut budget = (MAX_FILES, MAX_BYTES);
        let result =
            copy_tree(&skill.dir, &tmp, &mut budget).and_then(|_| std::fs::rename(&tmp, &dest));
        if let Err(e) = result {
            let _ = std::fs::remove_dir_all(&tmp);
            return Err(std::io::Error::new(
                e.kind(),
                format!("copying skill `{}`: {e}", skill.name),
            ));
        }
        out.copied.push(skill.name.clone());
    }
    Ok(out)
}

/// Regular files and directories only: symlinks in a pack are not followed.
fn copy_tree(from: &Path, to: &Path, budget: &mut (usize, u64)) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        let target = to.join(entry.file_name());
        if kind.is_dir() {
            copy_tree(&entry.path(), &target, budget)?;
        } else if kind.is_file() {
            let len = entry.metadata()?.len();
            if budget.0 == 0 || budget.1 < len {
                return Err(std::io::Error::other(
                    "skill is larger than 256 files / 64 MiB",
                ));
            }
            budget.0 -= 1;
            budget.1 -= len;
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_once_and_warns_on_collision() {
        let tmp = tempfile::tempdir().unwrap();
        let src = tmp.path().join("pack/skills/review");
        std::fs::create_dir_all(src.join("docs")).unwrap();
        std::fs::write(
            src.join("SKILL.md"),
            "---\nname: review\ndescription: d\n---\n",
        )
        .unwrap();
        std::fs::write(src.join("docs/a.md"), "a").unwrap();
        let skill = Skill {
            name: "review".into(),
            description: "d".into(),
            dir: src.clone(),
            rel: "skills/review".into(),
        };
        let cwd = persona_dir(&tmp.path().join("ws"), "com.x", "pip");
        let first = copy_skills(&cwd, &[&skill]).unwrap();
        assert_eq!(first.copied, ["review"]);
        assert!(cwd.join(".agents/skills/review/docs/a.md").is_file());
        std::fs::write(cwd.join(".agents/skills/review/SKILL.md"), "pinned").unwrap();
        let second = copy_skills(&cwd, &[&skill]).unwrap();
        assert!(second.copied.is_empty());
        assert!(second.skipped[0].contains("already exists at .agents/skills/review/"));
        assert_eq!(
            std::fs::read_to_string(cwd.join(".agents/skills/review/SKILL.md")).unwrap(),
            "pinned"
        );
    }
}
