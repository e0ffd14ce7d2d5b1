//! What the agent's process gives up just before it executes the runtime: root's user (for the
//! operator's agent user) or root's capabilities, and its life beyond the launcher's.

use std::io;

/// Runs in the forked agent: switches to `user` (no supplementary groups), or, staying root, drops
/// every capability so root's files are the only thing root keeps; then dies with the launcher.
pub fn drop_all(user: Option<(u32, u32)>) -> io::Result<()> {
    // SAFETY: plain system calls on this process; the arguments are values, and the null list for
    // setgroups has length 0.
    unsafe {
        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
            return Err(io::Error::last_os_error());
        }
        if let Some((uid, gid)) = user {
            check(libc::setgroups(0, std::ptr::null()))?;
            check(libc::setresgid(gid, gid, gid))?;
            check(libc::setresuid(uid, uid, uid))?;
            return Ok(());
        }
        if libc::geteuid() == 0 {
            drop_capabilities()?;
        }
    }
    Ok(())
}

fn check(ret: libc::c_int) -> io::Result<()> {
    if ret == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Empties the bounding, ambient, effective, permitted and inheritable sets: an executed program
/// gets no capability back, even as root.
unsafe fn drop_capabilities() -> io::Result<()> {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: libc::c_int,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    const VERSION_3: u32 = 0x2008_0522;
    // SAFETY: prctl and capset on this process with a header and two data words, as capset(2)
    // requires for version 3.
    unsafe {
        for cap in 0..64 {
            // Numbers past the kernel's last capability fail with EINVAL: nothing to drop there.
            libc::prctl(libc::PR_CAPBSET_DROP, cap);
        }
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        );
        let header = Header {
            version: VERSION_3,
            pid: 0,
        };
        let data = [Data {
            effective: 0,
            permitted: 0,
            inheritable: 0,
        }; 2];
        if libc::syscall(libc::SYS_capset, &header, data.as_ptr()) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}
