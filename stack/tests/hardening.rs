//! The stack in front of a network it does not control: impossible sources,
//! peers with default offloads, kernel programs on the same address,
//! connection limits, idle peers, and clients behind a router. Each test
//! would fail on the stack before its hardening. Needs root.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddrV4, TcpListener, TcpStream};
use std::process::Command;
use std::sync::mpsc;
use std::thread::{self};
use std::time::{Duration, Instant};

use rr_load::{Client, ClientConfig, ClientReport, EchoWorkload, LoadMode};
use stack::codec::LengthPrefixed;
use stack::kernel::{KernelConfig, KernelTransport};
use stack::transport::{Transport, TransportError};
use stack_engine::testing::frames::{tcp, TcpSpec};
use stack::xsk::{AddrMode, XskTransport};
use xsk_lab::lab::{Lab, Netns};

mod common;
use common::{lab, xsk_cfg, xsk_server};

fn kernel_client(ns: &Netns, addr: SocketAddrV4, n: u64) -> ClientReport {
    ns.run_in(move || {
        // Any local address: the kernel picks the route's.
        let t = KernelTransport::new(KernelConfig::default().with_bind(Ipv4Addr::UNSPECIFIED)).unwrap();
        let cfg = ClientConfig::new(addr)
            .with_connections(4)
            .with_mode(LoadMode::ClosedLoop { depth: 1 })
            .with_duration(Duration::from_secs(30))
            .with_max_requests(Some(n))
            .with_connect_timeout(Duration::from_secs(5))
            .with_drain_timeout(Duration::from_secs(10));
        Client::new(t, LengthPrefixed::new(1 << 20), EchoWorkload::random(1, 2000, 3), cfg).run().expect("client")
    })
    .unwrap()
}

fn assert_clean(r: &ClientReport, n: u64) {
    assert_eq!((r.errors, r.lost, r.requests), (0, 0, n), "{r}");
}

#[test]
fn a_syn_from_0_0_0_0_is_dropped_and_offloading_peers_are_served() {
    let lab = lab("hzs");
    let srv = xsk_server(&lab.ns_a, xsk_cfg(&lab, AddrMode::Shared), 7200);
    // One SYN from the unspecified address (smoltcp 0.12 panicked on it),
    // and a few from other impossible sources, through a raw socket.
    let (if_b, mac_a, mac_b, addr_a) = (lab.if_b.clone(), lab.mac_a, lab.mac_b, lab.addr_a);
    lab.ns_b
        .run_in(move || {
            let raw = xsk_lab::rawsock::RawSocket::open(&if_b).unwrap();
            for src in [Ipv4Addr::UNSPECIFIED, Ipv4Addr::BROADCAST, Ipv4Addr::new(224, 0, 0, 9), Ipv4Addr::LOCALHOST, addr_a] {
                let f = tcp(&TcpSpec { src_mac: mac_b, dst_mac: mac_a, src, dst: addr_a, sport: 1234, dport: 7200, ..TcpSpec::default() });
                raw.send(&f).unwrap();
            }
        })
        .unwrap();
    // The peer's kernel TCP keeps veth's TX checksum offload: partial checksums.
    let r = kernel_client(&lab.ns_b, SocketAddrV4::new(lab.addr_a, 7200), 300);
    assert_clean(&r, 300);
    let (_, st) = srv.finish();
    assert!(st.drops.bad_source >= 5, "{st:?}");
    assert!(st.rx_partial_csum > 0, "the peer's frames should carry partial checksums: {st:?}");
    assert_eq!(st.drops.bad_checksum, 0, "{st:?}");
}

#[test]
fn a_kernel_connection_on_a_port_in_the_stacks_ephemeral_range_keeps_running() {
    let lab = lab("hzk");
    // A kernel sink in ns_b, and a kernel sender in ns_a bound to local port
    // 45000 (inside the stack's ephemeral range, which shared mode does not
    // steer wholesale).
    let sink_addr = SocketAddrV4::new(lab.addr_b, 9100);
    let (ltx, lrx) = mpsc::channel();
    let sink = {
        let ns = lab.ns_b.clone();
        thread::spawn(move || {
            let _in = ns.enter().unwrap();
            let l = TcpListener::bind(sink_addr).unwrap();
            ltx.send(()).unwrap();
            let (mut s, _) = l.accept().unwrap();
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            let mut got = Vec::new();
            let r = s.read_to_end(&mut got);
            (got, r.err().map(|e| e.to_string()))
        })
    };
    lrx.recv_timeout(Duration::from_secs(5)).unwrap();
    let chunk: usize = 50_000;
    let total: usize = chunk * 60;
    let pattern = |i: usize| (i as u32).wrapping_mul(2_654_435_761).to_le_bytes()[i % 4];
    let (ctx, crx) = mpsc::channel::<()>();
    let sender = {
        let ns = lab.ns_a.clone();
        let local = lab.addr_a;
        thread::spawn(move || {
            let _in = ns.enter().unwrap();
            let s = socket_bound_to(local, 45000);
            let mut s = connect_from(s, sink_addr);
            ctx.send(()).unwrap();
            // Paced over about 3 s, so the stack starts, serves and stops meanwhile.
            for k in 0..60 {
                let buf: Vec<u8> = (k * chunk..(k + 1) * chunk).map(pattern).collect();
                s.write_all(&buf).unwrap();
                thread::sleep(Duration::from_millis(50));
            }
        })
    };
    crx.recv_timeout(Duration::from_secs(5)).unwrap();
    let srv = xsk_server(&lab.ns_a, xsk_cfg(&lab, AddrMode::Shared), 7201);
    let r = kernel_client(&lab.ns_b, SocketAddrV4::new(lab.addr_a, 7201), 200);
    assert_clean(&r, 200);
    srv.finish();
    sender.join().expect("the kernel sender stalled or failed");
    let (got, err) = sink.join().unwrap();
    assert_eq!(err, None);
    assert_eq!(got.len(), total, "bytes lost");
    assert!(got.iter().enumerate().all(|(i, b)| *b == pattern(i)), "bytes differ");
}

fn socket_bound_to(addr: Ipv4Addr, port: u16) -> std::os::fd::OwnedFd {
    use std::os::fd::FromRawFd;
    // SAFETY: plain syscall; the result is checked and then owned.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    assert!(fd >= 0);
    // SAFETY: fresh descriptor owned by nobody else.
    let fd = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
    let sa = sockaddr(addr, port);
    // SAFETY: `sa` is a valid sockaddr_in of the given size.
    let r = unsafe {
        libc::bind(
            std::os::fd::AsRawFd::as_raw_fd(&fd),
            &sa as *const _ as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_in>() as u32,
        )
    };
    assert_eq!(r, 0, "bind {addr}:{port}: {}", std::io::Error::last_os_error());
    fd
}

fn connect_from(fd: std::os::fd::OwnedFd, to: SocketAddrV4) -> TcpStream {
    let sa = sockaddr(*to.ip(), to.port());
    // SAFETY: `sa` is a valid sockaddr_in of the given size.
    let r = unsafe {
        libc::connect(
            std::os::fd::AsRawFd::as_raw_fd(&fd),
            &sa as *const _ as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_in>() as u32,
        )
    };
    assert_eq!(r, 0, "connect {to}: {}", std::io::Error::last_os_error());
    TcpStream::from(fd)
}

fn sockaddr(addr: Ipv4Addr, port: u16) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr { s_addr: u32::from(addr).to_be() },
        sin_zero: [0; 8],
    }
}

#[test]
fn listen_on_a_port_the_kernel_has_fails_and_a_stack_port_is_held() {
    let lab = lab("hzl");
    let (addr_a, cfg) = (lab.addr_a, xsk_cfg(&lab, AddrMode::Shared));
    lab.ns_a
        .run_in(move || {
            let kernel = TcpListener::bind((addr_a, 7300)).unwrap();
            let mut t = XskTransport::new(cfg).unwrap();
            match t.listen(7300) {
                Err(TransportError::AddrInUse(7300)) => {}
                other => panic!("listen on a kernel port: {other:?}"),
            }
            drop(kernel);
            t.listen(7301).unwrap();
            let e = TcpListener::bind((addr_a, 7301)).expect_err("the kernel took a port the stack listens on");
            assert_eq!(e.kind(), std::io::ErrorKind::AddrInUse);
            drop(t);
            TcpListener::bind((addr_a, 7301)).expect("the port goes back to the kernel when the stack stops");
        })
        .unwrap();
}

#[test]
fn syns_beyond_the_connection_limit_are_refused_at_once() {
    let lab = lab("hzc");
    let mut c = xsk_cfg(&lab, AddrMode::Shared);
    c.engine.max_conns = 8;
    let srv = xsk_server(&lab.ns_a, c, 7400);
    let to = SocketAddrV4::new(lab.addr_a, 7400);
    let (held, refused) = lab
        .ns_b
        .run_in(move || {
            let held: Vec<TcpStream> = (0..8).map(|_| TcpStream::connect_timeout(&to.into(), Duration::from_secs(3)).unwrap()).collect();
            let t0 = Instant::now();
            let e = TcpStream::connect_timeout(&to.into(), Duration::from_secs(3)).map(|_| ()).unwrap_err();
            (held.len(), (e.kind(), t0.elapsed()))
        })
        .unwrap();
    assert_eq!(held, 8);
    assert_eq!(refused.0, std::io::ErrorKind::ConnectionRefused, "{refused:?}");
    assert!(refused.1 < Duration::from_secs(1), "refused slowly: {refused:?}");
    let (_, st) = srv.finish();
    assert!(st.drops.conn_limit >= 1, "{st:?}");
}

#[test]
fn idle_connections_are_closed() {
    let lab = lab("hzi");
    let mut c = xsk_cfg(&lab, AddrMode::Shared);
    c.engine.idle_timeout = Some(Duration::from_secs(1));
    let srv = xsk_server(&lab.ns_a, c, 7500);
    let to = SocketAddrV4::new(lab.addr_a, 7500);
    let closed_after = lab
        .ns_b
        .run_in(move || {
            let mut s = TcpStream::connect_timeout(&to.into(), Duration::from_secs(3)).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            let t0 = Instant::now();
            let mut b = [0u8; 16];
            let _ = s.read(&mut b); // EOF or reset
            t0.elapsed()
        })
        .unwrap();
    assert!(closed_after >= Duration::from_millis(900) && closed_after < Duration::from_secs(5), "{closed_after:?}");
    let (_, st) = srv.finish();
    assert_eq!(st.idle_closed, 1, "{st:?}");
}

/// A third namespace behind `lab.ns_b` acting as a router, on 198.19.x.0/24.
struct Behind {
    ns: String,
    addr: Ipv4Addr,
}

impl Drop for Behind {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.ns]).status();
    }
}

fn ip(args: &[&str]) {
    let o = Command::new("ip").args(args).output().unwrap();
    assert!(o.status.success(), "ip {args:?}: {}", String::from_utf8_lossy(&o.stderr));
}

fn client_behind_router(lab: &Lab) -> Behind {
    let pid = std::process::id();
    let ns = format!("hzr-{pid}");
    let (v_r, v_c) = (format!("hr{}", pid % 1_000_000), format!("hc{}", pid % 1_000_000));
    let sub = (pid % 250) as u8;
    let (router, client) = (Ipv4Addr::new(198, 19, sub, 1), Ipv4Addr::new(198, 19, sub, 2));
    ip(&["netns", "add", &ns]);
    let b = Behind { ns: ns.clone(), addr: client };
    ip(&["link", "add", &v_r, "netns", &lab.ns_b.name, "type", "veth", "peer", "name", &v_c, "netns", &ns]);
    ip(&["-n", &lab.ns_b.name, "addr", "add", &format!("{router}/24"), "dev", &v_r]);
    ip(&["-n", &lab.ns_b.name, "link", "set", &v_r, "up"]);
    ip(&["-n", &ns, "addr", "add", &format!("{client}/24"), "dev", &v_c]);
    ip(&["-n", &ns, "link", "set", &v_c, "up"]);
    ip(&["-n", &ns, "link", "set", "lo", "up"]);
    ip(&["-n", &ns, "route", "add", "default", "via", &router.to_string()]);
    lab.ns_b.run(&["sysctl", "-qw", "net.ipv4.ip_forward=1"]).unwrap();
    // The server's side routes the client's subnet through ns_b, as a default route.
    ip(&["-n", &lab.ns_a.name, "route", "add", "default", "via", &lab.addr_b.to_string()]);
    b
}

#[test]
fn clients_behind_a_router_are_served_in_both_address_modes() {
    let lab = lab("hzr");
    let behind = client_behind_router(&lab);
    let client_ns = Netns { name: behind.ns.clone() };
    // Shared mode follows the kernel's default route.
    let srv = xsk_server(&lab.ns_a, xsk_cfg(&lab, AddrMode::Shared), 7600);
    let r = kernel_client(&client_ns, SocketAddrV4::new(lab.addr_a, 7600), 100);
    assert_clean(&r, 100);
    srv.finish();
    // Dedicated mode takes the gateway from its configuration.
    let o = lab.addr_a.octets();
    let ded = Ipv4Addr::new(o[0], o[1], o[2], 100);
    let mut c = xsk_cfg(&lab, AddrMode::Dedicated { addr: ded, prefix_len: lab.prefix_len });
    c.gateway = Some(lab.addr_b);
    let srv = xsk_server(&lab.ns_a, c, 7601);
    let r = kernel_client(&client_ns, SocketAddrV4::new(ded, 7601), 100);
    assert_clean(&r, 100);
    srv.finish();
    assert_ne!(behind.addr, lab.addr_b);
}
