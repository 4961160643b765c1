//! The engine: smoltcp's interface, the socket buckets, the connection
//! slab, listeners, half-open connections, the socket pool and the timers.
//! Its `impl` is spread over the files named for what they do (`ingest`,
//! `egress`, `connections`, `lifecycle`, `cookies`, ...); the order the
//! driver calls them in is in the crate docs.

mod bucket;
mod config;
mod connections;
mod cookies;
mod peer_memory;
mod peers;
mod due;
mod egress;
mod ingest;
mod lifecycle;
mod link;
mod neighbours;
mod path_mtu;
mod ports;

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::time::Duration;

use smoltcp::iface::{Config, Interface, SocketSet};
use smoltcp::socket::tcp;
use smoltcp::time::Instant;
use smoltcp::wire::{EthernetAddress, HardwareAddress, IpCidr};

use crate::demux::RxRules;
use crate::conn::{ConnSlab, Event};
use bucket::{Bucket, Conn};
pub use config::{Congestion, EngineConfig, EngineSetup, EngineStats};
pub use cookies::{CookieTemplate, SynCookies};
use link::SmolDev;
pub use link::Link;
pub use ports::PortChange;
use ports::PortTable;

/// The sans-IO TCP engine. See the crate docs for the order of calls.
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
    cfg: EngineSetup,
    rules: RxRules,
    /// The last TCP segment in had a partial checksum: the next is checked
    /// for one first (`demux::inspect_expecting`).
    partial_csum_seen: bool,
    /// Half-open connections over all buckets.
    half_open: usize,
    /// `EngineStats::fast_egress` (outside `stats`, which the twin tests compare
    /// with an engine that has no fast path).
    fast_egresses: u64,
    /// `EngineStats::sent_now` (outside `stats`, as `fast_egresses`).
    sent_now: u64,
    /// `EngineStats::acks_quiet` (outside `stats`, as `fast_egresses`).
    acks_quiet: u64,
    /// Bucket timers, earliest first: at most one live entry per bucket (its
    /// `queued`), at or before its deadline; other entries are stale and
    /// skipped.
    timers: BinaryHeap<Reverse<due::Due>>,
    /// For SYNs that must be refused: smoltcp answers a segment that finds
    /// no socket with RST.
    no_sockets: SocketSet<'static>,
    /// The latest time given to the engine (recv/send carry none).
    clock: Instant,
    next_sweep: Instant,
    /// Sockets in the buckets' closing lists.
    closing: usize,
    /// Peers taught to smoltcp from their frames.
    neighbours: neighbours::Learned,
    /// Buckets with `wants_acks_now` set.
    buckets_wanting_acks: usize,
    /// Keep `buckets_wanting_acks` up to date (deferred ACKs are on): a pass over each
    /// egressed bucket's sockets, which nobody else needs.
    track_acks: bool,
    /// Peers known to delay their ACKs (tail-loss probe allowance).
    peer_memory: peer_memory::PeerMemory,
    /// Makes and checks SYN cookies (holds their key).
    cookie_codec: cookies::CookieCodec,
    /// Until when an ACK that matches no connection may return a cookie
    /// (two periods after the last one sent; checking costs a hash).
    cookies_until: Instant,
    /// Whether the steering program answers SYNs with cookies (`steering_answers_syns`).
    steering_cookies: cookies::SteeringCookies,
    /// The device's receive queue at the last `set_receive_queue`: its read and
    /// arrival positions, if frames were waiting.
    rx_queue: Option<(u32, u32)>,
    /// Timer-driven retransmissions wait until the receive queue is read up to here.
    retransmit_gate: Option<u32>,
}

const SWEEP_EVERY: Duration = Duration::from_secs(1);

impl Engine {
    /// A new engine; `link` gives the MTU.
    pub fn new<L: Link>(cfg: EngineSetup, now: Instant, link: &mut L) -> Engine {
        let nb = cfg.tcp.bucket_count();
        let mut icfg = Config::new(HardwareAddress::Ethernet(EthernetAddress(cfg.mac)));
        icfg.random_seed = cfg.seed;
        let mut dev = SmolDev { rx: None, link };
        let mut iface = Interface::new(icfg, &mut dev, now);
        iface.update_ip_addrs(|a| {
            let _ = a.push(IpCidr::new(cfg.addr.into(), cfg.prefix_len));
            if let Some(a6) = cfg.addr6 {
                let _ = a.push(IpCidr::new(a6.into(), cfg.prefix6_len));
            }
        });
        if let Some(gw) = cfg.gateway {
            let _ = iface.routes_mut().add_default_ipv4_route(gw);
        }
        if let Some(gw) = cfg.gateway6 {
            let _ = iface.routes_mut().add_default_ipv6_route(gw);
        }
        iface.set_fast_send(cfg.tcp.fast_path);
        let rules = RxRules {
            mac: cfg.mac,
            addr: cfg.addr,
            prefix_len: cfg.prefix_len,
            accept_partial: cfg.accept_partial_csum,
            addr6: cfg.addr6,
            prefix6_len: cfg.prefix6_len,
        };
        Engine {
            iface,
            buckets: (0..nb).map(|_| Bucket::new()).collect(),
            dirty: Vec::with_capacity(nb),
            conns: ConnSlab::with_capacity(cfg.tcp.max_conns),
            listeners: Vec::new(),
            pending: Vec::new(),
            stats: EngineStats::default(),
            pool: Vec::new(),
            ports: PortTable::new(cfg.tcp.ephemeral.clone()),
            rules,
            partial_csum_seen: false,
            half_open: 0,
            fast_egresses: 0,
            sent_now: 0,
            acks_quiet: 0,
            timers: BinaryHeap::new(),
            no_sockets: SocketSet::new(Vec::new()),
            clock: now,
            next_sweep: now + SWEEP_EVERY.into(),
            closing: 0,
            neighbours: neighbours::Learned::default(),
            buckets_wanting_acks: 0,
            track_acks: false,
            peer_memory: peer_memory::PeerMemory::new(cfg.tcp.recovery.ack_delay_max),
            cookie_codec: cookies::CookieCodec::new(cfg.seed),
            cookies_until: now,
            steering_cookies: cookies::SteeringCookies::default(),
            rx_queue: None,
            retransmit_gate: None,
            cfg,
        }
    }

    /// Our address.
    pub fn addr(&self) -> Ipv4Addr {
        self.cfg.addr
    }

    /// Our IPv6 address, if we have one.
    pub fn addr6(&self) -> Option<Ipv6Addr> {
        self.cfg.addr6
    }

    /// How many socket buckets there are.
    pub fn buckets(&self) -> usize {
        self.buckets.len()
    }

    /// What the engine checks received frames against.
    pub fn rules(&self) -> &RxRules {
        &self.rules
    }

    /// The counters, with the live ones (sockets, connections, recovery) summed now.
    pub fn stats(&self) -> EngineStats {
        let mut s = self.stats;
        s.live_sockets = self.buckets.iter().map(|b| b.sockets.iter().count() + b.listen.iter().count()).sum();
        s.pooled_sockets = self.pool.len();
        s.listening = self.buckets.iter().map(|b| b.listeners.len()).sum();
        s.half_open = self.half_open;
        s.connections = self.conns.len();
        s.fast_path = self.buckets.iter().map(|b| b.fast_hits).sum();
        s.fast_send = self.iface.fast_sends();
        s.fast_egress = self.fast_egresses;
        s.sent_now = self.sent_now;
        s.acks_quiet = self.acks_quiet;
        // Live sockets' counters; recycled ones were added as they went.
        for b in &self.buckets {
            for (_, sock) in b.sockets.iter() {
                #[allow(irrefutable_let_patterns)]
                if let smoltcp::socket::Socket::Tcp(t) = sock {
                    s.recovery.add(t.recovery_stats());
                }
            }
        }
        s
    }

    /// The buckets where the fast path took or sent a segment since `seen` was last
    /// updated (it holds each bucket's count then), or all of them: what the fuzzer's twin
    /// compares.
    pub fn fast_buckets(&self, seen: &mut Vec<u64>, all: bool) -> Vec<usize> {
        seen.resize(self.buckets.len(), 0);
        let mut v = Vec::new();
        for (i, b) in self.buckets.iter().enumerate() {
            let n = b.fast_hits + b.fast_sent;
            if all || seen[i] != n {
                seen[i] = n;
                v.push(i);
            }
        }
        v
    }

    /// The whole state of every socket of `buckets` (smoltcp's `Debug`: sequence numbers,
    /// buffers, timers, RTT and congestion state), and the counters but the fast path's:
    /// what the tests and the fuzzer compare between an engine that takes the fast path
    /// and one that gives every segment to smoltcp's general path.
    /// Listening sockets (which the fast path never sees) only with `listeners`.
    pub fn dump_state(&self, buckets: &[usize], listeners: bool, out: &mut String) {
        use std::fmt::Write;
        for &i in buckets {
            let b = &self.buckets[i];
            // When it is due next and whether it wants ACKs, however the engine came to
            // set them (an egress, `send_now`, a quiet ACK).
            let _ = writeln!(out, "{i} deadline {:?} wants_acks {}", b.deadline, b.wants_acks_now);
            for (h, s) in b.sockets.iter() {
                let _ = writeln!(out, "{i} {h} {s:?}");
            }
            for (h, s) in b.listen.iter().filter(|_| listeners) {
                let _ = writeln!(out, "{i} listening {h} {s:?}");
            }
        }
        // `self.stats`, not `stats()`: the fast path's count (which only one engine has)
        // is summed from the buckets there.
        let _ = writeln!(out, "{:?} {} {}", self.stats, self.half_open, self.conns.len());
    }

    /// Ports the driver must start or stop steering (and holding in the kernel).
    pub fn port_changes(&mut self) -> std::vec::Drain<'_, PortChange> {
        self.ports.changes()
    }

    /// Whether [`port_changes`](Self::port_changes) has any.
    pub fn has_port_changes(&self) -> bool {
        self.ports.has_changes()
    }

    /// Sets [`EngineConfig::ack_delay`] from now on: for every socket, the listening ones
    /// and the connections already open included.
    pub fn set_ack_delay(&mut self, delay: Option<std::time::Duration>) {
        self.cfg.tcp.ack_delay = delay;
        let d = delay.map(Into::into);
        for b in &mut self.buckets {
            for (_, s) in b.sockets.iter_mut().chain(b.listen.iter_mut()) {
                #[allow(irrefutable_let_patterns)]
                if let smoltcp::socket::Socket::Tcp(t) = s {
                    t.set_ack_delay(d);
                }
            }
        }
        // Pooled sockets take it when they are handed out (`new_socket`).
    }

    fn mark_dirty(&mut self, b: u32) {
        self.buckets[b as usize].unscanned = true;
        self.mark_dirty_app(b);
    }

    /// [`mark_dirty`](Self::mark_dirty) for the application's `recv` and `send`, which
    /// change nothing a scan reports (`recv` drains and reports the end itself; a
    /// short `send` waits for an ACK to report room).
    fn mark_dirty_app(&mut self, b: u32) {
        let bucket = &mut self.buckets[b as usize];
        if !bucket.dirty {
            bucket.dirty = true;
            self.dirty.push(b);
        }
    }

    /// Every bucket to the next egress: for what any socket may be waiting on (a
    /// neighbour resolved) or what concerns them all (shutdown). Rare by design: a pass
    /// over every bucket.
    fn mark_all_dirty(&mut self) {
        for b in 0..self.buckets.len() as u32 {
            self.mark_dirty(b);
        }
    }
}

#[cfg(test)]
mod buffer_tests;
#[cfg(test)]
mod cookie_tests;
#[cfg(test)]
mod fast_path_tests;
#[cfg(test)]
mod icmp_tests;
#[cfg(test)]
mod ipv6_tests;
#[cfg(test)]
mod listener_tests;
#[cfg(test)]
mod recovery_tests;
#[cfg(test)]
mod sack_tests;
#[cfg(test)]
mod socket_tests;
#[cfg(test)]
mod ack_delay_tests;
#[cfg(test)]
mod held_tests;
#[cfg(test)]
mod path_mtu_tests;
#[cfg(test)]
mod peer_tests;
#[cfg(test)]
mod tests;
