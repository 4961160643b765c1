//! `vm-tests matrix`: two guests (guest offloads off via QEMU options, and QEMU's defaults),
//! in each every combination of attach mode (skb, drv) and address (shared, dedicated); a case
//! either works (1,000 checked request/responses, byte check, clean stop, XDP detached) or is
//! refused by rr-server with a clear `error:` line. Anything else (hangs, lost or wrong bytes,
//! a server that dies without saying why) fails the matrix.
//!
//! In the offloads-off guest it also compares kernel TCP with the xsk stack (alternating
//! runs, medians, a ratio; under TCG only a rough hint) and kills the server with SIGKILL to
//! check that no XDP program is left on eth0 and that a new server attaches again.

use std::time::Duration;

use anyhow::Result;

use crate::env::{Common, Env, KernelSet};
use crate::g2g::{self, G2gOpts};
use crate::guest::{up_field, Guest, OFFLOADS_OFF};
use crate::kernel::KernelSel;
use crate::matrix_case::{case, judge_mtu, kill9, perf, Case, VIRTIO_XDP_MTU_ACCEPTED, VIRTIO_XDP_MTU_WORKS};
use crate::matrix_report::{fill_port_facts, table, KernelInfo, MatrixReport};
use crate::netem;
use crate::netns::HostNet;
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

/// MTU of the host tap and QEMU `host_mtu` of the MTU guest.
pub const MTU_HOST: u32 = 9000;

/// Queue pairs of the multiqueue guest (QEMU `queues=`, `-smp`).
pub const MQ_PAIRS: u32 = 2;

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
                netem_size: 64,
                netem_on_aggregates: false,
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
                    args.requests,
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
                    let mut p = perf(env, (args.runs, args.run_secs), &mut g, &net, off, attach, accel)?;
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
                args.requests,
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
            args.requests,
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
