// [xsk-stack patch: ts-rtt, eifel] Microsecond timestamps as RTT samples, and the
// spurious-retransmission verdict and undo they allow.

use super::*;

fn ts(tsval: u32, tsecr: u32) -> Option<TcpTimestampRepr> {
    Some(TcpTimestampRepr::new(tsval, tsecr))
}

fn socket_ts() -> TestSocket {
    let mut s = socket_established();
    s.set_timestamps_micros(true);
    s
}

/// Sends `data` at `t_ms` and checks the segment and its TSval (the clock's
/// microseconds plus the socket's offset, 0 here).
#[track_caller]
fn send_data(s: &mut TestSocket, t_ms: i64, seq: TcpSeqNumber, data: &'static [u8], tsval: u32) {
    let echo = s.last_remote_tsval;
    recv(s, Instant::from_millis(t_ms), |r| {
        let r = r.map(|mut r| {
            r.control = r.control.quash_psh();
            r
        });
        assert_eq!(
            r,
            Ok(TcpRepr {
                seq_number: seq,
                ack_number: Some(REMOTE_SEQ + 1),
                payload: data,
                timestamp: ts(tsval, echo),
                ..RECV_TEMPL
            })
        )
    });
}

#[track_caller]
fn ack(s: &mut TestSocket, t_ms: i64, ack: TcpSeqNumber, tsecr: u32) {
    let repr = TcpRepr {
        seq_number: REMOTE_SEQ + 1,
        ack_number: Some(ack),
        window_len: 2000,
        timestamp: ts(7, tsecr),
        ..SEND_TEMPL
    };
    assert_eq!(send(s, Instant::from_millis(t_ms), &repr), None);
}

#[test]
fn test_ts_micros_tsval_is_the_clock() {
    let mut s = socket_ts();
    assert!(s.timestamp_enabled());
    s.send_slice(b"abc").unwrap();
    send_data(&mut s, 250, LOCAL_SEQ + 1, b"abc", 250_000);
    ack(&mut s, 260, LOCAL_SEQ + 4, 250_000);
    assert_eq!(s.smoothed_rtt(), Some(Duration::from_millis(10)));
}

#[test]
fn test_ts_sample_of_a_segment_sent_twice() {
    // A timeout: the ACK echoes the retransmission, so the original or the ACK was
    // lost. Karn's rule would keep no sample; the echo times the second send.
    let mut s = socket_ts();
    s.send_slice(b"abcdef").unwrap();
    send_data(&mut s, 0, LOCAL_SEQ + 1, b"abcdef", 0);
    recv_nothing!(s, time 999);
    send_data(&mut s, 1000, LOCAL_SEQ + 1, b"abcdef", 1_000_000);
    assert_eq!(s.retransmission_timeout(), Duration::from_millis(2000));
    ack(&mut s, 1300, LOCAL_SEQ + 7, 1_000_000);
    assert_eq!(s.smoothed_rtt(), Some(Duration::from_millis(300)));
    assert_eq!(s.recovery_stats().spurious_retransmits, 0);
}

#[test]
fn test_ts_late_ack_undoes_a_timeout() {
    // The ACK echoes the original: it was late, not lost (Eifel, RFC 3522). The
    // timeout was spurious, the sample is the whole delay, and the backoff is gone.
    let mut s = socket_ts();
    s.send_slice(b"abcdef").unwrap();
    send_data(&mut s, 0, LOCAL_SEQ + 1, b"abcdef", 0);
    send_data(&mut s, 1000, LOCAL_SEQ + 1, b"abcdef", 1_000_000);
    ack(&mut s, 1300, LOCAL_SEQ + 7, 0);
    assert_eq!(s.recovery_stats().spurious_retransmits, 1);
    assert_eq!(s.smoothed_rtt(), Some(Duration::from_millis(1300)));
    // RFC 6298 from the one sample: 1.3 s + 4 * 0.65 s, not the doubled 2 s.
    assert_eq!(s.retransmission_timeout(), Duration::from_millis(3900));
}

#[test]
fn test_no_timestamps_no_verdict_from_a_late_ack() {
    // Without timestamps (the peer did not offer them) the same late ACK says
    // nothing: no sample (Karn) and no verdict.
    let mut s = socket_established();
    s.send_slice(b"abcdef").unwrap();
    recv!(s, time 0, Ok(TcpRepr {
        seq_number: LOCAL_SEQ + 1,
        ack_number: Some(REMOTE_SEQ + 1),
        payload: &b"abcdef"[..],
        ..RECV_TEMPL
    }));
    recv!(s, time 1000, Ok(TcpRepr {
        seq_number: LOCAL_SEQ + 1,
        ack_number: Some(REMOTE_SEQ + 1),
        payload: &b"abcdef"[..],
        ..RECV_TEMPL
    }));
    send!(s, time 1300, TcpRepr {
        seq_number: REMOTE_SEQ + 1,
        ack_number: Some(LOCAL_SEQ + 7),
        ..SEND_TEMPL
    });
    assert_eq!(s.smoothed_rtt(), None);
    assert_eq!(s.recovery_stats().spurious_retransmits, 0);
}

#[test]
fn test_ts_late_ack_keeps_the_rest_of_the_flight_from_going_again() {
    // After a timeout the flight is rewound; once the first segment's late ACK shows
    // the timeout was spurious, the segments after it are not sent again.
    let mut s = socket_established_with_buffer_sizes(2000, 64);
    s.set_timestamps_micros(true);
    s.set_nagle_enabled(false);
    s.remote_win_len = 2000;
    static DATA: [u8; 1000] = [b'x'; 1000];
    s.send_slice(&DATA).unwrap();
    let TestSocket { socket, cx } = &mut s;
    let mss = socket.effective_mss(cx);
    let (first, rest) = DATA.split_at(mss);
    send_data(&mut s, 0, LOCAL_SEQ + 1, first, 0);
    send_data(&mut s, 0, LOCAL_SEQ + 1 + mss, rest, 0);
    send_data(&mut s, 1000, LOCAL_SEQ + 1, first, 1_000_000);
    ack(&mut s, 1300, LOCAL_SEQ + 1 + mss, 0);
    assert_eq!(s.recovery_stats().spurious_retransmits, 1);
    recv_nothing!(s, time 1300);
    ack(&mut s, 1310, LOCAL_SEQ + 1 + 1000, 0);
    assert!(s.tx_buffer.is_empty());
}

#[test]
fn test_ts_reordered_ack_is_no_sample() {
    // An ACK that acknowledges nothing new (reordered behind a later one) takes no
    // sample, though it echoes an older TSval.
    let mut s = socket_ts();
    s.set_nagle_enabled(false);
    s.send_slice(b"abc").unwrap();
    send_data(&mut s, 0, LOCAL_SEQ + 1, b"abc", 0);
    s.send_slice(b"def").unwrap();
    send_data(&mut s, 5, LOCAL_SEQ + 4, b"def", 5_000);
    ack(&mut s, 20, LOCAL_SEQ + 7, 5_000);
    assert_eq!(s.smoothed_rtt(), Some(Duration::from_millis(15)));
    ack(&mut s, 400, LOCAL_SEQ + 4, 0);
    assert_eq!(s.smoothed_rtt(), Some(Duration::from_millis(15)));
    assert_eq!(s.recovery_stats(), RecoveryStats::default());
}

#[test]
fn test_ts_wrap_safe_after_a_long_silence() {
    // 40 minutes of silence: the clock passed 2^31 microseconds, which a peer's PAWS
    // test would take for a TSval older than the last. The TSval moves on by 2^30.
    let mut s = socket_ts();
    s.send_slice(b"abc").unwrap();
    send_data(&mut s, 0, LOCAL_SEQ + 1, b"abc", 0);
    ack(&mut s, 10, LOCAL_SEQ + 4, 0);
    let t = 40 * 60 * 1000;
    s.send_slice(b"def").unwrap();
    let step = 1u32 << 30;
    send_data(&mut s, t, LOCAL_SEQ + 4, b"def", step);
    assert!((step.wrapping_sub(0) as i32) > 0);
    // An echo from before the silence is no sample (it would be 18 minutes); the
    // sample in progress, timed by sequence number, is: 7/8 * 10 ms + 1/8 * 3 ms.
    ack(&mut s, t + 3, LOCAL_SEQ + 7, 0);
    assert_eq!(s.smoothed_rtt(), Some(Duration::from_micros(9_125)));
    s.send_slice(b"ghi").unwrap();
    send_data(&mut s, t + 4, LOCAL_SEQ + 7, b"ghi", step + 4_000);
    ack(&mut s, t + 9, LOCAL_SEQ + 10, step + 4_000);
    // The echo of the new TSval is: 7/8 * 9.125 ms + 1/8 * 5 ms, rounded up.
    assert_eq!(s.smoothed_rtt(), Some(Duration::from_micros(8_610)));
    // The clock runs from the new base.
    s.send_slice(b"jkl").unwrap();
    send_data(&mut s, t + 20, LOCAL_SEQ + 10, b"jkl", step + 20_000);
}

#[test]
fn test_ts_micros_back_after_a_peer_without_timestamps() {
    let mut s = socket_listen();
    s.set_timestamps_micros(true);
    send!(s, TcpRepr {
        control: TcpControl::Syn,
        seq_number: REMOTE_SEQ,
        ack_number: None,
        ..SEND_TEMPL
    });
    assert!(!s.timestamp_enabled());
    recv!(s, [TcpRepr {
        control: TcpControl::Syn,
        seq_number: LOCAL_SEQ,
        ack_number: Some(REMOTE_SEQ + 1),
        max_seg_size: Some(BASE_MSS),
        ..RECV_TEMPL
    }]);
    s.reset();
    assert!(s.timestamp_enabled());
    assert!(s.timestamps_micros());
}

#[test]
fn test_ts_syn_ack_tsval_carries_the_connection_offset() {
    let mut s = socket_listen();
    s.set_timestamps_micros(true);
    send!(s, time 3, TcpRepr {
        control: TcpControl::Syn,
        seq_number: REMOTE_SEQ,
        ack_number: None,
        timestamp: ts(77, 0),
        ..SEND_TEMPL
    });
    assert!(s.timestamp_enabled());
    recv!(s, time 3, [TcpRepr {
        control: TcpControl::Syn,
        seq_number: LOCAL_SEQ,
        ack_number: Some(REMOTE_SEQ + 1),
        max_seg_size: Some(BASE_MSS),
        timestamp: ts(3_000 + LOCAL_SEQ.0 as u32, 77),
        ..RECV_TEMPL
    }]);
    send!(s, time 5, TcpRepr {
        seq_number: REMOTE_SEQ + 1,
        ack_number: Some(LOCAL_SEQ + 1),
        timestamp: ts(78, 3_000 + LOCAL_SEQ.0 as u32),
        ..SEND_TEMPL
    });
    assert_eq!(s.state(), State::Established);
    assert_eq!(s.smoothed_rtt(), Some(Duration::from_millis(2)));
}

#[cfg(feature = "socket-tcp-reno")]
#[test]
fn test_ts_late_ack_undoes_the_window_cut() {
    fn after_timeout(tsecr: u32) -> usize {
        let mut s = socket_ts();
        s.set_congestion_control(CongestionControl::Reno);
        s.send_slice(b"abcdef").unwrap();
        send_data(&mut s, 0, LOCAL_SEQ + 1, b"abcdef", 0);
        send_data(&mut s, 1000, LOCAL_SEQ + 1, b"abcdef", 1_000_000);
        ack(&mut s, 1300, LOCAL_SEQ + 7, tsecr);
        s.congestion_controller.inner().window()
    }
    let fresh = socket_ts().congestion_controller.inner().window();
    // Spurious: the window from before the timeout (grown by the ACK).
    assert!(after_timeout(0) > fresh);
    // Needed: slow start from one segment.
    assert!(after_timeout(1_000_000) <= fresh);
}

#[test]
fn test_ts_d_sack_echo_is_no_sample() {
    // The peer held its ACK and answered the retransmission at once with a D-SACK
    // that echoes it: spurious, but the echo times the quick answer, not the held
    // ACK. The sample is the lower bound spurious-rtt takes (the wait before the
    // resend), not the 3 ms since it.
    let mut s = socket_ts();
    s.send_slice(b"abcdef").unwrap();
    send_data(&mut s, 0, LOCAL_SEQ + 1, b"abcdef", 0);
    send_data(&mut s, 1000, LOCAL_SEQ + 1, b"abcdef", 1_000_000);
    let block = Some(((LOCAL_SEQ + 1).0 as u32, (LOCAL_SEQ + 7).0 as u32));
    let repr = TcpRepr {
        seq_number: REMOTE_SEQ + 1,
        ack_number: Some(LOCAL_SEQ + 7),
        sack_ranges: [block, None, None],
        timestamp: ts(7, 1_000_000),
        ..SEND_TEMPL
    };
    assert_eq!(send(&mut s, Instant::from_millis(1003), &repr), None);
    assert_eq!(s.recovery_stats().spurious_retransmits, 1);
    assert_eq!(s.smoothed_rtt(), Some(Duration::from_millis(1000)));
}

// [xsk-stack patch: rtt-seed]
#[test]
fn test_seed_rtt_raises_the_estimate_and_is_no_sample() {
    let mut s = socket_ts();
    assert_eq!(s.take_rtt_sample(), None);
    // No estimate yet: the seed is one, and the RTO follows it (RFC 6298 2.2).
    s.seed_rtt(Duration::from_millis(200), Duration::from_millis(50));
    assert_eq!(s.smoothed_rtt(), Some(Duration::from_millis(200)));
    assert_eq!(s.retransmission_timeout(), Duration::from_millis(1000));
    s.seed_rtt(Duration::from_millis(300), Duration::from_millis(100));
    assert_eq!(s.retransmission_timeout(), Duration::from_millis(1000));
    assert_eq!(s.take_rtt_sample(), None);
    // A lower seed changes nothing.
    s.seed_rtt(Duration::from_millis(10), Duration::from_millis(1));
    assert_eq!(s.smoothed_rtt(), Some(Duration::from_millis(300)));
    // A sample is taken once.
    s.send_slice(b"abc").unwrap();
    send_data(&mut s, 0, LOCAL_SEQ + 1, b"abc", 0);
    ack(&mut s, 100, LOCAL_SEQ + 4, 0);
    assert_eq!(s.take_rtt_sample(), Some(Duration::from_millis(100)));
    assert_eq!(s.take_rtt_sample(), None);
}

#[test]
fn test_seed_rtt_sets_the_rto_from_the_seed() {
    let mut s = socket_ts();
    s.set_rto_config(RtoConfig {
        min: Duration::from_millis(50),
        max: Duration::from_secs(60),
        initial: Duration::from_secs(1),
    });
    // Below the initial 1 s: the RTO is the seed's, 200 ms + 4 * 50 ms.
    s.seed_rtt(Duration::from_millis(200), Duration::from_millis(50));
    assert_eq!(s.retransmission_timeout(), Duration::from_millis(400));
}

// [xsk-stack patch: probe-rto]
#[test]
fn test_rto_after_probe_waits_at_least_the_setting() {
    // (setting, peer known to hold its ACKs, when the RTO fires): the floor holds only
    // for a peer whose allowance was raised; one that ACKs at once gets the RTO.
    for (after, holds_acks, rto_at) in [(0, false, 100), (200, false, 100), (200, true, 250)] {
        let mut s = socket_established();
        s.set_rto_config(RtoConfig {
            min: Duration::from_millis(50),
            max: Duration::from_secs(60),
            initial: Duration::from_secs(1),
        });
        s.set_tail_loss_probe(Some(TailLossProbe {
            ack_delay: Duration::from_millis(50),
            ack_delay_max: Duration::from_millis(200),
        }));
        s.set_rto_after_probe(Duration::from_millis(after));
        if holds_acks {
            s.set_tail_loss_probe_ack_delay(Duration::from_millis(200));
        }
        s.rtte.sample(5_000);
        s.send_slice(b"abc").unwrap();
        recv!(s, time 0, Ok(TcpRepr {
            seq_number: LOCAL_SEQ + 1,
            ack_number: Some(REMOTE_SEQ + 1),
            payload: &b"abc"[..],
            ..RECV_TEMPL
        }));
        // The probe at the RTO's expiry (50 ms floor, before 2 SRTT + 50 ms), then the
        // RTO again or the setting.
        recv_nothing!(s, time 49);
        recv!(s, time 50, Ok(TcpRepr {
            seq_number: LOCAL_SEQ + 1,
            ack_number: Some(REMOTE_SEQ + 1),
            payload: &b"abc"[..],
            ..RECV_TEMPL
        }));
        recv_nothing!(s, time rto_at - 1);
        recv!(s, time rto_at, Ok(TcpRepr {
            seq_number: LOCAL_SEQ + 1,
            ack_number: Some(REMOTE_SEQ + 1),
            payload: &b"abc"[..],
            ..RECV_TEMPL
        }));
        assert_eq!(s.recovery_stats().rto_retransmits, 1, "after {after}, holds ACKs {holds_acks}");
    }
}

// [xsk-stack patch: eifel]
#[test]
fn test_ts_probe_verdict_on_the_peers_own_data_teaches_no_ack_delay() {
    // Three probes in a row shown spurious by an echo of the original. By ACKs alone,
    // the peer holds its ACKs: the allowance goes up. By segments with data and no
    // D-SACK, the data may be the peer's own retransmission (the first copy, with
    // the ACK, lost), sent before the probe reached it: no lesson.
    for with_data in [false, true] {
        let mut s = socket_ts();
        s.set_ack_delay(None);
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
        let (mut seq, mut rseq) = (LOCAL_SEQ + 1, REMOTE_SEQ + 1);
        for round in 0..3i64 {
            let t = round * 100_000;
            s.send_slice(b"abc").unwrap();
            // The answer, then its probe at 2 SRTT + 5 ms.
            let pto = (s.smoothed_rtt().unwrap() * 2 + Duration::from_millis(5)).total_micros() as i64;
            for at in [t, t + pto] {
                if at > t {
                    recv_nothing(&mut s, Instant::from_micros(at - 1));
                }
                recv(&mut s, Instant::from_micros(at), |r| {
                    let r = r.unwrap();
                    assert_eq!((r.seq_number, r.payload), (seq, &b"abc"[..]), "with data {with_data}, round {round}");
                });
            }
            let payload: &[u8] = if with_data { b"req" } else { b"" };
            let repr = TcpRepr {
                seq_number: rseq,
                ack_number: Some(seq + 3),
                window_len: 2000,
                timestamp: ts(7, t as u32),
                payload,
                ..SEND_TEMPL
            };
            let then = Instant::from_micros(t + pto + 1000);
            assert_eq!(send(&mut s, then, &repr), None);
            seq += 3;
            if with_data {
                rseq += 3;
                recv(&mut s, then, |r| assert_eq!(r.unwrap().ack_number, Some(rseq)));
                let mut buf = [0u8; 3];
                assert_eq!(s.recv_slice(&mut buf), Ok(3));
            }
        }
        assert_eq!(s.recovery_stats().spurious_probes, 3, "with data {with_data}");
        let want = if with_data { 5 } else { 200 };
        assert_eq!(s.tail_loss_probe_ack_delay(), Some(Duration::from_millis(want)), "with data {with_data}");
    }
}
