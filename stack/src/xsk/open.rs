//! Opening the driver: the interface's address and MTU, the ports (and the
//! steering program with them), the engine's configuration, and the
//! timer for its waits, one `XskTransport` per queue.

use std::sync::Arc;

use stack_engine::smoltcp::time::Instant as SmolInstant;
use xsk_device::steer::SteerFlags;
use xsk_device::{DeviceError, Iface, SteerSpec};
use xsk_io::port::Port;

use super::acks::DeferredAcks;
use super::port_placeholders::PortPlaceholders;
use super::device::Device;
use stack_engine::{Engine, EngineSetup};
use stack_engine::faults::FaultState;
use super::park::Park;
use super::stages::Stages;
use super::arp::{self, SharedArp};
use super::{Addr6Mode, AddrMode, XskConfig, XskError, XskTransport};

/// What would otherwise start without a word and then serve nothing: the loopback
/// interface (refused: no client's frames pass its XDP hook), an interface that is down
/// or has no carrier, and a dedicated address the kernel has too (warnings).
fn startup_checks(ifname: &str, addr: &AddrMode) -> Result<(), XskError> {
    let flags = xsk_device::ifaddr::flags(ifname).map_err(|e| XskError::Iface(ifname.to_string(), e.to_string()))?;
    if flags & libc::IFF_LOOPBACK != 0 {
        return Err(XskError::Iface(
            ifname.to_string(),
            "is the loopback interface: local clients never pass an XDP hook, so the stack would serve no one \
             (use the interface clients reach, `ip route get CLIENT_ADDR` names it; local clients: --backend kernel)"
                .into(),
        ));
    }
    if flags & libc::IFF_UP == 0 {
        tracing::warn!("{ifname} is down: no frame arrives until `ip link set {ifname} up`");
    } else if xsk_device::ifaddr::carrier(ifname) == Some(false) {
        tracing::warn!("{ifname} is up but has no carrier (cable, peer or host side down): no frame arrives until it has");
    }
    if let AddrMode::Dedicated { addr, .. } = addr {
        let owners = xsk_device::ifaddr::owners_of(*addr);
        if !owners.is_empty() {
            tracing::warn!(
                "dedicated address {addr} is also the kernel's (on {}): the stack takes its ARP, ping and TCP on {ifname}, \
                 so the kernel's own use of it breaks; give the stack an address the kernel does not have, or share \
                 the kernel's (rr-server: --addr shared)",
                owners.join(", ")
            );
        }
    }
    Ok(())
}

impl XskTransport {
    /// One transport on `cfg.port.queue`.
    pub fn new(cfg: XskConfig) -> Result<XskTransport, XskError> {
        let mut v = Self::open(cfg, false)?;
        Ok(v.pop().expect("one port opened"))
    }

    /// One transport per RX queue of the interface, sharing the address and
    /// the steering program: run each on its own thread (one shard per
    /// queue). The NIC's RSS decides which shard a flow lands on, so this
    /// suits servers; a shard's outgoing connections only work where the
    /// replies hash back to its queue.
    pub fn shards(cfg: XskConfig) -> Result<Vec<XskTransport>, XskError> {
        Self::open(cfg, true)
    }

    fn open(cfg: XskConfig, all_queues: bool) -> Result<Vec<XskTransport>, XskError> {
        let ifname = cfg.port.ifname.clone();
        let iferr = |e: std::io::Error| XskError::Iface(ifname.clone(), e.to_string());
        let mac = xsk_device::ifaddr::mac(&ifname).map_err(iferr)?;
        let mtu = xsk_device::ifaddr::mtu(&ifname).map_err(iferr)? as usize;
        let (addr, prefix_len, flags) = match &cfg.addr {
            AddrMode::Shared => {
                let (a, p) = xsk_device::ifaddr::ipv4(&ifname).map_err(iferr)?.ok_or_else(|| {
                    XskError::Iface(ifname.clone(), "has no IPv4 address to share (use a dedicated address)".into())
                })?;
                (a, p, SteerFlags::NONE)
            }
            AddrMode::Dedicated { addr, prefix_len } => (*addr, *prefix_len, SteerFlags::ARP | SteerFlags::ICMP),
        };
        startup_checks(&ifname, &cfg.addr)?;
        let addr6 = match (&cfg.addr, &cfg.addr6) {
            (_, Addr6Mode::Off) | (AddrMode::Dedicated { .. }, Addr6Mode::Auto) => None,
            (AddrMode::Shared, Addr6Mode::Auto) => xsk_device::ifaddr::ipv6(&ifname).map_err(iferr)?,
            (AddrMode::Dedicated { .. }, Addr6Mode::Dedicated { addr, prefix_len }) => Some((*addr, *prefix_len)),
            (AddrMode::Shared, Addr6Mode::Dedicated { .. }) => {
                return Err(XskError::Iface(
                    ifname.clone(),
                    "a dedicated IPv6 address needs a dedicated IPv4 one (shared mode shares the kernel's IPv6 address, \
                     if the interface has one)"
                        .into(),
                ))
            }
        };
        if let Some((a, p)) = addr6 {
            tracing::info!("{ifname}: IPv6 {a}/{p} too ({})", if flags.is_empty() { "the kernel's" } else { "dedicated" });
        }
        let mut pcfg = cfg.port.clone();
        pcfg.steer = Some(SteerSpec::new(addr).with_flags(flags).with_addr6(addr6.map(|(a, _)| a)));
        let (iface, ports) = if all_queues {
            Iface::open_all(&pcfg)?
        } else {
            Iface::open(&pcfg).map(|(iface, port)| (iface, vec![port]))?
        };
        ports[0].log_features();
        {
            let (r, u) = (&cfg.port.rings, &cfg.port.umem);
            let umem = u64::from(u.frame_count) * u64::from(u.frame_size);
            let need = r.frames_needed(0);
            tracing::info!(
                "{ifname}: per port: rings fill {} rx {} tx {} completion {} ({} KiB), UMEM {} frames x {} B = {} MiB{}, \
                 TX reserve {}, SYN shedding {}; {} port(s): {} MiB",
                r.fill,
                r.rx,
                r.tx,
                r.comp,
                r.ring_bytes() >> 10,
                u.frame_count,
                u.frame_size,
                umem >> 20,
                if u.frame_count >= need {
                    format!(" (fill+rx+tx need {need})")
                } else {
                    format!(" (FEWER than fill+rx+tx = {need}: the fill ring can run short in a burst)")
                },
                ports[0].tx_reserve(),
                ports[0].shed_keep().map_or("off".to_string(), |k| format!("on, keeping {k} places")),
                ports.len(),
                (ports.len() as u64 * (umem + r.ring_bytes())) >> 20,
            );
        }
        let port_placeholders = match cfg.addr {
            // The kernel has the address too: take ports one by one.
            AddrMode::Shared => Some(PortPlaceholders::new(addr, addr6.map(|(a, _)| a))),
            // Nobody else has the address: steer the whole ephemeral range.
            AddrMode::Dedicated { .. } => {
                if let Some(steer) = iface.steer() {
                    steer.add_tcp_port_range(cfg.engine.ephemeral.clone()).map_err(DeviceError::from)?;
                }
                None
            }
        };
        let driver = ports[0].features().driver.clone();
        let accept_partial = cfg.partial_csum.accept_on(&driver);
        tracing::info!(
            "{ifname} ({}): TCP segments with partial checksums (a local sender's TX checksum offload) are {}",
            if driver.is_empty() { "unknown driver" } else { &driver },
            if accept_partial {
                "accepted: the frames cross memory, not a wire"
            } else {
                "refused and counted as bad_checksum (the link is not trusted for them)"
            }
        );
        let gateway = match (cfg.gateway, &cfg.addr) {
            (Some(g), _) => Some(g),
            // Shared mode follows the kernel's routing: its default route.
            (None, AddrMode::Shared) => arp::kernel_default_gateway(&ifname),
            (None, AddrMode::Dedicated { .. }) => None,
        };
        if let Some(g) = gateway {
            tracing::info!("{ifname}: off-link peers through gateway {g}");
        }
        let gateway6 = match (cfg.gateway6, &cfg.addr) {
            _ if addr6.is_none() => None,
            (Some(g), _) => Some(g),
            (None, AddrMode::Shared) => arp::kernel_default_gateway6(&ifname),
            (None, AddrMode::Dedicated { .. }) => None,
        };
        if let Some(g) = gateway6 {
            tracing::info!("{ifname}: off-link IPv6 peers through gateway {g}");
        }
        let ecfg = EngineSetup {
            tcp: cfg.engine.clone(),
            mac,
            addr,
            prefix_len,
            gateway,
            addr6: addr6.map(|(a, _)| a),
            prefix6_len: addr6.map_or(0, |(_, p)| p),
            gateway6,
            accept_partial_csum: accept_partial,
            seed: seed(),
        };
        ports
            .into_iter()
            .map(|port| Self::with_port(cfg.clone(), ecfg.clone(), port, iface.clone(), mtu, port_placeholders.clone()))
            .collect()
    }

    fn with_port(
        cfg: XskConfig,
        mut ecfg: EngineSetup,
        mut port: Port,
        iface: Arc<Iface>,
        mtu: usize,
        port_placeholders: Option<Arc<PortPlaceholders>>,
    ) -> Result<XskTransport, XskError> {
        let ifname = cfg.port.ifname.clone();
        let iferr = |e: std::io::Error| XskError::Iface(ifname.clone(), e.to_string());
        let shared = cfg.addr == AddrMode::Shared;
        ecfg.seed ^= port.features().queue as u64;
        let epoch_ns = xsk_io::sys::monotonic_ns();
        let timer = crate::timer::WaitTimer::new().map_err(iferr)?;
        let queue = port.features().queue;
        let acks = if cfg.defer_acks && !cfg.faults.any() {
            program_part(iface.steer().map(|s| s.ack_ring(queue)), &ifname, "deferred ACKs")
                .map(|ring| DeferredAcks::new(ring, port.rx_ready(), port.rx_lost()))
        } else {
            None
        };
        let deferring = acks.is_some();
        // Both modes learn peers from the frames they receive (with several
        // shards, an ARP exchange may land on another shard's queue).
        let arp = SharedArp::new(&ifname, shared, ecfg.addr6.is_some());
        let faults = cfg.faults.any().then(|| FaultState::new(cfg.faults));
        let mut dev = Device::new(port, iface, mtu, arp, faults, acks, cfg.rx_batch);
        let mut engine = Engine::new(ecfg, SmolInstant::from_micros(0), &mut dev.link());
        if deferring {
            engine.track_acks();
        }
        let port = &dev.port;
        let native = dev.iface.steer().is_some_and(|s| s.mode() == xsk_io::AttachMode::Drv);
        let xdp_cookies = if cfg.xdp_syn_cookies.use_on(&port.features().driver, native)
            && cfg.engine.syn_cookies != super::SynCookies::Off
            && !cfg.faults.any()
        {
            let params = cookie_params(&engine, mtu, epoch_ns);
            program_part(dev.iface.steer().map(|s| s.cookie_slot(queue, &params)), &ifname, "SYN cookies in XDP")
        } else {
            None
        };
        tracing::info!(
            "xsk stack on {ifname}: {}/{} ({}), {} socket buckets, buffers {}+{} bytes at most ({} to start), at most {} connections, deferred ACKs {}, SYN cookies {:?}{}",
            engine.addr(),
            engine.rules().prefix_len,
            if shared { "shared with the kernel" } else { "dedicated" },
            engine.buckets(),
            cfg.engine.rx_buffer,
            cfg.engine.tx_buffer,
            cfg.engine.initial_buffer.min(cfg.engine.rx_buffer.max(cfg.engine.tx_buffer)),
            cfg.engine.max_conns,
            if deferring { "on" } else { "off" },
            cfg.engine.syn_cookies,
            if xdp_cookies.is_some() { " (answered in XDP while in use)" } else { "" },
        );
        Ok(XskTransport {
            engine,
            resolved: Vec::new(),
            epoch_ns,
            port_placeholders,
            park: Park::new(timer, xdp_cookies, &dev),
            dev,
            stages: cfg.stage_times.then(Stages::default),
        })
    }

}

fn seed() -> u64 {
    let mut b = [0u8; 8];
    if let Ok(mut f) = std::fs::File::open("/dev/urandom") {
        use std::io::Read;
        let _ = f.read_exact(&mut b);
    }
    u64::from_ne_bytes(b) ^ (std::process::id() as u64) << 32
}

/// What the XDP program needs to answer SYNs as `engine` does over a link
/// of `mtu`, on the engine's clock (time 0 at `epoch_ns`).
pub(crate) fn cookie_params(engine: &Engine, mtu: usize, epoch_ns: u64) -> xsk_io::syncookies::CookieParams {
    let t = engine.cookie_template(mtu);
    xsk_io::syncookies::CookieParams {
        k0: t.k0,
        k1: t.k1,
        epoch_ns,
        mss: t.mss,
        window: t.window,
        window_shift: t.window_shift,
        mac: t.mac,
        addr: t.addr,
        prefix_len: t.prefix_len,
        accept_partial: t.accept_partial,
        addr6: t.addr6,
    }
}

/// A part of the steering program set up for a queue: `None` without a
/// program, or with one that lacks the part (an older kernel: attach said
/// why), or when setting it up failed (said here, once per port).
fn program_part<T>(r: Option<Result<Option<T>, xsk_device::steer::SteerError>>, ifname: &str, what: &str) -> Option<T> {
    match r {
        Some(Ok(part)) => part,
        None => None,
        Some(Err(e)) => {
            tracing::warn!("{ifname}: {what} off: {e}");
            None
        }
    }
}
