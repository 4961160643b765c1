//! How `vm-tests cost` (and batch and scale) measure: a guest booted under -icount, a
//! request/response load run between two snapshots, and `perf record` in the guest for
//! `--profile`.

use std::collections::BTreeMap;
use std::net::SocketAddrV4;
use std::time::Duration;

use anyhow::{bail, Context, Result};

use crate::cost_counts::{snap_with, PerUnit};
use crate::env::{Env, KernelSet};
use crate::guest::{Accel, Guest, OFFLOADS_OFF};
use crate::load::{self, Bench, BenchArgs};
use crate::netns::HostNet;

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
