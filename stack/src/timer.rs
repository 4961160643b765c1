//! Poll timeouts on a timer armed only when a wait must end earlier.
//!
//! Every finite wait ends on a one-shot timer: a timerfd waited on next to
//! the sockets (registered with mio by the kernel backend, passed to
//! `Port::wait` by the xsk driver); the wait itself gets no timeout. Two reasons:
//!
//! - epoll_wait (and so mio) and poll(2) take whole milliseconds, which
//!   rounds every short wait up to 1 ms: an open-loop client that sends
//!   every 200 us would send late and charge the lateness to the server as
//!   latency.
//! - A wait's own timeout starts and cancels a kernel timer on every sleep.
//!   A loop that only waits for a stop flag (the request/response server
//!   with a [`Waker`]) then sleeps with no timer at all, which saves the
//!   kernel backend's server that work on every request at light load
//!   (`docs/2026-12-04-sleep/`). The xsk driver always has a deadline while
//!   data is in flight (the tail-loss probe, the retransmission timer); for
//!   it the timerfd in the poll set costs about what the timer per sleep
//!   would.
//!
//! The timerfd is armed only when a wait must end earlier than the expiry
//! already set (or none is), or when that expiry would end it in its first
//! half. A deadline that moves later with every response (the
//! retransmission timer's, 50 ms or more out) then costs one
//! timerfd_settime per several requests and no wake-up; an expiry left to
//! fire early would wake the loop once per deadline length instead, which
//! is a timer interrupt from idle each time (a VM exit on KVM).
//!
//! The same timerfd carries a [`Waker`]'s wakes ([`crate::wake`]).
//!
//! The timer is a descriptor in the sleep's poll(2), not a signal: a timer
//! that signals the thread would keep the XSK socket alone in the poll, but
//! it takes a process-wide signal, and a measurement could not tell its gain
//! from noise (`docs/2026-12-06-one-park/`).

use std::cell::Cell;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::Duration;

use crate::wake::{Core, Waker};

/// The one-shot timerfd that ends a transport's waits (to the microsecond, where epoll and
/// poll(2) take milliseconds) and carries a [`Waker`]'s wakes.
pub struct WaitTimer {
    core: Arc<Core>,
    /// The timerfd's armed expiry in CLOCK_MONOTONIC nanoseconds, if one is armed and not
    /// yet consumed.
    armed: Cell<Option<u64>>,
    /// Whether the last `prepare` relies on the timer to end the wait.
    wanted: Cell<bool>,
    /// A [`Waker`] was handed out: every sleep waits on the timer.
    waking: Cell<bool>,
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

/// An absolute CLOCK_MONOTONIC expiry at `due` nanoseconds.
fn abs_spec(due: u64) -> libc::itimerspec {
    libc::itimerspec {
        it_interval: libc::timespec { tv_sec: 0, tv_nsec: 0 },
        it_value: libc::timespec {
            tv_sec: (due / 1_000_000_000).min(libc::time_t::MAX as u64) as libc::time_t,
            tv_nsec: (due % 1_000_000_000) as libc::c_long,
        },
    }
}

/// How much later than asked a kept expiry may end a wait (nanoseconds):
/// the few microseconds between a caller's clock reading and ours.
const SKEW: u64 = 50_000;

/// `d` in nanoseconds, saturating (no u128 arithmetic on the sleep path).
fn nanos(d: Duration) -> u64 {
    d.as_secs().saturating_mul(1_000_000_000).saturating_add(u64::from(d.subsec_nanos()))
}

impl WaitTimer {
    pub fn new() -> std::io::Result<WaitTimer> {
        Ok(WaitTimer::with_core(Core::new()?))
    }

    fn with_core(core: Arc<Core>) -> WaitTimer {
        WaitTimer { core, armed: Cell::new(None), wanted: Cell::new(false), waking: Cell::new(false) }
    }

    pub fn register(&self, registry: &mio::Registry, token: mio::Token) -> std::io::Result<()> {
        registry.register(&mut mio::unix::SourceFd(&self.core.fd().as_raw_fd()), token, mio::Interest::READABLE)
    }

    /// A waker for this timer's transport; from now on every sleep waits on the timer.
    pub fn waker(&self) -> Waker {
        self.waking.set(true);
        Waker::new(Arc::clone(&self.core))
    }

    /// Takes a wake that a [`Waker`] left: the transport's `poll` returns (call it after
    /// `prepare`, before the wait, and after the timer ended a wait). A wake replaced the
    /// expiry armed (it set the timer to now), so none is relied on after it.
    #[inline]
    pub fn take_wake(&self) -> bool {
        if self.core.take() {
            self.armed.set(None);
            return true;
        }
        false
    }

    /// The timerfd, for a wait that is not mio's (readable on expiry).
    #[cfg_attr(not(feature = "xsk"), allow(dead_code))]
    pub fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
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
            Some(self.fd())
        } else {
            None
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
    /// it runs before every sleep of the xsk driver's loop, and its common case (the
    /// expiry armed is kept) is a few comparisons, less than a call.
    #[inline(always)]
    pub fn prepare_at(&self, now_ns: Option<u64>, timeout: Option<Duration>) -> Option<Duration> {
        match timeout {
            Some(t) if t.is_zero() => {
                self.wanted.set(false);
                timeout
            }
            Some(t) => {
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
        if self.core.set(true, &abs_spec(due)).is_err() {
            self.armed.set(None);
            // Still waited on when a waker may end the wait (its own expiry works).
            self.wanted.set(self.waking.get());
            return Some(t);
        }
        self.armed.set(Some(due));
        self.wanted.set(true);
        None
    }

    /// Consumes the timerfd's expiry (call when it is reported readable).
    pub fn clear(&self) {
        self.armed.set(None);
        let mut buf = [0u8; 8];
        // SAFETY: reads at most 8 bytes into a live 8-byte buffer.
        let _ = unsafe { libc::read(self.core.fd().as_raw_fd(), buf.as_mut_ptr().cast(), 8) };
    }
}

#[cfg(test)]
mod tests;
