//! Script hooks (any hook that is not a `.wasm` component), run on the host as spec §9 says: the
//! command as written (`./hooks/setup.sh --fast`, pack-relative), working directory `$AGENT_CWD`,
//! the agent's environment, the message text on stdin for `on_message`, killed after the deadline,
//! a non-zero exit is a failure. They run unsandboxed, so callers run them only when the operator
//! trusted them (`apiary trust`, or `--trust-hooks`); this module only runs them.
//!
//! Installed packs land without execute bits (hooks are quarantined), so a file that is not
//! executable runs through the interpreter its `#!` line names, else `/bin/sh`.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Output kept from each of stdout and stderr.
const MAX_OUTPUT: u64 = 64 * 1024;
/// The longest `#!` line read.
const MAX_SHEBANG: usize = 256;

/// One script hook run.
pub struct ScriptRun<'a> {
    /// The pack root; the command's path must stay inside it.
    pub pack_root: &'a Path,
    /// The hook as written in `hooks.json` or a persona's `hooks:`.
    pub command: &'a str,
    pub workspace: &'a Path,
    /// Set on top of the inherited environment (the persona's projected env and `APIARY_*`).
    pub env: &'a [(String, String)],
    /// Written to stdin (`on_message`: the message text); otherwise stdin is empty.
    pub stdin: Option<&'a str>,
    pub deadline: Duration,
}

#[derive(Debug)]
pub struct ScriptOutcome {
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

#[derive(Debug, thiserror::Error)]
pub enum ScriptError {
    #[error("hook `{command}`: {detail}")]
    Path { command: String, detail: String },
    #[error("cannot run {program}: {source}")]
    Spawn {
        program: String,
        source: std::io::Error,
    },
    #[error("script exceeded its deadline of {} ms and was killed", .0.as_millis())]
    Deadline(Duration),
    #[error("script exited with {status}{}", .stderr_tail.as_deref().map(|l| format!(": {l}")).unwrap_or_default())]
    Failed {
        status: std::process::ExitStatus,
        stderr_tail: Option<String>,
    },
    #[error("waiting for the script: {0}")]
    Wait(std::io::Error),
}

impl ScriptError {
    /// A stable name for JSON output.
    pub fn kind(&self) -> &'static str {
        match self {
            ScriptError::Path { .. } => "path",
            ScriptError::Spawn { .. } => "spawn",
            ScriptError::Deadline(_) => "deadline",
            ScriptError::Failed { .. } => "script-failed",
            ScriptError::Wait(_) => "wait",
        }
    }
}

/// The script file a hook command names (its first word), inside the pack.
pub fn script_file(pack_root: &Path, command: &str) -> Result<PathBuf, ScriptError> {
    let token = command.split_whitespace().next().unwrap_or("");
    if token.is_empty() {
        return Err(ScriptError::Path {
            command: command.to_string(),
            detail: "empty command".into(),
        });
    }
    crate::pack::paths::resolve_inside(pack_root, token).map_err(|e| ScriptError::Path {
        command: command.to_string(),
        detail: e.to_string(),
    })
}

/// Runs the script to completion or its deadline.
pub fn run(r: &ScriptRun<'_>) -> Result<ScriptOutcome, ScriptError> {
    let file = script_file(r.pack_root, r.command)?;
    let args: Vec<&str> = r.command.split_whitespace().skip(1).collect();
    let mut cmd = match interpreter(&file) {
        None => Command::new(&file),
        Some((program, arg)) => {
            let mut c = Command::new(program);
            c.args(arg).arg(&file);
            c
        }
    };
    // Like an agent, a hook starts from nothing of the operator's environment: the search path,
    // the locale and the hook contract's variables.
    cmd.args(&args)
        .current_dir(r.workspace)
        .env_clear()
        .envs(
            ["PATH", "LANG", "LC_ALL", "TZ"]
                .iter()
                .filter_map(|k| Some((*k, std::env::var(k).ok()?))),
        )
        .env("HOME", r.workspace)
        .envs(r.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // Its own process group, so a Ctrl-C meant for apiary does not kill a hook half-way.
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        cmd.process_group(0);
    }
    let start = Instant::now();
    let mut child = cmd.spawn().map_err(|source| ScriptError::Spawn {
        program: file.display().to_string(),
        source,
    })?;
    // Written from a thread: a script that never reads must not block us past the deadline.
    let stdin = child.stdin.take();
    let text = r.stdin.map(str::to_owned);
    std::thread::spawn(move || {
        if let (Some(mut pipe), Some(text)) = (stdin, text) {
            let _ = pipe.write_all(text.as_bytes());
        }
    });
    let out_reader = reader(child.stdout.take());
    let err_reader = reader(child.stderr.take());
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if start.elapsed() >= r.deadline => {
                // The whole group: a `sleep` the script started must not outlive it.
                #[cfg(unix)]
                let _ = Command::new("kill")
                    .args(["-KILL", "--", &format!("-{}", child.id())])
                    .stderr(Stdio::null())
                    .status();
                let _ = child.kill();
                let _ = child.wait();
                return Err(ScriptError::Deadline(r.deadline));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(1)),
            Err(e) => return Err(ScriptError::Wait(e)),
        }
    };
    let elapsed = start.elapsed();
    let stdout = out_reader.join().unwrap_or_default();
    let stderr = err_reader.join().unwrap_or_default();
    if !status.success() {
        return Err(ScriptError::Failed {
            status,
            stderr_tail: stderr
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .map(|l| l.chars().take(500).collect()),
        });
    }
    Ok(ScriptOutcome {
        stdout,
        stderr,
        elapsed,
    })
}

/// Reads at most [`MAX_OUTPUT`] bytes of a pipe, then drains the rest so the script never blocks.
fn reader<R: Read + Send + 'static>(pipe: Option<R>) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let Some(mut pipe) = pipe else {
            return String::new();
        };
        let mut kept = Vec::new();
        let _ = (&mut pipe).take(MAX_OUTPUT).read_to_end(&mut kept);
        let _ = std::io::copy(&mut pipe, &mut std::io::sink());
        String::from_utf8_lossy(&kept).into_owned()
    })
}

/// How a file without an execute bit runs: its `#!` interpreter (and one argument), else `/bin/sh`.
/// `None` when the file is executable (the kernel reads the `#!` itself).
fn interpreter(file: &Path) -> Option<(PathBuf, Option<String>)> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if std::fs::metadata(file).is_ok_and(|m| m.permissions().mode() & 0o111 != 0) {
            return None;
        }
    }
    let mut head = [0u8; MAX_SHEBANG];
    let n = crate::safe_fs::open_regular(file, crate::safe_fs::FinalLink::Follow)
        .and_then(|(mut f, _)| f.read(&mut head))
        .unwrap_or(0);
    let head = &head[..n];
    let sh = || Some((PathBuf::from("/bin/sh"), None));
    let Some(rest) = head.strip_prefix(b"#!") else {
        return sh();
    };
    let line = rest.split(|b| *b == b'\n').next().unwrap_or_default();
    let Ok(line) = std::str::from_utf8(line) else {
        return sh();
    };
    let mut words = line.split_whitespace();
    let Some(program) = words.next() else {
        return sh();
    };
    // Like the kernel: everything after the interpreter is one argument.
    let arg = words.collect::<Vec<_>>().join(" ");
    Some((PathBuf::from(program), (!arg.is_empty()).then_some(arg)))
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    fn run_in(
        dir: &Path,
        command: &str,
        stdin: Option<&str>,
        deadline: Duration,
    ) -> Result<ScriptOutcome, ScriptError> {
        run(&ScriptRun {
            pack_root: dir,
            command,
            workspace: dir,
            env: &[("HOOK_TEST".into(), "yes".into())],
            stdin,
            deadline,
        })
    }

    #[test]
    fn non_executable_scripts_run_through_their_interpreter() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("hooks")).unwrap();
        std::fs::write(
            root.join("hooks/a.sh"),
            "#!/bin/sh\necho \"$HOOK_TEST $1 $(cat)\"\n",
        )
        .unwrap();
        std::fs::write(root.join("hooks/b"), "echo plain\n").unwrap();
        let o = run_in(
            &root,
            "./hooks/a.sh one",
            Some("msg"),
            Duration::from_secs(5),
        )
        .unwrap();
        assert_eq!(o.stdout, "yes one msg\n");
        let o = run_in(&root, "hooks/b", None, Duration::from_secs(5)).unwrap();
        assert_eq!(o.stdout, "plain\n");
    }

    #[test]
    fn failures_deadlines_and_escapes() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::write(root.join("fail.sh"), "echo nope >&2\nexit 3\n").unwrap();
        std::fs::write(root.join("slow.sh"), "sleep 5\n").unwrap();
        let e = run_in(&root, "./fail.sh", None, Duration::from_secs(5)).unwrap_err();
        assert_eq!(e.kind(), "script-failed");
        assert!(e.to_string().ends_with(": nope"), "{e}");
        let e = run_in(&root, "./slow.sh", None, Duration::from_millis(200)).unwrap_err();
        assert_eq!(e.kind(), "deadline");
        for bad in ["../x.sh", "/bin/true", "", "   "] {
            let e = run_in(&root, bad, None, Duration::from_secs(1)).unwrap_err();
            assert_eq!(e.kind(), "path", "{bad}");
        }
    }
}
