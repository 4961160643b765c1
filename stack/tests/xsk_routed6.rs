//! An off-link IPv6 client behind a router namespace, with a narrower path on the way
//! back: the stack reaches it through its IPv6 gateway (shared mode: the kernel's default
//! route, its MAC from the kernel's neighbour table; dedicated mode: `gateway6`, solicited
//! by smoltcp), and the router's Packet Too Big lowers the connection's MSS, so that
//! responses longer than the path's MTU arrive. Needs root.
//!
//! ```text
//!   ns_a (stack) ==== ns_b (router, forwarding) ==== ns_c (client)
//!   2001:2:0:N::/64                                  2001:2:1:N::/64
//!                    route to 2001:2:1:N::/64 with mtu 1400
//! ```

use std::io::{Read, Write};
use std::net::{Ipv6Addr, SocketAddr, SocketAddrV6, TcpStream};
use std::time::Duration;

use stack::xsk::{Addr6Mode, AddrMode};
use xsk_lab::lab::{Lab, Netns};

mod common;
use common::{dedicated, lab_v6, xsk_cfg, xsk_server};

/// The client's namespace and the router's link to it; deleted on drop (which destroys
/// the veth pair).
struct Far {
    ns: Netns,
}

impl Drop for Far {
    fn drop(&mut self) {
        let _ = std::process::Command::new("ip").args(["netns", "del", &self.ns.name]).status();
    }
}

/// `lab.ns_b` routes between the lab's /64 and a client's one (2001:2:1:N::/64, in
/// namespace `{lab}c`), with a path MTU of 1400 toward the client; with `kernel_route`,
/// `lab.ns_a`'s kernel has a default route through it.
fn far_client(lab: &Lab, a6: Ipv6Addr, b6: Ipv6Addr, kernel_route: bool) -> Far {
    let net = a6.segments()[3];
    let name = format!("{}c", lab.ns_b.name.trim_end_matches('b'));
    // What a killed run of this test left.
    let _ = std::process::Command::new("ip").args(["netns", "del", &name]).stderr(std::process::Stdio::null()).status();
    let ns = Netns { name: name.clone() };
    let addr = Ipv6Addr::new(0x2001, 2, 1, net, 0, 0, 0, 2);
    let router = Ipv6Addr::new(0x2001, 2, 1, net, 0, 0, 0, 1);
    assert!(std::process::Command::new("ip").args(["netns", "add", &name]).status().unwrap().success());
    let far = Far { ns };
    let (rb, rc) = (format!("{name}r"), format!("{name}f"));
    let ip = |ns: &str, args: &str| {
        let mut v = vec!["-n", ns];
        v.extend(args.split_whitespace());
        let out = std::process::Command::new("ip").args(&v).output().unwrap();
        assert!(out.status.success(), "ip {v:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    let b = lab.ns_b.name.as_str();
    ip(b, &format!("link add {rb} type veth peer name {rc} netns {name}"));
    ip(b, &format!("-6 addr add {router}/64 dev {rb} nodad"));
    ip(b, &format!("link set {rb} up"));
    // The narrower path: the route to the client's subnet says 1400 (before the one its
    // address added).
    ip(b, &format!("-6 route add 2001:2:1:{net:x}::/64 dev {rb} metric 1 mtu 1400"));
    lab.ns_b.run_in(|| std::fs::write("/proc/sys/net/ipv6/conf/all/forwarding", "1")).unwrap().unwrap();
    ip(&name, "link set lo up");
    ip(&name, &format!("link set {rc} up"));
    ip(&name, &format!("-6 addr add {addr}/64 dev {rc} nodad"));
    ip(&name, &format!("-6 route add default via {router}"));
    if kernel_route {
        ip(&lab.ns_a.name, &format!("-6 route add default via {b6} dev {}", lab.if_a));
    }
    far
}

/// `n` echoes from the far client to `to`, growing to 20 kB (responses of many
/// full-sized segments), each answered whole.
fn far_echoes(far: &Far, to: SocketAddrV6, n: usize) {
    far.ns
        .run_in(move || {
            let mut s = TcpStream::connect_timeout(&SocketAddr::V6(to), Duration::from_secs(5)).expect("connect over IPv6");
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            for i in 0..n {
                let len = 3000 + (i * 7919) % 17_000;
                let msg: Vec<u8> = (0..len).map(|k| (k * 31 + i) as u8).collect();
                s.write_all(&(len as u32).to_be_bytes()).unwrap();
                s.write_all(&msg).unwrap();
                let mut back = vec![0u8; 4 + len];
                s.read_exact(&mut back).unwrap_or_else(|e| panic!("echo {i} of {len} bytes: {e}"));
                assert_eq!(back[4..], msg[..], "echo {i}");
            }
        })
        .unwrap();
}

#[test]
fn shared_address_serves_an_off_link_client_across_a_narrower_path() {
    let lab = lab_v6("r6s");
    let (a6, b6) = lab.add_ipv6(true).unwrap();
    let far = far_client(&lab, a6, b6, true);
    let port = 7210;
    let srv = xsk_server(&lab.ns_a, xsk_cfg(&lab, AddrMode::Shared), port);
    far_echoes(&far, SocketAddrV6::new(a6, port, 0, 0), 50);
    let (stats, st) = srv.finish();
    assert_eq!(stats.requests, 50);
    assert_eq!(st.engine.path_mtu_lowered, 1, "the router's Packet Too Big: {st:?}");
    assert_eq!((st.engine.drops.icmp_stray, st.engine.drops.icmp_bad_mtu), (0, 0));
}

#[test]
fn dedicated_address_reaches_an_off_link_client_through_its_gateway() {
    let lab = lab_v6("r6d");
    let (a6, b6) = lab.add_ipv6(false).unwrap();
    let far = far_client(&lab, a6, b6, false);
    let our6 = Ipv6Addr::from(a6.to_bits() + 50);
    let (mode, _) = dedicated(&lab);
    let mut cfg = xsk_cfg(&lab, mode);
    cfg.addr6 = Addr6Mode::Dedicated { addr: our6, prefix_len: 64 };
    cfg.gateway6 = Some(b6);
    let port = 7211;
    let srv = xsk_server(&lab.ns_a, cfg, port);
    far_echoes(&far, SocketAddrV6::new(our6, port, 0, 0), 50);
    let (stats, st) = srv.finish();
    assert_eq!(stats.requests, 50);
    assert_eq!(st.engine.path_mtu_lowered, 1, "{st:?}");
}
