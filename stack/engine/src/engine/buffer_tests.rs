//! The engine's buffers in memory: they start small and grow, out-of-order
//! data survives the growth, and checksum offload changes nothing on the wire. What the
//! application writes before a flush leaves by the right way (at once, or with the flush).

use std::time::Duration;

use super::tests::{connected, read_all};
use crate::conn::Event;
use crate::testing::{config, mac_of, MemTransport, Pair};

/// (receive, send) capacity of connection `c`'s socket.
fn capacities(t: &MemTransport, c: crate::conn::ConnId) -> (usize, usize) {
    let conn = t.engine.conns.get(c).unwrap();
    let s = t.engine.buckets[conn.bucket as usize].sockets.get::<smoltcp::socket::tcp::Socket>(conn.handle);
    (s.recv_capacity(), s.send_capacity())
}

#[test]
fn buffers_start_small_grow_for_a_large_request_and_response_and_the_pool_keeps_only_small_ones() {
    let mut a = config(Pair::A);
    (a.tcp.rx_buffer, a.tcp.tx_buffer, a.tcp.initial_buffer) = (256 * 1024, 256 * 1024, 4096);
    let mut b = config(Pair::B);
    (b.tcp.rx_buffer, b.tcp.tx_buffer) = (256 * 1024, 256 * 1024);
    let mut p = Pair::with(a, b);
    let (ca, cb) = connected(&mut p);
    assert_eq!(capacities(&p.a, ca), (4096, 4096));
    // Small requests and responses keep them small.
    for _ in 0..50 {
        p.b.send(cb, &[1u8; 200]).unwrap();
        p.settle(4);
        let got = read_all(&mut p.a, ca);
        p.a.send(ca, &got).unwrap();
        p.settle(4);
        assert_eq!(read_all(&mut p.b, cb).len(), 200);
    }
    assert_eq!(capacities(&p.a, ca), (4096, 4096));
    // A 300 KB request and its echo: both grow to the largest, and every byte arrives.
    let data: Vec<u8> = (0..300_000u32).map(|i| (i % 253) as u8).collect();
    let (mut sent, mut got, mut back, mut echoed) = (0, Vec::new(), Vec::new(), 0);
    for _ in 0..3000 {
        if sent < data.len() {
            sent += p.b.send(cb, &data[sent..]).unwrap();
        }
        p.settle(2);
        got.extend(read_all(&mut p.a, ca));
        if echoed < got.len() {
            echoed += p.a.send(ca, &got[echoed..]).unwrap();
        }
        back.extend(read_all(&mut p.b, cb));
        if back.len() == data.len() {
            break;
        }
    }
    assert!(got == data && back == data, "{} / {} of {}", got.len(), back.len(), data.len());
    let (rx, tx) = capacities(&p.a, ca);
    assert!(rx > 4096 && tx > 4096 && rx <= 256 * 1024 && tx <= 256 * 1024, "{rx} {tx}");
    eprintln!("grown to {rx} + {tx}");
    // Closed and recycled: a grown socket is freed, not pooled.
    let pooled = p.a.engine.stats().pooled_sockets;
    p.b.close(cb);
    p.settle(20);
    p.a.close(ca);
    p.settle(20);
    let s = p.a.engine.stats();
    assert_eq!((s.connections, s.pooled_sockets), (0, pooled), "{s:?}");
}

#[test]
fn out_of_order_data_survives_the_receive_buffer_growing() {
    let mut a = config(Pair::A);
    (a.tcp.rx_buffer, a.tcp.initial_buffer) = (64 * 1024, 4096);
    let mut p = Pair::with(a, config(Pair::B));
    let (ca, cb) = connected(&mut p);
    // Every third frame of a batch delivered after the rest: segments wait in the
    // assembler, beyond the data not read yet, while the buffer grows.
    let mut n = 0u32;
    p.filter = Some(Box::new(move |v: Vec<Vec<u8>>| {
        let (mut out, mut late) = (Vec::new(), Vec::new());
        for f in v {
            n += 1;
            if n.is_multiple_of(3) { late.push(f) } else { out.push(f) }
        }
        out.extend(late);
        out
    }));
    let data: Vec<u8> = (0..100_000u32).map(|i| (i * 31 % 251) as u8).collect();
    let (mut sent, mut got) = (0, Vec::new());
    for _ in 0..4000 {
        if sent < data.len() {
            sent += p.b.send(cb, &data[sent..]).unwrap_or(0);
        }
        p.settle(3);
        got.extend(read_all(&mut p.a, ca));
        if got.len() == data.len() {
            break;
        }
        p.advance(Duration::from_millis(20));
    }
    assert!(got == data, "{} of {}", got.len(), data.len());
    assert_eq!(capacities(&p.a, ca).0, 64 * 1024);
}

/// Checksum offload (AF_XDP TX metadata) changes who completes the TCP
/// checksum, nothing on the wire: the same exchange with A's link
/// offloading (the engine leaves the checksum, the link writes the
/// pseudo-header sum and completes it as a device does) and without gives
/// the same frames, byte for byte, and every TCP frame of A's went through
/// the offload.
#[test]
fn checksum_offload_puts_the_same_frames_on_the_wire() {
    use std::cell::RefCell;
    use std::rc::Rc;
    let run = |offload: bool| {
        let mut p = Pair::new();
        p.a.link.csum_offload = offload;
        let wire = Rc::new(RefCell::new(Vec::new()));
        let w = wire.clone();
        p.filter = Some(Box::new(move |frames: Vec<Vec<u8>>| {
            w.borrow_mut().extend(frames.iter().cloned());
            frames
        }));
        let (ca, cb) = connected(&mut p);
        for i in 0..20u8 {
            let req = vec![i; 1 + i as usize * 97];
            p.b.send(cb, &req).unwrap();
            p.settle(20);
            assert_eq!(read_all(&mut p.a, ca), req);
            p.a.send(ca, &req).unwrap();
            p.settle(20);
            assert_eq!(read_all(&mut p.b, cb), req);
        }
        p.a.close(ca);
        p.settle(20);
        p.b.close(cb);
        p.settle(20);
        let frames = wire.borrow().clone();
        (frames, p.a.link.offloaded)
    };
    let (plain, none) = run(false);
    let (offloaded, n) = run(true);
    assert_eq!(none, 0);
    // Every frame A sent is TCP here (the neighbour is taught, no ARP).
    let from_a = plain.iter().filter(|f| f[6..12] == mac_of(Pair::A)).count();
    assert!(from_a > 40, "{from_a} frames from A");
    assert_eq!(n, from_a as u64);
    assert_eq!(plain.len(), offloaded.len());
    for (i, (x, y)) in plain.iter().zip(&offloaded).enumerate() {
        assert_eq!(x, y, "frame {i} differs");
    }
}

/// What the application writes before a flush leaves by that flush, in full segments: the
/// first write to an idle connection at once (`send_now`), what follows while it is in
/// flight with the flush. smoltcp sends one segment per socket per egress, and the engine
/// gives a socket that can send more at once another round in the same egress. Several
/// answers written in one pass (a pipeline's) leave as few segments as their bytes need
/// after the first, as far as the peer's window and the congestion window allow (2,048
/// bytes for a new connection here).
#[test]
fn everything_written_before_a_flush_leaves_with_it_in_full_segments() {
    let mut p = Pair::new();
    let (ca, cb) = connected(&mut p);
    p.settle(4);
    let _ = p.a.take_sent();
    // 100 answers of 16 bytes and one of 400, written in one pass, one egress.
    assert_eq!(p.a.send(ca, &[7u8; 16]).unwrap(), 16);
    let first = p.a.take_sent();
    assert_eq!(first.len(), 1, "the first answer leaves when it is written");
    for _ in 1..100 {
        assert_eq!(p.a.send(ca, &[7u8; 16]).unwrap(), 16);
    }
    assert_eq!(p.a.send(ca, &[8u8; 400]).unwrap(), 400);
    assert!(p.a.take_sent().is_empty(), "the rest waits for the flush");
    p.a.egress();
    let sent = p.a.take_sent();
    let payload: Vec<usize> = sent.iter().map(|f| f.len() - 14 - 20 - 20).collect();
    // 1,984 bytes: a full segment (1,460 on this link) and the rest, in this one egress.
    assert_eq!(payload, [1460, 524]);
    // And they arrive whole.
    p.b.inbox.extend(first);
    p.b.inbox.extend(sent);
    p.settle(8);
    assert_eq!(read_all(&mut p.b, cb).len(), 2000);
    // More than the windows allow: what they allow goes now, the rest as ACKs open them.
    assert_eq!(p.a.send(ca, &[9u8; 6000]).unwrap(), 6000);
    p.a.egress();
    let first: usize = p.a.take_sent().iter().map(|f| f.len() - 54).sum();
    assert!(first > 1460 && first < 6000, "{first}");
}

/// Requests from several connections in one batch, each answered at once (`send_now`):
/// the `flush` after them has no egress to run, though only the last answer's bucket left
/// the dirty list at its write (`wants_egress` drops the others' entries).
#[test]
fn answers_sent_at_once_leave_nothing_for_the_flush() {
    let mut p = Pair::new();
    p.a.listen(7).unwrap();
    let clients: Vec<_> = (0..3).map(|_| p.b.connect(std::net::SocketAddrV4::new(Pair::A, 7)).unwrap()).collect();
    let (ea, _) = p.settle(20);
    let servers: Vec<_> = ea.iter().filter_map(|e| if let Event::Accepted { conn, .. } = e { Some(*conn) } else { None }).collect();
    assert_eq!(servers.len(), 3, "server events {ea:?}");
    p.settle(4); // the last ACKs
    for &c in &clients {
        assert_eq!(p.b.send(c, b"ping").unwrap(), 4);
    }
    p.exchange();
    let mut ev = Vec::new();
    p.a.ingest();
    p.a.engine.scan_dirty();
    p.a.engine.take_events(&mut ev);
    assert_eq!(ev.iter().filter(|e| matches!(e, Event::Readable(_))).count(), 3, "{ev:?}");
    let before = p.a.engine.stats().sent_now;
    for &c in &servers {
        assert_eq!(read_all(&mut p.a, c), b"ping");
        assert_eq!(p.a.send(c, b"pong").unwrap(), 4);
    }
    // (Three buckets of 16 here: each answer left alone in its bucket.)
    assert_eq!(p.a.engine.stats().sent_now - before, 3);
    assert_eq!(p.a.take_sent().len(), 3, "the answers left when written");
    assert!(!p.a.engine.wants_egress(), "a bucket an answer left from is still listed for an egress");
}
