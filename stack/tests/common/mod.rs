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
use stack::xsk::{AddrMode, StackStats, XskConfig, XskTransport};
use xsk_io::port::Accounting;
use xsk_io::AttachMode;
use xsk_lab::lab::{Lab, LabConfig, Netns};

/// The largest echo frame the servers accept.
pub const MAX_FRAME: usize = 2 << 20;

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
    handle: Option<JoinHandle<Finished>>,
}

/// An echo server on port `port` of the stack in `ns`, polling every 5 ms.
pub fn xsk_server(ns: &Netns, cfg: XskConfig, port: u16) -> XskServer {
    xsk_server_polling(ns, cfg, port, Duration::from_millis(5))
}

/// `xsk_server` whose loop waits up to `poll_timeout` for work (it sees the
/// stop flag after that).
pub fn xsk_server_polling(ns: &Netns, cfg: XskConfig, port: u16, poll_timeout: Duration) -> XskServer {
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let ns = ns.clone();
    let (tx, rx) = mpsc::channel();
    let handle = thread::spawn(move || {
        let _in = ns.enter().unwrap();
        let t = XskTransport::new(cfg).expect("xsk transport");
        let scfg = ServerConfig::default().with_port(port).with_poll_timeout(Some(poll_timeout));
        let mut server = Server::new(t, LengthPrefixed::new(MAX_FRAME), Echo, scfg).unwrap();
        tx.send(()).unwrap();
        let limit = Instant::now() + Duration::from_secs(120);
        server.run_until(|| stop2.load(Ordering::Relaxed) || Instant::now() > limit).unwrap();
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
    rx.recv_timeout(Duration::from_secs(10)).expect("xsk server did not start");
    XskServer { stop, handle: Some(handle) }
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
        self.stop.store(true, Ordering::Relaxed);
        self.handle.take().unwrap().join().expect("server thread panicked")
    }
}

impl Drop for XskServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
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
