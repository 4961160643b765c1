//! SYN shedding: the port's side of the steering program's overload policy
//! (see the comment at the top of `xsk-io/device/src/bpf/steer.bpf.c`).
//!
//! When the stack falls behind, received frames wait in the RX ring and the
//! fill ring empties; once either is exhausted the kernel drops whatever
//! comes next, the ACKs and requests of open connections as much as the
//! SYNs of a flood, and everything that gets in waits behind the whole ring.
//! With shedding on, the port tells the program after every receive batch
//! how many more frames may arrive, and the program drops pure SYNs beyond
//! that budget, counted by reason (the program's counters `shed_rx`,
//! `shed_fill`, `shed_standing`). The budget is the smallest of:
//!
//! - the free RX ring slots, less `keep` places for open connections' frames;
//! - the frames in the fill ring, less `keep`;
//! - once the RX ring has not been empty after a receive batch for
//!   `behind_after` (a standing queue: the stack is behind, not absorbing a
//!   burst), `standing` less the frames already waiting: the queue a frame of
//!   an open connection waits behind stays short.
//!
//! A burst the stack drains within `behind_after` is taken whole (up to the
//! ring reserve); a flood it cannot drain is cut to what it can take. The
//! signal is exact to the frame when the port writes it and conservative in
//! between: the program counts every frame it redirects against the budget,
//! also those the kernel then drops.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::acks::{QueueState, SLOT_BYTES, SLOT_SHED, SLOT_SHED_ON, SLOT_STEERED};
use crate::mmap::AtomicMap;

/// The budget field is 30 bits (bits 32-61 of the `shed` word).
const BUDGET_MAX: u32 = 0x3fff_ffff;

/// Why a SYN beyond the budget is shed (the program counts it under this);
/// the values are the program's `reason` (bits 62-63).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// Only the reserve of free RX ring slots is left.
    Rx = 0,
    /// Only the reserve of frames in the fill ring is left.
    Fill = 1,
    /// A standing queue reached its limit.
    Standing = 2,
}

/// What bounds the frames that may still arrive, and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    /// Frames that may still arrive before SYNs are shed.
    pub frames: u32,
    /// What set it.
    pub reason: Reason,
}

/// The ring budget for a queue whose RX ring has `rx_size` slots of which
/// `rx_queued` hold frames not yet taken, whose fill ring holds
/// `fill_level` frames the kernel has not yet consumed, keeping `keep`
/// places for the frames of open connections.
pub fn budget(rx_size: u32, rx_queued: u32, fill_level: u32, keep: u32) -> Budget {
    let rx_room = rx_size.saturating_sub(rx_queued);
    let reason = if fill_level < rx_room { Reason::Fill } else { Reason::Rx };
    let room = rx_room.min(fill_level);
    Budget { frames: room.saturating_sub(keep).min(BUDGET_MAX), reason }
}

/// As [`budget`], and while `behind` (a standing queue) at most `standing`
/// frames waiting.
pub fn budget_behind(rx_size: u32, rx_queued: u32, fill_level: u32, keep: u32, behind: bool, standing: u32) -> Budget {
    let b = budget(rx_size, rx_queued, fill_level, keep);
    let s = standing.saturating_sub(rx_queued);
    if behind && s < b.frames {
        Budget { frames: s, reason: Reason::Standing }
    } else {
        b
    }
}

/// The `keep` a port uses when asked for the default: an eighth of the RX
/// ring, at least 64 frames (a few receive batches of open connections'
/// frames).
pub fn default_keep(rx_size: u32) -> u32 {
    (rx_size / 8).max(64)
}

/// Frames a standing queue may hold before SYNs are shed: four receive
/// batches of 64.
pub const STANDING: u32 = 256;

/// How long the RX ring must stay non-empty after every receive batch before
/// the queue counts as standing: longer than the stack takes to drain a
/// ring-sized burst of SYNs it can take.
pub const BEHIND_AFTER: Duration = Duration::from_millis(50);

/// One queue's shedding words in the program's per-queue slot; shedding is
/// on from [`ShedSlot::new`] until the value is dropped.
#[derive(Debug)]
pub struct ShedSlot {
    state: Arc<AtomicMap>,
    slot: usize,
    /// Places kept for the frames of open connections.
    pub keep: u32,
    /// Frames a standing queue may hold.
    pub standing: u32,
    /// How long a queue must not empty to be standing.
    pub behind_after: Duration,
    watch: QueueWatch,
}

/// Whether the RX ring holds a standing queue: it has not been empty after
/// any receive batch for `behind_after`.
#[derive(Clone, Copy, Debug)]
pub struct QueueWatch {
    /// When a receive batch last left the RX ring empty.
    last_empty: Instant,
}

impl QueueWatch {
    /// A queue empty at `now`.
    pub fn new(now: Instant) -> QueueWatch {
        QueueWatch { last_empty: now }
    }

    /// After a receive batch at `now` that left `rx_queued` frames waiting:
    /// whether the queue has been standing for `behind_after`.
    #[inline]
    pub fn behind(&mut self, now: Instant, rx_queued: u32, behind_after: Duration) -> bool {
        if rx_queued == 0 {
            self.last_empty = now;
        }
        now.saturating_duration_since(self.last_empty) >= behind_after
    }
}

impl ShedSlot {
    /// Turns shedding on for `queue` in the program's slots `state`,
    /// keeping `keep` places for open connections.
    pub fn new(state: &QueueState, queue: u32, keep: u32) -> ShedSlot {
        let state = state.memory();
        let slot = queue as usize * SLOT_BYTES;
        // A budget as large as it gets until the first batch says otherwise.
        let steered = state.u64(slot + SLOT_STEERED).load(Ordering::Acquire);
        state.u64(slot + SLOT_SHED).store(encode(steered, Budget { frames: BUDGET_MAX, reason: Reason::Rx }), Ordering::Release);
        state.u32(slot + SLOT_SHED_ON).store(1, Ordering::SeqCst);
        ShedSlot { state, slot, keep, standing: STANDING, behind_after: BEHIND_AFTER, watch: QueueWatch::new(Instant::now()) }
    }

    /// The budget after a receive batch at `now` that left `rx_queued` of
    /// `rx_size` RX slots full and `fill_level` frames in the fill ring.
    #[inline]
    pub fn budget(&mut self, now: Instant, rx_size: u32, rx_queued: u32, fill_level: u32) -> Budget {
        let behind = self.watch.behind(now, rx_queued, self.behind_after);
        budget_behind(rx_size, rx_queued, fill_level, self.keep, behind, self.standing)
    }

    /// Frames the program has redirected into the queue's socket (counted
    /// since the program was loaded, while shedding or deferred ACKs are on).
    #[inline]
    pub fn steered(&self) -> u64 {
        self.state.u64(self.slot + SLOT_STEERED).load(Ordering::Acquire)
    }

    /// Tells the program the budget from now on: `steered` is the count read
    /// (with [`steered`](Self::steered)) before the rings were looked at.
    #[inline]
    pub fn publish(&self, steered: u64, b: Budget) {
        self.state.u64(self.slot + SLOT_SHED).store(encode(steered, b), Ordering::Release);
    }
}

fn encode(steered: u64, b: Budget) -> u64 {
    (steered & 0xffff_ffff) | (u64::from(b.frames.min(BUDGET_MAX)) << 32) | ((b.reason as u64) << 62)
}

impl Drop for ShedSlot {
    fn drop(&mut self) {
        self.state.u32(self.slot + SLOT_SHED_ON).store(0, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_is_the_tighter_ring_minus_the_reserve() {
        // An idle queue: RX ring empty, fill ring full (twice the RX ring).
        assert_eq!(budget(4096, 0, 8192, 512), Budget { frames: 3584, reason: Reason::Rx });
        // Behind: 4000 frames wait, only 96 slots left, fewer than the reserve.
        assert_eq!(budget(4096, 4000, 8192, 512), Budget { frames: 0, reason: Reason::Rx });
        // The fill ring ran low (frames held elsewhere): it sets the budget.
        assert_eq!(budget(4096, 100, 600, 512), Budget { frames: 88, reason: Reason::Fill });
        assert_eq!(budget(4096, 0, 0, 512), Budget { frames: 0, reason: Reason::Fill });
        // More queued than the ring holds (a stale read) saturates.
        assert_eq!(budget(4096, 5000, 8192, 0).frames, 0);
        assert_eq!(default_keep(4096), 512);
        assert_eq!(default_keep(256), 64);
    }

    #[test]
    fn a_standing_queue_is_cut_to_its_limit_and_a_burst_is_not() {
        // Not behind: the ring budget, however many wait.
        assert_eq!(budget_behind(4096, 1000, 8192, 512, false, 256), Budget { frames: 2584, reason: Reason::Rx });
        // Behind: at most 256 waiting.
        assert_eq!(budget_behind(4096, 100, 8192, 512, true, 256), Budget { frames: 156, reason: Reason::Standing });
        assert_eq!(budget_behind(4096, 1000, 8192, 512, true, 256), Budget { frames: 0, reason: Reason::Standing });
        // The ring budget still wins when it is tighter.
        assert_eq!(budget_behind(4096, 10, 100, 64, true, 256), Budget { frames: 36, reason: Reason::Fill });
    }

    fn slot_free_budget(s: &mut QueueWatch, now: Instant, queued: u32) -> Budget {
        let behind = s.behind(now, queued, BEHIND_AFTER);
        budget_behind(4096, queued, 8192, 512, behind, STANDING)
    }

    #[test]
    fn the_queue_counts_as_standing_only_after_it_has_not_emptied_for_a_while() {
        let t0 = Instant::now();
        let mut s = QueueWatch::new(t0);
        assert_eq!(slot_free_budget(&mut s, t0, 0).frames, 3584);
        // A burst being drained: 3000 waiting for 40 ms is still a burst.
        assert_eq!(slot_free_budget(&mut s, t0 + Duration::from_millis(40), 3000).reason, Reason::Rx);
        // Not empty for 50 ms: standing, cut to 256.
        assert_eq!(slot_free_budget(&mut s, t0 + Duration::from_millis(50), 3000), Budget { frames: 0, reason: Reason::Standing });
        // Emptied once: a burst again.
        assert_eq!(slot_free_budget(&mut s, t0 + Duration::from_millis(60), 0).reason, Reason::Rx);
        assert_eq!(slot_free_budget(&mut s, t0 + Duration::from_millis(70), 2000).reason, Reason::Rx);
    }

    /// The program's test, in Rust: shed when `(u32)steered - (u32)base >= budget`.
    fn program_sheds(word: u64, steered_now: u64) -> Option<u64> {
        let hi = (word >> 32) as u32;
        ((steered_now as u32).wrapping_sub(word as u32) >= hi & BUDGET_MAX).then_some(u64::from(hi >> 30))
    }

    #[test]
    fn encoding_matches_the_program_and_wraps() {
        let b = Budget { frames: 100, reason: Reason::Fill };
        for base in [0u64, 5, u64::from(u32::MAX) - 10, 1 << 40] {
            let w = encode(base, b);
            assert_eq!(program_sheds(w, base), None);
            assert_eq!(program_sheds(w, base + 99), None);
            assert_eq!(program_sheds(w, base + 100), Some(Reason::Fill as u64), "base {base}");
            assert_eq!(program_sheds(w, base + 1000), Some(1), "base {base}");
        }
        let w = encode(7, Budget { frames: 0, reason: Reason::Standing });
        assert_eq!(program_sheds(w, 7), Some(2), "a zero budget sheds the next SYN");
        assert_eq!(program_sheds(encode(7, Budget { frames: 0, reason: Reason::Rx }), 7), Some(0));
        assert_eq!(program_sheds(encode(0, Budget { frames: u32::MAX, reason: Reason::Rx }), 1 << 29), None);
    }
}
