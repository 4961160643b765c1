//! What can go wrong building or using a lab.

use std::io;
use std::process::ExitStatus;

/// Errors from building or using a lab. Command failures carry the command
/// line and its stderr.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    /// A [`LabConfig`](super::LabConfig) or name out of range, or no free lab name.
    #[error("invalid lab configuration: {0}")]
    Config(String),
    /// A command (`ip`, or one run in a namespace) could not be started or
    /// fed its input.
    #[error("could not run `{cmd}`: {source}")]
    Spawn {
        /// The command line.
        cmd: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// A command ran and exited unsuccessfully.
    #[error("`{cmd}` failed ({status}): {stderr}")]
    Command {
        /// The command line.
        cmd: String,
        /// Its exit status.
        status: ExitStatus,
        /// Its stderr, trimmed.
        stderr: String,
    },
    /// Entering or using a namespace from this process failed (`setns`,
    /// remounting `/sys`, a sysctl, `if_nametoindex`).
    #[error("{op} for network namespace {ns:?}: {source}")]
    Netns {
        /// The operation.
        op: &'static str,
        /// The namespace.
        ns: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// The helper thread of [`Netns::run_in`](super::Netns::run_in) could not be started.
    #[error("could not start a thread: {0}")]
    Thread(#[source] io::Error),
    /// An XDP program for the lab ([`Lab::peer_xdp_pass`](super::Lab::peer_xdp_pass)) could not be attached.
    #[error("attaching an XDP program to {ifname}: {source}")]
    Xdp {
        /// The interface.
        ifname: String,
        /// Why.
        #[source]
        source: xsk_device::steer::SteerError,
    },
}

impl LabError {
    /// The stderr of a failed command, if this is one.
    pub fn stderr(&self) -> Option<&str> {
        match self {
            LabError::Command { stderr, .. } => Some(stderr),
            _ => None,
        }
    }
}
