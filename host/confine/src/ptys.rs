//! Pseudo-terminals of the agent's own. Runtimes run shell tools in a pty (Gemini CLI's node-pty),
//! which needs `/dev/ptmx` and `/dev/pts/<n>`; the host's `/dev/pts` also holds the operator's
//! terminals, so the agent gets a fresh devpts instance in a mount namespace of its own instead,
//! where only the ptys it makes exist.

use std::ffi::CString;
use std::io;

/// In a new mount namespace (the caller holds the right to make one: root, or a user namespace of
/// its own), mounts a new devpts instance on `/dev/pts` and its `ptmx` over `/dev/ptmx`.
pub fn private_devpts() -> io::Result<()> {
    // SAFETY: unshare and mount with NUL-terminated strings that outlive the calls.
    unsafe {
        check(libc::unshare(libc::CLONE_NEWNS))?;
        // Nothing mounted here propagates back to the host.
        check(libc::mount(
            std::ptr::null(),
            c("/").as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        ))?;
        let options = c("newinstance,ptmxmode=0666,mode=0620");
        check(libc::mount(
            c("devpts").as_ptr(),
            c("/dev/pts").as_ptr(),
            c("devpts").as_ptr(),
            libc::MS_NOSUID | libc::MS_NOEXEC,
            options.as_ptr().cast(),
        ))?;
        check(libc::mount(
            c("/dev/pts/ptmx").as_ptr(),
            c("/dev/ptmx").as_ptr(),
            std::ptr::null(),
            libc::MS_BIND,
            std::ptr::null(),
        ))?;
    }
    Ok(())
}

fn c(s: &str) -> CString {
    CString::new(s).expect("no NUL in a constant")
}

fn check(ret: libc::c_int) -> io::Result<()> {
    if ret == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}
