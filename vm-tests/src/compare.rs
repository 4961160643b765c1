//! Kernel TCP vs the xsk stack: both servers up at once (xsk on [`XSK_PORT`], kernel on
//! [`KERNEL_PORT`]), alternating latency-bound runs, medians and their ratio. The matrix runs it
//! from the host tap, g2g from the client guest; only how one run is started differs.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::Duration;

use anyhow::Result;
use serde::Serialize;

use crate::load::{BenchArgs, LoadResult};
use crate::report::{thousands, Grid};
use crate::util::{check_interrupted, median};

pub const XSK_PORT: u16 = 7000;
pub const KERNEL_PORT: u16 = 7001;

/// Kernel TCP vs xsk in one guest.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Perf {
    /// "host tap -> guest" (matrix) or "guest -> guest" (g2g).
    pub topology: String,
    /// Guest kernel label.
    pub kernel: String,
    /// Guest offloads of the guest it ran in.
    pub offloads: String,
    pub attach: String,
    pub runs: usize,
    pub run_secs: f64,
    pub kernel_rps: Vec<f64>,
    pub xsk_rps: Vec<f64>,
    pub kernel_p50_us: Vec<f64>,
    pub xsk_p50_us: Vec<f64>,
    pub median_kernel_rps: f64,
    pub median_xsk_rps: f64,
    /// median xsk / median kernel requests per second.
    pub rps_ratio: f64,
    pub median_kernel_p50_us: f64,
    pub median_xsk_p50_us: f64,
    pub errors: u64,
    pub caveat: String,
}

impl Perf {
    /// `runs` rounds of one run per backend against `server`; the backend that goes first
    /// alternates, so a drift in the machine's load does not favour one of them. `bench` runs
    /// one (arguments, "kernel" or "xsk", round).
    pub fn measure(
        &mut self,
        server: Ipv4Addr,
        mut bench: impl FnMut(&BenchArgs, &str, usize) -> Result<LoadResult>,
    ) -> Result<()> {
        for i in 0..self.runs {
            let order: [(&str, u16); 2] = if i % 2 == 0 {
                [("kernel", KERNEL_PORT), ("xsk", XSK_PORT)]
            } else {
                [("xsk", XSK_PORT), ("kernel", KERNEL_PORT)]
            };
            for (which, port) in order {
                check_interrupted()?;
                let b = BenchArgs {
                    connect: SocketAddrV4::new(server, port),
                    conns: 1,
                    depth: 1,
                    req_size: 64,
                    duration: Duration::from_secs_f64(self.run_secs),
                    max_requests: None,
                    drain_timeout: None,
                    rate: None,
                };
                let r = bench(&b, which, i)?;
                self.errors += r.errors + r.lost;
                if which == "kernel" {
                    self.kernel_rps.push(r.rps);
                    self.kernel_p50_us.push(r.p50_us);
                } else {
                    self.xsk_rps.push(r.rps);
                    self.xsk_p50_us.push(r.p50_us);
                }
            }
        }
        Ok(())
    }

    /// The medians and the ratio of what [`Perf::measure`] collected.
    pub fn summarize(&mut self) {
        self.median_kernel_rps = median(&self.kernel_rps);
        self.median_xsk_rps = median(&self.xsk_rps);
        self.rps_ratio = self.median_xsk_rps / self.median_kernel_rps;
        self.median_kernel_p50_us = median(&self.kernel_p50_us);
        self.median_xsk_p50_us = median(&self.xsk_p50_us);
    }
}

/// `heading`, one row per (kernel label, comparison), and the first one's caveat.
pub fn table(heading: &str, rows: &[(&str, &Perf)]) -> String {
    let mut g = Grid::new(&[
        "kernel",
        "attach",
        "runs",
        "kernel req/s",
        "xsk req/s",
        "xsk/kernel",
        "p50us kernel",
        "p50us xsk",
    ]);
    for (k, p) in rows {
        g.row(vec![
            k.to_string(),
            p.attach.clone(),
            format!("{}x{:.0}s", p.runs, p.run_secs),
            thousands(p.median_kernel_rps),
            thousands(p.median_xsk_rps),
            format!("{:.2}", p.rps_ratio),
            format!("{:.0}", p.median_kernel_p50_us),
            format!("{:.0}", p.median_xsk_p50_us),
        ]);
    }
    let mut s = String::from(heading);
    s.push_str(&g.render());
    if let Some((_, p)) = rows.first() {
        s.push_str(&format!("  caveat: {}\n", p.caveat));
    }
    s
}
