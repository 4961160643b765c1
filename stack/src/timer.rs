//! Sub-millisecond poll timeouts.
//!
//! epoll_wait (and so mio) and poll(2) take whole milliseconds, which rounds
//! every short wait up to 1 ms: an open-loop client that sends every 200 us
//! would send late and charge the lateness to the server as latency. A
//! one-shot timerfd waited on next to the sockets (registered with mio by the
//! kernel backend, passed to `Port::wait` by the xsk driver) ends the wait on
//! time.
//!
//! The timer is re-armed only when a wait must end earlier than the expiry
//! already set: a server with data in flight always has a retransmission
//! deadline a few ms out that moves with every response, and re-arming it
//! on every sleep was one timerfd_settime per request.

use std::cell::Cell;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

/// Waits at least this long are left to the millisecond timeout, rounded
/// up: at most a tenth late, which no long deadline (retransmission,
/// keep-alive, the sweep) notices. At light load a server's only deadline
/// is such a timer, so its sleeps need no timerfd and no clock read.
const COARSE: Duration = Duration::from_millis(10);

pub struct PreciseTimer {
    fd: OwnedFd,
    /// When the armed expiry fires, if one is armed and not yet consumed.
    armed: Cell<Option<Instant>>,
    /// Whether the last `prepare` relies on the timer to end the wait.
    wanted: Cell<bool>,
}

impl PreciseTimer {
    pub fn new() -> io::Result<PreciseTimer> {
        // SAFETY: plain syscall; the fd is checked and then owned.
        let fd = unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_NONBLOCK | libc::TFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fresh descriptor owned by nobody else.
        Ok(PreciseTimer { fd: unsafe { OwnedFd::from_raw_fd(fd) }, armed: Cell::new(None), wanted: Cell::new(false) })
    }

    pub fn register(&self, registry: &mio::Registry, token: mio::Token) -> io::Result<()> {
        registry.register(&mut mio::unix::SourceFd(&self.fd.as_raw_fd()), token, mio::Interest::READABLE)
    }

    /// The timer's descriptor, for a wait that is not mio's (readable on expiry).
    #[cfg_attr(not(feature = "xsk"), allow(dead_code))]
    pub fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        use std::os::fd::AsFd;
        self.fd.as_fd()
    }

    /// The descriptor when the last [`prepare`](Self::prepare) relies on the
    /// timer, else None: each descriptor in a poll(2) costs a wait-queue
    /// entry added and removed per sleep. An expiry left armed and not
    /// waited for is harmless: arming again resets it, and a wait that
    /// includes it early just loops.
    #[cfg_attr(not(feature = "xsk"), allow(dead_code))]
    pub fn wanted_fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        self.wanted.get().then(|| self.fd())
    }

    /// The timeout to hand to the millisecond wait (mio, or `Port::wait`)
    /// for `timeout`: unchanged when it is whole milliseconds (or none),
    /// else rounded up, with the timer armed to end the wait at the exact
    /// time (or an earlier expiry left armed).
    ///
    /// The test is inlined (once per sleep; at light load the deadline is a retransmission
    /// timer, far off); arming the timer is not.
    #[inline]
    pub fn prepare(&self, timeout: Option<Duration>) -> Option<Duration> {
        self.wanted.set(false);
        let t = timeout?;
        if t.is_zero() || t.subsec_nanos() % 1_000_000 == 0 || t >= COARSE {
            return Some(t);
        }
        Some(self.arm(t))
    }

    /// `prepare` for a timeout shorter than `COARSE` that is not whole milliseconds.
    #[inline(never)]
    fn arm(&self, t: Duration) -> Duration {
        self.wanted.set(true);
        let now = Instant::now();
        let due = now + t;
        if let Some(armed) = self.armed.get() {
            if armed > now && armed <= due {
                // An earlier expiry ends the wait first; the caller loops and asks again.
                return t + Duration::from_millis(1);
            }
        }
        let spec = libc::itimerspec {
            it_interval: libc::timespec { tv_sec: 0, tv_nsec: 0 },
            it_value: libc::timespec { tv_sec: t.as_secs() as libc::time_t, tv_nsec: t.subsec_nanos() as libc::c_long },
        };
        // SAFETY: `spec` is a valid itimerspec; no old value is requested.
        let r = unsafe { libc::timerfd_settime(self.fd.as_raw_fd(), 0, &spec, std::ptr::null_mut()) };
        if r != 0 {
            self.armed.set(None);
            self.wanted.set(false);
            return t;
        }
        self.armed.set(Some(due));
        t + Duration::from_millis(1)
    }

    /// Consumes an expiry (call when the timer's token is reported).
    pub fn clear(&self) {
        self.armed.set(None);
        let mut buf = [0u8; 8];
        // SAFETY: reads at most 8 bytes into a live 8-byte buffer.
        let _ = unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), 8) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wakes_epoll_before_the_rounded_timeout() {
        let mut poll = mio::Poll::new().unwrap();
        let mut events = mio::Events::with_capacity(4);
        let t = PreciseTimer::new().unwrap();
        t.register(poll.registry(), mio::Token(7)).unwrap();
        let mut best = Duration::MAX;
        for _ in 0..20 {
            let start = std::time::Instant::now();
            let to = t.prepare(Some(Duration::from_micros(300)));
            assert_eq!(to, Some(Duration::from_micros(1300)));
            poll.poll(&mut events, to).unwrap();
            best = best.min(start.elapsed());
            assert!(events.iter().any(|e| e.token() == mio::Token(7)) || start.elapsed() >= Duration::from_millis(1));
            t.clear();
        }
        // On a quiet machine this is ~0.3 ms; it must at least beat the 1 ms rounding.
        assert!(best < Duration::from_micros(1000), "best wait {best:?}");
        assert_eq!(t.prepare(Some(Duration::from_millis(2))), Some(Duration::from_millis(2)));
        assert_eq!(t.prepare(None), None);
    }

    #[test]
    fn only_short_waits_need_the_timer() {
        let t = PreciseTimer::new().unwrap();
        assert_eq!(t.prepare(Some(Duration::from_micros(700))), Some(Duration::from_micros(1700)));
        assert!(t.wanted_fd().is_some());
        // Long, or whole milliseconds: the wait's own timeout, no timer.
        for long in [Duration::from_micros(10_300), Duration::from_millis(3), Duration::from_secs(2)] {
            assert_eq!(t.prepare(Some(long)), Some(long));
            assert!(t.wanted_fd().is_none(), "{long:?}");
        }
        assert_eq!(t.prepare(None), None);
        assert!(t.wanted_fd().is_none());
        // The earlier expiry, still armed, is used again.
        assert!(t.prepare(Some(Duration::from_micros(900))).is_some());
        assert!(t.wanted_fd().is_some());
    }

    #[test]
    fn a_later_deadline_keeps_the_earlier_expiry() {
        let mut poll = mio::Poll::new().unwrap();
        let mut events = mio::Events::with_capacity(4);
        let t = PreciseTimer::new().unwrap();
        t.register(poll.registry(), mio::Token(7)).unwrap();
        let start = Instant::now();
        t.prepare(Some(Duration::from_micros(2_300)));
        // Asking for a later wake-up must not push the armed expiry back.
        let to = t.prepare(Some(Duration::from_micros(50_500)));
        poll.poll(&mut events, to).unwrap();
        assert!(events.iter().any(|e| e.token() == mio::Token(7)), "the first expiry did not fire");
        assert!(start.elapsed() < Duration::from_millis(40), "woke after {:?}", start.elapsed());
        t.clear();
        // An earlier deadline than the armed one re-arms.
        t.prepare(Some(Duration::from_micros(40_500)));
        let start = Instant::now();
        t.prepare(Some(Duration::from_micros(1_500)));
        poll.poll(&mut events, Some(Duration::from_millis(30))).unwrap();
        assert!(events.iter().any(|e| e.token() == mio::Token(7)));
        assert!(start.elapsed() < Duration::from_millis(25), "woke after {:?}", start.elapsed());
    }
}
