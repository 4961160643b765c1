//! Peers learned from their own frames.
//!
//! smoltcp fills its neighbour cache only from ARP, and sends ARP for one
//! address a second at most; in shared-address mode ARP belongs to the
//! kernel anyway (see `xsk/arp.rs`). So on-link peers are taught to smoltcp
//! (`Interface::fill_neighbor`, patch `neighbor-cache`) from the frames they
//! send. Off-link sources are never taught: their frames carry a router's MAC.
//!
//! A peer is taught again whenever the source changes from one frame to the
//! next, not from a memo of whom smoltcp "still has": its cache (1,024
//! entries, hashed) evicts on its own once a hash window is full, and a memo
//! that believed in an evicted entry left the peer's answers waiting for ARP
//! (`more_peers_than_the_neighbour_cache_holds_are_taught_again`). Back-to-back
//! frames from one peer, the common case under load, teach once.

use std::net::IpAddr;

use smoltcp::time::{Duration, Instant};

use crate::demux::RxRules;

/// Re-teach the same peer well before smoltcp's entry expires (60 s).
const REFRESH: Duration = Duration::from_secs(20);

#[derive(Default)]
pub(super) struct Learned {
    /// The peer of the last frame and when it was taught.
    last: Option<(IpAddr, Instant)>,
}

impl Learned {
    /// `Some(ip)` when a frame from `ip` should teach smoltcp now.
    #[inline]
    pub(super) fn learn(&mut self, ip: IpAddr, now: Instant, rules: &RxRules) -> Option<IpAddr> {
        if let Some((last, t)) = self.last {
            if last == ip && now < t + REFRESH {
                return None;
            }
        }
        if !rules.on_link_ip(ip) {
            return None;
        }
        self.note(ip, now);
        Some(ip)
    }

    pub(super) fn note(&mut self, ip: IpAddr, now: Instant) {
        self.last = Some((ip, now));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn rules() -> RxRules {
        RxRules {
            mac: [2, 0, 0, 0, 0, 1],
            addr: Ipv4Addr::new(198, 18, 0, 1),
            prefix_len: 16,
            accept_partial: false,
            addr6: Some("2001:2::1".parse().unwrap()),
            prefix6_len: 64,
        }
    }

    #[test]
    fn teaches_on_every_change_of_peer_and_after_refresh() {
        let mut n = Learned::default();
        let (a, b) = (IpAddr::from(Ipv4Addr::new(198, 18, 0, 2)), IpAddr::from(Ipv4Addr::new(198, 18, 0, 3)));
        let t0 = Instant::from_secs(1);
        assert_eq!(n.learn(a, t0, &rules()), Some(a));
        assert_eq!(n.learn(a, t0, &rules()), None, "back-to-back frames teach once");
        assert_eq!(n.learn(b, t0, &rules()), Some(b));
        assert_eq!(n.learn(a, t0, &rules()), Some(a), "a may have been evicted meanwhile");
        assert_eq!(n.learn(a, t0 + REFRESH, &rules()), Some(a), "taught again after REFRESH");
        assert_eq!(n.learn(Ipv4Addr::new(203, 0, 113, 9).into(), t0, &rules()), None, "off-link");
        let c: IpAddr = "2001:2::5".parse().unwrap();
        assert_eq!(n.learn(c, t0, &rules()), Some(c), "an IPv6 peer on our subnet");
        assert_eq!(n.learn("2001:2:0:1::5".parse().unwrap(), t0, &rules()), None, "another IPv6 subnet");
    }
}
