//! `Reply::Pending`: a handler that answers later, from `tick`.

use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use stack::codec::Lines;
use stack::rr::{Handler, ServerConfig};

use super::spawn_server;

/// Answers `slow X` later (from `tick`, after `delay`) with `X-late`, everything else at once;
/// counts opens and closes.
struct Deferred {
    delay: Duration,
    waiting: std::collections::VecDeque<(stack::ConnId, Instant, Vec<u8>)>,
    opened: u64,
    closed: u64,
}

impl Handler for Deferred {
    type Conn = ();

    fn handle(&mut self, conn: stack::ConnId, _: &mut (), req: &[u8], resp: &mut BytesMut) -> stack::rr::Reply {
        if let Some(x) = req.strip_prefix(b"slow ") {
            let mut late = x.to_vec();
            late.extend_from_slice(b"-late");
            self.waiting.push_back((conn, Instant::now() + self.delay, late));
            return stack::rr::Reply::Pending;
        }
        resp.extend_from_slice(req);
        stack::rr::Reply::Done
    }

    fn on_open(&mut self, _conn: stack::ConnId, _peer: Option<std::net::SocketAddrV4>) {
        self.opened += 1;
    }

    fn on_close(&mut self, _conn: stack::ConnId, _: ()) {
        self.closed += 1;
    }

    fn tick(&mut self, done: &mut stack::rr::Completions) {
        while self.waiting.front().is_some_and(|w| w.1 <= Instant::now()) {
            let (conn, _, payload) = self.waiting.pop_front().unwrap();
            done.complete(conn, &payload);
        }
    }
}

#[test]
fn pending_replies_complete_later_in_order_without_blocking_others() {
    let handler = Deferred { delay: Duration::from_millis(300), waiting: Default::default(), opened: 0, closed: 0 };
    let server = spawn_server(Lines::new(256), handler, ServerConfig::default());
    let read_line = |r: &mut std::io::BufReader<TcpStream>| {
        let mut l = String::new();
        std::io::BufRead::read_line(r, &mut l).unwrap();
        l.trim_end().to_string()
    };
    let a = TcpStream::connect(server.addr).unwrap();
    a.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut ra = std::io::BufReader::new(a.try_clone().unwrap());
    // Pipelined: the slow one holds back only what comes after it on this connection.
    (&a).write_all(b"one\nslow two\nthree\n").unwrap();
    assert_eq!(read_line(&mut ra), "one");
    let t0 = Instant::now();
    let b = TcpStream::connect(server.addr).unwrap();
    b.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut rb = std::io::BufReader::new(b.try_clone().unwrap());
    (&b).write_all(b"other\n").unwrap();
    assert_eq!(read_line(&mut rb), "other");
    assert!(t0.elapsed() < Duration::from_millis(250), "another connection waited for the pending one");
    assert_eq!(read_line(&mut ra), "two-late");
    assert!(t0.elapsed() >= Duration::from_millis(200), "completed before its time");
    assert_eq!(read_line(&mut ra), "three");
    // A connection that closes with a reply still pending gets it, then the close.
    (&a).write_all(b"slow four\n").unwrap();
    a.shutdown(std::net::Shutdown::Write).unwrap();
    assert_eq!(read_line(&mut ra), "four-late");
    assert_eq!(read_line(&mut ra), "", "EOF after the last reply");
    drop((b, rb));
    std::thread::sleep(Duration::from_millis(100));
    let (stats, h) = server.finish();
    assert_eq!((h.opened, h.closed, stats.requests), (2, 2, 5), "{stats:?}");
    assert!(h.waiting.is_empty());
}
