//! What the engine is configured with and what it counts.

use std::net::Ipv4Addr;
use std::ops::RangeInclusive;
use std::time::Duration;

use crate::xsk::config::Congestion;
use crate::xsk::drops::DropStats;
use crate::xsk::recovery::{Recovery, RecoveryStats};
use super::cookies::SynCookies;

/// What the engine is configured with (the protocol part of `XskConfig`).
#[derive(Clone, Debug)]
pub(crate) struct EngineConfig {
    pub(crate) mac: [u8; 6],
    pub(crate) addr: Ipv4Addr,
    pub(crate) prefix_len: u8,
    pub(crate) gateway: Option<Ipv4Addr>,
    /// Connections (established and half-open) at most; SYNs beyond get RST.
    pub(crate) max_conns: usize,
    /// Socket buckets (power of two); 0 = one per 8 connections, at least 16.
    pub(crate) buckets: usize,
    /// Largest receive and send buffer per connection (the receive window's bound).
    pub(crate) rx_buffer: usize,
    pub(crate) tx_buffer: usize,
    /// What each buffer starts at; it grows (by 4, up to the largest) when a request,
    /// response or window needs more.
    pub(crate) initial_buffer: usize,
    /// Listening sockets kept ready per port, spread over the buckets.
    pub(crate) backlog: usize,
    /// Local ports for outgoing connections.
    pub(crate) ephemeral: RangeInclusive<u16>,
    pub(crate) keepalive: Option<Duration>,
    /// Abort a connection when the peer stops acknowledging data for this
    /// long, a connect that gets no answer, and a half-open connection that
    /// never completes. An idle connection is not affected (see `idle_timeout`).
    pub(crate) timeout: Option<Duration>,
    /// Close a connection that carried no data either way for this long.
    pub(crate) idle_timeout: Option<Duration>,
    /// Abort a connection the application closed when the peer has not
    /// finished the close after this long (FIN-WAIT-2, CLOSING, LAST-ACK).
    pub(crate) fin_timeout: Duration,
    /// Memory that half-open connections may hold (their socket buffers).
    pub(crate) half_open_bytes: usize,
    /// When SYNs are answered with cookies instead of half-open sockets.
    pub(crate) syn_cookies: SynCookies,
    pub(crate) congestion: Congestion,
    pub(crate) recovery: Recovery,
    /// Accept TCP checksums left partial by a local sender's offload.
    pub(crate) accept_partial_csum: bool,
    /// Header prediction: in-order ACK/PSH segments of established connections go
    /// straight to their socket (`Interface::process_tcp_fast`), not through smoltcp's
    /// layers. Off only to compare the two paths.
    pub(crate) fast_path: bool,
    pub(crate) seed: u64,
}

/// Counters of the engine.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct EngineStats {
    /// Frames received (before any check).
    pub rx_frames: u64,
    /// Frames accepted with a partial TCP checksum (peer's offload, trusted link).
    pub rx_partial_csum: u64,
    /// Segments taken by the fast path (header prediction), not smoltcp's general one.
    pub fast_path: u64,
    /// Frames not given to a socket, by reason.
    pub drops: DropStats,
    /// Retransmissions, tail-loss probes, and those found spurious.
    pub recovery: RecoveryStats,
    /// Incoming connections accepted.
    pub accepted: u64,
    /// Outgoing connections established.
    pub connected: u64,
    /// SYNs answered with a SYN cookie (no socket kept).
    pub syn_cookies_sent: u64,
    /// Half-open connections rebuilt from a valid SYN cookie (then established).
    pub syn_cookies_accepted: u64,
    /// Connections reported closed to the application.
    pub closed: u64,
    /// Sockets returned to the pool (or freed).
    pub recycled: u64,
    /// Connections closed by the idle timeout.
    pub idle_closed: u64,
    /// Connections aborted because the peer stopped acknowledging, or a
    /// connect got no answer.
    pub timed_out: u64,
    /// Closing connections aborted by the FIN timeout.
    pub fin_timeouts: u64,
    /// Sockets in the sets: listeners, half-open, connections, closing.
    pub live_sockets: usize,
    /// Of those, listeners waiting for a SYN.
    pub listening: usize,
    /// Half-open connections (SYN received, not yet established).
    pub half_open: usize,
    /// Connections the application holds.
    pub connections: usize,
    /// Spare sockets in the pool.
    pub pooled_sockets: usize,
}
