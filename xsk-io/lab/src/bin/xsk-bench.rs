//! xsk-bench: packet rates of the copy-mode AF_XDP port, our equivalent of
//! the kernel threads' `xdpsock` runs (see shared/seeds).
//!
//! Without `--iface`, it builds its own lab (two network namespaces joined
//! by veth, addresses in 198.18.0.0/15), runs itself inside it, and removes
//! it on exit, Ctrl-C included.

#![warn(clippy::undocumented_unsafe_blocks)]

use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::{Parser, ValueEnum};
use serde::Serialize;

use xsk_io::port::{BusyPoll, Features, Knob, Port, PortConfig, PortStats, SteerSpec};
use xsk_io::socket::RingSizes;
use xsk_io::steer::SteerFlags;
use xsk_io::umem::{Frame, UmemConfig};
use xsk_io::AttachMode;
use xsk_lab::lab::{self, Lab, LabConfig};
use xsk_lab::pktgen::{self, FrameSpec, Proto};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
enum Mode {
    /// Send `--size`-byte frames as fast as possible (the seeds' headline run).
    Txonly,
    /// Receive steered TCP frames and drop them.
    Rxdrop,
    /// Receive steered TCP frames, swap MAC addresses, send them back.
    L2fwd,
    /// One TCP frame at a time to a reflector on the peer end and back: the round-trip
    /// time of two ports with nothing above them, the floor under a request/response
    /// exchange through the same rings (the lab runs the reflector, `pong`).
    Pingpong,
    /// The reflector of `pingpong`: like l2fwd, but it also swaps the IP addresses and
    /// ports, so the frame is steered to the sender's socket.
    Pong,
}

#[derive(Parser, Debug, Clone)]
#[command(
    version,
    about = "Packet rates and round trips of the copy-mode AF_XDP port (txonly, rxdrop, l2fwd, pingpong)",
    long_about = None,
    after_help = "\
Also: `xsk-bench restore IF` puts back what a killed xsk-io process left changed on IF (see
`xsk-bench restore --help`).

Exit status: 0 ok, 1 setup or run failed, 2 bad command line.

Logging: setup steps (device tuning, XDP attach, kernel knobs) and warnings go to stderr at
level info. RUST_LOG changes that: RUST_LOG=debug for everything, RUST_LOG=warn for warnings
only."
)]
struct Args {
    /// What to measure.
    #[arg(value_enum)]
    mode: Mode,
    /// Interface to use. Without it, a veth lab in two fresh network namespaces is built and removed.
    #[arg(long)]
    iface: Option<String>,
    /// RX/TX queue to bind.
    #[arg(long, default_value_t = 0)]
    queue: u32,
    /// Frame size in bytes, Ethernet header included, FCS excluded.
    #[arg(long, default_value_t = 64)]
    size: usize,
    /// Descriptors queued per batch (one publish and at most one sendto per batch).
    #[arg(long, default_value_t = 64)]
    batch: u32,
    /// Where the XDP program runs: skb (generic), drv (native) or auto.
    #[arg(long, default_value = "skb")]
    attach: AttachMode,
    /// XDP_MAX_TX_SKB_BUDGET: off, auto (= TX ring size) or a number (32..TX ring size).
    #[arg(long, default_value = "auto")]
    tx_budget: Knob,
    /// XDP_GENERIC_XMIT_BATCH: off, auto (32, capped by the budget) or a number.
    #[arg(long, default_value = "auto")]
    xmit_batch: Knob,
    /// Entries in each of the four rings (power of two).
    #[arg(long, default_value_t = 2048)]
    ring_size: u32,
    /// UMEM frames (default: twice the ring size).
    #[arg(long)]
    frames: Option<u32>,
    /// UMEM frame size (2048 or 4096).
    #[arg(long, default_value_t = 4096)]
    frame_size: u32,
    /// Busy polling: SO_BUSY_POLL microseconds (opt-in; spins a core).
    #[arg(long)]
    busy_poll: Option<u32>,
    /// SO_BUSY_POLL_BUDGET with --busy-poll.
    #[arg(long, default_value_t = 64)]
    busy_budget: u32,
    /// How long to run, e.g. 5s, 1m (the first second is warm-up and not counted in the median).
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = parse_duration)]
    duration: Duration,
    /// Write the summary as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Destination MAC of generated frames (default: one nobody owns, so the peer kernel drops them at once).
    #[arg(long)]
    dst_mac: Option<String>,
    /// Source and destination IPv4 of generated frames.
    #[arg(long, default_value = "198.18.0.1")]
    src_ip: Ipv4Addr,
    #[arg(long, default_value = "198.18.0.2")]
    dst_ip: Ipv4Addr,
    /// TCP port steered to the socket in rxdrop/l2fwd (and targeted by --proto tcp).
    #[arg(long, default_value_t = 9000)]
    port: u16,
    /// Protocol of generated frames (pingpong: always tcp).
    #[arg(long, default_value = "udp", value_parser = ["udp", "tcp"])]
    proto: String,
    /// pingpong/pong: send with the TCP checksum left to the kernel (AF_XDP TX metadata, as
    /// the stack does by default), the pseudo-header sum in the checksum field.
    #[arg(long)]
    tx_csum: bool,
    /// Don't change device settings (offloads, channels); only check them.
    #[arg(long)]
    no_tune: bool,
    /// Print no per-second lines.
    #[arg(long)]
    quiet: bool,
}

#[derive(Serialize)]
struct Summary {
    mode: Mode,
    size: usize,
    attach: String,
    batch: u32,
    /// Median of the per-second rates after the first second.
    pps: f64,
    pps_mean: f64,
    /// Rate of the other side where the lab has one (generator for rx modes, peer kernel for txonly).
    peer_pps: Option<f64>,
    samples: Vec<f64>,
    cpu_ns_per_pkt: f64,
    features: Features,
    stats: PortStats,
    audit: String,
    /// Round trips (pingpong).
    #[serde(skip_serializing_if = "Option::is_none")]
    rtt: Option<Rtt>,
}

/// Round-trip times of `pingpong`, in nanoseconds.
#[derive(Serialize)]
struct Rtt {
    count: u64,
    /// Frames not back within 100 ms (sent again).
    lost: u64,
    p50_ns: u64,
    p90_ns: u64,
    p99_ns: u64,
    p999_ns: u64,
    mean_ns: f64,
}

impl Rtt {
    fn from_samples(mut s: Vec<u32>, lost: u64) -> Option<Rtt> {
        if s.is_empty() {
            return None;
        }
        s.sort_unstable();
        let q = |f: f64| u64::from(s[((s.len() - 1) as f64 * f).round() as usize]);
        let mean_ns = s.iter().map(|&v| f64::from(v)).sum::<f64>() / s.len() as f64;
        Some(Rtt { count: s.len() as u64, lost, p50_ns: q(0.5), p90_ns: q(0.9), p99_ns: q(0.99), p999_ns: q(0.999), mean_ns })
    }
}

/// Durations the way every binary of the project takes them: `5s`, `500ms`, `1m`.
fn parse_duration(s: &str) -> Result<Duration, String> {
    match humantime::parse_duration(s.trim()) {
        Ok(d) if !d.is_zero() => Ok(d),
        Ok(_) => Err("the duration must be positive".into()),
        Err(e) => Err(format!("invalid duration {s:?}: {e} (examples: 5s, 500ms, 1m)")),
    }
}

fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()))
        .with_writer(std::io::stderr)
        .init();
    // `xsk-bench restore IF` is its own small command line (the benchmark's has a positional mode).
    if std::env::args().nth(1).as_deref() == Some("restore") {
        if let Err(e) = restore(RestoreArgs::parse_from(std::iter::once("xsk-bench restore".to_string()).chain(std::env::args().skip(2)))) {
            eprintln!("xsk-bench restore: error: {e:#}");
            std::process::exit(1);
        }
        return;
    }
    if let Err(e) = run(Args::parse()) {
        eprintln!("xsk-bench: error: {e:#}");
        std::process::exit(1);
    }
}

#[derive(Parser, Debug)]
#[command(
    name = "xsk-bench restore",
    about = "Put an interface back as an xsk-io process that did not exit cleanly (SIGKILL, OOM kill, abort) left it",
    long_about = "Put an interface back as an xsk-io process that did not exit cleanly (SIGKILL, OOM kill, abort) left it.\n\n\
Every xsk-io port records the original offloads, channels, MTU and sysctls it changes in a state file under \
/run/xsk-io (or $XSK_IO_STATE_DIR) before changing them. The next port on the interface restores them by itself; \
this command does only that. Run it in the interface's network namespace (ip netns exec NS xsk-bench restore IF). \
It refuses while the recording process still runs."
)]
struct RestoreArgs {
    /// The interface to restore.
    ifname: String,
}

fn restore(args: RestoreArgs) -> Result<()> {
    let r = xsk_io::state::restore(&args.ifname)?;
    match r.pid {
        None if xsk_io::sys::if_nametoindex(&args.ifname).is_err() => {
            println!("{}: no state recorded, and no such interface in this network namespace", args.ifname)
        }
        None => println!("{}: no state recorded: nothing to restore", args.ifname),
        Some(pid) => {
            println!("{}: restored the state recorded by pid {pid} ({} change(s))", args.ifname, r.steps.len());
            for s in &r.steps {
                println!("  {s}");
            }
        }
    }
    Ok(())
}

fn run(args: Args) -> Result<()> {
    lab::install_signal_handlers();
    match args.iface.clone() {
        Some(ifname) => bench(&args, &ifname),
        None => in_lab(&args),
    }
}

/// Builds the lab, runs this binary inside it (and a generator for the RX
/// modes), then tears everything down.
fn in_lab(args: &Args) -> Result<()> {
    lab::sweep_stale("xb");
    let lab = Lab::new(&LabConfig { prefix: "xb".into(), ..LabConfig::default() }).context("building the veth lab")?;
    eprintln!(
        "lab: {} {} ({}) <-> {} {} ({})",
        lab.ns_a.name, lab.if_a, lab.addr_a, lab.ns_b.name, lab.if_b, lab.addr_b
    );
    let exe = std::env::current_exe()?;
    let mut gen: Option<Child> = None;
    let mut gen_json = None;
    if args.mode == Mode::Pingpong {
        // The reflector on the peer end, polled the same way as this side.
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &lab.ns_b.name]).arg(&exe).args(["pong", "--iface", &lab.if_b, "--quiet"]);
        c.args(["--attach", &args.attach.to_string(), "--ring-size", &args.ring_size.to_string()]);
        c.args(["--src-ip", &lab.addr_b.to_string(), "--dst-ip", &lab.addr_a.to_string(), "--port", &args.port.to_string()]);
        if args.tx_csum {
            c.arg("--tx-csum");
        }
        if let Some(b) = args.busy_poll {
            c.args(["--busy-poll", &b.to_string(), "--busy-budget", &args.busy_budget.to_string()]);
        }
        c.args(["--duration", &format!("{}ms", (args.duration + Duration::from_secs(3)).as_millis())]);
        gen = Some(c.stdout(Stdio::null()).spawn().context("starting the reflector")?);
        std::thread::sleep(Duration::from_millis(700));
    } else if args.mode != Mode::Txonly {
        // The generator: a txonly port on the peer end sending TCP to our steered port.
        let j = std::env::temp_dir().join(format!("xsk-bench-gen-{}.json", std::process::id()));
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &lab.ns_b.name]).arg(&exe).args([
            "txonly",
            "--iface",
            &lab.if_b,
            "--proto",
            "tcp",
            "--quiet",
        ]);
        c.args(["--size", &args.size.to_string(), "--batch", &args.batch.to_string()]);
        c.args(["--dst-mac", &pktgen::format_mac(&lab.mac_a)]);
        c.args(["--src-ip", &lab.addr_b.to_string(), "--dst-ip", &lab.addr_a.to_string()]);
        c.args(["--port", &args.port.to_string(), "--duration", &format!("{}ms", (args.duration + Duration::from_secs(2)).as_millis())]);
        c.arg("--json").arg(&j);
        gen = Some(c.stdout(Stdio::null()).spawn().context("starting the generator")?);
        gen_json = Some(j);
        std::thread::sleep(Duration::from_millis(700));
    }
    let mut c = Command::new("ip");
    c.args(["netns", "exec", &lab.ns_a.name]).arg(&exe);
    c.arg(match args.mode {
        Mode::Txonly => "txonly",
        Mode::Rxdrop => "rxdrop",
        Mode::L2fwd => "l2fwd",
        Mode::Pingpong => "pingpong",
        Mode::Pong => "pong",
    });
    if args.mode == Mode::Pingpong && args.dst_mac.is_none() {
        c.args(["--dst-mac", &pktgen::format_mac(&lab.mac_b)]);
    }
    c.args(["--iface", &lab.if_a, "--queue", &args.queue.to_string()]);
    c.args(["--size", &args.size.to_string(), "--batch", &args.batch.to_string()]);
    c.args(["--attach", &args.attach.to_string()]);
    c.args(["--tx-budget", &knob_arg(args.tx_budget), "--xmit-batch", &knob_arg(args.xmit_batch)]);
    c.args(["--ring-size", &args.ring_size.to_string(), "--frame-size", &args.frame_size.to_string()]);
    if let Some(f) = args.frames {
        c.args(["--frames", &f.to_string()]);
    }
    if let Some(b) = args.busy_poll {
        c.args(["--busy-poll", &b.to_string(), "--busy-budget", &args.busy_budget.to_string()]);
    }
    c.args(["--duration", &format!("{}ms", args.duration.as_millis()), "--port", &args.port.to_string()]);
    c.args(["--src-ip", &lab.addr_a.to_string(), "--dst-ip", &lab.addr_b.to_string()]);
    if let Some(m) = &args.dst_mac {
        c.args(["--dst-mac", m]);
    }
    if args.quiet {
        c.arg("--quiet");
    }
    if args.no_tune {
        c.arg("--no-tune");
    }
    if args.tx_csum {
        c.arg("--tx-csum");
    }
    let j = std::env::temp_dir().join(format!("xsk-bench-{}.json", std::process::id()));
    c.arg("--json").arg(&j);
    let rx_before = read_counter(&lab, "rx_packets");
    let status = c.status().context("running the benchmark in the lab")?;
    let rx_after = read_counter(&lab, "rx_packets");
    if let Some(mut g) = gen {
        // SIGINT, not SIGKILL: the generator writes its summary and detaches cleanly.
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(g.id() as i32, libc::SIGINT) };
        let _ = g.wait();
    }
    if !status.success() {
        bail!("benchmark inside the lab failed ({status})");
    }
    let mut summary: serde_json::Value = serde_json::from_slice(&std::fs::read(&j)?)?;
    let _ = std::fs::remove_file(&j);
    let peer = match (&gen_json, args.mode) {
        (Some(gj), _) => {
            let v: Option<serde_json::Value> = std::fs::read(gj).ok().and_then(|b| serde_json::from_slice(&b).ok());
            let _ = std::fs::remove_file(gj);
            v.and_then(|v| v["pps"].as_f64())
        }
        (None, Mode::Txonly) => match (rx_before, rx_after) {
            (Some(a), Some(b)) => Some((b - a) as f64 / args.duration.as_secs_f64()),
            _ => None,
        },
        _ => None,
    };
    summary["peer_pps"] = serde_json::json!(peer);
    if let Some(p) = peer {
        let what = if args.mode == Mode::Txonly { "peer kernel received (mean)" } else { "generator sent (median)" };
        println!("{what:>28}: {}", fmt_rate(p));
    }
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_vec_pretty(&summary)?)?;
        println!("wrote {}", path.display());
    }
    Ok(())
}

fn read_counter(lab: &Lab, name: &str) -> Option<u64> {
    lab.ns_b
        .run(&["cat", &format!("/sys/class/net/{}/statistics/{name}", lab.if_b)])
        .ok()
        .and_then(|s| s.trim().parse().ok())
}

fn knob_arg(k: Knob) -> String {
    match k {
        Knob::Off => "off".into(),
        Knob::Auto => "auto".into(),
        Knob::Value(v) => v.to_string(),
    }
}

fn cpu_time() -> Duration {
    // SAFETY: getrusage writes one rusage struct into the zeroed value.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut ru);
        ru
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

fn fmt_rate(pps: f64) -> String {
    let n = pps.round() as u64;
    let s = n.to_string();
    let mut out = String::new();
    for (i, ch) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    format!("{out} pps")
}

fn bench(args: &Args, ifname: &str) -> Result<()> {
    // The reflected frame must be steered back, and only TCP is.
    let tcp = args.proto == "tcp" || matches!(args.mode, Mode::Pingpong | Mode::Pong);
    let proto = if tcp { Proto::Tcp } else { Proto::Udp };
    if args.size < pktgen::min_size(proto) || args.size > args.frame_size as usize - 256 {
        bail!("--size {} out of range ({}..={})", args.size, pktgen::min_size(proto), args.frame_size - 256);
    }
    let mut cfg = PortConfig::new(ifname);
    cfg.queue = args.queue;
    cfg.attach = args.attach;
    cfg.tx_budget = args.tx_budget;
    cfg.xmit_batch = args.xmit_batch;
    cfg.rings = RingSizes { fill: args.ring_size, comp: args.ring_size, rx: args.ring_size, tx: args.ring_size };
    cfg.umem = UmemConfig {
        frame_count: args.frames.unwrap_or(args.ring_size * 2),
        frame_size: args.frame_size,
        ..UmemConfig::default()
    };
    cfg.busy_poll = args.busy_poll.map(|usecs| BusyPoll { usecs, budget: args.busy_budget });
    cfg.tune = !args.no_tune;
    match args.mode {
        Mode::Txonly => {}
        // The reflected frame comes back to our source port.
        Mode::Pingpong => {
            cfg.steer = Some(SteerSpec { addr: args.src_ip, tcp_ports: vec![PING_PORT], flags: SteerFlags::default() })
        }
        _ => cfg.steer = Some(SteerSpec { addr: args.src_ip, tcp_ports: vec![args.port], flags: SteerFlags::default() }),
    }
    let mut port = Port::open(&cfg).with_context(|| format!("opening {ifname} queue {}", args.queue))?;
    port.log_features();

    let my_mac = iface_mac(ifname).unwrap_or([2, 0, 0, 0, 0, 1]);
    let dst_mac = match &args.dst_mac {
        Some(m) => pktgen::parse_mac(m).map_err(anyhow::Error::msg)?,
        None => [0x02, 0xde, 0xad, 0xbe, 0xef, 0x01],
    };
    let spec = FrameSpec {
        src_mac: my_mac,
        dst_mac,
        src_ip: args.src_ip,
        dst_ip: args.dst_ip,
        src_port: PING_PORT,
        dst_port: args.port,
        proto,
        size: args.size,
    };
    if args.mode == Mode::Txonly {
        prewrite(&mut port, &spec);
    }

    let batch = args.batch.max(1) as usize;
    let mut rx: Vec<Frame> = Vec::with_capacity(batch);
    let start = Instant::now();
    let cpu0 = cpu_time();
    let end = start + args.duration;
    let mut next_tick = start + Duration::from_secs(1);
    let mut last = 0u64;
    let mut samples = Vec::new();
    let mut poll_fds = [libc::pollfd { fd: std::os::fd::AsRawFd::as_raw_fd(&std::os::fd::AsFd::as_fd(&port)), events: libc::POLLIN, revents: 0 }];
    let count = |p: &Port| {
        let s = p.stats().port;
        match args.mode {
            Mode::Txonly => s.completions,
            Mode::Rxdrop | Mode::L2fwd | Mode::Pingpong | Mode::Pong => s.rx_frames,
        }
    };
    let mut rtts: Vec<u32> = Vec::new();
    let mut lost = 0u64;
    let mut seq = 0u64;
    while !lab::interrupted() {
        match args.mode {
            Mode::Txonly => {
                let room = port.tx_space(batch as u32).min(batch as u32);
                for _ in 0..room {
                    let Some(mut f) = port.alloc() else { break };
                    f.set_len(args.size);
                    if let Err(f) = port.send(f) {
                        port.release(f);
                        break;
                    }
                }
                port.flush()?;
            }
            Mode::Pingpong => {
                seq += 1;
                match ping(&mut port, &spec, &mut rx, args.tx_csum, seq)? {
                    Ping::Back(rtt) if rtts.len() < MAX_SAMPLES => {
                        rtts.push(rtt.as_nanos().min(u128::from(u32::MAX)) as u32)
                    }
                    Ping::Back(_) | Ping::NotSent => {}
                    Ping::Lost => lost += 1,
                }
            }
            Mode::Rxdrop | Mode::L2fwd | Mode::Pong => {
                let n = port.recv(&mut rx, batch);
                if n == 0 {
                    port.flush()?;
                    if args.busy_poll.is_none() {
                        // Wait for RX with a short timeout so the loop notices the clock.
                        // SAFETY: one valid pollfd for the call's duration.
                        unsafe { libc::poll(poll_fds.as_mut_ptr(), 1, 10) };
                    }
                }
                for mut f in rx.drain(..) {
                    if args.mode == Mode::Rxdrop {
                        port.release(f);
                        continue;
                    }
                    let d = port.umem().data_mut(&mut f);
                    if d.len() >= 12 {
                        let (dst, src) = d.split_at_mut(6);
                        dst.swap_with_slice(&mut src[..6]);
                    }
                    if args.mode == Mode::Pong {
                        swap_ip_and_ports(d);
                        if args.tx_csum {
                            partial_tcp_csum(d);
                        }
                    }
                    if let Err(f) = send(&mut port, f, args.tx_csum && args.mode == Mode::Pong) {
                        port.release(f);
                    }
                }
                if args.mode != Mode::Rxdrop {
                    port.flush()?;
                }
            }
        }
        let now = Instant::now();
        if now >= next_tick {
            let c = count(&port);
            let rate = (c - last) as f64 / (now - (next_tick - Duration::from_secs(1))).as_secs_f64();
            last = c;
            samples.push(rate);
            if !args.quiet {
                let s = port.stats();
                println!(
                    "{:>4}s {:>8} {:>16}  kicks {:>9} retries {:>7} xdp rx_dropped {} rx_ring_full {} fill_empty {}",
                    samples.len(),
                    format!("{:?}", args.mode).to_lowercase(),
                    fmt_rate(rate),
                    s.port.kicks,
                    s.port.kick_retries,
                    s.xdp.rx_dropped,
                    s.xdp.rx_ring_full,
                    s.xdp.rx_fill_ring_empty_descs
                );
            }
            next_tick += Duration::from_secs(1);
            if now >= end {
                break;
            }
        }
    }
    let elapsed = start.elapsed().as_secs_f64();
    let cpu = (cpu_time() - cpu0).as_secs_f64();
    let total = count(&port);
    let _ = port.drain_tx(Duration::from_secs(1));
    let audit = match port.audit() {
        Ok(a) => format!("ok {a:?}"),
        Err(e) => format!("FAILED: {e}"),
    };
    let mut sorted: Vec<f64> = samples.iter().skip(1).copied().collect();
    if sorted.is_empty() {
        sorted = samples.clone();
    }
    sorted.sort_by(|a, b| a.total_cmp(b));
    let median = if sorted.is_empty() { total as f64 / elapsed } else { sorted[sorted.len() / 2] };
    let summary = Summary {
        mode: args.mode,
        size: args.size,
        attach: port.features().attach.map_or("none".into(), |m| m.to_string()),
        batch: args.batch,
        pps: median,
        pps_mean: total as f64 / elapsed,
        peer_pps: None,
        samples,
        cpu_ns_per_pkt: if total > 0 { cpu * 1e9 / total as f64 } else { 0.0 },
        features: port.features().clone(),
        stats: port.stats(),
        audit,
        rtt: Rtt::from_samples(rtts, lost),
    };
    println!("---- {:?} {} bytes on {} ({})", args.mode, args.size, ifname, port.features());
    if let Some(r) = &summary.rtt {
        let us = |ns: u64| ns as f64 / 1000.0;
        println!(
            "{:>28}: p50 {:.2} us  p90 {:.2}  p99 {:.2}  p99.9 {:.2}  mean {:.2}  ({} round trips, {} lost)",
            "round trip",
            us(r.p50_ns),
            us(r.p90_ns),
            us(r.p99_ns),
            us(r.p999_ns),
            r.mean_ns / 1000.0,
            r.count,
            r.lost
        );
    }
    println!("{:>28}: {}", "median rate", fmt_rate(summary.pps));
    println!("{:>28}: {}", "mean rate", fmt_rate(summary.pps_mean));
    println!("{:>28}: {:.1} ns", "CPU per packet (process)", summary.cpu_ns_per_pkt);
    println!("{:>28}: {} / {}", "kicks / retries", summary.stats.port.kicks, summary.stats.port.kick_retries);
    if args.mode == Mode::Txonly && port.features().driver == "veth" {
        println!("{:>28}: on veth the peer's receive work runs inside our sendto (about half the core)", "note");
    }
    println!("{:>28}: {}", "frame accounting", summary.audit);
    if let Some(p) = &args.json {
        std::fs::write(p, serde_json::to_vec_pretty(&summary)?)?;
    }
    if summary.audit.starts_with("FAILED") {
        bail!("frame accounting failed: {}", summary.audit);
    }
    if args.mode == Mode::Pingpong {
        match &summary.rtt {
            None => bail!("pingpong: no frame came back (is `pong` running on the peer end?)"),
            Some(r) if r.lost * 100 > r.count => bail!("pingpong: {} of {} frames did not come back", r.lost, r.count + r.lost),
            Some(_) => {}
        }
    }
    Ok(())
}

/// The source port of pingpong's frames, steered back to its socket.
const PING_PORT: u16 = 4000;
/// Round trips kept for the percentiles (4 bytes each).
const MAX_SAMPLES: usize = 20_000_000;

/// What became of one ping.
enum Ping {
    /// Its reply came back after this long.
    Back(Duration),
    /// No reply within 100 ms.
    Lost,
    /// Not sent: no free frame or no TX ring room (completions were taken back).
    NotSent,
}

/// Where the ping's sequence number goes: the first 8 payload bytes after the
/// Ethernet, IPv4 and TCP headers, which the reflector leaves alone.
const SEQ_AT: usize = 54;

/// One round trip: a frame out carrying `seq`, busy-polling the RX ring until the reply
/// with the same `seq` is back (100 ms at most). A late reply to an earlier ping is
/// released and not taken for this one's.
fn ping(port: &mut Port, spec: &FrameSpec, rx: &mut Vec<Frame>, tx_csum: bool, seq: u64) -> Result<Ping> {
    let Some(mut f) = port.alloc() else {
        // Every frame in flight or in a ring: take completions back first.
        port.flush()?;
        return Ok(Ping::NotSent);
    };
    let len = pktgen::build(spec, port.umem().buf_mut(&mut f));
    f.set_len(len);
    {
        let d = port.umem().data_mut(&mut f);
        stamp(d, seq);
        if tx_csum {
            partial_tcp_csum(d);
        }
    }
    let t0 = Instant::now();
    if let Err(f) = send(port, f, tx_csum) {
        port.release(f);
        port.flush()?;
        return Ok(Ping::NotSent);
    }
    port.flush()?;
    let deadline = t0 + Duration::from_millis(100);
    loop {
        if port.recv(rx, 1) > 0 {
            let rtt = t0.elapsed();
            let mut ours = false;
            for mut f in rx.drain(..) {
                let d = port.umem().data_mut(&mut f);
                ours |= d.len() < SEQ_AT + 8 || d[SEQ_AT..SEQ_AT + 8] == seq.to_be_bytes();
                port.release(f);
            }
            if ours {
                return Ok(Ping::Back(rtt));
            }
        }
        if lab::interrupted() || Instant::now() > deadline {
            return Ok(Ping::Lost);
        }
        std::hint::spin_loop();
    }
}

/// Writes `seq` at [`SEQ_AT`] of a TCP frame long enough for it, and its checksum again.
fn stamp(d: &mut [u8], seq: u64) {
    if d.len() < SEQ_AT + 8 {
        return;
    }
    d[SEQ_AT..SEQ_AT + 8].copy_from_slice(&seq.to_be_bytes());
    d[50..52].fill(0);
    let c = pktgen::checksum(&d[34..], u32::from(pseudo_sum(d)));
    d[50..52].copy_from_slice(&c.to_be_bytes());
}

/// Queues `f`, with the TCP checksum offloaded if `tx_csum` (TX metadata: the checksum at
/// offset 16 of the TCP header after a 14-byte Ethernet and a 20-byte IPv4 header).
fn send(port: &mut Port, f: Frame, tx_csum: bool) -> Result<(), Frame> {
    if tx_csum {
        port.split().1.send_csum(f, 34, 16)
    } else {
        port.send(f)
    }
}

/// Writes the pseudo-header sum (not complemented) into the TCP checksum of an
/// Ethernet/IPv4 (20-byte header)/TCP frame: what a CHECKSUM_PARTIAL packet carries.
fn partial_tcp_csum(d: &mut [u8]) {
    if d.len() < 54 || d[12..14] != [0x08, 0x00] || d[14] != 0x45 || d[23] != 6 {
        return;
    }
    let sum = pseudo_sum(d);
    d[50..52].copy_from_slice(&sum.to_be_bytes());
}

/// The folded (not complemented) TCP pseudo-header sum of an Ethernet/IPv4 (20-byte
/// header) frame: addresses, protocol, TCP length from the IP total length.
fn pseudo_sum(d: &[u8]) -> u16 {
    let tcp_len = u32::from(u16::from_be_bytes([d[16], d[17]])).saturating_sub(20);
    // `checksum` complements its folded sum: undone here.
    !pktgen::checksum(&d[26..34], 6 + tcp_len)
}

/// Swaps the IPv4 source and destination and the TCP/UDP ports of an Ethernet frame
/// (checksums stay valid: their sums do not depend on the order).
fn swap_ip_and_ports(d: &mut [u8]) {
    if d.len() < 14 + 20 + 4 || d[12..14] != [0x08, 0x00] {
        return;
    }
    let ihl = usize::from(d[14] & 0x0f) * 4;
    if ihl < 20 || d.len() < 14 + ihl + 4 {
        return;
    }
    for i in 0..4 {
        d.swap(26 + i, 30 + i);
    }
    let l4 = 14 + ihl;
    for i in 0..2 {
        d.swap(l4 + i, l4 + 2 + i);
    }
}

/// Writes the frame template once into every frame: frames are reused
/// unchanged after completion, so the send loop touches no packet bytes.
fn prewrite(port: &mut Port, spec: &FrameSpec) {
    let mut held = Vec::with_capacity(port.umem().frame_count() as usize);
    while let Some(mut f) = port.alloc() {
        pktgen::build(spec, port.umem().buf_mut(&mut f));
        held.push(f);
    }
    for f in held {
        port.release(f);
    }
}

fn iface_mac(ifname: &str) -> Option<[u8; 6]> {
    let s = std::fs::read_to_string(format!("/sys/class/net/{ifname}/address")).ok()?;
    pktgen::parse_mac(s.trim()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// A ping's frame from 198.18.0.1 to `dst_ip`, `size` bytes, and the spec it was built from.
    fn ping_frame(dst_ip: Ipv4Addr, size: usize) -> (FrameSpec, Vec<u8>) {
        let spec = FrameSpec {
            src_mac: [2, 0, 0, 0, 0, 1],
            dst_mac: [2, 0, 0, 0, 0, 2],
            src_ip: Ipv4Addr::new(198, 18, 0, 1),
            dst_ip,
            src_port: PING_PORT,
            dst_port: 9000,
            proto: Proto::Tcp,
            size,
        };
        let mut a = vec![0u8; size];
        pktgen::build(&spec, &mut a);
        (spec, a)
    }

    #[test]
    fn pong_swaps_addresses_and_ports_and_keeps_the_checksums() {
        let (spec, mut a) = ping_frame(Ipv4Addr::new(198, 18, 0, 2), 118);
        let mut b = a.clone();
        swap_ip_and_ports(&mut b);
        let back = FrameSpec { src_ip: spec.dst_ip, dst_ip: spec.src_ip, src_port: 9000, dst_port: PING_PORT, ..spec };
        let mut c = vec![0u8; 118];
        pktgen::build(&back, &mut c);
        // What the reflector sends back is the frame built the other way round (MACs aside).
        assert_eq!(b[12..], c[12..]);
        // Not IPv4, or too short: left alone.
        let mut arp = a.clone();
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        let before = arp.clone();
        swap_ip_and_ports(&mut arp);
        assert_eq!(arp, before);
        swap_ip_and_ports(&mut a[..20]);
    }

    #[test]
    fn the_partial_checksum_completes_to_the_full_one() {
        let (_, a) = ping_frame(Ipv4Addr::new(198, 18, 7, 9), 121);
        let full = u16::from_be_bytes([a[50], a[51]]);
        // A stamped frame carries a valid checksum: the TCP segment sums to zero with its
        // pseudo header.
        let mut st = a.clone();
        stamp(&mut st, 0x0102_0304_0506_0708);
        assert_eq!(st[SEQ_AT..SEQ_AT + 8], [1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(pktgen::checksum(&st[34..], u32::from(pseudo_sum(&st))), 0);
        let mut b = a.clone();
        partial_tcp_csum(&mut b);
        assert_ne!(b[50..52], a[50..52]);
        // What the device (or the kernel) does with CHECKSUM_PARTIAL: sum from csum_start
        // with the pseudo-header sum in the field, and write the complement there.
        assert_eq!(pktgen::checksum(&b[34..], 0), full);
    }

    #[test]
    fn round_trip_percentiles() {
        assert!(Rtt::from_samples(vec![], 3).is_none());
        let r = Rtt::from_samples((1..=1000).rev().collect(), 2).unwrap();
        assert_eq!((r.count, r.lost, r.p50_ns, r.p99_ns, r.p999_ns), (1000, 2, 501, 990, 999));
        assert_eq!(r.mean_ns, 500.5);
    }

    #[test]
    fn cli_conventions() {
        Args::command().debug_assert();
        // Long options only (no short flag that means something else in another binary).
        assert!(Args::command().get_arguments().all(|a| a.get_short().is_none()));
        let a = Args::try_parse_from(["xsk-bench", "txonly", "--duration", "1m30s"]).unwrap();
        assert_eq!(a.duration, Duration::from_secs(90));
        for bad in ["5", "0s", "soon"] {
            assert!(Args::try_parse_from(["xsk-bench", "txonly", "--duration", bad]).is_err(), "{bad}");
        }
    }
}
