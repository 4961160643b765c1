//! [`ConnMap`]: the server's connection table, a `HashMap` keyed by [`ConnId`] with a
//! multiplicative hash instead of SipHash.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use crate::transport::ConnId;

/// ConnIds are already well-distributed small integers, so a multiplicative hash beats SipHash
/// for the per-event lookup. The ids come from our own transport, so HashDoS is not a concern.
#[derive(Default)]
pub(super) struct IdHasher(u64);

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

pub(super) type ConnMap<V> = HashMap<ConnId, V, BuildHasherDefault<IdHasher>>;
