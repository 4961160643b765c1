//! rr-server: a request/response server on the kernel's TCP or on smoltcp over AF_XDP.
//!
//! Services: `echo` (length-prefixed frames sent back), `kv` (GET/SET/DEL over the same
//! framing) and `tcp-echo` (RFC 862: raw bytes back, for nc/socat). It runs until SIGINT or
//! SIGTERM (or `--duration`), then shuts down gracefully (`--shutdown-grace`: requests
//! already received are answered, connections closed with a FIN), prints its counters (for
//! xsk also the stack counters and the UMEM frame audit), detaches the XDP program and exits 0.

use std::net::{Ipv4Addr, SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::{ArgMatches, Parser};

use apps::cpu::process_cpu;
use apps::deploy::DeployOpts;
use apps::stats::{self, MetricsEndpoint, Snapshot};
use apps::{
    describe_recovery, parse_bytes, parse_duration, usage_ensure, warn_ignored, Backend, RecoveryCounts, ServerSummary,
    Service, XskOpts,
};
use stack::codec::{Codec, LengthPrefixed, Stream};
use stack::kernel::{KernelBusyPoll, KernelConfig, KernelTransport};
use stack::napi::{NapiSettings, NapiTuning};
use apps::resp::{Resp, RespCodec, RespLimits};
use stack::rr::{Echo, Handler, Kv, Server, ServerConfig, ServerStats};
use stack::transport::Transport;
use stack::Waker;
use stack::uring::{UringBusyPoll, UringConfig, UringTransport};
use stack::xsk::XskTransport;

#[derive(Parser, Debug, Clone)]
#[command(
    name = "rr-server",
    version,
    args_conflicts_with_subcommands = true,
    about = "Request/response server on the kernel's TCP stack or on smoltcp over AF_XDP",
    after_help = format!("\
Runs until SIGINT/SIGTERM (or --duration), then shuts down gracefully (--shutdown-grace:
the requests already received are answered and every connection closed with a FIN), prints
its counters (xsk: also the stack counters and the UMEM frame audit), detaches the XDP
program and exits 0. A second signal exits at once. Exit status 1: setup failed, the event loop failed, or the frame audit found
a leak; 2: bad command line.

Live figures: --stats-interval 1s prints one line per interval (req/s, open connections,
xsk: RX/TX frames and kicks per second, and every drop or error counter that moved, by
name); SIGUSR1 (kill -USR1 PID) prints every counter once; --metrics 127.0.0.1:9100 serves
them in the Prometheus text format at http://127.0.0.1:9100/metrics (kernel TCP, refreshed
once a second; off by default).

Examples:
  rr-server --backend kernel --bind 0.0.0.0 --port 7000
  rr-server --backend xsk --iface eth1 --addr 198.18.0.100/24 --service kv --ready-file /tmp/ready
  rr-server --backend xsk --iface eth1 --service tcp-echo --port 7   # then: nc <addr> 7
  rr-server --backend xsk --iface eth1 --stats-interval 1s --metrics 127.0.0.1:9100

{}",
        apps::LOG_HELP
    )
)]
struct Args {
    /// TCP/IP stack: xsk (smoltcp over AF_XDP, needs --iface and root), kernel (epoll) or
    /// uring (kernel TCP through io_uring, Linux 6.0+).
    #[arg(long, value_enum, default_value_t = Backend::Kernel)]
    backend: Backend,
    /// Protocol: echo (u32 big-endian length + payload, echoed), kv (GET/SET/DEL requests over
    /// the same framing: op byte 'G'/'S'/'D', u16 key length, key, value for 'S'; reply: status
    /// byte 0 ok / 1 not found / 2 bad request, then the value) or tcp-echo (RFC 862 byte
    /// stream echo, talks to nc and socat) or resp (Redis protocol: redis-cli, redis-benchmark).
    #[arg(long, value_enum, default_value_t = Service::Echo)]
    service: Service,
    /// resp and kv: most keys stored; writes beyond get an error (resp: -OOM, kv: status Full).
    #[arg(long, value_name = "N", default_value_t = 4 << 20)]
    max_keys: usize,
    /// resp and kv: most bytes stored (keys + values + 64 per key); writes beyond get an error.
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes, default_value = "1024M")]
    max_memory: usize,
    /// TCP port to listen on.
    #[arg(long, default_value_t = 7000)]
    port: u16,
    /// Kernel and uring backends: local address to listen on (0.0.0.0 = every interface of the network
    /// namespace; the default accepts only local clients).
    #[arg(long, default_value_t = Ipv4Addr::LOCALHOST)]
    bind: Ipv4Addr,
    /// Busy polling, opt-in: SO_BUSY_POLL microseconds on the sockets (kernel), NAPI busy
    /// polling registered with the ring (uring, Linux 6.9) or on the AF_XDP socket (xsk), and
    /// the event loop polls without sleeping. Burns a core. 0: the loop spins
    /// but the kernel does not busy-poll (for a device with no interrupt to save, such as veth;
    /// see docs/2026-12-03-veth-attach). Given twice, the last one counts (so rr-demo's
    /// --xsk-args can override a case's).
    #[arg(long, value_name = "USECS", overrides_with = "busy_poll")]
    busy_poll: Option<u32>,
    /// Kernel and uring backends: the kernel's IRQ suspension on this interface, as its authors
    /// recommend (Documentation/networking/napi.rst): napi_defer_hard_irqs, gro_flush_timeout
    /// and, where the kernel has it (6.13), irq_suspend_timeout on the device, put back at
    /// exit; prefer-busy-poll with a budget on the epoll instance (6.9) or the ring's NAPI
    /// registration (6.9). The loop sleeps; the kernel polls the device while it has work.
    #[arg(long, value_name = "IFACE")]
    irq_suspend: Option<String>,
    /// Connections to size for. xsk: socket buckets and slab of the stack (more connections
    /// still work, with longer scans). kernel: the open-file limit is raised to fit them.
    #[arg(long, value_name = "N", default_value_t = 1024)]
    max_conns: usize,
    /// Largest request frame accepted by echo and kv, e.g. 1M; for resp the longest bulk
    /// argument (a command may total 4 times this). Longer frames close the connection
    /// (protocol error; resp answers -ERR Protocol error first).
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes, default_value = "16M")]
    max_frame: usize,
    /// Stop reading from a connection while this many response bytes wait to be sent
    /// (back-pressure against clients that pipeline without reading).
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes, default_value = "4M")]
    write_high_water: usize,
    /// Event-loop threads, each with its own transport, connections and timers, no shared
    /// state. kernel: N listeners on the port with SO_REUSEPORT. xsk: one stack shard per RX
    /// queue of --iface, which must have exactly N (ethtool -L IFACE combined N; veth:
    /// numrxqueues). echo and tcp-echo only: kv and resp would keep one store per thread.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=256))]
    threads: u16,
    /// Exit by itself after this long (e.g. 30s, 2m), as if SIGINT arrived.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    duration: Option<Duration>,
    /// At the stop (the first SIGINT/SIGTERM, or --duration): take no new connections,
    /// answer every request already received, close each connection with a FIN after its
    /// responses and wait for the client to close too, for at most this long; connections
    /// left then are closed at once (xsk: reset). 0: close every connection at once (xsk:
    /// reset), responses not yet sent are lost. A second signal exits at once.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "2s")]
    shutdown_grace: Duration,
    /// Write `ADDR:PORT` to this file once listening (atomically; removed again at exit), so
    /// scripts and tests can wait for it.
    #[arg(long, value_name = "PATH")]
    ready_file: Option<PathBuf>,
    /// Write the exit summary (counters, xsk stats and audit) as JSON to this file.
    #[arg(long, value_name = "PATH")]
    json: Option<PathBuf>,
    /// Print one line of live figures per interval (e.g. 1s): req/s, connections, RX/TX
    /// frames and kicks per second, drops and errors by counter name.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, help_heading = "Live figures")]
    stats_interval: Option<Duration>,
    /// Serve every counter in the Prometheus text format at http://ADDR:PORT/metrics, on the
    /// kernel's TCP (refreshed once a second). Off by default.
    #[arg(long, value_name = "ADDR:PORT", value_parser = parse_listen, help_heading = "Live figures")]
    metrics: Option<SocketAddr>,
    #[command(flatten)]
    xsk: XskOpts,
    #[command(flatten)]
    deploy: DeployOpts,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(clap::Subcommand, Debug, Clone)]
enum Command {
    /// Checks an interface, the kernel and this process for the xsk backend without changing
    /// anything: link, driver and XDP mode, MTU, offloads, queues against threads, an XDP program
    /// already attached, the kernel's copy-mode knobs, capabilities and memlock, the state
    /// directory, the address. Prints ok / warn / FAIL with the fix for each; exit status 1 if
    /// any check fails. Takes the server's AF_XDP options, so it checks what that server needs.
    Doctor(DoctorArgs),
}

#[derive(clap::Args, Debug, Clone)]
struct DoctorArgs {
    /// Event-loop threads the server will run (one RX queue each).
    #[arg(long, value_name = "N", default_value_t = 1)]
    threads: u16,
    /// Connections the server will size for (its rings and UMEM, hence the memlock need).
    #[arg(long, value_name = "N", default_value_t = 1024)]
    max_conns: usize,
    /// Print the checks as JSON instead of a table.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    xsk: XskOpts,
    #[command(flatten)]
    deploy: DeployOpts,
}

/// `rr-server doctor`: the table (or JSON) and the exit status.
fn doctor(d: &DoctorArgs) -> Result<ExitCode> {
    let xcfg = d.xsk.config(d.max_conns, None)?;
    let user = d.deploy.before_setup().ok().flatten();
    let report = apps::doctor::run(&xcfg, d.threads, user);
    if d.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.table());
    }
    Ok(if report.worst() == apps::doctor::Status::Fail { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

/// `ADDR:PORT` for --metrics, host names resolved.
fn parse_listen(s: &str) -> Result<SocketAddr, String> {
    s.to_socket_addrs()
        .map_err(|e| format!("expected ADDR:PORT, got {s:?}: {e}"))?
        .next()
        .ok_or_else(|| format!("{s:?} resolves to no address"))
}

/// The backend's own counters, for the live figures (serialized, so new fields appear there
/// without edits).
trait BackendStats {
    fn stats_json(&self) -> Option<serde_json::Value>;
}

impl BackendStats for KernelTransport {
    fn stats_json(&self) -> Option<serde_json::Value> {
        serde_json::to_value(self.stats()).ok()
    }
}

impl BackendStats for UringTransport {
    fn stats_json(&self) -> Option<serde_json::Value> {
        serde_json::to_value(self.stats()).ok()
    }
}

impl BackendStats for XskTransport {
    fn stats_json(&self) -> Option<serde_json::Value> {
        serde_json::to_value(self.stats()).ok()
    }
}

fn main() -> ExitCode {
    apps::main_with::<Args>("rr-server", |args, matches| match &args.command {
        Some(Command::Doctor(d)) => doctor(d),
        None => run(args, matches).map(|()| ExitCode::SUCCESS),
    })
}

/// Set by the first SIGINT or SIGTERM: the loop stops, the transport is dropped and the
/// interface put back. A second one ends the process at once (status 1; the XDP program
/// goes with it, the next start restores the device's settings).
static INTERRUPTED: std::sync::OnceLock<Arc<AtomicBool>> = std::sync::OnceLock::new();

fn interrupted() -> bool {
    INTERRUPTED.get().is_some_and(|f| f.load(Ordering::Relaxed))
}

/// signal-hook's two-step idiom: the conditional exit is registered first, so it sees
/// the flag as the first signal left it.
fn install_signal_handlers() -> Result<()> {
    let flag = Arc::clone(INTERRUPTED.get_or_init(|| Arc::new(AtomicBool::new(false))));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register_conditional_shutdown(sig, 1, Arc::clone(&flag))
            .and_then(|_| signal_hook::flag::register(sig, Arc::clone(&flag)))
            .with_context(|| format!("installing the handler of signal {sig}"))?;
    }
    Ok(())
}

/// Why the loop stopped.
fn stop_reason(deadline: Option<Instant>) -> &'static str {
    if interrupted() {
        "signal"
    } else if deadline.is_some_and(|d| Instant::now() >= d) {
        "--duration"
    } else {
        "error"
    }
}

/// Removes the ready file when dropped, whatever way `run` ends.
struct ReadyFile<'a>(Option<&'a Path>);

impl Drop for ReadyFile<'_> {
    fn drop(&mut self) {
        if let Some(p) = self.0 {
            let _ = std::fs::remove_file(p);
        }
    }
}

fn run(args: &Args, matches: &ArgMatches) -> Result<()> {
    install_signal_handlers()?;
    if let Some(p) = &args.ready_file {
        // A stale file from an earlier run would tell waiters we are up before we are.
        match std::fs::remove_file(p) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).with_context(|| format!("removing the old ready file {}", p.display())),
        }
    }
    let ready = ReadyFile(args.ready_file.as_deref());
    if args.threads > 1 && matches!(args.service, Service::Kv | Service::Resp) {
        bail!("--threads {} with --service {}: each thread would keep its own store", args.threads, args.service);
    }
    let cfg = ServerConfig::default()
        .with_port(args.port)
        .with_write_high_water(args.write_high_water.max(1))
        .with_poll_timeout(Some(if args.busy_poll.is_some() { Duration::ZERO } else { Duration::from_millis(10) }));
    match args.backend {
        Backend::Kernel => {
            warn_ignored(matches, XskOpts::IDS, "with --backend kernel");
            warn_ignored(matches, DeployOpts::IDS, "with --backend kernel");
            raise_nofile(args.max_conns);
            let _napi = irq_suspension(args)?;
            // Busy polling as the kernel's authors tune it: SO_BUSY_POLL with SO_PREFER_BUSY_POLL
            // and a budget, and the same on the epoll instance where the kernel has EPIOCSPARAMS.
            let busy = match (args.busy_poll, &args.irq_suspend) {
                (Some(usecs), _) => Some(KernelBusyPoll::new(usecs).with_prefer(true)),
                (None, Some(_)) => Some(KernelBusyPoll::irq_suspension()),
                (None, None) => None,
            };
            let kcfg = KernelConfig::default().with_bind(args.bind).with_busy(busy).with_reuse_port(args.threads > 1);
            if args.threads > 1 {
                let ts = (0..args.threads)
                    .map(|_| KernelTransport::new(kcfg.clone()).context("creating a kernel transport"))
                    .collect::<Result<Vec<_>>>()?;
                let (_ts, summary) = threads::serve_all(ts, args, cfg, &ready)?;
                print_summary(&summary);
                return write_json(args, &summary);
            }
            let t = KernelTransport::new(kcfg).context("creating the kernel transport")?;
            if busy.is_some() {
                println!("kernel {}", t.busy_report());
            }
            let (_t, summary) = serve(t, args, cfg, &ready.notifier(), &Stop::new())?;
            print_summary(&summary);
            write_json(args, &summary)
        }
        Backend::Uring => {
            warn_ignored(matches, XskOpts::IDS, "with --backend uring");
            warn_ignored(matches, DeployOpts::IDS, "with --backend uring");
            raise_nofile(args.max_conns);
            let _napi = irq_suspension(args)?;
            let busy = match (args.busy_poll, &args.irq_suspend) {
                (Some(usecs), _) => Some(UringBusyPoll { usecs, prefer: true }),
                (None, Some(_)) => Some(UringBusyPoll { usecs: 0, prefer: true }),
                (None, None) => None,
            };
            let ucfg = UringConfig::default().with_bind(args.bind).with_busy_poll(busy).with_reuse_port(args.threads > 1);
            let uring_json = |ts: &[&UringTransport]| {
                let stats: Vec<_> = ts.iter().map(|t| t.stats()).collect();
                serde_json::json!({ "features": ts[0].features(), "stats": stats })
            };
            if args.threads > 1 {
                let ts = (0..args.threads)
                    .map(|_| UringTransport::new(ucfg.clone()).context("creating an io_uring transport"))
                    .collect::<Result<Vec<_>>>()?;
                println!("{}", ts[0].features());
                let (ts, mut summary) = threads::serve_all(ts, args, cfg, &ready)?;
                summary.uring = Some(uring_json(&ts.iter().collect::<Vec<_>>()));
                print_summary(&summary);
                return write_json(args, &summary);
            }
            let t = UringTransport::new(ucfg).context("creating the io_uring transport")?;
            println!("{}", t.features());
            let (t, mut summary) = serve(t, args, cfg, &ready.notifier(), &Stop::new())?;
            println!("uring stats: {}", serde_json::to_string(&t.stats()).unwrap_or_default());
            summary.uring = Some(uring_json(&[&t]));
            print_summary(&summary);
            write_json(args, &summary)
        }
        Backend::Xsk => {
            warn_ignored(matches, &["bind", "irq_suspend"], "with --backend xsk (the stack's address is --addr)");
            let xcfg = args.xsk.config(args.max_conns, args.busy_poll)?;
            let iface = xcfg.port.ifname.clone();
            let recovery = describe_recovery(&xcfg.engine.recovery);
            let user = args.deploy.before_setup()?;
            // The doctor's checks, logged where they say more than the setup below will.
            apps::doctor::run(&xcfg, args.threads, user).log_at_start();
            if args.threads > 1 {
                println!("xsk loss recovery: {recovery}");
                return threads::xsk(xcfg, args, cfg, &ready, user);
            }
            let t = XskTransport::new(xcfg)
                .with_context(|| format!("starting the AF_XDP stack on {iface} queue {}", args.xsk.queue))?;
            // Before any thread starts: capabilities are per thread, new ones inherit these.
            args.deploy.after_setup(user)?;
            println!("xsk port: {}", t.port().features());
            println!("xsk stack: {} ({})", t.addr(), args.xsk.addr);
            println!("xsk loss recovery: {recovery}");
            let (mut t, mut summary) = serve(t, args, cfg, &ready.notifier(), &Stop::new())?;
            let stats = t.stats();
            let audit = t.audit();
            let features = t.port().features().clone();
            // Dropping the transport aborts what is still open and detaches the XDP program.
            drop(t);
            summary.xsk = Some(serde_json::json!({
                "stats": stats,
                "features": features,
                "audit": match &audit { Ok(a) => serde_json::json!(a), Err(e) => serde_json::json!({ "error": e }) },
            }));
            summary.recovery = Some(stats.recovery.into());
            print_summary(&summary);
            println!(
                "xsk stack: accepted {} connected {} closed {} recycled {} live sockets {} pooled {}",
                stats.accepted, stats.connected, stats.closed, stats.recycled, stats.live_sockets, stats.pooled_sockets
            );
            println!("xsk device: {}", serde_json::to_string(&stats.device).unwrap_or_default());
            println!(
                "xsk drops by reason ({} of {} received frames): {}",
                stats.drops.total(),
                stats.rx_frames,
                serde_json::to_string(&stats.drops).unwrap_or_default()
            );
            println!("xsk loss recovery: {}", RecoveryCounts::from(stats.recovery).line());
            if let Some(st) = &stats.stages {
                println!("xsk stages: {st}");
            }
            println!("xsk port counters: {}", serde_json::to_string(&stats.port.port).unwrap_or_default());
            println!("xsk xdp statistics: {}", serde_json::to_string(&stats.port.xdp).unwrap_or_default());
            match &audit {
                Ok(a) => println!("frame audit: ok {a:?}"),
                Err(e) => println!("frame audit: FAILED: {e}"),
            }
            println!("xdp program detached from {iface}");
            write_json(args, &summary)?;
            if let Err(e) = audit {
                bail!("UMEM frame audit failed: {e}");
            }
            Ok(())
        }
    }
}

/// `--irq-suspend IFACE`: the device's NAPI settings for IRQ suspension, held (and put back
/// when dropped) for the server's life.
fn irq_suspension(args: &Args) -> Result<Option<NapiTuning>> {
    let Some(iface) = &args.irq_suspend else { return Ok(None) };
    let t = NapiTuning::apply(iface, &NapiSettings::irq_suspension())
        .with_context(|| format!("setting up IRQ suspension on {iface}"))?;
    println!("napi: {}", t.report());
    Ok(Some(t))
}

/// The kernel backends hold a descriptor per connection.
fn raise_nofile(max_conns: usize) {
    match apps::raise_nofile_limit(max_conns as u64 + 64) {
        Ok(n) if (n as usize) < max_conns + 16 => {
            tracing::warn!("open-file limit is {n}: fewer than --max-conns {max_conns} connections fit")
        }
        Ok(_) => {}
        Err(e) => tracing::warn!("could not raise the open-file limit: {e}"),
    }
}

fn write_json(args: &Args, summary: &ServerSummary) -> Result<()> {
    if let Some(p) = &args.json {
        let text = serde_json::to_vec_pretty(summary).context("encoding the summary")?;
        std::fs::write(p, text).with_context(|| format!("writing {}", p.display()))?;
    }
    Ok(())
}

/// Picks codec and handler for the service, runs the server, returns the transport for the
/// backend's own report.
/// Called with `ADDR:PORT` once the server listens.
type OnListen<'a> = dyn Fn(&str) -> Result<()> + Sync + 'a;

/// What stops the server loops besides signals and `--duration`: with `--threads`, a thread
/// that failed or a ready file that could not be written. Setting it wakes every loop, which
/// sleeps without a timeout.
struct Stop {
    flag: AtomicBool,
    wakers: Mutex<Vec<Waker>>,
}

impl Stop {
    fn new() -> Self {
        Stop { flag: AtomicBool::new(false), wakers: Mutex::new(Vec::new()) }
    }

    fn set(&self) {
        self.flag.store(true, Ordering::Relaxed);
        for w in self.wakers.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            w.wake();
        }
    }

    fn is_set(&self) -> bool {
        self.flag.load(Ordering::Relaxed)
    }

    /// `w` is woken by [`Stop::set`] from now on (a loop checks the flag after this).
    fn watch(&self, w: Waker) {
        self.wakers.lock().unwrap_or_else(|e| e.into_inner()).push(w);
    }
}

/// Signals that wake a loop through its waker, unregistered when dropped (the loop is gone).
struct SignalWakes(Vec<signal_hook::SigId>);

impl SignalWakes {
    /// SIGINT and SIGTERM (after their flag, registered first, is set) and SIGUSR1 wake the
    /// loop whichever thread gets them, and also between its check of the flags and its
    /// sleep (`Waker::wake_on_signal`).
    fn register(w: &Waker) -> std::io::Result<SignalWakes> {
        let mut ids = SignalWakes(Vec::new());
        for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM, signal_hook::consts::SIGUSR1] {
            ids.0.push(w.wake_on_signal(sig)?);
        }
        Ok(ids)
    }
}

impl Drop for SignalWakes {
    fn drop(&mut self) {
        for id in self.0.drain(..) {
            signal_hook::low_level::unregister(id);
        }
    }
}

impl ReadyFile<'_> {
    fn notifier(&self) -> impl Fn(&str) -> Result<()> + Sync + '_ {
        move |listen: &str| match self.0 {
            Some(p) => apps::write_atomically(p, format!("{listen}\n").as_bytes()),
            None => Ok(()),
        }
    }
}

fn serve<T: Transport + BackendStats>(
    t: T,
    args: &Args,
    cfg: ServerConfig,
    ready: &OnListen<'_>,
    stop: &Stop,
) -> Result<(T, ServerSummary)> {
    match args.service {
        Service::Echo => {
            serve_with(t, LengthPrefixed::new(args.max_frame), Echo, args, cfg, ready, stop).map(drop_handler)
        }
        Service::Kv => {
            serve_with(t, LengthPrefixed::new(args.max_frame), Kv::with_limits(args.max_keys, args.max_memory), args, cfg, ready, stop)
                .map(drop_handler)
        }
        Service::TcpEcho => serve_with(t, Stream, Echo, args, cfg, ready, stop).map(drop_handler),
        Service::Resp => {
            let limits = RespLimits {
                max_bulk: args.max_frame,
                max_request: args.max_frame.saturating_mul(4),
                // A transaction may queue as much as one request may carry.
                max_queued_bytes: args.max_frame.saturating_mul(4),
                max_reply: args.max_frame.saturating_mul(4),
                max_keys: args.max_keys,
                max_memory: args.max_memory,
                ..RespLimits::default()
            };
            let (t, summary, h) = serve_with(t, RespCodec::new(limits), Resp::new(limits), args, cfg, ready, stop)?;
            let s = h.stats();
            println!(
                "resp: {} commands, {} error replies, {} keys ({} bytes) at exit, {} expired, {} writes refused by limits",
                s.commands,
                s.errors,
                h.len(),
                h.used_memory(),
                s.expired_keys,
                s.rejected_writes
            );
            Ok((t, summary))
        }
    }
}

fn drop_handler<T, H>((t, summary, _): (T, ServerSummary, H)) -> (T, ServerSummary) {
    (t, summary)
}

/// Zero-timeout steps at the stop: a close takes two (the read that finds the FIN, then its
/// `Closed`); more only while events keep coming.
const SETTLE_ROUNDS: usize = 8;

fn serve_with<T: Transport + BackendStats, C: Codec + Clone, H: Handler>(
    mut t: T,
    codec: C,
    handler: H,
    args: &Args,
    mut cfg: ServerConfig,
    ready: &OnListen<'_>,
    stop: &Stop,
) -> Result<(T, ServerSummary, H)> {
    let backend = t.name();
    if let Some(i) = args.stats_interval {
        usage_ensure!(!i.is_zero(), "--stats-interval must be positive");
    }
    let usr1 = Arc::new(AtomicBool::new(false));
    if let Err(e) = signal_hook::flag::register(signal_hook::consts::SIGUSR1, Arc::clone(&usr1)) {
        tracing::warn!("SIGUSR1 will not print the counters: {e}");
    }
    // Sleeps without a timeout when something wakes the loop for every reason to stop or
    // report (a timeout costs a kernel timer on every sleep); times (--duration, the stats
    // line, metrics) are the deadline of each step. Busy polling checks on every pass anyway.
    let _signal_wakes = if cfg.poll_timeout == Some(Duration::ZERO) {
        None
    } else {
        match t.waker().map_err(anyhow::Error::from).and_then(|w| Ok((SignalWakes::register(&w)?, w))) {
            Ok((ids, w)) => {
                stop.watch(w);
                cfg = cfg.with_poll_timeout(None);
                Some(ids)
            }
            Err(e) => {
                tracing::warn!(
                    "the {backend} backend's loop cannot be woken ({e:#}): it checks for a stop every {:?}",
                    cfg.poll_timeout.unwrap_or_default()
                );
                None
            }
        }
    };
    let mut server = Server::new(t, codec, handler, cfg).with_context(|| format!("listening on port {}", args.port))?;
    let listen = server.local_addr().map_or_else(|| format!("?:{}", args.port), |a| a.to_string());
    println!("rr-server: {} service on the {backend} backend, listening on {listen}", args.service);
    ready(&listen)?;
    let started = Instant::now();
    let cpu0 = process_cpu().unwrap_or_default();
    let deadline = args.duration.map(|d| started + d);
    let stop = || interrupted() || stop.is_set() || deadline.is_some_and(|d| Instant::now() >= d);
    let metrics = match args.metrics {
        Some(a) => {
            let ep = MetricsEndpoint::start(a).with_context(|| format!("--metrics {a}: listening"))?;
            println!("rr-server: metrics at http://{}/metrics", ep.local_addr());
            Some(ep)
        }
        None => None,
    };
    let service = args.service.to_string();
    let labels = [("backend", backend), ("service", service.as_str())];
    let snapshot = |server: &Server<T, C, H>| {
        let mut v = serde_json::to_value(server.stats()).unwrap_or_default();
        if let Some(m) = v.as_object_mut() {
            m.insert("connections".into(), server.connections().into());
            m.insert("uptime_s".into(), started.elapsed().as_secs_f64().into());
            let cpu = process_cpu().unwrap_or_default().saturating_sub(cpu0);
            m.insert("cpu_s".into(), cpu.as_secs_f64().into());
            if let Some(x) = server.transport().stats_json() {
                m.insert(backend.into(), x);
            }
        }
        Snapshot::new(&v)
    };
    const PUBLISH_EVERY: Duration = Duration::from_secs(1);
    let mut prev = snapshot(&server);
    let mut next_line = args.stats_interval.map(|i| started + i);
    let mut next_publish = metrics.as_ref().map(|_| started);
    let result = loop {
        let wake = next_line.into_iter().chain(next_publish).chain(deadline).min();
        let r = server.run_until_deadline(wake, || stop() || usr1.load(Ordering::Relaxed));
        if r.is_err() || stop() {
            break r;
        }
        let now = Instant::now();
        if usr1.swap(false, Ordering::Relaxed) {
            println!("counters (SIGUSR1):\n{}", snapshot(&server).dump());
        }
        if let (Some(t), Some(interval)) = (next_line, args.stats_interval) {
            if now >= t {
                let cur = snapshot(&server);
                println!("{}", stats::interval_line(&prev, &cur));
                prev = cur;
                // After a stall, skip the missed ticks instead of printing a burst.
                next_line = Some(t + interval * ((now - t).as_nanos() / interval.as_nanos() + 1) as u32);
            }
        }
        if let (Some(t), Some(ep)) = (next_publish, &metrics) {
            if now >= t {
                ep.publish(stats::prometheus("rr_server", &labels, &snapshot(&server)));
                next_publish = Some(now + PUBLISH_EVERY);
            }
        }
    };
    // Closes the stack has already seen (a client that closed just before the stop) are
    // delivered and counted as closed, not as open at exit; then, unless --shutdown-grace
    // is 0, the open connections are answered and closed.
    let result = result.and_then(|()| server.settle(SETTLE_ROUNDS).map(drop)).and_then(|()| {
        if args.shutdown_grace.is_zero() || server.connections() == 0 {
            return Ok(());
        }
        let st = server.shutdown(args.shutdown_grace)?;
        println!(
            "rr-server: shutdown: {} connections open, {} closed gracefully, {} closed at the {:?} deadline, \
             {} refused meanwhile; {} requests answered, {} bytes unanswered",
            st.open, st.graceful, st.forced, args.shutdown_grace, st.refused, st.answered, st.unanswered_bytes
        );
        Ok(())
    });
    let uptime = started.elapsed();
    let cpu = process_cpu().unwrap_or_default().saturating_sub(cpu0);
    let stats: ServerStats = server.stats();
    let open = server.connections();
    result.with_context(|| format!("server loop after {uptime:.1?} ({} requests served)", stats.requests))?;
    println!("rr-server: stopped by {} after {:.2} s", stop_reason(deadline), uptime.as_secs_f64());
    let (t, handler) = server.into_parts();
    Ok((
        t,
        ServerSummary {
            backend: args.backend,
            service: args.service,
            listen,
            uptime_s: uptime.as_secs_f64(),
            requests: stats.requests,
            bytes_in: stats.bytes_in,
            bytes_out: stats.bytes_out,
            accepted: stats.accepted,
            closed: stats.closed,
            open_at_exit: open,
            protocol_errors: stats.protocol_errors,
            io_errors: stats.io_errors,
            cpu_s: cpu.as_secs_f64(),
            xsk: None,
            recovery: None,
            uring: None,
        },
        handler,
    ))
}

/// `--threads N`: one event loop per thread, each on its own transport, merged at exit.
mod threads {
    use super::*;
    use std::sync::mpsc;

    /// Serves on every transport in its own thread. The ready file is written once all of them
    /// listen; if one thread fails the others stop too.
    pub(super) fn serve_all<T: Transport + BackendStats + Send>(
        ts: Vec<T>,
        args: &Args,
        cfg: ServerConfig,
        ready: &ReadyFile<'_>,
    ) -> Result<(Vec<T>, ServerSummary)> {
        let n = ts.len();
        let stop = Stop::new();
        let (tx, rx) = mpsc::channel::<String>();
        let results = std::thread::scope(|s| {
            let handles: Vec<_> = ts
                .into_iter()
                .enumerate()
                .map(|(i, t)| {
                    let (tx, cfg, stop) = (tx.clone(), cfg.clone(), &stop);
                    std::thread::Builder::new()
                        .name(format!("rr-server-{i}"))
                        .spawn_scoped(s, move || {
                            let notify =
                                move |l: &str| tx.send(l.to_string()).map_err(|_| anyhow::anyhow!("main gone"));
                            let r = serve(t, args, cfg, &notify, stop);
                            if r.is_err() {
                                stop.set();
                            }
                            r
                        })
                        .expect("spawning a server thread")
                })
                .collect();
            drop(tx);
            let listening: Vec<String> = rx.iter().take(n).collect();
            if listening.len() == n {
                if let Err(e) = ready.notifier()(&listening[0]) {
                    tracing::error!("{e:#}");
                    stop.set();
                }
                println!("rr-server: {n} threads listening on {}", listening[0]);
            }
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|_| Err(anyhow::anyhow!("thread panicked"))))
                .collect::<Vec<_>>()
        });
        let mut ts = Vec::with_capacity(n);
        let mut merged: Option<ServerSummary> = None;
        for (i, r) in results.into_iter().enumerate() {
            let (t, s) = r.with_context(|| format!("server thread {i}"))?;
            println!("rr-server: thread {i}: {} requests, {} connections", s.requests, s.accepted);
            merged = Some(match merged {
                None => s,
                Some(m) => merge(m, &s),
            });
            ts.push(t);
        }
        Ok((ts, merged.context("no threads")?))
    }

    /// Sums the counters. CPU and uptime are the process's, which every thread measured.
    fn merge(mut a: ServerSummary, b: &ServerSummary) -> ServerSummary {
        a.requests += b.requests;
        a.bytes_in += b.bytes_in;
        a.bytes_out += b.bytes_out;
        a.accepted += b.accepted;
        a.closed += b.closed;
        a.open_at_exit += b.open_at_exit;
        a.protocol_errors += b.protocol_errors;
        a.io_errors += b.io_errors;
        a.uptime_s = a.uptime_s.max(b.uptime_s);
        a.cpu_s = a.cpu_s.max(b.cpu_s);
        a
    }

    pub(super) fn xsk(
        xcfg: stack::xsk::XskConfig,
        args: &Args,
        cfg: ServerConfig,
        ready: &ReadyFile<'_>,
        user: Option<(u32, u32)>,
    ) -> Result<()> {
        let iface = xcfg.port.ifname.clone();
        let ts = XskTransport::shards(xcfg).with_context(|| format!("starting AF_XDP stack shards on {iface}"))?;
        // Before the server threads start: they inherit the reduced capabilities.
        args.deploy.after_setup(user)?;
        if ts.len() != args.threads as usize {
            bail!(
                "{iface} has {} RX queues but --threads is {}: one shard per queue (ethtool -L {iface} combined {})",
                ts.len(),
                args.threads,
                args.threads
            );
        }
        println!("xsk port: {}", ts[0].port().features());
        println!("xsk stack: {} ({}), {} shards", ts[0].addr(), args.xsk.addr, ts.len());
        let (ts, mut summary) = serve_all(ts, args, cfg, ready)?;
        let mut shards = Vec::new();
        let mut failed = None;
        let mut recovery = RecoveryCounts::default();
        for (i, mut t) in ts.into_iter().enumerate() {
            let stats = t.stats();
            let audit = t.audit();
            println!(
                "xsk shard {i}: accepted {} closed {} live sockets {}; device {}",
                stats.accepted,
                stats.closed,
                stats.live_sockets,
                serde_json::to_string(&stats.device).unwrap_or_default()
            );
            let r = RecoveryCounts::from(stats.recovery);
            println!("xsk shard {i} loss recovery: {}", r.line());
            recovery.add(&r);
            match &audit {
                Ok(a) => println!("frame audit shard {i}: ok {a:?}"),
                Err(e) => {
                    println!("frame audit shard {i}: FAILED: {e}");
                    failed = Some(e.to_string());
                }
            }
            shards.push(serde_json::json!({
                "stats": stats,
                "audit": match &audit { Ok(a) => serde_json::json!(a), Err(e) => serde_json::json!({ "error": e }) },
            }));
            drop(t);
        }
        summary.xsk = Some(serde_json::json!({ "shards": shards }));
        summary.recovery = Some(recovery);
        print_summary(&summary);
        println!("xdp program detached from {iface}");
        write_json(args, &summary)?;
        if let Some(e) = failed {
            bail!("UMEM frame audit failed: {e}");
        }
        Ok(())
    }
}

fn print_summary(s: &ServerSummary) {
    let per_req =
        if s.requests > 0 { format!("{:.2} us/request", s.cpu_s * 1e6 / s.requests as f64) } else { "-".into() };
    println!(
        "rr-server: {} requests, {} bytes in, {} bytes out; connections: {} accepted, {} closed, {} open at exit; \
         errors: {} protocol, {} io; CPU {:.2} s ({per_req})",
        apps::group_digits(s.requests),
        apps::group_digits(s.bytes_in),
        apps::group_digits(s.bytes_out),
        s.accepted,
        s.closed,
        s.open_at_exit,
        s.protocol_errors,
        s.io_errors,
        s.cpu_s,
    );
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
    fn attach_defaults_to_auto() {
        let a = Args::try_parse_from(["rr-server"]).unwrap();
        assert_eq!(a.xsk.attach, xsk_io::AttachMode::Auto);
        let a = Args::try_parse_from(["rr-server", "--stats-interval", "500ms", "--metrics", "localhost:9100"]).unwrap();
        assert_eq!(a.stats_interval, Some(Duration::from_millis(500)));
        assert_eq!(a.metrics.map(|m| m.port()), Some(9100));
        assert!(Args::try_parse_from(["rr-server", "--stats-interval", "5"]).is_err());
        assert!(Args::try_parse_from(["rr-server", "--metrics", "9100"]).is_err());
    }

    #[test]
    fn recovery_options() {
        let a = Args::try_parse_from(["rr-server", "--backend", "xsk", "--no-tail-probe", "--rto-min", "20ms"]).unwrap();
        let r = a.xsk.loss_recovery.settings().unwrap();
        assert_eq!(
            r,
            stack::xsk::Recovery::default().with_rto_min(Duration::from_millis(20)).with_tail_probe(false)
        );
        // A bad combination is a usage error (exit status 2) from XskOpts::config.
        let a = Args::try_parse_from(["rr-server", "--backend", "xsk", "--iface", "lo", "--rto-initial", "1us"]).unwrap();
        let e = a.xsk.config(a.max_conns, None).unwrap_err();
        assert!(e.downcast_ref::<apps::UsageError>().is_some(), "{e:#}");
    }

    #[test]
    fn ignored_ids_exist() {
        let m = Args::command().get_matches_from(["rr-server", "--iface", "x", "--bind", "0.0.0.0"]);
        warn_ignored(&m, XskOpts::IDS, "test");
        warn_ignored(&m, &["bind"], "test");
    }
}
