//! Request/response over any [`Transport`]: a pipelining [`Server`] driving a [`Handler`], and a
//! load-generating [`Client`] (closed or open loop) with per-response verification and latency.
//!
//! A [`Handler`] gets each decoded request and writes its response; it can also keep
//! per-connection state (open/close callbacks, a table indexed by [`ConnId::slot`]), ask to close
//! ([`Reply::Close`]), and answer later ([`Reply::Pending`], completed through [`Completions`] in
//! [`Handler::tick`] or [`Server::complete`]). `stack/examples/` shows each of these.
//!
//! Both sides follow the transport contract in [`crate::transport`]: on `Readable` they drain
//! `recv` until `Ok(0)` (or knowingly postpone it), a short `send` waits for `Writable`, and
//! `flush` is called once per loop iteration. Per-connection buffers are `BytesMut`s that
//! keep their capacity, and in-flight bookkeeping is a pre-reserved `VecDeque`, so the steady
//! state allocates nothing per request.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::hash::{BuildHasherDefault, Hasher};
use std::net::SocketAddrV4;
use std::time::{Duration, Instant};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use hdrhistogram::Histogram;

use crate::codec::Codec;
use crate::transport::{ConnId, Event, ListenerId, Transport, TransportError};

/// Initial per-connection buffer capacity: enough for typical pipelined small messages without
/// growing, small enough for thousands of connections.
const INITIAL_BUF: usize = 16 * 1024;

// ---------------------------------------------------------------------------------------------
// Handlers
// ---------------------------------------------------------------------------------------------

/// What the [`Server`] does with a connection after [`Handler::handle`] returned.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Reply {
    /// The response is complete: keep serving the connection.
    #[default]
    Done,
    /// Send every response queued so far, then close the connection (e.g. RESP `QUIT`).
    /// Requests that arrived after this one are dropped unanswered.
    Close,
    /// The response comes later, through [`Completions::complete`] (from [`Handler::tick`]) or
    /// [`Server::complete`]; whatever `handle` wrote to `resp` is discarded. Until then the
    /// server decodes no further request from this connection, so responses stay in request
    /// order; other connections are served as usual.
    Pending,
}

/// Responses to [`Reply::Pending`] requests, handed to the server from [`Handler::tick`]. The
/// buffers are kept between ticks, so completing allocates nothing in steady state.
#[derive(Debug, Default)]
pub struct Completions {
    payloads: BytesMut,
    /// Connection and end offset of its payload in `payloads`.
    done: Vec<(ConnId, usize)>,
}

impl Completions {
    /// Completes the pending request of `conn` with `payload` (framed by the server's codec).
    /// A completion for a connection that closed meanwhile, or has nothing pending, is dropped.
    pub fn complete(&mut self, conn: ConnId, payload: &[u8]) {
        self.payloads.extend_from_slice(payload);
        self.done.push((conn, self.payloads.len()));
    }

    /// Completions queued and not yet taken by the server.
    pub fn len(&self) -> usize {
        self.done.len()
    }

    /// Nothing queued.
    pub fn is_empty(&self) -> bool {
        self.done.is_empty()
    }
}

/// Application logic of a [`Server`]: one decoded request in, one response out.
///
/// Everything but [`Handler::handle`] has a no-op default. The server calls the hooks from its
/// single event-loop thread, so a handler keeps per-connection state in its own table indexed
/// by [`ConnId::slot`] (dense, reused after close) without locks; compare the full id to be safe
/// against reuse.
pub trait Handler {
    /// Appends the response payload for `req` to `resp` (empty on entry). The server frames
    /// it with the connection's codec. Must not panic on any `req`: it is peer input.
    fn handle(&mut self, conn: ConnId, req: &[u8], resp: &mut BytesMut) -> Reply;

    /// A connection was accepted. Called before any `handle` for it.
    fn on_open(&mut self, conn: ConnId) {
        let _ = conn;
    }

    /// The server closed the connection (peer closed, `Reply::Close`, protocol or I/O error).
    /// No further calls for this id follow.
    fn on_close(&mut self, conn: ConnId) {
        let _ = conn;
    }

    /// Called once per event-loop iteration (at least every [`ServerConfig::poll_timeout`] when
    /// idle), for periodic work such as expiring keys, and to complete [`Reply::Pending`]
    /// requests through `done`. Keep it cheap: it runs between batches.
    fn tick(&mut self, done: &mut Completions) {
        let _ = done;
    }
}

/// Replies with the request.
#[derive(Clone, Copy, Debug, Default)]
pub struct Echo;

impl Handler for Echo {
    fn handle(&mut self, _conn: ConnId, req: &[u8], resp: &mut BytesMut) -> Reply {
        resp.extend_from_slice(req);
        Reply::Done
    }
}

/// Response status byte of the [`Kv`] protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum KvStatus {
    /// Done (GET: the value follows).
    Ok = 0,
    /// No such key.
    NotFound = 1,
    /// The request could not be parsed.
    BadRequest = 2,
    /// A SET refused because the store is at its key or byte limit; nothing was changed.
    Full = 3,
}

/// A [`Kv`] request. Wire format (inside one codec frame):
/// `op: u8` (`'G'`, `'S'`, `'D'`), `key_len: u16` big-endian, `key`, then for `'S'` the rest of
/// the frame is the value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KvRequest<'a> {
    /// Read the value of `key`.
    Get {
        /// The key.
        key: &'a [u8],
    },
    /// Store `value` under `key`.
    Set {
        /// The key.
        key: &'a [u8],
        /// The value.
        value: &'a [u8],
    },
    /// Delete `key`.
    Del {
        /// The key.
        key: &'a [u8],
    },
}

/// Why a [`Kv`] message could not be parsed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum KvError {
    #[error("empty message")]
    /// A zero-length message.
    Empty,
    #[error("unknown op byte {0:#04x}")]
    /// The first byte is not `G`, `S` or `D`.
    UnknownOp(u8),
    #[error("truncated key")]
    /// The message ends inside the key length or the key.
    Truncated,
    #[error("unexpected bytes after the key")]
    /// GET or DEL with bytes after the key.
    TrailingBytes,
    #[error("unknown status byte {0}")]
    /// A response status byte other than 0, 1, 2, 3.
    UnknownStatus(u8),
    #[error("key longer than 65535 bytes")]
    /// `encode`: keys are at most 65535 bytes.
    KeyTooLong,
}

impl<'a> KvRequest<'a> {
    /// Parses one request payload (no framing). Never panics.
    pub fn parse(msg: &'a [u8]) -> Result<Self, KvError> {
        let (&op, rest) = msg.split_first().ok_or(KvError::Empty)?;
        if !matches!(op, b'G' | b'S' | b'D') {
            return Err(KvError::UnknownOp(op));
        }
        let (len, rest) = rest.split_first_chunk::<2>().ok_or(KvError::Truncated)?;
        let key_len = u16::from_be_bytes(*len) as usize;
        if rest.len() < key_len {
            return Err(KvError::Truncated);
        }
        let (key, value) = rest.split_at(key_len);
        match op {
            b'G' if value.is_empty() => Ok(KvRequest::Get { key }),
            b'D' if value.is_empty() => Ok(KvRequest::Del { key }),
            b'S' => Ok(KvRequest::Set { key, value }),
            _ => Err(KvError::TrailingBytes),
        }
    }

    /// Appends the request payload (unframed) to `out`.
    pub fn encode(&self, out: &mut BytesMut) -> Result<(), KvError> {
        let (op, key, value): (u8, &[u8], &[u8]) = match *self {
            KvRequest::Get { key } => (b'G', key, &[]),
            KvRequest::Set { key, value } => (b'S', key, value),
            KvRequest::Del { key } => (b'D', key, &[]),
        };
        let key_len = u16::try_from(key.len()).map_err(|_| KvError::KeyTooLong)?;
        out.reserve(3 + key.len() + value.len());
        out.put_u8(op);
        out.put_u16(key_len);
        out.extend_from_slice(key);
        out.extend_from_slice(value);
        Ok(())
    }
}

/// A parsed [`Kv`] response: status byte, then the value (only for a successful GET).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KvResponse<'a> {
    /// Outcome of the request.
    pub status: KvStatus,
    /// The value for a successful GET, else empty.
    pub value: &'a [u8],
}

impl<'a> KvResponse<'a> {
    /// Parses one response payload (no framing).
    pub fn parse(msg: &'a [u8]) -> Result<Self, KvError> {
        let (&status, value) = msg.split_first().ok_or(KvError::Empty)?;
        let status = match status {
            0 => KvStatus::Ok,
            1 => KvStatus::NotFound,
            2 => KvStatus::BadRequest,
            3 => KvStatus::Full,
            s => return Err(KvError::UnknownStatus(s)),
        };
        Ok(KvResponse { status, value })
    }
}

/// A small in-memory key-value service speaking [`KvRequest`] / [`KvResponse`]. Malformed
/// requests get [`KvStatus::BadRequest`] instead of closing the connection: they are
/// well-framed, so the stream is still in sync.
/// Bytes a stored key costs besides its key and value (map entry, `Bytes` headers).
const KV_ENTRY_OVERHEAD: usize = 64;

#[derive(Debug)]
pub struct Kv {
    map: HashMap<Bytes, Bytes>,
    max_keys: usize,
    max_bytes: usize,
    /// Keys + values + [`KV_ENTRY_OVERHEAD`] per key, now.
    bytes: usize,
    refused: u64,
}

impl Default for Kv {
    fn default() -> Self {
        Kv::with_limits(4 << 20, 1 << 30)
    }
}

impl Kv {
    /// An empty store with the default limits: 4 Mi keys, 1 GiB.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty store holding at most `max_keys` keys and `max_bytes` bytes (keys, values and
    /// 64 bytes per key); a SET beyond either gets [`KvStatus::Full`] and changes nothing.
    pub fn with_limits(max_keys: usize, max_bytes: usize) -> Self {
        Kv { map: HashMap::new(), max_keys, max_bytes, bytes: 0, refused: 0 }
    }

    /// Bytes stored, counted as the limit counts them.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// SETs refused by the limits so far.
    pub fn refused(&self) -> u64 {
        self.refused
    }

    /// Keys stored.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// No keys stored.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// The value stored under `key`.
    pub fn get(&self, key: &[u8]) -> Option<&Bytes> {
        self.map.get(key)
    }
}

impl Handler for Kv {
    fn handle(&mut self, _conn: ConnId, req: &[u8], resp: &mut BytesMut) -> Reply {
        match KvRequest::parse(req) {
            Ok(KvRequest::Get { key }) => match self.map.get(key) {
                Some(v) => {
                    resp.put_u8(KvStatus::Ok as u8);
                    resp.extend_from_slice(v);
                }
                None => resp.put_u8(KvStatus::NotFound as u8),
            },
            Ok(KvRequest::Set { key, value }) => {
                let old = self.map.get(key).map(|v| key.len() + v.len() + KV_ENTRY_OVERHEAD);
                let after = self.bytes - old.unwrap_or(0) + key.len() + value.len() + KV_ENTRY_OVERHEAD;
                if (old.is_none() && self.map.len() >= self.max_keys) || after > self.max_bytes {
                    self.refused += 1;
                    resp.put_u8(KvStatus::Full as u8);
                } else {
                    // Storing needs owned copies. This is the service's own allocation, not
                    // the RR layer's.
                    self.map.insert(Bytes::copy_from_slice(key), Bytes::copy_from_slice(value));
                    self.bytes = after;
                    resp.put_u8(KvStatus::Ok as u8);
                }
            }
            Ok(KvRequest::Del { key }) => {
                let status = match self.map.remove(key) {
                    Some(v) => {
                        self.bytes -= key.len() + v.len() + KV_ENTRY_OVERHEAD;
                        KvStatus::Ok
                    }
                    None => KvStatus::NotFound,
                };
                resp.put_u8(status as u8);
            }
            Err(_) => resp.put_u8(KvStatus::BadRequest as u8),
        }
        Reply::Done
    }
}

// ---------------------------------------------------------------------------------------------
// Connection map
// ---------------------------------------------------------------------------------------------

/// ConnIds are already well-distributed small integers, so a multiplicative hash beats SipHash
/// for the per-event lookup. The ids come from our own transport, so HashDoS is not a concern.
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_u32(&mut self, n: u32) {
        self.0 = u64::from(n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

type ConnMap<V> = HashMap<ConnId, V, BuildHasherDefault<IdHasher>>;

// ---------------------------------------------------------------------------------------------
// Server
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Debug)]
/// How a [`Server`] listens and paces itself.
pub struct ServerConfig {
    /// Port to listen on (0 = ephemeral, see [`Server::local_addr`]).
    pub port: u16,
    /// Stop reading from a connection once this many response bytes are waiting to be sent.
    /// Reading resumes when the backlog falls below half of it. This bounds memory when a
    /// client pipelines requests but does not read its responses.
    pub write_high_water: usize,
    /// Poll timeout used by [`Server::run_until`] (how often `stop` is checked when idle).
    /// `Some(Duration::ZERO)` busy-polls.
    pub poll_timeout: Option<Duration>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig { port: 0, write_high_water: 4 << 20, poll_timeout: Some(Duration::from_millis(10)) }
    }
}

/// Counters of a [`Server`] since it started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
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

struct ServerConn<C> {
    codec: C,
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
    conns: ConnMap<ServerConn<C>>,
    events: Vec<Event>,
    /// Response payload before framing. Reused for every request.
    scratch: BytesMut,
    stats: ServerStats,
    completions: Completions,
}

impl<T: Transport, C: Codec + Clone, H: Handler> Server<T, C, H> {
    /// Starts listening on `cfg.port`. Each connection gets a clone of `codec`.
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

    /// One event-loop iteration: poll (waiting up to `timeout`), serve every event, flush.
    pub fn step(&mut self, timeout: Option<Duration>) -> Result<(), TransportError> {
        // Take the event vector so handling can borrow `self`. Its capacity is kept.
        let mut events = std::mem::take(&mut self.events);
        events.clear();
        let polled = self.transport.poll(&mut events, timeout);
        if polled.is_ok() {
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
                let state = ServerConn {
                    codec: self.codec.clone(),
                    rbuf: BytesMut::with_capacity(INITIAL_BUF),
                    wbuf: BytesMut::with_capacity(INITIAL_BUF),
                    paused: false,
                    peer_closed: false,
                    closing: false,
                    pending: false,
                };
                self.conns.insert(conn, state);
                self.handler.on_open(conn);
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
            self.conns.remove(&id);
            self.transport.close(id);
            self.stats.closed += 1;
            self.handler.on_close(id);
        }
    }
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
    conn: &mut ServerConn<C>,
) -> Next {
    loop {
        if !conn.paused && !conn.closing && !conn.pending {
            // Requests left in the buffer when we paused come first.
            decode_buffered(handler, scratch, stats, high_water, id, conn);
            while !conn.closing && !conn.pending && conn.wbuf.len() < high_water {
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
    let done = !conn.pending && (conn.closing || (conn.peer_closed && !conn.paused));
    if done && conn.wbuf.is_empty() {
        Next::Close
    } else {
        Next::Keep
    }
}

/// Decodes and handles the requests in the read buffer until it holds no complete one, the
/// response backlog reaches `high_water` (the rest waits: this bounds the per-connection
/// response queue however much a client pipelines), or the connection is closing.
fn decode_buffered<C: Codec, H: Handler>(
    handler: &mut H,
    scratch: &mut BytesMut,
    stats: &mut ServerStats,
    high_water: usize,
    id: ConnId,
    conn: &mut ServerConn<C>,
) {
    while !conn.closing && !conn.pending && conn.wbuf.len() < high_water {
        match conn.codec.decode(&mut conn.rbuf) {
            Ok(Some(req)) => {
                scratch.clear();
                let reply = handler.handle(id, &req, scratch);
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

// ---------------------------------------------------------------------------------------------
// Client
// ---------------------------------------------------------------------------------------------

/// What a [`Client`] sends and how it checks the replies.
pub trait Workload {
    /// Writes the next request payload (unframed) for connection `conn` into `out`, which is
    /// empty on entry. `seq` counts requests per connection from 0.
    fn next_request(&mut self, conn: usize, seq: u64, out: &mut BytesMut);

    /// Verifies the response to `req`. A `false` is counted in [`ClientReport::errors`].
    fn check(&mut self, conn: usize, req: &[u8], resp: &[u8]) -> bool;

    /// The response length, when the protocol does not frame it (echo over
    /// [`crate::codec::Stream`]). `None` lets the codec find the boundary.
    fn response_len(&self, req: &[u8]) -> Option<usize> {
        let _ = req;
        None
    }
}

/// Echo requests of a fixed or random size, filled with pseudo-random bytes. The check is that
/// the response equals the request byte for byte.
#[derive(Clone, Debug)]
pub struct EchoWorkload {
    min: usize,
    max: usize,
    rng: u64,
    /// Random bytes that request payloads are sliced from, so requests differ without
    /// generating fresh randomness per byte.
    pool: Vec<u8>,
}

impl EchoWorkload {
    /// Every request is `size` bytes.
    pub fn fixed(size: usize) -> Self {
        Self::random(size, size, 0x5eed)
    }

    /// Request sizes uniform in `min..=max` (swapped if given in the wrong order).
    pub fn random(min: usize, max: usize, seed: u64) -> Self {
        let (min, max) = if min <= max { (min, max) } else { (max, min) };
        let mut rng = seed | 1;
        let pool = (0..max + 4096).map(|_| xorshift(&mut rng) as u8).collect();
        EchoWorkload { min, max, rng, pool }
    }
}

fn xorshift(state: &mut u64) -> u64 {
    let mut x = *state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *state = x;
    x
}

impl Workload for EchoWorkload {
    fn next_request(&mut self, _conn: usize, _seq: u64, out: &mut BytesMut) {
        let r = xorshift(&mut self.rng);
        let len = self.min + (r % (self.max - self.min + 1) as u64) as usize;
        let off = ((r >> 32) % (self.pool.len() - len + 1) as u64) as usize;
        out.extend_from_slice(&self.pool[off..off + len]);
    }

    fn check(&mut self, _conn: usize, req: &[u8], resp: &[u8]) -> bool {
        req == resp
    }

    fn response_len(&self, req: &[u8]) -> Option<usize> {
        Some(req.len())
    }
}

/// A workload made of two closures: `generate(conn, seq, out)` and `check(conn, req, resp)`.
pub struct FnWorkload<G, K> {
    generate: G,
    check: K,
}

impl<G, K> FnWorkload<G, K>
where
    G: FnMut(usize, u64, &mut BytesMut),
    K: FnMut(usize, &[u8], &[u8]) -> bool,
{
    /// A workload from `generate(conn, seq, out)` and `check(conn, req, resp)`.
    pub fn new(generate: G, check: K) -> Self {
        FnWorkload { generate, check }
    }
}

impl<G, K> Workload for FnWorkload<G, K>
where
    G: FnMut(usize, u64, &mut BytesMut),
    K: FnMut(usize, &[u8], &[u8]) -> bool,
{
    fn next_request(&mut self, conn: usize, seq: u64, out: &mut BytesMut) {
        (self.generate)(conn, seq, out)
    }

    fn check(&mut self, conn: usize, req: &[u8], resp: &[u8]) -> bool {
        (self.check)(conn, req, resp)
    }
}

/// How requests are paced.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum LoadMode {
    /// Keep `depth` requests in flight on every connection. A new one is sent as soon as a
    /// response arrives.
    ClosedLoop {
        /// Requests in flight per connection.
        depth: usize,
    },
    /// Request `k` is due at `start + k / rate` (total over all connections, round robin).
    /// Latency counts from the *scheduled* time, so a slow server cannot hide queueing by
    /// slowing the generator down (coordinated omission). Requests are not capped in flight.
    OpenLoop {
        /// Requests per second over all connections.
        rate: f64,
    },
}

#[derive(Clone, Debug)]
/// What a [`Client`] connects to and how it loads it.
pub struct ClientConfig {
    /// Server address.
    pub addr: SocketAddrV4,
    /// Connections opened before the run and kept for all of it.
    pub connections: usize,
    /// Closed or open loop.
    pub mode: LoadMode,
    /// Stop issuing new requests after this long.
    pub duration: Duration,
    /// Stop issuing after this many requests in total (whichever comes first).
    pub max_requests: Option<u64>,
    /// All connections must be established within this time.
    pub connect_timeout: Duration,
    /// After issuing stops, wait at most this long for outstanding responses (the rest
    /// count as lost).
    pub drain_timeout: Duration,
    /// Poll with a zero timeout instead of sleeping. This burns a core but removes wake-up
    /// latency, and with it the 1 ms timer rounding of the kernel backend in open-loop
    /// pacing.
    pub busy_poll: bool,
}

impl ClientConfig {
    /// One connection, depth 1, closed loop, 1 s.
    pub fn new(addr: SocketAddrV4) -> Self {
        ClientConfig {
            addr,
            connections: 1,
            mode: LoadMode::ClosedLoop { depth: 1 },
            duration: Duration::from_secs(1),
            max_requests: None,
            connect_timeout: Duration::from_secs(5),
            drain_timeout: Duration::from_secs(2),
            busy_poll: false,
        }
    }
}

#[derive(Debug, thiserror::Error)]
/// Why a [`Client`] run failed as a whole (individual bad replies count as errors instead).
pub enum ClientError {
    #[error(transparent)]
    /// The transport failed (not a peer's misbehaviour).
    Transport(#[from] TransportError),
    #[error("only {established} of {wanted} connections to {addr} established within {timeout:?} ({failed} failed)")]
    /// Not every connection was established in time.
    Connect {
        /// Server address.
        addr: SocketAddrV4,
        /// Connections that came up.
        established: usize,
        /// Connections refused or reset.
        failed: usize,
        /// Connections asked for.
        wanted: usize,
        /// The connect timeout.
        timeout: Duration,
    },
    #[error("invalid client config: {0}")]
    /// The configuration cannot work (e.g. depth 0).
    Config(&'static str),
}

/// Result of [`Client::run`].
#[derive(Clone, Debug)]
pub struct ClientReport {
    /// Backend name of the client's transport.
    pub backend: &'static str,
    /// Connections used.
    pub connections: usize,
    /// Responses received and matched to a request (passed or failed the check).
    pub requests: u64,
    /// Failed checks, unparseable or unexpected responses, and connections that died mid-run.
    pub errors: u64,
    /// Requests sent that never got a response (connection died or drain timeout).
    pub lost: u64,
    /// Bytes sent, framing included.
    pub bytes_sent: u64,
    /// Bytes received, framing included.
    pub bytes_received: u64,
    /// From the first request until the last response (or the end of the drain).
    pub duration: Duration,
    /// Per-response latency in nanoseconds.
    pub latency: Histogram<u64>,
}

impl ClientReport {
    fn empty(backend: &'static str, connections: usize) -> Self {
        ClientReport {
            backend,
            connections,
            requests: 0,
            errors: 0,
            lost: 0,
            bytes_sent: 0,
            bytes_received: 0,
            duration: Duration::ZERO,
            // 1 ns .. 100 s at 3 significant digits. Larger values are clamped by
            // saturating_record.
            latency: Histogram::new_with_bounds(1, 100_000_000_000, 3).expect("static histogram bounds are valid"),
        }
    }

    /// Responses per second over [`ClientReport::duration`].
    pub fn requests_per_sec(&self) -> f64 {
        let secs = self.duration.as_secs_f64();
        if secs > 0.0 {
            self.requests as f64 / secs
        } else {
            0.0
        }
    }

    /// Latency at quantile `q` in 0.0..=1.0.
    pub fn latency_at(&self, q: f64) -> Duration {
        Duration::from_nanos(self.latency.value_at_quantile(q))
    }

    /// Adds another run's counts (e.g. from a client thread) to this one. The duration is the
    /// longer of the two, since the runs are assumed to be concurrent.
    pub fn merge(&mut self, other: &ClientReport) {
        self.connections += other.connections;
        self.requests += other.requests;
        self.errors += other.errors;
        self.lost += other.lost;
        self.bytes_sent += other.bytes_sent;
        self.bytes_received += other.bytes_received;
        self.duration = self.duration.max(other.duration);
        // Same bounds on both sides, so adding cannot fail. Ignore the impossible error
        // rather than panic.
        let _ = self.latency.add(&other.latency);
    }
}

impl fmt::Display for ClientReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let us = |q| self.latency_at(q).as_nanos() as f64 / 1000.0;
        write!(
            f,
            "{}: {} conns, {} req in {:.2?} = {:.0} req/s, errors {}, lost {}, latency us p50 {:.1} p90 {:.1} p99 {:.1} p99.9 {:.1} max {:.1}",
            self.backend,
            self.connections,
            self.requests,
            self.duration,
            self.requests_per_sec(),
            self.errors,
            self.lost,
            us(0.5),
            us(0.9),
            us(0.99),
            us(0.999),
            self.latency.max() as f64 / 1000.0,
        )
    }
}

/// One request waiting for its response.
#[derive(Clone, Copy, Debug)]
struct InFlight {
    /// Send time (closed loop) or scheduled time (open loop).
    at: Instant,
    len: usize,
}

struct ClientConn<C> {
    id: ConnId,
    codec: C,
    rbuf: BytesMut,
    wbuf: BytesMut,
    inflight: VecDeque<InFlight>,
    /// Payloads of the in-flight requests, concatenated in order, for the check.
    reqs: BytesMut,
    seq: u64,
    /// The id is still open in the transport (not yet closed by `kill`).
    alive: bool,
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

/// A load generator: `connections` connections to one server, requests from a [`Workload`],
/// responses matched FIFO per connection, verified, and timed.
pub struct Client<T: Transport, C: Codec + Clone, W: Workload = EchoWorkload> {
    transport: T,
    codec: C,
    workload: W,
    cfg: ClientConfig,
    conns: Vec<ClientConn<C>>,
    index: ConnMap<usize>,
    events: Vec<Event>,
    scratch: BytesMut,
}

impl<T: Transport, C: Codec + Clone, W: Workload> Client<T, C, W> {
    /// A client that will open `cfg.connections` connections when [`Client::run`] is called.
    pub fn new(transport: T, codec: C, workload: W, cfg: ClientConfig) -> Self {
        Client {
            transport,
            codec,
            workload,
            cfg,
            conns: Vec::new(),
            index: ConnMap::default(),
            events: Vec::with_capacity(1024),
            scratch: BytesMut::with_capacity(INITIAL_BUF),
        }
    }

    /// The transport (e.g. for its counters after a run).
    pub fn transport(&self) -> &T {
        &self.transport
    }

    /// The workload (e.g. for its own counters after a run).
    pub fn workload(&self) -> &W {
        &self.workload
    }

    /// Takes the client apart.
    pub fn into_parts(self) -> (T, W) {
        (self.transport, self.workload)
    }

    /// Connects, runs the load, and closes every connection again.
    pub fn run(&mut self) -> Result<ClientReport, ClientError> {
        let depth = match self.cfg.mode {
            LoadMode::ClosedLoop { depth: 0 } => return Err(ClientError::Config("closed-loop depth must be > 0")),
            LoadMode::ClosedLoop { depth } => depth,
            LoadMode::OpenLoop { rate } if !(rate.is_finite() && rate > 0.0) => {
                return Err(ClientError::Config("open-loop rate must be a positive number"))
            }
            LoadMode::OpenLoop { .. } => 64,
        };
        if self.cfg.connections == 0 {
            return Err(ClientError::Config("need at least one connection"));
        }
        let result = self.connect_all(depth).and_then(|()| self.drive());
        self.close_all();
        result
    }

    fn connect_all(&mut self, depth: usize) -> Result<(), ClientError> {
        for _ in 0..self.cfg.connections {
            let id = self.transport.connect(self.cfg.addr)?;
            self.index.insert(id, self.conns.len());
            self.conns.push(ClientConn {
                id,
                codec: self.codec.clone(),
                rbuf: BytesMut::with_capacity(INITIAL_BUF),
                wbuf: BytesMut::with_capacity(INITIAL_BUF),
                inflight: VecDeque::with_capacity(depth),
                reqs: BytesMut::with_capacity(INITIAL_BUF),
                seq: 0,
                alive: true,
            });
        }
        self.transport.flush()?;
        let deadline = Instant::now() + self.cfg.connect_timeout;
        let (mut established, mut failed) = (0, 0);
        while established + failed < self.conns.len() {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            self.events.clear();
            self.transport.poll(&mut self.events, Some((deadline - now).min(Duration::from_millis(50))))?;
            for ev in &self.events {
                match *ev {
                    Event::Connected(id) if self.index.contains_key(&id) => established += 1,
                    // A failed connect. Its id stays valid until close_all() closes it.
                    Event::Closed(id) if self.index.contains_key(&id) => failed += 1,
                    _ => {}
                }
            }
        }
        if established < self.conns.len() {
            return Err(ClientError::Connect {
                addr: self.cfg.addr,
                established,
                failed,
                wanted: self.conns.len(),
                timeout: self.cfg.connect_timeout,
            });
        }
        Ok(())
    }

    fn drive(&mut self) -> Result<ClientReport, ClientError> {
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

    fn close_all(&mut self) {
        for conn in self.conns.drain(..) {
            if conn.alive {
                self.transport.close(conn.id);
            }
        }
        self.index.clear();
        // Let a batching backend push out the FINs.
        let _ = self.transport.flush();
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

#[cfg(test)]
mod tests {
    use super::*;

    fn kv(h: &mut Kv, req: KvRequest<'_>) -> (KvStatus, Vec<u8>) {
        let mut msg = BytesMut::new();
        req.encode(&mut msg).unwrap();
        let mut resp = BytesMut::new();
        h.handle(ConnId(0), &msg, &mut resp);
        let r = KvResponse::parse(&resp).unwrap();
        (r.status, r.value.to_vec())
    }

    #[test]
    fn kv_request_round_trip() {
        let cases = [
            KvRequest::Get { key: b"k" },
            KvRequest::Set { key: b"key", value: b"value" },
            KvRequest::Set { key: b"", value: b"" },
            KvRequest::Del { key: &[0xff; 300] },
        ];
        for req in cases {
            let mut out = BytesMut::new();
            req.encode(&mut out).unwrap();
            assert_eq!(KvRequest::parse(&out), Ok(req));
        }
        assert_eq!(KvRequest::Get { key: &[0; 70_000] }.encode(&mut BytesMut::new()), Err(KvError::KeyTooLong));
    }

    #[test]
    fn kv_request_rejects_garbage() {
        assert_eq!(KvRequest::parse(b""), Err(KvError::Empty));
        assert_eq!(KvRequest::parse(b"X\0\0"), Err(KvError::UnknownOp(b'X')));
        assert_eq!(KvRequest::parse(b"G\0"), Err(KvError::Truncated));
        assert_eq!(KvRequest::parse(b"G\0\x05abc"), Err(KvError::Truncated));
        assert_eq!(KvRequest::parse(b"G\0\x01ab"), Err(KvError::TrailingBytes));
        assert_eq!(KvResponse::parse(b""), Err(KvError::Empty));
        assert_eq!(KvResponse::parse(b"\x09"), Err(KvError::UnknownStatus(9)));
    }

    #[test]
    fn kv_handler_semantics() {
        let mut h = Kv::new();
        assert_eq!(kv(&mut h, KvRequest::Get { key: b"a" }), (KvStatus::NotFound, vec![]));
        assert_eq!(kv(&mut h, KvRequest::Set { key: b"a", value: b"1" }), (KvStatus::Ok, vec![]));
        assert_eq!(kv(&mut h, KvRequest::Set { key: b"a", value: b"22" }), (KvStatus::Ok, vec![]));
        assert_eq!(kv(&mut h, KvRequest::Get { key: b"a" }), (KvStatus::Ok, b"22".to_vec()));
        assert_eq!(h.len(), 1);
        assert_eq!(kv(&mut h, KvRequest::Del { key: b"a" }), (KvStatus::Ok, vec![]));
        assert_eq!(kv(&mut h, KvRequest::Del { key: b"a" }), (KvStatus::NotFound, vec![]));
        let mut resp = BytesMut::new();
        h.handle(ConnId(0), b"\x00garbage", &mut resp);
        assert_eq!(&resp[..], &[KvStatus::BadRequest as u8]);
    }

    #[test]
    fn kv_limits_refuse_and_lose_nothing() {
        let mut h = Kv::with_limits(2, 10_000);
        assert_eq!(kv(&mut h, KvRequest::Set { key: b"a", value: b"1" }).0, KvStatus::Ok);
        assert_eq!(kv(&mut h, KvRequest::Set { key: b"b", value: b"2" }).0, KvStatus::Ok);
        // A third key is refused; overwriting an existing one is not.
        assert_eq!(kv(&mut h, KvRequest::Set { key: b"c", value: b"3" }).0, KvStatus::Full);
        assert_eq!(kv(&mut h, KvRequest::Set { key: b"a", value: b"11" }).0, KvStatus::Ok);
        assert_eq!(kv(&mut h, KvRequest::Get { key: b"a" }), (KvStatus::Ok, b"11".to_vec()));
        assert_eq!(kv(&mut h, KvRequest::Get { key: b"c" }).0, KvStatus::NotFound);
        // Bytes: a value too large for what is left is refused and the old value stays.
        let big = vec![7u8; 9_900];
        assert_eq!(kv(&mut h, KvRequest::Set { key: b"b", value: &big }).0, KvStatus::Full);
        assert_eq!(kv(&mut h, KvRequest::Get { key: b"b" }), (KvStatus::Ok, b"2".to_vec()));
        assert_eq!(h.refused(), 2);
        // Deleting frees room.
        assert_eq!(kv(&mut h, KvRequest::Del { key: b"a" }).0, KvStatus::Ok);
        assert_eq!(kv(&mut h, KvRequest::Set { key: b"c", value: b"3" }).0, KvStatus::Ok);
        assert_eq!(h.bytes(), 2 * (1 + 1 + KV_ENTRY_OVERHEAD));
        assert_eq!(KvResponse::parse(&[3]).unwrap().status, KvStatus::Full);
    }

    #[test]
    fn echo_workload_sizes_and_check() {
        let mut w = EchoWorkload::random(1, 10, 42);
        let mut out = BytesMut::new();
        for seq in 0..1000 {
            out.clear();
            w.next_request(0, seq, &mut out);
            assert!((1..=10).contains(&out.len()));
            assert_eq!(w.response_len(&out), Some(out.len()));
        }
        assert!(w.check(0, b"abc", b"abc"));
        assert!(!w.check(0, b"abc", b"abd"));
        let mut fixed = EchoWorkload::fixed(64);
        out.clear();
        fixed.next_request(0, 0, &mut out);
        assert_eq!(out.len(), 64);
    }

    #[test]
    fn report_merge_and_display() {
        let mut a = ClientReport::empty("kernel", 2);
        a.requests = 10;
        a.duration = Duration::from_secs(1);
        a.latency.record(1_000).unwrap();
        let mut b = ClientReport::empty("kernel", 3);
        b.requests = 5;
        b.duration = Duration::from_secs(2);
        b.latency.record(3_000).unwrap();
        a.merge(&b);
        assert_eq!((a.connections, a.requests, a.duration), (5, 15, Duration::from_secs(2)));
        assert_eq!(a.latency.len(), 2);
        assert!(a.to_string().contains("15 req"));
    }
}
