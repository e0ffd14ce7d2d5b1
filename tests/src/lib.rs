//! Helpers for the end-to-end tests: the `apiary` binary as a black box, its runs and their output,
//! scratch files, the guest components and the corpus. What only one group of tests needs lives in
//! the test binary (`all/support`).

use std::collections::BTreeMap;
use std::io::{Read, Seek};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

/// The `apiary` binary built by this workspace (`cargo test --workspace` builds it, because the `apiary`
/// package has integration tests of its own).
pub fn apiary_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("APIARY_BIN") {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().expect("test executable path");
    // target/<profile>/deps/<test> -> target/<profile>/apiary
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target profile dir");
    let bin = profile_dir.join(format!("apiary{}", std::env::consts::EXE_SUFFIX));
    assert!(
        bin.is_file(),
        "{} is missing: run the tests with `cargo test --workspace` (or `cargo build` first)",
        bin.display()
    );
    bin
}

/// A command running `apiary` with a clean, predictable environment: no operator overrides file,
/// no runtime variables inherited from the developer's shell, HOME in a scratch dir.
pub fn apiary(home: &Path) -> Command {
    let mut cmd = Command::new(apiary_bin());
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env("XDG_CACHE_HOME", home.join(".cache"))
        .env("XDG_DATA_HOME", home.join(".local/share"))
        .env("NO_COLOR", "1");
    cmd
}

/// `apiary <args>` with `home` as HOME, run to the end.
pub fn run(home: &Path, args: &[&str]) -> Run {
    let mut cmd = apiary(home);
    cmd.args(args);
    Run::of(cmd)
}

/// The data directory of an [`apiary`] command run with `home` (keys, relay journal, `relay.url`).
pub fn data_dir(home: &Path) -> PathBuf {
    home.join(".local/share/apiary")
}

/// A scratch operator for commands that compile components (`convert`, expert `install`): a HOME
/// with its own data dir as working directory, and one compile cache shared by every test of the
/// run (keyed by component digest, written atomically), so the built-ins compile once.
pub struct Operator {
    pub home: tempfile::TempDir,
}

impl Operator {
    pub fn new() -> Operator {
        let op = Operator {
            home: tempfile::tempdir().unwrap(),
        };
        // Compile the built-in converters into the shared cache once, before the tests race to.
        static WARM: std::sync::Once = std::sync::Once::new();
        WARM.call_once(|| {
            let r = op.run(&["convert", "--list"]);
            assert_eq!(r.code, 0, "{}", r.stderr);
        });
        op
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.home.path().join(rel)
    }

    /// `apiary` as this operator, without arguments yet.
    pub fn command(&self) -> Command {
        let mut cmd = apiary(self.home.path());
        cmd.current_dir(self.home.path())
            .env("APIARY_DATA_DIR", self.path("data"))
            .env(
                "XDG_CACHE_HOME",
                repo_root().join("target/tmp/component-cache"),
            );
        cmd
    }

    pub fn run(&self, args: &[&str]) -> Run {
        let mut cmd = self.command();
        cmd.args(args);
        Run::of(cmd)
    }
}

impl Default for Operator {
    fn default() -> Self {
        Self::new()
    }
}

/// `script` (util-linux) running `shell_line` on a pseudo-terminal, with `base`'s environment (an
/// [`apiary`] or [`Operator::command`]): stdin, stdout and stderr piped.
pub fn on_terminal(base: &Command, shell_line: &str) -> Command {
    let mut cmd = Command::new("script");
    cmd.env_clear();
    for (k, v) in base.get_envs() {
        if let Some(v) = v {
            cmd.env(k, v);
        }
    }
    cmd.args(["-qfec", shell_line, "/dev/null"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// Waits until `child` exits, at most `within`; `None` when it is still running.
pub fn wait_exit(child: &mut Child, within: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + within;
    loop {
        if let Some(status) = child.try_wait().expect("wait for the child") {
            return Some(status);
        }
        if Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs and returns the output, with stdout and stderr as text for assertions.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn of(mut cmd: Command) -> Run {
        let Output {
            status,
            stdout,
            stderr,
        } = cmd.output().expect("run apiary");
        Run {
            code: status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&stdout).into_owned(),
            stderr: String::from_utf8_lossy(&stderr).into_owned(),
        }
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!(
                "stdout is not JSON ({e}):\n{}\nstderr:\n{}",
                self.stdout, self.stderr
            )
        })
    }

    /// Like [`Run::of`] with stdin closed, but kills the command and fails the test when it runs
    /// longer than `secs`: for inputs that used to hang (a FIFO where a file was expected).
    pub fn bounded(cmd: Command, secs: u64) -> Run {
        let (run, finished) = Run::within(cmd, secs);
        assert!(
            finished,
            "still running after {secs} s (blocked?)\nstdout:\n{}\nstderr:\n{}",
            run.stdout, run.stderr
        );
        run
    }

    /// Like [`Run::bounded`] for a command that should stop by itself but might not (a server that
    /// starts anyway would run forever): killed after `secs`, with code -1.
    pub fn killed_after(cmd: Command, secs: u64) -> Run {
        Run::within(cmd, secs).0
    }

    /// Runs with stdin closed and the output in files (no pipe to fill up, none held open by
    /// grandchildren); kills the command after `secs`. Whether it finished by itself.
    fn within(mut cmd: Command, secs: u64) -> (Run, bool) {
        let mut out = tempfile::tempfile().expect("stdout file");
        let mut err = tempfile::tempfile().expect("stderr file");
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(err.try_clone().unwrap())
            .spawn()
            .expect("run apiary");
        let status = wait_exit(&mut child, Duration::from_secs(secs));
        if status.is_none() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let text = |f: &mut std::fs::File| {
            let mut bytes = Vec::new();
            f.rewind().unwrap();
            f.read_to_end(&mut bytes).unwrap();
            String::from_utf8_lossy(&bytes).into_owned()
        };
        let run = Run {
            code: status.and_then(|s| s.code()).unwrap_or(-1),
            stdout: text(&mut out),
            stderr: text(&mut err),
        };
        (run, status.is_some())
    }
}

/// The repository checkout this crate is in.
pub fn repo_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("repo root")
}

/// A guest component built by `host/apiary/build.rs` (`target/guests/wasm32-wasip2/release/<name>.wasm`).
pub fn guest(name: &str) -> PathBuf {
    let p = repo_root()
        .join("target/guests/wasm32-wasip2/release")
        .join(format!("{name}.wasm"));
    assert!(
        p.is_file(),
        "{} is missing: `cargo build` builds it",
        p.display()
    );
    p
}

/// `../shared/corpus` relative to the repository (CI lays `shared/` beside the checkout).
pub fn corpus() -> PathBuf {
    let repo = repo_root();
    let candidates = [
        repo.join("../shared/corpus"),
        repo.join("shared/corpus"),
        PathBuf::from("/work/shared/corpus"),
    ];
    candidates
        .into_iter()
        .find(|p| p.is_dir())
        .expect("the shared corpus (../shared/corpus beside the repository)")
}

/// Writes files into a directory: `(relative path, contents)`.
pub fn write_tree(root: &Path, files: &[(&str, &str)]) {
    for (rel, text) in files {
        let path = root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
}

/// Every file under `dir` (relative `/` path -> bytes), skipping names in `skip`: to prove a command
/// wrote nothing, or exactly these files.
pub fn snapshot(dir: &Path, skip: &[&str]) -> BTreeMap<String, Vec<u8>> {
    fn walk(root: &Path, rel: &str, skip: &[&str], out: &mut BTreeMap<String, Vec<u8>>) {
        let here = if rel.is_empty() {
            root.to_path_buf()
        } else {
            root.join(rel)
        };
        let Ok(entries) = std::fs::read_dir(&here) else {
            return;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if skip.contains(&name.as_str()) {
                continue;
            }
            let child = if rel.is_empty() {
                name
            } else {
                format!("{rel}/{name}")
            };
            let ft = e.file_type().unwrap();
            if ft.is_dir() {
                walk(root, &child, skip, out);
            } else {
                out.insert(child, std::fs::read(e.path()).unwrap_or_default());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, "", skip, &mut out);
    out
}

/// A FIFO at `path` (where a command expects a regular file, it must not block on it).
pub fn mkfifo(path: &Path) {
    let ok = Command::new("mkfifo")
        .arg(path)
        .status()
        .expect("mkfifo")
        .success();
    assert!(ok, "mkfifo {}", path.display());
}

/// The Python with the test tools `.ci/setup` installs (`kubernetes-validate`, `prometheus-client`)
/// in `.ci/venv`; a panic naming the fix when it is missing.
pub fn ci_python() -> PathBuf {
    let p = repo_root().join(".ci/venv/bin/python3");
    assert!(
        p.is_file(),
        "{} is missing: run ./.ci/setup (it installs kubernetes-validate, prometheus-client and a2a-sdk from PyPI there)",
        p.display()
    );
    p
}
