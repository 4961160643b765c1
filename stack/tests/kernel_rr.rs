//! End-to-end request/response over the kernel backend on loopback: a `Server` in a thread,
//! a `Client` in the test thread. Every run is bounded by a request count *and* a duration.

use std::io::{Read, Write};
use std::net::{SocketAddrV4, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use rr_load::{Client, ClientConfig, ClientReport, EchoWorkload, FnWorkload, LoadMode, Workload};
use stack::codec::{Codec, LengthPrefixed, Lines, Stream};
use stack::kernel::{KernelConfig, KernelTransport};
use stack::rr::{Echo, Handler, Kv, KvRequest, KvResponse, KvStatus, Server, ServerConfig, ServerStats};

const MAX_FRAME: usize = 1 << 20;

/// Counts allocations per thread, to check that the request path does not allocate.
struct CountingAlloc;

thread_local! {
    // `const` init and no destructor: accessing it never allocates (no recursion).
    static ALLOCS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

unsafe impl std::alloc::GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        unsafe { std::alloc::System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        unsafe { std::alloc::System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new_size: usize) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        unsafe { std::alloc::System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: CountingAlloc = CountingAlloc;

fn thread_allocs() -> u64 {
    ALLOCS.with(|c| c.get())
}

struct RunningServer<H> {
    addr: SocketAddrV4,
    stop: Arc<AtomicBool>,
    /// Stats, handler, and allocations made by the server thread while serving.
    handle: JoinHandle<(ServerStats, H, u64)>,
}

impl<H> RunningServer<H> {
    fn finish(self) -> (ServerStats, H) {
        let (stats, handler, _) = self.finish_counting();
        (stats, handler)
    }

    fn finish_counting(self) -> (ServerStats, H, u64) {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().expect("server thread panicked")
    }
}

fn spawn_server<C, H>(codec: C, handler: H, cfg: ServerConfig) -> RunningServer<H>
where
    C: Codec + Clone + Send + 'static,
    H: Handler + Send + 'static,
{
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel();
    let stop2 = stop.clone();
    let handle = thread::spawn(move || {
        let transport = KernelTransport::new(KernelConfig::default()).unwrap();
        let mut server = Server::new(transport, codec, handler, cfg).unwrap();
        tx.send(server.local_addr().unwrap()).unwrap();
        // Safety net: a test that forgets to stop the server must not hang the suite.
        let limit = Instant::now() + Duration::from_secs(60);
        let allocs = thread_allocs();
        server.run_until(|| stop2.load(Ordering::Relaxed) || Instant::now() > limit).unwrap();
        let allocs = thread_allocs() - allocs;
        let stats = server.stats();
        (stats, server.into_parts().1, allocs)
    });
    let addr = rx.recv_timeout(Duration::from_secs(5)).expect("server did not start");
    RunningServer { addr, stop, handle }
}

fn client_cfg(addr: SocketAddrV4, connections: usize, mode: LoadMode, max_requests: u64) -> ClientConfig {
    ClientConfig {
        connections,
        mode,
        duration: Duration::from_secs(10),
        max_requests: Some(max_requests),
        ..ClientConfig::new(addr)
    }
}

fn run_client<C: Codec + Clone, W: Workload>(codec: C, workload: W, cfg: ClientConfig) -> ClientReport {
    let transport = KernelTransport::new(KernelConfig::default()).unwrap();
    Client::new(transport, codec, workload, cfg).run().expect("client run failed")
}

fn assert_clean(report: &ClientReport, expected: u64) {
    assert_eq!(report.errors, 0, "{report}");
    assert_eq!(report.lost, 0, "{report}");
    assert_eq!(report.requests, expected, "{report}");
    assert_eq!(report.latency.len(), expected);
}

/// Random 1 B..64 KiB echo over length-prefixed framing, every response compared byte-exact.
fn echo_matrix(connections: usize, requests: u64) {
    let server = spawn_server(LengthPrefixed::new(MAX_FRAME), Echo, ServerConfig::default());
    for depth in [1, 4] {
        let workload = EchoWorkload::random(1, 64 * 1024, 7 + depth as u64);
        let cfg = client_cfg(server.addr, connections, LoadMode::ClosedLoop { depth }, requests);
        let report = run_client(LengthPrefixed::new(MAX_FRAME), workload, cfg);
        assert_clean(&report, requests);
        assert_eq!(report.connections, connections);
        eprintln!("conns {connections} depth {depth}: {report}");
    }
    let (stats, _) = server.finish();
    assert_eq!(stats.requests, 2 * requests);
    assert_eq!(stats.accepted, 2 * connections as u64);
    assert_eq!(stats.protocol_errors + stats.io_errors, 0, "{stats:?}");
}

#[test]
fn echo_1_connection() {
    echo_matrix(1, 400);
}

#[test]
fn echo_16_connections() {
    echo_matrix(16, 1500);
}

#[test]
fn echo_256_connections() {
    echo_matrix(256, 3000);
}

/// RFC 862 style: no framing at all. The client recovers boundaries from the request
/// lengths, and the server echoes whatever chunks it reads.
#[test]
fn echo_unframed_stream() {
    let server = spawn_server(Stream, Echo, ServerConfig::default());
    let cfg = client_cfg(server.addr, 4, LoadMode::ClosedLoop { depth: 4 }, 2000);
    let report = run_client(Stream, EchoWorkload::random(1, 16 * 1024, 3), cfg);
    assert_clean(&report, 2000);
    server.finish();
}

#[test]
fn echo_lines() {
    let server = spawn_server(Lines::new(256), Echo, ServerConfig::default());
    let workload = FnWorkload::new(
        |conn, seq, out: &mut BytesMut| out.extend_from_slice(format!("conn {conn} line {seq}").as_bytes()),
        |_conn, req: &[u8], resp: &[u8]| req == resp,
    );
    let cfg = client_cfg(server.addr, 3, LoadMode::ClosedLoop { depth: 8 }, 3000);
    let report = run_client(Lines::new(256), workload, cfg);
    assert_clean(&report, 3000);
    server.finish();
}

/// Each connection alternates SET k / GET k on its own keys, so FIFO order per connection
/// makes every GET's answer predictable even with pipelining.
#[test]
fn kv_set_get_pipelined() {
    let server = spawn_server(LengthPrefixed::new(MAX_FRAME), Kv::new(), ServerConfig::default());
    let value_of = |conn: usize, n: u64| format!("value-{conn}-{n}").repeat(1 + (n % 5) as usize);
    let generate = move |conn: usize, seq: u64, out: &mut BytesMut| {
        let key = format!("key-{conn}-{}", seq / 2);
        let value = value_of(conn, seq / 2);
        let req = if seq.is_multiple_of(2) {
            KvRequest::Set { key: key.as_bytes(), value: value.as_bytes() }
        } else {
            KvRequest::Get { key: key.as_bytes() }
        };
        req.encode(out).unwrap();
    };
    let check = move |conn: usize, req: &[u8], resp: &[u8]| {
        let Ok(resp) = KvResponse::parse(resp) else { return false };
        match KvRequest::parse(req) {
            Ok(KvRequest::Set { .. }) => resp.status == KvStatus::Ok && resp.value.is_empty(),
            Ok(KvRequest::Get { key }) => {
                let n: u64 = std::str::from_utf8(key).unwrap().rsplit('-').next().unwrap().parse().unwrap();
                resp.status == KvStatus::Ok && resp.value == value_of(conn, n).as_bytes()
            }
            _ => false,
        }
    };
    let cfg = client_cfg(server.addr, 8, LoadMode::ClosedLoop { depth: 4 }, 4000);
    let report = run_client(LengthPrefixed::new(MAX_FRAME), FnWorkload::new(generate, check), cfg);
    assert_clean(&report, 4000);
    let (stats, kv) = server.finish();
    assert_eq!(stats.requests, 4000);
    assert_eq!(kv.len(), 2000, "one key per SET");
    assert_eq!(kv.get(b"key-0-0").map(|v| &v[..]), Some(value_of(0, 0).as_bytes()));

    // Misses, deletes and a malformed request, over the wire.
    let server = spawn_server(LengthPrefixed::new(MAX_FRAME), Kv::new(), ServerConfig::default());
    let script: Vec<(Vec<u8>, KvStatus, &[u8])> = {
        let enc = |r: KvRequest<'_>| {
            let mut b = BytesMut::new();
            r.encode(&mut b).unwrap();
            b.to_vec()
        };
        vec![
            (enc(KvRequest::Get { key: b"a" }), KvStatus::NotFound, b""),
            (enc(KvRequest::Set { key: b"a", value: b"1" }), KvStatus::Ok, b""),
            (enc(KvRequest::Get { key: b"a" }), KvStatus::Ok, b"1"),
            (enc(KvRequest::Del { key: b"a" }), KvStatus::Ok, b""),
            (enc(KvRequest::Del { key: b"a" }), KvStatus::NotFound, b""),
            (b"Zjunk".to_vec(), KvStatus::BadRequest, b""),
        ]
    };
    let n = script.len() as u64;
    let reqs: Vec<Vec<u8>> = script.iter().map(|s| s.0.clone()).collect();
    // One connection answers in order, so the n-th check belongs to the n-th script step.
    let mut step = 0;
    let workload = FnWorkload::new(
        move |_conn, seq, out: &mut BytesMut| out.extend_from_slice(&reqs[seq as usize % reqs.len()]),
        move |_conn, req: &[u8], resp: &[u8]| {
            let (sent, status, value) = &script[step % script.len()];
            step += 1;
            req == &sent[..] && KvResponse::parse(resp) == Ok(KvResponse { status: *status, value })
        },
    );
    let report = run_client(
        LengthPrefixed::new(MAX_FRAME),
        workload,
        client_cfg(server.addr, 1, LoadMode::ClosedLoop { depth: 1 }, n),
    );
    assert_clean(&report, n);
    server.finish();
}

/// A peer announcing a frame over the limit is disconnected; everyone else carries on.
#[test]
fn oversized_frame_closes_only_that_connection() {
    let server = spawn_server(LengthPrefixed::new(64 * 1024), Echo, ServerConfig::default());
    let addr = server.addr;
    let bad = thread::spawn(move || {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        // A valid request first (answered), then a 4 GiB - 1 length header.
        s.write_all(&[0, 0, 0, 2, b'h', b'i']).unwrap();
        let mut resp = [0u8; 6];
        s.read_exact(&mut resp).unwrap();
        assert_eq!(&resp, &[0, 0, 0, 2, b'h', b'i']);
        s.write_all(&[0xff, 0xff, 0xff, 0xff, 1, 2, 3]).unwrap();
        let mut rest = Vec::new();
        // EOF (Ok) or reset (Err) both mean the server closed us. A timeout would mean it did not.
        match s.read_to_end(&mut rest) {
            Ok(_) => assert!(rest.is_empty()),
            Err(e) => assert_ne!(e.kind(), std::io::ErrorKind::WouldBlock, "server kept the connection open"),
        }
    });
    let cfg = client_cfg(server.addr, 8, LoadMode::ClosedLoop { depth: 2 }, 2000);
    let report = run_client(LengthPrefixed::new(64 * 1024), EchoWorkload::random(1, 4096, 11), cfg);
    assert_clean(&report, 2000);
    bad.join().unwrap();
    let (stats, _) = server.finish();
    assert_eq!(stats.protocol_errors, 1, "{stats:?}");
    assert_eq!(stats.requests, 2001);
}

/// A client that pipelines far more than the server's write high-water mark before reading
/// anything. The server must pause reading, drain on Writable, resume, and lose nothing.
#[test]
fn backpressure_pauses_and_resumes_reading() {
    let cfg = ServerConfig { write_high_water: 64 * 1024, ..ServerConfig::default() };
    let server = spawn_server(LengthPrefixed::new(MAX_FRAME), Echo, cfg);
    let count = 3000usize;
    let mut stream = TcpStream::connect(server.addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut writer = stream.try_clone().unwrap();
    let sender = thread::spawn(move || {
        let mut codec = LengthPrefixed::new(MAX_FRAME);
        let mut wire = BytesMut::new();
        for i in 0..count {
            codec.encode(&[(i % 251) as u8; 1000], &mut wire);
        }
        writer.write_all(&wire).unwrap();
    });
    // Reading only starts after a pause, so the server's send buffer and its wbuf fill up first.
    thread::sleep(Duration::from_millis(200));
    let mut codec = LengthPrefixed::new(MAX_FRAME);
    let mut buf = BytesMut::new();
    let mut chunk = vec![0u8; 64 * 1024];
    let mut got = 0;
    while got < count {
        let n = stream.read(&mut chunk).unwrap();
        assert!(n > 0, "server closed early after {got} responses");
        buf.extend_from_slice(&chunk[..n]);
        while let Some(msg) = codec.decode(&mut buf).unwrap() {
            assert_eq!(&msg[..], &[(got % 251) as u8; 1000][..], "response {got}");
            got += 1;
        }
    }
    sender.join().unwrap();
    drop(stream);
    let (stats, _) = server.finish();
    assert_eq!(stats.requests, count as u64);
}

/// Ten times more requests must not mean more allocations: buffers are reused and only
/// grow (amortised), on both the server and the client side.
#[test]
fn hot_path_does_not_allocate_per_request() {
    let mut measured = Vec::new();
    for requests in [2_000u64, 20_000] {
        let server = spawn_server(LengthPrefixed::new(MAX_FRAME), Echo, ServerConfig::default());
        let transport = KernelTransport::new(KernelConfig::default()).unwrap();
        let cfg = client_cfg(server.addr, 4, LoadMode::ClosedLoop { depth: 4 }, requests);
        let mut client = Client::new(transport, LengthPrefixed::new(MAX_FRAME), EchoWorkload::random(1, 2048, 5), cfg);
        let before = thread_allocs();
        let report = client.run().unwrap();
        let client_allocs = thread_allocs() - before;
        assert_clean(&report, requests);
        let (_, _, server_allocs) = server.finish_counting();
        measured.push((client_allocs, server_allocs));
    }
    let [(c_small, s_small), (c_big, s_big)] = measured[..] else { unreachable!() };
    // Allow a little slack for amortised growth and the connection setup/teardown.
    assert!(c_big <= c_small + 32, "client allocs: {c_small} for 2k requests, {c_big} for 20k");
    assert!(s_big <= s_small + 32, "server allocs: {s_small} for 2k requests, {s_big} for 20k");
}

/// Open loop at a modest rate: the schedule (not the responses) paces the requests, and
/// the expected count completes.
#[test]
fn open_loop_completes_schedule() {
    let server = spawn_server(LengthPrefixed::new(MAX_FRAME), Echo, ServerConfig::default());
    let cfg = ClientConfig {
        duration: Duration::from_secs(3),
        ..client_cfg(server.addr, 4, LoadMode::OpenLoop { rate: 2000.0 }, 1000)
    };
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
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let addr = SocketAddrV4::new(std::net::Ipv4Addr::LOCALHOST, port);
    let transport = KernelTransport::new(KernelConfig::default()).unwrap();
    let cfg = ClientConfig { connect_timeout: Duration::from_secs(2), ..ClientConfig::new(addr) };
    let err = Client::new(transport, LengthPrefixed::default(), EchoWorkload::fixed(8), cfg).run().unwrap_err();
    assert!(err.to_string().contains("0 of 1"), "{err}");
}

/// Baseline numbers, not a correctness test:
/// `cargo test --release -p stack --test kernel_rr -- --ignored --nocapture baseline`.
#[test]
#[ignore]
fn baseline_loopback_rr() {
    let secs = std::env::var("RR_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(3);
    // RR_SPIN=1: both sides poll with a zero timeout instead of sleeping in epoll_wait.
    let spin = std::env::var("RR_SPIN").is_ok_and(|v| v == "1");
    for (conns, depth, size) in [(1, 1, 64), (16, 1, 64), (16, 4, 64), (16, 1, 4096)] {
        let server_cfg = ServerConfig { poll_timeout: spin.then_some(Duration::ZERO), ..ServerConfig::default() };
        let server = spawn_server(LengthPrefixed::new(MAX_FRAME), Echo, server_cfg);
        let cfg = ClientConfig {
            connections: conns,
            mode: LoadMode::ClosedLoop { depth },
            duration: Duration::from_secs(secs),
            busy_poll: spin,
            ..ClientConfig::new(server.addr)
        };
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

/// Answers `slow X` later (from `tick`, after `delay`) with `X-late`, everything else at once;
/// counts opens and closes.
struct Deferred {
    delay: Duration,
    waiting: std::collections::VecDeque<(stack::ConnId, Instant, Vec<u8>)>,
    opened: u64,
    closed: u64,
}

impl Handler for Deferred {
    type Conn = ();

    fn handle(&mut self, conn: stack::ConnId, _: &mut (), req: &[u8], resp: &mut BytesMut) -> stack::rr::Reply {
        if let Some(x) = req.strip_prefix(b"slow ") {
            let mut late = x.to_vec();
            late.extend_from_slice(b"-late");
            self.waiting.push_back((conn, Instant::now() + self.delay, late));
            return stack::rr::Reply::Pending;
        }
        resp.extend_from_slice(req);
        stack::rr::Reply::Done
    }

    fn on_open(&mut self, _conn: stack::ConnId, _peer: Option<std::net::SocketAddrV4>) {
        self.opened += 1;
    }

    fn on_close(&mut self, _conn: stack::ConnId, _: ()) {
        self.closed += 1;
    }

    fn tick(&mut self, done: &mut stack::rr::Completions) {
        while self.waiting.front().is_some_and(|w| w.1 <= Instant::now()) {
            let (conn, _, payload) = self.waiting.pop_front().unwrap();
            done.complete(conn, &payload);
        }
    }
}

#[test]
fn pending_replies_complete_later_in_order_without_blocking_others() {
    let handler = Deferred { delay: Duration::from_millis(300), waiting: Default::default(), opened: 0, closed: 0 };
    let server = spawn_server(Lines::new(256), handler, ServerConfig::default());
    let read_line = |r: &mut std::io::BufReader<TcpStream>| {
        let mut l = String::new();
        std::io::BufRead::read_line(r, &mut l).unwrap();
        l.trim_end().to_string()
    };
    let a = TcpStream::connect(server.addr).unwrap();
    a.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut ra = std::io::BufReader::new(a.try_clone().unwrap());
    // Pipelined: the slow one holds back only what comes after it on this connection.
    (&a).write_all(b"one\nslow two\nthree\n").unwrap();
    assert_eq!(read_line(&mut ra), "one");
    let t0 = Instant::now();
    let b = TcpStream::connect(server.addr).unwrap();
    b.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut rb = std::io::BufReader::new(b.try_clone().unwrap());
    (&b).write_all(b"other\n").unwrap();
    assert_eq!(read_line(&mut rb), "other");
    assert!(t0.elapsed() < Duration::from_millis(250), "another connection waited for the pending one");
    assert_eq!(read_line(&mut ra), "two-late");
    assert!(t0.elapsed() >= Duration::from_millis(200), "completed before its time");
    assert_eq!(read_line(&mut ra), "three");
    // A connection that closes with a reply still pending gets it, then the close.
    (&a).write_all(b"slow four\n").unwrap();
    a.shutdown(std::net::Shutdown::Write).unwrap();
    assert_eq!(read_line(&mut ra), "four-late");
    assert_eq!(read_line(&mut ra), "", "EOF after the last reply");
    drop((b, rb));
    std::thread::sleep(Duration::from_millis(100));
    let (stats, h) = server.finish();
    assert_eq!((h.opened, h.closed, stats.requests), (2, 2, 5), "{stats:?}");
    assert!(h.waiting.is_empty());
}

/// Connection churn and storms: every connection opened, answered once, closed, and counted.
#[test]
fn churn_and_storm_open_answer_and_close_every_connection() {
    use rr_load::{Churn, ChurnConfig, ChurnPattern};
    let server = spawn_server(LengthPrefixed::new(MAX_FRAME), Echo, ServerConfig::default());
    for (pattern, concurrency) in [(ChurnPattern::Churn, 8), (ChurnPattern::Storm, 100)] {
        let cfg = ChurnConfig {
            concurrency,
            pattern,
            duration: Duration::from_secs(10),
            max_connections: Some(300),
            ..ChurnConfig::new(server.addr)
        };
        let transport = KernelTransport::new(KernelConfig::default()).unwrap();
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

/// Counts each connection's requests in the state the server keeps for it, and records
/// what `on_close` got back.
#[derive(Default)]
struct Counting {
    closed: Vec<(u64, Option<SocketAddrV4>)>,
    /// Reply with this many bytes instead of the request (0: echo).
    reply: usize,
}

#[derive(Default)]
struct PerConn {
    requests: u64,
    peer: Option<SocketAddrV4>,
}

impl Handler for Counting {
    type Conn = PerConn;

    fn handle(&mut self, _: stack::ConnId, st: &mut PerConn, req: &[u8], resp: &mut BytesMut) -> stack::rr::Reply {
        st.requests += 1;
        if self.reply == 0 {
            resp.extend_from_slice(req);
        } else {
            resp.resize(self.reply, b'x');
        }
        stack::rr::Reply::Done
    }

    fn on_open(&mut self, _: stack::ConnId, peer: Option<SocketAddrV4>) -> PerConn {
        PerConn { requests: 0, peer }
    }

    fn on_close(&mut self, _: stack::ConnId, st: PerConn) {
        self.closed.push((st.requests, st.peer));
    }
}

/// Steps `server` until it has `n` connections (at most 5 s).
fn accept_n<C: Codec + Clone, H: Handler>(server: &mut Server<KernelTransport, C, H>, n: usize) {
    let end = Instant::now() + Duration::from_secs(5);
    while server.connections() < n {
        assert!(Instant::now() < end, "{} of {n} connections accepted", server.connections());
        server.step(Some(Duration::from_millis(5))).unwrap();
    }
}

/// The case a new user hit: requests received but not yet read when the server stops. A
/// `shutdown` answers all 2,000, then the client sees a FIN (not a reset); `on_close` gets
/// the connection's state back with its peer address.
#[test]
fn shutdown_answers_what_was_received_then_closes_with_fin() {
    let t = KernelTransport::new(KernelConfig::default()).unwrap();
    let cfg = ServerConfig { port: 0, ..ServerConfig::default() };
    let mut server = Server::new(t, Lines::new(64), Counting::default(), cfg).unwrap();
    let addr = server.local_addr().unwrap();
    let mut client = TcpStream::connect(addr).unwrap();
    client.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let client_addr = match client.local_addr().unwrap() {
        std::net::SocketAddr::V4(a) => a,
        a => panic!("{a}"),
    };
    accept_n(&mut server, 1);
    // 2,000 pipelined requests, all in the server's receive buffer before it stops.
    let mut reqs = Vec::new();
    for i in 0..2000 {
        reqs.extend_from_slice(format!("req {i}\n").as_bytes());
    }
    client.write_all(&reqs).unwrap();
    thread::sleep(Duration::from_millis(100));
    // Reads to EOF, then closes (drops) its end.
    let reader = thread::spawn(move || {
        let mut got = Vec::new();
        let r = client.read_to_end(&mut got);
        (r.map_err(|e| e.kind()), got)
    });
    let done = server.shutdown(Duration::from_secs(10)).unwrap();
    let (r, got) = reader.join().unwrap();
    assert!(r.is_ok(), "the client's read ended with {r:?} after {} bytes (a reset?)", got.len());
    assert_eq!(got, reqs, "every request answered, in order, then EOF");
    assert_eq!((done.open, done.graceful, done.forced, done.refused, done.answered), (1, 1, 0, 0, 2000), "{done:?}");
    assert_eq!(done.unanswered_bytes, 0, "{done:?}");
    let h = server.handler();
    assert_eq!(h.closed, vec![(2000, Some(client_addr))]);
    assert_eq!(server.connections(), 0);
}

/// The same with responses far larger than the requests: 2,000 requests received, 32 MiB of
/// responses (more than loopback's socket buffers hold) against a 64 KiB write high-water
/// mark. All are answered as the client reads.
#[test]
fn shutdown_answers_past_the_write_high_water_mark() {
    let t = KernelTransport::new(KernelConfig::default()).unwrap();
    let cfg = ServerConfig { write_high_water: 64 << 10, ..ServerConfig::default() };
    let mut server = Server::new(t, Lines::new(64), Counting { reply: 16383, ..Counting::default() }, cfg).unwrap();
    let mut client = TcpStream::connect(server.local_addr().unwrap()).unwrap();
    client.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    accept_n(&mut server, 1);
    for i in 0..2000 {
        client.write_all(format!("{i}\n").as_bytes()).unwrap();
    }
    thread::sleep(Duration::from_millis(100));
    let reader = thread::spawn(move || {
        let mut got = Vec::new();
        let r = client.read_to_end(&mut got);
        (r.map_err(|e| e.kind()), got.len(), got.iter().filter(|&&b| b == b'\n').count())
    });
    let done = server.shutdown(Duration::from_secs(10)).unwrap();
    let (r, bytes, lines) = reader.join().unwrap();
    assert_eq!((r, bytes, lines), (Ok(2000 * 16384), 2000 * 16384, 2000), "{done:?}");
    assert_eq!((done.graceful, done.answered, done.unanswered_bytes), (1, 2000, 0), "{done:?}");
}

/// A peer that never closes keeps its connection until the deadline, which then closes it
/// (forced); one that closes is graceful; a connection that arrives during the shutdown is
/// closed without being served or opened.
#[test]
fn shutdown_forces_at_the_deadline_and_refuses_newcomers() {
    let t = KernelTransport::new(KernelConfig::default()).unwrap();
    let mut server = Server::new(t, Lines::new(64), Counting::default(), ServerConfig::default()).unwrap();
    let addr = server.local_addr().unwrap();
    let mut polite = TcpStream::connect(addr).unwrap();
    let mut stubborn = TcpStream::connect(addr).unwrap();
    accept_n(&mut server, 2);
    polite.write_all(b"a\nb\n").unwrap();
    stubborn.write_all(b"c\n").unwrap();
    thread::sleep(Duration::from_millis(50));
    // The polite client reads to EOF and closes; the stubborn one reads its answer and holds on.
    let go = Arc::new(AtomicBool::new(false));
    let go2 = go.clone();
    let polite_t = thread::spawn(move || {
        polite.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut got = Vec::new();
        let r = polite.read_to_end(&mut got).map_err(|e| e.kind());
        (r, got)
    });
    let late_t = thread::spawn(move || {
        while !go2.load(Ordering::Relaxed) {
            thread::sleep(Duration::from_millis(1));
        }
        // Arrives while the server lingers for the stubborn client.
        let mut late = TcpStream::connect(addr).unwrap();
        late.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let _ = late.write_all(b"never answered\n");
        let mut got = Vec::new();
        let _ = late.read_to_end(&mut got);
        got
    });
    let stubborn_t = thread::spawn(move || {
        stubborn.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut got = [0u8; 2];
        stubborn.read_exact(&mut got).unwrap();
        go.store(true, Ordering::Relaxed);
        let mut rest = Vec::new();
        let r = stubborn.read_to_end(&mut rest);
        // The stream goes back to the test, open, so the server sees no FIN from it.
        (got, r.map(|_| rest).map_err(|e| e.kind()), stubborn)
    });
    let t0 = Instant::now();
    let done = server.shutdown(Duration::from_millis(800)).unwrap();
    let took = t0.elapsed();
    let (r, got) = polite_t.join().unwrap();
    assert_eq!((r, &got[..]), (Ok(4), &b"a\nb\n"[..]));
    let (first, rest, _stubborn) = stubborn_t.join().unwrap();
    assert_eq!(&first, b"c\n");
    // It had the FIN after its answer: read_to_end ends with EOF, before the deadline.
    assert_eq!(rest, Ok(Vec::new()));
    let late = late_t.join().unwrap();
    assert!(late.is_empty(), "the late connection got {late:?}");
    assert!(took >= Duration::from_millis(700), "returned after {took:?}, before the deadline: {done:?}");
    assert_eq!((done.open, done.graceful, done.forced, done.answered), (2, 1, 1, 3), "{done:?}");
    assert_eq!(done.refused, 1, "{done:?}");
    let mut closed: Vec<u64> = server.handler().closed.iter().map(|c| c.0).collect();
    closed.sort();
    assert_eq!(closed, vec![1, 2], "on_close for both served connections, none for the late one");
}
