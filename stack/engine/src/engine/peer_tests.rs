//! What one connection learns of its peer's round trip, shared with the
//! peer's other connections (`Recovery::timestamps`; see `peer_memory`): a
//! client that answers late draws spurious retransmissions on its first
//! connections only, and a lost segment on one connection does not slow the
//! recovery of the others.

use std::net::SocketAddrV4;
use std::time::Duration;

use bytes::BytesMut;

use crate::conn::{ConnId, Event};
use crate::recovery::Recovery;
use crate::testing::frames::parse_tcp;
use crate::testing::{config, Pair};

const PORT: u16 = 7;

fn pair(timestamps: bool) -> Pair {
    let mut a = config(Pair::A);
    a.tcp.recovery = Recovery::default().with_timestamps(timestamps);
    let mut b = config(Pair::B);
    b.tcp.recovery = Recovery::default().with_timestamps(timestamps);
    let mut p = Pair::with(a, b);
    p.a.listen(PORT).unwrap();
    p
}

fn connect(p: &mut Pair) -> (ConnId, ConnId) {
    let cb = p.b.connect(SocketAddrV4::new(Pair::A, PORT)).unwrap();
    let (ea, eb) = p.settle(20);
    assert!(eb.contains(&Event::Connected(cb)), "client events {eb:?}");
    let ca = ea
        .iter()
        .find_map(|e| if let Event::Accepted { conn, .. } = e { Some(*conn) } else { None })
        .expect("accepted");
    (ca, cb)
}

fn read_all(t: &mut crate::testing::MemTransport, c: ConnId) -> Vec<u8> {
    let mut b = BytesMut::new();
    while t.recv(c, &mut b).unwrap() > 0 {}
    b.to_vec()
}

fn data(frames: &[Vec<u8>]) -> usize {
    frames.iter().filter_map(|f| parse_tcp(f)).filter(|s| !s.payload.is_empty()).count()
}

/// A request and its response, whose ACK the client holds for `delay` (it
/// answers duplicates at once, with a D-SACK). Returns the server's data
/// segments sent meanwhile.
fn late_ack_exchange(p: &mut Pair, ca: ConnId, cb: ConnId, delay: Duration) -> usize {
    let mut ev = Vec::new();
    p.b.send(cb, b"request").unwrap();
    p.settle(10);
    assert_eq!(read_all(&mut p.a, ca), b"request");
    p.a.send(ca, b"response").unwrap();
    p.a.flush().unwrap();
    p.b.inbox.extend(p.a.take_sent());
    p.b.poll(&mut ev, None).unwrap();
    assert_eq!(read_all(&mut p.b, cb), b"response");
    p.b.flush().unwrap();
    let held = p.b.take_sent();
    let (step, mut waited, mut sent) = (Duration::from_millis(1), Duration::ZERO, 0);
    while waited < delay {
        p.advance(step);
        waited += step;
        p.a.tick();
        let out = p.a.take_sent();
        sent += data(&out);
        p.b.inbox.extend(out);
        p.b.poll(&mut ev, None).unwrap();
        p.b.flush().unwrap();
        p.a.inbox.extend(p.b.take_sent());
        p.a.poll(&mut ev, None).unwrap();
    }
    p.a.inbox.extend(held);
    p.settle(10);
    sent
}

/// Sixteen connections one after another, three late exchanges each; the
/// server's retransmissions per connection.
fn sixteen_connections(timestamps: bool, delay: Duration) -> Vec<usize> {
    let mut p = pair(timestamps);
    (0..16)
        .map(|_| {
            let (ca, cb) = connect(&mut p);
            (0..3).map(|_| late_ack_exchange(&mut p, ca, cb, delay)).sum()
        })
        .collect()
}

#[test]
fn a_late_peer_draws_spurious_retransmissions_on_its_first_connections_only() {
    let shared = sixteen_connections(true, Duration::from_millis(150));
    assert!(shared[8..].iter().all(|&n| n == 0), "{shared:?}");
    // Without timestamps, from the probes' pooled verdicts: once they show the
    // peer holds its ACKs (about 25 in a row, here in the twelfth connection), every
    // connection to it waits for them.
    let pooled = sixteen_connections(false, Duration::from_millis(150));
    assert!(pooled[..4].iter().all(|&n| n > 0), "{pooled:?}");
    assert!(pooled[13..].iter().all(|&n| n == 0), "{pooled:?}");
}

#[test]
fn a_peer_whose_acks_come_in_late_storms_is_waited_for_as_long() {
    // Most ACKs come at once; one in six is held 400 ms (a client that stalls now
    // and then): past SRTT + 200 ms, Linux's rule and where a held peer's wait starts,
    // while the peer's SRTT stays small. Once the pooled verdicts show the peer holds
    // its ACKs (in the twenty-fifth connection), each late probe's verdict says how
    // late (here, no later than the probe itself: the peer's D-SACK for it covers the
    // segment) and raises the wait to that and an eighth; it falls back between
    // storms. It settles where about every other storm draws a probe, where with a
    // fixed 200 ms (Linux's) every one did.
    let mut p = pair(false);
    let resent: Vec<usize> = (0..40)
        .map(|_| {
            let (ca, cb) = connect(&mut p);
            (0..6)
                .map(|i| late_ack_exchange(&mut p, ca, cb, Duration::from_millis(if i == 2 { 400 } else { 1 })))
                .sum()
        })
        .collect();
    assert!(resent[..25].iter().all(|&n| n == 1), "{resent:?}");
    assert!(resent[30..].iter().sum::<usize>() <= 5, "{resent:?}");
}
