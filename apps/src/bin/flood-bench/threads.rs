//! Threads for the load: one started inside a network namespace (the sockets it opens stay
//! there), and joining one with its error, or its panic passed on.

use anyhow::{Context, Result};
use xsk_lab::lab::Netns;

/// Runs `f` on a new thread inside `ns` (sockets it creates stay in that namespace).
pub(crate) fn spawn_in<T: Send + 'static>(
    ns: &Netns,
    name: &str,
    f: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<std::thread::JoinHandle<Result<T>>> {
    let ns = ns.clone();
    Ok(std::thread::Builder::new().name(name.into()).spawn(move || {
        let _guard = ns.enter().with_context(|| format!("entering {}", ns.name))?;
        f()
    })?)
}

/// The thread's result; its panic, if it panicked, goes on in this thread.
pub(crate) fn join<T>(h: std::thread::JoinHandle<Result<T>>) -> Result<T> {
    match h.join() {
        Ok(r) => r,
        Err(p) => std::panic::resume_unwind(p),
    }
}
