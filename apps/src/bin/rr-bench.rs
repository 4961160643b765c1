//! rr-bench: load generator for rr-server, on the kernel's TCP or on smoltcp over AF_XDP.
//!
//! Closed loop (default: `--depth` requests in flight per connection) or open loop (`--rate`:
//! requests scheduled at a fixed total rate, latency measured from the scheduled time, so a
//! slow server cannot hide queueing). Every response is checked. The warm-up is a separate run
//! whose numbers are discarded. Reports throughput, latency percentiles, errors and CPU time
//! per request of this process, the whole machine and optionally the server.
//!
//! With `--lab SERVER_BACKEND` it builds its own veth lab (two network namespaces), starts
//! rr-server in one, runs the load from the other, and removes everything afterwards.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, ensure, Context, Result};
use clap::{ArgMatches, Parser};

use apps::cpu::{pid_cpu, CpuUsage};
use apps::netrx::{own_rx, NetRxTimes};
use apps::{
    parse_bytes, parse_connect, parse_duration, usage_bail, usage_ensure, warn_ignored, AddrArg, Backend,
    BenchResult, CpuSample, CpuWindow, KvWorkload, NetRxPerReq, Progress, Service, UsageError, XskOpts,
};
use stack::codec::{Codec, LengthPrefixed, Stream};
use stack::kernel::{KernelBusyPoll, KernelConfig, KernelTransport};
use apps::resp::RespWorkload;
use apps::server_process::{ServerError, ServerProcess};
use rr_load::{Churn, ChurnConfig, ChurnPattern, Client, ClientConfig, ClientReport, EchoWorkload, LoadMode, Workload};
use stack::transport::Transport;
use stack::uring::{UringBusyPoll, UringConfig, UringTransport};
use stack::xsk::XskTransport;
use xsk_lab::lab::{self, Lab, LabConfig, Netns};

/// Exit status when the run completed with errors (clap uses 2 for usage errors).
const EXIT_RUN_ERRORS: u8 = 3;
/// Lab namespace prefix of rr-bench.
const LAB_PREFIX: &str = "rrb";
/// KV key length + op byte + u16 key length: the size of a GET request payload.
const KV_GET_LEN: usize = 3 + 17;

#[derive(Parser, Debug, Clone)]
#[command(
    name = "rr-bench",
    version,
    about = "Load generator for rr-server: throughput, latency percentiles and CPU per request",
    after_help = format!("\
Sizes are payload bytes without the 4-byte length header of echo and kv. echo and tcp-echo
send the request back, so --resp-size must equal --req-size (or be left out). kv: the first
--kv-keys requests of every connection SET its keys with --resp-size-byte values (default
--req-size), all later ones GET them and check the value; the reported request size is then
the GET's 20 bytes and the response size 1 + value.

Output: progress lines on stderr once a second (unless --quiet), the result table on stdout,
--json FILE for scripts. Exit status: 0 ok, 1 setup or run failed, 2 bad command line, 3 the
run completed but had errors (failed checks, dead connections) or no responses at all.

CPU figures cover the measured window only: from the first request (after every connection
is established) to the end of --duration. Connection setup is timed separately.

SIGINT/SIGTERM: the current phase still ends at its --duration, later phases are skipped; a
second signal exits at once (and in --lab mode removes the lab).

Examples:
  rr-bench --connect 198.18.0.100:7000 --conns 16 --req-size 64 --duration 10s
  rr-bench --connect 198.18.0.100:7000 --rate 50000 --conns 32 --json out.json
  rr-bench --backend xsk --iface eth1 --addr 198.18.0.101/24 --connect 198.18.0.1:7000
  rr-bench --lab xsk --conns 16 --req-size 64 --duration 3s     # own veth lab, xsk server

{}",
        apps::LOG_HELP
    )
)]
struct Args {
    /// Client TCP/IP stack: kernel, or xsk (smoltcp over AF_XDP, needs --iface and root).
    #[arg(long, value_enum, default_value_t = Backend::Kernel)]
    backend: Backend,
    /// Server address: an IPv4 address, [an IPv6 one] (kernel backend) or a host name, and the port.
    #[arg(long, value_name = "HOST:PORT", value_parser = parse_connect, required_unless_present = "lab", conflicts_with = "lab")]
    connect: Option<SocketAddr>,
    /// Protocol of the server (see rr-server --help): echo, kv or tcp-echo.
    #[arg(long, value_enum, default_value_t = Service::Echo)]
    service: Service,
    /// Connections to open (churn: in progress at once; storm: per wave).
    #[arg(long, value_name = "N", default_value_t = 1)]
    conns: usize,
    /// rr: open --conns connections, then load them with requests. churn: every connection
    /// is opened, sends one request, checks the response and closes, --conns of them in
    /// progress at all times. storm: waves of --conns connections opened at once, one request
    /// each, closed; the next wave when the last is done. For churn and storm, requests/s are
    /// connections/s and latency runs from the connect call (setup_p50_us/setup_p99_us: until
    /// established).
    #[arg(long, value_enum, default_value_t = Pattern::Rr)]
    pattern: Pattern,
    /// Closed loop: requests kept in flight per connection (pipelining). Ignored with --rate.
    #[arg(long, value_name = "N", default_value_t = 1)]
    depth: usize,
    /// Request payload size, e.g. 64 or 4k.
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes, default_value = "64")]
    req_size: usize,
    /// Response payload size. echo/tcp-echo: equal to --req-size (the only allowed value).
    /// kv: the value size [default: --req-size].
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes)]
    resp_size: Option<usize>,
    /// Measured run length, e.g. 10s, 500ms, 1m (new requests stop then; outstanding ones
    /// get --drain-timeout to come back).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "10s")]
    duration: Duration,
    /// Warm-up before the measured run, on separate connections; its numbers are discarded.
    /// 0 disables it.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "1s")]
    warmup: Duration,
    /// Open loop: send R requests per second in total (round robin over the connections)
    /// whatever the responses do; latency counts from each request's scheduled time (no
    /// coordinated omission). Without it: closed loop.
    #[arg(long, value_name = "R", allow_negative_numbers = true)]
    rate: Option<f64>,
    /// Stop the measured run after this many requests (or at --duration, whichever is first).
    #[arg(long, value_name = "N")]
    max_requests: Option<u64>,
    /// All connections must be established within this time.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "5s")]
    connect_timeout: Duration,
    /// After --duration, wait at most this long for outstanding responses (the rest count as
    /// lost).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "2s")]
    drain_timeout: Duration,
    /// Kernel backend: local source address (0.0.0.0 = chosen by routing).
    #[arg(long, default_value_t = Ipv4Addr::UNSPECIFIED)]
    bind: Ipv4Addr,
    /// Kernel backend: spread the connections over this many consecutive source addresses
    /// starting at --bind, in turn, as if they came from that many clients (the addresses
    /// must be on the client's interface). Needs --bind.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    sources: u32,
    /// Busy polling, opt-in: SO_BUSY_POLL microseconds on the sockets (kernel) or the AF_XDP
    /// socket (xsk), and the client polls without sleeping. Burns a core. 0: the client spins
    /// but the kernel does not busy-poll.
    /// Given twice, the last one counts (so rr-demo's --xsk-args can override a case's).
    #[arg(long, value_name = "USECS", overrides_with = "busy_poll")]
    busy_poll: Option<u32>,
    /// Largest response frame accepted (echo, kv).
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes, default_value = "16M")]
    max_frame: usize,
    /// kv: keys per connection.
    #[arg(long, value_name = "N", default_value_t = 16)]
    kv_keys: u64,
    /// Also report the CPU time of this process (the server) per request, from its
    /// threads' schedstat run time. Set automatically in --lab mode.
    #[arg(long, value_name = "PID")]
    server_pid: Option<u32>,
    /// With --server-pid: do not time the kernel's NET_RX softirqs. By default a raw tracepoint
    /// program (needs root) sums them by the process they ran in, to report the server's CPU
    /// with each side charged its own receive path (`cpu_us_per_req_server_own_rx`): on a
    /// veth pair the sender's process runs the receiver's whole NET_RX work.
    #[arg(long)]
    no_netrx: bool,
    /// Write the results as JSON to this file.
    #[arg(long, value_name = "PATH")]
    json: Option<PathBuf>,
    /// No progress lines.
    #[arg(long)]
    quiet: bool,
    /// Client threads, each with its own kernel transport and an equal share of --conns (and
    /// of --rate / --max-requests), measured together and merged into one report, so the load
    /// generator is not the bound. --backend kernel only.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=256))]
    threads: u16,
    #[command(flatten)]
    xsk: XskOpts,
    /// Lab mode: build a veth lab (two fresh network namespaces, 198.18.0.0/15), run rr-server
    /// with this backend in one and the load from the other, then remove everything. The
    /// client's --iface/--addr/--bind are set by the lab (xsk ends use dedicated addresses
    /// .100 (server) and .101 (client) unless --lab-shared).
    #[arg(long, value_name = "SERVER_BACKEND", help_heading = "Lab mode")]
    lab: Option<Backend>,
    /// Lab mode: xsk ends share the kernel's addresses instead of dedicated ones.
    #[arg(long, help_heading = "Lab mode")]
    lab_shared: bool,
    /// Lab mode: the server's port.
    #[arg(long, value_name = "PORT", default_value_t = 7000, help_heading = "Lab mode")]
    port: u16,
    /// Lab mode: extra rr-server argument (repeatable), e.g. --server-arg=--busy-poll
    /// --server-arg=50.
    #[arg(long, value_name = "ARG", allow_hyphen_values = true, help_heading = "Lab mode")]
    server_arg: Vec<String>,
    /// Lab mode: rr-server binary [default: next to this binary].
    #[arg(long, value_name = "PATH", help_heading = "Lab mode")]
    server_exe: Option<PathBuf>,
}

/// `--pattern`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
enum Pattern {
    Rr,
    Churn,
    Storm,
}

/// The validated load description.
#[derive(Clone, Debug)]
struct Plan {
    mode: LoadMode,
    /// Echo payload size or KV value size.
    size: usize,
    req_size: usize,
    resp_size: usize,
}

impl Plan {
    fn new(a: &Args) -> Result<Plan> {
        usage_ensure!((1..=1_000_000).contains(&a.conns), "--conns must be between 1 and 1000000");
        usage_ensure!(!a.duration.is_zero(), "--duration must be positive");
        usage_ensure!(a.max_requests != Some(0), "--max-requests must be at least 1");
        usage_ensure!(!a.connect_timeout.is_zero(), "--connect-timeout must be positive");
        usage_ensure!(
            a.pattern == Pattern::Rr || (a.rate.is_none() && a.depth == 1 && a.threads == 1),
            "--pattern {:?} takes no --rate, --depth or --threads",
            a.pattern
        );
        let mode = match a.rate {
            Some(r) if !(r.is_finite() && r > 0.0) => usage_bail!("--rate must be a positive number, got {r}"),
            Some(rate) => LoadMode::OpenLoop { rate },
            None => {
                usage_ensure!((1..=65536).contains(&a.depth), "--depth must be between 1 and 65536");
                LoadMode::ClosedLoop { depth: a.depth }
            }
        };
        match a.service {
            Service::Echo | Service::TcpEcho => {
                if let Some(r) = a.resp_size.filter(|&r| r != a.req_size) {
                    usage_bail!(
                        "{}: the response is the request, so --resp-size ({r}) must equal --req-size ({})",
                        a.service,
                        a.req_size
                    );
                }
                if a.service == Service::TcpEcho {
                    usage_ensure!(
                        a.req_size >= 1,
                        "tcp-echo: --req-size must be at least 1 (a stream has no empty messages)"
                    );
                }
                usage_ensure!(a.req_size <= a.max_frame, "--req-size {} exceeds --max-frame {}", a.req_size, a.max_frame);
                Ok(Plan { mode, size: a.req_size, req_size: a.req_size, resp_size: a.req_size })
            }
            Service::Kv => {
                let value = a.resp_size.unwrap_or(a.req_size);
                usage_ensure!(a.kv_keys >= 1, "--kv-keys must be at least 1");
                usage_ensure!(
                    value < a.max_frame && KV_GET_LEN + value <= a.max_frame,
                    "kv value size {value} does not fit --max-frame {}",
                    a.max_frame
                );
                Ok(Plan { mode, size: value, req_size: KV_GET_LEN, resp_size: 1 + value })
            }
            Service::Resp => {
                // Alternating SET and GET of one value size: the sizes reported are the value's.
                let value = a.resp_size.unwrap_or(a.req_size);
                ensure!(a.kv_keys >= 1, "--kv-keys must be at least 1");
                ensure!(value <= a.max_frame, "resp value size {value} exceeds --max-frame {}", a.max_frame);
                Ok(Plan { mode, size: value, req_size: value, resp_size: value })
            }
        }
    }
}

fn main() -> ExitCode {
    apps::main_with::<Args>("rr-bench", run)
}

fn run(args: &Args, matches: &ArgMatches) -> Result<ExitCode> {
    lab::install_signal_handlers();
    let plan = Plan::new(args)?;
    if args.backend == Backend::Xsk {
        // Before a --lab is built: the client's stack is configured only inside it.
        args.xsk.loss_recovery.settings().map_err(UsageError)?;
    }
    if args.rate.is_some() {
        warn_ignored(matches, &["depth"], "with --rate (open loop has no fixed depth)");
    }
    if let Some(server_backend) = args.lab {
        warn_ignored(matches, &["iface", "addr", "bind", "sources", "server_pid"], "in --lab mode (the lab sets it)");
        return in_lab(args, server_backend);
    }
    warn_ignored(matches, &["lab_shared", "port", "server_arg", "server_exe"], "without --lab");
    if args.backend != Backend::Xsk && args.sources > 1 && args.bind.is_unspecified() {
        return Err(UsageError("--sources needs --bind (the first source address)".into()).into());
    }
    match args.backend {
        Backend::Kernel => warn_ignored(matches, XskOpts::IDS, "with --backend kernel"),
        Backend::Uring => warn_ignored(matches, XskOpts::IDS, "with --backend uring"),
        Backend::Xsk => warn_ignored(matches, &["bind", "sources"], "with --backend xsk (the stack's address is --addr)"),
    }
    let outcome = bench(args, &plan)?;
    finish(args, &outcome)
}

/// Result of one benchmark: the numbers, and for xsk a failed frame audit.
struct Outcome {
    result: BenchResult,
    audit_error: Option<String>,
}

/// Prints the table, writes the JSON and picks the exit status.
fn finish(args: &Args, o: &Outcome) -> Result<ExitCode> {
    print!("{}", o.result.table());
    if let Some(p) = &args.json {
        let text = serde_json::to_vec_pretty(&o.result).context("encoding the results")?;
        std::fs::write(p, text).with_context(|| format!("writing {}", p.display()))?;
        println!("wrote {}", p.display());
    }
    if let Some(e) = &o.audit_error {
        bail!("UMEM frame audit of the xsk client failed: {e}");
    }
    if o.result.errors > 0 || o.result.requests == 0 {
        eprintln!("rr-bench: the run had {} errors and {} responses", o.result.errors, o.result.requests);
        return Ok(ExitCode::from(EXIT_RUN_ERRORS));
    }
    Ok(ExitCode::SUCCESS)
}

fn bench(args: &Args, plan: &Plan) -> Result<Outcome> {
    let Some(addr) = args.connect else { bail!("--connect is required") };
    match args.backend {
        Backend::Kernel => {
            match apps::raise_nofile_limit(args.conns as u64 + 64) {
                Ok(n) if (n as usize) < args.conns + 16 => {
                    bail!("the open-file limit {n} is too low for --conns {} (raise ulimit -n)", args.conns)
                }
                Ok(_) => {}
                Err(e) => tracing::warn!("could not raise the open-file limit: {e}"),
            }
            // Busy polling as the kernel's authors tune it (prefer-busy-poll, a budget, the epoll
            // instance's parameters where the kernel has them), as rr-server's.
            let busy = args.busy_poll.map(|usecs| KernelBusyPoll::new(usecs).with_prefer(true));
            let kcfg = KernelConfig::default().with_bind(args.bind).with_busy(busy).with_sources(args.sources);
            if args.threads > 1 {
                let m = threads::drive_all(&kcfg, addr, args, plan)?;
                return Ok(Outcome { result: m.result(args, plan, addr), audit_error: None });
            }
            let t = KernelTransport::new(kcfg).context("creating the kernel transport")?;
            let (_t, m) = drive(t, addr, args, plan, None)?;
            Ok(Outcome { result: m.result(args, plan, addr), audit_error: None })
        }
        Backend::Uring => {
            ensure!(args.threads <= 1, "--threads {} with --backend uring: one client thread only", args.threads);
            let _ = apps::raise_nofile_limit(args.conns as u64 + 64);
            let ucfg = UringConfig::default()
                .with_bind(args.bind)
                .with_sources(args.sources)
                .with_busy_poll(args.busy_poll.map(|usecs| UringBusyPoll { usecs, prefer: true }));
            let t = UringTransport::new(ucfg).context("creating the io_uring transport")?;
            eprintln!("{}", t.features());
            let (_t, m) = drive(t, addr, args, plan, None)?;
            Ok(Outcome { result: m.result(args, plan, addr), audit_error: None })
        }
        Backend::Xsk => {
            let xcfg = args.xsk.config(args.conns.max(64), args.busy_poll)?;
            let iface = xcfg.port.ifname.clone();
            let recovery = apps::describe_recovery(&xcfg.engine.recovery);
            let t = XskTransport::new(xcfg)
                .with_context(|| format!("starting the AF_XDP stack on {iface} queue {}", args.xsk.queue))?;
            eprintln!("xsk port: {}", t.port().features());
            eprintln!("xsk stack: {} ({})", t.addr(), args.xsk.addr);
            eprintln!("xsk loss recovery: {recovery}");
            let (mut t, m) = drive(t, addr, args, plan, None)?;
            let mut result = m.result(args, plan, addr);
            let stats = t.stats();
            if let Some(st) = &stats.stages {
                eprintln!("xsk stages: {st}");
            }
            let audit = t.audit();
            // Dropping the transport detaches the XDP program.
            drop(t);
            match &audit {
                Ok(a) => eprintln!("xsk client frame audit: ok {a:?}"),
                Err(e) => eprintln!("xsk client frame audit: FAILED: {e}"),
            }
            result.xsk = Some(serde_json::json!({
                "stats": stats,
                "audit": match &audit { Ok(a) => serde_json::json!(a), Err(e) => serde_json::json!({ "error": e }) },
            }));
            result.recovery = Some(stats.recovery.into());
            Ok(Outcome { result, audit_error: audit.err() })
        }
    }
}

fn drive<T: Transport>(
    t: T,
    addr: SocketAddr,
    args: &Args,
    plan: &Plan,
    sync: Option<&threads::Rendezvous>,
) -> Result<(T, Measured)> {
    match args.service {
        Service::Echo => {
            drive_with(t, LengthPrefixed::new(args.max_frame), EchoWorkload::fixed(plan.size), addr, args, plan, sync)
        }
        Service::TcpEcho => drive_with(t, Stream, EchoWorkload::fixed(plan.size), addr, args, plan, sync),
        Service::Kv => drive_with(
            t,
            LengthPrefixed::new(args.max_frame),
            KvWorkload::new(plan.size, args.kv_keys),
            addr,
            args,
            plan,
            sync,
        ),
        Service::Resp => {
            drive_with(t, Stream, RespWorkload::new(plan.size, args.kv_keys), addr, args, plan, sync)
        }
    }
}

/// Warm-up (discarded), then the measured run with CPU counters read around it.
fn drive_with<T: Transport, C: Codec + Clone, W: Workload>(
    mut t: T,
    codec: C,
    workload: W,
    addr: SocketAddr,
    args: &Args,
    plan: &Plan,
    sync: Option<&threads::Rendezvous>,
) -> Result<(T, Measured)> {
    let mut progress = Progress::new(CpuWindow::new(workload, args.server_pid), !args.quiet);
    let base = ClientConfig::new(addr)
        .with_connections(args.conns)
        .with_mode(plan.mode)
        .with_connect_timeout(args.connect_timeout)
        .with_drain_timeout(args.drain_timeout)
        .with_busy_poll(args.busy_poll.is_some());
    let mut warmup_requests = 0;
    if !args.warmup.is_zero() {
        progress.begin("warm-up");
        progress.inner_mut().arm(None);
        let cfg = base.clone().with_duration(args.warmup).with_max_requests(None);
        let report;
        (t, progress, report) = phase(t, codec.clone(), progress, cfg, args.pattern);
        let report = report.with_context(|| format!("warm-up against {addr}"))?;
        if !args.quiet {
            eprintln!("warm-up: {report}");
        }
        if report.errors > 0 {
            tracing::warn!("the warm-up had {} errors", report.errors);
        }
        warmup_requests = report.requests;
        ensure!(!lab::interrupted(), "interrupted during the warm-up");
    }

    // Threads start measuring together, so the process-wide CPU counters cover every run.
    if let Some(r) = sync {
        r.wait()?;
    }
    if let Some(pid) = args.server_pid {
        pid_cpu(pid).with_context(|| format!("--server-pid {pid}: reading its CPU time from /proc/{pid}"))?;
        if !args.no_netrx {
            if let Err(e) = apps::netrx::install(pid) {
                static ONCE: std::sync::Once = std::sync::Once::new();
                ONCE.call_once(|| {
                    tracing::warn!("NET_RX accounting unavailable ({e}): no own-receive server CPU figure")
                });
            }
        }
    }
    let before = CpuSample::now(args.server_pid).context("reading CPU counters")?;
    progress.begin("run");
    progress.inner_mut().arm(Some(args.duration));
    let cfg = base.with_duration(args.duration).with_max_requests(args.max_requests);
    let (t, progress, report) = phase(t, codec, progress, cfg, args.pattern);
    if let Some(r) = sync {
        if report.is_err() {
            r.abort();
        }
        r.wait()?;
    }
    let after = CpuSample::now(args.server_pid).context("reading CPU counters")?;
    let report = report.with_context(|| format!("measured run against {addr}"))?;
    let window = progress.inner();
    // The window closes at the end of --duration; a run that stopped earlier (--max-requests)
    // or got no response after it ends at the run's end.
    let start = window.start.unwrap_or(before);
    let end = window.end.unwrap_or(after);
    let setup = start.snap.at.saturating_duration_since(before.snap.at);
    if args.server_pid.is_some() && end.server.is_none() {
        tracing::warn!("the server process is gone: no server CPU figures");
    }
    let usage = end.snap.since(&start.snap);
    let server_cpu = start.server.zip(end.server).map(|(a, b)| b.saturating_sub(a));
    let netrx = start.netrx.zip(end.netrx).map(|(a, b)| b - a);
    Ok((t, Measured { report, usage, server_cpu, netrx, warmup_requests, setup_s: setup.as_secs_f64() }))
}

/// One run of the load (warm-up or measured): requests over open connections, or
/// connections opened and closed (`--pattern`).
fn phase<T: Transport, C: Codec + Clone, W: Workload>(
    t: T,
    codec: C,
    workload: W,
    cfg: ClientConfig,
    pattern: Pattern,
) -> (T, W, Result<ClientReport, rr_load::ClientError>) {
    let churn = match pattern {
        Pattern::Rr => {
            let mut client = Client::new(t, codec, workload, cfg);
            let report = client.run();
            let (t, w) = client.into_parts();
            return (t, w, report);
        }
        Pattern::Churn => ChurnPattern::Churn,
        Pattern::Storm => ChurnPattern::Storm,
    };
    let ccfg = ChurnConfig::new(cfg.addr)
        .with_concurrency(cfg.connections)
        .with_pattern(churn)
        .with_duration(cfg.duration)
        .with_max_connections(cfg.max_requests)
        .with_connect_timeout(cfg.connect_timeout)
        .with_drain_timeout(cfg.drain_timeout);
    let mut c = Churn::new(t, codec, workload, ccfg);
    let report = c.run();
    let (t, w) = c.into_parts();
    (t, w, report)
}

/// One measured run: the client's report and the CPU counters read around it.
struct Measured {
    report: ClientReport,
    usage: apps::cpu::CpuUsage,
    server_cpu: Option<Duration>,
    /// NET_RX softirq time by context over the same window (see `apps::netrx`).
    netrx: Option<NetRxTimes>,
    warmup_requests: u64,
    setup_s: f64,
}

impl Measured {
    fn result(&self, args: &Args, plan: &Plan, addr: SocketAddr) -> BenchResult {
        let mut r = make_result(&self.report, args, plan, addr, &self.usage, self.server_cpu, self.netrx);
        r.warmup_requests = self.warmup_requests;
        r.setup_s = self.setup_s;
        r
    }
}

/// `--threads N`: N client threads on their own kernel transports, one merged report.
mod threads {
    use super::*;
    use std::sync::{Condvar, Mutex};

    /// A barrier that a failing thread can abort and that gives up after a timeout, so one
    /// thread's error cannot leave the others waiting for ever.
    pub(super) struct Rendezvous {
        n: usize,
        state: Mutex<(usize, u64, bool)>,
        cv: Condvar,
        timeout: Duration,
    }

    impl Rendezvous {
        fn new(n: usize, timeout: Duration) -> Self {
            Rendezvous { n, state: Mutex::new((0, 0, false)), cv: Condvar::new(), timeout }
        }

        pub(super) fn wait(&self) -> Result<()> {
            let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
            let generation = st.1;
            st.0 += 1;
            if st.0 == self.n {
                st.0 = 0;
                st.1 += 1;
                self.cv.notify_all();
                return Ok(());
            }
            let (st, to) = self
                .cv
                .wait_timeout_while(st, self.timeout, |s| s.1 == generation && !s.2)
                .unwrap_or_else(|e| e.into_inner());
            ensure!(!st.2, "another client thread failed");
            ensure!(!to.timed_out(), "client threads did not meet within {:?}", self.timeout);
            Ok(())
        }

        pub(super) fn abort(&self) {
            self.state.lock().unwrap_or_else(|e| e.into_inner()).2 = true;
            self.cv.notify_all();
        }
    }

    /// Share `i` of `total` split over `n`.
    fn share(total: usize, n: usize, i: usize) -> usize {
        total / n + usize::from(i < total % n)
    }

    pub(super) fn drive_all(kcfg: &KernelConfig, addr: SocketAddr, args: &Args, plan: &Plan) -> Result<Measured> {
        let n = args.threads as usize;
        ensure!(args.conns >= n, "--conns {} must be at least --threads {n}", args.conns);
        let timeout = args.warmup + args.duration + args.connect_timeout + args.drain_timeout + Duration::from_secs(30);
        let sync = Rendezvous::new(n, timeout);
        let runs: Vec<Result<Measured>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..n)
                .map(|i| {
                    let mut a = args.clone();
                    a.conns = share(args.conns, n, i);
                    a.max_requests = args.max_requests.map(|m| share(m as usize, n, i).max(1) as u64);
                    a.rate = args.rate.map(|r| r / n as f64);
                    let mut p = plan.clone();
                    if let LoadMode::OpenLoop { rate } = p.mode {
                        p.mode = LoadMode::OpenLoop { rate: rate / n as f64 };
                    }
                    if i > 0 {
                        // Thread 0 reports progress and reads the server's CPU for everyone.
                        a.quiet = true;
                        a.server_pid = None;
                    }
                    let (sync, mut kcfg) = (&sync, kcfg.clone());
                    if kcfg.sources as usize >= n {
                        // --sources: each thread its own share of the addresses.
                        let first: usize = (0..i).map(|j| share(kcfg.sources as usize, n, j)).sum();
                        kcfg.bind = Ipv4Addr::from(u32::from(kcfg.bind).wrapping_add(first as u32));
                        kcfg.sources = share(kcfg.sources as usize, n, i) as u32;
                    }
                    s.spawn(move || {
                        let r = KernelTransport::new(kcfg)
                            .context("creating a kernel transport")
                            .and_then(|t| drive(t, addr, &a, &p, Some(sync)))
                            .map(|(_, m)| m);
                        if r.is_err() {
                            sync.abort();
                        }
                        r
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|_| Err(anyhow::anyhow!("client thread panicked"))))
                .collect()
        });
        let mut merged: Option<Measured> = None;
        for (i, r) in runs.into_iter().enumerate() {
            let m = r.with_context(|| format!("client thread {i}"))?;
            if !args.quiet {
                eprintln!("thread {i}: {}", m.report);
            }
            match &mut merged {
                None => merged = Some(m),
                // Thread 0's CPU counters are process-wide and span every thread's run;
                // requests (warm-up included) add up over the threads.
                Some(acc) => {
                    acc.report.merge(&m.report);
                    acc.warmup_requests += m.warmup_requests;
                    acc.setup_s = acc.setup_s.max(m.setup_s);
                }
            }
        }
        merged.context("no client threads")
    }
}

fn make_result(
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

// ---------------------------------------------------------------------------------------------
// Lab mode
// ---------------------------------------------------------------------------------------------

/// Whether an XDP program is attached to `ifname` in `ns`.
fn xdp_attached(ns: &Netns, ifname: &str) -> Result<bool> {
    let out = ns.run(&["ip", "-d", "link", "show", "dev", ifname]).with_context(|| format!("ip link show {ifname}"))?;
    Ok(out.contains("prog/xdp"))
}

fn server_exe(args: &Args) -> Result<PathBuf> {
    let exe = match &args.server_exe {
        Some(p) => p.clone(),
        None => std::env::current_exe()
            .context("locating this binary")?
            .parent()
            .context("this binary has no parent directory")?
            .join("rr-server"),
    };
    ensure!(exe.is_file(), "rr-server not found at {} (build it, or pass --server-exe)", exe.display());
    Ok(exe)
}

fn in_lab(args: &Args, server_backend: Backend) -> Result<ExitCode> {
    let exe = server_exe(args)?;
    lab::sweep_stale(LAB_PREFIX);
    let lab = Lab::new(&LabConfig::new(LAB_PREFIX)).context("building the veth lab")?;
    // The peer keeps veth's default offloads, as a container has: the stack
    // serves its partial checksums.
    eprintln!("lab: {lab}");
    let o = lab.addr_a.octets();
    let host = |n: u8| Ipv4Addr::new(o[0], o[1], o[2], n);
    let dedicated = |n: u8| AddrArg::Dedicated { addr: host(n), prefix_len: lab.prefix_len, addr6: None };

    let server_ip = match (server_backend, args.lab_shared) {
        (Backend::Xsk, false) => host(100),
        _ => lab.addr_a,
    };
    let dir = std::env::temp_dir().join(format!("rr-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let ready = dir.join("ready");
    let safety =
        args.warmup + args.duration + 2 * (args.connect_timeout + args.drain_timeout) + Duration::from_secs(60);

    let mut cmd = ServerProcess::command(&lab.ns_a, &exe);
    cmd.args(["--backend", &server_backend.to_string(), "--service", &args.service.to_string()]);
    cmd.args(["--port", &args.port.to_string(), "--duration", &format!("{}s", safety.as_secs())]);
    cmd.args(["--max-conns", &args.conns.max(64).to_string()]);
    cmd.arg("--ready-file").arg(&ready);
    match server_backend {
        Backend::Xsk => {
            let addr = if args.lab_shared { AddrArg::Shared } else { dedicated(100) };
            cmd.args(["--iface", &lab.if_a, "--addr", &addr.to_string()]);
        }
        Backend::Kernel | Backend::Uring => {
            cmd.args(["--bind", &lab.addr_a.to_string()]);
        }
    }
    cmd.args(&args.server_arg);
    let mut server = ServerProcess::spawn("rr-server", cmd, &dir.join("server.out"), Some(&dir.join("server.err")))
        .context("starting rr-server in the lab")?;
    server.wait_ready_file(&ready, Duration::from_secs(30))?;
    eprintln!(
        "rr-server ({server_backend}) ready at {server_ip}:{} in {}, pid {}",
        args.port,
        lab.ns_a,
        server.pid()
    );

    let mut client = args.clone();
    client.lab = None;
    client.connect = Some(SocketAddrV4::new(server_ip, args.port).into());
    client.server_pid = Some(server.pid());
    match args.backend {
        Backend::Xsk => {
            client.xsk.iface = Some(lab.if_b.clone());
            client.xsk.addr = if args.lab_shared { AddrArg::Shared } else { dedicated(101) };
        }
        Backend::Kernel | Backend::Uring => client.bind = lab.addr_b,
    }
    if args.pattern != Pattern::Rr && args.backend != Backend::Xsk {
        // The kernel client closes first, so each connection would leave a TIME-WAIT socket
        // holding its local port for 60 s, and a few seconds of churn would run out of ports.
        // In the client's namespace only (the load generator, not the server measured), keep
        // no TIME-WAIT and use every port; the FIN exchange on the wire is unchanged.
        lab.ns_b.run(&["sysctl", "-qw", "net.ipv4.tcp_max_tw_buckets=0"])?;
        lab.ns_b.run(&["sysctl", "-qw", "net.ipv4.ip_local_port_range=10000 65000"])?;
    }
    let outcome = lab.ns_b.run_in(move || Plan::new(&client).and_then(|plan| bench(&client, &plan)));

    let clean_exit = match server.stop(Duration::from_secs(15)) {
        Ok(status) if status.success() => true,
        Ok(status) => {
            eprintln!("rr-server exited with {status}");
            false
        }
        Err(e @ ServerError::NoExit { .. }) => {
            eprintln!("{e}");
            false
        }
        Err(e) => return Err(e.into()),
    };
    let server_output = server.output();
    let leftover: Vec<String> = [(&lab.ns_a, &lab.if_a), (&lab.ns_b, &lab.if_b)]
        .into_iter()
        .filter(|(ns, ifname)| xdp_attached(ns, ifname).unwrap_or(true))
        .map(|(_, ifname)| ifname.clone())
        .collect();
    let _ = std::fs::remove_dir_all(&dir);
    drop(lab);

    let print_server = || {
        println!("---- rr-server ({server_backend}) ----");
        for line in server_output.lines() {
            println!("  {line}");
        }
    };
    let outcome = match outcome.context("running the client in the lab")? {
        Ok(o) => o,
        Err(e) => {
            print_server();
            return Err(e);
        }
    };
    let code = finish(args, &outcome);
    print_server();
    let code = code?;
    ensure!(clean_exit, "rr-server did not exit cleanly (status 0) after SIGINT");
    ensure!(leftover.is_empty(), "an XDP program is still attached to {leftover:?}");
    Ok(code)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn parse(extra: &[&str]) -> Result<Args, clap::Error> {
        let mut v = vec!["rr-bench", "--connect", "127.0.0.1:7000"];
        v.extend_from_slice(extra);
        Args::try_parse_from(v)
    }

    #[test]
    fn cli_is_consistent() {
        Args::command().debug_assert();
    }

    #[test]
    fn ignored_ids_exist() {
        let m =
            Args::command().get_matches_from(["rr-bench", "--connect", "127.0.0.1:1", "--lab-shared", "--depth", "2"]);
        warn_ignored(&m, XskOpts::IDS, "test");
        warn_ignored(&m, &["lab_shared", "port", "server_arg", "server_exe", "depth", "bind"], "test");
        warn_ignored(&m, &["iface", "addr", "bind", "server_pid"], "test");
    }

    #[test]
    fn plans() {
        let p = Plan::new(&parse(&["--req-size", "1k"]).unwrap()).unwrap();
        assert_eq!((p.req_size, p.resp_size, p.mode), (1024, 1024, LoadMode::ClosedLoop { depth: 1 }));
        let p = Plan::new(&parse(&["--service", "kv", "--resp-size", "100"]).unwrap()).unwrap();
        assert_eq!((p.size, p.req_size, p.resp_size), (100, KV_GET_LEN, 101));
        let p = Plan::new(&parse(&["--rate", "1000"]).unwrap()).unwrap();
        assert_eq!(p.mode, LoadMode::OpenLoop { rate: 1000.0 });
        for bad in [
            &["--resp-size", "10"][..],
            &["--rate", "0"],
            &["--rate", "-5"],
            &["--rate", "NaN"],
            &["--rate", "inf"],
            &["--depth", "0"],
            &["--conns", "0"],
            &["--duration", "0"],
            &["--max-requests", "0"],
            &["--service", "tcp-echo", "--req-size", "0"],
            &["--req-size", "2k", "--max-frame", "1k"],
        ] {
            assert!(Plan::new(&parse(bad).unwrap()).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn bad_arguments_are_rejected_by_the_parser() {
        assert!(Args::try_parse_from(["rr-bench"]).is_err(), "--connect or --lab is required");
        assert!(parse(&["--lab", "xsk"]).is_err(), "--connect conflicts with --lab");
        assert!(Args::try_parse_from(["rr-bench", "--connect", "nonsense"]).is_err());
        assert!(parse(&["--duration", "soon"]).is_err());
        assert!(parse(&["--addr", "1.2.3.4"]).is_err());
        assert!(parse(&["--attach", "sideways"]).is_err());
        assert!(parse(&["--tx-budget", "lots"]).is_err());
        assert!(parse(&["--rto-min", "50"]).is_err(), "durations need a unit");
        assert!(parse(&["--recovery", "linux"]).is_err());
        let a = parse(&["--backend", "xsk", "--recovery", "smoltcp", "--ack-delay", "5ms"]).unwrap();
        let r = a.xsk.loss_recovery.settings().unwrap();
        assert_eq!(r, stack::xsk::Recovery::smoltcp().with_ack_delay(Duration::from_millis(5)));
        let a = Args::try_parse_from(["rr-bench", "--lab", "kernel", "--server-arg", "--busy-poll", "--server-arg=50"])
            .unwrap();
        assert_eq!(a.server_arg, ["--busy-poll", "50"]);
    }
}
