//! What a launcher is told to do: the agent's command line, environment, files and network.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// One confined agent.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub program: PathBuf,
    pub args: Vec<String>,
    pub cwd: PathBuf,
    /// The agent's whole environment: nothing is inherited.
    pub env: Vec<(String, String)>,
    /// Trees the agent may read and execute from.
    pub read: Vec<PathBuf>,
    /// Trees the agent may read, write, create in and delete from.
    pub write: Vec<PathBuf>,
    /// Single files the agent may read and write (`/dev/null`, a capture file).
    pub write_files: Vec<PathBuf>,
    /// Apply the Landlock rules (`false`: files unconfined, as the operator chose).
    pub landlock: bool,
    /// A network namespace whose only ways out are these listeners (`None`: the host's network).
    pub net: Option<NetPlan>,
    /// Run the agent as this user and group (the launcher must be root); `None`: the launcher's
    /// own user, without capabilities.
    pub user: Option<(u32, u32)>,
}

/// The agent's network: its own loopback, with listeners forwarded to apiary's egress proxy.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NetPlan {
    /// apiary's egress socket for this agent.
    pub socket: PathBuf,
    pub listeners: Vec<Listener>,
}

/// A port on the agent's loopback (127.0.0.1) and the route its connections take: the launcher
/// writes `route` and a newline first on each connection to the egress socket.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Listener {
    pub port: u16,
    pub route: String,
}

impl Plan {
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a plan serialises")
    }

    pub fn from_json(text: &str) -> Result<Plan, crate::ConfineError> {
        serde_json::from_str(text).map_err(|e| crate::ConfineError::Plan(e.to_string()))
    }
}
