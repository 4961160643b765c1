//! What only IPv6 peers send: extension header chains (well-formed, lying, endless),
//! fragments, impossible sources, neighbour discovery and ICMPv6 of every kind with
//! options of every shape, lengths that lie, and random bytes behind the IPv6 type.

use std::net::Ipv6Addr;

use super::SERVER6;
use crate::xsk::testing::frames::{self, TcpSpec};
use crate::xsk::testing::Rng;

/// Next-header values of extension headers (the Fragment header among them).
const EXT: [u8; 11] = [0, 43, 44, 60, 51, 50, 135, 139, 140, 253, 254];

/// One IPv6 frame from `src` (TCP segment `s` where one is carried) into `out`.
pub(super) fn generate(rng: &mut Rng, src: Ipv6Addr, s: &TcpSpec<'_>, out: &mut Vec<u8>) {
    let seg = &frames::tcp6(s, src, SERVER6)[54..];
    let (smac, dmac) = (s.src_mac, s.dst_mac);
    *out = match rng.below(8) {
        // A chain of extension headers before the segment, its lengths true or not.
        0 => {
            let mut chain = Vec::new();
            let n = 1 + rng.below(4) as usize;
            let first = EXT[rng.below(EXT.len() as u64) as usize];
            let mut next_of = Vec::new();
            for _ in 1..n {
                next_of.push(EXT[rng.below(EXT.len() as u64) as usize]);
            }
            next_of.push(if rng.chance(800) { 6 } else { rng.next() as u8 });
            for next in next_of {
                let words = rng.below(4) as usize;
                let len_field = if rng.chance(900) { words as u8 } else { rng.next() as u8 };
                chain.push(next);
                chain.push(len_field);
                chain.extend((0..6 + words * 8).map(|_| rng.next() as u8));
            }
            chain.extend_from_slice(seg);
            frames::ipv6(smac, dmac, src, SERVER6, first, 64, &chain)
        }
        // A fragment: first (the TCP header inside), later, or atomic.
        1 => {
            let off_m: u16 = match rng.below(3) {
                0 => 1,
                1 => (rng.below(0x1fff) as u16) << 3 | rng.below(2) as u16,
                _ => 0,
            };
            let mut f = vec![6, 0];
            f.extend_from_slice(&off_m.to_be_bytes());
            f.extend_from_slice(&(rng.next() as u32).to_be_bytes());
            f.extend_from_slice(seg);
            frames::ipv6(smac, dmac, src, SERVER6, 44, 64, &f)
        }
        // A source no peer can have.
        2 => {
            let bad: Ipv6Addr = match rng.below(6) {
                0 => Ipv6Addr::UNSPECIFIED,
                1 => Ipv6Addr::LOCALHOST,
                2 => "ff02::1".parse().unwrap(),
                3 => SERVER6,
                4 => "::ffff:198.18.0.2".parse().unwrap(),
                _ => "fe80::2".parse().unwrap(),
            };
            frames::tcp6(s, bad, SERVER6)
        }
        // Neighbour discovery: solicitations (for us or not), advertisements, router
        // solicitations and advertisements, redirects, with options of any shape.
        3 => ndp(rng, src, smac),
        // ICMPv6: echo, errors (packet too big with any MTU) carrying anything.
        4 => {
            let ty = match rng.below(5) {
                0 => 128,
                1 => 2,
                2 => 1,
                3 => 3,
                _ => rng.next() as u8,
            };
            let mut body = (rng.next() as u32).to_be_bytes().to_vec();
            if ty == 2 && rng.chance(700) {
                // A Packet Too Big about the server's segment to this peer (its ports, a
                // sequence number near what the peer acknowledges), an MTU mostly plausible.
                let mtu = if rng.chance(800) { 1200 + rng.below(400) as u32 } else { rng.next() as u32 };
                body = mtu.to_be_bytes().to_vec();
                let q = TcpSpec { sport: s.dport, dport: s.sport, seq: s.ack.wrapping_sub(rng.below(2000) as u32), ..s.clone() };
                let quoted = frames::tcp6(&q, SERVER6, src);
                body.extend_from_slice(&quoted[14..quoted.len().min(14 + 1232)]);
            } else if rng.chance(500) {
                body.extend_from_slice(&frames::tcp6(s, SERVER6, src)[14..]);
            } else {
                body.extend((0..rng.below(100)).map(|_| rng.next() as u8));
            }
            let to = if rng.chance(800) { dmac } else { [0x33, 0x33, 0, 0, 0, 1] };
            let mut f = frames::icmpv6(smac, to, src, SERVER6, ty, rng.next() as u8, &body);
            if rng.chance(100) {
                let at = 54 + rng.below((f.len() - 54) as u64) as usize;
                f[at] ^= 1;
            }
            f
        }
        // The payload length lies, or the next header is anything.
        5 => {
            let mut f = frames::tcp6(s, src, SERVER6);
            if rng.chance(500) {
                let len = rng.next() as u16;
                f[18..20].copy_from_slice(&len.to_be_bytes());
            } else {
                f[20] = rng.next() as u8;
            }
            f
        }
        // TCP to our solicited-node group, a multicast MAC, another address.
        6 => {
            let group = crate::xsk::testing::frames::solicited_group(SERVER6);
            let mut f = frames::tcp6(s, src, if rng.chance(500) { group } else { "2001:2::99".parse().unwrap() });
            if rng.chance(500) {
                f[0..6].copy_from_slice(&[0x33, 0x33, 0xff, 0, 0, 1]);
            }
            f
        }
        // Random bytes behind the IPv6 type, our address as destination now and then.
        _ => {
            let n = 14 + rng.below(120) as usize;
            let mut f: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
            f[0..6].copy_from_slice(&dmac);
            f[6..12].copy_from_slice(&smac);
            f[12..14].copy_from_slice(&[0x86, 0xdd]);
            if n > 54 && rng.chance(700) {
                f[14] = 0x60;
                f[38..54].copy_from_slice(&SERVER6.octets());
            }
            f
        }
    };
}

fn ndp(rng: &mut Rng, src: Ipv6Addr, smac: [u8; 6]) -> Vec<u8> {
    let ty = 133 + rng.below(5) as u8; // RS, RA, NS, NA, redirect
    let target = if rng.chance(700) { SERVER6 } else { Ipv6Addr::from(rng.next() as u128 | (rng.next() as u128) << 64) };
    let mut body = match ty {
        133 => vec![0; 4],
        134 => (0..12).map(|_| rng.next() as u8).collect(),
        135 | 136 => {
            let mut b = if ty == 136 { vec![rng.next() as u8 & 0xe0, 0, 0, 0] } else { vec![0; 4] };
            b.extend_from_slice(&target.octets());
            b
        }
        _ => {
            let mut b = vec![0; 4];
            b.extend_from_slice(&target.octets());
            b.extend_from_slice(&src.octets());
            b
        }
    };
    // Options: link-layer addresses (any MAC, multicast too), prefix information, MTU,
    // or junk, with lengths true, zero or past the end.
    for _ in 0..rng.below(4) {
        let kind = if rng.chance(600) { 1 + rng.below(5) as u8 } else { rng.next() as u8 };
        let units = match rng.below(10) {
            0 => 0,
            1 => rng.next() as u8,
            _ => 1 + rng.below(4) as u8,
        };
        body.push(kind);
        body.push(units);
        let n = (units as usize * 8).saturating_sub(2).min(40);
        body.extend((0..n).map(|_| rng.next() as u8));
    }
    let (dst, dmac) = if ty == 135 && rng.chance(700) {
        let g = crate::xsk::testing::frames::solicited_group(target);
        let o = g.octets();
        (g, [0x33, 0x33, o[12], o[13], o[14], o[15]])
    } else if rng.chance(300) {
        ("ff02::1".parse().unwrap(), [0x33, 0x33, 0, 0, 0, 1])
    } else {
        (SERVER6, crate::xsk::testing::mac_of(super::SERVER))
    };
    let mut f = frames::icmpv6(smac, dmac, src, dst, ty, if rng.chance(900) { 0 } else { rng.next() as u8 }, &body);
    if rng.chance(200) {
        f[21] = rng.next() as u8; // hop limit other than 255
    }
    f
}
