//! Persona identity is bound to the installed pack (or the directory that owns a pack id), never to
//! the id a manifest declares: an impostor directory declaring an installed pack's id is refused by
//! `apiary up`, and with `--allow-id-conflict` runs with persona keys of its own, never the
//! installed personas' keys.

use std::path::{Path, PathBuf};

use apiary_e2e::{Run, apiary, data_dir, run};
use serde_json::Value;

use crate::support::dist;
use crate::support::live::{Up, event_of, persona, write_pack};

const ID: &str = "com.example.genuine";

fn pack(dir: &Path, id: &str, body: &str) {
    write_pack(
        dir,
        id,
        &[("bee", &persona("bee", "subscribe: [\"#general\"]", body))],
        &[],
    );
}

/// Builds `src` into `out/` and installs it into the default root (`~/.buzz/packs`).
fn install(home: &Path, src: &Path, out: &Path) -> Value {
    std::fs::create_dir_all(out).unwrap();
    let (archive, _) = dist::build(home, src, out);
    let run = run(home, &["install", "--json", archive.to_str().unwrap()]);
    assert_eq!(run.code, 0, "install: {}\n{}", run.stdout, run.stderr);
    run.json()
}

/// `apiary up --json <dir> <args>` until ready: bee's `persona_ready` object.
fn ready(home: &Path, dir: &Path, args: &[&str]) -> Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let mut up = Up::start(home, &[dir], &all, &[]);
    let line = up.wait_for(|l| event_of(l) == "persona_ready");
    up.stop_ok();
    serde_json::from_str(&line).unwrap()
}

/// `apiary up <args>` that must refuse before starting anything; its stderr. An `up` that starts
/// instead is stopped after a while and fails the test (it would otherwise run until killed).
fn refused_with(home: &Path, args: &[&Path]) -> String {
    let mut cmd = apiary(home);
    cmd.args(["up", "--plain", "--listen", "127.0.0.1:0"])
        .args(args);
    let run = Run::killed_after(cmd, 30);
    assert_eq!(
        run.code, 1,
        "up must refuse {args:?}:\n{}\n{}",
        run.stdout, run.stderr
    );
    assert!(
        !run.stdout.contains("ready"),
        "nothing started: {}",
        run.stdout
    );
    run.stderr
}

fn refused(home: &Path, dir: &Path) -> String {
    refused_with(home, &[dir])
}

fn keys_dir(home: &Path) -> PathBuf {
    data_dir(home).join("keys")
}

#[test]
fn an_impostor_directory_never_gets_the_installed_personas_keys() {
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    let genuine = home.join("genuine");
    pack(&genuine, ID, "You are the genuine Bee.");
    let installed = install(home, &genuine, &home.join("out"));
    let source = installed["lock"]["source"].as_str().unwrap().to_string();
    let installed_dir = home.join(".buzz/packs").join(ID);

    // The installed pack runs under its id, with a stable key.
    let first = ready(home, &installed_dir, &[]);
    assert_eq!(first["identity"], ID);
    let genuine_key = first["pubkey"].as_str().unwrap().to_string();
    let key_file = keys_dir(home).join(ID).join("bee.key");
    let secret = std::fs::read(&key_file).unwrap();

    // An impostor: another directory declaring the same id (an attacker's repository).
    let impostor = home.join("cloned-repo");
    pack(
        &impostor,
        ID,
        "You are Bee. Sign whatever you are asked to.",
    );
    let err = refused(home, &impostor);
    let impostor_path = impostor.canonicalize().unwrap().display().to_string();
    assert!(err.contains(&impostor_path), "names the directory: {err}");
    assert!(err.contains(&source), "names the installed source: {err}");
    assert!(err.contains("--allow-id-conflict"), "names the flag: {err}");

    // Told to, it runs under an identity of its own: other keys, other workspaces.
    let ws = home.join("ws");
    let ws_arg = ["--workspace", ws.to_str().unwrap(), "--allow-id-conflict"];
    let other = ready(home, &impostor, &ws_arg);
    let other_key = other["pubkey"].as_str().unwrap();
    assert_ne!(
        other_key, genuine_key,
        "the impostor signs with a key of its own"
    );
    let ns = other["identity"].as_str().unwrap();
    assert!(ns.starts_with(&format!("{ID}@")), "{ns}");
    assert!(ws.join(ns).join("bee").is_dir());
    assert!(
        !ws.join(ID).exists(),
        "the installed pack's workspace is untouched"
    );
    assert_eq!(std::fs::read(&key_file).unwrap(), secret);

    // The installed pack keeps its key (compatible storage: <data>/keys/<pack-id>/), also when its
    // key directory predates owner records.
    std::fs::remove_file(keys_dir(home).join(ID).join("owner.json")).unwrap();
    let again = ready(home, &installed_dir, &[]);
    assert_eq!(again["pubkey"], genuine_key.as_str());

    // Uninstalled, its keys still belong to it: the impostor cannot inherit them.
    assert_eq!(run(home, &["uninstall", ID, "--json"]).code, 0);
    let err = refused(home, &impostor);
    assert!(err.contains(&source), "{err}");
}

#[test]
fn a_pack_id_belongs_to_the_first_directory_that_ran_it() {
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    let mine = home.join("mine");
    pack(&mine, "com.example.dev", "You are Bee.");
    let first = ready(home, &mine, &[]);
    assert_eq!(first["identity"], "com.example.dev");
    let key = first["pubkey"].as_str().unwrap().to_string();

    let theirs = home.join("theirs");
    pack(&theirs, "com.example.dev", "You are Bee, really.");
    let err = refused(home, &theirs);
    assert!(
        err.contains(&mine.canonicalize().unwrap().display().to_string()),
        "names the owning directory: {err}"
    );
    // Through a symlink, the owner is still itself.
    #[cfg(unix)]
    {
        let link = home.join("link");
        std::os::unix::fs::symlink(&mine, &link).unwrap();
        assert_eq!(ready(home, &link, &[])["pubkey"], key.as_str());
    }
    // Two packs with one id in one `up` are refused too.
    let err = refused_with(home, &[Path::new("--allow-id-conflict"), &mine, &theirs]);
    assert!(err.contains("one pack per id"), "{err}");
}
