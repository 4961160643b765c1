//! Loss recovery settings: the retransmission timer's bounds and the
//! tail-loss probe, set on every socket the engine creates (smoltcp's
//! defaults, RFC 6298's 1 s floor and no probe, make every lost one-segment
//! response cost a second).

use std::time::Duration;

/// How the stack recovers lost segments. [`Recovery::default`] is tuned for
/// request/response traffic at microsecond round-trip times; see the field
/// docs for what each default protects against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Recovery {
    /// The retransmission timeout's floor. The probe (below) recovers a
    /// lost tail long before this; the timeout is the backstop when the
    /// probe or its answer is lost too. 50 ms stays above Linux's 40 ms
    /// delayed ACK (its floor at small RTTs), so a peer that merely delays
    /// its ACK does not draw a timeout that backs off the timer and resets
    /// the congestion window. Linux: 200 ms; smoltcp: 1 s.
    pub rto_min: Duration,
    /// The retransmission timeout's ceiling (RFC 6298: at least 60 s).
    pub rto_max: Duration,
    /// The timeout before the first RTT sample: a lost SYN-ACK, SYN or
    /// first segment. Linux and RFC 6298: 1 s; a kernel client retransmits
    /// its own SYN after 1 s anyway.
    pub rto_initial: Duration,
    /// Send a tail-loss probe (RFC 8985 section 7): when the last segment
    /// of a flight is unacknowledged for PTO = 2 SRTT + an allowance, send
    /// it again once, without backing off the timer or counting a
    /// congestion loss.
    pub tail_probe: bool,
    /// The allowance added to 2 SRTT when at most one segment is in flight,
    /// which a peer may hold its ACK of (delayed ACK). 50 ms covers Linux's
    /// delayed ACK at small RTTs (40 ms, a little more with timer slack), so
    /// a kernel client with nothing to send draws no probe; a connection
    /// whose probes the peer shows were spurious three times in a row (a
    /// D-SACK, or an ACK too early to answer one) moves to
    /// [`ack_delay_max`](Self::ack_delay_max),
    /// and the engine remembers the peer for its next connections. The
    /// engine also pools the verdicts on all of a peer's probes: when fewer
    /// than one in ten was needed, every live and new connection to the peer
    /// moves to the peer's wait, with a timeout of at least SRTT + that wait.
    /// The wait starts at `ack_delay_max`; a late probe raises it to how late
    /// the probe's answer came beyond SRTT, plus an eighth, up to five times
    /// that (1 s by default), and it falls back with time (see the engine's
    /// `peer_memory`). Peers
    /// that ACK at once (the stack's own client) are served better by a
    /// few milliseconds: a lost response then costs that, not 50 ms. The
    /// probe never fires later than the RTO would.
    pub ack_delay: Duration,
    /// The allowance for a peer known to delay its ACKs (RFC 8985's
    /// WCDelAckT; Linux's probe adds 200 ms too). Linux delays at most
    /// 40 ms at small RTTs, Windows 200 ms. A peer whose pooled verdicts
    /// show it holds its ACKs starts here and may be given up to five times
    /// this (an overloaded client's ACKs can come later than any delayed-ACK
    /// timer).
    pub ack_delay_max: Duration,
    /// Offer TCP timestamps (RFC 7323) with a microsecond clock. Every ACK of
    /// new data that echoes one is an RTT sample, a retransmitted segment's
    /// too (Karn's rule takes none of those), and an ACK that echoes the
    /// original of a retransmission shows that it was late, not lost (Eifel,
    /// RFC 3522): the retransmission counts as spurious and its congestion
    /// response and timer backoff are undone. With it, the connections to a
    /// peer also pool their RTT samples, and each starts from the pool when
    /// its own estimate is lower (see the engine's `peer_memory`): a new
    /// connection to a client that answers late does not retransmit into its
    /// first answers; and, for a peer known to hold its ACKs, the timeout after
    /// a tail-loss probe waits at least
    /// `ack_delay_max` ([`rto_after_probe`](Self::rto_after_probe)). Costs 12
    /// bytes a segment; segments whose only option is the timestamp still take
    /// the engine's fast path in and the fast send out. Timestamps only with
    /// peers that offer them too (Linux does by default).
    pub timestamps: bool,
    /// Fast recovery that repairs every loss in a window: a SACK scoreboard of
    /// what the peer reports holding, each hole sent again once (RFC 6675), the
    /// segment after a partial ACK (RFC 6582, also for peers without SACK), and
    /// the hole a tail-loss probe's answer reveals. smoltcp alone resends only
    /// the first loss and leaves a second to the timeout: with 64 KiB answers
    /// at 1% loss each way about one answer in twelve waited for one
    /// (docs/2026-12-06-sack-recovery).
    pub sack: bool,
    /// Tell a spurious timeout from a needed one without timestamps (F-RTO,
    /// RFC 5682): after a timeout of a flight of more than one segment, once
    /// the first ACK shows the segment resent arrived, two new segments go
    /// instead of the rest of the flight; if the next ACK acknowledges more,
    /// the flight had arrived and its ACKs were late (a peer or a VM host that
    /// stalled): the congestion response and the timer's backoff are undone
    /// and the flight is not sent again. Needs new data to send; otherwise,
    /// and for one segment in flight (where a D-SACK tells), the timeout's
    /// recovery is as without it.
    pub frto: bool,
}

impl Default for Recovery {
    fn default() -> Recovery {
        Recovery {
            rto_min: Duration::from_millis(50),
            rto_max: Duration::from_secs(60),
            rto_initial: Duration::from_millis(1000),
            tail_probe: true,
            ack_delay: Duration::from_millis(50),
            ack_delay_max: Duration::from_millis(200),
            timestamps: false,
            sack: true,
            frto: true,
        }
    }
}

impl Recovery {
    /// With the retransmission timeout's floor at `d`.
    pub fn with_rto_min(mut self, d: Duration) -> Recovery {
        self.rto_min = d;
        self
    }

    /// With the retransmission timeout's ceiling at `d`.
    pub fn with_rto_max(mut self, d: Duration) -> Recovery {
        self.rto_max = d;
        self
    }

    /// With the timeout before the first RTT sample at `d`.
    pub fn with_rto_initial(mut self, d: Duration) -> Recovery {
        self.rto_initial = d;
        self
    }

    /// With the tail-loss probe on or off.
    pub fn with_tail_probe(mut self, on: bool) -> Recovery {
        self.tail_probe = on;
        self
    }

    /// With the probe's allowance for a peer's delayed ACK at `d`.
    pub fn with_ack_delay(mut self, d: Duration) -> Recovery {
        self.ack_delay = d;
        self
    }

    /// With the allowance for a peer known to delay its ACKs at `d`.
    pub fn with_ack_delay_max(mut self, d: Duration) -> Recovery {
        self.ack_delay_max = d;
        self
    }

    /// With microsecond TCP timestamps offered or not.
    pub fn with_timestamps(mut self, on: bool) -> Recovery {
        self.timestamps = on;
        self
    }

    /// With the SACK recovery on or off.
    pub fn with_sack(mut self, on: bool) -> Recovery {
        self.sack = on;
        self
    }

    /// With F-RTO on or off.
    pub fn with_frto(mut self, on: bool) -> Recovery {
        self.frto = on;
        self
    }

    /// smoltcp 0.14's own behaviour: RTO in [1 s, 60 s], starting at 1 s,
    /// no probe, one fast retransmit per window, no F-RTO (for comparisons).
    pub fn smoltcp() -> Recovery {
        Recovery {
            rto_min: Duration::from_secs(1),
            rto_max: Duration::from_secs(60),
            rto_initial: Duration::from_secs(1),
            tail_probe: false,
            ack_delay: Duration::from_millis(200),
            ack_delay_max: Duration::from_millis(200),
            timestamps: false,
            sack: false,
            frto: false,
        }
    }

    /// Checks the bounds are ordered and nonzero.
    pub fn validate(&self) -> Result<(), String> {
        if self.rto_min.is_zero() {
            return Err("the minimum RTO must be above zero".into());
        }
        if self.rto_min > self.rto_max {
            return Err(format!("minimum RTO {:?} above the maximum {:?}", self.rto_min, self.rto_max));
        }
        if self.rto_initial < self.rto_min || self.rto_initial > self.rto_max {
            return Err(format!(
                "initial RTO {:?} outside [{:?}, {:?}]",
                self.rto_initial, self.rto_min, self.rto_max
            ));
        }
        if self.ack_delay > self.ack_delay_max {
            return Err(format!("ACK-delay allowance {:?} above its maximum {:?}", self.ack_delay, self.ack_delay_max));
        }
        // smoltcp keeps times in u32 microseconds.
        if self.rto_max > Duration::from_secs(3600) {
            return Err("the maximum RTO must be at most an hour".into());
        }
        Ok(())
    }
}

impl Recovery {
    /// smoltcp's retransmission timeout settings.
    pub fn rto_config(&self) -> smoltcp::socket::tcp::RtoConfig {
        smoltcp::socket::tcp::RtoConfig {
            min: self.rto_min.into(),
            max: self.rto_max.into(),
            initial: self.rto_initial.into(),
        }
    }

    /// The least retransmission timeout after a tail-loss probe to a peer known
    /// to hold its ACKs: with timestamps, `ack_delay_max` (the probe recovers a
    /// lone loss; the timeout after it is for a lost probe or for a peer whose
    /// ACKs come later than the RTO, which would otherwise draw a second
    /// retransmission per answer); without, none (RFC 8985: the RTO). A peer
    /// that ACKs at once gets the RTO either way (smoltcp applies the floor
    /// only once the probe's allowance is raised).
    pub fn rto_after_probe(&self) -> Duration {
        if self.timestamps && self.tail_probe {
            self.ack_delay_max
        } else {
            Duration::ZERO
        }
    }

    /// smoltcp's tail-loss probe settings (`None`: off).
    pub fn tail_loss_probe(&self) -> Option<smoltcp::socket::tcp::TailLossProbe> {
        self.tail_probe.then(|| smoltcp::socket::tcp::TailLossProbe {
            ack_delay: self.ack_delay.into(),
            ack_delay_max: self.ack_delay_max.into(),
        })
    }
}

/// What loss recovery did, summed over every connection the engine has had.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct RecoveryStats {
    /// Retransmission timeouts (each resends the flight from the first
    /// unacknowledged byte).
    pub rto_retransmits: u64,
    /// Fast retransmits (three duplicate ACKs).
    pub fast_retransmits: u64,
    /// Tail-loss probes sent.
    pub tail_probes: u64,
    /// Timeouts and fast retransmits the peer showed were not needed
    /// (D-SACK, or an ACK sent before the retransmission could arrive).
    pub spurious_retransmits: u64,
    /// Probes the peer showed were not needed (it had the segment).
    pub spurious_probes: u64,
    /// Retransmissions in a fast recovery after its first: the holes the peer's SACK
    /// blocks showed, or the segment after a partial ACK.
    pub hole_retransmits: u64,
    /// Timeouts F-RTO found spurious (a late flight, not a lost one), whose
    /// congestion response and timer backoff it undid; also in
    /// `spurious_retransmits`.
    pub frto_undone: u64,
    /// Segments received out of order and dropped: the reassembly buffer already tracked
    /// as many ranges as it can (32 with the engine's build of smoltcp); the peer resends.
    pub out_of_order_dropped: u64,
}

impl RecoveryStats {
    /// Adds one socket's counters.
    pub fn add(&mut self, s: smoltcp::socket::tcp::RecoveryStats) {
        self.rto_retransmits += u64::from(s.rto_retransmits);
        self.fast_retransmits += u64::from(s.fast_retransmits);
        self.tail_probes += u64::from(s.tail_probes);
        self.spurious_retransmits += u64::from(s.spurious_retransmits);
        self.spurious_probes += u64::from(s.spurious_probes);
        self.hole_retransmits += u64::from(s.hole_retransmits);
        self.frto_undone += u64::from(s.frto_undone);
        self.out_of_order_dropped += u64::from(s.out_of_order_dropped);
    }
}
