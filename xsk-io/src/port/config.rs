//! How a queue's socket is set up: [`QueueConfig`] and its parts.

use crate::socket::RingSizes;
use crate::umem::UmemConfig;

/// A kernel socket option: leave it alone, let the port choose, or force a
/// value. Parses from `off` (or `0`), `auto`, or a number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Setting {
    /// Do not set the option: the kernel default stays.
    Off,
    /// The port's choice (see the [`QueueConfig`] field); a kernel without
    /// the option is reported once and the port runs without it.
    Auto,
    /// Exactly this value; a kernel that refuses it fails the port with
    /// [`PortError::Option`](crate::port::PortError::Option), one without the
    /// option is reported as for `Auto`.
    Value(u32),
}

impl std::str::FromStr for Setting {
    type Err = String;
    fn from_str(s: &str) -> Result<Setting, String> {
        match s {
            "off" | "0" => Ok(Setting::Off),
            "auto" => Ok(Setting::Auto),
            n => n.parse().map(Setting::Value).map_err(|_| format!("expected off, auto or a number, got {n:?}")),
        }
    }
}

/// Busy polling (opt-in): the caller's loop never sleeps, and with `usecs`
/// above 0 an empty `recv` also drives the device's NAPI from the calling
/// thread instead of waiting for an interrupt (`SO_PREFER_BUSY_POLL`,
/// `SO_BUSY_POLL` and `SO_BUSY_POLL_BUDGET`).
///
/// `usecs: 0` spins in user space only: no socket option, no `recvfrom` on an
/// empty pass. For a device with no interrupt to save, such as veth, where
/// the sender's softirq delivers a frame inside its own `sendto`
/// (`docs/2026-12-03-veth-attach` compares the two there).
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct BusyPoll {
    /// `SO_BUSY_POLL`: how long one poll may spin, in microseconds; 0: the
    /// kernel does not busy-poll (the loop still spins).
    pub usecs: u32,
    /// `SO_BUSY_POLL_BUDGET`: packets per poll.
    pub budget: u32,
}

/// How [`Port::bind`](crate::port::Port::bind) sets up one queue's socket and
/// UMEM. The default: 4096 frames of 4 KiB, 2048-entry rings, both TX options
/// `Auto`, no busy polling, TX checksum offload asked for.
#[derive(Clone, Copy, Debug)]
pub struct QueueConfig {
    /// Size of the UMEM (one per port).
    pub umem: UmemConfig,
    /// Ring sizes.
    pub rings: RingSizes,
    /// [`XDP_MAX_TX_SKB_BUDGET`](crate::sys::XDP_MAX_TX_SKB_BUDGET), in
    /// descriptors per `sendto`; `Auto` = the TX ring size (a ring below 32
    /// keeps the kernel default). The kernel allows 32 to the TX ring size.
    pub tx_budget: Setting,
    /// [`XDP_GENERIC_XMIT_BATCH`](crate::sys::XDP_GENERIC_XMIT_BATCH), in
    /// frames per TX queue lock; `Auto` = 32, never above the budget.
    pub xmit_batch: Setting,
    /// Busy polling; None (the default) is off.
    pub busy_poll: Option<BusyPoll>,
    /// Ask for TX checksum offload through AF_XDP TX metadata (Linux 6.8+;
    /// [`Features::tx_csum`](crate::port::Features::tx_csum) says whether the
    /// kernel took it).
    pub tx_csum: bool,
}

impl Default for QueueConfig {
    fn default() -> QueueConfig {
        QueueConfig {
            umem: UmemConfig::default(),
            rings: RingSizes::default(),
            tx_budget: Setting::Auto,
            xmit_batch: Setting::Auto,
            busy_poll: None,
            tx_csum: true,
        }
    }
}
