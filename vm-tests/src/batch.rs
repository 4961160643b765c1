//! `vm-tests batch`: the port's XDP_GENERIC_XMIT_BATCH path (socket option 10) in a guest
//! kernel that has it (by default our own build, `vm-tests/kernel/build.sh`; `--kernel-image`
//! for another one).
//!
//! 1. Probe: rr-server --backend xsk with `--xmit-batch` 1, 8, 32 and the TX budget (the
//!    largest value the kernel accepts): the port line must show the value the kernel reads back
//!    with getsockopt, 1,000 checked requests and the byte check (1 B to 100 kB) must pass, and
//!    the server must stop with `frame audit: ok`. One more than the budget must be refused.
//! 2. `xsk-bench txonly` in the guest (64-byte frames to the host tap), batch off, 8 and 32:
//!    packets per second of the guest's clock, kicks per packet, guest CPU per packet.
//! 3. The RR server at 16 and 256 connections, batch off and 32: per request as in `cost`.
//!
//! The guest runs under `-icount` (see `cost`), so rates and CPU are in the guest's
//! instruction-counted time. A kick costs QEMU's TCG little; under KVM it is a VM exit, which
//! is what the kick counts stand for.

use std::net::SocketAddrV4;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde::Serialize;

use crate::cost_counts::{self, icount_shift, PerUnit};
use crate::cost_measure::{self, measure_rr, RrLoad};
use crate::env::{Common, Env};
use crate::guest::Guest;
use crate::kernel::KernelSel;
use crate::load::{self, Bench, BenchArgs};
use crate::netns::HostNet;
use crate::report::{ReportHead, thousands, Grid, KvTable};
use crate::server::{self, ServerSpec};
use crate::util::{check_interrupted, median};

#[derive(clap::Args, Debug, Clone)]
pub struct BatchArgs {
    #[command(flatten)]
    pub common: Common,
    /// Boot the --kernel given (6.1, new) instead of the batched-xmit build; there option 10
    /// is refused and only the "off" cases run.
    #[arg(long)]
    pub stock: bool,
    /// Only the probe (option 10 accepted, read back, checks hold at 1, 8, 32, budget).
    #[arg(long)]
    pub probe_only: bool,
    /// Seconds of each xsk-bench txonly run (the first second is warm-up).
    #[arg(long, value_name = "SECS", default_value_t = 6)]
    pub tx_secs: u32,
    /// Rounds of the txonly and RR measurements (cases alternate within a round).
    #[arg(long, value_name = "N", default_value_t = 2)]
    pub runs: usize,
    /// Requests of each RR measurement's long run.
    #[arg(long, value_name = "N", default_value_t = 4000)]
    pub requests: u64,
    /// QEMU -icount value.
    #[arg(long, value_name = "SPEC", default_value = "shift=4")]
    pub icount: String,
    /// XDP attach mode of the RR server.
    #[arg(long, default_value = "drv", value_parser = ["skb", "drv", "auto"])]
    pub attach: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct Probe {
    pub xmit_batch: String,
    pub accepted: bool,
    pub port_line: Option<String>,
    pub read_back: Option<u32>,
    pub load: Option<load::LoadResult>,
    pub byte_check: Option<load::LoadResult>,
    pub frame_audit: Option<String>,
    pub problems: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct TxRow {
    pub xmit_batch: String,
    pub round: usize,
    /// xsk-bench's median packets per second (guest clock).
    pub pps: f64,
    /// Guest busy CPU per packet, ns.
    pub cpu_ns_per_pkt: f64,
    pub kicks_per_pkt: f64,
    pub tx_irqs_per_pkt: f64,
    pub pkts: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct RrRow {
    pub xmit_batch: String,
    pub conns: usize,
    pub round: usize,
    pub requests: u64,
    #[serde(flatten)]
    pub per_request: PerUnit,
}

#[derive(Debug, Default, Serialize)]
pub struct BatchReport {
    #[serde(flatten)]
    pub head: ReportHead,
    pub icount: String,
    pub guest_kernel: String,
    pub guest_kernel_source: String,
    pub tx_budget: Option<u32>,
    pub probes: Vec<Probe>,
    pub refused_over_budget: Option<String>,
    pub txonly: Vec<TxRow>,
    pub rr: Vec<RrRow>,
    pub losses: Vec<String>,
    pub total_s: f64,
    pub logs: String,
}

/// `key=VALUE` of the port line, e.g. `xmit_batch=8`.
pub fn port_field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(key)?.strip_prefix('='))
}

pub fn run(args: &BatchArgs) -> Result<bool> {
    let sel = if args.stock {
        args.common.kernel
    } else {
        KernelSel::Batch
    };
    let env = Env::prepare_kernels(&args.common, "batch", &[sel])?;
    let mut rep = BatchReport {
        head: env.report_head("batch"),
        icount: args.icount.clone(),
        guest_kernel: env.kernel().kernel.release.clone(),
        guest_kernel_source: env.kernel().kernel.source.clone(),
        logs: env.run_dir.display().to_string(),
        ..BatchReport::default()
    };
    let outcome = body(&env, args, &mut rep);
    rep.total_s = env.started.elapsed().as_secs_f64();
    rep.head.record(&outcome);
    print!("{}", table(&rep));
    env.publish("batch", &serde_json::to_value(&rep)?)?;
    Ok(outcome.is_ok())
}

fn xsk_server(tag: &str, attach: &str, batch: &str) -> ServerSpec {
    let mut s = ServerSpec::xsk(tag, attach, "shared", 7000);
    s.extra = vec!["--xmit-batch".into(), batch.into()];
    s
}

/// One probe: server with `--xmit-batch batch`, checked load, byte check, clean stop.
fn probe(env: &Env, net: &HostNet, g: &mut Guest, attach: &str, batch: &str) -> Result<Probe> {
    let tag = format!("probe_{batch}");
    let s = xsk_server(&tag, attach, batch);
    let mut p = Probe {
        xmit_batch: batch.into(),
        accepted: false,
        port_line: None,
        read_back: None,
        load: None,
        byte_check: None,
        frame_audit: None,
        problems: vec![],
    };
    match server::start(g, &s)? {
        Ok(st) => {
            p.accepted = true;
            p.port_line = st.port_line.clone();
        }
        Err(r) => {
            p.problems.push(format!(
                "rr-server --xmit-batch {batch} refused: {}",
                r.reason()
            ));
            return Ok(p);
        }
    }
    let line = p.port_line.clone().unwrap_or_default();
    p.read_back = port_field(&line, "xmit_batch").and_then(|v| v.parse().ok());
    // off: the port does not set the option (the features line says "unsupported").
    if batch != "off" && p.read_back.map(|v| v.to_string()) != Some(batch.to_string()) {
        p.problems.push(format!(
            "port reports xmit_batch={:?}, asked for {batch}",
            port_field(&line, "xmit_batch")
        ));
    }
    let dst = SocketAddrV4::new(net.guest_addr, 7000);
    let n = 1000;
    match load::rr_bench(
        &env.bin_dir,
        net,
        &BenchArgs::checked(dst, n, Duration::from_secs(90)),
        &env.run_dir.join(format!("{tag}.json")),
    )? {
        Bench::Ran(r) => {
            if let Some(s) = r.shortfall(n) {
                p.problems.push(format!("rr-bench: {s}"));
            }
            p.load = Some(r);
        }
        Bench::Unusable(why) => p.problems.push(format!("rr-bench unusable: {why}")),
    }
    p.byte_check = load::byte_check(net, dst, 0xba7c, &mut p.problems);
    let st = server::stop(g, &s)?;
    let _ = std::fs::write(env.run_dir.join(format!("{tag}.log")), &st.log);
    p.frame_audit = st.frame_audit.clone();
    if let Some(u) = st.unclean() {
        p.problems.push(u);
    }
    Ok(p)
}

fn body(env: &Env, a: &BatchArgs, rep: &mut BatchReport) -> Result<()> {
    let net = HostNet::create()?;
    let ks = env.kernel();
    let mut g = cost_measure::boot_counted(env, ks, &net, "batch", &a.icount, "off", true)?;
    let mut problems = Vec::new();

    // 1. Probe at 1, 8, 32 and the budget.
    let mut sizes: Vec<String> = if a.stock {
        vec!["off".into()]
    } else {
        vec!["1".into(), "8".into(), "32".into()]
    };
    let mut i = 0;
    while i < sizes.len() {
        check_interrupted()?;
        let p = probe(env, &net, &mut g, &a.attach, &sizes[i].clone())?;
        eprintln!(
            "vm-tests: probe xmit_batch {}: {}",
            p.xmit_batch,
            if p.problems.is_empty() {
                "ok".to_string()
            } else {
                p.problems.join("; ")
            }
        );
        if i == 0 && !a.stock {
            rep.tx_budget = p
                .port_line
                .as_deref()
                .and_then(|l| port_field(l, "tx_budget"))
                .and_then(|v| v.parse().ok());
            match rep.tx_budget {
                Some(b) => sizes.push(b.to_string()),
                None => problems.push(format!("no tx_budget in the port line: {:?}", p.port_line)),
            }
        }
        problems.extend(
            p.problems
                .iter()
                .map(|x| format!("xmit_batch {}: {x}", p.xmit_batch)),
        );
        rep.probes.push(p);
        i += 1;
    }
    if let Some(b) = rep.tx_budget {
        // One over the budget: the kernel must refuse it and the server must say so.
        let over = (b + 1).to_string();
        let s = xsk_server("probe_over", &a.attach, &over);
        match server::start(&mut g, &s)? {
            Ok(_) => {
                let _ = server::stop(&mut g, &s);
                problems.push(format!("xmit_batch {over} (budget {b} + 1) was accepted"));
            }
            Err(r) => {
                let why = r.reason();
                if !why.contains("XDP_GENERIC_XMIT_BATCH") {
                    problems.push(format!(
                        "xmit_batch {over}: refused without naming the option: {why}"
                    ));
                }
                rep.refused_over_budget = Some(why);
            }
        }
    }
    if !problems.is_empty() {
        bail!("{}", problems.join("\n"));
    }
    if a.probe_only {
        let _ = g.poweroff();
        return Ok(());
    }

    // 2. txonly, guest to host.
    let tx_cases: Vec<&str> = if a.stock {
        vec!["off"]
    } else {
        vec!["off", "8", "32"]
    };
    for round in 0..a.runs {
        for b in &tx_cases {
            check_interrupted()?;
            let s0 = cost_counts::snap(&mut g, "")?;
            let cmd = format!(
                "xsk-bench txonly -i eth0 --xmit-batch {b} -d {} --quiet --json /tmp/tx.json > /tmp/tx.log 2>&1; echo rc=$?",
                a.tx_secs
            );
            let out = g.exec_ok(&cmd, Duration::from_secs(u64::from(a.tx_secs) * 20 + 60))?;
            let s1 = cost_counts::snap(&mut g, "")?;
            if !out.contains("rc=0") {
                let log = g.exec_ok("tail -n 20 /tmp/tx.log", Duration::from_secs(10))?;
                bail!("xsk-bench txonly --xmit-batch {b} failed: {log}");
            }
            // Only the two top-level fields: the whole summary is long for the console.
            let js = g.exec_ok(
                r#"grep -E '^  "(pps|audit)":' /tmp/tx.json"#,
                Duration::from_secs(10),
            )?;
            let field = |k: &str| -> Option<String> {
                js.lines()
                    .find_map(|l| l.trim().strip_prefix(&format!("\"{k}\":")))
                    .map(|v| v.trim().trim_end_matches(',').trim_matches('"').to_string())
            };
            let pps: f64 = field("pps")
                .and_then(|v| v.parse().ok())
                .with_context(|| format!("no pps in xsk-bench's JSON: {js}"))?;
            let audit = field("audit").unwrap_or_default();
            if !audit.contains("ok") {
                bail!("xsk-bench txonly --xmit-batch {b}: frame audit {audit:?}");
            }
            let (c0, c1) = (s0.counts(), s1.counts());
            let pkts = c1.pkts_out - c0.pkts_out;
            let per = PerUnit::between(&c0, &c1, pkts.max(1.0));
            let row = TxRow {
                xmit_batch: b.to_string(),
                round,
                pps,
                cpu_ns_per_pkt: per.cpu_us * 1e3,
                kicks_per_pkt: per.tx_kicks,
                tx_irqs_per_pkt: per.irq_out,
                pkts,
            };
            eprintln!(
                "vm-tests: txonly xmit_batch {b:>3} round {round}: {} pps, {:.3} kicks/pkt, {:.0} ns CPU/pkt",
                thousands(row.pps),
                row.kicks_per_pkt,
                row.cpu_ns_per_pkt
            );
            rep.txonly.push(row);
        }
    }

    // 3. RR at 16 and 256 connections, batch off and 32.
    let rr_cases: Vec<&str> = if a.stock {
        vec!["off"]
    } else {
        vec!["off", "32"]
    };
    for round in 0..a.runs {
        for b in &rr_cases {
            let tag = format!("rr_{}", b);
            let s = xsk_server(&tag, &a.attach, b);
            if let Err(r) = server::start(&mut g, &s)? {
                bail!("rr-server --xmit-batch {b}: {}", r.reason());
            }
            let dst = SocketAddrV4::new(net.guest_addr, 7000);
            let mut failed = None;
            for conns in [16usize, 256] {
                check_interrupted()?;
                match measure_rr(
                    env,
                    &net,
                    &mut g,
                    &format!("$PID_{tag}"),
                    RrLoad { dst, conns, requests: a.requests, rate: None },
                    &format!("batch-{b}-c{conns}-r{round}"),
                ) {
                    Ok((per, r, _, _, lost)) => {
                        rep.losses.extend(lost);
                        eprintln!(
                            "vm-tests: rr xmit_batch {b:>3} conns {conns:3} round {round}: {:.1} us/req, kicks tx {:.3}",
                            per.cpu_us, per.tx_kicks
                        );
                        rep.rr.push(RrRow {
                            xmit_batch: b.to_string(),
                            conns,
                            round,
                            requests: r.requests,
                            per_request: per,
                        });
                    }
                    Err(e) => {
                        failed = Some(e);
                        break;
                    }
                }
            }
            let st = server::stop(&mut g, &s)?;
            let _ = std::fs::write(env.run_dir.join(format!("{tag}-r{round}.log")), &st.log);
            if let Some(e) = failed {
                return Err(e);
            }
            if let Some(u) = st.unclean() {
                bail!("rr-server --xmit-batch {b}: {u}");
            }
        }
    }
    let _ = g.poweroff();
    if !rep.losses.is_empty() {
        bail!("requests lost: {}", rep.losses.join("; "));
    }
    Ok(())
}

fn table(r: &BatchReport) -> String {
    let mut t = KvTable::new();
    r.head.rows(&mut t);
    t.row(
        "guest kernel",
        format!("{} ({})", r.guest_kernel, r.guest_kernel_source),
    );
    t.row("guest clock", format!("TCG, -icount {}", r.icount));
    if let Some(b) = r.tx_budget {
        t.row("tx budget", b.to_string());
    }
    for p in &r.probes {
        t.row(
            format!("probe {}", p.xmit_batch),
            format!(
                "{}; read back {:?}; load {}; byte check {}; {}",
                if p.accepted { "accepted" } else { "refused" },
                p.read_back,
                p.load
                    .as_ref()
                    .map(|l| format!("{}/{} ok", l.requests - l.errors - l.lost, l.requests))
                    .unwrap_or("-".into()),
                p.byte_check
                    .as_ref()
                    .map(|c| format!("{} sizes, {} mismatches", c.requests, c.errors))
                    .unwrap_or("-".into()),
                p.frame_audit
                    .clone()
                    .unwrap_or_else(|| "no frame audit".into())
            ),
        );
    }
    if let Some(w) = &r.refused_over_budget {
        t.row("over budget", format!("refused: {w}"));
    }
    t.row("time", format!("{:.0} s", r.total_s));
    t.row("logs", r.logs.clone());
    let mut s = t.render("vm-tests batch");
    if !r.txonly.is_empty() {
        s.push_str("  xsk-bench txonly, 64 B guest -> host (medians over rounds; guest clock):\n");
        let mut g = Grid::new(&[
            "xmit_batch",
            "pps",
            "kicks/pkt",
            "cpu ns/pkt",
            "tx irqs/pkt",
            "rounds",
        ]);
        let mut keys: Vec<&str> = Vec::new();
        for x in &r.txonly {
            if !keys.contains(&x.xmit_batch.as_str()) {
                keys.push(&x.xmit_batch);
            }
        }
        for k in keys {
            let rows: Vec<&TxRow> = r.txonly.iter().filter(|x| x.xmit_batch == k).collect();
            let m = |f: fn(&TxRow) -> f64| median(&rows.iter().map(|x| f(x)).collect::<Vec<_>>());
            g.row(vec![
                k.to_string(),
                thousands(m(|x| x.pps)),
                format!("{:.3}", m(|x| x.kicks_per_pkt)),
                format!("{:.0}", m(|x| x.cpu_ns_per_pkt)),
                format!("{:.3}", m(|x| x.tx_irqs_per_pkt)),
                rows.len().to_string(),
            ]);
        }
        s.push_str(&g.render());
    }
    if !r.rr.is_empty() {
        s.push_str("  rr-server (xsk) per request, 64 B, depth 1 (medians over rounds):\n");
        let mut g = Grid::new(&[
            "xmit_batch",
            "conns",
            "kinsn/req",
            "cpu us/req",
            "kicks tx",
            "irq out",
            "pkts out",
            "rounds",
        ]);
        let mut keys: Vec<(String, usize)> = Vec::new();
        for x in &r.rr {
            if !keys.contains(&(x.xmit_batch.clone(), x.conns)) {
                keys.push((x.xmit_batch.clone(), x.conns));
            }
        }
        for (b, c) in keys {
            let rows: Vec<PerUnit> =
                r.rr.iter()
                    .filter(|x| x.xmit_batch == b && x.conns == c)
                    .map(|x| x.per_request)
                    .collect();
            let m = PerUnit::median_of(&rows);
            g.row(vec![
                b,
                c.to_string(),
                icount_shift(&r.icount)
                    .map(|s| format!("{:.1}", m.cpu_us / f64::from(1u32 << s)))
                    .unwrap_or("-".into()),
                format!("{:.1}", m.cpu_us),
                format!("{:.3}", m.tx_kicks),
                format!("{:.3}", m.irq_out),
                format!("{:.2}", m.pkts_out),
                rows.len().to_string(),
            ]);
        }
        s.push_str(&g.render());
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_fields() {
        let l = "xsk port: eth0:0 driver=virtio_net xdp=drv copy-mode need_wakeup=true tx_budget=4096 xmit_batch=8 busy_poll=off";
        assert_eq!(port_field(l, "xmit_batch"), Some("8"));
        assert_eq!(port_field(l, "tx_budget"), Some("4096"));
        assert_eq!(port_field(l, "batch"), None);
    }
}
