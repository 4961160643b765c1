//! [`RespWorkload`]: the load `rr-bench --service resp` sends.

use bytes::BytesMut;

use super::wire::{array, bulk, num, put_line};

/// A [`rr_load::Workload`] for `rr-bench --service resp`: each connection alternates
/// `SET key:N value` and `GET key:N` over `keys` keys, with one fixed value, and checks every
/// reply byte for byte (`+OK`, then the bulk value). Use it with [`stack::codec::Stream`] on the
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

impl rr_load::Workload for RespWorkload {
    fn next_request(&mut self, conn: usize, seq: u64, out: &mut BytesMut) {
        let key = (conn as u64).wrapping_mul(7919).wrapping_add(seq / 2) % self.keys;
        let mut buf = [0u8; 20];
        let digits = num(key as i64, &mut buf);
        let set = seq.is_multiple_of(2);
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
    use stack::codec::Codec;
    use crate::resp::{Resp, RespCodec};
    use rr_load::Workload;
    use stack::rr::Handler;
    use stack::transport::ConnId;

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
            h.handle(ConnId(1), &mut (), &frame, &mut resp);
            assert_eq!(w.response_len(&req), Some(resp.len()));
            assert!(w.check(3, &req, &resp), "{:?}", String::from_utf8_lossy(&resp));
        }
        assert_eq!(h.len(), 4);
    }
}
