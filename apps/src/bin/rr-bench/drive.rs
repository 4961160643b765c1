//! One benchmark on one transport: the warm-up, the measured run, and the CPU counters read
//! around it; and the rendezvous where `--threads` client threads start measuring together.

use std::net::SocketAddr;
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use anyhow::{ensure, Context, Result};
use apps::cpu::pid_cpu;
use apps::netrx::NetRxTimes;
use apps::{BenchResult, CpuSample, CpuWindow, KvWorkload, Progress, Service};
use stack::codec::{Codec, LengthPrefixed, Stream};
use apps::resp::RespWorkload;
use rr_load::{Churn, ChurnConfig, ChurnPattern, Client, ClientConfig, ClientReport, EchoWorkload, Workload};
use stack::transport::Transport;
use xsk_lab::signals;

use crate::{Args, Pattern};
use crate::plan::Plan;
use crate::result::make_result;

pub(crate) fn drive<T: Transport>(
    t: T,
    addr: SocketAddr,
    args: &Args,
    plan: &Plan,
    sync: Option<&Rendezvous>,
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
    sync: Option<&Rendezvous>,
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
        ensure!(!signals::interrupted(), "interrupted during the warm-up");
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

/// A barrier that a failing thread can abort and that gives up after a timeout, so one
/// thread's error cannot leave the others waiting for ever.
pub(crate) struct Rendezvous {
    n: usize,
    state: Mutex<(usize, u64, bool)>,
    cv: Condvar,
    timeout: Duration,
}

impl Rendezvous {
    pub(crate) fn new(n: usize, timeout: Duration) -> Self {
        Rendezvous { n, state: Mutex::new((0, 0, false)), cv: Condvar::new(), timeout }
    }

    pub(crate) fn wait(&self) -> Result<()> {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let generation = st.1;
        st.0 += 1;
        if st.0 == self.n {
            st.0 = 0;
            st.1 += 1;
            self.cv.notify_all();
            return Ok(());
        }
        let (st, to) = self
            .cv
            .wait_timeout_while(st, self.timeout, |s| s.1 == generation && !s.2)
            .unwrap_or_else(|e| e.into_inner());
        ensure!(!st.2, "another client thread failed");
        ensure!(!to.timed_out(), "client threads did not meet within {:?}", self.timeout);
        Ok(())
    }

    pub(crate) fn abort(&self) {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).2 = true;
        self.cv.notify_all();
    }
}
