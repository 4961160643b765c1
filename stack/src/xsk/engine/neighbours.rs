//! Peers learned from their own frames.
//!
//! smoltcp fills its neighbour cache only from ARP, and asks at most once a
//! second for any address; in shared-address mode ARP belongs to the kernel
//! anyway. So every on-link peer is taught to smoltcp (a synthetic ARP
//! reply) from the frames it sends, again before smoltcp's entry would
//! expire. Off-link sources are never taught: their frames carry a router's
//! MAC.

use std::collections::HashMap;
use std::net::Ipv4Addr;

use smoltcp::time::{Duration, Instant};

use crate::xsk::demux::RxRules;

/// Re-teach smoltcp well before its cache entries expire (60 s).
const REFRESH: Duration = Duration::from_secs(20);

/// Peers remembered at most. smoltcp's cache holds 64 (stack/Cargo.toml)
/// and evicts the entry filled longest ago; this map mirrors it with the same
/// policy and some slack, so "taught recently" means "still in smoltcp's
/// cache". (A bigger map would believe in entries smoltcp has evicted, and
/// then a peer's replies wait for ARP, which smoltcp sends for one address a
/// second: a few unresolvable peers starve everyone else.)
const TAUGHT_MAX: usize = 48;

#[derive(Default)]
pub(super) struct Taught {
    map: HashMap<Ipv4Addr, Instant>,
    /// The peer of the last frame and when it was taught: most frames come
    /// from the peer of the previous one, so the map is skipped for them.
    last: Option<(Ipv4Addr, Instant)>,
}

impl Taught {
    /// `Some(ip)` when a frame from `ip` should teach smoltcp now.
    #[inline]
    pub(super) fn learn(&mut self, ip: Ipv4Addr, now: Instant, rules: &RxRules) -> Option<Ipv4Addr> {
        if let Some((last, t)) = self.last {
            if last == ip && now < t + REFRESH {
                return None;
            }
        }
        if !rules.on_link(ip) {
            return None;
        }
        let teach = match self.map.get(&ip) {
            Some(t) if now < *t + REFRESH => {
                self.last = Some((ip, *t));
                false
            }
            _ => {
                self.note(ip, now);
                true
            }
        };
        teach.then_some(ip)
    }

    pub(super) fn note(&mut self, ip: Ipv4Addr, now: Instant) {
        if self.map.len() >= TAUGHT_MAX && !self.map.contains_key(&ip) {
            if let Some(oldest) = self.map.iter().min_by_key(|(_, t)| **t).map(|(ip, _)| *ip) {
                self.map.remove(&oldest);
            }
        }
        self.map.insert(ip, now);
        self.last = Some((ip, now));
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.map.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules() -> RxRules {
        RxRules { mac: [2, 0, 0, 0, 0, 1], addr: Ipv4Addr::new(198, 18, 0, 1), prefix_len: 16, accept_partial: false }
    }

    #[test]
    fn learns_each_on_link_peer_once_per_refresh() {
        let mut n = Taught::default();
        let (a, b) = (Ipv4Addr::new(198, 18, 0, 2), Ipv4Addr::new(198, 18, 0, 3));
        let t0 = Instant::from_secs(1);
        assert_eq!(n.learn(a, t0, &rules()), Some(a));
        assert_eq!(n.learn(a, t0, &rules()), None);
        assert_eq!(n.learn(b, t0, &rules()), Some(b));
        assert_eq!(n.learn(a, t0, &rules()), None, "a is still fresh after b");
        assert_eq!(n.learn(a, t0 + REFRESH, &rules()), Some(a), "taught again after REFRESH");
        assert_eq!(n.learn(Ipv4Addr::new(203, 0, 113, 9), t0, &rules()), None, "off-link");
    }

    #[test]
    fn bounded_under_a_flood_of_sources() {
        let mut n = Taught::default();
        for i in 0..100_000u32 {
            n.learn(Ipv4Addr::from(0xc612_0000 | (i & 0xffff)), Instant::from_secs(1), &rules());
        }
        assert!(n.len() <= TAUGHT_MAX);
    }
}
