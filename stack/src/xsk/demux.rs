//! Which socket bucket a frame belongs to.
//!
//! smoltcp finds a packet's socket by scanning its whole `SocketSet`, and
//! its egress pass and `poll_at` scan every socket too. With thousands of
//! connections in one set that scan dominates, so the stack keeps many small
//! sets ("buckets") and hashes each TCP frame's 4-tuple to one of them. A
//! connection lives in the bucket its 4-tuple hashes to; every bucket holds
//! listening sockets for every listening port, so a SYN finds a listener
//! wherever it lands.

use std::net::Ipv4Addr;

/// The bucket of a TCP flow, from the peer's address and port and our port.
/// (Our address is the same for all flows of a stack.)
#[inline]
pub fn bucket_of(remote: Ipv4Addr, remote_port: u16, local_port: u16, buckets: usize) -> usize {
    debug_assert!(buckets.is_power_of_two());
    // A multiply-xorshift mix: cheap, and spreads sequential ports well.
    let mut h = (u32::from(remote) as u64) << 32 | (remote_port as u64) << 16 | local_port as u64;
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^= h >> 33;
    (h as usize) & (buckets - 1)
}

/// What the demultiplexer needs from an incoming frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    /// IPv4/TCP (not a non-first fragment): source address, source port, destination port.
    Tcp { src: Ipv4Addr, sport: u16, dport: u16 },
    /// IPv4 that is not TCP, or a fragment: source address.
    Ipv4 { src: Ipv4Addr },
    Arp,
    Other,
}

/// Parses just enough of an Ethernet frame to classify it; never panics.
pub fn classify(frame: &[u8]) -> Flow {
    if frame.len() < 14 {
        return Flow::Other;
    }
    match u16::from_be_bytes([frame[12], frame[13]]) {
        0x0806 => return Flow::Arp,
        0x0800 => {}
        _ => return Flow::Other,
    }
    let ip = &frame[14..];
    if ip.len() < 20 || ip[0] >> 4 != 4 {
        return Flow::Other;
    }
    let ihl = (ip[0] & 0x0f) as usize * 4;
    let src = Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]);
    // More-fragments flag or an offset: a fragment (smoltcp here does not reassemble).
    let frag_off = u16::from_be_bytes([ip[6], ip[7]]) & 0x3fff;
    if ip[9] != 6 || frag_off != 0 || ihl < 20 || ip.len() < ihl + 4 {
        return Flow::Ipv4 { src };
    }
    let tcp = &ip[ihl..];
    Flow::Tcp { src, sport: u16::from_be_bytes([tcp[0], tcp[1]]), dport: u16::from_be_bytes([tcp[2], tcp[3]]) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_spread_and_stay_in_range() {
        let mut counts = vec![0u32; 64];
        for p in 0..64_000u16 {
            counts[bucket_of(Ipv4Addr::new(198, 18, 0, 2), 10_000 + p % 50_000, 7000, 64)] += 1;
        }
        let (min, max) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
        assert!(*max < *min * 2, "uneven: {min}..{max}");
    }

    #[test]
    fn classify_never_panics_on_garbage() {
        let mut buf = [0u8; 80];
        for len in 0..buf.len() {
            for b in [0u8, 0x45, 0xff, 6, 8] {
                buf.iter_mut().for_each(|x| *x = b);
                buf[12] = 8;
                buf[13] = 0;
                let _ = classify(&buf[..len]);
            }
        }
    }

    #[test]
    fn classify_tcp() {
        let mut f = vec![0u8; 54];
        f[12] = 8;
        f[14] = 0x45;
        f[23] = 6;
        f[26..30].copy_from_slice(&[198, 18, 0, 2]);
        f[34..36].copy_from_slice(&1234u16.to_be_bytes());
        f[36..38].copy_from_slice(&80u16.to_be_bytes());
        assert_eq!(classify(&f), Flow::Tcp { src: Ipv4Addr::new(198, 18, 0, 2), sport: 1234, dport: 80 });
        f[20] = 0x20; // fragment offset
        assert_eq!(classify(&f), Flow::Ipv4 { src: Ipv4Addr::new(198, 18, 0, 2) });
    }
}
