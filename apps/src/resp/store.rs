//! The key space of [`Resp`]: lookups that delete expired keys on the way (lazy expiry), the
//! storage limits, and the deadline heap that the periodic sweep walks so keys nobody reads
//! again still free their memory.

use std::cmp::Reverse;
use std::collections::HashMap;
use std::sync::Arc;

use super::fail::Fail;
use super::{Resp, ENTRY_OVERHEAD, FIELD_OVERHEAD};

/// One stored key.
pub(super) struct Entry {
    /// Shared with the expiry heap, so pushing a deadline does not copy the key.
    pub(super) key: Arc<[u8]>,
    pub(super) value: Value,
    /// Deadline in ms on [`Resp`]'s clock.
    pub(super) expires: Option<u64>,
}

/// What a key holds.
pub(super) enum Value {
    Str(Vec<u8>),
    /// Boxed: most keys are strings, and the entry stays as small as a string's.
    Hash(Box<Hash>),
}

/// A hash's fields, and the bytes they count against `max_memory`.
#[derive(Default)]
pub(super) struct Hash {
    pub(super) fields: HashMap<Box<[u8]>, Vec<u8>>,
    /// Sum of [`field_cost`] over the fields.
    pub(super) bytes: usize,
}

impl Value {
    /// Bytes of the value as counted against `max_memory` (without the key's own cost).
    pub(super) fn size(&self) -> usize {
        match self {
            Value::Str(v) => v.len(),
            Value::Hash(h) => h.bytes,
        }
    }
}

/// Bytes one hash field counts against `max_memory`.
pub(super) fn field_cost(field: &[u8], value_len: usize) -> usize {
    field.len() + value_len + FIELD_OVERHEAD
}

impl Resp {
    /// Deletes `key` if its deadline passed. Returns whether it (still) exists.
    pub(super) fn alive(&mut self, key: &[u8]) -> bool {
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

    pub(super) fn get(&mut self, key: &[u8]) -> Option<&Entry> {
        if self.alive(key) {
            self.map.get(key)
        } else {
            None
        }
    }

    /// The string at `key`: `Ok(None)` if there is none, WRONGTYPE if it holds a hash.
    pub(super) fn get_str(&mut self, key: &[u8]) -> Result<Option<&Vec<u8>>, Fail> {
        match self.get(key) {
            None => Ok(None),
            Some(Entry { value: Value::Str(v), .. }) => Ok(Some(v)),
            Some(_) => Err(Fail::WrongType),
        }
    }

    /// The hash at `key`: `Ok(None)` if there is none, WRONGTYPE if it holds a string.
    pub(super) fn get_hash(&mut self, key: &[u8]) -> Result<Option<&Hash>, Fail> {
        match self.get(key) {
            None => Ok(None),
            Some(Entry { value: Value::Hash(h), .. }) => Ok(Some(h)),
            Some(_) => Err(Fail::WrongType),
        }
    }

    pub(super) fn remove(&mut self, key: &[u8]) -> bool {
        match self.map.remove(key) {
            Some(e) => {
                self.used -= cost(&e.key, e.value.size());
                if e.expires.is_some() {
                    self.with_ttl -= 1;
                }
                true
            }
            None => false,
        }
    }

    /// Checks that `key` holding a value of `new_len` bytes (as [`Value::size`] counts them)
    /// fits the limits.
    pub(super) fn fits(&mut self, key: &[u8], new_len: usize) -> Result<(), Fail> {
        let (old, new_key) = match self.map.get(key) {
            Some(e) => (cost(key, e.value.size()), false),
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

    /// Stores the string `value` under `key`, replacing whatever it held (limits already
    /// checked). `ttl`: `None` keeps the current deadline, `Some(d)` sets it (`Some(None)`
    /// clears it).
    pub(super) fn store(&mut self, key: &[u8], value: &[u8], ttl: Option<Option<u64>>) {
        let entry = match self.map.get_mut(key) {
            Some(e) => {
                self.used = self.used - e.value.size() + value.len();
                match &mut e.value {
                    // Same capacity for a same-sized value: overwrites allocate nothing.
                    Value::Str(v) => {
                        v.clear();
                        v.extend_from_slice(value);
                    }
                    other => *other = Value::Str(value.to_vec()),
                }
                e
            }
            None => {
                let key: Arc<[u8]> = Arc::from(key);
                self.used += cost(&key, value.len());
                self.map.entry(key.clone()).or_insert(Entry { key, value: Value::Str(value.to_vec()), expires: None })
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

    /// The hash at `key`, created empty if the key does not exist (limits already checked,
    /// type too). The caller adds what it stores to both `bytes` and [`Resp::used`].
    pub(super) fn hash_mut(&mut self, key: &[u8]) -> Option<&mut Hash> {
        if !self.map.contains_key(key) {
            let key: Arc<[u8]> = Arc::from(key);
            self.used += cost(&key, 0);
            let value = Value::Hash(Box::default());
            self.map.insert(key.clone(), Entry { key, value, expires: None });
        }
        match self.map.get_mut(key).map(|e| &mut e.value) {
            Some(Value::Hash(h)) => Some(h),
            _ => None,
        }
    }

    pub(super) fn set_deadline(&mut self, key: &[u8], deadline: Option<u64>) {
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

    pub(super) fn push_deadline(&mut self, t: u64, key: Arc<[u8]>) {
        self.heap.push(Reverse((t, key)));
        // Stale entries (key deleted or deadline changed) would pile up under churn: rebuild
        // from the live deadlines once they outnumber them. Amortised O(1) per push.
        if self.heap.len() > 2 * self.with_ttl + 1024 {
            let live = self.map.values().filter_map(|e| e.expires.map(|t| Reverse((t, e.key.clone()))));
            self.heap = live.collect();
        }
    }

    /// Deletes up to `max` keys whose deadline is at or before `now`.
    pub(super) fn sweep(&mut self, now: u64, max: usize) {
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

    pub(super) fn flush(&mut self) {
        self.map.clear();
        self.heap.clear();
        self.with_ttl = 0;
        self.used = 0;
    }

    /// Remaining time of `key` in ms: -2 no key, -1 no deadline.
    pub(super) fn pttl(&mut self, key: &[u8]) -> i64 {
        let now = self.now();
        match self.get(key) {
            None => -2,
            Some(Entry { expires: None, .. }) => -1,
            Some(Entry { expires: Some(t), .. }) => t.saturating_sub(now) as i64,
        }
    }
}

/// Bytes `key` with a value of `value_len` bytes counts against `max_memory`.
pub(super) fn cost(key: &[u8], value_len: usize) -> usize {
    key.len() + value_len + ENTRY_OVERHEAD
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resp::testutil::{cmd, mb, serve};
    use crate::resp::RespLimits;
    use stack::rr::{Completions, Handler};

    #[test]
    pub(super) fn expiry_lazy_and_swept() {
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
    pub(super) fn storage_limits_give_oom_errors() {
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
    pub(super) fn no_allocation_shape_for_overwrites() {
        // Overwriting a key with a same-sized value reuses its buffer.
        let h = &mut Resp::default();
        cmd(h, &["SET", "k", "aaaa"]);
        let ptr = |h: &Resp| match &h.map.get(&b"k"[..]).unwrap().value {
            Value::Str(v) => v.as_ptr(),
            Value::Hash(_) => panic!("a string"),
        };
        let before = ptr(h);
        cmd(h, &["SET", "k", "bbbb"]);
        assert_eq!(ptr(h), before);
    }
}
