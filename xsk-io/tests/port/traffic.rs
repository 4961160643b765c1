//! Frames crossing the veth byte for byte, only the steered ones reaching
//! the socket, and one port per queue.

use std::io::{Read, Write};
use std::net::{SocketAddrV4, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use xsk_device::Iface;
use xsk_io::socket::RingSizes;
use xsk_io::umem::UmemConfig;
use xsk_io::AttachMode;
use xsk_lab::lab::{Lab, LabConfig};
use xsk_lab::pktgen::{self, Proto};
use xsk_lab::rawsock::RawSocket;

use super::{lab, open, recv_one, require_root, spec, stamp, steered_cfg};

#[test]
fn frames_cross_byte_exact_both_ways() {
    let lab = lab("tpx");
    for mode in [AttachMode::Skb, AttachMode::Drv] {
        let _in_a = lab.ns_a.enter().unwrap();
        let mut port = open(&steered_cfg(&lab, mode, 7001)).unwrap();
        assert_eq!(port.features().attach, Some(mode));
        let raw = lab.ns_b.run_in({
            let ifb = lab.if_b.clone();
            move || RawSocket::open(&ifb)
        });
        let raw = raw.unwrap().unwrap();

        // port -> kernel AF_PACKET socket, sizes from minimum to MTU
        for (i, size) in [54usize, 60, 64, 200, 1000, 1514].into_iter().enumerate() {
            let s = spec(&lab, true, Proto::Udp, 9, size);
            let mut f = port.alloc().unwrap();
            let n = pktgen::build(&s, port.umem().buf_mut(&mut f));
            stamp(port.umem().buf_mut(&mut f), Proto::Udp, i as u32);
            f.set_len(n);
            let sent = port.umem().data(&f).to_vec();
            port.send(f).unwrap();
            port.flush().unwrap();
            let mut buf = vec![0u8; 2048];
            let got = loop {
                let n = raw.recv(&mut buf, Duration::from_secs(2)).unwrap().expect("frame reached the peer");
                // skip the peer's own chatter (IPv6 router solicitations etc.)
                if buf[12..14] == [0x08, 0x00] {
                    break n;
                }
            };
            assert_eq!(&buf[..got], &sent[..], "{mode} size {size}: byte-exact at the peer");
        }
        assert!(port.drain_tx(Duration::from_secs(2)).unwrap());

        // kernel AF_PACKET socket -> port (steered TCP port)
        for (i, size) in [54usize, 64, 300, 1514].into_iter().enumerate() {
            let s = spec(&lab, false, Proto::Tcp, 7001, size);
            let mut buf = vec![0u8; size.max(54)];
            let n = pktgen::build(&s, &mut buf);
            stamp(&mut buf, Proto::Tcp, i as u32);
            raw.send(&buf[..n]).unwrap();
            let f = recv_one(&mut port, Duration::from_secs(2)).expect("frame reached the port");
            assert_eq!(port.umem().data(&f), &buf[..n], "{mode} size {size}: byte-exact at the port");
            port.release(f);
        }
        port.audit().unwrap();
        drop(port);
    }
}

#[test]
fn only_the_steered_port_reaches_the_socket() {
    let lab = lab("tps");
    let _in_a = lab.ns_a.enter().unwrap();
    let (iface, mut port) = Iface::open(&steered_cfg(&lab, AttachMode::Skb, 7002)).unwrap();
    // A kernel listener on another port keeps working.
    let listener = TcpListener::bind(SocketAddrV4::new(lab.addr_a, 7003)).unwrap();
    let addr_a = lab.addr_a;
    let ns_b = lab.ns_b.clone();
    let client = std::thread::spawn(move || -> std::io::Result<String> {
        let _in_b = ns_b.enter().unwrap();
        let mut s = TcpStream::connect_timeout(&SocketAddrV4::new(addr_a, 7003).into(), Duration::from_secs(3))?;
        s.write_all(b"hello")?;
        let mut r = String::new();
        s.read_to_string(&mut r)?;
        Ok(r)
    });
    listener.set_nonblocking(true).unwrap();
    let end = Instant::now() + Duration::from_secs(5);
    let mut conn = loop {
        match listener.accept() {
            Ok((c, _)) => break c,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock && Instant::now() < end => {
                std::thread::sleep(Duration::from_millis(10))
            }
            Err(e) => panic!("kernel TCP connection to an unsteered port never arrived: {e}"),
        }
    };
    conn.set_nonblocking(false).unwrap();
    let mut b = [0u8; 5];
    conn.read_exact(&mut b).unwrap();
    conn.write_all(b"world").unwrap();
    drop(conn);
    assert_eq!(client.join().unwrap().unwrap(), "world", "kernel TCP on an unsteered port");

    // Ping (ICMP, ARP) still answered by the kernel.
    let out = lab.ns_b.run(&["ping", "-c", "2", "-i", "0.2", "-W", "2", &lab.addr_a.to_string()]);
    assert!(out.is_ok(), "ping through the steering program: {out:?}");

    // The kernel's own traffic above never reached the socket.
    let mut v = Vec::with_capacity(64);
    port.recv(&mut v, 64);
    assert!(v.is_empty(), "unsteered traffic reached the XSK");

    // A SYN to the steered port goes to the XSK and not to the kernel (which would RST).
    let ifb = lab.if_b.clone();
    let s = spec(&lab, false, Proto::Tcp, 7002, 60);
    let s2 = spec(&lab, false, Proto::Tcp, 7004, 60);
    lab.ns_b
        .run_in(move || {
            let raw = RawSocket::open(&ifb).unwrap();
            let mut buf = [0u8; 64];
            for s in [&s, &s2] {
                let n = pktgen::build(s, &mut buf);
                raw.send(&buf[..n]).unwrap();
            }
        })
        .unwrap();
    let f = recv_one(&mut port, Duration::from_secs(2)).expect("steered frame");
    assert_eq!(u16::from_be_bytes([port.umem().data(&f)[36], port.umem().data(&f)[37]]), 7002);
    port.release(f);
    assert!(recv_one(&mut port, Duration::from_millis(300)).is_none(), "port 7004 must stay with the kernel");
    let c = iface.steer().unwrap().counters().unwrap();
    assert!(c.steered >= 1 && c.passed >= 1, "{c:?}");
    port.audit().unwrap();
}

/// One socket per RX queue: every queue of a two-queue veth gets its own
/// port, all steered by one program, and together they receive every frame.
#[test]
fn one_port_per_queue() {
    require_root();
    xsk_lab::lab::sweep_stale("tpq");
    let lab = Lab::new(&LabConfig { prefix: "tpq".into(), peer_queues: Some(2), ..LabConfig::default() }).unwrap();
    let _in_a = lab.ns_a.enter().unwrap();
    // Native mode: veth records the RX queue only on its NAPI (XDP) path;
    // on the generic path every frame shows up as queue 0.
    let mut cfg = steered_cfg(&lab, AttachMode::Drv, 7007);
    cfg.rings = RingSizes { fill: 256, comp: 256, rx: 256, tx: 256 };
    cfg.umem = UmemConfig::default().with_frame_count(1024);
    let mut ports = Iface::open_all(&cfg).unwrap().1;
    assert_eq!(ports.len(), 2);
    assert_eq!(ports[0].features().queue, 0);
    assert_eq!(ports[1].features().queue, 1);
    const N: usize = 2000;
    let (ifb, s) = (lab.if_b.clone(), spec(&lab, false, Proto::Tcp, 7007, 64));
    let ns_b = lab.ns_b.clone();
    let sender = std::thread::spawn(move || {
            let _in_b = ns_b.enter().unwrap();
            let raw = RawSocket::open(&ifb).unwrap();
            let mut buf = [0u8; 64];
            for i in 0..N {
                let mut s = s.clone();
                s.src_port = 10000 + i as u16;
                let n = pktgen::build(&s, &mut buf);
                raw.send(&buf[..n]).unwrap();
                if i % 64 == 0 {
                    std::thread::sleep(Duration::from_micros(500));
                }
            }
        });
    let mut got = [0usize; 2];
    let mut v = Vec::with_capacity(64);
    let end = Instant::now() + Duration::from_secs(3);
    while got.iter().sum::<usize>() < N && Instant::now() < end {
        for (q, p) in ports.iter_mut().enumerate() {
            got[q] += p.recv(&mut v, 64);
            for f in v.drain(..) {
                p.release(f);
            }
            p.flush().unwrap();
        }
    }
    sender.join().unwrap();
    let dropped: u64 = ports.iter().map(|p| p.stats().xdp.rx_dropped).sum();
    eprintln!("per queue: {got:?}, dropped by the kernel (rings full under load): {dropped}");
    // Every frame reached one of the sockets, or the kernel counted it as
    // dropped there (a busy machine can starve this thread).
    assert_eq!(got.iter().sum::<usize>() as u64 + dropped, N as u64, "frames unaccounted for: {got:?}");
    assert!(got.iter().all(|&n| n > 0), "both queues received: {got:?}");
    // AF_PACKET sends on queue 0; kernel TCP spreads flows over both TX
    // queues of the peer, so SYNs of many connections reach both sockets.
    let addr_a = lab.addr_a;
    let ns_b = lab.ns_b.clone();
    let syns = std::thread::spawn(move || {
        let _in_b = ns_b.enter().unwrap();
        for _ in 0..64 {
            let _ = TcpStream::connect_timeout(&SocketAddrV4::new(addr_a, 7007).into(), Duration::from_millis(20));
        }
    });
    let mut syn = [0usize; 2];
    let end = Instant::now() + Duration::from_secs(3);
    while Instant::now() < end && !(syns.is_finished() && syn.iter().all(|&n| n > 0)) {
        for (q, p) in ports.iter_mut().enumerate() {
            syn[q] += p.recv(&mut v, 64);
            for f in v.drain(..) {
                p.release(f);
            }
            p.flush().unwrap();
        }
    }
    syns.join().unwrap();
    eprintln!("SYNs per queue: {syn:?}");
    assert!(syn.iter().all(|&n| n > 0), "both queues' sockets received: {syn:?}");
    for p in &mut ports {
        p.audit().unwrap();
    }
}

/// A server restarted right after it exits binds the same queue again: the kernel releases a
/// closed socket's hold on the queue from a workqueue that takes rtnl_lock, so with other
/// rtnl work going on (here: veth pairs churned in the peer's namespace) a bind right after
/// the close can find the queue still busy. The port waits that out instead of failing.
#[test]
fn the_queue_is_bound_again_right_after_its_port_closes() {
    let lab = lab("tqr");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let churn = {
        let (ns_b, stop) = (lab.ns_b.name.clone(), stop.clone());
        std::thread::spawn(move || {
            let ip = |args: &[&str]| std::process::Command::new("ip").args(["-n", &ns_b]).args(args).status();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let _ = ip(&["link", "add", "tqrdum", "type", "veth", "peer", "name", "tqrdup"]);
                let _ = ip(&["link", "del", "tqrdum"]);
            }
        })
    };
    let _in_a = lab.ns_a.enter().unwrap();
    let cfg = steered_cfg(&lab, AttachMode::Skb, 7004);
    let mut waited = Duration::ZERO;
    let result = (0..30).try_for_each(|i| {
        let t = Instant::now();
        let port = open(&cfg).map_err(|e| format!("open {i}: {e}"))?;
        waited = waited.max(t.elapsed());
        drop(port);
        Ok::<_, String>(())
    });
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    churn.join().unwrap();
    result.unwrap();
    eprintln!("longest open: {waited:?}");
}
