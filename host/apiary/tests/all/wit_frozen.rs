//! The released WIT folders are frozen: a digest of each is checked here.

use sha2::{Digest, Sha256};
use std::path::Path;

/// Released WIT folders and the SHA-256 of their contents (see [`folder_digest`]). A released
/// folder is a published contract: components in the wild were built against it, so it must
/// never change, not even a doc comment (tools compare worlds textually and docs ship in
/// bindings). An additive change goes into a new `0.2.x` folder with `@since`; a breaking one
/// into the next minor version (queued in wit/PENDING-0.3.md). See wit/CHANGELOG.md.
const RELEASED: &[(&str, &str)] = &[
    (
        "apiary-plugin@0.1.0",
        "1fecbba166b566f49c4447fc393bd1b73c5c9747deb5daeae87dbbd71ea446c3",
    ),
    (
        "apiary-plugin@0.2.0",
        "d152d147275731189c54c37630346798ec33fd221e7668145d34a29e360d8ae9",
    ),
];

/// The digest of a folder: every file's name and bytes, in name order.
fn folder_digest(dir: &Path) -> String {
    let mut names: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").file_name())
        .collect();
    names.sort();
    let mut hash = Sha256::new();
    for name in names {
        let bytes = std::fs::read(dir.join(&name)).expect("a WIT file");
        hash.update(name.as_encoded_bytes());
        hash.update([0]);
        hash.update((bytes.len() as u64).to_le_bytes());
        hash.update(&bytes);
    }
    hash.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn released_wit_folders_never_change() {
    let wit = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../wit");
    for (folder, expected) in RELEASED {
        let found = folder_digest(&wit.join(folder));
        assert_eq!(
            &found, expected,
            "wit/{folder}/ is a released WIT version and must never change: components built \
             against it exist. Revert the change; put an additive change in a new 0.2.x folder \
             (items marked @since) and queue a breaking one in wit/PENDING-0.3.md \
             (wit/CHANGELOG.md explains the rule)."
        );
    }
}
