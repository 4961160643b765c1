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
}
