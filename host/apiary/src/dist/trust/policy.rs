//! The trust store as the harness asks it ([`ScriptTrust`]): which script hooks may run and what a
//! component hook was granted. The one adapter between the two: `up` hands it to the dispatcher
//! for the packs it runs (re-reading the store when a pack is reloaded), `hook run` for the one
//! pack it runs.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use super::{PackRef, TrustView};
use crate::dispatch::sandboxed::{ScriptTrust, Untrusted};

/// What `--trust-hooks` does not cover, said with the store's refusal.
pub const NOT_AT_START: &str =
    "--trust-hooks covers only the packs, versions and files `up` started with";

/// The operator's trust store, for the packs being run.
pub struct StoreTrust {
    view: RwLock<TrustView>,
    /// Each pack as trust sees it (manifest id and version, root), by pack id.
    packs: RwLock<HashMap<String, PackRef>>,
    /// The install root whose store is read again when a pack is reloaded.
    root: Option<PathBuf>,
    /// `up --trust-hooks`: what `up` started with, trusted as it was then.
    at_start: Option<Arc<TrustView>>,
    /// `hook run --grant`: capabilities granted to every component hook besides the recorded ones.
    extra_grants: Vec<String>,
    /// `hook run`: script hooks run only under its own `--trust-hooks`, never from the store.
    scripts: Scripts,
}

enum Scripts {
    FromStore,
    Refused(Untrusted),
}

impl StoreTrust {
    /// Trust as `view` records it for `packs`; `root` is where the store is read again.
    pub fn new(view: TrustView, packs: &[PackRef], root: Option<PathBuf>) -> StoreTrust {
        let packs = packs.iter().map(|p| (p.id.clone(), p.clone())).collect();
        StoreTrust {
            view: RwLock::new(view),
            packs: RwLock::new(packs),
            root,
            at_start: None,
            extra_grants: Vec::new(),
            scripts: Scripts::FromStore,
        }
    }

    /// Also trusts what `at_start` trusted (`up --trust-hooks`).
    pub fn trusting_at_start(mut self, at_start: Option<Arc<TrustView>>) -> StoreTrust {
        self.at_start = at_start;
        self
    }

    /// Grants `grants` to every component hook besides what the store recorded.
    pub fn granting(mut self, grants: Vec<String>) -> StoreTrust {
        self.extra_grants = grants;
        self
    }

    /// Refuses every script hook with `untrusted` (the caller has its own switch for them).
    pub fn refusing_scripts(mut self, untrusted: Untrusted) -> StoreTrust {
        self.scripts = Scripts::Refused(untrusted);
        self
    }

    fn pack(&self, pack_id: &str) -> Option<PackRef> {
        let packs = self.packs.read().unwrap_or_else(|e| e.into_inner());
        packs.get(pack_id).cloned()
    }

    fn view(&self) -> std::sync::RwLockReadGuard<'_, TrustView> {
        self.view.read().unwrap_or_else(|e| e.into_inner())
    }
}

impl ScriptTrust for StoreTrust {
    fn script_hook(&self, pack_id: &str, command: &str) -> Result<(), Untrusted> {
        if let Scripts::Refused(untrusted) = &self.scripts {
            return Err(untrusted.clone());
        }
        let Some(pack) = self.pack(pack_id) else {
            return Err(Untrusted {
                why: format!("pack {pack_id} is not known to the trust check"),
                remedy: Untrusted::TRUST_ALL.into(),
            });
        };
        if let Some(start) = &self.at_start
            && start.hook(&pack, command).is_ok()
        {
            return Ok(());
        }
        // The store's refusal carries the command that records trust as its help.
        let view = self.view();
        view.hook(&pack, command).map_err(|e| Untrusted {
            why: match self.at_start {
                Some(_) => format!("{} ({NOT_AT_START})", e.message),
                None => e.message,
            },
            remedy: e.help.unwrap_or_else(|| view.remedy(&pack)),
        })
    }

    fn component_grants(&self, pack_id: &str, hook: &str) -> Vec<String> {
        let mut grants = match self.pack(pack_id) {
            Some(pack) => self.view().component_grants(&pack, hook),
            None => Vec::new(),
        };
        grants.extend(self.extra_grants.iter().cloned());
        grants
    }

    /// The reloaded pack is trusted as the store (read again) says of its new version.
    fn pack_changed(&self, pack_id: &str, pack: Option<&crate::pack::Pack>) {
        {
            let mut packs = self.packs.write().unwrap_or_else(|e| e.into_inner());
            match pack {
                Some(p) => packs.insert(pack_id.to_string(), PackRef::of(p)),
                None => packs.remove(pack_id),
            };
        }
        if let Some(root) = &self.root {
            *self.view.write().unwrap_or_else(|e| e.into_inner()) = TrustView::load(root);
        }
    }
}
