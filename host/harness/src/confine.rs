//! Each persona's agent, confined (see `apiary-confine` and `apiary-egress`): what `up` decided the
//! machine can enforce ([`Confinement`]), and one agent's environment, files and network
//! ([`prepare`]).
//!
//! An agent gets an environment built from nothing ([`env`]), its workspace plus a home and a
//! temporary directory of its own to write (kept beside the workspaces, where no hook reaches),
//! the system and its runtime's installation to read, and a network namespace whose only ways out
//! are apiary's egress proxy (the operator's host list), the provider gateway (which holds the key)
//! and the loopback ports the operator granted.

pub mod env;

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use apiary_confine::{Listener, NetPlan, Plan, Support};
use apiary_core::runtime::{PROJECT_CONFIG, Runtime};
use apiary_egress::{AgentSocket, Egress, Gateway, HostRule, Policy, Secret, Upstream};

use crate::acp::AgentCommand;
use crate::resolve::ResolvedPersona;

/// The agent's loopback port for the egress proxy (`HTTPS_PROXY`).
pub const PROXY_PORT: u16 = 3128;
/// The agent's loopback port for the provider gateway (its runtime's base URL).
pub const GATEWAY_PORT: u16 = 4480;
/// The agent's loopback port for apiary's own MCP server (its tools; see `apiary-mcp`).
pub const TOOLS_PORT: u16 = 4481;
/// Beside the workspaces (`<root>/<namespace>/<persona>`): agents' homes and temporary
/// directories, `<root>/.apiary-agents/<namespace>/<persona>/{home,tmp}`. No pack id starts with a
/// dot, and a hook's preopen is its persona's workspace only.
const AGENT_DIRS: &str = ".apiary-agents";

/// How `up` confines agents, decided once at start.
#[derive(Clone)]
pub struct Confinement {
    /// apiary's own binary, run as each agent's launcher; `None`: agents start directly.
    pub launcher: Option<PathBuf>,
    /// What this machine enforces (all `false` when nothing is to be enforced).
    pub support: Support,
    /// The agents' way out, when their network is isolated.
    pub egress: Option<Arc<Egress>>,
    /// Agents run as this user (apiary as root), each in its own directories.
    pub user: Option<AgentUser>,
    /// Why a layer is off, for the status line (`--unconfined-agents`, the kernel, ...).
    pub missing: Option<String>,
}

/// The operator's `--agent-user`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentUser {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
}

impl std::fmt::Debug for Confinement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Confinement")
            .field("layers", &self.label())
            .field("user", &self.user)
            .field("missing", &self.missing)
            .finish_non_exhaustive()
    }
}

impl Confinement {
    /// No confinement at all (library callers that start agents themselves: benches, tests).
    pub fn none(why: &str) -> Confinement {
        Confinement {
            launcher: None,
            support: Support::default(),
            egress: None,
            user: None,
            missing: Some(why.to_string()),
        }
    }

    /// The layers an agent gets, as `up` shows them (`files,network,seccomp` or `none`).
    pub fn label(&self) -> String {
        if self.launcher.is_none() {
            return "none".into();
        }
        let s = &self.support;
        let layers: Vec<&str> = [
            (s.files, "files"),
            (s.network && self.egress.is_some(), "network"),
            (s.seccomp, "seccomp"),
        ]
        .iter()
        .filter(|(on, _)| *on)
        .map(|(_, name)| *name)
        .collect();
        if layers.is_empty() {
            "none".into()
        } else {
            layers.join(",")
        }
    }

    pub fn complete(&self) -> bool {
        self.launcher.is_some() && self.support.complete() && self.egress.is_some()
    }

    /// `up`'s decision from what `support` says this machine enforces: everything, or, when the
    /// operator accepts less (`--unconfined-agents`, or the bundled agent, which needs nothing),
    /// what works; otherwise the refusal, saying what is missing and what to do.
    pub fn decide(
        launcher: PathBuf,
        support: Support,
        accept_less: Option<&str>,
        user: Option<AgentUser>,
    ) -> Result<Confinement, String> {
        let missing = (!support.complete()).then(|| support.problems.join("; "));
        if let (Some(problems), None) = (&missing, accept_less) {
            return Err(format!(
                "this machine cannot confine agents ({problems}); run apiary on Linux with Landlock \
                 (ABI 3 or newer) and user namespaces, or pass --unconfined-agents to start them with \
                 only what it can enforce"
            ));
        }
        let egress = if support.network {
            Some(Arc::new(Egress::new().map_err(|e| {
                format!("cannot make the agents' egress socket directory: {e}")
            })?))
        } else {
            None
        };
        let any = support.files || support.network || support.seccomp;
        Ok(Confinement {
            launcher: any.then_some(launcher),
            egress,
            user,
            missing: missing.map(|m| format!("{} ({m})", accept_less.unwrap_or_default())),
            support,
        })
    }
}

impl AgentUser {
    /// The user named `name`, which apiary (as root) switches each agent to.
    pub fn lookup(name: &str) -> Result<AgentUser, String> {
        // SAFETY: geteuid cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            return Err(
                "--agent-user needs apiary to run as root (it switches each agent to that user)"
                    .into(),
            );
        }
        let c_name =
            std::ffi::CString::new(name).map_err(|_| format!("`{name}` is not a user name"))?;
        let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
        let mut buf = vec![0 as libc::c_char; 16 * 1024];
        let mut found: *mut libc::passwd = std::ptr::null_mut();
        // SAFETY: getpwnam_r writes into `pwd` and `buf`, both alive and sized as passed.
        let rc = unsafe {
            libc::getpwnam_r(
                c_name.as_ptr(),
                &mut pwd,
                buf.as_mut_ptr(),
                buf.len(),
                &mut found,
            )
        };
        if rc != 0 || found.is_null() {
            return Err(format!("no user `{name}` on this machine (--agent-user)"));
        }
        if pwd.pw_uid == 0 {
            return Err("--agent-user must name a user other than root".into());
        }
        Ok(AgentUser {
            name: name.to_string(),
            uid: pwd.pw_uid,
            gid: pwd.pw_gid,
        })
    }
}

/// One agent, ready to start.
pub struct AgentBox {
    /// The launcher's command line and plan, or `None` to start the agent directly with `env`.
    pub launch: Option<crate::acp::Launch>,
    pub env: Vec<(String, String)>,
    /// Its egress socket, open as long as the persona runs.
    pub socket: Option<Arc<AgentSocket>>,
    /// Values that must never be published (granted secrets, the provider key).
    pub secrets: Vec<String>,
    /// The layers it runs under (see [`Confinement::label`]).
    pub label: String,
    /// apiary's MCP server as the agent reaches it (`None`: no tools offered).
    pub mcp_url: Option<String>,
}

/// Why an agent cannot start as configured.
#[derive(Debug, thiserror::Error)]
pub enum ConfineError {
    #[error("{0}")]
    Env(#[from] env::EnvError),
    #[error("`agent_net` entry: {0}")]
    Host(#[from] apiary_egress::rules::RuleError),
    #[error("the provider URL in {var}: {why}")]
    Upstream { var: String, why: String },
    #[error(
        "`agent_net` grants {addr}, whose port {port} is the agent's own proxy or gateway port; use the address with another port"
    )]
    PortTaken { addr: SocketAddr, port: u16 },
    #[error(
        "the agent program {program} is inside {holds}, which holds apiary's data: move it to a directory of its own"
    )]
    ProgramDir { program: PathBuf, holds: PathBuf },
    #[error("preparing {path}: {source}")]
    Dir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("opening the agent's egress socket: {0}")]
    Socket(std::io::Error),
}

/// What [`prepare`] needs to know about the persona and the operator.
pub struct AgentContext<'a> {
    pub confinement: &'a Confinement,
    pub agent: &'a AgentCommand,
    pub persona: &'a ResolvedPersona,
    pub pack_id: &'a str,
    pub namespace: &'a str,
    pub cwd: &'a Path,
    pub workspace_root: &'a Path,
    /// Directories no agent may read, even by way of its program's location (data dir, install
    /// root, the operator's home).
    pub private: &'a [PathBuf],
    /// The operator's environment.
    pub operator_env: &'a env::OperatorEnv,
    /// Where refused connections are reported.
    pub report: apiary_egress::Report,
    /// apiary's MCP server, when agents are offered its tools.
    pub tools: Option<SocketAddr>,
}

/// The agent's runtime: the bundled agent or a preset's program says so; otherwise the persona's
/// `runtime`.
pub fn runtime_of(agent: &AgentCommand, persona: &ResolvedPersona) -> Runtime {
    let program = agent
        .program
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    let program = program.trim_end_matches(std::env::consts::EXE_SUFFIX);
    if program == "apiary-agent" {
        return Runtime::find("apiary-agent").expect("the bundled runtime is in the table");
    }
    Runtime::names()
        .into_iter()
        .filter_map(Runtime::find)
        .find(|r| {
            r.command
                .and_then(|c| c.split_whitespace().next())
                .is_some_and(|p| p == program)
        })
        .unwrap_or_else(|| Runtime::for_name(Some(&persona.identity.runtime)))
}

/// The environment, files and network of one persona's agent.
pub fn prepare(ctx: &AgentContext<'_>) -> Result<AgentBox, ConfineError> {
    let conf = ctx.confinement;
    let runtime = runtime_of(ctx.agent, ctx.persona);
    let (home, tmp) = agent_dirs(ctx)?;
    let isolated = conf.egress.is_some() && conf.support.network && conf.launcher.is_some();
    let built = env::build(&env::Inputs {
        runtime: &runtime,
        persona: ctx.persona,
        pack_id: ctx.pack_id,
        cwd: ctx.cwd,
        home: &home,
        tmp: &tmp,
        user: conf.user.as_ref().map(|u| u.name.as_str()),
        operator_env: ctx.operator_env,
        gateway: isolated.then_some(GATEWAY_PORT),
        proxy: isolated.then_some(PROXY_PORT),
    })?;
    let mut agent_box = AgentBox {
        launch: None,
        env: built.vars.clone(),
        socket: None,
        secrets: built.secrets.clone(),
        label: conf.label(),
        mcp_url: ctx
            .tools
            .map(|addr| format!("http://{addr}{}", apiary_mcp::PATH)),
    };
    let Some(launcher) = &conf.launcher else {
        return Ok(agent_box);
    };
    let mut plan = Plan {
        program: ctx.agent.program.clone(),
        args: ctx.agent.args.clone(),
        cwd: ctx.cwd.to_path_buf(),
        env: built.vars.clone(),
        landlock: conf.support.files,
        user: conf.user.as_ref().map(|u| (u.uid, u.gid)),
        ..Plan::default()
    };
    files(ctx, &runtime, &home, &tmp, &mut plan)?;
    if ctx.tools.is_some() {
        // The stdio bridge to apiary's tools is apiary's own binary (the launcher).
        plan.read.push(launcher.clone());
    }
    if isolated {
        let (net, socket) = network(ctx, &runtime, &built, conf)?;
        plan.net = Some(net);
        agent_box.socket = Some(Arc::new(socket));
        if ctx.tools.is_some() {
            agent_box.mcp_url = Some(format!("http://127.0.0.1:{TOOLS_PORT}{}", apiary_mcp::PATH));
        }
    }
    agent_box.launch = Some(crate::acp::Launch {
        launcher: launcher.clone(),
        plan: plan.to_json(),
    });
    Ok(agent_box)
}

/// The agent's own home and temporary directory, created private (and its user's).
fn agent_dirs(ctx: &AgentContext<'_>) -> Result<(PathBuf, PathBuf), ConfineError> {
    let base = ctx
        .workspace_root
        .join(AGENT_DIRS)
        .join(ctx.namespace)
        .join(&ctx.persona.identity.name);
    let (home, tmp) = (base.join("home"), base.join("tmp"));
    let fail = |path: &Path| {
        let path = path.to_path_buf();
        move |source| ConfineError::Dir { path, source }
    };
    for dir in [&home, &tmp] {
        private_dir(dir, ctx.confinement.user.as_ref()).map_err(fail(dir))?;
    }
    if let Some(user) = &ctx.confinement.user {
        // Its user must pass through the directories above its own, which root made.
        for dir in base.ancestors().take(3) {
            traversable(dir).map_err(fail(dir))?;
        }
        chown(ctx.cwd, user).map_err(fail(ctx.cwd))?;
    }
    Ok((home, tmp))
}

fn private_dir(dir: &Path, user: Option<&AgentUser>) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let meta = std::fs::symlink_metadata(dir)?;
    if !meta.is_dir() {
        return Err(std::io::Error::other("not a directory (a link?)"));
    }
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    match user {
        Some(user) => chown(dir, user),
        None => Ok(()),
    }
}

/// Enterable, not listable, by others (`0711`).
fn traversable(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o711))
}

fn chown(path: &Path, user: &AgentUser) -> std::io::Result<()> {
    std::os::unix::fs::lchown(path, Some(user.uid), Some(user.gid))
}

/// The plan's file rules: the system, the runtime's installation, the operator's grants; its
/// workspace, home and temporary directory to write.
fn files(
    ctx: &AgentContext<'_>,
    runtime: &Runtime,
    home: &Path,
    tmp: &Path,
    plan: &mut Plan,
) -> Result<(), ConfineError> {
    let path_var = ctx.operator_env.get("PATH");
    let install = apiary_confine::system::installation(&ctx.agent.program, path_var);
    for dir in &install {
        if let Some(holds) = ctx.private.iter().find(|p| p.starts_with(dir)) {
            return Err(ConfineError::ProgramDir {
                program: ctx.agent.program.clone(),
                holds: holds.clone(),
            });
        }
    }
    plan.read = apiary_confine::system::read_only();
    plan.read.extend(install);
    plan.read.extend(ctx.persona.agent.read.iter().cloned());
    plan.write = vec![ctx.cwd.to_path_buf(), home.to_path_buf(), tmp.to_path_buf()];
    plan.write.extend(ctx.persona.agent.write.iter().cloned());
    plan.write_files = apiary_confine::system::devices();
    // The bundled agent's capture file (a test instrument the operator names in its environment).
    if runtime.own_prefix.is_some()
        && let Some(capture) = ctx.operator_env.get("APIARY_AGENT_CAPTURE")
    {
        let capture = PathBuf::from(capture);
        let _ = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&capture);
        plan.write_files.push(capture);
    }
    Ok(())
}

/// The agent's listeners and its egress policy: the proxy (host list), the gateway (when its
/// runtime has a provider and a key was granted), and a port for each granted loopback address.
fn network(
    ctx: &AgentContext<'_>,
    runtime: &Runtime,
    built: &env::Built,
    conf: &Confinement,
) -> Result<(NetPlan, AgentSocket), ConfineError> {
    let mut policy = Policy::default();
    let mut listeners = vec![Listener {
        port: PROXY_PORT,
        route: apiary_egress::PROXY.into(),
    }];
    if let (Some(provider), Some(upstream)) = (runtime.provider, &built.upstream) {
        let parsed = Upstream::parse(upstream).map_err(|why| ConfineError::Upstream {
            var: provider.base_url_var.into(),
            why,
        })?;
        policy.gateway = Some(Gateway {
            upstream: parsed,
            secrets: built
                .placeholders
                .iter()
                .map(|(placeholder, value)| Secret {
                    placeholder: placeholder.clone(),
                    value: value.clone(),
                })
                .collect(),
        });
        listeners.push(Listener {
            port: GATEWAY_PORT,
            route: apiary_egress::GATEWAY.into(),
        });
    }
    for entry in &ctx.persona.agent.net {
        let rule = HostRule::parse(entry)?;
        if let Some(addr) = loopback_forward(entry) {
            if [PROXY_PORT, GATEWAY_PORT, TOOLS_PORT].contains(&addr.port()) {
                return Err(ConfineError::PortTaken {
                    addr,
                    port: addr.port(),
                });
            }
            listeners.push(Listener {
                port: addr.port(),
                route: format!("{}{}", apiary_egress::FORWARD, policy.forwards.len()),
            });
            policy.forwards.push(addr);
        }
        policy.hosts.push(rule);
    }
    if let Some(tools) = ctx.tools {
        listeners.push(Listener {
            port: TOOLS_PORT,
            route: format!("{}{}", apiary_egress::FORWARD, policy.forwards.len()),
        });
        policy.forwards.push(tools);
    }
    let egress = conf
        .egress
        .as_ref()
        .expect("isolated agents have an egress");
    let label = format!("{}-{}", ctx.namespace, ctx.persona.identity.name);
    let socket = egress
        .open(&label, policy, Arc::clone(&ctx.report))
        .map_err(ConfineError::Socket)?;
    Ok((
        NetPlan {
            socket: socket.path.clone(),
            listeners,
        },
        socket,
    ))
}

/// Refuses a workspace that holds agent runtime configuration ([`PROJECT_CONFIG`]) the operator
/// did not allow for this persona (`agent_config`): a hook or an earlier run of the agent could
/// have planted settings that approve tools, start MCP servers or run commands at session start.
pub fn planted_config(cwd: &Path, allowed: &[String]) -> Result<(), super::DispatchError> {
    for name in PROJECT_CONFIG {
        let path = cwd.join(name);
        if std::fs::symlink_metadata(&path).is_ok() && !allowed.iter().any(|a| a == name) {
            return Err(super::DispatchError::PlantedConfig {
                file: path.display().to_string(),
                name: (*name).to_string(),
            });
        }
    }
    Ok(())
}

/// `session/new`'s `_meta` with the runtimes' project settings turned off where a runtime lets
/// the client say so (Claude Code's `settingSources`: none, so neither the workspace's
/// `.claude/` nor the agent's own home can approve tools or add hooks).
pub fn without_project_settings(
    meta: Option<serde_json::Map<String, serde_json::Value>>,
) -> serde_json::Map<String, serde_json::Value> {
    let mut meta = meta.unwrap_or_default();
    let claude = meta
        .entry("claudeCode")
        .or_insert_with(|| serde_json::json!({}));
    if let Some(claude) = claude.as_object_mut() {
        let options = claude
            .entry("options")
            .or_insert_with(|| serde_json::json!({}));
        if let Some(options) = options.as_object_mut() {
            options.insert("settingSources".into(), serde_json::json!([]));
        }
    }
    meta
}

/// A granted `127.0.0.1:<port>` (or `[::1]:<port>`): the agent connects to it on its own loopback
/// as it would outside, and the launcher forwards it there.
fn loopback_forward(entry: &str) -> Option<SocketAddr> {
    let addr: SocketAddr = entry.parse().ok()?;
    let ip: IpAddr = addr.ip();
    ip.is_loopback().then_some(addr)
}
