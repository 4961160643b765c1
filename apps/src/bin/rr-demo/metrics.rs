//! What one run measured (a row of results.json), the median of several, and the medians per
//! case and backend with the best kernel configuration of each case.

use std::collections::BTreeMap;

use anyhow::Result;
use apps::RecoveryCounts;
use serde::Serialize;

use crate::cases::{Case, Kernel};

/// What one run measured; in a `Summary`, the medians over the runs.
#[derive(Clone, Debug, Serialize, serde::Deserialize)]
pub(super) struct Metrics {
    #[serde(default = "nan", deserialize_with = "nan_if_null")]
    pub(super) rps: f64,
    #[serde(default = "nan", deserialize_with = "nan_if_null")]
    pub(super) p50_us: f64,
    #[serde(default = "nan", deserialize_with = "nan_if_null")]
    pub(super) p99_us: f64,
    #[serde(default = "nan", deserialize_with = "nan_if_null")]
    pub(super) p999_us: f64,
    #[serde(default = "nan", deserialize_with = "nan_if_null")]
    pub(super) cpu_us_per_req: f64,
    #[serde(default = "nan", deserialize_with = "nan_if_null")]
    pub(super) cpu_us_per_req_machine: f64,
    /// Server CPU with each side charged its own receive path (rr-bench's NET_RX accountant:
    /// on veth the sender's process runs the receiver's softirq work).
    #[serde(default = "nan", deserialize_with = "nan_if_null")]
    pub(super) cpu_us_per_req_own_rx: f64,
    /// The client process (rr-bench, getrusage) over the same window.
    #[serde(default = "nan", deserialize_with = "nan_if_null")]
    pub(super) cpu_us_per_req_client: f64,
    /// System calls the server's process entered per request (rr-bench's accountant).
    #[serde(default = "nan", deserialize_with = "nan_if_null")]
    pub(super) server_syscalls_per_req: f64,
    /// Cores the client and the server process kept busy (of 2): shows which side saturated.
    #[serde(default = "nan", deserialize_with = "nan_if_null")]
    pub(super) client_cores: f64,
    #[serde(default = "nan", deserialize_with = "nan_if_null")]
    pub(super) server_cores: f64,
    /// Seconds to establish the run's connections (before the measured window).
    #[serde(default = "nan", deserialize_with = "nan_if_null")]
    pub(super) setup_s: f64,
    /// Churn and storm cases: p99 from the connect call to the established connection, us.
    #[serde(default = "nan", deserialize_with = "nan_if_null")]
    pub(super) conn_setup_p99_us: f64,
    /// Frames or connections the xsk server's counters say it dropped (every counter whose
    /// name says drop), over the server's life: warm-up, setup and run.
    #[serde(default = "nan", deserialize_with = "nan_if_null")]
    pub(super) server_drops: f64,
    /// TCP segments the kernel retransmitted in the client's namespace over the same span.
    #[serde(default = "nan", deserialize_with = "nan_if_null")]
    pub(super) client_retrans: f64,
    /// The same in the server's namespace (kernel server only; the stack keeps no such count).
    #[serde(default = "nan", deserialize_with = "nan_if_null")]
    pub(super) server_retrans: f64,
    /// Everything either end sent again over the same span: kernel TCP's RetransSegs in both
    /// namespaces (tail-loss probes included) plus a stack client's and a stack server's RTO
    /// retransmits, fast retransmits (holes included) and tail-loss probes (the stack counts events, the kernel
    /// segments: the same for one-segment responses).
    #[serde(default = "nan", deserialize_with = "nan_if_null")]
    pub(super) retrans_total: f64,
    /// The xsk server's loss recovery (its `recovery` counters, over its life; NaN for the
    /// kernel server, whose TCPLossProbes and TCPTimeouts are in `server_tcp`).
    #[serde(default = "nan", deserialize_with = "nan_if_null")]
    pub(super) server_rto_retransmits: f64,
    #[serde(default = "nan", deserialize_with = "nan_if_null")]
    pub(super) server_fast_retransmits: f64,
    /// Retransmissions in a fast recovery after its first (SACK holes, partial ACKs).
    #[serde(default = "nan", deserialize_with = "nan_if_null")]
    pub(super) server_hole_retransmits: f64,
    #[serde(default = "nan", deserialize_with = "nan_if_null")]
    pub(super) server_tail_probes: f64,
    /// Retransmissions and probes the client showed were not needed (D-SACK, or an ACK too early).
    #[serde(default = "nan", deserialize_with = "nan_if_null")]
    pub(super) server_spurious_retransmits: f64,
    #[serde(default = "nan", deserialize_with = "nan_if_null")]
    pub(super) server_spurious_probes: f64,
}

/// NaN (an unknown figure) is written as null in JSON; read it back as NaN.
pub(super) fn nan_if_null<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(<Option<f64> as serde::Deserialize>::deserialize(d)?.unwrap_or(f64::NAN))
}

pub(super) fn nan() -> f64 {
    f64::NAN
}

pub(super) fn one() -> usize {
    1
}

impl Metrics {
    pub(super) fn median(runs: &[&Metrics]) -> Metrics {
        let m = |f: fn(&Metrics) -> f64| median(runs.iter().map(|r| f(r)).collect());
        Metrics {
            rps: m(|r| r.rps),
            p50_us: m(|r| r.p50_us),
            p99_us: m(|r| r.p99_us),
            p999_us: m(|r| r.p999_us),
            cpu_us_per_req: m(|r| r.cpu_us_per_req),
            cpu_us_per_req_machine: m(|r| r.cpu_us_per_req_machine),
            cpu_us_per_req_own_rx: m(|r| r.cpu_us_per_req_own_rx),
            cpu_us_per_req_client: m(|r| r.cpu_us_per_req_client),
            server_syscalls_per_req: m(|r| r.server_syscalls_per_req),
            client_cores: m(|r| r.client_cores),
            server_cores: m(|r| r.server_cores),
            setup_s: m(|r| r.setup_s),
            conn_setup_p99_us: m(|r| r.conn_setup_p99_us),
            server_drops: m(|r| r.server_drops),
            client_retrans: m(|r| r.client_retrans),
            server_retrans: m(|r| r.server_retrans),
            retrans_total: m(|r| r.retrans_total),
            server_rto_retransmits: m(|r| r.server_rto_retransmits),
            server_fast_retransmits: m(|r| r.server_fast_retransmits),
            server_hole_retransmits: m(|r| r.server_hole_retransmits),
            server_tail_probes: m(|r| r.server_tail_probes),
            server_spurious_retransmits: m(|r| r.server_spurious_retransmits),
            server_spurious_probes: m(|r| r.server_spurious_probes),
        }
    }

    /// The retx columns: `retrans_total`, or for files written before it existed what the
    /// column counted then (kernel TCP's RetransSegs: the client's, and a kernel server's).
    pub(super) fn retx(&self) -> f64 {
        if self.retrans_total.is_nan() {
            self.client_retrans + self.server_retrans.max(0.0)
        } else {
            self.retrans_total
        }
    }
}

#[derive(Clone, Debug, Serialize, serde::Deserialize)]
pub(super) struct Row {
    /// The server's rr-server --backend: xsk, kernel (epoll) or uring.
    pub(super) backend: String,
    pub(super) case: String,
    pub(super) round: usize,
    pub(super) conns: usize,
    /// rr-bench --threads and rr-server --threads of the run.
    #[serde(default = "one")]
    pub(super) client_threads: usize,
    #[serde(default = "one")]
    pub(super) server_threads: usize,
    #[serde(flatten)]
    pub(super) m: Metrics,
    pub(super) errors: u64,
    /// Requests the server counted (warm-up and run) and responses the client got (same).
    #[serde(default)]
    pub(super) server_requests: u64,
    #[serde(default)]
    pub(super) client_requests: u64,
    /// The server's nonzero drop and error counters, by name.
    #[serde(default)]
    pub(super) server_trouble: BTreeMap<String, f64>,
    /// Kernel TCP counters (retransmissions by kind) in the client's and the server's
    /// namespace over the run: warm-up, setup and measured window.
    #[serde(default)]
    pub(super) client_tcp: BTreeMap<String, f64>,
    #[serde(default)]
    pub(super) server_tcp: BTreeMap<String, f64>,
    /// A stack client's loss recovery (rr-bench's `recovery`); none for a kernel client.
    #[serde(default)]
    pub(super) client_recovery: Option<RecoveryCounts>,
    /// Loss cases: what the loss mechanism counted over the run (nftables: `nft_frames` TCP
    /// frames seen at the client, `nft_dropped`, `nft_outages`; a stack client's fault injector:
    /// `injected_rx_dropped`, the received frames it dropped).
    #[serde(default)]
    pub(super) loss_counters: BTreeMap<String, f64>,
}

pub(super) fn median(mut v: Vec<f64>) -> f64 {
    v.retain(|x| x.is_finite());
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    if v.len() % 2 == 1 {
        v[v.len() / 2]
    } else {
        (v[v.len() / 2 - 1] + v[v.len() / 2]) / 2.0
    }
}

#[derive(Serialize)]
pub(super) struct Summary {
    pub(super) backend: String,
    pub(super) case: String,
    pub(super) conns: usize,
    pub(super) client_threads: usize,
    pub(super) server_threads: usize,
    #[serde(flatten)]
    pub(super) m: Metrics,
    pub(super) errors: u64,
    pub(super) runs: usize,
}

pub(super) fn summaries(rows: &[Row], cases: &[Case]) -> BTreeMap<(String, String), Summary> {
    let mut sums = BTreeMap::new();
    for case in cases {
        for backend in std::iter::once("xsk").chain(Kernel::ALL.map(Kernel::backend)) {
            let rs: Vec<&Row> = rows.iter().filter(|r| r.case == case.name && r.backend == backend).collect();
            if rs.is_empty() {
                continue;
            }
            sums.insert(
                (case.name.to_string(), backend.to_string()),
                Summary {
                    backend: backend.into(),
                    case: case.name.into(),
                    conns: case.conns,
                    client_threads: case.client_threads,
                    server_threads: case.server_threads,
                    m: Metrics::median(&rs.iter().map(|r| &r.m).collect::<Vec<_>>()),
                    errors: rs.iter().map(|r| r.errors).sum(),
                    runs: rs.len(),
                },
            );
        }
    }
    sums
}

/// The best kernel configuration of `case` among its summaries: the highest req/s, or for an
/// open-loop case (its rate is fixed, so req/s tells nothing) the least server CPU per request.
/// A figure that is unknown loses; on a tie the first of [`Kernel::ALL`] (epoll) wins.
pub(super) fn best_kernel<'a>(case: &Case, sums: &'a BTreeMap<(String, String), Summary>) -> Option<&'a Summary> {
    let score = |s: &Summary| {
        let v = if case.rate.is_some() { -s.m.cpu_us_per_req } else { s.m.rps };
        if v.is_nan() {
            f64::NEG_INFINITY
        } else {
            v
        }
    };
    Kernel::ALL
        .iter()
        .filter_map(|k| sums.get(&(case.name.to_string(), k.backend().to_string())))
        .reduce(|best, s| if score(s) > score(best) { s } else { best })
}
