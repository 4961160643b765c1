//! [xsk-stack patch: fast-emit] Writing an Ethernet/IPv4 or Ethernet/IPv6 frame
//! of a TCP segment without options, or with a timestamp alone, in one pass.
//!
//! Nearly every segment of an established connection is of this kind (data,
//! ACK, FIN, RST), and the general path writes it field by field through
//! `IpRepr::emit`, `Packet::emit_payload` (an enum of every payload kind)
//! and `TcpRepr::emit` (every option checked), each setter bounds-checked on
//! its own. The bytes written here are the same: the tests below compare
//! both writers on random segments of both families.

use crate::phy::ChecksumCapabilities;
use crate::wire::ip::checksum;
use crate::wire::{EthernetAddress, IpProtocol, IpRepr, TcpControl, TcpRepr, TCP_HEADER_LEN};
#[cfg(feature = "proto-ipv4")]
use crate::wire::{Ipv4Repr, IPV4_HEADER_LEN};
#[cfg(feature = "proto-ipv6")]
use crate::wire::{Ipv6Repr, IPV6_HEADER_LEN};

const ETH: usize = 14;

/// The TCP header's length with a timestamp option alone: 20 + 10, padded.
const TS_HEADER_LEN: usize = TCP_HEADER_LEN + 12;

/// Whether [`emit`] writes `tcp`: a segment without options, the case where
/// `TcpRepr::header_len` is 20, or with a timestamp and no other option, where
/// it is 32 (the caller has already ruled out fragmentation). `header_len`
/// decides the data offset, so the two writers cannot disagree on it.
pub(crate) fn applies(tcp: &TcpRepr) -> bool {
    match tcp.header_len() {
        TCP_HEADER_LEN => true,
        // [xsk-stack patch: ts-rtt]
        TS_HEADER_LEN => {
            tcp.timestamp.is_some()
                && tcp.max_seg_size.is_none()
                && tcp.window_scale.is_none()
                && !tcp.sack_permitted
                && tcp.sack_ranges == [None, None, None]
        }
        _ => false,
    }
}

/// Writes the frame of `tcp` in `ip` into `buf`, which is exactly
/// `14 + ip.header_len() + tcp.buffer_len()` bytes, as `dispatch_ip` would
/// with these checksum capabilities. Only for a segment [`applies`] accepts.
pub(crate) fn emit(
    buf: &mut [u8],
    src_mac: EthernetAddress,
    dst_mac: EthernetAddress,
    ip: &IpRepr,
    tcp: &TcpRepr,
    caps: &ChecksumCapabilities,
) {
    match ip {
        #[cfg(feature = "proto-ipv4")]
        IpRepr::Ipv4(ip) => emit_v4(buf, src_mac, dst_mac, ip, tcp, caps),
        #[cfg(feature = "proto-ipv6")]
        IpRepr::Ipv6(ip) => emit_v6(buf, src_mac, dst_mac, ip, tcp, caps),
    }
}

/// [`emit`] for IPv4: the pseudo-header from the IPv4 addresses directly (the
/// generic `checksum::pseudo_header` matches on both families first).
#[cfg(feature = "proto-ipv4")]
fn emit_v4(
    buf: &mut [u8],
    src_mac: EthernetAddress,
    dst_mac: EthernetAddress,
    ip: &Ipv4Repr,
    tcp: &TcpRepr,
    caps: &ChecksumCapabilities,
) {
    debug_assert!(applies(tcp));
    let (eth, rest) = buf.split_at_mut(ETH);
    ethernet(eth, src_mac, dst_mac, 0x0800);
    let (iph, seg) = rest.split_at_mut(IPV4_HEADER_LEN);
    let total_len = (IPV4_HEADER_LEN + ip.payload_len) as u16;
    iph[0] = 0x45; // version 4, 20-byte header
    iph[1] = 0; // DSCP, ECN
    iph[2..4].copy_from_slice(&total_len.to_be_bytes());
    iph[4..6].copy_from_slice(&[0, 0]); // ident
    iph[6..8].copy_from_slice(&0x4000u16.to_be_bytes()); // DF, offset 0
    iph[8] = ip.hop_limit;
    iph[9] = ip.next_header.into();
    iph[10..12].copy_from_slice(&[0, 0]);
    iph[12..16].copy_from_slice(&ip.src_addr.octets());
    iph[16..20].copy_from_slice(&ip.dst_addr.octets());
    if caps.ipv4.tx() {
        let sum = !checksum::data(iph);
        iph[10..12].copy_from_slice(&sum.to_be_bytes());
    }
    let seg = segment(seg, tcp);
    if caps.tcp.tx() {
        let pseudo = checksum::pseudo_header_v4(
            &ip.src_addr,
            &ip.dst_addr,
            IpProtocol::Tcp,
            seg.len() as u32,
        );
        fill_checksum(seg, pseudo);
    }
}

/// [`emit`] for IPv6, as `Ipv6Repr::emit` writes its header: traffic class and
/// flow label 0.
#[cfg(feature = "proto-ipv6")]
fn emit_v6(
    buf: &mut [u8],
    src_mac: EthernetAddress,
    dst_mac: EthernetAddress,
    ip: &Ipv6Repr,
    tcp: &TcpRepr,
    caps: &ChecksumCapabilities,
) {
    debug_assert!(applies(tcp));
    let (eth, rest) = buf.split_at_mut(ETH);
    ethernet(eth, src_mac, dst_mac, 0x86dd);
    let (iph, seg) = rest.split_at_mut(IPV6_HEADER_LEN);
    iph[0..4].copy_from_slice(&0x6000_0000u32.to_be_bytes()); // version 6
    iph[4..6].copy_from_slice(&(ip.payload_len as u16).to_be_bytes());
    iph[6] = ip.next_header.into();
    iph[7] = ip.hop_limit;
    iph[8..24].copy_from_slice(&ip.src_addr.octets());
    iph[24..40].copy_from_slice(&ip.dst_addr.octets());
    let seg = segment(seg, tcp);
    if caps.tcp.tx() {
        let pseudo = checksum::pseudo_header_v6(
            &ip.src_addr,
            &ip.dst_addr,
            IpProtocol::Tcp,
            seg.len() as u32,
        );
        fill_checksum(seg, pseudo);
    }
}

#[inline]
fn ethernet(h: &mut [u8], src_mac: EthernetAddress, dst_mac: EthernetAddress, ethertype: u16) {
    h[0..6].copy_from_slice(dst_mac.as_bytes());
    h[6..12].copy_from_slice(src_mac.as_bytes());
    h[12..14].copy_from_slice(&ethertype.to_be_bytes());
}

/// The TCP header and payload into `buf` (what follows the IP header), with a
/// zero checksum; the segment written.
#[inline]
fn segment<'a>(buf: &'a mut [u8], tcp: &TcpRepr) -> &'a mut [u8] {
    let header_len = match tcp.timestamp {
        Some(_) => TS_HEADER_LEN,
        None => TCP_HEADER_LEN,
    };
    let seg = &mut buf[..header_len + tcp.payload.len()];
    let (th, payload) = seg.split_at_mut(header_len);
    payload.copy_from_slice(tcp.payload);
    th[0..2].copy_from_slice(&tcp.src_port.to_be_bytes());
    th[2..4].copy_from_slice(&tcp.dst_port.to_be_bytes());
    th[4..8].copy_from_slice(&tcp.seq_number.0.to_be_bytes());
    th[8..12].copy_from_slice(&tcp.ack_number.map_or(0, |a| a.0).to_be_bytes());
    th[12] = ((header_len / 4) as u8) << 4;
    let mut flags = match tcp.control {
        TcpControl::None => 0,
        TcpControl::Psh => 0x08,
        TcpControl::Syn => 0x02,
        TcpControl::Fin => 0x01,
        TcpControl::Rst => 0x04,
    };
    if tcp.ack_number.is_some() {
        flags |= 0x10;
    }
    th[13] = flags;
    th[14..16].copy_from_slice(&tcp.window_len.to_be_bytes());
    th[16..20].copy_from_slice(&[0, 0, 0, 0]); // checksum, urgent pointer
    if let Some(ts) = tcp.timestamp {
        // As `TcpRepr::emit`: the option, then end-of-list padding.
        th[20..22].copy_from_slice(&[8, 10]);
        th[22..26].copy_from_slice(&ts.tsval.to_be_bytes());
        th[26..30].copy_from_slice(&ts.tsecr.to_be_bytes());
        th[30..32].copy_from_slice(&[0, 0]);
    }
    seg
}

#[inline]
fn fill_checksum(seg: &mut [u8], pseudo: u16) {
    let sum = !checksum::combine(&[pseudo, checksum::data(seg)]);
    seg[16..18].copy_from_slice(&sum.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iface::packet::{IpPayload, Packet};
    use crate::phy::{Checksum, DeviceCapabilities};
    use crate::wire::{EthernetFrame, EthernetProtocol, TcpSeqNumber, TcpTimestampRepr};

    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            // splitmix64
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        }
    }

    /// What `dispatch_ip` writes without this patch: the Ethernet header,
    /// `IpRepr::emit`, `Packet::emit_payload`.
    fn general(
        buf: &mut [u8],
        src_mac: EthernetAddress,
        dst_mac: EthernetAddress,
        ip_repr: IpRepr,
        tcp: TcpRepr,
        caps: &DeviceCapabilities,
    ) {
        let mut frame = EthernetFrame::new_unchecked(&mut *buf);
        frame.set_src_addr(src_mac);
        frame.set_dst_addr(dst_mac);
        let packet = match ip_repr {
            #[cfg(feature = "proto-ipv4")]
            IpRepr::Ipv4(ip) => {
                frame.set_ethertype(EthernetProtocol::Ipv4);
                Packet::new_ipv4(ip, IpPayload::Tcp(tcp))
            }
            #[cfg(feature = "proto-ipv6")]
            IpRepr::Ipv6(ip) => {
                frame.set_ethertype(EthernetProtocol::Ipv6);
                Packet::new_ipv6(ip, IpPayload::Tcp(tcp))
            }
        };
        let tx = &mut buf[ETH..];
        ip_repr.emit(&mut *tx, &caps.checksum);
        packet.emit_payload(&ip_repr, &mut tx[ip_repr.header_len()..], caps);
    }

    #[test]
    fn writes_what_the_general_path_writes() {
        let mut rng = Rng(7);
        let data: std::vec::Vec<u8> = (0..1460).map(|_| rng.next() as u8).collect();
        let controls = [
            TcpControl::None,
            TcpControl::Psh,
            TcpControl::Syn,
            TcpControl::Fin,
            TcpControl::Rst,
        ];
        let sums = [Checksum::Both, Checksum::Tx, Checksum::Rx, Checksum::None];
        let mut families = [0usize; 2];
        for i in 0..8000 {
            let r = rng.next();
            let len = match i % 4 {
                0 => 0,
                1 => (r % 64) as usize,
                _ => (r % 1441) as usize,
            };
            let tcp = TcpRepr {
                src_port: rng.next() as u16,
                dst_port: rng.next() as u16,
                control: controls[(r >> 16) as usize % controls.len()],
                seq_number: TcpSeqNumber(rng.next() as i32),
                ack_number: (r & (1 << 20) != 0).then(|| TcpSeqNumber(rng.next() as i32)),
                window_len: rng.next() as u16,
                window_scale: None,
                max_seg_size: None,
                sack_permitted: false,
                sack_ranges: [None, None, None],
                // A third with a timestamp option.
                timestamp: ((r >> 40) % 3 == 0)
                    .then(|| TcpTimestampRepr::new(rng.next() as u32, rng.next() as u32)),
                payload: &data[..len],
            };
            let v6 = (r >> 32) & 1 == 1;
            let ip = random_ip(&mut rng, v6, tcp.buffer_len());
            let Some(ip) = ip else { continue };
            families[v6 as usize] += 1;
            let mut caps = DeviceCapabilities::default();
            caps.checksum.ipv4 = sums[(r >> 24) as usize % 4];
            caps.checksum.tcp = sums[(r >> 28) as usize % 4];
            let mac = |x: u64| EthernetAddress([x as u8, (x >> 8) as u8, (x >> 16) as u8, 0, 1, 2]);
            let (src, dst) = (mac(rng.next()), mac(rng.next()));
            assert!(applies(&tcp));
            // Both writers get a buffer full of garbage: every byte must be written.
            let fill = rng.next() as u8;
            let n = ETH + ip.header_len() + tcp.buffer_len();
            let mut a = std::vec![fill; n];
            let mut b = std::vec![fill; n];
            general(&mut a, src, dst, ip.clone(), tcp, &caps);
            emit(&mut b, src, dst, &ip, &tcp, &caps.checksum);
            assert_eq!(a, b, "case {i}: {tcp:?} {ip:?} {:?}", caps.checksum);
        }
        // Each family this build has, about half of the cases each.
        for (v6, n) in families.into_iter().enumerate() {
            let built = if v6 == 1 { cfg!(feature = "proto-ipv6") } else { cfg!(feature = "proto-ipv4") };
            assert!(!built || n > 3000, "{n} cases of IPv{}", if v6 == 1 { 6 } else { 4 });
        }
    }

    /// An IP header of random addresses and hop limit, of the family asked for
    /// when this build has it.
    #[allow(unused_variables)]
    fn random_ip(rng: &mut Rng, v6: bool, payload_len: usize) -> Option<IpRepr> {
        #[cfg(feature = "proto-ipv6")]
        if v6 {
            let addr = |rng: &mut Rng| {
                let (a, b) = (rng.next() as u128, rng.next() as u128);
                crate::wire::Ipv6Address::from_bits(a << 64 | b)
            };
            return Some(IpRepr::Ipv6(Ipv6Repr {
                src_addr: addr(rng),
                dst_addr: addr(rng),
                next_header: IpProtocol::Tcp,
                payload_len,
                hop_limit: rng.next() as u8,
            }));
        }
        #[cfg(feature = "proto-ipv4")]
        if !v6 {
            return Some(IpRepr::Ipv4(Ipv4Repr {
                src_addr: crate::wire::Ipv4Address::from_bits(rng.next() as u32),
                dst_addr: crate::wire::Ipv4Address::from_bits(rng.next() as u32),
                next_header: IpProtocol::Tcp,
                payload_len,
                hop_limit: rng.next() as u8,
            }));
        }
        None
    }

    #[test]
    fn segments_with_other_options_are_left_to_the_general_path() {
        let base = TcpRepr {
            src_port: 1,
            dst_port: 2,
            control: TcpControl::None,
            seq_number: TcpSeqNumber(1),
            ack_number: Some(TcpSeqNumber(2)),
            window_len: 3,
            window_scale: None,
            max_seg_size: None,
            sack_permitted: false,
            sack_ranges: [None, None, None],
            timestamp: None,
            payload: &[],
        };
        let ts = Some(TcpTimestampRepr::new(1, 2));
        let variants = [
            base,
            TcpRepr { timestamp: ts, ..base },
            TcpRepr { max_seg_size: Some(1460), ..base },
            TcpRepr { window_scale: Some(7), ..base },
            TcpRepr { sack_permitted: true, ..base },
            TcpRepr { sack_ranges: [Some((1, 2)), None, None], ..base },
            TcpRepr { sack_ranges: [None, None, Some((1, 2))], ..base },
            // Without an ACK no SACK block is written, but `header_len` (and so the
            // general path's data offset) still counts it.
            TcpRepr { sack_ranges: [Some((1, 2)), None, None], ack_number: None, ..base },
            // With a timestamp: SACK permitted is also 32 bytes of header.
            TcpRepr { sack_permitted: true, timestamp: ts, ..base },
            TcpRepr { max_seg_size: Some(1460), timestamp: ts, ..base },
            TcpRepr { window_scale: Some(7), timestamp: ts, ..base },
            TcpRepr { sack_ranges: [Some((1, 2)), None, None], timestamp: ts, ..base },
        ];
        for (i, r) in variants.iter().enumerate() {
            assert_eq!(applies(r), i < 2, "{r:?}");
        }
    }
}
