//! A Redis-protocol store, so stock clients (redis-cli, redis-benchmark, redis-py, the Rust
//! `redis` crate) can drive either backend: [`RespCodec`] frames requests (multibulk arrays and
//! inline commands, both pipelined), [`Resp`] is the [`Handler`] that runs them.
//!
//! Commands: strings (GET, SET with EX/PX/NX/XX/KEEPTTL/GET, GETSET, MGET, MSET, APPEND, STRLEN,
//! INCR/INCRBY/DECR/DECRBY), hashes (HSET, HMSET, HSETNX, HGET, HMGET, HGETALL, HKEYS, HVALS,
//! HDEL, HINCRBY, HLEN, HEXISTS, HSTRLEN), keys (DEL, EXISTS, TYPE, EXPIRE/PEXPIRE with
//! NX/XX/GT/LT, TTL/PTTL, PERSIST, DBSIZE, FLUSHDB/FLUSHALL), transactions (MULTI, EXEC,
//! DISCARD; WATCH answers that it is not supported), connections (HELLO 2/3 with AUTH and
//! SETNAME, AUTH, CLIENT ID/SETNAME/GETNAME/SETINFO, SELECT 0, PING, ECHO, QUIT) and what
//! clients ask at start (COMMAND, CONFIG GET, INFO). Anything else gets a RESP error and the
//! connection stays open. One database.
//!
//! A connection speaks RESP2 until `HELLO 3`; then replies use RESP3's null, map, set and
//! verbatim string where Redis uses them (no command served here replies with a double or a
//! boolean in Redis).
//!
//! Expiry is lazy (a key past its deadline is deleted when a command touches it) plus a sweep
//! from [`Handler::tick`] every 100 ms over a deadline heap, so expired keys that nobody reads
//! again still free their memory.
//!
//! Limits ([`RespLimits`]): bulk argument length, arguments per command and bytes per command
//! are enforced by the codec while parsing (the server answers `-ERR Protocol error: ...` and
//! closes, as Redis does); key count and stored bytes by the handler (`-OOM ...`, connection
//! stays open); commands and bytes queued in one MULTI by the handler (the transaction fails
//! with EXECABORT); the length of one reply by the handler, while writing it (an error
//! instead), so a short request cannot make a reply that repeats a large value without bound. The per-connection response backlog is bounded by the server's
//! [`stack::rr::ServerConfig::write_high_water`]: decoding stops there until the client reads.
//!
//! Steady state allocates nothing per request: arguments are ranges into the request frame
//! (inline commands are unquoted into a reused buffer), replies are written straight into the
//! server's response buffer, and overwriting an existing key or hash field reuses its value
//! buffer. New keys, fields and larger values allocate, as any store must.
//!
//! | file | what |
//! |---|---|
//! | `codec.rs` | [`RespCodec`]: framing requests, request limits, protocol errors |
//! | `args.rs` | splitting a request into arguments (multibulk ranges, inline unquoting) |
//! | `store.rs` | the key space: typed values, lookups with lazy expiry, limits, the deadline heap |
//! | `commands.rs` | dispatch, the string and key commands, the error replies |
//! | `fail.rs` | `Fail`: why a command failed, one variant per Redis error reply |
//! | `hashes.rs` | the hash commands |
//! | `session.rs` | per-connection state: HELLO, AUTH, CLIENT, MULTI/EXEC |
//! | `introspection.rs` | what stock clients ask at start: COMMAND, CONFIG GET, INFO |
//! | `wire.rs` | reply writers (RESP2 and RESP3) and strict integer parsing |
//! | `workload.rs` | [`RespWorkload`], the SET/GET load for `rr-bench` |

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;

use stack::rr::{Completions, Handler, Reply};
use stack::transport::ConnId;

mod args;
mod codec;
mod commands;
mod fail;
#[cfg(test)]
mod fuzz_tests;
mod hashes;
mod introspection;
mod session;
mod store;
#[cfg(test)]
mod testutil;
mod wire;
mod workload;

use args::{split_inline, split_multibulk, Args};
use session::Session;
use store::Entry;

pub use codec::RespCodec;
pub use session::MAX_CLIENT_NAME;
pub use workload::RespWorkload;

/// The version reported by INFO and HELLO. Clients gate features on it; 7.2 is the first with
/// CLIENT SETINFO, which current clients send on connect.
pub const REDIS_VERSION: &str = "7.2.0";

/// Bytes charged per key on top of key and value, so a flood of empty keys still counts.
pub const ENTRY_OVERHEAD: usize = 64;

/// Bytes charged per hash field on top of field and value, for the same reason.
pub const FIELD_OVERHEAD: usize = 64;

/// How often [`Handler::tick`] sweeps expired keys.
const SWEEP_EVERY_MS: u64 = 100;
/// Keys deleted per sweep at most, so one sweep cannot stall the event loop.
const SWEEP_BATCH: usize = 10_000;

/// Input and storage limits. Request limits are checked while parsing, before the bytes are
/// buffered in full.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RespLimits {
    /// Longest bulk argument (Redis: `proto-max-bulk-len`).
    pub max_bulk: usize,
    /// Most arguments in one command, the command name included.
    pub max_args: usize,
    /// Most bytes of one command on the wire (multibulk).
    pub max_request: usize,
    /// Longest inline command line (Redis: 64 KiB).
    pub max_inline: usize,
    /// Most keys stored.
    pub max_keys: usize,
    /// Most bytes stored: keys plus values plus [`ENTRY_OVERHEAD`] per key (hash fields:
    /// field plus value plus [`FIELD_OVERHEAD`]) (Redis: `maxmemory`, with `noeviction`).
    pub max_memory: usize,
    /// Most commands queued in one MULTI.
    pub max_queued: usize,
    /// Most bytes queued in one MULTI (arguments plus 16 bytes per argument).
    pub max_queued_bytes: usize,
    /// Longest reply to one command (EXEC: to the whole transaction). MGET, HMGET, HGETALL and
    /// EXEC can repeat one stored value many times; past this they answer an error instead.
    pub max_reply: usize,
}

impl Default for RespLimits {
    fn default() -> Self {
        RespLimits {
            max_bulk: 16 << 20,
            max_args: 1 << 20,
            max_request: 64 << 20,
            max_inline: 64 << 10,
            max_keys: 4 << 20,
            max_memory: 1 << 30,
            max_queued: 100_000,
            max_queued_bytes: 64 << 20,
            max_reply: 64 << 20,
        }
    }
}

/// Counters of a [`Resp`] handler.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct RespStats {
    /// Commands executed (including those answered with an error).
    pub commands: u64,
    /// Commands answered with an error reply.
    pub errors: u64,
    /// Keys deleted because their time ran out (lazily or by the sweep).
    pub expired_keys: u64,
    /// Writes refused by `max_keys` or `max_memory`.
    pub rejected_writes: u64,
    /// Connections open now.
    pub connected: u64,
    /// Connections accepted since start.
    pub accepted: u64,
}

/// Where time comes from: the real monotonic clock, or a hand-set one for tests.
#[derive(Clone, Copy, Debug)]
enum Clock {
    Real(Instant),
    Manual(u64),
}

/// The RESP command handler: an in-memory string store with expiry, shared by every
/// connection of one [`stack::rr::Server`]. Use it with [`RespCodec`].
pub struct Resp {
    limits: RespLimits,
    map: HashMap<Arc<[u8]>, Entry>,
    /// (deadline, key) for every deadline ever set and not yet swept. Entries whose key was
    /// deleted or got another deadline are stale and skipped; compaction bounds them.
    heap: BinaryHeap<Reverse<(u64, Arc<[u8]>)>>,
    /// Keys with a deadline (the live part of `heap`).
    with_ttl: usize,
    /// Stored bytes as counted against `max_memory`.
    used: usize,
    clock: Clock,
    next_sweep: u64,
    stats: RespStats,
    /// Connections that changed their state (protocol, name, MULTI); others have none.
    sessions: HashMap<ConnId, Session>,
    /// The current command's connection speaks RESP3.
    r3: bool,
    /// Reused per request: argument ranges, and the unquoted words of an inline command.
    ranges: Vec<(usize, usize)>,
    inline: Vec<u8>,
}

impl Default for Resp {
    fn default() -> Self {
        Self::new(RespLimits::default())
    }
}

impl Resp {
    /// An empty store enforcing `limits` (the storage ones; request limits are the codec's).
    pub fn new(limits: RespLimits) -> Self {
        Resp {
            limits,
            map: HashMap::new(),
            heap: BinaryHeap::new(),
            with_ttl: 0,
            used: 0,
            clock: Clock::Real(Instant::now()),
            next_sweep: 0,
            stats: RespStats::default(),
            sessions: HashMap::new(),
            r3: false,
            ranges: Vec::with_capacity(16),
            inline: Vec::with_capacity(256),
        }
    }

    /// Counters since start.
    pub fn stats(&self) -> RespStats {
        self.stats
    }

    /// Keys stored (including expired ones not yet swept).
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// No keys stored.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Bytes counted against [`RespLimits::max_memory`].
    pub fn used_memory(&self) -> usize {
        self.used
    }

    /// Freezes the clock at `ms` (tests: expiry without sleeping). Later calls move it.
    pub fn set_clock_ms(&mut self, ms: u64) {
        self.clock = Clock::Manual(ms);
    }

    fn now(&self) -> u64 {
        match self.clock {
            Clock::Real(t0) => t0.elapsed().as_millis() as u64,
            Clock::Manual(ms) => ms,
        }
    }

    /// Runs one command given as separate arguments (no framing) and appends the RESP reply.
    /// For tests and for embedding the store without the wire format.
    pub fn command(&mut self, conn: ConnId, args: &[&[u8]], out: &mut BytesMut) -> Reply {
        let mut src = Vec::new();
        let mut ranges = Vec::with_capacity(args.len());
        for a in args {
            ranges.push((src.len(), src.len() + a.len()));
            src.extend_from_slice(a);
        }
        self.execute(conn, &Args { src: &src, ranges: &ranges }, out)
    }
}

impl Handler for Resp {
    /// Sessions live in the service's own table ([`Resp`] serves without a server too).
    type Conn = ();

    fn handle(&mut self, conn: ConnId, _state: &mut (), req: &[u8], resp: &mut BytesMut) -> Reply {
        let mut ranges = std::mem::take(&mut self.ranges);
        let mut inline = std::mem::take(&mut self.inline);
        ranges.clear();
        inline.clear();
        let reply = if req.first() == Some(&b'*') {
            match split_multibulk(req, &mut ranges) {
                Some(()) => self.execute(conn, &Args { src: req, ranges: &ranges }, resp),
                // The codec validated the frame; a mismatch is a bug, answered, not a panic.
                None => {
                    resp.extend_from_slice(b"-ERR Protocol error: malformed request\r\n");
                    Reply::Close
                }
            }
        } else {
            match split_inline(req, &mut inline, &mut ranges) {
                Ok(()) => self.execute(conn, &Args { src: &inline, ranges: &ranges }, resp),
                Err(()) => {
                    resp.extend_from_slice(b"-ERR Protocol error: unbalanced quotes in request\r\n");
                    Reply::Close
                }
            }
        };
        self.ranges = ranges;
        self.inline = inline;
        reply
    }

    fn on_open(&mut self, conn: ConnId, _peer: Option<std::net::SocketAddrV4>) {
        // Ids are not reused while open, but a new connection must not inherit old state.
        self.sessions.remove(&conn);
        self.stats.connected += 1;
        self.stats.accepted += 1;
    }

    fn on_close(&mut self, conn: ConnId, _state: ()) {
        self.stats.connected = self.stats.connected.saturating_sub(1);
        self.sessions.remove(&conn);
    }

    /// The next sweep that has a deadline to look at: the earliest one set (it may be stale,
    /// a key deleted or given another: then the sweep finds nothing), no sooner than the
    /// sweep's period allows.
    fn tick_in(&self) -> Option<Duration> {
        let Reverse((t, _)) = self.heap.peek()?;
        Some(Duration::from_millis((*t).max(self.next_sweep).saturating_sub(self.now())))
    }

    fn tick(&mut self, _done: &mut Completions) {
        if self.with_ttl == 0 && self.heap.is_empty() {
            return;
        }
        let now = self.now();
        if now >= self.next_sweep {
            self.next_sweep = now + SWEEP_EVERY_MS;
            self.sweep(now, SWEEP_BATCH);
        }
    }
}
