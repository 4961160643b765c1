//! Ending a transport's sleep from elsewhere: another thread, or a signal handler.
//!
//! A loop that must notice a stop flag could sleep with a timeout, but a finite timeout costs a
//! kernel timer started and cancelled on every sleep, busy or idle. With a [`Waker`] the loop
//! sleeps without one, and whoever sets the flag wakes it.
//!
//! The wake goes through the timer the transport already sleeps on for its own deadlines
//! (`crate::timer`, a timerfd): a waker marks a wake pending and sets the timer to expire now. A
//! descriptor of its own (a socket pair, as signal-hook's self-pipe) would be one more in every
//! sleep's poll(2), which costs at least as much as the timer a waker saves
//! (`docs/2026-12-04-sleep/`). The transport's own arming cannot hide a wake: it looks for a
//! pending one after arming, before it sleeps.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// What ends a transport's sleep: its timerfd, and the mark of a wake.
#[derive(Debug)]
pub(crate) struct Core {
    fd: OwnedFd,
    pending: AtomicBool,
}

fn timerfd() -> io::Result<OwnedFd> {
    // SAFETY: plain syscall; the fd is checked and then owned.
    let fd = unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_NONBLOCK | libc::TFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fresh descriptor owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

impl Core {
    /// A timerfd.
    pub(crate) fn new() -> io::Result<Arc<Core>> {
        Ok(Arc::new(Core { fd: timerfd()?, pending: AtomicBool::new(false) }))
    }

    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Sets the timerfd to expire at `spec` (absolute CLOCK_MONOTONIC if `absolute`, else
    /// relative). The OS error if it failed. Async-signal-safe: one system call.
    pub(crate) fn set(&self, absolute: bool, spec: &libc::itimerspec) -> io::Result<()> {
        let flags = if absolute { libc::TFD_TIMER_ABSTIME } else { 0 };
        // SAFETY: `spec` is a valid itimerspec; no old value is requested.
        let r = unsafe { libc::timerfd_settime(self.fd.as_raw_fd(), flags, spec, std::ptr::null_mut()) };
        if r == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    /// Takes a pending wake. A plain load when there is none (every sleep asks).
    #[inline]
    pub(crate) fn take(&self) -> bool {
        self.pending.load(Ordering::SeqCst) && self.pending.swap(false, Ordering::SeqCst)
    }

    /// Marks a wake, then makes the timer expire now. Async-signal-safe: an atomic store and
    /// one system call. The order is what makes it race-free: a transport that armed the alarm
    /// after this store sees the mark (it looks after arming); one that armed it before is
    /// overridden by this expiry.
    fn wake(&self) {
        self.pending.store(true, Ordering::SeqCst);
        let now = libc::itimerspec {
            it_interval: libc::timespec { tv_sec: 0, tv_nsec: 0 },
            // Relative 1 ns: at once (0 would disarm it).
            it_value: libc::timespec { tv_sec: 0, tv_nsec: 1 },
        };
        let _ = self.set(false, &now);
    }
}

/// Wakes the transport it came from ([`Transport::waker`](crate::transport::Transport::waker)):
/// its current or next `poll` returns, with no event if nothing else happened. Cheap to clone,
/// `Send` and `Sync`. Wakes that come while one is pending are one wake.
#[derive(Clone, Debug)]
pub struct Waker {
    core: Arc<Core>,
}

impl Waker {
    pub(crate) fn new(core: Arc<Core>) -> Waker {
        Waker { core }
    }

    /// Wakes the transport. Never blocks and never fails (when the transport is gone there is
    /// nothing to wake).
    pub fn wake(&self) {
        self.core.wake();
    }

    /// Wakes the transport whenever `signal` arrives, whichever thread the kernel delivers it
    /// to, and also when it lands between the loop's check of its flags and its sleep. Register
    /// what the signal should set (a `signal_hook::flag`) first: actions run in the order they
    /// were registered, so the loop finds the flag set when it wakes. Undo it with
    /// `signal_hook::low_level::unregister` (the id is signal-hook's).
    ///
    /// # Errors
    /// The OS error of sigaction(2) (an invalid signal number).
    ///
    /// # Panics
    /// For the signals signal-hook refuses: SIGKILL, SIGSTOP, SIGILL, SIGFPE, SIGSEGV.
    pub fn wake_on_signal(&self, signal: libc::c_int) -> io::Result<signal_hook_registry::SigId> {
        let core = Arc::clone(&self.core);
        // SAFETY: the action is async-signal-safe: `Core::wake` is an atomic store and one
        // system call (timerfd_settime); it allocates nothing and takes no
        // lock. `core` is kept alive by the action itself.
        unsafe { signal_hook_registry::register(signal, move || core.wake()) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn readable(c: &Core) -> bool {
        let mut p = libc::pollfd { fd: c.fd().as_raw_fd(), events: libc::POLLIN, revents: 0 };
        // SAFETY: one live pollfd, zero timeout.
        let n = unsafe { libc::poll(&mut p, 1, 0) };
        n == 1 && p.revents & libc::POLLIN != 0
    }

    fn wait(c: &Core, ms: i32) -> bool {
        let mut p = libc::pollfd { fd: c.fd().as_raw_fd(), events: libc::POLLIN, revents: 0 };
        // SAFETY: one live pollfd.
        let n = unsafe { libc::poll(&mut p, 1, ms) };
        n == 1
    }

    fn consume(c: &Core) {
        let mut buf = [0u8; 8];
        // SAFETY: reads at most 8 bytes into a live 8-byte buffer.
        unsafe { libc::read(c.fd().as_raw_fd(), buf.as_mut_ptr().cast(), 8) };
    }

    #[test]
    fn a_wake_is_marked_and_expires_the_timer() {
        let core = Core::new().unwrap();
        let w = Waker::new(Arc::clone(&core));
        assert!(!core.take());
        assert!(!readable(&core));
        w.wake();
        assert!(wait(&core, 1000), "the timer did not expire");
        assert!(core.take());
        assert!(!core.take(), "one wake, taken once");
        consume(&core);
        // From another thread, while the owner sleeps.
        let w2 = w.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(50));
            w2.wake();
        });
        assert!(wait(&core, 5000), "the other thread's wake did not end the sleep");
        assert!(core.take());
        t.join().unwrap();
        consume(&core);
        // A wake overrides an expiry armed far off.
        let far = libc::itimerspec {
            it_interval: libc::timespec { tv_sec: 0, tv_nsec: 0 },
            it_value: libc::timespec { tv_sec: 3600, tv_nsec: 0 },
        };
        core.set(false, &far).unwrap();
        w.wake();
        assert!(wait(&core, 1000));
        assert!(core.take());
    }

    #[test]
    fn a_signal_wakes() {
        let core = Core::new().unwrap();
        let w = Waker::new(Arc::clone(&core));
        let id = w.wake_on_signal(libc::SIGUSR2).unwrap();
        // SAFETY: raise(3) sends a signal to this thread; the handler is installed.
        assert_eq!(unsafe { libc::raise(libc::SIGUSR2) }, 0);
        assert!(wait(&core, 1000), "the signal did not wake");
        assert!(core.take());
        assert!(signal_hook_registry::unregister(id));
    }
}
