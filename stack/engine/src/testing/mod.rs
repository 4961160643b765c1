//! The engine without an operating system (feature `testing`): an in-memory
//! link, the engine over it with a clock the caller moves ([`MemTransport`],
//! with the same verbs as `stack::transport::Transport`, which `stack`
//! implements for it), two of them wired back to back ([`Pair`]), frame
//! builders ([`frames`]) and a seedable generator ([`Rng`]). The engine's
//! unit tests, `stack`'s scripted-peer tests and its fuzzer drive the same
//! engine the AF_XDP driver does, deterministically.

pub mod frames;

use std::collections::VecDeque;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4};
use std::time::Duration;

use bytes::BytesMut;
use smoltcp::phy;
use smoltcp::time::Instant;

pub use crate::arp::request_target as arp_target;
use crate::conn::{ConnId, Event, ListenerId, TransportError};
use crate::engine::{Engine, EngineConfig, EngineSetup, Link};
use crate::faults::{FaultState, Faults, Faulty, RxFrames};

/// Frames sent by an engine, kept in memory.
#[derive(Debug)]
pub struct MemLink {
    /// The frames sent, oldest first.
    pub out: Vec<Vec<u8>>,
    /// Frames the link takes before it reports no room (a full TX ring).
    pub capacity: usize,
    /// The MTU it reports.
    pub mtu: usize,
    /// Frames written while there was no room (dropped, as a full ring does).
    pub dropped: u64,
    /// Offload TCP checksums as the AF_XDP port does with TX metadata: the
    /// engine leaves them, this link writes the pseudo-header sum and then
    /// completes it the way a device completes CHECKSUM_PARTIAL.
    pub csum_offload: bool,
    /// Frames whose checksum this link completed.
    pub offloaded: u64,
}

impl MemLink {
    /// Room for 4,096 frames, MTU 1500, no offload.
    pub fn new() -> MemLink {
        MemLink { out: Vec::new(), capacity: 4096, mtu: 1500, dropped: 0, csum_offload: false, offloaded: 0 }
    }
}

impl Default for MemLink {
    fn default() -> Self {
        Self::new()
    }
}

/// A [`MemLink`]'s token for one frame.
pub struct MemTx<'a>(&'a mut MemLink);

impl phy::TxToken for MemTx<'_> {
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
        let mut buf = vec![0u8; len];
        let r = f(&mut buf);
        if self.0.csum_offload {
            if let Some(start) = crate::csum::fill_tcp_pseudo(&mut buf) {
                let start = start as usize;
                let sum = !crate::csum::data(&buf[start..]);
                let at = start + crate::csum::TCP_CSUM_OFFSET as usize;
                buf[at..at + 2].copy_from_slice(&sum.to_be_bytes());
                self.0.offloaded += 1;
            }
        }
        if self.0.out.len() < self.0.capacity {
            self.0.out.push(buf);
        } else {
            self.0.dropped += 1;
        }
        r
    }
}

impl Link for MemLink {
    type Tx<'a> = MemTx<'a>;

    fn tx(&mut self) -> MemTx<'_> {
        MemTx(self)
    }

    fn tx_ready(&mut self) -> bool {
        self.out.len() < self.capacity
    }

    fn mtu(&self) -> usize {
        self.mtu
    }

    fn csum_offload(&self) -> bool {
        self.csum_offload
    }
}

impl RxFrames for MemLink {
    type Frame = Vec<u8>;
    fn release(&mut self, _f: Vec<u8>) {}
}

/// An engine configuration for tests: `addr`/24 with MAC `02:00:00:00:00:<last octet>`,
/// and IPv6 address [`v6_of`]`(addr)`/64.
pub fn config(addr: Ipv4Addr) -> EngineSetup {
    EngineSetup {
        tcp: EngineConfig {
            buckets: 16,
            rx_buffer: 16 * 1024,
            tx_buffer: 16 * 1024,
            backlog: 64,
            ..EngineConfig::default()
        },
        mac: mac_of(addr),
        addr,
        prefix_len: 24,
        gateway: None,
        addr6: Some(v6_of(addr)),
        prefix6_len: 64,
        gateway6: None,
        accept_partial_csum: false,
        seed: 1,
    }
}

/// The IPv6 address tests give the host of IPv4 `addr`: 2001:2::<last octet> (the IPv6
/// benchmarking range).
pub fn v6_of(addr: Ipv4Addr) -> Ipv6Addr {
    Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, addr.octets()[3] as u16)
}

/// The MAC tests give `addr`.
pub fn mac_of(addr: Ipv4Addr) -> [u8; 6] {
    [2, 0, 0, 0, 0, addr.octets()[3]]
}

/// The engine with the verbs of a transport, over a [`MemLink`] (behind
/// the fault injector once `set_faults` asks for it, as the driver does).
/// Time moves only when the caller says (`advance`); `poll` never sleeps.
pub struct MemTransport {
    /// The engine.
    pub engine: Engine,
    /// Its link.
    pub link: MemLink,
    /// Frames waiting to be received.
    pub inbox: VecDeque<Vec<u8>>,
    /// Its clock.
    pub now: Instant,
    /// The fault injector's state, when faults are configured.
    pub faults: Option<FaultState<Vec<u8>>>,
}

impl MemTransport {
    /// An engine configured with `cfg`, its clock at 1 ms.
    pub fn new(cfg: EngineSetup) -> MemTransport {
        let mut link = MemLink::new();
        let now = Instant::from_millis(1);
        let engine = Engine::new(cfg, now, &mut link);
        MemTransport { engine, link, inbox: VecDeque::new(), now, faults: None }
    }

    /// Puts the fault injector between the engine and the link.
    pub fn set_faults(&mut self, faults: Faults) {
        self.faults = faults.any().then(|| FaultState::new(faults));
    }

    /// The inbox into the engine, through the injector (a pass-through when
    /// no fault is configured).
    pub fn ingest(&mut self) {
        let (engine, now) = (&mut self.engine, self.now);
        let mut link = Faulty::new(&mut self.link, self.faults.as_mut());
        let deliver = &mut |l: &mut Faulty<&mut MemLink>, f: &Vec<u8>| {
            let _ = engine.ingest(now, f, l);
        };
        while let Some(f) = self.inbox.pop_front() {
            link.receive(f, deliver);
        }
        link.deliver_held(deliver);
    }

    /// An egress pass: due timers, touched buckets.
    pub fn egress(&mut self) {
        self.engine.egress(self.now, &mut Faulty::new(&mut self.link, self.faults.as_mut()));
    }

    /// Moves the clock on by `d`.
    pub fn advance(&mut self, d: Duration) {
        self.now += d.into();
    }

    /// Runs egress now (timers due, touched buckets).
    pub fn tick(&mut self) {
        self.egress();
    }

    /// Takes the frames sent so far.
    pub fn take_sent(&mut self) -> Vec<Vec<u8>> {
        std::mem::take(&mut self.link.out)
    }
}

/// The verbs of `stack::transport::Transport`, which `stack` implements for this type by
/// calling these.
impl MemTransport {
    /// Listens on `port` (0: an ephemeral one).
    pub fn listen(&mut self, port: u16) -> Result<ListenerId, TransportError> {
        self.engine.listen(port)
    }

    /// Opens a connection to `addr`.
    pub fn connect(&mut self, addr: impl Into<SocketAddr>) -> Result<ConnId, TransportError> {
        self.engine.connect(addr, &mut |_| true)
    }

    /// Ingests the inbox, runs egress, and appends the events; never waits.
    pub fn poll(&mut self, events: &mut Vec<Event>, _timeout: Option<Duration>) -> Result<(), TransportError> {
        self.ingest();
        self.engine.scan_dirty();
        if self.engine.take_events(events) {
            return Ok(());
        }
        self.egress();
        for _ in self.engine.port_changes() {}
        self.engine.take_events(events);
        Ok(())
    }

    /// Reads what `conn` holds into `buf`.
    pub fn recv(&mut self, conn: ConnId, buf: &mut BytesMut) -> Result<usize, TransportError> {
        self.engine.recv(conn, buf)
    }

    /// Queues `data` on `conn` (an answer the fast path sends leaves now, as the driver's
    /// does: `Engine::send_now`); returns how much was taken.
    pub fn send(&mut self, conn: ConnId, data: &[u8]) -> Result<usize, TransportError> {
        let now = self.now;
        self.engine.send_now(conn, data, &mut Faulty::new(&mut self.link, self.faults.as_mut()), || now)
    }

    /// Closes `conn` gracefully and frees its id.
    pub fn close(&mut self, conn: ConnId) {
        self.engine.close(conn)
    }

    /// Sends FIN on `conn` after what is queued.
    pub fn shutdown_write(&mut self, conn: ConnId) -> Result<(), TransportError> {
        self.engine.shutdown_write(conn)
    }

    /// Always true: one `recv` takes all.
    pub fn recv_drains(&self) -> bool {
        true
    }

    /// Runs egress.
    pub fn flush(&mut self) -> Result<(), TransportError> {
        self.egress();
        Ok(())
    }

    /// A listener's address.
    pub fn local_addr(&self, listener: ListenerId) -> Option<SocketAddrV4> {
        self.engine.local_addr(listener)
    }

    /// A connection's peer.
    pub fn peer_addr(&self, conn: ConnId) -> Option<SocketAddrV4> {
        self.engine.peer_addr(conn)
    }

    /// A connection's peer, IPv4 or IPv6.
    pub fn peer_socket_addr(&self, conn: ConnId) -> Option<SocketAddr> {
        self.engine.peer_socket_addr(conn)
    }

    /// "mem".
    pub fn name(&self) -> &'static str {
        "mem"
    }
}

/// What a [`Pair`]'s wire does to the frames in flight.
pub type Filter = Box<dyn FnMut(Vec<Vec<u8>>) -> Vec<Vec<u8>>>;

/// Two engines on one in-memory wire: `a` at 198.18.0.1, `b` at 198.18.0.2.
pub struct Pair {
    /// The side at [`Pair::A`].
    pub a: MemTransport,
    /// The side at [`Pair::B`].
    pub b: MemTransport,
    /// Frames in flight are passed through this before delivery (drop,
    /// reorder, duplicate); `None` delivers everything in order.
    pub filter: Option<Filter>,
}

impl Pair {
    /// `a`'s address.
    pub const A: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
    /// `b`'s address.
    pub const B: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
    /// `a`'s IPv6 address ([`v6_of`]).
    pub const A6: Ipv6Addr = Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 1);
    /// `b`'s IPv6 address.
    pub const B6: Ipv6Addr = Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 2);

    /// Two engines with the test [`config`], each knowing the other's MAC.
    pub fn new() -> Pair {
        Self::with(config(Self::A), config(Self::B))
    }

    /// Two engines configured with `a` and `b`.
    pub fn with(a: EngineSetup, b: EngineSetup) -> Pair {
        let mut p = Pair { a: MemTransport::new(a), b: MemTransport::new(b), filter: None };
        // Each side learns the other as a shared-mode driver would.
        let (ma, mb) = (mac_of(Self::A), mac_of(Self::B));
        let now = p.a.now;
        p.a.engine.add_neighbour(now, Self::B, mb);
        p.b.engine.add_neighbour(now, Self::A, ma);
        p.a.engine.add_neighbour(now, Self::B6, mb);
        p.b.engine.add_neighbour(now, Self::A6, ma);
        p
    }

    /// Moves sent frames to the other side; returns how many moved. ARP
    /// requests for the other side are answered the way the shared-mode
    /// driver answers them (from the kernel's table).
    pub fn exchange(&mut self) -> usize {
        let mut ab = self.a.take_sent();
        let mut ba = self.b.take_sent();
        if ab.iter().any(|f| arp_target(f) == Some(Self::B)) {
            let now = self.a.now;
            self.a.engine.add_neighbour(now, Self::B, mac_of(Self::B));
        }
        if ba.iter().any(|f| arp_target(f) == Some(Self::A)) {
            let now = self.b.now;
            self.b.engine.add_neighbour(now, Self::A, mac_of(Self::A));
        }
        ab.retain(|f| arp_target(f).is_none());
        ba.retain(|f| arp_target(f).is_none());
        if let Some(f) = &mut self.filter {
            ab = f(ab);
            ba = f(ba);
        }
        let n = ab.len() + ba.len();
        self.b.inbox.extend(ab);
        self.a.inbox.extend(ba);
        n
    }

    /// Polls both sides and exchanges frames until nothing moves (or
    /// `rounds` pass), collecting each side's events.
    pub fn settle(&mut self, rounds: usize) -> (Vec<Event>, Vec<Event>) {
        let (mut ea, mut eb) = (Vec::new(), Vec::new());
        for _ in 0..rounds {
            let _ = self.a.poll(&mut ea, None);
            let _ = self.b.poll(&mut eb, None);
            let _ = self.a.flush();
            let _ = self.b.flush();
            if self.exchange() == 0 && self.a.inbox.is_empty() && self.b.inbox.is_empty() {
                break;
            }
        }
        (ea, eb)
    }

    /// Advances both clocks.
    pub fn advance(&mut self, d: Duration) {
        self.a.advance(d);
        self.b.advance(d);
    }
}


impl Default for Pair {
    fn default() -> Self {
        Self::new()
    }
}

/// splitmix64: fast, seedable, no dependency.
pub struct Rng(pub u64);

impl Rng {
    /// The next 64 random bits.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// True `per_mille` times in a thousand.
    pub fn chance(&mut self, per_mille: u64) -> bool {
        self.below(1000) < per_mille
    }
}
