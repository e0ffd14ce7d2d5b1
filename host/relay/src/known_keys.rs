//! The public keys of the operator's key store as the embedded relay sees them: who may
//! authenticate, and whose events are the operator's own for storage (never refused for space,
//! any kind). Personas started after the relay get keys later, so the store is read again for a
//! key not known yet; a key file is read once per modification time, so a stranger repeating
//! itself costs a directory listing (for `AUTH`) or nothing within [`RELIST_AFTER`] (for each
//! event stored).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use nostr_sdk::prelude::PublicKey;

use crate::keys::KeyStore;

/// Whose an event is, for storage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owner {
    /// A key of the operator's key store, or an event signed in this process.
    Own,
    Foreign,
}

/// For events, an unknown key makes the store be listed again at most this often.
pub const RELIST_AFTER: Duration = Duration::from_secs(2);

#[derive(Debug)]
pub struct KnownKeys {
    store: Option<KeyStore>,
    cache: Mutex<Cache>,
}

#[derive(Debug, Default)]
struct Cache {
    files: HashMap<PathBuf, KeyFile>,
    listed: Option<Instant>,
}

/// A key file as last read: its modification time and public key.
type KeyFile = (Option<SystemTime>, Option<PublicKey>);

impl KnownKeys {
    pub fn new(store: Option<KeyStore>) -> KnownKeys {
        KnownKeys {
            store,
            cache: Mutex::default(),
        }
    }

    /// Whether `key` is in the store now (listed again when it is not known yet).
    pub fn contains(&self, key: &PublicKey) -> bool {
        self.lookup(key, Duration::ZERO)
    }

    /// Whether `key` was in the store at the last listing, listed again when that is older than
    /// [`RELIST_AFTER`].
    pub fn contains_recent(&self, key: &PublicKey) -> bool {
        self.lookup(key, RELIST_AFTER)
    }

    fn lookup(&self, key: &PublicKey, fresh_for: Duration) -> bool {
        let Some(store) = &self.store else {
            return false;
        };
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        if cache.knows(key) {
            return true;
        }
        if cache.listed.is_some_and(|at| at.elapsed() < fresh_for) {
            return false;
        }
        cache.relist(store);
        cache.knows(key)
    }
}

/// Whose an event is, for storage: the relay's own key and the key store's are the operator's.
#[derive(Debug, Clone)]
pub struct Owners {
    pub relay: PublicKey,
    pub known: Arc<KnownKeys>,
}

impl Owners {
    /// Whose `author`'s events are, as of the last listing of the store (at most
    /// [`RELIST_AFTER`] old for an unknown key).
    pub fn owner_of(&self, author: &PublicKey) -> Owner {
        self.classify(author, KnownKeys::contains_recent)
    }

    /// Whose `author`'s events are, the store listed again for an unknown key (for a refusal that
    /// only a key store's key escapes).
    pub fn owner_of_now(&self, author: &PublicKey) -> Owner {
        self.classify(author, KnownKeys::contains)
    }

    fn classify(&self, author: &PublicKey, known: fn(&KnownKeys, &PublicKey) -> bool) -> Owner {
        if *author == self.relay || known(&self.known, author) {
            Owner::Own
        } else {
            Owner::Foreign
        }
    }
}

impl Cache {
    fn knows(&self, key: &PublicKey) -> bool {
        self.files.values().any(|(_, pk)| pk.as_ref() == Some(key))
    }

    fn relist(&mut self, store: &KeyStore) {
        let files = store.key_files();
        self.files.retain(|path, _| files.contains(path));
        for path in files {
            let modified = std::fs::metadata(&path).and_then(|m| m.modified()).ok();
            // An unreadable file (e.g. one being written) is read again next time.
            let fresh = self
                .files
                .get(&path)
                .is_some_and(|(m, pk)| *m == modified && m.is_some() && pk.is_some());
            if !fresh {
                let pk = crate::keys::public_key_of(&path);
                self.files.insert(path, (modified, pk));
            }
        }
        self.listed = Some(Instant::now());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_created_later_are_found() {
        let tmp = tempfile::tempdir().unwrap();
        let store = KeyStore::new(tmp.path());
        let known = KnownKeys::new(Some(store.clone()));
        let operator = store.operator().unwrap().public_key();
        assert!(known.contains(&operator));
        let bee = store.persona("com.x", "bee").unwrap().public_key();
        // Within RELIST_AFTER an unknown key is not looked for again for events...
        assert!(!known.contains_recent(&bee));
        // ...but always for authentication.
        assert!(known.contains(&bee));
        assert!(known.contains_recent(&bee));
        assert!(!KnownKeys::new(None).contains(&bee));
    }
}
