//! flood-bench: resident memory and tail latency of rr-server under a SYN flood while it holds
//! thousands of idle connections.
//!
//! Per case it builds its own veth lab (peers keep veth's default offloads), starts rr-server
//! in ns_a, opens `--idle-conns` kernel TCP connections from ns_b, then for `--duration` sends
//! SYNs from random source addresses through one raw AF_PACKET socket in ns_b while one
//! established connection does closed-loop echo requests. The server's VmRSS/VmHWM is sampled
//! every second; afterwards every idle connection must still answer an echo request.
//!
//! Cases: the stack (xsk) and the kernel backend, each with and without the flood.

use std::net::SocketAddrV4;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, ensure, Context, Result};
use clap::{ArgMatches, Parser, ValueEnum};
use serde::Serialize;
use apps::parse_duration;
use xsk_lab::signals;
use xsk_lab::lab;

mod bound;
mod case;
mod echo;
mod idle;
mod report;
mod server;
mod syn;
mod threads;

use bound::MemoryBound;
use case::run_case;
use idle::hold;
use report::{table, verdicts};

/// Tag of this tool's labs (namespace and interface names).
pub(crate) const LAB_TAG: &str = "fb";

/// Host part of the stack's dedicated address on the lab /24.
pub(crate) const XSK_HOST: u8 = 100;

pub(crate) const PORT: u16 = 7000;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Case {
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
    pub(crate) fn xsk(self) -> bool {
        matches!(self, Case::XskBaseline | Case::XskFlood)
    }
    pub(crate) fn flood(self) -> bool {
        matches!(self, Case::XskFlood | Case::KernelFlood)
    }
    pub(crate) fn name(self) -> &'static str {
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
pub(crate) struct Args {
    /// How long each case measures (flood and latency).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "60s")]
    pub(crate) duration: Duration,
    /// Short run: 5 s per case and 2,000 idle connections (unless given explicitly).
    #[arg(long)]
    quick: bool,
    /// Idle kernel TCP connections opened from ns_b before the measurement.
    #[arg(long, value_name = "N", default_value_t = 20_000)]
    pub(crate) idle_conns: usize,
    /// SYNs per second; 0 = as fast as one raw socket sends.
    #[arg(long, value_name = "PPS", default_value_t = 0)]
    pub(crate) flood_pps: u64,
    /// Share of SYNs from random sources of 198.18.0.0/15 outside the lab subnet (off-link,
    /// the server has no route back), in percent.
    #[arg(long, value_name = "PERCENT", default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=100))]
    pub(crate) offlink_percent: u8,
    /// Cases to run, in this order (repeatable or comma separated).
    #[arg(long = "case", value_enum, value_delimiter = ',',
          default_values_t = [Case::XskBaseline, Case::XskFlood, Case::KernelBaseline, Case::KernelFlood])]
    cases: Vec<Case>,
    /// rr-server's --max-conns.
    #[arg(long, value_name = "N", default_value_t = 30_000)]
    pub(crate) max_conns: usize,
    /// rr-server's --buffer (the stack's per-connection receive and transmit buffer), e.g. 64k.
    #[arg(long, value_name = "BYTES", value_parser = apps::parse_bytes, default_value = "64k")]
    pub(crate) buffer: usize,
    /// Payload bytes of each echo request of the established connection.
    #[arg(long, value_name = "BYTES", default_value_t = 32)]
    pub(crate) req_size: usize,
    /// Random seed of the SYN sources (default: from the clock).
    #[arg(long)]
    pub(crate) seed: Option<u64>,
    /// rr-server binary [default: next to this one].
    #[arg(long, value_name = "PATH")]
    pub(crate) server: Option<PathBuf>,
    /// Write the results as JSON to this file.
    #[arg(long, value_name = "PATH")]
    pub(crate) json: Option<PathBuf>,
    /// Keep the per-case scratch directory (server output) instead of removing it.
    #[arg(long)]
    keep: bool,
    /// No progress lines on stderr.
    #[arg(long)]
    pub(crate) quiet: bool,
    /// Every this long, each idle connection sends one echo request (0 = truly idle). A
    /// workaround for stacks that close connections idle past their timeout; it also puts
    /// idle_conns / interval requests per second of background load on the server.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "0s")]
    pub(crate) idle_ping: Duration,
    /// Every this long during the measurement, a fresh kernel TCP connection from ns_b
    /// (a legitimate client arriving during the flood): connect, one echo request, close. Its
    /// time to establish is reported (0 = none).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "250ms")]
    pub(crate) fresh_every: Duration,
    /// Extra arguments for the xsk server (repeatable), e.g. --xsk-arg=--syn-shed=off.
    #[arg(long = "xsk-arg", value_name = "ARG", allow_hyphen_values = true)]
    pub(crate) xsk_args: Vec<String>,
    /// Attach an XDP program that passes every frame to ns_b's veth, in every case (both
    /// backends then have the same peer): a veth sends native XDP_TX into its peer only while
    /// the peer runs one, so this is what lets the stack's XDP program answer the flood's SYNs
    /// itself on veth (with --xsk-arg=--xdp-cookies=on); virtio_net needs nothing of the kind.
    #[arg(long)]
    pub(crate) peer_xdp: bool,
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

pub(crate) fn run(args: &Args, matches: &ArgMatches) -> Result<ExitCode> {
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
    signals::install_signal_handlers();
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
        if signals::interrupted() {
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
                if signals::interrupted() {
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

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_is_consistent() {
        Args::command().debug_assert();
    }
}
