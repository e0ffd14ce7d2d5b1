//! A seccomp filter for the agent: no new Unix sockets (the egress socket, a desktop bus or a
//! container engine's socket would be ways around the network namespace and Landlock, which on
//! these kernels does not govern connecting to a socket file), and no io_uring (whose operations
//! could open sockets without the `socket` system call). Socket pairs between the agent's own
//! processes stay allowed.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

use crate::ConfineError;

/// The compiled filter, built before the agent is forked.
pub fn program() -> Result<BpfProgram, ConfineError> {
    let err = |e: &dyn std::fmt::Display| ConfineError::Seccomp(e.to_string());
    let arch: TargetArch = std::env::consts::ARCH.try_into().map_err(|e| err(&e))?;
    let unix = SeccompCondition::new(
        0,
        SeccompCmpArgLen::Dword,
        SeccompCmpOp::Eq,
        libc::AF_UNIX as u64,
    )
    .map_err(|e| err(&e))?;
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    rules.insert(
        libc::SYS_socket,
        vec![SeccompRule::new(vec![unix]).map_err(|e| err(&e))?],
    );
    // An empty rule list matches the call whatever its arguments.
    rules.insert(libc::SYS_io_uring_setup, vec![]);
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(|e| err(&e))?;
    filter
        .try_into()
        .map_err(|e: seccompiler::BackendError| err(&e))
}

/// Installs `program` on the calling thread (inherited by what it executes).
pub fn apply(program: &BpfProgram) -> std::io::Result<()> {
    seccompiler::apply_filter(program).map_err(|e| std::io::Error::other(e.to_string()))
}
