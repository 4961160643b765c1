// [xsk-stack patch: sack-recovery] The SACK scoreboard, and a fast recovery that sends
// every hole once: those the peer's SACK blocks show, and the next after a partial ACK.

use super::*;

/// Eight 3-octet segments, A to H, in flight from LOCAL_SEQ + 1, to a peer that
/// allowed SACK (or not), with the SACK recovery on.
fn socket_eight_in_flight(sack: bool) -> TestSocket {
    socket_eight_in_flight_recovery(sack, true)
}

fn socket_eight_in_flight_recovery(sack: bool, recovery: bool) -> TestSocket {
    let mut s = socket_established();
    s.set_sack_recovery(recovery);
    s.remote_has_sack = sack;
    s.remote_mss = 3;
    send!(s, time 0, TcpRepr { seq_number: REMOTE_SEQ + 1, ack_number: Some(LOCAL_SEQ + 1), ..SEND_TEMPL });
    s.send_slice(b"aaaBBBcccDDDeeeFFFgggHHH").unwrap();
    for (i, seg) in [b"aaa", b"BBB", b"ccc", b"DDD", b"eee", b"FFF", b"ggg", b"HHH"].into_iter().enumerate() {
        recv!(s, time 1000, Ok(TcpRepr {
            seq_number: LOCAL_SEQ + 1 + 3 * i,
            ack_number: Some(REMOTE_SEQ + 1),
            payload: &seg[..],
            ..RECV_TEMPL
        }));
    }
    s
}

/// The SACK block [from, to) in octets after LOCAL_SEQ.
fn block(from: usize, to: usize) -> Option<(u32, u32)> {
    Some(((LOCAL_SEQ + from).0 as u32, (LOCAL_SEQ + to).0 as u32))
}

/// A duplicate ACK of `ack` (octets after LOCAL_SEQ) with these SACK blocks.
fn dup_ack(mut s: &mut TestSocket, t_ms: i64, ack: usize, sack: [Option<(u32, u32)>; 3]) {
    send!(s, time t_ms, TcpRepr {
        seq_number: REMOTE_SEQ + 1,
        ack_number: Some(LOCAL_SEQ + ack),
        sack_ranges: sack,
        ..SEND_TEMPL
    });
}

#[track_caller]
fn resends(mut s: &mut TestSocket, t_ms: i64, at: usize, payload: &'static [u8]) {
    recv!(s, time t_ms, Ok(TcpRepr {
        seq_number: LOCAL_SEQ + at,
        ack_number: Some(REMOTE_SEQ + 1),
        payload,
        ..RECV_TEMPL
    }));
}

#[test]
fn test_sack_two_losses_in_a_window_each_resent_once_without_a_timeout() {
    // A and D are lost; B, C, E, F, G, H arrive, each answered at once with a duplicate
    // ACK whose first block is the latest (RFC 2018).
    let mut s = socket_eight_in_flight(true);
    dup_ack(&mut s, 1010, 1, [block(4, 7), None, None]);
    dup_ack(&mut s, 1010, 1, [block(4, 10), None, None]);
    dup_ack(&mut s, 1010, 1, [block(13, 16), block(4, 10), None]);
    // The third: fast retransmit of A.
    resends(&mut s, 1011, 1, b"aaa");
    recv_nothing!(s, time 1011);
    // Two segments held above D: not yet lost (DupThresh is three).
    dup_ack(&mut s, 1012, 1, [block(13, 19), block(4, 10), None]);
    recv_nothing!(s, time 1012);
    // Three: D goes again, before A's retransmission is acknowledged.
    dup_ack(&mut s, 1013, 1, [block(13, 22), block(4, 10), None]);
    resends(&mut s, 1013, 10, b"DDD");
    recv_nothing!(s, time 1013);
    dup_ack(&mut s, 1014, 1, [block(13, 25), block(4, 10), None]);
    recv_nothing!(s, time 1014);
    // A's retransmission arrives: a partial ACK up to D, which already went again.
    dup_ack(&mut s, 1020, 10, [block(13, 25), None, None]);
    recv_nothing!(s, time 1020);
    // D's: everything. The recovery is over, with no timeout.
    dup_ack(&mut s, 1021, 25, [None, None, None]);
    recv_nothing!(s, time 1021);
    assert_eq!(s.recover, None);
    assert_eq!(s.sacked, [None; SACK_SCOREBOARD]);
    let r = s.recovery_stats();
    assert_eq!((r.fast_retransmits, r.hole_retransmits, r.rto_retransmits), (1, 1, 0));
}

#[test]
fn test_sack_recovery_off_is_upstreams_one_fast_retransmit() {
    // The same losses and SACK blocks with the setting off: A goes at the third
    // duplicate ACK, D not before the timeout, and no scoreboard is kept.
    let mut s = socket_eight_in_flight_recovery(true, false);
    dup_ack(&mut s, 1010, 1, [block(4, 7), None, None]);
    dup_ack(&mut s, 1010, 1, [block(4, 10), None, None]);
    dup_ack(&mut s, 1010, 1, [block(13, 16), block(4, 10), None]);
    resends(&mut s, 1011, 1, b"aaa");
    for right in [19, 22, 25] {
        dup_ack(&mut s, 1012, 1, [block(13, right), block(4, 10), None]);
    }
    dup_ack(&mut s, 1020, 10, [block(13, 25), None, None]);
    recv_nothing!(s, time 1020);
    assert_eq!(s.sacked, [None; SACK_SCOREBOARD]);
    assert_eq!(s.recovery_stats().hole_retransmits, 0);
}

#[test]
fn test_sack_newreno_partial_ack_resends_the_next_segment() {
    // The same losses to a peer without SACK: the partial ACK after A's retransmission
    // shows D lost too (RFC 6582), where upstream waited for three more duplicate ACKs or
    // the timeout.
    let mut s = socket_eight_in_flight(false);
    for _ in 0..3 {
        dup_ack(&mut s, 1010, 1, [None, None, None]);
    }
    resends(&mut s, 1011, 1, b"aaa");
    for _ in 0..3 {
        dup_ack(&mut s, 1012, 1, [None, None, None]);
    }
    recv_nothing!(s, time 1012);
    dup_ack(&mut s, 1020, 10, [None, None, None]);
    resends(&mut s, 1020, 10, b"DDD");
    recv_nothing!(s, time 1020);
    dup_ack(&mut s, 1030, 25, [None, None, None]);
    recv_nothing!(s, time 1030);
    let r = s.recovery_stats();
    assert_eq!((r.fast_retransmits, r.hole_retransmits, r.rto_retransmits), (1, 1, 0));
}

#[test]
fn test_sack_blocks_show_a_loss_duplicate_acks_did_not_count() {
    // The peer's duplicate ACKs each moved its window (so none counts as a duplicate),
    // but its SACK blocks hold more than two segments above A: A is lost (RFC 6675).
    let mut s = socket_eight_in_flight(true);
    for (i, right) in [7usize, 10, 13].into_iter().enumerate() {
        send!(s, time 1010, TcpRepr {
            seq_number: REMOTE_SEQ + 1,
            ack_number: Some(LOCAL_SEQ + 1),
            window_len: 200 + i as u16,
            sack_ranges: [block(4, right), None, None],
            ..SEND_TEMPL
        });
    }
    resends(&mut s, 1011, 1, b"aaa");
    assert_eq!(s.recovery_stats().fast_retransmits, 1);
}

#[test]
fn test_sack_hostile_blocks_are_clipped_to_the_flight() {
    let mut s = socket_eight_in_flight(true);
    let wrap = Some(((LOCAL_SEQ + 4).0 as u32, (LOCAL_SEQ + 4).0.wrapping_add(i32::MAX) as u32));
    let hostile = [
        [block(100, 200), None, None], // beyond anything sent
        [block(10, 4), None, None],    // inverted
        [Some(((LOCAL_SEQ - 100).0 as u32, (LOCAL_SEQ + 1).0 as u32)), None, None], // below the ACK
        [wrap, block(0, 0), block(30, 1)],
    ];
    for sack in hostile {
        dup_ack(&mut s, 1010, 1, sack);
    }
    for (left, right) in s.sacked.iter().flatten().copied() {
        assert!(LOCAL_SEQ + 1 <= left && left < right && right <= LOCAL_SEQ + 25, "{left}..{right}");
    }
}

#[test]
fn test_sack_scoreboard_is_bounded_ordered_and_merged() {
    let mut s = socket_eight_in_flight(true);
    dup_ack(&mut s, 1010, 1, [block(19, 22), block(13, 16), block(7, 10)]);
    dup_ack(&mut s, 1010, 1, [block(22, 25), block(16, 18), block(4, 6)]);
    // [4,6) [7,10) [13,18) [19,25) after merging; nothing beyond four ranges.
    assert_eq!(
        s.sacked,
        [
            Some((LOCAL_SEQ + 4, LOCAL_SEQ + 6)),
            Some((LOCAL_SEQ + 7, LOCAL_SEQ + 10)),
            Some((LOCAL_SEQ + 13, LOCAL_SEQ + 18)),
            Some((LOCAL_SEQ + 19, LOCAL_SEQ + 25)),
        ]
    );
    dup_ack(&mut s, 1010, 1, [block(10, 11), block(11, 12), block(2, 3)]);
    // Six ranges: the lowest four kept.
    assert_eq!(
        s.sacked,
        [
            Some((LOCAL_SEQ + 2, LOCAL_SEQ + 3)),
            Some((LOCAL_SEQ + 4, LOCAL_SEQ + 6)),
            Some((LOCAL_SEQ + 7, LOCAL_SEQ + 12)),
            Some((LOCAL_SEQ + 13, LOCAL_SEQ + 18)),
        ]
    );
    // A cumulative ACK drops what it covers and clips what it cuts.
    dup_ack(&mut s, 1010, 5, [None, None, None]);
    assert_eq!(s.sacked[0], Some((LOCAL_SEQ + 5, LOCAL_SEQ + 6)));
}

#[test]
fn test_sack_timeout_ends_the_recovery_and_forgets_the_scoreboard() {
    let mut s = socket_eight_in_flight(true);
    dup_ack(&mut s, 1010, 1, [block(4, 7), None, None]);
    dup_ack(&mut s, 1010, 1, [block(4, 10), None, None]);
    dup_ack(&mut s, 1010, 1, [block(4, 13), None, None]);
    resends(&mut s, 1011, 1, b"aaa");
    assert!(s.recover.is_some());
    // The retransmission is lost; the timer fires and everything goes again (a peer may
    // renege on what it reported).
    resends(&mut s, 3000, 1, b"aaa");
    assert_eq!(s.recover, None);
    assert_eq!(s.sacked, [None; SACK_SCOREBOARD]);
    resends(&mut s, 3000, 4, b"BBB");
}

fn g_lost_only_h_follows(sack_recovery: bool) -> TestSocket {
    let mut s = socket_established();
    s.set_sack_recovery(sack_recovery);
    s.remote_has_sack = true;
    s.remote_mss = 3;
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
    send!(s, time 0, TcpRepr { seq_number: REMOTE_SEQ + 1, ack_number: Some(LOCAL_SEQ + 1), ..SEND_TEMPL });
    s.send_slice(b"aaaBBBcccDDDeeeFFFgggHHH").unwrap();
    for (i, seg) in [b"aaa", b"BBB", b"ccc", b"DDD", b"eee", b"FFF", b"ggg", b"HHH"].into_iter().enumerate() {
        resends(&mut s, 1000, 1 + 3 * i, &seg[..]);
    }
    s
}

#[test]
fn test_sack_a_probe_with_a_hole_reported_is_the_hole() {
    // [xsk-stack patch: probe-hole] G is lost and only H follows it: one duplicate ACK
    // with H reported. The probe is G, not H, which the peer holds; its ACK ends it.
    let mut s = g_lost_only_h_follows(true);
    dup_ack(&mut s, 1001, 19, [None, None, None]);
    dup_ack(&mut s, 1001, 19, [block(22, 25), None, None]);
    recv_nothing!(s, time 1002);
    resends(&mut s, 1010, 19, b"ggg");
    recv_nothing!(s, time 1010);
    assert_eq!(s.tlp_high, Some(LOCAL_SEQ + 25));
    dup_ack(&mut s, 1011, 25, [None, None, None]);
    recv_nothing!(s, time 1011);
    let r = s.recovery_stats();
    assert_eq!((r.tail_probes, r.fast_retransmits, r.rto_retransmits, r.spurious_probes), (1, 0, 0, 0), "{r:?}");
    assert_eq!((s.tlp_high, s.recover), (None, None));
}

#[test]
fn test_sack_a_probe_resends_a_hole_whose_retransmission_was_lost() {
    // [xsk-stack patch: probe-hole] A is lost, B to D reported: A goes (the fast
    // retransmit) and is lost again. The peer reports E to H, as they were sent; when
    // the probe falls due it is A once more, not H, and A's ACK ends the recovery.
    let mut s = g_lost_only_h_follows(true);
    dup_ack(&mut s, 1001, 1, [block(4, 7), None, None]);
    dup_ack(&mut s, 1001, 1, [block(4, 10), None, None]);
    dup_ack(&mut s, 1001, 1, [block(4, 13), None, None]);
    resends(&mut s, 1002, 1, b"aaa");
    assert!(s.recover.is_some());
    // New data arms the probe again (a recovery sends new data as ACKs come).
    s.send_slice(b"iii").unwrap();
    dup_ack(&mut s, 1003, 1, [block(4, 25), None, None]);
    resends(&mut s, 1003, 25, b"iii");
    recv_nothing!(s, time 1004);
    resends(&mut s, 1012, 1, b"aaa");
    dup_ack(&mut s, 1013, 28, [None, None, None]);
    let r = s.recovery_stats();
    assert_eq!((r.fast_retransmits, r.tail_probes, r.rto_retransmits), (1, 1, 0), "{r:?}");
    assert_eq!(s.recover, None);
}

#[test]
fn test_sack_a_partial_ack_with_nothing_reported_above_resends_nothing_at_once() {
    // [xsk-stack patch: sack-recovery] A and H are lost. A goes at the third duplicate
    // ACK; its ACK stops at H, and the peer reports nothing above H. With SACK, that is no
    // loss yet (RFC 6675: a reordered H looks the same): H goes when the probe falls due,
    // not at once as NewReno's partial-ACK rule would (which peers without SACK keep).
    let mut s = g_lost_only_h_follows(true);
    dup_ack(&mut s, 1001, 1, [block(4, 7), None, None]);
    dup_ack(&mut s, 1001, 1, [block(4, 10), None, None]);
    dup_ack(&mut s, 1001, 1, [block(4, 13), None, None]);
    resends(&mut s, 1002, 1, b"aaa");
    dup_ack(&mut s, 1002, 1, [block(4, 22), None, None]);
    dup_ack(&mut s, 1003, 22, [None, None, None]);
    recv_nothing!(s, time 1003);
    resends(&mut s, 1010, 22, b"HHH");
    dup_ack(&mut s, 1011, 25, [None, None, None]);
    let r = s.recovery_stats();
    assert_eq!((r.fast_retransmits, r.hole_retransmits, r.tail_probes, r.rto_retransmits), (1, 0, 1, 0), "{r:?}");
    assert_eq!(s.recover, None);
}

#[test]
fn test_sack_a_tail_loss_probe_reveals_a_loss_too_few_duplicates_showed() {
    // The same loss with no hole reported (H's ACK lost too): the tail-loss probe
    // resends H, the peer reports it as a duplicate with G still missing: G goes at
    // once, not at the timeout; and the probe's verdict (not needed) teaches nothing
    // about late ACKs.
    let mut s = g_lost_only_h_follows(true);
    dup_ack(&mut s, 1001, 19, [None, None, None]);
    recv_nothing!(s, time 1002);
    // The probe: the flight's last segment.
    resends(&mut s, 1010, 22, b"HHH");
    // A D-SACK for it, and G still missing.
    dup_ack(&mut s, 1011, 19, [block(22, 25), block(22, 25), None]);
    resends(&mut s, 1011, 19, b"ggg");
    recv_nothing!(s, time 1011);
    dup_ack(&mut s, 1012, 25, [None, None, None]);
    let r = s.recovery_stats();
    assert_eq!((r.tail_probes, r.fast_retransmits, r.rto_retransmits), (1, 1, 0), "{r:?}");
    assert_eq!(s.tlp_spurious_streak, 0);
}

#[test]
fn test_sack_without_sack_recovery_a_probe_is_the_last_segment() {
    // With the SACK recovery off, the probe is H, as upstream's. (The scoreboard is not
    // kept then, so this pins the behaviour, not probe-hole's own check of the setting,
    // which it cannot reach.)
    let mut s = g_lost_only_h_follows(false);
    dup_ack(&mut s, 1001, 19, [None, None, None]);
    dup_ack(&mut s, 1001, 19, [block(22, 25), None, None]);
    recv_nothing!(s, time 1002);
    assert_eq!(s.sacked, [None; SACK_SCOREBOARD]);
    resends(&mut s, 1010, 22, b"HHH");
    assert_eq!(s.recovery_stats().tail_probes, 1);
}

#[test]
fn test_sack_reordering_within_dupthresh_resends_nothing() {
    // B arrives after C and D (reordered, not lost): two duplicate ACKs with SACK blocks,
    // then the ACK that covers everything up to E. Nothing goes again, and the scoreboard
    // is empty once the ACK passes it.
    let mut s = socket_eight_in_flight(true);
    dup_ack(&mut s, 1010, 4, [block(7, 10), None, None]);
    dup_ack(&mut s, 1010, 4, [block(7, 13), None, None]);
    recv_nothing!(s, time 1010);
    dup_ack(&mut s, 1011, 13, [None, None, None]);
    recv_nothing!(s, time 1011);
    assert_eq!(s.sacked, [None; SACK_SCOREBOARD]);
    assert_eq!(s.recover, None);
    let r = s.recovery_stats();
    assert_eq!((r.fast_retransmits, r.hole_retransmits), (0, 0));
}
