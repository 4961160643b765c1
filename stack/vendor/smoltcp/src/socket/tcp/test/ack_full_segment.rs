// [xsk-stack patch: ack-full-segment] With a delayed ACK, a full segment's worth of
// unacknowledged data is acknowledged at once; less waits for the delay (or for data to
// ride on), as upstream.

use super::*;

/// A delayed ACK of 10 ms; the full-segment rule on or off.
fn socket_delaying(full_segment: bool) -> TestSocket {
    let mut s = socket_established_with_buffer_sizes(DEFAULT_MSS * 4, DEFAULT_MSS * 4);
    s.set_ack_delay(Some(ACK_DELAY_DEFAULT));
    s.set_ack_full_segment(full_segment);
    s
}

fn data(mut s: &mut TestSocket, at: usize, payload: &[u8]) {
    send!(s, TcpRepr {
        seq_number: REMOTE_SEQ + 1 + at,
        ack_number: Some(LOCAL_SEQ + 1),
        payload,
        ..SEND_TEMPL
    });
}

#[track_caller]
fn acks(mut s: &mut TestSocket, t_ms: i64, upto: usize) {
    recv!(s, time t_ms, Ok(TcpRepr {
        seq_number: LOCAL_SEQ + 1,
        ack_number: Some(REMOTE_SEQ + 1 + upto),
        window_len: (DEFAULT_MSS * 4 - upto) as u16,
        ..RECV_TEMPL
    }));
}

#[test]
fn test_ack_full_segment_a_lone_full_segment_is_acknowledged_at_once() {
    let mut s = socket_delaying(true);
    data(&mut s, 0, &[0; DEFAULT_MSS]);
    acks(&mut s, 0, DEFAULT_MSS);
}

#[test]
fn test_ack_full_segment_off_a_lone_full_segment_waits_for_the_delay() {
    // Upstream: only more than a segment is acknowledged at once.
    let mut s = socket_delaying(false);
    data(&mut s, 0, &[0; DEFAULT_MSS]);
    recv_nothing!(s, time 0);
    acks(&mut s, 11, DEFAULT_MSS);
}

#[test]
fn test_ack_full_segment_less_than_a_segment_still_waits() {
    let mut s = socket_delaying(true);
    data(&mut s, 0, &[0; DEFAULT_MSS - 1]);
    recv_nothing!(s, time 0);
    recv_nothing!(s, time 9);
    acks(&mut s, 11, DEFAULT_MSS - 1);
}

#[test]
fn test_ack_full_segment_short_segments_adding_up_to_a_segment_are_acknowledged() {
    let mut s = socket_delaying(true);
    data(&mut s, 0, &[0; DEFAULT_MSS - 1]);
    recv_nothing!(s, time 0);
    // The delay is running; the octet that completes a segment ends it.
    data(&mut s, DEFAULT_MSS - 1, b"a");
    acks(&mut s, 0, DEFAULT_MSS);
}

#[test]
fn test_ack_full_segment_an_answer_still_carries_the_ack_of_a_short_request() {
    let mut s = socket_delaying(true);
    data(&mut s, 0, b"abc");
    recv_nothing!(s, time 0);
    s.recv(|d| (d.len(), ())).unwrap();
    s.send_slice(b"xyz").unwrap();
    recv!(s, time 1, Ok(TcpRepr {
        seq_number: LOCAL_SEQ + 1,
        ack_number: Some(REMOTE_SEQ + 1 + 3),
        payload: &b"xyz"[..],
        window_len: (DEFAULT_MSS * 4) as u16,
        ..RECV_TEMPL
    }));
    recv_nothing!(s, time 20);
}
