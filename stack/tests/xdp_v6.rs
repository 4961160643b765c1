//! The XDP steering program's IPv6 decisions, run unattached through BPF_PROG_RUN on
//! frames of one's own: IPv6 TCP to a steered port of our address is the stack's;
//! ICMPv6 (neighbour discovery), other ports, other addresses, extension headers and
//! fragments are the kernel's on a shared address, and on a dedicated one everything to
//! it (and the solicitations for it) is the stack's. Needs root.

use std::net::{Ipv4Addr, Ipv6Addr};

use stack::xsk::testing::frames::{icmp4, icmpv6, ipv6, neighbour_solicitation, tcp, tcp6, TcpSpec};
use xsk_device::steer::{SteerFlags, SteerRun, Verdict};

const PORT: u16 = 7000;
const US4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const US: Ipv6Addr = Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 1);
const PEER: Ipv6Addr = Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 2);
const MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];
const PEER_MAC: [u8; 6] = [2, 0, 0, 0, 0, 2];

fn program(addr6: Option<Ipv6Addr>, flags: SteerFlags) -> SteerRun {
    let run = SteerRun::load().expect("load the steering program (root?)");
    run.set_addrs(US4, addr6, flags, Some((40000, 40010))).unwrap();
    run.add_tcp_listener(PORT).unwrap();
    run
}

fn syn(dport: u16, dst: Ipv6Addr) -> Vec<u8> {
    tcp6(&TcpSpec { src_mac: PEER_MAC, dst_mac: MAC, sport: 50000, dport, ..TcpSpec::default() }, PEER, dst)
}

fn ack(dport: u16) -> Vec<u8> {
    let s = TcpSpec { src_mac: PEER_MAC, dst_mac: MAC, sport: 50000, dport, flags: 0x10, ack: 1, ..TcpSpec::default() };
    tcp6(&s, PEER, US)
}

/// The SYN's TCP header behind an extension header `next`.
fn behind(next: u8) -> Vec<u8> {
    let mut p = vec![6, 0, 0, 0, 0, 0, 0, 0];
    p.extend_from_slice(&syn(PORT, US)[54..]);
    ipv6(PEER_MAC, MAC, PEER, US, next, 64, &p)
}

fn steered(run: &mut SteerRun, f: &[u8]) -> bool {
    let (v, steered) = run.would_steer(f).unwrap();
    assert_eq!(v, Verdict::Pass, "no socket is registered: a steered frame passes too");
    steered
}

#[test]
fn shared_address_steers_ipv6_tcp_of_its_ports_only() {
    let mut run = program(Some(US), SteerFlags::NONE);
    assert!(steered(&mut run, &syn(PORT, US)), "a SYN to the listening port");
    assert!(steered(&mut run, &ack(PORT)), "an ACK to it");
    assert!(steered(&mut run, &ack(40005)), "a port of the steered range");
    assert!(!steered(&mut run, &syn(22, US)), "another port (ssh) is the kernel's");
    assert!(!steered(&mut run, &syn(PORT, "2001:2::9".parse().unwrap())), "another address");
    assert!(!steered(&mut run, &neighbour_solicitation(PEER_MAC, PEER, US)), "NDP is the kernel's");
    assert!(!steered(&mut run, &icmpv6(PEER_MAC, MAC, PEER, US, 128, 0, &[0, 1, 0, 1])), "ping is the kernel's");
    assert!(!steered(&mut run, &behind(0)), "hop-by-hop options: the kernel's");
    assert!(!steered(&mut run, &behind(44)), "a fragment: the kernel's");
    // IPv4 as before.
    let v4 = tcp(&TcpSpec { src_mac: PEER_MAC, dst_mac: MAC, dst: US4, dport: PORT, ..TcpSpec::default() });
    assert!(steered(&mut run, &v4));
    // Cut short: never read past the end, the kernel's.
    let f = syn(PORT, US);
    for cut in [14, 20, 53, 60, 73] {
        assert!(!steered(&mut run, &f[..cut]), "cut at {cut}");
    }
}

#[test]
fn any_address_and_no_ipv6() {
    let mut run = program(Some(Ipv6Addr::UNSPECIFIED), SteerFlags::NONE);
    assert!(steered(&mut run, &syn(PORT, "2001:2::9".parse().unwrap())), "any address");
    let mut run = program(None, SteerFlags::NONE);
    assert!(!steered(&mut run, &syn(PORT, US)), "IPv6 off: all of it the kernel's");
}

#[test]
fn dedicated_address_takes_everything_to_it() {
    let mut run = program(Some(US), SteerFlags::ARP | SteerFlags::ICMP);
    assert!(steered(&mut run, &syn(PORT, US)));
    assert!(steered(&mut run, &neighbour_solicitation(PEER_MAC, PEER, US)), "a solicitation for us");
    assert!(!steered(&mut run, &neighbour_solicitation(PEER_MAC, PEER, "2001:2::5".parse().unwrap())), "for another");
    assert!(steered(&mut run, &icmpv6(PEER_MAC, MAC, PEER, US, 128, 0, &[0, 1, 0, 1])), "ping");
    assert!(steered(&mut run, &behind(0)) && steered(&mut run, &behind(44)), "counted by the stack");
    let ra = icmpv6(PEER_MAC, [0x33, 0x33, 0, 0, 0, 1], PEER, "ff02::1".parse().unwrap(), 134, 0, &[0; 12]);
    assert!(!steered(&mut run, &ra), "router advertisements are the kernel's");
    assert!(!steered(&mut run, &syn(22, "2001:2::9".parse().unwrap())));
}

/// On a shared address, a "too big" ICMP error about one of the stack's segments (its
/// quoted TCP source port steered) is the stack's, for path MTU discovery; about the
/// kernel's segments, and every other ICMP error, it stays the kernel's.
#[test]
fn too_big_errors_about_the_stacks_segments_are_the_stacks() {
    let mut run = program(Some(US), SteerFlags::NONE);
    let router6: Ipv6Addr = "2001:2:0:1::1".parse().unwrap();
    let ptb = |sport: u16, ty: u8| {
        let seg = TcpSpec { src_mac: MAC, dst_mac: PEER_MAC, sport, dport: 50000, flags: 0x18, payload: &[0; 1300], ..TcpSpec::default() };
        let mut body = 1280u32.to_be_bytes().to_vec();
        body.extend_from_slice(&tcp6(&seg, US, PEER)[14..14 + 1232]);
        icmpv6(PEER_MAC, MAC, router6, US, ty, 0, &body)
    };
    assert!(steered(&mut run, &ptb(PORT, 2)), "a Packet Too Big about the listening port's connection");
    assert!(steered(&mut run, &ptb(40005, 2)), "about a port of the steered range");
    assert!(!steered(&mut run, &ptb(22, 2)), "about the kernel's ssh connection");
    assert!(!steered(&mut run, &ptb(PORT, 1)), "destination unreachable: the kernel's");
    let f = ptb(PORT, 2);
    for cut in [54, 62, 101, 102, 103] {
        assert!(!steered(&mut run, &f[..cut]), "cut at {cut}");
    }
    let router: Ipv4Addr = Ipv4Addr::new(198, 19, 0, 1);
    let frag_needed = |sport: u16, code: u8| {
        let seg = TcpSpec { src_mac: MAC, dst_mac: PEER_MAC, src: US4, dst: Ipv4Addr::new(198, 18, 0, 2), sport, dport: 50000, ..TcpSpec::default() };
        let mut body = vec![0, 0, 0x05, 0x78];
        body.extend_from_slice(&tcp(&seg)[14..14 + 28]);
        icmp4(PEER_MAC, MAC, router, US4, 3, code, &body)
    };
    assert!(steered(&mut run, &frag_needed(PORT, 4)), "a Fragmentation Needed about the stack's connection");
    assert!(!steered(&mut run, &frag_needed(22, 4)), "about the kernel's");
    assert!(!steered(&mut run, &frag_needed(PORT, 3)), "port unreachable: the kernel's");
    let f = frag_needed(PORT, 4);
    assert!(!steered(&mut run, &f[..f.len() - 7]), "cut inside the quoted ports");
}
