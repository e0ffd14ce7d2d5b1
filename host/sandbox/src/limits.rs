//! Per-call limits: deadline, memory cap, caps on what crosses into the host.

use std::time::Duration;

use wasmtime::{ResourceLimiter, StoreLimits, StoreLimitsBuilder};

/// Limits applied to one call into a component.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Wall-clock budget for instantiation plus the call (checked every epoch tick, 10 ms).
    pub deadline: Duration,
    /// Cap on the guest's linear memory; growing past it traps.
    pub memory: usize,
    /// Cap on any single string the guest returns to the host (error messages, reasons).
    pub max_string: usize,
    /// Cap on the number of elements of a list the guest returns to the host.
    pub max_list: usize,
    /// Bytes of stdout and of stderr kept per call; the rest is dropped (and counted).
    pub max_output: usize,
}

impl Limits {
    /// Hooks: `on_message` has 5 seconds (spec section 9); the same cap serves start and stop.
    pub fn hook() -> Limits {
        Limits {
            deadline: Duration::from_secs(5),
            memory: 64 << 20,
            max_string: 64 << 10,
            max_list: 0,
            max_output: 64 << 10,
        }
    }

    /// Trigger matchers: pure functions, a batch at a time.
    pub fn trigger() -> Limits {
        Limits {
            deadline: Duration::from_secs(2),
            memory: 256 << 20,
            max_string: 4 << 10,
            max_list: 1 << 20,
            max_output: 16 << 10,
        }
    }

    /// Converters: whole trees, more time and memory.
    pub fn converter() -> Limits {
        Limits {
            deadline: Duration::from_secs(30),
            memory: 256 << 20,
            max_string: 64 << 10,
            max_list: 100_000,
            max_output: 64 << 10,
        }
    }
}

/// Elements of one wasm table (8 to 16 bytes of host memory each). The pooling allocator's
/// table slots are this size; without the pool (the on-demand fallback) only the store's limiter
/// caps them, and a component could otherwise declare or grow a table of 2^32 elements. Rust
/// guests have a few hundred.
pub const MAX_TABLE_ELEMENTS: usize = 20_000;
/// Per store (one component instance): core instances, tables and linear memories. The memory
/// cap holds per memory, so the number of memories bounds the total. Generous for what
/// `wasm32-wasip2` toolchains emit (one memory, a few tables and core instances).
pub const MAX_INSTANCES: usize = 64;
pub const MAX_TABLES: usize = 64;
pub const MAX_MEMORIES: usize = 4;

/// wasmtime's [`StoreLimits`] (with `trap_on_grow_failure`), plus a record of a refused growth so
/// the host can say "memory cap" instead of a bare trap, and of the largest memory granted.
pub(crate) struct Limiter {
    inner: StoreLimits,
    pub(crate) refused_growth: Option<usize>,
    /// The table size last refused, for the same reason.
    pub(crate) refused_table: Option<usize>,
    pub(crate) grown_to: usize,
}

impl Limiter {
    pub(crate) fn new(memory: usize) -> Limiter {
        Limiter {
            inner: StoreLimitsBuilder::new()
                .memory_size(memory)
                .table_elements(MAX_TABLE_ELEMENTS)
                .instances(MAX_INSTANCES)
                .tables(MAX_TABLES)
                .memories(MAX_MEMORIES)
                .trap_on_grow_failure(true)
                .build(),
            refused_growth: None,
            refused_table: None,
            grown_to: 0,
        }
    }
}

impl ResourceLimiter for Limiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let answer = self.inner.memory_growing(current, desired, maximum);
        if matches!(answer, Ok(true)) {
            self.grown_to = self.grown_to.max(desired);
        } else {
            self.refused_growth = Some(desired);
        }
        answer
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let answer = self.inner.table_growing(current, desired, maximum);
        if !matches!(answer, Ok(true)) {
            self.refused_table = Some(desired);
        }
        answer
    }

    fn instances(&self) -> usize {
        self.inner.instances()
    }

    fn tables(&self) -> usize {
        self.inner.tables()
    }

    fn memories(&self) -> usize {
        self.inner.memories()
    }
}
