//! Peers known to delay their ACKs, remembered across connections.
//!
//! A connection learns that its peer holds the ACK of a lone segment when a
//! tail-loss probe turns out spurious (smoltcp raises that connection's
//! allowance to `Recovery::ack_delay_max`). A new connection to the same
//! address starts from what the last one learned, so that workloads that
//! open a connection per request (or a pool of them) pay for the lesson
//! once per peer, not once per connection. Direct-mapped and fixed in size:
//! a peer that collides is forgotten, which costs at most one more spurious
//! probe, and no address a network sends can grow it.

use std::net::IpAddr;

const SLOTS: usize = 256;

pub(super) struct Delayers {
    slots: Box<[Option<IpAddr>; SLOTS]>,
}

impl Default for Delayers {
    fn default() -> Self {
        Delayers { slots: Box::new([None; SLOTS]) }
    }
}

impl Delayers {
    fn slot(ip: IpAddr) -> usize {
        let a = match ip {
            IpAddr::V4(a) => u32::from(a),
            IpAddr::V6(a) => crate::demux::fold_v6(a),
        };
        // Fibonacci hashing of the address: neighbours in a subnet spread out.
        (a.wrapping_mul(0x9E37_79B9) >> 24) as usize
    }

    pub(super) fn remember(&mut self, ip: IpAddr) {
        self.slots[Self::slot(ip)] = Some(ip);
    }

    pub(super) fn delays(&self, ip: IpAddr) -> bool {
        self.slots[Self::slot(ip)] == Some(ip)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    #[test]
    fn remembers_forgets_and_collides_without_growing() {
        let mut d = Delayers::default();
        let a = IpAddr::from(Ipv4Addr::new(198, 18, 0, 2));
        assert!(!d.delays(a));
        d.remember(a);
        assert!(d.delays(a));
        assert!(!d.delays(Ipv4Addr::new(198, 18, 0, 3).into()));
        let a6: IpAddr = "2001:2::2".parse().unwrap();
        d.remember(a6);
        assert!(d.delays(a6) && d.delays(a));
        assert!(!d.delays("2001:2::3".parse().unwrap()));
        // Many addresses: at most SLOTS remembered, the first one likely gone.
        for i in 0..10_000u32 {
            d.remember(Ipv4Addr::from(0xC612_0000 + i).into());
        }
        assert!(d.slots.iter().filter(|s| s.is_some()).count() <= SLOTS);
        d.remember(a);
        assert!(d.delays(a));
    }
}
