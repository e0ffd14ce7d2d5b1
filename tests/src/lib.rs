//! Helpers for the end-to-end tests: the `apiary` binary as a black box, scratch packs, corpus paths.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

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
    pub fn bounded(mut cmd: Command, secs: u64) -> Run {
        use std::process::Stdio;
        use std::time::{Duration, Instant};
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run apiary");
        let deadline = Instant::now() + Duration::from_secs(secs);
        while child.try_wait().expect("wait for apiary").is_none() {
            if Instant::now() > deadline {
                let _ = child.kill();
                let out = child.wait_with_output().expect("apiary output");
                panic!(
                    "still running after {secs} s (blocked?)\nstdout:\n{}\nstderr:\n{}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let out = child.wait_with_output().expect("apiary output");
        Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}

/// A guest component built by `host/build.rs` (`target/guests/wasm32-wasip2/release/<name>.wasm`).
pub fn guest(name: &str) -> PathBuf {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let p = repo
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
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("repo root");
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
