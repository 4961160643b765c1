//! What the engine is configured with and what it counts.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::ops::RangeInclusive;
use std::time::Duration;

use crate::drops::DropStats;
use crate::recovery::{Recovery, RecoveryStats};
use super::cookies::SynCookies;

/// TCP congestion control (smoltcp's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Congestion {
    /// None: the window is the receiver's.
    None,
    /// Reno.
    Reno,
    /// CUBIC (the default, as in Linux).
    Cubic,
}

/// The TCP engine's settings: limits, buffers, timers, SYN cookies, congestion control, loss
/// recovery. `stack::xsk::XskConfig::engine` holds one; `Default`
/// gives the values it starts with.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct EngineConfig {
    /// Connections this shard is sized for (decides the bucket count when `buckets` is 0);
    /// connections and half-open ones beyond it are refused (RST).
    pub max_conns: usize,
    /// Socket buckets (power of two); 0 = one per 8 connections, at least 16.
    pub buckets: usize,
    /// Receive buffer per connection at most, bytes (the advertised window's bound).
    pub rx_buffer: usize,
    /// Send buffer per connection at most, bytes.
    pub tx_buffer: usize,
    /// What each connection's buffers start at, bytes: they grow (by four, up to `rx_buffer`
    /// and `tx_buffer`) when a read or a write finds them too small, so a connection that
    /// carries small requests and responses, and a half-open one, costs this much twice.
    pub initial_buffer: usize,
    /// Listening sockets kept ready per port, spread over the buckets (the accept backlog).
    pub backlog: usize,
    /// Local ports for outgoing connections.
    pub ephemeral: RangeInclusive<u16>,
    /// TCP keep-alive interval; none by default.
    pub keepalive: Option<Duration>,
    /// Abort a connection when the peer stops acknowledging data for this long, a connect
    /// that gets no answer, and a half-open connection that never completes. An idle
    /// connection is not affected (see `idle_timeout`).
    pub timeout: Option<Duration>,
    /// Close a connection that carried no data either way for this long.
    pub idle_timeout: Option<Duration>,
    /// Abort a connection the application closed when the peer has not finished the close
    /// after this long (FIN-WAIT-2, CLOSING, LAST-ACK).
    pub fin_timeout: Duration,
    /// Memory half-open connections may hold (their socket buffers).
    pub half_open_bytes: usize,
    /// When SYNs are answered with SYN cookies: by default when the half-open table is full
    /// (as Linux), so a SYN flood costs no memory and no half-open connection is evicted.
    pub syn_cookies: SynCookies,
    /// Congestion control.
    pub congestion: Congestion,
    /// Loss recovery: retransmission timeout bounds, tail-loss probe.
    pub recovery: Recovery,
    /// Header prediction: in-order ACK/PSH segments of established connections skip
    /// smoltcp's general receive path, and a send buffer that fits one segment leaves
    /// without its general send path (the same effects; see
    /// `stack/vendor/smoltcp/PATCHES.md`, fast-path and fast-send). On by default; off
    /// only to compare.
    pub fast_path: bool,
    /// How long an ACK for received data may wait for an answer to ride on: none by default
    /// (ACK at once), which costs nothing where the answer is written in the pass that took
    /// the request in (the stack's own loop). Where answers lag the requests by task hops (an
    /// async runtime: the `stack` crate's tokio adapter sets 2 ms), a lone ACK would leave
    /// first, a frame and a TX kick of its own. smoltcp's delayed ACK, with a full segment's
    /// worth of data acknowledged at once (patch `ack-full-segment`), as is out-of-order data.
    pub ack_delay: Option<Duration>,
}

/// Builders: each sets one field and gives the config back, so a caller outside this
/// crate (where the struct is `#[non_exhaustive]`) writes `EngineConfig::default().with_max_conns(16)`.
impl EngineConfig {
    /// With `max_conns` set to `v`.
    pub fn with_max_conns(mut self, v: usize) -> Self {
        self.max_conns = v;
        self
    }

    /// With `buckets` set to `v`.
    pub fn with_buckets(mut self, v: usize) -> Self {
        self.buckets = v;
        self
    }

    /// With `rx_buffer` set to `v`.
    pub fn with_rx_buffer(mut self, v: usize) -> Self {
        self.rx_buffer = v;
        self
    }

    /// With `tx_buffer` set to `v`.
    pub fn with_tx_buffer(mut self, v: usize) -> Self {
        self.tx_buffer = v;
        self
    }

    /// With `initial_buffer` set to `v`.
    pub fn with_initial_buffer(mut self, v: usize) -> Self {
        self.initial_buffer = v;
        self
    }

    /// With `backlog` set to `v`.
    pub fn with_backlog(mut self, v: usize) -> Self {
        self.backlog = v;
        self
    }

    /// With `ephemeral` set to `v`.
    pub fn with_ephemeral(mut self, v: RangeInclusive<u16>) -> Self {
        self.ephemeral = v;
        self
    }

    /// With `keepalive` set to `v`.
    pub fn with_keepalive(mut self, v: Option<Duration>) -> Self {
        self.keepalive = v;
        self
    }

    /// With `timeout` set to `v`.
    pub fn with_timeout(mut self, v: Option<Duration>) -> Self {
        self.timeout = v;
        self
    }

    /// With `idle_timeout` set to `v`.
    pub fn with_idle_timeout(mut self, v: Option<Duration>) -> Self {
        self.idle_timeout = v;
        self
    }

    /// With `fin_timeout` set to `v`.
    pub fn with_fin_timeout(mut self, v: Duration) -> Self {
        self.fin_timeout = v;
        self
    }

    /// With `half_open_bytes` set to `v`.
    pub fn with_half_open_bytes(mut self, v: usize) -> Self {
        self.half_open_bytes = v;
        self
    }

    /// With `syn_cookies` set to `v`.
    pub fn with_syn_cookies(mut self, v: SynCookies) -> Self {
        self.syn_cookies = v;
        self
    }

    /// With `congestion` set to `v`.
    pub fn with_congestion(mut self, v: Congestion) -> Self {
        self.congestion = v;
        self
    }

    /// With `recovery` set to `v`.
    pub fn with_recovery(mut self, v: Recovery) -> Self {
        self.recovery = v;
        self
    }

    /// With `fast_path` set to `v`.
    pub fn with_fast_path(mut self, v: bool) -> Self {
        self.fast_path = v;
        self
    }

    /// With `ack_delay` set to `v`.
    pub fn with_ack_delay(mut self, v: Option<Duration>) -> Self {
        self.ack_delay = v;
        self
    }
}

/// What the engine sizes from these settings. The engine's own sizing calls these, and a tool
/// that bounds the stack's memory from its configuration calls them too, so the two cannot
/// drift apart.
impl EngineConfig {
    /// Socket buckets: `buckets` rounded up to a power of two, or one per 8 connections
    /// (16 to 8192) when it is 0.
    pub fn bucket_count(&self) -> usize {
        if self.buckets > 0 {
            self.buckets.next_power_of_two()
        } else {
            (self.max_conns / 8).clamp(16, 8192).next_power_of_two()
        }
    }

    /// Listening sockets each bucket keeps per listening port: the backlog spread over the
    /// buckets, at least one each (a SYN finds a listener in whichever bucket it lands).
    pub fn listeners_per_bucket(&self) -> usize {
        self.backlog.div_ceil(self.bucket_count()).max(1)
    }

    /// The receive and send buffers every socket starts with (`initial_buffer`, within the
    /// maxima); listening, half-open and pooled sockets keep them.
    pub fn initial_buffers(&self) -> (usize, usize) {
        let i = self.initial_buffer.max(1);
        (i.min(self.rx_buffer).max(1), i.min(self.tx_buffer).max(1))
    }

    /// Half-open connections the engine may hold: one SYN per connection it is sized for (a
    /// client opening all its connections at once), but no more than their socket buffers'
    /// share of `half_open_bytes`, so a SYN flood cannot grow memory past that (at least one).
    ///
    /// With SYN cookies, also at most half the connection limit: a half-open table that full
    /// is a flood (cookies from then on), while a limit reached mostly by established
    /// connections refuses SYNs at once.
    pub fn half_open_limit(&self) -> usize {
        let by_count = (self.backlog.max(256) * 4).max(self.max_conns);
        let (rx, tx) = self.initial_buffers();
        let limit = by_count.min(self.half_open_bytes / (rx + tx).max(1));
        let limit = if self.syn_cookies == SynCookies::Off { limit } else { limit.min(self.max_conns / 2) };
        limit.max(1)
    }

    /// Closed sockets kept for reuse at their initial size, at most.
    pub fn pool_max(&self) -> usize {
        self.max_conns
    }
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            max_conns: 1024,
            buckets: 0,
            rx_buffer: 64 * 1024,
            tx_buffer: 64 * 1024,
            initial_buffer: 4096,
            backlog: 256,
            ephemeral: 40000..=59999,
            keepalive: None,
            timeout: Some(Duration::from_secs(60)),
            idle_timeout: None,
            fin_timeout: Duration::from_secs(60),
            half_open_bytes: 64 << 20,
            syn_cookies: SynCookies::Auto,
            congestion: Congestion::Cubic,
            recovery: Recovery::default(),
            fast_path: true,
            ack_delay: None,
        }
    }
}

/// What an engine runs with: its TCP settings ([`EngineConfig`], in `tcp`) and where it sits
/// on the link, which the transport finds out when it opens.
#[derive(Clone, Debug)]
pub struct EngineSetup {
    /// The TCP settings.
    pub tcp: EngineConfig,
    /// Our MAC.
    pub mac: [u8; 6],
    /// Our address.
    pub addr: Ipv4Addr,
    /// Our subnet's prefix length.
    pub prefix_len: u8,
    /// Where off-link peers are reached, if anywhere.
    pub gateway: Option<Ipv4Addr>,
    /// Our IPv6 address, if the stack serves IPv6 too (one engine serves both families:
    /// a listener takes connections of either).
    pub addr6: Option<Ipv6Addr>,
    /// Its subnet's prefix length.
    pub prefix6_len: u8,
    /// Where off-link IPv6 peers are reached, if anywhere.
    pub gateway6: Option<Ipv6Addr>,
    /// Accept TCP checksums left partial by a local sender's offload.
    pub accept_partial_csum: bool,
    /// Seeds smoltcp's initial sequence numbers and the SYN-cookie key.
    pub seed: u64,
}

/// Counters of the engine.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
#[non_exhaustive]
pub struct EngineStats {
    /// Frames received (before any check).
    pub rx_frames: u64,
    /// Frames accepted with a partial TCP checksum (peer's offload, trusted link).
    pub rx_partial_csum: u64,
    /// Segments taken by the fast path (header prediction), not smoltcp's general one.
    pub fast_path: u64,
    /// Segments sent by the fast path (fast-send), not smoltcp's general one.
    pub fast_send: u64,
    /// Bucket egresses that were fast sends and sockets with nothing due: the scan
    /// after them and smoltcp's `poll_at` left out (fast-egress).
    pub fast_egress: u64,
    /// Answers sent when the application wrote them (`Engine::send_now`) whose bucket
    /// then needed no egress at all.
    pub sent_now: u64,
    /// Pure ACKs the fast path took that left their socket, alone in its bucket, with
    /// nothing to send or report: the bucket's deadline set at once, no egress for it.
    pub acks_quiet: u64,
    /// Frames not given to a socket, by reason.
    pub drops: DropStats,
    /// Retransmissions, tail-loss probes, and those found spurious.
    pub recovery: RecoveryStats,
    /// Times timer-driven retransmissions waited for frames in the receive
    /// queue to be read first (`Engine::set_receive_queue`).
    pub retransmit_waits: u64,
    /// Times a peer came to hold its ACKs by its connections' pooled probe
    /// verdicts, which raised the probe allowance of its live connections.
    pub peers_holding_acks: u64,
    /// Incoming connections accepted.
    pub accepted: u64,
    /// Outgoing connections established.
    pub connected: u64,
    /// SYNs answered with a SYN cookie (no socket kept).
    pub syn_cookies_sent: u64,
    /// Half-open connections rebuilt from a valid SYN cookie (then established).
    pub syn_cookies_accepted: u64,
    /// Connections whose MSS an ICMPv6 Packet Too Big or ICMP Fragmentation Needed
    /// lowered (path MTU discovery).
    pub path_mtu_lowered: u64,
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
