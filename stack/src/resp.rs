//! A Redis-protocol (RESP2) string store, so stock `redis-cli` and `redis-benchmark` can drive
//! either backend: [`RespCodec`] frames requests (multibulk arrays and inline commands, both
//! pipelined), [`Resp`] is the [`Handler`] that runs them.
//!
//! Commands: PING, ECHO, GET, SET (EX/PX/NX/XX/KEEPTTL/GET), GETSET, DEL, EXISTS,
//! INCR/INCRBY/DECR/DECRBY, MGET, MSET, APPEND, STRLEN, EXPIRE/PEXPIRE (NX/XX/GT/LT),
//! TTL/PTTL/PERSIST, DBSIZE, FLUSHDB/FLUSHALL, SELECT 0, QUIT, and the start-up queries of stock
//! clients: COMMAND (COUNT/INFO/DOCS/LIST), CONFIG GET, INFO, HELLO (protocol 2 only). Anything
//! else gets a RESP error and the connection stays open. One database; values are strings.
//!
//! Expiry is lazy (a key past its deadline is deleted when a command touches it) plus a sweep
//! from [`Handler::tick`] every 100 ms over a deadline heap, so expired keys that nobody reads
//! again still free their memory.
//!
//! Limits ([`RespLimits`]): bulk argument length, arguments per command and bytes per command
//! are enforced by the codec while parsing (the server answers `-ERR Protocol error: ...` and
//! closes, as Redis does); key count and stored bytes by the handler (`-OOM ...`, connection
//! stays open). The per-connection response backlog is bounded by the server's
//! [`crate::rr::ServerConfig::write_high_water`]: decoding stops there until the client reads.
//!
//! Steady state allocates nothing per request: arguments are ranges into the request frame
//! (inline commands are unquoted into a reused buffer), replies are written straight into the
//! server's response buffer, and overwriting an existing key reuses its value buffer. New keys
//! and larger values allocate, as any store must.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Instant;

use bytes::{BufMut, Bytes, BytesMut};

use crate::codec::{Codec, CodecError};
use crate::rr::{Completions, Handler, Reply};
use crate::transport::ConnId;

/// The version reported by INFO and HELLO. Clients gate features on it; 7.0.0 matches the
/// redis-tools this was tested with (Debian bookworm).
pub const REDIS_VERSION: &str = "7.0.0";

/// Bytes charged per key on top of key and value, so a flood of empty keys still counts.
pub const ENTRY_OVERHEAD: usize = 64;

/// How often [`Handler::tick`] sweeps expired keys.
const SWEEP_EVERY_MS: u64 = 100;
/// Keys deleted per sweep at most, so one sweep cannot stall the event loop.
const SWEEP_BATCH: usize = 10_000;
/// The `*N` / `$N` header line: sign, 19 digits, CRLF.
const MAX_LEN_LINE: usize = 22;

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
    /// Most bytes stored: keys plus values plus [`ENTRY_OVERHEAD`] per key (Redis:
    /// `maxmemory`, with `noeviction`).
    pub max_memory: usize,
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
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Codec
// ---------------------------------------------------------------------------------------------

/// Frames RESP requests: a multibulk array of bulk strings (`*2\r\n$3\r\nGET\r\n$1\r\nk\r\n`)
/// or an inline command line (`GET k\r\n`, what `telnet` and redis-benchmark's `PING_INLINE`
/// send). A decoded message is the whole request as it arrived; [`Resp`] splits it into
/// arguments. Parsing resumes where the last call stopped, so a large argument arriving in
/// many segments is not rescanned. Responses pass through unchanged (the handler writes RESP).
#[derive(Clone, Debug)]
pub struct RespCodec {
    limits: RespLimits,
    /// Validated bytes of the multibulk frame at the front of the buffer.
    pos: usize,
    /// Arguments of that frame still to parse; `None` before its header was read.
    left: Option<usize>,
    /// Inline: bytes at the front already known to contain no `\n`.
    scanned: usize,
}

impl RespCodec {
    /// A codec enforcing `limits`' request limits.
    pub fn new(limits: RespLimits) -> Self {
        RespCodec { limits, pos: 0, left: None, scanned: 0 }
    }

    fn decode_inline(&mut self, buf: &mut BytesMut) -> Result<Option<Bytes>, CodecError> {
        let limit = buf.len().min(self.limits.max_inline.saturating_add(2));
        let start = self.scanned.min(limit);
        match buf[start..limit].iter().position(|&b| b == b'\n') {
            Some(i) => {
                self.scanned = 0;
                Ok(Some(buf.split_to(start + i + 1).freeze()))
            }
            None if buf.len() > self.limits.max_inline.saturating_add(1) => {
                Err(CodecError::LineTooLong { max: self.limits.max_inline })
            }
            None => {
                self.scanned = limit;
                Ok(None)
            }
        }
    }
}

impl Default for RespCodec {
    fn default() -> Self {
        Self::new(RespLimits::default())
    }
}

/// Reads `N\r\n` (the part after `*` or `$`). `Ok(None)`: incomplete. `Err`: not a number.
fn len_line(b: &[u8]) -> Result<Option<(i64, usize)>, ()> {
    let window = &b[..b.len().min(MAX_LEN_LINE)];
    let Some(cr) = window.iter().position(|&c| c == b'\r') else {
        return if b.len() >= MAX_LEN_LINE { Err(()) } else { Ok(None) };
    };
    match b.get(cr + 1) {
        None => Ok(None),
        Some(b'\n') => parse_i64(&b[..cr]).map(|n| Some((n, cr + 2))).ok_or(()),
        Some(_) => Err(()),
    }
}

impl Codec for RespCodec {
    fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Bytes>, CodecError> {
        let mut left = match self.left {
            Some(left) => left,
            None => {
                let Some(&first) = buf.first() else {
                    return Ok(None);
                };
                if first != b'*' {
                    return self.decode_inline(buf);
                }
                let Some((n, hdr)) =
                    len_line(&buf[1..]).map_err(|()| CodecError::Invalid("invalid multibulk length"))?
                else {
                    return Ok(None);
                };
                if n > 0 && n as u64 > self.limits.max_args as u64 {
                    return Err(CodecError::Limit { what: "arguments", len: n as u64, max: self.limits.max_args });
                }
                // `*0` and `*-1` are empty requests: Redis skips them without a reply.
                self.pos = 1 + hdr;
                n.max(0) as usize
            }
        };
        while left > 0 {
            let pos = self.pos;
            let Some(&tag) = buf.get(pos) else { break };
            if tag != b'$' {
                self.left = None;
                return Err(CodecError::Invalid("expected '$' before each argument"));
            }
            let parsed = len_line(&buf[pos + 1..]);
            let Some((len, hdr)) = parsed.map_err(|()| CodecError::Invalid("invalid bulk length"))? else {
                break;
            };
            if len < 0 {
                return Err(CodecError::Invalid("invalid bulk length"));
            }
            if len as u64 > self.limits.max_bulk as u64 {
                return Err(CodecError::Limit { what: "bulk length", len: len as u64, max: self.limits.max_bulk });
            }
            let end = pos + 1 + hdr + len as usize + 2;
            if end > self.limits.max_request {
                return Err(CodecError::Limit { what: "request bytes", len: end as u64, max: self.limits.max_request });
            }
            if buf.len() < end {
                // Room for the whole argument at once instead of doubling through it.
                buf.reserve(end - buf.len());
                break;
            }
            if &buf[end - 2..end] != b"\r\n" {
                return Err(CodecError::Invalid("bulk argument not followed by CRLF"));
            }
            self.pos = end;
            left -= 1;
        }
        if left > 0 {
            self.left = Some(left);
            return Ok(None);
        }
        let frame = buf.split_to(self.pos).freeze();
        self.pos = 0;
        self.left = None;
        Ok(Some(frame))
    }

    /// Replies are already RESP: written as they are.
    fn encode(&mut self, msg: &[u8], out: &mut BytesMut) {
        out.extend_from_slice(msg);
    }

    fn encode_error(&mut self, err: &CodecError, out: &mut BytesMut) {
        let msg = match err {
            CodecError::LineTooLong { .. } => "too big inline request".to_string(),
            e => e.to_string(),
        };
        let _ = write!(out, "-ERR Protocol error: {msg}\r\n");
    }
}

// ---------------------------------------------------------------------------------------------
// Reply writers
// ---------------------------------------------------------------------------------------------

fn put_num(out: &mut BytesMut, n: i64) {
    let mut digits = [0u8; 20];
    out.extend_from_slice(num(n, &mut digits));
}

/// `n` in decimal, written into `digits` (no allocation).
fn num(n: i64, digits: &mut [u8; 20]) -> &[u8] {
    let mut i = digits.len();
    let mut v = n.unsigned_abs();
    loop {
        i -= 1;
        digits[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    if n < 0 {
        i -= 1;
        digits[i] = b'-';
    }
    &digits[i..]
}

fn put_line(out: &mut BytesMut, tag: u8, n: i64) {
    out.put_u8(tag);
    put_num(out, n);
    out.extend_from_slice(b"\r\n");
}

fn simple(out: &mut BytesMut, s: &str) {
    out.put_u8(b'+');
    out.extend_from_slice(s.as_bytes());
    out.extend_from_slice(b"\r\n");
}

fn int(out: &mut BytesMut, n: i64) {
    put_line(out, b':', n);
}

fn bulk(out: &mut BytesMut, b: &[u8]) {
    out.reserve(b.len() + 16);
    put_line(out, b'$', b.len() as i64);
    out.extend_from_slice(b);
    out.extend_from_slice(b"\r\n");
}

fn nil(out: &mut BytesMut) {
    out.extend_from_slice(b"$-1\r\n");
}

fn array(out: &mut BytesMut, n: usize) {
    put_line(out, b'*', n as i64);
}

/// Peer bytes inside a simple error string: no CR/LF (they would end the reply early), printable,
/// bounded.
fn put_sanitized(out: &mut BytesMut, b: &[u8]) {
    for &c in b.iter().take(128) {
        out.put_u8(if (0x20..0x7f).contains(&c) { c } else { b'?' });
    }
}

/// Strict decimal i64 as Redis reads it: optional `-`, no `+`, no spaces, no leading zeros.
fn parse_i64(b: &[u8]) -> Option<i64> {
    let (neg, digits) = match b.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, b),
    };
    if digits.is_empty() || digits.len() > 19 || (digits[0] == b'0' && (digits.len() > 1 || neg)) {
        return None;
    }
    let mut v: i64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        let d = i64::from(d - b'0');
        // Accumulate negatively so i64::MIN parses.
        v = v.checked_mul(10)?.checked_sub(d)?;
    }
    if neg {
        Some(v)
    } else {
        v.checked_neg()
    }
}

/// Case-insensitive glob (`*`, `?`) for CONFIG GET patterns.
fn glob(pat: &[u8], s: &[u8]) -> bool {
    let (mut p, mut i) = (0, 0);
    let (mut star, mut mark) = (None, 0);
    while i < s.len() {
        if p < pat.len() && (pat[p] == b'?' || pat[p].eq_ignore_ascii_case(&s[i])) {
            p += 1;
            i += 1;
        } else if p < pat.len() && pat[p] == b'*' {
            star = Some(p);
            mark = i;
            p += 1;
        } else if let Some(sp) = star {
            p = sp + 1;
            mark += 1;
            i = mark;
        } else {
            return false;
        }
    }
    pat[p..].iter().all(|&c| c == b'*')
}

// ---------------------------------------------------------------------------------------------
// Arguments
// ---------------------------------------------------------------------------------------------

/// The arguments of one command: ranges into `src` (the request frame, or the unquoted copy
/// of an inline line).
struct Args<'a> {
    src: &'a [u8],
    ranges: &'a [(usize, usize)],
}

impl<'a> Args<'a> {
    fn len(&self) -> usize {
        self.ranges.len()
    }

    fn get(&self, i: usize) -> &'a [u8] {
        let (a, b) = self.ranges[i];
        &self.src[a..b]
    }

    fn is(&self, i: usize, word: &str) -> bool {
        self.get(i).eq_ignore_ascii_case(word.as_bytes())
    }
}

/// Splits a multibulk frame (already validated by [`RespCodec`]) into argument ranges.
fn split_multibulk(frame: &[u8], out: &mut Vec<(usize, usize)>) -> Option<()> {
    let (n, hdr) = len_line(frame.get(1..)?).ok()??;
    let mut pos = 1 + hdr;
    for _ in 0..n.max(0) {
        if *frame.get(pos)? != b'$' {
            return None;
        }
        let (len, hdr) = len_line(&frame[pos + 1..]).ok()??;
        let start = pos + 1 + hdr;
        let end = start.checked_add(usize::try_from(len).ok()?)?;
        if end + 2 > frame.len() {
            return None;
        }
        out.push((start, end));
        pos = end + 2;
    }
    Some(())
}

/// Splits an inline line like Redis' `sdssplitargs`: whitespace-separated words, `"..."` with
/// `\n \r \t \b \a \\ \" \xHH` escapes, `'...'` with `\'`. The words are copied, unquoted, into
/// `buf`. `Err` on unbalanced quotes.
fn split_inline(line: &[u8], buf: &mut Vec<u8>, out: &mut Vec<(usize, usize)>) -> Result<(), ()> {
    let mut i = 0;
    let n = line.len();
    loop {
        while i < n && line[i].is_ascii_whitespace() {
            i += 1;
        }
        if i >= n {
            return Ok(());
        }
        let start = buf.len();
        let mut quote: Option<u8> = None;
        loop {
            let Some(&c) = line.get(i) else {
                if quote.is_some() {
                    return Err(());
                }
                break;
            };
            match quote {
                None if c.is_ascii_whitespace() => break,
                None if c == b'"' || c == b'\'' => {
                    quote = Some(c);
                    i += 1;
                }
                None => {
                    buf.push(c);
                    i += 1;
                }
                Some(q) if c == q => {
                    // A closing quote must end the word.
                    if line.get(i + 1).is_some_and(|c| !c.is_ascii_whitespace()) {
                        return Err(());
                    }
                    i += 1;
                    break;
                }
                Some(b'"') if c == b'\\' && i + 1 < n => {
                    let e = line[i + 1];
                    let hex = |c: u8| (c as char).to_digit(16);
                    if e == b'x' && i + 3 < n {
                        if let (Some(h), Some(l)) = (hex(line[i + 2]), hex(line[i + 3])) {
                            buf.push((h * 16 + l) as u8);
                            i += 4;
                            continue;
                        }
                    }
                    buf.push(match e {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 8,
                        b'a' => 7,
                        other => other,
                    });
                    i += 2;
                }
                Some(b'\'') if c == b'\\' && line.get(i + 1) == Some(&b'\'') => {
                    buf.push(b'\'');
                    i += 2;
                }
                Some(_) => {
                    buf.push(c);
                    i += 1;
                }
            }
        }
        out.push((start, buf.len()));
    }
}

// ---------------------------------------------------------------------------------------------
// Store
// ---------------------------------------------------------------------------------------------

struct Entry {
    /// Shared with the expiry heap, so pushing a deadline does not copy the key.
    key: Arc<[u8]>,
    value: Vec<u8>,
    /// Deadline in ms on [`Resp`]'s clock.
    expires: Option<u64>,
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

/// Why a command failed: each variant is one Redis error reply.
enum Fail {
    Arity(&'static str),
    Syntax,
    NotInt,
    Overflow,
    InvalidExpire(&'static str),
    Oom,
    TooManyKeys,
    NoProto,
    Unknown,
    Msg(&'static str),
}

type CmdResult = Result<Reply, Fail>;

fn arity(a: &Args<'_>, n: isize, name: &'static str) -> Result<(), Fail> {
    let ok = if n >= 0 { a.len() == n as usize } else { a.len() >= n.unsigned_abs() };
    if ok {
        Ok(())
    } else {
        Err(Fail::Arity(name))
    }
}

fn int_arg(b: &[u8]) -> Result<i64, Fail> {
    parse_i64(b).ok_or(Fail::NotInt)
}

/// Name, arity (negative: at least), flags, first key, last key, key step: the 6-field entries
/// of `COMMAND` / `COMMAND INFO` that clients use for key positions and hints.
type CommandInfo = (&'static str, i64, &'static [&'static str], i64, i64, i64);

/// Every command served, as `COMMAND` lists it.
const COMMANDS: &[CommandInfo] = &[
    ("ping", -1, &["fast"], 0, 0, 0),
    ("echo", 2, &["fast"], 0, 0, 0),
    ("get", 2, &["readonly", "fast"], 1, 1, 1),
    ("set", -3, &["write", "denyoom"], 1, 1, 1),
    ("getset", 3, &["write", "denyoom", "fast"], 1, 1, 1),
    ("del", -2, &["write"], 1, -1, 1),
    ("exists", -2, &["readonly", "fast"], 1, -1, 1),
    ("incr", 2, &["write", "denyoom", "fast"], 1, 1, 1),
    ("incrby", 3, &["write", "denyoom", "fast"], 1, 1, 1),
    ("decr", 2, &["write", "denyoom", "fast"], 1, 1, 1),
    ("decrby", 3, &["write", "denyoom", "fast"], 1, 1, 1),
    ("mget", -2, &["readonly", "fast"], 1, -1, 1),
    ("mset", -3, &["write", "denyoom"], 1, -1, 2),
    ("append", 3, &["write", "denyoom", "fast"], 1, 1, 1),
    ("strlen", 2, &["readonly", "fast"], 1, 1, 1),
    ("expire", -3, &["write", "fast"], 1, 1, 1),
    ("pexpire", -3, &["write", "fast"], 1, 1, 1),
    ("ttl", 2, &["readonly", "fast"], 1, 1, 1),
    ("pttl", 2, &["readonly", "fast"], 1, 1, 1),
    ("persist", 2, &["write", "fast"], 1, 1, 1),
    ("dbsize", 1, &["readonly", "fast"], 0, 0, 0),
    ("flushdb", -1, &["write"], 0, 0, 0),
    ("flushall", -1, &["write"], 0, 0, 0),
    ("select", 2, &["loading", "stale", "fast"], 0, 0, 0),
    ("quit", -1, &["fast"], 0, 0, 0),
    ("command", -1, &["loading", "stale"], 0, 0, 0),
    ("config", -2, &["admin", "loading", "stale"], 0, 0, 0),
    ("info", -1, &["loading", "stale"], 0, 0, 0),
    ("hello", -1, &["fast", "loading", "stale"], 0, 0, 0),
];

/// Where time comes from: the real monotonic clock, or a hand-set one for tests.
#[derive(Clone, Copy, Debug)]
enum Clock {
    Real(Instant),
    Manual(u64),
}

/// The RESP command handler: an in-memory string store with expiry, shared by every
/// connection of one [`crate::rr::Server`]. Use it with [`RespCodec`].
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

    // ---- key access ----------------------------------------------------------------------

    /// Deletes `key` if its deadline passed. Returns whether it (still) exists.
    fn alive(&mut self, key: &[u8]) -> bool {
        let expired = match self.map.get(key) {
            None => return false,
            Some(e) => e.expires.is_some_and(|t| t <= self.now()),
        };
        if expired {
            self.remove(key);
            self.stats.expired_keys += 1;
        }
        !expired
    }

    fn get(&mut self, key: &[u8]) -> Option<&Entry> {
        if self.alive(key) {
            self.map.get(key)
        } else {
            None
        }
    }

    fn remove(&mut self, key: &[u8]) -> bool {
        match self.map.remove(key) {
            Some(e) => {
                self.used -= cost(&e.key, e.value.len());
                if e.expires.is_some() {
                    self.with_ttl -= 1;
                }
                true
            }
            None => false,
        }
    }

    /// Checks that storing `new_len` value bytes under `key` fits the limits.
    fn fits(&mut self, key: &[u8], new_len: usize) -> Result<(), Fail> {
        let (old, new_key) = match self.map.get(key) {
            Some(e) => (cost(key, e.value.len()), false),
            None => (0, true),
        };
        if new_key && self.map.len() >= self.limits.max_keys {
            self.stats.rejected_writes += 1;
            return Err(Fail::TooManyKeys);
        }
        if self.used - old + cost(key, new_len) > self.limits.max_memory {
            self.stats.rejected_writes += 1;
            return Err(Fail::Oom);
        }
        Ok(())
    }

    /// Stores `value` under `key` (limits already checked). `ttl`: `None` keeps the current
    /// deadline, `Some(d)` sets it (`Some(None)` clears it).
    fn store(&mut self, key: &[u8], value: &[u8], ttl: Option<Option<u64>>) {
        let entry = match self.map.get_mut(key) {
            Some(e) => {
                self.used = self.used - e.value.len() + value.len();
                // Same capacity for a same-sized value: overwrites allocate nothing.
                e.value.clear();
                e.value.extend_from_slice(value);
                e
            }
            None => {
                let key: Arc<[u8]> = Arc::from(key);
                self.used += cost(&key, value.len());
                self.map.entry(key.clone()).or_insert(Entry { key, value: value.to_vec(), expires: None })
            }
        };
        if let Some(deadline) = ttl {
            let had = entry.expires.is_some();
            entry.expires = deadline;
            let key = entry.key.clone();
            self.with_ttl = self.with_ttl + usize::from(deadline.is_some()) - usize::from(had);
            if let Some(t) = deadline {
                self.push_deadline(t, key);
            }
        }
    }

    fn set_deadline(&mut self, key: &[u8], deadline: Option<u64>) {
        let Some(e) = self.map.get_mut(key) else {
            return;
        };
        let had = e.expires.is_some();
        e.expires = deadline;
        let k = e.key.clone();
        self.with_ttl = self.with_ttl + usize::from(deadline.is_some()) - usize::from(had);
        if let Some(t) = deadline {
            self.push_deadline(t, k);
        }
    }

    fn push_deadline(&mut self, t: u64, key: Arc<[u8]>) {
        self.heap.push(Reverse((t, key)));
        // Stale entries (key deleted or deadline changed) would pile up under churn: rebuild
        // from the live deadlines once they outnumber them. Amortised O(1) per push.
        if self.heap.len() > 2 * self.with_ttl + 1024 {
            let live = self.map.values().filter_map(|e| e.expires.map(|t| Reverse((t, e.key.clone()))));
            self.heap = live.collect();
        }
    }

    /// Deletes up to `max` keys whose deadline is at or before `now`.
    fn sweep(&mut self, now: u64, max: usize) {
        let mut n = 0;
        while n < max {
            let Some(Reverse((t, _))) = self.heap.peek() else {
                break;
            };
            if *t > now {
                break;
            }
            let Some(Reverse((t, key))) = self.heap.pop() else {
                break;
            };
            if self.map.get(&*key).is_some_and(|e| e.expires == Some(t)) {
                self.remove(&key);
                self.stats.expired_keys += 1;
                n += 1;
            }
        }
    }

    fn flush(&mut self) {
        self.map.clear();
        self.heap.clear();
        self.with_ttl = 0;
        self.used = 0;
    }

    /// Remaining time of `key` in ms: -2 no key, -1 no deadline.
    fn pttl(&mut self, key: &[u8]) -> i64 {
        let now = self.now();
        match self.get(key) {
            None => -2,
            Some(Entry { expires: None, .. }) => -1,
            Some(Entry { expires: Some(t), .. }) => t.saturating_sub(now) as i64,
        }
    }

    // ---- commands ------------------------------------------------------------------------

    fn execute(&mut self, conn: ConnId, a: &Args<'_>, out: &mut BytesMut) -> Reply {
        if a.len() == 0 {
            // An empty inline line or `*0`: Redis answers nothing.
            return Reply::Done;
        }
        self.stats.commands += 1;
        let name = a.get(0);
        let mut up = [0u8; 16];
        let n = name.len();
        let result = if n > up.len() {
            Err(Fail::Unknown)
        } else {
            up[..n].copy_from_slice(name);
            up[..n].make_ascii_uppercase();
            self.dispatch(conn, &up[..n], a, out)
        };
        match result {
            Ok(reply) => reply,
            Err(fail) => {
                self.stats.errors += 1;
                match fail {
                    Fail::Unknown => unknown_command(a, out),
                    f => write_fail(f, out),
                }
                Reply::Done
            }
        }
    }

    /// Runs the command `name` (upper-cased) and writes its reply; on `Err` nothing is written.
    fn dispatch(&mut self, conn: ConnId, name: &[u8], a: &Args<'_>, out: &mut BytesMut) -> Result<Reply, Fail> {
        match name {
            b"GET" => {
                arity(a, 2, "get")?;
                match self.get(a.get(1)) {
                    Some(e) => bulk(out, &e.value),
                    None => nil(out),
                }
            }
            b"SET" => return self.cmd_set(a, out),
            b"PING" => match a.len() {
                1 => simple(out, "PONG"),
                2 => bulk(out, a.get(1)),
                _ => return Err(Fail::Arity("ping")),
            },
            b"INCR" | b"DECR" | b"INCRBY" | b"DECRBY" => {
                let by = match name {
                    b"INCR" => {
                        arity(a, 2, "incr")?;
                        1
                    }
                    b"DECR" => {
                        arity(a, 2, "decr")?;
                        -1
                    }
                    b"INCRBY" => {
                        arity(a, 3, "incrby")?;
                        int_arg(a.get(2))?
                    }
                    _ => {
                        arity(a, 3, "decrby")?;
                        int_arg(a.get(2))?.checked_neg().ok_or(Fail::Msg("decrement would overflow"))?
                    }
                };
                let key = a.get(1);
                let cur = match self.get(key) {
                    Some(e) => parse_i64(&e.value).ok_or(Fail::NotInt)?,
                    None => 0,
                };
                let v = cur.checked_add(by).ok_or(Fail::Overflow)?;
                let mut buf = [0u8; 20];
                let digits = num(v, &mut buf);
                self.fits(key, digits.len())?;
                self.store(key, digits, None);
                int(out, v);
            }
            b"MGET" => {
                arity(a, -2, "mget")?;
                array(out, a.len() - 1);
                for i in 1..a.len() {
                    match self.get(a.get(i)) {
                        Some(e) => bulk(out, &e.value),
                        None => nil(out),
                    }
                }
            }
            b"MSET" => {
                if a.len() < 3 || a.len() % 2 == 0 {
                    return Err(Fail::Arity("mset"));
                }
                // All or nothing: check every pair before storing any.
                let (mut new_keys, mut delta) = (0usize, 0isize);
                for i in (1..a.len()).step_by(2) {
                    let (k, v) = (a.get(i), a.get(i + 1));
                    match self.map.get(k) {
                        Some(e) => delta += v.len() as isize - e.value.len() as isize,
                        None => {
                            new_keys += 1;
                            delta += cost(k, v.len()) as isize;
                        }
                    }
                }
                if self.map.len() + new_keys > self.limits.max_keys {
                    self.stats.rejected_writes += 1;
                    return Err(Fail::TooManyKeys);
                }
                if (self.used as isize + delta) as usize > self.limits.max_memory {
                    self.stats.rejected_writes += 1;
                    return Err(Fail::Oom);
                }
                for i in (1..a.len()).step_by(2) {
                    self.store(a.get(i), a.get(i + 1), Some(None));
                }
                simple(out, "OK");
            }
            b"DEL" | b"EXISTS" => {
                let del = name == b"DEL";
                arity(a, -2, if del { "del" } else { "exists" })?;
                let mut n = 0;
                for i in 1..a.len() {
                    let k = a.get(i);
                    if self.alive(k) && (!del || self.remove(k)) {
                        n += 1;
                    }
                }
                int(out, n);
            }
            b"ECHO" => {
                arity(a, 2, "echo")?;
                bulk(out, a.get(1));
            }
            b"GETSET" => {
                arity(a, 3, "getset")?;
                let (k, v) = (a.get(1), a.get(2));
                self.alive(k);
                self.fits(k, v.len())?;
                match self.map.get(k) {
                    Some(e) => bulk(out, &e.value),
                    None => nil(out),
                }
                self.store(k, v, Some(None));
            }
            b"APPEND" => {
                arity(a, 3, "append")?;
                let (k, v) = (a.get(1), a.get(2));
                let len = self.get(k).map_or(0, |e| e.value.len()) + v.len();
                self.fits(k, len)?;
                match self.map.get_mut(k) {
                    Some(e) => {
                        e.value.extend_from_slice(v);
                        self.used += v.len();
                    }
                    None => self.store(k, v, None),
                }
                int(out, len as i64);
            }
            b"STRLEN" => {
                arity(a, 2, "strlen")?;
                int(out, self.get(a.get(1)).map_or(0, |e| e.value.len() as i64));
            }
            b"EXPIRE" => return self.cmd_expire(a, 1000, "expire", out),
            b"PEXPIRE" => return self.cmd_expire(a, 1, "pexpire", out),
            b"TTL" => {
                arity(a, 2, "ttl")?;
                let ms = self.pttl(a.get(1));
                int(out, if ms < 0 { ms } else { (ms + 500) / 1000 });
            }
            b"PTTL" => {
                arity(a, 2, "pttl")?;
                int(out, self.pttl(a.get(1)));
            }
            b"PERSIST" => {
                arity(a, 2, "persist")?;
                let k = a.get(1);
                let had = self.get(k).is_some_and(|e| e.expires.is_some());
                if had {
                    self.set_deadline(k, None);
                }
                int(out, i64::from(had));
            }
            b"DBSIZE" => {
                arity(a, 1, "dbsize")?;
                let now = self.now();
                self.sweep(now, usize::MAX);
                int(out, self.map.len() as i64);
            }
            b"FLUSHDB" | b"FLUSHALL" => {
                if a.len() > 2 || (a.len() == 2 && !a.is(1, "ASYNC") && !a.is(1, "SYNC")) {
                    return Err(Fail::Syntax);
                }
                self.flush();
                simple(out, "OK");
            }
            b"SELECT" => {
                arity(a, 2, "select")?;
                if int_arg(a.get(1))? != 0 {
                    return Err(Fail::Msg("DB index is out of range"));
                }
                simple(out, "OK");
            }
            b"QUIT" => {
                simple(out, "OK");
                return Ok(Reply::Close);
            }
            b"COMMAND" => self.cmd_command(a, out)?,
            b"CONFIG" => self.cmd_config(a, out)?,
            b"INFO" => self.cmd_info(a, out),
            b"HELLO" => self.cmd_hello(conn, a, out)?,
            _ => return Err(Fail::Unknown),
        }
        Ok(Reply::Done)
    }

    fn cmd_set(&mut self, a: &Args<'_>, out: &mut BytesMut) -> CmdResult {
        arity(a, -3, "set")?;
        let (k, v) = (a.get(1), a.get(2));
        let (mut nx, mut xx, mut get, mut keep) = (false, false, false, false);
        let mut ttl_ms: Option<i64> = None;
        let mut i = 3;
        while i < a.len() {
            let has_next = i + 1 < a.len();
            if a.is(i, "NX") && !xx {
                nx = true;
            } else if a.is(i, "XX") && !nx {
                xx = true;
            } else if a.is(i, "GET") {
                get = true;
            } else if a.is(i, "KEEPTTL") && ttl_ms.is_none() {
                keep = true;
            } else if (a.is(i, "EX") || a.is(i, "PX")) && !keep && ttl_ms.is_none() && has_next {
                let unit = if a.is(i, "EX") { 1000 } else { 1 };
                let n = int_arg(a.get(i + 1))?;
                let ms = n.checked_mul(unit).filter(|_| n > 0).ok_or(Fail::InvalidExpire("set"))?;
                ttl_ms = Some(ms);
                i += 1;
            } else {
                return Err(Fail::Syntax);
            }
            i += 1;
        }
        let now = self.now();
        let deadline = match ttl_ms {
            Some(ms) => Some(Some(now.checked_add(ms as u64).ok_or(Fail::InvalidExpire("set"))?)),
            None if keep => None,
            None => Some(None),
        };
        let exists = self.alive(k);
        if get {
            match self.map.get(k) {
                Some(e) => bulk(out, &e.value),
                None => nil(out),
            }
        }
        if (nx && exists) || (xx && !exists) {
            if !get {
                nil(out);
            }
            return Ok(Reply::Done);
        }
        if let Err(f) = self.fits(k, v.len()) {
            if get {
                // The old value is already in `out`: replace it with the error alone.
                out.clear();
            }
            return Err(f);
        }
        self.store(k, v, deadline);
        if !get {
            simple(out, "OK");
        }
        Ok(Reply::Done)
    }

    fn cmd_expire(&mut self, a: &Args<'_>, unit: i64, name: &'static str, out: &mut BytesMut) -> CmdResult {
        arity(a, -3, name)?;
        let k = a.get(1);
        let n = int_arg(a.get(2))?;
        let (mut nx, mut xx, mut gt, mut lt) = (false, false, false, false);
        for i in 3..a.len() {
            let flag = if a.is(i, "NX") {
                &mut nx
            } else if a.is(i, "XX") {
                &mut xx
            } else if a.is(i, "GT") {
                &mut gt
            } else if a.is(i, "LT") {
                &mut lt
            } else {
                return Err(Fail::Msg("Unsupported option"));
            };
            *flag = true;
        }
        if (nx && (xx || gt || lt)) || (gt && lt) {
            return Err(Fail::Msg("NX and XX, GT or LT options at the same time are not compatible"));
        }
        let now = self.now() as i64;
        let deadline = n.checked_mul(unit).and_then(|ms| ms.checked_add(now)).ok_or(Fail::InvalidExpire(name))?;
        let Some(cur) = self.get(k).map(|e| e.expires) else {
            int(out, 0);
            return Ok(Reply::Done);
        };
        let ok = match cur {
            _ if nx => cur.is_none(),
            None => !xx && !gt,
            Some(t) => (!gt || deadline > t as i64) && (!lt || deadline < t as i64),
        };
        if ok {
            if deadline <= now {
                self.remove(k);
                self.stats.expired_keys += 1;
            } else {
                self.set_deadline(k, Some(deadline as u64));
            }
        }
        int(out, i64::from(ok));
        Ok(Reply::Done)
    }

    fn cmd_command(&mut self, a: &Args<'_>, out: &mut BytesMut) -> Result<(), Fail> {
        let entry = |out: &mut BytesMut, c: &CommandInfo| {
            array(out, 6);
            bulk(out, c.0.as_bytes());
            int(out, c.1);
            array(out, c.2.len());
            for f in c.2 {
                simple(out, f);
            }
            int(out, c.3);
            int(out, c.4);
            int(out, c.5);
        };
        if a.len() == 1 {
            array(out, COMMANDS.len());
            COMMANDS.iter().for_each(|c| entry(out, c));
        } else if a.is(1, "COUNT") {
            int(out, COMMANDS.len() as i64);
        } else if a.is(1, "INFO") {
            array(out, a.len() - 2);
            for i in 2..a.len() {
                match COMMANDS.iter().find(|c| a.is(i, c.0)) {
                    Some(c) => entry(out, c),
                    None => out.extend_from_slice(b"*-1\r\n"),
                }
            }
        } else if a.is(1, "LIST") {
            array(out, COMMANDS.len());
            COMMANDS.iter().for_each(|c| bulk(out, c.0.as_bytes()));
        } else if a.is(1, "DOCS") {
            // No documentation to offer: an empty map (RESP2: empty array). redis-cli then
            // shows no hints, which is all this costs.
            array(out, 0);
        } else {
            return Err(Fail::Msg("unknown subcommand of COMMAND (supported: COUNT, INFO, LIST, DOCS)"));
        }
        Ok(())
    }

    fn cmd_config(&mut self, a: &Args<'_>, out: &mut BytesMut) -> Result<(), Fail> {
        arity(a, -2, "config")?;
        if !a.is(1, "GET") {
            return Err(Fail::Msg("only CONFIG GET is supported"));
        }
        arity(a, -3, "config|get")?;
        let params: [(&str, String); 8] = [
            ("save", String::new()),
            ("appendonly", "no".into()),
            ("databases", "1".into()),
            ("maxmemory", self.limits.max_memory.to_string()),
            ("maxmemory-policy", "noeviction".into()),
            ("proto-max-bulk-len", self.limits.max_bulk.to_string()),
            ("client-query-buffer-limit", self.limits.max_request.to_string()),
            ("timeout", "0".into()),
        ];
        let hits: Vec<&(&str, String)> =
            params.iter().filter(|(n, _)| (2..a.len()).any(|i| glob(a.get(i), n.as_bytes()))).collect();
        array(out, hits.len() * 2);
        for (n, v) in hits {
            bulk(out, n.as_bytes());
            bulk(out, v.as_bytes());
        }
        Ok(())
    }

    fn cmd_info(&mut self, a: &Args<'_>, out: &mut BytesMut) {
        let want = |s: &str| {
            a.len() == 1
                || (1..a.len()).any(|i| a.is(i, s) || a.is(i, "all") || a.is(i, "everything") || a.is(i, "default"))
        };
        let uptime = self.now() / 1000;
        let s = self.stats;
        let sections: [(&str, String); 5] = [
            (
                "Server",
                format!(
                    "redis_version:{REDIS_VERSION}\r\nserver_name:stack-resp\r\nredis_mode:standalone\r\n\
                     arch_bits:64\r\nprocess_id:{}\r\nuptime_in_seconds:{uptime}\r\n",
                    std::process::id()
                ),
            ),
            ("Clients", format!("connected_clients:{}\r\n", s.connected)),
            (
                "Memory",
                format!(
                    "used_memory:{}\r\nmaxmemory:{}\r\nmaxmemory_policy:noeviction\r\n",
                    self.used, self.limits.max_memory
                ),
            ),
            (
                "Stats",
                format!(
                    "total_connections_received:{}\r\ntotal_commands_processed:{}\r\nexpired_keys:{}\r\n\
                     rejected_writes:{}\r\n",
                    s.accepted, s.commands, s.expired_keys, s.rejected_writes
                ),
            ),
            (
                "Keyspace",
                if self.map.is_empty() {
                    String::new()
                } else {
                    format!("db0:keys={},expires={},avg_ttl=0\r\n", self.map.len(), self.with_ttl)
                },
            ),
        ];
        // As Redis: `# Section` headers, a blank line between sections, none after the last.
        let mut text = String::new();
        for (name, body) in sections.iter().filter(|(n, _)| want(&n.to_ascii_lowercase())) {
            if !text.is_empty() {
                text.push_str("\r\n");
            }
            let _ = write!(text, "# {name}\r\n{body}");
        }
        bulk(out, text.as_bytes());
    }

    fn cmd_hello(&mut self, conn: ConnId, a: &Args<'_>, out: &mut BytesMut) -> Result<(), Fail> {
        if a.len() >= 2 {
            let v = parse_i64(a.get(1)).ok_or(Fail::Msg("Protocol version is not an integer or out of range"))?;
            if v != 2 {
                return Err(Fail::NoProto);
            }
        }
        let mut i = 2;
        while i < a.len() {
            if a.is(i, "SETNAME") && i + 1 < a.len() {
                i += 2;
            } else if a.is(i, "AUTH") {
                return Err(Fail::Msg("AUTH is not supported (no users configured)"));
            } else {
                return Err(Fail::Syntax);
            }
        }
        array(out, 14);
        for (k, v) in [("server", "redis"), ("version", REDIS_VERSION)] {
            bulk(out, k.as_bytes());
            bulk(out, v.as_bytes());
        }
        bulk(out, b"proto");
        int(out, 2);
        bulk(out, b"id");
        int(out, i64::from(conn.0));
        for (k, v) in [("mode", "standalone"), ("role", "master")] {
            bulk(out, k.as_bytes());
            bulk(out, v.as_bytes());
        }
        bulk(out, b"modules");
        array(out, 0);
        Ok(())
    }
}

fn cost(key: &[u8], value_len: usize) -> usize {
    key.len() + value_len + ENTRY_OVERHEAD
}

fn unknown_command(a: &Args<'_>, out: &mut BytesMut) {
    out.extend_from_slice(b"-ERR unknown command '");
    put_sanitized(out, a.get(0));
    out.extend_from_slice(b"', with args beginning with: ");
    for i in 1..a.len().min(9) {
        out.put_u8(b'\'');
        put_sanitized(out, a.get(i));
        out.extend_from_slice(b"' ");
    }
    out.extend_from_slice(b"\r\n");
}

fn write_fail(f: Fail, out: &mut BytesMut) {
    let _ = match f {
        Fail::Arity(name) => write!(out, "-ERR wrong number of arguments for '{name}' command\r\n"),
        Fail::Syntax => write!(out, "-ERR syntax error\r\n"),
        Fail::NotInt => write!(out, "-ERR value is not an integer or out of range\r\n"),
        Fail::Overflow => write!(out, "-ERR increment or decrement would overflow\r\n"),
        Fail::InvalidExpire(name) => {
            write!(out, "-ERR invalid expire time in '{name}' command\r\n")
        }
        Fail::Oom => write!(out, "-OOM command not allowed when used memory > 'maxmemory'.\r\n"),
        Fail::TooManyKeys => write!(out, "-OOM command not allowed: the store holds its maximum number of keys\r\n"),
        Fail::NoProto => write!(out, "-NOPROTO unsupported protocol version\r\n"),
        Fail::Unknown => write!(out, "-ERR unknown command\r\n"),
        Fail::Msg(m) => write!(out, "-ERR {m}\r\n"),
    };
}

impl Handler for Resp {
    fn handle(&mut self, conn: ConnId, req: &[u8], resp: &mut BytesMut) -> Reply {
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

    fn on_open(&mut self, _conn: ConnId) {
        self.stats.connected += 1;
        self.stats.accepted += 1;
    }

    fn on_close(&mut self, _conn: ConnId) {
        self.stats.connected = self.stats.connected.saturating_sub(1);
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

// ---------------------------------------------------------------------------------------------
// Load workload
// ---------------------------------------------------------------------------------------------

/// A [`crate::rr::Workload`] for `rr-bench --service resp`: each connection alternates
/// `SET key:N value` and `GET key:N` over `keys` keys, with one fixed value, and checks every
/// reply byte for byte (`+OK`, then the bulk value). Use it with [`crate::codec::Stream`] on the
/// client: the reply lengths are known, so no reply parser is needed.
#[derive(Clone, Debug)]
pub struct RespWorkload {
    value: Vec<u8>,
    keys: u64,
    /// The expected GET reply: `$len\r\nvalue\r\n`.
    get_reply: Vec<u8>,
}

impl RespWorkload {
    /// Values of `value_size` bytes, keys `key:0` .. `key:{keys-1}` (at least one).
    pub fn new(value_size: usize, keys: u64) -> Self {
        let value: Vec<u8> = (0..value_size).map(|i| b'a' + (i % 26) as u8).collect();
        let mut get_reply = BytesMut::new();
        bulk(&mut get_reply, &value);
        RespWorkload { value, keys: keys.max(1), get_reply: get_reply.to_vec() }
    }
}

impl crate::rr::Workload for RespWorkload {
    fn next_request(&mut self, conn: usize, seq: u64, out: &mut BytesMut) {
        let key = (conn as u64).wrapping_mul(7919).wrapping_add(seq / 2) % self.keys;
        let mut buf = [0u8; 20];
        let digits = num(key as i64, &mut buf);
        let set = seq % 2 == 0;
        array(out, if set { 3 } else { 2 });
        bulk(out, if set { b"SET" } else { b"GET" });
        put_line(out, b'$', 4 + digits.len() as i64);
        out.extend_from_slice(b"key:");
        out.extend_from_slice(digits);
        out.extend_from_slice(b"\r\n");
        if set {
            bulk(out, &self.value);
        }
    }

    fn check(&mut self, _conn: usize, req: &[u8], resp: &[u8]) -> bool {
        resp == self.expected(req)
    }

    fn response_len(&self, req: &[u8]) -> Option<usize> {
        Some(self.expected(req).len())
    }
}

impl RespWorkload {
    fn expected(&self, req: &[u8]) -> &[u8] {
        if req.starts_with(b"*3") {
            b"+OK\r\n"
        } else {
            &self.get_reply
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rr::Workload;

    /// Feeds `wire` through codec and handler (in chunks of `chunk` bytes) and returns every
    /// reply, concatenated, plus whether the connection would be closed.
    fn serve(h: &mut Resp, limits: RespLimits, wire: &[u8], chunk: usize) -> (String, bool) {
        let mut codec = RespCodec::new(limits);
        let (mut buf, mut out, mut resp) = (BytesMut::new(), BytesMut::new(), BytesMut::new());
        for piece in wire.chunks(chunk.max(1)) {
            buf.extend_from_slice(piece);
            loop {
                match codec.decode(&mut buf) {
                    Ok(Some(req)) => {
                        resp.clear();
                        let reply = h.handle(ConnId(1), &req, &mut resp);
                        codec.encode(&resp, &mut out);
                        if reply == Reply::Close {
                            return (String::from_utf8_lossy(&out).into_owned(), true);
                        }
                    }
                    Ok(None) => break,
                    Err(e) => {
                        codec.encode_error(&e, &mut out);
                        return (String::from_utf8_lossy(&out).into_owned(), true);
                    }
                }
            }
        }
        (String::from_utf8_lossy(&out).into_owned(), false)
    }

    fn mb(args: &[&str]) -> Vec<u8> {
        let mut out = BytesMut::new();
        array(&mut out, args.len());
        for a in args {
            bulk(&mut out, a.as_bytes());
        }
        out.to_vec()
    }

    /// One command through the wire format, every chunking the same.
    fn cmd(h: &mut Resp, args: &[&str]) -> String {
        let wire = mb(args);
        let (reply, _) = serve(h, RespLimits::default(), &wire, wire.len());
        reply
    }

    #[test]
    fn parse_i64_is_strict() {
        assert_eq!(parse_i64(b"0"), Some(0));
        assert_eq!(parse_i64(b"-12"), Some(-12));
        assert_eq!(parse_i64(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
        for bad in [&b""[..], b"-", b"+1", b" 1", b"01", b"-0", b"1a", b"9223372036854775808", b"99999999999999999999"]
        {
            assert_eq!(parse_i64(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
        let mut d = [0u8; 20];
        assert_eq!(num(i64::MIN, &mut d), b"-9223372036854775808");
        assert_eq!(num(0, &mut d), b"0");
    }

    #[test]
    fn pipelined_multibulk_and_inline_any_chunking() {
        let mut wire = Vec::new();
        wire.extend(mb(&["SET", "k", "v\r\nwith crlf"]));
        wire.extend_from_slice(b"GET k\r\n");
        wire.extend_from_slice(b"*0\r\n\r\n");
        wire.extend(mb(&["ping"]));
        wire.extend_from_slice(b"PING\n");
        wire.extend_from_slice(b"set q \"a \\\"b\\\" \\x41\" \r\nget q\r\n");
        wire.extend_from_slice(b"echo 'it\\'s'\r\n");
        let expect = "+OK\r\n$12\r\nv\r\nwith crlf\r\n+PONG\r\n+PONG\r\n+OK\r\n$7\r\na \"b\" A\r\n$4\r\nit's\r\n";
        for chunk in [1, 2, 3, 7, 1000] {
            let (out, closed) = serve(&mut Resp::default(), RespLimits::default(), &wire, chunk);
            assert_eq!(out, expect, "chunk {chunk}");
            assert!(!closed);
        }
    }

    #[test]
    fn protocol_errors_answer_then_close() {
        let limits = RespLimits { max_bulk: 10, max_args: 3, max_request: 30, max_inline: 16, ..RespLimits::default() };
        let cases: [(&[u8], &str); 8] = [
            (b"*x\r\n", "invalid multibulk length"),
            (b"*1\r\n+PING\r\n", "expected '$'"),
            (b"*1\r\n$-3\r\n", "invalid bulk length"),
            (b"*1\r\n$11\r\n", "bulk length 11 exceeds the limit of 10"),
            (b"*4\r\n", "arguments 4 exceeds the limit of 3"),
            (b"*3\r\n$10\r\n0123456789\r\n$10\r\n0123456789\r\n", "request bytes 38 exceeds the limit of 30"),
            (b"*1\r\n$2\r\nabcd", "not followed by CRLF"),
            (b"GET aaaaaaaaaaaaaaaaaaaaaaa", "too big inline request"),
        ];
        for (wire, msg) in cases {
            for chunk in [1, 1000] {
                let (out, closed) = serve(&mut Resp::default(), limits, wire, chunk);
                assert!(closed, "{wire:?}");
                assert!(out.starts_with("-ERR Protocol error: ") && out.contains(msg), "{wire:?}: {out}");
            }
        }
        // A bulk header without digits ever ending is cut at the header limit, not buffered on.
        let (out, closed) = serve(&mut Resp::default(), limits, &[b'*'; 100], 1);
        assert!(closed && out.contains("invalid multibulk length"), "{out}");
        let (out, closed) = serve(&mut Resp::default(), limits, b"SET a \"open\r\n", 100);
        assert!(closed && out.contains("unbalanced quotes"), "{out}");
        // Within limits everything passes.
        let (out, closed) = serve(&mut Resp::default(), limits, &mb(&["ECHO", "012345"]), 3);
        assert_eq!((out.as_str(), closed), ("$6\r\n012345\r\n", false));
    }

    #[test]
    fn strings_and_counters() {
        let h = &mut Resp::default();
        assert_eq!(cmd(h, &["GET", "a"]), "$-1\r\n");
        assert_eq!(cmd(h, &["set", "a", "10"]), "+OK\r\n");
        assert_eq!(cmd(h, &["INCR", "a"]), ":11\r\n");
        assert_eq!(cmd(h, &["INCRBY", "a", "-20"]), ":-9\r\n");
        assert_eq!(cmd(h, &["DECR", "a"]), ":-10\r\n");
        assert_eq!(cmd(h, &["DECRBY", "a", "5"]), ":-15\r\n");
        assert_eq!(cmd(h, &["INCR", "new"]), ":1\r\n");
        assert_eq!(cmd(h, &["DECRBY", "a", "-9223372036854775808"]), "-ERR decrement would overflow\r\n");
        assert_eq!(cmd(h, &["SET", "big", "9223372036854775807"]), "+OK\r\n");
        assert_eq!(cmd(h, &["INCR", "big"]), "-ERR increment or decrement would overflow\r\n");
        assert_eq!(cmd(h, &["INCRBY", "a", "x"]), "-ERR value is not an integer or out of range\r\n");
        assert_eq!(cmd(h, &["SET", "s", "abc"]), "+OK\r\n");
        assert_eq!(cmd(h, &["INCR", "s"]), "-ERR value is not an integer or out of range\r\n");
        assert_eq!(cmd(h, &["APPEND", "s", "de"]), ":5\r\n");
        assert_eq!(cmd(h, &["APPEND", "t", "xy"]), ":2\r\n");
        assert_eq!(cmd(h, &["STRLEN", "s"]), ":5\r\n");
        assert_eq!(cmd(h, &["STRLEN", "none"]), ":0\r\n");
        assert_eq!(cmd(h, &["GETSET", "s", "z"]), "$5\r\nabcde\r\n");
        assert_eq!(cmd(h, &["GETSET", "u", "z"]), "$-1\r\n");
        assert_eq!(cmd(h, &["MSET", "m1", "1", "m2", "2"]), "+OK\r\n");
        assert_eq!(cmd(h, &["MSET", "m1", "1", "m2"]), "-ERR wrong number of arguments for 'mset' command\r\n");
        assert_eq!(cmd(h, &["MGET", "m1", "nope", "m2"]), "*3\r\n$1\r\n1\r\n$-1\r\n$1\r\n2\r\n");
        assert_eq!(cmd(h, &["EXISTS", "m1", "m1", "nope"]), ":2\r\n");
        assert_eq!(cmd(h, &["DEL", "m1", "m2", "nope"]), ":2\r\n");
        assert_eq!(cmd(h, &["DBSIZE"]), ":6\r\n");
        assert_eq!(cmd(h, &["SET", "a", "1", "NX"]), "$-1\r\n");
        assert_eq!(cmd(h, &["SET", "x", "1", "XX"]), "$-1\r\n");
        assert_eq!(cmd(h, &["SET", "x", "1", "NX"]), "+OK\r\n");
        assert_eq!(cmd(h, &["SET", "x", "2", "XX", "GET"]), "$1\r\n1\r\n");
        assert_eq!(cmd(h, &["SET", "x", "2", "NX", "XX"]), "-ERR syntax error\r\n");
        assert_eq!(cmd(h, &["SET", "x", "2", "EX"]), "-ERR syntax error\r\n");
        assert_eq!(cmd(h, &["SET", "x", "2", "EX", "0"]), "-ERR invalid expire time in 'set' command\r\n");
        assert_eq!(cmd(h, &["FLUSHALL"]), "+OK\r\n");
        assert_eq!(cmd(h, &["DBSIZE"]), ":0\r\n");
        assert_eq!(h.used_memory(), 0);
    }

    #[test]
    fn connection_and_introspection_commands() {
        let h = &mut Resp::default();
        assert_eq!(cmd(h, &["PING"]), "+PONG\r\n");
        assert_eq!(cmd(h, &["PING", "hi"]), "$2\r\nhi\r\n");
        assert_eq!(cmd(h, &["ECHO", ""]), "$0\r\n\r\n");
        assert_eq!(cmd(h, &["SELECT", "0"]), "+OK\r\n");
        assert_eq!(cmd(h, &["SELECT", "1"]), "-ERR DB index is out of range\r\n");
        assert_eq!(cmd(h, &["CONFIG", "GET", "save"]), "*2\r\n$4\r\nsave\r\n$0\r\n\r\n");
        assert_eq!(cmd(h, &["CONFIG", "GET", "APPEND*"]), "*2\r\n$10\r\nappendonly\r\n$2\r\nno\r\n");
        assert!(cmd(h, &["CONFIG", "SET", "save", ""]).starts_with("-ERR"));
        assert!(cmd(h, &["CONFIG"]).starts_with("-ERR wrong number"));
        assert_eq!(cmd(h, &["COMMAND", "COUNT"]), format!(":{}\r\n", COMMANDS.len()));
        assert!(cmd(h, &["COMMAND"]).starts_with(&format!("*{}\r\n*6\r\n$4\r\nping\r\n:-1\r\n", COMMANDS.len())));
        assert_eq!(cmd(h, &["COMMAND", "DOCS"]), "*0\r\n");
        assert!(cmd(h, &["COMMAND", "INFO", "get", "nope"]).ends_with("*-1\r\n"));
        assert!(cmd(h, &["INFO"]).contains("redis_version:7.0.0\r\n"));
        assert!(cmd(h, &["INFO", "keyspace"]).starts_with("$12\r\n# Keyspace\r\n"));
        assert!(cmd(h, &["HELLO"]).starts_with("*14\r\n$6\r\nserver\r\n"));
        assert!(cmd(h, &["HELLO", "2", "SETNAME", "x"]).starts_with("*14\r\n"));
        assert_eq!(cmd(h, &["HELLO", "3"]), "-NOPROTO unsupported protocol version\r\n");
        assert_eq!(
            cmd(h, &["LPUSH", "l", "a\r\nb"]),
            "-ERR unknown command 'LPUSH', with args beginning with: 'l' 'a??b' \r\n"
        );
        assert!(cmd(h, &["AVERYLONGCOMMANDNAMEINDEED"]).starts_with("-ERR unknown command"));
        assert_eq!(cmd(h, &["GET"]), "-ERR wrong number of arguments for 'get' command\r\n");
        let (out, closed) = serve(h, RespLimits::default(), b"QUIT\r\nPING\r\n", 100);
        assert_eq!((out.as_str(), closed), ("+OK\r\n", true));
        assert!(h.stats().errors >= 6);
    }

    #[test]
    fn expiry_lazy_and_swept() {
        let h = &mut Resp::default();
        h.set_clock_ms(1_000);
        assert_eq!(cmd(h, &["SET", "a", "1", "EX", "10"]), "+OK\r\n");
        assert_eq!(cmd(h, &["SET", "b", "1", "PX", "1500"]), "+OK\r\n");
        assert_eq!(cmd(h, &["SET", "c", "1"]), "+OK\r\n");
        assert_eq!(cmd(h, &["TTL", "a"]), ":10\r\n");
        assert_eq!(cmd(h, &["PTTL", "b"]), ":1500\r\n");
        assert_eq!(cmd(h, &["TTL", "c"]), ":-1\r\n");
        assert_eq!(cmd(h, &["TTL", "zz"]), ":-2\r\n");
        h.set_clock_ms(2_499);
        assert_eq!(cmd(h, &["GET", "b"]), "$1\r\n1\r\n");
        h.set_clock_ms(2_500);
        // Lazy: the read itself finds b expired.
        assert_eq!(cmd(h, &["GET", "b"]), "$-1\r\n");
        assert_eq!(h.stats().expired_keys, 1);
        // KEEPTTL keeps, a plain SET clears, INCR keeps.
        assert_eq!(cmd(h, &["SET", "a", "5", "KEEPTTL"]), "+OK\r\n");
        assert_eq!(cmd(h, &["INCR", "a"]), ":6\r\n");
        assert_eq!(cmd(h, &["PTTL", "a"]), ":8500\r\n");
        assert_eq!(cmd(h, &["PERSIST", "a"]), ":1\r\n");
        assert_eq!(cmd(h, &["PERSIST", "a"]), ":0\r\n");
        assert_eq!(cmd(h, &["EXPIRE", "a", "100", "XX"]), ":0\r\n");
        assert_eq!(cmd(h, &["EXPIRE", "a", "100", "NX"]), ":1\r\n");
        assert_eq!(cmd(h, &["EXPIRE", "a", "50", "GT"]), ":0\r\n");
        assert_eq!(cmd(h, &["EXPIRE", "a", "50", "LT"]), ":1\r\n");
        assert_eq!(cmd(h, &["EXPIRE", "a", "1", "NX", "XX"]).get(..4), Some("-ERR"));
        assert_eq!(cmd(h, &["PEXPIRE", "zz", "100"]), ":0\r\n");
        assert_eq!(cmd(h, &["EXPIRE", "a", "99999999999999999"]), "-ERR invalid expire time in 'expire' command\r\n");
        // A deadline in the past deletes at once.
        assert_eq!(cmd(h, &["PEXPIRE", "c", "-1"]), ":1\r\n");
        assert_eq!(cmd(h, &["EXISTS", "c"]), ":0\r\n");
        // Swept: many keys nobody reads again disappear through tick().
        for i in 0..100 {
            assert_eq!(cmd(h, &["SET", &format!("t{i}"), "v", "PX", "10"]), "+OK\r\n");
        }
        // Churn on one key leaves stale heap entries; compaction keeps the heap bounded.
        for _ in 0..10_000 {
            cmd(h, &["SET", "churn", "v", "EX", "1000"]);
        }
        assert!(h.heap.len() <= 2 * h.with_ttl + 1025, "heap {} with_ttl {}", h.heap.len(), h.with_ttl);
        let before = h.len();
        h.set_clock_ms(2_520);
        h.tick(&mut Completions::default());
        assert_eq!(h.len(), before - 100, "the sweep removed the expired keys");
        assert_eq!(cmd(h, &["DBSIZE"]), ":2\r\n");
        h.set_clock_ms(3_600_000);
        assert_eq!(cmd(h, &["DBSIZE"]), ":0\r\n", "DBSIZE counts no expired key");
        assert_eq!(h.used_memory(), 0);
    }

    #[test]
    fn storage_limits_give_oom_errors() {
        let limits = RespLimits { max_keys: 3, max_memory: 3 * ENTRY_OVERHEAD + 30, ..RespLimits::default() };
        let h = &mut Resp::new(limits);
        let run = |h: &mut Resp, a: &[&str]| serve(h, limits, &mb(a), 1000).0;
        assert_eq!(run(h, &["MSET", "a", "1", "b", "2", "c", "3"]), "+OK\r\n");
        assert!(run(h, &["SET", "d", "4"]).starts_with("-OOM"));
        assert!(run(h, &["MSET", "a", "1", "e", "2"]).starts_with("-OOM"), "all or nothing");
        assert_eq!(run(h, &["EXISTS", "e"]), ":0\r\n");
        // Overwriting is fine until the bytes run out.
        assert_eq!(run(h, &["SET", "a", "0123456789"]), "+OK\r\n");
        assert!(run(h, &["APPEND", "a", "01234567890123456789"]).starts_with("-OOM"));
        assert!(run(h, &["SET", "b", "0123456789012345678901234", "GET"]).starts_with("-OOM"));
        assert_eq!(run(h, &["DEL", "c"]), ":1\r\n");
        assert_eq!(run(h, &["INCR", "n"]), ":1\r\n");
        assert_eq!(h.stats().rejected_writes, 4);
        assert!(h.used_memory() <= limits.max_memory);
    }

    #[test]
    fn no_allocation_shape_for_overwrites() {
        // Overwriting a key with a same-sized value reuses its buffer.
        let h = &mut Resp::default();
        cmd(h, &["SET", "k", "aaaa"]);
        let ptr = h.map.get(&b"k"[..]).unwrap().value.as_ptr();
        cmd(h, &["SET", "k", "bbbb"]);
        assert_eq!(h.map.get(&b"k"[..]).unwrap().value.as_ptr(), ptr);
    }

    #[test]
    fn workload_matches_the_server() {
        let mut w = RespWorkload::new(100, 4);
        let h = &mut Resp::default();
        let mut codec = RespCodec::default();
        for seq in 0..20 {
            let mut req = BytesMut::new();
            w.next_request(3, seq, &mut req);
            let mut buf = req.clone();
            let frame = codec.decode(&mut buf).unwrap().unwrap();
            assert!(buf.is_empty());
            let mut resp = BytesMut::new();
            h.handle(ConnId(1), &frame, &mut resp);
            assert_eq!(w.response_len(&req), Some(resp.len()));
            assert!(w.check(3, &req, &resp), "{:?}", String::from_utf8_lossy(&resp));
        }
        assert_eq!(h.len(), 4);
    }

    #[test]
    fn glob_matches_like_redis() {
        assert!(glob(b"*", b"save"));
        assert!(glob(b"max*", b"maxmemory-policy"));
        assert!(glob(b"*memory*", b"maxmemory"));
        assert!(glob(b"s?ve", b"SAVE"));
        assert!(!glob(b"save", b"saves"));
        assert!(!glob(b"*x", b"save"));
    }

    #[test]
    fn garbage_never_panics() {
        // Deterministic fuzz: random bytes, random RESP-looking fragments, any chunking.
        let mut rng = 0x1234_5678_9abc_def1u64;
        let pieces: [&[u8]; 12] =
            [b"*", b"$", b"\r\n", b"3", b"-1", b"GET", b"SET", b"\"", b"'", b"\\x4", b" ", b"99999999999999999999"];
        for _ in 0..3000 {
            let mut wire = Vec::new();
            for _ in 0..(crate::resp::tests::next(&mut rng) % 40) {
                let r = next(&mut rng);
                if r % 3 == 0 {
                    wire.push(r as u8);
                } else {
                    wire.extend_from_slice(pieces[(r % 12) as usize]);
                }
            }
            let limits =
                RespLimits { max_bulk: 64, max_args: 8, max_request: 256, max_inline: 64, ..RespLimits::default() };
            let _ = serve(&mut Resp::default(), limits, &wire, (next(&mut rng) % 5 + 1) as usize);
        }
    }

    fn next(s: &mut u64) -> u64 {
        *s ^= *s << 13;
        *s ^= *s >> 7;
        *s ^= *s << 17;
        *s
    }
}
