//! What the root integration tests share: a veth lab whose kernel peer keeps
//! its default offloads, the stack's configuration in it, and an echo server
//! on the stack in a thread of its own.
// Each test binary compiles this module and uses a part of it.
#![allow(dead_code)]

use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use stack::codec::LengthPrefixed;
use stack::rr::{Echo, Server, ServerConfig, ServerStats};
use stack::transport::Transport;
use stack::Waker;
use stack::xsk::{AddrMode, StackStats, XskConfig, XskTransport};
use xsk_io::port::Accounting;
use xsk_io::AttachMode;
use xsk_lab::lab::{Lab, LabConfig, Netns};

/// The largest echo frame the servers accept.
pub const MAX_FRAME: usize = 2 << 20;

/// A closed-loop load of `n` requests over `conns` connections at `depth`, with
/// bounds (60 s, 5 s to connect, 10 s to drain) that only a stuck run reaches.
pub fn closed_loop(to: impl Into<std::net::SocketAddr>, conns: usize, depth: usize, n: u64) -> rr_load::ClientConfig {
    rr_load::ClientConfig::new(to)
        .with_connections(conns)
        .with_mode(rr_load::LoadMode::ClosedLoop { depth })
        .with_duration(Duration::from_secs(60))
        .with_max_requests(Some(n))
        .with_connect_timeout(Duration::from_secs(5))
        .with_drain_timeout(Duration::from_secs(10))
}

/// A fresh lab named `tag` (unique per test: the runner runs tests in
/// parallel), after removing what a killed run of the same test left. Both
/// ends keep veth's default offloads (TX checksum, GSO), as a user's veth or
/// container has: the stack must serve their partial checksums.
pub fn lab(tag: &str) -> Lab {
    // SAFETY: geteuid has no preconditions.
    assert_eq!(unsafe { libc::geteuid() }, 0, "this integration test needs root");
    xsk_lab::lab::sweep_stale(tag);
    Lab::new(&LabConfig { prefix: tag.into(), ..LabConfig::default() }).expect("lab")
}

/// [`lab`] with IPv6 left on in both namespaces (the lab turns it off by default).
pub fn lab_v6(tag: &str) -> Lab {
    // SAFETY: geteuid has no preconditions.
    assert_eq!(unsafe { libc::geteuid() }, 0, "this integration test needs root");
    xsk_lab::lab::sweep_stale(tag);
    Lab::new(&LabConfig { prefix: tag.into(), disable_ipv6: false, ..LabConfig::default() }).expect("lab")
}

/// The stack's own address on the lab's subnet (the kernel does not have it).
pub fn dedicated(lab: &Lab) -> (AddrMode, Ipv4Addr) {
    let o = lab.addr_a.octets();
    let a = Ipv4Addr::new(o[0], o[1], o[2], 100);
    (AddrMode::Dedicated { addr: a, prefix_len: lab.prefix_len }, a)
}

/// The stack on the lab's `a` side. `auto` attach, as a user gets: native
/// mode on veth, where veth keeps a peer with default offloads from sending
/// GSO packets larger than a frame (generic mode would pass them whole and
/// the copy-mode socket drop them; the port warns about that at startup).
pub fn xsk_cfg(lab: &Lab, mode: AddrMode) -> XskConfig {
    let mut c = XskConfig::new(&lab.if_a, mode);
    c.port.attach = AttachMode::Auto;
    c
}

/// What an echo server on the stack saw, after its connections closed.
type Finished = (ServerStats, StackStats, Result<Accounting, String>);

/// An echo server on the stack in a namespace, in a thread of its own. It
/// stops on `finish`, at its time limit, or when dropped (a failed test
/// does not wait for it).
pub struct XskServer {
    stop: Arc<AtomicBool>,
    /// Ends the loop's sleep (it has no timeout).
    waker: Waker,
    /// The server thread's id (for its counters in /proc).
    pub tid: i32,
    handle: Option<JoinHandle<Finished>>,
}

/// An echo server on port `port` of the stack in `ns`, as rr-server runs
/// one: it sleeps without a timeout, and `finish` wakes it.
pub fn xsk_server(ns: &Netns, cfg: XskConfig, port: u16) -> XskServer {
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let ns = ns.clone();
    let (tx, rx) = mpsc::channel();
    let handle = thread::spawn(move || {
        let _in = ns.enter().unwrap();
        let mut t = XskTransport::new(cfg).expect("xsk transport");
        let waker = t.waker().expect("the xsk backend's waker");
        let scfg = ServerConfig::default().with_port(port).with_poll_timeout(None);
        let mut server = Server::new(t, LengthPrefixed::new(MAX_FRAME), Echo, scfg).unwrap();
        // SAFETY: gettid has no preconditions.
        tx.send((waker, unsafe { libc::gettid() })).unwrap();
        let limit = Instant::now() + Duration::from_secs(120);
        server.run_until_deadline(Some(limit), || stop2.load(Ordering::Relaxed)).unwrap();
        let stats = server.stats();
        let (mut t, _) = server.into_parts();
        // Let closing connections finish (their FINs and ACKs) before counting.
        let end = Instant::now() + Duration::from_secs(2);
        let mut ev = Vec::new();
        while Instant::now() < end && t.stats().live_sockets != t.listening_sockets() {
            let _ = t.poll(&mut ev, Some(Duration::from_millis(10)));
            ev.clear();
        }
        let audit = t.audit();
        (stats, t.stats(), audit)
    });
    let (waker, tid) = rx.recv_timeout(Duration::from_secs(10)).expect("xsk server did not start");
    XskServer { stop, waker, tid, handle: Some(handle) }
}

impl XskServer {
    /// Stops the server: its request counters and the stack's.
    pub fn finish(self) -> (ServerStats, StackStats) {
        let (s, st, _) = self.join();
        (s, st)
    }

    /// `finish`, and the audit of the port's frames, which must account for
    /// every frame.
    pub fn finish_all(self) -> (ServerStats, StackStats, Accounting) {
        let (s, st, a) = self.join();
        (s, st, a.expect("frame accounting"))
    }

    fn join(mut self) -> Finished {
        self.halt();
        self.handle.take().unwrap().join().expect("server thread panicked")
    }
}

impl XskServer {
    fn halt(&self) {
        self.stop.store(true, Ordering::Relaxed);
        self.waker.wake();
    }
}

impl Drop for XskServer {
    fn drop(&mut self) {
        self.halt();
    }
}

/// Fills the TCP checksum of an Ethernet/IPv4 (20-byte header)/TCP frame built by `pktgen`.
pub fn tcp_checksum(f: &mut [u8]) {
    let l4_len = f.len() - 34;
    f[50] = 0;
    f[51] = 0;
    let mut pseudo = 0u32;
    for w in f[26..34].chunks(2) {
        pseudo += u16::from_be_bytes([w[0], w[1]]) as u32;
    }
    pseudo += 6 + l4_len as u32;
    let c = xsk_lab::pktgen::checksum(&f[34..], pseudo);
    f[50..52].copy_from_slice(&c.to_be_bytes());
}
