//! The TX kick: the kernel options for it (present or not), and the kick
//! that flush_before_wait leaves to the wait.

use std::io::Write;
use std::time::{Duration, Instant};

use xsk_device::{BusyPoll, PortConfig, Setting};
use xsk_io::port::Port;
use xsk_io::socket::RingSizes;
use xsk_io::umem::UmemConfig;
use xsk_io::AttachMode;
use xsk_lab::pktgen::{self, Proto};
use xsk_lab::rawsock::RawSocket;

use super::{lab, open, recv_one, spec, stamp, steered_cfg};

#[test]
fn missing_kernel_options_are_detected_and_the_port_runs() {
    let lab = lab("tpf");
    let _in_a = lab.ns_a.enter().unwrap();
    let mut cfg = PortConfig::new(&lab.if_a);
    cfg.rings = RingSizes { fill: 512, comp: 512, rx: 512, tx: 512 };
    let mut port = open(&cfg).unwrap();
    let f = port.features().clone();
    // Probe option 10 on a separate socket to know what this kernel has.
    let probe = xsk_io::socket::XskSocket::new().unwrap();
    let umem = xsk_io::umem::Umem::new(UmemConfig::default().with_frame_count(64)).unwrap();
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
    let e = open(&cfg).err().expect("a second owner of the interface must be refused").to_string();
    assert!(e.contains("in use by another xsk-io port (this process"), "{e}");
    drop(port);
    // Explicit settings: a budget above the ring is refused with a clear error.
    if has9 {
        let mut bad = cfg.clone();
        bad.tx_budget = Setting::Value(4096);
        let e = open(&bad).err().expect("budget above the TX ring must fail").to_string();
        assert!(e.contains("XDP_MAX_TX_SKB_BUDGET"), "{e}");
    }
}

/// `flush_before_wait` leaves the TX kick deferred and sends nothing by itself; `wait`
/// makes it inside its poll(2) (no sendto), and wakes for RX frames and for
/// the extra descriptor.
#[test]
fn the_wait_makes_the_kick_flush_before_wait_left() {
    let lab = lab("tpw");
    let _in_a = lab.ns_a.enter().unwrap();
    let mut port = open(&steered_cfg(&lab, AttachMode::Drv, 7002)).unwrap();
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
    port.flush_before_wait().unwrap();
    assert!(port.kick_deferred());
    assert_eq!(ours(Duration::from_millis(200)), 0, "published frames went out without a kick");

    let t0 = Instant::now();
    let ready = port.wait(None, Some(Duration::from_millis(50))).unwrap();
    assert!(!ready.rx && !ready.extra, "nothing to read: {ready:?}");
    assert!(t0.elapsed() >= Duration::from_millis(40), "the wait did not sleep");
    assert!(!port.kick_deferred());
    assert_eq!(ours(Duration::from_secs(2)), 3, "the wait did not transmit the TX ring");
    let c = port.stats().port;
    assert_eq!((c.kicks, c.kicks_in_wait), (0, 1), "{c:?}");
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
    port.flush_before_wait().unwrap();
    assert!(!port.kick_deferred(), "64 frames in flight left to the wait");
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

/// Busy polling: with microseconds above 0 the socket gets SO_PREFER_BUSY_POLL
/// and SO_BUSY_POLL (and its budget), and an empty `recv` drives the kernel (one
/// `recvfrom`); with 0 the caller spins on its own: no option, no syscall.
#[test]
fn busy_polling_sets_its_socket_options_and_0_only_spins() {
    let opt = |port: &Port, name: i32| -> i32 {
        use std::os::fd::{AsFd, AsRawFd};
        let mut v: i32 = -1;
        let mut len = std::mem::size_of::<i32>() as libc::socklen_t;
        // SAFETY: `v` and `len` outlive the call and `len` is `v`'s size; the fd is the
        // port's open socket.
        let r = unsafe {
            libc::getsockopt(port.as_fd().as_raw_fd(), libc::SOL_SOCKET, name, (&mut v as *mut i32).cast(), &mut len)
        };
        assert_eq!(r, 0, "getsockopt({name}): {}", std::io::Error::last_os_error());
        v
    };
    let empty_recvs = |port: &mut Port| {
        let mut v = Vec::with_capacity(8);
        for _ in 0..10 {
            assert_eq!(port.recv(&mut v, 8), 0, "nothing was sent to this port");
        }
        port.stats().port.rx_wakeups
    };
    // (SO_BUSY_POLL_BUDGET cannot be read back: getsockopt answers ENOPROTOOPT.)
    // A lab each, so the second port starts from an interface no socket has held.
    for (tag, usecs, options, wakeups) in [("tpb", 50, (50, 1), 10), ("tpc", 0, (0, 0), 0)] {
        let lab = lab(tag);
        let _in_a = lab.ns_a.enter().unwrap();
        let cfg = PortConfig::new(&lab.if_a).with_busy_poll(Some(BusyPoll { usecs, budget: 16 }));
        let mut port = open(&cfg).unwrap();
        let got = (
            opt(&port, libc::SO_BUSY_POLL),
            opt(&port, libc::SO_PREFER_BUSY_POLL),
        );
        assert_eq!(got, options, "usecs {usecs}: SO_BUSY_POLL, SO_PREFER_BUSY_POLL");
        assert_eq!(empty_recvs(&mut port), wakeups, "usecs {usecs}: recvfrom calls on 10 empty passes");
        assert_eq!(port.features().busy_poll.map(|b| b.usecs), Some(usecs));
    }
}
