//! Where a component call runs, and what a host panic during one becomes.
//!
//! wasmtime-wasi's synchronous WASI bindings run every blocking WASI operation (a guest's
//! `println!`, a file write in its workspace, even the message a panicking Rust guest prints) with
//! `Handle::block_on` on the current tokio runtime. On a thread that drives async tasks that
//! panics ("Cannot start a runtime from within a runtime"), and an unwinding panic on the harness's
//! main task ended `apiary up` with every pack in it. So every call into a component goes through
//! [`outside_async`], whoever calls it, and a panic inside it is caught and returned as an error
//! for that one call.

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind};

use tokio::runtime::{Handle, RuntimeFlavor};

/// Runs `f` where blocking is allowed: directly outside any tokio runtime (WASI then uses its own)
/// or on a blocking-pool thread; through `block_in_place` on a multi-thread runtime's worker (its
/// other tasks move to another thread meanwhile); on a scoped thread of its own inside a
/// current-thread runtime, which has no other thread to hand its tasks to. `Err` is the message
/// of a panic in `f`. (`block_in_place` on an idle worker costs about 0.4 µs a call: routing calls
/// the trigger component this way for every event.)
pub(crate) fn outside_async<R: Send>(f: impl FnOnce() -> R + Send) -> Result<R, Panicked> {
    let guarded = move || catch_unwind(AssertUnwindSafe(f)).map_err(|p| Panicked(panic_text(p)));
    match Handle::try_current().map(|h| h.runtime_flavor()) {
        Err(_) => guarded(),
        Ok(RuntimeFlavor::CurrentThread) => std::thread::scope(|s| {
            s.spawn(guarded)
                .join()
                .unwrap_or_else(|p| Err(Panicked(panic_text(p))))
        }),
        Ok(_) => tokio::task::block_in_place(guarded),
    }
}

/// A panic caught in [`outside_async`], with its message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Panicked(pub String);

/// The message of a caught panic.
pub fn panic_text(payload: Box<dyn Any + Send>) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic without a message".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The panic wasmtime-wasi hit: `Handle::block_on` from a runtime worker. Through
    /// [`outside_async`] it works on both runtime flavours and outside any runtime.
    fn block_on_current() -> u32 {
        match Handle::try_current() {
            Ok(h) => h.block_on(async { 7 }),
            Err(_) => 7,
        }
    }

    #[test]
    fn blocking_works_everywhere() {
        assert_eq!(outside_async(block_on_current), Ok(7));
        let multi = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .build()
            .unwrap();
        let on_worker = multi.block_on(async {
            tokio::spawn(async { outside_async(block_on_current) })
                .await
                .unwrap()
        });
        assert_eq!(on_worker, Ok(7));
        let current = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        assert_eq!(
            current.block_on(async { outside_async(block_on_current) }),
            Ok(7)
        );
    }

    #[test]
    fn a_panic_is_an_error() {
        let r: Result<(), Panicked> = outside_async(|| panic!("boom {}", 1));
        assert_eq!(r, Err(Panicked("boom 1".to_string())));
    }
}
