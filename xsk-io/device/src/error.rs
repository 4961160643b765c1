//! Why preparing an interface or opening its ports failed.

use crate::state::StateError;
use crate::steer::SteerError;
use crate::tune::TuneError;

/// Why preparing an interface or opening its ports failed.
#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    /// No interface of that name in the calling thread's network namespace.
    #[error("interface {0:?} not found (ip link show)")]
    NoInterface(String),
    /// The process lacks capabilities or a memlock limit the port needs; nothing
    /// was changed. Each is named with its fix ([`crate::privileges`]).
    #[error("the AF_XDP port on {ifname} cannot open: {}", crate::privileges::describe(missing))]
    Privileges {
        /// The interface.
        ifname: String,
        /// What is missing.
        missing: Vec<crate::privileges::Missing>,
    },
    /// Binding a queue's socket failed.
    #[error(transparent)]
    Port(#[from] xsk_io::port::PortError),
    /// Loading or attaching the steering program, or updating its maps, failed.
    #[error(transparent)]
    Steer(#[from] SteerError),
    /// A device check or change failed (everything changed was rolled back).
    #[error(transparent)]
    Tune(#[from] TuneError),
    /// The interface is owned by another live process, or its crash-safe
    /// record could not be written or restored.
    #[error(transparent)]
    State(#[from] StateError),
}
