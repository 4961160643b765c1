//! What starts and stops the server loops besides their own errors: SIGINT/SIGTERM, the
//! stop flag that wakes every loop, and the ready file.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result};
use stack::Waker;

/// Set by the first SIGINT or SIGTERM: the loop stops, the transport is dropped and the
/// interface put back. A second one ends the process at once (status 1; the XDP program
/// goes with it, the next start restores the device's settings).
static INTERRUPTED: std::sync::OnceLock<Arc<AtomicBool>> = std::sync::OnceLock::new();

pub(crate) fn interrupted() -> bool {
    INTERRUPTED.get().is_some_and(|f| f.load(Ordering::Relaxed))
}

/// signal-hook's two-step idiom: the conditional exit is registered first, so it sees
/// the flag as the first signal left it.
pub(crate) fn install_signal_handlers() -> Result<()> {
    let flag = Arc::clone(INTERRUPTED.get_or_init(|| Arc::new(AtomicBool::new(false))));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register_conditional_shutdown(sig, 1, Arc::clone(&flag))
            .and_then(|_| signal_hook::flag::register(sig, Arc::clone(&flag)))
            .with_context(|| format!("installing the handler of signal {sig}"))?;
    }
    Ok(())
}

/// Why the loop stopped.
pub(crate) fn stop_reason(deadline: Option<Instant>) -> &'static str {
    if interrupted() {
        "signal"
    } else if deadline.is_some_and(|d| Instant::now() >= d) {
        "--duration"
    } else {
        "error"
    }
}

/// Removes the ready file when dropped, whatever way `run` ends.
pub(crate) struct ReadyFile<'a>(pub(crate) Option<&'a Path>);

impl Drop for ReadyFile<'_> {
    fn drop(&mut self) {
        if let Some(p) = self.0 {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// What stops the server loops besides signals and `--duration`: with `--threads`, a thread
/// that failed or a ready file that could not be written. Setting it wakes every loop, which
/// sleeps without a timeout.
pub(crate) struct Stop {
    flag: AtomicBool,
    wakers: Mutex<Vec<Waker>>,
}

impl Stop {
    pub(crate) fn new() -> Self {
        Stop { flag: AtomicBool::new(false), wakers: Mutex::new(Vec::new()) }
    }

    pub(crate) fn set(&self) {
        self.flag.store(true, Ordering::Relaxed);
        for w in self.wakers.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            w.wake();
        }
    }

    pub(crate) fn is_set(&self) -> bool {
        self.flag.load(Ordering::Relaxed)
    }

    /// `w` is woken by [`Stop::set`] from now on (a loop checks the flag after this).
    pub(crate) fn watch(&self, w: Waker) {
        self.wakers.lock().unwrap_or_else(|e| e.into_inner()).push(w);
    }
}

/// Signals that wake a loop through its waker, unregistered when dropped (the loop is gone).
pub(crate) struct SignalWakes(Vec<signal_hook::SigId>);

impl SignalWakes {
    /// SIGINT and SIGTERM (after their flag, registered first, is set) and SIGUSR1 wake the
    /// loop whichever thread gets them, and also between its check of the flags and its
    /// sleep (`Waker::wake_on_signal`).
    pub(crate) fn register(w: &Waker) -> std::io::Result<SignalWakes> {
        let mut ids = SignalWakes(Vec::new());
        for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM, signal_hook::consts::SIGUSR1] {
            ids.0.push(w.wake_on_signal(sig)?);
        }
        Ok(ids)
    }
}

impl Drop for SignalWakes {
    fn drop(&mut self) {
        for id in self.0.drain(..) {
            signal_hook::low_level::unregister(id);
        }
    }
}

impl ReadyFile<'_> {
    pub(crate) fn notifier(&self) -> impl Fn(&str) -> Result<()> + Sync + '_ {
        move |listen: &str| match self.0 {
            Some(p) => apps::write_atomically(p, format!("{listen}\n").as_bytes()),
            None => Ok(()),
        }
    }
}
