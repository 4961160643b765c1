//! `xsk-io`: one network interface queue as a fast, batched, copy-mode AF_XDP port.
//!
//! Layering, bottom up:
//! - [`sys`]: the `if_xdp.h` ABI (constants and structs), nothing else.
//! - [`mmap`], [`ring`], [`umem`]: the shared memory and the four rings; the only `unsafe`.
//! - [`socket`]: the AF_XDP socket: creation, ring setup, bind, knobs, statistics.
//! - [`steer`]: the XDP steering program (C, `src/bpf/steer.bpf.c`) behind a bpf_link.
//! - [`tune`]: driver-specific device preparation (virtio_net, veth) via ethtool ioctls and sysfs.
//! - [`port`]: all of the above as one batched port with exact frame accounting.
//! - [`lab`]: network namespaces joined by veth, for tests and benchmarks.

use std::fmt;
use std::str::FromStr;

pub mod sys;
pub mod mmap;
pub mod ring;
pub mod umem;
pub mod socket;
pub mod steer;
pub mod tune;
pub mod state;
pub mod iface;
pub mod port;
pub mod lab;
pub mod pktgen;
pub mod rawsock;
pub mod ifaddr;

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
