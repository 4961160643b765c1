//! flood-bench --quick end to end (needs root): 5 s per case, 2,000 idle connections, the
//! stack and the kernel backend each with and without the SYN flood. The tool itself fails
//! when the stack's RSS leaves the bound derived from its configuration or idle connections
//! are lost; this test also checks that the flood reached the server and that the cases
//! measured something.

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

const FLOOD: &str = env!("CARGO_BIN_EXE_flood-bench");

#[test]
fn help_names_the_knobs() {
    let out = Command::new(FLOOD).arg("--help").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for opt in ["--duration", "--quick", "--idle-conns", "--flood-pps", "--offlink-percent", "--case", "--json"] {
        assert!(text.contains(opt), "--help lacks {opt}:\n{text}");
    }
}

#[test]
fn bad_input_is_a_clean_error() {
    for args in [&["--duration", "0s"][..], &["--idle-conns", "40000", "--max-conns", "30000"], &["--case", "nope"]] {
        let out = Command::new(FLOOD).args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(if args[0] == "--case" { 2 } else { 1 }), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

#[test]
fn quick_flood_keeps_memory_bounded_and_connections_held() {
    // SAFETY: geteuid has no preconditions.
    assert_eq!(unsafe { libc::geteuid() }, 0, "this integration test needs root");
    let json = std::env::temp_dir().join(format!("flood-bench-test-{}.json", std::process::id()));
    let t = Instant::now();
    let out = Command::new(FLOOD).args(["--quick", "--quiet", "--json", json.to_str().unwrap()]).output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "flood-bench --quick failed:\n{text}");
    assert!(t.elapsed() < Duration::from_secs(180), "took {:?}", t.elapsed());
    let doc: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let _ = std::fs::remove_file(&json);
    let cases = doc["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 4, "{text}");
    let bound = doc["memory_bound"]["total_bytes"].as_u64().unwrap();
    for c in cases {
        let name = c["case"].as_str().unwrap();
        let u = |k: &str| c[k].as_u64().unwrap_or_else(|| panic!("{name}: {k} missing"));
        assert_eq!(u("idle_opened"), 2000, "{name}:\n{text}");
        assert!(c["samples"].as_array().unwrap().len() >= 4, "{name}: RSS sampled every second");
        assert!(u("rss_max_kib") > 0);
        // The established connection was served, before and after any stall.
        assert!(u("requests") > 0, "{name}:\n{text}");
        assert!(c["p99_us"].as_f64().unwrap() > 0.0);
        let drops = &c["drops"];
        if c["backend"] == "xsk" {
            assert!(u("rss_max_kib") * 1024 <= bound, "{name}:\n{text}");
            assert_eq!(u("idle_held"), 2000, "{name}:\n{text}");
            assert_eq!(c["server_stack"]["audit"]["error"], Value::Null, "{name}: frame audit");
        }
        if c["flood"] == true {
            assert!(u("syns_sent") > 10_000, "{name}:\n{text}");
            // The SYNs arrived: SYN cookies, evicted half-open sockets or frames dropped before
            // the stack (xsk), SYN cookies or queue drops (kernel).
            let seen: u64 = ["syn_cookies_sent", "syn_backlog", "xdp_rx_dropped", "SyncookiesSent", "TCPReqQFullDrop", "ListenDrops"]
                .iter()
                .filter_map(|k| drops[*k].as_u64())
                .sum();
            assert!(seen > 0, "{name}: no trace of the flood in {drops}");
        } else {
            assert_eq!(u("syns_sent"), 0);
        }
    }
}
