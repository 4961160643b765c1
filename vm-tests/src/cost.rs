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

use std::net::SocketAddrV4;
use std::time::Duration;

use anyhow::{bail, Result};

use crate::cost_counts::{icount_shift, spread_pct, PerUnit};
use crate::cost_measure::{boot_counted, measure_rr_dumped, RrLoad};
use crate::cost_report::{ratios, table, CaseSummary, CostReport, Goal, Granted, Refusal, Row};
use crate::cost_servers::{self as servers, SERVERS};
use crate::env::{Common, Env, KernelSet};
use crate::kernel::KernelSel;
use crate::netns::HostNet;
use crate::server;
use crate::util::{check_interrupted, median};

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
            // A server that counts nothing (floor) is not asked.
            let counts = !servers::syscall_counters(&server).is_empty();
            let dump = (!a.no_syscalls && counts).then(|| servers::dump_arg(&tag));
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
