//! What `vm-tests cost` counts in the guest: a `vmt-stats` snapshot (CPU time by kind, virtio
//! kicks and interrupts, packets, the server's run time and sleeps), the difference of two
//! of them per request, and the helpers for -icount and the spread across runs.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::guest::Guest;
use crate::util::median;

/// USER_HZ of /proc/stat (100 on x86).
const USER_HZ_US: f64 = 10_000.0;

/// One `vmt-stats` snapshot.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub struct Snap {
    pub mono_ns: u64,
    #[serde(default)]
    pub cpu_ticks: Vec<u64>,
    #[serde(default)]
    pub idle_s: f64,
    #[serde(default)]
    pub irqs: BTreeMap<String, u64>,
    #[serde(default)]
    pub eth: BTreeMap<String, u64>,
    #[serde(default)]
    pub eth_error: Option<String>,
    #[serde(default)]
    pub sched_ns: BTreeMap<String, u64>,
    #[serde(default)]
    pub dev_rx_packets: u64,
    #[serde(default)]
    pub dev_tx_packets: u64,
    /// Online CPUs (0 from a vmt-stats that did not count them: taken as 1).
    #[serde(default)]
    pub cpus: u32,
    /// Voluntary context switches of the server's threads (its sleeps).
    #[serde(default)]
    pub vol_switches: BTreeMap<String, u64>,
    /// The server's own counters (its SIGUSR1 dump), when asked for (`--dump`).
    #[serde(default)]
    pub counters: Option<BTreeMap<String, f64>>,
    #[serde(default)]
    pub counters_error: Option<String>,
}

/// Takes a snapshot in the guest; `pids` is shell text (e.g. `$PID_cost_xsk`).
pub fn snap(g: &mut Guest, pids: &str) -> Result<Snap> {
    snap_with(g, pids, None)
}

/// [`snap`], first asking a server for its counters: `dump` is vmt-stats' `--dump=PID:LOG`.
pub fn snap_with(g: &mut Guest, pids: &str, dump: Option<&str>) -> Result<Snap> {
    let out = g.exec_ok(
        &format!("vmt-stats eth0 {pids}{}", dump.map(|d| format!(" {d}")).unwrap_or_default()),
        Duration::from_secs(30),
    )?;
    let line = out
        .lines()
        .find_map(|l| l.trim().strip_prefix("VMT-STATS "))
        .with_context(|| {
            format!("vmt-stats printed no VMT-STATS line (is it in the initramfs?): {out}")
        })?;
    let s: Snap = serde_json::from_str(line).context("parsing vmt-stats output")?;
    if let Some(e) = s.eth_error.as_ref().or(s.counters_error.as_ref()) {
        bail!("{e}");
    }
    Ok(s)
}

/// Counter sums of one snapshot that the cost is made of.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Counts {
    pub virt_ns: f64,
    /// CPU time the guest had: elapsed x CPUs (idle is summed over the CPUs).
    pub cap_ns: f64,
    pub idle_ns: f64,
    pub user_ticks: f64,
    pub sys_ticks: f64,
    pub irq_ticks: f64,
    pub softirq_ticks: f64,
    /// /proc/stat's iowait: idle time while a task waits in io_schedule (io_uring's wait for
    /// completions in 6.1), not counted in /proc/uptime's idle.
    pub iowait_ticks: f64,
    pub task_ns: f64,
    pub tx_kicks: f64,
    pub rx_kicks: f64,
    pub irq_in: f64,
    pub irq_out: f64,
    pub pkts_in: f64,
    pub pkts_out: f64,
    pub sleeps: f64,
}

/// A virtio_net per-queue statistic of direction `dir` ("rx"/"tx") ending in `what`; 6.1 names
/// them `rx_queue_0_kicks`, later kernels `rx0_kicks`: both start with the direction and carry
/// a queue number.
fn queue_stat(name: &str, dir: &str, what: &str) -> bool {
    name.starts_with(dir)
        && name.ends_with(what)
        && name.chars().any(|c| c.is_ascii_digit())
        && !name.contains("xdp")
}

impl Snap {
    pub fn counts(&self) -> Counts {
        let t = |i: usize| self.cpu_ticks.get(i).copied().unwrap_or(0) as f64;
        let sum_eth = |dir: &str, what: &str| -> f64 {
            self.eth
                .iter()
                .filter(|(k, _)| queue_stat(k, dir, what))
                .map(|(_, v)| *v as f64)
                .sum()
        };
        let sum_irq = |what: &str| -> f64 {
            self.irqs
                .iter()
                .filter(|(k, _)| k.contains(what))
                .map(|(_, v)| *v as f64)
                .sum()
        };
        Counts {
            virt_ns: self.mono_ns as f64,
            cap_ns: self.mono_ns as f64 * f64::from(self.cpus.max(1)),
            idle_ns: self.idle_s * 1e9,
            user_ticks: t(0) + t(1),
            sys_ticks: t(2),
            irq_ticks: t(5),
            softirq_ticks: t(6),
            iowait_ticks: t(4),
            task_ns: self.sched_ns.values().map(|v| *v as f64).sum(),
            tx_kicks: sum_eth("tx", "kicks"),
            rx_kicks: sum_eth("rx", "kicks"),
            irq_in: sum_irq("-input."),
            irq_out: sum_irq("-output."),
            pkts_in: self.dev_rx_packets as f64,
            pkts_out: self.dev_tx_packets as f64,
            sleeps: self.vol_switches.values().map(|v| *v as f64).sum(),
        }
    }
}

/// What one unit (a request, a packet) cost the guest.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct PerUnit {
    /// Guest CPU busy (elapsed x CPUs - idle, on the guest's clock), µs.
    pub cpu_us: f64,
    /// The tick-sampled split of /proc/stat, µs.
    pub user_us: f64,
    pub sys_us: f64,
    pub softirq_us: f64,
    pub irq_us: f64,
    /// Idle time with a task in io_schedule (/proc/stat's iowait, 10 ms resolution), µs; not
    /// in `cpu_us`. io_uring's wait for completions counts so in the 6.1 guest.
    pub iowait_us: f64,
    /// The server task's run time (schedstat), µs.
    pub task_us: f64,
    pub tx_kicks: f64,
    pub rx_kicks: f64,
    pub irq_in: f64,
    pub irq_out: f64,
    pub pkts_in: f64,
    pub pkts_out: f64,
    /// The server's voluntary context switches: the times it went to sleep (an epoll_wait,
    /// io_uring_enter or poll that blocked).
    pub sleeps: f64,
}

impl PerUnit {
    /// (b - a) / units, counter by counter.
    pub fn between(a: &Counts, b: &Counts, units: f64) -> PerUnit {
        let d = |f: fn(&Counts) -> f64| (f(b) - f(a)) / units;
        let virt = d(|c| c.cap_ns);
        let idle = d(|c| c.idle_ns);
        // /proc/uptime's idle leaves out iowait (idle CPUs with a task in io_schedule): that
        // is not busy either.
        let iowait_us = d(|c| c.iowait_ticks) * USER_HZ_US;
        PerUnit {
            cpu_us: (virt - idle) / 1e3 - iowait_us,
            iowait_us,
            user_us: d(|c| c.user_ticks) * USER_HZ_US,
            sys_us: d(|c| c.sys_ticks) * USER_HZ_US,
            softirq_us: d(|c| c.softirq_ticks) * USER_HZ_US,
            irq_us: d(|c| c.irq_ticks) * USER_HZ_US,
            task_us: d(|c| c.task_ns) / 1e3,
            tx_kicks: d(|c| c.tx_kicks),
            rx_kicks: d(|c| c.rx_kicks),
            irq_in: d(|c| c.irq_in),
            irq_out: d(|c| c.irq_out),
            pkts_in: d(|c| c.pkts_in),
            pkts_out: d(|c| c.pkts_out),
            sleeps: d(|c| c.sleeps),
        }
    }

    /// a - b counter by counter (the long run minus the short one).
    pub fn minus(a: &PerUnit, b: &PerUnit) -> PerUnit {
        PerUnit {
            cpu_us: a.cpu_us - b.cpu_us,
            user_us: a.user_us - b.user_us,
            sys_us: a.sys_us - b.sys_us,
            softirq_us: a.softirq_us - b.softirq_us,
            irq_us: a.irq_us - b.irq_us,
            iowait_us: a.iowait_us - b.iowait_us,
            task_us: a.task_us - b.task_us,
            tx_kicks: a.tx_kicks - b.tx_kicks,
            rx_kicks: a.rx_kicks - b.rx_kicks,
            irq_in: a.irq_in - b.irq_in,
            irq_out: a.irq_out - b.irq_out,
            pkts_in: a.pkts_in - b.pkts_in,
            pkts_out: a.pkts_out - b.pkts_out,
            sleeps: a.sleeps - b.sleeps,
        }
    }

    /// Replaces user/sys/softirq/irq by `shares`' proportions of `self.cpu_us`.
    pub fn split_by(&mut self, shares: &PerUnit) {
        let sum = shares.user_us + shares.sys_us + shares.softirq_us + shares.irq_us;
        if sum <= 0.0 {
            return;
        }
        let k = self.cpu_us / sum;
        self.user_us = shares.user_us * k;
        self.sys_us = shares.sys_us * k;
        self.softirq_us = shares.softirq_us * k;
        self.irq_us = shares.irq_us * k;
    }

    pub fn scale(&self, k: f64) -> PerUnit {
        PerUnit {
            cpu_us: self.cpu_us * k,
            user_us: self.user_us * k,
            sys_us: self.sys_us * k,
            softirq_us: self.softirq_us * k,
            irq_us: self.irq_us * k,
            iowait_us: self.iowait_us * k,
            task_us: self.task_us * k,
            tx_kicks: self.tx_kicks * k,
            rx_kicks: self.rx_kicks * k,
            irq_in: self.irq_in * k,
            irq_out: self.irq_out * k,
            pkts_in: self.pkts_in * k,
            pkts_out: self.pkts_out * k,
            sleeps: self.sleeps * k,
        }
    }

    /// Field-wise median of `v`.
    pub fn median_of(v: &[PerUnit]) -> PerUnit {
        let m = |f: fn(&PerUnit) -> f64| median(&v.iter().map(f).collect::<Vec<_>>());
        PerUnit {
            cpu_us: m(|p| p.cpu_us),
            user_us: m(|p| p.user_us),
            sys_us: m(|p| p.sys_us),
            softirq_us: m(|p| p.softirq_us),
            irq_us: m(|p| p.irq_us),
            iowait_us: m(|p| p.iowait_us),
            task_us: m(|p| p.task_us),
            tx_kicks: m(|p| p.tx_kicks),
            rx_kicks: m(|p| p.rx_kicks),
            irq_in: m(|p| p.irq_in),
            irq_out: m(|p| p.irq_out),
            pkts_in: m(|p| p.pkts_in),
            pkts_out: m(|p| p.pkts_out),
            sleeps: m(|p| p.sleeps),
        }
    }
}

/// N of an `-icount` value `shift=N[,...]` (None for auto or off).
pub fn icount_shift(spec: &str) -> Option<u32> {
    spec.split(',')
        .find_map(|p| p.strip_prefix("shift=")?.parse().ok())
        .filter(|s| *s < 16)
}

/// (max - min) / median of `v`, in percent.
pub fn spread_pct(v: &[f64]) -> f64 {
    if v.len() < 2 {
        return 0.0;
    }
    let max = v.iter().cloned().fold(f64::MIN, f64::max);
    let min = v.iter().cloned().fold(f64::MAX, f64::min);
    100.0 * (max - min) / median(v).abs()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_stat_names() {
        assert!(queue_stat("tx_queue_0_kicks", "tx", "kicks"));
        assert!(queue_stat("rx0_kicks", "rx", "kicks"));
        assert!(!queue_stat("rx_kicks", "rx", "kicks"));
        assert!(!queue_stat("rx_queue_0_xdp_tx", "rx", "kicks"));
    }

    #[test]
    fn difference_cancels_fixed_cost() {
        let c = |virt: f64, idle: f64, kicks: f64| Counts {
            virt_ns: virt,
            cap_ns: virt,
            idle_ns: idle,
            tx_kicks: kicks,
            ..Counts::default()
        };
        // fixed 1 ms + 10 us per request; short run 10 requests, long run 110
        let (c0, c1, c2) = (
            c(0.0, 0.0, 0.0),
            c(1.1e6, 0.0, 11.0),
            c(1.1e6 + 2.1e6, 0.0, 11.0 + 111.0),
        );
        let long = PerUnit::between(&c1, &c2, 1.0);
        let short = PerUnit::between(&c0, &c1, 1.0);
        let per = PerUnit::minus(&long, &short).scale(1.0 / 100.0);
        assert!((per.cpu_us - 10.0).abs() < 1e-9);
        assert!((per.tx_kicks - 1.0).abs() < 1e-9);
    }

    #[test]
    fn shifts() {
        assert_eq!(icount_shift("shift=4"), Some(4));
        assert_eq!(icount_shift("shift=2,sleep=off"), Some(2));
        assert_eq!(icount_shift("shift=auto"), None);
        assert_eq!(icount_shift("off"), None);
    }

    #[test]
    fn spread() {
        assert_eq!(spread_pct(&[1.0]), 0.0);
        assert!((spread_pct(&[99.0, 100.0, 101.0]) - 2.0).abs() < 1e-9);
    }
}
