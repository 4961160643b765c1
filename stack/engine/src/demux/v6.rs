//! The checks of an IPv6 frame, as `inspect` makes them for IPv4: what smoltcp must
//! never see is refused here, counted by reason.
//!
//! The stack parses no extension header: a packet whose next header is not TCP or
//! ICMPv6 is refused, a Fragment header as `Fragment`, the other extension headers as
//! `ExtensionHeader`, so a hostile chain of them costs one byte's look. Multicast reaches
//! the stack only as a neighbour solicitation for its address (its solicited-node
//! group), which dedicated mode answers; everything else multicast (router
//! advertisements, MLD) is the kernel's business or nobody's.

use std::net::Ipv6Addr;

use super::{holds_pseudo, tcp_header, Flow, Inspected, RxRules};
use crate::csum;
use crate::drops::DropReason;

/// IPv6 next-header values of extension headers (RFC 8200 and the IANA registry):
/// hop-by-hop, routing, destination options, AH, ESP, mobility, HIP, shim6, the two
/// experimental ones.
const EXTENSION_HEADERS: [u8; 10] = [0, 43, 60, 51, 50, 135, 139, 140, 253, 254];
const FRAGMENT_HEADER: u8 = 44;
const TCP: u8 = 6;
const ICMPV6: u8 = 58;

/// The solicited-node multicast group of `a` (RFC 4291, 2.7.1): ff02::1:ffXX:XXXX.
pub fn solicited_node(a: Ipv6Addr) -> Ipv6Addr {
    let o = a.octets();
    Ipv6Addr::from([0xff, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, o[13], o[14], o[15]])
}

/// The Ethernet group a multicast IPv6 address maps to (RFC 2464, 7): 33:33 and its
/// last four bytes.
fn multicast_mac(a: Ipv6Addr) -> [u8; 6] {
    let o = a.octets();
    [0x33, 0x33, o[12], o[13], o[14], o[15]]
}

fn addr_at(ip: &[u8], at: usize) -> Ipv6Addr {
    let mut a = [0u8; 16];
    a.copy_from_slice(&ip[at..at + 16]);
    Ipv6Addr::from(a)
}

/// `frame` is Ethernet with the IPv6 type; `to_us`: its destination MAC is ours.
pub(super) fn inspect(
    frame: &[u8],
    rules: &RxRules,
    src_mac: [u8; 6],
    to_us: bool,
    partial_first: bool,
) -> Result<Inspected, DropReason> {
    let Some(ours) = rules.addr6 else { return Err(DropReason::Unsupported) };
    let ip = &frame[14..];
    if ip.len() < 40 || ip[0] >> 4 != 6 {
        return Err(DropReason::Malformed);
    }
    // As for IPv4, Ethernet padding may follow the packet; the packet never runs past
    // the frame.
    let end = 40 + u16::from_be_bytes([ip[4], ip[5]]) as usize;
    if end > ip.len() {
        return Err(DropReason::Malformed);
    }
    let next = ip[6];
    let (src, dst) = (addr_at(ip, 8), addr_at(ip, 24));
    let unicast = to_us && dst == ours;
    let solicitation = next == ICMPV6
        && dst == solicited_node(ours)
        && (to_us || frame[0..6] == multicast_mac(dst));
    if !unicast && !solicitation {
        return Err(DropReason::NotForUs);
    }
    if rules.bad_source_v6(src) {
        return Err(DropReason::BadSource);
    }
    let payload = &ip[40..end];
    match next {
        TCP => {
            let (sport, dport, syn) = tcp_header(payload)?;
            let full = || csum::l4_v6(src, dst, TCP, payload) == 0xffff;
            let partial = || rules.accept_partial && holds_pseudo(payload, csum::tcp_v6_pseudo(src, dst, payload.len()));
            let partial_csum = if partial_first && partial() {
                true
            } else if full() {
                false
            } else if !partial_first && partial() {
                true
            } else {
                return Err(DropReason::BadChecksum);
            };
            Ok(Inspected { flow: Flow::Tcp { src: src.into(), sport, dport, syn }, src_mac, partial_csum })
        }
        ICMPV6 => {
            // Every ICMPv6 message the stack takes (echo, neighbour discovery, errors)
            // has at least 8 bytes.
            if payload.len() < 8 {
                return Err(DropReason::Malformed);
            }
            if csum::l4_v6(src, dst, ICMPV6, payload) != 0xffff {
                return Err(DropReason::BadChecksum);
            }
            Ok(Inspected { flow: Flow::Icmp { src: src.into() }, src_mac, partial_csum: false })
        }
        FRAGMENT_HEADER => Err(DropReason::Fragment),
        n if EXTENSION_HEADERS.contains(&n) => Err(DropReason::ExtensionHeader),
        _ => Err(DropReason::Unsupported),
    }
}

#[cfg(test)]
#[path = "v6_tests.rs"]
mod tests;
