//! `apiary pack new <dir> [--id ID] [--persona NAME]...`: a pack of one's own that validates clean
//! and runs with `apiary up` at once. The files are written into a scratch directory beside the
//! target, checked with the pack validator, and only then renamed into place, so a refusal or a
//! failure leaves nothing behind.

use std::io;
use std::path::{Path, PathBuf};

use clap::Args;
use serde::Serialize;
use serde_json::json;

use super::output::{Document, Failed, Human, Outcome};
use crate::pack;

#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  apiary pack new ./my-pack\n  apiary pack new ./team --id com.example.team --persona scout --persona scribe\n\n\
The pack has a manifest (.plugin/plugin.json), one persona per --persona (default: one named \
`helper`) answering mentions on #general with the bundled apiary-agent, a skill, the pack's \
instructions and a README saying what to edit. The directory must not exist or be empty."
)]
pub struct NewArgs {
    /// The pack directory to create (it must not exist, or be empty).
    pub dir: PathBuf,
    /// The pack id (reverse-DNS style, e.g. com.example.my-pack; default: local.<directory name>).
    #[arg(long, value_name = "ID")]
    pub id: Option<String>,
    /// A persona to create: lowercase letters, digits, `-` and `_`, starting with a letter or a
    /// digit; repeatable (default: one named `helper`).
    #[arg(long = "persona", value_name = "NAME")]
    pub personas: Vec<String>,
    /// Print the result as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// The most personas one `pack new` writes (a pack may have more; add them by hand).
const MAX_PERSONAS: usize = 32;

/// The pack written.
#[derive(Serialize)]
pub(super) struct Created {
    ok: bool,
    id: String,
    dir: PathBuf,
    personas: Vec<String>,
    files: Vec<String>,
}

pub(super) fn new(args: &NewArgs) -> Result<Created, Failed> {
    let id = match &args.id {
        Some(id) => id.clone(),
        None => default_id(&args.dir)?,
    };
    if !pack::manifest::is_valid_id(&id) {
        return Err(Failed::usage(format_args!(
            "`{}` cannot be a pack id: use letters, digits, `.`, `-` and `_` (reverse-DNS style, e.g. com.example.my-pack), at most 128, not starting with `.`",
            id.escape_debug()
        )));
    }
    let personas = persona_names(&args.personas)?;
    if std::fs::read_dir(&args.dir).is_ok_and(|mut d| d.next().is_some()) {
        return Err(Failed::error(format_args!(
            "{} exists and is not empty; pack new writes only into a new or empty directory",
            args.dir.display()
        )));
    }
    if args.dir.exists() && !args.dir.is_dir() {
        return Err(Failed::error(format_args!(
            "{} exists and is not a directory",
            args.dir.display()
        )));
    }
    let files = files(&id, &personas);
    write(&args.dir, &files)?;
    Ok(Created {
        ok: true,
        id,
        dir: args.dir.clone(),
        personas,
        files: files.into_iter().map(|(rel, _)| rel).collect(),
    })
}

/// `local.<directory name>`, the directory name made an id.
fn default_id(dir: &Path) -> Result<String, Failed> {
    let name = std::path::absolute(dir)
        .ok()
        .and_then(|d| d.file_name().map(|n| n.to_string_lossy().to_lowercase()))
        .unwrap_or_default();
    let slug: String = name
        .chars()
        .map(|c| match c {
            'a'..='z' | '0'..='9' | '-' | '_' => c,
            _ => '-',
        })
        .collect();
    let slug = slug.trim_matches('-');
    if slug.is_empty() {
        return Err(Failed::usage(format_args!(
            "cannot make a pack id from the directory name of {}; pass --id (e.g. com.example.my-pack)",
            dir.display()
        )));
    }
    Ok(format!("local.{slug}"))
}

/// Lowercase agent ids (the validator's rule, without its case warning), each once.
fn persona_names(given: &[String]) -> Result<Vec<String>, Failed> {
    if given.is_empty() {
        return Ok(vec!["helper".to_string()]);
    }
    if given.len() > MAX_PERSONAS {
        return Err(Failed::usage(format_args!(
            "{} personas is more than pack new writes ({MAX_PERSONAS}); add the rest by hand",
            given.len()
        )));
    }
    let mut names = Vec::new();
    for name in given {
        let ok = name.len() <= 64
            && name
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '_'));
        if !ok {
            return Err(Failed::usage(format_args!(
                "`{}` cannot name a persona: use lowercase letters, digits, `-` and `_`, starting with a letter or a digit, at most 64",
                name.escape_debug()
            )));
        }
        if names.contains(name) {
            return Err(Failed::usage(format_args!(
                "--persona {name} is given twice"
            )));
        }
        names.push(name.clone());
    }
    Ok(names)
}

/// `scout` -> `Scout`.
fn display_name(name: &str) -> String {
    name.split(['-', '_'])
        .filter(|w| !w.is_empty())
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                .unwrap_or_default()
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The pack's files: `(relative path, contents)`.
fn files(id: &str, personas: &[String]) -> Vec<(String, String)> {
    let persona_files: Vec<String> = personas
        .iter()
        .map(|p| format!("agents/{p}.persona.md"))
        .collect();
    let manifest = json!({
        "id": id,
        "name": display_name(id.rsplit('.').next().unwrap_or(id)),
        "version": "0.1.0",
        "description": "A persona pack made with `apiary pack new`; say here what its personas do.",
        "personas": persona_files,
        "defaults": {
            "subscribe": ["#general"],
            "triggers": { "mentions": true, "keywords": [], "all_messages": false },
            "thread_replies": true,
            "broadcast_replies": false
        }
    });
    let mut files = vec![(
        ".plugin/plugin.json".to_string(),
        serde_json::to_string_pretty(&manifest).expect("a JSON value serialises") + "\n",
    )];
    for (name, rel) in personas.iter().zip(&persona_files) {
        files.push((rel.clone(), persona(name, personas)));
    }
    files.push(("skills/house-style/SKILL.md".to_string(), SKILL.to_string()));
    files.push(("instructions.md".to_string(), INSTRUCTIONS.to_string()));
    files.push(("README.md".to_string(), readme(id, personas)));
    files
}

fn persona(name: &str, all: &[String]) -> String {
    let others: Vec<String> = all
        .iter()
        .filter(|o| *o != name)
        .map(|o| format!("@{o}"))
        .collect();
    let team = match others.is_empty() {
        true => String::new(),
        false => format!(
            " Hand work that is not yours to {} by mentioning them.",
            others.join(" or ")
        ),
    };
    format!(
        "---\nname: {name}\ndisplay_name: {display}\ndescription: Answers mentions on #general; \
         replace this with what {display} is for.\nruntime: apiary-agent\ntriggers:\n  \
         mentions: true\n  keywords: []\n---\nYou are {display}. Answer the question you were \
         asked, briefly, in its thread.{team}\n",
        display = display_name(name),
    )
}

const SKILL: &str = "---\nname: house-style\ndescription: How this pack's personas write their answers.\n---\n\n\
# House style\n\nAnswer in two or three sentences. Say what you are not sure of. End with the next step when there is one.\n";

const INSTRUCTIONS: &str = "Be brief. Reply in the thread you were asked in. Mention a teammate with @name when handing over.\n";

fn readme(id: &str, personas: &[String]) -> String {
    let list: String = personas
        .iter()
        .map(|p| format!("- `agents/{p}.persona.md`: who {} is (its frontmatter: triggers, model, runtime; its body: the prompt).\n", display_name(p)))
        .collect();
    format!(
        "# {id}\n\nA persona pack made with `apiary pack new`. Run it with `apiary up .` and talk to it with \
`apiary post \"@{first} hello\"` from a second terminal.\n\n## What to edit\n\n\
- `.plugin/plugin.json`: the pack's id, name, version and description, the personas it lists, and the \
defaults every persona starts from (channels to subscribe to, triggers, threading).\n\
{list}\
- `skills/house-style/SKILL.md`: a skill every persona receives; add more directories under `skills/`.\n\
- `instructions.md`: what every persona of the pack is told.\n\n\
The personas answer with the bundled `apiary-agent`, which echoes; set `runtime:` (for example \
`claude-code`, `codex` or `gemini`) and `model:` in a persona's frontmatter to use a real agent.\n\n\
Check your changes with `apiary pack validate .`, see what each persona ends up with with \
`apiary pack inspect .`, and share the pack with `apiary pack build .`.\n",
        first = personas[0],
    )
}

/// Writes `files` into a scratch directory beside `dir`, validates them as a pack, then renames the
/// scratch directory to `dir` (an empty `dir` is replaced).
fn write(dir: &Path, files: &[(String, String)]) -> Result<(), Failed> {
    let absolute = std::path::absolute(dir)
        .map_err(|e| Failed::error(format_args!("cannot use {}: {e}", dir.display())))?;
    let parent = absolute.parent().unwrap_or(Path::new("/"));
    std::fs::create_dir_all(parent)
        .map_err(|e| Failed::error(format_args!("cannot create {}: {e}", parent.display())))?;
    let scratch = tempfile::Builder::new()
        .prefix(".apiary-pack-new-")
        .tempdir_in(parent)
        .map_err(|e| Failed::error(format_args!("cannot write in {}: {e}", parent.display())))?;
    for (rel, text) in files {
        let path = scratch.path().join(rel);
        path.parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| std::fs::write(&path, text))
            .map_err(|e| Failed::error(format_args!("cannot write {rel}: {e}")))?;
    }
    // What was written must validate clean: a failure here is apiary's bug, not the user's.
    let loaded = pack::load(scratch.path());
    if loaded.pack.is_none() || !loaded.report.diagnostics.is_empty() {
        return Err(Failed::report(
            &loaded.report,
            "error: the new pack does not validate clean; this is a bug in apiary, please report it\n",
        ));
    }
    let scratch = scratch.keep();
    std::fs::rename(&scratch, &absolute).map_err(|e| {
        let _ = std::fs::remove_dir_all(&scratch);
        Failed::error(format_args!("cannot create {}: {e}", dir.display()))
    })
}

impl Outcome for Created {
    fn human(&self, to: &mut Human<'_>) -> io::Result<()> {
        writeln!(
            to.out,
            "✓ wrote pack {} in {}: {}",
            self.id,
            self.dir.display(),
            self.files.join(", ")
        )?;
        let dir = apiary_core::shell::quote(&self.dir.to_string_lossy());
        writeln!(
            to.err,
            "next: {dir}/README.md says what to edit; then `apiary pack validate {dir}` and `apiary up {dir}`, and talk to it with `apiary post \"@{} hello\"`",
            self.personas[0]
        )
    }

    fn json(&self) -> Option<&dyn Document> {
        Some(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(dir: &Path, id: Option<&str>, personas: &[&str]) -> NewArgs {
        NewArgs {
            dir: dir.to_path_buf(),
            id: id.map(str::to_string),
            personas: personas.iter().map(|p| p.to_string()).collect(),
            json: false,
        }
    }

    #[test]
    fn a_new_pack_validates_clean_with_every_persona() {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("My Pack");
        let created = new(&args(&dir, None, &["scout", "scribe-2"])).unwrap();
        assert_eq!(created.id, "local.my-pack");
        let loaded = pack::load(&dir);
        assert!(loaded.report.diagnostics.is_empty(), "{:?}", loaded.report);
        let pack = loaded.pack.unwrap();
        let names: Vec<&str> = pack.personas.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["scout", "scribe-2"]);
        assert_eq!(pack.skills.len(), 1);
        assert!(dir.join("README.md").is_file());
        let scout = std::fs::read_to_string(dir.join("agents/scout.persona.md")).unwrap();
        assert!(scout.contains("@scribe-2"), "{scout}");
    }

    #[test]
    fn hostile_names_and_ids_are_refused_and_nothing_is_written() {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("p");
        for personas in [
            &["a\nruntime: evil"][..],
            &["../x"],
            &["Bee"],
            &["-x"],
            &["dup", "dup"],
            &[""],
        ] {
            let e = new(&args(&dir, Some("com.example.p"), personas))
                .err()
                .unwrap();
            assert!(e.message().starts_with("error: "), "{}", e.message());
        }
        for id in ["../evil", ".hidden", "a b", "x/y", ""] {
            assert!(new(&args(&dir, Some(id), &[])).is_err(), "{id:?}");
        }
        assert!(!dir.exists());
        let leftovers: Vec<_> = std::fs::read_dir(t.path()).unwrap().collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
    }

    #[test]
    fn a_non_empty_directory_is_left_alone_and_an_empty_one_is_used() {
        let t = tempfile::tempdir().unwrap();
        std::fs::write(t.path().join("keep.txt"), "mine").unwrap();
        assert!(new(&args(t.path(), Some("com.example.p"), &[])).is_err());
        assert_eq!(
            std::fs::read_to_string(t.path().join("keep.txt")).unwrap(),
            "mine"
        );
        let empty = t.path().join("empty");
        std::fs::create_dir(&empty).unwrap();
        new(&args(&empty, Some("com.example.p"), &[])).unwrap();
        assert!(empty.join(".plugin/plugin.json").is_file());
    }
}
