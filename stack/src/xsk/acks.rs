//! Deferred ACKs, the driver's side: the queue's ack ring (`xsk_io::acks`)
//! taken in order with the RX ring, and switched on while no socket wants
//! its ACKs promptly (`Engine::acks_can_wait`).
//!
//! A request/response client with delayed ACKs (Linux, by default) answers
//! each response, 40 ms later when it has nothing to send, with a pure ACK.
//! Kernel TCP takes it in softirq; the stack would be woken for it, doubling
//! its wake-ups at light load (on a veth the client ACKs at once, inside our
//! own `sendto`, which costs a pass instead). With the ring, such ACKs wait
//! for the next time the stack is awake: a request, a timer, or at the latest
//! [`SLEEP_MAX`] (keep-alive probes and window updates are pure ACKs too and
//! must be answered eventually).

use std::time::{Duration, Instant};

use xsk_io::acks::AckRing;

/// The longest sleep while ACKs wait in the ring: a keep-alive probe is
/// answered within it (the engine's 1 s sweep, when a stall or idle timeout
/// is set, wakes the stack as often anyway).
pub(super) const SLEEP_MAX: Duration = Duration::from_secs(1);

/// How long a record may wait for the frames that arrived before it: the
/// RX ring publishes a NAPI poll's frames at its end, the ring at once, so
/// they normally follow within microseconds; frames the socket dropped
/// (its RX ring full) never come, and after this the count is resynced.
const HOLD_MAX: Duration = Duration::from_millis(1);

/// Counters of deferred ACKs.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct AckStats {
    /// Pure ACKs taken from the ack ring (each one a wake-up saved, unless
    /// it came in with other work anyway).
    pub taken: u64,
    /// Times a record waited for frames that arrived before it.
    pub waited: u64,
    /// Times those frames did not come (dropped by the socket) and the
    /// count was resynced.
    pub resynced: u64,
    /// Times the ring was turned on or off.
    pub switches: u64,
}

/// The ring and the count that orders it against the RX ring.
pub(super) struct DeferredAcks {
    ring: AckRing,
    /// Frames taken from the RX ring since the ring was set up (plus those
    /// the socket dropped, once resynced): a record is taken when this
    /// reaches its sequence number.
    received: u64,
    held_since: Option<Instant>,
    /// The ring is on.
    on: bool,
    pub(super) stats: AckStats,
}

impl DeferredAcks {
    pub(super) fn new(ring: AckRing) -> DeferredAcks {
        DeferredAcks { received: ring.steered(), ring, held_since: None, on: false, stats: AckStats::default() }
    }

    /// `n` frames were taken from the RX ring.
    pub(super) fn received(&mut self, n: usize) {
        self.received += n as u64;
    }

    /// Gives `ingest` every record whose earlier frames have been taken
    /// from the RX ring; call after the RX ring was drained.
    pub(super) fn take(&mut self, wall: Instant, mut ingest: impl FnMut(&[u8])) {
        for _ in 0..2 {
            if !self.ring.pending() {
                self.held_since = None;
                return;
            }
            let received = self.received;
            let mut blocked = None;
            let n = self.ring.take(|seq, frame| {
                if seq > received {
                    blocked = Some(seq);
                    return false;
                }
                ingest(frame);
                true
            });
            self.stats.taken += n as u64;
            let Some(seq) = blocked else {
                self.held_since = None;
                return;
            };
            match self.held_since {
                None => {
                    self.held_since = Some(wall);
                    self.stats.waited += 1;
                    return;
                }
                Some(t) if wall.saturating_duration_since(t) >= HOLD_MAX => {
                    self.received = seq;
                    self.stats.resynced += 1;
                    self.held_since = None;
                    // and once more, with the new count
                }
                Some(_) => return,
            }
        }
    }

    /// Turns the ring on or off: on while no socket wants its ACKs
    /// promptly (`Engine::acks_can_wait`, after each egress). On also while
    /// the driver is awake: a client's immediate ACK, produced inside our
    /// own `sendto` on a veth (the peer's softirq runs in our context), then
    /// costs no extra pass; the sequence numbers keep the order.
    pub(super) fn allow(&mut self, on: bool) {
        if on != self.on {
            self.on = on;
            self.ring.set_waiting(on);
            self.stats.switches += 1;
        }
    }

    /// Bounds a sleep: to a held record's wait, or to [`SLEEP_MAX`] while
    /// ACKs may be waiting in the ring.
    pub(super) fn bound_sleep(&self, wait: Option<Duration>) -> Option<Duration> {
        let cap = if self.held_since.is_some() {
            HOLD_MAX
        } else if self.on || self.ring.pending() {
            SLEEP_MAX
        } else {
            return wait;
        };
        Some(wait.map_or(cap, |w| w.min(cap)))
    }
}
