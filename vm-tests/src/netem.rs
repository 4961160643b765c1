//! netem inside a guest (`vm-tests netem`, and `matrix --netem`): the guest loads sch_netem
//! (shipped in the initramfs, loaded on demand with `vmt_load`), adds
//! `tc qdisc add dev eth0 root netem <spec>` with iproute2's tc, and the stack's echo must
//! stay byte-exact: rr-bench checks every one of `--requests` responses, then the built-in
//! byte check (1 B..100 kB), a clean stop and the frame audit.
//!
//! The qdisc counters are read back (`tc -s qdisc show dev eth0`) and compared with the frames
//! the stack sent: AF_XDP copy-mode TX goes out through `__dev_direct_xmit`, which skips the
//! qdisc layer, and XDP sees incoming frames before any tc ingress hook, so in this topology
//! (server guest, load from the host tap) netem in the server guest does not touch the
//! stack's frames. The report says so (`impaired: false`). The guest-to-guest topology
//! (`vm-tests g2g`) impairs the stack for real: there the *client* guest's kernel TCP goes
//! through netem on its eth0 egress, and through netem on ifb0 (redirected from eth0
//! ingress) on the way back.

use std::net::SocketAddrV4;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde::Serialize;

use crate::env::{Common, Env};
use crate::guest::{Guest, OFFLOADS_OFF};
use crate::load::{self, Bench, BenchArgs, LoadResult};
use crate::netns::HostNet;
use crate::report::{server_cell, thousands, Grid, KvTable};
use crate::server::{self, ServerSpec};

/// iproute2's tc and ip in the guest, by path: the init shell prefers busybox applets (busybox
/// has an incompatible `tc` and an `ip` without ifb).
pub const TC: &str = "/usr/local/bin/tc";
pub const IP: &str = "/usr/local/bin/ip";

/// Default netem parameters: 1 % loss, and 5 % of the packets jump the 1 ms queue of the others
/// (netem reorders only with a delay).
pub const DEFAULT_NETEM: &str = "delay 1ms reorder 5% 50% loss 1%";

#[derive(clap::Args, Debug, Clone)]
pub struct NetemArgs {
    #[command(flatten)]
    pub common: Common,
    /// Checked request/responses (rr-bench, 64-byte echo, 2 connections x depth 2).
    #[arg(long, value_name = "N", default_value_t = 2000)]
    pub requests: u64,
    /// XDP attach mode of the server.
    #[arg(long, default_value = "drv", value_parser = ["skb", "drv", "auto"])]
    pub attach: String,
    /// netem parameters (after `tc qdisc add dev eth0 root netem`).
    #[arg(long, value_name = "SPEC", default_value = DEFAULT_NETEM)]
    pub netem: String,
}

/// Counters of one netem qdisc.
#[derive(Debug, Clone, Default, Serialize)]
pub struct QdiscStats {
    pub dev: String,
    pub sent_pkts: u64,
    pub dropped: u64,
    /// The qdisc's first line (`qdisc netem 8001: root ... loss 1% ...`).
    pub line: String,
}

/// One netem run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct NetemRun {
    /// "host tap -> guest" or "guest -> guest".
    pub topology: String,
    pub kernel: String,
    pub attach: String,
    /// Backend of the server under test (xsk or kernel).
    pub backend: String,
    /// Where netem sits.
    pub placement: String,
    pub netem: String,
    pub requests: u64,
    pub load: Option<LoadResult>,
    pub byte_check: Option<LoadResult>,
    pub qdiscs: Vec<QdiscStats>,
    /// Frames the xsk stack sent (its device counter), to compare with the qdisc's.
    pub stack_tx_frames: Option<u64>,
    /// Whether the stack's traffic went through netem (dropped > 0 or as many packets as
    /// the stack sent).
    pub impaired: bool,
    /// Segments the server sent again during the run (g2g: `server::resent` before and
    /// after; the stack counts its RTOs, fast and hole retransmits and probes, kernel TCP
    /// its RetransSegs).
    pub server_resent: Option<u64>,
    /// Segments the client sent again during the run (g2g: the client guest's RetransSegs;
    /// it runs no other TCP sender). A server's receive side shows here: what it ACKs, and
    /// what it drops, the client sends again.
    #[serde(default)]
    pub client_resent: Option<u64>,
    /// g2g: the client guest's TcpExt counters (/proc/net/netstat) that moved during the
    /// run: how its TCP saw the server (reordering detected, D-SACKs, probes, timeouts).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub client_tcpext: std::collections::BTreeMap<String, u64>,
    /// xsk server only: its recovery counters that moved during the run (rto_retransmits,
    /// tail_probes, spurious_probes, ...).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub server_recovery: std::collections::BTreeMap<String, u64>,
    /// kernel server only: the server guest's TcpExt counters that moved during the run.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub server_tcpext: std::collections::BTreeMap<String, u64>,
    pub server_exit: Option<i32>,
    /// ok | FAIL
    pub outcome: String,
    pub detail: String,
}

/// ethtool in the guest (from the host's, like tc).
pub const ETHTOOL: &str = "/usr/local/bin/ethtool";

/// A device's packet aggregation: GRO on receive, GSO super-packets of up to
/// `gso_max_segs` segments on send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Aggregation {
    /// GRO off, `gso_max_segs 1`: every skb is one wire packet.
    Off,
    /// GRO on, GSO up to this many segments (the value read before [`Aggregation::Off`]).
    On { gso_max_segs: u32 },
}

/// Sets `dev`'s packet aggregation.
///
/// A qdisc sees skbs, not wire packets: with GRO on, the ifb0 netem drops a whole merged
/// burst of the peer's segments as one loss, and the local TCP's GSO super-packets (TCP
/// builds them whatever the device's `gso` feature says) reach the egress netem whole.
/// netem's `loss 1%` then takes about 1% of *aggregates*, which are larger for a sender whose
/// segments merge well, while a loss on a real path takes wire packets one at a time. Off,
/// both servers' packets are dropped one by one at the same rate. Read back afterwards: a
/// setting the kernel ignored is an error.
pub fn set_aggregation(g: &mut Guest, dev: &str, to: Aggregation) -> Result<()> {
    let (gro, segs) = match to {
        Aggregation::Off => ("off", 1),
        Aggregation::On { gso_max_segs } => ("on", gso_max_segs),
    };
    // The init shell evals commands itself: no `exit` here.
    g.exec_ok(
        &format!(
            "if [ -x {ETHTOOL} ]; then {ETHTOOL} -K {dev} gro {gro} && {IP} link set dev {dev} gso_max_segs {segs}; \
             else echo 'no ethtool in the guest (apt-get install ethtool on the host)'; false; fi"
        ),
        Duration::from_secs(10),
    )?;
    let k = g.exec_ok(&format!("{ETHTOOL} -k {dev}"), Duration::from_secs(10))?;
    let line = k
        .lines()
        .find(|l| l.trim_start().starts_with("generic-receive-offload:"))
        .with_context(|| format!("ethtool -k {dev}: no generic-receive-offload line"))?;
    if !line.contains(&format!(": {gro}")) {
        bail!("{dev}: GRO not {gro} after ethtool -K ({})", line.trim());
    }
    if gso_max_segs(g, dev)? != segs {
        bail!("{dev}: gso_max_segs is not {segs} after ip link set");
    }
    Ok(())
}

/// `dev`'s gso_max_segs (`ip -d link show`).
pub fn gso_max_segs(g: &mut Guest, dev: &str) -> Result<u32> {
    let out = g.exec_ok(&format!("{IP} -d link show dev {dev}"), Duration::from_secs(10))?;
    parse_gso_max_segs(&out).with_context(|| format!("ip -d link show dev {dev}: no gso_max_segs"))
}

/// The number after `gso_max_segs` in `ip -d link show` output.
fn parse_gso_max_segs(out: &str) -> Option<u32> {
    let mut words = out.split_whitespace();
    words.find(|w| *w == "gso_max_segs")?;
    words.next()?.parse().ok()
}


/// Loads what netem on `dev` egress needs and adds it.
pub fn add_egress(g: &mut Guest, dev: &str, spec: &str) -> Result<()> {
    g.exec_ok(
        &format!("vmt_load sch_netem && {TC} qdisc add dev {dev} root netem {spec}"),
        Duration::from_secs(20),
    )?;
    Ok(())
}

/// netem on the traffic `dev` receives: eth0's ingress redirected (matchall + mirred) to
/// ifb0, netem on ifb0's egress.
pub fn add_ingress(g: &mut Guest, dev: &str, spec: &str) -> Result<()> {
    g.exec_ok(
        &format!(
            "vmt_load sch_netem && vmt_load ifb && vmt_load sch_ingress && vmt_load cls_matchall && vmt_load act_mirred \
             && {{ {IP} link show ifb0 >/dev/null 2>&1 || {IP} link add ifb0 type ifb; }} && {IP} link set ifb0 up \
             && {TC} qdisc add dev {dev} handle ffff: ingress \
             && {TC} filter add dev {dev} parent ffff: matchall action mirred egress redirect dev ifb0 \
             && {TC} qdisc add dev ifb0 root netem {spec}"
        ),
        Duration::from_secs(20),
    )?;
    Ok(())
}

/// Removes what [`add_egress`] and [`add_ingress`] added (errors ignored).
pub fn clear(g: &mut Guest, dev: &str) {
    let _ = g.exec(
        &format!(
            "{TC} qdisc del dev {dev} root 2>/dev/null; {TC} qdisc del dev {dev} ingress 2>/dev/null; \
             {TC} qdisc del dev ifb0 root 2>/dev/null; true"
        ),
        Duration::from_secs(10),
    );
}

/// `tc -s qdisc show dev DEV`, parsed for its netem qdisc.
pub fn stats(g: &mut Guest, dev: &str) -> Result<Option<QdiscStats>> {
    let out = g.exec_ok(
        &format!("{TC} -s qdisc show dev {dev}"),
        Duration::from_secs(10),
    )?;
    Ok(parse_stats(dev, &out))
}

/// Finds the netem qdisc in `tc -s qdisc show` output and its `Sent ... pkt (dropped N, ...`.
pub fn parse_stats(dev: &str, out: &str) -> Option<QdiscStats> {
    let mut lines = out
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("qdisc netem"));
    let head = lines.next()?.trim().to_string();
    let sent = lines.find(|l| l.trim_start().starts_with("Sent "))?;
    let words: Vec<&str> = sent.split_whitespace().collect();
    let pkts = words
        .iter()
        .position(|w| *w == "pkt")
        .and_then(|i| words.get(i.checked_sub(1)?))
        .and_then(|w| w.parse().ok())
        .unwrap_or(0);
    let dropped = words
        .iter()
        .position(|w| *w == "(dropped")
        .and_then(|i| words.get(i + 1))
        .and_then(|w| w.trim_end_matches(',').parse().ok())
        .unwrap_or(0);
    Some(QdiscStats {
        dev: dev.into(),
        sent_pkts: pkts,
        dropped,
        line: head,
    })
}

/// `tx_frames` of the `xsk device: {...}` line of an rr-server log.
pub fn stack_tx_frames(log: &str) -> Option<u64> {
    server::device_field(log, "tx_frames")?.as_u64()
}

/// The tap-topology case in an already booted guest (offloads off): xsk server on port 7003,
/// netem on the guest's eth0 egress, rr-bench + byte check from the host.
#[allow(clippy::too_many_arguments)]
pub fn tap_case(
    env: &Env,
    g: &mut Guest,
    net: &HostNet,
    kernel: &str,
    attach: &str,
    requests: u64,
    spec: &str,
    n: usize,
) -> Result<NetemRun> {
    let mut r = NetemRun {
        topology: "host tap -> guest".into(),
        kernel: kernel.into(),
        attach: attach.into(),
        backend: "xsk".into(),
        placement: "server guest: eth0 root (egress)".into(),
        netem: spec.into(),
        requests,
        ..NetemRun::default()
    };
    let s = ServerSpec::xsk(&format!("n{n}"), attach, "shared", 7003);
    match server::start(g, &s)? {
        Ok(_) => {}
        Err(refused) => {
            r.outcome = "FAIL".into();
            r.detail = format!("rr-server did not start: {}", refused.reason());
            return Ok(r);
        }
    }
    let mut problems: Vec<String> = Vec::new();
    if let Err(e) = add_egress(g, "eth0", spec) {
        problems.push(format!("netem setup: {e:#}"));
    }
    let dst = SocketAddrV4::new(net.guest_addr, 7003);
    if problems.is_empty() {
        let b = BenchArgs::checked(dst, requests, Duration::from_secs(120)).under_netem();
        let json = env.run_dir.join(format!("netem{n}-rr-bench.json"));
        match load::rr_bench(&env.bin_dir, net, &b, &json) {
            Ok(Bench::Ran(l)) => {
                if let Some(short) = l.shortfall(requests) {
                    problems.push(format!("rr-bench: {short}"));
                }
                r.load = Some(l);
            }
            Ok(Bench::Unusable(why)) => problems.push(format!("rr-bench unusable: {why}")),
            Err(e) => problems.push(format!("rr-bench: {e:#}")),
        }
        r.byte_check = load::byte_check(net, dst, 0x7e7e + n as u64, &mut problems);
        if let Some(st) = stats(g, "eth0")? {
            r.qdiscs.push(st);
        }
    }
    clear(g, "eth0");
    let stopped = server::stop(g, &s)?;
    let _ = std::fs::write(
        env.run_dir.join(format!("netem{n}-server.log")),
        &stopped.log,
    );
    r.server_exit = Some(stopped.exit_status);
    r.stack_tx_frames = stack_tx_frames(&stopped.log);
    problems.extend(stopped.unclean());
    r.impaired = impaired(&r.qdiscs, r.stack_tx_frames);
    finish(&mut r, problems);
    Ok(r)
}

/// Whether the stack's frames went through the netem qdiscs: something was dropped, or they
/// passed at least half as many packets as the stack sent.
pub fn impaired(q: &[QdiscStats], stack_tx: Option<u64>) -> bool {
    let dropped: u64 = q.iter().map(|s| s.dropped).sum();
    let sent: u64 = q.iter().map(|s| s.sent_pkts).sum();
    dropped > 0 || stack_tx.is_some_and(|t| t > 0 && sent * 2 >= t)
}

/// Sets outcome and detail from the problems and the qdisc counters.
pub fn finish(r: &mut NetemRun, problems: Vec<String>) {
    let counters = r
        .qdiscs
        .iter()
        .map(|q| format!("{}: {} pkts, {} dropped", q.dev, q.sent_pkts, q.dropped))
        .collect::<Vec<_>>()
        .join("; ");
    let mut detail = if counters.is_empty() {
        "no netem counters".to_string()
    } else {
        format!("netem {counters}")
    };
    if let Some(t) = r.stack_tx_frames {
        detail.push_str(&format!("; stack sent {t} frames"));
    }
    if !r.impaired && r.backend == "xsk" && r.placement.starts_with("server") && r.load.is_some() {
        detail.push_str(
            "; not impaired: AF_XDP copy-mode TX bypasses the qdisc (__dev_direct_xmit) and XDP \
             runs before tc ingress, so netem in the server guest cannot touch the stack's frames \
             (g2g impairs them from the client guest)",
        );
    }
    if problems.is_empty() {
        r.outcome = "ok".into();
        r.detail = detail;
    } else {
        r.outcome = "FAIL".into();
        r.detail = format!("{}; {detail}", problems.join("; "));
    }
}

/// `vm-tests netem`.
pub fn run(args: &NetemArgs) -> Result<bool> {
    let env = Env::prepare(&args.common, "netem")?;
    let net = HostNet::create()?;
    let spec = env.spec("netem", &net, OFFLOADS_OFF);
    let outcome = (|| -> Result<(NetemRun, Guest)> {
        let mut g = Guest::boot(&spec, &net, env.common.accel)?;
        eprintln!(
            "vm-tests: guest up in {:.1} s ({}): {}",
            g.boot_secs,
            g.accel.name(),
            g.up_line
        );
        let r = tap_case(
            &env,
            &mut g,
            &net,
            env.kernel().sel.label(),
            &args.attach,
            args.requests,
            &args.netem,
            0,
        )?;
        Ok((r, g))
    })();
    let (run, ok) = match outcome {
        Ok((r, g)) => {
            let _ = g.poweroff();
            let ok = r.outcome == "ok";
            (Some(r), ok)
        }
        Err(e) => {
            eprintln!("vm-tests: netem: {e:#}");
            (None, false)
        }
    };
    let mut t = KvTable::new();
    t.row("result", if ok { "pass" } else { "FAIL" });
    t.row("guest kernel", env.kernel().kernel.describe());
    env.time_and_logs(&mut t);
    let mut s = t.render("vm-tests netem");
    if let Some(r) = &run {
        s.push_str(&grid(std::slice::from_ref(r)));
    }
    print!("{s}");
    let json = serde_json::json!({
        "scenario": "netem",
        "result": if ok { "pass" } else { "FAIL" },
        "guest_kernel": env.kernel().kernel.describe(),
        "run": run,
        "total_s": env.started.elapsed().as_secs_f64(),
    });
    env.publish("netem", &json)?;
    Ok(ok)
}

/// The netem runs as a table.
pub fn grid(runs: &[NetemRun]) -> String {
    let mut g = Grid::new(&[
        "kernel", "topology", "server", "netem at", "outcome", "requests", "req/s", "p99us",
        "p99.9us", "resent/100req", "client resent/100req", "impaired", "detail",
    ]);
    for r in runs {
        let per_100 = |n: Option<u64>| match (n, &r.load) {
            (Some(n), Some(l)) if l.requests > 0 => format!("{:.2}", 100.0 * n as f64 / l.requests as f64),
            _ => "-".into(),
        };
        let (resent, client_resent) = (per_100(r.server_resent), per_100(r.client_resent));
        let (reqs, rps, p99, p999) = match &r.load {
            Some(l) => (
                format!("{}/{}", l.requests, r.requests),
                thousands(l.rps),
                format!("{:.0}", l.p99_us),
                format!("{:.0}", l.p999_us),
            ),
            None => ("-".into(), "-".into(), "-".into(), "-".into()),
        };
        g.row(vec![
            r.kernel.clone(),
            r.topology.clone(),
            server_cell(&r.backend, &r.attach),
            r.placement.clone(),
            r.outcome.clone(),
            reqs,
            rps,
            p99,
            p999,
            resent,
            client_resent,
            if r.impaired { "yes" } else { "no" }.into(),
            r.detail.clone(),
        ]);
    }
    let mut s = format!(
        "\n== netem ({}): rr-bench checks every response (host tap runs: then the byte check, 1 B..100 kB)\n",
        runs.first().map(|r| r.netem.as_str()).unwrap_or("")
    );
    s.push_str(&g.render());
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qdisc_counters() {
        let out = "qdisc netem 8001: root refcnt 2 limit 1000 delay 1ms reorder 5% 50% loss 1%\n Sent 123456 bytes 2040 pkt (dropped 21, overlimits 0 requeues 0) \n backlog 0b 0p requeues 0\n";
        let s = parse_stats("eth0", out).unwrap();
        assert_eq!((s.sent_pkts, s.dropped), (2040, 21));
        assert!(s.line.contains("loss 1%"));
        assert!(parse_stats(
            "eth0",
            "qdisc pfifo_fast 0: root\n Sent 1 bytes 1 pkt (dropped 0, overlimits 0 requeues 0)\n"
        )
        .is_none());
    }

    #[test]
    fn stack_counters() {
        let log = "xsk stack: accepted 3\nxsk device: {\"rx_frames\":943,\"tx_frames\":1348,\"tx_dropped\":0}\n";
        assert_eq!(stack_tx_frames(log), Some(1348));
        assert!(!impaired(
            &[QdiscStats {
                sent_pkts: 3,
                ..Default::default()
            }],
            Some(1348)
        ));
        assert!(impaired(
            &[QdiscStats {
                dropped: 1,
                ..Default::default()
            }],
            None
        ));
    }
}

#[cfg(test)]
mod aggregation_tests {
    #[test]
    fn gso_max_segs_is_read_from_ip_link() {
        let out = "2: eth0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc netem state UP\n    \
                   link/ether 52:54:00:12:34:56 brd ff:ff:ff:ff:ff:ff promiscuity 0 minmtu 68 maxmtu 65535 \
                   addrgenmode eui64 numtxqueues 1 gso_max_size 65536 gso_max_segs 65535 tso_max_size 65536";
        assert_eq!(super::parse_gso_max_segs(out), Some(65535));
        assert_eq!(super::parse_gso_max_segs("gso_max_size 65536 gso_max_segs 1"), Some(1));
        assert_eq!(super::parse_gso_max_segs("gso_max_size 65536"), None);
        assert_eq!(super::parse_gso_max_segs("gso_max_segs x"), None);
    }
}
