//! [xsk-stack patch: fast-emit] Writing an Ethernet/IPv4 frame of a TCP
//! segment without options in one pass.
//!
//! Nearly every segment of an established connection is of this kind (data,
//! ACK, FIN, RST), and the general path writes it field by field through
//! `Ipv4Repr::emit`, `Packet::emit_payload` (an enum of every payload kind)
//! and `TcpRepr::emit` (every option checked), each setter bounds-checked on
//! its own. The bytes written here are the same: the tests below compare
//! both writers on random segments.

use crate::phy::ChecksumCapabilities;
use crate::wire::ip::checksum;
use crate::wire::{
    EthernetAddress, IpAddress, IpProtocol, Ipv4Repr, TcpControl, TcpRepr, IPV4_HEADER_LEN,
    TCP_HEADER_LEN,
};

const ETH: usize = 14;
const HEADERS: usize = ETH + IPV4_HEADER_LEN + TCP_HEADER_LEN;

/// Whether [`emit`] writes `tcp`: a segment without options, the case where
/// `TcpRepr::header_len` is 20 (the caller has already ruled out
/// fragmentation). `header_len` decides, so the two writers cannot disagree
/// on the data offset.
pub(crate) fn applies(tcp: &TcpRepr) -> bool {
    tcp.header_len() == TCP_HEADER_LEN
}

/// Writes the frame of `tcp` in `ip` into `buf`, which is exactly
/// `14 + 20 + 20 + tcp.payload.len()` bytes, as `dispatch_ip` would with
/// these checksum capabilities. Only for a segment [`applies`] accepts.
pub(crate) fn emit(
    buf: &mut [u8],
    src_mac: EthernetAddress,
    dst_mac: EthernetAddress,
    ip: &Ipv4Repr,
    tcp: &TcpRepr,
    caps: &ChecksumCapabilities,
) {
    debug_assert!(applies(tcp));
    let (h, payload) = buf.split_at_mut(HEADERS);
    payload[..tcp.payload.len()].copy_from_slice(tcp.payload);

    h[0..6].copy_from_slice(dst_mac.as_bytes());
    h[6..12].copy_from_slice(src_mac.as_bytes());
    h[12..14].copy_from_slice(&0x0800u16.to_be_bytes());

    let total_len = (IPV4_HEADER_LEN + ip.payload_len) as u16;
    let iph = &mut h[ETH..ETH + IPV4_HEADER_LEN];
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

    let th = &mut h[ETH + IPV4_HEADER_LEN..];
    th[0..2].copy_from_slice(&tcp.src_port.to_be_bytes());
    th[2..4].copy_from_slice(&tcp.dst_port.to_be_bytes());
    th[4..8].copy_from_slice(&tcp.seq_number.0.to_be_bytes());
    th[8..12].copy_from_slice(&tcp.ack_number.map_or(0, |a| a.0).to_be_bytes());
    th[12] = ((TCP_HEADER_LEN / 4) as u8) << 4;
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
    th[16..18].copy_from_slice(&[0, 0]);
    th[18..20].copy_from_slice(&[0, 0]); // urgent pointer
    if caps.tcp.tx() {
        let tcp_len = TCP_HEADER_LEN + tcp.payload.len();
        let seg = &buf[ETH + IPV4_HEADER_LEN..ETH + IPV4_HEADER_LEN + tcp_len];
        let sum = !checksum::combine(&[
            checksum::pseudo_header(
                &IpAddress::Ipv4(ip.src_addr),
                &IpAddress::Ipv4(ip.dst_addr),
                IpProtocol::Tcp,
                tcp_len as u32,
            ),
            checksum::data(seg),
        ]);
        buf[ETH + IPV4_HEADER_LEN + 16..ETH + IPV4_HEADER_LEN + 18]
            .copy_from_slice(&sum.to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iface::packet::{IpPayload, Packet};
    use crate::phy::{Checksum, DeviceCapabilities};
    use crate::wire::{
        EthernetFrame, EthernetProtocol, IpRepr, Ipv4Address, TcpSeqNumber, TcpTimestampRepr,
    };

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
        ip: Ipv4Repr,
        tcp: TcpRepr,
        caps: &DeviceCapabilities,
    ) {
        let mut frame = EthernetFrame::new_unchecked(&mut *buf);
        frame.set_src_addr(src_mac);
        frame.set_dst_addr(dst_mac);
        frame.set_ethertype(EthernetProtocol::Ipv4);
        let ip_repr = IpRepr::Ipv4(ip);
        let tx = &mut buf[ETH..];
        ip_repr.emit(&mut *tx, &caps.checksum);
        let packet = Packet::new_ipv4(ip, IpPayload::Tcp(tcp));
        packet.emit_payload(&ip_repr, &mut tx[IPV4_HEADER_LEN..], caps);
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
        for i in 0..4000 {
            let r = rng.next();
            let len = match i % 4 {
                0 => 0,
                1 => (r % 64) as usize,
                _ => (r % 1461) as usize,
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
                timestamp: None,
                payload: &data[..len],
            };
            let ip = Ipv4Repr {
                src_addr: Ipv4Address::from_bits(rng.next() as u32),
                dst_addr: Ipv4Address::from_bits(rng.next() as u32),
                next_header: crate::wire::IpProtocol::Tcp,
                payload_len: TCP_HEADER_LEN + len,
                hop_limit: rng.next() as u8,
            };
            let mut caps = DeviceCapabilities::default();
            caps.checksum.ipv4 = sums[(r >> 24) as usize % 4];
            caps.checksum.tcp = sums[(r >> 28) as usize % 4];
            let mac = |x: u64| EthernetAddress([x as u8, (x >> 8) as u8, (x >> 16) as u8, 0, 1, 2]);
            let (src, dst) = (mac(rng.next()), mac(rng.next()));
            assert!(applies(&tcp));
            // Both writers get a buffer full of garbage: every byte must be written.
            let fill = rng.next() as u8;
            let mut a = std::vec![fill; HEADERS + len];
            let mut b = std::vec![fill; HEADERS + len];
            general(&mut a, src, dst, ip, tcp, &caps);
            emit(&mut b, src, dst, &ip, &tcp, &caps.checksum);
            assert_eq!(a, b, "case {i}: {tcp:?} {ip:?} {:?}", caps.checksum);
        }
    }

    #[test]
    fn segments_with_options_are_left_to_the_general_path() {
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
        let variants = [
            base,
            TcpRepr { max_seg_size: Some(1460), ..base },
            TcpRepr { window_scale: Some(7), ..base },
            TcpRepr { sack_permitted: true, ..base },
            TcpRepr { sack_ranges: [Some((1, 2)), None, None], ..base },
            TcpRepr { sack_ranges: [None, None, Some((1, 2))], ..base },
            // Without an ACK no SACK block is written, but `header_len` (and so the
            // general path's data offset) still counts it.
            TcpRepr { sack_ranges: [Some((1, 2)), None, None], ack_number: None, ..base },
            TcpRepr { timestamp: Some(TcpTimestampRepr::new(1, 2)), ..base },
        ];
        for (i, r) in variants.iter().enumerate() {
            assert_eq!(applies(r), i == 0, "{r:?}");
            assert_eq!(applies(r), r.header_len() == TCP_HEADER_LEN, "{r:?}");
        }
    }
}
