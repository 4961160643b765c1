//! Receiving: taking frames from the RX ring, and keeping the fill ring
//! topped up so that the kernel has frames to receive into.

use crate::umem::{Frame, Place};

use super::Port;

impl Port {
    /// Moves up to `max` received frames into `out` (which should have the
    /// capacity reserved, so no allocation happens). Returns how many.
    ///
    /// First tops up the fill ring with frames released since the last call.
    /// With nothing received it wakes the kernel's RX side if it asks for it
    /// (need_wakeup) or the kernel busy-polls (`BusyPoll::usecs` above 0): one
    /// `recvfrom`, at most.
    pub fn recv(&mut self, out: &mut Vec<Frame>, max: usize) -> usize {
        // Frames released since the last call go back to the kernel first:
        // under a burst an empty fill ring drops frames, which TCP pays for
        // with retransmissions.
        self.refill();
        let mut n = 0;
        while n < max {
            let Some(d) = self.rx.pop() else { break };
            if self.frames.transition(self.base(d.addr), Place::Fill, Place::App) {
                let len = (d.len as usize).min(self.umem.frame_size() as usize) as u32;
                out.push(self.umem.frame(d.addr, len));
                n += 1;
            } else {
                self.counters.rx_skipped += 1;
            }
        }
        self.update_shed();
        if n > 0 {
            self.rx.release();
            self.counters.rx_frames += n as u64;
            self.counters.rx_batches += 1;
        } else if self.features.busy_poll.is_some_and(|b| b.usecs > 0) || self.fill.needs_wakeup() {
            // Nothing received: drive NAPI (busy polling) or wake the fill side.
            self.counters.rx_wakeups += 1;
            let _ = self.sock.kick_rx();
        }
        n
    }

    /// Frames waiting in the RX ring (one read of its producer index).
    pub fn rx_ready(&mut self) -> u32 {
        self.rx.pending()
    }

    /// Where reading the RX ring stands, as wrapping positions: the next frame
    /// `recv` takes and the next the kernel fills (one read of its producer
    /// index). A frame at position `p` arrived before everything from `p + 1` on.
    pub fn rx_positions(&mut self) -> (u32, u32) {
        self.rx.positions()
    }

    /// Frames the program redirected to this socket that never reached the
    /// application: dropped by the kernel (no fill frame, RX ring full; one
    /// `getsockopt(XDP_STATISTICS)`) or skipped by [`recv`](Self::recv).
    /// Cumulative.
    pub fn rx_lost(&self) -> u64 {
        let k = self.sock.statistics().map(|s| s.rx_dropped + s.rx_ring_full).unwrap_or(0);
        k + self.counters.rx_skipped
    }

    /// Gives a frame back (received or allocated, not sent) to the free list;
    /// the next `recv` or `flush` hands it to the fill ring.
    ///
    /// # Panics
    /// If the frame belongs to another port's UMEM.
    #[inline]
    pub fn release(&mut self, f: Frame) {
        self.split().1.release(f)
    }

    /// Tops up the fill ring from the free list, keeping the TX reserve.
    ///
    /// Not while it lacks fewer than [`REFILL_BATCH`] frames and still holds an RX
    /// ring's worth: at light load every receive brings one frame, and topping up one
    /// (the free list, a ring write, the index store the kernel reads) per frame cost
    /// more than reading it. A burst still finds the RX ring full before the fill ring
    /// empty, as when it was always full.
    ///
    /// The test is inlined (it runs on every `recv` and `flush`, and nearly always
    /// finds nothing to do); the top-up is not.
    #[inline]
    pub(super) fn refill(&mut self) {
        let in_flight = self.fill.in_flight();
        // (An empty fill ring is never skipped: `skip_refill` needs an RX ring's worth.)
        if !skip_refill(in_flight, self.features.rings.fill, self.features.rings.rx) {
            self.top_up(in_flight);
        }
    }

    #[inline(never)]
    fn top_up(&mut self, in_flight: u32) {
        if in_flight == 0 && self.counters.rx_frames > 0 {
            self.fill_ran_empty();
        }
        let spare = crate::socket::fill_spare(self.frames.free_len() as u32, self.tx_reserve, self.frames.count(Place::Tx));
        let want = self.fill.free(spare.max(1)).min(spare);
        for _ in 0..want {
            let Some(addr) = self.frames.alloc(Place::Fill) else { break };
            let pushed = self.fill.push(addr);
            debug_assert!(pushed, "fill ring had room");
        }
        if self.fill.publish() == 0 && self.fill.in_flight() == 0 && spare == 0 {
            self.counters.fill_short += 1;
        }
    }

    /// The fill ring was found empty (the kernel took every frame): counts
    /// it, and now and then (the first time, then every 1024th) reads the
    /// kernel's count of frames dropped for it; the first time that count
    /// has risen, logs where the frames were.
    #[cold]
    fn fill_ran_empty(&mut self) {
        self.counters.fill_empty_seen += 1;
        if !self.fill_watch.armed() || !self.fill_watch.check_now() {
            return;
        }
        let Ok(st) = self.sock.statistics() else { return };
        if st.rx_fill_ring_empty_descs > self.fill_watch.seen_empty {
            self.fill_watch.seen_empty = st.rx_fill_ring_empty_descs;
            self.fill_watch.logged = true;
            let a = self.accounting();
            tracing::warn!(
                "{}:{}: the fill ring ran empty and the kernel dropped {} frame(s) so far (rx_fill_ring_empty_descs); \
                 the {} frames were: free {}, fill ring {}, RX ring {}, held by the stack {}, TX {}, completion ring {} \
                 (TX reserve {}, rings fill/rx/tx {}/{}/{}). Said once; the count is in the port's statistics",
                self.features.ifname,
                self.features.queue,
                st.rx_fill_ring_empty_descs,
                a.total,
                a.free,
                a.fill,
                a.rx_ring,
                a.app,
                a.tx,
                a.comp_ring,
                self.tx_reserve,
                self.features.rings.fill,
                self.features.rings.rx,
                self.features.rings.tx,
            );
        }
    }
}

/// Frames the fill ring may lack before [`Port`] tops it up: the receive batch.
pub(crate) const REFILL_BATCH: u32 = 64;

/// Whether a fill ring with `in_flight` of its `fill` slots given to the kernel can wait
/// for its top-up: it lacks fewer than [`REFILL_BATCH`] and holds at least an RX ring
/// (`rx` slots) of frames, so a burst fills the RX ring before it empties the fill ring.
pub(super) fn skip_refill(in_flight: u32, fill: u32, rx: u32) -> bool {
    in_flight >= rx && fill - in_flight.min(fill) < REFILL_BATCH
}
