//! Hash commands: HSET/HMSET/HSETNX, HGET, HMGET, HGETALL, HKEYS, HVALS, HDEL, HINCRBY, HLEN,
//! HEXISTS, HSTRLEN. A hash counts against `max_keys` as one key and against `max_memory` with
//! every field (field, value and [`super::FIELD_OVERHEAD`]); a write that would pass a limit
//! changes nothing and answers `-OOM`. A hash whose last field is deleted is deleted.

use bytes::BytesMut;

use super::args::Args;
use super::commands::{arity, int_arg, Fail};
use super::store::field_cost;
use super::wire::{array, bulk, int, map, nil, num, parse_i64, simple};
use super::Resp;

impl Resp {
    pub(super) fn cmd_hash(&mut self, name: &[u8], a: &Args<'_>, out: &mut BytesMut) -> Result<(), Fail> {
        let r3 = self.r3;
        match name {
            b"HSET" | b"HMSET" => {
                let hmset = name == b"HMSET";
                if a.len() < 4 || !a.len().is_multiple_of(2) {
                    return Err(Fail::Arity(if hmset { "hmset" } else { "hset" }));
                }
                let added =
                    self.hash_write(a.get(1), (a.len() - 2) / 2, |i| (a.get(2 + 2 * i), a.get(3 + 2 * i)), false)?;
                if hmset {
                    simple(out, "OK");
                } else {
                    int(out, added as i64);
                }
            }
            b"HSETNX" => {
                arity(a, 4, "hsetnx")?;
                let added = self.hash_write(a.get(1), 1, |_| (a.get(2), a.get(3)), true)?;
                int(out, added as i64);
            }
            b"HGET" => {
                arity(a, 3, "hget")?;
                match self.get_hash(a.get(1))?.and_then(|h| h.fields.get(a.get(2))) {
                    Some(v) => bulk(out, v),
                    None => nil(out, r3),
                }
            }
            b"HMGET" => {
                arity(a, -3, "hmget")?;
                let max = self.limits.max_reply;
                let h = self.get_hash(a.get(1))?;
                let start = out.len();
                array(out, a.len() - 2);
                for i in 2..a.len() {
                    match h.and_then(|h| h.fields.get(a.get(i))) {
                        Some(v) => bulk(out, v),
                        None => nil(out, r3),
                    }
                    if out.len() - start > max {
                        return Err(Fail::ReplyTooLarge(max));
                    }
                }
            }
            b"HGETALL" | b"HKEYS" | b"HVALS" => {
                let (keys, vals) = match name {
                    b"HGETALL" => (true, true),
                    b"HKEYS" => (true, false),
                    _ => (false, true),
                };
                arity(
                    a,
                    2,
                    if !vals {
                        "hkeys"
                    } else if !keys {
                        "hvals"
                    } else {
                        "hgetall"
                    },
                )?;
                let max = self.limits.max_reply;
                let h = self.get_hash(a.get(1))?;
                let n = h.map_or(0, |h| h.fields.len());
                let start = out.len();
                if keys && vals {
                    map(out, n, r3);
                } else {
                    array(out, n);
                }
                for (f, v) in h.into_iter().flat_map(|h| h.fields.iter()) {
                    if keys {
                        bulk(out, f);
                    }
                    if vals {
                        bulk(out, v);
                    }
                    if out.len() - start > max {
                        return Err(Fail::ReplyTooLarge(max));
                    }
                }
            }
            b"HDEL" => {
                arity(a, -3, "hdel")?;
                let key = a.get(1);
                if self.get_hash(key)?.is_none() {
                    int(out, 0);
                    return Ok(());
                }
                let (mut n, mut freed) = (0, 0);
                let mut empty = false;
                if let Some(h) = self.hash_mut(key) {
                    for i in 2..a.len() {
                        if let Some((f, v)) = h.fields.remove_entry(a.get(i)) {
                            n += 1;
                            freed += field_cost(&f, v.len());
                        }
                    }
                    h.bytes -= freed;
                    empty = h.fields.is_empty();
                }
                self.used -= freed;
                if empty {
                    self.remove(key);
                }
                int(out, n);
            }
            b"HINCRBY" => {
                arity(a, 4, "hincrby")?;
                let (key, field) = (a.get(1), a.get(2));
                let by = int_arg(a.get(3))?;
                let cur = match self.get_hash(key)?.and_then(|h| h.fields.get(field)) {
                    Some(v) => parse_i64(v).ok_or(Fail::Msg("hash value is not an integer"))?,
                    None => 0,
                };
                let v = cur.checked_add(by).ok_or(Fail::Overflow)?;
                let mut buf = [0u8; 20];
                let digits = num(v, &mut buf);
                self.hash_write(key, 1, |_| (field, digits), false)?;
                int(out, v);
            }
            b"HLEN" => {
                arity(a, 2, "hlen")?;
                int(out, self.get_hash(a.get(1))?.map_or(0, |h| h.fields.len() as i64));
            }
            b"HEXISTS" => {
                arity(a, 3, "hexists")?;
                let has = self.get_hash(a.get(1))?.is_some_and(|h| h.fields.contains_key(a.get(2)));
                int(out, i64::from(has));
            }
            _ => {
                arity(a, 3, "hstrlen")?;
                int(out, self.get_hash(a.get(1))?.and_then(|h| h.fields.get(a.get(2))).map_or(0, |v| v.len() as i64));
            }
        }
        Ok(())
    }

    /// Sets `n` fields (`pair(i)`) of the hash at `key` (created if missing), all or nothing:
    /// the limits are checked for the whole write first, by an estimate that never falls
    /// below what the write stores (a field given twice counts twice, a shrinking value as
    /// zero), so it needs no allocation and time linear in `n`. `nx`: fields that exist keep
    /// their value. Returns the number of fields added.
    fn hash_write<'a>(
        &mut self,
        key: &[u8],
        n: usize,
        pair: impl Fn(usize) -> (&'a [u8], &'a [u8]),
        nx: bool,
    ) -> Result<usize, Fail> {
        let h = self.get_hash(key)?;
        let old_bytes = h.map_or(0, |h| h.bytes);
        let mut grow = 0usize;
        for i in 0..n {
            let (f, v) = pair(i);
            grow += match h.and_then(|h| h.fields.get(f)) {
                Some(_) if nx => 0,
                Some(old) => v.len().saturating_sub(old.len()),
                None => field_cost(f, v.len()),
            };
        }
        if nx && grow == 0 {
            return Ok(0);
        }
        self.fits(key, old_bytes + grow)?;
        let mut added = 0;
        let mut bytes = old_bytes;
        if let Some(h) = self.hash_mut(key) {
            for i in 0..n {
                let (f, v) = pair(i);
                match h.fields.get_mut(f) {
                    Some(_) if nx => {}
                    // Same capacity for a same-sized value: overwrites allocate nothing.
                    Some(old) => {
                        bytes = bytes + v.len() - old.len();
                        old.clear();
                        old.extend_from_slice(v);
                    }
                    None => {
                        bytes += field_cost(f, v.len());
                        h.fields.insert(f.into(), v.to_vec());
                        added += 1;
                    }
                }
            }
            h.bytes = bytes;
        }
        // `hash_mut` counted a new key's own cost; the fields are counted here.
        self.used = self.used + bytes - old_bytes;
        Ok(added)
    }
}

#[cfg(test)]
mod tests {
    use crate::resp::testutil::cmd;
    use crate::resp::{Resp, RespLimits, ENTRY_OVERHEAD, FIELD_OVERHEAD};

    const WRONGTYPE: &str = "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";

    #[test]
    fn hash_commands_reply_as_redis() {
        let h = &mut Resp::default();
        assert_eq!(cmd(h, &["HSET", "h", "a", "1", "b", "2"]), ":2\r\n");
        assert_eq!(cmd(h, &["HSET", "h", "a", "10", "c", "3"]), ":1\r\n");
        assert_eq!(cmd(h, &["HSET", "h", "f"]), "-ERR wrong number of arguments for 'hset' command\r\n");
        assert_eq!(cmd(h, &["HSET", "h", "f", "v", "g"]), "-ERR wrong number of arguments for 'hset' command\r\n");
        assert_eq!(cmd(h, &["HGET", "h", "a"]), "$2\r\n10\r\n");
        assert_eq!(cmd(h, &["HGET", "h", "zz"]), "$-1\r\n");
        assert_eq!(cmd(h, &["HGET", "nokey", "a"]), "$-1\r\n");
        assert_eq!(cmd(h, &["HMGET", "h", "b", "zz", "c"]), "*3\r\n$1\r\n2\r\n$-1\r\n$1\r\n3\r\n");
        assert_eq!(cmd(h, &["HLEN", "h"]), ":3\r\n");
        assert_eq!(cmd(h, &["HLEN", "nokey"]), ":0\r\n");
        assert_eq!(cmd(h, &["HEXISTS", "h", "b"]), ":1\r\n");
        assert_eq!(cmd(h, &["HEXISTS", "h", "zz"]), ":0\r\n");
        assert_eq!(cmd(h, &["HSTRLEN", "h", "a"]), ":2\r\n");
        assert_eq!(cmd(h, &["HINCRBY", "h", "a", "-15"]), ":-5\r\n");
        assert_eq!(cmd(h, &["HINCRBY", "h", "n", "9223372036854775807"]), ":9223372036854775807\r\n");
        assert_eq!(cmd(h, &["HINCRBY", "h", "n", "1"]), "-ERR increment or decrement would overflow\r\n");
        assert_eq!(cmd(h, &["HINCRBY", "h", "n", "x"]), "-ERR value is not an integer or out of range\r\n");
        assert_eq!(cmd(h, &["HSET", "h", "s", "abc"]), ":1\r\n");
        assert_eq!(cmd(h, &["HINCRBY", "h", "s", "1"]), "-ERR hash value is not an integer\r\n");
        assert_eq!(cmd(h, &["HSETNX", "h", "s", "new"]), ":0\r\n");
        assert_eq!(cmd(h, &["HSETNX", "h", "t", "new"]), ":1\r\n");
        assert_eq!(cmd(h, &["HMSET", "h2", "x", "1"]), "+OK\r\n");
        assert_eq!(cmd(h, &["HKEYS", "h2"]), "*1\r\n$1\r\nx\r\n");
        assert_eq!(cmd(h, &["HVALS", "h2"]), "*1\r\n$1\r\n1\r\n");
        assert_eq!(cmd(h, &["HGETALL", "h2"]), "*2\r\n$1\r\nx\r\n$1\r\n1\r\n");
        assert_eq!(cmd(h, &["HGETALL", "nokey"]), "*0\r\n");
        assert_eq!(cmd(h, &["TYPE", "h"]), "+hash\r\n");
        // A field given twice is stored once, with its last value.
        assert_eq!(cmd(h, &["HSET", "d", "f", "1", "f", "2"]), ":1\r\n");
        assert_eq!(cmd(h, &["HGETALL", "d"]), "*2\r\n$1\r\nf\r\n$1\r\n2\r\n");
        // Deleting the last field deletes the key.
        assert_eq!(cmd(h, &["HDEL", "h2", "x", "x", "zz"]), ":1\r\n");
        assert_eq!(cmd(h, &["EXISTS", "h2"]), ":0\r\n");
        assert_eq!(cmd(h, &["HDEL", "nokey", "x"]), ":0\r\n");
        // Types: string commands on a hash and hash commands on a string, as Redis answers.
        assert_eq!(cmd(h, &["SET", "str", "x"]), "+OK\r\n");
        for c in [&["HGET", "str", "f"][..], &["HSET", "str", "f", "v"], &["HGETALL", "str"], &["HDEL", "str", "f"]] {
            assert_eq!(cmd(h, c), WRONGTYPE, "{c:?}");
        }
        for c in [&["GET", "h"][..], &["INCR", "h"], &["APPEND", "h", "x"], &["STRLEN", "h"], &["GETSET", "h", "v"]] {
            assert_eq!(cmd(h, c), WRONGTYPE, "{c:?}");
        }
        assert_eq!(cmd(h, &["SET", "h", "v", "GET"]), WRONGTYPE);
        assert_eq!(cmd(h, &["MGET", "h", "str"]), "*2\r\n$-1\r\n$1\r\nx\r\n");
        assert_eq!(cmd(h, &["EXPIRE", "h", "100"]), ":1\r\n");
        assert_eq!(cmd(h, &["TTL", "h"]), ":100\r\n");
        // SET replaces a hash.
        assert_eq!(cmd(h, &["SET", "h", "plain"]), "+OK\r\n");
        assert_eq!(cmd(h, &["TYPE", "h"]), "+string\r\n");
        assert_eq!(cmd(h, &["TTL", "h"]), ":-1\r\n");
        assert_eq!(cmd(h, &["FLUSHALL"]), "+OK\r\n");
        assert_eq!(h.used_memory(), 0);
    }

    #[test]
    fn hashes_count_against_the_memory_limits() {
        let limits = RespLimits {
            max_keys: 2,
            max_memory: ENTRY_OVERHEAD + 1 + 3 * (FIELD_OVERHEAD + 2) + 30,
            ..RespLimits::default()
        };
        let h = &mut Resp::new(limits);
        assert_eq!(cmd(h, &["HSET", "h", "a", "1", "b", "2"]), ":2\r\n");
        let used = h.used_memory();
        assert_eq!(used, ENTRY_OVERHEAD + 1 + 2 * (FIELD_OVERHEAD + 2));
        // All or nothing: two more fields do not fit, so neither is stored.
        assert!(cmd(h, &["HSET", "h", "c", "3", "d", "4"]).starts_with("-OOM"));
        assert_eq!(cmd(h, &["HLEN", "h"]), ":2\r\n");
        assert_eq!(h.used_memory(), used);
        assert_eq!(cmd(h, &["HSET", "h", "a", "0123456789"]), ":0\r\n");
        assert!(cmd(h, &["HINCRBY", "h2", "n", "1"]).starts_with("-OOM"));
        assert_eq!(cmd(h, &["SET", "s", "x"]), "+OK\r\n");
        assert!(cmd(h, &["HSET", "h3", "a", "1"]).starts_with("-OOM command not allowed: the store holds"));
        assert_eq!(cmd(h, &["HDEL", "h", "a", "b"]), ":2\r\n");
        assert_eq!(cmd(h, &["DEL", "s"]), ":1\r\n");
        assert_eq!(h.used_memory(), 0, "every byte counted is given back");
        assert_eq!(h.stats().rejected_writes, 3);
    }

    #[test]
    fn a_huge_hset_is_linear() {
        // 200,000 pairs, all the same field: checked and stored without quadratic work.
        let h = &mut Resp::default();
        let mut args = vec!["HSET", "h"];
        for _ in 0..200_000 {
            args.extend(["f", "v"]);
        }
        let t = std::time::Instant::now();
        assert_eq!(cmd(h, &args), ":1\r\n");
        assert!(t.elapsed() < std::time::Duration::from_secs(5), "{:?}", t.elapsed());
        assert_eq!(h.used_memory(), ENTRY_OVERHEAD + 1 + FIELD_OVERHEAD + 2);
    }
}
