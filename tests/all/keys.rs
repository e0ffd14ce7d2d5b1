//! `apiary keys`: a pack's keys made ahead of time, listed without their secrets, exported as a
//! Kubernetes Secret that the Kubernetes schemas accept and that `up --keys-dir` reads once it is
//! mounted as deploy/base mounts it.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use apiary_e2e::{ci_python, run};
use nostr::prelude::{FromBech32, PublicKey};

use crate::support::k8s::{mount_secret, parse_secret};
use crate::support::live::Up;
use crate::support::pack::pack_new;

/// persona (or `operator`) -> npub, from `keys new`/`keys list --json`.
fn npubs(v: &serde_json::Value) -> BTreeMap<String, String> {
    v["keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| {
            let who = k["persona"].as_str().or(k["role"].as_str()).unwrap();
            (who.to_string(), k["npub"].as_str().unwrap().to_string())
        })
        .collect()
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// A pack `com.example.crew` (scout, scribe) made with `pack new`, and a key store beside it.
struct Crew {
    home: tempfile::TempDir,
}

impl Crew {
    fn new() -> Crew {
        let home = tempfile::tempdir().unwrap();
        let crew = Crew { home };
        pack_new(
            crew.h(),
            &crew.pack(),
            "com.example.crew",
            &["scout", "scribe"],
        );
        crew
    }

    fn h(&self) -> &Path {
        self.home.path()
    }

    fn pack(&self) -> std::path::PathBuf {
        self.h().join("crew")
    }

    fn store(&self) -> std::path::PathBuf {
        self.h().join("keys")
    }

    /// `apiary keys <command> [--pack crew] --keys-dir <store> <extra>`.
    fn keys(&self, command: &str, extra: &[&str]) -> apiary_e2e::Run {
        let (pack, store) = (self.pack(), self.store());
        let mut args = vec!["keys", command];
        if command != "list" {
            args.extend(["--pack", pack.to_str().unwrap()]);
        }
        args.extend(["--keys-dir", store.to_str().unwrap()]);
        args.extend_from_slice(extra);
        run(self.h(), &args)
    }

    /// `keys export --format k8s-secret --out <file>`.
    fn export_to(&self, file: &Path) -> apiary_e2e::Run {
        self.keys(
            "export",
            &["--format", "k8s-secret", "--out", file.to_str().unwrap()],
        )
    }
}

#[test]
fn keys_made_ahead_are_listed_exported_and_read_by_up_keys_dir() {
    let crew = Crew::new();
    let made = made_twice_the_same(&crew);
    listed_without_secrets_and_with_unusable_keys_marked(&crew, &made);
    let secret = exported_as_a_valid_secret(&crew);
    assert_eq!(
        parse_secret(&std::fs::read_to_string(&secret).unwrap())
            .0
            .len(),
        3
    );
    let mount = mount_secret(&secret, &crew.h().join("mounted"));
    let mount_s = mount.to_str().unwrap().to_string();
    let mut up = Up::start(crew.h(), &[&crew.pack()], &["--keys-dir", &mount_s], &[]);
    for persona in ["scout", "scribe"] {
        let line = up.wait_for(|l| l.starts_with(&format!("persona {persona} ready ")));
        let hex = line
            .split_whitespace()
            .find_map(|w| w.strip_prefix("pubkey="))
            .unwrap();
        let expected = PublicKey::from_bech32(&made[persona]).unwrap().to_hex();
        assert_eq!(hex, expected, "{persona}");
    }
    up.stop_ok();
}

/// `keys new` makes the operator's and each persona's key (0600); made again, they are kept.
fn made_twice_the_same(crew: &Crew) -> BTreeMap<String, String> {
    let new = crew.keys("new", &["--json"]);
    assert_eq!(new.code, 0, "{}", new.stderr);
    let made = npubs(&new.json());
    assert_eq!(
        made.keys().collect::<Vec<_>>(),
        ["operator", "scout", "scribe"]
    );
    assert_eq!(
        mode(&crew.store().join("com.example.crew/scout.key")),
        0o600
    );
    assert_eq!(npubs(&crew.keys("new", &["--json"]).json()), made);
    made
}

/// Listed without secrets unless asked for; a key `up` would refuse (readable by others) is
/// listed as unusable, the rest as they are.
fn listed_without_secrets_and_with_unusable_keys_marked(
    crew: &Crew,
    made: &BTreeMap<String, String>,
) {
    let scout_file = crew.store().join("com.example.crew/scout.key");
    let scout_secret = std::fs::read_to_string(&scout_file).unwrap();
    let list = crew.keys("list", &["--json"]);
    assert_eq!(list.code, 0, "{}", list.stderr);
    assert_eq!(&npubs(&list.json()), made);
    assert!(
        !list.stdout.contains(scout_secret.trim()),
        "{}",
        list.stdout
    );
    let shown = crew.keys("list", &["--show-secret"]);
    assert!(
        shown.stdout.contains(scout_secret.trim()),
        "{}",
        shown.stdout
    );

    std::fs::set_permissions(&scout_file, PermissionsExt::from_mode(0o644)).unwrap();
    let open = crew.keys("list", &["--json", "--show-secret"]);
    assert_eq!(open.code, 1, "{}", open.stdout);
    let listed = open.json();
    let of = |who: &str| {
        listed["keys"]
            .as_array()
            .unwrap()
            .iter()
            .find(|k| k["persona"] == who)
            .unwrap()
            .clone()
    };
    assert!(of("scout")["problem"].is_string(), "{listed}");
    assert!(of("scout")["secret"].is_null(), "{listed}");
    assert_eq!(of("scout")["npub"], made["scout"].as_str());
    assert!(of("scribe")["problem"].is_null(), "{listed}");
    std::fs::set_permissions(&scout_file, PermissionsExt::from_mode(0o600)).unwrap();
}

/// Exported as a Secret (0600, never over an existing file) the Kubernetes schemas accept.
fn exported_as_a_valid_secret(crew: &Crew) -> std::path::PathBuf {
    let secret = crew.h().join("secret.yaml");
    let exported = crew.export_to(&secret);
    assert_eq!(exported.code, 0, "{}", exported.stderr);
    assert_eq!(mode(&secret), 0o600);
    let refused = crew.export_to(&secret);
    assert_eq!(refused.code, 1, "an existing file is not overwritten");
    let checked = std::process::Command::new(ci_python())
        .args(["-m", "kubernetes_validate", "--strict", "--quiet"])
        .arg(&secret)
        .output()
        .expect("run kubernetes-validate");
    assert!(
        checked.status.success(),
        "{}{}",
        String::from_utf8_lossy(&checked.stdout),
        String::from_utf8_lossy(&checked.stderr)
    );
    secret
}

#[test]
fn an_export_of_keys_never_made_is_refused_and_writes_nothing() {
    let crew = Crew::new();
    let out = crew.h().join("secret.yaml");
    let r = crew.export_to(&out);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("apiary keys new --pack"), "{}", r.stderr);
    assert!(
        !out.exists() && !crew.store().exists(),
        "an export only reads"
    );

    // A name that is not a Kubernetes name is a usage error.
    let r = crew.keys(
        "export",
        &[
            "--format",
            "k8s-secret",
            "--name",
            "Bad_Name",
            "--out",
            out.to_str().unwrap(),
        ],
    );
    assert_eq!(r.code, 64, "{}", r.stderr);
}
