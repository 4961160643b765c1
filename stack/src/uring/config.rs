//! The io_uring backend's settings and counters.

use std::net::Ipv4Addr;

/// NAPI busy polling registered with the ring ([`UringConfig::busy_poll`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UringBusyPoll {
    /// How long a wait busy-polls the device's queue before it sleeps, in microseconds.
    pub usecs: u32,
    /// Prefer busy polling to interrupts (the device's NAPI defers its interrupts while the
    /// loop polls; with napi_defer_hard_irqs and gro_flush_timeout set on the device).
    pub prefer: bool,
}

/// Settings for [`UringTransport`](super::UringTransport).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct UringConfig {
    /// Local address for listeners and the source address of outgoing connections.
    /// `UNSPECIFIED` = all interfaces / let routing pick.
    pub bind: Ipv4Addr,
    /// `SO_REUSEPORT` on listeners, so several transports (one per thread) share a port.
    pub reuse_port: bool,
    /// Outgoing connections take their source address in turn from this many consecutive
    /// addresses starting at `bind` (as [`crate::KernelConfig::sources`]).
    pub sources: u32,
    /// Submission queue entries (the completion queue gets four times as many).
    pub entries: u32,
    /// Receive buffers in the provided-buffer ring (a power of two, at most 32768).
    pub recv_buffers: u16,
    /// Bytes per receive buffer.
    pub recv_buffer_size: u32,
    /// Received bytes one connection may hold unread before its receive is paused: they then
    /// move out of the shared buffer ring into the connection's own memory, and the socket's
    /// buffer and TCP's window hold the peer back. Per connection, so `recv_hold` times the
    /// connections that stop reading is what they can hold.
    pub recv_hold: usize,
    /// How long a connection the application closed may take to hand its last bytes to a
    /// peer that does not read them; then it is reset.
    pub close_linger: std::time::Duration,
    /// Bytes one connection may have queued by `send` and not yet taken by the kernel.
    pub send_buffer: usize,
    /// NAPI busy polling (Linux 6.9), off by default.
    pub busy_poll: Option<UringBusyPoll>,
    /// Ask for single-issuer and deferred task running (Linux 6.1); falls back without.
    pub defer_taskrun: bool,
}

impl Default for UringConfig {
    /// Loopback, as [`crate::KernelConfig`]'s default.
    fn default() -> Self {
        UringConfig {
            bind: Ipv4Addr::LOCALHOST,
            reuse_port: false,
            sources: 1,
            entries: 1024,
            recv_buffers: 4096,
            recv_buffer_size: 4096,
            recv_hold: 256 * 1024,
            close_linger: std::time::Duration::from_secs(60),
            send_buffer: 256 * 1024,
            busy_poll: None,
            defer_taskrun: true,
        }
    }
}

/// Builders, for callers outside this crate (the struct is `#[non_exhaustive]`).
impl UringConfig {
    /// With `bind` set to `v`.
    pub fn with_bind(mut self, v: Ipv4Addr) -> Self {
        self.bind = v;
        self
    }
    /// With `reuse_port` set to `v`.
    pub fn with_reuse_port(mut self, v: bool) -> Self {
        self.reuse_port = v;
        self
    }
    /// With `sources` set to `v`.
    pub fn with_sources(mut self, v: u32) -> Self {
        self.sources = v;
        self
    }
    /// With `entries` set to `v`.
    pub fn with_entries(mut self, v: u32) -> Self {
        self.entries = v;
        self
    }
    /// With `recv_buffers` and `recv_buffer_size` set.
    pub fn with_recv_buffers(mut self, count: u16, size: u32) -> Self {
        self.recv_buffers = count;
        self.recv_buffer_size = size;
        self
    }
    /// With `busy_poll` set to `v`.
    pub fn with_busy_poll(mut self, v: Option<UringBusyPoll>) -> Self {
        self.busy_poll = v;
        self
    }
    /// With `defer_taskrun` set to `v`.
    pub fn with_defer_taskrun(mut self, v: bool) -> Self {
        self.defer_taskrun = v;
        self
    }
}

/// Counters of the ring's work, for reports (system calls per request: `enters`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct UringStats {
    /// `io_uring_enter` calls: the backend's system calls on the request path.
    pub enters: u64,
    /// Completions taken.
    pub completions: u64,
    /// Sends submitted.
    pub sends: u64,
    /// Sends the socket's buffer cut short (each waited for POLLOUT).
    pub short_sends: u64,
    /// Multishot receives armed again (after the buffer ring ran dry, a pause or a stop).
    pub recv_rearms: u64,
    /// Receives that found the buffer ring empty.
    pub no_buffers: u64,
}

