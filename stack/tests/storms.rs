//! Connection storms against the AF_XDP stack from the kernel's TCP in another namespace,
//! with the peer's default offloads: 10,000 connections at once, churn, and a SYN flood
//! with a legitimate client connecting during it. Needs root.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::{Duration, Instant};

use rr_load::{Churn, ChurnConfig, ChurnPattern, ClientReport, EchoWorkload};
use stack::codec::LengthPrefixed;
use stack::kernel::{KernelConfig, KernelTransport};
use xsk_lab::lab::Netns;

mod common;
use common::{tcp_checksum, dedicated, lab, xsk_cfg, xsk_server, MAX_FRAME};

/// Opens `n` connections from a kernel client in `ns`, `concurrency` at a time (or in
/// waves), each answered once and closed.
fn churn(ns: &Netns, bind: Ipv4Addr, addr: SocketAddrV4, pattern: ChurnPattern, concurrency: usize, n: u64) -> ClientReport {
    ns.run_in(move || {
        raise_nofile(concurrency as u64 + 1024);
        let t = KernelTransport::new(KernelConfig::default().with_bind(bind)).unwrap();
        let cfg = ChurnConfig::new(addr)
            .with_concurrency(concurrency)
            .with_pattern(pattern)
            .with_duration(Duration::from_secs(60))
            .with_max_connections(Some(n))
            .with_connect_timeout(Duration::from_secs(20))
            .with_drain_timeout(Duration::from_secs(20));
        Churn::new(t, LengthPrefixed::new(MAX_FRAME), EchoWorkload::fixed(64), cfg).run().expect("churn run")
    })
    .unwrap()
}

fn raise_nofile(want: u64) {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit/setrlimit with a valid pointer to a local struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < want {
            lim.rlim_cur = want.min(lim.rlim_max);
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}

/// The client's namespace keeps no TIME-WAIT (it closes first; see rr-bench --pattern).
fn no_time_wait(ns: &Netns) {
    ns.run(&["sysctl", "-qw", "net.ipv4.tcp_max_tw_buckets=0"]).unwrap();
}

/// 10,000 connections opened at once by a kernel client, each answered and closed, against
/// the stack with its defaults for 10,000 connections: every one established and served,
/// and no frame lost to an empty fill ring. SYNs the client had to send again (the RX ring
/// overflowed or the XDP program shed them while the stack fell behind) are printed: on a
/// 2-core machine the stack does fall behind a burst of 10,000 (see the storms study).
#[test]
fn ten_thousand_connections_at_once() {
    let lab = lab("sts");
    let (mode, a) = dedicated(&lab);
    let mut c = xsk_cfg(&lab, mode);
    c.engine.max_conns = 10_000;
    let srv = xsk_server(&lab.ns_a, c, 7300);
    let tcp0 = retrans_syns(&lab.ns_b);
    let t = Instant::now();
    let r = churn(&lab.ns_b, lab.addr_b, SocketAddrV4::new(a, 7300), ChurnPattern::Storm, 10_000, 10_000);
    eprintln!("{r} in {:?}", t.elapsed());
    let syn_retrans = retrans_syns(&lab.ns_b) - tcp0;
    let (stats, st, _) = srv.finish_all();
    eprintln!("server: {stats:?}\nstack: {st:?}");
    assert_eq!((r.requests, r.errors, r.lost, r.failed_connects), (10_000, 0, 0, 0), "{r}");
    assert_eq!(stats.accepted, 10_000);
    assert_eq!(st.port.xdp.rx_fill_ring_empty_descs, 0, "frames lost to an empty fill ring: {st:?}");
    eprintln!("SYNs the client sent again: {syn_retrans}; setup p50 {:?} p99 {:?}", r.setup_at(0.5), r.setup_at(0.99));
}

/// Connect, one request, close, 64 at a time: every connection, and nothing left behind.
#[test]
fn churn_leaves_nothing_behind() {
    let lab = lab("stc");
    no_time_wait(&lab.ns_b);
    let (mode, a) = dedicated(&lab);
    let srv = xsk_server(&lab.ns_a, xsk_cfg(&lab, mode), 7301);
    let r = churn(&lab.ns_b, lab.addr_b, SocketAddrV4::new(a, 7301), ChurnPattern::Churn, 64, 20_000);
    eprintln!("{r}");
    assert_eq!((r.requests, r.errors, r.lost, r.failed_connects), (20_000, 0, 0, 0), "{r}");
    std::thread::sleep(Duration::from_millis(300));
    let (stats, st, _) = srv.finish_all();
    assert_eq!((stats.accepted, stats.requests), (20_000, 20_000), "{stats:?}");
    assert_eq!((st.connections, st.half_open), (0, 0), "{st:?}");
    assert_eq!(st.live_sockets, st.listening, "sockets left: {st:?}");
}

/// With `--syn-cookies always`, the XDP program answers every SYN (XDP_TX) with the engine's
/// cookie, the kernel client takes those SYN-ACKs (checksums, options), and the engine turns
/// each returning ACK into a connection: every one served, none through the engine's own
/// SYN-ACK. In both address modes (shared mode marks its claimed port as listening). The
/// client's veth runs an XDP program: a veth sends native XDP_TX into its peer only then
/// (the next test has veth as it comes).
#[test]
fn every_syn_answered_in_xdp_with_cookies_always() {
    for (tag, shared) in [("stxd", false), ("stxs", true)] {
        let lab = lab(tag);
        no_time_wait(&lab.ns_b);
        let _peer = lab.peer_xdp_pass().expect("an XDP program on the client's veth");
        let (mode, a) = if shared { (stack::xsk::AddrMode::Shared, lab.addr_a) } else { dedicated(&lab) };
        let mut c = xsk_cfg(&lab, mode);
        c.engine.syn_cookies = stack::xsk::SynCookies::Always;
        c.xdp_syn_cookies = stack::xsk::XdpCookies::On;
        let srv = xsk_server(&lab.ns_a, c, 7303);
        let r = churn(&lab.ns_b, lab.addr_b, SocketAddrV4::new(a, 7303), ChurnPattern::Churn, 16, 300);
        std::thread::sleep(Duration::from_millis(300));
        let (stats, st, _) = srv.finish_all();
        eprintln!("{tag}: {r}\nstack: {st:?}");
        assert_eq!((r.requests, r.errors, r.lost, r.failed_connects), (300, 0, 0, 0), "{tag}: {r}");
        assert_eq!(stats.accepted, 300, "{tag}");
        // A SYN the client sent again is answered again: at least one per connection.
        assert!(st.device.xdp_syn_cookies >= 300, "{tag}: {st:?}");
        assert_eq!(st.syn_cookies_sent, 0, "{tag}: the engine answered SYNs itself: {st:?}");
        assert_eq!(st.syn_cookies_accepted, 300, "{tag}: {st:?}");
        assert_eq!(st.drops.bad_cookie, 0, "{tag}: {st:?}");
    }
}

/// The same, forced on, with the client's veth as veth comes (no XDP program, no NAPI): the
/// program's first SYN-ACKs are dropped by the device (its `xdp_tx_errors`), the stack sees
/// that within milliseconds, turns the program's cookies off for good and answers SYNs
/// itself: every connection is served, the first ones after their client sent the SYN again.
/// (`XdpCookies::Auto` does not turn them on over a native veth at all.)
#[test]
fn xdp_cookies_that_the_device_cannot_send_fall_back_to_the_stack() {
    let lab = lab("stxf");
    no_time_wait(&lab.ns_b);
    let (mode, a) = dedicated(&lab);
    let mut c = xsk_cfg(&lab, mode);
    c.engine.syn_cookies = stack::xsk::SynCookies::Always;
    c.xdp_syn_cookies = stack::xsk::XdpCookies::On;
    let srv = xsk_server(&lab.ns_a, c, 7304);
    let syn0 = retrans_syns(&lab.ns_b);
    let r = churn(&lab.ns_b, lab.addr_b, SocketAddrV4::new(a, 7304), ChurnPattern::Churn, 16, 300);
    let syn_again = retrans_syns(&lab.ns_b) - syn0;
    std::thread::sleep(Duration::from_millis(300));
    let (stats, st, _) = srv.finish_all();
    eprintln!("{r}\nSYNs sent again: {syn_again}\nstack: {st:?}");
    assert_eq!((r.requests, r.errors, r.lost, r.failed_connects), (300, 0, 0, 0), "{r}");
    assert_eq!(stats.accepted, 300);
    assert!(st.device.xdp_syn_cookies > 0, "the program never answered: {st:?}");
    assert!(st.device.xdp_syn_cookies <= 16, "the program went on answering SYNs the device dropped: {st:?}");
    assert!(st.syn_cookies_sent >= 300 - st.device.xdp_syn_cookies, "{st:?}");
    assert_eq!(st.syn_cookies_accepted, 300, "{st:?}");
}

/// TcpExt SYN retransmissions (TCPSynRetrans) in `ns`, from /proc/net/netstat.
fn retrans_syns(ns: &Netns) -> u64 {
    let out = ns.run(&["cat", "/proc/net/netstat"]).unwrap();
    let mut lines = out.lines().filter(|l| l.starts_with("TcpExt:"));
    let (Some(names), Some(values)) = (lines.next(), lines.next()) else { panic!("no TcpExt in {out}") };
    names
        .split_whitespace()
        .zip(values.split_whitespace())
        .find(|(n, _)| *n == "TCPSynRetrans")
        .and_then(|(_, v)| v.parse().ok())
        .expect("TCPSynRetrans")
}

/// Random-source SYNs at a raw socket's full rate for three seconds, while a kernel client
/// opens a fresh connection every 50 ms, sends one request and closes: every fresh
/// connection is served, the half-open table stays within its bound (SYN cookies past it),
/// and nothing is evicted. How fast each got in is printed (flood-bench measures it).
#[test]
fn syn_flood_with_fresh_connections_during_it() {
    use std::io::{Read, Write};
    use std::net::TcpStream;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use xsk_lab::pktgen::{FrameSpec, Proto};
    let lab = lab("stf");
    let (mode, a) = dedicated(&lab);
    let srv = xsk_server(&lab.ns_a, xsk_cfg(&lab, mode), 7302);
    let stop = Arc::new(AtomicBool::new(false));
    let (ifb, mac_a, mac_b, addr_b, stop2) = (lab.if_b.clone(), lab.mac_a, lab.mac_b, lab.addr_b, stop.clone());
    let ns_b = lab.ns_b.clone();
    let flood = std::thread::spawn(move || {
        ns_b.run_in(move || {
            let raw = xsk_lab::rawsock::RawSocket::open(&ifb).unwrap();
            let mut rng = 0x2545_f491_4f6c_dd1du64;
            let o = addr_b.octets();
            let base = FrameSpec { src_mac: mac_b, dst_mac: mac_a, src_ip: addr_b, dst_ip: a, src_port: 1, dst_port: 7302, proto: Proto::Tcp, size: 80 };
            let mut buf = vec![0u8; 1600];
            let (mut sent, end) = (0u64, Instant::now() + Duration::from_secs(3));
            while Instant::now() < end && !stop2.load(Ordering::Relaxed) {
                for _ in 0..256 {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    let mut spec = base.clone();
                    // Addresses on the subnet that no host has: their SYN-ACKs go unanswered.
                    spec.src_ip = Ipv4Addr::new(o[0], o[1], o[2], 150 + (rng % 100) as u8);
                    spec.src_port = 1024 + (rng >> 16) as u16 % 60000;
                    let n = xsk_lab::pktgen::build(&spec, &mut buf);
                    let f = &mut buf[..n];
                    f[47] = 0x02; // SYN
                    f[38..42].copy_from_slice(&((rng >> 32) as u32).to_be_bytes());
                    tcp_checksum(f);
                    if raw.send(f).is_ok() {
                        sent += 1;
                    }
                }
            }
            sent
        })
        .unwrap()
    });
    std::thread::sleep(Duration::from_millis(300));
    let setups = lab
        .ns_b
        .run_in(move || {
            let (mut setups, mut failures) = (Vec::new(), Vec::new());
            let start = Instant::now();
            for i in 0..40u8 {
                let t = Instant::now();
                let mut s = match TcpStream::connect_timeout(&SocketAddrV4::new(a, 7302).into(), Duration::from_secs(10)) {
                    Ok(s) => s,
                    Err(e) => {
                        failures.push(format!("connection {i} at {:?}: connect: {e}", t - start));
                        continue;
                    }
                };
                setups.push(t.elapsed());
                s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                let req = [0u8, 0, 0, 4, i, i, i, i];
                let exchange = s.write_all(&req[..4]).and_then(|_| s.write_all(&req[4..])).and_then(|_| {
                    let mut resp = [0u8; 8];
                    s.read_exact(&mut resp).map(|_| resp)
                });
                match exchange {
                    Ok(resp) => assert_eq!(resp[4..], req[4..]),
                    Err(e) => failures.push(format!("connection {i} (local {:?}) at {:?}: exchange: {e} after {:?}", s.local_addr().ok(), t - start, t.elapsed())),
                }
                drop(s);
                std::thread::sleep(Duration::from_millis(50));
            }
            (setups, failures)
        })
        .unwrap();
    let (setups, failures) = setups;
    stop.store(true, Ordering::Relaxed);
    let sent = flood.join().unwrap();
    let (_, st, _) = srv.finish_all();
    let mut sorted = setups.clone();
    sorted.sort();
    eprintln!("{sent} flood SYNs; fresh connections' setup: median {:?}, max {:?}; stack {st:?}", sorted.get(sorted.len() / 2).copied().unwrap_or_default(), sorted.last().copied().unwrap_or_default());
    assert!(failures.is_empty(), "fresh connections failed during the flood: {failures:#?}\nstack {st:?}");
    assert!(sent > 10_000, "the flood did not flood: {sent}");
    assert!(st.syn_cookies_sent > 0, "the flood never filled the half-open table: {st:?}");
    assert_eq!(st.drops.syn_backlog, 0, "{st:?}");
    // The half-open limit with cookies: half of max_conns (1,024 by default).
    assert!(st.half_open <= 512, "{st:?}");
}
