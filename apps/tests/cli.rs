//! Command-line behaviour of the binaries that needs neither root nor a lab: help text, one
//! option style, bad input (a usage error with exit status 2, never a panic), the server's
//! ready file and --duration exit, and its live figures (interval lines, SIGUSR1, the
//! Prometheus endpoint) on loopback.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const SERVER: &str = env!("CARGO_BIN_EXE_rr-server");
const BENCH: &str = env!("CARGO_BIN_EXE_rr-bench");
const DEMO: &str = env!("CARGO_BIN_EXE_rr-demo");

fn run(exe: &str, args: &[&str]) -> Output {
    Command::new(exe).args(args).stdin(Stdio::null()).output().expect("run binary")
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

#[test]
fn help_explains_every_option() {
    let server = [
        "--backend",
        "--service",
        "--iface",
        "--addr",
        "--port",
        "--queue",
        "--attach",
        "--batch",
        "--tx-budget",
        "--xmit-batch",
        "--ring-size",
        "--frames",
        "--syn-shed",
        "--busy-poll",
        "--busy-budget",
        "--max-conns",
        "--buffer",
        "--bind",
        "--duration",
        "--ready-file",
        "--json",
        "--max-frame",
        "--write-high-water",
        "--no-tune",
        "--stats-interval",
        "--metrics",
        "--recovery",
        "--rto-min",
        "--rto-max",
        "--rto-initial",
        "--no-tail-probe",
        "--ack-delay",
        "--ack-delay-max",
        "--fault-rx-drop",
        "--fault-tx-drop",
    ];
    let bench = [
        "--backend",
        "--connect",
        "--service",
        "--conns",
        "--depth",
        "--req-size",
        "--resp-size",
        "--duration",
        "--warmup",
        "--rate",
        "--max-requests",
        "--iface",
        "--addr",
        "--attach",
        "--batch",
        "--tx-budget",
        "--xmit-batch",
        "--ring-size",
        "--busy-poll",
        "--server-pid",
        "--json",
        "--lab",
        "--bind",
        "--quiet",
        "--recovery",
        "--rto-min",
        "--rto-max",
        "--rto-initial",
        "--no-tail-probe",
        "--ack-delay",
        "--ack-delay-max",
        "--fault-rx-drop",
        "--fault-tx-drop",
    ];
    let demo = ["--quick", "--rounds", "--duration", "--attach", "--out", "--only", "--peer-napi-thread", "--from-json"];
    for (exe, opts) in [(SERVER, &server[..]), (BENCH, &bench[..]), (DEMO, &demo[..])] {
        let o = run(exe, &["--help"]);
        assert!(o.status.success(), "{}", text(&o));
        let help = String::from_utf8_lossy(&o.stdout).to_string();
        for opt in opts {
            // Every option has its own line followed by an explanation.
            let is_option_line = |l: &str| {
                let l = l.trim_start();
                l.starts_with('-') && l.split([' ', ',']).any(|word| word == *opt)
            };
            let line = help.lines().position(is_option_line).unwrap_or_else(|| panic!("{exe}: {opt} missing"));
            let next = help.lines().nth(line + 1).unwrap_or_default();
            assert!(!next.trim().is_empty(), "{exe}: {opt} has no explanation");
        }
        assert!(help.contains("RUST_LOG"), "{exe}: the help does not say how to get the setup log");
        assert!(help.contains("2") && help.contains("Exit status"), "{exe}: exit statuses undocumented");
    }
}

#[test]
fn one_option_style() {
    for exe in [SERVER, BENCH, DEMO] {
        let help = String::from_utf8_lossy(&run(exe, &["--help"]).stdout).to_string();
        // Long options only, besides -h and -V: a short flag never means two things.
        for l in help.lines() {
            let l = l.trim_start();
            let b = l.as_bytes();
            if b.len() > 2 && b[0] == b'-' && b[1].is_ascii_alphanumeric() && matches!(b[2], b',' | b' ') {
                assert!(l.starts_with("-h,") || l.starts_with("-V,"), "{exe}: short flag in {l:?}");
            }
        }
        // Durations are humantime everywhere: a bare number is refused with a usage error.
        let extra: &[&str] = if exe == BENCH { &["--connect", "127.0.0.1:1"] } else { &[] };
        let o = run(exe, &[extra, &["--duration", "3"]].concat());
        assert_eq!(o.status.code(), Some(2), "{exe}: {}", text(&o));
        assert!(text(&o).contains("invalid duration"), "{exe}: {}", text(&o));
    }
    let help = String::from_utf8_lossy(&run(SERVER, &["--help"]).stdout).to_string();
    assert!(help.contains("[default: auto]"), "rr-server --attach defaults to auto");
}

#[test]
fn bad_input_fails_cleanly() {
    // (binary, args, expected exit status, expected text)
    let cases: &[(&str, &[&str], i32, &str)] = &[
        (BENCH, &[], 2, "--connect"),
        (BENCH, &["--connect", "1.2.3.4"], 2, "HOST:PORT"),
        (BENCH, &["--connect", "no-such-host.invalid:7000"], 2, "cannot resolve"),
        (BENCH, &["--connect", "127.0.0.1:1", "--duration", "soon"], 2, "invalid duration"),
        (BENCH, &["--connect", "127.0.0.1:1", "--rate", "-3"], 2, "--rate must be a positive number"),
        (BENCH, &["--connect", "127.0.0.1:1", "--depth", "0"], 2, "--depth"),
        (BENCH, &["--connect", "127.0.0.1:1", "--resp-size", "9"], 2, "must equal --req-size"),
        (BENCH, &["--connect", "127.0.0.1:1", "--backend", "xsk"], 2, "needs --iface"),
        (BENCH, &["--connect", "127.0.0.1:1", "--addr", "10.0.0.1/99"], 2, "prefix length"),
        (BENCH, &["--connect", "127.0.0.1:1", "-q"], 2, "unexpected argument"),
        (
            // Host names resolve: localhost, where nothing listens on port 1.
            BENCH,
            &["--connect", "localhost:1", "--warmup", "0", "--duration", "1s", "--connect-timeout", "2s"],
            1,
            "established",
        ),
        (SERVER, &["--backend", "xsk"], 2, "needs --iface"),
        (SERVER, &["--backend", "xsk", "--iface", "lo", "--ring-size", "1000"], 2, "power of two"),
        (SERVER, &["--service", "redis"], 2, "invalid value"),
        (SERVER, &["--port", "70000"], 2, "invalid value"),
        (SERVER, &["--attach", "sideways"], 2, "unknown attach mode"),
        (SERVER, &["--stats-interval", "0s", "--port", "0"], 2, "--stats-interval must be positive"),
        (SERVER, &["--metrics", "9100"], 2, "ADDR:PORT"),
        // Loss recovery: durations as everywhere, then Recovery::validate (before the device is touched).
        (SERVER, &["--backend", "xsk", "--iface", "lo", "--rto-min", "5"], 2, "invalid duration"),
        (SERVER, &["--backend", "xsk", "--iface", "lo", "--recovery", "linux"], 2, "invalid value"),
        (SERVER, &["--backend", "xsk", "--iface", "lo", "--rto-min", "0s"], 2, "loss recovery"),
        (SERVER, &["--backend", "xsk", "--iface", "lo", "--rto-max", "1ms"], 2, "loss recovery"),
        (SERVER, &["--backend", "xsk", "--iface", "lo", "--fault-rx-drop", "2"], 2, "outside 0..1"),
        (BENCH, &["--connect", "127.0.0.1:1", "--backend", "xsk", "--iface", "lo", "--ack-delay", "1m"], 2, "loss recovery"),
        (BENCH, &["--lab", "xsk", "--backend", "xsk", "--rto-max", "1ms"], 2, "loss recovery"),
        (DEMO, &["--rounds", "0"], 2, "--rounds"),
        (DEMO, &["--only", "no-such-case"], 2, "matches no case"),
        (DEMO, &["--attach", "sideways"], 2, "unknown attach mode"),
        (DEMO, &["--seconds", "3"], 2, "unexpected argument"),
        (DEMO, &["--from-json", "/nonexistent/results.json"], 1, "reading"),
    ];
    for (exe, args, code, needle) in cases {
        let o = run(exe, args);
        let t = text(&o);
        assert_eq!(o.status.code(), Some(*code), "{exe} {args:?}: {t}");
        assert!(t.contains(needle), "{exe} {args:?}: expected {needle:?} in: {t}");
        assert!(!t.contains("panicked"), "{exe} {args:?} panicked: {t}");
    }
}

#[test]
fn server_ready_file_and_duration_exit() {
    let ready: PathBuf = std::env::temp_dir().join(format!("rr-server-ready-{}", std::process::id()));
    std::fs::write(&ready, "stale").unwrap();
    let mut child = Command::new(SERVER)
        .args(["--backend", "kernel", "--port", "0", "--duration", "1s", "--ready-file"])
        .arg(&ready)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The stale file is replaced by the real address.
    let deadline = Instant::now() + Duration::from_secs(10);
    let addr = loop {
        if let Ok(s) = std::fs::read_to_string(&ready) {
            if s != "stale" {
                break s;
            }
        }
        assert!(Instant::now() < deadline, "no ready file");
        std::thread::sleep(Duration::from_millis(10));
    };
    assert!(addr.trim().starts_with("127.0.0.1:") && !addr.trim().ends_with(":0"), "{addr:?}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("rr-server ignored --duration");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("stopped by --duration"), "{}", text(&o));
    assert!(!ready.exists(), "the ready file is removed at exit");
}

/// Reads the child's stdout on a thread, so the test can wait for lines while it runs.
fn line_reader(stdout: std::process::ChildStdout) -> std::sync::mpsc::Receiver<String> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

fn http_get(addr: &str, path: &str) -> String {
    let mut c = TcpStream::connect(addr).expect("connect to the metrics endpoint");
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(c, "GET {path} HTTP/1.0\r\n\r\n").unwrap();
    let mut out = String::new();
    c.read_to_string(&mut out).unwrap();
    out
}

#[test]
fn server_live_figures_on_loopback() {
    let ready: PathBuf = std::env::temp_dir().join(format!("rr-server-live-{}", std::process::id()));
    let mut child = Command::new(SERVER)
        .args(["--backend", "kernel", "--port", "0", "--duration", "8s", "--stats-interval", "300ms"])
        .args(["--metrics", "127.0.0.1:0", "--ready-file"])
        .arg(&ready)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let lines = line_reader(child.stdout.take().unwrap());
    let mut seen = Vec::new();
    let mut wait_line = |pred: &dyn Fn(&str) -> bool, what: &str| -> String {
        let deadline = Instant::now() + Duration::from_secs(6);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match lines.recv_timeout(left) {
                Ok(l) => {
                    seen.push(l.clone());
                    if pred(&l) {
                        return l;
                    }
                }
                Err(_) => panic!("no {what} line; got:\n{}", seen.join("\n")),
            }
        }
    };
    let metrics_line = wait_line(&|l| l.contains("/metrics"), "metrics");
    let metrics = metrics_line.split("http://").nth(1).unwrap().trim_end_matches("/metrics").to_string();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !ready.exists() {
        assert!(Instant::now() < deadline, "no ready file");
        std::thread::sleep(Duration::from_millis(10));
    }
    let addr = std::fs::read_to_string(&ready).unwrap().trim().to_string();

    // Ten echo requests (u32 big-endian length, payload) on one connection.
    let mut c = TcpStream::connect(&addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    for i in 0..10u8 {
        c.write_all(&[0, 0, 0, 3, i, i, i]).unwrap();
        let mut resp = [0u8; 7];
        c.read_exact(&mut resp).unwrap();
        assert_eq!(resp, [0, 0, 0, 3, i, i, i]);
    }
    // An interval line with the requests, then the endpoint with the same counters.
    wait_line(&|l| l.starts_with("stats:") && l.contains("req/s") && l.contains("1 conns"), "stats");
    let deadline = Instant::now() + Duration::from_secs(5);
    let body = loop {
        let r = http_get(&metrics, "/metrics");
        if r.contains("rr_server_requests{backend=\"kernel\",service=\"echo\"} 10\n") {
            break r;
        }
        assert!(Instant::now() < deadline, "the endpoint never showed 10 requests:\n{r}");
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(body.starts_with("HTTP/1.0 200 OK"), "{body}");
    assert!(body.contains("text/plain; version=0.0.4"), "{body}");
    for name in ["rr_server_connections{", "rr_server_accepted{", "rr_server_bytes_in{", "rr_server_cpu_s{"] {
        assert!(body.contains(name), "{name} missing:\n{body}");
    }
    assert!(http_get(&metrics, "/other").starts_with("HTTP/1.0 404"));

    // SIGUSR1: every counter once, and the server keeps running.
    // SAFETY: kill(2) on our own child, which has not been reaped.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGUSR1) }, 0);
    wait_line(&|l| l.starts_with("counters (SIGUSR1)"), "SIGUSR1 dump");
    wait_line(&|l| l.trim() == "requests 10", "requests counter");
    assert!(child.try_wait().unwrap().is_none(), "SIGUSR1 stopped the server");
    drop(c);
    // SAFETY: as above.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let st = child.wait().unwrap();
    assert!(st.success(), "{st}");
}

/// Voluntary context switches of every thread of `pid` so far: a sleeping loop that wakes up
/// (a poll timeout) makes one per wake.
fn wakeups(pid: u32) -> u64 {
    let mut n = 0;
    for t in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap().flatten() {
        let status = std::fs::read_to_string(t.path().join("status")).unwrap_or_default();
        for l in status.lines() {
            if let Some(v) = l.strip_prefix("voluntary_ctxt_switches:") {
                n += v.trim().parse::<u64>().unwrap();
            }
        }
    }
    n
}

#[test]
fn an_idle_server_sleeps_until_a_signal_ends_it() {
    for (threads, sig, extra) in [
        ("1", libc::SIGINT, &[][..]),
        ("2", libc::SIGTERM, &[][..]),
        // A far deadline is one timer, not a wake-up now and then.
        ("1", libc::SIGTERM, &["--duration", "60s"][..]),
    ] {
        let what = format!("--threads {threads} {extra:?}, signal {sig}");
        let ready: PathBuf = std::env::temp_dir().join(format!("rr-server-idle-{}-{threads}-{sig}", std::process::id()));
        let mut child = Command::new(SERVER)
            .args(["--backend", "kernel", "--port", "0", "--threads", threads, "--ready-file"])
            .arg(&ready)
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while !ready.exists() {
            assert!(Instant::now() < deadline, "{what}: no ready file");
            std::thread::sleep(Duration::from_millis(10));
        }
        // Idle: no connection, no deadline within the second. A loop that checked for a stop
        // on a 10 ms timeout would wake about 100 times.
        std::thread::sleep(Duration::from_millis(200));
        let before = wakeups(child.id());
        std::thread::sleep(Duration::from_secs(1));
        let woke = wakeups(child.id()) - before;
        assert!(woke <= 5, "{what}: the idle server woke {woke} times in a second");
        let t0 = Instant::now();
        // SAFETY: kill(2) on our own child, which has not been reaped.
        assert_eq!(unsafe { libc::kill(child.id() as i32, sig) }, 0);
        while child.try_wait().unwrap().is_none() {
            if t0.elapsed() > Duration::from_secs(10) {
                let _ = child.kill();
                panic!("{what}: the signal did not stop the server");
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let took = t0.elapsed();
        let o = child.wait_with_output().unwrap();
        assert!(o.status.success(), "{what}: {}", text(&o));
        assert!(text(&o).contains("stopped by signal"), "{what}: {}", text(&o));
        assert!(took < Duration::from_secs(2), "{what}: stopping took {took:?}");
    }
}
