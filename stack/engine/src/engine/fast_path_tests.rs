//! The fast path (header prediction, `Interface::process_tcp_fast`, on the way in; a
//! response in one segment, `Interface::set_fast_send`, on the way out) against smoltcp's
//! general path: two server engines, one taking it and one not, get the same frames at
//! the same times from a scripted peer and run the same application. After every frame
//! they must have sent the same frames and hold the same state (every socket's `Debug`:
//! sequence numbers, buffers, timers, RTT and congestion state; the counters). The
//! tests that walk the edges run over IPv4 and over IPv6.

use std::net::Ipv4Addr;
use std::time::Duration;

use bytes::BytesMut;

use super::EngineSetup;
use crate::conn::{ConnId, Event};
use crate::testing::frames::{self, parse_tcp, parse_tcp6, Seg, TcpSpec};
use crate::testing::Rng;
use crate::testing::{config, mac_of, v6_of, MemTransport};

const SRV: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const PEER: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);

/// The two servers, their application, and what the peer knows of the connection.
struct Twin {
    sides: Vec<MemTransport>,
    conns: [Option<ConnId>; 2],
    /// The application reads what arrives (else the receive window fills).
    reading: bool,
    /// And sends it back.
    echo: bool,
    /// One `recv` per step, as a server that trusts `recv_drains` makes (else it reads
    /// until a `recv` returns 0).
    read_once: bool,
    /// The peer's port for the current connection.
    port: u16,
    /// The peer's next sequence number, and the server's (as last seen).
    seq: u32,
    srv: u32,
    /// The server's last advertised window and acknowledgement.
    win: u16,
    srv_ack: u32,
    syn_options: &'static [u8],
    steps: usize,
    /// The frames the last step sent (the same from both servers).
    sent: Vec<Vec<u8>>,
    /// The peer speaks IPv6 (the servers' and its own [`v6_of`] addresses).
    v6: bool,
    /// The peer's timestamp option on every segment, in this layout (Linux's NOP, NOP,
    /// TS or smoltcp's TS, end of list), or none.
    ts: Option<TsLayout>,
    /// The peer's TSval clock, and the server's last TSval (echoed).
    ts_clock: u32,
    ts_echo: u32,
    /// The option bytes of the next segment.
    opts: [u8; 12],
}

#[derive(Clone, Copy, PartialEq)]
enum TsLayout {
    NopNopTs,
    TsEnd,
}

impl Twin {
    fn new(tweak: impl Fn(&mut EngineSetup)) -> Twin {
        Twin::of_family(false, tweak)
    }

    fn of_family(v6: bool, tweak: impl Fn(&mut EngineSetup)) -> Twin {
        let sides = [true, false]
            .into_iter()
            .map(|fast| {
                let mut c = config(SRV);
                c.tcp.fast_path = fast;
                tweak(&mut c);
                let mut t = MemTransport::new(c);
                let now = t.now;
                t.engine.add_neighbour(now, PEER, mac_of(PEER));
                t.engine.add_neighbour(now, v6_of(PEER), mac_of(PEER));
                t.listen(7).unwrap();
                t
            })
            .collect();
        Twin {
            sides,
            conns: [None; 2],
            reading: true,
            echo: true,
            read_once: false,
            port: 40000,
            seq: 1000,
            srv: 0,
            win: 0,
            srv_ack: 0,
            syn_options: &[2, 4, 5, 0xb4],
            steps: 0,
            sent: Vec::new(),
            v6,
            ts: None,
            ts_clock: 1_000_000,
            ts_echo: 0,
            opts: [0; 12],
        }
    }

    /// The peer offers timestamps in its SYN and sends them in `layout` from then on;
    /// the servers offer them too (`Recovery::timestamps`), so both ends use them.
    fn with_timestamps(mut self, layout: TsLayout) -> Twin {
        self.ts = Some(layout);
        self.syn_options = &[2, 4, 5, 0xb4, 4, 2, 8, 10, 0, 0, 0, 1, 0, 0, 0, 0];
        self
    }

    /// The peer's frame of `s`, in the twin's family.
    fn frame(&self, s: &TcpSpec<'_>) -> Vec<u8> {
        if self.v6 {
            frames::tcp6(s, v6_of(PEER), v6_of(SRV))
        } else {
            frames::tcp(s)
        }
    }

    fn spec(&self, flags: u8, payload: &'static [u8]) -> TcpSpec<'_> {
        let options: &[u8] = if self.ts.is_some() && flags & 0x02 == 0 { &self.opts } else { &[] };
        TcpSpec { sport: self.port, seq: self.seq, ack: self.srv, flags, payload, options, ..TcpSpec::default() }
    }

    /// The timestamp option of the peer's next segment: its clock, the server's last TSval.
    fn next_opts(&mut self) {
        let (v, e) = (self.ts_clock.to_be_bytes(), self.ts_echo.to_be_bytes());
        self.opts = match self.ts {
            Some(TsLayout::NopNopTs) => [1, 1, 8, 10, v[0], v[1], v[2], v[3], e[0], e[1], e[2], e[3]],
            _ => [8, 10, v[0], v[1], v[2], v[3], e[0], e[1], e[2], e[3], 0, 0],
        };
    }

    /// Gives `frame` to both servers (or none: time passes), runs the application on
    /// each, and checks that they sent the same and hold the same state; returns what
    /// the server sent.
    fn step(&mut self, frame: Option<Vec<u8>>, advance: Duration, send: usize) -> Vec<Seg> {
        self.steps += 1;
        self.ts_clock = self.ts_clock.wrapping_add(advance.as_micros() as u32 + 1);
        let mut out = Vec::new();
        let mut seen = [String::new(), String::new()];
        for (i, t) in self.sides.iter_mut().enumerate() {
            t.advance(advance);
            if let Some(f) = &frame {
                t.inbox.push_back(f.clone());
            }
            let mut events = Vec::new();
            t.poll(&mut events, None).unwrap();
            seen[i] = format!("{events:?}");
            for e in events {
                match e {
                    Event::Accepted { conn, .. } => self.conns[i] = Some(conn),
                    Event::Closed(c) => {
                        t.close(c);
                        self.conns[i] = None;
                    }
                    _ => {}
                }
            }
            if let Some(c) = self.conns[i] {
                let mut buf = BytesMut::new();
                while self.reading && matches!(t.recv(c, &mut buf), Ok(n) if n > 0) && !self.read_once {}
                if self.echo && !buf.is_empty() {
                    let _ = t.send(c, &buf);
                }
                if send > 0 {
                    let _ = t.send(c, &vec![0x5a; send]);
                }
            }
            t.flush().unwrap();
            out.push(t.take_sent());
        }
        assert_eq!(out[0], out[1], "step {}: the fast path sent other frames than the general path", self.steps);
        assert_eq!(seen[0], seen[1], "step {}: the fast path reported other events than the general path", self.steps);
        let mut dumps = [String::new(), String::new()];
        for (t, d) in self.sides.iter().zip(&mut dumps) {
            let all: Vec<usize> = (0..t.engine.buckets()).collect();
            t.engine.dump_state(&all, self.steps.is_multiple_of(50), d);
        }
        if dumps[0] != dumps[1] {
            let (a, b) = dumps[0].lines().zip(dumps[1].lines()).find(|(a, b)| a != b).unwrap_or(("", ""));
            panic!("step {}: the fast path's state differs:\n fast:    {a}\n general: {b}", self.steps);
        }
        self.sent = out.swap_remove(0);
        if let Some(v) = self.sent.iter().rev().find_map(|f| tsval_of(f)) {
            self.ts_echo = v;
        }
        self.next_opts();
        let v6 = self.v6;
        let segs: Vec<Seg> =
            self.sent.iter().filter_map(|f| if v6 { parse_tcp6(f).map(|(_, _, s)| s) } else { parse_tcp(f) }).collect();
        for s in &segs {
            if s.ack_set() {
                self.srv_ack = s.ack;
                self.win = s.window;
            }
            let end = s.seq.wrapping_add(s.payload.len() as u32 + s.syn() as u32 + s.fin() as u32);
            if end.wrapping_sub(self.srv) as i32 > 0 || s.syn() {
                self.srv = end;
            }
        }
        segs
    }

    /// A new connection from the next port: SYN, SYN-ACK, ACK.
    fn handshake(&mut self) {
        self.port += 1;
        self.seq = self.seq.wrapping_add(100_000);
        let mut syn = self.spec(0x02, &[]);
        syn.options = self.syn_options;
        let segs = self.step(Some(self.frame(&syn)), Duration::ZERO, 0);
        assert!(segs.iter().any(|s| s.syn() && s.ack_set()), "no SYN-ACK: {segs:?}");
        self.seq = self.seq.wrapping_add(1);
        // A round trip of 100 us: no RTT sample is zero.
        self.step(Some(self.frame(&self.spec(0x10, &[]))), Duration::from_micros(100), 0);
    }

    fn fast_taken(&self) -> (u64, u64) {
        (self.sides[0].engine.stats().fast_path, self.sides[1].engine.stats().fast_path)
    }

    /// Segments sent by the fast path (fast-send): the fast engine's, the general one's.
    fn fast_sent(&self) -> (u64, u64) {
        (self.sides[0].engine.stats().fast_send, self.sides[1].engine.stats().fast_send)
    }
}

/// The TSval of a frame's TCP timestamp option, if it has one.
fn tsval_of(f: &[u8]) -> Option<u32> {
    let ip = if f[12..14] == [0x86, 0xdd] { 40 } else { (f[14] & 15) as usize * 4 };
    let t = f.get(14 + ip..)?;
    let opts = t.get(20..(t[12] >> 4) as usize * 4)?;
    let mut i = 0;
    while i < opts.len() {
        match opts[i] {
            0 => return None,
            1 => i += 1,
            8 => return opts.get(i + 2..i + 6).map(|v| u32::from_be_bytes(v.try_into().unwrap())),
            _ => i += (*opts.get(i + 1)?).max(2) as usize,
        }
    }
    None
}

static DATA: [u8; 3000] = [0x42; 3000];

/// Requests and responses in order, pure ACKs, a receive window filled past its end,
/// a zero window, duplicate ACKs, a hole and its fill, segments with options, FIN: each
/// case the fast path takes or leaves, compared frame by frame with the general path.
#[test]
fn the_fast_path_equals_the_general_path_on_every_edge() {
    every_edge(false, None);
}

#[test]
fn the_fast_path_equals_the_general_path_on_every_edge_over_ipv6() {
    every_edge(true, None);
}

/// Both ends with timestamps, in Linux's layout over IPv4 and smoltcp's over IPv6.
#[test]
fn the_fast_path_equals_the_general_path_on_every_edge_with_timestamps() {
    every_edge(false, Some(TsLayout::NopNopTs));
    every_edge(true, Some(TsLayout::TsEnd));
}

/// Twin servers (with timestamps offered when the peer sends them) and their peer.
fn twin(v6: bool, ts: Option<TsLayout>, tweak: impl Fn(&mut EngineSetup)) -> Twin {
    let t = Twin::of_family(v6, |c| {
        c.tcp.recovery.timestamps = ts.is_some();
        tweak(c);
    });
    match ts {
        Some(layout) => t.with_timestamps(layout),
        None => t,
    }
}

fn every_edge(v6: bool, ts: Option<TsLayout>) {
    let mut t = twin(v6, ts, |_| {});
    t.handshake();
    // In-order requests (the fast path), echoed; the peer's ACKs of the echoes. The
    // largest is one MSS of the family (1,440 bytes over IPv6), less the timestamp
    // option when there is one.
    let mss = if v6 { 1440 } else { 1460 } - if ts.is_some() { 12 } else { 0 };
    for n in [1usize, 100, 536, mss] {
        t.step(Some(t.frame(&t.spec(0x18, &DATA[..n]))), Duration::from_micros(50), 0);
        t.seq = t.seq.wrapping_add(n as u32);
        t.step(Some(t.frame(&t.spec(0x10, &[]))), Duration::from_micros(50), 0);
    }
    let (fast, general) = t.fast_taken();
    assert!(fast >= 8 && general == 0, "fast path taken {fast}, general engine {general}");
    // The echoes of 1, 100, 536 bytes and one MSS each fit one segment (fast-send).
    let (sent, general) = t.fast_sent();
    assert!(sent >= 4 && general == 0, "fast-send {sent}, general engine {general}");
    // They left when the application wrote them, the bucket then needing no egress
    // (`send_now`); the general engine sent them then too, by a bucket egress.
    let now = [0, 1].map(|i| t.sides[i].engine.stats().sent_now);
    assert!(now[0] >= 4 && now[1] == 0, "sent now {now:?}");
    // The pure ACKs left nothing to send: their buckets were not marked for an egress
    // (the general engine's egresses found nothing to send).
    let quiet = [0, 1].map(|i| t.sides[i].engine.stats().acks_quiet);
    let egress = [0, 1].map(|i| t.sides[i].engine.stats().fast_egress);
    assert!(quiet[0] >= 4 && quiet[1] == 0, "quiet ACKs {quiet:?}");
    // Other buckets' egresses (the handshake's, the echoes') still skip their scan and
    // `poll_at` when they only sent fast or had nothing due.
    assert!(egress[0] >= 4 && egress[1] == 0, "fast egress {egress:?}");
    // The application reads after the last ACK, so the buffer has more room than the
    // window advertised: a segment past the window's end must still be trimmed to it.
    t.reading = false;
    t.step(Some(t.frame(&t.spec(0x18, &DATA[..1460]))), Duration::ZERO, 0);
    t.seq = t.srv_ack;
    t.reading = true;
    t.echo = false;
    let quiet = t.step(None, Duration::ZERO, 0);
    assert!(quiet.is_empty(), "a window update went out: {quiet:?}");
    let over = t.win as usize + 100;
    t.step(Some(t.frame(&t.spec(0x18, &DATA[..over]))), Duration::ZERO, 0);
    assert_eq!(t.srv_ack, t.seq.wrapping_add(over as u32 - 100), "the segment was not trimmed to the window");
    t.seq = t.srv_ack;
    t.echo = true;
    // Data the application does not read: the window fills, then data past its end
    // (trimmed by the general path), then into a zero window.
    t.reading = false;
    for _ in 0..12 {
        let n = (t.win as usize).clamp(1, 1460);
        t.step(Some(t.frame(&t.spec(0x10, &DATA[..n]))), Duration::from_micros(10), 0);
        t.seq = t.srv_ack;
        let over = (t.win as usize + 1).min(3000);
        t.step(Some(t.frame(&t.spec(0x18, &DATA[..over]))), Duration::from_micros(10), 0);
        t.seq = t.srv_ack;
    }
    assert_eq!(t.win, 0, "the window should have closed");
    t.reading = true;
    t.step(None, Duration::from_millis(1), 0);
    t.step(Some(t.frame(&t.spec(0x10, &[]))), Duration::from_millis(1), 0);
    // Outstanding data, then duplicate ACKs (fast retransmit on the third), then an ACK
    // of part of it and of all of it.
    t.echo = false;
    let before = t.srv;
    t.step(None, Duration::ZERO, 2500);
    for _ in 0..4 {
        t.step(Some(t.frame(&TcpSpec { ack: before, ..t.spec(0x10, &[]) })), Duration::from_micros(20), 0);
    }
    t.step(Some(t.frame(&TcpSpec { ack: before.wrapping_add(1000), ..t.spec(0x10, &[]) })), Duration::from_micros(20), 0);
    t.step(Some(t.frame(&t.spec(0x10, &[]))), Duration::from_micros(20), 0);
    // A window update alone, then an ACK beyond what was sent (challenge ACK).
    t.step(Some(t.frame(&TcpSpec { window: 1000, ..t.spec(0x10, &[]) })), Duration::ZERO, 0);
    t.step(Some(t.frame(&TcpSpec { ack: t.srv.wrapping_add(10), ..t.spec(0x10, &[]) })), Duration::ZERO, 0);
    // A hole, then the segment that fills it.
    let s0 = t.seq;
    t.step(Some(t.frame(&TcpSpec { seq: s0.wrapping_add(100), ..t.spec(0x18, &DATA[..200]) })), Duration::ZERO, 0);
    t.step(Some(t.frame(&t.spec(0x18, &DATA[..100]))), Duration::ZERO, 0);
    t.seq = t.srv_ack;
    // Old data again (a retransmission: the general path's duplicate answer).
    t.step(Some(t.frame(&TcpSpec { seq: s0, ..t.spec(0x18, &DATA[..100]) })), Duration::ZERO, 0);
    // Options on an in-order segment (timestamps; a SACK block) and the URG flag.
    let ts = [1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 0];
    t.step(Some(t.frame(&TcpSpec { options: &ts, ..t.spec(0x18, &DATA[..10]) })), Duration::ZERO, 0);
    t.seq = t.srv_ack;
    t.step(Some(t.frame(&t.spec(0x38, &DATA[..10]))), Duration::ZERO, 0);
    t.seq = t.srv_ack;
    // Time passes past the retransmission timer; then the FIN.
    t.step(Some(t.frame(&t.spec(0x18, &DATA[..10]))), Duration::from_secs(3), 0);
    t.seq = t.srv_ack;
    t.step(Some(t.frame(&t.spec(0x11, &[]))), Duration::ZERO, 0);
    t.step(None, Duration::from_secs(70), 0);
    let (fast, general) = t.fast_taken();
    assert!(fast >= 10 && general == 0, "fast path taken {fast}, general engine {general}");
    assert_eq!(t.fast_sent().1, 0);
}

/// A request that comes with the peer's FIN: the answer goes out by fast-send (CLOSE-WAIT),
/// and the end is still reported (`Readable` after the read, then `Closed`), though the
/// scan after a fast egress is skipped where nothing but the application touched the bucket.
#[test]
fn a_request_with_the_peers_fin_is_answered_fast_and_its_end_reported() {
    let mut t = Twin::new(|_| {});
    t.read_once = true;
    t.handshake();
    t.step(Some(t.frame(&t.spec(0x18, &DATA[..64]))), Duration::from_micros(50), 0);
    t.seq = t.seq.wrapping_add(64);
    t.step(Some(t.frame(&t.spec(0x10, &[]))), Duration::from_micros(50), 0);
    let before = t.fast_sent().0;
    // PSH|ACK|FIN with a request.
    let segs = t.step(Some(t.frame(&t.spec(0x19, &DATA[..64]))), Duration::from_micros(50), 0);
    assert!(segs.iter().any(|s| s.payload.len() == 64), "no answer: {segs:?}");
    assert_eq!(t.fast_sent().0, before + 1, "the answer did not go by fast-send");
    for _ in 0..3 {
        t.step(None, Duration::from_micros(50), 0);
    }
    assert_eq!(t.conns, [None, None], "the peer's FIN was not reported as the end");
}

/// The peer's MAC changes between two requests (smoltcp patch `fast-route` remembers
/// where the last answer went): the next answer goes by fast-send to the new one.
#[test]
fn a_peer_with_a_new_mac_is_answered_at_it() {
    let mut t = Twin::new(|_| {});
    t.handshake();
    let old_mac = mac_of(PEER);
    t.step(Some(t.frame(&t.spec(0x18, &DATA[..32]))), Duration::from_micros(50), 0);
    assert!(t.sent.iter().any(|f| f[..6] == old_mac && f.len() > 60), "no answer to the old MAC");
    t.seq = t.seq.wrapping_add(32);
    let new_mac = [2, 0, 0, 0, 0, 0x77];
    for side in &mut t.sides {
        let now = side.now;
        assert!(side.engine.add_neighbour(now, PEER, new_mac));
    }
    let before = t.fast_sent().0;
    let mut req = t.spec(0x18, &DATA[..32]);
    req.src_mac = new_mac;
    t.step(Some(t.frame(&req)), Duration::from_micros(50), 0);
    assert_eq!(t.fast_sent().0, before + 1, "the answer did not go by fast-send");
    assert!(!t.sent.is_empty() && t.sent.iter().all(|f| f[..6] == new_mac), "not to the new MAC");
}

/// A retransmission (tail probe or RTO) answered at once by the ACK of the original:
/// the general path judges it spurious (`check_spurious`), so the fast path leaves every
/// ACK to it while a retransmission is out.
#[test]
fn an_ack_that_judges_a_retransmission_takes_the_general_path() {
    let mut t = Twin::new(|_| {});
    t.handshake();
    t.echo = false;
    t.step(None, Duration::ZERO, 1000);
    t.step(Some(t.frame(&t.spec(0x10, &[]))), Duration::from_micros(200), 0);
    t.step(None, Duration::ZERO, 1000);
    let resent = t.step(None, Duration::from_secs(2), 0);
    assert!(resent.iter().any(|s| !s.payload.is_empty()), "nothing was sent again: {resent:?}");
    t.step(Some(t.frame(&t.spec(0x10, &[]))), Duration::from_micros(10), 0);
    let r = t.sides[1].engine.stats().recovery;
    assert!(r.spurious_probes + r.spurious_retransmits > 0, "no spurious verdict: {r:?}");
    // And with nothing resent, the next request and ACK take the fast path again.
    t.step(Some(t.frame(&t.spec(0x18, &DATA[..10]))), Duration::from_micros(100), 0);
    assert!(t.fast_taken().0 >= 2, "{:?}", t.fast_taken());
}

/// Random segments near every edge the fast path checks (sequence number one off, the
/// window's end, ACKs old, partial, exact and beyond, windows zero and changing, PSH,
/// FIN, RST), with the application reading or not and sending now and then, time
/// jumping past timers; SACK allowed or not, loss recovery as configured by default
/// (tail probes, RTO).
#[test]
fn random_segments_near_the_edges_get_the_same_answers_and_state() {
    random_near_the_edges(|_| false, |_| None);
}

#[test]
fn random_segments_near_the_edges_get_the_same_answers_and_state_over_ipv6() {
    random_near_the_edges(|_| true, |_| None);
}

/// Both ends with timestamps; every other run over IPv6, every third in smoltcp's layout.
#[test]
fn random_segments_near_the_edges_get_the_same_answers_and_state_with_timestamps() {
    random_near_the_edges(
        |seed| seed % 2 == 1,
        |seed| Some(if seed % 3 == 0 { TsLayout::TsEnd } else { TsLayout::NopNopTs }),
    );
}

fn random_near_the_edges(v6: impl Fn(u64) -> bool, ts: impl Fn(u64) -> Option<TsLayout>) {
    let (mut taken, mut sent) = (0, 0);
    // Sixteen runs: since smoltcp takes data under an ACK older than SND.UNA (old-ack), the
    // older ACKs below no longer drop their segments, and twelve runs sent fewer than 200.
    for seed in 1..=16u64 {
        let mut rng = Rng(seed);
        let mut t = twin(v6(seed), ts(seed), |c| {
            c.tcp.rx_buffer = 8192;
            c.tcp.initial_buffer = 2048;
            // Every third run with keep-alives: each segment sent rewinds the timer.
            if seed % 3 == 0 {
                c.tcp.keepalive = Some(Duration::from_millis(500));
            }
        });
        if seed % 2 == 0 && t.ts.is_none() {
            t.syn_options = &[2, 4, 5, 0xb4, 4, 2, 1, 1];
        }
        t.handshake();
        for _ in 0..300 {
            if t.conns[0].is_none() {
                t.handshake();
            }
            let win = t.win as u32;
            let len = [0, 0, 1, 7, 100, 536, 1460][rng.below(7) as usize].min(3000) as usize;
            let len = match rng.below(8) {
                0 => (win as usize).min(3000),
                1 => (win as usize + 1).min(3000),
                _ => len,
            };
            let seq = match rng.below(10) {
                0 => t.seq.wrapping_sub(1),
                1 => t.seq.wrapping_add(1),
                2 => t.seq.wrapping_add(win),
                _ => t.seq,
            };
            let ack = match rng.below(10) {
                0 => t.srv.wrapping_sub(rng.below(2000) as u32),
                1 => t.srv.wrapping_add(1),
                2 => t.srv_ack.wrapping_add(0),
                _ => t.srv,
            };
            let window = match rng.below(8) {
                0 => 0,
                1 => rng.below(3000) as u16,
                _ => 65535,
            };
            let flags = match rng.below(40) {
                0 => 0x11,
                1 => 0x14,
                // Now and then a request with the peer's FIN (its answer goes by fast-send).
                2..=20 if rng.below(20) == 0 => 0x19,
                2..=20 => 0x18,
                _ => 0x10,
            };
            if rng.below(10) == 0 {
                t.reading = !t.reading;
            }
            t.echo = rng.below(2) == 0;
            t.read_once = rng.below(3) == 0;
            let send = if rng.below(6) == 0 { rng.below(3000) as usize } else { 0 };
            let advance = match rng.below(12) {
                0 => Duration::from_millis(300),
                1 => Duration::from_secs(2),
                2..=5 => Duration::from_micros(100),
                _ => Duration::ZERO,
            };
            let frame = (rng.below(8) != 0).then(|| t.frame(&TcpSpec { seq, ack, window, flags, ..t.spec(flags, &DATA[..len]) }));
            t.step(frame, advance, send);
            // The peer follows what the server acknowledged (lost data is sent again).
            t.seq = t.srv_ack;
        }
        taken += t.fast_taken().0;
        assert_eq!(t.fast_taken().1, 0);
        sent += t.fast_sent().0;
        assert_eq!(t.fast_sent().1, 0);
    }
    assert!(taken > 500, "the fast path was taken only {taken} times");
    assert!(sent > 200, "fast-send sent only {sent} segments");
}
