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
//! takes goes into an average over all of the peer's connections, and a
//! connection whose own estimate is below it is raised to it (Linux starts a
//! connection from per-destination metrics). Ten thousand connections from
//! one overloaded client each see a few exchanges; alone, each would learn
//! the client's delay from spurious retransmissions of its own. Only samples
//! enter the average, never an estimate raised from it, so one connection's
//! outlier fades as the others' samples come in, and a lossy peer (whose
//! samples are its round trip) is not taken for a slow one.
//!
//! Direct-mapped and fixed in size: a peer that collides is forgotten, which
//! costs at most a few more spurious probes, and no address a network sends
//! can grow it.

use std::net::Ipv4Addr;
use std::time::Duration;

const SLOTS: usize = 256;

/// A peer's round trip over its connections: RFC 6298's averages, in
/// microseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct PeerRtt {
    ip: Ipv4Addr,
    srtt: u32,
    rttvar: u32,
}

pub(super) struct Delayers {
    slots: Box<[Option<Ipv4Addr>; SLOTS]>,
    rtt: Box<[Option<PeerRtt>; SLOTS]>,
}

impl Default for Delayers {
    fn default() -> Self {
        Delayers { slots: Box::new([None; SLOTS]), rtt: Box::new([None; SLOTS]) }
    }
}

impl Delayers {
    fn slot(ip: Ipv4Addr) -> usize {
        // Fibonacci hashing of the address: neighbours in a subnet spread out.
        (u32::from(ip).wrapping_mul(0x9E37_79B9) >> 24) as usize
    }

    pub(super) fn remember(&mut self, ip: Ipv4Addr) {
        self.slots[Self::slot(ip)] = Some(ip);
    }

    pub(super) fn delays(&self, ip: Ipv4Addr) -> bool {
        self.slots[Self::slot(ip)] == Some(ip)
    }

    /// Adds one RTT sample of a connection to `ip` to the peer's averages
    /// (RFC 6298's gains; the first sample of a peer, or of one that took the
    /// slot of another, starts them).
    pub(super) fn sample_rtt(&mut self, ip: Ipv4Addr, sample: Duration) {
        let r = sample.as_micros().min(u32::MAX as u128) as u32;
        let e = &mut self.rtt[Self::slot(ip)];
        match e {
            Some(p) if p.ip == ip => {
                let diff = p.srtt.abs_diff(r);
                p.rttvar = ((u64::from(p.rttvar) * 3 + u64::from(diff)).div_ceil(4)) as u32;
                p.srtt = ((u64::from(p.srtt) * 7 + u64::from(r)).div_ceil(8)) as u32;
            }
            _ => *e = Some(PeerRtt { ip, srtt: r, rttvar: r / 2 }),
        }
    }

    /// The peer's averaged RTT and its variance, if known.
    pub(super) fn rtt(&self, ip: Ipv4Addr) -> Option<(Duration, Duration)> {
        self.rtt[Self::slot(ip)].filter(|p| p.ip == ip).map(|p| {
            (Duration::from_micros(u64::from(p.srtt)), Duration::from_micros(u64::from(p.rttvar)))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_forgets_and_collides_without_growing() {
        let mut d = Delayers::default();
        let a = Ipv4Addr::new(198, 18, 0, 2);
        assert!(!d.delays(a));
        d.remember(a);
        assert!(d.delays(a));
        assert!(!d.delays(Ipv4Addr::new(198, 18, 0, 3)));
        // Many addresses: at most SLOTS remembered, the first one likely gone.
        for i in 0..10_000u32 {
            d.remember(Ipv4Addr::from(0xC612_0000 + i));
            d.sample_rtt(Ipv4Addr::from(0xC612_0000 + i), Duration::from_millis(1));
        }
        assert!(d.slots.iter().filter(|s| s.is_some()).count() <= SLOTS);
        assert!(d.rtt.iter().filter(|s| s.is_some()).count() <= SLOTS);
        d.remember(a);
        assert!(d.delays(a));
    }

    #[test]
    fn a_peers_rtt_is_averaged_over_its_samples() {
        let mut d = Delayers::default();
        let (a, b) = (Ipv4Addr::new(198, 18, 0, 2), Ipv4Addr::new(198, 18, 0, 3));
        assert_eq!(d.rtt(a), None);
        d.sample_rtt(a, Duration::from_millis(200));
        assert_eq!(d.rtt(a), Some((Duration::from_millis(200), Duration::from_millis(100))));
        // One outlier moves the average by an eighth; the rest bring it back.
        let mut d = Delayers::default();
        for _ in 0..50 {
            d.sample_rtt(b, Duration::from_micros(100));
        }
        d.sample_rtt(b, Duration::from_millis(50));
        let (srtt, _) = d.rtt(b).unwrap();
        assert!(srtt > Duration::from_millis(6) && srtt < Duration::from_millis(7), "{srtt:?}");
        for _ in 0..50 {
            d.sample_rtt(b, Duration::from_micros(100));
        }
        assert!(d.rtt(b).unwrap().0 < Duration::from_micros(200), "{:?}", d.rtt(b));
    }
}
