//! Running one command: upper-casing and dispatching the name (or queuing it inside MULTI), the
//! string commands (strings, counters, expiry), and the error replies Redis gives for each way a
//! command can fail.

use std::fmt::Write as _;

use bytes::{BufMut, BytesMut};

use super::args::Args;
use super::store::{cost, Value};
use super::wire::{array, bulk, int, nil, num, parse_i64, put_sanitized, simple};
use super::Resp;
use stack::rr::Reply;
use stack::transport::ConnId;

pub(super) use super::fail::Fail;

pub(super) type CmdResult = Result<Reply, Fail>;

pub(super) fn arity(a: &Args<'_>, n: isize, name: &'static str) -> Result<(), Fail> {
    let ok = if n >= 0 { a.len() == n as usize } else { a.len() >= n.unsigned_abs() };
    if ok {
        Ok(())
    } else {
        Err(Fail::Arity(name))
    }
}

pub(super) fn int_arg(b: &[u8]) -> Result<i64, Fail> {
    parse_i64(b).ok_or(Fail::NotInt)
}

impl Resp {
    /// Whether the reply written to `out` since `start` is within `max_reply`; loops that
    /// write many values check after each (so it passes the limit by one value at most).
    pub(super) fn reply_fits(&self, out: &BytesMut, start: usize) -> Result<(), Fail> {
        if out.len() - start > self.limits.max_reply {
            Err(Fail::ReplyTooLarge(self.limits.max_reply))
        } else {
            Ok(())
        }
    }
}

impl Resp {
    pub(super) fn execute(&mut self, conn: ConnId, a: &Args<'_>, out: &mut BytesMut) -> Reply {
        if a.len() == 0 {
            // An empty inline line or `*0`: Redis answers nothing.
            return Reply::Done;
        }
        // Connections that never sent HELLO 3, CLIENT SETNAME or MULTI have no session.
        let (r3, queuing) = match self.sessions.get(&conn) {
            Some(s) => (s.resp3, s.multi.is_some()),
            None => (false, false),
        };
        self.r3 = r3;
        if queuing && !["EXEC", "DISCARD", "MULTI", "WATCH", "QUIT"].iter().any(|c| a.is(0, c)) {
            return self.queue(conn, a, out);
        }
        self.run(conn, a, out)
    }

    /// Runs one command now (not queued) and writes its reply or its error.
    pub(super) fn run(&mut self, conn: ConnId, a: &Args<'_>, out: &mut BytesMut) -> Reply {
        self.stats.commands += 1;
        let name = a.get(0);
        let mut up = [0u8; 16];
        let n = name.len();
        let start = out.len();
        let result = if n > up.len() {
            Err(Fail::Unknown)
        } else {
            up[..n].copy_from_slice(name);
            up[..n].make_ascii_uppercase();
            self.dispatch(conn, &up[..n], a, out)
        };
        match result {
            Ok(reply) => reply,
            Err(fail) => {
                self.stats.errors += 1;
                // Whatever the command wrote before failing is not part of its reply.
                out.truncate(start);
                match fail {
                    Fail::Unknown => unknown_command(a, out),
                    f => f.write(out),
                }
                Reply::Done
            }
        }
    }

    /// Runs the command `name` (upper-cased) and writes its reply; on `Err` nothing is written.
    fn dispatch(&mut self, conn: ConnId, name: &[u8], a: &Args<'_>, out: &mut BytesMut) -> Result<Reply, Fail> {
        let r3 = self.r3;
        match name {
            b"GET" => {
                arity(a, 2, "get")?;
                match self.get_str(a.get(1))? {
                    Some(v) => bulk(out, v),
                    None => nil(out, r3),
                }
            }
            b"SET" => return self.cmd_set(a, out),
            b"SETEX" | b"PSETEX" => {
                let (unit, cmd) = if name == b"SETEX" { (1000, "setex") } else { (1, "psetex") };
                arity(a, 4, cmd)?;
                let n = int_arg(a.get(2))?;
                let ms = n.checked_mul(unit).filter(|_| n > 0).ok_or(Fail::InvalidExpire(cmd))?;
                let deadline = self.now().checked_add(ms as u64).ok_or(Fail::InvalidExpire(cmd))?;
                let (k, v) = (a.get(1), a.get(3));
                self.alive(k);
                self.fits(k, v.len())?;
                self.store(k, v, Some(Some(deadline)));
                simple(out, "OK");
            }
            b"SETNX" => {
                arity(a, 3, "setnx")?;
                let (k, v) = (a.get(1), a.get(2));
                let exists = self.alive(k);
                if !exists {
                    self.fits(k, v.len())?;
                    self.store(k, v, Some(None));
                }
                int(out, i64::from(!exists));
            }
            b"PING" => match a.len() {
                1 => simple(out, "PONG"),
                2 => bulk(out, a.get(1)),
                _ => return Err(Fail::Arity("ping")),
            },
            b"INCR" | b"DECR" | b"INCRBY" | b"DECRBY" => {
                let by = match name {
                    b"INCR" => {
                        arity(a, 2, "incr")?;
                        1
                    }
                    b"DECR" => {
                        arity(a, 2, "decr")?;
                        -1
                    }
                    b"INCRBY" => {
                        arity(a, 3, "incrby")?;
                        int_arg(a.get(2))?
                    }
                    _ => {
                        arity(a, 3, "decrby")?;
                        int_arg(a.get(2))?.checked_neg().ok_or(Fail::Msg("decrement would overflow"))?
                    }
                };
                let key = a.get(1);
                let cur = match self.get_str(key)? {
                    Some(v) => parse_i64(v).ok_or(Fail::NotInt)?,
                    None => 0,
                };
                let v = cur.checked_add(by).ok_or(Fail::Overflow)?;
                let mut buf = [0u8; 20];
                let digits = num(v, &mut buf);
                self.fits(key, digits.len())?;
                self.store(key, digits, None);
                int(out, v);
            }
            b"MGET" => {
                arity(a, -2, "mget")?;
                let start = out.len();
                array(out, a.len() - 1);
                for i in 1..a.len() {
                    // A key holding another type reads as missing, as in Redis.
                    match self.get(a.get(i)) {
                        Some(super::store::Entry { value: Value::Str(v), .. }) => bulk(out, v),
                        _ => nil(out, r3),
                    }
                    self.reply_fits(out, start)?;
                }
            }
            b"MSET" => {
                if a.len() < 3 || a.len().is_multiple_of(2) {
                    return Err(Fail::Arity("mset"));
                }
                // All or nothing: check every pair before storing any.
                let (mut new_keys, mut delta) = (0usize, 0isize);
                for i in (1..a.len()).step_by(2) {
                    let (k, v) = (a.get(i), a.get(i + 1));
                    match self.map.get(k) {
                        Some(e) => delta += v.len() as isize - e.value.size() as isize,
                        None => {
                            new_keys += 1;
                            delta += cost(k, v.len()) as isize;
                        }
                    }
                }
                if self.map.len() + new_keys > self.limits.max_keys {
                    self.stats.rejected_writes += 1;
                    return Err(Fail::TooManyKeys);
                }
                if (self.used as isize + delta) as usize > self.limits.max_memory {
                    self.stats.rejected_writes += 1;
                    return Err(Fail::Oom);
                }
                for i in (1..a.len()).step_by(2) {
                    self.store(a.get(i), a.get(i + 1), Some(None));
                }
                simple(out, "OK");
            }
            b"DEL" | b"EXISTS" => {
                let del = name == b"DEL";
                arity(a, -2, if del { "del" } else { "exists" })?;
                let mut n = 0;
                for i in 1..a.len() {
                    let k = a.get(i);
                    if self.alive(k) && (!del || self.remove(k)) {
                        n += 1;
                    }
                }
                int(out, n);
            }
            b"ECHO" => {
                arity(a, 2, "echo")?;
                bulk(out, a.get(1));
            }
            b"GETSET" => {
                arity(a, 3, "getset")?;
                let (k, v) = (a.get(1), a.get(2));
                match self.get_str(k)? {
                    Some(old) => bulk(out, old),
                    None => nil(out, r3),
                }
                self.fits(k, v.len())?;
                self.store(k, v, Some(None));
            }
            b"APPEND" => {
                arity(a, 3, "append")?;
                let (k, v) = (a.get(1), a.get(2));
                let len = self.get_str(k)?.map_or(0, Vec::len) + v.len();
                self.fits(k, len)?;
                match self.map.get_mut(k).map(|e| &mut e.value) {
                    Some(Value::Str(old)) => {
                        old.extend_from_slice(v);
                        self.used += v.len();
                    }
                    _ => self.store(k, v, None),
                }
                int(out, len as i64);
            }
            b"STRLEN" => {
                arity(a, 2, "strlen")?;
                int(out, self.get_str(a.get(1))?.map_or(0, |v| v.len() as i64));
            }
            b"EXPIRE" => return self.cmd_expire(a, 1000, "expire", out),
            b"PEXPIRE" => return self.cmd_expire(a, 1, "pexpire", out),
            b"TTL" => {
                arity(a, 2, "ttl")?;
                let ms = self.pttl(a.get(1));
                int(out, if ms < 0 { ms } else { (ms + 500) / 1000 });
            }
            b"PTTL" => {
                arity(a, 2, "pttl")?;
                int(out, self.pttl(a.get(1)));
            }
            b"PERSIST" => {
                arity(a, 2, "persist")?;
                let k = a.get(1);
                let had = self.get(k).is_some_and(|e| e.expires.is_some());
                if had {
                    self.set_deadline(k, None);
                }
                int(out, i64::from(had));
            }
            b"DBSIZE" => {
                arity(a, 1, "dbsize")?;
                let now = self.now();
                self.sweep(now, usize::MAX);
                int(out, self.map.len() as i64);
            }
            b"FLUSHDB" | b"FLUSHALL" => {
                if a.len() > 2 || (a.len() == 2 && !a.is(1, "ASYNC") && !a.is(1, "SYNC")) {
                    return Err(Fail::Syntax);
                }
                self.flush();
                simple(out, "OK");
            }
            b"SELECT" => {
                arity(a, 2, "select")?;
                if int_arg(a.get(1))? != 0 {
                    return Err(Fail::Msg("DB index is out of range"));
                }
                simple(out, "OK");
            }
            b"TYPE" => {
                arity(a, 2, "type")?;
                simple(
                    out,
                    match self.get(a.get(1)) {
                        None => "none",
                        Some(e) => match e.value {
                            Value::Str(_) => "string",
                            Value::Hash(_) => "hash",
                        },
                    },
                );
            }
            b"QUIT" => {
                simple(out, "OK");
                return Ok(Reply::Close);
            }
            b"HSET" | b"HMSET" | b"HSETNX" | b"HGET" | b"HMGET" | b"HGETALL" | b"HDEL" | b"HINCRBY" | b"HLEN"
            | b"HEXISTS" | b"HKEYS" | b"HVALS" | b"HSTRLEN" => self.cmd_hash(name, a, out)?,
            b"MULTI" | b"EXEC" | b"DISCARD" | b"WATCH" | b"UNWATCH" => {
                return self.cmd_transaction(conn, name, a, out);
            }
            b"COMMAND" => self.cmd_command(a, out)?,
            b"CONFIG" => self.cmd_config(a, out)?,
            b"INFO" => self.cmd_info(a, out),
            b"HELLO" => self.cmd_hello(conn, a, out)?,
            b"AUTH" => self.cmd_auth(a, out)?,
            b"CLIENT" => self.cmd_client(conn, a, out)?,
            _ => return Err(Fail::Unknown),
        }
        Ok(Reply::Done)
    }

    fn cmd_set(&mut self, a: &Args<'_>, out: &mut BytesMut) -> CmdResult {
        arity(a, -3, "set")?;
        let (k, v) = (a.get(1), a.get(2));
        let (mut nx, mut xx, mut get, mut keep) = (false, false, false, false);
        let mut ttl_ms: Option<i64> = None;
        let mut i = 3;
        while i < a.len() {
            let has_next = i + 1 < a.len();
            if a.is(i, "NX") && !xx {
                nx = true;
            } else if a.is(i, "XX") && !nx {
                xx = true;
            } else if a.is(i, "GET") {
                get = true;
            } else if a.is(i, "KEEPTTL") && ttl_ms.is_none() {
                keep = true;
            } else if (a.is(i, "EX") || a.is(i, "PX")) && !keep && ttl_ms.is_none() && has_next {
                let unit = if a.is(i, "EX") { 1000 } else { 1 };
                let n = int_arg(a.get(i + 1))?;
                let ms = n.checked_mul(unit).filter(|_| n > 0).ok_or(Fail::InvalidExpire("set"))?;
                ttl_ms = Some(ms);
                i += 1;
            } else {
                return Err(Fail::Syntax);
            }
            i += 1;
        }
        let now = self.now();
        let deadline = match ttl_ms {
            Some(ms) => Some(Some(now.checked_add(ms as u64).ok_or(Fail::InvalidExpire("set"))?)),
            None if keep => None,
            None => Some(None),
        };
        let exists = self.alive(k);
        if get {
            match self.get_str(k)? {
                Some(old) => bulk(out, old),
                None => nil(out, self.r3),
            }
        }
        if (nx && exists) || (xx && !exists) {
            if !get {
                nil(out, self.r3);
            }
            return Ok(Reply::Done);
        }
        self.fits(k, v.len())?;
        self.store(k, v, deadline);
        if !get {
            simple(out, "OK");
        }
        Ok(Reply::Done)
    }

    fn cmd_expire(&mut self, a: &Args<'_>, unit: i64, name: &'static str, out: &mut BytesMut) -> CmdResult {
        arity(a, -3, name)?;
        let k = a.get(1);
        let n = int_arg(a.get(2))?;
        let (mut nx, mut xx, mut gt, mut lt) = (false, false, false, false);
        for i in 3..a.len() {
            let flag = if a.is(i, "NX") {
                &mut nx
            } else if a.is(i, "XX") {
                &mut xx
            } else if a.is(i, "GT") {
                &mut gt
            } else if a.is(i, "LT") {
                &mut lt
            } else {
                return Err(Fail::Msg("Unsupported option"));
            };
            *flag = true;
        }
        if (nx && (xx || gt || lt)) || (gt && lt) {
            return Err(Fail::Msg("NX and XX, GT or LT options at the same time are not compatible"));
        }
        let now = self.now() as i64;
        let deadline = n.checked_mul(unit).and_then(|ms| ms.checked_add(now)).ok_or(Fail::InvalidExpire(name))?;
        let Some(cur) = self.get(k).map(|e| e.expires) else {
            int(out, 0);
            return Ok(Reply::Done);
        };
        let ok = match cur {
            _ if nx => cur.is_none(),
            None => !xx && !gt,
            Some(t) => (!gt || deadline > t as i64) && (!lt || deadline < t as i64),
        };
        if ok {
            if deadline <= now {
                self.remove(k);
                self.stats.expired_keys += 1;
            } else {
                self.set_deadline(k, Some(deadline as u64));
            }
        }
        int(out, i64::from(ok));
        Ok(Reply::Done)
    }
}

pub(super) fn unknown_command(a: &Args<'_>, out: &mut BytesMut) {
    out.extend_from_slice(b"-ERR unknown command '");
    put_sanitized(out, a.get(0));
    out.extend_from_slice(b"', with args beginning with: ");
    for i in 1..a.len().min(9) {
        out.put_u8(b'\'');
        put_sanitized(out, a.get(i));
        out.extend_from_slice(b"' ");
    }
    out.extend_from_slice(b"\r\n");
}

/// Peer bytes made fit for an error line (see [`put_sanitized`]).
pub(super) fn sanitized(b: &[u8]) -> String {
    let mut out = BytesMut::new();
    put_sanitized(&mut out, b);
    String::from_utf8_lossy(&out).into_owned()
}

impl Fail {
    pub(super) fn write(self, out: &mut BytesMut) {
        let _ = match self {
            Fail::Arity(name) => write!(out, "-ERR wrong number of arguments for '{name}' command\r\n"),
            Fail::Syntax => write!(out, "-ERR syntax error\r\n"),
            Fail::NotInt => write!(out, "-ERR value is not an integer or out of range\r\n"),
            Fail::Overflow => write!(out, "-ERR increment or decrement would overflow\r\n"),
            Fail::InvalidExpire(name) => {
                write!(out, "-ERR invalid expire time in '{name}' command\r\n")
            }
            Fail::Oom => write!(out, "-OOM command not allowed when used memory > 'maxmemory'.\r\n"),
            Fail::TooManyKeys => {
                write!(out, "-OOM command not allowed: the store holds its maximum number of keys\r\n")
            }
            Fail::WrongType => write!(out, "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
            Fail::ReplyTooLarge(max) => write!(out, "-ERR reply too large: more than {max} bytes\r\n"),
            Fail::Unknown => write!(out, "-ERR unknown command\r\n"),
            Fail::Msg(m) => write!(out, "-ERR {m}\r\n"),
            Fail::Line(l) => write!(out, "-{l}\r\n"),
        };
    }
}

#[cfg(test)]
mod tests {
    use crate::resp::testutil::cmd;
    use crate::resp::Resp;

    #[test]
    fn strings_and_counters() {
        let h = &mut Resp::default();
        assert_eq!(cmd(h, &["GET", "a"]), "$-1\r\n");
        assert_eq!(cmd(h, &["set", "a", "10"]), "+OK\r\n");
        assert_eq!(cmd(h, &["INCR", "a"]), ":11\r\n");
        assert_eq!(cmd(h, &["INCRBY", "a", "-20"]), ":-9\r\n");
        assert_eq!(cmd(h, &["DECR", "a"]), ":-10\r\n");
        assert_eq!(cmd(h, &["DECRBY", "a", "5"]), ":-15\r\n");
        assert_eq!(cmd(h, &["INCR", "new"]), ":1\r\n");
        assert_eq!(cmd(h, &["DECRBY", "a", "-9223372036854775808"]), "-ERR decrement would overflow\r\n");
        assert_eq!(cmd(h, &["SET", "big", "9223372036854775807"]), "+OK\r\n");
        assert_eq!(cmd(h, &["INCR", "big"]), "-ERR increment or decrement would overflow\r\n");
        assert_eq!(cmd(h, &["INCRBY", "a", "x"]), "-ERR value is not an integer or out of range\r\n");
        assert_eq!(cmd(h, &["SET", "s", "abc"]), "+OK\r\n");
        assert_eq!(cmd(h, &["INCR", "s"]), "-ERR value is not an integer or out of range\r\n");
        assert_eq!(cmd(h, &["APPEND", "s", "de"]), ":5\r\n");
        assert_eq!(cmd(h, &["APPEND", "t", "xy"]), ":2\r\n");
        assert_eq!(cmd(h, &["STRLEN", "s"]), ":5\r\n");
        assert_eq!(cmd(h, &["STRLEN", "none"]), ":0\r\n");
        assert_eq!(cmd(h, &["GETSET", "s", "z"]), "$5\r\nabcde\r\n");
        assert_eq!(cmd(h, &["GETSET", "u", "z"]), "$-1\r\n");
        assert_eq!(cmd(h, &["MSET", "m1", "1", "m2", "2"]), "+OK\r\n");
        assert_eq!(cmd(h, &["MSET", "m1", "1", "m2"]), "-ERR wrong number of arguments for 'mset' command\r\n");
        assert_eq!(cmd(h, &["MGET", "m1", "nope", "m2"]), "*3\r\n$1\r\n1\r\n$-1\r\n$1\r\n2\r\n");
        assert_eq!(cmd(h, &["EXISTS", "m1", "m1", "nope"]), ":2\r\n");
        assert_eq!(cmd(h, &["DEL", "m1", "m2", "nope"]), ":2\r\n");
        assert_eq!(cmd(h, &["DBSIZE"]), ":6\r\n");
        assert_eq!(cmd(h, &["SET", "a", "1", "NX"]), "$-1\r\n");
        assert_eq!(cmd(h, &["SET", "x", "1", "XX"]), "$-1\r\n");
        assert_eq!(cmd(h, &["SET", "x", "1", "NX"]), "+OK\r\n");
        assert_eq!(cmd(h, &["SET", "x", "2", "XX", "GET"]), "$1\r\n1\r\n");
        assert_eq!(cmd(h, &["SET", "x", "2", "NX", "XX"]), "-ERR syntax error\r\n");
        assert_eq!(cmd(h, &["SET", "x", "2", "EX"]), "-ERR syntax error\r\n");
        assert_eq!(cmd(h, &["SET", "x", "2", "EX", "0"]), "-ERR invalid expire time in 'set' command\r\n");
        assert_eq!(cmd(h, &["SETNX", "x", "3"]), ":0\r\n");
        assert_eq!(cmd(h, &["SETNX", "y", "3"]), ":1\r\n");
        assert_eq!(cmd(h, &["SETEX", "y", "10", "4"]), "+OK\r\n");
        assert_eq!(cmd(h, &["TTL", "y"]), ":10\r\n");
        assert_eq!(cmd(h, &["PSETEX", "y", "0", "4"]), "-ERR invalid expire time in 'psetex' command\r\n");
        assert_eq!(cmd(h, &["PSETEX", "y", "1500", "5"]), "+OK\r\n");
        assert_eq!(cmd(h, &["PTTL", "y"]), ":1500\r\n");
        assert_eq!(cmd(h, &["GET", "y"]), "$1\r\n5\r\n");
        assert_eq!(cmd(h, &["FLUSHALL"]), "+OK\r\n");
        assert_eq!(cmd(h, &["DBSIZE"]), ":0\r\n");
        assert_eq!(h.used_memory(), 0);
    }
}
