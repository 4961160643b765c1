// [xsk-stack patch: reorder, old-ack] A path that reorders: the duplicate-ACK threshold
// that rises past what it showed, the window cut undone on a D-SACK, and data segments
// whose ACK the path delayed behind later ones.

use super::*;

/// Eight 3-octet segments, A to H, in flight from LOCAL_SEQ + 1 to a peer with SACK,
/// the SACK recovery on.
fn eight_in_flight(mut s: TestSocket, from: usize, t_ms: i64, data: &'static [u8; 24]) -> TestSocket {
    s.send_slice(data).unwrap();
    for i in 0..8 {
        recv!(s, time t_ms, Ok(TcpRepr {
            seq_number: LOCAL_SEQ + from + 3 * i,
            ack_number: Some(REMOTE_SEQ + 1),
            payload: &data[3 * i..3 * i + 3],
            ..RECV_TEMPL
        }));
    }
    s
}

fn socket_with_sack() -> TestSocket {
    let mut s = socket_established();
    s.set_sack_recovery(true);
    s.remote_has_sack = true;
    s.remote_mss = 3;
    send!(s, time 0, TcpRepr { seq_number: REMOTE_SEQ + 1, ack_number: Some(LOCAL_SEQ + 1), ..SEND_TEMPL });
    s
}

/// The SACK block [from, to) in octets after LOCAL_SEQ.
fn block(from: usize, to: usize) -> Option<(u32, u32)> {
    Some(((LOCAL_SEQ + from).0 as u32, (LOCAL_SEQ + to).0 as u32))
}

fn ack(mut s: &mut TestSocket, t_ms: i64, ack: usize, sack: [Option<(u32, u32)>; 3]) {
    send!(s, time t_ms, TcpRepr {
        seq_number: REMOTE_SEQ + 1,
        ack_number: Some(LOCAL_SEQ + ack),
        sack_ranges: sack,
        ..SEND_TEMPL
    });
}

/// A is overtaken by B, C and D: three duplicate ACKs, a fast retransmit of A; then A's
/// original arrives (the ACK of everything), and the copy draws a D-SACK (if `dsack`;
/// else A was lost and its copy filled the hole).
fn a_overtaken_by_three(s: &mut TestSocket) {
    a_overtaken_by_three_then(s, true);
}

fn a_overtaken_by_three_then(mut s: &mut TestSocket, dsack: bool) {
    ack(s, 1010, 1, [block(4, 7), None, None]);
    ack(s, 1010, 1, [block(4, 10), None, None]);
    ack(s, 1010, 1, [block(4, 13), None, None]);
    recv!(s, time 1011, Ok(TcpRepr {
        seq_number: LOCAL_SEQ + 1,
        ack_number: Some(REMOTE_SEQ + 1),
        payload: &b"aaa"[..],
        ..RECV_TEMPL
    }));
    ack(s, 1012, 25, [None, None, None]);
    if dsack {
        ack(s, 1013, 25, [block(1, 4), None, None]);
    }
}

#[test]
fn test_reorder_a_dsack_for_a_fast_retransmit_raises_the_threshold() {
    let mut s = eight_in_flight(socket_with_sack(), 1, 1000, b"aaaBBBcccDDDeeeFFFgggHHH");
    assert_eq!(s.dup_thresh(), DUP_THRESH);
    a_overtaken_by_three(&mut s);
    let r = s.recovery_stats();
    assert_eq!((r.fast_retransmits, r.spurious_retransmits), (1, 1));
    // Three segments came before A: the threshold goes past them, and to twice the one
    // that was fooled (less one), whichever is more: 6.
    assert_eq!(s.reordering, 6);
    assert_eq!(s.recover, None);
    recv_nothing!(s, time 1013);

    // Five segments held above a hole draw nothing now; a sixth does.
    let mut s = eight_in_flight(s, 25, 2000, b"iiiJJJkkkLLLmmmNNNoooPPP");
    for right in [31, 34, 37, 40, 43] {
        ack(&mut s, 2010, 25, [block(28, right), None, None]);
    }
    recv_nothing!(s, time 2010);
    ack(&mut s, 2010, 25, [block(28, 46), None, None]);
    recv!(s, time 2011, Ok(TcpRepr {
        seq_number: LOCAL_SEQ + 25,
        ack_number: Some(REMOTE_SEQ + 1),
        payload: &b"iii"[..],
        ..RECV_TEMPL
    }));
    assert_eq!(s.recovery_stats().fast_retransmits, 2);
}

#[test]
fn test_reorder_an_early_ack_for_a_fast_retransmit_raises_the_threshold() {
    // [xsk-stack patch: reorder-verdict] The ACK of everything comes 1 ms after A's copy
    // went, sooner than half the smallest RTT (10 ms): A's original filled the hole. That
    // verdict, not a D-SACK (none comes here; it usually comes after), raises the threshold.
    let mut s = eight_in_flight(socket_with_sack(), 1, 1000, b"aaaBBBcccDDDeeeFFFgggHHH");
    s.rtte.min_rtt = 10_000;
    a_overtaken_by_three_then(&mut s, false);
    let r = s.recovery_stats();
    assert_eq!((r.fast_retransmits, r.spurious_retransmits), (1, 1));
    assert_eq!(s.reordering, 6);
    assert_eq!(s.recover, None);
    // The D-SACK that follows finds nothing left to judge and raises nothing more.
    ack(&mut s, 1013, 25, [block(1, 4), None, None]);
    assert_eq!((s.recovery_stats().spurious_retransmits, s.reordering), (1, 6));
}

#[test]
fn test_reorder_a_dsack_after_holes_raises_the_threshold_and_undoes_nothing() {
    // A and E both late: A goes at the third duplicate ACK, E when three segments are held
    // above it; then both originals arrive, and A's copy draws a D-SACK. The threshold
    // rises although the recovery sent more than A (whose window cut then stays).
    let mut s = eight_in_flight(socket_with_sack(), 1, 1000, b"aaaBBBcccDDDeeeFFFgggHHH");
    ack(&mut s, 1010, 1, [block(4, 7), None, None]);
    ack(&mut s, 1010, 1, [block(4, 10), None, None]);
    ack(&mut s, 1010, 1, [block(4, 13), None, None]);
    recv!(s, time 1011, Ok(TcpRepr {
        seq_number: LOCAL_SEQ + 1,
        ack_number: Some(REMOTE_SEQ + 1),
        payload: &b"aaa"[..],
        ..RECV_TEMPL
    }));
    ack(&mut s, 1012, 1, [block(16, 25), block(4, 13), None]);
    recv!(s, time 1012, Ok(TcpRepr {
        seq_number: LOCAL_SEQ + 13,
        ack_number: Some(REMOTE_SEQ + 1),
        payload: &b"eee"[..],
        ..RECV_TEMPL
    }));
    ack(&mut s, 1013, 25, [None, None, None]);
    ack(&mut s, 1014, 25, [block(1, 4), None, None]);
    let r = s.recovery_stats();
    assert_eq!((r.fast_retransmits, r.hole_retransmits, r.spurious_retransmits), (1, 1, 1));
    assert_eq!(s.reordering, 6);
}

#[test]
fn test_reorder_off_without_sack_recovery() {
    let mut s = eight_in_flight(socket_with_sack(), 1, 1000, b"aaaBBBcccDDDeeeFFFgggHHH");
    s.set_sack_recovery(false);
    a_overtaken_by_three(&mut s);
    assert_eq!(s.dup_thresh(), DUP_THRESH, "upstream's threshold");
    assert_eq!(s.reordering, DUP_THRESH, "nothing learned either");
}

#[test]
fn test_reorder_a_hole_filled_before_its_fast_retransmit_went_raises_the_threshold() {
    // Five segments held above A (one ACK whose block covers them, as a receiver that
    // coalesces its ACKs sends) arm a fast retransmit; A's ACK comes in the same batch,
    // before anything is sent again. Nothing was resent, so A was late.
    let mut s = eight_in_flight(socket_with_sack(), 1, 1000, b"aaaBBBcccDDDeeeFFFgggHHH");
    ack(&mut s, 1010, 1, [block(4, 19), None, None]);
    assert!(matches!(s.timer, Timer::FastRetransmit));
    ack(&mut s, 1010, 19, [None, None, None]);
    recv_nothing!(s, time 1010);
    assert_eq!(s.reordering, 6);
    assert_eq!(s.recovery_stats().fast_retransmits, 0);
}

#[test]
fn test_reorder_a_needed_fast_retransmit_raises_nothing() {
    // A was lost: its copy fills the hole, no D-SACK comes.
    let mut s = eight_in_flight(socket_with_sack(), 1, 1000, b"aaaBBBcccDDDeeeFFFgggHHH");
    ack(&mut s, 1010, 1, [block(4, 7), None, None]);
    ack(&mut s, 1010, 1, [block(4, 10), None, None]);
    ack(&mut s, 1010, 1, [block(4, 13), None, None]);
    recv!(s, time 1010, Ok(TcpRepr {
        seq_number: LOCAL_SEQ + 1,
        ack_number: Some(REMOTE_SEQ + 1),
        payload: &b"aaa"[..],
        ..RECV_TEMPL
    }));
    ack(&mut s, 1011, 25, [None, None, None]);
    assert_eq!(s.reordering, DUP_THRESH);
    assert_eq!(s.recovery_stats().spurious_retransmits, 0);
}

#[test]
#[cfg(feature = "socket-tcp-reno")]
fn test_reorder_a_dsack_for_a_fast_retransmit_undoes_the_window_cut() {
    fn after(dsack: bool) -> (usize, usize) {
        let mut s = socket_with_sack();
        s.set_congestion_control(CongestionControl::Reno);
        let mut s = eight_in_flight(s, 1, 1000, b"aaaBBBcccDDDeeeFFFgggHHH");
        // The controller's segment as the socket's, so that halving shows (it floors
        // the window at two of its own segments, 1024 octets each by default).
        s.congestion_controller.inner_mut().set_mss(3);
        let before = s.congestion_controller.inner().window();
        a_overtaken_by_three_then(&mut s, dsack);
        (before, s.congestion_controller.inner().window())
    }
    let (before, late) = after(true);
    let (_, lost) = after(false);
    assert!(lost < before, "a needed fast retransmit halves the window");
    assert_eq!(late, before, "the D-SACK restored it");
}

#[test]
fn test_old_ack_a_data_segment_behind_later_ones_is_taken() {
    // We sent "abcdef" and the peer acknowledged it; a segment of the peer's sent before
    // that ACK, carrying data and the older ACK, arrives after it.
    let mut s = socket_established();
    s.send_slice(b"abcdef").unwrap();
    recv!(s, time 1000, Ok(TcpRepr {
        seq_number: LOCAL_SEQ + 1,
        ack_number: Some(REMOTE_SEQ + 1),
        payload: &b"abcdef"[..],
        ..RECV_TEMPL
    }));
    send!(s, time 1010, TcpRepr {
        seq_number: REMOTE_SEQ + 1 + 3,
        ack_number: Some(LOCAL_SEQ + 1 + 6),
        payload: &b"xyz"[..],
        window_len: 1000,
        ..SEND_TEMPL
    }, Some(TcpRepr {
        seq_number: LOCAL_SEQ + 1 + 6,
        ack_number: Some(REMOTE_SEQ + 1),
        window_len: 64,
        ..RECV_TEMPL
    }));
    assert_eq!(s.local_seq_no, LOCAL_SEQ + 1 + 6);
    send!(s, time 1011, TcpRepr {
        seq_number: REMOTE_SEQ + 1,
        ack_number: Some(LOCAL_SEQ + 1),
        payload: &b"uvw"[..],
        window_len: 10,
        ..SEND_TEMPL
    }, Some(TcpRepr {
        seq_number: LOCAL_SEQ + 1 + 6,
        ack_number: Some(REMOTE_SEQ + 1 + 6),
        window_len: 58,
        ..RECV_TEMPL
    }));
    let mut buf = [0u8; 6];
    assert_eq!(s.recv_slice(&mut buf), Ok(6));
    assert_eq!(&buf, b"uvwxyz");
    assert_eq!(s.local_seq_no, LOCAL_SEQ + 1 + 6, "an older ACK moves nothing back");
    assert_eq!(s.remote_win_len, 1000, "nor the window");
}

#[test]
fn test_old_ack_alone_or_too_old_is_dropped() {
    let mut s = socket_established();
    s.send_slice(b"abcdef").unwrap();
    recv!(s, time 1000, Ok(TcpRepr {
        seq_number: LOCAL_SEQ + 1,
        ack_number: Some(REMOTE_SEQ + 1),
        payload: &b"abcdef"[..],
        ..RECV_TEMPL
    }));
    send!(s, time 1010, TcpRepr {
        seq_number: REMOTE_SEQ + 1,
        ack_number: Some(LOCAL_SEQ + 1 + 6),
        ..SEND_TEMPL
    });
    // An older pure ACK: nothing to take, nothing sent (as upstream).
    send!(s, time 1011, TcpRepr {
        seq_number: REMOTE_SEQ + 1,
        ack_number: Some(LOCAL_SEQ + 1),
        ..SEND_TEMPL
    }, None);
    // Data with an ACK older than any window the peer could have had open: dropped.
    send!(s, time 1012, TcpRepr {
        seq_number: REMOTE_SEQ + 1,
        ack_number: Some(LOCAL_SEQ + 1 + 6 - 70_000),
        payload: &b"uvw"[..],
        ..SEND_TEMPL
    }, None);
    // Exactly 2^31 behind (a flipped top bit): dropped, and no sequence arithmetic panics.
    send!(s, time 1013, TcpRepr {
        seq_number: REMOTE_SEQ + 1,
        ack_number: Some(TcpSeqNumber((LOCAL_SEQ + 1 + 6).0.wrapping_add(i32::MIN))),
        payload: &b"uvw"[..],
        ..SEND_TEMPL
    }, None);
    assert_eq!(s.recv_queue(), 0);
}

#[test]
fn test_ooo_drops_a_segment_the_assembler_cannot_take_is_counted() {
    // [xsk-stack patch: ooo-drops] One-octet segments at every other offset above a hole:
    // each makes a range, until the assembler holds as many as it can; the next one is
    // dropped (no reply) and counted, and one that extends a range is still taken.
    let mut s = socket_established();
    let n = crate::config::ASSEMBLER_MAX_SEGMENT_COUNT;
    let at = |s: &mut TestSocket, offset: usize| {
        send(s, Instant::from_millis(0), &TcpRepr {
            seq_number: REMOTE_SEQ + 1 + offset,
            ack_number: Some(LOCAL_SEQ + 1),
            payload: &b"x"[..],
            ..SEND_TEMPL
        })
    };
    for k in 0..n {
        assert!(at(&mut s, 2 + 2 * k).is_some(), "range {k} taken and ACKed");
    }
    assert_eq!(s.recovery_stats().out_of_order_dropped, 0);
    assert_eq!(at(&mut s, 2 + 2 * n), None);
    assert_eq!(s.recovery_stats().out_of_order_dropped, 1);
    assert!(at(&mut s, 3).is_some(), "joins the first two ranges");
    assert_eq!(s.recovery_stats().out_of_order_dropped, 1);
}
