//! How the engine sets up the smoltcp sockets it makes: the settings that are not
//! loss recovery's (`recovery_tests`) or the buffers' (`buffer_tests`).

use super::tests::connected;
use crate::testing::Pair;

#[test]
fn sockets_send_at_once_and_count_the_congestion_window_in_segments() {
    // No Nagle: an answer goes at once. smoltcp's `cwnd-segments`: without Nagle, a window
    // counted in octets sent the few octets each ACK grew it by as a segment of their own.
    let mut p = Pair::new();
    let (ca, _) = connected(&mut p);
    let conn = p.a.engine.conns.get(ca).unwrap();
    let s = p.a.engine.buckets[conn.bucket as usize].sockets.get::<smoltcp::socket::tcp::Socket>(conn.handle);
    assert!(!s.nagle_enabled() && s.cwnd_segments());
    // No delayed ACK unless asked for (`ack_delay_tests`); with one, a full segment is not delayed.
    assert!(s.ack_delay().is_none() && s.ack_full_segment());
    assert!(s.rfc6928_initial_window());
}

#[test]
fn a_new_connection_sends_ten_segments_in_its_first_flight() {
    // RFC 6928's initial window (smoltcp `initial-window`): 10 segments of 1,460 octets, where
    // smoltcp's own 2,048 octets sent one.
    let mut a = crate::testing::config(Pair::A);
    a.tcp.initial_buffer = 64 * 1024;
    let mut b = crate::testing::config(Pair::B);
    b.tcp.initial_buffer = 64 * 1024; // a receive window that takes it all
    let mut p = Pair::with(a, b);
    let (ca, _) = connected(&mut p);
    assert_eq!(p.a.send(ca, &[7u8; 16 * 1024]).unwrap(), 16 * 1024);
    p.a.flush().unwrap();
    let lens: Vec<usize> =
        p.a.link.out.iter().filter_map(|f| crate::testing::frames::parse_tcp(f)).map(|s| s.payload.len()).collect();
    assert_eq!(lens, vec![1460; 10]);
}
