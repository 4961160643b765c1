//! rr-server and rr-bench end to end in veth labs: the server runs under `ip netns exec` in
//! ns_a with each backend, rr-bench loads it from ns_b with each client backend, and the
//! server must exit 0 on SIGINT/SIGTERM with no XDP program left behind. Needs root.

mod common;
use common::{scratch, Proc};

use std::io::{Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddrV4, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use apps::{BenchResult, ServerSummary};
use xsk_lab::lab::{Lab, LabConfig, Netns};

const SERVER: &str = env!("CARGO_BIN_EXE_rr-server");
const BENCH: &str = env!("CARGO_BIN_EXE_rr-bench");

fn lab(tag: &str) -> Lab {
    // SAFETY: geteuid has no preconditions.
    assert_eq!(unsafe { libc::geteuid() }, 0, "this integration test needs root");
    xsk_lab::lab::sweep_stale(tag);
    let lab = Lab::new(&LabConfig::new(tag)).expect("lab");
    // Peers keep veth's default offloads (TX checksum on), as in every
    // container: the stack must serve their partial checksums.
    lab
}

/// An address on the lab subnet that the kernel does not have.
fn dedicated(lab: &Lab, host: u8) -> (Ipv4Addr, String) {
    let o = lab.addr_a.octets();
    let a = Ipv4Addr::new(o[0], o[1], o[2], host);
    (a, format!("{a}/{}", lab.prefix_len))
}

/// Starts rr-server in ns_a and waits until it listens.
/// Starts rr-server in ns_a and waits until it is ready. Its exit summary goes
/// to `dir/server.json`, where `stop_server` reads it.
fn start_server(lab: &Lab, dir: &Path, args: &[&str]) -> Proc {
    let ready = dir.join("ready");
    let json = dir.join("server.json");
    let mut all = vec!["--ready-file", ready.to_str().unwrap(), "--duration", "120s", "--json", json.to_str().unwrap()];
    all.extend_from_slice(args);
    let mut p = Proc::spawn(&lab.ns_a, SERVER, &all, dir, "server", Stdio::null());
    p.wait_file(&ready, Duration::from_secs(30));
    p
}

/// rr-server on the stack, on the dedicated address `cidr` of ns_a's veth.
fn start_xsk_server(lab: &Lab, dir: &Path, cidr: &str, service: &str, port: u16) -> Proc {
    let port = port.to_string();
    start_server(lab, dir, &["--backend", "xsk", "--iface", &lab.if_a, "--addr", cidr, "--service", service, "--port", &port])
}

/// rr-server on kernel TCP through epoll, on ns_a's own address.
fn start_kernel_server(lab: &Lab, dir: &Path, service: &str, port: u16) -> Proc {
    start_kernel_backend(lab, dir, "kernel", service, port)
}

/// rr-server on kernel TCP through `backend` ("kernel": epoll, or "uring"), on ns_a's own address.
fn start_kernel_backend(lab: &Lab, dir: &Path, backend: &str, service: &str, port: u16) -> Proc {
    let (addr, port) = (lab.addr_a.to_string(), port.to_string());
    start_server(lab, dir, &["--backend", backend, "--bind", &addr, "--service", service, "--port", &port])
}

/// Runs rr-bench in ns_b to completion and returns its JSON result.
fn run_bench(lab: &Lab, dir: &Path, name: &str, args: &[&str]) -> BenchResult {
    let json = dir.join(format!("{name}.json"));
    let mut all = vec!["--json", json.to_str().unwrap(), "--quiet"];
    all.extend_from_slice(args);
    let mut p = Proc::spawn(&lab.ns_b, BENCH, &all, dir, name, Stdio::null());
    let st = p.wait(Duration::from_secs(60));
    assert!(st.success(), "rr-bench {args:?}: {st}\n{}", p.output());
    let r: BenchResult = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    eprintln!("{name}: {}", p.stdout());
    r
}

fn assert_good(r: &BenchResult) {
    assert!(r.rps > 0.0, "{r:?}");
    assert!(r.requests > 0, "{r:?}");
    assert_eq!(r.errors, 0, "{r:?}");
    assert_eq!(r.lost, 0, "{r:?}");
    assert!(r.p50_us > 0.0 && r.p50_us <= r.p99_us && r.p99_us <= r.max_us, "{r:?}");
    assert!(r.cpu_us_per_req_client.is_some_and(|c| c > 0.0), "{r:?}");
    assert!(r.cpu_us_per_req_machine.is_some(), "{r:?}");
}

fn xdp_attached(ns: &Netns, ifname: &str) -> bool {
    ns.run(&["ip", "-d", "link", "show", "dev", ifname]).expect("ip link show").contains("prog/xdp")
}

/// Stops the server with `sig` and checks it exits 0, detached, and reports sane counters.
fn stop_server(lab: &Lab, mut server: Proc, sig: libc::c_int) -> ServerSummary {
    let st = server.signal(sig, Duration::from_secs(20));
    assert!(st.success(), "rr-server exit {st}:\n{}", server.output());
    assert!(!xdp_attached(&lab.ns_a, &lab.if_a), "XDP program left on {}", lab.if_a);
    let json = server.sibling("server.json");
    let s: ServerSummary = serde_json::from_slice(&std::fs::read(&json).expect("server --json")).unwrap();
    assert_eq!((s.protocol_errors, s.io_errors), (0, 0), "{s:?}");
    assert_eq!(s.accepted, s.closed, "{s:?}");
    s
}

const LOAD: &[&str] = &["--conns", "4", "--depth", "2", "--duration", "1s", "--warmup", "300ms"];

#[test]
fn xsk_server_dedicated_address_kernel_client() {
    let lab = lab("rrx");
    let dir = scratch("test", "xsk-server");
    let (ip, cidr) = dedicated(&lab, 100);
    let server = start_xsk_server(&lab, &dir, &cidr, "echo", 7300);
    assert!(server.stdout().contains("xsk port: "), "features line:\n{}", server.output());
    assert!(xdp_attached(&lab.ns_a, &lab.if_a), "the server attached its program");
    let connect = SocketAddrV4::new(ip, 7300).to_string();
    let mut args = vec!["--backend", "kernel", "--connect", &connect];
    args.extend_from_slice(LOAD);
    let r = run_bench(&lab, &dir, "kernel-client", &args);
    assert_good(&r);
    assert_eq!((r.conns, r.depth, r.req_size), (4, 2, 64));
    let summary = stop_server(&lab, server, libc::SIGINT);
    assert!(summary.requests >= r.requests, "{summary:?}");
    let xsk = summary.xsk.expect("xsk stats");
    assert!(xsk["audit"]["total"].as_u64().is_some(), "frame audit ok: {xsk}");
    assert_eq!(xsk["audit"]["app"].as_u64(), Some(0), "{xsk}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn kernel_server_kernel_and_xsk_clients() {
    let lab = lab("rrk");
    let dir = scratch("test", "kernel-server");
    let server = start_kernel_server(&lab, &dir, "echo", 7301);
    let pid = server.child.id().to_string();
    let connect = SocketAddrV4::new(lab.addr_a, 7301).to_string();

    let mut args = vec!["--backend", "kernel", "--connect", &connect, "--server-pid", &pid];
    args.extend_from_slice(LOAD);
    let k = run_bench(&lab, &dir, "kernel-client", &args);
    assert_good(&k);
    assert!(k.cpu_us_per_req_server.is_some_and(|c| c > 0.0), "server CPU from its schedstat: {k:?}");
    // An epoll server reads and writes every batch itself: a recv and a send per two requests
    // at depth 2, and its epoll_wait.
    assert!(k.syscalls_per_req_server.is_some_and(|s| s >= 0.9), "epoll server's system calls: {k:?}");
    assert!(k.syscalls_per_req_client.is_some_and(|s| s >= 0.9), "epoll client's system calls: {k:?}");
    // On veth each side's sends run the other's receive: both processes ran NET_RX work, and
    // the own-receive figure swaps the two.
    let n = k.netrx_us_per_req.expect("NET_RX accountant (root)");
    assert!(n.in_server > 0.0 && n.in_client > 0.0, "{n:?}");
    let own = k.cpu_us_per_req_server_own_rx.expect("own-receive server CPU");
    let want = k.cpu_us_per_req_server.unwrap() - n.in_server + n.in_client;
    assert!((own - want).abs() < 0.01 * want.max(1.0), "{own} vs {want}: {k:?}");

    let (_, client_cidr) = dedicated(&lab, 101);
    let mut args = vec![
        "--backend",
        "xsk",
        "--iface",
        &lab.if_b,
        "--addr",
        &client_cidr,
        "--connect",
        &connect,
        "--attach",
        "skb",
    ];
    args.extend_from_slice(LOAD);
    let x = run_bench(&lab, &dir, "xsk-client", &args);
    assert_good(&x);
    assert_eq!(x.backend, apps::Backend::Xsk);
    let xsk = x.xsk.as_ref().expect("xsk client stats");
    assert_eq!(xsk["audit"]["app"].as_u64(), Some(0), "{xsk}");
    assert!(!xdp_attached(&lab.ns_b, &lab.if_b), "the xsk client detached its program");

    let summary = stop_server(&lab, server, libc::SIGINT);
    assert!(summary.requests >= k.requests + x.requests, "{summary:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The io_uring server with the epoll client and with its own (single-threaded) client; the
/// system-call accountant shows what io_uring saves: a pass's enter both submits the answers
/// and waits, so the server makes fewer calls than requests under load.
#[test]
fn uring_server_kernel_and_uring_clients() {
    let lab = lab("rru");
    let dir = scratch("test", "uring-server");
    let server = start_kernel_backend(&lab, &dir, "uring", "echo", 7303);
    let pid = server.child.id().to_string();
    let connect = SocketAddrV4::new(lab.addr_a, 7303).to_string();
    let mut args = vec!["--backend", "kernel", "--connect", &connect, "--server-pid", &pid];
    args.extend_from_slice(LOAD);
    let k = run_bench(&lab, &dir, "kernel-client", &args);
    assert_good(&k);
    let sys = k.syscalls_per_req_server.expect("the accountant counts the server's system calls");
    // One enter per pass, and a pass serves every connection that has a request: well under
    // one per request here, against the epoll server's recv and send per two requests; a
    // second system call per pass (a gettid on each poll, say) takes it past 0.45.
    assert!(sys > 0.0 && sys < 0.45, "io_uring server: {sys} system calls per request: {k:?}");

    let bind = lab.addr_b.to_string();
    let mut args = vec!["--backend", "uring", "--bind", &bind, "--connect", &connect, "--server-pid", &pid];
    args.extend_from_slice(LOAD);
    let u = run_bench(&lab, &dir, "uring-client", &args);
    assert_good(&u);
    assert_eq!(u.backend, apps::Backend::Uring);
    assert!(u.syscalls_per_req_client.is_some_and(|s| s < 0.45), "io_uring client: {u:?}");
    eprintln!("system calls per request: uring server {sys:.2}, uring client {:.2}", u.syscalls_per_req_client.unwrap());

    let summary = stop_server(&lab, server, libc::SIGINT);
    assert!(summary.requests >= k.requests + u.requests, "{summary:?}");
    let uring = summary.uring.as_ref().expect("the uring server's report");
    assert!(uring["stats"][0]["enters"].as_u64().is_some_and(|n| n > 0), "{uring}");
    assert_eq!(uring["features"]["single_issuer"].as_bool(), Some(true), "{uring}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn kv_service_over_both_backends() {
    let lab = lab("rrv");
    let dir = scratch("test", "kv");
    let (ip, cidr) = dedicated(&lab, 100);
    let server = start_xsk_server(&lab, &dir, &cidr, "kv", 7302);
    let connect = SocketAddrV4::new(ip, 7302).to_string();
    let mut args = vec!["--service", "kv", "--resp-size", "200", "--kv-keys", "8", "--connect", &connect];
    args.extend_from_slice(LOAD);
    let r = run_bench(&lab, &dir, "kv-client", &args);
    assert_good(&r);
    assert_eq!((r.req_size, r.resp_size), (20, 201));
    stop_server(&lab, server, libc::SIGTERM);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Sends bytes in uneven chunks with a plain std TcpStream from ns_b and reads each chunk back,
/// then half-closes and expects the server to close too (RFC 862).
fn tcp_echo_roundtrip(ns: &Netns, addr: SocketAddrV4) {
    ns.run_in(move || {
        let mut s = TcpStream::connect_timeout(&addr.into(), Duration::from_secs(10)).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.set_write_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut x: u32 = 12345;
        let mut total = 0;
        for len in [1usize, 2, 7, 100, 1460, 1461, 5000, 20_000, 65_536, 3] {
            let chunk: Vec<u8> = (0..len)
                .map(|_| {
                    x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
                    (x >> 16) as u8
                })
                .collect();
            s.write_all(&chunk).expect("write");
            let mut back = vec![0u8; len];
            s.read_exact(&mut back).expect("read back");
            assert_eq!(back, chunk, "chunk of {len} bytes came back changed");
            total += len;
        }
        s.shutdown(Shutdown::Write).unwrap();
        let mut rest = Vec::new();
        s.read_to_end(&mut rest).expect("EOF after half-close");
        assert!(rest.is_empty(), "{} unexpected bytes", rest.len());
        total
    })
    .expect("run in ns_b");
}

#[test]
fn tcp_echo_with_std_tcpstream_xsk_server() {
    let lab = lab("rrt");
    let dir = scratch("test", "tcp-echo-xsk");
    let (ip, cidr) = dedicated(&lab, 100);
    let server = start_xsk_server(&lab, &dir, &cidr, "tcp-echo", 7);
    tcp_echo_roundtrip(&lab.ns_b, SocketAddrV4::new(ip, 7));
    let s = stop_server(&lab, server, libc::SIGINT);
    assert_eq!(s.accepted, 1, "{s:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// SIGTERM with a client connected: the xsk server answers what it received and closes the
/// connection with a FIN (the client reads the answer, then EOF), waits for the client's
/// close, and exits 0. Before --shutdown-grace, dropping the server reset every connection.
#[test]
fn xsk_server_closes_open_connections_with_a_fin_on_sigterm() {
    let lab = lab("rrg");
    let dir = scratch("test", "graceful-xsk");
    let (ip, cidr) = dedicated(&lab, 100);
    let mut server = start_xsk_server(&lab, &dir, &cidr, "tcp-echo", 7);
    let addr = SocketAddrV4::new(ip, 7);
    let s = lab
        .ns_b
        .run_in(move || {
            let mut s = TcpStream::connect_timeout(&addr.into(), Duration::from_secs(10)).expect("connect");
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            s.write_all(b"hello").expect("write");
            let mut back = [0u8; 5];
            s.read_exact(&mut back).expect("read back");
            assert_eq!(&back, b"hello");
            s
        })
        .expect("run in ns_b");
    // A last request, then the client reads until the server closes (its socket stays in
    // ns_b), and closes too. The request is given time to arrive: one that arrives after
    // the shutdown began is read and dropped, by design.
    let mut s = s;
    s.write_all(b"bye").expect("write");
    std::thread::sleep(Duration::from_millis(100));
    let reader = std::thread::spawn(move || {
        let mut s = s;
        let mut got = Vec::new();
        let r = s.read_to_end(&mut got).map(|_| got);
        drop(s);
        r
    });
    let st = server.signal(libc::SIGTERM, Duration::from_secs(20));
    assert!(st.success(), "rr-server exit {st}:\n{}", server.output());
    let got = reader.join().expect("reader");
    assert!(matches!(&got, Ok(rest) if rest == b"bye"), "the client got {got:?}, not its answer and an EOF");
    let out = server.stdout();
    assert!(out.contains("1 connections open, 1 closed gracefully, 0 closed at the"), "{out}");
    assert!(!xdp_attached(&lab.ns_a, &lab.if_a), "XDP program left on {}", lab.if_a);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn tcp_echo_with_std_tcpstream_kernel_server() {
    let lab = lab("rre");
    let dir = scratch("test", "tcp-echo-kernel");
    let server = start_kernel_server(&lab, &dir, "tcp-echo", 7);
    tcp_echo_roundtrip(&lab.ns_b, SocketAddrV4::new(lab.addr_a, 7));
    let s = stop_server(&lab, server, libc::SIGTERM);
    assert_eq!(s.accepted, 1, "{s:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn tcp_echo_with_std_tcpstream_uring_server() {
    let lab = lab("rreu");
    let dir = scratch("test", "tcp-echo-uring");
    let server = start_kernel_backend(&lab, &dir, "uring", "tcp-echo", 7);
    tcp_echo_roundtrip(&lab.ns_b, SocketAddrV4::new(lab.addr_a, 7));
    let s = stop_server(&lab, server, libc::SIGTERM);
    assert_eq!(s.accepted, 1, "{s:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bench_lab_mode_end_to_end() {
    // SAFETY: geteuid has no preconditions.
    assert_eq!(unsafe { libc::geteuid() }, 0, "this integration test needs root");
    let dir = scratch("test", "lab-mode");
    let json = dir.join("lab.json");
    let out = Command::new(BENCH)
        .args(["--lab", "xsk", "--backend", "xsk", "--server-exe", SERVER, "--quiet", "--json"])
        .arg(&json)
        .args(LOAD)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{text}");
    assert!(text.contains("frame audit: ok"), "server audit in the output: {text}");
    let r: BenchResult = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_good(&r);
    assert!(r.cpu_us_per_req_server.is_some(), "{r:?}");
    assert!(r.netrx_us_per_req.is_some_and(|n| n.in_client > 0.0), "the server's receive ran in the client: {r:?}");
    assert!(r.cpu_us_per_req_server_own_rx.is_some(), "{r:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// GET `path` from `addr` inside `ns`, the whole HTTP/1.0 answer.
fn http_get_in(ns: &Netns, addr: String, path: &'static str) -> String {
    ns.run_in(move || {
        let mut c = TcpStream::connect(&addr).expect("connect to the metrics endpoint");
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        write!(c, "GET {path} HTTP/1.0\r\n\r\n").unwrap();
        let mut out = String::new();
        c.read_to_string(&mut out).unwrap();
        out
    })
    .expect("enter the namespace")
}

/// The value of the sample `name{...}` in a Prometheus text answer.
fn sample(text: &str, name: &str) -> Option<f64> {
    text.lines().find(|l| l.starts_with(&format!("{name}{{")))?.rsplit(' ').next()?.parse().ok()
}

#[test]
fn xsk_server_live_figures_and_metrics() {
    let lab = lab("rrm");
    let dir = scratch("test", "xsk-metrics");
    let (ip, cidr) = dedicated(&lab, 100);
    // The endpoint is on the kernel's TCP at ns_a's own address: the steering program
    // passes it to the kernel, it is not one of the stack's flows.
    let metrics = SocketAddrV4::new(lab.addr_a, 9187).to_string();
    let server = start_server(
        &lab,
        &dir,
        &["--backend", "xsk", "--iface", &lab.if_a, "--addr", &cidr, "--port", "7310"]
            .into_iter()
            .chain(["--stats-interval", "200ms", "--metrics", &metrics])
            .collect::<Vec<_>>(),
    );
    let connect = SocketAddrV4::new(ip, 7310).to_string();
    let mut args = vec!["--backend", "kernel", "--connect", &connect];
    args.extend_from_slice(LOAD);
    let r = run_bench(&lab, &dir, "kernel-client", &args);
    assert_good(&r);
    // The endpoint refreshes once a second: wait for the run's requests to show.
    let deadline = Instant::now() + Duration::from_secs(5);
    let body = loop {
        let b = http_get_in(&lab.ns_b, metrics.clone(), "/metrics");
        if sample(&b, "rr_server_requests").is_some_and(|n| n >= r.requests as f64) {
            break b;
        }
        assert!(Instant::now() < deadline, "the endpoint never counted the run's {} requests:\n{b}", r.requests);
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(body.starts_with("HTTP/1.0 200 OK"), "{body}");
    for name in [
        "rr_server_xsk_rx_frames",
        "rr_server_xsk_drops_bad_checksum",
        "rr_server_xsk_device_tx_frames",
        "rr_server_xsk_port_port_kicks",
        "rr_server_xsk_port_xdp_rx_dropped",
        "rr_server_xsk_drops_syn_backlog",
        "rr_server_connections",
        "rr_server_xsk_recovery_rto_retransmits",
        "rr_server_xsk_recovery_fast_retransmits",
        "rr_server_xsk_recovery_tail_probes",
        "rr_server_xsk_recovery_spurious_retransmits",
        "rr_server_xsk_recovery_spurious_probes",
    ] {
        assert!(sample(&body, name).is_some(), "{name} missing:\n{body}");
    }
    // Pipelined requests (depth 2) can share a frame: at least one frame per two requests.
    assert!(sample(&body, "rr_server_xsk_rx_frames").unwrap() * 2.0 >= r.requests as f64, "{body}");
    let out = server.stdout();
    let line = out.lines().find(|l| l.starts_with("stats:") && !l.contains(" 0 req/s"));
    let line = line.unwrap_or_else(|| panic!("no stats line with requests:\n{}", server.output()));
    assert!(line.contains("rx/s") && line.contains("tx/s") && line.contains("kicks/s"), "{line}");
    assert!(line.contains(" retx ") && line.contains(" probes "), "{line}");
    let summary = stop_server(&lab, server, libc::SIGINT);
    assert!(summary.recovery.is_some(), "the xsk server's summary has its loss recovery: {summary:?}");
    assert!(summary.requests >= sample(&body, "rr_server_requests").unwrap() as u64, "{summary:?}");
    let _ = std::fs::remove_dir_all(&dir);
}
