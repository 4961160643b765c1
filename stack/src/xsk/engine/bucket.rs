//! A connection's record and a socket bucket.

use std::net::Ipv4Addr;

use smoltcp::iface::{SocketHandle, SocketSet};
use smoltcp::time::Instant;

use crate::transport::{ConnId, ListenerId};

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
}

pub(super) struct Bucket {
    /// Connections, half-open ones and closing ones.
    pub(super) sockets: SocketSet<'static>,
    /// Listening sockets, one or more per listening port, in a set of their
    /// own: smoltcp gives a segment to the first socket that takes it, and a
    /// listener takes any SYN, so a SYN for a live connection must never
    /// reach a listener before the connection sees it.
    pub(super) listen: SocketSet<'static>,
    pub(super) members: Vec<ConnId>,
    pub(super) listeners: Vec<(SocketHandle, ListenerId)>,
    /// Listeners that left LISTEN (SYN received), not established yet, with arrival time.
    pub(super) embryos: Vec<(SocketHandle, ListenerId, Instant)>,
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
    /// A socket here wants the peer's pure ACKs as they come (see
    /// `Engine::acks_can_wait`), as of its last egress.
    pub(super) eager: bool,
}

impl Bucket {
    /// Whether a connection socket (not a listener) has this peer and port.
    pub(super) fn has_conn(&self, src: Ipv4Addr, sport: u16, dport: u16) -> bool {
        self.sockets.iter().any(|(_, s)| {
            #[allow(irrefutable_let_patterns)]
            let smoltcp::socket::Socket::Tcp(t) = s else { return false };
            matches!((t.remote_endpoint(), t.local_endpoint()),
                (Some(r), Some(l)) if r.port == sport && l.port == dport && r.addr == smoltcp::wire::IpAddress::Ipv4(src))
        })
    }

    pub(super) fn new() -> Bucket {
        Bucket {
            sockets: SocketSet::new(Vec::new()),
            listen: SocketSet::new(Vec::new()),
            members: Vec::new(),
            listeners: Vec::new(),
            embryos: Vec::new(),
            closing: Vec::new(),
            deadline: None,
            queued: None,
            dirty: false,
            eager: false,
        }
    }
}
