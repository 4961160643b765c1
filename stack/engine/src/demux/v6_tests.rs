//! IPv6 frames crafted byte by byte against `inspect`.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::demux::{inspect, inspect_expecting, solicited_node, Flow, RxRules};
use crate::drops::DropReason;
use crate::testing::frames::{icmpv6, ipv6, neighbour_solicitation, tcp, tcp6, TcpSpec};

const MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];
const PEER_MAC: [u8; 6] = [2, 0, 0, 0, 0, 2];
const US: Ipv6Addr = Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 1);
const PEER: Ipv6Addr = Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 2);

fn rules(accept_partial: bool) -> RxRules {
    RxRules { mac: MAC, addr: Ipv4Addr::new(198, 18, 0, 1), prefix_len: 24, accept_partial, addr6: Some(US), prefix6_len: 64 }
}

fn spec(flags: u8, payload: &[u8], partial_csum: bool) -> TcpSpec<'_> {
    TcpSpec { src_mac: PEER_MAC, dst_mac: MAC, sport: 1234, dport: 80, flags, payload, partial_csum, ..TcpSpec::default() }
}

fn syn_from(src: Ipv6Addr) -> Vec<u8> {
    tcp6(&spec(0x02, &[], false), src, US)
}

#[test]
fn a_valid_syn_and_data_pass() {
    let i = inspect(&syn_from(PEER), &rules(false)).unwrap();
    assert_eq!(i.flow, Flow::Tcp { src: IpAddr::V6(PEER), sport: 1234, dport: 80, syn: true });
    assert!(!i.partial_csum);
    let mut padded = tcp6(&spec(0x18, b"GET / HTTP/1.1\r\n\r\n", false), PEER, US);
    let i = inspect(&padded, &rules(false)).unwrap();
    assert!(matches!(i.flow, Flow::Tcp { syn: false, .. }));
    padded.extend_from_slice(&[0; 8]);
    assert!(inspect(&padded, &rules(false)).is_ok(), "Ethernet padding after the packet");
}

#[test]
fn without_an_ipv6_address_ipv6_is_unsupported() {
    let r = RxRules { addr6: None, ..rules(true) };
    assert_eq!(inspect(&syn_from(PEER), &r), Err(DropReason::Unsupported));
}

#[test]
fn partial_checksums_only_where_trusted_in_either_order() {
    let full = tcp6(&spec(0x18, b"a request", false), PEER, US);
    let partial = tcp6(&spec(0x18, b"a request", true), PEER, US);
    let mut wrong = full.clone();
    *wrong.last_mut().unwrap() ^= 0x10;
    for first in [false, true] {
        let v = |f: &[u8], accept| inspect_expecting(f, &rules(accept), first).map(|i| i.partial_csum);
        assert_eq!(v(&full, false), Ok(false));
        assert_eq!(v(&full, true), Ok(false));
        assert_eq!(v(&partial, true), Ok(true));
        assert_eq!(v(&partial, false), Err(DropReason::BadChecksum));
        assert_eq!(v(&wrong, true), Err(DropReason::BadChecksum));
    }
}

#[test]
fn impossible_sources_are_refused() {
    for src in ["::", "::1", "ff02::1", "2001:2::1", "::ffff:198.18.0.2"] {
        let f = syn_from(src.parse().unwrap());
        assert_eq!(inspect(&f, &rules(false)), Err(DropReason::BadSource), "{src}");
    }
}

#[test]
fn other_destinations_are_not_ours() {
    let f = tcp6(&spec(0x02, &[], false), PEER, "2001:2::9".parse().unwrap());
    assert_eq!(inspect(&f, &rules(false)), Err(DropReason::NotForUs));
    let mut f = syn_from(PEER);
    f[0..6].copy_from_slice(&[2, 9, 9, 9, 9, 9]);
    assert_eq!(inspect(&f, &rules(false)), Err(DropReason::NotForUs));
    // TCP to our solicited-node group, or a router advertisement to all nodes: not ours.
    let group = solicited_node(US);
    let f = tcp6(&TcpSpec { dst_mac: [0x33, 0x33, 0xff, 0, 0, 1], ..spec(0x02, &[], false) }, PEER, group);
    assert_eq!(inspect(&f, &rules(false)), Err(DropReason::NotForUs));
    let ra = icmpv6(PEER_MAC, [0x33, 0x33, 0, 0, 0, 1], PEER, "ff02::1".parse().unwrap(), 134, 0, &[0; 12]);
    assert_eq!(inspect(&ra, &rules(false)), Err(DropReason::NotForUs));
}

#[test]
fn neighbour_solicitations_for_us_pass_and_are_checked() {
    let ns = neighbour_solicitation(PEER_MAC, PEER, US);
    assert_eq!(&ns[0..6], &[0x33, 0x33, 0xff, 0, 0, 1]);
    let i = inspect(&ns, &rules(false)).unwrap();
    assert_eq!(i.flow, Flow::Icmp { src: IpAddr::V6(PEER) });
    // For another address's group: not ours.
    let other = neighbour_solicitation(PEER_MAC, PEER, "2001:2::5".parse().unwrap());
    assert_eq!(inspect(&other, &rules(false)), Err(DropReason::NotForUs));
    // A wrong ICMPv6 checksum, and one cut below 8 bytes.
    let mut bad = ns.clone();
    *bad.last_mut().unwrap() ^= 1;
    assert_eq!(inspect(&bad, &rules(true)), Err(DropReason::BadChecksum));
    let short = icmpv6(PEER_MAC, MAC, PEER, US, 128, 0, &[]);
    assert_eq!(inspect(&short, &rules(false)), Err(DropReason::Malformed));
    let echo = icmpv6(PEER_MAC, MAC, PEER, US, 128, 0, &[0, 1, 0, 1]);
    assert!(inspect(&echo, &rules(false)).is_ok());
}

#[test]
fn extension_headers_and_fragments_are_dropped_by_reason() {
    // A SYN behind each extension header: the stack parses none of them.
    let seg = &syn_from(PEER)[54..];
    for next in [0u8, 43, 60, 51, 50, 135, 139, 140, 253, 254] {
        let mut payload = vec![6, 0, 0, 0, 0, 0, 0, 0];
        payload.extend_from_slice(seg);
        let f = ipv6(PEER_MAC, MAC, PEER, US, next, 64, &payload);
        assert_eq!(inspect(&f, &rules(true)), Err(DropReason::ExtensionHeader), "next header {next}");
    }
    let mut frag = vec![6, 0, 0, 1, 0, 0, 0, 7];
    frag.extend_from_slice(seg);
    let f = ipv6(PEER_MAC, MAC, PEER, US, 44, 64, &frag);
    assert_eq!(inspect(&f, &rules(true)), Err(DropReason::Fragment));
    // No next header, UDP, and an unassigned number: unsupported.
    for next in [59u8, 17, 200] {
        let f = ipv6(PEER_MAC, MAC, PEER, US, next, 64, seg);
        assert_eq!(inspect(&f, &rules(true)), Err(DropReason::Unsupported), "next header {next}");
    }
}

#[test]
fn lengths_that_lie_are_malformed() {
    let f = syn_from(PEER);
    // Payload length past the frame.
    let mut g = f.clone();
    g[18..20].copy_from_slice(&200u16.to_be_bytes());
    assert_eq!(inspect(&g, &rules(false)), Err(DropReason::Malformed));
    // Shorter than a TCP header.
    let mut g = f.clone();
    g[18..20].copy_from_slice(&12u16.to_be_bytes());
    assert_eq!(inspect(&g, &rules(false)), Err(DropReason::Malformed));
    // Version 4 in an IPv6 frame.
    let mut g = f.clone();
    g[14] = 0x40;
    assert_eq!(inspect(&g, &rules(false)), Err(DropReason::Malformed));
    // Ports zero.
    let mut g = f.clone();
    g[54..56].copy_from_slice(&[0, 0]);
    assert_eq!(inspect(&g, &rules(false)), Err(DropReason::Malformed));
}

#[test]
fn never_panics_on_garbage_or_cuts() {
    let mut buf = [0u8; 120];
    for len in 0..buf.len() {
        for b in [0u8, 0x60, 0xff, 6, 58, 44, 0x86] {
            buf.iter_mut().for_each(|x| *x = b);
            buf[0..6].copy_from_slice(&MAC);
            buf[6..12].copy_from_slice(&PEER_MAC);
            buf[12] = 0x86;
            buf[13] = 0xdd;
            let _ = inspect(&buf[..len], &rules(true));
        }
    }
    for f in [syn_from(PEER), neighbour_solicitation(PEER_MAC, PEER, US), tcp6(&spec(0x18, b"xy", true), PEER, US)] {
        for len in 0..f.len() {
            let _ = inspect(&f[..len], &rules(true));
        }
    }
}

#[test]
fn ipv4_still_passes_with_an_ipv6_address() {
    let f = tcp(&TcpSpec { src_mac: PEER_MAC, dst_mac: MAC, dst: Ipv4Addr::new(198, 18, 0, 1), ..TcpSpec::default() });
    assert!(matches!(inspect(&f, &rules(false)).unwrap().flow, Flow::Tcp { src: IpAddr::V4(_), .. }));
}

#[test]
fn on_link_and_sources() {
    let r = rules(false);
    assert!(r.on_link_v6(PEER) && r.on_link_v6("2001:2::ffff:1".parse().unwrap()));
    assert!(!r.on_link_v6("2001:2:0:1::1".parse().unwrap()) && !r.on_link_v6("fe80::1".parse().unwrap()));
    assert!(!r.bad_source_v6(PEER) && !r.bad_source_v6("fe80::1".parse().unwrap()));
    assert_eq!(solicited_node(US), "ff02::1:ff00:1".parse::<Ipv6Addr>().unwrap());
}
