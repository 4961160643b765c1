//! Helpers for the unit tests of the RESP service: drive requests through codec and handler as
//! the server would.

use bytes::BytesMut;

use super::wire::{array, bulk};
use super::{Resp, RespCodec, RespLimits};
use stack::codec::Codec;
use stack::rr::{Handler, Reply};
use stack::transport::ConnId;

/// Feeds `wire` through codec and handler (in chunks of `chunk` bytes) and returns every
/// reply, concatenated, plus whether the connection would be closed.
pub(super) fn serve(h: &mut Resp, limits: RespLimits, wire: &[u8], chunk: usize) -> (String, bool) {
    let mut codec = RespCodec::new(limits);
    let (mut buf, mut out, mut resp) = (BytesMut::new(), BytesMut::new(), BytesMut::new());
    for piece in wire.chunks(chunk.max(1)) {
        buf.extend_from_slice(piece);
        loop {
            match codec.decode(&mut buf) {
                Ok(Some(req)) => {
                    resp.clear();
                    let reply = h.handle(ConnId(1), &mut (), &req, &mut resp);
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

pub(super) fn mb(args: &[&str]) -> Vec<u8> {
    let mut out = BytesMut::new();
    array(&mut out, args.len());
    for a in args {
        bulk(&mut out, a.as_bytes());
    }
    out.to_vec()
}

/// One command through the wire format, every chunking the same.
pub(super) fn cmd(h: &mut Resp, args: &[&str]) -> String {
    let wire = mb(args);
    let (reply, _) = serve(h, RespLimits::default(), &wire, wire.len());
    reply
}

pub(super) fn next(s: &mut u64) -> u64 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    *s
}

/// One command on connection `conn` (no framing): the reply as text.
pub(super) fn on(h: &mut Resp, conn: u32, args: &[&str]) -> String {
    let mut out = BytesMut::new();
    let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    h.command(ConnId(conn), &args, &mut out);
    String::from_utf8_lossy(&out).into_owned()
}
