//! The Rust `redis` crate (sync API) against a Redis-protocol server: the same checks as the
//! redis-py script. Passes against redis-server 7 too.

use std::collections::HashMap;
use std::time::Duration;

use redis::{Commands, RedisResult, Value};

/// Runs every check on a fresh connection (`resp3`: `?protocol=resp3`, else the crate's
/// default). Returns the number of error replies provoked on purpose.
pub fn check(host: &str, port: u16, resp3: bool) -> Result<u64, String> {
    let url = format!("redis://{host}:{port}/{}", if resp3 { "?protocol=resp3" } else { "" });
    let p = if resp3 { "rs3:" } else { "rs2:" };
    let k = |s: &str| format!("{p}{s}");
    fn fail(what: &'static str) -> impl Fn(redis::RedisError) -> String {
        move |e| format!("{what}: {e}")
    }
    let client = redis::Client::open(url.as_str()).map_err(fail("open"))?;
    let con = &mut client.get_connection_with_timeout(Duration::from_secs(10)).map_err(fail("connect"))?;
    let mut provoked = 0;
    macro_rules! ensure {
        ($cond:expr, $($what:tt)*) => {
            if !$cond {
                return Err(format!($($what)*));
            }
        };
    }

    // Connect (HELLO 3 when asked), health check, names.
    let pong: String = redis::cmd("PING").query(con).map_err(fail("PING"))?;
    ensure!(pong == "PONG", "PING: {pong}");
    let hello: HashMap<String, Value> = redis::cmd("HELLO").query(con).map_err(fail("HELLO"))?;
    ensure!(hello.get("proto") == Some(&Value::Int(if resp3 { 3 } else { 2 })), "HELLO proto: {hello:?}");
    let _: () = redis::cmd("CLIENT").arg("SETNAME").arg("rust").query(con).map_err(fail("CLIENT SETNAME"))?;
    let name: Option<String> = redis::cmd("CLIENT").arg("GETNAME").query(con).map_err(fail("CLIENT GETNAME"))?;
    ensure!(name.as_deref() == Some("rust"), "CLIENT GETNAME: {name:?}");

    // Strings (a server kept from an earlier run may still hold the counter).
    let _: () = con.del(k("n")).map_err(fail("DEL"))?;
    let _: () = con.set(k("s"), "v").map_err(fail("SET"))?;
    let v: Option<String> = con.get(k("s")).map_err(fail("GET"))?;
    ensure!(v.as_deref() == Some("v"), "GET: {v:?}");
    let v: Option<String> = con.get(k("missing")).map_err(fail("GET missing"))?;
    ensure!(v.is_none(), "GET missing: {v:?}");
    let n: i64 = con.incr(k("n"), 42).map_err(fail("INCRBY"))?;
    ensure!(n == 42, "INCRBY: {n}");
    let _: () = con.mset(&[(k("a"), "1"), (k("b"), "2")]).map_err(fail("MSET"))?;
    let vs: Vec<Option<String>> = con.mget(&[k("a"), k("missing"), k("b")]).map_err(fail("MGET"))?;
    ensure!(vs == [Some("1".into()), None, Some("2".into())], "MGET: {vs:?}");
    let n: i64 = con.del(&[k("a"), k("missing")]).map_err(fail("DEL"))?;
    ensure!(n == 1, "DEL: {n}");

    // Large and binary-safe values and keys.
    let big: Vec<u8> = (0..1u32 << 20).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    let _: () = con.set(k("big"), &big).map_err(fail("SET 1 MiB"))?;
    let got: Vec<u8> = con.get(k("big")).map_err(fail("GET 1 MiB"))?;
    ensure!(got == big, "1 MiB value differs ({} bytes back)", got.len());
    let mut bkey = p.as_bytes().to_vec();
    bkey.extend(0..=255u8);
    let mut bval: Vec<u8> = (0..=255u8).cycle().take(1024).collect();
    bval.extend_from_slice(b"\r\n$-1\r\n\0");
    let _: () = con.set(&bkey, &bval).map_err(fail("SET binary"))?;
    let got: Vec<u8> = con.get(&bkey).map_err(fail("GET binary"))?;
    ensure!(got == bval, "binary value differs");

    // Expiry.
    let _: () = con.pset_ex(k("e"), "v", 300).map_err(fail("SET PX"))?;
    let ms: i64 = con.pttl(k("e")).map_err(fail("PTTL"))?;
    ensure!(0 < ms && ms <= 300, "PTTL: {ms}");
    let ok: bool = con.expire(k("s"), 100).map_err(fail("EXPIRE"))?;
    let ttl: i64 = con.ttl(k("s")).map_err(fail("TTL"))?;
    ensure!(ok && (95..=100).contains(&ttl), "EXPIRE/TTL: {ok} {ttl}");
    std::thread::sleep(Duration::from_millis(500));
    let ttl: i64 = con.ttl(k("e")).map_err(fail("TTL expired"))?;
    ensure!(ttl == -2, "expired key: TTL {ttl}");

    // Pipeline of 2,000 commands.
    let mut pipe = redis::pipe();
    for i in 0..1000 {
        pipe.set(k(&format!("p{i}")), i).ignore().get(k(&format!("p{i}")));
    }
    let got: Vec<i64> = pipe.query(con).map_err(fail("pipeline"))?;
    ensure!(got == (0..1000).collect::<Vec<i64>>(), "pipeline replies out of order");

    // Transactions.
    let (t, h): (i64, HashMap<String, String>) = redis::pipe()
        .atomic()
        .set(k("t"), 1)
        .ignore()
        .incr(k("t"), 1)
        .hset(k("th"), "f", "v")
        .ignore()
        .hgetall(k("th"))
        .query(con)
        .map_err(fail("MULTI/EXEC"))?;
    ensure!(t == 2 && h == HashMap::from([("f".into(), "v".into())]), "MULTI/EXEC: {t} {h:?}");
    let r: RedisResult<()> = redis::pipe().atomic().set(k("never"), 1).cmd("NOSUCHCOMMAND").query(con);
    ensure!(r.is_err(), "a transaction with an unknown command: {r:?}");
    provoked += 2; // the unknown command, then EXECABORT
    let n: i64 = con.exists(k("never")).map_err(fail("EXISTS"))?;
    ensure!(n == 0, "an aborted transaction changed something");

    // Hashes.
    let n: i64 = con.hset_multiple(k("h"), &[("a", "1"), ("b", "2"), ("c", "3")]).map(|()| 3).map_err(fail("HMSET"))?;
    ensure!(n == 3, "HSET");
    let n: i64 = con.hset(k("h"), "a", "10").map_err(fail("HSET"))?;
    ensure!(n == 0, "HSET existing field: {n}");
    let v: Option<String> = con.hget(k("h"), "a").map_err(fail("HGET"))?;
    ensure!(v.as_deref() == Some("10"), "HGET: {v:?}");
    let vs: Vec<Option<String>> =
        redis::cmd("HMGET").arg(k("h")).arg("b").arg("zz").query(con).map_err(fail("HMGET"))?;
    ensure!(vs == [Some("2".into()), None], "HMGET: {vs:?}");
    let all: HashMap<String, String> = con.hgetall(k("h")).map_err(fail("HGETALL"))?;
    ensure!(all.len() == 3 && all["a"] == "10" && all["c"] == "3", "HGETALL: {all:?}");
    let n: i64 = con.hincr(k("h"), "a", 5).map_err(fail("HINCRBY"))?;
    ensure!(n == 15, "HINCRBY: {n}");
    let (len, has, hasnt): (i64, bool, bool) = (
        con.hlen(k("h")).map_err(fail("HLEN"))?,
        con.hexists(k("h"), "b").map_err(fail("HEXISTS"))?,
        con.hexists(k("h"), "zz").map_err(fail("HEXISTS"))?,
    );
    ensure!(len == 3 && has && !hasnt, "HLEN/HEXISTS: {len} {has} {hasnt}");
    let n: i64 = con.hdel(k("h"), &["b", "zz"]).map_err(fail("HDEL"))?;
    ensure!(n == 1, "HDEL: {n}");
    let _: () = con.hset(k("hb"), &bkey, &big).map_err(fail("HSET binary"))?;
    let got: Vec<u8> = con.hget(k("hb"), &bkey).map_err(fail("HGET binary"))?;
    ensure!(got == big, "1 MiB hash value with a binary field differs");
    let r: RedisResult<Option<String>> = con.get(k("h"));
    ensure!(r.as_ref().is_err_and(|e| e.to_string().contains("WRONGTYPE")), "GET on a hash: {r:?}");
    provoked += 1;

    // An unknown command, then the connection still works.
    let r: RedisResult<()> = redis::cmd("NOSUCHCOMMAND").arg("x").query(con);
    ensure!(r.as_ref().is_err_and(|e| e.to_string().contains("unknown command")), "unknown command: {r:?}");
    provoked += 1;
    let pong: String = redis::cmd("PING").query(con).map_err(fail("PING after errors"))?;
    ensure!(pong == "PONG", "PING after errors: {pong}");
    Ok(provoked)
}
