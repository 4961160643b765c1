//! SYN shedding in the steering program.

use std::time::Duration;

use xsk_device::{Iface, Setting};
use xsk_io::port::Port;
use xsk_io::AttachMode;
use xsk_lab::lab::Lab;
use xsk_lab::pktgen::{self, FrameSpec, Proto};
use xsk_lab::rawsock::RawSocket;

use super::{lab, open, recv_one, spec, steered_cfg};

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
    cfg.syn_shed = Setting::Value(1 << 20);
    let (iface, mut port) = Iface::open(&cfg).unwrap();
    assert_eq!(port.shed_keep(), Some(1 << 20), "this kernel loads the program variant that sheds");
    // The ephemeral range by config: steered without a port-map entry, SYNs shed there too.
    iface.steer().unwrap().add_tcp_port_range(40000..=40010).unwrap();
    send_tcp(&lab, &[(7002, 0x02), (7002, 0x12), (7002, 0x18), (40005, 0x02), (40005, 0x18), (40011, 0x18)], 10);
    let got = drain_tcp(&mut port);
    assert!(!got.iter().any(|&(_, fl)| fl == 0x02), "a pure SYN got through: {got:?}");
    let count = |p: u16, fl: u8| got.iter().filter(|&&g| g == (p, fl)).count();
    assert_eq!((count(7002, 0x12), count(7002, 0x18), count(40005, 0x18)), (10, 10, 10), "{got:?}");
    assert_eq!(got.len(), 30, "port 40011 is outside the range: {got:?}");
    let c = iface.steer().unwrap().counters().unwrap();
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
    cfg.syn_shed = Setting::Value(64);
    let (iface, mut port) = Iface::open(&cfg).unwrap();
    assert_eq!(port.shed_keep(), Some(64));
    send_tcp(&lab, &[(7002, 0x02), (7002, 0x18)], 20);
    let got = drain_tcp(&mut port);
    assert_eq!(got.iter().filter(|&&(_, fl)| fl == 0x02).count(), 20, "{got:?}");
    assert_eq!(got.len(), 40);
    let c = iface.steer().unwrap().counters().unwrap();
    assert_eq!((c.shed_rx, c.shed_fill, c.shed_standing), (0, 0, 0), "{c:?}");
    // Off: nothing is shed whatever the rings hold.
    drop((iface, port));
    let mut cfg = steered_cfg(&lab, AttachMode::Skb, 7002);
    cfg.syn_shed = Setting::Off;
    let port = open(&cfg).unwrap();
    assert_eq!(port.shed_keep(), None);
}
