//! Loss recovery through the engine, in memory with a scripted wire: the
//! tail-loss probe, the retransmission timer's floor and backoff, Karn's
//! rule, microsecond RTT samples, a peer that delays its ACKs, and the
//! spurious-retransmission counters (the peer engine sends D-SACKs).

use std::net::SocketAddrV4;
use std::time::Duration;

use bytes::BytesMut;
use smoltcp::socket::tcp;

use crate::conn::{ConnId, Event};
use crate::testing::frames::parse_tcp;
use crate::testing::{config, Pair};
use crate::recovery::{Recovery, RecoveryStats};

pub(super) const PORT: u16 = 7;

fn pair(server: Recovery) -> Pair {
    let mut a = config(Pair::A);
    a.tcp.recovery = server;
    Pair::with(a, config(Pair::B))
}

fn connect(p: &mut Pair) -> (ConnId, ConnId) {
    p.a.listen(PORT).unwrap();
    let cb = p.b.connect(SocketAddrV4::new(Pair::A, PORT)).unwrap();
    let (ea, eb) = p.settle(20);
    assert!(eb.contains(&Event::Connected(cb)), "client events {eb:?}");
    let ca = ea
        .iter()
        .find_map(|e| if let Event::Accepted { conn, .. } = e { Some(*conn) } else { None })
        .expect("accepted");
    (ca, cb)
}

pub(super) fn read_all(t: &mut crate::testing::MemTransport, c: ConnId) -> Vec<u8> {
    let mut b = BytesMut::new();
    while t.recv(c, &mut b).unwrap() > 0 {}
    b.to_vec()
}

fn srtt(p: &Pair, c: ConnId) -> Option<Duration> {
    let conn = p.a.engine.conns.get(c).unwrap();
    let s = p.a.engine.buckets[conn.bucket as usize].sockets.get::<tcp::Socket>(conn.handle);
    s.smoothed_rtt().map(Into::into)
}

pub(super) fn stats(p: &Pair) -> RecoveryStats {
    p.a.engine.stats().recovery
}

/// Segments with payload among `frames`.
pub(super) fn data(frames: &[Vec<u8>]) -> usize {
    frames.iter().filter_map(|f| parse_tcp(f)).filter(|s| !s.payload.is_empty()).count()
}

/// The client sends a request and the server answers, its answer reaching the
/// client `rtt` later; the client's ACK comes straight back.
fn exchange(p: &mut Pair, ca: ConnId, cb: ConnId, rtt: Duration) {
    p.b.send(cb, b"request").unwrap();
    p.settle(10);
    assert_eq!(read_all(&mut p.a, ca), b"request");
    p.a.send(ca, b"response").unwrap();
    p.a.flush().unwrap();
    p.advance(rtt);
    p.settle(10);
    assert_eq!(read_all(&mut p.b, cb), b"response");
}

/// The server answers a request and the answer is lost on the wire.
pub(super) fn lost_response(p: &mut Pair, ca: ConnId, cb: ConnId) {
    p.b.send(cb, b"request").unwrap();
    p.settle(10);
    assert_eq!(read_all(&mut p.a, ca), b"request");
    p.a.send(ca, b"response").unwrap();
    p.a.flush().unwrap();
    assert_eq!(data(&p.a.take_sent()), 1, "the response");
}

/// Runs the server's timers in `step`s until it sends data, at most `limit`;
/// returns how long that took and what it sent.
pub(super) fn until_server_sends(p: &mut Pair, step: Duration, limit: Duration) -> Option<(Duration, Vec<Vec<u8>>)> {
    let mut waited = Duration::ZERO;
    while waited < limit {
        p.advance(step);
        waited += step;
        p.a.tick();
        let out = p.a.take_sent();
        if data(&out) > 0 {
            return Some((waited, out));
        }
        assert!(out.is_empty() || data(&out) == 0);
    }
    None
}

/// A connected pair whose server has measured 16 round trips of `rtt`.
pub(super) fn warmed(server: Recovery, rtt: Duration) -> (Pair, ConnId, ConnId) {
    let mut p = pair(server);
    let (ca, cb) = connect(&mut p);
    for _ in 0..16 {
        exchange(&mut p, ca, cb, rtt);
    }
    (p, ca, cb)
}

pub(super) fn recovery(ack_delay_ms: u64) -> Recovery {
    Recovery { ack_delay: Duration::from_millis(ack_delay_ms), ..Recovery::default() }
}

#[test]
fn sub_millisecond_rtt_samples_count() {
    let (p, ca, _) = warmed(Recovery::default(), Duration::from_micros(200));
    let s = srtt(&p, ca).expect("measured");
    // In whole milliseconds every sample was 0.
    assert!(s >= Duration::from_micros(150) && s <= Duration::from_micros(250), "srtt {s:?}");
}

#[test]
fn a_lost_response_is_recovered_by_the_probe_at_the_pto() {
    let (mut p, ca, cb) = warmed(recovery(5), Duration::from_micros(200));
    let srtt = srtt(&p, ca).unwrap();
    lost_response(&mut p, ca, cb);
    let (at, out) = until_server_sends(&mut p, Duration::from_micros(100), Duration::from_secs(2)).expect("probe");
    let pto = srtt * 2 + Duration::from_millis(5);
    assert!(at >= pto && at <= pto + Duration::from_micros(200), "probe after {at:?}, PTO {pto:?}");
    assert_eq!(stats(&p), RecoveryStats { tail_probes: 1, ..Default::default() });
    // The probe carries the response; the client's ACK ends the episode.
    p.b.inbox.extend(out);
    p.settle(10);
    assert_eq!(read_all(&mut p.b, cb), b"response");
    assert_eq!(stats(&p), RecoveryStats { tail_probes: 1, ..Default::default() }, "not spurious");
    // And nothing more is sent: the RTO was disarmed by the ACK.
    assert!(until_server_sends(&mut p, Duration::from_millis(10), Duration::from_secs(3)).is_none());
}

#[test]
fn a_lost_probe_is_recovered_by_the_rto_which_backs_off() {
    let r = recovery(5);
    let (mut p, ca, cb) = warmed(r, Duration::from_micros(200));
    lost_response(&mut p, ca, cb);
    let step = Duration::from_micros(100);
    let (_, _) = until_server_sends(&mut p, step, Duration::from_secs(2)).expect("probe, lost");
    // The RTO restarted at the probe: the floor (srtt + 4 rttvar is far below it).
    let (first, _) = until_server_sends(&mut p, step, Duration::from_secs(2)).expect("RTO, lost");
    assert!(first >= r.rto_min && first <= r.rto_min + Duration::from_millis(1), "first RTO after {first:?}");
    let (second, out) = until_server_sends(&mut p, step, Duration::from_secs(2)).expect("backed-off RTO");
    assert!(second >= first * 2 && second <= first * 2 + Duration::from_millis(1), "{first:?} then {second:?}");
    assert_eq!(stats(&p), RecoveryStats { tail_probes: 1, rto_retransmits: 2, ..Default::default() });
    p.b.inbox.extend(out);
    p.settle(10);
    assert_eq!(read_all(&mut p.b, cb), b"response");
}

#[test]
fn the_rto_floor_and_karns_rule_hold() {
    let r = Recovery { tail_probe: false, ..Recovery::default() };
    let (mut p, ca, cb) = warmed(r, Duration::from_micros(100));
    let before = srtt(&p, ca).unwrap();
    lost_response(&mut p, ca, cb);
    let step = Duration::from_micros(100);
    let (at, out) = until_server_sends(&mut p, step, Duration::from_secs(2)).expect("RTO");
    assert!(at >= r.rto_min && at <= r.rto_min + step * 2, "RTO after {at:?}, floor {:?}", r.rto_min);
    // The retransmission's ACK comes 30 ms later: ambiguous, so no sample.
    p.advance(Duration::from_millis(30));
    p.b.inbox.extend(out);
    p.settle(10);
    assert_eq!(read_all(&mut p.b, cb), b"response");
    assert_eq!(srtt(&p, ca).unwrap(), before, "Karn: no sample from a retransmitted segment");
    assert_eq!(stats(&p), RecoveryStats { rto_retransmits: 1, ..Default::default() });
}

/// A request goes to the server and its response to the client, whose
/// answer (an ACK, or a request carrying it) has not left yet.
fn response_reaches_client(p: &mut Pair, ca: ConnId, cb: ConnId) {
    p.b.send(cb, b"request").unwrap();
    p.settle(10);
    assert_eq!(read_all(&mut p.a, ca), b"request");
    p.a.send(ca, b"response").unwrap();
    p.a.flush().unwrap();
    let resp = p.a.take_sent();
    p.b.inbox.extend(resp);
    let mut ev = Vec::new();
    p.b.poll(&mut ev, None).unwrap();
    assert_eq!(read_all(&mut p.b, cb), b"response");
}

/// The client holds its ACK of each response for `delay` (as Linux does when
/// it has nothing to send); returns the server's data segments sent meanwhile.
fn delayed_ack_exchange(p: &mut Pair, ca: ConnId, cb: ConnId, delay: Duration) -> usize {
    let mut ev = Vec::new();
    response_reaches_client(p, ca, cb);
    p.b.flush().unwrap();
    let ack = p.b.take_sent();
    // Meanwhile the server's timers run; whatever it sends reaches the client.
    let mut sent = 0;
    let step = Duration::from_millis(1);
    let mut waited = Duration::ZERO;
    while waited < delay {
        p.advance(step);
        waited += step;
        p.a.tick();
        let out = p.a.take_sent();
        sent += data(&out);
        p.b.inbox.extend(out);
        p.b.poll(&mut ev, None).unwrap();
        p.b.flush().unwrap();
        // The client's answers to a probe (a D-SACK) go back at once.
        let back = p.b.take_sent();
        p.a.inbox.extend(back);
        p.a.poll(&mut ev, None).unwrap();
    }
    p.a.inbox.extend(ack);
    p.settle(10);
    sent
}

#[test]
fn a_delayed_ack_peer_draws_no_probe_under_the_default_allowance() {
    let (mut p, ca, cb) = warmed(Recovery::default(), Duration::from_micros(100));
    // Linux's delayed ACK at small RTTs: 40 ms, a few more with timer slack.
    for i in 0..30 {
        let sent = delayed_ack_exchange(&mut p, ca, cb, Duration::from_millis(44));
        assert_eq!(sent, 0, "exchange {i}: the server sent data while the ACK was delayed");
    }
    assert_eq!(stats(&p), RecoveryStats::default());
}

#[test]
fn a_spurious_probe_is_counted_and_raises_the_allowance_for_the_peer() {
    let (mut p, ca, cb) = warmed(recovery(2), Duration::from_micros(100));
    // Three probes in a row the client had the response for (its D-SACKs say so):
    // only a streak is taken for a peer that delays its ACKs.
    for i in 0..3 {
        assert_eq!(delayed_ack_exchange(&mut p, ca, cb, Duration::from_millis(40)), 1, "probe {i}");
    }
    assert_eq!(stats(&p), RecoveryStats { tail_probes: 3, spurious_probes: 3, ..Default::default() });
    for i in 0..10 {
        assert_eq!(delayed_ack_exchange(&mut p, ca, cb, Duration::from_millis(40)), 0, "exchange {i}");
    }
    // A new connection to the same peer starts with what this one learned.
    p.b.close(cb);
    p.settle(20);
    p.a.close(ca);
    p.settle(20);
    let cb = p.b.connect(SocketAddrV4::new(Pair::A, PORT)).unwrap();
    let (ea, _) = p.settle(20);
    let ca = ea
        .iter()
        .find_map(|e| if let Event::Accepted { conn, .. } = e { Some(*conn) } else { None })
        .expect("accepted");
    for _ in 0..4 {
        exchange(&mut p, ca, cb, Duration::from_micros(100));
    }
    assert_eq!(delayed_ack_exchange(&mut p, ca, cb, Duration::from_millis(40)), 0);
    assert_eq!(stats(&p), RecoveryStats { tail_probes: 3, spurious_probes: 3, ..Default::default() });
}

#[test]
fn a_spurious_rto_is_counted() {
    let r = Recovery { tail_probe: false, ..Recovery::default() };
    let (mut p, ca, cb) = warmed(r, Duration::from_micros(100));
    // The ACK is held past the RTO (50 ms): the retransmission was not needed.
    assert_eq!(delayed_ack_exchange(&mut p, ca, cb, Duration::from_millis(60)), 1);
    assert_eq!(stats(&p), RecoveryStats { rto_retransmits: 1, spurious_retransmits: 1, ..Default::default() });
}

#[test]
fn upstream_smoltcp_behaviour_is_one_second() {
    let r = Recovery::smoltcp();
    let mut p = pair(r);
    let (ca, cb) = connect(&mut p);
    for _ in 0..4 {
        exchange(&mut p, ca, cb, Duration::from_micros(100));
    }
    lost_response(&mut p, ca, cb);
    let (at, _) = until_server_sends(&mut p, Duration::from_millis(1), Duration::from_secs(3)).expect("RTO");
    assert!(at >= Duration::from_secs(1) && at <= Duration::from_millis(1002), "{at:?}");
}

#[test]
fn with_the_default_allowance_the_probe_goes_out_instead_of_the_rto() {
    let r = Recovery::default();
    let (mut p, ca, cb) = warmed(r, Duration::from_micros(100));
    lost_response(&mut p, ca, cb);
    let (at, _) = until_server_sends(&mut p, Duration::from_micros(100), Duration::from_secs(2)).expect("probe");
    assert!(at <= r.rto_min + Duration::from_millis(1), "{at:?}");
    assert_eq!(stats(&p), RecoveryStats { tail_probes: 1, ..Default::default() });
}

#[test]
fn a_probe_made_spurious_by_a_lost_request_does_not_raise_the_allowance() {
    let (mut p, ca, cb) = warmed(recovery(5), Duration::from_micros(100));
    // The response arrives; the client's next request, which carries its ACK, is lost.
    let mut ev = Vec::new();
    response_reaches_client(&mut p, ca, cb);
    p.b.send(cb, b"next").unwrap();
    p.b.flush().unwrap();
    assert_eq!(data(&p.b.take_sent()), 1, "the lost request");
    // The server probes; the client answers with a D-SACK, past the hole its request left.
    let (_, probe) = until_server_sends(&mut p, Duration::from_micros(100), Duration::from_secs(1)).expect("probe");
    p.b.inbox.extend(probe);
    p.b.poll(&mut ev, None).unwrap();
    p.b.flush().unwrap();
    let back = p.b.take_sent();
    assert_eq!(data(&back), 0);
    p.a.inbox.extend(back);
    p.a.poll(&mut ev, None).unwrap();
    assert_eq!(stats(&p), RecoveryStats { tail_probes: 1, spurious_probes: 1, ..Default::default() });
    // A lost ACK, not a delaying peer: the allowance stays at 5 ms.
    let conn = p.a.engine.conns.get(ca).unwrap();
    let s = p.a.engine.buckets[conn.bucket as usize].sockets.get::<tcp::Socket>(conn.handle);
    assert_eq!(s.tail_loss_probe_ack_delay(), Some(smoltcp::time::Duration::from_millis(5)));
}

#[test]
fn a_deadline_moved_later_is_not_a_wake_up_at_the_old_one() {
    let (mut p, ca, cb) = warmed(Recovery::default(), Duration::from_micros(100));
    // A response whose ACK has not come arms the probe (at most the RTO, 50 ms, out).
    p.b.send(cb, b"request").unwrap();
    p.settle(10);
    read_all(&mut p.a, ca);
    p.a.send(ca, b"response").unwrap();
    p.a.flush().unwrap();
    let first = p.a.engine.poll_at().expect("a timer");
    // 20 ms later the ACK and the next request come, and the next response goes out:
    // the deadline moved 20 ms later.
    p.advance(Duration::from_millis(20));
    p.settle(10);
    assert_eq!(read_all(&mut p.b, cb), b"response");
    p.b.send(cb, b"request").unwrap();
    p.settle(10);
    read_all(&mut p.a, ca);
    p.a.send(ca, b"response").unwrap();
    p.a.flush().unwrap();
    let next = p.a.engine.poll_at().expect("a timer");
    let moved: Duration = (next - first).into();
    assert!(moved >= Duration::from_millis(19), "the driver would wake at the old deadline: {first} then {next}");
}

#[test]
fn a_probe_that_recovers_a_loss_resets_the_spurious_streak() {
    let (mut p, ca, cb) = warmed(recovery(2), Duration::from_micros(100));
    // Two spurious probes, then one that recovers a lost response, then two spurious
    // again: never three in a row, so the allowance stays short.
    for round in 0..2 {
        for i in 0..2 {
            assert_eq!(delayed_ack_exchange(&mut p, ca, cb, Duration::from_millis(40)), 1, "{round}/{i}");
        }
        lost_response(&mut p, ca, cb);
        let (_, out) = until_server_sends(&mut p, Duration::from_micros(100), Duration::from_secs(1)).expect("probe");
        p.b.inbox.extend(out);
        p.settle(10);
        assert_eq!(read_all(&mut p.b, cb), b"response");
    }
    assert_eq!(stats(&p), RecoveryStats { tail_probes: 6, spurious_probes: 4, ..Default::default() });
    let conn = p.a.engine.conns.get(ca).unwrap();
    let s = p.a.engine.buckets[conn.bucket as usize].sockets.get::<tcp::Socket>(conn.handle);
    assert_eq!(s.tail_loss_probe_ack_delay(), Some(smoltcp::time::Duration::from_millis(2)));
}

/// A client that ACKs every response `delay` late (an overloaded Linux peer: its
/// delayed ACK can reach 200 ms) after a handshake and warm-up at 100 us: the
/// server's data segments sent while it waited, per exchange.
fn late_acks(server: Recovery, delay: Duration, exchanges: usize) -> (Vec<usize>, RecoveryStats) {
    let (mut p, ca, cb) = warmed(server, Duration::from_micros(100));
    let sent = (0..exchanges).map(|_| delayed_ack_exchange(&mut p, ca, cb, delay)).collect();
    (sent, stats(&p))
}

#[test]
fn a_peer_whose_acks_come_late_stops_drawing_probes() {
    // Karn's rule keeps no sample of a segment sent twice, so if every response is
    // probed before its ACK the RTT never learns the delay and every response is
    // sent twice for good. A retransmission found spurious shows the RTT was at
    // least as long as the wait before it: that lower bound is a sample.
    let (sent, st) = late_acks(Recovery::default(), Duration::from_millis(150), 30);
    assert!(sent[20..].iter().all(|&n| n == 0), "still retransmitting: {sent:?} {st:?}");
    assert!(st.tail_probes + st.rto_retransmits <= 8, "{sent:?} {st:?}");
}

#[test]
fn a_peer_whose_acks_come_late_stops_drawing_rtos() {
    let r = Recovery { tail_probe: false, ..Recovery::default() };
    let (sent, st) = late_acks(r, Duration::from_millis(150), 30);
    assert!(sent[20..].iter().all(|&n| n == 0), "still retransmitting: {sent:?} {st:?}");
    assert!(st.rto_retransmits <= 8, "{sent:?} {st:?}");
}

/// A response lost on the wire, recovered by the probe (a needed retransmission), whose
/// ACK comes back one `rtt` after the probe went out.
fn needed_probe(p: &mut Pair, ca: ConnId, cb: ConnId, rtt: Duration) {
    lost_response(p, ca, cb);
    let (_, out) = until_server_sends(p, Duration::from_micros(100), Duration::from_secs(2)).expect("probe");
    p.advance(rtt);
    p.b.inbox.extend(out);
    p.settle(10);
    assert_eq!(read_all(&mut p.b, cb), b"response");
    assert_eq!(stats(p), RecoveryStats { tail_probes: 1, ..Default::default() }, "a needed probe");
}

#[test]
fn after_a_needed_probe_the_fast_path_takes_the_connection_again() {
    let rtt = Duration::from_micros(200);
    let (mut p, ca, cb) = warmed(recovery(5), rtt);
    needed_probe(&mut p, ca, cb, rtt);
    // The next exchange's request still finds the verdict open (a D-SACK could yet say the
    // probe was not needed); the ACK of its response acknowledges data sent after the probe
    // and closes it. No clock is needed for that.
    exchange(&mut p, ca, cb, rtt);
    let before = p.a.engine.stats().fast_path;
    for _ in 0..10 {
        exchange(&mut p, ca, cb, rtt);
    }
    let taken = p.a.engine.stats().fast_path - before;
    // Each exchange brings the server a request and the ACK of its response.
    assert!(taken >= 20, "the server took {taken} of the 20 segments of 10 exchanges on the fast path");
    assert_eq!(stats(&p), RecoveryStats { tail_probes: 1, ..Default::default() });
}

#[test]
fn after_a_needed_probe_a_sender_with_nothing_new_gets_the_fast_path_back_an_rto_later() {
    let rtt = Duration::from_micros(200);
    let (mut p, ca, cb) = warmed(recovery(5), rtt);
    needed_probe(&mut p, ca, cb, rtt);
    // From now on only the client sends: nothing the server sends after the probe is ever
    // acknowledged, so the verdict closes by the clock.
    let upload = |p: &mut Pair| {
        let before = p.a.engine.stats().fast_path;
        for _ in 0..10 {
            p.b.send(cb, b"upload").unwrap();
            p.b.flush().unwrap();
            p.settle(10);
            assert_eq!(read_all(&mut p.a, ca), b"upload");
        }
        p.a.engine.stats().fast_path - before
    };
    assert_eq!(upload(&mut p), 0, "within an RTO of the probe the verdict is open");
    p.advance(Duration::from_millis(300));
    // The first segment closes it on the general path, the rest take the fast path.
    assert!(upload(&mut p) >= 9);
    assert_eq!(stats(&p), RecoveryStats { tail_probes: 1, ..Default::default() });
}

#[test]
fn a_d_sack_after_the_held_ack_of_the_original_still_marks_the_probe_spurious() {
    let (mut p, ca, cb) = warmed(recovery(2), Duration::from_micros(100));
    // The client has the response and holds its ACK; the server's probe goes out.
    response_reaches_client(&mut p, ca, cb);
    p.b.flush().unwrap();
    let held = p.b.take_sent();
    let (_, probe) = until_server_sends(&mut p, Duration::from_millis(1), Duration::from_secs(1)).expect("probe");
    // The held ACK (of all the probe carries) reaches the server first, then the probe
    // reaches the client, whose D-SACK comes back: it must still be judged.
    p.advance(Duration::from_micros(100));
    p.a.inbox.extend(held);
    let mut ev = Vec::new();
    p.a.poll(&mut ev, None).unwrap();
    p.b.inbox.extend(probe);
    p.b.poll(&mut ev, None).unwrap();
    p.b.flush().unwrap();
    let dsack = p.b.take_sent();
    assert!(!dsack.is_empty(), "the client answers the duplicate");
    p.advance(Duration::from_micros(100));
    p.a.inbox.extend(dsack);
    p.settle(10);
    assert_eq!(stats(&p), RecoveryStats { tail_probes: 1, spurious_probes: 1, ..Default::default() });
}

/// Both ends offer microsecond timestamps; the server recovers as `server`.
fn warmed_ts(server: Recovery, rtt: Duration) -> (Pair, ConnId, ConnId) {
    let mut a = config(Pair::A);
    a.tcp.recovery = server.with_timestamps(true);
    let mut b = config(Pair::B);
    b.tcp.recovery = Recovery::default().with_timestamps(true);
    let mut p = Pair::with(a, b);
    let (ca, cb) = connect(&mut p);
    for _ in 0..16 {
        exchange(&mut p, ca, cb, rtt);
    }
    (p, ca, cb)
}

fn ts_on(p: &Pair, c: ConnId) -> bool {
    let conn = p.a.engine.conns.get(c).unwrap();
    p.a.engine.buckets[conn.bucket as usize].sockets.get::<tcp::Socket>(conn.handle).timestamp_enabled()
}

/// A client whose receive path is backlogged for `delay` (an overloaded host): the
/// response and whatever the server sends meanwhile reach it together; it ACKs the
/// response (a Linux client in quick-ACK mode, early in a connection, at once) and
/// answers each duplicate with a D-SACK, in that order. Returns the server's data
/// segments sent meanwhile.
fn backlogged_exchange(p: &mut Pair, ca: ConnId, cb: ConnId, delay: Duration) -> usize {
    let mut ev = Vec::new();
    p.b.send(cb, b"request").unwrap();
    p.settle(10);
    assert_eq!(read_all(&mut p.a, ca), b"request");
    p.a.send(ca, b"response").unwrap();
    p.a.flush().unwrap();
    let response = p.a.take_sent();
    let (waited, mut again) = (Duration::ZERO, Vec::new());
    let step = Duration::from_millis(1);
    let mut waited = waited;
    while waited < delay {
        p.advance(step);
        waited += step;
        p.a.tick();
        again.extend(p.a.take_sent());
    }
    let sent = data(&again);
    p.b.inbox.extend(response);
    p.b.poll(&mut ev, None).unwrap();
    p.b.flush().unwrap();
    let mut back = p.b.take_sent();
    p.b.inbox.extend(again);
    p.b.poll(&mut ev, None).unwrap();
    p.b.flush().unwrap();
    back.extend(p.b.take_sent());
    assert_eq!(read_all(&mut p.b, cb), b"response");
    p.a.inbox.extend(back);
    p.settle(10);
    sent
}

#[test]
fn with_timestamps_a_late_ack_shows_the_delay_at_the_first_timeout() {
    // The client's backlog holds everything 120 ms, past the 50 ms floor. Its ACK
    // echoes the original's TSval: the timeout was spurious (Eifel) and the echo is
    // a sample of the whole delay, so the next responses wait for their ACKs.
    let r = Recovery { tail_probe: false, ..Recovery::default() };
    let (mut p, ca, cb) = warmed_ts(r, Duration::from_micros(100));
    assert!(ts_on(&p, ca));
    let sent: Vec<usize> =
        (0..20).map(|_| backlogged_exchange(&mut p, ca, cb, Duration::from_millis(120))).collect();
    let st = stats(&p);
    assert_eq!(sent[0], 1, "{sent:?}");
    assert!(sent[1..].iter().all(|&n| n == 0), "{sent:?} {st:?}");
    assert_eq!(st, RecoveryStats { rto_retransmits: 1, spurious_retransmits: 1, ..Default::default() });
    assert!(srtt(&p, ca).unwrap() > Duration::from_millis(100), "{:?}", srtt(&p, ca));
    // Without timestamps the D-SACK shows only that the delay passed the wait.
    let (mut p, ca, cb) = warmed(r, Duration::from_micros(100));
    let sent: Vec<usize> =
        (0..20).map(|_| backlogged_exchange(&mut p, ca, cb, Duration::from_millis(120))).collect();
    assert!(sent.iter().sum::<usize>() > 1, "{sent:?}");
}

#[test]
fn with_timestamps_a_held_ack_still_stops_drawing_probes() {
    // A peer that holds its ACK and answers the probe first with a D-SACK echoing the
    // probe: that echo is no sample of the delay; the D-SACK's verdict still teaches it.
    let (mut p, ca, cb) = warmed_ts(Recovery::default(), Duration::from_micros(100));
    let sent: Vec<usize> =
        (0..30).map(|_| delayed_ack_exchange(&mut p, ca, cb, Duration::from_millis(150))).collect();
    let st = stats(&p);
    assert!(sent[20..].iter().all(|&n| n == 0), "still retransmitting: {sent:?} {st:?}");
    assert!(st.tail_probes + st.rto_retransmits <= 8, "{sent:?} {st:?}");
}

#[test]
fn with_timestamps_a_lost_response_is_still_recovered_by_the_probe() {
    let rtt = Duration::from_micros(200);
    let (mut p, ca, cb) = warmed_ts(recovery(5), rtt);
    lost_response(&mut p, ca, cb);
    let (waited, out) = until_server_sends(&mut p, Duration::from_micros(100), Duration::from_secs(2)).expect("probe");
    assert!(waited < Duration::from_millis(10), "{waited:?}");
    p.advance(rtt);
    p.b.inbox.extend(out);
    p.settle(10);
    assert_eq!(read_all(&mut p.b, cb), b"response");
    // The ACK echoes the probe: it was needed.
    assert_eq!(stats(&p), RecoveryStats { tail_probes: 1, ..Default::default() });
    assert!(srtt(&p, ca).unwrap() < Duration::from_millis(1), "{:?}", srtt(&p, ca));
}

#[test]
fn a_peer_without_timestamps_keeps_the_fast_path() {
    // The server offers timestamps, the client does not: none are used, and the
    // segments take the fast path as before.
    let mut a = config(Pair::A);
    a.tcp.recovery = Recovery::default().with_timestamps(true);
    let mut p = Pair::with(a, config(Pair::B));
    let (ca, cb) = connect(&mut p);
    assert!(!ts_on(&p, ca));
    let before = p.a.engine.stats().fast_path;
    for _ in 0..10 {
        exchange(&mut p, ca, cb, Duration::from_micros(100));
    }
    assert!(p.a.engine.stats().fast_path - before >= 10);
    assert!(srtt(&p, ca).is_some());
}
