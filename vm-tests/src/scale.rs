//! `vm-tests scale`: `rr-server --threads 1` against `--threads 2` in a 2-vCPU guest, kernel TCP
//! and the xsk stack.
//!
//! The guest gets as many vCPUs as virtio_net queue pairs (a multiqueue tap, `-netdev
//! tap,...,queues=N`, `-device virtio-net-pci,...,mq=on,vectors=2N+2`, `-smp N`), so virtio_net
//! brings up N combined channels and spreads the host's flows over them by hash. With one thread
//! the xsk server binds queue 0 and brings the device down to one channel (as it always does);
//! with N it binds one stack shard per queue. The kernel server runs N SO_REUSEPORT listeners.
//! The client is rr-bench in the host namespace behind the tap (as in `cost`), so the guest holds
//! only the server.
//!
//! Measured per case as in `cost` (snapshots around a short and a long run; their difference per
//! request): guest CPU per request summed over the vCPUs, the server's threads' run time, kicks
//! and interrupts, plus the host-side request rate. By default the guest runs under
//! multi-threaded TCG without `-icount` (QEMU refuses `-icount` with MTTCG, and single-threaded
//! TCG runs the vCPUs one after the other, so a second vCPU could not add throughput): the
//! guest's clock is then the host's real time, shared with the client and whatever else runs on
//! the host, and the figures are coarse.

use std::net::SocketAddrV4;

use anyhow::{bail, Result};
use serde::Serialize;

use crate::cost_counts::{spread_pct, PerUnit};
use crate::cost_measure::{measure_rr, RrLoad};
use crate::env::{Common, Env};
use crate::guest::{Accel, Guest, OFFLOADS_OFF};
use crate::netns::HostNet;
use crate::report::{ReportHead, Grid, KvTable};
use crate::server::{self, ServerSpec};
use crate::util::{check_interrupted, median};

#[derive(clap::Args, Debug, Clone)]
pub struct ScaleArgs {
    #[command(flatten)]
    pub common: Common,
    /// Server thread counts to compare (each at most --vcpus).
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    pub threads: Vec<u16>,
    /// vCPUs of the guest, and virtio_net queue pairs.
    #[arg(long, value_name = "N", default_value_t = 2, value_parser = clap::value_parser!(u32).range(2..=8))]
    pub vcpus: u32,
    /// Connections (depth 1 each).
    #[arg(long, value_name = "N", default_value_t = 32)]
    pub conns: usize,
    /// Requests of the long run of each measurement (the short run has conns x 4).
    #[arg(long, value_name = "N", default_value_t = 6000)]
    pub requests: u64,
    /// Rounds; within a round every (backend, threads) case runs once, the order reversed
    /// every other round (A B C D, D C B A, ...).
    #[arg(long, value_name = "N", default_value_t = 2)]
    pub runs: usize,
    /// QEMU -icount value; "off" (default): multi-threaded TCG, the vCPUs really in parallel.
    /// QEMU refuses -icount with MTTCG ("No MTTCG when icount is enabled"), so a shift means
    /// single-threaded TCG (the vCPUs take turns on one host thread); with QEMU 7.2 and the 6.1
    /// guest the second vCPU then never comes up (boot hangs at "x86: Booting SMP configuration").
    #[arg(long, value_name = "SPEC", default_value = "off")]
    pub icount: String,
    /// XDP attach mode of the xsk server.
    #[arg(long, default_value = "drv", value_parser = ["skb", "drv", "auto"])]
    pub attach: String,
}

/// One measurement.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub backend: String,
    pub threads: u16,
    pub round: usize,
    pub conns: usize,
    pub requests: u64,
    /// Host-side rate of the long run (rr-bench, wall clock).
    pub rps: f64,
    #[serde(flatten)]
    pub per_request: PerUnit,
    /// vCPUs kept busy: guest CPU per request x the host-side rate (without -icount the
    /// guest's clock is real time; NaN with -icount, whose clock is not).
    pub guest_cores: f64,
    /// Host CPU time of the QEMU process (all vCPU threads and device emulation) per request,
    /// over the warm-up, short and long runs: what emulating the guest cost, which (unlike
    /// the guest's own busy time) does not grow when the host deschedules a vCPU thread.
    pub qemu_us: f64,
    /// Requests each server thread counted over the server's life (its exit lines).
    pub per_thread: Vec<u64>,
    pub errors: u64,
}

/// Medians of a (backend, threads) case.
#[derive(Debug, Clone, Serialize)]
pub struct CaseSummary {
    pub backend: String,
    pub threads: u16,
    pub rounds: usize,
    pub rps: f64,
    #[serde(flatten)]
    pub median: PerUnit,
    pub guest_cores: f64,
    pub qemu_us: f64,
    /// Smallest thread's share of the requests, percent (50 = even over 2 threads).
    pub min_thread_share_pct: f64,
    pub cpu_spread_pct: f64,
    pub rps_spread_pct: f64,
}

/// `threads` against the first thread count, per backend.
#[derive(Debug, Clone, Serialize)]
pub struct Scaling {
    pub backend: String,
    pub threads: u16,
    pub base_threads: u16,
    pub rps_ratio: f64,
    pub cpu_ratio: f64,
    pub qemu_ratio: f64,
}

#[derive(Debug, Default, Serialize)]
pub struct ScaleReport {
    #[serde(flatten)]
    pub head: ReportHead,
    pub guest_kernel: String,
    pub vcpus: u32,
    pub icount: String,
    pub conns: usize,
    pub requests: u64,
    pub runs: usize,
    pub rows: Vec<Row>,
    pub cases: Vec<CaseSummary>,
    pub scaling: Vec<Scaling>,
    pub losses: Vec<String>,
    pub server_stops: Vec<String>,
    pub total_s: f64,
    pub logs: String,
}

/// The per-thread request counts in rr-server's exit output (`rr-server: thread I: N requests`).
pub fn thread_requests(log: &str) -> Vec<u64> {
    log.lines()
        .filter_map(|l| {
            let rest = l.trim().strip_prefix("rr-server: thread ")?;
            let (_, after) = rest.split_once(": ")?;
            after.split_whitespace().next()?.parse().ok()
        })
        .collect()
}

pub fn run(args: &ScaleArgs) -> Result<bool> {
    if let Some(t) = args
        .threads
        .iter()
        .find(|t| **t == 0 || u32::from(**t) > args.vcpus)
    {
        bail!(
            "--threads {t}: each thread count must be 1..={} (--vcpus)",
            args.vcpus
        );
    }
    let env = Env::prepare(&args.common, "scale")?;
    let ks = env.kernel();
    let mut rep = ScaleReport {
        head: env.report_head("scale"),
        guest_kernel: ks.sel.label().to_string(),
        vcpus: args.vcpus,
        icount: args.icount.clone(),
        conns: args.conns,
        requests: args.requests,
        runs: args.runs,
        logs: env.run_dir.display().to_string(),
        ..ScaleReport::default()
    };
    let outcome = body(&env, args, &mut rep).and_then(|()| {
        if rep.losses.is_empty() {
            Ok(())
        } else {
            bail!("requests lost: {}", rep.losses.join("; "))
        }
    });
    summarize(&mut rep, args);
    rep.total_s = env.started.elapsed().as_secs_f64();
    rep.head.record(&outcome);
    print!("{}", table(&rep));
    env.publish("scale", &serde_json::to_value(&rep)?)?;
    Ok(outcome.is_ok())
}

/// utime + stime of a host process in seconds (NaN if unreadable; USER_HZ = 100 on x86).
fn proc_cpu_s(pid: u32) -> f64 {
    let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return f64::NAN;
    };
    // Fields after the last ')' (the command may contain spaces): utime and stime are the
    // 12th and 13th.
    let Some(rest) = text.rfind(')').map(|i| &text[i + 1..]) else {
        return f64::NAN;
    };
    let f: Vec<f64> = rest
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|x| x.parse().ok())
        .collect();
    if f.len() == 2 {
        (f[0] + f[1]) / 100.0
    } else {
        f64::NAN
    }
}

fn boot(env: &Env, net: &HostNet, args: &ScaleArgs) -> Result<Guest> {
    let ks = env.kernel();
    let nic = format!("{OFFLOADS_OFF},mq=on,vectors={}", 2 * args.vcpus + 2);
    let mut spec = env.spec_for(ks, &format!("{}-scale", ks.sel.label()), net, &nic);
    spec.smp = args.vcpus;
    if args.icount != "off" {
        spec.icount = Some(args.icount.clone());
    }
    let mut g = Guest::boot(&spec, net, Accel::Tcg)?;
    eprintln!(
        "vm-tests: {} guest up in {:.1} s ({} vCPUs, {}): {}",
        ks.sel.label(),
        g.boot_secs,
        args.vcpus,
        if args.icount == "off" {
            "multi-threaded TCG".to_string()
        } else {
            format!("-icount {}", args.icount)
        },
        g.up_line
    );
    let online = g.exec_ok(
        "grep -c ^processor /proc/cpuinfo",
        std::time::Duration::from_secs(20),
    )?;
    let rxq = g.exec_ok(
        "ls -d /sys/class/net/eth0/queues/rx-* | wc -l",
        std::time::Duration::from_secs(20),
    )?;
    let (online, rxq) = (online.trim().to_string(), rxq.trim().to_string());
    if online != args.vcpus.to_string() || rxq != args.vcpus.to_string() {
        bail!(
            "the guest came up with {online} CPUs and {rxq} rx queues on eth0, not {}",
            args.vcpus
        );
    }
    Ok(g)
}

fn body(env: &Env, args: &ScaleArgs, rep: &mut ScaleReport) -> Result<()> {
    let net = HostNet::create_tuned(args.vcpus, None)?;
    let mut g = boot(env, &net, args)?;
    let port = 7000;
    let dst = SocketAddrV4::new(net.guest_addr, port);
    let mut combos: Vec<(&str, u16)> = Vec::new();
    for &t in &args.threads {
        combos.push(("kernel", t));
        combos.push(("xsk", t));
    }
    for round in 0..args.runs {
        let order: Vec<(&str, u16)> = if round % 2 == 0 {
            combos.clone()
        } else {
            combos.iter().rev().copied().collect()
        };
        for (backend, threads) in order {
            check_interrupted()?;
            let tag = format!("scale_{backend}_t{threads}");
            let mut s = if backend == "xsk" {
                ServerSpec::xsk(&tag, &args.attach, "shared", port)
            } else {
                ServerSpec::kernel(&tag, port)
            };
            if threads > 1 {
                s.extra = vec!["--threads".into(), threads.to_string()];
            }
            if let Err(r) = server::start(&mut g, &s)? {
                bail!(
                    "{backend} rr-server --threads {threads} did not start: {}",
                    r.reason()
                );
            }
            let case_tag = format!("{backend}-t{threads}-r{round}");
            let qemu0 = proc_cpu_s(g.qemu_pid());
            let m = measure_rr(
                env,
                &net,
                &mut g,
                &format!("$PID_{tag}"),
                RrLoad { dst, conns: args.conns, requests: args.requests, rate: None },
                &case_tag,
            );
            let qemu1 = proc_cpu_s(g.qemu_pid());
            let st = server::stop(&mut g, &s)?;
            let _ = std::fs::write(env.run_dir.join(format!("{case_tag}.server.log")), &st.log);
            rep.server_stops.push(format!(
                "{backend} --threads {threads} round {round}: status {}{}",
                st.exit_status,
                st.frame_audit
                    .as_deref()
                    .map(|f| format!(", {f}"))
                    .unwrap_or_default()
            ));
            let (per, r, short, _guest_s, lost) = m?;
            // Warm-up and short run have `short` requests each.
            let qemu_us = (qemu1 - qemu0) * 1e6 / (r.requests + 2 * short) as f64;
            let unclean = if backend == "xsk" {
                st.unclean()
            } else {
                (st.exit_status != 0).then(|| format!("exit status {}", st.exit_status))
            };
            if let Some(u) = unclean {
                bail!("{backend} rr-server --threads {threads}: {u}");
            }
            let per_thread = thread_requests(&st.log);
            if threads > 1 && per_thread.len() != threads as usize {
                bail!(
                    "{backend} rr-server --threads {threads} reported {} thread(s) at exit: {}",
                    per_thread.len(),
                    st.summary_tail
                );
            }
            let guest_cores = if args.icount == "off" {
                per.cpu_us * 1e-6 * r.rps
            } else {
                f64::NAN
            };
            eprintln!(
                "vm-tests: scale {backend:6} threads {threads} round {round}: {:.0} req/s, {:.1} us/req guest CPU ({:.2} vCPUs busy), task {:.1} us, QEMU {qemu_us:.0} us, per thread {per_thread:?}",
                r.rps, per.cpu_us, guest_cores, per.task_us
            );
            rep.losses.extend(lost.iter().cloned());
            rep.rows.push(Row {
                backend: backend.into(),
                threads,
                round,
                conns: args.conns,
                requests: r.requests,
                rps: r.rps,
                per_request: per,
                guest_cores,
                qemu_us,
                per_thread,
                errors: lost.len() as u64,
            });
        }
    }
    let _ = g.poweroff();
    Ok(())
}

fn summarize(rep: &mut ScaleReport, args: &ScaleArgs) {
    rep.cases.clear();
    for backend in ["kernel", "xsk"] {
        for &threads in &args.threads {
            let rows: Vec<&Row> = rep
                .rows
                .iter()
                .filter(|r| r.backend == backend && r.threads == threads)
                .collect();
            if rows.is_empty() {
                continue;
            }
            let per: Vec<PerUnit> = rows.iter().map(|r| r.per_request).collect();
            let rps: Vec<f64> = rows.iter().map(|r| r.rps).collect();
            let shares: Vec<f64> = rows
                .iter()
                .filter_map(|r| {
                    let total: u64 = r.per_thread.iter().sum();
                    let min = r.per_thread.iter().min()?;
                    (total > 0).then(|| 100.0 * *min as f64 / total as f64)
                })
                .collect();
            rep.cases.push(CaseSummary {
                backend: backend.into(),
                threads,
                rounds: rows.len(),
                rps: median(&rps),
                median: PerUnit::median_of(&per),
                guest_cores: median(&rows.iter().map(|r| r.guest_cores).collect::<Vec<_>>()),
                qemu_us: median(&rows.iter().map(|r| r.qemu_us).collect::<Vec<_>>()),
                min_thread_share_pct: if shares.is_empty() {
                    f64::NAN
                } else {
                    median(&shares)
                },
                cpu_spread_pct: spread_pct(&per.iter().map(|p| p.cpu_us).collect::<Vec<_>>()),
                rps_spread_pct: spread_pct(&rps),
            });
        }
    }
    rep.scaling.clear();
    let Some(&base) = args.threads.first() else {
        return;
    };
    for c in rep.cases.iter().filter(|c| c.threads != base) {
        if let Some(b) = rep
            .cases
            .iter()
            .find(|b| b.backend == c.backend && b.threads == base)
        {
            rep.scaling.push(Scaling {
                backend: c.backend.clone(),
                threads: c.threads,
                base_threads: base,
                rps_ratio: c.rps / b.rps,
                cpu_ratio: c.median.cpu_us / b.median.cpu_us,
                qemu_ratio: c.qemu_us / b.qemu_us,
            });
        }
    }
}

fn table(r: &ScaleReport) -> String {
    let mut t = KvTable::new();
    r.head.rows(&mut t);
    t.row(
        "guest",
        format!(
            "{} kernel, {} vCPUs, virtio_net with {} queue pairs, offloads off",
            r.guest_kernel, r.vcpus, r.vcpus
        ),
    );
    t.row(
        "guest clock",
        if r.icount == "off" {
            "multi-threaded TCG, no -icount: the guest's clock is real time; its CPU time is emulation time on a host shared with the client".to_string()
        } else {
            format!("single-threaded TCG, -icount {}: the vCPUs take turns; time counts instructions of both", r.icount)
        },
    );
    t.row(
        "load",
        format!(
            "rr-bench in the host namespace, {} connections, depth 1, 64 B; short run (conns x 4) and long run ({} requests), difference / requests; {} rounds, A B .. B A",
            r.conns, r.requests, r.runs
        ),
    );
    for s in &r.scaling {
        t.row(
            format!("{} {} -> {} threads", s.backend, s.base_threads, s.threads),
            format!(
                "req/s x{:.2}, guest CPU per request x{:.2}, QEMU host CPU per request x{:.2}",
                s.rps_ratio, s.cpu_ratio, s.qemu_ratio
            ),
        );
    }
    t.row("time", format!("{:.0} s", r.total_s));
    t.row("logs", r.logs.clone());
    let mut s = t.render("vm-tests scale");
    let mut g = Grid::new(&[
        "backend",
        "threads",
        "req/s",
        "spread",
        "cpu us/req",
        "user",
        "sys",
        "softirq",
        "task us",
        "vCPUs busy",
        "QEMU us",
        "min thread",
        "kicks tx",
        "irq in",
        "irq out",
        "rounds",
    ]);
    for c in &r.cases {
        let m = &c.median;
        g.row(vec![
            c.backend.clone(),
            c.threads.to_string(),
            format!("{:.0}", c.rps),
            format!("{:.0}%", c.rps_spread_pct),
            format!("{:.1}", m.cpu_us),
            format!("{:.1}", m.user_us),
            format!("{:.1}", m.sys_us),
            format!("{:.1}", m.softirq_us),
            format!("{:.1}", m.task_us),
            format!("{:.2}", c.guest_cores),
            format!("{:.0}", c.qemu_us),
            if c.min_thread_share_pct.is_finite() && c.threads > 1 {
                format!("{:.0}%", c.min_thread_share_pct)
            } else {
                "-".into()
            },
            format!("{:.3}", m.tx_kicks),
            format!("{:.3}", m.irq_in),
            format!("{:.3}", m.irq_out),
            c.rounds.to_string(),
        ]);
    }
    s.push_str("  per request (medians; req/s on the host's clock; cpu = guest busy time over all vCPUs; task = the server's threads' run time; QEMU us = host CPU of the QEMU process per request; min thread = the least busy thread's share of requests):\n");
    s.push_str(&g.render());
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_lines() {
        let log = "rr-server: 2 threads listening on 0.0.0.0:7000\n\
                   rr-server: thread 0: 1200 requests, 17 connections\n\
                   rr-server: thread 1: 800 requests, 15 connections\n\
                   rr-server: 2,000 requests, 1 bytes in";
        assert_eq!(thread_requests(log), vec![1200, 800]);
        assert!(thread_requests("rr-server: 5 requests").is_empty());
        assert!(proc_cpu_s(std::process::id()) >= 0.0);
        assert!(proc_cpu_s(u32::MAX).is_nan());
    }
}
