//! Builds Ethernet/IPv4/TCP, Ethernet/IPv6/TCP, ICMPv6 and ARP frames byte by byte,
//! valid or broken on purpose, for unit tests, the scripted peer and the fuzzer.

use std::net::{Ipv4Addr, Ipv6Addr};

use smoltcp::wire::{checksum, IpProtocol};

/// One TCP segment in an Ethernet frame. Checksums are computed unless a
/// `partial_csum` (what a sender with checksum offload leaves) is asked for.
#[derive(Clone, Debug)]
pub struct TcpSpec<'a> {
    /// Source MAC.
    pub src_mac: [u8; 6],
    /// Destination MAC.
    pub dst_mac: [u8; 6],
    /// Source address.
    pub src: Ipv4Addr,
    /// Destination address.
    pub dst: Ipv4Addr,
    /// Source port.
    pub sport: u16,
    /// Destination port.
    pub dport: u16,
    /// Sequence number.
    pub seq: u32,
    /// Acknowledgment number.
    pub ack: u32,
    /// TCP flags byte: FIN 0x01, SYN 0x02, RST 0x04, PSH 0x08, ACK 0x10.
    pub flags: u8,
    /// Advertised window.
    pub window: u16,
    /// TCP options, padded to a multiple of 4 by the builder.
    pub options: &'a [u8],
    /// Data.
    pub payload: &'a [u8],
    /// Leave the TCP checksum partial (the pseudo-header sum only).
    pub partial_csum: bool,
    /// IPv4 TTL.
    pub ttl: u8,
    /// IPv4 flags+fragment offset field.
    pub frag: u16,
}

impl Default for TcpSpec<'_> {
    fn default() -> Self {
        TcpSpec {
            src_mac: [2, 0, 0, 0, 0, 2],
            dst_mac: [2, 0, 0, 0, 0, 1],
            src: Ipv4Addr::new(198, 18, 0, 2),
            dst: Ipv4Addr::new(198, 18, 0, 1),
            sport: 40000,
            dport: 7,
            seq: 1000,
            ack: 0,
            flags: 0x02,
            window: 65535,
            options: &[],
            payload: &[],
            partial_csum: false,
            ttl: 64,
            frag: 0x4000,
        }
    }
}

/// The frame for `s`.
pub fn tcp(s: &TcpSpec<'_>) -> Vec<u8> {
    let mut f = Vec::with_capacity(64 + s.options.len() + s.payload.len());
    tcp_into(s, &mut f);
    f
}

/// The frame for `s`, written into `f` (cleared first).
pub fn tcp_into(s: &TcpSpec<'_>, f: &mut Vec<u8>) {
    f.clear();
    let opt_len = s.options.len().div_ceil(4) * 4;
    let opt_len = opt_len.min(40);
    let tcp_len = 20 + opt_len + s.payload.len();
    let total = (20 + tcp_len).min(u16::MAX as usize);
    f.extend_from_slice(&s.dst_mac);
    f.extend_from_slice(&s.src_mac);
    f.extend_from_slice(&[0x08, 0x00]);
    // IPv4
    f.extend_from_slice(&[0x45, 0]);
    f.extend_from_slice(&(total as u16).to_be_bytes());
    f.extend_from_slice(&[0, 1]);
    f.extend_from_slice(&s.frag.to_be_bytes());
    f.extend_from_slice(&[s.ttl, 6, 0, 0]);
    f.extend_from_slice(&s.src.octets());
    f.extend_from_slice(&s.dst.octets());
    let ipc = !checksum::data(&f[14..34]);
    f[24..26].copy_from_slice(&ipc.to_be_bytes());
    let t = f.len();
    tcp_header_into(s, f);
    let seg_len = (f.len() - t) as u32;
    let pseudo = checksum::pseudo_header_v4(&s.src, &s.dst, IpProtocol::Tcp, seg_len);
    let c = if s.partial_csum { pseudo } else { !checksum::combine(&[pseudo, checksum::data(&f[t..])]) };
    f[t + 16..t + 18].copy_from_slice(&c.to_be_bytes());
}

/// The TCP header (checksum zero), options and data of `s`, appended to `f`.
fn tcp_header_into(s: &TcpSpec<'_>, f: &mut Vec<u8>) {
    let opt_len = (s.options.len().div_ceil(4) * 4).min(40);
    f.extend_from_slice(&s.sport.to_be_bytes());
    f.extend_from_slice(&s.dport.to_be_bytes());
    f.extend_from_slice(&s.seq.to_be_bytes());
    f.extend_from_slice(&s.ack.to_be_bytes());
    f.push((((20 + opt_len) / 4) as u8) << 4);
    f.push(s.flags);
    f.extend_from_slice(&s.window.to_be_bytes());
    f.extend_from_slice(&[0, 0, 0, 0]);
    let opts = &s.options[..s.options.len().min(40)];
    f.extend_from_slice(opts);
    f.resize(f.len() + (opt_len - opts.len()), 0);
    f.extend_from_slice(s.payload);
}

/// The segment of `s` over IPv6 from `src` to `dst` (its IPv4 addresses, TTL and
/// fragment field unused; hop limit 64), TCP right after the fixed header.
pub fn tcp6(s: &TcpSpec<'_>, src: Ipv6Addr, dst: Ipv6Addr) -> Vec<u8> {
    let mut seg = Vec::with_capacity(60 + s.options.len() + s.payload.len());
    tcp_header_into(s, &mut seg);
    let pseudo = checksum::pseudo_header_v6(&src, &dst, IpProtocol::Tcp, seg.len() as u32);
    let c = if s.partial_csum { pseudo } else { !checksum::combine(&[pseudo, checksum::data(&seg)]) };
    seg[16..18].copy_from_slice(&c.to_be_bytes());
    ipv6(s.src_mac, s.dst_mac, src, dst, 6, 64, &seg)
}

/// An Ethernet/IPv6 frame carrying `payload` as next header `next` (whatever it is: an
/// extension header chain, a fragment, ICMPv6), with payload length and addresses
/// as given.
pub fn ipv6(src_mac: [u8; 6], dst_mac: [u8; 6], src: Ipv6Addr, dst: Ipv6Addr, next: u8, hop_limit: u8, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(54 + payload.len());
    f.extend_from_slice(&dst_mac);
    f.extend_from_slice(&src_mac);
    f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0]);
    f.extend_from_slice(&(payload.len().min(u16::MAX as usize) as u16).to_be_bytes());
    f.extend_from_slice(&[next, hop_limit]);
    f.extend_from_slice(&src.octets());
    f.extend_from_slice(&dst.octets());
    f.extend_from_slice(payload);
    f
}

/// An ICMPv6 message (`ty`, `code`, then `body`) with its checksum, in an Ethernet/IPv6
/// frame (hop limit 255, as neighbour discovery requires).
pub fn icmpv6(src_mac: [u8; 6], dst_mac: [u8; 6], src: Ipv6Addr, dst: Ipv6Addr, ty: u8, code: u8, body: &[u8]) -> Vec<u8> {
    let mut m = vec![ty, code, 0, 0];
    m.extend_from_slice(body);
    let pseudo = checksum::pseudo_header_v6(&src, &dst, IpProtocol::Icmpv6, m.len() as u32);
    let c = !checksum::combine(&[pseudo, checksum::data(&m)]);
    m[2..4].copy_from_slice(&c.to_be_bytes());
    ipv6(src_mac, dst_mac, src, dst, 58, 255, &m)
}

/// The solicited-node multicast group of `a` (ff02::1:ffXX:XXXX).
pub fn solicited_group(a: Ipv6Addr) -> Ipv6Addr {
    crate::demux::solicited_node(a)
}

/// A neighbour solicitation from `src` (at `src_mac`) for `target`, to its
/// solicited-node group, with the source link-layer address option.
pub fn neighbour_solicitation(src_mac: [u8; 6], src: Ipv6Addr, target: Ipv6Addr) -> Vec<u8> {
    let group = crate::demux::solicited_node(target);
    let o = group.octets();
    let mut body = vec![0, 0, 0, 0];
    body.extend_from_slice(&target.octets());
    body.extend_from_slice(&[1, 1]);
    body.extend_from_slice(&src_mac);
    icmpv6(src_mac, [0x33, 0x33, o[12], o[13], o[14], o[15]], src, group, 135, 0, &body)
}

/// An ARP request (`oper` 1) or reply (2) in an Ethernet frame.
pub fn arp(oper: u16, src_mac: [u8; 6], dst_mac: [u8; 6], sender: Ipv4Addr, target: Ipv4Addr) -> Vec<u8> {
    let mut f = Vec::with_capacity(42);
    f.extend_from_slice(&dst_mac);
    f.extend_from_slice(&src_mac);
    f.extend_from_slice(&[0x08, 0x06, 0, 1, 8, 0, 6, 4]);
    f.extend_from_slice(&oper.to_be_bytes());
    f.extend_from_slice(&src_mac);
    f.extend_from_slice(&sender.octets());
    f.extend_from_slice(if oper == 1 { &[0; 6] } else { &dst_mac });
    f.extend_from_slice(&target.octets());
    f
}

/// An ICMP echo request (`ty` 8) or reply (0) from `src` to `dst`, as `ping` sends it.
pub fn icmp_echo(ty: u8, src_mac: [u8; 6], dst_mac: [u8; 6], src: Ipv4Addr, dst: Ipv4Addr, id: u16, seq: u16, data: &[u8]) -> Vec<u8> {
    let mut body = Vec::with_capacity(4 + data.len());
    body.extend_from_slice(&id.to_be_bytes());
    body.extend_from_slice(&seq.to_be_bytes());
    body.extend_from_slice(data);
    icmp4(src_mac, dst_mac, src, dst, ty, 0, &body)
}

/// An ICMP message (`ty`, `code`, then `body`) with its checksum, in an Ethernet/IPv4
/// frame.
pub fn icmp4(src_mac: [u8; 6], dst_mac: [u8; 6], src: Ipv4Addr, dst: Ipv4Addr, ty: u8, code: u8, body: &[u8]) -> Vec<u8> {
    let total = 20 + 4 + body.len();
    let mut f = Vec::with_capacity(14 + total);
    f.extend_from_slice(&dst_mac);
    f.extend_from_slice(&src_mac);
    f.extend_from_slice(&[0x08, 0x00, 0x45, 0]);
    f.extend_from_slice(&(total as u16).to_be_bytes());
    f.extend_from_slice(&[0, 1, 0x40, 0, 64, 1, 0, 0]);
    f.extend_from_slice(&src.octets());
    f.extend_from_slice(&dst.octets());
    let c = !checksum::data(&f[14..34]);
    f[24..26].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&[ty, code, 0, 0]);
    f.extend_from_slice(body);
    let c = !checksum::data(&f[34..]);
    f[36..38].copy_from_slice(&c.to_be_bytes());
    f
}

/// A parsed TCP segment from a frame the stack sent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Seg {
    /// Source address.
    pub src: Ipv4Addr,
    /// Destination address.
    pub dst: Ipv4Addr,
    /// Source port.
    pub sport: u16,
    /// Destination port.
    pub dport: u16,
    /// Sequence number.
    pub seq: u32,
    /// Acknowledgment number.
    pub ack: u32,
    /// TCP flags byte.
    pub flags: u8,
    /// Advertised window.
    pub window: u16,
    /// Data.
    pub payload: Vec<u8>,
}

impl Seg {
    /// SYN set.
    pub fn syn(&self) -> bool {
        self.flags & 0x02 != 0
    }
    /// ACK set.
    pub fn ack_set(&self) -> bool {
        self.flags & 0x10 != 0
    }
    /// RST set.
    pub fn rst(&self) -> bool {
        self.flags & 0x04 != 0
    }
    /// FIN set.
    pub fn fin(&self) -> bool {
        self.flags & 0x01 != 0
    }
}

/// The addresses and TCP segment of an IPv6/TCP frame (TCP right after the fixed
/// header) with sane lengths; the `Seg`'s IPv4 addresses are unspecified.
pub fn parse_tcp6(f: &[u8]) -> Option<(Ipv6Addr, Ipv6Addr, Seg)> {
    if f.len() < 14 + 40 + 20 || f[12..14] != [0x86, 0xdd] || f[20] != 6 {
        return None;
    }
    let ip = &f[14..];
    let end = 40 + u16::from_be_bytes([ip[4], ip[5]]) as usize;
    if end > ip.len() || end < 60 {
        return None;
    }
    let addr = |at: usize| Ipv6Addr::from(<[u8; 16]>::try_from(&ip[at..at + 16]).unwrap());
    let seg = segment(&ip[40..end], Ipv4Addr::UNSPECIFIED, Ipv4Addr::UNSPECIFIED)?;
    Some((addr(8), addr(24), seg))
}

/// The TCP segment in `f`, if it is an IPv4/TCP frame with sane lengths.
pub fn parse_tcp(f: &[u8]) -> Option<Seg> {
    if f.len() < 54 || f[12..14] != [8, 0] {
        return None;
    }
    let ip = &f[14..];
    let ihl = (ip[0] & 15) as usize * 4;
    let total = u16::from_be_bytes([ip[2], ip[3]]) as usize;
    if ip[9] != 6 || total > ip.len() || ihl < 20 || total < ihl + 20 {
        return None;
    }
    let (src, dst) = (Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]), Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]));
    segment(&ip[ihl..total], src, dst)
}

/// The TCP segment `t` (at least 20 bytes) with these addresses, if its data offset is sane.
fn segment(t: &[u8], src: Ipv4Addr, dst: Ipv4Addr) -> Option<Seg> {
    let doff = (t[12] >> 4) as usize * 4;
    if doff < 20 || doff > t.len() {
        return None;
    }
    Some(Seg {
        src,
        dst,
        sport: u16::from_be_bytes([t[0], t[1]]),
        dport: u16::from_be_bytes([t[2], t[3]]),
        seq: u32::from_be_bytes([t[4], t[5], t[6], t[7]]),
        ack: u32::from_be_bytes([t[8], t[9], t[10], t[11]]),
        flags: t[13],
        window: u16::from_be_bytes([t[14], t[15]]),
        payload: t[doff..].to_vec(),
    })
}
