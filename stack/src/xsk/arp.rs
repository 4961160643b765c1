//! Shared-address mode's ARP, in one place.
//!
//! Why shared mode needs this: the stack and the kernel then own one IPv4
//! address on one interface, and ARP for it stays with the kernel (the
//! steering program passes ARP frames to it), since the kernel's own
//! sockets on that address need it. smoltcp, though, fills its neighbour
//! cache only from ARP replies to itself, which therefore never arrive, and
//! its requests would only add a second asker on the wire. So, for the
//! targets smoltcp wants (the gateway, a peer that has not spoken yet):
//!
//! 1. interception: [`Intercept`], a wrapper around the engine's link, keeps
//!    smoltcp's ARP frames off the wire and notes the targets;
//! 2. resolution: [`SharedArp::resolve`] looks the targets up in the
//!    kernel's neighbour table (`/proc/thread-self/net/arp`), asking the
//!    kernel to resolve missing ones with an empty UDP datagram;
//! 3. the answer: the driver teaches the engine what the kernel found
//!    (`Engine::add_neighbour`), which fills smoltcp's neighbour cache
//!    (`Interface::fill_neighbor`, our smoltcp patch `neighbor-cache`).
//!
//! IPv6 likewise (the kernel keeps neighbour discovery for a shared address, and
//! the answers to smoltcp's solicitations would reach the kernel, not it): its
//! neighbour solicitations are kept off the wire, and the targets looked up in
//! the kernel's IPv6 table (`neigh6.rs`, rtnetlink).
//!
//! Peers that send us frames need none of this: the engine learns them from
//! their frames (`stack-engine`, `engine/neighbours.rs`, both modes), the same way.
//! In dedicated mode the stack owns its address and smoltcp does its own ARP
//! (the steering program brings it the replies): the wrapper passes
//! everything through.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use stack_engine::smoltcp::phy;

use stack_engine::arp::{is_arp, request_target, FRAME_LEN};
use stack_engine::{Link, RxFrames};

/// Targets asked for at most, waiting for the kernel.
const MAX_PENDING: usize = 64;

/// How long the kernel gets to resolve a target before it is forgotten
/// (smoltcp asks again if it still wants it).
const RESOLVE_FOR: Duration = Duration::from_secs(3);

/// A neighbour solicitation as smoltcp sends it: Ethernet, IPv6, the ICMPv6 message
/// (24 bytes) and its source link-layer address option (8).
const NS_FRAME_LEN: usize = 14 + 40 + 32;

/// The target of a neighbour solicitation frame (ICMPv6 type 135, hop limit 255).
fn solicitation_target(f: &[u8]) -> Option<Ipv6Addr> {
    let ns = f.len() >= NS_FRAME_LEN && f[12..14] == [0x86, 0xdd] && f[20] == 58 && f[21] == 255 && f[54] == 135;
    ns.then(|| Ipv6Addr::from(<[u8; 16]>::try_from(&f[62..78]).unwrap_or_default()))
}

/// The ARP requests and neighbour solicitations smoltcp sent since the driver last looked:
/// their targets, and how many were kept off the wire.
#[derive(Debug, Default)]
struct InterceptedRequests {
    targets: Vec<IpAddr>,
    /// ARP frames and neighbour solicitations kept off the wire.
    intercepted: u64,
}

/// One driver's shared-mode ARP: what smoltcp wants, what the kernel is
/// resolving.
#[derive(Debug)]
pub(crate) struct SharedArp {
    /// Whether smoltcp's ARP frames are intercepted (shared mode).
    intercept: bool,
    /// Whether its neighbour solicitations may be too (the engine has an IPv6
    /// address): only then are frames of their length looked at.
    v6: bool,
    requests: InterceptedRequests,
    ifname: String,
    /// Targets the kernel has not resolved yet, since when.
    pending: Vec<(IpAddr, Instant)>,
    /// Send the datagram that makes the kernel resolve a target, by family.
    resolve_socket: Option<UdpSocket>,
    resolve_socket6: Option<UdpSocket>,
}

impl SharedArp {
    /// For `ifname`; `intercept` in shared-address mode, `v6` when the engine
    /// has an IPv6 address.
    pub(crate) fn new(ifname: &str, intercept: bool, v6: bool) -> SharedArp {
        SharedArp {
            intercept,
            v6,
            requests: InterceptedRequests { targets: Vec::with_capacity(MAX_PENDING), intercepted: 0 },
            ifname: ifname.to_string(),
            pending: Vec::new(),
            resolve_socket: UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0)).ok(),
            resolve_socket6: None,
        }
    }

    /// The engine's link with smoltcp's ARP kept off the wire (shared mode);
    /// a pass-through otherwise.
    pub(crate) fn wrap<L: Link>(&mut self, inner: L) -> Intercept<'_, L> {
        Intercept { inner, requests: self.intercept.then_some(&mut self.requests), v6: self.v6 }
    }

    /// ARP frames and neighbour solicitations kept off the wire so far.
    pub(crate) fn intercepted(&self) -> u64 {
        self.requests.intercepted
    }

    /// Whether the kernel is still resolving a target.
    pub(crate) fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Nothing to resolve and nothing waiting: [`resolve`](Self::resolve)
    /// would do nothing (the driver then reads no clock for it).
    pub(crate) fn idle(&self) -> bool {
        self.requests.targets.is_empty() && self.pending.is_empty()
    }

    /// Passes the targets of smoltcp's new requests to the kernel, and puts into `found` the
    /// targets the kernel's table now has (with their MACs).
    pub(crate) fn resolve(&mut self, now: Instant, found: &mut Vec<(IpAddr, [u8; 6])>) {
        if self.requests.targets.is_empty() && self.pending.is_empty() {
            return; // the common case: called once per loop iteration
        }
        let mut targets = std::mem::take(&mut self.requests.targets);
        for ip in targets.drain(..) {
            self.want(ip, now);
        }
        self.requests.targets = targets;
        if self.pending.is_empty() {
            return;
        }
        let table = kernel_table(&self.ifname);
        let table6 = if self.pending.iter().any(|(ip, _)| ip.is_ipv6()) {
            super::neigh6::kernel_table6(&self.ifname).unwrap_or_default()
        } else {
            HashMap::new()
        };
        self.pending.retain(|(ip, since)| {
            let mac = match ip {
                IpAddr::V4(a) => table.get(a),
                IpAddr::V6(a) => table6.get(a),
            };
            if let Some(mac) = mac {
                found.push((*ip, *mac));
                false
            } else {
                now.duration_since(*since) < RESOLVE_FOR
            }
        });
    }

    /// smoltcp wants `ip`: note it, and ask the kernel to resolve it.
    fn want(&mut self, ip: IpAddr, now: Instant) {
        if self.pending.len() >= MAX_PENDING || self.pending.iter().any(|(p, _)| *p == ip) {
            return;
        }
        self.pending.push((ip, now));
        if ip.is_ipv6() && self.resolve_socket6.is_none() {
            self.resolve_socket6 = UdpSocket::bind((Ipv6Addr::UNSPECIFIED, 0)).ok();
        }
        // Any datagram to the target makes the kernel resolve it; port 9 is discard.
        let socket = if ip.is_ipv6() { &self.resolve_socket6 } else { &self.resolve_socket };
        if let Some(s) = socket {
            let _ = s.send_to(&[], SocketAddr::new(ip, 9));
        }
    }
}

/// The engine's link with smoltcp's ARP frames taken out (shared mode).
pub(crate) struct Intercept<'a, L> {
    inner: L,
    requests: Option<&'a mut InterceptedRequests>,
    v6: bool,
}

impl<L: Link> Link for Intercept<'_, L> {
    type Tx<'t>
        = InterceptTx<'t, L::Tx<'t>>
    where
        Self: 't;

    fn tx(&mut self) -> Self::Tx<'_> {
        InterceptTx { inner: self.inner.tx(), requests: self.requests.as_deref_mut(), v6: self.v6 }
    }

    fn tx_ready(&mut self) -> bool {
        self.inner.tx_ready()
    }

    fn mtu(&self) -> usize {
        self.inner.mtu()
    }

    fn csum_offload(&self) -> bool {
        self.inner.csum_offload()
    }
}

impl<L: RxFrames> RxFrames for Intercept<'_, L> {
    type Frame = L::Frame;
    fn release(&mut self, f: L::Frame) {
        self.inner.release(f)
    }
}

/// A frame on its way out: an ARP frame or a neighbour solicitation stops here.
pub(crate) struct InterceptTx<'a, T> {
    inner: T,
    requests: Option<&'a mut InterceptedRequests>,
    v6: bool,
}

impl<T: phy::TxToken> phy::TxToken for InterceptTx<'_, T> {
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
        // Only a frame of ARP's length can be ARP (TCP frames are longer), and one of a
        // solicitation's a solicitation (an IPv6 pure ACK with timestamps has its length
        // too): built on the stack first, it reaches the link only if it is not. Without
        // an IPv6 address smoltcp solicits nothing, and such frames go straight out.
        let Some(requests) = self.requests.filter(|_| len == FRAME_LEN || (self.v6 && len == NS_FRAME_LEN)) else {
            return self.inner.consume(len, f);
        };
        let mut buf = [0u8; NS_FRAME_LEN];
        let frame = &mut buf[..len];
        let r = f(frame);
        let target = if is_arp(frame) { Some(request_target(frame).map(IpAddr::V4)) } else { solicitation_target(frame).map(|t| Some(t.into())) };
        let Some(target) = target else {
            self.inner.consume(len, |out| out.copy_from_slice(frame));
            return r;
        };
        if let Some(ip) = target {
            if requests.targets.len() < MAX_PENDING {
                requests.targets.push(ip);
            }
        }
        requests.intercepted += 1;
        r
    }
}

/// The kernel's IPv4 neighbour table for `ifname`, in this thread's network
/// namespace (complete entries only).
fn kernel_table(ifname: &str) -> HashMap<Ipv4Addr, [u8; 6]> {
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
        let (Ok(ip), Ok(mac)) = (f[0].parse::<Ipv4Addr>(), xsk_device::ifaddr::parse_mac(f[3])) else { continue };
        m.insert(ip, mac);
    }
    m
}

/// The gateway of the kernel's IPv4 default route through `ifname`, in this
/// thread's network namespace: shared mode follows the kernel's routing.
pub(crate) fn kernel_default_gateway(ifname: &str) -> Option<Ipv4Addr> {
    let text = std::fs::read_to_string("/proc/thread-self/net/route").ok()?;
    parse_default_route(&text, ifname)
}

fn parse_default_route(text: &str, ifname: &str) -> Option<Ipv4Addr> {
    for line in text.lines().skip(1) {
        let f: Vec<&str> = line.split_whitespace().collect();
        // Iface Destination Gateway Flags ... Mask: addresses in host order hex.
        if f.len() < 8 || f[0] != ifname || f[1] != "00000000" || f[7] != "00000000" {
            continue;
        }
        let gw = u32::from_str_radix(f[2], 16).ok()?;
        if gw != 0 {
            // The kernel prints the address's bytes as a host-order integer.
            return Some(Ipv4Addr::from(gw.to_ne_bytes()));
        }
    }
    None
}

/// The gateway of the kernel's IPv6 default route through `ifname`, in this thread's
/// network namespace.
pub(crate) fn kernel_default_gateway6(ifname: &str) -> Option<Ipv6Addr> {
    let text = std::fs::read_to_string("/proc/thread-self/net/ipv6_route").ok()?;
    parse_default_route6(&text, ifname)
}

fn parse_default_route6(text: &str, ifname: &str) -> Option<Ipv6Addr> {
    const ZERO: &str = "00000000000000000000000000000000";
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        // Destination, its prefix length, source, its prefix length, next hop, metric,
        // reference count, use, flags, device: hex, no separators.
        if f.len() < 10 || f[9] != ifname || f[0] != ZERO || f[1] != "00" || f[4] == ZERO {
            continue;
        }
        if let Ok(gw) = u128::from_str_radix(f[4], 16) {
            return Some(Ipv6Addr::from(gw));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use stack_engine::testing::{frames, MemLink};

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
    fn parses_the_default_route() {
        let t = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n\
                 veth0\t00000000\t010012C6\t0003\t0\t0\t0\t00000000\t0\t0\t0\n\
                 veth0\t000012C6\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n";
        assert_eq!(parse_default_route(t, "veth0"), Some(Ipv4Addr::new(198, 18, 0, 1)));
        assert_eq!(parse_default_route(t, "other"), None);
    }

    #[test]
    fn parses_the_ipv6_default_route() {
        let t = "20010002000000050000000000000000 40 00000000000000000000000000000000 00 00000000000000000000000000000000 00000100 00000001 00000000 00000001     veth0\n\
                 00000000000000000000000000000000 00 00000000000000000000000000000000 00 20010002000000050000000000000002 00000400 00000001 00000000 00000003     veth0\n\
                 00000000000000000000000000000000 00 00000000000000000000000000000000 00 00000000000000000000000000000000 ffffffff 00000001 00000000 00200200       lo\n";
        assert_eq!(parse_default_route6(t, "veth0"), Some("2001:2:0:5::2".parse().unwrap()));
        assert_eq!(parse_default_route6(t, "lo"), None, "an unreachable route has no next hop");
        assert_eq!(parse_default_route6(t, "other"), None);
    }

    /// Writes `frame` through `link` as smoltcp would.
    fn send(link: &mut impl Link, frame: &[u8]) {
        use stack_engine::smoltcp::phy::TxToken;
        link.tx().consume(frame.len(), |b| b.copy_from_slice(frame));
    }

    #[test]
    fn shared_mode_keeps_arp_off_the_wire_and_notes_the_target() {
        let (us, peer) = (Ipv4Addr::new(198, 18, 0, 1), Ipv4Addr::new(198, 18, 0, 2));
        // From us (sender) to everyone, asking for `peer` (target).
        let request = frames::arp(1, [2, 0, 0, 0, 0, 1], [0xff; 6], us, peer);
        // An ICMP echo reply without payload is as long as an ARP frame.
        let mut icmp = [0u8; FRAME_LEN];
        icmp[12..14].copy_from_slice(&[0x08, 0x00]);
        icmp[14] = 0x45;
        for intercept in [true, false] {
            let mut arp = SharedArp::new("lo", intercept, true);
            let mut mem = MemLink::new();
            let mut link = arp.wrap(&mut mem);
            send(&mut link, &request);
            send(&mut link, &icmp);
            send(&mut link, &[7u8; 60]);
            let on_wire: Vec<_> = mem.out.iter().map(|f| f.len()).collect();
            if intercept {
                assert_eq!(on_wire, [FRAME_LEN, 60]);
                assert!(mem.out[0] == icmp, "the non-ARP frame reaches the link unchanged");
                assert_eq!((arp.intercepted(), arp.requests.targets.clone()), (1, vec![IpAddr::V4(peer)]));
            } else {
                assert_eq!(on_wire, [FRAME_LEN, FRAME_LEN, 60]);
                assert_eq!(arp.intercepted(), 0);
            }
        }
    }

    /// The engine's own neighbour solicitation (dedicated-mode smoltcp asking for an IPv6
    /// peer it has not heard from) stops at the link in shared mode, its target noted; an
    /// IPv6 TCP frame of the same length goes out unchanged.
    #[test]
    fn shared_mode_keeps_neighbour_solicitations_off_the_wire() {
        use stack_engine::testing::{config, MemTransport, Pair};
        let mut t = MemTransport::new(config(Pair::A));
        t.connect(std::net::SocketAddrV6::new(Pair::B6, 7, 0, 0)).unwrap();
        t.egress();
        let ns = t.take_sent().into_iter().find(|f| solicitation_target(f).is_some()).expect("a neighbour solicitation");
        assert_eq!((ns.len(), solicitation_target(&ns)), (NS_FRAME_LEN, Some(Pair::B6)));
        let spec = frames::TcpSpec { flags: 0x10, options: &[1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2], ..frames::TcpSpec::default() };
        let ack = frames::tcp6(&spec, Pair::A6, Pair::B6);
        assert_eq!(ack.len(), NS_FRAME_LEN, "a pure ACK with timestamps is as long");
        let mut arp = SharedArp::new("lo", true, true);
        let mut mem = MemLink::new();
        let mut link = arp.wrap(&mut mem);
        send(&mut link, &ns);
        send(&mut link, &ack);
        assert_eq!(mem.out, vec![ack.clone()]);
        assert_eq!((arp.intercepted(), arp.requests.targets.clone()), (1, vec![IpAddr::V6(Pair::B6)]));
        // Without an IPv6 address no frame of that length is looked at.
        let mut arp = SharedArp::new("lo", true, false);
        let mut mem = MemLink::new();
        let mut link = arp.wrap(&mut mem);
        send(&mut link, &ack);
        assert_eq!((mem.out, arp.intercepted()), (vec![ack], 0));
    }
}
