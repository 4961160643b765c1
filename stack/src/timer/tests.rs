//! The timer's policy.

use super::*;
use std::time::Instant;

/// A mio wait with a safety limit (a test must not hang when the timer fails to fire).
fn wait(poll: &mut mio::Poll, events: &mut mio::Events, to: Option<Duration>) {
    poll.poll(events, Some(to.unwrap_or(Duration::from_secs(5)))).unwrap();
}

/// A timerfd timer registered with a fresh mio poll as token 7.
fn registered() -> (mio::Poll, mio::Events, WaitTimer) {
    let poll = mio::Poll::new().unwrap();
    let t = WaitTimer::new().unwrap();
    t.register(poll.registry(), mio::Token(7)).unwrap();
    (poll, mio::Events::with_capacity(4), t)
}

#[test]
fn wakes_epoll_on_time_without_a_timeout_of_its_own() {
    let (mut poll, mut events, t) = registered();
    let mut best = Duration::MAX;
    for _ in 0..20 {
        let start = Instant::now();
        assert_eq!(t.prepare(Some(Duration::from_micros(300))), None, "the timer ends the wait");
        wait(&mut poll, &mut events, None);
        assert!(events.iter().any(|e| e.token() == mio::Token(7)), "the timer did not fire");
        assert!(start.elapsed() >= Duration::from_micros(300), "woke after {:?}", start.elapsed());
        best = best.min(start.elapsed());
        t.clear();
    }
    // On a quiet machine this is ~0.3 ms; it must at least beat poll(2)'s 1 ms rounding.
    assert!(best < Duration::from_micros(1000), "best wait {best:?}");
}

#[test]
fn zero_and_no_limit_need_no_timer() {
    let t = WaitTimer::new().unwrap();
    assert_eq!(t.prepare(None), None);
    assert!(t.wanted_fd().is_none());
    assert_eq!(t.prepare(Some(Duration::ZERO)), Some(Duration::ZERO));
    assert!(t.wanted_fd().is_none());
    // Short or long, whole milliseconds or not: the timer.
    for d in [Duration::from_micros(700), Duration::from_millis(3), Duration::from_secs(2), Duration::MAX] {
        assert_eq!(t.prepare(Some(d)), None, "{d:?}");
        assert!(t.wanted_fd().is_some(), "{d:?}");
    }
    assert_eq!(t.prepare(None), None);
    assert!(t.wanted_fd().is_none());
}

#[test]
fn an_expiry_is_kept_in_the_second_half_of_the_wait_and_pushed_from_the_first() {
    let (mut poll, mut events, t) = registered();
    let now = monotonic_ns();
    t.prepare_at(Some(now), Some(Duration::from_millis(30)));
    let armed = t.armed.get();
    assert_eq!(armed, Some(now + 30_000_000));
    // A deadline that moved later, by less than half of the wait: the expiry stays (it
    // wakes the loop a little early, which then asks again).
    assert_eq!(t.prepare_at(Some(now + 5_000_000), Some(Duration::from_millis(40))), None);
    assert_eq!(t.armed.get(), armed);
    // By more: it would wake the loop for nothing; pushed.
    assert_eq!(t.prepare_at(Some(now + 5_000_000), Some(Duration::from_millis(60))), None);
    assert_eq!(t.armed.get(), Some(now + 65_000_000));
    // An earlier deadline re-arms, and the timer ends the wait then.
    let start = Instant::now();
    t.prepare(Some(Duration::from_micros(1_500)));
    wait(&mut poll, &mut events, Some(Duration::from_millis(30)));
    assert!(events.iter().any(|e| e.token() == mio::Token(7)), "the earlier deadline did not fire");
    assert!(start.elapsed() < Duration::from_millis(25), "woke after {:?}", start.elapsed());
    t.clear();
    assert_eq!(t.armed.get(), None);
}

#[test]
fn a_waker_makes_every_sleep_wait_on_the_timer() {
    let (mut poll, mut events, t) = registered();
    assert_eq!(t.prepare(None), None);
    assert!(t.wanted_fd().is_none());
    let w = t.waker();
    assert_eq!(t.prepare(None), None);
    assert!(t.wanted_fd().is_some(), "a sleep with no limit must still see wakes");
    // A wake after the timer was armed ends the wait; one before is seen by take_wake.
    t.prepare(Some(Duration::from_secs(10)));
    assert!(!t.take_wake());
    w.wake();
    wait(&mut poll, &mut events, None);
    assert!(events.iter().any(|e| e.token() == mio::Token(7)), "the wake did not end the wait");
    t.clear();
    assert!(t.take_wake());
    w.wake();
    t.prepare(Some(Duration::from_secs(10)));
    assert!(t.take_wake(), "a wake before arming was lost");
    // Zero waits need no timer, waker or not.
    assert_eq!(t.prepare(Some(Duration::ZERO)), Some(Duration::ZERO));
    assert!(t.wanted_fd().is_none());
}

#[test]
fn the_same_deadline_asked_again_does_not_re_arm() {
    // A caller with a fixed deadline asks for what is left of it on every sleep; its clock
    // readings differ by a little each time.
    let t = WaitTimer::new().unwrap();
    let now = monotonic_ns();
    let deadline = now + 60_000_000_000;
    t.prepare_at(Some(now), Some(Duration::from_nanos(deadline - now)));
    let armed = t.armed.get();
    assert_eq!(armed, Some(deadline));
    for late in [1_000, 3_000_000, 10_000_000_000] {
        // Up to a few microseconds off, either way.
        for skew in [0u64, 2_000] {
            let at = now + late;
            t.prepare_at(Some(at), Some(Duration::from_nanos(deadline - at - skew)));
            assert_eq!(t.armed.get(), armed, "re-armed at +{late} ns, {skew} ns early");
        }
    }
    // Much earlier: re-armed.
    t.prepare_at(Some(now), Some(Duration::from_secs(30)));
    assert_eq!(t.armed.get(), Some(now + 30_000_000_000));
    // Later, but the armed expiry still in the second half: kept.
    t.prepare_at(Some(now), Some(Duration::from_secs(40)));
    assert_eq!(t.armed.get(), Some(now + 30_000_000_000));
    // An expiry in the past is not relied on.
    let later = now + 31_000_000_000;
    t.prepare_at(Some(later), Some(Duration::from_secs(1)));
    assert_eq!(t.armed.get(), Some(later + 1_000_000_000));
}
