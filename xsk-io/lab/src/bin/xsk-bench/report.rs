//! What a run reports: the JSON summary, round-trip percentiles, rates and
//! CPU time.

use std::time::Duration;

use serde::Serialize;

use xsk_io::port::{Features, PortStats};

use crate::args::Mode;

#[derive(Serialize)]
pub(crate) struct Summary {
    pub(crate) mode: Mode,
    pub(crate) size: usize,
    pub(crate) attach: String,
    pub(crate) batch: u32,
    /// Median of the per-second rates after the first second.
    pub(crate) pps: f64,
    pub(crate) pps_mean: f64,
    /// Rate of the other side where the lab has one (generator for rx modes, peer kernel for txonly).
    pub(crate) peer_pps: Option<f64>,
    pub(crate) samples: Vec<f64>,
    pub(crate) cpu_ns_per_pkt: f64,
    pub(crate) features: Features,
    pub(crate) stats: PortStats,
    pub(crate) audit: String,
    /// Round trips (pingpong).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) rtt: Option<Rtt>,
}

/// Round-trip times of `pingpong`, in nanoseconds.
#[derive(Serialize)]
pub(crate) struct Rtt {
    pub(crate) count: u64,
    /// Frames not back within 100 ms (sent again).
    pub(crate) lost: u64,
    pub(crate) p50_ns: u64,
    pub(crate) p90_ns: u64,
    pub(crate) p99_ns: u64,
    pub(crate) p999_ns: u64,
    pub(crate) mean_ns: f64,
}

impl Rtt {
    pub(crate) fn from_samples(mut s: Vec<u32>, lost: u64) -> Option<Rtt> {
        if s.is_empty() {
            return None;
        }
        s.sort_unstable();
        let q = |f: f64| u64::from(s[((s.len() - 1) as f64 * f).round() as usize]);
        let mean_ns = s.iter().map(|&v| f64::from(v)).sum::<f64>() / s.len() as f64;
        Some(Rtt { count: s.len() as u64, lost, p50_ns: q(0.5), p90_ns: q(0.9), p99_ns: q(0.99), p999_ns: q(0.999), mean_ns })
    }
}

pub(crate) fn cpu_time() -> Duration {
    // SAFETY: getrusage writes one rusage struct into the zeroed value.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut ru);
        ru
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

pub(crate) fn fmt_rate(pps: f64) -> String {
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
