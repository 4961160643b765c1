//! SYN shedding: the port's side of the steering program's overload policy
//! (see the comment at the top of `src/bpf/steer.bpf.c`).
//!
//! When the stack falls behind, received frames wait in the RX ring and the
//! fill ring empties; once either is exhausted the kernel drops whatever
//! comes next, the ACKs and requests of open connections as much as the
//! SYNs of a flood. With shedding on, the port tells the program after every
//! receive batch how many more frames may arrive before only `keep` places
//! are left (free RX ring slots or frames in the fill ring, whichever are
//! fewer), and the program drops pure SYNs beyond that budget, counted
//! ([`crate::steer::SteerCounters::shed_rx`], `shed_fill`), so that the
//! places left go to the frames of connections already open.
//!
//! The signal is exact to the frame at the moment the port writes it and
//! conservative in between: the program counts every frame it redirects
//! against the budget, also those the kernel then drops.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::acks::{SLOT_BYTES, SLOT_SHED, SLOT_SHED_ON, SLOT_STEERED};
use crate::mmap::AtomicMap;

/// Bit 63 of the `shed` word: the fill ring, not the RX ring, set the budget.
const FILL_BIT: u64 = 1 << 63;
/// The budget field is 31 bits.
const BUDGET_MAX: u32 = 0x7fff_ffff;

/// What bounds the frames that may still arrive: the budget and which ring
/// set it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    /// Frames that may still arrive before only the reserve is left.
    pub frames: u32,
    /// The fill ring (true) or the RX ring (false) is the tighter one.
    pub fill_bound: bool,
}

/// The budget for a queue whose RX ring has `rx_size` slots of which
/// `rx_queued` hold frames not yet taken, whose fill ring holds
/// `fill_level` frames the kernel has not yet consumed, keeping `keep`
/// places for the frames of open connections.
pub fn budget(rx_size: u32, rx_queued: u32, fill_level: u32, keep: u32) -> Budget {
    let rx_room = rx_size.saturating_sub(rx_queued);
    let fill_bound = fill_level < rx_room;
    let room = rx_room.min(fill_level);
    Budget { frames: room.saturating_sub(keep).min(BUDGET_MAX), fill_bound }
}

/// The `keep` a port uses when asked for the default: an eighth of the RX
/// ring, at least 64 frames (a few receive batches of open connections'
/// frames).
pub fn default_keep(rx_size: u32) -> u32 {
    (rx_size / 8).max(64)
}

/// One queue's shedding words in the program's per-queue slot; shedding is
/// on from [`ShedSlot::new`] until the value is dropped.
#[derive(Debug)]
pub struct ShedSlot {
    state: Arc<AtomicMap>,
    slot: usize,
    /// Places kept for the frames of open connections.
    pub keep: u32,
}

impl ShedSlot {
    pub(crate) fn new(state: Arc<AtomicMap>, queue: u32, keep: u32) -> ShedSlot {
        let slot = queue as usize * SLOT_BYTES;
        // A budget as large as it gets until the first batch says otherwise.
        let steered = state.u64(slot + SLOT_STEERED).load(Ordering::Acquire);
        state.u64(slot + SLOT_SHED).store(encode(steered, Budget { frames: BUDGET_MAX, fill_bound: false }), Ordering::Release);
        state.u32(slot + SLOT_SHED_ON).store(1, Ordering::SeqCst);
        ShedSlot { state, slot, keep }
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
    (steered & 0xffff_ffff) | (u64::from(b.frames.min(BUDGET_MAX)) << 32) | if b.fill_bound { FILL_BIT } else { 0 }
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
        assert_eq!(budget(4096, 0, 8192, 512), Budget { frames: 3584, fill_bound: false });
        // Behind: 4000 frames wait, only 96 slots left, fewer than the reserve.
        assert_eq!(budget(4096, 4000, 8192, 512), Budget { frames: 0, fill_bound: false });
        // The fill ring ran low (frames held elsewhere): it sets the budget.
        assert_eq!(budget(4096, 100, 600, 512), Budget { frames: 88, fill_bound: true });
        assert_eq!(budget(4096, 0, 0, 512), Budget { frames: 0, fill_bound: true });
        // More queued than the ring holds (a stale read) saturates.
        assert_eq!(budget(4096, 5000, 8192, 0).frames, 0);
        assert_eq!(default_keep(4096), 512);
        assert_eq!(default_keep(256), 64);
    }

    /// The program's test, in Rust: shed when `(u32)steered - (u32)base >= budget`.
    fn program_sheds(word: u64, steered_now: u64) -> bool {
        let hi = (word >> 32) as u32;
        (steered_now as u32).wrapping_sub(word as u32) >= hi & BUDGET_MAX
    }

    #[test]
    fn encoding_matches_the_program_and_wraps() {
        let b = Budget { frames: 100, fill_bound: true };
        for base in [0u64, 5, u64::from(u32::MAX) - 10, 1 << 40] {
            let w = encode(base, b);
            assert_eq!(w & FILL_BIT, FILL_BIT);
            assert!(!program_sheds(w, base));
            assert!(!program_sheds(w, base + 99));
            assert!(program_sheds(w, base + 100), "base {base}");
            assert!(program_sheds(w, base + 1000), "base {base}");
        }
        let w = encode(7, Budget { frames: 0, fill_bound: false });
        assert_eq!(w & FILL_BIT, 0);
        assert!(program_sheds(w, 7), "a zero budget sheds the next SYN");
        assert!(!program_sheds(encode(0, Budget { frames: u32::MAX, fill_bound: false }), 1 << 30));
    }
}
