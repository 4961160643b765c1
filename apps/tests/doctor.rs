//! `rr-server doctor` in veth labs: each check made to fail (or warn) by the setting it
//! checks, the exit status (1 on a failure, 0 otherwise), and the JSON. Needs root.

use std::process::Output;

use serde_json::Value;
use xsk_lab::lab::{Lab, LabConfig, Netns};

const SERVER: &str = env!("CARGO_BIN_EXE_rr-server");
/// An unprivileged uid and gid (nobody/nogroup on Debian).
const NOBODY: &str = "65534";

fn lab(tag: &str) -> Lab {
    // SAFETY: geteuid has no preconditions.
    assert_eq!(unsafe { libc::geteuid() }, 0, "this integration test needs root");
    xsk_lab::lab::sweep_stale(tag);
    Lab::new(&LabConfig::new(tag)).expect("lab")
}

/// `rr-server doctor --json ARGS` in `ns` under `wrap` (e.g. setpriv); (exit code, checks by name).
fn doctor_in(ns: &Netns, wrap: &[&str], args: &[&str]) -> (Option<i32>, Vec<Value>) {
    let mut all: Vec<&str> = wrap.to_vec();
    all.extend_from_slice(&[SERVER, "doctor", "--json"]);
    all.extend_from_slice(args);
    let out: Output = ns.command(&all).output().expect("rr-server doctor");
    let text = String::from_utf8_lossy(&out.stdout);
    let v: Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("doctor --json {args:?}: {e}\n{text}\n{}", String::from_utf8_lossy(&out.stderr)));
    (out.status.code(), v["checks"].as_array().cloned().unwrap_or_default())
}

fn doctor(lab: &Lab, args: &[&str]) -> (Option<i32>, Vec<Value>) {
    doctor_in(&lab.ns_a, &[], args)
}

/// The status of the first check whose name contains `name`, with its check, detail and fix.
fn status(checks: &[Value], name: &str) -> (String, String) {
    let c = checks
        .iter()
        .find(|c| c["check"].as_str().unwrap_or("").contains(name))
        .unwrap_or_else(|| panic!("no check {name:?} in {checks:#?}"));
    (c["status"].as_str().unwrap().to_string(), format!("{} | {} | fix: {}", c["check"], c["detail"], c["fix"]))
}

fn assert_status(checks: &[Value], name: &str, want: &str) {
    let (got, text) = status(checks, name);
    assert_eq!(got, want, "{name}: {text}");
}

#[test]
fn a_ready_interface_passes() {
    let lab = lab("dok");
    let (code, checks) = doctor(&lab, &["--iface", &lab.if_a]);
    let fails: Vec<_> = checks.iter().filter(|c| c["status"] == "fail").collect();
    assert!(fails.is_empty(), "{fails:#?}");
    assert_eq!(code, Some(0));
    for name in ["link", "xdp mode", "xdp program", "XDP_MAX_TX_SKB_BUDGET", "capabilities", "state directory", "address"] {
        assert_status(&checks, name, "ok");
    }
    // This kernel has no XDP_GENERIC_XMIT_BATCH (proposed upstream): a warning, not a failure.
    assert_status(&checks, "XDP_GENERIC_XMIT_BATCH", "warn");
    // The table form says the same.
    let out = lab.ns_a.command(&[SERVER, "doctor", "--iface", &lab.if_a]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("ok     link") && text.contains(" fail\n"), "{text}");
}

#[test]
fn interface_missing_or_loopback_fails() {
    let lab = lab("dif");
    let (code, checks) = doctor(&lab, &["--iface", "nosuch0"]);
    assert_eq!(code, Some(1));
    assert_status(&checks, "interface", "fail");
    let (code, checks) = doctor(&lab, &["--iface", "lo"]);
    assert_eq!(code, Some(1));
    let (_, text) = status(&checks, "interface");
    assert!(text.contains("loopback"), "{text}");
}

#[test]
fn link_down_fails() {
    let lab = lab("dld");
    // The peer down: no carrier, a warning.
    lab.ns_b.run(&["ip", "link", "set", "dev", &lab.if_b, "down"]).unwrap();
    let (code, checks) = doctor(&lab, &["--iface", &lab.if_a]);
    assert_eq!(code, Some(0));
    assert_status(&checks, "link", "warn");
    // Its own side down: a failure.
    lab.ns_a.run(&["ip", "link", "set", "dev", &lab.if_a, "down"]).unwrap();
    let (code, checks) = doctor(&lab, &["--iface", &lab.if_a]);
    assert_eq!(code, Some(1));
    assert_status(&checks, "link", "fail");
}

#[test]
fn queues_fewer_than_threads_fail() {
    let lab = lab("dqt");
    let (code, checks) = doctor(&lab, &["--iface", &lab.if_a, "--threads", "2"]);
    assert_eq!(code, Some(1));
    assert_status(&checks, "queues", "fail");
}

#[test]
fn mtu_too_large_for_the_frames_fails() {
    let lab = lab("dmt");
    for (ns, dev) in [(&lab.ns_a, &lab.if_a), (&lab.ns_b, &lab.if_b)] {
        ns.run(&["ip", "link", "set", "dev", dev, "mtu", "9000"]).unwrap();
    }
    let (code, checks) = doctor(&lab, &["--iface", &lab.if_a]);
    assert_eq!(code, Some(1));
    assert_status(&checks, "mtu", "fail");
}

#[test]
fn an_attached_xdp_program_fails() {
    let lab = lab("dxp");
    let _held = lab.peer_xdp_pass().expect("an XDP program on if_b");
    let (code, checks) = doctor_in(&lab.ns_b, &[], &["--iface", &lab.if_b]);
    assert_eq!(code, Some(1));
    assert_status(&checks, "xdp program", "fail");
}

#[test]
fn missing_capabilities_and_memlock_fail() {
    let lab = lab("dcp");
    // Every capability but CAP_IPC_LOCK, under systemd's default 8 MiB memlock limit.
    let set = "-all,+net_raw,+net_admin,+bpf,+perfmon";
    let wrap = [
        "prlimit", "--memlock=8388608:8388608", "--", "setpriv", "--reuid", NOBODY, "--regid", NOBODY, "--clear-groups",
        "--inh-caps", set, "--ambient-caps", set, "--bounding-set", set, "--",
    ];
    let (code, checks) = doctor_in(&lab.ns_a, &wrap, &["--iface", &lab.if_a]);
    assert_eq!(code, Some(1));
    let (st, text) = status(&checks, "CAP_IPC_LOCK or a memlock limit");
    assert_eq!(st, "fail", "{text}");
    assert!(text.contains("8192 KiB"), "{text}");
    // No capabilities at all: each named; and the default state directory is root's.
    let wrap = ["setpriv", "--reuid", NOBODY, "--regid", NOBODY, "--clear-groups", "--inh-caps", "-all", "--bounding-set", "-all", "--"];
    let (code, checks) = doctor_in(&lab.ns_a, &wrap, &["--iface", &lab.if_a, "--state-dir", "/run"]);
    assert_eq!(code, Some(1));
    for cap in ["CAP_NET_RAW", "CAP_NET_ADMIN", "CAP_BPF", "CAP_PERFMON"] {
        assert_status(&checks, &format!("capability {cap}"), "fail");
    }
    assert_status(&checks, "state directory", "fail");
}

#[test]
fn address_modes() {
    let lab = lab("dad");
    // Dedicated mode given the kernel's own address: a warning.
    let own = format!("{}/{}", lab.addr_a, lab.prefix_len);
    let (code, checks) = doctor(&lab, &["--iface", &lab.if_a, "--addr", &own]);
    assert_eq!(code, Some(0));
    assert_status(&checks, "address", "warn");
    // Shared mode on an interface without an address: a failure.
    lab.ns_a.run(&["ip", "addr", "flush", "dev", &lab.if_a]).unwrap();
    let (code, checks) = doctor(&lab, &["--iface", &lab.if_a]);
    assert_eq!(code, Some(1));
    assert_status(&checks, "address", "fail");
}
