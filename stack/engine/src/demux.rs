//! Which socket bucket a frame belongs to.
//!
//! smoltcp finds a packet's socket by scanning its whole `SocketSet`, and
//! its egress pass and `poll_at` scan every socket too. With thousands of
//! connections in one set that scan dominates, so the stack keeps many small
//! sets ("buckets") and hashes each TCP frame's 4-tuple to one of them. A
//! connection lives in the bucket its 4-tuple hashes to; every bucket holds
//! listening sockets for every listening port, so a SYN finds a listener
//! wherever it lands.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::csum;

mod v6;

pub use v6::solicited_node;

use super::drops::DropReason;

/// The bucket of a TCP flow, from the peer's address and port and our port.
/// (Our address is the same for all flows of a stack and family.)
#[inline]
pub fn bucket_of(remote: IpAddr, remote_port: u16, local_port: u16, buckets: usize) -> usize {
    debug_assert!(buckets.is_power_of_two());
    let a = match remote {
        IpAddr::V4(a) => u32::from(a),
        IpAddr::V6(a) => fold_v6(a),
    };
    // A multiply-xorshift mix: cheap, and spreads sequential ports well.
    let mut h = (a as u64) << 32 | (remote_port as u64) << 16 | local_port as u64;
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^= h >> 33;
    (h as usize) & (buckets - 1)
}

/// An IPv6 address in 32 bits for [`bucket_of`]: the words rotated apart before they are
/// combined, so that peers differing in any part (the interface identifier, mostly)
/// spread.
#[inline]
pub fn fold_v6(a: Ipv6Addr) -> u32 {
    let w = a.to_bits();
    (w as u32) ^ ((w >> 32) as u32).rotate_left(8) ^ ((w >> 64) as u32).rotate_left(16) ^ ((w >> 96) as u32).rotate_left(24)
}

/// What the demultiplexer needs from an incoming frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    /// TCP over IPv4 or IPv6: source address, source port, destination port, and
    /// whether it opens a connection (SYN without ACK).
    #[allow(missing_docs)]
    Tcp { src: IpAddr, sport: u16, dport: u16, syn: bool },
    /// ICMP (IPv4) or ICMPv6 (neighbour discovery, echo, errors): source address.
    #[allow(missing_docs)]
    Icmp { src: IpAddr },
    /// ARP for us, from `sender`.
    #[allow(missing_docs)]
    Arp { sender: Ipv4Addr },
}

/// What a received frame must satisfy before smoltcp may see it.
#[derive(Clone, Copy, Debug)]
pub struct RxRules {
    /// Our MAC: unicast frames to another are dropped.
    pub mac: [u8; 6],
    /// Our address.
    pub addr: Ipv4Addr,
    /// Our subnet (its broadcast address is nobody's source).
    pub prefix_len: u8,
    /// Accept TCP checksums left partial by a local sender's checksum offload.
    pub accept_partial: bool,
    /// Our IPv6 address, if the stack has one (IPv6 frames are refused otherwise).
    pub addr6: Option<Ipv6Addr>,
    /// Its subnet's prefix length.
    pub prefix6_len: u8,
}

impl RxRules {
    fn subnet_broadcast(&self) -> Ipv4Addr {
        let mask = if self.prefix_len == 0 { 0 } else { u32::MAX << (32 - self.prefix_len.min(32)) };
        Ipv4Addr::from(u32::from(self.addr) | !mask)
    }

    /// An address that no peer can send from.
    pub fn bad_source(&self, a: Ipv4Addr) -> bool {
        a.is_unspecified()
            || a.is_broadcast()
            || a.is_multicast()
            || a.is_loopback()
            // 240.0.0.0/4, reserved.
            || a.octets()[0] >= 240
            || a == self.addr
            || (self.prefix_len < 31 && a == self.subnet_broadcast())
    }

    /// Whether `a` is on our link (a neighbour, not behind a router).
    pub fn on_link(&self, a: Ipv4Addr) -> bool {
        let mask = if self.prefix_len == 0 { 0 } else { u32::MAX << (32 - self.prefix_len.min(32)) };
        u32::from(a) & mask == u32::from(self.addr) & mask
    }

    /// An IPv6 address that no peer can send from: unspecified, multicast, loopback,
    /// IPv4-mapped (never on a wire), or ours.
    pub fn bad_source_v6(&self, a: Ipv6Addr) -> bool {
        a.is_unspecified() || a.is_multicast() || a.is_loopback() || a.to_ipv4_mapped().is_some() || Some(a) == self.addr6
    }

    /// Whether IPv6 `a` is in our IPv6 subnet (link-local addresses are on the link
    /// too, but the stack has none, so no answer could reach them).
    pub fn on_link_v6(&self, a: Ipv6Addr) -> bool {
        let Some(ours) = self.addr6 else { return false };
        let n = self.prefix6_len.min(128);
        let mask = if n == 0 { 0 } else { u128::MAX << (128 - n) };
        a.to_bits() & mask == ours.to_bits() & mask
    }

    /// [`on_link`](Self::on_link) or [`on_link_v6`](Self::on_link_v6), by family.
    pub fn on_link_ip(&self, a: IpAddr) -> bool {
        match a {
            IpAddr::V4(a) => self.on_link(a),
            IpAddr::V6(a) => self.on_link_v6(a),
        }
    }

    /// [`bad_source`](Self::bad_source) or [`bad_source_v6`](Self::bad_source_v6), by family.
    pub fn bad_source_ip(&self, a: IpAddr) -> bool {
        match a {
            IpAddr::V4(a) => self.bad_source(a),
            IpAddr::V6(a) => self.bad_source_v6(a),
        }
    }
}

/// A frame that passed [`inspect`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Inspected {
    /// What it is and whose.
    pub flow: Flow,
    /// The sender's MAC (the engine learns the neighbour from it).
    pub src_mac: [u8; 6],
    /// The TCP checksum was a partial one (accepted by the rules).
    pub partial_csum: bool,
}

/// Checks everything smoltcp must never see (impossible lengths, addresses
/// no peer can have, wrong checksums) and classifies the frame. Never panics.
pub fn inspect(frame: &[u8], rules: &RxRules) -> Result<Inspected, DropReason> {
    inspect_expecting(frame, rules, false)
}

/// [`inspect`], trying a partial TCP checksum first when `partial_first`
/// (and the rules accept one): a peer sends either kind all the time, so the
/// caller passes what the last segment had. A veth peer with default
/// offloads leaves every checksum partial, and summing the whole segment
/// before looking for that would sum every such segment for nothing
/// (`docs/2026-12-04-light-cuts/`). Only the
/// order of the checks changes, with one exception: a segment whose full
/// checksum is right and whose field also equals the pseudo-header sum (one
/// in 65,536) is accepted as partial rather than as valid.
pub fn inspect_expecting(frame: &[u8], rules: &RxRules, partial_first: bool) -> Result<Inspected, DropReason> {
    if frame.len() < 14 {
        return Err(DropReason::Malformed);
    }
    let dst_mac = &frame[0..6];
    let mut src_mac = [0u8; 6];
    src_mac.copy_from_slice(&frame[6..12]);
    if src_mac[0] & 1 != 0 || src_mac == [0; 6] {
        // A multicast or zero source MAC: no station sends from it.
        return Err(DropReason::BadSource);
    }
    let to_us = dst_mac == rules.mac;
    let broadcast = dst_mac == [0xff; 6];
    match u16::from_be_bytes([frame[12], frame[13]]) {
        0x0806 => return inspect_arp(&frame[14..], rules, src_mac, to_us || broadcast),
        0x86dd => return v6::inspect(frame, rules, src_mac, to_us, partial_first),
        0x0800 => {}
        _ => return Err(DropReason::Unsupported),
    }
    if !to_us {
        return Err(DropReason::NotForUs);
    }
    let ip = &frame[14..];
    if ip.len() < 20 || ip[0] >> 4 != 4 {
        return Err(DropReason::Malformed);
    }
    let ihl = (ip[0] & 0x0f) as usize * 4;
    let total = u16::from_be_bytes([ip[2], ip[3]]) as usize;
    // Ethernet may pad a short packet, so the frame can be longer than the
    // IPv4 total length, never shorter.
    if ihl < 20 || total < ihl || total > ip.len() {
        return Err(DropReason::Malformed);
    }
    let ip = &ip[..total];
    if csum::data(&ip[..ihl]) != 0xffff {
        return Err(DropReason::BadChecksum);
    }
    let src = Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]);
    let dst = Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]);
    if dst != rules.addr {
        return Err(DropReason::NotForUs);
    }
    if rules.bad_source(src) {
        return Err(DropReason::BadSource);
    }
    // More-fragments flag or an offset: a fragment (no reassembly here).
    if u16::from_be_bytes([ip[6], ip[7]]) & 0x3fff != 0 {
        return Err(DropReason::Fragment);
    }
    let payload = &ip[ihl..];
    match ip[9] {
        6 => {
            // `tcp_header`, written out: through its `Result` every segment paid for
            // building and matching one.
            if payload.len() < 20 {
                return Err(DropReason::Malformed);
            }
            let doff = (payload[12] >> 4) as usize * 4;
            let sport = u16::from_be_bytes([payload[0], payload[1]]);
            let dport = u16::from_be_bytes([payload[2], payload[3]]);
            if doff < 20 || doff > payload.len() || sport == 0 || dport == 0 {
                return Err(DropReason::Malformed);
            }
            let flags = payload[13];
            let syn = flags & 0x02 != 0 && flags & 0x10 == 0;
            let partial_csum = match tcp_checksum(src, dst, payload, rules.accept_partial, partial_first) {
                Csum::Valid => false,
                Csum::Partial => true,
                Csum::Wrong => return Err(DropReason::BadChecksum),
            };
            Ok(Inspected { flow: Flow::Tcp { src: src.into(), sport, dport, syn }, src_mac, partial_csum })
        }
        1 => {
            if payload.len() < 8 || csum::data(payload) != 0xffff {
                return Err(if payload.len() < 8 { DropReason::Malformed } else { DropReason::BadChecksum });
            }
            Ok(Inspected { flow: Flow::Icmp { src: src.into() }, src_mac, partial_csum: false })
        }
        _ => Err(DropReason::Unsupported),
    }
}

/// The ports of a TCP segment and whether it is a SYN without ACK, if its header is
/// whole and its ports are not zero (the IPv4 path has its own copy in `inspect_expecting`).
#[inline]
fn tcp_header(seg: &[u8]) -> Result<(u16, u16, bool), DropReason> {
    if seg.len() < 20 {
        return Err(DropReason::Malformed);
    }
    let doff = (seg[12] >> 4) as usize * 4;
    if doff < 20 || doff > seg.len() {
        return Err(DropReason::Malformed);
    }
    let sport = u16::from_be_bytes([seg[0], seg[1]]);
    let dport = u16::from_be_bytes([seg[2], seg[3]]);
    if sport == 0 || dport == 0 {
        return Err(DropReason::Malformed);
    }
    let flags = seg[13];
    Ok((sport, dport, flags & 0x02 != 0 && flags & 0x10 == 0))
}

fn inspect_arp(arp: &[u8], rules: &RxRules, src_mac: [u8; 6], to_us: bool) -> Result<Inspected, DropReason> {
    if arp.len() < 28 {
        return Err(DropReason::Malformed);
    }
    // Ethernet/IPv4 ARP only.
    if arp[0..2] != [0, 1] || arp[2..4] != [8, 0] || arp[4] != 6 || arp[5] != 4 {
        return Err(DropReason::Unsupported);
    }
    let sender = Ipv4Addr::new(arp[14], arp[15], arp[16], arp[17]);
    let target = Ipv4Addr::new(arp[24], arp[25], arp[26], arp[27]);
    if !to_us || target != rules.addr {
        return Err(DropReason::NotForUs);
    }
    // Only on-link senders may teach smoltcp a neighbour (its cache is small
    // and anything else there is spoofed).
    if rules.bad_source(sender) || !rules.on_link(sender) {
        return Err(DropReason::BadSource);
    }
    Ok(Inspected { flow: Flow::Arp { sender }, src_mac, partial_csum: false })
}

enum Csum {
    Valid,
    /// What a sender with checksum offload leaves: the folded pseudo-header
    /// sum, for the NIC (here: nobody) to complete.
    Partial,
    Wrong,
}

/// Valid, or (only where `accept_partial`) Partial, or Wrong; `partial_first`:
/// the partial spelling is looked for before the whole segment is summed.
fn tcp_checksum(src: Ipv4Addr, dst: Ipv4Addr, seg: &[u8], accept_partial: bool, partial_first: bool) -> Csum {
    if accept_partial && partial_first && is_partial(src, dst, seg) {
        return Csum::Partial;
    }
    if csum::tcp_v4(src, dst, seg) == 0xffff {
        return Csum::Valid;
    }
    if accept_partial && !partial_first && is_partial(src, dst, seg) {
        return Csum::Partial;
    }
    Csum::Wrong
}

/// Whether the checksum field holds the folded pseudo-header sum, as a
/// sender with checksum offload leaves it for the NIC (here: nobody) to
/// complete.
fn is_partial(src: Ipv4Addr, dst: Ipv4Addr, seg: &[u8]) -> bool {
    holds_pseudo(seg, csum::tcp_v4_pseudo(src, dst, seg.len()))
}

/// Whether the TCP checksum field of `seg` is `pseudo`.
#[inline]
fn holds_pseudo(seg: &[u8], pseudo: u16) -> bool {
    let field = u16::from_be_bytes([seg[16], seg[17]]);
    // One's complement has two zeros: compare both spellings.
    pseudo == field || (pseudo == 0xffff && field == 0) || (pseudo == 0 && field == 0xffff)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_spread_and_stay_in_range() {
        let mut counts = vec![0u32; 64];
        for p in 0..64_000u16 {
            counts[bucket_of(Ipv4Addr::new(198, 18, 0, 2).into(), 10_000 + p % 50_000, 7000, 64)] += 1;
        }
        let (min, max) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
        assert!(*max < *min * 2, "uneven: {min}..{max}");
    }

    use crate::testing::frames::{tcp, TcpSpec};

    const MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];
    const PEER_MAC: [u8; 6] = [2, 0, 0, 0, 0, 2];

    fn rules(accept_partial: bool) -> RxRules {
        RxRules { mac: MAC, addr: Ipv4Addr::new(198, 18, 0, 1), prefix_len: 24, accept_partial, addr6: None, prefix6_len: 0 }
    }

    fn syn_from(src: Ipv4Addr) -> Vec<u8> {
        tcp(&TcpSpec { src_mac: PEER_MAC, dst_mac: MAC, src, dst: Ipv4Addr::new(198, 18, 0, 1), sport: 1234, dport: 80, flags: 0x02, ..TcpSpec::default() })
    }

    #[test]
    fn inspect_never_panics_on_garbage() {
        let mut buf = [0u8; 80];
        for len in 0..buf.len() {
            for b in [0u8, 0x45, 0xff, 6, 8, 0x4f] {
                buf.iter_mut().for_each(|x| *x = b);
                buf[12] = 8;
                buf[13] = 0;
                let _ = inspect(&buf[..len], &rules(true));
                buf[13] = 6;
                let _ = inspect(&buf[..len], &rules(false));
            }
        }
        let f = syn_from(Ipv4Addr::new(198, 18, 0, 2));
        for len in 0..f.len() {
            let _ = inspect(&f[..len], &rules(false));
        }
    }

    #[test]
    fn valid_syn_passes() {
        let f = syn_from(Ipv4Addr::new(198, 18, 0, 2));
        let i = inspect(&f, &rules(false)).unwrap();
        assert_eq!(i.flow, Flow::Tcp { src: Ipv4Addr::new(198, 18, 0, 2).into(), sport: 1234, dport: 80, syn: true });
        assert!(!i.partial_csum);
        // Ethernet padding after the IPv4 packet is fine.
        let mut padded = f.clone();
        padded.extend_from_slice(&[0; 10]);
        assert!(inspect(&padded, &rules(false)).is_ok());
    }

    #[test]
    fn impossible_sources_are_refused() {
        for a in [[0, 0, 0, 0], [255, 255, 255, 255], [224, 0, 0, 1], [127, 0, 0, 1], [240, 0, 0, 1], [198, 18, 0, 1], [198, 18, 0, 255]] {
            let f = syn_from(Ipv4Addr::from(a));
            assert_eq!(inspect(&f, &rules(false)), Err(DropReason::BadSource), "{a:?}");
        }
    }

    #[test]
    fn lengths_and_checksums() {
        let f = syn_from(Ipv4Addr::new(198, 18, 0, 2));
        // IPv4 total length beyond the frame.
        let mut g = f.clone();
        g[16..18].copy_from_slice(&200u16.to_be_bytes());
        assert_eq!(inspect(&g, &rules(false)), Err(DropReason::Malformed));
        // IHL below 5.
        let mut g = f.clone();
        g[14] = 0x44;
        assert_eq!(inspect(&g, &rules(false)), Err(DropReason::Malformed));
        // TCP data offset beyond the segment.
        let mut g = f.clone();
        g[46] = 0xf0;
        assert!(inspect(&g, &rules(false)).is_err());
        // A flipped payload bit breaks the TCP checksum.
        let mut g = f.clone();
        g[40] ^= 1;
        assert_eq!(inspect(&g, &rules(true)), Err(DropReason::BadChecksum));
        // Fragments.
        let mut g = f.clone();
        g[20] = 0x20;
        // (the IPv4 checksum changed too)
        assert!(matches!(inspect(&g, &rules(false)), Err(DropReason::Fragment | DropReason::BadChecksum)));
    }

    /// A PSH|ACK segment from the peer carrying `payload`, its checksum partial or full.
    fn data(payload: &'static [u8], partial_csum: bool) -> TcpSpec<'static> {
        TcpSpec {
            src_mac: PEER_MAC,
            dst_mac: MAC,
            src: Ipv4Addr::new(198, 18, 0, 2),
            dst: Ipv4Addr::new(198, 18, 0, 1),
            sport: 1234,
            dport: 80,
            flags: 0x18,
            payload,
            partial_csum,
            ..TcpSpec::default()
        }
    }

    #[test]
    fn partial_checksum_accepted_only_when_trusted() {
        let f = tcp(&data(b"hello", true));
        assert_eq!(inspect(&f, &rules(false)), Err(DropReason::BadChecksum));
        let i = inspect(&f, &rules(true)).unwrap();
        assert!(i.partial_csum);
        assert!(matches!(i.flow, Flow::Tcp { syn: false, .. }));
    }

    /// The order of the checks (`partial_first`) never changes a verdict.
    #[test]
    fn checking_for_partial_first_gives_the_same_verdicts() {
        let req = b"a request of some length";
        let (full, partial) = (tcp(&data(req, false)), tcp(&data(req, true)));
        let mut wrong = full.clone();
        wrong[60] ^= 0x10;
        let mut wrong_partial = partial.clone();
        wrong_partial[51] ^= 1; // the checksum field: neither spelling
        for accept in [false, true] {
            for first in [false, true] {
                let r = rules(accept);
                let v = |f: &[u8]| inspect_expecting(f, &r, first).map(|i| i.partial_csum);
                assert_eq!(v(&full), Ok(false), "accept {accept} first {first}");
                assert_eq!(v(&partial), if accept { Ok(true) } else { Err(DropReason::BadChecksum) });
                assert_eq!(v(&wrong), Err(DropReason::BadChecksum));
                assert_eq!(v(&wrong_partial), Err(DropReason::BadChecksum));
            }
        }
    }

    #[test]
    fn other_destinations_are_not_ours() {
        let mut f = syn_from(Ipv4Addr::new(198, 18, 0, 2));
        f[0..6].copy_from_slice(&[2, 9, 9, 9, 9, 9]);
        assert_eq!(inspect(&f, &rules(false)), Err(DropReason::NotForUs));
    }
}
