//! A connection's record and a socket bucket.

use std::net::IpAddr;

use smoltcp::iface::{SocketHandle, SocketSet};
use smoltcp::socket::tcp;
use smoltcp::time::Instant;
use smoltcp::wire::{IpAddress, IpEndpoint};

use crate::conn::{ConnId, ListenerId};

#[derive(Debug)]
pub(super) struct Conn {
    pub(super) bucket: u32,
    pub(super) handle: SocketHandle,
    /// `Connected` reported (outgoing); incoming ones start connected.
    pub(super) connected: bool,
    /// The last recv returned 0: report `Readable` when data arrives.
    pub(super) want_read: bool,
    /// A send was short: report `Writable` when there is room.
    pub(super) blocked: bool,
    pub(super) closed_reported: bool,
    pub(super) local_port: u16,
    /// Last time data moved either way (idle timeout); for a connect, when it began.
    pub(super) active: Instant,
    /// Bytes waiting for the peer's ACK at the last sweep, and since when
    /// they have not shrunk (a peer that stopped acknowledging).
    pub(super) unacked: usize,
    pub(super) unacked_since: Instant,
    /// The `PeerMemory` generation this connection last took its peer's ACK
    /// lesson at (one behind the current at first, so that its first send looks).
    pub(super) acks_gen: u32,
    /// Its peer holds its ACKs by the pooled verdicts, as of `acks_gen`: the
    /// connection shares RTT samples with the peer's others (as with timestamps).
    pub(super) slow_peer: bool,
}

pub(super) struct Bucket {
    /// Connections, half-open ones and closing ones. Added and taken only through
    /// [`Bucket::add`] and [`Bucket::take`], which keep `keys`.
    pub(super) sockets: SocketSet<'static>,
    /// The 4-tuple each socket of `sockets` was added with (see [`key`]): a SYN looks here
    /// for a live connection instead of in the sockets themselves, several hundred bytes
    /// apart and each a cache miss (under a SYN flood that search would be most of the
    /// engine's time per SYN). A socket's tuple never changes while it is in the set, but smoltcp
    /// forgets it when the socket closes, so a match is confirmed on the socket.
    keys: Vec<(u64, SocketHandle)>,
    /// Listening sockets, one or more per listening port, in a set of their
    /// own: smoltcp gives a segment to the first socket that takes it, and a
    /// listener takes any SYN, so a SYN for a live connection must never
    /// reach a listener before the connection sees it.
    pub(super) listen: SocketSet<'static>,
    pub(super) members: Vec<ConnId>,
    pub(super) listeners: Vec<(SocketHandle, ListenerId)>,
    /// Listeners that left LISTEN (SYN received), not established yet, with arrival time.
    pub(super) half_open: Vec<(SocketHandle, ListenerId, Instant)>,
    /// Closed by the application, finishing their FIN exchange: (socket, local port, since).
    pub(super) closing: Vec<(SocketHandle, u16, Instant)>,
    /// When smoltcp wants this bucket polled next (its `poll_at`).
    pub(super) deadline: Option<Instant>,
    /// The bucket's earliest entry in the engine's timer heap. Kept at or
    /// before `deadline`: a later deadline pushes nothing (when the entry
    /// comes first, `Engine::poll_at` queues the real one before the driver
    /// sleeps, or egress does when it fires), so a request/response
    /// exchange, which moves the retransmission deadline later with every
    /// response, costs no heap operation and no early wake-up.
    pub(super) queued: Option<Instant>,
    pub(super) dirty: bool,
    /// Sockets in `sockets`.
    pub(super) len: u32,
    /// Touched since its last scan by something other than the application's
    /// `recv` or `send` (a frame, a timer, a close): the scan after its egress
    /// may then be skipped only if this is false (see `Engine::egress`).
    pub(super) unscanned: bool,
    /// A socket here wants the peer's pure ACKs as they come (see
    /// `Engine::acks_can_wait`), as of its last egress.
    pub(super) wants_acks_now: bool,
    /// Segments the fast path took here: `EngineStats::fast_path` is their sum, and the
    /// fuzzer's twin compares the buckets where it took any.
    pub(super) fast_hits: u64,
    /// Segments sent here by the fast path out (smoltcp's fast-send), for the same twin.
    pub(super) fast_sent: u64,
}

/// A connection's peer address (an IPv6 one folded to 32 bits), peer port and local
/// port in one word.
#[inline]
fn key(src: IpAddr, sport: u16, dport: u16) -> u64 {
    let a = match src {
        IpAddr::V4(a) => u32::from(a),
        IpAddr::V6(a) => crate::demux::fold_v6(a),
    };
    (u64::from(a) << 32) | (u64::from(sport) << 16) | u64::from(dport)
}

/// The key of a socket's tuple, if it has one.
fn key_of(s: &tcp::Socket) -> Option<u64> {
    match (s.remote_endpoint(), s.local_endpoint()) {
        (Some(IpEndpoint { addr, port }), Some(l)) => Some(key(addr.into(), port, l.port)),
        _ => None,
    }
}

/// Whether socket `s` has this tuple (a key may stand for several IPv6 peers).
#[inline]
fn has_tuple(s: &tcp::Socket, src: IpAddr, sport: u16, dport: u16) -> bool {
    match (s.remote_endpoint(), s.local_endpoint()) {
        (Some(r), Some(l)) => r.port == sport && l.port == dport && same_addr(r.addr, src),
        _ => false,
    }
}

/// `a == IpAddress::from(b)`, compared within the family: the derived comparison of
/// smoltcp's address enum (discriminant, then all of its bytes) is the dearer one on
/// the path of every segment in.
#[inline]
fn same_addr(a: IpAddress, b: IpAddr) -> bool {
    match (a, b) {
        (IpAddress::Ipv4(a), IpAddr::V4(b)) => a == b,
        (IpAddress::Ipv6(a), IpAddr::V6(b)) => a == b,
        _ => false,
    }
}

impl Bucket {
    /// Whether a connection socket (not a listener) has this peer and port.
    pub(super) fn has_conn(&self, src: IpAddr, sport: u16, dport: u16) -> bool {
        self.find_conn(src, sport, dport).is_some()
    }

    /// The connection socket (not a listener) with this peer and port. Always inlined:
    /// the fast path in asks for every segment.
    #[inline(always)]
    pub(super) fn find_conn(&self, src: IpAddr, sport: u16, dport: u16) -> Option<SocketHandle> {
        let want = key(src, sport, dport);
        self.keys
            .iter()
            .find(|&&(k, h)| k == want && has_tuple(self.sockets.get::<tcp::Socket>(h), src, sport, dport))
            .map(|&(_, h)| h)
    }

    /// Adds a connection's socket (its tuple set: connecting, or past its SYN).
    pub(super) fn add(&mut self, s: tcp::Socket<'static>) -> SocketHandle {
        let k = key_of(&s);
        let h = self.sockets.add(s);
        self.len += 1;
        if let Some(k) = k {
            self.keys.push((k, h));
        }
        h
    }

    /// Takes socket `h` out of the set.
    pub(super) fn take(&mut self, h: SocketHandle) -> tcp::Socket<'static> {
        if let Some(i) = self.keys.iter().position(|&(_, x)| x == h) {
            self.keys.swap_remove(i);
        }
        self.len -= 1;
        super::Engine::take_socket(&mut self.sockets, h)
    }

    pub(super) fn new() -> Bucket {
        Bucket {
            sockets: SocketSet::new(Vec::new()),
            keys: Vec::new(),
            listen: SocketSet::new(Vec::new()),
            members: Vec::new(),
            listeners: Vec::new(),
            half_open: Vec::new(),
            closing: Vec::new(),
            deadline: None,
            queued: None,
            dirty: false,
            len: 0,
            unscanned: false,
            wants_acks_now: false,
            fast_hits: 0,
            fast_sent: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddrV4;

    use smoltcp::socket::tcp;

    use crate::testing::Pair;

    /// A connecting socket is found by its tuple; once the peer resets it, smoltcp forgets the
    /// tuple and so does `has_conn` (the socket still in the set); once taken, nothing is left.
    #[test]
    fn has_conn_finds_a_socket_by_its_tuple_until_it_closes_or_leaves() {
        let mut p = Pair::new();
        let c = p.a.connect(SocketAddrV4::new(Pair::B, 7)).unwrap();
        let (b, h) = {
            let conn = p.a.engine.conns.get(c).unwrap();
            (conn.bucket as usize, conn.handle)
        };
        let lport = p.a.engine.buckets[b].sockets.get::<tcp::Socket>(h).local_endpoint().unwrap().port;
        let bucket = &p.a.engine.buckets[b];
        let (a, b_) = (Pair::A.into(), Pair::B.into());
        assert!(bucket.has_conn(b_, 7, lport));
        assert!(!bucket.has_conn(b_, 8, lport) && !bucket.has_conn(a, 7, lport) && !bucket.has_conn(b_, 7, lport + 1));
        // Nobody listens on B's port 7: its RST closes the socket.
        p.settle(10);
        let bucket = &p.a.engine.buckets[b];
        assert_eq!(bucket.sockets.get::<tcp::Socket>(h).state(), tcp::State::Closed);
        assert!(!bucket.has_conn(b_, 7, lport), "a closed socket has no tuple");
        assert_eq!(bucket.keys.len(), 1, "its key stays until it is taken");
        let s = p.a.engine.buckets[b].take(h);
        drop(s);
        assert!(p.a.engine.buckets[b].keys.is_empty());
    }
}
