//! `vm-tests matrix`: two guests (guest offloads off via QEMU options, and QEMU's defaults),
//! in each every combination of attach mode (skb, drv) and address (shared, dedicated); a case
//! either works (1,000 checked request/responses, byte check, clean stop, XDP detached) or is
//! refused by rr-server with a clear `error:` line. Anything else (hangs, lost or wrong bytes,
//! a server that dies without saying why) fails the matrix.
//!
//! In the offloads-off guest it also compares kernel TCP with the xsk stack (alternating
//! runs, medians, a ratio; under TCG only a rough hint) and kills the server with SIGKILL to
//! check that no XDP program is left on eth0 and that a new server attaches again.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::Duration;

use anyhow::{bail, Result};
use serde::Serialize;

use crate::env::{Common, Env, KernelSet};
use crate::g2g::{self, G2g, G2gOpts};
use crate::guest::{up_field, Accel, Guest, OFFLOADS_OFF};
use crate::kernel::KernelSel;
use crate::load::{self, Bench, BenchArgs, LoadResult};
use crate::netem::{self, NetemRun};
use crate::netns::HostNet;
use crate::report::{thousands, Grid, KvTable};
use crate::server::{self, ServerSpec};
use crate::util::{check_interrupted, median};

#[derive(clap::Args, Debug, Clone)]
pub struct MatrixArgs {
    #[command(flatten)]
    pub common: Common,
    /// Request/responses per case (rr-bench, 64-byte echo, 2 connections x depth 2).
    #[arg(long, value_name = "N", default_value_t = 1000)]
    pub requests: u64,
    /// Alternating runs per backend in the kernel-vs-xsk comparison (0 skips it).
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub runs: usize,
    /// Length of one comparison run (1 connection, depth 1: latency-bound).
    #[arg(long, value_name = "SECS", default_value_t = 3.0)]
    pub run_secs: f64,
    /// Attach modes of the comparison and the kill -9 check.
    #[arg(
        long,
        value_name = "MODE",
        value_delimiter = ',',
        default_value = "drv,skb"
    )]
    pub perf_attach: Vec<String>,
    /// Skip the kill -9 check.
    #[arg(long)]
    pub no_kill9: bool,
    /// Guests by offloads: off (QEMU guest_csum=off,guest_tso4=off,...) and/or on (QEMU
    /// defaults). The comparison and the kill -9 check run in the first one.
    #[arg(long, value_name = "LIST", value_delimiter = ',', default_value = "off,on", value_parser = ["off", "on"])]
    pub offloads: Vec<String>,
    /// Attach modes of the cases.
    #[arg(long, value_name = "LIST", value_delimiter = ',', default_value = "skb,drv", value_parser = ["skb", "drv", "auto"])]
    pub attach: Vec<String>,
    /// Stack addresses of the cases.
    #[arg(long, value_name = "LIST", value_delimiter = ',', default_value = "shared,dedicated", value_parser = ["shared", "dedicated"])]
    pub addr: Vec<String>,
    /// Guest kernels, each with the whole matrix: 6.1, new or all [default: --kernel].
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = ["6.1", "host", "new", "all"])]
    pub kernels: Vec<String>,
    /// Also the netem case in the first guest of each kernel (netem on the guest's eth0,
    /// `--netem-requests` checked request/responses and the byte check).
    #[arg(long)]
    pub netem: bool,
    /// Also the guest-to-guest scenario for each kernel (two guests on a QEMU socket netdev:
    /// checks, kernel vs xsk, netem in the client guest).
    #[arg(long)]
    pub g2g: bool,
    /// Everything: --kernels all --netem --g2g.
    #[arg(long)]
    pub full: bool,
    /// netem parameters of --netem and --g2g ("off" skips netem in g2g).
    #[arg(long, value_name = "SPEC", default_value = crate::netem::DEFAULT_NETEM)]
    pub netem_spec: String,
    /// Checked request/responses of the netem runs and of each g2g check.
    #[arg(long, value_name = "N", default_value_t = 2000)]
    pub netem_requests: u64,
}

impl MatrixArgs {
    /// The kernels to run: --kernels, else --kernel; `all` with --full.
    pub fn kernel_list(&self) -> Result<Vec<KernelSel>> {
        if self.full {
            return Ok(KernelSel::ALL.to_vec());
        }
        if self.kernels.is_empty() {
            return Ok(vec![self.common.kernel]);
        }
        KernelSel::parse_list(&self.kernels)
    }
}

/// One attach x offloads x address case.
#[derive(Debug, Clone, Serialize)]
pub struct Case {
    /// Guest kernel label (6.1 or new).
    pub kernel: String,
    pub offloads: String,
    pub attach: String,
    pub addr: String,
    /// ok | refused | FAIL
    pub outcome: String,
    pub detail: String,
    pub port_line: Option<String>,
    /// Warnings of the port's device preparation.
    pub warnings: Vec<String>,
    pub xdp_serving: Option<String>,
    pub load: Option<LoadResult>,
    pub byte_check: Option<LoadResult>,
    pub server_exit: Option<i32>,
    pub xdp_after: Option<String>,
}

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

/// SIGKILL of the server.
#[derive(Debug, Clone, Serialize)]
pub struct Kill9 {
    pub kernel: String,
    pub attach: String,
    pub xdp_before: Option<String>,
    pub wait_status: i32,
    pub xdp_after: Option<String>,
    /// A new server attached and answered the byte check.
    pub restart_ok: bool,
    pub outcome: String,
    pub detail: String,
}

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
    pub scenario: &'static str,
    pub result: String,
    pub failure: Option<String>,
    pub host_kernel: String,
    pub qemu: String,
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

pub fn run(args: &MatrixArgs) -> Result<bool> {
    let sels = args.kernel_list()?;
    let env = Env::prepare_kernels(&args.common, "matrix", &sels)?;
    let mut rep = MatrixReport {
        scenario: "matrix",
        host_kernel: env.host_kernel.clone(),
        qemu: env.qemu_version.clone(),
        kernels: env
            .kernels
            .iter()
            .map(|ks| KernelInfo {
                label: ks.sel.label().into(),
                release: ks.kernel.release.clone(),
                package: format!("{} {}", ks.kernel.package, ks.kernel.version),
                source: ks.kernel.source.clone(),
                packages: ks.kernel.packages.clone(),
                modules_loaded: ks.modules_loaded(),
                modules_builtin: ks.initramfs.modules.builtin.clone(),
                ..KernelInfo::default()
            })
            .collect(),
        logs: env.run_dir.display().to_string(),
        ..MatrixReport::default()
    };
    let outcome = body(&env, args, &mut rep);
    rep.total_s = env.started.elapsed().as_secs_f64();
    let mut problems: Vec<String> = Vec::new();
    if let Err(e) = &outcome {
        problems.push(format!("{e:#}"));
    }
    problems.extend(rep.errors.iter().cloned());
    for c in rep.cases.iter().filter(|c| c.outcome == "FAIL") {
        problems.push(format!(
            "kernel {} case offloads {} attach {} addr {}: {}",
            c.kernel, c.offloads, c.attach, c.addr, c.detail
        ));
    }
    for k in rep.kill9.iter().filter(|k| k.outcome != "ok") {
        problems.push(format!(
            "kernel {} kill -9 ({}): {}",
            k.kernel, k.attach, k.detail
        ));
    }
    for p in rep.perf.iter().filter(|p| p.errors > 0) {
        problems.push(format!(
            "kernel {} comparison ({}): {} errors",
            p.kernel, p.attach, p.errors
        ));
    }
    for n in rep.netem.iter().filter(|n| n.outcome != "ok") {
        problems.push(format!("kernel {} netem: {}", n.kernel, n.detail));
    }
    for g in rep.g2g.iter().filter(|g| g.outcome != "ok") {
        problems.push(format!("kernel {} g2g: {}", g.kernel, g.detail));
    }
    fill_port_facts(&mut rep);
    rep.result = if problems.is_empty() {
        "pass".into()
    } else {
        "FAIL".into()
    };
    rep.failure = (!problems.is_empty()).then(|| problems.join("\n"));
    print!("{}", table(&rep));
    for p in env.write_report("matrix", &serde_json::to_value(&rep)?)? {
        println!("wrote {}", p.display());
    }
    Ok(problems.is_empty())
}

fn body(env: &Env, args: &MatrixArgs, rep: &mut MatrixReport) -> Result<()> {
    for ks in &env.kernels {
        check_interrupted()?;
        if let Err(e) = kernel_part(env, args, ks, rep) {
            check_interrupted()?;
            let e = format!("kernel {}: {e:#}", ks.sel.label());
            eprintln!("vm-tests: {e}");
            rep.errors.push(e);
        }
        if args.g2g || args.full {
            check_interrupted()?;
            let o = G2gOpts {
                requests: args.netem_requests,
                runs: args.runs,
                run_secs: args.run_secs,
                attach: "drv".into(),
                netem: args.netem_spec.clone(),
            };
            match g2g::scenario(env, ks, &o) {
                Ok(g) => {
                    eprintln!(
                        "vm-tests: g2g ({}): {} {}",
                        ks.sel.label(),
                        g.outcome,
                        g.detail
                    );
                    rep.g2g.push(g);
                }
                Err(e) => {
                    check_interrupted()?;
                    let e = format!("kernel {} g2g: {e:#}", ks.sel.label());
                    eprintln!("vm-tests: {e}");
                    rep.errors.push(e);
                }
            }
        }
    }
    Ok(())
}

/// The attach x offloads x address cases, the comparison, kill -9 and (with --netem) the netem
/// case, in guests of kernel `ks`.
fn kernel_part(env: &Env, args: &MatrixArgs, ks: &KernelSet, rep: &mut MatrixReport) -> Result<()> {
    let label = ks.sel.label();
    let guests: Vec<(&str, &str)> = args
        .offloads
        .iter()
        .map(|o| {
            if o == "off" {
                ("off", OFFLOADS_OFF)
            } else {
                ("on", "")
            }
        })
        .collect();
    for (gi, (off, nic)) in guests.into_iter().enumerate() {
        check_interrupted()?;
        let net = HostNet::create()?;
        let name = match ks.sel {
            KernelSel::Host => format!("offloads-{off}"),
            other => format!("{}-offloads-{off}", other.label()),
        };
        let spec = env.spec_for(ks, &name, &net, nic);
        let mut g = Guest::boot(&spec, &net, env.common.accel)?;
        if rep.accel.is_empty() {
            rep.accel = g.accel.name().into();
            rep.accel_note = g.accel_note.clone();
        }
        if let Some(k) = up_field(&g.up_line, "kernel") {
            if let Some(ki) = rep.kernels.iter_mut().find(|k| k.label == label) {
                ki.release = k.to_string();
            }
        }
        eprintln!(
            "vm-tests: guest {name} up in {:.1} s ({})",
            g.boot_secs,
            g.accel.name()
        );
        for attach in &args.attach {
            for addr in &args.addr {
                let mut c = case(env, args, &mut g, &net, off, attach, addr, rep.cases.len())?;
                c.kernel = label.into();
                eprintln!(
                    "vm-tests: kernel {label} case offloads {off} attach {attach} addr {addr}: {} {}",
                    c.outcome,
                    if c.outcome == "ok" {
                        String::new()
                    } else {
                        c.detail.clone()
                    }
                );
                rep.cases.push(c);
            }
        }
        if gi == 0 {
            for attach in &args.perf_attach {
                if args.runs > 0 {
                    let accel = g.accel;
                    let mut p = perf(env, args, &mut g, &net, off, attach, accel)?;
                    p.kernel = label.into();
                    eprintln!(
                        "vm-tests: kernel {label}: kernel vs xsk ({attach}): {:.0} vs {:.0} req/s, ratio {:.2}",
                        p.median_kernel_rps, p.median_xsk_rps, p.rps_ratio
                    );
                    rep.perf.push(p);
                }
                if !args.no_kill9 {
                    let mut k = kill9(&mut g, &net, attach, rep.kill9.len())?;
                    k.kernel = label.into();
                    eprintln!(
                        "vm-tests: kernel {label}: kill -9 ({attach}): {} {}",
                        k.outcome, k.detail
                    );
                    rep.kill9.push(k);
                }
            }
            if args.netem || args.full {
                let n = netem::tap_case(
                    env,
                    &mut g,
                    &net,
                    label,
                    "drv",
                    args.netem_requests,
                    &args.netem_spec,
                    rep.netem.len(),
                )?;
                eprintln!(
                    "vm-tests: kernel {label}: netem: {} {}",
                    n.outcome, n.detail
                );
                rep.netem.push(n);
            }
        }
        let _ = g.poweroff();
    }
    Ok(())
}

/// Port lines per kernel and attach mode, and the port's kernel-feature warnings.
fn fill_port_facts(rep: &mut MatrixReport) {
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

#[allow(clippy::too_many_arguments)]
fn case(
    env: &Env,
    args: &MatrixArgs,
    g: &mut Guest,
    net: &HostNet,
    offloads: &str,
    attach: &str,
    addr: &str,
    n: usize,
) -> Result<Case> {
    let (addr_arg, ip) = stack_addr(net, addr);
    let port = 7000;
    let s = ServerSpec::xsk(&format!("c{n}"), attach, &addr_arg, port);
    let mut c = Case {
        kernel: String::new(),
        offloads: offloads.into(),
        attach: attach.into(),
        addr: addr.into(),
        outcome: String::new(),
        detail: String::new(),
        port_line: None,
        warnings: vec![],
        xdp_serving: None,
        load: None,
        byte_check: None,
        server_exit: None,
        xdp_after: None,
    };
    match server::start(g, &s)? {
        Err(r) => {
            c.server_exit = r.exit_status;
            match r.error {
                Some(e) => {
                    c.outcome = "refused".into();
                    c.detail = e;
                }
                None => {
                    c.outcome = "FAIL".into();
                    c.detail = format!(
                        "rr-server did not come up and printed no error line:\n{}",
                        r.log_tail
                    );
                }
            }
            return Ok(c);
        }
        Ok(st) => {
            c.port_line = st.port_line;
            c.warnings = st.tune.into_iter().filter(|l| l.contains("WARN")).collect();
        }
    }
    c.xdp_serving = server::xdp_state(g)?;
    let dst = SocketAddrV4::new(ip, port);
    let b = BenchArgs {
        connect: dst,
        conns: 2,
        depth: 2,
        req_size: 64,
        duration: Duration::from_secs(30),
        max_requests: Some(args.requests),
        drain_timeout: None,
    };
    let json = env.run_dir.join(format!("case{n}-rr-bench.json"));
    let mut problems: Vec<String> = Vec::new();
    match load::rr_bench(&env.bin_dir, net, &b, &json) {
        Ok(Bench::Ran(r)) => {
            if !r.clean(args.requests) {
                problems.push(format!(
                    "rr-bench: {} of {} answered, {} errors, {} lost",
                    r.requests, args.requests, r.errors, r.lost
                ));
            }
            c.load = Some(r);
        }
        Ok(Bench::Unusable(why)) => {
            static SIXTY_FOUR: [usize; 1] = [64];
            match load::echo_check(net, dst, args.requests, &SIXTY_FOUR, 1) {
                Ok(mut r) => {
                    if !r.clean(args.requests) {
                        problems.push(format!("built-in load: {} errors", r.errors));
                    }
                    r.note = Some(why);
                    c.load = Some(r);
                }
                Err(e) => problems.push(format!("built-in load: {e:#}")),
            }
        }
        Err(e) => problems.push(format!("rr-bench: {e:#}")),
    }
    let n_check = load::CHECK_SIZES.len() as u64;
    match load::echo_check(net, dst, n_check, load::CHECK_SIZES, 0x5eed + n as u64) {
        Ok(r) => {
            if !r.clean(n_check) {
                problems.push(format!(
                    "byte check: {}",
                    r.note
                        .clone()
                        .unwrap_or_else(|| format!("{} mismatches", r.errors))
                ));
            }
            c.byte_check = Some(r);
        }
        Err(e) => problems.push(format!("byte check: {e:#}")),
    }
    let stopped = server::stop(g, &s)?;
    let _ = std::fs::write(
        env.run_dir.join(format!("case{n}-server.log")),
        &stopped.log,
    );
    c.server_exit = Some(stopped.exit_status);
    if stopped.exit_status != 0
        || !stopped
            .frame_audit
            .as_deref()
            .is_some_and(|l| l.contains("ok"))
    {
        problems.push(format!(
            "unclean stop (status {}, {})",
            stopped.exit_status,
            stopped
                .frame_audit
                .unwrap_or_else(|| "no frame audit".into())
        ));
    }
    c.xdp_after = server::wait_detached(g, 3)?;
    if let Some(x) = &c.xdp_after {
        problems.push(format!("XDP still attached after exit: {x}"));
    }
    let device_warnings: Vec<String> = c
        .warnings
        .iter()
        .filter_map(|w| server::short_warning(w))
        .collect();
    if problems.is_empty() {
        c.outcome = "ok".into();
        c.detail = device_warnings.join("; ");
    } else {
        c.outcome = "FAIL".into();
        if !device_warnings.is_empty() {
            problems.push(format!(
                "the port had warned: {}",
                device_warnings.join("; ")
            ));
        }
        problems.push(format!(
            "server log: {}",
            env.run_dir.join(format!("case{n}-server.log")).display()
        ));
        c.detail = problems.join("; ");
    }
    Ok(c)
}

/// `--addr` of the stack and the address clients connect to.
fn stack_addr(net: &HostNet, addr: &str) -> (String, Ipv4Addr) {
    match addr {
        "dedicated" => (
            format!("{}/{}", net.stack_addr, net.prefix_len),
            net.stack_addr,
        ),
        _ => ("shared".to_string(), net.guest_addr),
    }
}

fn perf(
    env: &Env,
    args: &MatrixArgs,
    g: &mut Guest,
    net: &HostNet,
    offloads: &str,
    attach: &str,
    accel: Accel,
) -> Result<Perf> {
    let ks = ServerSpec::kernel("pk", 7001);
    let xs = ServerSpec::xsk("px", attach, "shared", 7000);
    if let Err(r) = server::start(g, &ks)? {
        bail!("kernel rr-server did not start: {:?}", r.error);
    }
    if let Err(r) = server::start(g, &xs)? {
        let _ = server::stop(g, &ks);
        bail!("xsk rr-server ({attach}) did not start: {:?}", r.error);
    }
    let mut p = Perf {
        topology: "host tap -> guest".into(),
        offloads: offloads.into(),
        attach: attach.into(),
        runs: args.runs,
        run_secs: args.run_secs,
        kernel_rps: vec![],
        xsk_rps: vec![],
        kernel_p50_us: vec![],
        xsk_p50_us: vec![],
        median_kernel_rps: 0.0,
        median_xsk_rps: 0.0,
        rps_ratio: 0.0,
        median_kernel_p50_us: 0.0,
        median_xsk_p50_us: 0.0,
        errors: 0,
        kernel: String::new(),
        caveat: match accel {
            Accel::Kvm => "KVM guest, 1 vCPU: both servers share it with the guest kernel".into(),
            _ => "TCG: the guest CPU is emulated, so the guest side of every request costs far more than \
                  under KVM and the two paths are slowed unevenly; the ratio shows which path is cheaper \
                  under emulation, not what a KVM guest would see"
                .into(),
        },
    };
    let result = (|| -> Result<()> {
        for i in 0..args.runs {
            let order: [(&str, u16); 2] = if i % 2 == 0 {
                [("kernel", 7001), ("xsk", 7000)]
            } else {
                [("xsk", 7000), ("kernel", 7001)]
            };
            for (which, port) in order {
                check_interrupted()?;
                let b = BenchArgs {
                    connect: SocketAddrV4::new(net.guest_addr, port),
                    conns: 1,
                    depth: 1,
                    req_size: 64,
                    duration: Duration::from_secs_f64(args.run_secs),
                    max_requests: None,
                    drain_timeout: None,
                };
                let json = env.run_dir.join(format!("perf-{attach}-{which}-{i}.json"));
                let r = match load::rr_bench(&env.bin_dir, net, &b, &json)? {
                    Bench::Ran(r) => r,
                    Bench::Unusable(why) => bail!("the comparison needs rr-bench: {why}"),
                };
                p.errors += r.errors + r.lost;
                if which == "kernel" {
                    p.kernel_rps.push(r.rps);
                    p.kernel_p50_us.push(r.p50_us);
                } else {
                    p.xsk_rps.push(r.rps);
                    p.xsk_p50_us.push(r.p50_us);
                }
            }
        }
        Ok(())
    })();
    let _ = server::stop(g, &xs);
    let _ = server::stop(g, &ks);
    result?;
    p.median_kernel_rps = median(&p.kernel_rps);
    p.median_xsk_rps = median(&p.xsk_rps);
    p.rps_ratio = p.median_xsk_rps / p.median_kernel_rps;
    p.median_kernel_p50_us = median(&p.kernel_p50_us);
    p.median_xsk_p50_us = median(&p.xsk_p50_us);
    Ok(p)
}

fn kill9(g: &mut Guest, net: &HostNet, attach: &str, n: usize) -> Result<Kill9> {
    let s = ServerSpec::xsk(&format!("k{n}"), attach, "shared", 7002);
    let mut k = Kill9 {
        kernel: String::new(),
        attach: attach.into(),
        xdp_before: None,
        wait_status: 0,
        xdp_after: None,
        restart_ok: false,
        outcome: String::new(),
        detail: String::new(),
    };
    if let Err(r) = server::start(g, &s)? {
        k.outcome = "FAIL".into();
        k.detail = format!("server did not start: {}", r.error.unwrap_or(r.log_tail));
        return Ok(k);
    }
    k.xdp_before = server::xdp_state(g)?;
    k.wait_status = server::kill9(g, &s)?;
    k.xdp_after = server::wait_detached(g, 5)?;
    // A new server must attach again (no stale program or socket in the way).
    let again = ServerSpec::xsk(&format!("k{n}r"), attach, "shared", 7002);
    match server::start(g, &again)? {
        Ok(_) => {
            let dst = SocketAddrV4::new(net.guest_addr, 7002);
            k.restart_ok =
                load::echo_check(net, dst, 14, load::CHECK_SIZES, 99).is_ok_and(|r| r.clean(14));
            let _ = server::stop(g, &again);
        }
        Err(r) => k.detail = format!("restart refused: {}", r.error.unwrap_or(r.log_tail)),
    }
    let mut problems = Vec::new();
    if k.xdp_before.is_none() {
        problems.push("no XDP program while serving".to_string());
    }
    if let Some(x) = &k.xdp_after {
        problems.push(format!("XDP program left on eth0 after kill -9: {x}"));
    }
    if !k.restart_ok {
        problems.push(format!(
            "a new server did not work after the kill ({})",
            k.detail
        ));
    }
    if problems.is_empty() {
        k.outcome = "ok".into();
        k.detail = format!(
            "wait status {}; program gone; new server attached and answered",
            k.wait_status
        );
    } else {
        k.outcome = "FAIL".into();
        k.detail = problems.join("; ");
    }
    Ok(k)
}

fn table(r: &MatrixReport) -> String {
    let mut t = KvTable::new();
    t.row(
        "result",
        match &r.failure {
            None => r.result.clone(),
            Some(f) => format!("{}:\n{f}", r.result),
        },
    );
    t.row("host", format!("Linux {}, QEMU {}", r.host_kernel, r.qemu));
    t.row(
        "accel",
        if r.accel_note.is_empty() {
            r.accel.clone()
        } else {
            format!("{} ({})", r.accel, r.accel_note)
        },
    );
    for k in &r.kernels {
        t.row(
            format!("kernel {}", k.label),
            format!(
                "{} ({}; {})\nmodules: loaded {}{}",
                k.release,
                k.package,
                k.source,
                k.modules_loaded.join(" "),
                if k.modules_builtin.is_empty() {
                    String::new()
                } else {
                    format!("; built in {}", k.modules_builtin.join(" "))
                }
            ),
        );
    }
    t.row("time", format!("{:.1} s", r.total_s));
    t.row("logs", r.logs.clone());
    let mut s = t.render("vm-tests matrix");

    s.push_str("\n== cases: rr-server --backend xsk in the guest, rr-bench --backend kernel + byte check from the host\n");
    let mut grid = Grid::new(&[
        "kernel", "offloads", "attach", "addr", "outcome", "req/s", "p50us", "detail",
    ]);
    for c in &r.cases {
        let (rps, p50) = match &c.load {
            Some(l) => (thousands(l.rps), format!("{:.0}", l.p50_us)),
            None => ("-".into(), "-".into()),
        };
        grid.row(vec![
            c.kernel.clone(),
            c.offloads.clone(),
            c.attach.clone(),
            c.addr.clone(),
            c.outcome.clone(),
            rps,
            p50,
            c.detail.replace('\n', " | "),
        ]);
    }
    s.push_str(&grid.render());

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

    if !r.perf.is_empty() {
        s.push_str(&format!(
            "\n== kernel TCP vs xsk (offloads {}, 1 conn, depth 1, 64 B, median of alternating runs)\n",
            r.perf[0].offloads
        ));
        let mut grid = Grid::new(&[
            "kernel",
            "attach",
            "runs",
            "kernel req/s",
            "xsk req/s",
            "xsk/kernel",
            "p50us kernel",
            "p50us xsk",
        ]);
        for p in &r.perf {
            grid.row(vec![
                p.kernel.clone(),
                p.attach.clone(),
                format!("{}x{:.0}s", p.runs, p.run_secs),
                thousands(p.median_kernel_rps),
                thousands(p.median_xsk_rps),
                format!("{:.2}", p.rps_ratio),
                format!("{:.0}", p.median_kernel_p50_us),
                format!("{:.0}", p.median_xsk_p50_us),
            ]);
        }
        s.push_str(&grid.render());
        s.push_str(&format!("  caveat: {}\n", r.perf[0].caveat));
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
