//! Loss recovery on the command line (`--recovery` presets and their overrides), fault
//! injection, and the recovery counters a run reports.

use std::time::Duration;

use anyhow::Result;
use clap::{Args, ValueEnum};
use serde::{Deserialize, Serialize};

use stack::xsk::{Faults, Recovery, RecoveryStats};

use crate::values::{parse_duration, parse_fraction};

/// `--recovery`: where the loss-recovery settings start from, before the individual options.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum RecoveryPreset {
    /// Tuned for request/response at microsecond round trips: a low RTO floor, a tail-loss
    /// probe and the SACK recovery, so a lost response costs milliseconds, not a second.
    Default,
    /// smoltcp 0.14 as released: RTO in [1s, 60s] starting at 1s, no tail-loss probe, one fast
    /// retransmit per window (for comparisons).
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
        help = "No SACK recovery: only the first loss of a window is sent again at the third duplicate \
                ACK (smoltcp's own behaviour), a second waits for the timeout. By default the stack \
                keeps a scoreboard of what the peer's SACK blocks report and resends every hole once, \
                and the segment after a partial ACK. The smoltcp preset has none."
    )]
    pub no_sack_recovery: bool,
    #[arg(
        long,
        help = "No F-RTO: a timeout always sends the rest of its flight again in slow start. By default, \
                after a timeout of a flight of several segments whose first ACK shows the segment resent \
                arrived, two new segments go instead (when there are any); an ACK of more then shows the \
                timeout was spurious (a stalled peer or VM host), which undoes its congestion response \
                and the timer's backoff (RFC 5682). The smoltcp preset has none."
    )]
    pub no_frto: bool,
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
    #[arg(
        long,
        help = "Offer TCP timestamps (RFC 7323, microsecond clock): every ACK that echoes one is an RTT \
                sample, retransmitted segments' too, and an ACK that echoes the original of a \
                retransmission shows it was late, not lost (Eifel), which undoes the retransmission's \
                congestion response; and a peer's connections pool their RTT samples, each starting from \
                the pool (a client that answers late draws no retransmissions on new connections). 12 \
                bytes a segment. Off in both presets (see the README's Limits)."
    )]
    pub timestamps: bool,
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
        if self.no_sack_recovery {
            r.sack = false;
        }
        if self.no_frto {
            r.frto = false;
        }
        if self.timestamps {
            r.timestamps = true;
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
    let ts = if r.timestamps { ", microsecond timestamps" } else { "" };
    let sack = if r.sack { ", SACK recovery" } else { "" };
    let frto = if r.frto { ", F-RTO" } else { "" };
    format!("RTO {}..{} (initial {}), {probe}{ts}{sack}{frto}", f(r.rto_min), f(r.rto_max), f(r.rto_initial))
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
    /// Retransmissions in a fast recovery after its first (SACK holes, partial ACKs).
    pub hole_retransmits: u64,
    /// Timeouts F-RTO found spurious and undid (also in `spurious_retransmits`).
    pub frto_undone: u64,
    /// Segments received out of order and dropped: the reassembly buffer tracked as many
    /// ranges as it can (the peer resends them).
    pub out_of_order_dropped: u64,
}

impl From<RecoveryStats> for RecoveryCounts {
    fn from(s: RecoveryStats) -> Self {
        RecoveryCounts {
            rto_retransmits: s.rto_retransmits,
            fast_retransmits: s.fast_retransmits,
            tail_probes: s.tail_probes,
            spurious_retransmits: s.spurious_retransmits,
            spurious_probes: s.spurious_probes,
            hole_retransmits: s.hole_retransmits,
            frto_undone: s.frto_undone,
            out_of_order_dropped: s.out_of_order_dropped,
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
        self.hole_retransmits += o.hole_retransmits;
        self.frto_undone += o.frto_undone;
        self.out_of_order_dropped += o.out_of_order_dropped;
    }

    /// Everything sent again: timeouts, fast retransmits (with the holes after the
    /// first) and probes.
    pub fn resent(&self) -> u64 {
        self.rto_retransmits + self.fast_retransmits + self.hole_retransmits + self.tail_probes
    }

    /// `RTO retransmits 1, fast retransmits 0 (+0 holes), tail probes 5 (2 spurious), spurious retransmits 0`.
    pub fn line(&self) -> String {
        format!(
            "RTO retransmits {}, fast retransmits {} (+{} holes), tail probes {} ({} spurious), spurious retransmits {}",
            self.rto_retransmits,
            self.fast_retransmits,
            self.hole_retransmits,
            self.tail_probes,
            self.spurious_probes,
            self.spurious_retransmits
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recovery_described() {
        assert!(describe_recovery(&Recovery::default()).ends_with(", SACK recovery, F-RTO"));
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
        assert_eq!(
            describe_recovery(&Recovery::smoltcp().with_timestamps(true)),
            "RTO 1s..1m (initial 1s), no tail-loss probe, microsecond timestamps"
        );
    }

    #[test]
    fn timestamps_are_off_unless_asked_for() {
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            r: RecoveryOpts,
        }
        use clap::Parser;
        let ts = |args: &[&str]| Cli::try_parse_from([&["x"], args].concat()).unwrap().r.settings().unwrap().timestamps;
        assert!(!ts(&[]) && !ts(&["--recovery", "smoltcp"]));
        assert!(ts(&["--timestamps"]) && ts(&["--recovery", "smoltcp", "--timestamps"]));
    }

    #[test]
    fn recovery_counts() {
        let mut s = RecoveryStats::default();
        (s.rto_retransmits, s.fast_retransmits, s.tail_probes, s.spurious_retransmits, s.spurious_probes) = (1, 2, 3, 4, 5);
        s.hole_retransmits = 6;
        s.frto_undone = 7;
        s.out_of_order_dropped = 8;
        let mut c = RecoveryCounts::from(s);
        // Field for field the stack's struct, under the same JSON names.
        assert_eq!(serde_json::to_value(c).unwrap(), serde_json::to_value(s).unwrap());
        assert_eq!(c.resent(), 12);
        c.add(&RecoveryCounts::from(s));
        assert_eq!((c.tail_probes, c.spurious_probes), (6, 10));
        assert_eq!(
            RecoveryCounts::from(s).line(),
            "RTO retransmits 1, fast retransmits 2 (+6 holes), tail probes 3 (5 spurious), spurious retransmits 4"
        );
        // Read back leniently: missing counters are zero.
        let back: RecoveryCounts = serde_json::from_str(r#"{"tail_probes": 7}"#).unwrap();
        assert_eq!(back, RecoveryCounts { tail_probes: 7, ..RecoveryCounts::default() });
    }
}
