//! A bucket's timer entry as one integer: the deadline, then the bucket.
//!
//! The timer heap compares entries on every sift, and a response moves its
//! bucket's entry once (see `Engine::poll_at`). A `(Instant, u32)` tuple
//! compares field by field, with a branch between; one `u128` in the same
//! order compares without one.

use smoltcp::time::Instant;

/// `(deadline, bucket)` ordered as the tuple is: by deadline, then bucket.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Due(u128);

impl Due {
    pub(super) fn new(at: Instant, bucket: u32) -> Due {
        // Flipping the sign bit maps i64's order onto u64's.
        let t = (at.total_micros() as u64) ^ (1 << 63);
        Due(((t as u128) << 32) | bucket as u128)
    }

    pub(super) fn at(self) -> Instant {
        Instant::from_micros((((self.0 >> 32) as u64) ^ (1 << 63)) as i64)
    }

    pub(super) fn bucket(self) -> u32 {
        self.0 as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_order_and_values_as_the_tuple() {
        let times = [i64::MIN, -5_000_000, -1, 0, 1, 999, 1_000_000, 1 << 44, i64::MAX];
        let buckets = [0u32, 1, 7, u32::MAX];
        let mut all = Vec::new();
        for &t in &times {
            for &b in &buckets {
                all.push((Instant::from_micros(t), b));
            }
        }
        for &(t, b) in &all {
            let d = Due::new(t, b);
            assert_eq!((d.at(), d.bucket()), (t, b));
            for &(u, c) in &all {
                assert_eq!(d.cmp(&Due::new(u, c)), (t, b).cmp(&(u, c)), "{t:?},{b} vs {u:?},{c}");
            }
        }
    }
}
