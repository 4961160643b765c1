//! Shared pieces of the `rr-server` and `rr-bench` binaries: command-line options common to
//! both (backend, AF_XDP knobs, durations), the KV load workload, the progress wrapper for
//! long runs, and the result records (`--json`) with their human-readable table.

use std::fmt::{self, Write as _};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, ToSocketAddrs};
use std::path::Path;
use std::str::FromStr;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use bytes::BytesMut;
use clap::parser::ValueSource;
use clap::{ArgMatches, Args, ValueEnum};
use serde::{Deserialize, Serialize};

pub mod cpu;
pub mod netrx;
pub mod plot;
pub mod resp;
pub mod stats;
pub mod table;

use crate::cpu::{pid_cpu, CpuSnapshot};
use rr_load::Workload;
use stack::rr::{KvRequest, KvResponse, KvStatus};
use stack::xsk::{AddrMode, Faults, PartialCsum, Recovery, RecoveryStats, XskConfig};
use xsk_io::port::{BusyPoll, Knob};
use xsk_io::socket::RingSizes;
use xsk_io::umem::UmemConfig;
use xsk_io::AttachMode;

// ---------------------------------------------------------------------------------------------
// Common options
// ---------------------------------------------------------------------------------------------

/// Which TCP/IP stack carries the connections.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// smoltcp over an AF_XDP copy-mode port (needs --iface, root).
    Xsk,
    /// The kernel's TCP stack (epoll).
    Kernel,
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Backend::Xsk => "xsk",
            Backend::Kernel => "kernel",
        })
    }
}

/// The request/response protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Service {
    /// Echo with framing: u32 big-endian length, then the payload; the reply is the same frame.
    Echo,
    /// In-memory key-value store (GET/SET/DEL) over the same length-prefixed framing.
    Kv,
    /// RFC 862 echo: a plain byte stream sent back unchanged (works with nc/socat).
    TcpEcho,
    /// Redis protocol (RESP2, and RESP3 after HELLO 3): strings, hashes, expiry and MULTI/EXEC,
    /// for redis-cli, redis-benchmark and client libraries (README: the exact command list).
    Resp,
}

impl fmt::Display for Service {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Service::Echo => "echo",
            Service::Kv => "kv",
            Service::TcpEcho => "tcp-echo",
            Service::Resp => "resp",
        })
    }
}

/// `--addr`: `shared` or a dedicated `A.B.C.D/LEN`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AddrArg {
    Shared,
    Dedicated { addr: Ipv4Addr, prefix_len: u8 },
}

impl AddrArg {
    pub fn mode(self) -> AddrMode {
        match self {
            AddrArg::Shared => AddrMode::Shared,
            AddrArg::Dedicated { addr, prefix_len } => AddrMode::Dedicated { addr, prefix_len },
        }
    }
}

impl fmt::Display for AddrArg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AddrArg::Shared => f.write_str("shared"),
            AddrArg::Dedicated { addr, prefix_len } => write!(f, "{addr}/{prefix_len}"),
        }
    }
}

impl FromStr for AddrArg {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        if s == "shared" {
            return Ok(AddrArg::Shared);
        }
        let usage = || format!("expected `shared` or A.B.C.D/LEN, got {s:?}");
        let (addr, len) = s.split_once('/').ok_or_else(usage)?;
        let addr: Ipv4Addr = addr.parse().map_err(|_| usage())?;
        let prefix_len: u8 = len.parse().map_err(|_| usage())?;
        if !(1..=32).contains(&prefix_len) {
            return Err(format!("prefix length {prefix_len} out of range 1..=32"));
        }
        if addr.is_unspecified() || addr.is_multicast() || addr.is_broadcast() {
            return Err(format!("{addr} cannot be a host address"));
        }
        Ok(AddrArg::Dedicated { addr, prefix_len })
    }
}

/// Parses a duration the humantime way: `10s`, `250ms`, `1m30s`, `500us` (`0` is zero). Every
/// binary of the project takes durations like this.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s.trim()).map_err(|e| format!("invalid duration {s:?}: {e} (examples: 10s, 250ms, 1m30s)"))
}

/// Parses `HOST:PORT` and resolves the host (a name or an IPv4 address) to its first IPv4
/// address; the stacks speak IPv4 only.
pub fn parse_connect(s: &str) -> Result<SocketAddrV4, String> {
    if let Ok(a) = s.parse::<SocketAddrV4>() {
        return Ok(a);
    }
    let Some((host, port)) = s.rsplit_once(':') else {
        return Err(format!("expected HOST:PORT, got {s:?}"));
    };
    if host.is_empty() || port.parse::<u16>().is_err() {
        return Err(format!("expected HOST:PORT with a port 0..65535, got {s:?}"));
    }
    let addrs: Vec<SocketAddr> = s.to_socket_addrs().map_err(|e| format!("cannot resolve {host:?}: {e}"))?.collect();
    addrs
        .iter()
        .find_map(|a| match a {
            SocketAddr::V4(v4) => Some(*v4),
            SocketAddr::V6(_) => None,
        })
        .ok_or_else(|| format!("{host:?} has no IPv4 address (the stacks speak IPv4 only)"))
}

/// A command line that parsed but does not make sense (e.g. `--depth 0`, `--backend xsk`
/// without `--iface`). [`main_with`] reports it like clap's own usage errors: exit status 2.
#[derive(Debug)]
pub struct UsageError(pub String);

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// Fails with a [`UsageError`] unless `cond` holds.
#[macro_export]
macro_rules! usage_ensure {
    ($cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err($crate::UsageError(format!($($fmt)+)).into());
        }
    };
}

/// Fails with a [`UsageError`].
#[macro_export]
macro_rules! usage_bail {
    ($($fmt:tt)+) => {
        return Err($crate::UsageError(format!($($fmt)+)).into())
    };
}

/// The `after_help` paragraph every binary shares: where its log goes and how to get more.
pub const LOG_HELP: &str = "\
Logging: setup steps (device tuning, XDP attach, kernel knobs) and warnings go to stderr at
level info. RUST_LOG changes that: RUST_LOG=debug for everything, RUST_LOG=xsk_io=debug for the
port only, RUST_LOG=warn for warnings only.";

/// Parses a byte count: `64`, `16k`, `4M` (binary multiples).
pub fn parse_bytes(s: &str) -> Result<usize, String> {
    let s = s.trim();
    let (num, mult) = match s.char_indices().last() {
        Some((i, 'k' | 'K')) => (&s[..i], 1usize << 10),
        Some((i, 'm' | 'M')) => (&s[..i], 1 << 20),
        _ => (s, 1),
    };
    let n: usize = num.parse().map_err(|_| format!("invalid byte count {s:?} (examples: 64, 16k, 1M)"))?;
    n.checked_mul(mult).ok_or_else(|| format!("byte count {s:?} too large"))
}

/// AF_XDP options shared by both binaries. They only matter with `--backend xsk`.
#[derive(Args, Clone, Debug)]
#[command(next_help_heading = "AF_XDP options (--backend xsk only)")]
pub struct XskOpts {
    /// Interface the AF_XDP port binds to (required with --backend xsk). The XDP steering
    /// program is attached to it while the process runs and detached on exit.
    #[arg(long, value_name = "IFNAME")]
    pub iface: Option<String>,
    /// IPv4 address of the userspace stack. `shared`: the interface's own address; only the
    /// stack's TCP ports (its listening ports and the local ports of its live connections,
    /// each held from the kernel by a placeholder socket while in use) are steered to it, ARP
    /// stays with the kernel. `A.B.C.D/LEN`: a dedicated address the kernel does not have;
    /// the stack answers ARP and ping for it.
    #[arg(long, value_name = "shared|A.B.C.D/LEN", default_value = "shared")]
    pub addr: AddrArg,
    /// RX/TX queue of the interface to bind.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub queue: u32,
    /// Where the XDP program runs: skb (generic), drv (native, in the driver) or auto (drv on
    /// veth and virtio_net, where skb is refused on a guest that negotiated guest_csum; else
    /// skb). The socket itself is always in copy mode.
    #[arg(long, value_name = "skb|drv|auto", default_value = "auto")]
    pub attach: AttachMode,
    /// Frames taken from the RX ring per loop iteration at most (XskConfig.rx_batch).
    #[arg(long, value_name = "FRAMES", default_value_t = 64)]
    pub batch: usize,
    /// XDP_MAX_TX_SKB_BUDGET: frames one TX kick may send. off, auto (= the TX ring size) or a
    /// number between 32 and the TX ring size (PortConfig.tx_budget).
    #[arg(long, value_name = "off|auto|N", default_value = "auto")]
    pub tx_budget: Knob,
    /// XDP_GENERIC_XMIT_BATCH: frames sent under one TX queue lock. off, auto (32, at most the
    /// budget) or a number (PortConfig.xmit_batch).
    #[arg(long, value_name = "off|auto|N", default_value = "auto")]
    pub xmit_batch: Knob,
    /// Entries in the RX and TX rings (power of two); the fill ring gets twice as many, the
    /// completion ring as many (RingSizes::for_bursts) [default: the connection limit rounded
    /// up to a power of two, 4096 to 16384, so that a burst of one request per connection fits
    /// the RX side].
    #[arg(long, value_name = "N")]
    pub ring_size: Option<u32>,
    /// UMEM frames (PortConfig.umem.frame_count) [default: enough for a full fill ring, a full
    /// RX ring, a full TX ring and two receive batches: 4 x --ring-size + 2 x --batch, at
    /// least 256 for the batches].
    #[arg(long, value_name = "N")]
    pub frames: Option<u32>,
    /// SYN shedding in the XDP program: when the RX ring or the fill ring has no more than
    /// this reserve of places left, new connections' SYNs are dropped there (counted as
    /// port.shed.*) so the reserve goes to the frames of open connections; also once the RX
    /// ring has not emptied for 50 ms, beyond 256 waiting frames (xsk_io::shed). off, auto (a
    /// reserve of an eighth of the RX ring) or a reserve in places (PortConfig.syn_shed). It
    /// bounds an open connection's wait under a SYN flood, at the price of legitimate SYNs in
    /// a burst of new connections (each retried by its client a second later), which it cannot
    /// tell from a flood: off by default, for servers that expect floods (docs/2026-12-02-storms).
    #[arg(long, value_name = "off|auto|N", default_value = "off")]
    pub syn_shed: Knob,
    /// SO_BUSY_POLL_BUDGET (packets per busy-poll pass), used with --busy-poll.
    #[arg(long, value_name = "PACKETS", default_value_t = 128)]
    pub busy_budget: u32,
    /// Per-connection TCP receive and transmit buffer of the userspace stack, e.g. 64k.
    /// The kernel backend keeps the kernel's autotuning (net.ipv4.tcp_rmem/tcp_wmem).
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes, default_value = "64k")]
    pub buffer: usize,
    /// What each connection's buffers start at: they grow (by four, up to --buffer) when a
    /// read or write finds them too small, so an idle or half-open connection costs this
    /// twice, not --buffer twice.
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes, default_value = "4k")]
    pub initial_buffer: usize,
    /// Don't prepare the device (offloads, channels); only check that it is usable.
    #[arg(long)]
    pub no_tune: bool,
    /// Fill every TCP checksum in user space. By default the kernel completes them (AF_XDP TX
    /// metadata, Linux 6.8+, probed at startup; the port's features line says tx_csum=offload),
    /// and a local receiver such as a veth peer skips verifying them (PortConfig.tx_csum).
    #[arg(long)]
    pub no_csum_offload: bool,
    /// Give every segment to smoltcp's general receive and send paths. By default in-order
    /// ACK/PSH segments of established connections take the fast path in (header
    /// prediction) and a response that fits one segment the fast path out (same effects);
    /// this is for comparing the two.
    #[arg(long)]
    pub no_fast_path: bool,
    /// Time where each request goes inside the stack (RX ring, engine, application, egress,
    /// the kernel's send, waiting) and report it: the `stages` object of the JSON, a line at
    /// exit. A diagnostic: about ten clock reads per request.
    #[arg(long)]
    pub stage_times: bool,
    /// Router for off-link peers [default: the kernel's default route with a shared
    /// address; none with a dedicated one].
    #[arg(long, value_name = "A.B.C.D")]
    pub gateway: Option<Ipv4Addr>,
    /// TCP segments whose checksum a local sender's TX offload left partial: auto (accept on
    /// veth and virtio_net, whose frames cross memory, not a wire), accept or reject.
    #[arg(long, value_name = "auto|accept|reject", default_value = "auto")]
    pub partial_csum: PartialCsumArg,
    /// Close connections that carried no data either way for this long (e.g. 5m; 0 = never).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "0s")]
    pub idle_timeout: Duration,
    /// Abort a connection closed by us when the peer has not finished the close after this
    /// long (FIN-WAIT-2 and friends).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "60s")]
    pub fin_timeout: Duration,
    /// Wake the stack for every pure ACK. By default, while it sleeps and no connection needs
    /// ACKs promptly (at most 1,608 bytes unacknowledged, no handshake or FIN pending), the XDP
    /// program keeps the peers' pure ACKs in a ring without waking it, as kernel TCP takes them
    /// in softirq; they are read on the next wake-up, 1 s later at most.
    #[arg(long)]
    pub no_defer_acks: bool,
    /// What ends the stack's sleeps for its timers and wakes: a POSIX timer that signals the
    /// polling thread with this real-time signal (rtmin+K or a number; blocked in that thread
    /// except while it sleeps), or `timerfd` (one more descriptor in every sleep's poll, which
    /// cost a guest 400-600 instructions per request at light load). Use another signal if the
    /// program uses this one. Waits shorter than 10 ms (a paced sender's) end on a timerfd
    /// either way: a signal costs more each time it ends a sleep.
    #[arg(long, value_name = "rtmin+K|N|timerfd", default_value = "rtmin+4", value_parser = parse_sleep_signal)]
    pub sleep_signal: SleepSignal,
    /// When SYNs are answered with SYN cookies (no state kept until the handshake completes):
    /// auto = when the half-open table is full, as Linux (a flood costs no memory and no
    /// half-open connection is evicted); always; off = evict the oldest half-open connection.
    #[arg(long, value_name = "auto|always|off", default_value = "auto")]
    pub syn_cookies: SynCookiesArg,
    /// Whether, while the stack uses SYN cookies, the XDP program answers SYNs to listening
    /// ports itself with the same cookies (XDP_TX), so a flood's SYNs take no place in the rings
    /// and none of the stack's time: auto = on virtio_net and in skb mode, not on a native veth
    /// (which sends XDP_TX into its peer only while the peer runs an XDP program); on; off.
    #[arg(long, value_name = "auto|on|off", default_value = "auto")]
    pub xdp_cookies: XdpCookiesArg,
    #[command(flatten)]
    pub loss_recovery: RecoveryOpts,
    #[command(flatten)]
    pub faults: FaultOpts,
}

/// `--sleep-signal`: a signal number, or None for a timerfd.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SleepSignal(pub Option<i32>);

/// `rtmin+K` (K from 0 to SIGRTMAX - SIGRTMIN), a signal number, or `timerfd`.
pub fn parse_sleep_signal(s: &str) -> std::result::Result<SleepSignal, String> {
    let bad = || format!("{s:?}: expected rtmin+K, a real-time signal's number, or timerfd");
    if s == "timerfd" {
        return Ok(SleepSignal(None));
    }
    let sig = match s.strip_prefix("rtmin") {
        Some("") => libc::SIGRTMIN(),
        Some(k) => libc::SIGRTMIN().checked_add(k.strip_prefix('+').ok_or_else(bad)?.parse::<i32>().map_err(|_| bad())?).ok_or_else(bad)?,
        None => s.parse::<i32>().map_err(|_| bad())?,
    };
    if !(libc::SIGRTMIN()..=libc::SIGRTMAX()).contains(&sig) {
        return Err(format!("{s:?}: signal {sig} is not a real-time signal ({}-{})", libc::SIGRTMIN(), libc::SIGRTMAX()));
    }
    Ok(SleepSignal(Some(sig)))
}

/// `--syn-cookies`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum SynCookiesArg {
    Auto,
    Always,
    Off,
}

impl From<SynCookiesArg> for stack::xsk::SynCookies {
    fn from(a: SynCookiesArg) -> Self {
        match a {
            SynCookiesArg::Auto => stack::xsk::SynCookies::Auto,
            SynCookiesArg::Always => stack::xsk::SynCookies::Always,
            SynCookiesArg::Off => stack::xsk::SynCookies::Off,
        }
    }
}

/// `--xdp-cookies`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum XdpCookiesArg {
    Auto,
    On,
    Off,
}

/// `--partial-csum`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum PartialCsumArg {
    Auto,
    Accept,
    Reject,
}

impl XskOpts {
    /// Argument ids of these options, for [`warn_ignored`].
    pub const IDS: &'static [&'static str] = &[
        "iface",
        "addr",
        "queue",
        "attach",
        "batch",
        "tx_budget",
        "xmit_batch",
        "ring_size",
        "frames",
        "syn_shed",
        "busy_budget",
        "buffer",
        "initial_buffer",
        "no_tune",
        "no_csum_offload",
        "no_fast_path",
        "stage_times",
        "gateway",
        "partial_csum",
        "idle_timeout",
        "fin_timeout",
        "no_defer_acks",
        "sleep_signal",
        "syn_cookies",
        "xdp_cookies",
        "recovery",
        "rto_min",
        "rto_max",
        "rto_initial",
        "no_tail_probe",
        "ack_delay",
        "ack_delay_max",
        "fault_rx_drop",
        "fault_tx_drop",
    ];

    /// The stack configuration these options describe. `max_conns` sizes the socket buckets,
    /// `busy_poll` is SO_BUSY_POLL in microseconds.
    pub fn config(&self, max_conns: usize, busy_poll: Option<u32>) -> Result<XskConfig> {
        let Some(iface) = self.iface.as_deref() else { usage_bail!("--backend xsk needs --iface") };
        let ring_size = self.ring_size.unwrap_or_else(|| (max_conns as u32).next_power_of_two().clamp(4096, 16384));
        usage_ensure!(
            ring_size.is_power_of_two() && (64..=65536).contains(&ring_size),
            "--ring-size {} must be a power of two between 64 and 65536",
            ring_size
        );
        let rings = RingSizes::for_bursts(ring_size, ring_size);
        let frames = match self.frames {
            Some(f) => f,
            None => rings.frames_needed((2 * self.batch as u32).max(256)),
        };
        usage_ensure!(frames >= 2 * 64, "--frames {frames} is too few (at least 128)");
        usage_ensure!(self.batch >= 1, "--batch must be at least 1");
        usage_ensure!(self.buffer >= 1024, "--buffer {} is too small (at least 1024 bytes)", self.buffer);
        usage_ensure!(max_conns >= 1, "the connection limit must be at least 1");
        let mut c = XskConfig::new(iface, self.addr.mode());
        c.port.queue = self.queue;
        c.port.attach = self.attach;
        c.port.tx_budget = self.tx_budget;
        c.port.xmit_batch = self.xmit_batch;
        c.port.rings = rings;
        c.port.syn_shed = self.syn_shed;
        c.port.umem = UmemConfig::default().with_frame_count(frames);
        c.port.busy_poll = busy_poll.map(|usecs| BusyPoll { usecs, budget: self.busy_budget });
        c.port.tune = !self.no_tune;
        c.port.tx_csum = !self.no_csum_offload;
        c.engine.fast_path = !self.no_fast_path;
        c.stage_times = self.stage_times;
        c.rx_batch = self.batch;
        c.engine.max_conns = max_conns;
        c.engine.rx_buffer = self.buffer;
        c.engine.tx_buffer = self.buffer;
        c.engine.initial_buffer = self.initial_buffer.clamp(512, self.buffer);
        c.gateway = self.gateway;
        c.partial_csum = match self.partial_csum {
            PartialCsumArg::Auto => PartialCsum::Auto,
            PartialCsumArg::Accept => PartialCsum::Accept,
            PartialCsumArg::Reject => PartialCsum::Reject,
        };
        c.engine.idle_timeout = (!self.idle_timeout.is_zero()).then_some(self.idle_timeout);
        c.engine.fin_timeout = self.fin_timeout;
        c.defer_acks = !self.no_defer_acks;
        c.sleep_signal = self.sleep_signal.0;
        c.engine.syn_cookies = self.syn_cookies.into();
        c.xdp_syn_cookies = match self.xdp_cookies {
            XdpCookiesArg::Auto => stack::xsk::XdpCookies::Auto,
            XdpCookiesArg::On => stack::xsk::XdpCookies::On,
            XdpCookiesArg::Off => stack::xsk::XdpCookies::Off,
        };
        c.engine.recovery = self.loss_recovery.settings().map_err(UsageError)?;
        c.faults = self.faults.faults();
        Ok(c)
    }
}

/// `--recovery`: where the loss-recovery settings start from, before the individual options.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum RecoveryPreset {
    /// Tuned for request/response at microsecond round trips: a low RTO floor and a tail-loss
    /// probe, so a lost response costs milliseconds, not a second.
    Default,
    /// smoltcp 0.14 as released: RTO in [1s, 60s] starting at 1s, no tail-loss probe (for
    /// comparisons).
    Smoltcp,
}

impl RecoveryPreset {
    pub fn settings(self) -> Recovery {
        match self {
            RecoveryPreset::Default => Recovery::default(),
            RecoveryPreset::Smoltcp => Recovery::smoltcp(),
        }
    }
}

/// `[default: 50ms; --recovery smoltcp: 1s]` for one of the preset durations, from the presets
/// themselves, so the help cannot drift from the code.
fn preset_defaults(f: fn(&Recovery) -> Duration) -> String {
    let fmt = |d: Duration| humantime::format_duration(d).to_string();
    format!(
        "[default: {}; --recovery smoltcp: {}]",
        fmt(f(&RecoveryPreset::Default.settings())),
        fmt(f(&RecoveryPreset::Smoltcp.settings()))
    )
}

/// Loss recovery of the userspace stack's TCP (`XskConfig.engine.recovery`): the retransmission
/// timer's bounds and the tail-loss probe, set on every socket. `--recovery` picks the preset;
/// each option given overrides its field. Only with `--backend xsk`.
#[derive(Args, Clone, Debug)]
#[command(next_help_heading = "Loss recovery (--backend xsk only)")]
pub struct RecoveryOpts {
    // The help texts are built at run time (the defaults come from the presets), so the fields
    // carry plain comments: a doc comment would become a second, static help text.
    #[arg(
        long,
        value_name = "default|smoltcp",
        default_value = "default",
        help = "Loss-recovery preset; each option below that is given overrides its part."
    )]
    pub recovery: RecoveryPreset,
    #[arg(
        long,
        value_name = "DURATION",
        value_parser = parse_duration,
        help = format!(
            "Floor of the retransmission timeout (RTO): the backstop when a segment, or its tail-loss \
             probe, is lost. Lower recovers such double losses sooner; too low fires at peers that only \
             delay their ACK (Linux: 40ms) and backs the timer off for nothing {}",
            preset_defaults(|r| r.rto_min)
        )
    )]
    pub rto_min: Option<Duration>,
    #[arg(
        long,
        value_name = "DURATION",
        value_parser = parse_duration,
        help = format!(
            "Ceiling of the RTO as it doubles with each retry: bounds the wait between retries of a \
             connection whose peer stopped answering (RFC 6298: at least 60s) {}",
            preset_defaults(|r| r.rto_max)
        )
    )]
    pub rto_max: Option<Duration>,
    #[arg(
        long,
        value_name = "DURATION",
        value_parser = parse_duration,
        help = format!(
            "RTO before the first round-trip sample: how long a lost SYN, SYN-ACK or first segment \
             waits; high enough not to retransmit into a slow first answer {}",
            preset_defaults(|r| r.rto_initial)
        )
    )]
    pub rto_initial: Option<Duration>,
    #[arg(
        long,
        help = "No tail-loss probe. By default, when the last segment of a flight (a response) stays \
                unacknowledged for 2 SRTT + the ACK-delay allowance, it is sent once more, without \
                backing off the timer: a lost response then costs about that instead of the RTO (no \
                duplicate ACKs come for a one-segment flight). The smoltcp preset has no probe."
    )]
    pub no_tail_probe: bool,
    #[arg(
        long,
        value_name = "DURATION",
        value_parser = parse_duration,
        help = format!(
            "ACK-delay allowance added to the probe timeout while one segment is in flight: keeps the \
             probe from firing at a peer that holds its ACK a little; small, since most request/response \
             peers answer at once. A connection whose probe the peer shows was spurious switches to \
             --ack-delay-max {}",
            preset_defaults(|r| r.ack_delay)
        )
    )]
    pub ack_delay: Option<Duration>,
    #[arg(
        long,
        value_name = "DURATION",
        value_parser = parse_duration,
        help = format!(
            "The allowance for peers known to delay their ACKs (Linux 40ms, Windows 200ms): protects \
             them from spurious probes {}",
            preset_defaults(|r| r.ack_delay_max)
        )
    )]
    pub ack_delay_max: Option<Duration>,
}

impl RecoveryOpts {
    /// The preset with the options given applied, validated (the error names the options).
    pub fn settings(&self) -> Result<Recovery, String> {
        let mut r = self.recovery.settings();
        let set = |field: &mut Duration, v: Option<Duration>| {
            if let Some(v) = v {
                *field = v;
            }
        };
        set(&mut r.rto_min, self.rto_min);
        set(&mut r.rto_max, self.rto_max);
        set(&mut r.rto_initial, self.rto_initial);
        set(&mut r.ack_delay, self.ack_delay);
        set(&mut r.ack_delay_max, self.ack_delay_max);
        if self.no_tail_probe {
            r.tail_probe = false;
        }
        r.validate().map_err(|e| format!("loss recovery: {e} (see --rto-min, --rto-max, --rto-initial, --ack-delay, --ack-delay-max)"))?;
        Ok(r)
    }
}

/// One line for logs: `RTO 50ms..1m (initial 1s), tail-loss probe after 2 SRTT + 10ms (200ms for
/// peers that delay their ACKs)`.
pub fn describe_recovery(r: &Recovery) -> String {
    let f = |d: Duration| humantime::format_duration(d).to_string();
    let probe = if r.tail_probe {
        format!(
            "tail-loss probe after 2 SRTT + {} ({} for peers that delay their ACKs)",
            f(r.ack_delay),
            f(r.ack_delay_max)
        )
    } else {
        "no tail-loss probe".to_string()
    };
    format!("RTO {}..{} (initial {}), {probe}", f(r.rto_min), f(r.rto_max), f(r.rto_initial))
}

/// Fault injection in the userspace stack (`XskConfig.faults`): frames dropped at random as they
/// enter or leave the stack, like a lossy link at this end. For tests and loss experiments on a
/// host without netem; nftables and tc cannot drop AF_XDP frames (XDP takes them before
/// netfilter, and AF_XDP sends bypass it).
#[derive(Args, Clone, Debug)]
#[command(next_help_heading = "Fault injection (tests; --backend xsk only)")]
pub struct FaultOpts {
    /// Drop this fraction of the received frames before the stack sees them, e.g. 0.01 or 1%
    /// (0 = off). Any fault turns --no-defer-acks on.
    #[arg(long, value_name = "FRACTION", value_parser = parse_fraction, default_value = "0")]
    pub fault_rx_drop: f64,
    /// Drop this fraction of the frames the stack sends, e.g. 0.01 or 1% (0 = off).
    #[arg(long, value_name = "FRACTION", value_parser = parse_fraction, default_value = "0")]
    pub fault_tx_drop: f64,
}

impl FaultOpts {
    pub fn faults(&self) -> Faults {
        let mut f = Faults::default();
        (f.rx_drop, f.tx_drop) = (self.fault_rx_drop, self.fault_tx_drop);
        f
    }
}

/// Parses a fraction in [0, 1]: `0.01` or `1%`.
pub fn parse_fraction(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let (num, scale) = match t.strip_suffix('%') {
        Some(n) => (n.trim(), 100.0),
        None => (t, 1.0),
    };
    let v = num.parse::<f64>().map_err(|_| format!("invalid fraction {s:?} (examples: 0.01, 1%)"))? / scale;
    if !(0.0..=1.0).contains(&v) {
        return Err(format!("fraction {s:?} outside 0..1 (0%..100%)"));
    }
    Ok(v)
}

/// The stack's loss-recovery counters (`stack::xsk::RecoveryStats`) in a form the result files
/// can be read back from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct RecoveryCounts {
    /// Retransmission timeouts (each resends from the first unacknowledged byte).
    pub rto_retransmits: u64,
    /// Fast retransmits (three duplicate ACKs).
    pub fast_retransmits: u64,
    /// Tail-loss probes sent.
    pub tail_probes: u64,
    /// Timeouts and fast retransmits the peer showed were not needed.
    pub spurious_retransmits: u64,
    /// Probes the peer showed were not needed.
    pub spurious_probes: u64,
}

impl From<RecoveryStats> for RecoveryCounts {
    fn from(s: RecoveryStats) -> Self {
        RecoveryCounts {
            rto_retransmits: s.rto_retransmits,
            fast_retransmits: s.fast_retransmits,
            tail_probes: s.tail_probes,
            spurious_retransmits: s.spurious_retransmits,
            spurious_probes: s.spurious_probes,
        }
    }
}

impl RecoveryCounts {
    /// Sums two (shards of one server).
    pub fn add(&mut self, o: &RecoveryCounts) {
        self.rto_retransmits += o.rto_retransmits;
        self.fast_retransmits += o.fast_retransmits;
        self.tail_probes += o.tail_probes;
        self.spurious_retransmits += o.spurious_retransmits;
        self.spurious_probes += o.spurious_probes;
    }

    /// Everything sent again: timeouts, fast retransmits and probes.
    pub fn resent(&self) -> u64 {
        self.rto_retransmits + self.fast_retransmits + self.tail_probes
    }

    /// `RTO retransmits 1, fast retransmits 0, tail probes 5 (2 spurious), spurious retransmits 0`.
    pub fn line(&self) -> String {
        format!(
            "RTO retransmits {}, fast retransmits {}, tail probes {} ({} spurious), spurious retransmits {}",
            self.rto_retransmits, self.fast_retransmits, self.tail_probes, self.spurious_probes, self.spurious_retransmits
        )
    }
}

/// Warns about options that were given on the command line but do not apply (e.g. AF_XDP
/// knobs with `--backend kernel`). `ids` must be argument ids of the command.
pub fn warn_ignored(matches: &ArgMatches, ids: &[&str], why: &str) {
    for id in ids {
        if matches.value_source(id) == Some(ValueSource::CommandLine) {
            tracing::warn!("--{} is ignored {why}", id.replace('_', "-"));
        }
    }
}

/// Logs to stderr; `RUST_LOG` overrides the default `level`.
pub fn init_tracing(level: &str) {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| level.into()))
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
}

/// The body of a binary's `main`: tracing, argument parsing (the matches are
/// passed on, so `run` can tell explicit options from defaults), and any error
/// printed with its context chain as `name: error: ...` (exit status 1), or as a usage error
/// (exit status 2) if it is a [`UsageError`].
pub fn main_with<A: clap::FromArgMatches + clap::CommandFactory>(
    name: &str,
    run: impl FnOnce(&A, &clap::ArgMatches) -> anyhow::Result<std::process::ExitCode>,
) -> std::process::ExitCode {
    main_with_level(name, "info", run)
}

/// [`main_with`] with another default log level (`RUST_LOG` still overrides it).
pub fn main_with_level<A: clap::FromArgMatches + clap::CommandFactory>(
    name: &str,
    level: &str,
    run: impl FnOnce(&A, &clap::ArgMatches) -> anyhow::Result<std::process::ExitCode>,
) -> std::process::ExitCode {
    init_tracing(level);
    let matches = A::command().get_matches();
    let args = match A::from_arg_matches(&matches) {
        Ok(a) => a,
        Err(e) => e.exit(),
    };
    run(&args, &matches).unwrap_or_else(|e| {
        if let Some(u) = e.chain().find_map(|c| c.downcast_ref::<UsageError>()) {
            // Same look and exit status (2) as clap's own errors.
            A::command().error(clap::error::ErrorKind::ValueValidation, &u.0).exit();
        }
        eprintln!("{name}: error: {e:#}");
        std::process::ExitCode::FAILURE
    })
}

/// Raises the soft RLIMIT_NOFILE to at least `want` (capped by the hard limit), so the kernel
/// backend is not stopped at 1024 descriptors. Returns the new soft limit.
pub fn raise_nofile_limit(want: u64) -> std::io::Result<u64> {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: `lim` is a valid, writable rlimit.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    if lim.rlim_cur >= want {
        return Ok(lim.rlim_cur);
    }
    lim.rlim_cur = want.min(lim.rlim_max);
    // SAFETY: `lim` is a valid rlimit with cur <= max.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(lim.rlim_cur)
}

/// Writes `contents` to `path` atomically (temporary file + rename), so a script polling for
/// the file never reads it half-written.
pub fn write_atomically(path: &Path, contents: &[u8]) -> Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".tmp{}", std::process::id()));
    std::fs::write(&tmp, contents).with_context(|| format!("writing {}", Path::new(&tmp).display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("renaming to {}", path.display()))
}

/// Online CPUs (the machine-wide CPU figures are summed over all of them).
pub fn online_cpus() -> usize {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    usize::try_from(n).ok().filter(|&n| n > 0).unwrap_or(1)
}

// ---------------------------------------------------------------------------------------------
// KV workload
// ---------------------------------------------------------------------------------------------

/// Load for the `kv` service. Each connection owns `keys` keys: its first `keys` requests SET
/// them (value of `value_size` bytes), every later request GETs one of them round robin and
/// checks the value. Connections never touch each other's keys, so pipelining stays
/// deterministic. Requests are 3 + 17 bytes (GET) or that plus the value (SET).
#[derive(Clone, Debug)]
pub struct KvWorkload {
    keys: u64,
    value_size: usize,
    pool: Vec<u8>,
}

/// Key length: `k` + 8 hex digits of the connection + 8 of the key index.
const KV_KEY_LEN: usize = 17;

impl KvWorkload {
    pub fn new(value_size: usize, keys: u64) -> Self {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let pool = (0..value_size + 4096)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        KvWorkload { keys: keys.max(1), value_size, pool }
    }

    fn value(&self, conn: u64, k: u64) -> &[u8] {
        let span = (self.pool.len() - self.value_size + 1) as u64;
        let off = (conn.wrapping_mul(1_000_003).wrapping_add(k.wrapping_mul(7919)) % span) as usize;
        &self.pool[off..off + self.value_size]
    }

    fn key(conn: u64, k: u64) -> [u8; KV_KEY_LEN] {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut key = [b'k'; KV_KEY_LEN];
        for i in 0..8 {
            key[1 + i] = HEX[((conn >> (28 - 4 * i)) & 0xf) as usize];
            key[9 + i] = HEX[((k >> (28 - 4 * i)) & 0xf) as usize];
        }
        key
    }

    fn parse_key(key: &[u8]) -> Option<(u64, u64)> {
        if key.len() != KV_KEY_LEN || key[0] != b'k' {
            return None;
        }
        let hex = |s: &[u8]| u64::from_str_radix(std::str::from_utf8(s).ok()?, 16).ok();
        Some((hex(&key[1..9])?, hex(&key[9..17])?))
    }
}

impl Workload for KvWorkload {
    fn next_request(&mut self, conn: usize, seq: u64, out: &mut BytesMut) {
        let (c, k) = (conn as u64 & 0xffff_ffff, seq % self.keys);
        let key = Self::key(c, k);
        let req = if seq < self.keys {
            KvRequest::Set { key: &key, value: self.value(c, k) }
        } else {
            KvRequest::Get { key: &key }
        };
        // A 17-byte key always fits the u16 key length: encoding cannot fail.
        let _ = req.encode(out);
    }

    fn check(&mut self, _conn: usize, req: &[u8], resp: &[u8]) -> bool {
        let Ok(resp) = KvResponse::parse(resp) else { return false };
        if resp.status != KvStatus::Ok {
            return false;
        }
        match KvRequest::parse(req) {
            Ok(KvRequest::Get { key }) => Self::parse_key(key).is_some_and(|(c, k)| resp.value == self.value(c, k)),
            Ok(KvRequest::Set { .. } | KvRequest::Del { .. }) => resp.value.is_empty(),
            Err(_) => false,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Progress
// ---------------------------------------------------------------------------------------------

/// Wraps a [`Workload`] to print a progress line about once a second while a
/// [`rr_load::Client`] runs: `check` is called for every response on the client's thread,
/// so counting there needs no change to the client and no extra connections. The clock is
/// read about 100 times a second, not per response.
pub struct Progress<W> {
    inner: W,
    enabled: bool,
    phase: String,
    start: Instant,
    next: Instant,
    last_at: Instant,
    total: u64,
    failed: u64,
    last_total: u64,
    stride: u64,
    countdown: u64,
    said_interrupted: bool,
}

impl<W: Workload> Progress<W> {
    pub fn new(inner: W, enabled: bool) -> Self {
        let now = Instant::now();
        Progress {
            inner,
            enabled,
            phase: String::new(),
            start: now,
            next: now,
            last_at: now,
            total: 0,
            failed: 0,
            last_total: 0,
            stride: 1,
            countdown: 1,
            said_interrupted: false,
        }
    }

    /// Starts counting a new phase (e.g. "warm-up", "run").
    pub fn begin(&mut self, phase: &str) {
        let now = Instant::now();
        self.phase = phase.to_string();
        self.start = now;
        self.last_at = now;
        self.next = now + Duration::from_secs(1);
        self.total = 0;
        self.failed = 0;
        self.last_total = 0;
        self.stride = 1;
        self.countdown = 1;
    }

    /// Responses checked in the current phase, and how many failed the check.
    pub fn counts(&self) -> (u64, u64) {
        (self.total, self.failed)
    }

    pub fn inner(&self) -> &W {
        &self.inner
    }

    pub fn inner_mut(&mut self) -> &mut W {
        &mut self.inner
    }

    pub fn into_inner(self) -> W {
        self.inner
    }

    fn tick(&mut self) {
        self.countdown -= 1;
        if self.countdown > 0 {
            return;
        }
        self.countdown = self.stride;
        let now = Instant::now();
        if now < self.next {
            return;
        }
        let dt = now.saturating_duration_since(self.last_at).as_secs_f64();
        let rate = if dt > 0.0 { (self.total - self.last_total) as f64 / dt } else { 0.0 };
        eprintln!(
            "{:>8} {:>6.1}s {:>12} req/s {:>14} responses {:>6} failed checks",
            self.phase,
            now.saturating_duration_since(self.start).as_secs_f64(),
            group_digits(rate.round() as u64),
            group_digits(self.total),
            self.failed,
        );
        if xsk_lab::lab::interrupted() && !self.said_interrupted {
            self.said_interrupted = true;
            eprintln!("interrupted: this phase ends at its --duration; press Ctrl-C again to abort at once");
        }
        // About 100 clock reads per second at the current rate.
        self.stride = ((rate / 100.0) as u64).clamp(1, 1 << 20);
        self.countdown = self.stride;
        self.last_at = now;
        self.last_total = self.total;
        while self.next <= now {
            self.next += Duration::from_secs(1);
        }
    }
}

impl<W: Workload> Workload for Progress<W> {
    fn next_request(&mut self, conn: usize, seq: u64, out: &mut BytesMut) {
        self.inner.next_request(conn, seq, out)
    }

    fn check(&mut self, conn: usize, req: &[u8], resp: &[u8]) -> bool {
        let ok = self.inner.check(conn, req, resp);
        self.total += 1;
        self.failed += u64::from(!ok);
        if self.enabled {
            self.tick();
        }
        ok
    }

    fn response_len(&self, req: &[u8]) -> Option<usize> {
        self.inner.response_len(req)
    }
}

// ---------------------------------------------------------------------------------------------
// CPU accounting window
// ---------------------------------------------------------------------------------------------

/// CPU counters at one instant: this process and the machine (a [`CpuSnapshot`]), and the
/// server process if one is watched.
#[derive(Clone, Copy, Debug)]
pub struct CpuSample {
    pub snap: CpuSnapshot,
    pub server: Option<Duration>,
    /// NET_RX softirq time by context, when the server is watched and [`netrx::install`]ed.
    pub netrx: Option<netrx::NetRxTimes>,
}

impl CpuSample {
    pub fn now(server_pid: Option<u32>) -> Option<CpuSample> {
        let snap = CpuSnapshot::now().ok()?;
        let server = server_pid.and_then(|p| pid_cpu(p).ok());
        let netrx = server_pid.and_then(|_| netrx::installed());
        Some(CpuSample { snap, server, netrx })
    }
}

/// Wraps a [`Workload`] to read the CPU counters exactly around the measured window: when the
/// first request is issued (after every connection is established) and when the run's
/// duration has passed (checked every few responses). Readings taken around the whole
/// `Client::run` would also count connection setup and teardown, which at 10,000 connections
/// take longer than the run itself.
pub struct CpuWindow<W> {
    inner: W,
    server_pid: Option<u32>,
    length: Option<Duration>,
    pub start: Option<CpuSample>,
    pub end: Option<CpuSample>,
    countdown: u32,
}

/// Responses between clock reads while the window is open.
const WINDOW_STRIDE: u32 = 16;

impl<W> CpuWindow<W> {
    pub fn new(inner: W, server_pid: Option<u32>) -> Self {
        CpuWindow { inner, server_pid, length: None, start: None, end: None, countdown: WINDOW_STRIDE }
    }

    /// Opens a window at the next request, to close `length` later; `None` disarms it.
    pub fn arm(&mut self, length: Option<Duration>) {
        self.length = length;
        self.start = None;
        self.end = None;
        self.countdown = WINDOW_STRIDE;
    }

    pub fn inner(&self) -> &W {
        &self.inner
    }
}

impl<W: Workload> Workload for CpuWindow<W> {
    fn next_request(&mut self, conn: usize, seq: u64, out: &mut BytesMut) {
        if self.length.is_some() && self.start.is_none() {
            self.start = CpuSample::now(self.server_pid);
        }
        self.inner.next_request(conn, seq, out)
    }

    fn check(&mut self, conn: usize, req: &[u8], resp: &[u8]) -> bool {
        let ok = self.inner.check(conn, req, resp);
        if let (Some(len), Some(start), None) = (self.length, &self.start, &self.end) {
            self.countdown -= 1;
            if self.countdown == 0 {
                self.countdown = WINDOW_STRIDE;
                if start.snap.at.elapsed() >= len {
                    self.end = CpuSample::now(self.server_pid);
                }
            }
        }
        ok
    }

    fn response_len(&self, req: &[u8]) -> Option<usize> {
        self.inner.response_len(req)
    }
}

// ---------------------------------------------------------------------------------------------
// Results
// ---------------------------------------------------------------------------------------------

/// NET_RX softirq CPU per request by the process it ran in (microseconds).
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct NetRxPerReq {
    /// In the server's process: on veth, mostly the client's receive of the server's sends.
    pub in_server: f64,
    /// In the client's (this) process: the server's receive of its sends.
    pub in_client: f64,
    /// Anywhere else (ksoftirqd, interrupts of idle CPUs, other processes): charged to nobody.
    pub elsewhere: f64,
}

/// What `rr-bench --json` writes. Latencies are microseconds; CPU figures are CPU time per
/// request in microseconds (null when unknown) and average cores busy over the measured run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct BenchResult {
    /// Client backend.
    pub backend: Backend,
    pub service: Service,
    /// Server address.
    pub connect: String,
    pub conns: usize,
    /// Requests kept in flight per connection (closed loop); 0 in open loop.
    pub depth: usize,
    /// "closed" or "open".
    pub mode: String,
    /// Open loop: requests per second over all connections.
    pub rate: Option<f64>,
    pub req_size: usize,
    pub resp_size: usize,
    pub warmup_s: f64,
    /// Responses in the warm-up (its connections are separate; the server serves both).
    #[serde(default)]
    pub warmup_requests: u64,
    /// Connection setup of the measured run: from the start of the run to its first request.
    #[serde(default)]
    pub setup_s: f64,
    /// First request to last response of the measured run.
    pub duration_s: f64,
    /// Wall time the CPU figures cover: the first request to the end of --duration (the
    /// CPU-per-request figures are CPU cores over this window divided by the request rate).
    #[serde(default)]
    pub cpu_window_s: f64,
    pub requests: u64,
    pub rps: f64,
    pub p50_us: f64,
    pub p90_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
    pub mean_us: f64,
    /// Failed checks, bad responses and connections that died.
    pub errors: u64,
    /// Requests that never got a response.
    pub lost: u64,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    /// This process (user + system, getrusage), over the CPU window.
    pub cpu_us_per_req_client: Option<f64>,
    /// All CPUs of the machine (/proc/stat busy time: includes softirq work and everything
    /// else running).
    pub cpu_us_per_req_machine: Option<f64>,
    /// The process given by --server-pid (its threads' run time, /proc/PID/task/*/schedstat).
    pub cpu_us_per_req_server: Option<f64>,
    /// The same with each side charged its own receive path: minus the NET_RX softirq work
    /// that ran in the server's process, plus the NET_RX work that ran in this one (see
    /// [`netrx`]); null without the accountant (not root, --no-netrx).
    #[serde(default)]
    pub cpu_us_per_req_server_own_rx: Option<f64>,
    /// The NET_RX softirq time behind that figure, per request.
    #[serde(default)]
    pub netrx_us_per_req: Option<NetRxPerReq>,
    pub cores_client: f64,
    pub cores_machine: f64,
    pub cores_server: Option<f64>,
    pub cpus: usize,
    pub server_pid: Option<u32>,
    /// xsk client only: stack counters and frame audit.
    pub xsk: Option<serde_json::Value>,
    /// xsk client only: its loss recovery (also in `xsk.stats.recovery`).
    #[serde(default)]
    pub recovery: Option<RecoveryCounts>,
    /// Churn and storm runs (`--pattern`): how connections were opened, and the time from
    /// the connect call to the established connection. `requests`/`rps` then count
    /// connections (each answered once), and the latencies run from the connect call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub churn: Option<ChurnFigures>,
}

/// Connection figures of a churn or storm run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ChurnFigures {
    /// "churn" or "storm".
    pub pattern: String,
    /// Connections opened (connect calls) in the measured run.
    pub opened: u64,
    /// Refused, reset or not established within --connect-timeout.
    pub failed_connects: u64,
    pub setup_p50_us: f64,
    pub setup_p99_us: f64,
    pub setup_max_us: f64,
}

/// Groups digits: 1234567 -> "1,234,567".
pub fn group_digits(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, ch) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

fn opt(v: Option<f64>, prec: usize) -> String {
    v.map_or_else(|| "-".to_string(), |v| format!("{v:.prec$}"))
}

impl BenchResult {
    /// The human-readable result table.
    pub fn table(&self) -> String {
        let mut s = String::new();
        let load = match self.rate {
            Some(r) => format!("open loop at {} req/s", group_digits(r.round() as u64)),
            None => format!("closed loop, depth {}", self.depth),
        };
        let _ = writeln!(
            s,
            "== rr-bench: {} client -> {} ({}, {} B requests, {} B responses)",
            self.backend, self.connect, self.service, self.req_size, self.resp_size
        );
        let _ = writeln!(
            s,
            "   {} connections ({:.2} s to connect), {load}, {:.2} s measured after {:.2} s warm-up",
            self.conns, self.setup_s, self.duration_s, self.warmup_s
        );
        let _ = writeln!(
            s,
            "  {:<16}{:>12} req/s  ({} requests)",
            "throughput",
            group_digits(self.rps.round() as u64),
            group_digits(self.requests)
        );
        let _ = writeln!(s, "  {:<16}{:>12} / {}", "errors / lost", self.errors, self.lost);
        let _ = writeln!(
            s,
            "  {:<16}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}",
            "latency", "p50", "p90", "p99", "p99.9", "max", "mean"
        );
        let _ = writeln!(
            s,
            "  {:<16}{:>10.1}{:>10.1}{:>10.1}{:>10.1}{:>10.1}{:>10.1}",
            "  (us)", self.p50_us, self.p90_us, self.p99_us, self.p999_us, self.max_us, self.mean_us
        );
        let _ = writeln!(s, "  {:<16}{:>10}{:>10}{:>10}", "CPU", "client", "machine", "server");
        let _ = writeln!(
            s,
            "  {:<16}{:>10}{:>10}{:>10}",
            "  us/request",
            opt(self.cpu_us_per_req_client, 2),
            opt(self.cpu_us_per_req_machine, 2),
            opt(self.cpu_us_per_req_server, 2)
        );
        let _ = writeln!(
            s,
            "  {:<16}{:>10.2}{:>10.2}{:>10}   (machine: {} CPUs)",
            "  cores busy",
            self.cores_client,
            self.cores_machine,
            opt(self.cores_server, 2),
            self.cpus
        );
        if let Some(r) = &self.recovery {
            let _ = writeln!(s, "  {:<16}{}", "loss recovery", r.line());
        }
        if let (Some(own), Some(n)) = (self.cpu_us_per_req_server_own_rx, self.netrx_us_per_req) {
            let _ = writeln!(
                s,
                "  {:<16}{:>10.2}   (server, own receive: NET_RX run in it {:.2}, in the client {:.2}, elsewhere {:.2} us/request)",
                "  own receive", own, n.in_server, n.in_client, n.elsewhere
            );
        }
        s
    }
}

/// What `rr-server --json` writes at exit.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ServerSummary {
    pub backend: Backend,
    pub service: Service,
    pub listen: String,
    pub uptime_s: f64,
    pub requests: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub accepted: u64,
    pub closed: u64,
    pub open_at_exit: usize,
    pub protocol_errors: u64,
    pub io_errors: u64,
    pub cpu_s: f64,
    /// xsk only: stack counters, port features and the frame audit.
    pub xsk: Option<serde_json::Value>,
    /// xsk only: loss recovery, summed over the shards (also in `xsk.stats.recovery`).
    #[serde(default)]
    pub recovery: Option<RecoveryCounts>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use stack::rr::{Handler, Kv};
    use stack::ConnId;

    #[test]
    fn sleep_signals() {
        let rt = libc::SIGRTMIN();
        assert_eq!(parse_sleep_signal("rtmin+4"), Ok(SleepSignal(Some(rt + 4))));
        assert_eq!(parse_sleep_signal("rtmin"), Ok(SleepSignal(Some(rt))));
        assert_eq!(parse_sleep_signal(&(rt + 2).to_string()), Ok(SleepSignal(Some(rt + 2))));
        assert_eq!(parse_sleep_signal("timerfd"), Ok(SleepSignal(None)));
        for bad in ["", "rtmin-1", "rtmin+", "rtmin+x", "rtmin+99", "rtmin+2147483647", "10", "2", "sigusr1", "-5"] {
            assert!(parse_sleep_signal(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("1s 500ms"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("500us"), Ok(Duration::from_micros(500)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        for bad in ["", "s", "-1", "10", "1e400", "nan", "1.2.3", "1e9999s", "soon"] {
            assert!(parse_duration(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn connect_addresses() {
        assert_eq!(parse_connect("198.18.0.1:7000"), Ok(SocketAddrV4::new(Ipv4Addr::new(198, 18, 0, 1), 7000)));
        assert_eq!(parse_connect("localhost:7000").map(|a| a.port()), Ok(7000));
        assert!(parse_connect("localhost:7000").unwrap().ip().is_loopback());
        for bad in ["198.18.0.1", "localhost", ":7000", "localhost:99999", "no-such-host.invalid:1", ""] {
            assert!(parse_connect(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn byte_counts() {
        assert_eq!(parse_bytes("64"), Ok(64));
        assert_eq!(parse_bytes("16k"), Ok(16384));
        assert_eq!(parse_bytes("1M"), Ok(1 << 20));
        assert!(parse_bytes("").is_err());
        assert!(parse_bytes("k").is_err());
        assert!(parse_bytes("-1").is_err());
        assert!(parse_bytes("99999999999999999999M").is_err());
    }

    #[test]
    fn addr_args() {
        assert_eq!("shared".parse(), Ok(AddrArg::Shared));
        assert_eq!(
            "198.18.0.100/24".parse(),
            Ok(AddrArg::Dedicated { addr: Ipv4Addr::new(198, 18, 0, 100), prefix_len: 24 })
        );
        for bad in ["198.18.0.100", "198.18.0.100/33", "198.18.0.100/0", "0.0.0.0/8", "x/24", "224.0.0.1/4", ""] {
            assert!(bad.parse::<AddrArg>().is_err(), "{bad:?}");
        }
        assert_eq!(AddrArg::Dedicated { addr: Ipv4Addr::new(10, 0, 0, 1), prefix_len: 8 }.to_string(), "10.0.0.1/8");
    }

    #[test]
    fn kv_workload_against_kv_handler() {
        let mut w = KvWorkload::new(100, 4);
        let mut h = Kv::new();
        let (mut req, mut resp) = (BytesMut::new(), BytesMut::new());
        for conn in 0..3 {
            for seq in 0..20 {
                req.clear();
                resp.clear();
                w.next_request(conn, seq, &mut req);
                assert!(matches!(KvRequest::parse(&req), Ok(KvRequest::Set { .. })) == (seq < 4));
                h.handle(ConnId(0), &mut (), &req, &mut resp);
                assert!(w.check(conn, &req, &resp), "conn {conn} seq {seq}");
            }
        }
        assert_eq!(h.len(), 12);
        // A wrong value, a miss and garbage fail the check.
        req.clear();
        w.next_request(0, 10, &mut req);
        assert!(!w.check(0, &req, b"\x00wrong"));
        assert!(!w.check(0, &req, b"\x01"));
        assert!(!w.check(0, &req, b""));
        assert!(!w.check(0, b"garbage", b"\x00"));
        assert_eq!(KvWorkload::parse_key(&KvWorkload::key(0xdead_beef, 7)), Some((0xdead_beef, 7)));
        assert_eq!(KvWorkload::parse_key(b"kzzzzzzzz00000000"), None);
    }

    #[test]
    fn progress_forwards_and_counts() {
        let mut p = Progress::new(rr_load::EchoWorkload::fixed(8), false);
        p.begin("run");
        let mut out = BytesMut::new();
        p.next_request(0, 0, &mut out);
        assert_eq!(out.len(), 8);
        assert_eq!(p.response_len(&out), Some(8));
        assert!(p.check(0, &out, &out));
        assert!(!p.check(0, &out, b"x"));
        assert_eq!(p.counts(), (2, 1));
    }

    /// The shared xsk options alone, as both binaries flatten them.
    #[derive(clap::Parser, Debug)]
    struct XskOnly {
        #[command(flatten)]
        xsk: XskOpts,
    }

    fn xsk_opts(args: &[&str]) -> Result<XskOpts, clap::Error> {
        use clap::Parser;
        XskOnly::try_parse_from(std::iter::once("t").chain(args.iter().copied())).map(|a| a.xsk)
    }

    fn recovery(args: &[&str]) -> Result<Recovery, String> {
        xsk_opts(args).map_err(|e| e.to_string())?.loss_recovery.settings()
    }

    #[test]
    fn recovery_presets_and_overrides() {
        use clap::CommandFactory;
        XskOnly::command().debug_assert();
        assert_eq!(recovery(&[]), Ok(Recovery::default()));
        assert_eq!(recovery(&["--recovery", "default"]), Ok(Recovery::default()));
        assert_eq!(recovery(&["--recovery", "smoltcp"]), Ok(Recovery::smoltcp()));
        // The options override the preset, whichever it is, field by field.
        let r = recovery(&["--recovery", "smoltcp", "--rto-min", "200ms"]).unwrap();
        assert_eq!(r, Recovery::smoltcp().with_rto_min(Duration::from_millis(200)));
        let r = recovery(&[
            "--rto-min",
            "5ms",
            "--rto-max",
            "10s",
            "--rto-initial",
            "300ms",
            "--ack-delay",
            "1ms",
            "--ack-delay-max",
            "40ms",
            "--no-tail-probe",
        ])
        .unwrap();
        assert_eq!(
            r,
            Recovery::default()
                .with_rto_min(Duration::from_millis(5))
                .with_rto_max(Duration::from_secs(10))
                .with_rto_initial(Duration::from_millis(300))
                .with_tail_probe(false)
                .with_ack_delay(Duration::from_millis(1))
                .with_ack_delay_max(Duration::from_millis(40))
        );
        assert!(!recovery(&["--recovery", "default", "--no-tail-probe"]).unwrap().tail_probe);
        // Sub-millisecond values are durations too.
        assert_eq!(recovery(&["--ack-delay", "500us"]).unwrap().ack_delay, Duration::from_micros(500));
    }

    #[test]
    fn recovery_bad_values() {
        // Refused by the parser (clap: exit status 2 with the usage).
        for bad in [
            &["--rto-min", "50"][..],
            &["--rto-min", "soon"],
            &["--recovery", "linux"],
            &["--no-tail-probe", "yes"],
            &["--ack-delay"],
        ] {
            assert!(xsk_opts(bad).is_err(), "{bad:?}");
        }
        // Parsed, refused by Recovery::validate (whose message is passed on).
        for bad in [
            &["--rto-min", "0s"][..],
            &["--rto-min", "2s", "--rto-initial", "1s"],
            &["--rto-min", "2m", "--rto-max", "1m", "--rto-initial", "2m"],
            &["--rto-min", "1ms", "--rto-max", "1s", "--rto-initial", "2s"],
            &["--rto-min", "1ms", "--rto-max", "2h", "--rto-initial", "1s"],
            &["--ack-delay", "300ms", "--ack-delay-max", "200ms"],
            &["--recovery", "smoltcp", "--ack-delay", "300ms", "--ack-delay-max", "100ms"],
        ] {
            let e = recovery(bad).expect_err(&format!("{bad:?}"));
            assert!(e.starts_with("loss recovery: "), "{bad:?}: {e}");
        }
        let why = Recovery::default().with_rto_min(Duration::ZERO).validate().unwrap_err();
        assert!(recovery(&["--rto-min", "0s"]).unwrap_err().contains(&why));
        // XskOpts::config reports it as a usage error (exit status 2), before touching the device.
        let e = xsk_opts(&["--iface", "lo", "--rto-min", "0s"]).unwrap().config(1024, None).unwrap_err();
        assert!(e.chain().any(|c| c.downcast_ref::<UsageError>().is_some()), "{e:#}");
    }

    #[test]
    fn config_takes_recovery_and_faults() {
        let c = xsk_opts(&["--iface", "lo"]).unwrap().config(1024, None).unwrap();
        assert_eq!(c.engine.recovery, Recovery::default());
        assert!(!c.faults.any());
        let c = xsk_opts(&["--iface", "lo", "--recovery", "smoltcp", "--fault-rx-drop", "1%", "--fault-tx-drop", "0.02"])
            .unwrap()
            .config(1024, None)
            .unwrap();
        assert_eq!(c.engine.recovery, Recovery::smoltcp());
        assert_eq!((c.faults.rx_drop, c.faults.tx_drop), (0.01, 0.02));
        for bad in [&["--fault-rx-drop", "2"][..], &["--fault-tx-drop", "-1%"], &["--fault-rx-drop", "x"]] {
            assert!(xsk_opts(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn fractions() {
        assert_eq!(parse_fraction("0.01"), Ok(0.01));
        assert_eq!(parse_fraction("1%"), Ok(0.01));
        assert_eq!(parse_fraction(" 100 % "), Ok(1.0));
        assert_eq!(parse_fraction("0"), Ok(0.0));
        for bad in ["", "%", "1.5", "101%", "-0.1", "nan", "one"] {
            assert!(parse_fraction(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn recovery_help_names_both_presets() {
        use clap::CommandFactory;
        let help = XskOnly::command().render_help().to_string();
        let f = |d: Duration| humantime::format_duration(d).to_string();
        let (d, s) = (Recovery::default(), Recovery::smoltcp());
        for (opt, a, b) in [
            ("--rto-min", d.rto_min, s.rto_min),
            ("--rto-max", d.rto_max, s.rto_max),
            ("--rto-initial", d.rto_initial, s.rto_initial),
            ("--ack-delay ", d.ack_delay, s.ack_delay),
            ("--ack-delay-max", d.ack_delay_max, s.ack_delay_max),
        ] {
            let want = format!("[default: {}; --recovery smoltcp: {}]", f(a), f(b));
            let at = help.find(opt).unwrap_or_else(|| panic!("{opt} missing:\n{help}"));
            let entry = &help[at..];
            let entry = &entry[..entry[2..].find("\n  -").map_or(entry.len(), |e| e + 2)];
            assert!(entry.contains(&want), "{opt}: {want} not in {entry}");
        }
        assert!(help.contains("Loss recovery (--backend xsk only)"), "{help}");
        assert!(help.contains("--no-tail-probe") && help.contains("--recovery <default|smoltcp>"), "{help}");
    }

    #[test]
    fn recovery_described() {
        let d = describe_recovery(&Recovery::smoltcp());
        assert_eq!(d, "RTO 1s..1m (initial 1s), no tail-loss probe");
        let r = Recovery::smoltcp()
            .with_rto_min(Duration::from_millis(50))
            .with_rto_max(Duration::from_secs(60))
            .with_rto_initial(Duration::from_secs(1))
            .with_tail_probe(true)
            .with_ack_delay(Duration::from_millis(10))
            .with_ack_delay_max(Duration::from_millis(200));
        assert_eq!(
            describe_recovery(&r),
            "RTO 50ms..1m (initial 1s), tail-loss probe after 2 SRTT + 10ms (200ms for peers that delay their ACKs)"
        );
    }

    #[test]
    fn recovery_counts() {
        let mut s = RecoveryStats::default();
        (s.rto_retransmits, s.fast_retransmits, s.tail_probes, s.spurious_retransmits, s.spurious_probes) = (1, 2, 3, 4, 5);
        let mut c = RecoveryCounts::from(s);
        // Field for field the stack's struct, under the same JSON names.
        assert_eq!(serde_json::to_value(c).unwrap(), serde_json::to_value(s).unwrap());
        assert_eq!(c.resent(), 6);
        c.add(&RecoveryCounts::from(s));
        assert_eq!((c.tail_probes, c.spurious_probes), (6, 10));
        assert_eq!(
            RecoveryCounts::from(s).line(),
            "RTO retransmits 1, fast retransmits 2, tail probes 3 (5 spurious), spurious retransmits 4"
        );
        // Read back leniently: missing counters are zero.
        let back: RecoveryCounts = serde_json::from_str(r#"{"tail_probes": 7}"#).unwrap();
        assert_eq!(back, RecoveryCounts { tail_probes: 7, ..RecoveryCounts::default() });
    }

    #[test]
    fn digits_grouped() {
        assert_eq!(group_digits(0), "0");
        assert_eq!(group_digits(999), "999");
        assert_eq!(group_digits(1000), "1,000");
        assert_eq!(group_digits(1234567), "1,234,567");
    }
}
