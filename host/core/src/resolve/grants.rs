//! What the operator grants a persona's agent beyond its confinement, in the overrides file, for a
//! whole pack or one persona (the two add up):
//!
//! ```toml
//! ["com.example.pack"]
//! agent_env = ["ANTHROPIC_API_KEY"]        # operator variables the agent gets (a runtime's own
//!                                          # provider key arrives as a placeholder: see below)
//! agent_net = ["api.github.com", "127.0.0.1:8080"]   # hosts beyond the runtime's provider
//! agent_read = ["/srv/shared-docs"]        # trees it may read
//! agent_write = ["/srv/scratch"]           # trees it may write
//! agent_config = ["CLAUDE.md"]             # runtime configuration the operator put in workspaces
//!
//! ["com.example.pack".pip]
//! agent_env = ["GITHUB_TOKEN"]
//! ```
//!
//! Nothing else of the operator's environment, files or network reaches an agent. A provider key
//! listed in `agent_env` (`ANTHROPIC_API_KEY` for Claude Code, ...) is given to the agent as a
//! placeholder; apiary's gateway puts the real key into the requests to the provider.

use std::path::PathBuf;

use serde_json::Value;

use crate::diag::{Diagnostic, Report};
use crate::pack::source::Fields;

pub const AGENT_ENV: &str = "agent_env";
pub const AGENT_NET: &str = "agent_net";
pub const AGENT_READ: &str = "agent_read";
pub const AGENT_WRITE: &str = "agent_write";
pub const AGENT_CONFIG: &str = "agent_config";
/// Every grant key: valid both in a pack's table and in a persona's.
pub const KEYS: &[&str] = &[AGENT_ENV, AGENT_NET, AGENT_READ, AGENT_WRITE, AGENT_CONFIG];

/// A persona's agent grants (its pack's and its own together).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AgentGrants {
    /// Variable names, each named on purpose (no patterns).
    pub env: Vec<String>,
    /// Host entries as written (`host`, `*.domain`, `host:port`, an address); the harness parses them.
    pub net: Vec<String>,
    /// Absolute paths.
    pub read: Vec<PathBuf>,
    pub write: Vec<PathBuf>,
    /// Runtime configuration files the operator put in the workspace itself (`CLAUDE.md`, ...):
    /// an agent starts only when its workspace holds no other (see `runtime::PROJECT_CONFIG`).
    pub config: Vec<String>,
}

impl AgentGrants {
    pub fn is_empty(&self) -> bool {
        self.env.is_empty()
            && self.net.is_empty()
            && self.read.is_empty()
            && self.write.is_empty()
            && self.config.is_empty()
    }

    /// `self` with `more` added (no duplicates).
    pub fn with(mut self, more: &AgentGrants) -> AgentGrants {
        fn add<T: PartialEq + Clone>(to: &mut Vec<T>, from: &[T]) {
            for item in from {
                if !to.contains(item) {
                    to.push(item.clone());
                }
            }
        }
        add(&mut self.env, &more.env);
        add(&mut self.net, &more.net);
        add(&mut self.read, &more.read);
        add(&mut self.write, &more.write);
        add(&mut self.config, &more.config);
        self
    }

    /// Reads one grant key of `f` into `self`; `false` when `key` is not a grant key.
    pub fn read_key(&mut self, f: &Fields<'_>, key: &str, report: &mut Report) -> bool {
        if !KEYS.contains(&key) {
            return false;
        }
        let Some(items) = list(f, key, report) else {
            return true;
        };
        for item in items {
            if let Err(why) = self.push(key, &item) {
                let d = Diagnostic::error(
                    "overrides.agent-grant",
                    format!("`{key}` entry {item:?}: {why}"),
                )
                .help(help(key));
                report.push(f.src.diag(d, &[&f.prefix[..], &[key]].concat()));
            }
        }
        true
    }
}

impl AgentGrants {
    fn push(&mut self, key: &str, item: &str) -> Result<(), &'static str> {
        match key {
            AGENT_ENV if crate::pack::is_var_name(item) => self.env.push(item.to_string()),
            AGENT_ENV => return Err("not an environment variable name"),
            AGENT_NET if is_host_entry(item) => self.net.push(item.to_string()),
            AGENT_NET => return Err("not a host, `*.domain`, `host:port` or address"),
            AGENT_CONFIG if crate::runtime::PROJECT_CONFIG.contains(&item) => {
                self.config.push(item.to_string())
            }
            AGENT_CONFIG => return Err("not one of the runtime configuration names apiary checks"),
            _ if item.starts_with('/') && !item.split('/').any(|c| c == "..") => {
                let list = if key == AGENT_READ {
                    &mut self.read
                } else {
                    &mut self.write
                };
                list.push(PathBuf::from(item));
            }
            _ => return Err("not an absolute path without `..`"),
        }
        Ok(())
    }
}

fn list(f: &Fields<'_>, key: &str, report: &mut Report) -> Option<Vec<String>> {
    match f.get(key) {
        Some(Value::Array(items)) if items.iter().all(Value::is_string) => Some(
            items
                .iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect(),
        ),
        _ => {
            let d = Diagnostic::error(
                "overrides.agent-grant",
                format!("`{key}` must be a list of strings"),
            )
            .help(help(key));
            report.push(f.src.diag(d, &[&f.prefix[..], &[key]].concat()));
            None
        }
    }
}

fn help(key: &str) -> &'static str {
    match key {
        AGENT_ENV => r#"e.g. agent_env = ["ANTHROPIC_API_KEY"]: names, no wildcard"#,
        AGENT_NET => {
            r#"e.g. agent_net = ["api.github.com", "*.githubusercontent.com", "127.0.0.1:8080"]"#
        }
        AGENT_CONFIG => {
            r#"e.g. agent_config = ["CLAUDE.md"]: a file or directory name in the workspace"#
        }
        _ => r#"e.g. agent_read = ["/srv/shared"]: absolute paths"#,
    }
}

/// A host entry's shape (the harness checks it fully): no spaces, slashes or schemes.
fn is_host_entry(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 260
        && !s.contains("://")
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-.:*[]_".contains(c))
}
