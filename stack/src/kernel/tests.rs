//! The kernel backend's own tests, on loopback.

use super::*;
use std::time::Instant;

fn transport() -> KernelTransport {
    KernelTransport::new(KernelConfig::default()).unwrap()
}

/// Polls until `pred` matches an event or `limit` passes. Returns the matching event.
fn wait_within(t: &mut KernelTransport, limit: Duration, mut pred: impl FnMut(&Event) -> bool) -> Option<Event> {
    let deadline = Instant::now() + limit;
    let mut events = Vec::new();
    while Instant::now() < deadline {
        events.clear();
        t.poll(&mut events, Some(Duration::from_millis(20))).unwrap();
        if let Some(ev) = events.iter().find(|e| pred(e)) {
            return Some(*ev);
        }
    }
    None
}

fn wait_for(t: &mut KernelTransport, pred: impl FnMut(&Event) -> bool) -> Option<Event> {
    wait_within(t, Duration::from_secs(2), pred)
}

#[test]
fn connect_to_closed_port_reports_closed() {
    // Reserve a port and close it again, so nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut t = transport();
    let id = t.connect(SocketAddrV4::new(Ipv4Addr::LOCALHOST, port)).unwrap();
    assert_eq!(t.send(id, b"x").unwrap(), 0, "send before Connected accepts nothing");
    assert_eq!(wait_for(&mut t, |e| matches!(e, Event::Closed(_) | Event::Connected(_))), Some(Event::Closed(id)));
    assert!(matches!(t.send(id, b"x"), Err(TransportError::ConnectionClosed(_))));
    t.close(id);
    assert!(matches!(t.recv(id, &mut BytesMut::new()), Err(TransportError::UnknownConn(_))));
}

#[test]
fn accept_echo_eof_and_stale_ids() {
    accept_echo_eof(transport());
}

#[test]
fn busy_poll_is_applied_to_every_socket() {
    let cfg = KernelConfig { busy_poll: Some(50), ..KernelConfig::default() };
    let mut t = KernelTransport::new(cfg.clone()).unwrap();
    let l = match t.listen(0) {
        Ok(l) => l,
        // Values above net.core.busy_read need CAP_NET_ADMIN: nothing to test without it.
        Err(TransportError::Io(e)) if e.raw_os_error() == Some(libc::EPERM) => return,
        Err(e) => panic!("{e}"),
    };
    let client = t.connect(t.local_addr(l).unwrap()).unwrap();
    let Some(Event::Accepted { conn: server, .. }) = wait_for(&mut t, |e| matches!(e, Event::Accepted { .. }))
    else {
        panic!("no Accepted");
    };
    for id in [client, server] {
        let fd = t.conns.get(id).unwrap().stream.as_raw_fd();
        let mut value: libc::c_int = 0;
        let mut len = mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: `value` and `len` are live locals of the sizes getsockopt expects.
        let rc = unsafe {
            libc::getsockopt(fd, libc::SOL_SOCKET, SO_BUSY_POLL, (&mut value as *mut libc::c_int).cast(), &mut len)
        };
        assert_eq!((rc, value), (0, 50), "{id:?}");
    }
    // The full life cycle works with busy polling on, too.
    accept_echo_eof(KernelTransport::new(cfg).unwrap());
}

fn accept_echo_eof(mut t: KernelTransport) {
    let l = t.listen(0).unwrap();
    let addr = t.local_addr(l).unwrap();
    assert_ne!(addr.port(), 0);
    let client = t.connect(addr).unwrap();
    let mut server = None;
    let mut connected = false;
    let deadline = Instant::now() + Duration::from_secs(2);
    let mut events = Vec::new();
    while (server.is_none() || !connected) && Instant::now() < deadline {
        events.clear();
        t.poll(&mut events, Some(Duration::from_millis(20))).unwrap();
        for ev in &events {
            match *ev {
                Event::Accepted { listener, conn } => {
                    assert_eq!(listener, l);
                    server = Some(conn);
                }
                Event::Connected(c) => {
                    assert_eq!(c, client);
                    connected = true;
                }
                _ => {}
            }
        }
    }
    let server = server.expect("accepted");
    assert!(connected);
    assert_eq!(t.peer_addr(server).map(|a| *a.ip()), Some(Ipv4Addr::LOCALHOST));

    assert_eq!(t.send(client, b"hello").unwrap(), 5);
    assert_eq!(wait_for(&mut t, |e| *e == Event::Readable(server)), Some(Event::Readable(server)));
    let mut buf = BytesMut::new();
    while t.recv(server, &mut buf).unwrap() > 0 {}
    assert_eq!(&buf[..], b"hello");

    // Client closes: the server drains to EOF and gets Closed exactly once.
    t.close(client);
    assert!(wait_for(&mut t, |e| *e == Event::Readable(server)).is_some());
    while t.recv(server, &mut buf).unwrap() > 0 {}
    assert_eq!(wait_for(&mut t, |e| matches!(e, Event::Closed(_))), Some(Event::Closed(server)));
    assert_eq!(
        wait_within(&mut t, Duration::from_millis(200), |e| matches!(e, Event::Closed(_))),
        None,
        "Closed only once"
    );
    t.close(server);
    assert_eq!(t.open_connections(), 0);
    assert!(matches!(t.send(client, b"x"), Err(TransportError::UnknownConn(_))));
}

/// `sources`: outgoing connections take consecutive source addresses in turn (every
/// 127.0.0.0/8 address is local on Linux, so loopback has three to give).
#[test]
fn connections_take_their_source_addresses_in_turn() {
    let mut server = KernelTransport::new(KernelConfig::default().with_bind(Ipv4Addr::UNSPECIFIED)).unwrap();
    let l = server.listen(0).unwrap();
    let to = SocketAddrV4::new(Ipv4Addr::LOCALHOST, server.local_addr(l).unwrap().port());
    let mut client = KernelTransport::new(KernelConfig::default().with_sources(3)).unwrap();
    for _ in 0..4 {
        client.connect(to).unwrap();
    }
    let (mut peers, mut events) = (Vec::new(), Vec::new());
    let deadline = Instant::now() + Duration::from_secs(5);
    while peers.len() < 4 && Instant::now() < deadline {
        events.clear();
        server.poll(&mut events, Some(Duration::from_millis(20))).unwrap();
        for e in &events {
            if let Event::Accepted { conn, .. } = e {
                peers.push(*server.peer_addr(*conn).unwrap().ip());
            }
        }
    }
    peers.sort();
    let at = |d: u8| Ipv4Addr::new(127, 0, 0, d);
    assert_eq!(peers, [at(1), at(1), at(2), at(3)]);
}

/// Wakes `w` after `after`, so a test whose wait nothing else would end fails instead of
/// hanging.
fn watchdog(w: &crate::Waker, after: Duration) {
    let w = w.clone();
    std::thread::spawn(move || {
        std::thread::sleep(after);
        w.wake();
    });
}

/// The waker ends a `poll` that has no timeout, from another thread, with no event; a wake
/// that came before the poll ends it too (the loop checked its flags before it), also when the
/// poll arms the timer for a deadline of its own (which replaces the wake's expiry).
#[test]
fn a_waker_ends_a_poll_without_a_timeout() {
    let mut t = transport();
    let w = t.waker().unwrap();
    let mut events = Vec::new();
    let w2 = w.clone();
    let waking = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(100));
        w2.wake();
    });
    watchdog(&w, Duration::from_secs(5));
    let t0 = Instant::now();
    t.poll(&mut events, None).unwrap();
    let took = t0.elapsed();
    assert!(took >= Duration::from_millis(90) && took < Duration::from_secs(4), "woke after {took:?}");
    assert!(events.is_empty(), "{events:?}");
    waking.join().unwrap();
    // Before a poll with no limit, and before one with a deadline far off.
    for timeout in [None, Some(Duration::from_secs(5))] {
        w.wake();
        let t0 = Instant::now();
        t.poll(&mut events, timeout).unwrap();
        assert!(t0.elapsed() < Duration::from_secs(1), "{timeout:?}: woke after {:?}", t0.elapsed());
    }
    // Taken: the next wait sleeps its whole timeout.
    let t0 = Instant::now();
    t.poll(&mut events, Some(Duration::from_millis(50))).unwrap();
    assert!(t0.elapsed() >= Duration::from_millis(45), "woke after {:?}", t0.elapsed());
}

/// A server that sleeps with no timeout still runs its handler's periodic work when the handler
/// asks (`Handler::tick_in`), and no sooner.
#[test]
fn an_idle_server_ticks_when_its_handler_asks() {
    use crate::rr::{Completions, Handler, Reply, Server, ServerConfig};
    struct Ticker(u32);
    impl Handler for Ticker {
        type Conn = ();
        fn handle(&mut self, _: ConnId, _: &mut (), _: &[u8], _: &mut BytesMut) -> Reply {
            Reply::Done
        }
        fn tick(&mut self, _: &mut Completions) {
            self.0 += 1;
        }
        fn tick_in(&self) -> Option<Duration> {
            Some(Duration::from_millis(30))
        }
    }
    let cfg = ServerConfig::default().with_poll_timeout(None);
    let mut s = Server::new(transport(), crate::codec::LengthPrefixed::default(), Ticker(0), cfg).unwrap();
    watchdog(&s.waker().unwrap(), Duration::from_secs(5));
    let t0 = Instant::now();
    // Without tick_in this step would sleep until a connection came.
    s.step(None).unwrap();
    let took = t0.elapsed();
    assert!(took >= Duration::from_millis(25) && took < Duration::from_secs(4), "the step took {took:?}");
    assert_eq!(s.handler().0, 1);
}
