//! `--threads N`: one event loop per thread, each on its own transport, merged at exit.

use std::sync::mpsc;

use anyhow::{bail, Context, Result};
use apps::{RecoveryCounts, ServerSummary};
use stack::rr::ServerConfig;
use stack::transport::Transport;
use stack::xsk::XskTransport;

use crate::control::{ReadyFile, Stop};
use crate::{print_summary, write_json, Args};
use crate::server_loop::{serve, BackendStats};

/// Serves on every transport in its own thread. The ready file is written once all of them
/// listen; if one thread fails the others stop too.
pub(crate) fn serve_all<T: Transport + BackendStats + Send>(
    ts: Vec<T>,
    args: &Args,
    cfg: ServerConfig,
    ready: &ReadyFile<'_>,
) -> Result<(Vec<T>, ServerSummary)> {
    let n = ts.len();
    let stop = Stop::new();
    let (tx, rx) = mpsc::channel::<String>();
    let results = std::thread::scope(|s| {
        let handles: Vec<_> = ts
            .into_iter()
            .enumerate()
            .map(|(i, t)| {
                let (tx, cfg, stop) = (tx.clone(), cfg.clone(), &stop);
                std::thread::Builder::new()
                    .name(format!("rr-server-{i}"))
                    .spawn_scoped(s, move || {
                        let notify =
                            move |l: &str| tx.send(l.to_string()).map_err(|_| anyhow::anyhow!("main gone"));
                        let r = serve(t, args, cfg, &notify, stop);
                        if r.is_err() {
                            stop.set();
                        }
                        r
                    })
                    .expect("spawning a server thread")
            })
            .collect();
        drop(tx);
        let listening: Vec<String> = rx.iter().take(n).collect();
        if listening.len() == n {
            if let Err(e) = ready.notifier()(&listening[0]) {
                tracing::error!("{e:#}");
                stop.set();
            }
            println!("rr-server: {n} threads listening on {}", listening[0]);
        }
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err(anyhow::anyhow!("thread panicked"))))
            .collect::<Vec<_>>()
    });
    let mut ts = Vec::with_capacity(n);
    let mut merged: Option<ServerSummary> = None;
    for (i, r) in results.into_iter().enumerate() {
        let (t, s) = r.with_context(|| format!("server thread {i}"))?;
        println!("rr-server: thread {i}: {} requests, {} connections", s.requests, s.accepted);
        merged = Some(match merged {
            None => s,
            Some(m) => merge(m, &s),
        });
        ts.push(t);
    }
    Ok((ts, merged.context("no threads")?))
}

/// Sums the counters. CPU and uptime are the process's, which every thread measured.
fn merge(mut a: ServerSummary, b: &ServerSummary) -> ServerSummary {
    a.requests += b.requests;
    a.bytes_in += b.bytes_in;
    a.bytes_out += b.bytes_out;
    a.accepted += b.accepted;
    a.closed += b.closed;
    a.open_at_exit += b.open_at_exit;
    a.protocol_errors += b.protocol_errors;
    a.io_errors += b.io_errors;
    a.uptime_s = a.uptime_s.max(b.uptime_s);
    a.cpu_s = a.cpu_s.max(b.cpu_s);
    a
}

pub(crate) fn xsk(
    xcfg: stack::xsk::XskConfig,
    args: &Args,
    cfg: ServerConfig,
    ready: &ReadyFile<'_>,
    user: Option<(u32, u32)>,
) -> Result<()> {
    let iface = xcfg.port.ifname.clone();
    let ts = XskTransport::shards(xcfg).with_context(|| format!("starting AF_XDP stack shards on {iface}"))?;
    // Before the server threads start: they inherit the reduced capabilities.
    args.deploy.after_setup(user)?;
    if ts.len() != args.threads as usize {
        bail!(
            "{iface} has {} RX queues but --threads is {}: one shard per queue (ethtool -L {iface} combined {})",
            ts.len(),
            args.threads,
            args.threads
        );
    }
    println!("xsk port: {}", ts[0].port().features());
    println!("xsk stack: {} ({}), {} shards", ts[0].addr(), args.xsk.addr, ts.len());
    let (ts, mut summary) = serve_all(ts, args, cfg, ready)?;
    let mut shards = Vec::new();
    let mut failed = None;
    let mut recovery = RecoveryCounts::default();
    for (i, mut t) in ts.into_iter().enumerate() {
        let stats = t.stats();
        let audit = t.audit();
        println!(
            "xsk shard {i}: accepted {} closed {} live sockets {}; device {}",
            stats.accepted,
            stats.closed,
            stats.live_sockets,
            serde_json::to_string(&stats.device).unwrap_or_default()
        );
        let r = RecoveryCounts::from(stats.recovery);
        println!("xsk shard {i} loss recovery: {}", r.line());
        recovery.add(&r);
        match &audit {
            Ok(a) => println!("frame audit shard {i}: ok {a:?}"),
            Err(e) => {
                println!("frame audit shard {i}: FAILED: {e}");
                failed = Some(e.to_string());
            }
        }
        shards.push(serde_json::json!({
            "stats": stats,
            "audit": match &audit { Ok(a) => serde_json::json!(a), Err(e) => serde_json::json!({ "error": e }) },
        }));
        drop(t);
    }
    summary.xsk = Some(serde_json::json!({ "shards": shards }));
    summary.recovery = Some(recovery);
    print_summary(&summary);
    println!("xdp program detached from {iface}");
    write_json(args, &summary)?;
    if let Some(e) = failed {
        bail!("UMEM frame audit failed: {e}");
    }
    Ok(())
}
