//! The launcher process: confines itself as its [`Plan`] says, starts the agent, forwards the
//! plan's loopback ports to apiary's egress socket, and exits with the agent's status.

use std::io::{self, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Child, Command};

use crate::{
    ConfineError, LAUNCH_FAILED, PLAN_VAR, Plan, fs_rules, netns, privileges, ptys, seccomp,
};

/// The launcher's whole life; never returns.
pub fn main() -> ! {
    let code = match plan_from_env().and_then(|plan| run(&plan)) {
        Ok(code) => code,
        Err(e) => {
            // The agent's stderr is apiary's pipe: this line reaches the persona's error report.
            eprintln!("apiary confinement: {e}");
            LAUNCH_FAILED
        }
    };
    std::process::exit(code)
}

fn plan_from_env() -> Result<Plan, ConfineError> {
    let text = std::env::var(PLAN_VAR)
        .map_err(|_| ConfineError::Plan(format!("{PLAN_VAR} is not set")))?;
    Plan::from_json(&text)
}

/// Confines this process, starts the agent, forwards until it exits; the agent's exit code.
fn run(plan: &Plan) -> Result<i32, ConfineError> {
    let mut plan = plan.clone();
    let listeners = match &plan.net {
        Some(net) => {
            netns::isolate()?;
            let listeners = bind(&net.listeners)?;
            // The namespaces made above allow a mount namespace: ptys of the agent's own.
            match ptys::private_devpts() {
                Ok(()) => {
                    plan.write.push("/dev/pts".into());
                    plan.write_files.push("/dev/ptmx".into());
                }
                Err(e) => eprintln!("apiary confinement: no pseudo-terminals for the agent: {e}"),
            }
            listeners
        }
        None => Vec::new(),
    };
    let plan = &plan;
    if plan.landlock {
        fs_rules::restrict(plan)?;
    }
    // The agent is forked while this process has one thread, so the steps between fork and exec
    // may allocate.
    let filter = seccomp::program()?;
    let mut child = spawn(plan, filter)?;
    if let Some(net) = &plan.net {
        for (listener, route) in listeners {
            let socket = net.socket.clone();
            std::thread::spawn(move || accept(listener, socket, route));
        }
    }
    let status = child.wait().map_err(|source| ConfineError::Spawn {
        program: plan.program.display().to_string(),
        source,
    })?;
    Ok(status
        .code()
        .or(status.signal().map(|s| 128 + s))
        .unwrap_or(LAUNCH_FAILED))
}

fn bind(wanted: &[crate::Listener]) -> Result<Vec<(TcpListener, String)>, ConfineError> {
    wanted
        .iter()
        .map(|l| {
            TcpListener::bind((Ipv4Addr::LOCALHOST, l.port))
                .map(|s| (s, l.route.clone()))
                .map_err(|source| ConfineError::Network {
                    step: "listening on the agent's loopback",
                    source,
                })
        })
        .collect()
}

fn spawn(plan: &Plan, filter: seccompiler::BpfProgram) -> Result<Child, ConfineError> {
    let mut cmd = Command::new(&plan.program);
    cmd.args(&plan.args)
        .env_clear()
        .envs(plan.env.iter().map(|(k, v)| (k, v)))
        .current_dir(&plan.cwd);
    let user = plan.user;
    // SAFETY: runs in the forked child of a single-threaded process, before exec.
    unsafe {
        cmd.pre_exec(move || {
            restore_termination();
            privileges::drop_all(user)?;
            seccomp::apply(&filter)
        });
    }
    // The launcher outlives SIGTERM to report the agent's status; the agent gets it (the whole
    // process group is signalled) with its default action restored.
    ignore_termination();
    cmd.spawn().map_err(|source| ConfineError::Spawn {
        program: plan.program.display().to_string(),
        source,
    })
}

fn ignore_termination() {
    // SAFETY: setting a signal's disposition; an exec'd child would keep SIG_IGN, so the agent's
    // pre-exec step restores the default ([`restore_termination`]).
    unsafe {
        libc::signal(libc::SIGTERM, libc::SIG_IGN);
        libc::signal(libc::SIGINT, libc::SIG_IGN);
    }
}

fn restore_termination() {
    // SAFETY: async-signal-safe; runs in the forked child before exec.
    unsafe {
        libc::signal(libc::SIGTERM, libc::SIG_DFL);
        libc::signal(libc::SIGINT, libc::SIG_DFL);
    }
}

/// Forwards each connection to the listener's port to the egress socket, announcing its route.
fn accept(listener: TcpListener, socket: PathBuf, route: String) {
    for conn in listener.incoming() {
        let Ok(conn) = conn else { continue };
        let (socket, route) = (socket.clone(), route.clone());
        std::thread::spawn(move || {
            let _ = forward(conn, &socket, &route);
        });
    }
}

fn forward(tcp: TcpStream, socket: &PathBuf, route: &str) -> io::Result<()> {
    let mut unix = UnixStream::connect(socket)?;
    unix.write_all(format!("{route}\n").as_bytes())?;
    let (mut tcp_read, mut unix_write) = (tcp.try_clone()?, unix.try_clone()?);
    let upstream = std::thread::spawn(move || {
        let _ = io::copy(&mut tcp_read, &mut unix_write);
        let _ = unix_write.shutdown(std::net::Shutdown::Write);
    });
    let (mut unix_read, mut tcp_write) = (unix, tcp);
    let _ = io::copy(&mut unix_read, &mut tcp_write);
    let _ = tcp_write.shutdown(std::net::Shutdown::Write);
    let _ = upstream.join();
    Ok(())
}
