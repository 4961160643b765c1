//! The load generator's modes against the server: open loop, a refused connect, connection
//! churn and storms, and the (ignored) loopback baseline.

use std::net::SocketAddrV4;
use std::time::{Duration, Instant};

use rr_load::{Client, ClientConfig, EchoWorkload, LoadMode};
use stack::codec::LengthPrefixed;
use stack::rr::{Echo, ServerConfig};

use super::{assert_clean, client_cfg, run_client, spawn_server, spawn_server_on, Backend, MAX_FRAME};

/// Open loop at a modest rate: the schedule (not the responses) paces the requests, and
/// the expected count completes.
#[test]
fn open_loop_completes_schedule() {
    let server = spawn_server(LengthPrefixed::new(MAX_FRAME), Echo, ServerConfig::default());
    let cfg = client_cfg(server.addr, 4, LoadMode::OpenLoop { rate: 2000.0 }, 1000)
        .with_duration(Duration::from_secs(3));
    let started = Instant::now();
    let report = run_client(LengthPrefixed::new(MAX_FRAME), EchoWorkload::fixed(64), cfg);
    let elapsed = started.elapsed();
    assert_clean(&report, 1000);
    // 1000 requests at 2000/s are scheduled over 0.5 s. Finishing much earlier would mean the
    // generator did not follow the schedule.
    assert!(report.duration >= Duration::from_millis(450), "{report}");
    assert!(elapsed < Duration::from_secs(3), "took {elapsed:?}");
    let (stats, _) = server.finish();
    assert_eq!(stats.requests, 1000);
    assert_eq!(stats.accepted, 4);
}

/// A connect to a port where nothing listens fails cleanly instead of hanging.
#[test]
fn connect_failure_is_reported() {
    on_backend!(|T| connect_failure::<T>())
}

fn connect_failure<T: Backend>() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let addr = SocketAddrV4::new(std::net::Ipv4Addr::LOCALHOST, port);
    let transport = T::open();
    let cfg = ClientConfig::new(addr).with_connect_timeout(Duration::from_secs(2));
    let err = Client::new(transport, LengthPrefixed::default(), EchoWorkload::fixed(8), cfg).run().unwrap_err();
    assert!(err.to_string().contains("0 of 1"), "{err}");
}

/// Baseline numbers, not a correctness test:
/// `cargo test --release -p stack --test kernel_rr -- --ignored --nocapture baseline`, and for
/// io_uring `cargo test --release -p stack --features uring --test uring_rr -- --ignored
/// --nocapture baseline`.
#[test]
#[ignore]
fn baseline_loopback_rr() {
    let secs = std::env::var("RR_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(3);
    // RR_SPIN=1: both sides poll with a zero timeout instead of sleeping (in epoll_wait, or in
    // io_uring_enter).
    let spin = std::env::var("RR_SPIN").is_ok_and(|v| v == "1");
    for (conns, depth, size) in [(1, 1, 64), (16, 1, 64), (16, 4, 64), (16, 1, 4096)] {
        let server_cfg = ServerConfig::default().with_poll_timeout(spin.then_some(Duration::ZERO));
        let server = spawn_server(LengthPrefixed::new(MAX_FRAME), Echo, server_cfg);
        let cfg = ClientConfig::new(server.addr)
            .with_connections(conns)
            .with_mode(LoadMode::ClosedLoop { depth })
            .with_duration(Duration::from_secs(secs))
            .with_busy_poll(spin);
        let (t0, process0, machine0) = (Instant::now(), process_cpu(), machine_busy());
        let report = run_client(LengthPrefixed::new(MAX_FRAME), EchoWorkload::fixed(size), cfg);
        let (wall, process, machine) =
            (t0.elapsed(), process_cpu() - process0, machine_busy().saturating_sub(machine0));
        let cores = |cpu: Duration| cpu.as_secs_f64() / wall.as_secs_f64().max(1e-9);
        server.finish();
        assert_eq!(report.errors, 0);
        println!(
            "conns {conns:>3} depth {depth} size {size:>5}: {report} | cpu: process {:.2} cores, machine {:.2} cores",
            cores(process),
            cores(machine)
        );
    }
}

/// User + system CPU time of this process, all threads (the server thread and the client).
fn process_cpu() -> Duration {
    // SAFETY: an all-zero rusage is a valid value to be overwritten.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a valid, writable rusage.
    assert_eq!(unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) }, 0, "getrusage");
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// Busy time of all CPUs since boot (user, nice, system, irq, softirq, steal of /proc/stat's
/// `cpu` line): loopback's softirq work, which no process is charged for, shows up only here.
fn machine_busy() -> Duration {
    let text = std::fs::read_to_string("/proc/stat").expect("/proc/stat");
    let line = text.lines().find(|l| l.starts_with("cpu ")).expect("a 'cpu' line in /proc/stat");
    let cols: Vec<u64> = line.split_whitespace().skip(1).map(|c| c.parse().expect("numeric /proc/stat")).collect();
    let ticks: u64 = [0, 1, 2, 5, 6, 7].iter().filter_map(|&i| cols.get(i)).sum();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Duration::from_nanos(ticks * 1_000_000_000 / hz)
}

/// Connection churn and storms: every connection opened, answered once, closed, and counted.
#[test]
fn churn_and_storm_open_answer_and_close_every_connection() {
    on_backend!(|T| churn_and_storm::<T>())
}

fn churn_and_storm<T: Backend>() {
    use rr_load::{Churn, ChurnConfig, ChurnPattern};
    let server = spawn_server_on::<T, _, _>(LengthPrefixed::new(MAX_FRAME), Echo, ServerConfig::default());
    for (pattern, concurrency) in [(ChurnPattern::Churn, 8), (ChurnPattern::Storm, 100)] {
        let cfg = ChurnConfig::new(server.addr)
            .with_concurrency(concurrency)
            .with_pattern(pattern)
            .with_duration(Duration::from_secs(10))
            .with_max_connections(Some(300));
        let transport = T::open();
        let mut churn = Churn::new(transport, LengthPrefixed::new(MAX_FRAME), EchoWorkload::fixed(32), cfg);
        let r = churn.run().expect("churn run failed");
        eprintln!("{pattern:?}: {r}");
        assert_eq!((r.errors, r.lost, r.failed_connects), (0, 0, 0), "{r}");
        // A storm finishes its wave: 300 in waves of 100.
        assert_eq!(r.requests, 300, "{r}");
        assert_eq!(r.opened, 300, "{r}");
        assert_eq!((r.setup.len(), r.latency.len()), (300, 300));
        assert!(r.setup.max() <= r.latency.max());
    }
    let (stats, _) = server.finish();
    assert_eq!((stats.accepted, stats.requests), (600, 600), "{stats:?}");
}
