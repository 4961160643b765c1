//! The commands stock clients send when they start (redis-cli, redis-benchmark, client
//! libraries): COMMAND and its subcommands, CONFIG GET and INFO. The answers describe this
//! server honestly: its commands, limits and counters. The command table also gives MULTI its
//! queue-time checks (the command exists, its number of arguments).

use std::fmt::Write as _;

use bytes::BytesMut;

use super::args::Args;
use super::commands::{arity, Fail};
use super::wire::{array, bulk, int, map, nil_array, set, simple, verbatim};
use super::{Resp, REDIS_VERSION};

/// Name, arity (negative: at least), flags, first key, last key, key step: the 6-field entries
/// of `COMMAND` / `COMMAND INFO` that clients use for key positions and hints.
type CommandInfo = (&'static str, i64, &'static [&'static str], i64, i64, i64);

/// Every command served, as `COMMAND` lists it.
const COMMANDS: &[CommandInfo] = &[
    ("ping", -1, &["fast"], 0, 0, 0),
    ("echo", 2, &["fast"], 0, 0, 0),
    ("get", 2, &["readonly", "fast"], 1, 1, 1),
    ("set", -3, &["write", "denyoom"], 1, 1, 1),
    ("setnx", 3, &["write", "denyoom", "fast"], 1, 1, 1),
    ("setex", 4, &["write", "denyoom"], 1, 1, 1),
    ("psetex", 4, &["write", "denyoom"], 1, 1, 1),
    ("getset", 3, &["write", "denyoom", "fast"], 1, 1, 1),
    ("del", -2, &["write"], 1, -1, 1),
    ("exists", -2, &["readonly", "fast"], 1, -1, 1),
    ("incr", 2, &["write", "denyoom", "fast"], 1, 1, 1),
    ("incrby", 3, &["write", "denyoom", "fast"], 1, 1, 1),
    ("decr", 2, &["write", "denyoom", "fast"], 1, 1, 1),
    ("decrby", 3, &["write", "denyoom", "fast"], 1, 1, 1),
    ("mget", -2, &["readonly", "fast"], 1, -1, 1),
    ("mset", -3, &["write", "denyoom"], 1, -1, 2),
    ("append", 3, &["write", "denyoom", "fast"], 1, 1, 1),
    ("strlen", 2, &["readonly", "fast"], 1, 1, 1),
    ("expire", -3, &["write", "fast"], 1, 1, 1),
    ("pexpire", -3, &["write", "fast"], 1, 1, 1),
    ("ttl", 2, &["readonly", "fast"], 1, 1, 1),
    ("pttl", 2, &["readonly", "fast"], 1, 1, 1),
    ("persist", 2, &["write", "fast"], 1, 1, 1),
    ("dbsize", 1, &["readonly", "fast"], 0, 0, 0),
    ("flushdb", -1, &["write"], 0, 0, 0),
    ("flushall", -1, &["write"], 0, 0, 0),
    ("select", 2, &["loading", "stale", "fast"], 0, 0, 0),
    ("type", 2, &["readonly", "fast"], 1, 1, 1),
    ("hset", -4, &["write", "denyoom", "fast"], 1, 1, 1),
    ("hmset", -4, &["write", "denyoom", "fast"], 1, 1, 1),
    ("hsetnx", 4, &["write", "denyoom", "fast"], 1, 1, 1),
    ("hget", 3, &["readonly", "fast"], 1, 1, 1),
    ("hmget", -3, &["readonly", "fast"], 1, 1, 1),
    ("hgetall", 2, &["readonly"], 1, 1, 1),
    ("hkeys", 2, &["readonly"], 1, 1, 1),
    ("hvals", 2, &["readonly"], 1, 1, 1),
    ("hdel", -3, &["write", "fast"], 1, 1, 1),
    ("hincrby", 4, &["write", "denyoom", "fast"], 1, 1, 1),
    ("hlen", 2, &["readonly", "fast"], 1, 1, 1),
    ("hexists", 3, &["readonly", "fast"], 1, 1, 1),
    ("hstrlen", 3, &["readonly", "fast"], 1, 1, 1),
    ("multi", 1, &["noscript", "loading", "stale", "fast", "allow_busy"], 0, 0, 0),
    ("exec", 1, &["noscript", "loading", "stale", "skip_slowlog"], 0, 0, 0),
    ("discard", 1, &["noscript", "loading", "stale", "fast", "allow_busy"], 0, 0, 0),
    ("watch", -2, &["noscript", "loading", "stale", "fast", "allow_busy"], 1, -1, 1),
    ("unwatch", 1, &["noscript", "loading", "stale", "fast", "allow_busy"], 0, 0, 0),
    ("quit", -1, &["fast"], 0, 0, 0),
    ("command", -1, &["loading", "stale"], 0, 0, 0),
    ("config", -2, &["admin", "loading", "stale"], 0, 0, 0),
    ("info", -1, &["loading", "stale"], 0, 0, 0),
    ("hello", -1, &["noscript", "loading", "stale", "fast", "no_auth", "allow_busy"], 0, 0, 0),
    ("auth", -2, &["noscript", "loading", "stale", "fast", "no_auth", "allow_busy"], 0, 0, 0),
    ("client", -2, &["noscript", "loading", "stale"], 0, 0, 0),
];

/// The table entry of the command `name` (any case).
pub(super) fn lookup(name: &[u8]) -> Option<&'static CommandInfo> {
    COMMANDS.iter().find(|c| name.eq_ignore_ascii_case(c.0.as_bytes()))
}

impl Resp {
    pub(super) fn cmd_command(&mut self, a: &Args<'_>, out: &mut BytesMut) -> Result<(), Fail> {
        let r3 = self.r3;
        let entry = |out: &mut BytesMut, c: &CommandInfo| {
            array(out, 6);
            bulk(out, c.0.as_bytes());
            int(out, c.1);
            set(out, c.2.len(), r3);
            for f in c.2 {
                simple(out, f);
            }
            int(out, c.3);
            int(out, c.4);
            int(out, c.5);
        };
        if a.len() == 1 {
            array(out, COMMANDS.len());
            COMMANDS.iter().for_each(|c| entry(out, c));
        } else if a.is(1, "COUNT") {
            int(out, COMMANDS.len() as i64);
        } else if a.is(1, "INFO") {
            array(out, a.len() - 2);
            for i in 2..a.len() {
                match COMMANDS.iter().find(|c| a.is(i, c.0)) {
                    Some(c) => entry(out, c),
                    None => nil_array(out, r3),
                }
            }
        } else if a.is(1, "LIST") {
            array(out, COMMANDS.len());
            COMMANDS.iter().for_each(|c| bulk(out, c.0.as_bytes()));
        } else if a.is(1, "DOCS") {
            // No documentation to offer: an empty map (RESP2: empty array). redis-cli then
            // shows no hints, which is all this costs.
            map(out, 0, r3);
        } else {
            return Err(Fail::Msg("unknown subcommand of COMMAND (supported: COUNT, INFO, LIST, DOCS)"));
        }
        Ok(())
    }

    pub(super) fn cmd_config(&mut self, a: &Args<'_>, out: &mut BytesMut) -> Result<(), Fail> {
        arity(a, -2, "config")?;
        if !a.is(1, "GET") {
            return Err(Fail::Msg("only CONFIG GET is supported"));
        }
        arity(a, -3, "config|get")?;
        let params: [(&str, String); 8] = [
            ("save", String::new()),
            ("appendonly", "no".into()),
            ("databases", "1".into()),
            ("maxmemory", self.limits.max_memory.to_string()),
            ("maxmemory-policy", "noeviction".into()),
            ("proto-max-bulk-len", self.limits.max_bulk.to_string()),
            ("client-query-buffer-limit", self.limits.max_request.to_string()),
            ("timeout", "0".into()),
        ];
        let hits: Vec<&(&str, String)> =
            params.iter().filter(|(n, _)| (2..a.len()).any(|i| glob(a.get(i), n.as_bytes()))).collect();
        map(out, hits.len(), self.r3);
        for (n, v) in hits {
            bulk(out, n.as_bytes());
            bulk(out, v.as_bytes());
        }
        Ok(())
    }

    pub(super) fn cmd_info(&mut self, a: &Args<'_>, out: &mut BytesMut) {
        let want = |s: &str| {
            a.len() == 1
                || (1..a.len()).any(|i| a.is(i, s) || a.is(i, "all") || a.is(i, "everything") || a.is(i, "default"))
        };
        let uptime = self.now() / 1000;
        let s = self.stats;
        let sections: [(&str, String); 6] = [
            (
                "Server",
                format!(
                    "redis_version:{REDIS_VERSION}\r\nserver_name:stack-resp\r\nredis_mode:standalone\r\n\
                     arch_bits:64\r\nprocess_id:{}\r\nuptime_in_seconds:{uptime}\r\n",
                    std::process::id()
                ),
            ),
            ("Clients", format!("connected_clients:{}\r\n", s.connected)),
            (
                "Memory",
                format!(
                    "used_memory:{}\r\nmaxmemory:{}\r\nmaxmemory_policy:noeviction\r\n",
                    self.used, self.limits.max_memory
                ),
            ),
            (
                "Stats",
                format!(
                    "total_connections_received:{}\r\ntotal_commands_processed:{}\r\nexpired_keys:{}\r\n\
                     rejected_writes:{}\r\n",
                    s.accepted, s.commands, s.expired_keys, s.rejected_writes
                ),
            ),
            ("Replication", "role:master\r\nconnected_slaves:0\r\n".to_string()),
            (
                "Keyspace",
                if self.map.is_empty() {
                    String::new()
                } else {
                    format!("db0:keys={},expires={},avg_ttl=0\r\n", self.map.len(), self.with_ttl)
                },
            ),
        ];
        // As Redis: `# Section` headers, a blank line between sections, none after the last.
        let mut text = String::new();
        for (name, body) in sections.iter().filter(|(n, _)| want(&n.to_ascii_lowercase())) {
            if !text.is_empty() {
                text.push_str("\r\n");
            }
            let _ = write!(text, "# {name}\r\n{body}");
        }
        verbatim(out, text.as_bytes(), self.r3);
    }
}

/// Case-insensitive glob (`*`, `?`) for CONFIG GET patterns.
fn glob(pat: &[u8], s: &[u8]) -> bool {
    let (mut p, mut i) = (0, 0);
    let (mut star, mut mark) = (None, 0);
    while i < s.len() {
        if p < pat.len() && (pat[p] == b'?' || pat[p].eq_ignore_ascii_case(&s[i])) {
            p += 1;
            i += 1;
        } else if p < pat.len() && pat[p] == b'*' {
            star = Some(p);
            mark = i;
            p += 1;
        } else if let Some(sp) = star {
            p = sp + 1;
            mark += 1;
            i = mark;
        } else {
            return false;
        }
    }
    pat[p..].iter().all(|&c| c == b'*')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resp::testutil::{cmd, serve};
    use crate::resp::RespLimits;

    #[test]
    fn connection_and_introspection_commands() {
        let h = &mut Resp::default();
        assert_eq!(cmd(h, &["PING"]), "+PONG\r\n");
        assert_eq!(cmd(h, &["PING", "hi"]), "$2\r\nhi\r\n");
        assert_eq!(cmd(h, &["ECHO", ""]), "$0\r\n\r\n");
        assert_eq!(cmd(h, &["SELECT", "0"]), "+OK\r\n");
        assert_eq!(cmd(h, &["SELECT", "1"]), "-ERR DB index is out of range\r\n");
        assert_eq!(cmd(h, &["CONFIG", "GET", "save"]), "*2\r\n$4\r\nsave\r\n$0\r\n\r\n");
        assert_eq!(cmd(h, &["CONFIG", "GET", "APPEND*"]), "*2\r\n$10\r\nappendonly\r\n$2\r\nno\r\n");
        assert!(cmd(h, &["CONFIG", "SET", "save", ""]).starts_with("-ERR"));
        assert!(cmd(h, &["CONFIG"]).starts_with("-ERR wrong number"));
        assert_eq!(cmd(h, &["COMMAND", "COUNT"]), format!(":{}\r\n", COMMANDS.len()));
        assert!(cmd(h, &["COMMAND"]).starts_with(&format!("*{}\r\n*6\r\n$4\r\nping\r\n:-1\r\n", COMMANDS.len())));
        assert_eq!(cmd(h, &["COMMAND", "DOCS"]), "*0\r\n");
        assert!(cmd(h, &["COMMAND", "INFO", "get", "nope"]).ends_with("*-1\r\n"));
        assert!(cmd(h, &["INFO"]).contains("redis_version:7.2.0\r\n"));
        assert!(cmd(h, &["INFO", "keyspace"]).starts_with("$12\r\n# Keyspace\r\n"));
        assert!(cmd(h, &["INFO", "replication"]).contains("role:master\r\n"));
        assert_eq!(
            cmd(h, &["LPUSH", "l", "a\r\nb"]),
            "-ERR unknown command 'LPUSH', with args beginning with: 'l' 'a??b' \r\n"
        );
        assert!(cmd(h, &["AVERYLONGCOMMANDNAMEINDEED"]).starts_with("-ERR unknown command"));
        assert_eq!(cmd(h, &["GET"]), "-ERR wrong number of arguments for 'get' command\r\n");
        let (out, closed) = serve(h, RespLimits::default(), b"QUIT\r\nPING\r\n", 100);
        assert_eq!((out.as_str(), closed), ("+OK\r\n", true));
        assert!(h.stats().errors >= 6);
    }

    #[test]
    fn the_command_table_is_what_is_served() {
        // Every listed command is dispatched (a fresh store each: MULTI and QUIT change state)...
        for c in COMMANDS {
            let reply = cmd(&mut Resp::default(), &[c.0]);
            assert!(!reply.starts_with("-ERR unknown command"), "{}: {reply}", c.0);
            assert_eq!(lookup(c.0.to_uppercase().as_bytes()).map(|e| e.0), Some(c.0));
        }
        // ...and a command outside the table is not.
        for name in ["LPUSH", "SCAN", "KEYS", "EVAL", "SUBSCRIBE", "HINCRBYFLOAT", "GETDEL", "EXPIREAT", "MONITOR"] {
            assert!(lookup(name.as_bytes()).is_none());
            assert!(cmd(&mut Resp::default(), &[name, "x"]).starts_with("-ERR unknown command"), "{name}");
        }
    }

    #[test]
    fn glob_matches_like_redis() {
        assert!(glob(b"*", b"save"));
        assert!(glob(b"max*", b"maxmemory-policy"));
        assert!(glob(b"*memory*", b"maxmemory"));
        assert!(glob(b"s?ve", b"SAVE"));
        assert!(!glob(b"save", b"saves"));
        assert!(!glob(b"*x", b"save"));
    }
}
