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
