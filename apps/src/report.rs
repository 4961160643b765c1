//! The result records (`--json`) of a run and of a server, and their human-readable lines.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::options::{Backend, Service};
use crate::recovery::RecoveryCounts;

/// NET_RX softirq CPU per request by the process it ran in (microseconds).
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct NetRxPerReq {
    /// In the server's process: on veth, mostly the client's receive of the server's sends.
    pub in_server: f64,
    /// In the client's (this) process: the server's receive of its sends.
    pub in_client: f64,
    /// Anywhere else (ksoftirqd, interrupts of idle CPUs, other processes): charged to nobody.
    pub elsewhere: f64,
}

/// What `rr-bench --json` writes. Latencies are microseconds; CPU figures are CPU time per
/// request in microseconds (null when unknown) and average cores busy over the measured run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct BenchResult {
    /// Client backend.
    pub backend: Backend,
    pub service: Service,
    /// Server address.
    pub connect: String,
    pub conns: usize,
    /// Requests kept in flight per connection (closed loop); 0 in open loop.
    pub depth: usize,
    /// "closed" or "open".
    pub mode: String,
    /// Open loop: requests per second over all connections.
    pub rate: Option<f64>,
    pub req_size: usize,
    pub resp_size: usize,
    pub warmup_s: f64,
    /// Responses in the warm-up (its connections are separate; the server serves both).
    #[serde(default)]
    pub warmup_requests: u64,
    /// Connection setup of the measured run: from the start of the run to its first request.
    #[serde(default)]
    pub setup_s: f64,
    /// First request to last response of the measured run.
    pub duration_s: f64,
    /// Wall time the CPU figures cover: the first request to the end of --duration (the
    /// CPU-per-request figures are CPU cores over this window divided by the request rate).
    #[serde(default)]
    pub cpu_window_s: f64,
    pub requests: u64,
    pub rps: f64,
    pub p50_us: f64,
    pub p90_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
    pub mean_us: f64,
    /// Failed checks, bad responses and connections that died.
    pub errors: u64,
    /// Requests that never got a response.
    pub lost: u64,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    /// This process (user + system, getrusage), over the CPU window.
    pub cpu_us_per_req_client: Option<f64>,
    /// All CPUs of the machine (/proc/stat busy time: includes softirq work and everything
    /// else running).
    pub cpu_us_per_req_machine: Option<f64>,
    /// The process given by --server-pid (its threads' run time, /proc/PID/task/*/schedstat).
    pub cpu_us_per_req_server: Option<f64>,
    /// The same with each side charged its own receive path: minus the NET_RX softirq work
    /// that ran in the server's process, plus the NET_RX work that ran in this one (see
    /// [`netrx`](crate::netrx)); null without the accountant (not root, --no-netrx).
    #[serde(default)]
    pub cpu_us_per_req_server_own_rx: Option<f64>,
    /// The NET_RX softirq time behind that figure, per request.
    #[serde(default)]
    pub netrx_us_per_req: Option<NetRxPerReq>,
    /// System calls per request entered by the server's process and by this one, over the
    /// same window (the accountant's `sys_enter` count; null without it).
    #[serde(default)]
    pub syscalls_per_req_server: Option<f64>,
    #[serde(default)]
    pub syscalls_per_req_client: Option<f64>,
    pub cores_client: f64,
    pub cores_machine: f64,
    pub cores_server: Option<f64>,
    pub cpus: usize,
    pub server_pid: Option<u32>,
    /// xsk client only: stack counters and frame audit.
    pub xsk: Option<serde_json::Value>,
    /// xsk client only: its loss recovery (also in `xsk.stats.recovery`).
    #[serde(default)]
    pub recovery: Option<RecoveryCounts>,
    /// Churn and storm runs (`--pattern`): how connections were opened, and the time from
    /// the connect call to the established connection. `requests`/`rps` then count
    /// connections (each answered once), and the latencies run from the connect call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub churn: Option<ChurnFigures>,
}

/// Connection figures of a churn or storm run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ChurnFigures {
    /// "churn" or "storm".
    pub pattern: String,
    /// Connections opened (connect calls) in the measured run.
    pub opened: u64,
    /// Refused, reset or not established within --connect-timeout.
    pub failed_connects: u64,
    pub setup_p50_us: f64,
    pub setup_p99_us: f64,
    pub setup_max_us: f64,
}

/// Groups digits: 1234567 -> "1,234,567".
pub fn group_digits(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, ch) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

fn opt(v: Option<f64>, prec: usize) -> String {
    v.map_or_else(|| "-".to_string(), |v| format!("{v:.prec$}"))
}

impl BenchResult {
    /// The human-readable result table.
    pub fn table(&self) -> String {
        let mut s = String::new();
        let load = match self.rate {
            Some(r) => format!("open loop at {} req/s", group_digits(r.round() as u64)),
            None => format!("closed loop, depth {}", self.depth),
        };
        let _ = writeln!(
            s,
            "== rr-bench: {} client -> {} ({}, {} B requests, {} B responses)",
            self.backend, self.connect, self.service, self.req_size, self.resp_size
        );
        let _ = writeln!(
            s,
            "   {} connections ({:.2} s to connect), {load}, {:.2} s measured after {:.2} s warm-up",
            self.conns, self.setup_s, self.duration_s, self.warmup_s
        );
        let _ = writeln!(
            s,
            "  {:<16}{:>12} req/s  ({} requests)",
            "throughput",
            group_digits(self.rps.round() as u64),
            group_digits(self.requests)
        );
        let _ = writeln!(s, "  {:<16}{:>12} / {}", "errors / lost", self.errors, self.lost);
        let _ = writeln!(
            s,
            "  {:<16}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}",
            "latency", "p50", "p90", "p99", "p99.9", "max", "mean"
        );
        let _ = writeln!(
            s,
            "  {:<16}{:>10.1}{:>10.1}{:>10.1}{:>10.1}{:>10.1}{:>10.1}",
            "  (us)", self.p50_us, self.p90_us, self.p99_us, self.p999_us, self.max_us, self.mean_us
        );
        let _ = writeln!(s, "  {:<16}{:>10}{:>10}{:>10}", "CPU", "client", "machine", "server");
        let _ = writeln!(
            s,
            "  {:<16}{:>10}{:>10}{:>10}",
            "  us/request",
            opt(self.cpu_us_per_req_client, 2),
            opt(self.cpu_us_per_req_machine, 2),
            opt(self.cpu_us_per_req_server, 2)
        );
        let _ = writeln!(
            s,
            "  {:<16}{:>10.2}{:>10.2}{:>10}   (machine: {} CPUs)",
            "  cores busy",
            self.cores_client,
            self.cores_machine,
            opt(self.cores_server, 2),
            self.cpus
        );
        if let Some(r) = &self.recovery {
            let _ = writeln!(s, "  {:<16}{}", "loss recovery", r.line());
        }
        if let (Some(sv), Some(cl)) = (self.syscalls_per_req_server, self.syscalls_per_req_client) {
            let _ = writeln!(s, "  {:<16}{:>10.2}{:>10}{:>10.2}   (system calls per request)", "  syscalls", cl, "", sv);
        }
        if let (Some(own), Some(n)) = (self.cpu_us_per_req_server_own_rx, self.netrx_us_per_req) {
            let _ = writeln!(
                s,
                "  {:<16}{:>10.2}   (server, own receive: NET_RX run in it {:.2}, in the client {:.2}, elsewhere {:.2} us/request)",
                "  own receive", own, n.in_server, n.in_client, n.elsewhere
            );
        }
        s
    }
}

/// What `rr-server --json` writes at exit.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ServerSummary {
    pub backend: Backend,
    pub service: Service,
    pub listen: String,
    pub uptime_s: f64,
    pub requests: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub accepted: u64,
    pub closed: u64,
    pub open_at_exit: usize,
    pub protocol_errors: u64,
    pub io_errors: u64,
    pub cpu_s: f64,
    /// xsk only: stack counters, port features and the frame audit.
    pub xsk: Option<serde_json::Value>,
    /// xsk only: loss recovery, summed over the shards (also in `xsk.stats.recovery`).
    #[serde(default)]
    pub recovery: Option<RecoveryCounts>,
    /// uring only: what the kernel granted the ring, and its counters (io_uring_enter calls:
    /// the backend's system calls on the request path).
    #[serde(default)]
    pub uring: Option<serde_json::Value>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digits_grouped() {
        assert_eq!(group_digits(0), "0");
        assert_eq!(group_digits(999), "999");
        assert_eq!(group_digits(1000), "1,000");
        assert_eq!(group_digits(1234567), "1,234,567");
    }
}
