//! The tokio adapter's examples (`axum_server`, `grpc_server`) on both backends in a veth lab,
//! against stock clients in the other namespace: curl (HTTP/1.1 and h2c), wrk, h2load, the
//! tonic client, and raw sockets for pipelining and a reset in the middle of a response; then
//! a graceful shutdown with requests in flight. The peer keeps veth's default offloads.
//!
//! Needs root, curl, wrk, h2load (scripts/setup) and the examples built first:
//! `cargo build -p stack --features axum,tonic --examples` (scripts/test-all does).

#![cfg(all(feature = "axum", feature = "tonic"))]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, SocketAddrV4, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use xsk_lab::lab::{Lab, LabConfig, Netns};

#[derive(Clone, Copy, Debug)]
enum Backend {
    Kernel,
    #[cfg_attr(not(feature = "uring"), allow(dead_code))]
    Uring,
    Xsk,
}

fn lab(tag: &str) -> Lab {
    lab_with(tag, false)
}

/// A lab, with IPv6 on in both namespaces if `ipv6`.
fn lab_with(tag: &str, ipv6: bool) -> Lab {
    // SAFETY: geteuid has no preconditions.
    assert_eq!(unsafe { libc::geteuid() }, 0, "this integration test needs root");
    xsk_lab::lab::sweep_stale(tag);
    // Default offloads on both ends: the kernel client sends partial checksums.
    Lab::new(&LabConfig { prefix: tag.into(), disable_ipv6: !ipv6, ..LabConfig::default() }).expect("lab")
}

/// target/<profile>/examples/<name>, next to this test's own deps directory.
fn example(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let p = exe.parent().and_then(|d| d.parent()).unwrap().join("examples").join(name);
    assert!(p.exists(), "{} missing: run `cargo build -p stack --features axum,tonic --examples` (same profile) first", p.display());
    p
}

/// A server example running in the lab's first namespace; stopped (SIGKILL) if the test
/// fails before it stops it.
struct Server {
    child: Option<Child>,
    addr: SocketAddr,
    lines: mpsc::Receiver<String>,
}

impl Server {
    fn start(lab: &Lab, backend: Backend, name: &str, port: u16) -> Server {
        let port_s = port.to_string();
        let o = lab.addr_a.octets();
        let dedicated = Ipv4Addr::new(o[0], o[1], o[2], 100);
        let cidr = format!("{dedicated}/{}", lab.prefix_len);
        let (args, ip): (Vec<&str>, Ipv4Addr) = match backend {
            Backend::Kernel => (vec!["kernel", &port_s], lab.addr_a),
            Backend::Uring => (vec!["uring", &port_s], lab.addr_a),
            Backend::Xsk => (vec!["xsk", &lab.if_a, &cidr, &port_s], dedicated),
        };
        Self::start_with(lab, name, &args, SocketAddr::new(ip.into(), port))
    }

    /// `name` with `args`, serving at `addr`.
    fn start_with(lab: &Lab, name: &str, args: &[&str], addr: SocketAddr) -> Server {
        let bin = example(name);
        let mut all = vec![bin.to_str().unwrap()];
        all.extend_from_slice(args);
        let mut cmd = lab.ns_a.command(&all);
        cmd.stderr(Stdio::inherit());
        let mut child = cmd.spawn().expect("spawn server");
        let out = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let first = lines.recv_timeout(Duration::from_secs(30)).unwrap_or_else(|_| panic!("{name} {args:?} did not start"));
        assert!(first.contains(" on "), "{first}");
        Server { child: Some(child), addr, lines }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    fn pid(&self) -> i32 {
        self.child.as_ref().unwrap().id() as i32
    }

    /// SIGTERM, then the exit status and the rest of its output.
    fn stop(self, limit: Duration) -> (std::process::ExitStatus, Vec<String>) {
        self.stop_with(limit, || {})
    }

    /// `stop`, running `meanwhile` after the SIGTERM, while the server drains.
    fn stop_with(mut self, limit: Duration, meanwhile: impl FnOnce()) -> (std::process::ExitStatus, Vec<String>) {
        // SAFETY: kill(2) on the pid of our own child, which has not been reaped yet.
        unsafe { libc::kill(self.pid(), libc::SIGTERM) };
        meanwhile();
        let mut child = self.child.take().unwrap();
        let until = Instant::now() + limit;
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            if Instant::now() > until {
                let _ = child.kill();
                panic!("server did not stop within {limit:?} of SIGTERM");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        (status, self.lines.try_iter().collect())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(c) = &mut self.child {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// `args` in `ns`, killed after a minute (no client may hang the test).
fn run(ns: &Netns, args: &[&str]) -> Output {
    let mut all = vec!["timeout", "60"];
    all.extend_from_slice(args);
    ns.command(&all).output().unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

fn ok_stdout(ns: &Netns, args: &[&str]) -> Vec<u8> {
    let o = run(ns, args);
    assert!(o.status.success(), "{args:?}: {}\n{}", o.status, String::from_utf8_lossy(&o.stderr));
    o.stdout
}

fn curl_basics(lab: &Lab, s: &Server) {
    for h2 in [&[][..], &["--http2-prior-knowledge"][..]] {
        let mut args = vec!["curl", "-gsS", "--max-time", "10"];
        args.extend_from_slice(h2);
        let url = s.url("/");
        args.push(&url);
        assert_eq!(ok_stdout(&lab.ns_b, &args), b"Hello, World!\n", "{args:?}");
    }
}

/// 1 MiB POSTed and echoed, HTTP/1.1 and h2c: streams through bounded buffers.
fn big_post(lab: &Lab, s: &Server) {
    let body: Vec<u8> = (0..1u32 << 20).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).collect();
    // Per server address: the two backends' tests run at once in one process.
    let dir = std::env::temp_dir().join(format!("tokio-adapter-{}-{}", std::process::id(), s.addr).replace(':', "-"));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("body");
    std::fs::write(&file, &body).unwrap();
    let data = format!("@{}", file.display());
    for h2 in [&[][..], &["--http2-prior-knowledge"][..]] {
        let url = s.url("/echo");
        let mut args = vec!["curl", "-gsS", "--max-time", "30", "--data-binary", &data];
        args.extend_from_slice(h2);
        args.push(&url);
        let got = ok_stdout(&lab.ns_b, &args);
        assert!(got == body, "{h2:?}: echoed {} bytes of {}", got.len(), body.len());
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Three requests in one write; three answers in order.
fn pipelined(lab: &Lab, s: &Server) {
    let addr = s.addr;
    let text = lab
        .ns_b
        .run_in(move || {
            let mut c = TcpStream::connect_timeout(&addr.into(), Duration::from_secs(10)).unwrap();
            c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            let req = format!(
                "GET / HTTP/1.1\r\nHost: {addr}\r\n\r\nPOST /echo HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 5\r\n\r\nhello\
                 GET / HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
            );
            c.write_all(req.as_bytes()).unwrap();
            let mut out = String::new();
            c.read_to_string(&mut out).unwrap();
            out
        })
        .unwrap();
    assert_eq!(text.matches("HTTP/1.1 200 OK").count(), 3, "{text}");
    let (a, b, c) = (text.find("Hello, World!").unwrap(), text.find("hello").unwrap(), text.rfind("Hello, World!").unwrap());
    assert!(a < b && b < c, "answers out of order: {text}");
}

/// The client resets its connection while an 8 MiB echo is streaming back: the server
/// carries on serving others.
fn reset_mid_response(lab: &Lab, s: &Server) {
    let addr = s.addr;
    let got = lab
        .ns_b
        .run_in(move || {
            let c = TcpStream::connect_timeout(&addr.into(), Duration::from_secs(10)).unwrap();
            c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            let len = 8usize << 20;
            let mut w = c.try_clone().unwrap();
            let writer = std::thread::spawn(move || {
                let head = format!("POST /echo HTTP/1.1\r\nHost: {addr}\r\nContent-Length: {len}\r\n\r\n");
                let _ = w.write_all(head.as_bytes());
                let chunk = vec![b'x'; 64 << 10];
                for _ in 0..len / chunk.len() {
                    if w.write_all(&chunk).is_err() {
                        break; // the reset below
                    }
                }
            });
            let mut r = &c;
            let mut buf = vec![0u8; 64 << 10];
            let mut got = 0;
            while got < 256 << 10 {
                let n = r.read(&mut buf).unwrap();
                assert!(n > 0, "response ended early");
                got += n;
            }
            // SO_LINGER 0: close() sends RST instead of FIN.
            let linger = libc::linger { l_onoff: 1, l_linger: 0 };
            // SAFETY: setsockopt on an open socket with a correctly sized linger struct.
            let rc = unsafe {
                libc::setsockopt(
                    std::os::fd::AsRawFd::as_raw_fd(&c),
                    libc::SOL_SOCKET,
                    libc::SO_LINGER,
                    (&linger as *const libc::linger).cast(),
                    std::mem::size_of::<libc::linger>() as libc::socklen_t,
                )
            };
            assert_eq!(rc, 0);
            let _ = c.shutdown(Shutdown::Both);
            drop(c);
            let _ = writer.join();
            got
        })
        .unwrap();
    assert!(got >= 256 << 10);
    curl_basics(lab, s);
}

fn wrk(lab: &Lab, s: &Server) {
    wrk_url(&lab.ns_b, &s.url("/"));
}

fn wrk_url(ns: &Netns, url: &str) {
    let out = String::from_utf8(ok_stdout(ns, &["wrk", "-t1", "-c16", "-d2s", "--timeout", "5s", url])).unwrap();
    assert!(!out.contains("Socket errors") && !out.contains("Non-2xx"), "{out}");
    let n: u64 = out
        .lines()
        .find(|l| l.contains("requests in"))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no request count in {out}"));
    assert!(n > 100, "{out}");
    eprintln!("wrk: {}", out.lines().find(|l| l.contains("Requests/sec")).unwrap_or(""));
}

fn h2load(lab: &Lab, s: &Server) {
    let url = s.url("/");
    let out = String::from_utf8(ok_stdout(&lab.ns_b, &["h2load", "-n", "4000", "-c", "4", "-m", "8", "-T", "10", &url])).unwrap();
    assert!(out.contains("requests: 4000 total, 4000 started, 4000 done, 4000 succeeded, 0 failed, 0 errored, 0 timeout"), "{out}");
    eprintln!("h2load: {}", out.lines().find(|l| l.starts_with("finished in")).unwrap_or(""));
}

/// Four `GET /slow` (1 s each) in flight when SIGTERM comes: all four answered, then the
/// server exits 0, and nothing answers after.
fn graceful_shutdown(lab: &Lab, s: Server) {
    let url = s.url("/slow");
    let curls: Vec<Child> = (0..4).map(|_| lab.ns_b.spawn(&["curl", "-sS", "--max-time", "20", &url]).unwrap()).collect();
    // Until all four are established (and their requests a moment later on the server).
    let until = Instant::now() + Duration::from_secs(10);
    let dst = format!("dst {}", s.addr);
    loop {
        let out = run(&lab.ns_b, &["ss", "-Htn", "state", "established", &dst]);
        if String::from_utf8_lossy(&out.stdout).lines().count() >= 4 {
            break;
        }
        assert!(Instant::now() < until, "the slow requests did not connect");
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(100));
    let addr = s.addr;
    // While it drains, a new connection is refused (curl: 7, could not connect), as with
    // tokio's own listener, not accepted and closed at once (curl: 52, empty reply).
    let url = format!("http://{addr}/");
    let (status, lines) = s.stop_with(Duration::from_secs(15), || {
        std::thread::sleep(Duration::from_millis(200));
        let o = run(&lab.ns_b, &["curl", "-sS", "--max-time", "2", &url]);
        assert_eq!(o.status.code(), Some(7), "a connection after SIGTERM: {}", String::from_utf8_lossy(&o.stderr));
    });
    for c in curls {
        let o = c.wait_with_output().unwrap();
        assert!(o.status.success() && o.stdout == b"slow\n", "{}: {:?} {}", o.status, o.stdout, String::from_utf8_lossy(&o.stderr));
    }
    assert!(status.success(), "{status}");
    assert!(lines.iter().any(|l| l == "stopped"), "{lines:?}");
    assert!(!run(&lab.ns_b, &["curl", "-sS", "--max-time", "2", &url]).status.success(), "answered after the shutdown");
}

fn grpc(lab: &Lab, backend: Backend) {
    let s = Server::start(lab, backend, "grpc_server", 50051);
    let url = format!("http://{}", s.addr);
    let client = example("grpc_client");
    let out = ok_stdout(&lab.ns_b, &[client.to_str().unwrap(), &url, "500"]);
    assert_eq!(String::from_utf8_lossy(&out).trim(), "ok 500");
    let (status, lines) = s.stop(Duration::from_secs(15));
    assert!(status.success() && lines.iter().any(|l| l == "stopped"), "{status} {lines:?}");
}

fn stock_clients(tag: &str, backend: Backend) {
    let lab = lab(tag);
    let s = Server::start(&lab, backend, "axum_server", 8080);
    curl_basics(&lab, &s);
    big_post(&lab, &s);
    pipelined(&lab, &s);
    reset_mid_response(&lab, &s);
    wrk(&lab, &s);
    h2load(&lab, &s);
    graceful_shutdown(&lab, s);
    grpc(&lab, backend);
}

/// axum over IPv6 and IPv4 from one listener (xsk: the kernel's shared addresses; kernel:
/// bound to 0.0.0.0): curl over IPv6 (HTTP/1.1, h2c, 1 MiB echoed), then wrk over each
/// family at the same time.
fn both_families(tag: &str, backend: Backend) {
    let lab = lab_with(tag, true);
    let (a6, _) = lab.add_ipv6(true).expect("IPv6 addresses");
    let args = match backend {
        Backend::Kernel => vec!["kernel", "8080"],
        Backend::Uring => vec!["uring", "8080"],
        Backend::Xsk => vec!["xsk", &lab.if_a, "shared", "8080"],
    };
    let s = Server::start_with(&lab, "axum_server", &args, SocketAddr::new(a6.into(), 8080));
    curl_basics(&lab, &s);
    big_post(&lab, &s);
    let urls = [s.url("/"), format!("http://{}:8080/", lab.addr_a)];
    let wrks: Vec<_> = urls.into_iter().map(|url| {
        let ns = lab.ns_b.clone();
        std::thread::spawn(move || wrk_url(&ns, &url))
    }).collect();
    wrks.into_iter().for_each(|w| w.join().unwrap());
    let (status, _) = s.stop(Duration::from_secs(15));
    assert!(status.success(), "{status}");
}

#[test]
fn axum_over_ipv6_and_ipv4_on_kernel_backend() {
    both_families("ta6k", Backend::Kernel);
}

#[test]
fn axum_over_ipv6_and_ipv4_on_xsk_backend() {
    both_families("ta6x", Backend::Xsk);
}

#[test]
fn axum_and_tonic_on_kernel_backend_with_stock_clients() {
    stock_clients("tak", Backend::Kernel);
}

/// Kernel TCP through io_uring under tokio (built with the `uring` feature).
#[cfg(feature = "uring")]
#[test]
fn axum_and_tonic_on_uring_backend_with_stock_clients() {
    stock_clients("tau", Backend::Uring);
}

#[test]
fn axum_and_tonic_on_xsk_backend_with_stock_clients() {
    stock_clients("tax", Backend::Xsk);
}

/// The adapter's `connect` over the xsk backend: a client on the AF_XDP stack in one
/// namespace against a plain kernel echo server in the other, 1 MiB each way, then a
/// half-close that the server answers with EOF after echoing everything.
#[test]
fn connect_over_xsk_to_a_kernel_server() {
    use stack::xsk::{AddrMode, XskConfig, XskTransport};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let lab = lab("tac");
    let addr_a = lab.addr_a;
    let listener = lab.ns_a.run_in(move || std::net::TcpListener::bind((addr_a, 7200)).unwrap()).unwrap();
    let server = std::thread::spawn(move || {
        let (s, _) = listener.accept().unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        std::io::copy(&mut &s, &mut &s).unwrap();
        s.shutdown(Shutdown::Write).unwrap();
    });
    let o = lab.addr_b.octets();
    let me = Ipv4Addr::new(o[0], o[1], o[2], 101);
    let mut cfg = XskConfig::new(&lab.if_b, AddrMode::Dedicated { addr: me, prefix_len: lab.prefix_len });
    cfg.port.attach = xsk_io::AttachMode::Auto;
    let dst = SocketAddrV4::new(addr_a, 7200);
    let data: Vec<u8> = (0..1u32 << 20).map(|i| (i.wrapping_mul(2654435761) >> 11) as u8).collect();
    let sent = data.clone();
    let got = lab
        .ns_b
        .run_in(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async move {
                let net = stack::tokio::Net::spawn(XskTransport::new(cfg).unwrap()).unwrap();
                let work = async {
                    let s = net.connect(dst).await.unwrap();
                    let (mut r, mut w) = tokio::io::split(s);
                    let writer = async {
                        w.write_all(&sent).await.unwrap();
                        w.shutdown().await.unwrap();
                        w
                    };
                    let reader = async {
                        let mut got = Vec::new();
                        r.read_to_end(&mut got).await.unwrap();
                        (r, got)
                    };
                    let (w, (r, got)) = tokio::join!(writer, reader);
                    drop(r.unsplit(w));
                    got
                };
                let got = tokio::time::timeout(Duration::from_secs(30), work).await.expect("echo within 30 s");
                net.drain(Duration::from_secs(2)).await;
                got
            })
        })
        .unwrap();
    assert!(got == data, "echoed {} bytes of {}", got.len(), data.len());
    server.join().unwrap();
}
