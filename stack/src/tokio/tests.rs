//! The adapter over the kernel backend on loopback (no privileges); the xsk backend is
//! exercised by the root tests in `stack/tests/tokio_adapter.rs`.

use std::net::{SocketAddr, SocketAddrV4};
use std::time::Duration;

use ::tokio::io::{AsyncReadExt, AsyncWriteExt};
use ::tokio::time::timeout;

use super::shared::{lock, RX_KEEP};
use super::*;
use crate::kernel::{KernelConfig, KernelTransport};

fn run<F: std::future::Future>(f: F) -> F::Output {
    ::tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(f)
}

fn kernel_net() -> Net {
    Net::spawn(KernelTransport::new(KernelConfig::default()).unwrap()).unwrap()
}

fn v4(a: SocketAddr) -> SocketAddrV4 {
    match a {
        SocketAddr::V4(a) => a,
        SocketAddr::V6(_) => unreachable!("the transports are IPv4"),
    }
}

const LIMIT: Duration = Duration::from_secs(10);

#[test]
fn echo_with_a_stock_tokio_client_and_with_connect() {
    run(async {
        let net = kernel_net();
        let listener = net.listen(0).unwrap();
        let addr = v4(listener.local_addr().unwrap());
        let server = ::tokio::spawn(async move {
            for _ in 0..2 {
                let (mut s, peer) = listener.accept().await.unwrap();
                assert_eq!(peer, s.peer_addr().unwrap());
                let mut buf = vec![0u8; 64 * 1024];
                loop {
                    let n = s.read(&mut buf).await.unwrap();
                    if n == 0 {
                        break;
                    }
                    s.write_all(&buf[..n]).await.unwrap();
                }
            }
        });
        let msg: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        // tokio's own client, then the adapter's connect on a second transport.
        let c = ::tokio::net::TcpStream::connect(addr).await.unwrap();
        let (mut r, mut w) = c.into_split();
        let m = msg.clone();
        let writer = ::tokio::spawn(async move { w.write_all(&m).await.unwrap() });
        let mut got = vec![0u8; msg.len()];
        timeout(LIMIT, r.read_exact(&mut got)).await.unwrap().unwrap();
        writer.await.unwrap();
        assert!(got == msg);
        drop(r);
        let client_net = kernel_net();
        let mut c = timeout(LIMIT, client_net.connect(addr)).await.unwrap().unwrap();
        c.write_all(b"hello").await.unwrap();
        let mut got = [0u8; 5];
        timeout(LIMIT, c.read_exact(&mut got)).await.unwrap().unwrap();
        assert_eq!(&got, b"hello");
        drop(c);
        timeout(LIMIT, server).await.unwrap().unwrap();
    });
}

#[test]
fn shutdown_sends_fin_and_reading_goes_on() {
    run(async {
        let net = kernel_net();
        let listener = net.listen(0).unwrap();
        let addr = listener.local_addr().unwrap();
        let server = ::tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut req = Vec::new();
            s.read_to_end(&mut req).await.unwrap(); // until the client's FIN
            s.write_all(&req).await.unwrap(); // the half-closed peer still reads
            s.write_all(b" done").await.unwrap();
            s.shutdown().await.unwrap();
            let mut rest = Vec::new();
            s.read_to_end(&mut rest).await.unwrap();
            assert!(rest.is_empty());
            assert!(s.write_all(b"x").await.is_err(), "writing after shutdown fails");
        });
        let mut c = ::tokio::net::TcpStream::connect(addr).await.unwrap();
        c.write_all(b"request").await.unwrap();
        c.shutdown().await.unwrap();
        let mut got = Vec::new();
        timeout(LIMIT, c.read_to_end(&mut got)).await.unwrap().unwrap();
        assert_eq!(got, b"request done");
        timeout(LIMIT, server).await.unwrap().unwrap();
    });
}

#[test]
fn connect_to_a_closed_port_fails() {
    run(async {
        let net = kernel_net();
        // A port that nothing listens on: bind one, note it, drop it.
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let r = timeout(LIMIT, net.connect(SocketAddrV4::new([127, 0, 0, 1].into(), port))).await.unwrap();
        assert_eq!(r.err().map(|e| e.kind()), Some(std::io::ErrorKind::ConnectionRefused));
    });
}

/// A peer that sends much more than the application reads, and one that reads nothing of
/// what the application writes: neither grows the adapter's buffers past one receive.
#[test]
fn slow_readers_stall_their_connection_and_grow_no_memory() {
    run(async {
        let net = kernel_net();
        let listener = net.listen(0).unwrap();
        let addr = listener.local_addr().unwrap();
        let mut c = ::tokio::net::TcpStream::connect(addr).await.unwrap();
        let (mut s, _) = listener.accept().await.unwrap();

        // The server does not read: the client's writes stall once the buffers are full.
        let big = vec![7u8; 64 << 20];
        let stalled = timeout(Duration::from_millis(500), c.write_all(&big)).await;
        assert!(stalled.is_err(), "64 MiB went into a connection nobody reads");
        let held = { lock(&net.inner).conns.iter().flatten().map(|c| c.rx.capacity()).max().unwrap() };
        assert!(held <= 2 * RX_KEEP, "adapter buffer {held} bytes");

        // The client does not read: the server's writes stall too.
        let stalled = timeout(Duration::from_millis(500), s.write_all(&big)).await;
        assert!(stalled.is_err(), "64 MiB went out to a peer that reads nothing");

        // One read of the server's makes room again, and the transport says Writable.
        let mut buf = vec![0u8; 1 << 20];
        let n = s.read(&mut buf).await.unwrap();
        assert!(n > 0);
        let mut total = n;
        while total < 1 << 20 {
            total += s.read(&mut buf).await.unwrap();
        }
        let held = { lock(&net.inner).conns.iter().flatten().map(|c| c.rx.capacity()).max().unwrap() };
        assert!(held <= 2 * RX_KEEP, "adapter buffer {held} bytes");
    });
}

/// Streams dropped, listener dropped: every connection is closed in the transport and the
/// adapter forgets it; a connection arriving after the listener went away is closed.
#[test]
fn dropping_streams_and_listeners_frees_everything() {
    run(async {
        let net = kernel_net();
        let listener = net.listen(0).unwrap();
        let addr = listener.local_addr().unwrap();
        let mut clients = Vec::new();
        for _ in 0..8 {
            clients.push(::tokio::net::TcpStream::connect(addr).await.unwrap());
        }
        let (s, _) = listener.accept().await.unwrap();
        drop(s);
        // Let the other seven reach the queue, then drop the listener with them in it.
        ::tokio::time::sleep(Duration::from_millis(100)).await;
        drop(listener);
        for mut c in clients {
            let mut buf = [0u8; 1];
            let r = timeout(LIMIT, c.read(&mut buf)).await.unwrap();
            assert!(matches!(r, Ok(0) | Err(_)), "{r:?}");
        }
        assert_eq!(lock(&net.inner).conns.iter().flatten().count(), 0);
    });
}

#[test]
fn one_runtime_per_queue() {
    use std::sync::atomic::{AtomicU16, Ordering};
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let served = AtomicU16::new(0);
    let make = |_| KernelTransport::new(KernelConfig { reuse_port: true, ..KernelConfig::default() });
    let app = |_i, net: Net| {
        let served = &served;
        async move {
            let listener = net.listen(port)?;
            // Each queue serves one connection and returns.
            let (mut s, _) = listener.accept().await?;
            s.write_all(b"hi").await?;
            served.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
    };
    std::thread::scope(|sc| {
        let h = sc.spawn(|| serve_per_queue(2, make, app));
        // SO_REUSEPORT spreads connections by hash: connect until both queues served one.
        let until = std::time::Instant::now() + LIMIT;
        while !h.is_finished() && std::time::Instant::now() < until {
            if let Ok(mut c) = std::net::TcpStream::connect(("127.0.0.1", port)) {
                let mut b = [0u8; 2];
                let _ = std::io::Read::read(&mut c, &mut b);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        h.join().unwrap().unwrap();
    });
    assert_eq!(served.load(Ordering::SeqCst), 2);
}

/// A mock transport's methods for connections, which it never has: every call on one
/// fails as for an unknown connection, and connecting is refused.
macro_rules! no_connections {
    () => {
        fn connect(&mut self, _: SocketAddrV4) -> Result<ConnId, TransportError> {
            Err(TransportError::InvalidInput("none"))
        }
        fn recv(&mut self, c: ConnId, _: &mut BytesMut) -> Result<usize, TransportError> {
            Err(TransportError::UnknownConn(c))
        }
        fn send(&mut self, c: ConnId, _: &[u8]) -> Result<usize, TransportError> {
            Err(TransportError::UnknownConn(c))
        }
        fn close(&mut self, _: ConnId) {}
        fn shutdown_write(&mut self, c: ConnId) -> Result<(), TransportError> {
            Err(TransportError::UnknownConn(c))
        }
        fn peer_addr(&self, _: ConnId) -> Option<SocketAddrV4> {
            None
        }
    };
}

/// A transport with no I/O whose only work is a timer that is due at once: the driver must
/// poll it on the pass after `next_wake` said so (a driver that woke itself without polling
/// would spin until a frame arrived).
#[test]
fn a_due_timer_gets_polled() {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Arc;

    use bytes::BytesMut;

    use crate::transport::{ConnId, Event, ListenerId, Transport, TransportError};

    struct TimerOnly {
        due: Arc<AtomicBool>,
        polls: Arc<AtomicUsize>,
        // A descriptor that never becomes readable.
        quiet: std::os::unix::net::UnixStream,
    }
    impl Transport for TimerOnly {
        fn listen(&mut self, _: u16) -> Result<ListenerId, TransportError> {
            Err(TransportError::InvalidInput("none"))
        }
        no_connections!();
        fn poll(&mut self, _: &mut Vec<Event>, _: Option<Duration>) -> Result<(), TransportError> {
            self.polls.fetch_add(1, Ordering::SeqCst);
            self.due.store(false, Ordering::SeqCst);
            Ok(())
        }
        fn wait_fd(&self) -> Option<std::os::fd::RawFd> {
            Some(std::os::fd::AsRawFd::as_raw_fd(&self.quiet))
        }
        fn next_wake(&mut self) -> Option<Duration> {
            self.due.load(Ordering::SeqCst).then_some(Duration::ZERO)
        }
        fn local_addr(&self, _: ListenerId) -> Option<SocketAddrV4> {
            None
        }
        fn name(&self) -> &'static str {
            "timer-only"
        }
    }

    let (due, polls) = (Arc::new(AtomicBool::new(true)), Arc::new(AtomicUsize::new(0)));
    let (quiet, _other) = std::os::unix::net::UnixStream::pair().unwrap();
    let t = TimerOnly { due: due.clone(), polls: polls.clone(), quiet };
    run(async {
        let _net = Net::spawn(t).unwrap();
        ::tokio::time::sleep(Duration::from_millis(50)).await;
    });
    assert!(!due.load(Ordering::SeqCst), "the due timer was never polled ({} polls)", polls.load(Ordering::SeqCst));
}

/// A transport that fails: the driver stops, and a task waiting in `accept` gets the error
/// instead of waiting forever.
#[test]
fn a_failed_transport_fails_the_waiting_tasks() {
    use bytes::BytesMut;

    use crate::transport::{ConnId, Event, ListenerId, Transport, TransportError};

    struct Failing;
    impl Transport for Failing {
        fn listen(&mut self, _: u16) -> Result<ListenerId, TransportError> {
            Ok(ListenerId(0))
        }
        no_connections!();
        fn poll(&mut self, _: &mut Vec<Event>, _: Option<Duration>) -> Result<(), TransportError> {
            Err(TransportError::Io(std::io::Error::other("ring broke")))
        }
        fn local_addr(&self, _: ListenerId) -> Option<SocketAddrV4> {
            Some(SocketAddrV4::new([127, 0, 0, 1].into(), 1))
        }
        fn name(&self) -> &'static str {
            "failing"
        }
    }

    run(async {
        let (net, driver) = Net::new(Failing).unwrap();
        let listener = net.listen(1).unwrap();
        let driver = ::tokio::spawn(driver);
        let r = timeout(LIMIT, listener.accept()).await.expect("accept returned");
        assert!(r.is_err());
        assert!(driver.await.unwrap().is_err());
        assert!(net.listen(2).is_err());
    });
}

/// After the listener is dropped (axum's and tonic's graceful shutdown do so on SIGTERM), a
/// new connection is refused, as with tokio's own listener; one accepted before goes on.
fn refused_after_listener_dropped(net: impl FnOnce() -> Net) {
    run(async move {
        let net = net();
        let listener = net.listen(0).unwrap();
        let addr = v4(listener.local_addr().unwrap());
        let c = ::tokio::net::TcpStream::connect(addr).await.unwrap();
        let (mut s, _) = timeout(LIMIT, listener.accept()).await.unwrap().unwrap();
        drop(listener);
        let e = timeout(LIMIT, ::tokio::net::TcpStream::connect(addr)).await.unwrap().expect_err("refused");
        assert_eq!(e.kind(), std::io::ErrorKind::ConnectionRefused, "{e}");
        let (mut r, mut w) = c.into_split();
        w.write_all(b"after").await.unwrap();
        let mut got = [0u8; 5];
        timeout(LIMIT, s.read_exact(&mut got)).await.unwrap().unwrap();
        s.write_all(&got).await.unwrap();
        timeout(LIMIT, r.read_exact(&mut got)).await.unwrap().unwrap();
        assert_eq!(&got, b"after");
    });
}

#[test]
fn kernel_refuses_after_listener_dropped() {
    refused_after_listener_dropped(kernel_net);
}

#[cfg(feature = "uring")]
#[test]
fn uring_refuses_after_listener_dropped() {
    refused_after_listener_dropped(|| {
        Net::spawn(crate::uring::UringTransport::new(crate::uring::UringConfig::default()).unwrap()).unwrap()
    });
}

/// Over IPv6 on the kernel backend: a listener on the unspecified address accepts an
/// IPv6 client and reports its address; `Net::connect` takes an IPv6 address.
#[test]
fn ipv6_peers_and_connects() {
    run(async {
        if std::net::TcpListener::bind("[::1]:0").is_err() {
            return; // no IPv6 on loopback here
        }
        let net = Net::spawn(KernelTransport::new(KernelConfig::default().with_bind(std::net::Ipv4Addr::UNSPECIFIED)).unwrap()).unwrap();
        let l = net.listen(0).unwrap();
        let port = l.local_addr().unwrap().port();
        let to: SocketAddr = format!("[::1]:{port}").parse().unwrap();
        let client_net = kernel_net();
        let connect = client_net.connect(to);
        let (mut s, peer) = timeout(LIMIT, l.accept()).await.unwrap().unwrap();
        let mut c = timeout(LIMIT, connect).await.unwrap().unwrap();
        assert!(peer.is_ipv6() && peer.ip().is_loopback(), "{peer}");
        assert_eq!(s.peer_addr().unwrap(), peer);
        assert_eq!(c.peer_addr().unwrap(), to);
        c.write_all(b"six").await.unwrap();
        let mut got = [0u8; 3];
        timeout(LIMIT, s.read_exact(&mut got)).await.unwrap().unwrap();
        assert_eq!(&got, b"six");
    });
}

/// `Net` asks its transport to delay ACKs for the answers to carry them (`ACK_DELAY`).
#[test]
fn net_asks_the_transport_to_delay_its_acks() {
    use std::sync::{Arc, Mutex};

    use bytes::BytesMut;

    use crate::transport::{ConnId, Event, ListenerId, Transport, TransportError};

    struct Recording(Arc<Mutex<Vec<Option<Duration>>>>);
    impl Transport for Recording {
        fn listen(&mut self, _: u16) -> Result<ListenerId, TransportError> {
            Err(TransportError::InvalidInput("none"))
        }
        no_connections!();
        fn poll(&mut self, _: &mut Vec<Event>, _: Option<Duration>) -> Result<(), TransportError> {
            Ok(())
        }
        fn set_ack_delay(&mut self, delay: Option<Duration>) {
            self.0.lock().unwrap().push(delay);
        }
        fn local_addr(&self, _: ListenerId) -> Option<SocketAddrV4> {
            None
        }
        fn name(&self) -> &'static str {
            "recording"
        }
    }

    let asked = Arc::new(Mutex::new(Vec::new()));
    let t = Recording(asked.clone());
    run(async {
        let net = Net::spawn(t).unwrap();
        assert_eq!(*asked.lock().unwrap(), vec![Some(super::ACK_DELAY)]);
        // And it can be changed afterwards.
        net.with_transport(|t| t.set_ack_delay(None));
    });
    assert_eq!(*asked.lock().unwrap(), vec![Some(super::ACK_DELAY), None]);
}
