//! Neighbours in shared-address mode: the kernel's table.
//!
//! When the stack shares the kernel's address, ARP stays with the kernel
//! (the steering program passes it), so smoltcp never sees replies to its
//! own requests. The engine learns peers from the frames they send; for the
//! targets smoltcp asks for (the gateway, a peer that has not spoken yet)
//! this module looks in the kernel's neighbour table, asking the kernel to
//! resolve them when they are missing.

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::time::{Duration, Instant};

#[derive(Debug)]
pub struct Neighbours {
    ifname: String,
    /// Targets smoltcp asked for that the kernel has not resolved yet.
    pending: Vec<(Ipv4Addr, Instant)>,
    poker: Option<UdpSocket>,
}

impl Neighbours {
    pub fn new(ifname: &str) -> Neighbours {
        Neighbours {
            ifname: ifname.to_string(),
            pending: Vec::new(),
            poker: UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0)).ok(),
        }
    }

    /// smoltcp wants `ip`: note it, and ask the kernel to resolve it.
    pub fn want(&mut self, ip: Ipv4Addr, now: Instant) {
        if self.pending.len() >= 64 || self.pending.iter().any(|(p, _)| *p == ip) {
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


}

/// The gateway of the kernel's IPv4 default route through `ifname`, in this
/// thread's network namespace.
pub fn kernel_default_gateway(ifname: &str) -> Option<std::net::Ipv4Addr> {
    let text = std::fs::read_to_string("/proc/thread-self/net/route").ok()?;
    parse_default_route(&text, ifname)
}

fn parse_default_route(text: &str, ifname: &str) -> Option<std::net::Ipv4Addr> {
    for line in text.lines().skip(1) {
        let f: Vec<&str> = line.split_whitespace().collect();
        // Iface Destination Gateway Flags ... Mask: addresses in host order hex.
        if f.len() < 8 || f[0] != ifname || f[1] != "00000000" || f[7] != "00000000" {
            continue;
        }
        let gw = u32::from_str_radix(f[2], 16).ok()?;
        if gw != 0 {
            // The kernel prints the address's bytes as a host-order integer.
            return Some(std::net::Ipv4Addr::from(gw.to_ne_bytes()));
        }
    }
    None
}

#[cfg(test)]
mod route_tests {
    #[test]
    fn parses_the_default_route() {
        let t = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n\
                 veth0\t00000000\t010012C6\t0003\t0\t0\t0\t00000000\t0\t0\t0\n\
                 veth0\t000012C6\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n";
        assert_eq!(super::parse_default_route(t, "veth0"), Some(std::net::Ipv4Addr::new(198, 18, 0, 1)));
        assert_eq!(super::parse_default_route(t, "other"), None);
    }
}
