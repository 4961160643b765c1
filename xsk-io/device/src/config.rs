//! How a port is opened and its interface prepared: [`PortConfig`] and its
//! parts. Its own module, so that the interface ([`crate::iface`]) and the
//! opening (`open.rs`) both read it and neither imports the other for it.

use std::net::{Ipv4Addr, Ipv6Addr};

use xsk_io::port::{BusyPoll, QueueConfig, Setting};
use xsk_io::socket::RingSizes;
use xsk_io::umem::UmemConfig;

use crate::steer::SteerFlags;
use crate::AttachMode;

/// Which flows the XDP program hands to the port.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct SteerSpec {
    /// Destination address of steered frames (`0.0.0.0`: any).
    pub addr: Ipv4Addr,
    /// TCP destination ports steered from the start (more can be added
    /// later through [`Steer::add_tcp_port`](crate::steer::Steer::add_tcp_port)).
    pub tcp_ports: Vec<u16>,
    /// ARP for `addr` (dedicated-address mode), ICMP to `addr`.
    pub flags: SteerFlags,
    /// IPv6 steered too, to this address (`::`: any), with the same TCP ports and
    /// flags (ICMP: neighbour discovery and the rest of a dedicated address); `None`:
    /// IPv6 is the kernel's.
    pub addr6: Option<Ipv6Addr>,
}

/// Builders: each sets one field and gives the config back, so a caller outside this
/// crate (where the struct is `#[non_exhaustive]`) writes `SteerSpec::new(addr).with_tcp_ports(vec![80])`.
impl SteerSpec {
    /// Frames to `addr` (`0.0.0.0`: any), no TCP port yet, no ARP or ICMP.
    pub fn new(addr: Ipv4Addr) -> SteerSpec {
        SteerSpec { addr, tcp_ports: Vec::new(), flags: SteerFlags::default(), addr6: None }
    }

    /// With `addr` set to `v`.
    pub fn with_addr(mut self, v: Ipv4Addr) -> Self {
        self.addr = v;
        self
    }

    /// With `tcp_ports` set to `v`.
    pub fn with_tcp_ports(mut self, v: Vec<u16>) -> Self {
        self.tcp_ports = v;
        self
    }

    /// With `flags` set to `v`.
    pub fn with_flags(mut self, v: SteerFlags) -> Self {
        self.flags = v;
        self
    }

    /// With `addr6` set to `v`.
    pub fn with_addr6(mut self, v: Option<Ipv6Addr>) -> Self {
        self.addr6 = v;
        self
    }
}

/// How to open a port (and prepare its interface). [`PortConfig::new`] gives
/// the defaults: queue 0, 4096 frames of 4 KiB, 2048-entry rings, attach
/// mode `Auto`, no steering program, both TX options `Auto`, no busy polling,
/// tuning on.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct PortConfig {
    /// The interface, in the calling thread's network namespace.
    pub ifname: String,
    /// The queue to bind ([`Iface::open`](crate::Iface::open); [`Iface::open_all`](crate::Iface::open_all) binds every queue).
    pub queue: u32,
    /// Size of the UMEM (one per port).
    pub umem: UmemConfig,
    /// Ring sizes.
    pub rings: RingSizes,
    /// Where the steering program runs; `Auto` lets the tuning decide.
    pub attach: AttachMode,
    /// None: bind the socket but attach no program (TX-only use).
    pub steer: Option<SteerSpec>,
    /// [`XDP_MAX_TX_SKB_BUDGET`](xsk_io::sys::XDP_MAX_TX_SKB_BUDGET), in
    /// descriptors per `sendto`; `Auto` = the TX ring size (a ring below 32
    /// keeps the kernel default). The kernel allows 32 to the TX ring size.
    pub tx_budget: Setting,
    /// [`XDP_GENERIC_XMIT_BATCH`](xsk_io::sys::XDP_GENERIC_XMIT_BATCH), in
    /// frames per TX queue lock; `Auto` = 32, never above the budget.
    pub xmit_batch: Setting,
    /// Busy polling; None (the default) is off.
    pub busy_poll: Option<BusyPoll>,
    /// Ask for TX checksum offload through AF_XDP TX metadata (Linux 6.8+;
    /// [`Features::tx_csum`](xsk_io::port::Features::tx_csum) says whether the kernel took it). On by default.
    pub tx_csum: bool,
    /// Prepare the device (offloads, channels); false = check only.
    pub tune: bool,
    /// SYN shedding in the steering program (see [`xsk_io::shed`]): `Off`
    /// (the default here), `Auto` (keep an eighth of the RX ring for open
    /// connections, [`xsk_io::shed::default_keep`]) or `Value(keep)`. Needs
    /// the program variant with deferred ACKs; without it the port says so
    /// once and runs without.
    pub syn_shed: Setting,
}

/// Builders: each sets one field and gives the config back, so a caller outside this
/// crate (where the struct is `#[non_exhaustive]`) writes `PortConfig::new("eth1").with_queue(1)`.
impl PortConfig {
    /// With `ifname` set to `v`.
    pub fn with_ifname(mut self, v: String) -> Self {
        self.ifname = v;
        self
    }

    /// With `queue` set to `v`.
    pub fn with_queue(mut self, v: u32) -> Self {
        self.queue = v;
        self
    }

    /// With `umem` set to `v`.
    pub fn with_umem(mut self, v: UmemConfig) -> Self {
        self.umem = v;
        self
    }

    /// With `rings` set to `v`.
    pub fn with_rings(mut self, v: RingSizes) -> Self {
        self.rings = v;
        self
    }

    /// With `attach` set to `v`.
    pub fn with_attach(mut self, v: AttachMode) -> Self {
        self.attach = v;
        self
    }

    /// With `steer` set to `v`.
    pub fn with_steer(mut self, v: Option<SteerSpec>) -> Self {
        self.steer = v;
        self
    }

    /// With `tx_budget` set to `v`.
    pub fn with_tx_budget(mut self, v: Setting) -> Self {
        self.tx_budget = v;
        self
    }

    /// With `xmit_batch` set to `v`.
    pub fn with_xmit_batch(mut self, v: Setting) -> Self {
        self.xmit_batch = v;
        self
    }

    /// With `busy_poll` set to `v`.
    pub fn with_busy_poll(mut self, v: Option<BusyPoll>) -> Self {
        self.busy_poll = v;
        self
    }

    /// With `tx_csum` set to `v`.
    pub fn with_tx_csum(mut self, v: bool) -> Self {
        self.tx_csum = v;
        self
    }

    /// With `tune` set to `v`.
    pub fn with_tune(mut self, v: bool) -> Self {
        self.tune = v;
        self
    }

    /// With `syn_shed` set to `v`.
    pub fn with_syn_shed(mut self, v: Setting) -> Self {
        self.syn_shed = v;
        self
    }
}

impl PortConfig {
    /// The socket's part of the config, for [`xsk_io::port::Port::bind`].
    pub fn queue_config(&self) -> QueueConfig {
        QueueConfig {
            umem: self.umem,
            rings: self.rings,
            tx_budget: self.tx_budget,
            xmit_batch: self.xmit_batch,
            busy_poll: self.busy_poll,
            tx_csum: self.tx_csum,
        }
    }

    /// The defaults (see the type) for `ifname`.
    pub fn new(ifname: &str) -> PortConfig {
        PortConfig {
            ifname: ifname.to_string(),
            queue: 0,
            umem: UmemConfig::default(),
            rings: RingSizes::default(),
            attach: AttachMode::Auto,
            steer: None,
            tx_budget: Setting::Auto,
            xmit_batch: Setting::Auto,
            busy_poll: None,
            tx_csum: true,
            tune: true,
            syn_shed: Setting::Off,
        }
    }
}

