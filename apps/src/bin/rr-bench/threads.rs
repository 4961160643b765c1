//! `--threads N`: N client threads on their own kernel transports, one merged report.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use anyhow::{ensure, Context, Result};
use stack::kernel::{KernelConfig, KernelTransport};
use rr_load::LoadMode;

use crate::Args;
use crate::drive::{drive, Measured, Rendezvous};
use crate::plan::Plan;

/// Share `i` of `total` split over `n`.
pub(crate) fn share(total: usize, n: usize, i: usize) -> usize {
    total / n + usize::from(i < total % n)
}

pub(crate) fn drive_all(kcfg: &KernelConfig, addr: SocketAddr, args: &Args, plan: &Plan) -> Result<Measured> {
    let n = args.threads as usize;
    ensure!(args.conns >= n, "--conns {} must be at least --threads {n}", args.conns);
    let timeout = args.warmup + args.duration + args.connect_timeout + args.drain_timeout + Duration::from_secs(30);
    let sync = Rendezvous::new(n, timeout);
    let runs: Vec<Result<Measured>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..n)
            .map(|i| {
                let mut a = args.clone();
                a.conns = share(args.conns, n, i);
                a.max_requests = args.max_requests.map(|m| share(m as usize, n, i).max(1) as u64);
                a.rate = args.rate.map(|r| r / n as f64);
                let mut p = plan.clone();
                if let LoadMode::OpenLoop { rate } = p.mode {
                    p.mode = LoadMode::OpenLoop { rate: rate / n as f64 };
                }
                if i > 0 {
                    // Thread 0 reports progress and reads the server's CPU for everyone.
                    a.quiet = true;
                    a.server_pid = None;
                }
                let (sync, mut kcfg) = (&sync, kcfg.clone());
                if kcfg.sources as usize >= n {
                    // --sources: each thread its own share of the addresses.
                    let first: usize = (0..i).map(|j| share(kcfg.sources as usize, n, j)).sum();
                    kcfg.bind = Ipv4Addr::from(u32::from(kcfg.bind).wrapping_add(first as u32));
                    kcfg.sources = share(kcfg.sources as usize, n, i) as u32;
                }
                s.spawn(move || {
                    let r = KernelTransport::new(kcfg)
                        .context("creating a kernel transport")
                        .and_then(|t| drive(t, addr, &a, &p, Some(sync)))
                        .map(|(_, m)| m);
                    if r.is_err() {
                        sync.abort();
                    }
                    r
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err(anyhow::anyhow!("client thread panicked"))))
            .collect()
    });
    let mut merged: Option<Measured> = None;
    for (i, r) in runs.into_iter().enumerate() {
        let m = r.with_context(|| format!("client thread {i}"))?;
        if !args.quiet {
            eprintln!("thread {i}: {}", m.report);
        }
        match &mut merged {
            None => merged = Some(m),
            // Thread 0's CPU counters are process-wide and span every thread's run;
            // requests (warm-up included) add up over the threads.
            Some(acc) => {
                acc.report.merge(&m.report);
                acc.warmup_requests += m.warmup_requests;
                acc.setup_s = acc.setup_s.max(m.setup_s);
            }
        }
    }
    merged.context("no client threads")
}
