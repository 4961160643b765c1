//! flood-bench: resident memory and tail latency of rr-server under a SYN flood while it holds
//! thousands of idle connections (issue 9, item 4).
//!
//! Per case it builds its own veth lab (peers keep veth's default offloads), starts rr-server
//! in ns_a, opens `--idle-conns` kernel TCP connections from ns_b, then for `--duration` sends
//! SYNs from random source addresses through one raw AF_PACKET socket in ns_b while one
//! established connection does closed-loop echo requests. The server's VmRSS/VmHWM is sampled
//! every second; afterwards every idle connection must still answer an echo request.
//!
//! Cases: the stack (xsk) and the kernel backend, each with and without the flood.

use std::io::{ErrorKind, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use clap::{ArgMatches, Parser, ValueEnum};
use hdrhistogram::Histogram;
use serde::Serialize;
use serde_json::Value;

use apps::parse_duration;
use apps::server_process::ServerProcess;
use stack::xsk::EngineConfig;
use xsk_lab::lab::{self, Lab, LabConfig, Netns};
use xsk_lab::pktgen::checksum;
use xsk_lab::rawsock::RawSocket;

/// Tag of this tool's labs (namespace and interface names).
const LAB_TAG: &str = "fb";
/// Host part of the stack's dedicated address on the lab /24.
const XSK_HOST: u8 = 100;
const PORT: u16 = 7000;
/// Binary, libraries, heap metadata, socket-set vectors and hash maps: everything that is not
/// socket buffers or UMEM, generously.
const FIXED_ALLOWANCE: u64 = 128 << 20;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
enum Case {
    /// The stack, idle connections and the established connection, no flood.
    XskBaseline,
    /// The stack under the SYN flood.
    XskFlood,
    /// Kernel TCP backend, no flood.
    KernelBaseline,
    /// Kernel TCP backend under the same flood.
    KernelFlood,
}

impl Case {
    fn xsk(self) -> bool {
        matches!(self, Case::XskBaseline | Case::XskFlood)
    }
    fn flood(self) -> bool {
        matches!(self, Case::XskFlood | Case::KernelFlood)
    }
    fn name(self) -> &'static str {
        match self {
            Case::XskBaseline => "xsk-baseline",
            Case::XskFlood => "xsk-flood",
            Case::KernelBaseline => "kernel-baseline",
            Case::KernelFlood => "kernel-flood",
        }
    }
}

#[derive(Parser, Debug, Clone)]
#[command(
    name = "flood-bench",
    version,
    about = "rr-server's resident memory and an established connection's latency under a SYN flood \
             while it holds many idle connections (veth lab, needs root)",
    after_help = "\
Each case gets a fresh veth lab (198.18.0.0/15, torn down at exit, also on Ctrl-C) with
rr-server (echo service) in ns_a and everything else in ns_b: the idle kernel TCP connections,
the established connection measuring latency, and the raw AF_PACKET socket sending SYNs from
random sources of the lab /24 (--offlink-percent: also from elsewhere in 198.18.0.0/15).
veth charges the receiver's first processing to the sender's CPU: the flooder's core also
carries part of the server's packet work, so the pps figures are for this pair, not the server.

Exit status 1 when a case fails to run, an xsk case's RSS exceeds the bound derived from its
configuration, or idle connections were lost on the stack.

Examples:
  flood-bench                               # 4 cases x 60 s, 20,000 idle connections
  flood-bench --quick --json /tmp/flood.json
  flood-bench --case xsk-flood --flood-pps 50000 --duration 20s"
)]
struct Args {
    /// How long each case measures (flood and latency).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "60s")]
    duration: Duration,
    /// Short run: 5 s per case and 2,000 idle connections (unless given explicitly).
    #[arg(long)]
    quick: bool,
    /// Idle kernel TCP connections opened from ns_b before the measurement.
    #[arg(long, value_name = "N", default_value_t = 20_000)]
    idle_conns: usize,
    /// SYNs per second; 0 = as fast as one raw socket sends.
    #[arg(long, value_name = "PPS", default_value_t = 0)]
    flood_pps: u64,
    /// Share of SYNs from random sources of 198.18.0.0/15 outside the lab subnet (off-link,
    /// the server has no route back), in percent.
    #[arg(long, value_name = "PERCENT", default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=100))]
    offlink_percent: u8,
    /// Cases to run, in this order (repeatable or comma separated).
    #[arg(long = "case", value_enum, value_delimiter = ',',
          default_values_t = [Case::XskBaseline, Case::XskFlood, Case::KernelBaseline, Case::KernelFlood])]
    cases: Vec<Case>,
    /// rr-server's --max-conns.
    #[arg(long, value_name = "N", default_value_t = 30_000)]
    max_conns: usize,
    /// rr-server's --buffer (the stack's per-connection receive and transmit buffer), e.g. 64k.
    #[arg(long, value_name = "BYTES", value_parser = apps::parse_bytes, default_value = "64k")]
    buffer: usize,
    /// Payload bytes of each echo request of the established connection.
    #[arg(long, value_name = "BYTES", default_value_t = 32)]
    req_size: usize,
    /// Random seed of the SYN sources (default: from the clock).
    #[arg(long)]
    seed: Option<u64>,
    /// rr-server binary [default: next to this one].
    #[arg(long, value_name = "PATH")]
    server: Option<PathBuf>,
    /// Write the results as JSON to this file.
    #[arg(long, value_name = "PATH")]
    json: Option<PathBuf>,
    /// Keep the per-case scratch directory (server output) instead of removing it.
    #[arg(long)]
    keep: bool,
    /// No progress lines on stderr.
    #[arg(long)]
    quiet: bool,
    /// Every this long, each idle connection sends one echo request (0 = truly idle). A
    /// workaround for stacks that close connections idle past their timeout; it also puts
    /// idle_conns / interval requests per second of background load on the server.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "0s")]
    idle_ping: Duration,
    /// Every this long during the measurement, a fresh kernel TCP connection from ns_b
    /// (a legitimate client arriving during the flood): connect, one echo request, close. Its
    /// time to establish is reported (0 = none).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "250ms")]
    fresh_every: Duration,
    /// Extra arguments for the xsk server (repeatable), e.g. --xsk-arg=--syn-shed=off.
    #[arg(long = "xsk-arg", value_name = "ARG", allow_hyphen_values = true)]
    xsk_args: Vec<String>,
    /// Attach an XDP program that passes every frame to ns_b's veth, in every case (both
    /// backends then have the same peer): a veth sends native XDP_TX into its peer only while
    /// the peer runs one, so this is what lets the stack's XDP program answer the flood's SYNs
    /// itself on veth (with --xsk-arg=--xdp-cookies=on); virtio_net needs nothing of the kind.
    #[arg(long)]
    peer_xdp: bool,
    /// Internal: run as a holder of idle connections to ADDR:PORT (started by flood-bench in
    /// ns_b, talks to it over stdin/stdout).
    #[arg(long, hide = true, value_name = "ADDR:PORT")]
    hold_connect: Option<SocketAddrV4>,
    /// Internal: connections a holder opens.
    #[arg(long, hide = true, default_value_t = 0)]
    hold_count: usize,
}

fn main() -> ExitCode {
    apps::main_with::<Args>("flood-bench", run)
}

fn run(args: &Args, matches: &ArgMatches) -> Result<ExitCode> {
    if let Some(to) = args.hold_connect {
        return hold(to, args.hold_count, args.idle_ping).map(|()| ExitCode::SUCCESS);
    }
    let mut args = args.clone();
    if args.quick {
        if matches.value_source("duration") != Some(clap::parser::ValueSource::CommandLine) {
            args.duration = Duration::from_secs(5);
        }
        if matches.value_source("idle_conns") != Some(clap::parser::ValueSource::CommandLine) {
            args.idle_conns = 2_000;
        }
    }
    ensure!(args.duration >= Duration::from_secs(1), "--duration must be at least 1s");
    ensure!(args.duration <= Duration::from_secs(3600), "--duration must be at most 1h");
    ensure!(args.idle_conns <= 60_000, "--idle-conns at most 60,000 (one source address, one server port)");
    ensure!(args.idle_conns + 16 <= args.max_conns, "--max-conns must exceed --idle-conns by at least 16");
    ensure!(args.req_size >= 1 && args.req_size <= 65_536, "--req-size must be 1..=65536");
    ensure!(args.buffer >= 1024, "--buffer must be at least 1k");
    ensure!(!args.cases.is_empty(), "no --case given");
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        bail!("flood-bench needs root (network namespaces, veth, XDP, raw sockets)");
    }
    let server = match &args.server {
        Some(p) => p.clone(),
        None => std::env::current_exe()?.with_file_name("rr-server"),
    };
    ensure!(server.is_file(), "rr-server not found at {} (build it, or pass --server)", server.display());
    lab::install_signal_handlers();
    lab::sweep_stale(LAB_TAG);
    let seed = args.seed.unwrap_or_else(|| {
        let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        t.as_nanos() as u64 ^ u64::from(std::process::id()) << 32
    });
    let bound = MemoryBound::of_server(args.max_conns, args.buffer)?;
    let scratch = std::env::temp_dir().join(format!("flood-bench-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).with_context(|| format!("creating {}", scratch.display()))?;
    println!(
        "flood-bench: {} idle connections{}, {:.0} s per case, flood {} SYN/s ({}% off-link), seed {seed}",
        args.idle_conns,
        if args.idle_ping.is_zero() { String::new() } else { format!(" (one request each every {:?})", args.idle_ping) },
        args.duration.as_secs_f64(),
        if args.flood_pps == 0 { "max".to_string() } else { args.flood_pps.to_string() },
        args.offlink_percent
    );
    println!("{}", bound.describe());
    let mut results = Vec::new();
    let mut failed = false;
    for (i, &case) in args.cases.iter().enumerate() {
        if lab::interrupted() {
            bail!("interrupted");
        }
        let dir = scratch.join(case.name());
        std::fs::create_dir_all(&dir)?;
        let r = run_case(&args, case, &server, &dir, seed.wrapping_add(i as u64));
        match r {
            Ok(r) => {
                println!("{}", r.line());
                results.push(r);
            }
            Err(e) => {
                if lab::interrupted() {
                    if !args.keep {
                        let _ = std::fs::remove_dir_all(&scratch);
                    }
                    return Err(e); // the labs are gone already (dropped in run_case)
                }
                eprintln!("flood-bench: case {} failed: {e:#}", case.name());
                failed = true;
            }
        }
    }
    println!();
    print!("{}", table(&results, &bound));
    let verdicts = verdicts(&results, &bound);
    for v in &verdicts {
        println!("{v}");
    }
    failed |= verdicts.iter().any(|v| v.starts_with("FAIL"));
    if let Some(p) = &args.json {
        let doc = serde_json::json!({
            "tool": "flood-bench",
            "duration_s": args.duration.as_secs_f64(),
            "idle_conns": args.idle_conns,
            "flood_pps": args.flood_pps,
            "offlink_percent": args.offlink_percent,
            "peer_xdp": args.peer_xdp,
            "idle_ping_s": args.idle_ping.as_secs_f64(),
            "max_conns": args.max_conns,
            "buffer": args.buffer,
            "req_size": args.req_size,
            "seed": seed,
            "memory_bound": bound,
            "cases": results,
            "verdicts": verdicts,
        });
        apps::write_atomically(p, &serde_json::to_vec_pretty(&doc)?)?;
    }
    if !args.keep {
        let _ = std::fs::remove_dir_all(&scratch);
    } else {
        println!("server output kept in {}", scratch.display());
    }
    Ok(if failed { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

/// The stack's resident memory cannot exceed what its configuration lets it allocate: socket
/// buffers of every socket it may hold at once, the UMEM, and a fixed allowance.
#[derive(Clone, Debug, Serialize)]
struct MemoryBound {
    per_socket_bytes: u64,
    max_conns: u64,
    buckets: u64,
    listeners: u64,
    half_open_limit: u64,
    pool_max: u64,
    umem_bytes: u64,
    fixed_bytes: u64,
    /// All sockets at once, UMEM and the allowance.
    total_bytes: u64,
    /// What a flood may add on top of the established connections: half-open sockets and
    /// the spare pool they are recycled into.
    flood_growth_bytes: u64,
    /// Half-open sockets the stack can hold: its limit, which it never passes.
    half_open_max: u64,
    /// Buffers of a socket that carried nothing much (both ways).
    #[serde(skip)]
    initial_bytes: u64,
}

/// rr-server's AF_XDP options as a command line of their own, to build the configuration an
/// xsk rr-server runs with the way rr-server does.
#[derive(Parser)]
struct ServerXskOpts {
    #[command(flatten)]
    xsk: apps::XskOpts,
}

impl MemoryBound {
    /// The bound of an xsk rr-server started with `--max-conns max_conns --buffer buffer`
    /// (its defaults otherwise): its engine's own sizing and its UMEM.
    fn of_server(max_conns: usize, buffer: usize) -> Result<MemoryBound> {
        // Any interface name: building the configuration does not open the device.
        let argv = ["rr-server", "--iface", "flood-bench", "--buffer", &buffer.to_string()];
        let cfg = ServerXskOpts::try_parse_from(argv)?.xsk.config(max_conns, None)?;
        let umem = &cfg.port.umem;
        Ok(MemoryBound::new(&cfg.engine, u64::from(umem.frame_count) * u64::from(umem.frame_size)))
    }

    fn new(engine: &EngineConfig, umem_bytes: u64) -> MemoryBound {
        // Listeners, half-open and pooled sockets hold their initial buffers, established ones
        // grow up to the maximum each way only when they carry more.
        let per_socket = (engine.rx_buffer + engine.tx_buffer) as u64;
        let (rx, tx) = engine.initial_buffers();
        let initial = (rx + tx) as u64;
        let max_conns = engine.max_conns as u64;
        let buckets = engine.bucket_count() as u64;
        let listeners = (engine.listeners_per_bucket() * engine.bucket_count()) as u64;
        let half_open_limit = engine.half_open_limit() as u64;
        let half_open_max = half_open_limit;
        let pool_max = engine.pool_max() as u64;
        let small = listeners + half_open_max + pool_max;
        MemoryBound {
            per_socket_bytes: per_socket,
            max_conns,
            buckets,
            listeners,
            half_open_limit,
            pool_max,
            umem_bytes,
            fixed_bytes: FIXED_ALLOWANCE,
            total_bytes: max_conns * per_socket + small * initial + umem_bytes + FIXED_ALLOWANCE,
            flood_growth_bytes: (half_open_max + pool_max) * initial,
            half_open_max,
            initial_bytes: initial,
        }
    }

    fn describe(&self) -> String {
        format!(
            "memory bound (xsk): ({} connections + {} listeners + {} half-open (the limit; {} buckets) + {} pooled) \
             sockets, established ones up to {} KiB of buffers, the others at {} KiB + UMEM {} MiB + {} MiB fixed = {} MiB; \
             a flood may add at most {} MiB (half-open + pool)",
            self.max_conns,
            self.listeners,
            self.half_open_max,
            self.buckets,
            self.pool_max,
            self.per_socket_bytes >> 10,
            self.initial_bytes >> 10,
            self.umem_bytes >> 20,
            self.fixed_bytes >> 20,
            self.total_bytes >> 20,
            self.flood_growth_bytes >> 20,
        )
    }
}

#[derive(Clone, Debug, Default, Serialize)]
struct RssSample {
    t_s: f64,
    rss_kib: u64,
    hwm_kib: u64,
}

#[derive(Debug, Serialize)]
struct CaseResult {
    case: Case,
    backend: &'static str,
    flood: bool,
    idle_requested: usize,
    idle_opened: usize,
    idle_open_s: f64,
    /// Idle connections that answered an echo request after the measurement.
    idle_held: usize,
    syns_sent: u64,
    syn_send_errors: u64,
    syn_pps: f64,
    measured_s: f64,
    requests: u64,
    request_errors: u64,
    p50_us: f64,
    p99_us: f64,
    p999_us: f64,
    max_us: f64,
    rss_before_kib: u64,
    rss_max_kib: u64,
    rss_end_kib: u64,
    hwm_kib: u64,
    /// RSS growth from the middle to the end of the measurement.
    rss_growth_second_half_kib: i64,
    /// xsk: StackStats.drops; kernel: TcpExt counter deltas of ns_a over the measurement.
    drops: Value,
    /// Fresh connections opened during the measurement (`--fresh-every`).
    fresh: Fresh,
    /// Server summary excerpts: CPU seconds, accepted; xsk also half-open sockets at exit.
    server_stack: Value,
    server_exit: String,
    /// /proc/loadavg at the end of the measurement: the machine is shared, a busy one starves
    /// the server of CPU.
    loadavg: String,
    samples: Vec<RssSample>,
}

impl CaseResult {
    fn line(&self) -> String {
        format!(
            "{}: held {}/{} idle, {} SYNs ({:.0}/s), RSS {} -> max {} MiB, p50/p99/p99.9 {:.0}/{:.0}/{:.0} us over {} requests",
            self.case.name(),
            self.idle_held,
            self.idle_requested,
            apps::group_digits(self.syns_sent),
            self.syn_pps,
            self.rss_before_kib >> 10,
            self.rss_max_kib >> 10,
            self.p50_us,
            self.p99_us,
            self.p999_us,
            apps::group_digits(self.requests)
        )
    }
}

fn start_server(args: &Args, case: Case, exe: &Path, lab: &Lab, dir: &Path, target: Ipv4Addr) -> Result<ServerProcess> {
    let ready = dir.join("ready");
    let json = dir.join("server.json");
    // A bound on the server's life whatever happens to this process.
    let life = format!("{}s", args.duration.as_secs() + 600);
    let max_conns = args.max_conns.to_string();
    let port = PORT.to_string();
    let mut a: Vec<String> = ["--service", "echo", "--port", &port, "--max-conns", &max_conns, "--duration", &life]
        .iter()
        .map(|s| s.to_string())
        .collect();
    a.extend(["--ready-file".into(), ready.display().to_string(), "--json".into(), json.display().to_string()]);
    if case.xsk() {
        let cidr = format!("{target}/{}", lab.prefix_len);
        let buffer = args.buffer.to_string();
        a.extend(
            ["--backend", "xsk", "--iface", &lab.if_a, "--addr", &cidr, "--attach", "auto", "--buffer", &buffer]
                .iter()
                .map(|s| s.to_string()),
        );
        a.extend(args.xsk_args.iter().cloned());
    } else {
        a.extend(["--backend", "kernel", "--bind", &target.to_string()].iter().map(|s| s.to_string()));
    }
    let mut cmd = ServerProcess::command(&lab.ns_a, exe);
    cmd.args(&a);
    let mut s = ServerProcess::spawn("rr-server", cmd, &dir.join("server.out"), Some(&dir.join("server.err")))?;
    s.wait_ready_file(&ready, Duration::from_secs(30))?;
    Ok(s)
}

/// VmRSS and VmHWM of `pid` in KiB.
fn read_rss(pid: u32) -> Option<(u64, u64)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| -> Option<u64> {
        let l = s.lines().find(|l| l.starts_with(name))?;
        l[name.len()..].trim().trim_end_matches("kB").trim().parse().ok()
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

/// TcpExt counters of the namespace `pid` lives in.
fn tcp_ext(pid: u32) -> Vec<(String, u64)> {
    let Ok(s) = std::fs::read_to_string(format!("/proc/{pid}/net/netstat")) else { return Vec::new() };
    let lines: Vec<&str> = s.lines().filter(|l| l.starts_with("TcpExt:")).collect();
    if lines.len() < 2 {
        return Vec::new();
    }
    lines[0].split_whitespace().skip(1).zip(lines[1].split_whitespace().skip(1))
        .filter_map(|(k, v)| Some((k.to_string(), v.parse().ok()?)))
        .collect()
}

/// Kernel counters that say what happened to the flood's SYNs.
const KERNEL_KEYS: &[&str] = &[
    "SyncookiesSent",
    "SyncookiesRecv",
    "SyncookiesFailed",
    "ListenOverflows",
    "ListenDrops",
    "TCPReqQFullDoCookies",
    "TCPReqQFullDrop",
    "TCPTimeouts",
];

fn kernel_drops(before: &[(String, u64)], after: &[(String, u64)]) -> Value {
    let mut m = serde_json::Map::new();
    for k in KERNEL_KEYS {
        let get = |v: &[(String, u64)]| v.iter().find(|(n, _)| n == k).map(|(_, x)| *x);
        if let (Some(a), Some(b)) = (get(before), get(after)) {
            m.insert(k.to_string(), Value::from(b.saturating_sub(a)));
        }
    }
    Value::Object(m)
}

/// Runs `f` on a new thread inside `ns` (sockets it creates stay in that namespace).
fn spawn_in<T: Send + 'static>(
    ns: &Netns,
    name: &str,
    f: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<std::thread::JoinHandle<Result<T>>> {
    let ns = ns.clone();
    Ok(std::thread::Builder::new().name(name.into()).spawn(move || {
        let _guard = ns.enter().with_context(|| format!("entering {}", ns.name))?;
        f()
    })?)
}

fn join<T>(h: std::thread::JoinHandle<Result<T>>) -> Result<T> {
    match h.join() {
        Ok(r) => r,
        Err(p) => std::panic::resume_unwind(p),
    }
}

/// Opens `n` connections to `to` with `threads` threads, within `limit`.
fn connect_many(to: SocketAddrV4, n: usize, threads: usize, limit: Duration) -> Result<Vec<TcpStream>> {
    let deadline = Instant::now() + limit;
    let mut hs = Vec::new();
    for t in 0..threads {
        let share = n / threads + usize::from(t < n % threads);
        hs.push(std::thread::Builder::new().name("idle-open".into()).spawn(move || -> Result<Vec<TcpStream>> {
            let mut v = Vec::with_capacity(share);
            let mut failures = 0;
            while v.len() < share && Instant::now() < deadline {
                match TcpStream::connect_timeout(&SocketAddr::V4(to), Duration::from_secs(3)) {
                    Ok(s) => {
                        s.set_nodelay(true)?;
                        v.push(s);
                    }
                    Err(e) => {
                        failures += 1;
                        if failures > 20 {
                            eprintln!("holder: giving up after 20 failed connects, last: {e}");
                            break;
                        }
                    }
                }
            }
            Ok(v)
        })?);
    }
    let mut all = Vec::with_capacity(n);
    for h in hs {
        all.extend(join(h)?);
    }
    Ok(all)
}

/// Holder mode: opens `n` connections, says `opened K`; on `check` sends an echo request on
/// each and says `held H`; exits at end of input. One process holds at most what its open-file
/// limit allows, so flood-bench starts several.
fn hold(to: SocketAddrV4, n: usize, ping: Duration) -> Result<()> {
    use std::io::BufRead;
    let want = n as u64 + 64;
    let got = apps::raise_nofile_limit(want).context("raising the open-file limit")?;
    ensure!(got >= want, "open-file limit {got} is below the {want} a holder of {n} needs");
    let conns = Arc::new(Mutex::new(connect_many(to, n, 4, Duration::from_secs(120))?));
    let mut out = std::io::stdout().lock();
    writeln!(out, "opened {}", conns.lock().expect("conns").len())?;
    out.flush()?;
    if !ping.is_zero() {
        let conns = conns.clone();
        std::thread::Builder::new().name("idle-ping".into()).spawn(move || loop {
            std::thread::sleep(ping);
            let _ = check_held(&mut conns.lock().expect("conns"), Duration::from_secs(10));
        })?;
    }
    for line in std::io::stdin().lock().lines() {
        if line?.trim() == "check" {
            let held = check_held(&mut conns.lock().expect("conns"), Duration::from_secs(30))?;
            writeln!(out, "held {held}")?;
            out.flush()?;
        }
    }
    Ok(())
}

/// Connections per holder process: below the hard open-file limit of unprivileged setups.
const PER_HOLDER: usize = 10_000;

/// Holder processes in ns_b; killed on drop.
struct Holders(Vec<(Child, std::io::BufReader<std::process::ChildStdout>)>);

impl Holders {
    fn start(ns: &Netns, to: SocketAddrV4, n: usize, ping: Duration) -> Result<Holders> {
        let exe = std::env::current_exe()?;
        let mut hs = Holders(Vec::new());
        let mut left = n;
        while left > 0 {
            let k = left.min(PER_HOLDER);
            left -= k;
            let mut child = Command::new("ip")
                .args(["netns", "exec", &ns.name])
                .arg(&exe)
                .args(["--hold-connect", &to.to_string(), "--hold-count", &k.to_string()])
                .arg(format!("--idle-ping={}ms", ping.as_millis()))
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .context("starting a connection holder")?;
            let out = std::io::BufReader::new(child.stdout.take().expect("piped"));
            hs.0.push((child, out));
        }
        Ok(hs)
    }

    /// Sum of the numbers the holders answer with `word N`.
    fn collect(&mut self, word: &str) -> Result<usize> {
        use std::io::BufRead;
        let mut total = 0;
        for (_, out) in &mut self.0 {
            let mut line = String::new();
            out.read_line(&mut line)?;
            let n = line
                .trim()
                .strip_prefix(word)
                .and_then(|r| r.trim().parse::<usize>().ok())
                .with_context(|| format!("a connection holder answered {line:?}, expected `{word} N`"))?;
            total += n;
        }
        Ok(total)
    }

    fn check(&mut self) -> Result<usize> {
        for (c, _) in &mut self.0 {
            let stdin = c.stdin.as_mut().context("holder stdin")?;
            stdin.write_all(b"check\n")?;
            stdin.flush()?;
        }
        self.collect("held")
    }
}

impl Drop for Holders {
    fn drop(&mut self) {
        for (c, _) in &mut self.0 {
            drop(c.stdin.take()); // end of input: the holder closes its connections and exits
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        for (c, _) in &mut self.0 {
            while matches!(c.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            if matches!(c.try_wait(), Ok(None)) {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }
}

/// Soft open-file limit of `pid`.
fn nofile_limit(pid: u32) -> Option<usize> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/limits")).ok()?;
    let l = s.lines().find(|l| l.starts_with("Max open files"))?;
    l.split_whitespace().nth(3)?.parse().ok()
}

fn request(len: usize) -> Vec<u8> {
    let mut r = (len as u32).to_be_bytes().to_vec();
    r.extend((0..len).map(|i| i as u8));
    r
}

/// Sends one echo request on every connection, then reads the answers: how many answered
/// correctly within `limit`.
fn check_held(conns: &mut [TcpStream], limit: Duration) -> Result<usize> {
    let req = request(8);
    let deadline = Instant::now() + limit;
    let mut sent = vec![false; conns.len()];
    for (c, s) in conns.iter_mut().zip(&mut sent) {
        *s = c.write_all(&req).is_ok();
    }
    let mut held = 0;
    let mut buf = vec![0u8; req.len()];
    for (c, s) in conns.iter_mut().zip(&sent) {
        let left = deadline.saturating_duration_since(Instant::now());
        if !*s || left.is_zero() {
            continue;
        }
        c.set_read_timeout(Some(left.max(Duration::from_millis(1))))?;
        if c.read_exact(&mut buf).is_ok() && buf == req {
            held += 1;
        }
    }
    Ok(held)
}

struct Latency {
    hist: Histogram<u64>,
    requests: u64,
    errors: u64,
    measured: Duration,
}

/// Closed-loop echo requests on `conn` from `start` until `stop` is set. A request that is
/// slow to come back is waited for (its latency is what a flood does to this connection); one
/// outstanding when `stop` comes gets `GRACE` more, and one with no answer after `GIVE_UP` ends
/// the measurement as an error.
fn measure(mut conn: TcpStream, req_size: usize, start: Arc<Barrier>, stop: Arc<AtomicBool>, done: Arc<AtomicU64>) -> Result<Latency> {
    const GRACE: Duration = Duration::from_secs(10);
    const GIVE_UP: Duration = Duration::from_secs(30);
    let mut hist = Histogram::<u64>::new_with_bounds(1, 120_000_000, 3)?;
    let req = request(req_size);
    let mut resp = vec![0u8; req.len()];
    conn.set_read_timeout(Some(Duration::from_millis(200)))?;
    conn.set_write_timeout(Some(GIVE_UP))?;
    let (mut requests, mut errors) = (0u64, 0u64);
    start.wait();
    let t0 = Instant::now();
    let mut stopped_at: Option<Instant> = None;
    'outer: while !stop.load(Ordering::Relaxed) {
        let t = Instant::now();
        if conn.write_all(&req).is_err() {
            errors += 1;
            break;
        }
        let mut got = 0;
        while got < resp.len() {
            match conn.read(&mut resp[got..]) {
                Ok(0) => {
                    errors += 1;
                    break 'outer;
                }
                Ok(n) => got += n,
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted) => {
                    if stop.load(Ordering::Relaxed) {
                        let at = *stopped_at.get_or_insert_with(Instant::now);
                        if at.elapsed() > GRACE {
                            errors += 1;
                            break 'outer;
                        }
                    }
                    if t.elapsed() > GIVE_UP {
                        errors += 1;
                        break 'outer;
                    }
                }
                Err(_) => {
                    errors += 1;
                    break 'outer;
                }
            }
        }
        if resp != req {
            errors += 1;
            break;
        }
        hist.saturating_record(t.elapsed().as_micros().max(1) as u64);
        requests += 1;
        done.store(requests, Ordering::Relaxed);
    }
    Ok(Latency { hist, requests, errors, measured: t0.elapsed() })
}

/// Fresh connections opened during the measurement: how long each took to establish.
#[derive(Debug, Default, Serialize)]
struct Fresh {
    /// Attempts started.
    tried: u64,
    /// Established, and the echo request answered.
    ok: u64,
    /// Established within 100 ms.
    within_100ms: u64,
    /// Milliseconds to establish (connect returned), of those established.
    p50_ms: f64,
    p99_ms: f64,
    max_ms: f64,
    /// Connect times, in milliseconds, of those established (in the order they finished).
    connect_ms: Vec<f64>,
}

/// Every `every` from `start` until `stop`: a fresh kernel TCP connection to `to`, each on its
/// own thread so that a slow one does not delay the next (connect with the kernel's SYN retries,
/// up to 15 s; then one 32-byte echo request; close). Waits for the attempts still running.
fn fresh_connections(to: SocketAddrV4, every: Duration, start: Arc<Barrier>, stop: Arc<AtomicBool>) -> Result<Fresh> {
    let results = Arc::new(Mutex::new(Vec::<(f64, bool)>::new()));
    let mut threads = Vec::new();
    start.wait();
    let mut next = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        if now < next {
            std::thread::sleep((next - now).min(Duration::from_millis(20)));
            continue;
        }
        next += every;
        let results = results.clone();
        // A new thread inherits this thread's network namespace.
        threads.push(std::thread::spawn(move || {
            let t = Instant::now();
            let Ok(mut c) = TcpStream::connect_timeout(&SocketAddr::V4(to), Duration::from_secs(15)) else { return };
            let ms = t.elapsed().as_secs_f64() * 1e3;
            let req = request(32);
            let mut resp = vec![0u8; req.len()];
            let _ = c.set_nodelay(true);
            let _ = c.set_read_timeout(Some(Duration::from_secs(5)));
            let ok = c.write_all(&req).is_ok() && c.read_exact(&mut resp).is_ok() && resp == req;
            results.lock().expect("fresh results").push((ms, ok));
        }));
    }
    let mut f = Fresh { tried: threads.len() as u64, ..Fresh::default() };
    for t in threads {
        let _ = t.join();
    }
    let r = std::mem::take(&mut *results.lock().expect("fresh results"));
    f.connect_ms = r.iter().map(|&(ms, _)| ms).collect();
    f.ok = r.iter().filter(|&&(_, ok)| ok).count() as u64;
    f.within_100ms = f.connect_ms.iter().filter(|&&ms| ms <= 100.0).count() as u64;
    let mut v = f.connect_ms.clone();
    v.sort_by(f64::total_cmp);
    let q = |p: f64| if v.is_empty() { 0.0 } else { v[((v.len() - 1) as f64 * p).round() as usize] };
    f.p50_ms = q(0.5);
    f.p99_ms = q(0.99);
    f.max_ms = v.last().copied().unwrap_or(0.0);
    Ok(f)
}

/// xorshift64*: enough randomness for source addresses and ports.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

const SYN_LEN: usize = 60; // 14 + 20 + 24 (MSS option), plus 2 bytes Ethernet padding

/// A SYN with an MSS option; checksums complete (no offload).
fn build_syn(buf: &mut [u8; SYN_LEN], macs: ([u8; 6], [u8; 6]), src: Ipv4Addr, dst: Ipv4Addr, sport: u16, dport: u16, seq: u32) {
    let (src_mac, dst_mac) = macs;
    buf.fill(0);
    buf[0..6].copy_from_slice(&dst_mac);
    buf[6..12].copy_from_slice(&src_mac);
    buf[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    let ip = &mut buf[14..];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&44u16.to_be_bytes());
    ip[4..6].copy_from_slice(&(seq as u16).to_be_bytes());
    ip[6..8].copy_from_slice(&0x4000u16.to_be_bytes());
    ip[8] = 64;
    ip[9] = 6;
    ip[12..16].copy_from_slice(&src.octets());
    ip[16..20].copy_from_slice(&dst.octets());
    let c = checksum(&ip[..20], 0);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    let tcp = &mut ip[20..44];
    tcp[0..2].copy_from_slice(&sport.to_be_bytes());
    tcp[2..4].copy_from_slice(&dport.to_be_bytes());
    tcp[4..8].copy_from_slice(&seq.to_be_bytes());
    tcp[12] = 6 << 4;
    tcp[13] = 0x02;
    tcp[14..16].copy_from_slice(&64240u16.to_be_bytes());
    tcp[20..24].copy_from_slice(&[2, 4, 0x05, 0xb4]);
    let mut pseudo = 6u32 + 24;
    for w in src.octets().chunks(2).chain(dst.octets().chunks(2)) {
        pseudo += u32::from(u16::from_be_bytes([w[0], w[1]]));
    }
    let c = checksum(tcp, pseudo);
    tcp[16..18].copy_from_slice(&c.to_be_bytes());
}

struct FloodPlan {
    ifname: String,
    macs: ([u8; 6], [u8; 6]),
    subnet: [u8; 3],
    /// Host parts of the lab /24 the SYNs must not come from (real hosts of the lab).
    exclude: Vec<u8>,
    dst: Ipv4Addr,
    pps: u64,
    offlink_percent: u8,
    seed: u64,
}

impl FloodPlan {
    fn source(&self, rng: &mut Rng) -> Ipv4Addr {
        if self.offlink_percent > 0 && rng.next() % 100 < u64::from(self.offlink_percent) {
            loop {
                let r = rng.next();
                let (b, c, d) = (18 + (r & 1) as u8, (r >> 8) as u8, (r >> 16) as u8);
                if [198, b, c] != self.subnet && (1..=254).contains(&d) {
                    return Ipv4Addr::new(198, b, c, d);
                }
            }
        }
        loop {
            let h = (rng.next() % 252) as u8 + 3; // 3..=254
            if !self.exclude.contains(&h) {
                return Ipv4Addr::new(self.subnet[0], self.subnet[1], self.subnet[2], h);
            }
        }
    }
}

/// Sends SYNs until `stop`; returns (sent, send errors).
fn flood(plan: FloodPlan, start: Arc<Barrier>, stop: Arc<AtomicBool>, sent: Arc<AtomicU64>) -> Result<(u64, u64)> {
    let sock = RawSocket::open(&plan.ifname).with_context(|| format!("raw socket on {}", plan.ifname))?;
    let mut rng = Rng(plan.seed | 1);
    let mut frame = [0u8; SYN_LEN];
    let (mut n, mut errors) = (0u64, 0u64);
    start.wait();
    let t0 = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        if plan.pps > 0 {
            // Paced in bursts of 64: never ahead of the schedule.
            let due = (t0.elapsed().as_secs_f64() * plan.pps as f64) as u64;
            if n >= due {
                std::thread::sleep(Duration::from_micros(200));
                continue;
            }
        }
        for _ in 0..64 {
            let r = rng.next();
            let src = plan.source(&mut rng);
            build_syn(&mut frame, plan.macs, src, plan.dst, (r as u16).max(1024), PORT, (r >> 16) as u32);
            match sock.send(&frame) {
                Ok(()) => n += 1,
                Err(e) if e.kind() == ErrorKind::WouldBlock || e.raw_os_error() == Some(libc::ENOBUFS) => errors += 1,
                Err(e) => return Err(e).context("sending a SYN"),
            }
        }
        sent.store(n, Ordering::Relaxed);
    }
    Ok((n, errors))
}

fn run_case(args: &Args, case: Case, exe: &Path, dir: &Path, seed: u64) -> Result<CaseResult> {
    let progress = !args.quiet;
    if progress {
        eprintln!("== {}: building the lab", case.name());
    }
    let lab = Lab::new(&LabConfig::new(LAB_TAG)).context("building the veth lab")?;
    let _peer_xdp = if args.peer_xdp {
        Some(lab.peer_xdp_pass().context("an XDP program on ns_b's veth")?)
    } else {
        None
    };
    let o = lab.addr_a.octets();
    let target = if case.xsk() { Ipv4Addr::new(o[0], o[1], o[2], XSK_HOST) } else { lab.addr_a };
    // One client address has ~64k ports towards one server port: enough for 60k connections.
    lab.ns_b
        .run(&["sysctl", "-q", "-w", "net.ipv4.ip_local_port_range=1024 65535"])
        .context("widening ip_local_port_range in ns_b")?;
    let mut server = start_server(args, case, exe, &lab, dir, target)?;
    let pid = server.pid();
    let to = SocketAddrV4::new(target, PORT);

    // The kernel backend holds a descriptor per connection: past rr-server's open-file limit
    // (the hard limit, without CAP_SYS_RESOURCE) connections stay in the accept queue.
    let mut idle_requested = args.idle_conns;
    if !case.xsk() {
        if let Some(lim) = nofile_limit(pid) {
            let fit = lim.saturating_sub(64);
            if fit < idle_requested {
                println!(
                    "{}: rr-server's open-file limit is {lim}: {fit} idle connections instead of {idle_requested}",
                    case.name()
                );
                idle_requested = fit;
            }
        }
    }
    if progress {
        eprintln!("== {}: opening {idle_requested} idle connections to {to}", case.name());
    }
    let t_open = Instant::now();
    let mut idle = Holders::start(&lab.ns_b, to, idle_requested, args.idle_ping)?;
    let idle_opened = idle.collect("opened")?;
    let idle_open_s = t_open.elapsed().as_secs_f64();
    if progress {
        eprintln!("   {idle_opened} open after {idle_open_s:.1} s");
    }
    ensure!(!lab::interrupted(), "interrupted");
    let est = join(spawn_in(&lab.ns_b, "est-open", move || {
        let s = TcpStream::connect_timeout(&SocketAddr::V4(to), Duration::from_secs(5))?;
        s.set_nodelay(true)?;
        Ok(s)
    })?)
    .context("opening the established connection")?;
    // Let the accepts and the stack's state settle before the reference sample.
    std::thread::sleep(Duration::from_millis(500));

    let samples = Arc::new(Mutex::new(Vec::<RssSample>::new()));
    let netstat_before = tcp_ext(pid);
    let (rss_before, _) = read_rss(pid).context("reading the server's /proc/PID/status")?;
    let start = Arc::new(Barrier::new(2 + usize::from(case.flood()) + usize::from(!args.fresh_every.is_zero())));
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let sent = Arc::new(AtomicU64::new(0));
    let lat = {
        let (start, stop, done) = (start.clone(), stop.clone(), done.clone());
        let req_size = args.req_size;
        std::thread::Builder::new().name("latency".into()).spawn(move || measure(est, req_size, start, stop, done))?
    };
    let fresh = if args.fresh_every.is_zero() {
        None
    } else {
        let (start, stop, every) = (start.clone(), stop.clone(), args.fresh_every);
        Some(spawn_in(&lab.ns_b, "fresh", move || fresh_connections(to, every, start, stop))?)
    };
    let flooder = if case.flood() {
        let plan = FloodPlan {
            ifname: lab.if_b.clone(),
            macs: (lab.mac_b, lab.mac_a),
            subnet: [o[0], o[1], o[2]],
            exclude: vec![1, 2, XSK_HOST],
            dst: target,
            pps: args.flood_pps,
            offlink_percent: args.offlink_percent,
            seed,
        };
        let (start, stop, sent) = (start.clone(), stop.clone(), sent.clone());
        Some(spawn_in(&lab.ns_b, "flood", move || flood(plan, start, stop, sent))?)
    } else {
        None
    };
    start.wait();
    let t0 = Instant::now();
    let mut next = t0;
    let mut aborted = None;
    while t0.elapsed() < args.duration {
        if lab::interrupted() {
            aborted = Some("interrupted");
            break;
        }
        if Instant::now() >= next {
            next += Duration::from_secs(1);
            match read_rss(pid) {
                Some((rss, hwm)) => {
                    let s = RssSample { t_s: t0.elapsed().as_secs_f64(), rss_kib: rss, hwm_kib: hwm };
                    if progress {
                        eprintln!(
                            "   {:>4.0} s  RSS {:>6} MiB  HWM {:>6} MiB  SYNs {:>11}  requests {:>9}",
                            s.t_s,
                            rss >> 10,
                            hwm >> 10,
                            apps::group_digits(sent.load(Ordering::Relaxed)),
                            apps::group_digits(done.load(Ordering::Relaxed))
                        );
                    }
                    samples.lock().expect("samples").push(s);
                }
                None => {
                    aborted = Some("rr-server exited during the measurement");
                    break;
                }
            }
        }
        std::thread::sleep(Duration::from_millis(20).min(next.saturating_duration_since(Instant::now())));
    }
    stop.store(true, Ordering::Relaxed);
    let measured = t0.elapsed();
    let lat = join(lat)?;
    let fresh = match fresh {
        Some(h) => join(h)?,
        None => Fresh::default(),
    };
    let (syns, syn_errors) = match flooder {
        Some(h) => join(h)?,
        None => (0, 0),
    };
    if let Some((rss, hwm)) = read_rss(pid) {
        samples.lock().expect("samples").push(RssSample { t_s: measured.as_secs_f64(), rss_kib: rss, hwm_kib: hwm });
    }
    match aborted {
        Some("interrupted") => bail!("interrupted"),
        Some(why) => bail!("{why}:\n{}", server.output()),
        None => {}
    }
    let netstat_after = tcp_ext(pid);
    let loadavg = std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim().to_string();
    if progress {
        eprintln!("== {}: checking that the idle connections still answer", case.name());
    }
    let idle_held = idle.check()?;
    let (rss_end, hwm) = read_rss(pid).unwrap_or_default();
    drop(idle);
    let exit = server.stop(Duration::from_secs(60))?.to_string();
    let summary: Value = std::fs::read(dir.join("server.json"))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or(Value::Null);
    let (drops, server_stack) = if case.xsk() {
        let st = &summary["xsk"]["stats"];
        let mut drops = st["drops"].clone();
        if let Value::Object(m) = &mut drops {
            // Frames the kernel dropped before the stack saw them (fill ring empty, RX ring full).
            for k in ["rx_dropped", "rx_fill_ring_empty_descs", "rx_ring_full"] {
                m.insert(format!("xdp_{k}"), st["port"]["xdp"][k].clone());
            }
            // SYNs answered with a cookie (kernel TCP's SyncookiesSent), not a drop but a trace of the flood.
            m.insert("syn_cookies_sent".into(), st["syn_cookies_sent"].clone());
            // The same, answered by the XDP program before the stack saw the SYN.
            m.insert("xdp_syn_cookies".into(), st["device"]["xdp_syn_cookies"].clone());
            // SYNs the XDP program shed (0 or absent with shedding off).
            if let Value::Object(shed) = &st["port"]["shed"] {
                for (k, v) in shed {
                    m.insert(format!("xdp_shed_{k}"), v.clone());
                }
            }
        }
        (
            drops,
            serde_json::json!({ "accepted": st["accepted"], "half_open": st["half_open"], "live_sockets": st["live_sockets"],
                                "pooled_sockets": st["pooled_sockets"], "rx_frames": st["rx_frames"], "audit": summary["xsk"]["audit"] }),
        )
    } else {
        (kernel_drops(&netstat_before, &netstat_after), serde_json::json!({ "accepted": summary["accepted"] }))
    };
    let mut server_stack = server_stack;
    if let Value::Object(m) = &mut server_stack {
        m.insert("cpu_s".into(), summary["cpu_s"].clone());
        m.insert("uptime_s".into(), summary["uptime_s"].clone());
    }
    let samples = std::mem::take(&mut *samples.lock().expect("samples"));
    let rss_max = samples.iter().map(|s| s.rss_kib).max().unwrap_or(0).max(rss_end);
    let half = measured.as_secs_f64() / 2.0;
    let mid = samples.iter().find(|s| s.t_s >= half).map_or(rss_before, |s| s.rss_kib);
    let last = samples.last().map_or(rss_before, |s| s.rss_kib);
    let h = &lat.hist;
    let q = |p: f64| if h.is_empty() { 0.0 } else { h.value_at_quantile(p) as f64 };
    Ok(CaseResult {
        case,
        backend: if case.xsk() { "xsk" } else { "kernel" },
        flood: case.flood(),
        idle_requested,
        idle_opened,
        idle_open_s,
        idle_held,
        syns_sent: syns,
        syn_send_errors: syn_errors,
        syn_pps: syns as f64 / measured.as_secs_f64(),
        measured_s: lat.measured.as_secs_f64(),
        requests: lat.requests,
        request_errors: lat.errors,
        p50_us: q(0.5),
        p99_us: q(0.99),
        p999_us: q(0.999),
        max_us: if h.is_empty() { 0.0 } else { h.max() as f64 },
        rss_before_kib: rss_before,
        rss_max_kib: rss_max,
        rss_end_kib: rss_end,
        hwm_kib: hwm,
        rss_growth_second_half_kib: last as i64 - mid as i64,
        drops,
        fresh,
        server_stack,
        server_exit: exit,
        loadavg,
        samples,
    })
}

fn nonzero(v: &Value) -> String {
    match v {
        Value::Object(m) => {
            let parts: Vec<String> = m
                .iter()
                .filter(|(_, x)| x.as_u64().is_some_and(|n| n > 0))
                .map(|(k, x)| format!("{k} {}", apps::group_digits(x.as_u64().unwrap_or(0))))
                .collect();
            if parts.is_empty() {
                "none".into()
            } else {
                parts.join(", ")
            }
        }
        Value::Null => "-".into(),
        other => other.to_string(),
    }
}

fn table(results: &[CaseResult], bound: &MemoryBound) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<16}{:>13}{:>14}{:>10}{:>10}{:>10}{:>9}{:>9}{:>10}{:>10}{:>11}{:>8}",
        "case", "idle held", "SYNs sent", "SYN/s", "RSS0 MiB", "RSSmax", "p50 us", "p99 us", "p99.9 us", "max us", "requests", "srv CPU"
    );
    for r in results {
        let _ = writeln!(
            s,
            "{:<16}{:>13}{:>14}{:>10}{:>10}{:>10}{:>9.0}{:>9.0}{:>10.0}{:>10.0}{:>11}{:>7.1}s",
            r.case.name(),
            format!("{}/{}", r.idle_held, r.idle_requested),
            apps::group_digits(r.syns_sent),
            apps::group_digits(r.syn_pps.round() as u64),
            r.rss_before_kib >> 10,
            r.rss_max_kib >> 10,
            r.p50_us,
            r.p99_us,
            r.p999_us,
            r.max_us,
            apps::group_digits(r.requests),
            r.server_stack["cpu_s"].as_f64().unwrap_or(f64::NAN)
        );
    }
    for r in results {
        let _ = writeln!(s, "  {} server drops: {}", r.case.name(), nonzero(&r.drops));
    }
    for r in results.iter().filter(|r| r.fresh.tried > 0) {
        let f = &r.fresh;
        let _ = writeln!(
            s,
            "  {} fresh connections: {}/{} established ({} within 100 ms), {} answered; connect p50/p99/max {:.1}/{:.1}/{:.1} ms",
            r.case.name(),
            f.connect_ms.len(),
            f.tried,
            f.within_100ms,
            f.ok,
            f.p50_ms,
            f.p99_ms,
            f.max_ms
        );
    }
    for r in results {
        let _ = writeln!(s, "  {} load average at the end: {}", r.case.name(), r.loadavg);
    }
    let _ = writeln!(
        s,
        "  xsk RSS bound {} MiB (flood growth bound {} MiB); kernel backend: socket memory is the kernel's, not in RSS",
        bound.total_bytes >> 20,
        bound.flood_growth_bytes >> 20
    );
    s
}

/// PASS/FAIL lines: the stack's RSS within the bound, its flood growth within the flood bound,
/// idle connections held, the established connection served throughout.
fn verdicts(results: &[CaseResult], bound: &MemoryBound) -> Vec<String> {
    let mut v = Vec::new();
    let check = |v: &mut Vec<String>, ok: bool, what: String| v.push(format!("{} {what}", if ok { "PASS" } else { "FAIL" }));
    for r in results {
        let n = r.case.name();
        if r.backend == "xsk" {
            let max = r.rss_max_kib.max(r.hwm_kib) * 1024;
            check(&mut v, max <= bound.total_bytes, format!("{n}: RSS peak {} MiB <= bound {} MiB", max >> 20, bound.total_bytes >> 20));
            let growth = r.rss_max_kib.saturating_sub(r.rss_before_kib) * 1024;
            check(
                &mut v,
                growth <= bound.flood_growth_bytes,
                format!("{n}: RSS growth during the measurement {} MiB <= {} MiB", growth >> 20, bound.flood_growth_bytes >> 20),
            );
            if let Some(h) = r.server_stack["half_open"].as_u64() {
                check(
                    &mut v,
                    h <= bound.half_open_max,
                    format!("{n}: half-open sockets at exit {h} <= the stack's limit {}", bound.half_open_max),
                );
                if h > bound.half_open_limit {
                    v.push(format!("INFO {n}: half-open sockets at exit {h} exceed the stack's limit {}", bound.half_open_limit));
                }
            }
            check(&mut v, r.idle_held == r.idle_requested, format!("{n}: idle connections held {}/{}", r.idle_held, r.idle_requested));
        } else if r.idle_held != r.idle_requested {
            v.push(format!("INFO {n}: idle connections held {}/{}", r.idle_held, r.idle_requested));
        }
        if r.request_errors > 0 || r.requests == 0 {
            v.push(format!(
                "INFO {n}: the established connection stopped after {} requests ({} errors: closed, or no answer within 30 s)",
                r.requests, r.request_errors
            ));
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_is_consistent() {
        Args::command().debug_assert();
    }

    #[test]
    fn syn_checksums_verify() {
        let mut f = [0u8; SYN_LEN];
        let (src, dst) = (Ipv4Addr::new(198, 18, 3, 7), Ipv4Addr::new(198, 18, 3, 100));
        build_syn(&mut f, ([2; 6], [4; 6]), src, dst, 4242, 7000, 0xdead_beef);
        assert_eq!(checksum(&f[14..34], 0), 0);
        let mut pseudo = 6u32 + 24;
        for w in f[26..34].chunks(2) {
            pseudo += u32::from(u16::from_be_bytes([w[0], w[1]]));
        }
        assert_eq!(checksum(&f[34..58], pseudo), 0);
        assert_eq!(f[47], 0x02, "SYN flag only");
    }

    #[test]
    fn sources_stay_in_the_test_range_and_avoid_lab_hosts() {
        let plan = FloodPlan {
            ifname: String::new(),
            macs: ([0; 6], [0; 6]),
            subnet: [198, 18, 9],
            exclude: vec![1, 2, 100],
            dst: Ipv4Addr::new(198, 18, 9, 100),
            pps: 0,
            offlink_percent: 30,
            seed: 1,
        };
        let mut rng = Rng(12345);
        let (mut on, mut off) = (0, 0);
        for _ in 0..100_000 {
            let a = plan.source(&mut rng).octets();
            assert_eq!(a[0], 198);
            assert!(a[1] == 18 || a[1] == 19, "{a:?}");
            assert!((1..=254).contains(&a[3]));
            if a[..3] == [198, 18, 9] {
                assert!(!plan.exclude.contains(&a[3]) && a[3] >= 3, "{a:?}");
                on += 1;
            } else {
                off += 1;
            }
        }
        assert!((25_000..35_000).contains(&off), "{on} {off}");
    }

    #[test]
    fn bound_follows_the_config() {
        let b = MemoryBound::of_server(30_000, 64 * 1024).unwrap();
        assert_eq!(b.buckets, 4096);
        assert_eq!(b.listeners, 4096);
        // 64 MiB / 8 KiB (their initial buffers) = 8,192 half-open sockets.
        assert_eq!(b.half_open_limit, 8192);
        assert_eq!(b.half_open_max, 8192);
        assert_eq!(b.umem_bytes, (4 * 16384 + 256) * 4096);
        let small = MemoryBound::of_server(1024, 64 * 1024).unwrap();
        // Half the connection limit: 512.
        assert_eq!(small.half_open_limit, 512);
        assert!(small.total_bytes < b.total_bytes);
    }
}
