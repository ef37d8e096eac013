//! `file:` secrets: bounded reads, the permission check, and the fingerprint that tells the
//! refresher a file changed — also when it was replaced by a rename or when a symlink in its
//! path now points elsewhere (Kubernetes swaps `..data`), not only on in-place writes.

use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use super::{MAX_SECRET_BYTES, SecretError};

/// What identifies one version of a file's content without reading it: the inode the path
/// resolves to now (after following symlinks), its size and its change times.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileFingerprint {
    dev: u64,
    ino: u64,
    len: u64,
    mtime_ns: i128,
    ctime_ns: i128,
    mode: u32,
}

impl FileFingerprint {
    fn of(meta: &std::fs::Metadata) -> Self {
        let ns = |s: i64, n: i64| i128::from(s) * 1_000_000_000 + i128::from(n);
        FileFingerprint {
            dev: meta.dev(),
            ino: meta.ino(),
            len: meta.len(),
            mtime_ns: ns(meta.mtime(), meta.mtime_nsec()),
            ctime_ns: ns(meta.ctime(), meta.ctime_nsec()),
            mode: meta.mode(),
        }
    }

    /// The fingerprint of what `path` resolves to now; `None` when it cannot be seen.
    pub fn current(path: &Path) -> Option<Self> {
        std::fs::metadata(path).ok().map(|m| Self::of(&m))
    }
}

fn io_error(path: &Path, e: &std::io::Error) -> SecretError {
    SecretError::File {
        path: path.to_owned(),
        reason: e.kind().to_string(),
    }
}

/// Reads the file (at most [`MAX_SECRET_BYTES`]), without its trailing newline, and the
/// fingerprint of what was read. Refuses files readable by group or others.
pub(super) fn read(path: &Path) -> Result<(String, FileFingerprint), SecretError> {
    let mut file = std::fs::File::open(path).map_err(|e| io_error(path, &e))?;
    // The metadata of the opened file, so a swap between the check and the read cannot
    // pair one file's mode with another's content.
    let meta = file.metadata().map_err(|e| io_error(path, &e))?;
    if !meta.is_file() {
        return Err(SecretError::File {
            path: path.to_owned(),
            reason: "not a regular file".into(),
        });
    }
    let mode = meta.mode() & 0o7777;
    if mode & 0o044 != 0 {
        return Err(SecretError::FileTooOpen {
            path: path.to_owned(),
            mode,
        });
    }
    let mut bytes = Vec::new();
    (&mut file)
        .take(MAX_SECRET_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| io_error(path, &e))?;
    let bytes = zeroize::Zeroizing::new(bytes);
    if bytes.len() > MAX_SECRET_BYTES {
        return Err(SecretError::File {
            path: path.to_owned(),
            reason: "larger than 64 KiB".into(),
        });
    }
    let text = std::str::from_utf8(&bytes).map_err(|_| SecretError::File {
        path: path.to_owned(),
        reason: "not valid UTF-8".into(),
    })?;
    Ok((
        text.trim_end_matches(['\n', '\r']).to_owned(),
        FileFingerprint::of(&meta),
    ))
}
