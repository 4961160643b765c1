//! Command-line options common to the binaries: the backend, the service, addresses,
//! durations and byte counts, and the AF_XDP knobs (`XskOpts`) with their `XskConfig`.

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::str::FromStr;
use std::time::Duration;

use anyhow::Result;
use clap::{Args, ValueEnum};
use serde::{Deserialize, Serialize};

use stack::xsk::{Addr6Mode, AddrMode, PartialCsum, XskConfig};
use xsk_io::port::{BusyPoll, Setting};
use xsk_io::socket::RingSizes;
use xsk_io::umem::UmemConfig;
use xsk_io::AttachMode;

use crate::recovery::{FaultOpts, RecoveryOpts};
use crate::values::{parse_bytes, parse_duration, parse_gateways, Gateways};

/// Which TCP/IP stack carries the connections.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// smoltcp over an AF_XDP copy-mode port (needs --iface, root).
    Xsk,
    /// The kernel's TCP stack (epoll).
    Kernel,
    /// The kernel's TCP stack through io_uring (Linux 6.0+): multishot accept and receive,
    /// one io_uring_enter per pass.
    Uring,
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Backend::Xsk => "xsk",
            Backend::Kernel => "kernel",
            Backend::Uring => "uring",
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

/// `--addr`: `shared` or a dedicated `A.B.C.D/LEN`, with a dedicated IPv6 address after a
/// comma (`A.B.C.D/LEN,X:Y::Z/LEN`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AddrArg {
    Shared,
    Dedicated { addr: Ipv4Addr, prefix_len: u8, addr6: Option<(Ipv6Addr, u8)> },
}

impl AddrArg {
    pub fn mode(self) -> AddrMode {
        match self {
            AddrArg::Shared => AddrMode::Shared,
            AddrArg::Dedicated { addr, prefix_len, .. } => AddrMode::Dedicated { addr, prefix_len },
        }
    }

    /// The IPv6 address: the kernel's in shared mode (if the interface has one), the
    /// dedicated one, or none.
    pub fn mode6(self) -> Addr6Mode {
        match self {
            AddrArg::Shared => Addr6Mode::Auto,
            AddrArg::Dedicated { addr6: Some((addr, prefix_len)), .. } => Addr6Mode::Dedicated { addr, prefix_len },
            AddrArg::Dedicated { addr6: None, .. } => Addr6Mode::Off,
        }
    }
}

impl fmt::Display for AddrArg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AddrArg::Shared => f.write_str("shared"),
            AddrArg::Dedicated { addr, prefix_len, addr6: None } => write!(f, "{addr}/{prefix_len}"),
            AddrArg::Dedicated { addr, prefix_len, addr6: Some((a6, p6)) } => write!(f, "{addr}/{prefix_len},{a6}/{p6}"),
        }
    }
}

impl FromStr for AddrArg {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        if s == "shared" {
            return Ok(AddrArg::Shared);
        }
        let usage = || format!("expected `shared`, A.B.C.D/LEN or A.B.C.D/LEN,X:Y::Z/LEN, got {s:?}");
        let (s, addr6) = match s.split_once(',') {
            None => (s, None),
            Some((v4, v6)) => {
                let (a6, len6) = v6.split_once('/').ok_or_else(usage)?;
                let a6: Ipv6Addr = a6.parse().map_err(|_| usage())?;
                let p6: u8 = len6.parse().map_err(|_| usage())?;
                if !(1..=128).contains(&p6) {
                    return Err(format!("IPv6 prefix length {p6} out of range 1..=128"));
                }
                if a6.is_unspecified() || a6.is_multicast() || a6.is_loopback() || a6.to_ipv4_mapped().is_some() {
                    return Err(format!("{a6} cannot be a host address"));
                }
                (v4, Some((a6, p6)))
            }
        };
        let (addr, len) = s.split_once('/').ok_or_else(usage)?;
        let addr: Ipv4Addr = addr.parse().map_err(|_| usage())?;
        let prefix_len: u8 = len.parse().map_err(|_| usage())?;
        if !(1..=32).contains(&prefix_len) {
            return Err(format!("prefix length {prefix_len} out of range 1..=32"));
        }
        if addr.is_unspecified() || addr.is_multicast() || addr.is_broadcast() {
            return Err(format!("{addr} cannot be a host address"));
        }
        Ok(AddrArg::Dedicated { addr, prefix_len, addr6 })
    }
}

/// A command line that parsed but does not make sense (e.g. `--depth 0`, `--backend xsk`
/// without `--iface`). [`main_with`](crate::main_with) reports it like clap's own usage errors: exit status 2.
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

/// AF_XDP options shared by both binaries. They only matter with `--backend xsk`.
#[derive(Args, Clone, Debug)]
#[command(next_help_heading = "AF_XDP options (--backend xsk only)")]
pub struct XskOpts {
    /// Interface the AF_XDP port binds to (required with --backend xsk). The XDP steering
    /// program is attached to it while the process runs and detached on exit.
    #[arg(long, value_name = "IFNAME")]
    pub iface: Option<String>,
    /// Addresses of the userspace stack. `shared`: the interface's own IPv4 address, and its
    /// global IPv6 address if it has one; only the stack's TCP ports (its listening ports and
    /// the local ports of its live connections, each held from the kernel by a placeholder
    /// socket while in use) are steered to it, ARP and neighbour discovery stay with the
    /// kernel. `A.B.C.D/LEN`: a dedicated IPv4 address the kernel does not have; the stack
    /// answers ARP and ping for it. `A.B.C.D/LEN,X:Y::Z/LEN`: a dedicated IPv6 address too
    /// (the stack answers neighbour solicitations for it). A listener serves both families.
    #[arg(long, value_name = "shared|A.B.C.D/LEN[,X:Y::Z/LEN]", default_value = "shared")]
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
    pub tx_budget: Setting,
    /// XDP_GENERIC_XMIT_BATCH: frames sent under one TX queue lock. off, auto (32, at most the
    /// budget) or a number (PortConfig.xmit_batch).
    #[arg(long, value_name = "off|auto|N", default_value = "auto")]
    pub xmit_batch: Setting,
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
    pub syn_shed: Setting,
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
    /// Routers for off-link peers, IPv4, IPv6 or both (198.18.0.1,2001:2::1) [default: the
    /// kernel's default routes with a shared address; none with a dedicated one].
    #[arg(long, value_name = "A.B.C.D[,X:Y::Z]", value_parser = parse_gateways)]
    pub gateway: Option<Gateways>,
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
    /// Argument ids of these options, for [`warn_ignored`](crate::warn_ignored).
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
        "syn_cookies",
        "xdp_cookies",
        "recovery",
        "rto_min", "rto_max", "rto_initial",
        "no_tail_probe",
        "no_sack_recovery",
        "timestamps",
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
        c.addr6 = self.addr.mode6();
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
        (c.gateway, c.gateway6) = self.gateway.map_or((None, None), |g| (g.v4, g.v6));
        c.partial_csum = match self.partial_csum {
            PartialCsumArg::Auto => PartialCsum::Auto,
            PartialCsumArg::Accept => PartialCsum::Accept,
            PartialCsumArg::Reject => PartialCsum::Reject,
        };
        c.engine.idle_timeout = (!self.idle_timeout.is_zero()).then_some(self.idle_timeout);
        c.engine.fin_timeout = self.fin_timeout;
        c.defer_acks = !self.no_defer_acks;
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

#[cfg(test)]
mod tests {
    use super::*;
    use stack::xsk::Recovery;

    #[test]
    fn addr_args() {
        assert_eq!("shared".parse(), Ok(AddrArg::Shared));
        assert_eq!(
            "198.18.0.100/24".parse(),
            Ok(AddrArg::Dedicated { addr: Ipv4Addr::new(198, 18, 0, 100), prefix_len: 24, addr6: None })
        );
        let both: AddrArg = "198.18.0.100/24,2001:2::100/64".parse().unwrap();
        assert_eq!(both, AddrArg::Dedicated { addr: Ipv4Addr::new(198, 18, 0, 100), prefix_len: 24, addr6: Some(("2001:2::100".parse().unwrap(), 64)) });
        assert_eq!(both.to_string(), "198.18.0.100/24,2001:2::100/64");
        assert_eq!(both.mode6(), Addr6Mode::Dedicated { addr: "2001:2::100".parse().unwrap(), prefix_len: 64 });
        assert_eq!(AddrArg::Shared.mode6(), Addr6Mode::Auto);
        for bad in [
            "198.18.0.100",
            "198.18.0.100/33",
            "198.18.0.100/0",
            "0.0.0.0/8",
            "x/24",
            "224.0.0.1/4",
            "",
            "198.18.0.100/24,2001:2::100",
            "198.18.0.100/24,2001:2::100/129",
            "198.18.0.100/24,::/64",
            "198.18.0.100/24,ff02::1/64",
            "198.18.0.100/24,::ffff:1.2.3.4/96",
            "2001:2::100/64",
        ] {
            assert!(bad.parse::<AddrArg>().is_err(), "{bad:?}");
        }
        assert_eq!(AddrArg::Dedicated { addr: Ipv4Addr::new(10, 0, 0, 1), prefix_len: 8, addr6: None }.to_string(), "10.0.0.1/8");
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
}
