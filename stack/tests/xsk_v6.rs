//! The AF_XDP stack serving IPv6 and IPv4 clients at once, the kernel's TCP on the
//! other side of a veth pair whose ends keep their default offloads (partial
//! checksums), in shared mode (the kernel's own IPv6 address: neighbour discovery stays
//! the kernel's) and in dedicated mode (the stack answers neighbour solicitations for
//! an address of its own). Needs root.

use std::io::{Read, Write};
use std::net::{Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6, TcpStream};
use std::thread;
use std::time::Duration;

use rr_load::{Client, EchoWorkload};
use stack::codec::LengthPrefixed;
use stack::kernel::{KernelConfig, KernelTransport};
use stack::xsk::{Addr6Mode, AddrMode};
use xsk_lab::lab::{Lab, Netns};

mod common;
use common::{dedicated, lab_v6, xsk_cfg, xsk_server, MAX_FRAME};

/// The lab's IPv6 addresses (`Lab::add_ipv6`): `a` ::1 (`with_a`), `b` ::2.
fn add_v6(lab: &Lab, with_a: bool) -> (Ipv6Addr, Ipv6Addr) {
    lab.add_ipv6(with_a).expect("IPv6 addresses")
}

/// `n` length-prefixed echoes of growing size over one kernel TCP connection to `to`,
/// from `ns`: each answered with its own bytes.
fn v6_client(ns: &Netns, to: SocketAddrV6, n: usize) -> usize {
    ns.run_in(move || {
        let mut s = TcpStream::connect_timeout(&SocketAddr::V6(to), Duration::from_secs(5)).expect("connect over IPv6");
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.set_nodelay(true).unwrap();
        let mut done = 0;
        for i in 0..n {
            // Up to several segments: large ones cross as GSO from the kernel's side.
            let len = 1 + (i * 7919) % 20_000;
            let msg: Vec<u8> = (0..len).map(|k| (k * 31 + i) as u8).collect();
            s.write_all(&(len as u32).to_be_bytes()).unwrap();
            s.write_all(&msg).unwrap();
            let mut hdr = [0u8; 4];
            s.read_exact(&mut hdr).unwrap();
            assert_eq!(u32::from_be_bytes(hdr) as usize, len);
            let mut back = vec![0u8; len];
            s.read_exact(&mut back).unwrap();
            assert_eq!(back, msg, "echo {i}");
            done += 1;
        }
        done
    })
    .unwrap()
}

/// IPv4 clients through rr-load at the same time.
fn v4_clients(ns: &Netns, to: SocketAddrV4, bind: std::net::Ipv4Addr, n: u64) -> thread::JoinHandle<u64> {
    let ns = ns.clone();
    thread::spawn(move || {
        ns.run_in(move || {
            let t = KernelTransport::new(KernelConfig::default().with_bind(bind)).unwrap();
            let cfg = common::closed_loop(to, 4, 1, n);
            let r = Client::new(t, LengthPrefixed::new(MAX_FRAME), EchoWorkload::random(1, 4096, 5), cfg).run().unwrap();
            assert_eq!((r.errors, r.lost), (0, 0), "{r}");
            r.requests
        })
        .unwrap()
    })
}

#[test]
fn shared_address_serves_ipv6_and_ipv4_clients_at_once() {
    let lab = lab_v6("s6s");
    let (a6, _) = add_v6(&lab, true);
    let port = 7200;
    let srv = xsk_server(&lab.ns_a, xsk_cfg(&lab, AddrMode::Shared), port);
    let v4 = v4_clients(&lab.ns_b, SocketAddrV4::new(lab.addr_a, port), lab.addr_b, 300);
    let ns_b = lab.ns_b.clone();
    let v6: Vec<_> = (0..3).map(|_| {
        let ns = ns_b.clone();
        thread::spawn(move || v6_client(&ns, SocketAddrV6::new(a6, port, 0, 0), 100))
    }).collect();
    let done6: usize = v6.into_iter().map(|h| h.join().unwrap()).sum();
    assert_eq!(done6, 300);
    assert_eq!(v4.join().unwrap(), 300);
    // The kernel still has its IPv6: ping from the peer is answered by it.
    lab.ns_b.run(&["ping", "-6", "-c", "1", "-W", "2", &a6.to_string()]).expect("the kernel answers ping over IPv6");
    let (stats, st, acc) = srv.finish_all();
    assert_eq!(stats.requests, 600, "IPv4 and IPv6 requests");
    assert_eq!(stats.accepted, 7);
    assert_eq!(st.engine.drops.bad_checksum, 0, "partial checksums of the peer's offload taken");
    assert_eq!(acc.app, 0);
}

#[test]
fn dedicated_ipv6_address_answers_neighbour_discovery() {
    let lab = lab_v6("s6d");
    let (a6, _) = add_v6(&lab, false);
    let our6 = Ipv6Addr::from(a6.to_bits() + 99);
    let (mode, a4) = dedicated(&lab);
    let mut cfg = xsk_cfg(&lab, mode);
    cfg.addr6 = Addr6Mode::Dedicated { addr: our6, prefix_len: 64 };
    let port = 7201;
    let srv = xsk_server(&lab.ns_a, cfg, port);
    let v4 = v4_clients(&lab.ns_b, SocketAddrV4::new(a4, port), lab.addr_b, 200);
    assert_eq!(v6_client(&lab.ns_b, SocketAddrV6::new(our6, port, 0, 0), 200), 200);
    assert_eq!(v4.join().unwrap(), 200);
    // The peer learned our MAC from the stack's neighbour advertisement.
    let neigh = lab.ns_b.run(&["ip", "-6", "neigh", "show", &our6.to_string()]).unwrap();
    assert!(neigh.contains("lladdr"), "{neigh}");
    lab.ns_b.run(&["ping", "-6", "-c", "1", "-W", "2", &our6.to_string()]).expect("the stack answers ping over IPv6");
    let (stats, _, acc) = srv.finish_all();
    assert_eq!(stats.requests, 400);
    assert_eq!(acc.app, 0);
}

/// IPv6 alone: the peer's pure ACKs that arrive while the stack sleeps wait in the XDP
/// program's ack ring, as IPv4's do (the kernel client ACKs most responses on its own).
#[test]
fn ipv6_pure_acks_are_deferred() {
    let lab = lab_v6("s6a");
    let (a6, _) = add_v6(&lab, true);
    let port = 7202;
    let srv = xsk_server(&lab.ns_a, xsk_cfg(&lab, AddrMode::Shared), port);
    assert_eq!(v6_client(&lab.ns_b, SocketAddrV6::new(a6, port, 0, 0), 300), 300);
    let (stats, st, acc) = srv.finish_all();
    assert_eq!(stats.requests, 300);
    assert!(st.device.deferred_acks.enabled, "the kernel loaded the program without deferred ACKs: {st:?}");
    assert!(st.device.deferred_acks.taken > 0, "no IPv6 ACK went through the ack ring: {:?}", st.device.deferred_acks);
    assert_eq!(acc.app, 0);
}

/// With SYN cookies always on, the XDP program answers IPv6 SYNs with the engine's cookie
/// (XDP_TX), the kernel client takes those SYN-ACKs and the engine turns each returning ACK
/// into a connection: none through the engine's own SYN-ACK, in both address modes. The
/// client's veth runs an XDP program (a veth sends native XDP_TX into its peer only then).
#[test]
fn ipv6_syns_answered_in_xdp_with_cookies() {
    for (tag, shared) in [("s6xd", false), ("s6xs", true)] {
        let lab = lab_v6(tag);
        let _peer = lab.peer_xdp_pass().expect("an XDP program on the client's veth");
        let (a6, _) = add_v6(&lab, shared);
        let (mut cfg, to) = if shared {
            (xsk_cfg(&lab, AddrMode::Shared), a6)
        } else {
            let our6 = Ipv6Addr::from(a6.to_bits() + 99);
            let mut c = xsk_cfg(&lab, dedicated(&lab).0);
            c.addr6 = Addr6Mode::Dedicated { addr: our6, prefix_len: 64 };
            (c, our6)
        };
        cfg.engine.syn_cookies = stack::xsk::SynCookies::Always;
        cfg.xdp_syn_cookies = stack::xsk::XdpCookies::On;
        let port = 7204;
        let srv = xsk_server(&lab.ns_a, cfg, port);
        for _ in 0..30 {
            assert_eq!(v6_client(&lab.ns_b, SocketAddrV6::new(to, port, 0, 0), 3), 3);
        }
        let (stats, st, _) = srv.finish_all();
        assert_eq!((stats.accepted, stats.requests), (30, 90), "{tag}");
        assert!(st.device.xdp_syn_cookies >= 30, "{tag}: {st:?}");
        let e = &st.engine;
        assert_eq!((e.syn_cookies_sent, e.syn_cookies_accepted, e.drops.bad_cookie), (0, 30, 0), "{tag}: {st:?}");
    }
}

/// A length-prefixed echo server on the kernel's TCP in `ns`, listening on `[addr]:port`
/// for `conns` connections, each in a thread of its own; returns the peers it saw.
fn kernel_echo_v6(ns: &Netns, addr: Ipv6Addr, port: u16, conns: usize) -> thread::JoinHandle<Vec<SocketAddr>> {
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let ns = ns.clone();
    let h = thread::spawn(move || {
        ns.run_in(move || {
            let l = std::net::TcpListener::bind(SocketAddrV6::new(addr, port, 0, 0)).expect("bind over IPv6");
            ready_tx.send(()).unwrap();
            let mut peers = Vec::new();
            let mut workers = Vec::new();
            for _ in 0..conns {
                let (mut s, peer) = l.accept().unwrap();
                peers.push(peer);
                workers.push(thread::spawn(move || {
                    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
                    let mut hdr = [0u8; 4];
                    while s.read_exact(&mut hdr).is_ok() {
                        let mut body = vec![0u8; u32::from_be_bytes(hdr) as usize];
                        s.read_exact(&mut body).unwrap();
                        s.write_all(&hdr).unwrap();
                        s.write_all(&body).unwrap();
                    }
                }));
            }
            workers.into_iter().for_each(|w| w.join().unwrap());
            peers
        })
        .unwrap()
    });
    ready_rx.recv_timeout(Duration::from_secs(10)).expect("the echo server listens");
    h
}

/// The stack as a client over IPv6 (`Transport::connect_ip`) to `to`, from `cfg`'s
/// address: `n` echoes over 4 connections, every one back whole.
fn client_v6(ns: &Netns, cfg: stack::xsk::XskConfig, to: SocketAddr, n: u64) {
    let r = ns
        .run_in(move || {
            let t = stack::xsk::XskTransport::new(cfg).expect("xsk transport");
            // The client connects through `Transport::connect_ip`.
            let cfg = common::closed_loop(to, 4, 1, n);
            Client::new(t, LengthPrefixed::new(MAX_FRAME), EchoWorkload::random(1, 4096, 9), cfg).run().expect("client")
        })
        .unwrap();
    assert_eq!((r.errors, r.lost, r.requests), (0, 0, n), "{r}");
}

/// The stack as a client over IPv6 from a dedicated IPv6 address (smoltcp solicits the
/// server's neighbour entry itself), then from the kernel's shared one (the kernel's
/// neighbour table resolves it: the solicitation never reaches the wire): every echo
/// comes back whole, from the stack's address.
#[test]
fn connects_out_over_ipv6() {
    let lab = lab_v6("s6o");
    let (a6, b6) = add_v6(&lab, false);
    let our6 = Ipv6Addr::from(a6.to_bits() + 77);
    let port = 7203;
    let echo = kernel_echo_v6(&lab.ns_b, b6, port, 4);
    let (mode, _) = dedicated(&lab);
    let mut xcfg = xsk_cfg(&lab, mode);
    xcfg.addr6 = Addr6Mode::Dedicated { addr: our6, prefix_len: 64 };
    client_v6(&lab.ns_a, xcfg, SocketAddr::V6(SocketAddrV6::new(b6, port, 0, 0)), 300);
    let peers = echo.join().unwrap();
    assert_eq!(peers.len(), 4);
    assert!(peers.iter().all(|p| p.ip() == std::net::IpAddr::V6(our6)), "not from the stack's IPv6 address: {peers:?}");
    // Shared: the kernel's address, and a peer the kernel has not resolved yet.
    lab.ns_a.run(&["ip", "-6", "addr", "add", &format!("{a6}/64"), "dev", &lab.if_a, "nodad"]).unwrap();
    lab.ns_a.run(&["ip", "-6", "neigh", "flush", "dev", &lab.if_a]).unwrap();
    let echo = kernel_echo_v6(&lab.ns_b, b6, port + 1, 4);
    client_v6(&lab.ns_a, xsk_cfg(&lab, AddrMode::Shared), SocketAddr::V6(SocketAddrV6::new(b6, port + 1, 0, 0)), 200);
    let peers = echo.join().unwrap();
    assert!(peers.iter().all(|p| p.ip() == std::net::IpAddr::V6(a6)), "not from the shared address: {peers:?}");
}
