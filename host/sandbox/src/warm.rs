//! Stores kept between calls. A store whose call ended normally (an answer, or the component's own
//! error result) keeps its instance for the next call of the same component with the same grants
//! for the same persona; that saves the WASI context, the preopen, the store and the instantiation
//! (tens of µs, most of a hook call). A trap, a deadline, the memory cap or a refused answer drops
//! the store, so the next call starts fresh, as the contract says ("a fresh instance after any
//! trap"). Limits still apply per call: the deadline is re-armed, the log budget reset.
//!
//! What could pile up in a long-lived store is bounded: a store is retired after
//! [`MAX_CALLS`] calls, when its memory grew past [`MAX_MEMORY`], or when it holds more WASI
//! resources (open files, streams) than after its first call plus [`RESOURCE_SLACK`]. Parked
//! stores hold slots of the pooling allocator, so the sandbox parks at most a quarter of them.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use wasmtime::Store;
use wasmtime::component::Instance;

use super::State;

/// Calls one store serves before it is retired.
pub const MAX_CALLS: u32 = 10_000;
/// A store whose linear memory grew past this is not kept.
pub const MAX_MEMORY: usize = 16 << 20;
/// WASI resources a store may hold beyond what it held after its first call.
pub const RESOURCE_SLACK: usize = 4;

/// A store and (once instantiated) its instance.
pub(crate) struct Live {
    pub(crate) store: Store<State>,
    pub(crate) instance: Option<Instance>,
    calls: u32,
    /// Live WASI resources after the first call.
    resources: Option<usize>,
}

impl Live {
    pub(crate) fn new(store: Store<State>) -> Live {
        Live {
            store,
            instance: None,
            calls: 0,
            resources: None,
        }
    }

    /// Counts a call that ended normally; `false` when the store should be retired anyway.
    pub(crate) fn served(&mut self) -> bool {
        self.calls += 1;
        let resources = self.store.data_mut().table.iter_mut().count();
        let baseline = *self.resources.get_or_insert(resources);
        self.calls < MAX_CALLS
            && resources <= baseline + RESOURCE_SLACK
            && self.store.data().limiter.grown_to <= MAX_MEMORY
    }
}

/// How many stores may be parked across the sandbox.
pub(crate) struct Budget(AtomicUsize);

impl Budget {
    pub(crate) fn new(stores: usize) -> Arc<Budget> {
        Arc::new(Budget(AtomicUsize::new(stores)))
    }

    fn acquire(&self) -> bool {
        self.0
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
            .is_ok()
    }

    fn release(&self, n: usize) {
        self.0.fetch_add(n, Ordering::AcqRel);
    }
}

/// The parked stores of one component, each with the key it may serve (grants and persona).
pub(crate) struct WarmPool<K> {
    parked: Mutex<Vec<(K, Live)>>,
    /// Most stores parked for this component; the oldest goes first.
    capacity: usize,
    budget: Arc<Budget>,
}

impl<K: PartialEq> WarmPool<K> {
    pub(crate) fn new(budget: Arc<Budget>, capacity: usize) -> WarmPool<K> {
        WarmPool {
            parked: Mutex::new(Vec::new()),
            capacity,
            budget,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(K, Live)>> {
        self.parked.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A parked store for `key`, if there is one (it is then the caller's).
    pub(crate) fn take(&self, key: &K) -> Option<Live> {
        let mut parked = self.lock();
        let at = parked.iter().position(|(k, _)| k == key)?;
        let (_, live) = parked.remove(at);
        self.budget.release(1);
        Some(live)
    }

    /// Parks `live` for `key`, evicting this component's oldest store when full; drops it when
    /// the sandbox-wide budget is used up.
    pub(crate) fn put(&self, key: K, live: Live) {
        let mut parked = self.lock();
        if parked.len() >= self.capacity || !self.budget.acquire() {
            if parked.is_empty() {
                return;
            }
            // Reuse the slot of this component's oldest store.
            parked.remove(0);
        }
        parked.push((key, live));
    }
}

impl<K> Drop for WarmPool<K> {
    fn drop(&mut self) {
        let parked = self.parked.get_mut().unwrap_or_else(|p| p.into_inner());
        self.budget.release(parked.len());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_never_goes_below_zero_and_comes_back() {
        let b = Budget::new(2);
        assert!(b.acquire());
        assert!(b.acquire());
        assert!(!b.acquire());
        b.release(2);
        assert!(b.acquire());
    }
}
