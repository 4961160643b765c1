//! Load from the host namespace to a server in the guest: `rr-bench --backend kernel` (the
//! project's load generator, run under `ip netns exec`), and a small built-in echo client that
//! checks responses byte for byte with payloads of many sizes (also the fallback when
//! rr-bench is missing or its command line changed).

use std::io::{Read, Write};
use std::net::{SocketAddr, SocketAddrV4, TcpStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde::Serialize;

use crate::guest::Guest;
use crate::netns::HostNet;
use crate::util::{run_timeout, Rng};

/// What one load run measured.
#[derive(Debug, Clone, Default, Serialize)]
pub struct LoadResult {
    /// "rr-bench" or "builtin".
    pub tool: String,
    pub requests: u64,
    pub errors: u64,
    pub lost: u64,
    pub bytes: u64,
    pub rps: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub duration_s: f64,
    /// The command or a description of the run.
    pub command: String,
    /// Why rr-bench was not used, when the built-in client stood in.
    pub note: Option<String>,
}

impl LoadResult {
    /// Every request answered, byte-exact, no errors.
    pub fn clean(&self, want: u64) -> bool {
        self.requests >= want && self.errors == 0 && self.lost == 0
    }

    /// `N of WANT answered, E errors, L lost`, or None when [`LoadResult::clean`].
    pub fn shortfall(&self, want: u64) -> Option<String> {
        (!self.clean(want)).then(|| {
            format!(
                "{} of {want} answered, {} errors, {} lost",
                self.requests, self.errors, self.lost
            )
        })
    }
}

/// rr-bench parameters.
#[derive(Debug, Clone)]
pub struct BenchArgs {
    pub connect: SocketAddrV4,
    pub conns: usize,
    pub depth: usize,
    pub req_size: usize,
    pub duration: Duration,
    pub max_requests: Option<u64>,
    /// rr-bench --drain-timeout (its default, 2 s, when None): longer under netem, where the
    /// last responses may need a retransmission.
    pub drain_timeout: Option<Duration>,
    /// rr-bench --rate: open loop at this many requests per second in total (closed loop
    /// when None).
    pub rate: Option<f64>,
}

impl BenchArgs {
    /// The checked load of the scenarios: `requests` 64-byte echoes over 2 connections x depth
    /// 2, stopped after `limit` if they have not all come back by then.
    pub fn checked(connect: SocketAddrV4, requests: u64, limit: Duration) -> Self {
        BenchArgs {
            connect,
            conns: 2,
            depth: 2,
            req_size: 64,
            duration: limit,
            max_requests: Some(requests),
            drain_timeout: None,
            rate: None,
        }
    }

    /// Under netem the last responses may need a retransmission: wait longer for them.
    pub fn under_netem(self) -> Self {
        BenchArgs {
            drain_timeout: Some(Duration::from_secs(10)),
            rate: None,
            ..self
        }
    }
}

/// Outcome of trying rr-bench.
pub enum Bench {
    Ran(LoadResult),
    /// rr-bench is not there or rejected its command line (usage error, exit 2): the caller
    /// may fall back to the built-in client. The string says why.
    Unusable(String),
}

/// Runs `rr-bench --backend kernel` in the host namespace; bounded by the run's own duration
/// plus 30 s.
pub fn rr_bench(bin_dir: &Path, net: &HostNet, a: &BenchArgs, json: &Path) -> Result<Bench> {
    let exe: PathBuf = bin_dir.join("rr-bench");
    if !exe.exists() {
        return Ok(Bench::Unusable(format!("{} is not built", exe.display())));
    }
    let _ = std::fs::remove_file(json);
    let args = rr_bench_args(a, &json.display().to_string());
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut c = net.command(exe.to_str().context("rr-bench path is not UTF-8")?, &argv);
    let command = format!("ip netns exec {} rr-bench {}", net.ns, args.join(" "));
    let (status, stdout, stderr) = run_timeout(
        &mut c,
        a.duration + a.drain_timeout.unwrap_or_default() + Duration::from_secs(30),
    )?;
    let _ = std::fs::write(
        json.with_extension("log"),
        format!("$ {command}\n{stdout}{stderr}"),
    );
    let Some(status) = status else {
        crate::util::check_interrupted()?;
        bail!(
            "rr-bench did not finish within {} s (killed): {command}",
            (a.duration.as_secs() + 30)
        );
    };
    if status.code() == Some(2) {
        return Ok(Bench::Unusable(format!(
            "rr-bench rejected its command line: {}",
            stderr.trim()
        )));
    }
    // 0 ok, 3 completed with errors: both leave a JSON to read. 1 (setup or run failed) may not.
    let Ok(text) = std::fs::read_to_string(json) else {
        let why = stderr
            .lines()
            .rev()
            .find(|l| l.contains("error"))
            .or_else(|| stderr.lines().last())
            .unwrap_or("")
            .trim()
            .trim_start_matches("rr-bench: error: ");
        bail!("rr-bench failed ({status}): {why}");
    };
    let note = (!status.success()).then(|| format!("rr-bench exit {status}: {}", stderr.trim()));
    let r = parse_rr_bench_json(&text, command, note)
        .with_context(|| format!("parsing {}", json.display()))?;
    Ok(Bench::Ran(r))
}

/// Reads rr-bench's `--json` output.
pub fn parse_rr_bench_json(
    text: &str,
    command: String,
    note: Option<String>,
) -> Result<LoadResult> {
    let v: serde_json::Value = serde_json::from_str(text.trim())?;
    let f = |k: &str| v.get(k).and_then(|x| x.as_f64()).unwrap_or(f64::NAN);
    let u = |k: &str| v.get(k).and_then(|x| x.as_u64()).unwrap_or(0);
    Ok(LoadResult {
        tool: "rr-bench".into(),
        requests: u("requests"),
        errors: u("errors"),
        lost: u("lost"),
        bytes: u("bytes_received"),
        rps: f("rps"),
        p50_us: f("p50_us"),
        p99_us: f("p99_us"),
        p999_us: f("p999_us"),
        duration_s: f("duration_s"),
        command,
        note,
    })
}

/// The rr-bench arguments (without the program) for `a`, writing JSON to `json`.
pub fn rr_bench_args(a: &BenchArgs, json: &str) -> Vec<String> {
    let mut args: Vec<String> = vec![
        "--backend".into(),
        "kernel".into(),
        "--connect".into(),
        a.connect.to_string(),
        "--conns".into(),
        a.conns.to_string(),
        "--depth".into(),
        a.depth.to_string(),
        "--req-size".into(),
        a.req_size.to_string(),
        "--duration".into(),
        format!("{}ms", a.duration.as_millis()),
        "--warmup".into(),
        "0".into(),
        "--quiet".into(),
        "--json".into(),
        json.into(),
    ];
    if let Some(n) = a.max_requests {
        args.push("--max-requests".into());
        args.push(n.to_string());
    }
    if let Some(d) = a.drain_timeout {
        args.push("--drain-timeout".into());
        args.push(format!("{}ms", d.as_millis()));
    }
    if let Some(r) = a.rate {
        args.push("--rate".into());
        args.push(r.to_string());
    }
    args
}

/// Runs `rr-bench --backend kernel` inside guest `g` (the guest-to-guest topology), bounded
/// by the run's duration plus 40 s; its JSON is read back over the console.
pub fn rr_bench_in_guest(g: &mut Guest, a: &BenchArgs, tag: &str) -> Result<LoadResult> {
    let json = format!("/tmp/{tag}.json");
    let args = rr_bench_args(a, &json);
    let command = format!("rr-bench {}", args.join(" "));
    let o = g.exec(
        &format!(
            "rm -f {json}; {command} > /tmp/{tag}.log 2>&1; echo \"rc=$?\"; cat {json} 2>/dev/null; echo"
        ),
        a.duration + a.drain_timeout.unwrap_or_default() + Duration::from_secs(40),
    )?;
    let rc: i32 = o
        .output
        .lines()
        .find_map(|l| l.trim().strip_prefix("rc=")?.parse().ok())
        .unwrap_or(-1);
    let text = match o.output.find('{') {
        Some(i) => &o.output[i..],
        None => {
            let log = g
                .exec(
                    &format!("tail -n 5 /tmp/{tag}.log"),
                    Duration::from_secs(10),
                )
                .map(|o| o.output)
                .unwrap_or_default();
            bail!(
                "rr-bench in guest {} failed (exit {rc}) and wrote no JSON: {}",
                g.name,
                log.trim()
            );
        }
    };
    let note = (rc != 0).then(|| format!("rr-bench exit {rc}"));
    parse_rr_bench_json(text, format!("[{}] {command}", g.name), note)
}

/// Payload sizes of the built-in check: tiny, around one MSS (1460), several segments, and
/// past the default 64 KiB socket buffer of the stack.
pub const CHECK_SIZES: &[usize] = &[
    1, 7, 64, 511, 1000, 1459, 1460, 1461, 2920, 4096, 9000, 16384, 65536, 100_000,
];

/// The built-in echo client, from a thread inside the host namespace: `requests` frames
/// (u32 big-endian length + payload) over one connection, sizes cycling through `sizes`,
/// random contents; each response must equal its request byte for byte.
pub fn echo_check(
    net: &HostNet,
    server: impl Into<SocketAddr>,
    requests: u64,
    sizes: &'static [usize],
    seed: u64,
) -> Result<LoadResult> {
    let server = server.into();
    net.run_in(move || echo_check_here(server, requests, sizes, seed))?
}

/// One request of each of [`CHECK_SIZES`] after a case's load; what went wrong goes to
/// `problems`, so a case reports the check along with everything else that failed.
pub fn byte_check(
    net: &HostNet,
    server: SocketAddrV4,
    seed: u64,
    problems: &mut Vec<String>,
) -> Option<LoadResult> {
    let n = CHECK_SIZES.len() as u64;
    match echo_check(net, server, n, CHECK_SIZES, seed) {
        Ok(c) => {
            if !c.clean(n) {
                problems.push(format!(
                    "byte check: {}",
                    c.note
                        .clone()
                        .unwrap_or_else(|| format!("{} mismatches", c.errors))
                ));
            }
            Some(c)
        }
        Err(e) => {
            problems.push(format!("byte check: {e:#}"));
            None
        }
    }
}

fn echo_check_here(
    server: SocketAddr,
    requests: u64,
    sizes: &[usize],
    seed: u64,
) -> Result<LoadResult> {
    let io_timeout = Duration::from_secs(15);
    let mut s = TcpStream::connect_timeout(&server, Duration::from_secs(10))
        .with_context(|| format!("connecting to {server}"))?;
    s.set_nodelay(true)?;
    s.set_read_timeout(Some(io_timeout))?;
    s.set_write_timeout(Some(io_timeout))?;
    let mut rng = Rng::new(seed);
    let mut lat = Vec::with_capacity(requests as usize);
    let mut bytes = 0u64;
    let mut errors = 0u64;
    let mut first_error: Option<String> = None;
    let start = Instant::now();
    let mut done = 0u64;
    for i in 0..requests {
        let size = sizes[(i as usize) % sizes.len()];
        let mut req = vec![0u8; 4 + size];
        req[..4].copy_from_slice(&(size as u32).to_be_bytes());
        rng.fill(&mut req[4..]);
        let t = Instant::now();
        // Write and read concurrently in spirit: frames larger than the socket buffers would
        // deadlock a write-all-then-read client, so write in pieces and drain between them.
        let mut resp = vec![0u8; req.len()];
        let mut written = 0;
        let mut read = 0;
        s.set_nonblocking(true)?;
        let deadline = Instant::now() + io_timeout;
        while read < resp.len() {
            let mut progressed = false;
            if written < req.len() {
                match s.write(&req[written..]) {
                    Ok(n) => {
                        written += n;
                        progressed = n > 0;
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(e) => {
                        return Err(e).with_context(|| format!("request {i} ({size} B): write"))
                    }
                }
            }
            match s.read(&mut resp[read..]) {
                Ok(0) => bail!(
                    "request {i} ({size} B): the server closed the connection after {read} bytes"
                ),
                Ok(n) => {
                    read += n;
                    progressed = true;
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e).with_context(|| format!("request {i} ({size} B): read")),
            }
            if !progressed {
                crate::util::check_interrupted()?;
                if Instant::now() > deadline {
                    bail!(
                        "request {i} ({size} B): no response within {} s ({read} of {} bytes)",
                        io_timeout.as_secs(),
                        resp.len()
                    );
                }
                std::thread::sleep(Duration::from_micros(200));
            }
        }
        lat.push(t.elapsed().as_secs_f64() * 1e6);
        if resp != req {
            errors += 1;
            if first_error.is_none() {
                let at = resp.iter().zip(&req).position(|(a, b)| a != b).unwrap_or(0);
                first_error = Some(format!(
                    "request {i} ({size} B): response differs at byte {at}"
                ));
            }
        }
        bytes += resp.len() as u64;
        done += 1;
    }
    let dur = start.elapsed().as_secs_f64();
    lat.sort_by(|a, b| a.total_cmp(b));
    let pct = |p: f64| {
        lat.get(((lat.len() as f64 - 1.0) * p).round() as usize)
            .copied()
            .unwrap_or(f64::NAN)
    };
    Ok(LoadResult {
        tool: "builtin".into(),
        requests: done,
        errors,
        lost: requests - done,
        bytes,
        rps: done as f64 / dur.max(1e-9),
        p50_us: pct(0.5),
        p99_us: pct(0.99),
        p999_us: pct(0.999),
        duration_s: dur,
        command: format!("built-in echo client: {requests} requests to {server}, sizes {sizes:?}"),
        note: first_error,
    })
}
