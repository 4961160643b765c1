//! The `vm-tests matrix` table, and the port's facts gathered from its cases.

use serde::Serialize;

use crate::compare::{self, Perf};
use crate::g2g::{self, G2g};
use crate::matrix_case::{Case, Kill9};
use crate::netem::{self, NetemRun};
use crate::report::{modules, thousands, Grid, KvTable, ReportHead};
use crate::server;

/// A guest kernel of the matrix and what the port said about it.
#[derive(Debug, Clone, Default, Serialize)]
pub struct KernelInfo {
    pub label: String,
    pub release: String,
    pub package: String,
    pub source: String,
    pub packages: Vec<String>,
    pub modules_loaded: Vec<String>,
    pub modules_builtin: Vec<String>,
    /// The `xsk port: ...` line of the first working case per attach mode.
    pub port_lines: std::collections::BTreeMap<String, String>,
    /// Warnings of the port about the kernel (missing features), deduplicated.
    pub kernel_warnings: Vec<String>,
}

#[derive(Debug, Default, Serialize)]
pub struct MatrixReport {
    #[serde(flatten)]
    pub head: ReportHead,
    pub accel: String,
    pub accel_note: String,
    pub kernels: Vec<KernelInfo>,
    pub cases: Vec<Case>,
    pub perf: Vec<Perf>,
    pub kill9: Vec<Kill9>,
    pub netem: Vec<NetemRun>,
    pub g2g: Vec<G2g>,
    /// Errors that stopped a kernel's part early (a guest that did not boot, ...).
    pub errors: Vec<String>,
    pub total_s: f64,
    pub logs: String,
}

/// Port lines per kernel and attach mode, and the port's kernel-feature warnings.
pub fn fill_port_facts(rep: &mut MatrixReport) {
    for ki in rep.kernels.iter_mut() {
        for c in rep.cases.iter().filter(|c| c.kernel == ki.label) {
            if let Some(p) = &c.port_line {
                ki.port_lines
                    .entry(c.attach.clone())
                    .or_insert_with(|| p.trim_start_matches("xsk port: ").to_string());
            }
            for w in &c.warnings {
                if server::short_warning(w).is_some() {
                    continue; // device warnings stay with their case
                }
                let msg = w
                    .split_once("xsk_io::port: ")
                    .map(|(_, m)| m)
                    .unwrap_or(w)
                    .trim()
                    .to_string();
                if !ki.kernel_warnings.contains(&msg) {
                    ki.kernel_warnings.push(msg);
                }
            }
        }
    }
}

pub fn table(r: &MatrixReport) -> String {
    let mut t = KvTable::new();
    t.row(
        "result",
        match &r.head.failure {
            None => r.head.result.clone(),
            Some(f) => format!("{}:\n{f}", r.head.result),
        },
    );
    t.machine(&r.head.host_kernel, &r.head.qemu, &r.accel, &r.accel_note);
    for k in &r.kernels {
        t.row(
            format!("kernel {}", k.label),
            format!(
                "{} ({}; {})\nmodules: {}",
                k.release,
                k.package,
                k.source,
                modules(&k.modules_loaded, &k.modules_builtin)
            ),
        );
    }
    t.row("time", format!("{:.1} s", r.total_s));
    t.row("logs", r.logs.clone());
    let mut s = t.render("vm-tests matrix");

    s.push_str("\n== cases: rr-server --backend xsk in the guest, rr-bench --backend kernel + byte check from the host\n");
    let mut grid = Grid::new(&[
        "kernel", "offloads", "queues", "mtu", "attach", "addr", "outcome", "req/s", "p50us",
        "detail",
    ]);
    for c in &r.cases {
        let (rps, p50) = match &c.load {
            Some(l) => (thousands(l.rps), format!("{:.0}", l.p50_us)),
            None => ("-".into(), "-".into()),
        };
        grid.row(vec![
            c.kernel.clone(),
            c.offloads.clone(),
            c.queues.to_string(),
            c.mtu.to_string(),
            c.attach.clone(),
            c.addr.clone(),
            c.outcome.clone(),
            rps,
            p50,
            match &c.rx_queues {
                Some(q) if c.outcome != "FAIL" && c.detail.is_empty() => q.clone(),
                Some(q) if c.outcome != "FAIL" => {
                    format!("{q}; {}", c.detail.replace('\n', " | "))
                }
                _ => c.detail.replace('\n', " | "),
            },
        ]);
    }
    s.push_str(&grid.render());

    let tuned: Vec<&Case> = r
        .cases
        .iter()
        .filter(|c| c.queues > 1 || c.mtu != 1500)
        .collect();
    if !tuned.is_empty() {
        s.push_str("\n== the port's tune lines in the queue-pair and MTU cases\n");
        let mut grid = Grid::new(&["kernel", "queues", "mtu", "attach", "addr", "tune"]);
        for c in tuned {
            for l in c.tune.iter().filter(|l| tune_relevant(l)) {
                grid.row(vec![
                    c.kernel.clone(),
                    c.queues.to_string(),
                    c.mtu.to_string(),
                    c.attach.clone(),
                    c.addr.clone(),
                    short_tune(l),
                ]);
            }
        }
        s.push_str(&grid.render());
    }

    if r.kernels.iter().any(|k| !k.port_lines.is_empty()) {
        s.push_str("\n== port features per kernel (the `xsk port:` line, and what the port warned about the kernel)\n");
        let mut grid = Grid::new(&["kernel", "attach", "port"]);
        for k in &r.kernels {
            for (attach, line) in &k.port_lines {
                grid.row(vec![k.label.clone(), attach.clone(), line.clone()]);
            }
            for w in &k.kernel_warnings {
                grid.row(vec![k.label.clone(), "warn".into(), w.clone()]);
            }
        }
        s.push_str(&grid.render());
    }

    if let Some(first) = r.perf.first() {
        let rows: Vec<(&str, &Perf)> = r.perf.iter().map(|p| (p.kernel.as_str(), p)).collect();
        s.push_str(&compare::table(
            &format!(
                "\n== kernel TCP vs xsk (offloads {}, 1 conn, depth 1, 64 B, median of alternating runs)\n",
                first.offloads
            ),
            &rows,
        ));
    }
    if !r.kill9.is_empty() {
        s.push_str("\n== kill -9 of rr-server in the guest (ip -d link show dev eth0)\n");
        let mut grid = Grid::new(&[
            "kernel",
            "attach",
            "xdp before",
            "xdp after",
            "outcome",
            "detail",
        ]);
        for k in &r.kill9 {
            grid.row(vec![
                k.kernel.clone(),
                k.attach.clone(),
                k.xdp_before.clone().unwrap_or_else(|| "none".into()),
                k.xdp_after.clone().unwrap_or_else(|| "none".into()),
                k.outcome.clone(),
                k.detail.clone(),
            ]);
        }
        s.push_str(&grid.render());
    }
    if !r.netem.is_empty() {
        s.push_str(&netem::grid(&r.netem));
    }
    if !r.g2g.is_empty() {
        s.push_str(&g2g::tables(&r.g2g));
    }
    s
}

/// Tune lines worth showing for the queue and MTU cases: channels, queues and MTU.
pub fn tune_relevant(l: &str) -> bool {
    if !l.contains(" tune ") {
        return false; // kernel-feature warnings: in the port features table
    }
    let l = l.to_ascii_lowercase();
    ["channel", "combined", "queue", "mtu"]
        .iter()
        .any(|k| l.contains(k))
}

/// A tune line without its timestamp and log target.
pub fn short_tune(l: &str) -> String {
    let l = l.split_once(" tune ").map(|(_, r)| r).unwrap_or(l);
    l.trim().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tune_line_shortened() {
        let l = "2026-11-30T00:25:21Z  INFO xsk_io::port: tune eth0: virtio_net: combined channels: 2 -> 1";
        assert_eq!(short_tune(l), "eth0: virtio_net: combined channels: 2 -> 1");
        assert!(tune_relevant(l));
        assert!(!tune_relevant("INFO xsk_io::port: tune eth0: gro off"));
        assert!(!tune_relevant(
            "WARN xsk_io::port: kernel has no XDP_GENERIC_XMIT_BATCH: copy-mode TX takes the queue lock"
        ));
    }
}
