//! Why preparing an interface, opening a port, or flushing failed.

use std::io;

use crate::socket::SocketError;
use crate::state::StateError;
use crate::steer::SteerError;
use crate::tune::TuneError;

/// Why preparing an interface, opening a port, or flushing failed.
#[derive(Debug, thiserror::Error)]
pub enum PortError {
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
    /// The UMEM could not be mapped (bad [`UmemConfig`](crate::umem::UmemConfig), no memory).
    #[error("creating the UMEM: {0}")]
    Umem(#[source] io::Error),
    /// Creating, setting up or binding the AF_XDP socket failed.
    #[error(transparent)]
    Socket(#[from] SocketError),
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
    /// The kernel refused a value for a socket option the user set explicitly
    /// ([`Knob::Value`](super::Knob::Value)), or read back another value than was set. (A kernel
    /// without the option is not an error: see [`Features`](super::Features).)
    #[error("{knob} = {value} rejected by the kernel: {source}{hint}")]
    Knob {
        /// The option, e.g. `"XDP_GENERIC_XMIT_BATCH"`.
        knob: &'static str,
        /// The value that was asked for.
        value: u32,
        /// The OS error (or the read-back mismatch).
        source: io::Error,
        /// Empty, or `" (<allowed range>)"`.
        hint: &'static str,
    },
    /// The kernel bound the socket zero-copy although copy mode was asked
    /// for; the port refuses to run (the interface name).
    #[error("the kernel bound {0} zero-copy although copy mode was asked for")]
    ZeroCopy(String),
    /// The TX `sendto` failed with an error that is neither transient
    /// (`EAGAIN`, `ENOBUFS`, `EBUSY`) nor a down link (`ENETDOWN`, `ENXIO`).
    /// The frames stay queued and the next flush retries.
    #[error("kicking TX failed: {0}")]
    Kick(#[source] io::Error),
}
