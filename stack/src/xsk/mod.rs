//! The AF_XDP backend: smoltcp's TCP over an `xsk_io::Port`, behind the same
//! [`Transport`] trait as the kernel backend.
//!
//! Data flows one way per direction: RX ring -> port -> [`engine::Engine`]
//! (checks, demux, smoltcp, sockets) -> events -> application, and back
//! through the engine's [`engine::Link`] (`device`) to the TX ring. The
//! engine does no I/O and reads no clock; this module is its driver: it owns
//! the port, the epoll/timer wait, neighbour resolution from the kernel's
//! table, the ports claimed from the kernel, and fault injection. One
//! `XskTransport` is one single-threaded shard bound to one RX queue.

mod claims;
mod config;
mod demux;
mod device;
pub mod drops;
pub mod engine;
pub mod faults;
mod neigh;
pub mod testing;

pub use config::{AddrMode, Congestion, PartialCsum, XskConfig, XskError};
pub use device::DeviceStats;
pub use drops::{DropReason, DropStats};
pub use engine::EngineStats;

use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use smoltcp::time::Instant as SmolInstant;
use xsk_io::port::{Port, PortError, PortStats, SteerSpec};
use xsk_io::steer::SteerFlags;
use xsk_io::umem::Frame;

use crate::transport::{ConnId, Event, ListenerId, Transport, TransportError};
use claims::Claims;
use device::DevState;
use engine::{Engine, EngineConfig, PortChange};
use faults::{FaultState, RxFate};
use neigh::Neighbours;

fn backend_err(e: impl std::error::Error + Send + Sync + 'static) -> TransportError {
    TransportError::Backend { backend: "xsk", source: Box::new(e) }
}

/// Counters of the stack: the engine's, the device's and the port's.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct StackStats {
    #[serde(flatten)]
    pub engine: EngineStats,
    pub device: DeviceStats,
    pub port: PortStats,
}

impl std::ops::Deref for StackStats {
    type Target = EngineStats;
    fn deref(&self) -> &EngineStats {
        &self.engine
    }
}

pub struct XskTransport {
    port: Port,
    engine: Engine,
    dev: DevState,
    neigh: Neighbours,
    resolved: Vec<(Ipv4Addr, [u8; 6])>,
    rx_batch: Vec<Frame>,
    poll: mio::Poll,
    mio_events: mio::Events,
    epoch: std::time::Instant,
    /// Shared-address mode: the ports held from the kernel.
    claims: Option<Arc<Claims>>,
    /// A frame held back by reorder injection.
    delayed: Option<Frame>,
    /// Wakes epoll for sub-millisecond waits (smoltcp timers, open-loop pacing).
    timer: crate::timer::PreciseTimer,
    cfg: XskConfig,
}

const XSK_TOKEN: mio::Token = mio::Token(0);
const TIMER_TOKEN: mio::Token = mio::Token(1);

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
        let mac = xsk_io::ifaddr::mac(&ifname).map_err(iferr)?;
        let mtu = xsk_io::ifaddr::mtu(&ifname).map_err(iferr)? as usize;
        let (addr, prefix_len, flags) = match &cfg.addr {
            AddrMode::Shared => {
                let (a, p) = xsk_io::ifaddr::ipv4(&ifname).map_err(iferr)?.ok_or_else(|| {
                    XskError::Iface(ifname.clone(), "has no IPv4 address to share (use a dedicated address)".into())
                })?;
                (a, p, SteerFlags::NONE)
            }
            AddrMode::Dedicated { addr, prefix_len } => (*addr, *prefix_len, SteerFlags::ARP | SteerFlags::ICMP),
        };
        let mut pcfg = cfg.port.clone();
        pcfg.steer = Some(SteerSpec { addr, tcp_ports: Vec::new(), flags });
        let ports = if all_queues { Port::open_all(&pcfg)? } else { vec![Port::open(&pcfg)?] };
        ports[0].log_features();
        let claims = match cfg.addr {
            // The kernel has the address too: take ports one by one.
            AddrMode::Shared => Some(Claims::new(addr)),
            // Nobody else has the address: steer the whole ephemeral range.
            AddrMode::Dedicated { .. } => {
                if let Some(steer) = ports[0].steer() {
                    steer.add_tcp_port_range(cfg.ephemeral.clone()).map_err(PortError::from)?;
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
            (None, AddrMode::Shared) => neigh::kernel_default_gateway(&ifname),
            (None, AddrMode::Dedicated { .. }) => None,
        };
        if let Some(g) = gateway {
            tracing::info!("{ifname}: off-link peers through gateway {g}");
        }
        let ecfg = EngineConfig {
            mac,
            addr,
            prefix_len,
            gateway,
            max_conns: cfg.max_conns,
            buckets: cfg.buckets,
            rx_buffer: cfg.rx_buffer,
            tx_buffer: cfg.tx_buffer,
            backlog: cfg.backlog,
            ephemeral: cfg.ephemeral.clone(),
            keepalive: cfg.keepalive,
            timeout: cfg.timeout,
            idle_timeout: cfg.idle_timeout,
            fin_timeout: cfg.fin_timeout,
            half_open_bytes: cfg.half_open_bytes,
            congestion: cfg.congestion,
            accept_partial_csum: accept_partial,
            seed: seed(),
        };
        ports
            .into_iter()
            .map(|port| Self::with_port(cfg.clone(), ecfg.clone(), port, mtu, claims.clone()))
            .collect()
    }

    fn with_port(
        cfg: XskConfig,
        mut ecfg: EngineConfig,
        mut port: Port,
        mtu: usize,
        claims: Option<Arc<Claims>>,
    ) -> Result<XskTransport, XskError> {
        let ifname = cfg.port.ifname.clone();
        let iferr = |e: std::io::Error| XskError::Iface(ifname.clone(), e.to_string());
        let shared = cfg.addr == AddrMode::Shared;
        let mut dev = DevState::new(mtu, shared, cfg.faults.any().then(|| FaultState::new(cfg.faults)));
        ecfg.seed ^= port.features().queue as u64;
        let epoch = std::time::Instant::now();
        let engine = {
            let (mut link, _) = dev.link(&mut port);
            Engine::new(ecfg, SmolInstant::from_micros(0), &mut link)
        };
        let poll = mio::Poll::new().map_err(iferr)?;
        poll.registry().register(&mut port, XSK_TOKEN, mio::Interest::READABLE).map_err(iferr)?;
        let timer = crate::timer::PreciseTimer::new().map_err(iferr)?;
        timer.register(poll.registry(), TIMER_TOKEN).map_err(iferr)?;
        tracing::info!(
            "xsk stack on {ifname}: {}/{} ({}), {} socket buckets, buffers {}+{} bytes, at most {} connections",
            engine.addr(),
            engine.rules().prefix_len,
            if shared { "shared with the kernel" } else { "dedicated" },
            engine.buckets(),
            cfg.rx_buffer,
            cfg.tx_buffer,
            cfg.max_conns,
        );
        Ok(XskTransport {
            port,
            engine,
            dev,
            // Both modes learn peers from the frames they receive (with
            // several shards, an ARP exchange may land on another shard's queue).
            neigh: Neighbours::new(&ifname),
            resolved: Vec::new(),
            rx_batch: Vec::with_capacity(cfg.rx_batch),
            poll,
            mio_events: mio::Events::with_capacity(4),
            epoch,
            claims,
            delayed: None,
            timer,
            cfg,
        })
    }

    pub fn addr(&self) -> Ipv4Addr {
        self.engine.addr()
    }

    pub fn port(&self) -> &Port {
        &self.port
    }

    pub fn stats(&self) -> StackStats {
        let mut engine = self.engine.stats();
        if let Some(f) = &self.dev.faults {
            engine.drops.injected = f.rx_dropped;
        }
        StackStats { engine, device: self.dev.stats, port: self.port.stats() }
    }

    /// Listening sockets waiting for a SYN, over all buckets.
    pub fn listening_sockets(&self) -> usize {
        self.engine.stats().listening
    }

    /// Frame accounting of the underlying port (see `Port::audit`).
    pub fn audit(&mut self) -> Result<xsk_io::port::Accounting, String> {
        self.port.audit()
    }

    fn now(&self) -> SmolInstant {
        SmolInstant::from_micros(self.epoch.elapsed().as_micros() as i64)
    }

    /// One received frame into the engine; its UMEM frame goes back to the port.
    fn ingest(&mut self, frame: Frame, now: SmolInstant) {
        let (mut link, umem) = self.dev.link(&mut self.port);
        let _ = self.engine.ingest(now, umem.data(&frame), &mut link);
        self.port.release(frame);
    }

    /// `ingest`, through the fault injector when one is configured.
    fn ingest_faulty(&mut self, frame: Frame, now: SmolInstant) {
        let Some(f) = &mut self.dev.faults else { return self.ingest(frame, now) };
        match f.rx() {
            RxFate::Deliver => {
                self.ingest(frame, now);
                if let Some(d) = self.delayed.take() {
                    self.ingest(d, now);
                }
            }
            RxFate::Drop => self.port.release(frame),
            RxFate::Duplicate => {
                let copy = self.port.umem().data(&frame).to_vec();
                self.ingest(frame, now);
                let (mut link, _) = self.dev.link(&mut self.port);
                let _ = self.engine.ingest(now, &copy, &mut link);
            }
            RxFate::Delay => {
                if let Some(prev) = self.delayed.replace(frame) {
                    self.ingest(prev, now)
                }
            }
        }
    }

    /// Shared mode: answer smoltcp's ARP wishes from the kernel's table.
    fn neighbours(&mut self, now: SmolInstant, wall: std::time::Instant) {
        for t in self.dev.arp_targets.drain(..) {
            self.neigh.want(Ipv4Addr::from(t), wall);
        }
        if !self.neigh.has_pending() {
            return;
        }
        let mut found = std::mem::take(&mut self.resolved);
        self.neigh.resolve_pending(wall, &mut found);
        let (mut link, _) = self.dev.link(&mut self.port);
        for (ip, mac) in found.drain(..) {
            // The gateway is on-link; an off-link peer is never resolved
            // (smoltcp asks for its gateway instead).
            self.engine.teach_neighbour(now, ip, mac, &mut link);
        }
        self.resolved = found;
    }

    fn egress(&mut self, now: SmolInstant) -> Result<(), TransportError> {
        let (mut link, _) = self.dev.link(&mut self.port);
        self.engine.egress(now, &mut link);
        self.release_ports();
        self.port.flush().map_err(backend_err)
    }

    /// Ports of finished connections go back to the kernel.
    fn release_ports(&mut self) {
        let steer = self.port.steer();
        for PortChange::Released(p) in self.engine.port_changes() {
            if let Some(c) = &self.claims {
                c.release(p, steer);
            }
        }
    }

    /// How long to sleep: until the engine's next timer or the caller's deadline.
    fn wait_for(&mut self, left: Option<Duration>) -> Option<Duration> {
        let now = self.now();
        let timer = self.engine.poll_at().map(|d| {
            if d <= now {
                Duration::ZERO
            } else {
                Duration::from_micros((d - now).total_micros())
            }
        });
        match (left, timer) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
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

impl Transport for XskTransport {
    fn listen(&mut self, port: u16) -> Result<ListenerId, TransportError> {
        if port != 0 {
            if let Some(c) = &self.claims {
                c.claim(port, self.port.steer()).map_err(|e| match e.kind() {
                    std::io::ErrorKind::AddrInUse => TransportError::AddrInUse(port),
                    _ => TransportError::Io(e),
                })?;
            }
        }
        let lid = match self.engine.listen(port) {
            Ok(l) => l,
            Err(e) => {
                if let (Some(c), true) = (&self.claims, port != 0) {
                    c.release(port, self.port.steer());
                }
                return Err(e);
            }
        };
        let port = self.engine.local_addr(lid).map(|a| a.port()).unwrap_or(port);
        if self.claims.is_none() {
            if let Some(steer) = self.port.steer() {
                steer.add_tcp_port(port).map_err(backend_err)?;
            }
        }
        Ok(lid)
    }

    fn connect(&mut self, addr: SocketAddrV4) -> Result<ConnId, TransportError> {
        let (claims, steer) = (self.claims.as_deref(), self.port.steer());
        let mut usable = |p: u16| claims.is_none_or(|c| c.claim(p, steer).is_ok());
        let id = self.engine.connect(addr, &mut usable)?;
        Ok(id)
    }

    fn poll(&mut self, events: &mut Vec<Event>, timeout: Option<Duration>) -> Result<(), TransportError> {
        let start = std::time::Instant::now();
        let busy = self.port.features().busy_poll.is_some();
        loop {
            let wall = std::time::Instant::now();
            let now = self.now();
            self.neighbours(now, wall);
            let mut batch = std::mem::take(&mut self.rx_batch);
            let n = self.port.recv(&mut batch, self.cfg.rx_batch);
            for f in batch.drain(..) {
                self.ingest_faulty(f, now);
            }
            if let Some(d) = self.delayed.take() {
                self.ingest(d, now);
            }
            self.rx_batch = batch;
            // Report what arrived before transmitting anything: the
            // application's answers then ride on the ACKs (flush() sends
            // both), instead of a bare ACK going out first.
            self.engine.scan_dirty();
            if self.engine.take_events(events) {
                return Ok(());
            }
            self.egress(now)?;
            if self.engine.take_events(events) {
                return Ok(());
            }
            if n == self.cfg.rx_batch {
                continue; // more frames waiting: no sleep
            }
            let elapsed = start.elapsed();
            let left = match timeout {
                Some(t) if elapsed >= t => return Ok(()),
                Some(t) => Some(t - elapsed),
                None => None,
            };
            let wait = self.wait_for(left);
            if self.port.tx_pending() || self.neigh.has_pending() {
                // TX left in the ring (budget) or a neighbour being resolved: come back soon.
                let w = wait.map_or(Duration::from_micros(200), |w| w.min(Duration::from_micros(200)));
                std::thread::sleep(w);
                continue;
            }
            if busy {
                std::hint::spin_loop();
                continue;
            }
            if wait == Some(Duration::ZERO) {
                continue;
            }
            let wait = self.timer.prepare(wait);
            match self.poll.poll(&mut self.mio_events, wait) {
                Ok(()) => {
                    if self.mio_events.iter().any(|e| e.token() == TIMER_TOKEN) {
                        self.timer.clear();
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => return Ok(()),
                Err(e) => return Err(TransportError::Io(e)),
            }
        }
    }

    fn recv(&mut self, conn: ConnId, buf: &mut BytesMut) -> Result<usize, TransportError> {
        self.engine.recv(conn, buf)
    }

    fn send(&mut self, conn: ConnId, data: &[u8]) -> Result<usize, TransportError> {
        self.engine.send(conn, data)
    }

    fn close(&mut self, conn: ConnId) {
        self.engine.close(conn)
    }

    fn flush(&mut self) -> Result<(), TransportError> {
        if !self.engine.wants_egress() && !self.port.tx_pending() {
            return Ok(());
        }
        let now = self.now();
        self.egress(now)
    }

    fn local_addr(&self, listener: ListenerId) -> Option<SocketAddrV4> {
        self.engine.local_addr(listener)
    }

    fn peer_addr(&self, conn: ConnId) -> Option<SocketAddrV4> {
        self.engine.peer_addr(conn)
    }

    fn name(&self) -> &'static str {
        "xsk"
    }
}

impl Drop for XskTransport {
    fn drop(&mut self) {
        // Tell peers we are gone rather than leaving half-open connections.
        let now = self.now();
        let (mut link, _) = self.dev.link(&mut self.port);
        self.engine.abort_all(now, &mut link);
        let _ = self.port.flush();
        let _ = self.port.drain_tx(Duration::from_millis(100));
        let _ = self.poll.registry().deregister(&mut self.port);
        // Placeholders close with `claims` (dropped after this).
    }
}
