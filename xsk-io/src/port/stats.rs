//! What a port counts and where its frames are: its own counters, the
//! kernel's, the SYNs the program shed, and the books [`Port::audit`](super::Port::audit) checks.

use crate::sys::XdpStatistics;

/// The port's own counters, cumulative since it was opened.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
#[non_exhaustive]
pub struct Counters {
    /// Frames handed to the application by [`Port::recv`](super::Port::recv).
    pub rx_frames: u64,
    /// `recv` calls that returned at least one frame.
    pub rx_batches: u64,
    /// Frames queued for TX by `send`.
    pub tx_frames: u64,
    /// TX publishes (one Release store each).
    pub tx_batches: u64,
    /// Sent frames returned through the completion ring.
    pub completions: u64,
    /// sendto calls.
    pub kicks: u64,
    /// TX wake-ups made by [`Port::wait`](super::Port::wait)'s poll(2) instead of a sendto
    /// (copy mode: the kernel transmits before it sleeps).
    pub kicks_in_wait: u64,
    /// sendto answered EAGAIN/ENOBUFS, or EBUSY: the descriptors not yet
    /// taken stay queued and are retried on the next flush.
    pub kick_retries: u64,
    /// Frames the kernel took from the TX ring and dropped instead of
    /// sending: copy-mode `sendto` answers EBUSY when the driver returned
    /// NET_XMIT_DROP (e.g. carrier down) for one frame; that frame still
    /// completes (its address comes back in the completion ring), so the
    /// frame books stay exact, but it never reached the wire.
    pub tx_dropped: u64,
    /// Times the port found the link down (sendto: ENETDOWN, or ENXIO when
    /// the socket lost its device) and started waiting for it.
    pub link_downs: u64,
    /// send() found the TX ring full.
    pub tx_ring_full: u64,
    /// Frames sent with TX metadata asking the kernel to complete the
    /// checksum ([`TxHalf::send_csum`](super::TxHalf::send_csum)).
    pub tx_csum_offloaded: u64,
    /// recvfrom calls (fill-ring wakeups, busy polling).
    pub rx_wakeups: u64,
    /// flushes that could not keep the fill ring topped up (no free frames).
    pub fill_short: u64,
    /// Receive calls that found the fill ring empty (the kernel had taken
    /// every frame given to it): frames arriving then are dropped
    /// (`rx_fill_ring_empty_descs`).
    pub fill_empty_seen: u64,
    /// RX descriptors skipped because they named no frame the kernel held
    /// (never expected: a kernel or accounting bug).
    pub rx_skipped: u64,
}

/// Everything a port counts: its own counters and the kernel's for its socket.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
#[non_exhaustive]
pub struct PortStats {
    /// The port's counters.
    pub port: Counters,
    /// The kernel's counters of the socket (all 0 if they could not be read).
    pub xdp: XdpStatistics,
    /// SYNs the steering program shed (all 0 while shedding is off). The
    /// program's counters are per interface: with several ports on one
    /// interface each reports the interface's total.
    pub shed: ShedCounters,
}

/// SYNs the steering program dropped under overload, by reason (see
/// [`crate::shed`]), as the device setup reads them ([`Port::set_shed`](super::Port::set_shed)).
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
#[non_exhaustive]
pub struct ShedCounters {
    /// The RX ring had no more room than the reserve kept for open connections.
    pub syn_dropped_rx_backlog: u64,
    /// The fill ring had no more frames than the reserve.
    pub syn_dropped_fill_low: u64,
    /// The RX ring had not been empty for a while and the frames waiting
    /// reached the standing limit.
    pub syn_dropped_standing_queue: u64,
}

impl ShedCounters {
    /// The three counts, in field order.
    pub fn new(rx_backlog: u64, fill_low: u64, standing_queue: u64) -> ShedCounters {
        ShedCounters {
            syn_dropped_rx_backlog: rx_backlog,
            syn_dropped_fill_low: fill_low,
            syn_dropped_standing_queue: standing_queue,
        }
    }
}

/// Where the frames are, with the kernel-side places split by ring; the
/// fields add up to `total` (checked by [`Port::audit`](super::Port::audit)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct Accounting {
    /// Frames in the UMEM.
    pub total: u32,
    /// On the port's free list.
    pub free: u32,
    /// Given for RX: in the fill ring, or taken by the kernel and not yet in RX.
    pub fill: u32,
    /// Received, waiting in the RX ring.
    pub rx_ring: u32,
    /// Held by the application (received or allocated, not yet sent or released).
    pub app: u32,
    /// Given for TX: in the TX ring or being sent.
    pub tx: u32,
    /// Sent, waiting in the completion ring.
    pub comp_ring: u32,
}
