//! Message framing for the request/response layer.
//!
//! A [`Codec`] turns a byte stream into messages and back. Each connection gets its own clone,
//! so a codec may keep per-connection parse state (e.g. how far [`Lines`] already scanned).
//! Decoded messages are split off the connection's read buffer (`split_to(..).freeze()`), which
//! shares the allocation instead of copying. Once the message is dropped the buffer reclaims
//! its space, so steady state allocates nothing.
//!
//! Built in: [`LengthPrefixed`] (u32 big-endian length + payload), [`Stream`] (unframed, RFC 862
//! echo style) and [`Lines`] (`\n`-terminated, the model for text protocols such as RESP or
//! HTTP/1 headers).

use bytes::{Buf, BufMut, Bytes, BytesMut};

/// A framing violation by the peer. The RR layer closes the connection.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CodecError {
    #[error("frame length {len} exceeds the limit of {max} bytes")]
    /// A length header above the limit (checked before the body is buffered).
    FrameTooLong {
        /// Length announced by the peer.
        len: usize,
        /// The limit.
        max: usize,
    },
    #[error("line longer than {max} bytes")]
    /// A text line longer than the limit (with or without its terminator yet).
    LineTooLong {
        /// The limit.
        max: usize,
    },
    #[error("malformed message: {0}")]
    /// Input that breaks the framing rules (what rule, for the log and error replies).
    Invalid(&'static str),
    /// A declared size or count beyond a configured limit (e.g. a RESP bulk length).
    #[error("{what} {len} exceeds the limit of {max}")]
    Limit {
        /// What was too large (e.g. "bulk length").
        what: &'static str,
        /// Size or count announced by the peer.
        len: u64,
        /// The limit.
        max: usize,
    },
}

/// Framing: splits a byte stream into messages and frames outgoing ones. One clone per
/// connection.
pub trait Codec {
    /// Extracts one complete message from the front of `buf` (advancing it), or `None` if
    /// `buf` does not hold a complete one yet. Must not panic on any input. The server does
    /// not call it with an empty `buf`, but a message may decode to zero bytes (an empty
    /// line of [`Lines`] is an empty request). Bytes left in `buf` when the peer closes (an
    /// unfinished last message) are dropped unanswered.
    fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Bytes>, CodecError>;

    /// Like `decode`, for a caller that knows the message is `len` bytes long: a client
    /// reading echo replies on an unframed stream, where the stream itself carries no
    /// boundaries. Framed codecs ignore the hint (the default).
    fn decode_exact(&mut self, buf: &mut BytesMut, len: usize) -> Result<Option<Bytes>, CodecError> {
        let _ = len;
        self.decode(buf)
    }

    /// Appends `msg`, framed, to `out`.
    fn encode(&mut self, msg: &[u8], out: &mut BytesMut);

    /// Appends what the peer should see before the server closes a connection whose input
    /// `decode` rejected with `err`. The default sends nothing: protocols without an error
    /// message just close. RESP answers `-ERR Protocol error: ...` as Redis does.
    fn encode_error(&mut self, err: &CodecError, out: &mut BytesMut) {
        let _ = (err, out);
    }
}

/// `u32` big-endian payload length, then the payload. A length over `max_len` is a protocol
/// error: it would otherwise let a peer make us buffer up to 4 GiB.
///
/// Framing: a decoded request is the payload without its length; `encode` writes the
/// 4-byte length before the response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LengthPrefixed {
    /// Longest payload accepted.
    pub max_len: usize,
}

impl LengthPrefixed {
    /// Bytes of the length header.
    pub const HEADER: usize = 4;

    /// Frames of at most `max_len` payload bytes.
    pub fn new(max_len: usize) -> Self {
        LengthPrefixed { max_len }
    }
}

impl Default for LengthPrefixed {
    /// 16 MiB limit.
    fn default() -> Self {
        LengthPrefixed { max_len: 16 << 20 }
    }
}

impl Codec for LengthPrefixed {
    fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Bytes>, CodecError> {
        let Some(header) = buf.get(..Self::HEADER) else { return Ok(None) };
        let len = u32::from_be_bytes([header[0], header[1], header[2], header[3]]) as usize;
        // Reject before waiting for the body, so an oversized frame fails fast.
        if len > self.max_len {
            return Err(CodecError::FrameTooLong { len, max: self.max_len });
        }
        if buf.len() < Self::HEADER + len {
            // Reserve once for the whole frame, so a large message is read with few reallocations.
            buf.reserve(Self::HEADER + len - buf.len());
            return Ok(None);
        }
        buf.advance(Self::HEADER);
        Ok(Some(buf.split_to(len).freeze()))
    }

    fn encode(&mut self, msg: &[u8], out: &mut BytesMut) {
        // Messages are produced locally. Over 4 GiB would be a bug in the caller, not peer input.
        let len = u32::try_from(msg.len()).expect("message longer than u32::MAX");
        out.reserve(Self::HEADER + msg.len());
        out.put_u32(len);
        out.extend_from_slice(msg);
    }
}

/// No framing: every decode returns everything buffered (a "request" is whatever one read
/// brought), and encode writes the bytes as they are, adding nothing (RFC 862 echo). On the client side [`Codec::decode_exact`] recovers message boundaries
/// from the known reply length.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stream;

impl Codec for Stream {
    fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Bytes>, CodecError> {
        if buf.is_empty() {
            Ok(None)
        } else {
            Ok(Some(buf.split().freeze()))
        }
    }

    fn decode_exact(&mut self, buf: &mut BytesMut, len: usize) -> Result<Option<Bytes>, CodecError> {
        if buf.len() < len {
            Ok(None)
        } else {
            Ok(Some(buf.split_to(len).freeze()))
        }
    }

    fn encode(&mut self, msg: &[u8], out: &mut BytesMut) {
        out.extend_from_slice(msg);
    }
}

/// `\n`-terminated lines (an optional `\r` before the `\n` is stripped too), at most `max_len`
/// bytes without the terminator.
///
/// Framing: a decoded request is the line without its terminator (an empty line is an empty
/// request); `encode` writes the response and adds the `\n` (a handler writes `OK`, the peer
/// reads `OK\n`). A last line the peer closes without terminating is not a request.
///
/// The example for building text protocols: keep the scan position
/// so input that arrives byte by byte is not rescanned from the start (O(n), not O(n²)).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lines {
    /// Longest line accepted, without its terminator.
    pub max_len: usize,
    /// Answer input it rejects with `ERR <why>\n` before the server closes the connection
    /// (off: close without a word). [`Lines::with_errors`] turns it on.
    pub errors: bool,
    /// Bytes at the front of the buffer already known to contain no `\n`.
    scanned: usize,
}

impl Lines {
    /// Lines of at most `max_len` bytes.
    pub fn new(max_len: usize) -> Self {
        Lines { max_len, errors: false, scanned: 0 }
    }

    /// The same, and a peer whose line is too long reads `ERR line longer than N bytes\n`
    /// before the close.
    pub fn with_errors(max_len: usize) -> Self {
        Lines { errors: true, ..Lines::new(max_len) }
    }
}

impl Codec for Lines {
    fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Bytes>, CodecError> {
        // The terminator may sit at index max_len (a line of exactly max_len bytes), and a
        // stripped '\r' may take one more byte.
        let limit = buf.len().min(self.max_len.saturating_add(2));
        let start = self.scanned.min(limit);
        match buf[start..limit].iter().position(|&b| b == b'\n') {
            Some(pos) => {
                let nl = start + pos;
                let end = if nl > 0 && buf[nl - 1] == b'\r' { nl - 1 } else { nl };
                if end > self.max_len {
                    return Err(CodecError::LineTooLong { max: self.max_len });
                }
                self.scanned = 0;
                let line = buf.split_to(end).freeze();
                buf.advance(nl + 1 - end);
                Ok(Some(line))
            }
            None if limit > self.max_len.saturating_add(1) => Err(CodecError::LineTooLong { max: self.max_len }),
            None => {
                self.scanned = limit;
                Ok(None)
            }
        }
    }

    /// `msg` must not contain `\n`: it would end the line early on the peer's side.
    fn encode(&mut self, msg: &[u8], out: &mut BytesMut) {
        out.reserve(msg.len() + 1);
        out.extend_from_slice(msg);
        out.put_u8(b'\n');
    }

    fn encode_error(&mut self, err: &CodecError, out: &mut BytesMut) {
        if self.errors {
            out.extend_from_slice(format!("ERR {err}\n").as_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_with_errors_says_why_before_the_close() {
        let mut buf = BytesMut::from(&b"0123456789\n"[..]);
        let mut quiet = Lines::new(4);
        let err = quiet.decode(&mut buf.clone()).unwrap_err();
        let mut out = BytesMut::new();
        quiet.encode_error(&err, &mut out);
        assert!(out.is_empty());
        let mut loud = Lines::with_errors(4);
        let err = loud.decode(&mut buf).unwrap_err();
        loud.encode_error(&err, &mut out);
        assert_eq!(&out[..], b"ERR line longer than 4 bytes\n");
    }

    /// Feeds `input` one byte at a time and collects every decoded message.
    fn decode_bytewise<C: Codec>(codec: &mut C, input: &[u8]) -> Result<Vec<Vec<u8>>, CodecError> {
        let mut buf = BytesMut::new();
        let mut out = Vec::new();
        for &b in input {
            buf.put_u8(b);
            while let Some(msg) = codec.decode(&mut buf)? {
                out.push(msg.to_vec());
            }
        }
        Ok(out)
    }

    fn decode_all<C: Codec>(codec: &mut C, input: &[u8]) -> Result<(Vec<Vec<u8>>, usize), CodecError> {
        let mut buf = BytesMut::from(input);
        let mut out = Vec::new();
        while let Some(msg) = codec.decode(&mut buf)? {
            out.push(msg.to_vec());
        }
        Ok((out, buf.len()))
    }

    fn messages() -> Vec<Vec<u8>> {
        vec![b"a".to_vec(), Vec::new(), vec![7u8; 300], b"hello world".to_vec(), (0..=255u8).collect()]
    }

    #[test]
    fn length_prefixed_fragmented_and_batched() {
        let mut enc = LengthPrefixed::new(1024);
        let mut wire = BytesMut::new();
        for m in messages() {
            enc.encode(&m, &mut wire);
        }
        assert_eq!(decode_bytewise(&mut LengthPrefixed::new(1024), &wire).unwrap(), messages());
        let (all, rest) = decode_all(&mut LengthPrefixed::new(1024), &wire).unwrap();
        assert_eq!(all, messages());
        assert_eq!(rest, 0);
        // A truncated tail stays buffered.
        let (some, rest) = decode_all(&mut LengthPrefixed::new(1024), &wire[..wire.len() - 1]).unwrap();
        assert_eq!(some.len(), messages().len() - 1);
        assert_eq!(rest, 4 + 255);
    }

    #[test]
    fn length_prefixed_rejects_oversized_header_before_body() {
        let mut codec = LengthPrefixed::new(100);
        let mut buf = BytesMut::from(&[0u8, 0, 0, 101][..]);
        assert_eq!(codec.decode(&mut buf), Err(CodecError::FrameTooLong { len: 101, max: 100 }));
        let mut buf = BytesMut::from(&[0xff, 0xff, 0xff, 0xff, 1][..]);
        assert!(matches!(codec.decode(&mut buf), Err(CodecError::FrameTooLong { .. })));
        // Exactly max_len is fine.
        let mut wire = BytesMut::new();
        codec.encode(&[1; 100], &mut wire);
        assert_eq!(codec.decode(&mut wire).unwrap().unwrap().len(), 100);
    }

    #[test]
    fn stream_returns_everything_and_exact_splits() {
        let mut codec = Stream;
        let mut buf = BytesMut::new();
        assert_eq!(codec.decode(&mut buf).unwrap(), None);
        buf.extend_from_slice(b"abcdef");
        assert_eq!(codec.decode(&mut buf).unwrap().as_deref(), Some(&b"abcdef"[..]));
        assert!(buf.is_empty());
        buf.extend_from_slice(b"abcde");
        assert_eq!(codec.decode_exact(&mut buf, 6).unwrap(), None);
        assert_eq!(codec.decode_exact(&mut buf, 2).unwrap().as_deref(), Some(&b"ab"[..]));
        assert_eq!(codec.decode_exact(&mut buf, 3).unwrap().as_deref(), Some(&b"cde"[..]));
        let mut out = BytesMut::new();
        codec.encode(b"xy", &mut out);
        assert_eq!(&out[..], b"xy");
    }

    #[test]
    fn lines_fragmented_batched_crlf() {
        let wire = b"GET a\r\n\nline two\nlast";
        let expect = vec![b"GET a".to_vec(), Vec::new(), b"line two".to_vec()];
        assert_eq!(decode_bytewise(&mut Lines::new(64), wire).unwrap(), expect);
        let (all, rest) = decode_all(&mut Lines::new(64), wire).unwrap();
        assert_eq!(all, expect);
        assert_eq!(rest, 4, "incomplete 'last' stays buffered");
        let mut out = BytesMut::new();
        Lines::new(64).encode(b"hi", &mut out);
        assert_eq!(&out[..], b"hi\n");
    }

    #[test]
    fn lines_length_limit() {
        // Exactly max_len (with or without \r) is accepted.
        assert_eq!(decode_bytewise(&mut Lines::new(4), b"abcd\nabcd\r\n").unwrap(), vec![b"abcd".to_vec(); 2]);
        // One more byte without a terminator fails as soon as it is visible, even byte by byte.
        assert_eq!(decode_bytewise(&mut Lines::new(4), b"abcdef"), Err(CodecError::LineTooLong { max: 4 }));
        assert_eq!(decode_all(&mut Lines::new(4), b"abcde\n"), Err(CodecError::LineTooLong { max: 4 }));
        // The error does not depend on how the input was split.
        assert!(decode_all(&mut Lines::new(4), &[b'x'; 1000]).is_err());
    }
}
