//! The kernel backend's own tests, on loopback.

use super::busy::{apply_epoll, get_epoll_params, EPIOCGPARAMS, EPIOCSPARAMS, SO_BUSY_POLL, SO_BUSY_POLL_BUDGET, SO_PREFER_BUSY_POLL};
use super::*;
use std::os::fd::{FromRawFd, OwnedFd};
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
    assert_eq!(t.busy_report().epoll, EpollBusy::NotRequested, "the plain form sets no epoll parameters");
    assert_eq!(t.busy_report().sockets, SocketBusy::Applied);
    // The full life cycle works with busy polling on, too.
    accept_echo_eof(KernelTransport::new(cfg).unwrap());
}

/// The option's value; `None` if the kernel cannot read it back (it has no getsockopt for
/// SO_BUSY_POLL_BUDGET: ENOPROTOOPT).
fn sock_opt(fd: RawFd, name: libc::c_int) -> Option<libc::c_int> {
    let mut value: libc::c_int = -1;
    let mut len = mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `value` and `len` are live locals of the sizes getsockopt expects.
    let rc = unsafe { libc::getsockopt(fd, libc::SOL_SOCKET, name, (&mut value as *mut libc::c_int).cast(), &mut len) };
    if rc != 0 {
        let e = io::Error::last_os_error();
        assert_eq!(e.raw_os_error(), Some(libc::ENOPROTOOPT), "getsockopt {name}: {e}");
        return None;
    }
    Some(value)
}

/// `struct epoll_params` is 8 bytes laid out as the uapi header has it, and the ioctl numbers
/// are libc's.
#[test]
fn epoll_params_layout_and_ioctl_numbers() {
    assert_eq!(mem::size_of::<EpollParams>(), 8);
    assert_eq!(mem::align_of::<EpollParams>(), 4);
    assert_eq!(mem::size_of::<EpollParams>(), mem::size_of::<libc::epoll_params>());
    let p = EpollParams { busy_poll_usecs: 0x0403_0201, busy_poll_budget: 0x0605, prefer_busy_poll: 7, pad: 8 };
    // SAFETY: EpollParams is #[repr(C)], 8 bytes without padding (checked above): every byte
    // is initialised.
    let bytes: [u8; 8] = unsafe { mem::transmute(p) };
    let mut expect = [0u8; 8];
    expect[0..4].copy_from_slice(&0x0403_0201u32.to_ne_bytes());
    expect[4..6].copy_from_slice(&0x0605u16.to_ne_bytes());
    expect[6] = 7;
    expect[7] = 8;
    assert_eq!(bytes, expect);
    assert_eq!(EPIOCSPARAMS as libc::Ioctl, libc::EPIOCSPARAMS);
    assert_eq!(EPIOCGPARAMS as libc::Ioctl, libc::EPIOCGPARAMS);
    #[cfg(target_arch = "x86_64")]
    assert_eq!((EPIOCSPARAMS, EPIOCGPARAMS), (0x4008_8a01, 0x8008_8a02));
}

/// On a kernel with EPIOCSPARAMS (6.9+; this machine's 6.18) the transport's epoll instance
/// takes the parameters, and EPIOCGPARAMS reads them back. A budget of 16 and prefer need no
/// privilege there.
#[test]
fn epoll_params_are_applied_to_the_epoll_instance() {
    let busy = KernelBusyPoll::new(50).with_budget(16).with_prefer(true);
    let t = KernelTransport::new(KernelConfig::default().with_busy(Some(busy))).unwrap();
    let r = *t.busy_report();
    assert_eq!(r.requested, Some(busy));
    let want = EpollParams { busy_poll_usecs: 50, busy_poll_budget: 16, prefer_busy_poll: 1, pad: 0 };
    match r.epoll {
        EpollBusy::Applied(p) => {
            assert_eq!(p, want);
            assert_eq!(get_epoll_params(t.poll.as_raw_fd()).unwrap(), want);
            assert!(r.to_string().contains("EPIOCSPARAMS 50 us, budget 16, prefer 1"), "{r}");
        }
        // A kernel before 6.9: the fallback, said so.
        EpollBusy::Fallback { errno } => {
            assert_eq!(errno, libc::ENOTTY, "{r}");
            assert!(r.to_string().contains("Linux 6.9"), "{r}");
        }
        EpollBusy::NotRequested => panic!("{r}"),
    }
    assert_eq!(r.sockets, SocketBusy::Pending);
}

/// A refused ioctl is not an error: the transport falls back to the socket options and says
/// why. Refusals from the real kernel: a fd that is not an epoll instance (ENOTTY, what a
/// kernel without the ioctl answers too) and a value out of range (EINVAL).
#[test]
fn a_refused_ioctl_falls_back_to_the_socket_options() {
    let mut fds = [0; 2];
    // SAFETY: pipe() writes two fds into the live array.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: both fds were just created and are owned here alone.
    let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let p = EpollParams { busy_poll_usecs: 50, busy_poll_budget: 8, prefer_busy_poll: 0, pad: 0 };
    let got = apply_epoll(r.as_raw_fd(), &p);
    assert_eq!(got, EpollBusy::Fallback { errno: libc::ENOTTY });
    assert!(got.reason().unwrap().contains("6.9"));
    drop((r, w));

    let busy = KernelBusyPoll::new(u32::MAX);
    let mut t = KernelTransport::new(KernelConfig::default().with_busy(Some(busy))).expect("never fatal");
    let report = *t.busy_report();
    if report.epoll == (EpollBusy::Fallback { errno: libc::ENOTTY }) {
        return; // a kernel before 6.9 refuses everything the same way
    }
    assert_eq!(report.epoll, EpollBusy::Fallback { errno: libc::EINVAL }, "{report}");
    assert!(report.to_string().contains("socket options only"), "{report}");
    // The socket options carry it now (clamped to i32::MAX microseconds).
    match t.listen(0) {
        Ok(l) => {
            let fd = t.listeners[l.0 as usize].as_raw_fd();
            assert_eq!(sock_opt(fd, SO_BUSY_POLL), Some(i32::MAX));
            assert_eq!(t.busy_report().sockets, SocketBusy::Applied);
        }
        // Only socket options are left, so a refused one is an error.
        Err(TransportError::Io(e)) if e.raw_os_error() == Some(libc::EPERM) => {}
        Err(e) => panic!("{e}"),
    }
}

/// All three socket options on every socket (listener, outgoing, accepted), and a full
/// echo life cycle with them on.
#[test]
fn busy_options_are_set_on_every_socket() {
    let busy = KernelBusyPoll::new(50).with_budget(16).with_prefer(true);
    let cfg = KernelConfig::default().with_busy(Some(busy));
    let mut t = KernelTransport::new(cfg.clone()).unwrap();
    let l = match t.listen(0) {
        Ok(l) => l,
        // No epoll parameters and no CAP_NET_ADMIN: nothing to test.
        Err(TransportError::Io(e)) if e.raw_os_error() == Some(libc::EPERM) => return,
        Err(e) => panic!("{e}"),
    };
    if let SocketBusy::Refused { option, errno } = t.busy_report().sockets {
        // Unprivileged, with the epoll parameters carrying busy polling: recorded, not fatal.
        assert!(matches!(t.busy_report().epoll, EpollBusy::Applied(_)));
        eprintln!("{option} refused: {}", io::Error::from_raw_os_error(errno));
        return;
    }
    assert_eq!(t.busy_report().sockets, SocketBusy::Applied);
    let client = t.connect(t.local_addr(l).unwrap()).unwrap();
    let Some(Event::Accepted { conn: server, .. }) = wait_for(&mut t, |e| matches!(e, Event::Accepted { .. }))
    else {
        panic!("no Accepted");
    };
    let listener_fd = t.listeners[l.0 as usize].as_raw_fd();
    let fds = [listener_fd, t.conns.get(client).unwrap().stream.as_raw_fd(), t.conns.get(server).unwrap().stream.as_raw_fd()];
    for fd in fds {
        assert_eq!(sock_opt(fd, SO_BUSY_POLL), Some(50));
        // Set without error (the transport checked); read back where the kernel can.
        assert!(matches!(sock_opt(fd, SO_BUSY_POLL_BUDGET), None | Some(16)));
        assert_eq!(sock_opt(fd, SO_PREFER_BUSY_POLL), Some(1));
    }
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

/// Bound to the unspecified address, one listener takes IPv4 and IPv6 clients (loopback
/// here); an IPv4 peer reads as IPv4, an IPv6 one has no IPv4 address to report.
#[test]
fn unspecified_bind_listens_on_both_families() {
    use std::io::{Read, Write};
    let mut t = KernelTransport::new(KernelConfig::default().with_bind(Ipv4Addr::UNSPECIFIED)).unwrap();
    let l = t.listen(0).unwrap();
    let addr = t.local_addr(l).unwrap();
    assert_eq!(*addr.ip(), Ipv4Addr::UNSPECIFIED);
    let port = addr.port();
    let c6 = match std::net::TcpStream::connect(("::1", port)) {
        Ok(c) => c,
        // No IPv6 on this host's loopback: nothing to test.
        Err(e) if e.kind() == io::ErrorKind::AddrNotAvailable => return,
        Err(e) => panic!("{e}"),
    };
    let c4 = std::net::TcpStream::connect((Ipv4Addr::LOCALHOST, port)).unwrap();
    let mut accepted = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(2);
    let mut events = Vec::new();
    while accepted.len() < 2 && Instant::now() < deadline {
        t.poll(&mut events, Some(Duration::from_millis(20))).unwrap();
        accepted.extend(events.drain(..).filter_map(|e| if let Event::Accepted { conn, .. } = e { Some(conn) } else { None }));
    }
    assert_eq!(accepted.len(), 2);
    let peers: Vec<_> = accepted.iter().map(|c| t.peer_addr(*c)).collect();
    let v4 = SocketAddrV4::new(Ipv4Addr::LOCALHOST, c4.local_addr().unwrap().port());
    assert!(peers.contains(&Some(v4)) && peers.contains(&None), "{peers:?}");
    let six: Vec<_> = accepted.iter().filter_map(|c| t.peer_socket_addr(*c)).filter(|a| a.is_ipv6()).collect();
    assert_eq!(six, [c6.local_addr().unwrap()], "the IPv6 peer, in full");
    for (mut c, msg) in [(c6, &b"over six"[..]), (c4, &b"over four"[..])] {
        c.write_all(msg).unwrap();
        let conn = accepted[if msg == b"over six" { peers.iter().position(|p| p.is_none()).unwrap() } else { peers.iter().position(|p| p.is_some()).unwrap() }];
        let mut got = BytesMut::new();
        let deadline = Instant::now() + Duration::from_secs(2);
        while got.len() < msg.len() && Instant::now() < deadline {
            t.poll(&mut events, Some(Duration::from_millis(20))).unwrap();
            events.clear();
            let _ = t.recv(conn, &mut got);
        }
        assert_eq!(&got[..], msg);
        t.send(conn, msg).unwrap();
        let mut back = vec![0u8; msg.len()];
        c.read_exact(&mut back).unwrap();
        assert_eq!(&back[..], msg);
    }
}

/// `connect_ip` over IPv6: to a listener on `[::1]`, connected, data both ways.
#[test]
fn connects_over_ipv6() {
    use std::io::{Read, Write};
    let l = match std::net::TcpListener::bind("[::1]:0") {
        Ok(l) => l,
        Err(e) if e.kind() == io::ErrorKind::AddrNotAvailable => return,
        Err(e) => panic!("{e}"),
    };
    let mut t = transport();
    let id = t.connect_ip(l.local_addr().unwrap()).unwrap();
    let (mut s, _) = l.accept().unwrap();
    assert_eq!(wait_for(&mut t, |e| matches!(e, Event::Connected(_) | Event::Closed(_))), Some(Event::Connected(id)));
    assert_eq!(t.peer_addr(id), None, "an IPv6 peer has no IPv4 address");
    assert_eq!(t.peer_socket_addr(id), Some(l.local_addr().unwrap()));
    assert_eq!(t.send(id, b"six").unwrap(), 3);
    let mut got = [0u8; 3];
    s.read_exact(&mut got).unwrap();
    assert_eq!(&got, b"six");
    s.write_all(b"back").unwrap();
    let mut b = BytesMut::new();
    let deadline = Instant::now() + Duration::from_secs(2);
    while b.len() < 4 && Instant::now() < deadline {
        let _ = wait_within(&mut t, Duration::from_millis(20), |e| matches!(e, Event::Readable(_)));
        let _ = t.recv(id, &mut b);
    }
    assert_eq!(&b[..], b"back");
}
