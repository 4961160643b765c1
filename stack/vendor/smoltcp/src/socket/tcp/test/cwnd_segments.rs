// [xsk-stack patch: cwnd-segments] With data in flight, room in the congestion window
// for less than a segment waits for the next ACK when more than that room is queued; what
// fits whole still goes.

use super::*;

/// MSS 10; Reno in congestion avoidance at cwnd 40 (four segments), `queued` octets
/// (at least 40) queued and the first four segments in flight; cwnd-segments on or off.
fn socket_in_avoidance(queued: usize, cwnd_segments: bool) -> TestSocket {
    let mut s = socket_established_with_buffer_sizes(256, 256);
    // As the engine runs it: Nagle would hold every short segment while data is in flight.
    s.set_nagle_enabled(false);
    s.set_cwnd_segments(cwnd_segments);
    s.remote_mss = 10;
    s.remote_win_len = 200;
    s.set_congestion_control(CongestionControl::Reno);
    let cc = s.congestion_controller.inner_mut();
    cc.set_mss(10);
    cc.set_remote_window(200);
    // A loss at 80 in flight leaves ssthresh 40; the next ACK of new data ends the
    // recovery with cwnd = ssthresh: congestion avoidance at four segments.
    cc.on_loss(Instant::from_millis(0), 80);
    cc.on_ack(Instant::from_millis(0), 1, 0, &RttEstimator::default());
    assert_eq!(cc.window(), 40);
    s.send_slice(&[b'x'; 100][..queued]).unwrap();
    for i in 0..4 {
        sends(&mut s, 1000, 1 + 10 * i, 10);
    }
    recv_nothing!(s, time 1000);
    s
}

#[track_caller]
fn sends(mut s: &mut TestSocket, t_ms: i64, at: usize, len: usize) {
    recv!(s, time t_ms, Ok(TcpRepr {
        seq_number: LOCAL_SEQ + at,
        ack_number: Some(REMOTE_SEQ + 1),
        payload: &[b'x'; 10][..len],
        window_len: 256,
        ..RECV_TEMPL
    }));
}

fn ack(mut s: &mut TestSocket, t_ms: i64, ack: usize) {
    send!(s, time t_ms, TcpRepr {
        seq_number: REMOTE_SEQ + 1,
        ack_number: Some(LOCAL_SEQ + ack),
        window_len: 200,
        ..SEND_TEMPL
    });
}

#[test]
fn test_cwnd_segments_a_growth_below_a_segment_waits_for_the_next_ack() {
    let mut s = socket_in_avoidance(100, true);
    // The ACK of one segment grows cwnd by 10 * 10 / 40 = 2: room for 12 octets. One
    // segment goes; the 2 octets left of the room wait (upstream sent them alone).
    ack(&mut s, 1001, 11);
    sends(&mut s, 1001, 41, 10);
    recv_nothing!(s, time 1001);
    // The next ACK leaves 2 + 10 + 2 = 14: one segment again, and 4 octets wait.
    ack(&mut s, 1002, 21);
    sends(&mut s, 1002, 51, 10);
    recv_nothing!(s, time 1002);
}

#[test]
fn test_cwnd_segments_a_tail_longer_than_the_room_waits_for_the_next_ack() {
    let mut s = socket_in_avoidance(40, true);
    // The ACK of one segment leaves room for 12: a queued segment goes, and 2 are left.
    ack(&mut s, 1001, 11);
    s.send_slice(&[b'x'; 10]).unwrap();
    sends(&mut s, 1001, 41, 10);
    // 3 octets queued are more than the room of 2: they wait.
    s.send_slice(b"xxx").unwrap();
    recv_nothing!(s, time 1001);
    // The next ACK opens the room to 2 + 10 + 2, and the 3 go.
    ack(&mut s, 1002, 21);
    sends(&mut s, 1002, 51, 3);
    recv_nothing!(s, time 1002);
}

#[test]
fn test_cwnd_segments_a_tail_within_a_room_below_a_segment_goes() {
    let mut s = socket_in_avoidance(40, true);
    ack(&mut s, 1001, 11);
    s.send_slice(&[b'x'; 10]).unwrap();
    sends(&mut s, 1001, 41, 10);
    // Room for 2, and 2 queued: everything queued fits, so it goes at once.
    s.send_slice(b"xx").unwrap();
    sends(&mut s, 1001, 51, 2);
    recv_nothing!(s, time 1001);
}

#[test]
fn test_cwnd_segments_nothing_in_flight_sends_what_the_room_allows() {
    // A timeout leaves cwnd at one segment and nothing counted in flight: the rewind
    // sends from SND.UNA as upstream did.
    let mut s = socket_in_avoidance(100, true);
    recv_nothing!(s, time 1001);
    let rto = s.rtte.retransmission_timeout();
    sends(&mut s, 1000 + rto.total_millis() as i64, 1, 10);
    assert_eq!(s.recovery_stats().rto_retransmits, 1);
}

#[test]
fn test_cwnd_segments_off_sends_the_room_as_upstream() {
    let mut s = socket_in_avoidance(100, false);
    // Room for 12: a segment, then the 2 octets left of the room alone.
    ack(&mut s, 1001, 11);
    sends(&mut s, 1001, 41, 10);
    sends(&mut s, 1001, 51, 2);
    recv_nothing!(s, time 1001);
}
