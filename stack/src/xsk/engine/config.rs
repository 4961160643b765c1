//! What the engine is configured with and what it counts.

use std::net::Ipv4Addr;
use std::ops::RangeInclusive;
use std::time::Duration;

use crate::xsk::config::Congestion;
use crate::xsk::drops::DropStats;

/// What the engine is configured with (the protocol part of `XskConfig`).
#[derive(Clone, Debug)]
pub struct EngineConfig {
    pub mac: [u8; 6],
    pub addr: Ipv4Addr,
    pub prefix_len: u8,
    pub gateway: Option<Ipv4Addr>,
    /// Connections (established and half-open) at most; SYNs beyond get RST.
    pub max_conns: usize,
    /// Socket buckets (power of two); 0 = one per 8 connections, at least 16.
    pub buckets: usize,
    pub rx_buffer: usize,
    pub tx_buffer: usize,
    /// Listening sockets kept ready per port, spread over the buckets.
    pub backlog: usize,
    /// Local ports for outgoing connections.
    pub ephemeral: RangeInclusive<u16>,
    pub keepalive: Option<Duration>,
    /// Abort a connection when the peer stops acknowledging data for this
    /// long, a connect that gets no answer, and a half-open connection that
    /// never completes. An idle connection is not affected (see `idle_timeout`).
    pub timeout: Option<Duration>,
    /// Close a connection that carried no data either way for this long.
    pub idle_timeout: Option<Duration>,
    /// Abort a connection the application closed when the peer has not
    /// finished the close after this long (FIN-WAIT-2, CLOSING, LAST-ACK).
    pub fin_timeout: Duration,
    /// Memory that half-open connections may hold (their socket buffers).
    pub half_open_bytes: usize,
    pub congestion: Congestion,
    /// Accept TCP checksums left partial by a local sender's offload.
    pub accept_partial_csum: bool,
    pub seed: u64,
}

/// Counters of the engine.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct EngineStats {
    pub rx_frames: u64,
    /// Frames accepted with a partial TCP checksum (peer's offload, trusted link).
    pub rx_partial_csum: u64,
    pub drops: DropStats,
    pub accepted: u64,
    pub connected: u64,
    pub closed: u64,
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
    pub half_open: usize,
    pub connections: usize,
    pub pooled_sockets: usize,
}
