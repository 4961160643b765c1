//! The frame books under load: every frame of the UMEM accounted for after a
//! million frames through full rings.

use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use xsk_device::{PortConfig, SteerSpec};
use xsk_io::socket::RingSizes;
use xsk_io::umem::UmemConfig;
use xsk_io::AttachMode;
use xsk_lab::pktgen::{self, Proto};

use super::{lab, open, spec, stamp};

/// A million frames through two ports with rings small enough to be full
/// most of the time; afterwards every frame of both UMEMs is accounted for.
#[test]
fn frame_accounting_survives_a_million_frames_with_full_rings() {
    let lab = lab("tpa");
    const TOTAL: u32 = 1_000_000;
    let small = RingSizes { fill: 64, comp: 64, rx: 64, tx: 64 };
    let umem = UmemConfig::default().with_frame_count(192).with_frame_size(2048);
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
            cfg.steer = Some(SteerSpec::new(addr_b).with_tcp_ports(vec![7006]));
            let mut b = open(&cfg).unwrap();
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
    cfg.steer = Some(SteerSpec::new(lab.addr_a).with_tcp_ports(vec![40000]));
    let mut a = open(&cfg).unwrap();
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
