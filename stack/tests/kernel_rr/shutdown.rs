//! `Server::shutdown`: what was received is answered, then FIN; the deadline forces the rest.

use std::io::{Read, Write};
use std::net::{SocketAddrV4, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use stack::codec::{Codec, Lines};
use stack::rr::{Handler, Server, ServerConfig};

use super::Backend;

/// Counts each connection's requests in the state the server keeps for it, and records
/// what `on_close` got back.
#[derive(Default)]
struct Counting {
    closed: Vec<(u64, Option<SocketAddrV4>)>,
    /// Reply with this many bytes instead of the request (0: echo).
    reply: usize,
}

#[derive(Default)]
struct PerConn {
    requests: u64,
    peer: Option<SocketAddrV4>,
}

impl Handler for Counting {
    type Conn = PerConn;

    fn handle(&mut self, _: stack::ConnId, st: &mut PerConn, req: &[u8], resp: &mut BytesMut) -> stack::rr::Reply {
        st.requests += 1;
        if self.reply == 0 {
            resp.extend_from_slice(req);
        } else {
            resp.resize(self.reply, b'x');
        }
        stack::rr::Reply::Done
    }

    fn on_open(&mut self, _: stack::ConnId, peer: Option<SocketAddrV4>) -> PerConn {
        PerConn { requests: 0, peer }
    }

    fn on_close(&mut self, _: stack::ConnId, st: PerConn) {
        self.closed.push((st.requests, st.peer));
    }
}

/// Steps `server` until it has `n` connections (at most 5 s).
fn accept_n<T: Backend, C: Codec + Clone, H: Handler>(server: &mut Server<T, C, H>, n: usize) {
    let end = Instant::now() + Duration::from_secs(5);
    while server.connections() < n {
        assert!(Instant::now() < end, "{} of {n} connections accepted", server.connections());
        server.step(Some(Duration::from_millis(5))).unwrap();
    }
}

/// The case a new user hit: requests received but not yet read when the server stops. A
/// `shutdown` answers all 2,000, then the client sees a FIN (not a reset); `on_close` gets
/// the connection's state back with its peer address.
#[test]
fn shutdown_answers_what_was_received_then_closes_with_fin() {
    on_backend!(|T| answers_then_fin::<T>())
}

fn answers_then_fin<T: Backend>() {
    let t = T::open();
    let cfg = ServerConfig::default().with_port(0);
    let mut server = Server::new(t, Lines::new(64), Counting::default(), cfg).unwrap();
    let addr = server.local_addr().unwrap();
    let mut client = TcpStream::connect(addr).unwrap();
    client.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let client_addr = match client.local_addr().unwrap() {
        std::net::SocketAddr::V4(a) => a,
        a => panic!("{a}"),
    };
    accept_n(&mut server, 1);
    // 2,000 pipelined requests, all in the server's receive buffer before it stops.
    let mut reqs = Vec::new();
    for i in 0..2000 {
        reqs.extend_from_slice(format!("req {i}\n").as_bytes());
    }
    client.write_all(&reqs).unwrap();
    thread::sleep(Duration::from_millis(100));
    // Reads to EOF, then closes (drops) its end.
    let reader = thread::spawn(move || {
        let mut got = Vec::new();
        let r = client.read_to_end(&mut got);
        (r.map_err(|e| e.kind()), got)
    });
    let done = server.shutdown(Duration::from_secs(10)).unwrap();
    let (r, got) = reader.join().unwrap();
    assert!(r.is_ok(), "the client's read ended with {r:?} after {} bytes (a reset?)", got.len());
    assert_eq!(got, reqs, "every request answered, in order, then EOF");
    assert_eq!((done.open, done.graceful, done.forced, done.refused, done.answered), (1, 1, 0, 0, 2000), "{done:?}");
    assert_eq!(done.unanswered_bytes, 0, "{done:?}");
    let h = server.handler();
    assert_eq!(h.closed, vec![(2000, Some(client_addr))]);
    assert_eq!(server.connections(), 0);
}

/// The same with responses far larger than the requests: 2,000 requests received, 32 MiB of
/// responses (more than loopback's socket buffers hold) against a 64 KiB write high-water
/// mark. All are answered as the client reads.
#[test]
fn shutdown_answers_past_the_write_high_water_mark() {
    on_backend!(|T| past_high_water::<T>())
}

fn past_high_water<T: Backend>() {
    let t = T::open();
    let cfg = ServerConfig::default().with_write_high_water(64 << 10);
    let mut server = Server::new(t, Lines::new(64), Counting { reply: 16383, ..Counting::default() }, cfg).unwrap();
    let mut client = TcpStream::connect(server.local_addr().unwrap()).unwrap();
    client.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    accept_n(&mut server, 1);
    for i in 0..2000 {
        client.write_all(format!("{i}\n").as_bytes()).unwrap();
    }
    thread::sleep(Duration::from_millis(100));
    let reader = thread::spawn(move || {
        let mut got = Vec::new();
        let r = client.read_to_end(&mut got);
        (r.map_err(|e| e.kind()), got.len(), got.iter().filter(|&&b| b == b'\n').count())
    });
    let done = server.shutdown(Duration::from_secs(10)).unwrap();
    let (r, bytes, lines) = reader.join().unwrap();
    assert_eq!((r, bytes, lines), (Ok(2000 * 16384), 2000 * 16384, 2000), "{done:?}");
    assert_eq!((done.graceful, done.answered, done.unanswered_bytes), (1, 2000, 0), "{done:?}");
}

/// A peer that never closes keeps its connection until the deadline, which then closes it
/// (forced); one that closes is graceful; a connection that arrives during the shutdown is
/// closed without being served or opened.
#[test]
fn shutdown_forces_at_the_deadline_and_refuses_newcomers() {
    on_backend!(|T| forces_and_refuses::<T>())
}

fn forces_and_refuses<T: Backend>() {
    let t = T::open();
    let mut server = Server::new(t, Lines::new(64), Counting::default(), ServerConfig::default()).unwrap();
    let addr = server.local_addr().unwrap();
    let mut polite = TcpStream::connect(addr).unwrap();
    let mut stubborn = TcpStream::connect(addr).unwrap();
    accept_n(&mut server, 2);
    polite.write_all(b"a\nb\n").unwrap();
    stubborn.write_all(b"c\n").unwrap();
    thread::sleep(Duration::from_millis(50));
    // The polite client reads to EOF and closes; the stubborn one reads its answer and holds on.
    let go = Arc::new(AtomicBool::new(false));
    let go2 = go.clone();
    let polite_t = thread::spawn(move || {
        polite.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut got = Vec::new();
        let r = polite.read_to_end(&mut got).map_err(|e| e.kind());
        (r, got)
    });
    let late_t = thread::spawn(move || {
        while !go2.load(Ordering::Relaxed) {
            thread::sleep(Duration::from_millis(1));
        }
        // Arrives while the server lingers for the stubborn client.
        let mut late = TcpStream::connect(addr).unwrap();
        late.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let _ = late.write_all(b"never answered\n");
        let mut got = Vec::new();
        let _ = late.read_to_end(&mut got);
        got
    });
    let stubborn_t = thread::spawn(move || {
        stubborn.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut got = [0u8; 2];
        stubborn.read_exact(&mut got).unwrap();
        go.store(true, Ordering::Relaxed);
        let mut rest = Vec::new();
        let r = stubborn.read_to_end(&mut rest);
        // The stream goes back to the test, open, so the server sees no FIN from it.
        (got, r.map(|_| rest).map_err(|e| e.kind()), stubborn)
    });
    let t0 = Instant::now();
    let done = server.shutdown(Duration::from_millis(800)).unwrap();
    let took = t0.elapsed();
    let (r, got) = polite_t.join().unwrap();
    assert_eq!((r, &got[..]), (Ok(4), &b"a\nb\n"[..]));
    let (first, rest, _stubborn) = stubborn_t.join().unwrap();
    assert_eq!(&first, b"c\n");
    // It had the FIN after its answer: read_to_end ends with EOF, before the deadline.
    assert_eq!(rest, Ok(Vec::new()));
    let late = late_t.join().unwrap();
    assert!(late.is_empty(), "the late connection got {late:?}");
    assert!(took >= Duration::from_millis(700), "returned after {took:?}, before the deadline: {done:?}");
    assert_eq!((done.open, done.graceful, done.forced, done.answered), (2, 1, 1, 3), "{done:?}");
    assert_eq!(done.refused, 1, "{done:?}");
    let mut closed: Vec<u64> = server.handler().closed.iter().map(|c| c.0).collect();
    closed.sort();
    assert_eq!(closed, vec![1, 2], "on_close for both served connections, none for the late one");
}
