//! The SACK recovery through the engine: a long answer with losses in it,
//! against the peer engine (whose smoltcp sends SACK blocks), with the
//! recovery on and off.

use std::time::Duration;

use super::recovery_tests::{read_all, recovery, stats, warmed, PORT};
use crate::recovery::{Recovery, RecoveryStats};
use crate::testing::frames::parse_tcp;

/// A 20 KB answer whose 3rd and 9th data segments on the wire are lost; the
/// client (the peer engine) SACKs what follows. Returns how long the whole
/// answer took to arrive and the server's counters.
fn answer_with_two_losses(server: Recovery) -> (Duration, RecoveryStats) {
    let (mut p, ca, cb) = warmed(server, Duration::from_micros(50));
    p.b.send(cb, b"request").unwrap();
    p.settle(10);
    assert_eq!(read_all(&mut p.a, ca), b"request");
    let mut seen = 0;
    p.filter = Some(Box::new(move |frames: Vec<Vec<u8>>| {
        frames
            .into_iter()
            .filter(|f| {
                let Some(s) = parse_tcp(f) else { return true };
                if s.sport != PORT || s.payload.is_empty() {
                    return true;
                }
                seen += 1;
                seen != 3 && seen != 9
            })
            .collect()
    }));
    let answer = vec![7u8; 20_000];
    let mut sent = 0;
    let mut got = 0;
    let step = Duration::from_micros(100);
    let mut took = Duration::ZERO;
    while got < answer.len() && took < Duration::from_secs(2) {
        if sent < answer.len() {
            sent += p.a.send(ca, &answer[sent..]).unwrap();
        }
        p.a.tick();
        p.settle(10);
        got += read_all(&mut p.b, cb).len();
        p.advance(step);
        took += step;
    }
    assert_eq!(got, answer.len(), "the whole answer arrives");
    (took, stats(&p))
}

#[test]
fn losses_in_a_long_answer_are_repaired_without_a_timeout() {
    // The initial window (RFC 6928, 10 segments) puts both losses in one recovery: the
    // first repaired by a fast retransmit, the second by the hole the client's SACK blocks
    // report, no probe and no timeout. (A loss with too few segments after it is the
    // probe's: smoltcp's `test_sack_a_probe_with_a_hole_reported_is_the_hole`.)
    let (took, s) = answer_with_two_losses(recovery(5));
    let seen = (s.fast_retransmits, s.hole_retransmits, s.tail_probes, s.spurious_probes, s.rto_retransmits);
    assert_eq!(seen, (1, 1, 0, 0, 0), "{s:?}");
    assert!(took < Duration::from_millis(10), "took {took:?}");
    // Without it, smoltcp's one fast retransmit per window leaves the second loss to
    // the timeout (50 ms here).
    let (took, s) = answer_with_two_losses(recovery(5).with_sack(false));
    assert_eq!((s.fast_retransmits, s.hole_retransmits, s.rto_retransmits), (1, 0, 1), "{s:?}");
    assert!(took >= Duration::from_millis(50), "took {took:?}");
}
