//! The server under test: rr-server started in ns_a, and what /proc says about it and its
//! namespace (memory, open-file limit, the kernel's TCP counters).

use std::net::Ipv4Addr;
use std::path::Path;
use std::time::Duration;

use anyhow::Result;
use serde_json::Value;
use apps::server_process::ServerProcess;
use xsk_lab::lab::Lab;

use crate::{Args, Case, PORT};

pub(crate) fn start_server(args: &Args, case: Case, exe: &Path, lab: &Lab, dir: &Path, target: Ipv4Addr) -> Result<ServerProcess> {
    let ready = dir.join("ready");
    let json = dir.join("server.json");
    // A bound on the server's life whatever happens to this process.
    let life = format!("{}s", args.duration.as_secs() + 600);
    let max_conns = args.max_conns.to_string();
    let port = PORT.to_string();
    let mut a: Vec<String> = ["--service", "echo", "--port", &port, "--max-conns", &max_conns, "--duration", &life]
        .iter()
        .map(|s| s.to_string())
        .collect();
    a.extend(["--ready-file".into(), ready.display().to_string(), "--json".into(), json.display().to_string()]);
    if case.xsk() {
        let cidr = format!("{target}/{}", lab.prefix_len);
        let buffer = args.buffer.to_string();
        a.extend(
            ["--backend", "xsk", "--iface", &lab.if_a, "--addr", &cidr, "--attach", "auto", "--buffer", &buffer]
                .iter()
                .map(|s| s.to_string()),
        );
        a.extend(args.xsk_args.iter().cloned());
    } else {
        a.extend(["--backend", "kernel", "--bind", &target.to_string()].iter().map(|s| s.to_string()));
    }
    let mut cmd = ServerProcess::command(&lab.ns_a, exe);
    cmd.args(&a);
    let mut s = ServerProcess::spawn("rr-server", cmd, &dir.join("server.out"), Some(&dir.join("server.err")))?;
    s.wait_ready_file(&ready, Duration::from_secs(30))?;
    Ok(s)
}

/// VmRSS and VmHWM of `pid` in KiB.
pub(crate) fn read_rss(pid: u32) -> Option<(u64, u64)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| -> Option<u64> {
        let l = s.lines().find(|l| l.starts_with(name))?;
        l[name.len()..].trim().trim_end_matches("kB").trim().parse().ok()
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

/// TcpExt counters of the namespace `pid` lives in.
pub(crate) fn tcp_ext(pid: u32) -> Vec<(String, u64)> {
    let Ok(s) = std::fs::read_to_string(format!("/proc/{pid}/net/netstat")) else { return Vec::new() };
    let lines: Vec<&str> = s.lines().filter(|l| l.starts_with("TcpExt:")).collect();
    if lines.len() < 2 {
        return Vec::new();
    }
    lines[0].split_whitespace().skip(1).zip(lines[1].split_whitespace().skip(1))
        .filter_map(|(k, v)| Some((k.to_string(), v.parse().ok()?)))
        .collect()
}

/// Kernel counters that say what happened to the flood's SYNs.
const KERNEL_KEYS: &[&str] = &[
    "SyncookiesSent",
    "SyncookiesRecv",
    "SyncookiesFailed",
    "ListenOverflows",
    "ListenDrops",
    "TCPReqQFullDoCookies",
    "TCPReqQFullDrop",
    "TCPTimeouts",
];

pub(crate) fn kernel_drops(before: &[(String, u64)], after: &[(String, u64)]) -> Value {
    let mut m = serde_json::Map::new();
    for k in KERNEL_KEYS {
        let get = |v: &[(String, u64)]| v.iter().find(|(n, _)| n == k).map(|(_, x)| *x);
        if let (Some(a), Some(b)) = (get(before), get(after)) {
            m.insert(k.to_string(), Value::from(b.saturating_sub(a)));
        }
    }
    Value::Object(m)
}

/// Soft open-file limit of `pid`.
pub(crate) fn nofile_limit(pid: u32) -> Option<usize> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/limits")).ok()?;
    let l = s.lines().find(|l| l.starts_with("Max open files"))?;
    l.split_whitespace().nth(3)?.parse().ok()
}
