//! How many files a commit would check out, counted from git's own listing of its tree before
//! anything is written: a repository can reuse one small tree object thousands of times, so a few
//! kilobytes of objects can stand for hundreds of thousands of files, which the byte cap never
//! sees. The listing (`git ls-tree -r -z`) is read as it streams and git is stopped as soon as the
//! count passes the limit, so a hostile tree costs the limit's worth of names, not the whole tree.

use crate::dist::code;
use std::io::Read;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::{GitBudget, kill_group};
use crate::dist::{DistError, Result};

/// The entries (files, links, submodule links) of `commit`'s tree, or `Err` as soon as there are
/// more than `limit`. `cmd` is a git command in the repository, without arguments.
pub(super) fn files_within(
    mut cmd: Command,
    commit: &str,
    limit: usize,
    budget: &GitBudget,
) -> Result<u64> {
    cmd.args([
        "ls-tree",
        "-r",
        "-z",
        "--name-only",
        "--full-tree",
        commit,
        "--",
    ])
    .stdout(Stdio::piped())
    .stderr(Stdio::null());
    #[cfg(unix)]
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let mut child = cmd
        .spawn()
        .map_err(|e| super::git_spawn_error("git ls-tree", e))?;
    let counted = Arc::new(AtomicU64::new(0));
    let stdout = child.stdout.take().expect("stdout is piped");
    let reader = std::thread::spawn({
        let counted = Arc::clone(&counted);
        move || count_names(stdout, limit as u64, &counted)
    });
    let over = |n: u64| n > limit as u64;
    let status = loop {
        if over(counted.load(Ordering::Relaxed)) {
            kill_group(&mut child);
            let _ = reader.join();
            return Err(too_many_files(limit));
        }
        if Instant::now() >= budget.deadline {
            kill_group(&mut child);
            let _ = reader.join();
            return Err(DistError::new(
                code::Git::Timeout,
                format!(
                    "listing the files of {commit} did not finish within {} s; stopped it",
                    budget.timeout.as_secs()
                ),
            ));
        }
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => {
                kill_group(&mut child);
                return Err(DistError::new(
                    code::Git::Failed,
                    format!("cannot wait for git ls-tree: {e}"),
                ));
            }
        }
    };
    let _ = reader.join();
    let n = counted.load(Ordering::Relaxed);
    if over(n) {
        return Err(too_many_files(limit));
    }
    if !status.success() {
        return Err(DistError::new(
            code::Git::Failed,
            format!("git ls-tree {commit} failed ({status})"),
        ));
    }
    Ok(n)
}

/// Counts NUL-terminated names into `counted`, and stops reading (git then gets SIGPIPE) once
/// there are more than `limit`.
fn count_names(mut from: impl Read, limit: u64, counted: &AtomicU64) {
    let mut buf = [0u8; 64 * 1024];
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                let names = buf[..n].iter().filter(|b| **b == 0).count() as u64;
                if counted.fetch_add(names, Ordering::Relaxed) + names > limit {
                    return;
                }
            }
        }
    }
}

/// The refusal of a repository with more files than an install takes.
pub(super) fn too_many_files(limit: usize) -> DistError {
    DistError::new(
        code::Git::TooManyFiles,
        format!(
            "the repository holds more than {limit} files, the install limit; stopped the clone"
        ),
    )
    .help("a pack repository should hold the pack only; split it or install from a .buzzpack")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counting_stops_past_the_limit() {
        let names = b"a\0b\0c\0d\0".repeat(10_000);
        let counted = AtomicU64::new(0);
        count_names(&names[..], 5, &counted);
        // One read: the whole buffer was counted, and reading stopped there.
        assert!(counted.load(Ordering::Relaxed) > 5);
        let counted = AtomicU64::new(0);
        count_names(&b"a\0b\0"[..], 5, &counted);
        assert_eq!(counted.load(Ordering::Relaxed), 2);
    }
}
