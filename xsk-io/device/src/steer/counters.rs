//! The program's counters, as userspace reads them.

/// The program's counters, summed over CPUs. Every frame the program sees
/// is counted in exactly one of them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct SteerCounters {
    /// Redirected into an AF_XDP socket. (The socket can still drop it, e.g.
    /// when its RX ring is full: see the socket's statistics.)
    pub steered: u64,
    /// Not for the userspace stack: handed to the kernel.
    pub passed: u64,
    /// For the userspace stack, but no socket registered for the receiving
    /// queue: handed to the kernel instead.
    pub no_socket: u64,
    /// Pure ACKs put into a sleeping queue's ack ring instead of its socket
    /// (see [`AckRing`](xsk_io::acks::AckRing)).
    pub deferred: u64,
    /// SYNs dropped under overload (see [`xsk_io::shed`]): the queue's RX
    /// ring had no more room than the reserve kept for open connections.
    pub shed_rx: u64,
    /// SYNs dropped under overload: the queue's fill ring had no more frames
    /// than the reserve.
    pub shed_fill: u64,
    /// SYNs dropped under overload: the queue's RX ring had not been empty
    /// for a while and the frames waiting in it reached the standing limit.
    pub shed_standing: u64,
    /// SYNs answered by the program with a SYN cookie (see
    /// [`xsk_io::syncookies`]).
    pub cookies: u64,
}

impl SteerCounters {
    /// Every frame the program saw.
    pub fn total(&self) -> u64 {
        self.steered
            + self.passed
            + self.no_socket
            + self.deferred
            + self.shed_rx
            + self.shed_fill
            + self.shed_standing
            + self.cookies
    }

    /// `self - earlier`, per field (saturating).
    pub fn delta(&self, earlier: &SteerCounters) -> SteerCounters {
        SteerCounters {
            steered: self.steered.saturating_sub(earlier.steered),
            passed: self.passed.saturating_sub(earlier.passed),
            no_socket: self.no_socket.saturating_sub(earlier.no_socket),
            deferred: self.deferred.saturating_sub(earlier.deferred),
            shed_rx: self.shed_rx.saturating_sub(earlier.shed_rx),
            shed_fill: self.shed_fill.saturating_sub(earlier.shed_fill),
            shed_standing: self.shed_standing.saturating_sub(earlier.shed_standing),
            cookies: self.cookies.saturating_sub(earlier.cookies),
        }
    }
}
