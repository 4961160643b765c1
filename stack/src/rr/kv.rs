//! A small key-value service with its own binary framing, for benchmarks that need a handler
//! doing real (if small) work: [`Kv`] is the [`Handler`], [`KvRequest`] and [`KvResponse`] the
//! messages inside one codec frame.

use std::collections::HashMap;

use bytes::{BufMut, Bytes, BytesMut};

use super::handler::{Handler, Reply};
use crate::transport::ConnId;

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

/// Bytes a stored key costs besides its key and value (map entry, `Bytes` headers).
const KV_ENTRY_OVERHEAD: usize = 64;

/// A small in-memory key-value service speaking [`KvRequest`] / [`KvResponse`]. Malformed
/// requests get [`KvStatus::BadRequest`] instead of closing the connection: they are
/// well-framed, so the stream is still in sync.
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
    type Conn = ();

    fn handle(&mut self, _conn: ConnId, _state: &mut (), req: &[u8], resp: &mut BytesMut) -> Reply {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn kv(h: &mut Kv, req: KvRequest<'_>) -> (KvStatus, Vec<u8>) {
        let mut msg = BytesMut::new();
        req.encode(&mut msg).unwrap();
        let mut resp = BytesMut::new();
        h.handle(ConnId(0), &mut (), &msg, &mut resp);
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
        h.handle(ConnId(0), &mut (), b"\x00garbage", &mut resp);
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
}
