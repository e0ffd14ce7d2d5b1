//! The blobs on disk: `<dir>/<sha256>`, written through a temporary file and renamed into place
//! once the digest is checked, counted against the caps.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use sha2::{Digest, Sha256};

/// How much a store holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caps {
    /// One blob, in bytes.
    pub max_blob_bytes: u64,
    /// All blobs together, in bytes.
    pub max_total_bytes: u64,
}

impl Default for Caps {
    /// 64 MiB a blob (the archive cap installs apply), 1 GiB in all.
    fn default() -> Caps {
        Caps {
            max_blob_bytes: 64 * 1024 * 1024,
            max_total_bytes: 1024 * 1024 * 1024,
        }
    }
}

/// Why a blob was not stored.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("the blob is {size} bytes; this server takes at most {max}")]
    TooLarge { size: u64, max: u64 },
    #[error("the store is full ({used} of {max} bytes used)")]
    Full { used: u64, max: u64 },
    #[error("the body's sha256 is {actual}, not the {authorised} the upload was authorised for")]
    Digest { actual: String, authorised: String },
    #[error("the body ended after {got} of {expected} bytes")]
    Short { got: u64, expected: u64 },
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// What the server says about a stored blob (BUD-02's blob descriptor).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Descriptor {
    pub sha256: String,
    pub size: u64,
}

#[derive(Debug)]
pub struct BlobStore {
    dir: PathBuf,
    caps: Caps,
    /// Bytes held (counted at start, then kept up to date under the lock).
    used: Mutex<u64>,
}

/// A blob's file name: exactly 64 lower-case hex digits.
pub fn is_sha256(name: &str) -> bool {
    name.len() == 64 && name.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

impl BlobStore {
    /// Opens (creating, private to this user) the store in `dir`; leftovers of interrupted
    /// uploads are removed.
    pub fn open(dir: &Path, caps: Caps) -> std::io::Result<BlobStore> {
        std::fs::create_dir_all(dir)?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
        }
        let mut used = 0;
        for entry in std::fs::read_dir(dir)? {
            let entry = entry?;
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if name.starts_with(".upload-") {
                let _ = std::fs::remove_file(entry.path());
            } else if is_sha256(&name) && entry.file_type()?.is_file() {
                used += entry.metadata()?.len();
            }
        }
        Ok(BlobStore {
            dir: dir.to_path_buf(),
            caps,
            used: Mutex::new(used),
        })
    }

    pub fn caps(&self) -> Caps {
        self.caps
    }

    /// The file of blob `sha256`, when held.
    pub fn path_of(&self, sha256: &str) -> Option<PathBuf> {
        if !is_sha256(sha256) {
            return None;
        }
        let path = self.dir.join(sha256);
        std::fs::symlink_metadata(&path)
            .ok()
            .filter(|m| m.is_file())
            .map(|_| path)
    }

    /// Whether a blob of `size` bytes could be taken now (checked before its body is read).
    pub fn admits(&self, size: u64) -> Result<(), StoreError> {
        if size > self.caps.max_blob_bytes {
            return Err(StoreError::TooLarge {
                size,
                max: self.caps.max_blob_bytes,
            });
        }
        let used = *self.used.lock().unwrap_or_else(|e| e.into_inner());
        if used.saturating_add(size) > self.caps.max_total_bytes {
            return Err(StoreError::Full {
                used,
                max: self.caps.max_total_bytes,
            });
        }
        Ok(())
    }

    /// Stores `body` (exactly `size` bytes are read) when its digest is one of `authorised`.
    pub async fn put<R>(
        &self,
        body: &mut R,
        size: u64,
        authorised: &[String],
    ) -> Result<Descriptor, StoreError>
    where
        R: tokio::io::AsyncRead + Unpin,
    {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        self.admits(size)?;
        let tmp = self.dir.join(format!(".upload-{}", nonce()));
        let result = async {
            let mut file = tokio::fs::File::create(&tmp).await?;
            let mut hash = Sha256::new();
            let mut got = 0u64;
            let mut buf = vec![0u8; 64 * 1024];
            while got < size {
                let want = buf.len().min((size - got) as usize);
                let n = body.read(&mut buf[..want]).await?;
                if n == 0 {
                    return Err(StoreError::Short {
                        got,
                        expected: size,
                    });
                }
                hash.update(&buf[..n]);
                file.write_all(&buf[..n]).await?;
                got += n as u64;
            }
            file.sync_all().await?;
            let actual = hex::encode(hash.finalize());
            if !authorised.iter().any(|a| a == &actual) {
                return Err(StoreError::Digest {
                    actual,
                    authorised: authorised.join(", "),
                });
            }
            self.commit(&tmp, &actual, size)?;
            Ok(Descriptor {
                sha256: actual,
                size,
            })
        }
        .await;
        let _ = std::fs::remove_file(&tmp);
        result
    }

    /// Renames the checked upload into place, counting it (a blob already held is not counted
    /// twice).
    fn commit(&self, tmp: &Path, sha256: &str, size: u64) -> Result<(), StoreError> {
        let mut used = self.used.lock().unwrap_or_else(|e| e.into_inner());
        if self.path_of(sha256).is_some() {
            return Ok(());
        }
        if used.saturating_add(size) > self.caps.max_total_bytes {
            return Err(StoreError::Full {
                used: *used,
                max: self.caps.max_total_bytes,
            });
        }
        std::fs::rename(tmp, self.dir.join(sha256))?;
        *used += size;
        Ok(())
    }
}

/// A name no two uploads share.
fn nonce() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!(
        "{}-{t}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sha(b: &[u8]) -> String {
        hex::encode(Sha256::digest(b))
    }

    #[tokio::test]
    async fn a_blob_is_kept_only_when_whole_authorised_and_within_the_caps() {
        let dir = tempfile::tempdir().unwrap();
        let caps = Caps {
            max_blob_bytes: 10,
            max_total_bytes: 15,
        };
        let store = BlobStore::open(dir.path(), caps).unwrap();
        let body = b"0123456789";
        let d = store.put(&mut &body[..], 10, &[sha(body)]).await.unwrap();
        assert_eq!(d.sha256, sha(body));
        assert!(store.path_of(&d.sha256).is_some());
        // Another digest than authorised: refused, nothing kept.
        let other = b"abcde";
        let e = store
            .put(&mut &other[..], 5, &[sha(b"x")])
            .await
            .unwrap_err();
        assert!(matches!(e, StoreError::Digest { .. }), "{e}");
        assert!(store.path_of(&sha(other)).is_none());
        // Too large for one blob; the store full; a short body.
        assert!(matches!(store.admits(11), Err(StoreError::TooLarge { .. })));
        assert!(matches!(store.admits(6), Err(StoreError::Full { .. })));
        let e = store
            .put(&mut &other[..3], 5, &[sha(other)])
            .await
            .unwrap_err();
        assert!(matches!(e, StoreError::Short { .. }), "{e}");
        // Reopened, the store counts what it holds and left no temporary file.
        let again = BlobStore::open(dir.path(), caps).unwrap();
        assert!(matches!(again.admits(6), Err(StoreError::Full { .. })));
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
