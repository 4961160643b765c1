//! Echo requests on kernel TCP connections from ns_b: the established connection's closed
//! loop, the fresh connections arriving during the flood, and the check of the idle ones.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, SocketAddrV4, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use anyhow::Result;
use hdrhistogram::Histogram;
use serde::Serialize;

pub(crate) fn request(len: usize) -> Vec<u8> {
    let mut r = (len as u32).to_be_bytes().to_vec();
    r.extend((0..len).map(|i| i as u8));
    r
}

/// Sends one echo request on every connection, then reads the answers: how many answered
/// correctly within `limit`.
pub(crate) fn check_held(conns: &mut [TcpStream], limit: Duration) -> Result<usize> {
    let req = request(8);
    let deadline = Instant::now() + limit;
    let mut sent = vec![false; conns.len()];
    for (c, s) in conns.iter_mut().zip(&mut sent) {
        *s = c.write_all(&req).is_ok();
    }
    let mut held = 0;
    let mut buf = vec![0u8; req.len()];
    for (c, s) in conns.iter_mut().zip(&sent) {
        let left = deadline.saturating_duration_since(Instant::now());
        if !*s || left.is_zero() {
            continue;
        }
        c.set_read_timeout(Some(left.max(Duration::from_millis(1))))?;
        if c.read_exact(&mut buf).is_ok() && buf == req {
            held += 1;
        }
    }
    Ok(held)
}

pub(crate) struct Latency {
    pub(crate) hist: Histogram<u64>,
    pub(crate) requests: u64,
    pub(crate) errors: u64,
    pub(crate) measured: Duration,
}

/// Closed-loop echo requests on `conn` from `start` until `stop` is set. A request that is
/// slow to come back is waited for (its latency is what a flood does to this connection); one
/// outstanding when `stop` comes gets `GRACE` more, and one with no answer after `GIVE_UP` ends
/// the measurement as an error.
pub(crate) fn measure(mut conn: TcpStream, req_size: usize, start: Arc<Barrier>, stop: Arc<AtomicBool>, done: Arc<AtomicU64>) -> Result<Latency> {
    const GRACE: Duration = Duration::from_secs(10);
    const GIVE_UP: Duration = Duration::from_secs(30);
    let mut hist = Histogram::<u64>::new_with_bounds(1, 120_000_000, 3)?;
    let req = request(req_size);
    let mut resp = vec![0u8; req.len()];
    conn.set_read_timeout(Some(Duration::from_millis(200)))?;
    conn.set_write_timeout(Some(GIVE_UP))?;
    let (mut requests, mut errors) = (0u64, 0u64);
    start.wait();
    let t0 = Instant::now();
    let mut stopped_at: Option<Instant> = None;
    'outer: while !stop.load(Ordering::Relaxed) {
        let t = Instant::now();
        if conn.write_all(&req).is_err() {
            errors += 1;
            break;
        }
        let mut got = 0;
        while got < resp.len() {
            match conn.read(&mut resp[got..]) {
                Ok(0) => {
                    errors += 1;
                    break 'outer;
                }
                Ok(n) => got += n,
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted) => {
                    if stop.load(Ordering::Relaxed) {
                        let at = *stopped_at.get_or_insert_with(Instant::now);
                        if at.elapsed() > GRACE {
                            errors += 1;
                            break 'outer;
                        }
                    }
                    if t.elapsed() > GIVE_UP {
                        errors += 1;
                        break 'outer;
                    }
                }
                Err(_) => {
                    errors += 1;
                    break 'outer;
                }
            }
        }
        if resp != req {
            errors += 1;
            break;
        }
        hist.saturating_record(t.elapsed().as_micros().max(1) as u64);
        requests += 1;
        done.store(requests, Ordering::Relaxed);
    }
    Ok(Latency { hist, requests, errors, measured: t0.elapsed() })
}

/// Fresh connections opened during the measurement: how long each took to establish.
#[derive(Debug, Default, Serialize)]
pub(crate) struct Fresh {
    /// Attempts started.
    pub(crate) tried: u64,
    /// Established, and the echo request answered.
    pub(crate) ok: u64,
    /// Established within 100 ms.
    pub(crate) within_100ms: u64,
    /// Milliseconds to establish (connect returned), of those established.
    pub(crate) p50_ms: f64,
    pub(crate) p99_ms: f64,
    pub(crate) max_ms: f64,
    /// Connect times, in milliseconds, of those established (in the order they finished).
    pub(crate) connect_ms: Vec<f64>,
}

/// Every `every` from `start` until `stop`: a fresh kernel TCP connection to `to`, each on its
/// own thread so that a slow one does not delay the next (connect with the kernel's SYN retries,
/// up to 15 s; then one 32-byte echo request; close). Waits for the attempts still running.
pub(crate) fn fresh_connections(to: SocketAddrV4, every: Duration, start: Arc<Barrier>, stop: Arc<AtomicBool>) -> Result<Fresh> {
    let results = Arc::new(Mutex::new(Vec::<(f64, bool)>::new()));
    let mut threads = Vec::new();
    start.wait();
    let mut next = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        if now < next {
            std::thread::sleep((next - now).min(Duration::from_millis(20)));
            continue;
        }
        next += every;
        let results = results.clone();
        // A new thread inherits this thread's network namespace.
        threads.push(std::thread::spawn(move || {
            let t = Instant::now();
            let Ok(mut c) = TcpStream::connect_timeout(&SocketAddr::V4(to), Duration::from_secs(15)) else { return };
            let ms = t.elapsed().as_secs_f64() * 1e3;
            let req = request(32);
            let mut resp = vec![0u8; req.len()];
            let _ = c.set_nodelay(true);
            let _ = c.set_read_timeout(Some(Duration::from_secs(5)));
            let ok = c.write_all(&req).is_ok() && c.read_exact(&mut resp).is_ok() && resp == req;
            results.lock().expect("fresh results").push((ms, ok));
        }));
    }
    let mut f = Fresh { tried: threads.len() as u64, ..Fresh::default() };
    for t in threads {
        let _ = t.join();
    }
    let r = std::mem::take(&mut *results.lock().expect("fresh results"));
    f.connect_ms = r.iter().map(|&(ms, _)| ms).collect();
    f.ok = r.iter().filter(|&&(_, ok)| ok).count() as u64;
    f.within_100ms = f.connect_ms.iter().filter(|&&ms| ms <= 100.0).count() as u64;
    let mut v = f.connect_ms.clone();
    v.sort_by(f64::total_cmp);
    let q = |p: f64| if v.is_empty() { 0.0 } else { v[((v.len() - 1) as f64 * p).round() as usize] };
    f.p50_ms = q(0.5);
    f.p99_ms = q(0.99);
    f.max_ms = v.last().copied().unwrap_or(0.0);
    Ok(f)
}
