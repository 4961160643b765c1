//! The AF_XDP backend: smoltcp's TCP over an `xsk_io::Port`, behind the same
//! [`Transport`] trait as the kernel backend.
//!
//! Data flows one way per direction: RX ring -> port -> device -> smoltcp ->
//! sockets -> events -> application, and back through the TX ring. One
//! `XskTransport` is one single-threaded shard bound to one RX queue.
//!
//! Scaling to many connections: smoltcp scans every socket of a set for each
//! packet and each egress pass, so sockets live in many small sets (buckets)
//! chosen by a hash of the 4-tuple (see [`demux`]); a packet and a timer only
//! touch their own bucket.

mod config;
pub mod demux;
pub mod device;
pub mod faults;
pub mod neigh;
mod reserved;

pub use config::{AddrMode, Congestion, XskConfig, XskError};
use reserved::ReservedPorts;

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use smoltcp::iface::{Config, Interface, SocketHandle, SocketSet};
use smoltcp::socket::tcp;
use smoltcp::time::Instant as SmolInstant;
use smoltcp::wire::{EthernetAddress, HardwareAddress, IpCidr, IpEndpoint};
use xsk_io::port::{Port, PortError, PortStats, SteerSpec};
use xsk_io::steer::SteerFlags;
use xsk_io::umem::Frame;

use crate::transport::{ConnId, ConnSlab, Event, ListenerId, Transport, TransportError};
use demux::{bucket_of, classify, Flow};
use device::{DevState, DeviceStats, RxSlot};
use faults::{FaultState, RxFate};
use neigh::Neighbours;

fn backend_err(e: impl std::error::Error + Send + Sync + 'static) -> TransportError {
    TransportError::Backend { backend: "xsk", source: Box::new(e) }
}

#[derive(Debug)]
struct Conn {
    bucket: u32,
    handle: SocketHandle,
    /// `Connected` reported (outgoing) — incoming ones start connected.
    connected: bool,
    /// The last recv returned 0: report `Readable` when data arrives.
    want_read: bool,
    /// A send was short: report `Writable` when there is room.
    blocked: bool,
    closed_reported: bool,
    local_port: u16,
}

struct Bucket {
    sockets: SocketSet<'static>,
    members: Vec<ConnId>,
    /// Listening sockets, one or more per listening port.
    listeners: Vec<(SocketHandle, ListenerId)>,
    /// Listeners that left LISTEN (SYN received) and are not established yet.
    embryos: Vec<(SocketHandle, ListenerId)>,
    /// Closed by the application, finishing their FIN exchange.
    closing: Vec<(SocketHandle, u16)>,
    deadline: Option<SmolInstant>,
    dirty: bool,
}

impl Bucket {
    fn new() -> Bucket {
        Bucket {
            sockets: SocketSet::new(Vec::new()),
            members: Vec::new(),
            listeners: Vec::new(),
            embryos: Vec::new(),
            closing: Vec::new(),
            deadline: None,
            dirty: false,
        }
    }
}

/// Counters of the stack.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct StackStats {
    pub device: DeviceStats,
    pub accepted: u64,
    pub connected: u64,
    pub closed: u64,
    pub recycled: u64,
    /// Half-open connections dropped because the bucket's SYN backlog was full.
    pub syn_dropped: u64,
    /// Sockets in the sets: listeners, half-open, connections, closing.
    pub live_sockets: usize,
    /// Of those, listeners waiting for a SYN.
    pub listening: usize,
    pub pooled_sockets: usize,
    pub port: PortStats,
}

pub struct XskTransport {
    port: Port,
    iface: Interface,
    buckets: Vec<Bucket>,
    dirty: Vec<u32>,
    conns: ConnSlab<Conn>,
    listeners: Vec<Option<u16>>,
    pending: Vec<Event>,
    rx_batch: Vec<Frame>,
    /// Device-layer state lent to every smoltcp call (see `DevState::one_shot`).
    dev: DevState,
    counters: StackStats,
    neigh: Neighbours,
    resolved: Vec<(Ipv4Addr, [u8; 6])>,
    poll: mio::Poll,
    mio_events: mio::Events,
    pool: Vec<tcp::Socket<'static>>,
    ports_in_use: Vec<bool>,
    next_ephemeral: u16,
    cfg: XskConfig,
    addr: Ipv4Addr,
    epoch: std::time::Instant,
    reserved_ports: Option<Arc<ReservedPorts>>,
    /// A frame held back by reorder injection.
    delayed: Option<Frame>,
    /// Half-open connections over all buckets.
    embryos: usize,
    /// Bucket timers (smoltcp poll_at), earliest first; entries whose bucket
    /// has rescheduled since are stale and skipped.
    timers: BinaryHeap<Reverse<(SmolInstant, u32)>>,
    /// Wakes epoll for sub-millisecond waits (smoltcp timers, open-loop pacing).
    timer: crate::timer::PreciseTimer,
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
                let (a, p) = xsk_io::ifaddr::ipv4(&ifname)
                    .map_err(iferr)?
                    .ok_or_else(|| XskError::Iface(ifname.clone(), "has no IPv4 address to share (use a dedicated address)".into()))?;
                (a, p, SteerFlags::NONE)
            }
            AddrMode::Dedicated { addr, prefix_len } => (*addr, *prefix_len, SteerFlags::ARP | SteerFlags::ICMP),
        };
        let reserved_ports = match cfg.addr {
            AddrMode::Shared => Some(Arc::new(ReservedPorts::reserve(&cfg.ephemeral).map_err(XskError::ReservePorts)?)),
            AddrMode::Dedicated { .. } => None,
        };
        let mut pcfg = cfg.port.clone();
        pcfg.steer = Some(SteerSpec { addr, tcp_ports: Vec::new(), flags });
        let ports = if all_queues { Port::open_all(&pcfg)? } else { vec![Port::open(&pcfg)?] };
        ports[0].log_features();
        if let Some(steer) = ports[0].steer() {
            steer.add_tcp_port_range(cfg.ephemeral.clone()).map_err(PortError::from)?;
        }
        ports
            .into_iter()
            .map(|port| Self::with_port(cfg.clone(), port, mac, mtu, addr, prefix_len, reserved_ports.clone()))
            .collect()
    }

    fn with_port(
        cfg: XskConfig,
        mut port: Port,
        mac: [u8; 6],
        mtu: usize,
        addr: Ipv4Addr,
        prefix_len: u8,
        reserved_ports: Option<Arc<ReservedPorts>>,
    ) -> Result<XskTransport, XskError> {
        let ifname = cfg.port.ifname.clone();
        let iferr = |e: std::io::Error| XskError::Iface(ifname.clone(), e.to_string());
        let nb = if cfg.buckets > 0 {
            cfg.buckets.next_power_of_two()
        } else {
            (cfg.max_conns / 8).clamp(16, 8192).next_power_of_two()
        };
        let mut dev_state = DevState {
            scratch: vec![0u8; 64 * 1024],
            stats: DeviceStats::default(),
            arp_targets: Vec::with_capacity(64),
            // Shared mode leaves ARP itself to the kernel.
            intercept_arp: cfg.addr == AddrMode::Shared,
            faults: cfg.faults.any().then(|| FaultState::new(cfg.faults)),
            mtu,
        };
        let epoch = std::time::Instant::now();
        let mut icfg = Config::new(HardwareAddress::Ethernet(EthernetAddress(mac)));
        icfg.random_seed = epoch.elapsed().as_nanos() as u64 ^ (std::process::id() as u64) << 32 ^ seed();
        let iface = {
            let mut done = None;
            let mut dev = dev_state.one_shot(&mut port, RxSlot::Empty, &mut done);
            let mut iface = Interface::new(icfg, &mut dev, SmolInstant::from_micros(0));
            iface.update_ip_addrs(|a| {
                let _ = a.push(IpCidr::new(addr.into(), prefix_len));
            });
            if let Some(gw) = cfg.gateway {
                let _ = iface.routes_mut().add_default_ipv4_route(gw);
            }
            iface
        };
        let poll = mio::Poll::new().map_err(iferr)?;
        poll.registry().register(&mut port, XSK_TOKEN, mio::Interest::READABLE).map_err(iferr)?;
        let timer = crate::timer::PreciseTimer::new().map_err(iferr)?;
        timer.register(poll.registry(), TIMER_TOKEN).map_err(iferr)?;
        // Both modes learn peers from the frames they receive (with several
        // shards, an ARP exchange may land on another shard's queue).
        let neigh = Neighbours::new(&ifname, mac, addr);
        let shared = dev_state.intercept_arp;
        tracing::info!(
            "xsk stack on {ifname}: {addr}/{prefix_len} ({}), {nb} socket buckets, buffers {}+{} bytes",
            if shared { "shared with the kernel" } else { "dedicated" },
            cfg.rx_buffer,
            cfg.tx_buffer
        );
        Ok(XskTransport {
            port,
            iface,
            buckets: (0..nb).map(|_| Bucket::new()).collect(),
            dirty: Vec::with_capacity(nb),
            conns: ConnSlab::with_capacity(cfg.max_conns),
            listeners: Vec::new(),
            pending: Vec::new(),
            rx_batch: Vec::with_capacity(cfg.rx_batch),
            dev: dev_state,
            counters: StackStats::default(),
            neigh,
            resolved: Vec::new(),
            poll,
            mio_events: mio::Events::with_capacity(4),
            pool: Vec::new(),
            ports_in_use: vec![false; 65536],
            next_ephemeral: *cfg.ephemeral.start(),
            addr,
            epoch,
            reserved_ports,
            delayed: None,
            embryos: 0,
            timers: BinaryHeap::new(),
            timer,
            cfg,
        })
    }

    pub fn addr(&self) -> Ipv4Addr {
        self.addr
    }

    pub fn port(&self) -> &Port {
        &self.port
    }

    pub fn stats(&self) -> StackStats {
        let mut s = self.counters;
        s.device = self.dev.stats;
        s.port = self.port.stats();
        s.live_sockets = self.buckets.iter().map(|b| b.sockets.iter().count()).sum();
        s.pooled_sockets = self.pool.len();
        s.listening = self.listening_sockets();
        s
    }

    /// Listening sockets waiting for a SYN, over all buckets.
    pub fn listening_sockets(&self) -> usize {
        self.buckets.iter().map(|b| b.listeners.len()).sum()
    }

    /// Frame accounting of the underlying port (see `Port::audit`).
    pub fn audit(&mut self) -> Result<xsk_io::port::Accounting, String> {
        self.port.audit()
    }

    fn now(&self) -> SmolInstant {
        SmolInstant::from_micros(self.epoch.elapsed().as_micros() as i64)
    }

    fn new_socket(&mut self) -> tcp::Socket<'static> {
        if let Some(s) = self.pool.pop() {
            return s;
        }
        let mut s = tcp::Socket::new(
            tcp::SocketBuffer::new(vec![0u8; self.cfg.rx_buffer]),
            tcp::SocketBuffer::new(vec![0u8; self.cfg.tx_buffer]),
        );
        // Request/response defaults: no Nagle (a response goes out at once),
        // no delayed ACK (the ACK rides on the response anyway, and a lone
        // request segment is never held back).
        s.set_nagle_enabled(false);
        s.set_ack_delay(None);
        s.set_keep_alive(self.cfg.keepalive.map(Into::into));
        s.set_timeout(self.cfg.timeout.map(Into::into));
        s.set_congestion_control(match self.cfg.congestion {
            Congestion::None => tcp::CongestionControl::None,
            Congestion::Reno => tcp::CongestionControl::Reno,
            Congestion::Cubic => tcp::CongestionControl::Cubic,
        });
        s
    }

    fn recycle(&mut self, mut s: tcp::Socket<'static>) {
        s.abort();
        self.counters.recycled += 1;
        // Keep enough spare sockets for a burst, free the rest.
        if self.pool.len() < 1024 {
            self.pool.push(s);
        }
    }

    fn take_socket(set: &mut SocketSet<'static>, h: SocketHandle) -> tcp::Socket<'static> {
        match set.remove(h) {
            smoltcp::socket::Socket::Tcp(t) => t,
            #[allow(unreachable_patterns)]
            _ => unreachable!("only TCP sockets are added"),
        }
    }

    fn mark_dirty(&mut self, b: u32) {
        let bucket = &mut self.buckets[b as usize];
        if !bucket.dirty {
            bucket.dirty = true;
            self.dirty.push(b);
        }
    }

    fn alloc_ephemeral(&mut self) -> Option<u16> {
        let (lo, hi) = (*self.cfg.ephemeral.start(), *self.cfg.ephemeral.end());
        let n = (hi - lo) as u32 + 1;
        for _ in 0..n {
            let p = self.next_ephemeral;
            self.next_ephemeral = if p >= hi { lo } else { p + 1 };
            if !self.ports_in_use[p as usize] {
                self.ports_in_use[p as usize] = true;
                return Some(p);
            }
        }
        None
    }

    fn release_port(&mut self, p: u16) {
        if p != 0 && self.cfg.ephemeral.contains(&p) {
            self.ports_in_use[p as usize] = false;
        }
    }

    // ---- the loop ---------------------------------------------------------

    /// One frame into smoltcp, in the bucket its flow hashes to.
    fn ingress(&mut self, frame: Frame, now: SmolInstant, wall: std::time::Instant) {
        let (flow, src_mac) = {
            let d = self.port.umem().data(&frame);
            let mut mac = [0u8; 6];
            if d.len() >= 12 {
                mac.copy_from_slice(&d[6..12]);
            }
            (classify(d), mac)
        };
        let nb = self.buckets.len();
        let b = match flow {
            Flow::Tcp { src, sport, dport } => bucket_of(src, sport, dport, nb),
            _ => 0,
        };
        if let Flow::Tcp { src, .. } | Flow::Ipv4 { src } = flow {
            if self.neigh.learn_from_frame(src, wall) {
                let mut arp = [0u8; 42];
                self.neigh.synth_reply(src, src_mac, &mut arp);
                self.feed(RxSlot::Bytes(&arp), 0, now);
            }
        }
        let mut done = None;
        let mut dev = self.dev.one_shot(&mut self.port, RxSlot::Frame(frame), &mut done);
        self.iface.poll_ingress_single(now, &mut dev, &mut self.buckets[b].sockets);
        if let Some(f) = done {
            self.port.release(f);
        }
        self.replenish_listeners(b);
        self.mark_dirty(b as u32);
    }

    /// `ingress`, through the fault injector when one is configured.
    fn ingress_faulty(&mut self, frame: Frame, now: SmolInstant, wall: std::time::Instant) {
        let Some(f) = &mut self.dev.faults else { return self.ingress(frame, now, wall) };
        match f.rx() {
            RxFate::Deliver => {
                self.ingress(frame, now, wall);
                if let Some(d) = self.delayed.take() {
                    self.ingress(d, now, wall);
                }
            }
            RxFate::Drop => self.port.release(frame),
            RxFate::Duplicate => {
                let copy = self.port.umem().data(&frame).to_vec();
                let b = match classify(&copy) {
                    Flow::Tcp { src, sport, dport } => bucket_of(src, sport, dport, self.buckets.len()),
                    _ => 0,
                };
                self.ingress(frame, now, wall);
                self.feed(RxSlot::Bytes(&copy), b, now);
                self.mark_dirty(b as u32);
            }
            RxFate::Delay => {
                if let Some(prev) = self.delayed.replace(frame) {
                    self.ingress(prev, now, wall)
                }
            }
        }
    }

    /// A synthetic frame (ARP reply) into smoltcp.
    fn feed(&mut self, bytes: RxSlot<'_>, b: usize, now: SmolInstant) {
        let mut done = None;
        let mut dev = self.dev.one_shot(&mut self.port, bytes, &mut done);
        self.iface.poll_ingress_single(now, &mut dev, &mut self.buckets[b].sockets);
        // Synthetic frames are not UMEM frames: nothing to release.
        debug_assert!(done.is_none());
    }

    /// Shared mode: answer smoltcp's ARP wishes from the kernel's table.
    fn neighbours(&mut self, now: SmolInstant, wall: std::time::Instant) {
        let n = &mut self.neigh;
        for t in self.dev.arp_targets.drain(..) {
            n.want(Ipv4Addr::from(t), wall);
        }
        if !n.has_pending() {
            return;
        }
        let mut found = std::mem::take(&mut self.resolved);
        n.resolve_pending(wall, &mut found);
        for (ip, mac) in found.drain(..) {
            let mut arp = [0u8; 42];
            self.neigh.synth_reply(ip, mac, &mut arp);
            self.feed(RxSlot::Bytes(&arp), 0, now);
            // Sockets waiting for this neighbour can send now (rare: once
            // per new neighbour, so a pass over all buckets is fine).
            for b in 0..self.buckets.len() as u32 {
                self.mark_dirty(b);
            }
        }
        self.resolved = found;
    }

    /// Egress for every dirty bucket and every bucket whose timer is due,
    /// then turn socket state into events.
    fn egress_and_scan(&mut self, now: SmolInstant) {
        // Buckets whose smoltcp timer is due (stale heap entries, whose
        // bucket has rescheduled since, are skipped).
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
            self.scan(b, now);
            let mut done = None;
            let mut dev = self.dev.one_shot(&mut self.port, RxSlot::Empty, &mut done);
            let bucket = &mut self.buckets[b];
            let changed = self.iface.poll_egress(now, &mut dev, &mut bucket.sockets);
            if changed == smoltcp::iface::PollResult::SocketStateChanged {
                self.scan(b, now);
            }
            let bucket = &mut self.buckets[b];
            let next = self.iface.poll_at(now, &bucket.sockets);
            if next != bucket.deadline {
                bucket.deadline = next;
                if let Some(d) = next {
                    self.timers.push(Reverse((d, b as u32)));
                }
            }
            // scan() may have marked it dirty again; that is fine: the loop picks it up.
        }
        // Every listed bucket had its flag cleared when its turn came, so the
        // flags need no pass over all buckets (thousands at 10k connections).
        self.dirty.clear();
        debug_assert!(self.buckets.iter().all(|b| !b.dirty));
    }

    /// Listeners that got a SYN become embryos and a fresh listener takes
    /// their place at once, so a burst of SYNs into one bucket finds a
    /// listener for each (smoltcp has no accept queue). Called after every
    /// ingress; it only looks at the bucket's few listeners.
    fn replenish_listeners(&mut self, b: usize) {
        let mut k = 0;
        while k < self.buckets[b].listeners.len() {
            let (h, lid) = self.buckets[b].listeners[k];
            let state = self.buckets[b].sockets.get::<tcp::Socket>(h).state();
            if state == tcp::State::Listen {
                k += 1;
                continue;
            }
            self.buckets[b].listeners.swap_remove(k);
            // Half-open connections are bounded over the whole stack (a SYN
            // flood must not grow memory): past the limit the oldest one of
            // this bucket is dropped, as the kernel drops from a full SYN queue.
            if self.embryos >= self.embryo_limit() && !self.buckets[b].embryos.is_empty() {
                let (old, _) = self.buckets[b].embryos.remove(0);
                self.embryos -= 1;
                self.buckets[b].sockets.get_mut::<tcp::Socket>(old).abort();
                let s = Self::take_socket(&mut self.buckets[b].sockets, old);
                self.recycle(s);
                self.counters.syn_dropped += 1;
            }
            self.embryos += 1;
            self.buckets[b].embryos.push((h, lid));
            if let Some(Some(port)) = self.listeners.get(lid.0 as usize) {
                let port = *port;
                let mut s = self.new_socket();
                if s.listen(port).is_ok() {
                    let nh = self.buckets[b].sockets.add(s);
                    self.buckets[b].listeners.push((nh, lid));
                }
            }
        }
    }

    /// Half-open connections the stack may hold: enough for one SYN per
    /// connection it is sized for (a client opening all its connections at
    /// once), bounded so a flood cannot grow memory past that.
    fn embryo_limit(&self) -> usize {
        (self.cfg.backlog.max(256) * 4).max(self.cfg.max_conns)
    }

    /// Reports what changed in bucket `b`: accepts, connects, data, room, closes.
    fn scan(&mut self, b: usize, _now: SmolInstant) {
        self.replenish_listeners(b);
        let mut k = 0;
        while k < self.buckets[b].embryos.len() {
            let (h, lid) = self.buckets[b].embryos[k];
            let state = self.buckets[b].sockets.get::<tcp::Socket>(h).state();
            match state {
                tcp::State::SynReceived => k += 1,
                tcp::State::Closed | tcp::State::Listen | tcp::State::TimeWait => {
                    self.buckets[b].embryos.swap_remove(k);
                    self.embryos -= 1;
                    let s = Self::take_socket(&mut self.buckets[b].sockets, h);
                    self.recycle(s);
                }
                _ => {
                    self.buckets[b].embryos.swap_remove(k);
                    self.embryos -= 1;
                    let conn = Conn {
                        bucket: b as u32,
                        handle: h,
                        connected: true,
                        want_read: true,
                        blocked: false,
                        closed_reported: false,
                        local_port: 0,
                    };
                    match self.conns.insert(conn) {
                        Ok(id) => {
                            self.buckets[b].members.push(id);
                            self.pending.push(Event::Accepted { listener: lid, conn: id });
                            self.counters.accepted += 1;
                        }
                        Err(_) => {
                            // Out of ids: refuse the connection rather than leak it.
                            self.buckets[b].sockets.get_mut::<tcp::Socket>(h).abort();
                            let s = Self::take_socket(&mut self.buckets[b].sockets, h);
                            self.recycle(s);
                        }
                    }
                }
            }
        }
        // Connections.
        let bucket = &mut self.buckets[b];
        for &id in &bucket.members {
            let Some(c) = self.conns.get_mut(id) else { continue };
            let s = bucket.sockets.get::<tcp::Socket>(c.handle);
            let state = s.state();
            if !c.connected {
                match state {
                    tcp::State::SynSent | tcp::State::SynReceived => continue,
                    tcp::State::Closed | tcp::State::TimeWait => {
                        // Connect failed (RST or timeout).
                        if !c.closed_reported {
                            c.closed_reported = true;
                            self.pending.push(Event::Closed(id));
                        }
                        continue;
                    }
                    _ => {
                        c.connected = true;
                        self.counters.connected += 1;
                        self.pending.push(Event::Connected(id));
                    }
                }
            }
            let readable = s.can_recv() || !s.may_recv();
            if c.want_read && readable && !c.closed_reported {
                c.want_read = false;
                self.pending.push(Event::Readable(id));
            }
            if c.blocked && (s.send_capacity() > s.send_queue() || !s.may_send()) {
                c.blocked = false;
                self.pending.push(Event::Writable(id));
            }
            if !c.closed_reported && !s.may_recv() && !s.can_recv() && c.want_read {
                c.closed_reported = true;
                self.counters.closed += 1;
                self.pending.push(Event::Closed(id));
            }
        }
        // Sockets the application closed: recycle once the exchange is over.
        let mut k = 0;
        while k < self.buckets[b].closing.len() {
            let (h, lport) = self.buckets[b].closing[k];
            let state = self.buckets[b].sockets.get::<tcp::Socket>(h).state();
            if matches!(state, tcp::State::Closed | tcp::State::TimeWait) {
                // TIME-WAIT is not kept: the 4-tuple's next use gets a fresh
                // random ISN from smoltcp, and keeping thousands of sockets
                // (with their buffers) for 10 s under churn is the leak the
                // stack must not have.
                self.buckets[b].closing.swap_remove(k);
                let s = Self::take_socket(&mut self.buckets[b].sockets, h);
                self.recycle(s);
                self.release_port(lport);
            } else {
                k += 1;
            }
        }
    }

    fn conn(&self, id: ConnId) -> Result<&Conn, TransportError> {
        self.conns.get(id).ok_or(TransportError::UnknownConn(id))
    }
}

fn seed() -> u64 {
    let mut b = [0u8; 8];
    if let Ok(mut f) = std::fs::File::open("/dev/urandom") {
        use std::io::Read;
        let _ = f.read_exact(&mut b);
    }
    u64::from_ne_bytes(b)
}

impl Transport for XskTransport {
    fn listen(&mut self, port: u16) -> Result<ListenerId, TransportError> {
        let port = if port == 0 {
            self.alloc_ephemeral().ok_or(TransportError::Exhausted("ephemeral ports"))?
        } else {
            port
        };
        if self.listeners.contains(&Some(port)) {
            return Err(TransportError::AddrInUse(port));
        }
        let lid = ListenerId(self.listeners.len() as u32);
        self.listeners.push(Some(port));
        if let Some(steer) = self.port.steer() {
            steer.add_tcp_port(port).map_err(backend_err)?;
        }
        let per_bucket = self.cfg.backlog.div_ceil(self.buckets.len()).max(1);
        for b in 0..self.buckets.len() {
            for _ in 0..per_bucket {
                let mut s = self.new_socket();
                s.listen(port).map_err(backend_err)?;
                let h = self.buckets[b].sockets.add(s);
                self.buckets[b].listeners.push((h, lid));
            }
        }
        Ok(lid)
    }

    fn connect(&mut self, addr: SocketAddrV4) -> Result<ConnId, TransportError> {
        let lport = self.alloc_ephemeral().ok_or(TransportError::Exhausted("ephemeral ports"))?;
        let b = bucket_of(*addr.ip(), addr.port(), lport, self.buckets.len());
        let mut s = self.new_socket();
        let remote = IpEndpoint::new((*addr.ip()).into(), addr.port());
        if let Err(e) = s.connect(self.iface.context(), remote, (self.addr, lport)) {
            self.release_port(lport);
            self.recycle(s);
            return Err(backend_err(e));
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
        };
        let id = match self.conns.insert(conn) {
            Ok(id) => id,
            Err(e) => {
                let s = Self::take_socket(&mut self.buckets[b].sockets, h);
                self.recycle(s);
                self.release_port(lport);
                return Err(e);
            }
        };
        self.buckets[b].members.push(id);
        self.mark_dirty(b as u32);
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
                self.ingress_faulty(f, now, wall);
            }
            if let Some(d) = self.delayed.take() {
                self.ingress(d, now, wall);
            }
            self.rx_batch = batch;
            // Report what arrived before transmitting anything: the
            // application's answers then ride on the ACKs (flush() sends
            // both), instead of a bare ACK going out first.
            for i in 0..self.dirty.len() {
                let b = self.dirty[i] as usize;
                self.scan(b, now);
            }
            if !self.pending.is_empty() {
                events.append(&mut self.pending);
                return Ok(());
            }
            self.egress_and_scan(now);
            self.port.flush().map_err(backend_err)?;
            if !self.pending.is_empty() {
                events.append(&mut self.pending);
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
            // Sleep until the next smoltcp timer, the user's timeout, or a frame.
            let now = self.now();
            while let Some(&Reverse((d, b))) = self.timers.peek() {
                if self.buckets[b as usize].deadline == Some(d) {
                    break;
                }
                self.timers.pop();
            }
            let timer = self.timers.peek().map(|&Reverse((d, _))| d).map(|d| {
                if d <= now {
                    Duration::ZERO
                } else {
                    Duration::from_micros((d - now).total_micros())
                }
            });
            let wait = match (left, timer) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            if self.port.tx_pending() || self.neigh.has_pending() {
                // TX left in the ring (budget) or a neighbour being resolved: come back soon.
                let w = wait.map_or(Duration::from_micros(200), |w| w.min(Duration::from_micros(200)));
                std::thread::sleep(w);
                continue;
            }
            if busy {
                if wait == Some(Duration::ZERO) || left == Some(Duration::ZERO) {
                    continue;
                }
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
        let c = self.conn(conn)?;
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
                self.counters.closed += 1;
                self.pending.push(Event::Closed(conn));
            }
        } else {
            // The window opened: let egress send an update if smoltcp wants to.
            self.mark_dirty(b);
        }
        Ok(total)
    }

    fn send(&mut self, conn: ConnId, data: &[u8]) -> Result<usize, TransportError> {
        let c = self.conn(conn)?;
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
        if n < data.len() {
            self.conns.get_mut(conn).expect("checked above").blocked = true;
        }
        if n > 0 {
            self.mark_dirty(b);
        }
        Ok(n)
    }

    fn close(&mut self, conn: ConnId) {
        let Some(c) = self.conns.remove(conn) else { return };
        let b = c.bucket as usize;
        let bucket = &mut self.buckets[b];
        if let Some(i) = bucket.members.iter().position(|m| *m == conn) {
            bucket.members.swap_remove(i);
        }
        bucket.sockets.get_mut::<tcp::Socket>(c.handle).close();
        bucket.closing.push((c.handle, c.local_port));
        self.mark_dirty(b as u32);
    }

    fn flush(&mut self) -> Result<(), TransportError> {
        if self.dirty.is_empty() && !self.port.tx_pending() {
            return Ok(());
        }
        let now = self.now();
        self.egress_and_scan(now);
        self.port.flush().map_err(backend_err)
    }

    fn local_addr(&self, listener: ListenerId) -> Option<SocketAddrV4> {
        self.listeners.get(listener.0 as usize).copied().flatten().map(|p| SocketAddrV4::new(self.addr, p))
    }

    fn peer_addr(&self, conn: ConnId) -> Option<SocketAddrV4> {
        let c = self.conns.get(conn)?;
        let s = self.buckets[c.bucket as usize].sockets.get::<tcp::Socket>(c.handle);
        match s.remote_endpoint()? {
            IpEndpoint { addr: smoltcp::wire::IpAddress::Ipv4(a), port } => Some(SocketAddrV4::new(a, port)),
            #[allow(unreachable_patterns)]
            _ => None,
        }
    }

    fn name(&self) -> &'static str {
        "xsk"
    }
}

impl Drop for XskTransport {
    fn drop(&mut self) {
        // Tell peers we are gone rather than leaving half-open connections.
        for b in &mut self.buckets {
            for (_, s) in b.sockets.iter_mut() {
                #[allow(irrefutable_let_patterns)]
                if let smoltcp::socket::Socket::Tcp(t) = s {
                    if t.is_active() {
                        t.abort();
                    }
                }
            }
            b.dirty = true;
        }
        let now = self.now();
        self.dirty = (0..self.buckets.len() as u32).collect();
        self.egress_and_scan(now);
        let _ = self.port.drain_tx(Duration::from_millis(100));
        let _ = self.poll.registry().deregister(&mut self.port);
        let _ = self.reserved_ports.take();
    }
}
