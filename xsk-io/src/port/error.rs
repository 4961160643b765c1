//! Why binding a port, or flushing it, failed.

use std::io;

use crate::socket::SocketError;

/// Why binding a port, or flushing it, failed.
#[derive(Debug, thiserror::Error)]
pub enum PortError {
    /// No interface of that name in the calling thread's network namespace.
    #[error("interface {0:?} not found (ip link show)")]
    NoInterface(String),
    /// The UMEM could not be mapped (bad [`UmemConfig`](crate::umem::UmemConfig), no memory).
    #[error("creating the UMEM: {0}")]
    Umem(#[source] io::Error),
    /// Creating, setting up or binding the AF_XDP socket failed.
    #[error(transparent)]
    Socket(#[from] SocketError),
    /// The kernel refused a value for a socket option the user set explicitly
    /// ([`Setting::Value`](super::Setting::Value)), or read back another value than was set. (A kernel
    /// without the option is not an error: see [`Features`](super::Features).)
    #[error("{option} = {value} rejected by the kernel: {source}{hint}")]
    Option {
        /// The option, e.g. `"XDP_GENERIC_XMIT_BATCH"`.
        option: &'static str,
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
