//! The host's log (`apiary:plugin/host.log`), for hooks and converters.
//!
//! The `trigger` world does not import the host: a trigger that logs does not link (the component
//! build fails naming `apiary:plugin/host`). Lines over 4 KiB are truncated and a call logging more
//! than 256 lines has the rest dropped, by the host. Outside wasm32 (unit tests) lines go to stderr.

/// Severity of a log line (the WIT `level`, in its order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Trace,
    Debug,
    Info,
    Warn,
    Error,
}

/// Writes one line to the host's log, tagged with the component's name.
pub fn log(level: Level, message: &str) {
    #[cfg(target_arch = "wasm32")]
    {
        // The canonical ABI of `log: func(level: level, message: string)`: the enum as its index,
        // the string as pointer and length. Declared here rather than generated, so this crate
        // needs no bindings of its own (the component's world already declares the import).
        #[link(wasm_import_module = "apiary:plugin/host@0.2.0")]
        unsafe extern "C" {
            #[link_name = "log"]
            fn host_log(level: i32, message: *const u8, len: usize);
        }
        // SAFETY: the host only reads `len` bytes of UTF-8 from `message`, during the call.
        unsafe { host_log(level as i32, message.as_ptr(), message.len()) }
    }
    #[cfg(not(target_arch = "wasm32"))]
    eprintln!("[{level:?}] {message}");
}

pub fn trace(message: &str) {
    log(Level::Trace, message)
}

pub fn debug(message: &str) {
    log(Level::Debug, message)
}

pub fn info(message: &str) {
    log(Level::Info, message)
}

pub fn warn(message: &str) {
    log(Level::Warn, message)
}

pub fn error(message: &str) {
    log(Level::Error, message)
}
