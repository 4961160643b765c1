//! rr-demo: the project's main demo. Builds its own lab (two network
//! namespaces joined by veth, 198.18.0.0/15), runs the same request/response
//! workloads against `rr-server --backend xsk` and every kernel configuration of `--kernels`
//! (`--backend kernel`: epoll; `--backend uring`: io_uring), rotating the order each round, and
//! prints medians with the ratio of the stack to the best kernel configuration of each case. Writes
//! `results.json` and `results.svg` to the output folder and removes
//! everything it set up, also on Ctrl-C.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use apps::{parse_duration, usage_bail, usage_ensure};
use clap::{ArgMatches, Parser};
use xsk_io::AttachMode;
use xsk_lab::signals;
use xsk_lab::lab;

use crate::cases::{cases, label, OUTAGE_MS, OUTAGE_ONE_IN, parse_kernels, round_order, runs_redis, selected, Case, Kernel, Kernels};
use crate::metrics::Row;
use crate::report::{report, Show};
use crate::runs::{build_env, counts_agree, run_case};

/// The cases and the kernel configurations.
mod cases;

/// What a run measured.
mod metrics;

/// One run: the server, the client, the loss rules, the counters.
mod runs;

/// The report: tables, per-round ratios, results.json.
mod report;

/// The plot's bars and text.
mod plot;

/// The Redis cases: redis-benchmark and redis-py against the resp service and redis-server.
mod redis;

#[cfg(test)]
mod tests;

#[derive(Parser, Debug)]
#[command(
    name = "rr-demo",
    version,
    about = "Compare the AF_XDP stack with kernel TCP on request/response work, side by side",
    after_help = format!("\
Builds its own lab (two network namespaces joined by veth, addresses in 198.18.0.0/15; needs
root), runs every case against rr-server --backend xsk and each kernel configuration of
--kernels (epoll: rr-server --backend kernel; uring: --backend uring, kernel TCP through
io_uring), rotating which goes first each round, and removes the lab again (also on Ctrl-C).
A configuration that cannot run a case is skipped for it, with a note (uring: a same- case with
client threads, as rr-bench's uring client has one thread). The Redis table compares the stack
with the best of them per case, as the main table does.

Prints one line per run, then a table of medians with the ratios of xsk to the best kernel
configuration of each case (krn: the highest req/s; for the open-loop cases, whose rate is
fixed, the least server CPU per request), one with every kernel configuration, and writes to
--out: results.json (metadata, medians, every run), results.svg and results.png (the same
plot), and logs/ with each server's and client's output and JSON per run. A server that
fails to start is reported with the last lines of its log.

Cases (--only picks them): rr-1, rr-16, rr-256: that many connections, one request in
flight on each; rr-16-v6: rr-16 with the client connecting over IPv6 (the lab's ends get
2001:2::1 and ::2, the stack 2001:2::100; not with --quick); rr-256-t2 and rr-256-s2: 2 client threads, and 2 server threads too;
same-16, busy-1, busy-same-1: the client on the server's stack (stack to stack, kernel to
kernel: an epoll client for epoll, an io_uring one for uring), busy polling; other cases use
rr-bench's epoll client whatever the server; open-5k and idle-100: open loop at 5,000 and 100 requests/s over 16
connections (idle-100: every response waits for the kernel client's delayed ACK, the case
for spurious tail-loss probes); loss1-16: 1% of the frames dropped each way at the client
with nftables; loss1-same-16: the same against same- clients (nftables cannot see AF_XDP
frames, so the stack client drops its 1% with its own fault injector, rr-bench
--fault-rx-drop --fault-tx-drop; both ends --ack-delay 5ms, as both ACK at once); lossburst-16: outages, one in {} TCP frames at the
client starts a {OUTAGE_MS} ms outage in which nftables drops every TCP frame either way;
loss1-64k-16: loss1-16 with 64 KiB answers (the kv service's GETs), whose
windows can lose more than one segment;
rr-1000 and rr-10000 (not with --quick); churn-16 (connect, one request, close; 16 at a
time) and storm-1000 (waves of 1,000 connections opened at once): requests/s are
connections/s there. The loss cases need nft. After them, the
Redis cases (--only redis; with --full and --quick too): redis-benchmark SET/GET (redis-c1,
redis-c16, redis-c16-P16) and HSET (redis-hset-c16), redis-py pipelines (redis-py-P100).

Without --full, --quick or --only the demo runs the headline cases: {}.

CPU: `cpu` is the server process's CPU time per request; on veth that holds the client's
receive path (veth runs the receiver's softirq in the sender's send call) and not the
server's own. `own` charges each side its own receive (rr-bench times NET_RX softirqs by
the process they ran in; root). Per-round ratios of xsk to the best kernel configuration's run
of the same round follow the table for both, and for the server and client processes together.

Exit status: 0 ok, 1 a run failed or the counters disagree, 2 bad command line.

Logging: each server's setup log (device tuning, XDP attach, kernel knobs; level info) is in
OUT/logs/CASE-rROUND-BACKEND.server.log. rr-demo itself prints warnings only; RUST_LOG=info
shows its lab steps too, RUST_LOG=debug everything.",
        apps::group_digits(u64::from(OUTAGE_ONE_IN)),
        cases().iter().filter(|c| c.headline).map(|c| c.name).collect::<Vec<_>>().join(", ")
    )
)]
struct Args {
    /// Short runs (about a minute in all) for CI: every case but the 1,000 and 10,000
    /// connection ones, one round of 1s each, and the Redis cases.
    #[arg(long)]
    quick: bool,
    /// Every case, rr-1000 and rr-10000 too, then the Redis cases: about 15 minutes on a
    /// 2-core machine. Without --full, --quick or --only: the headline cases (see below),
    /// about 3 minutes.
    #[arg(long, conflicts_with_all = ["quick", "only"])]
    full: bool,
    /// Print every column of the table (about 250 characters wide) and the full run lines; by
    /// default the key columns, which fit 100 characters.
    #[arg(long)]
    wide: bool,
    /// Print the table as Markdown, for the studies in docs/. With --from-json: print only the
    /// Markdown (table, legend, per-round CPU ratios) and write no files.
    #[arg(long)]
    markdown: bool,
    /// Rounds of alternating runs per case (the table shows medians).
    #[arg(long, value_name = "N", default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    rounds: u32,
    /// Measured time per run, e.g. 4s, 500ms (after a 300ms warm-up and connection setup).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "4s")]
    duration: Duration,
    /// Where the XDP program runs on the xsk ends: skb, drv or auto.
    #[arg(long, value_name = "skb|drv|auto", default_value = "auto")]
    attach: AttachMode,
    /// Output folder for results.json, results.svg, results.png and logs/.
    #[arg(long, value_name = "DIR", default_value = "out/rr-demo")]
    out: PathBuf,
    /// Only run these cases: comma-separated names or parts of names (e.g.
    /// busy, or rr-1,open-5k). An item that is a whole case name selects that
    /// case alone (rr-1 is not also rr-16); otherwise every case containing it.
    #[arg(long, value_name = "TEXT[,TEXT...]")]
    only: Option<String>,
    /// Give the client-side veth a threaded NAPI context. By default (veth's
    /// own behaviour) the client's receive processing runs inside the
    /// server's send call, charging the client's TCP work to the server's
    /// CPU time, an artefact no VM has; with this flag it runs in a kernel
    /// thread instead (fairer CPU per request, lower throughput on 2 cores).
    #[arg(long)]
    peer_napi_thread: bool,
    /// Do not run anything: print the table and redraw the plot from an
    /// earlier results.json (written to --out).
    #[arg(long, value_name = "RESULTS_JSON")]
    from_json: Option<PathBuf>,
    /// Extra options for every xsk rr-server and stack client (rr-bench --backend xsk), split
    /// at spaces, e.g. "--recovery smoltcp" to compare against upstream smoltcp's loss
    /// recovery. Given after the case's own options, so an option a case sets and the
    /// programs take more than once (e.g. "--busy-poll 0") overrides it. Kept in
    /// results.json's metadata.
    #[arg(long, value_name = "ARGS", allow_hyphen_values = true)]
    xsk_args: Option<String>,
    /// The kernel configurations to run the stack against, comma-separated: epoll (rr-server
    /// --backend kernel) and uring (--backend uring, kernel TCP through io_uring). The
    /// headline ratios compare with the best of them in each case.
    #[arg(long, value_name = "epoll|uring[,...]", default_value = "epoll,uring", value_parser = parse_kernels)]
    kernels: Kernels,
}

fn main() -> ExitCode {
    apps::main_with_level::<Args>("rr-demo", "warn", |args, m| run(args, m).map(|()| ExitCode::SUCCESS))
}

/// What a result file needs so that two of them can be told apart.
fn metadata(args: &Args, rounds: u32, dur: Duration) -> serde_json::Value {
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
    let cpu_model = read("/proc/cpuinfo")
        .lines()
        .find_map(|l| l.strip_prefix("model name").map(|r| r.trim_start_matches([' ', '\t', ':']).to_string()))
        .unwrap_or_else(|| "unknown".into());
    let git = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .stderr(Stdio::null())
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let commit = git(&["rev-parse", "HEAD"]);
    let dirty = git(&["status", "--porcelain", "--untracked-files=no"]).map(|s| !s.is_empty());
    serde_json::json!({
        "date": humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
        "kernel": read("/proc/sys/kernel/osrelease").trim(),
        "cpu_model": cpu_model,
        "cpus": apps::online_cpus(),
        "commit": commit,
        "commit_dirty": dirty,
        "args": std::env::args().collect::<Vec<_>>(),
        "rounds": rounds,
        "duration_s": dur.as_secs_f64(),
        "attach": args.attach.to_string(),
        "peer_napi_thread": args.peer_napi_thread,
        "quick": args.quick,
        "full": args.full,
        "kernels": args.kernels.0.iter().map(|k| k.name()).collect::<Vec<_>>(),
    })
}

fn run(args: &Args, _m: &ArgMatches) -> Result<()> {
    if let Some(path) = &args.from_json {
        let v: serde_json::Value =
            serde_json::from_slice(&std::fs::read(path).with_context(|| format!("reading {}", path.display()))?)?;
        let rows: Vec<Row> = serde_json::from_value(v["runs"].clone()).context("no \"runs\" rows in that file")?;
        let cases: Vec<Case> = cases().into_iter().filter(|c| rows.iter().any(|r| r.case == c.name)).collect();
        let show = Show { wide: args.wide, markdown: args.markdown, write: !args.markdown };
        if show.write {
            std::fs::create_dir_all(&args.out)?;
        }
        return report(&rows, &cases, &args.out, &v["metadata"], show);
    }
    let (rounds, dur) = if args.quick { (1, Duration::from_secs(1)) } else { (args.rounds, args.duration) };
    usage_ensure!(dur >= Duration::from_millis(100), "--duration must be at least 100ms");
    let have_nft = Command::new("nft").arg("--version").output().is_ok_and(|o| o.status.success());
    let cases: Vec<Case> = cases().into_iter().filter(|c| selected(args, c)).collect();
    if cases.is_empty() && !redis::selected(args.only.as_deref()) {
        let names: Vec<&str> = self::cases().iter().filter(|c| !(args.quick && c.full_only)).map(|c| c.name).collect();
        usage_bail!(
            "--only {:?} matches no case{}; cases: {}",
            args.only.as_deref().unwrap_or(""),
            if args.quick { " of --quick" } else { "" },
            names.join(", ")
        );
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        bail!("rr-demo builds network namespaces and attaches XDP programs: run it as root");
    }
    if !have_nft && cases.iter().any(|c| c.loss.is_some()) {
        println!("note: nft not found: skipping the loss cases (apt-get install nftables)");
    }
    let cases: Vec<Case> = cases.into_iter().filter(|c| have_nft || c.loss.is_none()).collect();
    for note in skip_notes(&args.kernels.0, &cases) {
        println!("note: {note}");
    }
    signals::install_signal_handlers();
    std::fs::create_dir_all(&args.out).with_context(|| format!("creating {}", args.out.display()))?;
    let logs = args.out.join("logs");
    // Only this tool writes there: logs of an earlier run would mix with this one's.
    let _ = std::fs::remove_dir_all(&logs);
    std::fs::create_dir_all(&logs).with_context(|| format!("creating {}", logs.display()))?;
    let meta = metadata(args, rounds, dur);
    lab::sweep_stale("rd");
    lab::sweep_stale("rq");
    let env = build_env(args, "rd", 1, logs.clone(), cases.iter().any(|c| c.v6))?;
    // The server-threads cases need one RX queue per xsk shard on the server's veth and as many
    // TX queues on the client's (the kernel picks a client TX queue per flow by its hash, and
    // veth delivers to the RX queue of the same number): a second lab, built only if needed, so
    // the single-queue cases keep the lab they always had.
    let max_threads = cases.iter().map(|c| c.server_threads).max().unwrap_or(1);
    let env_mq = if max_threads > 1 { Some(build_env(args, "rq", max_threads as u32, logs, false)?) } else { None };
    println!(
        "lab: {} ({}) <-> {} ({}); {rounds} round(s) of {} per case, rotating xsk/{}; client receive path {}; logs in {}",
        env.lab.ns_a.name,
        env.lab.addr_a,
        env.lab.ns_b.name,
        env.lab.addr_b,
        humantime::format_duration(dur),
        args.kernels.0.iter().map(|k| k.name()).collect::<Vec<_>>().join("/"),
        if args.peer_napi_thread { "in its own NAPI thread" } else { "in the sender's softirq (veth default)" },
        env.logs.display()
    );
    if let Some(e) = &env_mq {
        println!(
            "lab for the server-threads cases: {} ({}) <-> {} ({}), {max_threads} queue pairs on each veth end",
            e.lab.ns_a.name, e.lab.addr_a, e.lab.ns_b.name, e.lab.addr_b
        );
    }
    let mut rows = Vec::new();
    let total: usize = cases.iter().map(|c| round_order(&args.kernels.0, c, 0).len()).sum::<usize>() * rounds as usize;
    let mut n = 0;
    let mut failures = 0;
    let started = Instant::now();
    'outer: for case in &cases {
        for round in 0..rounds as usize {
            // Rotate which backend goes first, so drift hits all alike.
            for backend in round_order(&args.kernels.0, case, round) {
                if signals::interrupted() {
                    break 'outer;
                }
                n += 1;
                let site = if case.server_threads > 1 { env_mq.as_ref().unwrap_or(&env) } else { &env };
                let result = run_case(site, backend, case, round, dur);
                let head =
                    format!("[{n:>2}/{total}] {:<13} round {}/{rounds} {:<6}", case.name, round + 1, label(backend));
                let left = time_left(started.elapsed(), n, total);
                let row = match result {
                    Ok(row) => row,
                    Err(e) => {
                        // Keep going: one broken case must not hide the others.
                        println!("{head} FAILED ({left}): {e:#}");
                        failures += 1;
                        continue;
                    }
                };
                println!("{head} {}  {left}", run_line(&row, args.wide));
                // Every response the client saw was a request the server counted.
                let bound = row.errors + 2 * case.conns as u64 * case.depth as u64;
                if !counts_agree(&row, bound) {
                    println!(
                        "        counters disagree: server served {} requests, client got {} responses (warm-up and run)",
                        row.server_requests, row.client_requests
                    );
                    failures += 1;
                }
                rows.push(row);
            }
        }
    }
    if !signals::interrupted() && runs_redis(args) {
        println!();
        failures += redis::run(&env, args, rounds as usize)?;
    }
    if signals::interrupted() {
        println!("interrupted: partial results");
    }
    drop(env_mq);
    drop(env);
    report(&rows, &cases, &args.out, &meta, Show { wide: args.wide, markdown: args.markdown, write: true })?;
    if failures > 0 {
        bail!("{failures} run(s) failed or disagreed with the server's counters (see above)");
    }
    Ok(())
}

/// What the run leaves out, said once before it starts: the kernel configurations that cannot
/// run a case.
fn skip_notes(kernels: &[Kernel], cases: &[Case]) -> Vec<String> {
    let mut notes = Vec::new();
    for k in kernels {
        let mut why: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for c in cases {
            if let Some(w) = k.cannot_run(c) {
                why.entry(w).or_default().push(c.name);
            }
        }
        for (w, names) in why {
            notes.push(format!("{} skips {}: {w}", k.name(), names.join(", ")));
        }
    }
    notes
}

/// A run's figures after its progress head: the key ones, or all with --wide.
fn run_line(row: &Row, wide: bool) -> String {
    use apps::table::latency;
    let m = &row.m;
    let mut s = format!(
        "{:>7.0} req/s  p50 {:>7}  p99 {:>7}  cpu {:>5.2} us/req",
        m.rps,
        latency(m.p50_us),
        latency(m.p99_us),
        m.cpu_us_per_req
    );
    if wide {
        s += &format!(
            " (own rx {:>5.2})  setup {:>5.2} s  drops {:>5}  retx {:>5}  tlp {:>5} (spurious {:>4})  rto {:>5}{}",
            m.cpu_us_per_req_own_rx,
            m.setup_s,
            fmt_count(m.server_drops),
            fmt_count(m.retx()),
            fmt_count(m.server_tail_probes),
            fmt_count(m.server_spurious_probes),
            fmt_count(m.server_rto_retransmits),
            loss_note(&row.loss_counters)
        );
    }
    s
}

/// "~1m 20s left" after `done` of `total` runs took `elapsed` (the runs are alike in length).
fn time_left(elapsed: Duration, done: usize, total: usize) -> String {
    if done >= total {
        return "done".into();
    }
    let per = elapsed.as_secs_f64() / done.max(1) as f64;
    let secs = (per * (total - done) as f64).round() as u64;
    format!("~{} left", humantime::format_duration(Duration::from_secs(secs)))
}

/// `  lost 41 of 4,093 frames (nft, 3 outages)` for a loss run's per-run line.
fn loss_note(c: &BTreeMap<String, f64>) -> String {
    let mut s = String::new();
    if let (Some(d), Some(f)) = (c.get("nft_dropped"), c.get("nft_frames")) {
        s += &format!("  nft dropped {} of {} frames", apps::group_digits(*d as u64), apps::group_digits(*f as u64));
        if let Some(o) = c.get("nft_outages").filter(|o| **o > 0.0) {
            s += &format!(" in {o:.0} outages");
        }
    }
    if let Some(i) = c.get("injected_rx_dropped") {
        s += &format!("  injector dropped {i:.0} received");
    }
    s
}

fn fmt_count(v: f64) -> String {
    if v.is_finite() {
        format!("{v:.0}")
    } else {
        "-".into()
    }
}
