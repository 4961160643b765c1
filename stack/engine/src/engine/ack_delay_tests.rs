//! A delayed ACK (`EngineConfig::ack_delay`): the ACK of a request waits for its answer
//! to ride on, up to the delay; off by default.

use std::time::Duration;

use super::tests::{connected, read_all};
use crate::conn::ConnId;
use crate::testing::frames::{parse_tcp, Seg};
use crate::testing::{config, Pair};

const DELAY: Duration = Duration::from_millis(5);

/// A pair whose server (`a`) delays its ACKs by `DELAY` from the start.
fn delaying() -> Pair {
    let mut a = config(Pair::A);
    a.tcp.ack_delay = Some(DELAY);
    Pair::with(a, config(Pair::B))
}

/// The client sends `data`; the server takes it in and flushes, as a loop does before its
/// application has answered. What the server sent then (the client gets it).
fn request(p: &mut Pair, cb: ConnId, data: &[u8]) -> Vec<Seg> {
    p.b.send(cb, data).unwrap();
    p.b.flush().unwrap();
    p.exchange();
    p.a.poll(&mut Vec::new(), None).unwrap();
    p.a.flush().unwrap();
    sent_by_server(p)
}

/// What the server sent since the last look, delivered to the client.
fn sent_by_server(p: &mut Pair) -> Vec<Seg> {
    let segs = p.a.link.out.iter().filter_map(|f| parse_tcp(f)).collect();
    p.exchange();
    p.b.poll(&mut Vec::new(), None).unwrap();
    p.b.flush().unwrap();
    segs
}

#[test]
fn without_a_delay_the_ack_leaves_before_the_answer() {
    let mut p = Pair::new();
    let (ca, cb) = connected(&mut p);
    let segs = request(&mut p, cb, b"ping");
    assert_eq!(segs.len(), 1);
    assert!(segs[0].payload.is_empty(), "a bare ACK");
    assert_eq!(read_all(&mut p.a, ca), b"ping");
}

#[test]
fn with_a_delay_the_ack_rides_on_the_answer() {
    let mut p = Pair::new();
    let (ca, cb) = connected(&mut p);
    // Set on a connection already open.
    p.a.engine.set_ack_delay(Some(DELAY));
    assert!(request(&mut p, cb, b"ping").is_empty(), "no bare ACK before the answer");
    // The answer comes a few task hops later, within the delay.
    p.advance(Duration::from_millis(1));
    p.a.tick();
    assert!(sent_by_server(&mut p).is_empty());
    assert_eq!(read_all(&mut p.a, ca), b"ping");
    p.a.send(ca, b"pong").unwrap();
    p.a.flush().unwrap();
    let segs = sent_by_server(&mut p);
    assert_eq!(segs.len(), 1);
    assert_eq!(segs[0].payload, b"pong");
    let acked = segs[0].ack;
    // Nothing more when the delay would have ended: the answer carried the ACK.
    p.advance(DELAY * 2);
    p.a.tick();
    assert!(sent_by_server(&mut p).is_empty());
    // The next request is acknowledged by the next answer as well.
    assert!(request(&mut p, cb, b"ping").is_empty());
    assert_eq!(read_all(&mut p.a, ca), b"ping");
    p.a.send(ca, b"pong").unwrap();
    p.a.flush().unwrap();
    let segs = sent_by_server(&mut p);
    assert_eq!((segs.len(), segs[0].ack.wrapping_sub(acked)), (1, 4));
}

#[test]
fn without_an_answer_the_ack_goes_when_the_delay_ends() {
    let mut p = delaying();
    let (_, cb) = connected(&mut p);
    assert!(request(&mut p, cb, b"ping").is_empty());
    p.advance(DELAY - Duration::from_millis(1));
    p.a.tick();
    assert!(sent_by_server(&mut p).is_empty());
    p.advance(Duration::from_millis(1));
    p.a.tick();
    let segs = sent_by_server(&mut p);
    assert_eq!(segs.len(), 1);
    assert!(segs[0].payload.is_empty(), "a bare ACK");
}

#[test]
fn an_upload_does_not_wait_for_the_delay() {
    // The client's window holds one segment at first (smoltcp's initial window, 2,048
    // octets): it sends one and waits for its ACK. A full segment is acknowledged at once
    // (smoltcp patch `ack-full-segment`), so the upload never waits for the delay.
    let mut p = delaying();
    let (ca, cb) = connected(&mut p);
    let segs = request(&mut p, cb, &[7u8; 4000]);
    assert_eq!(segs.len(), 1);
    assert!(segs[0].payload.is_empty(), "a bare ACK");
    // The rest, with the clock standing still.
    p.settle(20);
    assert_eq!(read_all(&mut p.a, ca).len(), 4000);
}
