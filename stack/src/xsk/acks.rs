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

use std::time::Duration;

use xsk_io::acks::{AckRecord, AckRing};

/// What the driver needs of an ack ring: [`AckRing`], or a scripted one in
/// the tests below.
pub(super) trait Ring {
    fn pending(&self) -> bool;
    fn take(&mut self, f: impl FnMut(&AckRecord<'_>) -> bool) -> usize;
    fn steered(&self) -> u64;
    fn set_waiting(&self, on: bool);
}

impl Ring for AckRing {
    fn pending(&self) -> bool {
        AckRing::pending(self)
    }
    fn take(&mut self, f: impl FnMut(&AckRecord<'_>) -> bool) -> usize {
        AckRing::take(self, f)
    }
    fn steered(&self) -> u64 {
        AckRing::steered(self)
    }
    fn set_waiting(&self, on: bool) {
        AckRing::set_waiting(self, on)
    }
}

/// The longest sleep while ACKs wait in the ring: a keep-alive probe is
/// answered within it (the engine's 1 s sweep, when a stall or idle timeout
/// is set, wakes the stack as often anyway).
pub(super) const SLEEP_MAX: Duration = Duration::from_secs(1);

/// How long a record may wait for the frames that arrived before it: the
/// RX ring publishes a NAPI poll's frames at its end, the ring at once, so
/// they normally follow within microseconds; frames the socket dropped
/// (its RX ring full) never come, and after this the count is resynced.
/// Generous (a preempted vCPU can stall a NAPI poll for milliseconds): a
/// resync too early would count frames twice for good, and an ACK waiting
/// here delays nothing else.
const HOLD_MAX: Duration = Duration::from_millis(20);

/// Counters of deferred ACKs.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
#[non_exhaustive]
pub struct AckStats {
    /// Deferred ACKs are set up on this queue (false: turned off, or the
    /// kernel could not load their XDP program).
    pub enabled: bool,
    /// Pure ACKs taken from the ack ring (each one a wake-up saved, unless
    /// it came in with other work anyway).
    pub taken: u64,
    /// Records that, with the RX ring drained, still waited for frames that
    /// arrived before them.
    pub waited: u64,
    /// Frames the kernel or the port dropped after the program counted them
    /// (`Port::rx_lost`): added to the count so that it stays in step.
    pub lost: u64,
    /// Times a record waited `HOLD_MAX` for frames that never came and
    /// were not counted as lost either: the count was moved up to it.
    pub resynced: u64,
    /// Times the ring was turned on or off.
    pub switches: u64,
}

/// The ring and the count that orders it against the RX ring.
pub(super) struct DeferredAcks<R: Ring = AckRing> {
    ring: R,
    /// Frames taken from the RX ring since the ring was set up, plus those
    /// lost on the way (see [`account_lost`](Self::account_lost)): a record
    /// is taken right after the frame that brings this count to its
    /// sequence number.
    received: u64,
    /// Added to every record's sequence number: the frames that were in the
    /// RX ring when the ring was set up (the program had counted them
    /// already; the count above will count them again).
    offset: u64,
    /// `Port::rx_lost` when last looked at.
    lost_seen: u64,
    /// The record waiting for frames that arrived before it, and since when
    /// (`CLOCK_MONOTONIC` ns).
    held: Option<(u64, u64)>,
    /// The ring is on.
    on: bool,
    pub(super) stats: AckStats,
}

impl<R: Ring> DeferredAcks<R> {
    /// `in_rx_ring`: frames waiting in the RX ring, read after the ring was
    /// set up; `lost`: `Port::rx_lost` then.
    pub(super) fn new(ring: R, in_rx_ring: u32, lost: u64) -> DeferredAcks<R> {
        let stats = AckStats { enabled: true, ..AckStats::default() };
        // The program's count starts at the ring's set-up and ours at 0: the
        // frames that were already in the RX ring will be counted by us
        // only, those the program counted since are in both counts. Exact
        // unless frames arrive during these microseconds of set-up; they do
        // not in practice: the queue's TCP ports are steered only once the
        // application listens or connects, after this.
        let offset = u64::from(in_rx_ring).saturating_sub(ring.steered());
        DeferredAcks { received: 0, offset, lost_seen: lost, ring, held: None, on: false, stats }
    }

    /// Whether a record is waiting (one read of the ring's producer position).
    pub(super) fn pending(&self) -> bool {
        self.ring.pending()
    }

    /// `n` frames were taken from the RX ring.
    pub(super) fn received(&mut self, n: usize) {
        self.received += n as u64;
    }

    /// Gives `ingest` (frame, when it arrived in `CLOCK_MONOTONIC` ns, the
    /// program's clock) every record whose earlier frames have all been
    /// taken from the RX ring, oldest first. Called before each RX frame
    /// while records are pending, so that a record is ingested exactly
    /// between the frames it came between.
    pub(super) fn take_ready(&mut self, ingest: &mut impl FnMut(&[u8], u64)) {
        let (received, offset) = (self.received, self.offset);
        let mut last = None;
        let n = self.ring.take(|r| {
            let seq = r.seq + offset;
            if seq > received {
                return false;
            }
            ingest(r.frame, r.arrived_ns);
            last = Some(seq);
            true
        });
        self.stats.taken += n as u64;
        if let (Some((h, _)), Some(l)) = (self.held, last) {
            if l >= h {
                self.held = None; // the held record is in
            }
        }
    }

    /// With the RX ring drained: [`take_ready`](Self::take_ready); a record
    /// still waiting for earlier frames is held. True if one is held: the
    /// caller then looks for lost frames ([`account_lost`](Self::account_lost))
    /// and calls again if there were. After [`HOLD_MAX`] on the same record
    /// the count is moved up to it (frames lost without a trace).
    /// `now`: `CLOCK_MONOTONIC` ns (the hold's clock).
    pub(super) fn take_drained(&mut self, now: u64, mut ingest: impl FnMut(&[u8], u64)) -> bool {
        for _ in 0..2 {
            self.take_ready(&mut ingest);
            let offset = self.offset;
            let mut first = None;
            self.ring.take(|r| {
                first = Some(r.seq + offset);
                false
            });
            let Some(seq) = first else {
                self.held = None;
                return false;
            };
            match self.held {
                Some((s, since)) if s == seq => {
                    if Duration::from_nanos(now.saturating_sub(since)) < HOLD_MAX {
                        return true;
                    }
                    self.received = seq;
                    self.stats.resynced += 1;
                    self.held = None;
                    // and once more, with the new count
                }
                _ => {
                    self.held = Some((seq, now));
                    self.stats.waited += 1;
                    return true;
                }
            }
        }
        self.held.is_some()
    }

    /// `lost`: `Port::rx_lost` now. Frames lost since the last look are
    /// counted as received (they will never come); true if there were any.
    pub(super) fn account_lost(&mut self, lost: u64) -> bool {
        let new = lost.saturating_sub(self.lost_seen);
        self.lost_seen = lost.max(self.lost_seen);
        self.received += new;
        self.stats.lost += new;
        new > 0
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
        let cap = if self.held.is_some() && self.ring.pending() {
            HOLD_MAX
        } else if self.on || self.ring.pending() {
            SLEEP_MAX
        } else {
            return wait;
        };
        Some(wait.map_or(cap, |w| w.min(cap)))
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::collections::VecDeque;

    use super::*;

    /// Records as (seq, arrival ns, frame byte).
    #[derive(Default)]
    struct Script {
        records: VecDeque<(u64, u64, u8)>,
        waiting: Cell<bool>,
    }

    impl Ring for Script {
        fn pending(&self) -> bool {
            !self.records.is_empty()
        }
        fn take(&mut self, mut f: impl FnMut(&AckRecord<'_>) -> bool) -> usize {
            let mut n = 0;
            while let Some(&(seq, arrived_ns, b)) = self.records.front() {
                let frame = [b];
                if !f(&AckRecord { seq, arrived_ns, frame: &frame }) {
                    break;
                }
                self.records.pop_front();
                n += 1;
            }
            n
        }
        fn steered(&self) -> u64 {
            0
        }
        fn set_waiting(&self, on: bool) {
            self.waiting.set(on);
        }
    }

    fn acks(records: &[(u64, u8)]) -> DeferredAcks<Script> {
        let now = xsk_io::sys::monotonic_ns();
        DeferredAcks::new(Script { records: records.iter().map(|&(s, b)| (s, now, b)).collect(), ..Script::default() }, 0, 0)
    }

    /// The driver's ingest: RX frames (given as bytes) with records taken
    /// before each while any are pending, then the drained take if any are
    /// still pending; returns the order seen.
    fn run(a: &mut DeferredAcks<Script>, rx: &[u8], now: u64) -> Vec<u8> {
        let mut seen = Vec::new();
        let pending = a.pending();
        for &f in rx {
            if pending {
                a.take_ready(&mut |fr, _| seen.push(fr[0]));
            }
            seen.push(f);
            a.received(1);
        }
        if a.pending() {
            a.take_drained(now, |fr, _| seen.push(fr[0]));
        }
        seen
    }

    fn mono() -> u64 {
        xsk_io::sys::monotonic_ns()
    }

    /// `d` in nanoseconds.
    fn ns(d: Duration) -> u64 {
        d.as_nanos() as u64
    }

    #[test]
    fn records_go_between_the_frames_they_came_between() {
        // ACK 100 came after frame 1, ACK 101 after frame 3, ACK 102 after frame 4.
        let mut a = acks(&[(1, 100), (3, 101), (4, 102)]);
        assert_eq!(run(&mut a, &[1, 2, 3, 4], mono()), [1, 100, 2, 3, 101, 4, 102]);
        assert_eq!(a.stats.taken, 3);
    }

    #[test]
    fn a_record_waits_for_its_frames_then_for_at_most_hold_max() {
        let t0 = mono();
        let mut a = acks(&[(2, 100)]);
        // Only one of the two frames before it has come: it waits.
        assert_eq!(run(&mut a, &[1], t0), [1]);
        assert_eq!(a.stats.waited, 1);
        assert_eq!(a.bound_sleep(None), Some(HOLD_MAX));
        // The second frame comes: taken right after it.
        assert_eq!(run(&mut a, &[2], t0 + ns(Duration::from_micros(50))), [2, 100]);
        assert!(a.held.is_none());
        // A record whose frames never come (the socket dropped them): held
        // for HOLD_MAX, then the count moves on and it is taken.
        a.ring.records.push_back((5, xsk_io::sys::monotonic_ns(), 101));
        assert_eq!(run(&mut a, &[], t0), Vec::<u8>::new());
        assert_eq!(run(&mut a, &[], t0 + ns(HOLD_MAX / 2)), Vec::<u8>::new());
        assert_eq!(run(&mut a, &[], t0 + ns(HOLD_MAX)), [101]);
        assert_eq!(a.stats.resynced, 1);
        assert_eq!(a.received, 5);
    }

    #[test]
    fn each_held_record_gets_its_own_wait() {
        // Records that each wait a little, one after the other, must not
        // inherit the first one's clock (a resync then would count frames
        // that are still coming).
        let t0 = mono();
        let mut a = acks(&[(1, 100), (3, 101)]);
        assert_eq!(run(&mut a, &[], t0), Vec::<u8>::new());
        assert_eq!(run(&mut a, &[1], t0 + ns(HOLD_MAX - Duration::from_millis(1))), [1, 100]);
        // Record 101 is now the one held, from this moment.
        assert_eq!(run(&mut a, &[2], t0 + ns(HOLD_MAX + Duration::from_millis(1))), [2]);
        assert_eq!(a.stats.resynced, 0);
        assert_eq!(run(&mut a, &[3], t0 + ns(HOLD_MAX + Duration::from_millis(2))), [3, 101]);
        assert_eq!(a.received, 3);
    }

    #[test]
    fn a_held_record_taken_between_frames_stops_bounding_sleeps() {
        let t0 = mono();
        let mut a = acks(&[(1, 100)]);
        assert_eq!(run(&mut a, &[], t0), Vec::<u8>::new());
        assert_eq!(a.bound_sleep(None), Some(HOLD_MAX));
        // Its frame and a newer one come in one batch: it is taken between
        // them, by the per-frame take, and the ring is empty.
        assert_eq!(run(&mut a, &[1, 2], t0), [1, 100, 2]);
        assert!(a.held.is_none());
        assert_eq!(a.bound_sleep(None), None);
    }

    #[test]
    fn frames_in_the_rx_ring_at_setup_and_lost_frames_keep_the_count_in_step() {
        let now = xsk_io::sys::monotonic_ns();
        // Two frames were in the RX ring when the ring was set up; the ACK
        // came after one more.
        let mut a = DeferredAcks::new(Script { records: [(1, now, 100u8)].into_iter().collect(), ..Script::default() }, 2, 5);
        assert_eq!(run(&mut a, &[1, 2], mono()), [1, 2]);
        assert_eq!(run(&mut a, &[3], mono()), [3, 100]);
        // An ACK after two frames the kernel dropped (its loss count 5 -> 7).
        a.ring.records.push_back((4, now, 101));
        assert_eq!(run(&mut a, &[4], mono()), [4]);
        assert!(!a.account_lost(5), "nothing new lost");
        assert!(a.account_lost(7));
        let mut seen = Vec::new();
        assert!(!a.take_drained(mono(), |fr, _| seen.push(fr[0])));
        assert_eq!(seen, [101]);
        assert_eq!((a.stats.lost, a.stats.resynced), (2, 0));
    }

    #[test]
    fn records_are_dated_when_they_arrived() {
        let now = xsk_io::sys::monotonic_ns();
        let mut a = DeferredAcks::new(
            Script { records: [(0, now - 300_000_000, 100u8)].into_iter().collect(), ..Script::default() },
            0,
            0,
        );
        let wall = mono();
        let mut at = None;
        a.take_drained(wall, |_, t| at = Some(t));
        let age = Duration::from_nanos(wall - at.expect("taken"));
        assert!(age >= Duration::from_millis(299) && age < Duration::from_millis(400), "{age:?}");
    }

    #[test]
    fn the_ring_is_switched_and_bounds_sleeps() {
        let mut a = acks(&[]);
        assert_eq!(a.bound_sleep(None), None);
        a.allow(true);
        assert!(a.ring.waiting.get());
        assert_eq!(a.bound_sleep(None), Some(SLEEP_MAX));
        assert_eq!(a.bound_sleep(Some(Duration::from_millis(5))), Some(Duration::from_millis(5)));
        a.allow(true);
        a.allow(false);
        assert!(!a.ring.waiting.get());
        assert_eq!(a.stats.switches, 2);
        // Records left in the ring still bound the sleep.
        a.ring.records.push_back((0, 0, 1));
        assert_eq!(a.bound_sleep(None), Some(SLEEP_MAX));
    }
}
