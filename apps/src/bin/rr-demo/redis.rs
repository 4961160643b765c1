//! redis-benchmark (Debian's redis-tools) and redis-py against `rr-server --service resp` on
//! each backend and, where installed, against Debian's redis-server, all on ns_a, the client in
//! ns_b on kernel TCP: the same client for every server, alternating servers per round. Results
//! go to their own table, `redis.json` and `redis.svg`, since the clients report different
//! metrics (no client CPU, latency in redis-benchmark's own histogram).

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use apps::netrx::{NetRxTimes, WatchError};
use apps::server_process::ServerProcess;
use serde::Serialize;
use xsk_lab::signals;

use crate::Args;
use crate::cases::{only_matches, Kernel};
use crate::metrics::median;
use crate::runs::{Env, Server};

/// What loads the server in a case.
#[derive(Clone, Copy, Debug)]
enum Load {
    /// redis-benchmark with these `-t` tests (`-d 64 -r 10000`).
    Benchmark(&'static str),
    /// redis-py (default settings: RESP3) sending SET/GET pairs through `pipeline()`, one
    /// connection, `pipeline` commands per round trip (the script below).
    RedisPy,
}

/// (case name, load, clients, pipeline depth).
const CASES: &[(&str, Load, usize, usize)] = &[
    ("redis-c1", Load::Benchmark("set,get"), 1, 1),
    ("redis-c16", Load::Benchmark("set,get"), 16, 1),
    ("redis-c16-P16", Load::Benchmark("set,get"), 16, 16),
    ("redis-hset-c16", Load::Benchmark("hset"), 16, 1),
    ("redis-py-P100", Load::RedisPy, 1, 100),
];
const PORT: u16 = 6380;

/// The redis-py load: `n` commands as SET/GET pairs on 10,000 keys (64-byte values), `depth`
/// per pipeline; prints requests/s and the round-trip time of one pipeline (p50, p99) as JSON.
const REDIS_PY_LOAD: &str = r#"
import json, sys, time, redis
host, port, n, depth = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
r = redis.Redis(host=host, port=port)
val = b"x" * 64
keys = [b"key:%012d" % i for i in range(10000)]
lat, done, i = [], 0, 0
t0 = time.perf_counter()
while done < n:
    p = r.pipeline(transaction=False)
    for j in range(depth // 2):
        k = keys[(i + j) % len(keys)]
        p.set(k, val)
        p.get(k)
    s = time.perf_counter()
    res = p.execute()
    lat.append(time.perf_counter() - s)
    if res[1] != val:
        sys.exit("wrong reply: %r" % (res[1],))
    done += 2 * (depth // 2)
    i += depth // 2
el = time.perf_counter() - t0
lat.sort()
print(json.dumps({"requests": done, "rps": done / el, "p50_us": lat[len(lat) // 2] * 1e6,
                  "p99_us": lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1e6}))
"#;

/// The interpreter with redis-py: `REDIS_PY_PYTHON`, else the venv `scripts/setup` makes
/// (target/redis-py next to the binary's profile folder, or in this source tree).
fn redis_py() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("REDIS_PY_PYTHON") {
        return Some(PathBuf::from(p));
    }
    let exe = std::env::current_exe().ok()?;
    let near = exe.parent()?.parent()?.join("redis-py/bin/python");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/redis-py/bin/python");
    [near, src]
        .into_iter()
        .find(|p| Command::new(p).args(["-c", "import redis"]).output().is_ok_and(|o| o.status.success()))
}

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
    /// The same with each side charged its own receive path (`apps::netrx::own_rx`: veth
    /// runs the receiver's NET_RX softirq in the sender's process); NaN (null) where the
    /// accountant could not be attached.
    server_cpu_us_per_req_own_rx: f64,
    /// System calls the server's process entered per request (the same accountant).
    server_syscalls_per_req: f64,
}

fn have(tool: &str) -> bool {
    Command::new(tool).arg("--version").output().is_ok_and(|o| o.status.success())
}

fn start(env: &Env, server: &str) -> Result<(Server, std::net::Ipv4Addr)> {
    let program = if server == "redis" { "redis-server".into() } else { env.server_exe.clone() };
    let mut c = ServerProcess::command(&env.lab.ns_a, program);
    let addr = if server == "xsk" { env.xsk_server_addr } else { env.lab.addr_a };
    let port = PORT.to_string();
    if server == "redis" {
        // The real thing, as packaged: no persistence, so both sides only serve memory.
        c.args(["--port", &port, "--bind", &addr.to_string(), "--save", "", "--appendonly", "no"]);
        c.args(["--protected-mode", "no", "--daemonize", "no", "--logfile", ""]);
    } else {
        let ready = env.logs.join(format!("ready-resp-{server}"));
        let _ = std::fs::remove_file(&ready);
        c.args(["--backend", server, "--service", "resp", "--port", &port]);
        if server == "xsk" {
            c.args(["--iface", &env.lab.if_a, "--attach", &env.attach.to_string()]);
            c.args(["--addr", &format!("{addr}/{}", env.lab.prefix_len)]);
        } else {
            c.args(["--bind", &addr.to_string()]);
        }
        c.arg("--ready-file").arg(&ready);
        c.arg("--json").arg(env.logs.join(format!("redis-{server}.server.json")));
    }
    // The server's output goes to the run's log folder, as for the other cases.
    let log = env.logs.join(format!("redis-{server}.server.log"));
    let process = ServerProcess::spawn(format!("{server} server"), c, &log, None)?;
    let mut s = Server { process, json: env.logs.join(format!("redis-{server}.server.json")) };
    // Ready when it answers PING (works for both servers).
    let ping = || {
        Command::new("ip")
            .args(["netns", "exec", &env.lab.ns_b.name, "redis-cli", "-h", &addr.to_string(), "-p", &port, "PING"])
            .output()
            .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "PONG")
    };
    s.process.wait_until(Duration::from_secs(10), ping)?;
    Ok((s, addr))
}

fn run_one(env: &Env, server: &str, case: (&str, Load, usize, usize), round: usize, n: usize) -> Result<Vec<RedisRow>> {
    let (name, load, clients, pipeline) = case;
    let (s, addr) = start(env, server)?;
    let pid = s.process.pid();
    let cpu0 = apps::cpu::pid_cpu(pid)?;
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", &env.lab.ns_b.name]);
    match load {
        Load::Benchmark(tests) => {
            cmd.args(["redis-benchmark", "-h", &addr.to_string(), "-p", &PORT.to_string(), "-t", tests]);
            cmd.args(["-d", "64", "-r", "10000", "--csv", "-n", &n.to_string()]);
            cmd.args(["-c", &clients.to_string(), "-P", &pipeline.to_string()]);
        }
        Load::RedisPy => {
            let py = redis_py().context("redis-py not found")?;
            cmd.arg(py).args(["-c", REDIS_PY_LOAD, &addr.to_string(), &PORT.to_string()]);
            cmd.args([n.to_string(), pipeline.to_string()]);
        }
    }
    let (out, netrx) = run_client(pid, cmd)?;
    let cpu = apps::cpu::pid_cpu(pid)?.saturating_sub(cpu0);
    let own = netrx.map(|d| apps::netrx::own_rx(cpu, d));
    if server == "redis" {
        // redis-server exits 0 on SIGINT too, but does not need our clean-exit checks.
        drop(s);
    } else {
        s.stop()?;
    }
    if !out.status.success() {
        bail!("client against {server}: {}", String::from_utf8_lossy(&out.stderr));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let row = |test: &str, rps: f64, p50_us: f64, p99_us: f64, requests: usize| RedisRow {
        server: server.into(),
        case: name.into(),
        test: test.into(),
        round,
        clients,
        pipeline,
        rps,
        p50_us,
        p99_us,
        // Every test of the case ran against this process: split its CPU evenly per request.
        server_cpu_us_per_req: cpu.as_secs_f64() * 1e6 / requests as f64,
        server_cpu_us_per_req_own_rx: own.map_or(f64::NAN, |c| c.as_secs_f64() * 1e6 / requests as f64),
        server_syscalls_per_req: netrx.map_or(f64::NAN, |d| d.server_syscalls as f64 / requests as f64),
    };
    let mut rows = Vec::new();
    match load {
        Load::Benchmark(tests) => {
            let expect = tests.split(',').count();
            for line in text.lines().skip(1) {
                let f: Vec<&str> = line.split("\",\"").map(|f| f.trim_matches('"')).collect();
                let num = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(f64::NAN);
                if f.len() >= 7 {
                    rows.push(row(f[0], num(1), num(4) * 1000.0, num(6) * 1000.0, expect * n));
                }
            }
            if rows.len() != expect {
                bail!("unexpected redis-benchmark output:\n{text}");
            }
        }
        Load::RedisPy => {
            let v: serde_json::Value = serde_json::from_str(text.trim()).context("redis-py load output")?;
            let f = |k: &str| v[k].as_f64().unwrap_or(f64::NAN);
            rows.push(row("PIPE", f("rps"), f("p50_us"), f("p99_us"), f("requests") as usize));
        }
    }
    Ok(rows)
}

/// Set once the NET_RX accountant failed to attach: said once, then not tried again.
static NO_NETRX: AtomicBool = AtomicBool::new(false);

/// Runs the client to its end under the NET_RX accountant (`apps::netrx::watch`), or without
/// it (no totals) where it cannot be attached, which is said once. A client that ran and then
/// failed is the case's failure: running it again would count its server's CPU twice.
fn run_client(server: u32, cmd: Command) -> Result<(Output, Option<NetRxTimes>)> {
    run_watched(&NO_NETRX, cmd, |cmd| apps::netrx::watch(server, cmd, true))
}

/// [`run_client`] with its accountant's switch and its way of watching as parameters.
fn run_watched(
    off: &AtomicBool,
    mut cmd: Command,
    watch: impl FnOnce(&Command) -> Result<(Output, NetRxTimes), WatchError>,
) -> Result<(Output, Option<NetRxTimes>)> {
    if !off.load(Ordering::Relaxed) {
        match watch(&cmd) {
            Ok((out, d)) => return Ok((out, Some(d))),
            Err(WatchError::NotRun(e)) => {
                println!("note: redis cases without the own-receive figure: {e:#}");
                off.store(true, Ordering::Relaxed);
            }
            Err(e @ WatchError::Ran(_)) => return Err(e).context("running the client"),
        }
    }
    Ok((cmd.stdin(Stdio::null()).output().context("running the client")?, None))
}

/// Whether `--only` selects any Redis case.
pub(super) fn selected(only: Option<&str>) -> bool {
    only.is_none_or(|o| o.split(',').any(|i| "redis".contains(i) || i.contains("redis")))
}

/// Runs the cases (unless `--only` excludes them or redis-tools is missing) and reports.
pub(super) fn run(env: &Env, args: &Args, rounds: usize) -> Result<usize> {
    if !selected(args.only.as_deref()) {
        return Ok(0);
    }
    if !have("redis-benchmark") {
        println!("note: redis-benchmark not found: skipping the redis cases (apt-get install redis-tools)");
        return Ok(0);
    }
    let have_py = redis_py().is_some();
    if !have_py {
        println!("note: redis-py not found: skipping redis-py-P100 (scripts/setup installs it in target/redis-py)");
    }
    // rr-server on the stack, then on each kernel configuration of --kernels (its backend names).
    let mut servers = vec!["xsk"];
    servers.extend(args.kernels.0.iter().map(|k| match k {
        Kernel::Epoll => "kernel",
        Kernel::Uring => "uring",
    }));
    if have("redis-server") {
        servers.push("redis");
    } else {
        println!("note: redis-server not found: no reference row for real Redis (apt-get install redis-server)");
    }
    let n = if args.quick { 20_000 } else { (50_000.0 * args.duration.as_secs_f64()) as usize };
    let mut rows = Vec::new();
    let mut failures = 0;
    let names: Vec<&str> = CASES.iter().map(|c| c.0).collect();
    for case in CASES
        .iter()
        .filter(|c| {
            args.only.as_deref().is_none_or(|o| o.split(',').any(|i| i == "redis") || only_matches(o, c.0, &names))
        })
        .filter(|c| have_py || !matches!(c.1, Load::RedisPy))
    {
        for round in 0..rounds {
            // Rotate the order each round so drift hits every server alike.
            for k in 0..servers.len() {
                let server = servers[(k + round) % servers.len()];
                if signals::interrupted() {
                    break;
                }
                match run_one(env, server, *case, round, n) {
                    Ok(r) => {
                        for row in &r {
                            println!(
                                "{:<15} {:<4} {:<7} {:>10.0} req/s  p50 {:>7.1} us  p99 {:>7.1} us  server cpu {:>5.2} us/req",
                                row.case, row.test, row.server, row.rps, row.p50_us, row.p99_us, row.server_cpu_us_per_req
                            );
                        }
                        rows.extend(r);
                    }
                    Err(e) => {
                        println!("{:<15} {:<7} FAILED: {e:#}", case.0, server);
                        failures += 1;
                    }
                }
            }
        }
    }
    report(&rows, &servers, &args.out)?;
    Ok(failures)
}

/// The rr-server backends of kernel TCP among the servers.
fn is_kernel(server: &str) -> bool {
    matches!(server, "kernel" | "uring")
}

/// The kernel configuration that served a case best: the highest median rate, as rr-demo's
/// main table picks it for closed-loop cases (the Redis clients are closed loop).
fn best_kernel<'a>(servers: &[&'a str], rps: impl Fn(&str) -> f64) -> Option<&'a str> {
    servers
        .iter()
        .copied()
        .filter(|s| is_kernel(s) && rps(s).is_finite())
        .max_by(|a, b| rps(a).total_cmp(&rps(b)))
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
        "{:<15} {:<4} {:<6} | {:>10} {:>10} {:>10} {:>6} | {:>8} {:>8} {:>8} | {:>8} {:>8} {:>8} | {:>7} {:>7} {:>7} {:>5} | {:>7} {:>7} {:>5}",
        "redis case",
        "test",
        "krn",
        "xsk req/s",
        "krn req/s",
        "redis r/s",
        "x/k",
        "xsk p50",
        "krn p50",
        "rds p50",
        "xsk p99",
        "krn p99",
        "rds p99",
        "xsk cpu",
        "krn cpu",
        "rds cpu",
        "x/k",
        "xsk own",
        "krn own",
        "x/k"
    );
    let mut summary = Vec::new();
    for (case, test) in &keys {
        let col = |f: fn(&RedisRow) -> f64| servers.iter().map(|s| med(case, test, s, f)).collect::<Vec<_>>();
        let (rps, p50, p99, cpu) =
            (col(|r| r.rps), col(|r| r.p50_us), col(|r| r.p99_us), col(|r| r.server_cpu_us_per_req));
        let own = col(|r| r.server_cpu_us_per_req_own_rx);
        // Columns: the stack, the best kernel configuration, redis-server.
        let at = |name: Option<&str>| name.and_then(|n| servers.iter().position(|s| *s == n));
        let krn = best_kernel(servers, |s| med(case, test, s, |r| r.rps));
        let (x, k, r) = (at(Some("xsk")), at(krn), at(Some("redis")));
        let v = |v: &Vec<f64>, i: Option<usize>| i.map_or(f64::NAN, |i| v[i]);
        let kname = match krn {
            Some("uring") => "uring",
            Some(_) => "epoll",
            None => "-",
        };
        println!(
            "{case:<15} {test:<4} {kname:<6} | {:>10.0} {:>10.0} {:>10.0} {:>6.2} | {:>8.1} {:>8.1} {:>8.1} | {:>8.1} {:>8.1} {:>8.1} | {:>7.2} {:>7.2} {:>7.2} {:>5.2} | {:>7.2} {:>7.2} {:>5.2}",
            v(&rps, x), v(&rps, k), v(&rps, r), v(&rps, x) / v(&rps, k),
            v(&p50, x), v(&p50, k), v(&p50, r), v(&p99, x), v(&p99, k), v(&p99, r),
            v(&cpu, x), v(&cpu, k), v(&cpu, r), v(&cpu, x) / v(&cpu, k),
            v(&own, x), v(&own, k), v(&own, x) / v(&own, k)
        );
        for (i, s) in servers.iter().enumerate() {
            summary.push(serde_json::json!({
                "case": case, "test": test, "server": s,
                "rps": rps[i], "p50_us": p50[i], "p99_us": p99[i], "server_cpu_us_per_req": cpu[i],
                "server_cpu_us_per_req_own_rx": own[i],
            }));
        }
    }
    println!("(medians; redis-benchmark -t TESTS -d 64 -r 10000 from ns_b on kernel TCP, redis-py-P100: redis-py");
    println!(" pipelines of 50 SET + 50 GET, latency per pipeline; xsk = rr-server --service resp on the AF_XDP");
    println!(" stack, krn = the same on kernel TCP's best configuration of --kernels for the case (highest req/s:");
    println!(" epoll, or uring = io_uring), redis = Debian's redis-server on kernel TCP; cpu = server process CPU");
    println!(" us per request, which on veth holds the client's receive work and not the server's own; own =");
    println!(" the same with each side charged its own receive path (server CPU - NET_RX softirq run in it +");
    println!(" NET_RX run in the client; nan without root); redis-benchmark's histogram rounds to its own resolution)");
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
    let color = |s: &str| match s {
        "xsk" => "#3366cc",
        "kernel" => "#999999",
        "uring" => "#666666",
        _ => "#cc3333",
    };
    let mut s = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12"><rect width="100%" height="100%" fill="white"/>"#
    );
    s += &format!(
        r#"<text x="{pad}" y="30" font-size="15">Redis clients' req/s (median): rr-server xsk (blue), rr-server on epoll (grey) and io_uring (dark grey), redis-server (red)</text>"#
    );
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
            s += &format!(
                r#"<rect x="{x:.1}" y="{:.1}" width="{bw:.1}" height="{bh:.1}" fill="{}"/>"#,
                pad + ph - bh,
                color(srv)
            );
            s += &format!(
                r#"<text x="{:.1}" y="{:.1}" font-size="10" text-anchor="middle">{:.0}k</text>"#,
                x + bw / 2.0,
                pad + ph - bh - 3.0,
                v / 1000.0
            );
        }
        s += &format!(
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="11">{c} {t}</text>"#,
            x0 + group / 2.0,
            pad + ph + 16.0
        );
    }
    s += "</svg>\n";
    s
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::process::Command;
    use std::sync::atomic::{AtomicBool, Ordering};

    use apps::netrx::WatchError;

    use super::{best_kernel, run_watched};

    /// Where the accountant cannot be attached (no root, no BPF), the client runs without
    /// it and its output still comes back; later clients are not offered to the accountant
    /// again. A client that ran and then failed is an error, not run a second time.
    #[test]
    fn a_client_runs_without_the_accountant_only_when_it_never_ran() {
        let off = AtomicBool::new(false);
        let echo = || {
            let mut c = Command::new("sh");
            c.args(["-c", "echo ran"]);
            c
        };
        let not_run = |_: &Command| Err(WatchError::NotRun(anyhow::anyhow!("no BPF here")));
        let (out, d) = run_watched(&off, echo(), not_run).unwrap();
        assert_eq!(out.stdout, b"ran\n");
        assert!(d.is_none() && off.load(Ordering::Relaxed));
        // Said once: the next client is not offered to the accountant.
        let asked = Cell::new(false);
        let (out, d) = run_watched(&off, echo(), |_| {
            asked.set(true);
            Err(WatchError::NotRun(anyhow::anyhow!("asked again")))
        })
        .unwrap();
        assert!(!asked.get() && d.is_none() && out.stdout == b"ran\n");
        // A client that ran: its failure is the case's, and it is not run again.
        let off = AtomicBool::new(false);
        let ran = |_: &Command| Err(WatchError::Ran(anyhow::anyhow!("the client failed")));
        let mut again = Command::new("sh");
        again.args(["-c", "exit 3"]);
        let e = run_watched(&off, again, ran).unwrap_err();
        assert!(format!("{e:#}").contains("the client failed"), "{e:#}");
        assert!(!off.load(Ordering::Relaxed));
    }

    #[test]
    fn the_best_kernel_is_the_fastest_that_ran() {
        let servers = ["xsk", "kernel", "uring", "redis"];
        let rps = |s: &str| match s {
            "xsk" => 30.0,
            "kernel" => 10.0,
            "uring" => 12.0,
            _ => 50.0,
        };
        // Neither the stack nor redis-server counts, however fast.
        assert_eq!(best_kernel(&servers, rps), Some("uring"));
        // A configuration with no figure (its runs failed) is passed over.
        assert_eq!(best_kernel(&servers, |s| if s == "uring" { f64::NAN } else { rps(s) }), Some("kernel"));
        assert_eq!(best_kernel(&["xsk", "redis"], rps), None);
    }
}
