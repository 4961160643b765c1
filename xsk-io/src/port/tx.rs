//! Sending: queueing frames, publishing them to the TX ring, kicking the
//! kernel (or leaving the kick to the next sleep), reaping completions, and
//! waiting out a link that is down.

use std::io;
use std::os::fd::BorrowedFd;
use std::time::{Duration, Instant};

use crate::umem::{Frame, Place, Umem};

use super::error::PortError;
use super::tx_half::TxHalf;
use super::{LinkDown, Port, Ready};

/// At most this many frames in flight (handed to TX, not yet completed)
/// let [`Port::flush_before_wait`] leave the kick to the wait: the smallest TX budget
/// (copy mode before `XDP_MAX_TX_SKB_BUDGET`: 32 per call), so one poll(2)
/// sends them all, and few enough that the socket's send buffer cannot be
/// full (the kernel would leave frames in the ring, and nothing wakes a
/// sleeper for that).
const DEFER_KICK_MAX: u32 = 32;

/// [`Port::flush_before_wait`] reaps completions once this many frames are out for TX (half of
/// [`DEFER_KICK_MAX`], so completed frames left unreaped never make a small batch look large).
const REAP_BATCH: u32 = DEFER_KICK_MAX / 2;

/// How often a port whose link is down tries the kick again.
const LINK_RETRY: Duration = Duration::from_millis(10);

impl Port {
    /// Splits the port into the UMEM (read frames with it) and the TX half
    /// (allocate, send, release), so that a received frame can be read while
    /// a reply is built: what a smoltcp RX/TX token pair needs.
    #[inline]
    pub fn split(&mut self) -> (&Umem, TxHalf<'_>) {
        let half = TxHalf {
            umem: &self.umem,
            tx: &mut self.tx,
            comp: &mut self.comp,
            frames: &mut self.frames,
            counters: &mut self.counters,
            tx_md: self.tx_md,
        };
        (&self.umem, half)
    }

    /// An empty frame (length 0) to build a packet in; reaps completions if
    /// the free list is empty. None if every frame is in use.
    #[inline]
    pub fn alloc(&mut self) -> Option<Frame> {
        self.split().1.alloc()
    }

    /// Free TX ring slots, refreshing the kernel's index only when fewer than
    /// `want` are known to be free.
    pub fn tx_space(&mut self, want: u32) -> u32 {
        self.tx.free(want)
    }

    /// Queues a frame for sending; nothing reaches the kernel before
    /// [`flush`](Self::flush). Gives the frame back if the TX ring is full.
    #[inline]
    pub fn send(&mut self, f: Frame) -> Result<(), Frame> {
        self.split().1.send(f)
    }

    /// Publishes queued TX descriptors (one Release store) and kicks the
    /// kernel (one sendto) if it asks for it; reaps completions and tops up
    /// the fill ring (once it lacks a batch, see `refill`). Transient kick
    /// errors are retried on the next flush.
    ///
    /// A link that is down (`ENETDOWN`/`ENXIO`) is not an error: the frames
    /// stay queued, [`link_down`](Self::link_down) turns true, and flushes
    /// retry the kick every 10 ms until the link is back.
    ///
    /// # Errors
    /// [`PortError::Kick`] for any other `sendto` error (the frames stay
    /// queued; the next flush retries).
    pub fn flush(&mut self) -> Result<(), PortError> {
        let published = self.tx.publish();
        if published > 0 {
            self.counters.tx_batches += 1;
        }
        if (published > 0 || self.kick_retry || self.kick_deferred) && self.tx.needs_wakeup() {
            self.kick()?;
        }
        self.reap();
        self.refill();
        Ok(())
    }

    /// As [`flush`](Self::flush), but the kick is left to the next
    /// [`wait`](Self::wait), which makes it inside its poll(2), or to the
    /// next `flush` (whichever comes first; [`kick_deferred`](Self::kick_deferred)
    /// says one is due), when at most 32 frames are in flight (more, or a
    /// down link: kicked here, as `flush` does). For a loop that sleeps once it has sent: one
    /// syscall instead of a sendto and a wait, and the peer the frames wake
    /// (veth: on this CPU) runs once this thread sleeps instead of
    /// preempting it on its way back from sendto. While the link is down
    /// the kick is made here, as `flush` makes it (every 10 ms). Completions
    /// are reaped once 16 frames are out for TX (`flush` reaps them all).
    ///
    /// # Errors
    /// As [`flush`](Self::flush) while the link is down; otherwise none.
    pub fn flush_before_wait(&mut self) -> Result<(), PortError> {
        let published = self.tx.publish();
        if published > 0 {
            self.counters.tx_batches += 1;
        }
        // Completions are taken in batches here: at light load every such flush sends one
        // frame, and reading the completion ring for it cost more than building it.
        // Fewer than REAP_BATCH frames wait, so the count below still tells a burst.
        // (`flush` takes them all: `drain_tx` waits for that.)
        if self.frames.count(Place::Tx) >= REAP_BATCH {
            self.reap();
        }
        if (published > 0 || self.kick_retry) && self.tx.needs_wakeup() {
            // One poll(2) transmits at most one TX budget (32 before 6.17),
            // and what it leaves would wait out the sleep: many frames in
            // flight are kicked now (sendto retries leftovers soon), as is
            // a down link (rate-limited).
            if self.link_down.is_some() || self.frames.count(Place::Tx) > DEFER_KICK_MAX {
                self.kick()?;
            } else {
                self.kick_deferred = true;
            }
        }
        self.refill();
        Ok(())
    }

    /// Whether [`flush_before_wait`](Self::flush_before_wait) left a kick that no wait or flush
    /// has made yet.
    pub fn kick_deferred(&self) -> bool {
        self.kick_deferred
    }

    /// The kick policy of a loop that publishes with [`flush_before_wait`](Self::flush_before_wait),
    /// called once at the end of each pass: the kick the pass deferred is made
    /// now, with a sendto, unless `sleeps` (the loop's next step is
    /// [`wait`](Self::wait), whose poll(2) makes it). True if it kicked. A
    /// loop that returns to its caller, goes round again without sleeping,
    /// or sleeps elsewhere (epoll) passes false.
    pub fn end_pass(&mut self, sleeps: bool) -> Result<bool, PortError> {
        if sleeps || !self.kick_deferred {
            return Ok(false);
        }
        self.flush()?;
        Ok(true)
    }

    /// Whether a loop done with this pass will sleep in [`wait`](Self::wait)
    /// before its next one: not while frames wait in the RX ring (the next
    /// pass takes them first) nor when the port busy-polls (it never
    /// sleeps). For [`end_pass`](Self::end_pass) after a send outside the loop.
    pub fn sleeps_next(&mut self) -> bool {
        self.features.busy_poll.is_none() && self.rx_ready() == 0
    }

    /// Sleeps until the RX ring has frames, `extra` (e.g. a timerfd) is
    /// readable, or `timeout` (rounded up to whole milliseconds; None: no
    /// limit), and makes a deferred kick on the way: in copy mode with
    /// need_wakeup the kernel's poll transmits the TX ring before it sleeps
    /// (`xsk_poll`: "Poll needs to drive Tx also in copy mode"). A kick is
    /// deferred only when the TX ring asked for a wake-up, so only then.
    ///
    /// # Errors
    /// The OS error of poll(2) (`Interrupted` for a signal); a deferred kick
    /// that the kernel did not finish stays due (the next flush makes it).
    pub fn wait(&mut self, extra: Option<BorrowedFd<'_>>, timeout: Option<Duration>) -> io::Result<Ready> {
        let ms = timeout.map_or(-1, poll_ms);
        let deferred = std::mem::take(&mut self.kick_deferred);
        let r = self.sock.wait_readable(extra, ms);
        if deferred {
            self.counters.kicks_in_wait += 1;
            // A link that went down meanwhile sends nothing: what is left
            // is kicked by the next flush (after this wait; `flush_before_wait` keeps
            // deferring to loads one poll sends whole).
            self.kick_retry = self.tx.in_flight() > 0;
        }
        let (rx, extra) = r?;
        Ok(Ready { rx, extra })
    }

    fn kick(&mut self) -> Result<(), PortError> {
        self.kick_deferred = false;
        if let Some(d) = &self.link_down {
            // Waiting for the link: try again now and then, not on every flush.
            if d.last_try.elapsed() < LINK_RETRY {
                return Ok(());
            }
        }
        self.counters.kicks += 1;
        match self.sock.kick_tx() {
            Ok(()) => {
                if let Some(d) = self.link_down.take() {
                    tracing::info!("{}: link back after {:.1?}, sending again", self.features.ifname, d.since.elapsed());
                }
                // Copy mode sends at most the budget per call: if descriptors
                // are left, the next flush must kick again.
                self.kick_retry = self.tx.in_flight() > 0;
                Ok(())
            }
            Err(e) => match e.raw_os_error() {
                Some(libc::EAGAIN) | Some(libc::ENOBUFS) => {
                    self.counters.kick_retries += 1;
                    self.kick_retry = true;
                    Ok(())
                }
                // __xsk_generic_xmit: the driver dropped the frame it was
                // given (NET_XMIT_DROP); the frame was consumed from the TX
                // ring and completes through the completion ring. The loop
                // stopped there: the rest stays queued for the next kick.
                Some(libc::EBUSY) => {
                    self.counters.kick_retries += 1;
                    self.counters.tx_dropped += 1;
                    self.kick_retry = true;
                    Ok(())
                }
                // xsk_check_common: the device is down (ENETDOWN) or the
                // socket lost it (ENXIO). Nothing was taken from the TX ring;
                // wait for the link with the descriptors queued.
                Some(libc::ENETDOWN) | Some(libc::ENXIO) => {
                    self.kick_retry = true;
                    let now = Instant::now();
                    match &mut self.link_down {
                        Some(d) => d.last_try = now,
                        None => {
                            self.counters.link_downs += 1;
                            tracing::warn!(
                                "{}: {e}: waiting for the link ({} TX frame(s) queued stay queued; retrying every {LINK_RETRY:?})",
                                self.features.ifname,
                                self.tx.in_flight()
                            );
                            self.link_down = Some(LinkDown { since: now, last_try: now });
                        }
                    }
                    Ok(())
                }
                _ => {
                    self.kick_retry = true;
                    Err(PortError::Kick(e))
                }
            },
        }
    }

    /// Whether a flush is needed to make progress on TX. False while the
    /// link is down: the next flush retries, whenever the caller does one.
    pub fn tx_pending(&self) -> bool {
        (self.kick_retry && self.link_down.is_none()) || self.tx.unpublished() > 0
    }

    /// Whether the last kick found the link down (see [`Counters::link_downs`](super::Counters::link_downs)).
    pub fn link_down(&self) -> bool {
        self.link_down.is_some()
    }

    /// Frames handed to the kernel for TX and not yet completed.
    pub fn tx_outstanding(&self) -> u32 {
        self.frames.count(Place::Tx)
    }

    /// Returns completed TX frames to the free list; returns how many.
    pub fn reap(&mut self) -> u32 {
        self.split().1.reap()
    }

    /// Flushes until every TX frame has completed, or `timeout`; sleeps 50 us
    /// between flushes. Returns whether everything completed.
    ///
    /// # Errors
    /// As [`flush`](Self::flush).
    pub fn drain_tx(&mut self, timeout: Duration) -> Result<bool, PortError> {
        let end = Instant::now() + timeout;
        loop {
            self.flush()?;
            if self.frames.count(Place::Tx) == 0 {
                return Ok(true);
            }
            if Instant::now() >= end {
                return Ok(false);
            }
            if !self.kick_retry && self.tx.needs_wakeup() {
                self.kick()?;
            }
            std::thread::sleep(Duration::from_micros(50));
        }
    }
}

/// poll(2)'s timeout for `t`: whole milliseconds, rounded up, at most
/// `i32::MAX`. In 64-bit integers: `Duration::as_nanos` is a u128, whose
/// division is a library call (once per sleep, at light load once per request).
fn poll_ms(t: Duration) -> i32 {
    let ms = t.as_secs().saturating_mul(1000).saturating_add(t.subsec_nanos().div_ceil(1_000_000) as u64);
    ms.min(i32::MAX as u64) as i32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn poll_ms_rounds_up_and_saturates() {
        for ns in [0u64, 1, 999_999, 1_000_000, 1_000_001, 1_999_999_999, 2_000_000_000, 86_400_000_000_123] {
            let t = Duration::from_nanos(ns);
            assert_eq!(poll_ms(t) as u128, t.as_nanos().div_ceil(1_000_000), "{ns}");
        }
        assert_eq!(poll_ms(Duration::from_secs(3_000_000)), i32::MAX);
        assert_eq!(poll_ms(Duration::MAX), i32::MAX);
    }
}
