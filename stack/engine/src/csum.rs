//! The Internet checksum (RFC 1071) of TCP/IPv4 and TCP/IPv6 frames, eight bytes a step.
//!
//! Every received TCP segment is verified once, in `demux::inspect`, before
//! smoltcp sees it (smoltcp is told not to verify again), and every TCP
//! segment smoltcp writes gets its checksum here ([`fill_tcp`], called by
//! the engine's TX token; smoltcp is told not to compute it). smoltcp's
//! `checksum` functions take two 16-bit words a step and sum a pseudo-header
//! through three small slices, which makes the two sums a large share of a
//! request's user-space work at light load; this one takes eight bytes a
//! step (`docs/2026-12-01-light-load.md`). The sum is order-independent
//! (RFC 1071, 2.B): native-endian 64-bit words are added with the end-around
//! carry, folded, and byte-swapped once.

use std::net::{Ipv4Addr, Ipv6Addr};

/// The one's-complement sum of `data` as big-endian 16-bit words (an odd
/// last byte padded with zero), folded to 16 bits: the same value as
/// `smoltcp::wire::ip::checksum::data`, so 0xffff for a buffer whose
/// checksum field is right.
#[inline]
pub fn data(data: &[u8]) -> u16 {
    fold(add(0, data))
}

/// The sum of the TCP segment `seg` with its IPv4 pseudo-header, folded:
/// 0xffff when the segment's checksum is right.
#[inline]
pub fn tcp_v4(src: Ipv4Addr, dst: Ipv4Addr, seg: &[u8]) -> u16 {
    fold(add(pseudo_v4(src, dst, seg.len()), seg))
}

/// The IPv4 pseudo-header of a TCP segment of `len` bytes, folded: what a
/// sender with checksum offload leaves in the checksum field (the same value
/// as `smoltcp::wire::ip::checksum::pseudo_header_v4`).
#[inline]
pub fn tcp_v4_pseudo(src: Ipv4Addr, dst: Ipv4Addr, len: usize) -> u16 {
    fold(pseudo_v4(src, dst, len))
}

/// The sum of an upper-layer packet `seg` (protocol `proto`: TCP 6, ICMPv6 58) with
/// its IPv6 pseudo-header (RFC 8200, 8.1), folded: 0xffff when its checksum is right.
#[inline]
pub fn l4_v6(src: Ipv6Addr, dst: Ipv6Addr, proto: u8, seg: &[u8]) -> u16 {
    fold(add(pseudo_v6(src, dst, proto, seg.len()), seg))
}

/// The IPv6 pseudo-header of a TCP segment of `len` bytes, folded: what a sender with
/// checksum offload leaves in the checksum field.
#[inline]
pub fn tcp_v6_pseudo(src: Ipv6Addr, dst: Ipv6Addr, len: usize) -> u16 {
    fold(pseudo_v6(src, dst, 6, len))
}

/// Fills in the TCP checksum of an Ethernet/IPv4/TCP or Ethernet/IPv6/TCP frame (TCP
/// right after the fixed IPv6 header: smoltcp writes no extension header); any other
/// frame (ARP, ICMP, or one too short to be TCP) is left as it is.
pub fn fill_tcp(frame: &mut [u8]) {
    let Some(r) = tcp_range(frame) else { return };
    let sum = match r.family {
        Family::V4 => {
            let ip = &frame[14..];
            let (src, dst) = (v4_at(ip, 12), v4_at(ip, 16));
            let seg = &mut frame[14 + r.start..14 + r.end];
            seg[16..18].copy_from_slice(&[0, 0]);
            !tcp_v4(src, dst, seg)
        }
        Family::V6 => {
            let ip = &frame[14..];
            let (src, dst) = (v6_at(ip, 8), v6_at(ip, 24));
            let seg = &mut frame[14 + r.start..14 + r.end];
            seg[16..18].copy_from_slice(&[0, 0]);
            !l4_v6(src, dst, 6, seg)
        }
    };
    let at = 14 + r.start + 16;
    frame[at..at + 2].copy_from_slice(&sum.to_be_bytes());
}

/// Where the TCP checksum field is, from the frame's first byte.
pub const TCP_CSUM_OFFSET: u16 = 16;

/// For checksum offload: writes the pseudo-header sum of an Ethernet/IPv4/TCP or
/// Ethernet/IPv6/TCP frame into its checksum field, as a CHECKSUM_PARTIAL sender does,
/// and returns where the TCP header starts (the offload's `csum_start`; the field is
/// [`TCP_CSUM_OFFSET`] after it). Any other frame is left as it is (None).
///
/// The IPv4 arm comes first, written out: it runs for every IPv4 frame sent with
/// offload, and the shared `tcp_range` would match on the family a second time.
#[inline]
pub fn fill_tcp_pseudo(frame: &mut [u8]) -> Option<u16> {
    if frame.len() >= 14 + 20 && frame[12..14] == [0x08, 0x00] {
        let ip = &frame[14..];
        let ihl = (ip[0] & 0x0f) as usize * 4;
        let total = u16::from_be_bytes([ip[2], ip[3]]) as usize;
        if ip[0] >> 4 != 4 || ip[9] != 6 || ihl < 20 || total < ihl + 20 || total > ip.len() {
            return None;
        }
        let pseudo = tcp_v4_pseudo(v4_at(ip, 12), v4_at(ip, 16), total - ihl);
        frame[14 + ihl + 16..14 + ihl + 18].copy_from_slice(&pseudo.to_be_bytes());
        return Some((14 + ihl) as u16);
    }
    fill_tcp_pseudo_v6(frame)
}

/// [`fill_tcp_pseudo`] of an Ethernet/IPv6/TCP frame.
fn fill_tcp_pseudo_v6(frame: &mut [u8]) -> Option<u16> {
    let r = tcp_range(frame)?;
    let Family::V6 = r.family else { return None };
    let ip = &frame[14..];
    let pseudo = tcp_v6_pseudo(v6_at(ip, 8), v6_at(ip, 24), r.end - r.start);
    let at = 14 + r.start + 16;
    frame[at..at + 2].copy_from_slice(&pseudo.to_be_bytes());
    Some((14 + r.start) as u16)
}

enum Family {
    V4,
    V6,
}

/// Where the TCP segment of an Ethernet/IP/TCP frame lies, from the IP header's start.
struct TcpRange {
    family: Family,
    start: usize,
    end: usize,
}

/// The TCP segment of an Ethernet/IPv4/TCP frame, or of an Ethernet/IPv6/TCP one with
/// no extension header, with a whole TCP header inside it.
#[inline]
fn tcp_range(frame: &[u8]) -> Option<TcpRange> {
    if frame.len() < 14 + 20 {
        return None;
    }
    let ip = &frame[14..];
    match [frame[12], frame[13]] {
        [0x08, 0x00] => {
            let ihl = (ip[0] & 0x0f) as usize * 4;
            let total = u16::from_be_bytes([ip[2], ip[3]]) as usize;
            if ip[0] >> 4 != 4 || ip[9] != 6 || ihl < 20 || total < ihl + 20 || total > ip.len() {
                return None;
            }
            Some(TcpRange { family: Family::V4, start: ihl, end: total })
        }
        [0x86, 0xdd] => {
            if ip.len() < 40 || ip[0] >> 4 != 6 || ip[6] != 6 {
                return None;
            }
            let end = 40 + u16::from_be_bytes([ip[4], ip[5]]) as usize;
            if end < 40 + 20 || end > ip.len() {
                return None;
            }
            Some(TcpRange { family: Family::V6, start: 40, end })
        }
        _ => None,
    }
}

#[inline]
fn v4_at(b: &[u8], at: usize) -> Ipv4Addr {
    Ipv4Addr::new(b[at], b[at + 1], b[at + 2], b[at + 3])
}

#[inline]
fn v6_at(b: &[u8], at: usize) -> Ipv6Addr {
    let mut a = [0u8; 16];
    a.copy_from_slice(&b[at..at + 16]);
    Ipv6Addr::from(a)
}

/// The unfolded IPv6 pseudo-header: both addresses, the upper-layer length (32 bits)
/// and the next header (32 bits, three zero bytes first).
#[inline]
fn pseudo_v6(src: Ipv6Addr, dst: Ipv6Addr, proto: u8, len: usize) -> u64 {
    let mut acc = add(0, &src.octets());
    acc = add(acc, &dst.octets());
    let len = (len as u32).to_be_bytes();
    acc = add_carry(acc, u32::from_ne_bytes(len) as u64);
    add_carry(acc, u32::from_ne_bytes([0, 0, 0, proto]) as u64)
}

/// The unfolded sum of the pseudo-header, in the order `add` sums in.
#[inline]
fn pseudo_v4(src: Ipv4Addr, dst: Ipv4Addr, len: usize) -> u64 {
    let len = (len as u16).to_be_bytes();
    u32::from_ne_bytes(src.octets()) as u64
        + u32::from_ne_bytes(dst.octets()) as u64
        + u32::from_ne_bytes([0, 6, len[0], len[1]]) as u64
}

/// Adds `data` to an unfolded sum: native-endian words (RFC 1071, 2.B),
/// fine as long as `data` starts at an even offset of the summed message.
/// Eight bytes a step with the end-around carry (add, adc): 2^64 and 2^16
/// are both 1 modulo 2^16 - 1, so a 64-bit one's-complement sum folds to
/// the 16-bit one.
#[inline]
fn add(mut acc: u64, data: &[u8]) -> u64 {
    let (chunks, rest) = data.as_chunks::<8>();
    for c in chunks {
        acc = add_carry(acc, u64::from_ne_bytes(*c));
    }
    let (words, rest) = rest.as_chunks::<4>();
    for w in words {
        acc = add_carry(acc, u32::from_ne_bytes(*w) as u64);
    }
    let (pairs, rest) = rest.as_chunks::<2>();
    for p in pairs {
        acc = add_carry(acc, u16::from_ne_bytes(*p) as u64);
    }
    if let Some(&b) = rest.first() {
        acc = add_carry(acc, u16::from_ne_bytes([b, 0]) as u64);
    }
    acc
}

#[inline(always)]
fn add_carry(a: u64, b: u64) -> u64 {
    let (sum, carry) = a.overflowing_add(b);
    sum + carry as u64
}

/// 64 -> 16 bits with the end-around carries, as a big-endian value: two
/// halves added with the carry put back, twice (add, adc at each width).
#[inline]
fn fold(acc: u64) -> u16 {
    let (s, c) = (acc as u32).overflowing_add((acc >> 32) as u32);
    let s = s.wrapping_add(c as u32); // no overflow: a carry leaves s < u32::MAX
    let (t, c) = (s as u16).overflowing_add((s >> 16) as u16);
    u16::from_be(t.wrapping_add(c as u16))
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use smoltcp::wire::{checksum, IpProtocol};

    #[test]
    fn fills_what_a_correct_sender_writes() {
        use crate::testing::frames::{tcp, TcpSpec};
        let payload: Vec<u8> = (0..=255u8).collect();
        for len in [0usize, 1, 7, 64, 255] {
            let good = tcp(&TcpSpec {
                src: Ipv4Addr::new(198, 18, 0, 2),
                dst: Ipv4Addr::new(198, 18, 0, 1),
                sport: 40_000,
                dport: 7000,
                flags: 0x18,
                payload: &payload[..len],
                ..TcpSpec::default()
            });
            let mut f = good.clone();
            f[50] ^= 0x5a; // the checksum field, garbled
            super::fill_tcp(&mut f);
            assert_eq!(f, good, "payload {len}");
            // Ethernet padding after the packet is not summed.
            let mut padded = good.clone();
            padded.extend_from_slice(&[0xee; 6]);
            padded[51] ^= 1;
            super::fill_tcp(&mut padded);
            assert_eq!(&padded[..good.len()], &good[..]);
        }
        // Cut short (the IPv4 total length then points past the end), or
        // garbage: untouched, and no panic.
        let good = tcp(&TcpSpec { flags: 0x02, ..TcpSpec::default() });
        for cut in 0..good.len() {
            for garble in [false, true] {
                let mut f = good[..cut].to_vec();
                if garble {
                    f.iter_mut().skip(14).for_each(|b| *b = 0xff);
                }
                let before = f.clone();
                super::fill_tcp(&mut f);
                assert_eq!(f, before, "cut {cut} garbled {garble}");
            }
        }
        let mut arp = good.clone();
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        let before = arp.clone();
        super::fill_tcp(&mut arp);
        assert_eq!(arp, before);
    }

    #[test]
    fn a_completed_partial_checksum_is_the_full_one() {
        use crate::testing::frames::{tcp, TcpSpec};
        let payload: Vec<u8> = (0..=255u8).rev().collect();
        for len in [0usize, 1, 7, 64, 255] {
            let good = tcp(&TcpSpec { flags: 0x18, payload: &payload[..len], ..TcpSpec::default() });
            let mut f = good.clone();
            f[50] ^= 0xa5;
            let start = super::fill_tcp_pseudo(&mut f).expect("a TCP frame") as usize;
            assert_eq!(start, 34);
            // What the device (or skb_checksum_help) does with CHECKSUM_PARTIAL:
            // sum from csum_start to the end, field included, and store the complement.
            let sum = !super::data(&f[start..]);
            let at = start + super::TCP_CSUM_OFFSET as usize;
            f[at..at + 2].copy_from_slice(&sum.to_be_bytes());
            assert_eq!(f, good, "payload {len}");
        }
        let mut arp = tcp(&TcpSpec::default());
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        let before = arp.clone();
        assert_eq!(super::fill_tcp_pseudo(&mut arp), None);
        assert_eq!(arp, before);
        for cut in 0..54 {
            let mut f = tcp(&TcpSpec::default())[..cut].to_vec();
            assert_eq!(super::fill_tcp_pseudo(&mut f), None, "cut {cut}");
        }
    }

    #[test]
    fn matches_smoltcp_on_every_length_and_extreme_bytes() {
        // A small xorshift: the same bytes on every run.
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        };
        for len in 0..300 {
            let random: Vec<u8> = (0..len).map(|_| next()).collect();
            for buf in [random, vec![0xff; len], vec![0; len], vec![0x80; len]] {
                // Every alignment of the slice start, too.
                for skip in 0..buf.len().min(8) {
                    let b = &buf[skip..];
                    assert_eq!(super::data(b), checksum::data(b), "len {len} skip {skip}");
                }
            }
        }
        // The pseudo-header, over lengths with both bytes set.
        let (a, b) = (Ipv4Addr::new(198, 18, 0, 2), Ipv4Addr::new(255, 1, 128, 7));
        for len in [0usize, 20, 255, 256, 1480, 65_515] {
            let theirs = checksum::pseudo_header_v4(&a, &b, IpProtocol::Tcp, len as u32);
            assert_eq!(super::tcp_v4_pseudo(a, b, len), theirs, "len {len}");
            let seg: Vec<u8> = (0..len.min(300)).map(|_| next()).collect();
            let pseudo = checksum::pseudo_header_v4(&a, &b, IpProtocol::Tcp, seg.len() as u32);
            assert_eq!(super::tcp_v4(a, b, &seg), checksum::combine(&[pseudo, checksum::data(&seg)]));
        }
        // The longest IPv4 packet.
        let big = vec![0xffu8; 65_535];
        assert_eq!(super::data(&big), checksum::data(&big));
    }

    #[test]
    fn ipv6_matches_smoltcp_and_fills_like_the_builder() {
        use crate::testing::frames::{tcp6, TcpSpec};
        use std::net::Ipv6Addr;
        let (a, b): (Ipv6Addr, Ipv6Addr) = ("2001:2::1".parse().unwrap(), "2001:2:0:ffff::fe".parse().unwrap());
        for len in [0usize, 20, 255, 256, 1440, 65_515] {
            let theirs = checksum::pseudo_header_v6(&a, &b, IpProtocol::Tcp, len as u32);
            assert_eq!(super::tcp_v6_pseudo(a, b, len), theirs, "len {len}");
            let seg: Vec<u8> = (0..len.min(300)).map(|i| (i * 7 + 3) as u8).collect();
            let pseudo = checksum::pseudo_header_v6(&a, &b, IpProtocol::Tcp, seg.len() as u32);
            assert_eq!(super::l4_v6(a, b, 6, &seg), checksum::combine(&[pseudo, checksum::data(&seg)]));
        }
        let payload: Vec<u8> = (0..=255u8).collect();
        for len in [0usize, 1, 7, 64, 255] {
            let good = tcp6(&TcpSpec { flags: 0x18, payload: &payload[..len], ..TcpSpec::default() }, a, b);
            let mut f = good.clone();
            f[70] ^= 0x5a;
            super::fill_tcp(&mut f);
            assert_eq!(f, good, "fill_tcp, payload {len}");
            // The offload's way: the pseudo-header sum, completed over the segment.
            let mut f = good.clone();
            let start = super::fill_tcp_pseudo(&mut f).expect("a TCP frame") as usize;
            assert_eq!(start, 54);
            let sum = !super::data(&f[start..]);
            f[start + 16..start + 18].copy_from_slice(&sum.to_be_bytes());
            assert_eq!(f, good, "offload, payload {len}");
        }
        // An extension header before TCP, or a cut frame: untouched.
        let mut ext = tcp6(&TcpSpec::default(), a, b);
        ext[20] = 0;
        let before = ext.clone();
        super::fill_tcp(&mut ext);
        assert_eq!(ext, before);
        for cut in 0..74 {
            let mut f = tcp6(&TcpSpec::default(), a, b)[..cut].to_vec();
            assert_eq!(super::fill_tcp_pseudo(&mut f), None, "cut {cut}");
        }
    }

    /// `fold` against the textbook one (four masked halvings), on the
    /// values where carries meet and on random ones.
    #[test]
    fn fold_equals_the_textbook_fold() {
        fn textbook(mut acc: u64) -> u16 {
            acc = (acc & 0xffff_ffff) + (acc >> 32);
            acc = (acc & 0xffff_ffff) + (acc >> 32);
            acc = (acc & 0xffff) + (acc >> 16);
            acc = (acc & 0xffff) + (acc >> 16);
            u16::from_be(acc as u16)
        }
        let mut edges = vec![0u64, 1, u64::MAX, u64::MAX - 1];
        for half in [0u64, 1, 0xfffe, 0xffff, 0x1_0000, 0xffff_fffe, 0xffff_ffff] {
            for other in [0u64, 1, 0xffff, 0xffff_ffff] {
                edges.push(half << 32 | other);
                edges.push(other << 32 | half);
            }
        }
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        for _ in 0..100_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            edges.push(x);
        }
        for v in edges {
            assert_eq!(super::fold(v), textbook(v), "{v:#x}");
        }
    }
}
