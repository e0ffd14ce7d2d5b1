//! Hand-over from `apiary` to `apiary-runtime`, the binary beside it that holds the sandbox
//! (wasmtime), the live harness (tokio, the Nostr client and relay) and distribution.
//!
//! Why two binaries: the dynamic loader relocates a whole binary before `main`, and the full one has
//! eight times the relocations, with a page fault for every page they write. The pack checks, run
//! often by people and scripts, would pay that on every call for code they never use.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::{Command, ExitCode};

use super::exit;

const RUNTIME: &str = "apiary-runtime";

/// The digest of the host sources this binary was built from (see `build.rs`), and the variable
/// that carries `apiary`'s to the runtime.
const SOURCE_DIGEST: &str = env!("APIARY_SOURCE_DIGEST");
const SOURCE_DIGEST_VAR: &str = "APIARY_HANDED_OVER_FROM";

/// Runs `apiary-runtime` with this process's arguments, in its place where the platform allows.
/// Returns only when it could not be started.
pub fn hand_over() -> ExitCode {
    let path = match runtime_path() {
        Ok(path) => path,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(exit::FAILURE);
        }
    };
    let mut args = std::env::args_os();
    // Its usage lines then name the program the user typed.
    let arg0 = args.next().unwrap_or_else(|| OsString::from("apiary"));
    let mut command = Command::new(&path);
    command.args(args).env(SOURCE_DIGEST_VAR, SOURCE_DIGEST);
    run(command, arg0, &path)
}

/// In `apiary-runtime`: refuses a command handed over by an `apiary` built from other sources (a
/// `cargo run` relinks `apiary` only). Takes the variable out of the environment, so the agents and
/// hooks the command starts never see it.
pub fn check_same_build() -> Result<(), String> {
    let Some(theirs) = std::env::var_os(SOURCE_DIGEST_VAR) else {
        return Ok(());
    };
    // SAFETY: called first thing in `main`, before any thread exists to read the environment.
    unsafe { std::env::remove_var(SOURCE_DIGEST_VAR) };
    if theirs == SOURCE_DIGEST {
        return Ok(());
    }
    let here = std::env::current_exe().map_or_else(|_| RUNTIME.into(), |p| p.display().to_string());
    Err(format!(
        "{here} is from another build than the apiary that ran it; rebuild both with \
         `cargo build --bins` (or reinstall with `cargo install --path host`)"
    ))
}

/// `apiary-runtime` beside this executable. Only there: one found on `PATH` could be another
/// version, with another command line and another engine.
fn runtime_path() -> Result<PathBuf, String> {
    let exe = std::env::current_exe()
        .map_err(|e| format!("cannot locate the apiary executable to find {RUNTIME}: {e}"))?;
    let path = exe.with_file_name(format!("{RUNTIME}{}", std::env::consts::EXE_SUFFIX));
    if path.is_file() {
        Ok(path)
    } else {
        Err(format!(
            "this command needs {}, which is missing beside {}. It is built and installed with \
             apiary: `cargo build --bins`, or `cargo install --path host`.",
            path.display(),
            exe.display()
        ))
    }
}

#[cfg(unix)]
fn run(mut command: Command, arg0: OsString, path: &std::path::Path) -> ExitCode {
    use std::os::unix::process::CommandExt;
    // exec: same process, terminal, signals and exit status, as if the user had run it directly.
    let e = command.arg0(arg0).exec();
    eprintln!("error: cannot run {}: {e}", path.display());
    ExitCode::from(exit::FAILURE)
}

#[cfg(not(unix))]
fn run(mut command: Command, _arg0: OsString, path: &std::path::Path) -> ExitCode {
    match command.status() {
        Ok(status) => ExitCode::from(status.code().map_or(exit::FAILURE, |c| c as u8)),
        Err(e) => {
            eprintln!("error: cannot run {}: {e}", path.display());
            ExitCode::from(exit::FAILURE)
        }
    }
}
