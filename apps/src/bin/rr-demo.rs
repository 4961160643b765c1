//! rr-demo: the project's main demo. Builds its own lab (two network
//! namespaces joined by veth, 198.18.0.0/15), runs the same request/response
//! workloads against `rr-server --backend xsk` and `--backend kernel`,
//! alternating A B A B, and prints medians with the xsk/kernel ratio. Writes
//! `results.json` and `results.svg` to the output folder and removes
//! everything it set up, also on Ctrl-C.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use apps::plot::{Bars, PlotCase, PlotText};
use apps::stats::{is_drop, Snapshot};
use apps::{parse_duration, usage_bail, usage_ensure, RecoveryCounts};
use clap::{ArgMatches, Parser};
use serde::Serialize;
use xsk_io::AttachMode;
use xsk_lab::lab::{self, Lab, LabConfig, Netns};

#[derive(Parser, Debug)]
#[command(
    name = "rr-demo",
    version,
    about = "Compare the AF_XDP stack with kernel TCP on request/response work, side by side",
    after_help = format!("\
Builds its own lab (two network namespaces joined by veth, addresses in 198.18.0.0/15; needs
root), runs every case against rr-server --backend xsk and --backend kernel, alternating which
goes first, and removes the lab again (also on Ctrl-C).

Prints one line per run, then a table of medians with the xsk/kernel ratios, and writes to
--out: results.json (metadata, medians, every run), results.svg and results.png (the same
plot), and logs/ with each server's and client's output and JSON per run. A server that
fails to start is reported with the last lines of its log.

Cases (--only picks them): rr-1, rr-16, rr-256: that many connections, one request in
flight on each; rr-256-t2 and rr-256-s2: 2 client threads, and 2 server threads too;
same-16, busy-1, busy-same-1: the client on the server's stack (stack to stack, kernel to
kernel), busy polling; open-5k and idle-100: open loop at 5,000 and 100 requests/s over 16
connections (idle-100: every response waits for the kernel client's delayed ACK, the case
for spurious tail-loss probes); loss1-16: 1% of the frames dropped each way at the client
with nftables; loss1-same-16: the same against same- clients (nftables cannot see AF_XDP
frames, so the stack client drops its 1% with its own fault injector, rr-bench
--fault-rx-drop --fault-tx-drop; both ends --ack-delay 5ms, as both ACK at once); lossburst-16: outages, one in {} TCP frames at the
client starts a {OUTAGE_MS} ms outage in which nftables drops every TCP frame either way;
rr-1000 and rr-10000 (not with --quick); churn-16 (connect, one request, close; 16 at a
time) and storm-1000 (waves of 1,000 connections opened at once): requests/s are
connections/s there. The loss cases need nft. After them, the
Redis cases (--only redis; with --full and --quick too): redis-benchmark SET/GET (redis-c1,
redis-c16, redis-c16-P16) and HSET (redis-hset-c16), redis-py pipelines (redis-py-P100).

Without --full, --quick or --only the demo runs the headline cases: {}.

CPU: `cpu` is the server process's CPU time per request; on veth that holds the client's
receive path (veth runs the receiver's softirq in the sender's send call) and not the
server's own. `own` charges each side its own receive (rr-bench times NET_RX softirqs by
the process they ran in; root). Per-round xsk/kernel ratios follow the table for both, and
for the server and client processes together.

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
}

#[derive(Clone, Debug)]
struct Case {
    name: &'static str,
    conns: usize,
    depth: usize,
    /// Client on the same backend as the server (stack to stack, kernel to kernel).
    same_client: bool,
    busy_poll: bool,
    /// Open loop at this rate instead of closed loop.
    rate: Option<u64>,
    /// Frames dropped at the client (see [`LossKind`]).
    loss: Option<LossKind>,
    /// Only in full runs, not with --quick.
    full_only: bool,
    /// In the default demo (no --full, --quick or --only): the rows a newcomer reads first.
    headline: bool,
    /// rr-bench --threads (kernel client): so the load generator is not the bound.
    client_threads: usize,
    /// rr-server --threads on both backends (xsk: one stack shard per RX queue; the case runs
    /// in a second lab whose veth pair has this many queues; kernel: SO_REUSEPORT listeners).
    server_threads: usize,
    /// Extra options for the xsk server and the stack client of this case.
    xsk_args: &'static [&'static str],
    /// rr-bench --pattern: rr, or churn/storm (connections opened and closed; the row's
    /// requests/s are connections/s).
    pattern: &'static str,
}

/// What one run measured; in a `Summary`, the medians over the runs.
#[derive(Clone, Debug, Serialize, serde::Deserialize)]
struct Metrics {
    #[serde(default = "nan", deserialize_with = "nan_if_null")]
    rps: f64,
    #[serde(default = "nan", deserialize_with = "nan_if_null")]
    p50_us: f64,
    #[serde(default = "nan", deserialize_with = "nan_if_null")]
    p99_us: f64,
    #[serde(default = "nan", deserialize_with = "nan_if_null")]
    p999_us: f64,
    #[serde(default = "nan", deserialize_with = "nan_if_null")]
    cpu_us_per_req: f64,
    #[serde(default = "nan", deserialize_with = "nan_if_null")]
    cpu_us_per_req_machine: f64,
    /// Server CPU with each side charged its own receive path (rr-bench's NET_RX accountant:
    /// on veth the sender's process runs the receiver's softirq work).
    #[serde(default = "nan", deserialize_with = "nan_if_null")]
    cpu_us_per_req_own_rx: f64,
    /// The client process (rr-bench, getrusage) over the same window.
    #[serde(default = "nan", deserialize_with = "nan_if_null")]
    cpu_us_per_req_client: f64,
    /// Cores the client and the server process kept busy (of 2): shows which side saturated.
    #[serde(default = "nan", deserialize_with = "nan_if_null")]
    client_cores: f64,
    #[serde(default = "nan", deserialize_with = "nan_if_null")]
    server_cores: f64,
    /// Seconds to establish the run's connections (before the measured window).
    #[serde(default = "nan", deserialize_with = "nan_if_null")]
    setup_s: f64,
    /// Churn and storm cases: p99 from the connect call to the established connection, us.
    #[serde(default = "nan", deserialize_with = "nan_if_null")]
    conn_setup_p99_us: f64,
    /// Frames or connections the xsk server's counters say it dropped (every counter whose
    /// name says drop), over the server's life: warm-up, setup and run.
    #[serde(default = "nan", deserialize_with = "nan_if_null")]
    server_drops: f64,
    /// TCP segments the kernel retransmitted in the client's namespace over the same span.
    #[serde(default = "nan", deserialize_with = "nan_if_null")]
    client_retrans: f64,
    /// The same in the server's namespace (kernel server only; the stack keeps no such count).
    #[serde(default = "nan", deserialize_with = "nan_if_null")]
    server_retrans: f64,
    /// Everything either end sent again over the same span: kernel TCP's RetransSegs in both
    /// namespaces (tail-loss probes included) plus a stack client's and a stack server's RTO
    /// retransmits, fast retransmits and tail-loss probes (the stack counts events, the kernel
    /// segments: the same for one-segment responses).
    #[serde(default = "nan", deserialize_with = "nan_if_null")]
    retrans_total: f64,
    /// The xsk server's loss recovery (its `recovery` counters, over its life; NaN for the
    /// kernel server, whose TCPLossProbes and TCPTimeouts are in `server_tcp`).
    #[serde(default = "nan", deserialize_with = "nan_if_null")]
    server_rto_retransmits: f64,
    #[serde(default = "nan", deserialize_with = "nan_if_null")]
    server_fast_retransmits: f64,
    #[serde(default = "nan", deserialize_with = "nan_if_null")]
    server_tail_probes: f64,
    /// Retransmissions and probes the client showed were not needed (D-SACK, or an ACK too early).
    #[serde(default = "nan", deserialize_with = "nan_if_null")]
    server_spurious_retransmits: f64,
    #[serde(default = "nan", deserialize_with = "nan_if_null")]
    server_spurious_probes: f64,
}

/// NaN (an unknown figure) is written as null in JSON; read it back as NaN.
fn nan_if_null<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(<Option<f64> as serde::Deserialize>::deserialize(d)?.unwrap_or(f64::NAN))
}

fn nan() -> f64 {
    f64::NAN
}

fn one() -> usize {
    1
}

impl Metrics {
    fn median(runs: &[&Metrics]) -> Metrics {
        let m = |f: fn(&Metrics) -> f64| median(runs.iter().map(|r| f(r)).collect());
        Metrics {
            rps: m(|r| r.rps),
            p50_us: m(|r| r.p50_us),
            p99_us: m(|r| r.p99_us),
            p999_us: m(|r| r.p999_us),
            cpu_us_per_req: m(|r| r.cpu_us_per_req),
            cpu_us_per_req_machine: m(|r| r.cpu_us_per_req_machine),
            cpu_us_per_req_own_rx: m(|r| r.cpu_us_per_req_own_rx),
            cpu_us_per_req_client: m(|r| r.cpu_us_per_req_client),
            client_cores: m(|r| r.client_cores),
            server_cores: m(|r| r.server_cores),
            setup_s: m(|r| r.setup_s),
            conn_setup_p99_us: m(|r| r.conn_setup_p99_us),
            server_drops: m(|r| r.server_drops),
            client_retrans: m(|r| r.client_retrans),
            server_retrans: m(|r| r.server_retrans),
            retrans_total: m(|r| r.retrans_total),
            server_rto_retransmits: m(|r| r.server_rto_retransmits),
            server_fast_retransmits: m(|r| r.server_fast_retransmits),
            server_tail_probes: m(|r| r.server_tail_probes),
            server_spurious_retransmits: m(|r| r.server_spurious_retransmits),
            server_spurious_probes: m(|r| r.server_spurious_probes),
        }
    }

    /// The retx columns: `retrans_total`, or for files written before it existed what the
    /// column counted then (kernel TCP's RetransSegs: the client's, and a kernel server's).
    fn retx(&self) -> f64 {
        if self.retrans_total.is_nan() {
            self.client_retrans + self.server_retrans.max(0.0)
        } else {
            self.retrans_total
        }
    }
}

#[derive(Clone, Debug, Serialize, serde::Deserialize)]
struct Row {
    backend: String,
    case: String,
    round: usize,
    conns: usize,
    /// rr-bench --threads and rr-server --threads of the run.
    #[serde(default = "one")]
    client_threads: usize,
    #[serde(default = "one")]
    server_threads: usize,
    #[serde(flatten)]
    m: Metrics,
    errors: u64,
    /// Requests the server counted (warm-up and run) and responses the client got (same).
    #[serde(default)]
    server_requests: u64,
    #[serde(default)]
    client_requests: u64,
    /// The server's nonzero drop and error counters, by name.
    #[serde(default)]
    server_trouble: BTreeMap<String, f64>,
    /// Kernel TCP counters (retransmissions by kind) in the client's and the server's
    /// namespace over the run: warm-up, setup and measured window.
    #[serde(default)]
    client_tcp: BTreeMap<String, f64>,
    #[serde(default)]
    server_tcp: BTreeMap<String, f64>,
    /// A stack client's loss recovery (rr-bench's `recovery`); none for a kernel client.
    #[serde(default)]
    client_recovery: Option<RecoveryCounts>,
    /// Loss cases: what the loss mechanism counted over the run (nftables: `nft_frames` TCP
    /// frames seen at the client, `nft_dropped`, `nft_outages`; a stack client's fault injector:
    /// `injected_rx_dropped`, the received frames it dropped).
    #[serde(default)]
    loss_counters: BTreeMap<String, f64>,
}

/// `--only`: whether `name` is selected by the comma-separated `only`. An
/// item equal to one of `all` selects that case alone; any other item every
/// case whose name contains it.
fn only_matches(only: &str, name: &str, all: &[&str]) -> bool {
    only.split(',').map(str::trim).filter(|i| !i.is_empty()).any(|i| {
        if all.contains(&i) {
            name == i
        } else {
            name.contains(i)
        }
    })
}

/// Whether a run with `args` runs case `c`: --only's cases, --quick's, --full's, or the
/// headline.
fn selected(args: &Args, c: &Case) -> bool {
    match &args.only {
        Some(o) => only_matches(o, c.name, &case_names()) && !(args.quick && c.full_only),
        None if args.quick => !c.full_only,
        None => args.full || c.headline,
    }
}

/// The Redis cases run with --full, --quick, or an --only that names them (redis::run picks).
fn runs_redis(args: &Args) -> bool {
    args.full || args.quick || args.only.is_some()
}

fn case_names() -> Vec<&'static str> {
    cases().iter().map(|c| c.name).collect()
}

fn cases() -> Vec<Case> {
    let c = |name, conns, same_client, busy_poll, rate| Case {
        name,
        conns,
        depth: 1,
        same_client,
        busy_poll,
        rate,
        loss: None,
        full_only: false,
        headline: false,
        client_threads: 1,
        server_threads: 1,
        xsk_args: &[],
        pattern: "rr",
    };
    // The headline: throughput at moderate and high connection counts, stack to stack, the
    // busy-polled latency floor, light load, and loss.
    let h = |c: Case| Case { headline: true, ..c };
    vec![
        c("rr-1", 1, false, false, None),
        h(c("rr-16", 16, false, false, None)),
        h(c("rr-256", 256, false, false, None)),
        Case { client_threads: 2, ..c("rr-256-t2", 256, false, false, None) },
        // The same with two server threads: rr-256-t2 against rr-256-s2 is the 1 -> 2 scaling.
        Case { client_threads: 2, server_threads: 2, ..c("rr-256-s2", 256, false, false, None) },
        h(c("same-16", 16, true, false, None)),
        c("busy-1", 1, false, true, None),
        h(c("busy-same-1", 1, true, true, None)),
        h(c("open-5k", 16, false, false, Some(5000))),
        // Light load with idle gaps: about 160 ms between one connection's requests, so the
        // kernel client acknowledges every response with a delayed ACK (40 ms or more), the
        // case where a tail-loss probe may fire for nothing.
        c("idle-100", 16, false, false, Some(100)),
        h(Case { loss: Some(LossKind::Random1), ..c("loss1-16", 16, false, false, None) }),
        // Both ends are the stack, and it ACKs at once: an operator who knows that sets a small
        // probe allowance (the default, 50 ms, waits out Linux's delayed ACK).
        Case {
            loss: Some(LossKind::Random1),
            xsk_args: &["--ack-delay", "5ms"],
            ..c("loss1-same-16", 16, true, false, None)
        },
        Case { loss: Some(LossKind::Outages), ..c("lossburst-16", 16, false, false, None) },
        Case { full_only: true, ..c("rr-1000", 1000, false, false, None) },
        Case { full_only: true, ..c("rr-10000", 10000, false, false, None) },
        // Connection rate: connect, one request, close, 16 at a time; and waves of 1,000
        // connections opened at once (a burst of SYNs), each answered once and closed.
        Case { pattern: "churn", ..c("churn-16", 16, false, false, None) },
        Case { pattern: "storm", ..c("storm-1000", 1000, false, false, None) },
    ]
}

/// How the loss cases drop frames at the client.
///
/// nftables in the client's namespace (the host kernel has no netem) sees a kernel client's
/// frames only: XDP hands the AF_XDP stack's frames to its socket before netfilter, and AF_XDP
/// sends bypass it. So a stack client (the xsk run of a same- case) drops its 1% with its own
/// fault injector (rr-bench --fault-rx-drop/--fault-tx-drop), at the same place: as frames
/// enter and leave the client's TCP. The nftables rules are in place for that run too; their
/// counters show they saw none of its frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LossKind {
    /// 1% of the frames each way, each frame on its own (`numgen random`).
    Random1,
    /// Outages: one in [`OUTAGE_ONE_IN`] TCP frames at the client starts an outage of
    /// [`OUTAGE_MS`] in which every TCP frame in either direction is dropped (a dynamic nftables
    /// set whose one element times out). The outage is on time, not on frames: it also takes
    /// the retransmissions and probes sent into it. Starting per frame keeps the number of
    /// outages per request the same whatever the rate; kernel client only.
    Outages,
}

/// Outage length of [`LossKind::Outages`]: longer than the stack's tail-loss probe timeout
/// for a lone segment (2 SRTT + its ACK-delay allowance), shorter than kernel TCP's 200 ms
/// minimum RTO.
const OUTAGE_MS: u32 = 100;
/// One in this many TCP frames at the client starts an outage.
const OUTAGE_ONE_IN: u32 = 5000;

/// The nftables ruleset for a loss case, with counters (`frames`, `dropped`, `outages`).
fn loss_rules(kind: LossKind) -> String {
    let chain = |name: &str, hook: &str| {
        let drops = match kind {
            LossKind::Random1 => "numgen random mod 100 < 1 counter name \"dropped\" drop".to_string(),
            LossKind::Outages => format!(
                "meta l4proto @outage counter name \"dropped\" drop\n    \
                 meta l4proto tcp numgen random mod {OUTAGE_ONE_IN} < 1 add @outage {{ meta l4proto }} \
                 counter name \"outages\" counter name \"dropped\" drop"
            ),
        };
        format!(
            "  chain {name} {{\n    type filter hook {hook} priority 0;\n    meta l4proto tcp counter name \"frames\"\n    {drops}\n  }}\n"
        )
    };
    let set = match kind {
        LossKind::Random1 => String::new(),
        LossKind::Outages => {
            format!("  set outage {{ type inet_proto; flags dynamic,timeout; timeout {OUTAGE_MS}ms; size 4; }}\n")
        }
    };
    format!(
        "table inet rrdemo_loss {{\n  counter frames {{}}\n  counter dropped {{}}\n  counter outages {{}}\n{set}{}{}}}\n",
        chain("in", "input"),
        chain("out", "output")
    )
}

/// Loss for the client's namespace with nftables. Removed again by `Drop`.
struct Loss<'a> {
    lab: &'a Lab,
}

impl<'a> Loss<'a> {
    fn add(lab: &'a Lab, kind: LossKind) -> Result<Loss<'a>> {
        let f = std::env::temp_dir().join(format!("rr-demo-loss-{}.nft", std::process::id()));
        std::fs::write(&f, loss_rules(kind))?;
        let r = lab.ns_b.run(&["nft", "-f", &f.to_string_lossy()]);
        let _ = std::fs::remove_file(&f);
        r.context("adding the loss rules (needs nftables: apt-get install nftables)")?;
        Ok(Loss { lab })
    }

    /// The rules' counters: `nft_frames`, `nft_dropped`, `nft_outages` (packets).
    fn counters(&self) -> BTreeMap<String, f64> {
        let mut out = BTreeMap::new();
        for name in ["frames", "dropped", "outages"] {
            let text = self.lab.ns_b.run(&["nft", "list", "counter", "inet", "rrdemo_loss", name]).unwrap_or_default();
            if let Some(n) = nft_packets(&text) {
                out.insert(format!("nft_{name}"), n);
            }
        }
        out
    }
}

/// The `packets N` of `nft list counter` output.
fn nft_packets(text: &str) -> Option<f64> {
    let mut words = text.split_whitespace();
    words.find(|w| *w == "packets")?;
    words.next()?.parse().ok()
}

impl Drop for Loss<'_> {
    fn drop(&mut self) {
        let _ = self.lab.ns_b.run(&["nft", "delete", "table", "inet", "rrdemo_loss"]);
    }
}

fn main() -> ExitCode {
    apps::main_with_level::<Args>("rr-demo", "warn", |args, m| run(args, m).map(|()| ExitCode::SUCCESS))
}

fn sibling(name: &str) -> Result<PathBuf> {
    let p = std::env::current_exe()?.with_file_name(name);
    if !p.exists() {
        bail!("{} not found next to rr-demo (build the workspace: cargo build --release)", p.display());
    }
    Ok(p)
}

/// The last `n` lines of a log file, indented, for error messages.
fn tail(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    let start = lines.len().saturating_sub(n);
    let mut s = format!("last lines of {}:", path.display());
    for l in &lines[start..] {
        s += "\n    ";
        s += l;
    }
    s
}

struct Server {
    child: Child,
    log: PathBuf,
    json: PathBuf,
}

impl Server {
    /// SIGINT and wait for a clean exit; returns the server's own summary (--json).
    fn stop(mut self) -> Result<serde_json::Value> {
        // SAFETY: kill(2) on our own child, not reaped yet (Drop reaps it).
        unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) };
        let end = Instant::now() + Duration::from_secs(15);
        while Instant::now() < end {
            if let Some(st) = self.child.try_wait()? {
                if !st.success() {
                    bail!("rr-server exited with {st}; {}", tail(&self.log, 15));
                }
                let text = std::fs::read(&self.json).with_context(|| format!("reading {}", self.json.display()))?;
                return serde_json::from_slice(&text).context("the server's --json summary");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        bail!("rr-server did not stop within 15s of SIGINT; {}", tail(&self.log, 15));
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

struct Env {
    lab: Lab,
    server_exe: PathBuf,
    bench_exe: PathBuf,
    logs: PathBuf,
    xsk_server_addr: std::net::Ipv4Addr,
    xsk_client_addr: std::net::Ipv4Addr,
    attach: AttachMode,
    /// --xsk-args, split.
    xsk_args: Vec<String>,
}

fn start_server(env: &Env, backend: &str, case: &Case, tag: &str) -> Result<(Server, String)> {
    let ready = env.logs.join(format!("{tag}.ready"));
    let log = env.logs.join(format!("{tag}.server.log"));
    let json = env.logs.join(format!("{tag}.server.json"));
    let _ = std::fs::remove_file(&ready);
    let mut c = Command::new("ip");
    c.args(["netns", "exec", &env.lab.ns_a.name]).arg(&env.server_exe);
    // Sized for the case, as an operator would: the ring and UMEM sizes follow
    // --max-conns. A full fill ring cycles every frame through it, so rings
    // far larger than the load touch cold frames (in an alternating run,
    // 16384-entry rings cost busy-same-1 about 0.2 us of its p50).
    let max_conns = (case.conns * 2).max(1024);
    c.args(["--backend", backend, "--service", "echo", "--port", "7000", "--max-conns", &max_conns.to_string()]);
    if case.conns > 1000 {
        // 10,000 connections with the default 64 KiB buffers would be 1.3 GB.
        c.args(["--buffer", "8192"]);
    }
    let target = if backend == "xsk" {
        c.args(["--iface", &env.lab.if_a, "--attach", &env.attach.to_string()]);
        c.args(["--addr", &format!("{}/{}", env.xsk_server_addr, env.lab.prefix_len)]);
        c.args(case.xsk_args);
        format!("{}:7000", env.xsk_server_addr)
    } else {
        c.args(["--bind", &env.lab.addr_a.to_string()]);
        format!("{}:7000", env.lab.addr_a)
    };
    if case.busy_poll {
        c.args(["--busy-poll", "50"]);
    }
    if backend == "xsk" {
        // Last, so that they override the case's own options (`--busy-poll`).
        c.args(&env.xsk_args);
    }
    if case.server_threads > 1 {
        c.args(["--threads", &case.server_threads.to_string()]);
    }
    c.arg("--ready-file").arg(&ready).arg("--json").arg(&json);
    let out = File::create(&log).with_context(|| format!("creating {}", log.display()))?;
    let err = out.try_clone()?;
    let child = c.stdin(Stdio::null()).stdout(out).stderr(err).spawn().context("starting rr-server")?;
    let mut server = Server { child, log, json };
    let end = Instant::now() + Duration::from_secs(15);
    while !ready.exists() {
        if let Some(st) = server.child.try_wait()? {
            bail!("rr-server ({backend}) exited before it was ready ({st}); {}", tail(&server.log, 15));
        }
        if Instant::now() > end || lab::interrupted() {
            bail!("rr-server ({backend}) did not become ready within 15s; {}", tail(&server.log, 15));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok((server, target))
}

/// The kernel's TCP counters in a namespace (/proc/net/snmp and /proc/net/netstat are per
/// namespace) that tell retransmissions apart: all segments, SYNs, timeouts, spurious RTOs.
fn tcp_counters(ns: &Netns) -> BTreeMap<String, f64> {
    const WANT: &[&str] =
        &["RetransSegs", "TCPSynRetrans", "TCPTimeouts", "TCPSpuriousRTOs", "TCPLossProbes", "TCPFastRetrans"];
    let mut out = BTreeMap::new();
    for (file, prefix) in [("/proc/net/snmp", "Tcp:"), ("/proc/net/netstat", "TcpExt:")] {
        let Ok(text) = ns.run(&["cat", file]) else { continue };
        let mut rows = text.lines().filter(|l| l.starts_with(prefix));
        let (Some(names), Some(values)) = (rows.next(), rows.next()) else { continue };
        for (n, v) in names.split_whitespace().zip(values.split_whitespace()).skip(1) {
            if let (true, Ok(v)) = (WANT.contains(&n), v.parse::<f64>()) {
                out.insert(n.to_string(), v);
            }
        }
    }
    out
}

fn counter_delta(a: &BTreeMap<String, f64>, b: &BTreeMap<String, f64>) -> BTreeMap<String, f64> {
    b.iter().filter_map(|(k, v)| Some((k.clone(), v - a.get(k)?))).collect()
}

fn run_case(env: &Env, backend: &str, case: &Case, round: usize, dur: Duration) -> Result<Row> {
    let tag = format!("{}-r{}-{backend}", case.name, round + 1);
    let tcp0 = (tcp_counters(&env.lab.ns_b), tcp_counters(&env.lab.ns_a));
    let (server, target) = start_server(env, backend, case, &tag)?;
    let json = env.logs.join(format!("{tag}.bench.json"));
    let blog = env.logs.join(format!("{tag}.bench.log"));
    let mut c = Command::new("ip");
    c.args(["netns", "exec", &env.lab.ns_b.name]).arg(&env.bench_exe);
    let client_backend = if case.same_client { backend } else { "kernel" };
    c.args(["--backend", client_backend, "--connect", &target]);
    if client_backend == "xsk" {
        c.args(["--iface", &env.lab.if_b, "--attach", &env.attach.to_string()]);
        c.args(["--addr", &format!("{}/{}", env.xsk_client_addr, env.lab.prefix_len)]);
        c.args(case.xsk_args);
        match case.loss {
            None => {}
            // nftables cannot see the stack's frames (see LossKind): its own injector drops them.
            Some(LossKind::Random1) => {
                c.args(["--fault-rx-drop", "0.01", "--fault-tx-drop", "0.01"]);
            }
            Some(k @ LossKind::Outages) => bail!("{}: {k:?} loss needs a kernel client (nftables)", case.name),
        }
    } else {
        c.args(["--bind", &env.lab.addr_b.to_string()]);
    }
    c.args(["--conns", &case.conns.to_string(), "--depth", &case.depth.to_string(), "--req-size", "64"]);
    c.args(["--pattern", case.pattern]);
    if case.client_threads > 1 && client_backend == "kernel" {
        c.args(["--threads", &case.client_threads.to_string()]);
    }
    c.args(["--duration", &format!("{}ms", dur.as_millis()), "--warmup", "300ms", "--quiet"]);
    // smoltcp (0.13 on) rounds its retransmission timeout up to 1 s (RFC 6298), doubling per
    // retry: a response lost twice at 1% loss needs 3 s to come back, longer than rr-bench's
    // default 2 s drain, and would count as lost.
    c.args(["--drain-timeout", "10s"]);
    if let Some(r) = case.rate {
        c.args(["--rate", &r.to_string()]);
    }
    if case.busy_poll {
        c.args(["--busy-poll", "50"]);
    }
    if client_backend == "xsk" {
        // Last, so that they override the case's own options (`--busy-poll`).
        c.args(&env.xsk_args);
    }
    c.args(["--server-pid", &server.child.id().to_string()]);
    if case.conns > 1000 {
        c.args(["--connect-timeout", "20s"]);
    }
    c.arg("--json").arg(&json);
    let out = File::create(&blog).with_context(|| format!("creating {}", blog.display()))?;
    let err = out.try_clone()?;
    let loss = case.loss.map(|k| Loss::add(&env.lab, k)).transpose()?;
    let status = c.stdin(Stdio::null()).stdout(out).stderr(err).status().context("running rr-bench")?;
    let mut loss_counters = loss.as_ref().map(Loss::counters).unwrap_or_default();
    drop(loss);
    let summary = server.stop();
    let tcp1 = (tcp_counters(&env.lab.ns_b), tcp_counters(&env.lab.ns_a));
    let (client_tcp, server_tcp) = (counter_delta(&tcp0.0, &tcp1.0), counter_delta(&tcp0.1, &tcp1.1));
    if !status.success() {
        bail!("rr-bench failed for {backend}/{} ({status}); {}", case.name, tail(&blog, 15));
    }
    let summary = summary?;
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json)?)?;
    let f = |k: &str| v[k].as_f64().unwrap_or(f64::NAN);
    let counters = xsk_counters(&summary);
    let client_recovery: Option<RecoveryCounts> = serde_json::from_value(v["recovery"].clone()).unwrap_or(None);
    if let Some(n) = v["xsk"]["stats"]["drops"]["injected"].as_f64().filter(|_| case.loss.is_some()) {
        loss_counters.insert("injected_rx_dropped".into(), n);
    }
    // The xsk server's recovery counters (summed over shards); NaN for the kernel server.
    let server_rec = |name: &str| counters.get(&format!("recovery_{name}")).unwrap_or(f64::NAN);
    let client_retrans = client_tcp.get("RetransSegs").copied().unwrap_or(f64::NAN);
    let server_retrans =
        if backend == "kernel" { server_tcp.get("RetransSegs").copied().unwrap_or(f64::NAN) } else { f64::NAN };
    // Both ends: kernel TCP's segments where it runs, the stack's own counts where it does.
    let stack_server = ["rto_retransmits", "fast_retransmits", "tail_probes"].iter().map(|n| server_rec(n));
    let retrans_total = [client_retrans, server_retrans]
        .into_iter()
        .chain(stack_server)
        .chain(client_recovery.map(|r| r.resent() as f64))
        .filter(|x| x.is_finite())
        .sum::<f64>();
    let server_trouble: BTreeMap<String, f64> = counters
        .values
        .iter()
        .filter(|(k, v)| apps::stats::is_trouble(k) && **v > 0.0)
        .map(|(k, v)| (k.clone(), *v))
        .collect();
    Ok(Row {
        backend: backend.to_string(),
        case: case.name.to_string(),
        round,
        conns: case.conns,
        client_threads: case.client_threads,
        server_threads: case.server_threads,
        m: Metrics {
            rps: f("rps"),
            p50_us: f("p50_us"),
            p99_us: f("p99_us"),
            p999_us: f("p999_us"),
            cpu_us_per_req: f("cpu_us_per_req_server"),
            cpu_us_per_req_machine: f("cpu_us_per_req_machine"),
            cpu_us_per_req_own_rx: f("cpu_us_per_req_server_own_rx"),
            cpu_us_per_req_client: f("cpu_us_per_req_client"),
            client_cores: f("cores_client"),
            server_cores: f("cores_server"),
            setup_s: f("setup_s"),
            conn_setup_p99_us: v["churn"]["setup_p99_us"].as_f64().unwrap_or(f64::NAN),
            // The kernel server has no such counters (NaN prints as "-").
            server_drops: if counters.values.is_empty() {
                f64::NAN
            } else {
                counters.values.iter().filter(|(k, _)| is_drop(k)).map(|(_, v)| v).fold(0.0, |a, b| a + b)
            },
            client_retrans,
            server_retrans,
            retrans_total,
            server_rto_retransmits: server_rec("rto_retransmits"),
            server_fast_retransmits: server_rec("fast_retransmits"),
            server_tail_probes: server_rec("tail_probes"),
            server_spurious_retransmits: server_rec("spurious_retransmits"),
            server_spurious_probes: server_rec("spurious_probes"),
        },
        errors: v["errors"].as_u64().unwrap_or(0) + v["lost"].as_u64().unwrap_or(0),
        server_requests: summary["requests"].as_u64().unwrap_or(0),
        client_requests: v["requests"].as_u64().unwrap_or(0) + v["warmup_requests"].as_u64().unwrap_or(0),
        server_trouble,
        client_tcp,
        server_tcp,
        client_recovery,
        loss_counters,
    })
}

/// The xsk server's counters from its --json summary: one stats object, or (--threads) one per
/// shard, summed by name. Empty for the kernel server.
fn xsk_counters(summary: &serde_json::Value) -> Snapshot {
    let mut snap = Snapshot::new(&summary["xsk"]["stats"]);
    for shard in summary["xsk"]["shards"].as_array().into_iter().flatten() {
        for (k, v) in Snapshot::new(&shard["stats"]).values {
            *snap.values.entry(k).or_insert(0.0) += v;
        }
    }
    snap
}

/// Whether the server's request count agrees with the client's responses: the server may
/// have answered a few requests whose responses the client never read (lost ones, or
/// in flight when a warm-up connection closed), never fewer.
fn counts_agree(r: &Row, lost_bound: u64) -> bool {
    r.server_requests >= r.client_requests && r.server_requests <= r.client_requests + lost_bound
}

fn median(mut v: Vec<f64>) -> f64 {
    v.retain(|x| x.is_finite());
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    if v.len() % 2 == 1 {
        v[v.len() / 2]
    } else {
        (v[v.len() / 2 - 1] + v[v.len() / 2]) / 2.0
    }
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
    lab::install_signal_handlers();
    std::fs::create_dir_all(&args.out).with_context(|| format!("creating {}", args.out.display()))?;
    let logs = args.out.join("logs");
    // Only this tool writes there: logs of an earlier run would mix with this one's.
    let _ = std::fs::remove_dir_all(&logs);
    std::fs::create_dir_all(&logs).with_context(|| format!("creating {}", logs.display()))?;
    let meta = metadata(args, rounds, dur);
    lab::sweep_stale("rd");
    lab::sweep_stale("rq");
    let env = build_env(args, "rd", 1, logs.clone())?;
    // The server-threads cases need one RX queue per xsk shard on the server's veth and as many
    // TX queues on the client's (the kernel picks a client TX queue per flow by its hash, and
    // veth delivers to the RX queue of the same number): a second lab, built only if needed, so
    // the single-queue cases keep the lab they always had.
    let max_threads = cases.iter().map(|c| c.server_threads).max().unwrap_or(1);
    let env_mq = if max_threads > 1 { Some(build_env(args, "rq", max_threads as u32, logs)?) } else { None };
    println!(
        "lab: {} ({}) <-> {} ({}); {rounds} round(s) of {} per case, alternating xsk/kernel; client receive path {}; logs in {}",
        env.lab.ns_a.name,
        env.lab.addr_a,
        env.lab.ns_b.name,
        env.lab.addr_b,
        humantime::format_duration(dur),
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
    let total = cases.len() * rounds as usize * 2;
    let mut n = 0;
    let mut failures = 0;
    let started = Instant::now();
    'outer: for case in &cases {
        for round in 0..rounds as usize {
            // Alternate which backend goes first, so drift hits both alike.
            let order = if round % 2 == 0 { ["xsk", "kernel"] } else { ["kernel", "xsk"] };
            for backend in order {
                if lab::interrupted() {
                    break 'outer;
                }
                n += 1;
                let site = if case.server_threads > 1 { env_mq.as_ref().unwrap_or(&env) } else { &env };
                let result = run_case(site, backend, case, round, dur);
                let head = format!("[{n:>2}/{total}] {:<13} round {}/{rounds} {:<6}", case.name, round + 1, backend);
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
    if !lab::interrupted() && runs_redis(args) {
        println!();
        failures += redis::run(&env, args, rounds as usize)?;
    }
    if lab::interrupted() {
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

/// A veth lab (`queues` queue pairs on both ends) with the client namespace prepared as every
/// case needs it.
fn build_env(args: &Args, prefix: &str, queues: u32, logs: PathBuf) -> Result<Env> {
    let peer_queues = (queues > 1).then_some(queues);
    let lab = Lab::new(&LabConfig { prefix: prefix.into(), peer_queues, ..LabConfig::default() })
        .with_context(|| format!("building the veth lab ({queues} queue pair(s))"))?;
    // The client keeps veth's default offloads (TX checksum, TSO), as in every
    // container; both servers get the same frames.
    // 10,000 connections, twice (warm-up and measured run), one after the other:
    // the client needs more ports than the default range, and TIME-WAIT reuse.
    lab.ns_b.run(&["sysctl", "-qw", "net.ipv4.ip_local_port_range=10000 65000"])?;
    lab.ns_b.run(&["sysctl", "-qw", "net.ipv4.tcp_tw_reuse=1"])?;
    // The churn cases: the kernel client closes first, and each connection would hold its
    // port in TIME-WAIT for 60 s (reuse needs timestamps, which the stack does not send): no
    // TIME-WAIT in the client's namespace. The FIN exchange on the wire is the same.
    lab.ns_b.run(&["sysctl", "-qw", "net.ipv4.tcp_max_tw_buckets=0"])?;
    if args.peer_napi_thread {
        // veth delivers into the receiver's backlog and processes it in the
        // sender's softirq: the server would pay for the client's TCP. GRO on
        // gives the client's veth a NAPI context, and a threaded NAPI runs it
        // in its own kernel thread, as a VM's peer runs on another machine.
        lab.ns_b.run(&["ethtool", "-K", &lab.if_b, "gro", "on"])?;
        lab.ns_b.run(&["sh", "-c", &format!("echo 1 > /sys/class/net/{}/threaded", lab.if_b)])?;
    }
    let o = lab.addr_a.octets();
    Ok(Env {
        server_exe: sibling("rr-server")?,
        bench_exe: sibling("rr-bench")?,
        logs,
        xsk_server_addr: std::net::Ipv4Addr::new(o[0], o[1], o[2], 100),
        xsk_client_addr: std::net::Ipv4Addr::new(o[0], o[1], o[2], 101),
        attach: args.attach,
        xsk_args: args.xsk_args.as_deref().unwrap_or("").split_whitespace().map(String::from).collect(),
        lab,
    })
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

#[derive(Serialize)]
struct Summary {
    backend: String,
    case: String,
    conns: usize,
    client_threads: usize,
    server_threads: usize,
    #[serde(flatten)]
    m: Metrics,
    errors: u64,
    runs: usize,
}

fn summaries(rows: &[Row], cases: &[Case]) -> BTreeMap<(String, String), Summary> {
    let mut sums = BTreeMap::new();
    for case in cases {
        for backend in ["xsk", "kernel"] {
            let rs: Vec<&Row> = rows.iter().filter(|r| r.case == case.name && r.backend == backend).collect();
            if rs.is_empty() {
                continue;
            }
            sums.insert(
                (case.name.to_string(), backend.to_string()),
                Summary {
                    backend: backend.into(),
                    case: case.name.into(),
                    conns: case.conns,
                    client_threads: case.client_threads,
                    server_threads: case.server_threads,
                    m: Metrics::median(&rs.iter().map(|r| &r.m).collect::<Vec<_>>()),
                    errors: rs.iter().map(|r| r.errors).sum(),
                    runs: rs.len(),
                },
            );
        }
    }
    sums
}

/// The xsk/kernel ratio of one figure (server CPU per request, p50) in each
/// round (the two runs of a round are back to back, so they share the
/// machine's state), summarised.
#[derive(Debug, PartialEq, Serialize)]
struct Paired {
    case: String,
    rounds: usize,
    median: f64,
    min: f64,
    max: f64,
    /// Rounds where the stack's figure was at most the kernel's.
    at_most_kernel: usize,
}

fn paired_ratios(rows: &[Row], case: &str, figure: fn(&Metrics) -> f64) -> Option<Paired> {
    let cpu = |backend: &str, round: usize| {
        rows.iter()
            .find(|r| r.case == case && r.backend == backend && r.round == round)
            .map(|r| figure(&r.m))
            .filter(|c| c.is_finite() && *c > 0.0)
    };
    let mut rounds: Vec<usize> = rows.iter().filter(|r| r.case == case).map(|r| r.round).collect();
    rounds.sort_unstable();
    rounds.dedup();
    let ratios: Vec<f64> = rounds.iter().filter_map(|&n| Some(cpu("xsk", n)? / cpu("kernel", n)?)).collect();
    if ratios.len() < 2 {
        return None;
    }
    Some(Paired {
        case: case.into(),
        rounds: ratios.len(),
        median: median(ratios.clone()),
        min: ratios.iter().copied().fold(f64::INFINITY, f64::min),
        max: ratios.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        at_most_kernel: ratios.iter().filter(|&&q| q <= 1.0).count(),
    })
}

/// How the tables are printed: --wide, --markdown, and whether files are written (not for
/// --from-json --markdown).
#[derive(Clone, Copy, Debug, Default)]
struct Show {
    wide: bool,
    markdown: bool,
    write: bool,
}

/// One column of the medians table: its group (the columns of one measure), its head, whether
/// only --wide shows it, and its cell from the case and its xsk and kernel summaries.
struct Col {
    group: &'static str,
    head: &'static str,
    wide_only: bool,
    cell: fn(&Case, &Summary, &Summary) -> String,
}

fn columns() -> Vec<Col> {
    use apps::table::{fixed, latency};
    let col = |group, head, wide_only, cell| Col {
        group,
        head,
        wide_only,
        cell,
    };
    vec![
        col("case", "case", false, |c, _, _| c.name.to_string()),
        col("conns", "conns", true, |c, _, _| c.conns.to_string()),
        col("conns", "thr", true, |c, _, _| {
            format!("{}/{}", c.client_threads, c.server_threads)
        }),
        col("rps", "xsk req/s", false, |_, x, _| fixed(x.m.rps, 0)),
        col("rps", "krn req/s", false, |_, _, k| fixed(k.m.rps, 0)),
        col("rps", "x/k", false, |_, x, k| fixed(x.m.rps / k.m.rps, 2)),
        col("p50", "xsk p50", false, |_, x, _| latency(x.m.p50_us)),
        col("p50", "krn p50", false, |_, _, k| latency(k.m.p50_us)),
        col("p99", "xsk p99", false, |_, x, _| latency(x.m.p99_us)),
        col("p99", "krn p99", false, |_, _, k| latency(k.m.p99_us)),
        col("p999", "xsk p99.9", true, |_, x, _| latency(x.m.p999_us)),
        col("p999", "krn p99.9", true, |_, _, k| latency(k.m.p999_us)),
        col("cpu", "xsk cpu", false, |_, x, _| {
            fixed(x.m.cpu_us_per_req, 2)
        }),
        col("cpu", "krn cpu", false, |_, _, k| {
            fixed(k.m.cpu_us_per_req, 2)
        }),
        col("cpu", "x/k", false, |_, x, k| {
            fixed(x.m.cpu_us_per_req / k.m.cpu_us_per_req, 2)
        }),
        col("own", "xsk own", true, |_, x, _| {
            fixed(x.m.cpu_us_per_req_own_rx, 2)
        }),
        col("own", "krn own", true, |_, _, k| {
            fixed(k.m.cpu_us_per_req_own_rx, 2)
        }),
        col("own", "x/k", true, |_, x, k| {
            fixed(x.m.cpu_us_per_req_own_rx / k.m.cpu_us_per_req_own_rx, 2)
        }),
        col("mc", "xsk mc", true, |_, x, _| machine_col(x)),
        col("mc", "krn mc", true, |_, _, k| machine_col(k)),
        col("cores", "xsk c/s", true, |_, x, _| {
            format!("{:.2}/{:.2}", x.m.client_cores, x.m.server_cores)
        }),
        col("cores", "krn c/s", true, |_, _, k| {
            format!("{:.2}/{:.2}", k.m.client_cores, k.m.server_cores)
        }),
        col("setup", "xsk s", true, |_, x, _| fixed(x.m.setup_s, 2)),
        col("setup", "krn s", true, |_, _, k| fixed(k.m.setup_s, 2)),
        col("conn p99", "xsk", true, |_, x, _| latency(x.m.conn_setup_p99_us)),
        col("conn p99", "krn", true, |_, _, k| latency(k.m.conn_setup_p99_us)),
        col("drops", "drops", true, |_, x, _| {
            fmt_count(x.m.server_drops)
        }),
        col("retx", "x retx", true, |_, x, _| fmt_count(x.m.retx())),
        col("retx", "k retx", true, |_, _, k| fmt_count(k.m.retx())),
        col("tlp", "x tlp", true, |_, x, _| {
            fmt_count(x.m.server_tail_probes)
        }),
        col("tlp", "x sptl", true, |_, x, _| {
            fmt_count(x.m.server_spurious_probes)
        }),
        col("tlp", "x rto", true, |_, x, _| {
            fmt_count(x.m.server_rto_retransmits)
        }),
    ]
}

/// The medians, one row per case that has both an xsk and a kernel summary.
fn medians_table(
    cases: &[Case],
    sums: &BTreeMap<(String, String), Summary>,
    wide: bool,
) -> apps::table::Table {
    let cols: Vec<Col> = columns()
        .into_iter()
        .filter(|c| wide || !c.wide_only)
        .collect();
    let mut groups: Vec<Vec<&str>> = Vec::new();
    for (i, c) in cols.iter().enumerate() {
        if i == 0 || cols[i - 1].group != c.group {
            groups.push(Vec::new());
        }
        groups.last_mut().expect("pushed above").push(c.head);
    }
    let mut t = apps::table::Table::grouped(&groups);
    for case in cases {
        let (Some(x), Some(k)) = (
            sums.get(&(case.name.into(), "xsk".into())),
            sums.get(&(case.name.into(), "kernel".into())),
        ) else {
            continue;
        };
        t.row(cols.iter().map(|c| (c.cell)(case, x, k)).collect());
    }
    t
}

/// What the table's columns mean, as sentences.
fn legend(wide: bool) -> Vec<String> {
    let mut l = vec![
        "Medians over the rounds. xsk = the AF_XDP stack, krn = kernel TCP, x/k = their ratio; req/s = requests per second; p50, p99 = latency percentiles.".to_string(),
        "cpu = the server process's CPU time per request in us, kernel work in its context included (on veth that holds the client's receive path, and not the server's own).".into(),
    ];
    if wide {
        l.extend([
            "thr = client/server threads (rr-bench/rr-server --threads).".to_string(),
            "own = the same with each side charged its own receive path (server CPU - NET_RX softirq run in it + NET_RX run in the client: on veth the sender's process runs the receiver's softirq; - without root).".into(),
            format!("mc = whole machine; c/s = cores kept busy by the client / server process (its CPU time over the window's wall time, all threads), of {}: a side near its thread count is the bottleneck; mc n/a: /proc/stat counts busy time in ticks, which miss short wake-ups on an otherwise idle machine, so it read less than the two processes' own CPU time.", apps::online_cpus()),
            "s = seconds to set up the connections (not measured); conn p99 = churn and storm cases: from the connect call to the established connection; drops = the xsk server's drop counters.".into(),
            "retx = everything both ends sent again: kernel TCP's retransmitted segments (RetransSegs, its loss probes included) where kernel TCP runs, and the stack's RTO and fast retransmits and tail-loss probes where the stack runs (client and server); x tlp / x sptl / x rto = the xsk server's tail-loss probes, the probes the client showed were spurious, and its RTO retransmits; all over warm-up, setup and run.".into(),
        ]);
    } else {
        l.push("--wide shows every column (p99.9, own receive path, cores, setup, drops, retransmissions, probes).".into());
    }
    l
}

/// Words wrapped to lines of at most `width` characters.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = vec![String::new()];
    for w in text.split_whitespace() {
        let cur = lines.last_mut().expect("never empty");
        if !cur.is_empty() && cur.len() + 1 + w.len() > width {
            lines.push(w.to_string());
        } else {
            if !cur.is_empty() {
                cur.push(' ');
            }
            cur.push_str(w);
        }
    }
    lines
}

fn report(rows: &[Row], cases: &[Case], out: &Path, meta: &serde_json::Value, show: Show) -> Result<()> {
    let sums = summaries(rows, cases);
    let table = medians_table(cases, &sums, show.wide);
    println!();
    if show.markdown {
        // Where the figures come from, for a study that quotes them.
        let args: Vec<&str> = meta["args"].as_array().map_or(vec![], |a| a.iter().filter_map(|v| v.as_str()).collect());
        println!("{}; command: `{}`", plot_text(cases, meta).subtitle, args.join(" "));
        println!();
        print!("{}", table.markdown());
        println!();
        println!("{}", legend(show.wide).join(" "));
    } else {
        print!("{}", table.text());
        let width = if show.wide { 120 } else { 100 };
        for sentence in legend(show.wide) {
            for line in wrap(&sentence, width) {
                println!("{line}");
            }
        }
    }
    let paired: Vec<Paired> =
        cases.iter().filter_map(|c| paired_ratios(rows, c.name, |m| m.cpu_us_per_req)).collect();
    let paired_own: Vec<Paired> =
        cases.iter().filter_map(|c| paired_ratios(rows, c.name, |m| m.cpu_us_per_req_own_rx)).collect();
    // Latency moves with the machine as CPU does: busy-same-1's two rows go slow and fast
    // together (docs/2026-12-04-busy-placement).
    let paired_p50: Vec<Paired> = cases.iter().filter_map(|c| paired_ratios(rows, c.name, |m| m.p50_us)).collect();
    // Whatever either side's kernel does for the other, the two processes together hold it all.
    let paired_both: Vec<Paired> = cases
        .iter()
        .filter_map(|c| paired_ratios(rows, c.name, |m| m.cpu_us_per_req + m.cpu_us_per_req_client))
        .collect();
    // The ratio of medians above mixes rounds run minutes apart; on a
    // noisy machine the per-round ratio is the steadier figure.
    // The two last views are --wide's.
    let views = [
        ("server CPU, xsk/kernel per round (each round's two runs back to back):", &paired),
        ("p50 latency, xsk/kernel per round:", &paired_p50),
        ("server CPU with its own receive (own), xsk/kernel per round:", &paired_own),
        ("server + client processes (the same kernel client for both), xsk/kernel per round:", &paired_both),
    ];
    for (title, list) in views.into_iter().take(if show.wide { 4 } else { 2 }) {
        if list.is_empty() {
            continue;
        }
        println!();
        if show.markdown {
            let mut t = apps::table::Table::new(&["case", "median", "range", "rounds at most the kernel's"]);
            for p in list {
                t.row(vec![
                    p.case.clone(),
                    format!("{:.2}", p.median),
                    format!("{:.2}-{:.2}", p.min, p.max),
                    format!("{} of {}", p.at_most_kernel, p.rounds),
                ]);
            }
            println!("{}", title.trim_end_matches(':'));
            println!();
            print!("{}", t.markdown());
            continue;
        }
        println!("{title}");
        for p in list {
            println!(
                "  {:<13} median {:.2}  range {:.2}-{:.2}  at most the kernel's in {} of {} rounds",
                p.case, p.median, p.min, p.max, p.at_most_kernel, p.rounds
            );
        }
    }
    let errors: u64 = sums.values().map(|s| s.errors).sum();
    let json = serde_json::json!({
        "metadata": meta, "summary": sums.values().collect::<Vec<_>>(), "paired_cpu": paired, "paired_p50": paired_p50, "paired_cpu_own_rx": paired_own,
        "paired_cpu_server_and_client": paired_both, "runs": rows
    });
    if show.write {
        apps::write_atomically(&out.join("results.json"), &serde_json::to_vec_pretty(&json)?)?;
        let (svg, png) = (out.join("results.svg"), out.join("results.png"));
        apps::plot::draw_files(&plot_text(cases, meta), &plot_cases(&sums, cases), &svg, &png)?;
        // On stderr with --markdown, so stdout is the document.
        let wrote = format!("wrote {}, {} and {}", out.join("results.json").display(), svg.display(), png.display());
        if show.markdown { eprintln!("{wrote}") } else { println!("{wrote}") }
    }
    if errors > 0 {
        bail!("{errors} requests failed or were lost");
    }
    Ok(())
}

/// The whole-machine CPU per request, unless /proc/stat's tick sampling
/// visibly undercounted it (less than the client and server processes used).
fn machine_col(s: &Summary) -> String {
    let procs = (s.m.client_cores + s.m.server_cores) / s.m.rps * 1e6;
    if procs.is_finite() && s.m.cpu_us_per_req_machine < 0.9 * procs {
        "n/a".into()
    } else {
        format!("{:.2}", s.m.cpu_us_per_req_machine)
    }
}

fn plot_cases(sums: &BTreeMap<(String, String), Summary>, cases: &[Case]) -> Vec<PlotCase> {
    let bars = |c: &Case, b: &str| {
        sums.get(&(c.name.to_string(), b.to_string())).map(|s| Bars {
            rps: s.m.rps,
            p50_us: s.m.p50_us,
            p99_us: s.m.p99_us,
        })
    };
    cases
        .iter()
        .filter_map(|c| {
            let (xsk, kernel) = (bars(c, "xsk"), bars(c, "kernel"));
            (xsk.is_some() || kernel.is_some()).then(|| PlotCase {
                name: c.name.into(),
                conns: c.conns,
                threads: (c.client_threads, c.server_threads),
                xsk,
                kernel,
            })
        })
        .collect()
}

fn plot_text(cases: &[Case], meta: &serde_json::Value) -> PlotText {
    let rounds = meta["rounds"].as_u64().unwrap_or(1);
    let dur = meta["duration_s"]
        .as_f64()
        .map_or_else(|| "?".into(), |d| humantime::format_duration(Duration::from_secs_f64(d)).to_string());
    let how = if rounds > 1 {
        format!("median of {rounds} rounds of {dur} per case")
    } else {
        format!("one round of {dur} per case")
    };
    let commit = meta["commit"].as_str().map_or("?".to_string(), |c| c.chars().take(10).collect());
    let subtitle = format!(
        "{how}, alternating xsk/kernel; 64-byte echo, veth lab; {}, Linux {}, {} CPUs ({}), commit {commit}",
        meta["date"].as_str().unwrap_or("?"),
        meta["kernel"].as_str().unwrap_or("?"),
        meta["cpus"].as_u64().unwrap_or(0),
        meta["cpu_model"].as_str().unwrap_or("?"),
    );
    let has = |f: &dyn Fn(&Case) -> bool| cases.iter().any(f);
    let mut legend = vec!["Cases: the client is the kernel's TCP unless the name says same-; one request in flight per connection (closed loop) unless open- or idle-.".to_string()];
    if has(&|c| !c.same_client && !c.busy_poll && c.rate.is_none() && c.loss.is_none() && c.pattern == "rr") {
        legend.push("rr-N: N connections.".into());
    }
    if has(&|c| c.pattern != "rr") {
        legend.push("churn-16: connect, one request, close, 16 connections at a time; storm-1000: waves of 1,000 connections opened at once, one request each, closed. Their req/s are connections/s, p50/p99 from the connect call to the response (handshake included), cpu per connection.".into());
    }
    if has(&|c| c.client_threads > 1) {
        legend.push("-t2: 2 client threads (rr-bench --threads 2); -s2: and 2 server threads (rr-server --threads 2: xsk one stack shard per queue of a 2-queue veth, kernel 2 SO_REUSEPORT listeners); \"c/s thr\" under a case: client/server threads.".into());
    }
    if has(&|c| c.same_client) {
        legend.push("same-: the client runs on the same stack as the server: stack client against stack server (xsk bars), kernel client against kernel server (kernel bars).".into());
    }
    if has(&|c| c.busy_poll) {
        legend.push("busy-: busy polling in server and client (each spins a core).".into());
    }
    let open: Vec<String> = cases
        .iter()
        .filter_map(|c| c.rate.map(|r| format!("{}: {} requests/s", c.name, apps::group_digits(r))))
        .collect();
    if !open.is_empty() {
        let mut line = format!(
            "Open loop ({}) in total over the connections; latency counts from each request's scheduled time.",
            open.join(", ")
        );
        if has(&|c| c.name == "idle-100") {
            line += " idle-100: each connection idles ~160 ms between requests, so the client ACKs every response late (delayed ACK).";
        }
        legend.push(line);
    }
    let mut loss = Vec::new();
    if has(&|c| c.loss == Some(LossKind::Random1) && !c.same_client) {
        loss.push("loss1-16: 1% of the frames dropped each way at the client (nftables)".to_string());
    }
    if has(&|c| c.loss == Some(LossKind::Random1) && c.same_client) {
        loss.push("loss1-same-16: the same, same- clients (the stack client's own fault injector: nftables cannot see AF_XDP frames)".into());
    }
    if has(&|c| c.loss == Some(LossKind::Outages)) {
        loss.push(format!(
            "lossburst-16: one in {} TCP frames at the client starts a {OUTAGE_MS} ms outage dropping every frame either way (nftables)",
            apps::group_digits(u64::from(OUTAGE_ONE_IN))
        ));
    }
    if !loss.is_empty() {
        legend.push(format!("{}; 16 connections.", loss.join("; ")));
    }
    PlotText {
        title: "Userspace TCP/IP over AF_XDP (xsk) against kernel TCP: request/response".into(),
        subtitle,
        case_legend: legend,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli() {
        Args::command().debug_assert();
        let a = Args::try_parse_from(["rr-demo", "--duration", "2s", "--rounds", "2"]).unwrap();
        assert_eq!((a.duration, a.rounds, a.attach), (Duration::from_secs(2), 2, AttachMode::Auto));
        for bad in [&["--rounds", "0"][..], &["--duration", "3"], &["--attach", "sideways"], &["--seconds", "3"]] {
            assert!(Args::try_parse_from(["rr-demo"].iter().chain(bad)).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn metadata_keys() {
        let a = Args::try_parse_from(["rr-demo"]).unwrap();
        let m = metadata(&a, 3, Duration::from_secs(4));
        for k in ["date", "kernel", "cpu_model", "cpus", "commit", "args", "rounds", "duration_s", "attach"] {
            assert!(m.get(k).is_some(), "{k} missing: {m}");
        }
        assert!(!m["kernel"].as_str().unwrap().is_empty());
        assert_eq!(m["rounds"], 3);
        let t = plot_text(&cases(), &m);
        assert!(t.subtitle.starts_with("median of 3 rounds of 4s"), "{}", t.subtitle);
        let m1 = metadata(&a, 1, Duration::from_secs(1));
        assert!(plot_text(&cases(), &m1).subtitle.starts_with("one round of 1s"));
        assert!(t
            .case_legend
            .iter()
            .any(|l| l.starts_with("same-: ") && l.contains("stack client against stack server")));
    }

    #[test]
    fn loss_and_idle_cases() {
        let all = cases();
        let get = |n: &str| all.iter().find(|c| c.name == n).unwrap_or_else(|| panic!("{n} missing")).clone();
        let (l1, ls, lb, idle) = (get("loss1-16"), get("loss1-same-16"), get("lossburst-16"), get("idle-100"));
        assert_eq!((l1.loss, l1.same_client, l1.conns), (Some(LossKind::Random1), false, 16));
        // loss1-same-16 is loss1-16 with same- clients, as same-16 is rr-16.
        assert_eq!((ls.loss, ls.same_client, ls.conns, ls.rate), (Some(LossKind::Random1), true, 16, None));
        // Outages are nftables only: a kernel client.
        assert_eq!((lb.loss, lb.same_client, lb.conns), (Some(LossKind::Outages), false, 16));
        assert_eq!((idle.rate, idle.conns, idle.same_client, idle.loss), (Some(100), 16, false, None));
        assert!(all.iter().filter(|c| c.loss.is_some()).all(|c| !c.full_only && !c.busy_poll), "CI runs them");
        let names = case_names();
        let picked = |o: &str| names.iter().copied().filter(|n| only_matches(o, n, &names)).collect::<Vec<_>>();
        assert_eq!(picked("loss"), vec!["loss1-16", "loss1-same-16", "lossburst-16"]);
        assert_eq!(picked("loss1-16"), vec!["loss1-16"]);
        assert_eq!(picked("loss1-same-16,idle-100"), vec!["idle-100", "loss1-same-16"]);
    }

    #[test]
    fn help_and_legend_name_every_case() {
        let help = Args::command().render_long_help().to_string();
        let words: Vec<&str> = help.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-')).collect();
        for c in cases() {
            assert!(words.contains(&c.name), "rr-demo --help does not name {}", c.name);
        }
        assert!(help.contains(&format!("{OUTAGE_MS} ms outage")), "{help}");
        let m = metadata(&Args::try_parse_from(["rr-demo"]).unwrap(), 1, Duration::from_secs(1));
        let legend = plot_text(&cases(), &m).case_legend.join("\n");
        for name in ["idle-100", "open-5k", "loss1-16", "loss1-same-16", "lossburst-16"] {
            assert!(legend.contains(name), "{name} not in the legend:\n{legend}");
        }
        assert!(legend.contains("fault injector") && legend.contains("delayed ACK"), "{legend}");
        // A selection's legend names only its own cases.
        let some: Vec<Case> = cases().into_iter().filter(|c| c.name == "idle-100").collect();
        let legend = plot_text(&some, &m).case_legend.join("\n");
        assert!(legend.contains("idle-100: 100 requests/s") && !legend.contains("open-5k") && !legend.contains("loss"));
    }

    #[test]
    fn loss_rules_and_counters() {
        let r = loss_rules(LossKind::Random1);
        assert!(r.starts_with("table inet rrdemo_loss {"), "{r}");
        assert!(r.contains("hook input") && r.contains("hook output"), "{r}");
        assert_eq!(r.matches("numgen random mod 100 < 1 counter name \"dropped\" drop").count(), 2, "{r}");
        assert_eq!(r.matches("meta l4proto tcp counter name \"frames\"").count(), 2, "{r}");
        assert!(!r.contains("@outage"), "{r}");
        let b = loss_rules(LossKind::Outages);
        assert!(b.contains(&format!("flags dynamic,timeout; timeout {OUTAGE_MS}ms;")), "{b}");
        assert_eq!(b.matches("meta l4proto @outage counter name \"dropped\" drop").count(), 2, "{b}");
        assert_eq!(b.matches(&format!("numgen random mod {OUTAGE_ONE_IN} < 1 add @outage")).count(), 2, "{b}");
        // Braces balance: one table, its set and two chains.
        for t in [&r, &b] {
            assert_eq!(t.matches('{').count(), t.matches('}').count(), "{t}");
        }
        let listing = "table inet rrdemo_loss {\n\tcounter dropped {\n\t\tpackets 41 bytes 2952\n\t}\n}\n";
        assert_eq!(nft_packets(listing), Some(41.0));
        assert_eq!(nft_packets("Error: No such file or directory"), None);
        let c: BTreeMap<String, f64> =
            [("nft_frames", 4093.0), ("nft_dropped", 41.0), ("nft_outages", 3.0)].map(|(k, v)| (k.to_string(), v)).into();
        assert_eq!(loss_note(&c), "  nft dropped 41 of 4,093 frames in 3 outages");
        assert_eq!(loss_note(&BTreeMap::new()), "");
    }

    #[test]
    fn quick_runs_server_threads() {
        // CI runs --quick: it must start a multi-threaded server on both backends.
        assert!(cases().iter().any(|c| c.server_threads > 1 && c.client_threads > 1 && !c.full_only));
        let all = case_names();
        let picked = |o: &str| all.iter().copied().filter(|n| only_matches(o, n, &all)).collect::<Vec<_>>();
        assert_eq!(picked("rr-1"), vec!["rr-1"]);
        assert_eq!(picked("rr-1,open-5k"), vec!["rr-1", "open-5k"]);
        assert_eq!(picked("busy"), vec!["busy-1", "busy-same-1"]);
        assert!(picked("rr-10").contains(&"rr-1000") && picked("rr-10").contains(&"rr-10000"));
    }

    #[test]
    fn shard_counters_add_up() {
        let one = serde_json::json!({ "xsk": { "stats": { "port": { "rx_dropped": 2, "rx": 5 } } } });
        assert_eq!(xsk_counters(&one).get("port_rx_dropped"), Some(2.0));
        let two = serde_json::json!({ "xsk": { "shards": [
            { "stats": { "port": { "rx_dropped": 2, "rx": 5 } } },
            { "stats": { "port": { "rx_dropped": 3, "rx": 7 } } },
        ] } });
        let c = xsk_counters(&two);
        assert_eq!((c.get("port_rx_dropped"), c.get("port_rx")), (Some(5.0), Some(12.0)));
        assert!(xsk_counters(&serde_json::json!({ "requests": 3 })).values.is_empty(), "kernel server");
    }

    #[test]
    fn log_tail() {
        let p = std::env::temp_dir().join(format!("rr-demo-tail-{}", std::process::id()));
        std::fs::write(&p, (1..=30).map(|i| format!("line {i}\n")).collect::<String>()).unwrap();
        let t = tail(&p, 3);
        assert!(t.ends_with("\n    line 28\n    line 29\n    line 30"), "{t}");
        assert!(!t.contains("line 27"), "{t}");
        let _ = std::fs::remove_file(&p);
        assert!(tail(&p, 3).starts_with("last lines of"), "a missing log is no error");
    }

    #[test]
    fn counts_agreement() {
        let mut r = Row {
            backend: "xsk".into(),
            case: "rr-16".into(),
            round: 0,
            conns: 16,
            client_threads: 1,
            server_threads: 1,
            m: Metrics::median(&[]),
            errors: 0,
            server_requests: 1000,
            client_requests: 1000,
            server_trouble: BTreeMap::new(),
            client_tcp: BTreeMap::new(),
            server_tcp: BTreeMap::new(),
            client_recovery: None,
            loss_counters: BTreeMap::new(),
        };
        assert!(counts_agree(&r, 32));
        r.server_requests = 1020;
        assert!(counts_agree(&r, 32));
        r.server_requests = 999;
        assert!(!counts_agree(&r, 32), "the client cannot get more responses than the server sent");
        r.server_requests = 1100;
        assert!(!counts_agree(&r, 32));
    }

    #[test]
    fn the_default_demo_runs_the_headline_and_full_runs_everything() {
        let names = |argv: &[&str]| -> Vec<&'static str> {
            let a = Args::try_parse_from(["rr-demo"].iter().chain(argv)).unwrap();
            cases()
                .into_iter()
                .filter(|c| selected(&a, c))
                .map(|c| c.name)
                .collect()
        };
        let headline = names(&[]);
        assert_eq!(
            headline,
            [
                "rr-16",
                "rr-256",
                "same-16",
                "busy-same-1",
                "open-5k",
                "loss1-16"
            ]
        );
        assert_eq!(names(&["--full"]).len(), cases().len());
        let quick = names(&["--quick"]);
        assert!(
            quick.len() > headline.len() && !quick.contains(&"rr-10000"),
            "{quick:?}"
        );
        assert_eq!(names(&["--only", "rr-10000"]), ["rr-10000"]);
        assert_eq!(names(&["--only", "busy"]), ["busy-1", "busy-same-1"]);
        // Redis runs with --full, --quick or --only (which picks), not in the default demo.
        let redis = |argv: &[&str]| {
            runs_redis(&Args::try_parse_from(["rr-demo"].iter().chain(argv)).unwrap())
        };
        assert!(
            !redis(&[]) && redis(&["--full"]) && redis(&["--quick"]) && redis(&["--only", "redis"])
        );
        assert!(Args::try_parse_from(["rr-demo", "--full", "--quick"]).is_err());
    }

    /// Every case with both backends, its figures as wide as they get in practice.
    fn worst_case_summaries() -> BTreeMap<(String, String), Summary> {
        let rows: Vec<Row> = cases()
            .iter()
            .flat_map(|c| {
                ["xsk", "kernel"].map(|backend| Row {
                    backend: backend.into(),
                    case: c.name.into(),
                    round: 0,
                    conns: c.conns,
                    client_threads: c.client_threads,
                    server_threads: c.server_threads,
                    m: Metrics {
                        rps: 1_234_567.0,
                        p50_us: 999.96,
                        p99_us: 207_392.6,
                        p999_us: 1_500_800.0,
                        cpu_us_per_req: 123.45,
                        ..Metrics::median(&[])
                    },
                    errors: 0,
                    server_requests: 0,
                    client_requests: 0,
                    server_trouble: BTreeMap::new(),
                    client_tcp: BTreeMap::new(),
                    server_tcp: BTreeMap::new(),
                    client_recovery: None,
                    loss_counters: BTreeMap::new(),
                })
            })
            .collect();
        summaries(&rows, &cases())
    }

    #[test]
    fn the_key_table_fits_100_columns() {
        let sums = worst_case_summaries();
        let t = medians_table(&cases(), &sums, false);
        let text = t.text();
        assert_eq!(text.lines().count(), cases().len() + 1, "{text}");
        let widest = text.lines().map(|l| l.chars().count()).max().unwrap();
        assert!(widest <= 100, "{widest} columns:\n{text}");
        assert!(
            text.starts_with("case ") && text.contains("xsk p99") && text.contains("1234567"),
            "{text}"
        );
        for sentence in legend(false) {
            assert!(wrap(&sentence, 100).iter().all(|l| l.len() <= 100));
        }
        // --wide has every column: the p99.9 and the recovery counters too.
        let wide = medians_table(&cases(), &sums, true).text();
        assert!(
            wide.contains("xsk p99.9") && wide.contains("x rto") && wide.contains("1.50s"),
            "{wide}"
        );
    }

    #[test]
    fn markdown_table_matches_the_text_one() {
        let sums = worst_case_summaries();
        let md = medians_table(&cases(), &sums, false).markdown();
        let lines: Vec<&str> = md.lines().collect();
        assert_eq!(lines.len(), cases().len() + 2, "{md}");
        assert!(
            lines[0].starts_with("| case | xsk req/s | krn req/s | x/k |"),
            "{md}"
        );
        assert!(lines[1].starts_with("| --- | ---: |"), "{md}");
        // Every row has as many cells as the heads, and the figures the text table shows.
        let cells = |l: &str| l.matches(" | ").count();
        assert!(lines.iter().all(|l| cells(l) == cells(lines[0])), "{md}");
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with("| loss1-same-16 | 1234567 | 1234567 | 1.00 | 1.00ms |")),
            "{md}"
        );
    }

    #[test]
    fn time_left_extrapolates_from_the_runs_so_far() {
        assert_eq!(time_left(Duration::from_secs(10), 2, 6), "~20s left");
        assert_eq!(time_left(Duration::from_secs(90), 1, 3), "~3m left");
        assert_eq!(time_left(Duration::from_secs(9), 3, 3), "done");
    }

    #[test]
    fn paired_takes_each_rounds_own_ratio() {
        let row = |backend: &str, case: &str, round: usize, cpu: f64| Row {
            backend: backend.into(),
            case: case.into(),
            round,
            conns: 1,
            client_threads: 1,
            server_threads: 1,
            m: Metrics { cpu_us_per_req: cpu, ..Metrics::median(&[]) },
            errors: 0,
            server_requests: 0,
            client_requests: 0,
            server_trouble: BTreeMap::new(),
            client_tcp: BTreeMap::new(),
            server_tcp: BTreeMap::new(),
            client_recovery: None,
            loss_counters: BTreeMap::new(),
        };
        // The machine slows down in round 1: the medians compare 15 with 20
        // (0.75), the rounds 10/10, 20/20 and 15/14.
        let rows = vec![
            row("xsk", "open-5k", 0, 10.0),
            row("kernel", "open-5k", 0, 10.0),
            row("kernel", "open-5k", 1, 20.0),
            row("xsk", "open-5k", 1, 20.0),
            row("xsk", "open-5k", 2, 15.0),
            row("kernel", "open-5k", 2, 14.0),
            row("xsk", "rr-1", 0, 5.0),
            row("kernel", "rr-1", 0, 4.0),
            // A round without its kernel run is left out.
            row("xsk", "rr-1", 1, 1.0),
        ];
        let cpu = |m: &Metrics| m.cpu_us_per_req;
        let p = paired_ratios(&rows, "open-5k", cpu).unwrap();
        assert_eq!((p.rounds, p.at_most_kernel), (3, 2));
        assert_eq!((p.median, p.min), (1.0, 1.0));
        assert!((p.max - 15.0 / 14.0).abs() < 1e-12);
        assert_eq!(paired_ratios(&rows, "rr-1", cpu), None, "one complete round is no statistic");
        assert_eq!(paired_ratios(&rows, "same-16", cpu), None);
        // The own-receive figure is unknown in these rows (NaN): no rounds, no statistic.
        assert_eq!(paired_ratios(&rows, "open-5k", |m| m.cpu_us_per_req_own_rx), None);
        assert_eq!(paired_ratios(&rows, "open-5k", |m| m.p50_us), None, "no p50 in these rows either");
    }

    #[test]
    fn rows_survive_the_json_round_trip() {
        // Unknown figures are NaN, which JSON writes as null: --from-json must read them back.
        let r = Row {
            backend: "kernel".into(),
            case: "rr-16".into(),
            round: 1,
            conns: 16,
            client_threads: 1,
            server_threads: 2,
            m: Metrics { rps: 1000.0, ..Metrics::median(&[]) },
            errors: 0,
            server_requests: 5,
            client_requests: 5,
            server_trouble: BTreeMap::new(),
            client_tcp: BTreeMap::new(),
            server_tcp: BTreeMap::new(),
            client_recovery: None,
            loss_counters: BTreeMap::new(),
        };
        let text = serde_json::to_string(&serde_json::json!({ "runs": [&r] })).unwrap();
        assert!(text.contains("\"server_drops\":null"), "{text}");
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        let back: Vec<Row> = serde_json::from_value(v["runs"].clone()).unwrap();
        assert_eq!(back[0].m.rps, 1000.0);
        assert!(back[0].m.server_drops.is_nan() && back[0].m.p50_us.is_nan());
        // Files written before the newer columns existed still load.
        let old = r#"[{"backend":"xsk","case":"rr-1","round":0,"conns":1,"rps":5.0,"p50_us":1.0,"p99_us":2.0,
            "p999_us":3.0,"cpu_us_per_req":4.0,"cpu_us_per_req_machine":null,"errors":0}]"#;
        let back: Vec<Row> = serde_json::from_str(old).unwrap();
        assert!(back[0].m.setup_s.is_nan() && back[0].m.cpu_us_per_req_machine.is_nan());
        assert_eq!((back[0].client_threads, back[0].server_threads), (1, 1), "files from before --threads");
        // ... and before the loss-recovery figures: unknown, and the retx column as it was.
        let m = &back[0].m;
        assert!(m.server_tail_probes.is_nan() && m.server_spurious_probes.is_nan() && m.server_rto_retransmits.is_nan());
        assert!(m.retrans_total.is_nan() && back[0].client_recovery.is_none() && back[0].loss_counters.is_empty());
        let old = r#"[{"backend":"kernel","case":"loss1-16","round":0,"conns":16,"errors":0,
            "client_retrans":30.0,"server_retrans":12.0}]"#;
        let back: Vec<Row> = serde_json::from_str(old).unwrap();
        assert_eq!(back[0].m.retx(), 42.0, "old files: RetransSegs of the client and a kernel server");
        // New rows keep their recovery figures.
        let r = Row {
            m: Metrics { retrans_total: 7.0, server_tail_probes: 3.0, server_spurious_probes: 1.0, ..r.m.clone() },
            client_recovery: Some(RecoveryCounts { tail_probes: 2, ..RecoveryCounts::default() }),
            loss_counters: [("nft_dropped".to_string(), 5.0)].into(),
            ..r
        };
        let back: Row = serde_json::from_value(serde_json::to_value(&r).unwrap()).unwrap();
        assert_eq!((back.m.retx(), back.m.server_tail_probes, back.m.server_spurious_probes), (7.0, 3.0, 1.0));
        assert_eq!(back.client_recovery.map(|c| c.tail_probes), Some(2));
        assert_eq!(back.loss_counters.get("nft_dropped"), Some(&5.0));
        assert!(back.m.server_rto_retransmits.is_nan());
    }
}

/// The Redis cases: redis-benchmark and redis-py against the resp service and redis-server.
#[path = "rr-demo/redis.rs"]
mod redis;
