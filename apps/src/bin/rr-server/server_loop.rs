//! One server loop on one transport: the service's codec and handler, the live figures
//! (--stats-interval, SIGUSR1, --metrics), the graceful stop, and its summary.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use apps::cpu::process_cpu;
use apps::stats::{self, MetricsEndpoint, Snapshot};
use apps::{usage_ensure, ServerSummary, Service};
use stack::codec::{Codec, LengthPrefixed, Stream};
use stack::kernel::KernelTransport;
use apps::resp::{Resp, RespCodec, RespLimits};
use stack::rr::{Echo, Handler, Kv, Server, ServerConfig, ServerStats};
use stack::transport::Transport;
use stack::uring::UringTransport;
use stack::xsk::XskTransport;

use crate::Args;
use crate::control::{interrupted, stop_reason, SignalWakes, Stop};

/// The backend's own counters, for the live figures (serialized, so new fields appear there
/// without edits).
pub(crate) trait BackendStats {
    fn stats_json(&self) -> Option<serde_json::Value>;
}

impl BackendStats for KernelTransport {
    fn stats_json(&self) -> Option<serde_json::Value> {
        serde_json::to_value(self.stats()).ok()
    }
}

impl BackendStats for UringTransport {
    fn stats_json(&self) -> Option<serde_json::Value> {
        serde_json::to_value(self.stats()).ok()
    }
}

impl BackendStats for XskTransport {
    fn stats_json(&self) -> Option<serde_json::Value> {
        serde_json::to_value(self.stats()).ok()
    }
}

/// Called with `ADDR:PORT` once the server listens.
type OnListen<'a> = dyn Fn(&str) -> Result<()> + Sync + 'a;

/// Picks codec and handler for the service, runs the server, returns the transport for the
/// backend's own report.
pub(crate) fn serve<T: Transport + BackendStats>(
    t: T,
    args: &Args,
    cfg: ServerConfig,
    ready: &OnListen<'_>,
    stop: &Stop,
) -> Result<(T, ServerSummary)> {
    match args.service {
        Service::Echo => {
            serve_with(t, LengthPrefixed::new(args.max_frame), Echo, args, cfg, ready, stop).map(drop_handler)
        }
        Service::Kv => {
            serve_with(t, LengthPrefixed::new(args.max_frame), Kv::with_limits(args.max_keys, args.max_memory), args, cfg, ready, stop)
                .map(drop_handler)
        }
        Service::TcpEcho => serve_with(t, Stream, Echo, args, cfg, ready, stop).map(drop_handler),
        Service::Resp => {
            let limits = RespLimits {
                max_bulk: args.max_frame,
                max_request: args.max_frame.saturating_mul(4),
                // A transaction may queue as much as one request may carry.
                max_queued_bytes: args.max_frame.saturating_mul(4),
                max_reply: args.max_frame.saturating_mul(4),
                max_keys: args.max_keys,
                max_memory: args.max_memory,
                ..RespLimits::default()
            };
            let (t, summary, h) = serve_with(t, RespCodec::new(limits), Resp::new(limits), args, cfg, ready, stop)?;
            let s = h.stats();
            println!(
                "resp: {} commands, {} error replies, {} keys ({} bytes) at exit, {} expired, {} writes refused by limits",
                s.commands,
                s.errors,
                h.len(),
                h.used_memory(),
                s.expired_keys,
                s.rejected_writes
            );
            Ok((t, summary))
        }
    }
}

fn drop_handler<T, H>((t, summary, _): (T, ServerSummary, H)) -> (T, ServerSummary) {
    (t, summary)
}

/// Zero-timeout steps at the stop: a close takes two (the read that finds the FIN, then its
/// `Closed`); more only while events keep coming.
const SETTLE_ROUNDS: usize = 8;

fn serve_with<T: Transport + BackendStats, C: Codec + Clone, H: Handler>(
    mut t: T,
    codec: C,
    handler: H,
    args: &Args,
    mut cfg: ServerConfig,
    ready: &OnListen<'_>,
    stop: &Stop,
) -> Result<(T, ServerSummary, H)> {
    let backend = t.name();
    if let Some(i) = args.stats_interval {
        usage_ensure!(!i.is_zero(), "--stats-interval must be positive");
    }
    let usr1 = Arc::new(AtomicBool::new(false));
    if let Err(e) = signal_hook::flag::register(signal_hook::consts::SIGUSR1, Arc::clone(&usr1)) {
        tracing::warn!("SIGUSR1 will not print the counters: {e}");
    }
    // Sleeps without a timeout when something wakes the loop for every reason to stop or
    // report (a timeout costs a kernel timer on every sleep); times (--duration, the stats
    // line, metrics) are the deadline of each step. Busy polling checks on every pass anyway.
    let _signal_wakes = if cfg.poll_timeout == Some(Duration::ZERO) {
        None
    } else {
        match t.waker().map_err(anyhow::Error::from).and_then(|w| Ok((SignalWakes::register(&w)?, w))) {
            Ok((ids, w)) => {
                stop.watch(w);
                cfg = cfg.with_poll_timeout(None);
                Some(ids)
            }
            Err(e) => {
                tracing::warn!(
                    "the {backend} backend's loop cannot be woken ({e:#}): it checks for a stop every {:?}",
                    cfg.poll_timeout.unwrap_or_default()
                );
                None
            }
        }
    };
    let mut server = Server::new(t, codec, handler, cfg).with_context(|| format!("listening on port {}", args.port))?;
    let listen = server.local_addr().map_or_else(|| format!("?:{}", args.port), |a| a.to_string());
    println!("rr-server: {} service on the {backend} backend, listening on {listen}", args.service);
    ready(&listen)?;
    let started = Instant::now();
    let cpu0 = process_cpu().unwrap_or_default();
    let deadline = args.duration.map(|d| started + d);
    let stop = || interrupted() || stop.is_set() || deadline.is_some_and(|d| Instant::now() >= d);
    let metrics = match args.metrics {
        Some(a) => {
            let ep = MetricsEndpoint::start(a).with_context(|| format!("--metrics {a}: listening"))?;
            println!("rr-server: metrics at http://{}/metrics", ep.local_addr());
            Some(ep)
        }
        None => None,
    };
    let service = args.service.to_string();
    let labels = [("backend", backend), ("service", service.as_str())];
    let snapshot = |server: &Server<T, C, H>| {
        let mut v = serde_json::to_value(server.stats()).unwrap_or_default();
        if let Some(m) = v.as_object_mut() {
            m.insert("connections".into(), server.connections().into());
            m.insert("uptime_s".into(), started.elapsed().as_secs_f64().into());
            let cpu = process_cpu().unwrap_or_default().saturating_sub(cpu0);
            m.insert("cpu_s".into(), cpu.as_secs_f64().into());
            if let Some(x) = server.transport().stats_json() {
                m.insert(backend.into(), x);
            }
        }
        Snapshot::new(&v)
    };
    const PUBLISH_EVERY: Duration = Duration::from_secs(1);
    let mut prev = snapshot(&server);
    let mut next_line = args.stats_interval.map(|i| started + i);
    let mut next_publish = metrics.as_ref().map(|_| started);
    let result = loop {
        let wake = next_line.into_iter().chain(next_publish).chain(deadline).min();
        let r = server.run_until_deadline(wake, || stop() || usr1.load(Ordering::Relaxed));
        if r.is_err() || stop() {
            break r;
        }
        let now = Instant::now();
        if usr1.swap(false, Ordering::Relaxed) {
            println!("counters (SIGUSR1):\n{}", snapshot(&server).dump());
        }
        if let (Some(t), Some(interval)) = (next_line, args.stats_interval) {
            if now >= t {
                let cur = snapshot(&server);
                println!("{}", stats::interval_line(&prev, &cur));
                prev = cur;
                // After a stall, skip the missed ticks instead of printing a burst.
                next_line = Some(t + interval * ((now - t).as_nanos() / interval.as_nanos() + 1) as u32);
            }
        }
        if let (Some(t), Some(ep)) = (next_publish, &metrics) {
            if now >= t {
                ep.publish(stats::prometheus("rr_server", &labels, &snapshot(&server)));
                next_publish = Some(now + PUBLISH_EVERY);
            }
        }
    };
    // Closes the stack has already seen (a client that closed just before the stop) are
    // delivered and counted as closed, not as open at exit; then, unless --shutdown-grace
    // is 0, the open connections are answered and closed.
    let result = result.and_then(|()| server.settle(SETTLE_ROUNDS).map(drop)).and_then(|()| {
        if args.shutdown_grace.is_zero() || server.connections() == 0 {
            return Ok(());
        }
        let st = server.shutdown(args.shutdown_grace)?;
        println!(
            "rr-server: shutdown: {} connections open, {} closed gracefully, {} closed at the {:?} deadline, \
             {} refused meanwhile; {} requests answered, {} bytes unanswered",
            st.open, st.graceful, st.forced, args.shutdown_grace, st.refused, st.answered, st.unanswered_bytes
        );
        Ok(())
    });
    let uptime = started.elapsed();
    let cpu = process_cpu().unwrap_or_default().saturating_sub(cpu0);
    let stats: ServerStats = server.stats();
    let open = server.connections();
    result.with_context(|| format!("server loop after {uptime:.1?} ({} requests served)", stats.requests))?;
    println!("rr-server: stopped by {} after {:.2} s", stop_reason(deadline), uptime.as_secs_f64());
    let (t, handler) = server.into_parts();
    Ok((
        t,
        ServerSummary {
            backend: args.backend,
            service: args.service,
            listen,
            uptime_s: uptime.as_secs_f64(),
            requests: stats.requests,
            bytes_in: stats.bytes_in,
            bytes_out: stats.bytes_out,
            accepted: stats.accepted,
            closed: stats.closed,
            open_at_exit: open,
            protocol_errors: stats.protocol_errors,
            io_errors: stats.io_errors,
            cpu_s: cpu.as_secs_f64(),
            xsk: None,
            recovery: None,
            uring: None,
        },
        handler,
    ))
}
