//! Guest to guest (`vm-tests g2g`, and `matrix --g2g`): two guests whose virtio_net NICs are
//! joined by QEMU socket netdevs over UDP on 127.0.0.1 inside a namespace of the harness
//! (`-netdev socket,id=n0,udp=127.0.0.1:PEER,localaddr=127.0.0.1:OWN`; no tap, no host
//! address). The server guest runs `rr-server --backend xsk` (port 7000) and
//! `rr-server --backend kernel` (port 7001, the kernel-to-kernel baseline on the same
//! topology); the client guest runs `rr-bench --backend kernel`.
//!
//! * **checks**: 64-byte echo x `--requests` (2 connections x depth 2) and 16 KiB x 100 to
//!   each server; rr-bench checks every response.
//! * **comparison**: alternating runs at 1 connection, depth 1; medians and the xsk/kernel
//!   ratio (under TCG only a hint: see the caveat).
//! * **netem**: the client guest puts netem on its eth0 egress (requests) and, through ifb0, on
//!   its ingress (responses), so the stack in the other guest really sees loss and
//!   reordering, and its retransmissions are lost too; rr-bench must still get every response
//!   back byte for byte.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::Duration;

use anyhow::{bail, Result};
use serde::Serialize;

use crate::compare::{self, Perf, KERNEL_PORT, XSK_PORT};
use crate::env::{Common, Env, KernelSet};
use crate::guest::{up_field, Accel, Guest, OFFLOADS_OFF};
use crate::load::{self, BenchArgs, LoadResult};
use crate::netem::{self, Aggregation, NetemRun, DEFAULT_NETEM};
use crate::netns::HostNet;
use crate::report::{server_cell, thousands, Grid, KvTable};
use crate::server::{self, ServerSpec};
use crate::util::check_interrupted;

/// UDP ports of the two socket netdevs (inside the harness's own namespace).
pub const SERVER_UDP: u16 = 10001;
pub const CLIENT_UDP: u16 = 10002;

/// What the g2g scenario does.
#[derive(clap::Args, Debug, Clone)]
pub struct G2gOpts {
    /// Checked 64-byte request/responses per server (and per server under netem).
    #[arg(long, value_name = "N", default_value_t = 2000)]
    pub requests: u64,
    /// Alternating runs per backend in the comparison (0 skips it).
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub runs: usize,
    /// Length of one comparison run (1 connection, depth 1).
    #[arg(long, value_name = "SECS", default_value_t = 3.0)]
    pub run_secs: f64,
    /// XDP attach mode of the xsk server.
    #[arg(long, default_value = "drv", value_parser = ["skb", "drv", "auto"])]
    pub attach: String,
    /// netem parameters in the client guest (egress and, via ifb0, ingress); "off" skips it.
    #[arg(long, value_name = "SPEC", default_value = DEFAULT_NETEM)]
    pub netem: String,
    /// Request (and echoed response) size under netem: above one MSS (e.g. 16384) each is a
    /// flight of several segments, where a loss or a reordered segment leaves a hole that SACK
    /// reports.
    #[arg(long, value_name = "BYTES", default_value_t = 64)]
    pub netem_size: usize,
    /// Leave the client guest's GRO and GSO on under netem, so netem drops and delays whole
    /// merged bursts (one qdisc skb each) instead of wire packets: how g2g ran before
    /// 2026-12-07, kept to reproduce those figures.
    #[arg(long)]
    pub netem_on_aggregates: bool,
    /// Extra arguments for the xsk rr-server, split on whitespace (for example
    /// "--recovery smoltcp" to compare loss recovery within one build).
    #[arg(long, value_name = "ARGS", default_value = "", allow_hyphen_values = true)]
    pub xsk_args: String,
}

#[derive(clap::Args, Debug, Clone)]
pub struct G2gArgs {
    #[command(flatten)]
    pub common: Common,
    #[command(flatten)]
    pub opts: G2gOpts,
}

/// One checked rr-bench run from the client guest.
#[derive(Debug, Clone, Serialize)]
pub struct G2gCheck {
    pub backend: String,
    pub what: String,
    pub outcome: String,
    pub load: Option<LoadResult>,
    pub detail: String,
}

/// The g2g result of one kernel.
#[derive(Debug, Clone, Default, Serialize)]
pub struct G2g {
    pub kernel: String,
    pub guest_kernel: String,
    pub attach: String,
    pub netdev: String,
    pub server_up: String,
    pub client_up: String,
    pub boot_s: Vec<f64>,
    pub port_line: Option<String>,
    pub checks: Vec<G2gCheck>,
    pub perf: Option<Perf>,
    pub netem: Vec<NetemRun>,
    pub server_exit: Option<i32>,
    pub frame_audit: Option<String>,
    pub outcome: String,
    pub detail: String,
}

/// Runs the scenario with kernel `ks`; errors only for setup failures (boot), the rest is in
/// the result's outcome.
pub fn scenario(env: &Env, ks: &KernelSet, o: &G2gOpts) -> Result<G2g> {
    let net = HostNet::create_bare()?;
    let sub = net.guest_addr.octets()[2];
    let server_ip = Ipv4Addr::new(198, 18, sub, 2);
    let client_ip = Ipv4Addr::new(198, 18, sub, 4);
    let nd = |own: u16, peer: u16| {
        format!("socket,id=n0,udp=127.0.0.1:{peer},localaddr=127.0.0.1:{own}")
    };
    let label = ks.sel.label();
    let mut r = G2g {
        kernel: label.into(),
        guest_kernel: ks.kernel.release.clone(),
        attach: o.attach.clone(),
        netdev: format!(
            "-netdev socket,udp=... : server 127.0.0.1:{SERVER_UDP} <-> client 127.0.0.1:{CLIENT_UDP} (namespace {})",
            net.ns
        ),
        ..G2g::default()
    };
    let tag = label.replace('.', "");
    let s_spec = env.spec_with(
        ks,
        &format!("g2g-{tag}-server"),
        nd(SERVER_UDP, CLIENT_UDP),
        server_ip,
        net.prefix_len,
        OFFLOADS_OFF,
    );
    let c_spec = env.spec_with(
        ks,
        &format!("g2g-{tag}-client"),
        nd(CLIENT_UDP, SERVER_UDP),
        client_ip,
        net.prefix_len,
        OFFLOADS_OFF,
    );
    let mut sg = Guest::boot(&s_spec, &net, env.common.accel)?;
    let mut cg = Guest::boot(&c_spec, &net, env.common.accel)?;
    r.server_up = sg.up_line.clone();
    r.client_up = cg.up_line.clone();
    r.boot_s = vec![sg.boot_secs, cg.boot_secs];
    eprintln!(
        "vm-tests: g2g ({label}): server guest up in {:.1} s, client guest up in {:.1} s ({})",
        sg.boot_secs,
        cg.boot_secs,
        cg.accel.name()
    );
    if let Some(k) = up_field(&sg.up_line, "kernel") {
        r.guest_kernel = k.to_string();
    }
    let mut problems: Vec<String> = Vec::new();
    let body = body(env, o, &mut sg, &mut cg, server_ip, &mut r, &mut problems);
    if let Err(e) = body {
        problems.push(format!("{e:#}"));
    }
    for c in r.checks.iter().filter(|c| c.outcome != "ok") {
        problems.push(format!("{} {}: {}", c.backend, c.what, c.detail));
    }
    for n in r.netem.iter().filter(|n| n.outcome != "ok") {
        problems.push(format!("netem ({}): {}", n.backend, n.detail));
    }
    if let Some(p) = &r.perf {
        if p.errors > 0 {
            problems.push(format!("comparison: {} errors", p.errors));
        }
    }
    let _ = cg.poweroff();
    let _ = sg.poweroff();
    if problems.is_empty() {
        r.outcome = "ok".into();
    } else {
        r.outcome = "FAIL".into();
        r.detail = problems.join("; ");
    }
    Ok(r)
}

fn body(
    env: &Env,
    o: &G2gOpts,
    sg: &mut Guest,
    cg: &mut Guest,
    server_ip: Ipv4Addr,
    r: &mut G2g,
    problems: &mut Vec<String>,
) -> Result<()> {
    let mut xs = ServerSpec::xsk("gx", &o.attach, "shared", XSK_PORT);
    xs.extra = o.xsk_args.split_whitespace().map(String::from).collect();
    let ks = ServerSpec::kernel("gk", KERNEL_PORT);
    match server::start(sg, &xs)? {
        Ok(st) => r.port_line = st.port_line,
        Err(refused) => bail!(
            "xsk rr-server did not start in the server guest: {}",
            refused.reason()
        ),
    }
    if let Err(refused) = server::start(sg, &ks)? {
        let _ = server::stop(sg, &xs);
        bail!(
            "kernel rr-server did not start in the server guest: {}",
            refused.reason()
        );
    }
    let result = (|| -> Result<()> {
        // Correctness, both servers.
        for (backend, port) in [("xsk", XSK_PORT), ("kernel", KERNEL_PORT)] {
            for (what, size, n, conns, depth) in [
                (
                    format!("64 B x {}", o.requests),
                    64usize,
                    o.requests,
                    2usize,
                    2usize,
                ),
                ("16 KiB x 100".to_string(), 16384, 100, 1, 1),
            ] {
                check_interrupted()?;
                let b = BenchArgs {
                    connect: SocketAddrV4::new(server_ip, port),
                    conns,
                    depth,
                    req_size: size,
                    duration: Duration::from_secs(120),
                    max_requests: Some(n),
                    drain_timeout: None,
                    rate: None,
                };
                let tag = format!("chk-{backend}-{size}");
                r.checks.push(check(cg, &b, &tag, backend, &what, n));
            }
        }
        // Kernel TCP vs xsk on this topology.
        if o.runs > 0 {
            r.perf = Some(compare(cg, server_ip, o, sg.accel)?);
        }
        // netem in the client guest.
        if o.netem != "off" && !o.netem.is_empty() {
            let restore = Aggregation::On { gso_max_segs: netem::gso_max_segs(cg, "eth0")? };
            if !o.netem_on_aggregates {
                netem::set_aggregation(cg, "eth0", Aggregation::Off)?;
            }
            netem::add_egress(cg, "eth0", &o.netem)?;
            netem::add_ingress(cg, "eth0", &o.netem)?;
            for (i, (backend, port)) in [("xsk", XSK_PORT), ("kernel", KERNEL_PORT)]
                .into_iter()
                .enumerate()
            {
                check_interrupted()?;
                let before: Vec<_> = ["eth0", "ifb0"]
                    .iter()
                    .filter_map(|d| netem::stats(cg, d).ok().flatten())
                    .collect();
                let b = BenchArgs {
                    req_size: o.netem_size,
                    ..BenchArgs::checked(SocketAddrV4::new(server_ip, port), o.requests, Duration::from_secs(120))
                }
                .under_netem();
                let mut n = NetemRun {
                    topology: "guest -> guest".into(),
                    kernel: r.kernel.clone(),
                    attach: o.attach.clone(),
                    backend: backend.into(),
                    placement: format!(
                        "client guest: eth0 egress + ingress (ifb0), {}, {} B echoes",
                        if o.netem_on_aggregates { "GRO/GSO on" } else { "GRO/GSO off" },
                        o.netem_size
                    ),
                    netem: o.netem.clone(),
                    requests: o.requests,
                    ..NetemRun::default()
                };
                let mut ps = Vec::new();
                let spec = if backend == "xsk" { &xs } else { &ks };
                let resent_before = server::resent(sg, spec)?;
                let client_before = client_retrans_segs(cg)?;
                let ext_before = guest_tcpext(cg)?;
                // The server guest's TcpExt too for kernel TCP (the stack's own counters
                // are in `resent`): which step resent, probes and timeouts apart.
                let server_ext_before = if backend == "kernel" { guest_tcpext(sg)? } else { Default::default() };
                match load::rr_bench_in_guest(cg, &b, &format!("netem-{i}")) {
                    Ok(l) => {
                        if let Some(short) = l.shortfall(o.requests) {
                            ps.push(format!("rr-bench: {short}"));
                        }
                        n.load = Some(l);
                    }
                    Err(e) => ps.push(format!("rr-bench: {e:#}")),
                }
                // Counters of this run alone: after minus before.
                let resent_after = server::resent(sg, spec)?;
                n.server_resent = resent_before
                    .segments
                    .zip(resent_after.segments)
                    .map(|(b, a)| a.saturating_sub(b));
                for (k, v) in resent_after.by_kind {
                    let moved = v.saturating_sub(resent_before.by_kind.get(&k).copied().unwrap_or(0));
                    if moved > 0 {
                        n.server_recovery.insert(k, moved);
                    }
                }
                n.client_resent = client_before
                    .zip(client_retrans_segs(cg)?)
                    .map(|(b, a)| a.saturating_sub(b));
                for (k, v) in guest_tcpext(cg)? {
                    let moved = v.saturating_sub(ext_before.get(&k).copied().unwrap_or(0));
                    if moved > 0 {
                        n.client_tcpext.insert(k, moved);
                    }
                }
                if backend == "kernel" {
                    for (k, v) in guest_tcpext(sg)? {
                        let moved = v.saturating_sub(server_ext_before.get(&k).copied().unwrap_or(0));
                        if moved > 0 {
                            n.server_tcpext.insert(k, moved);
                        }
                    }
                }
                for d in ["eth0", "ifb0"] {
                    if let Some(mut after) = netem::stats(cg, d)? {
                        if let Some(b) = before.iter().find(|b| b.dev == d) {
                            after.sent_pkts -= b.sent_pkts.min(after.sent_pkts);
                            after.dropped -= b.dropped.min(after.dropped);
                        }
                        n.qdiscs.push(after);
                    }
                }
                // Every packet of the client's goes through netem both ways, so a spec without
                // loss (delay, jitter, reordering) impairs whatever netem passed.
                let lossless = !o.netem.split_whitespace().any(|w| w == "loss");
                n.impaired = netem::impaired(&n.qdiscs, None)
                    || (lossless && n.qdiscs.iter().any(|q| q.sent_pkts > 0));
                if !n.impaired {
                    ps.push("netem dropped nothing: the run was not impaired".into());
                }
                netem::finish(&mut n, ps);
                eprintln!(
                    "vm-tests: g2g ({}) netem, {backend} server: {} {} (resent {}, client {})",
                    r.kernel,
                    n.outcome,
                    n.detail,
                    n.server_resent.map_or("?".into(), |x| x.to_string()),
                    n.client_resent.map_or("?".into(), |x| x.to_string())
                );
                r.netem.push(n);
            }
            netem::clear(cg, "eth0");
            if !o.netem_on_aggregates {
                netem::set_aggregation(cg, "eth0", restore)?;
            }
        }
        Ok(())
    })();
    let stopped = server::stop(sg, &xs);
    let _ = server::stop(sg, &ks);
    match stopped {
        Ok(st) => {
            let _ = std::fs::write(
                env.run_dir.join(format!("g2g-{}-server.log", r.kernel)),
                &st.log,
            );
            r.server_exit = Some(st.exit_status);
            r.frame_audit = st.frame_audit.clone();
            if let Some(u) = st.unclean() {
                problems.push(format!("xsk server: {u}"));
            }
        }
        Err(e) => problems.push(format!("stopping the xsk server: {e:#}")),
    }
    result
}

fn check(cg: &mut Guest, b: &BenchArgs, tag: &str, backend: &str, what: &str, n: u64) -> G2gCheck {
    let (outcome, load, detail) = match load::rr_bench_in_guest(cg, b, tag) {
        Ok(l) => match l.shortfall(n) {
            None => ("ok", Some(l), String::new()),
            Some(short) => {
                let d = format!(
                    "{short}{}",
                    l.note
                        .as_deref()
                        .map(|x| format!(" ({x})"))
                        .unwrap_or_default()
                );
                ("FAIL", Some(l), d)
            }
        },
        Err(e) => ("FAIL", None, format!("{e:#}")),
    };
    eprintln!("vm-tests: g2g check {backend} {what}: {outcome} {detail}");
    G2gCheck {
        backend: backend.into(),
        what: what.into(),
        outcome: outcome.into(),
        load,
        detail,
    }
}

fn compare(cg: &mut Guest, server_ip: Ipv4Addr, o: &G2gOpts, accel: Accel) -> Result<Perf> {
    let mut p = Perf {
        topology: "guest -> guest".into(),
        offloads: "off".into(),
        attach: o.attach.clone(),
        runs: o.runs,
        run_secs: o.run_secs,
        caveat: match accel {
            Accel::Kvm => "KVM guests, 1 vCPU each".into(),
            _ => "TCG: both guests are emulated (the client's rr-bench and kernel TCP too), and the two \
                  QEMU processes share the host's cores with everything else; the ratio shows which \
                  server path is cheaper under emulation, not what KVM guests would see"
                .into(),
        },
        ..Perf::default()
    };
    p.measure(server_ip, |b, which, i| {
        load::rr_bench_in_guest(cg, b, &format!("perf-{which}-{i}"))
    })?;
    p.summarize();
    eprintln!(
        "vm-tests: g2g kernel vs xsk ({}): {:.0} vs {:.0} req/s, ratio {:.2}",
        o.attach, p.median_kernel_rps, p.median_xsk_rps, p.rps_ratio
    );
    Ok(p)
}

/// The g2g results as tables.
pub fn tables(rs: &[G2g]) -> String {
    let mut s = String::new();
    s.push_str("\n== guest -> guest (QEMU socket netdev over UDP on 127.0.0.1): rr-bench --backend kernel in the client guest\n");
    let mut g = Grid::new(&[
        "kernel", "server", "check", "outcome", "requests", "req/s", "p50us", "p99us", "detail",
    ]);
    for r in rs {
        if r.checks.is_empty() {
            g.row(vec![
                r.kernel.clone(),
                "-".into(),
                "-".into(),
                r.outcome.clone(),
                "-".into(),
                "-".into(),
                "-".into(),
                "-".into(),
                r.detail.clone(),
            ]);
        }
        for c in &r.checks {
            let (n, rps, p50, p99) = match &c.load {
                Some(l) => (
                    l.requests.to_string(),
                    thousands(l.rps),
                    format!("{:.0}", l.p50_us),
                    format!("{:.0}", l.p99_us),
                ),
                None => ("-".into(), "-".into(), "-".into(), "-".into()),
            };
            g.row(vec![
                r.kernel.clone(),
                server_cell(&c.backend, &r.attach),
                c.what.clone(),
                c.outcome.clone(),
                n,
                rps,
                p50,
                p99,
                c.detail.clone(),
            ]);
        }
    }
    s.push_str(&g.render());
    let perf: Vec<(&str, &Perf)> = rs
        .iter()
        .filter_map(|r| r.perf.as_ref().map(|p| (r.kernel.as_str(), p)))
        .collect();
    if !perf.is_empty() {
        s.push_str(&compare::table(
            "\n== guest -> guest: kernel TCP vs xsk server (1 conn, depth 1, 64 B, median of alternating runs)\n",
            &perf,
        ));
    }
    let netem: Vec<NetemRun> = rs.iter().flat_map(|r| r.netem.iter().cloned()).collect();
    if !netem.is_empty() {
        s.push_str(&netem::grid(&netem));
    }
    s
}

/// `vm-tests g2g`.
pub fn run(args: &G2gArgs) -> Result<bool> {
    let env = Env::prepare(&args.common, "g2g")?;
    let r = scenario(&env, env.kernel(), &args.opts);
    let (res, ok) = match r {
        Ok(r) => {
            let ok = r.outcome == "ok";
            (Some(r), ok)
        }
        Err(e) => {
            eprintln!("vm-tests: g2g: {e:#}");
            (None, false)
        }
    };
    let mut t = KvTable::new();
    t.row(
        "result",
        match &res {
            Some(_) if ok => "pass".to_string(),
            Some(r) => format!("FAIL: {}", r.detail),
            None => "FAIL (setup)".to_string(),
        },
    );
    t.row("guest kernel", env.kernel().kernel.describe());
    if let Some(r) = &res {
        t.row("netdev", r.netdev.clone());
        if let Some(p) = &r.port_line {
            t.row("port", p.trim_start_matches("xsk port: ").to_string());
        }
        t.row(
            "server exit",
            format!(
                "status {}, {}",
                r.server_exit.map(|s| s.to_string()).unwrap_or("-".into()),
                r.frame_audit
                    .clone()
                    .unwrap_or_else(|| "no frame audit".into())
            ),
        );
    }
    env.time_and_logs(&mut t);
    let mut s = t.render("vm-tests g2g");
    if let Some(r) = &res {
        s.push_str(&tables(std::slice::from_ref(r)));
    }
    print!("{s}");
    let json = serde_json::json!({
        "scenario": "g2g",
        "result": if ok { "pass" } else { "FAIL" },
        "g2g": res,
        "total_s": env.started.elapsed().as_secs_f64(),
    });
    env.publish("g2g", &json)?;
    Ok(ok)
}

/// The client guest's TCP RetransSegs (/proc/net/snmp).
fn client_retrans_segs(cg: &mut Guest) -> Result<Option<u64>> {
    Ok(server::snmp_retrans_segs(&cg.exec_ok("cat /proc/net/snmp", Duration::from_secs(10))?))
}

/// A guest's TcpExt counters (/proc/net/netstat), by name.
fn guest_tcpext(g: &mut Guest) -> Result<std::collections::BTreeMap<String, u64>> {
    Ok(tcpext(&g.exec_ok("cat /proc/net/netstat", Duration::from_secs(10))?))
}

/// `TcpExt: names` and `TcpExt: values` lines of /proc/net/netstat as a map.
fn tcpext(netstat: &str) -> std::collections::BTreeMap<String, u64> {
    let mut ext = netstat.lines().filter(|l| l.starts_with("TcpExt:"));
    let (Some(names), Some(values)) = (ext.next(), ext.next()) else { return Default::default() };
    names
        .split_whitespace()
        .zip(values.split_whitespace())
        .skip(1)
        .filter_map(|(k, v)| Some((k.to_string(), v.parse().ok()?)))
        .collect()
}

#[cfg(test)]
mod tcpext_tests {
    #[test]
    fn the_clients_tcpext_counters_are_read_by_name() {
        let netstat = "TcpExt: SyncookiesSent TCPSACKReorder\nTcpExt: 0 17\nIpExt: InNoRoutes\nIpExt: 3\n";
        let m = super::tcpext(netstat);
        assert_eq!(m.get("TCPSACKReorder"), Some(&17));
        assert_eq!(m.get("SyncookiesSent"), Some(&0));
        assert_eq!(m.len(), 2);
        assert!(super::tcpext("Ip: 1\n").is_empty());
    }
}
