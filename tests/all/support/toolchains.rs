//! Components in other languages, built by the tests with the real toolchains from the package
//! registries (`.ci/setup` installs them): componentize-py (PyPI) on `PATH`, componentize-js
//! (npm) under `target/toolchains/js/`. A build is cached under `target/lang-components/`, keyed
//! by the sha256 of the toolchain, the WIT and the source, so a test run builds each once.
//!
//! A missing toolchain fails the test saying how to install it; `APIARY_SKIP_TOOLCHAINS=1` skips
//! those tests instead (printing why).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use apiary_e2e::repo_root;
use sha2::{Digest, Sha256};

/// A toolchain that turns one source file into a component.
#[derive(Debug, Clone, Copy)]
pub enum Toolchain {
    /// componentize-py: `app.py` into a component of a world.
    Python,
    /// componentize-js: one `.js` module into a component of a world.
    Js,
}

impl Toolchain {
    fn program(self) -> Option<PathBuf> {
        match self {
            Toolchain::Python => on_path("componentize-py"),
            Toolchain::Js => {
                let local =
                    repo_root().join("target/toolchains/js/node_modules/.bin/componentize-js");
                local
                    .is_file()
                    .then_some(local)
                    .or_else(|| on_path("componentize-js"))
            }
        }
    }

    fn version(self, program: &Path) -> String {
        let out = Command::new(program).arg("--version").output();
        out.map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default()
    }
}

fn on_path(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// `None` (after printing why) when the toolchain is missing and `APIARY_SKIP_TOOLCHAINS=1`;
/// panics when it is missing otherwise.
fn program_or_skip(tool: Toolchain) -> Option<PathBuf> {
    if let Some(p) = tool.program() {
        return Some(p);
    }
    let why = format!(
        "the {tool:?} component toolchain is not installed (componentize-py on PATH; componentize-js under target/toolchains/js); run ./.ci/setup"
    );
    if std::env::var_os("APIARY_SKIP_TOOLCHAINS").is_some_and(|v| v == "1") {
        eprintln!("skipped: {why}");
        return None;
    }
    panic!("{why} (or set APIARY_SKIP_TOOLCHAINS=1 to skip these tests)");
}

/// One build at a time: the toolchains are heavy and two tests may want the same component.
static BUILDING: Mutex<()> = Mutex::new(());

/// The component built from `source_dir/file` (a template directory), `{{name}}` replaced by
/// `name`, for `world`, against apiary's frozen WIT. Cached by digest; `None` when skipped.
pub fn build(
    tool: Toolchain,
    source_dir: &Path,
    file: &str,
    name: &str,
    world: &str,
) -> Option<PathBuf> {
    let source = std::fs::read_to_string(source_dir.join(file))
        .unwrap_or_else(|e| panic!("{}: {e}", source_dir.join(file).display()));
    build_files(tool, &[(file.to_string(), source)], file, name, world)
}

/// The component built from the whole project `dir` (every file under it, `{{name}}` replaced
/// by `name`), entry `file`, for `world`; a project with a `wit/` folder is built against that
/// (componentize-js: `--wit wit`). Cached by digest; `None` when skipped.
pub fn build_project(
    tool: Toolchain,
    dir: &Path,
    file: &str,
    name: &str,
    world: &str,
) -> Option<PathBuf> {
    let mut files = Vec::new();
    project_files(dir, "", &mut files);
    files.sort();
    build_files(tool, &files, file, name, world)
}

/// Every file under `dir` (links followed) as `(relative path, text)`.
fn project_files(dir: &Path, prefix: &str, out: &mut Vec<(String, String)>) {
    for entry in std::fs::read_dir(dir).unwrap().map(|e| e.unwrap()) {
        let name = entry.file_name().to_string_lossy().into_owned();
        let rel = if prefix.is_empty() {
            name
        } else {
            format!("{prefix}/{name}")
        };
        if entry.path().is_dir() {
            project_files(&entry.path(), &rel, out);
        } else {
            let text = std::fs::read_to_string(entry.path())
                .unwrap_or_else(|e| panic!("{}: {e}", entry.path().display()));
            out.push((rel, text));
        }
    }
}

fn build_files(
    tool: Toolchain,
    files: &[(String, String)],
    file: &str,
    name: &str,
    world: &str,
) -> Option<PathBuf> {
    let program = program_or_skip(tool)?;
    let own_wit = files.iter().any(|(rel, _)| rel.starts_with("wit/"));
    let wit = repo_root().join("wit/apiary-plugin@0.1.0");
    let mut h = Sha256::new();
    h.update(tool.version(&program));
    h.update(world);
    for (rel, text) in files {
        h.update(rel);
        h.update(text.replace("{{name}}", name));
    }
    if !own_wit {
        let mut wit_files: Vec<_> = std::fs::read_dir(&wit)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        wit_files.sort();
        for f in wit_files {
            h.update(std::fs::read(&f).unwrap());
        }
    }
    let digest: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
    let cache = repo_root().join("target/lang-components");
    let out = cache.join(format!("{name}-{}.wasm", &digest[..16]));
    let _one = BUILDING.lock().unwrap_or_else(|p| p.into_inner());
    if out.is_file() {
        return Some(out);
    }
    std::fs::create_dir_all(&cache).unwrap();
    let work = tempfile::tempdir().unwrap();
    for (rel, text) in files {
        let path = work.path().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text.replace("{{name}}", name)).unwrap();
    }
    let wit = if own_wit {
        work.path().join("wit")
    } else {
        wit
    };
    let built = work.path().join("out.wasm");
    let mut cmd = Command::new(&program);
    cmd.current_dir(work.path());
    match tool {
        Toolchain::Python => {
            let module = file.trim_end_matches(".py");
            cmd.args(["-d"])
                .arg(&wit)
                .args(["-w", world, "componentize", module, "-o"])
                .arg(&built)
        }
        Toolchain::Js => cmd
            .arg(file)
            .arg("--wit")
            .arg(&wit)
            .args(["--world-name", world, "-o"])
            .arg(&built),
    };
    let o = cmd
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", program.display()));
    assert!(
        o.status.success() && built.is_file(),
        "{tool:?} build of {name} failed:\n{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    // Into place in one step: a half-written file is never taken for a cached build.
    let partial = cache.join(format!(".{name}-{}.partial", &digest[..16]));
    std::fs::copy(&built, &partial).unwrap();
    std::fs::rename(&partial, &out).unwrap();
    Some(out)
}

/// `host/apiary/templates/<kind>-<lang>/`.
pub fn template(dir: &str) -> PathBuf {
    repo_root().join("host/apiary/templates").join(dir)
}
