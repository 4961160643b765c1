//! [`RespCodec`]: finds request boundaries in the byte stream and enforces the request limits
//! of [`RespLimits`] while parsing, before a request is buffered in full.

use std::fmt::Write as _;

use bytes::{Bytes, BytesMut};

use super::wire::parse_i64;
use super::RespLimits;
use stack::codec::{Codec, CodecError};

/// The `*N` / `$N` header line: sign, 19 digits, CRLF.
const MAX_LEN_LINE: usize = 22;

/// Frames RESP requests: a multibulk array of bulk strings (`*2\r\n$3\r\nGET\r\n$1\r\nk\r\n`)
/// or an inline command line (`GET k\r\n`, what `telnet` and redis-benchmark's `PING_INLINE`
/// send). A decoded message is the whole request as it arrived; [`Resp`](super::Resp) splits it into
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
pub(super) fn len_line(b: &[u8]) -> Result<Option<(i64, usize)>, ()> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resp::testutil::{mb, next, serve};
    use crate::resp::Resp;

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
    fn garbage_never_panics() {
        // Deterministic fuzz: random bytes, random RESP-looking fragments, any chunking.
        let mut rng = 0x1234_5678_9abc_def1u64;
        let pieces: [&[u8]; 17] = [
            b"*",
            b"$",
            b"\r\n",
            b"3",
            b"-1",
            b"GET",
            b"SET",
            b"\"",
            b"'",
            b"\\x4",
            b" ",
            b"99999999999999999999",
            b"MULTI",
            b"EXEC",
            b"HSET",
            b"HELLO",
            b"CLIENT",
        ];
        for _ in 0..3000 {
            let mut wire = Vec::new();
            for _ in 0..(next(&mut rng) % 40) {
                let r = next(&mut rng);
                if r.is_multiple_of(3) {
                    wire.push(r as u8);
                } else {
                    wire.extend_from_slice(pieces[(r % 17) as usize]);
                }
            }
            let limits =
                RespLimits { max_bulk: 64, max_args: 8, max_request: 256, max_inline: 64, ..RespLimits::default() };
            let _ = serve(&mut Resp::default(), limits, &wire, (next(&mut rng) % 5 + 1) as usize);
        }
    }
}
