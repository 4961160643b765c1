//! rr-server as it is deployed: ping in dedicated mode, warnings for silent misconfigurations,
//! and the xsk backend as an unprivileged user with exactly the documented capabilities
//! (`setpriv`), each one missing named in the error. Needs root (namespaces, XDP).

mod common;
use common::{scratch, Proc};

use std::net::Ipv4Addr;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use xsk_lab::lab::{Lab, LabConfig};

const SERVER: &str = env!("CARGO_BIN_EXE_rr-server");

fn lab(tag: &str) -> Lab {
    // SAFETY: geteuid has no preconditions.
    assert_eq!(unsafe { libc::geteuid() }, 0, "this integration test needs root");
    xsk_lab::lab::sweep_stale(tag);
    Lab::new(&LabConfig::new(tag)).expect("lab")
}

/// An address on the lab subnet that the kernel does not have.
fn dedicated(lab: &Lab, host: u8) -> (Ipv4Addr, String) {
    let o = lab.addr_a.octets();
    let a = Ipv4Addr::new(o[0], o[1], o[2], host);
    (a, format!("{a}/{}", lab.prefix_len))
}

/// rr-server (under `wrap`, e.g. setpriv, when given) in ns_a; waits until it is ready.
fn start(lab: &Lab, dir: &Path, wrap: &[&str], args: &[&str]) -> Proc {
    let ready = dir.join("ready");
    let mut all: Vec<&str> = wrap.iter().skip(1).copied().collect();
    if !wrap.is_empty() {
        all.push(SERVER);
    }
    all.extend_from_slice(&["--ready-file", ready.to_str().unwrap(), "--duration", "60s"]);
    all.extend_from_slice(args);
    let exe = wrap.first().copied().unwrap_or(SERVER);
    let mut p = Proc::spawn(&lab.ns_a, exe, &all, dir, "server", Stdio::null());
    p.wait_file(&ready, Duration::from_secs(30));
    p
}

fn stop(mut p: Proc) -> String {
    let st = p.signal(libc::SIGTERM, Duration::from_secs(20));
    assert!(st.success(), "rr-server exit {st}:\n{}", p.output());
    p.output()
}

#[test]
fn dedicated_mode_answers_ping() {
    let lab = lab("dpg");
    let dir = scratch("deploy", "ping");
    let (ip, cidr) = dedicated(&lab, 101);
    let server = start(&lab, &dir, &[], &["--backend", "xsk", "--iface", &lab.if_a, "--addr", &cidr, "--port", "7400"]);
    let ip = ip.to_string();
    // Bounded: 5 echo requests 200 ms apart, at most 5 s in all.
    let out = lab.ns_b.command(&["ping", "-c", "5", "-i", "0.2", "-W", "1", "-w", "5", &ip]).output().expect("ping");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "ping {ip}: {}\n{text}\n{}", out.status, String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("5 received"), "{text}");
    stop(server);
}

/// The example systemd unit (README: "Run it as a service").
const UNIT: &str = include_str!("../systemd/rr-server.service");

/// The capabilities the example unit grants, in setpriv's spelling (`net_raw`).
fn unit_caps() -> Vec<String> {
    let line = |key: &str| {
        UNIT.lines().find_map(|l| l.strip_prefix(key)).unwrap_or_else(|| panic!("the unit has no {key}")).to_string()
    };
    let ambient = line("AmbientCapabilities=");
    assert_eq!(ambient, line("CapabilityBoundingSet="), "the unit's ambient and bounding sets are the same");
    ambient.split_whitespace().map(|c| c.trim_start_matches("CAP_").to_lowercase()).collect()
}

#[test]
fn the_unit_grants_exactly_the_documented_set() {
    assert_eq!(unit_caps().join(" "), "net_raw net_admin bpf perfmon ipc_lock");
    let named: Vec<String> = unit_caps().iter().map(|c| format!("CAP_{}", c.to_uppercase())).collect();
    assert_eq!(named.join(" "), stack::xsk::privileges::needed_list(), "the unit and the port's check agree");
    for l in ["NoNewPrivileges=yes", "RuntimeDirectory=xsk-io", "Restart=on-failure", "KillSignal=SIGTERM"] {
        assert!(UNIT.lines().any(|u| u == l), "the unit has {l}");
    }
}
/// An unprivileged uid and gid (nobody/nogroup on Debian).
const NOBODY: u32 = 65534;

/// `prlimit` (an 8 MiB memlock limit, systemd's default, whatever the test runner has) and
/// `setpriv` running the server as `NOBODY` with exactly `caps` (inheritable, ambient and
/// bounding), as the example systemd unit does.
fn unprivileged(caps: &[&str]) -> Vec<String> {
    let set = std::iter::once("-all".to_string()).chain(caps.iter().map(|c| format!("+{c}"))).collect::<Vec<_>>().join(",");
    let id = NOBODY.to_string();
    [
        "prlimit", "--memlock=8388608:8388608", "--", "setpriv", "--reuid", &id, "--regid", &id, "--clear-groups",
        "--inh-caps", &set, "--ambient-caps", &set, "--bounding-set", &set, "--",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// A scratch folder the unprivileged server can write (ready file, state records).
fn nobody_dir(name: &str) -> std::path::PathBuf {
    let dir = scratch("deploy", name);
    std::os::unix::fs::chown(&dir, Some(NOBODY), Some(NOBODY)).unwrap();
    let state = dir.join("state");
    std::fs::create_dir_all(&state).unwrap();
    std::os::unix::fs::chown(&state, Some(NOBODY), Some(NOBODY)).unwrap();
    dir
}

#[test]
fn unprivileged_with_exactly_the_documented_capabilities_serves() {
    let lab = lab("dcs");
    let dir = nobody_dir("caps-serve");
    let (ip, cidr) = dedicated(&lab, 102);
    let state = dir.join("state");
    let caps = unit_caps();
    let wrap = unprivileged(&caps.iter().map(String::as_str).collect::<Vec<_>>());
    let wrap: Vec<&str> = wrap.iter().map(String::as_str).collect();
    let server = start(
        &lab,
        &dir,
        &wrap,
        &["--backend", "xsk", "--iface", &lab.if_a, "--addr", &cidr, "--port", "7401", "--state-dir", state.to_str().unwrap()],
    );
    let connect = format!("{ip}:7401");
    let bench = env!("CARGO_BIN_EXE_rr-bench");
    let args = ["--backend", "kernel", "--connect", &connect, "--conns", "4", "--depth", "2", "--duration", "1s", "--warmup", "300ms", "--quiet"];
    Proc::spawn(&lab.ns_b, bench, &args, &dir, "bench", Stdio::null()).finish(Duration::from_secs(60));
    let log = stop(server);
    assert!(log.contains("privileges after setup: keeping CAP_NET_ADMIN"), "{log}");
    assert!(log.contains(" requests, ") && !log.contains("rr-server: 0 requests"), "served no requests:\n{log}");
    let left: Vec<_> = std::fs::read_dir(&state).unwrap().collect();
    assert!(left.is_empty(), "state records left behind: {left:?}");
    let shown = lab.ns_a.run(&["ip", "-d", "link", "show", "dev", &lab.if_a]).unwrap();
    assert!(!shown.contains("prog/xdp"), "XDP program left on {}", lab.if_a);
}

#[test]
fn each_missing_capability_is_named() {
    let lab = lab("dcm");
    let dir = nobody_dir("caps-missing");
    let state = dir.join("state");
    let (_, cidr) = dedicated(&lab, 103);
    let all = unit_caps();
    for missing in all.iter().map(String::as_str) {
        let caps: Vec<&str> = all.iter().map(String::as_str).filter(|c| *c != missing).collect();
        let mut args = unprivileged(&caps);
        args.push(SERVER.to_string());
        let a = ["--backend", "xsk", "--iface", &lab.if_a, "--addr", &cidr, "--port", "7402", "--duration", "5s"];
        args.extend(a.iter().map(|s| s.to_string()));
        args.extend(["--state-dir".to_string(), state.to_str().unwrap().to_string()]);
        let out = lab.ns_a.command(&args.iter().map(String::as_str).collect::<Vec<_>>()).output().expect("rr-server");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "without {missing}: {}\n{err}", out.status);
        let name = format!("CAP_{}", missing.to_uppercase());
        let line = err.lines().find(|l| l.starts_with("rr-server: error:")).unwrap_or_default();
        assert!(line.contains(&format!("missing {name}")), "without {missing} the error names it:\n{err}");
        if missing == "ipc_lock" {
            assert!(line.contains("memlock limit") && line.contains("8192 KiB"), "and the memlock limit:\n{line}");
        }
        let shown = lab.ns_a.run(&["ip", "-d", "link", "show", "dev", &lab.if_a]).unwrap();
        assert!(!shown.contains("prog/xdp"), "without {missing}: XDP program left on {}", lab.if_a);
    }
}

/// Runs rr-server (root) to its end with `args`; (exit code, stderr).
fn run_briefly(lab: &Lab, args: &[&str]) -> (Option<i32>, String) {
    let mut all = vec![SERVER, "--duration", "300ms"];
    all.extend_from_slice(args);
    let out = lab.ns_a.command(&all).output().expect("rr-server");
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn silent_starts_are_not_silent() {
    let lab = lab("dws");
    let (_, cidr) = dedicated(&lab, 104);
    // The loopback interface: refused, with why.
    let (code, err) = run_briefly(&lab, &["--backend", "xsk", "--iface", "lo", "--addr", &cidr]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("is the loopback interface"), "{err}");
    // The kernel's own address as a dedicated one: a warning naming the interface.
    let own = format!("{}/{}", lab.addr_a, lab.prefix_len);
    let (code, err) = run_briefly(&lab, &["--backend", "xsk", "--iface", &lab.if_a, "--addr", &own]);
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains(&format!("dedicated address {} is also the kernel's (on {})", lab.addr_a, lab.if_a)), "{err}");
    // The doctor's checks ran at start, and say where the table is.
    assert!(err.contains("doctor: ") && err.contains(&format!("`rr-server doctor --iface {}`", lab.if_a)), "{err}");
    // An interface that is down.
    lab.ns_a.run(&["ip", "link", "set", "dev", &lab.if_a, "down"]).unwrap();
    let (code, err) = run_briefly(&lab, &["--backend", "xsk", "--iface", &lab.if_a, "--addr", &cidr]);
    assert!(err.contains(&format!("{} is down", lab.if_a)), "exit {code:?}:\n{err}");
}
