//! One current-thread runtime per queue, as `rr-server --threads` runs one loop per queue.

use std::future::Future;
use std::io;

use super::net::Net;
use crate::transport::Transport;

/// Runs `app` on `n` threads, each with its own current-thread tokio runtime and its own
/// transport from `make_transport(i)` (called on that thread: a kernel transport with
/// `reuse_port`, or the i-th of [`crate::xsk::XskTransport::shards`]). Returns when every
/// thread's `app` has returned, with the first error. Each thread drains its transport's
/// closing connections (up to a second) before its runtime ends.
pub fn serve_per_queue<T, E, M, A, F>(n: usize, make_transport: M, app: A) -> io::Result<()>
where
    T: Transport + Send + 'static,
    E: Into<Box<dyn std::error::Error + Send + Sync>>,
    M: Fn(usize) -> Result<T, E> + Sync,
    A: Fn(usize, Net) -> F + Sync,
    F: Future<Output = io::Result<()>>,
{
    std::thread::scope(|s| {
        let threads: Vec<_> = (0..n)
            .map(|i| {
                let (make_transport, app) = (&make_transport, &app);
                std::thread::Builder::new().name(format!("queue-{i}")).spawn_scoped(s, move || {
                    let rt = ::tokio::runtime::Builder::new_current_thread().enable_all().build()?;
                    rt.block_on(async {
                        let t = make_transport(i).map_err(io::Error::other)?;
                        let net = Net::spawn(t)?;
                        let r = app(i, net.clone()).await;
                        net.drain(std::time::Duration::from_secs(1)).await;
                        r
                    })
                })
            })
            .collect::<io::Result<_>>()?;
        let mut first = Ok(());
        for t in threads {
            let r = t.join().unwrap_or_else(|_| Err(io::Error::other("a queue's thread panicked")));
            if first.is_ok() {
                first = r;
            }
        }
        first
    })
}
