//! Integration tests of the port on a real veth pair between two network
//! namespaces, with the kernel on the other side. Need root.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddrV4, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use xsk_io::port::{Knob, Port, PortConfig, SteerSpec};
use xsk_io::socket::RingSizes;
use xsk_io::steer::SteerFlags;
use xsk_io::umem::{Frame, UmemConfig};
use xsk_io::AttachMode;
use xsk_lab::lab::{Lab, LabConfig};
use xsk_lab::pktgen::{self, FrameSpec, Proto};
use xsk_lab::rawsock::RawSocket;

fn require_root() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        panic!("this integration test needs root (network namespaces, XDP, AF_XDP)");
    }
}

fn lab(tag: &str) -> Lab {
    require_root();
    xsk_lab::lab::sweep_stale(tag);
    Lab::new(&LabConfig { prefix: tag.into(), ..LabConfig::default() }).expect("building the veth lab")
}

fn spec(lab: &Lab, a_to_b: bool, proto: Proto, dst_port: u16, size: usize) -> FrameSpec {
    let (src_mac, dst_mac, src_ip, dst_ip) = if a_to_b {
        (lab.mac_a, lab.mac_b, lab.addr_a, lab.addr_b)
    } else {
        (lab.mac_b, lab.mac_a, lab.addr_b, lab.addr_a)
    };
    FrameSpec { src_mac, dst_mac, src_ip, dst_ip, src_port: 40000, dst_port, proto, size }
}

/// Marks a frame with a sequence number in its payload (after the TCP/UDP header).
fn stamp(buf: &mut [u8], proto: Proto, seq: u32) {
    let at = pktgen::min_size(proto);
    if let Some(b) = buf.get_mut(at..at + 4) {
        b.copy_from_slice(&seq.to_be_bytes());
    }
}

fn steered_cfg(lab: &Lab, mode: AttachMode, port: u16) -> PortConfig {
    let mut cfg = PortConfig::new(&lab.if_a);
    cfg.attach = mode;
    cfg.steer = Some(SteerSpec { addr: lab.addr_a, tcp_ports: vec![port], flags: SteerFlags::default() });
    cfg
}

fn recv_one(port: &mut Port, timeout: Duration) -> Option<Frame> {
    let mut v = Vec::with_capacity(1);
    let end = Instant::now() + timeout;
    while Instant::now() < end {
        if port.recv(&mut v, 1) == 1 {
            return v.pop();
        }
        port.flush().unwrap();
        std::thread::sleep(Duration::from_millis(1));
    }
    None
}

#[test]
fn frames_cross_byte_exact_both_ways() {
    let lab = lab("tpx");
    for mode in [AttachMode::Skb, AttachMode::Drv] {
        let _in_a = lab.ns_a.enter().unwrap();
        let mut port = Port::open(&steered_cfg(&lab, mode, 7001)).unwrap();
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
    let mut port = Port::open(&steered_cfg(&lab, AttachMode::Skb, 7002)).unwrap();
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
    let c = port.steer().unwrap().counters().unwrap();
    assert!(c.steered >= 1 && c.passed >= 1, "{c:?}");
    port.audit().unwrap();
}

#[test]
fn missing_kernel_knobs_are_detected_and_the_port_runs() {
    let lab = lab("tpf");
    let _in_a = lab.ns_a.enter().unwrap();
    let mut cfg = PortConfig::new(&lab.if_a);
    cfg.rings = RingSizes { fill: 512, comp: 512, rx: 512, tx: 512 };
    let mut port = Port::open(&cfg).unwrap();
    let f = port.features().clone();
    // Probe option 10 on a separate socket to know what this kernel has.
    let probe = xsk_io::socket::XskSocket::new().unwrap();
    let umem = xsk_io::umem::Umem::new(UmemConfig { frame_count: 64, ..Default::default() }).unwrap();
    let _rings = probe.setup(&umem, RingSizes { fill: 64, comp: 64, rx: 64, tx: 64 }).unwrap();
    let has10 = match probe.set_xdp_u32(xsk_io::sys::XDP_GENERIC_XMIT_BATCH, 32) {
        Ok(()) => true,
        Err(e) => {
            assert_eq!(e.raw_os_error(), Some(libc::ENOPROTOOPT), "unexpected error probing option 10: {e}");
            false
        }
    };
    assert_eq!(f.xmit_batch.is_some(), has10, "{f}");
    if has10 {
        assert!(f.xmit_batch.unwrap() <= f.tx_budget.unwrap_or(32));
    }
    let has9 = probe.set_xdp_u32(xsk_io::sys::XDP_MAX_TX_SKB_BUDGET, 64).is_ok();
    assert_eq!(f.tx_budget, has9.then_some(512), "{f}");
    // And the port still sends.
    let s = spec(&lab, true, Proto::Udp, 9, 64);
    for _ in 0..100 {
        let mut fr = port.alloc().unwrap();
        let n = pktgen::build(&s, port.umem().buf_mut(&mut fr));
        fr.set_len(n);
        port.send(fr).unwrap();
    }
    assert!(port.drain_tx(Duration::from_secs(2)).unwrap());
    assert_eq!(port.stats().port.completions, 100);
    port.audit().unwrap();
    // A second port on the interface in the same process is refused: it
    // would record the first one's tuning as the original state.
    let e = Port::open(&cfg).err().expect("a second owner of the interface must be refused").to_string();
    assert!(e.contains("in use by another xsk-io port (this process"), "{e}");
    drop(port);
    // Explicit knobs: a budget above the ring is refused with a clear error.
    if has9 {
        let mut bad = cfg.clone();
        bad.tx_budget = Knob::Value(4096);
        let e = Port::open(&bad).err().expect("budget above the TX ring must fail").to_string();
        assert!(e.contains("XDP_MAX_TX_SKB_BUDGET"), "{e}");
    }
}

/// A million frames through two ports with rings small enough to be full
/// most of the time; afterwards every frame of both UMEMs is accounted for.
#[test]
fn frame_accounting_survives_a_million_frames_with_full_rings() {
    let lab = lab("tpa");
    const TOTAL: u32 = 1_000_000;
    let small = RingSizes { fill: 64, comp: 64, rx: 64, tx: 64 };
    let umem = UmemConfig { frame_count: 192, frame_size: 2048, ..Default::default() };
    // B reflects everything steered to it back to A.
    let (ifb, addr_b) = (lab.if_b.clone(), lab.addr_b);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stop_b = stop.clone();
    let reflector = {
        let ns_b = lab.ns_b.name.clone();
        std::thread::spawn(move || {
            let ns = xsk_lab::lab::Netns { name: ns_b };
            let _g = ns.enter().unwrap();
            let mut cfg = PortConfig::new(&ifb);
            cfg.rings = small;
            cfg.umem = umem;
            cfg.attach = AttachMode::Skb;
            cfg.steer = Some(SteerSpec { addr: addr_b, tcp_ports: vec![7006], flags: SteerFlags::default() });
            let mut b = Port::open(&cfg).unwrap();
            let mut v = Vec::with_capacity(32);
            while !stop_b.load(std::sync::atomic::Ordering::Relaxed) {
                b.recv(&mut v, 32);
                for mut f in v.drain(..) {
                    let d = b.umem().data_mut(&mut f);
                    let (dst, src) = d.split_at_mut(6);
                    dst.swap_with_slice(&mut src[..6]);
                    // swap IPs and ports so A's program steers it
                    let mut ip = [0u8; 4];
                    ip.copy_from_slice(&d[26..30]);
                    d.copy_within(30..34, 26);
                    d[30..34].copy_from_slice(&ip);
                    d.swap(34, 36);
                    d.swap(35, 37);
                    if let Err(f) = b.send(f) {
                        b.release(f);
                    }
                }
                b.flush().unwrap();
            }
            b.drain_tx(Duration::from_secs(2)).unwrap();
            let mut v = Vec::with_capacity(64);
            while b.recv(&mut v, 64) > 0 {
                for f in v.drain(..) {
                    b.release(f);
                }
            }
            (b.audit(), b.stats())
        })
    };
    std::thread::sleep(Duration::from_millis(500));
    let _in_a = lab.ns_a.enter().unwrap();
    let mut cfg = PortConfig::new(&lab.if_a);
    cfg.rings = small;
    cfg.umem = umem;
    cfg.attach = AttachMode::Skb;
    // A's traffic to B uses dst port 7006; B swaps ports so replies come to 40000.
    cfg.steer = Some(SteerSpec { addr: lab.addr_a, tcp_ports: vec![40000], flags: SteerFlags::default() });
    let mut a = Port::open(&cfg).unwrap();
    let s = spec(&lab, true, Proto::Tcp, 7006, 128);
    let (mut sent, mut got, mut bad) = (0u32, 0u32, 0u32);
    let mut v = Vec::with_capacity(64);
    let deadline = Instant::now() + Duration::from_secs(120);
    while sent < TOTAL && Instant::now() < deadline {
        for _ in 0..64 {
            if sent == TOTAL {
                break;
            }
            let Some(mut f) = a.alloc() else { break };
            let n = pktgen::build(&s, a.umem().buf_mut(&mut f));
            stamp(a.umem().buf_mut(&mut f), Proto::Tcp, sent);
            f.set_len(n);
            match a.send(f) {
                Ok(()) => sent += 1,
                Err(f) => {
                    a.release(f);
                    break;
                }
            }
        }
        a.flush().unwrap();
        a.recv(&mut v, 64);
        for f in v.drain(..) {
            let d = a.umem().data(&f);
            if d.len() != 128 || d[36..38] != [0x9c, 0x40] {
                bad += 1;
            }
            got += 1;
            a.release(f);
        }
    }
    assert_eq!(sent, TOTAL, "sending a million frames took too long");
    a.drain_tx(Duration::from_secs(2)).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    while a.recv(&mut v, 64) > 0 {
        got += v.len() as u32;
        for f in v.drain(..) {
            a.release(f);
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (audit_b, stats_b) = reflector.join().unwrap();
    let acc_a = a.audit().expect("frame accounting of A");
    let acc_b = audit_b.expect("frame accounting of B");
    let stats_a = a.stats();
    eprintln!("A: sent {sent} got back {got} {acc_a:?} {stats_a:?}\nB: {acc_b:?} {stats_b:?}");
    assert_eq!(bad, 0, "reflected frames corrupted");
    // How much comes back depends on scheduling (B drops when its fill ring
    // runs dry, which is the point); some of it must, checked byte by byte.
    assert!(got >= 1000, "hardly anything came back: {got}");
    // The rings really were full at times (that is the point of this test).
    let full = stats_a.port.tx_ring_full + stats_a.xdp.rx_ring_full + stats_b.xdp.rx_ring_full + stats_b.xdp.rx_dropped + stats_a.xdp.rx_dropped + stats_a.xdp.rx_fill_ring_empty_descs + stats_b.xdp.rx_fill_ring_empty_descs;
    assert!(full > 0, "rings never filled: the test did not test full rings");
    assert_eq!(acc_a.app, 0);
    assert_eq!(acc_a.tx + acc_a.comp_ring, 0);
    let _ = Ipv4Addr::LOCALHOST;
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
    cfg.umem = UmemConfig { frame_count: 1024, ..Default::default() };
    let mut ports = Port::open_all(&cfg).unwrap();
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

/// Issue 9 item 7: `ip link set dev IF down; up` under traffic in both
/// directions. The port must not fail (sendto says ENETDOWN while the device
/// is down), must say it waited, and must carry traffic again afterwards;
/// then the peer goes down and up (our carrier drops: sendto says EBUSY for
/// each frame the kernel drops), which must be counted. The frame books stay
/// exact: every frame sent completes, dropped ones too.
#[test]
fn link_flap_under_traffic_is_survived_and_counted() {
    use std::net::UdpSocket;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::Arc;

    let lab = lab("tlf");
    let stop = Arc::new(AtomicBool::new(false));
    let got_udp = Arc::new(AtomicU64::new(0));
    // Peer side: a kernel UDP socket counting A's datagrams, and a raw socket
    // sending TCP frames to A's steered port every millisecond.
    let peer = {
        let (ns_b, ifb, addr_b) = (lab.ns_b.clone(), lab.if_b.clone(), lab.addr_b);
        let s = spec(&lab, false, Proto::Tcp, 7030, 60);
        let (stop, got_udp) = (stop.clone(), got_udp.clone());
        std::thread::spawn(move || {
            let _in_b = ns_b.enter().unwrap();
            let udp = UdpSocket::bind(SocketAddrV4::new(addr_b, 9030)).unwrap();
            udp.set_nonblocking(true).unwrap();
            let raw = RawSocket::open(&ifb).unwrap();
            let mut buf = [0u8; 2048];
            let n = pktgen::build(&s, &mut buf);
            let frame = buf[..n].to_vec();
            while !stop.load(Ordering::Relaxed) {
                // Fails while the link is down: that is the point.
                let _ = raw.send(&frame);
                while udp.recv(&mut buf).is_ok() {
                    got_udp.fetch_add(1, Ordering::Relaxed);
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        })
    };
    let _in_a = lab.ns_a.enter().unwrap();
    let mut port = Port::open(&steered_cfg(&lab, AttachMode::Skb, 7030)).unwrap();
    let s = spec(&lab, true, Proto::Udp, 9030, 100);
    let mut v = Vec::with_capacity(64);
    let start = Instant::now();
    let (mut rx_at_up, mut udp_at_up, mut down_seen) = (None, None, false);
    let mut phase = 0;
    while start.elapsed() < Duration::from_millis(4200) {
        let t = start.elapsed();
        if phase == 0 && t > Duration::from_millis(1000) {
            lab.ns_a.run(&["ip", "link", "set", "dev", &lab.if_a, "down"]).unwrap();
            phase = 1;
        } else if phase == 1 && t > Duration::from_millis(1600) {
            lab.ns_a.run(&["ip", "link", "set", "dev", &lab.if_a, "up"]).unwrap();
            rx_at_up = Some(port.stats().port.rx_frames);
            udp_at_up = Some(got_udp.load(Ordering::Relaxed));
            phase = 2;
        } else if phase == 2 && t > Duration::from_millis(2200) {
            // The peer down: ours stays up but loses its carrier, so the
            // kernel takes frames and drops them (sendto: EBUSY).
            lab.ns_b.run(&["ip", "link", "set", "dev", &lab.if_b, "down"]).unwrap();
            phase = 3;
        } else if phase == 3 && t > Duration::from_millis(2600) {
            lab.ns_b.run(&["ip", "link", "set", "dev", &lab.if_b, "up"]).unwrap();
            phase = 4;
        }
        for _ in 0..8 {
            let Some(mut f) = port.alloc() else { break };
            let n = pktgen::build(&s, port.umem().buf_mut(&mut f));
            f.set_len(n);
            if let Err(f) = port.send(f) {
                port.release(f);
                break;
            }
        }
        port.flush().expect("flush must survive the link going down");
        down_seen |= port.link_down();
        port.recv(&mut v, 64);
        for f in v.drain(..) {
            port.release(f);
        }
        std::thread::sleep(Duration::from_micros(500));
    }
    assert!(port.drain_tx(Duration::from_secs(3)).unwrap(), "TX did not drain after the link came back");
    stop.store(true, Ordering::Relaxed);
    peer.join().unwrap();
    while port.recv(&mut v, 64) > 0 {
        for f in v.drain(..) {
            port.release(f);
        }
    }
    let st = port.stats().port;
    assert!(down_seen && st.link_downs >= 1, "the port never noticed the link going down: {st:?}");
    assert!(!port.link_down(), "still waiting for a link that is up: {st:?}");
    let (rx_at_up, udp_at_up) = (rx_at_up.unwrap(), udp_at_up.unwrap());
    assert!(st.rx_frames > rx_at_up + 100, "RX did not resume after the link came back: {rx_at_up} -> {st:?}");
    let udp = got_udp.load(Ordering::Relaxed);
    assert!(udp > udp_at_up + 100, "the peer got nothing after the link came back: {udp_at_up} -> {udp}");
    assert!(st.tx_dropped >= 1, "carrier down: no EBUSY drop counted: {st:?}");
    assert_eq!(st.tx_frames, st.completions, "every frame given to the kernel completes, dropped ones too: {st:?}");
    let a = port.audit().unwrap();
    assert_eq!((a.tx, a.comp_ring, a.app), (0, 0, 0), "{a:?}");
    eprintln!("link flap: {st:?}; peer got {udp} datagrams");
}

/// `publish` leaves the TX kick owed and sends nothing by itself; `wait`
/// makes it inside its poll(2) (no sendto), and wakes for RX frames and for
/// the extra descriptor.
#[test]
fn the_wait_makes_the_kick_publish_left() {
    let lab = lab("tpw");
    let _in_a = lab.ns_a.enter().unwrap();
    let mut port = Port::open(&steered_cfg(&lab, AttachMode::Drv, 7002)).unwrap();
    assert!(port.features().need_wakeup, "copy mode on veth binds with need_wakeup");
    let raw = lab.ns_b.run_in({
        let ifb = lab.if_b.clone();
        move || RawSocket::open(&ifb)
    });
    let raw = raw.unwrap().unwrap();
    let mut buf = vec![0u8; 2048];
    // The peer's frames of ours (UDP to port 9), skipping its own chatter.
    let mut ours = |timeout: Duration| {
        let end = Instant::now() + timeout;
        let mut n = 0;
        while let Some(got) = raw.recv(&mut buf, end.saturating_duration_since(Instant::now())).unwrap() {
            if buf[12..14] == [0x08, 0x00] && got >= 42 && buf[23] == 17 {
                n += 1;
            }
            if Instant::now() >= end {
                break;
            }
        }
        n
    };

    for i in 0..3u32 {
        let s = spec(&lab, true, Proto::Udp, 9, 64);
        let mut f = port.alloc().unwrap();
        let n = pktgen::build(&s, port.umem().buf_mut(&mut f));
        stamp(port.umem().buf_mut(&mut f), Proto::Udp, i);
        f.set_len(n);
        port.send(f).unwrap();
    }
    port.publish().unwrap();
    assert!(port.kick_owed());
    assert_eq!(ours(Duration::from_millis(200)), 0, "published frames went out without a kick");

    let t0 = Instant::now();
    let ready = port.wait(None, Some(Duration::from_millis(50))).unwrap();
    assert!(!ready.rx && !ready.extra, "nothing to read: {ready:?}");
    assert!(t0.elapsed() >= Duration::from_millis(40), "the wait did not sleep");
    assert!(!port.kick_owed());
    assert_eq!(ours(Duration::from_secs(2)), 3, "the wait did not transmit the TX ring");
    let c = port.stats().port;
    assert_eq!((c.kicks, c.folded_kicks), (0, 1), "{c:?}");
    assert!(port.drain_tx(Duration::from_secs(2)).unwrap());

    // More frames in flight than one poll(2) may send (32 per call before
    // Linux 6.17): kicked at once, none left for the sleep.
    for i in 0..64u32 {
        let s = spec(&lab, true, Proto::Udp, 9, 64);
        let mut f = port.alloc().unwrap();
        let n = pktgen::build(&s, port.umem().buf_mut(&mut f));
        stamp(port.umem().buf_mut(&mut f), Proto::Udp, 100 + i);
        f.set_len(n);
        port.send(f).unwrap();
    }
    port.publish().unwrap();
    assert!(!port.kick_owed(), "64 frames in flight left to the wait");
    assert_eq!(port.stats().port.kicks, 1);
    assert_eq!(ours(Duration::from_secs(2)), 64, "a burst was not sent whole");
    assert!(port.drain_tx(Duration::from_secs(2)).unwrap());

    // A frame for the steered port ends the wait early.
    let s = spec(&lab, false, Proto::Tcp, 7002, 64);
    let mut frame = vec![0u8; 64];
    let n = pktgen::build(&s, &mut frame);
    raw.send(&frame[..n]).unwrap();
    let t0 = Instant::now();
    let ready = port.wait(None, Some(Duration::from_secs(5))).unwrap();
    assert!(ready.rx && t0.elapsed() < Duration::from_secs(4), "{ready:?} after {:?}", t0.elapsed());
    let f = recv_one(&mut port, Duration::from_secs(1)).expect("the frame the wait saw");
    port.release(f);

    // So does the other descriptor.
    let (mut w, r) = std::os::unix::net::UnixStream::pair().unwrap();
    w.write_all(b"x").unwrap();
    let ready = port.wait(Some(std::os::fd::AsFd::as_fd(&r)), Some(Duration::from_secs(5))).unwrap();
    assert!(ready.extra && !ready.rx, "{ready:?}");
    port.audit().unwrap();
}

/// Sends, from ns_b, `n` TCP frames to each `(port, flags)` of `what` (flags byte of the TCP
/// header: 0x02 SYN, 0x12 SYN-ACK, 0x18 PSH-ACK with payload).
fn send_tcp(lab: &Lab, what: &[(u16, u8)], n: usize) {
    let ifb = lab.if_b.clone();
    let specs: Vec<(FrameSpec, u8)> = what.iter().map(|&(p, fl)| (spec(lab, false, Proto::Tcp, p, 64), fl)).collect();
    lab.ns_b
        .run_in(move || {
            let raw = RawSocket::open(&ifb).unwrap();
            let mut buf = [0u8; 128];
            for _ in 0..n {
                for (s, fl) in &specs {
                    let len = pktgen::build(s, &mut buf);
                    buf[14 + 20 + 13] = *fl; // the program does not check checksums
                    raw.send(&buf[..len]).unwrap();
                }
            }
        })
        .unwrap();
}

/// Receives until nothing came for 300 ms; returns (destination port, TCP flags) of each frame.
fn drain_tcp(port: &mut Port) -> Vec<(u16, u8)> {
    let mut got = Vec::new();
    while let Some(f) = recv_one(port, Duration::from_millis(300)) {
        let d = port.umem().data(&f);
        got.push((u16::from_be_bytes([d[36], d[37]]), d[14 + 20 + 13]));
        port.release(f);
    }
    got
}

#[test]
fn syn_shedding_drops_only_pure_syns_once_the_budget_is_spent_and_counts_them() {
    let lab = lab("tsh");
    let _in_a = lab.ns_a.enter().unwrap();
    let mut cfg = steered_cfg(&lab, AttachMode::Skb, 7002);
    // A reserve larger than the RX ring: the budget is always spent, every pure SYN is shed.
    cfg.syn_shed = Knob::Value(1 << 20);
    let mut port = Port::open(&cfg).unwrap();
    assert_eq!(port.shed_keep(), Some(1 << 20), "this kernel loads the program variant that sheds");
    // The ephemeral range by config: steered without a port-map entry, SYNs shed there too.
    port.steer().unwrap().add_tcp_port_range(40000..=40010).unwrap();
    send_tcp(&lab, &[(7002, 0x02), (7002, 0x12), (7002, 0x18), (40005, 0x02), (40005, 0x18), (40011, 0x18)], 10);
    let got = drain_tcp(&mut port);
    assert!(!got.iter().any(|&(_, fl)| fl == 0x02), "a pure SYN got through: {got:?}");
    let count = |p: u16, fl: u8| got.iter().filter(|&&g| g == (p, fl)).count();
    assert_eq!((count(7002, 0x12), count(7002, 0x18), count(40005, 0x18)), (10, 10, 10), "{got:?}");
    assert_eq!(got.len(), 30, "port 40011 is outside the range: {got:?}");
    let c = port.steer().unwrap().counters().unwrap();
    assert_eq!(c.shed_rx + c.shed_fill + c.shed_standing, 20, "{c:?}");
    let st = port.stats().shed;
    assert_eq!(st.syn_dropped_rx_backlog + st.syn_dropped_fill_low + st.syn_dropped_standing_queue, 20, "{st:?}");
    port.audit().unwrap();
}

#[test]
fn syns_are_not_shed_while_the_rings_have_room() {
    let lab = lab("tsn");
    let _in_a = lab.ns_a.enter().unwrap();
    let mut cfg = steered_cfg(&lab, AttachMode::Skb, 7002);
    cfg.syn_shed = Knob::Value(64);
    let mut port = Port::open(&cfg).unwrap();
    assert_eq!(port.shed_keep(), Some(64));
    send_tcp(&lab, &[(7002, 0x02), (7002, 0x18)], 20);
    let got = drain_tcp(&mut port);
    assert_eq!(got.iter().filter(|&&(_, fl)| fl == 0x02).count(), 20, "{got:?}");
    assert_eq!(got.len(), 40);
    let c = port.steer().unwrap().counters().unwrap();
    assert_eq!((c.shed_rx, c.shed_fill, c.shed_standing), (0, 0, 0), "{c:?}");
    // Off: nothing is shed whatever the rings hold.
    drop(port);
    let mut cfg = steered_cfg(&lab, AttachMode::Skb, 7002);
    cfg.syn_shed = Knob::Off;
    let port = Port::open(&cfg).unwrap();
    assert_eq!(port.shed_keep(), None);
}
