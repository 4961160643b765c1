// [xsk-stack patch: probe-verdict, hold-retransmits] What a tail-loss probe's answer
// shows of the peer, the timeout's margin for a peer that holds its ACKs, and
// retransmissions held while the caller's receive queue is read.

use super::*;

/// A connection with the engine's probe settings (RTO floor 50 ms, allowance 5 ms,
/// 200 ms for a peer that holds its ACKs), SACK allowed and an SRTT of 1 ms: the
/// probe for a lone segment goes 7 ms after it.
fn socket_probing() -> TestSocket {
    let mut s = socket_established();
    s.set_ack_delay(None);
    s.remote_has_sack = true;
    s.set_rto_config(RtoConfig {
        min: Duration::from_millis(50),
        max: Duration::from_secs(60),
        initial: Duration::from_secs(1),
    });
    s.set_tail_loss_probe(Some(TailLossProbe {
        ack_delay: Duration::from_millis(5),
        ack_delay_max: Duration::from_millis(200),
    }));
    s.rtte.sample(1_000);
    s
}

/// "abc" goes out at `t_ms` from `off` octets after LOCAL_SEQ.
#[track_caller]
fn sends_abc(s: &mut TestSocket, t_ms: i64, off: usize) {
    sends_abc_us(s, t_ms * 1000, off)
}

#[track_caller]
fn sends_abc_us(s: &mut TestSocket, t_us: i64, off: usize) {
    recv(s, Instant::from_micros(t_us), |r| {
        assert_eq!(r.map(|r| (r.seq_number, r.payload)), Ok((LOCAL_SEQ + off, &b"abc"[..])))
    });
}

/// An ACK up to `ack` octets after LOCAL_SEQ, with a D-SACK for the 3 octets
/// before it or not.
fn acks(mut s: &mut TestSocket, t_ms: i64, ack: usize, dsack: bool) {
    let block = Some(((LOCAL_SEQ + ack - 3).0 as u32, (LOCAL_SEQ + ack).0 as u32));
    send!(s, time t_ms, TcpRepr {
        seq_number: REMOTE_SEQ + 1,
        ack_number: Some(LOCAL_SEQ + ack),
        sack_ranges: [if dsack { block } else { None }, None, None],
        ..SEND_TEMPL
    });
}

#[test]
fn test_probe_verdict_an_ack_that_crossed_the_probe_is_no_verdict_its_dsack_is() {
    // The original's ACK comes after the probe left (it crossed it, or waited in the
    // caller's receive queue), then the peer's D-SACK for the probe: the ACK was late.
    // It takes the probe's answer to tell, so the first ACK gives no verdict out. The
    // connection's own streak still starts over at it, as before: alone, it cannot
    // tell this from a lost answer whose ACK rode on the peer's probe (its D-SACK
    // follows too), which two stacks on a lossy link see at every lost answer.
    let mut s = socket_probing();
    for round in 0..3usize {
        let (t, off) = (1000 * round as i64, 1 + 3 * round);
        s.send_slice(b"abc").unwrap();
        sends_abc(&mut s, t, off);
        // The probe at 2 SRTT + 5 ms (each verdict is an RTT sample too).
        let srtt = s.smoothed_rtt().unwrap();
        let pto = (srtt * 2 + Duration::from_millis(5)).total_micros() as i64;
        recv_nothing(&mut s, Instant::from_micros(t * 1000 + pto - 1));
        sends_abc_us(&mut s, t * 1000 + pto, off);
        acks(&mut s, t + 20, off + 3, false);
        assert_eq!(s.take_probe_verdict(), None, "round {round}");
        acks(&mut s, t + 21, off + 3, true);
        // Late, and the original's ACK came 20 ms after it went (not the D-SACK's 21),
        // SRTT later than SRTT as it was when the probe went.
        let late = ProbeVerdict::Late { late_by: Some(Duration::from_millis(20) - srtt) };
        assert_eq!(s.take_probe_verdict(), Some(late), "round {round}");
        assert_eq!(s.tlp_spurious_streak, 1);
    }
    assert_eq!(s.tail_loss_probe_ack_delay(), Some(Duration::from_millis(5)));
    assert_eq!(s.recovery_stats().spurious_probes, 3);
}

#[test]
fn test_probe_verdict_late_by_the_dsack_when_no_ack_came_first() {
    // The ACK comes with the D-SACK for the probe: the ACK came 30 ms after the
    // original went.
    let mut s = socket_probing();
    s.send_slice(b"abc").unwrap();
    sends_abc(&mut s, 0, 1);
    recv_nothing!(s, time 6);
    sends_abc(&mut s, 7, 1);
    acks(&mut s, 30, 4, true);
    // SRTT was 1 ms when the probe went.
    let late = ProbeVerdict::Late { late_by: Some(Duration::from_millis(29)) };
    assert_eq!(s.take_probe_verdict(), Some(late));
    assert_eq!(s.take_probe_verdict(), None);
}

#[test]
fn test_probe_verdict_needed_once_data_sent_after_it_is_acknowledged() {
    // The original was lost: the probe is answered by a plain ACK, and no D-SACK
    // follows. Once the peer acknowledges data sent after the probe, none will: it
    // was needed.
    let mut s = socket_probing();
    s.tlp_spurious_streak = 2;
    s.send_slice(b"abc").unwrap();
    sends_abc(&mut s, 0, 1);
    sends_abc(&mut s, 7, 1);
    acks(&mut s, 8, 4, false);
    assert_eq!(s.take_probe_verdict(), None);
    assert_eq!(s.tlp_spurious_streak, 0);
    s.send_slice(b"abc").unwrap();
    sends_abc(&mut s, 9, 4);
    acks(&mut s, 10, 7, false);
    assert_eq!(s.take_probe_verdict(), Some(ProbeVerdict::Needed));
    assert_eq!(s.take_probe_verdict(), None);
    assert_eq!(s.tail_loss_probe_ack_delay(), Some(Duration::from_millis(5)));
}

#[test]
fn test_probe_verdict_needed_when_the_next_probe_replaces_it() {
    // The same, from a peer that delays its ACKs: before it acknowledges the next
    // answer, that answer draws a probe of its own. By then a D-SACK for the first
    // would have come: it was needed.
    let mut s = socket_probing();
    s.send_slice(b"abc").unwrap();
    sends_abc(&mut s, 0, 1);
    sends_abc(&mut s, 7, 1);
    acks(&mut s, 8, 4, false);
    assert_eq!(s.take_probe_verdict(), None);
    s.send_slice(b"abc").unwrap();
    sends_abc(&mut s, 100, 4);
    assert_eq!(s.take_probe_verdict(), None);
    let pto = (s.smoothed_rtt().unwrap() * 2 + Duration::from_millis(5)).total_micros() as i64;
    sends_abc_us(&mut s, 100_000 + pto, 4);
    assert_eq!(s.take_probe_verdict(), Some(ProbeVerdict::Needed));
    assert_eq!(s.recovery_stats().tail_probes, 2);
}

#[test]
fn test_rto_margin_min_keeps_the_timeout_behind_the_allowance() {
    // SRTT 1 ms, the allowance raised to 200 ms. The probe's time is capped at the
    // timeout's: with the default margin that is the 50 ms floor, long before a
    // 200 ms-late ACK; with the margin raised too, SRTT + 200 ms.
    for margin in [false, true] {
        let mut s = socket_probing();
        s.set_tail_loss_probe_ack_delay(Duration::from_millis(200));
        if margin {
            s.set_rto_margin_min(Duration::from_millis(200));
            assert_eq!(s.retransmission_timeout(), Duration::from_millis(201));
        }
        s.send_slice(b"abc").unwrap();
        sends_abc(&mut s, 0, 1);
        let at = if margin { 201 } else { 50 };
        recv_nothing!(s, time at - 1);
        sends_abc(&mut s, at, 1);
        let r = s.recovery_stats();
        assert_eq!((r.tail_probes, r.rto_retransmits), (1, 0), "margin {margin}");
        // A new connection starts from the default margin.
        s.reset();
        assert_eq!(s.rtte.min_margin, RTTE_MIN_MARGIN);
    }
}

#[test]
fn test_rto_margin_min_and_allowance_follow_the_caller_both_ways() {
    // A caller that measured its peer's ACKs come later than `ack_delay_max` sets
    // more (the probe then waits SRTT + 500 ms), and may lower it again.
    let mut s = socket_probing();
    s.set_tail_loss_probe_ack_delay(Duration::from_millis(500));
    s.set_rto_margin_min(Duration::from_millis(500));
    assert_eq!(s.tail_loss_probe_ack_delay(), Some(Duration::from_millis(500)));
    assert_eq!(s.retransmission_timeout(), Duration::from_millis(501));
    s.set_rto_margin_min(Duration::from_millis(300));
    assert_eq!(s.retransmission_timeout(), Duration::from_millis(301));
    s.set_rto_margin_min(Duration::from_millis(500));
    s.send_slice(b"abc").unwrap();
    sends_abc(&mut s, 0, 1);
    recv_nothing!(s, time 500);
    sends_abc(&mut s, 501, 1);
    let r = s.recovery_stats();
    assert_eq!((r.tail_probes, r.rto_retransmits), (1, 0));
    // A timeout backed off is not lowered by a smaller margin.
    recv_nothing!(s, time 1000);
    sends_abc(&mut s, 1002, 1);
    assert_eq!(s.recovery_stats().rto_retransmits, 1);
    let backed_off = s.retransmission_timeout();
    assert!(backed_off > Duration::from_millis(501), "{backed_off:?}");
    s.set_rto_margin_min(Duration::from_millis(200));
    assert_eq!(s.retransmission_timeout(), backed_off);
}

#[test]
fn test_hold_retransmits_defers_probes_and_timeouts_not_new_data() {
    // The probe is due at 7 ms, the timeout at 50 ms: while held, neither goes, new
    // data does; the held probe goes at the first egress after.
    let mut s = socket_probing();
    s.set_nagle_enabled(false);
    s.send_slice(b"abc").unwrap();
    sends_abc(&mut s, 0, 1);
    s.cx.set_hold_retransmits_for_test(true);
    recv_nothing!(s, time 7);
    recv_nothing!(s, time 60);
    s.send_slice(b"abc").unwrap();
    sends_abc(&mut s, 61, 4);
    let r = s.recovery_stats();
    assert_eq!((r.tail_probes, r.rto_retransmits), (0, 0));
    s.cx.set_hold_retransmits_for_test(false);
    // The probe's time (from the second send) and the timeout's are both past.
    recv!(s, time 200, Ok(TcpRepr {
        seq_number: LOCAL_SEQ + 1,
        ack_number: Some(REMOTE_SEQ + 1),
        payload: &b"abcabc"[..],
        ..RECV_TEMPL
    }));
    let r = s.recovery_stats();
    assert_eq!(r.tail_probes + r.rto_retransmits, 1, "{r:?}");
}
