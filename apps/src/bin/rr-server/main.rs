//! rr-server: a request/response server on the kernel's TCP or on smoltcp over AF_XDP.
//!
//! Services: `echo` (length-prefixed frames sent back), `kv` (GET/SET/DEL over the same
//! framing) and `tcp-echo` (RFC 862: raw bytes back, for nc/socat). It runs until SIGINT or
//! SIGTERM (or `--duration`), then shuts down gracefully (`--shutdown-grace`: requests
//! already received are answered, connections closed with a FIN), prints its counters (for
//! xsk also the stack counters and the UMEM frame audit), detaches the XDP program and exits 0.

use std::net::{Ipv4Addr, SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{ArgMatches, Parser};
use apps::deploy::DeployOpts;
use apps::{
    describe_recovery, parse_bytes, parse_duration, warn_ignored, Backend, RecoveryCounts, ServerSummary,
    Service, XskOpts,
};
use stack::kernel::{KernelBusyPoll, KernelConfig, KernelTransport};
use stack::napi::{NapiSettings, NapiTuning};
use stack::rr::ServerConfig;
use stack::uring::{UringBusyPoll, UringConfig, UringTransport};
use stack::xsk::XskTransport;

mod control;
mod server_loop;
mod threads;

use control::{install_signal_handlers, ReadyFile, Stop};
use server_loop::serve;

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
pub(crate) struct Args {
    /// TCP/IP stack: xsk (smoltcp over AF_XDP, needs --iface and root), kernel (epoll) or
    /// uring (kernel TCP through io_uring, Linux 6.0+).
    #[arg(long, value_enum, default_value_t = Backend::Kernel)]
    pub(crate) backend: Backend,
    /// Protocol: echo (u32 big-endian length + payload, echoed), kv (GET/SET/DEL requests over
    /// the same framing: op byte 'G'/'S'/'D', u16 key length, key, value for 'S'; reply: status
    /// byte 0 ok / 1 not found / 2 bad request, then the value) or tcp-echo (RFC 862 byte
    /// stream echo, talks to nc and socat) or resp (Redis protocol: redis-cli, redis-benchmark).
    #[arg(long, value_enum, default_value_t = Service::Echo)]
    pub(crate) service: Service,
    /// resp and kv: most keys stored; writes beyond get an error (resp: -OOM, kv: status Full).
    #[arg(long, value_name = "N", default_value_t = 4 << 20)]
    pub(crate) max_keys: usize,
    /// resp and kv: most bytes stored (keys + values + 64 per key); writes beyond get an error.
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes, default_value = "1024M")]
    pub(crate) max_memory: usize,
    /// TCP port to listen on.
    #[arg(long, default_value_t = 7000)]
    pub(crate) port: u16,
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
    pub(crate) max_frame: usize,
    /// Stop reading from a connection while this many response bytes wait to be sent
    /// (back-pressure against clients that pipeline without reading).
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes, default_value = "4M")]
    write_high_water: usize,
    /// Event-loop threads, each with its own transport, connections and timers, no shared
    /// state. kernel: N listeners on the port with SO_REUSEPORT. xsk: one stack shard per RX
    /// queue of --iface, which must have exactly N (ethtool -L IFACE combined N; veth:
    /// numrxqueues). echo and tcp-echo only: kv and resp would keep one store per thread.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub(crate) threads: u16,
    /// Exit by itself after this long (e.g. 30s, 2m), as if SIGINT arrived.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub(crate) duration: Option<Duration>,
    /// At the stop (the first SIGINT/SIGTERM, or --duration): take no new connections,
    /// answer every request already received, close each connection with a FIN after its
    /// responses and wait for the client to close too, for at most this long; connections
    /// left then are closed at once (xsk: reset). 0: close every connection at once (xsk:
    /// reset), responses not yet sent are lost. A second signal exits at once.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "2s")]
    pub(crate) shutdown_grace: Duration,
    /// Write `ADDR:PORT` to this file once listening (atomically; removed again at exit), so
    /// scripts and tests can wait for it.
    #[arg(long, value_name = "PATH")]
    ready_file: Option<PathBuf>,
    /// Write the exit summary (counters, xsk stats and audit) as JSON to this file.
    #[arg(long, value_name = "PATH")]
    pub(crate) json: Option<PathBuf>,
    /// Print one line of live figures per interval (e.g. 1s): req/s, connections, RX/TX
    /// frames and kicks per second, drops and errors by counter name.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, help_heading = "Live figures")]
    pub(crate) stats_interval: Option<Duration>,
    /// Serve every counter in the Prometheus text format at http://ADDR:PORT/metrics, on the
    /// kernel's TCP (refreshed once a second). Off by default.
    #[arg(long, value_name = "ADDR:PORT", value_parser = parse_listen, help_heading = "Live figures")]
    pub(crate) metrics: Option<SocketAddr>,
    #[command(flatten)]
    pub(crate) xsk: XskOpts,
    #[command(flatten)]
    pub(crate) deploy: DeployOpts,
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
    pub(crate) threads: u16,
    /// Connections the server will size for (its rings and UMEM, hence the memlock need).
    #[arg(long, value_name = "N", default_value_t = 1024)]
    max_conns: usize,
    /// Print the checks as JSON instead of a table.
    #[arg(long)]
    pub(crate) json: bool,
    #[command(flatten)]
    pub(crate) xsk: XskOpts,
    #[command(flatten)]
    pub(crate) deploy: DeployOpts,
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

fn main() -> ExitCode {
    apps::main_with::<Args>("rr-server", |args, matches| match &args.command {
        Some(Command::Doctor(d)) => doctor(d),
        None => run(args, matches).map(|()| ExitCode::SUCCESS),
    })
}

pub(crate) fn run(args: &Args, matches: &ArgMatches) -> Result<()> {
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

pub(crate) fn write_json(args: &Args, summary: &ServerSummary) -> Result<()> {
    if let Some(p) = &args.json {
        let text = serde_json::to_vec_pretty(summary).context("encoding the summary")?;
        std::fs::write(p, text).with_context(|| format!("writing {}", p.display()))?;
    }
    Ok(())
}

pub(crate) fn print_summary(s: &ServerSummary) {
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