//! The component sandbox: everything a pack or a third party supplies as code (hooks, trigger
//! matchers, converters) runs here, as a WebAssembly component in wasmtime.
//!
//! - One [`Sandbox`] per process ([`Sandbox::shared`]): one engine with an epoch ticker (10 ms),
//!   the pooling allocator, a linker holding WASI p2 and the `apiary:plugin/host` import.
//! - Components are compiled once and cached ([`cache`]), identified by world and WIT version
//!   ([`bindings::identify`]) and pre-instantiated ([`Loaded`] holds the `InstancePre`).
//! - Every call runs in a `Store` with a deadline, a memory cap, bounded stdout/stderr and only
//!   the WASI grants it needs ([`wasi::Grants`]). Hooks and triggers keep a store between calls
//!   that ended normally ([`warm`]); after a trap, a deadline or a refused answer the store is
//!   dropped, so a trap never poisons a later call. A component that keeps failing is switched
//!   off by a circuit breaker ([`BreakerPolicy`]).
//! - Front ends per world: [`hook`], [`trigger`], [`converter`].

pub mod bindings;
pub mod blocking;
pub mod cache;
pub mod caps;
pub mod converter;
pub mod hook;
pub mod http;
pub mod limits;
pub mod prepared;
pub mod trigger;
pub mod warm;
pub mod wasi;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use wasmtime::component::{Component, HasSelf, Instance, InstancePre, Linker, ResourceTable};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store, Trap};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

/// The sandbox's circuit breaker is apiary's one breaker (consecutive failures, a cooldown).
pub use apiary_limits::BreakerPolicy;
pub use bindings::{Identity, Release, SUPPORTED_RANGE, World};
pub use cache::{CompileCache, Provenance};
pub use caps::{Capabilities, Capability};
pub use limits::Limits;
pub use wasi::{Captured, Grants, Preopen};

use limits::Limiter;
use prepared::Prepared;
use warm::{Budget, Live, WarmPool};
use wasi::Sink;

/// The epoch tick: deadlines are measured in these.
pub const EPOCH_TICK: Duration = Duration::from_millis(10);

/// Lines a component may log through `apiary:plugin/host.log` per call, and bytes per line.
const LOG_LINES_PER_CALL: u32 = 256;
const LOG_LINE_BYTES: usize = 4 << 10;

/// Everything that can go wrong setting up the sandbox, loading or calling a component. The
/// message says what happened. `Clone`: the process-wide sandbox keeps why it could not start.
#[derive(Debug, Clone, thiserror::Error)]
pub enum SandboxError {
    #[error("{name}: {detail}")]
    NotAComponent { name: String, detail: String },
    #[error(
        "{name} is precompiled native code; apiary only runs WebAssembly components (.wasm) and compiles them itself, it never loads precompiled artifacts from outside its own cache"
    )]
    Precompiled { name: String },
    #[error(
        "{name} was built against {found}, which this apiary does not support; supported: {SUPPORTED_RANGE}. Rebuild it against apiary's frozen WIT (wit/apiary-plugin@0.2.0/, or the apiary-guest-sdk crate), or use an apiary that supports {found}"
    )]
    UnsupportedVersion { name: String, found: String },
    #[error(
        "{name} is not an apiary plugin: it exports none of apiary:plugin/{{lifecycle,matcher,format-converter}} (it exports: {exports})"
    )]
    NotAPlugin { name: String, exports: String },
    #[error("{name} is a {found} component, but a {expected} component is needed here")]
    WrongWorld {
        name: String,
        found: World,
        expected: World,
    },
    #[error("{name} could not be compiled: {detail}")]
    Compile { name: String, detail: String },
    #[error("{name} cannot be linked (it needs imports apiary does not provide): {detail}")]
    Link { name: String, detail: String },
    #[error("{name} exceeded its deadline of {} ms and was stopped", limit.as_millis())]
    Deadline { name: String, limit: Duration },
    #[error(
        "{name} exceeded its memory cap of {} MiB (it tried to grow its memory to {attempted} bytes) and was stopped",
        limit >> 20
    )]
    MemoryCap {
        name: String,
        limit: usize,
        attempted: usize,
    },
    #[error(
        "{name} exceeded the table cap of {limit} elements (it tried to make a table of {attempted}) and was stopped"
    )]
    TableCap {
        name: String,
        limit: usize,
        attempted: usize,
    },
    #[error("{name} overflowed its stack (recursion too deep) and was stopped")]
    StackOverflow { name: String },
    #[error("{name} trapped: {detail}")]
    Trap { name: String, detail: String },
    #[error("{name} failed: {message}")]
    Guest { name: String, message: String },
    /// The component's own error saying it could not do its work (a `0.2` `failed`): the same
    /// policy as [`SandboxError::Guest`], and a fault for the circuit breaker.
    #[error("{name} failed: {message}")]
    GuestFailed { name: String, message: String },
    #[error(
        "{name} returned {what} of {size} bytes, over the {limit}-byte cap; the answer was refused"
    )]
    Oversized {
        name: String,
        what: &'static str,
        size: usize,
        limit: usize,
    },
    #[error("{name} returned an invalid answer: {detail}")]
    Invalid { name: String, detail: String },
    #[error(
        "{name} is switched off after {failures} consecutive failures (circuit breaker); next attempt allowed in {} s",
        retry_in.as_secs().max(1)
    )]
    CircuitOpen {
        name: String,
        failures: u32,
        retry_in: Duration,
    },
    /// The component tried what it was not granted (a host, a response over the cap); the
    /// call failed whatever the component made of the refusal.
    #[error("{name} was refused: {detail}; the call failed")]
    Refused { name: String, detail: String },
    #[error("{name}: {detail}")]
    Setup { name: String, detail: String },
    /// The sandbox itself could not be set up (the engine, the linker).
    #[error("cannot {step}: {detail}")]
    Engine { step: &'static str, detail: String },
    #[error("{name} was stopped: the host panicked while running it ({detail})")]
    HostPanic { name: String, detail: String },
}

impl SandboxError {
    /// A short machine-readable kind, for `--json` output and tests.
    pub fn kind(&self) -> &'static str {
        match self {
            SandboxError::NotAComponent { .. } => "not-a-component",
            SandboxError::Precompiled { .. } => "precompiled-refused",
            SandboxError::UnsupportedVersion { .. } => "unsupported-version",
            SandboxError::NotAPlugin { .. } => "not-a-plugin",
            SandboxError::WrongWorld { .. } => "wrong-world",
            SandboxError::Compile { .. } => "compile",
            SandboxError::Link { .. } => "link",
            SandboxError::Deadline { .. } => "deadline",
            SandboxError::MemoryCap { .. } => "memory-cap",
            SandboxError::TableCap { .. } => "table-cap",
            SandboxError::StackOverflow { .. } => "stack-overflow",
            SandboxError::Trap { .. } => "trap",
            SandboxError::Guest { .. } => "guest-error",
            SandboxError::GuestFailed { .. } => "guest-failed",
            SandboxError::Oversized { .. } => "oversized",
            SandboxError::Invalid { .. } => "invalid-answer",
            SandboxError::CircuitOpen { .. } => "circuit-open",
            SandboxError::Refused { .. } => "capability-refused",
            SandboxError::Setup { .. } | SandboxError::Engine { .. } => "setup",
            SandboxError::HostPanic { .. } => "host-panic",
        }
    }
}

/// Per-store state: WASI, the resource table, limits, the log budget and the output sinks.
pub struct State {
    wasi: WasiCtx,
    table: ResourceTable,
    limiter: Limiter,
    component: Arc<str>,
    /// Lines logged in the current call.
    log_lines: u32,
    stdout: Sink,
    stderr: Sink,
    http_ctx: WasiHttpCtx,
    http: http::HttpPolicy,
    /// The persona sets a `0.2` trigger made in this store's instance (see [`trigger`]).
    sets: trigger::Sets,
}

impl State {
    /// The state of a new store for `loaded`: WASI from `grants`, the memory cap, bounded output.
    fn new(loaded: &Loaded, limits: &Limits, grants: &Grants) -> Result<State, SandboxError> {
        let stdout = Sink::new(limits.max_output);
        let stderr = Sink::new(limits.max_output);
        let wasi = grants
            .build(&stdout, &stderr)
            .map_err(|e| SandboxError::Setup {
                name: loaded.name.to_string(),
                detail: e.to_string(),
            })?;
        Ok(State {
            wasi,
            table: ResourceTable::new(),
            limiter: Limiter::new(limits.memory),
            component: loaded.name.clone(),
            log_lines: 0,
            stdout,
            stderr,
            http_ctx: WasiHttpCtx::new(),
            http: http::HttpPolicy::new(grants.http.clone()),
            sets: trigger::Sets::default(),
        })
    }

    /// The state of a dropped store, ready for the next fresh store with the same `grants`: the
    /// WASI context (configuration only: grants, sinks, clocks, random generators) stays; what
    /// the last instance held (its resources, HTTP requests, memory bookkeeping) goes.
    fn recycled(mut self, limits: &Limits, grants: &Grants) -> State {
        self.table = ResourceTable::new();
        self.limiter = Limiter::new(limits.memory);
        self.log_lines = 0;
        self.http_ctx = WasiHttpCtx::new();
        self.http = http::HttpPolicy::new(grants.http.clone());
        self.sets = trigger::Sets::default();
        // Emptied after every call already; a guest writing from a host thread after it ended
        // would show up here.
        let _ = (self.stdout.take(), self.stderr.take());
        self
    }
}

impl WasiView for State {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl WasiHttpView for State {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.http_ctx,
            table: &mut self.table,
            hooks: &mut self.http,
        }
    }
}

impl bindings::v0_1::hook::apiary::plugin::host::Host for State {
    fn log(&mut self, level: bindings::v0_1::Level, message: String) {
        use bindings::v0_1::Level as L;
        let level = match level {
            L::Trace => tracing::Level::TRACE,
            L::Debug => tracing::Level::DEBUG,
            L::Info => tracing::Level::INFO,
            L::Warn => tracing::Level::WARN,
            L::Error => tracing::Level::ERROR,
        };
        self.log_line(level, &message);
    }
}

impl bindings::v0_2::hook::apiary::plugin::host::Host for State {
    fn log(&mut self, level: bindings::v0_2::Level, message: String) {
        use bindings::v0_2::Level as L;
        let level = match level {
            L::Trace => tracing::Level::TRACE,
            L::Debug => tracing::Level::DEBUG,
            L::Info => tracing::Level::INFO,
            L::Warn => tracing::Level::WARN,
            L::Error => tracing::Level::ERROR,
        };
        self.log_line(level, &message);
    }
}

impl State {
    /// `host.log` of every release: the per-call line budget, lines truncated.
    fn log_line(&mut self, level: tracing::Level, message: &str) {
        self.log_lines += 1;
        if self.log_lines > LOG_LINES_PER_CALL {
            if self.log_lines == LOG_LINES_PER_CALL + 1 {
                tracing::warn!(component = %self.component, "log budget of {LOG_LINES_PER_CALL} lines per call used up; dropping the rest");
            }
            return;
        }
        let line = truncate(message, LOG_LINE_BYTES);
        let c = &*self.component;
        match level {
            tracing::Level::TRACE => tracing::trace!(component = c, "{line}"),
            tracing::Level::DEBUG => tracing::debug!(component = c, "{line}"),
            tracing::Level::INFO => tracing::info!(component = c, "{line}"),
            tracing::Level::WARN => tracing::warn!(component = c, "{line}"),
            _ => tracing::error!(component = c, "{line}"),
        }
    }
}

/// The longest prefix of `s` of at most `max` bytes that ends on a char boundary.
pub fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// A compiled, identified, pre-instantiated component.
pub struct Loaded {
    /// A name for messages (usually the file name).
    pub name: Arc<str>,
    /// sha256 of the component bytes, hex.
    pub digest: String,
    pub size: usize,
    pub identity: Identity,
    pub provenance: Provenance,
    pre: InstancePre<State>,
    /// The sandbox's budget of parked stores, for this component's [`WarmPool`]s.
    warm_budget: Arc<Budget>,
}

impl Loaded {
    /// An empty pool of parked stores for this component (see [`warm`]).
    pub(crate) fn warm_pool<K: PartialEq>(&self, capacity: usize) -> WarmPool<K> {
        WarmPool::new(self.warm_budget.clone(), capacity)
    }
}

impl std::fmt::Debug for Loaded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Loaded")
            .field("name", &self.name)
            .field("digest", &self.digest)
            .field("world", &self.identity.world)
            .finish()
    }
}

/// The engine, linker, compile cache and per-component bookkeeping.
pub struct Sandbox {
    engine: Engine,
    linker: Linker<State>,
    cache: CompileCache,
    breaker_policy: BreakerPolicy,
    breakers: Mutex<HashMap<String, apiary_limits::Breaker>>,
    loaded: Mutex<HashMap<String, Arc<Loaded>>>,
    warm_budget: Arc<Budget>,
}

/// Options for [`Sandbox::new`].
#[derive(Debug, Clone)]
pub struct SandboxConfig {
    /// Where compiled components are cached; `None` (the default) disables the cache.
    pub cache_dir: Option<std::path::PathBuf>,
    pub breaker: BreakerPolicy,
    /// Instances the pooling allocator keeps ready (also the most calls in flight at once).
    pub pool_instances: u32,
    /// Use the pooling allocator when it can be set up (the default). `false` allocates every
    /// instance on demand, as the sandbox does when the pool's address space cannot be reserved;
    /// the per-store limits ([`Limits`]) hold on both paths.
    pub pooling: bool,
    /// Bytes of each pooled linear memory kept resident when its instance ends (the pool's
    /// `linear_memory_keep_resident`). Within it only the pages the instance dirtied are reset
    /// (Linux's `PAGEMAP_SCAN`, else a `memset`); beyond it pages are given back to the kernel
    /// and fault in again, copy-on-write, on first touch.
    pub keep_resident: usize,
}

/// The default [`SandboxConfig::keep_resident`]: a Rust guest uses a bit over 1 MiB. Keeping
/// 64 MiB (the whole image of a 12-18 MB Python or JavaScript component) measured no faster
/// per call (`APIARY_BENCH_RESIDENT=1 cargo bench --bench sandbox -- lang` compares both), so
/// memory is not held for it.
pub const KEEP_RESIDENT: usize = 4 << 20;

impl Default for SandboxConfig {
    fn default() -> SandboxConfig {
        SandboxConfig {
            cache_dir: None,
            breaker: BreakerPolicy::default(),
            pool_instances: 128,
            pooling: true,
            keep_resident: KEEP_RESIDENT,
        }
    }
}

/// Set to `perfmap` to have wasmtime write `/tmp/perf-<pid>.map`, so `perf` names guest functions.
pub const PROFILE_ENV: &str = "APIARY_WASM_PROFILE";

fn engine_config(pool: Option<(u32, usize)>) -> Config {
    let mut cfg = Config::new();
    cfg.epoch_interruption(true);
    cfg.wasm_component_model(true);
    if std::env::var(PROFILE_ENV).is_ok_and(|v| v == "perfmap") {
        cfg.profiler(wasmtime::ProfilingStrategy::PerfMap);
    }
    if let Some((n, keep_resident)) = pool {
        let mut p = PoolingAllocationConfig::default();
        // Rust components have one memory and a few core instances each.
        p.total_component_instances(n)
            .total_core_instances(n * 8)
            .total_memories(n)
            .total_tables(n * 4)
            .max_memory_size(256 << 20)
            // The same table cap as every store's limiter (limits.rs), which is all that caps
            // tables when the pool is unavailable.
            .table_elements(limits::MAX_TABLE_ELEMENTS)
            // Reset memories in place instead of madvise: instantiation then scales across
            // threads inside a VM (feasibility.md, section 5).
            .linear_memory_keep_resident(keep_resident)
            // Within `keep_resident`, reset only the pages the instance wrote (Linux 6.7's
            // PAGEMAP_SCAN) instead of `memset`ting all of them: wasmtime's default is off.
            .pagemap_scan(wasmtime::Enabled::Auto)
            .table_keep_resident(64 << 10);
        cfg.allocation_strategy(InstanceAllocationStrategy::Pooling(p));
    }
    cfg
}

impl Sandbox {
    /// The process-wide sandbox, created on first use with the configuration `config` gives (the
    /// caller names the cache dir: this crate computes no default path).
    pub fn shared(
        config: impl FnOnce() -> SandboxConfig,
    ) -> Result<&'static Sandbox, SandboxError> {
        static SHARED: OnceLock<Result<Sandbox, SandboxError>> = OnceLock::new();
        SHARED
            .get_or_init(|| Sandbox::new(config()))
            .as_ref()
            .map_err(Clone::clone)
    }

    pub fn new(config: SandboxConfig) -> Result<Sandbox, SandboxError> {
        let engine_error = |step| {
            move |e: wasmtime::Error| SandboxError::Engine {
                step,
                detail: format!("{e:#}"),
            }
        };
        let on_demand =
            || Engine::new(&engine_config(None)).map_err(engine_error("create the wasm engine"));
        let engine = match config.pooling {
            false => on_demand()?,
            true => match Engine::new(&engine_config(Some((
                config.pool_instances,
                config.keep_resident,
            )))) {
                Ok(e) => e,
                Err(e) => {
                    // Pooling reserves a lot of virtual address space; some environments cap it.
                    tracing::warn!(
                        "pooling allocator unavailable ({e:#}); using on-demand allocation"
                    );
                    on_demand()?
                }
            },
        };
        start_ticker(&engine);
        let mut linker: Linker<State> = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker).map_err(engine_error("link WASI"))?;
        bindings::v0_1::hook::apiary::plugin::host::add_to_linker::<State, HasSelf<State>>(
            &mut linker,
            |s| s,
        )
        .map_err(engine_error("link the host interface (0.1)"))?;
        bindings::v0_2::hook::apiary::plugin::host::add_to_linker::<State, HasSelf<State>>(
            &mut linker,
            |s| s,
        )
        .map_err(engine_error("link the host interface (0.2)"))?;
        // What componentize-js links by default; every request is checked against the grants.
        wasmtime_wasi_http::p2::add_only_http_to_linker_sync(&mut linker)
            .map_err(engine_error("link wasi:http"))?;
        let cache = CompileCache::new(&engine, config.cache_dir);
        Ok(Sandbox {
            engine,
            linker,
            cache,
            breaker_policy: config.breaker,
            breakers: Mutex::new(HashMap::new()),
            loaded: Mutex::new(HashMap::new()),
            // Parked stores keep pool slots; leave most of the pool to fresh calls.
            warm_budget: Budget::new(config.pool_instances as usize / 4),
        })
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    pub fn cache(&self) -> &CompileCache {
        &self.cache
    }

    /// Whether `bytes` load without a compilation: already loaded in this process, or in the
    /// compile cache.
    pub fn is_compiled(&self, bytes: &[u8]) -> bool {
        let digest = cache::sha256_hex(bytes);
        self.lock_loaded().contains_key(&digest) || self.cache.contains(&digest)
    }

    /// Checks that `bytes` are a WebAssembly component (not a core module, not precompiled code).
    pub fn check_bytes(name: &str, bytes: &[u8]) -> Result<(), SandboxError> {
        if Engine::detect_precompiled(bytes).is_some() {
            return Err(SandboxError::Precompiled {
                name: name.to_string(),
            });
        }
        const COMPONENT: [u8; 8] = [0x00, 0x61, 0x73, 0x6d, 0x0d, 0x00, 0x01, 0x00];
        const MODULE: [u8; 8] = [0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00];
        if bytes.starts_with(&COMPONENT) {
            return Ok(());
        }
        let detail = if bytes.starts_with(&MODULE) {
            "a core WebAssembly module, not a component; build it with `cargo build --target wasm32-wasip2` (which emits a component)".to_string()
        } else {
            "not a WebAssembly component (no `\\0asm` component header)".to_string()
        };
        Err(SandboxError::NotAComponent {
            name: name.to_string(),
            detail,
        })
    }

    /// Compiles (or loads from the cache), identifies and pre-instantiates a component. The same
    /// bytes are loaded once per process.
    pub fn load(&self, name: &str, bytes: &[u8]) -> Result<Arc<Loaded>, SandboxError> {
        self.load_hashed(name, bytes, cache::sha256_hex(bytes))
    }

    /// [`Sandbox::load`] of bytes whose SHA-256 (hex) the caller already has: the components
    /// built into the binary, hashed when it was built (a megabyte hashed at every start was a
    /// tenth of a one-file `convert`). Debug builds check it.
    pub fn load_digested(
        &self,
        name: &str,
        bytes: &[u8],
        digest: &str,
    ) -> Result<Arc<Loaded>, SandboxError> {
        debug_assert_eq!(digest, cache::sha256_hex(bytes), "the digest of {name}");
        self.load_hashed(name, bytes, digest.to_string())
    }

    fn load_hashed(
        &self,
        name: &str,
        bytes: &[u8],
        digest: String,
    ) -> Result<Arc<Loaded>, SandboxError> {
        Self::check_bytes(name, bytes)?;
        if let Some(l) = self.lock_loaded().get(&digest) {
            return Ok(l.clone());
        }
        let (component, provenance) =
            self.cache
                .load(&self.engine, &digest, bytes)
                .map_err(|e| SandboxError::Compile {
                    name: name.to_string(),
                    detail: format!("{e:#}"),
                })?;
        let loaded =
            Arc::new(self.prepare(name, digest.clone(), bytes.len(), component, provenance)?);
        self.lock_loaded().insert(digest, loaded.clone());
        Ok(loaded)
    }

    fn prepare(
        &self,
        name: &str,
        digest: String,
        size: usize,
        component: Component,
        provenance: Provenance,
    ) -> Result<Loaded, SandboxError> {
        let identity = bindings::identify(&self.engine, name, &component)?;
        let pre = self
            .linker
            .instantiate_pre(&component)
            .map_err(|e| SandboxError::Link {
                name: name.to_string(),
                detail: format!("{e:#}"),
            })?;
        Ok(Loaded {
            name: name.into(),
            digest,
            size,
            identity,
            provenance,
            pre,
            warm_budget: self.warm_budget.clone(),
        })
    }

    fn lock_loaded(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Loaded>>> {
        self.loaded.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// One call in a fresh store with `limits` and `grants`: `f` calls into the instance, then
    /// the store is dropped. Output is forwarded to the log; failures are classified and counted
    /// by the circuit breaker.
    pub(crate) fn call<R: Send>(
        &self,
        loaded: &Loaded,
        limits: &Limits,
        grants: &Grants,
        f: impl FnOnce(&mut Store<State>, &Instance) -> wasmtime::Result<Result<R, SandboxError>> + Send,
    ) -> Result<CallOutput<R>, SandboxError> {
        self.call_in(loaded, limits, grants, &mut None, f)
    }

    /// Like [`Sandbox::call`], in a store parked in `pool` under `key` if there is one (else a
    /// fresh one), parking the store again afterwards if the call ended normally.
    pub(crate) fn call_warm<K: PartialEq, R: Send>(
        &self,
        loaded: &Loaded,
        limits: &Limits,
        grants: &Grants,
        pool: &WarmPool<K>,
        key: K,
        f: impl FnOnce(&mut Store<State>, &Instance) -> wasmtime::Result<Result<R, SandboxError>> + Send,
    ) -> Result<CallOutput<R>, SandboxError> {
        let mut slot = pool.take(&key);
        let out = self.call_in(loaded, limits, grants, &mut slot, f);
        if let Some(live) = slot {
            pool.put(key, live);
        }
        out
    }

    /// Like [`Sandbox::call`], in a fresh store around the WASI context `prepared` holds for
    /// `key` (built from `grants` when it holds none); the context goes back to `prepared` when
    /// the call ended normally. The instance, its memory and its resources are new every call.
    pub(crate) fn call_prepared<K: PartialEq, R: Send>(
        &self,
        loaded: &Loaded,
        limits: &Limits,
        grants: &Grants,
        prepared: &Prepared<K>,
        key: K,
        f: impl FnOnce(&mut Store<State>, &Instance) -> wasmtime::Result<Result<R, SandboxError>> + Send,
    ) -> Result<CallOutput<R>, SandboxError> {
        let state = match prepared.take(&key) {
            Some(state) => state,
            None => State::new(loaded, limits, grants)?,
        };
        let mut slot = Some(self.store_with(state));
        let out = self.call_in(loaded, limits, grants, &mut slot, f);
        // Still there: the call ended normally.
        if let Some(live) = slot {
            prepared.put(key, live.store.into_data().recycled(limits, grants));
        }
        out
    }

    /// One call in `slot`'s store, or in a fresh one left in `slot`. The store stays in `slot`
    /// only when the call ended normally (an answer or the component's own error result) and
    /// [`Live::served`] agrees; otherwise `slot` is emptied, so the next call starts fresh.
    fn call_in<R: Send>(
        &self,
        loaded: &Loaded,
        limits: &Limits,
        grants: &Grants,
        slot: &mut Option<Live>,
        f: impl FnOnce(&mut Store<State>, &Instance) -> wasmtime::Result<Result<R, SandboxError>> + Send,
    ) -> Result<CallOutput<R>, SandboxError> {
        let name = &*loaded.name;
        self.admit(loaded)?;
        let live = match slot {
            Some(live) => live,
            None => slot.insert(self.fresh_store(loaded, limits, grants)?),
        };
        live.store.data_mut().log_lines = 0;
        let ticks = limits.deadline.as_nanos().div_ceil(EPOCH_TICK.as_nanos()) as u64 + 1;
        live.store.set_epoch_deadline(ticks);
        let start = Instant::now();
        // HTTP waits block in the host, out of the epoch's reach: they end at the deadline too.
        live.store
            .data_mut()
            .http
            .start_call(start + limits.deadline);
        // Off the async threads (see [`blocking`]); a host panic ends this call only.
        let run = || match live.instance {
            Some(instance) => f(&mut live.store, &instance),
            // Instantiation runs under the deadline too.
            None => loaded
                .pre
                .instantiate(&mut live.store)
                .and_then(|instance| {
                    live.instance = Some(instance);
                    f(&mut live.store, &instance)
                }),
        };
        let result = blocking::outside_async(run);
        let elapsed = start.elapsed();
        let state = live.store.data();
        let refused_growth = state.limiter.refused_growth;
        let refused_table = state.limiter.refused_table;
        let stdout = state.stdout.take();
        let stderr = state.stderr.take();
        let refused = state.http.violations.take_first();
        let http_past_deadline = state.http.past_deadline();
        forward_output(name, "stdout", &stdout);
        forward_output(name, "stderr", &stderr);
        let result = match result {
            Ok(r) => r
                .map_err(|e| classify(name, limits, (refused_growth, refused_table), &stderr, e))
                .and_then(|r| r),
            Err(blocking::Panicked(panic)) => Err(SandboxError::HostPanic {
                name: name.to_string(),
                detail: truncate(&panic, 300).to_string(),
            }),
        };
        // Whatever the component made of a refusal, or of an HTTP wait cut at the deadline, the
        // call fails naming it.
        let result = match refused {
            Some(detail) => Err(SandboxError::Refused {
                name: name.to_string(),
                detail,
            }),
            None if http_past_deadline => Err(SandboxError::Deadline {
                name: name.to_string(),
                limit: limits.deadline,
            }),
            None => result,
        };
        let normal = matches!(
            &result,
            Ok(_) | Err(SandboxError::Guest { .. } | SandboxError::Refused { .. })
        );
        if !(normal && live.served()) {
            *slot = None;
        }
        // The breaker counts what the sandbox had to contain (traps, deadlines, caps, bad
        // answers); a component's own error result (a converter refusing input, a hook dropping a
        // message) is an answer, not a fault.
        self.record(loaded, normal);
        result.map(|value| CallOutput {
            value,
            stdout,
            stderr,
            elapsed,
        })
    }

    /// A store for one component: WASI from `grants`, the memory cap, bounded output.
    fn fresh_store(
        &self,
        loaded: &Loaded,
        limits: &Limits,
        grants: &Grants,
    ) -> Result<Live, SandboxError> {
        Ok(self.store_with(State::new(loaded, limits, grants)?))
    }

    /// A fresh store around `state` (new, or [`Prepared`] by an earlier store).
    fn store_with(&self, state: State) -> Live {
        let mut store = Store::new(&self.engine, state);
        store.limiter(|s| &mut s.limiter);
        Live::new(store)
    }

    fn admit(&self, loaded: &Loaded) -> Result<(), SandboxError> {
        let mut breakers = self.breakers.lock().unwrap_or_else(|p| p.into_inner());
        let policy = self.breaker_policy;
        let b = breakers
            .entry(loaded.digest.clone())
            .or_insert_with(|| apiary_limits::Breaker::new(policy));
        b.admit(Instant::now())
            .map_err(|open| SandboxError::CircuitOpen {
                name: loaded.name.to_string(),
                failures: open.failures,
                retry_in: open.retry_in.unwrap_or(Duration::MAX),
            })
    }

    /// Counts a call's outcome for the circuit breaker.
    fn record(&self, loaded: &Loaded, ok: bool) {
        let mut breakers = self.breakers.lock().unwrap_or_else(|p| p.into_inner());
        let policy = self.breaker_policy;
        breakers
            .entry(loaded.digest.clone())
            .or_insert_with(|| apiary_limits::Breaker::new(policy))
            .record(ok, Instant::now());
    }
}

/// The result of a call plus what the guest printed.
#[derive(Debug)]
pub struct CallOutput<R> {
    pub value: R,
    pub stdout: Captured,
    pub stderr: Captured,
    pub elapsed: Duration,
}

impl<R> CallOutput<R> {
    /// The same output with its value turned into another.
    pub fn map<S>(self, f: impl FnOnce(R) -> S) -> CallOutput<S> {
        CallOutput {
            value: f(self.value),
            stdout: self.stdout,
            stderr: self.stderr,
            elapsed: self.elapsed,
        }
    }
}

fn forward_output(name: &str, stream: &str, captured: &Captured) {
    for line in captured.text.lines() {
        tracing::debug!(component = name, stream, "{line}");
    }
    if captured.dropped > 0 {
        tracing::warn!(
            component = name,
            "{name} wrote more than {} bytes to {stream}; {} bytes were dropped",
            captured.text.len(),
            captured.dropped
        );
    }
}

/// What a failed call was, given the sizes the limiter refused (memory, table).
fn classify(
    name: &str,
    limits: &Limits,
    (refused_memory, refused_table): (Option<usize>, Option<usize>),
    stderr: &Captured,
    e: wasmtime::Error,
) -> SandboxError {
    let name = name.to_string();
    if let Some(attempted) = refused_memory {
        return SandboxError::MemoryCap {
            name,
            limit: limits.memory,
            attempted,
        };
    }
    if let Some(attempted) = refused_table {
        return SandboxError::TableCap {
            name,
            limit: limits::MAX_TABLE_ELEMENTS,
            attempted,
        };
    }
    match e.downcast_ref::<Trap>() {
        Some(Trap::Interrupt) => SandboxError::Deadline {
            name,
            limit: limits.deadline,
        },
        Some(Trap::StackOverflow) => SandboxError::StackOverflow { name },
        Some(trap) => {
            // A Rust guest that panics prints the message to stderr, then executes `unreachable`.
            let said = panic_message(&stderr.text)
                .map(|m| format!(" (the component panicked: {})", truncate(&m, 300)))
                .unwrap_or_default();
            SandboxError::Trap {
                name,
                detail: format!("{trap}{said}"),
            }
        }
        None => SandboxError::Trap {
            name,
            detail: format!("{e:#}"),
        },
    }
}

/// The message of a Rust panic in a guest's stderr: the lines after `thread '…' panicked at …:`
/// up to the `note:` line.
fn panic_message(stderr: &str) -> Option<String> {
    let lines: Vec<&str> = stderr.lines().collect();
    let at = lines.iter().rposition(|l| l.contains(" panicked at "))?;
    let location = lines[at]
        .split(" panicked at ")
        .nth(1)
        .unwrap_or("")
        .trim_end_matches(':');
    let message: Vec<&str> = lines[at + 1..]
        .iter()
        .take_while(|l| !l.starts_with("note:"))
        .copied()
        .collect();
    Some(format!("{} at {location}", message.join(" ").trim()))
}

/// Increments the engine's epoch every [`EPOCH_TICK`] while the engine lives.
fn start_ticker(engine: &Engine) {
    let weak = engine.weak();
    let spawned = std::thread::Builder::new()
        .name("apiary-epoch".into())
        .spawn(move || {
            loop {
                std::thread::sleep(EPOCH_TICK);
                match weak.upgrade() {
                    Some(engine) => engine.increment_epoch(),
                    None => break,
                }
            }
        });
    if let Err(e) = spawned {
        tracing::error!("cannot start the epoch ticker thread: {e}; deadlines will not fire");
    }
}
