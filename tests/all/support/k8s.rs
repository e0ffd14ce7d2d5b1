//! A Kubernetes Secret as `apiary keys export --format k8s-secret` writes it, read back and
//! "mounted" the way the kubelet mounts it with the `items:` its comment lists (files 0400 in
//! directories 0700), so tests can point `up --keys-dir` at what a pod would see.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use base64::Engine as _;

/// The Secret's `items:` comment (key, path) pairs.
pub type Items = Vec<(String, String)>;

/// The Secret's `items:` comment and its `data` (key -> decoded bytes).
pub fn parse_secret(yaml: &str) -> (Items, BTreeMap<String, Vec<u8>>) {
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

/// The Secret in `secret` mounted under `mount` as its items say; `mount`.
pub fn mount_secret(secret: &Path, mount: &Path) -> PathBuf {
    let (items, data) = parse_secret(&std::fs::read_to_string(secret).unwrap());
    for (key, path) in &items {
        let file = mount.join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::set_permissions(file.parent().unwrap(), PermissionsExt::from_mode(0o700)).unwrap();
        std::fs::write(&file, &data[key]).unwrap();
        std::fs::set_permissions(&file, PermissionsExt::from_mode(0o400)).unwrap();
    }
    mount.to_path_buf()
}

/// `apiary keys new --pack <pack>` into a scratch store under `home`, exported as a Secret and
/// mounted at `mount`: the key directory a replica's pod would have.
pub fn provisioned_keys(home: &Path, pack: &Path, mount: &Path) -> PathBuf {
    let store = home.join("keys-made-ahead");
    let (pack_s, store_s) = (pack.to_str().unwrap(), store.to_str().unwrap());
    let made = apiary_e2e::run(
        home,
        &["keys", "new", "--pack", pack_s, "--keys-dir", store_s],
    );
    assert_eq!(made.code, 0, "{}", made.stderr);
    let secret = home.join("apiary-keys.secret.yaml");
    let exported = apiary_e2e::run(
        home,
        &[
            "keys",
            "export",
            "--pack",
            pack_s,
            "--format",
            "k8s-secret",
            "--keys-dir",
            store_s,
            "--out",
            secret.to_str().unwrap(),
        ],
    );
    assert_eq!(exported.code, 0, "{}", exported.stderr);
    mount_secret(&secret, mount)
}
