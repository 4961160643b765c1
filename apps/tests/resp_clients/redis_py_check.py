"""redis-py against a Redis-protocol server: connect, strings, pipelines, transactions, hashes,
expiry, large and binary-safe values, an unknown command. Run by apps/tests/resp.rs (in the
client namespace) as: python redis_py_check.py HOST PORT PROTOCOL, PROTOCOL 3 meaning redis-py's
default settings (it opens with HELLO 3) and 2 meaning protocol=2. Exits non-zero on the first
failed check; the last line counts the error replies it provoked on purpose, for the server's
error counter. Passes against redis-server 7 too, which is how the checks themselves were checked.
"""
import os
import sys
import time

import redis

host, port, proto = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
kw = {} if proto == 3 else {"protocol": 2}
r = redis.Redis(host=host, port=port, socket_timeout=30, **kw)
P = f"py{proto}:"
provoked = 0


def check(ok, what):
    if not ok:
        sys.exit(f"FAIL (redis-py {redis.__version__}, protocol {proto}): {what}")


def expect_error(fn, text, what):
    global provoked
    try:
        fn()
    except redis.exceptions.ResponseError as e:
        check(text in str(e), f"{what}: error {e!r} lacks {text!r}")
        provoked += 1
        return
    check(False, f"{what}: no error")


# Connect: the handshake the default settings make (HELLO 3, CLIENT SETINFO) and health checks.
check(r.ping() is True, "PING")
conn = r.connection_pool.get_connection()
check(str(conn.protocol) == str(proto), f"negotiated protocol {conn.protocol}")
r.connection_pool.release(conn)
check(r.echo("hi") == b"hi", "ECHO")
check(r.client_setname("compat-" + str(proto)) is True, "CLIENT SETNAME")
check(r.client_getname() in ("compat-" + str(proto), b"compat-" + str(proto).encode()), "CLIENT GETNAME")
check(isinstance(r.client_id(), int), "CLIENT ID")
check(r.info("server")["redis_version"], "INFO server")

# Strings (a server kept from an earlier run may still hold some keys).
r.delete(*[P + k for k in ("s", "n", "a", "b", "t", "th", "tx", "never", "h", "hb")])
check(r.set(P + "s", "v") is True, "SET")
check(r.get(P + "s") == b"v", "GET")
check(r.get(P + "missing") is None, "GET missing")
check(r.set(P + "s", "w", nx=True) is None, "SET NX on an existing key")
check(r.incr(P + "n") == 1 and r.incrby(P + "n", 41) == 42 and r.decr(P + "n") == 41, "INCR/INCRBY/DECR")
check(r.mset({P + "a": "1", P + "b": "2"}) is True, "MSET")
check(r.mget([P + "a", P + "missing", P + "b"]) == [b"1", None, b"2"], "MGET")
check(r.append(P + "a", "23") == 3 and r.strlen(P + "a") == 3, "APPEND/STRLEN")
check(r.exists(P + "a", P + "b", P + "missing") == 2, "EXISTS")
check(r.delete(P + "a", P + "missing") == 1, "DEL")
check(r.type(P + "s") in ("string", b"string"), "TYPE")

# Large and binary-safe values (and keys).
big = os.urandom(1 << 20)
check(r.set(P + "big", big) is True and r.get(P + "big") == big, "1 MiB value")
check(r.strlen(P + "big") == 1 << 20, "STRLEN of 1 MiB")
bkey = P.encode() + bytes(range(256))
bval = bytes(range(256)) * 4 + b"\r\n$-1\r\n\x00"
check(r.set(bkey, bval) is True and r.get(bkey) == bval, "binary key and value")

# Expiry.
check(r.set(P + "e", "v", px=300) is True, "SET PX")
check(0 < r.pttl(P + "e") <= 300, "PTTL")
check(r.expire(P + "s", 100) is True and 95 <= r.ttl(P + "s") <= 100, "EXPIRE/TTL")
check(r.persist(P + "s") is True and r.ttl(P + "s") == -1, "PERSIST")
time.sleep(0.5)
check(r.get(P + "e") is None and r.ttl(P + "e") == -2, "expired key gone")

# Pipelines: 2,000 commands in one round trip, replies in order.
p = r.pipeline(transaction=False)
for i in range(1000):
    p.set(f"{P}p{i}", i)
    p.get(f"{P}p{i}")
out = p.execute()
check(out == [x for i in range(1000) for x in (True, str(i).encode())], "pipeline of 2,000")

# Transactions: MULTI/EXEC through pipeline(transaction=True).
p = r.pipeline(transaction=True)
p.set(P + "t", 1).incr(P + "t").hset(P + "th", mapping={"f": "v"}).hgetall(P + "th").get(P + "t")
check(p.execute() == [True, 2, 1, {b"f": b"v"}, b"2"], "MULTI/EXEC")
# A command that fails while running: its error is in EXEC's reply, the others ran.
p = r.pipeline(transaction=True)
p.set(P + "tx", "x").incr(P + "tx").get(P + "tx")
res = p.execute(raise_on_error=False)
check(res[0] is True and isinstance(res[1], redis.exceptions.ResponseError) and res[2] == b"x", f"EXEC with an error: {res}")
provoked += 1
# An unknown command queued: the whole transaction is refused (EXECABORT), nothing ran.
p = r.pipeline(transaction=True)
p.set(P + "never", 1).execute_command("NOSUCHCOMMAND", "x")
expect_error(p.execute, "NOSUCHCOMMAND", "EXECABORT")
provoked += 1  # the unknown command itself, then EXECABORT
check(r.exists(P + "never") == 0, "an aborted transaction changes nothing")

# Hashes.
check(r.hset(P + "h", mapping={"a": "1", "b": "2", "c": "3"}) == 3, "HSET")
check(r.hset(P + "h", "a", "10") == 0, "HSET existing field")
check(r.hget(P + "h", "a") == b"10" and r.hget(P + "h", "zz") is None, "HGET")
check(r.hmget(P + "h", ["b", "zz", "c"]) == [b"2", None, b"3"], "HMGET")
check(r.hgetall(P + "h") == {b"a": b"10", b"b": b"2", b"c": b"3"}, "HGETALL")
check(r.hincrby(P + "h", "a", 5) == 15, "HINCRBY")
check(r.hlen(P + "h") == 3 and r.hexists(P + "h", "b") is True and r.hexists(P + "h", "zz") is False, "HLEN/HEXISTS")
check(r.hdel(P + "h", "b", "zz") == 1 and r.hlen(P + "h") == 2, "HDEL")
check(r.hset(P + "hb", bkey, big) == 1 and r.hget(P + "hb", bkey) == big, "binary field, 1 MiB hash value")
expect_error(lambda: r.hget(P + "s", "f"), "WRONGTYPE", "HGET on a string")
expect_error(lambda: r.get(P + "h"), "WRONGTYPE", "GET on a hash")

# An unknown command: an error reply, and the connection keeps working.
expect_error(lambda: r.execute_command("NOSUCHCOMMAND", "a", "b"), "unknown command", "unknown command")
check(r.ping() is True, "PING after errors")

# With RESP3, redis-py asks each new connection for `CLIENT MAINT_NOTIFICATIONS ON ...` (a
# Redis Enterprise feature) and carries on when the server refuses, as Redis 7 does.
if proto == 3:
    provoked += r.connection_pool._created_connections
r.close()
print(f"redis-py {redis.__version__} protocol {proto}: ok")
print(f"provoked errors: {provoked}")
