//! Shared by the `pack_*` suites: scratch packs on disk and the `apiary pack …` commands run against
//! them through the real binary.

use std::path::{Path, PathBuf};
use std::process::Command;

use apiary_e2e::{Run, apiary, write_tree};
use serde_json::Value;
use tempfile::TempDir;

/// A pack directory (plus a scratch HOME) that lives as long as the test.
pub struct ScratchPack {
    pub dir: TempDir,
    pub home: TempDir,
}

impl ScratchPack {
    /// A pack from `(relative path, contents)` pairs, written as given.
    pub fn new(files: &[(&str, &str)]) -> Self {
        let dir = tempfile::tempdir().expect("pack dir");
        let home = tempfile::tempdir().expect("home dir");
        write_tree(dir.path(), files);
        ScratchPack { dir, home }
    }

    /// A pack with `manifest` as `.plugin/plugin.json` and more files.
    pub fn with_manifest(manifest: &str, files: &[(&str, &str)]) -> Self {
        let p = Self::new(&[(".plugin/plugin.json", manifest)]);
        write_tree(p.path(), files);
        p
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn file(&self, rel: &str) -> PathBuf {
        self.path().join(rel)
    }

    pub fn write(&self, rel: &str, text: &str) {
        write_tree(self.path(), &[(rel, text)]);
    }

    pub fn write_bytes(&self, rel: &str, bytes: &[u8]) {
        let p = self.file(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, bytes).unwrap();
    }

    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.file(rel)).unwrap()
    }

    /// `apiary` with a clean environment and this pack's scratch HOME.
    pub fn cmd(&self) -> Command {
        apiary(self.home.path())
    }

    pub fn validate(&self) -> Validation {
        validate_dir(self.path(), self.home.path())
    }

    /// `apiary pack validate <dir>` in human form: exit code and stderr.
    pub fn validate_human(&self) -> Run {
        let mut c = self.cmd();
        c.args(["pack", "validate"]).arg(self.path());
        checked(Run::of(c))
    }

    /// `apiary pack inspect <dir> --json <extra…>`, asserting success.
    pub fn inspect(&self, extra: &[&str]) -> Value {
        inspect_dir(self.path(), self.home.path(), extra)
    }

    /// `apiary pack inspect <dir> --json <extra…>` with a prepared command (e.g. extra env).
    pub fn inspect_run(&self, mut cmd: Command, extra: &[&str]) -> Run {
        cmd.args(["pack", "inspect"])
            .arg(self.path())
            .arg("--json")
            .args(extra);
        checked(Run::of(cmd))
    }

    /// The resolved persona `name` from `apiary pack inspect --json`.
    pub fn persona(&self, name: &str) -> Value {
        persona_in(&self.inspect(&[]), name)
    }
}

/// `apiary pack validate <dir> --json`: the exit code and the parsed report.
pub struct Validation {
    pub code: i32,
    pub json: Value,
}

impl Validation {
    pub fn diagnostics(&self) -> &Vec<Value> {
        self.json["diagnostics"]
            .as_array()
            .expect("diagnostics array")
    }

    /// Every diagnostic with this code.
    pub fn with_code(&self, code: &str) -> Vec<&Value> {
        self.diagnostics()
            .iter()
            .filter(|d| d["code"] == code)
            .collect()
    }

    /// The single diagnostic with this code; fails with the whole report otherwise.
    pub fn one(&self, code: &str) -> &Value {
        let found = self.with_code(code);
        assert_eq!(
            found.len(),
            1,
            "expected exactly one `{code}` diagnostic, got:\n{:#}",
            self.json
        );
        found[0]
    }

    pub fn codes(&self) -> Vec<String> {
        self.diagnostics()
            .iter()
            .map(|d| d["code"].as_str().unwrap_or_default().to_string())
            .collect()
    }

    /// Asserts the exit code, showing the report when it differs.
    pub fn assert_exit(&self, code: i32) -> &Self {
        assert_eq!(
            self.code, code,
            "exit code {} (want {code}); report:\n{:#}",
            self.code, self.json
        );
        self
    }

    /// Asserts there is no finding other than notes.
    pub fn assert_clean(&self) -> &Self {
        self.assert_exit(0);
        assert_eq!(self.json["valid"], true);
        assert_eq!(self.json["errors"], 0);
        assert_eq!(self.json["warnings"], 0);
        self
    }
}

/// `apiary pack inspect <dir> --json <extra…>` with `home` as HOME, asserting success.
pub fn inspect_dir(dir: &Path, home: &Path, extra: &[&str]) -> Value {
    let mut c = apiary(home);
    c.args(["pack", "inspect"])
        .arg(dir)
        .arg("--json")
        .args(extra);
    let run = checked(Run::of(c));
    assert_eq!(
        run.code,
        0,
        "inspect {} failed\nstdout:\n{}\nstderr:\n{}",
        dir.display(),
        run.stdout,
        run.stderr
    );
    run.json()
}

pub fn validate_dir(dir: &Path, home: &Path) -> Validation {
    let mut c = apiary(home);
    c.args(["pack", "validate"]).arg(dir).arg("--json");
    let run = checked(Run::of(c));
    Validation {
        code: run.code,
        json: run.json(),
    }
}

/// Every run must end with one of the documented exit codes, never a panic or a signal.
pub fn checked(run: Run) -> Run {
    assert!(
        matches!(run.code, 0..=2),
        "unexpected exit code {} (panic or signal?)\nstdout:\n{}\nstderr:\n{}",
        run.code,
        run.stdout,
        run.stderr
    );
    assert!(
        !run.stderr.contains("panicked"),
        "apiary panicked:\n{}",
        run.stderr
    );
    run
}

pub fn persona_in(inspected: &Value, name: &str) -> Value {
    inspected["personas"]
        .as_array()
        .expect("personas array")
        .iter()
        .find(|p| p["identity"]["name"] == name)
        .unwrap_or_else(|| panic!("no persona `{name}` in:\n{inspected:#}"))
        .clone()
}

/// A persona file: the identity fields, then `extra` frontmatter lines, then the prompt.
pub fn persona(name: &str, extra: &str, body: &str) -> String {
    format!(
        "---\nname: {name}\ndisplay_name: \"{display}\"\ndescription: \"The {name} persona\"\n{extra}---\n\n{body}\n",
        display = capitalised(name),
    )
}

pub fn capitalised(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

/// A SKILL.md with both required fields.
pub fn skill(name: &str, description: &str) -> String {
    format!("---\nname: {name}\ndescription: \"{description}\"\n---\n\n# {name}\n\nSteps.\n")
}

/// A minimal manifest listing `personas` (paths), with optional extra top-level JSON members.
pub fn manifest(personas: &[&str], extra: &str) -> String {
    let list = personas
        .iter()
        .map(|p| format!("\"{p}\""))
        .collect::<Vec<_>>()
        .join(", ");
    let extra = if extra.is_empty() {
        String::new()
    } else {
        format!(",\n  {extra}")
    };
    format!(
        "{{\n  \"id\": \"com.example.scratch\",\n  \"name\": \"Scratch\",\n  \"version\": \"1.0.0\",\n  \"personas\": [{list}]{extra}\n}}\n"
    )
}

/// A one-persona pack (`agents/a.persona.md`) whose frontmatter has `extra` lines.
pub fn one_persona_pack(extra: &str) -> ScratchPack {
    ScratchPack::with_manifest(
        &manifest(&["agents/a.persona.md"], ""),
        &[("agents/a.persona.md", &persona("a", extra, "You are A."))],
    )
}

/// Line (1-based) of the first line of `text` that starts with `prefix` after indentation.
pub fn line_of(text: &str, prefix: &str) -> u64 {
    text.lines()
        .position(|l| l.trim_start().starts_with(prefix))
        .unwrap_or_else(|| panic!("no line starting with `{prefix}` in:\n{text}")) as u64
        + 1
}

/// Asserts a diagnostic points at `file`, `line`.
pub fn assert_at(d: &Value, file: &str, line: u64) {
    assert_eq!(d["file"], file, "wrong file in {d:#}");
    assert_eq!(d["line"], line, "wrong line in {d:#}");
}

/// `apiary pack new <dir> --id <id> [--persona NAME]...` with `home` as HOME; asserts it succeeded.
pub fn pack_new(home: &Path, dir: &Path, id: &str, personas: &[&str]) -> Run {
    let mut args = vec!["pack", "new", dir.to_str().unwrap(), "--id", id, "--json"];
    for p in personas {
        args.extend(["--persona", p]);
    }
    let made = apiary_e2e::run(home, &args);
    assert_eq!(made.code, 0, "{}{}", made.stdout, made.stderr);
    made
}
