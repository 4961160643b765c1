//! `vm-tests cost`: what the guest spends per request, measured deterministically.
//!
//! The server guest runs under TCG with `-icount shift=N` (a fixed shift: every guest
//! instruction advances the guest's clock by 2^N ns), so the guest's own CPU accounting counts
//! instructions, not host speed. The client (rr-bench) runs in the host namespace behind the
//! tap, so the guest holds only the server. For each server of `--servers` (kernel TCP
//! through epoll or io_uring, each also with the NAPI IRQ-suspension settings, and the xsk
//! stack; see [`crate::cost_servers`]), at each
//! connection count, depth 1, 64-byte requests, the guest helper `vmt-stats` snapshots
//! /proc/stat, /proc/uptime, the virtio rows of /proc/interrupts, virtio_net's driver
//! statistics (ETHTOOL_GSTATS: per-queue packets and kicks) and the server's
//! /proc/PID/schedstat around two runs: a short one (`conns x 4` requests) and a long one.
//! Their difference divided by the difference in requests is the cost of one request without
//! the connections' setup and teardown (and without the snapshots' own cost). A warm-up run
//! with the same connection count goes first.
//!
//! Per request: guest CPU busy (elapsed - idle, both from the guest's clock), split into
//! user/system/softirq by /proc/stat's tick samples, the server task's run time, TX and RX
//! kicks, virtio interrupts (input and output queues), packets each way, the server's sleeps
//! (voluntary context switches) and the system calls it counts itself (read from its SIGUSR1
//! counter dumps). Each case runs `--runs` times, the servers taking turns in an order that
//! rotates every round; the spread (max - min) / median of the busy time
//! per request across runs is the determinism check.

use std::collections::BTreeMap;
use std::net::SocketAddrV4;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::env::{Common, Env, KernelSet};
use crate::guest::{Accel, Guest, OFFLOADS_OFF};
use crate::kernel::KernelSel;
use crate::load::{self, Bench, BenchArgs};
use crate::netns::HostNet;
use crate::report::{ReportHead, Grid, KvTable};
use crate::cost_servers::{self as servers, SERVERS};
use crate::server;
use crate::util::{check_interrupted, median};

/// USER_HZ of /proc/stat (100 on x86).
const USER_HZ_US: f64 = 10_000.0;

#[derive(clap::Args, Debug, Clone)]
pub struct CostArgs {
    #[command(flatten)]
    pub common: Common,
    /// Guest kernels (6.1, new, batch; comma-separated, or all = 6.1,new).
    #[arg(long, value_delimiter = ',', default_value = "6.1,new")]
    pub kernels: Vec<String>,
    /// Connection counts (depth 1 each).
    #[arg(long, value_delimiter = ',', default_value = "1,16,256")]
    pub conns: Vec<usize>,
    /// Requests of the long run of each measurement (the short run has conns x 4).
    #[arg(long, value_name = "N", default_value_t = 4000)]
    pub requests: u64,
    /// Measurements per case; the servers take turns, the order rotating every round (for
    /// two: A B, B A).
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub runs: usize,
    /// QEMU -icount value ("off": no instruction counting, plain multi-threaded TCG).
    #[arg(long, value_name = "SPEC", default_value = "shift=4")]
    pub icount: String,
    /// Servers to measure, each alone in the guest in turn: kernel (rr-server --backend
    /// kernel: epoll), uring (--backend uring: kernel TCP through io_uring, Linux 6.0+),
    /// kernel-napi and uring-napi (the same with --irq-suspend on the guest's eth0: the NAPI
    /// settings for IRQ suspension and prefer-busy-poll with a budget), xsk (the stack).
    #[arg(long, value_delimiter = ',', default_value = "kernel,uring,xsk", value_parser = SERVERS)]
    pub servers: Vec<String>,
    /// Do not ask the servers for their counters (SIGUSR1) around the snapshots: no
    /// `syscalls` column.
    #[arg(long)]
    pub no_syscalls: bool,
    /// XDP attach mode of the xsk server.
    #[arg(long, default_value = "drv", value_parser = ["skb", "drv", "auto"])]
    pub attach: String,
    /// Guest offloads: off (as smoke) or on (QEMU defaults).
    #[arg(long, default_value = "off", value_parser = ["off", "on"])]
    pub offloads: String,
    /// The short CI variant: only the first kernel, 1 and 16 connections, 2 runs, 1,000
    /// requests.
    #[arg(long)]
    pub short: bool,
    /// Open loop: this many requests per second in total over the connections, whatever the
    /// responses do (a lightly loaded server: every request finds it idle). Default: closed
    /// loop, each connection sends its next request when the response is back.
    #[arg(long, value_name = "REQ/S")]
    pub rate: Option<f64>,
    /// An extra argument for the xsk rr-server (repeat for more), e.g.
    /// `--xsk-arg=--no-defer-acks` to compare a stack option against its default.
    #[arg(long, value_name = "ARG", allow_hyphen_values = true)]
    pub xsk_arg: Vec<String>,
    /// Also record where the guest's time goes: perf (cpu-clock samples over the whole guest,
    /// kernel and user) during each long run, its report written to the run folder as
    /// `<case>-perf.txt`. Under -icount a sample stands for a fixed number of guest
    /// instructions. Needs the host's perf (linux-perf), which the guest then carries (its
    /// memory is raised to 512 MB for it). The sampling adds work of its own: take the
    /// profiles from such a run, and the cost figures from a run without it.
    #[arg(long)]
    pub profile: bool,
    /// Give the guest CPU ERMS, as QEMU's `max` model has. By default the cost guest runs on
    /// `max,-erms,-fsrm`, so its kernel clears and copies memory with `rep stosq`/`rep movsq`:
    /// -icount counts a rep instruction once per iteration, and with ERMS the kernel's
    /// `rep stosb` clears a 4 KB page as 4,096 instructions (~65 us at shift=4; ~40 ns on
    /// hardware). That overcharges the side that clears or copies more bytes: native XDP on
    /// virtio_net takes a 4 KB receive buffer per packet, and Debian's kernels zero each new
    /// page (init_on_alloc). See docs/2026-12-04-guest-rep-strings.
    #[arg(long)]
    pub erms: bool,
}

/// One `vmt-stats` snapshot.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub struct Snap {
    pub mono_ns: u64,
    #[serde(default)]
    pub cpu_ticks: Vec<u64>,
    #[serde(default)]
    pub idle_s: f64,
    #[serde(default)]
    pub irqs: BTreeMap<String, u64>,
    #[serde(default)]
    pub eth: BTreeMap<String, u64>,
    #[serde(default)]
    pub eth_error: Option<String>,
    #[serde(default)]
    pub sched_ns: BTreeMap<String, u64>,
    #[serde(default)]
    pub dev_rx_packets: u64,
    #[serde(default)]
    pub dev_tx_packets: u64,
    /// Online CPUs (0 from a vmt-stats that did not count them: taken as 1).
    #[serde(default)]
    pub cpus: u32,
    /// Voluntary context switches of the server's threads (its sleeps).
    #[serde(default)]
    pub vol_switches: BTreeMap<String, u64>,
    /// The server's own counters (its SIGUSR1 dump), when asked for (`--dump`).
    #[serde(default)]
    pub counters: Option<BTreeMap<String, f64>>,
    #[serde(default)]
    pub counters_error: Option<String>,
}

/// Takes a snapshot in the guest; `pids` is shell text (e.g. `$PID_cost_xsk`).
pub fn snap(g: &mut Guest, pids: &str) -> Result<Snap> {
    snap_with(g, pids, None)
}

/// [`snap`], first asking a server for its counters: `dump` is vmt-stats' `--dump=PID:LOG`.
pub fn snap_with(g: &mut Guest, pids: &str, dump: Option<&str>) -> Result<Snap> {
    let out = g.exec_ok(
        &format!("vmt-stats eth0 {pids}{}", dump.map(|d| format!(" {d}")).unwrap_or_default()),
        Duration::from_secs(30),
    )?;
    let line = out
        .lines()
        .find_map(|l| l.trim().strip_prefix("VMT-STATS "))
        .with_context(|| {
            format!("vmt-stats printed no VMT-STATS line (is it in the initramfs?): {out}")
        })?;
    let s: Snap = serde_json::from_str(line).context("parsing vmt-stats output")?;
    if let Some(e) = s.eth_error.as_ref().or(s.counters_error.as_ref()) {
        bail!("{e}");
    }
    Ok(s)
}

/// Counter sums of one snapshot that the cost is made of.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Counts {
    pub virt_ns: f64,
    /// CPU time the guest had: elapsed x CPUs (idle is summed over the CPUs).
    pub cap_ns: f64,
    pub idle_ns: f64,
    pub user_ticks: f64,
    pub sys_ticks: f64,
    pub irq_ticks: f64,
    pub softirq_ticks: f64,
    /// /proc/stat's iowait: idle time while a task waits in io_schedule (io_uring's wait for
    /// completions in 6.1), not counted in /proc/uptime's idle.
    pub iowait_ticks: f64,
    pub task_ns: f64,
    pub tx_kicks: f64,
    pub rx_kicks: f64,
    pub irq_in: f64,
    pub irq_out: f64,
    pub pkts_in: f64,
    pub pkts_out: f64,
    pub sleeps: f64,
}

/// A virtio_net per-queue statistic of direction `dir` ("rx"/"tx") ending in `what`; 6.1 names
/// them `rx_queue_0_kicks`, later kernels `rx0_kicks`: both start with the direction and carry
/// a queue number.
fn queue_stat(name: &str, dir: &str, what: &str) -> bool {
    name.starts_with(dir)
        && name.ends_with(what)
        && name.chars().any(|c| c.is_ascii_digit())
        && !name.contains("xdp")
}

impl Snap {
    pub fn counts(&self) -> Counts {
        let t = |i: usize| self.cpu_ticks.get(i).copied().unwrap_or(0) as f64;
        let sum_eth = |dir: &str, what: &str| -> f64 {
            self.eth
                .iter()
                .filter(|(k, _)| queue_stat(k, dir, what))
                .map(|(_, v)| *v as f64)
                .sum()
        };
        let sum_irq = |what: &str| -> f64 {
            self.irqs
                .iter()
                .filter(|(k, _)| k.contains(what))
                .map(|(_, v)| *v as f64)
                .sum()
        };
        Counts {
            virt_ns: self.mono_ns as f64,
            cap_ns: self.mono_ns as f64 * f64::from(self.cpus.max(1)),
            idle_ns: self.idle_s * 1e9,
            user_ticks: t(0) + t(1),
            sys_ticks: t(2),
            irq_ticks: t(5),
            softirq_ticks: t(6),
            iowait_ticks: t(4),
            task_ns: self.sched_ns.values().map(|v| *v as f64).sum(),
            tx_kicks: sum_eth("tx", "kicks"),
            rx_kicks: sum_eth("rx", "kicks"),
            irq_in: sum_irq("-input."),
            irq_out: sum_irq("-output."),
            pkts_in: self.dev_rx_packets as f64,
            pkts_out: self.dev_tx_packets as f64,
            sleeps: self.vol_switches.values().map(|v| *v as f64).sum(),
        }
    }
}

/// What one unit (a request, a packet) cost the guest.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct PerUnit {
    /// Guest CPU busy (elapsed x CPUs - idle, on the guest's clock), µs.
    pub cpu_us: f64,
    /// The tick-sampled split of /proc/stat, µs.
    pub user_us: f64,
    pub sys_us: f64,
    pub softirq_us: f64,
    pub irq_us: f64,
    /// Idle time with a task in io_schedule (/proc/stat's iowait, 10 ms resolution), µs; not
    /// in `cpu_us`. io_uring's wait for completions counts so in the 6.1 guest.
    pub iowait_us: f64,
    /// The server task's run time (schedstat), µs.
    pub task_us: f64,
    pub tx_kicks: f64,
    pub rx_kicks: f64,
    pub irq_in: f64,
    pub irq_out: f64,
    pub pkts_in: f64,
    pub pkts_out: f64,
    /// The server's voluntary context switches: the times it went to sleep (an epoll_wait,
    /// io_uring_enter or poll that blocked).
    pub sleeps: f64,
}

impl PerUnit {
    /// (b - a) / units, counter by counter.
    pub fn between(a: &Counts, b: &Counts, units: f64) -> PerUnit {
        let d = |f: fn(&Counts) -> f64| (f(b) - f(a)) / units;
        let virt = d(|c| c.cap_ns);
        let idle = d(|c| c.idle_ns);
        // /proc/uptime's idle leaves out iowait (idle CPUs with a task in io_schedule): that
        // is not busy either.
        let iowait_us = d(|c| c.iowait_ticks) * USER_HZ_US;
        PerUnit {
            cpu_us: (virt - idle) / 1e3 - iowait_us,
            iowait_us,
            user_us: d(|c| c.user_ticks) * USER_HZ_US,
            sys_us: d(|c| c.sys_ticks) * USER_HZ_US,
            softirq_us: d(|c| c.softirq_ticks) * USER_HZ_US,
            irq_us: d(|c| c.irq_ticks) * USER_HZ_US,
            task_us: d(|c| c.task_ns) / 1e3,
            tx_kicks: d(|c| c.tx_kicks),
            rx_kicks: d(|c| c.rx_kicks),
            irq_in: d(|c| c.irq_in),
            irq_out: d(|c| c.irq_out),
            pkts_in: d(|c| c.pkts_in),
            pkts_out: d(|c| c.pkts_out),
            sleeps: d(|c| c.sleeps),
        }
    }

    /// a - b counter by counter (the long run minus the short one).
    fn minus(a: &PerUnit, b: &PerUnit) -> PerUnit {
        PerUnit {
            cpu_us: a.cpu_us - b.cpu_us,
            user_us: a.user_us - b.user_us,
            sys_us: a.sys_us - b.sys_us,
            softirq_us: a.softirq_us - b.softirq_us,
            irq_us: a.irq_us - b.irq_us,
            iowait_us: a.iowait_us - b.iowait_us,
            task_us: a.task_us - b.task_us,
            tx_kicks: a.tx_kicks - b.tx_kicks,
            rx_kicks: a.rx_kicks - b.rx_kicks,
            irq_in: a.irq_in - b.irq_in,
            irq_out: a.irq_out - b.irq_out,
            pkts_in: a.pkts_in - b.pkts_in,
            pkts_out: a.pkts_out - b.pkts_out,
            sleeps: a.sleeps - b.sleeps,
        }
    }

    /// Replaces user/sys/softirq/irq by `shares`' proportions of `self.cpu_us`.
    pub fn split_by(&mut self, shares: &PerUnit) {
        let sum = shares.user_us + shares.sys_us + shares.softirq_us + shares.irq_us;
        if sum <= 0.0 {
            return;
        }
        let k = self.cpu_us / sum;
        self.user_us = shares.user_us * k;
        self.sys_us = shares.sys_us * k;
        self.softirq_us = shares.softirq_us * k;
        self.irq_us = shares.irq_us * k;
    }

    fn scale(&self, k: f64) -> PerUnit {
        PerUnit {
            cpu_us: self.cpu_us * k,
            user_us: self.user_us * k,
            sys_us: self.sys_us * k,
            softirq_us: self.softirq_us * k,
            irq_us: self.irq_us * k,
            iowait_us: self.iowait_us * k,
            task_us: self.task_us * k,
            tx_kicks: self.tx_kicks * k,
            rx_kicks: self.rx_kicks * k,
            irq_in: self.irq_in * k,
            irq_out: self.irq_out * k,
            pkts_in: self.pkts_in * k,
            pkts_out: self.pkts_out * k,
            sleeps: self.sleeps * k,
        }
    }

    /// Field-wise median of `v`.
    pub fn median_of(v: &[PerUnit]) -> PerUnit {
        let m = |f: fn(&PerUnit) -> f64| median(&v.iter().map(f).collect::<Vec<_>>());
        PerUnit {
            cpu_us: m(|p| p.cpu_us),
            user_us: m(|p| p.user_us),
            sys_us: m(|p| p.sys_us),
            softirq_us: m(|p| p.softirq_us),
            irq_us: m(|p| p.irq_us),
            iowait_us: m(|p| p.iowait_us),
            task_us: m(|p| p.task_us),
            tx_kicks: m(|p| p.tx_kicks),
            rx_kicks: m(|p| p.rx_kicks),
            irq_in: m(|p| p.irq_in),
            irq_out: m(|p| p.irq_out),
            pkts_in: m(|p| p.pkts_in),
            pkts_out: m(|p| p.pkts_out),
            sleeps: m(|p| p.sleeps),
        }
    }
}

/// N of an `-icount` value `shift=N[,...]` (None for auto or off).
pub fn icount_shift(spec: &str) -> Option<u32> {
    spec.split(',')
        .find_map(|p| p.strip_prefix("shift=")?.parse().ok())
        .filter(|s| *s < 16)
}

/// (max - min) / median of `v`, in percent.
pub fn spread_pct(v: &[f64]) -> f64 {
    if v.len() < 2 {
        return 0.0;
    }
    let max = v.iter().cloned().fold(f64::MIN, f64::max);
    let min = v.iter().cloned().fold(f64::MAX, f64::min);
    100.0 * (max - min) / median(v).abs()
}

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

/// A booted guest under icount for measuring.
pub fn boot_counted(
    env: &Env,
    ks: &KernelSet,
    net: &HostNet,
    name: &str,
    icount: &str,
    offloads: &str,
    erms: bool,
) -> Result<Guest> {
    let nic = if offloads == "off" { OFFLOADS_OFF } else { "" };
    let mut spec = env.spec_for(ks, &format!("{}-{name}", ks.sel.label()), net, nic);
    spec.erms = erms;
    if icount != "off" {
        spec.icount = Some(icount.to_string());
    }
    let g = Guest::boot(&spec, net, Accel::Tcg)?;
    eprintln!(
        "vm-tests: {} guest up in {:.1} s (-icount {icount}): {}",
        ks.sel.label(),
        g.boot_secs,
        g.up_line
    );
    Ok(g)
}

/// The load of one measured case: where, how many connections (depth 1 each), how many
/// requests in the long run, and an open-loop rate (None: closed loop).
#[derive(Clone, Copy, Debug)]
pub struct RrLoad {
    pub dst: SocketAddrV4,
    pub conns: usize,
    pub requests: u64,
    pub rate: Option<f64>,
}

/// One measured request/response case: snapshot, short run, snapshot, long run, snapshot.
/// Returns the cost of one request (long minus short) and the long run's result.
pub fn measure_rr(
    env: &Env,
    net: &HostNet,
    g: &mut Guest,
    pids: &str,
    case: RrLoad,
    tag: &str,
) -> Result<Measured> {
    measure_rr_dumped(env, net, g, pids, case, tag, None).map(|(m, _)| m)
}

/// The server's counters at the three snapshots (see [`measure_rr_dumped`]).
pub type Dumps = [BTreeMap<String, f64>; 3];

/// What [`measure_rr`] returns: per request, the long run, the short run's requests, the long
/// run's guest seconds, the runs that lost requests.
pub type Measured = (PerUnit, load::LoadResult, u64, f64, Vec<String>);

/// [`measure_rr`], and with each snapshot the server's counters (`dump`: vmt-stats'
/// `--dump=PID:LOG`, see [`crate::cost_servers::dump_arg`]): the same work at each of the
/// three snapshots, so its cost cancels in the difference.
pub fn measure_rr_dumped(
    env: &Env,
    net: &HostNet,
    g: &mut Guest,
    pids: &str,
    case: RrLoad,
    tag: &str,
    dump: Option<&str>,
) -> Result<(Measured, Option<Dumps>)> {
    let snap = |g: &mut Guest, pids: &str| snap_with(g, pids, dump);
    let RrLoad { dst, conns, requests, rate } = case;
    let short = (conns as u64 * 4).max(8).min(requests / 2);
    let lost = std::cell::RefCell::new(Vec::new());
    let limit = Duration::from_secs(120);
    let run = |n: u64, which: &str| -> Result<load::LoadResult> {
        let b = BenchArgs {
            connect: dst,
            conns,
            depth: 1,
            req_size: 64,
            duration: limit,
            max_requests: Some(n),
            // TCG is slow: a response that needed a retransmission may come late.
            drain_timeout: Some(Duration::from_secs(10)),
            rate,
        };
        match load::rr_bench(
            &env.bin_dir,
            net,
            &b,
            &env.run_dir.join(format!("{tag}-{which}.json")),
        )? {
            Bench::Ran(r) => {
                // Losses are recorded, not fatal: the case's figures still stand for the
                // requests that were answered, and the scenario fails at the end.
                if let Some(s) = r.shortfall(n) {
                    lost.borrow_mut().push(format!("{tag} ({which} run): {s}"));
                }
                Ok(r)
            }
            Bench::Unusable(why) => bail!("rr-bench is needed for the cost scenario: {why}"),
        }
    };
    // Warm-up with the same connection count: the first time a server sees N connections it
    // grows tables and faults in buffers, which the short run would otherwise pay alone.
    run(short, "warmup")?;
    // Let the previous run's connections finish closing (retransmissions after a loss, FIN
    // handshakes) before the snapshot, so their work is not charged to the next run.
    let settle = |g: &mut Guest| g.exec_ok("sleep 1", Duration::from_secs(20)).map(|_| ());
    settle(g)?;
    let perf = if env.common.guest_perf { Some(GuestPerf::start(g)?) } else { None };
    let s0 = snap(g, pids)?;
    let r_short = run(short, "short")?;
    settle(g)?;
    let s1 = snap(g, pids)?;
    if let Some(p) = &perf {
        p.switch(g, "enable")?;
    }
    let r_long = run(requests, "long");
    let r_long = match &perf {
        Some(p) => {
            let off = p.switch(g, "disable");
            // The load's error first, when both failed.
            let r = r_long?;
            off?;
            r
        }
        None => r_long?,
    };
    settle(g)?;
    let s2 = snap(g, pids)?;
    if let Some(p) = perf {
        p.finish(env, g, tag)?;
    }
    let (c0, c1, c2) = (s0.counts(), s1.counts(), s2.counts());
    // cost(long) - cost(short) = (requests - short) x per-request cost; the fixed part
    // (connection setup/teardown, the snapshot itself) cancels.
    let long_total = PerUnit::between(&c1, &c2, 1.0);
    let short_total = PerUnit::between(&c0, &c1, 1.0);
    let mut per = PerUnit::minus(&long_total, &short_total)
        .scale(1.0 / (r_long.requests as f64 - r_short.requests as f64));
    // The user/sys/softirq split comes from tick samples (HZ), too coarse to difference: the
    // long run's shares of the samples split the (exact) busy time.
    per.split_by(&long_total);
    let guest_s = (c2.virt_ns - c1.virt_ns) / 1e9;
    let dumps = match (s0.counters, s1.counters, s2.counters) {
        (Some(a), Some(b), Some(c)) => Some([a, b, c]),
        _ => None,
    };
    Ok(((per, r_long, short, guest_s, lost.into_inner()), dumps))
}

/// Samples per second of guest time (under -icount, of guest instructions).
const PERF_HZ: u32 = 2_000;
const PERF_DATA: &str = "/tmp/perf.data";
const PERF_LOG: &str = "/tmp/perf-record.log";

/// `perf record` in the guest for `cost --profile`. It is started, with its events off, before
/// a case's first snapshot and stopped after its last, so its own start and stop (seconds of
/// guest time under TCG) fall outside the measured runs; its events are switched on for the
/// long run only, through perf's control fifo (held open by the guest's shell on fds 7 and 8,
/// so no open blocks), and each switch waits for perf's ack.
struct GuestPerf;

impl GuestPerf {
    fn start(g: &mut Guest) -> Result<GuestPerf> {
        let out = g.exec(
            &format!(
                "[ -n \"$PERF_PID\" ] && kill -INT $PERF_PID 2>/dev/null && wait $PERF_PID; \
                 rm -f {PERF_DATA} {PERF_LOG} /tmp/perf-ctl /tmp/perf-ack; mkfifo /tmp/perf-ctl /tmp/perf-ack; \
                 exec 7<>/tmp/perf-ctl 8<>/tmp/perf-ack; \
                 perf record -a -F {PERF_HZ} -m 512 -e cpu-clock -D -1 --control fd:7,8 -o {PERF_DATA} \
                 < /dev/null > {PERF_LOG} 2>&1 & PERF_PID=$!; \
                 echo ping >&7; ack=; read -t 100 ack <&8; [ \"$ack\" = ack ] || {{ cat {PERF_LOG}; false; }}"
            ),
            Duration::from_secs(150),
        )?;
        if out.status != 0 {
            bail!("perf record did not start in the guest: {}", out.output.trim());
        }
        Ok(GuestPerf)
    }

    /// `enable` or `disable` the events.
    fn switch(&self, g: &mut Guest, what: &str) -> Result<()> {
        let out = g.exec(
            &format!("echo {what} >&7; ack=; read -t 30 ack <&8; [ \"$ack\" = ack ] || {{ kill -0 $PERF_PID; cat {PERF_LOG}; false; }}"),
            Duration::from_secs(60),
        )?;
        if out.status != 0 {
            bail!("perf record in the guest did not {what} its events: {}", out.output.trim());
        }
        Ok(())
    }

    /// Stops perf and writes its report, by command and by command and symbol, to
    /// `<run_dir>/<tag>-perf.txt`.
    fn finish(self, env: &Env, g: &mut Guest, tag: &str) -> Result<()> {
        // perf re-raises SIGINT when it is done, so its exit status says nothing; its log does.
        let stop = g.exec(
            &format!(
                "kill -INT $PERF_PID; wait $PERF_PID; PERF_PID=; exec 7>&- 8>&-; rm -f /tmp/perf-ctl /tmp/perf-ack; \
                 grep -q 'Captured and wrote' {PERF_LOG} && tail -2 {PERF_LOG}"
            ),
            Duration::from_secs(120),
        )?;
        if stop.status != 0 {
            bail!("perf record in the guest wrote no profile: {}", stop.output.trim());
        }
        let wait = Duration::from_secs(600);
        let mut report = |sort: &str| -> Result<String> {
            let out = g.exec(
                &format!(
                    "perf report -i {PERF_DATA} --stdio --no-children --sort {sort} --percent-limit 0.05 > /tmp/perf-report.txt 2>&1 \
                     && grep -v '^#' /tmp/perf-report.txt | grep -v '^$' | head -300"
                ),
                wait,
            )?;
            if out.status != 0 {
                bail!("perf report in the guest failed: {}", out.output.trim());
            }
            Ok(out.output)
        };
        let by_comm = report("comm,dso")?;
        // By command too: the packets' kernel work runs in the server's context (the softirqs
        // on its way back from a syscall), in the idle task's (an interrupt on an idle CPU) or
        // in ksoftirqd's.
        let by_sym = report("comm,sym")?;
        let _ = g.exec(&format!("rm -f {PERF_DATA} {PERF_LOG} /tmp/perf-report.txt"), Duration::from_secs(30));
        let text = format!(
            "# perf record -a -F {PERF_HZ} -e cpu-clock during the long run of {tag} (samples of guest time; the whole guest; percentages of all samples)\n# {}\n\n## by command and object\n{by_comm}\n\n## by command and symbol\n{by_sym}\n",
            stop.output.trim().replace('\n', "\n# ")
        );
        let path = env.run_dir.join(format!("{tag}-perf.txt"));
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
        eprintln!("vm-tests: guest profile of {tag} in {}", path.display());
        Ok(())
    }
}

/// Runs the cost scenario; Ok(true) when every run completed cleanly.
pub fn run(args: &CostArgs) -> Result<bool> {
    let mut a = args.clone();
    if a.short {
        a.kernels.truncate(1);
        a.conns = vec![1, 16];
        a.runs = 2;
        a.requests = 1000;
    }
    if a.profile {
        a.common.guest_perf = true;
        a.common.mem_mb = a.common.mem_mb.max(512);
    }
    let sels = KernelSel::parse_list(&a.kernels)?;
    let env = Env::prepare_kernels(&a.common, "cost", &sels)?;
    let mut rep = CostReport {
        head: env.report_head("cost"),
        icount: a.icount.clone(),
        guest_cpu: crate::guest::tcg_cpu(a.erms).into(),
        kernels: sels.iter().map(|s| s.label().to_string()).collect(),
        requests: a.requests,
        runs: a.runs,
        xsk_args: a.xsk_arg.clone(),
        servers: a.servers.clone(),
        logs: env.run_dir.display().to_string(),
        ..CostReport::default()
    };
    let outcome = (|| -> Result<()> {
        for ks in &env.kernels {
            body(&env, ks, &a, &mut rep)?;
        }
        if !rep.losses.is_empty() {
            bail!("requests lost: {}", rep.losses.join("; "));
        }
        if !rep.refusals.is_empty() {
            let v: Vec<String> = rep
                .refusals
                .iter()
                .map(|r| format!("{} rr-server did not start in the {} guest: {}", r.server, r.kernel, r.error))
                .collect();
            bail!("{}", v.join("; "));
        }
        Ok(())
    })();
    summarize(&mut rep);
    rep.total_s = env.started.elapsed().as_secs_f64();
    rep.head.record(&outcome);
    print!("{}", table(&rep));
    env.publish("cost", &serde_json::to_value(&rep)?)?;
    Ok(outcome.is_ok())
}

fn body(env: &Env, ks: &KernelSet, a: &CostArgs, rep: &mut CostReport) -> Result<()> {
    let net = HostNet::create()?;
    let mut g = boot_counted(env, ks, &net, "cost", &a.icount, &a.offloads, a.erms)?;
    let label = ks.sel.label().to_string();
    // What the guest kernel sees decides how it clears and copies (see `--erms`); a newer QEMU
    // may add flags that `-erms,-fsrm` does not take away.
    let flags = g.exec_ok(
        "grep -o -w -E 'erms|fsrm|fsrs|fzrm|rep_good' /proc/cpuinfo | sort -u | tr '\\n' ' '; echo",
        Duration::from_secs(20),
    )?;
    let flags = flags.split_whitespace().collect::<Vec<_>>().join(" ");
    if !a.erms && flags.split(' ').any(|f| ["erms", "fsrm", "fsrs", "fzrm"].contains(&f)) {
        eprintln!("vm-tests: note: the {label} guest's CPU still has {flags}: its kernel may clear or copy with rep stosb/movsb, which -icount charges per byte");
    }
    rep.guest_string_flags.push(format!("{label}: {}", if flags.is_empty() { "none" } else { &flags }));
    let port = 7000;
    // A server that did not start in this guest is not tried again in later rounds.
    let mut refused: Vec<String> = Vec::new();
    for round in 0..a.runs {
        // The order rotates every round (two servers: A B A B).
        for server in servers::order(&a.servers, round) {
            check_interrupted()?;
            if refused.contains(&server) {
                continue;
            }
            let s = servers::spec(&server, port, &a.attach, &a.xsk_arg);
            let tag = s.tag.clone();
            match server::start(&mut g, &s)? {
                Ok(_) => {}
                Err(r) => {
                    let command = r.command.clone();
                    let why = r.reason();
                    eprintln!("vm-tests: cost {label} {server}: rr-server did not start: {why}");
                    rep.refusals.push(Refusal {
                        kernel: label.clone(),
                        server: server.clone(),
                        round,
                        command,
                        error: why,
                    });
                    refused.push(server);
                    continue;
                }
            }
            let dump = (!a.no_syscalls).then(|| servers::dump_arg(&tag));
            let dst = SocketAddrV4::new(net.guest_addr, port);
            let mut failed = None;
            for &conns in &a.conns {
                let case_tag = format!("{label}-{server}-c{conns}-r{round}");
                match measure_rr_dumped(
                    env,
                    &net,
                    &mut g,
                    &format!("$PID_{tag}"),
                    RrLoad { dst, conns, requests: a.requests, rate: a.rate },
                    &case_tag,
                    dump.as_deref(),
                ) {
                    Ok(((per, r, short, guest_s, lost), dumps)) => {
                        let errors = lost.len() as u64;
                        rep.losses.extend(lost);
                        eprintln!(
                            "vm-tests: cost {label} {server:11} conns {conns:3} round {round}: {:.1} us/req busy (task {:.1}), kicks tx {:.2} rx {:.2}, irqs in {:.2} out {:.2}, sleeps {:.2}",
                            per.cpu_us, per.task_us, per.tx_kicks, per.rx_kicks, per.irq_in, per.irq_out, per.sleeps
                        );
                        let names = servers::syscall_counters(&server);
                        let counted = dumps.as_ref().and_then(|d| servers::per_request(d, names, r.requests, short));
                        if dump.is_some() && counted.is_none() {
                            eprintln!("vm-tests: cost {label} {server} conns {conns} round {round}: no system-call count (counters {names:?} missing)");
                        }
                        rep.rows.push(Row {
                            backend: server.clone(),
                            case: match a.rate {
                                Some(r) => format!("open-{r}-{conns}"),
                                None => format!("rr-{conns}"),
                            },
                            round,
                            conns,
                            kernel: label.clone(),
                            requests: r.requests,
                            short_requests: short,
                            rps: r.rps,
                            per_request: per,
                            guest_s,
                            errors,
                            syscalls: counted.as_ref().map(|m| m.values().sum()),
                            server_counters: counted.unwrap_or_default(),
                        });
                    }
                    Err(e) => {
                        failed = Some(e);
                        break;
                    }
                }
            }
            let st = server::stop(&mut g, &s)?;
            let _ = std::fs::write(
                env.run_dir.join(format!("{label}-{tag}-r{round}.log")),
                &st.log,
            );
            let mut grants = servers::grant_lines(&st.log);
            if server.starts_with("uring") {
                // The ring's fd is registered on the polling thread, after the `io_uring:`
                // line: the summary's `uring.features` at exit is the final word.
                // (echo: the pretty JSON has no final newline, and the end marker must start a line)
                let json = g.exec(&format!("cat /tmp/{tag}.json; echo"), Duration::from_secs(20))?;
                grants.extend(servers::uring_exit_features(&json.output));
            }
            if !grants.is_empty()
                && !rep.granted.iter().any(|x| x.kernel == label && x.server == server && x.lines == grants)
            {
                for l in &grants {
                    eprintln!("vm-tests: cost {label} {server}: {l}");
                }
                rep.granted.push(Granted { kernel: label.clone(), server: server.clone(), lines: grants });
            }
            let unclean = if server == "xsk" {
                st.unclean()
            } else {
                (st.exit_status != 0).then(|| format!("exit status {}", st.exit_status))
            };
            let deferred = st.deferred_acks();
            if let Some(d) = &deferred {
                eprintln!("vm-tests: cost {label} {server:6} round {round}: deferred ACKs {d}");
            }
            rep.server_stops.push(format!(
                "{label} {server} round {round}: status {}{}{}",
                st.exit_status,
                st.frame_audit
                    .as_deref()
                    .map(|f| format!(", {f}"))
                    .unwrap_or_default(),
                deferred
                    .map(|d| format!(", deferred ACKs {d}"))
                    .unwrap_or_default()
            ));
            if let Some(e) = failed {
                return Err(e);
            }
            if let Some(u) = unclean {
                bail!("{label} {server} rr-server: {u}");
            }
        }
    }
    let _ = g.poweroff();
    Ok(())
}

fn summarize(rep: &mut CostReport) {
    let mut keys: Vec<(String, String, usize)> = Vec::new();
    for r in &rep.rows {
        let k = (r.kernel.clone(), r.backend.clone(), r.conns);
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    rep.cases.clear();
    for (kernel, backend, conns) in keys {
        let rows: Vec<&Row> = rep
            .rows
            .iter()
            .filter(|r| r.kernel == kernel && r.backend == backend && r.conns == conns)
            .collect();
        let per: Vec<PerUnit> = rows.iter().map(|r| r.per_request).collect();
        let m = PerUnit::median_of(&per);
        rep.cases.push(CaseSummary {
            kinsn: icount_shift(&rep.icount).map(|s| m.cpu_us * 1e3 / f64::from(1u32 << s) / 1e3),
            kernel,
            backend,
            conns,
            rounds: rows.len(),
            median: PerUnit::median_of(&per),
            cpu_spread_pct: spread_pct(&per.iter().map(|p| p.cpu_us).collect::<Vec<_>>()),
            task_spread_pct: spread_pct(&per.iter().map(|p| p.task_us).collect::<Vec<_>>()),
            syscalls: {
                let v: Vec<f64> = rows.iter().filter_map(|r| r.syscalls).collect();
                (!v.is_empty()).then(|| median(&v))
            },
        });
    }
    rep.max_cpu_spread_pct = rep
        .cases
        .iter()
        .map(|c| c.cpu_spread_pct)
        .fold(0.0, f64::max);
    rep.goals.clear();
    for k in rep.cases.iter().filter(|c| c.backend == "kernel") {
        if let Some(x) = rep
            .cases
            .iter()
            .find(|c| c.backend == "xsk" && c.kernel == k.kernel && c.conns == k.conns)
        {
            let ratio = x.median.cpu_us / k.median.cpu_us;
            rep.goals.push(Goal {
                kernel: k.kernel.clone(),
                conns: k.conns,
                cpu_ratio: ratio,
                // A busy time below zero (seen with the 7.2 guest's first measurement) is a
                // broken reading, not a met goal.
                cpu_met: x.median.cpu_us > 0.0 && k.median.cpu_us > 0.0 && ratio <= 0.5,
                kicks_met: x.median.tx_kicks + x.median.rx_kicks
                    <= k.median.tx_kicks + k.median.rx_kicks,
                irqs_met: x.median.irq_in + x.median.irq_out <= k.median.irq_in + k.median.irq_out,
            });
        }
    }
    rep.ratios = ratios(&rep.cases);
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

fn table(r: &CostReport) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_stat_names() {
        assert!(queue_stat("tx_queue_0_kicks", "tx", "kicks"));
        assert!(queue_stat("rx0_kicks", "rx", "kicks"));
        assert!(!queue_stat("rx_kicks", "rx", "kicks"));
        assert!(!queue_stat("rx_queue_0_xdp_tx", "rx", "kicks"));
    }

    #[test]
    fn difference_cancels_fixed_cost() {
        let c = |virt: f64, idle: f64, kicks: f64| Counts {
            virt_ns: virt,
            cap_ns: virt,
            idle_ns: idle,
            tx_kicks: kicks,
            ..Counts::default()
        };
        // fixed 1 ms + 10 us per request; short run 10 requests, long run 110
        let (c0, c1, c2) = (
            c(0.0, 0.0, 0.0),
            c(1.1e6, 0.0, 11.0),
            c(1.1e6 + 2.1e6, 0.0, 11.0 + 111.0),
        );
        let long = PerUnit::between(&c1, &c2, 1.0);
        let short = PerUnit::between(&c0, &c1, 1.0);
        let per = PerUnit::minus(&long, &short).scale(1.0 / 100.0);
        assert!((per.cpu_us - 10.0).abs() < 1e-9);
        assert!((per.tx_kicks - 1.0).abs() < 1e-9);
    }

    #[test]
    fn shifts() {
        assert_eq!(icount_shift("shift=4"), Some(4));
        assert_eq!(icount_shift("shift=2,sleep=off"), Some(2));
        assert_eq!(icount_shift("shift=auto"), None);
        assert_eq!(icount_shift("off"), None);
    }

    #[test]
    fn spread() {
        assert_eq!(spread_pct(&[1.0]), 0.0);
        assert!((spread_pct(&[99.0, 100.0, 101.0]) - 2.0).abs() < 1e-9);
    }
}
