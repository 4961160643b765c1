//! [`Server`]: the event loop that accepts connections, decodes pipelined requests, hands each
//! to the [`Handler`], and sends every response one read produced as one batch. A connection whose
//! unsent responses reach [`ServerConfig::write_high_water`] is not read until they drain.

use std::net::SocketAddrV4;
use std::time::{Duration, Instant};

use bytes::{Buf, BytesMut};

use crate::transport::ConnMap;
use super::handler::{Completions, Handler, Reply};
use crate::codec::Codec;
use crate::transport::{ConnId, Event, ListenerId, Transport, TransportError};

/// Initial per-connection buffer capacity: enough for typical pipelined small messages without
/// growing, small enough for thousands of connections.
const INITIAL_BUF: usize = 16 * 1024;

mod shutdown;

#[derive(Clone, Debug)]
/// How a [`Server`] listens and paces itself.
#[non_exhaustive]
pub struct ServerConfig {
    /// Port to listen on (0 = ephemeral, see [`Server::local_addr`]).
    pub port: u16,
    /// Stop reading from a connection once this many response bytes are waiting to be sent.
    /// Reading resumes when the backlog falls below half of it. This bounds memory when a
    /// client pipelines requests but does not read its responses. Default 4 MiB.
    pub write_high_water: usize,
    /// Poll timeout used by [`Server::run_until`] (how often `stop` is checked when idle).
    /// `Some(Duration::ZERO)` busy-polls; `None` sleeps until an event, so `stop` is only
    /// checked after one: whoever sets what `stop` reads should then wake the loop with
    /// [`Server::waker`]'s waker (a timeout costs a kernel timer on every sleep). Default 10 ms.
    pub poll_timeout: Option<Duration>,
}

/// Builders: each sets one field and gives the config back, so a caller outside this
/// crate (where the struct is `#[non_exhaustive]`) writes `ServerConfig::default().with_port(7000)`.
impl ServerConfig {
    /// With `port` set to `v`.
    pub fn with_port(mut self, v: u16) -> Self {
        self.port = v;
        self
    }

    /// With `write_high_water` set to `v`.
    pub fn with_write_high_water(mut self, v: usize) -> Self {
        self.write_high_water = v;
        self
    }

    /// With `poll_timeout` set to `v`.
    pub fn with_poll_timeout(mut self, v: Option<Duration>) -> Self {
        self.poll_timeout = v;
        self
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig { port: 0, write_high_water: 4 << 20, poll_timeout: Some(Duration::from_millis(10)) }
    }
}

/// Counters of a [`Server`] since it started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct ServerStats {
    /// Requests decoded and handed to the handler.
    pub requests: u64,
    /// Bytes received.
    pub bytes_in: u64,
    /// Bytes sent.
    pub bytes_out: u64,
    /// Connections accepted.
    pub accepted: u64,
    /// Connections closed (for any reason).
    pub closed: u64,
    /// Connections closed because the codec rejected their input.
    pub protocol_errors: u64,
    /// Connections closed because `recv`/`send` failed (e.g. reset while sending).
    pub io_errors: u64,
}

struct ServerConn<C, S> {
    codec: C,
    /// The handler's state for this connection.
    state: S,
    rbuf: BytesMut,
    wbuf: BytesMut,
    /// Reading is suspended for back-pressure. The connection may still hold unread data.
    paused: bool,
    /// `Closed` arrived: close once the remaining responses are out.
    peer_closed: bool,
    /// The handler asked to close, or the input was malformed: read nothing more, close once
    /// the queued responses are out.
    closing: bool,
    /// A request is waiting for its [`Reply::Pending`] completion: decode nothing more.
    pending: bool,
    /// Shutting down: what the transport held was read; answer what it holds, read no more.
    input_done: bool,
    /// Shutting down: every response is out and the FIN sent; what still comes is read and
    /// dropped until the peer's FIN (closing a kernel socket with unread input resets it).
    lingering: bool,
}

/// What [`Server::shutdown`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct ShutdownStats {
    /// Connections open when it began.
    pub open: usize,
    /// Of them, closed after their responses went out and the peer closed too.
    pub graceful: usize,
    /// Of them, still open at the deadline, closed then (the transport may reset them).
    /// The rest of `open` ended with an error (a reset from the peer, say).
    pub forced: usize,
    /// Connections accepted while it ran, closed at once without being served.
    pub refused: usize,
    /// Requests answered while it ran.
    pub answered: u64,
    /// Input not answered: what came after the shutdown began (read and dropped until the
    /// peer closed) and incomplete requests left at the close.
    pub unanswered_bytes: u64,
}

#[derive(PartialEq, Eq)]
enum Next {
    Keep,
    Close,
}

/// A request/response server: accepts connections, decodes pipelined requests, calls the
/// handler, and sends all responses produced by one read as one batch.
pub struct Server<T: Transport, C: Codec + Clone, H: Handler> {
    transport: T,
    codec: C,
    handler: H,
    cfg: ServerConfig,
    listener: ListenerId,
    conns: ConnMap<ServerConn<C, H::Conn>>,
    events: Vec<Event>,
    /// Response payload before framing. Reused for every request.
    scratch: BytesMut,
    stats: ServerStats,
    completions: Completions,
    /// Events handled since start (for [`Server::settle`]).
    delivered: usize,
    /// [`Server::shutdown`] runs: close with FIN and linger; its counts.
    stopping: Option<ShutdownStats>,
    /// Shut down (or shutting down): every new connection is closed unserved.
    refusing: bool,
}

impl<T: Transport, C: Codec + Clone, H: Handler> Server<T, C, H> {
    /// Starts listening on `cfg.port`. Each connection gets a clone of `codec`. Fails with the
    /// transport's `listen` error, e.g. [`TransportError::AddrInUse`].
    pub fn new(mut transport: T, codec: C, handler: H, cfg: ServerConfig) -> Result<Self, TransportError> {
        let listener = transport.listen(cfg.port)?;
        Ok(Server {
            transport,
            codec,
            handler,
            cfg,
            listener,
            conns: ConnMap::default(),
            events: Vec::with_capacity(1024),
            scratch: BytesMut::with_capacity(INITIAL_BUF),
            stats: ServerStats::default(),
            completions: Completions::default(),
            delivered: 0,
            stopping: None,
            refusing: false,
        })
    }

    /// Completes the [`Reply::Pending`] request of `conn` with `payload` and serves the
    /// connection on. For callers outside the handler (between [`Server::step`]s); a handler
    /// completes from [`Handler::tick`]. Returns false if `conn` is gone or has nothing pending.
    pub fn complete(&mut self, conn: ConnId, payload: &[u8]) -> bool {
        let Some(c) = self.conns.get_mut(&conn) else { return false };
        if !c.pending {
            return false;
        }
        c.pending = false;
        c.codec.encode(payload, &mut c.wbuf);
        self.service(conn);
        true
    }

    /// The listening address, with the real port if `port` was 0.
    pub fn local_addr(&self) -> Option<SocketAddrV4> {
        self.transport.local_addr(self.listener)
    }

    /// Counters since start.
    pub fn stats(&self) -> ServerStats {
        self.stats
    }

    /// Open connections.
    pub fn connections(&self) -> usize {
        self.conns.len()
    }

    /// The handler (e.g. to read its state while the server runs).
    pub fn handler(&self) -> &H {
        &self.handler
    }

    /// The handler, mutable (between steps: the server is single-threaded).
    pub fn handler_mut(&mut self) -> &mut H {
        &mut self.handler
    }

    /// The transport (e.g. for its counters).
    pub fn transport(&self) -> &T {
        &self.transport
    }

    /// The transport, mutable.
    pub fn transport_mut(&mut self) -> &mut T {
        &mut self.transport
    }

    /// Takes the server apart (e.g. to inspect the handler's state after a run).
    pub fn into_parts(self) -> (T, H) {
        (self.transport, self.handler)
    }

    /// Runs [`Server::step`] with the configured poll timeout until `stop()` returns true.
    pub fn run_until(&mut self, stop: impl Fn() -> bool) -> Result<(), TransportError> {
        while !stop() {
            self.step(self.cfg.poll_timeout)?;
        }
        Ok(())
    }

    /// [`Server::run_until`] that also returns at `deadline` (None: never): each step waits at
    /// most until then. For periodic work outside the server (a report every second, a run
    /// of fixed length): a deadline that stays put from step to step costs one timer, not one
    /// per sleep.
    pub fn run_until_deadline(
        &mut self,
        deadline: Option<Instant>,
        stop: impl Fn() -> bool,
    ) -> Result<(), TransportError> {
        let Some(deadline) = deadline else { return self.run_until(stop) };
        while !stop() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            let timeout = self.cfg.poll_timeout.map_or(left, |t| t.min(left));
            self.step(Some(timeout))?;
        }
        Ok(())
    }

    /// A waker that ends the server's wait in [`Server::step`] from another thread or a signal
    /// handler ([`Transport::waker`]).
    ///
    /// # Errors
    /// The transport's: [`TransportError::InvalidInput`] when it cannot be woken.
    pub fn waker(&mut self) -> Result<crate::Waker, TransportError> {
        self.transport.waker()
    }

    /// Delivers what the transport already has, without waiting: steps with a zero timeout
    /// until one brings no event, at most `rounds` times. Call it once `run_until` has stopped,
    /// so a close the stack has already seen (a peer's FIN read just before the stop: its
    /// `Closed` follows in the next poll) is counted as closed, not as open at exit.
    /// Returns the events delivered.
    pub fn settle(&mut self, rounds: usize) -> Result<usize, TransportError> {
        let mut total = 0;
        for _ in 0..rounds {
            let before = self.delivered;
            self.step(Some(Duration::ZERO))?;
            let n = self.delivered - before;
            total += n;
            if n == 0 {
                break;
            }
        }
        Ok(total)
    }

    /// One event-loop iteration: poll (waiting up to `timeout`), serve every event, run
    /// [`Handler::tick`] and its completions, flush. Errors are the transport's `poll` and `flush`
    /// failures (not a peer's: those close the connection and are counted in [`ServerStats`]).
    pub fn step(&mut self, timeout: Option<Duration>) -> Result<(), TransportError> {
        // Take the event vector so handling can borrow `self`. Its capacity is kept.
        let mut events = std::mem::take(&mut self.events);
        events.clear();
        // The handler's periodic work (expiry sweeps) ends the sleep too.
        let timeout = match self.handler.tick_in() {
            Some(t) => Some(timeout.map_or(t, |w| w.min(t))),
            None => timeout,
        };
        let polled = self.transport.poll(&mut events, timeout);
        if polled.is_ok() {
            self.delivered += events.len();
            for ev in events.drain(..) {
                self.on_event(ev);
            }
        }
        self.events = events;
        polled?;
        let mut done = std::mem::take(&mut self.completions);
        self.handler.tick(&mut done);
        let mut start = 0;
        for &(conn, end) in &done.done {
            self.complete(conn, &done.payloads[start..end]);
            start = end;
        }
        done.done.clear();
        done.payloads.clear();
        self.completions = done;
        self.transport.flush()
    }

    fn on_event(&mut self, ev: Event) {
        match ev {
            Event::Accepted { conn, .. } => {
                self.stats.accepted += 1;
                if self.refusing {
                    if let Some(st) = &mut self.stopping {
                        st.refused += 1;
                    }
                    self.transport.close(conn);
                    self.stats.closed += 1;
                    return;
                }
                let peer = self.transport.peer_addr(conn);
                let state = ServerConn {
                    state: self.handler.on_open(conn, peer),
                    codec: self.codec.clone(),
                    rbuf: BytesMut::with_capacity(INITIAL_BUF),
                    wbuf: BytesMut::with_capacity(INITIAL_BUF),
                    paused: false,
                    peer_closed: false,
                    closing: false,
                    pending: false,
                    input_done: false,
                    lingering: false,
                };
                self.conns.insert(conn, state);
            }
            Event::Readable(c) | Event::Writable(c) => self.service(c),
            Event::Closed(c) => {
                if let Some(conn) = self.conns.get_mut(&c) {
                    conn.peer_closed = true;
                    self.service(c);
                }
            }
            // A server does not connect out.
            Event::Connected(_) => {}
        }
    }

    /// Reads, handles and writes as far as the connection allows, then closes it if it is done.
    fn service(&mut self, id: ConnId) {
        // Events for connections closed earlier in this batch are stale: skip them.
        let Some(conn) = self.conns.get_mut(&id) else { return };
        if conn.lingering {
            let (next, dropped) = linger(&mut self.transport, id, conn);
            if let Some(st) = &mut self.stopping {
                st.unanswered_bytes += dropped;
            }
            if next == Next::Close {
                self.finish(id);
            }
            return;
        }
        let next = serve_conn(
            &mut self.transport,
            &mut self.handler,
            &mut self.scratch,
            &mut self.stats,
            self.cfg.write_high_water,
            id,
            conn,
        );
        if next == Next::Close {
            if self.stopping.is_some() && !conn.peer_closed {
                // Every response is out: FIN now, then wait for the peer's.
                conn.lingering = true;
                if let Some(st) = &mut self.stopping {
                    // Incomplete requests: never answered.
                    st.unanswered_bytes += conn.rbuf.len() as u64;
                }
                if self.transport.shutdown_write(id).is_ok() {
                    let (next, dropped) = linger(&mut self.transport, id, conn);
                    if let Some(st) = &mut self.stopping {
                        st.unanswered_bytes += dropped;
                    }
                    if next == Next::Keep {
                        return;
                    }
                }
            }
            self.finish(id);
        }
    }

    /// Closes a connection and gives its state back to the handler.
    fn finish(&mut self, id: ConnId) {
        self.finish_as(id, true);
    }

    /// [`finish`](Self::finish); during a shutdown, `in_time`: closed before the deadline
    /// (graceful once its responses went out and the peer closed), not by it (forced).
    fn finish_as(&mut self, id: ConnId, in_time: bool) {
        let Some(c) = self.conns.remove(&id) else { return };
        self.transport.close(id);
        self.stats.closed += 1;
        if let Some(st) = &mut self.stopping {
            if in_time && c.peer_closed && c.wbuf.is_empty() {
                st.graceful += 1;
            }
        }
        self.handler.on_close(id, c.state);
    }
}

/// A lingering connection: reads and drops its input (returns how much); closes once the
/// peer has closed.
fn linger<T: Transport, C, S>(transport: &mut T, id: ConnId, conn: &mut ServerConn<C, S>) -> (Next, u64) {
    let mut dropped = 0;
    conn.rbuf.clear();
    loop {
        match transport.recv(id, &mut conn.rbuf) {
            Ok(0) => break,
            Ok(n) => dropped += n as u64,
            Err(_) => return (Next::Close, dropped),
        }
        conn.rbuf.clear();
    }
    (if conn.peer_closed { Next::Close } else { Next::Keep }, dropped)
}

/// The per-connection state machine, a free function so it can borrow the server's fields
/// separately.
fn serve_conn<T: Transport, C: Codec, H: Handler>(
    transport: &mut T,
    handler: &mut H,
    scratch: &mut BytesMut,
    stats: &mut ServerStats,
    high_water: usize,
    id: ConnId,
    conn: &mut ServerConn<C, H::Conn>,
) -> Next {
    let drains = transport.recv_drains();
    loop {
        if !conn.paused && !conn.closing && !conn.pending {
            // Requests left in the buffer when we paused come first.
            decode_buffered(handler, scratch, stats, high_water, id, conn);
            while !conn.input_done && !conn.closing && !conn.pending && conn.wbuf.len() < high_water {
                let n = match transport.recv(id, &mut conn.rbuf) {
                    Ok(n) => n,
                    Err(e) => {
                        tracing::debug!(?id, error = %e, "recv failed");
                        stats.io_errors += 1;
                        return Next::Close;
                    }
                };
                if n == 0 {
                    break;
                }
                stats.bytes_in += n as u64;
                // Decode after every read, so the read buffer only ever holds about one
                // read's worth plus a partial message.
                decode_buffered(handler, scratch, stats, high_water, id, conn);
                if drains {
                    // That read took everything and re-armed `Readable`: the one that would
                    // return 0 is left out (a call per request).
                    break;
                }
            }
            if conn.wbuf.len() >= high_water {
                // Leave the rest unread (and undecoded). The transport will not remind us (edge
                // contract), so we resume ourselves below once the backlog drains.
                conn.paused = true;
            }
        }

        // One batched send for every response produced above. A short send waits for Writable.
        while !conn.wbuf.is_empty() {
            match transport.send(id, &conn.wbuf) {
                Ok(0) => break,
                Ok(n) => {
                    stats.bytes_out += n as u64;
                    let full = n == conn.wbuf.len();
                    conn.wbuf.advance(n);
                    if !full {
                        break;
                    }
                }
                Err(e) => {
                    tracing::debug!(?id, error = %e, "send failed");
                    // A peer that already closed may reset: that is the normal end, not an I/O
                    // error.
                    if !conn.peer_closed {
                        stats.io_errors += 1;
                    }
                    return Next::Close;
                }
            }
        }

        if conn.paused && !conn.closing && conn.wbuf.len() < high_water / 2 {
            conn.paused = false;
            continue;
        }
        break;
    }
    // With no input to come (peer closed, or shutting down), a connection whose read buffer
    // holds no complete request is done: `paused` would say one waits for the backlog.
    let done = !conn.pending && (conn.closing || ((conn.peer_closed || conn.input_done) && !conn.paused));
    if done && conn.wbuf.is_empty() {
        Next::Close
    } else {
        Next::Keep
    }
}

/// Decodes and handles the requests in the read buffer until it holds no complete one, the
/// response backlog reaches `high_water` (the rest waits: this bounds the per-connection
/// response queue however much a client pipelines), or the connection is closing. An empty
/// buffer holds none (no message is zero bytes long), so the codec is not asked: that saves
/// two calls per request, before and after the one that finds it.
fn decode_buffered<C: Codec, H: Handler>(
    handler: &mut H,
    scratch: &mut BytesMut,
    stats: &mut ServerStats,
    high_water: usize,
    id: ConnId,
    conn: &mut ServerConn<C, H::Conn>,
) {
    while !conn.rbuf.is_empty() && !conn.closing && !conn.pending && conn.wbuf.len() < high_water {
        match conn.codec.decode(&mut conn.rbuf) {
            Ok(Some(req)) => {
                scratch.clear();
                let reply = handler.handle(id, &mut conn.state, &req, scratch);
                stats.requests += 1;
                match reply {
                    Reply::Done => conn.codec.encode(scratch, &mut conn.wbuf),
                    Reply::Close => {
                        conn.codec.encode(scratch, &mut conn.wbuf);
                        conn.closing = true;
                    }
                    Reply::Pending => conn.pending = true,
                }
            }
            Ok(None) => break,
            Err(e) => {
                tracing::debug!(?id, error = %e, "protocol error, closing");
                stats.protocol_errors += 1;
                // Protocols with an error reply (RESP) tell the peer why before the close.
                conn.codec.encode_error(&e, &mut conn.wbuf);
                conn.closing = true;
            }
        }
    }
}

// The in-memory transport these tests drive the server with is the xsk engine's.
#[cfg(all(test, feature = "xsk"))]
mod tests;
