//! What a port got from the kernel and the device, probed at bind.

use super::config::BusyPoll;
use crate::socket::RingSizes;
use crate::AttachMode;

/// What the kernel and the device gave a port, probed at bind; its
/// `Display` is the one-line summary [`Port::log_features`](super::Port::log_features) prints.
#[derive(Clone, Debug, serde::Serialize)]
#[non_exhaustive]
pub struct Features {
    /// The interface.
    pub ifname: String,
    /// The queue the socket is bound to.
    pub queue: u32,
    /// The driver, as the device setup reported it
    /// ([`Port::set_device`](super::Port::set_device)); empty if none did.
    pub driver: String,
    /// Where the steering program runs (None: no program attached, or the
    /// device setup did not say).
    pub attach: Option<AttachMode>,
    /// Always false: a zero-copy bind is refused ([`PortError::ZeroCopy`](super::PortError::ZeroCopy)).
    pub zerocopy: bool,
    /// Always true: the socket is bound with `XDP_USE_NEED_WAKEUP`, so the
    /// port makes a syscall only when the kernel asks for one.
    pub need_wakeup: bool,
    /// `XDP_MAX_TX_SKB_BUDGET` in force, in descriptors per `sendto` (None:
    /// left at the kernel default, or a kernel older than 6.17: 32).
    pub tx_budget: Option<u32>,
    /// `XDP_GENERIC_XMIT_BATCH` in force, in frames per queue lock (None:
    /// turned off, or a kernel without it).
    pub xmit_batch: Option<u32>,
    /// Busy polling, if configured.
    pub busy_poll: Option<BusyPoll>,
    /// TX checksum offload through AF_XDP TX metadata
    /// ([`TxHalf::send_csum`](super::TxHalf::send_csum)): asked for ([`QueueConfig::tx_csum`](super::QueueConfig::tx_csum)) and
    /// taken by the kernel (Linux 6.8+).
    pub tx_csum: bool,
    /// The ring sizes.
    pub rings: RingSizes,
    /// UMEM frame size in bytes.
    pub frame_size: u32,
    /// UMEM frames.
    pub frame_count: u32,
}

impl std::fmt::Display for Features {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}:{} driver={} xdp={} copy-mode need_wakeup={} tx_budget={} xmit_batch={} busy_poll={} tx_csum={} rings(fill/comp/rx/tx)={}/{}/{}/{} frames={}x{}",
            self.ifname,
            self.queue,
            self.driver,
            self.attach.map_or("none".to_string(), |m| m.to_string()),
            self.need_wakeup,
            self.tx_budget.map_or("unsupported(32)".to_string(), |b| b.to_string()),
            self.xmit_batch.map_or("unsupported".to_string(), |b| b.to_string()),
            self.busy_poll.map_or("off".to_string(), |b| match b.usecs {
                0 => "spin".to_string(),
                us => format!("{us}us/{}", b.budget),
            }),
            if self.tx_csum { "offload" } else { "off" },
            self.rings.fill,
            self.rings.comp,
            self.rings.rx,
            self.rings.tx,
            self.frame_count,
            self.frame_size,
        )
    }
}
