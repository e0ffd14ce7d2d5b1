//! A network namespace of the launcher's own, with its loopback up and nothing else: no route to
//! the host's interfaces, its loopback services or the internet.

use std::io;

use crate::ConfineError;

/// Moves the calling (single-threaded) process into a new network namespace. Root does so directly;
/// anyone else first enters a user namespace of their own in which they keep their uid and gid
/// (so files they create are theirs outside too), which gives them the right to.
pub fn isolate() -> Result<(), ConfineError> {
    // SAFETY: getuid/getgid cannot fail.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    if uid == 0 {
        unshare(libc::CLONE_NEWNET, "unshare(CLONE_NEWNET)")?;
    } else {
        unshare(
            libc::CLONE_NEWUSER | libc::CLONE_NEWNET,
            "unshare(CLONE_NEWUSER | CLONE_NEWNET)",
        )?;
        write_proc("/proc/self/setgroups", "deny", "writing setgroups")?;
        write_proc(
            "/proc/self/uid_map",
            &format!("{uid} {uid} 1"),
            "mapping the uid",
        )?;
        write_proc(
            "/proc/self/gid_map",
            &format!("{gid} {gid} 1"),
            "mapping the gid",
        )?;
    }
    loopback_up()
}

fn unshare(flags: libc::c_int, step: &'static str) -> Result<(), ConfineError> {
    // SAFETY: unshare takes flags only.
    if unsafe { libc::unshare(flags) } != 0 {
        return Err(ConfineError::Network {
            step,
            source: io::Error::last_os_error(),
        });
    }
    Ok(())
}

fn write_proc(path: &str, text: &str, step: &'static str) -> Result<(), ConfineError> {
    std::fs::write(path, text).map_err(|source| ConfineError::Network { step, source })
}

/// `ip link set lo up`, through the `SIOCSIFFLAGS` ioctl on a throwaway socket.
fn loopback_up() -> Result<(), ConfineError> {
    let step = "bringing up loopback";
    let fail = |source| ConfineError::Network { step, source };
    // SAFETY: a plain datagram socket, closed below; `ifreq` is zeroed and holds a NUL-terminated
    // name within its buffer.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(fail(io::Error::last_os_error()));
        }
        let mut req: libc::ifreq = std::mem::zeroed();
        for (dst, src) in req.ifr_name.iter_mut().zip(b"lo\0") {
            *dst = *src as libc::c_char;
        }
        let ok = libc::ioctl(fd, libc::SIOCGIFFLAGS, &mut req) == 0 && {
            req.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
            libc::ioctl(fd, libc::SIOCSIFFLAGS, &req) == 0
        };
        let error = io::Error::last_os_error();
        libc::close(fd);
        if !ok {
            return Err(fail(error));
        }
    }
    Ok(())
}
