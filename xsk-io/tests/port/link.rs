//! A link that goes down and up under traffic.

use std::net::SocketAddrV4;
use std::time::{Duration, Instant};

use xsk_io::AttachMode;
use xsk_lab::pktgen::{self, Proto};
use xsk_lab::rawsock::RawSocket;

use super::{lab, open, spec, steered_cfg};

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
    let mut port = open(&steered_cfg(&lab, AttachMode::Skb, 7030)).unwrap();
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
