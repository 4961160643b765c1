//! The per-frame path in: checks, demux to a bucket, smoltcp.

use std::net::IpAddr;

use smoltcp::iface::SocketHandle;
use smoltcp::socket::tcp;
use smoltcp::time::Instant;
use smoltcp::wire::{EthernetAddress, HardwareAddress, IpAddress, TcpSeqNumber, TcpTimestampRepr};

use super::cookies::SynCookies;
use super::egress::wants_acks_now;
use super::link::SmolDev;
use super::{Engine, Link};
use crate::demux::{bucket_of, inspect_expecting, Flow, Inspected};
use crate::drops::DropReason;

impl Engine {
    /// One received frame: checked, then given to smoltcp in the bucket its
    /// flow hashes to. Answers (RST, ACK, ARP) go out through `link`.
    pub fn ingest<L: Link>(&mut self, now: Instant, frame: &[u8], link: &mut L) -> Result<Inspected, DropReason> {
        self.clock = now;
        self.stats.rx_frames += 1;
        let info = match inspect_expecting(frame, &self.rules, self.partial_csum_seen) {
            Ok(i) => i,
            Err(r) => {
                self.stats.drops.count(r);
                return Err(r);
            }
        };
        self.stats.rx_partial_csum += info.partial_csum as u64;
        if let Flow::Tcp { .. } = info.flow {
            self.partial_csum_seen = info.partial_csum;
        }
        let b = match info.flow {
            Flow::Tcp { src, sport, dport, syn } => {
                let listening = self.ports.listening(dport);
                // Established and half-open connections count against the limit. With SYN
                // cookies, a full half-open table (a flood, most likely) does not refuse a
                // SYN: it gets a cookie, and a real client that completes the handshake gets
                // in as long as established connections leave room.
                // Only a SYN to a listener can be refused: the rest (nearly every frame)
                // skips the arithmetic.
                let refuse_syn = syn && listening && {
                    let full = self.half_open + self.conns.len() >= self.cfg.tcp.max_conns;
                    let flooded =
                        self.cfg.tcp.syn_cookies != SynCookies::Off && self.half_open >= self.half_open_limit();
                    full && (!flooded || self.conns.len() >= self.cfg.tcp.max_conns)
                };
                let refuse = if refuse_syn {
                    Some(DropReason::ConnLimit)
                } else if !listening && !self.ports.in_use_or_stopped(dport) {
                    Some(DropReason::NoSocket)
                } else {
                    None
                };
                // A SYN answered with a cookie keeps nothing, and teaches nothing either: a
                // flood from more sources than smoltcp's neighbour cache holds would evict
                // real peers between their request and its answer, which then waits for ARP.
                let b = bucket_of(src, sport, dport, self.buckets.len());
                let to_listener = syn && listening && !self.buckets[b].has_conn(src, sport, dport);
                if refuse.is_none() && to_listener && self.wants_cookie() {
                    self.send_cookie(now, frame, link);
                    return Ok(info);
                }
                self.learn(now, src, info.src_mac);
                if let Some(r) = refuse {
                    self.stats.drops.count(r);
                    let mut dev = SmolDev { rx: Some(frame), link };
                    self.iface.poll_ingress_single(now, &mut dev, &mut self.no_sockets);
                    return Err(r);
                }
                if !syn && listening && now < self.cookies_until && self.take_cookie(now, b, frame) {
                    // Counted there.
                    return Err(DropReason::BadCookie);
                }
                if !syn && self.cfg.tcp.fast_path {
                    match self.ingest_fast(now, b, frame, (src, sport, dport), info.src_mac) {
                        Fast::Declined => {}
                        Fast::PureAck(h) if self.acked_quietly(now, b, h) => return Ok(info),
                        Fast::Taken | Fast::PureAck(_) => {
                            self.mark_dirty(b as u32);
                            return Ok(info);
                        }
                    }
                }
                let bucket = &mut self.buckets[b];
                let set = if to_listener { &mut bucket.listen } else { &mut bucket.sockets };
                let mut dev = SmolDev { rx: Some(frame), link };
                self.iface.poll_ingress_single(now, &mut dev, set);
                // Only a SYN changes a listening socket: the others need no
                // look (each is a cold cache line at light load).
                if to_listener {
                    self.replenish_listeners(b);
                }
                self.mark_dirty(b as u32);
                return Ok(info);
            }
            Flow::Icmp { src } => {
                if let Some(r) = self.too_big(frame) {
                    return r.map(|()| info);
                }
                self.learn(now, src, info.src_mac);
                // A neighbour advertisement answering our solicitation: as for ARP below,
                // sockets in any bucket may be waiting for it.
                if src.is_ipv6() && self.iface.neighbor_asked(now, IpAddress::from(src)) {
                    let mut dev = SmolDev { rx: Some(frame), link };
                    self.iface.poll_ingress_single(now, &mut dev, &mut self.buckets[0].sockets);
                    self.mark_all_dirty();
                    return Ok(info);
                }
                0
            }
            Flow::Arp { sender } => {
                // The answer to a request of ours (patch `neighbor-rate`): sockets in any
                // bucket may be waiting for it, and their own retry is a second away. Only
                // then: unsolicited ARP does not make every bucket's egress run.
                if self.iface.neighbor_asked(now, IpAddress::Ipv4(sender)) {
                    let mut dev = SmolDev { rx: Some(frame), link };
                    self.iface.poll_ingress_single(now, &mut dev, &mut self.buckets[0].sockets);
                    self.mark_all_dirty();
                    return Ok(info);
                }
                0
            }
        };
        let mut dev = SmolDev { rx: Some(frame), link };
        self.iface.poll_ingress_single(now, &mut dev, &mut self.buckets[b].sockets);
        self.mark_dirty(b as u32);
        Ok(info)
    }

    /// Header prediction: an in-order ACK or ACK|PSH segment without options (or with a
    /// timestamp alone) for an established connection goes straight to its socket. `frame` passed `inspect`
    /// (our MAC and address, a unicast source, no fragment, lengths and checksums), which
    /// is what smoltcp's skipped layers would check. `Declined`: nothing changed, the
    /// general path takes it.
    fn ingest_fast(&mut self, now: Instant, b: usize, frame: &[u8], (src, sport, dport): (IpAddr, u16, u16), mac: [u8; 6]) -> Fast {
        let ip = &frame[14..];
        // `inspect` found the TCP header right after the IPv6 header (no extension
        // header), or after the IPv4 header's IHL.
        let tcp = if src.is_ipv6() {
            &ip[40..40 + u16::from_be_bytes([ip[4], ip[5]]) as usize]
        } else {
            let ihl = (ip[0] & 0x0f) as usize * 4;
            &ip[ihl..u16::from_be_bytes([ip[2], ip[3]]) as usize]
        };
        // Flags ACK, perhaps PSH, nothing else; no option but perhaps a timestamp.
        if tcp[13] & !0x08 != 0x10 {
            return Fast::Declined;
        }
        let Some((timestamp, data)) = timestamp_alone(tcp) else {
            return Fast::Declined;
        };
        let bucket = &mut self.buckets[b];
        let Some(h) = bucket.find_conn(src, sport, dport) else {
            return Fast::Declined;
        };
        let word = |i: usize| i32::from_be_bytes([tcp[i], tcp[i + 1], tcp[i + 2], tcp[i + 3]]);
        let seg = tcp::FastSegment {
            seq_number: TcpSeqNumber(word(4)),
            ack_number: TcpSeqNumber(word(8)),
            window_len: u16::from_be_bytes([tcp[14], tcp[15]]),
            timestamp,
            payload: &tcp[data..],
        };
        let socket = bucket.sockets.get_mut::<tcp::Socket>(h);
        let from = HardwareAddress::Ethernet(EthernetAddress(mac));
        if !self.iface.process_tcp_fast(now, socket, IpAddress::from(src), from, &seg) {
            return Fast::Declined;
        }
        bucket.fast_hits += 1;
        if seg.payload.is_empty() { Fast::PureAck(h) } else { Fast::Taken }
    }

    /// A pure ACK the fast path took, when it left its socket alone in its bucket with
    /// nothing to send (the send buffer empty: everything acknowledged) and nothing to
    /// report (no short write waiting for room; the state unchanged, as the fast path
    /// takes only established connections): the bucket's deadline is set here, as its
    /// egress would set it, and it is not marked for one. At light load the peer's delayed
    /// ACK of the last answer arrives on its own (or beside another connection's request),
    /// and that egress found nothing to send. False, having changed nothing, where the
    /// bucket must be marked: it is already (its egress sets the deadline), it holds other
    /// sockets, it wanted the peer's ACKs at once (its egress tells the ACK policy they
    /// may wait now, see `acks_can_wait`), or a timer of the socket is due.
    fn acked_quietly(&mut self, now: Instant, b: usize, h: SocketHandle) -> bool {
        let bucket = &mut self.buckets[b];
        if bucket.dirty || bucket.len != 1 || bucket.wants_acks_now {
            return false;
        }
        let s = bucket.sockets.get::<tcp::Socket>(h);
        // A socket alone in its bucket is its only member, unless the application has not
        // been told of it yet (half-open) or has closed it (closing).
        let writer_waits = match bucket.members.first() {
            Some(&id) => self.conns.get(id).is_none_or(|c| c.handle != h || c.blocked),
            None => true,
        };
        if s.send_queue() != 0 || writer_waits {
            return false;
        }
        // With its send buffer empty it wants no ACKs now either: `wants_acks_now` stays.
        debug_assert!(!wants_acks_now(s));
        let at = self.iface.poll_at(now, &bucket.sockets);
        if at.is_some_and(|d| d <= now) {
            return false;
        }
        Self::set_deadline(bucket, b, &mut self.timers, at);
        self.acks_quiet += 1;
        true
    }

    /// Peers are learned from their frames (on-link sources only), before anything is
    /// answered: an RST needs the peer's MAC as much as data.
    #[inline]
    fn learn(&mut self, now: Instant, src: IpAddr, mac: [u8; 6]) {
        if let Some(src) = self.neighbours.learn(src, now, &self.rules) {
            self.insert_neighbour(now, src, mac);
        }
    }

    /// Teaches smoltcp that on-link `ip` (IPv4 or IPv6) is at `mac` (shared-address mode,
    /// where the kernel owns ARP and neighbour discovery). Off-link addresses are refused:
    /// their frames come from a router, whose MAC is not theirs; so are a multicast MAC
    /// and a source no peer may have.
    pub fn add_neighbour(&mut self, now: Instant, ip: impl Into<IpAddr>, mac: [u8; 6]) -> bool {
        let ip = ip.into();
        if !self.rules.on_link_ip(ip) || self.rules.bad_source_ip(ip) || !self.insert_neighbour(now, ip, mac) {
            return false;
        }
        self.neighbours.note(ip, now);
        // Sockets waiting for this neighbour can send now (rare: once per
        // new neighbour, so a pass over all buckets is fine).
        self.mark_all_dirty();
        true
    }

    /// Into smoltcp's neighbour cache, as an ARP reply from `ip` would put it
    /// (patch `neighbor-cache`), without building and parsing one.
    fn insert_neighbour(&mut self, now: Instant, ip: IpAddr, mac: [u8; 6]) -> bool {
        let from = HardwareAddress::Ethernet(EthernetAddress(mac));
        self.iface.fill_neighbor(now, IpAddress::from(ip), from)
    }
}

/// What [`Engine::ingest_fast`] did with a segment.
enum Fast {
    /// Not its case: nothing changed, the general path takes it.
    Declined,
    /// Taken, with data.
    Taken,
    /// Taken: a pure ACK, for this socket.
    PureAck(SocketHandle),
}

/// A checked TCP segment's timestamp option and where its data start, when it has no
/// option or a timestamp alone in one of the two layouts senders use: NOP, NOP, TS
/// (Linux, RFC 7323 appendix A) or TS, end of list (smoltcp). None for anything else,
/// which the general path parses.
fn timestamp_alone(tcp: &[u8]) -> Option<(Option<TcpTimestampRepr>, usize)> {
    match tcp[12] >> 4 {
        5 => Some((None, 20)),
        8 => {
            let o = &tcp[20..32];
            let ts = match o {
                [1, 1, 8, 10, ..] => &o[4..12],
                [8, 10, .., 0, 0] => &o[2..10],
                _ => return None,
            };
            let word = |i: usize| u32::from_be_bytes([ts[i], ts[i + 1], ts[i + 2], ts[i + 3]]);
            Some((Some(TcpTimestampRepr::new(word(0), word(4))), 32))
        }
        _ => None,
    }
}
