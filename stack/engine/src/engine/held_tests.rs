//! Retransmissions held while the device's receive queue still holds frames
//! that arrived before the timers came due (`Engine::set_receive_queue`).

use std::time::Duration;

use super::recovery_tests::{data, lost_response, recovery, stats, until_server_sends, warmed};
use crate::recovery::RecoveryStats;

#[test]
fn a_due_probe_waits_until_the_frames_queued_before_it_are_read() {
    let (mut p, ca, cb) = warmed(recovery(5), Duration::from_micros(200));
    lost_response(&mut p, ca, cb);
    // The probe comes due while 100 frames wait (positions 1,000 to 1,100): held
    // until the reading passes 1,100, however long that takes.
    p.a.engine.set_receive_queue(Some((1_000, 1_100)));
    assert!(until_server_sends(&mut p, Duration::from_millis(1), Duration::from_millis(100)).is_none());
    assert_eq!(stats(&p), RecoveryStats::default());
    // More arrived meanwhile (to 1,300); at 1,099 the mark is not passed yet.
    p.a.engine.set_receive_queue(Some((1_099, 1_300)));
    p.a.tick();
    assert_eq!(data(&p.a.take_sent()), 0);
    assert_eq!(p.a.engine.stats().retransmit_waits, 1);
    // Past it: the probe goes, though frames still wait.
    p.a.engine.set_receive_queue(Some((1_100, 1_300)));
    p.a.tick();
    assert_eq!(data(&p.a.take_sent()), 1);
    assert_eq!(stats(&p), RecoveryStats { tail_probes: 1, ..Default::default() });
}

#[test]
fn a_drained_queue_releases_held_retransmissions_at_once() {
    let (mut p, ca, cb) = warmed(recovery(5), Duration::from_micros(200));
    lost_response(&mut p, ca, cb);
    // Positions wrap: 10 frames from u32::MAX - 5.
    p.a.engine.set_receive_queue(Some((u32::MAX - 5, 4)));
    assert!(until_server_sends(&mut p, Duration::from_millis(1), Duration::from_millis(60)).is_none());
    p.a.engine.set_receive_queue(Some((3, 4)));
    p.a.tick();
    assert_eq!(data(&p.a.take_sent()), 0, "one more frame to read");
    p.a.engine.set_receive_queue(None);
    p.a.tick();
    assert!(data(&p.a.take_sent()) >= 1);
}
