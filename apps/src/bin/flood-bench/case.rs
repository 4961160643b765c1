//! One case: its lab, the server, the idle connections, the measurement, and its result.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use serde::Serialize;
use serde_json::Value;
use xsk_lab::signals;
use xsk_lab::lab::{Lab, LabConfig};

use crate::{Args, Case, LAB_TAG, PORT, XSK_HOST};
use crate::echo::{fresh_connections, measure, Fresh};
use crate::idle::Holders;
use crate::server::{kernel_drops, nofile_limit, read_rss, start_server, tcp_ext};
use crate::syn::{flood, FloodPlan};
use crate::threads::{join, spawn_in};

#[derive(Clone, Debug, Default, Serialize)]
struct RssSample {
    t_s: f64,
    rss_kib: u64,
    pub(crate) hwm_kib: u64,
}

#[derive(Debug, Serialize)]
pub(crate) struct CaseResult {
    pub(crate) case: Case,
    pub(crate) backend: &'static str,
    pub(crate) flood: bool,
    pub(crate) idle_requested: usize,
    idle_opened: usize,
    idle_open_s: f64,
    /// Idle connections that answered an echo request after the measurement.
    pub(crate) idle_held: usize,
    pub(crate) syns_sent: u64,
    syn_send_errors: u64,
    pub(crate) syn_pps: f64,
    measured_s: f64,
    pub(crate) requests: u64,
    pub(crate) request_errors: u64,
    pub(crate) p50_us: f64,
    pub(crate) p99_us: f64,
    pub(crate) p999_us: f64,
    pub(crate) max_us: f64,
    pub(crate) rss_before_kib: u64,
    pub(crate) rss_max_kib: u64,
    rss_end_kib: u64,
    pub(crate) hwm_kib: u64,
    /// RSS growth from the middle to the end of the measurement.
    rss_growth_second_half_kib: i64,
    /// xsk: StackStats.drops; kernel: TcpExt counter deltas of ns_a over the measurement.
    pub(crate) drops: Value,
    /// Fresh connections opened during the measurement (`--fresh-every`).
    pub(crate) fresh: Fresh,
    /// Server summary excerpts: CPU seconds, accepted; xsk also half-open sockets at exit.
    pub(crate) server_stack: Value,
    server_exit: String,
    /// /proc/loadavg at the end of the measurement: the machine is shared, a busy one starves
    /// the server of CPU.
    pub(crate) loadavg: String,
    samples: Vec<RssSample>,
}

impl CaseResult {
    pub(crate) fn line(&self) -> String {
        format!(
            "{}: held {}/{} idle, {} SYNs ({:.0}/s), RSS {} -> max {} MiB, p50/p99/p99.9 {:.0}/{:.0}/{:.0} us over {} requests",
            self.case.name(),
            self.idle_held,
            self.idle_requested,
            apps::group_digits(self.syns_sent),
            self.syn_pps,
            self.rss_before_kib >> 10,
            self.rss_max_kib >> 10,
            self.p50_us,
            self.p99_us,
            self.p999_us,
            apps::group_digits(self.requests)
        )
    }
}

pub(crate) fn run_case(args: &Args, case: Case, exe: &Path, dir: &Path, seed: u64) -> Result<CaseResult> {
    let progress = !args.quiet;
    if progress {
        eprintln!("== {}: building the lab", case.name());
    }
    let lab = Lab::new(&LabConfig::new(LAB_TAG)).context("building the veth lab")?;
    let _peer_xdp = if args.peer_xdp {
        Some(lab.peer_xdp_pass().context("an XDP program on ns_b's veth")?)
    } else {
        None
    };
    let o = lab.addr_a.octets();
    let target = if case.xsk() { Ipv4Addr::new(o[0], o[1], o[2], XSK_HOST) } else { lab.addr_a };
    // One client address has ~64k ports towards one server port: enough for 60k connections.
    lab.ns_b
        .run(&["sysctl", "-q", "-w", "net.ipv4.ip_local_port_range=1024 65535"])
        .context("widening ip_local_port_range in ns_b")?;
    let mut server = start_server(args, case, exe, &lab, dir, target)?;
    let pid = server.pid();
    let to = SocketAddrV4::new(target, PORT);

    // The kernel backend holds a descriptor per connection: past rr-server's open-file limit
    // (the hard limit, without CAP_SYS_RESOURCE) connections stay in the accept queue.
    let mut idle_requested = args.idle_conns;
    if !case.xsk() {
        if let Some(lim) = nofile_limit(pid) {
            let fit = lim.saturating_sub(64);
            if fit < idle_requested {
                println!(
                    "{}: rr-server's open-file limit is {lim}: {fit} idle connections instead of {idle_requested}",
                    case.name()
                );
                idle_requested = fit;
            }
        }
    }
    if progress {
        eprintln!("== {}: opening {idle_requested} idle connections to {to}", case.name());
    }
    let t_open = Instant::now();
    let mut idle = Holders::start(&lab.ns_b, to, idle_requested, args.idle_ping)?;
    let idle_opened = idle.collect("opened")?;
    let idle_open_s = t_open.elapsed().as_secs_f64();
    if progress {
        eprintln!("   {idle_opened} open after {idle_open_s:.1} s");
    }
    ensure!(!signals::interrupted(), "interrupted");
    let est = join(spawn_in(&lab.ns_b, "est-open", move || {
        let s = TcpStream::connect_timeout(&SocketAddr::V4(to), Duration::from_secs(5))?;
        s.set_nodelay(true)?;
        Ok(s)
    })?)
    .context("opening the established connection")?;
    // Let the accepts and the stack's state settle before the reference sample.
    std::thread::sleep(Duration::from_millis(500));

    let samples = Arc::new(Mutex::new(Vec::<RssSample>::new()));
    let netstat_before = tcp_ext(pid);
    let (rss_before, _) = read_rss(pid).context("reading the server's /proc/PID/status")?;
    let start = Arc::new(Barrier::new(2 + usize::from(case.flood()) + usize::from(!args.fresh_every.is_zero())));
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let sent = Arc::new(AtomicU64::new(0));
    let lat = {
        let (start, stop, done) = (start.clone(), stop.clone(), done.clone());
        let req_size = args.req_size;
        std::thread::Builder::new().name("latency".into()).spawn(move || measure(est, req_size, start, stop, done))?
    };
    let fresh = if args.fresh_every.is_zero() {
        None
    } else {
        let (start, stop, every) = (start.clone(), stop.clone(), args.fresh_every);
        Some(spawn_in(&lab.ns_b, "fresh", move || fresh_connections(to, every, start, stop))?)
    };
    let flooder = if case.flood() {
        let plan = FloodPlan {
            ifname: lab.if_b.clone(),
            macs: (lab.mac_b, lab.mac_a),
            subnet: [o[0], o[1], o[2]],
            exclude: vec![1, 2, XSK_HOST],
            dst: target,
            pps: args.flood_pps,
            offlink_percent: args.offlink_percent,
            seed,
        };
        let (start, stop, sent) = (start.clone(), stop.clone(), sent.clone());
        Some(spawn_in(&lab.ns_b, "flood", move || flood(plan, start, stop, sent))?)
    } else {
        None
    };
    start.wait();
    let t0 = Instant::now();
    let mut next = t0;
    let mut aborted = None;
    while t0.elapsed() < args.duration {
        if signals::interrupted() {
            aborted = Some("interrupted");
            break;
        }
        if Instant::now() >= next {
            next += Duration::from_secs(1);
            match read_rss(pid) {
                Some((rss, hwm)) => {
                    let s = RssSample { t_s: t0.elapsed().as_secs_f64(), rss_kib: rss, hwm_kib: hwm };
                    if progress {
                        eprintln!(
                            "   {:>4.0} s  RSS {:>6} MiB  HWM {:>6} MiB  SYNs {:>11}  requests {:>9}",
                            s.t_s,
                            rss >> 10,
                            hwm >> 10,
                            apps::group_digits(sent.load(Ordering::Relaxed)),
                            apps::group_digits(done.load(Ordering::Relaxed))
                        );
                    }
                    samples.lock().expect("samples").push(s);
                }
                None => {
                    aborted = Some("rr-server exited during the measurement");
                    break;
                }
            }
        }
        std::thread::sleep(Duration::from_millis(20).min(next.saturating_duration_since(Instant::now())));
    }
    stop.store(true, Ordering::Relaxed);
    let measured = t0.elapsed();
    let lat = join(lat)?;
    let fresh = match fresh {
        Some(h) => join(h)?,
        None => Fresh::default(),
    };
    let (syns, syn_errors) = match flooder {
        Some(h) => join(h)?,
        None => (0, 0),
    };
    if let Some((rss, hwm)) = read_rss(pid) {
        samples.lock().expect("samples").push(RssSample { t_s: measured.as_secs_f64(), rss_kib: rss, hwm_kib: hwm });
    }
    match aborted {
        Some("interrupted") => bail!("interrupted"),
        Some(why) => bail!("{why}:\n{}", server.output()),
        None => {}
    }
    let netstat_after = tcp_ext(pid);
    let loadavg = std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim().to_string();
    if progress {
        eprintln!("== {}: checking that the idle connections still answer", case.name());
    }
    let idle_held = idle.check()?;
    let (rss_end, hwm) = read_rss(pid).unwrap_or_default();
    drop(idle);
    let exit = server.stop(Duration::from_secs(60))?.to_string();
    let summary: Value = std::fs::read(dir.join("server.json"))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or(Value::Null);
    let (drops, server_stack) = if case.xsk() {
        let st = &summary["xsk"]["stats"];
        let mut drops = st["drops"].clone();
        if let Value::Object(m) = &mut drops {
            // Frames the kernel dropped before the stack saw them (fill ring empty, RX ring full).
            for k in ["rx_dropped", "rx_fill_ring_empty_descs", "rx_ring_full"] {
                m.insert(format!("xdp_{k}"), st["port"]["xdp"][k].clone());
            }
            // SYNs answered with a cookie (kernel TCP's SyncookiesSent), not a drop but a trace of the flood.
            m.insert("syn_cookies_sent".into(), st["syn_cookies_sent"].clone());
            // The same, answered by the XDP program before the stack saw the SYN.
            m.insert("xdp_syn_cookies".into(), st["device"]["xdp_syn_cookies"].clone());
            // SYNs the XDP program shed (0 or absent with shedding off).
            if let Value::Object(shed) = &st["port"]["shed"] {
                for (k, v) in shed {
                    m.insert(format!("xdp_shed_{k}"), v.clone());
                }
            }
        }
        (
            drops,
            serde_json::json!({ "accepted": st["accepted"], "half_open": st["half_open"], "live_sockets": st["live_sockets"],
                                "pooled_sockets": st["pooled_sockets"], "rx_frames": st["rx_frames"], "audit": summary["xsk"]["audit"] }),
        )
    } else {
        (kernel_drops(&netstat_before, &netstat_after), serde_json::json!({ "accepted": summary["accepted"] }))
    };
    let mut server_stack = server_stack;
    if let Value::Object(m) = &mut server_stack {
        m.insert("cpu_s".into(), summary["cpu_s"].clone());
        m.insert("uptime_s".into(), summary["uptime_s"].clone());
    }
    let samples = std::mem::take(&mut *samples.lock().expect("samples"));
    let rss_max = samples.iter().map(|s| s.rss_kib).max().unwrap_or(0).max(rss_end);
    let half = measured.as_secs_f64() / 2.0;
    let mid = samples.iter().find(|s| s.t_s >= half).map_or(rss_before, |s| s.rss_kib);
    let last = samples.last().map_or(rss_before, |s| s.rss_kib);
    let h = &lat.hist;
    let q = |p: f64| if h.is_empty() { 0.0 } else { h.value_at_quantile(p) as f64 };
    Ok(CaseResult {
        case,
        backend: if case.xsk() { "xsk" } else { "kernel" },
        flood: case.flood(),
        idle_requested,
        idle_opened,
        idle_open_s,
        idle_held,
        syns_sent: syns,
        syn_send_errors: syn_errors,
        syn_pps: syns as f64 / measured.as_secs_f64(),
        measured_s: lat.measured.as_secs_f64(),
        requests: lat.requests,
        request_errors: lat.errors,
        p50_us: q(0.5),
        p99_us: q(0.99),
        p999_us: q(0.999),
        max_us: if h.is_empty() { 0.0 } else { h.max() as f64 },
        rss_before_kib: rss_before,
        rss_max_kib: rss_max,
        rss_end_kib: rss_end,
        hwm_kib: hwm,
        rss_growth_second_half_kib: last as i64 - mid as i64,
        drops,
        fresh,
        server_stack,
        server_exit: exit,
        loadavg,
        samples,
    })
}
