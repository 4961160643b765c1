use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpStream};
use std::time::Instant;

use super::*;
use crate::sockets;
use crate::transport::Transport;
use bytes::BytesMut;

fn transport() -> UringTransport {
    UringTransport::new(UringConfig::default()).expect("io_uring on this kernel")
}

/// Polls until `pred` holds for the events gathered so far (at most 5 s).
fn poll_until(t: &mut UringTransport, events: &mut Vec<Event>, pred: impl Fn(&[Event]) -> bool) {
    let end = Instant::now() + Duration::from_secs(5);
    while !pred(events) {
        assert!(Instant::now() < end, "timed out; events so far: {events:?}");
        t.poll(events, Some(Duration::from_millis(50))).unwrap();
    }
}

fn accepted(events: &[Event]) -> Option<ConnId> {
    events.iter().find_map(|e| match e {
        Event::Accepted { conn, .. } => Some(*conn),
        _ => None,
    })
}

#[test]
fn echoes_over_loopback_with_one_enter_per_request() {
    let mut t = transport();
    let l = t.listen(0).unwrap();
    let addr = t.local_addr(l).unwrap();
    let mut client = TcpStream::connect(addr).unwrap();
    client.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut events = Vec::new();
    poll_until(&mut t, &mut events, |e| accepted(e).is_some());
    let conn = accepted(&events).unwrap();
    assert_eq!(t.peer_addr(conn), Some(match client.local_addr().unwrap() {
        SocketAddr::V4(a) => a,
        SocketAddr::V6(_) => unreachable!(),
    }));
    // Accepted sockets inherit TCP_NODELAY from the listener.
    let fd = t.conns.get(conn).unwrap().raw();
    assert_eq!(sockets::get_int_opt(fd, libc::IPPROTO_TCP, libc::TCP_NODELAY).unwrap(), 1);

    let mut buf = BytesMut::new();
    let rounds = 200u64;
    // The first exchange settles the receive's arming; count the rest.
    let mut before = 0;
    for i in 0..rounds {
        if i == 1 {
            before = t.stats().enters;
        }
        client.write_all(b"ping").unwrap();
        events.clear();
        poll_until(&mut t, &mut events, |e| e.contains(&Event::Readable(conn)));
        buf.clear();
        assert_eq!(t.recv(conn, &mut buf).unwrap(), 4);
        assert_eq!(&buf[..], b"ping");
        assert_eq!(t.send(conn, b"pong").unwrap(), 4);
        t.flush().unwrap();
        // The answer leaves with the next poll's enter, which waits for the next ping.
        if i + 1 == rounds {
            t.poll(&mut events, Some(Duration::ZERO)).unwrap();
        }
        let mut got = [0u8; 4];
        if i + 1 < rounds {
            // Let the next loop's poll send it: the client reads after writing the next ping
            // would deadlock, so read here with a poll that only submits.
            t.poll(&mut events, Some(Duration::ZERO)).unwrap();
        }
        client.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"pong");
    }
    let per = (t.stats().enters - before) as f64 / (rounds - 1) as f64;
    // Two polls a round here (one that submits, one that waits): at most a few enters.
    assert!(per <= 3.0, "{per} enters per request: {:?}", t.stats());
    assert_eq!(t.stats().short_sends, 0);
}

#[test]
fn a_server_loop_makes_one_enter_per_request() {
    let mut t = transport();
    let l = t.listen(0).unwrap();
    let addr = t.local_addr(l).unwrap();
    let rounds = 300u32;
    let client = std::thread::spawn(move || {
        let mut c = TcpStream::connect(addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        for _ in 0..rounds {
            c.write_all(b"0123456789").unwrap();
            let mut got = [0u8; 10];
            c.read_exact(&mut got).unwrap();
            assert_eq!(&got, b"0123456789");
        }
    });
    let mut events = Vec::new();
    let mut buf = BytesMut::new();
    let mut echoed = 0usize;
    let mut start = None;
    let end = Instant::now() + Duration::from_secs(10);
    while echoed < rounds as usize * 10 && Instant::now() < end {
        events.clear();
        t.poll(&mut events, Some(Duration::from_millis(100))).unwrap();
        for ev in events.drain(..) {
            if let Event::Readable(c) = ev {
                buf.clear();
                let n = t.recv(c, &mut buf).unwrap();
                assert_eq!(t.send(c, &buf[..n]).unwrap(), n);
                echoed += n;
                if start.is_none() {
                    start = Some(t.stats().enters);
                }
            }
        }
        t.flush().unwrap();
    }
    // The last answer leaves with one more enter.
    t.poll(&mut events, Some(Duration::ZERO)).unwrap();
    client.join().unwrap();
    assert_eq!(echoed, rounds as usize * 10);
    let per = (t.stats().enters - start.unwrap()) as f64 / f64::from(rounds - 1);
    assert!(per < 1.3, "{per} enters per request (want one: submit and wait together): {:?}", t.stats());
}

#[test]
fn peer_close_is_readable_then_closed_once() {
    let mut t = transport();
    let l = t.listen(0).unwrap();
    let mut client = TcpStream::connect(t.local_addr(l).unwrap()).unwrap();
    let mut events = Vec::new();
    poll_until(&mut t, &mut events, |e| accepted(e).is_some());
    let conn = accepted(&events).unwrap();
    client.write_all(b"last words").unwrap();
    drop(client);
    let mut buf = BytesMut::new();
    let mut got = 0;
    events.clear();
    poll_until(&mut t, &mut events, |e| e.contains(&Event::Readable(conn)));
    let end = Instant::now() + Duration::from_secs(5);
    while !events.contains(&Event::Closed(conn)) {
        assert!(Instant::now() < end);
        got += t.recv(conn, &mut buf).unwrap();
        t.poll(&mut events, Some(Duration::from_millis(20))).unwrap();
    }
    assert_eq!(&buf[..], b"last words");
    assert_eq!(got, 10);
    assert_eq!(events.iter().filter(|e| **e == Event::Closed(conn)).count(), 1);
    t.close(conn);
    assert!(matches!(t.recv(conn, &mut buf), Err(TransportError::UnknownConn(_))));
}

#[test]
fn close_sends_what_was_queued_then_fin() {
    let mut t = UringTransport::new(UringConfig { send_buffer: 64 << 20, ..UringConfig::default() }).unwrap();
    let l = t.listen(0).unwrap();
    let mut client = TcpStream::connect(t.local_addr(l).unwrap()).unwrap();
    client.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut events = Vec::new();
    poll_until(&mut t, &mut events, |e| accepted(e).is_some());
    let conn = accepted(&events).unwrap();
    // More than the socket's buffer takes at once: some waits in the transport.
    let big: Vec<u8> = (0..32 << 20).map(|i| (i % 251) as u8).collect();
    assert_eq!(t.send(conn, &big).unwrap(), big.len());
    t.close(conn);
    let reader = std::thread::spawn(move || {
        let mut all = Vec::new();
        client.read_to_end(&mut all).unwrap();
        all
    });
    let end = Instant::now() + Duration::from_secs(10);
    while (t.closing() > 0 || t.connections() > 0) && Instant::now() < end {
        t.poll(&mut events, Some(Duration::from_millis(20))).unwrap();
    }
    // The close goes out with the next enter, and the socket is let go (the FIN) when the
    // cancelled receive's completion runs, in an enter that waits (deferred task running).
    t.poll(&mut events, Some(Duration::from_millis(10))).unwrap();
    let all = reader.join().unwrap();
    assert_eq!(all.len(), big.len());
    assert!(all == big, "bytes differ");
    assert!(t.stats().short_sends > 0, "the test meant to fill the socket: {:?}", t.stats());
}

#[test]
fn a_full_send_buffer_blocks_then_reports_writable() {
    let mut t = UringTransport::new(UringConfig { send_buffer: 64 * 1024, ..UringConfig::default() }).unwrap();
    let l = t.listen(0).unwrap();
    let mut client = TcpStream::connect(t.local_addr(l).unwrap()).unwrap();
    let mut events = Vec::new();
    poll_until(&mut t, &mut events, |e| accepted(e).is_some());
    let conn = accepted(&events).unwrap();
    let chunk = vec![7u8; 100 * 1024];
    assert_eq!(t.send(conn, &chunk).unwrap(), 64 * 1024, "capped at send_buffer");
    events.clear();
    poll_until(&mut t, &mut events, |e| e.contains(&Event::Writable(conn)));
    let mut got = vec![0u8; 64 * 1024];
    client.read_exact(&mut got).unwrap();
    assert!(got.iter().all(|&b| b == 7));
}

#[test]
fn a_refused_connect_is_closed_once() {
    // A port nobody listens on: bind one, take its port, drop it.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut t = transport();
    let c = t.connect(SocketAddrV4::new(Ipv4Addr::LOCALHOST, port)).unwrap();
    assert_eq!(t.send(c, b"x").unwrap(), 0, "not connected yet");
    let mut events = Vec::new();
    poll_until(&mut t, &mut events, |e| e.contains(&Event::Closed(c)));
    assert!(!events.contains(&Event::Connected(c)));
    assert!(matches!(t.send(c, b"x"), Err(TransportError::ConnectionClosed(_))));
    t.close(c);
}

#[test]
fn connects_and_half_closes() {
    let server = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let SocketAddr::V4(addr) = server.local_addr().unwrap() else { unreachable!() };
    let mut t = transport();
    let c = t.connect(addr).unwrap();
    let mut events = Vec::new();
    poll_until(&mut t, &mut events, |e| e.contains(&Event::Connected(c)));
    let (mut s, _) = server.accept().unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    assert_eq!(t.send(c, b"hello").unwrap(), 5);
    t.shutdown_write(c).unwrap();
    assert!(matches!(t.send(c, b"more"), Err(TransportError::ConnectionClosed(_))));
    t.poll(&mut events, Some(Duration::ZERO)).unwrap();
    t.poll(&mut events, Some(Duration::ZERO)).unwrap();
    let mut all = Vec::new();
    s.read_to_end(&mut all).unwrap();
    assert_eq!(all, b"hello", "the FIN follows the bytes");
    // The other way still works after our FIN.
    t.poll(&mut events, Some(Duration::from_millis(10))).unwrap();
    s.write_all(b"reply").unwrap();
    drop(s);
    let mut buf = BytesMut::new();
    events.clear();
    poll_until(&mut t, &mut events, |e| e.contains(&Event::Readable(c)));
    let end = Instant::now() + Duration::from_secs(5);
    while !events.contains(&Event::Closed(c)) {
        assert!(Instant::now() < end);
        t.recv(c, &mut buf).unwrap();
        t.poll(&mut events, Some(Duration::from_millis(20))).unwrap();
    }
    assert_eq!(&buf[..], b"reply");
    t.close(c);
}

#[test]
fn a_waker_ends_a_sleep_without_timeout() {
    let mut t = transport();
    let w = t.waker().unwrap();
    let h = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        w.wake();
    });
    let start = Instant::now();
    let mut events = Vec::new();
    t.poll(&mut events, None).unwrap();
    assert!(start.elapsed() < Duration::from_secs(5));
    h.join().unwrap();
    assert!(events.is_empty());
    // A timeout ends a wait too, to the microsecond rather than the millisecond.
    let start = Instant::now();
    t.poll(&mut events, Some(Duration::from_micros(300))).unwrap();
    let took = start.elapsed();
    assert!(took >= Duration::from_micros(300) && took < Duration::from_millis(500), "{took:?}");
}

#[test]
fn a_slow_reader_pauses_its_receive_and_loses_nothing() {
    let cfg = UringConfig { recv_hold: 16 * 1024, ..UringConfig::default() }.with_recv_buffers(64, 2048);
    let mut t = UringTransport::new(cfg).unwrap();
    let l = t.listen(0).unwrap();
    let mut client = TcpStream::connect(t.local_addr(l).unwrap()).unwrap();
    let mut events = Vec::new();
    poll_until(&mut t, &mut events, |e| accepted(e).is_some());
    let conn = accepted(&events).unwrap();
    let data: Vec<u8> = (0..1 << 20).map(|i| (i % 253) as u8).collect();
    let d2 = data.clone();
    let writer = std::thread::spawn(move || client.write_all(&d2).unwrap());
    // Let it pile up unread, then drain slowly.
    for _ in 0..20 {
        t.poll(&mut events, Some(Duration::from_millis(5))).unwrap();
    }
    assert!(t.conns.get(conn).unwrap().held_bytes <= 16 * 1024 + 64 * 2048);
    let mut buf = BytesMut::new();
    let end = Instant::now() + Duration::from_secs(10);
    while buf.len() < data.len() {
        assert!(Instant::now() < end, "{} of {} bytes: {:?}", buf.len(), data.len(), t.stats());
        t.recv(conn, &mut buf).unwrap();
        t.poll(&mut events, Some(Duration::from_millis(5))).unwrap();
    }
    writer.join().unwrap();
    assert!(buf[..] == data[..]);
}

#[test]
fn a_closing_connection_whose_peer_resets_is_finished() {
    let mut t = UringTransport::new(UringConfig { send_buffer: 64 << 20, ..UringConfig::default() }).unwrap();
    let l = t.listen(0).unwrap();
    let client = TcpStream::connect(t.local_addr(l).unwrap()).unwrap();
    let mut events = Vec::new();
    poll_until(&mut t, &mut events, |e| accepted(e).is_some());
    let conn = accepted(&events).unwrap();
    // More than the sockets take while the client reads nothing: the rest waits for POLLOUT.
    let big = vec![1u8; 32 << 20];
    assert_eq!(t.send(conn, &big).unwrap(), big.len());
    t.poll(&mut events, Some(Duration::from_millis(20))).unwrap();
    t.close(conn);
    assert_eq!(t.closing(), 1);
    // The client resets (SO_LINGER 0 and close).
    let linger = libc::linger { l_onoff: 1, l_linger: 0 };
    // SAFETY: the option value points at `linger`, which outlives the call, with its size.
    let rc = unsafe {
        libc::setsockopt(
            std::os::fd::AsRawFd::as_raw_fd(&client),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    };
    assert_eq!(rc, 0);
    drop(client);
    events.clear();
    let end = Instant::now() + Duration::from_secs(5);
    while t.closing() > 0 || t.connections() > 0 {
        assert!(Instant::now() < end, "closing {} connections {}", t.closing(), t.connections());
        t.poll(&mut events, Some(Duration::from_millis(20))).unwrap();
    }
    assert!(events.iter().all(|e| conn_of(e) != Some(conn)), "no event for a closed id: {events:?}");
}

#[test]
fn a_closing_connection_the_peer_never_drains_is_reset_at_the_deadline() {
    let cfg = UringConfig { send_buffer: 64 << 20, close_linger: Duration::from_millis(200), ..UringConfig::default() };
    let mut t = UringTransport::new(cfg).unwrap();
    let l = t.listen(0).unwrap();
    let _client = TcpStream::connect(t.local_addr(l).unwrap()).unwrap();
    let mut events = Vec::new();
    poll_until(&mut t, &mut events, |e| accepted(e).is_some());
    let conn = accepted(&events).unwrap();
    assert_eq!(t.send(conn, &vec![2u8; 32 << 20]).unwrap(), 32 << 20);
    t.poll(&mut events, Some(Duration::from_millis(20))).unwrap();
    t.close(conn);
    let start = Instant::now();
    while t.connections() > 0 {
        assert!(start.elapsed() < Duration::from_secs(5), "never given up");
        t.poll(&mut events, None).unwrap();
    }
    assert!(start.elapsed() >= Duration::from_millis(150), "{:?}", start.elapsed());
    assert_eq!(t.closing(), 0);
}

#[test]
fn another_thread_cannot_poll_a_started_ring() {
    let mut t = transport();
    let mut events = Vec::new();
    // Made here, first polled by another thread: that one owns it.
    let mut t = std::thread::spawn(move || {
        t.poll(&mut events, Some(Duration::ZERO)).unwrap();
        t
    })
    .join()
    .unwrap();
    let mut events = Vec::new();
    assert!(matches!(t.poll(&mut events, Some(Duration::ZERO)), Err(TransportError::InvalidInput(_))));
}

#[test]
fn a_paused_reader_gives_the_shared_buffers_back() {
    let cfg = UringConfig { recv_hold: 8 * 1024, ..UringConfig::default() }.with_recv_buffers(32, 2048);
    let mut t = UringTransport::new(cfg).unwrap();
    let l = t.listen(0).unwrap();
    let addr = t.local_addr(l).unwrap();
    let mut slow = TcpStream::connect(addr).unwrap();
    let mut events = Vec::new();
    poll_until(&mut t, &mut events, |e| accepted(e).is_some());
    let slow_id = accepted(&events).unwrap();
    let writer = std::thread::spawn(move || {
        let _ = slow.write_all(&vec![3u8; 4 << 20]);
        slow
    });
    for _ in 0..20 {
        t.poll(&mut events, Some(Duration::from_millis(5))).unwrap();
    }
    // The slow connection holds its bytes in memory of its own: the ring keeps most of its
    // buffers for the others, and another connection is served.
    assert!(t.bufs.available() >= 32 - 8, "{} of 32 buffers left", t.bufs.available());
    let mut other = TcpStream::connect(addr).unwrap();
    other.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    other.write_all(b"hi").unwrap();
    events.clear();
    poll_until(&mut t, &mut events, |e| e.iter().any(|ev| matches!(ev, Event::Readable(c) if *c != slow_id)));
    let other_id = events.iter().find_map(|ev| match ev {
        Event::Readable(c) if *c != slow_id => Some(*c),
        _ => None,
    });
    let mut buf = BytesMut::new();
    assert_eq!(t.recv(other_id.unwrap(), &mut buf).unwrap(), 2);
    t.close(slow_id);
    t.poll(&mut events, Some(Duration::from_millis(10))).unwrap();
    drop(writer);
}

/// A server loop that sleeps with no timeout, one client, answers larger than the send
/// buffer: each Writable and each POLLOUT must end a wait by itself (no other event comes).
#[test]
fn big_answers_to_one_client_need_no_other_event() {
    // Taken a piece at a time (the application waits for Writable), and in one piece (a
    // send that the socket cuts short must end the wait by itself: the NOP behind it).
    big_answers(64 * 1024, 4 << 20);
    big_answers(64 << 20, 24 << 20);
}

fn big_answers(send_buffer: usize, size: usize) {
    let mut t = UringTransport::new(UringConfig { send_buffer, ..UringConfig::default() }).unwrap();
    let l = t.listen(0).unwrap();
    let addr = t.local_addr(l).unwrap();
    let answer: Vec<u8> = (0..size).map(|i| (i % 249) as u8).collect();
    let expect = answer.clone();
    // The client wakes the server's sleep when it has read everything (or failed).
    let waker = t.waker().unwrap();
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let done2 = done.clone();
    let client = std::thread::spawn(move || {
        let r = std::panic::catch_unwind(move || {
            let mut c = TcpStream::connect(addr).unwrap();
            c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            for _ in 0..3 {
                c.write_all(b"go").unwrap();
                let mut got = vec![0u8; expect.len()];
                // Slowly at first, so that the socket fills and sends come back short.
                std::thread::sleep(Duration::from_millis(50));
                c.read_exact(&mut got).unwrap();
                assert!(got == expect);
            }
        });
        done2.store(true, std::sync::atomic::Ordering::SeqCst);
        waker.wake();
        r
    });
    let mut events = Vec::new();
    let mut buf = BytesMut::new();
    let (mut conn, mut left, mut served) = (None, 0usize, 0);
    let end = Instant::now() + Duration::from_secs(20);
    while !done.load(std::sync::atomic::Ordering::SeqCst) && Instant::now() < end {
        events.clear();
        // No timeout: only the transport's own completions (or the client's wake) end it.
        t.poll(&mut events, None).unwrap();
        for ev in events.drain(..) {
            match ev {
                Event::Accepted { conn: c, .. } => conn = Some(c),
                Event::Readable(c) => {
                    buf.clear();
                    if t.recv(c, &mut buf).unwrap() > 0 {
                        left = answer.len();
                    }
                }
                _ => {}
            }
        }
        if let Some(c) = conn {
            while left > 0 {
                let n = t.send(c, &answer[answer.len() - left..]).unwrap();
                left -= n;
                if left == 0 {
                    served += 1;
                }
                if n == 0 {
                    break;
                }
            }
        }
        t.flush().unwrap();
    }
    client.join().unwrap().expect("the client got every answer");
    assert_eq!(served, 3);
    assert!(t.stats().short_sends > 0, "the test meant sends cut short: {:?}", t.stats());
}
