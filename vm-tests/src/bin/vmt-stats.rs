//! `vmt-stats IFACE [PID...]`: one JSON line with what the guest spent, for `vm-tests cost` and
//! `vm-tests batch` (runs inside the guest; busybox has no ethtool):
//! CLOCK_MONOTONIC, the `cpu` line of /proc/stat, /proc/uptime's idle seconds, the
//! /proc/interrupts rows of the virtio devices, IFACE's driver statistics (ETHTOOL_GSTATS:
//! virtio_net's per-queue kicks), the device's packet counters (sysfs) and, per PID,
//! /proc/PID/schedstat's run time and its voluntary context switches (its sleeps).
//!
//! `--dump=PID:LOG` first asks rr-server PID for its counters (SIGUSR1) and waits (at most
//! 10 s) for the block it prints to its log LOG (`counters (SIGUSR1):`, then `  name value`
//! lines, then an empty line); they go into the JSON as `counters` (or `counters_error`).
//! The wait polls only the bytes written since the signal, in this process, so its cost hardly
//! varies with how soon the server answers (a shell loop forking grep would).

use std::io::{self, Read, Seek};
use std::time::{Duration, Instant};

const SIOCETHTOOL: libc::c_ulong = 0x8946;
const ETHTOOL_GSTRINGS: u32 = 0x1b;
const ETHTOOL_GSTATS: u32 = 0x1d;
const ETHTOOL_GSSET_INFO: u32 = 0x37;
const ETH_SS_STATS: u32 = 1;
const ETH_GSTRING_LEN: usize = 32;

#[repr(C)]
struct IfReq {
    name: [libc::c_char; libc::IFNAMSIZ],
    data: *mut libc::c_void,
    _pad: [u8; 16],
}

/// One SIOCETHTOOL request with `buf` as `ifr_data`.
fn ethtool(fd: libc::c_int, iface: &str, buf: &mut [u64]) -> io::Result<()> {
    let mut req = IfReq {
        name: [0; libc::IFNAMSIZ],
        data: buf.as_mut_ptr().cast(),
        _pad: [0; 16],
    };
    for (d, s) in req
        .name
        .iter_mut()
        .zip(iface.bytes().take(libc::IFNAMSIZ - 1))
    {
        *d = s as libc::c_char;
    }
    // SAFETY: `req` is a valid ifreq whose data points at `buf`, which is large enough for the
    // command in its first word (callers size it from the count the kernel reported).
    let r = unsafe { libc::ioctl(fd, SIOCETHTOOL, &mut req) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// (name, value) of every driver statistic of `iface`.
fn driver_stats(iface: &str) -> io::Result<Vec<(String, u64)>> {
    // SAFETY: plain socket(2) call; the fd is closed below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    let r = (|| {
        // ethtool_sset_info: cmd, reserved, sset_mask (u64), data[1] (u32)
        let mut info = [0u64; 3];
        info[0] = ETHTOOL_GSSET_INFO as u64;
        info[1] = 1u64 << ETH_SS_STATS;
        ethtool(fd, iface, &mut info)?;
        let n = if info[1] & (1u64 << ETH_SS_STATS) != 0 {
            (info[2] & 0xffff_ffff) as usize
        } else {
            0
        };
        // ethtool_gstrings: cmd, string_set, len, then n * 32 bytes
        let mut strings = vec![0u64; 2 + (n * ETH_GSTRING_LEN).div_ceil(8)];
        strings[0] = ETHTOOL_GSTRINGS as u64 | ((ETH_SS_STATS as u64) << 32);
        strings[1] = n as u64;
        ethtool(fd, iface, &mut strings)?;
        // ethtool_stats: cmd, n_stats, then n * u64
        let mut stats = vec![0u64; 1 + n];
        stats[0] = ETHTOOL_GSTATS as u64 | ((n as u64) << 32);
        ethtool(fd, iface, &mut stats)?;
        let bytes: Vec<u8> = strings[1..].iter().flat_map(|w| w.to_ne_bytes()).collect();
        // `len` is a u32 at byte offset 8; names start at byte 12 of the struct = 4 into `bytes`.
        let names = &bytes[4..];
        Ok((0..n)
            .map(|i| {
                let raw = &names[i * ETH_GSTRING_LEN..(i + 1) * ETH_GSTRING_LEN];
                let end = raw.iter().position(|&b| b == 0).unwrap_or(ETH_GSTRING_LEN);
                (
                    String::from_utf8_lossy(&raw[..end]).into_owned(),
                    stats[1 + i],
                )
            })
            .collect())
    })();
    // SAFETY: fd is ours and open.
    unsafe { libc::close(fd) };
    r
}

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into `ts`.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// SIGUSR1 to `pid`, then the counter block it appends to `log`.
fn dump_counters(pid: &str, log: &str) -> Result<serde_json::Map<String, serde_json::Value>, String> {
    let pid: libc::pid_t = pid.parse().map_err(|_| format!("--dump: bad pid {pid:?}"))?;
    let start = std::fs::metadata(log).map_err(|e| format!("--dump: {log}: {e}"))?.len();
    // SAFETY: plain kill(2).
    if unsafe { libc::kill(pid, libc::SIGUSR1) } != 0 {
        return Err(format!("--dump: kill -USR1 {pid}: {}", io::Error::last_os_error()));
    }
    const HEAD: &str = "counters (SIGUSR1):\n";
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut text = String::new();
    loop {
        std::thread::sleep(Duration::from_micros(500));
        text.clear();
        let mut f = std::fs::File::open(log).map_err(|e| format!("--dump: {log}: {e}"))?;
        f.seek(io::SeekFrom::Start(start)).map_err(|e| format!("--dump: {log}: {e}"))?;
        f.read_to_string(&mut text).map_err(|e| format!("--dump: {log}: {e}"))?;
        if let Some(i) = text.find(HEAD) {
            let body = &text[i + HEAD.len()..];
            if let Some(end) = body.find("\n\n") {
                return Ok(body[..end]
                    .lines()
                    .filter_map(|l| {
                        let (k, v) = l.trim().split_once(' ')?;
                        Some((k.to_string(), v.trim().parse::<f64>().ok()?.into()))
                    })
                    .collect());
            }
        }
        if Instant::now() > deadline {
            return Err(format!("--dump: rr-server {pid} printed no counters to {log} within 10 s of SIGUSR1"));
        }
    }
}

fn main() {
    let (dumps, mut args): (Vec<String>, Vec<String>) =
        std::env::args().skip(1).partition(|a| a.starts_with("--dump="));
    if args.is_empty() {
        eprintln!("usage: vmt-stats IFACE [PID...] [--dump=PID:LOG]");
        std::process::exit(2);
    }
    let iface = args.remove(0);
    let args = args.into_iter();
    let mut out = serde_json::Map::new();
    // The server's counters first: the snapshot below then includes the dump's own work.
    if let Some(d) = dumps.first() {
        let (pid, log) = d["--dump=".len()..].split_once(':').unwrap_or(("", ""));
        match dump_counters(pid, log) {
            Ok(m) => {
                out.insert("counters".into(), m.into());
            }
            Err(e) => {
                out.insert("counters_error".into(), e.into());
            }
        }
    }
    out.insert("mono_ns".into(), monotonic_ns().into());
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    if let Some(l) = stat.lines().find(|l| l.starts_with("cpu ")) {
        let v: Vec<u64> = l
            .split_whitespace()
            .skip(1)
            .filter_map(|x| x.parse().ok())
            .collect();
        out.insert("cpu_ticks".into(), v.into());
    }
    // /proc/uptime's idle time is summed over the CPUs: busy = elapsed x CPUs - idle.
    let cpus = stat
        .lines()
        .filter(|l| l.starts_with("cpu") && l.as_bytes().get(3).is_some_and(u8::is_ascii_digit))
        .count();
    out.insert("cpus".into(), cpus.into());
    let up = std::fs::read_to_string("/proc/uptime").unwrap_or_default();
    let f: Vec<f64> = up
        .split_whitespace()
        .filter_map(|x| x.parse().ok())
        .collect();
    if f.len() == 2 {
        out.insert("uptime_s".into(), f[0].into());
        out.insert("idle_s".into(), f[1].into());
    }
    let mut irqs = serde_json::Map::new();
    for l in std::fs::read_to_string("/proc/interrupts")
        .unwrap_or_default()
        .lines()
    {
        let w: Vec<&str> = l.split_whitespace().collect();
        if w.len() < 3 || !w[0].ends_with(':') || !l.contains("virtio") {
            continue;
        }
        // "NN:  count [count...]  chip  hwirq  name": the counts are the numeric fields after
        // the label (one per CPU), the name is the last field.
        let total: u64 = w[1..].iter().map_while(|x| x.parse::<u64>().ok()).sum();
        irqs.insert(w[w.len() - 1].to_string(), total.into());
    }
    out.insert("irqs".into(), irqs.into());
    match driver_stats(&iface) {
        Ok(v) => {
            let m: serde_json::Map<String, serde_json::Value> =
                v.into_iter().map(|(k, x)| (k, x.into())).collect();
            out.insert("eth".into(), m.into());
        }
        Err(e) => {
            out.insert(
                "eth_error".into(),
                format!("ETHTOOL_GSTATS on {iface}: {e}").into(),
            );
        }
    }
    // Packets each way from the device counters: virtio_net of 7.x keeps its per-queue packet
    // counts out of the ethtool strings (they moved to netlink queue stats).
    for dir in ["rx", "tx"] {
        let p = format!("/sys/class/net/{iface}/statistics/{dir}_packets");
        if let Some(v) = std::fs::read_to_string(&p)
            .ok()
            .and_then(|t| t.trim().parse::<u64>().ok())
        {
            out.insert(format!("dev_{dir}_packets"), v.into());
        }
    }
    // Run time of every thread of the process (/proc/PID/schedstat is the main thread's only,
    // which in `rr-server --threads N` just waits for the others).
    let mut sched = serde_json::Map::new();
    // Voluntary context switches of every thread (/proc/PID/task/*/status): the times the
    // server went to sleep (an epoll_wait, io_uring_enter or poll that blocked).
    let mut vol = serde_json::Map::new();
    for pid in args {
        let switches = |path: std::path::PathBuf| -> Option<u64> {
            std::fs::read_to_string(path)
                .ok()?
                .lines()
                .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))?
                .trim()
                .parse()
                .ok()
        };
        let v: Vec<u64> = std::fs::read_dir(format!("/proc/{pid}/task"))
            .map(|d| d.filter_map(|e| switches(e.ok()?.path().join("status"))).collect())
            .unwrap_or_default();
        if !v.is_empty() {
            vol.insert(pid.clone(), v.iter().sum::<u64>().into());
        }
        let run_ns = |path: std::path::PathBuf| -> Option<u64> {
            std::fs::read_to_string(path)
                .ok()?
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        };
        let tasks: Vec<u64> = std::fs::read_dir(format!("/proc/{pid}/task"))
            .map(|d| {
                d.filter_map(|e| run_ns(e.ok()?.path().join("schedstat")))
                    .collect()
            })
            .unwrap_or_default();
        if !tasks.is_empty() {
            sched.insert(pid, tasks.iter().sum::<u64>().into());
        } else if let Some(ns) = run_ns(format!("/proc/{pid}/schedstat").into()) {
            sched.insert(pid, ns.into());
        }
    }
    out.insert("sched_ns".into(), sched.into());
    out.insert("vol_switches".into(), vol.into());
    println!("VMT-STATS {}", serde_json::Value::Object(out));
}
