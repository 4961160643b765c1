//! `rr-server --service resp` against stock Redis clients in veth labs: the server runs in ns_a
//! on each backend, the clients in ns_b (the xsk server must be reached from a peer namespace:
//! its traffic never touches ns_a's kernel TCP). A redis-cli session runs the string commands
//! with checked replies, a `redis-cli -3` session the RESP3 replies, hashes and transactions;
//! redis-py, the Rust `redis` crate, redis-cli and redis-benchmark then run their compatibility
//! checks (resp_clients/), and redis-benchmark its tests with pipelining, many clients, random
//! keys and value sizes from 3 bytes to 1 MiB. Needs root, redis-tools and redis-py
//! (scripts/setup installs them).

mod common;
mod resp_clients;
use common::{scratch, Proc};

use std::io::Write;
use std::net::Ipv4Addr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use apps::ServerSummary;
use xsk_lab::lab::{Lab, LabConfig};

const SERVER: &str = env!("CARGO_BIN_EXE_rr-server");

fn lab(tag: &str) -> Lab {
    // SAFETY: geteuid has no preconditions.
    assert_eq!(unsafe { libc::geteuid() }, 0, "this integration test needs root");
    for tool in ["redis-cli", "redis-benchmark"] {
        let found = Command::new("sh").args(["-c", &format!("command -v {tool}")]).output().expect("sh");
        assert!(found.status.success(), "{tool} missing: install redis-tools (scripts/setup does)");
    }
    xsk_lab::lab::sweep_stale(tag);
    // The peer keeps veth's default offloads, as a user's would: the stack accepts the
    // partial checksums its kernel sends.
    Lab::new(&LabConfig::new(tag)).expect("lab")
}

fn start_server(lab: &Lab, dir: &Path, args: &[&str]) -> Proc {
    let ready = dir.join("ready");
    let json = dir.join("server.json");
    let service = if args.contains(&"--service") { vec![] } else { vec!["--service", "resp"] };
    let mut all = service;
    all.extend_from_slice(&[
        "--ready-file",
        ready.to_str().unwrap(),
        "--duration",
        "180s",
        "--json",
        json.to_str().unwrap(),
    ]);
    all.extend_from_slice(args);
    let mut p = Proc::spawn(&lab.ns_a, SERVER, &all, dir, "server", Stdio::null());
    p.wait_file(&ready, Duration::from_secs(30));
    p
}

/// Stops the server, checks a clean exit, and returns its summary and stdout.
fn stop_server(lab: &Lab, mut server: Proc) -> (ServerSummary, String) {
    // SAFETY: plain syscall on our own, not yet reaped child.
    unsafe { libc::kill(server.child.id() as i32, libc::SIGINT) };
    let st = server.wait(Duration::from_secs(20));
    assert!(st.success(), "rr-server exit {st}:\n{}", server.output());
    let link = lab.ns_a.run(&["ip", "-d", "link", "show", "dev", &lab.if_a]).expect("ip link");
    assert!(!link.contains("prog/xdp"), "XDP program left on {}", lab.if_a);
    let json = server.sibling("server.json");
    let s: ServerSummary = serde_json::from_slice(&std::fs::read(&json).expect("server --json")).unwrap();
    assert_eq!((s.protocol_errors, s.io_errors), (0, 0), "{s:?}\n{}", server.output());
    assert_eq!(s.accepted, s.closed, "{s:?}");
    (s, server.stdout())
}

/// The redis-cli session: (command line typed, expected reply as redis-cli prints it without
/// --raw). `{int A..B}` matches any integer in the range, `{contains X}` a line containing X.
/// `None` for the command is a pause, so expiry can happen.
const SESSION: &[(Option<&str>, &str)] = &[
    (Some("PING"), "PONG"),
    (Some("PING hello"), "\"hello\""),
    (Some("ECHO \"hi there\""), "\"hi there\""),
    (Some("SELECT 0"), "OK"),
    (Some("SELECT 1"), "(error) ERR DB index is out of range"),
    (Some("SET k v"), "OK"),
    (Some("GET k"), "\"v\""),
    (Some("GET missing"), "(nil)"),
    (Some("SET k v2 XX"), "OK"),
    (Some("SET k v3 NX"), "(nil)"),
    (Some("GET k"), "\"v2\""),
    (Some("SET n 10 EX 100"), "OK"),
    (Some("TTL n"), "(integer) 100"),
    (Some("PTTL n"), "(integer) {int 95000..100000}"),
    (Some("INCR n"), "(integer) 11"),
    (Some("INCRBY n 5"), "(integer) 16"),
    (Some("DECR n"), "(integer) 15"),
    (Some("DECRBY n 20"), "(integer) -5"),
    (Some("TTL n"), "(integer) {int 95..100}"),
    (Some("INCR k"), "(error) ERR value is not an integer or out of range"),
    (Some("GETSET n 7"), "\"-5\""),
    (Some("TTL n"), "(integer) -1"),
    (Some("APPEND n 89"), "(integer) 3"),
    (Some("STRLEN n"), "(integer) 3"),
    (Some("GET n"), "\"789\""),
    (Some("MSET a 1 b 2 c 3"), "OK"),
    (Some("MGET a b nope c"), "1) \"1\"\n2) \"2\"\n3) (nil)\n4) \"3\""),
    (Some("EXISTS a b nope a"), "(integer) 3"),
    (Some("DEL a b nope"), "(integer) 2"),
    (Some("EXISTS a b"), "(integer) 0"),
    (Some("EXPIRE c 100"), "(integer) 1"),
    (Some("TTL c"), "(integer) {int 95..100}"),
    (Some("PERSIST c"), "(integer) 1"),
    (Some("TTL c"), "(integer) -1"),
    (Some("PEXPIRE c 300"), "(integer) 1"),
    (Some("SET gone x PX 300"), "OK"),
    (Some("DBSIZE"), "(integer) 4"),
    (None, ""),
    // `gone` is never touched again: only the periodic sweep can have removed it.
    (Some("INFO keyspace"), "# Keyspace\ndb0:keys=2,expires=0,avg_ttl=0"),
    (Some("GET c"), "(nil)"),
    (Some("TTL c"), "(integer) -2"),
    (Some("DBSIZE"), "(integer) 2"),
    (Some("INFO stats"), "# Stats\ntotal_connections_received:{int 1..9}\ntotal_commands_processed:{int 40..80}\nexpired_keys:2\nrejected_writes:0"),
    (Some("CONFIG GET save"), "1) \"save\"\n2) \"\""),
    (Some("CONFIG GET appendonly"), "1) \"appendonly\"\n2) \"no\""),
    (Some("COMMAND COUNT"), "(integer) 53"),
    (Some("HELLO 4"), "(error) NOPROTO unsupported protocol version"),
    (Some("HELLO 2"), " 1) \"server\"\n 2) \"redis\"\n 3) \"version\"\n 4) \"7.2.0\"\n 5) \"proto\"\n 6) (integer) 2\n 7) \"id\"\n 8) (integer) {int 0..4294967295}\n 9) \"mode\"\n10) \"standalone\"\n11) \"role\"\n12) \"master\"\n13) \"modules\"\n14) (empty array)"),
    (Some("LPUSH l a"), "(error) ERR unknown command 'LPUSH', with args beginning with: 'l' 'a'"),
    (Some("GET"), "(error) ERR wrong number of arguments for 'get' command"),
    (Some("FLUSHDB"), "OK"),
    (Some("SET z 1"), "OK"),
    (Some("FLUSHALL"), "OK"),
    (Some("DBSIZE"), "(integer) 0"),
];

/// Error replies a session provokes on purpose: the server must count exactly these.
fn session_errors(session: &[(Option<&str>, &str)]) -> u64 {
    session.iter().filter(|(_, w)| w.starts_with("(error)")).count() as u64
}

fn line_matches(want: &str, got: &str) -> bool {
    if let Some(inner) = want.find("{contains ").map(|i| &want[i + 10..want.len() - 1]) {
        return got.contains(inner);
    }
    if let Some(i) = want.find("{int ") {
        let (prefix, spec) = (&want[..i], &want[i + 5..want.len() - 1]);
        let (lo, hi) = spec.split_once("..").unwrap();
        let Some(rest) = got.strip_prefix(prefix) else {
            return false;
        };
        return rest.parse::<i64>().is_ok_and(|v| v >= lo.parse::<i64>().unwrap() && v <= hi.parse::<i64>().unwrap());
    }
    want == got
}

/// Types `session` into one interactive-style redis-cli (commands on stdin, replies in the
/// human format; `-3`: RESP3), pausing where the script says, and checks every reply line.
fn redis_cli_session(lab: &Lab, dir: &Path, host: Ipv4Addr, port: u16, session: &[(Option<&str>, &str)], resp3: bool) {
    let port_s = port.to_string();
    let host_s = host.to_string();
    let args: Vec<&str> = ["--no-raw", "-h", &host_s, "-p", &port_s].into_iter().chain(resp3.then_some("-3")).collect();
    let name = if resp3 { "redis-cli-3" } else { "redis-cli" };
    let mut cli = Proc::spawn(&lab.ns_b, "redis-cli", &args, dir, name, Stdio::piped());
    let mut stdin = cli.child.stdin.take().unwrap();
    for (cmd, _) in session {
        match cmd {
            Some(c) => writeln!(stdin, "{c}").unwrap(),
            None => {
                stdin.flush().unwrap();
                // Past the 300 ms deadlines plus three 100 ms sweeps.
                std::thread::sleep(Duration::from_millis(700));
            }
        }
    }
    drop(stdin);
    let out = cli.finish(Duration::from_secs(30));
    let got: Vec<&str> = out.lines().map(str::trim_end).collect();
    let want: Vec<(&str, &str)> = session
        .iter()
        .filter_map(|(c, w)| c.map(|c| (c, *w)))
        .flat_map(|(c, w)| w.lines().map(move |l| (c, l)))
        .collect();
    for (i, (cmd, w)) in want.iter().enumerate() {
        let g = got.get(i).copied().unwrap_or("<missing>");
        assert!(line_matches(w, g), "reply line {i} to {cmd:?}: want {w:?}, got {g:?}\nwhole transcript:\n{out}");
    }
    assert_eq!(got.len(), want.len(), "extra output:\n{out}");
    if resp3 {
        return;
    }

    // QUIT is answered and the server closes: redis-cli's REPL would swallow it, so as an
    // argument (sent as given).
    let quit = Proc::spawn(&lab.ns_b, "redis-cli", &[&args[1..], &["QUIT"]].concat(), dir, "quit", Stdio::null());
    assert_eq!(quit.finish(Duration::from_secs(10)).trim(), "OK");
    let cmds = Proc::spawn(&lab.ns_b, "redis-cli", &[&args[1..], &["COMMAND"]].concat(), dir, "command", Stdio::null());
    let text = cmds.finish(Duration::from_secs(10));
    for name in ["get", "set", "mset", "pexpire", "hello", "hset", "multi", "exec", "client"] {
        assert!(text.lines().any(|l| l == name), "COMMAND lists {name}:\n{text}");
    }
}

/// Runs redis-benchmark in ns_b; returns the test names and requests/s from its CSV output.
fn redis_benchmark(lab: &Lab, dir: &Path, name: &str, host: Ipv4Addr, port: u16, args: &[&str]) -> Vec<(String, f64)> {
    let (host_s, port_s) = (host.to_string(), port.to_string());
    let mut all = vec!["-h", &host_s, "-p", &port_s, "--csv"];
    all.extend_from_slice(args);
    let p = Proc::spawn(&lab.ns_b, "redis-benchmark", &all, dir, name, Stdio::null());
    // redis-benchmark 7 exits non-zero at the first error reply, so success means none came.
    let out = p.finish(Duration::from_secs(120));
    let rows: Vec<(String, f64)> = out
        .lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split("\",\"").map(|f| f.trim_matches('"')).collect();
            Some((f.first()?.to_string(), f.get(1)?.parse().ok()?))
        })
        .collect();
    eprintln!("{name}: {rows:?}");
    rows
}

fn benchmarks(lab: &Lab, dir: &Path, host: Ipv4Addr, port: u16) -> u64 {
    let mut total = 0;
    let tests = "ping_inline,ping_mbulk,set,get,incr,mset";
    let n = 20_000;
    let rows = redis_benchmark(
        lab,
        dir,
        "bench-small",
        host,
        port,
        &["-t", tests, "-n", &n.to_string(), "-c", "50", "-P", "16", "-r", "10000", "-d", "3"],
    );
    let names: Vec<&str> = rows.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["PING_INLINE", "PING_MBULK", "SET", "GET", "INCR", "MSET (10 keys)"], "{rows:?}");
    assert!(rows.iter().all(|(_, rps)| *rps > 0.0), "{rows:?}");
    total += 6 * n;
    // 64 KiB values: many segments per request and reply, several clients, pipelined.
    let rows = redis_benchmark(
        lab,
        dir,
        "bench-64k",
        host,
        port,
        &["-t", "set,get", "-n", "600", "-c", "8", "-P", "4", "-r", "50", "-d", "65536"],
    );
    assert_eq!(rows.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(), ["SET", "GET"], "{rows:?}");
    total += 2 * 600;
    // Then one known key (`-r 1` makes it key:000000000000), stored at its full length.
    redis_benchmark(lab, dir, "bench-one", host, port, &["-t", "set", "-n", "1", "-c", "1", "-r", "1", "-d", "1000"]);
    total += 1;
    let (host_s, port_s) = (host.to_string(), port.to_string());
    let len = Proc::spawn(
        &lab.ns_b,
        "redis-cli",
        &["-h", &host_s, "-p", &port_s, "STRLEN", "key:000000000000"],
        dir,
        "len",
        Stdio::null(),
    );
    assert_eq!(len.finish(Duration::from_secs(10)).trim_end(), "1000");
    total
}

/// The `resp: N commands, E error replies, ...` line of the server's exit output.
fn resp_counts(stdout: &str) -> (u64, u64) {
    let line = stdout.lines().find(|l| l.starts_with("resp: ")).unwrap_or_else(|| panic!("no resp line:\n{stdout}"));
    let nums: Vec<u64> = line.split(|c: char| !c.is_ascii_digit()).filter_map(|w| w.parse().ok()).collect();
    (nums[0], nums[1])
}

fn check_backend(lab: &Lab, dir: &Path, server: Proc, host: Ipv4Addr, port: u16) {
    redis_cli_session(lab, dir, host, port, SESSION, false);
    redis_cli_session(lab, dir, host, port, resp_clients::SESSION_RESP3, true);
    let mut provoked = session_errors(SESSION) + session_errors(resp_clients::SESSION_RESP3);
    provoked += resp_clients::redis_py(lab, dir, host, port);
    provoked += resp_clients::rust_redis(lab, host, port);
    resp_clients::redis_cli_values_and_pipe(lab, dir, host, port);
    let (more_requests, more_errors) = resp_clients::redis_benchmark_more(lab, dir, host, port);
    provoked += more_errors;
    let bench_requests = benchmarks(lab, dir, host, port) + more_requests;
    let (summary, stdout) = stop_server(lab, server);
    let (commands, errors) = resp_counts(&stdout);
    assert_eq!(errors, provoked, "only the clients' deliberate errors:\n{stdout}");
    assert!(commands >= bench_requests + SESSION.len() as u64 - 1, "{commands} commands:\n{stdout}");
    assert!(summary.requests >= commands, "{summary:?}");
}

#[test]
fn redis_tools_against_xsk_server() {
    let lab = lab("rsx");
    let dir = scratch("resp", "xsk");
    let o = lab.addr_a.octets();
    let ip = Ipv4Addr::new(o[0], o[1], o[2], 100);
    let cidr = format!("{ip}/{}", lab.prefix_len);
    let server =
        start_server(&lab, &dir, &["--backend", "xsk", "--iface", &lab.if_a, "--addr", &cidr, "--port", "6390"]);
    check_backend(&lab, &dir, server, ip, 6390);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn redis_tools_against_kernel_server() {
    let lab = lab("rsk");
    let dir = scratch("resp", "kernel");
    let addr = lab.addr_a.to_string();
    let server = start_server(&lab, &dir, &["--backend", "kernel", "--bind", &addr, "--port", "6391"]);
    check_backend(&lab, &dir, server, lab.addr_a, 6391);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn redis_tools_against_uring_server() {
    let lab = lab("rsu");
    let dir = scratch("resp", "uring");
    let addr = lab.addr_a.to_string();
    let server = start_server(&lab, &dir, &["--backend", "uring", "--bind", &addr, "--port", "6392"]);
    check_backend(&lab, &dir, server, lab.addr_a, 6392);
    let _ = std::fs::remove_dir_all(&dir);
}

// ---------------------------------------------------------------------------------------------
// --threads 2 on both sides
// ---------------------------------------------------------------------------------------------

const BENCH: &str = env!("CARGO_BIN_EXE_rr-bench");

/// Per-thread request and connection counts from the server's `thread i: N requests, M
/// connections` lines.
fn thread_counts(stdout: &str) -> Vec<(u64, u64)> {
    stdout
        .lines()
        .filter(|l| l.starts_with("rr-server: thread "))
        .map(|l| {
            let nums: Vec<u64> = l.split(|c: char| !c.is_ascii_digit()).filter_map(|w| w.parse().ok()).collect();
            (nums[1], nums[2])
        })
        .collect()
}

/// rr-bench --threads 2 from ns_b against a --threads 2 server; both server threads must have
/// served connections, and the merged report must add up.
fn two_threads(lab: &Lab, dir: &Path, server: Proc, connect: &str) -> (ServerSummary, String) {
    let json = dir.join("bench.json");
    let args = [
        "--backend",
        "kernel",
        "--connect",
        connect,
        "--threads",
        "2",
        "--conns",
        "16",
        "--duration",
        "1s",
        "--warmup",
        "300ms",
        "--quiet",
        "--json",
        json.to_str().unwrap(),
    ];
    let out = Proc::spawn(&lab.ns_b, BENCH, &args, dir, "bench", Stdio::null()).finish(Duration::from_secs(60));
    let r: apps::BenchResult = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!((r.conns, r.errors, r.lost), (16, 0, 0), "{out}");
    assert!(r.requests > 0 && r.rps > 0.0, "{r:?}");
    let (summary, stdout) = stop_server(lab, server);
    let per = thread_counts(&stdout);
    assert_eq!(per.len(), 2, "{stdout}");
    // 16 flows hashed over two listeners/queues: both get some (all on one: p = 2^-15).
    assert!(per.iter().all(|&(req, conns)| req > 0 && conns > 0), "{per:?}\n{stdout}");
    assert_eq!(per.iter().map(|p| p.0).sum::<u64>(), summary.requests);
    // Warm-up and measured run each open 16 connections.
    assert_eq!(summary.accepted, 32, "{summary:?}");
    assert!(summary.requests >= r.requests, "{summary:?} {r:?}");
    (summary, stdout)
}

#[test]
fn two_threads_kernel_server_and_client() {
    let lab = lab("rtk");
    let dir = scratch("resp", "threads-kernel");
    let addr = lab.addr_a.to_string();
    let server = start_server(
        &lab,
        &dir,
        &["--service", "echo", "--backend", "kernel", "--bind", &addr, "--port", "7400", "--threads", "2"],
    );
    two_threads(&lab, &dir, server, &format!("{addr}:7400"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn two_threads_xsk_server_shards() {
    // SAFETY: geteuid has no preconditions.
    assert_eq!(unsafe { libc::geteuid() }, 0, "this integration test needs root");
    xsk_lab::lab::sweep_stale("rtx");
    // Two queues on both veth ends: the peer's kernel spreads flows over its TX queues, which
    // are the xsk side's RX queues, one stack shard each. Native (drv) XDP: veth's generic
    // path reports every frame on queue 0.
    let lab = Lab::new(&LabConfig { peer_queues: Some(2), ..LabConfig::new("rtx") }).expect("lab");
    let dir = scratch("resp", "threads-xsk");
    let o = lab.addr_a.octets();
    let ip = Ipv4Addr::new(o[0], o[1], o[2], 100);
    let cidr = format!("{ip}/{}", lab.prefix_len);
    let args = [
        "--service",
        "echo",
        "--backend",
        "xsk",
        "--iface",
        &lab.if_a,
        "--addr",
        &cidr,
        "--port",
        "7401",
        "--threads",
        "2",
        "--attach",
        "drv",
    ];
    let server = start_server(&lab, &dir, &args);
    let (summary, stdout) = two_threads(&lab, &dir, server, &format!("{ip}:7401"));
    let shards = summary.xsk.as_ref().and_then(|x| x["shards"].as_array().cloned()).expect("per-shard stats");
    assert_eq!(shards.len(), 2, "{stdout}");
    for s in &shards {
        assert_eq!(s["audit"]["app"].as_u64(), Some(0), "frame audit per shard: {s}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
