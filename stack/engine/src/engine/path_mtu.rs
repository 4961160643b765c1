//! Path MTU discovery (RFC 8201 for IPv6, RFC 1191 for IPv4): an ICMPv6 Packet Too Big
//! or an ICMP Fragmentation Needed lowers the MSS of the connection whose segment it
//! quotes. A router on a narrower link sends it; so can anyone, so the quoted segment
//! must be one of ours: our address and a connection's 4-tuple, and (checked by the
//! socket, patch `path-mtu`) a sequence number in data not yet acknowledged.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use smoltcp::socket::tcp;
use smoltcp::wire::TcpSeqNumber;

use super::Engine;
use crate::demux::{bucket_of, RxRules};
use crate::drops::DropReason;

/// The least IPv6 link MTU (RFC 8200, 5): a Packet Too Big below it is ignored
/// (RFC 8201, 4).
const IPV6_MIN_MTU: u32 = 1280;
/// The least IPv4 MTU (RFC 791): below it (0 from routers older than RFC 1191
/// included) the message says nothing usable.
const IPV4_MIN_MTU: u32 = 68;

/// What a too-big message says, once parsed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TooBig {
    /// The peer the quoted segment went to, and its port.
    pub peer: IpAddr,
    pub peer_port: u16,
    /// Our port in the quoted segment.
    pub port: u16,
    /// The quoted segment's sequence number.
    pub seq: u32,
    /// The next hop's MTU.
    pub mtu: u32,
}

/// `frame` passed `inspect` as ICMP or ICMPv6 (lengths and checksum checked). `None`:
/// not a too-big message (smoltcp takes it as before); otherwise what it says, or why
/// it is ignored.
pub(crate) fn parse(frame: &[u8], rules: &RxRules) -> Option<Result<TooBig, DropReason>> {
    let ip = &frame[14..];
    let (quoted, mtu, least) = if frame[12..14] == [0x86, 0xdd] {
        let end = 40 + u16::from_be_bytes([ip[4], ip[5]]) as usize;
        let icmp = &ip[40..end];
        // Type 2 (Packet Too Big); `inspect` saw 8 bytes at least.
        if icmp[0] != 2 {
            return None;
        }
        (quoted_v6(&icmp[8..], rules), u32::from_be_bytes([icmp[4], icmp[5], icmp[6], icmp[7]]), IPV6_MIN_MTU)
    } else {
        let ihl = (ip[0] & 0x0f) as usize * 4;
        let total = u16::from_be_bytes([ip[2], ip[3]]) as usize;
        let icmp = &ip[ihl..total];
        // Type 3 (destination unreachable), code 4 (fragmentation needed and DF set).
        if icmp[0] != 3 || icmp[1] != 4 {
            return None;
        }
        (quoted_v4(&icmp[8..], rules), u16::from_be_bytes([icmp[6], icmp[7]]) as u32, IPV4_MIN_MTU)
    };
    Some(quoted.and_then(|(peer, peer_port, port, seq)| {
        if mtu < least {
            return Err(DropReason::IcmpBadMtu);
        }
        Ok(TooBig { peer, peer_port, port, seq, mtu })
    }))
}

type Quoted = (IpAddr, u16, u16, u32);

/// The quoted IPv6 header and the first 8 bytes of TCP after it: a segment of ours
/// carries no extension header.
fn quoted_v6(q: &[u8], rules: &RxRules) -> Result<Quoted, DropReason> {
    if q.len() < 48 || q[0] >> 4 != 6 {
        return Err(DropReason::Malformed);
    }
    let addr = |at: usize| Ipv6Addr::from(<[u8; 16]>::try_from(&q[at..at + 16]).unwrap_or_default());
    if q[6] != 6 || Some(addr(8)) != rules.addr6 {
        return Err(DropReason::IcmpStray);
    }
    Ok(tcp_ports(addr(24).into(), &q[40..48]))
}

/// The quoted IPv4 header and the first 8 bytes of TCP after it (all RFC 792 promises).
fn quoted_v4(q: &[u8], rules: &RxRules) -> Result<Quoted, DropReason> {
    if q.len() < 28 || q[0] >> 4 != 4 {
        return Err(DropReason::Malformed);
    }
    let ihl = (q[0] & 0x0f) as usize * 4;
    if ihl < 20 || q.len() < ihl + 8 {
        return Err(DropReason::Malformed);
    }
    let src = Ipv4Addr::new(q[12], q[13], q[14], q[15]);
    if q[9] != 6 || src != rules.addr {
        return Err(DropReason::IcmpStray);
    }
    Ok(tcp_ports(Ipv4Addr::new(q[16], q[17], q[18], q[19]).into(), &q[ihl..ihl + 8]))
}

fn tcp_ports(peer: IpAddr, t: &[u8]) -> Quoted {
    let port = u16::from_be_bytes([t[0], t[1]]);
    let peer_port = u16::from_be_bytes([t[2], t[3]]);
    (peer, peer_port, port, u32::from_be_bytes([t[4], t[5], t[6], t[7]]))
}

impl Engine {
    /// A too-big message in `frame` (ICMP or ICMPv6 past `inspect`): `None` if it is
    /// none; else taken (`Ok`) or ignored and counted.
    pub(super) fn too_big(&mut self, frame: &[u8]) -> Option<Result<(), DropReason>> {
        let r = parse(frame, &self.rules)?.and_then(|t| self.lower_mss(t));
        if let Err(reason) = r {
            self.stats.drops.count(reason);
        }
        Some(r)
    }

    fn lower_mss(&mut self, t: TooBig) -> Result<(), DropReason> {
        let b = bucket_of(t.peer, t.peer_port, t.port, self.buckets.len());
        let bucket = &mut self.buckets[b];
        let h = bucket.find_conn(t.peer, t.peer_port, t.port).ok_or(DropReason::IcmpStray)?;
        let socket = bucket.sockets.get_mut::<tcp::Socket>(h);
        let lowered = socket.lower_path_mtu(TcpSeqNumber(t.seq as i32), t.mtu as usize).ok_or(DropReason::IcmpStray)?;
        if lowered {
            self.stats.path_mtu_lowered += 1;
            self.mark_dirty(b as u32);
        }
        Ok(())
    }
}
