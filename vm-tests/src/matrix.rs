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

use crate::compare::{self, Perf, KERNEL_PORT, XSK_PORT};
use crate::env::{Common, Env, KernelSet};
use crate::g2g::{self, G2g, G2gOpts};
use crate::guest::{up_field, Accel, Guest, OFFLOADS_OFF};
use crate::kernel::KernelSel;
use crate::load::{self, Bench, BenchArgs, LoadResult};
use crate::netem::{self, NetemRun};
use crate::netns::HostNet;
use crate::report::{ReportHead, modules, thousands, Grid, KvTable};
use crate::server::{self, ServerSpec};
use crate::util::check_interrupted;

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
    /// Queue pairs of the guests: 1 (the offloads guests) and/or 2 (one more guest per
    /// kernel: multiqueue tap, QEMU `queues=2` + `mq=on,vectors=6`, `-smp 2`, offloads off;
    /// the cases of --attach x --addr run in it).
    #[arg(long, value_name = "LIST", value_delimiter = ',', default_value = "1", value_parser = ["1", "2"])]
    pub queues: Vec<String>,
    /// Also the MTU cases per kernel: a guest with `host_mtu=9000` on a tap of MTU 9000;
    /// eth0 MTU 4000 and 3700 with --attach drv (above virtio_net's single-buffer XDP limit
    /// of 3506; 4000 is also too large for a UMEM frame, 3700 is not), 9000 with skb (larger than a 4096-byte UMEM frame): both must be refused with the
    /// port's MTU error; 3494 and 3506 with drv must work (or be refused).
    #[arg(long)]
    pub mtu_cases: bool,
    /// Everything: --kernels all --netem --g2g --queues 1,2 --mtu-cases.
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

    /// Whether the single-queue guests (offloads off/on) run.
    fn single_queue(&self) -> bool {
        self.full || self.queues.iter().any(|q| q == "1")
    }

    /// Whether the multiqueue guest runs.
    fn multi_queue(&self) -> bool {
        self.full || self.queues.iter().any(|q| q == "2")
    }

    fn mtu(&self) -> bool {
        self.full || self.mtu_cases
    }
}

/// The MTU cases: (attach, guest eth0 MTU, expected "ok" or "refused").
pub const MTU_CASES: &[(&str, u32, &str)] = &[
    ("drv", 4000, "refused"),
    ("drv", 3700, "refused"),
    ("skb", 9000, "refused"),
    ("drv", VIRTIO_XDP_MTU_WORKS, "ok"),
    ("drv", VIRTIO_XDP_MTU_ACCEPTED, "ok"),
];

/// The largest MTU `virtnet_xdp_set` accepts for a single-buffer program (4096 - 256
/// headroom - 320 skb_shared_info - 14 Ethernet), the port's limit for native XDP.
pub const VIRTIO_XDP_MTU_ACCEPTED: u32 = 3506;

/// The largest MTU whose full-size frames a native XDP program on virtio_net (6.1) sees:
/// frames that span two mergeable buffers are copied by `xdp_linearize_page`, which also
/// counts the 12-byte virtio-net header (256 + 12 + frame + 320 <= 4096). Found by the MTU
/// cases: 3494 works, 3495 and 3506 drop every full-size frame without a counter.
pub const VIRTIO_XDP_MTU_WORKS: u32 = 3494;

/// MTU of the host tap and QEMU `host_mtu` of the MTU guest.
pub const MTU_HOST: u32 = 9000;

/// Queue pairs of the multiqueue guest (QEMU `queues=`, `-smp`).
pub const MQ_PAIRS: u32 = 2;

/// One attach x offloads x address case.
#[derive(Debug, Clone, Serialize)]
pub struct Case {
    /// Guest kernel label (6.1 or new).
    pub kernel: String,
    pub offloads: String,
    pub attach: String,
    pub addr: String,
    /// Queue pairs of the guest's virtio-net (1, or 2 with mq=on).
    pub queues: u32,
    /// The guest's eth0 MTU during the case.
    pub mtu: u32,
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
    /// The port's `tune ...` lines (device preparation: steps, changes, warnings, failures).
    pub tune: Vec<String>,
    /// Multiqueue guest: eth0's rx queues before, while serving and after the server
    /// (`/sys/class/net/eth0/queues/rx-*`).
    pub rx_queues: Option<String>,
}

impl Case {
    /// A case before it ran: no kernel label, outcome or measurements yet.
    pub fn new(offloads: &str, attach: &str, addr: &str, queues: u32, mtu: u32) -> Self {
        Case {
            kernel: String::new(),
            offloads: offloads.into(),
            attach: attach.into(),
            addr: addr.into(),
            queues,
            mtu,
            outcome: String::new(),
            detail: String::new(),
            port_line: None,
            warnings: vec![],
            xdp_serving: None,
            load: None,
            byte_check: None,
            server_exit: None,
            xdp_after: None,
            tune: vec![],
            rx_queues: None,
        }
    }
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

pub fn run(args: &MatrixArgs) -> Result<bool> {
    let sels = args.kernel_list()?;
    let env = Env::prepare_kernels(&args.common, "matrix", &sels)?;
    let mut rep = MatrixReport {
        head: env.report_head("matrix"),
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
            "kernel {} case offloads {} queues {} mtu {} attach {} addr {}: {}",
            c.kernel, c.offloads, c.queues, c.mtu, c.attach, c.addr, c.detail
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
    rep.head.result = if problems.is_empty() {
        "pass".into()
    } else {
        "FAIL".into()
    };
    rep.head.failure = (!problems.is_empty()).then(|| problems.join("\n"));
    print!("{}", table(&rep));
    env.publish("matrix", &serde_json::to_value(&rep)?)?;
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
                xsk_args: String::new(),
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
    let guests = if args.single_queue() { guests } else { vec![] };
    for (gi, (off, nic)) in guests.into_iter().enumerate() {
        check_interrupted()?;
        let net = HostNet::create()?;
        let (mut g, name) = boot_guest(env, ks, rep, &net, &format!("offloads-{off}"), nic, 1)?;
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
                let mut c = case(
                    env,
                    args,
                    &mut g,
                    &net,
                    off,
                    attach,
                    addr,
                    (1, 1500),
                    rep.cases.len(),
                )?;
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
    if args.multi_queue() {
        check_interrupted()?;
        mq_part(env, args, ks, rep)?;
    }
    if args.mtu() {
        check_interrupted()?;
        mtu_part(env, args, ks, rep)?;
    }
    Ok(())
}

/// Boots guest `name` (after the kernel label, but for the host's kernel) and records the
/// accelerator of the first guest of the run; the guest and its full name.
fn boot_guest(
    env: &Env,
    ks: &KernelSet,
    rep: &mut MatrixReport,
    net: &HostNet,
    name: &str,
    nic: &str,
    smp: u32,
) -> Result<(Guest, String)> {
    let name = match ks.sel {
        KernelSel::Host => name.to_string(),
        other => format!("{}-{name}", other.label()),
    };
    let mut spec = env.spec_for(ks, &name, net, nic);
    spec.smp = smp;
    let g = Guest::boot(&spec, net, env.common.accel)?;
    if rep.accel.is_empty() {
        rep.accel = g.accel.name().into();
        rep.accel_note = g.accel_note.clone();
    }
    Ok((g, name))
}

fn boot_logged(
    env: &Env,
    ks: &KernelSet,
    rep: &mut MatrixReport,
    net: &HostNet,
    name: &str,
    nic: &str,
    smp: u32,
) -> Result<Guest> {
    let (g, name) = boot_guest(env, ks, rep, net, name, nic, smp)?;
    eprintln!(
        "vm-tests: guest {name} up in {:.1} s ({}): {}",
        g.boot_secs,
        g.accel.name(),
        g.up_line
    );
    Ok(g)
}

fn log_case(label: &str, c: &Case) {
    eprintln!(
        "vm-tests: kernel {label} case queues {} mtu {} attach {} addr {}: {} {}",
        c.queues,
        c.mtu,
        c.attach,
        c.addr,
        c.outcome,
        if c.outcome == "ok" {
            c.rx_queues.clone().unwrap_or_default()
        } else {
            c.detail.clone()
        }
    );
}

/// Several queue pairs: a multiqueue tap, `-netdev tap,...,queues=2`, `-device
/// virtio-net-pci,...,mq=on,vectors=6` and `-smp 2`, so virtio_net brings up 2 combined
/// channels; rr-server binds one queue, so the port must bring the device down to one
/// channel (and say so), or refuse with a fix.
fn mq_part(env: &Env, args: &MatrixArgs, ks: &KernelSet, rep: &mut MatrixReport) -> Result<()> {
    let label = ks.sel.label();
    let net = HostNet::create_tuned(MQ_PAIRS, None)?;
    let nic = format!("{OFFLOADS_OFF},mq=on,vectors={}", 2 * MQ_PAIRS + 2);
    let mut g = boot_logged(env, ks, rep, &net, "mq2", &nic, MQ_PAIRS)?;
    for attach in &args.attach {
        for addr in &args.addr {
            let mut c = case(
                env,
                args,
                &mut g,
                &net,
                "off",
                attach,
                addr,
                (MQ_PAIRS, 1500),
                rep.cases.len(),
            )?;
            c.kernel = label.into();
            log_case(label, &c);
            rep.cases.push(c);
        }
    }
    let _ = g.poweroff();
    Ok(())
}

/// MTU too large: a tap of MTU 9000 and `host_mtu=9000`, so the guest may raise eth0's MTU;
/// each of [`MTU_CASES`] sets eth0's MTU and runs one case.
fn mtu_part(env: &Env, args: &MatrixArgs, ks: &KernelSet, rep: &mut MatrixReport) -> Result<()> {
    let label = ks.sel.label();
    let net = HostNet::create_tuned(1, Some(MTU_HOST))?;
    let nic = format!("{OFFLOADS_OFF},host_mtu={MTU_HOST}");
    let mut g = boot_logged(env, ks, rep, &net, "mtu", &nic, 1)?;
    for &(attach, mtu, expect) in MTU_CASES {
        g.exec_ok(
            &format!("/usr/local/bin/ip link set dev eth0 mtu {mtu}"),
            Duration::from_secs(10),
        )?;
        let mut c = case(
            env,
            args,
            &mut g,
            &net,
            "off",
            attach,
            "shared",
            (1, mtu),
            rep.cases.len(),
        )?;
        c.kernel = label.into();
        judge_mtu(&mut c, expect);
        log_case(label, &c);
        rep.cases.push(c);
    }
    let _ = g.poweroff();
    Ok(())
}

/// An MTU case that should be refused must be refused for its MTU (the error names `ip link
/// set dev eth0 mtu ...`); one that should work and was refused is reported as such.
fn judge_mtu(c: &mut Case, expect: &str) {
    match (c.outcome.as_str(), expect) {
        ("refused", "refused") if !c.detail.contains("mtu") => {
            c.outcome = "FAIL".into();
            c.detail = format!("refused, but the error does not name the MTU: {}", c.detail);
        }
        ("FAIL", _)
            if c.attach == "drv"
                && c.mtu > VIRTIO_XDP_MTU_WORKS
                && c.mtu <= VIRTIO_XDP_MTU_ACCEPTED =>
        {
            c.detail = format!(
                "{}; likely cause: virtio_net's xdp_linearize_page needs 256 + 12 (virtio-net header) + frame + 320 <= 4096, \
                 so native XDP drops full-size frames above MTU {VIRTIO_XDP_MTU_WORKS} although virtnet_xdp_set accepts up to \
                 {VIRTIO_XDP_MTU_ACCEPTED} (the port's plan says ok)",
                c.detail
            );
        }
        ("ok", "refused") => {
            c.detail = format!(
                "worked although the port's plan says this MTU does not fit; {}",
                c.detail
            );
        }
        _ => {}
    }
}

/// eth0's rx queues in the guest (`/sys/class/net/eth0/queues/rx-*`).
fn rx_queues(g: &mut Guest) -> Result<String> {
    Ok(g.exec_ok(
        "ls -d /sys/class/net/eth0/queues/rx-* | wc -l",
        Duration::from_secs(10),
    )?
    .trim()
    .to_string())
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
    (queues, mtu): (u32, u32),
    n: usize,
) -> Result<Case> {
    let (addr_arg, ip) = stack_addr(net, addr);
    let q_before = if queues > 1 {
        Some(rx_queues(g)?)
    } else {
        None
    };
    let port = 7000;
    let s = ServerSpec::xsk(&format!("c{n}"), attach, &addr_arg, port);
    let mut c = Case::new(offloads, attach, addr, queues, mtu);
    match server::start(g, &s)? {
        Err(r) => {
            c.server_exit = r.exit_status;
            c.tune = r
                .log_tail
                .lines()
                .filter(|l| l.contains(" tune "))
                .map(|l| l.trim().to_string())
                .collect();
            if let Some(b) = &q_before {
                c.rx_queues = Some(format!("rx queues {b}, after refusal {}", rx_queues(g)?));
            }
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
            c.warnings = st
                .tune
                .iter()
                .filter(|l| l.contains("WARN"))
                .cloned()
                .collect();
            c.tune = st.tune;
        }
    }
    let q_serving = match &q_before {
        Some(_) => Some(rx_queues(g)?),
        None => None,
    };
    c.xdp_serving = server::xdp_state(g)?;
    let dst = SocketAddrV4::new(ip, port);
    let b = BenchArgs::checked(dst, args.requests, Duration::from_secs(30));
    let json = env.run_dir.join(format!("case{n}-rr-bench.json"));
    let mut problems: Vec<String> = Vec::new();
    match load::rr_bench(&env.bin_dir, net, &b, &json) {
        Ok(Bench::Ran(r)) => {
            if let Some(short) = r.shortfall(args.requests) {
                problems.push(format!("rr-bench: {short}"));
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
    c.byte_check = load::byte_check(net, dst, 0x5eed + n as u64, &mut problems);
    let stopped = server::stop(g, &s)?;
    let _ = std::fs::write(
        env.run_dir.join(format!("case{n}-server.log")),
        &stopped.log,
    );
    c.server_exit = Some(stopped.exit_status);
    problems.extend(stopped.unclean());
    c.xdp_after = server::wait_detached(g, 3)?;
    if let (Some(b), Some(s)) = (&q_before, &q_serving) {
        c.rx_queues = Some(format!(
            "rx queues {b} before, {s} serving, {} after",
            rx_queues(g)?
        ));
    }
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
    let ks = ServerSpec::kernel("pk", KERNEL_PORT);
    let xs = ServerSpec::xsk("px", attach, "shared", XSK_PORT);
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
        caveat: match accel {
            Accel::Kvm => "KVM guest, 1 vCPU: both servers share it with the guest kernel".into(),
            _ => "TCG: the guest CPU is emulated, so the guest side of every request costs far more than \
                  under KVM and the two paths are slowed unevenly; the ratio shows which path is cheaper \
                  under emulation, not what a KVM guest would see"
                .into(),
        },
        ..Perf::default()
    };
    let result = p.measure(net.guest_addr, |b, which, i| {
        let json = env.run_dir.join(format!("perf-{attach}-{which}-{i}.json"));
        match load::rr_bench(&env.bin_dir, net, b, &json)? {
            Bench::Ran(r) => Ok(r),
            Bench::Unusable(why) => bail!("the comparison needs rr-bench: {why}"),
        }
    });
    let _ = server::stop(g, &xs);
    let _ = server::stop(g, &ks);
    result?;
    p.summarize();
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
        k.detail = format!("server did not start: {}", r.reason());
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
        Err(r) => k.detail = format!("restart refused: {}", r.reason()),
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
fn tune_relevant(l: &str) -> bool {
    if !l.contains(" tune ") {
        return false; // kernel-feature warnings: in the port features table
    }
    let l = l.to_ascii_lowercase();
    ["channel", "combined", "queue", "mtu"]
        .iter()
        .any(|k| l.contains(k))
}

/// A tune line without its timestamp and log target.
fn short_tune(l: &str) -> String {
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

    #[test]
    fn mtu_refusal_must_name_the_mtu() {
        let mut c = Case {
            kernel: "6.1".into(),
            outcome: "refused".into(),
            detail: "rr-server: error: eth0: no XDP".into(),
            server_exit: Some(1),
            ..Case::new("off", "drv", "shared", 1, 4000)
        };
        judge_mtu(&mut c, "refused");
        assert_eq!(c.outcome, "FAIL");
        c.outcome = "refused".into();
        c.detail = "rr-server: error: ... (fix: run: ip link set dev eth0 mtu 1500)".into();
        judge_mtu(&mut c, "refused");
        assert_eq!(c.outcome, "refused");
    }
}
