//! WASI for a call, built from explicit grants only: no environment, no arguments, no sockets,
//! stdin closed, stdout and stderr into bounded sinks, and only the preopens the call needs; plus
//! what the operator granted the component ([`Grants::with_capabilities`]).

use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use tokio::io::AsyncWrite;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamError};
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxBuilder};

use crate::caps::Capabilities;

/// A directory the call may see.
#[derive(Debug, Clone)]
pub struct Preopen {
    pub host: PathBuf,
    /// Where the guest sees it (absolute, e.g. `/workspace`).
    pub guest: String,
    pub writable: bool,
}

/// Everything a call is granted. The default grants nothing.
#[derive(Debug, Clone, Default)]
pub struct Grants {
    pub preopens: Vec<Preopen>,
    /// Environment variables (name, value); nothing else of the host's environment.
    pub env: Vec<(String, String)>,
    /// Hosts outbound HTTP may reach (`host` or `host:port`, see [`crate::http`]).
    pub http: Vec<String>,
}

impl Grants {
    pub fn none() -> Grants {
        Grants::default()
    }

    /// One directory, read-write.
    pub fn workspace(host: PathBuf, guest: &str) -> Grants {
        Grants {
            preopens: vec![Preopen {
                host,
                guest: guest.to_string(),
                writable: true,
            }],
            ..Grants::default()
        }
    }

    /// These grants plus `caps` (the intersection of what a component declares and what the
    /// operator granted): its variables, its hosts, its directories read-only at the same path.
    pub fn with_capabilities(mut self, caps: &Capabilities) -> Grants {
        self.env.extend(caps.env_values());
        self.http.extend(caps.http_hosts());
        for dir in caps.read_dirs() {
            self.preopens.push(Preopen {
                guest: dir.to_string_lossy().into_owned(),
                host: dir,
                writable: false,
            });
        }
        self
    }

    pub(crate) fn build(&self, stdout: &Sink, stderr: &Sink) -> std::io::Result<WasiCtx> {
        let mut b = WasiCtxBuilder::new();
        // Before the preopens: each preopen captures this flag. File I/O then runs inline on the
        // calling thread instead of a hop through a blocking pool.
        b.allow_blocking_current_thread(true)
            .stdout(stdout.clone())
            .stderr(stderr.clone())
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .envs(&self.env);
        for p in &self.preopens {
            let perms = if p.writable {
                FsPerms::ReadWrite
            } else {
                FsPerms::ReadOnly
            };
            b.preopened_dir(&p.host, &p.guest, perms).map_err(|e| {
                std::io::Error::other(format!("cannot preopen {}: {e:#}", p.host.display()))
            })?;
        }
        Ok(b.build())
    }
}

/// A bounded output buffer for a guest's stdout or stderr: keeps the first `cap` bytes, counts
/// the rest, never fails a write (so a flood cannot kill or stall the guest).
#[derive(Clone)]
pub struct Sink(Arc<Mutex<SinkBuf>>);

struct SinkBuf {
    data: Vec<u8>,
    cap: usize,
    dropped: u64,
}

/// What a sink captured.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Captured {
    pub text: String,
    /// Bytes written past the cap and dropped.
    pub dropped: u64,
}

impl Sink {
    pub fn new(cap: usize) -> Sink {
        Sink(Arc::new(Mutex::new(SinkBuf {
            data: Vec::new(),
            cap,
            dropped: 0,
        })))
    }

    fn push(&self, bytes: &[u8]) {
        let mut b = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let room = b.cap - b.data.len();
        let keep = bytes.len().min(room);
        b.data.extend_from_slice(&bytes[..keep]);
        b.dropped += (bytes.len() - keep) as u64;
    }

    pub fn take(&self) -> Captured {
        let mut b = self.0.lock().unwrap_or_else(|p| p.into_inner());
        Captured {
            text: String::from_utf8_lossy(&std::mem::take(&mut b.data)).into_owned(),
            dropped: std::mem::take(&mut b.dropped),
        }
    }
}

impl IsTerminal for Sink {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for Sink {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

/// How much one `check-write` permits; the sink accepts any amount, this only bounds a write.
const WRITE_PERMIT: usize = 64 << 10;

impl OutputStream for Sink {
    fn write(&mut self, bytes: Bytes) -> Result<(), StreamError> {
        self.push(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> Result<(), StreamError> {
        Ok(())
    }

    fn check_write(&mut self) -> Result<usize, StreamError> {
        Ok(WRITE_PERMIT)
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for Sink {
    async fn ready(&mut self) {}
}

impl AsyncWrite for Sink {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.push(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sink_keeps_the_cap_and_counts_the_rest() {
        let sink = Sink::new(10);
        sink.push(b"0123456");
        sink.push(b"789abcdef");
        let c = sink.take();
        assert_eq!(c.text, "0123456789");
        assert_eq!(c.dropped, 6);
    }
}
