//! The load side's pieces: the KV workload, the progress wrapper for long runs, and the
//! window that measures the server's CPU over the measured part of a run.

use std::time::{Duration, Instant};

use bytes::BytesMut;

use rr_load::Workload;
use stack::rr::{KvRequest, KvResponse, KvStatus};

use crate::cpu::{pid_cpu, CpuSnapshot};
use crate::netrx;
use xsk_lab::signals;
use crate::report::group_digits;

/// Load for the `kv` service. Each connection owns `keys` keys: its first `keys` requests SET
/// them (value of `value_size` bytes), every later request GETs one of them round robin and
/// checks the value. Connections never touch each other's keys, so pipelining stays
/// deterministic. Requests are 3 + 17 bytes (GET) or that plus the value (SET).
#[derive(Clone, Debug)]
pub struct KvWorkload {
    keys: u64,
    value_size: usize,
    pool: Vec<u8>,
}

/// Key length: `k` + 8 hex digits of the connection + 8 of the key index.
const KV_KEY_LEN: usize = 17;

impl KvWorkload {
    pub fn new(value_size: usize, keys: u64) -> Self {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let pool = (0..value_size + 4096)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        KvWorkload { keys: keys.max(1), value_size, pool }
    }

    fn value(&self, conn: u64, k: u64) -> &[u8] {
        let span = (self.pool.len() - self.value_size + 1) as u64;
        let off = (conn.wrapping_mul(1_000_003).wrapping_add(k.wrapping_mul(7919)) % span) as usize;
        &self.pool[off..off + self.value_size]
    }

    fn key(conn: u64, k: u64) -> [u8; KV_KEY_LEN] {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut key = [b'k'; KV_KEY_LEN];
        for i in 0..8 {
            key[1 + i] = HEX[((conn >> (28 - 4 * i)) & 0xf) as usize];
            key[9 + i] = HEX[((k >> (28 - 4 * i)) & 0xf) as usize];
        }
        key
    }

    fn parse_key(key: &[u8]) -> Option<(u64, u64)> {
        if key.len() != KV_KEY_LEN || key[0] != b'k' {
            return None;
        }
        let hex = |s: &[u8]| u64::from_str_radix(std::str::from_utf8(s).ok()?, 16).ok();
        Some((hex(&key[1..9])?, hex(&key[9..17])?))
    }
}

impl Workload for KvWorkload {
    fn next_request(&mut self, conn: usize, seq: u64, out: &mut BytesMut) {
        let (c, k) = (conn as u64 & 0xffff_ffff, seq % self.keys);
        let key = Self::key(c, k);
        let req = if seq < self.keys {
            KvRequest::Set { key: &key, value: self.value(c, k) }
        } else {
            KvRequest::Get { key: &key }
        };
        // A 17-byte key always fits the u16 key length: encoding cannot fail.
        let _ = req.encode(out);
    }

    fn check(&mut self, _conn: usize, req: &[u8], resp: &[u8]) -> bool {
        let Ok(resp) = KvResponse::parse(resp) else { return false };
        if resp.status != KvStatus::Ok {
            return false;
        }
        match KvRequest::parse(req) {
            Ok(KvRequest::Get { key }) => Self::parse_key(key).is_some_and(|(c, k)| resp.value == self.value(c, k)),
            Ok(KvRequest::Set { .. } | KvRequest::Del { .. }) => resp.value.is_empty(),
            Err(_) => false,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Progress
// ---------------------------------------------------------------------------------------------

/// Wraps a [`Workload`] to print a progress line about once a second while a
/// [`rr_load::Client`] runs: `check` is called for every response on the client's thread,
/// so counting there needs no change to the client and no extra connections. The clock is
/// read about 100 times a second, not per response.
pub struct Progress<W> {
    inner: W,
    enabled: bool,
    phase: String,
    start: Instant,
    next: Instant,
    last_at: Instant,
    total: u64,
    failed: u64,
    last_total: u64,
    stride: u64,
    countdown: u64,
    said_interrupted: bool,
}

impl<W: Workload> Progress<W> {
    pub fn new(inner: W, enabled: bool) -> Self {
        let now = Instant::now();
        Progress {
            inner,
            enabled,
            phase: String::new(),
            start: now,
            next: now,
            last_at: now,
            total: 0,
            failed: 0,
            last_total: 0,
            stride: 1,
            countdown: 1,
            said_interrupted: false,
        }
    }

    /// Starts counting a new phase (e.g. "warm-up", "run").
    pub fn begin(&mut self, phase: &str) {
        let now = Instant::now();
        self.phase = phase.to_string();
        self.start = now;
        self.last_at = now;
        self.next = now + Duration::from_secs(1);
        self.total = 0;
        self.failed = 0;
        self.last_total = 0;
        self.stride = 1;
        self.countdown = 1;
    }

    /// Responses checked in the current phase, and how many failed the check.
    pub fn counts(&self) -> (u64, u64) {
        (self.total, self.failed)
    }

    pub fn inner(&self) -> &W {
        &self.inner
    }

    pub fn inner_mut(&mut self) -> &mut W {
        &mut self.inner
    }

    pub fn into_inner(self) -> W {
        self.inner
    }

    fn tick(&mut self) {
        self.countdown -= 1;
        if self.countdown > 0 {
            return;
        }
        self.countdown = self.stride;
        let now = Instant::now();
        if now < self.next {
            return;
        }
        let dt = now.saturating_duration_since(self.last_at).as_secs_f64();
        let rate = if dt > 0.0 { (self.total - self.last_total) as f64 / dt } else { 0.0 };
        eprintln!(
            "{:>8} {:>6.1}s {:>12} req/s {:>14} responses {:>6} failed checks",
            self.phase,
            now.saturating_duration_since(self.start).as_secs_f64(),
            group_digits(rate.round() as u64),
            group_digits(self.total),
            self.failed,
        );
        if signals::interrupted() && !self.said_interrupted {
            self.said_interrupted = true;
            eprintln!("interrupted: this phase ends at its --duration; press Ctrl-C again to abort at once");
        }
        // About 100 clock reads per second at the current rate.
        self.stride = ((rate / 100.0) as u64).clamp(1, 1 << 20);
        self.countdown = self.stride;
        self.last_at = now;
        self.last_total = self.total;
        while self.next <= now {
            self.next += Duration::from_secs(1);
        }
    }
}

impl<W: Workload> Workload for Progress<W> {
    fn next_request(&mut self, conn: usize, seq: u64, out: &mut BytesMut) {
        self.inner.next_request(conn, seq, out)
    }

    fn check(&mut self, conn: usize, req: &[u8], resp: &[u8]) -> bool {
        let ok = self.inner.check(conn, req, resp);
        self.total += 1;
        self.failed += u64::from(!ok);
        if self.enabled {
            self.tick();
        }
        ok
    }

    fn response_len(&self, req: &[u8]) -> Option<usize> {
        self.inner.response_len(req)
    }
}

// ---------------------------------------------------------------------------------------------
// CPU accounting window
// ---------------------------------------------------------------------------------------------

/// CPU counters at one instant: this process and the machine (a [`CpuSnapshot`]), and the
/// server process if one is watched.
#[derive(Clone, Copy, Debug)]
pub struct CpuSample {
    pub snap: CpuSnapshot,
    pub server: Option<Duration>,
    /// NET_RX softirq time by context, when the server is watched and [`netrx::install`]ed.
    pub netrx: Option<netrx::NetRxTimes>,
}

impl CpuSample {
    pub fn now(server_pid: Option<u32>) -> Option<CpuSample> {
        let snap = CpuSnapshot::now().ok()?;
        let server = server_pid.and_then(|p| pid_cpu(p).ok());
        let netrx = server_pid.and_then(|_| netrx::installed());
        Some(CpuSample { snap, server, netrx })
    }
}

/// Wraps a [`Workload`] to read the CPU counters exactly around the measured window: when the
/// first request is issued (after every connection is established) and when the run's
/// duration has passed (checked every few responses). Readings taken around the whole
/// `Client::run` would also count connection setup and teardown, which at 10,000 connections
/// take longer than the run itself.
pub struct CpuWindow<W> {
    inner: W,
    server_pid: Option<u32>,
    length: Option<Duration>,
    pub start: Option<CpuSample>,
    pub end: Option<CpuSample>,
    countdown: u32,
}

/// Responses between clock reads while the window is open.
const WINDOW_STRIDE: u32 = 16;

impl<W> CpuWindow<W> {
    pub fn new(inner: W, server_pid: Option<u32>) -> Self {
        CpuWindow { inner, server_pid, length: None, start: None, end: None, countdown: WINDOW_STRIDE }
    }

    /// Opens a window at the next request, to close `length` later; `None` disarms it.
    pub fn arm(&mut self, length: Option<Duration>) {
        self.length = length;
        self.start = None;
        self.end = None;
        self.countdown = WINDOW_STRIDE;
    }

    pub fn inner(&self) -> &W {
        &self.inner
    }
}

impl<W: Workload> Workload for CpuWindow<W> {
    fn next_request(&mut self, conn: usize, seq: u64, out: &mut BytesMut) {
        if self.length.is_some() && self.start.is_none() {
            self.start = CpuSample::now(self.server_pid);
        }
        self.inner.next_request(conn, seq, out)
    }

    fn check(&mut self, conn: usize, req: &[u8], resp: &[u8]) -> bool {
        let ok = self.inner.check(conn, req, resp);
        if let (Some(len), Some(start), None) = (self.length, &self.start, &self.end) {
            self.countdown -= 1;
            if self.countdown == 0 {
                self.countdown = WINDOW_STRIDE;
                if start.snap.at.elapsed() >= len {
                    self.end = CpuSample::now(self.server_pid);
                }
            }
        }
        ok
    }

    fn response_len(&self, req: &[u8]) -> Option<usize> {
        self.inner.response_len(req)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stack::rr::{Handler, Kv};
    use stack::ConnId;

    #[test]
    fn kv_workload_against_kv_handler() {
        let mut w = KvWorkload::new(100, 4);
        let mut h = Kv::new();
        let (mut req, mut resp) = (BytesMut::new(), BytesMut::new());
        for conn in 0..3 {
            for seq in 0..20 {
                req.clear();
                resp.clear();
                w.next_request(conn, seq, &mut req);
                assert!(matches!(KvRequest::parse(&req), Ok(KvRequest::Set { .. })) == (seq < 4));
                h.handle(ConnId(0), &mut (), &req, &mut resp);
                assert!(w.check(conn, &req, &resp), "conn {conn} seq {seq}");
            }
        }
        assert_eq!(h.len(), 12);
        // A wrong value, a miss and garbage fail the check.
        req.clear();
        w.next_request(0, 10, &mut req);
        assert!(!w.check(0, &req, b"\x00wrong"));
        assert!(!w.check(0, &req, b"\x01"));
        assert!(!w.check(0, &req, b""));
        assert!(!w.check(0, b"garbage", b"\x00"));
        assert_eq!(KvWorkload::parse_key(&KvWorkload::key(0xdead_beef, 7)), Some((0xdead_beef, 7)));
        assert_eq!(KvWorkload::parse_key(b"kzzzzzzzz00000000"), None);
    }

    #[test]
    fn progress_forwards_and_counts() {
        let mut p = Progress::new(rr_load::EchoWorkload::fixed(8), false);
        p.begin("run");
        let mut out = BytesMut::new();
        p.next_request(0, 0, &mut out);
        assert_eq!(out.len(), 8);
        assert_eq!(p.response_len(&out), Some(8));
        assert!(p.check(0, &out, &out));
        assert!(!p.check(0, &out, b"x"));
        assert_eq!(p.counts(), (2, 1));
    }
}
