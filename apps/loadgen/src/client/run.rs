//! The timed part of [`Client::run`]: issuing requests (closed loop: refill on each response;
//! open loop: on a fixed schedule), matching responses FIFO per connection, checking them, and
//! recording latency.

use std::time::{Duration, Instant};

use bytes::{Buf, BytesMut};
use stack::codec::Codec;
use stack::transport::{Event, Transport};

use super::{Client, ClientConn, ClientError, LoadMode};
use crate::{ClientReport, Workload};

/// One request waiting for its response.
#[derive(Clone, Copy, Debug)]
pub(super) struct InFlight {
    /// Send time (closed loop) or scheduled time (open loop).
    at: Instant,
    len: usize,
}

/// Per-run counters and limits, kept apart from the connections so both can be borrowed.
struct RunState {
    report: ClientReport,
    issued: u64,
    /// Requests issued and neither answered nor lost.
    outstanding: usize,
    max_requests: u64,
    deadline: Instant,
    closed_loop: bool,
    last_response: Option<Instant>,
}

impl RunState {
    fn may_issue(&self, now: Instant) -> bool {
        self.issued < self.max_requests && now < self.deadline
    }
}

impl<T: Transport, C: Codec + Clone, W: Workload> Client<T, C, W> {
    /// Issues the load on the established connections until the duration or request budget is
    /// spent, then waits out the drain; returns what was measured.
    pub(super) fn drive(&mut self) -> Result<ClientReport, ClientError> {
        let start = Instant::now();
        let mut st = RunState {
            report: ClientReport::empty(self.transport.name(), self.conns.len()),
            issued: 0,
            outstanding: 0,
            max_requests: self.cfg.max_requests.unwrap_or(u64::MAX),
            deadline: start + self.cfg.duration,
            closed_loop: matches!(self.cfg.mode, LoadMode::ClosedLoop { .. }),
            last_response: None,
        };
        let drain_deadline = st.deadline + self.cfg.drain_timeout;
        let mut live = self.conns.len();

        // Open-loop schedule: request k is due at start + k * interval.
        let interval = match self.cfg.mode {
            LoadMode::OpenLoop { rate } => Duration::from_secs_f64(1.0 / rate),
            LoadMode::ClosedLoop { .. } => Duration::ZERO,
        };
        let mut next_due = start;
        let mut rr_next = 0usize;

        if let LoadMode::ClosedLoop { depth } = self.cfg.mode {
            // Prime every connection with `depth` requests.
            for i in 0..self.conns.len() {
                for _ in 0..depth {
                    if !st.may_issue(start) {
                        break;
                    }
                    issue(&mut self.conns[i], i, &mut self.workload, &mut self.scratch, start, &mut st);
                }
                live -= self.flush_conn(i, &mut st);
            }
            self.transport.flush()?;
        }

        let mut events = std::mem::take(&mut self.events);
        let result = loop {
            let now = Instant::now();
            if !st.closed_loop {
                // Issue everything that is due. When we are late this batches several
                // requests per connection, but each keeps its scheduled timestamp.
                while live > 0 && next_due <= now && next_due < st.deadline && st.issued < st.max_requests {
                    let i = next_live(&self.conns, &mut rr_next);
                    issue(&mut self.conns[i], i, &mut self.workload, &mut self.scratch, next_due, &mut st);
                    live -= self.flush_conn(i, &mut st);
                    next_due += interval;
                }
            }
            let issuing =
                if st.closed_loop { st.may_issue(now) } else { next_due < st.deadline && st.issued < st.max_requests };
            if live == 0 || (!issuing && st.outstanding == 0) || now >= drain_deadline {
                st.report.lost += st.outstanding as u64;
                break Ok(());
            }

            let timeout = if self.cfg.busy_poll {
                Duration::ZERO
            } else {
                let wake = if !issuing {
                    drain_deadline
                } else if st.closed_loop {
                    st.deadline
                } else {
                    next_due
                };
                wake.saturating_duration_since(now)
            };
            events.clear();
            if let Err(e) = self.transport.poll(&mut events, Some(timeout)) {
                break Err(e);
            }
            for ev in events.drain(..) {
                let (Event::Readable(id) | Event::Writable(id) | Event::Closed(id)) = ev else { continue };
                let Some(&i) = self.index.get(&id) else { continue };
                if !self.conns[i].alive {
                    continue;
                }
                if let Event::Closed(_) = ev {
                    // The server hung up mid-run: responses still in flight are lost.
                    live -= self.kill(i, &mut st);
                    continue;
                }
                if let Event::Readable(_) = ev {
                    if self.on_readable(i, &mut st) {
                        live -= self.kill(i, &mut st);
                        continue;
                    }
                }
                live -= self.flush_conn(i, &mut st);
            }
            if let Err(e) = self.transport.flush() {
                break Err(e);
            }
        };
        self.events = events;
        result?;
        let end = st.last_response.unwrap_or_else(Instant::now);
        st.report.duration = end.saturating_duration_since(start);
        Ok(st.report)
    }

    /// Drains the connection, matches responses FIFO, and (closed loop) refills the pipeline.
    /// Returns true if the connection must be killed (protocol violation).
    fn on_readable(&mut self, i: usize, st: &mut RunState) -> bool {
        let conn = &mut self.conns[i];
        loop {
            let n = match self.transport.recv(conn.id, &mut conn.rbuf) {
                Ok(n) => n,
                Err(_) => return true,
            };
            if n == 0 {
                return false;
            }
            st.report.bytes_received += n as u64;
            // One timestamp per read: responses that arrived together completed together.
            let now = Instant::now();
            loop {
                let Some(&front) = conn.inflight.front() else {
                    if conn.rbuf.is_empty() {
                        break;
                    }
                    // Bytes nobody asked for: the stream is out of sync.
                    st.report.errors += 1;
                    return true;
                };
                let req = &conn.reqs[..front.len];
                let decoded = match self.workload.response_len(req) {
                    Some(len) => conn.codec.decode_exact(&mut conn.rbuf, len),
                    None => conn.codec.decode(&mut conn.rbuf),
                };
                let resp = match decoded {
                    Ok(Some(resp)) => resp,
                    Ok(None) => break,
                    Err(e) => {
                        tracing::debug!(conn = i, error = %e, "bad response");
                        st.report.errors += 1;
                        return true;
                    }
                };
                if !self.workload.check(i, req, &resp) {
                    st.report.errors += 1;
                }
                conn.inflight.pop_front();
                conn.reqs.advance(front.len);
                st.outstanding -= 1;
                st.report.requests += 1;
                st.report.latency.saturating_record(now.saturating_duration_since(front.at).as_nanos() as u64);
                st.last_response = Some(now);
                if st.closed_loop && st.may_issue(now) {
                    issue(conn, i, &mut self.workload, &mut self.scratch, now, st);
                }
            }
        }
    }

    /// Sends as much of the write buffer as the transport takes. Returns 1 if the connection
    /// died (so callers can do `live -= ...`), else 0.
    fn flush_conn(&mut self, i: usize, st: &mut RunState) -> usize {
        let conn = &mut self.conns[i];
        while !conn.wbuf.is_empty() {
            match self.transport.send(conn.id, &conn.wbuf) {
                Ok(0) => break,
                Ok(n) => {
                    st.report.bytes_sent += n as u64;
                    let full = n == conn.wbuf.len();
                    conn.wbuf.advance(n);
                    if !full {
                        break;
                    }
                }
                Err(_) => return self.kill(i, st),
            }
        }
        0
    }

    /// Marks a connection dead and closes it. Returns 1 if it was alive.
    fn kill(&mut self, i: usize, st: &mut RunState) -> usize {
        let conn = &mut self.conns[i];
        if !conn.alive {
            return 0;
        }
        conn.alive = false;
        st.report.errors += 1;
        st.report.lost += conn.inflight.len() as u64;
        st.outstanding -= conn.inflight.len();
        conn.inflight.clear();
        self.transport.close(conn.id);
        self.index.remove(&conn.id);
        1
    }
}

/// Queues one request on a connection: generate, remember for the check, frame into wbuf.
fn issue<C: Codec, W: Workload>(
    conn: &mut ClientConn<C>,
    i: usize,
    workload: &mut W,
    scratch: &mut BytesMut,
    at: Instant,
    st: &mut RunState,
) {
    scratch.clear();
    workload.next_request(i, conn.seq, scratch);
    conn.seq += 1;
    conn.reqs.extend_from_slice(scratch);
    conn.codec.encode(scratch, &mut conn.wbuf);
    conn.inflight.push_back(InFlight { at, len: scratch.len() });
    st.issued += 1;
    st.outstanding += 1;
}

/// Next live connection in round-robin order. The caller guarantees at least one is alive.
fn next_live<C>(conns: &[ClientConn<C>], cursor: &mut usize) -> usize {
    loop {
        let i = *cursor % conns.len();
        *cursor = cursor.wrapping_add(1);
        if conns[i].alive {
            return i;
        }
    }
}
