//! A POSIX timer that ends one thread's sleep with a signal: the xsk driver's deadlines and
//! wakes without a descriptor in its poll(2).
//!
//! Every descriptor in a poll(2) costs a wait-queue entry added and removed on each sleep, and
//! the driver sleeps once per request at light load. With the timerfd in the set (there
//! whenever a response is in flight, for the retransmission timer, or a waker may end the
//! sleep) a guest took about 400-600 instructions per request more than with the XSK socket
//! alone (`docs/2026-12-04-sleep/`).
//!
//! This timer (`timer_create` with `SIGEV_THREAD_ID`) signals the thread that sleeps, where
//! the signal is blocked except inside the sleep: ppoll(2) unblocks it for the wait alone, so
//! an expiry or a wake that comes while the loop runs stays pending and ends the next sleep at
//! once, and one that comes during the sleep ends it with EINTR. A signal is delivered only
//! when the timer fires, which the lazy arming of [`crate::timer`] keeps rare.
//!
//! The signal's action (installed once per signal, through signal-hook's registry; a signal
//! that already has someone else's handler is refused) only notes, for the thread, that the
//! alarm fired: the driver then knows an EINTR for its own and goes on, where another signal's
//! EINTR returns to the caller as before.

use std::cell::Cell;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Mutex;

thread_local! {
    /// Set by the signal's action in the thread it interrupted (an atomic, as the action
    /// writes it between two instructions of the code it interrupted).
    static FIRED: AtomicBool = const { AtomicBool::new(false) };
    /// This thread's kernel id, read once.
    static TID: Cell<libc::pid_t> = const { Cell::new(0) };
}

/// Whether an alarm's signal interrupted this thread since the last call.
#[inline]
pub(crate) fn take_fired() -> bool {
    FIRED.with(|f| f.swap(false, Ordering::Relaxed))
}

/// Forgets a mark left from before (call before a sleep, so that its EINTR is told apart).
#[inline]
pub(crate) fn reset_fired() {
    FIRED.with(|f| f.store(false, Ordering::Relaxed));
}

/// Whether `sig` is the signal of some transport's timer (a [`Waker`](crate::Waker) must not
/// wake on it: its wake would signal again, without end).
pub(crate) fn is_sleep_signal(sig: libc::c_int) -> bool {
    (1..=64).contains(&sig) && *INSTALLED.lock().unwrap_or_else(|p| p.into_inner()) & (1u64 << (sig - 1)) != 0
}

/// The calling thread's kernel id (gettid(2), once per thread).
#[inline]
pub(crate) fn tid() -> libc::pid_t {
    TID.with(|t| {
        if t.get() == 0 {
            // SAFETY: gettid takes no argument and cannot fail.
            t.set(unsafe { libc::gettid() });
        }
        t.get()
    })
}

/// Signals whose action is installed (bit n-1: signal n; Linux has 64).
static INSTALLED: Mutex<u64> = Mutex::new(0);

fn install(sig: libc::c_int) -> io::Result<()> {
    // A real-time signal: a standard one (SIGINT, SIGCHLD, ...) would be blocked in the
    // polling thread and taken for an expiry when it comes.
    if !(libc::SIGRTMIN()..=libc::SIGRTMAX()).contains(&sig) || sig > 64 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("signal {sig} is not a real-time signal ({}-{})", libc::SIGRTMIN(), libc::SIGRTMAX()),
        ));
    }
    let mut done = INSTALLED.lock().unwrap_or_else(|p| p.into_inner());
    if *done & (1u64 << (sig - 1)) != 0 {
        return Ok(());
    }
    // A handler of someone else's on the signal: it is in use, its signals would be taken for
    // expiries and its handler would run at ours. (The default action and "ignore" are no
    // one's.)
    // SAFETY: sigaction(2) with no new action writes the current one to `old`, a live local.
    let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    if unsafe { libc::sigaction(sig, std::ptr::null(), &mut old) } != 0 {
        return Err(io::Error::last_os_error());
    }
    if old.sa_sigaction != libc::SIG_DFL && old.sa_sigaction != libc::SIG_IGN {
        return Err(io::Error::new(
            io::ErrorKind::AddrInUse,
            format!("signal {sig} already has a handler in this process (another can be chosen: XskConfig::sleep_signal)"),
        ));
    }
    // SAFETY: the action stores to a `const`-initialised thread-local atomic (no lazy
    // initialisation, no destructor) and allocates nothing. Our timers signal only threads
    // that have run `block_here`, which touches that thread-local first: nothing can arm a
    // new timer before `PreciseTimer::with_signal` has blocked the signal in its thread, and
    // a rebind blocks it in the new thread before binding there. So even in a library loaded
    // with dlopen, whose TLS block is allocated on first use, the action finds it allocated.
    // Only a signal someone else sends the whole process could reach another thread first;
    // that signal is then in use elsewhere, which the check above refuses where it can see
    // it (a handler already there) and the README tells users to avoid.
    unsafe { signal_hook_registry::register(sig, || FIRED.with(|f| f.store(true, Ordering::Relaxed)))? };
    *done |= 1u64 << (sig - 1);
    Ok(())
}

/// One POSIX timer whose expiry signals the thread it is bound to.
#[derive(Debug)]
pub(crate) struct SigTimer {
    sig: libc::c_int,
    /// The kernel's timer id (a raw id, not libc's `timer_t`: a waker on another thread may
    /// use an id that a rebind has just deleted, which the kernel refuses; only if the kernel
    /// handed that id out again in the meantime, to this or another timer of the process,
    /// would that timer fire early once, which its owner takes as an early expiry).
    id: AtomicI32,
    /// The thread the timer signals.
    tid: AtomicI32,
}

impl SigTimer {
    /// A timer that signals the calling thread with `sig`; installs the signal's action.
    pub(crate) fn new(sig: libc::c_int) -> io::Result<SigTimer> {
        install(sig)?;
        let tid = tid();
        let id = create(sig, tid)?;
        Ok(SigTimer { sig, id: AtomicI32::new(id), tid: AtomicI32::new(tid) })
    }

    pub(crate) fn signal(&self) -> libc::c_int {
        self.sig
    }

    /// The thread the timer signals.
    pub(crate) fn bound_tid(&self) -> libc::pid_t {
        self.tid.load(Ordering::Relaxed)
    }

    /// Binds the timer to the calling thread if it is not (a transport created on one thread
    /// and run on another). True if it was re-bound: the new timer is not armed.
    pub(crate) fn bind_here(&self) -> io::Result<bool> {
        let me = tid();
        if self.tid.load(Ordering::Relaxed) == me {
            return Ok(false);
        }
        self.rebind(me)?;
        Ok(true)
    }

    fn rebind(&self, me: libc::pid_t) -> io::Result<()> {
        let id = create(self.sig, me)?;
        let old = self.id.swap(id, Ordering::SeqCst);
        self.tid.store(me, Ordering::Relaxed);
        // SAFETY: deletes our own timer by its kernel id; no memory is passed.
        unsafe { libc::syscall(libc::SYS_timer_delete, old) };
        Ok(())
    }

    /// Sets the timer (flags: `libc::TIMER_ABSTIME` for an absolute CLOCK_MONOTONIC expiry).
    /// Async-signal-safe: one system call.
    pub(crate) fn set(&self, flags: libc::c_int, spec: &libc::itimerspec) -> io::Result<()> {
        let id = self.id.load(Ordering::SeqCst);
        // SAFETY: `spec` is a valid itimerspec for the call's duration; no old value is asked.
        let r = unsafe {
            libc::syscall(libc::SYS_timer_settime, id, flags, spec as *const libc::itimerspec, std::ptr::null_mut::<libc::itimerspec>())
        };
        if r == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    /// Blocks the signal in the calling thread; returns the mask to sleep with (the thread's
    /// mask before, the signal unblocked) in the kernel's form: bit n-1 for signal n, the
    /// 8 bytes that rt_sigprocmask(2) and ppoll(2) take (glibc's `sigset_t` is 128, and
    /// copying it on every sleep showed in the instruction count). Call on the thread that
    /// sleeps.
    pub(crate) fn block_here(&self) -> io::Result<u64> {
        reset_fired();
        let bit = 1u64 << (self.sig - 1);
        let mut old = 0u64;
        // SAFETY: rt_sigprocmask reads 8 bytes from `bit` and writes 8 to `old`, both live
        // locals; sigsetsize 8 is the kernel's on x86-64, arm64 and riscv64 (a kernel that
        // wants another size refuses it with EINVAL: the transport then uses a timerfd).
        let r = unsafe { libc::syscall(libc::SYS_rt_sigprocmask, libc::SIG_BLOCK, &bit as *const u64, &mut old as *mut u64, 8usize) };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(old & !bit)
    }
}

impl Drop for SigTimer {
    fn drop(&mut self) {
        // SAFETY: deletes our own timer by its kernel id; no memory is passed.
        unsafe { libc::syscall(libc::SYS_timer_delete, self.id.load(Ordering::SeqCst)) };
    }
}

/// A CLOCK_MONOTONIC timer that signals thread `tid` with `sig`; its kernel id.
fn create(sig: libc::c_int, tid: libc::pid_t) -> io::Result<libc::c_int> {
    // SAFETY: sigevent is plain data; all-zero is a valid start.
    let mut sev: libc::sigevent = unsafe { std::mem::zeroed() };
    sev.sigev_notify = libc::SIGEV_THREAD_ID;
    sev.sigev_signo = sig;
    sev.sigev_notify_thread_id = tid;
    let mut id: libc::c_int = 0;
    // SAFETY: `sev` is a valid sigevent (the kernel's layout: libc mirrors it) and `id` a
    // live c_int for the kernel to write the new timer's id to.
    let r = unsafe {
        libc::syscall(libc::SYS_timer_create, libc::CLOCK_MONOTONIC, &sev as *const libc::sigevent, &mut id as *mut libc::c_int)
    };
    if r == 0 {
        Ok(id)
    } else {
        Err(io::Error::last_os_error())
    }
}

/// ppoll(2) on nothing with `mask` for at most `ms`: true if a signal ended it.
#[cfg(test)]
pub(crate) fn sleep_masked(mask: u64, ms: u64) -> bool {
    let mut ts = libc::timespec { tv_sec: (ms / 1000) as libc::time_t, tv_nsec: ((ms % 1000) * 1_000_000) as libc::c_long };
    // SAFETY: no descriptors, a live timespec and 8-byte mask.
    let r = unsafe {
        libc::syscall(libc::SYS_ppoll, std::ptr::null_mut::<libc::pollfd>(), 0, &mut ts as *mut libc::timespec, &mask as *const u64, 8usize)
    };
    r < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn after(d: Duration) -> libc::itimerspec {
        libc::itimerspec {
            it_interval: libc::timespec { tv_sec: 0, tv_nsec: 0 },
            it_value: libc::timespec { tv_sec: d.as_secs() as libc::time_t, tv_nsec: d.subsec_nanos() as libc::c_long },
        }
    }

    // Each test runs on its own thread (the test harness's), so the thread-directed signal and
    // the per-thread mark are the test's own.
    #[test]
    fn an_expiry_ends_the_sleep_and_one_before_it_is_not_lost() {
        let sig = libc::SIGRTMIN() + 7;
        let t = SigTimer::new(sig).unwrap();
        let mask = t.block_here().unwrap();
        take_fired();
        let start = Instant::now();
        t.set(0, &after(Duration::from_millis(20))).unwrap();
        assert!(sleep_masked(mask, 5000), "the expiry did not end the sleep");
        assert!(take_fired());
        let took = start.elapsed();
        assert!(took >= Duration::from_millis(20) && took < Duration::from_secs(2), "{took:?}");
        // Fired while the thread was not sleeping: blocked, pending, and the next sleep ends at
        // once.
        t.set(0, &after(Duration::from_micros(1))).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        assert!(!take_fired(), "the signal was not blocked outside the sleep");
        let start = Instant::now();
        assert!(sleep_masked(mask, 5000));
        assert!(take_fired());
        assert!(start.elapsed() < Duration::from_secs(1));
    }

    #[test]
    fn a_timer_made_on_one_thread_signals_the_one_that_binds_it() {
        let sig = libc::SIGRTMIN() + 7;
        let t = std::sync::Arc::new(SigTimer::new(sig).unwrap());
        let t2 = std::sync::Arc::clone(&t);
        let h = std::thread::spawn(move || {
            assert!(t2.bind_here().unwrap(), "a new thread must re-bind");
            assert!(!t2.bind_here().unwrap());
            let mask = t2.block_here().unwrap();
            t2.set(0, &after(Duration::from_millis(10))).unwrap();
            let ok = sleep_masked(mask, 5000);
            (ok, take_fired())
        });
        assert_eq!(h.join().unwrap(), (true, true));
        assert!(!take_fired(), "the first thread was signalled");
    }

    #[test]
    fn a_signal_with_someone_elses_handler_is_refused() {
        let sig = libc::SIGRTMIN() + 9;
        signal_hook::flag::register(sig, std::sync::Arc::new(AtomicBool::new(false))).unwrap();
        let e = SigTimer::new(sig).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AddrInUse, "{e}");
        assert!(!is_sleep_signal(sig));
    }

    #[test]
    fn bad_signals_are_refused() {
        for sig in [0, libc::SIGKILL, libc::SIGINT, libc::SIGCHLD, libc::SIGUSR1, libc::SIGRTMAX() + 1, i32::MAX] {
            assert!(SigTimer::new(sig).is_err(), "{sig}");
        }
    }
}
