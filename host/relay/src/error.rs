//! What the relay side reports as an error: [`RelayError`], with a stable [`RelayError::kind`].
//!
//! Each message names its cause itself ("reading X: permission denied"), as the operator has
//! always read it; so no variant exposes a `source()`, which would print the cause twice where an
//! error chain is printed (`{e:#}` through anyhow).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use nostr_sdk::prelude::EventId;

/// An error of the key store, the embedded relay or a relay connection.
#[derive(Debug, thiserror::Error)]
pub enum RelayError {
    /// A file or directory of the key store or the relay journal: `{action} {path}: {error}`.
    #[error("{action} {}: {error}", path.display())]
    File {
        action: &'static str,
        path: PathBuf,
        error: std::io::Error,
    },
    /// An I/O error without a file to name.
    #[error("{0}")]
    Io(std::io::Error),
    #[error("{} is not a valid secret key: {error}", path.display())]
    BadKey {
        path: PathBuf,
        error: nostr_sdk::nostr::key::Error,
    },
    /// A key file another process wrote at the same moment does not hold a key.
    #[error("{0}")]
    Key(nostr_sdk::nostr::key::Error),
    /// A provisioned key store (see [`crate::keys::KeyStore::provisioned`]) lacks this key: it is
    /// never generated there, since another replica would generate a different one.
    #[error(
        "{} is missing: keys in a provisioned key store are never generated (add the key to it, e.g. to the Kubernetes Secret)",
        path.display()
    )]
    MissingKey { path: PathBuf },
    #[error("{} is too large to be an owner record", path.display())]
    OwnerTooLarge { path: PathBuf },
    #[error("{} is not a valid owner record: {error}", path.display())]
    BadOwner {
        path: PathBuf,
        error: serde_json::Error,
    },
    /// The owner record another process created was gone when read.
    #[error("{} vanished", path.display())]
    OwnerVanished { path: PathBuf },
    #[error(
        "cannot start the embedded relay on {addr}: {error}{}",
        bind_hint(error)
    )]
    Bind {
        addr: SocketAddr,
        error: std::io::Error,
    },
    /// The journal cannot be replayed whole; the relay does not start.
    #[error(
        "relay journal {}: {problem}. Its history was not loaded and the relay did not start. \
         To recover: start with limits that fit it (--max-stored-bytes, \
         --max-stored-events), or move the file away to start with an empty history \
         (keep it: every line is a signed event that can be re-published)",
        path.display()
    )]
    Journal {
        path: PathBuf,
        problem: JournalProblem,
    },
    #[error("cannot start the {name} runtime: {detail}")]
    Runtime { name: &'static str, detail: String },
    #[error("{what} task failed: {detail}")]
    Task { what: &'static str, detail: String },
    #[error("relay URL `{url}`: {detail}")]
    Url { url: String, detail: String },
    #[error("cannot connect to the relay at {url} within {timeout:?}")]
    Connect { url: String, timeout: Duration },
}

impl RelayError {
    /// A short machine-readable kind, for `--json` output and tests.
    pub fn kind(&self) -> &'static str {
        match self {
            RelayError::File { .. } | RelayError::Io(_) => "io",
            RelayError::BadKey { .. } | RelayError::Key(_) => "bad-key",
            RelayError::MissingKey { .. } => "missing-key",
            RelayError::OwnerTooLarge { .. }
            | RelayError::BadOwner { .. }
            | RelayError::OwnerVanished { .. } => "owner-record",
            RelayError::Bind { .. } => "bind",
            RelayError::Journal { .. } => "journal",
            RelayError::Runtime { .. } => "runtime",
            RelayError::Task { .. } => "task",
            RelayError::Url { .. } => "url",
            RelayError::Connect { .. } => "connect",
        }
    }

    /// `action path: error`, for a file of the key store or the journal.
    pub(crate) fn file(action: &'static str, path: &Path, error: std::io::Error) -> RelayError {
        RelayError::File {
            action,
            path: path.to_path_buf(),
            error,
        }
    }
}

impl From<std::io::Error> for RelayError {
    fn from(e: std::io::Error) -> RelayError {
        RelayError::Io(e)
    }
}

/// Why a relay journal cannot be replayed.
#[derive(Debug, thiserror::Error)]
pub enum JournalProblem {
    #[error("{size} bytes, over the storage limit of {limit} bytes")]
    TooLarge { size: u64, limit: u64 },
    #[error("more than {limit} events, the storage limit")]
    TooManyEvents { limit: u64 },
    #[error("line {line} is not UTF-8")]
    NotUtf8 { line: u64 },
    #[error("line {line} is not an event ({detail})")]
    NotAnEvent { line: u64, detail: String },
    #[error("line {line}: event {id} does not verify ({detail})")]
    Unverified {
        line: u64,
        id: EventId,
        detail: String,
    },
}

/// What to do about a listen address that cannot be bound.
fn bind_hint(error: &std::io::Error) -> &'static str {
    match error.kind() {
        std::io::ErrorKind::AddrInUse => {
            "; something already listens there (another `apiary up` or `apiary relay`?): stop it, \
             use it with `--relay ws://<addr>`, or listen elsewhere with `--listen` \
             (`--listen 127.0.0.1:0` takes any free port)"
        }
        std::io::ErrorKind::PermissionDenied => {
            "; ports below 1024 need privileges: choose a higher port with `--listen`"
        }
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_their_cause_once() {
        let denied = std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        let e = RelayError::file("reading", Path::new("/k/owner.json"), denied);
        assert_eq!(e.to_string(), "reading /k/owner.json: permission denied");
        // `{e:#}` (how the harness prints it) reads the same, and no chain repeats the cause.
        assert_eq!(format!("{e:#}"), e.to_string());
        assert!(std::error::Error::source(&e).is_none());
        assert_eq!(e.kind(), "io");

        let limit = 10;
        let e = RelayError::Journal {
            path: PathBuf::from("/d/events.jsonl"),
            problem: JournalProblem::TooLarge { size: 11, limit },
        };
        assert!(
            e.to_string().starts_with(
                "relay journal /d/events.jsonl: 11 bytes, over the storage limit of 10 bytes. \
                 Its history was not loaded"
            ),
            "{e}"
        );
        assert_eq!(e.kind(), "journal");
    }
}
