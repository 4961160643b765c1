//! The servers `vm-tests cost` measures (`--servers`), what their guest kernel granted them,
//! and the system calls they count.
//!
//! * `kernel`: `rr-server --backend kernel` (epoll), `uring`: `--backend uring` (kernel TCP
//!   through io_uring), `kernel-napi` / `uring-napi`: the same with `--irq-suspend eth0` (the
//!   NAPI settings for IRQ suspension, prefer-busy-poll with a budget), `xsk`: the stack,
//!   `floor`: xsk-device's `tcp_floor` example (the least TCP that answers the load, on the
//!   same copy-mode port: a lower bound for any stack there, not a server; no counters).
//! * What the kernel granted: rr-server's `io_uring: ...`, `napi: ...` and `kernel busy poll
//!   ...` lines.
//! * System calls: rr-server prints its counters on SIGUSR1 (`counters (SIGUSR1):`, one
//!   `  name value` line each); vmt-stats' `--dump=PID:LOG` sends the signal and reads the
//!   block with each snapshot. The uring backend counts its `io_uring_enter` calls
//!   (`uring_enters`, every system call of its request path); the xsk stack counts its
//!   `sendto` (`xsk_port_port_kicks`), `recvfrom` (`xsk_port_port_rx_wakeups`) and sleeps in
//!   `poll` (`xsk_device_sleeps`). The epoll backend counts none (and /proc has no per-process
//!   system-call counter), so it has no figure.

use std::collections::BTreeMap;

use crate::server::ServerSpec;

/// The names `--servers` takes.
pub const SERVERS: [&str; 6] = ["kernel", "uring", "kernel-napi", "uring-napi", "xsk", "floor"];

/// The guest's interface (`--irq-suspend`).
pub const GUEST_IFACE: &str = "eth0";

/// Kernel-TCP servers (everything but xsk and floor): what the xsk ratios are taken against.
pub fn is_kernel_tcp(server: &str) -> bool {
    server != "xsk" && server != "floor"
}

/// The order of the servers in `round`: the list rotated by the round (two servers: A B, B A).
pub fn order(servers: &[String], round: usize) -> Vec<String> {
    let n = servers.len().max(1);
    (0..servers.len())
        .map(|i| servers[(i + round) % n].clone())
        .collect()
}

/// A shell-variable-safe tag for `server`.
pub fn tag(server: &str) -> String {
    format!("cost_{}", server.replace('-', "_"))
}

/// The rr-server of `server` on `port` (xsk: `attach`, shared address, `xsk_extra`).
pub fn spec(server: &str, port: u16, attach: &str, xsk_extra: &[String]) -> ServerSpec {
    let t = tag(server);
    let (backend, napi) = match server {
        "xsk" => {
            return ServerSpec {
                extra: xsk_extra.to_vec(),
                ..ServerSpec::xsk(&t, attach, "shared", port)
            };
        }
        "floor" => {
            let mut s = ServerSpec::xsk(&t, attach, "shared", port);
            s.backend = "floor".into();
            return s;
        }
        "kernel" => ("kernel", false),
        "uring" => ("uring", false),
        "kernel-napi" => ("kernel", true),
        "uring-napi" => ("uring", true),
        other => unreachable!("--servers takes no {other}"),
    };
    let mut s = ServerSpec::kernel(&t, port);
    s.backend = backend.into();
    if napi {
        s.extra = vec!["--irq-suspend".into(), GUEST_IFACE.into()];
    }
    s
}

/// The counters whose sum is the server's system calls (every server counts its own, and is
/// asked for them with SIGUSR1; epoll: `epoll_wait`, `accept4`, `recv`, `send`).
pub fn syscall_counters(server: &str) -> &'static [&'static str] {
    if server == "xsk" {
        &[
            "xsk_port_port_kicks",
            "xsk_port_port_rx_wakeups",
            "xsk_device_sleeps",
        ]
    } else if server.starts_with("uring") {
        &["uring_enters"]
    } else if server.starts_with("kernel") {
        &["kernel_syscalls"]
    } else {
        &[]
    }
}

/// What the guest kernel granted the server: its `io_uring: `, `napi: ` and `kernel busy poll`
/// lines (the log's tracing lines, which may repeat them after a timestamp, are left out).
pub fn grant_lines(log: &str) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for l in log.lines().map(str::trim) {
        let keep = l.starts_with("io_uring: ")
            || l.starts_with("napi: ")
            || l.starts_with("kernel busy poll");
        if keep && !v.iter().any(|x| x == l) {
            v.push(l.to_string());
        }
    }
    v
}

/// `io_uring at exit: {...}`: the `uring.features` object of rr-server's `--json` summary
/// (what the ring ended up with; the `io_uring:` line is printed before the polling thread
/// registers the ring's fd).
pub fn uring_exit_features(summary: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(summary.trim()).ok()?;
    let f = v.get("uring")?.get("features")?;
    Some(format!("io_uring at exit: {f}"))
}

/// Per request, from the three dumps taken with the snapshots (before the short run, between
/// the runs, after the long run): (long - short) / (long requests - short requests) of each
/// counter in `names`; None when a dump lacks one.
pub fn per_request(
    dumps: &[BTreeMap<String, f64>; 3],
    names: &[&str],
    long: u64,
    short: u64,
) -> Option<BTreeMap<String, f64>> {
    let n = long as f64 - short as f64;
    if n <= 0.0 {
        return None;
    }
    names
        .iter()
        .map(|k| {
            let (a, b, c) = (dumps[0].get(*k)?, dumps[1].get(*k)?, dumps[2].get(*k)?);
            Some((k.to_string(), ((c - b) - (b - a)) / n))
        })
        .collect()
}

/// vmt-stats' argument that asks the server of `tag` (its pid in `$PID_<tag>`, its log in
/// `/tmp/<tag>.log`) for its counters before the snapshot.
pub fn dump_arg(tag: &str) -> String {
    format!("--dump=$PID_{tag}:/tmp/{tag}.log")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotation() {
        let s: Vec<String> = ["kernel", "xsk"].iter().map(|x| x.to_string()).collect();
        assert_eq!(order(&s, 0), ["kernel", "xsk"]);
        assert_eq!(order(&s, 1), ["xsk", "kernel"]);
        let s: Vec<String> = ["kernel", "uring", "xsk"]
            .iter()
            .map(|x| x.to_string())
            .collect();
        assert_eq!(order(&s, 1), ["uring", "xsk", "kernel"]);
        assert_eq!(order(&s, 3), order(&s, 0));
    }

    #[test]
    fn specs() {
        let napi = spec("uring-napi", 7000, "drv", &[]);
        assert_eq!(napi.backend, "uring");
        assert_eq!(napi.extra, ["--irq-suspend", "eth0"]);
        assert_eq!(napi.tag, "cost_uring_napi");
        assert!(spec("kernel", 7000, "drv", &[]).extra.is_empty());
        let f = spec("floor", 7000, "drv", &["--no-defer-acks".into()]);
        assert_eq!((f.backend.as_str(), f.extra.len(), is_kernel_tcp("floor")), ("floor", 0, false));
        assert!(syscall_counters("floor").is_empty());
        let x = spec("xsk", 7000, "drv", &["--no-defer-acks".into()]);
        assert_eq!((x.backend.as_str(), x.extra.len()), ("xsk", 1));
    }

    #[test]
    fn grants() {
        let log = "2026 INFO stack::uring: uring backend: io_uring: single issuer\nio_uring: single issuer, deferred task running\nnapi: eth0 (ifindex 2): napi_defer_hard_irqs 0 -> 2\nrr-server: echo\nio_uring: single issuer, deferred task running\n";
        assert_eq!(
            grant_lines(log),
            [
                "io_uring: single issuer, deferred task running",
                "napi: eth0 (ifindex 2): napi_defer_hard_irqs 0 -> 2"
            ]
        );
    }

    #[test]
    fn exit_features() {
        let j = r#"{"backend":"uring","uring":{"features":{"registered_ring":true,"missing":[]},"stats":[]}}"#;
        assert_eq!(
            uring_exit_features(j).as_deref(),
            Some(r#"io_uring at exit: {"missing":[],"registered_ring":true}"#)
        );
        assert_eq!(uring_exit_features("{}"), None);
    }

    #[test]
    fn per_request_counts() {
        let d = |r: f64, e: f64| BTreeMap::from([("requests".to_string(), r), ("uring_enters".to_string(), e)]);
        // short: 20 requests, 60 enters; long: 1000 requests, 2020 enters -> 1960 / 980 = 2
        let dumps = [d(10.0, 100.0), d(30.0, 160.0), d(1030.0, 2180.0)];
        let per = per_request(&dumps, &["uring_enters"], 1000, 20).unwrap();
        assert!((per["uring_enters"] - 2.0).abs() < 1e-9);
        assert!(per_request(&dumps, &["nope"], 1000, 20).is_none());
        assert_eq!(dump_arg("cost_uring"), "--dump=$PID_cost_uring:/tmp/cost_uring.log");
    }
}
