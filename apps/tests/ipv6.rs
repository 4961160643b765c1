//! Stock clients over IPv6 and IPv4 at once against `rr-server --service resp` in a veth lab
//! whose ends keep their default offloads: redis-cli over both families, on the xsk backend
//! with the kernel's addresses (`--addr shared`) and with dedicated ones
//! (`--addr A.B.C.D/LEN,X:Y::Z/LEN`), and on the kernel backend bound to 0.0.0.0 (both
//! families); redis-py over IPv6 while redis-cli runs over IPv4. Needs root, redis-cli
//! (redis-tools) and redis-py (scripts/setup).

mod common;
#[allow(dead_code)]
mod resp_clients;
use common::{scratch, Proc};

use std::net::Ipv6Addr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use apps::ServerSummary;
use xsk_lab::lab::{Lab, LabConfig};

const SERVER: &str = env!("CARGO_BIN_EXE_rr-server");
const PORT: u16 = 6390;

/// A lab with IPv6 on: the kernel's ::1 on `a` (`with_a`), ::2 on `b`, in a /64 of
/// 2001:2::/48 of its own.
fn lab(tag: &str, with_a: bool) -> (Lab, Ipv6Addr) {
    // SAFETY: geteuid has no preconditions.
    assert_eq!(unsafe { libc::geteuid() }, 0, "this integration test needs root");
    let found = Command::new("sh").args(["-c", "command -v redis-cli"]).output().expect("sh");
    assert!(found.status.success(), "redis-cli missing: install redis-tools (scripts/setup does)");
    xsk_lab::lab::sweep_stale(tag);
    let lab = Lab::new(&LabConfig { disable_ipv6: false, ..LabConfig::new(tag) }).expect("lab");
    let (a, _) = lab.add_ipv6(with_a).expect("IPv6 addresses");
    (lab, a)
}

fn start(lab: &Lab, dir: &Path, args: &[&str]) -> Proc {
    let ready = dir.join("ready");
    let json = dir.join("server.json");
    let port = PORT.to_string();
    let mut all = vec!["--service", "resp", "--port", &port, "--duration", "120s"];
    all.extend_from_slice(&["--ready-file", ready.to_str().unwrap(), "--json", json.to_str().unwrap()]);
    all.extend_from_slice(args);
    let mut p = Proc::spawn(&lab.ns_a, SERVER, &all, dir, "server", Stdio::null());
    p.wait_file(&ready, Duration::from_secs(30));
    p
}

fn cli(lab: &Lab, host: &str, args: &[&str]) -> String {
    let mut c = vec!["timeout", "20", "redis-cli", "-h", host, "-p", "6390"];
    c.extend_from_slice(args);
    lab.ns_b.run(&c).unwrap_or_else(|e| panic!("redis-cli -h {host} {args:?}: {e:?}")).trim().to_string()
}

/// Values written over one family read back over the other, from clients at the same time.
fn both_families(lab: &Lab, v6: &str, v4: &str) {
    assert_eq!(cli(lab, v6, &["SET", "k6", "over six"]), "OK");
    assert_eq!(cli(lab, v4, &["SET", "k4", "over four"]), "OK");
    assert_eq!(cli(lab, v4, &["GET", "k6"]), "over six");
    assert_eq!(cli(lab, v6, &["GET", "k4"]), "over four");
    // Two clients at once, one per family, 200 commands each.
    let run = |host: String| {
        let ns = lab.ns_b.clone();
        std::thread::spawn(move || ns.run(&["timeout", "30", "redis-cli", "-h", &host, "-p", "6390", "-r", "200", "INCR", "n"]).unwrap())
    };
    let (a, b) = (run(v6.to_string()), run(v4.to_string()));
    let (a, b) = (a.join().unwrap(), b.join().unwrap());
    assert_eq!(a.lines().count() + b.lines().count(), 400);
    assert_eq!(cli(lab, v6, &["GET", "n"]), "400");
    // A value larger than a segment, several times over, over IPv6.
    let big = "x".repeat(100_000);
    assert_eq!(cli(lab, v6, &["SET", "big", &big]), "OK");
    assert_eq!(cli(lab, v6, &["STRLEN", "big"]), "100000");
}

/// redis-py's checks (RESP3 and RESP2) over IPv6 while redis-cli sends 1,000 commands over
/// IPv4 to the same server.
fn redis_py_v6_with_v4(lab: &Lab, dir: &Path, v6: Ipv6Addr, v4: &str) {
    let ns = lab.ns_b.clone();
    let host = v4.to_string();
    let cli4 = std::thread::spawn(move || ns.run(&["timeout", "60", "redis-cli", "-h", &host, "-p", "6390", "-r", "1000", "INCR", "m"]).unwrap());
    assert!(resp_clients::redis_py(lab, dir, v6, PORT) > 0, "redis-py provoked its error replies");
    assert_eq!(cli4.join().unwrap().lines().count(), 1000);
    assert_eq!(cli(lab, &v6.to_string(), &["GET", "m"]), "1000");
}

fn stop(mut p: Proc) -> ServerSummary {
    // SAFETY: plain syscall on our own, not yet reaped child.
    unsafe { libc::kill(p.child.id() as i32, libc::SIGINT) };
    let st = p.wait(Duration::from_secs(20));
    assert!(st.success(), "rr-server exit {st}:\n{}", p.output());
    let s: ServerSummary = serde_json::from_slice(&std::fs::read(p.sibling("server.json")).unwrap()).unwrap();
    assert_eq!((s.protocol_errors, s.io_errors), (0, 0), "{s:?}");
    assert_eq!(s.accepted, s.closed, "{s:?}");
    s
}

#[test]
fn redis_cli_over_ipv6_and_ipv4_xsk_shared() {
    let (lab, a6) = lab("i6s", true);
    let dir = scratch("ipv6", "xsk-shared");
    let p = start(&lab, &dir, &["--backend", "xsk", "--iface", &lab.if_a, "--addr", "shared"]);
    both_families(&lab, &a6.to_string(), &lab.addr_a.to_string());
    redis_py_v6_with_v4(&lab, &dir, a6, &lab.addr_a.to_string());
    let s = stop(p);
    assert!(s.accepted >= 8, "{s:?}");
}

#[test]
fn redis_cli_over_ipv6_and_ipv4_xsk_dedicated() {
    let (lab, a6) = lab("i6d", false);
    let dir = scratch("ipv6", "xsk-dedicated");
    let o = lab.addr_a.octets();
    let v4 = std::net::Ipv4Addr::new(o[0], o[1], o[2], 100);
    let v6 = Ipv6Addr::from(a6.to_bits() + 99);
    let addr = format!("{v4}/{},{v6}/64", lab.prefix_len);
    let p = start(&lab, &dir, &["--backend", "xsk", "--iface", &lab.if_a, "--addr", &addr]);
    both_families(&lab, &v6.to_string(), &v4.to_string());
    stop(p);
}

#[test]
fn redis_cli_over_ipv6_and_ipv4_kernel() {
    let (lab, a6) = lab("i6k", true);
    let dir = scratch("ipv6", "kernel");
    let p = start(&lab, &dir, &["--backend", "kernel", "--bind", "0.0.0.0"]);
    both_families(&lab, &a6.to_string(), &lab.addr_a.to_string());
    redis_py_v6_with_v4(&lab, &dir, a6, &lab.addr_a.to_string());
    stop(p);
}
