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

/// One binary holds every command: a copy of `apiary` alone in an empty directory runs the pack
/// checks and the runtime commands alike (nothing is handed to another executable).
#[test]
fn a_lone_apiary_runs_checks_and_runtime_commands() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let bin = dir
        .path()
        .join(format!("apiary{}", std::env::consts::EXE_SUFFIX));
    link_or_copy(env!("CARGO_BIN_EXE_apiary"), &bin);
    let meadow = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/meadow");
    let root = dir.path().join("root");

    let check = Command::new(&bin)
        .args(["pack", "validate", meadow])
        .output()
        .unwrap();
    // Valid, with one warning: its MCP server reads `${GITHUB_TOKEN}`, which needs allow_env.
    assert_eq!(check.status.code(), Some(2), "{check:?}");

    let list = Command::new(&bin)
        .arg("list")
        .arg("--root")
        .arg(&root)
        .output()
        .unwrap();
    assert_eq!(list.status.code(), Some(0), "{list:?}");
    assert!(
        String::from_utf8_lossy(&list.stderr).contains("No packs installed"),
        "{list:?}"
    );
}

/// Every subcommand teaches its own usage with `--help`, and exits 0.
#[test]
fn every_subcommand_has_help() {
    for sub in [
        "pack",
        "component",
        "convert",
        "hook",
        "trigger",
        "install",
        "trust",
        "list",
        "uninstall",
        "verify",
        "up",
        "post",
        "tail",
        "relay",
    ] {
        let out = apiary().args([sub, "--help"]).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{sub}: {out:?}");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("Usage: apiary"), "{sub}: {text}");
    }
}

fn link_or_copy(from: &str, to: &std::path::Path) {
    if std::fs::hard_link(from, to).is_err() {
        std::fs::copy(from, to).unwrap();
    }
}
