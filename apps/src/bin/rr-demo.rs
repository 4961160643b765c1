//! rr-demo: the project's main demo. Builds its own lab (two network
//! namespaces joined by veth, 198.18.0.0/15), runs the same request/response
//! workloads against `rr-server --backend xsk` and `--backend kernel`,
//! alternating A B A B, and prints medians with the xsk/kernel ratio. Writes
//! `results.json` and `results.svg` to the output folder and removes
//! everything it set up, also on Ctrl-C.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Parser;
use serde::Serialize;
use xsk_io::lab::{self, Lab, LabConfig};

#[derive(Parser, Debug)]
#[command(version, about = "Compare the AF_XDP stack with kernel TCP on request/response work, side by side")]
struct Args {
    /// Short runs (about a minute in all) for CI: one round, 1 s per case.
    #[arg(long)]
    quick: bool,
    /// Rounds of alternating runs per case (the table shows medians).
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Measured seconds per run.
    #[arg(long, default_value_t = 4.0)]
    seconds: f64,
    /// Where the XDP program runs on the server side: skb, drv or auto.
    #[arg(long, default_value = "drv")]
    attach: String,
    /// Output folder for results.json and results.svg.
    #[arg(long, default_value = "out/rr-demo")]
    out: PathBuf,
    /// Only run cases whose name contains this.
    #[arg(long)]
    only: Option<String>,
    /// Give the client-side veth a threaded NAPI context. By default (veth's
    /// own behaviour) the client's receive processing runs inside the
    /// server's send call, charging the client's TCP work to the server's
    /// CPU time, an artefact no VM has; with this flag it runs in a kernel
    /// thread instead (fairer CPU per request, lower throughput on 2 cores).
    #[arg(long)]
    peer_napi_thread: bool,
    /// Do not run anything: print the table and redraw the plot from an
    /// earlier results.json (written to --out).
    #[arg(long, value_name = "RESULTS_JSON")]
    from_json: Option<PathBuf>,
}

#[derive(Clone, Debug)]
struct Case {
    name: &'static str,
    conns: usize,
    depth: usize,
    /// Client on the same backend as the server (stack to stack, kernel to kernel).
    same_client: bool,
    busy_poll: bool,
    /// Open loop at this rate instead of closed loop.
    rate: Option<u64>,
    /// Drop 1% of the frames in each direction at the client (nftables in its namespace).
    loss: bool,
    /// Only in full runs, not with --quick.
    full_only: bool,
    /// rr-bench --threads (kernel client): so the load generator is not the bound.
    client_threads: usize,
}

/// What one run measured; in a `Summary`, the medians over the runs.
#[derive(Clone, Debug, Serialize, serde::Deserialize)]
struct Metrics {
    rps: f64,
    p50_us: f64,
    p99_us: f64,
    p999_us: f64,
    cpu_us_per_req: f64,
    cpu_us_per_req_machine: f64,
    /// Cores the client and the server process kept busy (of 2): shows which side saturated.
    #[serde(default)]
    client_cores: f64,
    #[serde(default)]
    server_cores: f64,
}

impl Metrics {
    fn median(runs: &[&Metrics]) -> Metrics {
        let m = |f: fn(&Metrics) -> f64| median(runs.iter().map(|r| f(r)).collect());
        Metrics {
            rps: m(|r| r.rps),
            p50_us: m(|r| r.p50_us),
            p99_us: m(|r| r.p99_us),
            p999_us: m(|r| r.p999_us),
            cpu_us_per_req: m(|r| r.cpu_us_per_req),
            cpu_us_per_req_machine: m(|r| r.cpu_us_per_req_machine),
            client_cores: m(|r| r.client_cores),
            server_cores: m(|r| r.server_cores),
        }
    }
}

#[derive(Clone, Debug, Serialize, serde::Deserialize)]
struct Row {
    backend: String,
    case: String,
    round: usize,
    conns: usize,
    #[serde(flatten)]
    m: Metrics,
    errors: u64,
}

fn cases() -> Vec<Case> {
    let c = |name, conns, same_client, busy_poll, rate| Case {
        name,
        conns,
        depth: 1,
        same_client,
        busy_poll,
        rate,
        loss: false,
        full_only: false,
        client_threads: 1,
    };
    vec![
        c("rr-1", 1, false, false, None),
        c("rr-16", 16, false, false, None),
        c("rr-256", 256, false, false, None),
        Case { client_threads: 2, ..c("rr-256-t2", 256, false, false, None) },
        c("same-16", 16, true, false, None),
        c("busy-1", 1, false, true, None),
        c("busy-same-1", 1, true, true, None),
        c("open-5k", 16, false, false, Some(5000)),
        Case { loss: true, ..c("loss1-16", 16, false, false, None) },
        Case { full_only: true, ..c("rr-1000", 1000, false, false, None) },
        Case { full_only: true, ..c("rr-10000", 10000, false, false, None) },
    ]
}

/// 1% random loss each way for the client's namespace, with nftables
/// (the host kernel has no netem). Removed again by `Drop`.
struct Loss<'a> {
    lab: &'a Lab,
}

impl<'a> Loss<'a> {
    fn add(lab: &'a Lab) -> Result<Loss<'a>> {
        let rules = "table inet rrdemo_loss {\n\
            chain in { type filter hook input priority 0; numgen random mod 100 < 1 drop; }\n\
            chain out { type filter hook output priority 0; numgen random mod 100 < 1 drop; }\n}\n";
        let f = std::env::temp_dir().join(format!("rr-demo-loss-{}.nft", std::process::id()));
        std::fs::write(&f, rules)?;
        let r = lab.ns_b.run(&["nft", "-f", &f.to_string_lossy()]);
        let _ = std::fs::remove_file(&f);
        r.context("adding the 1% loss rules (needs nftables: apt-get install nftables)")?;
        Ok(Loss { lab })
    }
}

impl Drop for Loss<'_> {
    fn drop(&mut self) {
        let _ = self.lab.ns_b.run(&["nft", "delete", "table", "inet", "rrdemo_loss"]);
    }
}

fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()))
        .with_writer(std::io::stderr)
        .init();
    if let Err(e) = run(Args::parse()) {
        eprintln!("rr-demo: error: {e:#}");
        std::process::exit(1);
    }
}

fn sibling(name: &str) -> Result<PathBuf> {
    let p = std::env::current_exe()?.with_file_name(name);
    if !p.exists() {
        bail!("{} not found next to rr-demo (build the workspace: cargo build --release)", p.display());
    }
    Ok(p)
}

struct Server {
    child: Child,
}

impl Server {
    fn stop(mut self) -> Result<()> {
        // SAFETY: kill(2) on our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) };
        let end = Instant::now() + Duration::from_secs(5);
        while Instant::now() < end {
            if let Some(st) = self.child.try_wait()? {
                if !st.success() {
                    bail!("rr-server exited with {st}");
                }
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        bail!("rr-server did not stop on SIGINT");
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

struct Env {
    lab: Lab,
    server_exe: PathBuf,
    bench_exe: PathBuf,
    tmp: PathBuf,
    xsk_server_addr: std::net::Ipv4Addr,
    xsk_client_addr: std::net::Ipv4Addr,
    attach: String,
}

fn start_server(env: &Env, backend: &str, case: &Case) -> Result<(Server, String)> {
    let ready = env.tmp.join(format!("ready-{backend}"));
    let _ = std::fs::remove_file(&ready);
    let mut c = Command::new("ip");
    c.args(["netns", "exec", &env.lab.ns_a.name]).arg(&env.server_exe);
    // Sized for the case, as an operator would: the ring and UMEM sizes follow
    // --max-conns. A full fill ring cycles every frame through it, so rings
    // far larger than the load touch cold frames (in an alternating run,
    // 16384-entry rings cost busy-same-1 about 0.2 us of its p50).
    let max_conns = (case.conns * 2).max(1024);
    c.args(["--backend", backend, "--service", "echo", "--port", "7000", "--max-conns", &max_conns.to_string()]);
    if case.conns > 1000 {
        // 10,000 connections with the default 64 KiB buffers would be 1.3 GB.
        c.args(["--buffer", "8192"]);
    }
    let target = if backend == "xsk" {
        c.args(["--iface", &env.lab.if_a, "--attach", &env.attach]);
        c.args(["--addr", &format!("{}/{}", env.xsk_server_addr, env.lab.prefix_len)]);
        format!("{}:7000", env.xsk_server_addr)
    } else {
        c.args(["--bind", &env.lab.addr_a.to_string()]);
        format!("{}:7000", env.lab.addr_a)
    };
    if case.busy_poll {
        c.args(["--busy-poll", "50"]);
    }
    c.arg("--ready-file").arg(&ready);
    let child = c.stdout(Stdio::null()).stderr(Stdio::null()).spawn().context("starting rr-server")?;
    let server = Server { child };
    let end = Instant::now() + Duration::from_secs(10);
    while !ready.exists() {
        if Instant::now() > end {
            bail!("rr-server ({backend}) did not become ready");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok((server, target))
}

fn run_case(env: &Env, backend: &str, case: &Case, round: usize, secs: f64) -> Result<Row> {
    let (server, target) = start_server(env, backend, case)?;
    let json = env.tmp.join(format!("bench-{backend}-{}-{round}.json", case.name));
    let mut c = Command::new("ip");
    c.args(["netns", "exec", &env.lab.ns_b.name]).arg(&env.bench_exe);
    let client_backend = if case.same_client { backend } else { "kernel" };
    c.args(["--backend", client_backend, "--connect", &target]);
    if client_backend == "xsk" {
        c.args(["--iface", &env.lab.if_b, "--attach", &env.attach]);
        c.args(["--addr", &format!("{}/{}", env.xsk_client_addr, env.lab.prefix_len)]);
    } else {
        c.args(["--bind", &env.lab.addr_b.to_string()]);
    }
    c.args(["--conns", &case.conns.to_string(), "--depth", &case.depth.to_string(), "--req-size", "64"]);
    if case.client_threads > 1 && client_backend == "kernel" {
        c.args(["--threads", &case.client_threads.to_string()]);
    }
    c.args(["--duration", &format!("{}ms", (secs * 1000.0) as u64), "--warmup", "300ms", "--quiet"]);
    if let Some(r) = case.rate {
        c.args(["--rate", &r.to_string()]);
    }
    if case.busy_poll {
        c.args(["--busy-poll", "50"]);
    }
    c.args(["--server-pid", &server.child.id().to_string()]);
    if case.conns > 1000 {
        c.args(["--connect-timeout", "20s"]);
    }
    c.arg("--json").arg(&json);
    let loss = if case.loss { Some(Loss::add(&env.lab)?) } else { None };
    let out = c.stdout(Stdio::null()).stderr(Stdio::piped()).output().context("running rr-bench")?;
    drop(loss);
    server.stop()?;
    if !out.status.success() {
        bail!("rr-bench failed for {backend}/{}: {}", case.name, String::from_utf8_lossy(&out.stderr));
    }
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json)?)?;
    let f = |k: &str| v[k].as_f64().unwrap_or(f64::NAN);
    Ok(Row {
        backend: backend.to_string(),
        case: case.name.to_string(),
        round,
        conns: case.conns,
        m: Metrics {
            rps: f("rps"),
            p50_us: f("p50_us"),
            p99_us: f("p99_us"),
            p999_us: f("p999_us"),
            cpu_us_per_req: f("cpu_us_per_req_server"),
            cpu_us_per_req_machine: f("cpu_us_per_req_machine"),
            client_cores: f("cores_client"),
            server_cores: f("cores_server"),
        },
        errors: v["errors"].as_u64().unwrap_or(0) + v["lost"].as_u64().unwrap_or(0),
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.retain(|x| x.is_finite());
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    if v.len() % 2 == 1 {
        v[v.len() / 2]
    } else {
        (v[v.len() / 2 - 1] + v[v.len() / 2]) / 2.0
    }
}

fn run(args: Args) -> Result<()> {
    if let Some(path) = &args.from_json {
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(path).with_context(|| format!("reading {}", path.display()))?)?;
        let rows: Vec<Row> = serde_json::from_value(v["runs"].clone()).context("no \"runs\" rows in that file")?;
        let cases: Vec<Case> = cases().into_iter().filter(|c| rows.iter().any(|r| r.case == c.name)).collect();
        std::fs::create_dir_all(&args.out)?;
        return report(&rows, &cases, &args.out);
    }
    lab::install_signal_handlers();
    let (rounds, secs) = if args.quick { (1, 1.0) } else { (args.rounds.max(1), args.seconds) };
    std::fs::create_dir_all(&args.out).with_context(|| format!("creating {}", args.out.display()))?;
    lab::sweep_stale("rd");
    let lab = Lab::new(&LabConfig { prefix: "rd".into(), ..LabConfig::default() }).context("building the veth lab")?;
    lab.disable_tx_offloads()?;
    // 10,000 connections, twice (warm-up and measured run), one after the other:
    // the client needs more ports than the default range, and TIME-WAIT reuse.
    lab.ns_b.run(&["sysctl", "-qw", "net.ipv4.ip_local_port_range=10000 65000"])?;
    lab.ns_b.run(&["sysctl", "-qw", "net.ipv4.tcp_tw_reuse=1"])?;
    if args.peer_napi_thread {
        // veth delivers into the receiver's backlog and processes it in the
        // sender's softirq: the server would pay for the client's TCP. GRO on
        // gives the client's veth a NAPI context, and a threaded NAPI runs it
        // in its own kernel thread, as a VM's peer runs on another machine.
        lab.ns_b.run(&["ethtool", "-K", &lab.if_b, "gro", "on"])?;
        lab.ns_b.run(&["sh", "-c", &format!("echo 1 > /sys/class/net/{}/threaded", lab.if_b)])?;
    }
    let o = lab.addr_a.octets();
    let env = Env {
        server_exe: sibling("rr-server")?,
        bench_exe: sibling("rr-bench")?,
        tmp: std::env::temp_dir().join(format!("rr-demo-{}", std::process::id())),
        xsk_server_addr: std::net::Ipv4Addr::new(o[0], o[1], o[2], 100),
        xsk_client_addr: std::net::Ipv4Addr::new(o[0], o[1], o[2], 101),
        attach: args.attach.clone(),
        lab,
    };
    std::fs::create_dir_all(&env.tmp)?;
    println!(
        "lab: {} ({}) <-> {} ({}); {rounds} round(s) of {secs} s per case, alternating xsk/kernel; client receive path {}",
        env.lab.ns_a.name,
        env.lab.addr_a,
        env.lab.ns_b.name,
        env.lab.addr_b,
        if args.peer_napi_thread { "in its own NAPI thread" } else { "in the sender's softirq (veth default)" }
    );
    let mut rows = Vec::new();
    let have_nft = Command::new("nft").arg("--version").output().is_ok_and(|o| o.status.success());
    if !have_nft {
        println!("note: nft not found: skipping the 1% loss case (apt-get install nftables)");
    }
    let cases: Vec<Case> = cases()
        .into_iter()
        .filter(|c| args.only.as_deref().is_none_or(|o| c.name.contains(o)))
        .filter(|c| !(args.quick && c.full_only))
        .filter(|c| have_nft || !c.loss)
        .collect();
    let total = cases.len() * rounds * 2;
    let mut n = 0;
    let mut failures = 0;
    'outer: for case in &cases {
        for round in 0..rounds {
            // Alternate which backend goes first, so drift hits both alike.
            let order = if round % 2 == 0 { ["xsk", "kernel"] } else { ["kernel", "xsk"] };
            for backend in order {
                if lab::interrupted() {
                    break 'outer;
                }
                n += 1;
                let row = match run_case(&env, backend, case, round, secs) {
                    Ok(row) => row,
                    Err(e) => {
                        // Keep going: one broken case must not hide the others.
                        println!("[{n:>2}/{total}] {:<11} {:<7} FAILED: {e:#}", case.name, backend);
                        failures += 1;
                        continue;
                    }
                };
                println!(
                    "[{n:>2}/{total}] {:<11} {:<7} {:>10.0} req/s  p50 {:>7.1} us  p99 {:>7.1} us  server cpu {:>5.2} us/req",
                    row.case, row.backend, row.m.rps, row.m.p50_us, row.m.p99_us, row.m.cpu_us_per_req
                );
                rows.push(row);
            }
        }
    }
    if !lab::interrupted() {
        println!();
        failures += redis::run(&env, &args, rounds)?;
    }
    let _ = std::fs::remove_dir_all(&env.tmp);
    if lab::interrupted() {
        println!("interrupted: partial results");
    }
    report(&rows, &cases, &args.out)?;
    drop(env);
    if failures > 0 {
        bail!("{failures} run(s) failed (see above)");
    }
    Ok(())
}

#[derive(Serialize)]
struct Summary {
    backend: String,
    case: String,
    conns: usize,
    #[serde(flatten)]
    m: Metrics,
    errors: u64,
    runs: usize,
}

fn report(rows: &[Row], cases: &[Case], out: &Path) -> Result<()> {
    let mut sums: BTreeMap<(String, String), Summary> = BTreeMap::new();
    for case in cases {
        for backend in ["xsk", "kernel"] {
            let rs: Vec<&Row> = rows.iter().filter(|r| r.case == case.name && r.backend == backend).collect();
            if rs.is_empty() {
                continue;
            }
            sums.insert(
                (case.name.to_string(), backend.to_string()),
                Summary {
                    backend: backend.into(),
                    case: case.name.into(),
                    conns: case.conns,
                    m: Metrics::median(&rs.iter().map(|r| &r.m).collect::<Vec<_>>()),
                    errors: rs.iter().map(|r| r.errors).sum(),
                    runs: rs.len(),
                },
            );
        }
    }
    println!();
    println!(
        "{:<11} {:>5} | {:>10} {:>10} {:>6} | {:>8} {:>8} | {:>8} {:>8} | {:>9} {:>9} | {:>7} {:>7} {:>6} | {:>7} {:>7} | {:>9} {:>9}",
        "case", "conns", "xsk req/s", "krn req/s", "ratio", "xsk p50", "krn p50", "xsk p99", "krn p99", "xsk p99.9", "krn p99.9", "xsk cpu", "krn cpu", "ratio", "xsk mc", "krn mc", "xsk c/s", "krn c/s"
    );
    for case in cases {
        let (Some(x), Some(k)) = (sums.get(&(case.name.into(), "xsk".into())), sums.get(&(case.name.into(), "kernel".into()))) else {
            continue;
        };
        println!(
            "{:<11} {:>5} | {:>10.0} {:>10.0} {:>6.2} | {:>8.1} {:>8.1} | {:>8.1} {:>8.1} | {:>9.1} {:>9.1} | {:>7.2} {:>7.2} {:>6.2} | {:>7} {:>7} | {:>9} {:>9}",
            case.name,
            case.conns,
            x.m.rps,
            k.m.rps,
            x.m.rps / k.m.rps,
            x.m.p50_us,
            k.m.p50_us,
            x.m.p99_us,
            k.m.p99_us,
            x.m.p999_us,
            k.m.p999_us,
            x.m.cpu_us_per_req,
            k.m.cpu_us_per_req,
            x.m.cpu_us_per_req / k.m.cpu_us_per_req,
            machine_col(x),
            machine_col(k),
            format!("{:.2}/{:.2}", x.m.client_cores, x.m.server_cores),
            format!("{:.2}/{:.2}", k.m.client_cores, k.m.server_cores)
        );
    }
    println!("(medians; latencies in us; cpu = server process CPU us per request incl. kernel work in its context; mc = whole machine;");
    println!(" c/s = cores kept busy by the client / server process, of 2: a side near 1.00 is the bottleneck;");
    println!(" mc n/a: /proc/stat counts busy time in ticks, which miss short wake-ups on an otherwise idle");
    println!(" machine, so it read less than the two processes' own (exact) CPU time)");
    let errors: u64 = sums.values().map(|s| s.errors).sum();
    let json = serde_json::json!({ "summary": sums.values().collect::<Vec<_>>(), "runs": rows });
    std::fs::write(out.join("results.json"), serde_json::to_vec_pretty(&json)?)?;
    std::fs::write(out.join("results.svg"), svg(&sums, cases))?;
    println!("wrote {} and {}", out.join("results.json").display(), out.join("results.svg").display());
    if errors > 0 {
        bail!("{errors} requests failed or were lost");
    }
    Ok(())
}

/// The whole-machine CPU per request, unless /proc/stat's tick sampling
/// visibly undercounted it (less than the client and server processes used).
fn machine_col(s: &Summary) -> String {
    let procs = (s.m.client_cores + s.m.server_cores) / s.m.rps * 1e6;
    if procs.is_finite() && s.m.cpu_us_per_req_machine < 0.9 * procs {
        "n/a".into()
    } else {
        format!("{:.2}", s.m.cpu_us_per_req_machine)
    }
}

/// Two panels: throughput per case, and p50/p99 latency per case, xsk vs kernel.
fn svg(sums: &BTreeMap<(String, String), Summary>, cases: &[Case]) -> String {
    let (w, h, pad) = (1000.0, 700.0, 70.0);
    let panel_h = (h - 3.0 * pad) / 2.0;
    let get = |c: &str, b: &str| sums.get(&(c.to_string(), b.to_string()));
    let max_rps = cases.iter().flat_map(|c| ["xsk", "kernel"].map(|b| get(c.name, b).map_or(0.0, |s| s.m.rps))).fold(1.0, f64::max);
    let max_lat = cases.iter().flat_map(|c| ["xsk", "kernel"].map(|b| get(c.name, b).map_or(0.0, |s| s.m.p99_us))).filter(|x| x.is_finite()).fold(1.0, f64::max);
    let mut s = format!(r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12"><rect width="100%" height="100%" fill="white"/>"#);
    s += &format!(r#"<text x="{pad}" y="{}" font-size="15">Requests per second (median), xsk (blue) vs kernel (grey)</text>"#, pad - 20.0);
    s += &format!(r#"<text x="{pad}" y="{}" font-size="15">Latency p50 (solid) and p99 (light), microseconds, log scale</text>"#, 2.0 * pad + panel_h - 20.0);
    let group = (w - 2.0 * pad) / cases.len().max(1) as f64;
    for (i, c) in cases.iter().enumerate() {
        let x0 = pad + i as f64 * group;
        for (j, b) in ["xsk", "kernel"].iter().enumerate() {
            let Some(v) = get(c.name, b) else { continue };
            let color = if *b == "xsk" { "#3366cc" } else { "#999999" };
            let bw = group * 0.35;
            let x = x0 + 0.1 * group + j as f64 * bw;
            let bh = panel_h * v.m.rps / max_rps;
            s += &format!(r#"<rect x="{x:.1}" y="{:.1}" width="{bw:.1}" height="{bh:.1}" fill="{color}"/>"#, pad + panel_h - bh);
            s += &format!(r#"<text x="{:.1}" y="{:.1}" font-size="10" text-anchor="middle">{:.0}k</text>"#, x + bw / 2.0, pad + panel_h - bh - 3.0, v.m.rps / 1000.0);
            let base = 2.0 * pad + 2.0 * panel_h;
            // Log scale from 1 us to the largest p99: latencies span 5 decades.
            let scale = |us: f64| (us.max(1.0).log10() / max_lat.max(10.0).log10()).min(1.0);
            for (val, op) in [(v.m.p99_us, "0.35"), (v.m.p50_us, "1")] {
                if !val.is_finite() {
                    continue;
                }
                let lh = panel_h * scale(val);
                s += &format!(r#"<rect x="{x:.1}" y="{:.1}" width="{bw:.1}" height="{lh:.1}" fill="{color}" fill-opacity="{op}"/>"#, base - lh);
            }
            s += &format!(r#"<text x="{:.1}" y="{:.1}" font-size="10" text-anchor="middle">{:.0}</text>"#, x + bw / 2.0, base - panel_h * scale(v.m.p99_us) - 3.0, v.m.p50_us);
        }
        for y in [pad + panel_h + 15.0, 2.0 * pad + 2.0 * panel_h + 15.0] {
            s += &format!(r#"<text x="{:.1}" y="{y:.1}" text-anchor="middle" font-size="11">{}</text>"#, x0 + group / 2.0, c.name);
            s += &format!(r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="10" fill="gray">{} conns</text>"#, x0 + group / 2.0, y + 12.0, c.conns);
        }
    }
    s += "</svg>\n";
    s
}

/// redis-benchmark (Debian's redis-tools) against `rr-server --service resp` on each backend
/// and, where installed, against Debian's redis-server, all on ns_a, the client in ns_b on
/// kernel TCP: the same client for every server, alternating servers per round. Results go to
/// their own table, `redis.json` and `redis.svg`, since the client reports different metrics
/// (no client CPU, latency in redis-benchmark's own histogram).
mod redis {
    use super::*;

    /// (case name, clients, pipeline depth).
    const CASES: &[(&str, usize, usize)] = &[("redis-c1", 1, 1), ("redis-c16", 16, 1), ("redis-c16-P16", 16, 16)];
    const PORT: u16 = 6380;

    #[derive(Clone, Debug, Serialize)]
    struct RedisRow {
        server: String,
        case: String,
        test: String,
        round: usize,
        clients: usize,
        pipeline: usize,
        rps: f64,
        p50_us: f64,
        p99_us: f64,
        /// Server process CPU (utime + stime from /proc) per request, over the whole run.
        server_cpu_us_per_req: f64,
    }

    fn have(tool: &str) -> bool {
        Command::new(tool).arg("--version").output().is_ok_and(|o| o.status.success())
    }

    fn start(env: &Env, server: &str) -> Result<(Server, std::net::Ipv4Addr)> {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &env.lab.ns_a.name]);
        let addr = if server == "xsk" { env.xsk_server_addr } else { env.lab.addr_a };
        let port = PORT.to_string();
        if server == "redis" {
            // The real thing, as packaged: no persistence, so both sides only serve memory.
            c.args(["redis-server", "--port", &port, "--bind", &addr.to_string(), "--save", "", "--appendonly", "no"]);
            c.args(["--protected-mode", "no", "--daemonize", "no", "--logfile", ""]);
        } else {
            let ready = env.tmp.join(format!("ready-resp-{server}"));
            let _ = std::fs::remove_file(&ready);
            c.arg(&env.server_exe).args(["--backend", server, "--service", "resp", "--port", &port]);
            if server == "xsk" {
                c.args(["--iface", &env.lab.if_a, "--attach", &env.attach]);
                c.args(["--addr", &format!("{addr}/{}", env.lab.prefix_len)]);
            } else {
                c.args(["--bind", &addr.to_string()]);
            }
            c.arg("--ready-file").arg(&ready);
        }
        let child = c.stdout(Stdio::null()).stderr(Stdio::null()).spawn().context("starting the server")?;
        let s = Server { child };
        // Ready when it answers PING (works for both servers).
        let end = Instant::now() + Duration::from_secs(10);
        loop {
            let ping = Command::new("ip")
                .args(["netns", "exec", &env.lab.ns_b.name, "redis-cli", "-h", &addr.to_string(), "-p", &port, "PING"])
                .output()?;
            if String::from_utf8_lossy(&ping.stdout).trim() == "PONG" {
                return Ok((s, addr));
            }
            if Instant::now() > end {
                bail!("{server} server did not answer PING");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn run_one(env: &Env, server: &str, case: (&str, usize, usize), round: usize, n: usize) -> Result<Vec<RedisRow>> {
        let (s, addr) = start(env, server)?;
        let pid = s.child.id();
        let cpu0 = stack::cpu::pid_cpu(pid)?;
        let out = Command::new("ip")
            .args(["netns", "exec", &env.lab.ns_b.name, "redis-benchmark", "-h", &addr.to_string()])
            .args(["-p", &PORT.to_string(), "-t", "set,get", "-d", "64", "-r", "10000", "--csv"])
            .args(["-n", &n.to_string(), "-c", &case.1.to_string(), "-P", &case.2.to_string()])
            .stdin(Stdio::null())
            .output()
            .context("running redis-benchmark")?;
        let cpu = stack::cpu::pid_cpu(pid)?.saturating_sub(cpu0);
        if server == "redis" {
            // redis-server exits 0 on SIGINT too, but does not need our clean-exit checks.
            drop(s);
        } else {
            s.stop()?;
        }
        if !out.status.success() {
            bail!("redis-benchmark against {server}: {}", String::from_utf8_lossy(&out.stderr));
        }
        let text = String::from_utf8_lossy(&out.stdout);
        let mut rows = Vec::new();
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split("\",\"").map(|f| f.trim_matches('"')).collect();
            let num = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(f64::NAN);
            if f.len() < 7 {
                continue;
            }
            rows.push(RedisRow {
                server: server.into(),
                case: case.0.into(),
                test: f[0].into(),
                round,
                clients: case.1,
                pipeline: case.2,
                rps: num(1),
                p50_us: num(4) * 1000.0,
                p99_us: num(6) * 1000.0,
                // Both tests ran against this process: split its CPU evenly per request.
                server_cpu_us_per_req: cpu.as_secs_f64() * 1e6 / (2 * n) as f64,
            });
        }
        if rows.len() != 2 {
            bail!("unexpected redis-benchmark output:\n{text}");
        }
        Ok(rows)
    }

    /// Runs the cases (unless `--only` excludes them or redis-tools is missing) and reports.
    pub(super) fn run(env: &Env, args: &Args, rounds: usize) -> Result<usize> {
        if args.only.as_deref().is_some_and(|o| !"redis".contains(o) && !o.contains("redis")) {
            return Ok(0);
        }
        if !have("redis-benchmark") {
            println!("note: redis-benchmark not found: skipping the redis cases (apt-get install redis-tools)");
            return Ok(0);
        }
        let mut servers = vec!["xsk", "kernel"];
        if have("redis-server") {
            servers.push("redis");
        } else {
            println!("note: redis-server not found: no reference row for real Redis (apt-get install redis-server)");
        }
        let n = if args.quick { 20_000 } else { (50_000.0 * args.seconds) as usize };
        let mut rows = Vec::new();
        let mut failures = 0;
        for case in CASES.iter().filter(|c| args.only.as_deref().is_none_or(|o| c.0.contains(o) || o == "redis")) {
            for round in 0..rounds {
                // Rotate the order each round so drift hits every server alike.
                for k in 0..servers.len() {
                    let server = servers[(k + round) % servers.len()];
                    if lab::interrupted() {
                        break;
                    }
                    match run_one(env, server, *case, round, n) {
                        Ok(r) => {
                            for row in &r {
                                println!(
                                    "{:<14} {:<4} {:<7} {:>10.0} req/s  p50 {:>7.1} us  p99 {:>7.1} us  server cpu {:>5.2} us/req",
                                    row.case, row.test, row.server, row.rps, row.p50_us, row.p99_us, row.server_cpu_us_per_req
                                );
                            }
                            rows.extend(r);
                        }
                        Err(e) => {
                            println!("{:<14} {:<7} FAILED: {e:#}", case.0, server);
                            failures += 1;
                        }
                    }
                }
            }
        }
        report(&rows, &servers, &args.out)?;
        Ok(failures)
    }

    fn report(rows: &[RedisRow], servers: &[&str], out: &Path) -> Result<()> {
        // (case, test) in run order, then the medians per server.
        let mut keys: Vec<(String, String)> = Vec::new();
        for r in rows {
            let k = (r.case.clone(), r.test.clone());
            if !keys.contains(&k) {
                keys.push(k);
            }
        }
        let med = |case: &str, test: &str, server: &str, f: fn(&RedisRow) -> f64| {
            median(rows.iter().filter(|r| r.case == case && r.test == test && r.server == server).map(f).collect())
        };
        println!();
        println!(
            "{:<14} {:<4} | {:>10} {:>10} {:>10} {:>6} | {:>8} {:>8} {:>8} | {:>8} {:>8} {:>8} | {:>7} {:>7} {:>7}",
            "redis case", "test", "xsk req/s", "krn req/s", "redis r/s", "x/k", "xsk p50", "krn p50", "rds p50", "xsk p99",
            "krn p99", "rds p99", "xsk cpu", "krn cpu", "rds cpu"
        );
        let mut summary = Vec::new();
        for (case, test) in &keys {
            let col = |f: fn(&RedisRow) -> f64| servers.iter().map(|s| med(case, test, s, f)).collect::<Vec<_>>();
            let (rps, p50, p99, cpu) =
                (col(|r| r.rps), col(|r| r.p50_us), col(|r| r.p99_us), col(|r| r.server_cpu_us_per_req));
            let third = |v: &Vec<f64>| v.get(2).copied().unwrap_or(f64::NAN);
            println!(
                "{case:<14} {test:<4} | {:>10.0} {:>10.0} {:>10.0} {:>6.2} | {:>8.1} {:>8.1} {:>8.1} | {:>8.1} {:>8.1} {:>8.1} | {:>7.2} {:>7.2} {:>7.2}",
                rps[0], rps[1], third(&rps), rps[0] / rps[1], p50[0], p50[1], third(&p50), p99[0], p99[1], third(&p99),
                cpu[0], cpu[1], third(&cpu)
            );
            for (i, s) in servers.iter().enumerate() {
                summary.push(serde_json::json!({
                    "case": case, "test": test, "server": s,
                    "rps": rps[i], "p50_us": p50[i], "p99_us": p99[i], "server_cpu_us_per_req": cpu[i],
                }));
            }
        }
        println!("(medians; redis-benchmark -t set,get -d 64 -r 10000 from ns_b on kernel TCP; xsk/krn = rr-server");
        println!(" --service resp on the AF_XDP stack / kernel TCP, redis = Debian's redis-server on kernel TCP;");
        println!(" cpu = server process CPU us per request; latencies from redis-benchmark, whose histogram");
        println!(" rounds to its own resolution; veth charges the client's receive work to the server's CPU)");
        let json = serde_json::json!({ "summary": summary, "runs": rows });
        std::fs::write(out.join("redis.json"), serde_json::to_vec_pretty(&json)?)?;
        std::fs::write(out.join("redis.svg"), svg(&keys, servers, rows))?;
        println!("wrote {} and {}", out.join("redis.json").display(), out.join("redis.svg").display());
        Ok(())
    }

    /// One bar per server for each (case, test): requests per second, medians.
    fn svg(keys: &[(String, String)], servers: &[&str], rows: &[RedisRow]) -> String {
        let (w, h, pad) = (900.0, 380.0, 60.0);
        let med = |c: &str, t: &str, s: &str| {
            median(rows.iter().filter(|r| r.case == c && r.test == t && r.server == s).map(|r| r.rps).collect())
        };
        let max = keys
            .iter()
            .flat_map(|(c, t)| servers.iter().map(move |s| (c, t, s)))
            .map(|(c, t, s)| med(c, t, s))
            .filter(|v| v.is_finite())
            .fold(1.0, f64::max);
        let colors = ["#3366cc", "#999999", "#cc3333"];
        let mut s = format!(r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12"><rect width="100%" height="100%" fill="white"/>"#);
        s += &format!(r#"<text x="{pad}" y="30" font-size="15">redis-benchmark req/s (median): rr-server xsk (blue), rr-server kernel (grey), redis-server (red)</text>"#);
        let group = (w - 2.0 * pad) / keys.len().max(1) as f64;
        let ph = h - 2.0 * pad - 20.0;
        for (i, (c, t)) in keys.iter().enumerate() {
            let x0 = pad + i as f64 * group;
            let bw = group * 0.8 / servers.len() as f64;
            for (j, srv) in servers.iter().enumerate() {
                let v = med(c, t, srv);
                if !v.is_finite() {
                    continue;
                }
                let bh = ph * v / max;
                let x = x0 + 0.1 * group + j as f64 * bw;
                s += &format!(r#"<rect x="{x:.1}" y="{:.1}" width="{bw:.1}" height="{bh:.1}" fill="{}"/>"#, pad + ph - bh, colors[j % 3]);
                s += &format!(r#"<text x="{:.1}" y="{:.1}" font-size="10" text-anchor="middle">{:.0}k</text>"#, x + bw / 2.0, pad + ph - bh - 3.0, v / 1000.0);
            }
            s += &format!(r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="11">{c} {t}</text>"#, x0 + group / 2.0, pad + ph + 16.0);
        }
        s += "</svg>\n";
        s
    }
}
