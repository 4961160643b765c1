//! Command-line behaviour of both binaries that needs neither root nor a lab: help text, bad
//! input (a clean error, never a panic), and the server's ready file and --duration exit on
//! loopback.

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const SERVER: &str = env!("CARGO_BIN_EXE_rr-server");
const BENCH: &str = env!("CARGO_BIN_EXE_rr-bench");

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
    ];
    for (exe, opts) in [(SERVER, &server[..]), (BENCH, &bench[..])] {
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
    }
}

#[test]
fn bad_input_fails_cleanly() {
    // (binary, args, expected exit status, expected text)
    let cases: &[(&str, &[&str], i32, &str)] = &[
        (BENCH, &[], 2, "--connect"),
        (BENCH, &["--connect", "1.2.3.4"], 2, "invalid value"),
        (BENCH, &["--connect", "127.0.0.1:1", "--duration", "soon"], 2, "invalid duration"),
        (BENCH, &["--connect", "127.0.0.1:1", "--rate", "-3"], 1, "--rate must be a positive number"),
        (BENCH, &["--connect", "127.0.0.1:1", "--depth", "0"], 1, "--depth"),
        (BENCH, &["--connect", "127.0.0.1:1", "--resp-size", "9"], 1, "must equal --req-size"),
        (BENCH, &["--connect", "127.0.0.1:1", "--backend", "xsk"], 1, "needs --iface"),
        (BENCH, &["--connect", "127.0.0.1:1", "--addr", "10.0.0.1/99"], 2, "prefix length"),
        (
            BENCH,
            &["--connect", "127.0.0.1:1", "--warmup", "0", "--duration", "1s", "--connect-timeout", "2s"],
            1,
            "established",
        ),
        (SERVER, &["--backend", "xsk"], 1, "needs --iface"),
        (SERVER, &["--backend", "xsk", "--iface", "lo", "--ring-size", "1000"], 1, "power of two"),
        (SERVER, &["--service", "redis"], 2, "invalid value"),
        (SERVER, &["--port", "70000"], 2, "invalid value"),
        (SERVER, &["--attach", "sideways"], 2, "unknown attach mode"),
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
