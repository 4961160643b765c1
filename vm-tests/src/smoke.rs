//! `vm-tests smoke`: one guest, `rr-server --backend xsk` in it, 1,000 request/responses from
//! the host namespace with `rr-bench --backend kernel`, plus the built-in byte-for-byte check
//! with payloads from 1 byte to 100 kB; then a clean stop (exit 0, frame audit ok) and no XDP
//! program left on eth0. Prints a table and writes JSON.

use std::net::{SocketAddr, SocketAddrV4};
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use serde::Serialize;

use crate::env::{Common, Env};
use crate::guest::{up_field, Guest, OFFLOADS_OFF};
use crate::load::{self, Bench, BenchArgs, LoadResult};
use crate::netns::HostNet;
use crate::report::{modules, thousands, KvTable, ReportHead};
use crate::server::{self, ServerSpec, Started, Stopped};
use crate::tools;

#[derive(clap::Args, Debug, Clone)]
pub struct SmokeArgs {
    #[command(flatten)]
    pub common: Common,
    /// XDP attach mode of the server in the guest.
    #[arg(long, default_value = "drv", value_parser = ["skb", "drv", "auto"])]
    pub attach: String,
    /// Address of the stack: the guest kernel's own (shared) or a dedicated one (.3 of the
    /// guest's /24, answered by the stack's ARP).
    #[arg(long, default_value = "shared", value_parser = ["shared", "dedicated"])]
    pub addr: String,
    /// Guest offloads: off (QEMU guest_csum=off,guest_tso4=off,...) or on (QEMU defaults).
    #[arg(long, default_value = "off", value_parser = ["off", "on"])]
    pub offloads: String,
    /// Request/responses of the rr-bench run (64-byte echo).
    #[arg(long, value_name = "N", default_value_t = 1000)]
    pub requests: u64,
    /// Diagnostic: turn off tx checksumming of the host's tap after the guest is up, so the
    /// host sends complete checksums even while guest_csum is negotiated (--offloads on).
    #[arg(long)]
    pub tap_tx_csum_off: bool,
    /// Requests of the built-in byte check (sizes cycle from 1 B to 100 kB); 0 skips it.
    #[arg(long, value_name = "N", default_value_t = 28)]
    pub check_requests: u64,
    /// Extra argument for rr-server in the guest (repeatable), e.g.
    /// `--server-arg=--syn-cookies=always` (every SYN then gets a cookie, from the XDP program
    /// on virtio_net: the report shows how many).
    #[arg(long = "server-arg", value_name = "ARG", allow_hyphen_values = true)]
    pub server_args: Vec<String>,
    /// Fail unless the server's XDP program answered at least one SYN with a SYN cookie
    /// (XDP_TX on virtio_net; with `--server-arg=--syn-cookies=always`).
    #[arg(long)]
    pub expect_xdp_cookies: bool,
}

/// The smoke report (also its JSON).
#[derive(Debug, Default, Serialize)]
pub struct SmokeReport {
    #[serde(flatten)]
    pub head: ReportHead,
    pub accel: String,
    pub accel_note: String,
    /// `--kernel`: 6.1 or new.
    pub kernel: String,
    pub guest_kernel: String,
    pub guest_kernel_package: String,
    pub guest_kernel_source: String,
    pub modules_builtin: Vec<String>,
    pub modules_loaded: Vec<String>,
    pub kernel_config: std::collections::BTreeMap<String, String>,
    pub nic: String,
    pub guest_up: String,
    pub attach: String,
    pub addr: String,
    /// `--server-arg`s.
    pub server_args: Vec<String>,
    pub server: Option<Started>,
    pub server_refused: Option<server::Refused>,
    pub xdp_while_serving: Option<String>,
    pub load: Option<LoadResult>,
    pub byte_check: Option<LoadResult>,
    /// Requests over IPv6 (shared mode: the guest kernel's IPv6 address, which the stack
    /// serves too), or why none ran.
    pub ipv6_check: Option<LoadResult>,
    pub ipv6_note: Option<String>,
    pub stopped: Option<Stopped>,
    /// SYNs the server's XDP program answered with SYN cookies (`device.xdp_syn_cookies`).
    pub xdp_syn_cookies: Option<u64>,
    pub xdp_after_exit: Option<String>,
    /// The tokio adapter's check (`axum_server` on the stack, curl from the host), or why it
    /// did not run.
    pub tokio_adapter: Option<String>,
    pub prepare_s: f64,
    pub boot_s: f64,
    /// Time spent on the KVM probe before the guest that ran (0 without one).
    pub accel_probe_s: f64,
    pub total_s: f64,
    pub logs: String,
}

/// Runs the smoke scenario; Ok(true) when it passed.
pub fn run(args: &SmokeArgs) -> Result<bool> {
    let env = Env::prepare(&args.common, "smoke")?;
    let mut rep = SmokeReport {
        head: env.report_head("smoke"),
        kernel: env.kernel().sel.label().into(),
        guest_kernel: env.kernel().kernel.release.clone(),
        guest_kernel_package: format!(
            "{} {}",
            env.kernel().kernel.package,
            env.kernel().kernel.version
        ),
        guest_kernel_source: env.kernel().kernel.source.clone(),
        modules_builtin: env.kernel().initramfs.modules.builtin.clone(),
        modules_loaded: env.kernel().modules_loaded(),
        kernel_config: env.kernel().kernel.config_facts(),
        attach: args.attach.clone(),
        addr: args.addr.clone(),
        server_args: args.server_args.clone(),
        prepare_s: env.prepare_secs,
        logs: env.run_dir.display().to_string(),
        ..SmokeReport::default()
    };
    let outcome = body(&env, args, &mut rep);
    rep.total_s = env.started.elapsed().as_secs_f64();
    rep.head.record(&outcome);
    print!("{}", table(&rep));
    env.publish("smoke", &serde_json::to_value(&rep)?)?;
    Ok(outcome.is_ok())
}

fn body(env: &Env, args: &SmokeArgs, rep: &mut SmokeReport) -> Result<()> {
    let net = HostNet::create()?;
    let nic_opts = if args.offloads == "off" {
        OFFLOADS_OFF
    } else {
        ""
    };
    let spec = env.spec("smoke", &net, nic_opts);
    rep.nic = format!(
        "virtio-net-pci,mac={}{}{}",
        spec.mac,
        if nic_opts.is_empty() { "" } else { "," },
        nic_opts
    );
    let t = Instant::now();
    let mut g = Guest::boot(&spec, &net, env.common.accel)?;
    rep.boot_s = g.boot_secs;
    rep.accel_probe_s = t.elapsed().as_secs_f64() - g.boot_secs;
    rep.accel = g.accel.name().into();
    rep.accel_note = g.accel_note.clone();
    rep.guest_up = g.up_line.clone();
    if let Some(k) = up_field(&g.up_line, "kernel") {
        rep.guest_kernel = k.to_string();
    }
    eprintln!(
        "vm-tests: guest up in {:.1} s ({}): {}",
        g.boot_secs, rep.accel, g.up_line
    );

    let (addr_arg, target) = match args.addr.as_str() {
        "dedicated" => (
            format!("{}/{}", net.stack_addr, net.prefix_len),
            net.stack_addr,
        ),
        _ => ("shared".to_string(), net.guest_addr),
    };
    doctor(&mut g, &args.attach, env.kernel().initramfs.iproute2)?;
    // IPv6 beside IPv4 in shared mode: the guest kernel's global address, which rr-server
    // serves too (its neighbour discovery stays the guest kernel's).
    let v6 = if args.addr == "dedicated" {
        rep.ipv6_note = Some("not run: dedicated mode (the check uses the kernel's shared address)".into());
        None
    } else if !env.kernel().initramfs.iproute2 {
        rep.ipv6_note = Some("not run: no iproute2 in the guest".into());
        None
    } else {
        let (_, guest6) = net.add_ipv6()?;
        g.exec_ok(&format!("/usr/local/bin/ip -6 addr add {guest6}/64 dev eth0 nodad"), Duration::from_secs(10))?;
        Some(guest6)
    };
    let port = 7000;
    let mut s = ServerSpec::xsk("smoke", &args.attach, &addr_arg, port);
    s.extra = args.server_args.clone();
    match server::start(&mut g, &s)? {
        Ok(st) => {
            eprintln!(
                "vm-tests: rr-server up: {}",
                st.port_line.as_deref().unwrap_or("(no port line)")
            );
            rep.server = Some(st);
        }
        Err(r) => {
            let why = r
                .error
                .clone()
                .unwrap_or_else(|| format!("no error line; log:\n{}", r.log_tail));
            rep.server_refused = Some(r);
            bail!("rr-server did not start in the guest: {why}");
        }
    }
    if env.kernel().initramfs.iproute2 {
        rep.xdp_while_serving = server::xdp_state(&mut g)?;
        if rep.xdp_while_serving.is_none() {
            bail!("rr-server is up but eth0 shows no XDP program");
        }
    }

    let dst = SocketAddrV4::new(target, port);
    let bench = BenchArgs::checked(dst, args.requests, Duration::from_secs(60));
    if args.tap_tx_csum_off {
        // Diagnostic: the host computes TCP/UDP checksums itself instead of handing the guest
        // CHECKSUM_PARTIAL packets (VIRTIO_NET_HDR_F_NEEDS_CSUM) while guest_csum is on.
        tools::require("ethtool", "ethtool", "--tap-tx-csum-off")?;
        crate::util::run(net.command("ethtool", &["-K", &net.tap, "tx", "off"]))?;
        eprintln!("vm-tests: host tap {}: tx checksumming off", net.tap);
    }
    let mut problems: Vec<String> = Vec::new();
    match load::rr_bench(
        &env.bin_dir,
        &net,
        &bench,
        &env.run_dir.join("rr-bench.json"),
    ) {
        Ok(Bench::Ran(r)) => rep.load = Some(r),
        Ok(Bench::Unusable(why)) => {
            eprintln!(
                "vm-tests: rr-bench unusable ({why}): the built-in client sends the {} requests",
                args.requests
            );
            static SIXTY_FOUR: [usize; 1] = [64];
            match load::echo_check(&net, dst, args.requests, &SIXTY_FOUR, 1) {
                Ok(mut r) => {
                    r.note = Some(why);
                    rep.load = Some(r);
                }
                Err(e) => problems.push(format!("built-in load: {e:#}")),
            }
        }
        Err(e) => problems.push(format!("{e:#}")),
    }
    if let Some(l) = &rep.load {
        eprintln!(
            "vm-tests: {}: {} requests, {} errors, {} lost, {:.0} req/s",
            l.tool, l.requests, l.errors, l.lost, l.rps
        );
        if !l.clean(args.requests) {
            problems.push(format!(
                "{}: {} of {} requests answered, {} errors, {} lost{}",
                l.tool,
                l.requests,
                args.requests,
                l.errors,
                l.lost,
                l.note
                    .as_deref()
                    .map(|n| format!(" ({n})"))
                    .unwrap_or_default()
            ));
        }
    }
    if args.check_requests > 0 && problems.is_empty() {
        match load::echo_check(&net, dst, args.check_requests, load::CHECK_SIZES, 0x5eed) {
            Ok(c) => {
                eprintln!(
                    "vm-tests: byte check: {} requests, {} bytes back, {} mismatches",
                    c.requests, c.bytes, c.errors
                );
                if !c.clean(args.check_requests) {
                    problems.push(format!(
                        "byte check failed: {}",
                        c.note.clone().unwrap_or_default()
                    ));
                }
                rep.byte_check = Some(c);
            }
            Err(e) => problems.push(format!("byte check: {e:#}")),
        }
    }
    if let (Some(a6), true) = (v6, problems.is_empty()) {
        let n = load::CHECK_SIZES.len() as u64;
        match load::echo_check(&net, SocketAddr::new(a6.into(), port), n, load::CHECK_SIZES, 0x6) {
            Ok(c) => {
                eprintln!("vm-tests: IPv6 check: {} requests to [{a6}]:{port}, {} mismatches", c.requests, c.errors);
                if !c.clean(n) {
                    problems.push(format!("IPv6 check failed: {}", c.note.clone().unwrap_or_default()));
                }
                rep.ipv6_check = Some(c);
            }
            Err(e) => problems.push(format!("IPv6 check: {e:#}")),
        }
    }
    // Stop the server whatever happened, for its counters and the detach check.
    let stopped = server::stop(&mut g, &s)?;
    let _ = std::fs::write(env.run_dir.join("server.log"), &stopped.log);
    rep.xdp_syn_cookies = stopped
        .log
        .lines()
        .find_map(|l| l.strip_prefix("xsk device: "))
        .and_then(|j| serde_json::from_str::<serde_json::Value>(j).ok())
        .and_then(|v| v["xdp_syn_cookies"].as_u64());
    if args.expect_xdp_cookies && rep.xdp_syn_cookies.unwrap_or(0) == 0 {
        problems.push(format!(
            "the XDP program answered no SYN with a cookie (xdp_syn_cookies {:?})",
            rep.xdp_syn_cookies
        ));
    }
    if !stopped.clean() {
        problems.push(format!(
            "rr-server did not stop cleanly (status {}, {})",
            stopped.exit_status,
            stopped
                .frame_audit
                .as_deref()
                .unwrap_or("no frame audit line")
        ));
    }
    rep.stopped = Some(stopped);
    if env.kernel().initramfs.iproute2 {
        rep.xdp_after_exit = server::wait_detached(&mut g, 3)?;
        if let Some(x) = &rep.xdp_after_exit {
            problems.push(format!(
                "XDP program still attached to eth0 after rr-server exited: {x}"
            ));
        }
    }
    // The tokio adapter on the same NIC, once rr-server has let go of it.
    if !env.kernel().initramfs.binaries.iter().any(|b| b == "axum_server") {
        rep.tokio_adapter = Some("not run: axum_server not built (scripts/vm-smoke builds it)".into());
    } else if problems.is_empty() {
        match crate::axum::check(&mut g, &net, net.stack_addr, net.prefix_len, &env.run_dir) {
            Ok(done) => {
                eprintln!("vm-tests: tokio adapter: {done}");
                rep.tokio_adapter = Some(done);
            }
            Err(e) => problems.push(format!("tokio adapter (axum_server in the guest): {e:#}")),
        }
    }
    let _ = g.poweroff();
    if !problems.is_empty() {
        let warnings: Vec<String> = rep
            .server
            .iter()
            .flat_map(|s| s.tune.iter())
            .filter_map(|l| server::short_warning(l))
            .collect();
        if !warnings.is_empty() {
            problems.push(format!("the port had warned: {}", warnings.join(" / ")));
        }
        problems.push(format!(
            "server log: {}",
            env.run_dir.join("server.log").display()
        ));
        bail!("{}", problems.join("\n"));
    }
    Ok(())
}

/// `rr-server doctor` on the guest's virtio_net NIC: no check fails as the guest boots; with
/// an MTU above virtio_net's native XDP limit (3494) the MTU check fails in drv mode and the
/// doctor exits 1 (the MTU is put back).
fn doctor(g: &mut Guest, attach: &str, iproute2: bool) -> Result<()> {
    let cmd = format!("rr-server doctor --iface eth0 --attach {attach} 2>&1");
    let out = g.exec(&cmd, Duration::from_secs(60))?;
    eprintln!("vm-tests: rr-server doctor (exit {}):\n{}", out.status, out.output.trim_end());
    if !out.ok() || out.output.lines().any(|l| l.starts_with("FAIL")) {
        bail!("rr-server doctor fails on the guest's NIC:\n{}", out.output);
    }
    if attach != "drv" || !iproute2 {
        return Ok(());
    }
    g.exec_ok("/usr/local/bin/ip link set dev eth0 mtu 4000", Duration::from_secs(10))?;
    let out = g.exec(&cmd, Duration::from_secs(60));
    g.exec_ok("/usr/local/bin/ip link set dev eth0 mtu 1500", Duration::from_secs(10))?;
    let out = out?;
    let mtu_fails = out.output.lines().any(|l| l.starts_with("FAIL") && l.contains("mtu"));
    if out.ok() || !mtu_fails {
        bail!("rr-server doctor with MTU 4000 on virtio_net in drv mode: exit {}, expected a failed MTU check:\n{}", out.status, out.output);
    }
    Ok(())
}

fn table(r: &SmokeReport) -> String {
    let mut t = KvTable::new();
    r.head.rows(&mut t);
    t.accel(&r.accel, &r.accel_note);
    t.row(
        "guest kernel",
        format!(
            "{} ({}; {})",
            r.guest_kernel, r.guest_kernel_package, r.guest_kernel_source
        ),
    );
    t.row("modules", modules(&r.modules_loaded, &r.modules_builtin));
    t.row("nic", r.nic.clone());
    t.row(
        "server",
        format!(
            "rr-server --backend xsk --attach {} --addr {}{}",
            r.attach,
            r.addr,
            r.server_args.iter().map(|a| format!(" {a}")).collect::<String>()
        ),
    );
    if let Some(n) = r.xdp_syn_cookies {
        t.row("xdp syn cookies", format!("{n} SYNs answered by the XDP program"));
    }
    if let Some(s) = &r.server {
        if let Some(p) = &s.port_line {
            t.row("port", p.trim_start_matches("xsk port: ").to_string());
        }
    }
    if let Some(x) = &r.xdp_while_serving {
        t.row("xdp (serving)", x.clone());
    }
    if let Some(l) = &r.load {
        t.row(
            "load",
            format!(
                "{}: {} requests, {} errors, {} lost, {} req/s, p50 {:.0} us, p99 {:.0} us",
                l.tool,
                l.requests,
                l.errors,
                l.lost,
                thousands(l.rps),
                l.p50_us,
                l.p99_us
            ),
        );
    }
    if let Some(c) = &r.byte_check {
        t.row(
            "byte check",
            format!(
                "{} requests of 1 B..100 kB, {} bytes echoed, {} mismatches",
                c.requests,
                thousands(c.bytes as f64),
                c.errors
            ),
        );
    }
    if let Some(c) = &r.ipv6_check {
        t.row("ipv6", format!("{} requests of 1 B..100 kB over IPv6, {} mismatches", c.requests, c.errors));
    } else if let Some(n) = &r.ipv6_note {
        t.row("ipv6", n.clone());
    }
    if let Some(a) = &r.tokio_adapter {
        t.row("tokio adapter", a.clone());
    }
    if let Some(s) = &r.stopped {
        t.row(
            "server exit",
            format!(
                "status {}, {}",
                s.exit_status,
                s.frame_audit
                    .clone()
                    .unwrap_or_else(|| "no frame audit line".into())
            ),
        );
    }
    if r.stopped.is_some() {
        t.row(
            "xdp (after exit)",
            r.xdp_after_exit
                .clone()
                .unwrap_or_else(|| "none (detached)".into()),
        );
    }
    t.row(
        "time",
        format!(
            "prepare {:.1} s, kvm probe {:.1} s, boot {:.1} s, total {:.1} s",
            r.prepare_s, r.accel_probe_s, r.boot_s, r.total_s
        ),
    );
    t.row("logs", r.logs.clone());
    t.render("vm-tests smoke")
}
