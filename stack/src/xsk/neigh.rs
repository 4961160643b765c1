//! Neighbours in shared-address mode.
//!
//! When the stack shares the kernel's address, ARP stays with the kernel
//! (the steering program passes it), so smoltcp never sees replies to its
//! own requests. Instead the stack (a) learns peers from the frames it
//! receives and (b) looks targets up in the kernel's neighbour table, asking
//! the kernel to resolve them when they are missing. Either way it hands
//! smoltcp a synthetic ARP reply, which smoltcp files in its cache.

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::time::{Duration, Instant};

/// Re-teach smoltcp well before its cache entries expire (60 s).
const REFRESH: Duration = Duration::from_secs(20);

#[derive(Debug)]
pub struct Neighbours {
    ifname: String,
    our_mac: [u8; 6],
    our_ip: Ipv4Addr,
    /// When each peer was last taught to smoltcp.
    taught: HashMap<Ipv4Addr, Instant>,
    /// The peer of the last frame and when it was taught.
    last: Option<(Ipv4Addr, Instant)>,
    /// Targets smoltcp asked for that the kernel has not resolved yet.
    pending: Vec<(Ipv4Addr, Instant)>,
    poker: Option<UdpSocket>,
}

impl Neighbours {
    pub fn new(ifname: &str, our_mac: [u8; 6], our_ip: Ipv4Addr) -> Neighbours {
        Neighbours {
            ifname: ifname.to_string(),
            our_mac,
            our_ip,
            taught: HashMap::new(),
            last: None,
            pending: Vec::new(),
            poker: UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0)).ok(),
        }
    }

    /// A frame from `ip` (at `mac`) arrived: true if smoltcp should be taught it now.
    #[inline]
    pub fn learn_from_frame(&mut self, ip: Ipv4Addr, now: Instant) -> bool {
        // Most frames come from the peer of the previous one: skip the map.
        if let Some((last, t)) = self.last {
            if last == ip && now.duration_since(t) < REFRESH {
                return false;
            }
        }
        let teach = match self.taught.get(&ip) {
            Some(t) if now.duration_since(*t) < REFRESH => false,
            _ => {
                self.taught.insert(ip, now);
                true
            }
        };
        self.last = Some((ip, self.taught[&ip]));
        teach
    }

    /// smoltcp wants `ip`: note it, and ask the kernel to resolve it.
    pub fn want(&mut self, ip: Ipv4Addr, now: Instant) {
        if self.pending.iter().any(|(p, _)| *p == ip) {
            return;
        }
        self.pending.push((ip, now));
        // Any datagram to the target makes the kernel resolve it; port 9 is discard.
        if let Some(s) = &self.poker {
            let _ = s.send_to(&[], SocketAddrV4::new(ip, 9));
        }
    }

    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Looks pending targets up in the kernel's table; returns those found
    /// (with their MACs) and forgets targets older than 3 s.
    pub fn resolve_pending(&mut self, now: Instant, out: &mut Vec<(Ipv4Addr, [u8; 6])>) {
        if self.pending.is_empty() {
            return;
        }
        let table = kernel_table(&self.ifname);
        self.pending.retain(|(ip, since)| {
            if let Some(mac) = table.get(ip) {
                out.push((*ip, *mac));
                false
            } else {
                now.duration_since(*since) < Duration::from_secs(3)
            }
        });
        for (ip, _) in out.iter() {
            self.taught.insert(*ip, now);
        }
    }

    /// An ARP reply "from" `ip` at `mac` to us, for smoltcp to learn from.
    pub fn synth_reply(&self, ip: Ipv4Addr, mac: [u8; 6], out: &mut [u8; 42]) {
        out[0..6].copy_from_slice(&self.our_mac);
        out[6..12].copy_from_slice(&mac);
        out[12..14].copy_from_slice(&[0x08, 0x06]);
        out[14..22].copy_from_slice(&[0, 1, 8, 0, 6, 4, 0, 2]); // Ethernet/IPv4, reply
        out[22..28].copy_from_slice(&mac);
        out[28..32].copy_from_slice(&ip.octets());
        out[32..38].copy_from_slice(&self.our_mac);
        out[38..42].copy_from_slice(&self.our_ip.octets());
    }
}

/// The kernel's IPv4 neighbour table for `ifname`, in this thread's network
/// namespace (complete entries only).
pub fn kernel_table(ifname: &str) -> HashMap<Ipv4Addr, [u8; 6]> {
    let text = std::fs::read_to_string("/proc/thread-self/net/arp").unwrap_or_default();
    parse_proc_arp(&text, ifname)
}

fn parse_proc_arp(text: &str, ifname: &str) -> HashMap<Ipv4Addr, [u8; 6]> {
    let mut m = HashMap::new();
    for line in text.lines().skip(1) {
        let f: Vec<&str> = line.split_whitespace().collect();
        // IP address, HW type, Flags, HW address, Mask, Device
        if f.len() < 6 || f[5] != ifname {
            continue;
        }
        let flags = u32::from_str_radix(f[2].trim_start_matches("0x"), 16).unwrap_or(0);
        if flags & 0x2 == 0 {
            continue; // not ATF_COM: incomplete
        }
        let (Ok(ip), Ok(mac)) = (f[0].parse::<Ipv4Addr>(), xsk_io::ifaddr::parse_mac(f[3])) else { continue };
        m.insert(ip, mac);
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_net_arp() {
        let t = "IP address       HW type     Flags       HW address            Mask     Device\n\
                 198.18.0.2       0x1         0x2         02:00:00:00:00:0b     *        veth0\n\
                 198.18.0.3       0x1         0x0         00:00:00:00:00:00     *        veth0\n\
                 198.18.0.4       0x1         0x2         02:00:00:00:00:0c     *        other\n";
        let m = parse_proc_arp(t, "veth0");
        assert_eq!(m.len(), 1);
        assert_eq!(m[&Ipv4Addr::new(198, 18, 0, 2)], [2, 0, 0, 0, 0, 0x0b]);
    }

    #[test]
    fn learns_each_peer_once_per_refresh() {
        let mut n = Neighbours::new("x", [2, 0, 0, 0, 0, 1], Ipv4Addr::new(198, 18, 0, 1));
        let (a, b) = (Ipv4Addr::new(198, 18, 0, 2), Ipv4Addr::new(198, 18, 0, 3));
        let t0 = Instant::now();
        assert!(n.learn_from_frame(a, t0));
        assert!(!n.learn_from_frame(a, t0));
        assert!(n.learn_from_frame(b, t0));
        assert!(!n.learn_from_frame(a, t0), "a is still fresh after b");
        assert!(n.learn_from_frame(a, t0 + REFRESH), "taught again after REFRESH");
    }

    #[test]
    fn synthetic_reply_is_a_valid_arp_reply() {
        let n = Neighbours::new("x", [2, 0, 0, 0, 0, 1], Ipv4Addr::new(198, 18, 0, 1));
        let mut f = [0u8; 42];
        n.synth_reply(Ipv4Addr::new(198, 18, 0, 2), [2, 0, 0, 0, 0, 2], &mut f);
        let eth = smoltcp::wire::EthernetFrame::new_checked(&f[..]).unwrap();
        let arp = smoltcp::wire::ArpPacket::new_checked(eth.payload()).unwrap();
        let repr = smoltcp::wire::ArpRepr::parse(&arp).unwrap();
        match repr {
            smoltcp::wire::ArpRepr::EthernetIpv4 { operation, source_protocol_addr, target_protocol_addr, .. } => {
                assert_eq!(operation, smoltcp::wire::ArpOperation::Reply);
                assert_eq!(source_protocol_addr, Ipv4Addr::new(198, 18, 0, 2));
                assert_eq!(target_protocol_addr, Ipv4Addr::new(198, 18, 0, 1));
            }
            _ => panic!("not an Ethernet/IPv4 ARP reply"),
        }
    }
}
