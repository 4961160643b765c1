//! The result record of a measured run (the table and `--json`).

use std::net::SocketAddr;
use std::time::Duration;

use apps::cpu::CpuUsage;
use apps::netrx::{own_rx, NetRxTimes};
use apps::{BenchResult, NetRxPerReq};
use rr_load::{ClientReport, LoadMode};

use crate::{Args, Pattern};
use crate::plan::Plan;

pub(crate) fn make_result(
    r: &ClientReport,
    args: &Args,
    plan: &Plan,
    addr: SocketAddr,
    usage: &CpuUsage,
    server_cpu: Option<Duration>,
    netrx: Option<NetRxTimes>,
) -> BenchResult {
    let cores = |d: Duration| {
        let w = usage.wall.as_secs_f64();
        if w > 0.0 {
            d.as_secs_f64() / w
        } else {
            0.0
        }
    };
    // Cores busy over the CPU window divided by the request rate: both are rates over (nearly)
    // the same window, so setup and teardown count in neither.
    let rps = r.requests_per_sec();
    let per_req = |d: Duration| (r.requests > 0 && rps > 0.0 && !usage.wall.is_zero()).then(|| cores(d) / rps * 1e6);
    // A count over the CPU window, per request answered in it.
    let per_count =
        |n: u64| (r.requests > 0 && rps > 0.0 && !usage.wall.is_zero()).then(|| n as f64 / (rps * usage.wall.as_secs_f64()));
    let us = |q: f64| r.latency_at(q).as_nanos() as f64 / 1000.0;
    let empty = r.latency.is_empty();
    BenchResult {
        backend: args.backend,
        service: args.service,
        connect: addr.to_string(),
        conns: args.conns,
        depth: match plan.mode {
            LoadMode::ClosedLoop { depth } => depth,
            LoadMode::OpenLoop { .. } => 0,
        },
        mode: match plan.mode {
            LoadMode::ClosedLoop { .. } => "closed".into(),
            LoadMode::OpenLoop { .. } => "open".into(),
        },
        rate: args.rate,
        req_size: plan.req_size,
        resp_size: plan.resp_size,
        warmup_s: args.warmup.as_secs_f64(),
        warmup_requests: 0,
        setup_s: 0.0,
        duration_s: r.duration.as_secs_f64(),
        cpu_window_s: usage.wall.as_secs_f64(),
        requests: r.requests,
        rps,
        p50_us: us(0.5),
        p90_us: us(0.9),
        p99_us: us(0.99),
        p999_us: us(0.999),
        max_us: if empty { 0.0 } else { r.latency.max() as f64 / 1000.0 },
        mean_us: if empty { 0.0 } else { r.latency.mean() / 1000.0 },
        errors: r.errors,
        lost: r.lost,
        bytes_sent: r.bytes_sent,
        bytes_received: r.bytes_received,
        cpu_us_per_req_client: per_req(usage.process),
        cpu_us_per_req_machine: per_req(usage.machine.busy),
        cpu_us_per_req_server: server_cpu.and_then(per_req),
        cpu_us_per_req_server_own_rx: server_cpu.zip(netrx).and_then(|(c, n)| per_req(own_rx(c, n))),
        netrx_us_per_req: netrx.and_then(|n| {
            Some(NetRxPerReq {
                in_server: per_req(n.in_server)?,
                in_client: per_req(n.in_client)?,
                elsewhere: per_req(n.elsewhere)?,
            })
        }),
        syscalls_per_req_server: netrx.filter(|_| server_cpu.is_some()).and_then(|n| per_count(n.server_syscalls)),
        syscalls_per_req_client: netrx.and_then(|n| per_count(n.client_syscalls)),
        cores_client: cores(usage.process),
        cores_machine: cores(usage.machine.busy),
        cores_server: server_cpu.map(cores),
        cpus: apps::online_cpus(),
        server_pid: args.server_pid,
        xsk: None,
        recovery: None,
        churn: (args.pattern != Pattern::Rr).then(|| {
            let us = |q: f64| r.setup_at(q).as_nanos() as f64 / 1000.0;
            apps::ChurnFigures {
                pattern: format!("{:?}", args.pattern).to_lowercase(),
                opened: r.opened,
                failed_connects: r.failed_connects,
                setup_p50_us: us(0.5),
                setup_p99_us: us(0.99),
                setup_max_us: r.setup.max() as f64 / 1000.0,
            }
        }),
    }
}
