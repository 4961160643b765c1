//! What a [`Client`](super::Client) sends and how it checks the answers: the [`Workload`] trait,
//! [`EchoWorkload`] (random payloads, byte-exact echo check) and [`FnWorkload`] (two closures).

use bytes::BytesMut;

/// What a [`Client`](super::Client) sends and how it checks the replies.
pub trait Workload {
    /// Writes the next request payload (unframed) for connection `conn` into `out`, which is
    /// empty on entry. `seq` counts requests per connection from 0.
    fn next_request(&mut self, conn: usize, seq: u64, out: &mut BytesMut);

    /// Verifies the response to `req`. A `false` is counted in [`ClientReport::errors`](super::ClientReport::errors).
    fn check(&mut self, conn: usize, req: &[u8], resp: &[u8]) -> bool;

    /// The response length, when the protocol does not frame it (echo over
    /// [`stack::codec::Stream`]). `None` lets the codec find the boundary.
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
