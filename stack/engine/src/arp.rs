//! The two ARP frames the engine reads or writes itself: the reply it feeds
//! smoltcp for a neighbour learned some other way (from a peer's own frames,
//! or from the kernel's table in the driver's shared-address mode), and the
//! target of a request smoltcp sends.

use std::net::Ipv4Addr;

/// An Ethernet/IPv4 ARP frame (14 + 28 bytes): all smoltcp sends.
pub const FRAME_LEN: usize = 42;

/// A synthesised ARP reply from `ip` at `mac` to us, for smoltcp's
/// neighbour cache.
pub fn reply(our_mac: [u8; 6], our_ip: Ipv4Addr, mac: [u8; 6], ip: Ipv4Addr) -> [u8; FRAME_LEN] {
    let mut f = [0u8; FRAME_LEN];
    f[0..6].copy_from_slice(&our_mac);
    f[6..12].copy_from_slice(&mac);
    f[12..14].copy_from_slice(&[0x08, 0x06]);
    f[14..22].copy_from_slice(&[0, 1, 8, 0, 6, 4, 0, 2]);
    f[22..28].copy_from_slice(&mac);
    f[28..32].copy_from_slice(&ip.octets());
    f[32..38].copy_from_slice(&our_mac);
    f[38..42].copy_from_slice(&our_ip.octets());
    f
}

/// The target of an ARP request frame.
pub fn request_target(f: &[u8]) -> Option<Ipv4Addr> {
    (is_arp(f) && f[20..22] == [0, 1]).then(|| Ipv4Addr::new(f[38], f[39], f[40], f[41]))
}

/// Whether `f` is an Ethernet ARP frame at least [`FRAME_LEN`] long.
pub fn is_arp(f: &[u8]) -> bool {
    f.len() >= FRAME_LEN && f[12..14] == [0x08, 0x06]
}
