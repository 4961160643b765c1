// [xsk-stack patch: frto] F-RTO (RFC 5682): a timeout the next ACKs show spurious is
// undone without timestamps, and the flight is not sent again; one they show needed
// goes on as before.

use super::*;

/// Eight 3-octet segments, A to H, in flight from LOCAL_SEQ + 1 at 1 s, to a peer
/// without SACK or timestamps whose window (24 octets) they fill, F-RTO on or off. SRTT 1 ms: the timeout (floor 50 ms)
/// fires at 1.05 s. Needs Reno (`cargo test --features socket-tcp-reno`): without a
/// congestion window the timeout's rewind sends the whole flight again at once.
fn socket_flight(frto: bool) -> TestSocket {
    let mut s = socket_established();
    s.set_frto(frto);
    s.set_rto_config(RtoConfig {
        min: Duration::from_millis(50),
        max: Duration::from_secs(60),
        initial: Duration::from_secs(1),
    });
    s.remote_mss = 3;
    // The peer's window holds the flight: what is queued after it waits for an ACK
    // (which opens it to 30 octets).
    s.remote_win_len = 24;
    s.rtte.sample(1_000);
    // Reno: after the timeout, slow start from one segment.
    s.set_congestion_control(CongestionControl::Reno);
    s.congestion_controller.inner_mut().set_mss(3);
    s.send_slice(b"aaaBBBcccDDDeeeFFFgggHHH").unwrap();
    for (i, seg) in [b"aaa", b"BBB", b"ccc", b"DDD", b"eee", b"FFF", b"ggg", b"HHH"].into_iter().enumerate() {
        sends(&mut s, 1000, 1 + 3 * i, &seg[..]);
    }
    recv_nothing!(s, time 1000);
    s
}

#[track_caller]
fn sends(mut s: &mut TestSocket, t_ms: i64, at: usize, payload: &'static [u8]) {
    recv!(s, time t_ms, Ok(TcpRepr {
        seq_number: LOCAL_SEQ + at,
        ack_number: Some(REMOTE_SEQ + 1),
        payload,
        ..RECV_TEMPL
    }));
}

fn ack(mut s: &mut TestSocket, t_ms: i64, ack: usize) {
    send!(s, time t_ms, TcpRepr {
        seq_number: REMOTE_SEQ + 1,
        ack_number: Some(LOCAL_SEQ + ack),
        window_len: 30,
        ..SEND_TEMPL
    });
}

/// The timeout at 1.05 s resends A alone (slow start from one segment).
fn times_out(mut s: &mut TestSocket) {
    recv_nothing!(s, time 1049);
    sends(s, 1050, 1, b"aaa");
    assert_eq!(s.recovery_stats().rto_retransmits, 1);
}

#[test]
fn test_frto_a_spurious_timeout_is_undone_and_the_flight_not_sent_again() {
    let mut s = socket_flight(true);
    s.send_slice(b"iiiJJJ").unwrap();
    let (rto, cwnd) = (s.rtte.retransmission_timeout(), s.congestion_controller.inner().window());
    times_out(&mut s);
    assert!(s.congestion_controller.inner().window() < cwnd);
    // The late ACKs of the originals: A to C. Step 2b: two new segments, not B, C, ...
    ack(&mut s, 1060, 10);
    sends(&mut s, 1060, 25, b"iii");
    sends(&mut s, 1060, 28, b"JJJ");
    recv_nothing!(s, time 1060);
    // The next ACK acknowledges more: the flight had arrived.
    ack(&mut s, 1061, 19);
    let r = s.recovery_stats();
    assert_eq!((r.rto_retransmits, r.spurious_retransmits, r.frto_undone), (1, 1, 1));
    assert_eq!(s.rtte.retransmission_timeout(), rto, "the backoff is undone");
    // Undone, and this ACK then counted on the window from before.
    assert!(s.congestion_controller.inner().window() >= cwnd, "the window cut is undone");
    assert_eq!(s.frto, None);
    recv_nothing!(s, time 1061);
    ack(&mut s, 1062, 31);
    recv_nothing!(s, time 1062);
    assert!(s.tx_buffer.is_empty());
}

#[test]
fn test_frto_a_needed_timeout_goes_on_as_before() {
    let mut s = socket_flight(true);
    s.send_slice(b"iiiJJJ").unwrap();
    times_out(&mut s);
    // A was lost, and B to H with it: the ACK of A's retransmission covers A only,
    // and the new segments draw a duplicate ACK.
    ack(&mut s, 1060, 4);
    sends(&mut s, 1060, 25, b"iii");
    sends(&mut s, 1060, 28, b"JJJ");
    ack(&mut s, 1061, 4);
    // Step 3a: the rest of the flight again, from B.
    sends(&mut s, 1061, 4, b"BBB");
    assert_eq!(s.recovery_stats().spurious_retransmits, 0);
    assert!(s.resent.is_some_and(|r| r.rto) && s.undo_cc.is_some(), "still a timeout to judge");
}

#[test]
fn test_frto_without_new_data_or_off_the_timeout_recovery_is_unchanged() {
    for (frto, more) in [(true, false), (false, true)] {
        let mut s = socket_flight(frto);
        if more {
            s.send_slice(b"iiiJJJ").unwrap();
        }
        times_out(&mut s);
        ack(&mut s, 1060, 10);
        // Conventional: the rest of the flight again, from D (B and C were acknowledged).
        sends(&mut s, 1060, 10, b"DDD");
        assert_eq!(s.recovery_stats().spurious_retransmits, 0, "frto {frto}");
        assert_eq!(s.frto, None);
    }
}

#[test]
fn test_frto_one_segment_in_flight_is_left_to_the_dsack() {
    let mut s = socket_flight(true);
    ack(&mut s, 1001, 25);
    s.send_slice(b"iii").unwrap();
    sends(&mut s, 1002, 25, b"iii");
    recv_nothing!(s, time 1051);
    sends(&mut s, 1052, 25, b"iii");
    assert_eq!((s.recovery_stats().rto_retransmits, s.frto), (1, None));
}

#[test]
fn test_frto_an_ack_that_shows_data_missing_ends_it() {
    // A peer with SACK (the SACK recovery off, to see F-RTO alone): after step 2, the
    // next ACK acknowledges more, D, but its SACK block for the new segments shows e to
    // H missing. The flight was lost in part: it goes again from e, nothing is undone.
    let mut s = socket_flight(true);
    s.remote_has_sack = true;
    s.send_slice(b"iiiJJJ").unwrap();
    times_out(&mut s);
    ack(&mut s, 1060, 10);
    sends(&mut s, 1060, 25, b"iii");
    sends(&mut s, 1060, 28, b"JJJ");
    send!(s, time 1061, TcpRepr {
        seq_number: REMOTE_SEQ + 1,
        ack_number: Some(LOCAL_SEQ + 13),
        window_len: 30,
        sack_ranges: [Some(((LOCAL_SEQ + 25).0 as u32, (LOCAL_SEQ + 31).0 as u32)), None, None],
        ..SEND_TEMPL
    });
    sends(&mut s, 1061, 13, b"eee");
    let r = s.recovery_stats();
    assert_eq!((r.spurious_retransmits, r.frto_undone), (0, 0));
}
