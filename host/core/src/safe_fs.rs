//! Files that someone other than apiary chose: the operator's overrides and base prompt, a pack's
//! manifest, personas and skills, the install root's records. Each is opened without blocking (a
//! FIFO with no writer would hang `open` forever, a device could stream without end), checked
//! through the open handle, and read only when it is a regular file. Trees that a pack, a hook or an
//! agent can write are walked through capability handles instead (`apiary_harness::workspace`).

use std::fs::File;
use std::io;
use std::path::Path;

/// What to do when the last component of the path is a symbolic link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinalLink {
    /// Follow it: the operator named the file and may keep it in a dotfiles repository.
    Follow,
    /// Refuse it (`ELOOP`): the path was already resolved inside a tree, so a link found now was
    /// swapped in since.
    Refuse,
}

/// Opens `path` for reading without waiting for a FIFO's writer. Nothing is checked yet.
#[cfg(unix)]
pub fn open_nonblocking(path: &Path, link: FinalLink) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let nofollow = if link == FinalLink::Refuse {
        libc::O_NOFOLLOW
    } else {
        0
    };
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | nofollow)
        .open(path)
}

/// Without `O_NONBLOCK` and `O_NOFOLLOW`: checked, then opened (a swap in between is not caught).
#[cfg(not(unix))]
pub fn open_nonblocking(path: &Path, link: FinalLink) -> io::Result<File> {
    if link == FinalLink::Refuse && std::fs::symlink_metadata(path)?.file_type().is_symlink() {
        return Err(not_regular(&std::fs::symlink_metadata(path)?.file_type()));
    }
    File::open(path)
}

/// Opens `path` for reading when it is a regular file, with its size when opened. A FIFO, a device,
/// a socket or a directory is refused with an error that says which it is.
pub fn open_regular(path: &Path, link: FinalLink) -> io::Result<(File, u64)> {
    let file = open_nonblocking(path, link)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(not_regular(&meta.file_type()));
    }
    Ok((file, meta.len()))
}

/// The error for a file that is not a regular one (`InvalidInput`, so callers can tell it apart).
pub fn not_regular(kind: &std::fs::FileType) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!(
            "is {}, not a regular file; apiary reads only regular files",
            kind_name(kind)
        ),
    )
}

/// "a FIFO (named pipe)", "a directory", …: for messages.
pub fn kind_name(kind: &std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if kind.is_fifo() {
            return "a FIFO (named pipe)";
        }
        if kind.is_char_device() {
            return "a character device";
        }
        if kind.is_block_device() {
            return "a block device";
        }
        if kind.is_socket() {
            return "a socket";
        }
    }
    if kind.is_dir() {
        "a directory"
    } else if kind.is_symlink() {
        "a symbolic link"
    } else if kind.is_file() {
        "a regular file"
    } else {
        "a special file"
    }
}

/// Reads the regular file at `path` whole, refusing one over `limit` bytes (checked on what is
/// read, not only on the size the file claims). Errors name neither the path nor the limit's
/// purpose: callers add both.
pub fn read_regular(path: &Path, link: FinalLink, limit: u64) -> io::Result<Vec<u8>> {
    use std::io::Read;
    let (file, len) = open_regular(path, link)?;
    let mut bytes = Vec::with_capacity(len.min(limit) as usize);
    file.take(limit.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("is larger than the {} KiB limit", limit / 1024),
        ));
    }
    Ok(bytes)
}

/// Checks that only the current user can change `path`: it belongs to them and is not writable by
/// group or others (like ssh's `StrictModes`). `follow`: a link is followed (the install root may
/// be one), else a link is refused.
pub fn check_private(path: &Path, follow: bool) -> io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let meta = if follow {
            std::fs::metadata(path)
        } else {
            std::fs::symlink_metadata(path)
        }
        .map_err(|e| io::Error::other(format!("cannot check {}: {e}", path.display())))?;
        if meta.file_type().is_symlink() {
            return Err(io::Error::other(format!(
                "{} is a symbolic link",
                path.display()
            )));
        }
        // SAFETY: geteuid has no preconditions and cannot fail.
        let me = unsafe { libc::geteuid() };
        if meta.uid() != me {
            return Err(io::Error::other(format!(
                "{} belongs to uid {}, not to you (uid {me})",
                path.display(),
                meta.uid()
            )));
        }
        if meta.mode() & 0o022 != 0 {
            return Err(io::Error::other(format!(
                "{} is writable by {} (mode {:o})",
                path.display(),
                if meta.mode() & 0o002 != 0 {
                    "everyone"
                } else {
                    "its group"
                },
                meta.mode() & 0o7777
            )));
        }
    }
    #[cfg(not(unix))]
    let _ = (path, follow);
    Ok(())
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    fn mkfifo(path: &Path) {
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path; mkfifo only creates a node.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    }

    #[test]
    fn special_files_are_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("pipe");
        mkfifo(&fifo);
        let e = open_regular(&fifo, FinalLink::Follow).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        assert!(e.to_string().contains("FIFO"), "{e}");
        let e = read_regular(dir.path(), FinalLink::Follow, 10).unwrap_err();
        assert!(e.to_string().contains("a directory"), "{e}");
        let e = read_regular(Path::new("/dev/zero"), FinalLink::Follow, 10).unwrap_err();
        assert!(e.to_string().contains("character device"), "{e}");
    }

    #[test]
    fn links_and_limits() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, "0123456789").unwrap();
        let link = dir.path().join("l");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        assert_eq!(
            read_regular(&link, FinalLink::Follow, 10).unwrap().len(),
            10
        );
        let e = read_regular(&link, FinalLink::Refuse, 10).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ELOOP));
        let e = read_regular(&file, FinalLink::Refuse, 9).unwrap_err();
        assert!(e.to_string().contains("limit"), "{e}");
    }
}
