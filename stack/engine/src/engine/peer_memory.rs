//! What the stack learned of a peer, remembered across its connections.
//!
//! Peers known to delay their ACKs: a connection learns that its peer holds
//! the ACK of a lone segment when its tail-loss probes turn out spurious
//! three times in a row (smoltcp raises that connection's allowance to
//! `Recovery::ack_delay_max`). A new connection to the same address starts
//! from what the last one learned, so that workloads that open a connection
//! per request (or a pool of them) pay for the lesson once per peer, not once
//! per connection.
//!
//! The peer's live connections learn it too, from the verdicts on all of
//! their probes pooled: ten thousand connections from one overloaded client
//! each see a few probes, and each learning alone costs three spurious probes
//! a connection. A single verdict cannot tell a late ACK from a lost one (both
//! leave the peer holding the probed segment), so one connection's streak is
//! no lesson for the others: under 1% loss each way about half the probes
//! find their ACK lost, and a streak of three comes up every few dozen. The
//! pool instead tracks the share of probes that were needed (the probe
//! repaired a loss, or its answer revealed one): a lossy peer's stays near its
//! loss's share, a slow peer's falls towards none. Below `HOLDS_BELOW` the
//! peer holds its ACKs, above `LOSSY_ABOVE` it no longer does (for
//! connections that start from then on; a live one keeps what it learned).
//!
//! How long a peer that holds its ACKs may take (`PeerMemory::wait`): its
//! connections add this to 2 SRTT for the probe and to SRTT for the timeout.
//! It starts at `Recovery::ack_delay_max` (Linux's 200 ms), and the late probes
//! steer it as RACK's reordering window is steered by D-SACKs (RFC 8985 6.2.4):
//! a late probe whose ACK came `d` after the segment first went, on a connection
//! whose SRTT was `s` when the probe went, raises it to (d - s) plus an eighth (a
//! sixteenth more when `d` is unknown); at most `WAIT_MAX_FACTOR` times its
//! start. `d` is never less than the probe's own time, since the peer's answer to
//! the probe covers the segment too: each storm that draws probes raises the wait
//! by an eighth over the wait its probes went with, plus however long their
//! answers took (in `rr-10000`, tens of milliseconds in the server's own receive
//! ring). The probes of one storm all went with the same wait, so a storm raises
//! it once, not once per probe. What it holds above its start falls by a
//! sixteenth every `WAIT_DECAY_EVERY` (it halves in about 2.7 s): by time, not
//! by answers, because an overloaded client's late ACKs come in storms, every
//! connection with an answer in flight at once when the client stalls (10,000
//! connections from one client, `rr-demo` `rr-10000`), and the next storm is as
//! long. Two versions were measured and not kept (docs/2026-12-06-late-acks):
//! a wait that fell with each answer was back at its start within a fraction of
//! a second at 100,000 answers a second and met each storm at its start; one
//! raised by a sixteenth for every late probe reached 1 s in each storm, and a
//! lost answer then waited that long (p99.9 830 ms against kernel TCP's 360).
//!
//! Round trips (with `Recovery::timestamps`, or for a peer that holds its ACKs
//! by the pooled verdicts): every RTT sample a connection
//! takes goes into a pool of all of the peer's connections' samples, and a
//! connection whose own estimate is below the pool's is raised to it (Linux starts a
//! connection from per-destination metrics). Ten thousand connections from
//! one overloaded client each see a few exchanges; alone, each would learn
//! the client's delay from spurious retransmissions of its own. Only samples
//! enter the pool, never an estimate raised from it; and the pool tracks a
//! quantile of them (about the 80th percentile: up a half, at least 250 us,
//! for a sample above it, down a tenth for one below), not their mean. A lossy peer's
//! samples are its round trip but for the few that include a loss's
//! recovery; a mean would take those at full weight and raise every connection's
//! timers, which slows the recoveries that make the next such samples (two
//! stacks talking to each other would feed each other so). A slow peer's samples
//! all run high, and the quantile follows them up by a half a sample.
//!
//! Direct-mapped and fixed in size: a peer that collides is forgotten, which
//! costs at most a few more spurious probes, and no address a network sends
//! can grow it.

use std::net::IpAddr;
use std::time::Duration;

use smoltcp::time::Instant;

const SLOTS: usize = 256;

/// The least step up (microseconds): from a handshake's few microseconds a
/// half at a time would take a slow peer's pool a dozen samples more.
const MIN_STEP_US: u32 = 250;


/// The share of probes that were needed, in 1/1024, where a peer starts: as if
/// half of them were, so that a run of late verdicts must first bring it down.
const NEEDED_START: u16 = 512;
/// Below this share (10%) the peer is taken to hold its ACKs: from the start,
/// 25 late verdicts without a needed one (each takes a sixteenth off). A peer
/// whose probes are needed half the time (loss both ways alike) shows such a
/// run about once in 2^26 verdicts. One whose probes are rarely needed is then
/// served as Linux serves every peer: the allowance of `Recovery::ack_delay_max`.
/// Not lower: a slow peer's probes can look needed too, when the server's own
/// full receive ring dropped the D-SACK that would have shown them late.
const HOLDS_BELOW: u16 = 102;
/// Above this share (25%) it is taken to lose segments again: three needed
/// verdicts in a row from `HOLDS_BELOW`.
const LOSSY_ABOVE: u16 = 256;

/// The most a held peer's wait may grow to, in multiples of where it starts
/// (1 s at the default 200 ms: RFC 6298's timeout floor, upstream smoltcp's).
const WAIT_MAX_FACTOR: u32 = 5;
/// A late probe whose ACK's delay is unknown raises the wait by 1/`WAIT_UP`.
const WAIT_UP: u32 = 16;
/// Every `WAIT_DECAY_EVERY` microseconds, the wait's excess over its start
/// falls by 1/`WAIT_DOWN`.
const WAIT_DECAY_EVERY: i64 = 250_000;
const WAIT_DOWN: u32 = 16;

/// What a connection to a peer should assume of its ACKs (`PeerMemory::delays_acks`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum AckDelays {
    Unknown,
    /// An earlier connection learned from a streak of its own spurious probes
    /// that the peer holds its ACKs: the probe allowance is raised.
    Remembered,
    /// The peer's connections' pooled probe verdicts show it: the allowance and
    /// the retransmission timeout's margin over SRTT are this (`PeerMemory::wait`).
    Pooled(Duration),
}

/// How a peer's ACKs have behaved over its connections.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct PeerAcks {
    ip: IpAddr,
    /// The share of probe verdicts that were `Needed`, in 1/1024 (an average
    /// over about the last 16).
    needed: u16,
    /// By the pooled verdicts.
    holds: bool,
    /// A connection learned it alone (a streak of its own probes).
    remembered: bool,
    /// While it holds: how long its connections wait for an ACK beyond the
    /// round trip (microseconds; see the module doc).
    wait: u32,
    /// When the wait last fell (microseconds of the engine's clock).
    decayed_at: i64,
}

impl PeerAcks {
    /// The wait's excess over `start` falls by a sixteenth for each
    /// `WAIT_DECAY_EVERY` since it last fell.
    fn decay_wait(&mut self, start: u32, now: Instant) {
        if !self.holds {
            return;
        }
        let ticks = (now.total_micros() - self.decayed_at) / WAIT_DECAY_EVERY;
        if ticks <= 0 {
            return;
        }
        self.decayed_at += ticks * WAIT_DECAY_EVERY;
        // After 100 ticks (25 s) a sixteenth each, under 0.2% of any excess is left.
        for _ in 0..ticks.min(100) {
            self.wait -= (self.wait - start) / WAIT_DOWN;
        }
        if ticks >= 100 {
            self.wait = start;
        }
    }

    fn new(ip: IpAddr) -> PeerAcks {
        PeerAcks { ip, needed: NEEDED_START, holds: false, remembered: false, wait: 0, decayed_at: 0 }
    }
}

/// A peer's round trip over its connections, in microseconds: a quantile of
/// the samples, and the mean deviation from it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct PeerRtt {
    ip: IpAddr,
    srtt: u32,
    rttvar: u32,
}

pub(super) struct PeerMemory {
    acks: Box<[Option<PeerAcks>; SLOTS]>,
    rtt: Box<[Option<PeerRtt>; SLOTS]>,
    /// Moves on whenever a peer comes to hold its ACKs: a live connection that
    /// saw another value checks its peer again (see `Engine::send`).
    generation: u32,
    /// Where a held peer's wait starts (`Recovery::ack_delay_max`), microseconds.
    wait_start: u32,
}

impl PeerMemory {
    /// `wait_start`: where the wait of a peer that comes to hold its ACKs starts.
    pub(super) fn new(wait_start: Duration) -> PeerMemory {
        PeerMemory {
            acks: Box::new([None; SLOTS]),
            rtt: Box::new([None; SLOTS]),
            generation: 0,
            wait_start: wait_start.as_micros().clamp(1, u128::from(u32::MAX / WAIT_MAX_FACTOR)) as u32,
        }
    }
}

impl PeerMemory {
    fn slot(ip: IpAddr) -> usize {
        let a = match ip {
            IpAddr::V4(a) => u32::from(a),
            IpAddr::V6(a) => crate::demux::fold_v6(a),
        };
        // Fibonacci hashing of the address: neighbours in a subnet spread out.
        (a.wrapping_mul(0x9E37_79B9) >> 24) as usize
    }

    fn acks_of(&mut self, ip: IpAddr) -> &mut PeerAcks {
        let e = &mut self.acks[Self::slot(ip)];
        if e.is_none_or(|p| p.ip != ip) {
            *e = Some(PeerAcks::new(ip));
        }
        e.as_mut().expect("filled above")
    }

    /// A connection to `ip` learned alone that its peer holds its ACKs (new
    /// connections start from it; live ones are not told, see the module doc).
    pub(super) fn remember_delays_acks(&mut self, ip: IpAddr) {
        self.acks_of(ip).remembered = true;
    }

    /// What is known of the peer's ACKs: whether they are late (by a connection's
    /// lesson or the pool's), and whether the pool shows it (the stronger
    /// evidence, which also raises the connections' timeouts).
    pub(super) fn delays_acks(&self, ip: IpAddr) -> AckDelays {
        match self.acks[Self::slot(ip)] {
            Some(p) if p.ip == ip && p.holds => AckDelays::Pooled(Duration::from_micros(u64::from(p.wait))),
            Some(p) if p.ip == ip && p.remembered => AckDelays::Remembered,
            _ => AckDelays::Unknown,
        }
    }

    /// Pools one probe verdict of a connection to `ip`: needed, or late, and
    /// then how long the connection would have had to wait beyond its SRTT for
    /// the ACK, if known. True when the peer has just come to hold its ACKs (the
    /// generation moved on).
    pub(super) fn probe_verdict(&mut self, ip: IpAddr, needed: bool, late_by: Option<Duration>, now: Instant) -> bool {
        let start = self.wait_start;
        let p = self.acks_of(ip);
        p.decay_wait(start, now);
        p.needed = if needed { p.needed + (1024 - p.needed) / 16 } else { p.needed - p.needed.div_ceil(16) };
        if p.holds && p.needed > LOSSY_ABOVE {
            p.holds = false;
        } else if !p.holds && p.needed < HOLDS_BELOW {
            p.holds = true;
            p.wait = start;
            p.decayed_at = now.total_micros();
            self.generation = self.generation.wrapping_add(1);
            return true;
        } else if p.holds && !needed {
            let want = match late_by {
                Some(d) => (d.as_micros() + d.as_micros() / 8).min(u128::from(u32::MAX)) as u32,
                None => p.wait + p.wait.div_ceil(WAIT_UP),
            };
            p.wait = p.wait.max(want).min(start * WAIT_MAX_FACTOR);
        }
        false
    }

    /// How long the connections to `ip` wait for its ACKs beyond the round
    /// trip, if it holds them (see the module doc).
    pub(super) fn wait(&mut self, ip: IpAddr, now: Instant) -> Option<Duration> {
        let start = self.wait_start;
        let p = self.acks[Self::slot(ip)].as_mut().filter(|p| p.ip == ip && p.holds)?;
        p.decay_wait(start, now);
        Some(Duration::from_micros(u64::from(p.wait)))
    }

    pub(super) fn generation(&self) -> u32 {
        self.generation
    }

    /// Adds one RTT sample of a connection to `ip` to the peer's pool (the
    /// first sample of a peer, or of one that took the slot of another,
    /// starts it).
    pub(super) fn sample_rtt(&mut self, ip: IpAddr, sample: Duration) {
        let r = sample.as_micros().min(u32::MAX as u128) as u32;
        let e = &mut self.rtt[Self::slot(ip)];
        match e {
            Some(p) if p.ip == ip => {
                p.srtt = if r > p.srtt {
                    p.srtt.saturating_add((p.srtt / 2).max(MIN_STEP_US)).min(r)
                } else {
                    (p.srtt - p.srtt / 10).max(r)
                };
                // The deviation too counts an outlier for at most the quantile.
                let diff = p.srtt.abs_diff(r).min(p.srtt);
                p.rttvar = ((u64::from(p.rttvar) * 3 + u64::from(diff)).div_ceil(4)) as u32;
            }
            _ => *e = Some(PeerRtt { ip, srtt: r, rttvar: r / 2 }),
        }
    }

    /// The peer's averaged RTT and its variance, if known.
    pub(super) fn rtt(&self, ip: IpAddr) -> Option<(Duration, Duration)> {
        self.rtt[Self::slot(ip)].filter(|p| p.ip == ip).map(|p| {
            (Duration::from_micros(u64::from(p.srtt)), Duration::from_micros(u64::from(p.rttvar)))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    #[test]
    fn remembers_forgets_and_collides_without_growing() {
        let mut d = PeerMemory::new(Duration::from_millis(200));
        let a = IpAddr::from(Ipv4Addr::new(198, 18, 0, 2));
        assert_eq!(d.delays_acks(a), AckDelays::Unknown);
        d.remember_delays_acks(a);
        assert_eq!(d.delays_acks(a), AckDelays::Remembered);
        assert_eq!(d.delays_acks(Ipv4Addr::new(198, 18, 0, 3).into()), AckDelays::Unknown);
        let a6: IpAddr = "2001:2::2".parse().unwrap();
        d.remember_delays_acks(a6);
        assert!(d.delays_acks(a6) == AckDelays::Remembered && d.delays_acks(a) == AckDelays::Remembered);
        assert_eq!(d.delays_acks("2001:2::3".parse().unwrap()), AckDelays::Unknown);
        // Many addresses: at most SLOTS remembered, the first one likely gone.
        for i in 0..10_000u32 {
            d.remember_delays_acks(Ipv4Addr::from(0xC612_0000 + i).into());
            d.probe_verdict(Ipv4Addr::from(0xC612_0000 + i).into(), false, None, Instant::ZERO);
            d.sample_rtt(Ipv4Addr::from(0xC612_0000 + i).into(), Duration::from_millis(1));
        }
        assert!(d.acks.iter().filter(|s| s.is_some()).count() <= SLOTS);
        assert!(d.rtt.iter().filter(|s| s.is_some()).count() <= SLOTS);
        d.remember_delays_acks(a);
        assert_eq!(d.delays_acks(a), AckDelays::Remembered);
    }

    #[test]
    fn a_slow_peer_is_told_from_a_lossy_one_by_its_pooled_verdicts() {
        let (slow, lossy): (IpAddr, IpAddr) = (Ipv4Addr::new(198, 18, 0, 2).into(), "2001:2::3".parse().unwrap());
        let mut d = PeerMemory::new(Duration::from_millis(200));
        let g0 = d.generation();
        // Late verdicts only: a slow peer, learned once, after HOLDS_BELOW's run.
        let learned: Vec<bool> = (0..25).map(|_| d.probe_verdict(slow, false, None, Instant::ZERO)).collect();
        assert_eq!(learned.iter().position(|&x| x), Some(24), "{learned:?}");
        assert_eq!((d.delays_acks(slow), d.generation()), (AckDelays::Pooled(Duration::from_millis(200)), g0.wrapping_add(1)));
        // Learned once.
        assert!((0..5).all(|_| !d.probe_verdict(slow, false, None, Instant::ZERO)));
        assert_eq!(d.generation(), g0.wrapping_add(1));
        // A peer whose probes are needed every other time never holds, whatever
        // the order of a long run of verdicts (a fixed pseudo-random one here).
        let mut x = 0x2545_F491_u32;
        for _ in 0..100_000 {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            assert!(!d.probe_verdict(lossy, x & 1 == 0, None, Instant::ZERO));
        }
        assert_eq!(d.delays_acks(lossy), AckDelays::Unknown);
        // A slow peer that starts to lose segments is let go: after three to five
        // needed verdicts in a row (three from just below HOLDS_BELOW).
        let mut needed = 0;
        while matches!(d.delays_acks(slow), AckDelays::Pooled(_)) {
            assert!(!d.probe_verdict(slow, true, None, Instant::ZERO));
            needed += 1;
        }
        assert!((3..=5).contains(&needed), "{needed}");
        assert_eq!(d.delays_acks(slow), AckDelays::Unknown);
        // Late again: learned again, and live connections are told (the generation).
        let g = d.generation();
        while !d.probe_verdict(slow, false, None, Instant::ZERO) {}
        assert_eq!((d.delays_acks(slow), d.generation()), (AckDelays::Pooled(Duration::from_millis(200)), g.wrapping_add(1)));
    }

    #[test]
    fn a_held_peers_wait_rises_with_late_probes_and_falls_with_time() {
        let ms = |t: i64| Instant::from_millis(t);
        let slow: IpAddr = Ipv4Addr::new(198, 18, 0, 2).into();
        let mut d = PeerMemory::new(Duration::from_millis(200));
        while !d.probe_verdict(slow, false, None, ms(0)) {}
        assert_eq!(d.wait(slow, ms(0)), Some(Duration::from_millis(200)));
        // A late probe whose ACK needed 300 ms beyond SRTT: the wait goes to that and
        // an eighth; shorter ones leave it, a storm of them too.
        d.probe_verdict(slow, false, Some(Duration::from_millis(300)), ms(10));
        assert_eq!(d.wait(slow, ms(10)), Some(Duration::from_micros(337_500)));
        for _ in 0..1000 {
            d.probe_verdict(slow, false, Some(Duration::from_millis(250)), ms(10));
        }
        assert_eq!(d.wait(slow, ms(10)), Some(Duration::from_micros(337_500)));
        // Unknown: up a sixteenth each. Either way at most five times the start.
        d.probe_verdict(slow, false, None, ms(10));
        assert_eq!(d.wait(slow, ms(10)), Some(Duration::from_micros(358_594)));
        d.probe_verdict(slow, false, Some(Duration::from_secs(3)), ms(20));
        assert_eq!(d.wait(slow, ms(20)), Some(Duration::from_secs(1)));
        // Needed probes and answers do not lower it; time does, the excess by a
        // sixteenth each quarter second: about half of it after 2.75 s, the rest
        // after 25 s. Between two storms a second apart it stays high.
        d.probe_verdict(slow, true, None, ms(100));
        d.sample_rtt(slow, Duration::from_millis(1));
        assert_eq!(d.wait(slow, ms(249)), Some(Duration::from_secs(1)));
        assert_eq!(d.wait(slow, ms(250)), Some(Duration::from_millis(950)));
        let second = d.wait(slow, ms(1000)).unwrap();
        assert!(second > Duration::from_millis(800), "{second:?}");
        let half = d.wait(slow, ms(2750)).unwrap();
        assert!(half > Duration::from_millis(560) && half < Duration::from_millis(620), "{half:?}");
        assert_eq!(d.wait(slow, ms(60_000)), Some(Duration::from_millis(200)));
        // Let go and learned again: it starts over.
        while d.delays_acks(slow) != AckDelays::Unknown {
            d.probe_verdict(slow, true, None, ms(60_000));
        }
        assert_eq!(d.wait(slow, ms(60_000)), None);
        while !d.probe_verdict(slow, false, None, ms(61_000)) {}
        assert_eq!(d.wait(slow, ms(70_000)), Some(Duration::from_millis(200)));
        // A peer that does not hold its ACKs has no wait.
        let other: IpAddr = Ipv4Addr::new(198, 18, 0, 3).into();
        d.sample_rtt(other, Duration::from_millis(1));
        assert_eq!(d.wait(other, ms(70_000)), None);
    }

    #[test]
    fn a_peers_rtt_is_averaged_over_its_samples() {
        let mut d = PeerMemory::new(Duration::from_millis(200));
        let (a, b): (IpAddr, IpAddr) = (Ipv4Addr::new(198, 18, 0, 2).into(), "2001:2::3".parse().unwrap());
        assert_eq!(d.rtt(a), None);
        d.sample_rtt(a, Duration::from_millis(200));
        assert_eq!(d.rtt(a), Some((Duration::from_millis(200), Duration::from_millis(100))));
        // An outlier (a loss's recovery in one sample) moves it up a step; the rest
        // bring it back.
        let mut d = PeerMemory::new(Duration::from_millis(200));
        for _ in 0..50 {
            d.sample_rtt(b, Duration::from_micros(100));
        }
        d.sample_rtt(b, Duration::from_millis(50));
        assert_eq!(d.rtt(b).unwrap().0, Duration::from_micros(350));
        for _ in 0..20 {
            d.sample_rtt(b, Duration::from_micros(100));
        }
        assert_eq!(d.rtt(b).unwrap().0, Duration::from_micros(100));
        // One sample in fifty that includes a recovery does not carry it away.
        for i in 0..1000 {
            let r = if i % 50 == 0 { 50_000 } else { 100 };
            d.sample_rtt(b, Duration::from_micros(r));
        }
        assert!(d.rtt(b).unwrap().0 < Duration::from_micros(400), "{:?}", d.rtt(b));
        // A slow peer's samples all run high: the pool follows them up.
        for i in 0..80 {
            d.sample_rtt(b, Duration::from_millis(300));
            if i == 5 {
                assert!(d.rtt(b).unwrap().0 < Duration::from_millis(30), "{:?}", d.rtt(b));
            }
        }
        assert_eq!(d.rtt(b).unwrap().0, Duration::from_millis(300));
    }
}
