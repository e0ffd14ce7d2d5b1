//! Landlock: the plan's trees and nothing else, for the calling thread and everything it starts.

use std::path::PathBuf;

use landlock::{
    ABI, Access, AccessFs, BitFlags, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset,
    RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope,
};

use crate::{ConfineError, Plan};

/// The newest ABI whose rights apiary asks for: file rights up to `IoctlDev` (5) and the signal and
/// abstract-socket scopes (6).
const ABI_USED: ABI = ABI::V6;
/// The oldest ABI that confines enough: v3 refuses truncation, so a read-only tree cannot be
/// emptied.
pub const ABI_NEEDED: i32 = 3;

/// Restricts the calling thread (and its future threads and children) to the plan's files.
pub fn restrict(plan: &Plan) -> Result<(), ConfineError> {
    let err = |e: landlock::RulesetError| ConfineError::Landlock(e.to_string());
    let all = AccessFs::from_all(ABI_USED);
    let read = AccessFs::from_read(ABI_USED);
    // Writable trees: everything but making device nodes.
    let write = all & !(AccessFs::MakeChar | AccessFs::MakeBlock);
    // Devices (`/dev/null`, `/dev/ptmx`) take ioctls too: a terminal is set up with them.
    let file_rw =
        AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::Truncate | AccessFs::IoctlDev;
    let mut ruleset = Ruleset::default()
        .handle_access(all)
        .map_err(err)?
        .scope(Scope::AbstractUnixSocket | Scope::Signal)
        .map_err(err)?
        .create()
        .map_err(err)?;
    ruleset = ruleset.add_rules(beneath(&plan.read, read)).map_err(err)?;
    ruleset = ruleset
        .add_rules(beneath(&plan.write, write))
        .map_err(err)?;
    ruleset = ruleset
        .add_rules(beneath(&plan.write_files, file_rw))
        .map_err(err)?;
    let status = ruleset.restrict_self().map_err(err)?;
    match status.ruleset {
        RulesetStatus::FullyEnforced | RulesetStatus::PartiallyEnforced => Ok(()),
        RulesetStatus::NotEnforced => Err(ConfineError::Landlock(
            "the kernel does not enforce Landlock".into(),
        )),
    }
}

/// One rule per path that exists (a missing one is nothing to allow). A rule on a file gets only the
/// rights a file can have.
fn beneath(
    paths: &[PathBuf],
    access: BitFlags<AccessFs>,
) -> impl Iterator<Item = Result<PathBeneath<PathFd>, landlock::RulesetError>> + '_ {
    paths.iter().filter_map(move |p| {
        let fd = PathFd::new(p).ok()?;
        let access = if p.is_dir() {
            access
        } else {
            access & AccessFs::from_file(ABI_USED)
        };
        Some(Ok(
            PathBeneath::new(fd, access).set_compatibility(CompatLevel::BestEffort)
        ))
    })
}

/// The kernel's Landlock ABI, 0 when it has none.
pub fn kernel_abi() -> i32 {
    // SAFETY: landlock_create_ruleset with a null attribute and the VERSION flag only returns the
    // ABI version (or an error); it creates nothing.
    let abi = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            1u32,
        )
    };
    abi.max(0) as i32
}
