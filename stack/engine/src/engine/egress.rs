//! The path out: events from touched buckets, egress, timers.

use std::cmp::Reverse;
use std::collections::binary_heap::PeekMut;
use std::collections::BinaryHeap;

use smoltcp::iface::PollResult;
use smoltcp::time::Instant;

use super::due::Due;
use super::link::SmolDev;
use super::{Engine, Link, SWEEP_EVERY};
use crate::conn::Event;
use smoltcp::socket::tcp;

/// A socket with at most this many bytes in its send buffer can let the
/// peer's ACKs wait: three segments of the smallest MSS (536) cannot raise
/// the three duplicate ACKs of a fast retransmit, so a lost segment is
/// recovered by the retransmission timer whether its ACKs wake the stack or
/// not, and nothing waits behind them. Typical RPC answers fit; a larger
/// answer keeps ACKs prompt so that the window opens and losses are found
/// by duplicate ACKs.
pub const ACKS_CAN_WAIT_BYTES: usize = 3 * 536;

/// How many more rounds one `egress` gives buckets whose sockets can send again at once
/// (segments, at least one each): what one TX batch holds many times over.
const AGAIN_MAX: usize = 1024;

/// Whether this socket wants the peer's pure ACKs as they arrive.
pub(super) fn wants_acks_now(s: &tcp::Socket) -> bool {
    match s.state() {
        tcp::State::Closed | tcp::State::Listen | tcp::State::TimeWait | tcp::State::FinWait2 => false,
        tcp::State::Established | tcp::State::CloseWait => s.send_queue() > ACKS_CAN_WAIT_BYTES,
        // A handshake, or our FIN, waits for an ACK.
        tcp::State::SynSent | tcp::State::SynReceived | tcp::State::FinWait1 | tcp::State::Closing | tcp::State::LastAck => true,
    }
}

impl Engine {
    /// Reports what changed in the buckets touched since the last egress
    /// (accepts, data, closes), before anything is sent, so the
    /// application's answers ride on the ACKs.
    pub fn scan_dirty(&mut self) {
        for i in 0..self.dirty.len() {
            let b = self.dirty[i] as usize;
            // (Not one `send_now` took off: see `wants_egress`.)
            if self.buckets[b].dirty {
                self.scan(b);
            }
        }
    }

    /// Whether any bucket waits for egress. Entries of buckets `send_now` took off
    /// (answered at the write, but not last on the list) are dropped here, once per
    /// flush: with nothing else listed, the flush has no egress to run.
    pub fn wants_egress(&mut self) -> bool {
        if self.dirty.iter().any(|&b| self.buckets[b as usize].dirty) {
            return true;
        }
        self.dirty.clear();
        false
    }

    /// Whether `egress` at `now` would do anything: a touched bucket, a due
    /// timer or the sweep. The driver's last pass before it sleeps usually
    /// finds none of them (the answer went out with the flush before).
    pub fn egress_due(&self, now: Instant) -> bool {
        !self.dirty.is_empty()
            || now >= self.next_sweep
            || self.timers.peek().is_some_and(|&Reverse(e)| e.at() <= now)
    }

    /// What the device's receive queue holds after the last frames it gave
    /// (`ingest`): `None` when it gave all it had (the common case), else its
    /// read and arrival positions (wrapping; a frame at position `p` arrived
    /// before the ones after it).
    ///
    /// Timer-driven retransmissions (timeouts, tail-loss probes) that come due
    /// while frames wait there wait until the frames that had arrived by then
    /// are read: an overloaded server's queue holds the ACKs its timers wait
    /// for, tens of milliseconds' worth, and without this the timers fire
    /// before reading them. The wait is bounded by the queue's length at that
    /// moment; a queue that drains releases it at once. The buckets' other
    /// deadlines due meanwhile (delayed ACKs, idle and FIN timers) wait with
    /// them; nothing that is not a timer does.
    pub fn set_receive_queue(&mut self, queue: Option<(u32, u32)>) {
        self.rx_queue = queue;
    }

    /// Whether timer-driven retransmissions wait in this egress (see
    /// `set_receive_queue`).
    fn retransmits_wait(&mut self, now: Instant) -> bool {
        let Some((read, arrived)) = self.rx_queue.filter(|(r, a)| r != a) else {
            self.retransmit_gate = None;
            return false;
        };
        match self.retransmit_gate {
            // Still short of what had arrived when the timers came due.
            Some(mark) if (read.wrapping_sub(mark) as i32) < 0 => true,
            Some(_) => {
                self.retransmit_gate = None;
                false
            }
            None if self.timers.peek().is_some_and(|&Reverse(e)| e.at() <= now) => {
                self.retransmit_gate = Some(arrived);
                self.stats.retransmit_waits += 1;
                true
            }
            None => false,
        }
    }

    /// Egress for every touched bucket and every bucket whose timer is due,
    /// plus the idle and FIN timeouts; then turns socket state into events.
    pub fn egress<L: Link>(&mut self, now: Instant, link: &mut L) {
        self.clock = now;
        if now >= self.next_sweep {
            self.next_sweep = now + SWEEP_EVERY.into();
            self.sweep(now);
        }
        let hold = self.retransmits_wait(now);
        self.iface.set_hold_retransmits(hold);
        while let Some(&Reverse(e)) = self.timers.peek() {
            let (d, b) = (e.at(), e.bucket());
            if d > now || hold {
                break;
            }
            self.timers.pop();
            let bucket = &mut self.buckets[b as usize];
            if bucket.queued != Some(d) {
                continue; // stale
            }
            bucket.queued = None;
            match bucket.deadline {
                Some(x) if x <= now => self.mark_dirty(b),
                // The deadline moved later since this entry was queued.
                Some(x) => {
                    bucket.queued = Some(x);
                    self.timers.push(Reverse(Due::new(x, b)));
                }
                None => {}
            }
        }
        let mut i = 0;
        let mut again = 0;
        while i < self.dirty.len() {
            let b = self.dirty[i] as usize;
            i += 1;
            // Taken off by `send_now` (see `wants_egress`), or listed twice (marked
            // again by a scan after its egress): nothing to do, or done at its other
            // entry.
            if self.buckets[b].dirty {
                self.egress_bucket(now, b, link, &mut again);
            }
            // scan() may have marked it dirty again; the loop picks it up.
        }
        // Every listed bucket had its flag cleared when its turn came, so
        // the flags need no pass over all buckets.
        self.dirty.clear();
        debug_assert!(self.buckets.iter().all(|b| !b.dirty));
    }

    /// One dirty bucket's egress: smoltcp's, then the scan, the reaping of finished
    /// sockets and the bucket's deadline; `again` counts the extra rounds given so far.
    pub(super) fn egress_bucket<L: Link>(&mut self, now: Instant, b: usize, link: &mut L, again: &mut usize) {
        self.buckets[b].dirty = false;
        let mut dev = SmolDev { rx: None, link: &mut *link };
        let fast_before = self.iface.fast_sends();
        let sent = self.iface.poll_egress(now, &mut dev, &mut self.buckets[b].sockets);
        self.buckets[b].fast_sent += self.iface.fast_sends() - fast_before;
        // Every socket here sent its answer by the fast path (a response,
        // the common case) or had nothing due: the bucket's `poll_at` is
        // known without asking the sockets again, and nothing a scan
        // reports changed.
        let fast = self.iface.fast_egress_poll_at();
        // One scan, after: it sees what came in (a touched bucket) and
        // what the egress changed (a FIN or an RST sent, TIME-WAIT
        // ended). Before the egress it would only repeat `scan_dirty`,
        // which ran after the ingest. Not needed when the bucket was
        // scanned since anything but the application's reads and writes
        // touched it, and its egress was fast sends and idle sockets,
        // which change no state a scan looks at.
        let scanned = fast.is_none() || self.buckets[b].unscanned;
        if scanned {
            self.scan(b);
        } else {
            self.fast_egresses += 1;
            #[cfg(debug_assertions)]
            self.check_scan_quiet(b);
        }
        // Only now: a socket that entered TIME-WAIT has sent its last ACK.
        // One taken out (here, or by a scan that ran: a refused or failed
        // half-open connection) leaves the fast egress's `poll_at` stale.
        let reaped = !self.buckets[b].closing.is_empty() && self.reap_closing(b);
        let fast_at = if reaped || scanned { None } else { fast };
        let bucket = &mut self.buckets[b];
        let wants = self.track_acks
            && bucket.sockets.iter().any(|(_, s)| match s {
                smoltcp::socket::Socket::Tcp(t) => wants_acks_now(t),
                #[allow(unreachable_patterns)]
                _ => false,
            });
        Self::set_wants_acks(bucket, &mut self.buckets_wanting_acks, wants);
        let next = match fast_at {
            Some(at) => {
                debug_assert_eq!(at, self.iface.poll_at(now, &bucket.sockets));
                at
            }
            None => self.iface.poll_at(now, &bucket.sockets),
        };
        Self::set_deadline(bucket, b, &mut self.timers, next);
        // smoltcp sends one segment per socket per egress: a socket that sent and
        // can send more now (an answer longer than a segment, or several answers
        // written in one pass) goes again in this egress, so that everything the
        // application wrote before the flush leaves with it, in full segments, in
        // one TX batch, rather than a segment per pass of the driver's loop (each
        // with a kick of its own). As smoltcp's own `poll` repeats its egress while
        // it sends; bounded per call like a TX batch.
        if sent == PollResult::SocketStateChanged && next.is_some_and(|d| d <= now) && *again < AGAIN_MAX {
            *again += 1;
            self.mark_dirty_app(b as u32);
        }
    }

    /// Bucket `b`'s deadline (its sockets' `poll_at`), queued on `timers` when it comes
    /// before the bucket's entry there (see `Bucket::queued`).
    #[inline]
    pub(super) fn set_deadline(bucket: &mut super::Bucket, b: usize, timers: &mut BinaryHeap<Reverse<Due>>, at: Option<Instant>) {
        bucket.deadline = at;
        if let Some(d) = at {
            if bucket.queued.is_none_or(|q| d < q) {
                bucket.queued = Some(d);
                timers.push(Reverse(Due::new(d, b as u32)));
            }
        }
    }

    /// A bucket's `wants_acks_now`, and `count`, the buckets with it set.
    #[inline]
    pub(super) fn set_wants_acks(bucket: &mut super::Bucket, count: &mut usize, wants: bool) {
        if wants != bucket.wants_acks_now {
            bucket.wants_acks_now = wants;
            if wants {
                *count += 1;
            } else {
                *count -= 1;
            }
        }
    }

    /// Debug builds: a scan skipped after a fast egress would have reported
    /// nothing (a scan that reports nothing changes nothing, so running it
    /// here changes no behaviour).
    #[cfg(debug_assertions)]
    fn check_scan_quiet(&mut self, b: usize) {
        let before = self.pending.len();
        self.scan(b);
        assert_eq!(self.pending.len(), before, "a scan skipped after a fast egress would report {:?}", &self.pending[before..]);
    }

    /// The latest time given to the engine.
    pub fn clock(&self) -> Instant {
        self.clock
    }

    /// Whether the peers' pure ACKs may wait until the driver is awake for
    /// something else (deferred ACKs): true when no socket has more than
    /// `ACKS_CAN_WAIT_BYTES` (three 536-byte segments) unacknowledged or unsent, or a handshake or
    /// a FIN waiting for its ACK, as of each bucket's last egress.
    pub fn acks_can_wait(&self) -> bool {
        self.track_acks && self.buckets_wanting_acks == 0
    }

    /// Keeps what [`acks_can_wait`](Self::acks_can_wait) needs up to date
    /// from now on (deferred ACKs are on; before, it answers false).
    pub fn track_acks(&mut self) {
        self.track_acks = true;
    }

    /// When `egress` must run next at the latest (a smoltcp timer or a sweep).
    pub fn poll_at(&mut self) -> Option<Instant> {
        while let Some(mut top) = self.timers.peek_mut() {
            let Reverse(e) = *top;
            let (d, b) = (e.at(), e.bucket());
            let bucket = &mut self.buckets[b as usize];
            if bucket.queued != Some(d) {
                PeekMut::pop(top); // stale
                continue;
            }
            // The earliest entry is live, but its bucket's deadline may have moved
            // later since it was queued (each response pushes the retransmission
            // timer on): queue the real deadline now, once before a sleep, rather
            // than wake for nothing at the old one. With timers tens of
            // milliseconds out (the tail-loss probe), every busy bucket would
            // otherwise wake the driver that often. The entry is moved in place
            // (one sift down) rather than popped and pushed again: this runs
            // about once per request.
            match bucket.deadline {
                Some(x) if x > d => {
                    bucket.queued = Some(x);
                    *top = Reverse(Due::new(x, b));
                }
                Some(_) => break,
                None => {
                    PeekMut::pop(top);
                    bucket.queued = None;
                }
            }
        }
        let timer = self.timers.peek().map(|&Reverse(e)| e.at());
        let sweep = self.needs_sweep().then_some(self.next_sweep);
        match (timer, sweep) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Moves the events gathered so far into `out`; true if there were any.
    pub fn take_events(&mut self, out: &mut Vec<Event>) -> bool {
        if self.pending.is_empty() {
            return false;
        }
        out.append(&mut self.pending);
        true
    }

    /// Aborts every connection (RST to each peer) and sends the RSTs: for
    /// shutdown, so peers are not left with half-open connections.
    pub fn abort_all<L: Link>(&mut self, now: Instant, link: &mut L) {
        for b in &mut self.buckets {
            for (_, s) in b.sockets.iter_mut().chain(b.listen.iter_mut()) {
                #[allow(irrefutable_let_patterns)]
                if let smoltcp::socket::Socket::Tcp(t) = s {
                    if t.is_active() {
                        t.abort();
                    }
                }
            }
        }
        self.mark_all_dirty();
        self.egress(now, link);
    }
}
