//! CPU-time accounting for benchmarks: what this process or thread used (getrusage), what
//! another process used (its threads' schedstat run time, or `/proc/<pid>/stat`), and how
//! busy the whole machine was (/proc/stat).
//! The machine view matters for a kernel-bypass stack: softirq work done by the kernel on our
//! behalf shows up there and in no per-process counter.

use std::io;
use std::ops::Sub;
use std::time::{Duration, Instant};

/// User + system CPU time of the calling process (all threads).
pub fn process_cpu() -> io::Result<Duration> {
    rusage(libc::RUSAGE_SELF)
}

/// User + system CPU time of the calling thread.
pub fn thread_cpu() -> io::Result<Duration> {
    rusage(libc::RUSAGE_THREAD)
}

fn rusage(who: libc::c_int) -> io::Result<Duration> {
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a valid, writable rusage.
    if unsafe { libc::getrusage(who, &mut ru) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    Ok(tv(ru.ru_utime) + tv(ru.ru_stime))
}

/// Kernel clock ticks per second (`USER_HZ`), the unit of /proc/stat and `/proc/<pid>/stat`.
pub fn clock_ticks_per_sec() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    // USER_HZ has been 100 on every Linux ABI. Fall back to it rather than fail.
    if hz > 0 {
        hz as u64
    } else {
        100
    }
}

fn ticks_to_duration(ticks: u64, hz: u64) -> Duration {
    Duration::from_nanos((u128::from(ticks) * 1_000_000_000 / u128::from(hz.max(1))) as u64)
}

fn invalid(what: &'static str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what)
}

/// Aggregate CPU time of all CPUs since boot, from the `cpu` line of /proc/stat.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MachineCpu {
    /// user + nice + system + irq + softirq + steal (guest time is already inside user).
    pub busy: Duration,
    /// idle + iowait.
    pub idle: Duration,
}

impl MachineCpu {
    pub fn total(&self) -> Duration {
        self.busy + self.idle
    }

    /// Fraction of all CPUs' time that was busy between `earlier` and `self` (0.0..=1.0).
    pub fn utilization_since(&self, earlier: &MachineCpu) -> f64 {
        let d = *self - *earlier;
        let total = d.total().as_secs_f64();
        if total > 0.0 {
            d.busy.as_secs_f64() / total
        } else {
            0.0
        }
    }
}

impl Sub for MachineCpu {
    type Output = MachineCpu;

    /// Saturating, so counters read out of order never panic.
    fn sub(self, rhs: MachineCpu) -> MachineCpu {
        MachineCpu { busy: self.busy.saturating_sub(rhs.busy), idle: self.idle.saturating_sub(rhs.idle) }
    }
}

/// Reads the machine-wide CPU counters from /proc/stat.
pub fn machine_cpu() -> io::Result<MachineCpu> {
    let text = std::fs::read_to_string("/proc/stat")?;
    parse_proc_stat(&text, clock_ticks_per_sec()).ok_or_else(|| invalid("no parsable 'cpu' line in /proc/stat"))
}

fn parse_proc_stat(text: &str, hz: u64) -> Option<MachineCpu> {
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let mut f = [0u64; 8];
    // Older kernels have fewer columns: missing ones count as 0. At least user..idle must be there.
    let mut n = 0;
    for (slot, field) in f.iter_mut().zip(line.split_whitespace().skip(1)) {
        *slot = field.parse().ok()?;
        n += 1;
    }
    if n < 4 {
        return None;
    }
    let [user, nice, system, idle, iowait, irq, softirq, steal] = f;
    Some(MachineCpu {
        busy: ticks_to_duration(user + nice + system + irq + softirq + steal, hz),
        idle: ticks_to_duration(idle + iowait, hz),
    })
}

/// CPU time of another process (all its live threads): the nanosecond run
/// time of each thread (`/proc/<pid>/task/*/schedstat`), or where that is
/// missing (no CONFIG_SCHED_INFO) user + system time from `/proc/<pid>/stat`.
///
/// The difference matters at light load: `/proc/<pid>/stat` counts in
/// ticks (10 ms), so a 4 s run of 20,000 requests at 16 us each is read to
/// within 0.5 us per request, a 3% step, as large as the differences
/// the light-load cases compare. Threads that exited are not counted in the
/// schedstat sum (rr-server's threads live as long as the process).
pub fn pid_cpu(pid: u32) -> io::Result<Duration> {
    match pid_run_time(pid) {
        Ok(Some(d)) => Ok(d),
        Ok(None) | Err(_) => pid_ticks(pid),
    }
}

/// The sum of the threads' schedstat run times; None if a thread has none.
fn pid_run_time(pid: u32) -> io::Result<Option<Duration>> {
    let mut ns = 0u64;
    for entry in std::fs::read_dir(format!("/proc/{pid}/task"))? {
        let path = entry?.path().join("schedstat");
        match std::fs::read_to_string(&path) {
            Ok(text) => match parse_schedstat(&text) {
                Some(n) => ns += n,
                None => return Ok(None),
            },
            // A thread that exited between the listing and the read.
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    Ok(Some(Duration::from_nanos(ns)))
}

/// The first field of a schedstat line: nanoseconds spent on a CPU.
fn parse_schedstat(text: &str) -> Option<u64> {
    text.split_whitespace().next()?.parse().ok()
}

/// User + system CPU time from `/proc/<pid>/stat` (tick resolution).
fn pid_ticks(pid: u32) -> io::Result<Duration> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let ticks = parse_pid_stat(&text).ok_or_else(|| invalid("unparsable /proc/<pid>/stat"))?;
    Ok(ticks_to_duration(ticks, clock_ticks_per_sec()))
}

/// utime + stime in ticks. The command name (field 2) may contain spaces and parentheses, so
/// fields are counted from the *last* ')'.
fn parse_pid_stat(text: &str) -> Option<u64> {
    let rest = &text[text.rfind(')')? + 1..];
    // After ')': field 3 (state) is index 0, so utime (14) is index 11 and stime (15) index 12.
    let mut fields = rest.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

/// A point-in-time reading of wall clock, process CPU and machine CPU. Subtract two to get
/// what a benchmark phase cost.
#[derive(Clone, Copy, Debug)]
pub struct CpuSnapshot {
    pub at: Instant,
    pub process: Duration,
    pub machine: MachineCpu,
}

/// The difference between two [`CpuSnapshot`]s.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CpuUsage {
    pub wall: Duration,
    pub process: Duration,
    pub machine: MachineCpu,
}

impl CpuSnapshot {
    pub fn now() -> io::Result<Self> {
        Ok(CpuSnapshot { at: Instant::now(), process: process_cpu()?, machine: machine_cpu()? })
    }

    pub fn since(&self, earlier: &CpuSnapshot) -> CpuUsage {
        CpuUsage {
            wall: self.at.saturating_duration_since(earlier.at),
            process: self.process.saturating_sub(earlier.process),
            machine: self.machine - earlier.machine,
        }
    }
}

impl CpuUsage {
    /// Process CPU in cores (1.0 = one core fully used) over the wall time.
    pub fn process_cores(&self) -> f64 {
        ratio(self.process, self.wall)
    }

    /// Machine-wide busy time in cores over the wall time.
    pub fn machine_cores(&self) -> f64 {
        ratio(self.machine.busy, self.wall)
    }
}

fn ratio(a: Duration, b: Duration) -> f64 {
    if b.is_zero() {
        0.0
    } else {
        a.as_secs_f64() / b.as_secs_f64()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Burns CPU until this thread has used at least `d` of it (bounded by a wall-clock limit).
    fn spin_for(d: Duration) {
        let start = thread_cpu().unwrap();
        let limit = Instant::now() + Duration::from_secs(5);
        let mut x = 0u64;
        while thread_cpu().unwrap() - start < d && Instant::now() < limit {
            for i in 0..10_000u64 {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
            }
        }
    }

    #[test]
    fn parses_proc_stat() {
        let text = "cpu  100 5 50 1000 20 3 7 2 40 0\ncpu0 1 2 3 4 5 6 7 8 9 10\nintr 1\n";
        let m = parse_proc_stat(text, 100).unwrap();
        assert_eq!(m.busy, Duration::from_millis((100 + 5 + 50 + 3 + 7 + 2) * 10));
        assert_eq!(m.idle, Duration::from_millis((1000 + 20) * 10));
        // Old kernels: only four columns.
        assert_eq!(parse_proc_stat("cpu 1 2 3 4\n", 100).unwrap().idle, Duration::from_millis(40));
        assert_eq!(parse_proc_stat("cpu 1 2\n", 100), None);
        assert_eq!(parse_proc_stat("cpu0 1 2 3 4\n", 100), None, "per-CPU lines are not the total");
        assert_eq!(parse_proc_stat("cpu 1 x 3 4\n", 100), None);
    }

    #[test]
    fn parses_schedstat() {
        assert_eq!(parse_schedstat("123456789 2000 17\n"), Some(123_456_789));
        assert_eq!(parse_schedstat(""), None);
        assert_eq!(parse_schedstat("x 1 2"), None);
    }

    #[test]
    fn parses_pid_stat_with_hostile_comm() {
        let text = "1234 (a) b) (c) S 1 2 3 4 5 6 7 8 9 10 300 45 0 0 20 0 1 0 100 0 0\n";
        assert_eq!(parse_pid_stat(text), Some(345));
        assert_eq!(parse_pid_stat("1234 (x) S 1 2"), None);
        assert_eq!(parse_pid_stat("garbage"), None);
    }

    #[test]
    fn live_counters_move() {
        let hz = clock_ticks_per_sec();
        assert!(hz > 0);
        let before = CpuSnapshot::now().unwrap();
        let t0 = thread_cpu().unwrap();
        spin_for(Duration::from_millis(50));
        let used = thread_cpu().unwrap() - t0;
        assert!(used >= Duration::from_millis(50), "thread cpu {used:?}");
        let after = CpuSnapshot::now().unwrap();
        let usage = after.since(&before);
        assert!(usage.process >= used, "process includes this thread");
        // /proc counters tick at USER_HZ, so allow a few ticks of slack.
        assert!(
            usage.machine.busy + Duration::from_millis(30) >= used,
            "machine {:?} vs thread {used:?}",
            usage.machine
        );
        assert!((0.0..=1.0).contains(&after.machine.utilization_since(&before.machine)));
        let me = pid_cpu(std::process::id()).unwrap();
        assert!(me >= used, "schedstat {me:?} vs thread {used:?}");
        let ticks = pid_ticks(std::process::id()).unwrap();
        assert!(ticks + Duration::from_millis(30) >= used, "/proc/self/stat {ticks:?} vs thread {used:?}");
        // The two agree to within a few ticks.
        let (a, b) = (pid_cpu(std::process::id()).unwrap(), pid_ticks(std::process::id()).unwrap());
        assert!(a.abs_diff(b) < Duration::from_millis(50), "schedstat {a:?} vs stat {b:?}");
    }
}
