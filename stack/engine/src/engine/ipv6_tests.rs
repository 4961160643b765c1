//! IPv6 through the engine, in memory: one listener serving both families, the fast
//! path, checksum offload, SYN cookies, neighbour discovery and what is dropped.

use std::net::{SocketAddr, SocketAddrV4, SocketAddrV6};

use crate::conn::{ConnId, Event};
use crate::engine::SynCookies;
use crate::testing::frames::{ipv6, parse_tcp, parse_tcp6, tcp6, TcpSpec};
use crate::testing::{config, mac_of, MemTransport, Pair};

use super::tests::read_all;

const PORT: u16 = 7;

fn accepted(ev: &[Event]) -> Vec<ConnId> {
    ev.iter().filter_map(|e| if let Event::Accepted { conn, .. } = e { Some(*conn) } else { None }).collect()
}

fn v6(port: u16) -> SocketAddrV6 {
    SocketAddrV6::new(Pair::A6, port, 0, 0)
}

/// B connects to A over IPv6 and over IPv4 to the one listener: both are accepted, each
/// reports its own family's peer, and their data stay apart.
#[test]
fn one_listener_serves_both_families_at_once() {
    let mut p = Pair::new();
    p.a.listen(PORT).unwrap();
    let c6 = p.b.connect(v6(PORT)).unwrap();
    let c4 = p.b.connect(SocketAddrV4::new(Pair::A, PORT)).unwrap();
    let (ea, eb) = p.settle(20);
    assert!(eb.contains(&Event::Connected(c6)) && eb.contains(&Event::Connected(c4)), "client events {eb:?}");
    let acc = accepted(&ea);
    assert_eq!(acc.len(), 2, "server events {ea:?}");
    let (mut s6, mut s4) = (None, None);
    for c in acc {
        match p.a.peer_socket_addr(c).unwrap() {
            SocketAddr::V6(a) => {
                assert_eq!(*a.ip(), Pair::B6);
                assert_eq!(p.a.peer_addr(c), None, "no IPv4 peer");
                s6 = Some(c);
            }
            SocketAddr::V4(a) => {
                assert_eq!(*a.ip(), Pair::B);
                s4 = Some(c);
            }
        }
    }
    let (s6, s4) = (s6.unwrap(), s4.unwrap());
    for round in 0..20u8 {
        p.b.send(c6, &[b'6', round]).unwrap();
        p.b.send(c4, &[b'4', round]).unwrap();
        p.settle(10);
        assert_eq!(read_all(&mut p.a, s6), [b'6', round]);
        assert_eq!(read_all(&mut p.a, s4), [b'4', round]);
        p.a.send(s6, b"six").unwrap();
        p.a.send(s4, b"four").unwrap();
        p.a.flush().unwrap();
        let out = p.a.link.out.clone();
        // Each answer leaves in its connection's family.
        assert!(out.iter().any(|f| parse_tcp6(f).is_some_and(|(s, d, seg)| s == Pair::A6 && d == Pair::B6 && seg.payload == b"six")));
        assert!(out.iter().any(|f| parse_tcp(f).is_some_and(|seg| seg.payload == b"four")));
        p.settle(10);
        assert_eq!(read_all(&mut p.b, c6), b"six");
        assert_eq!(read_all(&mut p.b, c4), b"four");
    }
    let st = p.a.engine.stats();
    assert_eq!(st.drops.total(), 0, "{:?}", st.drops);
    assert!(st.fast_path > 0, "in-order IPv6 and IPv4 segments take the fast path");
    assert_eq!(st.accepted, 2);
}

/// Over a link that offloads TCP checksums (the AF_XDP port with TX metadata), the
/// engine leaves IPv6 ones to it, and they come out right.
#[test]
fn ipv6_over_checksum_offload() {
    let mut p = Pair::new();
    p.a.link.csum_offload = true;
    p.b.link.csum_offload = true;
    p.a.listen(PORT).unwrap();
    let c = p.b.connect(v6(PORT)).unwrap();
    let (ea, _) = p.settle(20);
    let s = accepted(&ea)[0];
    for _ in 0..10 {
        p.b.send(c, b"request").unwrap();
        p.settle(10);
        assert_eq!(read_all(&mut p.a, s), b"request");
        p.a.send(s, b"response").unwrap();
        p.settle(10);
        assert_eq!(read_all(&mut p.b, c), b"response");
    }
    assert!(p.a.link.offloaded > 0 && p.b.link.offloaded > 0);
    let st = p.a.engine.stats();
    assert_eq!(st.drops.total(), 0, "{:?}", st.drops);
    assert!(st.fast_path > 0, "in-order IPv6 segments take the fast path");
}

/// With cookies for every SYN, an IPv6 SYN gets an IPv6 cookie SYN-ACK, and the ACK
/// that returns the cookie establishes the connection.
#[test]
fn syn_cookies_over_ipv6() {
    let mut a = config(Pair::A);
    a.tcp.syn_cookies = SynCookies::Always;
    let mut p = Pair::with(a, config(Pair::B));
    p.a.listen(PORT).unwrap();
    let c = p.b.connect(v6(PORT)).unwrap();
    let synacks = std::rc::Rc::new(std::cell::Cell::new(0));
    let seen = synacks.clone();
    p.filter = Some(Box::new(move |frames: Vec<Vec<u8>>| {
        for f in &frames {
            if parse_tcp6(f).is_some_and(|(s, _, seg)| s == Pair::A6 && seg.syn() && seg.ack_set()) {
                seen.set(seen.get() + 1);
                // The MSS option first: the link's MTU less the IPv6 and TCP headers.
                assert_eq!(f[74..78], [2, 4, 0x05, 0xa0], "MSS 1440 over IPv6 (MTU 1500)");
            }
        }
        frames
    }));
    let (ea, eb) = p.settle(20);
    assert_eq!(synacks.get(), 1, "one SYN-ACK, over IPv6");
    assert!(eb.contains(&Event::Connected(c)), "{eb:?}");
    let s = accepted(&ea)[0];
    let st = p.a.engine.stats();
    assert_eq!((st.syn_cookies_sent, st.syn_cookies_accepted), (1, 1));
    p.b.send(c, b"after a cookie").unwrap();
    p.settle(10);
    assert_eq!(read_all(&mut p.a, s), b"after a cookie");
}

/// Without a neighbour taught (dedicated mode), the client solicits the server's MAC
/// and the server advertises it: the connection follows.
#[test]
fn neighbour_discovery_between_two_engines() {
    let mut p = Pair { a: MemTransport::new(config(Pair::A)), b: MemTransport::new(config(Pair::B)), filter: None };
    p.a.listen(PORT).unwrap();
    let c = p.b.connect(v6(PORT)).unwrap();
    p.b.flush().unwrap();
    let ns = p.b.link.out.clone();
    assert!(
        ns.iter().any(|f| f.len() > 54 && f[12..14] == [0x86, 0xdd] && f[20] == 58 && f[54] == 135),
        "a neighbour solicitation: {ns:02x?}"
    );
    let (ea, eb) = p.settle(40);
    assert!(eb.contains(&Event::Connected(c)), "{eb:?}");
    assert_eq!(accepted(&ea).len(), 1);
}

/// A segment to a port nobody listens on is answered with an IPv6 RST; hostile
/// IPv6 frames are counted by reason and change nothing.
#[test]
fn ipv6_refusals_and_drops() {
    let mut t = MemTransport::new(config(Pair::A));
    let peer = mac_of(Pair::B);
    let spec = TcpSpec { src_mac: peer, dst_mac: mac_of(Pair::A), sport: 40000, dport: 9, ..TcpSpec::default() };
    let syn = tcp6(&spec, Pair::B6, Pair::A6);
    t.inbox.push_back(syn.clone());
    t.ingest();
    t.egress();
    let sent = t.take_sent();
    let rst = sent.iter().find_map(|f| parse_tcp6(f)).expect("an RST over IPv6");
    assert!(rst.2.rst() && rst.1 == Pair::B6, "{rst:?}");
    let seg = &syn[54..];
    let mut ext = vec![6, 0, 1, 4, 0, 0, 0, 0];
    ext.extend_from_slice(seg);
    t.inbox.push_back(ipv6(peer, mac_of(Pair::A), Pair::B6, Pair::A6, 0, 64, &ext));
    t.inbox.push_back(ipv6(peer, mac_of(Pair::A), Pair::B6, Pair::A6, 44, 64, &ext));
    let mut cut = syn.clone();
    cut.truncate(60);
    t.inbox.push_back(cut);
    t.ingest();
    t.egress();
    assert!(t.take_sent().is_empty());
    let d = t.engine.stats().drops;
    assert_eq!((d.no_socket, d.ext_header, d.fragment, d.malformed), (1, 1, 1, 1), "{d:?}");
    assert_eq!(t.engine.stats().live_sockets, 0);
}
