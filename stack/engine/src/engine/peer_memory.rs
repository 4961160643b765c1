//! What the stack learned of a peer, remembered across its connections.
//!
//! Peers known to delay their ACKs: a connection learns that its peer holds
//! the ACK of a lone segment when a tail-loss probe turns out spurious
//! (smoltcp raises that connection's allowance to `Recovery::ack_delay_max`).
//! A new connection to the same address starts from what the last one
//! learned, so that workloads that open a connection per request (or a pool
//! of them) pay for the lesson once per peer, not once per connection.
//!
//! Round trips (with `Recovery::timestamps`): every RTT sample a connection
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

const SLOTS: usize = 256;

/// The least step up (microseconds): from a handshake's few microseconds a
/// half at a time would take a slow peer's pool a dozen samples more.
const MIN_STEP_US: u32 = 250;


/// A peer's round trip over its connections, in microseconds: a quantile of
/// the samples, and the mean deviation from it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct PeerRtt {
    ip: IpAddr,
    srtt: u32,
    rttvar: u32,
}

pub(super) struct PeerMemory {
    /// Peers known to delay their ACKs.
    delayed_ack_peers: Box<[Option<IpAddr>; SLOTS]>,
    rtt: Box<[Option<PeerRtt>; SLOTS]>,
}

impl Default for PeerMemory {
    fn default() -> Self {
        PeerMemory { delayed_ack_peers: Box::new([None; SLOTS]), rtt: Box::new([None; SLOTS]) }
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

    pub(super) fn remember_delays_acks(&mut self, ip: IpAddr) {
        self.delayed_ack_peers[Self::slot(ip)] = Some(ip);
    }

    pub(super) fn delays_acks(&self, ip: IpAddr) -> bool {
        self.delayed_ack_peers[Self::slot(ip)] == Some(ip)
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
        let mut d = PeerMemory::default();
        let a = IpAddr::from(Ipv4Addr::new(198, 18, 0, 2));
        assert!(!d.delays_acks(a));
        d.remember_delays_acks(a);
        assert!(d.delays_acks(a));
        assert!(!d.delays_acks(Ipv4Addr::new(198, 18, 0, 3).into()));
        let a6: IpAddr = "2001:2::2".parse().unwrap();
        d.remember_delays_acks(a6);
        assert!(d.delays_acks(a6) && d.delays_acks(a));
        assert!(!d.delays_acks("2001:2::3".parse().unwrap()));
        // Many addresses: at most SLOTS remembered, the first one likely gone.
        for i in 0..10_000u32 {
            d.remember_delays_acks(Ipv4Addr::from(0xC612_0000 + i).into());
            d.sample_rtt(Ipv4Addr::from(0xC612_0000 + i).into(), Duration::from_millis(1));
        }
        assert!(d.delayed_ack_peers.iter().filter(|s| s.is_some()).count() <= SLOTS);
        assert!(d.rtt.iter().filter(|s| s.is_some()).count() <= SLOTS);
        d.remember_delays_acks(a);
        assert!(d.delays_acks(a));
    }

    #[test]
    fn a_peers_rtt_is_averaged_over_its_samples() {
        let mut d = PeerMemory::default();
        let (a, b): (IpAddr, IpAddr) = (Ipv4Addr::new(198, 18, 0, 2).into(), "2001:2::3".parse().unwrap());
        assert_eq!(d.rtt(a), None);
        d.sample_rtt(a, Duration::from_millis(200));
        assert_eq!(d.rtt(a), Some((Duration::from_millis(200), Duration::from_millis(100))));
        // An outlier (a loss's recovery in one sample) moves it up a step; the rest
        // bring it back.
        let mut d = PeerMemory::default();
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
