//! `xsk-io`: one network interface queue as a fast, batched, copy-mode AF_XDP port.
//!
//! Layering, bottom up:
//! - [`sys`]: the `if_xdp.h` ABI (constants and structs) and the small
//!   syscall helpers the other modules share (`if_nametoindex`,
//!   `setsockopt`/`getsockopt`, errno conversion).
//! - [`mmap`], [`ring`], [`umem`]: the shared memory and the four rings.
//! - [`socket`]: the AF_XDP socket: creation, ring setup, bind, knobs, statistics.
//! - [`steer`]: the XDP steering program (C, `src/bpf/steer.bpf.c`) behind a bpf_link.
//! - [`tune`]: driver-specific device preparation (virtio_net, veth) via ethtool ioctls and sysfs.
//! - [`state`]: the crash-safe record of what was changed on a device (under
//!   `/run/xsk-io`), the lock that makes one process its owner, and restore.
//! - [`iface`]: an interface prepared for ports (owner lock and record,
//!   tuning, steering program), put back when its last port is dropped; it
//!   hands out ports.
//! - [`port`]: the data plane of one queue: rx, tx, refill, reap, with exact
//!   frame accounting ([`port::Port::audit`]).
//! - [`ifaddr`]: MAC, MTU and IPv4 address of an interface.
//!
//! With the `lab` feature (tests, benchmarks, the `xsk-bench` binary; not
//! needed to run a port): `lab` (network namespaces joined by veth),
//! `signals` (the binaries' SIGINT/SIGTERM handling), `pktgen` (frame
//! builder) and `rawsock` (an AF_PACKET socket).
//!
//! `unsafe` lives only where the kernel or memory shared with it is touched,
//! each block with a SAFETY comment (enforced by the lint below): the ring and
//! UMEM memory ([`mmap`], [`ring`], [`umem`]); syscalls with pointers to plain
//! data ([`sys`], [`socket`], [`ifaddr`], [`tune::ethtool`], [`state`]'s
//! `flock`, and libbpf calls in [`steer`]); with `lab`, namespace switching and
//! signal handlers (`lab`, `signals`) and the packet socket (`rawsock`).

#![warn(missing_docs)]
#![warn(clippy::undocumented_unsafe_blocks)]

use std::fmt;
use std::str::FromStr;

pub mod sys;
pub(crate) mod mmap;
pub(crate) mod ring;
pub mod umem;
pub mod socket;
pub mod steer;
pub mod tune;
pub mod state;
pub mod iface;
pub mod port;
pub mod ifaddr;
#[cfg(feature = "lab")]
pub mod lab;
#[cfg(feature = "lab")]
pub mod pktgen;
#[cfg(feature = "lab")]
pub mod rawsock;
#[cfg(feature = "lab")]
pub mod signals;

/// How the XDP steering program is attached to the interface.
///
/// The AF_XDP socket itself is always bound in copy mode; this only chooses
/// where the XDP program runs: in the driver (`Drv`, native) or on the skb
/// path (`Skb`, generic).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AttachMode {
    Skb,
    Drv,
    /// `Drv` where the driver supports native XDP (virtio_net, veth), else `Skb`.
    Auto,
}

impl fmt::Display for AttachMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AttachMode::Skb => "skb",
            AttachMode::Drv => "drv",
            AttachMode::Auto => "auto",
        })
    }
}

impl FromStr for AttachMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "skb" | "generic" => Ok(AttachMode::Skb),
            "drv" | "native" => Ok(AttachMode::Drv),
            "auto" => Ok(AttachMode::Auto),
            other => Err(format!("unknown attach mode {other:?} (expected skb, drv or auto)")),
        }
    }
}
