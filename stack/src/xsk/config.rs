//! What an `XskTransport` is configured with, and its errors.

use std::net::{Ipv4Addr, Ipv6Addr};

use xsk_device::{DeviceError, PortConfig};

use stack_engine::EngineConfig;
use stack_engine::Faults;

/// Which IPv4 address the stack uses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AddrMode {
    /// The address the kernel already has on the interface. Only the ports
    /// the stack uses (its listening ports and the local ports of its live
    /// connections, each held in the kernel by a placeholder socket while in
    /// use) are steered to it; ARP and every other port stay with the kernel.
    Shared,
    /// An address the kernel does not have; the stack answers ARP and ping for it.
    Dedicated {
        /// The stack's address.
        addr: Ipv4Addr,
        /// Its subnet's prefix length (on-link peers).
        prefix_len: u8,
    },
}

/// Which IPv6 address the stack uses beside its IPv4 one. One engine serves both
/// families: a listener takes connections over either.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Addr6Mode {
    /// Shared mode: the kernel's global IPv6 address on the interface, if it has one
    /// (its TCP on the stack's ports is steered; neighbour discovery stays with the
    /// kernel). Dedicated mode: none.
    #[default]
    Auto,
    /// No IPv6: all of it stays with the kernel.
    Off,
    /// An address the kernel does not have (dedicated mode only): the stack answers
    /// neighbour solicitations and ping for it.
    Dedicated {
        /// The stack's IPv6 address.
        addr: Ipv6Addr,
        /// Its subnet's prefix length (on-link peers).
        prefix_len: u8,
    },
}

/// What to do with TCP segments whose checksum a local sender left partial
/// (TX checksum offload: the field holds only the pseudo-header sum).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PartialCsum {
    /// Accept them on links where a frame cannot be corrupted between the
    /// sender's stack and ours (veth, virtio_net: memory, not a wire), refuse
    /// them elsewhere.
    Auto,
    /// Accept them on any link.
    Accept,
    /// Refuse them (counted as `bad_checksum`).
    Reject,
}

impl PartialCsum {
    /// Whether partial checksums are accepted on a device run by `driver`.
    pub fn accept_on(self, driver: &str) -> bool {
        match self {
            PartialCsum::Accept => true,
            PartialCsum::Reject => false,
            PartialCsum::Auto => matches!(driver, "veth" | "virtio_net" | "tun"),
        }
    }
}

/// Whether the XDP program answers SYNs with the stack's cookies while the
/// stack uses cookies (see `xsk_io::syncookies`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum XdpCookies {
    /// Where native XDP_TX is known to reach the peer: virtio_net, and any
    /// device in skb mode (XDP_TX then goes through its transmit path); not
    /// on veth in native mode, which sends XDP_TX into its peer only while
    /// the peer runs an XDP program of its own.
    #[default]
    Auto,
    /// Wherever the program can (on a veth, give the peer an XDP program).
    /// A device that counts XDP_TX errors for the program's SYN-ACKs turns
    /// it off again, said once.
    On,
    /// Never: the stack answers every SYN.
    Off,
}

impl XdpCookies {
    /// Whether to use them on a device run by `driver` with XDP attached
    /// natively (`native`) or in skb mode.
    pub fn use_on(self, driver: &str, native: bool) -> bool {
        match self {
            XdpCookies::On => true,
            XdpCookies::Off => false,
            XdpCookies::Auto => !(native && driver == "veth"),
        }
    }
}

/// What an [`XskTransport`](super::XskTransport) is configured with; [`XskConfig::new`] gives the defaults.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct XskConfig {
    /// The AF_XDP port: interface, queue, rings, UMEM, attach mode, busy polling, tuning.
    pub port: PortConfig,
    /// The stack's IPv4 address: shared with the kernel or its own.
    pub addr: AddrMode,
    /// Its IPv6 address, if any: the kernel's in shared mode, or its own.
    pub addr6: Addr6Mode,
    /// Router for off-link peers; in shared mode the kernel's default route when unset.
    pub gateway: Option<Ipv4Addr>,
    /// Router for off-link IPv6 peers (on the IPv6 subnet); in shared mode the kernel's
    /// IPv6 default route through the interface when unset.
    pub gateway6: Option<Ipv6Addr>,
    /// The TCP engine: limits, buffers, timers, SYN cookies, congestion control, recovery.
    pub engine: EngineConfig,
    /// Let the XDP program answer SYNs to listening ports with the stack's
    /// own cookies while the stack uses cookies (see `xsk_io::syncookies`):
    /// a flood's SYNs then take no frame of the rings and none of the
    /// stack's time. Needs a kernel that loads the program with deferred
    /// ACKs; off with fault injection.
    pub xdp_syn_cookies: XdpCookies,
    /// Partial TCP checksums (a local sender's checksum offload).
    pub partial_csum: PartialCsum,
    /// Time the transport's stages per request (`StackStats::stages`: RX ring, engine,
    /// application, egress, the kernel's send, waiting): a diagnostic, off by default; it
    /// reads the clock about ten times per request.
    pub stage_times: bool,
    /// Frames taken from the RX ring per loop iteration at most.
    pub rx_batch: usize,
    /// Let the peers' pure ACKs wait, while the stack sleeps and no socket
    /// needs them promptly, in a ring the XDP program fills without waking
    /// it (see `xsk_io::acks`); on by default where the kernel can load that
    /// program, off with fault injection.
    pub defer_acks: bool,
    /// Fault injection (tests): off by default.
    pub faults: Faults,
}

impl XskConfig {
    /// The defaults for `ifname` with address mode `addr`.
    pub fn new(ifname: &str, addr: AddrMode) -> XskConfig {
        let mut port = PortConfig::new(ifname);
        // Room for a burst of requests from thousands of connections: a
        // 4096-entry RX ring with a fill ring twice as large, TX keeps 2048;
        // frames for all of them at once and two receive batches.
        port.rings = xsk_io::socket::RingSizes::for_bursts(4096, 2048);
        port.umem.frame_count = port.rings.frames_needed(256);
        // SYN shedding in XDP (xsk_io::shed) is opt-in: under a SYN flood at
        // a raw socket's full rate it bounds an open connection's wait, but
        // it cannot tell a flood from a burst of real clients, whose SYNs it
        // then sheds (each retried a second later); with engine SYN cookies
        // in place, connection storms of real clients ran far slower with it
        // than without (docs/2026-12-02-storms).
        port.syn_shed = xsk_io::port::Setting::Off;
        XskConfig {
            port,
            addr,
            addr6: Addr6Mode::Auto,
            gateway: None,
            gateway6: None,
            engine: EngineConfig::default(),
            xdp_syn_cookies: XdpCookies::Auto,
            partial_csum: PartialCsum::Auto,
            stage_times: false,
            rx_batch: 128,
            defer_acks: true,
            faults: Faults::default(),
        }
    }
}

/// Why an [`XskTransport`](super::XskTransport) could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum XskError {
    /// The AF_XDP port (socket, UMEM, XDP program, steering, device tuning).
    #[error(transparent)]
    Port(#[from] DeviceError),
    /// The interface: missing, or without what the mode needs (name, reason).
    #[error("interface {0}: {1}")]
    Iface(String, String),
    /// Shared mode: a kernel socket has the port (port, address).
    #[error("port {0} is in use by a kernel socket on {1} (shared-address mode cannot take it)")]
    PortInUse(u16, Ipv4Addr),
}

