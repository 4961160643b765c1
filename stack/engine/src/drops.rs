//! Every frame the stack does not hand to a socket, counted by reason.
//!
//! A frame that vanishes without a trace is the worst kind of bug to chase
//! (a peer with checksum offload on is black-holed that way if partial
//! checksums are dropped silently), so each
//! reason has a counter in the statistics and the first drop of each reason
//! is logged once, with its cause and, where one exists, the fix.

use std::fmt;

/// Why a received frame was not given to smoltcp, or was refused by it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DropReason {
    /// Shorter than its headers, or header fields that contradict its length.
    Malformed,
    /// TCP, ICMP or IPv4 header checksum wrong (and not a trusted partial checksum).
    BadChecksum,
    /// Source address that no peer can have: unspecified, broadcast,
    /// multicast, loopback, reserved, IPv4-mapped (IPv6), or our own.
    BadSource,
    /// Not addressed to our IPv4 or IPv6 address (or MAC).
    NotForUs,
    /// An IPv4 fragment, or an IPv6 packet with a Fragment header: the stack does not
    /// reassemble.
    Fragment,
    /// An IPv6 packet with an extension header before its TCP or ICMPv6 header (hop-by-hop,
    /// routing, destination options, ...): the stack parses none.
    ExtensionHeader,
    /// Neither IPv4, IPv6 nor ARP, or an IP protocol other than TCP and ICMP (ICMPv6).
    Unsupported,
    /// TCP to a port with no listener and no connection (answered with RST).
    NoSocket,
    /// A SYN beyond the connection limit (answered with RST).
    ConnLimit,
    /// A half-open connection evicted because the SYN backlog was full
    /// (only with SYN cookies off).
    SynBacklog,
    /// An ACK to a listening port, while SYN cookies were in use, that
    /// matched no connection and returned no valid cookie (answered with RST;
    /// one that carries data is dropped without an answer).
    BadCookie,
    /// Dropped by configured fault injection (tests).
    Injected,
    /// An ICMPv6 Packet Too Big or ICMP Fragmentation Needed whose quoted segment is not
    /// one of ours: not from our address, not TCP, no such connection, or a sequence
    /// number outside its unacknowledged data (forged, or late).
    IcmpStray,
    /// A Packet Too Big or Fragmentation Needed with an MTU below the family's minimum
    /// (IPv6 1280, IPv4 68).
    IcmpBadMtu,
}

impl DropReason {
    /// All reasons, in counter order.
    pub const ALL: [DropReason; 14] = [
        DropReason::Malformed,
        DropReason::BadChecksum,
        DropReason::BadSource,
        DropReason::NotForUs,
        DropReason::Fragment,
        DropReason::ExtensionHeader,
        DropReason::Unsupported,
        DropReason::NoSocket,
        DropReason::ConnLimit,
        DropReason::SynBacklog,
        DropReason::BadCookie,
        DropReason::Injected,
        DropReason::IcmpStray,
        DropReason::IcmpBadMtu,
    ];

    /// The counter's name in statistics and JSON.
    pub fn name(self) -> &'static str {
        match self {
            DropReason::Malformed => "malformed",
            DropReason::BadChecksum => "bad_checksum",
            DropReason::BadSource => "bad_source",
            DropReason::NotForUs => "not_for_us",
            DropReason::Fragment => "fragment",
            DropReason::ExtensionHeader => "ext_header",
            DropReason::Unsupported => "unsupported",
            DropReason::NoSocket => "no_socket",
            DropReason::ConnLimit => "conn_limit",
            DropReason::SynBacklog => "syn_backlog",
            DropReason::BadCookie => "bad_cookie",
            DropReason::Injected => "injected",
            DropReason::IcmpStray => "icmp_stray",
            DropReason::IcmpBadMtu => "icmp_bad_mtu",
        }
    }

    /// What causes it and, where there is one, what fixes it.
    fn explain(self) -> &'static str {
        match self {
            DropReason::Malformed => "a frame shorter than its headers or with inconsistent lengths",
            DropReason::BadChecksum => {
                "a TCP, ICMP or IPv4 header checksum did not verify. If the peer uses TX checksum offload on a link the stack \
                 does not trust for it (only veth and virtio_net are), either turn the offload off at the peer \
                 (`ethtool -K <peer-if> tx off`) or accept partial checksums (XskConfig::partial_csum = Accept, \
                 `--partial-csum accept`)"
            }
            DropReason::BadSource => "a source address no peer can have (unspecified, broadcast, multicast, loopback, IPv4-mapped, ours)",
            DropReason::NotForUs => "a frame for another address reached the socket (steering program or promiscuous peer)",
            DropReason::Fragment => {
                "an IPv4 fragment or an IPv6 Fragment header (the stack does not reassemble; peers should use path \
                 MTU discovery)"
            }
            DropReason::ExtensionHeader => {
                "an IPv6 extension header (hop-by-hop, routing, destination options, ...) before TCP or ICMPv6: \
                 the stack handles none"
            }
            DropReason::Unsupported => "a protocol the stack does not speak (only TCP, ICMP echo, ARP and ICMPv6 over IPv4 and IPv6)",
            DropReason::NoSocket => "TCP for a port or connection the stack does not have; answered with RST",
            DropReason::ConnLimit => {
                "a SYN beyond the connection limit; answered with RST (raise --max-conns if the load is legitimate)"
            }
            DropReason::SynBacklog => {
                "the half-open (SYN) backlog was full and SYN cookies are off: the oldest half-open connection \
                 was evicted"
            }
            DropReason::BadCookie => {
                "an ACK matched no connection and returned no valid SYN cookie (a forged or stale ACK, one \
                 more than about two minutes after its SYN-ACK, or a later segment of a connection whose first \
                 one was lost); answered with RST, or dropped unanswered when it carries data"
            }
            DropReason::Injected => "fault injection is configured",
            DropReason::IcmpStray => {
                "a Packet Too Big (ICMPv6) or Fragmentation Needed (ICMP) quoting a segment that is not data of \
                 ours in flight (forged, or about a connection already gone): ignored"
            }
            DropReason::IcmpBadMtu => {
                "a Packet Too Big or Fragmentation Needed with an MTU below the minimum (IPv6 1280, IPv4 68): ignored"
            }
        }
    }
}

impl fmt::Display for DropReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Drops by reason.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct DropStats {
    /// Frames shorter than their headers or with inconsistent lengths.
    pub malformed: u64,
    /// Wrong TCP or IPv4 checksums.
    pub bad_checksum: u64,
    /// Source addresses no peer can have.
    pub bad_source: u64,
    /// Frames for another address.
    pub not_for_us: u64,
    /// IPv4 fragments and IPv6 packets with a Fragment header.
    pub fragment: u64,
    /// IPv6 packets with an extension header the stack does not handle.
    pub ext_header: u64,
    /// Protocols the stack does not speak.
    pub unsupported: u64,
    /// TCP for no socket (answered with RST).
    pub no_socket: u64,
    /// SYNs beyond the connection limit (answered with RST).
    pub conn_limit: u64,
    /// Half-open connections evicted from a full SYN backlog (SYN cookies off).
    pub syn_backlog: u64,
    /// ACKs with no connection and no valid SYN cookie (answered with RST).
    pub bad_cookie: u64,
    /// Dropped by fault injection.
    pub injected: u64,
    /// Too-big ICMP messages quoting no segment of ours in flight.
    pub icmp_stray: u64,
    /// Too-big ICMP messages with an impossible MTU.
    pub icmp_bad_mtu: u64,
}

impl DropStats {
    /// The count for one reason.
    pub fn get(&self, r: DropReason) -> u64 {
        *self.slot_ref(r)
    }

    /// All drops.
    pub fn total(&self) -> u64 {
        DropReason::ALL.iter().map(|r| self.get(*r)).sum()
    }

    /// (name, count) for every reason, for tables and metrics.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        DropReason::ALL.iter().map(|r| (r.name(), self.get(*r)))
    }

    fn slot(&mut self, r: DropReason) -> &mut u64 {
        match r {
            DropReason::Malformed => &mut self.malformed,
            DropReason::BadChecksum => &mut self.bad_checksum,
            DropReason::BadSource => &mut self.bad_source,
            DropReason::NotForUs => &mut self.not_for_us,
            DropReason::Fragment => &mut self.fragment,
            DropReason::ExtensionHeader => &mut self.ext_header,
            DropReason::Unsupported => &mut self.unsupported,
            DropReason::NoSocket => &mut self.no_socket,
            DropReason::ConnLimit => &mut self.conn_limit,
            DropReason::SynBacklog => &mut self.syn_backlog,
            DropReason::BadCookie => &mut self.bad_cookie,
            DropReason::Injected => &mut self.injected,
            DropReason::IcmpStray => &mut self.icmp_stray,
            DropReason::IcmpBadMtu => &mut self.icmp_bad_mtu,
        }
    }

    fn slot_ref(&self, r: DropReason) -> &u64 {
        match r {
            DropReason::Malformed => &self.malformed,
            DropReason::BadChecksum => &self.bad_checksum,
            DropReason::BadSource => &self.bad_source,
            DropReason::NotForUs => &self.not_for_us,
            DropReason::Fragment => &self.fragment,
            DropReason::ExtensionHeader => &self.ext_header,
            DropReason::Unsupported => &self.unsupported,
            DropReason::NoSocket => &self.no_socket,
            DropReason::ConnLimit => &self.conn_limit,
            DropReason::SynBacklog => &self.syn_backlog,
            DropReason::BadCookie => &self.bad_cookie,
            DropReason::Injected => &self.injected,
            DropReason::IcmpStray => &self.icmp_stray,
            DropReason::IcmpBadMtu => &self.icmp_bad_mtu,
        }
    }

    /// Counts one drop; the first of each reason is logged with its cause.
    #[inline]
    pub fn count(&mut self, r: DropReason) {
        let c = self.slot(r);
        *c += 1;
        if *c == 1 {
            first_drop(r);
        }
    }
}

#[cold]
fn first_drop(r: DropReason) {
    // Expected in ordinary operation (no_socket: a late segment after close)
    // or configured: informational. The rest point at a setup problem or an
    // attack: a warning.
    match r {
        DropReason::NoSocket | DropReason::Injected => {
            tracing::info!("first dropped frame ({r}): {}; later ones are only counted", r.explain())
        }
        _ => tracing::warn!("first dropped frame ({r}): {}; later ones are only counted", r.explain()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reason_has_its_own_counter() {
        let mut d = DropStats::default();
        for (i, r) in DropReason::ALL.iter().enumerate() {
            for _ in 0..=i {
                d.count(*r);
            }
        }
        for (i, r) in DropReason::ALL.iter().enumerate() {
            assert_eq!(d.get(*r), i as u64 + 1, "{r}");
        }
        let names: std::collections::HashSet<_> = d.iter().map(|(n, _)| n).collect();
        assert_eq!(names.len(), DropReason::ALL.len());
        // The JSON carries every counter under its name.
        let v = serde_json_names(&d);
        for r in DropReason::ALL {
            assert!(v.contains(&r.name().to_string()), "{r} missing from {v:?}");
        }
    }

    fn serde_json_names(d: &DropStats) -> Vec<String> {
        // A tiny serializer check without pulling serde_json into the library:
        // the derive must name each field after DropReason::name.
        let dbg = format!("{d:?}");
        DropReason::ALL.iter().filter(|r| dbg.contains(&format!("{}:", r.name()))).map(|r| r.name().to_string()).collect()
    }
}
