//! Poll timeouts on a timerfd, armed only when a wait must end earlier.
//!
//! Every finite wait ends on a one-shot timerfd waited on next to the
//! sockets (registered with mio by the kernel backend, passed to
//! `Port::wait` by the xsk driver); the wait itself gets no timeout. Two
//! reasons:
//!
//! - epoll_wait (and so mio) and poll(2) take whole milliseconds, which
//!   rounds every short wait up to 1 ms: an open-loop client that sends
//!   every 200 us would send late and charge the lateness to the server as
//!   latency.
//! - A wait's own timeout starts and cancels a kernel timer on every sleep.
//!   A loop that only waits for a stop flag (the request/response server
//!   with a [`Waker`]) then sleeps with no timer at all: the kernel
//!   backend's server took 600-800 fewer guest instructions per request
//!   at light load (`docs/2026-12-04-sleep/`). The xsk driver always has a
//!   deadline while data is in flight (the tail-loss probe, the
//!   retransmission timer); for it the timerfd in the poll set cost about
//!   what the timer per sleep did.
//!
//! The timerfd is armed only when a wait must end earlier than the expiry
//! already set (or none is), or when that expiry would end it in its first
//! half. A deadline that moves later with every response (the
//! retransmission timer's, 50 ms or more out) then costs one
//! timerfd_settime per several requests and no wake-up; an expiry left to
//! fire early would wake the loop once per deadline length instead, which
//! measured the same in a guest's instructions but is a timer interrupt
//! from idle each time (a VM exit on KVM).
//!
//! The same timerfd carries a [`Waker`]'s wakes ([`crate::wake`]).
//!
//! The xsk driver's timer is by default not a timerfd but a POSIX timer that signals its
//! thread ([`crate::sigtimer`]): its poll(2) then holds the XSK socket alone, and the wait
//! unblocks the signal ([`PreciseTimer::wanted_mask`]). The policy above is the same.

use std::cell::Cell;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::Duration;

use crate::wake::{Core, Waker};

pub struct PreciseTimer {
    core: Arc<Core>,
    /// The armed expiry in CLOCK_MONOTONIC nanoseconds, if one is armed and not yet consumed.
    armed: Cell<Option<u64>>,
    /// Whether the last `prepare` relies on the timer to end the wait.
    wanted: Cell<bool>,
    /// A [`Waker`] was handed out: every sleep waits on the timer.
    waking: Cell<bool>,
    /// A signalling timer: the signal mask to sleep with (the thread's, the signal unblocked,
    /// in the kernel's 64-bit form); None while the timer could not be bound to the thread
    /// that sleeps.
    mask: Cell<Option<u64>>,
    /// A signalling timer: the thread it signals (0: a timerfd).
    bound_tid: Cell<libc::pid_t>,
    /// That it could not be bound was said (once).
    said: Cell<bool>,
}

/// `CLOCK_MONOTONIC` in nanoseconds (the clock of `Instant`, of the timerfd, and of the xsk
/// driver's passes). The same as `xsk_io::sys::monotonic_ns`, which a build without the `xsk`
/// feature (the kernel backend alone) does not have; `Instant` does not give its nanoseconds.
fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC exists on every Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// How often a loop that a waker should end, whose signalling timer cannot reach its thread,
/// looks for a wake.
const UNBOUND_RECHECK: Duration = Duration::from_millis(10);

/// How much later than asked a kept expiry may end a wait (nanoseconds):
/// the few microseconds between a caller's clock reading and ours.
const SKEW: u64 = 50_000;

/// `d` in nanoseconds, saturating (no u128 arithmetic on the sleep path).
fn nanos(d: Duration) -> u64 {
    d.as_secs().saturating_mul(1_000_000_000).saturating_add(u64::from(d.subsec_nanos()))
}

impl PreciseTimer {
    pub fn new() -> std::io::Result<PreciseTimer> {
        Ok(PreciseTimer::with_core(Core::new()?))
    }

    /// A timer that signals the thread that sleeps with `sig` instead of a timerfd: the wait
    /// then takes [`wanted_mask`](Self::wanted_mask), not a descriptor. Installs the signal's
    /// action (chained with the application's) and blocks the signal in the calling thread
    /// and, when the timer is first used on another, in that one.
    ///
    /// # Errors
    /// A signal that cannot be caught, or timer_create(2)'s error.
    #[cfg_attr(not(feature = "xsk"), allow(dead_code))]
    pub fn with_signal(sig: libc::c_int) -> std::io::Result<PreciseTimer> {
        let t = PreciseTimer::with_core(Core::with_signal(sig)?);
        if let Some(st) = t.core.sig_timer() {
            t.mask.set(Some(st.block_here()?));
            t.bound_tid.set(st.bound_tid());
        }
        Ok(t)
    }

    fn with_core(core: Arc<Core>) -> PreciseTimer {
        PreciseTimer {
            core,
            armed: Cell::new(None),
            wanted: Cell::new(false),
            waking: Cell::new(false),
            mask: Cell::new(None),
            bound_tid: Cell::new(0),
            said: Cell::new(false),
        }
    }

    pub fn register(&self, registry: &mio::Registry, token: mio::Token) -> std::io::Result<()> {
        let fd = self.core.fd().ok_or_else(|| std::io::Error::from(std::io::ErrorKind::Unsupported))?;
        registry.register(&mut mio::unix::SourceFd(&fd.as_raw_fd()), token, mio::Interest::READABLE)
    }

    /// A waker for this timer's transport; from now on every sleep waits on the timer.
    pub fn waker(&self) -> Waker {
        self.waking.set(true);
        Waker::new(Arc::clone(&self.core))
    }

    /// Takes a wake that a [`Waker`] left: the transport's `poll` returns (call it after
    /// `prepare`, before the wait, and after the timer ended a wait). A wake replaced the
    /// expiry armed (it set the timer to now), so none is relied on after it: without that,
    /// a transport that shares its thread and signal with another could find the wake's
    /// signal taken by the other's sleep and keep waiting for an expiry no longer set.
    #[inline]
    pub fn take_wake(&self) -> bool {
        if self.core.take() {
            self.armed.set(None);
            return true;
        }
        false
    }

    /// The timer's descriptor, for a wait that is not mio's (readable on expiry); None for
    /// a signalling timer.
    #[cfg_attr(not(feature = "xsk"), allow(dead_code))]
    pub fn fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        self.core.fd()
    }

    /// The descriptor when the last [`prepare`](Self::prepare) relies on the
    /// timer (or a waker may end the wait), else None: each descriptor in a
    /// poll(2) costs a wait-queue entry added and removed per sleep. An
    /// expiry left armed and not waited for is harmless: arming again resets
    /// it, and a wait that includes it early just loops.
    #[cfg_attr(not(feature = "xsk"), allow(dead_code))]
    pub fn wanted_fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        if self.wanted.get() {
            self.fd()
        } else {
            None
        }
    }

    /// For a signalling timer, the signal mask to sleep with (ppoll(2)) when the last
    /// [`prepare`](Self::prepare) relies on the timer (or a waker may end the wait), else
    /// None: the wait may then be a plain poll(2), with the signal blocked (an expiry left
    /// armed stays pending and ends a later wait early, which only loops).
    #[cfg_attr(not(feature = "xsk"), allow(dead_code))]
    #[inline]
    pub fn wanted_mask(&self) -> Option<u64> {
        if self.wanted.get() {
            self.mask.get()
        } else {
            None
        }
    }

    /// Whether an EINTR came from this thread's signalling timer (an expiry or a wake, to be
    /// handled as the timerfd's readiness is: [`clear`](Self::clear), then
    /// [`take_wake`](Self::take_wake)); false for any other signal.
    #[cfg_attr(not(feature = "xsk"), allow(dead_code))]
    #[inline]
    pub fn take_fired(&self) -> bool {
        self.bound_tid.get() != 0 && crate::sigtimer::take_fired()
    }

    /// Forgets a signalling timer's mark from before the sleep about to start (a signal
    /// whose action ran outside a sleep), so that [`take_fired`](Self::take_fired) tells the
    /// sleep's EINTR apart. Nothing for a timerfd.
    #[cfg_attr(not(feature = "xsk"), allow(dead_code))]
    #[inline]
    pub fn reset_fired(&self) {
        if self.bound_tid.get() != 0 {
            crate::sigtimer::reset_fired();
        }
    }

    /// The signal of a signalling timer (None: a timerfd).
    #[cfg_attr(not(feature = "xsk"), allow(dead_code))]
    pub fn signal(&self) -> Option<libc::c_int> {
        self.core.sig_timer().map(|t| t.signal())
    }

    /// A signalling timer signals the thread that sleeps: re-bound (and its signal blocked)
    /// when the transport moved to another thread. False if it cannot be: the wait then gets
    /// its own timeout. On every sleep: a comparison with a thread-local.
    #[inline(always)]
    fn bound(&self) -> bool {
        let t = self.bound_tid.get();
        t == 0 || (t == crate::sigtimer::tid() && self.mask.get().is_some()) || self.rebind()
    }

    #[cold]
    #[inline(never)]
    fn rebind(&self) -> bool {
        let Some(st) = self.core.sig_timer() else { return true };
        let mask = match st.bind_here() {
            Ok(false) => match self.mask.get() {
                Some(_) => return true,
                None => st.block_here(),
            },
            Ok(true) => {
                // The new timer is not armed.
                self.armed.set(None);
                st.block_here()
            }
            Err(e) => Err(e),
        };
        match mask {
            Ok(m) => {
                self.mask.set(Some(m));
                self.bound_tid.set(st.bound_tid());
                true
            }
            Err(e) => {
                // Tried again at every sleep (timer_create failing is a passing shortage).
                if !self.said.replace(true) {
                    tracing::warn!("the transport's timer cannot signal this thread ({e}): sleeps end on poll's own timeout");
                }
                self.mask.set(None);
                false
            }
        }
    }

    /// The timeout to hand to the wait (mio, or `Port::wait`) for `timeout`:
    /// zero and none unchanged; any other wait is left to the timer (armed
    /// to end it at the time asked, or earlier by an expiry left armed, or
    /// up to 50 us later), so the wait gets none. Only if the timer cannot be armed does
    /// the wait get `timeout` (rounded up to milliseconds by the wait).
    #[inline]
    pub fn prepare(&self, timeout: Option<Duration>) -> Option<Duration> {
        self.prepare_at(None, timeout)
    }

    /// [`prepare`](Self::prepare) for a caller that has just read the clock
    /// (`now_ns`, CLOCK_MONOTONIC): the wait ends at `now_ns + timeout`. Always inlined:
    /// out of line in the xsk driver's loop it cost about 40 more instructions per sleep.
    #[inline(always)]
    pub fn prepare_at(&self, now_ns: Option<u64>, timeout: Option<Duration>) -> Option<Duration> {
        match timeout {
            Some(t) if t.is_zero() => {
                self.wanted.set(false);
                timeout
            }
            Some(t) => {
                if !self.bound() {
                    // Without the timer a wake is seen only when the wait ends.
                    self.wanted.set(false);
                    return Some(if self.waking.get() { t.min(UNBOUND_RECHECK) } else { t });
                }
                // The common case first, inlined: the expiry armed is kept (see `arm`).
                if let (Some(now), Some(armed)) = (now_ns, self.armed.get()) {
                    if self.keeps(armed, now, nanos(t)) {
                        self.wanted.set(true);
                        return None;
                    }
                }
                self.arm(now_ns, t)
            }
            None => {
                if self.waking.get() && !self.bound() {
                    // Without the timer a wake is seen only when the wait ends.
                    self.wanted.set(false);
                    return Some(UNBOUND_RECHECK);
                }
                self.wanted.set(self.waking.get());
                None
            }
        }
    }

    /// Whether the expiry `armed` may end a wait of `t_ns` from `now`: no
    /// later than asked (give or take `SKEW`: a fixed deadline asked for
    /// again from a fresh clock reading moves by that much) and not in its
    /// first half. The loop wakes at it, finds nothing due and asks again.
    #[inline]
    fn keeps(&self, armed: u64, now: u64, t_ns: u64) -> bool {
        armed <= now.saturating_add(t_ns).saturating_add(SKEW) && armed >= now.saturating_add(t_ns / 2)
    }

    /// Arms the timer for a wait of `t` (unless the expiry armed is kept).
    #[inline(never)]
    fn arm(&self, now_ns: Option<u64>, t: Duration) -> Option<Duration> {
        let now = now_ns.unwrap_or_else(monotonic_ns);
        let t_ns = nanos(t);
        let due = now.saturating_add(t_ns);
        if let Some(armed) = self.armed.get() {
            if self.keeps(armed, now, t_ns) {
                self.wanted.set(true);
                return None;
            }
        }
        let spec = libc::itimerspec {
            it_interval: libc::timespec { tv_sec: 0, tv_nsec: 0 },
            it_value: libc::timespec {
                tv_sec: (due / 1_000_000_000).min(libc::time_t::MAX as u64) as libc::time_t,
                tv_nsec: (due % 1_000_000_000) as libc::c_long,
            },
        };
        if self.core.set(true, &spec).is_err() {
            self.armed.set(None);
            // Still waited on when a waker may end the wait (its own expiry works).
            self.wanted.set(self.waking.get());
            return Some(t);
        }
        self.armed.set(Some(due));
        self.wanted.set(true);
        None
    }

    /// Consumes an expiry (call when the timer's token is reported, or its signal).
    pub fn clear(&self) {
        self.armed.set(None);
        if let Some(fd) = self.core.fd() {
            let mut buf = [0u8; 8];
            // SAFETY: reads at most 8 bytes into a live 8-byte buffer.
            let _ = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), 8) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    /// A mio wait with a safety limit (a test must not hang when the timer fails to fire).
    fn wait(poll: &mut mio::Poll, events: &mut mio::Events, to: Option<Duration>) {
        poll.poll(events, Some(to.unwrap_or(Duration::from_secs(5)))).unwrap();
    }

    #[test]
    fn wakes_epoll_on_time_without_a_timeout_of_its_own() {
        let mut poll = mio::Poll::new().unwrap();
        let mut events = mio::Events::with_capacity(4);
        let t = PreciseTimer::new().unwrap();
        t.register(poll.registry(), mio::Token(7)).unwrap();
        let mut best = Duration::MAX;
        for _ in 0..20 {
            let start = Instant::now();
            assert_eq!(t.prepare(Some(Duration::from_micros(300))), None, "the timer ends the wait");
            wait(&mut poll, &mut events, None);
            assert!(events.iter().any(|e| e.token() == mio::Token(7)), "the timer did not fire");
            assert!(start.elapsed() >= Duration::from_micros(300), "woke after {:?}", start.elapsed());
            best = best.min(start.elapsed());
            t.clear();
        }
        // On a quiet machine this is ~0.3 ms; it must at least beat poll(2)'s 1 ms rounding.
        assert!(best < Duration::from_micros(1000), "best wait {best:?}");
    }

    #[test]
    fn zero_and_no_limit_need_no_timer() {
        let t = PreciseTimer::new().unwrap();
        assert_eq!(t.prepare(None), None);
        assert!(t.wanted_fd().is_none());
        assert_eq!(t.prepare(Some(Duration::ZERO)), Some(Duration::ZERO));
        assert!(t.wanted_fd().is_none());
        // Short or long, whole milliseconds or not: the timer.
        for d in [Duration::from_micros(700), Duration::from_millis(3), Duration::from_secs(2), Duration::MAX] {
            assert_eq!(t.prepare(Some(d)), None, "{d:?}");
            assert!(t.wanted_fd().is_some(), "{d:?}");
        }
        assert_eq!(t.prepare(None), None);
        assert!(t.wanted_fd().is_none());
    }

    #[test]
    fn an_expiry_is_kept_in_the_second_half_of_the_wait_and_pushed_from_the_first() {
        let mut poll = mio::Poll::new().unwrap();
        let mut events = mio::Events::with_capacity(4);
        let t = PreciseTimer::new().unwrap();
        t.register(poll.registry(), mio::Token(7)).unwrap();
        let now = monotonic_ns();
        t.prepare_at(Some(now), Some(Duration::from_millis(30)));
        let armed = t.armed.get();
        assert_eq!(armed, Some(now + 30_000_000));
        // A deadline that moved later, by less than half of the wait: the expiry stays (it
        // wakes the loop a little early, which then asks again).
        assert_eq!(t.prepare_at(Some(now + 5_000_000), Some(Duration::from_millis(40))), None);
        assert_eq!(t.armed.get(), armed);
        // By more: it would wake the loop for nothing; pushed.
        assert_eq!(t.prepare_at(Some(now + 5_000_000), Some(Duration::from_millis(60))), None);
        assert_eq!(t.armed.get(), Some(now + 65_000_000));
        // An earlier deadline re-arms, and the timer ends the wait then.
        let start = Instant::now();
        t.prepare(Some(Duration::from_micros(1_500)));
        wait(&mut poll, &mut events, Some(Duration::from_millis(30)));
        assert!(events.iter().any(|e| e.token() == mio::Token(7)), "the earlier deadline did not fire");
        assert!(start.elapsed() < Duration::from_millis(25), "woke after {:?}", start.elapsed());
        t.clear();
        assert_eq!(t.armed.get(), None);
    }

    #[test]
    fn a_waker_makes_every_sleep_wait_on_the_timer() {
        let mut poll = mio::Poll::new().unwrap();
        let mut events = mio::Events::with_capacity(4);
        let t = PreciseTimer::new().unwrap();
        t.register(poll.registry(), mio::Token(7)).unwrap();
        assert_eq!(t.prepare(None), None);
        assert!(t.wanted_fd().is_none());
        let w = t.waker();
        assert_eq!(t.prepare(None), None);
        assert!(t.wanted_fd().is_some(), "a sleep with no limit must still see wakes");
        // A wake after the timer was armed ends the wait; one before is seen by take_wake.
        t.prepare(Some(Duration::from_secs(10)));
        assert!(!t.take_wake());
        w.wake();
        wait(&mut poll, &mut events, None);
        assert!(events.iter().any(|e| e.token() == mio::Token(7)), "the wake did not end the wait");
        t.clear();
        assert!(t.take_wake());
        w.wake();
        t.prepare(Some(Duration::from_secs(10)));
        assert!(t.take_wake(), "a wake before arming was lost");
        // Zero waits need no timer, waker or not.
        assert_eq!(t.prepare(Some(Duration::ZERO)), Some(Duration::ZERO));
        assert!(t.wanted_fd().is_none());
    }

    #[test]
    fn a_signalling_timer_ends_a_masked_sleep_on_time() {
        let t = PreciseTimer::with_signal(libc::SIGRTMIN() + 8).unwrap();
        assert_eq!(t.signal(), Some(libc::SIGRTMIN() + 8));
        assert!(t.fd().is_none());
        for _ in 0..3 {
            let start = Instant::now();
            assert_eq!(t.prepare(Some(Duration::from_millis(30))), None, "the timer ends the wait");
            assert!(t.wanted_fd().is_none(), "no descriptor in the sleep");
            let mask = t.wanted_mask().expect("a mask to sleep with");
            t.reset_fired();
            assert!(crate::sigtimer::sleep_masked(mask, 3000), "the timer did not end the sleep");
            assert!(t.take_fired(), "the EINTR was not the timer's");
            let took = start.elapsed();
            assert!(took >= Duration::from_millis(30) && took < Duration::from_secs(2), "{took:?}");
            t.clear();
        }
        // No deadline and no waker: nothing to unblock.
        assert_eq!(t.prepare(None), None);
        assert!(t.wanted_mask().is_none());
    }

    #[test]
    fn a_wake_forgets_the_armed_expiry_also_when_another_timer_takes_its_signal() {
        // Two transports' timers on one thread with one signal: a wake of the second resets
        // its timer to now, and the signal may end the first one's sleep. The second must not
        // keep waiting for the expiry the wake replaced.
        let sig = libc::SIGRTMIN() + 8;
        let one = PreciseTimer::with_signal(sig).unwrap();
        let two = PreciseTimer::with_signal(sig).unwrap();
        let w = two.waker();
        assert_eq!(two.prepare(Some(Duration::from_millis(150))), None);
        assert!(two.armed.get().is_some());
        w.wake();
        one.prepare(None);
        let mask = one.wanted_mask().unwrap_or_else(|| two.wanted_mask().unwrap());
        one.reset_fired();
        assert!(crate::sigtimer::sleep_masked(mask, 3000), "the wake's signal did not end a sleep");
        assert!(one.take_fired());
        assert!(two.take_wake());
        assert_eq!(two.armed.get(), None, "the expiry the wake replaced is still relied on");
        // The second's next sleep re-arms and ends on time.
        let start = Instant::now();
        assert_eq!(two.prepare(Some(Duration::from_millis(150))), None);
        let mask = two.wanted_mask().unwrap();
        two.reset_fired();
        assert!(crate::sigtimer::sleep_masked(mask, 3000), "the deadline was lost");
        assert!(two.take_fired());
        assert!(start.elapsed() < Duration::from_secs(2));
    }

    #[test]
    fn the_same_deadline_asked_again_does_not_re_arm() {
        // A caller with a fixed deadline asks for what is left of it on every sleep; its clock
        // readings differ by a little each time.
        let t = PreciseTimer::new().unwrap();
        let now = monotonic_ns();
        let deadline = now + 60_000_000_000;
        t.prepare_at(Some(now), Some(Duration::from_nanos(deadline - now)));
        let armed = t.armed.get();
        assert_eq!(armed, Some(deadline));
        for late in [1_000, 3_000_000, 10_000_000_000] {
            // Up to a few microseconds off, either way.
            for skew in [0u64, 2_000] {
                let at = now + late;
                t.prepare_at(Some(at), Some(Duration::from_nanos(deadline - at - skew)));
                assert_eq!(t.armed.get(), armed, "re-armed at +{late} ns, {skew} ns early");
            }
        }
        // Much earlier: re-armed.
        t.prepare_at(Some(now), Some(Duration::from_secs(30)));
        assert_eq!(t.armed.get(), Some(now + 30_000_000_000));
        // Later, but the armed expiry still in the second half: kept.
        t.prepare_at(Some(now), Some(Duration::from_secs(40)));
        assert_eq!(t.armed.get(), Some(now + 30_000_000_000));
        // An expiry in the past is not relied on.
        let later = now + 31_000_000_000;
        t.prepare_at(Some(later), Some(Duration::from_secs(1)));
        assert_eq!(t.armed.get(), Some(later + 1_000_000_000));
    }
}
