//! The engine through handshakes, limits, timers, loss and hostile
//! segments, in memory: no root, no network, deterministic time.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::Duration;

use bytes::BytesMut;

use crate::conn::{Event, TransportError};
use crate::drops::DropReason;
use crate::faults::Faults;
use crate::testing::frames::{parse_tcp, tcp, TcpSpec};
use crate::testing::{config, mac_of, MemTransport, Pair};

const PORT: u16 = 7;

fn accepted(ev: &[Event]) -> Vec<crate::conn::ConnId> {
    ev.iter().filter_map(|e| if let Event::Accepted { conn, .. } = e { Some(*conn) } else { None }).collect()
}

fn closed_count(ev: &[Event], c: crate::conn::ConnId) -> usize {
    ev.iter().filter(|e| **e == Event::Closed(c)).count()
}

/// A connected pair: (pair, server conn on A, client conn on B).
pub(super) fn connected(p: &mut Pair) -> (crate::conn::ConnId, crate::conn::ConnId) {
    p.a.listen(PORT).unwrap();
    let cb = p.b.connect(SocketAddrV4::new(Pair::A, PORT)).unwrap();
    let (ea, eb) = p.settle(20);
    assert!(eb.contains(&Event::Connected(cb)), "client events {eb:?}");
    let ca = accepted(&ea);
    assert_eq!(ca.len(), 1, "server events {ea:?}");
    (ca[0], cb)
}

pub(super) fn read_all(t: &mut MemTransport, c: crate::conn::ConnId) -> Vec<u8> {
    let mut b = BytesMut::new();
    while t.recv(c, &mut b).unwrap() > 0 {}
    b.to_vec()
}

#[test]
fn handshake_data_and_close_reported_once() {
    let mut p = Pair::new();
    let (ca, cb) = connected(&mut p);
    assert_eq!(p.b.send(cb, b"ping").unwrap(), 4);
    let (ea, _) = p.settle(20);
    assert!(ea.contains(&Event::Readable(ca)));
    assert_eq!(read_all(&mut p.a, ca), b"ping");
    p.a.send(ca, b"pong").unwrap();
    p.settle(20);
    assert_eq!(read_all(&mut p.b, cb), b"pong");
    // The client closes; the server sees Closed exactly once, then closes too.
    p.b.close(cb);
    let (ea, _) = p.settle(20);
    assert_eq!(read_all(&mut p.a, ca), b"");
    let mut all = ea;
    let mut more = Vec::new();
    let _ = p.a.poll(&mut more, None);
    all.extend(more);
    assert_eq!(closed_count(&all, ca), 1, "{all:?}");
    p.a.close(ca);
    p.settle(20);
    let s = p.a.engine.stats();
    assert_eq!(s.connections, 0);
    assert_eq!(s.live_sockets, s.listening, "{s:?}");
    let s = p.b.engine.stats();
    assert_eq!(s.live_sockets, 0, "{s:?}");
}

/// `recv_drains`: one recv that returned bytes re-arms `Readable` as an `Ok(0)` would, so an
/// application that never makes the call returning 0 still hears of the next bytes and of
/// the peer's FIN (and reads both).
#[test]
fn a_draining_recv_rearms_readable_without_the_empty_one() {
    let mut p = Pair::new();
    let (ca, cb) = connected(&mut p);
    assert!(p.a.recv_drains());
    let mut buf = BytesMut::new();
    for (i, msg) in [&b"one"[..], b"two", b"three"].into_iter().enumerate() {
        assert_eq!(p.b.send(cb, msg).unwrap(), msg.len());
        let (ea, _) = p.settle(20);
        assert!(ea.contains(&Event::Readable(ca)), "message {i}: no Readable, events {ea:?}");
        buf.clear();
        // One recv only: it returns everything the connection holds.
        assert_eq!(p.a.recv(ca, &mut buf).unwrap(), msg.len(), "message {i}");
        assert_eq!(&buf[..], msg);
    }
    // Data and FIN: the one recv reads the data, and the FIN still comes as an event.
    assert_eq!(p.b.send(cb, b"last").unwrap(), 4);
    p.b.close(cb);
    let (ea, _) = p.settle(20);
    assert!(ea.contains(&Event::Readable(ca)), "events {ea:?}");
    buf.clear();
    assert_eq!(p.a.recv(ca, &mut buf).unwrap(), 4);
    let (mut ea, _) = p.settle(20);
    let _ = p.a.poll(&mut ea, None);
    assert!(ea.contains(&Event::Readable(ca)) || ea.contains(&Event::Closed(ca)), "the FIN went unreported: {ea:?}");
    assert_eq!(p.a.recv(ca, &mut buf).unwrap(), 0);
    let mut more = Vec::new();
    let _ = p.a.poll(&mut more, None);
    ea.extend(more);
    assert_eq!(closed_count(&ea, ca), 1, "{ea:?}");
}

#[test]
fn bytes_survive_loss_and_reordering() {
    let mut p = Pair::new();
    let (ca, cb) = connected(&mut p);
    let mut n = 0u32;
    p.filter = Some(Box::new(move |mut v: Vec<Vec<u8>>| {
        // Every seventh frame lost, the rest delivered in reverse order.
        v.retain(|_| {
            n += 1;
            !n.is_multiple_of(7)
        });
        v.reverse();
        v
    }));
    let data: Vec<u8> = (0..40_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
    let mut sent = 0;
    let mut got = Vec::new();
    for _ in 0..4000 {
        if sent < data.len() {
            sent += p.b.send(cb, &data[sent..]).unwrap_or(0);
        }
        p.settle(4);
        got.extend(read_all(&mut p.a, ca));
        if got.len() == data.len() {
            break;
        }
        p.advance(Duration::from_millis(50));
    }
    assert_eq!(got.len(), data.len());
    assert!(got == data, "bytes differ");
}

#[test]
fn syn_from_unspecified_source_is_dropped_without_answer() {
    let mut t = MemTransport::new(config(Pair::A));
    t.listen(PORT).unwrap();
    for src in [Ipv4Addr::UNSPECIFIED, Ipv4Addr::BROADCAST, Ipv4Addr::new(224, 0, 0, 5), Pair::A] {
        t.inbox.push_back(tcp(&TcpSpec { src, dst: Pair::A, dport: PORT, dst_mac: mac_of(Pair::A), ..TcpSpec::default() }));
    }
    let mut ev = Vec::new();
    t.poll(&mut ev, None).unwrap();
    t.tick();
    assert!(ev.is_empty());
    assert!(t.take_sent().is_empty(), "answered an impossible source");
    assert_eq!(t.engine.stats().drops.bad_source, 4);
}

#[test]
fn syn_beyond_the_connection_limit_gets_rst() {
    let mut cfg = config(Pair::A);
    cfg.tcp.max_conns = 4;
    // Without cookies: half-open connections count too (with them, see cookie_tests).
    cfg.tcp.syn_cookies = crate::SynCookies::Off;
    let mut t = MemTransport::new(cfg);
    t.listen(PORT).unwrap();
    for i in 0..6u16 {
        let src = Ipv4Addr::new(198, 18, 0, 10 + i as u8);
        t.inbox.push_back(tcp(&TcpSpec { src, src_mac: mac_of(src), dst: Pair::A, dst_mac: mac_of(Pair::A), dport: PORT, sport: 5000 + i, ..TcpSpec::default() }));
    }
    let mut ev = Vec::new();
    t.poll(&mut ev, None).unwrap();
    t.tick();
    let segs: Vec<_> = t.take_sent().iter().filter_map(|f| parse_tcp(f)).collect();
    let synacks = segs.iter().filter(|s| s.syn() && s.ack_set()).count();
    let rsts = segs.iter().filter(|s| s.rst()).count();
    assert_eq!((synacks, rsts), (4, 2), "{segs:?}");
    assert_eq!(t.engine.stats().drops.conn_limit, 2);
    assert_eq!(t.engine.stats().half_open, 4);
}

#[test]
fn syn_flood_is_bounded_and_a_real_client_still_connects() {
    flood_then_connect(1_000, 500);
}

/// More sources than smoltcp's neighbour cache holds (1,024): the client's
/// MAC must be taught again, or its SYN-ACK waits for ARP behind the flood's.
#[test]
fn syn_flood_of_20k_from_2000_sources_then_a_real_client() {
    flood_then_connect(20_000, 10_000);
}

fn flood_then_connect(flood: u32, min_evicted: u64) {
    let mut a = config(Pair::A);
    a.tcp.rx_buffer = 4096;
    a.tcp.tx_buffer = 4096;
    a.tcp.half_open_bytes = 64 * 8192; // 64 half-open connections
    a.tcp.max_conns = 100_000;
    // Eviction, the policy without cookies (see cookie_tests for the default).
    a.tcp.syn_cookies = crate::SynCookies::Off;
    a.prefix_len = 16; // room on the link for more sources than the cache holds
    let mut p = Pair::with(a, config(Pair::B));
    p.a.listen(PORT).unwrap();
    let mut ev = Vec::new();
    for i in 0..flood {
        // Random on-link sources that never finish the handshake.
        let n = i % 2_000;
        let src = Ipv4Addr::new(198, 18, 10 + (n / 250) as u8, 2 + (n % 250) as u8);
        p.a.inbox.push_back(tcp(&TcpSpec { src, src_mac: mac_of(src), dst: Pair::A, dst_mac: mac_of(Pair::A), dport: PORT, sport: 1024 + (i / 2_000) as u16, seq: i, ..TcpSpec::default() }));
        if i % 100 == 99 {
            p.a.poll(&mut ev, None).unwrap();
            p.a.take_sent();
        }
    }
    let s = p.a.engine.stats();
    assert!(s.half_open <= 64, "half-open not bounded: {s:?}");
    assert!(s.drops.syn_backlog >= min_evicted, "{s:?}");
    // A real client during the flood.
    let cb = p.b.connect(SocketAddrV4::new(Pair::A, PORT)).unwrap();
    let mut eb = Vec::new();
    for _ in 0..30 {
        eb.extend(p.settle(20).1);
        p.advance(Duration::from_millis(100));
    }
    assert!(eb.contains(&Event::Connected(cb)), "{eb:?} server {:?} client {:?}", p.a.engine.stats(), p.b.engine.stats());
}

#[test]
fn a_syn_for_a_live_connection_makes_no_second_socket() {
    let mut p = Pair::new();
    let (_ca, cb) = connected(&mut p);
    let before = p.a.engine.stats().live_sockets;
    // The client's 4-tuple, a fresh SYN (as a confused or hostile peer sends).
    assert!(p.b.engine.peer_addr(cb).is_some());
    let client_port = 40000; // the pair's first ephemeral port
    p.a.inbox.push_back(tcp(&TcpSpec { src: Pair::B, src_mac: mac_of(Pair::B), dst: Pair::A, dst_mac: mac_of(Pair::A), sport: client_port, dport: PORT, seq: 12345, ..TcpSpec::default() }));
    let mut ev = Vec::new();
    p.a.poll(&mut ev, None).unwrap();
    p.a.tick();
    assert!(accepted(&ev).is_empty(), "{ev:?}");
    assert_eq!(p.a.engine.stats().live_sockets, before, "a listener took a SYN for a live connection");
}

#[test]
fn idle_connections_are_closed_once() {
    let mut a = config(Pair::A);
    a.tcp.idle_timeout = Some(Duration::from_secs(5));
    let mut p = Pair::with(a, config(Pair::B));
    let (ca, _cb) = connected(&mut p);
    let mut all = Vec::new();
    for _ in 0..10 {
        p.advance(Duration::from_secs(1));
        let (ea, _) = p.settle(5);
        all.extend(ea);
    }
    assert_eq!(closed_count(&all, ca), 1, "{all:?}");
    assert_eq!(p.a.engine.stats().idle_closed, 1);
    p.a.close(ca);
    p.settle(5);
    assert_eq!(p.a.engine.stats().connections, 0);
}

#[test]
fn a_peer_that_never_finishes_the_close_is_timed_out() {
    let mut a = config(Pair::A);
    a.tcp.fin_timeout = Duration::from_secs(3);
    let mut p = Pair::with(a, config(Pair::B));
    let (ca, _cb) = connected(&mut p);
    // From now on the peer is gone: nothing reaches it.
    p.filter = Some(Box::new(|_| Vec::new()));
    p.a.close(ca);
    for _ in 0..10 {
        p.advance(Duration::from_millis(500));
        p.settle(3);
    }
    let s = p.a.engine.stats();
    assert!(s.fin_timeouts >= 1, "{s:?}");
    assert_eq!(s.live_sockets, s.listening, "{s:?}");
}

#[test]
fn partial_checksums_follow_the_configuration() {
    for accept in [false, true] {
        let mut cfg = config(Pair::A);
        cfg.accept_partial_csum = accept;
        let mut t = MemTransport::new(cfg);
        t.listen(PORT).unwrap();
        t.inbox.push_back(tcp(&TcpSpec { src: Pair::B, src_mac: mac_of(Pair::B), dst: Pair::A, dst_mac: mac_of(Pair::A), dport: PORT, partial_csum: true, ..TcpSpec::default() }));
        let mut ev = Vec::new();
        t.poll(&mut ev, None).unwrap();
        t.tick();
        let answered = t.take_sent().iter().filter_map(|f| parse_tcp(f)).any(|s| s.syn() && s.ack_set());
        assert_eq!(answered, accept);
        let s = t.engine.stats();
        assert_eq!(s.drops.get(DropReason::BadChecksum), u64::from(!accept));
        assert_eq!(s.rx_partial_csum, u64::from(accept));
    }
}

#[test]
fn an_idle_connection_lives_as_long_as_the_peer_is_there() {
    // No idle timeout configured: like kernel TCP, silence is not death
    // (smoltcp's own timeout would abort it after 60 s).
    let mut p = Pair::new();
    let (ca, cb) = connected(&mut p);
    let mut all = Vec::new();
    for _ in 0..30 {
        p.advance(Duration::from_secs(10));
        let (ea, eb) = p.settle(5);
        all.extend(ea);
        all.extend(eb);
    }
    assert!(all.iter().all(|e| !matches!(e, Event::Closed(_))), "{all:?}");
    p.b.send(cb, b"still here").unwrap();
    for _ in 0..5 {
        p.settle(10);
        p.advance(Duration::from_millis(300));
    }
    assert_eq!(read_all(&mut p.a, ca), b"still here", "a {:?} b {:?}", p.a.engine.stats(), p.b.engine.stats());
}

#[test]
fn a_peer_that_stops_acknowledging_is_timed_out() {
    let mut a = config(Pair::A);
    a.tcp.timeout = Some(Duration::from_secs(5));
    let mut p = Pair::with(a, config(Pair::B));
    let (ca, _cb) = connected(&mut p);
    p.filter = Some(Box::new(|_| Vec::new())); // the peer is gone
    p.a.send(ca, b"anyone?").unwrap();
    let mut all = Vec::new();
    for _ in 0..20 {
        p.advance(Duration::from_millis(500));
        all.extend(p.settle(3).0);
    }
    assert_eq!(closed_count(&all, ca), 1, "{all:?}");
    assert_eq!(p.a.engine.stats().timed_out, 1);
}

#[test]
fn half_open_connections_that_never_complete_go_away() {
    let mut cfg = config(Pair::A);
    cfg.tcp.timeout = Some(Duration::from_secs(5));
    let mut t = MemTransport::new(cfg);
    t.listen(PORT).unwrap();
    for i in 0..10u16 {
        let src = Ipv4Addr::new(198, 18, 0, 10 + i as u8);
        t.inbox.push_back(tcp(&TcpSpec { src, src_mac: mac_of(src), dst: Pair::A, dst_mac: mac_of(Pair::A), dport: PORT, sport: 3000 + i, ..TcpSpec::default() }));
    }
    let mut ev = Vec::new();
    t.poll(&mut ev, None).unwrap();
    assert_eq!(t.engine.stats().half_open, 10);
    for _ in 0..20 {
        t.advance(Duration::from_millis(500));
        t.poll(&mut ev, None).unwrap();
    }
    let s = t.engine.stats();
    assert_eq!(s.half_open, 0, "{s:?}");
    assert_eq!(s.live_sockets, s.listening, "{s:?}");
}

/// Both directions through the fault injector (the wrapper the driver puts
/// around the port when faults are configured) on both sides: loss,
/// duplicates and reordering on receive, loss on send.
#[test]
fn a_transfer_through_the_fault_injector_arrives_intact() {
    let mut p = Pair::new();
    let (ca, cb) = connected(&mut p);
    let faults = Faults { rx_drop: 0.05, rx_dup: 0.05, rx_reorder: 0.1, tx_drop: 0.03, seed: 7 };
    p.a.set_faults(faults);
    p.b.set_faults(Faults { seed: 8, ..faults });
    // Long enough that each side's dice strike every fault: 160 to 260 frames received on
    // a side. A third of that (60 and 30 KB) once left side a without a duplicate, when
    // cwnd-segments changed which frames were sent and so the dice.
    let up: Vec<u8> = (0..200_000u32).map(|i| (i * 13 + i / 241) as u8).collect();
    let down: Vec<u8> = (0..100_000u32).map(|i| (i * 5 + i / 127) as u8).collect();
    let (mut sent_up, mut sent_down) = (0, 0);
    let (mut got_up, mut got_down) = (Vec::new(), Vec::new());
    for _ in 0..3000 {
        if sent_up < up.len() {
            sent_up += p.b.send(cb, &up[sent_up..]).unwrap_or(0);
        }
        if sent_down < down.len() {
            sent_down += p.a.send(ca, &down[sent_down..]).unwrap_or(0);
        }
        p.settle(4);
        got_up.extend(read_all(&mut p.a, ca));
        got_down.extend(read_all(&mut p.b, cb));
        if got_up.len() == up.len() && got_down.len() == down.len() {
            break;
        }
        p.advance(Duration::from_millis(100));
    }
    assert_eq!((got_up.len(), got_down.len()), (up.len(), down.len()));
    assert!(got_up == up && got_down == down, "bytes differ");
    for (side, t) in [("a", &p.a), ("b", &p.b)] {
        let s = t.faults.as_ref().expect("faults configured").stats;
        assert!(s.rx_dropped > 0 && s.rx_duplicated > 0 && s.rx_reordered > 0 && s.tx_dropped > 0, "{side}: {s:?}");
    }
}

#[test]
fn acks_can_wait_only_when_no_socket_needs_them() {
    let mut p = Pair::new();
    assert!(!p.a.engine.acks_can_wait(), "not tracked: deferred ACKs are off");
    p.a.engine.track_acks();
    p.b.engine.track_acks();
    assert!(p.a.engine.acks_can_wait(), "an idle engine");
    let (ca, cb) = connected(&mut p);
    assert!(p.a.engine.acks_can_wait(), "an established idle connection");
    // A small answer unacknowledged: its ACK may wait (no fast retransmit possible).
    p.b.send(cb, b"ping").unwrap();
    p.settle(20);
    read_all(&mut p.a, ca);
    p.a.send(ca, &[7u8; 100]).unwrap();
    p.a.flush().unwrap();
    assert!(p.a.engine.acks_can_wait(), "100 bytes in flight");
    p.settle(20);
    read_all(&mut p.b, cb);
    // A large answer: ACKs open the window and reveal losses, so they are wanted now.
    p.a.send(ca, &[7u8; 20_000]).unwrap();
    p.a.flush().unwrap();
    assert!(!p.a.engine.acks_can_wait(), "20 kB in the send buffer");
    for _ in 0..50 {
        p.settle(20);
        read_all(&mut p.b, cb);
    }
    assert!(p.a.engine.acks_can_wait(), "all acknowledged");
    // Our FIN waits for its ACK.
    p.a.close(ca);
    p.a.flush().unwrap();
    assert!(!p.a.engine.acks_can_wait(), "FIN sent, not acknowledged");
    p.settle(20);
    p.b.close(cb);
    p.settle(20);
    assert!(p.a.engine.acks_can_wait(), "closed");
    // The client side while it connects.
    p.b.connect(SocketAddrV4::new(Pair::A, 9)).unwrap();
    p.b.flush().unwrap();
    assert!(!p.b.engine.acks_can_wait(), "SYN sent");
}

#[test]
fn acks_wanted_in_the_handshake_and_the_last_ack() {
    let mut p = Pair::new();
    p.a.engine.track_acks();
    p.a.listen(PORT).unwrap();
    let cb = p.b.connect(SocketAddrV4::new(Pair::A, PORT)).unwrap();
    p.b.flush().unwrap();
    // The SYN reaches the server, which answers SYN-ACK: the handshake's
    // last ACK, a pure ACK, is wanted as it comes.
    p.a.inbox.extend(p.b.take_sent());
    let mut ev = Vec::new();
    p.a.poll(&mut ev, Some(Duration::ZERO)).unwrap();
    p.a.flush().unwrap();
    assert!(!p.a.engine.acks_can_wait(), "SYN-RECEIVED");
    let (ea, _) = p.settle(20);
    let ca = accepted(&ea)[0];
    assert!(p.a.engine.acks_can_wait(), "established");
    // The peer closes first: CLOSE-WAIT has nothing waiting for an ACK;
    // our FIN then waits in LAST-ACK.
    p.b.close(cb);
    p.settle(20);
    assert!(p.a.engine.acks_can_wait(), "CLOSE-WAIT");
    p.a.close(ca);
    p.a.flush().unwrap();
    assert!(!p.a.engine.acks_can_wait(), "LAST-ACK");
    p.settle(20);
    assert!(p.a.engine.acks_can_wait(), "closed");
}

/// `shutdown_write` is a half-close: the peer reads EOF, then still answers, and the
/// answer is read; sending after it fails; the id stays until `close`.
#[test]
fn shutdown_write_half_closes() {
    let mut p = Pair::new();
    let (ca, cb) = connected(&mut p);
    assert_eq!(p.b.send(cb, b"request").unwrap(), 7);
    p.b.shutdown_write(cb).unwrap();
    let (ea, _) = p.settle(20);
    assert_eq!(read_all(&mut p.a, ca), b"request");
    let mut all = ea;
    let _ = p.a.poll(&mut all, None);
    assert_eq!(closed_count(&all, ca), 1, "the FIN is seen: {all:?}");
    assert_eq!(p.a.send(ca, b"answer").unwrap(), 6, "the half-closed side still receives");
    let (_, eb) = p.settle(20);
    assert_eq!(read_all(&mut p.b, cb), b"answer");
    assert_eq!(closed_count(&eb, cb), 0, "{eb:?}");
    assert!(matches!(p.b.send(cb, b"more"), Err(TransportError::ConnectionClosed(_))));
    p.a.close(ca);
    p.settle(20);
    read_all(&mut p.b, cb);
    let mut eb = Vec::new();
    let _ = p.b.poll(&mut eb, None);
    assert_eq!(closed_count(&eb, cb), 1, "{eb:?}");
    p.b.close(cb);
    p.settle(20);
    assert_eq!(p.a.engine.stats().connections + p.b.engine.stats().connections, 0);
}

/// More on-link peers than smoltcp's stock neighbour cache held (64), their
/// requests interleaved in one batch as a busy server takes them: every
/// answer goes out in the pass that took its request, and none waits for
/// ARP. With upstream smoltcp's cache each new source evicts another peer's
/// entry, and the evicted peers' answers wait for an ARP round trip that
/// smoltcp sends once a second for the whole cache (stalls of up to a second).
#[test]
fn two_hundred_on_link_peers_are_answered_in_the_same_pass() {
    answered_in_the_same_pass(200, 200);
}

/// More on-link peers than the cache holds (1,024), taken in batches of 64
/// as the driver takes them: entries are evicted, and a peer whose entry
/// went must be taught again from its next frame, or its answer waits for ARP.
#[test]
fn more_peers_than_the_neighbour_cache_holds_are_taught_again() {
    answered_in_the_same_pass(1_300, 64);
}

fn answered_in_the_same_pass(n: usize, batch: usize) {
    let mut c = config(Pair::A);
    c.prefix_len = 16;
    c.tcp.max_conns = 2 * n;
    let mut t = MemTransport::new(c);
    t.listen(PORT).unwrap();
    let peers: Vec<Ipv4Addr> = (0..n).map(|i| Ipv4Addr::new(198, 18, 10 + (i / 250) as u8, 2 + (i % 250) as u8)).collect();
    let spec = |src: Ipv4Addr| TcpSpec { src, src_mac: mac_of(src), dst: Pair::A, dst_mac: mac_of(Pair::A), sport: 5000, dport: PORT, ..TcpSpec::default() };
    let mut isn = std::collections::HashMap::new();
    let mut conns = std::collections::HashMap::new();
    let mut ev = Vec::new();
    for &p in &peers {
        t.inbox.push_back(tcp(&TcpSpec { seq: 1000, flags: 0x02, ..spec(p) }));
        t.poll(&mut ev, None).unwrap();
        let synack = t.take_sent().iter().filter_map(|f| parse_tcp(f)).find(|s| s.dst == p && s.syn()).unwrap_or_else(|| panic!("no SYN-ACK for {p}: {:?}", t.engine.stats()));
        isn.insert(p, synack.seq);
        t.inbox.push_back(tcp(&TcpSpec { seq: 1001, ack: synack.seq.wrapping_add(1), flags: 0x10, ..spec(p) }));
        t.poll(&mut ev, None).unwrap();
        for c in accepted(&ev) {
            conns.insert(t.peer_addr(c).unwrap().ip().to_owned(), c);
        }
        ev.clear();
        t.take_sent();
    }
    assert_eq!(conns.len(), peers.len());
    for round in 0..3u32 {
        for group in peers.chunks(batch) {
            // A batch of requests, each from a different source than the one before.
            for &p in group {
                let seq = 1001 + 4 * round;
                t.inbox.push_back(tcp(&TcpSpec { seq, ack: isn[&p].wrapping_add(1 + 4 * round), flags: 0x18, payload: b"ping", ..spec(p) }));
            }
            t.poll(&mut ev, None).unwrap();
            for p in group {
                assert_eq!(read_all(&mut t, conns[p]), b"ping");
                t.send(conns[p], b"pong").unwrap();
            }
            t.flush().unwrap();
            let sent = t.take_sent();
            let arp = sent.iter().filter(|f| crate::testing::arp_target(f).is_some()).count();
            let answered: std::collections::HashSet<Ipv4Addr> =
                sent.iter().filter_map(|f| parse_tcp(f)).filter(|s| s.payload == b"pong").map(|s| s.dst).collect();
            assert_eq!((answered.len(), arp), (group.len(), 0), "round {round}: answered in this pass, ARP requests sent");
            ev.clear();
            t.advance(Duration::from_millis(1));
        }
    }
}

/// A client connecting to on-link servers it has never heard from: each needs ARP. Five of
/// them never answer; the sixth does. Upstream smoltcp limits ARP to one request a second
/// for the whole cache, so the unreachable ones' requests would hold the answering one's
/// back (<https://github.com/smoltcp-rs/smoltcp/issues/1101>: starved for good when an
/// unreachable address always asks first). RFC 1122 limits the rate per destination, as
/// the patch `neighbor-rate` does: all six are asked at once, and the sixth connects.
#[test]
fn unreachable_on_link_servers_do_not_hold_back_arp_for_another() {
    let a = Pair::A;
    let mut t = MemTransport::new(config(a));
    let dead: Vec<Ipv4Addr> = (0..5).map(|i| Ipv4Addr::new(198, 18, 0, 50 + i)).collect();
    let live = Ipv4Addr::new(198, 18, 0, 60);
    for &d in &dead {
        t.connect(SocketAddrV4::new(d, 80)).unwrap();
    }
    t.connect(SocketAddrV4::new(live, 80)).unwrap();
    let (mut asked, mut syn_at) = (std::collections::HashSet::new(), None);
    let mut ev = Vec::new();
    for ms in 0..3_000u64 {
        t.poll(&mut ev, None).unwrap();
        for f in t.take_sent() {
            if let Some(ip) = crate::testing::arp_target(&f) {
                asked.insert(ip);
                if ip == live {
                    t.inbox.push_back(crate::testing::frames::arp(2, mac_of(live), mac_of(a), live, a));
                }
            } else if parse_tcp(&f).is_some_and(|s| s.dst == live && s.syn()) && syn_at.is_none() {
                syn_at = Some(ms);
            }
        }
        t.advance(Duration::from_millis(1));
    }
    assert!(asked.len() == 6, "ARP requests went out for {asked:?} only");
    assert!(syn_at.is_some_and(|ms| ms < 10), "the SYN to the answering server went out at {syn_at:?} ms");
}
