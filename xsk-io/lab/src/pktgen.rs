//! Builds the Ethernet/IPv4/UDP or TCP frames that benchmarks and tests send.

use std::net::Ipv4Addr;

/// The transport header of a generated frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Proto {
    /// A UDP datagram (8-byte header).
    Udp,
    /// A bare ACK segment (no SYN), so a kernel peer answers nothing costly.
    Tcp,
}

/// What [`build`] writes: one Ethernet + IPv4 + UDP/TCP frame with valid
/// checksums.
#[derive(Clone, Debug)]
pub struct FrameSpec {
    /// Ethernet source.
    pub src_mac: [u8; 6],
    /// Ethernet destination.
    pub dst_mac: [u8; 6],
    /// IPv4 source.
    pub src_ip: Ipv4Addr,
    /// IPv4 destination.
    pub dst_ip: Ipv4Addr,
    /// UDP/TCP source port.
    pub src_port: u16,
    /// UDP/TCP destination port.
    pub dst_port: u16,
    /// UDP or TCP.
    pub proto: Proto,
    /// Whole frame length without FCS (>= 60 is padded Ethernet minimum; smaller is allowed on veth).
    pub size: usize,
}

pub(crate) const ETH_HLEN: usize = 14;
pub(crate) const IPV4_HLEN: usize = 20;

/// RFC 1071 checksum over `data`, folded, starting from `sum`.
pub fn checksum(data: &[u8], mut sum: u32) -> u16 {
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        sum += u16::from_be_bytes([c[0], c[1]]) as u32;
    }
    if let [b] = chunks.remainder() {
        sum += (*b as u32) << 8;
    }
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// Smallest frame that holds the headers of `proto`.
pub fn min_size(proto: Proto) -> usize {
    ETH_HLEN + IPV4_HLEN + if proto == Proto::Tcp { 20 } else { 8 }
}

/// Writes the frame into `buf` (at least `spec.size` long); the payload is a
/// counting byte pattern so receivers can check it. Returns the length:
/// `spec.size`, raised to [`min_size`] if smaller.
///
/// # Panics
/// If `buf` is shorter than that length.
pub fn build(spec: &FrameSpec, buf: &mut [u8]) -> usize {
    let size = spec.size.max(min_size(spec.proto));
    let buf = &mut buf[..size];
    buf[0..6].copy_from_slice(&spec.dst_mac);
    buf[6..12].copy_from_slice(&spec.src_mac);
    buf[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    let ip_len = size - ETH_HLEN;
    let ip = &mut buf[ETH_HLEN..];
    ip[0] = 0x45;
    ip[1] = 0;
    ip[2..4].copy_from_slice(&(ip_len as u16).to_be_bytes());
    ip[4..6].copy_from_slice(&0u16.to_be_bytes());
    ip[6..8].copy_from_slice(&0x4000u16.to_be_bytes()); // DF
    ip[8] = 64;
    ip[9] = if spec.proto == Proto::Tcp { 6 } else { 17 };
    ip[10..12].copy_from_slice(&[0, 0]);
    ip[12..16].copy_from_slice(&spec.src_ip.octets());
    ip[16..20].copy_from_slice(&spec.dst_ip.octets());
    let c = checksum(&ip[..IPV4_HLEN], 0);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    let l4_len = ip_len - IPV4_HLEN;
    let l4 = &mut ip[IPV4_HLEN..];
    l4[0..2].copy_from_slice(&spec.src_port.to_be_bytes());
    l4[2..4].copy_from_slice(&spec.dst_port.to_be_bytes());
    let hl = match spec.proto {
        Proto::Udp => {
            l4[4..6].copy_from_slice(&(l4_len as u16).to_be_bytes());
            l4[6..8].copy_from_slice(&[0, 0]);
            8
        }
        Proto::Tcp => {
            l4[4..8].copy_from_slice(&1u32.to_be_bytes()); // seq
            l4[8..12].copy_from_slice(&1u32.to_be_bytes()); // ack
            l4[12] = 5 << 4;
            l4[13] = 0x10; // ACK
            l4[14..16].copy_from_slice(&65535u16.to_be_bytes());
            l4[16..20].copy_from_slice(&[0, 0, 0, 0]);
            20
        }
    };
    for (i, b) in l4[hl..].iter_mut().enumerate() {
        *b = i as u8;
    }
    // L4 checksum with the pseudo header (UDP may use 0, but a correct one
    // lets receivers validate frames end to end).
    let mut pseudo = 0u32;
    for w in spec.src_ip.octets().chunks(2).chain(spec.dst_ip.octets().chunks(2)) {
        pseudo += u16::from_be_bytes([w[0], w[1]]) as u32;
    }
    pseudo += if spec.proto == Proto::Tcp { 6 } else { 17 };
    pseudo += l4_len as u32;
    let c = checksum(&l4[..l4_len], pseudo);
    let at = if spec.proto == Proto::Tcp { 16 } else { 6 };
    let c = if c == 0 && spec.proto == Proto::Udp { 0xffff } else { c };
    l4[at..at + 2].copy_from_slice(&c.to_be_bytes());
    size
}

pub use xsk_device::ifaddr::{format_mac, parse_mac};

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(proto: Proto, size: usize) -> FrameSpec {
        FrameSpec {
            src_mac: [2, 0, 0, 0, 0, 1],
            dst_mac: [2, 0, 0, 0, 0, 2],
            src_ip: Ipv4Addr::new(198, 18, 0, 1),
            dst_ip: Ipv4Addr::new(198, 18, 0, 2),
            src_port: 1000,
            dst_port: 7777,
            proto,
            size,
        }
    }

    #[test]
    fn checksums_verify_to_zero() {
        for proto in [Proto::Udp, Proto::Tcp] {
            for size in [0, 60, 64, 101, 1514] {
                let mut b = vec![0u8; 2048];
                let n = build(&spec(proto, size), &mut b);
                assert_eq!(n, size.max(min_size(proto)));
                let ip = &b[ETH_HLEN..n];
                assert_eq!(checksum(&ip[..20], 0), 0, "ip header");
                let l4 = &ip[20..];
                let mut pseudo = 0u32;
                for w in ip[12..20].chunks(2) {
                    pseudo += u16::from_be_bytes([w[0], w[1]]) as u32;
                }
                pseudo += ip[9] as u32 + l4.len() as u32;
                assert_eq!(checksum(l4, pseudo), 0, "{proto:?} {size}");
            }
        }
    }

    #[test]
    fn mac_round_trip() {
        let m = parse_mac("02:0a:ff:00:10:01").unwrap();
        assert_eq!(format_mac(&m), "02:0a:ff:00:10:01");
        assert!(parse_mac("02:0a").is_err());
    }
}
