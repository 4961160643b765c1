//! The `vm-tests cost` report: its rows and per-case summaries, the xsk/kernel ratios, and
//! its table.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::cost_counts::PerUnit;
use crate::cost_servers as servers;
use crate::report::{Grid, KvTable, ReportHead};

/// One measurement, in rr-demo's row shape (backend, case, round, conns, metrics, errors).
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub backend: String,
    pub case: String,
    pub round: usize,
    pub conns: usize,
    pub kernel: String,
    /// Requests of the long and the short run.
    pub requests: u64,
    pub short_requests: u64,
    /// Host-side rate of the long run (wall clock; TCG, not comparable to hardware).
    pub rps: f64,
    #[serde(flatten)]
    pub per_request: PerUnit,
    /// Guest seconds (its clock) of the long run.
    pub guest_s: f64,
    /// Runs of this measurement (warm-up, short, long) that lost requests.
    pub errors: u64,
    /// System calls per request the server counted itself (uring: io_uring_enter; xsk:
    /// sendto + recvfrom + poll); None for epoll, which counts none.
    #[serde(default)]
    pub syscalls: Option<f64>,
    /// The counters `syscalls` is the sum of, per request.
    #[serde(default)]
    pub server_counters: BTreeMap<String, f64>,
}

/// The median of a case over its rounds.
#[derive(Debug, Clone, Serialize)]
pub struct CaseSummary {
    /// Guest instructions per request, thousands (busy time / 2^shift ns; only with -icount).
    pub kinsn: Option<f64>,
    pub kernel: String,
    pub backend: String,
    pub conns: usize,
    pub rounds: usize,
    #[serde(flatten)]
    pub median: PerUnit,
    /// Spread of the busy CPU per request across rounds, percent.
    pub cpu_spread_pct: f64,
    pub task_spread_pct: f64,
    /// Median of the rounds' system calls per request (None: the server counts none).
    pub syscalls: Option<f64>,
}

/// xsk against one kernel-TCP configuration (or the best of them) at a kernel and connection
/// count.
#[derive(Debug, Clone, Serialize)]
pub struct Ratio {
    pub kernel: String,
    pub conns: usize,
    /// The server compared with: `kernel`, `uring`, `kernel-napi`, `uring-napi`, or `best`
    /// (the kernel-TCP server with the lowest guest CPU per request, named in `best_of`).
    pub against: String,
    pub best_of: Option<String>,
    /// xsk / that server's guest CPU per request (goal: <= 0.5).
    pub cpu_ratio: f64,
    pub cpu_met: bool,
    /// xsk / that server's kicks (tx + rx) and virtio interrupts (in + out) per request.
    pub kicks_ratio: f64,
    pub kicks_met: bool,
    pub irqs_ratio: f64,
    pub irqs_met: bool,
}

/// A server that did not start in a guest: the exact error it gave.
#[derive(Debug, Clone, Serialize)]
pub struct Refusal {
    pub kernel: String,
    pub server: String,
    pub round: usize,
    pub command: String,
    pub error: String,
}

/// What a guest kernel granted a server (rr-server's `io_uring: `, `napi: ` and `kernel busy
/// poll` lines).
#[derive(Debug, Clone, Serialize)]
pub struct Granted {
    pub kernel: String,
    pub server: String,
    pub lines: Vec<String>,
}

/// Goals per kernel and connection count.
#[derive(Debug, Clone, Serialize)]
pub struct Goal {
    pub kernel: String,
    pub conns: usize,
    /// xsk / kernel guest CPU per request (goal: <= 0.5).
    pub cpu_ratio: f64,
    pub cpu_met: bool,
    /// xsk kicks per request <= kernel's.
    pub kicks_met: bool,
    /// xsk virtio interrupts per request <= kernel's.
    pub irqs_met: bool,
}

#[derive(Debug, Default, Serialize)]
pub struct CostReport {
    #[serde(flatten)]
    pub head: ReportHead,
    pub icount: String,
    /// The guest's `-cpu` under TCG.
    pub guest_cpu: String,
    /// Per guest kernel: the string-instruction flags its /proc/cpuinfo shows (erms, fsrm,
    /// fsrs, fzrm, rep_good).
    pub guest_string_flags: Vec<String>,
    pub kernels: Vec<String>,
    pub requests: u64,
    pub runs: usize,
    /// Extra arguments of the xsk server (`--xsk-arg`).
    #[serde(default)]
    pub xsk_args: Vec<String>,
    /// The servers measured (`--servers`); older reports have none: kernel and xsk.
    pub servers: Vec<String>,
    pub rows: Vec<Row>,
    pub cases: Vec<CaseSummary>,
    /// xsk against `kernel` (epoll) only, as before `--servers`.
    pub goals: Vec<Goal>,
    /// xsk against each kernel-TCP server measured and against the best of them.
    pub ratios: Vec<Ratio>,
    /// What each guest kernel granted each server.
    pub granted: Vec<Granted>,
    /// Servers that did not start (the run fails).
    pub refusals: Vec<Refusal>,
    /// Largest spread of busy CPU per request of any case.
    pub max_cpu_spread_pct: f64,
    pub server_stops: Vec<String>,
    /// Runs in which rr-bench did not get every response back.
    pub losses: Vec<String>,
    pub total_s: f64,
    pub logs: String,
}

/// xsk against every kernel-TCP server and against the best of them (lowest guest CPU per
/// request), per kernel and connection count.
pub fn ratios(cases: &[CaseSummary]) -> Vec<Ratio> {
    let mut out = Vec::new();
    for x in cases.iter().filter(|c| c.backend == "xsk") {
        let ks: Vec<&CaseSummary> = cases
            .iter()
            .filter(|c| servers::is_kernel_tcp(&c.backend) && c.kernel == x.kernel && c.conns == x.conns)
            .collect();
        let ratio = |k: &CaseSummary, against: String, best_of: Option<String>| {
            let kicks = |c: &CaseSummary| c.median.tx_kicks + c.median.rx_kicks;
            let irqs = |c: &CaseSummary| c.median.irq_in + c.median.irq_out;
            let cpu_ratio = x.median.cpu_us / k.median.cpu_us;
            Ratio {
                kernel: x.kernel.clone(),
                conns: x.conns,
                against,
                best_of,
                cpu_ratio,
                // A busy time below zero is a broken reading, not a met goal.
                cpu_met: x.median.cpu_us > 0.0 && k.median.cpu_us > 0.0 && cpu_ratio <= 0.5,
                kicks_ratio: kicks(x) / kicks(k),
                kicks_met: kicks(x) <= kicks(k),
                irqs_ratio: irqs(x) / irqs(k),
                irqs_met: irqs(x) <= irqs(k),
            }
        };
        for k in &ks {
            out.push(ratio(k, k.backend.clone(), None));
        }
        let best = ks
            .iter()
            .filter(|k| k.median.cpu_us > 0.0)
            .min_by(|a, b| a.median.cpu_us.total_cmp(&b.median.cpu_us));
        if let (Some(b), true) = (best, ks.len() > 1) {
            out.push(ratio(b, "best".into(), Some(b.backend.clone())));
        }
    }
    out
}

/// The per-request grid (medians over rounds) of `cases`.
pub fn case_grid(cases: &[CaseSummary]) -> String {
    let mut g = Grid::new(&[
        "kernel",
        "backend",
        "conns",
        "kinsn/req",
        "cpu us/req",
        "user",
        "sys",
        "softirq",
        "iowait",
        "task us",
        "spread",
        "kicks tx",
        "kicks rx",
        "irq in",
        "irq out",
        "pkts in",
        "pkts out",
        "sleeps",
        "syscalls",
    ]);
    for c in cases {
        let m = &c.median;
        g.row(vec![
            c.kernel.clone(),
            c.backend.clone(),
            c.conns.to_string(),
            c.kinsn
                .map(|k| format!("{k:.1}"))
                .unwrap_or_else(|| "-".into()),
            format!("{:.1}", m.cpu_us),
            format!("{:.1}", m.user_us),
            format!("{:.1}", m.sys_us),
            format!("{:.1}", m.softirq_us),
            format!("{:.1}", m.iowait_us),
            format!("{:.1}", m.task_us),
            format!("{:.1}%", c.cpu_spread_pct),
            format!("{:.3}", m.tx_kicks),
            format!("{:.3}", m.rx_kicks),
            format!("{:.3}", m.irq_in),
            format!("{:.3}", m.irq_out),
            format!("{:.2}", m.pkts_in),
            format!("{:.2}", m.pkts_out),
            format!("{:.2}", m.sleeps),
            c.syscalls.map(|v| format!("{v:.2}")).unwrap_or_else(|| "-".into()),
        ]);
    }
    g.render()
}

pub fn table(r: &CostReport) -> String {
    let mut t = KvTable::new();
    r.head.rows(&mut t);
    t.row(
        "guest clock",
        format!(
            "TCG, -icount {} (guest time = instructions x 2^shift ns), -cpu {} (string flags {})",
            r.icount,
            r.guest_cpu,
            r.guest_string_flags.join("; ")
        ),
    );
    t.row(
        "load",
        format!(
            "rr-bench in the host namespace, depth 1, 64 B; per case a short run (conns x 4) and a long one ({} requests), difference / requests; {} rounds, servers {} in turn (order rotating)",
            r.requests,
            r.runs,
            r.servers.join(" ")
        ),
    );
    if !r.xsk_args.is_empty() {
        t.row("xsk server", format!("extra arguments: {}", r.xsk_args.join(" ")));
    }
    t.row(
        "max spread",
        format!(
            "{:.2}% (busy CPU per request, (max-min)/median across rounds; target < 2%)",
            r.max_cpu_spread_pct
        ),
    );
    for gl in &r.goals {
        t.row(
            format!("goals {} rr-{}", gl.kernel, gl.conns),
            format!(
                "xsk/kernel CPU {:.2} ({}), kicks {}, interrupts {}",
                gl.cpu_ratio,
                if gl.cpu_met {
                    "<= 0.5: met"
                } else if gl.cpu_ratio > 0.0 {
                    "> 0.5: NOT met"
                } else {
                    "a busy time below zero: not measured"
                },
                if gl.kicks_met {
                    "<= kernel: met"
                } else {
                    "> kernel: NOT met"
                },
                if gl.irqs_met {
                    "<= kernel: met"
                } else {
                    "> kernel: NOT met"
                },
            ),
        );
    }
    for x in &r.ratios {
        let met = |ok: bool| if ok { "" } else { " (NOT met)" };
        t.row(
            format!("xsk/{} {} rr-{}", x.against, x.kernel, x.conns),
            format!(
                "CPU {:.2}{}{}, kicks {:.2}{}, interrupts {:.2}{}",
                x.cpu_ratio,
                x.best_of.as_deref().map(|b| format!(" (best: {b})")).unwrap_or_default(),
                met(x.cpu_met),
                x.kicks_ratio,
                met(x.kicks_met),
                x.irqs_ratio,
                met(x.irqs_met)
            ),
        );
    }
    for gr in &r.granted {
        for l in &gr.lines {
            t.row(format!("granted {} {}", gr.kernel, gr.server), l.clone());
        }
    }
    for f in &r.refusals {
        t.row(format!("REFUSED {} {}", f.kernel, f.server), format!("{} ({})", f.error, f.command));
    }
    t.row("time", format!("{:.0} s", r.total_s));
    t.row("logs", r.logs.clone());
    let mut s = t.render("vm-tests cost");
    s.push_str("  per request (medians; cpu = guest busy time, user/sys/softirq = tick samples, task = server's schedstat;\n  iowait = idle with a task in io_schedule, not in cpu;\n  sleeps = the server's voluntary context switches; syscalls = what the server counts: uring io_uring_enter, xsk sendto+recvfrom+poll, epoll epoll_wait+accept4+recv+send):\n");
    s.push_str(&case_grid(&r.cases));
    s
}
