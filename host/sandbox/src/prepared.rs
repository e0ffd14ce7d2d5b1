//! WASI contexts prepared once and lent to fresh stores. Building one costs a few µs of a fresh
//! call: the random generators seeded, the sinks and clocks boxed, and an `openat` per preopen.
//! None of it is written by the guest (the context is the host's configuration: grants, output
//! sinks, clocks, random generators), so a context whose store ended normally serves the next
//! fresh store with the same key. The instance, its memory, its tables and its resources are new
//! every time ([`State::recycled`](crate::State) drops what the last instance held).
//!
//! The key must cover everything the context was built from: for hooks, the persona and the
//! workspace's path and identity (a workspace replaced at the same path gets a new preopen).

use std::sync::Mutex;

use super::State;

/// Prepared contexts, each with the key it was built for; the oldest goes first when full.
pub(crate) struct Prepared<K> {
    spare: Mutex<Vec<(K, State)>>,
    capacity: usize,
}

impl<K: PartialEq> Prepared<K> {
    pub(crate) fn new(capacity: usize) -> Prepared<K> {
        Prepared {
            spare: Mutex::new(Vec::new()),
            capacity,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(K, State)>> {
        self.spare.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The context prepared for `key`, if there is one (it is then the caller's).
    pub(crate) fn take(&self, key: &K) -> Option<State> {
        let mut spare = self.lock();
        let at = spare.iter().position(|(k, _)| k == key)?;
        Some(spare.remove(at).1)
    }

    /// Keeps `state` for `key`, dropping the oldest when full.
    pub(crate) fn put(&self, key: K, state: State) {
        let mut spare = self.lock();
        if spare.len() >= self.capacity {
            spare.remove(0);
        }
        spare.push((key, state));
    }
}
