//! rr-demo's runs: the loss rules, the servers, the lab, and one run of a case against one
//! backend.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use apps::stats::{is_drop, Snapshot};
use apps::server_process::ServerProcess;
use apps::RecoveryCounts;
use xsk_io::AttachMode;
use xsk_lab::lab::{Lab, LabConfig, Netns};

use crate::Args;
use crate::cases::{Case, LossKind, OUTAGE_MS, OUTAGE_ONE_IN};
use crate::metrics::{Metrics, Row};

/// The nftables ruleset for a loss case, with counters (`frames`, `dropped`, `outages`).
pub(super) fn loss_rules(kind: LossKind) -> String {
    let chain = |name: &str, hook: &str| {
        let drops = match kind {
            LossKind::Random1 => "numgen random mod 100 < 1 counter name \"dropped\" drop".to_string(),
            LossKind::Outages => format!(
                "meta l4proto @outage counter name \"dropped\" drop\n    \
                 meta l4proto tcp numgen random mod {OUTAGE_ONE_IN} < 1 add @outage {{ meta l4proto }} \
                 counter name \"outages\" counter name \"dropped\" drop"
            ),
        };
        format!(
            "  chain {name} {{\n    type filter hook {hook} priority 0;\n    meta l4proto tcp counter name \"frames\"\n    {drops}\n  }}\n"
        )
    };
    let set = match kind {
        LossKind::Random1 => String::new(),
        LossKind::Outages => {
            format!("  set outage {{ type inet_proto; flags dynamic,timeout; timeout {OUTAGE_MS}ms; size 4; }}\n")
        }
    };
    format!(
        "table inet rrdemo_loss {{\n  counter frames {{}}\n  counter dropped {{}}\n  counter outages {{}}\n{set}{}{}}}\n",
        chain("in", "input"),
        chain("out", "output")
    )
}

/// Loss for the client's namespace with nftables. Removed again by `Drop`.
pub(super) struct Loss<'a> {
    lab: &'a Lab,
}

impl<'a> Loss<'a> {
    fn add(lab: &'a Lab, kind: LossKind) -> Result<Loss<'a>> {
        let f = std::env::temp_dir().join(format!("rr-demo-loss-{}.nft", std::process::id()));
        std::fs::write(&f, loss_rules(kind))?;
        let r = lab.ns_b.run(&["nft", "-f", &f.to_string_lossy()]);
        let _ = std::fs::remove_file(&f);
        r.context("adding the loss rules (needs nftables: apt-get install nftables)")?;
        Ok(Loss { lab })
    }

    /// The rules' counters: `nft_frames`, `nft_dropped`, `nft_outages` (packets).
    fn counters(&self) -> BTreeMap<String, f64> {
        let mut out = BTreeMap::new();
        for name in ["frames", "dropped", "outages"] {
            let text = self.lab.ns_b.run(&["nft", "list", "counter", "inet", "rrdemo_loss", name]).unwrap_or_default();
            if let Some(n) = nft_packets(&text) {
                out.insert(format!("nft_{name}"), n);
            }
        }
        out
    }
}

/// The `packets N` of `nft list counter` output.
pub(super) fn nft_packets(text: &str) -> Option<f64> {
    let mut words = text.split_whitespace();
    words.find(|w| *w == "packets")?;
    words.next()?.parse().ok()
}

impl Drop for Loss<'_> {
    fn drop(&mut self) {
        let _ = self.lab.ns_b.run(&["nft", "delete", "table", "inet", "rrdemo_loss"]);
    }
}

pub(super) fn sibling(name: &str) -> Result<PathBuf> {
    let p = std::env::current_exe()?.with_file_name(name);
    if !p.exists() {
        bail!("{} not found next to rr-demo (build the workspace: cargo build --release)", p.display());
    }
    Ok(p)
}

/// The last `n` lines of a log file, indented, for error messages.
pub(super) fn tail(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    let start = lines.len().saturating_sub(n);
    let mut s = format!("last lines of {}:", path.display());
    for l in &lines[start..] {
        s += "\n    ";
        s += l;
    }
    s
}

/// A server of a run and where it writes its `--json` summary.
pub(super) struct Server {
    pub(super) process: ServerProcess,
    pub(super) json: PathBuf,
}

impl Server {
    /// SIGINT and wait for a clean exit; returns the server's own summary (--json).
    pub(super) fn stop(mut self) -> Result<serde_json::Value> {
        let st = self.process.stop(Duration::from_secs(15))?;
        if !st.success() {
            bail!("rr-server exited with {st}; {}", self.process.output_tail(15));
        }
        let text = std::fs::read(&self.json).with_context(|| format!("reading {}", self.json.display()))?;
        serde_json::from_slice(&text).context("the server's --json summary")
    }
}

pub(super) struct Env {
    pub(super) lab: Lab,
    pub(super) server_exe: PathBuf,
    pub(super) bench_exe: PathBuf,
    pub(super) logs: PathBuf,
    pub(super) xsk_server_addr: std::net::Ipv4Addr,
    pub(super) xsk_client_addr: std::net::Ipv4Addr,
    pub(super) attach: AttachMode,
    /// --xsk-args, split.
    pub(super) xsk_args: Vec<String>,
}

pub(super) fn start_server(env: &Env, backend: &str, case: &Case, tag: &str) -> Result<(Server, String)> {
    let ready = env.logs.join(format!("{tag}.ready"));
    let log = env.logs.join(format!("{tag}.server.log"));
    let json = env.logs.join(format!("{tag}.server.json"));
    let _ = std::fs::remove_file(&ready);
    let mut c = ServerProcess::command(&env.lab.ns_a, &env.server_exe);
    // Sized for the case, as an operator would: the ring and UMEM sizes follow
    // --max-conns. A full fill ring cycles every frame through it, so rings
    // far larger than the load touch cold frames, which shows in a busy
    // case's p50.
    let max_conns = (case.conns * 2).max(1024);
    let service = if case.kv_value.is_some() { "kv" } else { "echo" };
    c.args(["--backend", backend, "--service", service, "--port", "7000", "--max-conns", &max_conns.to_string()]);
    if case.conns > 1000 {
        // 10,000 connections with the default 64 KiB buffers would be 1.3 GB.
        c.args(["--buffer", "8192"]);
    }
    let target = if backend == "xsk" && case.v6 {
        // A dedicated IPv6 address beside the IPv4 one (the kernel's is 2001:2::1).
        c.args(["--iface", &env.lab.if_a, "--attach", &env.attach.to_string()]);
        c.args(["--addr", &format!("{}/{},2001:2::100/64", env.xsk_server_addr, env.lab.prefix_len)]);
        c.args(case.xsk_args);
        "[2001:2::100]:7000".to_string()
    } else if case.v6 {
        // Both families on one socket.
        c.args(["--bind", "0.0.0.0"]);
        "[2001:2::1]:7000".to_string()
    } else if backend == "xsk" {
        c.args(["--iface", &env.lab.if_a, "--attach", &env.attach.to_string()]);
        c.args(["--addr", &format!("{}/{}", env.xsk_server_addr, env.lab.prefix_len)]);
        c.args(case.xsk_args);
        format!("{}:7000", env.xsk_server_addr)
    } else {
        c.args(["--bind", &env.lab.addr_a.to_string()]);
        format!("{}:7000", env.lab.addr_a)
    };
    if case.busy_poll {
        c.args(["--busy-poll", "50"]);
    }
    if backend == "xsk" {
        // Last, so that they override the case's own options (`--busy-poll`).
        c.args(&env.xsk_args);
    }
    if case.server_threads > 1 {
        c.args(["--threads", &case.server_threads.to_string()]);
    }
    c.arg("--ready-file").arg(&ready).arg("--json").arg(&json);
    let mut process = ServerProcess::spawn(format!("rr-server ({backend})"), c, &log, None)?;
    process.wait_ready_file(&ready, Duration::from_secs(15))?;
    let server = Server { process, json };
    Ok((server, target))
}

/// The kernel's TCP counters in a namespace (/proc/net/snmp and /proc/net/netstat are per
/// namespace) that tell retransmissions apart: all segments, SYNs, timeouts, spurious RTOs.
pub(super) fn tcp_counters(ns: &Netns) -> BTreeMap<String, f64> {
    const WANT: &[&str] =
        &["RetransSegs", "TCPSynRetrans", "TCPTimeouts", "TCPSpuriousRTOs", "TCPLossProbes", "TCPFastRetrans"];
    let mut out = BTreeMap::new();
    for (file, prefix) in [("/proc/net/snmp", "Tcp:"), ("/proc/net/netstat", "TcpExt:")] {
        let Ok(text) = ns.run(&["cat", file]) else { continue };
        let mut rows = text.lines().filter(|l| l.starts_with(prefix));
        let (Some(names), Some(values)) = (rows.next(), rows.next()) else { continue };
        for (n, v) in names.split_whitespace().zip(values.split_whitespace()).skip(1) {
            if let (true, Ok(v)) = (WANT.contains(&n), v.parse::<f64>()) {
                out.insert(n.to_string(), v);
            }
        }
    }
    out
}

pub(super) fn counter_delta(a: &BTreeMap<String, f64>, b: &BTreeMap<String, f64>) -> BTreeMap<String, f64> {
    b.iter().filter_map(|(k, v)| Some((k.clone(), v - a.get(k)?))).collect()
}

pub(super) fn run_case(env: &Env, backend: &str, case: &Case, round: usize, dur: Duration) -> Result<Row> {
    let tag = format!("{}-r{}-{backend}", case.name, round + 1);
    let tcp0 = (tcp_counters(&env.lab.ns_b), tcp_counters(&env.lab.ns_a));
    let (server, target) = start_server(env, backend, case, &tag)?;
    let json = env.logs.join(format!("{tag}.bench.json"));
    let blog = env.logs.join(format!("{tag}.bench.log"));
    let mut c = Command::new("ip");
    c.args(["netns", "exec", &env.lab.ns_b.name]).arg(&env.bench_exe);
    let client_backend = if case.same_client { backend } else { "kernel" };
    c.args(["--backend", client_backend, "--connect", &target]);
    if client_backend == "xsk" {
        c.args(["--iface", &env.lab.if_b, "--attach", &env.attach.to_string()]);
        c.args(["--addr", &format!("{}/{}", env.xsk_client_addr, env.lab.prefix_len)]);
        c.args(case.xsk_args);
        match case.loss {
            None => {}
            // nftables cannot see the stack's frames (see LossKind): its own injector drops them.
            Some(LossKind::Random1) => {
                c.args(["--fault-rx-drop", "0.01", "--fault-tx-drop", "0.01"]);
            }
            Some(k @ LossKind::Outages) => bail!("{}: {k:?} loss needs a kernel client (nftables)", case.name),
        }
    } else if !case.v6 {
        c.args(["--bind", &env.lab.addr_b.to_string()]);
    }
    c.args(["--conns", &case.conns.to_string(), "--depth", &case.depth.to_string()]);
    match case.kv_value {
        Some(v) => c.args(["--service", "kv", "--resp-size", v]),
        None => c.args(["--req-size", "64"]),
    };
    c.args(["--pattern", case.pattern]);
    if case.client_threads > 1 && client_backend == "kernel" {
        c.args(["--threads", &case.client_threads.to_string()]);
    }
    c.args(["--duration", &format!("{}ms", dur.as_millis()), "--warmup", "300ms", "--quiet"]);
    // smoltcp (0.13 on) rounds its retransmission timeout up to 1 s (RFC 6298), doubling per
    // retry: a response lost twice at 1% loss needs 3 s to come back, longer than rr-bench's
    // default 2 s drain, and would count as lost.
    c.args(["--drain-timeout", "10s"]);
    if let Some(r) = case.rate {
        c.args(["--rate", &r.to_string()]);
    }
    if case.busy_poll {
        c.args(["--busy-poll", "50"]);
    }
    if client_backend == "xsk" {
        // Last, so that they override the case's own options (`--busy-poll`).
        c.args(&env.xsk_args);
    }
    c.args(["--server-pid", &server.process.pid().to_string()]);
    if case.conns > 1000 {
        c.args(["--connect-timeout", "20s"]);
    }
    c.arg("--json").arg(&json);
    let out = File::create(&blog).with_context(|| format!("creating {}", blog.display()))?;
    let err = out.try_clone()?;
    let loss = case.loss.map(|k| Loss::add(&env.lab, k)).transpose()?;
    let status = c.stdin(Stdio::null()).stdout(out).stderr(err).status().context("running rr-bench")?;
    let mut loss_counters = loss.as_ref().map(Loss::counters).unwrap_or_default();
    drop(loss);
    let summary = server.stop();
    let tcp1 = (tcp_counters(&env.lab.ns_b), tcp_counters(&env.lab.ns_a));
    let (client_tcp, server_tcp) = (counter_delta(&tcp0.0, &tcp1.0), counter_delta(&tcp0.1, &tcp1.1));
    if !status.success() {
        bail!("rr-bench failed for {backend}/{} ({status}); {}", case.name, tail(&blog, 15));
    }
    let summary = summary?;
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json)?)?;
    let f = |k: &str| v[k].as_f64().unwrap_or(f64::NAN);
    let counters = xsk_counters(&summary);
    let client_recovery: Option<RecoveryCounts> = serde_json::from_value(v["recovery"].clone()).unwrap_or(None);
    if let Some(n) = v["xsk"]["stats"]["drops"]["injected"].as_f64().filter(|_| case.loss.is_some()) {
        loss_counters.insert("injected_rx_dropped".into(), n);
    }
    // The xsk server's recovery counters (summed over shards); NaN for the kernel server.
    let server_rec = |name: &str| counters.get(&format!("recovery_{name}")).unwrap_or(f64::NAN);
    let client_retrans = client_tcp.get("RetransSegs").copied().unwrap_or(f64::NAN);
    let server_retrans =
        if backend != "xsk" { server_tcp.get("RetransSegs").copied().unwrap_or(f64::NAN) } else { f64::NAN };
    // Both ends: kernel TCP's segments where it runs, the stack's own counts where it does.
    let stack_server = ["rto_retransmits", "fast_retransmits", "hole_retransmits", "tail_probes"].iter().map(|n| server_rec(n));
    let retrans_total = [client_retrans, server_retrans]
        .into_iter()
        .chain(stack_server)
        .chain(client_recovery.map(|r| r.resent() as f64))
        .filter(|x| x.is_finite())
        .sum::<f64>();
    let server_trouble: BTreeMap<String, f64> = counters
        .values
        .iter()
        .filter(|(k, v)| apps::stats::is_trouble(k) && **v > 0.0)
        .map(|(k, v)| (k.clone(), *v))
        .collect();
    Ok(Row {
        backend: backend.to_string(),
        case: case.name.to_string(),
        round,
        conns: case.conns,
        client_threads: case.client_threads,
        server_threads: case.server_threads,
        m: Metrics {
            rps: f("rps"),
            p50_us: f("p50_us"),
            p99_us: f("p99_us"),
            p999_us: f("p999_us"),
            cpu_us_per_req: f("cpu_us_per_req_server"),
            cpu_us_per_req_machine: f("cpu_us_per_req_machine"),
            cpu_us_per_req_own_rx: f("cpu_us_per_req_server_own_rx"),
            cpu_us_per_req_client: f("cpu_us_per_req_client"),
            server_syscalls_per_req: f("syscalls_per_req_server"),
            client_cores: f("cores_client"),
            server_cores: f("cores_server"),
            setup_s: f("setup_s"),
            conn_setup_p99_us: v["churn"]["setup_p99_us"].as_f64().unwrap_or(f64::NAN),
            // The kernel server has no such counters (NaN prints as "-").
            server_drops: if counters.values.is_empty() {
                f64::NAN
            } else {
                counters.values.iter().filter(|(k, _)| is_drop(k)).map(|(_, v)| v).fold(0.0, |a, b| a + b)
            },
            client_retrans,
            server_retrans,
            retrans_total,
            server_rto_retransmits: server_rec("rto_retransmits"),
            server_fast_retransmits: server_rec("fast_retransmits"),
            server_hole_retransmits: server_rec("hole_retransmits"),
            server_tail_probes: server_rec("tail_probes"),
            server_spurious_retransmits: server_rec("spurious_retransmits"),
            server_spurious_probes: server_rec("spurious_probes"),
        },
        errors: v["errors"].as_u64().unwrap_or(0) + v["lost"].as_u64().unwrap_or(0),
        server_requests: summary["requests"].as_u64().unwrap_or(0),
        client_requests: v["requests"].as_u64().unwrap_or(0) + v["warmup_requests"].as_u64().unwrap_or(0),
        server_trouble,
        client_tcp,
        server_tcp,
        client_recovery,
        loss_counters,
    })
}

/// The xsk server's counters from its --json summary: one stats object, or (--threads) one per
/// shard, summed by name. Empty for the kernel server.
pub(super) fn xsk_counters(summary: &serde_json::Value) -> Snapshot {
    let mut snap = Snapshot::new(&summary["xsk"]["stats"]);
    for shard in summary["xsk"]["shards"].as_array().into_iter().flatten() {
        for (k, v) in Snapshot::new(&shard["stats"]).values {
            *snap.values.entry(k).or_insert(0.0) += v;
        }
    }
    snap
}

/// Whether the server's request count agrees with the client's responses: the server may
/// have answered a few requests whose responses the client never read (lost ones, or
/// in flight when a warm-up connection closed), never fewer.
pub(super) fn counts_agree(r: &Row, lost_bound: u64) -> bool {
    r.server_requests >= r.client_requests && r.server_requests <= r.client_requests + lost_bound
}

/// A veth lab (`queues` queue pairs on both ends) with the client namespace prepared as every
/// case needs it.
/// With `v6`, IPv6 stays on and the ends get 2001:2::1 and ::2 (/64); otherwise the lab is
/// IPv4 only.
pub(super) fn build_env(args: &Args, prefix: &str, queues: u32, logs: PathBuf, v6: bool) -> Result<Env> {
    let peer_queues = (queues > 1).then_some(queues);
    let lab = Lab::new(&LabConfig { prefix: prefix.into(), peer_queues, disable_ipv6: !v6, ..LabConfig::default() })
        .with_context(|| format!("building the veth lab ({queues} queue pair(s))"))?;
    if v6 {
        // No duplicate address detection: usable at once.
        lab.ns_a.run(&["ip", "-6", "addr", "add", "2001:2::1/64", "dev", &lab.if_a, "nodad"])?;
        lab.ns_b.run(&["ip", "-6", "addr", "add", "2001:2::2/64", "dev", &lab.if_b, "nodad"])?;
    }
    // The client keeps veth's default offloads (TX checksum, TSO), as in every
    // container; both servers get the same frames.
    // 10,000 connections, twice (warm-up and measured run), one after the other:
    // the client needs more ports than the default range, and TIME-WAIT reuse.
    lab.ns_b.run(&["sysctl", "-qw", "net.ipv4.ip_local_port_range=10000 65000"])?;
    lab.ns_b.run(&["sysctl", "-qw", "net.ipv4.tcp_tw_reuse=1"])?;
    // The churn cases: the kernel client closes first, and each connection would hold its
    // port in TIME-WAIT for 60 s (reuse needs timestamps, which the stack does not send): no
    // TIME-WAIT in the client's namespace. The FIN exchange on the wire is the same.
    lab.ns_b.run(&["sysctl", "-qw", "net.ipv4.tcp_max_tw_buckets=0"])?;
    if args.peer_napi_thread {
        // veth delivers into the receiver's backlog and processes it in the
        // sender's softirq: the server would pay for the client's TCP. GRO on
        // gives the client's veth a NAPI context, and a threaded NAPI runs it
        // in its own kernel thread, as a VM's peer runs on another machine.
        lab.ns_b.run(&["ethtool", "-K", &lab.if_b, "gro", "on"])?;
        lab.ns_b.run(&["sh", "-c", &format!("echo 1 > /sys/class/net/{}/threaded", lab.if_b)])?;
    }
    let o = lab.addr_a.octets();
    Ok(Env {
        server_exe: sibling("rr-server")?,
        bench_exe: sibling("rr-bench")?,
        logs,
        xsk_server_addr: std::net::Ipv4Addr::new(o[0], o[1], o[2], 100),
        xsk_client_addr: std::net::Ipv4Addr::new(o[0], o[1], o[2], 101),
        attach: args.attach,
        xsk_args: args.xsk_args.as_deref().unwrap_or("").split_whitespace().map(String::from).collect(),
        lab,
    })
}
