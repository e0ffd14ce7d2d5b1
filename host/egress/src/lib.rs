//! The only way out of a confined agent's network namespace.
//!
//! Each agent gets a Unix socket of its own ([`Egress::open`]); the launcher inside the agent's
//! namespace forwards its loopback ports there, naming the route first (`proxy`, `gateway`,
//! `forward:<n>`). What a route may reach is this agent's [`Policy`], decided here, outside the
//! sandbox:
//! - `proxy`: an HTTP proxy (`CONNECT host:port`, and plain `http://` requests) to the hosts of the
//!   operator's list ([`rules`]); a name that resolves to an internal address (loopback, private,
//!   link-local, metadata) is refused unless the list names that address itself, and the checked
//!   address is the one connected to;
//! - `gateway`: the provider's API ([`gateway`]): requests go to the operator's upstream with the
//!   placeholder the agent was given replaced by the real key in headers and query, so the agent
//!   never holds a key worth stealing;
//! - `forward:<n>`: a plain TCP tunnel to one address the operator granted (a loopback MCP server).
//!
//! Every refusal is reported ([`Refusal`]).

pub mod gateway;
pub mod proxy;
pub mod rules;
mod tls;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, BufReader};
use tokio::net::{UnixListener, UnixStream};

pub use gateway::{Gateway, Secret, Upstream};
pub use rules::HostRule;

/// The route names the launcher announces.
pub const PROXY: &str = "proxy";
pub const GATEWAY: &str = "gateway";
pub const FORWARD: &str = "forward:";

/// What one agent may reach.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    /// Hosts of the `proxy` route.
    pub hosts: Vec<HostRule>,
    /// The provider gateway, when the agent's runtime has one.
    pub gateway: Option<Gateway>,
    /// `forward:<n>` tunnels to these addresses.
    pub forwards: Vec<SocketAddr>,
}

/// A connection the policy did not allow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub route: String,
    /// What the agent asked for (`host:port`, or the route itself).
    pub target: String,
    pub why: String,
}

pub type Report = Arc<dyn Fn(Refusal) + Send + Sync>;

/// The sockets of every agent of one apiary process, in a directory only its user can enter.
pub struct Egress {
    dir: tempfile::TempDir,
}

/// One agent's socket: closed, and its file removed, when dropped.
pub struct AgentSocket {
    pub path: PathBuf,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for AgentSocket {
    fn drop(&mut self) {
        self.task.abort();
        let _ = std::fs::remove_file(&self.path);
    }
}

impl Egress {
    /// A new directory for the sockets, under the system's temporary directory (a socket path must
    /// stay under about 100 bytes).
    pub fn new() -> std::io::Result<Egress> {
        let dir = tempfile::Builder::new()
            .prefix("apiary-egress-")
            .tempdir_in(short_tmp())?;
        Ok(Egress { dir })
    }

    /// Listens for agent `name`'s connections (must be called within a tokio runtime).
    pub fn open(&self, name: &str, policy: Policy, report: Report) -> std::io::Result<AgentSocket> {
        let path = self.dir.path().join(format!("{}.sock", file_safe(name)));
        let _ = std::fs::remove_file(&path);
        let listener = UnixListener::bind(&path)?;
        let policy = Arc::new(policy);
        let task = tokio::spawn(serve(listener, policy, report));
        Ok(AgentSocket { path, task })
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

fn short_tmp() -> PathBuf {
    let tmp = std::env::temp_dir();
    if tmp.as_os_str().len() <= 40 {
        tmp
    } else {
        PathBuf::from("/tmp")
    }
}

/// A socket file name for a persona label (`pack/name`): letters, digits, `-`, `_`, `.` only.
fn file_safe(name: &str) -> String {
    let mut s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .take(60)
        .collect();
    s.push('-');
    s.push_str(&format!("{:x}", std::process::id()));
    s
}

async fn serve(listener: UnixListener, policy: Arc<Policy>, report: Report) {
    loop {
        let Ok((conn, _)) = listener.accept().await else {
            continue;
        };
        let (policy, report) = (Arc::clone(&policy), Arc::clone(&report));
        tokio::spawn(async move {
            if let Err(refusal) = route(conn, &policy, &report).await {
                tracing::warn!(route = %refusal.route, target = %refusal.target, "agent egress refused: {}", refusal.why);
                report(refusal);
            }
        });
    }
}

/// Reads the route line, then serves the connection on that route.
async fn route(conn: UnixStream, policy: &Policy, report: &Report) -> Result<(), Refusal> {
    let mut conn = BufReader::new(conn);
    let mut line = String::new();
    let read = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        (&mut conn).take(64).read_line(&mut line),
    )
    .await;
    let name = line.trim_end().to_string();
    if !matches!(read, Ok(Ok(n)) if n > 0 && line.ends_with('\n')) {
        return Err(refused(&name, &name, "no route named"));
    }
    match name.as_str() {
        PROXY => {
            proxy::serve(conn, policy, report).await;
            Ok(())
        }
        GATEWAY => match &policy.gateway {
            Some(g) => {
                gateway::serve(conn, g).await;
                Ok(())
            }
            None => Err(refused(&name, &name, "this agent has no provider gateway")),
        },
        _ => match name
            .strip_prefix(FORWARD)
            .and_then(|n| n.parse::<usize>().ok())
            .and_then(|n| policy.forwards.get(n))
        {
            Some(addr) => forward(conn, *addr).await,
            None => Err(refused(&name, &name, "no such route")),
        },
    }
}

use tokio::io::AsyncReadExt as _;

pub(crate) fn refused(route: &str, target: &str, why: impl Into<String>) -> Refusal {
    Refusal {
        route: route.to_string(),
        target: target.to_string(),
        why: why.into(),
    }
}

async fn forward(mut conn: BufReader<UnixStream>, addr: SocketAddr) -> Result<(), Refusal> {
    let route = format!("{FORWARD}{addr}");
    let mut out = tokio::time::timeout(CONNECT_TIMEOUT, tokio::net::TcpStream::connect(addr))
        .await
        .map_err(|_| refused(&route, &addr.to_string(), "connect timed out"))?
        .map_err(|e| refused(&route, &addr.to_string(), e.to_string()))?;
    let _ = out.set_nodelay(true);
    splice(&mut conn, &mut out).await;
    Ok(())
}

/// How long reaching an upstream may take.
pub(crate) const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(15);

/// Copies both ways until both sides are done.
pub(crate) async fn splice<A, B>(a: &mut A, b: &mut B)
where
    A: AsyncRead + AsyncWrite + Unpin,
    B: AsyncRead + AsyncWrite + Unpin,
{
    let _ = tokio::io::copy_bidirectional(a, b).await;
}
