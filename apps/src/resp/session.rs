//! Per-connection state and the commands that change it: HELLO (protocol 2 or 3), AUTH, CLIENT,
//! and transactions (MULTI, EXEC, DISCARD; WATCH is refused). A connection that never sends
//! any of them has no [`Session`] at all and speaks RESP2.

use std::fmt::Write as _;

use bytes::BytesMut;

use super::args::Args;
use super::commands::{arity, sanitized, unknown_command, Fail};
use super::introspection::lookup;
use super::wire::{array, bulk, int, map, nil, parse_i64, simple};
use super::{Resp, REDIS_VERSION};
use stack::rr::Reply;
use stack::transport::ConnId;

/// Longest client name kept (CLIENT SETNAME, HELLO SETNAME). Redis has no limit; here a name
/// is per-connection memory, so it is bounded like everything else a peer can make us keep.
pub const MAX_CLIENT_NAME: usize = 1024;

/// What the server remembers about one connection.
#[derive(Default)]
pub(super) struct Session {
    /// HELLO 3 was accepted: replies use RESP3 types.
    pub(super) resp3: bool,
    name: Option<Box<[u8]>>,
    /// Inside MULTI: the commands queued so far.
    pub(super) multi: Option<Queue>,
}

/// Commands queued between MULTI and EXEC, as argument ranges into one buffer.
#[derive(Default)]
pub(super) struct Queue {
    data: Vec<u8>,
    ranges: Vec<(usize, usize)>,
    /// Arguments of each queued command.
    argc: Vec<usize>,
    /// A command was refused while queuing: EXEC answers EXECABORT.
    dirty: bool,
}

impl Queue {
    /// Bytes this queue holds, as counted against [`super::RespLimits::max_queued_bytes`].
    fn bytes(&self) -> usize {
        self.data.len() + self.ranges.len() * 16 + self.argc.len() * 8
    }
}

/// Redis' rule for client names and library names: printable ASCII without spaces.
fn valid_name(b: &[u8]) -> bool {
    b.iter().all(|c| (b'!'..=b'~').contains(c))
}

impl Resp {
    fn session(&mut self, conn: ConnId) -> &mut Session {
        self.sessions.entry(conn).or_default()
    }

    /// Queues a command inside MULTI, checking what Redis checks at queue time: the command
    /// exists and has a valid number of arguments. A refused command marks the transaction
    /// failed (EXEC answers EXECABORT), as Redis does.
    /// Like Redis, a queued command counts as executed when EXEC runs it, not here.
    pub(super) fn queue(&mut self, conn: ConnId, a: &Args<'_>, out: &mut BytesMut) -> Reply {
        let (max_n, max_bytes) = (self.limits.max_queued, self.limits.max_queued_bytes);
        let check = match lookup(a.get(0)) {
            None => Err(None),
            Some(c) => arity(a, c.1 as isize, c.0).map_err(Some),
        };
        let Some(q) = self.session(conn).multi.as_mut() else {
            return Reply::Done;
        };
        let size: usize = (0..a.len()).map(|i| a.get(i).len() + 16).sum::<usize>() + 8;
        let check = check.and_then(|()| {
            if q.argc.len() >= max_n || q.bytes() + size > max_bytes {
                Err(Some(Fail::Line(format!(
                    "ERR transaction too large: at most {max_n} commands and {max_bytes} bytes can be queued"
                ))))
            } else {
                Ok(())
            }
        });
        match check {
            Ok(()) => {
                for i in 0..a.len() {
                    let start = q.data.len();
                    q.data.extend_from_slice(a.get(i));
                    q.ranges.push((start, q.data.len()));
                }
                q.argc.push(a.len());
                simple(out, "QUEUED");
            }
            Err(fail) => {
                q.dirty = true;
                self.stats.errors += 1;
                match fail {
                    None => unknown_command(a, out),
                    Some(f) => f.write(out),
                }
            }
        }
        Reply::Done
    }

    /// MULTI, EXEC, DISCARD, WATCH, UNWATCH.
    pub(super) fn cmd_transaction(
        &mut self,
        conn: ConnId,
        name: &[u8],
        a: &Args<'_>,
        out: &mut BytesMut,
    ) -> Result<Reply, Fail> {
        let in_multi = self.sessions.get(&conn).is_some_and(|s| s.multi.is_some());
        match name {
            b"MULTI" => {
                arity(a, 1, "multi")?;
                if in_multi {
                    return Err(Fail::Msg("MULTI calls can not be nested"));
                }
                self.session(conn).multi = Some(Queue::default());
                simple(out, "OK");
            }
            b"DISCARD" => {
                arity(a, 1, "discard")?;
                if !in_multi {
                    return Err(Fail::Msg("DISCARD without MULTI"));
                }
                self.session(conn).multi = None;
                simple(out, "OK");
            }
            b"EXEC" => {
                arity(a, 1, "exec")?;
                let Some(q) = self.sessions.get_mut(&conn).and_then(|s| s.multi.take()) else {
                    return Err(Fail::Msg("EXEC without MULTI"));
                };
                if q.dirty {
                    return Err(Fail::Line("EXECABORT Transaction discarded because of previous errors.".into()));
                }
                let start = out.len();
                array(out, q.argc.len());
                let max = self.limits.max_reply;
                // Past `max_reply` the remaining commands still run (a transaction runs whole),
                // their replies dropped as they come, and EXEC answers an error.
                let mut too_large = false;
                let mut at = 0;
                for &n in &q.argc {
                    let args = Args { src: &q.data, ranges: &q.ranges[at..at + n] };
                    at += n;
                    // A queued HELLO switches the protocol for the replies after it.
                    self.r3 = self.sessions.get(&conn).is_some_and(|s| s.resp3);
                    let before = out.len();
                    self.run(conn, &args, out);
                    if too_large || out.len() - start > max {
                        too_large = true;
                        out.truncate(before);
                    }
                }
                if too_large {
                    return Err(Fail::Line(format!(
                        "ERR reply too large: more than {max} bytes (the transaction was executed)"
                    )));
                }
            }
            b"WATCH" => {
                arity(a, -2, "watch")?;
                if in_multi {
                    return Err(Fail::Msg("WATCH inside MULTI is not allowed"));
                }
                return Err(Fail::Msg("WATCH is not supported by this server (MULTI/EXEC without WATCH is)"));
            }
            // Nothing is ever watched, so there is nothing to forget.
            _ => {
                arity(a, 1, "unwatch")?;
                simple(out, "OK");
            }
        }
        Ok(Reply::Done)
    }

    /// `HELLO [protover [AUTH username password] [SETNAME clientname]]`.
    pub(super) fn cmd_hello(&mut self, conn: ConnId, a: &Args<'_>, out: &mut BytesMut) -> Result<(), Fail> {
        let mut proto = None;
        if a.len() >= 2 {
            let v = parse_i64(a.get(1)).ok_or(Fail::Msg("Protocol version is not an integer or out of range"))?;
            if !(2..=3).contains(&v) {
                return Err(Fail::Line("NOPROTO unsupported protocol version".into()));
            }
            proto = Some(v == 3);
        }
        let (mut user, mut name) = (None, None);
        let mut i = 2;
        while i < a.len() {
            let more = a.len() - i - 1;
            if a.is(i, "AUTH") && more >= 2 {
                user = Some(a.get(i + 1));
                i += 3;
            } else if a.is(i, "SETNAME") && more >= 1 {
                name = Some(a.get(i + 1));
                i += 2;
            } else {
                return Err(Fail::Line(format!("ERR Syntax error in HELLO option '{}'", sanitized(a.get(i)))));
            }
        }
        if let Some(u) = user {
            check_user(u)?;
        }
        if let Some(n) = name {
            check_name(n)?;
        }
        let s = self.session(conn);
        if let Some(r3) = proto {
            s.resp3 = r3;
        }
        if let Some(n) = name {
            s.name = (!n.is_empty()).then(|| n.into());
        }
        let r3 = s.resp3;
        self.r3 = r3;
        map(out, 7, r3);
        for (k, v) in [("server", "redis"), ("version", REDIS_VERSION)] {
            bulk(out, k.as_bytes());
            bulk(out, v.as_bytes());
        }
        bulk(out, b"proto");
        int(out, if r3 { 3 } else { 2 });
        bulk(out, b"id");
        int(out, client_id(conn));
        for (k, v) in [("mode", "standalone"), ("role", "master")] {
            bulk(out, k.as_bytes());
            bulk(out, v.as_bytes());
        }
        bulk(out, b"modules");
        array(out, 0);
        Ok(())
    }

    /// `AUTH [username] password`, answered as Redis without `requirepass` does: the default
    /// user has no password, so any password for it is accepted, other users do not exist.
    pub(super) fn cmd_auth(&mut self, a: &Args<'_>, out: &mut BytesMut) -> Result<(), Fail> {
        arity(a, -2, "auth")?;
        match a.len() {
            2 => Err(Fail::Msg(
                "AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?",
            )),
            3 => {
                check_user(a.get(1))?;
                simple(out, "OK");
                Ok(())
            }
            _ => Err(Fail::Syntax),
        }
    }

    /// CLIENT ID, SETNAME, GETNAME, SETINFO.
    pub(super) fn cmd_client(&mut self, conn: ConnId, a: &Args<'_>, out: &mut BytesMut) -> Result<(), Fail> {
        arity(a, -2, "client")?;
        if a.is(1, "ID") {
            arity(a, 2, "client|id")?;
            int(out, client_id(conn));
        } else if a.is(1, "SETNAME") {
            arity(a, 3, "client|setname")?;
            let n = a.get(2);
            check_name(n)?;
            self.session(conn).name = (!n.is_empty()).then(|| n.into());
            simple(out, "OK");
        } else if a.is(1, "GETNAME") {
            arity(a, 2, "client|getname")?;
            match self.sessions.get(&conn).and_then(|s| s.name.as_deref()) {
                Some(n) => bulk(out, n),
                None => nil(out, self.r3),
            }
        } else if a.is(1, "SETINFO") {
            // What client libraries report about themselves (Redis 7.2). Nothing here reads
            // it back (no CLIENT LIST), so it is checked as Redis checks it and not kept.
            arity(a, 4, "client|setinfo")?;
            let attr = a.get(2);
            if !a.is(2, "LIB-NAME") && !a.is(2, "LIB-VER") {
                return Err(Fail::Line(format!("ERR Unrecognized option '{}'", sanitized(attr))));
            }
            if !valid_name(a.get(3)) {
                return Err(Fail::Line(format!(
                    "ERR {} cannot contain spaces, newlines or special characters.",
                    sanitized(attr)
                )));
            }
            simple(out, "OK");
        } else {
            let mut line = String::new();
            let _ = write!(line, "ERR unknown subcommand '{}'. Try CLIENT HELP.", sanitized(a.get(1)));
            return Err(Fail::Line(line));
        }
        Ok(())
    }
}

/// The id CLIENT ID and HELLO report: the connection's id, unique among open connections.
fn client_id(conn: ConnId) -> i64 {
    i64::from(conn.0)
}

fn check_user(user: &[u8]) -> Result<(), Fail> {
    if user == b"default" {
        Ok(())
    } else {
        Err(Fail::Line("WRONGPASS invalid username-password pair or user is disabled.".into()))
    }
}

fn check_name(n: &[u8]) -> Result<(), Fail> {
    if !valid_name(n) {
        return Err(Fail::Msg("Client names cannot contain spaces, newlines or special characters."));
    }
    if n.len() > MAX_CLIENT_NAME {
        return Err(Fail::Line(format!("ERR client name longer than {MAX_CLIENT_NAME} bytes")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::resp::testutil::on;
    use crate::resp::{Resp, RespLimits};
    use stack::rr::Handler;
    use stack::transport::ConnId;

    /// HELLO's map as Redis 7 sends it (checked against redis-server 7.0.15), but for the
    /// version and id.
    fn hello_reply(proto: u8, id: u32) -> String {
        let head = if proto == 3 { "%7\r\n" } else { "*14\r\n" };
        format!(
            "{head}$6\r\nserver\r\n$5\r\nredis\r\n$7\r\nversion\r\n$5\r\n7.2.0\r\n$5\r\nproto\r\n:{proto}\r\n\
             $2\r\nid\r\n:{id}\r\n$4\r\nmode\r\n$10\r\nstandalone\r\n$4\r\nrole\r\n$6\r\nmaster\r\n\
             $7\r\nmodules\r\n*0\r\n"
        )
    }

    #[test]
    fn hello_switches_the_protocol_per_connection() {
        let h = &mut Resp::default();
        h.on_open(ConnId(7), None);
        assert_eq!(on(h, 7, &["HELLO"]), hello_reply(2, 7));
        assert_eq!(on(h, 7, &["hello", "3"]), hello_reply(3, 7));
        // RESP3 types where Redis uses them; connection 8 still speaks RESP2.
        assert_eq!(on(h, 7, &["GET", "nope"]), "_\r\n");
        assert_eq!(on(h, 8, &["GET", "nope"]), "$-1\r\n");
        on(h, 7, &["HSET", "h", "f", "v"]);
        assert_eq!(on(h, 7, &["HGETALL", "h"]), "%1\r\n$1\r\nf\r\n$1\r\nv\r\n");
        assert_eq!(on(h, 8, &["HGETALL", "h"]), "*2\r\n$1\r\nf\r\n$1\r\nv\r\n");
        assert_eq!(on(h, 7, &["HMGET", "h", "f", "g"]), "*2\r\n$1\r\nv\r\n_\r\n");
        assert_eq!(on(h, 7, &["CONFIG", "GET", "save"]), "%1\r\n$4\r\nsave\r\n$0\r\n\r\n");
        assert_eq!(on(h, 7, &["COMMAND", "DOCS"]), "%0\r\n");
        assert_eq!(on(h, 7, &["COMMAND", "INFO", "nope"]), "*1\r\n_\r\n");
        assert!(on(h, 7, &["COMMAND", "INFO", "get"]).starts_with("*1\r\n*6\r\n$3\r\nget\r\n:2\r\n~2\r\n+readonly\r\n"));
        let info = on(h, 7, &["INFO", "replication"]);
        assert_eq!(info, "=52\r\ntxt:# Replication\r\nrole:master\r\nconnected_slaves:0\r\n\r\n");
        // Failed HELLOs change nothing; HELLO 2 goes back.
        assert_eq!(on(h, 7, &["HELLO", "4"]), "-NOPROTO unsupported protocol version\r\n");
        assert_eq!(on(h, 7, &["HELLO", "x"]), "-ERR Protocol version is not an integer or out of range\r\n");
        assert_eq!(on(h, 7, &["HELLO", "2", "FOO"]), "-ERR Syntax error in HELLO option 'FOO'\r\n");
        assert_eq!(on(h, 7, &["HELLO", "2", "SETNAME"]), "-ERR Syntax error in HELLO option 'SETNAME'\r\n");
        assert_eq!(on(h, 7, &["HELLO", "2", "AUTH", "u"]), "-ERR Syntax error in HELLO option 'AUTH'\r\n");
        assert_eq!(
            on(h, 7, &["HELLO", "2", "AUTH", "bob", "pw"]),
            "-WRONGPASS invalid username-password pair or user is disabled.\r\n"
        );
        assert_eq!(
            on(h, 7, &["HELLO", "2", "SETNAME", "a b"]),
            "-ERR Client names cannot contain spaces, newlines or special characters.\r\n"
        );
        assert_eq!(on(h, 7, &["GET", "nope"]), "_\r\n");
        assert_eq!(on(h, 7, &["HELLO", "2", "AUTH", "default", "any", "SETNAME", "me"]), hello_reply(2, 7));
        assert_eq!(on(h, 7, &["GET", "nope"]), "$-1\r\n");
        assert_eq!(on(h, 7, &["CLIENT", "GETNAME"]), "$2\r\nme\r\n");
        // Closing forgets the session.
        on(h, 7, &["HELLO", "3"]);
        h.on_close(ConnId(7), ());
        assert_eq!(on(h, 7, &["GET", "nope"]), "$-1\r\n");
        assert!(h.sessions.is_empty(), "a closed connection leaves no state");
    }

    #[test]
    fn auth_and_client_as_redis_without_a_password() {
        let h = &mut Resp::default();
        assert!(on(h, 1, &["AUTH", "pw"]).starts_with("-ERR AUTH <password> called without any password configured"));
        assert_eq!(on(h, 1, &["AUTH", "default", "pw"]), "+OK\r\n");
        assert_eq!(
            on(h, 1, &["AUTH", "bob", "pw"]),
            "-WRONGPASS invalid username-password pair or user is disabled.\r\n"
        );
        assert_eq!(on(h, 1, &["AUTH"]), "-ERR wrong number of arguments for 'auth' command\r\n");
        assert_eq!(on(h, 1, &["CLIENT", "ID"]), ":1\r\n");
        assert_eq!(on(h, 1, &["CLIENT", "GETNAME"]), "$-1\r\n");
        assert_eq!(on(h, 1, &["CLIENT", "SETNAME", "worker-1"]), "+OK\r\n");
        assert_eq!(on(h, 1, &["client", "getname"]), "$8\r\nworker-1\r\n");
        assert_eq!(on(h, 2, &["CLIENT", "GETNAME"]), "$-1\r\n");
        assert_eq!(on(h, 1, &["CLIENT", "SETNAME", ""]), "+OK\r\n");
        assert_eq!(on(h, 1, &["CLIENT", "GETNAME"]), "$-1\r\n");
        let long = "n".repeat(super::MAX_CLIENT_NAME + 1);
        assert!(on(h, 1, &["CLIENT", "SETNAME", &long]).starts_with("-ERR client name longer"));
        assert_eq!(on(h, 1, &["CLIENT", "SETINFO", "LIB-NAME", "redis-py"]), "+OK\r\n");
        assert_eq!(on(h, 1, &["CLIENT", "SETINFO", "lib-ver", "8.1.0"]), "+OK\r\n");
        assert_eq!(on(h, 1, &["CLIENT", "SETINFO", "FOO", "x"]), "-ERR Unrecognized option 'FOO'\r\n");
        assert_eq!(
            on(h, 1, &["CLIENT", "SETINFO", "lib-name", "a b"]),
            "-ERR lib-name cannot contain spaces, newlines or special characters.\r\n"
        );
        assert_eq!(on(h, 1, &["CLIENT", "KILL"]), "-ERR unknown subcommand 'KILL'. Try CLIENT HELP.\r\n");
        assert_eq!(on(h, 1, &["CLIENT", "ID", "x"]), "-ERR wrong number of arguments for 'client|id' command\r\n");
        assert_eq!(on(h, 1, &["CLIENT"]), "-ERR wrong number of arguments for 'client' command\r\n");
    }

    #[test]
    fn transactions_queue_execute_and_abort_as_redis() {
        let h = &mut Resp::default();
        assert_eq!(on(h, 1, &["EXEC"]), "-ERR EXEC without MULTI\r\n");
        assert_eq!(on(h, 1, &["DISCARD"]), "-ERR DISCARD without MULTI\r\n");
        assert_eq!(on(h, 1, &["MULTI"]), "+OK\r\n");
        assert_eq!(on(h, 1, &["MULTI"]), "-ERR MULTI calls can not be nested\r\n");
        assert_eq!(on(h, 1, &["WATCH", "a"]), "-ERR WATCH inside MULTI is not allowed\r\n");
        assert_eq!(on(h, 1, &["SET", "s", "x"]), "+QUEUED\r\n");
        assert_eq!(on(h, 1, &["INCR", "s"]), "+QUEUED\r\n");
        assert_eq!(on(h, 1, &["HSET", "s", "f", "v"]), "+QUEUED\r\n");
        assert_eq!(on(h, 1, &["get", "s"]), "+QUEUED\r\n");
        // Nothing ran yet: another connection does not see it.
        assert_eq!(on(h, 2, &["GET", "s"]), "$-1\r\n");
        // Errors at run time are part of EXEC's reply (verbatim from redis-server 7.0.15).
        assert_eq!(
            on(h, 1, &["EXEC"]),
            "*4\r\n+OK\r\n-ERR value is not an integer or out of range\r\n\
             -WRONGTYPE Operation against a key holding the wrong kind of value\r\n$1\r\nx\r\n"
        );
        // Errors at queue time abort the whole transaction.
        assert_eq!(on(h, 1, &["MULTI"]), "+OK\r\n");
        assert_eq!(on(h, 1, &["SET", "a", "1"]), "+QUEUED\r\n");
        assert_eq!(on(h, 1, &["NOPE", "x"]), "-ERR unknown command 'NOPE', with args beginning with: 'x' \r\n");
        assert_eq!(on(h, 1, &["GET"]), "-ERR wrong number of arguments for 'get' command\r\n");
        assert_eq!(on(h, 1, &["EXEC"]), "-EXECABORT Transaction discarded because of previous errors.\r\n");
        assert_eq!(on(h, 1, &["EXISTS", "a"]), ":0\r\n");
        assert_eq!(on(h, 1, &["MULTI"]), "+OK\r\n");
        assert_eq!(on(h, 1, &["SET", "a", "1"]), "+QUEUED\r\n");
        assert_eq!(on(h, 1, &["DISCARD"]), "+OK\r\n");
        assert_eq!(on(h, 1, &["EXISTS", "a"]), ":0\r\n");
        assert_eq!(on(h, 1, &["WATCH", "a"]).get(..31), Some("-ERR WATCH is not supported by "));
        assert_eq!(on(h, 1, &["UNWATCH"]), "+OK\r\n");
        // A HELLO inside the transaction switches the replies after it.
        on(h, 1, &["MULTI"]);
        for c in [&["GET", "none"][..], &["HELLO", "3"], &["GET", "none"], &["PING"]] {
            assert_eq!(on(h, 1, c), "+QUEUED\r\n");
        }
        let r = on(h, 1, &["EXEC"]);
        assert!(r.starts_with("*4\r\n$-1\r\n%7\r\n") && r.ends_with("*0\r\n_\r\n+PONG\r\n"), "{r}");
        assert_eq!(on(h, 1, &["EXEC"]), "-ERR EXEC without MULTI\r\n");
    }

    #[test]
    fn the_multi_queue_is_bounded() {
        let limits = RespLimits { max_queued: 3, max_queued_bytes: 250, ..RespLimits::default() };
        let h = &mut Resp::new(limits);
        on(h, 1, &["MULTI"]);
        for _ in 0..3 {
            assert_eq!(on(h, 1, &["SET", "k", "v"]), "+QUEUED\r\n");
        }
        assert!(on(h, 1, &["SET", "k", "v"]).starts_with("-ERR transaction too large: at most 3 commands"));
        assert!(on(h, 1, &["EXEC"]).starts_with("-EXECABORT"));
        on(h, 1, &["MULTI"]);
        let big = "v".repeat(150);
        assert_eq!(on(h, 1, &["SET", "k", &big]), "+QUEUED\r\n");
        assert!(on(h, 1, &["SET", "k", &big]).contains("250 bytes"));
        assert!(on(h, 1, &["EXEC"]).starts_with("-EXECABORT"));
        assert_eq!(on(h, 1, &["DBSIZE"]), ":0\r\n");
    }

    #[test]
    fn replies_are_bounded() {
        // A short request must not make a reply that repeats a value without bound.
        let limits = RespLimits { max_reply: 1000, ..RespLimits::default() };
        let h = &mut Resp::new(limits);
        let v = "v".repeat(300);
        on(h, 1, &["SET", "k", &v]);
        on(h, 1, &["HSET", "h", "a", &v, "b", &v, "c", &v, "d", &v]);
        let too_large = "-ERR reply too large: more than 1000 bytes\r\n";
        assert_eq!(on(h, 1, &["MGET", "k", "k", "k", "k", "k"]), too_large);
        assert_eq!(on(h, 1, &["HMGET", "h", "a", "a", "a", "a", "a"]), too_large);
        assert_eq!(on(h, 1, &["HGETALL", "h"]), too_large);
        assert!(on(h, 1, &["MGET", "k", "k", "k"]).starts_with("*3\r\n"));
        on(h, 1, &["MULTI"]);
        for _ in 0..5 {
            on(h, 1, &["GET", "k"]);
        }
        on(h, 1, &["INCR", "n"]);
        assert_eq!(
            on(h, 1, &["EXEC"]),
            "-ERR reply too large: more than 1000 bytes (the transaction was executed)\r\n"
        );
        assert_eq!(on(h, 1, &["GET", "n"]), "$1\r\n1\r\n", "every queued command ran");
    }
}
