//! One benchmark on one transport: the warm-up, the measured run, and the CPU counters read
//! around it.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{bail, ensure, Context, Result};

use apps::cpu::pid_cpu;
use apps::netrx::NetRxTimes;
use apps::{Backend, BenchResult, CpuSample, CpuWindow, KvWorkload, Progress, Service};
use stack::codec::{Codec, LengthPrefixed, Stream};
use stack::kernel::{KernelBusyPoll, KernelConfig, KernelTransport};
use apps::resp::RespWorkload;
use rr_load::{Churn, ChurnConfig, ChurnPattern, Client, ClientConfig, ClientReport, EchoWorkload, Workload};
use stack::transport::Transport;
use stack::uring::{UringBusyPoll, UringConfig, UringTransport};
use stack::xsk::XskTransport;
use xsk_lab::lab;

use crate::plan::Plan;
use crate::result::make_result;
use crate::threads;
use crate::{Args, Outcome, Pattern};

pub(crate) fn bench(args: &Args, plan: &Plan) -> Result<Outcome> {
    let Some(addr) = args.connect else { bail!("--connect is required") };
    match args.backend {
        Backend::Kernel => {
            match apps::raise_nofile_limit(args.conns as u64 + 64) {
                Ok(n) if (n as usize) < args.conns + 16 => {
                    bail!("the open-file limit {n} is too low for --conns {} (raise ulimit -n)", args.conns)
                }
                Ok(_) => {}
                Err(e) => tracing::warn!("could not raise the open-file limit: {e}"),
            }
            // Busy polling as the kernel's authors tune it (prefer-busy-poll, a budget, the epoll
            // instance's parameters where the kernel has them), as rr-server's.
            let busy = args.busy_poll.map(|usecs| KernelBusyPoll::new(usecs).with_prefer(true));
            let kcfg = KernelConfig::default().with_bind(args.bind).with_busy(busy).with_sources(args.sources);
            if args.threads > 1 {
                let m = threads::drive_all(&kcfg, addr, args, plan)?;
                return Ok(Outcome { result: m.result(args, plan, addr), audit_error: None });
            }
            let t = KernelTransport::new(kcfg).context("creating the kernel transport")?;
            let (_t, m) = drive(t, addr, args, plan, None)?;
            Ok(Outcome { result: m.result(args, plan, addr), audit_error: None })
        }
        Backend::Uring => {
            ensure!(args.threads <= 1, "--threads {} with --backend uring: one client thread only", args.threads);
            let _ = apps::raise_nofile_limit(args.conns as u64 + 64);
            let ucfg = UringConfig::default()
                .with_bind(args.bind)
                .with_sources(args.sources)
                .with_busy_poll(args.busy_poll.map(|usecs| UringBusyPoll { usecs, prefer: true }));
            let t = UringTransport::new(ucfg).context("creating the io_uring transport")?;
            eprintln!("{}", t.features());
            let (_t, m) = drive(t, addr, args, plan, None)?;
            Ok(Outcome { result: m.result(args, plan, addr), audit_error: None })
        }
        Backend::Xsk => {
            let xcfg = args.xsk.config(args.conns.max(64), args.busy_poll)?;
            let iface = xcfg.port.ifname.clone();
            let recovery = apps::describe_recovery(&xcfg.engine.recovery);
            let t = XskTransport::new(xcfg)
                .with_context(|| format!("starting the AF_XDP stack on {iface} queue {}", args.xsk.queue))?;
            eprintln!("xsk port: {}", t.port().features());
            eprintln!("xsk stack: {} ({})", t.addr(), args.xsk.addr);
            eprintln!("xsk loss recovery: {recovery}");
            let (mut t, m) = drive(t, addr, args, plan, None)?;
            let mut result = m.result(args, plan, addr);
            let stats = t.stats();
            if let Some(st) = &stats.stages {
                eprintln!("xsk stages: {st}");
            }
            let audit = t.audit();
            // Dropping the transport detaches the XDP program.
            drop(t);
            match &audit {
                Ok(a) => eprintln!("xsk client frame audit: ok {a:?}"),
                Err(e) => eprintln!("xsk client frame audit: FAILED: {e}"),
            }
            result.xsk = Some(serde_json::json!({
                "stats": stats,
                "audit": match &audit { Ok(a) => serde_json::json!(a), Err(e) => serde_json::json!({ "error": e }) },
            }));
            result.recovery = Some(stats.recovery.into());
            Ok(Outcome { result, audit_error: audit.err() })
        }
    }
}

pub(crate) fn drive<T: Transport>(
    t: T,
    addr: SocketAddr,
    args: &Args,
    plan: &Plan,
    sync: Option<&threads::Rendezvous>,
) -> Result<(T, Measured)> {
    match args.service {
        Service::Echo => {
            drive_with(t, LengthPrefixed::new(args.max_frame), EchoWorkload::fixed(plan.size), addr, args, plan, sync)
        }
        Service::TcpEcho => drive_with(t, Stream, EchoWorkload::fixed(plan.size), addr, args, plan, sync),
        Service::Kv => drive_with(
            t,
            LengthPrefixed::new(args.max_frame),
            KvWorkload::new(plan.size, args.kv_keys),
            addr,
            args,
            plan,
            sync,
        ),
        Service::Resp => {
            drive_with(t, Stream, RespWorkload::new(plan.size, args.kv_keys), addr, args, plan, sync)
        }
    }
}

/// Warm-up (discarded), then the measured run with CPU counters read around it.
fn drive_with<T: Transport, C: Codec + Clone, W: Workload>(
    mut t: T,
    codec: C,
    workload: W,
    addr: SocketAddr,
    args: &Args,
    plan: &Plan,
    sync: Option<&threads::Rendezvous>,
) -> Result<(T, Measured)> {
    let mut progress = Progress::new(CpuWindow::new(workload, args.server_pid), !args.quiet);
    let base = ClientConfig::new(addr)
        .with_connections(args.conns)
        .with_mode(plan.mode)
        .with_connect_timeout(args.connect_timeout)
        .with_drain_timeout(args.drain_timeout)
        .with_busy_poll(args.busy_poll.is_some());
    let mut warmup_requests = 0;
    if !args.warmup.is_zero() {
        progress.begin("warm-up");
        progress.inner_mut().arm(None);
        let cfg = base.clone().with_duration(args.warmup).with_max_requests(None);
        let report;
        (t, progress, report) = phase(t, codec.clone(), progress, cfg, args.pattern);
        let report = report.with_context(|| format!("warm-up against {addr}"))?;
        if !args.quiet {
            eprintln!("warm-up: {report}");
        }
        if report.errors > 0 {
            tracing::warn!("the warm-up had {} errors", report.errors);
        }
        warmup_requests = report.requests;
        ensure!(!lab::interrupted(), "interrupted during the warm-up");
    }

    // Threads start measuring together, so the process-wide CPU counters cover every run.
    if let Some(r) = sync {
        r.wait()?;
    }
    if let Some(pid) = args.server_pid {
        pid_cpu(pid).with_context(|| format!("--server-pid {pid}: reading its CPU time from /proc/{pid}"))?;
        if !args.no_netrx {
            if let Err(e) = apps::netrx::install(pid) {
                static ONCE: std::sync::Once = std::sync::Once::new();
                ONCE.call_once(|| {
                    tracing::warn!("NET_RX accounting unavailable ({e}): no own-receive server CPU figure")
                });
            }
        }
    }
    let before = CpuSample::now(args.server_pid).context("reading CPU counters")?;
    progress.begin("run");
    progress.inner_mut().arm(Some(args.duration));
    let cfg = base.with_duration(args.duration).with_max_requests(args.max_requests);
    let (t, progress, report) = phase(t, codec, progress, cfg, args.pattern);
    if let Some(r) = sync {
        if report.is_err() {
            r.abort();
        }
        r.wait()?;
    }
    let after = CpuSample::now(args.server_pid).context("reading CPU counters")?;
    let report = report.with_context(|| format!("measured run against {addr}"))?;
    let window = progress.inner();
    // The window closes at the end of --duration; a run that stopped earlier (--max-requests)
    // or got no response after it ends at the run's end.
    let start = window.start.unwrap_or(before);
    let end = window.end.unwrap_or(after);
    let setup = start.snap.at.saturating_duration_since(before.snap.at);
    if args.server_pid.is_some() && end.server.is_none() {
        tracing::warn!("the server process is gone: no server CPU figures");
    }
    let usage = end.snap.since(&start.snap);
    let server_cpu = start.server.zip(end.server).map(|(a, b)| b.saturating_sub(a));
    let netrx = start.netrx.zip(end.netrx).map(|(a, b)| b - a);
    Ok((t, Measured { report, usage, server_cpu, netrx, warmup_requests, setup_s: setup.as_secs_f64() }))
}

/// One run of the load (warm-up or measured): requests over open connections, or
/// connections opened and closed (`--pattern`).
pub(crate) fn phase<T: Transport, C: Codec + Clone, W: Workload>(
    t: T,
    codec: C,
    workload: W,
    cfg: ClientConfig,
    pattern: Pattern,
) -> (T, W, Result<ClientReport, rr_load::ClientError>) {
    let churn = match pattern {
        Pattern::Rr => {
            let mut client = Client::new(t, codec, workload, cfg);
            let report = client.run();
            let (t, w) = client.into_parts();
            return (t, w, report);
        }
        Pattern::Churn => ChurnPattern::Churn,
        Pattern::Storm => ChurnPattern::Storm,
    };
    let ccfg = ChurnConfig::new(cfg.addr)
        .with_concurrency(cfg.connections)
        .with_pattern(churn)
        .with_duration(cfg.duration)
        .with_max_connections(cfg.max_requests)
        .with_connect_timeout(cfg.connect_timeout)
        .with_drain_timeout(cfg.drain_timeout);
    let mut c = Churn::new(t, codec, workload, ccfg);
    let report = c.run();
    let (t, w) = c.into_parts();
    (t, w, report)
}

/// One measured run: the client's report and the CPU counters read around it.
pub(crate) struct Measured {
    pub(crate) report: ClientReport,
    pub(crate) usage: apps::cpu::CpuUsage,
    pub(crate) server_cpu: Option<Duration>,
    /// NET_RX softirq time by context over the same window (see `apps::netrx`).
    pub(crate) netrx: Option<NetRxTimes>,
    pub(crate) warmup_requests: u64,
    pub(crate) setup_s: f64,
}

impl Measured {
    pub(crate) fn result(&self, args: &Args, plan: &Plan, addr: SocketAddr) -> BenchResult {
        let mut r = make_result(&self.report, args, plan, addr, &self.usage, self.server_cpu, self.netrx);
        r.warmup_requests = self.warmup_requests;
        r.setup_s = self.setup_s;
        r
    }
}
