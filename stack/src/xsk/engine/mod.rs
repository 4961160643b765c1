//! The protocol engine: smoltcp's interface, the socket buckets, the
//! connection slab, listeners, half-open connections, the socket pool and
//! the timers. It performs no I/O and reads no clock: frames come in through
//! [`Engine::ingest`], go out through a [`Link`] given to each call, and time
//! is an argument (as in quinn-proto's endpoint). The AF_XDP driver
//! (`super::XskTransport`) and the in-memory test device
//! (`super::testing::MemLink`) both drive it.
//!
//! Scaling to many connections: smoltcp scans every socket of a set for each
//! packet and each egress pass, so sockets live in many small sets (buckets)
//! chosen by a hash of the 4-tuple (see `demux`); a packet and a timer only
//! touch their own bucket.

mod lifecycle;
mod neighbours;
mod ports;

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::ops::RangeInclusive;
use std::time::Duration;

use bytes::BytesMut;
use smoltcp::iface::{Config, Interface, SocketHandle, SocketSet};
use smoltcp::phy::{self, Checksum, DeviceCapabilities};
use smoltcp::socket::tcp;
use smoltcp::time::Instant;
use smoltcp::wire::{EthernetAddress, HardwareAddress, IpCidr, IpEndpoint};

use super::config::Congestion;
use super::demux::{bucket_of, inspect, Flow, Inspected, RxRules};
use super::drops::{DropReason, DropStats};
use crate::transport::{ConnId, ConnSlab, Event, ListenerId, TransportError};
pub use ports::PortChange;
use ports::PortTable;

/// Where the engine's frames go: the AF_XDP port's TX ring, or memory.
pub trait Link {
    /// Writes one frame.
    type Tx<'a>: phy::TxToken
    where
        Self: 'a;
    /// A token for one frame. Always given: a link without room drops the
    /// frame (and counts it) rather than refusing, since smoltcp must be able
    /// to answer the frame it is processing.
    fn tx(&mut self) -> Self::Tx<'_>;
    /// Whether egress may produce frames now.
    fn tx_ready(&mut self) -> bool;
    /// The link's MTU (IP packet size).
    fn mtu(&self) -> usize;
}

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

#[derive(Debug)]
struct Conn {
    bucket: u32,
    handle: SocketHandle,
    /// `Connected` reported (outgoing); incoming ones start connected.
    connected: bool,
    /// The last recv returned 0: report `Readable` when data arrives.
    want_read: bool,
    /// A send was short: report `Writable` when there is room.
    blocked: bool,
    closed_reported: bool,
    local_port: u16,
    /// Last time data moved either way (idle timeout); for a connect, when it began.
    active: Instant,
    /// Bytes waiting for the peer's ACK at the last sweep, and since when
    /// they have not shrunk (a peer that stopped acknowledging).
    unacked: usize,
    unacked_since: Instant,
}

struct Bucket {
    /// Connections, half-open ones and closing ones.
    sockets: SocketSet<'static>,
    /// Listening sockets, one or more per listening port, in a set of their
    /// own: smoltcp gives a segment to the first socket that takes it, and a
    /// listener takes any SYN, so a SYN for a live connection must never
    /// reach a listener before the connection sees it.
    listen: SocketSet<'static>,
    members: Vec<ConnId>,
    listeners: Vec<(SocketHandle, ListenerId)>,
    /// Listeners that left LISTEN (SYN received), not established yet, with arrival time.
    embryos: Vec<(SocketHandle, ListenerId, Instant)>,
    /// Closed by the application, finishing their FIN exchange: (socket, local port, since).
    closing: Vec<(SocketHandle, u16, Instant)>,
    deadline: Option<Instant>,
    dirty: bool,
}

impl Bucket {
    /// Whether a connection socket (not a listener) has this peer and port.
    fn has_conn(&self, src: Ipv4Addr, sport: u16, dport: u16) -> bool {
        self.sockets.iter().any(|(_, s)| {
            #[allow(irrefutable_let_patterns)]
            let smoltcp::socket::Socket::Tcp(t) = s else { return false };
            matches!((t.remote_endpoint(), t.local_endpoint()),
                (Some(r), Some(l)) if r.port == sport && l.port == dport && r.addr == smoltcp::wire::IpAddress::Ipv4(src))
        })
    }

    fn new() -> Bucket {
        Bucket {
            sockets: SocketSet::new(Vec::new()),
            listen: SocketSet::new(Vec::new()),
            members: Vec::new(),
            listeners: Vec::new(),
            embryos: Vec::new(),
            closing: Vec::new(),
            deadline: None,
            dirty: false,
        }
    }
}

/// smoltcp's view of a [`Link`] for one call: at most one received frame.
struct SmolDev<'a, L: Link> {
    rx: Option<&'a [u8]>,
    link: &'a mut L,
}

/// A received frame, borrowed (from UMEM or memory) for one smoltcp call.
struct SliceRx<'a>(&'a [u8]);

impl phy::RxToken for SliceRx<'_> {
    fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
        f(self.0)
    }
}

impl<L: Link> phy::Device for SmolDev<'_, L> {
    type RxToken<'t>
        = SliceRx<'t>
    where
        Self: 't;
    type TxToken<'t>
        = L::Tx<'t>
    where
        Self: 't;

    fn receive(&mut self, _now: Instant) -> Option<(SliceRx<'_>, L::Tx<'_>)> {
        let rx = self.rx.take()?;
        Some((SliceRx(rx), self.link.tx()))
    }

    fn transmit(&mut self, _now: Instant) -> Option<L::Tx<'_>> {
        self.link.tx_ready().then(|| self.link.tx())
    }

    fn capabilities(&self) -> DeviceCapabilities {
        let mut caps = DeviceCapabilities::default();
        caps.medium = phy::Medium::Ethernet;
        caps.max_transmission_unit = self.link.mtu() + 14;
        // None: smoltcp must not clamp the TCP window to a burst size.
        caps.max_burst_size = None;
        // `inspect` verified every received checksum already (accepting
        // partial ones where the link is trusted): smoltcp only fills them in.
        caps.checksum.ipv4 = Checksum::Tx;
        caps.checksum.tcp = Checksum::Tx;
        caps.checksum.icmpv4 = Checksum::Tx;
        caps
    }
}

/// The sans-IO TCP engine. See the module docs.
pub struct Engine {
    iface: Interface,
    buckets: Vec<Bucket>,
    dirty: Vec<u32>,
    conns: ConnSlab<Conn>,
    listeners: Vec<Option<u16>>,
    pending: Vec<Event>,
    stats: EngineStats,
    pool: Vec<tcp::Socket<'static>>,
    ports: PortTable,
    cfg: EngineConfig,
    rules: RxRules,
    /// Half-open connections over all buckets.
    embryos: usize,
    /// Bucket timers (smoltcp poll_at), earliest first; entries whose bucket
    /// has rescheduled since are stale and skipped.
    timers: BinaryHeap<Reverse<(Instant, u32)>>,
    /// For SYNs that must be refused: smoltcp answers a segment that finds
    /// no socket with RST.
    no_sockets: SocketSet<'static>,
    /// The latest time given to the engine (recv/send carry none).
    clock: Instant,
    next_sweep: Instant,
    /// Sockets in the buckets' closing lists.
    closing: usize,
    /// Peers taught to smoltcp from their frames.
    taught: neighbours::Taught,
}

const SWEEP_EVERY: Duration = Duration::from_secs(1);

impl Engine {
    /// A new engine; `link` gives the MTU.
    pub fn new<L: Link>(cfg: EngineConfig, now: Instant, link: &mut L) -> Engine {
        let nb = if cfg.buckets > 0 {
            cfg.buckets.next_power_of_two()
        } else {
            (cfg.max_conns / 8).clamp(16, 8192).next_power_of_two()
        };
        let mut icfg = Config::new(HardwareAddress::Ethernet(EthernetAddress(cfg.mac)));
        icfg.random_seed = cfg.seed;
        let mut dev = SmolDev { rx: None, link };
        let mut iface = Interface::new(icfg, &mut dev, now);
        iface.update_ip_addrs(|a| {
            let _ = a.push(IpCidr::new(cfg.addr.into(), cfg.prefix_len));
        });
        if let Some(gw) = cfg.gateway {
            let _ = iface.routes_mut().add_default_ipv4_route(gw);
        }
        let rules =
            RxRules { mac: cfg.mac, addr: cfg.addr, prefix_len: cfg.prefix_len, accept_partial: cfg.accept_partial_csum };
        Engine {
            iface,
            buckets: (0..nb).map(|_| Bucket::new()).collect(),
            dirty: Vec::with_capacity(nb),
            conns: ConnSlab::with_capacity(cfg.max_conns),
            listeners: Vec::new(),
            pending: Vec::new(),
            stats: EngineStats::default(),
            pool: Vec::new(),
            ports: PortTable::new(cfg.ephemeral.clone()),
            rules,
            embryos: 0,
            timers: BinaryHeap::new(),
            no_sockets: SocketSet::new(Vec::new()),
            clock: now,
            next_sweep: now + SWEEP_EVERY.into(),
            closing: 0,
            taught: neighbours::Taught::default(),
            cfg,
        }
    }

    pub fn addr(&self) -> Ipv4Addr {
        self.cfg.addr
    }

    pub fn buckets(&self) -> usize {
        self.buckets.len()
    }

    /// What the engine checks received frames against.
    pub fn rules(&self) -> &RxRules {
        &self.rules
    }

    pub fn stats(&self) -> EngineStats {
        let mut s = self.stats;
        s.live_sockets = self.buckets.iter().map(|b| b.sockets.iter().count() + b.listen.iter().count()).sum();
        s.pooled_sockets = self.pool.len();
        s.listening = self.buckets.iter().map(|b| b.listeners.len()).sum();
        s.half_open = self.embryos;
        s.connections = self.conns.len();
        s
    }

    /// Counts a frame the driver dropped before the engine saw it.
    pub fn count_drop(&mut self, r: DropReason) {
        self.stats.drops.count(r);
    }

    /// Ports the driver must start or stop steering (and holding in the kernel).
    pub fn port_changes(&mut self) -> std::vec::Drain<'_, PortChange> {
        self.ports.changes()
    }

    // ---- frames in and out -------------------------------------------------

    /// One received frame: checked, then given to smoltcp in the bucket its
    /// flow hashes to. Answers (RST, ACK, ARP) go out through `link`.
    pub fn ingest<L: Link>(&mut self, now: Instant, frame: &[u8], link: &mut L) -> Result<Inspected, DropReason> {
        self.clock = now;
        self.stats.rx_frames += 1;
        let info = match inspect(frame, &self.rules) {
            Ok(i) => i,
            Err(r) => {
                self.stats.drops.count(r);
                return Err(r);
            }
        };
        self.stats.rx_partial_csum += info.partial_csum as u64;
        // Peers are learned from their frames (on-link sources only), before
        // anything is answered: an RST needs the peer's MAC as much as data.
        if let Flow::Tcp { src, .. } | Flow::Icmp { src } = info.flow {
            if let Some(src) = self.taught.learn(src, now, &self.rules) {
                self.teach(now, src, info.src_mac, link);
            }
        }
        let b = match info.flow {
            Flow::Tcp { src, sport, dport, syn } => {
                let listening = self.ports.listening(dport);
                let refuse = if syn && listening && self.embryos + self.conns.len() >= self.cfg.max_conns {
                    Some(DropReason::ConnLimit)
                } else if !listening && !self.ports.in_use(dport) {
                    Some(DropReason::NoSocket)
                } else {
                    None
                };
                if let Some(r) = refuse {
                    self.stats.drops.count(r);
                    let mut dev = SmolDev { rx: Some(frame), link };
                    self.iface.poll_ingress_single(now, &mut dev, &mut self.no_sockets);
                    return Err(r);
                }
                let b = bucket_of(src, sport, dport, self.buckets.len());
                // Only a SYN for no live connection goes to the listeners.
                let to_listener = syn && listening && !self.buckets[b].has_conn(src, sport, dport);
                let bucket = &mut self.buckets[b];
                let set = if to_listener { &mut bucket.listen } else { &mut bucket.sockets };
                let mut dev = SmolDev { rx: Some(frame), link };
                self.iface.poll_ingress_single(now, &mut dev, set);
                self.replenish_listeners(b);
                self.mark_dirty(b as u32);
                return Ok(info);
            }
            Flow::Icmp { .. } | Flow::Arp { .. } => 0,
        };
        let mut dev = SmolDev { rx: Some(frame), link };
        self.iface.poll_ingress_single(now, &mut dev, &mut self.buckets[b].sockets);
        self.mark_dirty(b as u32);
        Ok(info)
    }

    /// Teaches smoltcp that on-link `ip` is at `mac` (shared-address mode,
    /// where the kernel owns ARP): a synthetic ARP reply. Off-link addresses
    /// are refused: their frames come from a router, whose MAC is not theirs.
    pub fn teach_neighbour<L: Link>(&mut self, now: Instant, ip: Ipv4Addr, mac: [u8; 6], link: &mut L) -> bool {
        if !self.rules.on_link(ip) || self.rules.bad_source(ip) {
            return false;
        }
        self.teach(now, ip, mac, link);
        self.taught.note(ip, now);
        // Sockets waiting for this neighbour can send now (rare: once per
        // new neighbour, so a pass over all buckets is fine).
        for b in 0..self.buckets.len() as u32 {
            self.mark_dirty(b);
        }
        true
    }

    /// A synthetic ARP reply for smoltcp's neighbour cache.
    fn teach<L: Link>(&mut self, now: Instant, ip: Ipv4Addr, mac: [u8; 6], link: &mut L) {
        let f = arp_reply(self.cfg.mac, self.cfg.addr, mac, ip);
        let mut dev = SmolDev { rx: Some(&f), link };
        self.iface.poll_ingress_single(now, &mut dev, &mut self.buckets[0].sockets);
    }

    /// Reports what changed in the buckets touched since the last egress
    /// (accepts, data, closes), before anything is sent, so the
    /// application's answers ride on the ACKs.
    pub fn scan_dirty(&mut self) {
        for i in 0..self.dirty.len() {
            let b = self.dirty[i] as usize;
            self.scan(b);
        }
    }

    /// Whether any bucket waits for egress.
    pub fn wants_egress(&self) -> bool {
        !self.dirty.is_empty()
    }

    /// Egress for every touched bucket and every bucket whose timer is due,
    /// plus the idle and FIN timeouts; then turns socket state into events.
    pub fn egress<L: Link>(&mut self, now: Instant, link: &mut L) {
        self.clock = now;
        if now >= self.next_sweep {
            self.next_sweep = now + SWEEP_EVERY.into();
            self.sweep(now);
        }
        while let Some(&Reverse((d, b))) = self.timers.peek() {
            if d > now {
                break;
            }
            self.timers.pop();
            if self.buckets[b as usize].deadline == Some(d) {
                self.buckets[b as usize].deadline = None;
                self.mark_dirty(b);
            }
        }
        let mut i = 0;
        while i < self.dirty.len() {
            let b = self.dirty[i] as usize;
            i += 1;
            self.buckets[b].dirty = false;
            self.scan(b);
            let mut dev = SmolDev { rx: None, link: &mut *link };
            let changed = self.iface.poll_egress(now, &mut dev, &mut self.buckets[b].sockets);
            if changed == smoltcp::iface::PollResult::SocketStateChanged {
                self.scan(b);
            }
            // Only now: a socket that entered TIME-WAIT has sent its last ACK.
            self.reap_closing(b);
            let bucket = &mut self.buckets[b];
            let next = self.iface.poll_at(now, &bucket.sockets);
            if next != bucket.deadline {
                bucket.deadline = next;
                if let Some(d) = next {
                    self.timers.push(Reverse((d, b as u32)));
                }
            }
            // scan() may have marked it dirty again; the loop picks it up.
        }
        // Every listed bucket had its flag cleared when its turn came, so
        // the flags need no pass over all buckets.
        self.dirty.clear();
        debug_assert!(self.buckets.iter().all(|b| !b.dirty));
    }

    /// When `egress` must run next at the latest (a smoltcp timer or a sweep).
    pub fn poll_at(&mut self) -> Option<Instant> {
        while let Some(&Reverse((d, b))) = self.timers.peek() {
            if self.buckets[b as usize].deadline == Some(d) {
                break;
            }
            self.timers.pop();
        }
        let timer = self.timers.peek().map(|&Reverse((d, _))| d);
        let sweep = self.needs_sweep().then_some(self.next_sweep);
        match (timer, sweep) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Moves the events gathered so far into `out`; true if there were any.
    pub fn take_events(&mut self, out: &mut Vec<Event>) -> bool {
        if self.pending.is_empty() {
            return false;
        }
        out.append(&mut self.pending);
        true
    }

    // ---- the connection API ------------------------------------------------

    pub fn listen(&mut self, port: u16) -> Result<ListenerId, TransportError> {
        let port = if port == 0 { self.ports.alloc().ok_or(TransportError::Exhausted("ephemeral ports"))? } else { port };
        if self.listeners.contains(&Some(port)) {
            return Err(TransportError::AddrInUse(port));
        }
        let lid = ListenerId(self.listeners.len() as u32);
        let per_bucket = self.cfg.backlog.div_ceil(self.buckets.len()).max(1);
        for b in 0..self.buckets.len() {
            for _ in 0..per_bucket {
                let mut s = self.new_socket();
                s.listen(port).map_err(|e| TransportError::Backend { backend: "xsk", source: Box::new(e) })?;
                let h = self.buckets[b].listen.add(s);
                self.buckets[b].listeners.push((h, lid));
            }
        }
        self.listeners.push(Some(port));
        self.ports.set_listening(port);
        Ok(lid)
    }

    /// Opens a connection from an ephemeral port; `usable` may veto a port
    /// (the driver's claim on it in the kernel failed), up to a few tries.
    pub fn connect(&mut self, addr: SocketAddrV4, usable: &mut dyn FnMut(u16) -> bool) -> Result<ConnId, TransportError> {
        let mut lport = None;
        for _ in 0..16 {
            let p = self.ports.alloc().ok_or(TransportError::Exhausted("ephemeral ports"))?;
            if usable(p) {
                lport = Some(p);
                break;
            }
            // Leave it marked in use: the kernel has it.
        }
        let lport = lport.ok_or(TransportError::Exhausted("ephemeral ports the kernel does not use"))?;
        let b = bucket_of(*addr.ip(), addr.port(), lport, self.buckets.len());
        let mut s = self.new_socket();
        let remote = IpEndpoint::new((*addr.ip()).into(), addr.port());
        if let Err(e) = s.connect(self.iface.context(), remote, (self.cfg.addr, lport)) {
            self.ports.release(lport);
            self.recycle(s);
            return Err(TransportError::Backend { backend: "xsk", source: Box::new(e) });
        }
        let h = self.buckets[b].sockets.add(s);
        let conn = Conn {
            bucket: b as u32,
            handle: h,
            connected: false,
            want_read: true,
            blocked: false,
            closed_reported: false,
            local_port: lport,
            active: self.clock,
            unacked: 0,
            unacked_since: self.clock,
        };
        let id = match self.conns.insert(conn) {
            Ok(id) => id,
            Err(e) => {
                let s = Self::take_socket(&mut self.buckets[b].sockets, h);
                self.recycle(s);
                self.ports.release(lport);
                return Err(e);
            }
        };
        self.buckets[b].members.push(id);
        self.mark_dirty(b as u32);
        Ok(id)
    }

    pub fn recv(&mut self, conn: ConnId, buf: &mut BytesMut) -> Result<usize, TransportError> {
        let c = self.conns.get(conn).ok_or(TransportError::UnknownConn(conn))?;
        let (b, h) = (c.bucket, c.handle);
        let s = self.buckets[b as usize].sockets.get_mut::<tcp::Socket>(h);
        let mut total = 0;
        while s.can_recv() {
            match s.recv(|data| {
                buf.extend_from_slice(data);
                (data.len(), data.len())
            }) {
                Ok(0) | Err(_) => break,
                Ok(n) => total += n,
            }
        }
        let eof = !s.may_recv() && !s.can_recv();
        let c = self.conns.get_mut(conn).expect("checked above");
        if total == 0 {
            c.want_read = true;
            if eof && !c.closed_reported {
                c.closed_reported = true;
                self.stats.closed += 1;
                self.pending.push(Event::Closed(conn));
            }
        } else {
            c.active = self.clock;
            // The window opened: let egress send an update if smoltcp wants to.
            self.mark_dirty(b);
        }
        Ok(total)
    }

    pub fn send(&mut self, conn: ConnId, data: &[u8]) -> Result<usize, TransportError> {
        let c = self.conns.get(conn).ok_or(TransportError::UnknownConn(conn))?;
        let (b, h, connected) = (c.bucket, c.handle, c.connected);
        let s = self.buckets[b as usize].sockets.get_mut::<tcp::Socket>(h);
        if !s.may_send() {
            return match s.state() {
                tcp::State::SynSent | tcp::State::SynReceived => Ok(0),
                _ if !connected => Ok(0),
                _ => Err(TransportError::ConnectionClosed(conn)),
            };
        }
        let n = s.send_slice(data).map_err(|_| TransportError::ConnectionClosed(conn))?;
        let c = self.conns.get_mut(conn).expect("checked above");
        if n < data.len() {
            c.blocked = true;
        }
        if n > 0 {
            c.active = self.clock;
            self.mark_dirty(b);
        }
        Ok(n)
    }

    pub fn close(&mut self, conn: ConnId) {
        let Some(c) = self.conns.remove(conn) else { return };
        let b = c.bucket as usize;
        let bucket = &mut self.buckets[b];
        if let Some(i) = bucket.members.iter().position(|m| *m == conn) {
            bucket.members.swap_remove(i);
        }
        bucket.sockets.get_mut::<tcp::Socket>(c.handle).close();
        bucket.closing.push((c.handle, c.local_port, self.clock));
        self.closing += 1;
        self.mark_dirty(b as u32);
    }

    pub fn local_addr(&self, listener: ListenerId) -> Option<SocketAddrV4> {
        self.listeners.get(listener.0 as usize).copied().flatten().map(|p| SocketAddrV4::new(self.cfg.addr, p))
    }

    pub fn peer_addr(&self, conn: ConnId) -> Option<SocketAddrV4> {
        let c = self.conns.get(conn)?;
        let s = self.buckets[c.bucket as usize].sockets.get::<tcp::Socket>(c.handle);
        match s.remote_endpoint()? {
            IpEndpoint { addr: smoltcp::wire::IpAddress::Ipv4(a), port } => Some(SocketAddrV4::new(a, port)),
            #[allow(unreachable_patterns)]
            _ => None,
        }
    }

    /// Aborts every connection (RST to each peer) and sends the RSTs: for
    /// shutdown, so peers are not left with half-open connections.
    pub fn abort_all<L: Link>(&mut self, now: Instant, link: &mut L) {
        for b in &mut self.buckets {
            for (_, s) in b.sockets.iter_mut().chain(b.listen.iter_mut()) {
                #[allow(irrefutable_let_patterns)]
                if let smoltcp::socket::Socket::Tcp(t) = s {
                    if t.is_active() {
                        t.abort();
                    }
                }
            }
        }
        for b in 0..self.buckets.len() as u32 {
            self.mark_dirty(b);
        }
        self.egress(now, link);
    }

    fn mark_dirty(&mut self, b: u32) {
        let bucket = &mut self.buckets[b as usize];
        if !bucket.dirty {
            bucket.dirty = true;
            self.dirty.push(b);
        }
    }
}

/// An ARP reply from `ip` at `mac` to us.
fn arp_reply(our_mac: [u8; 6], our_ip: Ipv4Addr, mac: [u8; 6], ip: Ipv4Addr) -> [u8; 42] {
    let mut f = [0u8; 42];
    f[0..6].copy_from_slice(&our_mac);
    f[6..12].copy_from_slice(&mac);
    f[12..14].copy_from_slice(&[0x08, 0x06]);
    f[14..22].copy_from_slice(&[0, 1, 8, 0, 6, 4, 0, 2]);
    f[22..28].copy_from_slice(&mac);
    f[28..32].copy_from_slice(&ip.octets());
    f[32..38].copy_from_slice(&our_mac);
    f[38..42].copy_from_slice(&our_ip.octets());
    f
}

#[cfg(test)]
mod tests;
