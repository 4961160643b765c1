//! A listener that stops: new connections to its port are refused with a RST, the ones
//! already made go on.

use std::net::SocketAddrV4;

use crate::conn::Event;
use crate::testing::Pair;

#[test]
fn unlisten_refuses_new_connections_and_keeps_established_ones() {
    let mut p = Pair::new();
    let lid = p.a.listen(7).unwrap();
    let old = p.b.connect(SocketAddrV4::new(Pair::A, 7)).unwrap();
    let (ea, eb) = p.settle(20);
    assert!(eb.contains(&Event::Connected(old)), "{eb:?}");
    let served = ea.iter().find_map(|e| if let Event::Accepted { conn, .. } = e { Some(*conn) } else { None }).unwrap();
    let listening = p.a.engine.stats().listening;
    assert!(listening > 0);

    p.a.engine.unlisten(lid);
    assert_eq!(p.a.engine.stats().listening, 0, "its listening sockets are gone");
    let new = p.b.connect(SocketAddrV4::new(Pair::A, 7)).unwrap();
    let (ea, eb) = p.settle(20);
    assert!(!ea.iter().any(|e| matches!(e, Event::Accepted { .. })), "nothing accepted after unlisten: {ea:?}");
    assert!(eb.contains(&Event::Closed(new)), "the new connection is refused (RST): {eb:?}");
    assert!(!eb.contains(&Event::Connected(new)), "{eb:?}");

    // The established connection still carries data both ways.
    p.b.send(old, b"still here").unwrap();
    p.settle(20);
    let mut buf = bytes::BytesMut::new();
    p.a.recv(served, &mut buf).unwrap();
    assert_eq!(&buf[..], b"still here");
    // Unknown or already stopped listeners are ignored.
    p.a.engine.unlisten(lid);
    p.a.engine.unlisten(crate::conn::ListenerId(99));
}
