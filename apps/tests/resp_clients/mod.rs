//! The client libraries and tools people use, unchanged, against `rr-server --service resp`:
//! redis-py (pip's latest, default settings = RESP3, and protocol=2), the Rust `redis` crate
//! (RESP2 default and RESP3), redis-cli (RESP2 and `-3`: a RESP3 session, large and binary
//! values through `-x`, a 2,000-command `--pipe`), redis-benchmark (`-3`, hashes, expiry,
//! 1 MiB values, an unknown command). Each runs in the lab's client namespace. Every function
//! returns the error replies it provoked on purpose, so the server's error counter can be
//! checked to the unit.

pub mod rust_redis;

use std::fs::File;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use xsk_lab::lab::Lab;

use super::common::Proc;

/// The interpreter with redis-py: `REDIS_PY_PYTHON`, else the venv scripts/setup makes.
fn python() -> PathBuf {
    let p = std::env::var_os("REDIS_PY_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/redis-py/bin/python"));
    assert!(p.exists(), "{} missing: scripts/setup installs redis-py (pip) there", p.display());
    p
}

/// redis-py's checks (tests/resp_clients/redis_py_check.py) with its default settings (RESP3)
/// and with protocol=2.
pub fn redis_py(lab: &Lab, dir: &Path, host: impl std::fmt::Display, port: u16) -> u64 {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/resp_clients/redis_py_check.py");
    let py = python();
    let mut provoked = 0;
    for proto in ["3", "2"] {
        let args = [script.to_str().unwrap(), &host.to_string(), &port.to_string(), proto];
        let p = Proc::spawn(&lab.ns_b, py.to_str().unwrap(), &args, dir, &format!("redis-py-{proto}"), Stdio::null());
        let out = p.finish(Duration::from_secs(120));
        eprint!("{out}");
        let n = out.lines().find_map(|l| l.strip_prefix("provoked errors: ")).expect("redis-py's count");
        provoked += n.trim().parse::<u64>().unwrap();
    }
    provoked
}

/// The Rust `redis` crate's checks, in a thread inside the client namespace.
pub fn rust_redis(lab: &Lab, host: Ipv4Addr, port: u16) -> u64 {
    let mut provoked = 0;
    for resp3 in [false, true] {
        let h = host.to_string();
        let r = lab.ns_b.run_in(move || rust_redis::check(&h, port, resp3)).expect("thread in the client namespace");
        provoked += r.unwrap_or_else(|e| panic!("redis crate (resp3: {resp3}): {e}"));
    }
    provoked
}

/// What `redis-cli -3` prints for a RESP3 session (maps as `1# k => v`, null as `(nil)`),
/// in the format of [`super::SESSION`].
pub const SESSION_RESP3: &[(Option<&str>, &str)] = &[
    (Some("PING"), "PONG"),
    (Some("HELLO"), "1# \"server\" => \"redis\"\n2# \"version\" => \"7.2.0\"\n3# \"proto\" => (integer) 3\n4# \"id\" => (integer) {int 0..4294967295}\n5# \"mode\" => \"standalone\"\n6# \"role\" => \"master\"\n7# \"modules\" => (empty array)"),
    (Some("SET k3 v"), "OK"),
    (Some("GET nope"), "(nil)"),
    (Some("HSET h3 a 1"), "(integer) 1"),
    (Some("HGETALL h3"), "1# \"a\" => \"1\""),
    (Some("HSET h3 b 2 c 3"), "(integer) 2"),
    (Some("HMGET h3 b zz"), "1) \"2\"\n2) (nil)"),
    (Some("HINCRBY h3 a 5"), "(integer) 6"),
    (Some("HDEL h3 b c zz"), "(integer) 2"),
    (Some("HEXISTS h3 b"), "(integer) 0"),
    (Some("HLEN h3"), "(integer) 1"),
    (Some("MULTI"), "OK"),
    (Some("SET k3 v2"), "QUEUED"),
    (Some("HGET h3 a"), "QUEUED"),
    (Some("GET nope"), "QUEUED"),
    (Some("EXEC"), "1) OK\n2) \"6\"\n3) (nil)"),
    (Some("MULTI"), "OK"),
    (Some("SET k3 v3"), "QUEUED"),
    (Some("NOSUCH x"), "(error) ERR unknown command 'NOSUCH', with args beginning with: 'x'"),
    (Some("EXEC"), "(error) EXECABORT Transaction discarded because of previous errors."),
    (Some("GET k3"), "\"v2\""),
    (Some("SET e3 v PX 300"), "OK"),
    (None, ""),
    (Some("GET e3"), "(nil)"),
    (Some("CONFIG GET save"), "1# \"save\" => \"\""),
    (Some("CLIENT SETNAME cli3"), "OK"),
    (Some("CLIENT GETNAME"), "\"cli3\""),
    (Some("INFO replication"), "# Replication\nrole:master\nconnected_slaves:0"),
    (Some("GET h3"), "(error) WRONGTYPE Operation against a key holding the wrong kind of value"),
    (Some("NOSUCH y"), "(error) ERR unknown command 'NOSUCH', with args beginning with: 'y'"),
    (Some("DEL k3 h3"), "(integer) 2"),
];

/// Large and binary-safe values through `redis-cli -x` (the value from stdin) and `--raw`
/// GET, and a `--pipe` of 2,000 SET/HSET commands, in RESP2 and RESP3 (`-3`; the pipe starts
/// with HELLO 3).
pub fn redis_cli_values_and_pipe(lab: &Lab, dir: &Path, host: Ipv4Addr, port: u16) {
    let (host_s, port_s) = (host.to_string(), port.to_string());
    let big: Vec<u8> = (0..1u32 << 20).map(|i| (i.wrapping_mul(2_654_435_761) >> 11) as u8).collect();
    let mut binary: Vec<u8> = (0..=255u8).collect();
    binary.extend_from_slice(b"\r\n*1\r\n$-1\r\n\0 end");
    for (proto, flag) in [("2", None), ("3", Some("-3"))] {
        let base: Vec<&str> = ["-h", &host_s, "-p", &port_s].into_iter().chain(flag).collect();
        for (name, value) in [("big", &big), ("bin", &binary)] {
            let file = dir.join(format!("{name}.value"));
            std::fs::write(&file, value).unwrap();
            let key = format!("cli{proto}:{name}");
            let set = [&base[..], &["-x", "SET", &key]].concat();
            let stdin = Stdio::from(File::open(&file).unwrap());
            let p = Proc::spawn(&lab.ns_b, "redis-cli", &set, dir, &format!("set-{name}-{proto}"), stdin);
            assert_eq!(p.finish(Duration::from_secs(30)).trim(), "OK");
            let get = [&base[..], &["--raw", "GET", &key]].concat();
            let tag = format!("get-{name}-{proto}");
            let p = Proc::spawn(&lab.ns_b, "redis-cli", &get, dir, &tag, Stdio::null());
            let out_file = p.sibling(&format!("{tag}.out"));
            p.finish(Duration::from_secs(30));
            let got = std::fs::read(out_file).unwrap();
            // --raw prints the value and a newline.
            assert!(got.len() == value.len() + 1 && got[..value.len()] == value[..], "{name} value, RESP{proto}");
        }
        let mut wire = Vec::new();
        let mut cmd = |args: &[&[u8]]| {
            wire.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
            for a in args {
                wire.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
                wire.extend_from_slice(a);
                wire.extend_from_slice(b"\r\n");
            }
        };
        if flag.is_some() {
            cmd(&[b"HELLO", b"3"]);
        }
        for i in 0..1000 {
            let key = format!("pipe{proto}:{i}");
            cmd(&[b"SET", key.as_bytes(), &binary]);
            cmd(&[b"HSET", format!("pipeh{proto}").as_bytes(), key.as_bytes(), b"v"]);
        }
        let file = dir.join("pipe.wire");
        std::fs::write(&file, &wire).unwrap();
        let args = [&base[..], &["--pipe"]].concat();
        let stdin = Stdio::from(File::open(&file).unwrap());
        let p = Proc::spawn(&lab.ns_b, "redis-cli", &args, dir, &format!("pipe-{proto}"), stdin);
        let out = p.finish(Duration::from_secs(60));
        let replies = 2000 + usize::from(flag.is_some());
        assert!(out.contains(&format!("errors: 0, replies: {replies}")), "--pipe RESP{proto}:\n{out}");
    }
}

/// redis-benchmark beyond the RESP2 string tests: RESP3 (`-3`) with hashes, SET with a
/// deadline (a custom command), 1 MiB values, and an unknown command (redis-benchmark 7 stops
/// at the first error reply with a non-zero exit). Returns (requests sent, errors provoked).
pub fn redis_benchmark_more(lab: &Lab, dir: &Path, host: Ipv4Addr, port: u16) -> (u64, u64) {
    let (host_s, port_s) = (host.to_string(), port.to_string());
    let run = |name: &str, args: &[&str]| {
        let all = [&["-h", &host_s[..], "-p", &port_s, "--csv"][..], args].concat();
        Proc::spawn(&lab.ns_b, "redis-benchmark", &all, dir, name, Stdio::null())
    };
    let n = 20_000;
    let out = run("bench-resp3", &["-3", "-t", "set,get,hset", "-n", "20000", "-c", "20", "-P", "16", "-r", "10000"])
        .finish(Duration::from_secs(120));
    let tests: Vec<&str> = out.lines().skip(1).filter_map(|l| l.split(',').next()).collect();
    assert_eq!(tests, ["\"SET\"", "\"GET\"", "\"HSET\""], "{out}");
    let out =
        run("bench-hset", &["-t", "hset", "-n", "20000", "-c", "20", "-r", "10000"]).finish(Duration::from_secs(120));
    assert!(out.contains("\"HSET\""), "{out}");
    let ex = ["-3", "-n", "2000", "-c", "4", "-r", "1000", "SET", "ex:__rand_int__", "v", "EX", "100"];
    run("bench-ex", &ex).finish(Duration::from_secs(60));
    let big = ["-t", "set,get", "-n", "40", "-c", "2", "-d", "1048576", "-r", "4"];
    let out = run("bench-1m", &big).finish(Duration::from_secs(120));
    assert!(out.contains("\"GET\""), "{out}");
    let mut p = run("bench-unknown", &["-n", "10", "-c", "1", "NOSUCHCOMMAND", "x"]);
    let st = p.wait(Duration::from_secs(30));
    assert!(!st.success(), "redis-benchmark stops at an error reply:\n{}", p.output());
    assert!(p.output().contains("unknown command 'NOSUCHCOMMAND'"), "{}", p.output());
    (3 * n + n + 2000 + 80 + 1, 1)
}
