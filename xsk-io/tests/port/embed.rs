//! The data plane alone: a port bound with `Port::bind` on a device someone
//! else set up (here the test, playing an embedder with an XDP program of its
//! own; `examples/embedder.rs` is the same with a pinned `XSKMAP`). Nothing of
//! `xsk-device`'s preparation runs: no ownership record, no tuning.

use std::os::fd::AsFd;
use std::time::Duration;

use xsk_device::steer::{Steer, SteerFlags};
use xsk_io::port::{Port, QueueConfig};
use xsk_io::AttachMode;
use xsk_lab::pktgen::{self, Proto};
use xsk_lab::rawsock::RawSocket;

use super::{lab, recv_one, spec};

#[test]
fn a_port_bound_alone_moves_frames_both_ways_on_a_device_set_up_elsewhere() {
    let lab = lab("tem");
    let _in_a = lab.ns_a.enter().unwrap();
    let mut port = Port::bind(&lab.if_a, 0, &QueueConfig::default()).unwrap();
    assert_eq!(port.features().attach, None, "no device setup said where a program runs");
    // The embedder's own setup: a program that redirects TCP to port 7009 into
    // the XSKMAP entry of queue 0, which holds the port's socket.
    let program = Steer::attach(&lab.if_a, AttachMode::Skb).unwrap();
    program.set_addr(lab.addr_a, SteerFlags::NONE).unwrap();
    program.add_tcp_port(7009).unwrap();
    program.register_xsk(0, port.as_fd()).unwrap();
    port.set_device(String::from("veth"), Some(program.mode()));

    let raw = lab.ns_b.run_in({
        let ifb = lab.if_b.clone();
        move || RawSocket::open(&ifb)
    });
    let raw = raw.unwrap().unwrap();
    for size in [54usize, 300, 1514] {
        // peer -> port
        let mut buf = vec![0u8; size];
        let n = pktgen::build(&spec(&lab, false, Proto::Tcp, 7009, size), &mut buf);
        raw.send(&buf[..n]).unwrap();
        let f = recv_one(&mut port, Duration::from_secs(2)).expect("the redirected frame reached the port");
        assert_eq!(port.umem().data(&f), &buf[..n], "size {size}: byte-exact at the port");
        port.release(f);
        // port -> peer
        let s = spec(&lab, true, Proto::Udp, 9, size);
        let mut f = port.alloc().unwrap();
        let n = pktgen::build(&s, port.umem().buf_mut(&mut f));
        f.set_len(n);
        let sent = port.umem().data(&f).to_vec();
        port.send(f).unwrap();
        port.flush().unwrap();
        let mut got = vec![0u8; 2048];
        let len = loop {
            let len = raw.recv(&mut got, Duration::from_secs(2)).unwrap().expect("the frame reached the peer");
            if got[12..14] == [0x08, 0x00] {
                break len;
            }
        };
        assert_eq!(&got[..len], &sent[..], "size {size}: byte-exact at the peer");
    }
    assert!(port.drain_tx(Duration::from_secs(2)).unwrap());
    let a = port.audit().unwrap();
    assert_eq!(a.app, 0, "{a:?}");
    let c = port.stats().port;
    assert_eq!((c.rx_frames, c.tx_frames), (3, 3), "{c:?}");
}
