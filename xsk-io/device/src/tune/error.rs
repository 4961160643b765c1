//! Why a device cannot be prepared.

use std::io;

use crate::step::Step;

/// Why a device cannot be prepared; nothing stays changed (a failed
/// preparation rolls back first). Both variants carry a fix.
#[derive(Debug, thiserror::Error)]
pub enum TuneError {
    /// An ioctl or sysfs read failed before any decision could be made.
    #[error("{op} on {ifname}: {source} (fix: {fix})")]
    Io {
        /// The operation, e.g. `"ETHTOOL_GDRVINFO"`.
        op: &'static str,
        /// The interface.
        ifname: String,
        /// The OS error.
        source: io::Error,
        /// What to do (permissions, namespace, driver).
        fix: String,
    },
    /// A check or change failed. `report` holds every step (and the rollback
    /// of changes already made, when applying).
    #[error("{step}: {error} (fix: {fix})")]
    Step {
        /// The failed step's `what`.
        step: String,
        /// What went wrong.
        error: String,
        /// The command or setting that fixes it.
        fix: String,
        /// Every step, then the rollback steps (prefixed `rollback:`).
        report: Vec<Step>,
    },
}

impl TuneError {
    pub(super) fn io(op: &'static str, ifname: &str, source: io::Error) -> Self {
        let fix = match source.raw_os_error() {
            Some(libc::ENODEV) => {
                "check the name with `ip link`, in the interface's network namespace".to_string()
            }
            Some(libc::EPERM) | Some(libc::EACCES) => "needs CAP_NET_ADMIN (grant it, or run as root)".to_string(),
            Some(libc::EOPNOTSUPP) => "the driver does not implement this ethtool operation".to_string(),
            _ if source.kind() == io::ErrorKind::NotFound => {
                "sysfs belongs to another network namespace: run under `ip netns exec` (it remounts /sys)"
                    .to_string()
            }
            _ => "see the error".to_string(),
        };
        TuneError::Io {
            op,
            ifname: ifname.to_string(),
            source,
            fix,
        }
    }

    /// The fix hint.
    pub fn fix(&self) -> &str {
        match self {
            TuneError::Io { fix, .. } | TuneError::Step { fix, .. } => fix,
        }
    }

    /// All steps, for printing (empty for I/O errors).
    pub fn report(&self) -> &[Step] {
        match self {
            TuneError::Io { .. } => &[],
            TuneError::Step { report, .. } => report,
        }
    }
}
