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

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, ensure, Context, Result};
use clap::{ArgMatches, Parser};
use apps::{
    parse_bytes, parse_connect, parse_duration, warn_ignored, Backend,
    BenchResult, Service, UsageError, XskOpts,
};
use xsk_lab::signals;
use stack::kernel::{KernelBusyPoll, KernelConfig, KernelTransport};
use stack::uring::{UringBusyPoll, UringConfig, UringTransport};
use stack::xsk::XskTransport;

mod drive;
mod lab_mode;
mod plan;
mod result;
mod threads;

use drive::drive;
use lab_mode::in_lab;
use plan::Plan;

/// Exit status when the run completed with errors (clap uses 2 for usage errors).
const EXIT_RUN_ERRORS: u8 = 3;

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
pub(crate) struct Args {
    /// Client TCP/IP stack: kernel, or xsk (smoltcp over AF_XDP, needs --iface and root).
    #[arg(long, value_enum, default_value_t = Backend::Kernel)]
    pub(crate) backend: Backend,
    /// Server address: an IPv4 address, [an IPv6 one] (kernel backend) or a host name, and the port.
    #[arg(long, value_name = "HOST:PORT", value_parser = parse_connect, required_unless_present = "lab", conflicts_with = "lab")]
    pub(crate) connect: Option<SocketAddr>,
    /// Protocol of the server (see rr-server --help): echo, kv or tcp-echo.
    #[arg(long, value_enum, default_value_t = Service::Echo)]
    pub(crate) service: Service,
    /// Connections to open (churn: in progress at once; storm: per wave).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub(crate) conns: usize,
    /// rr: open --conns connections, then load them with requests. churn: every connection
    /// is opened, sends one request, checks the response and closes, --conns of them in
    /// progress at all times. storm: waves of --conns connections opened at once, one request
    /// each, closed; the next wave when the last is done. For churn and storm, requests/s are
    /// connections/s and latency runs from the connect call (setup_p50_us/setup_p99_us: until
    /// established).
    #[arg(long, value_enum, default_value_t = Pattern::Rr)]
    pub(crate) pattern: Pattern,
    /// Closed loop: requests kept in flight per connection (pipelining). Ignored with --rate.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub(crate) depth: usize,
    /// Request payload size, e.g. 64 or 4k.
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes, default_value = "64")]
    pub(crate) req_size: usize,
    /// Response payload size. echo/tcp-echo: equal to --req-size (the only allowed value).
    /// kv: the value size [default: --req-size].
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes)]
    pub(crate) resp_size: Option<usize>,
    /// Measured run length, e.g. 10s, 500ms, 1m (new requests stop then; outstanding ones
    /// get --drain-timeout to come back).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "10s")]
    pub(crate) duration: Duration,
    /// Warm-up before the measured run, on separate connections; its numbers are discarded.
    /// 0 disables it.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "1s")]
    pub(crate) warmup: Duration,
    /// Open loop: send R requests per second in total (round robin over the connections)
    /// whatever the responses do; latency counts from each request's scheduled time (no
    /// coordinated omission). Without it: closed loop.
    #[arg(long, value_name = "R", allow_negative_numbers = true)]
    pub(crate) rate: Option<f64>,
    /// Stop the measured run after this many requests (or at --duration, whichever is first).
    #[arg(long, value_name = "N")]
    pub(crate) max_requests: Option<u64>,
    /// All connections must be established within this time.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "5s")]
    pub(crate) connect_timeout: Duration,
    /// After --duration, wait at most this long for outstanding responses (the rest count as
    /// lost).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "2s")]
    pub(crate) drain_timeout: Duration,
    /// Kernel backend: local source address (0.0.0.0 = chosen by routing).
    #[arg(long, default_value_t = Ipv4Addr::UNSPECIFIED)]
    pub(crate) bind: Ipv4Addr,
    /// Kernel backend: spread the connections over this many consecutive source addresses
    /// starting at --bind, in turn, as if they came from that many clients (the addresses
    /// must be on the client's interface). Needs --bind.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) sources: u32,
    /// Busy polling, opt-in: SO_BUSY_POLL microseconds on the sockets (kernel) or the AF_XDP
    /// socket (xsk), and the client polls without sleeping. Burns a core. 0: the client spins
    /// but the kernel does not busy-poll.
    /// Given twice, the last one counts (so rr-demo's --xsk-args can override a case's).
    #[arg(long, value_name = "USECS", overrides_with = "busy_poll")]
    pub(crate) busy_poll: Option<u32>,
    /// Largest response frame accepted (echo, kv).
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes, default_value = "16M")]
    pub(crate) max_frame: usize,
    /// kv: keys per connection.
    #[arg(long, value_name = "N", default_value_t = 16)]
    pub(crate) kv_keys: u64,
    /// Also report the CPU time of this process (the server) per request, from its
    /// threads' schedstat run time. Set automatically in --lab mode.
    #[arg(long, value_name = "PID")]
    pub(crate) server_pid: Option<u32>,
    /// With --server-pid: do not time the kernel's NET_RX softirqs. By default a raw tracepoint
    /// program (needs root) sums them by the process they ran in, to report the server's CPU
    /// with each side charged its own receive path (`cpu_us_per_req_server_own_rx`): on a
    /// veth pair the sender's process runs the receiver's whole NET_RX work.
    #[arg(long)]
    pub(crate) no_netrx: bool,
    /// Write the results as JSON to this file.
    #[arg(long, value_name = "PATH")]
    pub(crate) json: Option<PathBuf>,
    /// No progress lines.
    #[arg(long)]
    pub(crate) quiet: bool,
    /// Client threads, each with its own kernel transport and an equal share of --conns (and
    /// of --rate / --max-requests), measured together and merged into one report, so the load
    /// generator is not the bound. --backend kernel only.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub(crate) threads: u16,
    #[command(flatten)]
    pub(crate) xsk: XskOpts,
    /// Lab mode: build a veth lab (two fresh network namespaces, 198.18.0.0/15), run rr-server
    /// with this backend in one and the load from the other, then remove everything. The
    /// client's --iface/--addr/--bind are set by the lab (xsk ends use dedicated addresses
    /// .100 (server) and .101 (client) unless --lab-shared).
    #[arg(long, value_name = "SERVER_BACKEND", help_heading = "Lab mode")]
    pub(crate) lab: Option<Backend>,
    /// Lab mode: xsk ends share the kernel's addresses instead of dedicated ones.
    #[arg(long, help_heading = "Lab mode")]
    pub(crate) lab_shared: bool,
    /// Lab mode: the server's port.
    #[arg(long, value_name = "PORT", default_value_t = 7000, help_heading = "Lab mode")]
    pub(crate) port: u16,
    /// Lab mode: extra rr-server argument (repeatable), e.g. --server-arg=--busy-poll
    /// --server-arg=50.
    #[arg(long, value_name = "ARG", allow_hyphen_values = true, help_heading = "Lab mode")]
    pub(crate) server_arg: Vec<String>,
    /// Lab mode: rr-server binary [default: next to this binary].
    #[arg(long, value_name = "PATH", help_heading = "Lab mode")]
    pub(crate) server_exe: Option<PathBuf>,
}

/// `--pattern`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Pattern {
    Rr,
    Churn,
    Storm,
}

fn main() -> ExitCode {
    apps::main_with::<Args>("rr-bench", run)
}

pub(crate) fn run(args: &Args, matches: &ArgMatches) -> Result<ExitCode> {
    signals::install_signal_handlers();
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
pub(crate) struct Outcome {
    pub(crate) result: BenchResult,
    pub(crate) audit_error: Option<String>,
}

/// Prints the table, writes the JSON and picks the exit status.
pub(crate) fn finish(args: &Args, o: &Outcome) -> Result<ExitCode> {
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

/// One benchmark on the backend of `args`: its transport set up, the load driven over it, and
/// for xsk the stack's counters and frame audit.
pub(crate) fn bench(args: &Args, plan: &Plan) -> Result<Outcome> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::KV_GET_LEN;
    use rr_load::LoadMode;
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