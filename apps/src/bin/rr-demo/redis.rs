//! redis-benchmark (Debian's redis-tools) against `rr-server --service resp` on each backend
//! and, where installed, against Debian's redis-server, all on ns_a, the client in ns_b on
//! kernel TCP: the same client for every server, alternating servers per round. Results go to
//! their own table, `redis.json` and `redis.svg`, since the client reports different metrics
//! (no client CPU, latency in redis-benchmark's own histogram).

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
        let ready = env.logs.join(format!("ready-resp-{server}"));
        let _ = std::fs::remove_file(&ready);
        c.arg(&env.server_exe).args(["--backend", server, "--service", "resp", "--port", &port]);
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
    let out = File::create(&log).with_context(|| format!("creating {}", log.display()))?;
    let child = c.stdout(out.try_clone()?).stderr(out).spawn().context("starting the server")?;
    let s = Server { child, json: env.logs.join(format!("redis-{server}.server.json")), log };
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
    let cpu0 = apps::cpu::pid_cpu(pid)?;
    let out = Command::new("ip")
        .args(["netns", "exec", &env.lab.ns_b.name, "redis-benchmark", "-h", &addr.to_string()])
        .args(["-p", &PORT.to_string(), "-t", "set,get", "-d", "64", "-r", "10000", "--csv"])
        .args(["-n", &n.to_string(), "-c", &case.1.to_string(), "-P", &case.2.to_string()])
        .stdin(Stdio::null())
        .output()
        .context("running redis-benchmark")?;
    let cpu = apps::cpu::pid_cpu(pid)?.saturating_sub(cpu0);
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
    if args.only.as_deref().is_some_and(|o| !o.split(',').any(|i| "redis".contains(i) || i.contains("redis"))) {
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
    let n = if args.quick { 20_000 } else { (50_000.0 * args.duration.as_secs_f64()) as usize };
    let mut rows = Vec::new();
    let mut failures = 0;
    let names: Vec<&str> = CASES.iter().map(|c| c.0).collect();
    for case in CASES
        .iter()
        .filter(|c| args.only.as_deref().is_none_or(|o| o.split(',').any(|i| i == "redis") || only_matches(o, c.0, &names)))
    {
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
