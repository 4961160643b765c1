//! SIGINT/SIGTERM for the lab-using binaries (xsk-bench, rr-server,
//! rr-bench, rr-demo): the first signal sets a flag their loops poll, so they
//! return and `Drop` restores devices and removes labs; the second removes the
//! registered labs ([`crate::lab::cleanup_registered`]) and dies of the
//! signal. A library user installs no handlers: this is in the lab kit, not
//! in xsk-io.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Once;
use std::thread;
use std::time::Duration;

use crate::lab::registry::cleanup_registered;


static INTERRUPTED: AtomicBool = AtomicBool::new(false);
static FORCE_EXIT: AtomicBool = AtomicBool::new(false);
static LAST_SIGNAL: AtomicI32 = AtomicI32::new(0);
static SIGNALS: Once = Once::new();

extern "C" fn on_signal(sig: libc::c_int) {
    // Async-signal-safe: lock-free atomic stores only.
    LAST_SIGNAL.store(sig, Ordering::SeqCst);
    if INTERRUPTED.swap(true, Ordering::SeqCst) {
        FORCE_EXIT.store(true, Ordering::SeqCst);
    }
}

/// Install SIGINT/SIGTERM handling (idempotent). The first signal only sets
/// the flag returned by [`interrupted`], which long-running loops poll so they
/// return and `Drop` cleans up. On a second signal a watchdog thread deletes
/// all registered labs and the process dies of that signal.
///
/// Handlers use SA_RESTART: a thread blocked in a syscall stays blocked, so
/// such loops need timeouts to notice the flag.
pub fn install_signal_handlers() {
    SIGNALS.call_once(|| {
        thread::Builder::new()
            .name("lab-signals".into())
            .spawn(signal_watchdog)
            .expect("spawn lab signal watchdog thread");
        for sig in [libc::SIGINT, libc::SIGTERM] {
            // SAFETY: a zeroed sigaction is a valid initial value; the handler
            // is an `extern "C" fn(c_int)` that only touches atomics.
            let rc = unsafe {
                let mut sa: libc::sigaction = std::mem::zeroed();
                sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
                sa.sa_flags = libc::SA_RESTART;
                libc::sigemptyset(&mut sa.sa_mask);
                libc::sigaction(sig, &sa, std::ptr::null_mut())
            };
            if rc != 0 {
                tracing::warn!(sig, error = %io::Error::last_os_error(), "sigaction failed");
            }
        }
    });
}

/// True once SIGINT or SIGTERM arrived (after [`install_signal_handlers`]).
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::Relaxed)
}

fn signal_watchdog() {
    loop {
        thread::sleep(Duration::from_millis(50));
        if !FORCE_EXIT.load(Ordering::SeqCst) {
            continue;
        }
        let sig = LAST_SIGNAL.load(Ordering::SeqCst);
        let removed = cleanup_registered();
        eprintln!("lab: second signal {sig}: removed {removed} lab namespace(s), exiting");
        // SAFETY: restore the default action and re-raise so the parent sees
        // death by signal; `_exit` is the fallback and skips atexit hooks.
        unsafe {
            libc::signal(sig, libc::SIG_DFL);
            libc::kill(libc::getpid(), sig);
        }
        thread::sleep(Duration::from_millis(200));
        // SAFETY: terminates the process without running destructors.
        unsafe { libc::_exit(128 + sig) };
    }
}
