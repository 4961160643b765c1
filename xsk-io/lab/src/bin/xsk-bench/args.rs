//! The command line: the modes and their options.

use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, ValueEnum};
use serde::Serialize;

use xsk_io::port::Setting;
use xsk_io::AttachMode;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Mode {
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
pub(crate) struct Args {
    /// What to measure.
    #[arg(value_enum)]
    pub(crate) mode: Mode,
    /// Interface to use. Without it, a veth lab in two fresh network namespaces is built and removed.
    #[arg(long)]
    pub(crate) iface: Option<String>,
    /// RX/TX queue to bind.
    #[arg(long, default_value_t = 0)]
    pub(crate) queue: u32,
    /// Frame size in bytes, Ethernet header included, FCS excluded.
    #[arg(long, default_value_t = 64)]
    pub(crate) size: usize,
    /// Descriptors queued per batch (one publish and at most one sendto per batch).
    #[arg(long, default_value_t = 64)]
    pub(crate) batch: u32,
    /// Where the XDP program runs: skb (generic), drv (native) or auto.
    #[arg(long, default_value = "skb")]
    pub(crate) attach: AttachMode,
    /// XDP_MAX_TX_SKB_BUDGET: off, auto (= TX ring size) or a number (32..TX ring size).
    #[arg(long, default_value = "auto")]
    pub(crate) tx_budget: Setting,
    /// XDP_GENERIC_XMIT_BATCH: off, auto (32, capped by the budget) or a number.
    #[arg(long, default_value = "auto")]
    pub(crate) xmit_batch: Setting,
    /// Entries in each of the four rings (power of two).
    #[arg(long, default_value_t = 2048)]
    pub(crate) ring_size: u32,
    /// UMEM frames (default: twice the ring size).
    #[arg(long)]
    pub(crate) frames: Option<u32>,
    /// UMEM frame size (2048 or 4096).
    #[arg(long, default_value_t = 4096)]
    pub(crate) frame_size: u32,
    /// Busy polling: SO_BUSY_POLL microseconds (opt-in; spins a core).
    #[arg(long)]
    pub(crate) busy_poll: Option<u32>,
    /// SO_BUSY_POLL_BUDGET with --busy-poll.
    #[arg(long, default_value_t = 64)]
    pub(crate) busy_budget: u32,
    /// How long to run, e.g. 5s, 1m (the first second is warm-up and not counted in the median).
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = parse_duration)]
    pub(crate) duration: Duration,
    /// Write the summary as JSON to this file.
    #[arg(long)]
    pub(crate) json: Option<PathBuf>,
    /// Destination MAC of generated frames (default: one nobody owns, so the peer kernel drops them at once).
    #[arg(long)]
    pub(crate) dst_mac: Option<String>,
    /// Source and destination IPv4 of generated frames.
    #[arg(long, default_value = "198.18.0.1")]
    pub(crate) src_ip: Ipv4Addr,
    #[arg(long, default_value = "198.18.0.2")]
    pub(crate) dst_ip: Ipv4Addr,
    /// TCP port steered to the socket in rxdrop/l2fwd (and targeted by --proto tcp).
    #[arg(long, default_value_t = 9000)]
    pub(crate) port: u16,
    /// Protocol of generated frames (pingpong: always tcp).
    #[arg(long, default_value = "udp", value_parser = ["udp", "tcp"])]
    pub(crate) proto: String,
    /// pingpong/pong: send with the TCP checksum left to the kernel (AF_XDP TX metadata, as
    /// the stack does by default), the pseudo-header sum in the checksum field.
    #[arg(long)]
    pub(crate) tx_csum: bool,
    /// Don't change device settings (offloads, channels); only check them.
    #[arg(long)]
    pub(crate) no_tune: bool,
    /// Print no per-second lines.
    #[arg(long)]
    pub(crate) quiet: bool,
}

/// Durations the way every binary of the project takes them: `5s`, `500ms`, `1m`.
fn parse_duration(s: &str) -> Result<Duration, String> {
    match humantime::parse_duration(s.trim()) {
        Ok(d) if !d.is_zero() => Ok(d),
        Ok(_) => Err("the duration must be positive".into()),
        Err(e) => Err(format!("invalid duration {s:?}: {e} (examples: 5s, 500ms, 1m)")),
    }
}
