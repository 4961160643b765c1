//! Path MTU discovery: a Packet Too Big (IPv6) or Fragmentation Needed (IPv4) from a
//! router on the way lowers the connection's MSS, and the data crosses the narrower
//! link; forged ones change nothing and are counted.

use std::cell::RefCell;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::rc::Rc;
use std::time::Duration;

use crate::conn::{ConnId, Event};
use crate::testing::frames::{icmp4, icmpv6};
use crate::testing::{mac_of, Pair};

use super::tests::read_all;

const PORT: u16 = 7;
/// A router's addresses, off the pair's subnets; it sits on their wire (B's MAC).
const ROUTER: Ipv4Addr = Ipv4Addr::new(198, 19, 0, 1);
const ROUTER6: Ipv6Addr = Ipv6Addr::new(0x2001, 2, 0, 1, 0, 0, 0, 1);
const DATA_LEN: usize = 12_000;

/// The IP packet's length in an Ethernet frame.
fn ip_len(f: &[u8]) -> usize {
    if f[12..14] == [0x86, 0xdd] {
        40 + u16::from_be_bytes([f[18], f[19]]) as usize
    } else {
        u16::from_be_bytes([f[16], f[17]]) as usize
    }
}

/// What a router sends A about A's `frame`, too big for its next hop of `mtu`: the
/// packet quoted as far as RFC 4443 (1280 bytes in all) or RFC 792 (header and 8 bytes)
/// say.
fn too_big(frame: &[u8], mtu: u32) -> Vec<u8> {
    let ip = &frame[14..14 + ip_len(frame)];
    if frame[12..14] == [0x86, 0xdd] {
        let mut body = mtu.to_be_bytes().to_vec();
        body.extend_from_slice(&ip[..ip.len().min(1280 - 48)]);
        icmpv6(mac_of(Pair::B), mac_of(Pair::A), ROUTER6, Pair::A6, 2, 0, &body)
    } else {
        let mut body = vec![0, 0];
        body.extend_from_slice(&(mtu as u16).to_be_bytes());
        body.extend_from_slice(&ip[..(ip[0] & 15) as usize * 4 + 8]);
        icmp4(mac_of(Pair::B), mac_of(Pair::A), ROUTER, Pair::A, 3, 4, &body)
    }
}

/// A connection from B to A (over IPv6 or IPv4) across a wire that drops A's packets
/// longer than `mtu`, keeping them in `dropped`; A has `DATA_LEN` bytes queued for B.
struct Narrow {
    p: Pair,
    conn: ConnId,
    server: ConnId,
    data: Vec<u8>,
    /// Packets the wire dropped for their length, and the first of them.
    too_long: usize,
    first: Option<Vec<u8>>,
    dropped: Rc<RefCell<Vec<Vec<u8>>>>,
    got: Vec<u8>,
}

impl Narrow {
    fn new(v6: bool, mtu: usize) -> Narrow {
        let mut p = Pair::new();
        p.a.listen(PORT).unwrap();
        let to: SocketAddr =
            if v6 { SocketAddrV6::new(Pair::A6, PORT, 0, 0).into() } else { SocketAddrV4::new(Pair::A, PORT).into() };
        let conn = p.b.connect(to).unwrap();
        let (ea, eb) = p.settle(20);
        assert!(eb.contains(&Event::Connected(conn)), "{eb:?}");
        let s = ea.iter().find_map(|e| if let Event::Accepted { conn, .. } = e { Some(*conn) } else { None }).unwrap();
        let dropped = Rc::new(RefCell::new(Vec::new()));
        let d = dropped.clone();
        p.filter = Some(Box::new(move |frames: Vec<Vec<u8>>| {
            frames
                .into_iter()
                .filter(|f| {
                    let big = f[6..12] == mac_of(Pair::A) && ip_len(f) > mtu;
                    if big {
                        d.borrow_mut().push(f.clone());
                    }
                    !big
                })
                .collect()
        }));
        let data: Vec<u8> = (0..DATA_LEN).map(|i| (i * 7 + i / 251) as u8).collect();
        assert_eq!(p.a.send(s, &data).unwrap(), DATA_LEN);
        Narrow { p, conn, server: s, data, too_long: 0, first: None, dropped, got: Vec::new() }
    }

    /// Runs the wire for `rounds` of 20 ms; with `bounce`, each dropped packet comes
    /// back to A as `too_big` for the link's `mtu`. Whether all the data arrived.
    fn run(&mut self, rounds: usize, bounce: Option<u32>) -> bool {
        for _ in 0..rounds {
            self.p.settle(10);
            for f in self.dropped.borrow_mut().drain(..) {
                self.too_long += 1;
                self.first.get_or_insert_with(|| f.clone());
                if let Some(mtu) = bounce {
                    self.p.a.inbox.push_back(too_big(&f, mtu));
                }
            }
            self.got.extend(read_all(&mut self.p.b, self.conn));
            if self.got.len() == self.data.len() {
                assert_eq!(self.got, self.data);
                return true;
            }
            self.p.advance(Duration::from_millis(20));
        }
        false
    }
}

fn crosses_narrow_link(v6: bool, mtu: usize) {
    // Without the router's message the link is a black hole (what the test relies on).
    let mut n = Narrow::new(v6, mtu);
    assert!(!n.run(100, None), "nothing crosses without a message");
    let mut n = Narrow::new(v6, mtu);
    assert!(n.run(300, Some(mtu as u32)), "only {} of {} bytes arrived", n.got.len(), DATA_LEN);
    let st = n.p.a.engine.stats();
    assert_eq!(st.path_mtu_lowered, 1, "{st:?}");
    assert_eq!(st.drops.total(), 0, "later messages about the first flight are taken, not dropped: {:?}", st.drops);
    // Once lowered, nothing longer leaves A: more data crosses without a loss.
    let (before, more) = (n.too_long, vec![b'x'; DATA_LEN]);
    assert_eq!(n.p.a.send(n.server, &more).unwrap(), DATA_LEN);
    n.data.extend_from_slice(&more);
    assert!(n.run(100, None));
    assert_eq!(n.too_long, before);
    assert!(before > 0);
}

#[test]
fn packet_too_big_lowers_the_mss_over_ipv6() {
    crosses_narrow_link(true, 1400);
}

#[test]
fn fragmentation_needed_lowers_the_mss_over_ipv4() {
    crosses_narrow_link(false, 1000);
}

/// A message must quote one of our segments in flight: the connection's ports and
/// addresses and a sequence number in its unacknowledged data. Anything else is counted
/// by reason and changes nothing; then a genuine one still works.
#[test]
fn forged_or_stray_messages_change_nothing() {
    let mut n = Narrow::new(true, 1400);
    assert!(!n.run(2, None));
    let first = n.first.clone().unwrap();
    let quoted = 14 + 40 + 8; // in the message: Ethernet, IPv6, ICMPv6 header and MTU
    let forge = |mtu: u32, edit: &dyn Fn(&mut Vec<u8>)| {
        let mut m = too_big(&first, mtu);
        edit(&mut m);
        // Forged, not broken: its checksum is right.
        forge_checksum(m)
    };
    let seq_at = quoted + 40 + 4;
    let forged = [
        // A sequence number far outside the data in flight.
        forge(1400, &|m| m[seq_at] ^= 0x40),
        // Just before SND.UNA.
        forge(1400, &|m| {
            let s = u32::from_be_bytes(m[seq_at..seq_at + 4].try_into().unwrap()).wrapping_sub(1);
            m[seq_at..seq_at + 4].copy_from_slice(&s.to_be_bytes());
        }),
        // Another peer port (no such connection).
        forge(1400, &|m| m[quoted + 40 + 3] ^= 1),
        // Not from our address.
        forge(1400, &|m| m[quoted + 8 + 15] ^= 1),
        // Not TCP.
        forge(1400, &|m| m[quoted + 6] = 17),
    ];
    for m in &forged {
        n.p.a.inbox.push_back(m.clone());
    }
    n.p.a.inbox.push_back(too_big(&first, 1000));
    // A quote too short for the TCP header.
    n.p.a.inbox.push_back(forge(1400, &|m| {
        m.truncate(quoted + 30);
        let len = (m.len() - 54) as u16;
        m[18..20].copy_from_slice(&len.to_be_bytes());
    }));
    n.p.a.ingest();
    let st = n.p.a.engine.stats();
    assert_eq!(st.path_mtu_lowered, 0, "{st:?}");
    assert_eq!((st.drops.icmp_stray, st.drops.icmp_bad_mtu, st.drops.malformed), (5, 1, 1), "{:?}", st.drops);
    assert!(!n.run(50, None), "the MSS stayed: the link is still a black hole");
    n.p.a.inbox.push_back(too_big(&first, 1400));
    assert!(n.run(300, None), "a genuine message after the forged ones");
    assert_eq!(n.p.a.engine.stats().path_mtu_lowered, 1);
}

/// `m` with its ICMPv6 checksum computed again.
fn forge_checksum(mut m: Vec<u8>) -> Vec<u8> {
    use smoltcp::wire::{checksum, IpProtocol};
    m[56..58].copy_from_slice(&[0, 0]);
    let pseudo = checksum::pseudo_header_v6(&ROUTER6, &Pair::A6, IpProtocol::Icmpv6, (m.len() - 54) as u32);
    let c = !checksum::combine(&[pseudo, checksum::data(&m[54..])]);
    m[56..58].copy_from_slice(&c.to_be_bytes());
    m
}
