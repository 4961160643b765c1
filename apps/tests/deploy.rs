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
