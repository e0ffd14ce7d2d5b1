//! `up --trust-hooks`: trust for exactly what `up` was started with. The grant is recorded in
//! memory as `apiary trust` would record it (each pack's location, id and version, each hook
//! file's digest and command lines, each stdio MCP server's definition digest), so a pack that a
//! hot reload brings in later, a new version, or a file changed since is not covered: it goes
//! through the operator's trust store like any other.

use std::path::Path;

use super::{DirTrust, PackTrust, TrustStore, TrustView, TrustedHook, TrustedMcp, dir_hooks};
use crate::pack::Pack;

impl TrustView {
    /// Trust for `packs` as they are now, for the install root `root` (which tells an installed
    /// copy from a directory); nothing else is trusted by it.
    pub fn granted_at_start(root: &Path, packs: &[&Pack]) -> TrustView {
        let mut view = TrustView {
            root: root.canonicalize().unwrap_or_else(|_| root.to_path_buf()),
            store: TrustStore::default(),
            problem: None,
        };
        for pack in packs {
            let trust = everything_of(pack);
            let pack_ref = super::PackRef::of(pack);
            if view.is_installed_copy(&pack_ref) {
                view.store.packs.insert(pack_ref.id, trust);
            } else {
                let dir = DirTrust {
                    pack_id: pack_ref.id,
                    trust,
                };
                let key = pack_ref.root.to_string_lossy().into_owned();
                view.store.dirs.insert(key, dir);
            }
        }
        view
    }
}

/// Every hook (with its file's digest now) and stdio MCP server of `pack`.
fn everything_of(pack: &Pack) -> PackTrust {
    let now = crate::dist::now_rfc3339();
    let hooks = dir_hooks(pack)
        .into_iter()
        .filter(|h| h.intact)
        .map(|h| TrustedHook {
            path: h.path,
            sha256: h.sha256,
            kind: h.kind,
            commands: h.commands,
            // Component grants come from the store only; `--trust-hooks` is about scripts.
            grants: Vec::new(),
            trusted_at: now.clone(),
        })
        .collect();
    let mcp_servers = super::mcp_servers(pack)
        .into_iter()
        .map(|m| TrustedMcp {
            name: m.name,
            sha256: m.sha256,
            command_line: m.command_line,
            trusted_at: now.clone(),
        })
        .collect();
    PackTrust {
        version: pack.manifest.version.clone(),
        hooks,
        mcp_servers,
    }
}
