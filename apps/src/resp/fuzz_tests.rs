//! Random command streams over several connections: no panic, and the store's accounting
//! (bytes used, keys with deadlines, per-connection sessions) stays exact whatever arrives.

use super::store::{cost, field_cost, Value};
use super::testutil::{next, on};
use super::{Resp, RespLimits};
use stack::rr::Handler;
use stack::transport::ConnId;

const WORDS: &[&str] = &[
    "GET",
    "SET",
    "HSET",
    "HGET",
    "HDEL",
    "HGETALL",
    "HINCRBY",
    "HMGET",
    "MULTI",
    "EXEC",
    "DISCARD",
    "WATCH",
    "HELLO",
    "CLIENT",
    "SETNAME",
    "GETNAME",
    "AUTH",
    "default",
    "EXPIRE",
    "PEXPIRE",
    "DEL",
    "INCR",
    "APPEND",
    "MSET",
    "MGET",
    "TYPE",
    "FLUSHALL",
    "SETEX",
    "EX",
    "PX",
    "NX",
    "XX",
    "GETSET",
    "QUIT",
    "2",
    "3",
    "-1",
    "0",
    "k",
    "h",
    "f",
    "g",
    "v",
    "9223372036854775807",
    "",
];

fn check_accounting(h: &Resp) {
    let mut used = 0;
    for (k, e) in &h.map {
        if let Value::Hash(hash) = &e.value {
            assert!(!hash.fields.is_empty(), "an empty hash is deleted");
            let bytes: usize = hash.fields.iter().map(|(f, v)| field_cost(f, v.len())).sum();
            assert_eq!(hash.bytes, bytes);
        }
        used += cost(k, e.value.size());
    }
    assert_eq!(h.used_memory(), used);
    assert_eq!(h.with_ttl, h.map.values().filter(|e| e.expires.is_some()).count());
    assert!(h.used_memory() <= h.limits.max_memory && h.map.len() <= h.limits.max_keys);
}

#[test]
fn random_commands_keep_the_store_consistent() {
    let limits = RespLimits {
        max_keys: 20,
        max_memory: 4000,
        max_queued: 8,
        max_queued_bytes: 600,
        max_reply: 2000,
        ..RespLimits::default()
    };
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    let h = &mut Resp::new(limits);
    h.set_clock_ms(0);
    for conn in 0..4 {
        h.on_open(ConnId(conn), None);
    }
    // Replies that show the stream reached the interesting states.
    let kinds = ["+QUEUED", "-OOM", "-EXECABORT", "-WRONGTYPE", "%", "_\r\n", "-ERR transaction too large"];
    let mut seen = [0u32; 7];
    for step in 0..60_000u64 {
        let conn = (next(&mut rng) % 4) as u32;
        let n = 1 + next(&mut rng) % 7;
        let args: Vec<String> = (0..n)
            .map(|_| {
                let r = next(&mut rng);
                if r.is_multiple_of(11) {
                    "x".repeat((r % 300) as usize)
                } else {
                    WORDS[(r % WORDS.len() as u64) as usize].to_string()
                }
            })
            .collect();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let reply = on(h, conn, &args);
        assert!(!reply.is_empty() && reply.ends_with("\r\n"), "{args:?} -> {reply:?}");
        for (k, n) in kinds.iter().zip(seen.iter_mut()) {
            *n += u32::from(reply.starts_with(k));
        }
        if step % 1000 == 0 {
            h.set_clock_ms(step / 10);
            // Connections come and go; a closed one leaves no session behind.
            h.on_close(ConnId(conn), ());
            assert!(!h.sessions.contains_key(&ConnId(conn)));
            h.on_open(ConnId(conn), None);
        }
        check_accounting(h);
    }
    assert!(seen.iter().all(|&n| n > 0), "{:?}", kinds.iter().zip(seen).collect::<Vec<_>>());
}
