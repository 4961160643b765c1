//! Why an interface cannot be owned, or its record not be read or written.

use std::io;
use std::path::{Path, PathBuf};

use super::dir::{state_dir, STATE_DIR_ENV};

/// Why an interface cannot be owned, or its record not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// Another live process (or this one, through another [`Owner`](super::Owner)) owns the
    /// interface; nothing was touched.
    #[error(
        "{ifname} is in use by another xsk-io port ({owner}); refusing to touch it \
         (its original state is recorded in {}; stop that process first: once it is gone, \
         the next start or `xsk-bench restore {ifname}` puts the device back)",
        path.display()
    )]
    InUse {
        /// The interface.
        ifname: String,
        /// Who owns it, e.g. `"pid 1234"` or `"this process, pid 1234"`.
        owner: String,
        /// The owner's record.
        path: PathBuf,
    },
    /// Reading, writing or removing a lock or record file failed, or
    /// restoring a dead owner's record failed (the record is kept).
    #[error("state record {}: {source} (fix: {fix})", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: io::Error,
        /// What to do (permissions, `XSK_IO_STATE_DIR`, `xsk-bench restore`).
        fix: String,
    },
    /// A record that is not in the expected format; nothing was restored.
    #[error("state record {}: line {line}: {msg} (fix: check the file, or delete it to forget the recorded state)", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// The 1-based line (0: the file as a whole).
        line: usize,
        /// What is wrong.
        msg: String,
    },
    /// A name that cannot be an interface name or would escape the state
    /// directory (empty, too long, `/`, leading `.`, whitespace).
    #[error("bad interface name {0:?}")]
    BadName(String),
}

impl StateError {
    pub(super) fn io(path: &Path, source: io::Error) -> StateError {
        let fix = match source.raw_os_error() {
            Some(libc::EACCES) | Some(libc::EPERM) | Some(libc::EROFS) => {
                format!(
                    "needs write access to the state directory {}: make it writable by this user \
                     (systemd: RuntimeDirectory=xsk-io), or choose another (--state-dir, {STATE_DIR_ENV})",
                    state_dir().display()
                )
            }
            _ => "see the error".to_string(),
        };
        StateError::Io { path: path.to_path_buf(), source, fix }
    }
}
