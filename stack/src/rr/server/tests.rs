//! The server over the xsk engine's in-memory transport (no OS, no clock).

use std::net::SocketAddrV4;

use bytes::BytesMut;

use super::*;
use crate::codec::LengthPrefixed;
use crate::rr::handler::Echo;
use crate::xsk::testing::{MemTransport, Pair};

/// Moves frames both ways once: the server's out to the client's inbox and back.
fn wire(server: &mut Server<MemTransport, LengthPrefixed, Echo>, client: &mut MemTransport) {
    let out = server.transport_mut().take_sent();
    client.inbox.extend(out);
    let back = client.take_sent();
    server.transport_mut().inbox.extend(back);
}

#[test]
fn settle_counts_a_close_the_stack_saw_before_the_stop() {
    let Pair { a, b: mut client, .. } = Pair::new();
    let cfg = ServerConfig { port: 7, poll_timeout: Some(Duration::ZERO), ..ServerConfig::default() };
    let mut server = Server::new(a, LengthPrefixed::new(64), Echo, cfg).unwrap();
    let c = client.connect(SocketAddrV4::new(Pair::A, 7)).unwrap();
    let mut ev = Vec::new();
    for _ in 0..10 {
        client.poll(&mut ev, None).unwrap();
        client.flush().unwrap();
        wire(&mut server, &mut client);
        server.step(Some(Duration::ZERO)).unwrap();
        wire(&mut server, &mut client);
    }
    assert!(ev.contains(&Event::Connected(c)), "{ev:?}");
    assert_eq!(server.stats().accepted, 1);
    // One request, its answer, then the client closes.
    client.send(c, &[0, 0, 0, 2, b'h', b'i']).unwrap();
    client.flush().unwrap();
    wire(&mut server, &mut client);
    server.step(Some(Duration::ZERO)).unwrap();
    wire(&mut server, &mut client);
    client.poll(&mut ev, None).unwrap();
    let mut got = BytesMut::new();
    client.recv(c, &mut got).unwrap();
    assert_eq!(&got[..], &[0, 0, 0, 2, b'h', b'i']);
    client.close(c);
    client.flush().unwrap();
    wire(&mut server, &mut client);
    // The stop comes after the step that took the FIN: its `Closed` is still in the stack.
    server.step(Some(Duration::ZERO)).unwrap();
    assert_eq!((server.stats().closed, server.connections()), (0, 1), "the case this test is about");
    assert!(server.settle(8).unwrap() > 0);
    assert_eq!((server.stats().closed, server.connections()), (1, 0));
    // Nothing more to deliver: one empty round.
    assert_eq!(server.settle(8).unwrap(), 0);
}
