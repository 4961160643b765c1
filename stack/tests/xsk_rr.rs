//! The AF_XDP stack against the kernel's TCP on the other side of a veth
//! pair, in both directions and both address modes. Needs root.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use stack::codec::LengthPrefixed;
use stack::kernel::{KernelConfig, KernelTransport};
use stack::rr::{Client, ClientConfig, ClientReport, Echo, EchoWorkload, LoadMode, Server, ServerConfig, ServerStats};
use stack::xsk::{AddrMode, XskConfig, XskTransport};
use xsk_io::lab::{Lab, LabConfig, Netns};
use xsk_io::AttachMode;

const MAX_FRAME: usize = 2 << 20;

fn lab(tag: &str) -> Lab {
    // SAFETY: geteuid has no preconditions.
    assert_eq!(unsafe { libc::geteuid() }, 0, "this integration test needs root");
    xsk_io::lab::sweep_stale(tag);
    let lab = Lab::new(&LabConfig { prefix: tag.into(), ..LabConfig::default() }).expect("lab");
    // Kernel TCP on veth leaves checksums to "hardware": turn that off so
    // frames carry real checksums, as from a real NIC.
    lab.disable_tx_offloads().expect("tx offloads off");
    lab
}

fn dedicated(lab: &Lab) -> (AddrMode, Ipv4Addr) {
    let o = lab.addr_a.octets();
    let a = Ipv4Addr::new(o[0], o[1], o[2], 100);
    (AddrMode::Dedicated { addr: a, prefix_len: lab.prefix_len }, a)
}

fn xsk_cfg(lab: &Lab, mode: AddrMode) -> XskConfig {
    let mut c = XskConfig::new(&lab.if_a, mode);
    c.port.attach = AttachMode::Skb;
    c
}

struct Running {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<(ServerStats, Result<xsk_io::port::Accounting, String>)>,
}

impl Running {
    fn finish(self) -> (ServerStats, xsk_io::port::Accounting) {
        self.stop.store(true, Ordering::Relaxed);
        let (s, a) = self.handle.join().expect("server thread panicked");
        (s, a.expect("frame accounting"))
    }
}

fn xsk_server(ns: &Netns, cfg: XskConfig, port: u16) -> Running {
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let ns = ns.clone();
    let (tx, rx) = mpsc::channel();
    let handle = thread::spawn(move || {
        let _in = ns.enter().unwrap();
        let t = XskTransport::new(cfg).expect("xsk transport");
        let scfg = ServerConfig { port, poll_timeout: Some(Duration::from_millis(5)), ..ServerConfig::default() };
        let mut server = Server::new(t, LengthPrefixed::new(MAX_FRAME), Echo, scfg).unwrap();
        tx.send(()).unwrap();
        let limit = Instant::now() + Duration::from_secs(120);
        server.run_until(|| stop2.load(Ordering::Relaxed) || Instant::now() > limit).unwrap();
        let stats = server.stats();
        let (mut t, _) = server.into_parts();
        let audit = t.audit();
        (stats, audit)
    });
    rx.recv_timeout(Duration::from_secs(10)).expect("xsk server did not start");
    Running { stop, handle }
}

fn kernel_client(ns: &Netns, bind: Ipv4Addr, cfg: ClientConfig, min: usize, max: usize) -> ClientReport {
    ns.run_in(move || {
        let t = KernelTransport::new(KernelConfig { bind, ..KernelConfig::default() }).unwrap();
        Client::new(t, LengthPrefixed::new(MAX_FRAME), EchoWorkload::random(min, max, 7), cfg).run().expect("client")
    })
    .unwrap()
}

fn cfg(addr: SocketAddrV4, conns: usize, depth: usize, n: u64) -> ClientConfig {
    ClientConfig {
        connections: conns,
        mode: LoadMode::ClosedLoop { depth },
        duration: Duration::from_secs(60),
        max_requests: Some(n),
        connect_timeout: Duration::from_secs(5),
        drain_timeout: Duration::from_secs(10),
        ..ClientConfig::new(addr)
    }
}

fn assert_clean(r: &ClientReport, n: u64) {
    assert_eq!(r.errors, 0, "{r}");
    assert_eq!(r.lost, 0, "{r}");
    assert_eq!(r.requests, n, "{r}");
}

#[test]
fn echo_random_sizes_stack_server_kernel_client_dedicated() {
    let lab = lab("sxd");
    let (mode, a) = dedicated(&lab);
    let srv = xsk_server(&lab.ns_a, xsk_cfg(&lab, mode), 7100);
    let r = kernel_client(&lab.ns_b, lab.addr_b, cfg(SocketAddrV4::new(a, 7100), 4, 1, 200), 1, 1 << 20);
    assert_clean(&r, 200);
    let (stats, acc) = srv.finish();
    assert_eq!(stats.requests, 200);
    assert_eq!(acc.app, 0);
}

#[test]
fn echo_random_sizes_stack_server_kernel_client_shared() {
    let lab = lab("sxs");
    let srv = xsk_server(&lab.ns_a, xsk_cfg(&lab, AddrMode::Shared), 7101);
    let r = kernel_client(&lab.ns_b, lab.addr_b, cfg(SocketAddrV4::new(lab.addr_a, 7101), 4, 1, 200), 1, 1 << 20);
    assert_clean(&r, 200);
    srv.finish();
}

#[test]
fn thousand_connections_hundred_requests_each() {
    let lab = lab("sxk");
    let (mode, a) = dedicated(&lab);
    let mut c = xsk_cfg(&lab, mode);
    c.max_conns = 2048;
    c.rx_buffer = 16 * 1024;
    c.tx_buffer = 16 * 1024;
    let srv = xsk_server(&lab.ns_a, c, 7102);
    let r = kernel_client(&lab.ns_b, lab.addr_b, cfg(SocketAddrV4::new(a, 7102), 1000, 1, 100_000), 16, 256);
    assert_clean(&r, 100_000);
    let (stats, _) = srv.finish();
    assert_eq!(stats.accepted, 1000);
}
