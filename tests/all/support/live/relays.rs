//! The relay a live test runs against: the embedded one inside `apiary up`, or a separate relay
//! process the test starts on 127.0.0.1 (`apiary relay`, or the independent `nostr-rs-relay` for
//! interop), on a port it keeps so the relay can be restarted at the same URL.
//!
//! `nostr-rs-relay` must be on PATH (`.ci/run` installs it); without it the interop tests fail with
//! a message saying so, unless `APIARY_SKIP_INTEROP=1`, which makes them pass without running.

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use apiary_e2e::{apiary, wait_exit};

/// Which relay a test runs against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The relay `apiary up` starts itself.
    Embedded,
    /// `apiary relay` as its own process.
    ApiaryRelay,
    /// nostr-rs-relay 0.8.12, an independent implementation (SQLite storage, no NIP-29).
    NostrRs,
}

/// Relay settings a test asks for.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// NIP-42: `apiary relay --require-auth`; for nostr-rs-relay `nip42_auth = true` (it then
    /// challenges every connection; it cannot refuse unauthenticated reads).
    pub auth: bool,
    /// More arguments for `apiary relay` (limits).
    pub args: &'static [&'static str],
}

/// The relay of one test: `None` for the embedded relay (`apiary up` picks its URL).
pub struct TestRelay {
    pub external: Option<External>,
}

impl TestRelay {
    /// Starts what `kind` needs under `home`; `None` when the interop tests are skipped.
    pub fn start(kind: Kind, home: &Path, opts: Options) -> Option<TestRelay> {
        let external = match kind {
            Kind::Embedded => None,
            _ => Some(External::start(kind, home, opts)?),
        };
        Some(TestRelay { external })
    }

    /// Arguments for `apiary up`: `--relay URL` for a separate relay.
    pub fn up_args(&self) -> Vec<String> {
        match &self.external {
            Some(e) => vec!["--relay".into(), e.url.clone()],
            None => vec![],
        }
    }
}

/// The `nostr-rs-relay` binary: `$NOSTR_RS_RELAY`, else the first on PATH. `None` when it is
/// missing and `APIARY_SKIP_INTEROP=1`; a panic naming the fix otherwise.
pub fn nostr_rs_relay() -> Option<PathBuf> {
    let found = std::env::var_os("NOSTR_RS_RELAY")
        .map(PathBuf::from)
        .filter(|p| p.is_file())
        .or_else(|| {
            std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
                .map(|d| d.join("nostr-rs-relay"))
                .find(|p| p.is_file())
        });
    if found.is_none() && std::env::var("APIARY_SKIP_INTEROP").as_deref() == Ok("1") {
        eprintln!("APIARY_SKIP_INTEROP=1: nostr-rs-relay interop test skipped");
        return None;
    }
    Some(found.unwrap_or_else(|| {
        panic!(
            "nostr-rs-relay is not on PATH: the interop tests run against it. Install it with \
             `cargo install nostr-rs-relay --version 0.8.12` (needs protobuf-compiler, libssl-dev, \
             pkg-config; `.ci/run` does this), or set APIARY_SKIP_INTEROP=1 to skip these tests"
        )
    }))
}

/// A relay process on a fixed port.
pub struct External {
    kind: Kind,
    pub url: String,
    pub port: u16,
    dir: PathBuf,
    home: PathBuf,
    bin: Option<PathBuf>,
    opts: Options,
    child: Option<Child>,
    /// Every run's stdout and stderr, appended.
    pub log: PathBuf,
}

impl External {
    fn start(kind: Kind, home: &Path, opts: Options) -> Option<External> {
        let bin = match kind {
            Kind::NostrRs => Some(nostr_rs_relay()?),
            _ => None,
        };
        let port = free_port();
        let dir = home.join(format!("relay-{port}"));
        std::fs::create_dir_all(dir.join("db")).unwrap();
        let mut relay = External {
            kind,
            url: format!("ws://127.0.0.1:{port}"),
            port,
            log: dir.join("relay.log"),
            dir,
            home: home.to_path_buf(),
            bin,
            opts,
            child: None,
        };
        relay.run();
        Some(relay)
    }

    fn run(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        let mut cmd = match self.kind {
            Kind::NostrRs => {
                let config = self.dir.join("config.toml");
                std::fs::write(&config, nostr_rs_config(self.port, self.opts)).unwrap();
                let mut cmd = Command::new(self.bin.as_ref().unwrap());
                cmd.arg("--db")
                    .arg(self.dir.join("db"))
                    .arg("--config")
                    .arg(&config)
                    .current_dir(&self.dir)
                    .env("RUST_LOG", "info");
                cmd
            }
            _ => {
                let mut cmd = apiary(&self.home);
                cmd.args(["relay", "--listen", &format!("127.0.0.1:{}", self.port)]);
                if self.opts.auth {
                    cmd.arg("--require-auth");
                }
                cmd.args(self.opts.args);
                cmd
            }
        };
        cmd.stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log);
        let mut child = cmd.spawn().expect("start the relay");
        // Ready when it accepts connections (bounded).
        let deadline = Instant::now() + Duration::from_secs(60);
        while TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            if let Ok(Some(status)) = child.try_wait() {
                panic!(
                    "{:?} relay exited with {status}:\n{}",
                    self.kind,
                    self.log_text()
                );
            }
            assert!(
                Instant::now() < deadline,
                "{:?} relay did not listen on {}:\n{}",
                self.kind,
                self.port,
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        self.child = Some(child);
    }

    /// SIGTERM, then wait (bounded) until the process is gone.
    pub fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let _ = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status();
        if wait_exit(&mut child, Duration::from_secs(30)).is_none() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Stops and starts again on the same port and data.
    pub fn restart(&mut self) {
        self.stop();
        self.run();
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for External {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A minimal nostr-rs-relay configuration: loopback only, no rate limits, every event kind.
fn nostr_rs_config(port: u16, opts: Options) -> String {
    format!(
        "[info]\n\
         relay_url = \"ws://127.0.0.1:{port}/\"\n\
         name = \"apiary interop test\"\n\
         \n\
         [network]\n\
         address = \"127.0.0.1\"\n\
         port = {port}\n\
         \n\
         [options]\n\
         reject_future_seconds = 1800\n\
         \n\
         [authorization]\n\
         nip42_auth = {}\n",
        opts.auth
    )
}
