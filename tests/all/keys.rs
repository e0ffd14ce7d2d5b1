//! `apiary keys`: a pack's keys made ahead of time, listed without their secrets, exported as a
//! Kubernetes Secret that the Kubernetes schemas accept and that `up --keys-dir` reads once it is
//! mounted as deploy/base mounts it.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use apiary_e2e::{ci_python, run};
use base64::Engine as _;
use nostr::prelude::{FromBech32, PublicKey};

use crate::support::live::Up;

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

/// The Secret's `items:` comment (key, path) pairs.
type Items = Vec<(String, String)>;

/// The Secret's `items:` comment and its `data` (key -> decoded bytes).
fn parse_secret(yaml: &str) -> (Items, BTreeMap<String, Vec<u8>>) {
    let mut items = Vec::new();
    let mut key = None;
    for line in yaml.lines() {
        if let Some(k) = line.strip_prefix("#     - key: ") {
            key = Some(k.to_string());
        } else if let Some(p) = line.strip_prefix("#       path: ") {
            items.push((key.take().unwrap(), p.to_string()));
        }
    }
    let data = yaml
        .split("\ndata:\n")
        .nth(1)
        .unwrap()
        .lines()
        .map(|l| {
            let (k, v) = l.trim().split_once(": ").unwrap();
            let bytes = base64::engine::general_purpose::STANDARD.decode(v).unwrap();
            (k.to_string(), bytes)
        })
        .collect();
    (items, data)
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn keys_made_ahead_are_listed_exported_and_read_by_up_keys_dir() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let pack = h.join("crew");
    let pack_s = pack.to_str().unwrap();
    let made = run(
        h,
        &[
            "pack",
            "new",
            pack_s,
            "--id",
            "com.example.crew",
            "--persona",
            "scout",
            "--persona",
            "scribe",
        ],
    );
    assert_eq!(made.code, 0, "{}", made.stderr);
    let store = h.join("keys");
    let store_s = store.to_str().unwrap();

    let new = run(
        h,
        &[
            "keys",
            "new",
            "--pack",
            pack_s,
            "--keys-dir",
            store_s,
            "--json",
        ],
    );
    assert_eq!(new.code, 0, "{}", new.stderr);
    let made = npubs(&new.json());
    assert_eq!(
        made.keys().collect::<Vec<_>>(),
        ["operator", "scout", "scribe"]
    );
    let scout_file = store.join("com.example.crew/scout.key");
    assert_eq!(mode(&scout_file), 0o600);
    let scout_secret = std::fs::read_to_string(&scout_file).unwrap();

    // Made again: the same keys, kept.
    let again = run(
        h,
        &[
            "keys",
            "new",
            "--pack",
            pack_s,
            "--keys-dir",
            store_s,
            "--json",
        ],
    );
    assert_eq!(npubs(&again.json()), made);

    // Listed without secrets unless asked for.
    let list = run(h, &["keys", "list", "--keys-dir", store_s, "--json"]);
    assert_eq!(list.code, 0, "{}", list.stderr);
    assert_eq!(npubs(&list.json()), made);
    assert!(
        !list.stdout.contains(scout_secret.trim()),
        "{}",
        list.stdout
    );
    let shown = run(h, &["keys", "list", "--keys-dir", store_s, "--show-secret"]);
    assert!(
        shown.stdout.contains(scout_secret.trim()),
        "{}",
        shown.stdout
    );
    // A key `up` would refuse (readable by others) is listed as unusable, the rest as they are.
    std::fs::set_permissions(&scout_file, PermissionsExt::from_mode(0o644)).unwrap();
    let open = run(
        h,
        &[
            "keys",
            "list",
            "--keys-dir",
            store_s,
            "--json",
            "--show-secret",
        ],
    );
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

    // Exported as a Secret (0600, never over an existing file) the Kubernetes schemas accept.
    let secret = h.join("secret.yaml");
    let secret_s = secret.to_str().unwrap();
    let export = [
        "keys",
        "export",
        "--pack",
        pack_s,
        "--format",
        "k8s-secret",
        "--keys-dir",
        store_s,
        "--out",
        secret_s,
    ];
    let exported = run(h, &export);
    assert_eq!(exported.code, 0, "{}", exported.stderr);
    assert_eq!(mode(&secret), 0o600);
    let refused = run(h, &export);
    assert_eq!(refused.code, 1, "an existing file is not overwritten");
    let checked = std::process::Command::new(ci_python())
        .args(["-m", "kubernetes_validate", "--strict", "--quiet", secret_s])
        .output()
        .expect("run kubernetes-validate");
    assert!(
        checked.status.success(),
        "{}{}",
        String::from_utf8_lossy(&checked.stdout),
        String::from_utf8_lossy(&checked.stderr)
    );

    // Mounted as the items say (files 0400), it is what `up --keys-dir` signs with.
    let (items, data) = parse_secret(&std::fs::read_to_string(&secret).unwrap());
    assert_eq!(items.len(), 3, "{items:?}");
    let mount = h.join("mounted");
    for (key, path) in &items {
        let file = mount.join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::set_permissions(file.parent().unwrap(), PermissionsExt::from_mode(0o700)).unwrap();
        std::fs::write(&file, &data[key]).unwrap();
        std::fs::set_permissions(&file, PermissionsExt::from_mode(0o400)).unwrap();
    }
    let mount_s = mount.to_str().unwrap().to_string();
    let mut up = Up::start(h, &[&pack], &["--keys-dir", &mount_s], &[]);
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

#[test]
fn an_export_of_keys_never_made_is_refused_and_writes_nothing() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let pack = h.join("crew");
    let pack_s = pack.to_str().unwrap();
    assert_eq!(
        run(h, &["pack", "new", pack_s, "--id", "com.example.crew"]).code,
        0
    );
    let store = h.join("empty-store");
    let out = h.join("secret.yaml");
    let r = run(
        h,
        &[
            "keys",
            "export",
            "--pack",
            pack_s,
            "--format",
            "k8s-secret",
            "--keys-dir",
            store.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
    );
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("apiary keys new --pack"), "{}", r.stderr);
    assert!(!out.exists() && !store.exists(), "an export only reads");

    // A name that is not a Kubernetes name is a usage error.
    let r = run(
        h,
        &[
            "keys",
            "export",
            "--pack",
            pack_s,
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
