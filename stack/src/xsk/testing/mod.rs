//! The engine without an operating system: an in-memory link, a
//! [`Transport`] over it with a clock the caller moves, two of them wired
//! back to back, and frame builders. Unit tests, the scripted-peer tests and
//! the fuzzer drive the same engine the AF_XDP driver does, as an ordinary
//! user and deterministically. Public are the frame builders (`frames`, for
//! the integration tests) and the fuzzer (`fuzz`, for `stack-fuzz`); the
//! in-memory link and transport are the crate's own.

pub mod frames;
pub mod fuzz;

use std::collections::VecDeque;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::Duration;

use bytes::BytesMut;
use smoltcp::phy;
use smoltcp::time::Instant;

pub(crate) use super::arp::request_target as arp_target;
use super::engine::{Engine, EngineConfig, EngineSetup, Link};
use super::faults::{FaultState, Faults, Faulty, RxFrames};
use crate::transport::{ConnId, Event, ListenerId, Transport, TransportError};

/// Frames sent by an engine, kept in memory.
#[derive(Debug)]
pub(crate) struct MemLink {
    pub(crate) out: Vec<Vec<u8>>,
    /// Frames the link takes before it reports no room (a full TX ring).
    pub(crate) capacity: usize,
    pub(crate) mtu: usize,
    /// Frames written while there was no room (dropped, as a full ring does).
    pub(crate) dropped: u64,
    /// Offload TCP checksums as the AF_XDP port does with TX metadata: the
    /// engine leaves them, this link writes the pseudo-header sum and then
    /// completes it the way a device completes CHECKSUM_PARTIAL.
    pub(crate) csum_offload: bool,
    /// Frames whose checksum this link completed.
    pub(crate) offloaded: u64,
}

impl MemLink {
    pub(crate) fn new() -> MemLink {
        MemLink { out: Vec::new(), capacity: 4096, mtu: 1500, dropped: 0, csum_offload: false, offloaded: 0 }
    }
}

impl Default for MemLink {
    fn default() -> Self {
        Self::new()
    }
}

pub(crate) struct MemTx<'a>(&'a mut MemLink);

impl phy::TxToken for MemTx<'_> {
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
        let mut buf = vec![0u8; len];
        let r = f(&mut buf);
        if self.0.csum_offload {
            if let Some(start) = super::csum::fill_tcp_pseudo(&mut buf) {
                let start = start as usize;
                let sum = !super::csum::data(&buf[start..]);
                let at = start + super::csum::TCP_CSUM_OFFSET as usize;
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

/// An engine configuration for tests: `addr`/24 with MAC `02:00:00:00:00:<last octet>`.
pub(crate) fn config(addr: Ipv4Addr) -> EngineSetup {
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
        accept_partial_csum: false,
        seed: 1,
    }
}

/// The MAC tests give `addr`.
pub(crate) fn mac_of(addr: Ipv4Addr) -> [u8; 6] {
    [2, 0, 0, 0, 0, addr.octets()[3]]
}

/// The engine behind the [`Transport`] trait, over a [`MemLink`] (behind
/// the fault injector once `set_faults` asks for it, as the driver does).
/// Time moves only when the caller says (`advance`); `poll` never sleeps.
pub(crate) struct MemTransport {
    pub(crate) engine: Engine,
    pub(crate) link: MemLink,
    /// Frames waiting to be received.
    pub(crate) inbox: VecDeque<Vec<u8>>,
    pub(crate) now: Instant,
    /// The fault injector's state, when faults are configured.
    pub(crate) faults: Option<FaultState<Vec<u8>>>,
}

impl MemTransport {
    pub(crate) fn new(cfg: EngineSetup) -> MemTransport {
        let mut link = MemLink::new();
        let now = Instant::from_millis(1);
        let engine = Engine::new(cfg, now, &mut link);
        MemTransport { engine, link, inbox: VecDeque::new(), now, faults: None }
    }

    /// Puts the fault injector between the engine and the link.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn set_faults(&mut self, faults: Faults) {
        self.faults = faults.any().then(|| FaultState::new(faults));
    }

    /// The inbox into the engine, through the injector when there is one.
    fn ingest(&mut self) {
        let (engine, now) = (&mut self.engine, self.now);
        match &mut self.faults {
            None => {
                while let Some(f) = self.inbox.pop_front() {
                    let _ = engine.ingest(now, &f, &mut self.link);
                }
            }
            Some(state) => {
                let mut link = Faulty::new(&mut self.link, state);
                let deliver = &mut |l: &mut Faulty<&mut MemLink>, f: &Vec<u8>| {
                    let _ = engine.ingest(now, f, l);
                };
                while let Some(f) = self.inbox.pop_front() {
                    link.receive(f, deliver);
                }
                link.deliver_held(deliver);
            }
        }
    }

    fn egress(&mut self) {
        match &mut self.faults {
            None => self.engine.egress(self.now, &mut self.link),
            Some(state) => self.engine.egress(self.now, &mut Faulty::new(&mut self.link, state)),
        }
    }

    pub(crate) fn advance(&mut self, d: Duration) {
        self.now += d.into();
    }

    /// Runs egress now (timers due, touched buckets).
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn tick(&mut self) {
        self.egress();
    }

    /// Takes the frames sent so far.
    pub(crate) fn take_sent(&mut self) -> Vec<Vec<u8>> {
        std::mem::take(&mut self.link.out)
    }
}

impl Transport for MemTransport {
    fn listen(&mut self, port: u16) -> Result<ListenerId, TransportError> {
        self.engine.listen(port)
    }

    fn connect(&mut self, addr: SocketAddrV4) -> Result<ConnId, TransportError> {
        self.engine.connect(addr, &mut |_| true)
    }

    fn poll(&mut self, events: &mut Vec<Event>, _timeout: Option<Duration>) -> Result<(), TransportError> {
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

    fn recv(&mut self, conn: ConnId, buf: &mut BytesMut) -> Result<usize, TransportError> {
        self.engine.recv(conn, buf)
    }

    fn send(&mut self, conn: ConnId, data: &[u8]) -> Result<usize, TransportError> {
        self.engine.send(conn, data)
    }

    fn close(&mut self, conn: ConnId) {
        self.engine.close(conn)
    }

    fn shutdown_write(&mut self, conn: ConnId) -> Result<(), TransportError> {
        self.engine.shutdown_write(conn)
    }

    fn recv_drains(&self) -> bool {
        true
    }

    fn flush(&mut self) -> Result<(), TransportError> {
        self.egress();
        Ok(())
    }

    fn local_addr(&self, listener: ListenerId) -> Option<SocketAddrV4> {
        self.engine.local_addr(listener)
    }

    fn peer_addr(&self, conn: ConnId) -> Option<SocketAddrV4> {
        self.engine.peer_addr(conn)
    }

    fn name(&self) -> &'static str {
        "mem"
    }
}

/// What a [`Pair`]'s wire does to the frames in flight.
#[cfg(test)]
pub(crate) type Filter = Box<dyn FnMut(Vec<Vec<u8>>) -> Vec<Vec<u8>>>;

#[cfg(test)]
/// Two engines on one in-memory wire: `a` at 198.18.0.1, `b` at 198.18.0.2.
pub(crate) struct Pair {
    pub(crate) a: MemTransport,
    pub(crate) b: MemTransport,
    /// Frames in flight are passed through this before delivery (drop,
    /// reorder, duplicate); `None` delivers everything in order.
    pub(crate) filter: Option<Filter>,
}

#[cfg(test)]
impl Pair {
    pub(crate) const A: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
    pub(crate) const B: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);

    pub(crate) fn new() -> Pair {
        Self::with(config(Self::A), config(Self::B))
    }

    pub(crate) fn with(a: EngineSetup, b: EngineSetup) -> Pair {
        let mut p = Pair { a: MemTransport::new(a), b: MemTransport::new(b), filter: None };
        // Each side learns the other as a shared-mode driver would.
        let (ma, mb) = (mac_of(Self::A), mac_of(Self::B));
        let now = p.a.now;
        p.a.engine.add_neighbour(now, Self::B, mb, &mut p.a.link);
        p.b.engine.add_neighbour(now, Self::A, ma, &mut p.b.link);
        p
    }

    /// Moves sent frames to the other side; returns how many moved. ARP
    /// requests for the other side are answered the way the shared-mode
    /// driver answers them (from the kernel's table).
    pub(crate) fn exchange(&mut self) -> usize {
        let mut ab = self.a.take_sent();
        let mut ba = self.b.take_sent();
        if ab.iter().any(|f| arp_target(f) == Some(Self::B)) {
            let now = self.a.now;
            self.a.engine.add_neighbour(now, Self::B, mac_of(Self::B), &mut self.a.link);
        }
        if ba.iter().any(|f| arp_target(f) == Some(Self::A)) {
            let now = self.b.now;
            self.b.engine.add_neighbour(now, Self::A, mac_of(Self::A), &mut self.b.link);
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
    pub(crate) fn settle(&mut self, rounds: usize) -> (Vec<Event>, Vec<Event>) {
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
    pub(crate) fn advance(&mut self, d: Duration) {
        self.a.advance(d);
        self.b.advance(d);
    }
}


#[cfg(test)]
impl Default for Pair {
    fn default() -> Self {
        Self::new()
    }
}

/// The engine's answer to the SYN `syn` when it answers every SYN with a
/// cookie (`SynCookies::Always`), at `at` on its clock, and what the XDP
/// program needs to answer the same SYN the same way (`epoch_ns` left 0 for
/// the caller). The engine has address 198.18.0.1 and MAC
/// `02:00:00:00:00:01` ([`frames::TcpSpec`]'s default destination), takes
/// partial TCP checksums if `accept_partial`, and listens on `syn`'s
/// destination port; `None` if it sent nothing. For the root test that runs
/// the XDP program on the same SYNs.
pub fn cookie_answer(syn: &[u8], at: Duration, accept_partial: bool) -> (Option<Vec<u8>>, xsk_io::syncookies::CookieParams) {
    let mut cfg = config(Ipv4Addr::new(198, 18, 0, 1));
    cfg.syn_cookies = crate::xsk::SynCookies::Always;
    cfg.accept_partial_csum = accept_partial;
    let mut t = MemTransport::new(cfg);
    if let Some(s) = frames::parse_tcp(syn) {
        let _ = t.listen(s.dport);
    }
    t.now = Instant::from_micros(at.as_micros() as i64);
    t.take_sent();
    t.inbox.push_back(syn.to_vec());
    t.ingest();
    let sent = t.take_sent().into_iter().next();
    (sent, super::open::cookie_params(&t.engine, t.link.mtu, 0))
}
