//! The binary's own contract: version, help, exit code for a bad command line. (Also makes
//! `cargo test --workspace` build the `apiary` binary that the end-to-end crate drives.)

use std::process::Command;

fn apiary() -> Command {
    Command::new(env!("CARGO_BIN_EXE_apiary"))
}

#[test]
fn version_names_the_engine() {
    let out = apiary().arg("--version").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains(&format!("buzz engine {}", apiary::ENGINE_VERSION)),
        "{text}"
    );
}

#[test]
fn help_teaches_exit_codes() {
    let out = apiary().arg("--help").output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("Exit codes"), "{text}");
    assert!(text.contains("pack"), "{text}");
}

#[test]
fn bad_command_line_exits_64() {
    let out = apiary().arg("no-such-command").output().unwrap();
    assert_eq!(out.status.code(), Some(64));
}

/// `apiary` runs the pack checks itself and hands every other command to the `apiary-runtime`
/// beside it: without that binary the checks still work and the rest fail saying what is missing;
/// with it, the same `apiary` runs them.
#[test]
fn commands_beyond_the_checks_need_apiary_runtime_beside_apiary() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let bin = dir
        .path()
        .join(format!("apiary{}", std::env::consts::EXE_SUFFIX));
    link_or_copy(env!("CARGO_BIN_EXE_apiary"), &bin);
    let meadow = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/meadow");
    let root = dir.path().join("root");

    let check = Command::new(&bin)
        .args(["pack", "validate", meadow])
        .output()
        .unwrap();
    // Valid, with one warning: its MCP server reads `${GITHUB_TOKEN}`, which needs allow_env.
    assert_eq!(check.status.code(), Some(2), "{check:?}");

    let alone = list(&bin, &root).output().unwrap();
    assert_eq!(alone.status.code(), Some(1), "{alone:?}");
    let err = String::from_utf8_lossy(&alone.stderr);
    assert!(
        err.contains("apiary-runtime") && err.contains("cargo build --bins"),
        "{err}"
    );

    let runtime = dir
        .path()
        .join(format!("apiary-runtime{}", std::env::consts::EXE_SUFFIX));
    link_or_copy(env!("CARGO_BIN_EXE_apiary-runtime"), &runtime);
    let handed = list(&bin, &root).output().unwrap();
    assert_eq!(handed.status.code(), Some(0), "{handed:?}");
    assert!(
        String::from_utf8_lossy(&handed.stderr).contains("No packs installed"),
        "{handed:?}"
    );
}

/// `<bin> list --root <root>`: a runtime command that needs no set-up.
fn list(bin: impl AsRef<std::ffi::OsStr>, root: &std::path::Path) -> Command {
    let mut cmd = Command::new(bin);
    cmd.arg("list").arg("--root").arg(root);
    cmd
}

fn link_or_copy(from: &str, to: &std::path::Path) {
    if std::fs::hard_link(from, to).is_err() {
        std::fs::copy(from, to).unwrap();
    }
}

/// `apiary-runtime` runs only what an `apiary` of the same sources hands it: after a `cargo run`
/// (which relinks `apiary` alone) the previous build's runtime must refuse, not run old code.
#[test]
fn the_runtime_refuses_an_apiary_of_another_build() {
    let root = tempfile::tempdir().unwrap();
    let runtime = || list(env!("CARGO_BIN_EXE_apiary-runtime"), root.path());
    let stale = runtime()
        .env("APIARY_HANDED_OVER_FROM", "0123456789abcdef")
        .output()
        .unwrap();
    assert_eq!(stale.status.code(), Some(1), "{stale:?}");
    let err = String::from_utf8_lossy(&stale.stderr);
    assert!(
        err.contains("another build") && err.contains("cargo build --bins"),
        "{err}"
    );

    // Called directly, or by its own `apiary`, it runs.
    let direct = runtime().output().unwrap();
    assert_eq!(direct.status.code(), Some(0), "{direct:?}");
    let handed = list(env!("CARGO_BIN_EXE_apiary"), root.path())
        .output()
        .unwrap();
    assert_eq!(handed.status.code(), Some(0), "{handed:?}");
}
